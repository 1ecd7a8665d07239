"""Reduction rules: sum, mean, prod, max, min, var, std and np.linalg.norm over every kind of
`axis` (None, int, negative int, tuple) with and without keepdims, as functions and as methods."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, valid_tuple_axes

import s2sad
from conftest import check_grad, check_vjp, rand

SHAPE = (3, 4, 5)

AXES = [None, 0, 1, 2, -1, -2, -3, (0, 2), (2, 0), (-1, 1), (0, 1, 2), ()]


def axis_id(axis):
    return "None" if axis is None else str(axis).replace(" ", "")


def smooth_input(shape=SHAPE, seed=0):
    return rand(*shape, seed=seed, low=-1.0, high=1.0)


def distinct_input(shape=SHAPE, seed=0):
    """Values at least 0.08 apart everywhere, so max/min have no ties and FD stays on one side."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    base = rng.permutation(n).astype(np.float64) * 0.1 - 0.05 * n
    return (base + rng.uniform(-0.01, 0.01, size=n)).reshape(shape)


# ----------------------------------------------------------------------------- axis as an argument


def r_sum(x, axis, keepdims):
    return np.sum(x, axis=axis, keepdims=keepdims)


def r_mean(x, axis, keepdims):
    return np.mean(x, axis=axis, keepdims=keepdims)


def r_prod(x, axis, keepdims):
    return np.prod(x, axis=axis, keepdims=keepdims)


def r_max(x, axis, keepdims):
    return np.max(x, axis=axis, keepdims=keepdims)


def r_min(x, axis, keepdims):
    return np.min(x, axis=axis, keepdims=keepdims)


def r_amax(x, axis, keepdims):
    return np.amax(x, axis=axis, keepdims=keepdims)


def r_amin(x, axis, keepdims):
    return np.amin(x, axis=axis, keepdims=keepdims)


def r_var(x, axis, keepdims):
    return np.var(x, axis=axis, keepdims=keepdims)


def r_std(x, axis, keepdims):
    return np.std(x, axis=axis, keepdims=keepdims)


def m_sum(x, axis, keepdims):
    return x.sum(axis=axis, keepdims=keepdims)


def m_mean(x, axis, keepdims):
    return x.mean(axis=axis, keepdims=keepdims)


def m_prod(x, axis, keepdims):
    return x.prod(axis=axis, keepdims=keepdims)


def m_max(x, axis, keepdims):
    return x.max(axis=axis, keepdims=keepdims)


def m_min(x, axis, keepdims):
    return x.min(axis=axis, keepdims=keepdims)


def m_var(x, axis, keepdims):
    return x.var(axis=axis, keepdims=keepdims)


def m_std(x, axis, keepdims):
    return x.std(axis=axis, keepdims=keepdims)


REDUCERS = {
    "sum": (r_sum, smooth_input),
    "mean": (r_mean, smooth_input),
    "prod": (r_prod, smooth_input),
    "max": (r_max, distinct_input),
    "min": (r_min, distinct_input),
    "amax": (r_amax, distinct_input),
    "amin": (r_amin, distinct_input),
    "var": (r_var, smooth_input),
    "std": (r_std, smooth_input),
    "method_sum": (m_sum, smooth_input),
    "method_mean": (m_mean, smooth_input),
    "method_prod": (m_prod, smooth_input),
    "method_max": (m_max, distinct_input),
    "method_min": (m_min, distinct_input),
    "method_var": (m_var, smooth_input),
    "method_std": (m_std, smooth_input),
}


def _skip_degenerate(name, axis):
    # the std of a single element has no derivative (it is |x - x| = 0)
    if "std" in name and axis == ():
        pytest.skip("std over no axes is identically zero and not differentiable")


@pytest.mark.parametrize("keepdims", [False, True], ids=["nokeep", "keep"])
@pytest.mark.parametrize("axis", AXES, ids=axis_id)
@pytest.mark.parametrize("name", list(REDUCERS))
def test_reduction_axis_argument(name, axis, keepdims):
    _skip_degenerate(name, axis)
    f, make = REDUCERS[name]
    x = make()
    out = f(x, axis, keepdims)
    assert np.shape(out) == np.shape(
        getattr(np, name.replace("method_", ""))(x, axis=axis, keepdims=keepdims)
    )
    check_vjp(f, (x, axis, keepdims))


