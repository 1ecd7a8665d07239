"""Shape and layout: each adjoint puts the cotangent back into the input's layout. Each op's entry
sits below the helpers its templates call (NumPy, batched and Numba forms side by side, as
rules/helpers.py says); most are linear, and forward mode applies their batched form (`batched_*`,
the same function on every row of a tangent with a leading batch axis) to a batched tangent.
"""

import ast
import typing

import numpy as np

from .common import _array, _integer, _shift, batched_broadcast_to
from .helpers import batched_helper, batched_of, helper, numba_of
from .registry import ELEMENTWISE, defvjp, linear

if typing.TYPE_CHECKING:  # bound by s2sad.numba_helpers (see rules/helpers.py)
    from numba import literal_unroll, types
    from numba.np.numpy_support import as_dtype

# ----------------------------------------------------------------------------- reshapes

# the order of the elements is the forward call's: C (row-major) or Fortran, spelled literally
_ORDER = {"order": ("C", "F")}


@batched_helper
def batched_reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    """np.reshape of every row."""
    shape = newshape if shape is None else shape
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    rows = np.shape(a)[:1]
    if order == "F":  # the batch as the slowest axis in Fortran order
        moved = np.moveaxis(np.asarray(a), 0, -1)
        return np.moveaxis(np.reshape(moved, shape + rows, order="F"), -1, 0)
    return np.reshape(a, rows + shape)


defvjp(
    np.reshape,
    "a, /, shape=None, order='C', *, newshape=None, copy=None",
    literal=_ORDER,
    a="np.reshape(g, np.shape(a), order=order)",
    batched={"a": "batched_reshape(g, np.shape(a), order=order)"},
    jvp=linear("a", batched=batched_reshape),
)

for _layout in (np.ascontiguousarray, np.asfortranarray):  # the same values in another layout,
    defvjp(  # and a number or 0-d array as a (1,) array
        _layout,
        "a, dtype=None, *, like=None",
        a="reshape_like(g, a)",
        batched={"a": "batched_reshape(g, np.shape(a))"},
        jvp=ELEMENTWISE,
    )


@batched_helper
def batched_ravel(a, order="C"):
    return batched_reshape(a, -1, order)


defvjp(
    np.ravel,
    "a, order='C'",
    literal=_ORDER,
    a="np.reshape(g, np.shape(a), order=order)",
    batched={"a": "batched_reshape(g, np.shape(a), order=order)"},
    jvp=linear("a", batched=batched_ravel),
)


@batched_helper
def batched_squeeze(a, axis=None):
    if axis is None:
        shape = np.shape(a)
        return np.reshape(a, shape[:1] + tuple(n for n in shape[1:] if n != 1))
    return np.squeeze(a, axis=_shift(axis))


defvjp(
    np.squeeze,
    "a, axis=None",
    a="np.reshape(g, np.shape(a))",
    batched={"a": "batched_reshape(g, np.shape(a))"},
    jvp=linear("a", batched=batched_squeeze),
)


@batched_helper
def batched_expand_dims(a, axis):
    return np.expand_dims(a, _shift(axis))


defvjp(
    np.expand_dims,
    "a, axis",
    a="np.reshape(g, np.shape(a))",
    batched={"a": "batched_reshape(g, np.shape(a))"},
    jvp=linear("a", batched=batched_expand_dims),
)
defvjp(
    np.broadcast_to,
    "array, shape, subok=False",
    array="unbroadcast(g, array)",
    jvp=linear("array", batched=batched_broadcast_to),
)


@helper(jvp=linear("t"), shape_only=("x",), shaped_like="x")
def broadcast_like(t, x):
    """`t` broadcast to the shape of `x` (an elementwise tangent reading only operands of lower
    rank: `t + np.pi`); jitted code calls it, since Numba's np.broadcast_to fails for `()`."""
    return np.broadcast_to(t, np.shape(x))


