"""What a user's vjp rule returns is checked where generated code calls it (rules/owned.py,
`rule_cotangents`): JAX's tuple of one is taken for a one-argument function's cotangent, and a
wrong count or shape names the rule, its file and line, and what was expected, at the first
call, in Python mode and in compiled code (whose form is checked here by itself, cheaply)."""

import numpy as np
import pytest

import s2sad
from s2sad.jit import JitError


@s2sad.custom_vjp
def sq(x):
    return x * x


@sq.defvjp
def sq_rule(g, ans, x):
    return (2.0 * g * x,)  # JAX's convention: a tuple of one cotangent per argument


@s2sad.custom_vjp
def mul(a, b):
    return a * b


@mul.defvjp
def mul_three(g, ans, a, b):
    return g * b, g * a, g


@s2sad.custom_vjp
def mul_once(a, b):
    return a * b


@mul_once.defvjp
def mul_one(g, ans, a, b):
    return g * b  # an array, which two names would unpack by its rows


@s2sad.custom_vjp
def rows(x):
    return np.sum(x, axis=1)


@rows.defvjp
def rows_rule(g, ans, x):
    return g  # of the result's shape, not x's


X = np.linspace(0.1, 1.2, 4).reshape(2, 2)


def test_a_tuple_of_one_is_a_one_argument_functions_cotangent():
    g = s2sad.grad(lambda x: np.sum(sq(x) * x))(X)
    assert g.shape == X.shape
    np.testing.assert_allclose(g, 3 * X**2, rtol=1e-12)


@pytest.mark.parametrize(
    "f, told",
    [
        (
            lambda x, y: np.sum(mul(x, y)),
            r"mul_three \(test_rule_returns.py:\d+\) of mul\(a, b\) "
            r"returned 3 values where 2 cotangents were expected",
        ),
        (
            lambda x, y: np.sum(mul_once(x, y)),
            r"mul_one \(test_rule_returns.py:\d+\) of "
            r"mul_once\(a, b\) returned one value where 2",
        ),
        (
            lambda x, y: np.sum(rows(x) ** 2 * y[0]),
            r"rows_rule \(test_rule_returns.py:\d+\) of "
            r"rows\(x\) returned a cotangent of shape \(2,\) for `x`, of shape \(2, 2\)",
        ),
    ],
)
def test_a_wrong_count_or_shape_names_the_rule_and_what_was_expected(f, told):
    with pytest.raises(ValueError, match=told) as err:
        s2sad.grad(f, wrt=(0, 1))(X, X + 1.0)
    assert any("test_rule_returns.py line" in n for n in err.value.__notes__)  # the user's line


R2 = "R (f.py:1) of f(a, b)"
DTYPE = r"R \(f.py:1\) of f\(a, b\) returned a cotangent of dtype float32 for `a`, of dtype float64"


def test_the_compiled_form_checks_the_same():
    numba = pytest.importorskip("numba")
    from s2sad.numba_helpers import rule_cotangents

    @numba.njit
    def one(x):
        return rule_cotangents((x * 2.0,), (x,), "R (f.py:1) of f(x)")

    @numba.njit
    def three(x):
        return rule_cotangents((x, x, x), (x, x), "R (f.py:1) of f(a, b)")

    @numba.njit
    def row(x):
        return rule_cotangents((x, x[:1]), (x, x), "R (f.py:1) of f(a, b)")

    @numba.njit
    def rank(x):
        return rule_cotangents(x[0], (x,), "R (f.py:1) of f(x)")

    @numba.njit
    def listed(x):
        return rule_cotangents([x, x, x], (x, x), "R (f.py:1) of f(a, b)")

    @numba.njit
    def one_listed(x):
        return rule_cotangents([x * 2.0], (x,), "R (f.py:1) of f(x)")

    @numba.njit
    def two_listed(x):
        return rule_cotangents([x, x], (x,), "R (f.py:1) of f(x)")

    @numba.njit
    def with_none(x, first):  # a list of arrays and None: Numba's Optional, known at run time
        return rule_cotangents([x * 2.0, None] if first else [None, x[:1]], (x, x), R2)

    @numba.njit
    def narrower(x):
        return rule_cotangents([x.astype(np.float32), None], (x, x), R2)

    np.testing.assert_array_equal(one(X), 2.0 * X)
    np.testing.assert_array_equal(one_listed(X), 2.0 * X)
    for got, want in zip(with_none(X, True), (2.0 * X, np.zeros_like(X))):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="a cotangent of another shape than `b`'s"):
        with_none(X, False)
    with pytest.raises(ValueError, match=r"returned a list of another length where 1 cotangent"):
        two_listed(X)
    with pytest.raises(ValueError, match=DTYPE):
        narrower(X)
    with pytest.raises(ValueError, match=r"R \(f.py:1\) of f\(a, b\) returned a list of another"):
        listed(X)
    with pytest.raises(ValueError, match=r"R \(f.py:1\) of f\(a, b\) returned 3 values where 2"):
        three(X)
    with pytest.raises(ValueError, match="a cotangent of another shape than `b`'s"):
        row(X)
    with pytest.raises(ValueError, match="a cotangent of another rank than `x`'s"):
        rank(X)


