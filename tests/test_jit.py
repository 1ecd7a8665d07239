"""`jit=True` / `jit="strict"`: Numba-compiled gradients give the Python version's numbers."""

import subprocess
import sys
import warnings

import numpy as np
import pytest

import s2sad
from s2sad.jit import JitError, JitFallbackWarning

numba = pytest.importorskip("numba")

# Numba's hints (and, at the tests' -O0, its notes on what it does not cache) are not failures
pytestmark = pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaWarning")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))


def euler(y0, k, n):
    y = y0
    for i in range(n):
        y = y + 0.01 * (-k * y + np.sin(y))
    return y


def recurrence(x, a):
    y = np.zeros_like(x)
    y[0] = x[0]
    for i in range(1, x.shape[0]):
        y[i] = a * y[i - 1] + x[i]
    return np.sum(y * y)


def convolve(x, w):
    total = 0.0
    for i in range(x.shape[0] - w.shape[0] + 1):
        acc = 0.0
        for j in range(w.shape[0]):
            acc = acc + x[i + j] * w[j]
        if acc > 0:
            total = total + acc * acc
        else:
            total = total - 0.5 * acc
    return total


def stops_early(x):
    s = 0.0
    for i in range(x.shape[0]):
        s = s + x[i] ** 2
        if s > 2.0:
            break
    return s


def newton(a):
    x = a
    while abs(x * x - a) > 1e-12 * a:
        x = 0.5 * (x + a / x)
    return x


X = np.array([0.5, -0.9, 1.2, 0.3, 0.8, -0.1])
CASES = [
    (euler, (0.3, 0.8, 2000), (0, 1)),
    (recurrence, (X, 0.9), (0, 1)),
    (convolve, (X, np.array([0.2, -0.4, 0.7])), (0, 1)),
    (stops_early, (X,), 0),
    (newton, (2.0,), 0),
]


@pytest.mark.parametrize("f, args, wrt", CASES, ids=[c[0].__name__ for c in CASES])
def test_jitted_gradient_equals_python_gradient(f, args, wrt):
    numba.njit(f)(*args)  # the primal compiles, so its gradient must too
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitFallbackWarning)
        jitted = s2sad.grad(f, wrt=wrt, jit="strict")(*args)
    plain = s2sad.grad(f, wrt=wrt)(*args)
    for j, p in zip(
        jitted if isinstance(jitted, tuple) else (jitted,),
        plain if isinstance(plain, tuple) else (plain,),
    ):
        np.testing.assert_allclose(j, p, rtol=1e-12, atol=1e-14)
        assert type(j) is type(p) and np.shape(j) == np.shape(p)


def test_jitted_value_and_grad_and_jvp():
    value, g = s2sad.value_and_grad(recurrence, jit="strict")(X, 0.9)
    assert value == pytest.approx(recurrence(X, 0.9))
    out, tangent = s2sad.jvp(recurrence, jit="strict")(X, 0.9, tangent=np.ones_like(X))
    assert tangent == pytest.approx(float(np.sum(g)))


def mlp(w, x):
    return np.sum(np.tanh(x @ w))


def test_matmul_and_reductions_compile():
    w, x = np.linspace(-1, 1, 6).reshape(3, 2), np.linspace(0, 1, 12).reshape(4, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitFallbackWarning)
        jitted = s2sad.grad(mlp, jit="strict")(w, x)
    np.testing.assert_allclose(jitted, s2sad.grad(mlp)(w, x), rtol=1e-12)


def contracted(a, b):
    return np.sum(np.einsum("ij,jk->ik", a, b) ** 2)


def test_strict_names_what_numba_could_not_compile():
    with pytest.raises(
        JitError,
        match=r"Numba cannot compile s2sad\.grad\(contracted, jit='strict'\): ",
    ) as info:
        s2sad.grad(contracted, jit="strict")(np.ones((3, 2)), np.ones((2, 3)))
    assert "einsum" in str(info.value)


def test_jit_true_falls_back_to_python_with_a_warning():
    a, b = np.ones((3, 2)), np.ones((2, 3))
    with pytest.warns(JitFallbackWarning, match="running the Python version"):
        g = s2sad.grad(contracted, jit=True)(a, b)
    np.testing.assert_allclose(g, s2sad.grad(contracted)(a, b))


