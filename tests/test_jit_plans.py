"""A jitted gradient called again with arguments of the same kinds runs what the first call
decided for them (s2sad/call_plans.py): these calls must give what a first call gives. Each test
calls several times, the later calls through the kept plan, and checks against Python mode, the
formula, or the first call: data read anew, arguments' kinds, types and dtypes of the results,
memory owned, fallbacks."""

import numpy as np
import pytest

import s2sad
from s2sad.errors import NonDifferentiableInputError

pytestmark = pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaWarning")

W = np.array([1.0, 2.0, 3.0])


def weighted(x):
    return np.sum(W * x * x)


def scaled(x, c):
    return np.sum(c * x * x)


@pytest.fixture(scope="module")
def grad_weighted(tmp_path_factory):
    """One jitted grad of `weighted` for the module's tests (one compile)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("S2SAD_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    yield s2sad.grad(weighted, jit="strict")
    mp.undo()


def test_a_global_rebound_between_calls_is_read_at_each_call(grad_weighted, monkeypatch):
    x = np.array([0.5, -1.0, 2.0])
    for _ in range(3):  # the first call decides, the later ones run the plan
        np.testing.assert_allclose(grad_weighted(x), 2 * W * x)
    monkeypatch.setattr(__import__(__name__), "W", np.array([-1.0, 0.5, 4.0]))
    for _ in range(2):
        np.testing.assert_allclose(grad_weighted(x), 2 * np.array([-1.0, 0.5, 4.0]) * x)


def test_gradients_are_the_callers_own_on_every_call(grad_weighted):
    x = np.array([0.5, -1.0, 2.0])
    seen = []
    for _ in range(3):
        g = grad_weighted(x)
        assert g.flags.writeable and g.dtype == x.dtype and g.shape == x.shape
        assert not np.shares_memory(g, x) and not np.shares_memory(g, W)
        assert not any(np.shares_memory(g, s) for s in seen)
        seen.append(g)


def test_other_kinds_of_the_same_rank_decide_anew(grad_weighted):
    x = np.array([0.5, -1.0, 2.0, 7.0, 1.5, 3.0])
    python = s2sad.grad(weighted)
    for given in (x[:3], x[::2], np.asarray(x[:3], dtype=np.float32), x[:3]):
        for _ in range(2):
            g = grad_weighted(given)
            assert g.dtype == given.dtype and type(g) is np.ndarray
            np.testing.assert_allclose(g, python(given), rtol=1e-6)


def test_arguments_are_still_checked_after_a_plan(grad_weighted):
    x = np.array([0.5, -1.0, 2.0])
    grad_weighted(x)
    grad_weighted(x)
    with pytest.raises(NonDifferentiableInputError, match="subclass"):
        grad_weighted(np.ma.masked_array(x))
    with pytest.raises(NonDifferentiableInputError, match="dtype int64"):
        grad_weighted(np.array([1, 2, 3]))
    np.testing.assert_allclose(grad_weighted(x), 2 * W * x)


def test_a_planned_kind_takes_the_lean_call_which_checks_what_can_change(grad_weighted):
    """From the third call of one kind a generated call runs the dispatcher itself
    (s2sad/fast_calls.py, 25 Python functions a call fewer): it declines other kinds (they go
    the planned way), and an array gradient that may share memory with an argument (Numba's own
    array passed back, or one it did not allocate) is asked about, and copied where it does."""
    from s2sad.call_plans import ANEW

    x = np.array([0.5, -1.0, 2.0])
    for _ in range(3):
        np.testing.assert_allclose(grad_weighted(x), 2 * W * x)
    fast = grad_weighted._fast
    assert fast is not None and "MSM(g0, a0) or MSM(g0, v0)" in fast.text
    for other in (x[::2], x.astype(np.float32), x[None], 1.0):
        assert fast((other,)) is ANEW
    assert fast((x, x)) is ANEW
    made = grad_weighted(x)  # an array Numba made, passed back: not one owning its memory
    g = grad_weighted(made)
    assert not np.shares_memory(g, made) and grad_weighted._fast is fast
    np.testing.assert_allclose(g, 2 * W * made)
    shared = pytest.MonkeyPatch()  # as if Numba had not made it and it shared x's memory
    shared.setitem(fast.__globals__, "MI", type(None))
    shared.setitem(fast.__globals__, "MSM", lambda a, b: True)
    try:
        g = fast((x,))
    finally:
        shared.undo()
    assert g is not ANEW and g.flags.owndata
    np.testing.assert_allclose(g, 2 * W * x)


def test_value_types_and_numpy_scalars_beside_float32(tmp_path, monkeypatch):
    """value_and_grad's value comes back as NumPy gives it, and a NumPy float64 scalar beside a
    float32 array (which the key does not tell from a Python float) keeps float64's route."""
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))
    vg = s2sad.value_and_grad(scaled, jit="strict")
    python = s2sad.value_and_grad(scaled)
    x32 = np.array([0.5, -1.0, 2.0], dtype=np.float32)
    for x, c in [(x32, 0.7), (x32, 0.7), (x32, np.float64(0.7)), (x32, 0.7), (x32 * 1.0, 0.7)]:
        for _ in range(2):
            (value, g), (want, want_g) = vg(x, c), python(x, c)
            assert type(value) is type(want) and g.dtype == want_g.dtype
            np.testing.assert_allclose(value, want, rtol=1e-6)
            np.testing.assert_allclose(g, want_g, rtol=1e-6)


