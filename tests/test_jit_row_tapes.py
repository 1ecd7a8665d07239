"""Tapes of rows in jitted code (pipeline/row_tapes.py): a loop whose trip count is known when
it starts records its values into rows of one array each, made at the first push, or before the
loop like the buffer a fused run writes the value into (rows_before.py). Each case is
checked against finite differences (float64) and Python mode, and the fused code is read for
which tapes became rows: loops with a known trip count (nested too), but not a `while` loop, a
loop whose bounds an outer loop changes (`range(i)`), or values pushed at a `break`. Values whose
shape changes from one iteration to the next do not fit their rows: the call runs again in the
code without fused loops, which keeps lists, and gives the same numbers."""

import re

import numpy as np
import pytest

import s2sad
from conftest import check_grad
from test_jit_fuse_stores import rhs_steps

numba = pytest.importorskip("numba")

pytestmark = pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaWarning")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))


def rk4_steps(y, k, n):  # an array state: each step records arrays of y's shape
    h = 0.1
    for _ in range(n):
        a = np.sin(k * y)
        b = np.sin(k * (y + h / 2 * a))
        y = y + h / 2 * (a + b)
    return np.sum(y * y)


def strided_steps(y, k, n):  # range(1, n, 2): the trip count is len(range(1, n, 2))
    for t in range(1, n, 2):
        y = y + 0.1 * np.sin(k * y + t)
    return np.sum(y * y)


def gated_layers(x, w, n, m):  # nested loops: the inner trip count m is known at the start
    h = np.zeros_like(x)
    total = 0.0
    for t in range(n):
        inp = x * (t + 1.0)
        for j in range(m):
            gate = 1.0 / (1.0 + np.exp(-(inp * w[j] + h)))
            h = gate * np.tanh(h + inp)
            inp = h
        total = total + np.sum(np.log(1.0 + h * h))
    return total


def scalar_steps(y, k, n):  # numbers on the tapes: rows of numbers
    for _ in range(n):
        y = y + 0.1 * np.sin(k * y) * np.cos(y)
    return y


def until_small(y, k):  # a while loop: its trip count is not known when it starts
    steps = 0
    while np.sum(y * y) > 0.5 and steps < 50:
        y = y * (0.9 + 0.05 * np.sin(k * y))
        steps += 1
    return np.sum(np.cos(y))


def stops_early(y, k, n):  # break: the values pushed there stay on lists
    for _ in range(n):
        y = y + 0.1 * np.sin(k * y)
        if np.sum(y) > 3.0:
            break
    return np.sum(y * y)


def triangular(x, k):  # range(i): the inner trip count changes with the outer loop
    s = 0.0
    for i in range(x.shape[0]):
        for j in range(i):
            s = s + np.sin(k * x[j] * x[i])
    return s


def growing_prefix(x, k):  # a value whose shape grows every iteration: it fits no rows
    c = k
    for i in range(x.shape[0]):
        v = np.sin(c * x[: i + 1])
        c = c + 0.1 * np.sum(v * v)
    return c


def _fused_source(g, *args) -> str:
    g(*args)
    return s2sad.source(g)


def _same_as_python(f, args, wrt, rtol=1e-10):
    jitted = s2sad.grad(f, wrt=wrt, jit="strict")(*args)
    plain = s2sad.grad(f, wrt=wrt)(*args)
    jitted = jitted if isinstance(jitted, tuple) else (jitted,)
    plain = plain if isinstance(plain, tuple) else (plain,)
    for a, b in zip(jitted, plain):
        assert np.shape(a) == np.shape(b) and np.asarray(a).dtype == np.asarray(b).dtype
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-12)


def test_known_trip_count_records_rows():
    y, k = np.linspace(-1.0, 1.0, 7), np.linspace(0.5, 1.5, 7)
    source = _fused_source(s2sad.grad(rk4_steps, wrt=("y", "k"), jit="strict"), y, k, 12)
    assert "row_tape(" in source and "push_row(" in source and "pop_row(" in source
    assert ".append(" not in source  # every tape of the loop became rows
    check_grad(rk4_steps, (y, k, 12), wrt=("y", "k"))
    _same_as_python(rk4_steps, (y, k, 12), ("y", "k"))


