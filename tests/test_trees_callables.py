"""Programs as JAX users write them: parameter trees (dicts, lists, tuples, namedtuples,
dataclasses, registered classes) in every transform, `has_aux=True`, and the callables the
transforms take (bound methods, functools.partial, lambdas, functools.wraps wrappers,
staticmethod/classmethod), and `register_vjp` for functions with optional parameters. Every
gradient is checked against central differences in float64, leaf by leaf, with the structure,
shapes and dtypes of the arguments; the jitted transforms (compiled once, in one test) give the
same numbers as the Python ones. The README's examples for these features are the `test_readme_*`
tests."""

from __future__ import annotations

import dataclasses
import functools
from collections import namedtuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import s2sad
from conftest import check_jvp, check_vjp
from s2sad.transformed import Transformed
from s2sad.trees import flatten, unflatten

EPS = 1e-6


def rand(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-1.0, 1.0, size=shape)


def fd_grad(f, args, index, eps=EPS):
    """Central differences of scalar `f(*args)` in every float leaf of `args[index]`, as a tree
    of the same structure."""
    d, leaves = flatten(args[index])
    grads = []
    for k, leaf in enumerate(leaves):
        arr = np.array(leaf, dtype=float)
        g = np.zeros_like(arr)
        for i in np.ndindex(arr.shape):
            parts = []
            for sign in (1.0, -1.0):
                moved = arr.copy()
                moved[i] += sign * eps
                new = list(leaves)
                new[k] = moved if np.ndim(leaf) else float(moved)
                call = list(args)
                call[index] = unflatten(d, new)
                parts.append(float(f(*call)))
            g[i] = (parts[0] - parts[1]) / (2 * eps)
        grads.append(g if np.ndim(leaf) else float(g))
    return unflatten(d, grads)


def assert_tree_close(actual, expected, like, rtol=1e-6, atol=1e-8):
    """Same structure as `like`, each leaf with its leaf's shape and dtype, close to expected."""
    da, la = flatten(actual)
    dl, ll = flatten(like)
    de, le = flatten(expected)
    assert da == dl, f"structure {da} != {dl}"
    assert type(actual) is type(like)
    for a, e, x in zip(la, le, ll):
        assert np.shape(a) == np.shape(x)
        if isinstance(x, np.ndarray):
            assert isinstance(a, np.ndarray) and a.dtype == x.dtype
        else:
            assert type(a) is type(x)
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol)


# --------------------------------------------------------------------------- trees
def mlp_loss(params, x, y):
    h = np.tanh(x @ params["W1"] + params["b1"])
    out = h @ params["W2"] + params["b2"]
    return np.mean((out - y) ** 2)


def make_params(seed=0):
    return {
        "W1": rand(3, 4, seed=seed),
        "b1": rand(4, seed=seed + 1),
        "W2": rand(4, 2, seed=seed + 2),
        "b2": 0.1,
    }


X, Y = rand(5, 3, seed=10), rand(5, 2, seed=11)


def test_dict_params_grad_value_and_grad_vjp_jvp():
    p = make_params()
    g = s2sad.grad(mlp_loss)(p, X, Y)
    assert_tree_close(g, fd_grad(mlp_loss, (p, X, Y), 0), p)
    value, g2 = s2sad.value_and_grad(mlp_loss)(p, X, Y)
    assert value == pytest.approx(mlp_loss(p, X, Y), rel=1e-14)
    assert_tree_close(g2, g, p, rtol=1e-14)
    out, pullback = s2sad.vjp(mlp_loss)(p, X, Y)
    assert_tree_close(pullback(2.0), {k: 2 * v for k, v in g.items()}, p, rtol=1e-14)
    t = {k: np.ones_like(v) if isinstance(v, np.ndarray) else 1.0 for k, v in p.items()}
    out, dot = s2sad.jvp(mlp_loss)(p, X, Y, tangent=t)
    expected = sum(np.sum(g[k] * t[k]) for k in p)
    assert dot == pytest.approx(expected, rel=1e-12)
    # wrt a tuple: the tree and a plain array
    gp, gx = s2sad.grad(mlp_loss, wrt=("params", "x"))(p, X, Y)
    assert_tree_close(gp, g, p, rtol=1e-14)
    np.testing.assert_allclose(gx, fd_grad(mlp_loss, (p, X, Y), 1), rtol=1e-6)


def test_float32_leaves_keep_their_dtype_and_trees_are_not_changed():
    p = {k: np.asarray(v, dtype=np.float32) for k, v in make_params().items()}
    before = {k: v.copy() for k, v in p.items()}
    g = s2sad.grad(mlp_loss)(p, X, Y)
    assert all(g[k].dtype == np.float32 and g[k].shape == p[k].shape for k in p)
    assert all(np.array_equal(p[k], before[k]) for k in p)


Pair = namedtuple("Pair", "W b")


@dataclasses.dataclass
class Linear:
    W: np.ndarray
    b: float


class Registered:
    def __init__(self, W, b, name="layer"):
        self.W, self.b, self.name = W, b, name


s2sad.register_tree(
    Registered,
    lambda r: ({"W": r.W, "b": r.b}, r.name),
    lambda name, children: Registered(children["W"], children["b"], name),
)


def affine_attrs(p, x):
    return np.sum(np.sin(x @ p.W + p.b))


def affine_unpacked(p, x):
    W, b = p
    return np.sum(np.sin(x @ W + b))


def affine_nested(p, x):
    return np.sum(np.sin(x @ p["layer"][0] + p["layer"][1])) * p["scale"]


def test_tree_kinds_each_differentiate_with_their_structure():
    W, b = rand(3, 2, seed=1), rand(2, seed=2)
    cases = [
        (affine_attrs, Pair(W, b)),
        (affine_attrs, Linear(W, 0.3)),
        (affine_unpacked, (W, b)),
        (affine_unpacked, [W, b]),
        (affine_unpacked, Pair(W, b)),
        (affine_nested, {"layer": (W, b), "scale": 1.5}),
    ]
    for f, p in cases:
        g = s2sad.grad(f)(p, X)
        assert_tree_close(g, fd_grad(f, (p, X), 0), p)
    r = Registered(W, b)
    g = s2sad.grad(affine_attrs)(r, X)
    assert isinstance(g, Registered) and g.name == "layer"
    expected = fd_grad(affine_attrs, (Pair(W, b), X), 0)
    np.testing.assert_allclose(g.W, expected.W, rtol=1e-6)
    np.testing.assert_allclose(g.b, expected.b, rtol=1e-6)


