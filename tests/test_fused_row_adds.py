"""An adjoint's add into a slice of a gradient made before the fused run (RK4's `add_at(dy2,
slice(None, -1, None), dz_item3)`, `dy2` carried across the steps) joins the run when nothing the
run reads may share the gradient's memory: `unbroadcast(g, x)` is `g` or a sum of it, never a
view of `x`, and `as_accumulator` makes a new array, so `dy2` is no longer taken to share the
state `y2` the run reads through its views. An accumulator that may share memory with what the
run reads stays outside it (unfused, same numbers)."""

import ast
import textwrap

import numpy as np
import pytest

import s2sad
from benchmarks.gradbench.evals import ode
from conftest import _fd
from s2sad.pipeline.fusion import fuse
from s2sad.pipeline.fusion.remat import reaching
from s2sad.pipeline.fusion.row_adds import sharing

numba = pytest.importorskip("numba")

pytestmark = pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaWarning")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))


def shifted_product(x):  # both slices of the carried state are added into its gradient
    y = x * 0.5
    for _ in range(3):
        z = np.zeros_like(y)
        z[1:] = x[1:] * y[:-1] + y[1:]
        y = y + 0.3 * z
    return np.sum(y * y)


@pytest.mark.parametrize(
    "f, args",
    [(ode.ode_last, (np.linspace(0.3, 1.2, 9), 5)), (shifted_product, (np.linspace(0.2, 0.9, 7),))],
)
def test_gradients_match_finite_differences_and_python(f, args):
    python = s2sad.grad(f)(*args)
    jitted = s2sad.grad(f, jit="strict")(*args)
    np.testing.assert_allclose(python, _fd(f, args, 0, 1e-6), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(jitted, python, rtol=1e-12, atol=1e-15)


def test_the_rk4_step_adds_into_the_carried_gradient_inside_its_fused_loop():
    g = s2sad.grad(ode.ode_last, jit="strict")
    g(np.linspace(0.3, 1.2, 9), 5)
    adjoint = s2sad.source(g).split("# adjoint sweep:")[1]
    fused, unfused = adjoint.split("add_at(dy2, slice(None, -1, None), dz_item3)")[0].rsplit(
        "else:", 1
    )
    assert "dy2_view[i0] += dz_item3_i" in fused.rsplit("for i0 in", 1)[1]
    assert "dz_item3 = unbroadcast(" in unfused  # the add itself is in the unfused branch only


def _body(source: str) -> list[ast.stmt]:
    return ast.parse(textwrap.dedent(source)).body


def test_sharing_follows_values_not_shapes():
    links = sharing(_body("""
            d = unbroadcast(g, y)
            e = as_accumulator(d, y)
            v = y[:-1]
            w = helper(d, v)
            """))
    assert reaching({"d"}, links) == {"d", "g", "w", "v", "y"}  # through helper(d, v)
    assert reaching({"e"}, links) == {"e"}
    assert "d" not in reaching({"y"}, sharing(_body("d = unbroadcast(g, y)\nv = y[:-1]")))


RANKS = {"g": 1, "u": 1, "v": 1, "w": 1, "a": 1, "y": 1, "s": 0}


def _fused(source: str) -> str:
    stmts = _body(source)

    def rank_of(node):
        if isinstance(node, ast.Name):
            return RANKS.get(node.id)
        return None

    [out] = fuse([stmts], rank_of, [], set(RANKS) | {"helper"})
    return ast.unparse(ast.fix_missing_locations(ast.Module(out, [])))


def test_an_accumulator_that_may_share_what_the_run_reads_stays_outside():
    apart = _fused("""
        a = np.zeros_like(y)
        u = g * w
        v = u * w
        add_at(a, slice(1, None, None), v)
        """)
    assert "a_view[i0] += v_i" in apart
    shared = _fused("""
        a = helper(w)
        u = g * w
        v = u * w
        add_at(a, slice(1, None, None), v)
        """)
    assert "a_view" not in shared and shared.count("add_at(a,") == 1
    fused_branch = shared.split("else:")[0]
    assert "add_at" not in fused_branch and "for i0 in" in fused_branch
