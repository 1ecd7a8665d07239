"""What a benchmark case is: one objective at one size, written once per framework.

A workload module (gmm.py, lstm.py, ...) exposes `cases(mode)` with mode "smoke" (tiny sizes for
tests/test_benchmarks_smoke.py), "quick" or "full", returning a list of `Case`. A case holds

- `make_inputs(**size)`: the arguments of the objective as an ordered dict (the order of the
  NumPy function's parameters), generated from a fixed seed;
- `numpy_f`: the plain NumPy/Python objective. It is the primal whose time is reported and the
  function s2sad differentiates;
- `peers`: for "jax", "torch" and "autograd", a zero-argument factory that imports the framework
  and returns the objective written for it (called with the same arguments, positionally), or a
  string "n/a: why" where that peer is not run;
- `reduced`: a smaller size for a peer whose Python-loop version would take too long at the
  case's size. Its time is reported at that size and compared with s2sad at the same size;
- `check_peers` and `check_make_inputs`: where the peers do not run this case (a loop version),
  the factories and inputs of an equivalent case whose gradient s2sad's is checked against;
- `jit`: the objective compiles under `numba.njit`, so the runner also times it compiled by
  Numba and s2sad's gradient with `jit=True` (the "jit" table). Where the peers do not run the
  case, the jitted gradient is compared with their times on `check_peers`;
- `build`: for a case whose derivative is not the gradient of `numpy_f` (BA's Jacobian blocks),
  how each row is built in place of the runner's default. Keys "s2sad" and "s2sad-jit":
  `(f, inputs, wrt) -> (run, fetch, probe)`, where `run()` computes the derivative,
  `fetch(result)` turns it into a tuple of float64 arrays and `probe()` does s2sad's transform
  (the runner times it with empty caches); "jax", "torch", "autograd":
  `(peer_f, inputs, wrt) -> (run, fetch)`, with `peer_f` from the peer's factory;
  "numba-primal": `(f, inputs) -> run`. A "s2sad-jit" builder takes keyword options after
  `wrt` (parallel=True) and passes them to s2sad;
- `parallel`: the case has a loop that Numba's prange might spread over threads, so where s2sad
  takes `parallel=True` the runner also times the jitted gradient with it (the "parallel" table);
- `quick`: False for a case `--quick` runs only when `--only` names it (or its family), to keep
  the quick run to the issue's target workloads.

Nothing here imports JAX, PyTorch or autograd: the factories do, when they are called.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

PEERS = ("jax", "torch", "autograd")


@dataclass
class Case:
    workload: str  # e.g. "gmm", "gmm-loops"; what --only matches
    family: str  # the module it comes from
    size: dict  # keyword arguments of make_inputs
    make_inputs: Callable[..., dict]
    numpy_f: Callable
    wrt: tuple[str, ...]
    peers: dict[str, Callable[[], Callable] | str]
    reduced: dict[str, dict] = field(default_factory=dict)  # peer -> smaller size
    notes: list[str] = field(default_factory=list)
    check_peers: dict[str, Callable[[], Callable]] | None = None
    check_make_inputs: Callable[..., dict] | None = None
    jit: bool = False  # also time numba.njit(numpy_f) and s2sad.grad(..., jit=True)
    build: dict[str, Callable] = field(default_factory=dict)  # rows built another way
    parallel: bool = False  # a loop: also time s2sad.grad(..., jit=True, parallel=True)
    quick: bool = True  # in --quick's default selection (False: with --quick, only by --only)

    @property
    def size_label(self) -> str:
        return size_label(self.size)

    def inputs(self, size: dict | None = None) -> dict:
        return self.make_inputs(**(self.size if size is None else size))


def size_label(size: dict) -> str:
    def fmt(v):
        if isinstance(v, int) and v >= 10000 and v % 1000 == 0:
            e = len(str(v)) - 1
            m = v / 10**e
            return f"{m:g}e{e}"
        return str(v)

    return " ".join(f"{k}={fmt(v)}" for k, v in size.items())


def rng_for(name: str, size: dict) -> np.random.Generator:
    """A generator seeded from the workload name and size, so every run sees the same inputs."""
    text = name + repr(sorted(size.items()))
    return np.random.default_rng(sum(ord(c) * (i + 1) for i, c in enumerate(text)) % 2**32)
