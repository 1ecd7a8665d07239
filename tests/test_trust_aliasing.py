"""Issue 13, classes 5, 6, 8 and 11: values NumPy shares or evaluates at another moment than a
naive reading of the code suggests.

- In-place arithmetic on a name (`z += v`) writes into an ndarray, which every name sharing its
  memory sees: refused where the memory may be shared, differentiated where it is not.
- A nested def's (or lambda's) defaults are evaluated where the def stands.
- `y[idx] = v` with an integer index naming an element twice: NumPy keeps the last write, so
  only that write's source gets the element's cotangent.
- A `vjp` pullback belongs to the point where `vjp` was called, whatever the caller does to its
  arrays (or to the output) afterwards.

Every derivative is compared with central differences in float64 (conftest), in Python and in
jitted mode.
"""

import warnings

import numpy as np
import pytest

import s2sad
from conftest import check_grad, check_jvp, check_vjp
from s2sad.jit import JitFallbackWarning
from s2sad.runtime import last_written

X = np.array([1.0, 2.0, 3.0])


def _check_all(f, x=X):
    """grad, vjp and jvp against finite differences, and the jitted grad and jvp against them."""
    g = check_grad(f, (x.copy(),))
    check_vjp(f, (x.copy(),))
    t = np.array([0.3, -0.7, 1.1])
    _, dot = s2sad.jvp(f)(x.copy(), tangent=t)
    np.testing.assert_allclose(dot, g @ t, rtol=1e-9, atol=1e-9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitFallbackWarning)  # (list literals as indices)
        np.testing.assert_allclose(s2sad.grad(f, jit=True)(x.copy()), g, rtol=1e-9, atol=1e-9)
        _, dot = s2sad.jvp(f, jit=True)(x.copy(), tangent=t)
    np.testing.assert_allclose(dot, g @ t, rtol=1e-9, atol=1e-9)
    return g


# ----------------------------------------------------------------------------- class 5: op= aliasing


def alias_then_add(x):
    y = x * 1.0
    z = y
    z += 1.0
    return np.sum(y * y)


def view_then_scale(x):
    y = x * 1.0
    v = y[1:]
    y *= 2.0
    return np.sum(v * v)


def transposed_view(x):
    y = x.reshape(3, 1) * np.ones((3, 2))
    z = y.T
    z *= 2.0
    return np.sum(y * y)


def reshaped_view(x):
    y = x * 1.0
    z = y.reshape(3, 1)
    z += 1.0
    return np.sum(y * y)


def view_read_in_loop(x):
    y = x * 1.0
    v = y[1:]
    s = 0.0
    for i in range(2):
        s = s + np.sum(v * v)  # the second trip sees the first trip's y *= 2
        y *= 2.0
    return s


def alias_on_one_branch(x):
    y = x * 1.0
    if x[0] > 0:
        z = y
    else:
        z = y * 2.0
    z += 1.0
    return np.sum(y * y)


def bump(a):
    a += 1.0
    return a


def helper_writes_caller_array(x):
    y = x * 1.0
    h = bump(y)
    return np.sum(y * h)


def parameter_alias(x):
    z = x
    z += 1.0
    return np.sum(x * z)


def row_of_matrix(x):
    y = x.reshape(3, 1) * np.ones((3, 2))
    r = y[0]
    r += 1.0
    return np.sum(y * y)


def view_of_view(x):
    y = x * 1.0
    v = y[1:]
    w = v
    y += 1.0
    return np.sum(w * w)


def view_written(x):
    y = x * 1.0
    v = y[1:]
    v *= 3.0
    return np.sum(y * y)


def same(a):
    return a


def first_row(a):
    b = a[0]
    return b


def helper_returns_its_argument(x):
    y = x * 1.0
    z = same(y)
    z += 1.0
    return np.sum(y * y)


def helper_returns_a_view(x):
    y = x.reshape(1, 3) * 1.0
    z = first_row(y)
    z[0] = 5.0  # (a subscript write: refused through an alias like `z = y[0]`)
    return np.sum(y * y)


def unpacked_alias(x):
    y = x * 1.0
    a, b = y, y * 2.0
    a += 1.0
    return np.sum(y * b)


def unpacked_alias_written(x):
    y = x * 1.0
    a, b = y, y * 2.0
    a[0] = 7.0
    return np.sum(y * b)


def rows_written_in_place(x):
    y = x.reshape(3, 1) * np.ones((3, 2))
    for row in y:
        row += 1.0  # writes into y
    return np.sum(y * y)


