"""Time s2sad's gradients against JAX, PyTorch and autograd on ADBench-like workloads.

    python benchmarks/run.py [--quick] [--only NAME] [--json PATH] [--threads N]

For each workload and size, in one process: the NumPy objective (the primal), s2sad's gradient
(NumPy mode), and the gradient from each peer (JAX: jax.jit(jax.grad(f)) in float64 with
block_until_ready; PyTorch: CPU float64, torch.autograd.grad; autograd: autograd.grad). Each is
called once to warm up (that first call is reported separately: s2sad's transform, JAX's trace
and compile), then timed in interleaved rounds, one call of each per round, so that the machine's
drifts hit every peer alike. The table gives medians. The garbage collector is off during each
timed call and while the transform is timed, as in timeit.

Every library runs on one thread by default (--threads 1: NumPy's BLAS, PyTorch's OpenMP, XLA):
on a small machine shared with other work, multi-threaded BLAS swings by 10x from run to run.
--threads 0 leaves each library at its default (all cores). PyTorch's OpenMP threads are set to
wait passively (OMP_WAIT_POLICY=PASSIVE) so that they do not spin and starve the others.

Workloads whose objective Numba compiles (the loop versions) get a second table: numba.njit of
the objective against s2sad.grad(..., jit="strict"), and against the peers, with Numba's compile
time next to s2sad's transform time. The runner compiles into a fresh S2SAD_CACHE_DIR unless one
is set, so that compile time is Numba compiling rather than reading its disk cache.

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
import fnmatch
import gc
import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
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
from benchmarks.workloads import PEERS, all_cases, workload_names  # noqa: E402
from benchmarks.workloads.common import size_label  # noqa: E402

RTOL = 1e-6
PEER_LABEL = {"jax": "JAX", "torch": "torch", "autograd": "autograd"}


# ----------------------------------------------------------------------------- peers


def load_peers() -> dict[str, str | None]:
    """Import each peer; its version string, or None when it is not installed."""
    found: dict[str, str | None] = {}
    try:
        import jax

        jax.config.update("jax_enable_x64", True)
        found["jax"] = (
            f"jax {jax.__version__} (jaxlib {importlib.metadata.version('jaxlib')}, "
            f"{jax.devices()[0].platform})"
        )
    except ImportError:
        found["jax"] = None
    try:
        import torch

        n = torch.get_num_threads()
        found["torch"] = f"torch {torch.__version__} ({n} thread{'s' if n != 1 else ''})"
    except ImportError:
        found["torch"] = None
    try:
        import autograd  # noqa: F401

        found["autograd"] = f"autograd {importlib.metadata.version('autograd')}"
    except ImportError:
        found["autograd"] = None
    return found


def _wrt_positions(inputs: dict, wrt) -> tuple[int, ...]:
    names = list(inputs)
    return tuple(names.index(w) for w in wrt)


def _as_float_arrays(grads) -> tuple[np.ndarray, ...]:
    return tuple(np.asarray(g, dtype=np.float64) for g in grads)


def build_s2sad(f, inputs: dict, wrt):
    g = s2sad.grad(f, wrt=tuple(wrt))
    args = list(inputs.values())
    return (lambda: g(*args)), _as_float_arrays


def build_s2sad_jit(f, inputs: dict, wrt):
    """s2sad's gradient compiled by Numba (jit="strict": a workload that does not compile is
    reported as unsupported, never timed in Python)."""
    g = s2sad.grad(f, wrt=tuple(wrt), jit="strict")
    args = list(inputs.values())
    return g, (lambda: g(*args)), _as_float_arrays


def build_numba_primal(f, inputs: dict):
    import numba

    compiled = numba.njit(f)
    args = list(inputs.values())
    return lambda: compiled(*args)


def build_jax(f, inputs: dict, wrt):
    import jax
    import jax.numpy as jnp

    static = tuple(
        i for i, v in enumerate(inputs.values()) if isinstance(v, int) and not isinstance(v, bool)
    )
    g = jax.jit(jax.grad(f, argnums=_wrt_positions(inputs, wrt)), static_argnums=static)
    args = [jnp.asarray(v) if isinstance(v, np.ndarray) else v for v in inputs.values()]
    return (lambda: jax.block_until_ready(g(*args))), _as_float_arrays


def build_torch(f, inputs: dict, wrt):
    import torch

    args = []
    for name, v in inputs.items():
        if isinstance(v, np.ndarray):
            v = torch.tensor(v)  # a copy, same dtype (float64 / int64)
        elif name in wrt:
            v = torch.tensor(float(v), dtype=torch.float64)
        if name in wrt:
            v.requires_grad_(True)
        args.append(v)
    leaves = [args[i] for i in _wrt_positions(inputs, wrt)]

    def run():
        return torch.autograd.grad(f(*args), leaves)

    return run, lambda r: tuple(t.detach().numpy().astype(np.float64) for t in r)


def build_autograd(f, inputs: dict, wrt):
    from autograd import grad

    g = grad(f, argnum=_wrt_positions(inputs, wrt))
    args = list(inputs.values())
    return (lambda: g(*args)), _as_float_arrays


BUILDERS = {"jax": build_jax, "torch": build_torch, "autograd": build_autograd}


def peer_builder(case, peer: str):
    """How `peer`'s row of this case is built: the case's own builder (a Jacobian workload),
    else the gradient."""
    return case.build.get(peer, BUILDERS[peer])


def s2sad_builder(case, jit: bool = False):
    """`(f, inputs, wrt) -> (run, fetch)` for s2sad's row of this case."""
    custom = case.build.get("s2sad-jit" if jit else "s2sad")
    if custom is not None:
        return lambda f, inputs, wrt: custom(f, inputs, wrt)[:2]
    if jit:
        return lambda f, inputs, wrt: build_s2sad_jit(f, inputs, wrt)[1:]
    return build_s2sad


