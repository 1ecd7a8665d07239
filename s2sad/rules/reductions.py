"""Reductions over `axis` (None, an int or a tuple) with `keepdims`."""

import numpy as np

from .registry import defvjp, nondiff

_SIG = "a, axis=None, dtype=None, out=None, keepdims=False"

defvjp(np.sum, _SIG, a="expand_reduced(g, a, axis=axis, keepdims=keepdims)")
defvjp(np.mean, _SIG, a="mean_vjp(g, a, axis=axis, keepdims=keepdims)")
defvjp(np.prod, _SIG, a="prod_vjp(g, a, ans, axis=axis, keepdims=keepdims)")
for _f in (np.max, np.min, np.amax, np.amin):
    defvjp(
        _f,
        "a, axis=None, out=None, keepdims=False",
        a="extremum_vjp(g, a, ans, axis=axis, keepdims=keepdims)",
    )
defvjp(
    np.var,
    "a, axis=None, dtype=None, out=None, ddof=0, keepdims=False",
    a="var_vjp(g, a, axis=axis, ddof=ddof, keepdims=keepdims)",
)
defvjp(
    np.std,
    "a, axis=None, dtype=None, out=None, ddof=0, keepdims=False",
    a="std_vjp(g, a, ans, axis=axis, ddof=ddof, keepdims=keepdims)",
)
defvjp(
    np.linalg.norm,
    "x, ord=None, axis=None, keepdims=False",
    x="norm_vjp(g, x, ans, ord=ord, axis=axis, keepdims=keepdims)",
)

# scans along an axis (axis=None: over the flattened array); np.diff's prepend/append are refused
defvjp(np.cumsum, "a, axis=None, dtype=None, out=None", a="cumsum_vjp(g, a, axis=axis)")
defvjp(np.cumprod, "a, axis=None, dtype=None, out=None", a="cumprod_vjp(g, a, axis=axis)")
defvjp(np.diff, "a, n=1, axis=-1", a="diff_vjp(g, a, n=n, axis=axis)")

# integer and boolean results: piecewise constant, a zero derivative almost everywhere
nondiff(
    np.argmax,
    np.argmin,
    np.argsort,
    np.argpartition,
    np.searchsorted,
    np.digitize,
    np.nonzero,
    np.flatnonzero,
    np.argwhere,
    np.count_nonzero,
    np.signbit,
    np.any,
    np.all,
)
