"""Selection: gathers (np.take, np.take_along_axis), order statistics (np.median, np.percentile,
np.quantile, np.partition) and picks among arrays (np.select, np.choose). Each op's entry sits
below the helpers its templates call (NumPy, batched and Numba forms side by side, as
rules/helpers.py says); reductions that skip or weigh elements are in rules/statistics.py.

Axes of `g` or `t` in front of the ones the op gives them are a batch, so the helpers serve
batched sweeps as they are (`batch_safe`). Where a derivative is not unique (tied values), the
rule picks one documented subgradient, never NaN or inf: order statistics follow the stable
sort: of tied values, the first in `a` takes the first sorted slot (as np.sort's rule). A
quantile is the linear interpolation (1 - f) * s[lo] + f * s[hi] of the sorted values s, so its
cotangent goes to those two slots with those weights: an even count's median gives 1/2 to each
middle value, a quantile landing exactly on an element gives all of it to that one.
"""

import typing

import numpy as np

from .common import _absent, _array, _axes, _integer
from .helpers import batched_helper, helper, numba_jitable, numba_of, type_test
from .registry import ELEMENTWISE, defvjp, explicit, linear

if typing.TYPE_CHECKING:  # bound by s2sad.numba_helpers (see rules/helpers.py)
    from numba import objmode, types  # noqa: F401

# ----------------------------------------------------------------------------- take


@helper
def _taken_index(indices, n, mode):
    """np.take's indices as plain (possibly negative) positions along an axis of length n."""
    indices = np.asarray(indices)
    if mode == "wrap":
        return indices % n
    if mode == "clip":
        return np.clip(indices, 0, n - 1)
    return indices


@helper(batch_safe=True, jvp=linear("g"))
def take_vjp(g, a, indices, axis=None, mode="raise"):
    """The cotangent of np.take(a, indices, axis): scattered back, repeated indices adding up."""
    shape = np.shape(a)
    if axis is None:
        index = _taken_index(indices, int(np.size(a)), mode)
        lead = np.ndim(g) - index.ndim
        out = np.zeros(np.shape(g)[:lead] + (int(np.size(a)),), dtype=np.result_type(g, a, 1.0))
        np.add.at(out, (slice(None),) * lead + (index,), g)
        return np.reshape(out, np.shape(g)[:lead] + shape)
    ax = axis % len(shape)
    index = _taken_index(indices, shape[ax], mode)
    lead = np.ndim(g) - (len(shape) - 1 + index.ndim)
    out = np.zeros(np.shape(g)[:lead] + shape, dtype=np.result_type(g, a, 1.0))
    np.add.at(out, (slice(None),) * (lead + ax) + (index,), g)
    return out


@numba_jitable
def _split_at_axis(shape, ax):
    """(the product of the lengths before axis `ax`, the product of those after it)."""
    before = 1
    after = 1
    for d in range(len(shape)):
        if d < ax:
            before *= shape[d]
        elif d > ax:
            after *= shape[d]
    return before, after


@numba_of(take_vjp)
def _take_vjp(g, a, indices, axis=None, mode="raise"):
    if not (_array(a) and (mode == "raise" or _absent(mode, "raise"))):
        return None
    if not (_absent(axis) or _integer(axis)):
        return None
    if not _absent(axis):  # along one axis: rows before it, columns after it

        def along(g, a, indices, axis=None, mode="raise"):
            ax = axis % a.ndim
            before, after = _split_at_axis(a.shape, ax)
            n = a.shape[ax]
            where = np.asarray(indices).reshape(-1)
            rows = np.ascontiguousarray(np.asarray(g)).reshape((before, where.size, after))
            out = np.zeros((before, n, after))
            for i in range(before):
                for j in range(where.size):
                    k = where[j] % n
                    for m in range(after):
                        out[i, k, m] += rows[i, j, m]
            return out.reshape(a.shape)

        return along
    if not _array(indices):  # one element

        def element(g, a, indices, axis=None, mode="raise"):
            out = np.zeros(a.size)
            out[indices] = g
            return out.reshape(a.shape)

        return element

    def impl(g, a, indices, axis=None, mode="raise"):
        out = np.zeros(a.size)
        where = np.ascontiguousarray(indices).reshape(-1)
        flat = np.ascontiguousarray(g).reshape(-1)
        for j in range(where.size):
            out[where[j]] += flat[j]
        return out.reshape(a.shape)

    return impl