# ----------------------------------------------------------------------------- timing


@dataclass
class Entry:
    """One thing to time: a zero-argument callable, its warm-up and its timed calls."""

    key: str
    run: object
    first_s: float = 0.0
    result: object = None
    times: list = field(default_factory=list)
    error: str | None = None
    exc: Exception | None = None
    trace: str = ""

    @property
    def median(self) -> float | None:
        return statistics.median(self.times) if self.times else None


def _call_timed(fn):
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        t0 = time.perf_counter()
        out = fn()
        return time.perf_counter() - t0, out
    finally:
        if gc_was_on:
            gc.enable()


def warm_up(entry: Entry) -> None:
    try:
        entry.first_s, entry.result = _call_timed(entry.run)
    except Exception as exc:  # a crash in a peer or in s2sad: reported, never hidden
        entry.error = f"{type(exc).__name__}: {first_line(str(exc))}"
        entry.exc = exc
        entry.trace = traceback.format_exc()


def time_interleaved(entries: list[Entry], budget: float, min_reps: int, max_reps: int) -> None:
    """Round robin: one call of each entry per round until each has `min_reps` calls and
    `budget` seconds, or `max_reps` calls. A slow entry stops after 3 calls and 3 budgets, a
    very slow one (the largest GMM: seconds a call) after 2 calls and 4 budgets."""
    live = [e for e in entries if e.error is None]
    while live:
        gc.collect()
        for e in list(live):
            dt, _ = _call_timed(e.run)
            e.times.append(dt)
            spent, n = sum(e.times), len(e.times)
            if (
                n >= max_reps
                or (n >= min_reps and spent >= budget)
                or (n >= 3 and spent >= 3 * budget)
                or (n >= 2 and spent >= 4 * budget)
            ):
                live.remove(e)


# ----------------------------------------------------------------------------- checks


def first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line.replace(str(REPO) + os.sep, "")


def compare(got, ref) -> tuple[bool, float]:
    """Elementwise |got - ref| <= RTOL (|ref| + max|ref|) for every gradient; also the largest
    error relative to max|ref|."""
    ok, worst = len(got) == len(ref), 0.0
    for a, b in zip(got, ref):
        if a.shape != b.shape:
            return False, float("inf")
        scale = float(np.max(np.abs(b))) if b.size else 0.0
        err = np.abs(a - b)
        ok = ok and bool(np.all(err <= RTOL * (np.abs(b) + scale)))
        worst = max(
            worst, float(np.max(err)) / scale if scale > 0 else float(np.max(err, initial=0))
        )
    return ok, worst


