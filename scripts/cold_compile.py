"""Where Numba spends a benchmark workload's cold compile: run one workload (`--quick` size) in
this fresh process with an empty S2SAD_CACHE_DIR and print, as one JSON line, s2sad's transform
time, the first jitted call's wall and CPU time, the CPU time of Numba's passes (exclusive of
the functions they compile inside them), of each function compiled (the generated gradient,
s2sad's helpers, Numba's own library) and of LLVM's optimisation and code generation; and by origin (the generated code, s2sad's Numba
helpers, Numba's own library) that CPU time and the number of specialisations compiled (each
function once per signature: every one is typed, lowered, optimised and turned into machine code
of its own before its caller links it in).

    S2SAD_CACHE_DIR=/tmp/cold python scripts/cold_compile.py gmm   # empties the directory first
    S2SAD_CACHE_DIR=/tmp/cold python scripts/cold_compile.py array20   # a 20-statement function
    S2SAD_CACHE_DIR=/tmp/cold python scripts/cold_compile.py gmm --warm   # a second process:
    # the cache kept, the first call loads Numba's machine code from disk
    S2SAD_CACHE_DIR=/tmp/cold python scripts/cold_compile.py gmm --keep-helpers   # the jit
    # cache emptied but for the helpers' compiled code (<cache>/helpers, s2sad/helper_cache.py):
    # a new gradient in a fresh process, its helpers loaded from disk
    S2SAD_HELPER_CACHE=0 ...   # the helpers compiled in each process, as before that cache

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

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from numba.core import codegen, event  # noqa: E402

from benchmarks.runner import timing  # noqa: E402
from benchmarks.runner.builders import build_s2sad_jit  # noqa: E402
from benchmarks.workloads import all_cases  # noqa: E402

LLVM = collections.Counter()  # LLVM's stages, CPU seconds
PHASES = collections.Counter()  # the first call's phases (s2sad's and Numba's), wall seconds
PASSES = collections.Counter()  # Numba's passes, CPU seconds
FUNCTIONS = collections.Counter()  # the functions Numba compiled, CPU seconds
ORIGINS = collections.Counter()  # generated / s2sad helpers / numba, CPU seconds
COMPILED = collections.Counter()  # the same origins, specialisations compiled


def origin(module: str) -> str:
    """Who wrote a compiled function: s2sad's generated module, its helpers, or Numba."""
    if module.startswith("s2sad_"):
        return "generated"
    return "s2sad helpers" if module.startswith("s2sad") else "numba library"


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


def phase(owner, name: str, label: str) -> None:
    """Add the wall time of `owner.name` to PHASES[label] on every call (outermost only)."""
    original = getattr(owner, name)
    depth = [0]

    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        depth[0] += 1
        try:
            return original(*args, **kwargs)
        finally:
            depth[0] -= 1
            if not depth[0]:
                PHASES[label] += time.perf_counter() - start

    setattr(owner, name, wrapper)


def time_phases() -> None:
    """Time the first call's phases: s2sad's transform (or its load from the disk cache of
    transforms), black (or its text read from disk), the generated module's key and load,
    Numba's loading of cached machine code, and the whole of Numba's dispatch."""
    from numba.core import caching
    from numba.core.dispatcher import Dispatcher

    import s2sad.jit
    import s2sad.pipeline.load
    import s2sad.transform_cache

    phase(s2sad.transform_cache, "differentiate", "s2sad transform")
    for owner in ("s2sad.pipeline.load", "s2sad.formatted"):  # (where black is called from)
        module = sys.modules.get(owner)
        if module is not None and hasattr(module, "format_source"):
            phase(module, "format_source", "black")
    if "s2sad.formatted" in sys.modules:
        phase(s2sad.pipeline.load, "formatted", "black's text (from disk or black)")
    if "s2sad.disk_transforms" in sys.modules:
        phase(s2sad.transform_cache.disk_transforms, "load", "transform from disk (or miss)")
        phase(s2sad.transform_cache.disk_transforms, "store", "transform kept on disk")
    phase(s2sad.jit, "code_fingerprint", "callees' fingerprint")
    phase(s2sad.jit, "_module_for", "generated module (key, write, exec)")
    phase(caching.Cache, "load_overload", "numba cache loads")
    phase(Dispatcher, "compile", "numba dispatcher compile (loads included)")


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
        ORIGINS[origin(ev.data["module"])] += spent - inner
        if name == "nopython_type_inference":
            COMPILED[origin(ev.data["module"])] += 1


