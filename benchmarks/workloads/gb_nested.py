"""gradbench's nested evals, `particle` and `saddle`: a derivative taken through a loop that
itself calls a derivative (reverse over reverse, the evals' `rr`), side by side with the peers.

The objectives are the gradbench tool's (benchmarks/gradbench/evals/particle.py, saddle.py):

- `particle`: x0(t_f)^2 where a charged particle, pushed by the gradient of a potential (the
  inner derivative, in the Euler loop), crosses the x axis; the outer derivative is d/dw.
- `saddle`: r1(a) = f(a, b*), b* found by gradient descent on -f(a, .) from the start (the
  inner derivative, in the descent loop); the outer derivative is d r1/da.

Each row here is one outer derivative at the eval's starting point, the unit that gradbench's
descent repeats (it times the whole descent: tens of these). s2sad differentiates the eval's
function, whose loop calls the inner derivative's code that s2sad generated (the eval modules
say why). The peers nest their own transforms: JAX, jax.grad over a Python while loop, eager
(jit cannot trace a loop whose trip count depends on the values), with the inner gradient
jax.jit(jax.grad(...)); PyTorch, torch.func.grad of torch.func.grad; autograd, grad of grad.
The peers' loops are the eval's, with their own sqrt for math.sqrt.
"""

from __future__ import annotations

import numpy as np

from benchmarks.gradbench.evals import particle as particle_eval
from benchmarks.gradbench.evals import saddle as saddle_eval

from .common import Case


def _generated() -> None:
    """The inner derivatives' code, which the evals' objectives call: the evals generate it at
    their first prepare (which also transforms the outer derivative and calls it once)."""
    if particle_eval.grad_potential is None:
        particle_eval.prepare("rr", {"w": 0.0}, False)
    if saddle_eval.grad_descent_loss is None:
        saddle_eval.prepare("rr", {"start": [1.0, 1.0]}, False)


def particle_inputs() -> dict:
    _generated()
    return {"w": 0.0, "forward": False}  # gradbench's start; the force in reverse mode


def saddle_inputs() -> dict:
    _generated()
    return {"a0": 1.0, "a1": 1.0, "s0": 1.0, "s1": 1.0, "forward": False}


# ----------------------------------------------------------------------------- peers


def make_particle(xp, grad, scalar):
    """naive_euler(w, forward) with the force by `grad` (the framework's gradient transform);
    `scalar` makes the starting state a value of the framework."""

    def potential(x0, x1, w):
        return 1.0 / xp.sqrt((x0 - 10.0) ** 2 + (x1 - (10.0 - w)) ** 2) + 1.0 / xp.sqrt(
            (x0 - 10.0) ** 2 + x1**2
        )

    force = grad(potential, (0, 1))

    def naive_euler(w, forward):
        x0, x1 = scalar(0.0), scalar(8.0)
        v0, v1 = scalar(0.75), scalar(0.0)
        dt = 0.1
        while True:
            a0, a1 = force(x0, x1, w)
            if x1 + dt * v1 <= 0.0:
                break
            x0, x1 = x0 + dt * v0, x1 + dt * v1
            v0, v1 = v0 - dt * a0, v1 - dt * a1
        t_f = -x1 / v1
        return (x0 + t_f * v0) ** 2

    return naive_euler


