"""Bad input is refused at transform time with the construct, the file:line and the way out."""

import numpy as np
import pytest

import s2sad

HERE = __file__.rsplit("/", 1)[-1]


def _lineno(func, text):
    import inspect

    lines, first = inspect.getsourcelines(func)
    return first + next(i for i, line in enumerate(lines) if text in line)


def with_with(x):
    with open(__file__):
        y = x
    return y


def with_yield(x):
    yield x


def with_global(x):
    global COUNTER
    return x


def with_class(x):
    class Box:
        pass

    return x


def with_comprehension(x):
    return np.sum(np.array([v * 2 for v in x]))


def with_bool_op(x):
    return np.sum(x and x)


def attribute_write(x):
    x.y = 2
    return x


def for_else(x):
    for i in range(3):
        x = x * 2
    else:
        x = x + 1
    return x


def returns_on_some_paths(x):
    if np.sum(x) > 0:
        return np.sum(x)


def no_return(x):
    y = x * 2


@pytest.mark.parametrize(
    "func, construct, marker",
    [
        (with_with, "`with` blocks", "with open"),
        (with_yield, "generators", "yield x"),
        (with_global, "`global`", "global COUNTER"),
        (with_class, "class definitions", "class Box"),
        (with_comprehension, "list comprehensions", "return np.sum(np.array([v"),
        (with_bool_op, "`and`/`or`", "return np.sum(x and x)"),
        (attribute_write, "assignment to this kind of target", "x.y = 2"),
        (for_else, "`for ... else`", "for i in range(3):"),
        (no_return, "must return a value", "y = x * 2"),
        (returns_on_some_paths, "does not return a value on every path", "if np.sum(x) > 0"),
    ],
)
def test_unsupported_syntax_names_construct_file_and_line(func, construct, marker):
    with pytest.raises(s2sad.UnsupportedSyntaxError) as info:
        s2sad.grad(func)(np.ones(3))
    message = str(info.value)
    assert construct in message
    assert f"{HERE}:{_lineno(func, marker)}:" in message
    assert marker in message  # the offending source line is quoted
    assert "hint:" in message


def helper(z):
    return z * 2


def calls_helper(x):
    return np.sum(helper(np.gradient(x)))


def differences(x):
    return np.sum(np.gradient(x))


def uses_method_without_rule(x):
    return np.sum(x.repeat(2))


@pytest.mark.parametrize(
    "func, name",
    [
        (calls_helper, "helper"),
        (differences, "np.gradient"),
        (uses_method_without_rule, ".repeat()"),
    ],
)
def test_no_rule_names_the_function_and_points_to_register_vjp(func, name):
    with pytest.raises(s2sad.NoRuleError) as info:
        s2sad.grad(func)(np.ones(3))
    assert name in str(info.value)
    assert "s2sad.register_vjp" in str(info.value)
    assert f"{HERE}:" in str(info.value)


def sorts_data_only(x, data):
    return np.sum(x * np.sort(data))


def test_no_rule_is_fine_when_no_gradient_flows_through_it():
    np.testing.assert_allclose(
        s2sad.grad(sorts_data_only)(np.ones(3), np.array([3.0, 1, 2])), [1.0, 2.0, 3.0]
    )


def stops_sort(x):
    return np.sum(x * s2sad.stop_gradient(np.sort(x)))


def test_stop_gradient_is_the_way_out():
    x = np.array([3.0, 1.0, 2.0])
    np.testing.assert_allclose(s2sad.grad(stops_sort)(x), np.sort(x))


def test_register_vjp_is_the_way_out():
    def my_sort(a):
        return np.sort(a)

    def uses(x):
        return np.sum(my_sort(x) * np.array([1.0, 2.0, 3.0]))

    def rule(dy, y, a):
        order = np.argsort(a)
        out = np.empty_like(dy)
        out[order] = dy
        return out

    s2sad.register_vjp(my_sort, rule)
    np.testing.assert_allclose(s2sad.grad(uses)(np.array([3.0, 1.0, 2.0])), [3.0, 1.0, 2.0])


def unknown_name(x):
    return np.sum(x * NOT_DEFINED_ANYWHERE)  # noqa: F821


def test_unresolvable_name():
    with pytest.raises(s2sad.NameResolutionError, match="NOT_DEFINED_ANYWHERE") as info:
        s2sad.grad(unknown_name)(np.ones(2))
    assert f"{HERE}:{_lineno(unknown_name, 'NOT_DEFINED')}:" in str(info.value)


def bad_attribute(x):
    return np.sum(np.no_such_function(x))


def test_missing_module_attribute():
    with pytest.raises(s2sad.NameResolutionError, match="no attribute 'no_such_function'"):
        s2sad.grad(bad_attribute)(np.ones(2))


def two_params(x, y):
    return np.sum(x * y)


@pytest.mark.parametrize("wrt", ["z", 2, -3, ("x", "x"), 1.5])
def test_wrt_must_name_a_parameter_and_lists_them(wrt):
    with pytest.raises(s2sad.WrtError) as info:
        s2sad.grad(two_params, wrt=wrt)
    assert "x" in str(info.value)


