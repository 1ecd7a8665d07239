"""Splitting arrays and changing their rank or orientation: split, array_split, hsplit, vsplit,
dsplit, atleast_1d/2d/3d (one argument), flipud, fliplr, rot90 and rollaxis. Each is linear: its
tangent is the same call on the tangent, its cotangent the inverse rearrangement. Each op's entry
sits below the helpers its templates call (NumPy, batched and Numba forms side by side, as
rules/helpers.py says).
"""

import typing

import numpy as np

from .common import _array, _integer, _shift
from .helpers import batched_helper, batched_of, helper, numba_of
from .registry import LIST_VALUED, defvjp, linear
from .stacking import _promoted

if typing.TYPE_CHECKING:  # bound by s2sad.numba_helpers (see rules/helpers.py)
    from numba import types

# ----------------------------------------------------------------------------- splits
# A split's result is a list of arrays. The cotangent of such a list is one flat array: its
# items' cotangents raveled and joined in order (pieces of any shapes add up that way). Indexing
# the list (`a, b = np.split(x, 2)`, `parts[0]`, a loop over it) scatters an item's cotangent
# into it (rules/indexing.py's getitem_vjp hands lists to `item_vjp`), and a split's cotangent
# puts the flat array back where each piece came from.


@helper
def _item_bounds(x, index):
    if not isinstance(index, (int, np.integer)):
        raise ValueError(
            "s2sad differentiates an item of a list of arrays read by an integer index only"
        )
    k = index % len(x)
    start = sum(np.size(a) for a in x[:k])
    return start, start + np.size(x[k])


@helper(jvp=linear("g"))
def item_vjp(g, x, index):
    """The cotangent of the list of arrays `x` (flat, see above) from that of `x[index]`."""
    start, stop = _item_bounds(x, index)
    d = np.zeros(sum(np.size(a) for a in x), dtype=np.result_type(g, np.float32))
    d[start:stop] = np.reshape(g, -1)
    return d


@batched_of(item_vjp)
def batched_item_vjp(g, x, index):
    start, stop = _item_bounds(x, index)
    size = sum(np.size(a) for a in x)
    d = np.zeros(np.shape(g)[:1] + (size,), dtype=np.result_type(g, np.float32))
    d[:, start:stop] = np.reshape(g, np.shape(g)[:1] + (-1,))
    return d


@numba_of(item_vjp)
def _item_vjp(g, x, index):
    if not (isinstance(x, types.List) and _integer(index)):
        return None

    def impl(g, x, index):
        k = index % len(x)
        start = 0
        total = 0
        for i in range(len(x)):
            if i < k:
                start += x[i].size
            total += x[i].size
        d = np.zeros(total)
        d[start : start + x[k].size] = np.ascontiguousarray(g).reshape(-1)
        return d

    return impl


@helper(nondiff=True)
def list_cotangent_zeros(x):
    """A zero cotangent for a list of arrays, which a loop over its items (or a branch reading
    one) would start from: refused, since a loop adds into it item by item, not flat."""
    raise NotImplementedError(
        "s2sad does not follow the cotangent of a list of arrays (np.split's pieces) through a "
        "loop over it, or a branch reading it, yet: read the pieces by index outside "
        "(a, b = np.split(x, 2))"
    )


@helper
def _split_positions(ary, indices_or_sections, axis, even):
    """Where each element of the pieces comes from in `ary`, in the flat cotangent's order."""
    positions = np.arange(np.size(ary)).reshape(np.shape(ary))
    if axis is None:  # np.hsplit's axis
        axis = 1 if np.ndim(ary) > 1 else 0
    pieces = (np.split if even else np.array_split)(positions, indices_or_sections, axis)
    return np.concatenate([np.reshape(p, -1) for p in pieces])


@helper(jvp=linear("g"))
def split_vjp(g, ary, indices_or_sections, axis=0, even=True):
    """The flat cotangent of the pieces of `ary` (split by np.split, or np.array_split where
    `even` is False, along `axis`; None: np.hsplit's axis, 1, or 0 for a vector) put back where
    each piece came from."""
    d = np.zeros(np.size(ary), dtype=np.result_type(g, np.float32))
    d[_split_positions(ary, indices_or_sections, axis, even)] = g
    return np.reshape(d, np.shape(ary))


@numba_of(split_vjp)
def _split_vjp(g, ary, indices_or_sections, axis=0, even=True):
    if not (_array(g) and _array(ary)):
        return None

    def impl(g, ary, indices_or_sections, axis=0, even=True):
        positions = np.arange(ary.size).reshape(ary.shape)
        ax = (1 if ary.ndim > 1 else 0) if axis is None else axis
        if even:
            pieces = np.split(positions, indices_or_sections, ax)
        else:
            pieces = np.array_split(positions, indices_or_sections, ax)
        d = np.zeros(ary.size)
        j = 0
        for p in pieces:
            for i in np.ascontiguousarray(p).reshape(-1):
                d[i] = g[j]
                j += 1
        return d.reshape(ary.shape)

    return impl