@numba_of(broadcast_like)
def _broadcast_like(t, x):
    if not _array(x) or x.ndim == 0:  # a number (a 0-d array compiled code holds as one)
        if _array(t):
            return lambda t, x: np.ascontiguousarray(t).reshape(-1)[0]
        return lambda t, x: t
    if not _array(t):
        return lambda t, x: np.full(x.shape, t)
    return lambda t, x: np.broadcast_to(t, x.shape)


# ----------------------------------------------------------------------------- axes


def inverse_axes(axes: ast.expr) -> str:
    """The permutation undoing `transpose(a, axes)`, as source: a literal when the call spells the
    axes out (negative ones included), else computed from them."""
    if isinstance(axes, (ast.Tuple, ast.List)):
        try:
            values = [ast.literal_eval(e) for e in axes.elts]
        except ValueError:
            values = None
        if values and all(isinstance(v, int) for v in values):
            n = len(values)
            return repr(tuple(int(i) for i in np.argsort([v % n for v in values])))
    return "np.argsort(np.mod(axes, len(axes)))"


def _is_none(node) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _transpose_vjp(args: dict, transpose: str = "np.transpose") -> str:
    if _is_none(args["axes"]):
        return f"{transpose}(g)"
    return f"{transpose}(g, {inverse_axes(args['axes'])})"


@batched_helper
def batched_transpose(a, axes=None):
    """np.transpose of every row."""
    ndim = np.ndim(a) - 1
    if axes is None:
        return np.transpose(a, (0,) + tuple(range(ndim, 0, -1)))
    return np.transpose(a, (0,) + tuple(int(n) % ndim + 1 for n in axes))


defvjp(
    np.transpose,
    "a, axes=None",
    a=_transpose_vjp,
    batched={"a": lambda args: _transpose_vjp(args, "batched_transpose")},
    jvp=linear("a", batched=batched_transpose),
)


@batched_helper
def batched_swapaxes(a, axis1, axis2):
    return np.swapaxes(a, _shift(axis1), _shift(axis2))


defvjp(
    np.swapaxes,
    "a, axis1, axis2",
    a="np.swapaxes(g, axis1, axis2)",
    batched={"a": "batched_swapaxes(g, axis1, axis2)"},
    jvp=linear("a", batched=batched_swapaxes),
)


@batched_helper
def batched_moveaxis(a, source, destination):
    return np.moveaxis(a, _shift(source), _shift(destination))


defvjp(
    np.moveaxis,
    "a, source, destination",
    a="np.moveaxis(g, destination, source)",
    batched={"a": "batched_moveaxis(g, destination, source)"},
    jvp=linear("a", batched=batched_moveaxis),
)

# ----------------------------------------------------------------------------- joins


@helper(jvp=linear("g"))
def concatenate_vjp(g, arrays, k, axis=0):
    """The piece of np.concatenate's cotangent that belongs to input `k`."""
    if axis is None:
        start = sum(np.size(a) for a in arrays[:k])
        return np.reshape(g[start : start + np.size(arrays[k])], np.shape(arrays[k]))
    start = sum(np.shape(a)[axis] for a in arrays[:k])
    index = [slice(None)] * np.ndim(g)
    index[axis] = slice(start, start + np.shape(arrays[k])[axis])
    return g[tuple(index)]


@batched_of(concatenate_vjp)
def batched_concatenate_vjp(g, arrays, k, axis=0):
    """The rows of np.concatenate's cotangent that belong to input `k`."""
    if axis is None:
        start = sum(np.size(a) for a in arrays[:k])
        piece = g[:, start : start + np.size(arrays[k])]
        return np.reshape(piece, np.shape(g)[:1] + np.shape(arrays[k]))
    axis = axis % np.ndim(arrays[k])
    start = sum(np.shape(a)[axis] for a in arrays[:k])
    index = [slice(None)] * np.ndim(g)
    index[axis + 1] = slice(start, start + np.shape(arrays[k])[axis])
    return g[tuple(index)]


