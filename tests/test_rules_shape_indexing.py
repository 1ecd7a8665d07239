"""Shape rules (reshape, ravel, expand_dims, squeeze, concatenate, stack, newaxis, copy) and
indexing: ints, slices with steps, Ellipsis, None, integer arrays with repeats, boolean masks."""

import numpy as np
import pytest

import s2sad
from conftest import check_grad, check_jvp, check_vjp, rand


def r(*shape, seed=0):
    return rand(*shape, seed=seed)


# ----------------------------------------------------------------------------- reshape and friends


def reshape_varargs(x):
    return x.reshape(3, 4)


def reshape_tuple(x):
    return x.reshape((4, 3))


def reshape_fn(x):
    return np.reshape(x, (2, 6))


def reshape_fn_list(x):
    return np.reshape(x, [6, 2])


def reshape_minus_one(x):
    return x.reshape(-1)


def reshape_minus_one_varargs(x):
    return x.reshape(2, -1)


def reshape_fn_minus_one(x):
    return np.reshape(x, (-1, 3))


def reshape_fn_shape_keyword(x):
    return np.reshape(x, shape=(3, 2, 2))


def reshape_from_shape(x):
    return x.reshape(x.shape[0] * x.shape[1], -1)


def reshape_single_int(x):
    return np.reshape(x, 12)


def ravel_fn(x):
    return np.ravel(x)


def ravel_method(x):
    return x.ravel()


def flatten_method(x):
    return x.flatten()


def reshape_fortran(x):
    return np.reshape(x, (4, 3), order="F")


def reshape_method_fortran(x):
    return x.reshape(2, 3, 2, order="F")


def reshape_explicit_c(x):
    return np.reshape(x, (2, 6), order="C")


def ravel_fortran(x):
    return np.ravel(x, order="F")


def flatten_fortran(x):
    return x.flatten("F")


def transpose_then_fortran(x):
    return x.T.reshape(-1, order="F")


def expand_dims_0(x):
    return np.expand_dims(x, 0)


def expand_dims_neg(x):
    return np.expand_dims(x, axis=-1)


def expand_dims_tuple(x):
    return np.expand_dims(x, (0, 3))


def squeeze_fn(x):
    return np.squeeze(x)


def squeeze_method(x):
    return x.squeeze()


def squeeze_axis(x):
    return np.squeeze(x, axis=1)


def squeeze_method_axis(x):
    return x.squeeze(-1)


def newaxis_none(x):
    return x[None]


def newaxis_np(x):
    return x[np.newaxis]


def newaxis_middle(x):
    return x[:, None]


def newaxis_np_middle(x):
    return x[:, np.newaxis, :]


def newaxis_both_ends(x):
    return x[None, ..., None]


def copy_method(x):
    return x.copy()


def copy_fn(x):
    return np.copy(x)


def layouts(x):  # the same values in another memory layout: the cotangent passes through
    return np.ascontiguousarray(np.asfortranarray(x.T) * 2.0) + np.asanyarray(x.T)


def broadcast_to(x):
    return np.broadcast_to(x, (2, 3, 4))


SHAPE_OPS = [
    (reshape_varargs, (2, 6)),
    (reshape_varargs, (12,)),
    (reshape_tuple, (3, 4)),
    (reshape_fn, (3, 4)),
    (reshape_fn_list, (3, 4)),
    (reshape_minus_one, (3, 4)),
    (reshape_minus_one_varargs, (3, 4)),
    (reshape_fn_minus_one, (2, 2, 3)),
    (reshape_fn_shape_keyword, (3, 4)),
    (reshape_from_shape, (3, 4)),
    (reshape_single_int, (3, 4)),
    (ravel_fn, (3, 4)),
    (ravel_method, (2, 3, 2)),
    (flatten_method, (3, 4)),
    (reshape_fortran, (3, 4)),
    (reshape_fortran, (2, 6)),
    (reshape_method_fortran, (3, 4)),
    (reshape_explicit_c, (3, 4)),
    (ravel_fortran, (3, 4)),
    (ravel_fortran, (2, 3, 2)),
    (flatten_fortran, (3, 4)),
    (transpose_then_fortran, (3, 4)),
    (expand_dims_0, (3, 4)),
    (expand_dims_neg, (3, 4)),
    (expand_dims_tuple, (3, 4)),
    (squeeze_fn, (1, 3, 1, 4)),
    (squeeze_method, (3, 1)),
    (squeeze_axis, (3, 1, 4)),
    (squeeze_method_axis, (3, 4, 1)),
    (newaxis_none, (3, 4)),
    (newaxis_np, (3, 4)),
    (newaxis_middle, (3, 4)),
    (newaxis_np_middle, (3, 4)),
    (newaxis_both_ends, (3, 4)),
    (copy_method, (3, 4)),
    (copy_fn, (3, 4)),
    (layouts, (3, 4)),
    (layouts, (2, 3, 2)),
    (broadcast_to, (3, 4)),
    (broadcast_to, (1, 4)),
    (broadcast_to, (3, 1)),
]


