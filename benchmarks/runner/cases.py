"""One case, one size: the NumPy primal, s2sad's derivative in NumPy mode and jitted
(jit_rows.py), and each peer's, timed together in interleaved rounds and checked against one
reference."""

from __future__ import annotations

import traceback

import s2sad

from benchmarks.workloads import PEERS
from benchmarks.workloads.common import size_label

from .builders import as_float_arrays, build_s2sad, has_jit_gradient, peer_builder
from .builders import s2sad_builder
from .checks import Reference, check
from .cost import Ledger
from .jit_rows import JitRun
from .timing import Entry, first_line, is_refusal, median_transform, stats, time_interleaved
from .timing import warm_up

# (budget in seconds, min reps, max reps) of each entry's timed calls
BUDGETS = {"smoke": (0.05, 3, 3), "quick": (0.25, 3, 10), "full": (2.5, 5, 30)}


def run_case(case, available, plan) -> dict:
    """The row of `case` (a dict, as results.json holds it), timed as `plan` says (plan.py)."""
    budget, min_reps, max_reps = BUDGETS[plan.mode]
    ledger = Ledger()
    with ledger.phase("setup: inputs"):
        inputs = case.inputs()
    row = {"workload": case.workload, "size": case.size_label, "notes": list(case.notes)}
    args = list(inputs.values())
    primal = Entry("primal", lambda: case.numpy_f(*args))
    with ledger.phase("setup: s2sad (transform x3)"):
        s2, s2sad_entries, s2sad_fetch = _s2sad_row(case, inputs)
    with ledger.phase("setup: peers"):
        peer_info, peer_entries, peer_fetch, peer_size = _peer_rows(case, available, s2sad_entries)

    jit = None
    if has_jit_gradient(case):
        with ledger.phase("setup: jit rows (transform x3)"):
            jit = JitRun(case, available, peer_entries, peer_size, plan.parallel and case.parallel)
    entries = [primal] + list(s2sad_entries.values()) + list(peer_entries.values())
    if jit is not None:
        entries += jit.entries()
    for e in entries:
        warm_up(e)
        ledger.add(f"first call: {e.key}", e.first_s, e.first_cpu_s)
    main_s2sad = s2sad_entries.get(case.size_label)
    if main_s2sad is not None:
        s2["first_call_s"] = main_s2sad.first_s
        if is_refusal(main_s2sad.exc):  # refused at the first call
            s2["status"] = "unsupported: " + first_line(str(main_s2sad.exc))
        elif main_s2sad.error:
            s2["status"] = "error: " + main_s2sad.error
            s2["traceback"] = main_s2sad.trace
    time_interleaved(entries, budget, min_reps, max_reps, ledger, plan.keep_frozen)
    for e in entries:
        ledger.add(f"timed x{len(e.times)}: {e.key}", sum(e.times), e.loop_cpu_s)
    with ledger.phase("checks"):
        # gradients from the warm-up calls, for the checks
        known = {}
        for peer, e in peer_entries.items():
            if e.error is None:
                try:
                    known[(peer, size_label(peer_size[peer]))] = peer_fetch[peer](e.result)
                except Exception:
                    pass
        reference = Reference(case, available, known)

        row["primal"] = stats(primal)
        if primal.error:
            row["primal"]["status"] = "error: " + primal.error
        if main_s2sad is not None and main_s2sad.error is None:
            s2.update(stats(main_s2sad))
            if "transform_s" not in s2 and s2.get("median_s") is not None:
                s2["transform_s"] = max(main_s2sad.first_s - s2["median_s"], 0.0)
            got = check(s2sad_fetch(main_s2sad.result), reference, case.size)
            if got is not None:
                s2["check"] = got
        row["s2sad"] = s2
        numpy_mode = None
        if main_s2sad is not None and main_s2sad.error is None:
            numpy_mode = s2sad_fetch(main_s2sad.result)

        for peer, e in peer_entries.items():
            info = peer_info[peer]
            if e.error is not None:
                info["status"] = "error: " + e.error
                continue
            info.update(stats(e))
            info["first_call_s"] = e.first_s
            lab = size_label(peer_size[peer])
            s2e = s2sad_entries.get(lab)
            if s2e is not None and s2e.median is not None and e.median:
                info["s2sad_ratio"] = s2e.median / e.median
                info["s2sad_at_size_s"] = s2e.median
            if (peer, lab) in known:
                got = check(known[(peer, lab)], reference, peer_size[peer], exclude=peer)
                if got is not None:
                    info["check"] = got
        row["peers"] = peer_info
        row["jit"] = jit.summary(reference, numpy_mode) if jit is not None else {"status": "n/a"}
        row["jit"]["numba_primal"] = bool(case.jit)
        row["best"] = best_of(row)
    row["run_cost"] = ledger.as_dict()
    return row