class Reference:
    """Reference gradients for any inputs of a case: JAX, else autograd, else torch."""

    def __init__(self, case, available, known: dict):
        self.case = case
        self.factories = case.check_peers or case.peers
        self.make_inputs = case.check_make_inputs or case.make_inputs
        self.order = [p for p in ("jax", "autograd", "torch") if available.get(p)]
        self.order = [p for p in self.order if callable(self.factories.get(p))]
        self.known = known  # (peer, size label) -> gradients already computed while timing

    def get(self, size: dict, exclude: str | None = None):
        for peer in self.order:
            if peer == exclude:
                continue
            key = (peer, size_label(size))
            if key not in self.known:
                if peer != "jax" and peer in self.case.reduced:
                    continue  # too slow at sizes above the one it was timed at
                try:
                    run, fetch = peer_builder(self.case, peer)(
                        self.factories[peer](), self.make_inputs(**size), self.case.wrt
                    )
                    self.known[key] = fetch(run())
                except Exception:
                    self.known[key] = None
            if self.known[key] is not None:
                return peer, self.known[key]
        return None, None


def clear_s2sad_caches() -> bool:
    """Empty s2sad's transform cache and any functools cache in its modules (the formatter's);
    False where this version of s2sad has no transform cache to clear."""
    for name, module in list(sys.modules.items()):
        if name == "s2sad" or name.startswith("s2sad."):
            for obj in list(vars(module).values()):
                if callable(getattr(obj, "cache_clear", None)) and hasattr(obj, "cache_info"):
                    obj.cache_clear()
    cache = getattr(getattr(s2sad, "compile", None), "_CACHE", None)
    if cache is None:
        return False
    cache.clear()
    return True


def transform_seconds(g, args) -> float | None:
    """Time s2sad's source transform alone (parse to compiled code) for these arguments, with
    empty caches; None where this version of s2sad has no way to ask for it."""
    if not clear_s2sad_caches():
        return None
    # not hasattr(g, "compiled"): that would run the property, and so the transform
    if callable(getattr(g, "specialized", None)) and callable(getattr(g, "_bind", None)):
        bound = g._bind(args, {})
        seconds, _ = _call_timed(lambda: g.specialized(bound))  # the code these ranks run
    elif isinstance(getattr(type(g), "compiled", None), property):
        seconds, _ = _call_timed(lambda: g.compiled)
    else:
        return None
    clear_s2sad_caches()  # so that the first call transforms again
    return seconds


def probe_seconds(probe) -> float | None:
    """Time a case's own transform probe (a zero-argument callable that transforms) with
    empty caches; None where this version of s2sad has no transform cache to clear."""
    if not clear_s2sad_caches():
        return None
    seconds, _ = _call_timed(probe)
    clear_s2sad_caches()
    return seconds


# ----------------------------------------------------------------------------- one case