@pytest.mark.parametrize(
    "f,shape", SHAPE_OPS, ids=[f"{f.__name__}-{'x'.join(map(str, s))}" for f, s in SHAPE_OPS]
)
def test_shape_op(f, shape):
    g = check_vjp(f, (r(*shape),))
    assert g.shape == shape


def test_layout_changes_in_every_mode():
    """np.ascontiguousarray and np.asfortranarray compile with Numba (np.asanyarray does not)."""

    def f(x):
        return np.sum(np.ascontiguousarray(np.asfortranarray(x * 2.0).T) ** 2)

    x = r(3, 4)
    expected = 8.0 * x
    for jit in (False, "strict"):
        np.testing.assert_allclose(s2sad.grad(f, jit=jit)(x), expected, rtol=1e-13)
        value, tangent = s2sad.jvp(f, jit=jit)(x, tangent=np.ones_like(x))
        np.testing.assert_allclose(tangent, np.sum(expected), rtol=1e-13)


def layout_of_a_number(s):  # a 0-d array or number comes back a (1,) array
    return np.sum(np.ascontiguousarray(s) * np.array([1.0, 2.0, 3.0])) + np.sum(
        np.asfortranarray(s * s)
    )


@pytest.mark.parametrize("s", [np.array(0.5), np.float64(0.5), 0.5])
def test_layout_change_of_a_number_gives_its_shape_back(s):
    for jit in (False, True):
        g = s2sad.grad(layout_of_a_number, jit=jit)(s)
        assert np.shape(g) == () and g == 7.0
        np.testing.assert_allclose(s2sad.hessian(layout_of_a_number)(s), 2.0)
        np.testing.assert_allclose(s2sad.jacobian(layout_of_a_number, jit=jit)(s), 7.0)


def test_reshape_chain_exact():
    def f(x):
        y = x.reshape(2, 3)
        return np.sum(y * np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))

    np.testing.assert_array_equal(s2sad.grad(f)(r(6)), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])


FORTRAN_OPS = [reshape_fortran, reshape_method_fortran, ravel_fortran, flatten_fortran]


@pytest.mark.parametrize("f", FORTRAN_OPS, ids=lambda f: f.__name__)
def test_fortran_order_is_a_permutation_in_every_mode(f):
    """order='F' reads and writes the elements column by column: the Jacobian is the
    permutation matching the k-th element in Fortran order of output and input, whatever the
    mode or sweep."""
    x = r(3, 4)
    out = f(x)
    rows = np.ravel(np.arange(12).reshape(out.shape), order="F")  # C positions, in F order
    cols = np.ravel(np.arange(12).reshape(x.shape), order="F")
    reference = np.zeros((12, 12))
    reference[rows, cols] = 1.0
    reference = reference.reshape(out.shape + x.shape)
    for mode in ("reverse", "forward"):
        for batched in (True, False):
            jac = s2sad.jacobian(f, mode=mode, batched=batched)(x)
            np.testing.assert_array_equal(jac, reference, err_msg=f"{mode} batched={batched}")
    t = r(3, 4, seed=1)
    np.testing.assert_array_equal(s2sad.jvp(f)(x, tangent=t)[1], f(t))


def test_fortran_reshape_gradient_exact():
    def f(x):
        return np.sum(np.reshape(x, (3, 2), order="F") * np.arange(6.0).reshape(3, 2))

    # x[a, b] is element a + 2b in Fortran order, which is y[i, j] with i + 3j = a + 2b, and
    # y[i, j] is weighted 2i + j: x[0, 1] -> y[2, 0] (4), x[1, 0] -> y[1, 0] (2), ...
    np.testing.assert_array_equal(s2sad.grad(f)(r(2, 3)), [[0.0, 4.0, 3.0], [2.0, 1.0, 5.0]])


