"""Python lists of differentiated values (s2sad/pipeline/normalize/lists.py): a list held in a
variable, filled by `.append` (in straight-line code and in loops of a constant trip count,
which are unrolled), read back by index, `len` or a loop, list comprehensions and generators,
and loops over np.split's pieces. Each against central differences in every mode (pullback,
tangent, batched Jacobians in both modes, Hessian), jit against Python mode, and the refusals."""

import sys
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes

import s2sad
from conftest import check_jvp, check_vjp, rand
from test_derivatives import fd_hessian, fd_jacobian
from test_jacobian_batched import check

STEPS = 4  # a global trip count: known when the function is transformed


def r(*shape, seed=0):
    return rand(*shape, seed=seed)


# ----------------------------------------------------------------------------- the functions


def concatenate_of_parts(x, a):
    parts = [a * x, np.sin(x)]
    return np.concatenate(parts) ** 2


def stack_vstack_hstack(x):
    parts = [x * 2.0, np.cos(x)]
    rows = np.vstack(parts) + np.stack(parts)
    return np.sum(rows**2, axis=0) + np.hstack(parts)[: x.shape[0]]


def array_of_a_list(x):
    vals = [np.sum(x), np.sum(x**2), x[0] * x[1]]
    return np.array(vals) * np.mean(vals) + np.sum(vals)


def rnn(W, h):
    out = []
    for i in range(3):
        out.append(np.tanh(W @ h))
        h = out[-1]
    return np.stack(out) * 2.0


def euler_trajectory(y0, k):
    traj = [y0]
    y = y0
    for t in range(STEPS):
        y = y + 0.1 * (-k * y + np.sin(y))
        traj.append(y)
    return np.array(traj)


def read_back(x):
    parts = [x * 2.0, np.sin(x), x**2]
    parts[1] = parts[1] + 1.0
    q = parts
    q.append(np.exp(x))
    s = 0.0
    for v in parts:
        s = s + np.sum(v * parts[0])
    for k, v in enumerate(q):
        s = s + k * np.sum(v)
    for u, v in zip(parts, q[::-1]):
        s = s + np.sum(u * v)
    return s * len(parts) + np.sum(parts[-1])


def read_at_a_run_time_index(x, n):
    parts = [x * 2.0, np.sin(x)]
    s = 0.0
    for i in range(n):
        s = s + np.sum(parts[i % 2] ** 2)
    return s


def comprehensions(x):
    n = x.shape[0]
    rows = np.stack([np.sin(x[i]) * x for i in range(3)])
    total = sum(x[i] ** 2 for i in range(n))  # n known at run time only: a loop adding up
    terms = sum([np.cos(v) for v in [x[0], x[1]]])
    return np.sum(rows, axis=0) * total + terms


def split_pieces(x):
    s = 0.0
    for piece in np.split(x, 3):
        s = s + np.sum(piece**2)
    for k, piece in enumerate(np.array_split(x, [2, 5])):
        s = s + k * np.sum(np.sin(piece))
    return s


def helper_returning_parts(x):
    return [x * 2.0, np.sin(x)]


def list_from_a_helper(x):
    parts = helper_returning_parts(x)
    return np.concatenate(parts)


def int_lists_stay_lists(x, n):
    idx = []
    for i in range(n):
        idx.append(i)
    return np.sum(x[idx] ** 2)


ARGS = {
    concatenate_of_parts: ((r(4), 1.5), (0, 1)),
    stack_vstack_hstack: ((r(3),), 0),
    array_of_a_list: ((r(3),), 0),
    rnn: ((r(3, 3) * 0.5, r(3, seed=1)), (0, 1)),
    euler_trajectory: ((r(3), 0.7), (0, 1)),
    read_back: ((r(3),), 0),
    read_at_a_run_time_index: ((r(3), 5), 0),
    comprehensions: ((r(4),), 0),
    split_pieces: ((r(6),), 0),
    int_lists_stay_lists: ((r(5), 3), 0),
}
CASES = [(f, args, wrt) for f, (args, wrt) in ARGS.items()]
IDS = [f.__name__ for f in ARGS]