@batched_helper
def batched_take(a, indices, axis=None, out=None, mode="raise"):
    """np.take of every row."""
    if axis is None:
        return np.take(np.reshape(a, np.shape(a)[:1] + (-1,)), indices, axis=1, mode=mode)
    return np.take(a, indices, axis=axis + 1 if axis >= 0 else axis, mode=mode)


defvjp(
    np.take,
    "a, indices, axis=None, out=None, mode='raise'",
    literal={"mode": ("raise", "wrap", "clip"), "out": (None,)},
    inert=("indices",),
    a="take_vjp(g, a, indices, axis=axis, mode=mode)",
    jvp=linear("a", batched=batched_take),
)


@helper(batch_safe=True, jvp=linear("g"))
def take_along_axis_vjp(g, arr, indices, axis=-1):
    """The cotangent of np.take_along_axis(arr, indices, axis): scattered back, repeats adding
    up (a broadcast length-1 axis of `arr` gathers the cotangent of every position)."""
    shape = np.shape(arr)
    indices = np.asarray(indices)
    if axis is None:
        lead = np.ndim(g) - 1
        out = np.zeros(np.shape(g)[:lead] + (int(np.size(arr)),), dtype=np.result_type(g, 1.0))
        np.add.at(out, (slice(None),) * lead + (indices,), g)
        return np.reshape(out, np.shape(g)[:lead] + shape)
    ax = axis % len(shape)
    lead = np.ndim(g) - len(shape)
    gshape = np.shape(g)[lead:]
    index = []
    for d, n in enumerate(gshape):
        at = [1] * len(gshape)
        at[d] = n
        if d == ax:
            index.append(np.broadcast_to(indices, gshape))
        else:
            positions = np.arange(n) if shape[d] == n else np.zeros(n, dtype=np.intp)
            index.append(positions.reshape(at))
    out = np.zeros(np.shape(g)[:lead] + shape, dtype=np.result_type(g, 1.0))
    np.add.at(out, (slice(None),) * lead + tuple(index), g)
    return out


@numba_of(take_along_axis_vjp)
def _take_along_axis_vjp(g, arr, indices, axis=-1):
    if not (_array(g) and _array(arr) and _array(indices)):
        return None
    if _absent(axis):  # the flattened array

        def flat(g, arr, indices, axis=-1):
            out = np.zeros(arr.size)
            for j in range(indices.size):
                out[indices[j]] += g[j]
            return out.reshape(arr.shape)

        return flat
    if not _integer(axis):
        return None

    def impl(g, arr, indices, axis=-1):
        ax = axis % arr.ndim
        gc = np.ascontiguousarray(g)
        where = np.ascontiguousarray(np.broadcast_to(indices, g.shape)).reshape(-1)
        values = gc.reshape(-1)
        out = np.zeros(arr.size)
        for j in range(values.size):
            rest = j
            position = 0
            stride = 1
            for d in range(g.ndim - 1, -1, -1):  # g's index of j, read into arr's
                c = rest % g.shape[d]
                rest //= g.shape[d]
                if d == ax:
                    c = where[j] % arr.shape[d]
                elif arr.shape[d] == 1:  # broadcast: every position reads the one
                    c = 0
                position += c * stride
                stride *= arr.shape[d]
            out[position] += values[j]
        return out.reshape(arr.shape)

    return impl


@batched_helper
def batched_take_along_axis(arr, indices, axis):
    """np.take_along_axis of every row."""
    indices = np.asarray(indices)[None]
    if axis is None:
        return np.take_along_axis(np.reshape(arr, np.shape(arr)[:1] + (-1,)), indices, axis=1)
    return np.take_along_axis(arr, indices, axis=axis + 1 if axis >= 0 else axis)