@s2sad.custom_vjp
def five(a, b, c, d, s):
    return a * b + c + s * a  # `d` unread: its cotangent None


@five.defvjp
def five_rule(g, ans, a, b, c, d, s):
    return g * (b + s), g * a, g, None, np.array(np.sum(g * a))  # a 0-d array for the float `s`


@s2sad.custom_vjp
def mul_by(a, b):
    return a * b


@mul_by.defvjp
def mul_list(g, ans, a, b):
    return [g * b, g * a]


@s2sad.custom_vjp
def flat(x):
    return x * 0.0


@flat.defvjp
def flat_rule(g, ans, x):
    return None  # JAX's zero cotangent


@s2sad.custom_vjp
def first_of(a, s):
    return a * 1.0  # `s` unread


@first_of.defvjp
def first_listed(g, ans, a, s):
    return [g, None]  # None in a list, for a float: a zero (Numba had said "another rank")


@s2sad.custom_vjp
def tripled(x):
    return 3.0 * x


@tripled.defvjp
def tripled_rule(g, ans, x):
    return [3.0 * g]  # a list of one, as `(3.0 * g,)` (was refused)


@s2sad.custom_vjp
def shifted(x, by=0.5, scale=2.0):
    return (x + by) * scale


@shifted.defvjp
def shifted_rule(g, ans, x, by, scale):
    return g * scale, np.sum(g * scale), np.sum(g * (x + by))


def returns_of_all_kinds(a, b, c, d, s):
    out = np.sum(five(a, b, c, d, s) ** 2) + np.sum(mul_by(a, c) * b) + np.sum(flat(b) + a)
    # defaults the call leaves out are bound as Python binds them (was: no rule for the call)
    return out + np.sum(first_of(c, s) * tripled(d)) + np.sum(shifted(b) * a)


