"""Fusion across ranks in jitted code (s2sad/pipeline/fusion/shapes.py): a run's loop nest reads
lower-rank arrays and arrays with axes of length 1 through broadcasting's index maps, and folds
sums over an axis (`np.sum(g, axis=k)`, `keepdims`, the adjoint's `unbroadcast(g, b)`) in as
accumulators. Its guard compares the shapes at run time; other shapes take the original
statements. Fused code must give Python mode's numbers (and finite differences')."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import s2sad
from s2sad.rules import loop_tests

from test_jit_fuse import assert_close, fd_grad, fused_ran, rng


def bias(x, W, b):
    h = np.tanh(x @ W + b)
    return np.sum(h * h)


def outer(x, mu):
    d = x[:, None] - mu[None, :]
    return np.sum(np.exp(-0.5 * d * d) * x[:, None])


def axis_sums(x, w):
    s = np.sum(x * w, axis=1)
    t = np.sum(np.tanh(x), axis=0, keepdims=True)
    return np.sum(s * s) + np.sum(t * x)


def lse(x):
    shift = s2sad.stop_gradient(np.max(x, axis=1, keepdims=True))
    out = np.log(np.sum(np.exp(x - shift), axis=1, keepdims=True)) + shift
    return np.sum(out * out)


def mlp(W1, b1, W2, b2, x, labels):
    h = np.tanh(x @ W1 + b1)
    logits = h @ W2 + b2
    shift = s2sad.stop_gradient(np.max(logits, axis=1, keepdims=True))
    log_norm = np.log(np.sum(np.exp(logits - shift), axis=1, keepdims=True)) + shift
    return -np.mean(np.sum(labels * (logits - log_norm), axis=1))


def gmm_like(alphas, means, x):
    centred = x[None, :, :] - means[:, None, :]  # (K, n, d)
    terms = alphas[:, None] - 0.5 * np.sum(centred**2, axis=2)  # (K, n)
    shift = s2sad.stop_gradient(np.max(terms, axis=0, keepdims=True))
    return np.sum(np.log(np.sum(np.exp(terms - shift), axis=0)) + shift[0])


def masked(x, y):
    keep = x > 0.0
    t = np.where(keep[:, None], x[:, None] * y, np.sin(y))
    return np.sum(t * t)


def joined(x, y):
    z = np.concatenate([x * y, np.tanh(x)], axis=1)  # of rank 2: the analysis knows it now
    return np.sum(z * z + np.exp(-z) * x[:, :1])


def view_of_sum(x):
    s = np.sum(x * x, axis=1, keepdims=True)
    v = s[:, :1]  # a view of a sum the run computes: not moved above it
    return np.sum(v * x)


def _mlp_args(n=5, d=4, k=6, c=3):
    r = rng(3)
    labels = np.eye(c)[r.integers(0, c, size=n)]
    return [r.normal(size=(d, k)), r.normal(size=k), r.normal(size=(k, c)), r.normal(size=c)] + [
        r.normal(size=(n, d)),
        labels,
    ]


CASES = {
    "bias": (
        bias,
        lambda: [rng().normal(size=(5, 3)), rng(1).normal(size=(3, 4)), rng(2).normal(size=4)],
        (0, 1, 2),
    ),
    "outer": (outer, lambda: [rng().normal(size=6), rng(1).normal(size=4)], (0, 1)),
    "axis_sums": (
        axis_sums,
        lambda: [rng().normal(size=(4, 5)), rng(1).normal(size=(4, 5))],
        (0, 1),
    ),
    "lse": (lse, lambda: [rng().normal(size=(3, 5))], (0,)),
    "mlp": (mlp, _mlp_args, (0, 1, 2, 3)),
    "gmm_like": (
        gmm_like,
        lambda: [rng().normal(size=3), rng(1).normal(size=(3, 2)), rng(2).normal(size=(5, 2))],
        (0, 1),
    ),
    "masked": (masked, lambda: [rng().normal(size=5), rng(1).normal(size=(5, 3))], (0, 1)),
    "joined": (joined, lambda: [rng().normal(size=(4, 3)), rng(1).normal(size=(4, 3))], (0, 1)),
    "view_of_sum": (view_of_sum, lambda: [rng().normal(size=(4, 3))], (0,)),
}
# the sums and broadcasts the fused code leaves to NumPy: gmm_like's `-unbroadcast(dcentred,
# centred_item)`, after `getitem_vjp` (which no run takes) in the adjoint
# (mlp: its log_norm, a keepdims value read through `promoted(...)` since 2026-11-29, is planned
# at logits' shape, so three sums go to NumPy: test_jit_fuse_guards' _PROMOTED)
LEFT_UNFUSED = {"gmm_like": 1, "mlp": 3}
_JITTED: dict = {}  # one compiled gradient per case, shared by the tests


def jitted_case(name):
    if name not in _JITTED:
        f, _, wrt = CASES[name]
        _JITTED[name] = s2sad.value_and_grad(f, wrt=wrt, jit="strict")
    return _JITTED[name]


class Counted:
    """The helpers the unfused statements across ranks call, counting the calls that sum or
    broadcast: zero where the fused loops took them all."""

    def __init__(self, namespace):
        self.namespace, self.calls = namespace, 0
        self.kept = {}

    def __enter__(self):
        for name in ("unbroadcast", "sum_over", "expand_reduced"):
            if name in self.namespace:
                self.kept[name] = original = self.namespace[name]
                self.namespace[name] = self.counting(name, original)
        self.kept["fusible"] = self.namespace.get("fusible")
        self.kept["float_arrays"] = self.namespace.get("float_arrays")
        self.namespace["fusible"] = lambda *a: all(b.shape == a[0].shape for b in a)
        self.namespace["float_arrays"] = lambda *a: True
        self.kept["kept_dtype"] = self.namespace.get("kept_dtype")
        self.namespace["kept_dtype"] = lambda *a: True
        return self

    def counting(self, name, original):
        def call(g, x, *rest, **options):
            if np.shape(g) != np.shape(x) or name == "sum_over":
                self.calls += 1
            return original(g, x, *rest, **options)

        return call

    def __exit__(self, *exc):
        for name, kept in self.kept.items():
            if kept is not None:
                self.namespace[name] = kept


def in_python(compiled, *args):
    """The jitted transform's code run by Python with its dtype guards true, so that the shape
    comparisons decide: (what it returns, how many sums and broadcasts it left to NumPy)."""
    function = compiled.function
    with Counted(function.__globals__) as counted:
        return function(*args), counted.calls


@pytest.mark.parametrize("name", list(CASES))
def test_fused_across_ranks_gives_python_modes_numbers(name):
    f, make, wrt = CASES[name]
    args = make()
    jitted = jitted_case(name)
    value, grads = jitted(*args)
    assert fused_ran(jitted)
    source = s2sad.source(jitted)
    assert "float_arrays(" in source and "for i0 in range(" in source
    e_value, e_grads = s2sad.value_and_grad(f, wrt=wrt)(*args)
    assert value == pytest.approx(e_value, rel=1e-12)
    assert_close(grads, e_grads, rtol=1e-10)
    for got, arg in zip(grads, [args[i] for i in wrt]):
        assert got.shape == np.shape(arg) and got.dtype == np.float64
    for k, i in enumerate(wrt[:2]):
        np.testing.assert_allclose(grads[k], fd_grad(f, args, i), rtol=1e-6, atol=1e-7)
    # the fused loops' logic, run by Python: every sum and broadcast across ranks fused
    (p_value, p_grads), unfused = in_python(jitted.compiled, *args)
    p_grads = p_grads if len(wrt) > 1 else (p_grads,)
    assert_close(p_grads, e_grads, rtol=1e-10)
    assert unfused == LEFT_UNFUSED.get(name, 0)


def test_bias_adds_read_the_bias_by_its_axis_and_sum_into_its_gradient():
    jitted = jitted_case("bias")
    source = s2sad.source(jitted, *CASES["bias"][1]())  # the code for these ranks
    assert "b[i1]" in source and "db[i1] += " in source
    assert "# line" in source.split("for i1 in range(")[1].split("\n")[1]  # the user's line


def test_keepdims_axes_are_read_at_index_zero():
    jitted = jitted_case("lse")
    source = s2sad.source(jitted, *CASES["lse"][1]())  # the code for these ranks
    assert "shift[i0, 0]" in source and "shift.shape[1] == 1" in source


def test_shapes_other_than_assumed_take_the_original_statements():
    """A bias of shape (1,) broadcasts too, but the loops read it by its axis: the guard sees
    the shape and the original statements run; a length-1 axis of `x` the same."""
    jitted = jitted_case("bias")
    x, W = rng().normal(size=(5, 3)), rng(1).normal(size=(3, 4))
    for b, W_used, x_used in [
        (rng(2).normal(size=1), W, x),
        (rng(2).normal(size=4), W, x[:1]),
        (rng(2).normal(size=4), W, x),
    ]:
        value, grads = jitted(x_used, W_used, b)
        e_value, e_grads = s2sad.value_and_grad(bias, wrt=(0, 1, 2))(x_used, W_used, b)
        assert value == pytest.approx(e_value, rel=1e-12)
        assert_close(grads, e_grads, rtol=1e-10)
        assert grads[2].shape == b.shape
        (_, p_grads), unfused = in_python(jitted.compiled, x_used, W_used, b)
        assert_close(p_grads, e_grads, rtol=1e-10)
        assert (unfused > 0) == (b.shape != (4,))  # (x[:1] is one row: still of the shapes)
    shift_axes = s2sad.value_and_grad(lse, jit="strict")
    x = rng().normal(size=(1, 1))
    (_, grads), unfused = in_python(jitted_case("lse").compiled, x)
    assert_close(grads, s2sad.value_and_grad(lse)(x)[1], rtol=1e-10)
    assert_close(shift_axes(x)[1], s2sad.value_and_grad(lse)(x)[1], rtol=1e-10)


def test_float32_inputs_take_the_fused_code_in_float32():
    args = [a.astype(np.float32) for a in CASES["bias"][1]()]
    jitted = s2sad.value_and_grad(bias, wrt=(0, 1, 2), jit="strict")
    value, grads = jitted(*args)
    assert fused_ran(jitted)
    e_value, e_grads = s2sad.value_and_grad(bias, wrt=(0, 1, 2))(*args)
    assert value.dtype == e_value.dtype == np.float32
    assert value == pytest.approx(e_value, rel=1e-5)
    for got, expected in zip(grads, e_grads):
        assert got.dtype == expected.dtype == np.float32
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_the_helpers_guard_is_false_in_python():
    assert loop_tests.float_arrays(np.zeros(2)) is False


# random expressions over two arrays of broadcastable shapes (ranks 0 to 3, axes of length 1),
# their jitted code run by Python with the dtype guard true: the shape comparisons decide
_TEMPLATES = [
    "t = a * b + a\n    u = np.tanh(t) * b\n    return np.sum(u * a)",
    "t = np.exp(-0.1 * a * a) - b\n    u = np.maximum(t, b) * t\n    return np.sum(u)",
    "t = a / (1.0 + b * b)\n    u = np.where(t > 0.0, t, 0.5 * b)\n    return np.sum(u * u)",
    "t = np.sin(a) * b\n    u = np.sum(t * t, axis=-1{keep})\n    return np.sum(u * u)",
    "t = a - b\n    u = np.sum(t * a, axis=0{keep})\n    return np.sum(np.tanh(u))",
]


@st.composite
def _pairs(draw):
    rank = draw(st.integers(0, 3))
    full = draw(st.lists(st.integers(2, 4), min_size=rank, max_size=rank))
    shapes = []
    for _ in range(2):
        q = draw(st.integers(0, rank))
        shape = [draw(st.sampled_from([n, 1])) if draw(st.booleans()) else n for n in full]
        shapes.append(tuple(shape[rank - q :]))
    if draw(st.booleans()):
        shapes.reverse()
    broadcast = np.broadcast_shapes(*shapes)
    templates = _TEMPLATES if broadcast else _TEMPLATES[:3]
    text = draw(st.sampled_from(templates)).format(
        keep=draw(st.sampled_from(["", ", keepdims=True"]))
    )
    return shapes, text


@settings(max_examples=15, deadline=None)
@given(_pairs())
def test_random_broadcasting_fused_gives_python_modes_gradient(tmp_path_factory, pair):
    from conftest import load_module
    from s2sad.transform_cache import transform

    (a_shape, b_shape), body = pair
    text = f"import numpy as np\n\n\ndef f(a, b):\n    {body}\n"
    module = load_module(tmp_path_factory.mktemp("ranks"), "ranks_case", text)
    a, b = rng().normal(size=a_shape), rng(1).normal(size=b_shape)
    ranks = (("a", len(a_shape)), ("b", len(b_shape)))
    compiled = transform(module.f, ("a", "b"), "grad", ranks, True)
    got, _ = in_python(compiled, a, b)
    expected = s2sad.grad(module.f, wrt=(0, 1))(a, b)
    assert_close(got, expected, rtol=1e-10)
    assert got[0].shape == a.shape and got[1].shape == b.shape


def where_of_slices(x, w):
    q = np.where(w[2:4] < -0.39, w[2:4], x[1:3])
    return np.sum(-1.68 * np.cos(q) + q**2)


def test_a_where_of_slices_is_left_unfused_with_the_same_numbers():
    """np.where of a comparison whose branch values are slices the loop cannot read: left as
    array statements (a TypeError in the fusion pass, before)."""
    x, w = np.array([0.3, -0.5, 0.8, 0.1]), np.array([0.2, -0.7, -0.5, 0.9])
    jitted = s2sad.grad(where_of_slices, wrt=1, jit="strict")(x, w)
    np.testing.assert_allclose(jitted, s2sad.grad(where_of_slices, wrt=1)(x, w), rtol=1e-12)
