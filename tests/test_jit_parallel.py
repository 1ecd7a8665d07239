"""`parallel=True`: independent loops run as Numba `prange` loops, their sums race-free.

Each workload is checked against finite differences and against Python mode, in float64 and
float32, for grad, vjp, jvp and jacobian; the generated source shows `prange` where the loop is
independent and not where it is not; a loop the user wrote over `numba.prange` that is not
independent is refused at its line. The numbers must not depend on the number of threads: each
case also runs on one thread (`numba.set_num_threads(1)`)."""

import ast
import warnings

import numpy as np
import pytest

import s2sad
from s2sad.serial_loops import SerialLoopsWarning
from conftest import check_grad, check_jvp, check_vjp
from s2sad.errors import S2SADError, UnsupportedSyntaxError
from s2sad.pipeline.raising import value_errors

numba = pytest.importorskip("numba")
from numba import prange  # noqa: E402  (after the skip: the user's own import)

pytestmark = pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaWarning")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))


def per_row(W, b, x):  # out[i] from row i alone: the rows' values are recomputed, not taped
    n = x.shape[0]
    out = np.zeros((n, W.shape[0]))
    s = 0.0
    for i in range(n):
        out[i] = np.tanh(W @ x[i] + b)
        s = s + np.sum(out[i] ** 3)  # the iteration's own row, read back: still independent
    return np.sum(out**2) + s


def scalar_sum(x, k):  # a scalar accumulator: Numba's reduction, in both sweeps
    s = 0.0
    for i in range(x.shape[0]):
        s += np.sin(k * x[i]) ** 2
    s = s - 0.5 * k
    return s


def shared_filter(x, w):  # dw and dx are added into at shared indices: rows per thread
    n = x.shape[0]
    m = w.shape[0]
    y = np.zeros(n - m + 1)
    for i in range(n - m + 1):
        acc = 0.0
        for k in range(m):
            acc = acc + w[k] * x[i + k]
        y[i] = acc
    return np.sum(np.tanh(y))


def array_sum(x, W):  # an array sum, through temporaries: its adjoint reads the sum's value
    # (for its shape) from a tape, so reverse mode stays serial; forward mode sums by rows
    acc = np.zeros_like(W)
    for i in range(x.shape[0]):
        acc = acc + x[i] * W - 0.1 * W * W
    return np.sum(acc**2)


def private_scratch(x, c):  # an array each iteration allocates and fills by element: the
    # outer loop records np.sum(t) for the log's rule, so reverse mode stays serial, and the
    # fill loop inside it stays serial too (threads would start at each row); forward mode
    # has threads (x[i, k] is proven in range: over range(3) it is checked, and stays serial)
    n, m = x.shape
    total = 0.0
    for i in range(n):
        t = np.zeros(m)
        for k in range(m):
            t[k] = np.exp(c * x[i, k])
        total = total + np.log(np.sum(t))
    return total


def user_prange(x, a):
    n = x.shape[0]
    y = np.zeros(n)
    for i in numba.prange(n):
        y[i] = np.sin(a * x[i]) * x[i]
    return np.sum(y**2)


def user_prange_imported(x, a):
    s = 0.0
    for i in prange(x.shape[0]):
        s = s + a * np.cos(x[i])
    return s * s


def recurrence(x, a):  # y[i] reads y[i - 1]: dependent, stays serial
    n = x.shape[0]
    y = np.zeros(n)
    y[0] = x[0]
    for i in range(1, n):
        y[i] = a * y[i - 1] + x[i]
    return np.mean(y**2)


def recurrence_prange(x, a):
    n = x.shape[0]
    y = np.zeros(n)
    for i in numba.prange(1, n):
        y[i] = a * y[i - 1] + x[i]
    return np.mean(y**2)


def carried(x, a):  # s is read in the iteration (not only summed): stays serial
    s = 0.0
    for i in range(x.shape[0]):
        s = s + a * np.cos(s + x[i])
    return s


def shifted(x, a):  # y[i + 1]: not at the loop's own index (s2sad does not prove it disjoint)
    n = x.shape[0]
    y = np.zeros(n + 1)
    for i in range(n):
        y[i + 1] = a * x[i] ** 2
    return np.sum(y**2)


RNG = np.random.default_rng(7)
W, B, XR = RNG.normal(size=(3, 4)), RNG.normal(size=3), RNG.normal(size=(9, 4))
X = RNG.normal(size=11)
X3 = RNG.normal(size=(7, 3))

