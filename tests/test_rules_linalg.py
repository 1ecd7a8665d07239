"""Linear algebra rules: matmul (every operand rank, batched and broadcast), dot, outer, einsum,
trace, transposes, inv, solve and det."""

import numpy as np
import pytest

import s2sad
from conftest import check_grad, check_jvp, check_vjp, rand


def r(*shape, seed=0):
    return rand(*shape, seed=seed)


def well_conditioned(n, seed=0, batch=()):
    """A random matrix (or stack) safely away from singular: I * n + noise."""
    a = rand(*batch, n, n, seed=seed, low=-0.5, high=0.5)
    return a + n * np.eye(n)


# ----------------------------------------------------------------------------- matmul


def mm_op(a, b):
    return a @ b


def mm_fn(a, b):
    return np.matmul(a, b)


MATMUL_SHAPES = [
    ((3, 4), (4, 2)),
    ((4,), (4, 2)),
    ((3, 4), (4,)),
    ((4,), (4,)),
    ((5, 3, 4), (4, 2)),
    ((3, 4), (5, 4, 2)),
    ((5, 3, 4), (5, 4, 2)),
    ((1, 3, 4), (5, 4, 2)),
    ((5, 3, 4), (1, 4, 2)),
    ((2, 1, 3, 4), (5, 4, 2)),
    ((5, 3, 4), (4,)),
    ((4,), (5, 4, 2)),
    ((1, 1), (1, 1)),
]


@pytest.mark.parametrize(
    "shapes",
    MATMUL_SHAPES,
    ids=["@".join("x".join(map(str, s)) or "0d" for s in sh) for sh in MATMUL_SHAPES],
)
@pytest.mark.parametrize("f", [mm_op, mm_fn], ids=["at", "np.matmul"])
def test_matmul(f, shapes):
    a = r(*shapes[0], seed=1)
    b = r(*shapes[1], seed=2)
    g = check_vjp(f, (a, b), wrt=(0, 1))
    assert g[0].shape == a.shape and g[1].shape == b.shape


@pytest.mark.parametrize("which", [0, 1])
def test_matmul_one_operand(which):
    check_vjp(mm_op, (r(3, 4, seed=1), r(4, 2, seed=2)), wrt=which)


def test_matmul_broadcast_batch_exact():
    # (1,3,4) @ (5,4,2): the gradient of the size-1 batch sums over the 5 batches
    a = r(1, 3, 4, seed=3)
    b = r(5, 4, 2, seed=4)
    g = rand(5, 3, 2, seed=5)
    _, pb = s2sad.vjp(mm_op, wrt=(0, 1))(a, b)
    ga, gb = pb(g)
    np.testing.assert_allclose(ga, np.sum(g @ np.swapaxes(b, -1, -2), axis=0, keepdims=True))
    np.testing.assert_allclose(gb, np.swapaxes(a, -1, -2) @ g)


# seed 003: C = A @ B; for E = sum(G * C), dE/dA = G @ B.T and dE/dB = A.T @ G


def weighted_matmul(a, b, g):
    return np.sum(g * (a @ b))


def weighted_matmul_lhs_transposed(a, b, g):
    return np.sum(g * (a.T @ b))


def weighted_matmul_rhs_transposed(a, b, g):
    return np.sum(g * (a @ b.T))


def weighted_matmul_both_transposed(a, b, g):
    return np.sum(g * (a.T @ b.T))


def test_seed003_matmul_gradients():
    a, b, g = r(3, 4, seed=1), r(4, 2, seed=2), r(3, 2, seed=3)
    ga, gb = check_grad(weighted_matmul, (a, b, g), wrt=(0, 1))
    np.testing.assert_allclose(ga, g @ b.T, rtol=1e-12)
    np.testing.assert_allclose(gb, a.T @ g, rtol=1e-12)


def test_seed003_matmul_lhs_transposed():
    # C = A.T @ B with A (4, 3): dE/dA = (G @ B.T).T = B @ G.T
    a, b, g = r(4, 3, seed=1), r(4, 2, seed=2), r(3, 2, seed=3)
    ga, gb = check_grad(weighted_matmul_lhs_transposed, (a, b, g), wrt=(0, 1))
    np.testing.assert_allclose(ga, (g @ b.T).T, rtol=1e-12)
    np.testing.assert_allclose(gb, a @ g, rtol=1e-12)