def run_case(case, available, mode: str) -> dict:
    budget, min_reps, max_reps = {"smoke": (0.05, 3, 3), "quick": (0.5, 3, 10)}.get(
        mode, (2.5, 5, 30)
    )
    inputs = case.inputs()
    row = {"workload": case.workload, "size": case.size_label, "notes": list(case.notes)}
    entries: list[Entry] = []

    # the NumPy primal
    args = list(inputs.values())
    primal = Entry("primal", lambda: case.numpy_f(*args))
    entries.append(primal)

    # s2sad: the transform with an empty cache, then its first call
    s2 = {"status": "ok"}
    s2sad_entries: dict[str, Entry] = {}
    s2sad_fetch = _as_float_arrays
    try:
        if "s2sad" in case.build:  # not a gradient: the case builds the row and its probe
            run, s2sad_fetch, probe = case.build["s2sad"](case.numpy_f, inputs, case.wrt)
            transforms = [probe_seconds(probe) for _ in range(3)]
        else:
            g = s2sad.grad(case.numpy_f, wrt=case.wrt)
            transforms = [transform_seconds(g, args) for _ in range(3)]
            run, _ = build_s2sad(case.numpy_f, inputs, case.wrt)
        if None not in transforms:
            s2["transform_s"] = statistics.median(transforms)
            s2["transform_all_s"] = transforms
        s2sad_entries[case.size_label] = Entry("s2sad", run)
    except s2sad.S2SADError as exc:
        s2["status"] = "unsupported: " + first_line(str(exc))
    except Exception as exc:  # not one of s2sad's own errors: a bug
        s2["status"] = f"error: {type(exc).__name__}: {first_line(str(exc))}"
        s2["traceback"] = traceback.format_exc()

    # the peers, at the case's size or at a smaller one
    peer_info: dict[str, dict] = {}
    peer_entries: dict[str, Entry] = {}
    peer_fetch = {}
    peer_size = {}
    for peer in PEERS:
        spec = case.peers.get(peer, "n/a")
        if not available.get(peer):
            peer_info[peer] = {"status": "missing"}
            continue
        if isinstance(spec, str):
            peer_info[peer] = {"status": spec}
            continue
        size = case.reduced.get(peer, case.size)
        peer_size[peer] = size
        peer_info[peer] = {"status": "ok", "size": size_label(size)}
        try:
            run, fetch = peer_builder(case, peer)(spec(), case.inputs(size), case.wrt)
        except Exception as exc:
            peer_info[peer] = {"status": f"error: {type(exc).__name__}: {first_line(str(exc))}"}
            continue
        peer_entries[peer] = Entry(peer, run)
        peer_fetch[peer] = fetch
        # s2sad also runs at a peer's smaller size, for a like-for-like ratio
        if size != case.size and s2sad_entries and size_label(size) not in s2sad_entries:
            run, _ = s2sad_builder(case)(case.numpy_f, case.inputs(size), case.wrt)
            s2sad_entries[size_label(size)] = Entry(f"s2sad@{size_label(size)}", run)

    # jit=True: the objective compiled by Numba and s2sad's gradient compiled by Numba
    jit = JitRun(case, available, peer_entries, peer_size) if case.jit else None
    entries += list(s2sad_entries.values()) + list(peer_entries.values())
    if jit is not None:
        entries += jit.entries()
    for e in entries:
        warm_up(e)
    main_s2sad = s2sad_entries.get(case.size_label)
    if main_s2sad is not None:
        s2["first_call_s"] = main_s2sad.first_s
        if isinstance(main_s2sad.exc, s2sad.S2SADError):  # refused at the first call
            s2["status"] = "unsupported: " + first_line(str(main_s2sad.exc))
        elif main_s2sad.error:
            s2["status"] = "error: " + main_s2sad.error
            s2["traceback"] = main_s2sad.trace
    time_interleaved(entries, budget, min_reps, max_reps)

    # gradients from the warm-up calls, for the checks
    known = {}
    for peer, e in peer_entries.items():
        if e.error is None:
            try:
                known[(peer, size_label(peer_size[peer]))] = peer_fetch[peer](e.result)
            except Exception:
                pass
    reference = Reference(case, available, known)

    row["primal"] = _stats(primal)
    if primal.error:
        row["primal"]["status"] = "error: " + primal.error
    if main_s2sad is not None and main_s2sad.error is None:
        s2.update(_stats(main_s2sad))
        if "transform_s" not in s2 and s2.get("median_s") is not None:
            s2["transform_s"] = max(main_s2sad.first_s - s2["median_s"], 0.0)
        ref_peer, ref = reference.get(case.size)
        if ref is not None:
            ok, err = compare(s2sad_fetch(main_s2sad.result), ref)
            s2["check"] = {"against": ref_peer, "ok": ok, "max_rel_err": err}
    row["s2sad"] = s2

    for peer, e in peer_entries.items():
        info = peer_info[peer]
        if e.error is not None:
            info["status"] = "error: " + e.error
            continue
        info.update(_stats(e))
        info["first_call_s"] = e.first_s
        lab = size_label(peer_size[peer])
        s2e = s2sad_entries.get(lab)
        if s2e is not None and s2e.median is not None and e.median:
            info["s2sad_ratio"] = s2e.median / e.median
            info["s2sad_at_size_s"] = s2e.median
        ref_peer, ref = reference.get(peer_size[peer], exclude=peer)
        if ref is not None and (peer, lab) in known:
            ok, err = compare(known[(peer, lab)], ref)
            info["check"] = {"against": ref_peer, "ok": ok, "max_rel_err": err}
    row["peers"] = peer_info
    if jit is not None:
        row["jit"] = jit.summary(reference, known)
    return row


