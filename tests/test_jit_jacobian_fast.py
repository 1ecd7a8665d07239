"""A jitted Jacobian called again and again with arguments of one kind runs one compiled
function for the whole Jacobian behind a lean guard (s2sad/compiled_jacobian.py): the numbers
of Python mode, of the per-row compiled path and of finite differences; blocks the caller owns;
any other kind of argument, data or code goes back to the compiled path."""

import numpy as np
import pytest

import s2sad
from s2sad import compiled_jacobian
from s2sad.errors import NonDifferentiableInputError

numba = pytest.importorskip("numba")

pytestmark = pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaWarning")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))
    # the whole Jacobian from the second call of a kind on (it waits for more calls normally)
    monkeypatch.setattr(compiled_jacobian, "CALLS_BEFORE_COMPILING", 1)


def observation(cam, X, w, feat):
    """A bundle-adjustment-like residual on scalars, with a branch (as the benchmark's)."""
    p0 = X[0] - cam[3]
    p1 = X[1] - cam[4]
    p2 = X[2] - cam[5]
    theta2 = cam[0] * cam[0] + cam[1] * cam[1] + cam[2] * cam[2]
    if theta2 != 0.0:
        theta = np.sqrt(theta2)
        c = np.cos(theta)
        s = np.sin(theta)
        x0 = p0 * c + (cam[1] * p2 - cam[2] * p1) * s / theta
        x1 = p1 * c + (cam[2] * p0 - cam[0] * p2) * s / theta
    else:
        x0 = p0 + cam[1] * p2 - cam[2] * p1
        x1 = p1 + cam[2] * p0 - cam[0] * p2
    x2 = p2 + 4.0
    return np.array([w * (x0 / x2 - feat[0]), w * (x1 / x2 - feat[1]), 1.0 - w * w])


def observations(n, seed=0):
    rng = np.random.default_rng(seed)
    return [
        (
            np.array([0.1, -0.3, 0.2, 0.5, -0.4, -1.0]) + 0.05 * rng.normal(size=6),
            np.array([0.4, -0.7, 2.5]) + 0.1 * rng.normal(size=3),
            float(0.8 + 0.05 * rng.normal()),
            rng.normal(size=2),
        )
        for _ in range(n)
    ]


def served(J, args) -> bool:
    """Whether the whole compiled Jacobian answers this call (not the compiled path)."""
    fast = J._whole.last
    return fast is not None and fast.call(tuple(args)) is not None


def assert_same(got, expected, rtol=1e-12):
    got = got if isinstance(got, tuple) else (got,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert isinstance(g, np.ndarray) and g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=rtol, atol=1e-14)


def central_differences(f, args, k, eps=1e-6):
    """d f / d args[k] as an out.shape + arg.shape array."""
    x = np.asarray(args[k], dtype=float)
    columns = []
    for e in np.eye(x.size):
        step = e.reshape(x.shape) * eps
        up, down = list(args), list(args)
        up[k], down[k] = x + step, x - step
        if np.ndim(args[k]) == 0:
            up[k], down[k] = float(up[k]), float(down[k])
        columns.append((f(*up) - f(*down)) / (2 * eps))
    return np.moveaxis(np.array(columns), 0, -1).reshape(np.shape(f(*args)) + x.shape)


@pytest.mark.parametrize("mode", [None, "forward"])
def test_per_observation_loop(mode):
    """Reverse mode by size (3 outputs, 10 inputs), or forward mode as asked: Python mode's
    numbers, the per-row compiled path's exactly, finite differences."""
    J = s2sad.jacobian(observation, wrt=(0, 1, 2), mode=mode, jit="strict")
    rowwise = s2sad.jacobian(observation, wrt=(0, 1, 2), mode=mode, jit="strict")
    rowwise._whole.on = False  # the compiled path alone
    plain = s2sad.jacobian(observation, wrt=(0, 1, 2), mode=mode)
    obs = observations(6)
    for o in obs:
        got = J(*o)
        assert_same(got, plain(*o))
        for g, r in zip(got, rowwise(*o)):
            np.testing.assert_array_equal(g, r)
    assert served(J, obs[-1]) and rowwise._whole.last is None
    got = J(*obs[2])
    for k in range(3):
        fd = central_differences(observation, obs[2], k)
        np.testing.assert_allclose(got[k], fd, rtol=1e-6, atol=1e-8)
    zero_angle = (np.array([0.0, 0.0, 0.0, 0.5, -0.4, -1.0]),) + obs[0][1:]
    assert_same(J(*zero_angle), plain(*zero_angle))  # the other branch, compiled too


