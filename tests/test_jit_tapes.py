"""What jitted loop gradients record: an element a loop reads is read again in the adjoint where
no later write can change it (no tape), and an adjoint added into one element is `dx[i] += g`.
Each case is checked against finite differences in both modes, and the tricky ones (an element
written twice, read then overwritten, indices that wrap around, data-dependent indices, a loop run
twice, a write after the loop, a view) keep their tapes."""

import numpy as np
import pytest

import s2sad
from conftest import _fd, check_grad

numba = pytest.importorskip("numba")

pytestmark = pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaWarning")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))


def recurrence(x, a):
    n = x.shape[0]
    y = np.zeros(n)
    y[0] = x[0]
    for i in range(1, n):
        y[i] = a * y[i - 1] + x[i]
    return np.mean(y**2)


def written_twice(x, a):  # y[i + 1] is written in iteration i and again in iteration i + 1
    n = x.shape[0]
    y = np.zeros(n)
    for i in range(1, n - 1):
        y[i] = a * y[i - 1] + x[i]
        y[i + 1] = y[i] * a
    return np.sum(y**3)


def read_ahead(x, a):  # y[i + 1] is read, then overwritten in the same iteration
    n = x.shape[0]
    y = np.zeros(n)
    for i in range(n - 1):
        y[i] = a * y[i + 1] + x[i]
        y[i + 1] = np.sin(y[i]) + x[i + 1]
    return np.sum(y**2)


def read_then_overwritten(x, a):  # y[i] read, then written, in one iteration
    n = x.shape[0]
    y = x * 1.0
    s = 0.0
    for i in range(n):
        s = s + a * y[i] * y[i]
        y[i] = np.cos(s)
    return s + np.sum(y)


def wraps_around(x, a):  # at i = 0, y[i - 1] is y[-1], which the last iteration writes
    n = x.shape[0]
    y = np.zeros(n)
    for i in range(n):
        y[i] = a * y[i - 1] + x[i]
    return np.sum(y**2)


def data_dependent(x, a, where):  # the written element depends on the data
    n = x.shape[0]
    y = np.zeros(n)
    for i in range(1, n):
        y[where[i]] = a * y[i - 1] + x[i]
    return np.sum(y**2)


def run_twice(x, a):  # an enclosing loop writes every element again
    n = x.shape[0]
    y = np.zeros(n)
    for t in range(2):
        for i in range(1, n):
            y[i] = a * y[i - 1] + x[i]
    return np.sum(y**2)


def written_after(x, a):  # y[2] is overwritten after the loop
    n = x.shape[0]
    y = np.zeros(n)
    for i in range(1, n):
        y[i] = a * y[i - 1] + x[i]
    y[2] = y[3] * a
    return np.sum(y**2)


def rows(x, a):  # a recurrence over rows, read in an inner loop
    n, m = x.shape
    y = np.zeros((n, m))
    for i in range(1, n):
        for j in range(m):
            y[i, j] = a * y[i - 1, j] * x[i, j] + x[i, j]
    return np.sum(y**2)


def into_argument(x, a):  # writes into (the code's own copy of) an argument
    n = x.shape[0]
    for i in range(1, n):
        x[i] = a * x[i - 1] + x[i]
    return np.sum(x**2)


def two_steps(x, a):
    n = x.shape[0]
    y = np.zeros(n)
    y[0] = x[0]
    y[1] = x[1]
    for i in range(2, n - 1, 2):
        y[i] = a * y[i - 1] * y[i - 2] + x[i]
        y[i + 1] = a * y[i] + x[i]
    return np.sum(y**2)


def through_a_row(x, a):  # y[i] is a row of a 2-D array, written whole
    n, m = x.shape
    y = np.zeros((n, m))
    y[0] = x[0]
    for i in range(1, n):
        y[i] = a * np.sin(y[i - 1]) + x[i]
    return np.sum(y**2)


def elements(x):  # reads of single elements outside loops
    return x[0] * x[1] + x[2] ** 2


X = np.array([0.3, -0.2, 0.5, 0.1, -0.4, 0.25, 0.6, -0.1])
M = np.linspace(-0.5, 0.6, 12).reshape(4, 3)
WHERE = np.array([0, 3, 1, 1, 5, 2, 7, 4])

