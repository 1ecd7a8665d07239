"""s2sad.checkpoint on loops the break-it trial found wrong or refused: each gradient against the
taped gradient (the same function without the mark) and central differences."""

import numpy as np

import s2sad

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
