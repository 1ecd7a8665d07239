"""The first call's fused guards pass where the shapes are consistent (pipeline/fusion/extents.py):
a run joins statements over one shape alone, so no guard of a jitted derivative fails on the
arrays it was written for. A failing guard sends the call, and the later ones of those shapes, to
code compiled a second time (GMM's gradient, its fused runs joining arrays of lengths d and
d(d-1)/2 and its K components with its n points, compiled twice: 52 s of CPU for 39).

The benchmark workloads and the jit corpus run in Python, each guard evaluated as compiled code
evaluates it (tests/guard_verdicts.py): no Numba compile. GMM runs at sizes where d, d(d-1)/2, K
and n all differ (at its smoke size d = d(d-1)/2 = 3 hides the first)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import s2sad
from guard_verdicts import guard_verdicts
from test_jit_fuse import fd_grad

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.runner.builders import build_s2sad_jit  # noqa: E402
from benchmarks.workloads import all_cases, gmm  # noqa: E402

pytest.importorskip("numba")
import test_jit_corpus as corpus  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaWarning")


def _failed(verdicts) -> list[str]:
    return [line.strip() for line, passed in verdicts if not passed]


_PROMOTED = pytest.mark.xfail(
    strict=True, reason="a keepdims value read through promoted() is planned at the wrong shape"
)


def _workloads():
    cases = all_cases("smoke")
    seen, out = set(), []
    for case in cases:
        if case.workload not in seen:
            seen.add(case.workload)
            marks = _PROMOTED if case.workload == "mlp" else ()
            out.append(pytest.param(case, case.inputs(), id=case.workload, marks=marks))
    for name, f, make in (
        ("gmm", gmm.gmm_objective, gmm.make_inputs),
        ("gmm-loops", gmm.gmm_loops, gmm.make_loop_inputs),
    ):
        case = next(c for c in cases if c.workload == name)
        assert case.numpy_f is f
        out.append(pytest.param(case, make(2, 5, 7), id=f"{name}-d2-K5-n7"))
    return out


@pytest.mark.parametrize("case, inputs", _workloads())
def test_benchmark_workloads_pass_their_guards(case, inputs, monkeypatch):
    if "s2sad-jit" in case.build:  # BA: its own builder (Jacobian blocks)
        run, _, _ = case.build["s2sad-jit"](case.numpy_f, inputs, case.wrt)
    else:
        _, run, _ = build_s2sad_jit(case.numpy_f, inputs, case.wrt)
    try:
        verdicts = guard_verdicts(run, monkeypatch)
    except s2sad.S2SADError:
        pytest.skip("not transformed with jit")
    assert _failed(verdicts) == []
    if case.workload in ("gmm", "ba", "stencil", "mlp", "lstm"):
        assert verdicts  # they fuse (the check saw their guards)


def _corpus():
    """The corpus, less the cases broadcasting along axes of length 1 that only the arrays
    have (`(3, 1) * (2, 3, 4)`): the guards are there to send those to the unfused code."""
    return [
        pytest.param(case, id=corpus._id(case), marks=_KNOWN.get(corpus._id(case), ()))
        for case in corpus.CORPUS
        if not any(1 in np.shape(a) for a in case[1])
    ]


# guards known to fail on every call, each a second compile to fix in fusion, as
# `pytest.mark.xfail(strict=True, reason=...)` by the case's id (strict: the test says when one
# passes). Since 2026-11-29 (the jit promotions of values whose dtype s2sad does not follow),
# a keepdims value read through `promoted(v, ...)` (the MLP's log_norm, a reduction method's
# result) is planned at its neighbour's shape: the guard sends the run to the unfused code
# (the numbers are right, test_jit_fuse_ranks; slower)
_KNOWN: dict = {
    "test_jit_forms.reduction_methods[2-2]-grad": _PROMOTED,
    "example_mlp.loss[2-1-2-1-2-2]-grad": _PROMOTED,
}


@pytest.mark.parametrize("case", _corpus())
def test_the_jit_corpus_passes_its_guards(case, monkeypatch):
    f, args, wrt, what = case
    try:
        f(*corpus._copies(args))
    except Exception:  # shapes NumPy refuses (a case of the corpus Numba refuses too)
        pytest.skip("the primal raises")
    rng = np.random.default_rng(0)

    def run():
        if what == "grad":
            return s2sad.grad(f, wrt=wrt, jit="strict")(*corpus._copies(args))
        if what == "vjp":
            value, pullback = s2sad.vjp(f, wrt=wrt, jit="strict")(*corpus._copies(args))
            seed = (
                tuple(rng.standard_normal(np.shape(v)) for v in value)
                if isinstance(value, tuple)
                else rng.standard_normal(np.shape(value))
            )
            return pullback(seed)
        names, params = corpus._wrt_names(f, wrt)
        tangents = tuple(rng.standard_normal(np.shape(args[params.index(n)])) for n in names)
        tangent = tangents if isinstance(wrt, tuple) else tangents[0]
        return s2sad.jvp(f, wrt=wrt, jit="strict")(*corpus._copies(args), tangent=tangent)

    try:
        verdicts = guard_verdicts(run, monkeypatch)
    except s2sad.S2SADError:
        pytest.skip("refused in Python mode too")
    assert _failed(verdicts) == []


def energy(u, k):
    dx = u[1:] - u[:-1]
    return 0.5 * k * np.sum(dx * dx) + SCALE * np.mean(u**2)


SCALE = 0.3


def test_a_rule_result_of_the_shape_its_declaration_names(monkeypatch):
    """`mean_vjp(g, u)` has u's shape (`@helper(shaped_like="x")`): the adjoint's `du` does not
    join a run over `u[1:]`'s shape, whose guard could never pass; and the output of a grad
    is a number (grad_seed refuses any other), so `SCALE` is one and the seed is summed
    nowhere (it read `sum_over(denergy, None, False)`)."""
    u = np.random.default_rng(3).normal(size=9)
    g = s2sad.grad(energy, wrt=(0, 1), jit="strict")
    verdicts = guard_verdicts(lambda: g(u, 0.7), monkeypatch)
    assert len(verdicts) >= 2 and _failed(verdicts) == []
    source = s2sad.source(g, u, 0.7)
    assert "sum_over(denergy" not in source and "np.sum(denergy" not in source
    assert "denergy_mean = denergy * SCALE" in source
    got = g(u, 0.7)
    want = s2sad.grad(energy, wrt=(0, 1))(u, 0.7)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12, atol=1e-12)
    eps = 1e-6
    fd = np.array(
        [(energy(u + eps * e, 0.7) - energy(u - eps * e, 0.7)) / (2 * eps) for e in np.eye(9)]
    )
    np.testing.assert_allclose(got[0], fd, rtol=1e-6, atol=1e-8)
    assert not g.compiled.jitted.broadcast  # Numba's guards passed as well: compiled once


def split_terms(p, x, d):
    q = p[:, :d]
    lower = p[:, d:]
    s = np.sum(np.exp(q) ** 2) + np.sum(lower**2) - np.sum(q)
    t = np.tanh(x) * x + x[:, :1] * 0.5
    return s + np.sum(t) + np.sum(np.sin(p) * p[0])


@settings(max_examples=8, deadline=None)
@given(st.integers(1, 4), st.integers(1, 3), st.integers(1, 5), st.integers(1, 4), st.data())
def test_random_lengths_nothing_relates(K, cols, n, m, data):
    """Runs over `p[:, :d]`, `p[:, d:]` and `x` of lengths drawn apart (equal at times): each
    guard passes, in Python and in Numba (compiled once), with Python mode's numbers."""
    d = data.draw(st.integers(1, cols))
    rng = np.random.default_rng(K * 100 + cols * 10 + n)
    p, x = rng.normal(size=(K, cols + 1)), rng.normal(size=(n, m))
    jitted = s2sad.grad(split_terms, wrt=(0, 1), jit="strict")
    got = jitted(p, x, d)
    assert not jitted.compiled.jitted.broadcast  # no ShapesNotFused: compiled once
    want = s2sad.grad(split_terms, wrt=(0, 1))(p, x, d)
    for g, w, k in zip(got, want, (0, 1)):
        assert g.shape == w.shape and g.dtype == np.float64
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(g, fd_grad(split_terms, (p, x, d), k), rtol=1e-6, atol=1e-7)
    with pytest.MonkeyPatch.context() as patch:
        verdicts = guard_verdicts(lambda: jitted(p, x, d), patch)
    assert verdicts and _failed(verdicts) == []