def reshape_any_order(x):
    return np.sum(np.reshape(x, (3, 2), order="A") ** 2)


def ravel_keep_order(x):
    return np.sum(np.ravel(x, order="K") ** 2)


def reshape_order_variable(x, order):
    return np.sum(x.reshape(6, order=order) ** 2)


@pytest.mark.parametrize("f", [reshape_any_order, ravel_keep_order, reshape_order_variable])
def test_orders_that_depend_on_memory_layout_are_refused(f):
    """'A' and 'K' follow the array's memory layout, which the tangent or cotangent need not
    share; an order known only at run time could be either: refused in both modes, by name."""
    args = (r(2, 3),) + (("F",) if f is reshape_order_variable else ())
    with pytest.raises(s2sad.NoRuleError, match=r"with order=.*order='C' or order='F'"):
        s2sad.grad(f, wrt=0)(*args)
    with pytest.raises(s2sad.NoRuleError, match=r"jvp.*with order="):
        s2sad.jvp(f, wrt=0)(*args, tangent=np.ones((2, 3)))


# ----------------------------------------------------------------------------- np.array of literals


def array_of_scalars(x):
    return np.array([x[0] * x[1], 1.0, np.sin(x[2])])


def rotation_applied(x):
    c = np.cos(x[0])
    s = np.sin(x[0])
    R = np.array([[c, -s], [s, c]])
    return R @ x[1:3]


def array_of_rows(x):
    return np.asarray((x, x**2, np.ones(3)), dtype=float) * 2.0


ARRAY_LITERALS = [array_of_scalars, rotation_applied, array_of_rows]


@pytest.mark.parametrize("f", ARRAY_LITERALS, ids=lambda f: f.__name__)
def test_np_array_of_a_list_of_differentiated_values(f):
    """np.array([[c, -s], [s, c]]) gave an internal error; it is np.stack level by level."""
    x = np.array([0.3, -0.7, 1.1])
    check_vjp(f, (x,))
    check_jvp(f, (x,))
    fd = np.stack([(f(x + e) - f(x - e)) / 2e-6 for e in np.eye(3) * 1e-6], axis=-1)
    for mode in ("reverse", "forward"):
        for batched in (True, False):
            jac = s2sad.jacobian(f, mode=mode, batched=batched)(x)
            np.testing.assert_allclose(jac, fd, atol=1e-7, err_msg=f"{mode} {batched}")


def test_np_array_of_scalars_exact():
    def f(w):
        return np.sum(np.array([w, w * w]))

    assert s2sad.grad(f)(0.9) == pytest.approx(2.8, abs=1e-15)


# ----------------------------------------------------------------------------- np.add.at


def scatter_into_zeros(x):
    y = np.zeros(3)
    np.add.at(y, [0, 0, 2], x)  # index 0 twice: both add
    return y * 2.0


def assemble(x, idx):
    K = np.zeros(4)
    for e in range(idx.shape[0]):
        np.add.at(K, idx[e], x[e] * np.array([1.0, -1.0]))
    return np.sum(K**2)


def scatter_then_read(x, w):
    y = np.sin(x)
    s = np.sum(y * y)  # reads y before the scatter
    np.add.at(y, (np.array([1, 1]),), w)
    return s + np.sum(y**3)


def scatter_view_read_after(x):
    y = x * 1.0
    z = y[0:2]  # a view: in Python it sees the scatter
    np.add.at(y, [1], 1.0)
    return np.sum(z)


def test_np_add_at_is_followed_in_every_mode():
    x = np.array([0.2, -0.7, 1.1])
    expected = [[2.0, 2.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 2.0]]
    for mode in ("reverse", "forward"):
        for batched in (True, False):
            jac = s2sad.jacobian(scatter_into_zeros, mode=mode, batched=batched)(x)
            np.testing.assert_array_equal(jac, expected, err_msg=f"{mode} {batched}")
    idx = np.array([[0, 1], [1, 2], [2, 3]])
    check_vjp(assemble, (x, idx))
    check_jvp(assemble, (x, idx))
    w = np.array(0.4)
    check_vjp(scatter_then_read, (x, w), wrt=(0, 1))
    check_jvp(scatter_then_read, (x, w), wrt=(0, 1))
    y = x.copy()
    s2sad.grad(assemble)(y, idx)
    np.testing.assert_array_equal(y, x)  # the caller's array is not written


