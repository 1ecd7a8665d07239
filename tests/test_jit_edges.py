"""Python mode and jitted code at the edges: the same numbers, or the same error, for
keyword-only parameters (the generated function's arguments are passed by position), `t ** j`
at t == 0 with an integer j < 0 (Numba raises where NumPy's numbers give inf), a `range` of a
float (Numba truncates it where Python raises TypeError), and `np.linspace(..., endpoint=False)`
(Numba's np.linspace takes no `endpoint`: rules/elementwise.py's `linspace_ends`)."""

import importlib.util
import textwrap
import warnings

import numpy as np
import pytest

import s2sad
from s2sad import cli
from s2sad.jit import JitFallbackWarning

numba = pytest.importorskip("numba")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))


def scaled(x, *, scale=2.0):
    return np.sin(x) * scale


def test_keyword_only_parameters_bind_by_name_jitted():
    """jitted code took the arguments by position, the tangents after `x` and `scale`, where
    the generated function took them before its keyword-only `scale`: the tangent bound to
    `scale` (a wrong value and tangent, with no error)."""
    x = np.array([0.1, 0.2, 0.3])
    tangents = (np.array([1.0, -1.0, 0.5]), 0.25)
    jitted = s2sad.jvp(scaled, wrt=("x", "scale"), jit="strict")
    got = jitted(x, scale=3.0, tangent=tangents)
    expected = s2sad.jvp(scaled, wrt=("x", "scale"))(x, scale=3.0, tangent=tangents)
    np.testing.assert_allclose(got[0], 3.0 * np.sin(x), rtol=1e-15)
    np.testing.assert_allclose(got[1], 3.0 * np.cos(x) * tangents[0] + 0.25 * np.sin(x))
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-14)
    assert "def jvp_scaled(x, scale=2.0, x_dot=None, scale_dot=None):" in s2sad.source(
        jitted, x, scale=3.0
    )


def test_emit_and_hessian_of_a_keyword_only_parameter(tmp_path):
    """`s2sad emit --wrt scale` returned dscale shaped like the data array after `x` (the
    parameter at scale's position among the positional ones); `--jit` left scale out of the
    call, so the compiled function took its default."""
    file = tmp_path / "keyed.py"
    file.write_text(textwrap.dedent("""
            import numpy as np

            W = np.array([1.0, 2.0, 3.0])


            def loss(x, *, scale=2.0):
                return np.sum(np.sin(x) * scale * W)
            """))
    spec = f"{file}:loss"
    text = cli.emit_text(spec, ["scale"], "grad")
    assert "return like_input(dscale, scale)" in text
    module = _module(tmp_path / "plain.py", text)
    x = np.array([0.1, 0.2, 0.3])
    assert module.grad_loss(x, scale=3.0) == pytest.approx(np.sum(np.sin(x) * [1, 2, 3]))
    jitted = cli.emit_text(spec, [], "grad", jit=True)
    assert "_returned(_grad_loss_jit, (x, scale, W), (x,)" in jitted
    # the Hessian, which calls the gradient code with `scale` by its name there, took the
    # name at scale's positional index (W: "got multiple values for argument 'W'")
    loss = cli.load_function(spec)
    expected = np.diag(-np.sin(x) * 3.0 * [1, 2, 3])
    for batched in (True, False):
        np.testing.assert_allclose(s2sad.hessian(loss, batched=batched)(x, scale=3.0), expected)


def _module(path, text):
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def powers(t, n):
    s = 0.0
    for j in range(-2, n):
        s = s + t**j
    return s


