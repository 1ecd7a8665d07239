"""Control flow, in-place writes, helper calls: each construct alone, inside a loop, and combined,
checked against finite differences (and, for the tape, against what the adjoint needs)."""

import math

import numpy as np
import pytest

import s2sad
from conftest import check_grad, check_jvp, check_vjp


def f(x):
    for i in range(2):
        x = x * 2
    return x


def accum(x):
    s = 0.0
    for i in range(x.shape[0]):
        s = s + np.sin(x[i])
    return s


def euler(y0, k, n):
    y = y0
    dt = 0.01
    for i in range(n):
        y = y + dt * (-k * y + math.sin(y))
    return y


def branchy(x):
    if np.sum(x) > 0:
        y = x * 2
    else:
        y = np.sin(x)
    return np.sum(y)


def early(x):
    if x > 1.0:
        return x * x
    return 3.0 * x


def recur(x, a):
    y = np.zeros_like(x)
    y[0] = x[0]
    for i in range(1, x.shape[0]):
        y[i] = a * y[i - 1] + x[i]
    return np.sum(y**2)


def newton_sqrt(a):
    x = a
    while abs(x * x - a) > 1e-12:
        x = 0.5 * (x + a / x)
    return x


def with_break(x):
    s = 0.0
    for i in range(x.shape[0]):
        s = s + x[i] ** 2
        if s > 2.0:
            break
    return s


def with_continue(x):
    s = 0.0
    for i in range(x.shape[0]):
        if x[i] < 0:
            continue
        s = s + x[i] * x[i]
    return s


def nested(W, v):
    out = 0.0
    for i in range(W.shape[0]):
        row = 0.0
        for j in range(W.shape[1]):
            row = row + W[i, j] * v[j]
        out = out + np.tanh(row)
    return out


def rows(X, w):
    total = 0.0
    for row in X:
        total += np.dot(row, w) ** 2
    return total


def enum_zip(xs, ys):
    t = 0.0
    for k, x in enumerate(xs):
        t = t + k * x
    for a, b in zip(xs, ys):
        t = t + a * b
    return t


def sq(v):
    return v * v


def helper_user(x, scale=2.0):
    y = sq(x) * scale
    return np.sum(y)


def helper_loop(x):
    total = 0.0
    for i in range(3):
        total = total + np.sum(sq(x * i))
    return total


def local_def(x):
    c = 3.0

    def inner(v, p=2.0):
        return c * v**p

    f = lambda v: np.sin(v) * c
    return np.sum(inner(x) + f(x))


def ifexp(x):
    y = x * 2 if x > 0 else -x
    return y * y


def aug_sub(x):
    y = x.copy()
    y[1:] += x[:-1] * 2
    y *= 3.0
    return np.sum(y**2)


def tuple_unpack(x):
    a, b = x[0], x[1]
    a, b = b, a * b
    return a + b


def branch_in_loop(x):
    acc = np.zeros(2)
    for i in range(x.shape[0]):
        if x[i] > 0:
            acc = acc + x[i] * np.array([1.0, 2.0])
        else:
            acc = acc - np.sin(x[i])
    return np.sum(acc**2)


def write_in_branch_in_loop(x):
    y = np.zeros(x.shape[0])
    for i in range(x.shape[0]):
        if x[i] > 0.25:
            y[i] = x[i] ** 2
        else:
            y[i] = np.exp(x[i])
    return np.sum(y * x)


def reassign_param(x):
    x = x * 2
    x = np.sin(x)
    return np.sum(x)


def returns_tuple(v):
    return v * 2, v * 3


def use_tuple(x):
    p, q = returns_tuple(x)
    return np.sum(p * q)


def loop_in_helper(v):
    s = 0.0
    for i in range(v.shape[0]):
        s = s + v[i] ** 3
    return s


def calls_loop_helper(x):
    return loop_in_helper(x * 2) + loop_in_helper(x)