@batched_of(split_vjp)
def batched_split_vjp(g, ary, indices_or_sections, axis=0, even=True):
    d = np.zeros(np.shape(g)[:1] + (np.size(ary),), dtype=np.result_type(g, np.float32))
    d[:, _split_positions(ary, indices_or_sections, axis, even)] = g
    return np.reshape(d, np.shape(g)[:1] + np.shape(ary))


class _BatchedPieces(list):
    """The pieces of a batched tangent's split (each with the batch axis): `t[:, k]`, how a
    batched tangent's item is read, is piece k."""

    def __getitem__(self, index):
        if isinstance(index, tuple) and len(index) == 2 and index[0] == slice(None):
            index = index[1]
        return list.__getitem__(self, index)


def _batched_pieces(pieces):
    return _BatchedPieces(pieces)


@batched_helper
def batched_split(ary, indices_or_sections, axis=0):
    return _batched_pieces(np.split(ary, indices_or_sections, axis=_shift(axis)))


@batched_helper
def batched_array_split(ary, indices_or_sections, axis=0):
    return _batched_pieces(np.array_split(ary, indices_or_sections, axis=_shift(axis)))


@batched_helper
def batched_hsplit(ary, indices_or_sections):
    axis = 2 if np.ndim(ary) > 2 else 1
    return _batched_pieces(np.split(ary, indices_or_sections, axis=axis))


@batched_helper
def batched_vsplit(ary, indices_or_sections):
    return _batched_pieces(np.split(ary, indices_or_sections, axis=1))


@batched_helper
def batched_dsplit(ary, indices_or_sections):
    return _batched_pieces(np.split(ary, indices_or_sections, axis=3))


for _func, _signature, _call, _batched in [
    (np.split, "ary, indices_or_sections, axis=0", "axis", batched_split),
    (
        np.array_split,
        "ary, indices_or_sections, axis=0",
        "axis, False",
        batched_array_split,
    ),
    (np.hsplit, "ary, indices_or_sections", "None", batched_hsplit),
    (np.vsplit, "ary, indices_or_sections", "0", batched_vsplit),
    (np.dsplit, "ary, indices_or_sections", "2", batched_dsplit),
]:
    LIST_VALUED[id(_func)] = _func
    defvjp(
        _func,
        _signature,
        inert=("indices_or_sections",),
        ary=f"split_vjp(g, ary, indices_or_sections, {_call})",
        jvp=linear("ary", batched=_batched),
    )

# ----------------------------------------------------------------------------- ranks and turns


@batched_helper
def batched_atleast_1d(a):
    return _promoted(a, 1)


@batched_helper
def batched_atleast_2d(a):
    return _promoted(a, 2)


@batched_helper
def batched_atleast_3d(a):
    return _promoted(a, 3)


# one argument only: with several, NumPy returns a list (the call is refused: no rule binds it)
for _func, _batched in [
    (np.atleast_1d, batched_atleast_1d),
    (np.atleast_2d, batched_atleast_2d),
    (np.atleast_3d, batched_atleast_3d),
]:
    defvjp(
        _func,
        "a, /",
        a="np.reshape(g, np.shape(a))",
        batched={"a": "batched_reshape(g, np.shape(a))"},
        jvp=linear("a", batched=_batched),
    )


@batched_helper
def batched_flipud(m):
    return np.flip(m, 1)


@batched_helper
def batched_fliplr(m):
    return np.flip(m, 2)


defvjp(
    np.flipud,
    "m",
    m="np.flipud(g)",
    batched={"m": "batched_flipud(g)"},
    jvp=linear("m", batched=batched_flipud),
)
defvjp(
    np.fliplr,
    "m",
    m="np.fliplr(g)",
    batched={"m": "batched_fliplr(g)"},
    jvp=linear("m", batched=batched_fliplr),
)


@batched_helper
def batched_rot90(m, k=1, axes=(0, 1)):
    return np.rot90(m, k, _shift(tuple(axes)))


defvjp(  # turned back as many times
    np.rot90,
    "m, k=1, axes=(0, 1)",
    m="np.rot90(g, -k, axes=axes)",
    batched={"m": "batched_rot90(g, -k, axes=axes)"},
    jvp=linear("m", batched=batched_rot90),
)


@helper
def _rolled(ndim, axis, start):
    """np.rollaxis(a, axis, start) as np.moveaxis(a, source, destination)."""
    axis = axis % ndim
    start = start + ndim if start < 0 else start
    return axis, start - 1 if axis < start else start


@helper(batch_safe=True, jvp=linear("g"))
def rollaxis_vjp(g, a, axis, start=0):
    """np.rollaxis's cotangent: the axis moved back. Leading axes of `g` are a batch."""
    source, destination = _rolled(np.ndim(a), axis, start)
    lead = np.ndim(g) - np.ndim(a)
    return np.moveaxis(g, destination + lead, source + lead)


@batched_helper
def batched_rollaxis(a, axis, start=0):
    source, destination = _rolled(np.ndim(a) - 1, axis, start)
    return np.moveaxis(a, source + 1, destination + 1)


defvjp(
    np.rollaxis,
    "a, axis, start=0",
    a="rollaxis_vjp(g, a, axis, start=start)",
    jvp=linear("a", batched=batched_rollaxis),
)