def test_np_add_at_makes_earlier_views_stale():
    with pytest.raises(s2sad.UnsupportedSyntaxError, match="may be a view of `y`"):
        s2sad.grad(scatter_view_read_after)(np.array([0.2, -0.7, 1.1]))


def test_copy_does_not_alias():
    x = r(3, 4)
    out, pb = s2sad.vjp(copy_method)(x)
    seed = np.ones((3, 4))
    g = pb(seed)
    assert not np.shares_memory(g, seed) and not np.shares_memory(g, x)
    g[0, 0] = 100.0
    assert seed[0, 0] == 1.0


# ----------------------------------------------------------------------------- concatenate / stack


def concat_0(x, y):
    return np.concatenate([x, y])


def concat_1(x, y):
    return np.concatenate((x, y), axis=1)


def concat_neg(x, y):
    return np.concatenate([x, y], axis=-1)


def concat_none(x, y):
    return np.concatenate([x, y], axis=None)


def concat_three_with_constant(x, y):
    return np.concatenate([x, np.ones((2, 4)), y], axis=0)


def concat_same_twice(x, y):
    return np.concatenate([x, x, y], axis=0)


def concat_expression(x, y):
    return np.concatenate([x * 2.0, np.sin(y)], axis=0)


CONCATS = [
    (concat_0, (2, 4), (3, 4)),
    (concat_0, (2,), (3,)),
    (concat_1, (3, 2), (3, 5)),
    (concat_neg, (2, 3, 1), (2, 3, 2)),
    (concat_none, (2, 3), (4,)),
    (concat_three_with_constant, (3, 4), (1, 4)),
    (concat_same_twice, (2, 4), (3, 4)),
    (concat_expression, (2, 4), (3, 4)),
]


@pytest.mark.parametrize(
    "f,sx,sy", CONCATS, ids=[f"{f.__name__}-{sx}-{sy}".replace(" ", "") for f, sx, sy in CONCATS]
)
def test_concatenate(f, sx, sy):
    g = check_vjp(f, (r(*sx, seed=1), r(*sy, seed=2)), wrt=(0, 1))
    assert g[0].shape == sx and g[1].shape == sy


def test_concatenate_one_active():
    check_vjp(concat_1, (r(3, 2, seed=1), r(3, 5, seed=2)), wrt=1)


def test_concatenate_same_twice_exact():
    def f(x):
        return np.sum(np.concatenate([x, x]) * np.array([1.0, 2.0, 3.0, 4.0]))

    np.testing.assert_array_equal(s2sad.grad(f)(r(2)), [4.0, 6.0])


def stack_0(x, y):
    return np.stack([x, y])


def stack_1(x, y):
    return np.stack((x, y), axis=1)


def stack_neg(x, y):
    return np.stack([x, y], axis=-1)


def stack_three(x, y):
    return np.stack([x, y, x * y], axis=0)


def stack_with_constant(x, y):
    return np.stack([np.zeros((2, 3)), x, y], axis=2)


STACKS = [stack_0, stack_1, stack_neg, stack_three, stack_with_constant]


@pytest.mark.parametrize("f", STACKS, ids=lambda f: f.__name__)
def test_stack(f):
    g = check_vjp(f, (r(2, 3, seed=1), r(2, 3, seed=2)), wrt=(0, 1))
    assert g[0].shape == (2, 3) and g[1].shape == (2, 3)


@pytest.mark.parametrize("f", [stack_0, stack_1, stack_neg], ids=lambda f: f.__name__)
def test_stack_vectors(f):
    check_vjp(f, (r(4, seed=1), r(4, seed=2)), wrt=(0, 1))


# ----------------------------------------------------------------------------- basic indexing


def ix_int(x):
    return x[1]


def ix_neg_int(x):
    return x[-1]


def ix_two_ints(x):
    return x[1, 2]


def ix_two_neg_ints(x):
    return x[-1, -2]


def ix_step(x):
    return x[::2]


def ix_start_stop_step(x):
    return x[1:-1:2]


def ix_reverse(x):
    return x[::-1]


def ix_slice_tuple(x):
    return x[1:, ::2]


def ix_int_and_slice(x):
    return x[:, 1]


def ix_neg_step_tuple(x):
    return x[::-2, 1:3]


def ix_ellipsis_last(x):
    return x[..., 0]


def ix_ellipsis_first(x):
    return x[0, ...]


def ix_ellipsis_slice(x):
    return x[..., 1:3]


def ix_ellipsis_middle(x):
    return x[1, ..., -1]