def make_saddle(xp, grad, scalar):
    """max_over_b(a0, a1, s0, s1, forward): the eval's inner descent, the inner gradient by
    `grad`."""

    def objective(a0, a1, b0, b1):
        return (a0**2 + a1**2) - (b0**2 + b1**2)

    def descent_loss(b0, b1, a0, a1):
        return -objective(a0, a1, b0, b1)

    inner = grad(descent_loss, (0, 1))

    def max_over_b(a0, a1, s0, s1, forward):
        b0, b1 = scalar(s0), scalar(s1)
        loss = descent_loss(b0, b1, a0, a1)
        g0, g1 = inner(b0, b1, a0, a1)
        eta, i, going = 1e-5, 0, True
        while going:
            if xp.sqrt(g0 * g0 + g1 * g1) <= 1e-5:
                going = False
            elif i == 10:
                eta, i = 2.0 * eta, 0
            else:
                n0, n1 = b0 - eta * g0, b1 - eta * g1
                if xp.sqrt((b0 - n0) ** 2 + (b1 - n1) ** 2) <= 1e-5:
                    going = False
                else:
                    loss_new = descent_loss(n0, n1, a0, a1)
                    if loss_new < loss:
                        b0, b1, loss = n0, n1, loss_new
                        g0, g1 = inner(b0, b1, a0, a1)
                        i = i + 1
                    else:
                        eta, i = eta / 2.0, 0
        return objective(a0, a1, b0, b1)

    return max_over_b


def _jax(make):
    def factory():
        import jax
        import jax.numpy as jnp

        return make(jnp, lambda f, wrt: jax.jit(jax.grad(f, argnums=wrt)), jnp.asarray)

    return factory


def _float64_tensor(v):
    import torch

    return torch.tensor(v, dtype=torch.float64)  # torch.tensor(0.75) would be float32


def _torch(make):
    def factory():
        import torch
        from torch.func import grad

        return make(torch, lambda f, wrt: grad(f, argnums=wrt), _float64_tensor)

    return factory


def _autograd(make):
    def factory():
        import autograd.numpy as anp
        from autograd import grad

        return make(anp, lambda f, wrt: grad(f, wrt), lambda v: v)

    return factory


def _positions(inputs: dict, wrt) -> tuple[int, ...]:
    return tuple(list(inputs).index(w) for w in wrt)


def _floats(result) -> tuple[np.ndarray, ...]:
    return tuple(np.asarray(float(g), dtype=np.float64) for g in result)


def build_jax(f, inputs: dict, wrt):
    """Eager jax.grad: the loops' trip counts depend on the values, which jit cannot trace."""
    import jax

    g = jax.grad(f, argnums=_positions(inputs, wrt))
    args = list(inputs.values())
    return (lambda: jax.block_until_ready(g(*args))), _floats


def build_torch(f, inputs: dict, wrt):
    import torch
    from torch.func import grad

    g = grad(f, argnums=_positions(inputs, wrt))
    args = [_float64_tensor(v) if k in wrt else v for k, v in inputs.items()]

    def run():
        with torch.no_grad():
            return g(*args)

    return run, _floats


# ----------------------------------------------------------------------------- cases


def cases(mode: str) -> list[Case]:
    """The same cases in every mode: the evals' own starting points."""
    builders = {"jax": build_jax, "torch": build_torch}
    common = {"family": "gradbench", "size": {"start": "eval"}, "build": builders, "quick": False}
    return [
        Case(
            workload="particle",
            make_inputs=lambda start: particle_inputs(),
            numpy_f=particle_eval.naive_euler,
            wrt=("w",),
            peers={
                "jax": _jax(make_particle),
                "torch": _torch(make_particle),
                "autograd": _autograd(make_particle),
            },
            notes=[
                (
                    "one d/dw of the trajectory (reverse over the reverse-mode force, the eval's "
                    "rr) at w = 0; JAX eager grad over the loop, force jit(grad)"
                )
            ],
            **common,
        ),
        Case(
            workload="saddle",
            make_inputs=lambda start: saddle_inputs(),
            numpy_f=saddle_eval.max_over_b,
            wrt=("a0", "a1"),
            peers={
                "jax": _jax(make_saddle),
                "torch": _torch(make_saddle),
                "autograd": _autograd(make_saddle),
            },
            notes=[
                (
                    "one d r1/da through the inner descent (reverse over reverse, the eval's rr) "
                    "at the start (1, 1); JAX eager grad over the loop, inner jit(grad)"
                )
            ],
            **common,
        ),
    ]