def test_range_with_start_and_step():
    y, k = np.linspace(-1.0, 1.0, 5), np.linspace(0.5, 1.5, 5)
    g = s2sad.grad(strided_steps, wrt=("y", "k"), jit="strict")
    source = _fused_source(g, y, k, 9)  # (the rows take a slot of the workspace)
    assert re.search(r"pooled_row_tape\(workspace, \d+, y, len\(range\(1, n, 2\)\)\)", source)
    for n in (0, 2, 9):
        check_grad(strided_steps, (y, k, n), wrt=("y", "k"))
        _same_as_python(strided_steps, (y, k, n), ("y", "k"))


def test_no_iterations_and_one():
    y, k = np.linspace(-1.0, 1.0, 5), np.linspace(0.5, 1.5, 5)
    for n in (0, 1):
        check_grad(rk4_steps, (y, k, n), wrt=("y", "k"))
        _same_as_python(rk4_steps, (y, k, n), ("y", "k"))


def test_nested_loops_share_one_count_and_rows_for_both():
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=6), rng.normal(size=(3, 6))
    source = _fused_source(s2sad.grad(gated_layers, wrt=("x", "w"), jit="strict"), x, w, 5, 3)
    assert "j_taped" in source and "* m" in source  # rows for n * m inner iterations
    # the gate is written into a buffer made before the loops: its rows are made there too
    made = re.search(
        r"gate_tape = pooled_rows_like\(workspace, \d+, gate_buffer, j_trips\)", source
    )
    assert (
        made.start() < source.index("\n    for t in range(n):") and "row_tape(gate," not in source
    )
    # the shapes the adjoint reads go into rows of integers, counted with the gate's
    assert re.search(r"gate_mul_tape = shape_rows\(j_trips\d*, 1\)", source)
    assert re.search(r"push_shape_row\(gate_mul_tape, j_taped\d*, gate_mul\.shape\)", source)
    check_grad(gated_layers, (x, w, 5, 3), wrt=("x", "w"))
    _same_as_python(gated_layers, (x, w, 5, 3), ("x", "w"))


def test_numbers_on_rows():
    source = _fused_source(s2sad.grad(scalar_steps, wrt=("y", "k"), jit="strict"), 0.3, 0.8, 20)
    assert "push_row(" in source
    check_grad(scalar_steps, (0.3, 0.8, 20), wrt=("y", "k"))
    _same_as_python(scalar_steps, (0.3, 0.8, 20), ("y", "k"))


def test_while_loop_keeps_lists():
    y, k = np.linspace(0.2, 1.0, 6), np.linspace(0.5, 1.5, 6)
    source = _fused_source(s2sad.grad(until_small, wrt=("y", "k"), jit="strict"), y, k)
    assert "push_row(" not in source and ".append(" in source
    check_grad(until_small, (y, k), wrt=("y", "k"))
    _same_as_python(until_small, (y, k), ("y", "k"))


@pytest.mark.parametrize("n", [3, 40])  # stops at the break, or runs to the end
def test_break_keeps_the_values_pushed_there_on_lists(n):
    y, k = np.linspace(0.1, 0.9, 5), np.linspace(0.5, 1.5, 5)
    source = _fused_source(s2sad.grad(stops_early, wrt=("y", "k"), jit="strict"), y, k, n)
    assert "push_row(" not in source
    check_grad(stops_early, (y, k, n), wrt=("y", "k"))
    _same_as_python(stops_early, (y, k, n), ("y", "k"))


