"""Building and splitting arrays (rules/stacking.py, rules/splitting.py): vstack, hstack, dstack,
column_stack, row_stack, append, repeat, tile, pad, split, array_split, hsplit, vsplit, dsplit,
atleast_1d/2d/3d, flipud, fliplr, rot90, rollaxis. Pullbacks and tangents against finite
differences (random shapes and axes from hypothesis), exact values, both Jacobian modes batched
against per-basis, Hessians, the jitted forms, and the refusals."""

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes

import s2sad
from conftest import check_jvp, check_vjp, rand
from test_derivatives import fd_hessian
from test_jacobian_batched import check


def r(*shape, seed=0):
    return rand(*shape, seed=seed)


# ----------------------------------------------------------------------------- joins


def vstack_list(x, y):
    return np.vstack([x, y])


def vstack_tuple(x, y):
    return np.vstack((x, y)) * 2.0


def row_stack_fn(x, y):
    return np.vstack((x, x * y))


def hstack_fn(x, y):
    return np.hstack((x, y))


def dstack_fn(x, y):
    return np.dstack((x, y))


def column_stack_fn(x, y):
    return np.column_stack((x, y))


def stack_with_constant(x):
    return np.vstack((x, np.ones(3))) * x


def append_flat(x, y):
    return np.append(x, y)


def append_axis(x, y, axis):
    return np.append(x, y, axis=axis)


def append_scalar(x, c):
    return np.append(x, c) ** 2


# ----------------------------------------------------------------------------- repeat, tile, pad


def repeat_flat(x):
    return np.repeat(x, 2)


def repeat_counts(x):
    return np.repeat(x, np.array([2, 0, 1])) * np.sum(x)


def repeat_axis(x, repeats, axis):
    return np.repeat(x, repeats, axis=axis)


def tile_fn(x, reps):
    return np.tile(x, reps)


def pad_zeros(x):
    return np.pad(x, 1)


def pad_values(x, c):
    return np.pad(x, ((1, 0), (2, 1)), constant_values=c)


def pad_edge(x, width):
    return np.pad(x, width, mode="edge")


def pad_reflect(x, width):
    return np.pad(x, width, mode="reflect")


def pad_symmetric(x, width):
    return np.pad(x, width, mode="symmetric")


def pad_wrap(x, width):
    return np.pad(x, width, mode="wrap")


def pad_constant(x, width):
    return np.pad(x, width, mode="constant")


PAD_MODES = {
    "constant": pad_constant,
    "edge": pad_edge,
    "reflect": pad_reflect,
    "symmetric": pad_symmetric,
    "wrap": pad_wrap,
}

# ----------------------------------------------------------------------------- splits, ranks, turns


def split_unpacked(x):
    a, b = np.split(x, 2)
    return a * b


def split_indexed(x, sections, axis):
    parts = np.split(x, sections, axis=axis)
    return np.sum(parts[0] ** 3) + np.sum(parts[-1] ** 2)


def split_three_reads(x):
    parts = np.split(x, 3, axis=1)
    return parts[0] * parts[2] + parts[1]


def array_split_ragged(x):
    a, b, c = np.array_split(x, 3)
    return np.sum(a) * np.sum(b**2) - np.sum(c)


def split_at_indices(x):
    a, b = np.split(x, [1])
    return np.sum(a) * np.sum(b)


def hsplit_fn(x):
    a, b = np.hsplit(x, 2)
    return a * b


def vsplit_fn(x):
    a, b = np.vsplit(x, [1])
    return np.sum(a) * b


def dsplit_fn(x):
    a, b = np.dsplit(x, 2)
    return a * b


def split_in_a_loop(x):
    s = 0.0
    for p in np.split(x, 2):
        s = s + np.sum(p**2)
    return s


def atleast_1d_fn(x):
    return np.atleast_1d(x) * 2.0


def atleast_2d_fn(x):
    return np.atleast_2d(x)


def atleast_3d_fn(x):
    return np.atleast_3d(x) ** 2


def r_fn(x, y):
    return np.r_[x, y, 2.0] * x[0]


def r_rows(x, y):
    return np.r_[x, y]


def c_fn(x, y):
    return np.c_[x, y * 2.0, x]


def flipud_fn(x):
    return np.flipud(x) * x


def fliplr_fn(x):
    return np.fliplr(x) * x


def rot90_fn(x):
    return np.rot90(x) ** 2


def rot90_k(x, k, axes):
    return np.rot90(x, k, axes=axes)


def rollaxis_fn(x, axis, start):
    return np.rollaxis(x, axis, start)


