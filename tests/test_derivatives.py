"""Forward mode, Jacobians and Hessians (seeds 000 and 001), checked against finite differences."""

import math

import numpy as np
import pytest

import s2sad
from conftest import check_grad

RNG = np.random.default_rng(7)
W = RNG.normal(size=(3, 4))


def layer(x):
    """y of shape (M, N) = (2, 4) from x of shape (Q, P) = (2, 3)."""
    return np.tanh(x @ W) * np.array([[1.0], [2.0]])


def fd_jacobian(f, x, eps=1e-6):
    x = np.asarray(x, dtype=float)
    out = np.asarray(f(x))
    J = np.zeros(out.shape + x.shape)
    for idx in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[idx] = eps
        J[(...,) + idx] = (np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * eps)
    return J


@pytest.mark.parametrize("mode", ["forward", "reverse", None])
def test_seed000_jacobian_has_shape_out_by_in(mode):
    x = RNG.normal(size=(2, 3))
    J = s2sad.jacobian(layer, mode=mode)(x)
    assert J.shape == (2, 4, 2, 3)
    np.testing.assert_allclose(J, fd_jacobian(layer, x), rtol=1e-6, atol=1e-8)


def smooth_fill(x, a):
    y = np.zeros_like(x)
    y[0] = x[0]
    for i in range(1, x.shape[0]):
        if x[i] > y[i - 1]:
            y[i] = a * y[i - 1] + (1 - a) * x[i]
        else:
            y[i] = y[i - 1] * np.cos(x[i])
    return y


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_jacobian_of_loop_with_branch_and_in_place_write(mode):
    x = np.array([0.3, -0.2, 0.9, 0.1, 1.4])
    J = s2sad.jacobian(smooth_fill, mode=mode)(x, 0.6)
    np.testing.assert_allclose(J, fd_jacobian(lambda v: smooth_fill(v, 0.6), x), atol=1e-7)
    Ja = s2sad.jacobian(smooth_fill, wrt="a", mode=mode)(x, 0.6)
    assert Ja.shape == (5,)


def two_args(x, w):
    return np.sin(x * w) + w**2


def test_jacobian_of_a_tuple_wrt_gives_a_tuple():
    x, w = RNG.normal(size=3), RNG.normal(size=3)
    Jx, Jw = s2sad.jacobian(two_args, wrt=(0, 1))(x, w)
    np.testing.assert_allclose(Jx, np.diag(w * np.cos(x * w)), atol=1e-12)
    np.testing.assert_allclose(Jw, np.diag(x * np.cos(x * w) + 2 * w), atol=1e-12)


# ----------------------------------------------------------------------------- seed 001


def hidden(x, Wh, b):
    return np.tanh(Wh @ x + b)


def loss_of_hidden(h, y0):
    return np.mean((h - y0) ** 2)


def full_loss(x, Wh, b, y0):
    return loss_of_hidden(hidden(x, Wh, b), y0)


def test_seed001_chain_rule_by_parts():
    """d loss/dW from d loss/dh contracted with dh/dW equals the whole gradient."""
    x, Wh, b, y0 = (
        RNG.normal(size=4),
        RNG.normal(size=(3, 4)),
        RNG.normal(size=3),
        RNG.normal(size=3),
    )
    whole = s2sad.grad(full_loss, wrt="Wh")(x, Wh, b, y0)
    h = hidden(x, Wh, b)
    g1 = s2sad.grad(loss_of_hidden)(h, y0)  # shape of h
    J = s2sad.jacobian(hidden, wrt="Wh")(x, Wh, b)  # h.shape + Wh.shape
    np.testing.assert_allclose(np.tensordot(g1, J, axes=1), whole, rtol=1e-10)
    _, pullback = s2sad.vjp(hidden, wrt="Wh")(x, Wh, b)
    np.testing.assert_allclose(pullback(g1), whole, rtol=1e-10)


def test_seed001_externally_computed_cotangent_pulled_back():
    """A loss measured outside Python: its gradient wrt the model output drives the pullback."""
    x, Wh, b = RNG.normal(size=4), RNG.normal(size=(3, 4)), RNG.normal(size=3)
    out, pullback = s2sad.vjp(hidden, wrt=("Wh", "b"))(x, Wh, b)
    measured = np.array([0.5, -1.0, 2.0])  # dL/d(out), from the black box
    dWh, db = pullback(measured)
    J_b = fd_jacobian(lambda v: hidden(x, Wh, v), b)
    np.testing.assert_allclose(db, measured @ J_b, rtol=1e-6)
    assert dWh.shape == Wh.shape


