"""Code s2sad writes without example arguments (`s2sad emit`, `s2sad.source(g)` before a call):
a `wrt` it cannot connect to the body's reads is refused, never answered with zeros, and the
gradients a plain emitted module returns have their inputs' types, dtypes and shapes."""

import importlib.util

import numpy as np
import pytest
from conftest import assert_like_input, load_module

import s2sad
from s2sad import cli
from s2sad.errors import NonDifferentiableInputError, WrtError

TREES = """
import numpy as np


def plain(p, y):
    return np.sum(np.tanh(y @ p["W"]))


def through_helper(p, y):
    return loss_of(p, y)


def loss_of(q, y):
    return np.sum(np.tanh(y @ q["W"]))


def by_attribute(p, y):
    return np.sum(np.tanh(y @ p.W))


def rk4(f, y, h, n):
    for _ in range(n):
        k1 = f(y)
        k2 = f(y + 0.5 * h * k1)
        k3 = f(y + 0.5 * h * k2)
        k4 = f(y + h * k3)
        y = y + h / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
    return y


def node_loss(p, y0, target):
    def rhs(y):
        return np.tanh(y @ p["W"] + p["b"]) - 0.1 * y
    yT = rk4(rhs, y0, 0.05, 4)
    return np.mean((yT - target) ** 2)


def by_variable_key(p, y):
    k = "W"
    return np.sum(p[k] * y)


def independent(x, y):
    return np.sum(x)


def listed(ws, x):
    return np.sum(ws[0] * x) + np.sum(np.sin(ws[1]))


def listed_by_step(ws, x):
    s = 0.0
    for k in range(len(ws)):
        s = s + np.sum(np.tanh(ws[k]) * x)
    return s
"""

PLAIN = """
import numpy as np


def kalman(q, r, ys, A):
    m = np.zeros(2)
    P = np.eye(2)
    nll = 0.0
    for y in ys:
        m = A @ m
        P = A @ P @ A.T + q * np.eye(2)
        s = P[0, 0] + r
        nll = nll + 0.5 * (np.log(s) + (y - m[0]) ** 2 / s)
        k = P[:, 0] / s
        m = m + k * (y - m[0])
        P = P - np.outer(k, P[0, :])
    return nll


def both(x, y):
    return np.sum(x + y)


def product(x, y):
    return np.sum(x * y)


def rebound(v, A):
    for k in range(3):
        v = np.tanh(A @ v)
    return np.sum(v)
"""


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    directory = tmp_path_factory.mktemp("emit_trees")
    module = load_module(directory, "emit_trees_src", TREES)
    return directory / "emit_trees_src.py", module


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    directory = tmp_path_factory.mktemp("emit_plain")
    module = load_module(directory, "emit_plain_src", PLAIN)
    return directory / "emit_plain_src.py", module


def _emitted(path, func, wrt, mode="grad", name="emitted"):
    """The module `s2sad emit path:func --wrt ... --mode mode` writes, imported."""
    text = cli.emit_text(f"{path}:{func}", list(wrt), mode)
    out = path.parent / f"{name}_{func}_{mode}.py"
    out.write_text(text)
    spec = importlib.util.spec_from_file_location(out.stem, out)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return text, module


def _fd(f, args, index, key=None, eps=1e-6):
    """Central differences of `f(*args)` in `args[index]` (its leaf `key` for a dict)."""
    base = args[index] if key is None else args[index][key]
    grad = np.zeros(np.shape(base))
    for i in np.ndindex(grad.shape):
        values = []
        for sign in (1, -1):
            moved = np.array(base, dtype=np.float64)
            moved[i] += sign * eps
            new = list(args)
            new[index] = moved if key is None else {**args[index], key: moved}
            values.append(f(*new))
        grad[i] = (values[0] - values[1]) / (2 * eps)
    return grad


def _line_of(path, fragment: str) -> int:
    """The number of the first line of the file at `path` holding `fragment`."""
    lines = path.read_text().splitlines()
    return next(k + 1 for k, line in enumerate(lines) if fragment in line)


def _tree_args():
    return {"W": 0.5 * np.eye(2), "b": np.zeros(2)}, np.ones((3, 2))


# ------------------------------------------------------------------- wrt it cannot connect: refused


