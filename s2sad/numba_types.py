"""Reading Numba's "Cannot unify" failures: a name compiled code types two ways (a float32 value
widened to float64, a number that becomes an array), told in the user's terms: the loop or
`if` where the types meet, the lines binding it, and what to do. numba_failures.py reads the
rest of Numba's failures.
"""

from __future__ import annotations

import re

from .generated_lines import user_line as _user_line
from .numba_failures import in_user_terms

_WIDENS = (
    "compiled code computes in float64 a float32 array meeting a float64 value (as NumPy does) "
    "or a Python float (where NumPy 2 keeps float32), and Numba gives a name one type"
)


_FROM_NUMBER = (
    "an array computed from a float32 number that compiled code widens to float64 (meeting a "
    "Python float or a float64 value, where NumPy 2 keeps float32); Numba types a number both "
    "ways as one float64, an array not"
)


_HINTS = {
    "widens": "keep the value in its dtype where the loop computes it (`y = (y + h / 6.0 * k)"
    ".astype(y0.dtype)`)",
    "narrows": "give the value the loop's dtype before the loop (`y = y0.astype(np.float32)`), or "
    "keep the step in float64",
    "branch": "bind one dtype on every path (`y = (x * w).astype(x.dtype)`)",
}


_UNIFY = re.compile(
    r"Cannot unify (.+?) and (.+?) for '([A-Za-z_]\w*)(?:\.\d+)?', defined at (\S+?\.py) \((\d+)\)"
)


_OTHER = (
    "Numba gives a name one type on every path, where Python lets a name change its type",
    "give the value one type before the loop and after each step (`s = 0.0` for a number, "
    "`np.asarray(...)` for an array, `.astype(...)` for a dtype)",
)


_RANKS = (
    "Numba cannot type a value whose rank changes",
    "bind it before the loop to a value of the rank the loop gives it (`h = np.zeros_like(y)`)",
)


def _rank(numba_type: str) -> int:
    """A Numba type's rank (0 for a number)."""
    array = re.fullmatch(r"array\(\w+, (\d+)d, \w+\)", numba_type)
    return int(array.group(1)) if array else 0


def two_types(exc, source: str) -> tuple | None:
    """For a name Numba types two ways on two paths (mostly float32 and float64: its types widen
    a float32 array meeting a Python float, `h / 6.0 * k`, where NumPy 2 keeps float32, NEP 50):
    what, where and what to do, as `(reason, hint)`. Numba's message names the point where the
    paths meet (`defined at file (line)` in the generated module): a loop's header, where the
    first type is the one the loop starts with (Numba types the entry before the body, which
    reads it), or the statement after an `if`, whose paths it does not order."""
    found = _UNIFY.search(str(exc))
    if not found:
        return None
    first, second = _kind(found[1], found[2]), _kind(found[2], found[1])
    name, ranked = found.group(3), _rank(found[1]) != _rank(found[2])
    floats = {first, second} == {"float32", "float64"}
    named = in_user_terms(name, source)
    try:
        with open(found.group(4), encoding="utf-8") as module:
            lines = module.read().splitlines()
    except OSError:
        lines = []
    at = int(found.group(5)) - 1
    if not 0 <= at < len(lines):
        return None
    origin = re.search(r"\((\S+\.py):\d+\)", source)
    file = origin.group(1) if origin else "the function"
    at = _loop_header(lines, at)
    if lines[at].strip().startswith(("for ", "while ")):
        where = f" at {_user_line(lines, _computing(lines, name, at))}"
        kind = ("widens" if first == "float32" else "narrows") if floats else None
        made = _float64_made(lines, at) if kind == "widens" else None
        if made:  # (a cause the text shows: else both possible ones are told)
            where, kind = f" from {made}", "made"
        why, hint = {
            "made": (
                "NumPy widens it too: that value is float64 whatever the arguments' dtypes "
                "(Python floats alone are), and so are the arrays the step computes from it; "
                "Numba gives a name one type",
                "give that value the loop's dtype (`np.where(c, 1.0, 0.0).astype(u.dtype)`, "
                "`np.zeros(n, u.dtype)`)",
            ),
            "widens": (_WIDENS, _HINTS["widens"]),
            "narrows": (
                "Numba gives a name one type, and a float32 value computed before the loop is "
                "float64 in compiled code where it meets a Python float or a float64 value",
                _HINTS["narrows"],
            ),
            None: _RANKS if ranked else _OTHER,
        }[kind]
        return (
            f"{named} is {first} as the loop at {file} {_user_line(lines, at)} starts and "
            f"{second} after a step{where}: {why}",
            hint
            + (", or pass float64 arrays" if floats else "")
            + "; jit=True runs the Python version instead",
        )
    branch = _enclosing_if(lines, at)
    if branch is None and floats:  # a number typed float32, then float64 (a loop's, mostly)
        where = "" if " at line " in named else f" at {file} {_user_line(lines, at)}"
        return (
            f"{named}{where} is typed {first}, then {second}: {_FROM_NUMBER}",
            "keep the number in its dtype where it meets a Python float (`s = (s + t * 0.5)"
            ".astype(x.dtype)`, or `x.dtype.type(0.5)`), or pass float64 arrays; jit=True runs "
            "the Python version instead",
        )
    if branch is None:
        return None
    first, second = sorted((first, second))  # (the paths are in no order)
    bound = []
    for i in range(branch + 1, at):
        if re.match(rf"\s*{name} = ", lines[i]):
            told = _bound_at(lines, name, i, branch)
            bound += [told] if told not in bound else []
    return (
        f"{named} is {first} on one path and {second} on another through the `if` at {file} "
        f"{_user_line(lines, branch)}, bound by "
        + " and by ".join(bound)
        + f": {_WIDENS if floats else _OTHER[0]}",
        (_HINTS["branch"] + ", or pass float64 arrays" if floats else _OTHER[1])
        + "; jit=True runs the Python version instead",
    )


