"""Issue 13, classes 2, 7, 12 and 13: never a silently wrong number.

- Unknown means refuse: a differentiated value reaching something s2sad has no rule for (an
  array built from it by np.arange or np.r_ with a range, an object of a user class, a
  method) is refused by name, at the user's line; np.full/np.full_like/np.linspace have rules.
- Numerical corners: np.std of one element, x ** 0 at 0, grad of `return loss, aux`.
- Every returned array is the caller's own (no two gradients share memory).
- A decorated function is differentiated as the code the object runs, or refused.
"""

import builtins
import functools
import importlib
import math
import operator
import os
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import s2sad
from conftest import check_grad, check_jvp, check_vjp, rand
from s2sad.jit import JitFallbackWarning

HERE = os.path.basename(__file__)


def _fd_jacobian(f, x, eps=1e-6):
    x = np.asarray(x, dtype=float)
    cols = []
    for k in range(x.size):
        e = np.zeros(x.size)
        e[k] = eps
        e = e.reshape(x.shape)
        cols.append((np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * eps))
    return np.moveaxis(np.array(cols), 0, -1).reshape(np.shape(f(x)) + x.shape)


# --------------------------------------------------------------------- class 12: refuse, never 0


def arange_start(x):
    return np.sum(np.arange(x, x + 3.0) ** 2)


def r_concat(x):  # (np.r_ of values alone is np.concatenate: test_rules_breadth_building.py)
    return np.sum(np.r_[x, 0:2] ** 2)


def c_columns(x):  # (a directive string)
    return np.sum(np.c_["0", x, x] ** 2)


@pytest.mark.parametrize(
    "func, arg, name",
    [
        (arange_start, 0.7, "np.arange"),
        (r_concat, np.ones(2), "np.r_[...]"),
        (c_columns, np.ones(2), "np.c_[...]"),
    ],
)
def test_array_builders_without_a_rule_are_refused_not_zero(func, arg, name):
    line = func.__code__.co_firstlineno + 1
    for transform in (s2sad.grad, s2sad.value_and_grad):
        with pytest.raises(s2sad.NoRuleError) as info:
            transform(func)(arg)
        message = str(info.value)
        assert name in message and f"{HERE}:{line}:" in message
        assert "s2sad.register_vjp" in message
    with pytest.raises(s2sad.NoRuleError, match="jvp"):
        s2sad.jvp(func)(arg, tangent=np.ones_like(arg))


def test_the_no_derivative_table_holds_only_zero_derivatives():
    # these carry a derivative in a float argument: no entry in the "no derivative" table
    for func in (np.linspace, np.arange, np.full, np.full_like, np.geomspace, np.logspace):
        assert not s2sad.rules.is_nondiff(func), func.__name__
    # integer- and boolean-valued, or reading only a shape: a zero derivative
    for func in (np.argmax, np.searchsorted, np.nonzero, np.sign, np.floor, np.zeros_like):
        assert s2sad.rules.is_nondiff(func), func.__name__


def full_fill(x, a):
    return np.sum(np.sin(np.full((2, 3), x) * a)) + np.sum(np.full((2, 3), x[1]) ** 3)


def full_like_fill(x, a):
    return np.sum(np.full_like(a, x[0]) * a**2) + np.sum(np.cos(np.full_like(a, x)))


def fill_scalar(x, a):
    return np.sum(np.full(3, x) ** 2 * a) + np.sum(np.full_like(a, x) * a)


def full_like_of_differentiated(x):
    return np.sum(np.full_like(x, 2.0) * x**2)


@pytest.mark.parametrize("func", [full_fill, full_like_fill])
def test_full_and_full_like_differentiate_their_fill_value(func):
    x, a = rand(3, seed=1) + 0.5, rand(2, 3, seed=2)
    check_grad(func, (x, a))
    check_vjp(func, (x, a))
    check_jvp(func, (x, a))
    expected = _fd_jacobian(lambda v: func(v, a), x)
    for mode in ("forward", "reverse"):
        np.testing.assert_allclose(s2sad.jacobian(func, mode=mode)(x, a), expected, rtol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitFallbackWarning)
        np.testing.assert_allclose(s2sad.grad(func, jit=True)(x, a), expected, rtol=1e-6)
    hessian = _fd_jacobian(lambda v: s2sad.grad(func)(v, a), x)
    np.testing.assert_allclose(s2sad.hessian(func)(x, a), hessian, rtol=1e-5, atol=1e-8)


def test_a_scalar_fill_value_compiles_with_numba():
    a = rand(3, seed=9)
    expected = check_grad(fill_scalar, (0.7, a))
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitFallbackWarning)
        assert np.isclose(s2sad.grad(fill_scalar, jit="strict")(0.7, a), expected, rtol=1e-12)


def test_full_like_reads_its_template_array_for_the_shape_only():
    x = rand(4, seed=3)
    np.testing.assert_allclose(check_grad(full_like_of_differentiated, (x,)), 4.0 * x)


def sum_as_int(x):
    return np.sum(x, dtype=int) * 1.0 + np.sum(x.astype(np.int32)) * 2.0