def test_wrt_error_lists_parameters():
    with pytest.raises(s2sad.WrtError, match="its parameters are x, y"):
        s2sad.grad(two_params, wrt="z")


def kappa_and_state(kappa, u0):
    return kappa * np.sum(u0 * u0)


def test_a_misspelled_wrt_is_told_the_parameter_it_is_close_to():
    with pytest.raises(s2sad.WrtError) as info:
        s2sad.grad(kappa_and_state, wrt="kapa")
    assert "did you mean wrt='kappa'?" in info.value.hint
    with pytest.raises(s2sad.WrtError) as info:
        s2sad.grad(kappa_and_state, wrt="zz")
    assert "did you mean" not in info.value.hint


def pairwise(pos):
    return np.sum((pos[:, None, :] - pos[None, :, :]) ** 2)


def test_a_list_indexed_like_an_array_is_told_to_be_passed_as_one():
    """A list of rows is a parameter tree, and `pos[:, None, :]` no key of it: the message
    quotes the index as written and the hint offers np.asarray first."""
    pos = np.arange(6.0).reshape(3, 2)
    with pytest.raises(s2sad.UnsupportedSyntaxError) as info:
        s2sad.grad(pairwise)(pos.tolist())
    assert "pos is a parameter tree (a list)" in str(info.value)
    assert "not `pos[:, None, :]`" in str(info.value)
    assert "np.asarray(pos)" in info.value.hint


@pytest.mark.parametrize("func", [np.sin, len, print, np.linalg.norm])
def test_callables_without_python_source(func):
    with pytest.raises(s2sad.SourceUnavailableError, match="register_vjp"):
        s2sad.grad(func)


def test_exec_code_has_no_source():
    namespace = {}
    exec("import numpy as np\ndef made(x):\n    return np.sum(x)\n", namespace)
    with pytest.raises(s2sad.SourceUnavailableError, match="cannot read the source of made"):
        s2sad.grad(namespace["made"])(np.ones(2))


def test_lambda_without_source_is_refused_clearly():
    namespace = {}
    exec("import numpy as np\nmade = lambda x: x * 2\n", namespace)
    with pytest.raises(s2sad.SourceUnavailableError, match="cannot read the source of <lambda>"):
        s2sad.grad(namespace["made"])(1.0)


def test_var_args_refused():
    def f(*xs):
        return xs[0]

    with pytest.raises(s2sad.UnsupportedSyntaxError, match=r"\*args"):
        s2sad.grad(f)(1.0)


@pytest.mark.parametrize(
    "bad", [np.arange(3), np.array([True, False]), 3, True, np.array([1 + 2j]), "text"]
)
def test_integer_and_non_float_inputs(bad):
    with pytest.raises(s2sad.NonDifferentiableInputError, match="argument 'x'"):
        s2sad.grad(two_params)(bad, np.ones(3))


@pytest.mark.parametrize(
    "bad",
    [np.ma.array([1.0, 2.0, 3.0], mask=[0, 1, 0]), np.matrix([[1.0, 2.0, 3.0]])],
    ids=["masked", "matrix"],
)
@pytest.mark.parametrize("transform", [s2sad.grad, s2sad.jacobian, s2sad.hessian])
def test_array_subclasses_are_refused(bad, transform):
    """Their operations differ from plain arrays' (a masked sum skips elements, `*` of
    matrices is a product): differentiated as plain arrays, the gradient was silently wrong."""
    with pytest.raises(s2sad.NonDifferentiableInputError, match="subclass of np.ndarray") as info:
        transform(two_params)(bad, np.ones(3))
    assert "np.asarray(x)" in str(info.value)


def test_integer_input_is_fine_when_not_differentiated():
    assert s2sad.grad(two_params, wrt="y")(np.arange(3), np.ones(3)).tolist() == [0.0, 1.0, 2.0]


def vector_valued(x):
    return x * 2


def test_non_scalar_output_points_to_vjp_and_jacobian():
    with pytest.raises(s2sad.NonScalarOutputError) as info:
        s2sad.grad(vector_valued)(np.ones(3))
    assert "scalar" in str(info.value) and "s2sad.vjp" in str(info.value)
    assert "jacobian" in str(info.value)
    assert isinstance(info.value, ValueError)


def test_all_errors_share_one_base_class():
    for cls in (
        s2sad.UnsupportedSyntaxError,
        s2sad.NoRuleError,
        s2sad.WrtError,
        s2sad.SourceUnavailableError,
        s2sad.NameResolutionError,
        s2sad.NonDifferentiableInputError,
        s2sad.NonScalarOutputError,
    ):
        assert issubclass(cls, s2sad.S2SADError)


def differencing_helper(z):
    return np.gradient(z) * 2.0


def calls_differencing_helper(x):
    return np.sum(differencing_helper(x))


def test_no_rule_inside_an_inlined_helper_points_at_the_helper():
    with pytest.raises(s2sad.NoRuleError, match="np.gradient") as info:
        s2sad.grad(calls_differencing_helper)(np.ones(3))
    assert f"{HERE}:{_lineno(differencing_helper, 'return np.gradient')}:" in str(info.value)