def decay(p, t):
    return p[0] * np.exp(-p[1] * t) + p[2] * np.sin(p[3] * t) - p[4]


def test_forward_mode_picked_by_size():
    """12 outputs, 5 inputs: one compiled jvp per input element, in one compiled call."""
    p, t = np.array([1.0, 0.5, 0.3, 2.0, 0.1]), np.linspace(0.0, 1.0, 12)
    J = s2sad.jacobian(decay, jit="strict")
    for scale in (1.0, 1.5, 2.0):
        assert_same(J(p * scale, t), s2sad.jacobian(decay)(p * scale, t), rtol=1e-13)
    assert served(J, (p, t))
    np.testing.assert_allclose(J(p, t), central_differences(decay, (p, t), 0), rtol=1e-6)


def scaled_rows(A, x):
    return np.sin(A) * x + A * A


@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_matrix_input_and_output(mode):
    """Blocks of rank 4 and 3 (a (2, 3) output, a (2, 3) and a (3,) input), both modes."""
    rng = np.random.default_rng(1)
    J = s2sad.jacobian(scaled_rows, wrt=(0, 1), mode=mode, jit="strict")
    for _ in range(3):
        A, x = rng.normal(size=(2, 3)), rng.normal(size=3)
        got = J(A, x)
        assert got[0].shape == (2, 3, 2, 3) and got[1].shape == (2, 3, 3)
        assert_same(got, s2sad.jacobian(scaled_rows, wrt=(0, 1), mode=mode)(A, x))
    assert served(J, (A, x))
    np.testing.assert_allclose(got[1], central_differences(scaled_rows, (A, x), 1), rtol=1e-6)


def clashing(out, n, seed, i):
    """Parameters named like the whole Jacobian's own locals; a number output."""
    return np.sum(out * out) * n + seed * i[0]


def bump(t, out):
    """A number differentiated, an array output: forward mode, a tangent of one."""
    return np.array([np.sin(t) * out, t * t, np.exp(-t)])


def test_numbers_in_and_out_and_clashing_names():
    out, seed, i = np.array([1.0, -2.0, 0.5]), 0.7, np.array([3.0])
    J = s2sad.jacobian(clashing, wrt=(0, 2), jit="strict")
    single = s2sad.jacobian(clashing, wrt=0, jit="strict")
    for n in (2.0, 3.0, 4.0):
        assert_same(J(out, n, seed, i), s2sad.jacobian(clashing, wrt=(0, 2))(out, n, seed, i))
        assert_same(single(out, n, seed, i), s2sad.jacobian(clashing)(out, n, seed, i))
    assert served(J, (out, n, seed, i)) and served(single, (out, n, seed, i))
    assert single(out, n, seed, i).shape == (3,)
    assert J(out, n, seed, i)[1].shape == ()
    B = s2sad.jacobian(bump, jit="strict")
    for t in (0.3, 0.5, 0.9):
        assert_same(B(t, 1.5), s2sad.jacobian(bump)(t, 1.5))
    assert served(B, (t, 1.5))


def test_results_are_the_callers_own():
    J = s2sad.jacobian(observation, wrt=(0, 1, 2), jit="strict")
    o = observations(1)[0]
    for _ in range(3):
        first = J(*o)
    assert served(J, o)
    second = J(*o)
    arrays = [*first, *second, *(a for a in o if isinstance(a, np.ndarray))]
    for k, a in enumerate(arrays):
        for b in arrays[k + 1 :]:
            assert not np.shares_memory(a, b)
    kept = [b.copy() for b in second]
    for b in first:
        assert b.flags.writeable and b.flags.owndata
        b[...] = np.nan
    for b, k in zip(J(*o), kept):
        np.testing.assert_array_equal(b, k)
    for b, k in zip(second, kept):
        np.testing.assert_array_equal(b, k)


