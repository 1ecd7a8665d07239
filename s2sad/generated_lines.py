"""Generated code's lines in the user's terms: the `# line N: code` comment above a generated
line names the user's line it comes from. The jit path's messages (numba_failures.py) and Python
mode's errors (a note naming the user's line, `user_lines`) read it here."""

from __future__ import annotations

import ast
import contextlib
import linecache
import re

from .errors import S2SADError

# `# line N: code`, or `# helper, line N: code` for a line of a function inlined into the code
_COMMENT = re.compile(r"# (?:([A-Za-z_][\w.]*), )?line (\d+): (.*)$")


def comment_parts(comment: str) -> tuple | None:
    """(`line N` or `line N of helper`, code) of a generated comment naming a user's line (an
    inlined function's line is its own file's), else None."""
    found = _COMMENT.match(comment.strip())
    if found is None:
        return None
    func, number, code = found.groups()
    return f"line {number}{f' of {func}' if func else ''}", code


def described(comment: str) -> str | None:
    """`line N (`code`)` (or `line N of helper (`code`)`) for a generated comment, else None."""
    parts = comment_parts(comment)
    return f"{parts[0]} (`{parts[1]}`)" if parts else None


def user_line(lines: list, at: int) -> str:
    """`line N (`code`)`: the user's line the generated code's comment above `at` quotes."""
    for text in reversed(lines[: at + 1]):
        told = described(text)
        if told is not None:
            return told
    return f"generated line {at + 1}"


def raised_at(exc, filename: str) -> str | None:
    """`FILE line N (`code`)`: the user's line of the generated statement in `filename` (the
    deepest frame of it) that raised `exc`."""
    tb, at = exc.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            at = tb.tb_lineno
        tb = tb.tb_next
    lines = linecache.getlines(filename)
    if at is None or not lines:
        return None
    found = re.search(r" of (.+):\d+(?: #\d+)?>$", filename)  # (#2: another source's)
    file = found.group(1) if found else "the function"
    return f"{file} {user_line(lines, at - 1)}"


def note_user_line(exc, python_function) -> None:
    """Python mode's error raised in generated code (`x[i + 1]` one past the end): a note (PEP
    678) naming the user's file, line and code the generated line comes from, which the
    traceback, at the generated line, does not. s2sad's own errors name theirs already."""
    if isinstance(exc, S2SADError) or any(_NOTED in n for n in getattr(exc, "__notes__", ())):
        return
    code = getattr(python_function, "__code__", None)
    where = raised_at(exc, code.co_filename) if code is not None else None
    if where is not None:
        exc.add_note(f"{_NOTED} {where}")


_NOTED = "raised in the code s2sad generated from"


@contextlib.contextmanager
def user_lines(python_function):
    """Python mode's call of generated code: an error it raises noted with the user's line."""
    try:
        yield
    except Exception as exc:
        note_user_line(exc, python_function)
        raise


def placed(comment: str, source: str) -> str:
    """` (FILE line N: `code`)`: where a message's reason is, from the generated code's comment
    `line N: code`, in one pair of brackets (the file where the source's docstring names it)."""
    number, _, code = comment.partition(": ")
    origin = re.search(r"\((\S+\.py):\d+\)", source)
    return f" ({origin.group(1) + ' ' if origin else ''}{number}: `{code[:120]}`)"


def comment_above(lines: list, at: int) -> str | None:
    """`line N: code`, the generated code's comment naming the user's line above line `at`."""
    for text in reversed(lines[: at + 1]):
        if text.strip().startswith("# line "):
            return text.strip()[2:]
    return None


_ARGUMENT = re.compile(r"^(?:- )?argument (\d+): ")
_SCOPES = {"global": "the global", "closure": "the enclosing function's variable"}


def argument_in_user_terms(reason: str, compiled, name: str) -> str:
    """Numba's `argument 1: Cannot determine Numba type of ...` with the argument named: a
    value the code reads from the user's scope (a global object of the user's class, passed in
    as the generated function's data parameter) by its name and the first line reading it; a
    parameter by its name."""
    found = _ARGUMENT.match(reason)
    tree = ast.parse(compiled.code) if found else None
    func = next((n for n in getattr(tree, "body", ()) if getattr(n, "name", None) == name), None)
    if func is None or int(found.group(1)) >= len(func.args.args):
        return reason
    param, told = func.args.args[int(found.group(1))].arg, reason[found.end() :]
    spec = compiled.data_specs[compiled.data.index(param)] if param in compiled.data else None
    if spec is None or spec[1] not in _SCOPES or not isinstance(spec[2], str):
        return f"argument '{param}': {told}"
    shown = ".".join([spec[2], *map(str, spec[3])])
    named = re.compile(rf"\b{re.escape(spec[2])}\b")  # the first user line reading it
    said = (comment_parts(t) for t in compiled.code.splitlines())
    parts = next((p for p in said if p and named.search(p[1])), None)
    where = f", read at {parts[0]} (`{parts[1]}`)" if parts else ""
    return f"{_SCOPES[spec[1]]} `{shown}`{where}: {told}"
