"""jit="strict" refusals in the user's terms: a name Numba types two ways says on which paths
(a loop's entry and its step, in that order, or an `if`'s arms) at the user's lines, and a
name of the generated code is told as the user's variable, its derivative or the operation."""

import inspect
import re

import numpy as np
import pytest

import s2sad
from s2sad.jit import JitError
from s2sad.numba_failures import in_user_terms, numba_reason
from s2sad.numba_types import two_types

from conftest import check_grad

X32, W64 = np.linspace(0.1, 0.9, 4).astype(np.float32), np.linspace(1.0, 2.0, 4)


def narrowed(x, n):
    y = x * 1.0
    for _ in range(n):
        y = (y * 0.5).astype(np.float32)
    return np.sum(y**2)


def stepped_while(y0, w, h, n):
    y = y0
    i = 0
    while i < n:
        y = y + h * w * y
        i += 1
    return np.sum(y**2)


def two_arms(x, w, c):
    if c > 0:
        y = x
    else:
        y = x * w
    return np.sum(y**2)


def one_arm(x, w, c):
    y = x
    if c > 0:
        y = x * w
    return np.sum(y**2)


def zero_d_state(x, n):
    s = np.zeros(())
    for i in range(n):
        s = s + x[i] * 2.0
    return s


def _refusal(f, *args):
    with pytest.raises(JitError) as err:
        s2sad.grad(f, jit="strict")(*args)
    return str(err.value)


def _at(f, text):
    """`line N (`code`)` for the line of `f` holding `text`, as the messages quote it."""
    lines, first = inspect.getsourcelines(f)
    i = next(i for i, line in enumerate(lines) if text in line)
    return f"line {first + i} (`{lines[i].strip()}`)"


def test_a_loop_that_narrows_float64_to_float32_says_so_in_that_order():
    text = _refusal(narrowed, np.ones(4), 3)
    assert f"'y' is float64 as the loop at test_jit_messages.py {_at(narrowed, 'for _ in')}" in text
    assert (
        "range(n):`) starts and float32 after a step at " + _at(narrowed, "y = (y * 0.5)") in text
    )
    assert "before the loop" in text  # the hint: where to give it the loop's dtype


def test_a_while_loop_that_widens_names_its_header_and_step():
    text = _refusal(stepped_while, X32, W64, 0.1, 3)
    assert (
        f"'y' is float32 as the loop at test_jit_messages.py {_at(stepped_while, 'while i')}"
        in text
    )
    assert "float64 after a step at " + _at(stepped_while, "y = y + h * w * y") in text


@pytest.mark.parametrize(
    "f, lines",
    [(two_arms, ("y = x", "y = x * w")), (one_arm, ("y = x * w", "y = x"))],
)
def test_an_if_binding_two_dtypes_names_the_if_and_its_bindings_not_a_loop(f, lines):
    text = _refusal(f, X32, W64, 1.0)
    assert "loop" not in text
    assert "'y' is float32 on one path and float64 on another through the `if` at" in text
    assert _at(f, "if c > 0:") in text
    assert "bound by " + " and by ".join(_at(f, line) for line in lines) in text
    assert "hint: bind one dtype on every path" in text


def test_a_zero_d_array_a_loop_carries_compiles_as_a_number():
    x = np.arange(3.0)
    got = s2sad.grad(zero_d_state, jit="strict")(x, 3)  # (`s = as_number(s)` before the loop)
    np.testing.assert_allclose(got, s2sad.grad(zero_d_state)(x, 3), rtol=1e-15)


def test_a_zero_d_array_becoming_a_number_in_a_loop_is_told_in_words(tmp_path):
    # what Numba says where a 0-d array still reaches a loop (code compiled without ranks)
    source = s2sad.source(s2sad.grad(zero_d_state, jit=True), np.arange(3.0), 3)
    module = tmp_path / "generated.py"
    module.write_text(source)
    header = next(i for i, t in enumerate(source.splitlines()) if t.strip().startswith("for i "))
    said = _NumbaSays(
        "Failed in nopython mode pipeline (step: nopython frontend)\n"
        "Cannot unify array(float64, 0d, C) and float64 for 's.2', "
        f"defined at {module} ({header + 1})"
    )
    text = " ".join(two_types(said, source))
    assert "'s' is a 0-d float64 array as the loop at" in text
    assert "and a float64 number after a step at " + _at(zero_d_state, "s = s + x[i]") in text
    assert "`s = 0.0` for a number" in text


