"""The Hessian's refusals in the user's terms: forward mode over s2sad's own gradient code
stops at a line of generated code, which the user never wrote; the message names the user's line
that code came from, and what to do instead."""

from __future__ import annotations

import inspect
import linecache
import re

from .errors import S2SADError

_CENTRAL = (
    "{}; take central differences of s2sad.grad(f) instead: (grad(x + h*e) - grad(x - h*e)) / "
    "(2*h) for each basis direction e"
)


def in_users_terms(exc: S2SADError, generated, f) -> S2SADError:
    """A refusal met in s2sad's own gradient code, restated at the user's line it came from:
    the generated names in it are nothing the user can change."""
    if not str(exc.file or "").startswith("<s2sad ") or exc.line is None:
        return exc
    try:
        lines = inspect.getsource(generated).splitlines()[: exc.line]
        code = f.__code__
    except (OSError, TypeError, AttributeError):
        return exc
    line, source = code.co_firstlineno, None
    for text in reversed(lines):  # the `# line N: <source>` comment heading the block
        found = _LINE_COMMENT.match(text)
        if found:
            source = found.group(2)
            user = "".join(linecache.getline(code.co_filename, int(found.group(1))).split())
            if user.startswith("".join(source.split())[:16]):  # (not a helper's other file)
                line = int(found.group(1))
            break
    what = exc.what.splitlines()[0] if exc.what else type(exc).__name__
    return type(exc)(
        f"s2sad.hessian({f.__qualname__}) cannot apply forward mode to the gradient code s2sad "
        f"writes for this line: {what}",
        file=code.co_filename,
        line=line,
        source=source,
        hint=(
            exc.hint
            if what.startswith("no third derivatives")  # f calls a gradient s2sad made
            else _CENTRAL.format(
                "a function given only a reverse-mode rule (s2sad.register_vjp, custom_vjp) has "
                "no tangent rule, and a Hessian is forward mode over the gradient code, which "
                "calls that rule (s2sad takes second derivatives no other way)"
                if what.startswith("no forward-mode (jvp) rule")
                else "forward mode does not read all of s2sad's own gradient code yet (loops "
                "writing array elements are where it stops most often)"
            )
        ),
    )


_LINE_COMMENT = re.compile(r"\s*# line (\d+): (.*)$")
