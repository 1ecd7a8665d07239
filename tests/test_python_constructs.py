"""Python as people write it inside a differentiated function (issue 15): `enumerate(zip(...))`,
dict literals, `raise`/`assert`, the walrus, `with np.errstate(...)`, `print`, `try`, functions
passed as arguments, tuples of subscripts as targets, `return` inside a loop, a helper's tuple
result indexed, recursion of a fixed depth. Each is checked against central differences in
reverse mode (vjp), forward mode (jvp) and the batched Jacobian; the jitted forms are in
tests/test_jit_corpus.py's corpus. What s2sad refuses is refused at the user's line."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import s2sad
from conftest import check_jvp, check_vjp
from test_jacobian_batched import check, fd_jacobian

X = np.array([0.3, -0.5, 0.7, 0.9])
W = np.array([1.1, -0.4, 0.2, 0.6])


def code(text: str) -> str:
    """Generated source without its comments."""
    return "\n".join(line.split("#")[0] for line in text.splitlines())


def all_modes(f, args, wrt=0):
    """vjp and jvp against central differences, and the batched Jacobian in both modes."""
    check_vjp(f, args, wrt)
    check_jvp(f, args, wrt)
    check(f, *args, wrt=wrt)


# ----------------------------------------------------------------------------- enumerate, zip


def weighted(x, w):
    s = 0.0
    for i, (a, b) in enumerate(zip(x, w)):
        s = s + i * a * np.sin(b)
    return s


def counted_from_one(x, w):
    s = 0.0
    for k, (a, b) in enumerate(zip(x, w), start=1):
        s = s + a * b / k
    for k, a in enumerate(x, 2):
        s = s + k * a * a
    return s


def zipped_rows(A, w):
    out = np.zeros(A.shape[1])
    for row, (c, d) in zip(A, zip(w, w[::-1])):
        out = out + row * c * d
    return out


@pytest.mark.parametrize("f", [weighted, counted_from_one])
def test_enumerate_of_zip(f):
    all_modes(f, (X, W), (0, 1))


def test_enumerate_of_zip_values():
    expected = sum(i * a * np.sin(b) for i, (a, b) in enumerate(zip(X, W)))
    assert s2sad.grad(weighted)(X, W).shape == X.shape
    np.testing.assert_allclose(weighted(X, W), expected)
    np.testing.assert_allclose(s2sad.grad(weighted)(X, W), np.arange(4) * np.sin(W))


def test_zip_of_a_zip_and_rows():
    A = np.arange(12.0).reshape(4, 3) / 10
    all_modes(zipped_rows, (A, W), (0, 1))


@settings(max_examples=10, deadline=None)
@given(rows=st.integers(1, 5), cols=st.integers(1, 4), length=st.integers(1, 6))
def test_zip_stops_at_the_shorter_sequence(rows, cols, length):
    rng = np.random.default_rng(rows * 100 + cols * 10 + length)
    A, w = rng.normal(size=(rows, cols)), rng.normal(size=length)
    check_vjp(zipped_rows, (A, w), (0, 1))
    check_jvp(weighted, (A[:, 0], w), (0, 1))


def test_enumerate_of_zip_reads_well():
    text = s2sad.source(s2sad.grad(weighted), X, W)
    assert "for i in range(min(len(x), len(w))):" in text
    assert "a = x[i]" in text and "b = w[i]" in text


# ----------------------------------------------------------------------------- tuple targets


def cell(a, b):
    return a * b, a + np.sin(b)


def tuple_of_items(x):
    s = np.zeros(4)
    s[0], s[1] = cell(x[0], x[1])
    s[2], s[3] = x[2], x[0] * x[3]
    return np.sum(s * s)


def swaps_in_a_loop(x):
    s = np.zeros((3, 2))
    for i in range(3):
        s[i], s[(i + 1) % 3] = s[(i + 1) % 3] + x[i], np.sin(x[i]) * s[i]
    t = np.zeros(2)
    t[0], u = x[1:3]
    t[1], t[0] = t[0] * u, t[1]
    return np.sum(s * s) + np.sum(t) * u


@pytest.mark.parametrize("f", [tuple_of_items, swaps_in_a_loop])
def test_tuple_of_subscripts_as_a_target(f):
    all_modes(f, (X,))


def swaps_elements(x):
    s = x * 2
    s[0], s[1] = s[1], s[0]  # numbers: a swap
    return np.sum(s * np.arange(4.0))


def swaps_rows(x):
    s = np.outer(x[:2], x)
    s[0], s[1] = s[1], s[0]  # rows: views, the second read after the first is written
    return np.sum(s)


def test_a_swap_of_elements_and_the_refusal_of_a_swap_of_rows():
    all_modes(swaps_elements, (X,))
    np.testing.assert_allclose(s2sad.grad(swaps_elements)(X), [2, 0, 4, 6])
    with pytest.raises(s2sad.UnsupportedSyntaxError, match="`s\\[0\\]` may be a view of `s`"):
        s2sad.grad(swaps_rows)(X)


# ----------------------------------------------------------------------------- helper()[k]


def second_of_cell(x):
    return cell(x, x * 2)[1] * 3 + cell(x, x)[-2]


def test_indexing_a_helpers_tuple_result():
    all_modes(second_of_cell, (X,))
    text = s2sad.source(s2sad.vjp(second_of_cell), X)
    assert "(cell_result" not in text  # no tuple is built to be indexed


def indexed_by_a_variable(x, k):
    return cell(x, x)[k]


def test_a_helpers_tuple_indexed_by_a_variable_is_refused_at_its_line():
    with pytest.raises(s2sad.UnsupportedSyntaxError, match="only by a constant integer") as info:
        s2sad.vjp(indexed_by_a_variable)(X, 1)
    assert info.value.line == indexed_by_a_variable.__code__.co_firstlineno + 1


# ----------------------------------------------------------------------------- functions passed


def dynamics(y):
    return -0.5 * y + np.sin(y)


def rk4(f, y, h):
    k1 = f(y)
    k2 = f(y + h / 2 * k1)
    k3 = f(y + h / 2 * k2)
    k4 = f(y + h * k3)
    return y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)


def integrate(y0, h):
    y = y0
    for _ in range(3):
        y = rk4(dynamics, y, h)
    return y


def make_field(a):
    def field(y):
        return a * np.cos(y) * y

    return field


FIELD = make_field(np.array([1.0, 2.0, 0.5, -1.0]))


def through(f, y, h):
    return rk4(f, y, h)  # passed on


def apply(f, x):
    return f(x) * 2


def integrate_closure(y0):
    return through(FIELD, y0, 0.1) + apply(np.sin, y0) + apply(dynamics, y0)


def test_a_module_function_passed_as_an_argument():
    all_modes(integrate, (X, 0.1), (0, 1))


def test_a_closure_from_a_factory_and_a_numpy_function_passed_as_arguments():
    all_modes(integrate_closure, (X,))


def test_a_function_passed_reads_well_and_follows_rebinding():
    text = s2sad.source(s2sad.vjp(integrate), X, 0.1)
    assert "f(" not in code(text) and "# dynamics, line" in text  # inlined, as its own lines
    text = s2sad.source(s2sad.vjp(integrate_closure), X)
    assert "np.sin(" in code(text) and "# field, line" in text
    global FIELD
    saved = FIELD
    try:
        g_before = s2sad.grad(lambda_free_total)(X)
        FIELD = make_field(np.array([2.0, 4.0, 1.0, -2.0]))  # another closure of the factory
        g_after = s2sad.grad(lambda_free_total)(X)
    finally:
        FIELD = saved
    assert not np.allclose(g_before, g_after)
    check_vjp(lambda_free_total, (X,))


def lambda_free_total(y0):
    return np.sum(through(FIELD, y0, 0.1))


def takes_a_function(f, y0):
    return np.sum(rk4(f, y0, 0.1))


def passes_local_functions(y0, k):
    c = k * 2

    def field(y):
        return -c * y + np.sin(y)

    y = rk4(lambda y: -k * y, y0, 0.1)
    c = c + 1.0  # the closure reads c when it is called
    return rk4(field, y, 0.1)


def test_a_lambda_and_a_nested_def_passed_as_arguments():
    all_modes(passes_local_functions, (X, 0.7), (0, 1))
    text = s2sad.source(s2sad.vjp(passes_local_functions), X, 0.7)
    line = passes_local_functions.__code__.co_firstlineno + 6
    assert f"# line {line}: -k * y" in text  # the lambda's own line, in its file


def test_a_function_the_transform_cannot_see_is_refused_at_its_line():
    """A function passed to the differentiated function is inlined (tests/test_trees_callables
    has more); a functools.partial passed is not read, and refused where it is called."""
    check_vjp(lambda y0: takes_a_function(dynamics, y0), (X,))
    np.testing.assert_allclose(
        s2sad.grad(takes_a_function, wrt=1)(dynamics, X),
        s2sad.grad(lambda y0: takes_a_function(dynamics, y0))(X),
        rtol=1e-14,
    )
    with pytest.raises(s2sad.UnsupportedSyntaxError, match="cannot tell which function `f`"):
        s2sad.grad(takes_a_function, wrt=1)(functools.partial(dynamics), X)


# ----------------------------------------------------------------------------- dicts


def dict_of_parts(x, y):
    d = {"a": x * 2, "b": y}
    d["c"] = d["a"] * d["b"]
    d["a"] += np.sin(y)
    return np.sum(d["a"] + d["b"] + d["c"])


def dict_in_a_loop(x):
    acc = {"sum": 0.0, 1: 1.0}
    for v in x:
        acc["sum"] = acc["sum"] + v * acc[1]
        acc[1] = acc[1] * 0.5
    return acc["sum"]


@pytest.mark.parametrize("f, args", [(dict_of_parts, (X, W)), (dict_in_a_loop, (X,))])
def test_dict_literals_read_by_constant_keys(f, args):
    all_modes(f, args, (0, 1) if len(args) == 2 else 0)


def test_a_dict_reads_as_one_local_per_key():
    text = s2sad.source(s2sad.vjp(dict_of_parts), X, W)
    assert "d_a = x * 2" in text and "d_b = y" in text and "{" not in code(text)


def dict_missing_key(x):
    d = {"a": x}
    return np.sum(d["b"])


def test_a_key_the_dict_never_has_is_refused_at_its_line():
    with pytest.raises(s2sad.UnsupportedSyntaxError, match="never has the key 'b'") as info:
        s2sad.grad(dict_missing_key)(X)
    assert info.value.line == dict_missing_key.__code__.co_firstlineno + 2


# ----------------------------------------------------------------------------- input checks


def checked(x, w):
    if x.ndim != 1:
        raise ValueError(f"x must be 1-d, got {x.ndim} dimensions")
    assert x.shape == w.shape, "x and w differ in shape"
    if (n := x.shape[0]) < 2:
        raise ValueError("need two points")
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.log(np.abs(x)) * w / n
    try:
        s = np.sum(r * r)
    except FloatingPointError:
        s = 0.0
    else:
        s = s + 1.0
    finally:
        print(f"loss {s:.3f} over {n} points")
    return s


def test_raise_assert_walrus_errstate_try_and_print(capsys):
    all_modes(checked, (X, W), (0, 1))
    assert "over 4 points" in capsys.readouterr().out  # print kept in the primal
    with pytest.raises(ValueError, match="need two points"):
        s2sad.grad(checked)(X[:1], W[:1])
    with pytest.raises(AssertionError, match="differ in shape"):
        s2sad.jvp(checked)(X, W[:3], tangent=X)


def test_input_checks_read_well():
    text = s2sad.source(s2sad.grad(checked), X, W)
    assert 'raise ValueError("need two points")' in text
    assert "n = x.shape[0]" in text and "FloatingPointError" not in text
    assert "errstate" not in code(text)


def walrus_read_before(x):
    return np.sum(x * (x := x * 2))


def loud(x):
    with np.errstate(all="raise"):
        y = np.log(x)
    return np.sum(y)


def other_context(x):
    with open("f") as handle:
        y = x * len(handle.read())
    return np.sum(y)


@pytest.mark.parametrize(
    "f, message",
    [
        (walrus_read_before, "walrus whose name its statement reads before it"),
        (loud, "np.errstate only for settings"),
        (other_context, "`with` blocks other than"),
    ],
)
def test_what_cannot_be_kept_is_refused_at_its_line(f, message):
    with pytest.raises(s2sad.UnsupportedSyntaxError, match=message) as info:
        s2sad.grad(f)(X)
    assert info.value.line in (f.__code__.co_firstlineno + 1, f.__code__.co_firstlineno + 2)


# ----------------------------------------------------------------------------- return in a loop


def first_over(x):
    s = 0.0
    for i in range(x.shape[0]):
        s = s + x[i] * x[i]
        if s > 0.5:
            return s * 2
    return s


def nested_exits(x, w):
    total = 0.0
    for i in range(x.shape[0]):
        t = x[i] * w[i]
        for j in range(2):
            if t > 0.5 + j:
                u = t * 3
                return u + total
        total = total + np.sin(t)
        if total < -1.0:
            return total
    return total * 2


@pytest.mark.parametrize("scale", [1.0, 3.0, -4.0])  # each exit taken
def test_return_inside_a_loop(scale):
    all_modes(first_over, (X * scale,))
    all_modes(nested_exits, (X * scale, W), (0, 1))


def test_return_inside_a_loop_reads_well():
    text = s2sad.source(s2sad.grad(first_over), X)
    assert "returned = 0" in text and "break" in text


def return_deep_in_a_loop(x):
    for i in range(3):
        if x[i] > 0:
            if x[i] > 1:
                return x[i]
    return x[0]


def test_a_return_nested_deeper_in_a_loop_is_refused_at_its_line():
    with pytest.raises(s2sad.UnsupportedSyntaxError, match="last statement of an `if`") as info:
        s2sad.grad(return_deep_in_a_loop)(X)
    assert info.value.line == return_deep_in_a_loop.__code__.co_firstlineno + 4


# ----------------------------------------------------------------------------- recursion


def power(x, n):
    if n == 0:
        return np.ones_like(x)
    if n % 2 == 1:
        return x * power(x, n - 1)
    half = power(x, n // 2)
    return half * half


def powers(x):
    return power(x, 5) + power(x, 2)


def test_recursion_whose_depth_constants_decide_is_unrolled():
    all_modes(powers, (X,))
    np.testing.assert_allclose(s2sad.grad(lambda_free_powers)(X), 5 * X**4 + 2 * X)


def lambda_free_powers(x):
    return np.sum(powers(x))


def test_an_unrolled_recursion_reads_well():
    text = code(s2sad.source(s2sad.grad(lambda_free_powers), X))
    assert "power(" not in text and "n % 2" not in text and "== 0" not in text


def power_of_a_parameter(x, n):
    return np.sum(power(x, n))


def power_in_a_loop(x):
    k = 1
    s = 0.0
    for _ in range(3):
        s = s + np.sum(power(x, k))
        k = k + 1  # another depth in each iteration: not known when transformed
    return s


@pytest.mark.parametrize("f, args", [(power_of_a_parameter, (X, 3)), (power_in_a_loop, (X,))])
def test_recursion_of_a_depth_known_only_at_run_time_is_refused(f, args):
    with pytest.raises(s2sad.UnsupportedSyntaxError, match="unrolls a recursive function only"):
        s2sad.grad(f)(*args)


# ----------------------------------------------------------------------------- integers


def counted_scatter(x, bins):
    counts = np.zeros(3, dtype=np.int64)
    s = 0.0
    for b in bins:
        c = counts[b]  # an integer: no view of counts, which the next line writes
        counts[b] = c + 1
        s = s + x[b] * c
    return s


def first_of_order(x):
    order = np.argsort(x)
    first = order[0]
    order[0] = order[1]
    return x[first] * 2 + x[order[0]]


def test_integers_read_from_arrays_written_later_are_no_views():
    bins = np.array([1, 2, 1, 1])
    all_modes(counted_scatter, (X, bins))
    np.testing.assert_allclose(s2sad.grad(counted_scatter)(X, bins), [0, 3, 0, 0])
    all_modes(first_of_order, (X,))


# ----------------------------------------------------------------------------- more


def dict_filled_later(x, c):
    if c > 0:
        d = {}
    else:
        d = {"a": 1.0}
    d["a"] = x * 2
    return np.sum(d["a"])


def dict_read_by_a_method(x):
    d = {"a": x * 2}
    return np.sum(d.get("a"))


def checks_in_a_loop(x):
    s = 0.0
    for v in x:
        if v > 10:
            raise ValueError("too big")
        assert v > -10
        s = s + v * v
    return s


def test_an_empty_dict_filled_later_and_checks_inside_a_loop():
    all_modes(dict_filled_later, (X, 1.0))
    all_modes(checks_in_a_loop, (X,))
    with pytest.raises(ValueError, match="too big"):
        s2sad.jvp(checks_in_a_loop)(np.abs(X) * 20, tangent=X)


def loss_and_aux(w):
    loss = np.sum(w**2)
    return loss, {"norm": np.sqrt(loss)}


def loss_of_a_helper_with_aux(w):
    loss, _ = loss_and_aux(w)
    return loss


def test_a_dict_used_otherwise_is_refused_at_its_line():
    with pytest.raises(s2sad.UnsupportedSyntaxError, match="used other than by constant keys"):
        s2sad.grad(dict_read_by_a_method)(X)
    # a helper's (loss, aux dict), inlined: the error names the helper and what to do instead
    with pytest.raises(s2sad.UnsupportedSyntaxError, match=r"\(in `loss_and_aux`\)") as err:
        s2sad.grad(loss_of_a_helper_with_aux)(X)
    assert "has_aux=True" in str(err.value) and "return loss, (norm,)" in str(err.value)
    assert f"test_python_constructs.py:{loss_and_aux.__code__.co_firstlineno + 2}" in str(err.value)


@pytest.mark.parametrize(
    "f, args",
    [
        (weighted, (X, W)),
        (dict_of_parts, (X, W)),
        (first_over, (X,)),
        (lambda_free_powers, (X,)),
        (lambda_free_total, (X,)),
    ],
)
def test_hessians(f, args):
    gradient = s2sad.grad(f)
    H = s2sad.hessian(f)(*args)
    np.testing.assert_allclose(H, fd_jacobian(gradient, args, 0), atol=1e-6)


# ----------------------------------------------------------------------------- jit


@pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaWarning")
def test_jitted_where_numba_compiles_the_derivative(capsys):
    """Numba cannot compile these primals (they call plain Python functions, or format a
    string), but s2sad's derivative of each inlines them: jitted, it compiles and gives the
    Python version's numbers. A print that formats values is dropped from the jitted code."""
    pytest.importorskip("numba")
    for f, args, wrt in [(lambda_free_total, (X,), 0), (checked, (X, W), (0, 1))]:
        jitted = s2sad.grad(f, wrt=wrt, jit="strict")(*args)
        plain = s2sad.grad(f, wrt=wrt)(*args)
        for j, p in zip(jitted, plain):
            np.testing.assert_allclose(j, p, rtol=1e-12)
    text = s2sad.source(s2sad.grad(checked, wrt=(0, 1), jit=True), X, W)
    assert "print(" not in code(text)
    assert 'raise ValueError("x must be 1-d, got {x.ndim} dimensions")' in text


def by_literal_getattr(x, w):
    s = getattr(np, "sin")(x * w)
    return np.sum(getattr(s, "T") * getattr(math, "pi"))


def test_getattr_of_a_literal_name_is_the_attribute():
    all_modes(by_literal_getattr, (X, W), (0, 1))
    text = s2sad.source(s2sad.grad(by_literal_getattr, wrt=(0, 1)), X, W)
    assert "np.sin(" in text and "s.T" in text