def forward_layers(layers, x):
    for W, b in layers:
        x = np.tanh(x @ W + b)
    return np.sum(x**2)


def forward_enumerate(layers, x):
    total = 0.0
    for i, layer in enumerate(layers):
        x = np.tanh(x @ layer["W"])
        total = total + (i + 1) * np.sum(x)
    return total + len(layers)


def forward_zip_comprehension(Ws, bs, x):
    for W, b in zip(Ws, bs):
        x = np.sin(x @ W + b)
    penalty = sum([np.sum(W**2) for W in Ws])
    return np.sum(x) + 0.1 * penalty + np.sum(Ws[-1])


LAYERS = [(rand(3, 4, seed=3), rand(4, seed=4)), (rand(4, 2, seed=5), rand(2, seed=6))]


def test_loops_over_a_list_of_layers_are_unrolled():
    g = s2sad.grad(forward_layers)(LAYERS, X)
    assert_tree_close(g, fd_grad(forward_layers, (LAYERS, X), 0), LAYERS)
    layers = [{"W": W} for W, _ in LAYERS]
    g = s2sad.grad(forward_enumerate)(layers, X)
    assert_tree_close(g, fd_grad(forward_enumerate, (layers, X), 0), layers)
    Ws, bs = [W for W, _ in LAYERS], tuple(b for _, b in LAYERS)
    args = (Ws, bs, X)
    gW, gb = s2sad.grad(forward_zip_comprehension, wrt=(0, 1))(*args)
    assert_tree_close(gW, fd_grad(forward_zip_comprehension, args, 0), Ws)
    assert_tree_close(gb, fd_grad(forward_zip_comprehension, args, 1), bs)
    # another length is another specialization
    g3 = s2sad.grad(forward_layers)(LAYERS + [(rand(2, 2, seed=7), rand(2, seed=8))], X)
    assert len(g3) == 3


def test_wrt_names_a_part_of_a_tree():
    p = make_params()
    full = s2sad.grad(mlp_loss)(p, X, Y)
    np.testing.assert_allclose(s2sad.grad(mlp_loss, wrt="params.W1")(p, X, Y), full["W1"])
    np.testing.assert_allclose(s2sad.grad(mlp_loss, wrt="params['b1']")(p, X, Y), full["b1"])
    nested = {"layer": (rand(3, 2, seed=1), rand(2, seed=2)), "scale": 1.5}
    g = s2sad.grad(affine_nested, wrt="p['layer'][1]")(nested, X)
    np.testing.assert_allclose(g, fd_grad(affine_nested, (nested, X), 0)["layer"][1], rtol=1e-6)
    with pytest.raises(s2sad.WrtError, match="no key 'W3'"):
        s2sad.grad(mlp_loss, wrt="params.W3")(p, X, Y)


def predict(params, x):
    return np.tanh(x @ params["W"] + params["b"])


def loss_calls_helper(params, x):
    return np.sum(predict(params, x) ** 2) + np.sum(params["W"] ** 2)


def penalty_of(cfg):
    return cfg["a"] * 2.0 + cfg["b"][0]


def constant_tree_helper(x, cfg):
    return np.sum(x**2) * penalty_of(cfg)  # penalty_of(cfg) does not depend on x


def n_of(cfg):
    return cfg["n"]


def tree_calls_in_conditions(x, cfg):
    for _ in range(n_of(cfg)):
        x = x * 2.0
    if n_of(cfg) > 1:
        x = x + 1.0
    while x[0] < n_of(cfg) * 10:
        x = x * 1.5
    return np.sum(x)


def test_calls_passing_trees_in_loop_headers_and_conditions():
    """(8x + 1) * 1.5**3 at x = 1 with n = 3: conditions are kept as written by normalization,
    so the calls in them are computed before (and, in a while, at the end of each trip)."""
    g = s2sad.grad(tree_calls_in_conditions)(np.ones(2), {"n": 3})
    np.testing.assert_allclose(g, [27.0, 27.0], rtol=1e-14)


def test_a_helper_given_only_constant_trees_is_inlined_too():
    x, cfg = rand(3, seed=1), {"a": 1.5, "b": [0.5]}
    np.testing.assert_allclose(s2sad.grad(constant_tree_helper)(x, cfg), 2 * x * 3.5, 1e-14)


def test_a_tree_passed_to_a_helper_is_inlined_with_it():
    p = {"W": rand(3, 2, seed=1), "b": rand(2, seed=2)}
    g = s2sad.grad(loss_calls_helper)(p, X)
    assert_tree_close(g, fd_grad(loss_calls_helper, (p, X), 0), p)
    out, dots = s2sad.jacobian(predict)(p, X), None
    assert out["W"].shape == (5, 2, 3, 2) and out["b"].shape == (5, 2, 2)
    e = np.zeros((3, 2))
    e[1, 0] = 1.0
    _, dot = s2sad.jvp(predict)(p, X, tangent={"W": e, "b": np.zeros(2)})
    np.testing.assert_allclose(np.tensordot(out["W"], e, axes=2), dot, rtol=1e-12)
    del dots


def cubic(w, cfg):
    return np.sum(w**3) * cfg["a"] + cfg["shift"][0]


def test_hessian_with_a_tree_beside_and_in_a_leaf():
    w = rand(3, seed=1)
    h = s2sad.hessian(cubic)(w, {"a": 2.0, "shift": [1.0]})
    np.testing.assert_allclose(h, np.diag(12.0 * w), rtol=1e-12)
    p = {"W": rand(3, 2, seed=1), "b": rand(2, seed=2)}
    hb = s2sad.hessian(loss_calls_helper, wrt="params.b")(p, X)
    assert hb.shape == (2, 2)
    np.testing.assert_allclose(hb, hb.T, rtol=1e-10, atol=1e-12)
    with pytest.raises(s2sad.S2SADError, match="hessian takes one array"):
        s2sad.hessian(loss_calls_helper)(p, X)


def broadcast_tree(p, x):
    return np.sum(np.sin(p["scale"] * x + p["shift"][0]) * p["shift"][1])


