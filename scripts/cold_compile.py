"""Where Numba spends a benchmark workload's cold compile: run one workload (`--quick` size) in
this fresh process with an empty S2SAD_CACHE_DIR and print, as one JSON line, s2sad's transform
time, the first jitted call's wall and CPU time, the CPU time of Numba's passes (exclusive of
the functions they compile inside them), of each function compiled (the generated gradient,
s2sad's helpers, Numba's own library) and of LLVM's optimisation and code generation.

    S2SAD_CACHE_DIR=/tmp/cold python scripts/cold_compile.py gmm   # empties the directory first

CPU times are the compiling thread's (time.thread_time), which other load on the machine
changes less than wall time. Each workload wants a process of its own: a process compiles
s2sad's helpers once, for its first workload.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from numba.core import codegen, event  # noqa: E402

from benchmarks.runner import timing  # noqa: E402
from benchmarks.runner.builders import build_s2sad_jit  # noqa: E402
from benchmarks.workloads import all_cases  # noqa: E402

LLVM = collections.Counter()  # LLVM's stages, CPU seconds
PASSES = collections.Counter()  # Numba's passes, CPU seconds
FUNCTIONS = collections.Counter()  # the functions Numba compiled, CPU seconds


def timed(owner, name: str, label: str) -> None:
    """Add the CPU time of `owner.name` to LLVM[label] on every call."""
    original = getattr(owner, name)

    def wrapper(*args, **kwargs):
        start = time.thread_time()
        try:
            return original(*args, **kwargs)
        finally:
            LLVM[label] += time.thread_time() - start

    setattr(owner, name, wrapper)


class Passes(event.Listener):
    """Numba's pass events, their time less that of the events inside them."""

    def __init__(self):
        self.stack = []

    def on_start(self, ev):
        self.stack.append([time.thread_time(), 0.0])

    def on_end(self, ev):
        start, inner = self.stack.pop()
        spent = time.thread_time() - start
        if self.stack:
            self.stack[-1][1] += spent
        name, _, function = ev.data["name"].partition(" [")
        PASSES[name] += spent - inner
        FUNCTIONS[function.rstrip("]")] += spent - inner


def main(workload: str) -> dict:
    cache = os.environ.get("S2SAD_CACHE_DIR")
    if not cache:
        raise SystemExit("set S2SAD_CACHE_DIR to a directory this script may empty")
    shutil.rmtree(cache, ignore_errors=True)
    timed(codegen.CPUCodeLibrary, "_optimize_functions", "optimise functions")
    timed(codegen.CPUCodeLibrary, "_optimize_final_module", "optimise module")
    timed(codegen.CPUCodeLibrary, "_finalize_final_module", "machine code")
    case = next(c for c in all_cases("quick") if c.workload == workload)
    inputs = case.inputs()
    with event.install_listener("numba:run_pass", Passes()):
        if "s2sad-jit" in case.build:
            run, _, probe = case.build["s2sad-jit"](case.numpy_f, inputs, case.wrt)
            transform = timing.probe_seconds(probe)
        else:
            g, run, _ = build_s2sad_jit(case.numpy_f, inputs, case.wrt)
            transform = timing.transform_seconds(g, list(inputs.values()))
        wall, cpu = time.perf_counter(), time.process_time()
        run()  # transforms again (the caches were emptied) and compiles
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {
        "workload": workload,
        "size": case.size_label,
        "transform_s": transform,
        "first_call_wall_s": round(wall, 2),
        "first_call_cpu_s": round(cpu, 2),
        "llvm_cpu_s": {k: round(v, 2) for k, v in LLVM.items()},
        "passes_cpu_s": {k: round(v, 2) for k, v in PASSES.most_common(8)},
        "functions_cpu_s": {k: round(v, 2) for k, v in FUNCTIONS.most_common(12)},
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
