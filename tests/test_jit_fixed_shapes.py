"""Shape tapes whose every push provably records one shape (pipeline/fixed_shapes.py): made
`like` an expression of the parameters (`x_tape = shape_tape(x[1:])`), compiled they keep
nothing. Values whose shapes do change from one iteration to the next (a slice from the loop's
index, a value that grows, a carried state a broadcast widens) keep their tapes. Each case: the
jitted gradient equals NumPy mode's, the jitted source run by Python (the fallback's forms) and
finite differences; the source says which tapes were proven."""

import ast
import math
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import s2sad
from benchmarks.gradbench.evals import ode
from conftest import _fd
from s2sad.pipeline.fixed_shapes import _bound_names
from s2sad.rules.helpers import RUNTIME

numba = pytest.importorskip("numba")

pytestmark = pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaWarning")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))


def heat(u, c):  # a 2-d state; its interior's update has the shape of u[1:-1, 1:-1]
    for _ in range(3):
        lap = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * u[1:-1, 1:-1]
        inner = u[1:-1, 1:-1] + c * np.tanh(lap)
        u = np.zeros_like(u) + u
        u[1:-1, 1:-1] = inner
    return np.sum(u**2)


def shrinks(x, c):  # a slice from the loop's index: a shorter state every step
    y = x
    total = 0.0
    for t in range(1, 4):
        a = y[t:] * c
        y = np.tanh(a + c)
        total = total + np.sum(y)
    return total


def grows(x, c):  # a state that grows by one element a step
    y = x
    total = 0.0
    for _ in range(3):
        a = y * c
        b = np.tanh(a + c)
        y = np.concatenate((b, y[-1:]))
        total = total + np.sum(b * b)
    return total


def widens(h0, w, b):  # a state a broadcast widens at the first step: (1,), then (4,)
    h = h0
    total = 0.0
    for _ in range(3):
        a = h * w
        h = np.tanh(a + b)
        total = total + np.sum(h)
    return total


def skips(x, c):  # an iteration cut short keeps its grown state: the state is not fixed
    y = x
    total = 0.0
    for t in range(4):
        a = y * c
        b = np.tanh(a)
        total = total + np.sum(b * b)
        if t % 2 == 0:
            y = np.concatenate((b, b[:1]))
            continue
        y = np.zeros_like(x) + x
    return total


def stages(y0, k, n):  # two RK stages of a state y0 the first step widens against k, then keeps
    y = y0
    for _ in range(n):
        k1 = -k * y + np.sin(y)
        k2 = -k * (y + 0.05 * k1) + np.sin(y + 0.05 * k1)
        y = y + 0.05 * (k1 + k2)
    return np.sum(y * y)


RNG = np.random.default_rng(7)
X = RNG.random(9)
U = RNG.normal(size=(5, 6))
H, W, B = RNG.normal(size=1), RNG.normal(size=4), RNG.normal(size=4)

# (function, arguments, wrt, the shape tapes proven: tape -> the expression it is made like)
PROVEN = [
    # gradbench's ode (the benchmark workload): a state carried with x's shape, views one
    # element shorter; its gradient as the eval takes it (wrt=0)
    (ode.ode_last, (X, 6), 0, {"y": "x", "z_mul": "x[1:]", "k1": "x", "y_add": "x"}),
    (heat, (U, 0.1), (0,), {"lap_add": "u[:-2, 1:-1]", "inner_mul": "u[:-2, 1:-1]"}),
]
UNPROVEN = [
    (shrinks, (X, 0.7), (0, 1), "y"),
    (grows, (X, 0.7), (0, 1), "total_mul"),
    (widens, (H, W, B), (0, 1, 2), "a"),
    (skips, (X, 0.7), (0, 1), "total_mul"),
]


def _grads(g, args):
    got = g(*args)
    return got if isinstance(got, tuple) else (got,)


def _indices(wrt):
    return wrt if isinstance(wrt, tuple) else (wrt,)


def _check(f, args, wrt):
    """The jitted gradient against NumPy mode's, its source run by Python, and finite
    differences; its source."""
    g = s2sad.grad(f, wrt=wrt, jit="strict")
    jitted = _grads(g, args)
    numpy_mode = _grads(s2sad.grad(f, wrt=wrt), args)
    source = s2sad.source(g)
    namespace = {"np": np, "math": math, **RUNTIME}
    exec(source, namespace)
    _, fallback = namespace[f"checked_grad_{f.__name__}"](*args)
    fallback = fallback if isinstance(fallback, tuple) else (fallback,)
    for k, got, want, python in zip(_indices(wrt), jitted, numpy_mode, fallback):
        assert np.shape(got) == np.shape(args[k]) and np.asarray(got).dtype == np.float64
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(python, want, rtol=1e-12, atol=1e-14)
        expected = _fd(lambda *a: float(f(*a)), list(args), k, 1e-6)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7)
    return source


