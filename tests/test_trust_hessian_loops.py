"""Hessians (forward mode over the generated gradient code) of ordinary loops: a loop that may
run no iteration, a call in one branch of a conditional expression, element writes. Each is
checked against central differences of the gradient in float64, and so are the gradient, the
forward-mode Jacobian and the loop run zero times."""

import math

import numpy as np
import pytest

import s2sad

from examples.loops import smooth


def tri(x):
    e = 0.0
    n = x.shape[0]
    for i in range(n):
        for j in range(i + 1, n):
            e = e + x[i] * x[j]
    return e


def cond(x):
    s = x
    for k in range(3):
        s = s + x**k / math.factorial(k) if k > 5 else s + x**k
    return np.sum(s)


def cond_taken(x):
    s = x
    for k in range(4):
        s = s + x**k / math.factorial(k) if k > 1 else s * x
    return np.sum(s)


def pairs(x):
    """A pairwise energy, as in every n-body potential."""
    e = 0.0
    n = x.shape[0]
    for i in range(n):
        for j in range(i + 1, n):
            d = x[i] - x[j]
            e = e + 1.0 / (1.0 + d * d)
    return e


def prefix(x):
    y = x.copy()
    for i in range(1, 3):
        y[i] += y[i - 1] ** 2
    return np.sum(y**2)


def element_then_write(x):
    """An element read, then the array written: the element keeps its value (a scalar copy)."""
    y = x.copy()
    a = y[0]
    y[0] = 3.0 * x[1]
    return a * y[0] + np.sum(y**2)


def later_branch(x):
    """A name a loop that may run no iteration assigns, which a later branch assigns again."""
    for i in range(x.shape[0] - 1):
        t = x[i] * x[i + 1]
    s = np.sum(x**2)
    for k in range(2):
        if k > 0:
            t = x[-1] ** 3
            s = s + t
    return s


def rows(x):
    """Row writes: the gradient code records copies of rows (`snapshot(...)`, `.copy()`) on its
    tapes, whose tangents forward mode must carry (they were zeros: a wrong Hessian)."""
    y = x.copy()
    for i in range(1, y.shape[0]):
        y[i] = y[i] + y[i - 1] ** 2
    return np.sum(y**2)


def rows_and_elements(x):
    y = x.copy()
    for i in range(1, y.shape[0]):
        y[i] += np.sin(y[i - 1])
        y[i, 0] = y[i, 1] * y[i - 1, 0]
    return np.sum(y**2)


def element_loop_then_whole(x):
    """Element writes, then whole-array updates: one tape holds elements and whole arrays, so
    the ranks of what it gives back are unknown and the code specialized on ranks has values
    that may be views; the generic gradient code keeps its copies and is read instead."""
    y = x.copy()
    for i in range(1, 3):
        y[i] = 0.5 * y[i - 1] + x[0]
    for k in range(2):
        y = np.tanh(y) * x
    return np.sum(y**2)


def correlations(x):
    return np.sum(np.corrcoef(np.stack([x, x**2, np.sin(x)])))


def nested_carried(x):
    """An inner loop carrying a value: the gradient code pops it off its tape in two places,
    and the tangent of one of those pops is read by nothing; dropping that pop alone left the
    list of tangents out of step with the list of values (a wrong Hessian)."""
    s = 0.0
    for k in range(2):
        p = x[1]
        for i in range(2):
            p = np.tanh(x[i]) + 0.5 * p
        s = np.tanh(p * np.sin(p)) + 0.5 * s
    return s


def nested_branch(x):
    s = 0.0
    for k in range(2):
        p = x[1]
        for i in range(2):
            if x[0] < 0.5:
                p = p + x[2]
            else:
                p = np.tanh(x[i]) + 0.5 * p
        s = s + p * np.sin(p)
    return s


def nested_linear(x):
    s = 0.0
    for k in range(2):
        p = x[1]
        for i in range(2):
            if x[0] < 0.5:
                p = p + x[2]
            else:
                p = 0.5 * p
        s = s + p * p
    return s


def merged_in_loop(x):
    """A name one branch assigns again (`v = v * 1.0`) and nothing reads after the `if`: the
    other branch's copy is dead, but the tape still records the branch's value for its adjoint."""
    s = 0.0
    for k in range(2):
        v = np.sin(x)
        if k > 0:
            v = v * 1.0
            s = s + np.min(v)
        else:
            s = s + 1.0
    return s