def elif_chain(x):
    if x > 2.0:
        y = x**3
    elif x > 0.0:
        y = np.sin(x) * x
    else:
        y = -x
    return y * 2.0


def several_returns(x, mode):
    if mode == 0:
        return np.sum(x**2)
    elif mode == 1:
        t = np.exp(x)
        return np.sum(t)
    return np.sum(np.cos(x))


def while_data_dependent(x):
    total = 0.0
    k = 0
    while total < 3.0:
        total = total + np.sum(x**2)
        k += 1
    return total * k


def while_break_continue(x):
    s = 0.0
    i = 0
    while i < x.shape[0]:
        i += 1
        if x[i - 1] < 0:
            continue
        s = s + x[i - 1] ** 2
        if s > 1.5:
            break
    return s


def range_with_step(x, n):
    s = 0.0
    for i in range(n - 1, -1, -2):
        s = s + x[i] * i
    return s


def scalar_aug(x):
    s = 1.0
    for i in range(3):
        s *= x
        s -= 0.1
        s /= 1.5
        s += x
    return s


def fill_by_index(x):
    out = np.empty(x.shape[0] * 2)
    for i in range(x.shape[0]):
        out[2 * i] = x[i]
        out[2 * i + 1] = x[i] ** 2
    return np.sum(out * np.arange(out.shape[0]))


def write_2d(x):
    y = np.zeros((3, 3))
    y[0, 1] = x[0]
    y[1:, :2] = x[1] * 2.0
    y[2, 2] += x[2]
    return np.sum(np.sin(y))


def fancy_write(x, idx):
    y = np.ones(4)
    y[idx] = x * 3.0
    return np.sum(y**2)


def overwrite_reads(x):
    y = x.copy()
    t = np.sum(y**2)
    y[0] = 5.0
    return t + np.sum(y**3)


def ones_write(x):
    y = np.ones_like(x)
    for i in range(1, x.shape[0]):
        y[i] = y[i - 1] * x[i]
    return np.sum(y)


def variable_reuse(x):
    t = np.sum(x)
    t = x * t
    t = np.max(t)
    return t


def nested_helpers(x):
    return np.sum(outer_helper(x, power=3))


def outer_helper(v, power=2):
    w = sq(v) * v ** (power - 2)
    return w + helper_user(v)


def recursive(x):
    if x < 1.0:
        return x
    return recursive(x / 2.0)


def return_in_loop(x):
    for i in range(3):
        if x > i:
            if x > 2 * i:  # (a return last in an `if` directly in the loop is supported)
                return x * i
    return x


def nested_break(x):
    for i in range(3):
        if x > 0:
            if x > 1:
                break
            x = x * 2
    return x


def for_else(x):
    for i in range(3):
        x = x * 2
    else:
        x = x + 1
    return x


A = np.array([0.5, -0.9, 1.2, 0.3])
B = np.array([1.0, 2.0, 3.0, -0.5])
W = np.arange(6.0).reshape(2, 3) / 5