@pytest.mark.parametrize("f,args,wrt", CASES, ids=IDS)
def test_pullbacks_and_tangents(f, args, wrt):
    check_vjp(f, args, wrt=wrt)
    check_jvp(f, args, wrt=wrt)


@pytest.mark.parametrize("f,args,wrt", CASES[:4] + CASES[7:9], ids=IDS[:4] + IDS[7:9])
def test_batched_jacobians(f, args, wrt):
    check(f, *args, wrt=wrt)


def test_exact_values():
    x = np.array([0.3, -1.2])
    (J,) = (s2sad.jacobian(concatenate_of_parts, wrt=1)(x, 2.0),)
    np.testing.assert_allclose(J, np.concatenate([2 * 2.0 * x * x, np.zeros(2)]), rtol=1e-14)
    g = s2sad.grad(lambda_free_sum)(x)
    np.testing.assert_allclose(g, 2 * x + np.cos(x), rtol=1e-14)


def lambda_free_sum(x):
    parts = []
    parts.append(x**2)
    parts.append(np.sin(x))
    return np.sum(sum(parts))


def sum_of_a_generator(x):
    n = x.shape[0]
    return sum(np.sin(x[i]) * x[i] for i in range(n)) + sum(x[i] ** 3 for i in range(2))


@pytest.mark.parametrize("f", [read_back, split_pieces, lambda_free_sum, sum_of_a_generator])
def test_hessians(f):
    x = r(6)
    np.testing.assert_allclose(s2sad.hessian(f)(x), fd_hessian(f, x), rtol=1e-5, atol=1e-6)


def test_the_generated_code_is_unrolled_and_has_no_list():
    code = [
        line for line in s2sad.source(s2sad.grad(lambda_free_sum)).splitlines() if "#" not in line
    ]
    assert not any("parts = []" in line or "append" in line for line in code)
    text = s2sad.source(s2sad.vjp(rnn))
    assert "np.stack([" in text and "for " not in text and "out = []" not in text


# ----------------------------------------------------------------------------- refusals


def appended_in_a_loop_of_unknown_count(x, n):
    out = []
    for i in range(n):
        out.append(x * i)
    return np.stack(out)


def returned(x):
    parts = [x, np.sin(x)]
    return parts


def built_in_a_branch(x):
    if x[0] > 0:
        parts = [x, np.sin(x)]
    else:
        parts = [x, np.cos(x)]
    return np.concatenate(parts)


def a_view_of_a_written_array(x):
    y = x * 1.0
    parts = [y[:2]]
    y[0] = 5.0
    return np.concatenate(parts)


def comprehension_of_unknown_length(x):
    return np.stack([np.sin(x[i]) for i in range(x.shape[0])])


def extended(x):
    parts = [x]
    parts.extend([np.sin(x)])
    return np.concatenate(parts)


def index_out_of_range(x):
    parts = [x, np.sin(x)]
    return parts[2]


def element_changed_in_place(x):
    y = x * 1.0
    parts = [y, np.sin(x)]
    y += 1.0  # the list holds y itself: NumPy changes its first element too
    return np.concatenate(parts)


def element_updated_in_place(x):
    parts = [x * 1.0, np.sin(x)]
    parts[0] += 1.0
    return np.concatenate(parts)


def pieces_held_in_a_variable(x):
    ps = np.split(x, 3)
    s = 0.0
    for q in ps:
        s = s + np.sum(q**2)
    return s