# function, arguments, wrt, whether the primal loop and its adjoint run on threads
CASES = [
    (per_row, (W, B, XR), (0, 1, 2), True),
    (scalar_sum, (X, 0.7), (0, 1), True),
    (shared_filter, (X, RNG.normal(size=3)), (0, 1), True),
    (array_sum, (X, W), (0, 1), False),
    (private_scratch, (X3, 0.6), (0, 1), False),
    (user_prange, (X, 0.8), (0, 1), True),
    (user_prange_imported, (X, 0.8), (0, 1), True),
    (recurrence, (X, 0.7), (0, 1), False),
    (carried, (X, 0.7), (0, 1), False),
    (shifted, (X, 0.7), (0, 1), False),
]
IDS = [c[0].__name__ for c in CASES]


def _args(args, dtype=np.float64):
    return tuple(np.array(a, dtype=dtype) if isinstance(a, np.ndarray) else a for a in args)


def _on_threads(counts, run):
    """`run()` with each number of Numba threads in `counts`; the results."""
    before = numba.get_num_threads()
    try:
        out = []
        for n in counts:
            numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
            out.append(run())
        return out
    finally:
        numba.set_num_threads(before)


@pytest.mark.parametrize("f, args, wrt, threaded", CASES, ids=IDS)
def test_grad_equals_python_mode_and_finite_differences(f, args, wrt, threaded):
    check_grad(f, args, wrt=wrt)
    expected = s2sad.grad(f, wrt=wrt)(*args)
    g = s2sad.grad(f, wrt=wrt, jit="strict", parallel=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        g(*args)  # (the first call: where no loop runs on threads, one warning says why)
    serial = [w for w in caught if issubclass(w.category, SerialLoopsWarning)]
    assert len(serial) == (not threaded), [str(w.message) for w in caught]
    if f is array_sum:  # the first loop's line and reason
        line = array_sum.__code__.co_firstlineno + 3
        assert f"line {line}: its adjoint reads values of each iteration from a tape" in str(
            serial[0].message
        )
    for got in _on_threads((numba.config.NUMBA_NUM_THREADS, 1), lambda: g(*args)):
        for a, b, x in zip(got, expected, (args[k] for k in wrt)):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)
            assert np.shape(a) == np.shape(x)
    source = s2sad.source(g)
    assert ("no loop runs on threads" in source) == (not threaded)
    primal, adjoint = source.split("# adjoint sweep")
    assert ("prange(" in primal) == threaded, source
    assert ("prange(" in adjoint) == threaded, source
    assert "_tape" not in source or not threaded, source
    if f is per_row:  # W @ x[i] with rows of 3 for W's 4 columns: raised, not lost on threads
        short = np.ascontiguousarray(XR[:, :3])
        for run in (g, s2sad.grad(f, wrt=wrt)):  # NumPy's error, at the user's line
            with pytest.raises(ValueError, match="matmul: Input operand 1 has a mismatch"):
                run(W, B, short)
        for a, b in zip(g(*args), expected):  # (it was taken for a failure to compile, and
            np.testing.assert_allclose(a, b, rtol=1e-12)  # every later call was refused)


@pytest.mark.parametrize("f, args, wrt, threaded", CASES[:3] + CASES[5:6], ids=IDS[:3] + IDS[5:6])
def test_float32_stays_float32(f, args, wrt, threaded):
    args32 = _args(args, np.float32)
    got = s2sad.grad(f, wrt=wrt, jit="strict", parallel=True)(*args32)
    expected = s2sad.grad(f, wrt=wrt)(*args32)
    for a, b, x in zip(got, expected, (args32[k] for k in wrt)):
        assert np.asarray(a).dtype == np.asarray(b).dtype
        assert np.shape(a) == np.shape(x)
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=1e-5)