CASES = [
    (f, (1.5,), 0),
    (accum, (A,), 0),
    (euler, (0.7, 1.3, 50), 0),
    (euler, (0.7, 1.3, 50), 1),
    (branchy, (A,), 0),
    (branchy, (-A - 2,), 0),
    (early, (2.0,), 0),
    (early, (0.5,), 0),
    (recur, (A, 0.9), (0, 1)),
    (newton_sqrt, (2.0,), 0),
    (with_break, (np.array([0.5, 0.9, 1.2, 0.3]),), 0),
    (with_break, (np.array([0.1, 0.2, 0.1, 0.3]),), 0),
    (with_continue, (A,), 0),
    (nested, (W, B[:3]), (0, 1)),
    (rows, (W.T, B[:2]), (0, 1)),
    (enum_zip, (A[:3], B[:3]), (0, 1)),
    (helper_user, (A,), 0),
    (helper_user, (A, 0.5), (0, 1)),
    (helper_loop, (A,), 0),
    (local_def, (A,), 0),
    (ifexp, (1.5,), 0),
    (ifexp, (-1.5,), 0),
    (aug_sub, (A,), 0),
    (tuple_unpack, (A,), 0),
    (branch_in_loop, (A,), 0),
    (write_in_branch_in_loop, (A,), 0),
    (reassign_param, (A,), 0),
    (use_tuple, (A,), 0),
    (calls_loop_helper, (A,), 0),
    (elif_chain, (3.0,), 0),
    (elif_chain, (1.0,), 0),
    (elif_chain, (-1.0,), 0),
    (several_returns, (A, 0), 0),
    (several_returns, (A, 1), 0),
    (several_returns, (A, 2), 0),
    (while_data_dependent, (A,), 0),
    (while_break_continue, (A,), 0),
    (while_break_continue, (np.abs(A) * 3,), 0),
    (range_with_step, (A, 4), 0),
    (scalar_aug, (1.3,), 0),
    (fill_by_index, (A,), 0),
    (write_2d, (A[:3],), 0),
    (fancy_write, (A[:2], np.array([0, 2])), 0),
    (fancy_write, (A[:2], np.array([True, False, True, False])), 0),
    (overwrite_reads, (A,), 0),
    (ones_write, (A,), 0),
    (variable_reuse, (A,), 0),
    (nested_helpers, (np.abs(A) + 0.1,), 0),
]


@pytest.mark.parametrize(
    "f, args, wrt", CASES, ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(CASES)]
)
def test_gradient_matches_finite_differences(f, args, wrt):
    check_grad(f, args, wrt=wrt)


def vector_out_loop(x):
    y = np.zeros_like(x)
    for i in range(x.shape[0]):
        if x[i] > 0:
            y[i] = x[i] ** 2
        else:
            y[i] = np.sin(x[i])
    return y


def test_vjp_through_loop_with_branch_and_write():
    check_vjp(vector_out_loop, (A,))


def test_inputs_restored_after_in_place_writes_on_parameters():
    def mutates(x):
        x[0] = x[0] * 3.0
        return np.sum(x**2)

    x = A.copy()
    g = s2sad.grad(mutates)(x)
    np.testing.assert_array_equal(x, A)  # the adjoint sweep writes the old values back
    np.testing.assert_allclose(g, 2 * A * np.array([9.0, 1, 1, 1]))


@pytest.mark.parametrize(
    "f, message",
    [
        (recursive, "recursive"),
        (return_in_loop, "`return` inside a loop only as the last statement of an `if`"),
        (nested_break, "`break` only as `if <condition>: break`"),
        (for_else, "`for ... else`"),
    ],
)
def test_unsupported_control_flow_is_refused_with_the_line(f, message):
    with pytest.raises(s2sad.UnsupportedSyntaxError, match=message.replace("(", r"\(")) as info:
        s2sad.grad(f)(2.0)
    assert "test_control_flow.py:" in str(info.value)


# ----------------------------------------------------------------------------- the tape


def _tapes(source: str) -> set[str]:
    return {
        line.split("=")[0].strip()
        for line in source.splitlines()
        if line.strip().endswith("_tape = []")
    }


def test_accumulating_loop_tapes_only_what_the_rule_reads():
    """s = s + sin(x[i]) needs x[i] for cos; nothing else of the loop is recorded."""
    src = s2sad.source(s2sad.grad(accum), A)
    assert "for i in reversed(range(x.shape[0])):" in src
    assert "dx[i] += " in src
    assert _tapes(src) == {"s_item_tape"}


def test_scalar_ode_records_only_the_state():
    """Euler steps of y' = -k y + sin(y): the adjoint reads y (for cos y) and nothing else."""
    src = s2sad.source(s2sad.grad(euler), 0.5, 1.0, 10)
    assert _tapes(src) == {"y_tape"}
    assert "unbroadcast" not in src


