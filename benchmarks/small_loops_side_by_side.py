"""Issue #17's "every loop workload within 3x its `numba.njit` primal" on two small-vector loops
that are not runner workloads, side by side in one process: RK4 on an 8-vector (the issue's
example, 10^4 steps) and a user's mass-spring chain (200 masses, 2000 steps, in-place slice
updates `v[1:-1] += ...`, gradient w.r.t. the spring constants). Each round calls the
`numba.njit` primal and `s2sad.grad(..., jit=True)` `--calls` times, in rotating order; the table
shows best and median CPU time a call over the rounds and the gradient over the primal (best).

    python benchmarks/small_loops_side_by_side.py
    python benchmarks/small_loops_side_by_side.py --only spring --rounds 50
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.side_by_side import best_and_median, one_thread, rounds  # noqa: E402

one_thread(numba=True)

import numba  # noqa: E402
import numpy as np  # noqa: E402

import s2sad  # noqa: E402


def rk4_small(y0, k, n):
    y = y0
    h = 0.01
    for i in range(n):
        k1 = -k * y + np.sin(y)
        k2 = -k * (y + h / 2 * k1) + np.sin(y + h / 2 * k1)
        k3 = -k * (y + h / 2 * k2) + np.sin(y + h / 2 * k2)
        k4 = -k * (y + h * k3) + np.sin(y + h * k3)
        y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return np.sum(y * y)


def spring(k, x0, v0, mass, rest, target, dt, n_steps):
    x = x0.copy()
    v = v0.copy()
    for step in range(n_steps):
        f = k * (x[1:] - x[:-1] - rest)
        v[1:-1] += dt * (f[1:] - f[:-1]) / mass[1:-1]
        v[-1] -= dt * f[-1] / mass[-1]
        v *= 0.999
        x += dt * v
    return (x[-1] - target) ** 2


def _rk4_case():
    rng = np.random.default_rng(0)
    return rk4_small, (rng.random(8), 0.5 + rng.random(8), 10_000), (0, 1)


def _spring_case():
    rng = np.random.default_rng(0)
    n = 200
    k = rng.uniform(50.0, 150.0, size=n - 1)
    x0 = np.arange(n, dtype=float)
    x0[1:] += 0.05 * rng.normal(size=n - 1)
    return spring, (k, x0, np.zeros(n), np.ones(n), 1.0, x0[-1] + 0.5, 1e-3, 2000), 0


CASES = {"rk4": _rk4_case, "spring": _spring_case}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=list(CASES), action="append")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--calls", type=int, default=3)
    args = parser.parse_args(argv)
    for name in args.only or list(CASES):
        f, inputs, wrt = CASES[name]()
        jitted = s2sad.grad(f, wrt=wrt, jit="strict")
        want = s2sad.grad(f, wrt=wrt)(*inputs)
        got = jitted(*inputs)
        for a, b in zip(*(w if isinstance(wrt, tuple) else (w,) for w in (got, want))):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
        primal = numba.njit(f)
        primal(*inputs)
        times = rounds(
            {"njit": lambda: primal(*inputs), "grad": lambda: jitted(*inputs)},
            args.rounds,
            args.calls,
        )
        (pb, pm), (gb, gm) = (best_and_median(times[v]) for v in ("njit", "grad"))
        print(
            f"{name}: njit primal {pb:.3f} / {pm:.3f} ms, jitted grad {gb:.3f} / {gm:.3f} ms "
            f"(best / median CPU a call, {args.rounds} rounds of {args.calls}): {gb / pb:.2f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
