"""Tapes of views: a loop's view of an array that nothing writes into (`y[:-1]`, `y` rebound to a
new array each step, as in an RK4 step) goes on the tape as it is, without a copy; a view that
may share memory with an array written in place keeps its copy, made where the view is bound,
also where an inlined call returns it (`head(y)`, a tuple of views, a call inside an expression:
those once went on the tape after the write, silently wrong). Each case is checked against
finite differences, and the jitted gradient against the Python one."""

import ast
import textwrap

import numpy as np
import pytest

import s2sad
from benchmarks.gradbench.evals import ode
from conftest import _fd
from s2sad.pipeline.snapshots import written_memory

numba = pytest.importorskip("numba")

pytestmark = pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaWarning")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))


def rebound(x):  # v views y; y is rebound to a new array, never written into
    y = x * 1.0
    t = 0.0
    for i in range(3):
        z = np.zeros_like(y)
        v = y[:-1]
        z[1:] = v * x[1:]
        t = t + np.sum(z * z)
        y = y + np.cos(z)
    return t


def written_later(x):  # v views y, which the loop writes into after reading v
    y = x * 1.0
    t = 0.0
    for i in range(3):
        v = y[:-1]
        t = t + np.sum(v * x[1:])
        y[1:] = np.sin(v) + 1.0
    return t


def head(a):
    return a[:-1]


def ends(a):
    return a[:-1], a[1:]


def written_via_helper(x):  # as written_later, the view made by an inlined function
    y = x * 1.0
    t = 0.0
    for i in range(3):
        v = head(y)
        t = t + np.sum(v * x[1:])
        y[1:] = np.sin(v) + 1.0
    return t


def written_via_tuple(x):  # views returned in a tuple
    y = x * 1.0
    t = 0.0
    for i in range(3):
        v, w = ends(y)
        t = t + np.sum(v * w * x[1:])
        y[1:] = np.sin(v) + 1.0
    return t


def written_via_expression(x):  # the inlined call is an operand
    y = x * 1.0
    t = 0.0
    for i in range(3):
        t = t + np.sum(head(y) * x[1:])
        y[1:] = np.sin(y[:-1]) + 1.0
    return t


def shifted(x, y):  # returns its own array, written before the return
    z = np.zeros_like(y)
    z[0] = x[0]
    z[1:] = x[1:] * y[:-1]
    return z


def steps(x):  # each step binds a new z: the value returned needs no copy
    y = x * 0.5
    for _ in range(3):
        k = shifted(x, y)
        y = y + 0.3 * k * k
    return np.sum(y * y)


def steps_written_after(x):  # the caller writes into what it got back
    y = x * 0.5
    for _ in range(3):
        k = shifted(x, y)
        s = np.sum(k * x)
        k[0] = s
        y = y + 0.3 * k * k
    return np.sum(y * y)


def grown(x, z):  # writes into the caller's array, then returns it
    z[1:] = z[1:] + x[1:] * z[:-1]
    return z


def steps_same_array(x):  # one array, bound before the loop, written at every step
    z = np.zeros_like(x)
    z[0] = x[0]
    t = 0.0
    for _ in range(3):
        k = grown(x, z)
        t = t + np.sum(k * x)
    return t


def _tape_pushes(g) -> list[str]:
    return [line.strip() for line in s2sad.source(g).splitlines() if "_tape.append(" in line]