defvjp(
    np.take_along_axis,
    "arr, indices, axis=-1",
    inert=("indices",),
    arr="take_along_axis_vjp(g, arr, indices, axis=axis)",
    jvp=linear("arr", batched=batched_take_along_axis),
)

# ----------------------------------------------------------------------------- order statistics


@helper
def _interpolation(n, q):
    """The weights of the sorted values in NumPy's linear quantile: shape q.shape + (n,).
    The positions are NumPy's own (numpy/lib/_function_base_impl.py, method 'linear')."""
    q = np.asarray(q, dtype=np.float64)
    virtual = n * q + (1 + q * (1 - 1 - 1)) - 1
    below = np.floor(virtual)
    gamma = virtual - below
    top = virtual >= n - 1  # the last value, all of it
    lo = np.where(top, n - 1, np.clip(below, 0, n - 1)).astype(np.intp)
    hi = np.where(top, n - 1, np.clip(below + 1, 0, n - 1)).astype(np.intp)
    weights = np.zeros((int(q.size), n))
    rows = np.arange(q.size)
    np.add.at(weights, (rows, lo.reshape(-1)), np.where(top, 1.0, 1.0 - gamma).reshape(-1))
    np.add.at(weights, (rows, hi.reshape(-1)), np.where(top, 0.0, gamma).reshape(-1))
    return weights.reshape(q.shape + (n,))


@helper
def _reduced_last(a, axis):
    """`a` with its reduced axes moved last and flattened to one: (that array, the order of
    axes that moved them, the kept shape)."""
    a = np.asarray(a)
    axes = _axes(axis, a.ndim)
    rest = tuple(d for d in range(a.ndim) if d not in axes)
    moved = np.transpose(a, rest + axes)
    kept = moved.shape[: len(rest)]
    return moved.reshape(kept + (-1,)), rest + axes, kept


@helper(batch_safe=True, jvp=linear("g"))
def quantile_vjp(g, a, q, axis=None, keepdims=False, scale=1.0):
    """The cotangent of np.quantile(a, q / scale, axis, keepdims=keepdims) (linear method):
    each output's cotangent goes to the two sorted values it interpolates."""
    flat, perm, kept = _reduced_last(a, axis)
    n = flat.shape[-1]
    weights = _interpolation(n, np.asarray(q, dtype=np.float64) / scale)
    qshape = weights.shape[:-1]
    out_ndim = len(qshape) + (np.ndim(a) if keepdims else len(kept))
    lead = np.shape(g)[: np.ndim(g) - out_ndim]
    rows = np.reshape(g, lead + (int(np.prod(qshape)), int(np.prod(kept))))
    by_rank = np.einsum("...qr,qn->...rn", rows, weights.reshape(-1, n))
    order = np.broadcast_to(np.argsort(flat.reshape(-1, n), axis=-1, kind="stable"), by_rank.shape)
    out = np.zeros_like(by_rank)
    np.put_along_axis(out, order, by_rank, axis=-1)
    out = out.reshape(lead + kept + tuple(np.shape(a)[d] for d in perm[len(kept) :]))
    back = np.argsort(perm)
    return np.transpose(out, tuple(range(len(lead))) + tuple(int(d) + len(lead) for d in back))


@helper(batch_safe=True, jvp=linear("t"))
def quantile_jvp(t, a, q, axis=None, keepdims=False, scale=1.0):
    """The tangent of np.quantile(a, q / scale, axis, keepdims=keepdims) along `t`."""
    flat, perm, kept = _reduced_last(a, axis)
    n = flat.shape[-1]
    weights = _interpolation(n, np.asarray(q, dtype=np.float64) / scale)
    lead = np.shape(t)[: np.ndim(t) - np.ndim(a)]
    moved = np.transpose(t, tuple(range(len(lead))) + tuple(d + len(lead) for d in perm))
    rows = moved.reshape(lead + (int(np.prod(kept)), n))
    order = np.broadcast_to(np.argsort(flat.reshape(-1, n), axis=-1, kind="stable"), rows.shape)
    by_rank = np.take_along_axis(rows, order, axis=-1)
    out = np.einsum("...rn,qn->...qr", by_rank, weights.reshape(-1, n))
    if keepdims:
        kept = tuple(1 if d in _axes(axis, np.ndim(a)) else m for d, m in enumerate(np.shape(a)))
    return out.reshape(lead + weights.shape[:-1] + kept)