def r_var_ddof(x, axis, ddof, keepdims):
    return np.var(x, axis=axis, ddof=ddof, keepdims=keepdims)


def r_std_ddof(x, axis, ddof, keepdims):
    return np.std(x, axis=axis, ddof=ddof, keepdims=keepdims)


def m_var_ddof(x, axis, ddof, keepdims):
    return x.var(axis=axis, ddof=ddof, keepdims=keepdims)


def m_std_ddof(x, axis, ddof, keepdims):
    return x.std(axis=axis, ddof=ddof, keepdims=keepdims)


@pytest.mark.parametrize("keepdims", [False, True], ids=["nokeep", "keep"])
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2)], ids=axis_id)
@pytest.mark.parametrize("ddof", [0, 1])
@pytest.mark.parametrize(
    "f", [r_var_ddof, r_std_ddof, m_var_ddof, m_std_ddof], ids=lambda f: f.__name__
)
def test_var_std_ddof(f, ddof, axis, keepdims):
    check_vjp(f, (smooth_input(), axis, ddof, keepdims))


# ----------------------------------------------------------------------------- literal arguments


def l_sum(x):
    return np.sum(x)


def l_sum_axis0(x):
    return np.sum(x, axis=0)


def l_sum_positional_axis(x):
    return np.sum(x, 1)


def l_sum_neg_keep(x):
    return np.sum(x, axis=-1, keepdims=True)


def l_sum_tuple(x):
    return np.sum(x, axis=(0, 2))


def l_sum_tuple_keep(x):
    return np.sum(x, axis=(-1, 0), keepdims=True)


def l_mean(x):
    return np.mean(x)


def l_mean_axis(x):
    return np.mean(x, axis=1)


def l_mean_keep(x):
    return np.mean(x, axis=(1, 2), keepdims=True)


def l_mean_positional(x):
    return np.mean(x, -2)


def l_prod(x):
    return np.prod(x)


def l_prod_axis(x):
    return np.prod(x, axis=1)


def l_prod_keep(x):
    return np.prod(x, axis=(0, -1), keepdims=True)


def l_var(x):
    return np.var(x)


def l_var_axis_ddof(x):
    return np.var(x, axis=0, ddof=1)


def l_std(x):
    return np.std(x)


def l_std_axis_ddof_keep(x):
    return np.std(x, axis=-1, ddof=1, keepdims=True)


def l_std_ddof1(x):
    return np.std(x, ddof=1)


def lm_sum(x):
    return x.sum()


def lm_sum_axis1(x):
    return x.sum(axis=1)


def lm_sum_positional(x):
    return x.sum(0)


def lm_sum_tuple_keep(x):
    return x.sum(axis=(0, 1), keepdims=True)


def lm_mean(x):
    return x.mean()


def lm_mean_axis(x):
    return x.mean(axis=-1)


def lm_mean_positional_keep(x):
    return x.mean(0, keepdims=True)


def lm_prod(x):
    return x.prod()


def lm_prod_axis(x):
    return x.prod(axis=2)


def lm_var(x):
    return x.var()


def lm_var_ddof(x):
    return x.var(ddof=1)


def lm_var_axis_ddof_keep(x):
    return x.var(axis=1, ddof=1, keepdims=True)


def lm_std(x):
    return x.std()


def lm_std_axis(x):
    return x.std(axis=0)


def lm_std_ddof(x):
    return x.std(ddof=1)


LITERAL_SMOOTH = [
    l_sum,
    l_sum_axis0,
    l_sum_positional_axis,
    l_sum_neg_keep,
    l_sum_tuple,
    l_sum_tuple_keep,
    l_mean,
    l_mean_axis,
    l_mean_keep,
    l_mean_positional,
    l_prod,
    l_prod_axis,
    l_prod_keep,
    l_var,
    l_var_axis_ddof,
    l_std,
    l_std_axis_ddof_keep,
    l_std_ddof1,
    lm_sum,
    lm_sum_axis1,
    lm_sum_positional,
    lm_sum_tuple_keep,
    lm_mean,
    lm_mean_axis,
    lm_mean_positional_keep,
    lm_prod,
    lm_prod_axis,
    lm_var,
    lm_var_ddof,
    lm_var_axis_ddof_keep,
    lm_std,
    lm_std_axis,
    lm_std_ddof,
]


