"""Indexing: a read x[index] scatters its cotangent back (repeated indices add up); a scatter-add
(`np.add.at`, normalized to a write of `scatter_added`) gathers it; a write `y[index] = v` passes
`v` the cotangent of the elements it last wrote. Each op's entry sits below the helpers its
templates call (NumPy, batched and Numba forms side by side, as rules/helpers.py says).
"""

import typing

import numpy as np

from .common import _array, _element, _has_array, _lift, _add_by_position, add_at
from .helpers import batched_helper, batched_of, helper, numba_jitable, numba_of, type_test
from .registry import defvjp, explicit, linear

if typing.TYPE_CHECKING:  # bound by s2sad.numba_helpers (see rules/helpers.py)
    from numba import types


def is_add_at(callee) -> bool:
    """Whether `callee` is np.add.at, a new bound method at every access (so never `is`)."""
    return getattr(callee, "__self__", None) is np.add and getattr(callee, "__name__", "") == "at"


# ----------------------------------------------------------------------------- batched indices


@batched_helper
def batched_index(g, index):
    """The index that applies `index` to every row of `g`.

    `(slice(None),) + index` does, except where NumPy moves the axes of advanced indices to the
    front (integer arrays separated by a slice): the batch then becomes an advanced index too."""
    items = index if isinstance(index, tuple) else (index,)

    def advanced(i):
        return not (i is None or i is Ellipsis or isinstance(i, slice))

    where = [p for p, i in enumerate(items) if advanced(i)]
    arrays = any(not isinstance(items[p], (int, np.integer)) for p in where)
    if not arrays or where == list(range(where[0], where[-1] + 1)):
        return (slice(None),) + items
    expanded = []
    for i in items:
        if advanced(i) and np.asarray(i).dtype == bool:
            expanded.extend(np.nonzero(i))
        else:
            expanded.append(i)
    shape = np.broadcast_shapes(*(np.shape(i) for i in expanded if advanced(i)))
    rows = np.arange(np.shape(g)[0]).reshape((-1,) + (1,) * len(shape))
    return (rows,) + tuple(expanded)


@batched_helper
def batched_add_at(dx, index, g):
    """np.add.at on every row: repeated indices add up."""
    np.add.at(dx, batched_index(dx, index), g)


# ----------------------------------------------------------------------------- reads


@helper
def _is_basic(index):
    items = index if isinstance(index, tuple) else (index,)
    return all(i is None or i is Ellipsis or isinstance(i, (slice, int, np.integer)) for i in items)


@helper(batch_safe=True, jvp=linear("g"))
def last_written(g, y, index):
    """The part of the cotangent `dy[index]` that reaches `v` in `y[index] = v`. An integer-array
    index may name an element more than once; NumPy keeps the last write, so only the last one
    gets that element's cotangent and the earlier ones get zero. `g` may carry leading batch
    axes in front of `y[index]`'s shape."""
    if _is_basic(index) or (isinstance(index, np.ndarray) and index.dtype == bool):
        return g  # (no element named twice)
    picked = np.arange(np.size(y)).reshape(np.shape(y))[index]
    flat = picked.reshape(-1)[::-1]
    _, first = np.unique(flat, return_index=True)  # the last write of each element
    if first.size == flat.size:
        return g
    keep = np.zeros(flat.size, dtype=bool)
    keep[flat.size - 1 - first] = True
    return np.where(keep.reshape(picked.shape), g, np.zeros((), np.result_type(g)))


@numba_of(last_written)
def _last_written(g, y, index):
    """runtime.last_written: walking the writes from the last, an element already written
    later gives zero (the positions picked come from Numba's own indexing, as the store's)."""
    if not _array(g) or not _has_array(index) or isinstance(index.dtype, types.Boolean):
        return lambda g, y, index: g  # (a mask names no element twice)

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


@helper
def scatter_added(a, index, values):
    """A copy of `a` with `values` added at `index`, repeated indices adding up: what
    `np.add.at(a, index, values)` leaves in `a`, as a value (a rule can take it)."""
    out = np.array(a, copy=True)
    np.add.at(out, index, values)
    return out


@numba_of(scatter_added)
def _scatter_added(a, index, values):
    def added(a, index, values):
        out = a.copy()
        add_at(out, index, values)
        return out

    return added


@batched_helper
def batched_scattered(t, index, like):
    """The tangent of scatter_added(like, index, values) along a batched tangent `t` of values:
    each row of `t` added at `index` into zeros shaped like `like`."""
    out = np.zeros(np.shape(t)[:1] + np.shape(like), dtype=np.result_type(t, like))
    batched_add_at(out, index, _lift(t, np.ndim(np.asarray(like)[index])))
    return out


