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
from conftest import check_grad, check_jvp, check_vjp, load_module
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
    view_read_in_loop: ("`v` may share memory with `y`", "`y *= 2.0`", "`v = v.copy()`"),
    alias_on_one_branch: ("`z += 1.0`", "`y`", "z = z + 1.0"),
    helper_writes_caller_array: ("`a += 1.0`", "`y`", "a = a + 1.0"),
    parameter_alias: ("`z += 1.0`", "`x`", "z = x.copy()"),
    row_of_matrix: ("`r += 1.0`", "`y[0]`", "r = r + 1.0"),
    view_of_view: ("`w` may share memory with `y`", "`y += 1.0`", "y = y + 1.0"),
    view_written: ("`v *= 3.0`", "`y[1:]`", "v = v * 3.0"),
    helper_returns_its_argument: ("`z += 1.0`", "`y`", "z = y.copy()"),
    helper_returns_a_view: ("`z` may share memory with another array", "`y`", "`z = z.copy()`"),
    unpacked_alias: ("`a += 1.0`", "`y`", "a = a + 1.0"),
    rows_written_in_place: ("`row += 1.0`", "`y[", "row = row + 1.0"),
    unpacked_alias_written: ("`a` may share memory with another array", "`y`", "`a = a.copy()`"),
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


# --------------------------------------------- class 5: memory shared through helpers, choices, calls
# What a value may share memory with is decided by an allowlist of what makes new arrays: a name,
# a subscript, `.T`/`.real`, either value of `a if c else b`, a tuple or list element, and any
# call not known to return a new array may be (a view of) every array it reads; a helper's
# results are followed through its body.


def cell(h):
    h2 = np.tanh(h)
    return h2, h2


def split(v):
    return v[:2], v[2:]


def helper_returns_one_array_twice(x):
    h, out = cell(x)
    out *= 0.5
    return np.sum(h)


def helper_returns_views_of_its_argument(x):
    y = x * 1.0
    a, b = split(y)
    a += 1.0
    return np.sum(y**2)


def helper_returns_views_written(x):
    y = x * 1.0
    a, b = split(y)
    a[0] = 4.0
    return np.sum(y**2)


def closure_returns_caller_array(x):
    y = x * 1.0

    def get():
        return y

    z = get()
    z += 1.0
    return np.sum(y**2)


def chosen_by_condition(x):
    y = x * 1.0
    w = x * 2.0
    z = y if x[0] > 0 else w
    z += 1.0
    return np.sum(y**2)


def chosen_by_constant_condition(x):
    y = x * 1.0
    z = y if True else x
    z += 1.0
    return np.sum(y**2)


def tuple_element(x):
    y = x * 1.0
    w = x * 2.0
    z = (y, w)[0]
    z += 1.0
    return np.sum(y**2)


def list_element(x):
    y = x * 1.0
    z = [y][0]
    z += 1.0
    return np.sum(y**2)


def list_element_updated(x):
    y = x * 1.0
    L = [y]
    L[0] += 1.0
    return np.sum(y**2)


def unpacked_split(x):
    y = x * 1.0
    a, b = np.split(y, [1])
    b *= 2.0
    return np.sum(y**2)


def unpacked_rows(x):
    y = x.reshape(3, 1) * 1.0
    a, b, c = y
    c += 1.0
    return np.sum(y**2)


def rows_read_after_their_array_is_written(x):
    y = x.reshape(3, 1) * np.ones((3, 2))
    s = 0.0
    for row in y:
        y += 1.0  # the rows not yet read change too
        s = s + np.sum(row * row)
    return s


def rows_of_a_rebound_array(x):
    y = x.reshape(3, 1) * np.ones((3, 2))
    s = 0.0
    for row in y:
        s = s + np.sum(row * row)
        y = y * 2.0
        y += 1.0  # a new array, not the one the loop reads
    return s + np.sum(y)