class JitRun:
    """The jitted rows of one case: numba.njit of the objective, s2sad's gradient with
    jit="strict" (at the case's size and at each peer's smaller size), and the peers' entries
    to compare with: the case's own, or for a loop version the vectorised objective's."""

    def __init__(self, case, available, peer_entries: dict, peer_size: dict):
        self.case = case
        inputs = case.inputs()
        self.args = list(inputs.values())
        self.info: dict = {"status": "ok"}
        self.primal = None
        self.grads: dict[str, Entry] = {}
        self.peers: dict[str, Entry] = {}
        self.peer_size: dict[str, dict] = {}
        self.peer_fetch: dict = {}
        self.vectorised = False
        self.fetch = _as_float_arrays
        try:
            build_primal = case.build.get("numba-primal", build_numba_primal)
            self.primal = Entry("numba-primal", build_primal(case.numpy_f, inputs))
        except ImportError:
            self.info["status"] = "numba missing"
            return
        try:
            if "s2sad-jit" in case.build:
                run, self.fetch, probe = case.build["s2sad-jit"](case.numpy_f, inputs, case.wrt)
                transforms = [probe_seconds(probe) for _ in range(3)]
            else:
                g, run, _ = build_s2sad_jit(case.numpy_f, inputs, case.wrt)
                # the source transform alone; the first call then adds Numba's compile
                transforms = [transform_seconds(g, self.args) for _ in range(3)]
            if None not in transforms:
                self.info["transform_s"] = statistics.median(transforms)
            self.grads[case.size_label] = Entry("s2sad-jit", run)
        except s2sad.S2SADError as exc:
            self.info["status"] = "unsupported: " + first_line(str(exc))
            return
        for peer in PEERS:
            if peer in peer_entries:
                self.peers[peer] = peer_entries[peer]
                self.peer_size[peer] = peer_size[peer]
                size = peer_size[peer]
                if size != case.size and size_label(size) not in self.grads:
                    run, _ = s2sad_builder(case, jit=True)(
                        case.numpy_f, case.inputs(size), case.wrt
                    )
                    self.grads[size_label(size)] = Entry(f"s2sad-jit@{size_label(size)}", run)
            elif case.check_peers and callable(case.check_peers.get(peer)):
                if not available.get(peer):
                    continue
                # a loop version: compare with the peers' vectorised objective, at the same
                # size or, for a slow peer, at the case's smaller size for it
                self.vectorised = True
                size = case.reduced.get(peer, case.size)
                try:
                    run, fetch = peer_builder(case, peer)(
                        case.check_peers[peer](), case.check_make_inputs(**size), case.wrt
                    )
                except Exception:
                    continue
                self.peers[peer] = Entry(f"{peer}-vectorised", run)
                self.peer_size[peer] = size
                self.peer_fetch[peer] = fetch
                if size != case.size and size_label(size) not in self.grads:
                    run, _ = s2sad_builder(case, jit=True)(
                        case.numpy_f, case.inputs(size), case.wrt
                    )
                    self.grads[size_label(size)] = Entry(f"s2sad-jit@{size_label(size)}", run)
        self._own = {p for p in self.peers if p not in peer_entries}

    def entries(self) -> list[Entry]:
        """What to time besides the case's own entries (the peers it reuses are timed there)."""
        out = [self.primal] if self.primal is not None else []
        out += list(self.grads.values())
        out += [self.peers[p] for p in sorted(self._own)] if self.grads else []
        return out

    def summary(self, reference, known: dict) -> dict:
        info = dict(self.info)
        if self.primal is not None:
            info["primal"] = _stats(self.primal)
            if self.primal.error:
                info["primal"]["status"] = "error: " + self.primal.error
        main = self.grads.get(self.case.size_label)
        if main is None:
            return info
        if main.error:
            info["status"] = (
                "unsupported: " + first_line(str(main.exc))
                if isinstance(main.exc, s2sad.S2SADError)
                else "error: " + main.error
            )
            return info
        info.update(_stats(main))
        if info.get("median_s") is not None:
            # the first call transforms again (the caches were emptied) and compiles
            info["numba_compile_s"] = max(
                main.first_s - info.get("transform_s", 0.0) - info["median_s"], 0.0
            )
        if self.primal is not None and self.primal.times:
            info["numba_primal_compile_s"] = max(self.primal.first_s - self.primal.median, 0.0)
        ref_peer, ref = reference.get(self.case.size)
        if ref is not None:
            ok, err = compare(self.fetch(main.result), ref)
            info["check"] = {"against": ref_peer, "ok": ok, "max_rel_err": err}
        peers = {}
        for peer, e in self.peers.items():
            if e.error is not None or e.median is None:
                peers[peer] = {"status": "error: " + (e.error or "not timed")}
                continue
            lab = size_label(self.peer_size[peer])
            entry = {"status": "ok", "size": lab, "median_s": e.median}
            g = self.grads.get(lab)
            if g is not None and g.median:
                entry["s2sad_ratio"] = g.median / e.median
            if peer in self._own:
                entry["vectorised"] = True
            peers[peer] = entry
        info["peers"] = peers
        return info


