"""s2sad.checkpoint: a marked loop's gradient from at most k saved states (binomial
checkpointing), equal to the taped gradient and to central differences; the revolve driver's
forward runs against Griewank's bound; forward mode and the primal untouched; refusals."""

import warnings

import numpy as np
import pytest

import s2sad
from s2sad import checkpointing
from s2sad.cli import emit_text
from s2sad.errors import UnsupportedSyntaxError
from s2sad.jit import JitError, JitFallbackWarning

from conftest import check_grad, check_vjp


def euler(y0, k, n, snaps):
    y = y0
    for i in s2sad.checkpoint(range(n), snapshots=snaps):
        y = y + 0.01 * (-k * y + np.sin(y))
    return y


def euler_taped(y0, k, n, snaps):
    y = y0
    for i in range(n):
        y = y + 0.01 * (-k * y + np.sin(y))
    return y


def oscillator(x0, v0, k, n, snaps):
    """Two names of state, a recurrence on both; the step index is read."""
    x, v = x0, v0
    for t in s2sad.checkpoint(range(n), snapshots=snaps):
        x, v = x + 0.1 * v, v - 0.1 * k * x * np.cos(0.01 * t)
    return x * v


def oscillator_taped(x0, v0, k, n, snaps):
    x, v = x0, v0
    for t in range(n):
        x, v = x + 0.1 * v, v - 0.1 * k * x * np.cos(0.01 * t)
    return x * v


def flow(y0, W, b, n):
    """An array state and two loop-invariant parameters, then work after the loop."""
    y = y0
    for i in s2sad.checkpoint(range(2, n + 2)):
        h = np.tanh(W @ y + b)
        y = y + 0.1 * h / i
    return np.sum(y**2)


def flow_taped(y0, W, b, n):
    y = y0
    for i in range(2, n + 2):
        h = np.tanh(W @ y + b)
        y = y + 0.1 * h / i
    return np.sum(y**2)


@pytest.mark.parametrize("n", [0, 1, 2, 7, 20])
@pytest.mark.parametrize("snaps", [1, 2, 3, 25])
def test_euler_equals_the_taped_gradient(n, snaps):
    got = s2sad.grad(euler, wrt=(0, 1))(0.3, 0.8, n, snaps)
    want = s2sad.grad(euler_taped, wrt=(0, 1))(0.3, 0.8, n, snaps)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)
    assert type(got[0]) is float
    if n:
        check_grad(euler, (0.3, 0.8, n, snaps), wrt=(0, 1))


@pytest.mark.parametrize("snaps", [1, 4, 40])
def test_two_names_of_state(snaps):
    args = (0.5, -0.2, 1.3, 30, snaps)
    got = s2sad.grad(oscillator, wrt=(0, 1, 2))(*args)
    want = s2sad.grad(oscillator_taped, wrt=(0, 1, 2))(*args)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    check_grad(oscillator, args, wrt=(0, 1, 2))


def test_array_state_and_loop_invariant_parameters():
    rng = np.random.default_rng(0)
    args = (rng.normal(size=4), rng.normal(size=(4, 4)) * 0.5, rng.normal(size=4), 25)
    got = s2sad.grad(flow, wrt=(0, 1, 2))(*args)
    want = s2sad.grad(flow_taped, wrt=(0, 1, 2))(*args)
    for g, w, x in zip(got, want, args):
        np.testing.assert_allclose(g, w, rtol=1e-12)
        assert g.shape == x.shape and g.dtype == x.dtype
    check_vjp(flow, args, wrt=(0, 1, 2))
    value, grads = s2sad.value_and_grad(flow, wrt=1)(*args)
    assert value == flow(*args)
    np.testing.assert_allclose(grads, want[1], rtol=1e-12)