def test_five_arguments_a_list_a_0d_array_and_none_compile_and_agree():
    """A rule of five arguments, one returning a list, a 0-d array for a float and None (a zero
    cotangent, for one argument or one of several, in a tuple or a list), a list of one, and a
    function whose call leaves out its defaults: compiled (strict) == Python == finite
    differences, each gradient of its input's shape and dtype."""
    r = np.random.default_rng(5)
    args = [r.normal(size=3) for _ in range(4)] + [0.7]
    wrt = (0, 1, 2, 3, 4)
    python = s2sad.grad(returns_of_all_kinds, wrt=wrt)(*args)
    compiled = s2sad.grad(returns_of_all_kinds, wrt=wrt, jit="strict")(*args)
    for i, (p, c, x) in enumerate(zip(python, compiled, args)):
        assert np.shape(p) == np.shape(c) == np.shape(x)
        assert np.asarray(p).dtype == np.asarray(c).dtype == np.float64
        np.testing.assert_allclose(c, p, rtol=1e-12, atol=1e-12)
        fd = np.zeros(np.shape(x))
        for j in np.ndindex(np.shape(x)):
            step = [np.array(v, dtype=float) for v in args]
            step[i][j] += 1e-6
            up = returns_of_all_kinds(*step)
            step[i][j] -= 2e-6
            fd[j] = (up - returns_of_all_kinds(*step)) / 2e-6
        np.testing.assert_allclose(p, fd, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(python[3], 3.0 * args[2], rtol=1e-12)  # `d`: tripled's alone


@s2sad.custom_vjp
def scaled(x, s):
    return x * s


@scaled.defvjp
def scaled_list(g, ans, x, s):
    return [g * s, np.sum(g * x)]  # a list of an array and a number: Numba cannot return it


@pytest.mark.parametrize(
    "f",
    [
        lambda x: np.sum(tripled(x)),
        lambda x: np.sum(mul_by(x, x)),
        lambda x: np.sum(first_of(x, 0.5) ** 2),
    ],
)
def test_a_hessian_through_a_rule_returning_a_list_is_refused_for_want_of_a_tangent_rule(f):
    """A Hessian is forward mode over the gradient code, which calls the rule: a rule returning a
    list (`[3.0 * g]`, `[g * b, g * a]`, `[g, None]`) gets the refusal a tuple gets, that the
    function has no forward-mode rule (it was refused as returning a list, hinting a tuple)."""
    with pytest.raises(
        s2sad.NoRuleError, match=r"no forward-mode \(jvp\) rule for (tripled|mul_by|first_of)"
    ):
        s2sad.hessian(f)(np.linspace(0.1, 1.0, 3))


def test_a_list_of_several_types_is_named_where_numba_refuses_it():
    """Python mode takes the list; compiled code names the rule and what to return instead."""
    x = np.linspace(0.1, 1.0, 3)
    gx, gs = s2sad.grad(lambda x, s: np.sum(scaled(x, s)), wrt=(0, 1))(x, 1.5)
    np.testing.assert_allclose(gx, np.full(3, 1.5), rtol=1e-12)
    np.testing.assert_allclose(gs, np.sum(x), rtol=1e-12)
    told = r"your vjp rule scaled_list \(test_rule_returns.py:\d+\), which returns a list of"
    with pytest.raises(JitError, match=told):
        s2sad.grad(lambda x, s: np.sum(scaled(x, s)), wrt=(0, 1), jit="strict")(x, 1.5)


def test_a_wrong_count_dtype_or_tuple_argument_is_refused_naming_the_rule(tmp_path):
    """Python mode's checks of what the compiled form checks above: two values in a list for one
    argument, a float32 cotangent of a float64 argument (its gradient rounded silently), and, at
    transform time, a tuple of differentiated values passed as one argument of a function with
    a rule (was an internal error): s2sad cannot take the rule's tuple cotangent apart yet."""
    from conftest import load_module

    from s2sad.rules.owned import rule_cotangents

    with pytest.raises(ValueError, match=r"returned 2 values where 1 cotangent was expected"):
        rule_cotangents([X, X], (X,), "R (f.py:1) of f(x)")
    with pytest.raises(ValueError, match=r"returned 1 value where 2 cotangents were expected"):
        rule_cotangents((X,), (X, X), R2)
    with pytest.raises(ValueError, match=DTYPE):
        rule_cotangents([X.astype(np.float32), None], (X, X), R2)
    m = load_module(tmp_path, "tuple_rule", TUPLE_RULE)
    told = (
        r"tuple_rule.py:\d+: paired's argument `pair` is a tuple holding differentiated values, "
        r"and paired has your vjp rule paired_rule \(tuple_rule.py:\d+\) of paired\(pair\)"
    )
    with pytest.raises(s2sad.S2SADError, match=told):
        s2sad.grad(m.passes_a_tuple, wrt=(0, 1))(X, X)
    with pytest.raises(s2sad.S2SADError, match=told):
        s2sad.grad(m.passes_its_tuple)((X, X))


TUPLE_RULE = """
import numpy as np
import s2sad


@s2sad.custom_vjp
def paired(pair):
    return np.sum(pair[0] * pair[1])


@paired.defvjp
def paired_rule(g, ans, pair):
    return g * pair[1], g * pair[0]


def passes_a_tuple(x, y):
    return paired((x, y))


def passes_its_tuple(pair):
    return paired(pair)
"""
