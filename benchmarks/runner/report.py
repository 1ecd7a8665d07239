"""The text report: the main table (NumPy mode, jitted, the best of the two over JAX, the
peers), the jit table (against numba.njit of the objective), the parallel=True table when s2sad
takes it, and the one-off costs."""

from __future__ import annotations

from benchmarks.workloads import PEERS

from .builders import PEER_LABEL


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


def render_table(header: list[str], rows: list[list[str]], left: int = 2) -> str:
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]

    def line(cells):
        out = []
        for i, (c, w) in enumerate(zip(cells, widths)):
            out.append(c.ljust(w) if i < left or i == len(cells) - 1 else c.rjust(w))
        return "  ".join(out).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), rule] + [line(r) for r in rows])


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


def status_word(status: str) -> str:
    """A table cell for a status: its first word (the footnotes hold the rest)."""
    return status.split(":")[0]


def jit_cell(r: dict, footnotes: list[str]) -> str:
    """The main table's s2sad jit ∇ cell; a failure's message goes to the footnotes."""
    info = r["jit"]
    status = info["status"]
    if status == "ok" and info.get("median_s") is not None:
        cell = fmt_time(info["median_s"])
        for key in ("check", "vs_numpy"):
            if info.get(key) and not info[key]["ok"]:
                cell += " ✗"
                against = info[key].get("against", "s2sad NumPy mode")
                footnotes.append(
                    f"✗ {r['workload']} {r['size']}: s2sad jit's gradient disagrees with "
                    f"{against}'s (largest error {info[key]['max_rel_err']:.1e} of max|g|)"
                )
        return cell
    if status.startswith("n/a"):
        return "n/a"
    footnotes.append(f"{r['workload']} {r['size']}: s2sad jit {status}")
    return status_word(status)


def best_cell(best: dict) -> str:
    if best.get("jax_ratio") is None:
        return "—"
    return f"{fmt_ratio(best['jax_ratio'])} {'jit' if best['form'] == 'jit' else 'np'}"


def report(results: list[dict], machine: str, plan_notes: list[str]) -> str:
    header = ["workload", "size", "f NumPy", "s2sad ∇", "∇/f", "s2sad jit ∇", "best/JAX"]
    for p in PEERS:
        header += [f"{PEER_LABEL[p]} ∇", f"s2sad/{PEER_LABEL[p]}"]
    header += ["check", "peers", "s2sad"]
    rows, footnotes = [], []
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
            jit_cell(r, footnotes),
            best_cell(r["best"]),
        ]
        for p in PEERS:
            row += list(peer_cell(r["peers"][p], r["size"]))
        peer_checks = [i.get("check") for i in r["peers"].values() if i.get("check")]
        peers_ok = "—" if not peer_checks else ("✓" if all(c["ok"] for c in peer_checks) else "✗")
        row += [mark(s2.get("check")) if ok else "—", peers_ok, "ok" if ok else s2["status"]]
        rows.append(row)
        footnotes += _row_footnotes(r)
    legend = [
        "medians of timed calls after one warm-up call. f NumPy: the NumPy objective; ∇/f: s2sad's",
        "gradient time over it; s2sad jit ∇: s2sad.grad(f, jit='strict'), compiled by Numba (n/a:",
        "the row has no jitted form: a batched jvp or Jacobian); best/JAX: the faster of s2sad ∇",
        "(np) and s2sad jit ∇ (jit) over JAX's time; s2sad/X: s2sad's NumPy-mode gradient time over",
        "X's (above 1: s2sad slower). check: s2sad's gradient against JAX's (else autograd's),",
        "|a-b| <= 1e-6 (|b| + max|b|); peers: every peer against the same reference. missing: not",
        "installed; n/a: not run.",
    ]
    notes = sorted({f"{r['workload']}: {n}" for r in results for n in r["notes"]})
    parts = [machine, "", render_table(header, rows), "", "\n".join(legend)]
    parts += [""] + plan_notes
    if footnotes:
        parts += [""] + footnotes
    if notes:
        parts += ["", "notes:"] + [f"  {n}" for n in notes]
    for part in (report_jit(results), report_parallel(results)):
        if part:
            parts += ["", part]
    parts += ["", report_costs(results), "", report_jit_costs(results)]
    return "\n".join(parts)