def test_changing_kinds_of_arguments(monkeypatch):
    """float32 arrays, a NumPy scalar for the float, other shapes, an int where a float is
    differentiated, between calls of the kind the whole Jacobian was made for: each call
    gives what Python mode gives, with its shapes and dtypes, or raises as it does."""
    J = s2sad.jacobian(observation, wrt=(0, 1, 2), jit="strict")
    plain = s2sad.jacobian(observation, wrt=(0, 1, 2))
    cam, X, w, feat = observations(1)[0]
    kinds = [
        (cam, X, w, feat),
        (cam.astype(np.float32), X, w, feat),
        (cam, X.astype(np.float32), np.float32(w), feat.astype(np.float32)),
        (cam, X, np.float64(w), feat),
        (np.concatenate([cam, [9.0]]), X, w, feat),  # another shape: another block
        (cam, X, w, np.array([0.5, -0.1, 7.0])),  # another shape, not differentiated
    ]
    for _ in range(3):
        for args in kinds:
            got, expected = J(*args), plain(*args)
            rtol = 1e-5 if any(getattr(a, "dtype", None) == np.float32 for a in args) else 1e-12
            assert_same(got, expected, rtol=rtol)
    assert served(J, kinds[0]) or served(J, kinds[-1])
    for bad in [(cam, X, 1, feat), (cam.astype(int), X, w, feat)]:
        with pytest.raises(NonDifferentiableInputError) as raised:
            J(*bad)
        with pytest.raises(NonDifferentiableInputError) as cold:
            s2sad.jacobian(observation, wrt=(0, 1, 2), jit="strict")(*bad)
        assert str(raised.value) == str(cold.value)
    with pytest.raises(TypeError):
        J(cam, X, w)
    # by keyword: the same call by position, served by the whole Jacobian
    assert_same(J(cam, X, w, feat), plain(cam, X, w, feat))
    with monkeypatch.context() as patched:
        patched.setattr(J, "_per_basis", lambda *a: pytest.fail("not the whole Jacobian"))
        assert_same(J(cam, X, w=w, feat=feat), plain(cam, X, w, feat))
        assert_same(J(cam, feat=feat, X=X, w=w), plain(cam, X, w, feat))
    with pytest.raises(TypeError):
        J(cam, X, w, feat, w=w)  # twice: Python's error, as for the function itself


def stencil_rows(p, obs):  # a slice-heavy residual: its fused loops are float64 only
    return np.sin(p[:3] * obs) + 2.0 * p[3:6] ** 2 + p[6:9] * obs


@pytest.mark.parametrize("mode", [None, "forward"])
def test_float32_gets_the_whole_jacobian_from_the_unfused_code(mode):
    """For float32 Numba compiles the unfused code (the fused loops are float64): the whole
    Jacobian calls that module's functions (before, it never came, at ~100 µs a call)."""
    J = s2sad.jacobian(stencil_rows, mode=mode, jit="strict")
    plain = s2sad.jacobian(stencil_rows, mode=mode)
    rng = np.random.default_rng(5)
    calls = [
        (rng.normal(size=9).astype(np.float32), rng.normal(size=3).astype(np.float32))
        for _ in range(compiled_jacobian.CALLS_BEFORE_COMPILING + 2)
    ]
    for args in calls:
        assert_same(J(*args), plain(*args), rtol=1e-5)
    assert served(J, calls[-1])
    assert J(*calls[0]).dtype == np.float32


def test_another_rank_between_calls():
    """Another rank is another transform (the code is specialized on ranks)."""
    rng = np.random.default_rng(2)
    A = rng.normal(size=(2, 3))
    J = s2sad.jacobian(scaled_rows, wrt=(0, 1), jit="strict")
    plain = s2sad.jacobian(scaled_rows, wrt=(0, 1))
    for _ in range(3):
        for x in (rng.normal(size=3), rng.normal(size=(1, 3)), rng.normal(size=(2, 3))):
            assert_same(J(A, x), plain(A, x))
    assert served(J, (A, x))


SCALE = np.array([1.0, 2.0, 3.0])
OFFSET = 0.5


def scaled(x, y):
    return SCALE * np.sin(x) * y + OFFSET * x


def test_a_global_changed_between_calls(monkeypatch):
    """The data is read at each call, as the compiled path reads it: a new value, a float32
    array, a number where an array was (another kind of data: a new whole Jacobian)."""
    x = np.array([0.3, -0.2, 1.1])
    J = s2sad.jacobian(scaled, wrt=(0, 1), jit="strict")
    plain = s2sad.jacobian(scaled, wrt=(0, 1))
    for value in (SCALE, SCALE + 1.0, SCALE.astype(np.float32), 2.5, np.arange(3.0)):
        monkeypatch.setitem(globals(), "SCALE", value)
        for y in (0.7, 0.9, 1.3):
            assert_same(J(x, y), plain(x, y))
        assert served(J, (x, y))
    monkeypatch.setitem(globals(), "OFFSET", -4.0)
    assert_same(J(x, y), plain(x, y))
    monkeypatch.setitem(globals(), "SCALE", np.ones(2))  # the output's shape changes with it
    with pytest.raises(ValueError):
        plain(x, y)
    with pytest.raises(ValueError):
        J(x, y)