def full_of_ints(x):
    whole = np.sum(np.full(3, x[0], dtype="int64")) + np.sum(np.full_like(np.arange(3), x[1]))
    return whole * 1.0


def test_results_cast_to_integers_carry_no_derivative():
    x = np.array([1.5, 2.5, 3.5])
    for func in (sum_as_int, full_of_ints):
        np.testing.assert_array_equal(s2sad.grad(func)(x), np.zeros(3))
        _, dot = s2sad.jvp(func)(x, tangent=np.ones(3))
        assert dot == 0.0
        np.testing.assert_array_equal(s2sad.jacobian(func, mode="forward")(x), np.zeros(3))
    np.testing.assert_array_equal(s2sad.grad(full_of_ints, jit=True)(x), np.zeros(3))


def searchsorted_count(x):
    k = np.searchsorted(x, 0.5)
    return np.sum(x**2) * k


def test_integer_valued_functions_stay_constants():
    x = np.array([0.1, 0.4, 0.7, 0.9])
    np.testing.assert_allclose(s2sad.grad(searchsorted_count)(x), 2 * x * 2)


class _Scaler:
    def __init__(self):
        self.k = 3.0

    def scale(self, x):
        return self.k * x

    def __call__(self, x):
        return self.k * x


_SCALER = _Scaler()
_PARTIAL = functools.partial(np.multiply, 3.0)


def through_method_of_object(x):
    return np.sum(_SCALER.scale(x))


def through_callable_object(x):
    return np.sum(_SCALER(x))


def through_partial(x):
    return np.sum(_PARTIAL(x))


def through_array_method(x):
    return x.searchsorted(0.5).sum()


def through_attribute(x):
    return np.sum(x.flat)  # (x.real and x.imag have rules: np.real, np.imag)


@pytest.mark.parametrize(
    "func, name",
    [
        (through_partial, "_PARTIAL"),
        (through_array_method, ".searchsorted()"),
        (through_attribute, ".flat"),
    ],
)
def test_unknown_objects_methods_and_attributes_are_refused_by_name(func, name):
    with pytest.raises(s2sad.NoRuleError) as info:
        s2sad.grad(func)(np.ones(3))
    assert name in str(info.value)
    assert f"{HERE}:{func.__code__.co_firstlineno + 1}:" in str(info.value)


def reads_locals(x):
    t = x * 2.0
    return np.sum(locals()["t"])


def reads_eval(x):
    t = np.sin(x)
    return np.sum(eval("t"))


def counts_vars(x):
    return np.sum(x * len(vars()))


def reads_the_frame(x):
    t = x * 2.0
    return np.sum(sys._getframe().f_locals["t"])


def reads_builtins_eval(x):
    t = np.sin(x)
    return np.sum(builtins.eval("t"))


@pytest.mark.parametrize(
    "func, name",
    [
        (reads_locals, "locals"),
        (reads_eval, "eval"),
        (counts_vars, "vars"),
        (reads_the_frame, "sys._getframe"),
        (reads_builtins_eval, "builtins.eval"),
    ],
)
@pytest.mark.parametrize("transform", [s2sad.grad, s2sad.value_and_grad, s2sad.jacobian])
def test_reading_the_frame_by_name_is_refused(func, name, transform):
    """The generated code's frame holds other names (and reused buffers) than the user's:
    locals(), eval and vars would read other values, and no derivative flows through them."""
    with pytest.raises(s2sad.UnsupportedSyntaxError) as info:
        transform(func)(np.ones(3))
    assert f"'{name}' reads variables by their names" in str(info.value)
    line = func.__code__.co_firstlineno + (1 if func is counts_vars else 2)
    assert f"{HERE}:{line}:" in str(info.value)


def eval_by_getattr(x):
    t = np.sin(x)
    return np.sum(getattr(builtins, "eval")("t"))


def eval_by_computed_getattr(x):
    reader = getattr(builtins, "ev" + "al")
    return np.sum(reader("x * x"))


def eval_by_import(x):
    return np.sum(__import__("builtins").eval("x * x"))


def eval_from_builtins_dict(x):
    return np.sum(vars(builtins)["eval"]("x * x"))


READERS = {"e": eval}
PARTIAL_EVAL = functools.partial(eval, "x * x")


class _Holder:
    f = eval


class _Peek:  # called with no differentiated argument: it reads its caller's frame
    def __call__(self):
        return sys._getframe(1).f_locals["x"] ** 2


def _peek():
    return sys._getframe(1).f_locals["x"] ** 2


PEEK = _Peek()


def eval_in_a_dict(x):
    return np.sum(READERS["e"]("x * x"))


def eval_through_sys_modules(x):
    return np.sum(sys.modules["builtins"].eval("x * x"))


def eval_through_importlib(x):
    return np.sum(importlib.__import__("builtins").eval("x * x"))


def eval_through_attrgetter(x):
    return np.sum(operator.attrgetter("eval")(builtins)("x * x"))


def eval_partial(x):
    return np.sum(PARTIAL_EVAL())


def eval_of_an_object_by_getattr(x):
    return np.sum(getattr(_Holder, "f")("x * x"))


