"""s2sad.checkpoint on loops the break-it trial found wrong or refused: each gradient against the
taped gradient (the same function without the mark) and central differences."""

import warnings

import numpy as np
import pytest

import s2sad
from s2sad.checkpointing import CheckpointedLoop
from s2sad.errors import UnsupportedSyntaxError
from s2sad.jit import JitError

from conftest import check_grad


def int_state(x, n):
    s = 0  # an int before the loop, a float after its first step
    for t in s2sad.checkpoint(range(n), snapshots=2):
        s = s + np.sin(x * (t + 1) + 0.1 * s)
    return s


def int_state_taped(x, n):
    s = 0
    for t in range(n):
        s = s + np.sin(x * (t + 1) + 0.1 * s)
    return s


def test_a_state_bound_to_an_int_keeps_its_gradient_across_segments():
    # the segment's vjp was made once per ranks: one made from the int's segment (s not
    # differentiated) zeroed s's cotangent at every later boundary (jit: 2802.4 vs 1592.8)
    g = s2sad.grad(int_state)
    for n in (1, 12, 5):  # one segment first: its vjp is made without s
        want = s2sad.grad(int_state_taped)(0.7, n)
        np.testing.assert_allclose(g(0.7, n), want, rtol=1e-13)
    check_grad(int_state, (0.7, 12))


p = {"W": np.zeros((3, 3)), "b": np.ones(3)}  # a global named like the parameter: never read


def tree_loop(p, x, n):
    y = x
    for t in s2sad.checkpoint(range(n), snapshots=2):
        y = np.tanh(p["W"] @ y + p["b"])
    return np.sum(y**2)


def tree_loop_taped(p, x, n):
    y = x
    for t in range(n):
        y = np.tanh(p["W"] @ y + p["b"])
    return np.sum(y**2)


class Model:
    def __init__(self, W):
        self.W = W

    def loss(self, x, n):
        y = x
        for t in s2sad.checkpoint(range(n), snapshots=2):
            y = np.tanh(self.W @ y)
        return np.sum(y**2)

    def taped(self, x, n):
        y = x
        for t in range(n):
            y = np.tanh(self.W @ y)
        return np.sum(y**2)


def test_a_tree_read_in_the_loop_is_read_through_its_leaves():
    # the segment's body read `p` as a module global (NameError, or this module's `p`: value
    # 1.740 for 1.409 and a zero gradient); `self.W` likewise
    rng = np.random.default_rng(0)
    params = {"W": rng.normal(size=(3, 3)) * 0.5, "b": rng.normal(size=3)}
    x = rng.normal(size=3)
    value, got = s2sad.value_and_grad(tree_loop)(params, x, 6)
    assert value == tree_loop_taped(params, x, 6)
    want = s2sad.grad(tree_loop_taped)(params, x, 6)
    e = 1e-6
    for k in ("W", "b"):
        np.testing.assert_allclose(got[k], want[k], rtol=1e-13)
        bump = np.zeros_like(params[k]).ravel()
        bump[1] = e
        up, down = dict(params), dict(params)
        up[k], down[k] = params[k] + bump.reshape(params[k].shape), params[k] - bump.reshape(
            params[k].shape
        )
        fd = (tree_loop_taped(up, x, 6) - tree_loop_taped(down, x, 6)) / (2 * e)
        np.testing.assert_allclose(got[k].ravel()[1], fd, rtol=1e-6)
    model = Model(params["W"])
    x = np.array([0.4, -0.9, 0.2])
    np.testing.assert_allclose(
        s2sad.grad(model.loss)(x, 5), s2sad.grad(model.taped)(x, 5), rtol=1e-13
    )
    check_grad(model.loss, (x, 5))


def first_step_only(x, n):
    y = x
    for t in s2sad.checkpoint(range(n), snapshots=2):
        if t == 0:
            c = y * 1.0  # bound on the first step alone: the later segments would not have it
        y = y + 0.1 * c * np.sin(y)
    return np.sum(y)


def test_a_value_bound_on_the_first_step_only_is_refused_at_its_read():
    # by flow, not text order: the bare UnboundLocalError of a later segment before
    with pytest.raises(UnsupportedSyntaxError, match="'c' is carried from one step") as info:
        s2sad.grad(first_step_only)(np.array([0.1, 0.4]), 9)
    line = first_step_only.__code__.co_firstlineno + 5
    assert f"test_checkpoint_trust.py:{line}:" in str(info.value)


def temporary_bound_again_after(x, n):
    y = x
    for t in s2sad.checkpoint(range(n), snapshots=2):
        z = np.sin(y)  # a temporary of the body: z bound after the loop is not bound before it
        y = y + 0.1 * z
    z = y * 2.0
    return np.sum(z)


def temporary_bound_again_after_taped(x, n):
    y = x
    for t in range(n):
        z = np.sin(y)
        y = y + 0.1 * z
    z = y * 2.0
    return np.sum(z)


def target_used_before(x, n):
    t = 0.5
    y = x * t
    for t in s2sad.checkpoint(range(n), snapshots=2):  # t is not read after the loop
        y = y * 0.9 + 0.01 * t * y
    return np.sum(y)


def target_used_before_taped(x, n):
    t = 0.5
    y = x * t
    for t in range(n):
        y = y * 0.9 + 0.01 * t * y
    return np.sum(y)


@pytest.mark.parametrize(
    "f,taped",
    [
        (temporary_bound_again_after, temporary_bound_again_after_taped),
        (target_used_before, target_used_before_taped),
    ],
)
def test_names_bound_after_or_read_before_the_loop_are_not_its_state(f, taped):
    # refused before: z "used before it is assigned", t's "last value is not kept"
    x = np.array([0.1, 0.4])
    np.testing.assert_allclose(s2sad.grad(f)(x, 5), s2sad.grad(taped)(x, 5), rtol=1e-13)
    check_grad(f, (x, 5))


