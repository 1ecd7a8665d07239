"""The public transforms: `grad`, `vjp`, `value_and_grad`, `jvp` (with their decorator forms),
`jacobian` and `hessian` (from jacobians.py), and `source`, which reads the generated code. Each
returns a callable with the user function's signature (transformed.py); the source transform
runs on its first call (so names defined later in the module resolve) and is cached.
"""

from __future__ import annotations

from .compose import composable
from .cuda import CudaTransformed, cuda_transform
from .errors import S2SADError
from .keywords import refuse
from .jacobians import Hessian, Jacobian, hessian, jacobian  # noqa: F401  (s2sad.jacobian)
from .input_checks import check_parallel
from .transformed import BatchedJVPTransformed, JVPTransformed, Transformed


def jvp(f=None, wrt=0, *, batched=False, jit=False, target="cpu", parallel=False, **unknown):
    """Forward mode: `jvp(f, wrt)(*args, tangent=t)` returns `(out, out_tangent)`; `t` is an
    array shaped like the input (a tuple of them for a tuple `wrt`). With `batched=True`, `t`
    holds many tangents along a new first axis, and all of them are pushed through in one
    sweep: the result has that axis too (`vmap` of a jvp over the tangents)."""
    refuse("jvp", unknown, ("wrt", "batched", "jit", "target", "parallel"))

    def build(func):
        func = composable(func, target)
        if target == "cuda":
            return cuda_transform(func, wrt, "jvp")
        if batched:
            if jit:
                raise S2SADError(
                    "jvp(batched=True) has no jit=True yet: the batched helpers have no Numba "
                    "versions; call the jitted jvp once per tangent"
                )
            return BatchedJVPTransformed(func, wrt, "jvp_batched", False)
        return JVPTransformed(func, wrt, "jvp", jit, parallel=parallel)

    return build if f is None else build(f)


def _transform_decorator(mode):
    def make(f=None, wrt=0, *, jit=False, target="cpu", has_aux=False, parallel=False, **unknown):
        refuse(mode, unknown, ("wrt", "jit", "target", "has_aux", "parallel"))
        check_parallel(parallel, jit)

        def build(func):
            func = composable(func, target, mode)
            if target == "cuda":
                if has_aux:
                    raise S2SADError("has_aux=True has no target='cuda' yet")
                return cuda_transform(func, wrt, mode)
            if target != "cpu":
                raise ValueError(f"target must be 'cpu' or 'cuda', not {target!r}")
            # the user's own gradient: NumPy mode reuses dying temporaries (pipeline/reuse.py)
            return Transformed(func, wrt, mode, jit, has_aux, parallel, reuse=True)

        return build if f is None else build(f)

    # Python's own errors about the call then name the transform, not this factory
    make.__name__ = make.__qualname__ = mode
    return make


grad = _transform_decorator("grad")
grad.__doc__ = """Gradient of a scalar-valued `f` with respect to `wrt` (index, name or tuple).

    Usable as `s2sad.grad(f)`, `@s2sad.grad` or `@s2sad.grad(wrt="w")`. `f` may be a function,
    a lambda, a bound method (`wrt="self.W"` differentiates an attribute), a functools.partial;
    an argument may be a tree (dict, list, tuple, namedtuple, dataclass, or a class registered
    with s2sad.register_tree) and its gradient has the same structure; `wrt` may name a part of
    one (`"params.W"`, `"params['W']"`). `has_aux=True`: `f` returns `(value, aux)` and the
    transform returns `(gradient, aux)`; aux comes from a plain call of `f`.

    Transforms compose to second order: `grad(grad(f))`, `jacobian(grad(f))` (the Hessian),
    `jvp(grad(f))` (Hessian-vector products), `vjp(grad(f))`, and any transform of a function
    that calls a gradient made by s2sad (`df = grad(f)`, `def g(x): return np.sum(df(x) ** 2)`)
    differentiate through it by a rule of second derivatives of `f` (forward mode over its
    gradient code, as `hessian`), also for a `value_and_grad` (reverse mode only). Refused:
    third derivatives, parameter trees passed to the inner gradient, an inner `vjp`/`jvp`/
    `jacobian`, `has_aux` or `target="cuda"`; `jit=True` runs such code in Python (Numba
    cannot call the inner object; `jit="strict"` refuses it).

    `parallel=True` (with `jit`): loops whose iterations are independent run on Numba's threads
    (`prange`), their sums race-free; the numbers are the serial code's up to summation order."""
vjp = _transform_decorator("vjp")
vjp.__doc__ = """`vjp(f, wrt)(*args)` returns `(out, pullback)`; `pullback(seed)` is seed^T J.
    With `has_aux=True` (`f` returns `(out, aux)`): `(out, pullback, aux)`."""
value_and_grad = _transform_decorator("value_and_grad")
value_and_grad.__doc__ = """Like `grad`, returning `(value, gradient)` from one run (with
    `has_aux=True`: `((value, aux), gradient)`)."""


def source(transformed, *args, **kwargs) -> str:
    """The generated Python source behind a function made by s2sad.

    With arguments, the code specialized for them (as a call with them runs); without, the code
    of the last call, or the generic code (valid for any argument) before the first call."""
    if isinstance(transformed, CudaTransformed):
        if transformed.source is None:
            transformed.build()
        return transformed.source
    if isinstance(transformed, (Jacobian, Hessian)):
        return transformed.source(*args, **kwargs)
    if not isinstance(transformed, Transformed):
        raise S2SADError(
            f"{transformed!r} was not made by s2sad; pass the result of "
            "s2sad.grad, s2sad.vjp or s2sad.value_and_grad"
        )
    if args or kwargs:
        return transformed.specialized(transformed._bind(args, kwargs)).source
    return transformed.compiled.source