def test_source_shows_the_code_of_the_last_call(grad_weighted):
    grad_weighted(np.array([0.5, -1.0, 2.0]))
    grad_weighted(np.array([0.5, -1.0, 2.0]))
    assert "def checked_grad_weighted(x" in s2sad.source(grad_weighted)


def test_gradients_of_several_wrt_are_planned_numbers_retyped(tmp_path, monkeypatch):
    """A tuple of gradients (several wrt) in the result, a number among them, is planned as one
    gradient is (a plan each call tried and gave up cost GMM's small gradient a third of its
    time): the later calls' types, dtypes and numbers Python mode's."""
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))
    vg = s2sad.value_and_grad(scaled, wrt=("x", "c"), jit="strict")
    python = s2sad.value_and_grad(scaled, wrt=("x", "c"))
    x32 = np.array([0.5, -1.0, 2.0], dtype=np.float32)
    for x in (x32, x32, x32):  # (float32: the numbers come back as NumPy's float32)
        (value, (gx, gc)), (want, (wx, wc)) = vg(x, 0.7), python(x, 0.7)
        assert type(value) is type(want) and type(gc) is type(wc) and gx.dtype == wx.dtype
        np.testing.assert_allclose([value, gc], [want, wc], rtol=1e-6)
        np.testing.assert_allclose(gx, wx, rtol=1e-6)
    jitted = {id(plan[0].jitted): plan[0].jitted for plan in vg._plans.values()}
    assert sum(len(j.plans) for j in jitted.values()) == 1  # kept, not made at each call


def dict_loss(p, x):
    return np.sum((x @ p["W"] + p["b"]) ** 2)


def test_a_dict_of_parameters_is_planned_by_its_structure_and_leaves(monkeypatch):
    """A jitted grad taking a dict runs its plan from the second call (no `_bind`, no Numba
    typing: 281 µs a call against 110 µs with the leaves as arguments, before), with the
    gradients right for the values passed at each call and the caller's own."""
    rng = np.random.default_rng(0)
    jitted, python = s2sad.grad(dict_loss, jit="strict"), s2sad.grad(dict_loss)
    p, x = {"W": rng.normal(size=(3, 2)), "b": rng.normal(size=2)}, rng.normal(size=3)
    first = jitted(p, x)
    monkeypatch.setattr(jitted, "_bind", None)  # a planned call binds nothing
    for k in range(3):
        p = {"W": rng.normal(size=(3, 2)), "b": rng.normal(size=2)}
        got, want = jitted(p, x), python(p, x)
        assert list(got) == ["W", "b"] and type(first) is dict
        for name in p:
            np.testing.assert_allclose(got[name], want[name], rtol=1e-12, atol=1e-12)
            assert got[name].dtype == p[name].dtype and not np.shares_memory(got[name], p[name])


def test_a_trees_plan_key_tells_structures_and_kinds_apart():
    """`tree_key`: the key a plan of trees is kept under, which tells apart what makes another
    transform or compile (a dict's keys and their order, a list from a tuple, a leaf's dtype or
    rank), and is None for anything but plain values in dicts, lists and tuples."""
    from s2sad.call_plans import tree_key, use_fingerprint
    from s2sad.transformed import _PLAIN

    pytest.importorskip("numba")
    use_fingerprint()
    a, b = np.ones(2), np.ones((2, 2))
    key, leaves = tree_key(({"W": a, "b": b}, 1.0), _PLAIN)
    assert leaves[0] is a and leaves[1] is b and leaves[2] == 1.0
    assert tree_key(({"W": np.zeros(2), "b": b}, 2.0), _PLAIN)[0] == key
    others = [
        ({"b": b, "W": a}, 1.0),
        ({"W": a, "c": b}, 1.0),
        ({"W": a.astype(np.float32), "b": b}, 1.0),
        ({"W": b, "b": b}, 1.0),
        ({"W": a, "b": b}, np.ones(1)),
        ([a, b], 1.0),
        ((a, b), 1.0),
    ]
    keys = {tree_key(args, _PLAIN)[0] for args in others}
    assert len(keys) == len(others) and key not in keys
    for args in (({"W": a, "b": "x"},), (object(),), ({"f": np.sin},)):
        assert tree_key(args, _PLAIN) is None


def test_a_result_of_tuples_at_any_depth_is_planned_its_numbers_retyped():
    """A compiled result nested three deep (blocks per output and input, a value beside them)
    gets a plan as a flat one does (it used to give up, and every call decided anew), and the
    plan makes each Python float at any depth the NumPy number of its compiled type."""
    from numba import types

    from s2sad.call_plans import _float_positions, _placed

    f32, f64, arr = types.float32, types.float64, types.float64[:]
    nested = types.Tuple((f64, types.Tuple((arr, types.Tuple((f32, arr)))), types.UniTuple(f64, 2)))
    floats = _float_positions(nested)
    result = _placed((1.5, (np.ones(2), (2.5, np.zeros(1))), (3.5, 4.5)), floats)
    assert type(result[0]) is np.float64 and type(result[1][1][0]) is np.float32
    assert [type(v) for v in result[2]] == [np.float64, np.float64]
    assert result[1][1][0] == 2.5 and type(result[1][0]) is np.ndarray
    assert _float_positions(types.Tuple((arr, types.Tuple((arr,))))) is None
