"""Numba versions of the runtime helpers that generated code calls (runtime.py says what each
computes; these give the same numbers).

Generated modules that s2sad compiles import this one, so a process compiles each helper once
for all of them; `s2sad emit --jit` copies its text into the standalone module instead. Each
helper is a plain Python function that Numba replaces by an implementation chosen from the
argument types when it compiles the gradient: a scalar or an array, the number of dimensions,
whether an optional argument was given. Numba knows all of these at compile time, so the choice
costs nothing at run time. Where Numba lacks a NumPy form (`keepdims`, tuple axes, `np.add.at`,
reshaping a strided view), the implementation spells it with forms Numba has, or with loops.

A helper with no implementation for the types it meets makes Numba fail, and the error names it.
"""

import math

import numpy as np
from numba import literal_unroll, njit, types
from numba.cpython.unsafe.tuple import tuple_setitem
from numba.extending import overload
from numba.np.numpy_support import as_dtype


def _array(t):
    return isinstance(t, types.Array)


def _absent(t, default=None):
    """An optional argument left out (or given as its default `None`)."""
    if t is None or isinstance(t, types.NoneType):
        return True
    return isinstance(t, types.Omitted) and t.value is default


def _integer(t):
    return isinstance(t, (types.Integer, types.IntegerLiteral))


# ----------------------------------------------------------------------------- values


def zeros_like(x):
    return np.zeros_like(x)


@overload(zeros_like)
def _zeros_like(x):
    if _array(x):
        if isinstance(x.dtype, types.Float):
            return lambda x: np.zeros(x.shape, dtype=x.dtype)
        return lambda x: np.zeros(x.shape)  # the cotangent of integers is a float
    return lambda x: 0.0


def inexact(x):
    return 1.0


@overload(inexact)
def _inexact(x):
    dtype = x.dtype if _array(x) else x
    if isinstance(dtype, (types.Float, types.Complex)):
        return lambda x: 1.0
    return lambda x: 0.0


def as_accumulator(dx, x):
    return dx


@overload(as_accumulator)
def _as_accumulator(dx, x):
    if _array(x) and _array(dx) and dx.ndim == x.ndim:

        def same_rank(dx, x):
            if dx.shape == x.shape:
                return dx.copy()
            return np.zeros(x.shape, dtype=dx.dtype) + dx

        return same_rank
    if _array(x):
        return lambda dx, x: np.zeros(x.shape) + dx
    return lambda dx, x: dx


def snapshot(v):
    return v


@overload(snapshot)
def _snapshot(v):
    if _array(v):
        return lambda v: v.copy()
    return lambda v: v


@njit
def grad_seed(out):
    return 1.0


@njit
def stop_gradient(x):
    return x


def reshape_like(g, x):
    return g


@overload(reshape_like)
def _reshape_like(g, x):
    if not _array(x):
        if _array(g):
            return lambda g, x: np.ascontiguousarray(g).reshape(-1)[0]
        return lambda g, x: g
    if not _array(g):
        return lambda g, x: np.full(x.shape, g)
    # Numba reshapes only contiguous arrays: a strided cotangent is copied first
    return lambda g, x: np.ascontiguousarray(g).reshape(x.shape)


# ----------------------------------------------------------------------------- broadcasting