REFUSED_SHARING = {
    helper_returns_one_array_twice: ("`out *= 0.5`", "`cell(x)`", "out = out * 0.5"),
    helper_returns_views_of_its_argument: ("`a += 1.0`", "`y`", "a = a + 1.0"),
    helper_returns_views_written: ("`a` may share memory with another array", "`y`", ".copy()"),
    closure_returns_caller_array: ("`z += 1.0`", "`y`", "z = z + 1.0"),
    chosen_by_condition: ("`z += 1.0`", "`y if x[0] > 0 else w`", "z = z + 1.0"),
    chosen_by_constant_condition: ("`z += 1.0`", "`y if True else x`", "z = z + 1.0"),
    tuple_element: ("`z += 1.0`", "`(y, w)[0]`", "z = z + 1.0"),
    list_element: ("`z += 1.0`", "`[y][0]`", "z = z + 1.0"),
    list_element_updated: ("`L` may share memory with another array", "`[y]`", ".copy()"),
    unpacked_split: ("`b *= 2.0`", "`np.split(y, [1])[1]`", "b = np.split(y, [1])[1].copy()"),
    unpacked_rows: ("`c += 1.0`", "`y[2]`", "c = y[2].copy()"),  # (a row: not `y.copy()`)
    rows_read_after_their_array_is_written: ("`row` may share memory with `y`", "`y += 1.0`"),
}


@pytest.mark.parametrize("f", list(REFUSED_SHARING), ids=lambda f: f.__name__)
@pytest.mark.parametrize("mode", ["grad", "grad_jit", "vjp", "jvp"])
def test_memory_shared_through_helpers_and_choices_is_refused(f, mode):
    _assert_refused(f, mode, REFUSED_SHARING[f])


def _assert_refused(f, mode, parts, x=X):
    make = {
        "grad": lambda: s2sad.grad(f),
        "grad_jit": lambda: s2sad.grad(f, jit=True),
        "vjp": lambda: s2sad.vjp(f),
        "jvp": lambda: (lambda x: s2sad.jvp(f)(x, tangent=np.ones_like(x))),
    }[mode]()
    with pytest.raises(s2sad.UnsupportedSyntaxError) as info:
        make(x.copy())
    message = str(info.value)
    assert "does not follow writes through such aliases" in message
    assert ".py:" in message
    for part in parts:
        assert part in message


def helper_results_only_read(x):
    y = x * 1.0
    a, b = split(y)
    h, out = cell(y)
    return np.sum(a * a) + np.sum(b**3) + np.sum(h * out)


def helper_result_rebound(x):
    h, out = cell(x)
    out = out * 0.5
    out += 1.0  # `out` is its own array now
    return np.sum(h * out)


def chosen_then_rebound(x):
    y = x * 1.0
    w = x * 2.0
    z = y if x[0] > 0 else w
    z = z + 1.0
    z += 1.0
    return np.sum(y**2) + np.sum(z * w)


def view_by_call_only_read(x):
    y = x * 1.0
    z = np.flip(y)
    y = y * 2.0
    y += 1.0  # a new array: not the one `z` views
    return np.sum(y * z)


@pytest.mark.parametrize(
    "f",
    [
        helper_results_only_read,
        helper_result_rebound,
        chosen_then_rebound,
        view_by_call_only_read,
        rows_of_a_rebound_array,
    ],
    ids=lambda f: f.__name__,
)
def test_shared_memory_only_read_is_differentiated(f):
    _check_all(f)


# Calls that may return a view of their argument, or the argument itself (NumPy's documentation:
# "a view is returned whenever possible", "no copy is performed if the input is already an
# ndarray"...), and calls that always make a new array.
MAY_SHARE = [
    "np.flip(y)",
    "np.fliplr(y.reshape(1, 3))",
    "np.flipud(y)",
    "np.rot90(y.reshape(1, 3))",
    "y.real",
    "np.real(y)",
    "np.split(y, 3)[0]",
    "np.hsplit(y, 3)[0]",
    "np.vsplit(y.reshape(3, 1), 3)[0]",
    "np.array_split(y, 3)[0]",
    "np.array(y, copy=False)",
    "np.asarray(y)",
    "np.asanyarray(y)",
    "np.ascontiguousarray(y)",
    "np.asfortranarray(y)",
    "np.require(y)",
    "y.astype(np.float64, copy=False)",
    "np.atleast_1d(y)",
    "np.atleast_2d(y)",
    "np.moveaxis(y, 0, 0)",
    "np.swapaxes(y.reshape(1, 3), 0, 1)",
    "np.expand_dims(y, 0)",
    "np.squeeze(y)",
    "y.squeeze()",
    "y.view()",
    "np.ravel(y)",
    "y.ravel()",
    "y.reshape(-1)",
    "np.transpose(y)",
    "y.conj()",  # a real array's conj() is the array itself
    "np.einsum('i->i', y)",
    "np.diff(y, 0)",  # `a` itself
    "np.float64(y)",  # an array's own memory
]
ALWAYS_NEW = [
    "np.roll(y, 1)",
    "np.diff(y)",
    "y.copy()",
    "np.copy(y)",
    "np.array(y)",
    "np.stack([y, y])[0]",
    "np.concatenate([y, y])[:3]",
    "np.tanh(y)",
    "np.cumsum(y)",
    "np.einsum('i,i->i', y, y)",
]


