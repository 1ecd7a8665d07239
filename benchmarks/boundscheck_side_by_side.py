"""Index bounds checks in jitted code, side by side in one process: each benchmark workload's
jitted derivative (its `s2sad-jit` row, `jit="strict"`) with its index checks ("checked": the
`check_index` statements before indices not proven in range, or Numba's `boundscheck=True`
where those cannot be placed, pipeline/bounds.py) and without them ("unchecked":
`S2SAD_BOUNDSCHECK=0`). One thread
for BLAS and Numba; each round calls both variants `calls` times (enough for about 20 ms), in
rotating order; the table shows best and median CPU time a call over the rounds,
checked/unchecked of the best times, and each variant's first call (its compile, from an empty
cache: `S2SAD_CACHE_DIR` a fresh directory). A function that indexes by no integer is compiled
without checks either way (pipeline/bounds.py): its two variants are one compiled function.

    python benchmarks/boundscheck_side_by_side.py                  # every workload below
    python benchmarks/boundscheck_side_by_side.py --only stencil,stencil-loops --rounds 40
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one thread, as benchmarks/run.py runs by default

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.runner.builders import s2sad_builder  # noqa: E402
from benchmarks.workloads import all_cases  # noqa: E402
from benchmarks.workloads.common import size_label  # noqa: E402
from s2sad import transform_cache  # noqa: E402
from s2sad.pipeline import bounds  # noqa: E402

# (workload, size) of the quick run's cases measured
CASES = (
    ("gmm", {"d": 2, "K": 5, "n": 1000}),
    ("gmm", {"d": 10, "K": 25, "n": 1000}),
    ("gmm-loops", {"d": 2, "K": 5, "n": 1000}),
    ("lstm", {"l": 2, "c": 1024}),
    ("ba", {"n": 49, "m": 7776, "p": 31843}),
    ("ode-euler", {"steps": 100000}),
    ("linrec", {"n": 200000}),
    ("stencil-loops", {"N": 200}),
    ("conv1d-loops", {"n": 10000, "m": 16}),
    ("stencil", {"N": 200}),
    ("stencil", {"N": 2000}),
    ("ode", {"n": 1000, "s": 100}),
    ("kmeans", {"k": 100, "n": 10000, "d": 8}),
)


def _variant(case, inputs: dict, checked: bool):
    """The case's jitted derivative, transformed afresh (the transform cache is emptied: each
    variant has its own compiled function), its module compiled with or without its bounds
    checks; called once (that call's CPU seconds: the compile, from an empty cache)."""
    saved = bounds.BOUNDSCHECK
    bounds.BOUNDSCHECK = checked
    transform_cache._CACHE.clear()
    try:
        start = time.process_time()
        run, fetch = s2sad_builder(case, jit=True)(case.numpy_f, inputs, case.wrt)
        value = fetch(run())
        first = time.process_time() - start
    finally:
        bounds.BOUNDSCHECK = saved
        transform_cache._CACHE.clear()
    return run, value, first


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--only", help="the workloads named (commas between them)")
    args = parser.parse_args(argv)
    cases = {(c.workload, c.size_label): c for c in all_cases("quick")}
    print(f"best / median CPU ms a call over {args.rounds} rounds, one thread")
    for workload, size in CASES:
        if args.only and workload not in args.only.split(","):
            continue
        case = cases[workload, size_label(size)]
        inputs = case.inputs(size)
        variants, values, first = {}, {}, {}
        for name, checked in (("unchecked", False), ("checked", True)):
            variants[name], values[name], first[name] = _variant(case, inputs, checked)
        for a, b in zip(values["unchecked"], values["checked"]):
            np.testing.assert_array_equal(a, b)
        start = time.process_time()
        variants["unchecked"]()
        calls = max(1, int(0.02 / max(time.process_time() - start, 1e-6)))
        times: dict[str, list] = {name: [] for name in variants}
        names = list(variants)
        gc.disable()
        try:
            for r in range(args.rounds):
                for name in names[r % 2 :] + names[: r % 2]:
                    start = time.process_time()
                    for _ in range(calls):
                        variants[name]()
                    times[name].append((time.process_time() - start) / calls)
                gc.collect()
        finally:
            gc.enable()
        cells = [
            f"{name} {min(t) * 1e3:8.3f} / {statistics.median(t) * 1e3:8.3f}"
            for name, t in times.items()
        ]
        ratio = min(times["checked"]) / min(times["unchecked"])
        label = f"{workload} {case.size_label}"
        firsts = f"first calls {first['unchecked']:.1f} s, {first['checked']:.1f} s"
        print(
            f"{label:<32} " + "   ".join(cells) + f"   checked/unchecked {ratio:.3f}   {firsts}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
