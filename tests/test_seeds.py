"""The users' own questions (../shared/seeds), with the numbers their documents give."""

import numpy as np
import pytest

import s2sad

# ---------------------------------------------------------------- seed 001: VJP with a seed


def square(x):
    return x * x


def test_seed001_vjp_with_explicit_seed():
    out, pullback = s2sad.vjp(square)(np.array([1.0, 2.0]))
    np.testing.assert_array_equal(out, [1.0, 4.0])
    np.testing.assert_array_equal(pullback(np.array([2.0, 3.0])), [4.0, 12.0])


def test_seed001_vjp_with_ones_is_tensorflows_default():
    _, pullback = s2sad.vjp(square)(np.array([1.0, 2.0]))
    np.testing.assert_array_equal(pullback(np.ones(2)), [2.0, 4.0])


def test_seed001_pullback_reusable_and_linear():
    _, pullback = s2sad.vjp(square)(np.array([1.0, 2.0]))
    a, b = np.array([1.0, -2.0]), np.array([0.5, 4.0])
    np.testing.assert_allclose(pullback(a + 3 * b), pullback(a) + 3 * pullback(b))


def linear_cost(W, b, X, Y):
    pred = X * W + b
    return 0.5 * np.sum((pred - Y) ** 2)


def test_seed001_grad_ys_example_cost():
    """tf.gradients(cost, [W, b]) from the grad_ys question, computed by hand."""
    X, Y = np.array([[2.0], [3.0]]), np.array([[3.0], [2.0]])
    W, b = 0.7, -0.2
    dW, db = s2sad.grad(linear_cost, wrt=("W", "b"))(W, b, X, Y)
    resid = X * W + b - Y
    assert isinstance(dW, float) and isinstance(db, float)
    assert dW == pytest.approx(float(np.sum(resid * X)))
    assert db == pytest.approx(float(np.sum(resid)))


# ---------------------------------------------------------------- seed 002: batched matmul

X2 = np.array([[[1.0, 1.0], [2.0, 3.0]], [[4.0, 5.0], [6.0, 7.0]]])
Y2 = np.array([[3.0, -7.0], [-1.0, 5.0]])
Z2 = np.array([[[1, 1], [2.0, 2]], [[3, 3], [-1, -1]]])
TF_DX = [[[-22.0, 18.0], [-22.0, 18.0]], [[32.0, -16.0], [32.0, -16.0]]]
TF_DY = [[66.0, -8.0], [80.0, -8.0]]
TF_DZ = [[[5.0, 5.0], [-1.0, -1.0]], [[18.0, 18.0], [-10.0, -10.0]]]


def matmul_chain(x, y, z):
    return np.matmul(np.matmul(x, y), z)


def matmul_chain_sum(x, y, z):
    return np.sum(np.matmul(np.matmul(x, y), z))


def matmul_chain_operator(x, y, z):
    return ((x @ y) @ z).sum()


@pytest.mark.parametrize("f", [matmul_chain_sum, matmul_chain_operator])
def test_seed002_tensorflow_numbers_via_grad(f):
    dx, dy, dz = s2sad.grad(f, wrt=(0, 1, 2))(X2, Y2, Z2)
    np.testing.assert_array_equal(dx, TF_DX)
    np.testing.assert_array_equal(dy, TF_DY)
    np.testing.assert_array_equal(dz, TF_DZ)
    assert dx.shape == X2.shape and dy.shape == Y2.shape and dz.shape == Z2.shape


def test_seed002_tensorflow_numbers_via_vjp_of_ones():
    out, pullback = s2sad.vjp(matmul_chain, wrt=("x", "y", "z"))(X2, Y2, Z2)
    assert out.shape == (2, 2, 2)
    dx, dy, dz = pullback(np.ones_like(out))
    np.testing.assert_array_equal(dx, TF_DX)
    np.testing.assert_array_equal(dy, TF_DY)
    np.testing.assert_array_equal(dz, TF_DZ)


def test_seed002_not_the_wrong_answer_from_the_question():
    """The question's buggy implementation transposed all axes; ours must not."""
    dy = s2sad.grad(matmul_chain_sum, wrt=1)(X2, Y2, Z2)
    assert not np.array_equal(dy, [[33.0, 22.0], [54.0, 36.0]])


# ---------------------------------------------------------------- seed 003: broadcasting rules


def product_sum(a, b):
    return np.sum(a * b)


