"""How `parallel=True` scales: the jitted gradient of each loop workload on 1 and 2 threads.

    python benchmarks/parallel_scaling.py [--repeat 7] [--mode quick|smoke] [substring ...]

For the loop workloads (benchmarks/workloads/loops.py, gmm-loops) and a per-row example, it
compiles `s2sad.grad(f, jit="strict")` and `s2sad.grad(f, jit="strict", parallel=True)`, checks
that they agree, and prints the best of `--repeat` runs of each: the serial build, and
the parallel build with `numba.set_num_threads(1)` and `(2)`, each as wall clock and CPU time
(of all threads), the load average before and after, and where the generated code has `prange`
loops (primal, adjoint; README.md, "Threads", says why a loop stays serial). Timings on a
shared machine are noisy: compare the columns of one run, not runs with each other.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numba  # noqa: E402

import s2sad  # noqa: E402
from benchmarks.workloads import gmm, loops  # noqa: E402

LOOPS = ("ode-euler", "linrec", "stencil-loops", "conv1d-loops", "gmm-loops")


def per_row(W, b, x):
    """A layer applied row by row: the rows are independent, W's gradient a sum over them."""
    n = x.shape[0]
    out = np.zeros((n, W.shape[0]))
    for i in range(n):
        out[i] = np.tanh(W @ x[i] + b)
    return np.sum(out**2)


def _cases(mode: str):
    for case in loops.cases(mode) + gmm.cases(mode):
        if case.workload in LOOPS:
            yield f"{case.workload} {case.size_label}", case.numpy_f, case.inputs(), case.wrt
    if mode == "quick":  # larger grids, where a loop's work outweighs starting the threads
        yield "stencil-loops N=1000", loops.stencil_loops, loops.stencil_inputs(1000), ("u",)
        conv = loops.conv1d_inputs(1_000_000, 16)
        yield "conv1d-loops n=1e6 m=16", loops.conv1d_loops, conv, ("x", "w")
    rng = np.random.default_rng(0)
    rows = 200 if mode == "smoke" else 20_000
    inputs = {"W": rng.normal(size=(64, 64)), "b": rng.normal(size=64)}
    inputs["x"] = rng.normal(size=(rows, 64)) / 8
    yield f"per-row n={rows} 64x64", per_row, inputs, ("W", "b", "x")


def _best(run, repeat: int) -> tuple[float, float]:
    """The best wall-clock and the best CPU time (all threads) of `repeat` runs: on a shared
    machine the wall clock of a second thread measures the wait for a core as much as the
    code, and CPU time shows what the threads cost."""
    wall = cpu = float("inf")
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        run()
        wall = min(wall, time.perf_counter() - start)
        cpu = min(cpu, time.process_time() - start_cpu)
    return wall, cpu


def _load() -> str:
    return "load average %.2f %.2f %.2f" % os.getloadavg()


def _where(source: str) -> str:
    primal, adjoint = source.split("# adjoint sweep")
    parts = [name for name, text in (("primal", primal), ("adjoint", adjoint)) if "prange(" in text]
    return " + ".join(parts) or "none"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("only", nargs="*", help="substrings of the workloads to run")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--mode", default="quick", choices=("smoke", "quick"))
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", numba.core.errors.NumbaWarning)
    threads = numba.config.NUMBA_NUM_THREADS
    print(f"Numba {numba.__version__}, NUMBA_NUM_THREADS={threads}, best of {args.repeat}")
    print(f"{_load()}; wall clock (CPU time, all threads), ms")
    print(f"{'workload':30} {'serial':>16} {'1 thread':>16} {'2 threads':>16} {'1/2':>5}  prange")
    for label, f, inputs, wrt in _cases(args.mode):
        if args.only and not any(s in label for s in args.only):
            continue
        values = list(inputs.values())
        serial = s2sad.grad(f, wrt=tuple(wrt), jit="strict")
        threaded = s2sad.grad(f, wrt=tuple(wrt), jit="strict", parallel=True)
        expected, got = serial(*values), threaded(*values)
        for a, b in zip(expected, got):
            np.testing.assert_allclose(b, a, rtol=1e-9, atol=1e-12)
        times = [_best(lambda: serial(*values), args.repeat)]
        for n in (1, 2):
            numba.set_num_threads(min(n, threads))
            times.append(_best(lambda: threaded(*values), args.repeat))
        numba.set_num_threads(threads)
        where = _where(s2sad.source(threaded))
        cells = " ".join(f"{w * 1e3:7.2f} ({c * 1e3:6.2f})" for w, c in times)
        print(f"{label:30} {cells} {times[1][0] / times[2][0]:5.2f}  {where}")
    print(_load())
    try:
        print(f"threading layer: {numba.threading_layer()}")
    except ValueError:  # no loop ran on threads
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
