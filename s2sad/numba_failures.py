"""Reading Numba's failures: whether an exception is Numba declining to compile (or its cache,
or its threads' shape checks), and the one line of its message that says what and where, in
the user's terms (the generated code's `# line N:` comments), for JitError and the fallback
warning.
"""

from __future__ import annotations

import os
import re

import numpy as np

from .generated_lines import (
    comment_above,
    comment_parts,
    described,
    placed,
    raised_at as _raised_at,
    user_line as _user_line,
)
from .numba_signatures import helper_in_user_terms
from .rules.helpers import RUNTIME
from .rules.promotion import INT_NUMBER_MEETS
from .rules.tapes import ROW_TAPE_MISFIT

_TELLING = (
    "Untyped global name",
    "NameError",
    "No implementation of function",
    "Unknown attribute",
    "Cannot determine Numba type",
    "Invalid use of",
    "Cannot unify",
    "Cannot infer the type",
    "not supported",
    "unsupported",
    "scipy",
)


_FRAMING = ("Failed in ", "- Resolution failure", "During:", "File ", "^")


def numba_reason(exc, source: str = "") -> str:
    """The line of Numba's message that names the operation, and where: the user's line (the
    generated code's `# line N:` comment Numba shows) or else the generated line; the generated
    code's names in it told in the user's terms (`in_user_terms`)."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    text = _DEFINED.sub(_defined_at, text)
    if source:
        text = re.sub(
            r"'([A-Za-z_]\w*)(?:\.\d+)?'",
            lambda m: (
                in_user_terms(m.group(1), source)
                if re.search(rf"^\s*{m.group(1)} \+?= ", source, re.M)
                else m.group(0)
            ),
            text,
        )
    text = _TEMPORARY.sub("a value computed on that line", text)  # (Numba's own: `$430call.19`)
    text = _TOLD_TWICE.sub(r"\1", text)  # (a name told with its line, then Numba's place)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    # else the first line that is not Numba's framing ("Failed in nopython mode pipeline",
    # "- Resolution failure for ...", "During: ...")
    plain = [line for line in lines if not line.startswith(_FRAMING)]
    reason = next(
        (line for line in lines if any(t in line for t in _TELLING)),
        plain[0] if plain else lines[0] if lines else type(exc).__name__,
    )
    if "scipy" in reason.lower() and "required" in reason:  # (Numba's words: not what to do)
        reason += ": pip install scipy (Numba runs np.dot, @ and np.linalg through SciPy's BLAS)"
    pointed = [
        _pointed_at(lines, i + 1)
        for i, line in enumerate(lines[:-1])
        if line.startswith("File ") and "line" in line
    ]
    # the first that is a line of the generated code (Numba shows its own first where one of its
    # functions refused the types it was given: `return _np_vstack(tup)`), else the first
    ours = {t.strip() for t in source.splitlines()} - {""}
    where = next((w for w in pointed if w in ours), pointed[0] if pointed else "")
    if where.startswith("def "):  # a line far into the function: the one Numba marks (`^`)
        where = next((lines[i - 1] for i, line in enumerate(lines) if line == "^" and i), where)
    if "No implementation of function" in reason:  # the argument types Numba had: `>>> f(...)`
        given = next((line for line in lines if line.startswith(">>>")), "")
        told = helper_in_user_terms(reason, given, RUNTIME)  # (one of s2sad's helpers)
        reason = told or reason + (f" {given[3:].strip()}" if given else "")
    user = next((comment_parts(line) for line in lines if comment_parts(line)), None)
    if user and " at line " not in reason:
        return reason[:400] + placed(f"{user[0]}: {user[1]}", source)
    generated = source.splitlines()
    at = next((i for i, t in enumerate(generated) if where and t.strip() == where), None)
    if at is not None and " at line " not in reason:  # the generated line's user line
        comment = comment_above(generated, at)
        return reason[:400] + (placed(comment, source) if comment else f" (at `{where[:120]}`)")
    shown = where and not where.startswith(("<", "def "))  # a generated name says nothing
    return reason[:400] + (f" (at `{where[:120]}`)" if shown else "")


_PLACED = re.compile(r" \((?:\S+\.py )?(line \d+): (`.*`)\)$")  # (what `placed` writes)


def _pointed_at(lines: list, start: int) -> str:
    """The code line Numba's `^` marks below its `File ...` line at `start - 1` (its function's
    `def` and `<source elided>` come first where the line is far down), else the first."""
    for i in range(start, min(start + 6, len(lines))):
        if lines[i].startswith("^") and i > start:
            return lines[i - 1]
    return lines[start]


_TEMPORARY = re.compile(r"'?\$\w+(?:\.\d+)?'?")
_DEFINED = re.compile(r"defined at (\S+\.py) \((\d+)\)")
_TOLD_TWICE = re.compile(r"( at (line \d+ \(`[^`\n]*`\)))'?,? at \2")


def _defined_at(found) -> str:
    """Numba's `defined at <generated file> (N)` as the user's line its comment names."""
    try:
        with open(found.group(1), encoding="utf-8") as module:
            lines = module.read().splitlines()
    except OSError:
        return found.group(0)
    at = int(found.group(2)) - 1
    return f"at {_user_line(lines, at)}" if 0 <= at < len(lines) else found.group(0)


# the modules of the objects s2sad's transforms make
_TRANSFORMS = ("s2sad.transformed", "s2sad.compose", "s2sad.jacobians", "s2sad.cuda")


def called_transform(exc, objects: dict) -> tuple | None:
    """(reason, hint) where Numba failed at a name the generated code reads that is a transform
    s2sad made (`jacobian(grad(f), jit=True)`, a lambda calling `g = s2sad.grad(f)`): compiled
    code cannot call one; None otherwise."""
    found = re.search(r"Untyped global name '(\w+)'", str(exc))
    value = objects.get(found.group(1)) if found else None
    owner = getattr(value, "__self__", value)
    if value is None or isinstance(value, type) or type(owner).__module__ not in _TRANSFORMS:
        return None
    return (
        f"it calls {owner!r} (the name '{found.group(1)}'), a transform s2sad made, which "
        "compiled code cannot call: a transform of a transform runs in Python (pass jit=False "
        "to the outer one to say so; the numbers are the same)",
        "pass jit=False (or jit=True, which runs it in Python) to the transform that calls "
        "another",
    )


def no_numba_form(exc, source: str) -> str | None:
    """For a runtime helper the generated code calls that has no Numba form (a NameError for
    it): which, and the user's line whose derivative calls it (the generated code's comment)."""
    found = re.search(r"name '(\w+)' is not defined", str(exc))
    if not found or found.group(1) not in RUNTIME:
        return None
    helper, line = found.group(1), None
    for text in source.splitlines():
        stripped = text.strip()
        if described(stripped) is not None:
            line = described(stripped)  # (an inlined helper's own line: `line 13 of attention`)
        elif re.search(rf"\b{helper}\(", stripped) and not stripped.startswith("def "):
            origin = re.search(r"\((\S+\.py):\d+\)", source)
            where = f"{origin.group(1)} " if origin else ""
            where += line or "the function"
            return (
                f"s2sad's helper {helper}, which the derivative of {where} calls, has no Numba form"
            )
    return None


# what versions, loop copies, fused loops' elements and outputs add to a name
_ORDINAL = re.compile(r"(?:_\d+)+$|_(?:new|entry|stop|out\d*|i|tape)$")
_IDENT = re.compile(r"[A-Za-z_]\w*")


def in_user_terms(name: str, source: str) -> str:
    """A name of the generated code as the user knows it: their own variable (`'y'` for the
    merge copy `y_1_2` or Numba's `y.3`), the derivative of one (`dy`), or else the operation and
    the user's line that computes it (`ds_add`: the derivative of the `add` computing 's' at
    line 4 (`s = a + b`))."""
    name = name.split(".")[0]
    lines = source.splitlines()
    users = {
        word
        for text in lines
        if text.strip().startswith("# line ")
        for word in _IDENT.findall(text.strip().partition(": ")[2])
    }
    function = re.search(r"\bof (\w+) \(\S+\.py:\d+\)", source)
    value = function.group(1) if function else None
    if value:  # the function's own name stands for its value in the generated code
        users.add(value)

    def told(user: str) -> str:
        return f"the value {user} returns" if user == value else f"'{user}'"

    own = _as_user_name(name, users)
    if own:
        return told(own)
    derivative = name.startswith("d") and _as_user_name(name[1:], users)
    if derivative:
        return f"the derivative of {told(derivative)}"
    tangent = re.fullmatch(r"(\w+?)_dot\d*", name)  # forward mode's tangent of a name
    tangent = tangent and _as_user_name(tangent.group(1), users)
    if tangent:
        return f"the tangent of {told(tangent)}"
    at = next((i for i, t in enumerate(lines) if re.match(rf"\s*{name} \+?= ", t)), None)
    where = f" at {_user_line(lines, at)}" if at is not None else ""
    made = re.fullmatch(r"(d?)([A-Za-z_]\w*?)_([a-z]+)\d*", _stripped(name))
    if made and made.group(2) in users:
        op = _OPERATORS.get(made.group(3), made.group(3) + "(...)")
        what = f"the `{op}` computing {told(made.group(2))}{where}"
        return f"the derivative of {what}" if made.group(1) else what
    return f"a value s2sad computes{where or ' (' + name + ')'}"


_OPERATORS = {
    "add": "+",
    "sub": "-",
    "mul": "*",
    "div": "/",
    "floordiv": "//",
    "mod": "%",
    "pow": "**",
    "neg": "-",
    "matmul": "@",
}


def _stripped(name: str) -> str:
    """`name` without the suffixes versions and copies add."""
    while True:
        stripped = _ORDINAL.sub("", name)
        if stripped == name or not stripped:
            return name
        name = stripped


def _as_user_name(name: str, users: set) -> str | None:
    """`name` as one of the user's names, through the suffixes versions and copies add."""
    while name not in users:
        stripped = _ORDINAL.sub("", name)
        if stripped == name or not stripped:
            return None
        name = stripped
    return name


