"""Buffers made once before a loop (pipeline/hoist.py): an array a fused run in a loop's body
allocates is made before the loop and reused (`reused(x_buffer, shape, dtype)`), where nothing
sharing its memory outlives the iteration. Each case is checked against finite differences
(float64) and Python mode, with the fused code having run, and the emitted code is read for
where each allocation stands: before the loop where the array dies with the iteration, in it
where the array is kept on a tape, carried to the next iteration, returned or aliased into a
carried value. A temporary whose shape changes from one iteration to the next gets a fresh array
where the buffer does not fit. A copy of a row the loop later writes into (`snapshot`) is made
into a buffer likewise (`snapshot_into`)."""

import ast
import re

import numpy as np
import pytest

import s2sad
from conftest import check_grad, check_jvp
from s2sad.pipeline.hoist import _exposed

numba = pytest.importorskip("numba")

pytestmark = pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaWarning")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))


def rk4(x, y, h):  # gradbench's ode: the adjoint's cotangents of the stages die each step
    def rhs(y):
        z = np.zeros_like(y)
        z[0] = x[0]
        z[1:] = x[1:] * y[:-1]
        return z

    k1 = rhs(y)
    k2 = rhs(y + h / 2 * k1)
    k3 = rhs(y + h / 2 * k2)
    k4 = rhs(y + h * k3)
    return y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)


def ode_last(x, s):
    y = np.zeros_like(x)
    for _ in range(s):
        y = rk4(x, y, 2.0 / s)
    return y[-1]


def gated(x, w, n):  # the gate dies with the iteration; h is carried
    h = np.zeros_like(x)
    total = 0.0
    for t in range(n):
        gate = 1.0 / (1.0 + np.exp(-(x * w[t] + h)))
        h = gate * np.tanh(h + x)
        total = total + np.sum(h * h)
    return total


def kept_as_previous(x, w, n):  # each step's array is read again in the next one
    prev = np.zeros_like(x)
    total = 0.0
    for t in range(n):
        cur = np.sin(x * w[t]) + 0.5 * prev
        total = total + np.sum(cur * prev)
        prev = cur
    return total


def returned_state(x, w, n):  # the last step's array is the function's value
    y = x * 1.0
    for t in range(n):
        y = np.tanh(y * w[t] + x)
    return np.sum(y * x)


def aliased_into_carried(x, w, n):  # a view of the step's array is carried
    tail = x[1:] * 1.0
    for t in range(n):
        full = np.cos(x * w[t] + tail[0])
        tail = full[1:]
    return np.sum(tail * tail)


def shrinking(x, w):  # y, and so v, one element shorter every iteration
    y = x * 1.0
    s = 0.0
    for i in range(x.shape[0] - 1):
        v = np.sin(y * w) * y
        s = s + np.sum(v[1:] * v[:-1])
        y = y[1:] * 0.9
    return s


def shrinking_until(x, w):  # a while loop: its tapes are lists, which keep the arrays
    y = x * 1.0
    s = 0.0
    while y.shape[0] > 1:
        s = s + np.sum(np.sin(y * w) * 2.0)
        y = y[1:]
    return s


def gated_until(x, w, n):  # gated's steps, the loop left by `break`
    h = np.zeros_like(x)
    total = 0.0
    for t in range(n):
        h = np.tanh(h + x) / (1.0 + np.exp(-(x * w[t] + h)))
        total = total + np.sum(h * h)
        if total > 2.0:
            break
    return total


def rows_in_place(x, w, n):  # rows read, then written: each read a copy (snapshot) a step
    h = np.ones((2, x.shape[0]))
    prev = x * 0.0
    total = 0.0
    for t in range(n):
        total = total + np.sum(h[1] * prev)
        for j in range(2):
            gate = 1.0 / (1.0 + np.exp(-(h[j] * w[t] + x)))
            h[j] = gate * np.tanh(h[j] + x)
        prev = h[0]  # carried to the next step (read there before h is written): stays fresh
    return total


def _ran_fused(f, args, wrt, fused=True):
    """The fused source of the jitted gradient, after checking that its fused code ran the call
    (unless not `fused`) and gave Python mode's gradient (and Python mode finite differences')."""
    g = s2sad.grad(f, wrt=wrt, jit="strict")
    got = g(*args)
    jitted = g.compiled.jitted
    assert (jitted.ran(g.compiled.name, args) is jitted) == fused  # or the unfused fallback
    want = s2sad.grad(f, wrt=wrt)(*args)
    got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
    for a, b in zip(got, want):
        assert np.shape(a) == np.shape(b) and np.asarray(a).dtype == np.asarray(b).dtype
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    check_grad(f, args, wrt=wrt)
    return s2sad.source(g)


def _loops(source: str) -> list:
    return [n for n in ast.walk(ast.parse(source)) if isinstance(n, (ast.For, ast.While))]


def _allocated_in(loop, name: str) -> bool:
    """Whether `name = np.empty(...)` (or zeros) stands in `loop`'s body, at any depth."""
    return any(
        isinstance(n, ast.Assign)
        and isinstance(n.targets[0], ast.Name)
        and n.targets[0].id == name
        and ast.unparse(n.value).startswith(("np.empty(", "np.zeros("))
        for n in ast.walk(ast.Module(loop.body, []))
    )


