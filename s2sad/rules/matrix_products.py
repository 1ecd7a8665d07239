"""The matrix products the cotangents' Numba forms compute (`_mm`): Numba's matmul, which takes
one dtype and no stacks, wrapped to promote dtypes and to walk stacks one BLAS product at a
time; and a small matrix times a vector as loops, where a BLAS call's overhead is most of the
work (a loop's 2x2 product in a GMM's gradient)."""

import typing

import numpy as np

from .helpers import numba_jitable, numba_of

if typing.TYPE_CHECKING:  # bound by s2sad.numba_helpers (see rules/helpers.py)
    from numba.np.numpy_support import as_dtype


def _mm(a, b):
    return a @ b


@numba_of(_mm)
def _mm_impl(a, b):
    """a @ b where the dtypes differ (a float32 primal meets a float64 cotangent): Numba's
    matmul takes one dtype, so both go to the common one."""
    if a.ndim > 2 or b.ndim > 2:  # stacks: Numba's matmul takes none
        if a.ndim < 2 or b.ndim < 2 or a.ndim > 3 or b.ndim > 3:
            return None
        if a.dtype == b.dtype:
            return lambda a, b: _mm_stacks(a, b, 0)
        common = np.promote_types(as_dtype(a.dtype), as_dtype(b.dtype))
        return lambda a, b: _mm_stacks(a.astype(common), b.astype(common), 0)
    common = np.promote_types(as_dtype(a.dtype), as_dtype(b.dtype))
    if a.dtype == b.dtype:
        blas = _blas
    else:
        blas = _blas_promoted
    if a.ndim + b.ndim == 3:
        # a matrix and a vector: a small matrix in a loop, without a BLAS call's overhead (2x2:
        # 45 ns against 115 ns, the new array included; 16x16: 60-100 ns against 140 ns; from
        # 32x32 on the loops are slower)
        if a.ndim == 2:
            return lambda a, b: _matvec(a, b, common) if a.size <= 256 else blas(a, b, common)
        return lambda a, b: _matvec(b.T, a, common) if b.size <= 256 else blas(a, b, common)
    return lambda a, b: blas(a, b, common)


@numba_jitable
def _blas(a, b, common):
    """a @ b by Numba's matmul (BLAS)."""
    return a @ b


@numba_jitable
def _blas_promoted(a, b, common):
    """Numba's matmul takes one dtype: both operands in the common one."""
    return a.astype(common) @ b.astype(common)


@numba_jitable
def _matvec(m, v, dtype):
    """`m @ v` for a matrix and a vector, as loops: over m's rows, or along its columns when
    they are contiguous (a transposed matrix, as the cotangents read them)."""
    rows, cols = m.shape
    if cols != v.shape[0]:
        raise ValueError("matmul: the matrix's columns do not match the vector's length")
    out = np.zeros(rows, dtype)
    if m.strides[0] < m.strides[1]:
        for j in range(cols):
            vj = v[j]
            for i in range(rows):
                out[i] += m[i, j] * vj
    else:
        for i in range(rows):
            acc = out[i]
            for j in range(cols):
                acc += m[i, j] * v[j]
            out[i] = acc
    return out


@numba_jitable
def _mm_stacks(a, b, transposed):
    """`a @ b` for a stack of matrices (3-D) and a matrix or a stack, one BLAS product per matrix
    written into the result; with `transposed` 1 `a @ swapaxes(b)`, 2 `swapaxes(a) @ b` (the
    cotangents'), reading the matrix transposed (Numba's dot copies a swapped stack's matrices)."""
    return _mm_stacks_into(a, b, transposed, np.empty(_mm_stacks_shape(a, b, transposed), a.dtype))


@numba_jitable
def _mm_stacks_shape(a, b, transposed):
    """The shape of `_mm_stacks(a, b, transposed)`."""
    p = a.shape[0] if a.ndim == 3 else 1
    q = b.shape[0] if b.ndim == 3 else 1
    if p != q and p != 1 and q != 1:
        raise ValueError("matmul: the stacks' lengths do not broadcast")
    rows = a.shape[-1] if transposed == 2 else a.shape[-2]
    return (max(p, q), rows, b.shape[-2] if transposed == 1 else b.shape[-1])


@numba_jitable
def _mm_stacks_into(a, b, transposed, out):
    """`_mm_stacks(a, b, transposed)` written into `out`, an array of its shape and a's dtype (a
    call's workspace: rules/pools.py)."""
    p = a.shape[0] if a.ndim == 3 else 1
    q = b.shape[0] if b.ndim == 3 else 1
    for i in range(max(p, q)):
        left, right = _matrix(a, i if p > 1 else 0), _matrix(b, i if q > 1 else 0)
        if transposed == 1:
            np.dot(left, right.T, out[i])
        elif transposed == 2:
            np.dot(left.T, right, out[i])
        else:
            np.dot(left, right, out[i])
    return out


def _matrix(a, i):
    """Matrix `i` of a stack, or the matrix itself (in Numba only)."""


@numba_of(_matrix)
def _matrix_impl(a, i):
    if a.ndim == 3:
        return lambda a, i: a[i]
    return lambda a, i: a
