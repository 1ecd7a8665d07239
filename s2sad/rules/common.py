"""Helpers every family shares, each in its NumPy, batched and Numba forms side by side:
broadcasting, zeros and seeds, accumulators, reductions' axes, and the tests of Numba types that
the Numba forms read (rules/helpers.py says how the forms are registered).

The NumPy forms are plain functions with no dependency on the rest of s2sad, so `s2sad emit`
copies their source into standalone modules. Each takes the upstream cotangent `g` first, then
the primal values it needs, and returns a contribution with the primal's exact shape. In batched
code every cotangent (reverse mode) or tangent (forward mode) carries one extra leading axis, the
batch: row `b` is the derivative along basis direction `b`; primal values never do. A batched
form reads axis 0 as the batch, so an axis argument moves up by one (a negative one stays).
Numba forms choose an implementation from the argument types when Numba compiles the gradient;
where Numba lacks a NumPy form (`keepdims`, tuple axes, `np.add.at`, reshaping a strided view),
the implementation spells it with forms Numba has, or with loops.
"""

import typing

import numpy as np

from ..errors import NonScalarOutputError
from .buffers import _broadcast_view
from .helpers import batched_helper, batched_of, helper, numba_jitable, numba_of, type_test
from .registry import linear

if typing.TYPE_CHECKING:  # bound by s2sad.numba_helpers (see rules/helpers.py)
    from numba import literal_unroll, types
    from numba.cpython.unsafe.tuple import tuple_setitem
    from numba.np.numpy_support import as_dtype

# ----------------------------------------------------------------------------- Numba type tests


@type_test
def _array(t):
    return isinstance(t, types.Array)


@type_test
def _absent(t, default=None):
    """An optional argument left out (or given as its default `None`)."""
    if t is None or isinstance(t, types.NoneType):
        return True
    return isinstance(t, types.Omitted) and t.value is default


@type_test
def _integer(t):
    return isinstance(t, (types.Integer, types.IntegerLiteral))


@type_test
def _has_array(index):
    """An index with an array in it (fancy indexing), from its type."""
    items = index.types if isinstance(index, types.BaseTuple) else (index,)
    return any(_array(t) for t in items)


@type_test
def _element(x, index):
    """Whether `x[index]` is one element (an integer per axis, an Ellipsis aside), known from
    the types."""
    items = index.types if isinstance(index, types.BaseTuple) else (index,)
    items = [t for t in items if not isinstance(t, types.EllipsisType)]
    return _array(x) and len(items) == x.ndim and all(_integer(t) for t in items)


# ----------------------------------------------------------------------------- broadcasting


