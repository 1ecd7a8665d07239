"""float32 and float64 under Numba, side by side in one process: the stencil energy's
`value_and_grad` (`energy2d`, an energy over slices of a 2-D grid) in NumPy mode, jitted with
its fused loops, and jitted from the same transform's unfused code (what float32 arguments
compiled before fused loops covered float32). Each round calls every variant once, in rotating
order, on one BLAS thread; the table shows best and median CPU time over the rounds.

    python benchmarks/float32_side_by_side.py              # N=1000, 7 rounds
    python benchmarks/float32_side_by_side.py --n 500 --rounds 15
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.side_by_side import cells, one_thread, rounds  # noqa: E402

one_thread()

import numpy as np  # noqa: E402

import s2sad  # noqa: E402
from s2sad.jit import Jitted  # noqa: E402


def energy2d(u, k):
    c = u[:-1, :-1]
    dv = u[1:, :-1] - c
    dh = u[:-1, 1:] - c
    return np.sum(0.5 * k * (dv * dv + dh * dh) + 0.25 * (c * c - 1.0) ** 2)


def _variants(u, k) -> dict:
    """label -> a function of no arguments, for NumPy mode, fused and unfused jitted code."""
    numpy_mode = s2sad.value_and_grad(energy2d)
    jitted = s2sad.value_and_grad(energy2d, jit="strict")
    jitted(u, k)  # compiles; the transform for these ranks is `jitted.compiled`
    compiled = jitted.compiled
    unfused = Jitted.of(compiled).without_fusion()
    return {
        "numpy": lambda: numpy_mode(u, k),
        "jit fused": lambda: jitted(u, k),
        "jit unfused": lambda: unfused((u, k), strict=True),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    u64 = np.random.default_rng(0).normal(size=(args.n, args.n))
    print(f"energy2d value_and_grad, N={args.n}: best / median CPU ms over {args.rounds} rounds")
    for label, u, k in [
        ("float64", u64, 0.7),
        ("float32", u64.astype(np.float32), 0.7),
        ("float32, k float32", u64.astype(np.float32), np.float32(0.7)),
    ]:
        variants = _variants(u, k)
        values = [f() for f in variants.values()]
        times = rounds(variants, args.rounds)
        dtypes = {str(np.asarray(v[1]).dtype) for v in values}
        print(f"{label:<20} " + cells(times, 6, 1) + f"   (gradient dtypes: {', '.join(dtypes)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