@settings(max_examples=12, deadline=None)
@given(
    shape=st.lists(st.integers(1, 3), min_size=1, max_size=3),
    data=st.data(),
)
def test_tree_leaves_broadcast_and_get_their_own_shapes(shape, data):
    """Leaves broadcast against x (a shape of 1, a missing axis, a Python float): each
    gradient has its leaf's shape, summed over the broadcast axes."""

    def leaf_shape():
        kept = data.draw(st.integers(0, len(shape)))
        return tuple(n if data.draw(st.booleans()) else 1 for n in shape[len(shape) - kept :])

    x = rand(*shape, seed=1)
    p = {
        "scale": rand(*leaf_shape(), seed=2),
        "shift": (rand(*leaf_shape(), seed=3), data.draw(st.floats(0.5, 2.0))),
    }
    g = s2sad.grad(broadcast_tree)(p, x)
    assert_tree_close(g, fd_grad(broadcast_tree, (p, x), 0), p)


# --------------------------------------------------------------------------- refusals
def tree_dynamic_key(layers, x, i):
    return np.sum(x @ layers[i])


def tree_to_numpy(params, x):
    return np.sum(x) * np.sum(params)


def tree_written(params, x):
    params["W"] = params["W"] * 2
    return np.sum(x @ params["W"])


def tree_break(layers, x):
    for W in layers:
        x = x @ W
        break
    return np.sum(x)


def tree_returned(params, x):
    return params


def tree_bad_key(params, x):
    return np.sum(x @ params["V"])


@pytest.mark.parametrize(
    "f, args, match",
    [
        (tree_dynamic_key, ([rand(3, 2)], X, 0), r"constant keys, not `layers\[i\]`"),
        (tree_to_numpy, ({"W": rand(3, 2)}, X), "passed to np.sum"),
        (tree_written, ({"W": rand(3, 2)}, X), "does not write into a parameter tree"),
        (tree_break, ([rand(3, 3)], X), "break"),
        (tree_returned, ({"W": rand(3, 2)}, X), "cannot return a parameter tree"),
        (tree_bad_key, ({"W": rand(3, 2)}, X), "has no key 'V'"),
    ],
)
def test_what_trees_cannot_do_is_refused_at_its_line(f, args, match):
    with pytest.raises(s2sad.UnsupportedSyntaxError, match=match) as info:
        s2sad.grad(f)(*args)
    assert f"{__file__}:" in str(info.value)


def test_jacobian_of_a_tree_per_basis_equals_the_batched_one():
    p = {"W": rand(3, 2, seed=1), "b": 0.5}
    batched = s2sad.jacobian(predict)(p, X)
    for mode in ("forward", "reverse"):
        one = s2sad.jacobian(predict, mode=mode, batched=False)(p, X)
        assert_tree_close(one, batched, batched, rtol=1e-12)
    both = s2sad.jacobian(predict, wrt=(0, 1), batched=False)(p, X)
    assert_tree_close(both[0], batched, batched, rtol=1e-12)
    assert both[1].shape == (5, 2, 5, 3)


# --------------------------------------------------------------------------- has_aux
def loss_with_aux(w, x):
    r = x @ w
    aux = {"residual": r, "count": len(r)}  # (a dict: left out of the transform)
    return np.sum(r**2), aux


def test_has_aux_grad_value_and_grad_vjp():
    w = rand(3, seed=1)
    g, aux = s2sad.grad(loss_with_aux, has_aux=True)(w, X)
    np.testing.assert_allclose(g, fd_grad(lambda w, x: loss_with_aux(w, x)[0], (w, X), 0), 1e-6)
    np.testing.assert_array_equal(aux["residual"], X @ w)
    assert aux["count"] == 5
    (value, aux2), g2 = s2sad.value_and_grad(loss_with_aux, has_aux=True)(w, X)
    assert value == pytest.approx(np.sum((X @ w) ** 2), rel=1e-14) and aux2["count"] == 5
    np.testing.assert_allclose(g2, g, rtol=1e-14)
    out, pullback, aux3 = s2sad.vjp(loss_with_aux, has_aux=True)(w, X)
    np.testing.assert_allclose(pullback(1.0), g, rtol=1e-14)
    assert aux3["count"] == 5


def returns_three(w):
    return np.sum(w), w, w


def test_has_aux_refusals_and_the_hint_without_it():
    with pytest.raises(s2sad.UnsupportedSyntaxError, match="pair") as info:
        s2sad.grad(returns_three, has_aux=True)(rand(2))
    assert f"{__file__}:{returns_three.__code__.co_firstlineno + 1}:" in str(info.value)
    with pytest.raises(s2sad.NonScalarOutputError, match="has_aux=True"):
        s2sad.grad(loss_with_aux)(rand(3), X)
    with pytest.raises(ValueError, match="has_aux"):
        Transformed(loss_with_aux, 0, "jvp", False, True)


# --------------------------------------------------------------------------- callables
class Model:
    SCALE = 2.0

    def __init__(self, seed=0):
        self.W = rand(3, 2, seed=seed)
        self.b = rand(2, seed=seed + 1)
        self.name = "model"

    def predict(self, x):
        return np.tanh(x @ self.W + self.b)

    def loss(self, x, y):
        return np.mean((self.predict(x) - y) ** 2) + self.penalty(self.W)

    @staticmethod
    def penalty(W):
        return 0.01 * np.sum(W**2)

    @classmethod
    def scaled(cls, x):
        return np.sum(np.sin(x)) * 2.0


def _model_loss(W, b, x, y):
    m = Model()
    m.W, m.b = W, b
    return m.loss(x, y)


def test_bound_methods_self_is_constant_unless_named():
    m, y = Model(), rand(5, 2, seed=3)
    gx = s2sad.grad(m.loss)(X, y)
    np.testing.assert_allclose(gx, fd_grad(m.loss, (X, y), 0), rtol=1e-6)
    gW = s2sad.grad(m.loss, wrt="self.W")(X, y)
    np.testing.assert_allclose(gW, fd_grad(_model_loss, (m.W, m.b, X, y), 0), rtol=1e-6)
    g_self = s2sad.grad(m.loss, wrt="self")(X, y)
    assert sorted(g_self) == ["W", "b"]  # the float attributes
    np.testing.assert_allclose(g_self["b"], fd_grad(_model_loss, (m.W, m.b, X, y), 1), 1e-6)
    np.testing.assert_allclose(s2sad.grad(Model.penalty)(m.W), 0.02 * m.W)
    np.testing.assert_allclose(s2sad.grad(Model.scaled)(X), 2 * np.cos(X))


class Dense:
    def __init__(self, W, b):
        self.W, self.b = W, b

    def __call__(self, x):
        return x @ self.W + self.b