def _buffers_before(source: str) -> dict[str, ast.AST]:
    """Each `x_buffer = np.empty(...)` (`pooled(workspace, k, ...)`) -> the loop statement that follows it in its block, and
    where `reused(x_buffer, ...)` must stand."""
    out = {}
    for node in ast.walk(ast.parse(source)):
        for block in (getattr(node, "body", None), getattr(node, "orelse", None)):
            if not isinstance(block, list):
                continue
            for k, stmt in enumerate(block):
                made = ast.unparse(stmt.value) if isinstance(stmt, ast.Assign) else ""
                if made.startswith(("np.empty(", "pooled(")):  # (outside loops: a slot)
                    name = stmt.targets[0].id
                    if name.endswith("_buffer"):
                        loop = next(
                            s for s in block[k + 1 :] if isinstance(s, (ast.For, ast.While))
                        )
                        out[name] = loop
    return out


def _uses_in(loop, buffer: str) -> list[str]:
    """The names assigned `reused(buffer, ...)` (or `reused_zeros`) in `loop`."""
    return [
        n.targets[0].id
        for n in ast.walk(ast.Module(loop.body, []))
        if isinstance(n, ast.Assign)
        and isinstance(n.value, ast.Call)
        and ast.unparse(n.value.func) in ("reused", "reused_zeros")
        and ast.unparse(n.value.args[0]) == buffer
    ]


def test_ode_adjoint_arrays_made_before_the_loop():
    x = np.linspace(0.2, 1.1, 9)
    source = _ran_fused(ode_last, (x, 6), "x")
    buffers = _buffers_before(source)
    assert len(buffers) >= 4
    for buffer, loop in buffers.items():
        users = _uses_in(loop, buffer)
        assert users == [buffer[: -len("_buffer")]]  # one array, reused in the loop after it
        assert not _allocated_in(loop, users[0])
    # the stages' cotangents in the adjoint loop: dk1..dk4 come from buffers
    adjoint = source[source.index("# adjoint sweep") :]
    assert adjoint.count("reused(") >= 4
    # the cotangent the adjoint loop carries, dy, stays a fresh array a step
    assert re.search(r"\bdy\w*_out\w* = np\.empty\(", adjoint)


def test_ode_forward_values_on_tapes_are_not_reused():
    """The forward stages' `y + h / 2 * k` are kept on a tape (a view of each): fresh arrays."""
    x = np.linspace(0.2, 1.1, 9)
    source = _ran_fused(ode_last, (x, 6), "x")
    forward = _loops(source)[0]
    assert not _uses_in(forward, "k2_add_buffer") and _allocated_in(forward, "k2_add")
    assert not any("reused(" in ast.unparse(s) for s in forward.body)


def test_nested_loops_and_carried_state():
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=7), rng.normal(size=(5, 7))
    source = _ran_fused(gated, (x, w, 5), ("x", "w"))
    assert _buffers_before(source)
    primal = source[: source.index("# adjoint sweep")]
    # h is carried: its array is made each step; the gate's comes from a buffer
    assert "h_new = np.empty(" in primal or "h = np.empty(" in primal
    assert "reused(gate_buffer" in primal


@pytest.mark.parametrize(
    "f, wrt",
    [(kept_as_previous, ("x", "w")), (returned_state, ("x", "w")), (aliased_into_carried, "x")],
)
def test_arrays_that_outlive_the_iteration_stay_fresh(f, wrt):
    rng = np.random.default_rng(1)
    x, w = rng.normal(size=6), rng.normal(size=(4, 6))
    source = _ran_fused(f, (x, w, 4), wrt)
    primal = source[: source.index("# adjoint sweep")]
    loop = _loops(source)[0]
    carried = {
        "kept_as_previous": "cur",
        "returned_state": "y_new",
        "aliased_into_carried": "full",
    }[f.__name__]
    assert _allocated_in(loop, carried), primal
    assert f"reused({carried}_buffer" not in source


def test_snapshots_copied_into_buffers():
    """A row read before the code writes into it is copied each step (`snapshot`); where the
    copy dies with the iteration (kept on a tape only by a copy into its row) it is copied into a
    buffer made before the loops, `snapshot_into(x_buffer, h[j])`, and stays a fresh copy where
    it is carried."""
    rng = np.random.default_rng(2)
    x, w = rng.normal(size=6), rng.normal(size=(4, 6))
    # (the code read, not compiled: the corpus, test_jit_corpus.py, runs it against Python mode)
    source = s2sad.source(s2sad.grad(rows_in_place, wrt=("x", "w"), jit=True), x, w, 4)
    check_grad(rows_in_place, (x, w, 4), wrt=("x", "w"))
    buffers = _buffers_before(source)
    outer = _loops(source)[0]
    for name, read in (("gate_item", "h[j]"), ("h_item", "h[j]"), ("total_item", "h[1]")):
        assert f"{name} = snapshot_into({name}_buffer, {read})" in source
        assert buffers[f"{name}_buffer"].lineno == outer.lineno  # before the loops
    assert "prev_new = snapshot(h[0])" in source


