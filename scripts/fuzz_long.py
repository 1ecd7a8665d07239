"""Long fuzzing run of s2sad: thousands of random programs, with a summary.

    python scripts/fuzz_long.py --count 3000                 # seeds 100000..102999, all cores
    python scripts/fuzz_long.py --count 500 --start 0 --jobs 1
    python scripts/fuzz_long.py --count 3000 --save fuzz-failures   # one report file per failure
    python scripts/fuzz_long.py --seed 4711                  # one program: source and outcome
    python scripts/fuzz_long.py --count 500 --no-jit --extras none  # the older generator's programs

Each program is generated from its seed by tests/fuzzgen.py and checked as in tests/test_fuzz.py:
`grad` for scalar outputs, `vjp` with a random seed and `jvp` with a random tangent against
central finite differences, and `jacobian` in forward and reverse mode (single outputs of at
most fuzzgen.JACOBIAN_MAX_OUT elements) against finite differences, its reverse-mode rows also
against vjp pullbacks. `--modes` picks a subset. With `--jit` (the default) every program is also
differentiated with `jit=True` (grad, or one vjp pullback for array outputs), which must agree with
Python mode to 1e-10 relative whether Numba compiled it or it fell back to Python with a
JitFallbackWarning. `--extras` picks the gated constructs of tests/fuzzgen.py (aliases and views
written in place, repeated-index writes, closures and nested defaults, factories, branches in
loops assigning names read after them (loop-branch); all by default, `none` for the programs
older generators wrote). The summary counts correct programs,
clean S2SADError refusals by class and by mode, failures grouped by signature (with example seeds
to rerun with --seed) and by gated construct, jit outcomes, and test points rejected near kinks.
Exit status 1 when any program failed.
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing as mp
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

# the jit check is about the numbers, not their speed: LLVM at -O0 halves Numba's compile time
# (as in tests/conftest.py); set NUMBA_OPT to check optimised code
os.environ.setdefault("NUMBA_OPT", "0")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import fuzzgen  # noqa: E402


def _signature(mode: str, msg: str) -> str:
    """A short key grouping failures that are probably the same bug."""
    lines = [line for line in msg.splitlines() if line.strip()]
    if msg.startswith("exception"):
        key = lines[-1]
    else:
        key = lines[0]
    key = re.sub(r"/\S+:\d+: ", "", key)
    key = re.sub(r"'[A-Za-z_][A-Za-z_0-9]*'", "'NAME'", key)
    key = re.sub(r"\(\d[\d, ]*\)", "(SHAPE)", key)
    return f"{mode}: {key[:110]}"


_WORKDIR = None


def _commit() -> str:
    """The checked-out commit, marked when the working tree has changes."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + (" (with uncommitted changes)" if dirty else "")


def _init():
    global _WORKDIR
    _WORKDIR = tempfile.mkdtemp(prefix="s2sad-fuzz-")


_MODES = fuzzgen.MODES
_EXTRAS = fuzzgen.DEFAULT_EXTRAS
_JIT = True
_GATED = {  # features of the gated constructs, for grouping failures by construct
    "alias-inplace": "alias",
    "view-inplace": "view",
    "write-repeated-index": "repeated index",
    "closure-closure": "closure",
    "closure-default": "nested default",
    "factory": "factory",
}


