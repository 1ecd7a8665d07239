"""Buffers made once before a loop (s2sad/pipeline/hoist.py), side by side in one process: the
jitted gradients of gradbench's RK4 `ode` and of the LSTM with the fused runs' arrays in loops
allocated before them ("hoisted") and in each iteration ("fresh": the transform made with the
pass left out), and JAX's `jax.jit(jax.grad)`. One thread for BLAS, XLA and Numba; each round
calls every variant `--calls` times, in rotating order; the table shows best and median CPU time
a call over the rounds.

    python benchmarks/hoist_side_by_side.py                 # ode n=1000 s=100, lstm l=2 c=1024
    python benchmarks/hoist_side_by_side.py --rounds 60
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.side_by_side import cells, one_thread, rounds  # noqa: E402

one_thread(numba=True, xla=True)

import numpy as np  # noqa: E402

import s2sad  # noqa: E402
from benchmarks.gradbench.evals import ode as ode_eval  # noqa: E402
from benchmarks.runner.builders import build_jax, load_peers  # noqa: E402
from benchmarks.workloads import gb_arrays, lstm  # noqa: E402
from s2sad import transform_cache  # noqa: E402
from s2sad.jit import Jitted  # noqa: E402
from s2sad.pipeline import driver  # noqa: E402

# label -> the objective, its inputs, wrt, JAX's objective (a factory) and the calls a round
CASES = {
    "ode n=1000 s=100": (
        ode_eval.ode_last,
        lambda: gb_arrays.ode_inputs(1000, 100),
        ("x",),
        gb_arrays.jax_ode,
        20,
    ),
    "ode n=100000 s=100": (
        ode_eval.ode_last,
        lambda: gb_arrays.ode_inputs(100_000, 100),
        ("x",),
        gb_arrays.jax_ode,
        1,
    ),
    "lstm l=2 c=1024": (
        lstm.lstm_objective,
        lambda: lstm.make_inputs(2, 1024),
        lstm.WRT,
        lstm.jax_factory,
        5,
    ),
}


def _jitted(f, inputs: dict, wrt, hoisted: bool):
    """The compiled gradient transformed with or without the hoisting pass, called through its
    Jitted (the transform cache keys on the function's code, not on the pass: it is emptied,
    and each variant has a cache directory of its own)."""
    saved = driver.hoist_buffers
    if not hoisted:
        driver.hoist_buffers = lambda blocks, *rest: blocks
    os.environ["S2SAD_CACHE_DIR"] = tempfile.mkdtemp(prefix="s2sad-hoist-")
    transform_cache._CACHE.clear()
    try:
        g = s2sad.grad(f, wrt=wrt, jit="strict")
        args = tuple(inputs.values())
        g(*args)
        source = s2sad.source(g, *args)
        jitted = Jitted.of(g.compiled)
    finally:
        driver.hoist_buffers = saved
        transform_cache._CACHE.clear()
    assert ("reused(" in source) == hoisted
    return lambda: jitted(args, strict=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--only", help="the cases whose label starts with this")
    args = parser.parse_args(argv)
    has_jax = load_peers().get("jax") is not None
    print(f"best / median CPU ms a call over {args.rounds} rounds, one thread")
    for label, (f, make, wrt, jax_factory, calls) in CASES.items():
        if args.only and not label.startswith(args.only):
            continue
        inputs = make()
        variants = {
            "fresh": _jitted(f, inputs, wrt, hoisted=False),
            "hoisted": _jitted(f, inputs, wrt, hoisted=True),
        }
        if has_jax:
            variants["JAX"] = build_jax(jax_factory(), inputs, wrt)[0]
        values = {name: run() for name, run in variants.items()}
        # a checked gradient's Jitted returns the output and the gradients
        hoisted, fresh = values["hoisted"][1], values["fresh"][1]
        for a, b in zip(*(v if isinstance(v, tuple) else (v,) for v in (hoisted, fresh))):
            np.testing.assert_array_equal(a, b)
        times = rounds(variants, args.rounds, calls)
        ratio = min(times["hoisted"]) / min(times["fresh"])
        print(f"{label:<20} " + cells(times, 7, 3) + f"   hoisted/fresh (best) {ratio:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