def test_a_leaf_of_a_tree_without_example_arguments_is_refused_at_its_read(trees):
    """`--wrt p.W` without example arguments: generic code does not know p's structure, and used
    to return zeros_like(p["W"]) (exit 0). Refused at the line reading p["W"], with the way out."""
    path, module = trees
    with pytest.raises(WrtError) as info:
        cli.emit_text(f"{path}:plain", ["p.W"], "grad")
    error = info.value
    assert (error.file, error.line) == (str(path), _line_of(path, 'y @ p["W"]'))
    assert "wrt=\"p['W']\" names a leaf of the parameter p" in error.what
    assert "inputs(rng)" in error.hint and "{'plain': (args...)}" in error.hint
    with pytest.raises(WrtError, match="names a leaf of the parameter p"):
        s2sad.source(s2sad.grad(module.plain, wrt="p.W"))
    # with arguments, the same transform is right
    p, y = _tree_args()
    g = s2sad.grad(module.plain, wrt="p.W")
    expected = _fd(module.plain, (p, y), 0, "W")
    np.testing.assert_allclose(g(p, y), expected, rtol=1e-6)
    np.testing.assert_allclose(g(p, y), np.full((2, 2), 2.3593432), rtol=1e-6)
    assert "dp_W = matmul_vjp_rhs" in s2sad.source(g, p, y)


@pytest.mark.parametrize(
    "func, wrt, read",
    [
        ("node_loss", "p.W", 'p["W"] + p["b"]'),
        ("node_loss", "p.b", 'p["W"] + p["b"]'),
        ("by_attribute", "p.W", "y @ p.W"),
    ],
)
def test_leaves_read_in_a_closure_or_as_attributes_are_refused(trees, func, wrt, read):
    path, _ = trees
    with pytest.raises(WrtError) as info:
        cli.emit_text(f"{path}:{func}", [wrt], "grad")
    assert info.value.line == _line_of(
        path, read
    ) and "cannot tell which read of p is that leaf" in str(info.value)


def test_a_whole_dict_differentiated_as_an_array_is_refused_at_its_key(trees):
    """`s2sad emit plain` (wrt p, a dict) wrote `dp = zeros_like(p)`, `np.add.at(dp, "W", ...)`,
    which raised ValueError when called: refused at the line reading p["W"], also where a
    helper reads it (inlined) or a closure passed to another function does."""
    path, _ = trees
    cases = [
        ("plain", 'y @ p["W"]', "p"),
        ("through_helper", 'y @ q["W"]', "p"),
        ("node_loss", 'p["W"] + p["b"]', "p"),
    ]
    for func, read, shown in cases:
        with pytest.raises(NonDifferentiableInputError) as info:
            cli.emit_text(f"{path}:{func}", [], "grad")
        error = info.value
        assert (error.file, error.line) == (str(path), _line_of(path, read)), func
        assert (
            f"{shown}, which is differentiated, is read by the string key 'W', as a dict"
            in error.what
        )
        assert "inputs(rng)" in error.hint


def test_a_parameter_the_output_does_not_read_keeps_its_true_zero(trees):
    """Not refused: y is a parameter, and its gradient is zero, as with arguments."""
    path, module = trees
    x, y = np.ones(2), np.ones(3, dtype=np.float32)
    _, emitted = _emitted(path, "independent", ["y"])
    got = emitted.grad_independent(x, y)
    expected = s2sad.grad(module.independent, wrt="y")(x, y)
    np.testing.assert_array_equal(got, np.zeros(3))
    np.testing.assert_array_equal(expected, np.zeros(3))
    assert_like_input(got, y)
    assert_like_input(expected, y)


def test_the_way_out_example_arguments_emit_the_leaf(tmp_path):
    """The refusal's hint: an `inputs(rng)` function in the file gives the tree's structure, and
    `--wrt p.W` then emits the leaf's gradient (the closure passed to rk4 included)."""
    source = TREES + (
        "\n\ndef inputs(rng):\n"
        "    p = {'W': 0.3 * rng.normal(size=(3, 3)), 'b': 0.1 * rng.normal(size=3)}\n"
        "    return {'node_loss': (p, rng.normal(size=(4, 3)), rng.normal(size=(4, 3)))}\n"
    )
    module = load_module(tmp_path, "emit_trees_inputs", source)
    path = tmp_path / "emit_trees_inputs.py"
    text, emitted = _emitted(path, "node_loss", ["p.W"])
    assert "def grad_node_loss(p, y0, target):" in text
    p, y0, target = module.inputs(np.random.default_rng(3))["node_loss"]
    got = emitted.grad_node_loss(p, y0, target)
    np.testing.assert_allclose(got, s2sad.grad(module.node_loss, wrt="p.W")(p, y0, target))
    np.testing.assert_allclose(got, _fd(module.node_loss, (p, y0, target), 0, "W"), rtol=1e-6)


