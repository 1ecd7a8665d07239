"""Reading Numba's failures: whether an exception is Numba declining to compile (or its cache,
or its threads' shape checks), and the one line of its message that says what and where, in
the user's terms (the generated code's `# line N:` comments), for JitError and the fallback
warning.
"""

from __future__ import annotations

import os
import re

from .rules.helpers import RUNTIME
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


def numba_reason(exc) -> str:
    """The line of Numba's message that names the operation, and where: the user's line (the
    generated code's `# line N:` comment Numba shows) or else the generated line."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    # else the first line that is not Numba's framing ("Failed in nopython mode pipeline",
    # "- Resolution failure for ...", "During: ...")
    plain = [line for line in lines if not line.startswith(_FRAMING)]
    reason = next(
        (line for line in lines if any(t in line for t in _TELLING)),
        plain[0] if plain else lines[0] if lines else type(exc).__name__,
    )
    where = next(
        (
            lines[i + 1]
            for i, line in enumerate(lines[:-1])
            if line.startswith("File ") and "line" in line
        ),
        "",
    )
    if "No implementation of function" in reason:  # the argument types Numba had: `>>> f(...)`
        given = next((line for line in lines if line.startswith(">>>")), "")
        reason += f" {given[3:].strip()}" if given else ""
    user = next((line[2:] for line in lines if line.startswith("# line ")), "")
    if user:
        number, _, code = user.partition(": ")
        return reason[:400] + f" (at {number}: `{code[:120]}`)"
    shown = where and not where.startswith(("<", "def "))  # a generated name says nothing
    return reason[:400] + (f" (at `{where[:120]}`)" if shown else "")


def no_numba_form(exc, source: str) -> str | None:
    """For a runtime helper the generated code calls that has no Numba form (a NameError for
    it): which, and the user's line whose derivative calls it (the generated code's comment)."""
    found = re.search(r"name '(\w+)' is not defined", str(exc))
    if not found or found.group(1) not in RUNTIME:
        return None
    helper, line = found.group(1), None
    for text in source.splitlines():
        stripped = text.strip()
        if stripped.startswith("# line "):
            line = stripped[2:]
        elif re.search(rf"\b{helper}\(", stripped) and not stripped.startswith("def "):
            origin = re.search(r"\((\S+\.py):\d+\)", source)
            number, _, code = (line or "").partition(": ")
            where = f"{origin.group(1)} " if origin else ""
            where += f"{number} (`{code}`)" if line else "the function"
            return (
                f"s2sad's helper {helper}, which the derivative of {where} calls, has no Numba form"
            )
    return None


WIDENED_HINT = (
    "keep the value in its dtype where the loop computes it (`y = (y + h / 6.0 * k)"
    ".astype(y0.dtype)`), or pass float64 arrays; jit=True runs the Python version instead"
)


def widened_in_loop(exc, source: str) -> str | None:
    """For a value a loop carries that Numba computes in float64 from float32 (Numba's types
    widen a float32 array meeting a Python float, `h / 6.0 * k`, where NumPy 2 keeps float32:
    NEP 50): which, and the user's line computing it, from the generated code's comments."""
    found = re.search(
        r"Cannot unify array\((float\d+), \d+d, \w+\) and array\((float\d+), \d+d, \w+\) "
        r"for '([A-Za-z_]\w*)\.",
        str(exc),
    )
    if not found or {found.group(1), found.group(2)} != {"float32", "float64"}:
        return None
    name, lines, line, comment = found.group(3), source.splitlines(), None, None
    copied = [m.group(1) for t in lines if (m := re.match(rf"\s*{name} = (\w+)$", t))]
    for target in copied[-1:] + [name]:  # the value copied into it (`y = y_new`), else itself
        for text in lines:
            stripped = text.strip()
            if stripped.startswith("# line "):
                comment = stripped[2:]
            elif re.match(rf"{target} = ", stripped) and line is None:
                line = comment
    origin = re.search(r"\((\S+\.py):\d+\)", source)
    number, _, code = (line or "").partition(": ")
    where = f" at {origin.group(1) if origin else 'the function'} {number} (`{code}`)"
    return (
        f"'{name}' is float32 as the loop starts and float64 after a step{where if line else ''}: "
        "compiled code computes a float32 array meeting a Python float (or a float64 value) "
        "in float64, where NumPy 2 keeps float32, and Numba gives a name one type"
    )


MIXED_HINT = (
    "keep a product's operands in one dtype (`A.astype(y.dtype) @ y`, or a loop's value kept in "
    "its own: `y = (A @ y).astype(y0.dtype)`), or pass float64 arrays; jit=True runs the Python "
    "version instead"
)


def mixed_product(exc, source: str) -> str | None:
    """For a matrix product of a float32 and a float64 array (`A @ y`, np.dot), which Numba's
    products refuse with a message naming their internal `_impl`: what, and the user's line.
    (In a loop whose value starts float32, NumPy would widen that value to float64 there too.)"""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    found = re.search(r"array\((float\d+), \d+d, \w+\), array\((float\d+), \d+d, \w+\)", text)
    product = "_impl(" in text or "np.dot()" in text or "must all have the same dtype" in text
    if not found or not product or {found.group(1), found.group(2)} != {"float32", "float64"}:
        return None
    where = numba_reason(exc).rpartition(" (at ")[2]
    origin = re.search(r"\((\S+\.py):\d+\)", source)
    number, _, code = where[:-1].partition(": ")
    file = origin.group(1) if origin else "the function"
    where = f" at {file} {number} ({code})" if where.startswith("line ") else ""
    return (
        f"a matrix product of a {found.group(1)} and a {found.group(2)} array{where}: Numba's "
        "products take operands of one dtype, where NumPy computes it in float64 (and a value a "
        "loop carries from float32 is float64 after a step)"
    )


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
    tb = exc.__traceback__
    while tb is not None:
        if _in_numba(tb.tb_frame.f_code.co_filename):
            return True
        tb = tb.tb_next
    return False


def _in_numba(filename: str) -> bool:
    import numba  # (Numba loads on first use: s2sad imports fast)

    return filename.startswith(os.path.dirname(numba.__file__) + os.sep)