COMPLEX_GAIN = 1 + 2j


def times_a_complex_gain(x):
    return np.sin(x) * COMPLEX_GAIN


@pytest.mark.parametrize("batched", [True, False])
def test_a_complex_constant_reaching_a_jacobian_is_refused(batched):
    """Python mode's batched Jacobian made its rows float64, keeping the real half alone (a
    ComplexWarning the only sign)."""
    with pytest.raises(s2sad.S2SADError, match="a complex value reached the"):
        s2sad.jacobian(times_a_complex_gain, batched=batched)(np.array([0.1, 0.2, 0.3]))


# ----------------------------------------------------------------------------- new-user trial


def _cubes(x, y):
    return np.sum(x * y) ** 2


def _leafy(d):
    return np.sum(d["w"] ** 3)


def _dotted(x, y):
    return np.sum(x * y)


def _as_array_first(x, y):  # the hint's other way: a list's gradient is a list
    x = np.asarray(x)
    return np.sum(x * y)


def _squares(x):
    return x * x


def test_hessian_refusals_say_what_to_do_at_the_callers_line():
    with pytest.raises(s2sad.S2SADError) as err:
        s2sad.hessian(_cubes, wrt=(0, 1))
    assert str(err.value).startswith(f"{HERE}:")
    assert (
        "one argument at a time" in err.value.hint
        and "s2sad.jacobian(s2sad.grad(" in err.value.hint
    )
    with pytest.raises(
        s2sad.NonScalarOutputError, match=r"^test_errors.py:\d+: s2sad.hessian\(_squares\) needs"
    ):
        s2sad.hessian(_squares)(np.ones(3))
    for d in ({"w": np.ones(3)}, {"w": np.ones(3), "b": np.ones(2)}):
        with pytest.raises(s2sad.S2SADError) as err:
            s2sad.hessian(_leafy)(d)
        assert f"'d' is a dict of {len(d)} lea" in str(err.value) and "tree of" not in str(
            err.value
        )
        assert "wrt=\"d['w']\"" in err.value.hint
    np.testing.assert_allclose(
        s2sad.hessian(_leafy, wrt="d['w']")({"w": np.ones(2)}), 6 * np.eye(2)
    )


def test_jaxs_tangents_keyword_is_answered_with_tangent():
    with pytest.raises(TypeError, match="unexpected keyword argument 'tangents'") as err:
        s2sad.jvp(_dotted)(np.ones(3), np.ones(3), tangents=np.ones(3))
    assert err.value.hint.startswith("did you mean `tangent=`?")
    assert str(err.value).startswith(
        f"{HERE}:{_lineno(test_jaxs_tangents_keyword_is_answered_with_tangent, 'tangents=')}"
    )


def test_a_list_of_numbers_where_an_array_is_read_whole_suggests_np_asarray():
    y = np.arange(3.0)
    with pytest.raises(s2sad.UnsupportedSyntaxError) as err:
        s2sad.grad(_dotted)([1.0, 2.0, 3.0], y)
    assert f"{HERE}:{_lineno(_dotted, 'return')}" in str(err.value)
    assert "x is a list of 3 values" in str(err.value) and "np.asarray(" in err.value.hint
    np.testing.assert_allclose(s2sad.grad(_dotted)(np.asarray([1.0, 2.0, 3.0]), y), y)
    assert s2sad.grad(_as_array_first)([1.0, 2.0, 3.0], y) == [0.0, 1.0, 2.0]  # (a list's)


def one_past_the_end(x):
    s = 0.0
    for i in range(x.shape[0]):
        s = s + x[i] * x[i + 1]
    return s


@pytest.mark.parametrize("mode", ["grad", "value_and_grad", "vjp", "jvp"])
def test_an_error_python_mode_raises_as_it_runs_names_the_users_line(mode):
    """An IndexError raised in generated code (`s_item2 = x[i + 1]`, the traceback's line) gets
    a note (PEP 678) naming the user's file, line and code, as the jit path's message does."""
    x = np.arange(4.0)
    line = _lineno(one_past_the_end, "x[i + 1]")
    with pytest.raises(IndexError) as info:
        if mode == "jvp":
            s2sad.jvp(one_past_the_end)(x, tangent=np.ones(4))
        else:
            getattr(s2sad, mode)(one_past_the_end)(x)
    assert getattr(info.value, "__notes__", []) == [
        f"raised in the code s2sad generated from {__file__} line {line} "
        "(`s = s + x[i] * x[i + 1]`)"
    ]


def test_a_rule_without_the_result_parameter_is_refused_when_registered():
    @s2sad.custom_vjp
    def cube(x):
        return x**3

    with pytest.raises(s2sad.S2SADError) as info:

        @cube.defvjp
        def cube_vjp(dy, x):  # JAX/autograd habit: no `y`
            return 3 * x**2 * dy

    message = str(info.value)
    assert "cube_vjp" in message and "takes (dy, x)" in message
    assert "a rule takes (dy, y, x)" in message