def test_jitted_grad_still_refuses_non_scalar_outputs():
    def twice(x):
        return x * 2.0

    with pytest.raises(s2sad.NonScalarOutputError):
        s2sad.grad(twice, jit=True)(X)


def test_bad_jit_values_are_refused():
    with pytest.raises(ValueError, match="jit must be"):
        s2sad.grad(euler, jit="yes")


def running(x, a):
    """A vector output from a loop with in-place writes, and a parameter written into."""
    y = np.zeros_like(x)
    y[0] = x[0]
    for i in range(1, x.shape[0]):
        y[i] = a * y[i - 1] + np.sin(x[i])
    x[0] = x[0] * 2.0
    return y * x[0]


def test_jitted_vjp_gives_the_python_pullback():
    x = X.copy()
    out, pullback = s2sad.vjp(running, wrt=(0, 1), jit="strict")(x, 0.9)
    out_py, pullback_py = s2sad.vjp(running, wrt=(0, 1))(X.copy(), 0.9)
    np.testing.assert_allclose(out, out_py, rtol=1e-14)
    np.testing.assert_array_equal(x, X)  # the arguments are left as given
    for seed in (np.ones_like(X), np.linspace(-1.0, 2.0, X.size)):
        jitted, plain = pullback(seed), pullback_py(seed)  # a pullback runs any number of times
        np.testing.assert_allclose(jitted[0], plain[0], rtol=1e-12)
        assert jitted[1] == pytest.approx(plain[1], rel=1e-12) and type(jitted[1]) is float
    np.testing.assert_array_equal(x, X)


def test_vjp_and_jvp_leave_an_argument_they_write_into_as_given():
    x = X.copy()
    out, pullback = s2sad.vjp(running, wrt=0)(x, 0.9)
    np.testing.assert_array_equal(x, X)
    out_dot = s2sad.jvp(running, wrt=0)(x, 0.9, tangent=np.ones_like(X))[1]
    np.testing.assert_array_equal(x, X)
    # <seed, J t> two ways: the pullback of a seed, and the tangent along t
    seed = np.linspace(-1.0, 2.0, X.size)
    assert pullback(seed) @ np.ones_like(X) == pytest.approx(seed @ out_dot, rel=1e-12)


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_jitted_jacobian(mode):
    jitted = s2sad.jacobian(running, wrt=(0, 1), mode=mode, jit="strict")(X.copy(), 0.9)
    plain = s2sad.jacobian(running, wrt=(0, 1), mode=mode)(X.copy(), 0.9)
    for j, p in zip(jitted, plain):
        assert j.shape == p.shape
        np.testing.assert_allclose(j, p, rtol=1e-12, atol=1e-14)


def until_over(x, p):
    k = p[0]
    s = 0.0
    i = 0
    while True:
        s = s + k * x[i] ** 2
        k = k * 0.9
        i += 1
        if s > 2.0 or i >= x.shape[0]:
            break
    return s


def test_while_true_with_a_break_gives_python_modes_numbers():
    """Numba 0.68 miscompiles this loop's `while True:` as normalized (the values assigned
    before the break): compiled, the loop tests `forever()`, which it does not fold."""
    x, p = np.array([0.79, 0.8, 1.07, 0.6, 0.9, 0.95]), np.array([1.0])
    jitted = s2sad.value_and_grad(until_over, wrt=(0, 1), jit="strict")
    assert "while forever():" in s2sad.source(jitted, x, p)
    value, (dx, dp) = jitted(x, p)
    e_value, (e_dx, e_dp) = s2sad.value_and_grad(until_over, wrt=(0, 1))(x, p)
    assert value == pytest.approx(until_over(x, p), rel=1e-14)
    assert value == pytest.approx(e_value, rel=1e-14)
    np.testing.assert_allclose(dx, e_dx, rtol=1e-13)
    np.testing.assert_allclose(dp, e_dp, rtol=1e-13)
    assert dx[3:].tolist() == [0.0, 0.0, 0.0]  # the elements after the break


def nudged(x0, n):
    x = x0.copy()
    e = 0.0
    for i in range(n):
        x += 0.05 * np.sin(x)
        e = np.sum(x * x)
        if e > 2.0:
            break
        if e < 1.0:
            continue
        x *= 1.01
    return e + np.sum(x)