def test_inner_trip_count_that_changes_keeps_lists():
    x = np.linspace(0.1, 1.0, 6)
    g = s2sad.grad(triangular, wrt=("x", "k"), jit="strict")
    source = _fused_source(g, x, 0.7)
    inner = source[source.index("for j in range(i)") :]
    assert "push_row(" not in inner.split("# adjoint sweep")[0]
    check_grad(triangular, (x, 0.7), wrt=("x", "k"))
    _same_as_python(triangular, (x, 0.7), ("x", "k"))


def test_shapes_that_change_run_the_code_with_lists():
    x = np.linspace(0.1, 1.0, 6)
    g = s2sad.grad(growing_prefix, wrt=("x", "k"), jit="strict")
    source = _fused_source(g, x, 0.7)
    assert "push_row(" in source  # the fused code has rows, which the prefixes do not fit
    check_grad(growing_prefix, (x, 0.7), wrt=("x", "k"))
    _same_as_python(growing_prefix, (x, 0.7), ("x", "k"))
    one = np.array([0.4])  # a single iteration fits, then more do not: each call is right
    _same_as_python(growing_prefix, (one, 0.7), ("x", "k"))
    _same_as_python(growing_prefix, (x, 0.7), ("x", "k"))


def test_a_misfit_sends_calls_of_its_shapes_alone_to_the_code_with_lists():
    """The fallback is per shapes, not per kinds: a call whose values fit (one iteration)
    still runs the rows after another (six) did not."""
    x, one = np.linspace(0.1, 1.0, 6), np.array([0.4])
    g = s2sad.grad(growing_prefix, wrt=("x", "k"), jit="strict")
    for args in ((x, 0.7), (one, 0.7), (x, 0.7)):  # a misfit, a fit, the misfit remembered
        got = g(*args)
        want = s2sad.grad(growing_prefix, wrt=("x", "k"))(*args)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    jitted = g.compiled.jitted
    name = g.compiled.name
    assert jitted.ran(name, (x, 0.7)) is jitted.unfused  # the lists ran it
    assert jitted.ran(name, (one, 0.7)) is jitted  # the rows ran it
    assert len(jitted.misfits) == 1


def float32_steps(y, k, n):  # float32 arrays only: no Python float widens them in Numba
    for _ in range(n):
        y = y + k * np.sin(y) * np.cos(k * y)
    return np.sum(y * y)


def test_float32_stays_float32():
    y = np.linspace(-0.5, 0.5, 6).astype(np.float32)
    k = np.linspace(0.1, 0.3, 6).astype(np.float32)
    g = s2sad.grad(float32_steps, wrt=("y", "k"), jit="strict")
    assert "push_row(" in _fused_source(g, y, k, 8)
    jitted = g(y, k, 8)
    plain = s2sad.grad(float32_steps, wrt=("y", "k"))(y, k, 8)
    for a, b in zip(jitted, plain):
        assert a.dtype == np.float32 and a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=1e-5)


def test_python_mode_keeps_lists():
    y, k = np.linspace(-1.0, 1.0, 7), np.linspace(0.5, 1.5, 7)
    source = _fused_source(s2sad.grad(rk4_steps, wrt=("y", "k")), y, k, 3)
    assert "push_row(" not in source and ".append(" in source


def test_python_forms_are_lists():
    """The jitted code run as Python (its fallback) calls the helpers' NumPy forms."""
    from s2sad.rules.tapes import pop_row, push_row, row_tape

    tape = row_tape(np.zeros(3), 2)
    a, b = np.ones(3), np.arange(4.0)  # any shapes: a list keeps them
    push_row(tape, 0, a)
    push_row(tape, 1, b)
    assert pop_row(tape, 1) is b and pop_row(tape, 0) is a and tape == []


