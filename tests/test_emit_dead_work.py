"""Emitted gradients do no work that nothing reads: each test reads the generated source for the
statement that was dead or doubled (and is gone) and checks the gradient against finite
differences."""

import numpy as np
import pytest

import s2sad
from conftest import check_grad


def made_by_where(x):
    y = np.where(x > 0, x, 0.5 * x)
    y[0] = x[1] * 3.0
    return np.sum(y * y)


def made_by_cumsum(x):
    y = np.cumsum(x)
    y[1:] = 2.0 * x[:-1]
    return np.sum(np.sin(y))


def made_by_where_read_after(x):  # the adjoint of the first sum reads y's old elements
    y = np.where(x > 0, x, 0.1 * x)
    s = np.sum(y * y)
    y[0] = 3.0 * x[2]
    return s + np.sum(y)


X = np.array([0.3, -0.7, 1.2, 0.5])


@pytest.mark.parametrize("f", [made_by_where, made_by_cumsum])
def test_an_array_a_call_makes_gets_no_write_back_nothing_reads(f):
    """np.where's and np.cumsum's results are arrays of their own, as np.zeros's are: a store
    into one changes no caller's array, and no adjoint code reads its old elements, so they are
    neither saved (`y_old = y[0].copy()`) nor written back (`y[0] = y_old`)."""
    src = s2sad.source(s2sad.grad(f), X)
    assert "_old" not in src
    check_grad(f, (X,))


def test_a_write_back_the_adjoint_reads_stays():
    src = s2sad.source(s2sad.grad(made_by_where_read_after), X)
    assert "y_old = y[0].copy()" in src and "y[0] = y_old" in src
    check_grad(made_by_where_read_after, (X,))


def first_row_then_rest(x):
    y = np.zeros((3, x.shape[0]))
    y[0] = x * 2.0
    y[1:] = np.sin(x)
    return np.sum(y * y)


def shifted_products(x, n):  # dy[1:] is read in the next reversed step: zeroed, so copied
    y = np.where(x > 0, x, 0.1 * x)
    for i in range(n):
        y[1:] = y[1:] * y[:-1]
    return np.sum(y)


def test_a_store_whose_zeroing_goes_reads_its_cotangent_without_a_copy():
    """`dy[0]` was copied (`unbroadcast(dy[0].copy(), y_mul)`) to keep it from the zeroing
    `dy[0] = 0.0` after it; where nothing reads dy after the store, that zeroing goes, and the
    copy with it. A zeroing that stays keeps its copy."""
    src = s2sad.source(s2sad.grad(first_row_then_rest), X)
    assert "unbroadcast(dy[0], y_mul)" in src and "dy[0] = 0.0" not in src
    check_grad(first_row_then_rest, (X,))
    src = s2sad.source(s2sad.grad(shifted_products, wrt="x"), X, 3)
    assert "unbroadcast(dy[1:].copy(), y_mul2)" in src and "dy[1:] = 0.0" in src
    check_grad(shifted_products, (X, 3))


def heat(u0, r, tol, steps):  # the explicit heat equation, stopped once it settles
    u = u0.copy()
    step = 0
    while step < steps:
        u_old = u.copy()
        u[1:-1] += r * (u[2:] - 2 * u[1:-1] + u[:-2])
        step += 1
        if np.max(np.abs(u - u_old)) < tol:
            break
    return np.sum(u**3)


U0 = np.exp(-((np.linspace(0.0, 1.0, 9) - 0.4) ** 2) / 0.02)