@pytest.mark.parametrize("f, args, wrt", [c[:3] for c in CASES[:6]], ids=IDS[:6])
def test_vjp_jvp_and_jacobian(f, args, wrt):
    check_vjp(f, args, wrt=wrt)
    check_jvp(f, args, wrt=wrt)
    rng = np.random.default_rng(1)
    tangents = tuple(rng.normal(size=np.shape(args[k])) for k in wrt)
    tangents = tuple(t if np.ndim(args[k]) else float(t) for t, k in zip(tangents, wrt))
    out, dot = s2sad.jvp(f, wrt=wrt, jit="strict", parallel=True)(*args, tangent=tangents)
    out0, dot0 = s2sad.jvp(f, wrt=wrt)(*args, tangent=tangents)
    np.testing.assert_allclose(out, out0, rtol=1e-12)
    np.testing.assert_allclose(dot, dot0, rtol=1e-11, atol=1e-12)
    value, pullback = s2sad.vjp(f, wrt=wrt, jit="strict", parallel=True)(*args)
    for a, b in zip(pullback(0.3), s2sad.vjp(f, wrt=wrt)(*args)[1](0.3)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)
    jac = s2sad.jacobian(f, wrt=wrt, jit="strict", parallel=True)(*args)
    for a, b in zip(jac, s2sad.jacobian(f, wrt=wrt)(*args)):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-12)


def grown(x, W):  # the sum's shape grows by broadcasting in the first iteration
    acc = np.zeros((1, W.shape[1]))
    for i in range(x.shape[0]):
        acc = acc + x[i] * W
    return np.sum(acc**2)


def test_jvp_loops_run_on_threads_but_array_sums_stay_serial():
    t = np.ones_like(X3)
    g = s2sad.jvp(private_scratch, wrt=0, jit="strict", parallel=True)
    np.testing.assert_allclose(
        g(X3, 0.6, tangent=t), s2sad.jvp(private_scratch, wrt=0)(X3, 0.6, tangent=t), rtol=1e-12
    )
    assert "in prange(" in s2sad.source(g)
    for f in (array_sum, grown):
        g = s2sad.jvp(f, wrt=(0, 1), jit="strict", parallel=True)
        out, dot = g(X, W, tangent=(X * 0.5, W * 0.25))
        out0, dot0 = s2sad.jvp(f, wrt=(0, 1))(X, W, tangent=(X * 0.5, W * 0.25))
        np.testing.assert_allclose((out, dot), (out0, dot0), rtol=1e-12)
        assert "prange(" not in s2sad.source(g)
    check_grad(grown, (X, W), wrt=(0, 1))
    got = s2sad.grad(grown, wrt=(0, 1), jit="strict", parallel=True)(X, W)
    for a, b in zip(got, s2sad.grad(grown, wrt=(0, 1))(X, W)):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_without_parallel_nothing_changes():
    g = s2sad.grad(per_row, wrt=(0, 1, 2), jit="strict")
    g(W, B, XR)
    source = s2sad.source(g)
    assert "prange" not in source and "_tape" in source  # the serial code records its rows


def test_a_user_prange_that_is_not_independent_is_refused_at_its_line():
    g = s2sad.grad(recurrence_prange, wrt=(0, 1), jit=True, parallel=True)
    with pytest.raises(UnsupportedSyntaxError) as info:
        g(X, 0.7)
    text = str(info.value)
    assert "for i in numba.prange(1, n):" in text and "test_jit_parallel.py" in text
    assert "y" in text  # names the array read at another index
    # without threads it is a range, in Python and compiled
    check_grad(recurrence_prange, (X, 0.7), wrt=(0, 1))
    for jit in (False, "strict"):
        got = s2sad.grad(recurrence_prange, wrt=(0, 1), jit=jit)(X, 0.7)
        expected = s2sad.grad(recurrence, wrt=(0, 1))(np.concatenate([[0.0], X[1:]]), 0.7)
        np.testing.assert_allclose(got[0][1:], expected[0][1:], rtol=1e-12)
        np.testing.assert_allclose(got[1], expected[1], rtol=1e-12)


@pytest.mark.parametrize("transform", ["grad", "value_and_grad", "vjp", "jvp", "jacobian"])
def test_parallel_needs_jit(transform):
    with pytest.raises(S2SADError, match="parallel=True .* needs jit=True"):
        getattr(s2sad, transform)(per_row, parallel=True)


def test_parallel_and_serial_builds_share_nothing():
    serial = s2sad.grad(scalar_sum, wrt=(0, 1), jit="strict")
    threaded = s2sad.grad(scalar_sum, wrt=(0, 1), jit="strict", parallel=True)
    a, b = serial(X, 0.7), threaded(X, 0.7)
    np.testing.assert_allclose(a[0], b[0], rtol=1e-12)
    assert serial.compiled is not threaded.compiled
    assert "prange" not in s2sad.source(serial) and "prange" in s2sad.source(threaded)
    assert serial.compiled.jitted.namespace is not threaded.compiled.jitted.namespace