@numba_of(concatenate_vjp)
def _concatenate_vjp(g, arrays, k, axis=0):
    if not _array(g) or not (_integer(axis) or isinstance(axis, (int, types.Omitted))):
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

    def of_list(g, arrays, k, axis=0):  # arrays of one type, in a list
        ax = axis if axis >= 0 else axis + g.ndim
        start = 0
        for i in range(k):
            start += arrays[i].shape[ax]
        size = arrays[k].shape[ax]
        return np.moveaxis(np.moveaxis(g, ax, 0)[start : start + size], 0, ax)

    return of_list if isinstance(arrays, types.List) else impl


@batched_helper
def batched_concatenate(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    if axis is None:
        return np.concatenate([np.reshape(t, np.shape(t)[:1] + (-1,)) for t in arrays], axis=1)
    return np.concatenate(arrays, axis=_shift(axis))


defvjp(
    np.concatenate,
    "arrays, /, axis=0, out=None, *, dtype=None, casting='same_kind'",
    seq=("arrays",),
    arrays="concatenate_vjp(g, arrays, k, axis=axis)",
    jvp=linear("arrays", batched=batched_concatenate),
)


@helper(jvp=linear("g"))
def stack_vjp(g, k, axis=0):
    """The slice of np.stack's cotangent that belongs to input `k` (along axis 0, `g[k]`
    without np.moveaxis's Python cost: an RK4 step's `np.array([a, b])` has eight a step)."""
    if axis == 0 and type(g) is np.ndarray:
        return g[k]
    return np.moveaxis(g, axis, 0)[k]


@batched_of(stack_vjp)
def batched_stack_vjp(g, k, axis=0):
    """The rows of np.stack's cotangent that belong to input `k`."""
    return np.moveaxis(g, axis % (np.ndim(g) - 1) + 1, 1)[:, k]


@numba_of(stack_vjp)
def _stack_vjp(g, k, axis=0):
    # axis left out (Numba passes the default 0), an Omitted 0 or a literal 0
    given = axis.value if isinstance(axis, types.Omitted) else getattr(axis, "literal_value", axis)
    if type(given) is int and given == 0:

        def first(g, k, axis=0):  # Numba's moveaxis costs about 250 ns a call, g[k] nothing
            return g[k]

        return first

    def impl(g, k, axis=0):
        ax = axis if axis >= 0 else axis + g.ndim
        return np.moveaxis(g, ax, 0)[k]

    return impl


@helper
def stack_operands(arrays, axis=0):
    """`np.stack(arrays, axis)` in jitted code where the operands' ranks are not known when it
    is lowered (pipeline/lower.py): Numba's np.stack takes arrays only, and the user's
    `np.array([np.sum(v), k])` stacks numbers."""
    return np.stack(arrays, axis=axis)


@numba_of(stack_operands)
def _stack_operands(arrays, axis=0):
    if not isinstance(arrays, types.BaseTuple) or not all(
        isinstance(t, (types.Number, types.Boolean)) for t in arrays.types
    ):
        return lambda arrays, axis=0: np.stack(arrays, axis)
    # numbers: a vector of them, of their common type (axis can only be 0 or -1)
    dtype = np.result_type(*(as_dtype(t) for t in arrays.types))
    size = len(arrays.types)

    def numbers(arrays, axis=0):
        out = np.empty(size, dtype)
        i = 0
        for a in literal_unroll(arrays):
            out[i] = a
            i += 1
        return out

    return numbers


@batched_helper
def batched_stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    return np.stack(arrays, axis=_shift(axis))


defvjp(
    np.stack,
    "arrays, axis=0, out=None, *, dtype=None, casting='same_kind'",
    seq=("arrays",),
    arrays="stack_vjp(g, k, axis=axis)",
    jvp=linear("arrays", batched=batched_stack),
)

# ----------------------------------------------------------------------------- diagonals and rolls
# each adjoint puts g back where the call took values from


@helper(batch_safe=True, jvp=linear("g"))
def diagonal_vjp(g, a, offset=0, axis1=0, axis2=1):
    """The cotangent of np.diagonal(a, offset, axis1, axis2): `g` placed on that diagonal."""
    shape = np.shape(a)
    lead = np.ndim(g) - (len(shape) - 1)
    a1, a2 = axis1 % len(shape), axis2 % len(shape)
    size = np.shape(g)[-1]
    rows = np.arange(size) + max(0, -offset)
    cols = np.arange(size) + max(0, offset)
    full = np.zeros(np.shape(g)[:-1] + (shape[a1], shape[a2]), dtype=np.result_type(g, np.float32))
    full[..., rows, cols] = g
    return np.moveaxis(full, (-2, -1), (a1 + lead, a2 + lead))


@batched_helper
def batched_diagonal(a, offset=0, axis1=0, axis2=1):
    return np.diagonal(a, offset, _shift(axis1), _shift(axis2))


defvjp(
    np.diagonal,
    "a, offset=0, axis1=0, axis2=1",
    a="diagonal_vjp(g, a, offset=offset, axis1=axis1, axis2=axis2)",
    jvp=linear("a", batched=batched_diagonal),
)


@helper(batch_safe=True, jvp=linear("g"))
def diag_vjp(g, v, k=0):
    """The cotangent of np.diag(v, k): the diagonal read back (1-D v), or placed (2-D v)."""
    if np.ndim(v) == 1:
        return np.array(np.diagonal(g, k, axis1=-2, axis2=-1))
    return diagonal_vjp(g, v, k, 0, 1)


@numba_of(diag_vjp)
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


@batched_helper
def batched_diag(v, k=0):
    if np.ndim(v) == 3:  # rows of matrices: their diagonals
        return np.array(np.diagonal(v, k, axis1=1, axis2=2))
    n = np.shape(v)[1] + abs(k)
    out = np.zeros((np.shape(v)[0], n, n), dtype=np.result_type(v, np.float32))
    i = np.arange(np.shape(v)[1])
    out[:, i + max(0, -k), i + max(0, k)] = v
    return out


defvjp(np.diag, "v, k=0", v="diag_vjp(g, v, k=k)", jvp=linear("v", batched=batched_diag))


@batched_helper
def batched_tril(m, k=0):
    if np.ndim(m) == 2:  # rows of vectors: np.tril repeats a vector down the rows
        m = np.broadcast_to(m[:, None, :], np.shape(m)[:1] + np.shape(m)[1:] * 2)
    return np.tril(m, k)


@batched_helper
def batched_triu(m, k=0):
    if np.ndim(m) == 2:
        m = np.broadcast_to(m[:, None, :], np.shape(m)[:1] + np.shape(m)[1:] * 2)
    return np.triu(m, k)


defvjp(  # a 1-D m repeats down the rows
    np.tril, "m, k=0", m="unbroadcast(np.tril(g, k=k), m)", jvp=linear("m", batched=batched_tril)
)
defvjp(
    np.triu, "m, k=0", m="unbroadcast(np.triu(g, k=k), m)", jvp=linear("m", batched=batched_triu)
)


@batched_helper
def batched_flip(m, axis=None):
    if axis is None:
        return np.flip(m, tuple(range(1, np.ndim(m))))
    return np.flip(m, _shift(axis))


defvjp(
    np.flip,
    "m, axis=None",
    m="np.flip(g, axis=axis)",
    batched={"m": "batched_flip(g, axis=axis)"},
    jvp=linear("m", batched=batched_flip),
)


@batched_helper
def batched_roll(a, shift, axis=None):
    if axis is None:
        flat = np.reshape(a, np.shape(a)[:1] + (-1,))
        return np.reshape(np.roll(flat, shift, axis=1), np.shape(a))
    return np.roll(a, shift, _shift(axis))


defvjp(
    np.roll,
    "a, shift, axis=None",
    a="np.roll(g, np.negative(shift), axis=axis)",
    batched={"a": "batched_roll(g, np.negative(shift), axis=axis)"},
    jvp=linear("a", batched=batched_roll),
)