def _module_with(tmp_path, rhs: str, name: str):
    """A function `f` (in a file of its own: s2sad reads the source) that binds `z` from `rhs`
    and adds to it in place, then reads `y`."""
    text = (
        "import numpy as np\n\n\n"
        "def f(x):\n"
        "    y = x * 1.0\n"
        f"    z = {rhs}\n"
        "    z += 1.0\n"
        "    return np.sum(y**2) + np.sum(z)\n"
    )
    return load_module(tmp_path, name, text).f


@pytest.mark.parametrize("rhs", MAY_SHARE)
@pytest.mark.parametrize("mode", ["grad", "grad_jit", "vjp", "jvp"])
def test_calls_that_may_return_a_view_are_refused(rhs, mode, tmp_path):
    f = _module_with(tmp_path, rhs, f"may_share_{MAY_SHARE.index(rhs)}")
    _assert_refused(f, mode, ("`z += 1.0` writes in place into `z`", f"`{rhs}`", "z = z + 1.0"))


@pytest.mark.parametrize("rhs", ALWAYS_NEW)
def test_calls_that_make_a_new_array_are_differentiated(rhs, tmp_path):
    _check_all(_module_with(tmp_path, rhs, f"always_new_{ALWAYS_NEW.index(rhs)}"))


def view_by_call_read_after_write(x):
    y = x * 1.0
    v = np.flip(y)
    w = v
    y[1] = 5.0
    return np.sum(w**2)


def test_a_view_made_by_a_call_read_after_a_write_is_refused():
    with pytest.raises(s2sad.UnsupportedSyntaxError, match="`w` may be a view of `y`"):
        s2sad.grad(view_by_call_read_after_write)(X.copy())


def view_rebound_in_branches(x):
    y = x * 1.0
    v = y[0:2]
    y[1:] = np.tanh(v)
    if x[0] > 0.0:
        v = v + x[1]
    else:
        v = 0.5 * v
    return np.sum(v)


def test_a_view_read_in_branches_after_a_write_is_refused_by_name():
    """The view's base is read in both branches after the write (an internal KeyError while
    the refusal was built, before)."""
    with pytest.raises(s2sad.UnsupportedSyntaxError, match="`v` may be a view of"):
        s2sad.grad(view_rebound_in_branches)(np.array([0.3, -0.5, 0.8]))


def writes_what_the_next_pass_aliases(x):
    prev = x * 0.0
    s = 0.0
    for i in range(3):
        y = x * (i + 1.0)
        s = s + np.sum(np.sin(y))
        prev[0] = 1.0  # from the second pass on: a write into the previous pass's y
        prev = y
    return s + np.sum(prev)


def writes_a_copy_the_next_pass_holds(x):
    prev = x * 0.0
    s = 0.0
    for i in range(3):
        y = x * (i + 1.0)
        s = s + np.sum(np.sin(y))
        prev[0] = 1.0
        prev = y.copy()
    return s + np.sum(prev)


