"""The benchmark runner (benchmarks/runner/) on smoke-size cases, with no peer installed as far
as it knows (every peer "missing"): the main table's jitted column and best-of column, a
refusal in the jitted column, the jit one-off costs, the parallel table (only where s2sad takes
parallel=True) and --quick's selection. No timing is asserted, only what the rows hold."""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path

import numpy as np
import pytest

import s2sad

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.runner import builders, report  # noqa: E402
from benchmarks.runner.cases import best_of, run_case  # noqa: E402
from benchmarks.runner.jit_rows import numba_threads  # noqa: E402
from benchmarks.runner.plan import Plan, jit_cache, make_plan, select  # noqa: E402
from benchmarks.workloads import all_cases  # noqa: E402
from benchmarks.workloads.common import Case  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaWarning")

SMOKE = {}
for _case in all_cases("smoke"):
    SMOKE.setdefault(_case.workload, _case)
NO_PEERS: dict = {}  # load_peers()'s answer where none is installed


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    pytest.importorskip("numba")
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path))
    # as run.py runs the cases: what was alive before them is frozen, and the plans keep what
    # each case leaves frozen (keep_frozen), so the collections between rounds look at the
    # case's own objects, not at a suite worker's millions (seconds a full collection)
    gc.freeze()
    yield
    gc.unfreeze()


def _plan(plan: Plan) -> Plan:
    plan.keep_frozen = True  # (run.py's; the fixture above unfreezes)
    return plan


def test_an_array_row_has_a_jitted_gradient_and_the_best_of_both():
    """stencil, an array workload without an f Numba row (Case.jit is False): its gradient
    under jit='strict' is timed, agrees with NumPy mode, and the best form is the faster."""
    row = run_case(SMOKE["stencil"], NO_PEERS, _plan(Plan("smoke")))
    jit = row["jit"]
    assert jit["status"] == "ok" and jit["median_s"] > 0
    assert jit["vs_numpy"]["ok"], jit["vs_numpy"]
    assert not jit["numba_primal"] and "primal" not in jit  # no f Numba row for it
    assert jit["transform_s"] > 0 and jit["numba_compile_s"] >= 0
    best = row["best"]
    assert best["median_s"] == min(row["s2sad"]["median_s"], jit["median_s"])
    assert best["form"] == ("jit" if jit["median_s"] < row["s2sad"]["median_s"] else "numpy")
    assert "jax_ratio" not in best  # JAX missing: no ratio
    cost = row["run_cost"]  # the runner's own time, by phase (not a reported number)
    assert {"first call: s2sad-jit", "timed x3: s2sad-jit", "checks", "gc between rounds"} <= set(
        cost
    )
    assert all(c["wall_s"] >= 0 and c["cpu_s"] >= 0 for c in cost.values())
    text = report.report([row], "machine", [])
    header = text.splitlines()[2]
    assert "s2sad jit ∇" in header and "best/JAX" in header
    assert "Numba compile ∇" in text  # the jit one-off costs cover the array row
    assert "parallel 1T" not in text
    # a jitted gradient that disagrees with NumPy mode is marked, and never the best form
    row["jit"]["vs_numpy"] = {"ok": False, "max_rel_err": 0.5}
    row["jit"]["median_s"] = row["s2sad"]["median_s"] / 10
    assert best_of(row)["form"] == "numpy"
    text = report.report([row], "machine", [])
    assert "✗ stencil N=5: s2sad jit's gradient disagrees with s2sad NumPy mode's" in text


def _einsum_objective(x):
    return np.einsum("ij,ij->", x, x)


def test_a_refused_jitted_gradient_is_reported_as_unsupported():
    """np.einsum's gradient has no Numba form: jit='strict' refuses it, and the main table says
    `unsupported` with the message in a footnote, while NumPy mode is still timed."""
    case = Case(
        workload="einsum",
        family="test",
        size={"n": 3},
        make_inputs=lambda n: {"x": np.arange(1.0, n * n + 1).reshape(n, n)},
        numpy_f=_einsum_objective,
        wrt=("x",),
        peers={p: "n/a: test" for p in ("jax", "torch", "autograd")},
    )
    row = run_case(case, NO_PEERS, _plan(Plan("smoke")))
    assert row["s2sad"]["status"] == "ok"
    assert row["jit"]["status"].startswith("unsupported: ")
    assert row["best"]["form"] == "numpy"
    text = report.report([row], "machine", [])
    assert "einsum n=3: s2sad jit unsupported: " in text
    table_row = next(line for line in text.splitlines() if line.startswith("einsum "))
    assert " unsupported " in table_row