def _row_footnotes(r: dict) -> list[str]:
    out = []
    s2 = r["s2sad"]
    if s2["status"] == "ok" and s2.get("check") and not s2["check"]["ok"]:
        out.append(
            f"✗ {r['workload']} {r['size']}: s2sad's gradient disagrees with "
            f"{s2['check']['against']}'s (largest error "
            f"{s2['check']['max_rel_err']:.1e} of max|g|)"
        )
    for p in PEERS:
        info = r["peers"][p]
        if info["status"] == "ok" and info.get("size") != r["size"]:
            out.append(
                f"* {r['workload']} {r['size']}: {PEER_LABEL[p]} ran at "
                f"{info['size']} (its Python loop is slow); s2sad/{PEER_LABEL[p]}"
                " compares s2sad at that size too"
            )
        elif info["status"].startswith("error"):
            out.append(f"{r['workload']} {r['size']}: {PEER_LABEL[p]} {info['status']}")
        elif info.get("check") and not info["check"]["ok"]:
            out.append(
                f"{r['workload']} {r['size']}: {PEER_LABEL[p]} disagrees with "
                f"{info['check']['against']} (max rel err "
                f"{info['check']['max_rel_err']:.1e})"
            )
    return out


def report_costs(results: list[dict]) -> str:
    header = ["workload", "size", "s2sad transform", "s2sad 1st call"] + [
        f"{PEER_LABEL[p]} 1st call" for p in PEERS
    ]
    rows = []
    for r in results:
        s2 = r["s2sad"]
        ok = s2["status"] == "ok"
        row = [
            r["workload"],
            r["size"],
            fmt_time(s2.get("transform_s")) if ok else "—",
            fmt_time(s2.get("first_call_s")) if ok else "—",
        ]
        for p in PEERS:
            info = r["peers"][p]
            row.append(fmt_time(info.get("first_call_s")) if info["status"] == "ok" else "—")
        rows.append(row)
    return "\n".join(
        [
            "one-off costs: s2sad's transform alone (median of 3, caches emptied each time);",
            "first calls, which include the transform, JAX's trace and compile, and the first",
            "touch of freshly allocated memory:",
            "",
            render_table(header, rows),
        ]
    )


def report_jit(results: list[dict]) -> str:
    """The jitted rows of the objectives Numba compiles: numba.njit of the objective against
    s2sad's gradient with jit='strict', and the peers' gradients."""
    rows, marks = [], set()
    for r in results:
        info = r["jit"]
        if not info.get("numba_primal"):
            continue
        ok = info["status"] == "ok" and info.get("median_s") is not None
        f = (info.get("primal") or {}).get("median_s")
        g = info.get("median_s") if ok else None
        row = [r["workload"], r["size"], fmt_time(f), fmt_time(g)]
        row.append(fmt_ratio(g / f if g and f else None))
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
        row += [_marks(info) if ok else "—", "ok" if ok else info["status"]]
        rows.append(row)
    if not rows:
        return ""
    header = ["workload", "size", "f Numba", "s2sad jit ∇", "∇/f"]
    for p in PEERS:
        header += [f"{PEER_LABEL[p]} ∇", f"s2sad/{PEER_LABEL[p]}"]
    header += ["check", "s2sad jit"]
    legend = [
        "objectives numba.njit compiles: f Numba is numba.njit(objective); s2sad jit ∇ is",
        "s2sad.grad(objective, jit='strict'), ∇/f its time over f Numba's (the target: 3x or",
        "less), s2sad/X its time over X's. Peers as in the table above; check: against the",
        "reference and against s2sad's NumPy mode.",
    ]
    if "*" in marks:
        legend.append("* the peer ran at a smaller size; s2sad jit was timed at that size too.")
    if "†" in marks:
        legend.append(
            "† the peer differentiates the vectorised objective (it has no loop version), "
            "at the same size unless marked *."
        )
    return "\n".join([render_table(header, rows), ""] + legend)


