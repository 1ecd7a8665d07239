"""A user's vjp rule that writes into its cotangent (`dy *= 2.0`) gets one of its own
(rules/owned.py), in Python as in compiled code: Python mode raised NumPy's "output array is
read-only" (the cotangent was a broadcast view) while jit returned the rule's number."""

import numpy as np

import s2sad
from s2sad.custom import _writes_into_cotangent

RULES = """
import numpy as np
import s2sad


@s2sad.custom_vjp
def doubled_in_place(v):
    return v * 1.0


@doubled_in_place.defvjp
def doubled_in_place_vjp(dy, y, v):
    dy *= 2.0
    return dy


@s2sad.custom_vjp
def doubled(v):
    return v * 1.0


@doubled.defvjp
def doubled_vjp(dy, y, v):
    return 2.0 * dy


def viewed(x):
    # the cotangent of doubled_in_place(x) is np.sum's broadcast (read-only) view
    return np.sum(doubled_in_place(x)) + np.sum(x * 0.5)


def viewed_pure(x):
    return np.sum(doubled(x)) + np.sum(x * 0.5)


def shared(x, w):
    # y's cotangent is z's, which x * w's adjoint reads too
    z = doubled_in_place(x) + x * w
    return np.sum(z * w)


def shared_pure(x, w):
    z = doubled(x) + x * w
    return np.sum(z * w)
"""


def test_a_rule_writing_into_its_cotangent_gives_the_pure_rules_gradient(tmp_path):
    """The rule `dy *= 2.0; return dy` gives what `return 2.0 * dy` gives, in Python mode and
    compiled, where the cotangent is a read-only view and where another adjoint reads it."""
    from conftest import load_module

    m = load_module(tmp_path, "writes_cotangent", RULES)
    x = np.arange(1.0, 6.0)
    w = np.linspace(0.5, 1.5, 5)
    np.testing.assert_allclose(s2sad.grad(m.viewed_pure)(x), np.full(5, 2.5))
    assert "own_copy(" in s2sad.source(s2sad.grad(m.viewed))
    assert "own_copy(" not in s2sad.source(s2sad.grad(m.viewed_pure))
    np.testing.assert_allclose(s2sad.grad(m.viewed)(x), np.full(5, 2.5), rtol=1e-15)
    want = s2sad.grad(m.shared_pure)(x, w)
    np.testing.assert_allclose(want, 2.0 * w + w * w, rtol=1e-15)
    np.testing.assert_allclose(s2sad.grad(m.shared)(x, w), want, rtol=1e-15)
    np.testing.assert_allclose(s2sad.grad(m.shared, jit="strict")(x, w), want, rtol=1e-15)
    assert np.array_equal(x, np.arange(1.0, 6.0))


def test_which_rules_write_into_their_cotangent():
    """Writes into the cotangent or a view of it count; reading it, or rebinding its name, does
    not (those rules keep the cotangent as it is, with no copy)."""

    def aug(dy, y, v):
        dy *= 2.0
        return dy

    def item(dy, y, v):
        dy[0] = 0.0
        return dy

    def view(dy, y, v):
        flat = dy.reshape(-1)
        flat[1:] += 1.0
        return dy

    def out(dy, y, v):
        return np.multiply(dy, 2.0, out=dy)

    def method(dy, y, v):
        dy.fill(1.0)
        return dy

    def reads(dy, y, v):
        g = dy * 2.0
        g += v
        dy = g
        return dy

    for rule in (aug, item, view, out, method):
        assert _writes_into_cotangent(rule), rule.__name__
    assert not _writes_into_cotangent(reads)
    assert not _writes_into_cotangent(lambda dy, y, v: dy * 2.0)
    assert not _writes_into_cotangent(np.negative)
