"""Minimized reproducers of the s2sad bugs found by the program fuzzer (tests/test_fuzz.py).

Each function below is the smallest program (minimized by hand from a failing fuzz seed) that
still went wrong, checked against finite differences with conftest's check_grad/check_vjp. The
comment above each group says what s2sad did, at which commit (bugs 1-10 were found at 3fdbb0a
and the working trees that followed it), and what it should do. Groups that have been fixed
since stay as guards; the others fail until s2sad is fixed. None is skipped or xfailed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import s2sad
from conftest import check_grad, check_jvp, check_vjp

V3 = np.array([0.2, -0.3, 0.4])
M22 = np.array([[0.2, -0.3], [0.5, 0.1]])


# ----------------------------------------------------------------------------- bug 1
# vjp of a function that rebinds a name inside a loop. At commit 3fdbb0a the pullback is a
# nested function whose loop adjoint restores `x = x_tape.pop()`, which makes `x` local to it,
# so an earlier read raises UnboundLocalError: cannot access local variable 'x' (fuzz seeds 4,
# 17, 33, ...: 96 of 1000 programs). In the working tree that followed, the pullback reruns the
# recording sweep as `vjp_f_sweep(x, seed)` with the *rebound* `x` (the loop's final value)
# instead of the argument, so the cotangent is silently wrong: for
# rebound_param_sin([0.3, -0.5, 0.2]) and seed ones it gives [0.9187, 0.8082, 0.9618] instead
# of cos(sin(x)) cos(x) = [0.9139, 0.7786, 0.9608] (fuzz seeds 76, 109, 121, 136, 160, ...).
# s2sad.grad of the same functions is right.


def rebound_param_sin(x):
    for i in range(2):
        x = np.sin(x)
    return x


def used_then_rebound(a):
    v = a**2
    for i in range(2):
        a = a * 0.5
    return v


def vjp_rebound_param_in_loop(x):
    for i in range(2):
        x = x * 2.0
    return np.sum(x)


def vjp_for_carry_read_after(x):
    s = 0.0
    for i in range(2):
        s = s * 0.5 + np.sum(x)
    return s * x


def vjp_while_carry_read_after(x):
    t = 0.0
    while t < 1.0:
        t = t + np.sum(x**2) + 0.3
    return t * x


@pytest.mark.parametrize(
    "f",
    [
        rebound_param_sin,
        used_then_rebound,
        vjp_rebound_param_in_loop,
        vjp_for_carry_read_after,
        vjp_while_carry_read_after,
    ],
)
def test_vjp_with_names_rebound_in_loops(f):
    check_vjp(f, (V3,))


def test_vjp_rebound_param_exact():
    _, pullback = s2sad.vjp(rebound_param_sin)(V3)
    np.testing.assert_allclose(pullback(np.ones(3)), np.cos(np.sin(V3)) * np.cos(V3))


# ----------------------------------------------------------------------------- bug 2
# An `if` (or the `else: if` an `elif` becomes) whose branches have no adjoint statements is
# emitted as `if not cond:` followed only by a comment, which is not Python: black raises
# InvalidInput ("cannot parse ... return dx") instead of s2sad giving a gradient. Happens for
# elif chains assigning constants and for inactive loops inside a branch. Fuzz seeds 0, 30, 38, ...


def elif_constants(x):
    if x > 0.0:
        y = 1.0
    elif x > -1.0:
        y = 2.0
    else:
        y = 3.0
    return y * x


def inactive_loop_in_branch(w, a):
    t = a
    if a > 0.0:
        for i in range(2):
            t = t + 1.5
    return t


@pytest.mark.parametrize("x", [0.5, -0.5, -2.0])
def test_elif_with_constant_branches(x):
    assert check_grad(elif_constants, (x,)) == pytest.approx(
        1.0 if x > 0 else 2.0 if x > -1 else 3.0
    )
    check_vjp(elif_constants, (x,))


def test_inactive_loop_inside_branch():
    assert check_grad(inactive_loop_in_branch, (0.7, 0.5), wrt=0) == 0.0
    check_vjp(inactive_loop_in_branch, (0.7, 0.5), wrt=0)


# ----------------------------------------------------------------------------- bug 3
# `for i, row in enumerate(v)` / `for a, b in zip(p, q)` where `v` is a name s2sad renames (a
# parameter rebound earlier, `x` -> `x_1`, or an inlined helper's parameter, replaced by the
# caller's argument) is refused with NameResolutionError "name 'x_1' is not defined" (or the
# caller's name, or a temporary like 'n5_mul'), although the program is valid. Plain
# `for row in v` and enumerate over an un-renamed name work. Fuzz seeds 16, 20, 39, 70, 106, ...


def enumerate_rebound(x):
    x = x * 2.0
    s = 0.0
    for i, row in enumerate(x):
        s = s + np.sum(row) * (i + 1)
    return s


def _enumerate_helper(p):
    s = 0.0
    for i, row in enumerate(p):
        s = s + np.sum(row) * (i + 1)
    return s


def enumerate_in_helper(x):
    return _enumerate_helper(x)


def _zip_helper(p, q):
    s = 0.0
    for a, b in zip(p, q):
        s = s + np.sum(a * b)
    return s


def zip_in_helper(x):
    return _zip_helper(x, x * 2.0)


@pytest.mark.parametrize("f", [enumerate_rebound, enumerate_in_helper, zip_in_helper])
def test_enumerate_zip_over_renamed_names(f):
    check_grad(f, (M22,))


# ----------------------------------------------------------------------------- bug 4
# `for row in x:` when the loop body rebinds `x`: Python iterates over the array `x` held when
# the loop started, but s2sad's loop reads `row = x[row_index]` from the *current* `x`, so even
# the primal value is wrong: iterate_rebound(M22) is 1.5 in Python and 1.3 through s2sad.vjp,
# and the gradient is [[5, 5], [3, 3]] instead of [[3, 3], [3, 3]]. Fuzz seed 80.


def iterate_rebound(x):
    for row in x:
        x = x + row
    return np.sum(x)


def test_for_over_array_rebound_in_body():
    g = check_grad(iterate_rebound, (M22,))
    np.testing.assert_allclose(g, np.full((2, 2), 3.0))
    check_vjp(iterate_rebound, (M22,))


# ----------------------------------------------------------------------------- bug 5
# A loop-carried array that is read before the loop but whose value after the loop is unused:
# the adjoint of the loop still runs with the carry's cotangent initialised as the scalar 0.0
# and fails inside unbroadcast with "ValueError: cannot reshape array of size 1 into shape
# (3,)". Fuzz seeds 33, 69, 115, 290, 319.


def dead_carry(x):
    v = np.sin(x)
    s = np.sum(v**2)
    for i in range(2):
        v = 0.5 * v
    return s


def test_dead_loop_carry():
    check_grad(dead_carry, (V3,))
    check_vjp(dead_carry, (V3,))


# ----------------------------------------------------------------------------- bug 6
# WRONG GRADIENT, silently. In `for row in x:` (or enumerate) a carry updated as
# `s = s * 0.5 + row` loses its own cotangent: the adjoint loop ends with `ds = 0.0` instead of
# `ds = ds * 0.5`, so only the last row gets a gradient: [0, 0, 1] instead of [0.25, 0.5, 1].
# `s = s + row` and `s = s * row` are right, and so is the same update in a `range` loop. The
# primal statement is not split (`s_new = s * 0.5 + row`): s2sad does not see that `s` varies
# (it is the constant 1.0 on entry and becomes active through `row`). Fuzz seeds 247 and others.


def rows_decay(x):
    s = 1.0
    for row in x:
        s = s * 0.5 + row
    return s


def rows_tanh_decay(x):
    s = 1.0
    for row in x:
        s = np.tanh(row) + 0.5 * s
    return s * 2.0


def enumerate_decay(x):
    s = 1.0
    for i, row in enumerate(x):
        s = s * 0.5 + row
    return s


@pytest.mark.parametrize("f", [rows_decay, rows_tanh_decay, enumerate_decay])
def test_carry_through_constant_multiple_in_array_loop(f):
    check_grad(f, (V3,))
    check_vjp(f, (V3,))


def test_rows_decay_exact():
    np.testing.assert_allclose(s2sad.grad(rows_decay)(V3), [0.25, 0.5, 1.0])


# ----------------------------------------------------------------------------- bug 7
# A differentiated parameter rebound in a loop inside the branch that is not taken: the adjoint
# initialises `dw` only inside that branch, so `return dx, dw` raises UnboundLocalError: cannot
# access local variable 'dw'. Without the loop (a plain `w = w * 2.0`) it is fine. Fuzz seed 324.


def param_loop_in_untaken_branch(x, w):
    if x > 0.0:
        v = x
    else:
        for i in range(2):
            w = w * 2.0
        v = w
    return v


@pytest.mark.parametrize("x", [0.5, -0.5])
def test_param_rebound_in_loop_in_untaken_branch(x):
    check_grad(param_loop_in_untaken_branch, (x, 0.7), wrt=(0, 1))
    check_vjp(param_loop_in_untaken_branch, (x, 0.7), wrt=(0, 1))


# ----------------------------------------------------------------------------- bug 8
# WRONG VALUES, silently. An inlined helper called with the same array for two parameters, one
# of which the helper rebinds in a loop: s2sad substitutes both parameters by the caller's `x`,
# so rebinding `p1` rebinds `x`, and `p0` (returned) sees the loop's result. Even the primal is
# wrong: same_array_twice([0.3, -0.5]) is -0.2 in Python and 0.0706 through s2sad.vjp; the
# gradient is [0.108, -0.5] instead of [1, 1]. Fuzz seeds 76, 303.


def _rebinds_second(p0, p1):
    for i in range(2):
        p1 = p1**2
    return p0


def same_array_twice(x):
    return np.sum(_rebinds_second(x, x))


def test_helper_called_with_one_array_twice():
    g = check_grad(same_array_twice, (np.array([0.3, -0.5]),))
    np.testing.assert_allclose(g, [1.0, 1.0])
    check_vjp(same_array_twice, (np.array([0.3, -0.5]),))


# ----------------------------------------------------------------------------- bug 9
# A constant array (np.ones) that receives a differentiated value through an augmented
# subscript write, then is used nonlinearly, is refused with
# S2SADError "internal error: the operator Add has a differentiated operand nested in an
# expression; please report this" (or Sub, or np.sum when the array was read before the
# write). A plain `y[1] = np.sin(x[0])` works. Fuzz seeds 7, 12, 54, 59, 109, 113, ... (~4%).


def aug_write_into_ones(x):
    y = np.ones(3)
    y[1] += np.sin(x[0])
    return np.sum(y**2)


def sub_write_into_ones(x):
    y = np.ones(3)
    y[1] -= x[0] * 2.0
    return np.sum(y**2)


def read_then_write_ones(x):
    y = np.ones(3)
    t = np.sum(y**2)
    y[1] = x[0] * 2.0
    return t + np.sum(y)


@pytest.mark.parametrize("f", [aug_write_into_ones, sub_write_into_ones, read_then_write_ones])
def test_differentiated_write_into_constant_array(f):
    check_grad(f, (V3,))
    check_vjp(f, (V3,))


# ----------------------------------------------------------------------------- bug 10
# A loop whose body never contributes to an array input's gradient (zero trips, or every trip
# skipped by `continue`, or a loop in the taken branch that only computes dead values) leaves
# the gradient as the scalar 0.0 the adjoint loop starts from: s2sad raises
# S2SADError "internal error: a gradient of shape () for an input of shape (3,)" instead of
# returning zeros(3). Fuzz seeds 188, 271.


def zero_trip_loop(x, n):
    s = 0.0
    for i in range(n):
        s = s + np.sum(x**2)
    return s


def always_continue(x):
    d = 0.0
    for i in range(2):
        if x[0] > -10.0:
            continue
        d = d - x
    return np.sum(d)


def dead_loop_in_taken_branch(w, x):
    if x[0] > 10.0:
        v = np.sum(w)
    else:
        for row in x:
            t = np.mean(w)
        v = 3.0
    return v


def test_zero_trip_loop():
    assert_zero = check_grad(zero_trip_loop, (V3, 0))
    np.testing.assert_array_equal(assert_zero, np.zeros(3))
    check_vjp(zero_trip_loop, (V3, 0))
    check_grad(zero_trip_loop, (V3, 2))


def test_loop_without_contributions():
    check_grad(always_continue, (V3,))
    check_vjp(always_continue, (V3,))
    check_grad(dead_loop_in_taken_branch, (V3, V3))
    check_vjp(dead_loop_in_taken_branch, (V3, V3))


def _rebinds_own_param(p):
    for i in range(2):
        p = np.sin(p)
    return 1.0


def helper_rebinds_callers_argument(x):
    t = _rebinds_own_param(x)
    return np.sum(x) + t


def test_helper_rebinding_its_parameter_leaves_the_callers_variable_alone():
    # the same bug as above with one argument: at 5ce8cbf the helper's loop rebinds the caller's
    # `x`, so np.sum(x) reads sin(sin(x)) (primal and gradient wrong). Fuzz seeds 1061, 2186.
    g = check_grad(helper_rebinds_callers_argument, (V3,))
    np.testing.assert_allclose(g, np.ones(3))
    check_vjp(helper_rebinds_callers_argument, (V3,))


def zeros_self_add(x):
    y = np.zeros(4)
    y[0] = y[0] + np.mean(x)
    return np.mean(y)


def test_zeros_element_updated_from_itself():
    # bug 9 spelled without `+=`: at 5ce8cbf, internal error "the operator Add has a
    # differentiated operand nested in an expression". Fuzz seed 1001.
    check_grad(zeros_self_add, (V3,))
    check_vjp(zeros_self_add, (V3,))


# ----------------------------------------------------------------------------- bug 11
# A branch inside an inner loop whose condition reads a value carried by the outer loop (so it
# is constant within one inner loop but changes between outer iterations): the adjoint tests
# the condition's *last* value in every iteration instead of taping it, so it pops the wrong
# tape. When the branch is taken late, the adjoint pops an empty tape: IndexError: pop from
# empty list (nested_condition_flips_on). When it is taken early, the gradient is silently
# wrong: nested_condition_flips_off([0.3, -0.5, 0.2]) gives [0.6, -1.0, 0.4] (the derivative
# of the untaken path) instead of [0.1216, -0.2027, 0.0811]. At 5ce8cbf. Fuzz seeds 1190, 1829;
# the fuzzer met it through an inlined helper whose parameter feeds the condition.


def nested_condition_flips_on(x):
    s = np.sum(x**2)
    for i in range(2):
        t = s
        for j in range(2):
            if s > 0.1:
                t = t * np.sin(t)
        s = t + 1.0
    return s


def nested_condition_flips_off(x):
    s = np.sum(x**2)
    for i in range(2):
        t = s
        for j in range(2):
            if s > 0.1:
                t = t * np.sin(t)
        s = t - 1.0
    return s


def _inner_branch_helper(p):
    s = p
    for i in range(2):
        if p > 0.1:
            s = 0.22 + np.mean(s)
    return s + 1.0


def condition_on_helper_parameter(x):
    s = (np.mean(x) * np.linspace(0.5, 1.5, 2) @ np.linspace(0.25, 1.5, 2)) ** 2
    for i in range(2):
        s = _inner_branch_helper(s)
    return s


def test_inner_loop_branch_on_outer_carry():
    small = np.array([0.1, 0.1, 0.1])  # sum of squares 0.03: the branch is taken from trip 2
    check_grad(nested_condition_flips_on, (small,))
    check_vjp(nested_condition_flips_on, (small,))
    check_grad(nested_condition_flips_off, (V3,))
    check_vjp(nested_condition_flips_off, (V3,))
    check_grad(condition_on_helper_parameter, (small,))
    check_vjp(condition_on_helper_parameter, (small,))


# ----------------------------------------------------------------------------- bug 12
# Values that vary only through an inlined helper are not seen as varying when the helper's body
# is split into single operations, and s2sad then refuses the (valid) program with
# S2SADError "internal error: the operator Mult has a differentiated operand nested in an
# expression; please report this": (a) a helper called in a loop on a carry that starts as a
# constant (`s = 0.0`), (b) a helper that writes a differentiated parameter into a constant
# array. The same code written inline is fine. At 5cd57d2. Fuzz seeds 1004, 1058, 1114.


def _sin_scaled(p):
    return 1.85 * np.sin(p)


def helper_on_constant_carry(x):
    s = 0.0
    for i in range(2):
        s = _sin_scaled(s) + np.sum(x)
    return s


def _scaled_ones(p):
    y = np.ones((2, 3))
    y[0] = y[0] * p
    return y


def helper_writes_param_into_ones(a):
    return np.sum(_scaled_ones(a) ** 2)


def test_helper_on_loop_carry_that_starts_constant():
    check_grad(helper_on_constant_carry, (V3,))
    check_vjp(helper_on_constant_carry, (V3,))


def test_helper_writing_parameter_into_constant_array():
    assert check_grad(helper_writes_param_into_ones, (0.7,)) == pytest.approx(6 * 0.7)
    check_vjp(helper_writes_param_into_ones, (0.7,))


# ----------------------------------------------------------------------------- bug 13
# An inner loop with a data-dependent `break`, inside an outer loop: the inner loop's trip count
# is not taped per outer iteration, so the adjoint replays every inner loop with the *last*
# count (`reversed(range(n)[:trips])`). Fewer trips early: IndexError: pop from empty list
# (inner_break_on). More trips early: silently wrong, inner_break_off([0.3, -0.5, 0.2]) gives
# [-0.479, 0.799, -0.320] instead of [0.502, -0.836, 0.335]. Same family as bug 11 (loop
# control of an inner loop read back unrecorded). At 5cd57d2. Fuzz seed 152 (through a helper
# with `for row in ...: ... if c: break` called in a `while` loop).


def inner_break_on(x):
    s = np.sum(x**2)
    for i in range(2):
        t = s
        for j in range(3):
            t = t * np.cos(t)
            if s < 0.5:
                break
        s = t + 1.0
    return s


def inner_break_off(x):
    s = np.sum(x**2) + 1.0
    for i in range(2):
        t = s
        for j in range(3):
            t = t * np.cos(t)
            if s < 0.5:
                break
        s = t - 1.5
    return s


def test_inner_loop_break_count_varies_between_outer_trips():
    small = np.array([0.1, 0.1, 0.1])
    check_grad(inner_break_on, (small,))
    check_vjp(inner_break_on, (small,))
    check_grad(inner_break_off, (V3,))
    check_vjp(inner_break_off, (V3,))


# ----------------------------------------------------------------------------- bug 14
# WRONG GRADIENT, silently. Writing an array into itself, `y[:] = y` or `y[mask] = y` with a
# mask that selects every row, leaves the value unchanged in NumPy, but s2sad's gradient through
# it is 0: self_slice_assign([0.3, -0.5, 0.2]) gives [0, 0, 0] instead of 2x = [0.6, -1, 0.4].
# (A reversed overlapping copy `y[0:3] = y[::-1]` is right.) Guess: the adjoint of the write
# clears dy[index] and the cleared slot is then what is passed to the right-hand side, which is
# the same array. At 2d4dbd5. Fuzz seed 101439.


def self_slice_assign(x):
    y = x.copy()
    y[:] = y
    return np.sum(y**2)


def self_mask_assign(x):
    y = x.copy()
    y[np.array([True, True, True])] = y
    return np.sum(y**2)


@pytest.mark.parametrize("f", [self_slice_assign, self_mask_assign])
def test_array_written_into_itself(f):
    g = check_grad(f, (V3,))
    np.testing.assert_allclose(g, 2 * V3)
    check_vjp(f, (V3,))


# ----------------------------------------------------------------------------- bug 15
# A zero-trip loop (here `range(1, x.shape[0] - 1)` with x.shape[0] == 2) whose carry would have
# taken an array value: the cotangent of that array stays the scalar 0.0 and reaches a rule that
# needs its shape: ValueError: matmul: Input operand 0 does not have enough dimensions (the
# fuzzer also met TypeError: 'float' object is not subscriptable and numpy AxisError the same
# way). Same family as bug 10, inside the sweep instead of at the inputs. At 2d4dbd5. Fuzz seeds
# 102839, 100731, 100072 (stack_vjp: AxisError), 101584 (reshape: ValueError).
# Cause: the reversed loop starts the adjoints it accumulates into as the scalar 0.0, and resets
# a carried value's adjoint to 0.0 at the end of each reversed trip (a stand-in zero of any
# shape). When no trip contributes (zero trips, every contribution in an untaken branch, or a
# carry overwritten before it is read), that scalar leaves the loop, or enters the next trip,
# and meets a rule that needs the array's shape (matmul, reshape, stack, concatenate, einsum,
# dot, transpose, a subscript write).
# Fixed: a zero an adjoint variable holds is always shaped like its value: `0.0` only for a value
# known to be a scalar, else `zeros_like(value)`, at the loop's start, at the end of a reversed
# trip and in branches alike (reverse.Reverser.zero_of).


def zero_trip_then_matmul(x, w):
    x = x @ w
    s = 0.0
    for i in range(1, x.shape[0] - 1):
        s = x
    return np.sum(s)


def carry_overwritten_by_matmul(x, w):
    # the carry is never read in the body: its adjoint is reset to zero after each reversed trip,
    # and the trip before reads that zero in matmul's rule
    s = x
    for i in range(3):
        s = x @ w
    return np.sum(s)


def test_zero_trip_loop_after_matmul():
    x = np.array([[0.3, 0.5], [0.2, -0.4]])
    w = np.array([[0.3, 0.5], [0.1, 0.2]])
    check_grad(zero_trip_then_matmul, (x, w), wrt=(0, 1))
    check_vjp(zero_trip_then_matmul, (x, w), wrt=(0, 1))
    check_grad(carry_overwritten_by_matmul, (x, w), wrt=(0, 1))
    check_vjp(carry_overwritten_by_matmul, (x, w), wrt=(0, 1))


def _read_in_untaken_branch(v):
    # v's adjoint gets no contribution: every read of v is in a branch no trip takes
    s = 0.0
    for i in range(2):
        if s > 10.0:
            s = s + np.sum(np.sin(v))
        else:
            s = s + 1.0
    return s


def untouched_stack(w):
    return _read_in_untaken_branch(np.stack([w, w], axis=1))


def untouched_reshape(w):
    return _read_in_untaken_branch(w.reshape((3, 1)))


def untouched_transpose(w):
    return _read_in_untaken_branch(np.transpose(np.outer(w, w)))


def untouched_matmul(w):
    return _read_in_untaken_branch(np.outer(w, w) @ w)


def untouched_dot(w):
    return _read_in_untaken_branch(np.dot(np.outer(w, w), w))


def untouched_concatenate(w):
    return _read_in_untaken_branch(np.concatenate([w, w]))


def untouched_einsum(w):
    return _read_in_untaken_branch(np.einsum("i,j->ij", w, w))


def untouched_fancy_read(w):
    return _read_in_untaken_branch(w[[2, 0]])


def untouched_row_write(w):
    y = np.zeros((2, 3))
    y[1] = w
    return _read_in_untaken_branch(y)


def untouched_fancy_write(w):
    y = np.zeros(3)
    y[[2, 0]] = w[:2]
    return _read_in_untaken_branch(y)


@pytest.mark.parametrize(
    "f",
    [
        untouched_stack,
        untouched_reshape,
        untouched_transpose,
        untouched_matmul,
        untouched_dot,
        untouched_concatenate,
        untouched_einsum,
        untouched_fancy_read,
        untouched_row_write,
        untouched_fancy_write,
    ],
)
def test_rules_never_see_a_scalar_zero_for_an_array(f):
    # at bdc6be5 all but the fancy read failed: AxisError (stack, fuzz seed 100072), ValueError
    # (reshape, fuzz seed 101584; matmul; einsum), IndexError (dot, concatenate), TypeError
    # 'float' object is not subscriptable (writes)
    assert check_grad(f, (V3,)) == pytest.approx(np.zeros(3))
    check_vjp(f, (V3,))


# ----------------------------------------------------------------------------- bug 16
# A name bound only on the part of a loop body that `continue` skips (here the alias `v = w`):
# when every trip skips it, the adjoint still reads it and raises UnboundLocalError: cannot
# access local variable 'v'. At bdc6be5. Fuzz seed 101797.
# Cause: normalization counted every name a loop body assigns as live out of the loop, so the
# reverse transform treated `v` as carried from trip to trip and set up its adjoint before the
# reversed loop with `zeros_like(v)`, reading `v` even when no trip bound it.
# Fixed: a loop's live-out names are only those read after the loop or read in the body before
# the body assigns them (normalize.liveness.prune_liveout); `v` is local to each trip.


def skipped_alias(w, x):
    y = 1.0
    for i, row in enumerate(x):
        if row > -10.0:
            continue
        v = w
        y = v[0]
    return y + 1.0


def test_name_bound_only_on_skipped_path():
    check_grad(skipped_alias, (V3, V3), wrt=(0, 1))
    check_vjp(skipped_alias, (V3, V3), wrt=(0, 1))
    # the same loop when some trips take the path
    check_grad(skipped_alias, (V3, np.array([0.5, -20.0, -30.0])), wrt=0)
    check_vjp(skipped_alias, (V3, np.array([0.5, -20.0, -30.0])), wrt=0)


# ----------------------------------------------------------------------------- bug 17
# WRONG GRADIENT, silently. In a loop that writes rows of an array, a right-hand side that reads
# the whole array through a view (`y.reshape(4)`) gets the wrong gradient (reading `y` itself is
# right). At bdc6be5. Fuzz seeds 100223, 102406; outside loops (a `.T` read before a write into
# a copy of the input) fuzz seed 20946.
# Cause: the view was a temporary holding no values of its own. In a loop the tape recorded it
# at the end of the trip, after the write had changed it; outside loops the write into the
# array is undone in the sweep only where the adjoint reads the array by name, and the adjoint
# read the view, so it saw the values after the write.
# Fixed: as for subscripts, a view-making read (reshape, ravel, .T, transpose, swapaxes,
# squeeze, expand_dims, moveaxis, np.asarray, ...) of an array the function writes in place is
# taken as a copy when it is read (normalize.memory.Memory.views_written).


def write_reads_whole_view(x):
    y = np.ones((2, 2))
    for i in range(2):
        y[i] = np.dot(y.reshape(4), x)
    return np.sum(y**2)


def write_reads_transposed_view(x):
    y = np.ones((2, 4))
    for i in range(2):
        y[i] = np.sin(np.transpose(y) @ x[:, 0])
    return np.sum(y**2)


def transposed_read_before_write(x):
    y = x.copy()
    z = np.sum(y.T @ x)
    y[0] = 0.0
    return z + np.sum(y)


def test_loop_write_reading_a_view_of_the_array():
    x = np.array([[0.3, -0.5], [0.2, 0.1], [0.4, -0.6], [0.7, 0.2]])
    check_grad(write_reads_whole_view, (x,))
    check_vjp(write_reads_whole_view, (x,))
    check_grad(write_reads_transposed_view, (x[:2],))
    check_vjp(write_reads_transposed_view, (x[:2],))
    check_grad(transposed_read_before_write, (M22,))
    check_vjp(transposed_read_before_write, (M22,))


# The same with a view bound to a name (found while fixing bug 17, not by the fuzzer, whose
# programs never name a view of an array they write): the gradient was silently wrong, as was
# the gradient of `t = y` (the same array under a second name). Fixed: such a name takes a copy
# of the values when it is bound; a read after the array was written (where NumPy's view would
# show the write) is refused, since s2sad does not follow writes through views.


def named_view_in_loop(x):
    y = np.ones((2, 2))
    for i in range(2):
        v = y.reshape(4)
        y[i] = np.dot(v, x)
    return np.sum(y**2)


def named_transposed_view(x):
    y = x.copy()
    t = y.T
    z = np.sum(t @ x)
    y[0] = 0.0
    return z + np.sum(y)


def second_name_for_array(x):
    y = x.copy()
    t = y
    z = np.sum(t * x)
    y[0] = 0.0
    return z + np.sum(y**2)


def view_read_after_write(x):
    y = x.copy()
    t = y.T
    y[0] = y[0] * 2.0
    return np.sum(t @ x)


def view_read_in_loop_that_writes(x):
    y = x.copy()
    t = y[0]
    s = 0.0
    for i in range(2):
        s = s + np.sum(t)
        y[1 - i] = x[i] * 2.0
    return s


def test_named_view_of_array_written_later():
    x = np.array([[0.3, -0.5], [0.2, 0.1], [0.4, -0.6], [0.7, 0.2]])
    check_grad(named_view_in_loop, (x,))
    check_vjp(named_view_in_loop, (x,))
    for f in (named_transposed_view, second_name_for_array):
        check_grad(f, (M22,))
        check_vjp(f, (M22,))
        check_jvp(f, (M22,))


@pytest.mark.parametrize("f", [view_read_after_write, view_read_in_loop_that_writes])
def test_view_read_after_its_array_is_written_is_refused(f):
    with pytest.raises(s2sad.UnsupportedSyntaxError, match="does not follow writes through views"):
        s2sad.grad(f)(M22)


# ----------------------------------------------------------------------------- bug 18
# An array whose final value is dead (only a dead loop reads it) after a fancy-index write: its
# cotangent is the scalar 0.0 and the adjoint of the write subscripts it: TypeError: 'float'
# object is not subscriptable. Same family as bugs 10 and 15. At bdc6be5. Fuzz seeds 100731,
# 102154, 102455, 102762.
# Cause: as bug 15 (the reversed dead loop started y's adjoint as the scalar 0.0), and the
# reversed loop set up adjoints for a loop whose results nothing reads.
# Fixed with bug 15, and a reversed loop now only handles the adjoints that can be nonzero in
# it (reverse.Reverser.nonzero_in): a dead loop has no adjoint code at all.


def dead_fancy_write(a, x):
    y = np.ones_like(x)
    y += a
    v = np.sum(y)
    y[[1, 0]] = y[:2] * 2.0
    for i in range(2):
        x = y * 0.5
    return v


def test_fancy_write_into_dead_array():
    x = np.array([[0.3, -0.5], [0.2, 0.1], [0.4, -0.6], [0.7, 0.2]])
    check_grad(dead_fancy_write, (0.7, x), wrt=(0, 1))
    check_vjp(dead_fancy_write, (0.7, x), wrt=(0, 1))


# ----------------------------------------------------------------------------- bug 19
# WRONG GRADIENT (nan). A loop that overwrites an argument with values nothing reads after it
# (here `x = np.exp(np.exp(x))` four times, which overflows to inf) made the whole gradient nan:
# dead_loop_overflow([1.5, 0.3]) gave [nan, nan] instead of [1, 1]. At bdc6be5. Fuzz seed 20970.
# Cause: the reversed loop started the carried adjoint dx at zero and ran every trip's rules,
# multiplying that zero by the overflowed partial derivatives (0 * inf = nan), and added the
# result to the gradient of the argument the loop had rebound.
# Fixed: the reversed loop skips adjoints that no live value reaches (reverse.Reverser.nonzero_in).


def dead_loop_overflow(x):
    v = np.sum(x)
    for i in range(4):
        x = np.exp(np.exp(x))
    return v


def test_dead_loop_that_overflows():
    with np.errstate(over="ignore"):
        g = check_grad(dead_loop_overflow, (np.array([1.5, 0.3]),))
        np.testing.assert_array_equal(g, np.ones(2))
        check_vjp(dead_loop_overflow, (np.array([1.5, 0.3]),))


# ----------------------------------------------------------------------------- bug 20
# jvp: an elementwise operation whose operand without a tangent broadcasts the result wider than
# the operand with one (`x[1:2, :] - a` for a scalar `a`) got the tangent of the narrow operand
# (`-a_dot`, a scalar) instead of one shaped like the result, and the next rule needing the
# shape failed: ValueError: zero-dimensional arrays cannot be concatenated (jacobian in forward
# mode the same). At ca5f4ff, found when the fuzzer started checking jvp. Fuzz seeds 8, 79.
# Cause: forward mode builds an elementwise tangent from the VJP template without `unbroadcast`,
# which is right for the terms but leaves out the shape an operand without a tangent adds.
# Fixed: such a tangent is spread over the result's shape (`np.broadcast_to(t, np.shape(y))`),
# unless it reads the result or every operand without a tangent is known to be a scalar.


def broadcast_by_constant_operand(a, x):
    return np.concatenate([x[1:2, :] - a, np.stack([x.sum(axis=0)], axis=0)], axis=0)


def test_jvp_of_elementwise_result_widened_by_constant_operand():
    check_jvp(broadcast_by_constant_operand, (0.3, M22), wrt=0)
    check_jvp(broadcast_by_constant_operand, (0.3, M22), wrt=(0, 1))
    jac = s2sad.jacobian(broadcast_by_constant_operand, wrt=0, mode="forward")(0.3, M22)
    np.testing.assert_array_equal(jac, [[-1.0, -1.0], [0.0, 0.0]])


# ----------------------------------------------------------------------------- bug 21
# WRONG JVP, silently. np.concatenate (or np.stack) of a list whose first element has no
# tangent: the tangent of the result was all zeros, concat_after_constant(x) gave [0, 0, 0]
# instead of [0, 2 t0, 2 t1]. At ca5f4ff. Fuzz seed 53.
# Cause: forward mode emits one call for a linear rule with a list argument, with the tangents
# of all elements in it, but only when it met the list's first element, so nothing was emitted
# when that element had no tangent.
# Fixed: the call is emitted at the first element that has a tangent.


def concat_after_constant(x):
    return np.concatenate([np.ones(1), 2.0 * x], axis=0)


def stack_after_constant(x):
    return np.stack([0.5, np.sin(x[0]), x[1]])


def test_jvp_of_list_whose_first_element_is_constant():
    t = check_jvp(concat_after_constant, (np.array([0.3, -0.5]),))
    assert t[0] == 0.0 and np.all(t[1:] != 0.0)
    check_jvp(stack_after_constant, (np.array([0.3, -0.5]),))


# ----------------------------------------------------------------------------- bug 22
# jvp: a parameter outside `wrt` that a loop updates from a differentiated value (here `x` in
# `x = x + w`) and that is read where the loop did not run (the early return): UnboundLocalError:
# cannot access local variable 'x_dot'. At ca5f4ff. Fuzz seeds 225, 413, 454.
# Cause: forward mode gives a tangent to every name that may carry one, but a parameter has no
# statement assigning it, so nothing started the tangent of one outside `wrt`.
# Fixed: such a parameter's tangent starts as zeros_like(parameter) at the top of the function.


def loop_updates_other_parameter(w, x):
    if np.sum(w) < 0.0:
        return x * 2.0
    for i in range(3):
        x = x + w
    return x


def test_jvp_of_parameter_outside_wrt_updated_in_loop():
    check_jvp(loop_updates_other_parameter, (V3, V3))  # the loop runs
    check_jvp(loop_updates_other_parameter, (-V3 - 1.0, V3))  # the early return
    check_vjp(loop_updates_other_parameter, (-V3 - 1.0, V3))


# ----------------------------------------------------------------------------- forward rules
# jvp refused math.log, math.atan2, math.hypot and math.pow (NoRuleError: no forward-mode (jvp)
# rule), which grad and vjp differentiate: their VJP templates are scalar products, so they are
# their tangent rules too. Fuzz seeds 52, 161, 389, ... when the fuzzer started checking jvp.


def math_with_two_arguments(a, b):
    return (
        math.log(a * a + 1.0)
        + math.atan2(a, b)
        + math.hypot(a, b)
        + math.pow(a * a + 0.5, b)
        + math.log(b * b + 2.0, a * a + 3.0)
    )


def test_jvp_of_math_functions_with_two_arguments():
    check_jvp(math_with_two_arguments, (0.3, 0.7), wrt=(0, 1))
    check_grad(math_with_two_arguments, (0.3, 0.7), wrt=(0, 1))


# ----------------------------------------------------------------------------- bug 23
# jvp: the tangent of an integer output (a counter returned beside a float, `return k, x * 2.0`)
# came back as np.float32 for a Python int (NumPy 2 gives a Python int the weakest float type),
# where every other Python number gets a Python float. At ca5f4ff. Fuzz seeds 101511, 101783,
# 103061, 103692, 104130.
# Fixed: the tangent of a Python number is a Python float, of an integer NumPy value float64.


def counter_and_value(x):
    k = 0
    s = 0.0
    while s < 1.0:
        s = s + np.sum(x**2) + 0.3
        k += 1
    return k, s * x, np.int64(k)


def test_jvp_of_integer_output():
    _, (tk, tx, tk64) = s2sad.jvp(counter_and_value)(V3, tangent=np.ones(3))
    assert type(tk) is float and tk == 0.0
    assert type(tk64) is np.float64 and tk64 == 0.0
    check_jvp(counter_and_value, (V3,))


# ----------------------------------------------------------------------------- bug 24
# A loop over `zip(x, x)` (or `for row in x`, `enumerate(x)`) whose items make a carry vary,
# where the carry is read inside a larger expression before the loop (`(-s) + np.exp(s)`):
# S2SADError "internal error: the operator Add has a differentiated operand nested in an
# expression". At 0a90dab. Fuzz seed 110627.
# Cause: normalization decides before the loop which names vary in some trip, so that their
# first reads are split into single operations too; it followed assignments but not loop items,
# so it missed that `row` varies with `x`, and with it `s`.
# Fixed: the items of a `for` loop over a varying sequence vary (mark_loop_varied).


def carry_nested_before_zip_loop(x):
    s = 0.0
    t = (-s) + np.exp(s) ** 0.5
    for a, row in zip(x, x):
        s = s + t * row * a
        t = np.tanh(t)
    return s + t


def carry_nested_before_row_loop(x):
    s = 0.0
    t = (-s) + np.exp(s) ** 0.5
    for i, row in enumerate(x):
        s = s + t * row
    return s + t


@pytest.mark.parametrize("f", [carry_nested_before_zip_loop, carry_nested_before_row_loop])
def test_carry_nested_in_expression_before_loop_over_rows(f):
    check_grad(f, (V3,))
    check_vjp(f, (V3,))
    check_jvp(f, (V3,))


# ----------------------------------------------------------------------------- bug 25
# A loop in one branch of an `if` whose carry (`w`) is dead after the loop but whose adjoint the
# other branch starts (`return np.sum(w)`): UnboundLocalError: cannot access local variable 'dx'
# (the gradient of an argument the loop reads). At 0a90dab (with the reversed loop's skipping of
# adjoints no live value reaches, from bug 19). Fuzz seed 110959.
# Cause: an adjoint assigned in only one branch is started at zero before the `if` and the
# branches are transformed again; with dw started, the loop in the other branch now contributes
# to dx, which the second transform assigned in that branch only, and nothing started it.
# Fixed: the branches are transformed again until no further adjoint needs starting.


def dead_carry_live_in_other_branch(x, w, c):
    if c > 0.0:
        return np.sum(w)
    for i in range(2):
        w = np.tanh(w) * np.exp(x)
    return c * 2.0


def test_adjoint_started_for_one_branch_reaches_a_loop_in_the_other():
    for c in (1.0, -1.0):
        g = check_grad(dead_carry_live_in_other_branch, (V3, V3, c), wrt=(0, 1))
        check_vjp(dead_carry_live_in_other_branch, (V3, V3, c), wrt=(0, 1))
        np.testing.assert_array_equal(g[0], np.zeros(3))


# ----------------------------------------------------------------------------- bug 26
# Reverse mode gives exact zeros where forward mode and finite differences agree on a nonzero
# derivative (fuzz seed 153324 at 008fed1: vjp and the reverse-mode jacobian all zero; the
# pullback below gave 0 instead of -cos(x)). A value overwritten in one branch of an `if` is
# written back into the name it had before the `if` when that old value "may not exist" (the
# last value of a loop that may run no iteration, a name only one branch assigned), so the
# branch becomes `x_1 = -x_1`, whose adjoint `dx_1 = dx_1 + -dx_1` cancels; the old value's
# adjoint also kept flowing into the statements that made it (`y = 3 * x` after the loop gave
# 3 + cos(x)). At seed 153324 the old value existed anyway: `enumerate(x)` in the other branch
# registered x's current name as a variable of that branch only, hence "maybe undefined".
# Fixed: a merged value always takes a new name (copied from the old value on the path that
# keeps it, a copy dropped when nothing reads it), and a name from before the `if` is never
# taken for one assigned on one path only.


def negated_in_branch_enumerated_in_other(x):
    x = np.sin(x)
    if x.mean() < 0.63:
        x = -x
    elif math.cos(0.35) > 0.6:
        s = np.var(x)
        for i, row in enumerate(x):
            s = np.tanh(s)
    return np.sum(x)


def loop_value_negated_in_branch(n, x):
    y = 0.0 * x  # (bound before: a loop of no iteration would leave `y` unbound, refused)
    for i in range(n):
        y = np.sin(x) * i
    if x[0] > 0:
        y = -y
    return np.sum(y)


def loop_value_scaled_in_both_branches(n, x):
    for i in range(n):
        y = np.sin(x) * i
    if x[0] > 0:
        y = y * 3.0
    else:
        y = y * 2.0
    return np.sum(y)


def loop_value_replaced_in_branch(n, x):
    y = 0.0 * x  # (bound before: a loop of no iteration would leave `y` unbound, refused)
    for i in range(n):
        y = np.sin(x) * i
    if x[0] > 0:
        y = 3.0 * x
    return np.sum(y)


def loop_value_unread_after_branch(n, x):
    for i in range(n):
        y = np.sin(x) * i
    if x[0] > 0:
        y = 3.0 * x
    return np.sum(x**2)


X4 = np.array([0.3, -0.5, 0.2, 0.7])


def test_value_overwritten_in_branch_after_loop_or_enumerate():
    g = check_grad(negated_in_branch_enumerated_in_other, (X4,))
    np.testing.assert_allclose(g, -np.cos(X4), rtol=1e-12)
    check_vjp(negated_in_branch_enumerated_in_other, (X4,))
    check_jvp(negated_in_branch_enumerated_in_other, (X4,))
    for sign in (1.0, -1.0):
        x = X4 * np.array([sign, 1.0, 1.0, 1.0])
        pos = x[0] > 0
        exact = {
            loop_value_negated_in_branch: (-1.0 if pos else 1.0) * np.cos(x),
            loop_value_scaled_in_both_branches: (3.0 if pos else 2.0) * np.cos(x),
            loop_value_replaced_in_branch: np.full(4, 3.0) if pos else np.cos(x),
        }
        for f, want in exact.items():
            g = check_grad(f, (2, x), wrt=1)
            np.testing.assert_allclose(g, want, rtol=1e-12)
            check_vjp(f, (2, x), wrt=1)
            check_jvp(f, (2, x), wrt=1)
    # a loop that runs no iteration leaves `y` unassigned; Python reads nothing of it here
    g = check_grad(loop_value_unread_after_branch, (0, X4), wrt=1)
    np.testing.assert_allclose(g, 2 * X4, rtol=1e-12)


# ----------------------------------------------------------------------------- bug 27
# "internal error: the operator MatMult has a differentiated operand nested in an expression"
# (fuzz seed 154957 at 008fed1, in grad, vjp and the reverse-mode jacobian). A parameter in wrt
# (`a`) is rebound to a constant on the path past an early `return`: normalization leaves the
# constant's expressions nested (`np.sin(a_1 * v)` needs no splitting), then merges the
# branches by renaming that constant to the merged name, which varies (the other path keeps the
# parameter), so the nested expressions read a differentiated value.
# Fixed: a branch's constant value is copied into a merged name that varies, not renamed.


def rebound_to_constant_after_early_return(a, w, x):
    v = np.sum(w)
    if v > 5.0:
        return v * a
    a = np.abs(v)
    p = np.linspace(0.25, 1.5, 3)
    k = np.tanh(a * p) @ np.sin(((a * p) ** 2 + 1.5) ** (0.033333 * v))
    return k * np.sum((x**2 + 1.0) ** (a * np.sum(x)))


def test_parameter_rebound_to_constant_after_early_return():
    w, x = np.array([0.3, 0.4]), np.array([0.5, -1.2, 0.9])
    f = rebound_to_constant_after_early_return
    ga, gx = check_grad(f, (0.7, w, x), wrt=(0, 2))
    assert ga == 0.0  # `a` is rebound before anything reads it
    # exact: in the power, base u = x^2 + 1 and exponent e = a sum(x) both depend on x
    v = np.sum(w)
    p = np.linspace(0.25, 1.5, 3)
    k = np.tanh(v * p) @ np.sin(((v * p) ** 2 + 1.5) ** (0.033333 * v))
    u, e = x**2 + 1.0, v * np.sum(x)
    want = k * (e * u ** (e - 1) * 2 * x + np.sum(u**e * np.log(u)) * v)
    np.testing.assert_allclose(gx, want, rtol=1e-12)
    check_vjp(f, (0.7, w, x), wrt=(0, 2))
    check_jvp(f, (0.7, w, x), wrt=(0, 2))
    # the early return's path
    check_grad(f, (0.7, w * 10, x), wrt=(0, 2))


# bug 28 (fuzz seed 230536, forward mode): the tangent of np.where(c, a, x) with only the scalar
# `a` differentiated was np.where(c, a_dot, 0.0), shaped like the condition x[2:3] (1,) and not
# like the result (4,): the shape check counted `x` as read because `x[2:3]` was. An IndexError
# later, in jvp and the forward Jacobian.
def where_picks_a_scalar_over_a_vector(x, a):
    v = np.where(x[2:3] > -0.14, a, x)
    return v[1] * 2.0 + np.sum(v**2)


def test_bug28_forward_tangent_of_where_has_the_result_shape():
    x = np.array([-0.61, 1.21, 0.32, -0.79])
    check_jvp(where_picks_a_scalar_over_a_vector, (x, -0.79), wrt=1)
    jac = s2sad.jacobian(where_picks_a_scalar_over_a_vector, wrt=1, mode="forward")(x, -0.79)
    assert jac == pytest.approx(2.0 + 2 * 4 * -0.79, rel=1e-12)  # v = a everywhere here