@pytest.mark.parametrize("tol, steps", [(0.0195, 60), (0.0, 6)], ids=["breaks", "runs-out"])
def test_a_heat_step_copies_each_slice_once_and_pushes_once(tol, steps):
    """`u[1:-1] += r * (u[2:] - 2 * u[1:-1] + u[:-2])` reads u[1:-1] twice: one snapshot serves
    both (it took two). The step's values are pushed once, before `if ...: break`, which the
    break and the end of the step both pass (each pushed them, in two copies of the code)."""
    src = s2sad.source(s2sad.grad(heat, wrt=("u0", "r")), U0, 0.2, tol, steps)
    assert src.count("snapshot(u[1:-1])") == 1
    assert src.count("snapshot(u[") == 3
    appends = [line.strip() for line in src.splitlines() if "_tape.append(" in line]
    assert appends and len(appends) == len(set(appends))
    assert src.index("_tape.append(") < src.index("if cond")
    check_grad(heat, (U0, 0.2, tol, steps), wrt=(0, 1))


def drift(x, v, dt, n):
    for _ in range(n):
        x += dt * v
        v = v * 0.999
    return np.sum(x * x)


def test_an_in_place_update_keeps_no_tape_of_the_array_it_updates():
    """`x += dt * v` is `x_add = x + dt * v` stored by `in_place(x_add, x)`: x has x_add's
    shape, so its cotangent is dx_add itself, and the adjoint reads x for nothing. Python mode
    kept every step's x on a tape for `unbroadcast(dx_add, x)` (10^5 steps of a 16-vector: a
    peak of 49.6 MB, now 24.8 MB, the rest being v's tape)."""
    x, v = np.linspace(0.0, 1.0, 5), np.linspace(1.0, 2.0, 5)
    src = s2sad.source(s2sad.grad(drift, wrt=("x", "v")), x, v, 0.1, 4)
    assert "x_tape" not in src and "unbroadcast(dx_add, x)" not in src
    assert "dx = dx_new" not in src  # (nor the copy back of `dx_new = dx`)
    check_grad(drift, (x, v, 0.1, 4), wrt=(0, 1))


def number_becoming_an_array(x, s):
    v = x * 1.0
    for k in range(3):
        s += 0.1 * v  # (a number s: Python rebinds it to the array s + 0.1 * v)
    return np.sum(s * s)


def test_a_number_an_update_makes_an_array_keeps_its_tape():
    """`s += dt * v` of a number s is no in-place update: s becomes an array, so its cotangent
    is unbroadcast to the number, which the adjoint reads (a ValueError, reshaping to ())."""
    check_grad(number_becoming_an_array, (np.array([0.3, -0.7, 1.2, 0.5]), 0.5), wrt=(0, 1))


def loss_and_metric(w, A):
    loss = np.sum((A @ w) ** 2)
    metric = np.linalg.slogdet(A.T @ A + np.eye(A.shape[1]))[1]
    return loss, metric


def loss_only(w, A):
    return loss_and_metric(w, A)[0]


def dead_statements(w, A):
    inverse = np.linalg.inv(A[:, :2])  # (A is 3x3: LinAlgError were it run)
    u = np.sin(w)
    return np.sum((A @ w) ** 2)


def test_a_value_nothing_reads_is_not_computed():
    """A helper's tuple element the caller drops (`loss_and_metric(w, A)[0]`), and a statement
    whose value nothing reads, are not in the gradient's code, nor their errors: the gradient
    of a function whose dead statement would raise is the gradient of the rest. The value
    returned stays for value_and_grad."""
    A, w = np.arange(9.0).reshape(3, 3) / 7.0, np.array([0.3, -0.2, 0.5])
    code = lambda f: "".join(  # noqa: E731  (the statements, not the `# line N:` comments)
        line for line in s2sad.source(s2sad.grad(f), w, A).splitlines() if "#" not in line
    )
    assert "slogdet" not in code(loss_only) and "np.sum" in code(loss_only)
    check_grad(loss_only, (w, A))
    assert "inv" not in code(dead_statements) and "np.sin" not in code(dead_statements)
    with pytest.raises(np.linalg.LinAlgError):
        dead_statements(w, A)
    np.testing.assert_allclose(s2sad.grad(dead_statements)(w, A), 2 * A.T @ (A @ w), rtol=1e-12)
    value, _ = s2sad.value_and_grad(loss_only)(w, A)
    assert value == loss_and_metric(w, A)[0]
