"""A store into a differentiated parameter (`x[0] = 3.0` on the `x` being differentiated) cuts
the overwritten elements off from the output: their gradient is zero, or the stored value's.

The adjoint zeroes `dx[index]`; an optimization (tape.py's kill markers) dropped that zeroing
when no adjoint code read `dx` afterwards, forgetting that the returned gradient reads it: every
gradient of a parameter overwritten by a store came back with the old elements' cotangent
(`grad` of `x[0] = 3.0; sum(x * x)` gave [6, 4], not [0, 4]). Each form of store is checked
against float64 central differences (conftest) and, for the first cases, exact values: grad,
vjp and jvp in Python mode, the batched and per-direction Jacobians both ways, and the jitted
grad against the Python one.

A sibling: a kept zeroing `dx[i] = 0.0` reads `i` as it was when the write ran, so `i` must be
taped as a restore's index is; a while loop writing `x[i]` zeroed the elements at the final `i`.
Writes s2sad does not follow (`x.fill`, `np.copyto`, a write through an alias of a parameter)
are refused at transform time, naming the line.
"""

import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import s2sad
from conftest import _fd, check_grad, check_jvp, check_vjp, load_module
from s2sad.jit import JitFallbackWarning

ROOT = Path(__file__).resolve().parent.parent
K = 0.7


def int_index(x, k):
    x[0] = 3.0
    return np.sum(x * x) * k


def param_value(x, k):
    x[0] = k
    return np.sum(x * x)


def negative(x, k):
    x[-1] = 2.0
    return np.sum(np.sin(x)) * k


def from_variable(x, k):
    i = x.shape[0] - 2
    x[i] = 2.0
    return np.sum(x * x) * k


def fancy(x, k):
    x[np.array([0, 2])] = 2.0
    return np.sum(x * x) * k


def boolean(x, k):
    x[x > 2.5] = 0.5
    return np.sum(x * x) * k


def ellipsis(x, k):
    x[...] = 2.0
    return np.sum(x) * k + k * k


def whole(x, k):
    x[:] = 1.5
    return np.sum(x * k)


def part(x, k):
    x[1:3] = 0.0
    return np.sum(x * x) * k


def times_zero(x, k):
    x[0] *= 0.0
    return np.sum(x * x) * k


def plus_k(x, k):
    x[1] += k
    return np.sum(x * x)


def in_loop(x, k):
    for i in range(2):
        x[i] = k * i
    return np.sum(x * x)


def loop_const(x, k):
    for i in range(2):
        x[i] = 0.5
    return np.sum(x * x) * k


def in_branch(x, k):
    if k > 0.5:
        x[0] = 3.0
    return np.sum(x * x) * k


def read_before(x, k):
    y = x * 2.0
    x[0] = 3.0
    return np.sum(y * x) * k


def in_while(x, k):  # the kept zeroing reads i as it was in that iteration: i is taped
    i = 0
    while i < 2:
        x[i] = 1.0
        i += 1
    return np.sum(x * x) * k


def in_while_read_before(x, k):  # dx is read before the loop too (gave [4, 4, 2, 10] * k)
    z = x * 2.0
    i = 0
    while i < 2:
        x[i] = 1.0
        i += 1
    return (np.sum(x * x) + np.sum(z)) * k


def local_in_while(x, k):
    y = x * 1.0
    z = y * 2.0
    i = 0
    while i < 2:
        y[i] = k
        i += 1
    return np.sum(y * y) + np.sum(z)


def tuple_index(a, k):
    a[0, 1] = 3.0
    return np.sum(a * a) * k


def row(a, k):
    a[1] = 0.0
    return np.sum(a * a) * k


def row_neg(a, k):
    a[-1, :] = k
    return np.sum(a * a)


def at_index(x, i):  # i: an integer argument, not differentiated
    x[i] = 0.5
    return np.sum(x * x)


def vector(x, k):  # a vector output, for the Jacobians
    x[0] = 3.0
    x[-1] = k
    return x * x


X = np.array([1.0, 2.0, 3.0, 4.0])
A = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
CASES = [
    (int_index, X),
    (param_value, X),
    (negative, X),
    (from_variable, X),
    (fancy, X),
    (boolean, X),
    (ellipsis, X),
    (whole, X),
    (part, X),
    (times_zero, X),
    (plus_k, X),
    (in_loop, X),
    (loop_const, X),
    (in_branch, X),
    (read_before, X),
    (in_while, X),
    (in_while_read_before, X),
    (local_in_while, X),
    (tuple_index, A),
    (row, A),
    (row_neg, A),
]
IDS = [f.__name__ for f, _ in CASES]


@pytest.mark.parametrize("f, x", CASES, ids=IDS)
def test_reverse_and_forward_against_differences(f, x):
    g = check_grad(f, (x.copy(), K), wrt=(0, 1))
    check_vjp(f, (x.copy(), K), wrt=(0, 1))
    check_jvp(f, (x.copy(), K), wrt=0)
    check_jvp(f, (x.copy(), K), wrt=1)
    assert g[0].shape == x.shape and g[0].dtype == x.dtype