def eval_through_globals_of_a_function(x):
    return np.sum(eval_in_a_dict.__globals__["READERS"]["e"]("x * x"))


def eval_through_a_modules_dict(x):
    return np.sum(np.lib.__dict__["__builtins__"]["eval"]("x * x"))


def helper_reads_its_callers_frame(x):
    return np.sum(_peek())


def object_reads_its_callers_frame(x):
    return np.sum(PEEK())


@pytest.mark.parametrize(
    "func, what",
    [
        (eval_by_getattr, "'builtins.eval' reads variables by their names"),
        (eval_by_computed_getattr, "by a name computed at run time"),
        (eval_by_import, "'__import__' hands out objects by name"),
        (eval_from_builtins_dict, "'vars' reads variables by their names"),
        (eval_in_a_dict, "'READERS' reads variables by their names"),
        (eval_through_sys_modules, "'sys.modules' hands out objects by name"),
        (eval_through_importlib, "'importlib.__import__' hands out objects by name"),
        (eval_through_attrgetter, "'operator.attrgetter' hands out objects by name"),
        (eval_partial, "'PARTIAL_EVAL' reads variables by their names"),
        (eval_of_an_object_by_getattr, "'_Holder.f' reads variables by their names"),
        (eval_through_globals_of_a_function, ".__globals__' hands out objects by name"),
        (eval_through_a_modules_dict, "'np.lib.__dict__' hands out objects by name"),
        (helper_reads_its_callers_frame, "'_peek' reads variables by their names"),
        (object_reads_its_callers_frame, "'PEEK' reads variables by their names"),
    ],
)
@pytest.mark.parametrize("jit", [False, True])
def test_a_frame_reader_reached_indirectly_is_refused(func, what, jit):
    """Even where no differentiated value is passed to the call (the string names it), the
    value read depends on x: refused at transform time, not a silent zero gradient."""
    with pytest.raises(s2sad.UnsupportedSyntaxError) as info:
        s2sad.grad(func, jit=jit)(np.ones(3))
    assert what in str(info.value)
    assert f"{HERE}:" in str(info.value)


def test_getattr_of_a_module_by_a_constant_name_still_differentiates():
    def f(x):
        return np.sum(np.cos(x) * getattr(np, "pi"))

    np.testing.assert_allclose(s2sad.grad(f)(np.ones(3)), -np.pi * np.sin(np.ones(3)))


def test_a_method_of_the_users_object_is_inlined():
    """`_SCALER.scale(x)` and `_SCALER(x)` are the user's methods: inlined with self the object
    (its k read as data), no longer refused."""
    np.testing.assert_allclose(s2sad.grad(through_method_of_object)(np.ones(3)), 3.0)
    np.testing.assert_allclose(s2sad.grad(through_callable_object)(np.ones(3)), 3.0)


# ------------------------------------------------------------------ class 13: numerical corners


def std_all(x):
    return np.std(x)


def std_rows(x):
    return np.sum(np.std(x, axis=1) * np.arange(1.0, 4.0))


def std_rows_keepdims(x):
    return np.sum(np.std(x, axis=-1, keepdims=True) ** 2 + np.var(x, axis=1, keepdims=True))


def var_all(x):
    return np.var(x) + np.var(x, ddof=0)


@pytest.mark.parametrize(
    "func, shape", [(std_all, (1,)), (std_rows, (3, 1)), (std_rows_keepdims, (3, 1))]
)
def test_std_over_one_element_is_constant_zero_not_nan(func, shape):
    x = rand(*shape, seed=4)
    np.testing.assert_array_equal(s2sad.grad(func)(x), np.zeros(shape))
    _, dot = s2sad.jvp(func)(x, tangent=np.ones(shape))
    assert dot == 0.0
    _, pullback = s2sad.vjp(func)(x)
    np.testing.assert_array_equal(pullback(1.0), np.zeros(shape))
    np.testing.assert_array_equal(s2sad.jacobian(func, mode="reverse")(x), np.zeros(shape))
    np.testing.assert_array_equal(s2sad.hessian(func)(x), np.zeros(shape + shape))
    np.testing.assert_array_equal(s2sad.grad(func, jit=True)(x), np.zeros(shape))


def std_ddof(x):
    return np.std(x, ddof=1) + np.sum(np.std(x.reshape(2, 2), axis=0, ddof=1))


def test_std_and_var_elsewhere_unchanged():
    check_grad(std_ddof, (rand(4, seed=5),))
    check_grad(var_all, (rand(1, seed=5),))
    check_grad(std_rows, (rand(3, 4, seed=6),))


def pow_zero_call(x):
    return np.power(x, 0.0)


def pow_zero_float(x):
    return x**0.0


def pow_zero_int(x):
    return np.sum(x**0 + x)


def math_pow_zero(x):
    return math.pow(x, 0.0) + x