def _one(seed: int):
    t0 = time.perf_counter()
    try:
        out = fuzzgen.check_program(seed, _WORKDIR, modes=_MODES, extras=_EXTRAS, jit=_JIT)
    except AssertionError as exc:  # the generator wrote an invalid program
        return dict(seed=seed, status="generator-error", report=str(exc), time=0.0)
    except Exception:  # the harness itself broke
        return dict(seed=seed, status="harness-error", report=traceback.format_exc(), time=0.0)
    return dict(
        seed=seed,
        status=out.status,
        refusals=out.refusals,
        failures=[(m, _signature(m, msg)) for m, msg in out.failures],
        detail=out.detail,
        report=out.report() if out.status == "fail" else "",
        features=sorted(out.program.features),
        out_kind=out.program.out_kind,
        jit=dict(out.jit),
        time=time.perf_counter() - t0,
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--count", type=int, default=3000, help="number of programs (default 3000)")
    ap.add_argument("--start", type=int, default=100_000, help="first seed (default 100000)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    ap.add_argument("--save", metavar="DIR", help="write one report per failing program here")
    ap.add_argument("--seed", type=int, help="check one seed and print its program and outcome")
    ap.add_argument("--quiet", action="store_true", help="no progress line")
    ap.add_argument(
        "--modes",
        default=",".join(fuzzgen.MODES),
        help=f"comma-separated modes to check (default {','.join(fuzzgen.MODES)})",
    )
    ap.add_argument(
        "--jit",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also check jit=True against Python mode (default on; --no-jit skips it)",
    )
    ap.add_argument(
        "--extras",
        default=",".join(fuzzgen.EXTRAS),
        help=f"gated constructs to generate, comma-separated, or 'none' "
        f"(default {','.join(fuzzgen.EXTRAS)})",
    )
    args = ap.parse_args(argv)
    global _MODES, _EXTRAS, _JIT
    _MODES = tuple(m for m in args.modes.split(",") if m)
    unknown = set(_MODES) - set(fuzzgen.MODES)
    if unknown:
        ap.error(f"unknown modes {sorted(unknown)}; choose from {fuzzgen.MODES}")
    _EXTRAS = frozenset(e for e in args.extras.split(",") if e and e != "none")
    if _EXTRAS - set(fuzzgen.EXTRAS):
        ap.error(
            f"unknown extras {sorted(_EXTRAS - set(fuzzgen.EXTRAS))}; choose from {fuzzgen.EXTRAS}"
        )
    _JIT = args.jit

    if args.seed is not None:
        _init()
        out = fuzzgen.check_program(args.seed, _WORKDIR, modes=_MODES, extras=_EXTRAS, jit=_JIT)
        print(out.report())
        for mode, (cls, msg) in out.refusals.items():
            print(f"{mode}: refused with {cls}: {msg}")
        return 1 if out.status == "fail" else 0

    seeds = range(args.start, args.start + args.count)
    commit = _commit()
    t0 = time.time()
    results = []
    out_dir = Path(args.save) if args.save else None
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)

    def collect(i, r):
        results.append(r)
        if r["status"] in ("fail", "harness-error", "generator-error"):
            # as they come, so that a long run shows its failures before it ends
            sigs = "; ".join(sorted({sig for _, sig in r.get("failures", [])})) or r["status"]
            print(f"  seed {r['seed']}: {sigs}", file=sys.stderr)
            if out_dir is not None:
                (out_dir / f"seed{r['seed']}.txt").write_text(r["report"])
        if not args.quiet and (i + 1) % 100 == 0:
            print(f"  {i + 1}/{args.count} ({time.time() - t0:.0f}s)", file=sys.stderr)

    if args.jobs > 1:
        with mp.get_context("fork").Pool(
            args.jobs, initializer=_init, maxtasksperchild=200
        ) as pool:
            for i, r in enumerate(pool.imap_unordered(_one, seeds, chunksize=4)):
                collect(i, r)
    else:
        _init()
        for i, seed in enumerate(seeds):
            collect(i, _one(seed))
    elapsed = time.time() - t0
    results.sort(key=lambda r: r["seed"])

    status = collections.Counter(r["status"] for r in results)
    refusals = collections.Counter()
    refusal_modes = collections.Counter()
    refusal_msgs = collections.Counter()
    failures = collections.defaultdict(list)
    rejects = collections.Counter()
    features = collections.Counter()
    jit = collections.Counter()
    by_construct = collections.defaultdict(list)
    for r in results:
        for inst, how in r.get("jit", {}).items():
            jit[(inst, how)] += 1
        if r["status"] == "fail":
            gated = sorted({_GATED[f] for f in r.get("features", []) if f in _GATED})
            by_construct[", ".join(gated) or "none of them"].append(r["seed"])
        for mode, (cls, msg) in r.get("refusals", {}).items():
            refusals[cls] += 1
            refusal_modes[mode] += 1
            refusal_msgs[(cls, re.sub(r"/\S+:\d+: ", "", msg)[:100])] += 1
        for mode, sig in r.get("failures", []):
            failures[sig].append(r["seed"])
        if r["status"] == "rejected":
            rejects[re.sub(r"[\d.e+-]+$", "", r["detail"])] += 1
        features.update(r.get("features", []))

    print(f"s2sad fuzz: {len(results)} programs, seeds {args.start}..{args.start + args.count - 1}")
    print(f"modes: {', '.join(_MODES)}{', jit' if _JIT else ''}")
    print(f"extras: {', '.join(sorted(_EXTRAS)) or 'none'}")
    print(f"command: {' '.join(['python', 'scripts/fuzz_long.py'] + sys.argv[1:])}")
    print(f"commit: {commit} (at the start)")
    print(f"time: {elapsed:.0f}s with {args.jobs} job(s)")
    print(
        "outcome: "
        + ", ".join(
            f"{k} {status.get(k, 0)}"
            for k in ("ok", "refused", "fail", "rejected", "generator-error", "harness-error")
        )
    )
    print("  ok: every derivative matched finite differences")
    print("  refused: a clean S2SADError in some mode, every other mode correct")
    if refusals:
        print("refusals by class (each mode counted separately):")
        for cls, n in refusals.most_common():
            print(f"  {n:5d} {cls}")
        print("refusals by mode:")
        for mode, n in refusal_modes.most_common():
            print(f"  {n:5d} {mode}")
        print("most common refusal messages:")
        for (cls, msg), n in refusal_msgs.most_common(15):
            print(f"  {n:5d} {cls}: {msg}")
    if _JIT:
        print("jit=True against Python mode (programs; `_b`: a factory's second instance):")
        for inst in ("", "_b"):
            counts = [f"{how} {jit[(inst, how)]}" for how in fuzzgen.JIT_OUTCOMES]
            if inst == "" or any(jit[(inst, how)] for how in fuzzgen.JIT_OUTCOMES):
                print(f"  jit{inst}: " + ", ".join(counts))
        print("  compiled-agree: Numba compiled it; fallback-agree: JitFallbackWarning, Python ran")
    if failures:
        print("failing programs by the gated constructs they hold (count, seeds):")
        for key, seeds_ in sorted(by_construct.items(), key=lambda kv: -len(kv[1])):
            print(f"  {len(seeds_):5d} {key}: {', '.join(map(str, seeds_[:12]))}")
        print("failures by signature (program count, example seeds):")
        for sig, seeds_ in sorted(failures.items(), key=lambda kv: -len(kv[1])):
            print(f"  {len(seeds_):5d} {sig}")
            print(f"        seeds {', '.join(map(str, seeds_[:8]))}")
    if rejects:
        print("test points rejected (no point away from kinks/overflow found):")
        for why, n in rejects.most_common():
            print(f"  {n:5d} {why}")
    for r in results:
        if r["status"] in ("generator-error", "harness-error"):
            print(f"{r['status']} at seed {r['seed']}:\n{r['report'][:3000]}")
    if out_dir is not None:
        print(f"failure reports written to {out_dir}/")
    return 1 if status.get("fail") or status.get("harness-error") else 0


if __name__ == "__main__":
    sys.exit(main())