CASES = [
    (vstack_list, (r(3), r(3, seed=1)), (0, 1)),
    (vstack_list, (r(2, 3), r(3, seed=1)), (0, 1)),
    (vstack_tuple, (r(2, 3), r(1, 3, seed=1)), (0, 1)),
    (vstack_tuple, (r(2, 3, 2), r(1, 3, 2, seed=1)), (0, 1)),
    (row_stack_fn, (r(3), r(3, seed=1)), (0, 1)),
    (hstack_fn, (r(3), r(2, seed=1)), (0, 1)),
    (hstack_fn, (r(2, 3), r(2, 1, seed=1)), (0, 1)),
    (dstack_fn, (r(3), r(3, seed=1)), (0, 1)),
    (dstack_fn, (r(2, 3), r(2, 3, 2, seed=1)), (0, 1)),
    (column_stack_fn, (r(3), r(3, 2, seed=1)), (0, 1)),
    (stack_with_constant, (r(3),), 0),
    (append_flat, (r(2, 3), r(2, seed=1)), (0, 1)),
    (append_axis, (r(2, 3), r(1, 3, seed=1), 0), (0, 1)),
    (append_axis, (r(2, 3), r(2, 2, seed=1), -1), (0, 1)),
    (append_scalar, (r(3), 0.5), (0, 1)),
    (repeat_flat, (r(2, 3),), 0),
    (repeat_counts, (r(3),), 0),
    (repeat_axis, (r(2, 3), [1, 0, 3], 1), 0),
    (repeat_axis, (r(2, 3), 2, -2), 0),
    (tile_fn, (r(2, 3), 3), 0),
    (tile_fn, (r(3), (2, 1, 2)), 0),
    (tile_fn, (r(2, 3, 2), (2, 1)), 0),
    (pad_zeros, (r(2, 3),), 0),
    (pad_values, (r(2, 3), 0.5), (0, 1)),
    (pad_values, (r(2, 3), np.array([0.5, -0.3])), (0, 1)),
    (pad_values, (r(2, 3), r(2, 2, seed=1)), (0, 1)),
    (pad_values, (r(2, 3), r(2, 1, seed=1)), (0, 1)),
    (split_unpacked, (r(4, 3),), 0),
    (split_indexed, (r(4, 6), 3, 1), 0),
    (split_indexed, (r(5, 2), [1, 3], 0), 0),
    (split_three_reads, (r(4, 6),), 0),
    (array_split_ragged, (r(7),), 0),
    (split_at_indices, (r(4),), 0),
    (hsplit_fn, (r(4, 6),), 0),
    (hsplit_fn, (r(6),), 0),
    (vsplit_fn, (r(3, 2),), 0),
    (dsplit_fn, (r(2, 3, 4),), 0),
    (atleast_1d_fn, (0.7,), 0),
    (atleast_1d_fn, (r(2, 3),), 0),
    (atleast_2d_fn, (r(3),), 0),
    (atleast_3d_fn, (r(3),), 0),
    (atleast_3d_fn, (r(2, 3),), 0),
    (r_fn, (r(3), r(2, seed=1)), (0, 1)),
    (r_rows, (r(2, 3), r(1, 3, seed=1)), (0, 1)),
    (c_fn, (r(3), r(3, seed=1)), (0, 1)),
    (c_fn, (r(3, 2), r(3, 1, seed=1)), (0, 1)),
    (c_fn, (r(2, 2, 3), r(2, 2, 3, seed=1)), (0, 1)),
    (flipud_fn, (r(4, 3),), 0),
    (fliplr_fn, (r(4, 3, 2),), 0),
    (rot90_fn, (r(4, 3),), 0),
    (rot90_k, (r(2, 3, 4), 3, (2, 0)), 0),
    (rollaxis_fn, (r(2, 3, 4), 2, 1), 0),
    (rollaxis_fn, (r(2, 3, 4), 0, -1), 0),
]
CASES += [(f, (r(4, 5), ((1, 2), (3, 0))), 0) for f in PAD_MODES.values()]
IDS = [f"{f.__name__}-{i}" for i, (f, _, _) in enumerate(CASES)]


@pytest.mark.parametrize("f,args,wrt", CASES, ids=IDS)
def test_vjp_and_jvp(f, args, wrt):
    check_vjp(f, args, wrt=wrt)  # also: each cotangent has its input's shape and dtype
    check_jvp(f, args, wrt=wrt)


@pytest.mark.parametrize("f,args,wrt", CASES, ids=IDS)
def test_jacobian_batched_matches_per_basis(f, args, wrt):
    check(f, *args, wrt=wrt)


# ----------------------------------------------------------------------------- exact values