def _s2sad_row(case, inputs):
    """s2sad's NumPy-mode row: its transform time (median of 3, caches emptied) and its
    entries (at the case's size; _peer_rows adds a slow peer's smaller size)."""
    s2 = {"status": "ok"}
    entries: dict[str, Entry] = {}
    fetch = as_float_arrays
    try:
        if "s2sad" in case.build:  # not a gradient: the case builds the row and its probe
            run, fetch, probe = case.build["s2sad"](case.numpy_f, inputs, case.wrt)
            transform = median_transform(probe=probe)
        else:
            g = s2sad.grad(case.numpy_f, wrt=case.wrt)
            transform = median_transform(g, list(inputs.values()))
            run, _ = build_s2sad(case.numpy_f, inputs, case.wrt)
        if transform is not None:
            s2["transform_s"] = transform
        entries[case.size_label] = Entry("s2sad", run)
    except s2sad.S2SADError as exc:
        s2["status"] = "unsupported: " + first_line(str(exc))
    except Exception as exc:  # not one of s2sad's own errors: a bug
        s2["status"] = f"error: {type(exc).__name__}: {first_line(str(exc))}"
        s2["traceback"] = traceback.format_exc()
    return s2, entries, fetch


def _peer_rows(case, available, s2sad_entries):
    """The peers, at the case's size or at a smaller one (then s2sad there too, for a
    like-for-like ratio)."""
    info: dict[str, dict] = {}
    entries: dict[str, Entry] = {}
    fetches, sizes = {}, {}
    for peer in PEERS:
        spec = case.peers.get(peer, "n/a")
        if not available.get(peer):
            info[peer] = {"status": "missing"}
            continue
        if isinstance(spec, str):
            info[peer] = {"status": spec}
            continue
        size = case.reduced.get(peer, case.size)
        sizes[peer] = size
        info[peer] = {"status": "ok", "size": size_label(size)}
        try:
            run, fetch = peer_builder(case, peer)(spec(), case.inputs(size), case.wrt)
        except Exception as exc:
            info[peer] = {"status": f"error: {type(exc).__name__}: {first_line(str(exc))}"}
            continue
        entries[peer] = Entry(peer, run)
        fetches[peer] = fetch
        if size != case.size and s2sad_entries and size_label(size) not in s2sad_entries:
            run, _ = s2sad_builder(case)(case.numpy_f, case.inputs(size), case.wrt)
            s2sad_entries[size_label(size)] = Entry(f"s2sad@{size_label(size)}", run)
    return info, entries, fetches, sizes


def best_of(row: dict) -> dict:
    """s2sad's faster form at the case's size (NumPy mode or jit="strict", each only if it
    agrees with the reference, if any, and the jitted one with NumPy mode) and its time over
    JAX's at that size."""
    forms = []
    for form, info in (("numpy", row["s2sad"]), ("jit", row["jit"])):
        ok = info.get("status") == "ok" and info.get("median_s") is not None
        if ok and all((info.get(k) or {}).get("ok", True) for k in ("check", "vs_numpy")):
            forms.append((info["median_s"], form))
    if not forms:
        return {"status": "none"}
    seconds, form = min(forms)
    best = {"status": "ok", "form": form, "median_s": seconds}
    jax = row["peers"].get("jax", {})
    if jax.get("status") == "ok" and jax.get("size") == row["size"] and jax.get("median_s"):
        best["jax_ratio"] = seconds / jax["median_s"]
    return best
