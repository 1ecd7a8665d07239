"""Building arrays from others by position: np.meshgrid, np.insert and np.delete. Each is linear:
its cotangent gathers the result's cotangent back to where each value came from. Each op's entry
sits below the helpers its templates call (NumPy, batched and Numba forms side by side, as
rules/helpers.py says); the NumPy helpers read leading axes of their cotangent or tangent as a
batch. The positions (np.insert's and np.delete's `obj`) carry no derivative.
"""

import typing

import numpy as np

from .common import _absent, _array, _integer, _shift
from .helpers import batched_helper, helper, numba_of, type_test
from .registry import LIST_VALUED, defvjp, explicit, linear
from .splitting import _batched_pieces

if typing.TYPE_CHECKING:  # bound by s2sad.numba_helpers (see rules/helpers.py)
    from numba import types  # noqa: F401

# ----------------------------------------------------------------------------- meshgrid
# np.meshgrid's result is a tuple of arrays; as for np.split (rules/splitting.py), the
# cotangent of such a result is one flat array, the items' cotangents raveled and joined.


@helper
def _grid_axis(k, count, indexing):
    """The axis of the grid along which input `k` of `count` varies."""
    if indexing == "xy" and count > 1 and k < 2:
        return 1 - k
    return k


@helper
def _grid_shape(xi, k, sparse, indexing):
    """The shape of np.meshgrid's item `k`."""
    count = len(xi)
    sizes = [np.size(x) for x in xi]
    if indexing == "xy" and count > 1:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    if not sparse:
        return tuple(sizes)
    shape = [1] * count
    shape[_grid_axis(k, count, indexing)] = np.size(xi[k])
    return tuple(shape)


@helper(batch_safe=True, jvp=linear("g"))
def meshgrid_vjp(g, xi, k, sparse=False, indexing="xy"):
    """The cotangent of input `k` of np.meshgrid(*xi, sparse=sparse, indexing=indexing) from
    the flat cotangent of its items: item k's part, summed over the axes along which it is
    repeated."""
    shapes = [_grid_shape(xi, j, sparse, indexing) for j in range(len(xi))]
    start = sum(int(np.prod(s)) for s in shapes[:k])
    lead = np.shape(g)[:-1]
    part = np.reshape(g[..., start : start + int(np.prod(shapes[k]))], lead + shapes[k])
    axis = len(lead) + _grid_axis(k, len(xi), indexing)
    part = np.moveaxis(part, axis, -1)
    summed = np.sum(part, axis=tuple(range(len(lead), np.ndim(part) - 1)))
    return np.reshape(summed, lead + np.shape(xi[k]))