# values float64 whatever the arguments' dtypes: np.where of two Python numbers, an array
# made from a shape alone
_FLOAT64_MADE = re.compile(
    r"np\.where\([^()]*(?:\([^()]*\)[^()]*)*, -?\d[\w.]*, -?\d[\w.]*\)"
    r"|np\.(?:zeros|ones|empty|eye|identity)\((?:\w+|\w+\.shape|\([^()]*\))\)"
)


_COMMENT = re.compile(r"#\s*(?:(\w+), )?line (\d+): (.*)")


def _float64_made(lines: list, header: int) -> str | None:
    """The user's line in the loop at `header` that makes a float64 value from no argument
    (`np.where(c, 1.0, 0.0)`), as `line N (`code`)` (`in helper` for an inlined function's)."""
    indent = len(lines[header]) - len(lines[header].lstrip())
    told = None
    for text in lines[header + 1 :]:
        if text.strip() and len(text) - len(text.lstrip()) <= indent:
            return None
        comment = _COMMENT.match(text.strip())
        if comment:
            told = comment
        elif told and _FLOAT64_MADE.search(text):
            helper, number, code = told.groups()
            call = _FLOAT64_MADE.search(text).group(0).partition("(")[0]
            if call + "(" in code:  # the user's own call, not one of s2sad's
                return f"line {number}{f' in {helper}' if helper else ''} (`{code}`)"
    return None


def _kind(numba_type: str, other: str) -> str:
    """Numba's type in words: the dtype alone for a float array of `other`'s rank, `a 0-d
    float64 array`, `an array of rank 1 (float64)`, `a float64 number`."""
    array = re.fullmatch(r"array\((\w+), (\d+)d, \w+\)", numba_type)
    if array and array.group(2) == "0":
        return f"a 0-d {array.group(1)} array"
    if array:
        rank = _rank(numba_type)
        return array.group(1) if rank == _rank(other) else f"an array of rank {rank} ({array[1]})"
    return (
        f"a {numba_type} number"
        if re.fullmatch(r"(float|int|uint|complex)\d+", numba_type)
        else numba_type
    )


def _bound_at(lines: list, name: str, at: int, branch: int) -> str:
    """The user's line binding `name` at line `at` of an `if`'s arm; for the copy s2sad puts in
    an arm that does not bind it (`y_1_2 = y`), where that value was bound before the `if`."""
    copied = re.match(rf"\s*{name} = (\w+)$", lines[at])
    if copied and not lines[at - 1].strip().startswith("# line "):
        source = copied.group(1)
        before = [i for i in range(branch) if re.match(rf"\s*{source} = ", lines[i])]
        return _user_line(lines, before[-1]) if before else f"the argument '{source}'"
    return _user_line(lines, at)


def _loop_header(lines: list, at: int) -> int:
    """The loop whose header block line `at` starts, else `at`: Numba places a `while` loop's
    merge at the first statement of its body (where the condition is tested again)."""
    for i in range(at - 1, -1, -1):
        text = lines[i].strip()
        if text and not text.startswith("#"):
            inner = len(lines[at]) - len(lines[at].lstrip()) > len(lines[i]) - len(
                lines[i].lstrip()
            )
            return i if inner and text.startswith(("for ", "while ")) else at
    return at


def _computing(lines: list, name: str, header: int) -> int:
    """The line of the loop at `header` that computes `name`'s next value: the value copied
    into it (`y = y_new`), else `name`'s own assignment."""
    indent = len(lines[header]) - len(lines[header].lstrip())
    body = []
    for i in range(header + 1, len(lines)):
        if lines[i].strip() and len(lines[i]) - len(lines[i].lstrip()) <= indent:
            break
        body.append(i)
    copied = [m.group(1) for i in body if (m := re.match(rf"\s*{name} = (\w+)$", lines[i]))]
    for target in copied[-1:] + [name]:
        for i in body:
            if re.match(rf"\s*{target} = ", lines[i]):
                return i
    return header


def _enclosing_if(lines: list, at: int) -> int | None:
    """The `if` whose paths meet at line `at`: the compound statement just above it at its
    indentation (through its `else:`)."""
    indent = len(lines[at]) - len(lines[at].lstrip())
    for i in range(at - 1, -1, -1):
        text = lines[i]
        if not text.strip() or text.strip().startswith("#"):
            continue
        if len(text) - len(text.lstrip()) > indent:
            continue
        if len(text) - len(text.lstrip()) < indent:
            return None
        if text.strip().startswith(("else:", "elif ")):
            continue
        return i if text.strip().startswith("if ") else None
    return None