def test_power_at_zero_and_a_range_of_a_float_as_python_mode():
    """At t == 0 a NumPy float gives inf (with NumPy's warning) in Python mode, where Numba's
    `t ** j` raised ZeroDivisionError; a Python float raises ZeroDivisionError in both. And
    `range(n)` of n = 3.0 raises Python's TypeError compiled too (Numba's range truncated it)."""
    python, jitted = s2sad.grad(powers), s2sad.grad(powers, jit=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (NumPy's divide by zero, both modes)
        expected = python(np.float64(0.0), 3)
        got = jitted(np.float64(0.0), 3)
    assert expected == -np.inf and got == expected and type(got) is type(expected)
    for g in (python, jitted):
        with pytest.raises(ZeroDivisionError):
            g(0.0, 3)
        assert g(0.5, 3) == pytest.approx(-2 * 0.5**-3 - 0.5**-2 + 1 + 2 * 0.5)
        with pytest.raises(TypeError, match="'float' object cannot be interpreted as an integer"):
            g(0.5, 3.0)
    assert "check_range(-2, n)" in s2sad.source(jitted, 0.5, 3)


def open_grid(a, b):
    samples = np.linspace(a, b, 7, endpoint=False)
    return np.sum(np.sin(samples[[True, False, True, True, False, True, True]]) ** 2)


def test_linspace_without_its_endpoint_and_a_list_mask_compile():
    """Numba's np.linspace takes no `endpoint`, and Numba indexes by no list (NumPy reads one
    of bools as a mask): `linspace_ends`, and the list as its array, its length checked."""
    jitted = s2sad.value_and_grad(open_grid, wrt=(0, 1), jit="strict")
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitFallbackWarning)
        value, grads = jitted(0.3, 1.7)
    text = s2sad.source(jitted, 0.3, 1.7)
    assert "linspace_ends(a, b, 7, False)" in text
    assert "check_index(np.array([True, False, True, True, False, True, True]), len(" in text
    expected = s2sad.value_and_grad(open_grid, wrt=(0, 1))(0.3, 1.7)
    assert value == pytest.approx(expected[0], rel=1e-14)
    eps = 1e-6
    fd = [
        (open_grid(0.3 + eps, 1.7) - open_grid(0.3 - eps, 1.7)) / (2 * eps),
        (open_grid(0.3, 1.7 + eps) - open_grid(0.3, 1.7 - eps)) / (2 * eps),
    ]
    np.testing.assert_allclose(grads, expected[1], rtol=1e-13)
    np.testing.assert_allclose(grads, fd, rtol=1e-7)
    from s2sad.numba_helpers import linspace_ends

    samples = numba.njit(lambda a, b, n, e: linspace_ends(a, b, n, e))
    for a, b in ((0.3, 1.7), (2.0, 2.0), (-1.0, 5.0)):
        for n in (0, 1, 2, 7):
            for e in (True, False):
                np.testing.assert_array_equal(samples(a, b, n, e), np.linspace(a, b, n, endpoint=e))


def by_two_arrays(x, m, idx):
    return np.sum(x[m, idx] ** 2)


def test_an_index_numba_cannot_lower_is_refused_naming_the_line():
    """`x[m, idx]` (a mask and an index array) failed in Numba's lowering with an LLVM error,
    `x[M, 0]` (M of two axes) with an AssertionError, both told as they were; Python mode's
    numbers where jit=True falls back."""
    x, m, idx = np.arange(12.0).reshape(3, 4), np.array([True, False, True]), np.array([1, 3])
    with pytest.raises(
        s2sad.S2SADError, match=r"indexing by a boolean mask beside.*line \d+: `return np"
    ):
        s2sad.grad(by_two_arrays, jit="strict")(x, m, idx)
    with pytest.warns(JitFallbackWarning, match="indexing by a boolean mask"):
        got = s2sad.grad(by_two_arrays, jit=True)(x, m, idx)
    np.testing.assert_array_equal(got, s2sad.grad(by_two_arrays)(x, m, idx))
    M = np.array([[True, False, True], [False, True, True]])
    text = s2sad.source(s2sad.grad(by_two_arrays, jit=True), np.ones((2, 3, 4)), M, 0)
    assert "indexed_by_arrays(x, (m, idx))" in text  # (M of two axes beside an integer)
