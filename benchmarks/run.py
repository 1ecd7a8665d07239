"""Time s2sad's gradients against JAX, PyTorch and autograd on ADBench-like workloads.

    python benchmarks/run.py [--quick | --smoke] [--only NAME] [--json PATH] [--threads N]
                             [--fresh-cache]

For each workload and size, in one process: the NumPy objective (the primal), s2sad's gradient
(NumPy mode, and compiled by Numba with jit="strict" where the row has a jitted form; best/JAX
is the faster of the two over JAX's time), and the gradient from each peer (JAX: jax.jit(jax.grad(f)) in float64 with
block_until_ready; PyTorch: CPU float64, torch.autograd.grad; autograd: autograd.grad). Each is
called once to warm up (that first call is reported separately: s2sad's transform, JAX's trace
and compile), then timed in interleaved rounds, one call of each per round, so that the machine's
drifts hit every peer alike. The table gives medians. The garbage collector is off during each
timed call and while the transform is timed, as in timeit. The run's own time, by case and
phase, goes to stderr at its end and to results.json (`run_cost`).

Every library runs on one thread by default (--threads 1: NumPy's BLAS, PyTorch's OpenMP, XLA):
on a small machine shared with other work, multi-threaded BLAS swings by 10x from run to run.
--threads 0 leaves each library at its default (all cores). PyTorch's OpenMP threads are set to
wait passively (OMP_WAIT_POLICY=PASSIVE) so that they do not spin and starve the others.

Workloads whose objective Numba compiles (the loop versions, gradbench's array evals) get a
second table: numba.njit of the objective against s2sad.grad(..., jit="strict"), and against the
peers. Where s2sad.grad takes parallel=True, the workloads with a loop get a third: the jitted
gradient with parallel=True at 1 and 2 Numba threads. Every jitted row reports s2sad's
transform and Numba's compile time. The full run compiles into a fresh S2SAD_CACHE_DIR unless
one is set, so that compile time is Numba compiling rather than reading its disk cache;
--quick and --smoke reuse one per user (--fresh-cache: a fresh one), and say which.

s2sad's transform time is measured with an empty transform cache. A workload s2sad cannot yet
express is reported as "unsupported: <first line of the error>", and the peers still run. A peer
that is not installed is reported as "missing"; "n/a" means that peer has no version of it.

Correctness is checked once per workload: s2sad's gradient against JAX's (else autograd's, else
PyTorch's), elementwise |a - b| <= 1e-6 (|b| + max|b|). Every peer is checked against the same
reference, so a mistake in a peer's objective shows up too.

pip install -e ".[bench]" installs the peers (jax[cpu], torch, autograd).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import subprocess
import sys
import time
import warnings
from pathlib import Path


def _set_threads(argv: list[str]) -> str:
    """Thread settings go into the environment before NumPy, JAX or PyTorch load, so
    --threads is read here, ahead of argparse. Returns a description for the report."""
    # PyTorch's OpenMP threads otherwise spin between parallel regions; on a small shared
    # machine that starves whatever runs next (JAX, NumPy, torch itself) by 10-50x.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    n = "1"
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            n = argv[i + 1]
        elif a.startswith("--threads="):
            n = a.split("=", 1)[1]
    if not n.isdigit() or int(n) < 1:
        return "each library's default threads"
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = n
    if n == "1":
        flags = os.environ.get("XLA_FLAGS", "")
        os.environ["XLA_FLAGS"] = (flags + " --xla_cpu_multi_thread_eigen=false").strip()
    return f"{n} thread{'s' if n != '1' else ''} (BLAS, OpenMP{', XLA' if n == '1' else ''})"


THREADS = _set_threads(sys.argv)

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

import s2sad  # noqa: E402
from benchmarks.runner.builders import load_peers  # noqa: E402
from benchmarks.runner.cases import run_case  # noqa: E402
from benchmarks.runner.plan import jit_cache, make_plan, select  # noqa: E402
from benchmarks.runner.checks import RTOL  # noqa: E402
from benchmarks.runner.cost import summary as cost_summary  # noqa: E402
from benchmarks.runner.report import report  # noqa: E402
from benchmarks.workloads import all_cases, workload_names  # noqa: E402


def machine_line(available) -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for ln in fh:
                if ln.startswith("model name"):
                    cpu = ln.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count()
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        blas = f"{blas['name']} {blas.get('version', '')}".strip()
    except Exception:
        blas = "BLAS unknown"
    try:
        rev = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "s2sad"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        rev = (rev + ("+dirty" if dirty else "")) or "unknown"
    except Exception:
        rev = "unknown"
    peers = "; ".join(v if v else f"{p} missing" for p, v in available.items())
    return (
        f"machine: {platform.system()} {platform.machine()}, {cpu}, {cores} cores; "
        f"Python {platform.python_version()}; numpy {np.__version__} ({blas}); "
        f"s2sad {s2sad.__version__} (git {rev}); {peers}; "
        f"{THREADS}, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}; "
        f"{load_average()} at the start"
    )


def load_average() -> str:
    """The machine's load (1, 5, 15 minutes): on a shared machine, how far to trust times."""
    try:
        return "load average " + ", ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "load average unknown"