@pytest.mark.parametrize(
    "f, args",
    [
        (rebound, (np.linspace(0.2, 0.9, 6),)),
        (written_later, (np.linspace(0.2, 0.9, 6),)),
        (written_via_helper, (np.linspace(0.2, 0.9, 6),)),
        (written_via_tuple, (np.linspace(0.2, 0.9, 6),)),
        (written_via_expression, (np.linspace(0.2, 0.9, 6),)),
        (steps, (np.linspace(0.2, 0.9, 6),)),
        (steps_written_after, (np.linspace(0.2, 0.9, 6),)),
        (steps_same_array, (np.linspace(0.2, 0.9, 6),)),
    ],
)
def test_gradients_match_finite_differences_and_python(f, args):
    python = s2sad.grad(f)(*args)
    jitted = s2sad.grad(f, jit="strict")(*args)
    np.testing.assert_allclose(python, _fd(f, args, 0, 1e-6), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(jitted, python, rtol=1e-12, atol=0)
    assert jitted.shape == args[0].shape and jitted.dtype == args[0].dtype


def test_views_of_unwritten_arrays_go_on_the_tape_uncopied():
    pushes = _tape_pushes(s2sad.grad(rebound, jit="strict"))
    assert "v_tape.append(v)" in pushes
    assert "z_tape.append(snapshot(z))" in pushes  # z itself is written into
    rk4 = _tape_pushes(s2sad.grad(ode.ode_last, jit="strict"))
    views = [p for p in rk4 if p.startswith("z_item")]
    assert len(views) == 4 and not any("snapshot" in p for p in views), rk4


def _body(source: str) -> list[ast.stmt]:
    return ast.parse(textwrap.dedent(source)).body


def test_written_memory_follows_views_and_calls():
    shared = written_memory(_body("""
            y = np.zeros(n)
            v = y[:-1]
            w = helper(v)
            u = v.T
            a = y + 1.0
            b = np.zeros_like(y)
            y[1:] = c
            """))
    assert {"y", "v", "w", "u"} <= shared
    assert not {"a", "b"} & shared  # (c, copied into y, counts too: conservative)
    rebinding = written_memory(_body("""
            z = np.zeros_like(y)
            v = y[:-1]
            z[1:] = v * x
            y = y + z
            """))
    assert "z" in rebinding and not {"v", "y", "x"} & rebinding


@pytest.mark.parametrize(
    "source",
    ["np.add(a, b, out=v)", "np.copyto(v, a)", "v.fill(0.0)", "self.a[0] = 1.0"],
)
def test_writes_it_cannot_follow_give_up(source):
    assert written_memory(_body(f"v = y[:-1]\n{source}")) is None


def _primal(f) -> str:
    return s2sad.source(s2sad.grad(f)).split("# adjoint sweep:")[0]


def test_an_array_bound_afresh_each_step_is_returned_uncopied():
    assert "k = z" in _primal(steps) and "snapshot(z" not in _primal(steps)
    rk4 = _primal(ode.ode_last)
    assert "k1_2 = z2" in rk4 and "snapshot(z" not in rk4
    assert "k = snapshot(z" in _primal(steps_written_after)  # k is written into later


def spring(k, x0, v0):  # a mass-spring chain: in-place slice updates of a state rebound each step
    x = x0.copy()
    v = v0.copy()
    for _ in range(4):
        f = k * (x[1:] - x[:-1] - 1.0)
        v[1:-1] += 0.1 * (f[1:] - f[:-1])
        v[-1] -= 0.1 * f[-1]
        v *= 0.9
        x += 0.1 * v
    return np.sum(x * x)


def spring_read(k, x0, v0):  # as spring, but the adjoint reads the elements the writes change
    x = x0.copy()
    v = v0.copy()
    t = 0.0
    for _ in range(3):
        f = k * (x[1:] - x[:-1])
        v *= 0.9
        t = t + np.sum(np.sin(v))
        v[1:-1] += 0.1 * (f[1:] - f[:-1])
        x = x + 0.1 * v
    return t + np.sum(x * x)


@pytest.mark.parametrize("f", [spring, spring_read])
def test_in_place_updates_of_a_rebound_state_keep_no_copies(f):
    """`v[1:-1] += e` reads the view `v[1:-1]` only before its write, and the adjoint only its
    shape: no copy of it. `v` is bound only to new arrays (`v0.copy()`, `v * 0.9`), so writes
    into it are undone only where the adjoint reads it: in `spring` nowhere (no tape of `v`'s
    old elements), in `spring_read` by `np.sin(v)` (kept)."""
    rng = np.random.default_rng(3)
    args = (rng.uniform(0.5, 1.5, 5), np.arange(6.0) + 0.1 * rng.normal(size=6), rng.normal(size=6))
    np.testing.assert_allclose(s2sad.grad(f)(*args), _fd(f, args, 0, 1e-6), rtol=1e-6, atol=1e-8)
    source = s2sad.source(s2sad.grad(f, jit=True), *args)
    assert "snapshot" not in next(line for line in source.splitlines() if "v_item = " in line)
    assert ("_old_tape" in source) == (f is spring_read), source
