"""The public API: wrt forms, decorators, types of gradients, caching, inputs left untouched."""

import math

import numpy as np
import numpy as onp  # numpy under a second alias
import pytest
from numpy import exp as np_exp
from numpy.linalg import norm as np_norm

import s2sad
from conftest import check_vjp

SCALE = 3.0


def loss(w, x, b=0.5):
    return np.sum(np.tanh(x @ w + b) ** 2)


def test_wrt_index_name_and_tuple():
    rng = np.random.default_rng(0)
    w, x = rng.normal(size=3), rng.normal(size=(4, 3))
    by_index = s2sad.grad(loss)(w, x)
    by_name = s2sad.grad(loss, wrt="w")(w, x)
    both = s2sad.grad(loss, wrt=("w", 2))(w, x, 0.25)
    np.testing.assert_allclose(by_index, by_name)
    assert isinstance(both, tuple) and len(both) == 2
    assert isinstance(both[1], float)
    single_tuple = s2sad.grad(loss, wrt=(0,))(w, x)
    assert isinstance(single_tuple, tuple) and len(single_tuple) == 1


def test_keyword_arguments_and_defaults():
    rng = np.random.default_rng(1)
    w, x = rng.normal(size=3), rng.normal(size=(4, 3))
    g = s2sad.grad(loss, wrt="b")
    assert g(w, x) == pytest.approx(g(w, x, b=0.5))
    assert g(w=w, x=x, b=0.1) != pytest.approx(g(w, x))


@s2sad.grad
def decorated(x):
    return np.sum(x**3)


@s2sad.grad(wrt="y")
def decorated_wrt(x, y):
    return np.sum(x * y**2)


def test_decorator_forms():
    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(decorated(x), 3 * x**2)
    np.testing.assert_allclose(decorated_wrt(x, np.array([3.0, 4.0])), [6.0, 16.0])


def aliases(x):
    return onp.sum(np_exp(x)) + np_norm(x) + math.sqrt(SCALE) * onp.linalg.norm(x)


def test_numpy_under_any_alias_math_and_globals():
    x = np.array([0.3, -1.2, 2.0])
    expected = np.exp(x) + x / np.linalg.norm(x) + math.sqrt(SCALE) * x / np.linalg.norm(x)
    np.testing.assert_allclose(s2sad.grad(aliases)(x), expected)
    src = s2sad.source(s2sad.grad(aliases))
    code = "\n".join(line for line in src.splitlines() if not line.strip().startswith("#"))
    assert "np.exp(" in code and "np.linalg.norm(" in code and "onp" not in code