@njit
def _sum_to(g, shape, lead):
    """Sum `g` down to `shape` (its trailing axes, each equal or 1), undoing broadcasting."""
    out = np.zeros(shape, dtype=g.dtype)
    flat_out = out.reshape(-1)
    flat = np.ascontiguousarray(g).reshape(-1)
    gshape = g.shape
    n_out = flat_out.size
    trailing = True  # g is out repeated along leading axes only
    for d in range(len(shape)):
        if shape[d] != gshape[d + lead]:
            trailing = False
    if trailing and n_out > 0:
        for r in range(flat.size // n_out):
            flat_out += flat[r * n_out : (r + 1) * n_out]
        return out
    for k in range(flat.size):
        rem = k
        o = 0
        stride = 1
        for d in range(len(gshape) - 1, lead - 1, -1):
            n = gshape[d]
            i = rem % n
            rem //= n
            m = shape[d - lead]
            if m != 1:
                o += i * stride
            stride *= m
        flat_out[o] += flat[k]
    return out


def unbroadcast(g, x):
    return g


@overload(unbroadcast)
def _unbroadcast(g, x):
    if not _array(x):
        if _array(g):
            return lambda g, x: np.sum(g)
        return lambda g, x: g
    if not _array(g):  # a scalar cotangent spread over x
        return lambda g, x: np.full(x.shape, g)
    if g.ndim < x.ndim:
        return lambda g, x: np.zeros(x.shape, dtype=g.dtype) + g
    lead = g.ndim - x.ndim
    if lead == 0:

        def same_rank(g, x):
            if g.shape == x.shape:
                return g
            return _sum_to(g, x.shape, 0)

        return same_rank
    return lambda g, x: _sum_to(g, x.shape, lead)


def _has_array(index):
    """An index with an array in it (fancy indexing), from its type."""
    items = index.types if isinstance(index, types.BaseTuple) else (index,)
    return any(_array(t) for t in items)


def _add_by_position(a, index, values):
    return None


@overload(_add_by_position)
def _add_by_position_impl(a, index, values):
    """a[index] += values for any index Numba can read with, repeated elements adding up: the
    same index applied to the flat positions of `a` says which elements it picks, in the order
    of `values` (and with Numba's own indexing rules, so it matches the primal's read)."""

    def impl(a, index, values):
        picked = np.arange(a.size).reshape(a.shape)[index]
        where = np.ascontiguousarray(picked).reshape(-1)
        flat = a.reshape(-1)
        v = _flat(values)
        if v.size == 1:
            for j in range(where.size):
                flat[where[j]] += v[0]
        else:
            for j in range(where.size):
                flat[where[j]] += v[j]

    return impl


def last_written(g, y, index):
    return g


@overload(last_written)
def _last_written(g, y, index):
    """runtime.last_written: walking the writes from the last, an element already written
    later gives zero (the positions picked come from Numba's own indexing, as the store's)."""
    if not _array(g) or not _has_array(index):
        return lambda g, y, index: g

    def impl(g, y, index):
        picked = np.ascontiguousarray(np.arange(y.size).reshape(y.shape)[index]).reshape(-1)
        out = g.copy()
        flat = out.reshape(-1)
        seen = np.zeros(y.size, dtype=np.bool_)
        for j in range(picked.size - 1, -1, -1):
            if seen[picked[j]]:
                flat[j] = 0.0
            seen[picked[j]] = True
        return out

    return impl


def add_at(a, index, values):
    np.add.at(a, index, values)


@overload(add_at)
def _add_at(a, index, values):
    if _array(index) and isinstance(index.dtype, types.Integer):
        if _array(values):

            def scatter(a, index, values):
                flat = np.ascontiguousarray(index).reshape(-1)
                v = np.ascontiguousarray(values).reshape((flat.size,) + a.shape[1:])
                for j in range(flat.size):
                    a[flat[j]] += v[j]

            return scatter

        def scatter_scalar(a, index, values):
            flat = np.ascontiguousarray(index).reshape(-1)
            for j in range(flat.size):
                a[flat[j]] += values

        return scatter_scalar

    if _element(a, index):

        def element(a, index, values):
            a[index] += values

        return element
    if _has_array(index):  # an array inside a tuple index: by flat positions
        return lambda a, index, values: _add_by_position(a, index, values)

    def basic(a, index, values):  # an index that names no element twice: a view
        view = a[index]
        view += values

    return basic


# ----------------------------------------------------------------------------- reductions


def expand_reduced(g, x, axis=None, keepdims=False):
    return g


@overload(expand_reduced)
def _expand_reduced(g, x, axis=None, keepdims=False):
    if not _array(x):
        return lambda g, x, axis=None, keepdims=False: g
    if not _array(g):  # reduced to a scalar: every element gets it
        return lambda g, x, axis=None, keepdims=False: np.full(x.shape, g)
    if g.ndim == x.ndim:  # kept dimensions broadcast as they are
        return lambda g, x, axis=None, keepdims=False: np.zeros(x.shape, dtype=g.dtype) + g
    if g.ndim == x.ndim - 1 and _integer(axis):

        def one_axis(g, x, axis=None, keepdims=False):
            a = axis if axis >= 0 else axis + x.ndim
            return np.zeros(x.shape, dtype=g.dtype) + np.expand_dims(g, a)

        return one_axis
    if isinstance(axis, types.BaseTuple) and g.ndim == x.ndim - len(axis):

        def axes(g, x, axis=None, keepdims=False):
            # the reduced axes put back with length 1, then broadcast
            shape = x.shape
            for a in literal_unroll(axis):
                shape = tuple_setitem(shape, a if a >= 0 else a + x.ndim, 1)
            return np.zeros(x.shape, dtype=g.dtype) + np.ascontiguousarray(g).reshape(shape)

        return axes
    return None


def _count(x, axis):
    return x.size


@overload(_count)
def _count_impl(x, axis):
    if not _array(x):
        return lambda x, axis: 1
    if _absent(axis):
        return lambda x, axis: x.size
    if _integer(axis):
        return lambda x, axis: x.shape[axis]
    if isinstance(axis, types.BaseTuple):

        def product(x, axis):
            n = 1
            for a in literal_unroll(axis):
                n *= x.shape[a]
            return n

        return product
    return None


def mean_vjp(g, x, axis=None, keepdims=False):
    return g


@overload(mean_vjp)
def _mean_vjp(g, x, axis=None, keepdims=False):
    def impl(g, x, axis=None, keepdims=False):
        return expand_reduced(g, x, axis, keepdims) / _count(x, axis)

    return impl


def prod_vjp(g, x, ans, axis=None, keepdims=False):
    return g


@overload(prod_vjp)
def _prod_vjp(g, x, ans, axis=None, keepdims=False):
    if not _array(x):
        return lambda g, x, ans, axis=None, keepdims=False: g
    if not _absent(axis):
        return None

    def impl(g, x, ans, axis=None, keepdims=False):
        # the product of all other elements, exact where x holds zeros
        flat = np.ascontiguousarray(x).reshape(-1)
        others = np.empty(flat.size)
        acc = 1.0
        for i in range(flat.size):
            others[i] = acc
            acc *= flat[i]
        acc = 1.0
        for i in range(flat.size - 1, -1, -1):
            others[i] *= acc
            acc *= flat[i]
        return g * others.reshape(x.shape)

    return impl


def extremum_vjp(g, x, ans, axis=None, keepdims=False):
    return g


@overload(extremum_vjp)
def _extremum_vjp(g, x, ans, axis=None, keepdims=False):
    if not _array(x):
        return lambda g, x, ans, axis=None, keepdims=False: g
    if not _absent(axis):
        return None

    def impl(g, x, ans, axis=None, keepdims=False):
        hit = x == ans  # ties share the cotangent evenly
        return g * hit / np.sum(hit)

    return impl


def var_vjp(g, x, axis=None, ddof=0, keepdims=False):
    return g


@overload(var_vjp)
def _var_vjp(g, x, axis=None, ddof=0, keepdims=False):
    if not _array(x):
        return lambda g, x, axis=None, ddof=0, keepdims=False: 0.0 * g
    if not _absent(axis):
        return None

    def impl(g, x, axis=None, ddof=0, keepdims=False):
        return g * (2.0 / (x.size - ddof)) * (x - np.mean(x))

    return impl


def std_vjp(g, x, ans, axis=None, ddof=0, keepdims=False):
    return g


@overload(std_vjp)
def _std_vjp(g, x, ans, axis=None, ddof=0, keepdims=False):
    if not _array(x) or not _absent(axis):
        return None

    def impl(g, x, ans, axis=None, ddof=0, keepdims=False):
        scale = ans * (x.size - ddof)  # 0 where every centered value is 0: a zero derivative
        return g * (x - np.mean(x)) / (scale if scale != 0 else np.inf)

    return impl


def norm_vjp(g, x, ans, ord=None, axis=None, keepdims=False):
    return g


@overload(norm_vjp)
def _norm_vjp(g, x, ans, ord=None, axis=None, keepdims=False):
    if not _array(x) or not _absent(axis):
        return None
    if _absent(ord):  # the 2-norm of a vector, the Frobenius norm of a matrix
        return lambda g, x, ans, ord=None, axis=None, keepdims=False: g * x / ans
    if not isinstance(ord, (types.Number, types.IntegerLiteral)):
        return None
    if x.ndim == 1:

        def vector(g, x, ans, ord=None, axis=None, keepdims=False):
            if ord == 2:
                return g * x / ans
            if ord == 1:
                return g * np.sign(x)
            if ord == np.inf or ord == -np.inf:
                hit = np.abs(x) == ans
                return g * hit * np.sign(x) / np.sum(hit)
            if ord == 0:
                return np.zeros(x.shape)
            return g * np.sign(x) * np.abs(x) ** (ord - 1) / ans ** (ord - 1)

        return vector
    if x.ndim == 2:

        def matrix(g, x, ans, ord=None, axis=None, keepdims=False):
            if ord == 2 or ord == -2:
                u, s, vt = np.linalg.svd(np.ascontiguousarray(x), full_matrices=False)
                k = 0 if ord == 2 else s.size - 1
                return g * _outer(u[:, k], vt[k, :])
            if ord == 1 or ord == -1:  # the largest (smallest) column sum of |x|
                sums = np.sum(np.abs(x), axis=0)
                best = np.max(sums) if ord > 0 else np.min(sums)
                hit = sums == best
                share = hit / np.sum(hit)
                return g * np.sign(x) * share.reshape((1, share.size))
            if ord == np.inf or ord == -np.inf:  # the largest (smallest) row sum of |x|
                sums = np.sum(np.abs(x), axis=1)
                best = np.max(sums) if ord > 0 else np.min(sums)
                hit = sums == best
                share = hit / np.sum(hit)
                return g * np.sign(x) * share.reshape((share.size, 1))
            raise ValueError("s2sad has no derivative for this matrix norm order")

        return matrix
    return None


# ----------------------------------------------------------------------------- elementwise


def pow_vjp_exponent(g, ans, x):
    return g


@overload(pow_vjp_exponent)
def _pow_vjp_exponent(g, ans, x):
    if _array(x):
        return lambda g, ans, x: g * ans * np.log(np.where(x > 0, x, 1.0))
    return lambda g, ans, x: g * ans * (math.log(x) if x > 0 else 0.0)


def even_split(x1, x2):
    return 1.0


@overload(even_split)
def _even_split(x1, x2):
    if _array(x1) or _array(x2):
        return lambda x1, x2: np.where(x1 == x2, 0.5, 1.0)
    return lambda x1, x2: 0.5 if x1 == x2 else 1.0


def clip_passes(a, a_min, a_max):
    return True


@overload(clip_passes)
def _clip_passes(a, a_min, a_max):
    low, high = not _absent(a_min), not _absent(a_max)
    if low and high:
        return lambda a, a_min, a_max: (a >= a_min) & (a <= a_max)
    if low:
        return lambda a, a_min, a_max: a >= a_min
    if high:
        return lambda a, a_min, a_max: a <= a_max
    if _array(a):
        return lambda a, a_min, a_max: np.ones(a.shape, dtype=np.bool_)
    return lambda a, a_min, a_max: True


# ----------------------------------------------------------------------------- linear algebra
# Numba's matmul and dot take vectors and matrices (no stacks), so these are the four cases.


def _mm(a, b):
    return a @ b


@overload(_mm)
def _mm_impl(a, b):
    """a @ b where the dtypes differ (a float32 primal meets a float64 cotangent): Numba's
    matmul takes one dtype, so both go to the common one."""
    if a.dtype == b.dtype:
        return lambda a, b: a @ b
    common = np.promote_types(as_dtype(a.dtype), as_dtype(b.dtype))
    return lambda a, b: a.astype(common) @ b.astype(common)


def _solve(a, b):
    return np.linalg.solve(a, b)


@overload(_solve)
def _solve_impl(a, b):
    if a.dtype == b.dtype:
        return lambda a, b: np.linalg.solve(np.ascontiguousarray(a), b)
    common = np.promote_types(as_dtype(a.dtype), as_dtype(b.dtype))
    return lambda a, b: np.linalg.solve(a.astype(common), b.astype(common))


@njit
def _outer(a, b):
    """The outer product of two vectors (np.outer compiles slowly in Numba)."""
    return np.expand_dims(a, 1) * b


def matmul_vjp_lhs(g, a, b):
    return g


@overload(matmul_vjp_lhs)
def _matmul_vjp_lhs(g, a, b):
    if not (_array(a) and _array(b)) or a.ndim > 2 or b.ndim > 2:
        return None
    if a.ndim == 1 and b.ndim == 1:
        return lambda g, a, b: g * b
    if b.ndim == 1:
        return lambda g, a, b: _outer(g, b)
    if a.ndim == 1:
        return lambda g, a, b: _mm(b, g)
    return lambda g, a, b: _mm(g, b.T)


def matmul_vjp_rhs(g, a, b):
    return g


@overload(matmul_vjp_rhs)
def _matmul_vjp_rhs(g, a, b):
    if not (_array(a) and _array(b)) or a.ndim > 2 or b.ndim > 2:
        return None
    if a.ndim == 1 and b.ndim == 1:
        return lambda g, a, b: g * a
    if a.ndim == 1:
        return lambda g, a, b: _outer(a, g)
    return lambda g, a, b: _mm(a.T, g)


def dot_vjp_lhs(g, a, b):
    return g


@overload(dot_vjp_lhs)
def _dot_vjp_lhs(g, a, b):
    if not _array(a) or not _array(b):
        return lambda g, a, b: unbroadcast(g * b, a)
    return lambda g, a, b: matmul_vjp_lhs(g, a, b)


def dot_vjp_rhs(g, a, b):
    return g


@overload(dot_vjp_rhs)
def _dot_vjp_rhs(g, a, b):
    if not _array(a) or not _array(b):
        return lambda g, a, b: unbroadcast(g * a, b)
    return lambda g, a, b: matmul_vjp_rhs(g, a, b)


def _flat(v):
    return v


@overload(_flat)
def _flat_impl(v):
    if _array(v):
        return lambda v: np.ravel(v)
    return lambda v: np.full(1, v)


def outer_vjp_lhs(g, a, b):
    return g


@overload(outer_vjp_lhs)
def _outer_vjp_lhs(g, a, b):
    if _array(a):
        return lambda g, a, b: reshape_like(_mm(g, _flat(b)), a)
    return lambda g, a, b: np.sum(_mm(g, _flat(b)))


def outer_vjp_rhs(g, a, b):
    return g


@overload(outer_vjp_rhs)
def _outer_vjp_rhs(g, a, b):
    if _array(b):
        return lambda g, a, b: reshape_like(_mm(_flat(a), g), b)
    return lambda g, a, b: np.sum(_mm(_flat(a), g))


def trace_vjp(g, a, offset=0, axis1=0, axis2=1):
    return g


@overload(trace_vjp)
def _trace_vjp(g, a, offset=0, axis1=0, axis2=1):
    if not _array(a) or a.ndim != 2:
        return None

    def impl(g, a, offset=0, axis1=0, axis2=1):
        out = np.zeros(a.shape)
        for i in range(a.shape[0]):
            j = i + offset
            if 0 <= j < a.shape[1]:
                out[i, j] = g
        if axis1 % 2 == 1 and axis2 % 2 == 0:  # the trace of the transpose
            return out.T.copy()
        return out

    return impl


def trace_last(a):
    return a


@overload(trace_last)
def _trace_last(a):
    if _array(a) and a.ndim == 2:  # Numba's np.trace takes no axes: matrices only
        return lambda a: np.trace(a)
    return None


def inv_vjp(g, ans):
    return g


@overload(inv_vjp)
def _inv_vjp(g, ans):
    return lambda g, ans: -_mm(_mm(ans.T, g), ans.T)


def solve_vjp_b(g, a, b):
    return g


@overload(solve_vjp_b)
def _solve_vjp_b(g, a, b):
    return lambda g, a, b: _solve(a.T, g)


def solve_jvp_a(t, a, b, ans):
    return t


@overload(solve_jvp_a)
def _solve_jvp_a(t, a, b, ans):
    return lambda t, a, b, ans: -_solve(a, _mm(t, ans))


def solve_vjp_a(g, a, b, ans):
    return g


@overload(solve_vjp_a)
def _solve_vjp_a(g, a, b, ans):
    if _array(b) and b.ndim == 1:
        return lambda g, a, b, ans: -_outer(solve_vjp_b(g, a, b), ans)
    return lambda g, a, b, ans: -_mm(solve_vjp_b(g, a, b), ans.T)


def det_vjp(g, a, ans):
    return g


@overload(det_vjp)
def _det_vjp(g, a, ans):
    return lambda g, a, ans: (g * ans) * np.linalg.inv(np.ascontiguousarray(a)).T


# ----------------------------------------------------------------------------- scans and diagonals
# Numba's np.cumsum, np.cumprod and np.diff take no axis: these cover the flattened scans, the
# differences of a vector, and np.diag.


def cumsum_vjp(g, a, axis=None):
    return g


@overload(cumsum_vjp)
def _cumsum_vjp(g, a, axis=None):
    if not (_array(g) and _absent(axis)):
        return None

    def impl(g, a, axis=None):
        flat = np.ascontiguousarray(g).reshape(-1)
        return reshape_like(np.cumsum(flat[::-1])[::-1], a)

    return impl


@njit
def _cumprod_scan(x, s, forward):
    """forward: sum over i <= j of s_i d cumprod(x)_j / d x_i, for each j (the tangent);
    else: sum over j >= i of s_j times the same, for each i (the cotangent). Exact at zeros."""
    n = x.size
    out = np.zeros(n)
    for i in range(n):
        p = 1.0  # the product of x_0..x_j without x_i
        for k in range(i):
            p *= x[k]
        for j in range(i, n):
            if j > i:
                p *= x[j]
            if forward:
                out[j] += s[i] * p
            else:
                out[i] += s[j] * p
    return out


def cumprod_vjp(g, a, axis=None):
    return g


@overload(cumprod_vjp)
def _cumprod_vjp(g, a, axis=None):
    if not (_array(g) and _array(a) and _absent(axis)):
        return None

    def impl(g, a, axis=None):
        x = np.ascontiguousarray(a).reshape(-1)
        return reshape_like(_cumprod_scan(x, np.ascontiguousarray(g).reshape(-1), False), a)

    return impl


def cumprod_jvp(t, a, axis=None):
    return t


@overload(cumprod_jvp)
def _cumprod_jvp(t, a, axis=None):
    if not (_array(t) and _array(a) and _absent(axis)):
        return None

    def impl(t, a, axis=None):
        x = np.ascontiguousarray(a).reshape(-1)
        return _cumprod_scan(x, np.ascontiguousarray(t).reshape(-1), True)

    return impl


def diff_vjp(g, a, n=1, axis=-1):
    return g


@overload(diff_vjp)
def _diff_vjp(g, a, n=1, axis=-1):
    if not (_array(a) and a.ndim == 1 and _array(g)):
        return None

    def impl(g, a, n=1, axis=-1):
        out = np.zeros(g.shape[0])
        out[:] = g
        for _ in range(min(n, a.shape[0])):
            m = out.size
            wider = np.zeros(m + 1)
            for i in range(m):
                wider[i + 1] += out[i]
                wider[i] -= out[i]
            out = wider
        return out

    return impl


def diag_vjp(g, v, k=0):
    return g


@overload(diag_vjp)
def _diag_vjp(g, v, k=0):
    if not (_array(v) and _array(g)):
        return None
    if v.ndim == 1:

        def read(g, v, k=0):
            out = np.zeros(v.shape[0])
            for i in range(v.shape[0]):
                out[i] = g[i + max(0, -k), i + max(0, k)]
            return out

        return read

    def place(g, v, k=0):
        out = np.zeros(v.shape)
        for i in range(g.shape[0]):
            out[i + max(0, -k), i + max(0, k)] = g[i]
        return out

    return place


# ----------------------------------------------------------------------------- shape


def concatenate_vjp(g, arrays, k, axis=0):
    return g


@overload(concatenate_vjp)
def _concatenate_vjp(g, arrays, k, axis=0):
    if not _array(g) or not _integer(axis) and not isinstance(axis, types.Omitted):
        return None

    def impl(g, arrays, k, axis=0):
        ax = axis if axis >= 0 else axis + g.ndim
        start = 0
        size = 0
        i = 0
        for a in literal_unroll(arrays):
            if i < k:
                start += a.shape[ax]
            if i == k:
                size = a.shape[ax]
            i += 1
        return np.moveaxis(np.moveaxis(g, ax, 0)[start : start + size], 0, ax)

    return impl


def stack_vjp(g, k, axis=0):
    return g


@overload(stack_vjp)
def _stack_vjp(g, k, axis=0):
    def impl(g, k, axis=0):
        ax = axis if axis >= 0 else axis + g.ndim
        return np.moveaxis(g, ax, 0)[k]

    return impl


# ----------------------------------------------------------------------------- indexing


def scatter_added(a, index, values):
    return a


@overload(scatter_added)
def _scatter_added(a, index, values):
    def added(a, index, values):
        out = a.copy()
        add_at(out, index, values)
        return out

    return added


def getitem_vjp(g, x, index):
    return g


@overload(getitem_vjp)
def _getitem_vjp(g, x, index):
    if _array(index) and isinstance(index.dtype, types.Boolean):
        if index.ndim == x.ndim:  # a mask over the elements

            def elements(g, x, index):
                dx = np.zeros(x.shape)
                flat = dx.reshape(-1)
                mask = np.ascontiguousarray(index).reshape(-1)
                j = 0
                for i in range(flat.size):
                    if mask[i]:
                        flat[i] += g[j]
                        j += 1
                return dx

            return elements

        def rows(g, x, index):  # a mask over the first axis
            dx = np.zeros(x.shape)
            j = 0
            for i in range(index.size):
                if index[i]:
                    dx[i] += g[j]
                    j += 1
            return dx

        return rows
    if _array(index):  # integer indices: repeated ones add up

        def gather(g, x, index):
            dx = np.zeros(x.shape)
            add_at(dx, index, g)
            return dx

        return gather

    if _has_array(index):  # an array inside a tuple index: by flat positions

        def positions(g, x, index):
            dx = np.zeros(x.shape)
            _add_by_position(dx, index, g)
            return dx

        return positions
    if _element(x, index):

        def element(g, x, index):
            dx = np.zeros(x.shape)
            dx[index] = g
            return dx

        return element

    def basic(g, x, index):  # a view: added into in place
        dx = np.zeros(x.shape)
        view = dx[index]
        view += g
        return dx

    return basic


def _element(x, index):
    """Whether `x[index]` is one element (an integer per axis, an Ellipsis aside), known from
    the types."""
    items = index.types if isinstance(index, types.BaseTuple) else (index,)
    items = [t for t in items if not isinstance(t, types.EllipsisType)]
    return _array(x) and len(items) == x.ndim and all(_integer(t) for t in items)