class Net:
    SCALE = 1.0

    def __init__(self, seed=0):
        self.hidden = Dense(rand(3, 4, seed=seed), rand(4, seed=seed + 1))
        self.out = Dense(rand(4, 1, seed=seed + 2), rand(1, seed=seed + 3))
        self.owner = self  # a cycle: read as a leaf where it comes back

    def predict(self, x):
        return self.out(np.tanh(self.hidden(x)))

    @property
    def weights(self):
        return self.hidden.W

    def loss(self, x, y):
        return self.SCALE * np.mean((self.predict(x) - y) ** 2) + 0.0 * np.sum(self.weights)


def net_loss(net, x, y):
    return net.loss(x, y)


def _net_loss_W(W, x, y):
    net = Net()
    net.hidden.W = W
    return net.loss(x, y)


def test_a_callable_object_is_its_bound_call():
    layer = Dense(rand(3, 2, seed=1), rand(2, seed=2))
    g = s2sad.grad(lambda x: np.sum(layer(x) ** 2))(X)  # called inside: inlined
    np.testing.assert_allclose(g, 2 * (X @ layer.W + layer.b) @ layer.W.T, rtol=1e-12)
    out, pullback = s2sad.vjp(layer)(X)
    seed = rand(5, 2, seed=3)
    np.testing.assert_allclose(pullback(seed), seed @ layer.W.T, rtol=1e-14)
    jac = s2sad.jacobian(layer, wrt="self.b")(X)
    np.testing.assert_allclose(jac, np.broadcast_to(np.eye(2), (5, 2, 2)), rtol=1e-14)


def test_objects_passed_as_arguments_inline_their_methods():
    net, y = Net(), rand(5, 1, seed=4)
    gx = s2sad.grad(net_loss, wrt="x")(net, X, y)
    np.testing.assert_allclose(gx, fd_grad(net.loss, (X, y), 0), rtol=1e-6)
    g = s2sad.grad(net_loss, wrt="net")(net, X, y)
    assert sorted(g) == ["hidden", "out"] and sorted(g["hidden"]) == ["W", "b"]
    expected = fd_grad(_net_loss_W, (net.hidden.W, X, y), 0)
    np.testing.assert_allclose(g["hidden"]["W"], expected, rtol=1e-6)
    np.testing.assert_allclose(s2sad.grad(net.loss, wrt="self.hidden.W")(X, y), expected, 1e-6)


class Scaler:
    def __init__(self, w):
        self.w = w

    def scaled(self, x):
        return self.w * x

    def apply(self, x, power=2):
        return self.scaled(x) ** power


SCALER = Scaler(np.array([1.0, 2.0, 3.0]))


def uses_global_object(x):
    return np.sum(SCALER.apply(x))


def test_a_method_of_a_global_object_is_inlined_with_its_data_read_at_each_call():
    x = rand(3, seed=1)
    np.testing.assert_allclose(s2sad.grad(uses_global_object)(x), 2 * SCALER.w**2 * x, 1e-14)
    old = SCALER.w
    try:
        SCALER.w = np.array([3.0, 2.0, 1.0])
        np.testing.assert_allclose(s2sad.grad(uses_global_object)(x), 2 * SCALER.w**2 * x)
    finally:
        SCALER.w = old


GLOBAL_NET, Y5 = Net(seed=5), rand(5, 1, seed=6)


def uses_global_net(x):
    return GLOBAL_NET.loss(x, Y5)  # its methods and its layers' __call__ inlined


def test_a_global_objects_methods_and_callable_attributes_are_inlined():
    g = s2sad.grad(uses_global_net)(X)
    np.testing.assert_allclose(g, s2sad.grad(net_loss, wrt="x")(GLOBAL_NET, X, Y5), 1e-12)
    np.testing.assert_allclose(g, fd_grad(uses_global_net, (X,), 0), rtol=1e-6)


class TreeModel:
    """A JAX-style model: the parameters a tree passed to its methods, its data an attribute."""

    def __init__(self, scale):
        self.scale = scale

    def apply(self, p, x):
        return np.tanh(p["W"] @ x + p["b"]) * self.scale

    def loss(self, p, x):
        return np.sum(self.apply(p, x) ** 2)

    def __call__(self, p, x):
        return self.loss(p, x)


TREE_MODEL, X3 = TreeModel(1.5), rand(3, seed=7)


def model_loss(q):
    return TREE_MODEL.loss(q, X3)


@pytest.mark.parametrize(
    "f",
    [
        model_loss,
        lambda q: TREE_MODEL.loss(q, X3),  # a lambda, as in value_and_grad(lambda p: ...)
        lambda q: TREE_MODEL(q, X3),  # the object called: its __call__
        lambda q: TreeModel.loss(TREE_MODEL, q, X3),  # the class's function, self given
    ],
    ids=["method", "lambda", "call", "class-function"],
)
@pytest.mark.parametrize("jit", [False, True])
def test_a_tree_passed_to_a_method_of_a_global_object_is_inlined_with_it(f, jit):
    p = {"W": rand(2, 3, seed=8), "b": rand(2, seed=9)}
    g = s2sad.grad(f, jit=jit)(p)
    assert_tree_close(g, fd_grad(f, (p,), 0), p)


def ridge(w, X, y, lam=0.1):
    return np.sum((X @ w - y) ** 2) + lam * np.sum(w**2)


def test_partial_keywords_and_positional():
    w, Xb, y = rand(3, seed=1), rand(40, 3, seed=2), rand(40, seed=3)
    f = functools.partial(ridge, X=Xb, y=y)
    expected = 2 * Xb.T @ (Xb @ w - y) + 0.2 * w
    np.testing.assert_allclose(s2sad.grad(f)(w), expected, rtol=1e-12)
    g = functools.partial(ridge, w)
    np.testing.assert_allclose(s2sad.grad(g, wrt="lam")(Xb, y, 0.5), np.sum(w**2), rtol=1e-12)
    with pytest.raises(s2sad.WrtError) as info:
        s2sad.grad(f, wrt=4)
    assert "array(" not in str(info.value) and len(str(info.value)) < 300


def test_lambdas_found_by_their_code_positions():
    x = rand(3, seed=1)
    pair = [s2sad.grad(lambda w: np.sum(w**3)), s2sad.grad(lambda w: np.sum(np.sin(w)))]
    np.testing.assert_allclose(pair[0](x), 3 * x**2, rtol=1e-14)
    np.testing.assert_allclose(pair[1](x), np.cos(x), rtol=1e-14)
    square = lambda w: np.sum(w**2)  # noqa: E731
    assert "def grad_square(w)" in s2sad.source(s2sad.grad(square), x)