# ------------------------------------------------------------- plain modules return like inputs


@pytest.mark.parametrize(
    "q, A",
    [
        (np.array(0.3), np.array([[1.0, 0.1], [-0.1, 0.95]])),
        (0.3, np.array([[1.0, 0.1], [-0.1, 0.95]])),
        (np.float32(0.3), np.array([[1.0, 0.1], [-0.1, 0.95]], dtype=np.float32)),
        (np.float64(0.3), np.array([[1.0, 0.1], [-0.1, 0.95]]).T),
    ],
    ids=["0-d array", "python float", "float32", "float64 scalar, F-ordered"],
)
def test_plain_module_gradients_have_their_inputs_kinds(plain, q, A):
    """A 0-d array gave np.float64, a float32 A a float64 dA (t17.py): now each gradient has the
    type, dtype and shape in-process s2sad.grad gives it, and the same numbers."""
    path, module = plain
    text, emitted = _emitted(path, "kalman", ["q", "A"])
    assert "    return like_inputs((dq, dA), (q, A))" in text
    ys = np.random.default_rng(0).normal(size=12)
    got = emitted.grad_kalman(q, 0.5, ys, A)
    expected = s2sad.grad(module.kalman, wrt=("q", "A"))(q, 0.5, ys, A)
    for g, e, x in zip(got, expected, (q, A)):
        assert_like_input(g, x)
        assert_like_input(e, x)
        tol = 1e-5 if np.result_type(x) == np.float32 else 1e-10
        np.testing.assert_allclose(g, e, rtol=tol)
    exact = (float(np.asarray(q)), 0.5, ys, np.asarray(A, dtype=np.float64))
    tol = 1e-3 if np.result_type(A) == np.float32 else 1e-6
    np.testing.assert_allclose(got[1], _fd(module.kalman, exact, 3), rtol=tol, atol=tol)


def test_value_and_grad_and_vjp_modules_return_like_inputs(plain):
    path, module = plain
    v, A = np.ones(3, dtype=np.float32), 0.5 * np.eye(3)
    text, emitted = _emitted(path, "rebound", ["v", "A"], "value_and_grad")
    value, (dv, dA) = emitted.value_and_grad_rebound(v, A)
    e_value, (e_dv, e_dA) = s2sad.value_and_grad(module.rebound, wrt=("v", "A"))(v, A)
    assert value == pytest.approx(e_value)
    for g, e, x in ((dv, e_dv, v), (dA, e_dA, A)):
        assert_like_input(g, x)
        np.testing.assert_allclose(g, e, rtol=1e-6)
    _, emitted = _emitted(path, "rebound", ["v", "A"], "vjp")
    out, pullback = emitted.vjp_rebound(v, A)
    for g, e, x in zip(pullback(np.float64(1.0)), (e_dv, e_dA), (v, A)):
        assert_like_input(g, x)
        np.testing.assert_allclose(g, e, rtol=1e-6)


def test_an_input_the_code_rebinds_is_read_as_given(plain):
    """`v = np.tanh(A @ v)` in a loop rebinds v: the gradient's kind is read from v as given."""
    path, module = plain
    text, emitted = _emitted(path, "rebound", ["v"])
    assert "    v_given = v\n" in text and "    return like_input(dv, v_given)" in text
    v, A = np.ones((3, 1), dtype=np.float32), 0.5 * np.eye(3)
    got = emitted.grad_rebound(v, A)
    assert_like_input(got, v)
    np.testing.assert_allclose(got, s2sad.grad(module.rebound)(v, A), rtol=1e-6)
    exact = (v.astype(np.float64), A)
    np.testing.assert_allclose(got, _fd(module.rebound, exact, 0), rtol=1e-4)


def test_two_gradients_computed_as_one_array_are_two_arrays_to_write_into(plain):
    """dx and dy of sum(x + y) are one read-only broadcast array in the generated code."""
    path, _ = plain
    _, emitted = _emitted(path, "both", ["x", "y"])
    x, y = np.ones(3), np.ones(3)
    dx, dy = emitted.grad_both(x, y)
    assert dx is not dy and not np.may_share_memory(dx, dy)
    assert dx.flags.writeable and dy.flags.writeable
    dx += 1.0
    np.testing.assert_array_equal(dy, np.ones(3))
    np.testing.assert_array_equal(dx, np.full(3, 2.0))