def _stats(e: Entry) -> dict:
    if not e.times:
        return {"median_s": None}
    return {
        "median_s": e.median,
        "min_s": min(e.times),
        "n": len(e.times),
        "first_call_s": e.first_s,
    }


# ----------------------------------------------------------------------------- report


def fmt_time(s: float | None) -> str:
    if s is None:
        return "—"
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} µs"


def fmt_ratio(r: float | None) -> str:
    if r is None:
        return "—"
    return f"{r:.2f}×" if r >= 0.01 else f"{r:.1g}×"  # 0.0003×, not 0.00×


def mark(check: dict | None) -> str:
    if not check:
        return "—"
    return "✓" if check["ok"] else f"✗ ({check['max_rel_err']:.1e})"


def peer_cell(info: dict, case_size: str) -> tuple[str, str]:
    status = info["status"]
    if status == "missing":
        return "missing", "—"
    if status.startswith("n/a"):
        return "n/a", "—"
    if status != "ok":
        return "error", "—"
    t = fmt_time(info.get("median_s"))
    if info.get("size") != case_size:
        t += " *"
    return t, fmt_ratio(info.get("s2sad_ratio"))


def render_table(header: list[str], rows: list[list[str]], left: int = 2) -> str:
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]

    def line(cells):
        out = []
        for i, (c, w) in enumerate(zip(cells, widths)):
            out.append(c.ljust(w) if i < left or i == len(cells) - 1 else c.rjust(w))
        return "  ".join(out).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), rule] + [line(r) for r in rows])


