"""What a run covers: the cases (--only, and --quick's default selection), the jit cache its
compiles go to, and whether s2sad takes parallel=True; with the lines the report prints about
each."""

from __future__ import annotations

import fnmatch
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from benchmarks.workloads import workload_names

from .builders import accepts_parallel


@dataclass
class Plan:
    """How a run times: its mode ("smoke", "quick", "full": the repetitions), whether s2sad
    takes parallel=True (then the cases with a loop also time it), and whether the objects
    alive between cases stay frozen (a whole run's)."""

    mode: str
    parallel: bool = False
    # what each case leaves alive stays frozen for the next (timing.time_interleaved); the
    # run unfreezes it at its end
    keep_frozen: bool = False


def select(cases, only: str | None, mode: str = "full"):
    """The cases --only names (a workload, a family or a glob); without it, every case, but
    with --quick only the issue's target workloads (`Case.quick`)."""
    if not only:
        return [c for c in cases if c.quick or mode != "quick"]
    picked = [
        c for c in cases if only in (c.workload, c.family) or fnmatch.fnmatch(c.workload, only)
    ]
    if not picked:
        raise SystemExit(
            f"--only {only!r} matches no workload; workloads: "
            f"{', '.join(workload_names())} (or a family: gmm, lstm, mlp, ba, loops, gradbench)"
        )
    return picked


def jit_cache(mode: str, fresh: bool) -> str:
    """Point S2SAD_CACHE_DIR (unless set) at the cache the jitted gradients compile into, and
    say which. The full run (and --fresh-cache) takes an empty one, so that its compile times
    are Numba compiling; --quick and --smoke reuse one per user, in which a first run's compiles
    (about a minute for the big array gradients) are later runs' disk reads. The objectives'
    `numba.njit` (f Numba) caches in its `numba-primal` directory (NUMBA_CACHE_DIR, unless
    set; Numba reads it when it is first imported, after this), and JAX's `jax.jit` in its
    `jax` directory (JAX's persistent compilation cache, every compile kept: read when
    builders.load_peers imports JAX), so that JAX's first calls are a trace and a disk read
    where s2sad's are a disk read too, and compiles in the full run's empty cache."""
    if "S2SAD_CACHE_DIR" in os.environ:
        _library_caches(Path(os.environ["S2SAD_CACHE_DIR"]))
        return f"jit cache: S2SAD_CACHE_DIR={os.environ['S2SAD_CACHE_DIR']}, as set"
    if mode == "full" or fresh:
        os.environ["S2SAD_CACHE_DIR"] = tempfile.mkdtemp(prefix="s2sad-bench-")
        _library_caches(Path(os.environ["S2SAD_CACHE_DIR"]))
        return "jit cache: empty (Numba compile ∇ is Numba compiling)"
    path = Path(tempfile.gettempdir()) / f"s2sad-bench-{os.getuid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    os.environ["S2SAD_CACHE_DIR"] = str(path)
    _library_caches(path)
    if any(path.iterdir()):
        return (
            f"jit cache: {path}, reused: it holds an earlier quick or smoke run's compiled\n"
            "code (and JAX's), so "
            "Numba compile ∇ and JAX's first call are mostly reads from disk (--fresh-cache to "
            "compile)"
        )
    return f"jit cache: {path}, empty: this run compiles (later quick and smoke runs reuse it)"


def _library_caches(root: Path) -> None:
    """The objectives' numba.njit and JAX's compiles cache beside s2sad's (unless set)."""
    os.environ.setdefault("NUMBA_CACHE_DIR", str(root / "numba-primal"))
    os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(root / "jax"))
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")


def make_plan(mode: str, left_out: list[str]) -> tuple[Plan, list[str]]:
    """What this run times besides NumPy mode and the peers, and the lines that say so
    (`left_out`: the workloads this mode runs only when --only names them)."""
    notes = []
    if left_out:
        notes.append(
            f"--{mode} leaves out {', '.join(left_out)}: --only gradbench (or the name) runs them"
        )
    parallel = accepts_parallel()
    if parallel:
        notes.append(
            "parallel=True: s2sad takes it; the parallel table times it on the workloads with a loop"
        )
    else:
        notes.append("parallel=True: this s2sad does not take it (no parallel table)")
    return Plan(mode, parallel), notes