REFUSED = {
    alias_then_add: ("`z += 1.0` writes in place into `z`", "`y`", "z = z + 1.0"),
    view_then_scale: ("`v` may share memory with `y`", "`y *= 2.0`", "y = y * 2.0"),
    transposed_view: ("`z *= 2.0`", "`y.T`", "z = z * 2.0"),
    reshaped_view: ("`z += 1.0`", "`y.reshape(3, 1)`", "z = y.reshape(3, 1).copy()"),
    view_read_in_loop: ("`v` may share memory with `y`", "`y *= 2.0`", ".copy()"),
    alias_on_one_branch: ("`z += 1.0`", "`y`", "z = z + 1.0"),
    helper_writes_caller_array: ("`a += 1.0`", "`y`", "a = a + 1.0"),
    parameter_alias: ("`z += 1.0`", "`x`", "z = x.copy()"),
    row_of_matrix: ("`r += 1.0`", "`y[0]`", "r = r + 1.0"),
    view_of_view: ("`w` may share memory with `y`", "`y += 1.0`", "y = y + 1.0"),
    view_written: ("`v *= 3.0`", "`y[1:]`", "v = v * 3.0"),
    helper_returns_its_argument: ("`z += 1.0`", "`y`", "z = y.copy()"),
    helper_returns_a_view: ("`z` may share memory with another array", "`y`", ".copy()"),
    unpacked_alias: ("`a += 1.0`", "`y`", "a = a + 1.0"),
    rows_written_in_place: ("`row += 1.0`", "`y[", "row = row + 1.0"),
    unpacked_alias_written: ("`a` may share memory with another array", "`y`", ".copy()"),
}


@pytest.mark.parametrize("f", list(REFUSED), ids=lambda f: f.__name__)
@pytest.mark.parametrize("mode", ["grad", "grad_jit", "vjp", "jvp"])
def test_in_place_arithmetic_on_shared_memory_is_refused(f, mode):
    make = {
        "grad": lambda: s2sad.grad(f),
        "grad_jit": lambda: s2sad.grad(f, jit=True),
        "vjp": lambda: s2sad.vjp(f),
        "jvp": lambda: (lambda x: s2sad.jvp(f)(x, tangent=np.ones(3))),
    }[mode]()
    with pytest.raises(s2sad.UnsupportedSyntaxError) as info:
        make(X.copy())
    message = str(info.value)
    assert "does not follow writes through such aliases" in message
    assert "test_trust_aliasing.py:" in message
    for part in REFUSED[f]:
        assert part in message


def test_refusal_names_the_line_of_the_write():
    with pytest.raises(s2sad.UnsupportedSyntaxError) as info:
        s2sad.grad(view_then_scale)(X.copy())
    line = view_then_scale.__code__.co_firstlineno
    assert info.value.line == line + 4  # the read of `v`
    assert f"`y *= 2.0` (line {line + 3})" in str(info.value)


def elements_of_vector(x):
    s = 0.0
    for v in x:
        v += 1.0  # NumPy scalars: a new one each time
        s = s + v * v
    return s


def scalar_accumulator(x):
    s = 0.0
    for i in range(3):
        s += x[i] * x[i]
    return s


def fresh_array_accumulator(x):
    acc = np.zeros(3)
    acc += x
    acc *= x
    return np.sum(acc)


def scalar_kept_before_add(x):
    s = x[0] * 1.0
    prev = s
    s += x[1]
    return s * prev


def scalar_kept_in_loop(x):
    s = 0.0
    t = 0.0
    for i in range(3):
        prev = s
        s += x[i]
        t = t + prev * s
    return t


def own_argument(x):
    x += 1.0
    return np.sum(x * x)


def element_of_vector(x):
    y = x * 2.0
    z = y[0]  # a NumPy scalar: `+=` makes a new one
    z += 1.0
    return z * y[0]


def rebound_first(x):
    y = x * 1.0
    z = y
    z = z + 1.0
    z += 1.0
    return np.sum(y * z)


def copied_view(x):
    y = x * 1.0
    v = y[1:].copy()
    y *= 2.0
    return np.sum(v * v) + np.sum(y)


def view_read_before_only(x):
    y = x * 1.0
    v = y[1:]
    s = np.sum(v)
    y *= 2.0
    return np.sum(y) * s


def rows_accumulated(x):
    y = x.reshape(3, 1) * np.ones((3, 2))
    acc = np.zeros(2)
    for row in y:
        acc += row * row
    return np.sum(acc)


def helper_on_fresh_array(x):
    h = bump(x * 1.0)
    return np.sum(h * h)


def helper_result_is_fresh(x):
    y = x * 1.0
    z = first_row(y.reshape(1, 3) * 2.0)  # a view of a temporary no one else holds
    z += 1.0
    return np.sum(y * z)


