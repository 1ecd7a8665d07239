"""scipy.special: gamma-function logarithms, error functions, the logistic pair, logsumexp and
the softmaxes, xlogy and xlog1py.

SciPy stays optional: nothing here imports it when s2sad is imported. The helpers below are
NumPy code (the few that need a SciPy function import it when they first run), and the entries
are registered by `_scipy_special`, which runs at the first rule look-up after the user's code
imported scipy.special (`registry.on_import`): importing scipy.special costs some 300 ms, which
`import s2sad` never pays.

The helpers that take a cotangent or tangent read its leading axes beyond the primal's as a
batch (`_sum_over`), so they serve batched Jacobians and Hessians as they are. Numba has no
scipy.special (without numba-scipy): jitted code calling these functions falls back to Python
(`jit=True` warns, `jit="strict"` refuses), so there are no Numba forms.
"""

import numpy as np

from .common import _axes, expand_reduced
from .helpers import helper
from .registry import ELEMENTWISE, binary, defvjp, explicit, on_import, unary

# ----------------------------------------------------------------------------- gamma functions


@helper
def _scalar_like(out, x):
    """SciPy's result as NumPy gives it: a 0-d array from a number becomes a NumPy scalar."""
    return out[()] if np.ndim(out) == 0 and np.ndim(x) == 0 else out


@helper(jvp=explicit(x="t * sc_polygamma(n + 1, x)"))
def sc_polygamma(n, x):
    """scipy.special.polygamma(n, x), the n-th derivative of digamma (imported on first use)."""
    from scipy import special

    return _scalar_like(special.polygamma(n, x), x)


@helper(jvp=explicit(x="t * sc_polygamma(1, x)"))
def sc_digamma(x):
    """scipy.special.digamma(x), the derivative of gammaln (imported on first use)."""
    from scipy import special

    return special.digamma(x)


# ----------------------------------------------------------------------------- logsumexp


@helper
def _sum_over(p, like, axis):
    """np.sum of `p` over `axis` of `like`, dimensions kept; axes of `p` before `like`'s (a
    batch) are kept whole."""
    lead = np.ndim(p) - np.ndim(like)
    if lead < 0:  # a cotangent or tangent broadcast from fewer axes
        p, lead = np.broadcast_to(p, np.shape(like)), 0
    return np.sum(p, axis=tuple(a + lead for a in _axes(axis, np.ndim(like))), keepdims=True)


_WEIGHTS = "lse_weights(a, ans, axis, keepdims, b, weighted)"


@helper(
    jvp=explicit(
        a=f"{_WEIGHTS} * t",
        ans=f"-{_WEIGHTS} * expand_reduced(t, a, axis, keepdims)",
        b="lse_weights(a, ans, axis, keepdims) * t * weighted",
        batched={
            "ans": f"-{_WEIGHTS} * batched_expand_reduced(t, a, axis, keepdims)",
            "b": "lse_weights(a, ans, axis, keepdims) * batched_lift(t, a) * weighted",
        },
    )
)
def lse_weights(a, ans, axis=None, keepdims=False, b=None, weighted=True):
    """d logsumexp / d a: b * exp(a - logsumexp(a, b=b)), a softmax (for b >= 0 each weight is at
    most 1: exp never overflows); 0 where every term is 0 (logsumexp -inf). `weighted=False` leaves out the factor b (the
    derivative in b). `b` must broadcast to the shape of `a`."""
    if b is not None and np.broadcast_shapes(np.shape(a), np.shape(b)) != np.shape(a):
        raise ValueError(
            f"s2sad: the derivative of scipy.special.logsumexp with b of shape {np.shape(b)} "
            f"larger than a's {np.shape(a)} is not supported (broadcast a to b's shape first)"
        )
    full = expand_reduced(ans, a, axis, keepdims)
    empty = np.isneginf(full)
    w = np.where(empty, 0.0, np.exp(a - np.where(empty, 0.0, full)))
    return w * b if b is not None and weighted else w


# ----------------------------------------------------------------------------- softmaxes


@helper
def softmax_vjp_ds(t, g, s, axis=None):
    """The tangent of softmax_vjp(g, s) along `t` for `s`."""
    return t * (g - _sum_over(g * s, s, axis)) - s * _sum_over(g * t, s, axis)


@helper(
    batch_safe=True,
    jvp=explicit(g="softmax_vjp(t, s, axis)", s="softmax_vjp_ds(t, g, s, axis)"),
)
def softmax_vjp(g, s, axis=None):
    """softmax's cotangent s * (g - sum(g * s)) over `axis` (`s` the softmax); its Jacobian is
    symmetric, so this is its tangent too."""
    return s * (g - _sum_over(g * s, s, axis))


