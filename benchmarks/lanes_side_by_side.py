"""Fused loops' vectorised elementwise functions (s2sad/rules/lanes.py), side by side in one
process: the jitted gradients of the LSTM and GMM workloads with `np.exp` and `np.log` computed
by `exp_lanes` and `log_lanes` ("lanes"), and by Numba's calls into the C library ("libm": the
transform made with only `np.tanh` among the lanes, as before they were added), and JAX's
`jax.jit(jax.grad)`. One thread for BLAS, XLA and Numba; each round calls every variant once,
in rotating order; the table shows best and median CPU time over the rounds.

    python benchmarks/lanes_side_by_side.py                 # lstm l=2 c=1024, gmm d=10 K=25
    python benchmarks/lanes_side_by_side.py --rounds 40
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
from benchmarks.runner.builders import build_jax, load_peers  # noqa: E402
from benchmarks.workloads import gmm, lstm  # noqa: E402
from s2sad import transform_cache  # noqa: E402
from s2sad.jit import Jitted  # noqa: E402
from s2sad.pipeline.fusion.syntax import LANES  # noqa: E402

# label -> the workload module, its objective and sizes
CASES = {
    "lstm l=2 c=1024": (lstm, lstm.lstm_objective, (2, 1024)),
    "gmm d=10 K=25 n=1000": (gmm, gmm.gmm_objective, (10, 25, 1000)),
    "gmm d=2 K=5 n=1000": (gmm, gmm.gmm_objective, (2, 5, 1000)),
}


def _jitted(f, inputs: dict, wrt, lanes: dict):
    """The compiled gradient transformed with `lanes` as the fused loops' lanes, called
    through its Jitted (the transform cache keys on the function's code, not on the lanes:
    it is emptied, and each variant has a cache directory of its own)."""
    saved = dict(LANES)
    LANES.clear()
    LANES.update(lanes)
    os.environ["S2SAD_CACHE_DIR"] = tempfile.mkdtemp(prefix="s2sad-lanes-")
    transform_cache._CACHE.clear()
    try:
        g = s2sad.grad(f, wrt=wrt, jit="strict")
        args = tuple(inputs.values())
        g(*args)
        source = s2sad.source(g, *args)
        jitted = Jitted.of(g.compiled)
    finally:
        LANES.clear()
        LANES.update(saved)
        transform_cache._CACHE.clear()
    assert ("exp_lanes(" in source) == ("np.exp" in lanes)
    return lambda: jitted(args, strict=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=25)
    args = parser.parse_args(argv)
    has_jax = load_peers().get("jax") is not None
    print(f"best / median CPU ms over {args.rounds} rounds, one thread")
    for label, (workload, f, size) in CASES.items():
        inputs, wrt = workload.make_inputs(*size), workload.WRT
        variants = {
            "libm": _jitted(f, inputs, wrt, {"np.tanh": LANES["np.tanh"]}),
            "lanes": _jitted(f, inputs, wrt, dict(LANES)),
        }
        if has_jax:
            variants["JAX"] = build_jax(workload.jax_factory(), inputs, wrt)[0]
        values = {name: run() for name, run in variants.items()}
        # a checked gradient's Jitted returns the output and the gradients
        for a, b in zip(values["libm"][1], values["lanes"][1]):
            np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-14)
        times = rounds(variants, args.rounds)
        ratio = min(times["lanes"]) / min(times["libm"])
        print(f"{label:<22} " + cells(times) + f"   lanes/libm (best) {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