def broadcast_and_rows(a, b, x):  # Numba's parallel passes refuse this broadcasting
    c = a * b
    out = np.zeros(x.shape[0])
    for i in range(x.shape[0]):
        out[i] = np.sin(x[i]) * x[i]
    return np.sum(c**2) + np.sum(out)


def test_code_numba_will_not_run_on_threads_runs_compiled_without_them():
    args = (RNG.normal(size=(2, 1, 3)), RNG.normal(size=(4, 1)), X)
    g = s2sad.grad(broadcast_and_rows, wrt=(0, 1, 2), jit=True, parallel=True)
    with pytest.warns(s2sad.jit.JitFallbackWarning, match="on threads: .*without threads"):
        got = g(*args)
    for a, b in zip(got, s2sad.grad(broadcast_and_rows, wrt=(0, 1, 2))(*args)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)
    jitted = g.compiled.jitted
    assert not jitted.threads and jitted.namespace is not None and not jitted.failed
    assert "in prange(" in s2sad.source(g)


def noisy(x, a):  # random draws in the differentiated function: refused before any pass
    n = x.shape[0]
    y = np.zeros(n)
    for i in range(n):
        y[i] = a * x[i] + np.random.normal()
    return np.sum(y**2)


def test_a_loop_drawing_random_numbers_is_refused():
    """(It stayed serial; now s2sad refuses the draw, test_random_draws.py.)"""
    g = s2sad.jvp(noisy, wrt=1, jit=True, parallel=True)
    with pytest.raises(UnsupportedSyntaxError, match=r"np\.random\.normal\(\.\.\.\)` draws"):
        g(X, 0.5, tangent=1.0)


def index_after(x):  # the loop's index is read after it: on threads it would be a thread's own
    n = x.shape[0]
    out = np.zeros(n)
    i = 0  # (a loop of no iteration would leave `i` unbound: refused)
    for i in range(n):
        out[i] = x[i] * 2.0
    return np.sum(out) * i


def from_negative(x):  # range(-n, n) writes each element twice (out[-1] is out[n - 1])
    n = x.shape[0]
    out = np.zeros(n)
    for i in range(-n, n):
        out[i] = np.sin(x[i]) * (i + n + 1.0)
    return np.sum(out * out)


def user_step(x):
    out = np.zeros(x.shape[0])
    for i in prange(0, x.shape[0], 2):
        out[i] = np.sin(x[i])
    return np.sum(out)


@pytest.mark.parametrize("f", [index_after, from_negative])
def test_loops_that_threads_would_get_wrong_stay_serial(f):
    # found by the break-it review: both gave wrong numbers (and races) on threads
    x = np.linspace(0.1, 1.0, 50)
    want = s2sad.value_and_grad(f)(x)
    g = s2sad.value_and_grad(f, jit="strict", parallel=True)
    for got in _on_threads((numba.config.NUMBA_NUM_THREADS, 1), lambda: g(x)):
        np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-12)
    assert "prange(" not in s2sad.source(g)
    t = np.cos(np.arange(50.0))
    np.testing.assert_allclose(
        s2sad.jvp(f, jit="strict", parallel=True)(x, tangent=t)[1],
        s2sad.jvp(f)(x, tangent=t)[1],
        rtol=1e-12,
    )


def test_a_refused_prange_says_why_without_claiming_a_dependence():
    with pytest.raises(UnsupportedSyntaxError) as info:
        s2sad.grad(user_step, jit="strict", parallel=True)(np.linspace(0.0, 1.0, 6))
    text = str(info.value)
    assert "cannot run this prange loop on threads" in text and "range(a, b)" in text
    assert "independently" not in text.split("hint")[0]


def halving(x, W):  # a float32 number carried (`s * 0.5`, a Python float) beside a prange loop
    out = np.zeros((x.shape[0], W.shape[0]), x.dtype)
    for i in range(x.shape[0]):
        out[i] = np.tanh(W @ x[i])
    s = np.sum(out[0])
    for i in range(1, out.shape[0]):
        v = out[i] * s
        s = s * 0.5 + np.sum(v)
    return s