CASES = [
    # function, arguments, the element read, whether the adjoint reads it again (no tape)
    (recurrence, (X, 0.7), "y[i - 1]", True),
    (written_twice, (X, 0.7), "y[i - 1]", True),
    # (y[i], written earlier in its own iteration: no later write reaches it)
    (written_twice, (X, 0.7), "y[i]", True),
    (read_ahead, (X, 0.7), "y[i + 1]", False),
    (read_then_overwritten, (X, 0.7), "y[i]", False),
    (wraps_around, (X, 0.7), "y[i - 1]", False),
    (data_dependent, (X, 0.7, WHERE), "y[i - 1]", False),
    (run_twice, (X, 0.7), "y[i - 1]", False),
    (written_after, (X, 0.7), "y[i - 1]", False),
    (rows, (M, 0.7), "y[i - 1, j]", True),
    (into_argument, (X, 0.7), "x[i - 1]", True),
    (two_steps, (X, 0.7), "y[i - 2]", True),
    (two_steps, (X, 0.7), "y[i]", True),
    (through_a_row, (M, 0.7), "y[i - 1]", True),
]


@pytest.mark.parametrize(
    "f, args, read, again", CASES, ids=[f"{c[0].__name__}-{c[2]}" for c in CASES]
)
def test_jitted_loop_reads_and_finite_differences(f, args, read, again):
    check_grad(f, args, wrt=(0, 1))  # NumPy mode
    g = s2sad.grad(f, wrt=(0, 1), jit="strict")
    jitted = g(*[np.copy(a) if isinstance(a, np.ndarray) else a for a in args])
    for k, got in enumerate(jitted):

        def scalar(*a):
            return float(f(*a))

        expected = _fd(scalar, list(args), k, 1e-6)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7)
    source = s2sad.source(g)
    adjoint = source.split("# adjoint sweep")[1]
    assert (f" = {read}\n" in adjoint) == again, source
    assert (f"_tape.append({read})" not in source) or not again, source


def test_recurrence_reads_the_previous_element_again_in_the_adjoint():
    g = s2sad.grad(recurrence, wrt=(0, 1), jit="strict")
    g(X, 0.7)
    adjoint = s2sad.source(g).split("# adjoint sweep")[1]
    assert "y_item2 = y[i - 1]" in adjoint
    assert "add_at" not in adjoint  # dx[i] += ... and dx[0] += ...
    assert "dx[0] += " in adjoint


def test_an_element_read_outside_loops_is_added_into_its_element():
    g = s2sad.grad(elements, jit="strict")
    np.testing.assert_allclose(g(X), s2sad.grad(elements)(X), rtol=1e-14)
    source = s2sad.source(g)
    assert "add_at" not in source
    assert "dx[2] += " in source
    # an index array still goes through add_at, where repeated indices add up
    g = s2sad.grad(lambda_gather, jit="strict")
    np.testing.assert_allclose(g(X), s2sad.grad(lambda_gather)(X), rtol=1e-14)
    assert "getitem_vjp(" in s2sad.source(g)


def lambda_gather(x):
    idx = np.array([1, 1, 2])
    return np.sum(x[idx] ** 2)


def test_jitted_vjp_of_a_recurrence_can_be_called_twice():
    _, pullback = s2sad.vjp(recurrence, wrt=(0, 1), jit="strict")(X, 0.7)
    first = pullback(1.0)
    second = pullback(2.0)
    expected = s2sad.grad(recurrence, wrt=(0, 1))(X, 0.7)
    for a, b, e in zip(first, second, expected):
        np.testing.assert_allclose(a, e, rtol=1e-12)
        np.testing.assert_allclose(b, 2 * np.asarray(e), rtol=1e-12)


def powers_fit(x, n):  # gradbench's llsq: a loop value read back for its shape alone
    t = np.linspace(-1.0, 1.0, n)
    r = np.sign(t)
    for j in range(x.shape[0]):
        r = r - x[j] * t**j
    return 0.5 * np.sum(r**2)


def test_a_loop_value_read_for_its_shape_alone_is_taped_as_a_shape_not_computed_again():
    """The adjoint of `r - p` reads `p` (`x[j] * t**j`) for its shape alone: it is taped as its
    shape, not computed again in the reversed loop (a sweep of powers a step, 1.4x llsq's
    jitted gradient); the adjoint's own `t**j` for x[j]'s cotangent stays."""
    source = s2sad.source(s2sad.grad(powers_fit, jit="strict"), np.ones(3), 5)
    adjoint = source.split("# adjoint sweep: from")[1]
    assert "shape_push(r_mul_tape, r_mul)" in source
    assert (
        "r_mul = r_item * t**j" not in adjoint and "r_mul = shape_pop(r_mul_tape, r_mul)" in adjoint
    )