@pytest.mark.parametrize("f", LITERAL_SMOOTH, ids=lambda f: f.__name__)
def test_reduction_literal_arguments(f):
    check_vjp(f, (smooth_input(seed=3),))


def l_max(x):
    return np.max(x)


def l_max_axis(x):
    return np.max(x, axis=1)


def l_max_keep(x):
    return np.max(x, axis=(0, 2), keepdims=True)


def l_min(x):
    return np.min(x)


def l_min_neg(x):
    return np.min(x, axis=-1)


def l_min_keep(x):
    return np.min(x, axis=0, keepdims=True)


def lm_max(x):
    return x.max()


def lm_max_axis0_keep(x):
    return x.max(axis=0, keepdims=True)


def lm_max_positional(x):
    return x.max(1)


def lm_min(x):
    return x.min()


def lm_min_axis(x):
    return x.min(axis=-2)


def lm_min_tuple(x):
    return x.min(axis=(1, 2))


LITERAL_EXTREMA = [
    l_max,
    l_max_axis,
    l_max_keep,
    l_min,
    l_min_neg,
    l_min_keep,
    lm_max,
    lm_max_axis0_keep,
    lm_max_positional,
    lm_min,
    lm_min_axis,
    lm_min_tuple,
]


@pytest.mark.parametrize("f", LITERAL_EXTREMA, ids=lambda f: f.__name__)
def test_extremum_literal_arguments(f):
    check_vjp(f, (distinct_input(seed=4),))


def scalar_loss_chain(x):
    return np.sum(x.mean(axis=0) ** 2) + x.max() - np.min(x, axis=1).sum() + x.std(ddof=1)


def test_reductions_in_a_scalar_loss():
    check_grad(scalar_loss_chain, (distinct_input((4, 5), seed=5),))


# ----------------------------------------------------------------------------- exact values


def test_sum_mean_exact_values():
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(s2sad.grad(l_sum)(x), np.ones((2, 3)))
    np.testing.assert_allclose(s2sad.grad(l_mean)(x), np.full((2, 3), 1 / 6))


def test_max_tie_shares_the_gradient():
    x = np.array([1.0, 3.0, 3.0, 2.0])
    np.testing.assert_allclose(s2sad.grad(l_max)(x), [0.0, 0.5, 0.5, 0.0])


def test_max_along_axis_exact():
    x = np.array([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]])
    _, pb = s2sad.vjp(l_max_axis)(x.reshape(2, 3, 1))
    g = pb(np.array([[10.0], [20.0]]))
    np.testing.assert_array_equal(g.reshape(2, 3), [[0.0, 10.0, 0.0], [20.0, 0.0, 0.0]])


# ----------------------------------------------------------------------------- prod with zeros


@pytest.mark.parametrize(
    "values",
    [
        [2.0, 0.0, 3.0, -1.5],
        [0.0, 2.0, 0.0, 4.0],
        [0.0, 0.0, 0.0, 1.0],
        [1.5, -2.0, 0.5, 3.0],
    ],
    ids=["one_zero", "two_zeros", "three_zeros", "no_zero"],
)
def test_prod_with_zeros(values):
    x = np.array(values)
    g = check_grad(l_prod, (x,))
    expected = [np.prod(np.delete(x, i)) for i in range(len(x))]
    np.testing.assert_allclose(g, expected, atol=0)


def test_prod_with_zeros_along_axis():
    x = np.array([[2.0, 0.0, 3.0], [0.0, 4.0, 0.0], [1.0, 2.0, 3.0]])
    g = check_vjp(l_prod_axis, (x[..., None].repeat(2, axis=2),))
    assert g.shape == (3, 3, 2)
    for keep in (False, True):
        check_vjp(r_prod, (x, 1, keep))
        check_vjp(r_prod, (x, 0, keep))
        check_vjp(r_prod, (x, None, keep))


def test_prod_exact_one_zero():
    x = np.array([2.0, 0.0, 3.0])
    np.testing.assert_array_equal(s2sad.grad(l_prod)(x), [0.0, 6.0, 0.0])


def test_prod_exact_two_zeros():
    x = np.array([2.0, 0.0, 3.0, 0.0])
    np.testing.assert_array_equal(s2sad.grad(l_prod)(x), [0.0, 0.0, 0.0, 0.0])