def _pullback(f, *args, seed, wrt=0):
    _, pullback = s2sad.vjp(f, wrt=wrt)(*args)
    return pullback(seed)


def test_each_operand_takes_back_its_own_rows():
    g = np.arange(9.0).reshape(3, 3)
    dx, dy = _pullback(vstack_list, np.zeros((2, 3)), np.zeros(3), seed=g, wrt=(0, 1))
    np.testing.assert_array_equal(dx, g[:2])
    np.testing.assert_array_equal(dy, g[2])
    dx, dy = _pullback(column_stack_fn, np.zeros(3), np.zeros((3, 2)), seed=g, wrt=(0, 1))
    np.testing.assert_array_equal(dx, g[:, 0])
    np.testing.assert_array_equal(dy, g[:, 1:])
    dx, dy = _pullback(append_flat, np.zeros((1, 2)), np.zeros(2), seed=np.arange(4.0), wrt=(0, 1))
    np.testing.assert_array_equal(dx, [[0.0, 1.0]])
    np.testing.assert_array_equal(dy, [2.0, 3.0])


def test_copies_add_up():
    np.testing.assert_array_equal(
        _pullback(repeat_axis, np.zeros((1, 3)), [1, 0, 3], 1, seed=np.arange(4.0)[None]),
        [[0.0, 0.0, 6.0]],
    )
    np.testing.assert_array_equal(
        _pullback(tile_fn, np.zeros(2), 3, seed=np.arange(6.0)), [6.0, 9.0]
    )
    # edge: the first element is copied twice to the left, the last once to the right
    g = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    np.testing.assert_array_equal(
        _pullback(pad_edge, np.zeros(3), (2, 1), seed=g), [6.0, 4.0, 11.0]
    )
    # reflect of [a, b, c] by 2 on each side: [c, b, a, b, c, b, a]
    g = np.arange(1.0, 8.0)
    np.testing.assert_array_equal(_pullback(pad_reflect, np.zeros(3), 2, seed=g), [10.0, 12.0, 6.0])
    # wrap of [a, b, c] by 1: [c, a, b, c, a]
    g = np.arange(1.0, 6.0)
    np.testing.assert_array_equal(_pullback(pad_wrap, np.zeros(3), 1, seed=g), [7.0, 3.0, 5.0])
    # symmetric of [a, b, c] by 2: [b, a, a, b, c, c, b]
    g = np.arange(1.0, 8.0)
    np.testing.assert_array_equal(
        _pullback(pad_symmetric, np.zeros(3), 2, seed=g), [5.0, 12.0, 11.0]
    )


def test_pad_values_get_their_own_areas():
    """Later axes pad the corners: NumPy pads axis by axis."""
    x = np.zeros((2, 3))
    g = np.ones((3, 6))  # 1 row before; 2 columns before, 1 after
    c = np.array([[1.0, 2.0], [3.0, 4.0]])
    _, dc = _pullback(pad_values, x, c, seed=g, wrt=(0, 1))
    np.testing.assert_array_equal(dc, [[3.0, 0.0], [6.0, 3.0]])
    _, dc = _pullback(pad_values, x, 0.5, seed=g, wrt=(0, 1))
    assert type(dc) is float and dc == 12.0


def test_split_pieces_go_back_where_they_came_from():
    x = np.arange(6.0)
    np.testing.assert_array_equal(
        _pullback(split_unpacked, x, seed=np.ones(3)), [3.0, 4.0, 5.0, 0.0, 1.0, 2.0]
    )
    np.testing.assert_array_equal(
        _pullback(split_at_indices, np.arange(1.0, 5.0), seed=1.0), [9, 1, 1, 1]
    )
    _, tangent = s2sad.jvp(split_unpacked)(x, tangent=np.ones(6))
    np.testing.assert_array_equal(tangent, [3.0, 5.0, 7.0])


def test_turns_go_back():
    x = np.arange(6.0).reshape(2, 3)
    g = np.arange(6.0).reshape(3, 2)
    _, pullback = s2sad.vjp(lambda_free_rot90)(x)
    np.testing.assert_array_equal(pullback(g), np.rot90(g, -1))
    y = r(2, 3, 4)
    _, tangent = s2sad.jvp(rollaxis_fn)(y, 2, 0, tangent=y)
    np.testing.assert_array_equal(tangent, np.rollaxis(y, 2, 0))


def lambda_free_rot90(x):
    return np.rot90(x)


# ----------------------------------------------------------------------------- Hessians


def cubic_of_stacks(x):
    y = np.vstack((x, 2.0 * x))
    return np.sum(np.pad(y, 1, mode="reflect") ** 3) + np.sum(np.tile(np.repeat(x, 2), 2) ** 3)