EXACT = [  # x = [1, 2, 3, 4], k = 0.7
    (int_index, [0.0, 4 * K, 6 * K, 8 * K], 9 + 4 + 9 + 16),
    (param_value, [0.0, 4.0, 6.0, 8.0], 2 * K),
    (fancy, [0.0, 4 * K, 0.0, 8 * K], 4 + 4 + 4 + 16),
    (in_loop, [0.0, 0.0, 6.0, 8.0], 2 * K),
    (in_branch, [0.0, 4 * K, 6 * K, 8 * K], 9 + 4 + 9 + 16),
    (times_zero, [0.0, 4 * K, 6 * K, 8 * K], 4 + 9 + 16),
    (in_while, [0.0, 0.0, 6 * K, 8 * K], 2 + 9 + 16),
    (in_while_read_before, [2 * K, 2 * K, 8 * K, 10 * K], 27 + 20),
]


@pytest.mark.parametrize("f, dx, dk", EXACT, ids=[c[0].__name__ for c in EXACT])
@pytest.mark.parametrize("jit", [False, True, "strict"])
def test_exact_gradients(f, dx, dk, jit):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitFallbackWarning)
        gx, gk = s2sad.grad(f, wrt=(0, 1), jit=jit)(X.copy(), K)
        _, dot = s2sad.jvp(f, jit=jit)(X.copy(), K, tangent=np.ones(4))
    np.testing.assert_allclose(gx, dx, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gk, dk, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dot, np.sum(dx), rtol=1e-12, atol=1e-12)


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_random_shapes_and_positions(data):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, max_side=4))
    x = data.draw(hnp.arrays(np.float64, shape, elements=st.floats(-3, 3)))
    i = data.draw(st.integers(-shape[0], shape[0] - 1))
    expected = 2 * x
    expected[i] = 0.0
    got = s2sad.grad(at_index)(x.copy(), i)
    assert got.shape == x.shape and got.dtype == x.dtype
    np.testing.assert_array_equal(got, expected)


def test_the_reported_function():
    def f(x):
        x[0] = 3.0
        return np.sum(x * x)

    for jit in (False, True):
        np.testing.assert_array_equal(s2sad.grad(f, jit=jit)(np.array([1.0, 2.0])), [0.0, 4.0])
    assert "dx[0] = 0.0" in s2sad.source(s2sad.grad(f))


@pytest.mark.parametrize("wrt", [0, 1])
@pytest.mark.parametrize(
    "mode, batched", [("reverse", True), ("forward", True), ("reverse", False), ("forward", False)]
)
def test_jacobians(wrt, mode, batched):
    jac = s2sad.jacobian(vector, wrt=wrt, mode=mode, batched=batched)(X.copy(), K)
    args = (X.copy(), K)
    rows = [
        _fd(lambda *a, j=j: vector(*[np.copy(v) for v in a])[j], args, wrt, 1e-6) for j in range(4)
    ]
    np.testing.assert_allclose(jac, np.array(rows).reshape(jac.shape), rtol=1e-6, atol=1e-8)


def test_jitted_jacobian_matches_python():
    expected = s2sad.jacobian(vector, mode="reverse")(X.copy(), K)
    np.testing.assert_allclose(expected[0], 0.0)  # x[0] was overwritten: no derivative
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitFallbackWarning)
        got = s2sad.jacobian(vector, mode="reverse", jit=True)(X.copy(), K)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_emitted_jit_code_zeroes_the_overwritten_gradient(tmp_path):
    source = tmp_path / "overwrite.py"
    source.write_text("import numpy as np\n\ndef f(x):\n    x[0] = 3.0\n    return np.sum(x * x)\n")
    out = tmp_path / "grad.py"
    result = subprocess.run(
        [sys.executable, "-m", "s2sad", "emit", "--jit", f"{source}:f", "-o", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "dx[0] = 0.0" in out.read_text()


def test_an_alias_of_a_parameter_written_into_is_refused(tmp_path):
    def aliased(x):
        y = x
        y[0] = 3.0
        return np.sum(x * x)

    with pytest.raises(s2sad.UnsupportedSyntaxError, match="may share memory"):
        s2sad.grad(aliased)(X.copy())


@pytest.mark.parametrize("write", ["x.fill(0.5)", "np.copyto(x, 0.5)"])
def test_writes_s2sad_does_not_follow_are_refused(write, tmp_path):
    module = load_module(
        tmp_path,
        "hidden_write",
        f"import numpy as np\n\ndef f(x):\n    {write}\n    return np.sum(x * x)\n",
    )
    with pytest.raises(s2sad.UnsupportedSyntaxError, match="hidden_write.py:4"):
        s2sad.grad(module.f)(X.copy())
