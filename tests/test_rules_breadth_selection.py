"""Selection and statistics (rules/selection.py, rules/statistics.py): np.take,
np.take_along_axis, gathers by np.argmax, np.median, np.percentile, np.quantile, np.partition,
np.select, np.choose, np.nansum, np.nanmean, np.nanmax, np.nanmin, np.ptp and np.average.
Pullbacks and tangents against finite differences (random shapes and axes from hypothesis),
exact values at ties and degenerate inputs, batched Jacobians against per-basis ones, Hessians,
the jitted forms, and the calls the rules refuse."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, mutually_broadcastable_shapes

import s2sad
from conftest import check_jvp, check_vjp, rand
from test_jacobian_batched import check

IDX = np.array([2, 0, 2, 1])


def distinct(*shape, seed=0):
    """Values well apart (finite differences never cross a tie)."""
    n = int(np.prod(shape))
    return np.random.default_rng(seed).permutation(n).reshape(shape) * 0.5 - n / 4


def positive(*shape, seed=0):
    return rand(*shape, seed=seed, low=0.5, high=2.0)


# ----------------------------------------------------------------------------- functions


def take_flat(x, i):
    return np.take(x, i)


def take_axis(x, i, axis):
    return np.take(x, i, axis=axis)


def take_wrap(x):
    return np.take(x, np.array([-1, 4, 7]), axis=0, mode="wrap") * x[0]


def take_clip(x):
    return np.take(x, np.array([-3, 1, 9]), mode="clip")


def take_sum_sq(x, i):
    return np.sum(np.take(x, i, axis=1) ** 2)


def along(x, i, axis):
    return np.take_along_axis(x, i, axis=axis)


def along_argmax(x):
    return np.take_along_axis(x, np.argmax(x, axis=1)[:, None], axis=1)


def gather_argmax(x):
    return x[np.argmax(x)] * x[np.argmin(x)]


def along_flat(x, i):
    return np.sum(np.take_along_axis(x, i, axis=None) ** 2)


def median_axis(x, axis):
    return np.median(x, axis=axis)


def quantile_q(x, q, axis, keepdims):
    return np.quantile(x, q, axis=axis, keepdims=keepdims)


def percentile_q(x, q, axis, keepdims):
    return np.percentile(x, q, axis=axis, keepdims=keepdims)


def percentile_scalar(x):
    return np.percentile(x, 30.0)


def quantile_scalar(x):
    return np.quantile(x, 0.8)


def quantile_cube(x):
    return np.sum(np.quantile(x, np.array([0.2, 0.5, 0.9])) ** 3) + np.median(x) ** 2


def median_cube(x):
    return np.median(x) ** 3 + np.percentile(x, 40.0) ** 2


def partition_axis(x, kth, axis):
    return np.partition(x, kth, axis=axis)


def partition_weighted(x):
    p = np.partition(x, 3)
    return p[3] ** 2 + np.sum(p[:3] ** 3)


def select_fn(x, y):
    return np.select([x > 0.5, y < 0.0], [x * y, np.sin(y)], default=x)


def select_plain(x):
    return np.select([x > 0.0, x < -0.5], [x, x**2])


def choose_fn(x, y, i):
    return np.choose(i, [x, y, x * y])


def choose_modes(x, y):
    return np.choose(np.array([0, 3, -1, 2]), [x, y], mode="wrap") + np.choose(
        np.array([5, -2, 1, 0]), [x, y], mode="clip"
    )


def nan_cube_free(x):
    return np.nansum(x) ** 2 + np.nanmean(x) ** 3 + np.nanmax(x) ** 3 + np.nanmin(x) ** 2


def nansum_axis(x, axis):
    return np.nansum(x, axis=axis)


def nanmean_axis(x, axis):
    return np.nanmean(x, axis=axis, keepdims=True)


def nanmax_axis(x, axis):
    return np.nanmax(x, axis=axis)


def nanmin_axis(x, axis):
    return np.nanmin(x, axis=axis, keepdims=True)


def nan_cube(x):
    return np.nansum(x**3) + np.nanmean(x) ** 2 + np.nanmax(x) ** 3 + np.nanmin(x) ** 2


def ptp_axis(x, axis):
    return np.ptp(x, axis=axis)


def ptp_cube(x):
    return np.ptp(x) ** 3


def average_plain(x, axis):
    return np.average(x, axis=axis)


def average_w(x, w):
    return np.average(x, weights=w)


def average_w_axis_keep(x, w, axis, keepdims):
    return np.average(x, axis=axis, weights=w, keepdims=keepdims)


def average_cube(x, w):
    return np.sum(np.average(x, axis=1, weights=w) ** 3) + np.average(x * w) ** 2


# ----------------------------------------------------------------------------- finite differences

X34 = distinct(3, 4)
XN = distinct(3, 4, seed=4)
XN[0, 1] = XN[2, 3] = np.nan
CASES = [
    (take_flat, (distinct(5), IDX), 0),
    (take_axis, (distinct(3, 4), IDX[:3], 1), 0),
    (take_axis, (distinct(3, 4), np.array([[0, 2], [2, 2]]), 0), 0),
    (take_axis, (distinct(2, 3, 4), np.int64(-1), -2), 0),
    (take_wrap, (distinct(5, 2),), 0),
    (take_clip, (distinct(4),), 0),
    (take_sum_sq, (distinct(3, 4), IDX), 0),
    (along, (X34, np.argsort(X34, axis=0)[:2], 0), 0),
    (along, (X34, np.array([[0, 3, 3]]), 1), 0),
    (along, (distinct(3, 1), np.array([[0, 0, 0]]), 1), 0),
    (along_argmax, (X34,), 0),
    (gather_argmax, (distinct(6),), 0),
    (along_flat, (X34, np.array([5, 0, 5, 11])), 0),
    (median_axis, (distinct(5), None), 0),
    (median_axis, (distinct(2, 3), None), 0),
    (median_axis, (distinct(3, 4), 1), 0),
    (median_axis, (distinct(4, 3), 0), 0),
    (quantile_q, (distinct(3, 5), 0.3, 1, False), 0),
    (quantile_q, (distinct(3, 5), np.array([[0.1, 0.95], [0.5, 1.0]]), 0, True), 0),
    (quantile_q, (distinct(2, 3, 4), np.array([0.0, 0.7]), (0, 2), False), 0),
    (percentile_q, (distinct(3, 5), np.array([15.0, 80.0]), -1, False), 0),
    (percentile_q, (distinct(3, 5), 55.0, None, True), 0),
    (percentile_scalar, (distinct(7),), 0),
    (quantile_scalar, (distinct(6),), 0),
    (quantile_cube, (distinct(7),), 0),
    (partition_axis, (distinct(3, 5), 2, 1), 0),
    (partition_axis, (distinct(4, 3), np.array([0, 3]), 0), 0),
    (partition_axis, (distinct(3, 4), 5, None), 0),
    (partition_axis, (distinct(6), 2, -1), 0),
    (partition_weighted, (distinct(7),), 0),
    (select_fn, (rand(3, 4), rand(3, 4, seed=1)), (0, 1)),
    (select_fn, (rand(3, 4), rand(4, seed=1)), (0, 1)),
    (select_plain, (rand(6),), 0),
    (choose_fn, (rand(4), rand(3, 4, seed=1), np.array([0, 2, 1, 2])), (0, 1)),
    (choose_modes, (rand(4), rand(4, seed=1)), (0, 1)),
    (nan_cube_free, (XN,), 0),
    (nansum_axis, (XN, 0), 0),
    (nanmean_axis, (XN, 1), 0),
    (nanmax_axis, (XN, -1), 0),
    (nanmin_axis, (XN, 0), 0),
    (ptp_axis, (distinct(5), None), 0),
    (ptp_axis, (distinct(3, 4), 0), 0),
    (average_plain, (rand(3, 4), None), 0),
    (average_plain, (rand(3, 4), 1), 0),
    (average_w, (rand(3, 4), positive(3, 4)), (0, 1)),
    (average_w_axis_keep, (rand(3, 4), positive(4), 1, False), (0, 1)),
    (average_w_axis_keep, (rand(3, 4), positive(3, 4), 0, True), (0, 1)),
    (average_w_axis_keep, (rand(3, 4), positive(4), -1, True), (0, 1)),
    (average_w_axis_keep, (rand(2, 3, 4), positive(4, 2), (2, 0), False), (0, 1)),
    (average_cube, (rand(3, 4), positive(4)), (0, 1)),
]
IDS = [f"{f.__name__}-{i}" for i, (f, _, _) in enumerate(CASES)]


@pytest.mark.parametrize("f,args,wrt", CASES, ids=IDS)
def test_vjp_and_jvp(f, args, wrt):
    check_vjp(f, args, wrt)  # also: each cotangent has its input's shape and dtype
    check_jvp(f, args, wrt)


@pytest.mark.parametrize("f,args,wrt", CASES, ids=IDS)
def test_jacobian_batched_matches_per_basis(f, args, wrt):
    check(f, *args, wrt=wrt)


# ----------------------------------------------------------------------------- exact values


def pulled(f, args, seed, wrt=0):
    _, pullback = s2sad.vjp(f, wrt=wrt)(*args)
    return pullback(seed)


def test_take_scatters_back_and_repeats_add_up():
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    seed = np.array([1.0, 10.0, 100.0, 1000.0])
    np.testing.assert_array_equal(pulled(take_flat, (x, IDX), seed), [10, 1000, 101, 0, 0])
    m = np.arange(6.0).reshape(2, 3)
    g = pulled(take_axis, (m, np.array([2, 2, 0]), 1), np.ones((2, 3)))
    np.testing.assert_array_equal(g, [[1.0, 0.0, 2.0], [1.0, 0.0, 2.0]])
    _, t = s2sad.jvp(take_flat)(x, IDX, tangent=x * 10)
    np.testing.assert_array_equal(t, [30.0, 10.0, 30.0, 20.0])
    # wrap and clip name positions as NumPy does: -1 -> 4 and 7 -> 2 (wrap), -3 -> 0 (clip)
    np.testing.assert_array_equal(
        pulled(take_clip, (x[:4],), np.array([1.0, 2.0, 4.0])), [1.0, 2.0, 0.0, 4.0]
    )


def test_take_along_axis_and_argmax_gathers():
    x = np.array([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]])
    g = pulled(along_argmax, (x,), np.ones((2, 1)))
    np.testing.assert_array_equal(g, [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    g = pulled(along, (x, np.array([[0, 0], [2, 2]]), 1), np.array([[1.0, 2.0], [3.0, 4.0]]))
    np.testing.assert_array_equal(g, [[3.0, 0.0, 0.0], [0.0, 0.0, 7.0]])
    v = np.array([3.0, -1.0, 4.0, 1.5])
    np.testing.assert_array_equal(s2sad.grad(gather_argmax)(v), [0.0, 4.0, -1.0, 0.0])


def test_median_odd_even_and_ties():
    """Odd count: all to the middle value; even: 1/2 to each middle one; ties: the stable sort's
    order picks the slots (never NaN)."""

    def grad(v):
        return s2sad.grad(median_axis)(v, None)

    np.testing.assert_array_equal(grad(np.array([3.0, 1.0, 2.0])), [0.0, 0.0, 1.0])
    np.testing.assert_array_equal(grad(np.array([4.0, 1.0, 3.0, 2.0])), [0.0, 0.0, 0.5, 0.5])
    np.testing.assert_array_equal(grad(np.array([1.0, 1.0, 1.0])), [0.0, 1.0, 0.0])
    np.testing.assert_array_equal(grad(np.array([2.0, 2.0, 2.0, 2.0])), [0, 0.5, 0.5, 0])
    np.testing.assert_array_equal(grad(np.array([5.0, 1.0, 5.0, 1.0])), [0.5, 0, 0, 0.5])
    g = pulled(median_axis, (np.array([[1.0, 9.0], [3.0, 3.0], [2.0, 0.0]]), 0), np.ones(2))
    np.testing.assert_array_equal(g, [[0.0, 0.0], [0.0, 1.0], [1.0, 0.0]])


def test_quantiles_landing_on_an_element_and_between():
    x = np.array([10.0, 40.0, 20.0, 30.0, 0.0])
    grad = s2sad.grad(quantile_q)
    for q, expected in [
        (0.25, [1, 0, 0, 0, 0]),  # exactly the second smallest
        (0.0, [0, 0, 0, 0, 1]),
        (1.0, [0, 1, 0, 0, 0]),
        (0.75, [0, 0, 0, 1, 0]),
        (0.3, [0.8, 0, 0.2, 0, 0]),  # 1.2 sorted places: 0.8 of x[0] and 0.2 of x[2]
    ]:
        g = grad(x, q, None, False)
        assert np.isfinite(g).all()
        np.testing.assert_allclose(g, expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(s2sad.grad(percentile_scalar)(x), [0.8, 0, 0.2, 0, 0], atol=1e-12)
    ties = np.array([1.0, 1.0, 2.0, 2.0])
    np.testing.assert_array_equal(grad(ties, 0.5, None, False), [0.0, 0.5, 0.5, 0.0])
    np.testing.assert_array_equal(grad(np.full(4, 3.0), 1.0, None, False), [0, 0, 0, 1.0])
    _, t = s2sad.jvp(quantile_q)(x, np.array([0.3, 1.0]), 0, False, tangent=np.arange(5.0))
    np.testing.assert_allclose(t, [0.8 * 0 + 0.2 * 2, 1.0], atol=1e-12)


def test_partition_values_at_kth_and_ties():
    x = np.array([5.0, 1.0, 4.0, 2.0, 3.0])
    kth_of = s2sad.grad(kth_value)
    np.testing.assert_array_equal(kth_of(x), [0.0, 0.0, 0.0, 0.0, 1.0])  # 3.0 is x[4]
    np.testing.assert_array_equal(kth_of(np.array([2.0, 2.0, 1.0, 2.0, 2.0])), [0, 1, 0, 0, 0])
    x = distinct(6, seed=3)
    p, pullback = s2sad.vjp(partition_axis)(x, 2, -1)
    source = [int(np.flatnonzero(x == v)[0]) for v in p]  # where each value came from
    np.testing.assert_array_equal(pullback(np.arange(6.0))[source], np.arange(6.0))
    _, t = s2sad.jvp(partition_axis)(x, 2, -1, tangent=np.arange(6.0))
    np.testing.assert_array_equal(t, source)


def kth_value(x):
    return np.partition(x, 2)[2]


def test_select_and_choose_pass_each_element_to_its_source():
    x = np.array([1.0, -0.2, 0.2, -0.7])
    g = pulled(select_plain, (x,), np.array([1.0, 2.0, 3.0, 4.0]))
    np.testing.assert_array_equal(g, [1.0, 0.0, 3.0, 4.0 * 2 * -0.7])  # x[1]: the default 0
    x, y = np.array([1.0, 2.0, 3.0]), np.array([10.0, 20.0, 30.0])
    gx, gy = pulled(choose_fn, (x, y, np.array([0, 1, 2])), np.ones(3), wrt=(0, 1))
    np.testing.assert_array_equal(gx, [1.0, 0.0, 30.0])
    np.testing.assert_array_equal(gy, [0.0, 1.0, 3.0])


@pytest.mark.filterwarnings(
    "ignore:All-NaN slice:RuntimeWarning", "ignore:Mean of empty slice:RuntimeWarning"
)  # the primal's own warnings
def test_nan_entries_get_zero_and_all_nan_slices_give_zeros():
    x = np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, np.nan]])
    for f, row in [
        (nansum_axis, [1.0, 0.0, 1.0]),
        (nanmax_axis, [0.0, 0.0, 1.0]),
    ]:
        g = pulled(f, (x, 1), np.ones(2))
        np.testing.assert_array_equal(g, [row, [0.0, 0.0, 0.0]])
    g = pulled(nanmean_axis, (x, 1), np.ones((2, 1)))
    np.testing.assert_array_equal(g, [[0.5, 0.0, 0.5], [0.0, 0.0, 0.0]])
    g = pulled(nanmin_axis, (x, 1), np.ones((2, 1)))
    np.testing.assert_array_equal(g, [[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    ties = np.array([2.0, np.nan, 2.0, 1.0])
    np.testing.assert_array_equal(s2sad.grad(nanmax_axis)(ties, None), [0.5, 0.0, 0.5, 0.0])


def test_ptp_ties_and_constant_slices():

    def grad(v):
        return s2sad.grad(ptp_axis)(v, None)

    np.testing.assert_array_equal(grad(np.array([3.0, 1.0, 3.0, 1.0])), [0.5, -0.5, 0.5, -0.5])
    np.testing.assert_array_equal(grad(np.array([2.0, 2.0, 2.0])), [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(grad(np.array([0.0, 5.0, -1.0])), [0.0, 1.0, -1.0])


def test_average_in_both_arguments():
    x, w = np.array([1.0, 2.0, 3.0]), np.array([1.0, 1.0, 2.0])
    gx, gw = s2sad.grad(average_w, wrt=(0, 1))(x, w)  # average 9/4
    np.testing.assert_allclose(gx, [0.25, 0.25, 0.5], rtol=1e-15)
    np.testing.assert_allclose(gw, [-5 / 16, -1 / 16, 3 / 16], rtol=1e-15)
    g = pulled(average_plain, (np.ones((2, 4)), 1), np.array([1.0, 2.0]))
    np.testing.assert_allclose(g, [[0.25] * 4, [0.5] * 4], rtol=1e-15)


# ----------------------------------------------------------------------------- Hessians

HESSIANS = [
    (quantile_cube, (distinct(7, seed=2),), 0),
    (median_cube, (distinct(6, seed=5),), 0),
    (partition_weighted, (distinct(7, seed=1),), 0),
    (take_sum_sq, (distinct(3, 4), IDX), 0),
    (along_flat, (distinct(3, 4), np.array([5, 0, 5, 11])), 0),
    (ptp_cube, (distinct(5),), 0),
    (average_cube, (rand(3, 4), positive(4)), 0),
    (average_cube, (rand(3, 4), positive(4)), 1),
    (nan_cube_free, (np.array([0.5, np.nan, -1.0, 2.0]),), 0),
]


@pytest.mark.parametrize("f,args,wrt", HESSIANS, ids=[f"{c[0].__name__}-{c[2]}" for c in HESSIANS])
def test_hessian_matches_finite_differences_of_the_gradient(f, args, wrt):
    H = s2sad.hessian(f, wrt=wrt)(*args)
    x = args[wrt]
    grad = s2sad.grad(f, wrt=wrt)
    expected = np.zeros((x.size, x.size))
    for k in range(x.size):
        step = np.zeros(x.size)
        step[k] = 1e-5
        moved = [
            [a if i != wrt else x + s.reshape(x.shape) for i, a in enumerate(args)]
            for s in (step, -step)
        ]
        expected[:, k] = ((grad(*moved[0]) - grad(*moved[1])) / 2e-5).reshape(-1)
    np.testing.assert_allclose(H.reshape(x.size, x.size), expected, atol=1e-5)
    assert np.isfinite(H).all()


# ----------------------------------------------------------------------------- jit


def along_1d(x, i):
    return np.sum(np.take_along_axis(x, i, 0) ** 2)


def average_1d(x, w):
    return np.average(x, weights=w) ** 2 + np.average(x) * np.average(w)


def quantile_list(x):
    return np.sum(np.quantile(x, [0.1, 0.9]) ** 2)


def along_rows(x, i):
    return np.take_along_axis(x, i, axis=-2) * 2.0


V6 = distinct(6, seed=1)
M34 = distinct(3, 4, seed=2)
VN = np.array([0.5, np.nan, -1.0, 2.0, -1.0])
JITTED = [  # (function, args, wrt, mode): Numba compiles each primal
    (take_flat, (V6, IDX), 0, "vjp"),
    (take_flat, (V6, IDX), 0, "jvp"),
    (along_1d, (V6, np.array([5, 0, 5])), 0, "grad"),
    # along an axis, repeats adding up, and a broadcast length-1 axis of the array
    (take_sum_sq, (M34, np.array([3, 0, 3, -1])), 0, "grad"),
    (along_rows, (M34, np.array([[2, 0, 0, 1], [1, 1, 2, 0]])), 0, "vjp"),
    (along_rows, (distinct(2, 1, 3), np.array([[[0, 0, 0]], [[0, 0, 0]]])), 0, "vjp"),
    (along_flat, (M34, np.array([0, 5, 5, 11])), 0, "grad"),
    (along_argmax, (M34,), 0, "vjp"),
    (quantile_cube, (V6,), 0, "grad"),  # several quantiles at once
    (quantile_cube, (V6,), 0, "jvp"),
    (quantile_list, (V6,), 0, "grad"),  # q a list of numbers
    (quantile_list, (V6,), 0, "jvp"),
    (gather_argmax, (V6,), 0, "grad"),
    (median_cube, (V6,), 0, "grad"),
    (median_cube, (V6,), 0, "jvp"),
    (quantile_scalar, (V6,), 0, "grad"),
    (percentile_scalar, (distinct(7),), 0, "jvp"),
    (partition_weighted, (distinct(7),), 0, "grad"),
    (partition_weighted, (distinct(7),), 0, "jvp"),
    (select_plain, (rand(6),), 0, "vjp"),
    (nan_cube_free, (VN,), 0, "grad"),
    (nan_cube_free, (VN,), 0, "jvp"),
    (ptp_cube, (V6,), 0, "grad"),
    (average_1d, (rand(5), positive(5)), (0, 1), "grad"),
    (average_1d, (rand(5), positive(5)), (0, 1), "jvp"),
]


# JITTED runs in tests/test_jit_corpus.py: each derivative with jit="strict" (no fallback) against
# the Python version, as every corpus case does.


# ----------------------------------------------------------------------------- refusals


def quantile_nearest(x):
    return np.quantile(x, 0.3, method="nearest")


def median_overwrite(x):
    return np.median(x, overwrite_input=True)


def average_returned(x, w):
    return np.average(x, weights=w, returned=True)


def quantile_in_q(x, q):
    return np.quantile(x, q)


def nansum_where(x, m):
    return np.nansum(x, where=m)


def choose_from_array(x, i):
    return np.choose(i, x)


@pytest.mark.parametrize(
    "f,args,wrt,says",
    [
        (quantile_nearest, (distinct(5),), 0, "method='linear'"),
        (median_overwrite, (distinct(5),), 0, "overwrite_input=False"),
        (average_returned, (rand(3), positive(3)), 0, "returned=False"),
        (quantile_in_q, (distinct(5), 0.3), 1, "np.quantile"),
        (nansum_where, (rand(3), np.array([True, False, True])), 0, "np.nansum"),
        (choose_from_array, (rand(2, 3), np.array([0, 1, 0])), 0, "pass the list literally"),
    ],
)
def test_calls_outside_the_rules_are_refused_at_the_users_line(f, args, wrt, says):
    """Other quantile methods, a partly sorted input, a tuple result, a differentiated q, a
    `where=` mask and choices held in one array have no rule: refused, naming the call."""
    with pytest.raises(s2sad.NoRuleError, match=says.replace("(", r"\(")) as info:
        s2sad.vjp(f, wrt=wrt)(*args)
    assert "test_rules_breadth_selection.py" in str(info.value)


# ----------------------------------------------------------------------------- hypothesis

HYP = settings(
    max_examples=15, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
SHAPES = array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4)


@st.composite
def shape_and_axes(draw, tuples=True):
    """A shape and an axis of it: None, an int (maybe negative) or a tuple of distinct axes."""
    shape = draw(SHAPES)
    ndim = len(shape)
    one = st.integers(-ndim, ndim - 1)
    many = st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True).map(tuple)
    return shape, draw(st.one_of(st.none(), one, many) if tuples else st.one_of(st.none(), one))


def both_modes(f, args, wrt, seed):
    check_vjp(f, args, wrt, seed=seed)
    check_jvp(f, args, wrt, seed=seed)


@HYP
@given(case=shape_and_axes(tuples=False), seed=st.integers(0, 999), data=st.data())
def test_random_take(case, seed, data):
    shape, axis = case
    x = distinct(*shape, seed=seed)
    n = int(np.prod(shape)) if axis is None else shape[axis]
    index_shape = data.draw(array_shapes(min_dims=0, max_dims=2, min_side=1, max_side=3))
    i = np.random.default_rng(seed).integers(-n, n, size=index_shape)  # repeats, negatives
    both_modes(take_axis, (x, i, axis), 0, seed)


@HYP
@given(case=shape_and_axes(tuples=False), seed=st.integers(0, 999), data=st.data())
def test_random_take_along_axis(case, seed, data):
    shape, axis = case
    x = distinct(*shape, seed=seed)
    rng = np.random.default_rng(seed)
    if axis is None:
        i = rng.integers(0, x.size, size=data.draw(st.integers(1, 5)))
    else:
        index_shape = [data.draw(st.sampled_from([1, m])) for m in shape]  # broadcasts
        index_shape[axis] = data.draw(st.integers(1, 4))
        i = rng.integers(0, shape[axis], size=index_shape)
    both_modes(along, (x, i, axis), 0, seed)


@HYP
@given(
    case=shape_and_axes(),
    keepdims=st.booleans(),
    q=st.one_of(
        st.floats(0.0, 1.0),
        st.lists(st.floats(0.0, 1.0), min_size=1, max_size=3).map(np.array),
    ),
    percent=st.booleans(),
    seed=st.integers(0, 999),
)
def test_random_quantiles(case, keepdims, q, percent, seed):
    shape, axis = case
    x = distinct(*shape, seed=seed)
    if percent:
        both_modes(percentile_q, (x, q * 100.0, axis, keepdims), 0, seed)
    else:
        both_modes(quantile_q, (x, q, axis, keepdims), 0, seed)
    both_modes(median_axis, (x, axis), 0, seed)


@HYP
@given(case=shape_and_axes(tuples=False), seed=st.integers(0, 999), data=st.data())
def test_random_partition(case, seed, data):
    shape, axis = case
    x = distinct(*shape, seed=seed)
    n = x.size if axis is None else shape[axis]
    kth = data.draw(st.integers(-n, n - 1))
    both_modes(partition_axis, (x, kth, axis), 0, seed)


@pytest.mark.filterwarnings(
    "ignore:All-NaN slice:RuntimeWarning", "ignore:Mean of empty slice:RuntimeWarning"
)  # the primal's own warnings
@HYP
@given(case=shape_and_axes(), seed=st.integers(0, 999))
def test_random_nan_reductions_and_ptp(case, seed):
    shape, axis = case
    x = distinct(*shape, seed=seed)
    x[np.random.default_rng(seed).random(shape) < 0.2] = np.nan
    for f in (nansum_axis, nanmean_axis, nanmax_axis, nanmin_axis):
        if np.isfinite(f(x, axis)).all():  # (an all-NaN slice: tested with exact values)
            both_modes(f, (x, axis), 0, seed)
    both_modes(ptp_axis, (distinct(*shape, seed=seed), axis), 0, seed)


@HYP
@given(case=shape_and_axes(), keepdims=st.booleans(), seed=st.integers(0, 999), data=st.data())
def test_random_average(case, keepdims, seed, data):
    shape, axis = case
    x = rand(*shape, seed=seed)
    full = axis is None or data.draw(st.booleans())
    along_axes = () if full else (axis if isinstance(axis, tuple) else (axis,))
    w = positive(*(shape if full else [shape[a] for a in along_axes]), seed=seed + 1)
    both_modes(average_w_axis_keep, (x, w, axis, keepdims), (0, 1), seed)


@HYP
@given(
    shapes=mutually_broadcastable_shapes(num_shapes=3, max_dims=3, max_side=3),
    seed=st.integers(0, 999),
)
def test_random_select_and_choose_broadcasting(shapes, seed):
    """Conditions, choices and the index array broadcast against each other."""
    sx, sy, sc = shapes.input_shapes
    x, y = rand(*sx, seed=seed), rand(*sy, seed=seed + 1)
    both_modes(select_fn, (x, y), (0, 1), seed)
    i = np.random.default_rng(seed).integers(0, 3, size=sc)
    both_modes(choose_fn, (x, y, i), (0, 1), seed)