defvjp(
    scatter_added,
    "a, index, values",
    inert=("index",),
    a="g",
    values="unbroadcast(g[index], values)",
    batched={"values": "batched_unbroadcast(g[batched_index(g, index)], values)"},
    jvp=explicit(
        a="t",
        values="scatter_added(np.zeros_like(ans), index, t)",
        batched={"a": "t", "values": "batched_scattered(t, index, a)"},
    ),
)


@helper(jvp=linear("g"), shape_only=("x",), shaped_like="x")
def getitem_vjp(g, x, index):
    """Scatter the cotangent of `x[index]` back; repeated integer indices add up. A tuple or
    list of arrays of one shape (np.linalg.slogdet's pair, a list of weights passed to code made
    without example arguments) is read as one array; of several shapes (np.linalg.eigh's), its
    cotangent is an array of objects, 0 where none reached."""
    if isinstance(x, dict) or isinstance(index, str):
        raise TypeError(
            f"a dict read by the key {index!r} where this code takes the differentiated value "
            "for an array (code made without example arguments does not know a tree's "
            "structure): make it with example arguments, s2sad.source(g, *args), or an "
            "`inputs(rng)` function in the file for `s2sad emit`"
        )
    if isinstance(x, (tuple, list)) and len({np.shape(e) for e in x}) > 1:
        dx = np.zeros(len(x), dtype=object)
        dx[index] = g
        return dx
    if (
        type(x) is np.ndarray
        and x.dtype.kind == "f"
        and x.dtype.itemsize >= 4
        and (
            (type(g) is np.ndarray and g.dtype == x.dtype)
            or type(g) is x.dtype.type  # (an element read, `y[0]`: a NumPy number)
            or (type(g) is float and x.dtype.itemsize == 8)
        )
    ):
        dx = np.zeros(x.shape, dtype=x.dtype)  # (np.result_type's answer, without its cost)
        if type(index) is int:
            dx[index] = g
            return dx
    else:
        parts = (g, *(x if isinstance(x, (tuple, list)) else (x,)))
        # (a Python float is a float64: NumPy takes it for a weak one, float32 beside float32)
        dtype = np.result_type(*(np.float64 if type(v) is float else v for v in parts), np.float32)
        dx = np.zeros(np.shape(x), dtype=dtype)
    if _is_basic(index):
        dx[index] += g
    else:
        np.add.at(dx, index, g)
    return dx


@batched_of(getitem_vjp)
def batched_getitem_vjp(g, x, index):
    """Scatter each row of the cotangent of `x[index]` back; repeated integer indices add up.
    (A tuple of several shapes: as getitem_vjp, each part with the batch axis first.)"""
    if isinstance(x, tuple) and len({np.shape(e) for e in x}) > 1:
        return getitem_vjp(g, x, index)
    dx = np.zeros(np.shape(g)[:1] + np.shape(x), dtype=np.result_type(g, np.float32))
    if _is_basic(index):
        dx[(slice(None),) + (index if isinstance(index, tuple) else (index,))] += g
    else:
        np.add.at(dx, batched_index(dx, index), g)
    return dx


@numba_of(getitem_vjp)
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

        if index.ndim > 1:  # a mask over the leading axes: a sub-array each

            def blocks(g, x, index):
                dx = np.zeros(x.shape)
                j = 0
                for at in np.ndindex(index.shape):
                    if index[at]:
                        dx[at] += g[j]
                        j += 1
                return dx

            return blocks

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


def getitem(x, index):
    """Stands for the subscript `x[index]` in the rule table."""
    return x[index]


defvjp(getitem, "x, index", inert=("index",), x="getitem_vjp(g, x, index)", jvp=linear("x"))

# ----------------------------------------------------------------------------- sort
# np.sort is a gather in the order that sorts its argument: its cotangent goes back to where each
# sorted value came from, its tangent is taken in that order. Where values tie, the stable order
# decides which of them gets which (one of the subgradients, as np.maximum's ties do). Axes of
# `g` or `t` before the argument's own are a batch, so the helpers serve batched sweeps as they
# are. Numba's np.argsort sorts vectors only: its forms cover a 1-d argument.


@helper(batch_safe=True, jvp=linear("g"))
def sort_vjp(g, a, axis=-1):
    """The cotangent of np.sort(a, axis): each element of `g` put where its value was in `a`."""
    shape = np.shape(a)
    if axis is None:
        a, axis = np.reshape(a, -1), 0
    lead = np.ndim(g) - np.ndim(a)
    order = np.broadcast_to(np.argsort(a, axis=axis, kind="stable"), np.shape(g))
    out = np.zeros_like(g)
    np.put_along_axis(out, order, g, axis=axis + lead if axis >= 0 else axis)
    return np.reshape(out, np.shape(g)[:lead] + shape)