def twice(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return 2.0 * fn(*args, **kwargs)

    return wrapper


@twice
def decorated(x, c=1.0):
    return np.sum(x**2) * c


def test_functools_wraps_wrapper_is_differentiated_with_keywords():
    x = rand(3, seed=1)
    np.testing.assert_allclose(s2sad.grad(decorated)(x, c=3.0), 12.0 * x, rtol=1e-14)
    assert s2sad.grad(decorated, wrt="c")(x, c=3.0) == pytest.approx(2 * np.sum(x**2))
    assert "def grad_wrapper(x, c):" in s2sad.source(s2sad.grad(decorated), x, c=3.0)
    with pytest.raises(s2sad.NonDifferentiableInputError, match="argument 'x' is an integer"):
        s2sad.grad(decorated)(3, c=1.0)


def test_register_vjp_with_optional_parameters():
    def softplus_t(x, t=1.0, *, scale=1.0):
        return scale * t * np.log1p(np.exp(x / t))

    def rule(g, ans, x, t, scale):
        return g * scale / (1 + np.exp(-x / t)), None, None

    s2sad.register_vjp(softplus_t, rule)

    def uses(x):
        return np.sum(softplus_t(x)) + np.sum(softplus_t(x, 2.0, scale=3.0))

    x = rand(4, seed=1)
    expected = 1 / (1 + np.exp(-x)) + 3 / (1 + np.exp(-x / 2))
    np.testing.assert_allclose(s2sad.grad(uses)(x), expected, rtol=1e-14)


# --------------------------------------------------------------------------- class methods
class Affine:
    """Parameters in a dict, the model's functions on the class."""

    L2 = 0.05

    @staticmethod
    def apply(params, x):
        return np.tanh(x @ params["W"] + params["b"])

    @classmethod
    def loss(cls, params, x, y):
        return np.mean((cls.apply(params, x) - y) ** 2) + cls.L2 * np.sum(params["W"] ** 2)


def static_loss(params, x, y):
    return np.mean((Affine.apply(params, x) - y) ** 2)


def class_loss(params, x, y):
    return Affine.loss(params, x, y)


@dataclasses.dataclass
class Block:
    W: np.ndarray
    b: np.ndarray

    def __call__(self, x):
        return np.tanh(x @ self.W + self.b)


@dataclasses.dataclass
class Stack:
    first: Block
    second: Block
    scale: float

    def layer(self, x):
        return self.second(self.first(x)) * self.scale

    def loss(self, x, y):
        return np.mean((self.layer(x) - y) ** 2)


def stack_loss(model, x, y):
    return model.loss(x, y)  # a tree argument's methods, inlined with their reads of it


def test_static_and_class_methods_with_parameter_trees():
    p, y = {"W": rand(3, 2, seed=1), "b": rand(2, seed=2)}, rand(5, 2, seed=3)
    for f in (static_loss, class_loss):
        g = s2sad.grad(f)(p, X, y)
        assert_tree_close(g, fd_grad(f, (p, X, y), 0), p)
    text = s2sad.source(s2sad.grad(class_loss), p, X, y)
    assert "cls = " not in text and "# apply, line" in text  # cls is the class, not a copy
    check_vjp(lambda x: Affine.apply(p, x), (X,))


def test_a_dataclass_trees_methods_are_inlined():
    model = Stack(
        Block(rand(3, 4, seed=1), rand(4, seed=2)), Block(rand(4, 2, seed=3), rand(2, seed=4)), 1.5
    )
    y = rand(5, 2, seed=5)
    g = s2sad.grad(stack_loss)(model, X, y)
    assert type(g) is Stack and type(g.first) is Block and isinstance(g.scale, float)
    assert_tree_close(g, fd_grad(stack_loss, (model, X, y), 0), model)
    gx = s2sad.grad(stack_loss, wrt="x")(model, X, y)
    np.testing.assert_allclose(gx, fd_grad(stack_loss, (model, X, y), 1), rtol=1e-6)


# --------------------------------------------------------------------------- tree outputs
Stats = namedtuple("Stats", "mean spread")


def stats_tree(x, w):
    h = np.tanh(x * w)
    if np.sum(x) > 100.0:
        return {"value": np.sum(h), "parts": (h, Stats(np.mean(h), np.std(h)))}
    return {"value": np.sum(h**2), "parts": (h * w, Stats(mean=np.mean(h), spread=np.std(h)))}


def _tree_dot(a, b):
    return sum(np.sum(np.asarray(u) * np.asarray(v)) for u, v in zip(flatten(a)[1], flatten(b)[1]))


def test_tree_outputs_in_vjp_jvp_and_jacobian():
    """The output's structure comes back in the output, the output tangent and the Jacobian
    (output structure outside, the input's inside, as JAX's jacrev); a seed is a tree too."""
    x, w = rand(4, seed=1), rand(4, seed=2)
    out, pullback = s2sad.vjp(stats_tree, wrt="w")(x, w)
    expected_out = stats_tree(x, w)
    assert flatten(out)[0] == flatten(expected_out)[0]
    assert type(out["parts"][1]) is Stats
    text = s2sad.source(s2sad.vjp(stats_tree, wrt="w"), x, w)
    assert "parts_1_mean = np.mean(h)" in text and "value = np.sum(value_pow)" in text
    seed = {"value": 0.7, "parts": (rand(4, seed=3), Stats(0.2, -1.1))}
    got = pullback(seed)
    fd = fd_grad(lambda x, w: _tree_dot(seed, stats_tree(x, w)), (x, w), 1)
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-9)
    t = rand(4, seed=4)
    out2, dot = s2sad.jvp(stats_tree, wrt="w")(x, w, tangent=t)
    assert flatten(dot)[0] == flatten(expected_out)[0] and type(dot["parts"][1]) is Stats
    assert isinstance(dot["value"], float) or np.ndim(dot["value"]) == 0
    # <seed, J t> two ways
    assert _tree_dot(seed, dot) == pytest.approx(np.sum(got * t), rel=1e-10)
    _, rows = s2sad.jvp(stats_tree, wrt="w", batched=True)(x, w, tangent=np.stack([t, 2 * t]))
    assert type(rows["parts"][1]) is Stats and rows["parts"][0].shape == (2, 4)
    np.testing.assert_allclose(rows["parts"][0][1], 2 * dot["parts"][0], rtol=1e-12)
    for mode in ("forward", "reverse"):
        for batched in (True, False):
            jac = s2sad.jacobian(stats_tree, wrt="w", mode=mode, batched=batched)(x, w)
            assert jac["value"].shape == (4,) and jac["parts"][0].shape == (4, 4)
            assert type(jac["parts"][1]) is Stats and jac["parts"][1].spread.shape == (4,)
            rows = [jac["value"], *jac["parts"][1]]
            np.testing.assert_allclose(
                0.7 * rows[0] + 0.2 * rows[1] - 1.1 * rows[2] + seed["parts"][0] @ jac["parts"][0],
                got,
                rtol=1e-10,
                atol=1e-12,
            )