def test_an_in_place_loop_left_by_break_and_continue_compiles():
    """The adjoint loop assigns `dx_new` in both branches of the `if` that stands for the
    break before reading it: not a value the loop carries, so no `dx_new_entry = dx_new` reads
    it unbound at the loop's top (Numba refused it, the fallback raised UnboundLocalError)."""
    x, n = np.array([0.5, -0.9, 1.2, 0.3, 0.8, -0.1]) * 0.5, 30
    jitted = s2sad.grad(nudged, jit="strict")
    entries = [ln.strip() for ln in s2sad.source(jitted, x, n).splitlines() if "_entry =" in ln]
    assert entries == ["de_entry = de", "dx_entry = dx"]
    g = jitted(x, n)
    np.testing.assert_allclose(g, s2sad.grad(nudged)(x, n), rtol=1e-13)
    h = 1e-6 * np.eye(x.size)
    fd = [(nudged(x + d, n) - nudged(x - d, n)) / 2e-6 for d in h]
    np.testing.assert_allclose(g, fd, rtol=1e-6)


def residuals(cam, x, w):
    p0 = x[0] - cam[0]
    p1 = x[1] * cam[1]
    return np.array([w * p0 * p1, np.sin(p0) + w * w, p1 / cam[2]])


def product_sum(a, b):
    return np.sum(np.einsum("ij,jk->ik", a, b))


def test_jitted_jacobian_row_per_output_element():
    """Reverse mode picked by size (3 outputs, 7 inputs): one compiled pullback per output
    element, rows written into the blocks; the numbers of NumPy mode and finite differences,
    and the dtypes and ownership of the inputs'."""
    cam, x, w = np.array([0.3, 1.2, 2.0]), np.array([0.7, -0.4, 5.0]), 0.6
    J = s2sad.jacobian(residuals, wrt=(0, 1, 2), jit="strict")
    for _ in range(2):  # the second call runs the compiled pullback directly after row 0
        jitted = J(cam, x, w)
        plain = s2sad.jacobian(residuals, wrt=(0, 1, 2))(cam, x, w)
        for j, p, a in zip(jitted, plain, (cam, x, w)):
            assert j.shape == (3,) + np.shape(a) and j.dtype == np.float64
            np.testing.assert_allclose(j, p, rtol=1e-12, atol=1e-14)
    eps = 1e-6
    for k in range(3):  # column k of d/dx by central differences
        step = np.zeros(3)
        step[k] = eps
        fd = (residuals(cam, x + step, w) - residuals(cam, x - step, w)) / (2 * eps)
        np.testing.assert_allclose(jitted[1][:, k], fd, rtol=1e-6, atol=1e-8)
    again = J(cam, x, w)
    assert not np.shares_memory(again[0], jitted[0])
    single = J(cam.astype(np.float32), x, w)  # float32 blocks for a float32 input
    assert single[0].dtype == np.float32
    np.testing.assert_allclose(single[0], plain[0], rtol=1e-5)


def decay(p, t):
    return p[0] * np.exp(-p[1] * t) + p[2] * np.sin(p[3] * t) - p[4]


@pytest.mark.parametrize("mode", [None, "forward"])
def test_jitted_jacobian_column_per_input_element(mode):
    """Forward mode (picked by size: 12 outputs, 5 inputs): one compiled jvp per input
    element, columns written into the blocks; NumPy mode's numbers, finite differences."""
    p, t = np.array([1.0, 0.5, 0.3, 2.0, 0.1]), np.linspace(0.0, 1.0, 12)
    J = s2sad.jacobian(decay, mode=mode, jit="strict")
    first, second = J(p, t), J(p, t)
    assert first.shape == (12, 5) and not np.shares_memory(first, second)
    np.testing.assert_allclose(first, s2sad.jacobian(decay)(p, t), rtol=1e-13)
    np.testing.assert_array_equal(first, second)
    fd = np.array([(decay(p + e, t) - decay(p - e, t)) / 2e-6 for e in np.eye(5) * 1e-6]).T
    np.testing.assert_allclose(first, fd, rtol=1e-6, atol=1e-8)
    assert J(p.astype(np.float32), t).dtype == np.float32