def test_a_closure_cell_changed_between_calls():
    k = 2.0

    def f(x):
        return np.sin(x) * k

    x = np.array([0.3, -0.2])
    J, plain = s2sad.jacobian(f, jit="strict"), s2sad.jacobian(f)
    for k in (2.0, 3.0, np.float32(4.0), np.array([1.0, -1.0])):  # f reads the cell
        for _ in range(3):
            assert_same(J(x), plain(x))
        assert served(J, (x,))


def helper(x):
    return np.sin(x)


def with_helper(x):
    return helper(x) * 2.0


def test_a_helper_or_the_code_changed_between_calls(monkeypatch):
    x = np.array([0.3, -0.2])
    J = s2sad.jacobian(with_helper, jit="strict")
    for _ in range(3):
        J(x)
    assert served(J, (x,))
    monkeypatch.setitem(globals(), "helper", lambda x: np.cos(x))
    assert not served(J, (x,))
    np.testing.assert_allclose(J(x), np.diag(-2.0 * np.sin(x)), rtol=1e-12)
    for _ in range(3):  # made anew for the new transform (it stayed off for good before)
        J(x)
    assert served(J, (x,))
    np.testing.assert_allclose(J(x), np.diag(-2.0 * np.sin(x)), rtol=1e-12)

    def f(x):
        return np.sin(x) * x

    def g(x):
        return np.exp(x) * x

    K = s2sad.jacobian(f, jit="strict")
    for _ in range(3):
        K(x)
    assert served(K, (x,))
    monkeypatch.setattr(f, "__code__", g.__code__)
    assert_same(K(x), s2sad.jacobian(g)(x))
    for _ in range(3):
        K(x)
    assert served(K, (x,))


def test_a_numba_failure_turns_it_off():
    """Numba refusing the whole Jacobian leaves the compiled path: the same numbers."""
    J = s2sad.jacobian(decay, jit="strict")
    p, t = np.array([1.0, 0.5, 0.3, 2.0, 0.1]), np.linspace(0.0, 1.0, 4)
    for _ in range(3):
        J(p, t)
    fast = J._whole.last
    fast.failed(numba.core.errors.TypingError("refused"))
    assert fast.off and not served(J, (p, t))
    assert_same(J(p, t), s2sad.jacobian(decay)(p, t))
    assert J._whole.last is None


def test_a_users_error_leaves_it_on():
    J = s2sad.jacobian(decay, jit="strict")
    p, t = np.array([1.0, 0.5, 0.3, 2.0, 0.1]), np.linspace(0.0, 1.0, 4)
    for _ in range(3):
        J(p, t)
    fast = J._whole.last
    fast.failed(ZeroDivisionError("the user's"))
    assert not fast.off and served(J, (p, t))


def rows_tanh(W, x):
    out = np.zeros(x.shape[0])
    for i in range(x.shape[0]):
        out[i] = np.tanh(np.sum(W[i] * x[i]))
    return out


def test_on_threads():
    """parallel=True: the whole Jacobian calls the pullback built for threads; its loop reads
    W[i] for i in range(x.shape[0]), an index s2sad checks, so it stays serial (Numba's
    threads lose the IndexError) and the source says why."""
    rng = np.random.default_rng(3)
    W, x = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    J = s2sad.jacobian(rows_tanh, wrt=(0, 1), jit="strict", parallel=True)
    source = J.backward.specialized(J.backward._bind((W, x), {})).source
    assert "it checks an index (i)" in source and "prange(" not in source
    for scale in (1.0, 2.0, 3.0):
        assert_same(J(W * scale, x), s2sad.jacobian(rows_tanh, wrt=(0, 1))(W * scale, x))
    assert served(J, (W, x))