def test_tree_output_refusals():
    x = rand(3, seed=1)
    _, pullback = s2sad.vjp(stats_tree, wrt="w")(x, x)
    with pytest.raises(s2sad.SeedShapeError, match="same structure"):
        pullback((1.0, x))
    with pytest.raises(s2sad.UnsupportedSyntaxError, match="same structure") as info:
        s2sad.vjp(two_structures)(x)
    assert f"{__file__}:" in str(info.value)
    with pytest.raises(s2sad.UnsupportedSyntaxError, match="from the return statement") as info:
        s2sad.vjp(named_dict)(x)
    assert "return {'a': x * 2}" in str(info.value)


def one_leaf_dict(x):
    return {"a": np.sin(x)}


def one_tuple(x):
    return (np.sin(x),)


def dict_loss(x):
    return {"loss": np.sum(x**2), "x": x}


def test_outputs_of_one_leaf_keep_their_structure():
    """`return (u,)` came back as `u` itself (the emitted return lost its comma)."""
    x = rand(3, seed=1)
    out, pullback = s2sad.vjp(one_leaf_dict)(x)
    assert sorted(out) == ["a"] and out["a"].shape == (3,)
    np.testing.assert_allclose(pullback({"a": np.ones(3)}), np.cos(x), rtol=1e-14)
    out, pullback = s2sad.vjp(one_tuple)(x)
    assert type(out) is tuple and len(out) == 1
    np.testing.assert_allclose(pullback((np.ones(3),)), np.cos(x), rtol=1e-14)
    _, dot = s2sad.jvp(one_leaf_dict)(x, tangent=np.ones(3))
    np.testing.assert_allclose(dot["a"], np.cos(x), rtol=1e-14)
    np.testing.assert_allclose(s2sad.jacobian(one_leaf_dict)(x)["a"], np.diag(np.cos(x)), 1e-14)
    with pytest.raises(s2sad.NonScalarOutputError, match="returns a tree"):
        s2sad.grad(dict_loss)(x)


def named_dict(x):
    out = {"a": x * 2}
    return out


def two_structures(x):
    if x[0] > 0:
        return {"a": x}
    return {"b": x}


# --------------------------------------------------------------------------- functions passed
def decay(y):
    return -0.5 * y + np.sin(y) * DECAY_SCALE


DECAY_SCALE = np.array([1.0, 2.0, 0.5])


def square_field(y):
    return y * y


def make_linear_field(k):
    def field(y):
        return -k * y

    return field


def euler(f, y0, h, n):
    y = y0
    for _ in range(n):
        y = y + h * f(y)
    return np.sum(y**2)


def euler_step(f, y0, h):
    return y0 + h * f(y0)


def test_a_function_passed_to_the_differentiated_function_is_inlined():
    """`f` is static: another function (another code, or another closure of one factory) gives
    its own gradient, never a cached one's; calls of it are inlined, as a helper's are."""
    y0 = rand(3, seed=1)
    for field in (decay, square_field, make_linear_field(2.0), make_linear_field(0.5), np.sin):
        args = (field, y0, 0.1, 3)
        g = s2sad.grad(euler, wrt=1)(*args)
        assert g.shape == (3,) and g.dtype == np.float64
        np.testing.assert_allclose(g, fd_grad(euler, args, 1), rtol=1e-6)
    for k in (2.0, 0.5):  # exact: (1 - h k)^(2n) * 2 y0
        got = s2sad.grad(euler, wrt="y0")(make_linear_field(k), y0, 0.1, 3)
        np.testing.assert_allclose(got, (1 - 0.1 * k) ** 6 * 2 * y0, rtol=1e-13)
    text = s2sad.source(s2sad.grad(euler, wrt=1), decay, y0, 0.1, 3)
    assert "def grad_euler(y0, h, n, DECAY_SCALE):" in text and "# decay, line" in text
    lam = s2sad.grad(euler, wrt=1)(lambda y: np.tanh(y), y0, 0.1, 2)
    np.testing.assert_allclose(lam, fd_grad(euler, (np.tanh, y0, 0.1, 2), 1), rtol=1e-6)


def test_a_function_passed_in_every_transform():
    y0 = rand(3, seed=2)
    for field in (decay, make_linear_field(1.5)):
        check_vjp(euler_step, (field, y0, 0.2), 1)
        check_jvp(euler_step, (field, y0, 0.2), 1)
        jac = s2sad.jacobian(euler_step, wrt=1)(field, y0, 0.2)
        fd = np.stack(
            [fd_grad(lambda f, y, h: euler_step(f, y, h)[i], (field, y0, 0.2), 1) for i in range(3)]
        )
        np.testing.assert_allclose(jac, fd, rtol=1e-6, atol=1e-9)
    jac = s2sad.jacobian(euler_step, wrt=1)
    jac(make_linear_field(1.5), y0, 0.2)
    assert "def jvp_batched_euler_step(y0, h, y0_dot, k):" in s2sad.source(jac)  # the last call
    h = s2sad.hessian(euler, wrt=1)(square_field, y0, 0.1, 1)
    # sum((y + h y^2)^2): d2/dy2 = 2 (1 + 2 h y)^2 + 2 (y + h y^2) 2 h, diagonal
    y = y0
    np.testing.assert_allclose(
        h, np.diag(2 * (1 + 0.2 * y) ** 2 + 0.4 * (y + 0.1 * y**2)), rtol=1e-12
    )