# ----------------------------------------------------------------------------- jvp


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_jvp_agrees_with_jacobian_contracted_with_the_tangent(mode):
    x, t = RNG.normal(size=(2, 3)), RNG.normal(size=(2, 3))
    out, tangent = s2sad.jvp(layer)(x, tangent=t)
    np.testing.assert_allclose(out, layer(x))
    J = s2sad.jacobian(layer, mode=mode)(x)
    np.testing.assert_allclose(tangent, np.tensordot(J, t, axes=2), rtol=1e-10)


def test_jvp_with_tuple_wrt_and_scalars():
    out, tangent = s2sad.jvp(two_args, wrt=(0, 1))(1.5, 0.5, tangent=(1.0, 0.0))
    assert isinstance(tangent, float) and tangent == pytest.approx(0.5 * np.cos(0.75))


def test_jvp_tangent_shape_is_checked():
    with pytest.raises(s2sad.SeedShapeError, match="tangent of 'x'"):
        s2sad.jvp(layer)(np.ones((2, 3)), tangent=np.ones(3))


def test_jvp_source_interleaves_tangents():
    src = s2sad.source(s2sad.jvp(smooth_fill))
    assert "def jvp_smooth_fill(x, a, x_dot):" in src
    assert "y_dot[i] = " in src and "return smooth_fill, smooth_fill_dot" in src


@s2sad.custom_vjp
def clipped(x):
    return np.clip(x, 0.0, 1.0)


@clipped.defvjp
def _clipped_rule(dy, y, x):
    return dy


def uses_clipped(x):
    return np.sum(clipped(x))


def test_jvp_through_a_custom_vjp_is_refused_clearly():
    with pytest.raises(s2sad.NoRuleError, match="forward-mode"):
        s2sad.jvp(uses_clipped)(np.ones(2), tangent=np.ones(2))


# ----------------------------------------------------------------------------- hessian


def quadratic(x, A):
    return 0.5 * x @ A @ x


def log_sum_exp(x):
    m = np.max(x)
    return m + np.log(np.sum(np.exp(x - m)))


def mlp_loss(w, X, y):
    h = np.tanh(X @ w[:3].reshape(3, 1) + w[3])
    return np.mean((h[:, 0] - y) ** 2)


def loop_energy(x):
    e = 0.0
    for i in range(1, x.shape[0]):
        d = x[i] - x[i - 1]
        if d > 0:
            e = e + d**3
        else:
            e = e + np.sin(d)
    return e


def cyclic_products(x):
    # x[(i + 1) % n] is a scatter with a computed index in the gradient code (np.add.at), whose
    # tangent the Hessian's forward sweep once dropped: half the mixed terms were missing
    s = 0.0
    for i in range(x.shape[0]):
        s = s + x[i] ** 3 * x[(i + 1) % x.shape[0]]
    return s


def fd_hessian(f, x, *rest, eps=1e-5):
    g = s2sad.grad(f)
    H = np.zeros((x.size, x.size))
    for k in range(x.size):
        e = np.zeros(x.size)
        e[k] = eps
        H[:, k] = (g(x + e, *rest) - g(x - e, *rest)) / (2 * eps)
    return H


def test_hessian_of_a_quadratic_form_is_its_matrix():
    A = RNG.normal(size=(4, 4))
    A = A + A.T
    np.testing.assert_allclose(s2sad.hessian(quadratic)(RNG.normal(size=4), A), A, atol=1e-12)


@pytest.mark.parametrize(
    "f, args",
    [
        (log_sum_exp, (RNG.normal(size=5),)),
        (mlp_loss, (RNG.normal(size=4), RNG.normal(size=(6, 3)), RNG.normal(size=6))),
        (loop_energy, (np.array([0.1, 0.5, 0.2, 0.9, 0.7]),)),
        (cyclic_products, (np.array([0.2, -0.7, 1.1, 0.4]),)),
    ],
)
def test_hessian_matches_finite_differences_of_the_gradient(f, args):
    H = s2sad.hessian(f)(*args)
    assert H.shape == args[0].shape * 2
    np.testing.assert_allclose(H, fd_hessian(f, *args), atol=1e-6)
    np.testing.assert_allclose(H, H.T, atol=1e-10)


