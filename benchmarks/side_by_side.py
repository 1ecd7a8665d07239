"""The timing harness the `*_side_by_side.py` benchmarks share: variants of one computation timed
in one process, every round calling each variant in rotating order (a shared machine's drift
hits them all alike) with the garbage collector off; each one's best and median CPU time a call
over the rounds. Import it before NumPy: `one_thread` must run first."""

from __future__ import annotations

import gc
import os
import statistics
import time


def one_thread(numba: bool = False, xla: bool = False) -> None:
    """One thread for BLAS (and Numba's and XLA's pools), as benchmarks/run.py runs by default:
    before NumPy (or Numba, or JAX) is imported, which read these once."""
    names = ["OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"]
    for var in names + (["NUMBA_NUM_THREADS"] if numba else []):
        os.environ.setdefault(var, "1")
    if xla:
        flags = os.environ.get("XLA_FLAGS", "")
        os.environ["XLA_FLAGS"] = flags + " --xla_cpu_multi_thread_eigen=false"


def rounds(variants: dict, count: int, calls: int = 1) -> dict[str, list[float]]:
    """CPU seconds a call of each variant (name -> a function of no arguments) in each of `count`
    rounds, a round calling every variant `calls` times, the order rotating from one round to
    the next."""
    times: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    gc.disable()
    try:
        for r in range(count):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                run = variants[name]
                start = time.process_time()
                for _ in range(calls):
                    run()
                times[name].append((time.process_time() - start) / calls)
    finally:
        gc.enable()
    return times


def best_and_median(times: list[float]) -> tuple[float, float]:
    """The best and the median of CPU seconds, in milliseconds."""
    return min(times) * 1e3, statistics.median(times) * 1e3


def cells(times: dict[str, list[float]], width: int = 6, digits: int = 2) -> str:
    """`name best / median` (milliseconds) for each variant, side by side."""
    shown = []
    for name, t in times.items():
        best, median = best_and_median(t)
        shown.append(f"{name} {best:{width}.{digits}f} / {median:{width}.{digits}f}")
    return "   ".join(shown)