def array20(w, b, x, y):
    """A user's array function of 20 statements (a new user's trial of a cold compile)."""
    h = x @ w + b
    a = np.tanh(h)
    e = np.exp(-a * a)
    s = np.sin(a) + np.cos(e)
    t = s * s - 0.5 * a
    u = np.log(1.0 + t * t)
    v = np.sqrt(u + 1.0)
    z = v * e + a
    m = np.mean(z, axis=0)
    c = z - m
    q = c * c
    r = np.sum(q, axis=1)
    p = r / (1.0 + np.max(r))
    d = p - y
    l1 = np.sum(d * d)
    l2 = np.sum(w * w)
    l3 = np.sum(np.abs(b))
    g = np.maximum(z, 0.1)
    l4 = np.mean(np.log(g))
    return l1 + 0.01 * l2 + 0.001 * l3 + 0.1 * l4


def array20_case() -> tuple:
    """`array20`'s gradient in w and b, compiled on its first call, and its transform time."""
    rng = np.random.default_rng(0)
    args = [rng.normal(size=s) for s in ((8, 16), (16,), (64, 8), (64,))]
    g, run, _ = build_s2sad_jit(array20, dict(zip("wbxy", args)), ("w", "b"))
    return run, timing.transform_seconds(g, args)


def workload_case(workload: str) -> tuple:
    """A benchmark workload's jitted gradient at `--quick` size, its transform time and size."""
    case = next(c for c in all_cases("quick") if c.workload == workload)
    inputs = case.inputs()
    if "s2sad-jit" in case.build:
        run, _, probe = case.build["s2sad-jit"](case.numpy_f, inputs, case.wrt)
        return run, timing.probe_seconds(probe), case.size_label
    g, run, _ = build_s2sad_jit(case.numpy_f, inputs, case.wrt)
    return run, timing.transform_seconds(g, list(inputs.values())), case.size_label


def empty(cache: str, keep_helpers: bool) -> None:
    """Delete the cache directory, or all of it but the helpers' compiled code."""
    if not keep_helpers:
        shutil.rmtree(cache, ignore_errors=True)
        return
    for path in Path(cache).glob("*"):
        if path.name != "helpers":
            shutil.rmtree(path) if path.is_dir() else path.unlink()


def main(workload: str, warm: bool = False, keep_helpers: bool = False) -> dict:
    cache = os.environ.get("S2SAD_CACHE_DIR")
    if not cache:
        raise SystemExit("set S2SAD_CACHE_DIR to a directory this script may empty")
    if not warm:
        empty(cache, keep_helpers)
    time_phases()
    timed(codegen.CPUCodeLibrary, "_optimize_functions", "optimise functions")
    timed(codegen.CPUCodeLibrary, "_optimize_final_module", "optimise module")
    timed(codegen.CPUCodeLibrary, "_finalize_final_module", "machine code")
    with event.install_listener("numba:run_pass", Passes()):
        if workload == "array20":
            run, transform = array20_case()
            size = "20 statements"
        else:
            run, transform, size = workload_case(workload)
        PHASES.clear()  # (the transform time's probe ran the transform already)
        wall, cpu = time.perf_counter(), time.process_time()
        run()  # transforms again (the caches were emptied) and compiles, or loads (`--warm`)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    second = time.perf_counter()
    run()
    second = time.perf_counter() - second
    return {
        "workload": workload,
        "size": size,
        "transform_s": transform,
        "first_call_wall_s": round(wall, 2),
        "first_call_cpu_s": round(cpu, 2),
        "second_call_wall_s": round(second, 3),
        "phases_wall_s": {k: round(v, 3) for k, v in PHASES.most_common()},
        "llvm_cpu_s": {k: round(v, 2) for k, v in LLVM.items()},
        "passes_cpu_s": {k: round(v, 2) for k, v in PASSES.most_common(8)},
        "functions_cpu_s": {k: round(v, 2) for k, v in FUNCTIONS.most_common(12)},
        "by_origin_cpu_s": {k: round(v, 2) for k, v in ORIGINS.most_common()},
        "specialisations": dict(COMPILED.most_common()),
    }


if __name__ == "__main__":
    flags = sys.argv[2:]
    print(
        json.dumps(
            main(sys.argv[1], warm="--warm" in flags, keep_helpers="--keep-helpers" in flags)
        )
    )