@pytest.mark.parametrize(
    "func, x, expected",
    [
        (pow_zero_call, 0.0, 0.0),
        (pow_zero_float, 0.0, 0.0),
        (pow_zero_call, np.zeros(2), None),
        (pow_zero_int, np.zeros(3), np.ones(3)),
        (math_pow_zero, 0.0, 1.0),
    ],
)
def test_power_zero_at_zero_has_zero_derivative(func, x, expected):
    if expected is None:
        _, pullback = s2sad.vjp(func)(x)
        np.testing.assert_array_equal(pullback(np.ones(2)), np.zeros(2))
        return
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        np.testing.assert_array_equal(s2sad.grad(func)(x), expected)
        _, dot = s2sad.jvp(func)(x, tangent=np.ones_like(x) if np.ndim(x) else 1.0)
        np.testing.assert_array_equal(dot, np.sum(expected))


def pow_variable(x, n):
    return np.sum(x**n) + math.pow(x[0], n)


def test_a_variable_exponent_of_zero_at_zero_has_zero_derivative():
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for jit in (False, True):
            np.testing.assert_array_equal(s2sad.grad(pow_variable, jit=jit)(np.zeros(2), 0.0), 0.0)
    x = np.array([0.5, 2.0])
    check_grad(pow_variable, (x, 3.0), wrt=(0, 1))
    check_jvp(pow_variable, (x, 2.5), wrt=(0, 1))


def test_a_hessian_after_gradients_for_other_wrt_differentiates_its_own_gradient():
    x = np.array([0.5, 2.0])
    s2sad.grad(pow_variable)(x, 3.0)
    s2sad.grad(pow_variable, wrt=(0, 1))(x, 3.0)  # its code once took the name of the first
    expected = np.diag(6.0 * x) + np.diag([6.0 * x[0], 0.0])
    np.testing.assert_allclose(s2sad.hessian(pow_variable)(x, 3.0), expected)


def loss_and_aux(x):
    loss = np.sum(x**2)
    return loss, x * 2.0


@pytest.mark.parametrize(
    "make",
    [
        lambda f: s2sad.grad(f),
        lambda f: s2sad.value_and_grad(f),
        lambda f: s2sad.grad(f, jit=True),
        lambda f: s2sad.hessian(f),
    ],
)
def test_grad_of_loss_and_aux_is_refused_at_the_return_line(make):
    with pytest.raises(s2sad.NonScalarOutputError) as info:
        make(loss_and_aux)(np.ones(2))
    message = str(info.value)
    assert f"{HERE}:{loss_and_aux.__code__.co_firstlineno + 2}:" in message
    assert "has_aux" in message and "return loss, x * 2.0" in message


# ------------------------------------------------------------- class 2: the caller's own arrays


def sin_sum(x, y):
    return np.sum(np.sin(x + y))


def sum_pair(x, y):
    return x + y


def sin_pair(x, y):
    return np.sin(x + y)


def two_outputs(x, y):
    return x + y, x * 1.0


def identity(x):
    return x


def _assert_own(outputs, inputs):
    arrays = [o for o in outputs if isinstance(o, np.ndarray)]
    for i, a in enumerate(arrays):
        for b in arrays[i + 1 :] + [v for v in inputs if isinstance(v, np.ndarray)]:
            assert not np.may_share_memory(a, b)


@pytest.mark.parametrize("jit", [False, True])
def test_gradients_of_a_tuple_wrt_are_separate_arrays(jit):
    x, y = rand(3, seed=7), rand(3, seed=8)
    gx, gy = s2sad.grad(sin_sum, wrt=(0, 1), jit=jit)(x, y)
    _assert_own([gx, gy], [x, y])
    expected = np.cos(x + y)
    gx *= 0.5  # an optimizer's in-place step on one gradient leaves the other alone
    np.testing.assert_allclose(gy, expected)
    _, (gx, gy) = s2sad.value_and_grad(sin_sum, wrt=(0, 1), jit=jit)(x, y)
    _assert_own([gx, gy], [x, y])


@pytest.mark.parametrize("jit", [False, True])
def test_pullbacks_jvps_and_jacobians_return_their_own_arrays(jit):
    x, y = rand(3, seed=7), rand(3, seed=8)
    seed = np.ones(3)
    _, pullback = s2sad.vjp(sum_pair, wrt=(0, 1), jit=jit)(x, y)
    first, second = pullback(seed), pullback(seed)
    _assert_own(list(first) + list(second), [x, y, seed])
    _, pullback = s2sad.vjp(sin_pair, wrt=(0, 1), jit=jit)(x, y)
    first, second = pullback(seed), pullback(seed)
    _assert_own(list(first) + list(second), [x, y, seed])
    s1, s2 = np.ones(3), np.full(3, 2.0)
    _, pullback = s2sad.vjp(two_outputs, wrt=(0, 1), jit=jit)(x, y)
    first, second = pullback((s1, s2)), pullback((s1, s2))
    _assert_own(list(first) + list(second), [x, y, s1, s2])
    _, pullback = s2sad.vjp(identity, jit=jit)(x)
    _assert_own([pullback(seed), pullback(seed)], [x, seed])
    t1, t2 = np.ones(3), np.ones(3)
    _, dots = s2sad.jvp(two_outputs, wrt=(0, 1), jit=jit)(x, y, tangent=(t1, t2))
    _assert_own(list(dots), [x, y, t1, t2])
    _assert_own(list(s2sad.jacobian(sum_pair, wrt=(0, 1), jit=jit)(x, y)), [x, y])