@numba_of(sort_vjp)
def _sort_vjp(g, a, axis=-1):
    if not (_array(g) and _array(a) and g.ndim == 1 and a.ndim == 1):
        return None

    def impl(g, a, axis=-1):
        order = np.argsort(a, kind="mergesort")  # stable, as NumPy's above
        out = np.zeros_like(g)
        for i in range(order.size):
            out[order[i]] = g[i]
        return out

    return impl


@helper(batch_safe=True, jvp=linear("t"))
def sorted_like(t, a, axis=-1):
    """`t` in the order that sorts `a` along `axis`: the tangent of np.sort(a, axis)."""
    lead = np.ndim(t) - np.ndim(a)
    if axis is None:
        t = np.reshape(t, np.shape(t)[:lead] + (-1,))
        a, axis = np.reshape(a, -1), 0
    order = np.broadcast_to(np.argsort(a, axis=axis, kind="stable"), np.shape(t))
    return np.take_along_axis(t, order, axis=axis + lead if axis >= 0 else axis)


@numba_of(sorted_like)
def _sorted_like(t, a, axis=-1):
    if not (_array(t) and _array(a) and t.ndim == 1 and a.ndim == 1):
        return None
    return lambda t, a, axis=-1: t[np.argsort(a, kind="mergesort")]


defvjp(
    np.sort,
    "a, axis=-1, kind=None, order=None, *, stable=None",
    a="sort_vjp(g, a, axis=axis)",
    inert=("kind", "order", "stable"),
    jvp=explicit(a="sorted_like(t, a, axis=axis)"),
)


# ----------------------------------------------------------------------- boolean masks' shapes


@helper(nondiff=True)
def mask_fits(x, axis, m):
    """`m`, an index of `x` at `axis` (a negative one counts from the back, after `...`: -1
    for a mask ending at the last axis): jitted code asks it of each index (numba_forms.py),
    since Numba's `x[m]` takes a boolean mask shorter than the axis (its first elements) where
    NumPy raises IndexError; NumPy checks it itself."""
    return m


@numba_of(mask_fits)
def _mask_fits(x, axis, m):
    if not (_array(x) and _array(m) and isinstance(m.dtype, types.Boolean)):
        return lambda x, axis, m: m  # (an integer or index array: Numba's bounds checks)

    def fits(x, axis, m):
        start = axis if axis >= 0 else x.ndim + axis + 1 - m.ndim
        for d in range(m.ndim):
            if start < 0 or start + d >= x.ndim or m.shape[d] != x.shape[start + d]:
                raise IndexError("boolean index did not match indexed array")
        return m

    return fits


# ------------------------------------------------------------------ masks of several axes (jit)
# Numba's `a[M]` fails (an AssertionError) for a boolean mask of more than one axis: jitted code
# (pipeline/lower.py) reads, writes and adds by an index of two or more axes through these, which
# walk such a mask's positions in NumPy's (C) order, and are `a[M]` for any other index.


@helper
def masked(a, m):
    """`a[m]`, in jitted code where `m` has two or more axes."""
    return a[m]


@helper
def set_masked(a, m, values):
    """`a[m] = values`, in jitted code where `m` has two or more axes."""
    a[m] = values


@helper
def add_masked(a, m, values):
    """`add_at(a, m, values)`, in jitted code where `m` has two or more axes."""
    add_at(a, m, values)


@type_test
def _mask_axes(a, m):
    """How many leading axes of `a` the boolean mask `m` of two or more axes indexes (from the
    types), else 0."""
    mask = _array(a) and _array(m) and isinstance(m.dtype, types.Boolean)
    return m.ndim if mask and 1 < m.ndim <= a.ndim else 0


@numba_jitable
def _taken(a, m):
    """How many elements (or sub-arrays) the mask `m` takes of `a`, after NumPy's check of its
    shape."""
    for d in range(m.ndim):
        if m.shape[d] != a.shape[d]:
            raise IndexError("boolean index did not match indexed array")
    count = 0
    for at in np.ndindex(m.shape):
        if m[at]:
            count += 1
    return count


@numba_jitable
def _rows_in_range(m, n):
    """IndexError where an entry of the integer array `m` is out of an axis of length `n`: the
    code calling these helpers is compiled without Numba's checks (pipeline/bounds.py)."""
    for v in m.flat:
        if v < -n or v >= n:
            raise IndexError("index is out of bounds")


@type_test
def _integer_array(m) -> bool:
    return _array(m) and isinstance(m.dtype, types.Integer)