REFUSED = [
    (pieces_held_in_a_variable, (r(6),), "np.split's pieces"),
    (element_changed_in_place, (r(3),), "share"),
    (element_updated_in_place, (r(3),), "in place"),
    (appended_in_a_loop_of_unknown_count, (r(3), 2), "trip count is known"),
    (list_from_a_helper, (r(3),), "cannot return a list"),
    (returned, (r(3),), "cannot return a list"),
    (built_in_a_branch, (r(3),), "out of the branch or loop that built it"),
    (a_view_of_a_written_array, (r(3),), "may share memory with an array written in place"),
    (comprehension_of_unknown_length, (r(3),), "known when it transforms"),
    (extended, (r(3),), r"parts\.extend"),
    (index_out_of_range, (r(3),), "out of range"),
]


@pytest.mark.parametrize("f,args,match", REFUSED, ids=[f.__name__ for f, _, _ in REFUSED])
def test_refusals_name_the_line(f, args, match):
    with pytest.raises(s2sad.UnsupportedSyntaxError, match=match) as info:
        s2sad.vjp(f)(*args)
    assert "test_lists.py:" in str(info.value)


# ----------------------------------------------------------------------------- sharing


def two_names_one_list(x):
    out = []
    q = out
    out.append(x * 2.0)
    q.append(np.sin(x))
    return np.sum(np.stack(q) ** 2) + len(out)


def int_list_then_values(x, n):
    idx = []
    for i in range(n):
        idx.append(i)
    vals = [x[j] for j in [0, 1]]
    return np.sum(x[idx]) * vals[0] + vals[1]


def test_a_list_under_two_names_is_one_list():
    check_vjp(two_names_one_list, (r(3),))
    check_jvp(two_names_one_list, (r(3),))
    check_vjp(int_list_then_values, (r(4), 3))


# ----------------------------------------------------------------------------- helpers, tuples


def join(parts):
    return np.concatenate(parts)


def grow(parts, v):
    parts = parts + [v]
    return np.stack(parts)


def lists_through_helpers(x):
    parts = [x * 2.0, np.sin(x)]
    pair = (x**2, np.cos(x))
    a, b = pair
    s = np.sum(join(parts) ** 2) + np.sum(join([x, np.exp(x)]))
    return s + np.sum(grow(parts, a * b) ** 2) + np.sum(np.concatenate(parts + [x]))


def appends_to_the_callers_list(parts, v):
    parts.append(v)
    return 0.0


def helper_changes_the_list(x):
    parts = [x * 2.0]
    s = appends_to_the_callers_list(parts, x)
    return np.concatenate(parts) + s


def test_lists_and_tuples_through_helpers():
    check_vjp(lists_through_helpers, (r(3),))
    check_jvp(lists_through_helpers, (r(3),))
    check(lists_through_helpers, r(3))
    with pytest.raises(s2sad.UnsupportedSyntaxError, match="the caller's list") as info:
        s2sad.grad(helper_changes_the_list)(r(3))
    assert "test_lists.py:" in str(info.value)


# ----------------------------------------------------------------------------- random shapes


