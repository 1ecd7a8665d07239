"""Smoke test of the benchmark workloads (benchmarks/workloads/) at tiny sizes.

Each workload's s2sad gradient is checked against float64 central finite differences of its
NumPy objective, and the workloads the runner also times with `jit=True` must compile under
Numba and match. Needs no peer (JAX, PyTorch, autograd) and times nothing.

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
from benchmarks.workloads import all_cases, gmm  # noqa: E402

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
        if EXPECTED[c.workload].split(":")[0] in expect
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


@pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaWarning")
@pytest.mark.parametrize("case", [c for c in CASES if c.jit], ids=_case_id)
def test_jit_rows_compile_and_match(case, tmp_path, monkeypatch):
    """The workloads timed with jit=True: Numba compiles the objective, and s2sad's jitted
    gradient compiles (strict: no Python fallback) and gives the Python gradient's numbers."""
    numba = pytest.importorskip("numba")
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path))
    args = list(case.inputs().values())
    assert numba.njit(case.numpy_f)(*args) == pytest.approx(case.numpy_f(*args), rel=1e-12)
    jitted = s2sad.grad(case.numpy_f, wrt=case.wrt, jit="strict")(*args)
    plain = s2sad.grad(case.numpy_f, wrt=case.wrt)(*args)
    for name, j, p in zip(case.wrt, jitted, plain):
        np.testing.assert_allclose(j, p, rtol=1e-10, atol=1e-12, err_msg=name)