def _filled_from_arithmetic(k, x0):
    y = x0 * 2.0
    for i in range(x0.shape[0]):
        y[i] = k[i] * 3.0
    return np.sum(y * k)


def test_an_array_made_by_arithmetic_keeps_no_tape_of_its_overwritten_elements():
    """`y = x0 * 2.0` is the function's own array, as `y = x0.copy()` is: nothing reads its old
    elements, so none are taped and written back (they were)."""
    k, x0 = np.array([0.5, 1.3, 2.7]), np.array([1.0, 2.0, 3.0])
    src = s2sad.source(s2sad.grad(_filled_from_arithmetic), k, x0)
    assert _tapes(src) == set() and "y[i] = " in src
    check_grad(_filled_from_arithmetic, (k, x0))


def _carried_not_read_back(x, w, m, k):
    y = np.zeros(x.shape[0])
    c = 5
    for i in range(m):
        c = k - 1  # carried, read after the loop, never by the loop's adjoint
        y[i] = x[i] * w
    return np.sum(y) * c


def _counter_read_by_a_zeroing(x, k):
    i = 0
    while i < 2:
        x[i] = 1.0
        i += 1
    return np.sum(x * x) * k


def test_a_carried_value_no_adjoint_reads_has_no_tape():
    """`c_tape.append(c)` in the loop and `c = c_tape.pop()` in its adjoint, read by nothing, are
    gone (break-it r7); a while loop's counter, which its kept zeroing `dx[i] = 0.0` reads as it
    was in that iteration, keeps its tape (test_trust_overwrite's in_while)."""
    args = (np.array([0.5, 1.0, 2.0]), 0.7, 3, 3)
    g = s2sad.grad(_carried_not_read_back, wrt=1)
    assert g(*args) == 3.5 * 2 and _tapes(s2sad.source(g)) == set()
    check_grad(_carried_not_read_back, args, wrt=1)
    x = np.array([0.5, 1.0, 2.0, 3.0])
    assert _tapes(s2sad.source(s2sad.grad(_counter_read_by_a_zeroing), x, 1.5)) == {"i_tape"}
    check_grad(_counter_read_by_a_zeroing, (x, 1.5))


def test_generic_code_keeps_unbroadcast_where_ranks_are_unknown():
    src = s2sad.source(s2sad.grad(accum))  # no arguments: valid for any input
    assert "unbroadcast(" in src
    assert "s_item_tape" in _tapes(src)


def test_specializations_per_rank_give_the_same_gradients():
    def scale_sum(a, x):
        return np.sum(a * x + a)

    g = s2sad.grad(scale_sum, wrt=0)
    x = np.array([1.0, 2.0, 3.0])
    assert g(2.0, x) == pytest.approx(9.0)
    np.testing.assert_allclose(g(np.array([2.0, 2.0, 2.0]), x), x + 1)
    assert g(np.float32(2.0), x) == pytest.approx(9.0)
    assert "np.sum(" in s2sad.source(g, 2.0, x)


def test_loop_without_needed_values_has_no_tape():
    def linear(x, n):
        s = 0.0
        for i in range(n):
            s = s + 2.0 * x
        return s

    src = s2sad.source(s2sad.grad(linear), 1.5, 10)
    assert _tapes(src) == set()
    assert s2sad.grad(linear)(1.5, 10) == pytest.approx(20.0)


def test_long_scalar_loop_matches_finite_differences():
    y0, k, n = 0.3, 0.7, 100_000
    g = s2sad.grad(euler, wrt=(0, 1))(y0, k, n)
    eps = 1e-6
    fd0 = (euler(y0 + eps, k, n) - euler(y0 - eps, k, n)) / (2 * eps)
    fd1 = (euler(y0, k + eps, n) - euler(y0, k - eps, n)) / (2 * eps)
    assert g[0] == pytest.approx(fd0, rel=1e-5) and g[1] == pytest.approx(fd1, rel=1e-5)