# ----------------------------------------------------------------------------- CLI


def _warm_s2sad() -> None:
    """Transform a one-line function once, so that no workload's transform time includes
    s2sad's own imports (the formatter, the rule tables)."""

    def warm(x):
        return np.sum(np.sin(x) * x)

    s2sad.grad(warm)(np.ones(3))


def _quiet_numba() -> None:
    """Numba's performance hints (np.dot on non-contiguous views in the generated code) are
    for s2sad's developers, not the report: hidden here."""
    try:
        from numba.core.errors import NumbaPerformanceWarning
    except ImportError:
        return
    warnings.simplefilter("ignore", NumbaPerformanceWarning)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="the issue's target workloads at smaller sizes, fewer repetitions",
    )
    ap.add_argument(
        "--only",
        metavar="NAME",
        help="one workload (" + ", ".join(workload_names()) + "), a family or a glob",
    )
    ap.add_argument(
        "--json",
        metavar="PATH",
        default=None,
        help="where to write the results (default: benchmarks/results.json; with --smoke, "
        "nowhere: its numbers mean nothing, and the file is the README's record)",
    )
    ap.add_argument(
        "--threads",
        type=int,
        metavar="N",
        default=1,
        help="threads for NumPy's BLAS, PyTorch's OpenMP and (with 1) XLA; default 1, "
        "which is reproducible on a small shared machine; 0: each library's default",
    )
    ap.add_argument(
        "--fresh-cache",
        action="store_true",
        help="with --quick or --smoke, compile the jitted gradients into an empty cache (as the "
        "full run does) instead of reusing the one earlier quick and smoke runs filled",
    )
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes: checks the runner, times nothing useful (minutes from an empty jit "
        "cache, Numba compiling every jitted gradient; about two with a warm one)",
    )
    args = ap.parse_args(argv)
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    if args.json is None and mode != "smoke":
        args.json = str(Path(__file__).parent / "results.json")

    started = time.perf_counter()
    cache_note = jit_cache(mode, args.fresh_cache)
    every = all_cases(mode)
    cases = select(every, args.only, mode)
    picked = {id(c) for c in cases}
    left_out = [] if args.only else [c.workload for c in every if id(c) not in picked]
    left_out = list(dict.fromkeys(left_out))
    available = load_peers()
    machine = machine_line(available)
    print(machine, file=sys.stderr)
    _warm_s2sad()
    _quiet_numba()
    plan, plan_notes = make_plan(mode, left_out)
    plan_notes.append(cache_note)
    plan.keep_frozen = True  # (unfrozen below)
    results, case_wall = [], []
    for i, case in enumerate(cases, 1):
        t0 = time.perf_counter()
        print(
            f"[{i}/{len(cases)}] {case.workload} {case.size_label} ...",
            end=" ",
            file=sys.stderr,
            flush=True,
        )
        results.append(run_case(case, available, plan))
        case_wall.append(time.perf_counter() - t0)
        print(f"{case_wall[-1]:.1f} s", file=sys.stderr, flush=True)
    gc.unfreeze()  # what the cases left alive (timing.time_interleaved)
    print(cost_summary(results, case_wall, time.perf_counter() - started), file=sys.stderr)

    text = report(results, machine, plan_notes)
    print(text)
    total = time.perf_counter() - started
    print(f"\ntotal {total:.0f} s ({mode}); {load_average()} at the end")
    out = {
        "mode": mode,
        "machine": machine,
        "peers": available,
        "rtol": RTOL,
        "total_s": total,
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "results": results,
    }
    if args.json is None:
        return 0
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    with open(args.json, "w") as fh:
        json.dump(out, fh, indent=1, ensure_ascii=False, default=str)
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