def cubic_of_pieces(x):
    a, b = np.split(np.rot90(np.atleast_2d(x)), 2)
    return np.sum(a**3 * b)


@pytest.mark.parametrize("f", [cubic_of_stacks, cubic_of_pieces])
def test_hessian_matches_finite_differences_of_the_gradient(f):
    x = r(4, seed=3)
    np.testing.assert_allclose(s2sad.hessian(f)(x), fd_hessian(f, x), atol=1e-6)


# ----------------------------------------------------------------------------- jit

JITTED = [  # Numba compiles each primal (tuples for the stacks, no axis for repeat and rot90);
    # tests/test_jit_corpus.py has append and the splits
    (vstack_tuple, (r(3), r(3, seed=1)), (0, 1)),
    (hstack_fn, (r(3), r(2, seed=1)), (0, 1)),
    (repeat_counts, (r(3),), 0),
    (rot90_fn, (r(4, 3),), 0),
]


@pytest.mark.parametrize("f,args,wrt", JITTED, ids=[f.__name__ for f, _, _ in JITTED])
def test_jitted_forms_compile_and_agree(f, args, wrt):
    numba = pytest.importorskip("numba")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        numba.njit(f)(*args)  # the promise covers functions Numba compiles
        out = f(*args)
        seed = np.random.default_rng(0).standard_normal(np.shape(out))
        jitted = s2sad.vjp(f, wrt=wrt, jit="strict")(*args)[1](seed)
        plain = s2sad.vjp(f, wrt=wrt)(*args)[1](seed)
        names = wrt if isinstance(wrt, tuple) else (wrt,)
        tangent = tuple(r(*np.shape(args[i]), seed=7 + i) for i in names)
        tangent = tangent if isinstance(wrt, tuple) else tangent[0]
        jitted_t = s2sad.jvp(f, wrt=wrt, jit="strict")(*args, tangent=tangent)[1]
        plain_t = s2sad.jvp(f, wrt=wrt)(*args, tangent=tangent)[1]
    jitted, plain = (jitted, plain) if isinstance(wrt, tuple) else ((jitted,), (plain,))
    for j, p in zip(jitted, plain):
        np.testing.assert_allclose(j, p, rtol=1e-12)
    np.testing.assert_allclose(jitted_t, plain_t, rtol=1e-12)


# ----------------------------------------------------------------------------- refusals


def pad_ramp(x):
    return np.pad(x, 1, mode="linear_ramp")


def pad_odd(x):
    return np.pad(x, 1, mode="reflect", reflect_type="odd")


def atleast_two(x, y):
    a, b = np.atleast_1d(x, y)
    return a * b


def r_with_a_range(x, y):
    return np.r_[x, 0:3] * np.sum(y)


@pytest.mark.parametrize("f", [pad_ramp, pad_odd, atleast_two, r_with_a_range])
def test_calls_outside_the_rules_are_refused_at_the_users_line(f):
    args = (r(3), r(3, seed=1))[: f.__code__.co_argcount]
    with pytest.raises(s2sad.NoRuleError, match=r"test_rules_breadth_building\.py:\d+"):
        s2sad.vjp(f)(*args)


def test_a_loop_over_split_pieces_is_unrolled():
    """A split into a constant count of pieces: the loop is unrolled (tests/test_lists.py)."""
    check_vjp(split_in_a_loop, (r(4, 3),))
    check_jvp(split_in_a_loop, (r(4, 3),))


def test_an_item_read_by_a_slice_is_refused():
    with pytest.raises(ValueError, match="integer index only"):
        s2sad.grad(pieces_by_slice)(r(6))


def pieces_by_slice(x):
    rest = np.split(x, 3)[1:]
    return np.sum(rest[0])


# ----------------------------------------------------------------------------- hypothesis

HYP = settings(
    max_examples=15, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
SHAPES = array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=3)


@HYP
@given(shape=SHAPES, extra=st.integers(1, 3), which=st.sampled_from(["v", "h", "d", "c"]))
def test_random_stacks(shape, extra, which):
    """A second operand with `extra` entries along the joined axis, the rest as the first's."""
    f = {"v": vstack_tuple, "h": hstack_fn, "d": dstack_fn, "c": column_stack_fn}[which]
    x = r(*shape)
    joined = {"v": np.atleast_2d, "h": np.atleast_1d, "d": np.atleast_3d}.get(which)
    promoted = joined(x).shape if joined else (x.reshape(-1, 1) if x.ndim < 2 else x).shape
    axis = {"v": 0, "h": 0 if x.ndim == 1 else 1, "d": 2, "c": 1}[which]
    other = list(promoted)
    other[axis] = extra
    y = r(*other, seed=1)
    check_vjp(f, (x, y), wrt=(0, 1))
    check_jvp(f, (x, y), wrt=(0, 1))


