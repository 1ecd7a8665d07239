"""Smoke test of the benchmark workloads (benchmarks/workloads/) at tiny sizes.

Each workload's s2sad gradient is checked against float64 central finite differences of its
NumPy objective, and the workloads the runner also times with `jit=True` must compile under
Numba and match. The BA workloads compute Jacobian blocks rather than a gradient: their rows
are checked against finite differences of the residuals, and against the peers that are
installed. Needs no peer (JAX, PyTorch, autograd) and times nothing.

`EXPECTED` says what s2sad does with each workload today. When support lands or a bug is
fixed, the matching test fails (an unsupported workload stops raising, a known-wrong gradient
becomes right: a strict xfail passes); then flip that one line to "ok".
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import s2sad

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.workloads import all_cases, ba, gmm  # noqa: E402

# "ok": the gradient matches finite differences. "unsupported": s2sad raises an S2SADError.
# "wrong: <why>": a known s2sad bug gives a wrong gradient (a strict xfail).
EXPECTED = {
    "gmm": "ok",
    "gmm-loops": "ok",
    "lstm": "ok",
    "mlp": "ok",
    "ode-euler": "ok",
    "linrec": "ok",
    "stencil-loops": "ok",
    "stencil": "ok",
    "conv1d-loops": "ok",
    "ba": "ok",
    "ba-perobs": "ok",
    "lse": "ok",
    "llsq": "ok",
    "det": "ok",
    "ode": "ok",
    "kmeans": "ok",
    "ht": "ok",
    "ht-complicated": "ok",
    "particle": "ok",
    "saddle": "ok",
}

CASES = all_cases("smoke")
EPS, RTOL, ATOL = 1e-6, 1e-5, 1e-8


def _case_id(case):
    return case.workload


def _params(expect: str):
    return [
        pytest.param(
            c,
            id=_case_id(c),
            marks=(
                [pytest.mark.xfail(strict=True, reason=EXPECTED[c.workload][7:])]
                if EXPECTED[c.workload].startswith("wrong")
                else []
            ),
        )
        for c in CASES
        if EXPECTED[c.workload].split(":")[0] in expect and "s2sad" not in c.build
    ]


def _finite_differences(f, args: list, index: int) -> np.ndarray:
    x = args[index]
    if isinstance(x, float):
        hi, lo = list(args), list(args)
        hi[index], lo[index] = x + EPS, x - EPS
        return np.array((f(*hi) - f(*lo)) / (2 * EPS))
    out = np.empty(x.size)
    for k in range(x.size):
        hi, lo = list(args), list(args)
        hi[index], lo[index] = x.copy(), x.copy()
        hi[index].flat[k] += EPS
        lo[index].flat[k] -= EPS
        out[k] = (f(*hi) - f(*lo)) / (2 * EPS)
    return out.reshape(x.shape)


def test_every_workload_has_an_expectation():
    assert {c.workload for c in CASES} == set(EXPECTED)
    for c in CASES:
        assert set(c.peers) == {"jax", "torch", "autograd"}, c.workload
        assert set(c.wrt) <= set(c.inputs()), c.workload


@pytest.mark.parametrize("case", _params({"ok", "wrong"}))
def test_gradient_matches_finite_differences(case):
    inputs = case.inputs()
    names, args = list(inputs), list(inputs.values())
    value = case.numpy_f(*args)
    assert np.ndim(value) == 0 and np.isfinite(value)

    grads = s2sad.grad(case.numpy_f, wrt=case.wrt)(*args)

    assert isinstance(grads, tuple) and len(grads) == len(case.wrt)
    for name, g in zip(case.wrt, grads):
        i = names.index(name)
        expected = _finite_differences(case.numpy_f, args, i)
        assert np.shape(g) == np.shape(args[i]), name
        scale = np.max(np.abs(expected))
        np.testing.assert_allclose(
            np.asarray(g, dtype=float),
            expected,
            rtol=RTOL,
            atol=ATOL + RTOL * scale,
            err_msg=f"{case.workload}: gradient with respect to {name}",
        )


@pytest.mark.parametrize("case", _params({"unsupported"}))
def test_unsupported_raises_s2sad_error(case):
    args = list(case.inputs().values())
    with pytest.raises(s2sad.S2SADError):
        s2sad.grad(case.numpy_f, wrt=case.wrt)(*args)


def test_loop_gmm_is_the_vectorised_gmm():
    size = {"d": 3, "K": 4, "n": 6}
    vectorised = gmm.gmm_objective(*gmm.make_inputs(**size).values())
    loops = gmm.gmm_loops(*gmm.make_loop_inputs(**size).values())
    assert loops == pytest.approx(vectorised, rel=1e-12)


# ----------------------------------------------------------------------------- BA (Jacobians)

BA_CASES = [c for c in CASES if c.family == "ba"]


def _ba_finite_differences(f, inputs: dict) -> tuple[np.ndarray, ...]:
    """The per-observation blocks by central differences of the residuals of all observations:
    observations are independent, so moving one parameter slot of every observation at once
    gives that column of every block."""
    args = list(inputs.values())
    blocks = []
    for index in range(3):  # cams, X, w
        x = args[index]
        columns = []
        for j in range(1 if x.ndim == 1 else x.shape[1]):
            hi, lo = list(args), list(args)
            hi[index], lo[index] = x.copy(), x.copy()
            step = EPS * np.maximum(1.0, np.abs(x if x.ndim == 1 else x[:, j]))
            if x.ndim == 1:
                hi[index] += step
                lo[index] -= step
            else:
                hi[index][:, j] += step
                lo[index][:, j] -= step
            columns.append((f(*hi) - f(*lo)) / (2 * step[:, None]))  # (p, 3)
        blocks.append(np.stack(columns, axis=2) if x.ndim == 2 else columns[0])
    return tuple(blocks)


def _assert_blocks_close(got, expected, rtol, what):
    assert len(got) == len(expected) == 3, what
    for name, g, e in zip(("cams", "X", "w"), got, expected):
        assert g.shape == e.shape, (what, name, g.shape, e.shape)
        np.testing.assert_allclose(
            g, e, rtol=rtol, atol=rtol * np.max(np.abs(e)), err_msg=f"{what}: d/d{name}"
        )


@pytest.mark.parametrize("case", BA_CASES, ids=_case_id)
def test_ba_jacobian_matches_finite_differences(case):
    inputs = case.inputs()
    run, fetch, probe = case.build["s2sad"](case.numpy_f, inputs, case.wrt)
    probe()
    got = fetch(run())
    p = inputs["w"].shape[0]
    assert [g.shape for g in got] == [(p, 3, 11), (p, 3, 3), (p, 3)]
    expected = _ba_finite_differences(ba.ba_residuals, inputs)
    _assert_blocks_close(got, expected, 1e-5, case.workload)


def test_ba_residuals_agree_and_small_angle():
    """The vectorised residuals equal the per-observation ones, on the Rodrigues branch and on
    the small-angle one (|r| = 0 exactly), and so do the two s2sad Jacobians there."""
    inputs = ba.make_inputs(3, 4, 6)
    inputs["cams"][::3, 0:3] = 0.0  # camera 0 has no rotation
    args = list(inputs.values())
    np.testing.assert_allclose(ba.ba_residuals(*args), ba.ba_perobs(*args), rtol=1e-13)
    vec = ba.build_s2sad_vectorised(ba.ba_residuals, inputs, ba.WRT)
    per = ba.build_s2sad_perobs(ba.ba_perobs, inputs, ba.WRT)
    _assert_blocks_close(vec[1](vec[0]()), per[1](per[0]()), 1e-12, "vectorised vs per-obs")
    _assert_blocks_close(
        per[1](per[0]()), _ba_finite_differences(ba.ba_residuals, inputs), 1e-5, "small angle"
    )


@pytest.mark.parametrize("peer", ["jax", "torch", "autograd"])
def test_ba_peers_agree_with_s2sad(peer):
    """The peers' BA Jacobians (vmap(jacrev), or autograd per observation) give s2sad's."""
    pytest.importorskip(peer)
    if peer == "jax":
        import jax

        jax.config.update("jax_enable_x64", True)
    inputs = ba.make_inputs(3, 4, 6)
    inputs["cams"][::3, 0:3] = 0.0  # the small-angle branch too
    run, fetch = ba.PEER_BUILD[peer](ba.PEERS[peer](), inputs, ba.WRT)
    mine = ba.build_s2sad_vectorised(ba.ba_residuals, inputs, ba.WRT)
    _assert_blocks_close(fetch(run()), mine[1](mine[0]()), 1e-10, peer)


@pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaWarning")
@pytest.mark.parametrize("case", [c for c in BA_CASES if c.jit], ids=_case_id)
def test_ba_jit_rows_compile_and_match(case, tmp_path, monkeypatch):
    pytest.importorskip("numba")
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path))
    inputs = case.inputs()
    primal = case.build["numba-primal"](case.numpy_f, inputs)
    np.testing.assert_allclose(np.array(primal()), case.numpy_f(*inputs.values()), rtol=1e-12)
    run, fetch, _ = case.build["s2sad-jit"](case.numpy_f, inputs, case.wrt)
    plain_run, plain_fetch, _ = case.build["s2sad"](case.numpy_f, inputs, case.wrt)
    _assert_blocks_close(fetch(run()), plain_fetch(plain_run()), 1e-10, "jit")


# ----------------------------------------------------------------------------- jit rows


JIT_CASES = [c for c in CASES if c.jit and c.family != "ba"]


@pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaWarning")
@pytest.mark.parametrize("case", JIT_CASES, ids=_case_id)
def test_jit_rows_compile_and_match(case, tmp_path, monkeypatch):
    """The workloads timed with jit=True: Numba compiles the objective, and s2sad's jitted
    gradient compiles (strict: no Python fallback) and gives the Python gradient's numbers."""
    numba = pytest.importorskip("numba")
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path))
    args = list(case.inputs().values())
    if "numba-primal" in case.build:  # helpers Numba cannot call as they are
        primal = case.build["numba-primal"](case.numpy_f, case.inputs())()
    else:
        primal = numba.njit(case.numpy_f)(*args)
    assert primal == pytest.approx(case.numpy_f(*args), rel=1e-12)
    jitted = s2sad.grad(case.numpy_f, wrt=case.wrt, jit="strict")(*args)
    plain = s2sad.grad(case.numpy_f, wrt=case.wrt)(*args)
    for name, j, p in zip(case.wrt, jitted, plain):
        np.testing.assert_allclose(j, p, rtol=1e-10, atol=1e-12, err_msg=name)