@helper(jvp=linear("g"), shape_only=("x",), shaped_like="x")
def unbroadcast(g, x):
    """Sum `g` down to the shape of `x`, undoing NumPy broadcasting."""
    plain = type(g) is np.ndarray and type(x) is np.ndarray  # (without np.shape's, np.sum's layers)
    shape = x.shape if plain else np.shape(x)
    if (g.shape if plain else np.shape(g)) == shape:
        return g
    total = np.add.reduce if plain else np.sum
    lead = np.ndim(g) - len(shape)
    if lead > 0:
        g = total(g, axis=tuple(range(lead)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and np.shape(g)[i] != 1)
    if axes:
        g = total(g, axis=axes, keepdims=True)
    return np.reshape(g, shape)


@batched_of(unbroadcast)
def batched_unbroadcast(g, x):
    """Sum each row of `g` down to the shape of `x`, undoing NumPy broadcasting; never sums the
    batch axis."""
    shape = np.shape(x)
    inner = np.shape(g)[1:]
    if inner == shape:
        return g
    if len(inner) < len(shape):
        g = _lift(g, len(shape))
        return np.broadcast_to(g, np.shape(g)[:1] + shape)
    lead = len(inner) - len(shape)
    if lead > 0:
        g = np.sum(g, axis=tuple(range(1, lead + 1)))
    axes = tuple(i + 1 for i, n in enumerate(shape) if n == 1 and np.shape(g)[i + 1] != 1)
    if axes:
        g = np.sum(g, axis=axes, keepdims=True)
    return np.reshape(g, np.shape(g)[:1] + shape)


@numba_jitable
def _sum_to(g, shape, lead):
    """Sum `g` down to `shape` (its trailing axes, each equal or 1), undoing broadcasting: row by
    row along g's last axis (summed, or added to out's), an odometer over g's other axes
    keeping the row's offset in `out` (from each axis' stride there, 0 where summed)."""
    out = np.zeros(shape, dtype=g.dtype)
    flat_out, flat = out.reshape(-1), np.ascontiguousarray(g).reshape(-1)
    nd, inner = g.ndim, g.shape[-1]
    strides, counter = np.zeros(nd, np.int64), np.zeros(nd, np.int64)
    stride, o = 1, 0
    for d in range(nd - 1, lead - 1, -1):
        if shape[d - lead] != 1:
            strides[d] = stride
        stride *= shape[d - lead]
    for start in range(0, flat.size if inner > 0 else 0, max(inner, 1)):
        if strides[nd - 1] == 0:
            total = flat[start]
            for i in range(start + 1, start + inner):
                total += flat[i]
            flat_out[o] += total
        else:
            for i in range(inner):
                flat_out[o + i] += flat[start + i]
        d = nd - 2
        while d >= 0:  # the next row: the odometer's step
            counter[d] += 1
            o += strides[d]
            if counter[d] < g.shape[d]:
                break
            o -= strides[d] * g.shape[d]
            counter[d] = 0
            d -= 1
    return out


@numba_of(unbroadcast)
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
    if g.ndim == 0:  # both 0-d
        return lambda g, x: g
    if lead == 0:

        def same_rank(g, x):
            if g.shape == x.shape:
                return g
            return _sum_to(g, x.shape, 0)

        return same_rank
    return lambda g, x: _sum_to(g, x.shape, lead)


def _shift(axis):
    """An axis (or tuple of axes) of a value, as an axis of its batched counterpart."""
    if isinstance(axis, (tuple, list)):
        return tuple(_shift(a) for a in axis)
    return axis + 1 if axis >= 0 else axis


def _lift(t, ndim):
    """`t` with size-1 axes inserted after the batch axis, so its value part has `ndim` axes."""
    missing = ndim - (np.ndim(t) - 1)
    if missing <= 0:
        return t
    t = np.asarray(t)
    return np.reshape(t, t.shape[:1] + (1,) * missing + t.shape[1:])


@batched_helper
def batched_lift(t, like):
    """`t` with as many value axes as `like` has axes: broadcasts against `like` row by row."""
    return t if isinstance(like, UnboundLocalError) else _lift(t, np.ndim(like))  # (unbound.py)


@batched_helper
def batched_broadcast_to(array, shape, subok=False):
    """np.broadcast_to on every row."""
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    t = _lift(array, len(shape))
    return np.broadcast_to(t, np.shape(t)[:1] + shape)


# ----------------------------------------------------------------------------- seeds and zeros


@helper(nondiff=True)
def grad_seed(out):
    """The seed 1 for a scalar output; anything else is refused."""
    if type(out) is float or type(out) is np.float64:  # the common case, without np.ndim's
        return type(out)(1)
    if np.ndim(out) != 0 or not np.issubdtype(np.result_type(out), np.inexact):
        raise NonScalarOutputError(
            f"grad needs a function with a scalar float output, got shape {np.shape(out)} "
            f"and dtype {np.result_type(out)}; use s2sad.vjp for a seeded product or "
            "s2sad.jacobian for the full derivative"
        )
    return np.ones_like(out)[()] if isinstance(out, np.ndarray) else type(out)(1)


@numba_of(grad_seed)
def _grad_seed(out):
    # jitted code differentiates scalar outputs only; a float32 output's seed is a float32 1,
    # so the adjoint stays in the output's dtype as in Python (1.0 would promote it to float64)
    if isinstance(out, types.Float):
        one = as_dtype(out).type(1)
        return lambda out: one
    return lambda out: 1.0


@helper(jvp=linear("v"), batch_safe=True, shape_only=("x",), shaped_like="v")
def in_dtype_of(v, x):
    """`v` in the float dtype of `x`, in compiled code: Numba promotes a float32 value that meets
    a Python float (`0.5 * k * u`) to float64 where NumPy keeps float32, so jitted code returns
    each gradient through this (and fused loops, pipeline/fusion, their results). NumPy's own
    promotions already give the dtype in Python: `v` as it is."""
    return v


@numba_of(in_dtype_of)
def _in_dtype_of(v, x):
    want = x.dtype if _array(x) else x
    have = v.dtype if _array(v) else v
    if not (isinstance(want, types.Float) and isinstance(have, types.Float)) or want == have:
        return lambda v, x: v  # nothing to cast (a float64 gradient of a float64 input)
    dtype = as_dtype(want)
    if _array(v):
        return lambda v, x: v.astype(dtype)
    cast = dtype.type
    return lambda v, x: cast(v)


@helper(nondiff=True)
def output_kind(out):
    """What a jitted `grad` returns beside the gradient: the output itself, for `grad_seed`'s
    check of its kind. Compiled, a float or complex number is 1.0 (the value is not read, so
    Numba drops the code computing it where the gradient needs none, as JAX's grad does)."""
    return out


@numba_of(output_kind)
def _output_kind(out):
    if isinstance(out, (types.Float, types.Complex)):
        return lambda out: 1.0
    return lambda out: out  # an array or an integer: grad_seed refuses it, as in Python


@helper(nondiff=True, shape_only=("x",))
def inexact(x):
    """1.0 for a float value, 0.0 for integers and booleans: the weight of a derivative reaching
    a value whose dtype another argument chose (np.full_like(a, v) with an integer `a` is
    piecewise constant in v)."""
    return 1.0 if np.issubdtype(np.result_type(x), np.inexact) else 0.0


@numba_of(inexact)
def _inexact(x):
    dtype = x.dtype if _array(x) else x
    if isinstance(dtype, (types.Float, types.Complex)):
        return lambda x: 1.0
    return lambda x: 0.0


@helper(jvp=linear("dx"), shape_only=("x",), shaped_like="x")
def as_accumulator(dx, x):
    """A fresh array shaped like `x` holding `dx`, safe to update in place."""
    out = np.zeros(np.shape(x), dtype=np.result_type(dx, x, np.float32))
    out += dx
    return out


@numba_of(as_accumulator)
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


@batched_helper
def batched_accumulator(dx, x):
    """A fresh array holding the batched `dx`, safe to update in place."""
    out = np.zeros(np.shape(dx)[:1] + np.shape(x), dtype=np.result_type(dx, x, np.float32))
    out += dx
    return out


@helper
def snapshot(v):
    """The value of a read from an array the function later writes into (a view would change)."""
    return v.copy() if isinstance(v, np.ndarray) else v


@numba_of(snapshot)
def _snapshot(v):
    if _array(v):
        return lambda v: v.copy()
    return lambda v: v


@helper(nondiff=True)
def shape_stub(x):
    """What a tape keeps of an array the adjoint reads only for its shape and dtype: an array of
    that shape and dtype repeating one zero (no copy, no memory), read-only so a misuse fails.
    A small array is kept as it is: holding it costs less than making the stand-in."""
    if type(x) is not np.ndarray or x.size < 4096:
        return x
    return np.ndarray(x.shape, x.dtype, bytes(x.itemsize), 0, (0,) * x.ndim)


@numba_of(shape_stub)
def _shape_stub(x):
    if _array(x):
        zero = np.zeros((), as_dtype(x.dtype))  # a constant of the compiled code: no allocation
        return lambda x: np.broadcast_to(zero, x.shape)
    return lambda x: x


@helper
def stop_gradient(x):
    """Identity on values; no cotangent flows back through it."""
    return x


@numba_of(stop_gradient)
def _stop_gradient(x):
    return lambda x: x


@helper(nondiff=True, shape_only=("x",), shaped_like="x")
def zeros_like(x):
    """A zero cotangent with the shape and dtype of `x` (a Python float stays a float)."""
    if isinstance(x, (float, int, UnboundLocalError)):  # (rules/unbound.py's stand-in: 0.0)
        return 0.0
    if isinstance(x, (list, tuple)):  # (code a generic module runs on a list it indexes)
        raise TypeError(
            "s2sad: this gradient adds into a list's elements at an index the code computes "
            "(`ws[k]` in a loop), which needs one array: pass np.stack(...) of the elements"
        )
    return np.zeros(np.shape(x), dtype=np.result_type(x, np.float32))


@numba_of(zeros_like)
def _zeros_like(x):
    if _array(x):
        if isinstance(x.dtype, types.Float):
            return lambda x: np.zeros(x.shape, dtype=x.dtype)
        return lambda x: np.zeros(x.shape)  # the cotangent of integers is a float
    return lambda x: 0.0


@helper(nondiff=True, shape_only=("x",), shaped_like="x")
def sum_zeros_like(x):
    """The zero a loop adds an array's cotangents into (pipeline/reverse_control.py): in
    Python as `zeros_like`, the first addition promoting it as NumPy does."""
    return zeros_like(x)


@numba_of(sum_zeros_like)
def _sum_zeros_like(x):
    # Numba types a name once, so the sum starts in the type NumPy's first addition of a
    # float64 cotangent would give it (float32 + float64 is float64): a float32 input's
    # cotangent, summed over the loop as in Python, is cast back when returned
    if _array(x):
        if isinstance(x.dtype, types.Float) and x.dtype.bitwidth >= 64:
            return lambda x: np.zeros(x.shape, dtype=x.dtype)
        return lambda x: np.zeros(x.shape)  # float64, as the sum of an integer's cotangents
    return lambda x: 0.0


@batched_helper
def batched_zeros(batch, x):
    """A zero cotangent or tangent: `batch` rows shaped like `x`.

    `x` may be a function giving the value (`lambda: v`) where `v` may be unassigned, a name a
    loop assigns that the loop may never have reached; its adjoint is then never read."""
    try:  # (NameError: an unassigned name, or rules/unbound.py's stand-in for one)
        x = x() if callable(x) else x
        shape = np.shape(x)
    except NameError:
        return 0.0
    dtype = np.result_type(x, np.float32) if isinstance(x, (np.ndarray, np.generic)) else float
    return np.zeros((batch,) + shape, dtype=dtype)


@batched_helper
def stack_rows(rows):
    """One row per batch element, from a rule applied row by row (a tuple of stacks for a rule
    giving several cotangents)."""
    if isinstance(rows[0], tuple):
        return tuple(np.stack([np.asarray(r[k]) for r in rows]) for k in range(len(rows[0])))
    return np.stack([np.asarray(r) for r in rows])


@helper(jvp=linear("g"), shaped_like="x")
def reshape_like(g, x):
    """`g` in the shape of `x` (the adjoint of a reshape; jitted code calls it, since Numba
    reshapes only contiguous arrays)."""
    return np.reshape(g, np.shape(x))


@numba_of(reshape_like)
def _reshape_like(g, x):
    if not _array(x):
        if _array(g):
            return lambda g, x: np.ascontiguousarray(g).reshape(-1)[0]
        return lambda g, x: g
    if not _array(g):
        return lambda g, x: np.full(x.shape, g)
    # Numba reshapes only contiguous arrays: a strided cotangent is copied first
    return lambda g, x: np.ascontiguousarray(g).reshape(x.shape)


# ----------------------------------------------------------------------------- scatter-adds


@helper
def add_at(a, index, values):
    """`a[index] += values` with repeated indices adding up (np.add.at, which Numba lacks).
    The cotangent of a tuple result is an array of objects, its parts: one part adds whole."""
    if np.asarray(a).dtype == object and isinstance(index, (int, np.integer)):
        a[index] = a[index] + values
        return
    np.add.at(a, index, values)


@numba_jitable
def _in_range(i, n):
    """`i`, an index of an axis of length `n` (negative ones from its end), or IndexError as
    NumPy raises: Numba's helpers write unchecked, and `np.add.at` in the user's code is an
    index of theirs (jit.py checks the generated code's own subscripts)."""
    if i < -n or i >= n:
        raise IndexError("index is out of bounds")
    return i


@numba_of(add_at)
def _add_at(a, index, values):
    if _array(index) and isinstance(index.dtype, types.Integer):
        if _array(values):

            def scatter(a, index, values):
                flat = np.ascontiguousarray(index).reshape(-1)
                v = np.ascontiguousarray(values).reshape((flat.size,) + a.shape[1:])
                for j in range(flat.size):
                    a[_in_range(flat[j], a.shape[0])] += v[j]

            return scatter

        def scatter_scalar(a, index, values):
            flat = np.ascontiguousarray(index).reshape(-1)
            for j in range(flat.size):
                a[_in_range(flat[j], a.shape[0])] += values

        return scatter_scalar

    if _element(a, index) and _integer(index):

        def one(a, index, values):
            a[_in_range(index, a.shape[0])] += values

        return one
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


def _add_by_position(a, index, values):
    return None


@numba_of(_add_by_position)
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


def _flat(v):
    return v


@numba_of(_flat)
def _flat_impl(v):
    if _array(v) or isinstance(v, types.List):  # (data the user gives as a list of numbers)
        return lambda v: np.ravel(np.asarray(v))
    return lambda v: np.full(1, v)


# ----------------------------------------------------------------------------- reduced axes


@helper
def _axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (tuple, list)):
        return tuple(sorted(a % ndim for a in axis))
    return (axis % ndim,)


