"""gradbench `det`: the determinant by expansion by minors (cmpad's det_by_minor), and its
gradient.

The recursion expands a minor along its first row: det M = sum_j (-1)^j M[0, j] det S_j, S_j the
minor without row 0 and column j. s2sad refuses recursion, so `det` runs the recursion's tree
level by level, every branch at once: after level k each term is the signed product of one
entry from each of rows 0..k, and carries the columns its minor still has; the last two rows
are each term's 2 x 2 minor, written out (the recursion's two last levels: the arrays of the
last level would hold all ell! products). It computes the same products as the recursion
(ell! terms of ell factors, shared prefixes computed once).

Functions: `primal` (a float) and `gradient` (d det / d A, row-major, as long as `A`), for
inputs `A` (row-major, ell * ell numbers) and `ell`.
"""

from __future__ import annotations

import numba
import numpy as np

import s2sad


def det(A, ell):
    """Determinant of the ell x ell matrix whose rows are stored one after another in A."""
    M = A.reshape(ell, ell)
    if ell == 1:
        return M[0, 0]
    free = np.arange(ell, dtype=np.int8).reshape(1, ell)  # each term's columns, in order
    terms = np.ones(1)
    for k in range(ell - 2):
        m = ell - k  # the size of the minors at this level
        signs = (-1.0) ** np.arange(m)
        # expand each term's minor along its first row (row k of M), by each of its columns
        terms = (terms[:, None] * (signs * M[k][free])).reshape(-1)
        # the sub-minor by column position j keeps the positions other than j
        position = np.arange(m - 1)
        keep = position[None, :] + (position[None, :] >= np.arange(m)[:, None])
        free = free[:, keep].reshape(terms.shape[0], m - 1)
    # the 2 x 2 minors left, expanded along their first row (their 1 x 1 minors written out)
    first, second = M[ell - 2], M[ell - 1]
    c0, c1 = free[:, 0], free[:, 1]
    return np.sum(terms * (first[c0] * second[c1] - first[c1] * second[c0]))


def prepare(function: str, input: dict, jit: bool):
    A = np.asarray(input["A"], dtype=np.float64)
    ell = int(input["ell"])
    if function == "primal":
        primal = numba.njit(det) if jit else det
        run = lambda: primal(A, ell)  # noqa: E731
    elif function == "gradient":
        gradient = s2sad.grad(det, wrt="A", jit=jit)
        run = lambda: gradient(A, ell)  # noqa: E731
    else:
        raise ValueError(f"det has no function {function!r}")
    run()  # warm up: the transform, and Numba's compile under jit
    return run


def output(function: str, result):
    if function == "primal":
        return float(result)
    return np.asarray(result, dtype=np.float64).tolist()
