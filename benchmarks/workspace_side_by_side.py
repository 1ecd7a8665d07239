"""GMM's jitted gradient with and without its workspace (s2sad/workspace.py), beside JAX's
jitted gradient, in one process on one thread (BLAS, Numba, XLA): each round calls each once,
in alternating order; the table shows each one's best and median CPU time over the rounds and
the page faults (ru_minflt) of its fastest call. No malloc options are set.

    python benchmarks/workspace_side_by_side.py                     # d=64 K=200 n=2000
    python benchmarks/workspace_side_by_side.py 64 200 10000 --rounds 3
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import statistics
import sys
import time

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one thread, as benchmarks/run.py runs by default
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false"
).strip()

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import s2sad  # noqa: E402
from s2sad import workspace  # noqa: E402
from benchmarks.workloads import gmm  # noqa: E402


def _without_workspace(g, args):
    def call():
        workspace.ENABLED = False  # (S2SAD_WORKSPACE=0, read once a process)
        try:
            return g(*args)
        finally:
            workspace.ENABLED = True

    return call


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sizes", nargs="*", type=int, default=[64, 200, 2000], help="d K n")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--no-jax", action="store_true")
    args = parser.parse_args(argv)
    d, K, n = args.sizes
    inputs = gmm.make_inputs(d, K, n)
    values = list(inputs.values())
    g = s2sad.grad(gmm.gmm_objective, wrt=gmm.WRT, jit=True)
    calls = {"s2sad jit, workspace": lambda: g(*values), "s2sad jit, fresh": None}
    calls["s2sad jit, fresh"] = _without_workspace(g, values)
    pooled, fresh = calls["s2sad jit, workspace"](), calls["s2sad jit, fresh"]()
    same = all(np.array_equal(a, b) for a, b in zip(pooled, fresh))
    if not args.no_jax:
        import jax

        from benchmarks.runner.builders import build_jax

        jax.config.update("jax_enable_x64", True)
        calls["JAX jit(grad)"] = build_jax(gmm.jax_factory(), inputs, gmm.WRT)[0]
    for call in calls.values():
        call()
    times = {k: [] for k in calls}
    faults = {k: [] for k in calls}
    gc.disable()
    try:
        for r in range(args.rounds):
            for name, call in calls.items() if r % 2 else reversed(calls.items()):
                before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                start = time.process_time()
                call()
                times[name].append(time.process_time() - start)
                faults[name].append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    finally:
        gc.enable()
    print(f"GMM d={d} K={K} n={n}, {args.rounds} rounds, CPU time (numbers equal: {same})")
    for name in calls:
        best = min(range(len(times[name])), key=times[name].__getitem__)
        print(
            f"  {name:<22} best {times[name][best] * 1e3:9.3f} ms  "
            f"median {statistics.median(times[name]) * 1e3:9.3f} ms  "
            f"page faults {faults[name][best]:>8}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