def test_seed003_matmul_rhs_transposed():
    # C = A @ B.T with B (2, 4): dE/dB = (A.T @ G).T = G.T @ A
    a, b, g = r(3, 4, seed=1), r(2, 4, seed=2), r(3, 2, seed=3)
    ga, gb = check_grad(weighted_matmul_rhs_transposed, (a, b, g), wrt=(0, 1))
    np.testing.assert_allclose(ga, g @ b, rtol=1e-12)
    np.testing.assert_allclose(gb, (a.T @ g).T, rtol=1e-12)


def test_seed003_matmul_both_transposed():
    a, b, g = r(4, 3, seed=1), r(2, 4, seed=2), r(3, 2, seed=3)
    ga, gb = check_grad(weighted_matmul_both_transposed, (a, b, g), wrt=(0, 1))
    np.testing.assert_allclose(ga, (g @ b).T, rtol=1e-12)
    np.testing.assert_allclose(gb, (a @ g).T, rtol=1e-12)


def test_seed003_matmul_vjp():
    a, b, g = r(3, 4, seed=1), r(4, 2, seed=2), r(3, 2, seed=3)
    _, pb = s2sad.vjp(mm_op, wrt=(0, 1))(a, b)
    ga, gb = pb(g)
    np.testing.assert_allclose(ga, g @ b.T, rtol=1e-12)
    np.testing.assert_allclose(gb, a.T @ g, rtol=1e-12)


# seed 002: w = matmul(matmul(x, y), z)

X002 = np.array([[[1.0, 1.0], [2.0, 3.0]], [[4.0, 5.0], [6.0, 7.0]]])
Y002 = np.array([[3.0, -7.0], [-1.0, 5.0]])
Z002 = np.array([[[1.0, 1.0], [2.0, 2.0]], [[3.0, 3.0], [-1.0, -1.0]]])
GX002 = np.array([[[-22.0, 18.0], [-22.0, 18.0]], [[32.0, -16.0], [32.0, -16.0]]])
GY002 = np.array([[66.0, -8.0], [80.0, -8.0]])
GZ002 = np.array([[[5.0, 5.0], [-1.0, -1.0]], [[18.0, 18.0], [-10.0, -10.0]]])


def chained_matmul(x, y, z):
    w = np.matmul(np.matmul(x, y), z)
    return w


def chained_matmul_sum(x, y, z):
    w = np.matmul(np.matmul(x, y), z)
    return np.sum(w)


def test_seed002_grad_of_sum():
    gx, gy, gz = s2sad.grad(chained_matmul_sum, wrt=(0, 1, 2))(X002, Y002, Z002)
    np.testing.assert_allclose(gx, GX002, rtol=0, atol=1e-12)
    np.testing.assert_allclose(gy, GY002, rtol=0, atol=1e-12)
    np.testing.assert_allclose(gz, GZ002, rtol=0, atol=1e-12)
    check_grad(chained_matmul_sum, (X002, Y002, Z002), wrt=(0, 1, 2))


def test_seed002_vjp_with_ones():
    w, pb = s2sad.vjp(chained_matmul, wrt=("x", "y", "z"))(X002, Y002, Z002)
    np.testing.assert_allclose(w, np.matmul(np.matmul(X002, Y002), Z002))
    gx, gy, gz = pb(np.ones_like(w))
    np.testing.assert_allclose(gx, GX002, rtol=0, atol=1e-12)
    np.testing.assert_allclose(gy, GY002, rtol=0, atol=1e-12)
    np.testing.assert_allclose(gz, GZ002, rtol=0, atol=1e-12)
    check_vjp(chained_matmul, (X002, Y002, Z002), wrt=(0, 1, 2))