@batched_helper
def _row_axes(axis, ndim):
    """The axes `_axes` names in a value of `ndim` axes, in each row of its batched counterpart."""
    return tuple(a + 1 for a in _axes(axis, ndim))


@helper(jvp=linear("g"), shape_only=("x",), shaped_like="x")
def expand_reduced(g, x, axis=None, keepdims=False):
    """Broadcast the cotangent of a reduction back over the reduced axes of `x` (for plain float
    arrays, np.broadcast_to's read-only view made without its Python cost: rules/buffers.py)."""
    if type(x) is np.ndarray and x.size and (type(g) is np.ndarray or isinstance(g, np.generic)):
        view = _broadcast_view(np.asarray(g), x.shape, () if keepdims else _axes(axis, x.ndim))
        if view is not None:
            return view
    if not keepdims and axis is not None:
        g = np.expand_dims(g, _axes(axis, np.ndim(x)))
    return np.broadcast_to(g, np.shape(x))


@batched_of(expand_reduced)
def batched_expand_reduced(g, x, axis=None, keepdims=False):
    """Broadcast each row of a reduction's cotangent back over the reduced axes of `x`."""
    g = np.asarray(g)
    if not keepdims:
        g = np.expand_dims(g, _row_axes(axis, np.ndim(x)))
    return np.broadcast_to(g, g.shape[:1] + np.shape(x))


@numba_of(expand_reduced)
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