def report(results: list[dict], machine: str) -> str:
    header = ["workload", "size", "f NumPy", "s2sad ∇", "∇/f"]
    for p in PEERS:
        header += [f"{PEER_LABEL[p]} ∇", f"s2sad/{PEER_LABEL[p]}"]
    header += ["check", "peers", "s2sad"]
    rows, costs, footnotes = [], [], []
    for r in results:
        s2 = r["s2sad"]
        ok = s2["status"] == "ok"
        g = s2.get("median_s") if ok else None
        f = r["primal"].get("median_s")
        row = [
            r["workload"],
            r["size"],
            fmt_time(f),
            fmt_time(g) if ok else "—",
            fmt_ratio(g / f if g and f else None),
        ]
        for p in PEERS:
            row += list(peer_cell(r["peers"][p], r["size"]))
        peer_checks = [i.get("check") for i in r["peers"].values() if i.get("check")]
        peers_ok = "—" if not peer_checks else ("✓" if all(c["ok"] for c in peer_checks) else "✗")
        status = "ok" if ok else s2["status"]
        row += [mark(s2.get("check")) if ok else "—", peers_ok, status]
        rows.append(row)
        if ok and s2.get("check") and not s2["check"]["ok"]:
            footnotes.append(
                f"✗ {r['workload']} {r['size']}: s2sad's gradient disagrees with "
                f"{s2['check']['against']}'s (largest error "
                f"{s2['check']['max_rel_err']:.1e} of max|g|)"
            )
        for p in PEERS:
            info = r["peers"][p]
            if info["status"] == "ok" and info.get("size") != r["size"]:
                footnotes.append(
                    f"* {r['workload']} {r['size']}: {PEER_LABEL[p]} ran at "
                    f"{info['size']} (its Python loop is slow); s2sad/{PEER_LABEL[p]}"
                    " compares s2sad at that size too"
                )
            elif info["status"].startswith("error"):
                footnotes.append(f"{r['workload']} {r['size']}: {PEER_LABEL[p]} {info['status']}")
            elif info.get("check") and not info["check"]["ok"]:
                footnotes.append(
                    f"{r['workload']} {r['size']}: {PEER_LABEL[p]} disagrees with "
                    f"{info['check']['against']} (max rel err "
                    f"{info['check']['max_rel_err']:.1e})"
                )
        cost = [
            r["workload"],
            r["size"],
            fmt_time(s2.get("transform_s")) if ok else "—",
            fmt_time(s2.get("first_call_s")) if ok else "—",
        ]
        for p in PEERS:
            info = r["peers"][p]
            cost.append(fmt_time(info.get("first_call_s")) if info["status"] == "ok" else "—")
        costs.append(cost)
    cost_header = ["workload", "size", "s2sad transform", "s2sad 1st call"] + [
        f"{PEER_LABEL[p]} 1st call" for p in PEERS
    ]
    legend = (
        "medians of timed calls after one warm-up call. f NumPy: the NumPy objective; ∇/f: s2sad's\n"
        "gradient time over it; s2sad/X: s2sad's gradient time over X's (above 1: s2sad slower).\n"
        "check: s2sad's gradient against JAX's (else autograd's), |a-b| <= 1e-6 (|b| + max|b|);\n"
        "peers: every peer against the same reference. missing: not installed; n/a: not run."
    )
    notes = sorted({f"{r['workload']}: {n}" for r in results for n in r["notes"]})
    parts = [machine, "", render_table(header, rows), "", legend]
    if footnotes:
        parts += [""] + footnotes
    if notes:
        parts += ["", "notes:"] + [f"  {n}" for n in notes]
    jit_part = report_jit(results)
    if jit_part:
        parts += ["", jit_part]
    parts += [
        "",
        "one-off costs: s2sad's transform alone (median of 3, caches emptied each time);\n"
        "first calls, which include the transform, JAX's trace and compile, and the first\n"
        "touch of freshly allocated memory:",
        "",
        render_table(cost_header, costs),
    ]
    return "\n".join(parts)