def test_batched_jvp_rows_are_not_the_tangents_given():
    x, y = rand(3, seed=7), rand(3, seed=8)
    t1, t2 = np.ones((2, 3)), np.ones((2, 3))
    _, rows = s2sad.jvp(two_outputs, wrt=(0, 1), batched=True)(x, y, tangent=(t1, t2))
    _assert_own(list(rows), [x, y, t1, t2])
    _, rows = s2sad.jvp(identity, batched=True)(x, tangent=t1)
    _assert_own([rows], [x, t1])


# ----------------------------------------------------- class 7: the code the object actually runs


def scaled_star(k):
    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            return k * fn(*args, **kwargs)

        return wrapper

    return decorate


def scaled_plain(k):
    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(x):
            return k * fn(x)

        return wrapper

    return decorate


@scaled_star(10.0)
def square_star(x):
    return x**2


@scaled_plain(10.0)
def square_plain(x):
    return x**2


def calls_square_plain(x):
    return square_plain(x) + 1.0


def calls_square_star(x):
    return square_star(x) + 1.0


def test_a_decorated_function_is_differentiated_with_its_decorator():
    assert s2sad.grad(square_plain)(3.0) == 60.0
    assert s2sad.grad(calls_square_plain)(3.0) == 60.0
    assert s2sad.grad(square_star.__wrapped__)(3.0) == 6.0  # the way out the refusal names
    check_grad(square_plain, (3.0,))


@pytest.mark.parametrize("func", [square_star, calls_square_star])
def test_a_wrapper_taking_star_args_is_differentiated_not_skipped(func):
    """The wrapper runs (its *args and **kwargs are passed as trees): 10 * d(x**2)/dx, never
    the undecorated 2x."""
    assert s2sad.grad(func)(3.0) == 60.0
    check_grad(func, (3.0,))


def _abs_of_imaginary(x):
    return np.sum(np.abs(x * 1j))


def _abs_of_complex_sum(x):
    return np.sum(np.abs(x + 1j * x))


def _as_complex_array(x):
    return np.sum(np.abs(np.asarray(x, dtype=np.complex128)))


def _written_into_complex_array(x):
    y = np.zeros(3, dtype=complex)
    y[0] = x[0]
    return np.sum(np.abs(y))


def _complex_constant_only(x):
    w = np.exp(1j * np.arange(3.0)).real
    return np.sum(w * x)


@pytest.mark.parametrize("f", [_abs_of_imaginary, _abs_of_complex_sum, _as_complex_array])
def test_complex_values_on_the_differentiated_path_are_refused(f):
    """Complex intermediates were differentiated with real rules: abs(x * 1j) gave -sign(x), and
    abs(x + 1j x) gave 0, with only NumPy's ComplexWarning."""
    x = np.array([0.3, -0.7, 1.2])
    with pytest.raises(s2sad.UnsupportedSyntaxError, match="complex values"):
        s2sad.grad(f)(x)
    with pytest.raises(s2sad.UnsupportedSyntaxError, match="complex values"):
        s2sad.jvp(f)(x, tangent=np.ones(3))


def test_a_complex_array_written_from_real_values_is_an_error_not_half_a_derivative():
    x = np.array([0.3, -0.7, 1.2])
    with pytest.raises(s2sad.S2SADError, match="complex value reached the gradient"):
        s2sad.grad(_written_into_complex_array)(x)
    with pytest.raises(s2sad.S2SADError, match="complex value reached the tangent"):
        s2sad.jvp(_written_into_complex_array)(x, tangent=np.ones(3))


def test_complex_values_off_the_differentiated_path_are_fine():
    x = np.array([0.3, -0.7, 1.2])
    np.testing.assert_allclose(s2sad.grad(_complex_constant_only)(x), np.cos(np.arange(3.0)))


def _sqrt_of_scalar(x):
    return np.sqrt(x)


def _log_plus_arcsin(x):
    return np.log(x) + np.arcsin(x - 1.0)