@helper
def log_softmax_vjp_dls(t, g, ls, axis=None):
    """The tangent of log_softmax_vjp(g, ls) along `t` for `ls`."""
    return -np.exp(ls) * t * _sum_over(g, ls, axis)


@helper(
    batch_safe=True,
    jvp=explicit(g="log_softmax_vjp(t, ls, axis)", ls="log_softmax_vjp_dls(t, g, ls, axis)"),
)
def log_softmax_vjp(g, ls, axis=None):
    """log_softmax's cotangent g - softmax * sum(g) over `axis` (`ls` the log-softmax)."""
    return g - np.exp(ls) * _sum_over(g, ls, axis)


@helper(batch_safe=True)
def log_softmax_jvp(t, ls, axis=None):
    """log_softmax's tangent t - sum(softmax * t) over `axis` (`ls` the log-softmax)."""
    return t - _sum_over(np.exp(ls) * t, ls, axis)


# ----------------------------------------------------------------------------- the entries

_TWO_BY_SQRT_PI = "(2 / math.sqrt(math.pi))"
_LSE = "axis=axis, keepdims=keepdims"


@on_import("scipy.special")
def _scipy_special():
    """The rules of scipy.special's functions (run once the user's code imported it)."""
    import scipy.special as sc

    # gamma functions: the derivative of each is the next (polygamma's order n is an integer)
    unary(sc.gammaln, "g * sc_digamma(x)")
    unary(sc.digamma, "g * sc_polygamma(1, x)")
    defvjp(
        sc.polygamma,
        "n, x",
        inert=("n",),
        x="unbroadcast(g * sc_polygamma(n + 1, x), x)",
        jvp=ELEMENTWISE,
    )
    binary(
        sc.betaln,
        "unbroadcast(g * (sc_digamma(x1) - sc_digamma(x1 + x2)), x1)",
        "unbroadcast(g * (sc_digamma(x2) - sc_digamma(x1 + x2)), x2)",
    )

    # error functions: erfinv' = sqrt(pi)/2 exp(erfinv(x)^2), from its result
    unary(sc.erf, f"g * {_TWO_BY_SQRT_PI} * np.exp(-(x**2))")
    unary(sc.erfc, f"-g * {_TWO_BY_SQRT_PI} * np.exp(-(x**2))")
    unary(sc.erfinv, f"g / {_TWO_BY_SQRT_PI} * np.exp(ans**2)")

    # the logistic function and its inverse
    unary(sc.expit, "g * ans * (1 - ans)")
    unary(sc.logit, "g / (x * (1 - x))")

    # x log(y), x log(1 + y): 0 wherever x is 0 (for every y), so the derivative in y is 0
    # there too (never x / y = 0 / 0)
    binary(
        sc.xlogy,
        "unbroadcast(g * np.log(x2), x1)",
        "unbroadcast(g * x1 / np.where(x1 == 0, 1.0, x2), x2)",
    )
    binary(
        sc.xlog1py,
        "unbroadcast(g * np.log1p(x2), x1)",
        "unbroadcast(g * x1 / np.where(x1 == 0, 1.0, 1 + x2), x2)",
    )

    # logsumexp: the cotangent goes to each term by its softmax weight (b= weights the terms);
    # return_sign=True returns a pair: not covered
    defvjp(
        sc.logsumexp,
        "a, axis=None, b=None, keepdims=False, return_sign=False",
        literal={"return_sign": (False,)},
        a=f"expand_reduced(g, a, {_LSE}) * lse_weights(a, ans, {_LSE}, b=b)",
        b=f"unbroadcast(expand_reduced(g, a, {_LSE})"
        f" * lse_weights(a, ans, {_LSE}, b=b, weighted=False), b)",
        jvp=explicit(
            a=f"np.sum(lse_weights(a, ans, {_LSE}, b=b) * t, {_LSE})",
            b=f"np.sum(lse_weights(a, ans, {_LSE}, b=b, weighted=False) * t, {_LSE})",
            batched={
                "a": f"batched_sum(lse_weights(a, ans, {_LSE}, b=b) * t, {_LSE})",
                "b": f"batched_sum(lse_weights(a, ans, {_LSE}, b=b, weighted=False)"
                f" * batched_lift(t, a), {_LSE})",
            },
        ),
    )
    defvjp(
        sc.softmax,
        "x, axis=None",
        x="softmax_vjp(g, ans, axis=axis)",
        jvp=explicit(x="softmax_vjp(t, ans, axis)"),
    )
    defvjp(
        sc.log_softmax,
        "x, axis=None",
        x="log_softmax_vjp(g, ans, axis=axis)",
        jvp=explicit(x="log_softmax_jvp(t, ans, axis)"),
    )