def axis_error(exc) -> Exception | None:
    """NumPy's AxisError, with NumPy's message, for Numba refusing an axis out of bounds as it
    types a reduction (`x.sum(axis=2)` of a matrix): the error Python mode raises."""
    found = re.search(r"axis (-?\d+) is out of bounds for array of dimension (\d+)", str(exc))
    return np.exceptions.AxisError(int(found.group(1)), int(found.group(2))) if found else None


MIXED_HINT = (
    "keep a product's operands in one dtype (`A.astype(y.dtype) @ y`, or a loop's value kept in "
    "its own: `y = (A @ y).astype(y0.dtype)`), or pass float64 arrays; jit=True runs the Python "
    "version instead"
)
WIDENED_HINT = (
    "keep the value in its arrays' dtype where a number meets it (`h = (np.tanh(W @ x) * s)"
    ".astype(W.dtype)`), or pass the number as np.float32; jit=True runs the Python version instead"
)


def mixed_product(exc, source: str, args=()) -> tuple | None:
    """For a matrix product of a float32 and a float64 array (`A @ y`, np.dot), which Numba's
    products refuse with a message naming their internal `_impl`: what, and the user's line, as
    `(reason, hint)`. Where the call was given no float64 array or NumPy float64, the float64
    operand is one compiled code widened (a float32 array meeting a Python float, `* s`), which
    NumPy keeps float32; else NumPy computes the product in float64 too (as it does for a
    value a loop carries from float32, float64 after a step)."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    found = re.search(r"array\((float\d+), \d+d, \w+\), array\((float\d+), \d+d, \w+\)", text)
    product = "_impl(" in text or "np.dot()" in text or "must all have the same dtype" in text
    if not found or not product or {found.group(1), found.group(2)} != {"float32", "float64"}:
        return None
    line = _PLACED.search(numba_reason(exc)) or _PLACED.search(numba_reason(exc, source))
    origin = re.search(r"\((\S+\.py):\d+\)", source)
    file = origin.group(1) if origin else "the function"
    where = f" at {file} {line.group(1)} ({line.group(2)})" if line else ""
    if not _given_float64(args):
        return (
            f"a matrix product of a float32 array and one compiled code widened to float64"
            f"{where}: a float32 array meeting a Python float is float64 in Numba, where NumPy 2 "
            "keeps float32, and Numba's products take operands of one dtype",
            WIDENED_HINT,
        )
    return (
        f"a matrix product of a {found.group(1)} and a {found.group(2)} array{where}: Numba's "
        "products take operands of one dtype, where NumPy computes it in float64 (and a value a "
        "loop carries from float32 is float64 after a step)",
        MIXED_HINT,
    )


def unknown_int(exc, source: str) -> tuple | None:
    """For an int number of unknown type meeting an integer array other than int64 (`u * n` of
    a uint8 `u` and an int argument `n`: uint8 in NumPy for a Python int, int64 for a NumPy
    int64), which compiled code refuses (rules/promotion.py): what, and the user's line, as
    `(reason, hint)`."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    found = re.search(rf"{INT_NUMBER_MEETS} \w+ array[^\n]*?apart", text)
    if not found:
        return None
    line = _PLACED.search(numba_reason(exc, source))
    origin = re.search(r"\((\S+\.py):\d+\)", source)
    where = f" at {origin.group(1) if origin else 'the function'} {line.group(1)} ({line.group(2)})"
    return (
        found.group(0) + (where if line else ""),
        "compute with an int64 array (`u.astype(np.int64) * n`), or write the number as a "
        "literal, which compiled code keeps in the array's dtype; jit=True runs the Python "
        "version instead",
    )