def test_snapshot_into_copies_into_the_buffer_only_where_it_fits():
    import s2sad.numba_helpers  # noqa: F401  (registers the helpers' Numba forms)
    from s2sad.rules.loop_tests import snapshot_into

    copy = numba.njit(lambda buffer, v: snapshot_into(buffer, v))
    buffer, v = np.zeros(4), np.arange(8.0).reshape(2, 4)
    got = copy(buffer, v[1])
    assert np.shares_memory(got, buffer) and np.array_equal(buffer, v[1])
    other = copy(buffer, v[:, 1])  # another shape: a fresh copy
    assert not np.shares_memory(other, buffer) and np.array_equal(other, v[:, 1])
    fresh = copy(buffer, v[1].astype(np.float32))  # another dtype: a copy of its own dtype
    assert fresh.dtype == np.float32 and np.array_equal(fresh, v[1])
    assert np.array_equal(snapshot_into(buffer, v[0]), v[0])  # Python: a copy
    assert not np.shares_memory(snapshot_into(buffer, v[0]), v)


def test_shapes_that_change_get_fresh_arrays():
    """Forward mode (no tapes): the buffer is made for y's first length; every later iteration
    gets a fresh array of its own length from `reused`."""
    x, t = np.linspace(0.1, 1.0, 7), np.linspace(-1.0, 1.0, 7)
    f = s2sad.jvp(shrinking, wrt="x", jit="strict")
    got = f(x, 0.7, tangent=t)
    jitted = f.compiled.jitted
    assert jitted.ran(f.compiled.name, (x, 0.7, t)) is jitted
    want = s2sad.jvp(shrinking, wrt="x")(x, 0.7, tangent=t)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    check_jvp(shrinking, (x, 0.7), wrt="x")
    source = s2sad.source(f)
    assert "reused(v_buffer, y.shape, y.dtype)" in source
    _, loop = next(iter(_buffers_before(source).items()))
    assert _uses_in(loop, "v_buffer") == ["v"]
    # reverse mode: its tapes' rows do not fit y, and the code without fused loops runs it
    _ran_fused(shrinking, (x, 0.7), ("x", "w"), fused=False)


def test_values_kept_on_a_list_tape_stay_fresh():
    x = np.linspace(0.1, 1.0, 7)
    source = _ran_fused(shrinking_until, (x, 0.7), ("x", "w"))
    forward = _loops(source)[0]
    assert "_tape.append(" in ast.unparse(forward)  # a while loop's tapes are lists
    assert not any("reused(" in ast.unparse(s) for s in forward.body)
    assert any(_allocated_in(forward, n) for n in ("s_mul", "s_sin", "s_mul2"))


def test_a_loop_left_by_break():
    rng = np.random.default_rng(2)
    x, w = rng.normal(size=6), rng.normal(size=(5, 6))
    source = _ran_fused(gated_until, (x, w, 5), ("x", "w"))  # (left at the second step)
    primal, adjoint = source.split("# adjoint sweep")
    assert "reused(" not in primal  # a loop that may break keeps its values on lists
    assert "reused(dh_new_out_buffer" in adjoint  # the adjoint's cotangent dies each step


def test_a_break_goes_on_after_the_loop_it_leaves():
    """The names read before being assigned after a statement (`hoist._exposed` of the lists
    that may run after it): a path that breaks skips the rest of the loop's body, so a name
    that rest assigns may be read after the loop with an older value; and in the body, what
    follows an `if` that breaks on one side is read only where the other side ran."""
    module = ast.parse("while c:\n    if d:\n        break\n    y = v\nz = y\n")
    loop, after = module.body[0], module.body[1:]
    assert "y" in _exposed([loop.body, [loop], after])
    assert "y" not in _exposed([loop.body[1:], [loop], after])  # (no break on the way)
    module = ast.parse(
        "for t in r:\n    if d:\n        break\n    else:\n        v = 1\n    w = v + t\n"
    )
    assert _exposed([module.body]) == {"r", "d"}  # (v assigned where not left, t by the loop)


def test_reused_hands_back_the_buffer_only_where_it_fits():
    import s2sad.numba_helpers  # noqa: F401  (registers the helpers' Numba forms)
    from s2sad.rules.loop_tests import reused, reused_zeros

    @numba.njit
    def pick(buffer, like, zeros):
        if zeros:
            return reused_zeros(buffer, like.shape, like.dtype)
        return reused(buffer, like.shape, like.dtype)

    buffer = np.full(5, 3.0)
    assert pick(buffer, np.ones(5), False) is not None
    same = pick(buffer, np.ones(5), True)
    assert np.shares_memory(same, buffer) and np.all(buffer == 0.0)
    other = pick(buffer, np.ones(4), False)
    assert other.shape == (4,) and not np.shares_memory(other, buffer)
    with pytest.raises(numba.core.errors.TypingError):
        pick(buffer, np.ones(5, np.float32), False)  # another dtype does not compile