def joined_on_an_axis(x, y, axis):
    parts = []
    parts.append(np.sin(x))
    parts.append(x * y)
    return np.concatenate(parts, axis=axis) ** 2


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=3), data=st.data())
def test_a_list_variable_joined_on_a_random_axis(shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    args = (r(*shape), r(*shape, seed=1), axis)
    check_vjp(joined_on_an_axis, args, wrt=(0, 1))
    check_jvp(joined_on_an_axis, args, wrt=(0, 1))


# ----------------------------------------------------------------------------- trip counts read
# A loop unrolled for a global's or a closure's int is checked at each call: another value is a
# new transform (it once kept the first value's unrolling: silently wrong gradients).

TRIP = 3
PIECES = 2


def appended_for_global(x):
    out = []
    for k in range(TRIP):
        out.append(x[k] ** 2)
    return sum(out)


def comprehension_for_global(x):
    return np.sum(np.stack([x * k for k in range(TRIP)]))


def pieces_for_global(x):
    s = 0.0
    for q in np.split(x, PIECES):
        s = s + np.sum(q**2) * np.sum(q)
    return s


def summed_to(n):
    def f(x):
        return sum([x[k] ** 2 for k in range(n)])

    return f


@pytest.mark.parametrize("f", [appended_for_global, comprehension_for_global, pieces_for_global])
def test_a_global_trip_count_is_read_at_each_call(f, monkeypatch):
    x = np.array([0.3, 1.7, 1.1, 0.9, 0.5, 0.2])
    grad, jvp, hess = s2sad.grad(f), s2sad.jvp(f), s2sad.hessian(f)
    for trip, pieces in ((3, 2), (6, 3), (2, 2)):
        monkeypatch.setattr(sys.modules[__name__], "TRIP", trip)
        monkeypatch.setattr(sys.modules[__name__], "PIECES", pieces)
        check_vjp(f, (x,), wrt=0)
        np.testing.assert_allclose(grad(x), fd_jacobian(f, x), rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(
            jvp(x, tangent=np.ones(6))[1], np.sum(fd_jacobian(f, x)), rtol=1e-6
        )
        np.testing.assert_allclose(np.diag(hess(x)), _central_diag(f, x), rtol=1e-4, atol=1e-4)


def test_a_closure_trip_count_is_a_transform_of_its_own():
    x = np.array([0.3, 1.7, 1.1, 0.9])
    two, four = summed_to(2), summed_to(4)
    np.testing.assert_allclose(s2sad.grad(two)(x), [0.6, 3.4, 0.0, 0.0])
    np.testing.assert_allclose(s2sad.grad(four)(x), [0.6, 3.4, 2.2, 1.8])
    np.testing.assert_allclose(s2sad.jvp(four)(x, tangent=np.ones(4)), (5.0, 8.0))
    np.testing.assert_allclose(np.diag(s2sad.hessian(four)(x)), [2.0, 2.0, 2.0, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a fallback would still have to give these numbers
        np.testing.assert_allclose(s2sad.grad(two, jit=True)(x), [0.6, 3.4, 0.0, 0.0])
        np.testing.assert_allclose(s2sad.grad(four, jit=True)(x), [0.6, 3.4, 2.2, 1.8])


def _central_diag(f, x, h=1e-4):
    """The Hessian's diagonal by second differences of `f` itself (fd_hessian differences
    s2sad's own gradient, which these tests check too)."""
    out = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = h
        out[i] = (f(x + e) - 2 * f(x) + f(x - e)) / h**2
    return out


def copied_lists(x):
    a = [x[0], x[1] * 2.0]
    b = a.copy()
    b.append(x[2])
    c = list(a)
    return np.sum(np.stack(b) ** 2) + c[1] * a[0]


def test_a_copy_of_a_list_is_a_list_of_its_own():
    """`a.copy()` and `list(a)` (an internal error before): appending to the copy leaves `a`."""
    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(s2sad.grad(copied_lists)(x), [2.0 + 4.0, 16.0 + 2.0, 6.0])
    check_vjp(copied_lists, (x,), wrt=0)
    check_jvp(copied_lists, (x,), wrt=0)


def element_written_in_place(x):
    y = x * 1.0
    parts = [y[0:2], y[2:4]]
    parts[0][0] = 5.0
    return np.sum(y**2)


def element_added_to_in_place(x):
    y = x * 1.0
    parts = [y[0:2], y[2:4]]
    parts[1][0] += x[0]
    return np.sum(y**2)


@pytest.mark.parametrize("f", [element_written_in_place, element_added_to_in_place])
def test_a_write_into_a_lists_element_is_refused(f):
    """The elements are views of `y`: a write through one changes `y`, which s2sad does not
    follow (the first gave the gradient [10, 4, 6, 8] where it is [0, 4, 6, 8])."""
    with pytest.raises(s2sad.UnsupportedSyntaxError, match="writes into an element of the list"):
        s2sad.grad(f)(np.arange(1.0, 5.0))