def _given_float64(args) -> bool:
    """Whether a float64 array or NumPy float64 number is among a call's arguments."""
    return any(
        (type(a) is np.ndarray and a.dtype == np.float64) or type(a) is np.float64 for a in args
    )


def at_user_line(exc, python_function, args) -> BaseException:
    """An error the compiled code raised as it ran (`x + y` of shapes that do not broadcast),
    which Numba places at line 1 of the generated file: the Python version of the same code run
    on the same arguments (it copies what it writes into) raises it at the generated line whose
    comment names the user's; that error, with NumPy's message, naming the user's file and
    line. `exc` as it is where Python raises nothing there."""
    try:
        python_function(*args)
    except Exception as found:  # noqa: BLE001  (any error Python mode raises is the user's)
        where = _raised_at(found, python_function.__code__.co_filename)
        if where is None:
            return exc
        try:
            located = type(found)(f"{found}\n  at {where}")
        except Exception:  # noqa: BLE001  (a type that takes other arguments: a note instead)
            found.add_note(f"at {where}")
            return found
        located.__traceback__ = None
        return located
    return exc


def shape_assertion(exc) -> bool:
    """The check Numba's parallel array analysis adds where it takes two arrays to have one
    shape, failing on NumPy broadcasting it does not follow (`(2, 1, 3) * (4, 1)`): "Sizes of a,
    b do not match", raised as the compiled code runs."""
    return isinstance(exc, AssertionError) and bool(re.match(r"Sizes of .* do not match", str(exc)))