@pytest.mark.parametrize(
    "f",
    [
        scalar_accumulator,
        elements_of_vector,
        fresh_array_accumulator,
        scalar_kept_before_add,
        scalar_kept_in_loop,
        own_argument,
        element_of_vector,
        rebound_first,
        copied_view,
        view_read_before_only,
        rows_accumulated,
        helper_on_fresh_array,
        helper_result_is_fresh,
    ],
    ids=lambda f: f.__name__,
)
def test_in_place_arithmetic_without_sharing_is_differentiated(f):
    _check_all(f)


def test_own_argument_is_not_modified():
    x = X.copy()
    np.testing.assert_allclose(s2sad.grad(own_argument)(x), 2 * (X + 1))
    np.testing.assert_array_equal(x, X)


# ----------------------------------------------------------------------------- class 6: defaults


def default_before_rebinding(x):
    k = x[0] * 2.0

    def h(v, k=k):
        return v * k

    k = x[1] * 5.0
    return np.sum(h(x)) + k


def lambda_default(x):
    k = x[0]
    f = lambda v, k=k * 3.0: v * k  # noqa: E731
    k = 5.0
    return np.sum(f(x))


def default_per_trip(x):
    s = 0.0
    k = 1.0
    for i in range(3):
        h = lambda v, k=k: v * k  # noqa: E731
        k = k + x[i]
        s = s + np.sum(h(x))
    return s


def keyword_only_default(x):
    k = x[0]

    def h(v, *, k=k):
        return v * k

    k = 2.0
    return np.sum(h(x)) + np.sum(h(x, k=3.0))


@pytest.mark.parametrize(
    "f",
    [default_before_rebinding, lambda_default, default_per_trip, keyword_only_default],
    ids=lambda f: f.__name__,
)
def test_nested_default_is_evaluated_at_the_def(f):
    _check_all(f)


def test_nested_default_exact():
    # h's k is 2 * x[0], whatever k holds at the call
    g = s2sad.grad(default_before_rebinding)(X.copy())
    np.testing.assert_allclose(g, [2 * X[0] + 2 * np.sum(X), 2 * X[0] + 5.0, 2 * X[0]])


def called_after_defining_loop(x):
    for i in range(2):
        h = lambda v, k=x[i]: v * k  # noqa: E731
    return np.sum(h(x))


def test_default_from_a_loop_called_after_it_is_refused():
    with pytest.raises(s2sad.UnsupportedSyntaxError) as info:
        s2sad.grad(called_after_defining_loop)(X.copy())
    assert "`h` is called after the loop that defines it" in str(info.value)
    assert "test_trust_aliasing.py:" in str(info.value)


# ----------------------------------------------------------------------------- class 8: repeats

W = np.array([1.0, 2.0, 3.0, 4.0])


def repeated_index(x):
    y = np.zeros(3)
    y[[0, 0, 1]] = x
    return np.sum(y * W[:3])


def repeated_index_squares(x):
    y = np.zeros(3)
    y[[0, 0, 1]] = x * x
    return np.sum(y * W[:3])


def index_made_at_run_time(x):
    idx = np.arange(3) // 2  # [0, 0, 1]
    y = np.zeros(4)
    y[idx] = x * x
    return np.sum(y * W)


def repeated_index_scalar_value(x):
    y = np.zeros(4)
    y[[0, 0, 2]] = x[1] * 3.0
    return np.sum(y * W)


def boolean_mask(x):
    y = np.ones(3)
    y[x > 1.5] = x[x > 1.5] ** 2
    return np.sum(y * W[:3])


def two_index_arrays(x):
    y = np.zeros((2, 2))
    y[[0, 0, 1], [1, 1, 0]] = x
    return np.sum(y * np.array([[1.0, 2.0], [3.0, 4.0]]))


def repeated_rows(x):
    y = np.zeros((3, 2))
    y[[2, 2, 0]] = x.reshape(3, 1) * np.ones((3, 2))
    return np.sum(y * np.arange(6.0).reshape(3, 2))


def repeated_columns(x):
    y = np.zeros((2, 3))
    y[:, [2, 2, 0]] = np.stack([x, 2.0 * x])
    return np.sum(y * np.arange(6.0).reshape(2, 3))


def repeated_index_added(x):
    y = x * 1.0
    y[[0, 0, 1]] += x  # y[0] = x[0] + x[1]: the last write, not both
    return np.sum(y * W[:3])


def repeated_index_in_loop(x):
    y = np.zeros(3)
    s = 0.0
    for i in range(2):
        y[[0, 0, 1]] = x * (i + 1.0)
        s = s + np.sum(y * W[:3])
    return s


@pytest.mark.parametrize(
    "f",
    [
        repeated_index,
        repeated_index_squares,
        index_made_at_run_time,
        repeated_index_scalar_value,
        boolean_mask,
        two_index_arrays,
        repeated_rows,
        repeated_columns,
        repeated_index_added,
        repeated_index_in_loop,
    ],
    ids=lambda f: f.__name__,
)
def test_repeated_index_store_gives_the_last_write_the_cotangent(f):
    _check_all(f)
    h = s2sad.hessian(f)(X.copy())
    grad = s2sad.grad(f)
    eps = 1e-5
    fd = np.array([(grad(X + eps * e) - grad(X - eps * e)) / (2 * eps) for e in np.eye(3)])
    np.testing.assert_allclose(h, fd.T, atol=1e-6)