def test_closure_constants():
    k = 2.5

    def f(x):
        return np.sum(k * x**2)

    np.testing.assert_allclose(s2sad.grad(f)(np.array([1.0, 2.0])), [5.0, 10.0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gradient_dtype_and_shape_follow_the_input(dtype):
    x = np.arange(6, dtype=dtype).reshape(2, 3) / 7
    w = np.ones((3,), dtype=np.float64)
    g = s2sad.grad(loss)(w.astype(dtype), x)
    assert g.dtype == dtype and g.shape == (3,)


def scalar_mix(a, b):
    return a * b + math.sin(a)


def test_python_floats_give_python_floats_and_numpy_scalars_give_numpy_scalars():
    da, db = s2sad.grad(scalar_mix, wrt=(0, 1))(2.0, 3.0)
    assert type(da) is float and type(db) is float
    assert da == pytest.approx(3.0 + math.cos(2.0)) and db == pytest.approx(2.0)
    da, db = s2sad.grad(scalar_mix, wrt=(0, 1))(np.float32(2.0), np.float64(3.0))
    assert type(da) is np.float32 and type(db) is np.float64
    g0 = s2sad.grad(product_0d)(np.array(2.0))
    assert isinstance(g0, np.ndarray) and g0.shape == () and g0 == 4.0


def product_0d(x):
    return x * x


def unused(x, y):
    return np.sum(x)


def test_unused_input_gets_zero_gradient_of_its_shape():
    dx, dy = s2sad.grad(unused, wrt=(0, 1))(np.ones(2), np.ones((3, 2), dtype=np.float32))
    np.testing.assert_array_equal(dy, np.zeros((3, 2)))
    assert dy.dtype == np.float32
    assert s2sad.grad(unused, wrt=1)(np.ones(2), 4.0) == 0.0


def identity_sum(x):
    y = x
    return np.sum(y)


def test_inputs_are_not_modified_and_gradients_are_fresh_arrays():
    x = np.arange(4.0)
    x.setflags(write=False)
    g = s2sad.grad(identity_sum)(x)
    np.testing.assert_array_equal(x, np.arange(4.0))
    assert g.flags.writeable and not np.shares_memory(g, x)
    g[0] = 10.0  # the user owns it


def identity(x):
    return x


def test_vjp_of_identity_does_not_alias_the_seed():
    _, pullback = s2sad.vjp(identity)(np.ones(3))
    seed = np.array([1.0, 2.0, 3.0])
    out = pullback(seed)
    np.testing.assert_array_equal(out, seed)
    assert not np.shares_memory(out, seed)


def non_contiguous_sum(x):
    return np.sum(x**2)


def test_non_contiguous_input():
    base = np.arange(12.0).reshape(3, 4)
    x = base[:, ::2]
    g = s2sad.grad(non_contiguous_sum)(x)
    np.testing.assert_array_equal(g, 2 * x)
    np.testing.assert_array_equal(base, np.arange(12.0).reshape(3, 4))


def two_outputs(x):
    return x * 2.0, np.sum(x)


def test_vjp_of_tuple_output_takes_a_tuple_seed():
    out, pullback = s2sad.vjp(two_outputs)(np.array([1.0, 2.0]))
    assert isinstance(out, tuple) and len(out) == 2
    np.testing.assert_array_equal(pullback((np.array([1.0, 1.0]), 3.0)), [5.0, 5.0])
    with pytest.raises(s2sad.SeedShapeError):
        pullback(np.ones(2))


def test_vjp_seed_shape_is_checked():
    _, pullback = s2sad.vjp(identity)(np.ones(3))
    with pytest.raises(s2sad.SeedShapeError, match=r"shape \(2,\).*\(3,\)"):
        pullback(np.ones(2))


def test_value_and_grad_runs_once_and_matches():
    rng = np.random.default_rng(2)
    w, x = rng.normal(size=3), rng.normal(size=(4, 3))
    value, g = s2sad.value_and_grad(loss)(w, x)
    assert value == pytest.approx(loss(w, x))
    np.testing.assert_allclose(g, s2sad.grad(loss)(w, x))


def test_transform_is_cached():
    from s2sad import transform_cache as stage

    g1 = s2sad.grad(loss, wrt=1)
    first = g1.compiled
    g2 = s2sad.grad(loss, wrt=1)
    assert g2.compiled is first
    assert len([k for k in stage._CACHE if k[0] is loss.__code__ and k[2] == ("x",)]) == 1


def test_source_shows_the_generated_function():
    text = s2sad.source(s2sad.grad(loss))
    assert text.startswith("def grad_loss(w, x, b=0.5):")
    with pytest.raises(s2sad.S2SADError, match="not made by s2sad"):
        s2sad.source(loss)


def test_source_of_a_hessian_is_its_last_calls():
    H = s2sad.hessian(needs_positive)
    with pytest.raises(s2sad.S2SADError, match="call the Hessian first"):
        s2sad.source(H)
    x = np.array([1.0, 4.0])
    np.testing.assert_allclose(H(x), np.diag(-0.25 * x**-1.5))
    assert s2sad.source(H) == s2sad.source(H, x)


def test_tracebacks_show_generated_lines():
    import traceback

    g = s2sad.grad(needs_positive)
    with np.errstate(all="raise"):
        with pytest.raises(FloatingPointError) as info:
            g(np.array([0.0]))
    text = "".join(traceback.format_exception(info.value))
    assert "grad_needs_positive" in text and "dx = " in text


def needs_positive(x):
    return np.sum(np.sqrt(x))  # the adjoint divides by sqrt(x)


TRANSFORMS = ["grad", "value_and_grad", "vjp", "jvp", "jacobian", "hessian"]


@pytest.mark.parametrize("transform", TRANSFORMS)
def test_a_keyword_of_another_library_says_which_of_s2sads_to_use(transform):
    # JAX's `argnums` (autograd's `argnum`) is `wrt` here: a TypeError naming the transform, the
    # line that called it, and the call to write instead
    for keyword in ("argnums", "argnum"):
        with pytest.raises(s2sad.TransformKeywordError) as err:
            getattr(s2sad, transform)(_two_args, **{keyword: 1})
        text = str(err.value)
        assert isinstance(err.value, TypeError)
        assert f"{transform}() got an unexpected keyword argument '{keyword}'" in text
        assert f"test_api.py:{err.tb.tb_lineno}: " in text
        assert f"write {transform}(f, wrt=1)" in text


@pytest.mark.parametrize("transform", TRANSFORMS)
def test_has_aux_is_taken_where_it_is_meant_and_its_misspelling_is_named(transform):
    if transform in ("grad", "value_and_grad", "vjp"):
        with pytest.raises(s2sad.TransformKeywordError, match="did you mean `has_aux=`"):
            getattr(s2sad, transform)(_with_aux, hasaux=True)
        x = np.array([0.5, 1.5])
        got = getattr(s2sad, transform)(_with_aux, has_aux=True)(x)
        aux = got[0][1] if transform == "value_and_grad" else got[-1]
        gradient = got[1](1.0) if transform == "vjp" else got[1] if transform != "grad" else got[0]
        assert aux == "aux"
        np.testing.assert_allclose(gradient, 2 * x)
        return
    for keyword in ("has_aux", "hasaux"):
        with pytest.raises(
            s2sad.TransformKeywordError, match="is for grad, value_and_grad and vjp"
        ):
            getattr(s2sad, transform)(_with_aux, **{keyword: True})


def test_an_unknown_keyword_lists_the_ones_the_transform_takes():
    with pytest.raises(s2sad.TransformKeywordError) as err:
        s2sad.grad(_two_args, wtr="y")
    assert "did you mean `wrt=`? grad takes `wrt=`, `jit=`" in str(err.value)
    with pytest.raises(s2sad.TransformKeywordError, match="real floating-point inputs only"):
        s2sad.jacobian(_two_args, holomorphic=True)


def _two_args(x, y):
    return np.sum(np.sin(x) * y)


def _with_aux(x):
    return np.sum(x**2), "aux"


def _tanh_layer(w, b, x):
    return np.sum(np.tanh(x @ w + b) ** 2)


def test_a_nested_list_passed_for_data_works_as_in_the_primal():
    # NumPy's `@` takes a list; the products' adjoints must too (they read `.T` before)
    w, rows = np.linspace(0.1, 0.3, 3), [[1.0, -1.0, 0.5]] * 4
    got = s2sad.grad(_tanh_layer)(w, 0.2, rows)
    np.testing.assert_allclose(got, s2sad.grad(_tanh_layer)(w, 0.2, np.array(rows)), rtol=1e-14)
    got_w = s2sad.grad(lambda W, x: np.sum((x @ W) ** 2))(np.eye(3), [[1.0, 2.0, 3.0]])
    np.testing.assert_allclose(got_w, 2 * np.outer([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]), rtol=1e-14)


_ROW, _ROWS, _SQUARE = [0.3, -1.2, 2.0], [[1.0, 2.0, 0.5], [3.0, -4.0, 1.5]], [[1.0, 2.0, 0.5]] * 3
_EXPONENTS = [0.0, 1.5, 2.0]  # a zero exponent: its adjoint's x ** (0 - 0), never x ** -1
LIST_DATA = {  # (f of x and the data, x's shape, the data)
    "dot of two vectors": (lambda x, d: np.dot(d, x) ** 2, (3,), _ROW),
    "dot of a matrix and a vector": (lambda x, d: np.sum(np.dot(x, d) ** 2), (2, 3), _ROW),
    "dot of matrices": (lambda x, d: np.sum(np.dot(d, x) ** 2), (3, 3), _ROWS),
    "vector @ vector": (lambda x, d: (d @ x) ** 2, (3,), _ROW),
    "outer": (lambda x, d: np.sum(np.outer(d, x) ** 2), (3,), _ROW),
    "inner": (lambda x, d: np.sum(np.inner(d, x) ** 2), (2, 3), _ROWS),
    "tensordot": (lambda x, d: np.sum(np.tensordot(x, d, axes=([0], [1])) ** 2), (3, 2), _ROWS),
    "einsum": (lambda x, d: np.sum(np.einsum("ij,j->i", x, d) ** 2), (2, 3), _ROW),
    "kron": (lambda x, d: np.sum(np.kron(d, x) ** 2), (2, 3), _ROWS),
    "where": (lambda x, d: np.sum(np.where(x > 0.5, d, x) ** 2), (2, 3), _ROW),
    "broadcast +": (lambda x, d: np.sum((x + d) ** 2), (2, 3), _ROW),
    "broadcast /": (lambda x, d: np.sum(d / x), (2, 3), _SQUARE[:2]),
    "power, list exponent": (lambda x, d: np.sum(x**d), (2, 3), _EXPONENTS),
    "power, list base": (lambda x, d: np.sum(np.power(np.abs(d), x)), (2, 3), _ROW),
    "arctan2": (lambda x, d: np.sum(np.arctan2(x, d) + np.arctan2(d, x)), (2, 3), _ROW),
    "convolve": (lambda x, d: np.sum(np.convolve(x, d) ** 2), (4,), _ROW),
    "trapezoid": (lambda x, d: np.trapezoid(x, d), (3,), _ROW),
    "polyval at data": (lambda x, d: np.sum(np.polyval(x, d)), (3,), _ROW),
}


@pytest.mark.parametrize("case", list(LIST_DATA), ids=list(LIST_DATA))
def test_a_list_passed_for_data_works_as_in_the_primal(case):
    # the adjoints read operands by NumPy's functions (np.transpose, np.multiply, np.square,
    # np.not_equal, np.asarray), which take lists as the primal's calls do
    f, shape, data = LIST_DATA[case]
    x = np.random.default_rng(4).uniform(0.2, 1.0, shape)
    got = s2sad.grad(f)(x, data)
    want = s2sad.grad(f)(x, np.array(data))
    assert got.shape == x.shape and got.dtype == x.dtype
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)
    check_vjp(f, (x, np.array(data)))  # and the array's gradient is right