@numba_of(masked)
def _masked(a, m):
    k = _mask_axes(a, m)
    if not k and _integer_array(m):

        def gathered(a, m):
            _rows_in_range(m, a.shape[0])
            return a[m]

        return gathered
    if not k:
        return lambda a, m: a[m]

    def taken(a, m):
        out = np.empty((_taken(a, m),) + a.shape[k:], a.dtype)
        j = 0
        for at in np.ndindex(m.shape):
            if m[at]:
                out[j] = a[at]
                j += 1
        return out

    return taken


@numba_of(set_masked)
def _set_masked(a, m, values):
    k = _mask_axes(a, m)
    if not k and _integer_array(m):

        def scattered(a, m, values):
            _rows_in_range(m, a.shape[0])
            a[m] = values

        return scattered
    if not k:

        def plain(a, m, values):
            a[m] = values

        return plain
    if not _array(values) or values.ndim <= a.ndim - k:  # the same for each taken

        def each(a, m, values):
            _taken(a, m)
            for at in np.ndindex(m.shape):
                if m[at]:
                    a[at] = values

        return each
    if values.ndim != a.ndim - k + 1:
        return None

    def one_each(a, m, values):  # values[j] for the j-th taken (or values[0] for all)
        if values.shape[0] != _taken(a, m) and values.shape[0] != 1:
            raise ValueError("boolean index assignment: values do not match the mask's count")
        j = 0
        for at in np.ndindex(m.shape):
            if m[at]:
                a[at] = values[j if values.shape[0] > 1 else 0]
                j += 1

    return one_each


@numba_of(add_masked)
def _add_masked(a, m, values):
    k = _mask_axes(a, m)
    if not k:
        return lambda a, m, values: add_at(a, m, values)
    if not _array(values) or values.ndim <= a.ndim - k:  # the same for each taken

        def each(a, m, values):
            _taken(a, m)
            for at in np.ndindex(m.shape):
                if m[at]:
                    a[at] += values

        return each
    if values.ndim != a.ndim - k + 1:
        return None

    def one_each(a, m, values):
        if values.shape[0] != _taken(a, m) and values.shape[0] != 1:
            raise ValueError("boolean index: values do not match the mask's count")
        j = 0
        for at in np.ndindex(m.shape):
            if m[at]:
                a[at] += values[j if values.shape[0] > 1 else 0]
                j += 1

    return one_each


@helper
def indexed_by_arrays(x, index):
    """`x[index]`, in jitted code where the index holds a boolean mask beside another array
    (`x[m, idx]`), or one of several axes beside another item (`x[M, 0]`): Numba's lowering
    fails there (an LLVM error, an AssertionError), so this has no Numba form, and its refusal
    names the user's line."""
    return x[index]


@numba_of(indexed_by_arrays)
def _indexed_by_arrays(x, index):
    return None


# ------------------------------------------------------------------- explicit index checks


@helper(nondiff=True)
def check_index(index, n):
    """IndexError where `index` (an integer, or each entry of an integer array) is out of an
    axis of length `n` (negative ones count from its end): jitted code, compiled without Numba's
    checks, asks it before each index of the user's it cannot prove in range
    (pipeline/bounds.py); a boolean mask's first axis must be the axis's length."""
    if isinstance(index, np.ndarray) and index.dtype == bool and index.ndim:
        if index.shape[0] != n:
            raise IndexError("boolean index did not match indexed array")
    elif isinstance(index, (int, np.integer)) and not isinstance(index, (bool, np.bool_)):
        if index < -n or index >= n:
            raise IndexError(f"index {index} is out of bounds for axis with size {n}")
    elif isinstance(index, np.ndarray) and index.dtype.kind in "iu" and index.size:
        for i in (index.min(), index.max()):
            if i < -n or i >= n:
                raise IndexError(f"index {i} is out of bounds for axis with size {n}")


@numba_of(check_index)
def _check_index(index, n):
    if isinstance(index, types.Integer):

        def one(index, n):
            if index < -n or index >= n:
                raise IndexError("index is out of bounds")  # (Numba's own check's message)

        return one
    if _array(index) and isinstance(index.dtype, types.Integer):

        def each(index, n):
            low, high = 0, -1
            for v in index.flat:
                low, high = min(low, v), max(high, v)
            if low < -n or high >= n:
                raise IndexError("index is out of bounds")

        return each
    if _array(index) and isinstance(index.dtype, types.Boolean) and index.ndim:

        def mask(index, n):
            if index.shape[0] != n:
                raise IndexError("boolean index did not match indexed array")

        return mask
    return lambda index, n: None  # (anything else: NumPy's error)
