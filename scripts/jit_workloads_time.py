"""Time `jit="strict"` gradients against Python mode on the benchmark workloads (quick sizes).

    python scripts/jit_workloads_time.py [substring ...]

A few repeats each, best of them (1 thread): a quick look, not benchmarks/run.py's method."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_v, "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchmarks.workloads import all_cases  # noqa: E402
from jit_workloads import _derivative  # noqa: E402

WORKLOADS = ("gmm", "mlp", "lstm", "stencil", "ode", "kmeans", "ba")


def best(run, repeats=5):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def main(picks):
    for case in all_cases("quick"):
        if case.workload not in WORKLOADS or (picks and not any(p in case.workload for p in picks)):
            continue
        row = [case.workload, case.size_label]
        for jit in (False, "strict"):
            start = time.perf_counter()
            try:
                _derivative(case, jit)
            except Exception as err:  # noqa: BLE001
                row.append(f"fails: {str(err).splitlines()[0][:60]}")
                continue
            first = time.perf_counter() - start
            row.append(f"{best(lambda: _derivative(case, jit)) * 1e3:.2f} ms (first {first:.1f} s)")
        print(" | ".join(row), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