def test_jitted_jacobian_falls_back_with_the_same_numbers():
    a, b = np.arange(6.0).reshape(3, 2) / 7, np.ones((2, 3))
    with pytest.warns(JitFallbackWarning):
        jitted = s2sad.jacobian(product_sum, wrt=0, mode="reverse", jit=True)(a, b)
    np.testing.assert_allclose(jitted, s2sad.jacobian(product_sum, wrt=0)(a, b), rtol=1e-12)


def test_jitted_vjp_falls_back_with_a_warning():
    a, b = np.ones((3, 2)), np.ones((2, 3))

    def product(a, b):
        return np.einsum("ij,jk->ik", a, b)

    with pytest.warns(JitFallbackWarning, match=r"s2sad\.vjp\(.*product, jit=True\)"):
        out, pullback = s2sad.vjp(product, jit=True)(a, b)
        g = pullback(np.ones((3, 3)))
    np.testing.assert_allclose(g, s2sad.vjp(product)(a, b)[1](np.ones((3, 3))))


def test_compiled_code_is_cached_on_disk(tmp_path):
    code = (
        "import sys; sys.path.insert(0, {root!r}); sys.path.insert(0, {here!r})\n"
        "import s2sad, test_jit\n"
        "print(s2sad.grad(test_jit.euler, jit='strict')(0.3, 0.8, 100))\n"
    ).format(
        root=str(__import__("pathlib").Path(__file__).parent.parent),
        here=str(__import__("pathlib").Path(__file__).parent),
    )
    env = {**__import__("os").environ, "S2SAD_CACHE_DIR": str(tmp_path / "disk"), "NUMBA_OPT": "3"}
    first = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert first.returncode == 0, first.stderr
    index_files = list((tmp_path / "disk").rglob("*.nbi"))
    assert index_files, "Numba wrote no cache index"
    second = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert second.stdout == first.stdout


def with_default(w, x, b=0.5):
    return np.sum(np.tanh(x @ w + b) ** 2)


@pytest.mark.parametrize("jit", [False, "strict"])
def test_jvp_of_a_function_with_a_default_argument(jit):
    w, x, t = np.linspace(-1, 1, 3), np.linspace(0, 1, 6).reshape(2, 3), np.ones(3)
    _, tangent = s2sad.jvp(with_default, jit=jit)(w, x, tangent=t)
    assert tangent == pytest.approx(s2sad.grad(with_default)(w, x) @ t, rel=1e-12)


def test_jitted_jvp_and_pullback_take_0d_arrays_for_scalars():
    out, tangent = s2sad.jvp(euler, jit="strict")(0.3, 0.8, 200, tangent=np.array(2.0))
    assert tangent == pytest.approx(2.0 * s2sad.grad(euler)(0.3, 0.8, 200), rel=1e-12)
    _, pullback = s2sad.vjp(euler, jit="strict")(0.3, 0.8, 200)
    assert pullback(np.array(2.0)) == pytest.approx(tangent, rel=1e-12)


def reads_after_the_loop_writes(x):
    u = np.zeros(x.shape[0])
    u[:] = x
    s = 0.0
    for i in range(x.shape[0]):
        c = u[i]  # the adjoint may not read u again: u[0] is overwritten after the loop
        s = s + c * c
    u[0] = 100.0
    return s + u[0]


def test_values_are_recomputed_only_from_arrays_nothing_writes():
    x = np.array([1.0, 2.0, 3.0])
    jitted = s2sad.grad(reads_after_the_loop_writes, jit="strict")(x)
    np.testing.assert_allclose(jitted, 2 * x)


def float32_layer(w, x):
    return np.sum(np.tanh(x @ w) ** 2)


def test_float32_arrays_meet_float64_cotangents_in_matmul():
    w = np.linspace(-1, 1, 3).astype(np.float32)
    x = np.linspace(0, 1, 6).reshape(2, 3).astype(np.float32)
    jitted = s2sad.grad(float32_layer, jit="strict")(w, x)
    assert jitted.dtype == np.float32
    np.testing.assert_allclose(jitted, s2sad.grad(float32_layer)(w, x), rtol=1e-5)


def last_of_ellipsis(x):
    return x[..., -1] * 3.0