# ----------------------------------------------------------------------------- norm


def n_default(x):
    return np.linalg.norm(x)


def n_axis0(x):
    return np.linalg.norm(x, axis=0)


def n_axis_neg_keep(x):
    return np.linalg.norm(x, axis=-1, keepdims=True)


def n_keep_all(x):
    return np.linalg.norm(x, keepdims=True)


def n_ord2_vector(x):
    return np.linalg.norm(x, ord=2)


def n_ord1(x):
    return np.linalg.norm(x, ord=1)


def n_ord1_axis(x):
    return np.linalg.norm(x, ord=1, axis=1)


def n_ord_inf(x):
    return np.linalg.norm(x, ord=np.inf)


def n_ord_inf_axis(x):
    return np.linalg.norm(x, ord=np.inf, axis=0)


def n_ord_inf_axis_keep(x):
    return np.linalg.norm(x, np.inf, 1, True)


def n_fro(x):
    return np.linalg.norm(x, "fro")


def n_fro_keyword(x):
    return np.linalg.norm(x, ord="fro")


def n_fro_axes(x):
    return np.linalg.norm(x, ord="fro", axis=(1, 2))


def n_default_axes(x):
    return np.linalg.norm(x, axis=(0, 2))


def n_positional_ord2_axis(x):
    return np.linalg.norm(x, 2, -1)


def n_matrix_ord1(x):
    return np.linalg.norm(x, ord=1)


def n_matrix_ord_inf(x):
    return np.linalg.norm(x, ord=np.inf)


def n_matrix_spectral(x):
    return np.linalg.norm(x, ord=2)


# (function, input shape, whether the input needs distinct magnitudes)
NORMS = [
    (n_default, (5,), False),
    (n_default, (3, 4), False),
    (n_default, (2, 3, 4), False),
    (n_axis0, (3, 4), False),
    (n_axis_neg_keep, (3, 4), False),
    (n_keep_all, (3, 4), False),
    (n_ord2_vector, (5,), False),
    (n_ord1, (5,), False),
    (n_ord1_axis, (3, 4), False),
    (n_ord_inf, (5,), True),
    (n_ord_inf_axis, (3, 4), True),
    (n_ord_inf_axis_keep, (3, 4), True),
    (n_fro, (3, 4), False),
    (n_fro_keyword, (3, 4), False),
    (n_fro_axes, (2, 3, 4), False),
    (n_default_axes, (2, 3, 4), False),
    (n_positional_ord2_axis, (3, 4), False),
    (n_matrix_ord1, (3, 4), True),
    (n_matrix_ord_inf, (3, 4), True),
    (n_matrix_spectral, (3, 4), False),
]


def _norm_input(shape, distinct, seed=6):
    if distinct:
        # distinct magnitudes (and hence distinct row/column sums), none near zero
        x = distinct_input(shape, seed=seed)
        x = np.where(np.abs(x) < 0.05, x + 0.2, x)
        return x
    x = rand(*shape, seed=seed, low=0.2, high=1.0)
    signs = np.where(np.random.default_rng(seed + 1).random(shape) < 0.5, -1.0, 1.0)
    return x * signs


@pytest.mark.parametrize(
    "f,shape,distinct", NORMS, ids=[f"{f.__name__}-{'x'.join(map(str, s))}" for f, s, _ in NORMS]
)
def test_norm(f, shape, distinct):
    check_vjp(f, (_norm_input(shape, distinct),))


def n_axis_param(x, ord, axis, keepdims):
    return np.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)


@pytest.mark.parametrize("keepdims", [False, True], ids=["nokeep", "keep"])
@pytest.mark.parametrize("axis", [0, 1, -1, -2], ids=axis_id)
@pytest.mark.parametrize("ord", [None, 2, 1, np.inf], ids=str)
def test_vector_norm_axis_argument(ord, axis, keepdims):
    check_vjp(n_axis_param, (_norm_input((4, 5), True), ord, axis, keepdims))


def n_param(x, ord, axis, keepdims):
    return np.linalg.norm(x, ord, axis, keepdims)