def test_seed002_single_wrt():
    gy = s2sad.grad(chained_matmul_sum, wrt="y")(X002, Y002, Z002)
    np.testing.assert_allclose(gy, GY002, rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------- dot / outer


def dot_fn(a, b):
    return np.dot(a, b)


def dot_method(a, b):
    return a.dot(b)


DOT_SHAPES = [
    ((3, 4), (4, 2)),
    ((4,), (4,)),
    ((3, 4), (4,)),
    ((4,), (4, 2)),
    ((2, 3, 4), (4, 5)),
    ((2, 3, 4), (4,)),
    ((3, 4), (2, 4, 5)),
    ((2, 3, 4), (6, 4, 5)),
    ((), (3, 4)),
    ((3, 4), ()),
]


@pytest.mark.parametrize(
    "shapes",
    DOT_SHAPES,
    ids=[",".join("x".join(map(str, s)) or "0d" for s in sh) for sh in DOT_SHAPES],
)
@pytest.mark.parametrize("f", [dot_fn, dot_method], ids=["np.dot", "method"])
def test_dot(f, shapes):
    a = r(*shapes[0], seed=1)
    b = r(*shapes[1], seed=2)
    check_vjp(f, (a, b), wrt=(0, 1))


def outer_fn(a, b):
    return np.outer(a, b)


@pytest.mark.parametrize("shapes", [((3,), (4,)), ((2, 2), (3,)), ((1,), (1,))], ids=str)
def test_outer(shapes):
    check_vjp(outer_fn, (r(*shapes[0], seed=1), r(*shapes[1], seed=2)), wrt=(0, 1))


# ----------------------------------------------------------------------------- einsum


def es_matmul(a, b):
    return np.einsum("ij,jk->ik", a, b)


def es_sum(a):
    return np.einsum("ij->", a)


def es_diag(a):
    return np.einsum("ii->i", a)


def es_trace(a):
    return np.einsum("ii", a)


def es_batched(a, b):
    return np.einsum("bij,bjk->bik", a, b)


def es_inner(a, b):
    return np.einsum("i,i", a, b)


def es_transpose(a):
    return np.einsum("ij->ji", a)


def es_implicit_matmul(a, b):
    return np.einsum("ij,jk", a, b)


def es_outer(a, b):
    return np.einsum("i,j->ij", a, b)


def es_three(a, b, c):
    return np.einsum("ij,jk,k->i", a, b, c)


def es_spaces(a, b):
    return np.einsum("ij, jk -> ik", a, b)


def es_row_sum(a):
    return np.einsum("ij->i", a)


def es_same_operand_twice(a):
    return np.einsum("ij,ij->", a, a)


EINSUMS = [
    (es_matmul, [(3, 4), (4, 2)]),
    (es_sum, [(3, 4)]),
    (es_diag, [(4, 4)]),
    (es_trace, [(4, 4)]),
    (es_batched, [(2, 3, 4), (2, 4, 5)]),
    (es_inner, [(4,), (4,)]),
    (es_transpose, [(3, 4)]),
    (es_implicit_matmul, [(3, 4), (4, 2)]),
    (es_outer, [(3,), (4,)]),
    (es_three, [(3, 4), (4, 2), (2,)]),
    (es_spaces, [(3, 4), (4, 2)]),
    (es_row_sum, [(3, 4)]),
    (es_same_operand_twice, [(3, 4)]),
]


@pytest.mark.parametrize("f,shapes", EINSUMS, ids=[f.__name__ for f, _ in EINSUMS])
def test_einsum(f, shapes):
    args = tuple(r(*s, seed=i + 1) for i, s in enumerate(shapes))
    check_vjp(f, args, wrt=tuple(range(len(args))))


def test_einsum_trace_exact():
    a = r(3, 3)
    np.testing.assert_array_equal(s2sad.grad(es_trace)(a), np.eye(3))
    np.testing.assert_array_equal(s2sad.grad(es_sum)(a), np.ones((3, 3)))


# ----------------------------------------------------------------------------- trace


def tr(a):
    return np.trace(a)


def tr_offset(a):
    return np.trace(a, offset=1)


def tr_negative_offset(a):
    return np.trace(a, -1)


def tr_axes(a):
    return np.trace(a, axis1=1, axis2=2)


def tr_axes_offset(a):
    return np.trace(a, 1, 0, 2)


def tr_method(a):
    return a.trace()


def tr_method_offset(a):
    return a.trace(offset=2)


TRACES = [
    (tr, (4, 4)),
    (tr, (3, 5)),
    (tr_offset, (4, 4)),
    (tr_offset, (3, 5)),
    (tr_negative_offset, (4, 3)),
    (tr_axes, (2, 3, 3)),
    (tr_axes_offset, (3, 2, 4)),
    (tr, (3, 3, 2)),
    (tr_method, (3, 3)),
    (tr_method_offset, (3, 4)),
]


@pytest.mark.parametrize(
    "f,shape", TRACES, ids=[f"{f.__name__}-{'x'.join(map(str, s))}" for f, s in TRACES]
)
def test_trace(f, shape):
    check_vjp(f, (r(*shape),))


def test_trace_exact():
    np.testing.assert_array_equal(s2sad.grad(tr_offset)(r(3, 3)), np.eye(3, k=1))


# ----------------------------------------------------------------------------- transposes


def t_attr(a):
    return a.T


def t_fn(a):
    return np.transpose(a)


def t_fn_axes(a):
    return np.transpose(a, (1, 2, 0))


def t_fn_axes_list(a):
    return np.transpose(a, axes=[2, 0, 1])


def t_method(a):
    return a.transpose()


def t_method_varargs(a):
    return a.transpose(1, 2, 0)


def t_method_tuple(a):
    return a.transpose((2, 0, 1))


def t_swap(a):
    return np.swapaxes(a, 0, 2)


def t_swap_negative(a):
    return np.swapaxes(a, -1, 1)


def t_swap_method(a):
    return a.swapaxes(0, 1)


def t_moveaxis(a):
    return np.moveaxis(a, 0, -1)


TRANSPOSES = [
    (t_attr, (3, 4)),
    (t_attr, (2, 3, 4)),
    (t_attr, (4,)),
    (t_fn, (2, 3, 4)),
    (t_fn_axes, (2, 3, 4)),
    (t_fn_axes_list, (2, 3, 4)),
    (t_method, (2, 3, 4)),
    (t_method_varargs, (2, 3, 4)),
    (t_method_tuple, (2, 3, 4)),
    (t_swap, (2, 3, 4)),
    (t_swap_negative, (2, 3, 4)),
    (t_swap_method, (2, 3, 4)),
    (t_moveaxis, (2, 3, 4)),
]


@pytest.mark.parametrize(
    "f,shape", TRANSPOSES, ids=[f"{f.__name__}-{'x'.join(map(str, s))}" for f, s in TRANSPOSES]
)
def test_transpose(f, shape):
    check_vjp(f, (r(*shape),))


def gram(a):
    return np.sum((a.T @ a) ** 2)


def test_transpose_in_a_loss():
    check_grad(gram, (r(3, 4),))


# ----------------------------------------------------------------------------- inv / solve / det


def la_inv(a):
    return np.linalg.inv(a)


def la_solve(a, b):
    return np.linalg.solve(a, b)


def la_det(a):
    return np.linalg.det(a)


def la_inv_sum(a):
    return np.sum(np.linalg.inv(a) @ a @ a)


def la_logdet(a):
    return np.log(np.abs(np.linalg.det(a)))


@pytest.mark.parametrize("batch", [(), (2,)], ids=["single", "batched"])
def test_inv(batch):
    check_vjp(la_inv, (well_conditioned(3, seed=1, batch=batch),))


def test_inv_in_a_loss():
    check_grad(la_inv_sum, (well_conditioned(3, seed=2),))


@pytest.mark.parametrize(
    "b_shape", [(3, 2), (3,), (3, 1)], ids=["matrix_b", "vector_b", "column_b"]
)
def test_solve(b_shape):
    a = well_conditioned(3, seed=3)
    b = r(*b_shape, seed=4)
    g = check_vjp(la_solve, (a, b), wrt=(0, 1))
    assert g[0].shape == (3, 3) and g[1].shape == b_shape


def test_solve_batched():
    a = well_conditioned(3, seed=3, batch=(2,))
    b = r(2, 3, 2, seed=4)
    check_vjp(la_solve, (a, b), wrt=(0, 1))


# (a, b) shapes where the matrices and right-hand sides broadcast against each other. How
# NumPy reads b (vectors or matrices) changed in NumPy 2: a 1-D b only is a vector there.
SOLVE_BROADCAST = [
    ((2, 3, 3), (3,)),
    ((2, 3, 3), (3, 4)),
    ((4, 1, 3, 3), (2, 3, 2)),
    ((3, 3), (2, 3, 2)),
]
if int(np.__version__.split(".")[0]) < 2:
    SOLVE_BROADCAST.append(((2, 3, 3), (2, 3)))  # a stack of vectors in NumPy 1


@pytest.mark.parametrize("a_shape, b_shape", SOLVE_BROADCAST, ids=str)
def test_solve_broadcasting(a_shape, b_shape):
    a = well_conditioned(3, seed=8, batch=a_shape[:-2])
    b = r(*b_shape, seed=9)
    ga, gb = check_vjp(la_solve, (a, b), wrt=(0, 1))
    assert ga.shape == a_shape and gb.shape == b_shape
    check_jvp(la_solve, (a, b), wrt=(0, 1))


@pytest.mark.parametrize("which", [0, 1])
def test_solve_one_operand(which):
    check_vjp(la_solve, (well_conditioned(3, seed=5), r(3, seed=6)), wrt=which)


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_det(n):
    a = well_conditioned(n, seed=7) - 0.5 * n * np.eye(n)
    check_vjp(la_det, (a,))


def test_det_batched():
    check_vjp(la_det, (well_conditioned(3, seed=8, batch=(2,)),))


def test_det_exact():
    a = np.array([[2.0, 1.0], [0.5, 3.0]])
    np.testing.assert_allclose(s2sad.grad(la_det)(a), [[3.0, -0.5], [-1.0, 2.0]])


def test_logdet():
    check_grad(la_logdet, (well_conditioned(3, seed=9),))