def test_pullback_of_an_element_read_through_an_ellipsis():
    x = np.array([0.5, -1.0, 2.0])
    _, pullback = s2sad.vjp(last_of_ellipsis, jit="strict")(x)
    np.testing.assert_array_equal(pullback(1.0), [0.0, 0.0, 3.0])


def chain_energy(u, k):
    e = 0.0
    for i in range(u.shape[0] - 1):
        c = u[i]
        d = u[i + 1] - c
        e = e + k * d * d + c**4
    return e


def test_jitted_loops_recompute_what_they_read_from_arrays_nothing_writes():
    u = np.linspace(-1.0, 1.0, 7)
    g = s2sad.grad(chain_energy, wrt=(0, 1), jit="strict")
    assert "_tape = []" not in s2sad.source(g, u, 0.3)  # c and d are computed again
    assert "_tape = []" in s2sad.source(s2sad.grad(chain_energy, wrt=(0, 1)), u, 0.3)
    for j, p in zip(g(u, 0.3), s2sad.grad(chain_energy, wrt=(0, 1))(u, 0.3)):
        np.testing.assert_allclose(j, p, rtol=1e-12)


def scalar_where(x, a):
    t = a
    s = 1.0
    while t < 2.0:
        t = t + (np.where(s < -0.47, x[3], -0.44) ** 2 + 1.5)
        s = np.tanh(s) - 1.0
    return t + t / (x[2] ** 2 + 0.5)


def test_np_where_of_numbers_in_a_loop():
    # Numba's np.where of numbers is a 0-d array, which `dx[3] += ...` does not take
    x, numba_f = np.array([0.1, 0.2, 0.3, 0.4]), numba.njit(scalar_where)
    assert numba_f(x, 0.1) == pytest.approx(scalar_where(x, 0.1))
    jitted = s2sad.grad(scalar_where, wrt=(0, 1), jit="strict")(x, 0.1)
    for j, p in zip(jitted, s2sad.grad(scalar_where, wrt=(0, 1))(x, 0.1)):
        np.testing.assert_allclose(j, p, rtol=1e-12)


def test_numba_linear_algebra_without_scipy_is_a_compile_failure(monkeypatch):
    """Numba compiles np.dot and np.linalg with SciPy; without it the ImportError it raises while
    compiling is reported like any compile failure (JitError, or the warned fallback)."""
    from s2sad import numba_failures

    missing = ImportError("scipy 0.16+ is required for linear algebra")
    assert numba_failures.is_numba_error(missing) and not numba_failures.is_numba_error(
        ImportError("other")
    )
    assert "pip install scipy" in numba_failures.numba_reason(missing)


def rotation_loss(x):
    c = np.cos(x[0])
    s = np.sin(x[0])
    R = np.array([[c, -s], [s, c]])  # np.stack level by level in s2sad, lowered back for Numba
    v = np.array([x[1], x[2]])
    return np.sum((R @ v) ** 2) + np.sum(np.array([x[0] * x[1], 1.0, x[2]]))


def test_np_array_of_numbers_compiles_where_the_primal_does():
    x = np.array([0.3, -0.7, 1.1])
    assert numba.njit(rotation_loss)(x) == pytest.approx(rotation_loss(x))
    np.testing.assert_allclose(
        s2sad.grad(rotation_loss, jit="strict")(x), s2sad.grad(rotation_loss)(x), rtol=1e-12
    )


def test_np_add_at_compiles_though_numba_lacks_it():
    """np.add.at becomes scatter_added, which has a Numba version: s2sad compiles the gradient
    of a function Numba itself does not."""
    from test_rules_shape_indexing import assemble

    x, idx = np.array([0.2, -0.7, 1.1]), np.array([[0, 1], [1, 2], [2, 3]])
    np.testing.assert_allclose(
        s2sad.grad(assemble, jit="strict")(x, idx), s2sad.grad(assemble)(x, idx), rtol=1e-12
    )


def constant_branch(x):
    if -1.65 * 0.74 < 0.6:  # always taken: Numba drops the other branch and its tape pushes
        return np.sum(x**2)
    s = np.zeros(3)
    for i in range(x.shape[0]):
        s = s * np.tanh(x)
    return np.sum(s)