def test_a_batched_jacobian_row_has_no_jitted_form():
    # ht's row is one batched jvp, which has no jitted form; ba's is a vjp, which has one
    assert not builders.has_jit_gradient(SMOKE["ht"])
    assert builders.has_jit_gradient(SMOKE["ba"]) and builders.has_jit_gradient(SMOKE["gmm"])
    assert builders.has_jit_gradient(SMOKE["ba-perobs"])


def _grad_without_parallel(monkeypatch):
    real = s2sad.grad

    def grad(f=None, wrt=0, *, jit=False, target="cpu", has_aux=False):
        return real(f, wrt, jit=jit, target=target, has_aux=has_aux)

    monkeypatch.setattr(s2sad, "grad", grad)


def test_no_parallel_table_where_s2sad_lacks_the_keyword(monkeypatch):
    _grad_without_parallel(monkeypatch)
    assert not builders.accepts_parallel()
    plan, notes = make_plan("smoke", [])
    plan = _plan(plan)
    assert not plan.parallel and any("does not take it" in n for n in notes)
    row = run_case(SMOKE["stencil-loops"], NO_PEERS, plan)
    assert "parallel" not in row["jit"]
    text = report.report([row], "machine", notes)
    assert "parallel 1T" not in text and "parallel: transform" not in text


def test_the_parallel_table_where_s2sad_takes_the_keyword(monkeypatch):
    """A stand-in s2sad.grad that takes parallel= (and compiles the serial gradient): the
    runner asks for parallel=True on a case with a loop and times it at 1 and 2 threads."""
    real = s2sad.grad
    asked = []

    def grad(f=None, wrt=0, *, jit=False, target="cpu", has_aux=False, parallel=False):
        asked.append(parallel)
        return real(f, wrt, jit=jit, target=target, has_aux=has_aux)

    monkeypatch.setattr(s2sad, "grad", grad)
    assert builders.accepts_parallel()
    plan, notes = make_plan("smoke", [])
    plan = _plan(plan)
    assert plan.parallel
    case = SMOKE["stencil-loops"]
    assert case.parallel
    row = run_case(case, NO_PEERS, plan)
    assert True in asked
    par = row["jit"]["parallel"]
    assert par["status"] == "ok", par
    threads = min(2, numba_threads())
    assert par["threads"] == threads
    assert {k for k in par if k.startswith("threads_")} == {f"threads_{n}" for n in {1, threads}}
    assert par["ratio_to_1_thread"] > 0 and par["ratio_to_serial"] > 0
    assert par["vs_numpy"]["ok"], par["vs_numpy"]
    text = report.report([row], "machine", notes)
    assert f"parallel {threads}T" in text and "parallel: transform + compile" in text
    # a case without a loop is not asked
    asked.clear()
    row = run_case(SMOKE["stencil"], NO_PEERS, plan)
    assert "parallel" not in row["jit"] and True not in asked


def test_quick_runs_the_issue_targets_and_only_names_the_rest():
    quick = all_cases("quick")
    default = {c.workload for c in select(quick, None, "quick")}
    targets = {"gmm", "lstm", "mlp", "stencil", "ode", "kmeans", "ba", "ba-perobs"}
    assert (
        targets | {"gmm-loops", "ode-euler", "linrec", "stencil-loops", "conv1d-loops"} <= default
    )
    assert not default & {"lse", "llsq", "det", "ht", "ht-complicated", "particle", "saddle"}
    assert {c.workload for c in select(quick, "gradbench", "quick")} >= {"lse", "ht", "saddle"}
    assert {c.workload for c in select(all_cases("smoke"), None, "smoke")} == set(SMOKE)
    # the RK4 ODE over an array state and k-means are rows compared with JAX
    for name in ("ode", "kmeans"):
        case = next(c for c in quick if c.workload == name)
        assert callable(case.peers["jax"]) and builders.has_jit_gradient(case)


def test_the_jit_cache_holds_jaxs_and_the_objectives_compiles_unless_set(tmp_path, monkeypatch):
    """JAX's persistent compilation cache (every compile kept) and numba.njit's cache of the
    objectives go beside s2sad's jitted code, so a reused cache holds all three; a directory
    the user set is kept."""
    made = ("NUMBA_CACHE_DIR", "JAX_COMPILATION_CACHE_DIR")
    for var in made + ("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",):
        monkeypatch.setenv(var, "")  # (restored afterwards)
        monkeypatch.delenv(var)
    note = jit_cache("quick", fresh=False)
    assert note.startswith("jit cache: S2SAD_CACHE_DIR=")
    assert [os.environ[v] for v in made] == [str(tmp_path / "numba-primal"), str(tmp_path / "jax")]
    assert os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] == "0"
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "mine"))
    jit_cache("quick", fresh=False)
    assert os.environ["JAX_COMPILATION_CACHE_DIR"] == str(tmp_path / "mine")