@type_test
def _several(q):
    """Several quantiles: an array, or a list or tuple of numbers."""
    return isinstance(q, (types.Array, types.List, types.UniTuple))


@numba_of(quantile_vjp)
def _quantile_vjp(g, a, q, axis=None, keepdims=False, scale=1.0):
    if not (_array(a) and _absent(axis) and _several(q) == _array(g)):
        return None
    if _several(q):  # several quantiles: each output's cotangent to its two sorted values

        def several(g, a, q, axis=None, keepdims=False, scale=1.0):
            flat = np.ascontiguousarray(a).reshape(-1)
            qs = np.ascontiguousarray(np.asarray(q)).reshape(-1)
            gs = np.ascontiguousarray(g).reshape(-1)
            order = np.argsort(flat, kind="mergesort")  # stable, as NumPy's above
            out = np.zeros(flat.size)
            for k in range(qs.size):
                lo, hi, gamma = _interpolated(flat.size, qs[k] / scale)
                out[order[lo]] += gs[k] * (1.0 - gamma)
                out[order[hi]] += gs[k] * gamma
            return out.reshape(a.shape)

        return several

    def impl(g, a, q, axis=None, keepdims=False, scale=1.0):
        flat = np.ascontiguousarray(a).reshape(-1)
        lo, hi, gamma = _interpolated(flat.size, q / scale)
        order = np.argsort(flat, kind="mergesort")  # stable, as NumPy's above
        out = np.zeros(flat.size)
        out[order[lo]] += g * (1.0 - gamma)
        out[order[hi]] += g * gamma
        return out.reshape(a.shape)

    return impl


@numba_of(quantile_jvp)
def _quantile_jvp(t, a, q, axis=None, keepdims=False, scale=1.0):
    if not (_array(a) and _array(t) and _absent(axis) and t.ndim == a.ndim):
        return None
    if _several(q):

        def several(t, a, q, axis=None, keepdims=False, scale=1.0):
            flat = np.ascontiguousarray(a).reshape(-1)
            tf = np.ascontiguousarray(t).reshape(-1)
            qs = np.ascontiguousarray(np.asarray(q)).reshape(-1)
            order = np.argsort(flat, kind="mergesort")
            out = np.empty(qs.size)
            for k in range(qs.size):
                lo, hi, gamma = _interpolated(flat.size, qs[k] / scale)
                out[k] = tf[order[lo]] * (1.0 - gamma) + tf[order[hi]] * gamma
            return out.reshape(np.asarray(q).shape)

        return several

    def impl(t, a, q, axis=None, keepdims=False, scale=1.0):
        flat = np.ascontiguousarray(a).reshape(-1)
        tf = np.ascontiguousarray(t).reshape(-1)
        lo, hi, gamma = _interpolated(flat.size, q / scale)
        order = np.argsort(flat, kind="mergesort")
        return tf[order[lo]] * (1.0 - gamma) + tf[order[hi]] * gamma

    return impl


def _interpolated(n, q):
    return None


@numba_of(_interpolated)
def _interpolated_impl(n, q):
    """_interpolation for one q: (lo, hi, gamma), the weights 1 - gamma and gamma."""

    def impl(n, q):
        virtual = n * q + (1 + q * (1 - 1 - 1)) - 1
        if virtual >= n - 1:
            return n - 1, n - 1, 0.0
        below = np.floor(virtual)
        lo = max(int(below), 0)
        return lo, min(lo + 1, n - 1), virtual - below

    return impl