def test_a_branch_on_a_constant_condition():
    x = np.array([0.5, -1.0, 2.0])
    assert numba.njit(constant_branch)(x) == pytest.approx(constant_branch(x))
    np.testing.assert_allclose(s2sad.grad(constant_branch, jit="strict")(x), 2 * x)


def dead_branch_numba_cannot_type(x):
    if -1.8 < -0.2:
        y = np.exp(x)
    else:
        y = x.reshape((2, 2)).max(axis=1)  # no max over an axis in Numba: never typed
    return np.sum(y)


def test_a_dead_branch_numba_drops_is_dropped_from_the_gradient_too():
    x = np.array([0.5, -1.0, 2.0, 0.1])
    assert numba.njit(dead_branch_numba_cannot_type)(x) == pytest.approx(np.sum(np.exp(x)))
    np.testing.assert_allclose(
        s2sad.grad(dead_branch_numba_cannot_type, jit="strict")(x), np.exp(x), rtol=1e-12
    )


def written_then_carried(w):
    y = np.ones_like(w)
    for i in range(1, y.shape[0]):
        y[i] = 0.6 * y[i - 1] + np.tanh(w[i - 1])  # saves the element it overwrites
    t = 0.0
    while t < 2.0:
        t = t + 0.7
        y = np.tanh(y) * y  # records the whole array: a separate tape in compiled code
    return t + np.sum(y)


def test_element_saves_and_array_records_of_one_name():
    w = np.array([0.3, -0.2, 0.9])
    assert numba.njit(written_then_carried)(w) == pytest.approx(written_then_carried(w))
    np.testing.assert_allclose(
        s2sad.grad(written_then_carried, jit="strict")(w),
        s2sad.grad(written_then_carried)(w),
        rtol=1e-12,
    )


def scaled_then_written(x, s):
    y = x * s
    y[0] = 5.0
    return np.sum(y**2)


def test_jitted_tangent_of_an_array_written_in_place_compiles():
    """The tangent of an array written in place owns its buffer (`np.array(x_dot * s)`), which
    Numba lacks: jvp(jit=True) fell back though Numba compiles the function."""
    x, t = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0, 2.0])
    expected = s2sad.jvp(scaled_then_written)(x, 2.0, tangent=t)
    got = s2sad.jvp(scaled_then_written, jit="strict")(x, 2.0, tangent=t)
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def float32_energy(x, s):
    return np.sum(np.sin(x) ** 2) * s


def test_float32_numbers_come_back_as_float32_as_in_python_mode():
    """Numba returns a float32 number as a Python float; s2sad gives back NumPy's np.float32,
    as Python mode does (values, tangents, scalar gradients)."""
    x = np.linspace(0.1, 1.0, 4).astype(np.float32)
    s = np.float32(1.5)
    for jit in (False, "strict"):
        value, (gx, gs) = s2sad.value_and_grad(float32_energy, wrt=(0, 1), jit=jit)(x, s)
        assert type(value) is np.float32 and gx.dtype == np.float32 and type(gs) is np.float32
        value, tangent = s2sad.jvp(float32_energy, jit=jit)(x, s, tangent=np.ones(4, np.float32))
        assert type(value) is np.float32 and type(tangent) is np.float32


def halving(y, n):
    for _ in range(n):
        y = y * 0.5 + np.sin(y)
    return np.sum(y)