def test_a_function_passed_is_not_kept_alive_and_may_have_a_rule():
    import gc
    import weakref

    gc.freeze()  # the collection below looks at what the test made, not at a worker's millions
    try:
        g = s2sad.grad(euler, wrt=1)
        y0 = rand(3, seed=1)
        first = make_linear_field(2.0)
        ref = weakref.ref(first)
        g(first, y0, 0.1, 2)
        del first
        g(make_linear_field(3.0), y0, 0.1, 2)  # the same transform, the new closure's data
        gc.collect()
    finally:
        gc.unfreeze()
    assert ref() is None  # the cache holds no closure (nor its arrays), frozen or not

    def bump(y):
        return y**3

    s2sad.register_vjp(bump, lambda dy, out, y: 5.0 * dy)  # a deliberately different rule
    got = s2sad.grad(euler_step_sum, wrt=1)(bump, y0)
    np.testing.assert_allclose(got, 2 * (y0 + 0.1 * y0**3) * (1 + 0.5), rtol=1e-14)


def euler_step_sum(f, y0):
    return np.sum((y0 + 0.1 * f(y0)) ** 2)


def test_wrt_naming_a_function_passed_is_refused():
    with pytest.raises(s2sad.WrtError, match="names a function passed as an argument"):
        s2sad.grad(euler, wrt=0)(decay, rand(3), 0.1, 2)


# --------------------------------------------------------------------------- jit
def test_jit_gives_the_same_numbers():
    """One compile per transform: trees, a loop over layers, has_aux, a bound method."""
    p = make_params()
    np_grad = s2sad.grad(mlp_loss)(p, X, Y)
    assert_tree_close(s2sad.grad(mlp_loss, jit=True)(p, X, Y), np_grad, p, rtol=1e-12)
    g = s2sad.grad(forward_layers, jit=True)(LAYERS, X)
    assert_tree_close(g, s2sad.grad(forward_layers)(LAYERS, X), LAYERS, rtol=1e-12)
    w = rand(3, seed=1)
    (v, aux), g = s2sad.value_and_grad(loss_with_aux, has_aux=True, jit=True)(w, X)
    np.testing.assert_allclose(g, s2sad.grad(loss_with_aux, has_aux=True)(w, X)[0], 1e-12)
    assert aux["count"] == 5
    out, pullback = s2sad.vjp(predict, jit=True)({"W": p["W1"], "b": p["b1"]}, X)
    seed = np.ones_like(out)
    expected = s2sad.vjp(predict)({"W": p["W1"], "b": p["b1"]}, X)[1](seed)
    assert_tree_close(pullback(seed), expected, expected, rtol=1e-12)
    t = {"W": np.ones_like(p["W1"]), "b": np.ones_like(p["b1"])}
    small = {"W": p["W1"], "b": p["b1"]}
    out, dot = s2sad.jvp(predict, jit=True)(small, X, tangent=t)
    np.testing.assert_allclose(dot, s2sad.jvp(predict)(small, X, tangent=t)[1], rtol=1e-12)
    jac = s2sad.jacobian(predict, mode="reverse", jit=True)(small, X)
    expected = s2sad.jacobian(predict)(small, X)
    assert_tree_close(jac, expected, expected, rtol=1e-12)
    m, y = Model(), rand(5, 2, seed=3)
    np.testing.assert_allclose(
        s2sad.grad(m.loss, wrt="self.W", jit=True)(X, y),
        s2sad.grad(m.loss, wrt="self.W")(X, y),
        rtol=1e-12,
    )
    # a classmethod taking a parameter tree
    small, y2 = {"W": p["W1"], "b": p["b1"]}, rand(5, 4, seed=4)
    assert_tree_close(
        s2sad.grad(class_loss, jit=True)(small, X, y2),
        s2sad.grad(class_loss)(small, X, y2),
        small,
        rtol=1e-12,
    )
    # a tree output
    w = rand(4, seed=2)
    out, pullback = s2sad.vjp(stats_tree, wrt="w", jit=True)(w, w)
    seed = {"value": 0.7, "parts": (rand(4, seed=3), Stats(0.2, -1.1))}
    np.testing.assert_allclose(
        pullback(seed), s2sad.vjp(stats_tree, wrt="w")(w, w)[1](seed), rtol=1e-12
    )
    assert type(out["parts"][1]) is Stats
    # a function passed as an argument: one compile per code, closures' data read per call
    y0 = rand(3, seed=1)
    for field in (decay, make_linear_field(2.0), make_linear_field(0.5)):
        np.testing.assert_allclose(
            s2sad.grad(euler, wrt=1, jit=True)(field, y0, 0.1, 3),
            s2sad.grad(euler, wrt=1)(field, y0, 0.1, 3),
            rtol=1e-12,
        )


# --------------------------------------------------------------------------- README
def test_readme_parameter_trees():
    def loss(params, x, y):
        h = np.tanh(x @ params["W"] + params["b"])
        return np.mean((h - y) ** 2)

    params = {"W": np.zeros((3, 2)), "b": np.zeros(2)}
    x, y = np.ones((4, 3)), np.ones((4, 2))
    grads = s2sad.grad(loss)(params, x, y)  # a dict: {"W": (3, 2) array, "b": (2,) array}
    params = {k: params[k] - 0.1 * grads[k] for k in params}
    assert grads["W"].shape == (3, 2) and np.allclose(grads["b"], -1.0)


def test_readme_has_aux():
    def loss(w, x):
        r = x @ w
        return np.sum(r**2), {"residual": r}

    g, aux = s2sad.grad(loss, has_aux=True)(np.ones(3), np.eye(3))
    assert np.allclose(g, 2.0) and np.allclose(aux["residual"], 1.0)


def test_readme_callables():
    class Quadratic:
        def __init__(self, a):
            self.a = a

        def energy(self, x):
            return np.sum(self.a * x**2)

    q = Quadratic(np.array([1.0, 2.0]))
    x = np.array([1.0, 1.0])
    assert np.allclose(s2sad.grad(q.energy)(x), [2.0, 4.0])  # self.a is a constant
    assert np.allclose(s2sad.grad(q.energy, wrt="self.a")(x), [1.0, 1.0])
    assert np.allclose(s2sad.grad(functools.partial(ridge, X=np.eye(2), y=x))(x), 0.2 * x)
    assert np.allclose(s2sad.grad(lambda v: np.sum(v**3))(x), 3.0)


