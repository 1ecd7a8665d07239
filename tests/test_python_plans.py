"""Python mode's call plans (s2sad/python_plans.py): a grad or value_and_grad called again by
position with arguments of an earlier call's kinds runs the generated function that call chose,
without binding again. It must give what binding gives: other kinds bind anew (another dtype,
rank or tree structure), the data the function reads is read at each call, and an error names
the user's line."""

import numpy as np
import pytest

import s2sad

SCALE = 2.0


def loss(p, x):
    return SCALE * np.sum((x @ p["w"] + p["b"]) ** 2)


def expected(p, x):
    r = 2 * SCALE * (x @ p["w"] + p["b"])
    return {"w": x.T @ r, "b": np.sum(r)}


def picked(x, k):
    return x[k] * 3.0


def same(a, b):
    for key in a:
        assert np.asarray(a[key]).dtype == np.asarray(b[key]).dtype
        np.testing.assert_allclose(a[key], b[key], rtol=1e-5)


def test_a_second_call_by_position_runs_the_plan_of_the_first(monkeypatch):
    x = np.arange(6.0).reshape(3, 2) / 5
    p = {"w": np.array([0.5, -1.0]), "b": 0.25}
    g, vg = s2sad.grad(loss), s2sad.value_and_grad(loss)
    same(g(p, x), expected(p, x))
    assert g._plans  # (kept by the first call)
    p2 = {"w": np.array([1.5, 2.0]), "b": -0.5}
    same(g(p2, x), expected(p2, x))
    value, grads = vg(p2, x)
    value, grads = vg(p2, x)  # (planned)
    assert value == loss(p2, x)
    same(grads, expected(p2, x))
    # other kinds bind anew: float32 leaves, a number for b of another type, another tree
    p32 = {"w": p["w"].astype(np.float32), "b": np.float32(0.25)}
    same(g(p32, x.astype(np.float32)), {k: np.float32(v) for k, v in expected(p, x).items()})
    with pytest.raises(s2sad.S2SADError):
        g({"w": p["w"], "b": 1}, x)  # an integer leaf is refused, as at the first call
    # the data read at each call
    monkeypatch.setattr(__import__(__name__), "SCALE", 3.0)
    same(g(p, x), expected(p, x))


def test_a_planned_calls_error_names_the_users_line():
    g = s2sad.grad(picked)
    g(np.ones(3), 1)
    g(np.ones(3), 2)
    with pytest.raises(IndexError) as info:
        g(np.ones(3), 5)
    assert any("test_python_plans.py" in n for n in getattr(info.value, "__notes__", []))