@pytest.mark.parametrize("jit", [False, True])
def test_a_write_through_an_alias_the_loop_carries_is_refused(jit):
    """Python mode's gradient was silently wrong (by about 1: the tape held the previous pass's
    y, which the write changed); the jitted one copied its tapes. Refused with the way out."""
    x = np.array([0.3, 0.5, 0.9, 1.2])
    with pytest.raises(
        s2sad.UnsupportedSyntaxError, match="on the next pass the write changes `y`"
    ) as info:
        s2sad.grad(writes_what_the_next_pass_aliases, jit=jit)(x)
    assert "prev = y.copy()" in str(info.value)
    check_grad(writes_a_copy_the_next_pass_holds, (x,))


def doubled_rows(B):
    s = 0.0
    for r in B:
        r *= 2.0
        s = s + np.sum(r * r)
    return s


def test_a_write_into_a_loops_row_is_refused_with_a_hint_in_the_users_names():
    with pytest.raises(s2sad.UnsupportedSyntaxError) as info:
        s2sad.grad(doubled_rows)(np.ones((3, 2)))
    hint = str(info.value).split("hint:")[1]
    assert "`r = r.copy()`" in hint and "_index" not in hint


def _writes_second(x, y):
    y[1:] = y[:-1] * x[1:]
    return np.sum(y * x)


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize(
    "transform",
    [
        lambda f, jit: s2sad.grad(f, wrt=(0, 1), jit=jit),
        lambda f, jit: s2sad.value_and_grad(f, wrt=(0, 1), jit=jit),
        lambda f, jit: s2sad.vjp(f, wrt=(0, 1), jit=jit),
        lambda f, jit: s2sad.jacobian(f, wrt=(0, 1), jit=jit),
    ],
    ids=["grad", "value_and_grad", "vjp", "jacobian"],
)
def test_one_array_passed_as_two_arguments_one_written_is_refused(transform, jit):
    # NumPy's function reads its own write into y through x; s2sad's code copies y and would
    # differentiate two arrays: a value and gradient other than the function's
    b = np.array([0.5, 1.2, -0.7, 0.9])
    g = transform(_writes_second, jit)
    for x, y in ((b, b), (b[1:], b[:-1])):  # the same array, and overlapping views
        with pytest.raises(s2sad.S2SADError, match="y is written in place and shares memory"):
            g(x, y)
    got = s2sad.grad(_writes_second, wrt=(0, 1), jit=jit)(b, b.copy())  # distinct: as before
    want = s2sad.grad(_writes_second, wrt=(0, 1))(b.copy(), b.copy())
    for a, w in zip(got, want):
        np.testing.assert_allclose(a, w, rtol=1e-13)
    np.testing.assert_array_equal(b, [0.5, 1.2, -0.7, 0.9])  # the caller's array unchanged


# ------------------------------------ views carried around a loop's back edge (lead, fix1 item 3)
# `prev = h[0]` at a step's end is a view of `h`; a write into `h` at the next step, before
# `prev` is read, shows through it. s2sad reads a snapshot: refused, as in straight code.


def _written_in_a_nested_loop_then_read(x, w):
    h = np.ones((2, x.shape[0]))
    prev = x * 0.0
    total = 0.0
    for t in range(3):
        for j in range(2):
            h[j] = np.tanh(h[j] * w[t] + x)
        total = total + np.sum(h[1] * prev)
        prev = h[0]
    return total


def _written_then_read(x, w):
    h = np.ones((2, x.shape[0]))
    prev = x * 0.0
    total = 0.0
    for t in range(3):
        h[0] = np.sin(h[0] * w[t] + x)
        total = total + np.sum(prev * x)
        prev = h[0]
    return total


def _written_then_read_in_a_while(x, w):
    h = np.ones((2, x.shape[0]))
    prev = x * 0.0
    total = 0.0
    t = 0
    while t < 3:
        h[0] = np.sin(h[0] * w[t] + x)
        total = total + np.sum(prev * x)
        prev = h[0]
        t += 1
    return total


def _updated_then_read(x, w):
    h = x * 1.0
    prev = x * 0.0
    total = 0.0
    for t in range(3):
        h *= w[t]
        total = total + np.sum(prev * x)
        prev = h[1:]
    return total


def _bound_then_written_read_after_the_loop(x, w):
    h = np.ones((2, x.shape[0]))
    prev = x * 0.0
    for t in range(3):
        prev = h[0]
        h[0] = np.sin(h[0] * w[t] + x)
    return np.sum(prev * x)