def ix_slice_none_int(x):
    return x[:, None, 2]


def ix_empty_slice(x):
    return x[2:2]


def ix_full(x):
    return x[:]


def ix_scalar_chain(x):
    return x[1][2]


BASIC = [
    (ix_int, (4, 3)),
    (ix_int, (5,)),
    (ix_neg_int, (4, 3)),
    (ix_two_ints, (3, 4)),
    (ix_two_neg_ints, (3, 4)),
    (ix_step, (7,)),
    (ix_step, (5, 3)),
    (ix_start_stop_step, (8,)),
    (ix_start_stop_step, (7, 2)),
    (ix_reverse, (5,)),
    (ix_slice_tuple, (4, 5)),
    (ix_int_and_slice, (4, 3)),
    (ix_neg_step_tuple, (5, 4)),
    (ix_ellipsis_last, (2, 3, 4)),
    (ix_ellipsis_last, (4,)),
    (ix_ellipsis_first, (2, 3, 4)),
    (ix_ellipsis_slice, (2, 3, 4)),
    (ix_ellipsis_middle, (2, 3, 4)),
    (ix_slice_none_int, (2, 3)),
    (ix_empty_slice, (4, 2)),
    (ix_full, (4, 2)),
    (ix_scalar_chain, (3, 4)),
]


@pytest.mark.parametrize(
    "f,shape", BASIC, ids=[f"{f.__name__}-{'x'.join(map(str, s))}" for f, s in BASIC]
)
def test_basic_indexing(f, shape):
    g = check_vjp(f, (r(*shape),))
    assert g.shape == shape


def ix_sum_of_pieces(x):
    return np.sum(x[0] * x[-1]) + np.sum(x[::2] ** 2) + x[1, 1]


def test_indexing_pieces_add_up():
    check_grad(ix_sum_of_pieces, (r(3, 3),))


def test_int_index_exact():
    def f(x):
        return x[1] * 3.0 + x[-1]

    np.testing.assert_array_equal(s2sad.grad(f)(r(4)), [0.0, 3.0, 0.0, 1.0])


# ----------------------------------------------------------------------------- index arguments


def ix_param(x, i):
    return x[i]


def ix_param_pair(x, i, j):
    return x[i, j]


def ix_param_slice(x, i, j):
    return x[i:j]


def ix_param_expr(x, i):
    return x[i + 1] - x[i - 1]


def ix_param_scalar(x, i):
    return x[i] * x[i]


@pytest.mark.parametrize("i", [0, 2, -1])
def test_index_with_int_argument(i):
    check_vjp(ix_param, (r(4, 3), i))
    check_vjp(ix_param, (r(5), i))


def test_index_with_int_arguments_pair():
    check_vjp(ix_param_pair, (r(3, 4), 1, -2))


def test_index_with_slice_bounds_arguments():
    check_vjp(ix_param_slice, (r(6, 2), 1, 4))


def test_index_with_int_expression():
    check_vjp(ix_param_expr, (r(6), 2))


def test_index_scalar_argument_grad():
    g = check_grad(ix_param_scalar, (r(5), 3))
    np.testing.assert_allclose(g, [0, 0, 0, 2 * r(5)[3], 0])


def test_index_with_numpy_integer_argument():
    check_vjp(ix_param, (r(4, 3), np.int64(2)))


# ----------------------------------------------------------------------------- advanced indexing


def fancy(x, idx):
    return x[idx]


def fancy_sum(x, idx):
    return np.sum(x[idx])


def fancy_row(x, idx):
    return x[idx, 1]


def fancy_col(x, idx):
    return x[:, idx]


def fancy_pair(x, idx):
    return x[idx, idx]


def fancy_ellipsis(x, idx):
    return x[..., idx]


def fancy_list_literal(x):
    return x[[0, 0, 2]]


def fancy_squared(x, idx):
    return np.sum(x[idx] * x[idx])


REPEATED = np.array([0, 0, 2])


def test_repeated_indices_count():
    x = r(4)
    g = s2sad.grad(fancy_sum)(x, REPEATED)
    np.testing.assert_array_equal(g, [2.0, 0.0, 1.0, 0.0])
    check_grad(fancy_sum, (x, REPEATED))


def test_repeated_indices_count_2d():
    x = r(4, 2)
    g = s2sad.grad(fancy_sum)(x, np.array([3, 0, 3, 3]))
    np.testing.assert_array_equal(g, [[1.0, 1.0], [0.0, 0.0], [0.0, 0.0], [3.0, 3.0]])