@pytest.mark.parametrize("f", [_sqrt_of_scalar, _log_plus_arcsin])
def test_jitted_singular_points_give_ieee_values_as_python_mode(f):
    """Compiled code divided with Python's error model: sqrt at 0 raised ZeroDivisionError in
    jit=True where Python mode gives inf (README, Numerical behaviour)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = s2sad.grad(f)(0.0)
        assert np.isinf(expected)
        assert s2sad.grad(f, jit="strict")(0.0) == expected


# ----------------------------------------------------------------------------- assigned writes
# A call that writes into an argument is refused whether or not its result is assigned: the
# assigned form used to pass, the write unseen (`z = y.sort()` gave the gradient of the unsorted
# y). Each reads a differentiated y.

W5 = np.arange(5.0)


def sort_method_assigned(x):
    y = x * 1.0
    z = y.sort()  # noqa: F841
    return np.sum(y * W5)


def fill_assigned(x):
    y = x * 1.0
    z = y.fill(1.0)  # noqa: F841
    return np.sum(y * W5)


def copyto_assigned(x):
    y = x * 1.0
    z = np.copyto(y, x**2)  # noqa: F841
    return np.sum(y * W5)


def put_assigned(x):
    y = x * 1.0
    z = np.put(y, [0, 1], x[:2] ** 2)  # noqa: F841
    return np.sum(y * W5)


def out_assigned(x):
    y = x * 1.0
    _ = np.negative(y, out=y)
    return np.sum(y * W5)


def iadd_assigned(x):
    y = x * 1.0
    z = y.__iadd__(x)  # noqa: F841
    return np.sum(y * W5)


@pytest.mark.parametrize(
    "f",
    [
        sort_method_assigned,
        fill_assigned,
        copyto_assigned,
        put_assigned,
        out_assigned,
        iadd_assigned,
    ],
    ids=lambda f: f.__name__,
)
@pytest.mark.parametrize("transform", ["grad", "jacobian"])
def test_a_write_into_an_argument_is_refused_even_when_assigned(f, transform):
    x = np.array([0.3, -0.7, 1.1, 0.4, -0.2])
    with pytest.raises(s2sad.UnsupportedSyntaxError, match="writes into its arguments") as info:
        getattr(s2sad, transform)(f)(x)
    assert f"{Path(__file__).name}:" in str(info.value)


def _sorted_data(u, m):
    a = np.sin(u) * m
    m.sort()
    return np.sum(a * m + u)


def _filled_data(u, m):
    a = np.sin(u) * m
    m.fill(3.0)
    return np.sum(a * m + u)


def _copied_into_data(u, m):
    a = np.sin(u) * m
    np.copyto(m, np.full(m.shape, 5.0))
    return np.sum(a * m + u)


def _positional_out_into_data(u, m):
    a = np.sin(u) * m
    np.multiply(m, 3.0, m)
    return np.sum(a * m + u)


def _sorted_before_use(u, m):  # the write comes first: a new binding, followed
    m = np.sort(m)
    a = np.sin(u) * m
    return np.sum(a * m + u)


@pytest.mark.parametrize(
    "f", [_sorted_data, _filled_data, _copied_into_data, _positional_out_into_data]
)
def test_a_write_into_data_a_derivative_reads_is_refused(f):
    # the adjoint of `a = np.sin(u) * m` reads m: after the write it would read the new values
    u, m = np.linspace(0.1, 0.9, 5), np.linspace(2.0, 1.0, 5)
    with pytest.raises(s2sad.S2SADError, match=r"writes into `m` in place") as raised:
        s2sad.grad(f)(u, m.copy())
    assert "bind a new array instead" in str(raised.value)


def test_a_new_binding_of_data_is_followed():
    u, m = np.linspace(0.1, 0.9, 5), np.linspace(2.0, 1.0, 5)
    ms = np.sort(m)
    np.testing.assert_allclose(
        s2sad.grad(_sorted_before_use)(u, m), np.cos(u) * ms * ms + 1.0, rtol=1e-12
    )


# a name one branch of an `if` binds, read after it: Python raises UnboundLocalError where the
# branch did not run; jitted code read zero there, so both modes refuse it
def _bound_in_one_branch(x, c):
    if c > 0:
        y = x * 2.0
    return np.sum(y * x)


def _bound_in_a_branch_that_may_not_return(x, c):
    if c > 0:
        y = x * 2.0
    elif c < -1:
        return np.sum(x)
    return np.sum(y * x)


@pytest.mark.parametrize("f", [_bound_in_one_branch, _bound_in_a_branch_that_may_not_return])
@pytest.mark.parametrize("jit", [False, True])
def test_a_name_an_if_binds_on_some_paths_only_is_refused_where_read(f, jit):
    x = np.linspace(0.1, 0.9, 3)
    with pytest.raises(UnboundLocalError):
        f(x, 0.0)
    with pytest.raises(s2sad.UnsupportedSyntaxError, match=r"`y` is read here, but the `if` at"):
        s2sad.grad(f, jit=jit)(x, 1.0)


# a name only a loop's body binds, read after it: Python raises UnboundLocalError where the loop
# ran no iteration; jitted code read zero there, so both modes refuse it
def _bound_in_a_for_loop(x, c):
    for i in range(int(c)):
        y = x * i
    return np.sum(y * x)


def _bound_in_a_while_loop(x, c):
    while c > 0:
        y = x * c
        c = c - 1.0
    return np.sum(y * x)


@pytest.mark.parametrize(
    "f, loop, jit",
    [(_bound_in_a_for_loop, "for", False), (_bound_in_a_for_loop, "for", True)]
    + [(_bound_in_a_while_loop, "while", False)],
)
def test_a_name_only_a_loop_that_may_not_run_binds_is_refused_where_read(f, loop, jit):
    x = np.linspace(0.1, 0.9, 3)
    with pytest.raises(UnboundLocalError):
        f(x, 0.0)
    with pytest.raises(s2sad.UnsupportedSyntaxError) as raised:
        s2sad.grad(f, jit=jit)(x, 1.0)
    text = str(raised.value)
    assert f"`y` is read here, but only the body of the `{loop}` loop at line" in text
    assert "may run no iteration" in text and "bind `y` before that loop" in text


def _bound_in_a_loop_that_runs(x, c):  # range(2) runs: `y` and `i` are bound after it
    for i in range(2):
        y = x * c * i
    return np.sum(y * x) * i


def _bound_before_a_loop(x, c):
    y = x
    for i in range(int(c)):
        y = y * x
    return np.sum(y)


def _read_under_the_same_condition(x, c):  # taken to follow the same condition
    if c > 0:
        y = x * 2.0
    z = x
    if c > 0:
        z = z * y
    return np.sum(z)


def _read_under_the_same_condition_in_a_loop(x, c):
    if c > 0:
        y = x * 2.0
    z = x
    for _ in range(2):
        if c > 0:
            z = z * y
    return np.sum(z)


def _early_return(x, c):  # a branch that returns binds nothing the rest reads
    if c > 0:
        return np.sum(x)
    else:
        y = x * 3.0
    return np.sum(y * y)


def _read_in_a_conditional_expression(x, c):  # its branches follow its test, as an if's do
    if c > 0:
        y = x * 2.0
    return np.sum(y * x) if c > 0 else np.sum(x)


@pytest.mark.parametrize(
    "f, args",
    [
        (_read_under_the_same_condition, (1.0,)),
        (_read_under_the_same_condition, (-1.0,)),  # (y never bound, nor its adjoint's zero)
        (_read_under_the_same_condition_in_a_loop, (1.0,)),
        (_read_under_the_same_condition_in_a_loop, (-1.0,)),
        (_early_return, (-1.0,)),
        (_read_in_a_conditional_expression, (1.0,)),
        (_read_in_a_conditional_expression, (-1.0,)),
        (_bound_in_a_loop_that_runs, (1.5,)),
        (_bound_before_a_loop, (2.0,)),
    ],
)
def test_reads_every_path_to_which_binds_the_name_are_followed(f, args):
    check_grad(f, (np.linspace(0.1, 0.9, 3),) + args)


def test_a_value_read_under_the_same_condition_differentiates_jitted_on_both_paths():
    x, grad = np.linspace(0.1, 0.9, 3), s2sad.grad(_read_under_the_same_condition, jit=True)
    for c, want in ((1.0, 4.0 * x), (-1.0, np.ones(3))):
        np.testing.assert_allclose(grad(x, c), want, rtol=1e-12)
    assert "if cond:\n        dy = zeros_like(y)" in s2sad.source(grad)


def _bound_under_a_test_in_a_loop(x, c):  # y: unbound on the first trip where c[0] <= 0
    s = 0.0
    for i in range(3):
        if c[i] > 0:
            y = x * c[i]
        z = x
        if c[i] > 0:
            z = z * y
        s = s + np.sum(z)
    return s


def _rebound_after_a_loop_that_may_not_run(x, n, c):
    for i in range(n):
        y = x * i
    if c > 0:
        y = x * 3.0
    return np.sum(x * y) if c > 0 else np.sum(x)


@pytest.mark.parametrize(
    "f, args",
    [
        (_bound_under_a_test_in_a_loop, (np.array([1.0, -1.0, 1.0]),)),
        (_bound_under_a_test_in_a_loop, (np.array([-1.0, 1.0, -1.0]),)),  # (the tape's first y)
        (_rebound_after_a_loop_that_may_not_run, (2, -1.0)),
        (_rebound_after_a_loop_that_may_not_run, (0, 1.0)),  # (the loop's adjoint zero)
        (_rebound_after_a_loop_that_may_not_run, (0, -1.0)),  # (the merge's `else: y_1 = y`)
    ],
)
def test_a_name_unbound_on_some_path_read_under_the_same_test(f, args):
    check_grad(f, (np.linspace(0.1, 0.9, 3),) + args)


def _bound_under_two_tests_in_a_while_loop(x, c):
    s, k = 0.0, 0
    while k < 3:
        if c[k] > 0:
            if c[k] < 5.0:
                y = np.sin(x) * c[k]
        if c[k] > 5.0:
            break
        z = x
        if c[k] > 0:
            if c[k] < 5.0:
                z = z * y
        s = s + np.sum(z)
        k = k + 1
    return s


def _rebound_after_a_loop_with_a_break(x, n, c):
    for i in range(n):
        y = x * i
        if i > 2:
            break
    if c > 0:
        y = np.cos(x)
    return np.sum(x * y) if c > 0 else np.sum(x)


@pytest.mark.parametrize(
    "f, args",
    [
        (_bound_under_two_tests_in_a_while_loop, (np.array([-1.0, 2.0, -1.0]),)),
        (_bound_under_two_tests_in_a_while_loop, (np.array([-1.0, 6.0, 2.0]),)),
        (_rebound_after_a_loop_with_a_break, (0, 1.0)),
        (_rebound_after_a_loop_with_a_break, (0, -1.0)),
    ],
)
def test_a_name_unbound_on_some_path_in_nested_tests_and_loops(f, args):
    check_grad(f, (np.linspace(0.1, 0.9, 3),) + args)


@pytest.mark.parametrize(
    "f, args, diagonal",
    [
        (_bound_under_a_test_in_a_loop, (np.array([-1.0, 1.0, -1.0]),), 2.0),
        (_bound_under_a_test_in_a_loop, (np.array([1.0, -1.0, 1.0]),), 4.0),
        (_rebound_after_a_loop_that_may_not_run, (0, 1.0), 6.0),
        (_rebound_after_a_loop_that_may_not_run, (0, -1.0), 0.0),
    ],
)
def test_hessian_of_a_name_unbound_on_some_path(f, args, diagonal):
    # (the gradient code holds `y = unbound("y")`: forward mode over it reads it as a constant)
    hessian = s2sad.hessian(f)(np.linspace(0.1, 0.9, 3), *args)
    np.testing.assert_allclose(hessian, diagonal * np.eye(3), atol=1e-12)


def test_a_name_unbound_on_some_path_is_bound_first_in_python_mode_only():
    # (Numba reads a value no line computed there, which nothing then reads: jitted gradients
    # of these functions equal Python mode's, checked by hand, not here: a compile each)
    assert 'y = unbound("y")' in s2sad.source(s2sad.grad(_bound_under_a_test_in_a_loop))
    assert "unbound" not in s2sad.source(s2sad.grad(_bound_under_a_test_in_a_loop, jit=True))


def _read_under_another_test(x, c):  # taken to follow the same condition: it does not
    if c[0] > 0:
        y = x * 2.0
    z = x
    if c[1] > 0:
        z = z * y
    return np.sum(z)


def test_a_read_where_no_path_bound_the_name_raises_as_python_does():
    x, c = np.linspace(0.1, 0.9, 3), np.array([-1.0, 1.0])
    with pytest.raises(UnboundLocalError) as python:
        _read_under_another_test(x, c)
    with pytest.raises(UnboundLocalError) as raised:  # (`unbound("y")` at a use)
        s2sad.grad(_read_under_another_test)(x, c)
    assert str(raised.value) == str(python.value)
    assert "(`z = z * y`)" in raised.value.__notes__[0]


@pytest.mark.parametrize("c, diagonal", [(1.0, 4.0), (-1.0, 0.0)])
def test_hessian_of_a_value_read_under_the_same_condition(c, diagonal):
    # (its gradient code binds `dy` under `if cond:`, then again under `if cond2:`: the
    # merge's copy `dy_1 = dy` is made under `if cond:` too)
    hessian = s2sad.hessian(_read_under_the_same_condition)(np.linspace(0.1, 0.9, 3), c)
    np.testing.assert_allclose(hessian, diagonal * np.eye(3), atol=1e-12)


def _rebound_under_the_same_condition(x, c):
    if c > 0:
        y = x * 2.0
    if c > 0:
        y = y * x  # (merged with the old y where c <= 0: that copy runs under `if c > 0`)
    return np.sum(x * y) if c > 0 else np.sum(x)


@pytest.mark.parametrize("c", [1.0, -1.0])
def test_a_value_rebound_under_the_same_condition_differentiates(c):
    check_grad(_rebound_under_the_same_condition, (np.linspace(0.1, 0.9, 3), c))


def _rebound_from_a_previous_iteration(x):
    s = 0.0
    for i in range(3):
        if i == 0:
            y = x * 1.0
        y = y * x  # (the second trip reads the first trip's last y, this line's)
        s = s + np.sum(y)
    return s


def _rebound_under_another_test_in_a_loop(x):
    s = 0.0
    for i in range(3):
        if i == 0:
            y = x * 1.0
        if i == 1:
            y = y * x
        s = s + np.sum(y)
    return s


def _updated_from_a_previous_iteration(x):
    s, i = 0.0, 0
    while i < 3:
        if i == 0:
            y = x * 1.0
        y += x
        s, i = s + np.sum(y), i + 1
    return s


@pytest.mark.parametrize(
    "f, line",
    [
        (_rebound_from_a_previous_iteration, 5),
        (_rebound_under_another_test_in_a_loop, 6),
        (_updated_from_a_previous_iteration, 5),
    ],
)
def test_a_value_carried_from_a_previous_iteration_and_bound_twice_is_refused(f, line):
    # (both modes computed the sum and gradient of y as if each trip read the first trip's y)
    with pytest.raises(s2sad.UnsupportedSyntaxError, match="bind `y` before the loop") as info:
        s2sad.grad(f)(np.linspace(0.1, 0.9, 3))
    assert "previous iteration's value" in str(info.value)
    assert info.value.line == f.__code__.co_firstlineno + line  # (`y = y * x`)


def _rebound_under_the_same_test_in_a_loop(x, c):  # (this trip's y: kept)
    s = 0.0
    for i in range(3):
        if c[i] > 0:
            y = x * c[i]
        if c[i] > 0:
            y = y * x
            s = s + np.sum(y)
    return s


def test_a_value_rebound_under_the_same_test_in_a_loop_differentiates():
    check_grad(_rebound_under_the_same_test_in_a_loop, (np.linspace(0.1, 0.9, 3), [1.0, -1, 2]))
