"""The whole call of a jitted gradient from Python, warm and with cold caches, beside
`numba.njit` of the objective: stencil-loops on a 3x3 grid (where the compiled code is nothing
and the call path is all) and at N=200, and ba-perobs's Jacobian of one observation. Warm: CPU
time a call, best and median of rounds of repeated calls. Cold: a 64 MB array swept between
calls (as benchmarks/run.py's rounds leave the caches, with JAX, PyTorch and NumPy-mode calls
between), CPU time of each call, best and median. `py` counts the Python functions one call
runs (`sys.setprofile`; Numba's dispatcher reports the compiled function as one).

    PYTHONPATH=. python benchmarks/callpath_side_by_side.py [--rounds 7] [--cold 200] [name ...]
"""

from __future__ import annotations

import argparse
import gc
import sys
import time

from benchmarks.side_by_side import one_thread

one_thread(numba=True)

import numba  # noqa: E402
import numpy as np  # noqa: E402

import s2sad  # noqa: E402
from benchmarks.workloads import ba  # noqa: E402
from benchmarks.workloads.loops import stencil_inputs, stencil_loops  # noqa: E402
from s2sad.compiled_jacobian import CALLS_BEFORE_COMPILING  # noqa: E402


def python_calls(run) -> int:
    """The Python functions a call of `run` enters, `run` itself left out."""
    count = [0]

    def profile(frame, event, arg):
        count[0] += event == "call"

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return count[0] - 1


def warm(run, calls: int, count: int) -> list[float]:
    times = []
    for _ in range(count):
        start = time.process_time_ns()
        for _ in range(calls):
            run()
        times.append((time.process_time_ns() - start) / calls / 1e3)
    return sorted(times)


def cold(run, count: int, sweep: np.ndarray) -> list[float]:
    times = []
    for _ in range(count):
        sweep += 1.0  # (64 MB: the caches hold none of the call's code or data after it)
        start = time.process_time_ns()
        run()
        times.append((time.process_time_ns() - start) / 1e3)
    return sorted(times)


def cases():
    """name -> (s2sad's call, numba.njit's call, calls a warm round)."""
    rng = np.random.default_rng(0)
    small, k = rng.standard_normal((3, 3)), 0.7
    large = stencil_inputs(200)
    grad = s2sad.grad(stencil_loops, wrt=(0, 1), jit="strict")
    primal = numba.njit(stencil_loops)
    obs = ba._observations(ba.make_inputs(49, 500, 1000))
    jacobian = s2sad.jacobian(ba.ba_obs, wrt=(0, 1, 2), jit="strict")
    residual = numba.njit(ba.ba_obs)
    for _ in range(CALLS_BEFORE_COMPILING + 1):  # (then its whole compiled Jacobian runs)
        jacobian(*obs[0])
    return {
        "stencil 3x3": (lambda: grad(small, k), lambda: primal(small, k), 5000),
        "stencil N=200": (
            lambda: grad(large["u"], large["k"]),
            lambda: primal(large["u"], large["k"]),
            200,
        ),
        "ba-perobs one": (lambda: jacobian(*obs[1]), lambda: residual(*obs[1]), 5000),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--cold", type=int, default=200)
    parser.add_argument("names", nargs="*", help="cases whose name holds one of these")
    options = parser.parse_args()
    sweep = np.ones(8 << 20)
    print("µs a call, best / median; py: Python functions a call")
    for name, (ours, theirs, calls) in cases().items():
        if options.names and not any(n in name for n in options.names):
            continue
        for who, run in (("s2sad", ours), ("numba", theirs)):
            for _ in range(3):
                run()  # (compiled, planned, its lean call made)
            gc.disable()
            try:
                w, c = warm(run, calls, options.rounds), cold(run, options.cold, sweep)
            finally:
                gc.enable()
            print(
                f"{name:14s} {who:5s} py {python_calls(run):3d}   warm {w[0]:8.2f} / "
                f"{w[len(w) // 2]:8.2f}   cold {c[0]:8.1f} / {c[len(c) // 2]:8.1f}"
            )


if __name__ == "__main__":
    main()