def scratch(x, w, n):
    y = x
    h = 0.0  # a number before the loop, an array after its first step
    for t in s2sad.checkpoint(range(n), snapshots=2):
        h = np.tanh(y * w)
        y = y + 0.1 * h
    return np.sum(y) + np.sum(h)


def scratch_taped(x, w, n):
    y = x
    h = 0.0
    for t in range(n):
        h = np.tanh(y * w)
        y = y + 0.1 * h
    return np.sum(y) + np.sum(h)


def test_a_state_whose_rank_changes_on_the_first_step_under_jit():
    # jit=True raised "your vjp rule vjp (checkpointing.py:...) returned a cotangent of shape
    # (2,) for 'h', of shape ()": the segment changing h's rank now runs in Python, the rest
    # in Numba. One step: the one segment, the failing one, compiles nothing (7 steps, whose
    # later segments Numba runs, agree too: 15 s of compiling, left to the break-it repro)
    x = np.array([0.3, -0.2])
    want = s2sad.grad(scratch_taped, wrt=(0, 1))(x, 0.8, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = s2sad.grad(scratch, wrt=(0, 1), jit=True)(x, 0.8, 1)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-13)
    check_grad(scratch, (x, 0.8, 7), wrt=(0, 1))


def test_jit_true_and_strict_share_a_checkpointed_loop_but_not_its_strictness():
    # jit="strict" after jit=True ran the loop made for jit=True, falling back to Python where
    # it cannot compile; now each call tells the loop which it is (one step: nothing compiles)
    x = np.array([0.3, -0.2])
    lenient = s2sad.grad(scratch, wrt=(0, 1), jit=True)
    want = lenient(x, 0.8, 1)
    for strict in (s2sad.grad(scratch, wrt=(0, 1), jit="strict"), s2sad.vjp(scratch, jit="strict")):
        with pytest.raises(JitError, match=r"'h' is of rank 0 before the loop and of rank 1") as e:
            strict(x, 0.8, 1)
        assert e.value.line == scratch.__code__.co_firstlineno + 4
        assert "h = np.tanh(y * w)" in str(e.value) and "cannot type a value" in str(e.value)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for g, w in zip(lenient(x, 0.8, 1), want):
            np.testing.assert_array_equal(g, w)


def scratch_unread(x, w, n):
    y = x
    h = 0.0  # a number before the loop, an array after its first step; no output reads it
    for t in s2sad.checkpoint(range(n), snapshots=2):
        h = np.tanh(y * w)
        y = y + 0.1 * h
    return np.sum(y)


def test_an_unread_state_is_seeded_with_a_zero_of_its_last_shape(monkeypatch):
    # the jitted gradient passes the rule 0 for h's cotangent, which it made a zero shaped like
    # h before the loop (a number): the jitted sweep of the last segment, made for h's rank
    # after a step, failed on it (`dh.dtype`). Seen here in the seeds each segment's sweep
    # gets, in Python mode (no compile)
    g = s2sad.grad(scratch_unread, wrt=(0, 1))
    x = np.array([0.3, -0.2])
    g(x, 0.8, 3)
    loop = next(v for v in g.compiled.globals.values() if isinstance(v, CheckpointedLoop))
    forms, seeds = loop._forms, []

    def spied(args):
        primal, sweep, wrt, data = forms(args)
        return primal, lambda *a: seeds.append(a[len(args) : len(args) + 2]) or sweep(*a), wrt, data

    monkeypatch.setattr(loop, "_forms", spied)
    args = (range(3), 2, 0.0, x, 0.8)
    _, _, dh, dy, dw = loop.vjp((0, np.ones(2)), loop(*args), *args)
    assert [np.shape(h) for h, _ in seeds] == [(2,), (2,), (2,)]
    for a, b in zip((dy, dw), check_grad(scratch_unread, (x, 0.8, 3), wrt=(0, 1))):
        np.testing.assert_array_equal(a, b)


def evolve(y, w, n):
    for t in s2sad.checkpoint(range(n), snapshots=2):
        y = y + 0.1 * np.sin(y) * w
    return y


def through_helper(x, w, n):
    return np.sum(evolve(x, w, n) ** 2)


def through_helper_taped(x, w, n):
    y = x
    for t in range(n):
        y = y + 0.1 * np.sin(y) * w
    return np.sum(y**2)


def test_a_marked_loop_in_a_helper_is_refused_in_reverse_and_run_in_forward_modes():
    # it was taped step by step, the mark dropped without a word (jit: Numba's "Unknown
    # attribute 'checkpoint'" and a fallback)
    x = np.array([0.3, -0.2])
    with pytest.raises(UnsupportedSyntaxError, match="a loop marked in evolve, which") as info:
        s2sad.grad(through_helper, wrt=(0, 1))(x, 0.8, 7)
    line = evolve.__code__.co_firstlineno + 1
    assert f"test_checkpoint_trust.py:{line}:" in str(info.value)
    assert "move the loop into through_helper" in str(info.value)
    args, tangent = (x, 0.8, 7), (np.array([1.0, 0.5]), 0.25)
    got = s2sad.jvp(through_helper, wrt=(0, 1))(*args, tangent=tangent)
    want = s2sad.jvp(through_helper_taped, wrt=(0, 1))(*args, tangent=tangent)
    np.testing.assert_allclose(got, want, rtol=1e-13)
    e, dx = 1e-6, tangent[0] * 1e-6
    up, down = through_helper(x + dx, 0.8 + e / 4, 7), through_helper(x - dx, 0.8 - e / 4, 7)
    np.testing.assert_allclose(got[1], (up - down) / (2 * e), rtol=1e-6)
