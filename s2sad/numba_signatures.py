"""Numba's "No implementation of function" for one of s2sad's helpers, told as the user's
operation: the helper as the NumPy function it computes, or whose derivative it computes
(`std_over` is np.std, `trapezoid_vjp_x` the derivative of np.trapezoid), and Numba's argument
types in words (`a 2-d int64 array`, `a list of float64`, `(0, 1)`), with what to do where the
arguments say it (a list, a tuple of axes, an integer array). numba_failures.py calls it."""

from __future__ import annotations

import re

import numpy as np

_HELPER = re.compile(r"No implementation of function Function\(<function (\w+) at 0x[0-9a-f]+>\)")
_SIGNATURE = re.compile(r"^(\w+)\((.*)\)$")


def helper_in_user_terms(reason: str, given: str, helpers) -> str | None:
    """`reason` (Numba's line) and `given` (its `>>> helper(types)` line) as the operation
    the user wrote and the arguments it met; None where the function is no helper of s2sad's."""
    found = _HELPER.search(reason)
    if not found or found.group(1) not in helpers:
        return None
    call = _SIGNATURE.match(given[3:].strip() if given.startswith(">>>") else given.strip())
    args = _split(call.group(2)) if call else []
    told = ", ".join(_described(a) for a in args)
    hint = _advice(found.group(1), args)
    return (
        f"Numba has no compiled form of {operation(found.group(1))} for these arguments "
        f"({told}){hint}"
    )


def operation(helper: str) -> str:
    """The user's operation a helper computes (`mean_over`: np.mean) or differentiates
    (`matmul_vjp_lhs`: the derivative of np.matmul)."""
    over = re.fullmatch(r"(\w+?)_over", helper)
    if over and _numpy_name(over.group(1)):
        return _numpy_name(over.group(1))
    if helper == "indexed_by_arrays":
        return "indexing by a boolean mask beside another array or (of several axes) an integer"
    derivative = re.fullmatch(r"(\w+?)_(?:vjp|jvp)(?:_\w+)?", helper)
    if derivative:
        base = derivative.group(1)
        if base == "getitem":
            return "the derivative of indexing (`x[...]`)"
        name = _numpy_name(base)
        return f"the derivative of {name}" if name else f"the derivative of `{base}`"
    return "an operation of the derivative"


def _numpy_name(name: str) -> str | None:
    for module, spelled in ((np, "np"), (np.linalg, "np.linalg")):
        if callable(getattr(module, name, None)):
            return f"{spelled}.{name}"
    return None


def _split(text: str) -> list[str]:
    """Numba's argument types, split at the commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    tail = text[start:].strip()
    return parts + [tail] if tail else parts


def _described(numba_type: str) -> str:
    """One of Numba's types in words."""
    t = numba_type.strip()
    array = re.fullmatch(r"(?:readonly )?array\((\w+), (\d+)d, \w+\)", t)
    if array:
        return f"a {array.group(2)}-d {array.group(1)} array"
    listed = re.fullmatch(r"(?:reflected )?list\((\w+)\)(?:<iv=.*>)?", t)
    if listed:
        return f"a list of {listed.group(1)}"
    literal = re.fullmatch(r"Literal\[\w+\]\((.*)\)", t)
    if literal:
        return literal.group(1)
    tuple_ = re.fullmatch(r"Tuple\((.*)\)", t)
    if tuple_:
        return "(" + ", ".join(_described(p) for p in _split(tuple_.group(1))) + ")"
    same = re.fullmatch(r"UniTuple\((\w+) x (\d+)\)", t)
    if same:
        return f"a tuple of {same.group(2)} {same.group(1)}"
    if t in ("none", "omitted(default=None)") or t.startswith("omitted"):
        return "None"
    if re.fullmatch(r"(float|int|uint|complex)\d+|bool", t):
        return f"a {t} number"
    return t


def _advice(helper: str, args: list) -> str:
    """What to write instead, where the arguments show why (`: ...`), else nothing."""
    if helper == "indexed_by_arrays":
        return (
            ": Numba indexes by a mask of one axis only beside integers and slices; jit=True "
            "runs the Python version"
        )
    if any("list(" in a for a in args):
        return ": pass the list as an array (`np.asarray([...])`)"
    if any(a.startswith(("Tuple(", "UniTuple(")) for a in args[1:]):
        return (
            ": the compiled forms reduce over one axis or all of them; merge the axes first "
            "(`x.reshape(-1, x.shape[-1])` for the leading ones)"
        )
    if args and re.match(r"array\((u?int|bool)", args[0]) and helper.endswith("_over"):
        return ": cast the integer array first (`k.astype(float)`)"
    return ""