def rank_changing(h, y, w, n):
    # h: a number before the loop, an array after a step
    for t in range(n):
        h = np.tanh(y * w)
        y = y + 0.1 * h
    return np.sum(y) + np.sum(h)


def test_a_value_whose_rank_changes_in_a_loop_gets_python_numbers_and_says_why(tmp_path):
    # jit=True raised "cannot reshape array of size 2 into shape ()": in the code Numba declines
    # (run in Python), h's zero at the loop's entry was shaped like its adjoint after a step.
    # That code is run here as the fallback runs it, and Numba's words are given (no compile)
    args = (0.0, np.ones(2), np.array([0.5, -0.3]), 3)
    want = check_grad(rank_changing, args, wrt=(0, 1, 2))
    g = s2sad.grad(rank_changing, wrt=(0, 1, 2), jit=True)
    compiled, values = g.prepared(g._bind(args, {}))
    for got, w in zip(compiled.function(*args, *values)[1], want):
        np.testing.assert_allclose(got, w, rtol=1e-14)
        assert np.shape(got) == np.shape(w)
    module = tmp_path / "generated.py"
    module.write_text(compiled.source)
    header = next(
        i for i, t in enumerate(compiled.source.splitlines()) if t.strip().startswith("for t in")
    )
    said = _NumbaSays(
        "Failed in nopython mode pipeline (step: nopython frontend)\n"
        f"Cannot unify float64 and array(float64, 1d, C) for 'h.3', defined at {module} "
        f"({header + 1})"
    )
    text = " ".join(two_types(said, compiled.source))
    assert "'h' is a float64 number as the loop at" in text
    assert (
        "an array of rank 1 (float64) after a step at " + _at(rank_changing, "h = np.tanh") in text
    )
    assert "Numba cannot type a value whose rank changes" in text
    assert "bind it before the loop to a value of the rank the loop gives it" in text


def _shape_of_names(x, c):
    s = np.sin(x) + np.cos(x) * 2.0
    if c > 0:
        s = s * x
    return np.sum(s**2)


def test_generated_names_are_told_as_the_users_variables_or_operations():
    source = s2sad.source(s2sad.grad(_shape_of_names, jit=True), np.ones(3), 1.0)
    line3 = _at(_shape_of_names, "s = np.sin(x) + np.cos(x) * 2.0")
    told = {
        "s_1_2": "'s'",  # the merge copy of the `if`
        "s_1_2.3": "'s'",  # and Numba's version of it
        "ds_1_2": "the derivative of 's'",
        "dx_out2": "the derivative of 'x'",  # a fused loop's output
        "s_mul": f"the `*` computing 's' at {line3}",
        "ds_mul": f"the derivative of the `*` computing 's' at {line3}",
        "_shape_of_names_pow": "the `**` computing the value _shape_of_names returns at line",
    }
    for name, words in told.items():
        assert re.search(rf"\b{name.split('.')[0]}\b", source)  # a name the code has
        assert in_user_terms(name, source).startswith(words), name


class _NumbaSays(Exception):
    pass


def test_numbas_message_names_no_generated_variable():
    source = s2sad.source(s2sad.grad(_shape_of_names, jit=True), np.ones(3), 1.0)
    said = _NumbaSays(
        "Failed in nopython mode pipeline (step: nopython frontend)\n"
        "Cannot unify array(float64, 1d, C) and UniTuple(float64, 2) for 'ds_mul.2'"
    )
    reason = numba_reason(said, source)
    assert "ds_mul" not in reason
    assert "for the derivative of the `*` computing 's' at line" in reason


@pytest.mark.parametrize(
    "f",
    [
        lambda x: np.sum(np.sum(x, axis=3)),  # s2sad's sum_over refuses it as it runs
        lambda x: np.sum(np.max(x, axis=-3, keepdims=True)),
        lambda x: np.sum(x.sum(axis=2)),  # Numba refuses it as it types
    ],
    ids=["sum", "max-keepdims", "method"],
)
def test_a_bad_axis_is_numpys_axis_error_under_jit_as_in_python_mode(f):
    x = np.ones((2, 3))
    with pytest.raises(np.exceptions.AxisError) as python:
        s2sad.grad(f)(x)
    with pytest.raises(np.exceptions.AxisError) as strict:
        s2sad.grad(f, jit="strict")(x)
    # (NumPy's message; where the compiled code raised it as it ran, with the user's line)
    assert str(strict.value).partition("\n  at ")[0] == str(python.value)