@HYP
@given(shape=SHAPES, data=st.data())
def test_random_appends_repeats_tiles(shape, data):
    x = r(*shape)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    other = list(shape)
    other[axis] = data.draw(st.integers(1, 3))
    check_vjp(append_axis, (x, r(*other, seed=1), axis), wrt=(0, 1))
    repeats = data.draw(
        st.one_of(
            st.integers(0, 3),
            st.lists(st.integers(0, 2), min_size=shape[axis], max_size=shape[axis]),
        )
    )
    check_vjp(repeat_axis, (x, repeats, axis))
    check_jvp(repeat_axis, (x, repeats, axis))
    reps = data.draw(
        st.one_of(st.integers(1, 3), st.lists(st.integers(1, 3), min_size=1, max_size=4).map(tuple))
    )
    check_vjp(tile_fn, (x, reps))
    check_jvp(tile_fn, (x, reps))


@HYP
@given(
    shape=array_shapes(min_dims=1, max_dims=3, min_side=2, max_side=4),
    mode=st.sampled_from(sorted(PAD_MODES)),
    data=st.data(),
)
def test_random_pads(shape, mode, data):
    """Widths up to the axis' length less one (reflect's limit for one pass)."""
    widths = tuple(
        (data.draw(st.integers(0, n - 1)), data.draw(st.integers(0, n - 1))) for n in shape
    )
    x = r(*shape)
    check_vjp(PAD_MODES[mode], (x, widths))
    check_jvp(PAD_MODES[mode], (x, widths))


@HYP
@given(shape=SHAPES, data=st.data())
def test_random_splits_and_turns(shape, data):
    x = r(*shape)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    n = shape[axis]
    sections = data.draw(
        st.one_of(
            st.sampled_from([d for d in range(1, n + 1) if n % d == 0]),
            st.lists(st.integers(0, n), min_size=1, max_size=3).map(sorted),
        )
    )
    check_vjp(split_indexed, (x, sections, axis))
    check_jvp(split_indexed, (x, sections, axis))
    if len(shape) >= 2:
        a1, a2 = data.draw(st.permutations(range(len(shape))))[:2]
        k = data.draw(st.integers(-4, 4))
        check_vjp(rot90_k, (x, k, (a1, a2)))
        check_jvp(rot90_k, (x, k, (a1, a2)))
    start = data.draw(st.integers(-len(shape), len(shape)))
    check_vjp(rollaxis_fn, (x, axis, start))
    check_jvp(rollaxis_fn, (x, axis, start))


# ----------------------------------------------------------------------------- list literals
# A list literal that a NumPy function reads as one array is made one (np.stack, as np.array does)


def mean_of_list(a, b):
    return np.mean([a, b])


def sum_of_list(a, b):
    return np.sum([a, b * b], axis=0)


def max_of_numbers(x):
    return np.max([x[0] * 2.0, x[1], 0.5])


def dot_of_list(a, b):
    return np.dot([a, b * 2.0], b)


def concatenate_of_a_list_variable(x, y):
    parts = [x, y]
    return np.concatenate(parts)


def concatenate_of_appended(x):
    parts = []
    for i in range(3):
        parts.append(x * i)
    return np.concatenate(parts)


LISTS = [
    (mean_of_list, (r(3), r(3, seed=1)), (0, 1)),
    (sum_of_list, (r(2, 3), r(2, 3, seed=1)), (0, 1)),
    (max_of_numbers, (np.array([0.1, 0.7, -0.2]),), 0),
    (dot_of_list, (r(3), r(3, seed=1)), (0, 1)),
]


@pytest.mark.parametrize("f,args,wrt", LISTS, ids=[f.__name__ for f, _, _ in LISTS])
def test_list_literals_read_as_arrays(f, args, wrt):
    check_vjp(f, args, wrt=wrt)
    check_jvp(f, args, wrt=wrt)
    check(f, *args, wrt=wrt)


@pytest.mark.parametrize("f", [concatenate_of_a_list_variable, concatenate_of_appended])
def test_lists_held_in_variables(f):
    """Followed element by element at transform time (tests/test_lists.py has the rest)."""
    args = (r(3), r(2, seed=1))[: f.__code__.co_argcount]
    check_vjp(f, args, wrt=0)
    check_jvp(f, args, wrt=0)
