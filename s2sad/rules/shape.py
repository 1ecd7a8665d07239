"""Shape and layout: each adjoint puts the cotangent back into the input's layout."""

import ast

import numpy as np

from .registry import defvjp

defvjp(
    np.reshape,
    "a, /, shape=None, order='C', *, newshape=None, copy=None",
    a="np.reshape(g, np.shape(a))",
)
defvjp(np.ravel, "a, order='C'", a="np.reshape(g, np.shape(a))")
defvjp(np.squeeze, "a, axis=None", a="np.reshape(g, np.shape(a))")
defvjp(np.expand_dims, "a, axis", a="np.reshape(g, np.shape(a))")


def _transpose_back(args: dict) -> str:
    """The inverse permutation: written out when the axes are literal (as Numba needs them)."""
    axes = args["axes"]
    if _is_none(axes):
        return "np.transpose(g)"
    if isinstance(axes, (ast.Tuple, ast.List)) and all(
        isinstance(e, ast.Constant) and type(e.value) is int for e in axes.elts
    ):
        perm = [e.value % len(axes.elts) for e in axes.elts]
        return f"np.transpose(g, {tuple(int(i) for i in np.argsort(perm))!r})"
    return "np.transpose(g, np.argsort(axes))"


defvjp(np.transpose, "a, axes=None", a=_transpose_back)
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


def _is_none(node) -> bool:
    return isinstance(node, ast.Constant) and node.value is None