@pytest.mark.parametrize("n,snaps", [(10, 3), (20, 1), (100, 5), (1000, 12), (57, 57), (9, 30)])
def test_forward_runs_meet_the_binomial_bound(n, snaps):
    """Revolve reverses segments of m steps (m = 1 where binomial(k + 2, 2) >= n), each by its
    taped vjp: its forward runs of segments are Griewank's least."""
    s2sad.grad(euler, wrt=0)(0.3, 0.8, n, snaps)
    last = checkpointing.LAST
    m = checkpointing.segment_length(n, snaps)
    segments = -(-n // m)
    assert last.segment == m and (m == 1) == (n <= (snaps + 1) * (snaps + 2) // 2)
    # the forward run saved the states of revolve's first descent: the rest is the reverse's
    assert last.reused == checkpointing.first_descent(segments, snaps)[-1]
    assert last.advances + last.reused == checkpointing.least_advances(segments, snaps)
    assert last.adjoints == segments
    assert last.most_saved <= snaps
    assert last.advances <= 2 * segments  # each segment runs forward at most twice more


def test_bound_values():
    assert checkpointing.least_advances(20, 1) == 20 * 19 // 2  # from the first state each time
    assert checkpointing.least_advances(57, 57) == 56  # every state saved: one forward sweep
    assert checkpointing.least_advances(10, 3) == 15
    assert (
        checkpointing.repetitions(10, 3) == 2
        and checkpointing.repetitions(20, 3) == 3
        and checkpointing.repetitions(21, 3) == 4
    )
    k = checkpointing.default_snapshots(10**7)
    m = checkpointing.segment_length(10**7, k)
    assert (k, m) == (271, 270)  # 271 states and a tape of 270 steps, not 10^7
    assert checkpointing.repetitions(-(-(10**7) // m), k) == 2


def test_default_snapshots_keep_few_states():
    args = (0.3, 0.8, 500, None)
    got = s2sad.grad(euler, wrt=(0, 1))(*args)
    np.testing.assert_allclose(got, s2sad.grad(euler_taped, wrt=(0, 1))(*args), rtol=1e-12)
    assert checkpointing.default_snapshots(500) == 10
    assert checkpointing.LAST.most_saved <= 10 and checkpointing.LAST.segment == 8


def test_forward_mode_runs_the_loop():
    for snaps in (1, 5):
        got = s2sad.jvp(euler, wrt=(0, 1))(0.3, 0.8, 12, snaps, tangent=(1.0, 0.5))
        want = s2sad.jvp(euler_taped, wrt=(0, 1))(0.3, 0.8, 12, snaps, tangent=(1.0, 0.5))
        np.testing.assert_allclose(got, want, rtol=1e-14)
    text = s2sad.source(s2sad.jvp(euler, wrt=0), 0.3, 0.8, 3, 2)
    assert "for i in range(n):" in text and "euler_loop" not in text


def test_the_primal_is_plain_python():
    steps = range(3, 9, 2)
    assert s2sad.checkpoint(steps, snapshots=2) is steps
    assert euler(0.3, 0.8, 15, 2) == euler_taped(0.3, 0.8, 15, 2)
    with pytest.raises(ValueError, match="snapshots"):
        s2sad.checkpoint(range(3), snapshots=0)


@pytest.mark.parametrize("snaps", [0, -1, 2.5])
def test_bad_snapshots_are_refused_in_the_gradient_too(snaps):
    # the gradient never calls the mark itself (new-user trial: snapshots=-1 raised a bare
    # ZeroDivisionError from inside s2sad, and snapshots=0 was taken)
    with pytest.raises(ValueError, match="snapshots must be a positive int"):
        s2sad.grad(euler, wrt=(0, 1))(0.3, 0.8, 15, snaps)


def test_generated_code_calls_one_loop_with_the_users_names():
    text = s2sad.source(s2sad.grad(euler, wrt=(0, 1)), 0.3, 0.8, 4, 2)
    line = euler.__code__.co_firstlineno + 2
    assert f"# line {line}: for i in s2sad.checkpoint(range(n), snapshots=snaps):" in text
    assert f"euler_loop{line}(" in text and f"euler_loop{line}_vjp(" in text
    assert "tape" not in text


def test_arrays_the_body_writes_into_are_its_own():
    def f(y0, n):
        y = y0
        for t in s2sad.checkpoint(range(n), snapshots=2):
            y += 0.1 * np.sin(y)  # in place: the saved states must not change
        return np.sum(y)

    def taped(y0, n):
        y = y0.copy()
        for t in range(n):
            y = y + 0.1 * np.sin(y)
        return np.sum(y)

    y0 = np.array([0.1, 0.7, -0.4])
    got = s2sad.grad(f)(y0.copy(), 9)
    np.testing.assert_allclose(got, s2sad.grad(taped)(y0, 9), rtol=1e-13)


def _break(y, n):
    for t in s2sad.checkpoint(range(n)):
        y = y * 0.5
        if y < 0.1:
            break
    return y


def _unknown_trip(y, xs):
    for x in s2sad.checkpoint(xs):
        y = y * x
    return y


def _writes_outside(y, out, n):
    for t in s2sad.checkpoint(range(n)):
        y = y * 0.5
        out[t] = y
    return np.sum(out) + y


def _unbound_before(y, n):
    for t in s2sad.checkpoint(range(n)):
        z = y * 0.5
        y = z + 1.0
    return z


def _nested_def(omega, y, n):  # (it ran into a NameError inside the segment function)
    def rhs(v):
        return -omega * v

    for t in s2sad.checkpoint(range(n)):
        y = y + 0.1 * rhs(y)
    return y


def _lambda(omega, y, n):
    rhs = lambda v: -omega * v  # noqa: E731

    for t in s2sad.checkpoint(range(n)):
        y = y + 0.1 * rhs(y)
    return y


@pytest.mark.parametrize(
    "f,args,words",
    [
        (_break, (1.0, 5), "`break` inside a checkpointed loop"),
        (_nested_def, (0.5, 1.0, 3), r"(?s)the loop calls 'rhs', a local .*`rhs\(y, omega\)`"),
        (_lambda, (0.5, 1.0, 3), r"(?s)the loop calls 'rhs', a local .*`rhs\(y, omega\)`"),
        (_unknown_trip, (1.0, np.ones(3)), "length is unknown before the loop"),
        (_writes_outside, (1.0, np.zeros(3), 3), "a write into 'out'"),
        (_unbound_before, (1.0, 3), "'z' is assigned in the checkpointed loop"),
    ],
)
def test_refusals_name_the_construct_and_line(f, args, words):
    with pytest.raises(UnsupportedSyntaxError, match=words) as info:
        s2sad.grad(f)(*args)
    assert "test_checkpoint.py" in str(info.value)


def busy(x, steps, n):
    """A state named like the loop's own parameters, an int counter, a branch, an inner loop."""
    c = 0
    acc = 0.0
    for t in s2sad.checkpoint(range(n), snapshots=2):
        if t % 2 == 0:
            x = x * steps
        else:
            x = np.sin(x)
        for j in range(3):
            acc = acc + x[j] * t
        c = c + 1
    return np.sum(x) + acc * c


def test_branches_inner_loops_and_int_state():
    args = (np.array([0.3, 0.5, -0.2]), 1.1, 7)
    check_grad(busy, args, wrt=(0, 1))
    check_vjp(busy, args, wrt=0)


RATE = np.array([0.5, -0.25, 1.0])


def test_globals_and_closure_values_are_read_at_each_call():
    def make(scale):
        def f(y, n):
            for t in s2sad.checkpoint(range(n), snapshots=2):
                y = y + scale * RATE * np.cos(y)
            return np.sum(y)

        return f

    y = np.array([0.1, 0.2, 0.3])
    for scale in (0.1, 0.2):
        check_grad(make(scale), (y, 6))


def test_hessian_is_refused():
    with pytest.raises(s2sad.NoRuleError, match=f"euler_loop{euler.__code__.co_firstlineno + 2}"):
        s2sad.hessian(euler, wrt=0)(0.3, 0.8, 5, 2)


def test_jit_compiles_the_segments():
    """jit=True: the code around the loop runs in Python (no warning), the segments in Numba;
    "strict" likewise. One compile of each form."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        grad = s2sad.grad(euler, wrt=(0, 1), jit="strict")
        for n, snaps in ((9, 2), (40, 3), (0, 2)):
            got = grad(0.3, 0.8, n, snaps)
            want = s2sad.grad(euler_taped, wrt=(0, 1))(0.3, 0.8, n, snaps)
            np.testing.assert_allclose(got, want, rtol=1e-13)
    loop = next(v for v in grad.compiled.globals.values() if hasattr(v, "compiles_itself"))
    ((_, _, _, compiled),) = loop.transforms.values()
    assert compiled.jitted.namespace is not None and not compiled.jitted.failed


def widened(x, w, n):
    y = x
    for t in s2sad.checkpoint(range(n), snapshots=2):
        y = np.sin(y * w)
    return np.sum(y)


def test_a_segment_numba_cannot_type_is_told_once_a_call_at_the_users_loop():
    """A float32 state widened by a float64 step: the segments run in Python, and the warning
    comes once a call of the user's (each run of the failed code in the call warned: the
    descent's segments, revolve's advances, the sweeps), at the call, quoting the user's loop,
    not the segment's `for t in range(t_start, t_stop, t_step):`; "strict" raises the same."""
    x, w = np.ones(3, np.float32), np.ones(3)
    header = "for t in s2sad.checkpoint(range(n), snapshots=2):"
    line = widened.__code__.co_firstlineno + 2
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        value, pullback = s2sad.vjp(widened, jit=True)(x, w, 7)
        forward = len(seen)
        got = pullback(1.0)  # (a second call: a jitted vjp's pullback runs the loop again)
    assert (
        forward == 1
        and [(w.category, w.filename) for w in seen] == [(JitFallbackWarning, __file__)] * 2
    )
    told = str(seen[0].message)
    assert f"test_checkpoint.py line {line} (`{header}`)" in told and "t_start" not in told
    np.testing.assert_allclose(got, s2sad.grad(widened)(x, w, 7), rtol=1e-6)
    with pytest.raises(JitError) as info:
        s2sad.vjp(widened, jit="strict")(x, w, 7)
    assert told.partition(";")[0] in str(info.value)


def test_a_function_from_the_closure_is_refused():
    def make(rate):
        def f(y, n):
            for t in s2sad.checkpoint(range(n), snapshots=2):
                y = y + 0.1 * rate(y)
            return y

        return f

    with pytest.raises(UnsupportedSyntaxError, match="the loop calls 'rate'") as info:
        s2sad.grad(make(np.cos))(0.4, 5)
    assert "test_checkpoint.py" in str(info.value) and "y = y + 0.1 * rate(y)" in str(info.value)


def _carried_unbound(y, n):
    for t in s2sad.checkpoint(range(n)):
        if t > 0:
            y = y + prev  # noqa: F821  (refused: what this test checks)
        prev = y * 0.5
    return y


def _carried_in_one_line(y, n):
    for t in s2sad.checkpoint(range(n)):
        z = z + y if t else y  # noqa: F821
        y = y * 0.9 + 0.1 * z
    return y


def _target_read_after(y, n):
    for t in s2sad.checkpoint(range(n)):
        y = y * 0.5
    return y * t


@pytest.mark.parametrize(
    "f,words",
    [
        (_carried_unbound, "'prev' is carried from one step to the next"),
        (_carried_in_one_line, "'z' is carried from one step to the next"),
        (_target_read_after, "target 't' is read after the loop"),
    ],
)
def test_values_a_segment_would_lose_are_refused(f, words):
    with pytest.raises(UnsupportedSyntaxError, match=words):
        s2sad.grad(f)(1.0, 4)


def nested(y, a, n, m):
    """A checkpointed loop in a checkpointed loop, and a target reused by a plain loop."""
    for t in range(2):
        y = y * a
    for t in s2sad.checkpoint(range(n), snapshots=2):
        for s in s2sad.checkpoint(range(m), snapshots=1):
            y = y + 0.1 * np.sin(a * y)
    return y


def test_nested_checkpointed_loops():
    check_grad(nested, (0.3, 1.2, 4, 3), wrt=(0, 1))


def drift(y, a, n):
    for t in s2sad.checkpoint(range(n), snapshots=2):
        y = y + a  # nothing to record: the segment's pullback is a closure, not a second sweep
    return y * y


def test_exact_values_of_a_loop_without_a_tape():
    assert s2sad.grad(drift, wrt=(0, 1))(0.5, 0.25, 6) == (4.0, 24.0)
    assert s2sad.grad(drift, wrt=(0, 1))(0.5, 0.25, 0) == (1.0, 0.0)


def test_a_standalone_module_is_refused(tmp_path):
    (tmp_path / "marked.py").write_text(
        "import s2sad\n\n\ndef f(y, n):\n"
        "    for t in s2sad.checkpoint(range(n)):\n        y = y * 0.5\n    return y\n"
    )
    with pytest.raises(s2sad.S2SADError, match="a loop marked s2sad.checkpoint"):
        emit_text(f"{tmp_path / 'marked.py'}:f", ["y"], "grad")


def spread(y0, k, n):
    y = y0
    for i in s2sad.checkpoint(range(n), snapshots=2):
        y = y + 0.01 * (-k * y + np.sin(y))
    return np.sum(y)


def spread_taped(y0, k, n):
    y = y0
    for i in range(n):
        y = y + 0.01 * (-k * y + np.sin(y))
    return np.sum(y)


@pytest.mark.parametrize("shapes", [((), (3,)), ((3,), ()), ((2, 1), (3,))])
def test_a_state_that_broadcasts_into_a_larger_shape(shapes):
    """The state's rank changes after the first step: each rank gets its own segment vjp."""
    rng = np.random.default_rng(1)
    y0, k = (rng.normal(size=s) if s else 0.3 for s in shapes)
    for n in (0, 1, 9):
        got = s2sad.grad(spread, wrt=(0, 1))(y0, k, n)
        want = s2sad.grad(spread_taped, wrt=(0, 1))(y0, k, n)
        for g, w, x in zip(got, want, (y0, k)):
            np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-15)
            assert np.shape(g) == np.shape(x)
    check_grad(spread, (y0, k, 9), wrt=(0, 1))


def test_jacobian_of_an_array_output():
    def f(y, W, n):
        for t in s2sad.checkpoint(range(n), snapshots=3):
            y = y + 0.1 * np.tanh(W @ y)
        return y

    def taped(y, W, n):
        for t in range(n):
            y = y + 0.1 * np.tanh(W @ y)
        return y

    rng = np.random.default_rng(2)
    y, W = rng.normal(size=3), rng.normal(size=(3, 3))
    got = s2sad.jacobian(f, wrt=(0, 1))(y, W, 8)
    want = s2sad.jacobian(taped, wrt=(0, 1))(y, W, 8)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12)


def test_pullbacks_of_earlier_calls_run_the_first_descent_again():
    first = s2sad.vjp(euler, wrt=1)(0.3, 0.8, 30, 3)
    second = s2sad.vjp(euler, wrt=1)(0.5, 0.7, 30, 3)
    want = [s2sad.grad(euler_taped, wrt=1)(*a) for a in ((0.3, 0.8, 30, 3), (0.5, 0.7, 30, 3))]
    for (out, pullback), w in zip((first, second, first), want + want[:1]):
        np.testing.assert_allclose(pullback(1.0), w, rtol=1e-13)
    assert checkpointing.LAST.reused == 0 or checkpointing.LAST.advances > 0


def readme_euler(y, h, n):
    for t in s2sad.checkpoint(range(n), snapshots=20):  # without s2sad: range(n) itself
        y = y + h * (-y + np.sin(y))
    return np.sum(y)


def readme_euler_taped(y, h, n):
    for t in range(n):
        y = y + h * (-y + np.sin(y))
    return np.sum(y)


def test_readme_checkpoint():
    y = np.array([0.3, 1.0, -0.5])
    g = s2sad.grad(readme_euler)
    np.testing.assert_allclose(
        g(y, 0.01, 1000), s2sad.grad(readme_euler_taped)(y, 0.01, 1000), rtol=1e-12
    )
    assert readme_euler(y, 0.01, 1000) == readme_euler_taped(y, 0.01, 1000)
    assert "_loop" in s2sad.source(g) and "_vjp(" in s2sad.source(g)