def test_rows_made_like_a_buffer_take_only_values_that_fit():
    """Rows made before their loop like a buffer (`rows_like`) are that buffer's guess: a value
    of another shape, dtype or number of axes raises the misfit the fallback catches."""
    import s2sad.numba_helpers  # noqa: F401  (registers the helpers' Numba forms)
    from s2sad.rules.tapes import ROW_TAPE_MISFIT, pop_row, push_row, rows_like

    @numba.njit
    def keep(buffer, x):
        tape = rows_like(buffer, 2)
        push_row(tape, 1, x)
        return pop_row(tape, 1)

    assert np.array_equal(keep(np.zeros(3), np.arange(3.0)), np.arange(3.0))
    for x in (np.ones(4), np.ones(3, np.float32), np.ones((1, 3))):
        with pytest.raises(ValueError, match=ROW_TAPE_MISFIT):
            keep(np.zeros(3), x)
    assert rows_like(np.zeros(3), 2) == []  # Python: a list, which keeps any value


def test_rows_of_shapes():
    """A shape the adjoint reads (`unbroadcast(g, x)`) recorded in a row of integers, and popped
    as a stand-in of that shape in the name's dtype; an array of other axes does not fit."""
    import s2sad.numba_helpers  # noqa: F401  (registers the helpers' Numba forms)
    from s2sad.rules.tapes import ROW_TAPE_MISFIT, pop_shape_row, push_shape_row, shape_rows

    @numba.njit
    def kept(x, now):
        tape = shape_rows(3, 2)
        push_shape_row(tape, 1, x.shape)
        return pop_shape_row(tape, 1, now)

    got = kept(np.ones((2, 5)), np.ones((4, 4), np.float32))
    assert got.shape == (2, 5) and got.dtype == np.float32
    with pytest.raises(ValueError, match=ROW_TAPE_MISFIT):
        kept(np.ones(5), np.ones((4, 4)))
    tape = shape_rows(3, 2)  # Python: a list of shapes
    push_shape_row(tape, 0, (2, 5))
    stand_in = pop_shape_row(tape, 0, np.ones((1, 1), np.float32))
    assert stand_in.shape == (2, 5) and stand_in.dtype == np.float32 and tape == []


def unnamed_steps(x, n):  # `for _ in range(n)`: the count is named after the steps
    h = x
    for _ in range(n):
        h = np.tanh(h * 0.9) + x
    return np.sum(h * h)


def test_a_loop_over_underscore_names_its_count_step_taped():
    x = np.linspace(-1.0, 1.0, 5)
    source = _fused_source(s2sad.grad(unnamed_steps, jit="strict"), x, 4)
    assert "step_taped = 0" in source and "__taped" not in source
    check_grad(unnamed_steps, (x, 4), wrt=0)
    _same_as_python(unnamed_steps, (x, 4), 0)


def test_views_go_into_rows_of_the_workspace():
    """rhs_steps keeps `y[:-1]`, a view of the array the last step made, on a tape of views
    (`view_rows`): a list of the arrays where the call has no workspace, rows of it the elements
    are copied into where it has one (the RK4 ODE's tapes: 320 MB of fresh pages a call before).
    The second call reuses the rows the first laid out, and gives the same numbers."""
    x = np.linspace(0.5, 1.0, 20000)  # 160 KB: a workspace, rows of 8 x 160 KB
    g = s2sad.grad(rhs_steps, wrt=0, jit="strict")
    plain = s2sad.grad(rhs_steps, wrt=0)(x, 8)
    for _ in range(2):
        np.testing.assert_allclose(g(x, 8), plain, rtol=1e-12)
    source = s2sad.source(g)
    assert "pooled_view_rows(workspace," in source and "push_view(" in source
    [pool] = g.compiled.jitted.pools.values()
    assert pool.kept_bytes() >= 8 * (x.nbytes - 8) and pool.asked
    check_grad(rhs_steps, (x[:6], 3), wrt=0)  # (Python mode: lists)


def test_view_rows_python_forms_are_lists():
    from s2sad.rules.tapes import pop_row, push_view, view_rows

    y = np.arange(4.0)
    tape = view_rows(y[1:], 2)
    push_view(tape, 0, y[1:])
    assert pop_row(tape, 0).base is y and tape == []
