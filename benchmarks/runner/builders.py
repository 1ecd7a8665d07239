"""How each row of a case is built: `(f, inputs, wrt) -> (run, fetch)`, where `run()` computes
the derivative and `fetch(result)` turns it into a tuple of float64 arrays. A case whose
derivative is not a gradient brings its own builders (`Case.build`, see workloads/common.py)."""

from __future__ import annotations

import importlib.metadata
import inspect

import numpy as np

import s2sad

PEER_LABEL = {"jax": "JAX", "torch": "torch", "autograd": "autograd"}


def load_peers() -> dict[str, str | None]:
    """Import each peer; its version string, or None when it is not installed."""
    found: dict[str, str | None] = {}
    try:
        import jax

        jax.config.update("jax_enable_x64", True)
        found["jax"] = (
            f"jax {jax.__version__} (jaxlib {importlib.metadata.version('jaxlib')}, "
            f"{jax.devices()[0].platform})"
        )
    except ImportError:
        found["jax"] = None
    try:
        import torch

        n = torch.get_num_threads()
        found["torch"] = f"torch {torch.__version__} ({n} thread{'s' if n != 1 else ''})"
    except ImportError:
        found["torch"] = None
    try:
        import autograd  # noqa: F401

        found["autograd"] = f"autograd {importlib.metadata.version('autograd')}"
    except ImportError:
        found["autograd"] = None
    return found


def accepts_parallel() -> bool:
    """Whether this s2sad's jitted gradients take `parallel=True` (Numba's prange): the
    runner's parallel table appears only then."""
    try:
        return "parallel" in inspect.signature(s2sad.grad).parameters
    except (TypeError, ValueError):
        return False


def _wrt_positions(inputs: dict, wrt) -> tuple[int, ...]:
    names = list(inputs)
    return tuple(names.index(w) for w in wrt)


def as_float_arrays(grads) -> tuple[np.ndarray, ...]:
    return tuple(np.asarray(g, dtype=np.float64) for g in grads)


def build_s2sad(f, inputs: dict, wrt):
    g = s2sad.grad(f, wrt=tuple(wrt))
    args = list(inputs.values())
    return (lambda: g(*args)), as_float_arrays


def build_s2sad_jit(f, inputs: dict, wrt, **options):
    """s2sad's gradient compiled by Numba (jit="strict": a workload that does not compile is
    reported as unsupported, never timed in Python); `options` such as parallel=True go to
    s2sad.grad. Returns the gradient function too, for its transform time."""
    g = s2sad.grad(f, wrt=tuple(wrt), jit="strict", **options)
    args = list(inputs.values())
    return g, (lambda: g(*args)), as_float_arrays


def build_numba_primal(f, inputs: dict):
    """numba.njit of the objective, its machine code cached on disk (plan.jit_cache puts it
    beside the jitted gradients': an empty directory for the full run, so its first call
    compiles; the reused one for --quick, where it loads, as the gradients' do)."""
    import numba

    compiled = numba.njit(f, cache=True)
    args = list(inputs.values())
    return lambda: compiled(*args)


def build_jax(f, inputs: dict, wrt):
    import jax
    import jax.numpy as jnp

    static = tuple(
        i for i, v in enumerate(inputs.values()) if isinstance(v, int) and not isinstance(v, bool)
    )
    g = jax.jit(jax.grad(f, argnums=_wrt_positions(inputs, wrt)), static_argnums=static)
    args = [jnp.asarray(v) if isinstance(v, np.ndarray) else v for v in inputs.values()]
    return (lambda: jax.block_until_ready(g(*args))), as_float_arrays


def build_torch(f, inputs: dict, wrt):
    import torch

    args = []
    for name, v in inputs.items():
        if isinstance(v, np.ndarray):
            v = torch.tensor(v)  # a copy, same dtype (float64 / int64)
        elif name in wrt:
            v = torch.tensor(float(v), dtype=torch.float64)
        if name in wrt:
            v.requires_grad_(True)
        args.append(v)
    leaves = [args[i] for i in _wrt_positions(inputs, wrt)]

    def run():
        return torch.autograd.grad(f(*args), leaves)

    return run, lambda r: tuple(t.detach().numpy().astype(np.float64) for t in r)


def build_autograd(f, inputs: dict, wrt):
    from autograd import grad

    g = grad(f, argnum=_wrt_positions(inputs, wrt))
    args = list(inputs.values())
    return (lambda: g(*args)), as_float_arrays


BUILDERS = {"jax": build_jax, "torch": build_torch, "autograd": build_autograd}


def peer_builder(case, peer: str):
    """How `peer`'s row of this case is built: the case's own builder (a Jacobian workload),
    else the gradient."""
    return case.build.get(peer, BUILDERS[peer])


def has_jit_gradient(case) -> bool:
    """Whether s2sad's row of this case has a jitted form: a plain gradient (jit="strict" of
    it), or a case that builds its own (`Case.build["s2sad-jit"]`)."""
    return "s2sad" not in case.build or "s2sad-jit" in case.build


def s2sad_builder(case, jit: bool = False, **options):
    """`(f, inputs, wrt) -> (run, fetch)` for s2sad's row of this case (jitted with `options`,
    such as parallel=True, where `jit`)."""
    custom = case.build.get("s2sad-jit" if jit else "s2sad")
    if custom is not None:
        return lambda f, inputs, wrt: custom(f, inputs, wrt, **options)[:2]
    if jit:
        return lambda f, inputs, wrt: build_s2sad_jit(f, inputs, wrt, **options)[1:]
    return build_s2sad