def test_per_basis_hessian_of_a_scatter_with_a_computed_index():
    x = np.array([0.2, -0.7, 1.1, 0.4])
    H = s2sad.hessian(cyclic_products, batched=False)(x)
    np.testing.assert_allclose(H, fd_hessian(cyclic_products, x), atol=1e-6)


def scatter_add(x):
    y = np.zeros(3)
    np.add.at(y, [0, 0, 2], x)
    return y * 2.0


def test_np_add_at_in_forward_mode():
    expected = [[2.0, 2.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 2.0]]  # repeated index 0 adds up
    x = np.array([0.2, -0.7, 1.1])
    for batched in (True, False):
        J = s2sad.jacobian(scatter_add, mode="forward", batched=batched)(x)
        np.testing.assert_array_equal(J, expected)
    np.testing.assert_array_equal(s2sad.jvp(scatter_add)(x, tangent=np.ones(3))[1], [4.0, 0, 2])


def test_hessian_of_scalar_function_is_a_float():
    def f(x):
        return x**3 + np.sin(x)

    assert s2sad.hessian(f)(0.7) == pytest.approx(6 * 0.7 - np.sin(0.7))


def joined_after_a_constant(w, x):
    return np.concatenate([x[0:1], w.sum(axis=(0, 1))], axis=0) * 2.0


def stacked_after_a_constant(w, x):
    return np.sum(np.stack([x, np.sin(w), x * w], axis=1) ** 2, axis=0)


@pytest.mark.parametrize("f", [joined_after_a_constant, stacked_after_a_constant])
def test_jvp_of_a_list_whose_first_element_carries_no_tangent(f):
    """Found by the JAX differential test (fuzz seed 53): forward mode dropped the whole
    tangent of np.concatenate/np.stack when the list's first element was inactive."""
    rng = np.random.default_rng(3)
    w = rng.normal(size=(3, 3, 2)) if f is joined_after_a_constant else rng.normal(size=3)
    x = rng.normal(size=3)
    t = rng.normal(size=w.shape)
    _, dot = s2sad.jvp(f)(w, x, tangent=t)
    eps = 1e-6
    fd = (f(w + eps * t, x) - f(w - eps * t, x)) / (2 * eps)
    np.testing.assert_allclose(dot, fd, rtol=1e-7, atol=1e-9)
    assert np.abs(dot).max() > 0.1


C32 = np.zeros((3, 2))


def plus_larger_constant(x):
    y = x + C32
    return np.sum(y, axis=0) * 2


def test_jvp_tangent_takes_the_shape_of_a_larger_constant_operand():
    """x + C with C larger than x: the tangent is broadcast before the sum over C's axis."""
    x = np.array([1.0, 2.0])
    _, tangent = s2sad.jvp(plus_larger_constant)(x, tangent=np.array([1.0, 0.0]))
    np.testing.assert_allclose(tangent, [6.0, 0.0])
    assert "np.broadcast_to(x_dot, np.shape(y))" in s2sad.source(s2sad.jvp(plus_larger_constant))


def test_jvp_of_math_functions_of_two_arguments():
    def f(x, y):
        return math.log(x, y) + math.atan2(x, y) + math.hypot(x, y) + math.pow(x, y)

    _, tangent = s2sad.jvp(f, wrt=(0, 1))(1.3, 2.5, tangent=(1.0, 0.5))
    eps = 1e-6
    fd = (f(1.3 + eps, 2.5 + eps / 2) - f(1.3 - eps, 2.5 - eps / 2)) / (2 * eps)
    assert tangent == pytest.approx(fd, rel=1e-6)


# ----------------------------------------------------------------------------- hessians through
# linear algebra and nonlinear reductions: each runtime helper the gradient calls has a tangent

HA = RNG.normal(size=(3, 3)) + 4 * np.eye(3)
HB = RNG.normal(size=(3, 2))


def h_inv(x):
    return np.sum(np.linalg.inv(HA + np.outer(x, x)))


def h_det(x):
    return np.linalg.det(HA + np.outer(x, x))


def h_solve_vector(x):
    return np.sum(np.linalg.solve(HA + np.outer(x, x), x) ** 2)


def h_solve_matrix(x):
    return np.sum(np.linalg.solve(HA + np.outer(x, x), HB * x[0]) ** 2)


def h_norm_cubed(x):
    return np.linalg.norm(x) ** 3


def h_norm_ord3(x):
    return np.linalg.norm(x, ord=3) ** 2


def h_norm_axis(x):
    return np.sum(np.linalg.norm(np.outer(x, x) + HA, axis=0) ** 2)