def test_a_generated_line_numba_quotes_is_told_as_the_users_line():
    source = s2sad.source(s2sad.grad(_shape_of_names, jit=True), np.ones(3), 1.0)
    generated = next(t.strip() for t in source.splitlines() if t.strip().startswith("ds_mul ="))
    said = _NumbaSays(
        "No implementation of function Function(<function unbroadcast>) found for signature:\n"
        f' >>> unbroadcast(array(float64, 1d, C), list)\nFile "gen.py", line 9:\n    {generated}\n'
    )
    reason = numba_reason(said, source)
    number, _, code = _at(_shape_of_names, "s = np.sin(x) + np.cos(x) * 2.0").partition(" (")
    assert reason.endswith(f" (test_jit_messages.py {number}: {code[:-1]})")
    assert "ds_mul" not in reason


def test_forward_modes_tangent_names_are_told_as_tangents():
    source = s2sad.source(s2sad.jvp(_shape_of_names, jit=True), np.ones(3), 1.0)
    assert re.search(r"\bs_dot\b", source)
    assert in_user_terms("s_dot", source) == "the tangent of 's'"  # not a `dot(...)` of s


def test_an_array_typed_float32_then_float64_says_where_once_and_why(tmp_path):
    source = s2sad.source(s2sad.grad(_shape_of_names, jit=True), np.ones(3), 1.0)
    module = tmp_path / "generated.py"
    module.write_text(source)
    at = next(i for i, t in enumerate(source.splitlines()) if t.strip().startswith("ds_mul ="))
    said = _NumbaSays(
        "Failed in nopython mode pipeline (step: nopython frontend)\n"
        "Cannot unify array(float32, 1d, C) and array(float64, 1d, C) for 'ds_mul', "
        f"defined at {module} ({at + 1})"
    )
    line3 = _at(_shape_of_names, "s = np.sin(x) + np.cos(x) * 2.0")
    reason = numba_reason(said, source)
    assert reason.count(line3) == 1 and "ds_mul" not in reason
    why, hint = two_types(said, source)
    assert why.count(line3) == 1 and "typed float32, then float64" in why
    assert (
        "Python float" in why
        and "astype(x.dtype)" in hint
        and "operations Numba supports" not in hint
    )


def mismatched(x, y):
    a = np.sin(x)
    b = a + y
    return np.sum(b)


@pytest.mark.parametrize("jit", [True, "strict"])
@pytest.mark.parametrize("mode", ["grad", "jvp"])
def test_a_shape_mismatch_at_run_time_names_the_users_line(jit, mode):
    """Arrays that do not broadcast: Numba raises at line 1 of the generated file; the error
    names the user's file and line instead, with NumPy's message, as Python mode's type."""
    x, y = np.ones(3), np.ones(4)
    line = inspect.getsourcelines(mismatched)[1] + 2
    transformed = getattr(s2sad, mode)(mismatched, jit=jit)
    kwargs = {"tangent": x} if mode == "jvp" else {}
    with pytest.raises(ValueError) as python:
        getattr(s2sad, mode)(mismatched)(x, y, **kwargs)
    with pytest.raises(ValueError) as raised:
        transformed(x, y, **kwargs)
    text = str(raised.value)
    assert f"{__file__} line {line} (`b = a + y`)" in text, text
    assert str(python.value) in text and "line 1," not in text


def std_over_axes(x):
    return np.sum(x.std(axis=(0, 1)))


def integer_mean(x, k):
    return np.sum(x) * np.mean(k, axis=0)[0]


def listed_samples(x):
    return np.trapezoid([1.0, 2.0, 4.0], x)