# (ord, axis, input shape): vector p-norms, negative orders, and matrix norms over two axes
MORE_NORMS = [
    (3, None, (5,)),
    (3, 1, (3, 4)),
    (0.5, -1, (3, 4)),
    (-1, None, (5,)),
    (-2, 0, (3, 4)),
    (-np.inf, None, (5,)),
    (-np.inf, 1, (3, 4)),
    (0, None, (5,)),
    ("fro", None, (3, 4)),
    ("fro", (0, 1), (3, 4)),
    ("nuc", None, (3, 4)),
    ("nuc", (1, 2), (2, 3, 4)),
    (2, None, (4, 3)),
    (-2, None, (3, 4)),
    (2, (0, 2), (3, 2, 4)),
    (1, None, (3, 4)),
    (-1, None, (3, 4)),
    (np.inf, None, (3, 4)),
    (-np.inf, None, (3, 4)),
    (1, (2, 0), (3, 2, 4)),
    (np.inf, (-1, -2), (2, 3, 4)),
    (None, (0, 2), (3, 2, 4)),
]


@pytest.mark.parametrize("keepdims", [False, True], ids=["nokeep", "keep"])
@pytest.mark.parametrize(
    "ord,axis,shape",
    MORE_NORMS,
    ids=[f"ord={o}-axis={axis_id(a)}-{'x'.join(map(str, s))}" for o, a, s in MORE_NORMS],
)
def test_norm_orders(ord, axis, shape, keepdims):
    check_vjp(n_param, (_norm_input(shape, True, seed=8), ord, axis, keepdims))


# ----------------------------------------------------------------------------- hypothesis


@st.composite
def shape_axis_keepdims(draw):
    shape = draw(array_shapes(min_dims=0, max_dims=4, min_side=1, max_side=4))
    ndim = len(shape)
    choices = [st.none(), valid_tuple_axes(ndim)]
    if ndim:
        choices.append(st.integers(-ndim, ndim - 1))
    axis = draw(st.one_of(*choices))
    return shape, axis, draw(st.booleans())


HYP = settings(
    max_examples=25, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)


@pytest.mark.parametrize(
    "f", [r_sum, m_sum, r_mean, m_mean, r_max, m_max, r_min], ids=lambda f: f.__name__
)
@HYP
@given(case=shape_axis_keepdims(), seed=st.integers(0, 2**32 - 1))
def test_reduction_random_axes(f, case, seed):
    shape, axis, keepdims = case
    make = distinct_input if f in (r_max, m_max, r_min) else smooth_input
    x = make(shape, seed=seed % 1000)
    expected_shape = np.shape(getattr(np, f.__name__[2:])(x, axis=axis, keepdims=keepdims))
    assert np.shape(f(x, axis, keepdims)) == expected_shape
    check_vjp(f, (x, axis, keepdims), seed=seed)


@HYP
@given(case=shape_axis_keepdims(), seed=st.integers(0, 2**32 - 1))
def test_prod_random_axes(case, seed):
    shape, axis, keepdims = case
    x = rand(*shape, seed=seed % 1000, low=0.5, high=1.5)
    check_vjp(r_prod, (x, axis, keepdims), seed=seed)


@HYP
@given(case=shape_axis_keepdims(), seed=st.integers(0, 2**32 - 1))
def test_var_random_axes(case, seed):
    shape, axis, keepdims = case
    x = smooth_input(shape, seed=seed % 1000)
    check_vjp(r_var, (x, axis, keepdims), seed=seed)


def var_without_degrees_of_freedom(a, b, c):
    """No degrees of freedom left over an axis (a) and over all (b), and an empty axis (c): one
    function, so one compile; each input's gradient is that of its own term."""
    return np.sum(np.var(a, axis=0, ddof=3)) + np.var(b, ddof=12) + np.sum(np.var(c, axis=0))


def test_var_without_degrees_of_freedom_is_inf_in_every_mode():
    rng = np.random.default_rng(1)
    args = (rng.normal(size=(3, 4)), rng.normal(size=(3, 4)), rng.normal(size=(0, 3)))
    f = var_without_degrees_of_freedom
    with np.errstate(divide="ignore", invalid="ignore"):
        got = s2sad.grad(f, wrt=(0, 1, 2))(*args)
        jitted = s2sad.grad(f, wrt=(0, 1, 2), jit=True)(*args)
    assert len(got) == len(jitted) == 3
    for g, j, x in zip(got, jitted, args):
        assert g.shape == x.shape and np.all(np.isinf(g))
        np.testing.assert_array_equal(g, j)