@pytest.mark.parametrize(
    "f,shape,idx",
    [
        (fancy, (4,), REPEATED),
        (fancy, (4, 3), REPEATED),
        (fancy, (4, 3), np.array([[0, 1], [1, 3]])),
        (fancy, (5,), np.array([-1, 0, -1])),
        (fancy_row, (4, 3), REPEATED),
        (fancy_col, (3, 4), REPEATED),
        (fancy_pair, (3, 3), REPEATED),
        (fancy_ellipsis, (2, 3, 4), np.array([3, 3, 1])),
        (fancy, (4, 3), [0, 2, 2]),
    ],
    ids=[
        "1d",
        "2d_rows",
        "2d_index_array",
        "negative",
        "rows_then_int",
        "columns",
        "pairs",
        "ellipsis",
        "python_list",
    ],
)
def test_integer_array_indexing(f, shape, idx):
    g = check_vjp(f, (r(*shape), idx))
    assert g.shape == shape


def test_integer_list_literal():
    g = check_vjp(fancy_list_literal, (r(4, 2),))
    assert g.shape == (4, 2)


def test_repeated_indices_nonlinear():
    x = r(4)
    g = check_grad(fancy_squared, (x, REPEATED))
    np.testing.assert_allclose(g, [4 * x[0], 0.0, 2 * x[2], 0.0])


def masked(x, mask):
    return x[mask]


def masked_sum(x, mask):
    return np.sum(x[mask] ** 2)


def masked_positive(x):
    return np.sum(x[x > 0])


def masked_rows(x, mask):
    return x[mask, :]


def masked_cols(x, mask):
    return x[:, mask]


def masked_where_inside(x):
    m = x < 0.5
    return x[m] * 2.0


@pytest.mark.parametrize(
    "f,shape,mask",
    [
        (masked, (5,), np.array([True, False, True, True, False])),
        (masked, (2, 3), np.array([[True, False, True], [False, False, True]])),
        (masked, (2, 3), np.array([False, True])),
        (masked_rows, (3, 2), np.array([True, False, True])),
        (masked_cols, (2, 3), np.array([False, True, True])),
        (masked, (4,), np.zeros(4, dtype=bool)),
    ],
    ids=["1d", "2d_full_mask", "2d_row_mask", "rows", "cols", "all_false"],
)
def test_boolean_mask(f, shape, mask):
    g = check_vjp(f, (r(*shape), mask))
    assert g.shape == shape


def test_boolean_mask_scalar_loss():
    x = r(3, 4)
    mask = x > 0.1
    g = check_grad(masked_sum, (x, mask))
    np.testing.assert_allclose(g, np.where(mask, 2 * x, 0.0))


def test_boolean_mask_from_comparison():
    x = np.array([0.5, -0.3, 0.2, -0.9, 0.7])
    g = check_grad(masked_positive, (x,))
    np.testing.assert_array_equal(g, [1.0, 0.0, 1.0, 0.0, 1.0])


def test_boolean_mask_computed_in_function():
    x = np.array([[0.1, 0.9], [0.7, 0.2]])
    g = check_vjp(masked_where_inside, (x,))
    assert g.shape == (2, 2)


# ----------------------------------------------------------------------------- transpose axes


def transpose_negative_axes(x):
    return np.sum(np.transpose(x, (0, -1, 1)) * np.arange(24.0).reshape(2, 4, 3))


def transpose_axes_variable(x, axes):
    return np.sum(np.transpose(x, axes) ** 2 * np.arange(24.0).reshape(4, 2, 3))


def test_transpose_with_negative_axes():
    check_grad(transpose_negative_axes, [rand(2, 3, 4)])
    src = s2sad.source(s2sad.grad(transpose_negative_axes), rand(2, 3, 4))
    assert "np.transpose(dtranspose_negative_axes_transpose, (0, 2, 1))" in src


def test_transpose_with_axes_in_a_variable():
    check_grad(transpose_axes_variable, [rand(2, 3, 4), (-1, 0, 1)])


def test_pullback_of_an_element_keeps_float64_with_a_python_float_seed():
    # a Python float seed once made the scattered cotangent float32 (NumPy 2's weak scalars)
    x = rand(3, 4)
    _, pullback = s2sad.vjp(ix_two_ints)(x)
    seed = 0.1257302210933933
    assert pullback(seed)[1, 2] == seed