@pytest.mark.parametrize(
    "f",
    [
        _bound_then_written_read_after_the_loop,
        _written_in_a_nested_loop_then_read,
        _written_then_read,
        _written_then_read_in_a_while,
        _updated_then_read,
    ],
)
def test_a_view_carried_to_the_next_step_and_read_after_a_write_is_refused(f):
    x, w = np.linspace(-1.0, 1.0, 4), np.linspace(0.5, 1.5, 12).reshape(3, 4)
    with pytest.raises(s2sad.UnsupportedSyntaxError, match="may (be a view of|share memory)"):
        s2sad.grad(f)(x, w)


def _read_before_the_write(x, w):
    h = np.ones((2, x.shape[0]))
    prev = x * 0.0
    total = 0.0
    for t in range(3):
        total = total + np.sum(h[1] * prev)
        for j in range(2):
            h[j] = np.tanh(h[j] * w[t] + x)
        prev = h[0]  # read at the next step before `h` is written: its values then
    return total


def _copied(x, w):
    h = np.ones((2, x.shape[0]))
    prev = x * 0.0
    total = 0.0
    for t in range(3):
        for j in range(2):
            h[j] = np.tanh(h[j] * w[t] + x)
        total = total + np.sum(h[1] * prev)
        prev = h[0].copy()
    return total


def _never_written(x, w):
    prev = x * 0.0
    total = 0.0
    for t in range(3):
        total = total + np.sum(np.sin(prev) * x)
        prev = w[t]
    return total


def _rows_written_once(x, w):
    h = np.zeros((4, x.shape[0]))
    h[0] = x
    total = 0.0
    for t in range(3):
        h[t + 1] = np.tanh(h[t] * w[t])
        prev = h[t]
        total = total + np.sum(prev * h[t + 1])
    return total


def _written_then_bound_read_after_the_loop(x, w):
    h = np.ones((2, x.shape[0]))
    prev = x * 0.0
    for t in range(3):
        h[0] = np.sin(h[0] * w[t] + x)
        prev = h[0]
    return np.sum(prev * x)


@pytest.mark.parametrize(
    "f",
    [
        _read_before_the_write,
        _copied,
        _never_written,
        _rows_written_once,
        _written_then_bound_read_after_the_loop,
    ],
)
def test_a_view_carried_across_steps_but_read_before_any_write_is_differentiated(f):
    x, w = np.linspace(-1.0, 1.0, 4), np.linspace(0.5, 1.5, 12).reshape(3, 4)
    value, _ = s2sad.value_and_grad(f)(x.copy(), w.copy())
    np.testing.assert_allclose(value, f(x.copy(), w.copy()), rtol=1e-12)
    check_grad(f, (x, w), wrt=(0, 1))


def _unpacked_views_then_written(x, w):
    h = np.stack([x, 2.0 * x])
    prev, other = h[0], h[1]  # views, bound by one tuple assignment
    h[0] = h[0] * w[0]
    return np.sum(prev**2) + np.sum(other)


def _rows_unpacked_then_written(x, w):
    h = np.stack([x, 2.0 * x])
    a, b = h  # rows of h: views
    h[0] = h[0] * w[0]
    return np.sum(a**2) + np.sum(b)


def _unpacked_views_in_a_loop(x, w):
    h = np.stack([x, 2.0 * x])
    s = 0.0
    prev, other = h[0], h[1]
    for t in range(2):
        h[0] = h[0] * w[t]
        s = s + np.sum(prev**2) + np.sum(other)
        prev, other = h[0], h[1]
    return s


@pytest.mark.parametrize(
    "f", [_unpacked_views_then_written, _rows_unpacked_then_written, _unpacked_views_in_a_loop]
)
def test_views_bound_by_unpacking_and_read_after_a_write_are_refused(f):
    """As `prev = h[0]` alone is: s2sad gave 15.5 where NumPy gives 50.5 (break-it review)."""
    x, w = np.linspace(-1.0, 1.0, 4), np.linspace(0.5, 1.5, 12).reshape(3, 4)
    with pytest.raises(s2sad.UnsupportedSyntaxError, match="may be a view of `h`"):
        s2sad.grad(f)(x, w)