def writes_through_alias(x):
    y = np.zeros(3)
    z = y[1:]
    z[0] = x[0]
    return np.sum(y * x)


def writes_through_name_copy(x):
    y = x.copy()
    z = y
    z[0] = 0.0
    return np.sum(y)


@pytest.mark.parametrize("f", [writes_through_alias, writes_through_name_copy])
def test_writes_through_aliases_are_refused(f):
    with pytest.raises(s2sad.UnsupportedSyntaxError, match="may share memory") as info:
        s2sad.grad(f)(A[:3].copy())
    assert "z[0] = " in str(info.value) and ".copy()" in str(info.value)


def test_pullback_of_a_loop_can_be_called_again():
    _, pullback = s2sad.vjp(vector_out_loop)(A)
    first = pullback(np.ones(4))
    second = pullback(np.ones(4))
    np.testing.assert_array_equal(first, second)
    np.testing.assert_allclose(pullback(np.array([0.0, 1.0, 0.0, 0.0]))[1], np.cos(A[1]))


def row_writes(x, w):
    """Two writes to the same row of a state array, the second reading the first."""
    state = np.zeros((2, x.shape[0]))
    for j in range(2):
        state[j] = state[j] * 0.5 + np.tanh(x * w[j])
        state[j] = np.sin(state[j]) * w[j]
    return np.sum(state**2)


def test_second_write_to_a_row_keeps_its_cotangent():
    check_grad(row_writes, (A, np.array([0.7, -1.3])), wrt=(0, 1))


def appends_to_a_list(x):
    h = []
    h.append(x[0])
    h.append(x[1])
    return np.sum(h[0] * h[1])


def appends_in_a_loop_of_unknown_count(x, n):
    h = []
    for i in range(n):
        h.append(x[i])
    return np.sum(h[0] * h[1])


def test_lists_of_differentiated_values():
    """Followed while their contents are known (tests/test_lists.py); else refused."""
    check_grad(appends_to_a_list, (np.arange(1.0, 7.0).reshape(2, 3),))
    with pytest.raises(s2sad.UnsupportedSyntaxError, match="mutable container") as info:
        s2sad.grad(appends_in_a_loop_of_unknown_count)(np.arange(1.0, 7.0).reshape(2, 3), 2)
    assert "h.append(x[i])" in str(info.value) and "y[i] = v" in str(info.value)


def resizes(x):
    y = np.zeros(6)
    y[:3] = x
    y.resize(3, refcheck=False)
    return np.sum(y**2)


def sorts(x):
    y = x * 2.0
    y.sort()
    return np.sum(y * np.arange(3.0))


@pytest.mark.parametrize(
    "f, line, instead",
    [
        (resizes, "y.resize(3, refcheck=False)", "`y = np.pad(y, (0, k))`"),
        (sorts, "y.sort()", "`y = np.sort(y)`"),
    ],
)
def test_an_arrays_method_changing_it_in_place_is_refused_with_a_new_array_as_the_way(
    f, line, instead
):
    """An ndarray method changing the array (`y.resize(...)`) is told as such, with the
    assignment that does the same s2sad follows; not as a list, whose hint is a loop's."""
    with pytest.raises(s2sad.UnsupportedSyntaxError, match="changes `y` in place") as info:
        s2sad.grad(f)(np.array([0.3, 0.7, 1.1]))
    assert instead in str(info.value) and "list" not in str(info.value)
    assert "test_control_flow.py:" in str(info.value) and f"\n    {line}\n" in str(info.value)


def copies_into(x):
    y = np.zeros(3)
    np.copyto(y, x)
    return np.sum(y**2)


def writes_through_out(x):
    y = np.zeros(3)
    np.multiply(x, 2.0, out=y)
    return np.sum(y**2)


def puts(x):
    y = np.zeros(3)
    np.put(y, [0, 1, 2], x)
    return np.sum(y**2)