def from_numba_cache(exc) -> bool:
    """Whether `exc` was raised while Numba read its on-disk cache (a truncated or foreign
    index or data file: unpickling errors of every kind)."""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.replace("\\", "/").endswith("numba/core/caching.py"):
            return True
        tb = tb.tb_next
    return False


def row_misfit(exc, compiled) -> bool:
    """The fused code's tape of rows met a value of another shape (rules/tapes.py): its code
    without fused loops, which keeps lists, runs the call instead."""
    return (
        type(exc) is ValueError
        and str(exc) == ROW_TAPE_MISFIT
        and compiled.unfused_code is not None
    )


_UNBOX = "can't unbox "
UNBOX_HINT = (
    "make the list's items arrays of one dtype and rank, or use jit=True to run the Python version"
)


def unboxed_argument(exc, args) -> str | None:
    """Numba's refusal of a list argument whose items are of several kinds (a global list of
    arrays of mixed dtypes or ranks, which the code reads as a parameter) as `argument N: ...`,
    which `argument_in_user_terms` names; None for any other failure. Numba types a list by its
    first item and checks the others only as it unboxes them, after compiling."""
    if not (isinstance(exc, TypeError) and str(exc).startswith(_UNBOX)):
        return None
    for i, arg in enumerate(args):
        if isinstance(arg, list) and len({_item_kind(item) for item in arg}) > 1:
            return f"argument {i}: {exc} (a list's items are of one type in compiled code)"
    return None


def _item_kind(item) -> tuple:
    if isinstance(item, np.ndarray):
        return (np.ndarray, item.dtype.str, item.ndim)
    return (type(item),)


def is_numba_error(exc) -> bool:
    """A failure to compile: Numba's own errors, the ImportError its linear algebra raises
    while compiling when SciPy is missing ("scipy 0.16+ is required for linear algebra"), and
    any exception raised inside Numba while it compiles (UnsupportedBytecodeError, which is no
    NumbaError, NotImplementedError from its lowering, OSError from its cache). An exception the
    compiled code raises as it runs has no frame in Numba, and is the user's, except
    NotImplementedError: that is Numba's run-time library declining what NumPy does (`reshape`
    of a non-contiguous array), and Python mode runs it."""
    try:
        from numba.core.errors import NumbaError  # (Numba loads on first use)
    except ImportError:  # pragma: no cover
        return False
    if isinstance(exc, (NumbaError, NotImplementedError)) or (
        isinstance(exc, ImportError) and "scipy" in str(exc).lower()
    ):
        return True
    if isinstance(exc, TypeError) and str(exc).startswith(_UNBOX):
        return True  # (its unboxing of an argument, in the dispatcher's C code: no frame)
    # an IndexError or ValueError from a frame of Numba's library (`np.take` out of range,
    # `np.dot` of shapes that do not match: numba/np/linalg.py) is raised as the code runs, not
    # compiles: only its compiler's frames (numba/core) make it a failure. (Until 2026-11-29 a
    # shape error was taken for one, and every later call of those types refused.)
    part = "core" if isinstance(exc, (IndexError, ValueError)) else ""
    tb = exc.__traceback__
    while tb is not None:
        if _in_numba(tb.tb_frame.f_code.co_filename, part):
            return True
        tb = tb.tb_next
    return False


def _in_numba(filename: str, part: str = "") -> bool:
    import numba  # (Numba loads on first use: s2sad imports fast)

    return filename.startswith(os.path.join(os.path.dirname(numba.__file__), part, ""))