def h_norm_fro(x):
    return np.linalg.norm(np.outer(x, x) + HA, "fro") ** 3


def h_prod(x):
    return np.prod(x + 2.0)


def h_prod_axis(x):
    return np.sum(np.prod(np.outer(x, x) + 1.0, axis=1, keepdims=True) ** 2)


def h_var_std(x):
    return np.var(x) + np.std(x)


def h_std_axis(x):
    return np.sum(np.std(np.outer(x, x + 1.0), axis=0, ddof=1) ** 2)


def h_einsum(x):
    return np.einsum("i,ij,j->", x, HA, x) ** 2


def h_extrema(x):
    return np.max(x**2) * np.min(np.sin(x))


def h_cumsum(x):
    return np.sum(np.cumsum(np.outer(x, x), axis=1) ** 2) + np.sum(np.cumsum(x) ** 3)


def h_diff(x):
    return np.sum(np.diff(x**2) ** 3)


def h_diag(x):
    return np.sum(np.diag(x) @ HA @ np.diag(x**2)) + np.sum(np.diagonal(np.outer(x, x**2)) ** 2)


def h_scatter_add(x):
    y = np.zeros(3)
    np.add.at(y, [0, 0, 2], x**2)
    return np.sum(y**2)


HESSIAN_CASES = [
    h_cumsum,
    h_diff,
    h_diag,
    h_scatter_add,
    h_inv,
    h_det,
    h_solve_vector,
    h_solve_matrix,
    h_norm_cubed,
    h_norm_ord3,
    h_norm_axis,
    h_norm_fro,
    h_prod,
    h_prod_axis,
    h_var_std,
    h_std_axis,
    h_einsum,
    h_extrema,
]


@pytest.mark.parametrize("batched", [True, False], ids=["batched", "per-basis"])
@pytest.mark.parametrize("f", HESSIAN_CASES, ids=lambda f: f.__name__)
def test_hessian_through_linear_algebra_and_reductions(f, batched):
    x = np.array([0.3, -0.7, 1.1])
    H = s2sad.hessian(f, batched=batched)(x)
    assert H.shape == (3, 3)
    np.testing.assert_allclose(H, fd_hessian(f, x), atol=1e-6, rtol=1e-6)
    np.testing.assert_allclose(H, H.T, atol=1e-10)


def h_prod_plain(x):
    return np.prod(x)


@pytest.mark.parametrize("batched", [True, False], ids=["batched", "per-basis"])
def test_hessian_of_a_product_at_zeros_is_exact(batched):
    # d2/dxi dxj prod(x) = product of the others: no division by a zero element
    x = np.array([0.0, 2.0, 3.0, 0.5])
    H = s2sad.hessian(h_prod_plain, batched=batched)(x)
    expected = np.array(
        [[0.0 if i == j else np.prod(np.delete(x, [i, j])) for j in range(4)] for i in range(4)]
    )
    np.testing.assert_allclose(H, expected, atol=1e-14)
    x = np.array([0.0, 2.0, 0.0, 0.5])  # two zeros: only their pair survives
    H = s2sad.hessian(h_prod_plain, batched=batched)(x)
    assert H[0, 2] == H[2, 0] == 1.0
    assert np.count_nonzero(H) == 2


def h_nuclear(x):
    return np.linalg.norm(np.outer(x, x) + HA, "nuc")


def test_hessian_through_a_nuclear_norm_is_refused():
    with pytest.raises(ValueError, match="no second derivative of np.linalg.norm"):
        s2sad.hessian(h_nuclear)(np.array([0.3, -0.7, 1.1]))


def test_register_vjp_on_a_ufunc_with_keyword_parameters():
    """scipy.special.ndtr's signature lists out=, where=, ..., signature=: only its input is
    differentiated, and a parameter named like one of defvjp's own (`signature`) clashes with
    nothing (the README's example; it raised TypeError with NumPy 2.4). ndtr has no rule of
    s2sad's own, so registering one changes nothing for other tests."""
    special = pytest.importorskip("scipy.special")
    s2sad.register_vjp(special.ndtr, lambda dy, y, x: dy * np.exp(-x * x / 2) / np.sqrt(2 * np.pi))

    def f(x):
        return np.sum(special.ndtr(x * 2.0))

    x = np.array([0.3, -1.2])
    density = np.exp(-2 * x * x) / np.sqrt(2 * np.pi)
    np.testing.assert_allclose(s2sad.grad(f)(x), 2 * density, rtol=1e-14)