@batched_helper
def batched_meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    """np.meshgrid of each row of the batched tangents `xi`."""
    batch = np.shape(xi[0])[:1]
    sizes = [np.size(t) // batch[0] for t in xi]
    grid = list(sizes)
    if indexing == "xy" and len(xi) > 1:
        grid[0], grid[1] = grid[1], grid[0]
    out = []
    for k, t in enumerate(xi):
        shape = [1] * len(xi)
        shape[_grid_axis(k, len(xi), indexing)] = sizes[k]
        item = np.reshape(t, batch + tuple(shape))
        out.append(item if sparse else np.broadcast_to(item, batch + tuple(grid)))
    return _batched_pieces(out)  # rows read as t[:, k], as a split's


LIST_VALUED[id(np.meshgrid)] = np.meshgrid
defvjp(
    np.meshgrid,
    "*xi, copy=True, sparse=False, indexing='xy'",
    seq=("xi",),
    inert=("copy",),
    literal={"indexing": ("xy", "ij")},
    xi="meshgrid_vjp(g, xi, k, sparse, indexing)",
    jvp=linear("xi", batched=batched_meshgrid),
)

# ----------------------------------------------------------------------------- delete


@helper
def _kept_positions(arr, obj, axis):
    """The positions along `axis` (flat ones for axis=None) np.delete keeps."""
    n = np.size(arr) if axis is None else np.shape(arr)[axis]
    return np.delete(np.arange(n), obj)


@helper(batch_safe=True, jvp=linear("g"))
def delete_vjp(g, arr, obj, axis=None):
    """The cotangent of np.delete(arr, obj, axis): `g` put back where the kept values were."""
    kept = _kept_positions(arr, obj, axis)
    if axis is None:
        lead = np.shape(g)[:-1]
        out = np.zeros(lead + (np.size(arr),), dtype=np.result_type(g, np.float32))
        out[..., kept] = g
        return np.reshape(out, lead + np.shape(arr))
    lead = np.shape(g)[: np.ndim(g) - np.ndim(arr)]
    ax = len(lead) + axis % np.ndim(arr)
    out = np.zeros(lead + np.shape(arr), dtype=np.result_type(g, np.float32))
    np.moveaxis(out, ax, -1)[..., kept] = np.moveaxis(np.asarray(g), ax, -1)
    return out


@numba_of(delete_vjp)
def _delete_vjp(g, arr, obj, axis=None):
    if not (_array(g) and g.ndim == 1 and _array(arr) and _absent(axis)):
        return None

    def impl(g, arr, obj, axis=None):
        kept = np.delete(np.arange(arr.size), obj)
        out = np.zeros(arr.size)
        out[kept] = g
        return out.reshape(arr.shape)

    return impl


@batched_helper
def batched_delete(arr, obj, axis=None):
    if axis is None:
        return np.delete(np.reshape(arr, np.shape(arr)[:1] + (-1,)), obj, axis=1)
    return np.delete(arr, obj, axis=_shift(axis))


defvjp(
    np.delete,
    "arr, obj, axis=None",
    inert=("obj",),
    arr="delete_vjp(g, arr, obj, axis)",
    jvp=linear("arr", batched=batched_delete),
)

# ----------------------------------------------------------------------------- insert
# Where each value of np.insert's result comes from: np.insert itself, applied to labels (1 +
# the flat position of each element of arr, of values), tells, whatever broadcasting it does.


@helper
def _insert_labels(arr, obj, values, axis, part):
    """np.insert's result (raveled) with arr's elements (part "arr") or values' (part "values")
    replaced by 1 + their flat positions, the others by 0."""
    arr_labels = np.arange(1, np.size(arr) + 1, dtype=np.float64).reshape(np.shape(arr))
    value_labels = np.arange(1, np.size(values) + 1, dtype=np.float64).reshape(np.shape(values))
    if part == "arr":
        return np.insert(arr_labels, obj, np.zeros(np.shape(values)), axis).ravel()
    return np.insert(np.zeros(np.shape(arr)), obj, value_labels, axis).ravel()


@helper(batch_safe=True, jvp=linear("g"))
def insert_vjp(g, arr, obj, values, axis, part):
    """The cotangent of np.insert(arr, obj, values, axis) for `part` ("arr" or "values"): the
    result's cotangent summed back to where each value came from."""
    labels = _insert_labels(arr, obj, values, axis, part)
    mine = np.shape(arr) if part == "arr" else np.shape(values)
    lead = np.shape(g)[: np.ndim(g) - (1 if axis is None else np.ndim(arr))]
    rows = np.reshape(g, lead + (-1,))
    hit = labels > 0
    out = np.zeros((int(np.prod(mine)),) + lead, dtype=np.result_type(g, np.float32))
    np.add.at(out, labels[hit].astype(np.intp) - 1, np.moveaxis(rows[..., hit], -1, 0))
    return np.reshape(np.moveaxis(out, 0, -1), lead + mine)


@helper(batch_safe=True, jvp=linear("t"))
def insert_jvp(t, arr, obj, values, axis, part):
    """The tangent of np.insert(arr, obj, values, axis) along `t` for `part`."""
    labels = _insert_labels(arr, obj, values, axis, part)
    mine = np.shape(arr) if part == "arr" else np.shape(values)
    lead = np.shape(t)[: np.ndim(t) - len(mine)]
    rows = np.reshape(t, lead + (-1,))
    hit = labels > 0
    out = np.zeros(lead + labels.shape, dtype=np.result_type(t, np.float32))
    out[..., hit] = rows[..., labels[hit].astype(np.intp) - 1]
    shape = np.shape(np.insert(np.zeros(np.shape(arr)), obj, np.zeros(np.shape(values)), axis))
    return np.reshape(out, lead + shape)


@helper(batch_safe=True, jvp=linear("g"))
def insert_values_vjp(g, arr, obj, values, axis):
    """insert_vjp for the values (its own name: a scalar's cotangent is a scalar)."""
    return insert_vjp(g, arr, obj, values, axis, "values")


@helper(batch_safe=True, jvp=linear("t"))
def insert_values_jvp(t, arr, obj, values, axis):
    """insert_jvp for the values."""
    return insert_jvp(t, arr, obj, values, axis, "values")


@type_test
def _one_insert(arr, obj, values, axis):
    """One number put into a vector at a position: what the Numba forms of np.insert cover."""
    return _array(arr) and arr.ndim == 1 and _integer(obj) and not _array(values) and _absent(axis)


@numba_of(insert_vjp)
def _insert_vjp(g, arr, obj, values, axis, part):
    if not (_array(g) and _one_insert(arr, obj, values, axis)):
        return None

    def impl(g, arr, obj, values, axis, part):
        if part != "arr":
            raise ValueError("insert_vjp: the values' cotangent is insert_values_vjp's")
        return np.delete(g, obj + arr.size if obj < 0 else obj)  # NumPy's count

    return impl


@numba_of(insert_values_vjp)
def _insert_values_vjp(g, arr, obj, values, axis):
    if not (_array(g) and _one_insert(arr, obj, values, axis)):
        return None
    return lambda g, arr, obj, values, axis: g[obj + arr.size if obj < 0 else obj]


@numba_of(insert_jvp)
def _insert_jvp(t, arr, obj, values, axis, part):
    if not (_array(t) and _one_insert(arr, obj, values, axis)):
        return None

    def impl(t, arr, obj, values, axis, part):
        if part != "arr":
            raise ValueError("insert_jvp: the values' tangent is insert_values_jvp's")
        return np.insert(t, obj, 0.0)

    return impl


@numba_of(insert_values_jvp)
def _insert_values_jvp(t, arr, obj, values, axis):
    if not _one_insert(arr, obj, values, axis):
        return None

    def impl(t, arr, obj, values, axis):
        out = np.zeros(arr.size + 1)
        out[obj + arr.size if obj < 0 else obj] = t
        return out

    return impl


_INSERT = "obj, values, axis"
defvjp(
    np.insert,
    "arr, obj, values, axis=None",
    inert=("obj",),
    arr=f"insert_vjp(g, arr, {_INSERT}, 'arr')",
    values=f"insert_values_vjp(g, arr, {_INSERT})",
    jvp=explicit(
        arr=f"insert_jvp(t, arr, {_INSERT}, 'arr')",
        values=f"insert_values_jvp(t, arr, {_INSERT})",
    ),
)