def report_jit(results: list[dict]) -> str:
    """The jitted rows: Numba's compile of the objective against s2sad's gradient with
    jit=True, the peers' gradients, and what compiling cost."""
    rows, costs, marks = [], [], set()
    for r in results:
        info = r.get("jit")
        if info is None:
            continue
        ok = info["status"] == "ok" and info.get("median_s") is not None
        f = (info.get("primal") or {}).get("median_s")
        g = info.get("median_s") if ok else None
        row = [
            r["workload"],
            r["size"],
            fmt_time(f),
            fmt_time(g),
            fmt_ratio(g / f if g and f else None),
        ]
        for p in PEERS:
            peer = (info.get("peers") or {}).get(p)
            if not ok or peer is None:
                row += ["n/a" if ok else "—", "—"]
                continue
            if peer["status"] != "ok":
                row += ["error", "—"]
                continue
            t = fmt_time(peer["median_s"])
            if peer.get("vectorised"):
                t += " †"
                marks.add("†")
            if peer["size"] != r["size"]:
                t += " *"
                marks.add("*")
            row += [t, fmt_ratio(peer.get("s2sad_ratio"))]
        row += [mark(info.get("check")) if ok else "—", "ok" if ok else info["status"]]
        rows.append(row)
        costs.append(
            [
                r["workload"],
                r["size"],
                fmt_time(info.get("transform_s")) if ok else "—",
                fmt_time(info.get("numba_compile_s")) if ok else "—",
                fmt_time(info.get("numba_primal_compile_s")),
            ]
        )
    if not rows:
        return ""
    header = ["workload", "size", "f Numba", "s2sad jit ∇", "∇/f"]
    for p in PEERS:
        header += [f"{PEER_LABEL[p]} ∇", f"s2sad/{PEER_LABEL[p]}"]
    header += ["check", "s2sad jit"]
    legend = [
        "jit=True: f Numba is numba.njit(objective); s2sad jit ∇ is s2sad.grad(objective,",
        "jit='strict'), and ∇/f its time over f Numba's. Peers as in the table above.",
    ]
    if "*" in marks:
        legend.append("* the peer ran at a smaller size; s2sad jit was timed at that size too.")
    if "†" in marks:
        legend.append(
            "† the peer differentiates the vectorised objective (it has no loop version), "
            "at the same size unless marked *."
        )
    cost_header = ["workload", "size", "s2sad transform", "Numba compile ∇", "Numba compile f"]
    return "\n".join(
        [render_table(header, rows), ""]
        + legend
        + [
            "",
            "jit one-off costs: s2sad's transform (median of 3), then Numba compiling the",
            "gradient on its first call (first call minus transform minus a timed call; the",
            "first jitted workload also compiles s2sad's Numba helpers), and Numba compiling f:",
            "",
            render_table(cost_header, costs),
        ]
    )


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
        f"{THREADS}, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}"
    )


# ----------------------------------------------------------------------------- CLI


def _warm_s2sad() -> None:
    """Transform a one-line function once, so that no workload's transform time includes
    s2sad's own imports (the formatter, the rule tables)."""

    def warm(x):
        return np.sum(np.sin(x) * x)

    s2sad.grad(warm)(np.ones(3))


def select(cases, only: str | None):
    if not only:
        return cases
    picked = [
        c for c in cases if only in (c.workload, c.family) or fnmatch.fnmatch(c.workload, only)
    ]
    if not picked:
        raise SystemExit(
            f"--only {only!r} matches no workload; workloads: "
            f"{', '.join(workload_names())} (or a family: gmm, lstm, mlp, ba, loops, gradbench)"
        )
    return picked


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="smaller sizes and fewer repetitions (under 3 minutes on 2 cores)",
    )
    ap.add_argument(
        "--only",
        metavar="NAME",
        help="one workload (" + ", ".join(workload_names()) + "), a family or a glob",
    )
    ap.add_argument(
        "--json",
        metavar="PATH",
        default=str(Path(__file__).parent / "results.json"),
        help="where to write the results (default: benchmarks/results.json)",
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
        "--smoke",
        action="store_true",
        help="tiny sizes, a few seconds: checks the runner, times nothing useful",
    )
    args = ap.parse_args(argv)
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"

    started = time.perf_counter()
    if "S2SAD_CACHE_DIR" not in os.environ:
        # an empty cache: the jitted rows' compile times are Numba compiling, not a disk read
        os.environ["S2SAD_CACHE_DIR"] = tempfile.mkdtemp(prefix="s2sad-bench-")
    cases = select(all_cases(mode), args.only)
    available = load_peers()
    machine = machine_line(available)
    print(machine, file=sys.stderr)
    _warm_s2sad()
    results = []
    for i, case in enumerate(cases, 1):
        t0 = time.perf_counter()
        print(
            f"[{i}/{len(cases)}] {case.workload} {case.size_label} ...",
            end=" ",
            file=sys.stderr,
            flush=True,
        )
        results.append(run_case(case, available, mode))
        print(f"{time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)

    text = report(results, machine)
    print(text)
    total = time.perf_counter() - started
    print(f"\ntotal {total:.0f} s ({mode})")
    out = {
        "mode": mode,
        "machine": machine,
        "peers": available,
        "rtol": RTOL,
        "total_s": total,
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "results": results,
    }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    with open(args.json, "w") as fh:
        json.dump(out, fh, indent=1, ensure_ascii=False, default=str)
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
