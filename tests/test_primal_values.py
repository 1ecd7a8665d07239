"""The adjoint reads a value the primal computed rather than computing it again
(s2sad/pipeline/optimize.py `read_primal_values`): a rule's `g * np.cos(x)` beside the
primal's `c = np.cos(x)` reads `c`. Only where `x` and `c` cannot change in between; the
numbers must be finite differences' and Python mode's, jitted or not."""

from __future__ import annotations

import ast

import numpy as np
import pytest

import s2sad
from s2sad.pipeline.optimize import read_primal_values

from test_jit_fuse import fd_grad, rng


def rotation(x, y):
    c = np.cos(x)
    s = np.sin(x)
    return np.sum(c * y + s * y * y)


def rebound(x, y):
    c = np.cos(x)
    x = x * 2.0
    return np.sum(c * y + np.sin(x) * y)


def written(x, y):
    x = x * 1.0
    c = np.cos(x)
    x[0] = 3.0
    return np.sum(c * y + np.sin(x) * y)


def code_lines(source: str) -> str:
    return "\n".join(line for line in source.splitlines() if not line.strip().startswith("#"))


def _rewritten(primal: str, adjoint: str, params=("x",)) -> str:
    stmts = read_primal_values(ast.parse(primal).body, ast.parse(adjoint).body, params)
    return ast.unparse(ast.Module(stmts, []))


def test_the_adjoint_reads_the_primals_cosine_and_sine():
    x, y = rng().normal(size=7), rng(1).normal(size=7)
    g = s2sad.grad(rotation, wrt=0)
    code = code_lines(s2sad.source(g, x, y))
    assert code.count("np.cos(x)") == 1 and code.count("np.sin(x)") == 1, code
    expected = -np.sin(x) * y + np.cos(x) * y * y
    np.testing.assert_allclose(g(x, y), expected, rtol=1e-13)


def test_only_a_name_bound_once_before_and_never_written_into():
    assert _rewritten("c = np.cos(x)", "d = g * np.cos(x)") == "d = g * c"
    # x bound again, x written into, c bound twice, c written into, another function
    for primal, adjoint in [
        ("c = np.cos(x)\nx = x * 2.0", "d = g * np.cos(x)"),
        ("c = np.cos(x)\nx[0] = 1.0", "d = g * np.cos(x)"),
        ("c = np.cos(x)\nc = c + 1.0", "d = g * np.cos(x)"),
        ("c = np.cos(x)", "c += 1.0\nd = g * np.cos(x)"),
        ("c = np.cos(x)", "d = g * np.sin(x)"),
        ("c = np.cos(x, out=b)", "d = g * np.cos(x)"),
    ]:
        assert "np." in _rewritten(primal, adjoint).splitlines()[-1], (primal, adjoint)
    # x bound by the primal before (not a parameter)
    assert _rewritten("t = 2.0 * x\nc = np.cos(t)", "d = g * np.cos(t)") == (
        "d = g * c"
    ), "a value bound once before it"


@pytest.mark.parametrize("f", [rotation, rebound, written])
@pytest.mark.parametrize("jit", [False, "strict"])
def test_numbers_against_finite_differences_and_python_mode(f, jit):
    x, y = rng(2).normal(size=6), rng(3).normal(size=6)
    got = s2sad.grad(f, wrt=(0, 1), jit=jit)(x.copy(), y)
    for k in (0, 1):
        np.testing.assert_allclose(got[k], fd_grad(f, (x, y), k), rtol=1e-6, atol=1e-8)
    if jit:
        python = s2sad.grad(f, wrt=(0, 1))(x.copy(), y)
        for a, b in zip(got, python):
            np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-13)