def fill_from(y, x):
    y[:] = x


def helper_writes_its_parameter(x):
    y = np.zeros(3)
    fill_from(y, x)
    return np.sum(y**2)


def overwrites_a_differentiated_array(x):
    y = x * 2.0
    np.copyto(y, np.ones(3))
    return np.sum(y**2)


HIDDEN_WRITES = [
    (copies_into, "np.copyto"),
    (writes_through_out, "np.multiply"),
    (puts, "np.put"),
    (helper_writes_its_parameter, "fill_from"),
    (overwrites_a_differentiated_array, "np.copyto"),
]


@pytest.mark.parametrize("f, call", HIDDEN_WRITES, ids=[f.__name__ for f, _ in HIDDEN_WRITES])
def test_calls_that_write_into_arrays_are_refused_not_missed(f, call):
    """These gave a zero gradient: a call whose result is discarded wrote a differentiated
    value where the derivative did not look. Now refused, naming the call and the way out."""
    x = np.array([0.2, -0.7, 1.1])
    with pytest.raises(s2sad.UnsupportedSyntaxError, match=f"cannot see what `{call}") as info:
        s2sad.grad(f)(x)
    assert "y[i] = v" in str(info.value)
    with pytest.raises(s2sad.UnsupportedSyntaxError, match=f"cannot see what `{call}"):
        s2sad.jvp(f)(x, tangent=np.ones(3))


def prints_a_differentiated_value(x):
    y = np.sin(x)
    print("y is", y)
    return np.sum(y)


def test_printing_a_differentiated_value_is_fine(capsys):
    x = np.array([0.2, -0.7])
    np.testing.assert_allclose(s2sad.grad(prints_a_differentiated_value)(x), np.cos(x))
    assert "y is" in capsys.readouterr().out


def slices_a_row_in_a_loop(M, x):
    total = 0.0
    for i in range(M.shape[0]):
        w = M[i]
        total = total + np.sum(w[:2] * x)
    return total


def test_row_taken_into_a_local_in_a_loop():
    check_grad(
        slices_a_row_in_a_loop,
        (np.arange(12.0).reshape(3, 4) / 7, np.array([1.0, 2.0])),
        wrt=(0, 1),
    )


def recurrence_sized_by_shape(x, a):
    n = x.shape[0]
    y = np.zeros(n)
    y[0] = x[0]
    for i in range(1, n):
        y[i] = a * y[i - 1] + x[i]
    return np.mean(y**2)


def test_sizes_read_from_shape_keep_the_loop_scalar():
    """`n = x.shape[0]` is an int, so `np.zeros(n)` is a vector and `y[i - 1]` a scalar: the
    specialized adjoint has no unbroadcast, no snapshot and one tape (it was 15x slower)."""
    x = np.linspace(-1.0, 1.0, 7)
    text = s2sad.source(s2sad.grad(recurrence_sized_by_shape, wrt=(0, 1)), x, 0.9)
    assert "unbroadcast(" not in text and "snapshot(" not in text and "np.sum(" not in text
    assert text.count("_tape = []") == 1
    check_grad(recurrence_sized_by_shape, [x, 0.9], wrt=(0, 1))


def sizes_from_len(x):
    n = len(x) + 1  # len reads no value: it stays one expression
    m = x.shape[0] + len(x)
    return np.sum(x**2) / n * m


def comprehension_of_indices(x, n):
    idx = [i for i in range(n)]  # no derivative flows through it
    weights = np.array([float(j) for j in range(3)])
    return np.sum(x[idx] ** 2 * weights[:n])


