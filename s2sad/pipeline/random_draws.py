"""Refusal of random draws inside a differentiated function.

s2sad runs the user's primal more than once: `has_aux` takes the aux from a second plain call
of the function, a `vjp` pullback over a loop runs the recording sweep again, and under
`jit=True` Numba draws from a generator of its own that `np.random.seed` does not seed. A draw
inside the function would give the value, the aux and the gradients from different noise,
silently. So a call that draws (or seeds, or makes a generator), on any path, is refused when
the function is transformed, as JAX asks for an explicit key: the noise is drawn outside and
passed in as an argument.
"""

from __future__ import annotations

import ast
import random

import numpy as np

from ..errors import UnsupportedSyntaxError

# methods of a Generator or RandomState held in a local (`rng.normal(...)`, `rng` a parameter):
# no array has one; names a user's object may well have too (`f`, `power`, `bytes`) are left out
DRAW_METHODS = frozenset(
    """beta binomial chisquare choice dirichlet exponential gamma geometric gumbel
    hypergeometric integers laplace logistic lognormal logseries multinomial
    multivariate_hypergeometric multivariate_normal negative_binomial noncentral_chisquare
    noncentral_f normal pareto permutation permuted poisson rand randint randn random
    random_integers random_sample rayleigh shuffle standard_cauchy standard_exponential
    standard_gamma standard_normal standard_t tomaxint triangular uniform vonmises wald weibull
    zipf rvs""".split()
)

_GENERATORS = (np.random.Generator, np.random.RandomState, random.Random)


def draws(callee) -> bool:
    """Whether calling `callee` draws from (or seeds, or makes) a random generator."""
    if isinstance(getattr(callee, "__self__", None), _GENERATORS):
        return True  # np.random.normal (the global RandomState's), rng.normal, random.gauss
    module = getattr(callee, "__module__", None) or ""
    if module == "random" or module.split(".")[:2] == ["numpy", "random"]:
        return True  # np.random.default_rng, np.random.seed, np.random.Generator(...)
    return getattr(callee, "__name__", None) == "rvs"  # scipy.stats.norm.rvs


def refuse_random_draw(parsed, call: ast.Call, callee) -> None:
    """Refuse `call` if it draws random numbers (`callee`: what it calls, None for a method of
    a local value, read by its name)."""
    if callee is None:
        func = call.func
        if not (isinstance(func, ast.Attribute) and func.attr in DRAW_METHODS):
            return
    elif not draws(callee):
        return
    text = ast.unparse(call.func)
    raise parsed.error(
        UnsupportedSyntaxError,
        f"`{text}(...)` draws random numbers inside the differentiated function: s2sad runs "
        "the function more than once (the aux of has_aux, a vjp's pullback, jit=True's own "
        "generator), so the value, the aux and the gradient would come from different draws",
        call,
        hint="draw the noise outside and pass it in as an argument "
        "(`noise = rng.normal(size=n); s2sad.grad(loss)(w, x, noise)`)",
    )