_QUANTILE = "a, q, axis=None, out=None, overwrite_input=False, method='linear', keepdims=False"
_QUANTILE_ONLY = {  # the linear method on a copy, unweighted: other calls have no rule
    "method": ("linear",),
    "overwrite_input": (False,),
    "weights": (None,),
    "interpolation": (None,),
}
for _f, _scale in ((np.quantile, "1.0"), (np.percentile, "100.0")):
    _tail = f"axis=axis, keepdims=keepdims, scale={_scale}"
    defvjp(
        _f,
        _QUANTILE + ", *, weights=None, interpolation=None",
        literal=_QUANTILE_ONLY,
        a=f"quantile_vjp(g, a, q, {_tail})",
        jvp=explicit(a=f"quantile_jvp(t, a, q, {_tail})"),
    )
defvjp(
    np.median,
    "a, axis=None, out=None, overwrite_input=False, keepdims=False",
    literal={"overwrite_input": (False,)},
    a="quantile_vjp(g, a, 0.5, axis=axis, keepdims=keepdims)",
    jvp=explicit(a="quantile_jvp(t, a, 0.5, axis=axis, keepdims=keepdims)"),
)


@helper
def _partition_order(a, ans, axis):
    """Where each value of `ans` = np.partition(a, ...) came from in `a`, along `axis`: the
    value of rank r in `ans` is the value of rank r in `a` (stable ranks, so tied values pair
    off in order). Read from the result itself, this holds whatever order np.partition chose."""
    by_rank = np.argsort(a, axis=axis, kind="stable")
    rank = np.argsort(np.argsort(ans, axis=axis, kind="stable"), axis=axis, kind="stable")
    return np.take_along_axis(by_rank, rank, axis=axis)


@helper(batch_safe=True, jvp=linear("g"))
def partition_vjp(g, a, ans, axis=-1):
    """The cotangent of ans = np.partition(a, kth, axis): each element of `g` goes back to
    where its value was in `a`."""
    shape = np.shape(a)
    if axis is None:
        a, axis = np.reshape(a, -1), 0
    lead = np.ndim(g) - np.ndim(a)
    order = np.broadcast_to(_partition_order(a, ans, axis), np.shape(g))
    out = np.zeros_like(g)
    np.put_along_axis(out, order, g, axis=axis + lead if axis >= 0 else axis)
    return np.reshape(out, np.shape(g)[:lead] + shape)


@helper(batch_safe=True, jvp=linear("t"))
def partitioned_like(t, a, ans, axis=-1):
    """`t` in the order np.partition put `a` in: the tangent of ans = np.partition(a, kth)."""
    lead = np.ndim(t) - np.ndim(a)
    if axis is None:
        t = np.reshape(t, np.shape(t)[:lead] + (-1,))
        a, axis = np.reshape(a, -1), 0
    order = np.broadcast_to(_partition_order(a, ans, axis), np.shape(t))
    return np.take_along_axis(t, order, axis=axis + lead if axis >= 0 else axis)


@numba_of(_partition_order)
def _partition_order_impl(a, ans, axis):
    if not (_array(a) and a.ndim == 1):
        return None

    def impl(a, ans, axis):
        by_rank = np.argsort(a, kind="mergesort")
        return by_rank[np.argsort(np.argsort(ans, kind="mergesort"), kind="mergesort")]

    return impl


@numba_of(partition_vjp)
def _partition_vjp(g, a, ans, axis=-1):
    if not (_array(g) and _array(a) and g.ndim == 1 and a.ndim == 1):
        return None

    def impl(g, a, ans, axis=-1):
        order = _partition_order(a, ans, axis)
        out = np.zeros_like(g)
        for i in range(order.size):
            out[order[i]] = g[i]
        return out

    return impl


@numba_of(partitioned_like)
def _partitioned_like(t, a, ans, axis=-1):
    if not (_array(t) and _array(a) and t.ndim == 1 and a.ndim == 1):
        return None
    return lambda t, a, ans, axis=-1: t[_partition_order(a, ans, axis)]