def test_len_in_arithmetic_and_comprehensions_of_constants():
    """`len(x) + 1` gave an internal error, and a comprehension of plain values a
    NameResolutionError on its own variable."""
    x = np.array([0.3, -1.2, 2.0])
    np.testing.assert_allclose(s2sad.grad(sizes_from_len)(x), 2 * x / 4 * 6, rtol=1e-14)
    check_vjp(sizes_from_len, (x,))
    check_jvp(sizes_from_len, (x,))
    np.testing.assert_allclose(
        s2sad.grad(comprehension_of_indices)(x, 3), 2 * x * np.arange(3.0), rtol=1e-14
    )


def counter_read_after_its_loop(x):
    for i in range(3):
        x = x * 1.1
    return np.sum(x * i)


@pytest.mark.parametrize("jit", [False, "strict"])
def test_a_loop_counter_read_after_the_loop_in_a_pullback(jit):
    """The pullback closure's reversed loop rebinds `i`, so Python took `i` as its local and the
    read of `i` before that loop raised UnboundLocalError (vjp and reverse Jacobians)."""
    x = np.array([0.3, -0.7, 1.2])
    expected = np.full(3, 2 * 1.1**3)
    np.testing.assert_allclose(s2sad.grad(counter_read_after_its_loop, jit=jit)(x), expected)
    pullback = s2sad.vjp(counter_read_after_its_loop, jit=jit)(x)[1]
    np.testing.assert_allclose(pullback(1.0), expected)
    check_vjp(counter_read_after_its_loop, (x,))


def swap_elements(x):
    y = x * 1.0
    t = y[0]
    y[0] = y[2]
    y[2] = t
    return np.sum(y * np.arange(3.0))


def test_an_element_read_before_its_array_is_written_is_no_view():
    """`t = y[0]` then writes into `y`: `t` is a number, not a view (it was refused as one)."""
    x = np.array([0.3, -0.7, 1.2])
    np.testing.assert_array_equal(s2sad.grad(swap_elements)(x), [2.0, 1.0, 0.0])
    check_grad(swap_elements, (x,))
    check_jvp(swap_elements, (x,))


def nested_def_in_a_loop(x):
    s = 0.0
    for i in range(3):

        def scaled(v, i=i):
            return v * i

        s = s + np.sum(scaled(x))
    return s


def test_a_nested_defs_return_inside_a_loop_is_its_own():
    """The `return` of a `def` inside a loop leaves that def, not the function: it was refused
    as "a `return` inside a loop"."""
    x = np.array([0.3, -0.7, 1.2])
    np.testing.assert_allclose(s2sad.grad(nested_def_in_a_loop)(x), np.full(3, 3.0))
    check_grad(nested_def_in_a_loop, (x,))


# --------------------------------------------- names an `if` in a loop assigns, read after it


def leaky_square(x):
    s = 0.0
    for i in range(x.shape[0]):
        if x[i] > 0:
            y = x[i]
        else:
            y = 0.1 * x[i]
        s = s + y * y
    return s


def assigned_on_one_path(x):
    s = 0.0
    for i in range(x.shape[0]):
        if i == 0 or x[i] > 0.5:
            y = x[i] * 2.0
        s = s + y * y
    return s


def nested_branches(x):
    s = 0.0
    for i in range(x.shape[0]):
        if x[i] > -5:
            if x[i] > 0:
                y = x[i]
            else:
                y = 0.1 * x[i]
        else:
            y = 3.0 * x[i]
        s = s + y * y
    return s


def branch_in_while(x):
    s = 0.0
    i = 0
    while i < x.shape[0]:
        if x[i] > 0:
            y = np.sin(x[i])
        else:
            y = x[i] ** 3
        s = s + y * y
        i = i + 1
    return s


def rows_in_branches(A, v):
    s = 0.0
    for k in range(A.shape[0]):
        if k % 2 == 0:
            z = A[k] * v
        else:
            z = np.cos(A[k]) * v
        s = s + np.sum(np.sin(z)) * (k + 1)
    return s


def sum_until_over(x):
    s = 0.0
    i = 0
    while True:
        s = s + x[i] ** 2
        i += 1
        if s > 2.0 or i >= x.shape[0]:
            break
    return s