def test_readme_model_class_wrt_self():
    class Linear:
        def __init__(self):
            self.W, self.b = np.ones((2, 1)), np.zeros(1)

        def loss(self, x, y):
            return np.mean((x @ self.W + self.b - y) ** 2)

    model, x, y = Linear(), np.eye(2), np.zeros((2, 1))
    grads = s2sad.grad(model.loss, wrt="self")(x, y)  # {"W": dW, "b": db}: self's float arrays
    model.W, model.b = model.W - 0.1 * grads["W"], model.b - 0.1 * grads["b"]
    assert np.allclose(grads["W"], 1.0) and np.allclose(grads["b"], 2.0)


def test_readme_functions_passed_as_arguments():
    def integrate(f, y, h, n):  # f: a def, a lambda, a closure or a NumPy function
        for _ in range(n):
            y = y + h * f(y)
        return np.sum(y)

    def decay(k):
        return lambda y: -k * y

    y0 = np.ones(2)
    g = s2sad.grad(integrate, wrt="y")(np.sin, y0, 0.1, 10)  # f is inlined (not differentiated)
    g2 = s2sad.grad(integrate, wrt="y")(decay(2.0), y0, 0.1, 10)  # another f: its own gradient
    assert g.shape == (2,) and np.allclose(g2, 0.8**10)


def test_readme_tree_outputs():
    def stats(x):
        return {"mean": np.mean(x), "parts": (x**2, np.sin(x))}

    x = np.array([1.0, 2.0])
    out, pullback = s2sad.vjp(stats)(x)  # out has the output's structure
    g = pullback({"mean": 1.0, "parts": (np.ones(2), np.zeros(2))})  # a seed of that structure
    _, t = s2sad.jvp(stats)(x, tangent=np.ones(2))  # t too
    jac = s2sad.jacobian(stats)(x)  # {"mean": (2,), "parts": ((2, 2), (2, 2))}
    assert np.allclose(g, 0.5 + 2 * x) and np.allclose(t["parts"][1], np.cos(x))
    assert jac["mean"].shape == (2,) and jac["parts"][0].shape == (2, 2)


def test_readme_class_methods_and_methods_of_trees():
    class Linear:
        @staticmethod
        def apply(params, x):
            return x @ params["W"]

        @classmethod
        def loss(cls, params, x):
            return np.sum(cls.apply(params, x) ** 2)

    def loss(params, x):
        return Linear.loss(params, x)

    params = {"W": np.ones((2, 1))}
    assert np.allclose(s2sad.grad(loss)(params, np.eye(2))["W"], 2.0)
    model = Stack(Block(np.eye(2), np.zeros(2)), Block(np.eye(2), np.zeros(2)), 1.0)
    grads = s2sad.grad(stack_loss)(model, np.ones((1, 2)), np.zeros((1, 2)))  # model.loss(x, y)
    assert type(grads) is Stack and grads.first.W.shape == (2, 2)


def test_readme_register_vjp_optional_parameters():
    def smooth_abs(x, eps=1e-3):
        return np.sqrt(x**2 + eps)

    s2sad.register_vjp(smooth_abs, lambda g, ans, x, eps: (g * x / ans, None))

    def f(x):
        return np.sum(smooth_abs(x)) + np.sum(smooth_abs(x, eps=1.0))

    x = np.array([3.0, -4.0])
    expected = x / np.sqrt(x**2 + 1e-3) + x / np.sqrt(x**2 + 1.0)
    assert np.allclose(s2sad.grad(f)(x), expected)


def test_example_mlp_dict_trains_and_its_gradient_is_right():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "examples" / "mlp_dict.py"
    spec = importlib.util.spec_from_file_location("example_mlp_dict", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    params, x, y = example.inputs(np.random.default_rng(0))["loss"]
    small = (params, x[:8], y[:8])
    g = example.grad_loss(*small)
    assert_tree_close(g, fd_grad(example.loss, small, 0), params)
    _, losses = example.train(steps=60)
    assert losses[-1] < 0.5 * losses[0]


def _example(name):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"example_{name}", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    return example


def test_example_model_class_trains_and_its_gradient_is_right():
    example = _example("model_class")
    model, x, labels = example.inputs(np.random.default_rng(0))["SoftmaxClassifier.loss"]
    small = (x[:6], labels[:6])
    g = s2sad.grad(model.loss, wrt="self")(*small)
    expected = fd_grad(
        lambda W, b, x, y: _with_attributes(model, W=W, b=b).loss(x, y),
        (model.W, model.b, *small),
        0,
    )
    np.testing.assert_allclose(g["W"], expected, rtol=1e-6)
    assert g["W"].shape == model.W.shape and g["b"].shape == model.b.shape
    np.testing.assert_allclose(s2sad.grad(model.loss, wrt="self.b")(*small), g["b"], 1e-14)
    _, losses, _ = example.train(steps=40)
    assert losses[-1] < 0.5 * losses[0]


def _with_attributes(obj, **attrs):
    new = object.__new__(type(obj))
    new.__dict__.update(vars(obj), **attrs)
    return new


def writes_into_a_leaf(p, x):
    p["W"][1] = 3.0
    return np.sum(p["W"] * x)


def writes_into_a_copy_of_a_leaf(p, x):
    w = p["W"].copy()
    w[1] = 3.0
    return np.sum(w * x) + np.sum(p["W"] ** 2)


def test_a_write_into_a_trees_leaf_is_refused_and_a_copy_works():
    """`p["W"][1] = v` gave the gradient [1, 2, 3] where it is [1, 0, 3]: refused, with the
    copy as the way out."""
    x = np.arange(1.0, 4.0)
    params = {"W": np.array([0.5, 1.5, 2.5])}
    with pytest.raises(s2sad.UnsupportedSyntaxError, match=r"write into a parameter tree"):
        s2sad.grad(writes_into_a_leaf)(params, x)
    got = s2sad.grad(writes_into_a_copy_of_a_leaf)(params, x)["W"]
    np.testing.assert_allclose(got, [1.0 + 1.0, 0.0 + 3.0, 3.0 + 5.0])


def test_a_methods_object_is_named_as_its_first_parameter():
    class Scaled:
        def __init__(s):
            s.W = np.array([1.0, 2.0])

        def loss(s, x):
            return np.sum(s.W * x)

    m = Scaled()
    with pytest.raises(s2sad.WrtError, match="its first parameter: 's'"):
        s2sad.grad(m.loss, wrt="self")(np.ones(2))
    np.testing.assert_array_equal(s2sad.grad(m.loss, wrt="s")(np.ones(2))["W"], [1.0, 1.0])
