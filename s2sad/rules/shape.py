"""Shape and layout: each adjoint puts the cotangent back into the input's layout."""

import ast

import numpy as np

from .registry import defvjp

# the order of the elements is the forward call's: C (row-major) or Fortran, spelled literally
_ORDER = {"order": ("C", "F")}
defvjp(
    np.reshape,
    "a, /, shape=None, order='C', *, newshape=None, copy=None",
    literal=_ORDER,
    a="np.reshape(g, np.shape(a), order=order)",
)
defvjp(np.ravel, "a, order='C'", literal=_ORDER, a="np.reshape(g, np.shape(a), order=order)")
defvjp(np.squeeze, "a, axis=None", a="np.reshape(g, np.shape(a))")
defvjp(np.expand_dims, "a, axis", a="np.reshape(g, np.shape(a))")
defvjp(
    np.transpose,
    "a, axes=None",
    a=lambda args: (
        "np.transpose(g)"
        if _is_none(args["axes"])
        else f"np.transpose(g, {inverse_axes(args['axes'])})"
    ),
)
defvjp(np.swapaxes, "a, axis1, axis2", a="np.swapaxes(g, axis1, axis2)")
defvjp(np.moveaxis, "a, source, destination", a="np.moveaxis(g, destination, source)")
defvjp(
    np.concatenate,
    "arrays, /, axis=0, out=None, *, dtype=None, casting='same_kind'",
    seq=("arrays",),
    arrays="concatenate_vjp(g, arrays, k, axis=axis)",
)
defvjp(
    np.stack,
    "arrays, axis=0, out=None, *, dtype=None, casting='same_kind'",
    seq=("arrays",),
    arrays="stack_vjp(g, k, axis=axis)",
)
defvjp(np.broadcast_to, "array, shape, subok=False", array="unbroadcast(g, array)")


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


# diagonals, triangles, flips and rolls: each adjoint puts g back where the call took values from
defvjp(np.diag, "v, k=0", v="diag_vjp(g, v, k=k)")
defvjp(
    np.diagonal,
    "a, offset=0, axis1=0, axis2=1",
    a="diagonal_vjp(g, a, offset=offset, axis1=axis1, axis2=axis2)",
)
defvjp(np.tril, "m, k=0", m="unbroadcast(np.tril(g, k=k), m)")  # a 1-D m repeats down the rows
defvjp(np.triu, "m, k=0", m="unbroadcast(np.triu(g, k=k), m)")
defvjp(np.flip, "m, axis=None", m="np.flip(g, axis=axis)")
defvjp(np.roll, "a, shift, axis=None", a="np.roll(g, np.negative(shift), axis=axis)")