@pytest.mark.parametrize("mode", ["value_and_grad", "jvp"])
def test_threads_keep_a_loops_float32_numbers_as_serial_builds_do(mode):
    """A serial loop of a build on threads keeps its float32 number in float32 (NumPy's dtype,
    pipeline/carried.py) as a build without threads does: it compiles on threads, where it
    refused `v`'s two dtypes, with the independent loop a prange; Python mode's numbers."""
    x32, W32 = (RNG.normal(size=s).astype(np.float32) * 0.5 for s in ((5, 3), (4, 3)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", s2sad.jit.JitFallbackWarning)
        if mode == "jvp":
            t = (np.ones_like(x32), np.ones_like(W32))
            g = s2sad.jvp(halving, wrt=(0, 1), jit="strict", parallel=True)
            got, expected = g(x32, W32, tangent=t), s2sad.jvp(halving, wrt=(0, 1))(
                x32, W32, tangent=t
            )
        else:
            g = s2sad.value_and_grad(halving, wrt=(0, 1), jit="strict", parallel=True)
            got, expected = g(x32, W32), s2sad.value_and_grad(halving, wrt=(0, 1))(x32, W32)
    assert g.compiled.jitted.threads and "in prange(" in s2sad.source(g)
    assert type(got[0]) is type(expected[0]) is np.float32
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-5)
    for a, b in zip(
        got[1] if mode != "jvp" else (got[1],), expected[1] if mode != "jvp" else (expected[1],)
    ):
        assert np.asarray(a).dtype == np.asarray(b).dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_a_build_with_no_loop_on_threads_is_the_serial_build():
    """Where no loop runs on threads, parallel=True compiles the serial build's code (fused,
    its indices checked by s2sad), the note saying why at its end: the unfused code it had
    before was up to 4x slower on one thread (linrec)."""
    serial = s2sad.source(s2sad.grad(recurrence, wrt=(0, 1), jit="strict"))
    threaded = s2sad.source(s2sad.grad(recurrence, wrt=(0, 1), jit="strict", parallel=True))
    assert threaded.startswith(serial.rstrip("\n"))
    assert threaded[len(serial.rstrip("\n")) :].lstrip("\n").startswith("# parallel=True, but")


def gather(x, idx):  # an index s2sad cannot prove in range: checked, so the loop stays serial
    y = np.zeros(idx.shape[0])
    for i in range(idx.shape[0]):
        y[i] = x[idx[i]] ** 2
    return np.sum(y)


def test_an_index_out_of_range_raises_on_threads_too():
    # found measuring threads: Numba's boundscheck checks nothing inside a prange loop, and an
    # IndexError raised there is lost (the loop read past x and returned a wrong gradient)
    g = s2sad.grad(gather, wrt=0, jit="strict", parallel=True)
    want = np.zeros_like(X)
    want[[0, 3]] = 2 * X[0], 4 * X[3]
    with pytest.warns(SerialLoopsWarning, match=r"checks an index \(idx\[i\]\)"):
        np.testing.assert_allclose(g(X, np.array([0, 3, 3])), want, rtol=1e-15)
    for bad in (11, -12):
        with pytest.raises(IndexError, match="out of bounds"):
            g(X, np.array([0, bad]))


@pytest.mark.parametrize(
    "body, why",
    [
        ("t = np.linalg.inv(A[i])", "`np.linalg.inv(A[i])` may raise on the values"),
        ("t = x[:i] * w", "the shape of `x[:i]` changes"),
        ("t = np.zeros(i + 1)", "the shape of `np.zeros(i + 1)` changes"),
        ("k = m + 1\nt = w.reshape(k, 2)", "the shape of `w.reshape(k, 2)` changes"),
        ("t = x[i] ** k", "`x[i] ** k` may raise on the values"),
        ("t = w[mask] * x[i]", "the shape of `w[mask]` changes"),
        ("t = w[w > x[i]]", "the shape of `w[w > x[i]]` changes"),
        ("t = x[i] ** 2 + x[i] ** 0.5", None),
        ("t = W @ x[i] + x[1:m]", None),  # the same shapes each iteration: its first checks
    ],
)
def test_what_may_raise_on_threads_in_a_later_iteration_keeps_a_loop_serial(body, why):
    # Numba loses an error raised on threads; an error of shapes the first iteration raises
    # (it runs alone), but one of values, or of a shape that changes with i, would be lost
    said = value_errors(ast.parse(body).body, "i", lambda n: 1 if n.id == "mask" else None)
    assert said is None if why is None else why in said
