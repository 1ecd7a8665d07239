"""A dtype given by position (`np.zeros(3, np.int64)`) is the dtype NumPy makes, as `dtype=` is:
a store into an integer array so made truncates (no derivative), and updating it in place with
floats is refused as NumPy raises. Checked against central differences, and the position s2sad
reads for each factory against the dtype NumPy gives."""

import ast
import warnings

import numpy as np
import pytest

import s2sad
from s2sad import ir
from s2sad.jit import JitFallbackWarning
from s2sad.pipeline.classify import given_dtype, spelled_dtype
from s2sad.rules.elementwise import DTYPE_AT

K = np.array([0.31234, 0.71234, 1.13456])


def zeros(k):
    y = np.zeros(3, np.int64)
    y[0] = k[0] * 2.6
    return np.sum(y * k)


def ones(k):
    y = np.ones(3, "int32")
    y[0] = k[0] * 2.6
    return np.sum(y * k)


def empty(k):
    y = np.empty(3, int)
    y[:] = k * 2.6
    return np.sum(y * k)


def zeros_of_a_tuple(k):
    y = np.zeros((3,), "int64")
    y[1:] = k[1:] * 2.6
    return np.sum(y * k)


def zeros_like(k):
    y = np.zeros_like(k, int)
    y[0] = k[0] * 2.6
    return np.sum(y * k)


def empty_like(k):
    y = np.empty_like(k, bool)
    y[:] = k - 0.5
    return np.sum(y * k)


def full(k):
    y = np.full(3, 1.0, int)
    y[0] = k[0] * 2.6
    return np.sum(y * k)


def full_like(k):
    y = np.full_like(k, 1, np.int32)
    y[0] = k[0] * 2.6
    return np.sum(y * k)


def array(k):
    y = np.array(k, int)
    y[::2] = k[1:] * 2.6
    return np.sum(y * y * k)


def eye(k):
    y = np.eye(3, 3, 0, int)[0]
    y[1] = k[1] * 2.6
    return np.sum(y * k)


def linspace(k):
    y = np.linspace(0, 2, 3, True, False, int)
    y[0] = k[0] * 2.6
    return np.sum(y * k)


def _central(f, k=K):
    eps = 1e-6
    return np.array([(f(k + eps * e) - f(k - eps * e)) / (2 * eps) for e in np.eye(k.size)])


@pytest.mark.parametrize(
    "f",
    [zeros, ones, empty, zeros_of_a_tuple, zeros_like, empty_like, full, full_like, array]
    + [eye, linspace],
)
def test_store_into_integers_made_with_a_positional_dtype_has_no_derivative(f):
    expected = _central(f)
    np.testing.assert_allclose(s2sad.grad(f)(K), expected, atol=1e-6)
    t = np.array([0.3, -1.1, 0.7])
    np.testing.assert_allclose(s2sad.jvp(f)(K, tangent=t)[1], expected @ t, atol=1e-6)


# the other way: a float dtype given by position to a copy of integers makes a float array,
# whose store has its derivative (these were taken for integer buffers, the store dropped)
def zeros_like_of_integers(k, idx):
    y = np.zeros_like(idx, float)
    y[0] = k[0] * 2.6
    return np.sum(y * k)


def array_of_integers(k, idx):
    y = np.array(idx, np.float64)
    y[1:] = k[1:] * 2.6
    return np.sum(y * y * k)


@pytest.mark.parametrize("f", [zeros_like_of_integers, array_of_integers])
def test_store_into_floats_made_of_integers_with_a_positional_dtype_has_its_derivative(f):
    idx = np.array([3, 1, 2])
    expected = _central(lambda k: f(k, idx))
    np.testing.assert_allclose(s2sad.grad(f)(K, idx), expected, rtol=1e-6)


def updated_zeros(k):
    y = np.zeros(3, np.int64)
    y += k
    return np.sum(y * k)


def updated_ones_like(k):
    y = np.ones_like(k, "int32")
    y *= k
    return np.sum(y * k)