@helper
def numpy_partition(a, kth, axis=-1, kind="introselect"):
    """np.partition in jitted code (pipeline/lower.py): Numba's own leaves the elements other
    than the `kth` in another order than NumPy's, which is another function's value."""
    return np.partition(a, kth, axis=axis, kind=kind)


@helper
def numpy_argpartition(a, kth, axis=-1, kind="introselect"):
    """np.argpartition in jitted code, for the same reason as numpy_partition."""
    return np.argpartition(a, kth, axis=axis, kind=kind)


@numba_of(numpy_partition)
def _numpy_partition(a, kth, axis=-1, kind="introselect"):
    if not _array(a):
        return None
    result = types.Array(a.dtype, a.ndim, "C")

    def impl(a, kth, axis=-1, kind="introselect"):
        with objmode(out=result):  # NumPy's order: a call out of the compiled code
            out = np.ascontiguousarray(np.partition(a, kth, axis=axis, kind=kind))
        return out

    return impl


@numba_of(numpy_argpartition)
def _numpy_argpartition(a, kth, axis=-1, kind="introselect"):
    if not _array(a):
        return None
    result = types.Array(types.intp, a.ndim, "C")

    def impl(a, kth, axis=-1, kind="introselect"):
        with objmode(out=result):
            out = np.ascontiguousarray(np.argpartition(a, kth, axis=axis, kind=kind))
        return out

    return impl


defvjp(
    np.partition,
    "a, kth, axis=-1, kind='introselect', order=None",
    literal={"order": (None,)},
    inert=("kth", "kind"),
    a="partition_vjp(g, a, ans, axis=axis)",
    jvp=explicit(a="partitioned_like(t, a, ans, axis=axis)"),
)

# ----------------------------------------------------------------------------- select and choose
# Each element of the result is one choice's (or the default's): that one gets its cotangent,
# broadcasting undone; the conditions and the index array are piecewise constant (inert).


@helper(nondiff=True)
def select_mask(condlist, k=None):
    """Where np.select(condlist, choicelist) takes choice `k` (the first condition that holds
    is `k`'s), or, for k=None, its default (no condition holds)."""
    taken = np.zeros(np.broadcast_shapes(*(np.shape(c) for c in condlist)), dtype=bool)
    for c in condlist[: len(condlist) if k is None else k]:
        taken = taken | np.asarray(c, dtype=bool)
    if k is None:
        return ~taken
    return np.asarray(condlist[k], dtype=bool) & ~taken


@numba_of(select_mask)
def _select_mask(condlist, k=None):
    if _absent(k):

        def default(condlist, k=None):
            taken = condlist[0] & False
            for c in condlist:
                taken = taken | c
            return ~taken

        return default

    def choice(condlist, k=None):
        taken = condlist[0] & False
        for j in range(k):
            taken = taken | condlist[j]
        return condlist[k] & ~taken

    return choice


defvjp(
    np.select,
    "condlist, choicelist, default=0",
    seq=("condlist", "choicelist"),  # lists of arrays, as np.select reads them
    inert=("condlist",),
    choicelist="unbroadcast(np.where(select_mask(condlist, k), g, 0.0), choicelist[k])",
    default="unbroadcast(np.where(select_mask(condlist), g, 0.0), default)",
    jvp=ELEMENTWISE,
)


@helper(nondiff=True)
def choose_mask(a, choices, k, mode="raise"):
    """Where np.choose(a, choices, mode=mode) takes choice `k`."""
    a, n = np.asarray(a), len(choices)
    if mode == "wrap":
        a = a % n
    elif mode == "clip":
        a = np.clip(a, 0, n - 1)
    return a == k


defvjp(
    np.choose,
    "a, choices, out=None, mode='raise'",
    seq=("choices",),
    inert=("a",),
    literal={"out": (None,), "mode": ("raise", "wrap", "clip")},
    choices="unbroadcast(np.where(choose_mask(a, choices, k, mode=mode), g, 0.0), choices[k])",
    jvp=ELEMENTWISE,
)