def report_parallel(results: list[dict]) -> str:
    """s2sad jit with parallel=True (Numba's prange) on the workloads with a loop."""
    rows = []
    threads = None
    for r in results:
        par = r["jit"].get("parallel")
        if par is None:
            continue
        ok = par["status"] == "ok" and par.get("median_s") is not None
        threads = par.get("threads", threads)
        one = (par.get("threads_1") or {}).get("median_s")
        rows.append(
            [
                r["workload"],
                r["size"],
                fmt_time(r["jit"].get("median_s")),
                fmt_time(one) if ok else "—",
                fmt_time(par.get("median_s")) if ok else "—",
                fmt_ratio(par.get("ratio_to_1_thread")) if ok else "—",
                fmt_ratio(par.get("ratio_to_serial")) if ok else "—",
                _marks(par) if ok else "—",
                "ok" if ok else par["status"],
            ]
        )
    if not rows:
        return ""
    n = threads or 2
    header = ["workload", "size", "jit ∇", "parallel 1T", f"parallel {n}T"]
    header += [f"{n}T/1T", f"{n}T/jit", "check", "parallel"]
    legend = [
        f"s2sad.grad(f, jit='strict', parallel=True) on the workloads with a loop: at 1 and {n}",
        "Numba threads (numba.set_num_threads around each call; everything else runs on one",
        f"thread). jit ∇: the serial jitted gradient; {n}T/1T: parallel at {n} threads over",
        f"parallel at 1 (below 1: the threads help); {n}T/jit: over the serial jitted gradient;",
        "check: against the reference and against s2sad's NumPy mode.",
    ]
    return "\n".join([render_table(header, rows), ""] + legend)


def _marks(info: dict) -> str:
    """✓ when the row agrees with the reference and with NumPy mode (either may be absent)."""
    checks = [info[k] for k in ("check", "vs_numpy") if info.get(k)]
    if not checks:
        return "—"
    bad = [c for c in checks if not c["ok"]]
    return "✓" if not bad else f"✗ ({max(c['max_rel_err'] for c in bad):.1e})"


def report_jit_costs(results: list[dict]) -> str:
    rows = []
    for r in results:
        info = r["jit"]
        if info["status"] == "n/a":
            continue
        ok = info["status"] == "ok" and info.get("median_s") is not None
        par = info.get("parallel") or {}
        rows.append(
            [
                r["workload"],
                r["size"],
                fmt_time(info.get("transform_s")) if ok else "—",
                fmt_time(info.get("numba_compile_s")) if ok else "—",
                fmt_time(info.get("numba_primal_compile_s")),
            ]
            + ([fmt_time(par.get("compile_s"))] if any(_has_par(x) for x in results) else [])
        )
    if not rows:
        return ""
    header = ["workload", "size", "s2sad transform", "Numba compile ∇", "Numba compile f"]
    if any(_has_par(x) for x in results):
        header.append("parallel: transform + compile")
    return "\n".join(
        [
            "jit one-off costs: s2sad's transform for jit (median of 3), then Numba compiling the",
            "gradient on its first call (first call minus transform minus a timed call; the",
            "first jitted workload also compiles s2sad's Numba helpers, which the later ones",
            "reuse), and Numba compiling f where it compiles (from a reused jit cache both are",
            "mostly disk reads, and the first call reads the transform from disk too):",
            "",
            render_table(header, rows),
        ]
    )


def _has_par(r: dict) -> bool:
    return "parallel" in r["jit"]