@pytest.mark.parametrize(
    "a, b, expected",
    [
        ([1.0], [1.0, 2.0, 3.0, 4.0], [10.0]),
        ([[1.0], [2.0]], [[1.0, 2.0, 3.0, 4.0], [2.0, 3.0, 4.0, 5.0]], [[10.0], [14.0]]),
        (
            [[[[2.0, 4.0, 6.0, 8.0]]]],
            [[[2.0, 4.0, 6.0, 8.0], [3.0, 5.0, 7.0, 9.0]]],
            [[[[5.0, 9.0, 13.0, 17.0]]]],
        ),
    ],
)
def test_seed003_broadcast_examples(a, b, expected):
    a, b = np.array(a), np.array(b)
    da, db = s2sad.grad(product_sum, wrt=(0, 1))(a, b)
    np.testing.assert_array_equal(da, expected)
    np.testing.assert_array_equal(
        db,
        (
            np.broadcast_to(a, np.broadcast_shapes(a.shape, b.shape)).sum(
                axis=tuple(range(a.ndim - b.ndim))
            )
            if a.ndim > b.ndim
            else np.broadcast_to(a, b.shape)
        ),
    )
    assert da.shape == a.shape and db.shape == b.shape


def test_seed003_scalar_times_array_gives_a_python_float():
    da = s2sad.grad(product_sum)(2.0, np.array([1.0, 2.0, 3.0, 4.0]))
    assert type(da) is float and da == 10.0


def quotient_sum(a, b):
    return np.sum(a / b)


def test_seed003_division():
    a, b = np.array([1.0, 2.0, 3.0]), np.array([2.0, 4.0, 5.0])
    da, db = s2sad.grad(quotient_sum, wrt=(0, 1))(a, b)
    np.testing.assert_allclose(da, 1 / b)
    np.testing.assert_allclose(db, -a / b**2)


def matmul_loss(A, B, G):
    return np.sum((A @ B) * G)


def matmul_loss_at(A, B, G):
    return np.sum((A.T @ B) * G)


def matmul_loss_bt(A, B, G):
    return np.sum((A @ B.T) * G)


def test_seed003_matmul_gradients_are_g_bt_and_at_g():
    rng = np.random.default_rng(3)
    A, B, G = rng.normal(size=(3, 4)), rng.normal(size=(4, 2)), rng.normal(size=(3, 2))
    dA, dB = s2sad.grad(matmul_loss, wrt=(0, 1))(A, B, G)
    np.testing.assert_allclose(dA, G @ B.T)
    np.testing.assert_allclose(dB, A.T @ G)


def test_seed003_matmul_with_either_operand_transposed():
    rng = np.random.default_rng(4)
    A, B, G = rng.normal(size=(4, 3)), rng.normal(size=(4, 2)), rng.normal(size=(3, 2))
    dA, dB = s2sad.grad(matmul_loss_at, wrt=(0, 1))(A, B, G)
    np.testing.assert_allclose(dA, (G @ B.T).T)  # transpose_a: B @ G^T
    np.testing.assert_allclose(dB, A @ G)
    A, B, G = rng.normal(size=(3, 4)), rng.normal(size=(2, 4)), rng.normal(size=(3, 2))
    dA, dB = s2sad.grad(matmul_loss_bt, wrt=(0, 1))(A, B, G)
    np.testing.assert_allclose(dA, G @ B)  # transpose_b: G @ B
    np.testing.assert_allclose(dB, G.T @ A)


# ---------------------------------------------------------------- seed 004: custom gradients


@s2sad.custom_vjp
def log1pexp(x):
    e = np.exp(x)
    return np.log(1 + e)


@log1pexp.defvjp
def _log1pexp_rule(dy, y, x):
    return dy * (1 - 1 / (1 + np.exp(x)))


def naive_log1pexp(x):
    e = np.exp(x)
    return np.log(1 + e)


def uses_log1pexp(x):
    return log1pexp(x)


def test_seed004_stable_rule_gives_one_at_1000():
    with np.errstate(over="ignore", invalid="ignore"):
        assert s2sad.grad(uses_log1pexp)(1000.0) == 1.0
        naive = s2sad.grad(naive_log1pexp)(1000.0)
    assert np.isnan(naive)
    assert s2sad.grad(uses_log1pexp)(0.0) == 0.5


@s2sad.custom_vjp
def foo(x):
    return x**2


@foo.defvjp
def _foo_rule(dy_upstream, y, x):
    return 2 * x * dy_upstream


def foo_cubed(x):
    return foo(foo(foo(x)))


def test_seed004_upstream_gradient_flows_through_the_rule():
    assert s2sad.grad(foo_cubed)(2.0) == 1024.0
    assert foo_cubed(2.0) == 256.0