def test_texts_read_as_code():
    """The whole Jacobian's text: one pullback per output element, written element by element
    into the blocks (Numba compiles an array assigned into a slice in seconds)."""
    J = s2sad.jacobian(observation, wrt=(0, 1, 2), jit="strict")
    o = observations(1)[0]
    for _ in range(2):
        J(*o)
    text = J._whole.last.text
    assert "def vjp_observation_jacobian(cam, X, w, feat, jac_cam, jac_X, jac_w):" in text
    assert "d_cam, d_X, d_w = vjp_observation_sweep(cam, X, w, feat, seed.reshape(out.shape))" in (
        text
    )
    assert "rows_cam[i, k0] = d_cam[k0]" in text and "rows_w[i] = d_w" in text
    compile(text, "<text>", "exec")


def with_a_default(p, obs, c=2.0):
    return np.sin(p[:3] * obs) + c * p[3:6] ** 2


def test_an_argument_left_to_its_default():
    """The defaults a call leaves are read at each call, as the compiled path reads them: a
    changed default gives its numbers, a default of another kind (or none) goes the compiled
    path."""
    J = s2sad.jacobian(with_a_default, jit="strict")
    plain = s2sad.jacobian(with_a_default)
    p, obs = np.linspace(0.1, 0.9, 6), np.array([0.5, -1.0, 2.0])
    for _ in range(3):
        assert_same(J(p, obs), plain(p, obs))
    assert served(J, (p, obs))
    try:
        with_a_default.__defaults__ = (3.5,)
        assert_same(J(p, obs), plain(p, obs))
        assert served(J, (p, obs))
        with_a_default.__defaults__ = (np.array([1.0, 2.0, 3.0]),)
        assert not served(J, (p, obs))
        assert_same(J(p, obs), plain(p, obs))
        with_a_default.__defaults__ = None  # none left: the call misses an argument
        assert not served(J, (p, obs))
        with pytest.raises(TypeError, match="'c'"):
            J(p, obs)
    finally:
        with_a_default.__defaults__ = (2.0,)
    assert_same(J(p, obs, c=2.0), plain(p, obs))  # by keyword: as by position
    assert_same(J(p, c=4.0, obs=obs), plain(p, obs, 4.0))


def test_source_shows_the_sweeps_and_the_whole_jacobian():
    """`s2sad.source` of a jitted Jacobian shows what runs: the compiled sweep per row (here
    reverse mode: 3 outputs, 15 inputs), then the function running them all."""
    cam, X, w, feat = np.linspace(0.1, 1.1, 11), np.array([0.3, -0.2, 1.5]), 0.8, np.ones(2)
    jac = s2sad.jacobian(observation, wrt=(0, 1, 2), jit="strict")
    jac(cam, X, w, feat)
    before = s2sad.source(jac)
    assert "def vjp_observation_sweep(" in before and "batched" not in before
    jac(cam, X, w, feat)
    after = s2sad.source(jac)
    assert after.startswith(before) and "runs\n# the sweeps above for every row" in after
    assert "def vjp_observation_jacobian(" in after


def test_each_number_of_arguments_given_gets_its_whole_jacobian(monkeypatch):
    """Calls leaving a default and calls giving it are two kinds: each gets its whole compiled
    Jacobian (they shared one key, and the one made second never served)."""
    J = s2sad.jacobian(with_a_default, jit="strict")
    plain = s2sad.jacobian(with_a_default)
    p, obs = np.linspace(0.1, 0.9, 6), np.array([0.5, -1.0, 2.0])
    for _ in range(3):
        assert_same(J(p, obs, c=1.5), plain(p, obs, 1.5))
        assert_same(J(p, obs), plain(p, obs))
    with monkeypatch.context() as patched:
        patched.setattr(J, "_per_basis", lambda *a: pytest.fail("not the whole Jacobian"))
        for _ in range(2):
            assert_same(J(p, obs), plain(p, obs))
            assert_same(J(p, obs, 1.5), plain(p, obs, 1.5))


def project(x, w):
    return np.sin(x) @ w


def test_source_with_arguments_shows_the_mode_they_pick():
    """Without arguments, the sweeps of the last call; with them, those their sizes pick."""
    J = s2sad.jacobian(project, jit="strict")
    x, narrow, broad = np.linspace(0.1, 0.4, 4), np.ones((4, 2)), np.ones((4, 6))
    J(x, narrow)  # 2 outputs of 4 inputs: reverse, one sweep per row
    assert "def vjp_project_sweep(" in s2sad.source(J)
    assert "def jvp_project(" in s2sad.source(J, x, broad)  # 6 outputs: one per column
    assert "def vjp_project_sweep(" in s2sad.source(J, x, narrow)
    J(x, broad)
    assert "def jvp_project(" in s2sad.source(J)
