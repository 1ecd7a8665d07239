"""The fused runs' guards in a process's jitted code (jit.py). Numba compiles the fused branches
alone, each guard's `else:` a `raise ShapesNotFused()`; a call whose arrays broadcast where a
fused run takes one shape raises it, and runs in the code with the `else:` branches, compiled
then (`Jitted.with_branches`), as do later calls of those shapes.
"""

from __future__ import annotations

import ast

import numpy as np


class ShapesNotFused(Exception):
    """Raised by a process's jitted code where a fused run's guard fails (its arrays broadcast):
    `Jitted` runs the call in the code with the `else:` branches (see `fused_only`)."""


# the tests in front of fused runs (pipeline/fusion): their `else:` holds the original statements
_GUARDS = ("fusible", "float_arrays")


def _is_guard(test: ast.expr) -> bool:
    return any(
        isinstance(n, ast.Call) and getattr(n.func, "id", None) in _GUARDS for n in ast.walk(test)
    )


def fused_only(source: str) -> str:
    """`source` with the `else:` branch of each fused run's guard replaced by `raise
    ShapesNotFused()`, the rest of the text (comments too) as it was.

    Those branches are the original array statements, for inputs that broadcast; Numba compiles
    each array expression into broadcasting loops of its own, so they were most of the machine
    code and of the compile time of a fused gradient (BA's pullback: three quarters of it), for
    calls that seldom take them. The process compiles them only once a call takes one
    (`Jitted.with_branches`); `s2sad.source` shows them and a standalone module (`s2sad emit
    --jit`) keeps them."""
    lines = source.splitlines(keepends=True)
    spans = []  # (first line of the else's body, its last line, its indent), 1-based
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.If) and node.orelse and _is_guard(node.test):
            first = node.orelse[0].lineno
            if not lines[first - 1].lstrip().startswith("elif"):
                spans.append((first, node.orelse[-1].end_lineno, node.orelse[0].col_offset))
    spans.sort()
    outer = [s for s in spans if not any(o[0] < s[0] and s[1] <= o[1] for o in spans)]
    for first, last, indent in reversed(outer):  # the last first: lines stay put
        start = first - 1  # comments between `else:` and the statement go too
        while lines[start - 1].strip() != "else:":
            start -= 1
        lines[start:last] = [" " * indent + "raise ShapesNotFused()\n"]
    return "".join(lines)


BROADCAST_KEPT = 256  # calls' shapes remembered (branches, misfits), per Jitted, then forgotten


def shapes(args) -> tuple:
    """The arrays' shapes among `args` (in tuples too): with their kinds, what decides whether
    a fused run's guard holds."""
    return tuple(
        a.shape if isinstance(a, np.ndarray) else shapes(a) if isinstance(a, tuple) else None
        for a in args
    )