@pytest.mark.parametrize(
    "f, args, operation, words, code",
    [
        (std_over_axes, (np.ones((3, 3, 2)),), "np.std", "(a 3-d float64 array, (0, 1),", "x.std"),
        (
            integer_mean,
            (np.ones(3), np.arange(6).reshape(3, 2)),
            "np.mean",
            "(a 2-d int64 array, 0, False): cast the integer array first",
            "np.mean(k, axis=0)[0]",
        ),
        (
            listed_samples,
            (np.linspace(0.0, 1.0, 3),),
            "the derivative of np.trapezoid",
            "a list of float64",
            "np.trapezoid([1.0, 2.0, 4.0], x)",
        ),
    ],
    ids=["tuple-axes", "int-mean", "list"],
)
def test_a_helper_numba_lacks_is_told_as_the_users_operation(f, args, operation, words, code):
    """Numba finding no form of s2sad's helper for the arguments (a tuple of axes, an integer
    array's mean, a list): the message names the user's operation and line, and the arguments
    in words, never the helper (`std_over`, `mean_over`, `trapezoid_vjp_x`)."""
    s2sad.grad(f)(*args)  # (Python mode differentiates it)
    with pytest.raises(JitError) as raised:
        s2sad.grad(f, jit="strict")(*args)
    text = str(raised.value)
    assert f"no compiled form of {operation} for these arguments" in text, text
    assert words in text and code in text and f"line {inspect.getsourcelines(f)[1] + 1}" in text
    assert not re.search(r"_over\b|_vjp|0x[0-9a-f]+", text), text


def test_numbas_temporaries_are_not_shown():
    source = s2sad.source(s2sad.grad(_shape_of_names, jit=True), np.ones(3), 1.0)
    said = _NumbaSays(
        "Failed in nopython mode pipeline (step: nopython frontend)\n"
        "Cannot unify array(float32, 1d, C) and array(float64, 1d, C) for '$430call.19'"
    )
    reason = numba_reason(said, source)
    assert "$" not in reason and "430call" not in reason
    assert "for a value computed on that line" in reason


def test_numbas_performance_hints_on_generated_code_are_not_shown(tmp_path):
    """NumbaPerformanceWarning at a line of a generated module in s2sad's cache (`'@' is faster
    on contiguous arrays`, raised at the cache file's line: the user never wrote it) is not
    shown, even inside a block that shows every warning once the filter is in; one at the
    user's own file is; and the filter goes back in after a `catch_warnings` block dropped it."""
    import warnings

    from numba.core.errors import NumbaPerformanceWarning

    from s2sad.diskcache import quiet_performance_hints

    for _ in range(2):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            quiet_performance_hints(tmp_path)
            for where in (tmp_path / "s2sad_checked_grad_f_0123.py", tmp_path / "mine.py"):
                warnings.warn_explicit("'@' is faster", NumbaPerformanceWarning, str(where), 3)
        assert [w.filename for w in seen] == [str(tmp_path / "mine.py")]


def test_a_helper_without_a_numba_form_in_an_inlined_function_names_its_line():
    """The derivative of an inlined function's line (`# attention, line 13: ...` above it) calls
    einsum_vjp: the message names that line of attention, not the caller's line before it."""
    from s2sad.generated_lines import user_line
    from s2sad.numba_failures import no_numba_form

    source = (
        'def grad_loss(x, w):\n    """Gradient of loss (attn.py:23) with respect to w."""\n'
        "    # line 25: return np.mean(v ** 2)\n    dv = 2 * v\n"
        '    # attention, line 13: v = np.einsum("btd,de->bte", x, w)\n'
        '    dw = einsum_vjp(dv, "btd,de->bte", (x, w), 1)\n'
    )
    said = no_numba_form(NameError("name 'einsum_vjp' is not defined"), source)
    assert said == (
        "s2sad's helper einsum_vjp, which the derivative of attn.py line 13 of attention "
        '(`v = np.einsum("btd,de->bte", x, w)`) calls, has no Numba form'
    )
    assert user_line(source.splitlines(), 5) == (
        'line 13 of attention (`v = np.einsum("btd,de->bte", x, w)`)'
    )


class Spring:
    def __init__(self, k):
        self.k = k

    def pot(self, x):
        return 0.5 * self.k * np.sum(x * x)


SPRING = Spring(3.0)


def with_a_global_spring(x):
    return SPRING.pot(x) + np.sum(x)


def test_a_global_object_numba_cannot_type_is_named_with_its_line():
    """A global of the user's class reaches the generated function as a parameter of its own:
    Numba's `argument 1: Cannot determine Numba type` is told as the global and the user's
    line reading it (the function has no argument 1)."""
    with pytest.raises(JitError) as caught:
        s2sad.grad(with_a_global_spring, jit="strict")(np.ones(3))
    line = with_a_global_spring.__code__.co_firstlineno + 1
    said = str(caught.value)
    assert f"the global `SPRING`, read at line {line} (`return SPRING.pot(x)" in said, said
    assert "argument 1" not in said and "Spring" in said
