"""Timing: one `Entry` per callable, a warm-up call each, then interleaved rounds (one call of
each entry per round) so that drift on a shared machine hits every entry alike; the garbage
collector is off during each timed call, as in timeit. Also s2sad's transform time, measured
with its caches emptied."""

from __future__ import annotations

import contextlib
import gc
import os
import statistics
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import s2sad

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Entry:
    """One thing to time: a zero-argument callable, its warm-up and its timed calls."""

    key: str
    run: object
    first_s: float = 0.0
    first_cpu_s: float = 0.0
    loop_cpu_s: float = 0.0  # CPU seconds of the timed calls (the runner's own cost)
    result: object = None
    times: list = field(default_factory=list)
    error: str | None = None
    exc: Exception | None = None
    trace: str = ""

    @property
    def median(self) -> float | None:
        return statistics.median(self.times) if self.times else None


def call_timed(fn):
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        t0 = time.perf_counter()
        out = fn()
        return time.perf_counter() - t0, out
    finally:
        if gc_was_on:
            gc.enable()


def first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line.replace(str(REPO) + os.sep, "")


def warm_up(entry: Entry) -> None:
    c0 = time.process_time()
    try:
        entry.first_s, entry.result = call_timed(entry.run)
    except Exception as exc:  # a crash in a peer or in s2sad: reported, never hidden
        entry.error = f"{type(exc).__name__}: {first_line(str(exc))}"
        entry.exc = exc
        entry.trace = traceback.format_exc()
    finally:
        entry.first_cpu_s = time.process_time() - c0


def time_interleaved(
    entries: list[Entry],
    budget: float,
    min_reps: int,
    max_reps: int,
    ledger=None,
    keep_frozen: bool = False,
) -> None:
    """Round robin: one call of each entry per round until each has `min_reps` calls and
    `budget` seconds, or `max_reps` calls. A slow entry stops after 3 calls and 3 budgets, a
    very slow one (the largest GMM: seconds a call) after 2 calls and 4 budgets.

    Each round starts with the garbage of the last one collected. What is alive before the
    first round (the peers' and Numba's compiled code: a million objects, 0.2-0.6 s a full
    collection) is frozen (`gc.freeze`), so those collections look at the rounds' own objects
    only; it is unfrozen afterwards, unless `keep_frozen` (run.py: the next case's first
    collection then looks only at what was made since, instead of at every object of the run,
    0.5 s a case; it unfreezes at the run's end). `ledger` (cost.py) is charged with the
    collections."""
    live = [e for e in entries if e.error is None]
    _collect(ledger)
    gc.freeze()
    try:
        while live:
            _collect(ledger)
            for e in list(live):
                c0 = time.process_time()
                dt, _ = call_timed(e.run)
                e.loop_cpu_s += time.process_time() - c0
                e.times.append(dt)
                spent, n = sum(e.times), len(e.times)
                if (
                    n >= max_reps
                    or (n >= min_reps and spent >= budget)
                    or (n >= 3 and spent >= 3 * budget)
                    or (n >= 2 and spent >= 4 * budget)
                ):
                    live.remove(e)
    finally:
        if not keep_frozen:
            gc.unfreeze()


def _collect(ledger) -> None:
    w0, c0 = time.perf_counter(), time.process_time()
    gc.collect()
    if ledger is not None:
        ledger.add("gc between rounds", time.perf_counter() - w0, time.process_time() - c0)


def stats(e: Entry) -> dict:
    if not e.times:
        return {"median_s": None}
    return {
        "median_s": e.median,
        "min_s": min(e.times),
        "n": len(e.times),
        "first_call_s": e.first_s,
    }


def clear_s2sad_caches() -> bool:
    """Empty s2sad's transform cache and any functools cache in its modules (the formatter's);
    False where this version of s2sad has no transform cache to clear."""
    for name, module in list(sys.modules.items()):
        if name == "s2sad" or name.startswith("s2sad."):
            for obj in list(vars(module).values()):
                if callable(getattr(obj, "cache_clear", None)) and hasattr(obj, "cache_info"):
                    obj.cache_clear()
    cache = None
    for owner in ("transform_cache", "compile"):  # where it lives now, and where it lived
        module = sys.modules.get(f"s2sad.{owner}")
        cache = getattr(module, "_CACHE", None) if module is not None else None
        if cache is not None:
            break
    if cache is None:
        return False
    cache.clear()
    return True


@contextlib.contextmanager
def pipeline_only():
    """s2sad's transforms made by its pipeline, not loaded from its disk cache of jitted ones
    (S2SAD_TRANSFORM_CACHE=0 meanwhile), so that a transform's time is the transform's."""
    before = os.environ.get("S2SAD_TRANSFORM_CACHE")
    os.environ["S2SAD_TRANSFORM_CACHE"] = "0"
    try:
        yield
    finally:
        if before is None:
            del os.environ["S2SAD_TRANSFORM_CACHE"]
        else:
            os.environ["S2SAD_TRANSFORM_CACHE"] = before


def transform_seconds(g, args) -> float | None:
    """Time s2sad's source transform alone (parse to compiled code, not Numba's compile) for
    these arguments, with empty caches; None where this version of s2sad has no way to ask."""
    if not clear_s2sad_caches():
        return None
    # not hasattr(g, "compiled"): that would run the property, and so the transform
    with pipeline_only():
        if callable(getattr(g, "specialized", None)) and callable(getattr(g, "_bind", None)):
            bound = g._bind(args, {})
            seconds, _ = call_timed(lambda: g.specialized(bound))  # the code these ranks run
        elif isinstance(getattr(type(g), "compiled", None), property):
            seconds, _ = call_timed(lambda: g.compiled)
        else:
            return None
    clear_s2sad_caches()  # so that the first call transforms again
    return seconds


def probe_seconds(probe) -> float | None:
    """Time a case's own transform probe (a zero-argument callable that transforms) with
    empty caches; None where this version of s2sad has no transform cache to clear."""
    if not clear_s2sad_caches():
        return None
    with pipeline_only():
        seconds, _ = call_timed(probe)
    clear_s2sad_caches()
    return seconds


def median_transform(g=None, args=None, probe=None, repeats: int = 3) -> float | None:
    """The median of `repeats` transform times (of `g` for `args`, or of a case's probe)."""
    times = [probe_seconds(probe) if probe else transform_seconds(g, args) for _ in range(repeats)]
    return None if None in times else statistics.median(times)


def is_refusal(exc) -> bool:
    return isinstance(exc, s2sad.S2SADError)