def break_before_the_carry(x):
    s = np.zeros(2)
    for i in range(3):
        if x[i] > 0.19:
            continue
        if x[i] < 0.0:
            s = s + x[i]
        if np.sum(s) > -5.0:
            break
        s = 0.3 * s
    return np.sum(s * s)


X_SIGNS = np.array([1.0, -2.0, 3.0, 0.3, -0.7, 0.9])


def returns_from_while_true(x):  # left only by its returns: nothing after the loop runs
    s = 0.0
    i = 0
    while True:
        s = s + x[i] ** 2
        i += 1
        if s > 2.0:
            return s * 2.0
        if i >= x.shape[0]:
            return s


def returns_from_while_true_past_an_inner_break(x):  # the inner loop's break is its own
    s = 0.0
    i = 0
    while True:
        for j in range(2):
            s = s + x[i] * np.sin(x[j])
            if s > 1.5:
                break
        i += 1
        if i >= x.shape[0]:
            return s * s


@pytest.mark.parametrize(
    "f, x",
    [
        (returns_from_while_true, np.array([0.79, 0.8, 1.07, 0.6])),  # the first return
        (returns_from_while_true, np.array([0.79, 0.8])),  # the second
        (returns_from_while_true_past_an_inner_break, np.array([0.79, 0.8, 1.07, 0.6])),
        (returns_from_while_true_past_an_inner_break, np.array([0.3, -0.2, 0.5])),
    ],
)
def test_a_while_true_left_only_by_return(f, x):
    """Refused before as "does not return a value on every path"."""
    check_grad(f, (x,))
    check_vjp(f, (x,))
    check_jvp(f, (x,))
    np.testing.assert_allclose(s2sad.grad(f, jit="strict")(x), s2sad.grad(f)(x), rtol=1e-12)


@pytest.mark.parametrize(
    "f", [returns_from_while_true, returns_from_while_true_past_an_inner_break, sum_until_over]
)
def test_the_jitted_vjp_value_of_a_while_true(f):
    """The value a jitted vjp returns comes from its own primal function, which tests
    `forever()` too (Numba 0.68 miscompiled its `while True:`: a wrong value, the pullback
    right)."""
    x = np.array([0.79, 0.8, 1.07, 0.6, 0.9])
    for jit in (True, "strict"):
        value, pullback = s2sad.vjp(f, jit=jit)(x)
        np.testing.assert_allclose(value, f(x), rtol=1e-14)
        np.testing.assert_allclose(pullback(1.0), s2sad.grad(f)(x), rtol=1e-12)


@pytest.mark.parametrize(
    "f, args",
    [
        (leaky_square, (X_SIGNS,)),
        (assigned_on_one_path, (X_SIGNS,)),
        (nested_branches, (X_SIGNS,)),
        (branch_in_while, (X_SIGNS,)),
        (rows_in_branches, (np.arange(12.0).reshape(4, 3) / 5 - 1, np.array([0.3, -1.0, 2.0]))),
        (sum_until_over, (np.array([0.79, 0.8, 1.07, 0.6, 0.9, 0.95]),)),
        # the break taken in the first iteration that runs, before the carried value's next
        # one is made (an UnboundLocalError in the generated code, before)
        (break_before_the_carry, (np.array([-0.57, 1.14, -0.77]),)),
        (break_before_the_carry, (np.array([0.5, -0.2, -0.77]),)),
    ],
)
def test_a_name_an_if_assigns_in_a_loop_and_read_after_it(f, args):
    """Both branches assign `y` (under one name: no merge), or one does: the value the
    statements after the `if` read comes back for every reversed iteration, not the next
    iteration's (a wrong gradient in every mode before)."""
    check_grad(f, args)
    check_vjp(f, args)
    python = s2sad.grad(f)(*args)
    np.testing.assert_allclose(s2sad.grad(f, jit=True)(*args), python, rtol=1e-12)