def _unpacked_views_read_before_the_write(x, w):
    h = np.stack([x, 2.0 * x])
    prev, other = h[0], h[1]
    a, b = h
    s = np.sum(prev**2) + np.sum(other) + np.sum(a * b)
    h[0] = h[0] * w[0]
    return s + np.sum(h)


def test_views_bound_by_unpacking_and_read_before_a_write_are_differentiated():
    f = _unpacked_views_read_before_the_write
    x, w = np.linspace(-1.0, 1.0, 4), np.linspace(0.5, 1.5, 12).reshape(3, 4)
    value, _ = s2sad.value_and_grad(f)(x.copy(), w.copy())
    np.testing.assert_allclose(value, f(x.copy(), w.copy()), rtol=1e-12)
    check_grad(f, (x, w), wrt=(0, 1))


def _first(t):
    return t[0]


def _first_of_a_tuple(x):
    y = x.copy()
    z = _first((y,))
    z[0] = 2.0
    return np.sum(y * y)


def _first_of_a_named_tuple(x):
    y = x.copy()
    t = (y, x)
    z = _first(t)
    z[0] = 2.0
    return np.sum(y * y)


def _first_by_a_lambda(x):
    y = x.copy()
    g = lambda t: t[0]  # noqa: E731
    z = g((y,))
    z[0] = 2.0
    return np.sum(y * y)


def _first_in_a_checkpointed_loop(x):
    y = x.copy()
    for _ in s2sad.checkpoint(range(4), snapshots=2):
        z = _first((y,))
        z[0] = np.sin(z[1]) + z[0] * 0.5
        y = y * 1.1
    return np.sum(y**2)


def _first_of_a_pair_updated(x):
    y = x.copy()
    z = _first((y, x * 2.0))
    z += 2.0
    return np.sum(y * y)


@pytest.mark.parametrize(
    "f, source",
    [
        (_first_of_a_tuple, "`y`"),
        (_first_of_a_named_tuple, "`t[0]`"),  # (not the normalizer's `(t_0, t_1)`)
        (_first_by_a_lambda, "`y`"),
        (_first_in_a_checkpointed_loop, "`y`"),
        (_first_of_a_pair_updated, "`y` (it was assigned from it)"),
    ],
)
def test_a_write_through_an_element_a_helper_returns_is_refused(f, source):
    """A helper returning an element of the tuple it is given (`_first((y,))`) is `y` itself:
    the write went unseen and the gradient was wrong ([4, 1.4, 2.2], not [0, 1.4, 2.2]). The
    message names the element as the user wrote it."""
    with pytest.raises(s2sad.UnsupportedSyntaxError, match="`z.*may share memory") as raised:
        s2sad.grad(f)(X.copy())
    text = str(raised.value)
    assert source in text and "t_0" not in text


def _unpacked_tuple_updated(x):
    y = x * 1.0
    t = (y, x * 2.0)
    a, b = t
    a += 1.0
    return np.sum(y * b)


def _unpacked_rows_written(x):
    y = x.reshape(3, 1) * np.ones((3, 2))
    a, b, c = y
    a[0] = 1.0
    return np.sum(y * y)


@pytest.mark.parametrize(
    "f, source", [(_unpacked_tuple_updated, "`t[0]`"), (_unpacked_rows_written, "`y[0]`")]
)
def test_an_alias_bound_by_unpacking_is_named_as_an_element(f, source):
    with pytest.raises(s2sad.UnsupportedSyntaxError, match="`a.*may share memory") as raised:
        s2sad.grad(f)(X.copy())
    assert source in str(raised.value) and "t_0" not in str(raised.value)


def _first_read_in_a_loop(x):
    y = x.copy()
    s = 0.0
    for i in range(4):
        z = _first((y,))
        s = s + np.sum(np.sin(z))
        y[i % 3] = 0.5 * y[(i + 1) % 3]
    return s


def test_an_element_a_helper_returns_is_read_as_it_was_before_a_write():
    """The tape kept `z` at the end of the pass, after the write into `y` it shares."""
    check_grad(_first_read_in_a_loop, (X.copy(),))
