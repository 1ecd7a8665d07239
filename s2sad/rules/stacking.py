"""Building arrays: the stacks (vstack, hstack, dstack, column_stack, row_stack), append, repeat,
tile and pad (splitting.py has the splits, atleast_*d and the turns). Each is linear: its tangent
is the same call on the tangent, and its cotangent undoes the gather (a join's operand takes back
its own slice of `g`, a repeat or a pad adds up the copies). Each op's entry sits below the
helpers its templates call (NumPy, batched and Numba forms side by side, as rules/helpers.py
says).
"""

import math
import typing

import numpy as np

from .common import _absent, _array, _integer, _shift
from .helpers import batched_helper, batched_of, helper, numba_jitable, numba_of
from .registry import defvjp, explicit, linear

if typing.TYPE_CHECKING:  # bound by s2sad.numba_helpers (see rules/helpers.py)
    from numba import literal_unroll, types

# ----------------------------------------------------------------------------- joins
# vstack, hstack, dstack, column_stack and append are concatenations of their operands, each
# first given at least the rank the join needs; operand k takes back its slice of g along the
# joined axis, reshaped to its own shape.


@helper
def _piece(g, arrays, k, ax, lead):
    """Operand k's slice of `g` along axis `ax` (of the value, after `lead` batch axes), in the
    operand's shape: the other axes are the result's, so sizes give the slice's bounds."""
    shape = np.shape(g)
    other = max(math.prod(n for i, n in enumerate(shape[lead:]) if i != ax), 1)
    start = sum(np.size(a) for a in arrays[:k]) // other
    index = [slice(None)] * len(shape)
    index[ax + lead] = slice(start, start + np.size(arrays[k]) // other)
    return np.reshape(g[tuple(index)], shape[:lead] + np.shape(arrays[k]))


@helper(jvp=linear("g"))
def joined_vjp(g, arrays, k, axis=None):
    """The piece of a join's cotangent that belongs to operand `k`: its slice of `g` along the
    joined `axis` of `g` (None: hstack's, axis 0 of a vector and 1 otherwise), in its shape."""
    ndim = np.ndim(g)
    ax = (0 if ndim == 1 else 1) if axis is None else axis % ndim
    return _piece(g, arrays, k, ax, 0)


@batched_of(joined_vjp)
def batched_joined_vjp(g, arrays, k, axis=None):
    ndim = np.ndim(g) - 1
    ax = (0 if ndim == 1 else 1) if axis is None else axis % ndim
    return _piece(g, arrays, k, ax, 1)


@numba_jitable
def _size_before(arrays, k):
    """The elements of the operands before operand `k` (a tuple: each its own type)."""
    size = 0
    i = 0
    for a in literal_unroll(arrays):
        if i < k:
            size += np.size(a)
        i += 1
    return size


@numba_of(joined_vjp)
def _joined_vjp(g, arrays, k, axis=None):
    """The operand's position is a literal in generated code: its type (rank) is then known."""
    if not _array(g) or not isinstance(k, types.IntegerLiteral):
        return None
    if not (_absent(axis) or _integer(axis)):
        return None
    K = k.literal_value
    hstack_axis = 0 if g.ndim == 1 else 1

    def impl(g, arrays, k, axis=None):
        ax = hstack_axis if axis is None else axis % g.ndim
        other = 1
        for i in range(g.ndim):
            if i != ax:
                other *= g.shape[i]
        other = max(other, 1)
        start = _size_before(arrays, K) // other
        mine = arrays[K]
        piece = np.moveaxis(g, ax, 0)[start : start + np.size(mine) // other]
        return np.ascontiguousarray(np.moveaxis(piece, 0, ax)).reshape(np.shape(mine))

    if isinstance(arrays, types.BaseTuple) and not _array(arrays.types[K]):

        def number(g, arrays, k, axis=None):
            # a number joined (`np.append(out, x[i])`): its element, a number as it is (the
            # other axes of `g` have length 1 wherever NumPy joins a number)
            return np.ascontiguousarray(g).reshape(-1)[_size_before(arrays, K)]

        return number
    return impl


def _promoted(t, how):
    """A batched tangent `t` (leading batch axis) with each row given the rank a join gives it:
    `how` is 1, 2 or 3 (np.atleast_1d, 2d, 3d) or "column" (np.column_stack)."""
    batch, shape = np.shape(t)[:1], np.shape(t)[1:]
    n = len(shape)
    if how == "column":
        shape = shape if n >= 2 else ((1, 1) if n == 0 else shape + (1,))
    elif n < how:
        shape = {0: (1,) * how, 1: (1,) + shape + (1,) * (how - 2)}.get(n, shape + (1,))
    return np.reshape(t, batch + shape)


@batched_helper
def batched_vstack(tup, *, dtype=None, casting="same_kind"):
    return np.concatenate([_promoted(t, 2) for t in tup], axis=1)


@batched_helper
def batched_hstack(tup, *, dtype=None, casting="same_kind"):
    rows = [_promoted(t, 1) for t in tup]
    return np.concatenate(rows, axis=1 if np.ndim(rows[0]) == 2 else 2)


@batched_helper
def batched_dstack(tup):
    return np.concatenate([_promoted(t, 3) for t in tup], axis=3)


@batched_helper
def batched_column_stack(tup):
    return np.concatenate([_promoted(t, "column") for t in tup], axis=2)


_JOINS = [  # (function, its signature, the joined axis of the result as joined_vjp reads it)
    (np.vstack, "tup, *, dtype=None, casting='same_kind'", "0", batched_vstack),
    (np.hstack, "tup, *, dtype=None, casting='same_kind'", "None", batched_hstack),
    (np.dstack, "tup", "2", batched_dstack),
    (np.column_stack, "tup", "1", batched_column_stack),
]
if hasattr(np, "row_stack"):  # (an alias of vstack, deprecated in NumPy 2)
    _JOINS.append((np.row_stack, _JOINS[0][1], "0", batched_vstack))

for _func, _signature, _axis, _batched in _JOINS:
    defvjp(
        _func,
        _signature,
        seq=("tup",),
        tup=f"joined_vjp(g, tup, k, {_axis})",
        jvp=linear("tup", batched=_batched),
    )


@helper
def c_join(tup):
    """np.c_[a, b, ...] of values alone: normalization writes that subscript as this call."""
    return np.c_[tuple(tup)]


@batched_helper
def batched_c_join(tup):
    return np.concatenate([_promoted(t, "column") for t in tup], axis=-1)


defvjp(  # (np.r_[a, b] is np.concatenate of each at least 1-d, rules of their own)
    c_join,
    "tup",
    seq=("tup",),
    tup="joined_vjp(g, tup, k, -1)",
    jvp=linear("tup", batched=batched_c_join),
)


@batched_helper
def batched_append(arr, values, axis=None):
    if axis is None:
        rows = np.shape(arr)[:1] + (-1,)
        return np.concatenate([np.reshape(arr, rows), np.reshape(values, rows)], axis=1)
    return np.concatenate([arr, values], axis=_shift(axis))


@batched_helper
def batched_append_tangent(t, arr, values, which, axis=None):
    """np.append's tangent for a batched tangent `t` of operand `which` (the other's is zero)."""
    zeros = np.zeros(np.shape(t)[:1] + np.shape(values if which == 0 else arr))
    return batched_append(*((t, zeros) if which == 0 else (zeros, t)), axis)


defvjp(  # the concatenation of the two, flattened first when there is no axis
    np.append,
    "arr, values, axis=None",
    arr="joined_vjp(g, (arr, values), 0, axis)",
    values="joined_vjp(g, (arr, values), 1, axis)",
    jvp=explicit(
        arr="np.append(t, np.zeros_like(values), axis=axis)",
        values="np.append(np.zeros_like(arr), t, axis=axis)",
        batched={
            "arr": "batched_append_tangent(t, arr, values, 0, axis)",
            "values": "batched_append_tangent(t, arr, values, 1, axis)",
        },
    ),
)

# ----------------------------------------------------------------------------- repeat, tile


@helper(jvp=linear("g"))
def repeat_vjp(g, a, repeats, axis=None):
    """np.repeat's cotangent: the copies of each element (or slice along `axis`) add up."""
    shape = np.shape(a)
    if axis is None:
        d = np.zeros(int(np.prod(shape)), dtype=np.result_type(g, np.float32))
        np.add.at(d, np.repeat(np.arange(d.size), repeats), g)
        return np.reshape(d, shape)
    ax = axis % len(shape)
    d = np.zeros((shape[ax],) + shape[:ax] + shape[ax + 1 :], dtype=np.result_type(g, np.float32))
    np.add.at(d, np.repeat(np.arange(shape[ax]), repeats), np.moveaxis(g, ax, 0))
    return np.moveaxis(d, 0, ax)


@batched_of(repeat_vjp)
def batched_repeat_vjp(g, a, repeats, axis=None):
    shape = np.shape(a)
    if axis is None:
        d = np.zeros((int(np.prod(shape)),) + np.shape(g)[:1], dtype=np.result_type(g, np.float32))
        np.add.at(d, np.repeat(np.arange(len(d)), repeats), np.transpose(g))
        return np.reshape(np.transpose(d), np.shape(g)[:1] + shape)
    ax = axis % len(shape)
    moved = np.moveaxis(g, ax + 1, 0)
    d = np.zeros((shape[ax],) + np.shape(moved)[1:], dtype=np.result_type(g, np.float32))
    np.add.at(d, np.repeat(np.arange(shape[ax]), repeats), moved)
    return np.moveaxis(d, 0, ax + 1)


@numba_of(repeat_vjp)
def _repeat_vjp(g, a, repeats, axis=None):
    """Numba's np.repeat takes no axis: the flat form, with a count or a count per element."""
    if not (_array(g) and _array(a) and _absent(axis)):
        return None
    each = _array(repeats)

    def impl(g, a, repeats, axis=None):
        d = np.zeros(a.size)
        j = 0
        for i in range(a.size):
            r = (
                (repeats.ravel()[i] if repeats.size > 1 else repeats.ravel()[0])
                if each
                else repeats
            )
            for _ in range(r):
                d[i] += g[j]
                j += 1
        return d.reshape(a.shape)

    return impl


@batched_helper
def batched_repeat(a, repeats, axis=None):
    if axis is None:
        return np.repeat(np.reshape(a, np.shape(a)[:1] + (-1,)), repeats, axis=1)
    return np.repeat(a, repeats, axis=_shift(axis))


defvjp(
    np.repeat,
    "a, repeats, axis=None",
    inert=("repeats",),
    a="repeat_vjp(g, a, repeats, axis=axis)",
    jvp=linear("a", batched=batched_repeat),
)


@helper
def _tiling(shape, reps):
    """np.tile's operand shape and repeats, both padded with ones to the result's rank."""
    reps = (int(reps),) if np.ndim(reps) == 0 else tuple(int(r) for r in reps)
    n = max(len(reps), len(shape))
    return (1,) * (n - len(shape)) + tuple(shape), (1,) * (n - len(reps)) + reps


@helper(batch_safe=True, jvp=linear("g"))
def tile_vjp(g, A, reps):
    """np.tile's cotangent: the tiles add up. Leading axes of `g` beyond the result's are a
    batch."""
    shape, reps = _tiling(np.shape(A), reps)
    lead = np.shape(g)[: np.ndim(g) - len(shape)]
    split = lead + tuple(n for pair in zip(reps, shape) for n in pair)
    axes = tuple(len(lead) + 2 * i for i in range(len(shape)))
    return np.reshape(np.sum(np.reshape(g, split), axis=axes), lead + np.shape(A))


@batched_helper
def batched_tile(A, reps):
    shape, reps = _tiling(np.shape(A)[1:], reps)
    return np.tile(np.reshape(A, np.shape(A)[:1] + shape), (1,) + reps)


defvjp(
    np.tile,
    "A, reps",
    inert=("reps",),
    A="tile_vjp(g, A, reps)",
    jvp=linear("A", batched=batched_tile),
)

# ----------------------------------------------------------------------------- pad
# The modes that copy values (edge, reflect, symmetric, wrap) are gathers: each result element is
# an element of the input, which np.pad itself says when it pads the elements' positions. Mode
# "constant" is linear in the array and its constant_values together.

_PAD_MODES = {"mode": ("constant", "edge", "reflect", "symmetric", "wrap")}


@helper
def _pad_sources(shape, pad_width, mode):
    """For each result element, the flat position of the input element it copies (-1: a
    constant)."""
    positions = np.arange(math.prod(shape)).reshape(shape)
    if mode == "constant":
        return np.pad(positions, pad_width, constant_values=-1).reshape(-1)
    return np.pad(positions, pad_width, mode=mode).reshape(-1)


@helper(batch_safe=True, jvp=linear("g"))
def pad_vjp(g, array, pad_width, mode="constant"):
    """np.pad's cotangent for `array`: every copy of an element adds to it. Leading axes of `g`
    beyond the result's are a batch."""
    shape = np.shape(array)
    lead = np.shape(g)[: np.ndim(g) - len(shape)]
    sources = _pad_sources(shape, pad_width, mode)
    kept = sources >= 0
    d = np.zeros((math.prod(shape),) + lead, dtype=np.result_type(g, np.float32))
    rows = np.reshape(g, lead + (sources.size,))
    np.add.at(d, sources[kept], np.moveaxis(rows[..., kept], -1, 0))
    return np.reshape(np.moveaxis(d, 0, -1), lead + shape)


@helper(batch_safe=True, jvp=linear("g"))
def pad_values_vjp(g, array, pad_width, constant_values):
    """np.pad's cotangent for `constant_values`: each value's pad area of `g`, added up, summed
    down to the shape the values were given in (NumPy broadcasts them to (ndim, 2))."""
    shape = np.shape(array)
    n = len(shape)
    lead = np.shape(g)[: np.ndim(g) - n]
    axes = tuple(range(len(lead), np.ndim(g)))
    full = np.zeros(lead + (n, 2), dtype=np.result_type(g, np.float32))
    for i in range(n):
        for side in range(2):
            which = np.zeros((n, 2))
            which[i, side] = 1.0
            area = np.pad(np.zeros(shape), pad_width, constant_values=which)
            full[..., i, side] = np.sum(g * area, axis=axes)
    target = np.shape(constant_values)
    extra = len(full.shape) - len(lead) - len(target)
    full = np.sum(full, axis=tuple(range(len(lead), len(lead) + extra)))
    ones = tuple(
        len(lead) + i for i, m in enumerate(target) if m == 1 and full.shape[len(lead) + i] != 1
    )
    full = np.sum(full, axis=ones, keepdims=True)
    if not lead and not target:
        return full[()]
    return np.reshape(full, lead + target)


@batched_helper
def batched_pad(t, pad_width, mode="constant"):
    """np.pad of every row of `t` (its tangent, for the array: constants pad with zeros)."""
    n = np.ndim(t) - 1
    pairs = np.asarray(pad_width)
    if pairs.size == 2 and pairs.shape != (2, 1):
        pairs = pairs.reshape(-1)
    pairs = np.concatenate([[[0, 0]], np.broadcast_to(pairs, (n, 2))]).astype(int)
    if mode == "constant":
        return np.pad(t, pairs)
    return np.pad(t, pairs, mode=mode)


@batched_helper
def batched_pad_values(t, array, pad_width):
    """np.pad's tangent for its constant_values, for rows of tangents `t` of the values."""
    zeros = np.zeros(np.shape(array))
    return np.stack([np.pad(zeros, pad_width, constant_values=row) for row in t])


defvjp(
    np.pad,
    "array, pad_width, mode='constant', *, constant_values=0, reflect_type='even', "
    "stat_length=None, end_values=0",
    literal={**_PAD_MODES, "reflect_type": ("even",)},
    inert=("pad_width", "mode", "reflect_type"),
    array="pad_vjp(g, array, pad_width, mode=mode)",
    constant_values="pad_values_vjp(g, array, pad_width, constant_values)",
    jvp=explicit(
        array="np.pad(t, pad_width, mode=mode)",
        constant_values="np.pad(np.zeros(np.shape(array)), pad_width, constant_values=t)",
        batched={
            "array": "batched_pad(t, pad_width, mode)",
            "constant_values": "batched_pad_values(t, array, pad_width)",
        },
    ),
)