def test_repeated_index_exact():
    np.testing.assert_array_equal(s2sad.grad(repeated_index)(X.copy()), [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(s2sad.grad(repeated_index, jit=True)(X.copy()), [0.0, 1.0, 2.0])
    _, pullback = s2sad.vjp(repeated_index)(X.copy())
    np.testing.assert_array_equal(pullback(1.0), [0.0, 1.0, 2.0])


def repeated_index_vector(x):
    y = np.zeros(3)
    y[[0, 0, 1]] = x * x
    return y * np.array([1.0, 2.0, 3.0])


def test_repeated_index_jacobian_both_modes():
    expected = np.array([[0.0, 4.0, 0.0], [0.0, 0.0, 12.0], [0.0, 0.0, 0.0]])
    for mode in ("reverse", "forward"):
        np.testing.assert_array_equal(
            s2sad.jacobian(repeated_index_vector, mode=mode)(X.copy()), expected
        )


def test_runtime_idx_store_compiles_with_numba():
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitFallbackWarning)
        g = s2sad.grad(index_made_at_run_time, jit=True)(X.copy())
    np.testing.assert_allclose(g, [0.0, 4.0, 12.0])


def test_last_written_helper():
    g = np.array([1.0, 2.0, 3.0, 4.0])
    y = np.zeros(3)
    np.testing.assert_array_equal(last_written(g, y, np.array([2, 0, 2, 0])), [0, 0, 3, 4])
    assert last_written(g, y, slice(None)) is g
    rows = np.arange(8.0).reshape(2, 4)  # leading batch axis
    np.testing.assert_array_equal(last_written(rows, y, [1, 1, 0, 2]), [[0, 1, 2, 3], [0, 5, 6, 7]])


# ----------------------------------------------------------------------------- class 11: pullbacks


def square(x):
    return x * x


def exp_of(x, w):
    h = np.exp(x * w)
    return h


def rows_sin(x):
    s = 0.0
    for row in x:
        s = s + np.sum(np.sin(row) * row)
    return np.array([s, s * s])


@pytest.mark.parametrize("jit", [False, True])
def test_pullback_keeps_the_arguments_of_the_vjp_call(jit):
    x = X.copy()
    y, pullback = s2sad.vjp(square, jit=jit)(x)
    x[:] = 10.0
    np.testing.assert_array_equal(pullback(np.ones(3)), 2 * X)
    np.testing.assert_array_equal(x, 10.0)  # the caller's array is its own


@pytest.mark.parametrize("jit", [False, True])
def test_pullback_ignores_changes_to_the_output_and_tuple_arguments(jit):
    x, w = X.copy(), np.array([0.5, -0.2, 0.1])
    y, pullback = s2sad.vjp(exp_of, wrt=(0, 1), jit=jit)(x, w)
    expected = np.exp(X * w)
    y *= 0.0
    x += 1.0
    w_before = w.copy()
    w[:] = 3.0
    dx, dw = pullback(np.ones(3))
    np.testing.assert_allclose(dx, expected * w_before)
    np.testing.assert_allclose(dw, expected * X)


@pytest.mark.parametrize("jit", [False, True])
def test_pullback_with_taped_rows_keeps_them(jit):
    x = np.arange(6.0).reshape(3, 2) / 7
    original = x.copy()
    _, pullback = s2sad.vjp(rows_sin, jit=jit)(x)
    x *= -3.0
    seed = np.array([0.4, -1.2])
    _, reference = s2sad.vjp(rows_sin)(original)
    np.testing.assert_allclose(pullback(seed), reference(seed))


def _stale_view_updated_in_place(x):
    y = x * 1.0
    v = y.T
    y[0] += 1.0
    v *= 2.0
    return np.sum(v)


def test_a_stale_view_updated_in_place_is_refused():
    """`v op= e` reads `v` first: a view of an array written since is refused there (fuzz seed
    250599 raised an internal KeyError, the view forgotten before its read)."""
    x = np.arange(6.0).reshape(2, 3)
    for transform in (s2sad.grad, s2sad.value_and_grad):
        with pytest.raises(s2sad.UnsupportedSyntaxError, match="may (share memory|be a view)"):
            transform(_stale_view_updated_in_place)(x)
    with pytest.raises(s2sad.UnsupportedSyntaxError, match="may (share memory|be a view)"):
        s2sad.jvp(_stale_view_updated_in_place)(x, tangent=np.ones_like(x))