def _made(source: str) -> dict[str, str]:
    """Each shape tape's name (less `_tape`) -> what it is made like ('' for a plain tape, a
    list or rows of integers, row_tapes.py, that keep each shape)."""
    rows = {name: "" for name in re.findall(r"(\w+)_tape = shape_rows\(", source)}
    return {**dict(re.findall(r"(\w+)_tape = shape_tape\((.*)\)", source)), **rows}


@pytest.mark.parametrize("f, args, wrt, proven", PROVEN, ids=[c[0].__name__ for c in PROVEN])
def test_fixed_shapes_keep_no_tape(f, args, wrt, proven):
    source = _check(f, args, wrt)
    made = _made(source)
    for name, like in proven.items():
        assert re.search(rf"\b{name}\w*_tape = shape_tape\({re.escape(like)}\)", source), source
    # every array's shape tape is proven: none is a list of shapes any more
    assert made and "" not in made.values(), made
    assert ".append(shape_stub(" not in source  # (a fused run's stand-ins are stubs)


def test_a_state_widened_once_keeps_the_broadcast_shape():
    """`y = y0` widened against `k` by the first step and kept after it: every tape of a value
    that broadcasts against k is made like the broadcast of k and y0 (which the first step's
    values have too), but `np.sin(y)`'s, which has y0's shape at the first step and k's after."""
    y0, k = RNG.random(1), RNG.random(5)
    made = _made(_check(stages, (y0, k, 3), (0, 1)))
    assert made.pop("k1_sin") == "" and set(made.values()) == {"k, y0"}, made


def test_the_ode_eval_records_no_shape():
    """gradbench's ode (the benchmark workload): all its shape tapes (18-21, by the
    transform's options) are shapes of x. (Its gradient as PROVEN's case compiles it.)"""
    x = RNG.random(12)
    g = s2sad.grad(ode.ode_last, wrt=0, jit="strict")
    np.testing.assert_allclose(g(x, 5), s2sad.grad(ode.ode_last)(x, 5), rtol=1e-12)
    made = _made(s2sad.source(g))
    assert len(made) >= 18 and set(made.values()) == {"x", "x[1:]"}, made


@pytest.mark.parametrize("f, args, wrt, name", UNPROVEN, ids=[c[0].__name__ for c in UNPROVEN])
def test_changing_shapes_keep_their_tapes(f, args, wrt, name):
    source = _check(f, args, wrt)
    assert _made(source).get(name) == "", source
    pushed = rf"shape_push\({name}_tape, {name}\)|push_shape_row\({name}_tape, \w+, {name}\.shape\)"
    assert re.search(pushed, source), source


SHAPES = {  # (h0, w, b) of one rank: a broadcast may widen the state at the first step, or not
    1: [(1,), (4,)],
    2: [(1, 4), (3, 4), (3, 1)],
}


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.sampled_from([1, 2]).flatmap(lambda r: st.tuples(*[st.sampled_from(SHAPES[r])] * 3)))
def test_random_broadcasts_in_a_carried_state(shapes):
    """A state whose shape a broadcast changes at the first step, or never: the jitted gradient
    is NumPy mode's whatever the shapes (a tape wrongly proven fixed would give a stand-in of
    the wrong shape where they change)."""
    rng = np.random.default_rng(sum(map(sum, shapes)))
    args = tuple(rng.normal(size=shape) for shape in shapes)
    g = s2sad.grad(widens, wrt=(0, 1, 2), jit="strict")
    for got, want, x in zip(g(*args), s2sad.grad(widens, wrt=(0, 1, 2))(*args), args):
        assert got.shape == x.shape
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    assert _made(s2sad.source(g)).get("a") == ""


def test_each_binding_counts_once():
    """`x += 1` binds x once (its target is the store): `x = 0; x += 1` binds it twice."""
    code = ast.parse("x = 0\nx += 1\nfor i in r:\n    y = [j for j in i]\n").body
    assert _bound_names(code) == {"x": 2, "i": 1, "y": 1, "j": 1}