def updated_full(k):
    y = np.full(3, 2, int)
    y -= k[0]
    return np.sum(y * k)


@pytest.mark.parametrize("f", [updated_zeros, updated_ones_like, updated_full])
def test_float_update_of_integers_made_with_a_positional_dtype_raises_as_numpy_does(f):
    with pytest.raises(TypeError):
        f(K)
    with pytest.raises(s2sad.UnsupportedSyntaxError, match=r"UFuncTypeError.*same_kind") as err:
        s2sad.grad(f)(K)
    assert "test_positional_dtypes.py" in str(err.value)


def _call(text: str) -> ast.Call:
    """`text` parsed, its callee known as normalization would know it."""
    node = ast.parse(text, mode="eval").body
    ir.set_callee(node.func, eval(ast.unparse(node.func), {"np": np}))
    return node


# every factory s2sad reads a dtype of, called with an integer dtype at the position s2sad reads
CALLS = [
    "np.zeros(2, np.int32)",
    "np.ones((2,), 'int32')",
    "np.empty(2, np.int32)",
    "np.zeros_like(x, np.int32)",
    "np.ones_like(x, np.int32)",
    "np.empty_like(x, np.int32)",
    "np.full(2, 1.5, np.int32)",
    "np.full_like(x, 1.5, np.int32)",
    "np.array(x, np.int32)",
    "np.asarray(x, np.int32)",
    "np.asanyarray(x, np.int32)",
    "np.eye(2, 2, 0, np.int32)",
    "np.identity(2, np.int32)",
    "np.arange(0, 2, 1, np.int32)",
    "np.linspace(0, 2, 3, True, False, np.int32)",
    "np.sum(x, 0, np.int32)",
    "np.cumsum(x, 0, np.int32)",
]


@pytest.mark.parametrize("text", CALLS)
def test_the_dtype_read_by_position_is_the_one_numpy_makes(text):
    made = eval(text, {"np": np, "x": K})
    node = _call(text)
    dtype = given_dtype(ir.callee(node.func), node.args, {})
    assert spelled_dtype(dtype) == made.dtype == np.int32


def test_every_factory_without_a_rule_signature_is_covered():
    covered = {ir.callee(_call(text).func) for text in CALLS}
    assert all(f in covered for f in DTYPE_AT)


@pytest.mark.parametrize(
    "text", ["np.zeros(2)", "np.full(2, 1.5)", "np.sum(x, 0)", "np.linspace(0, 2, 3)"]
)
def test_no_dtype_is_read_where_none_is_given(text):
    node = _call(text)
    assert given_dtype(ir.callee(node.func), node.args, {}) is None


def test_a_dtype_hidden_in_starred_arguments_is_not_taken_for_none():
    node = _call("np.zeros(*shape_and_dtype)")
    assert isinstance(given_dtype(np.zeros, node.args, {}), ast.Starred)


def filled_in_python_types(k):
    y = np.full(3, k[0] * 3.3, dtype=int)  # [1, 1, 1]: Numba's np.full gave 1.03 (no cast)
    return np.sum(y * k)


def test_python_types_as_dtypes_are_numpys_in_jitted_code():
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitFallbackWarning)  # compiled, not run in Python
        g = s2sad.grad(filled_in_python_types, jit=True)(K)
    np.testing.assert_allclose(g, _central(filled_in_python_types), atol=1e-6)


def integers_of_a_literal(k):
    y = np.array([k[0] * 3.3, k[1]], dtype=int)
    return np.sum(y * k[:2])


def truths_of_a_literal(k):
    y = np.asarray([[k[0] - 0.5, k[1]], [k[2], 0.0]], dtype=bool)
    return np.sum(y * k[:2])


@pytest.mark.parametrize("f", [integers_of_a_literal, truths_of_a_literal])
def test_a_literal_of_differentiated_values_cast_to_integers_truncates(f):
    """As np.array casts (`unsafe`): its np.stack raised TypeError ('same_kind')."""
    np.testing.assert_allclose(s2sad.grad(f)(K), _central(f), atol=1e-6)
