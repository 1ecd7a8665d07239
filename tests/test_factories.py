"""Functions that return functions (factories, issue #15): a closure made by a helper and
called in the differentiated function is refused by name at the user's line, with what to do
instead; the rewrite the hint names differentiates."""

from __future__ import annotations

import numpy as np
import pytest

import s2sad


def make(a):
    def rhs(y):
        return -a * y

    return rhs


def make_lambda(a, b):
    return lambda y: -a * y + b


def rk4(f, y, h, n):
    for _ in range(n):
        k1 = f(y)
        k2 = f(y + h / 2 * k1)
        k3 = f(y + h / 2 * k2)
        k4 = f(y + h * k3)
        y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return y


def called_at_once(a, y):
    return np.sum(make(a)(y))


def bound_to_a_name(a, y):
    f = make(a)
    return np.sum(f(y))


def passed_on(a, y0):
    return np.sum(rk4(make(a), y0, 0.1, 5))


def lambda_factory(a, y):
    return np.sum(make_lambda(a, 1.0)(y))


def constant_factory(a, y):
    return np.sum(make(2.0)(y)) * a  # nothing the factory closes over is differentiated


@pytest.mark.parametrize(
    "f, made, line",
    [
        (called_at_once, "the function `rhs`", "return np.sum(make(a)(y))"),
        (bound_to_a_name, "the function `rhs`", "f = make(a)"),
        (passed_on, "the function `rhs`", "return np.sum(rk4(make(a), y0, 0.1, 5))"),
        (lambda_factory, "a lambda", "return np.sum(make_lambda(a, 1.0)(y))"),
    ],
)
@pytest.mark.parametrize("transform", [s2sad.grad, s2sad.jvp])
def test_a_factory_is_refused_at_the_users_line(f, made, line, transform):
    with pytest.raises(s2sad.UnsupportedSyntaxError) as info:
        if transform is s2sad.grad:
            s2sad.grad(f)(0.5, np.ones(2))
        else:
            s2sad.jvp(f)(0.5, np.ones(2), tangent=1.0)
    text = str(info.value)
    assert f"returns {made} it defines" in text
    assert line in text and "test_factories.py" in text
    assert "nested `def` or a lambda" in text and "pass it in as an argument" in text
    assert "register_vjp" not in text


def nested_def(a, y0):
    def rhs(y):
        return -a * y

    return np.sum(rk4(rhs, y0, 0.1, 5))


def nested_lambda(a, y0):
    rhs = lambda y: -a * y  # noqa: E731
    return np.sum(rhs(y0))


def constant_closure(a, y0):
    def twice(y):
        return 2 * y

    return np.sum(rk4(twice, y0, 0.1, 2)) * a + np.sum(twice(y0)) * a


def central(f, a, y0, h=1e-6):
    return (f(a + h, y0) - f(a - h, y0)) / (2 * h)


@pytest.mark.parametrize("f", [nested_def, nested_lambda, constant_closure])
def test_the_rewrite_the_hint_names_differentiates(f):
    """The nested def or lambda reads the differentiated `a`, its arguments do not: its calls
    are inlined all the same (they were left to Python, and refused by name), in each mode."""
    y0 = np.array([1.0, 2.0])
    fd = central(f, 0.5, y0)
    np.testing.assert_allclose(s2sad.grad(f)(0.5, y0), fd, rtol=1e-7)
    np.testing.assert_allclose(s2sad.jvp(f)(0.5, y0, tangent=1.0)[1], fd, rtol=1e-7)
    np.testing.assert_allclose(s2sad.grad(f, jit=True)(0.5, y0), s2sad.grad(f)(0.5, y0), rtol=1e-12)
    np.testing.assert_allclose(s2sad.grad(f)(0.7, 2 * y0), central(f, 0.7, 2 * y0), rtol=1e-7)


def test_the_issue_example_rewritten_gives_minus_sum_y():
    def g(a, y):
        def rhs(z):
            return -a * z

        return np.sum(rhs(y))

    assert s2sad.grad(g)(0.5, np.ones(2)) == -2.0


def test_a_factory_nothing_differentiated_reaches_runs_as_python():
    # y is not differentiated (grad in a alone) and the factory closes over a constant: the
    # call is no derivative's business and runs as written
    assert s2sad.grad(constant_factory)(0.5, np.ones(2)) == -4.0