def test_a_failed_compile_for_one_dtype_leaves_the_others_compiled(tmp_path, monkeypatch):
    # found by the new-user trial: after float32 failed (Numba cannot unify the loop's float32
    # and float64), float64 calls that had compiled raised the float32 error too (float32 now
    # compiles, fused: float16, which Numba lacks, fails instead)
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))
    x = np.linspace(0.1, 1.0, 5)
    g = s2sad.grad(halving, jit="strict")
    want = s2sad.grad(halving)(x, 20)
    np.testing.assert_allclose(g(x, 20), want, rtol=1e-12)
    with pytest.raises(s2sad.jit.JitError, match="float16"):
        g(x.astype(np.float16), 20)
    np.testing.assert_allclose(g(x, 20), want, rtol=1e-12)
    g32 = g(x.astype(np.float32), 20)
    assert g32.dtype == np.float32
    np.testing.assert_allclose(g32, s2sad.grad(halving)(x.astype(np.float32), 20), rtol=1e-4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # compiled: no fallback warning
        np.testing.assert_allclose(s2sad.grad(halving, jit=True)(x, 20), want, rtol=1e-12)


def two_residuals(p, x):
    a = np.sin(p[0]) * x[0]
    b = p[1] * x[1] ** 2
    return np.array([a - b, a * b])


def exp_of_sum(x):
    return np.exp(np.sum(x))


def test_the_jitted_pullbacks_sweep_computes_only_what_its_adjoint_reads():
    """The value function gives the value; the sweep the pullback re-runs drops the output's
    statements where its adjoint does not read them (not where it does: exp's cotangent)."""
    p, x = np.array([0.3, 0.5]), np.array([1.0, 2.0])
    v = s2sad.vjp(two_residuals, wrt=(0, 1), jit="strict")
    value, pullback = v(p, x)
    np.testing.assert_allclose(value, two_residuals(p, x))
    expected = s2sad.vjp(two_residuals, wrt=(0, 1))(p, x)[1](np.array([1.0, -2.0]))
    for got, want in zip(pullback(np.array([1.0, -2.0])), expected):
        np.testing.assert_allclose(got, want, rtol=1e-14)
    sweep = s2sad.source(v, p, x).split("def vjp_two_residuals_sweep")[1].splitlines()
    code = "\n".join(line for line in sweep if not line.strip().startswith("#"))
    assert "np.array(" not in code and "a - b" not in code and "b = b_item * b_pow" in code
    e = s2sad.vjp(exp_of_sum, jit="strict")
    value, pullback = e(x)
    np.testing.assert_allclose(pullback(1.0), np.exp(3.0) * np.ones(2), rtol=1e-14)
    assert "np.exp(" in s2sad.source(e, x).split("def vjp_exp_of_sum_sweep")[1]


def reshaped_rows(p, obs):
    R = p[0:9].reshape(3, 3)
    return R @ obs


def test_strict_errors_give_numbas_reason_not_its_framing():
    """Numba's first line ("Failed in nopython mode pipeline ...") says nothing; the reason is
    further down (a strided slice reshaped: Numba reshapes contiguous arrays only)."""
    strided = np.asfortranarray(np.arange(120.0).reshape(10, 12))[5]
    with pytest.raises(JitError) as info:
        s2sad.jacobian(reshaped_rows, jit="strict")(strided, np.ones(3))
    assert "contiguous" in str(info.value) and "Failed in" not in str(info.value)


USERS_MODULE = """
import numpy as np

def sqdist(X):
    sq = np.sum(X * X, axis=1)
    return sq[:, None] + sq[None, :] - 2.0 * X @ X.T
"""

CALLS_IT = """
import numpy as np

def kernel_sum(theta, X):
    D = gpm.sqdist(X)
    return np.sum(np.exp(-theta[0] * D))
"""


def test_a_helper_of_another_module_on_a_value_not_differentiated_compiles(tmp_path):
    """`gpm.sqdist(X)` of the user's module `gpm`, X not differentiated: called by its name, as
    a helper of a bare name is (the code called `gpm.sqdist`, and Numba stopped at "Unknown
    attribute 'sqdist' of type Module(gpm)"), in grad, vjp and jvp; Python mode's numbers."""
    from conftest import load_module

    gpm = load_module(tmp_path, "gpm", USERS_MODULE)
    module = load_module(tmp_path, "calls_gpm", CALLS_IT)
    module.gpm = gpm
    f = module.kernel_sum
    theta = np.array([0.3])
    X = np.random.default_rng(0).normal(size=(4, 2))
    D = gpm.sqdist(X)
    want = -np.sum(D * np.exp(-0.3 * D))
    for transform in (s2sad.grad, s2sad.vjp, s2sad.jvp):
        assert "= sqdist(X)" in s2sad.source(transform(f))
    value, tangent = s2sad.jvp(f)(theta, X, tangent=np.ones(1))
    np.testing.assert_allclose([value, tangent], [f(theta, X), want], rtol=1e-12)
    np.testing.assert_allclose(s2sad.grad(f, jit="strict")(theta, X), [want], rtol=1e-12)