@pytest.mark.parametrize(
    "y, kind",
    [
        (np.array([1, 2, 3]), np.ndarray),
        (np.array([1, 2, 3], dtype=np.int32), np.ndarray),
        (np.array([True, False, True]), np.ndarray),
        (np.int64(2), float),
        (2, float),
    ],
    ids=["int64", "int32", "bool", "np.int64", "python int"],
)
def test_an_integer_or_bool_inputs_gradient_is_not_truncated_to_its_dtype(plain, y, kind):
    """d/dy sum(x * y) is x = [0.5, 1.5, 2.7] whatever y's dtype: cast to y's integer dtype it
    was [0, 1, 2] (to bool, all True): a silently wrong number (break-it review)."""
    path, _ = plain
    _, emitted = _emitted(path, "product", ["x", "y"])
    x = np.array([0.5, 1.5, 2.7])
    _, dy = emitted.grad_product(x, y)
    assert type(dy) is kind
    expected = np.sum(x) if np.ndim(y) == 0 else x
    np.testing.assert_array_equal(dy, expected)
    if kind is np.ndarray:
        assert dy.dtype == np.float64 and dy.shape == np.shape(y)


def test_a_dict_read_by_a_variable_key_in_generic_code_is_a_clear_error(trees):
    """`k = "W"; p[k]` gets past the transform-time refusal (its key is not a constant there):
    the module's call raised NumPy's `entry not a 2- or 3- tuple`; now an error that says what
    happened and what to do."""
    path, _ = trees
    _, emitted = _emitted(path, "by_variable_key", ["p"])
    with pytest.raises(TypeError, match="a dict read by the key 'W'.*inputs\\(rng\\)"):
        emitted.grad_by_variable_key({"W": np.ones(2)}, np.ones(2))


@pytest.mark.parametrize(
    "ws",
    [
        [np.array([0.3, -1.2, 2.0]), np.array([1.5, 0.1, -0.7])],
        (np.array([0.3, -1.2, 2.0]), np.array([1.5, 0.1, -0.7])),
        [np.array([0.3, -1.2, 2.0]), np.array([1.5, 0.1]), np.ones((2, 2))],  # shapes differ
        [0.3, -1.2, 2.0],
    ],
    ids=["list", "tuple", "shapes differ", "floats"],
)
def test_a_list_read_by_index_in_generic_code_gets_a_list_of_gradients(trees, ws):
    """`ws[0]`, `ws[1]` of a list, in code made without example arguments: NumPy's `Field
    elements must be 2- or 3-tuples` from getitem_vjp before (break-it review); now what
    in-process grad gives, a list (tuple) of gradients each like its element."""
    path, module = trees
    _, emitted = _emitted(path, "listed", ["ws"])
    x = np.array([0.5, 1.5, 2.7]) if np.ndim(ws[0]) else 0.7
    got = emitted.grad_listed(ws, x)
    expected = s2sad.grad(module.listed)(ws, x)
    assert type(got) is type(ws) and len(got) == len(ws)
    for k, (g, e, w) in enumerate(zip(got, expected, ws)):
        assert type(g) is type(e) and np.shape(g) == np.shape(w)
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)
        fd = _fd(lambda v, x: module.listed(ws[:k] + type(ws)([v]) + ws[k + 1 :], x), [w, x], 0)
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6)


def test_a_list_indexed_by_a_computed_index_is_refused_with_what_to_pass(trees):
    """Generic code adds `ws[k]`'s cotangents into one array, which a list is not: the module
    says so and what to pass (NumPy's 'Field elements must be 2- or 3-tuples' before); an
    array of the elements gets its gradient."""
    path, module = trees
    _, emitted = _emitted(path, "listed_by_step", ["ws"])
    x = np.array([0.5, 1.5, 2.7])
    ws = [np.array([0.3, -1.2, 2.0]), np.array([1.5, 0.1, -0.7])]
    with pytest.raises(TypeError, match=r"np\.stack"):
        emitted.grad_listed_by_step(ws, x)
    stacked = np.stack(ws)
    got = emitted.grad_listed_by_step(stacked, x)
    np.testing.assert_allclose(got, (1.0 - np.tanh(stacked) ** 2) * x, rtol=1e-12)