def _grad_fd(f, x, h=1e-6):
    g = np.zeros_like(x)
    for k in range(x.size):
        e = np.zeros_like(x)
        e.flat[k] = h
        g.flat[k] = (f(x + e) - f(x - e)) / (2 * h)
    return g


def _hess_fd(f, x, *args, h=1e-5):
    grad = s2sad.grad(f)
    rows = []
    for k in range(x.size):
        e = np.zeros_like(x)
        e.flat[k] = h
        rows.append((grad(x + e, *args) - grad(x - e, *args)) / (2 * h))
    return np.array(rows).reshape(x.shape + x.shape)


X = np.array([0.3, -0.7, 1.2, 0.45])
CASES = [
    tri,
    cond,
    cond_taken,
    pairs,
    prefix,
    element_then_write,
    later_branch,
    element_loop_then_whole,
    merged_in_loop,
]


@pytest.mark.parametrize("f", CASES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("batched", [True, False])
def test_hessian_matches_differences_of_the_gradient(f, batched):
    got = s2sad.hessian(f, batched=batched)(X)
    np.testing.assert_allclose(got, _hess_fd(f, X), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("f", CASES, ids=lambda f: f.__name__)
def test_gradient_and_forward_jacobian(f):
    expected = _grad_fd(f, X)
    np.testing.assert_allclose(s2sad.grad(f)(X), expected, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(s2sad.jacobian(f, mode="forward")(X), expected, rtol=1e-6, atol=1e-7)
    tangent = np.array([0.2, -1.0, 0.5, 0.1])
    value, slope = s2sad.jvp(f)(X, tangent=tangent)
    assert value == pytest.approx(f(X))
    assert slope == pytest.approx(expected @ tangent, rel=1e-6)


@pytest.mark.parametrize("f", [tri, pairs, later_branch], ids=lambda f: f.__name__)
def test_loops_that_run_no_iteration(f):
    """One element: the inner loops (and `later_branch`'s first loop) run zero times."""
    x = np.array([0.8])
    np.testing.assert_allclose(s2sad.grad(f)(x), _grad_fd(f, x), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(s2sad.hessian(f)(x), _hess_fd(f, x), rtol=1e-6, atol=1e-6)


def test_hessian_of_the_smoothing_example():
    x = np.array([0.1, 0.5, 0.2, 0.9])
    for a in (0.3, 0.7):
        hess = s2sad.hessian(smooth)(x, a)
        np.testing.assert_allclose(hess, _hess_fd(smooth, x, a), atol=1e-6)


@pytest.mark.parametrize("f", [rows, rows_and_elements], ids=lambda f: f.__name__)
@pytest.mark.parametrize("batched", [True, False])
def test_hessian_of_row_writes(f, batched):
    x = np.array([[0.3, -0.2], [0.1, 0.5], [0.7, -0.4]])
    got = s2sad.hessian(f, batched=batched)(x)
    np.testing.assert_allclose(got, _hess_fd(f, x), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("f", [nested_carried, nested_branch, nested_linear])
@pytest.mark.parametrize("first", [0.3, 0.7])
def test_nested_loops_carrying_a_value(f, first):
    x = np.array([first, -0.7, 1.2])
    for batched in (True, False):
        got = s2sad.hessian(f, batched=batched)(x)
        np.testing.assert_allclose(got, _hess_fd(f, x), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(s2sad.grad(f)(x), _grad_fd(f, x), rtol=1e-6, atol=1e-7)


def test_a_view_read_after_its_array_is_written_is_still_refused():
    """Only a scalar element is a copy: a row of a matrix is a view, and stays refused."""

    def row_then_write(x):
        y = x.copy()
        r = y[0]
        y[0] = 2.0 * x[1]
        return np.sum(r * y[0])

    with pytest.raises(s2sad.UnsupportedSyntaxError, match="may be a view of `y`"):
        s2sad.grad(row_then_write)(np.ones((2, 3)))


def test_a_hessian_refused_in_the_gradient_code_names_the_users_line():
    """np.corrcoef has no second derivative rule yet: the refusal points at the user's line, not
    at a line of generated code, and says what to do instead."""
    for batched in (True, False):
        with pytest.raises(s2sad.NoRuleError) as caught:
            s2sad.hessian(correlations, batched=batched)(X)
        err = caught.value
        assert err.file == __file__
        assert err.line == correlations.__code__.co_firstlineno + 1
        assert "s2sad.hessian(correlations)" in str(err) and "corrcoef_vjp" in str(err)
        assert "return np.sum(np.corrcoef(np.stack([x, x**2, np.sin(x)])))" in str(err)
        assert "s2sad.grad(f)" in err.hint
