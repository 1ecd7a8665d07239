"""Integer indices out of range under `jit=True`: the compiled code checks them (Numba's
`boundscheck=True`) and raises IndexError naming the user's file and line, as Python mode
raises it, where unchecked code would read past the array; indices in range, negative ones
too, give Python mode's numbers. One compiled function per case, called several times."""

import functools
import importlib.util
import inspect
import warnings

import numpy as np
import pytest

import s2sad
from s2sad import cli
from s2sad.jit import module_text


def picked(x, k):
    return x[k] * 3.0 + x[0]


def shifted(x, n):
    s = 0.0
    for i in range(n):
        s = s + x[i + 1] * x[i]
    return s


def gathered(x, idx):
    return np.sum(x[idx] ** 2)


def cell(u, i, j):
    # slices past the end are clipped, as in Python
    return u[i, j] * u[0, j] + np.sum(u[i + 1 : i + 9, j:] ** 2)


def scattered(x, idx):
    y = np.zeros(3)
    np.add.at(y, idx, x)
    return np.sum(y**2)


def sliced(u):
    d = u[1:, :] - u[:-1, :]
    return np.sum(d**2) + np.sum(u[:, None, ::-1])


def entry(idx, k):
    return idx[k]


def scaled_by_entry(x, idx, k):
    # `entry` is the user's: compiled code calls it by name (custom.numba_form)
    return x[0] * entry(idx, k)


@s2sad.custom_vjp
def first_times(x, k):
    return x[0] * k


@first_times.defvjp
def first_times_vjp(dy, y, x, k):
    g = np.zeros_like(x)
    g[k] = dy * k
    return g, 0.0


def through_rule(x, k):
    return first_times(x, k) + np.sum(x)


def taken(x, idx):
    return np.sum(np.take(x, idx) ** 2)


def masked(u, m):
    return np.sum(u[m] ** 2) + np.sum(u[:, m[:3]])


def _line(f, text: str) -> int:
    lines, start = inspect.getsourcelines(f)
    return start + next(n for n, line in enumerate(lines) if text in line)


@functools.cache
def _transform(f, mode: str):
    return getattr(s2sad, mode)(f, jit=True)


def _out_of_range(f, args, text: str, mode: str = "grad") -> None:
    """Python mode raises IndexError; so does the jitted transform, at the same user line."""
    kwargs = {"tangent": np.ones_like(args[0])} if mode == "jvp" else {}
    with pytest.raises(IndexError):
        getattr(s2sad, mode)(f)(*args, **kwargs)
    _out_of_range_in(functools.partial(_transform(f, mode), **kwargs), f, args, text)


def _out_of_range_in(transformed, f, args, text: str) -> None:
    with pytest.raises(IndexError) as raised:
        transformed(*args)
    where = f"{__file__} line {_line(f, text)} (`{text}`)"
    assert where in str(raised.value), str(raised.value)


def _same(f, args, mode: str = "grad") -> None:
    kwargs = {"tangent": np.ones_like(args[0])} if mode == "jvp" else {}
    expected = getattr(s2sad, mode)(f)(*args, **kwargs)
    got = _transform(f, mode)(*args, **kwargs)
    pairs = zip(expected, got) if isinstance(expected, tuple) else [(expected, got)]
    for e, g in pairs:
        np.testing.assert_allclose(g, e, rtol=1e-12)


X = np.array([0.5, -1.5, 2.0])


@pytest.mark.parametrize("mode", ["grad", "jvp"])
def test_an_index_out_of_range_in_straight_line_code(mode):
    for k in (1, -1, -3, 2):  # in range, negative ones too (Python's meaning)
        _same(picked, (X, k), mode)
    for k in (3, -4, 10**8):
        _out_of_range(picked, (X, k), "return x[k] * 3.0 + x[0]", mode)


def test_a_loop_one_step_too_far():
    _same(shifted, (X, 2))
    _same(shifted, (X, 0))
    _out_of_range(shifted, (X, 3), "s = s + x[i + 1] * x[i]")


def test_an_index_array_out_of_range():
    for idx in ([0, 2, 2], [-1, -3], []):
        _same(gathered, (X, np.array(idx, dtype=np.int64)))
    for idx in ([0, 3], [-4]):
        _out_of_range(gathered, (X, np.array(idx, dtype=np.int64)), "return np.sum(x[idx] ** 2)")


def test_np_add_at_by_indices_out_of_range():
    """`np.add.at` in the user's code is s2sad's helper `add_at` in jitted code, which checks
    the indices it writes at (a jvp's code has no subscript of the user's to check first)."""
    ones = np.ones(2)
    for idx in ([0, 2], [-1, -3]):
        _same(scattered, (ones, np.array(idx)), "jvp")
    for idx in ([0, 3], [-4, 0]):
        _out_of_range(scattered, (ones, np.array(idx)), "np.add.at(y, idx, x)", "jvp")


def test_two_indices_of_a_matrix_and_slices_past_its_end():
    u = np.arange(6.0).reshape(2, 3) + 1.0
    for i, j in ((1, 2), (-2, -3), (0, 0)):
        _same(cell, (u, i, j))
    for i, j in ((2, 0), (0, 3), (-3, 0)):
        _out_of_range(
            cell, (u, i, j), "return u[i, j] * u[0, j] + np.sum(u[i + 1 : i + 9, j:] ** 2)"
        )


def test_the_users_helpers_and_custom_vjp_rules_are_checked_too():
    """A function of the user's the compiled code calls by name, and a custom_vjp's rule, are
    compiled with the checks (they read, and wrote, past the array)."""
    idx = np.arange(5)
    for f, good, bad in (
        (scaled_by_entry, (X, idx, -5), (X, idx, 7)),
        (through_rule, (X, 2), (X, 15)),
    ):
        strict = s2sad.grad(f, jit="strict")  # (compiled, or it raises: no Python rerun)
        np.testing.assert_allclose(strict(*good), s2sad.grad(f)(*good), rtol=1e-12)
        with pytest.raises(IndexError):
            s2sad.grad(f)(*bad)
        with pytest.raises(IndexError):
            strict(*bad)


def test_an_index_numbas_library_checks_as_the_code_runs_is_no_failure_to_compile():
    """`np.take` out of range raises in Numba's own code as it runs: the user's IndexError, not
    a compile failure (which warned and ran every later call of those types in Python)."""
    good, bad = np.array([0, 2, -1]), np.array([1, 20])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (a fallback's warning would be raised instead)
        for transformed in (s2sad.grad(taken, jit=True), s2sad.grad(taken, jit="strict")):
            np.testing.assert_allclose(transformed(X, good), s2sad.grad(taken)(X, good))
            with pytest.raises(IndexError):
                transformed(X, bad)
            np.testing.assert_allclose(transformed(X, good), s2sad.grad(taken)(X, good))


def test_a_boolean_mask_of_another_length_than_the_axis():
    """Numba's `x[m]` took a mask shorter than the axis (its first elements), where NumPy
    raises: jitted code checks a mask's shape (`mask_fits`, pipeline/numba_forms.py; the pass
    itself: tests/test_workspace.py)."""
    u = np.arange(12.0).reshape(4, 3)
    _same(masked, (u, np.array([True, False, True, True])))
    for m in (np.ones(3, bool), np.ones(5, bool)):
        _out_of_range(masked, (u, m), "return np.sum(u[m] ** 2) + np.sum(u[:, m[:3]])")


def test_only_code_that_indexes_by_integers_is_checked():
    """Slices are clipped and fusion's loops index within the shapes their guards checked:
    a function that only slices is compiled without Numba's checks (they cost up to 3%)."""
    u = np.ones((3, 4))
    for f, args, indexed in (
        (sliced, (u,), False),
        (picked, (X, 1), True),
        (cell, (u, 0, 1), True),
    ):
        for mode in ("grad", "vjp"):
            transformed = getattr(s2sad, mode)(f, jit=True)
            assert transformed.specialized(transformed._bind(args, {})).indexed is indexed
    jvp = s2sad.jvp(sliced, jit=True)
    assert jvp.specialized(jvp._bind((u,), {})).indexed is False


def test_the_checks_are_in_the_modules_text_and_can_be_turned_off(monkeypatch):
    """`s2sad emit --jit` modules are compiled with the checks too (this generic one, of `k`'s
    rank unknown, with Numba's and its masks'); S2SAD_BOUNDSCHECK=0 makes the driver place none
    (no text rewritten after it), and the transform caches' keys hold the setting: code made
    with checks is not served without them, nor the other way round."""
    source = "def f(x):\n    return x[0]\n"
    assert 'njit(cache=True, error_model="numpy", boundscheck=True)(_f_py)' in module_text(source)
    assert "boundscheck" not in module_text(source, indexed=False)
    emitted = functools.partial(cli.emit_text, f"{__file__}:picked", ["x"], "grad", jit=True)
    transformed = s2sad.grad(picked, jit=True)
    for checked in (True, False, True):
        monkeypatch.setattr("s2sad.pipeline.bounds.BOUNDSCHECK", checked)
        compiled = transformed.specialized(transformed._bind((X, 1), {}))
        assert compiled.indexed and compiled.numba_checks is False  # (placed, or none at all)
        assert ("check_index(k, len(x))" in s2sad.source(transformed, X, 1)) is checked
        text = emitted()
        assert ("boundscheck=True" in text) is checked and ("mask_fits(" in text) is checked
        assert "check_index" not in text


def test_a_module_emit_jit_writes_raises_naming_the_users_line(tmp_path):
    """A module `s2sad emit --jit` writes is compiled with the checks; its function's Python
    version reruns the call (its helpers run their NumPy or compiled forms), so its IndexError
    names the user's line, with NumPy's message, as in-process jit does."""
    name = "emitted_picked"
    out = tmp_path / f"{name}.py"
    out.write_text(cli.emit_text(f"{__file__}:picked", ["x"], "grad", jit=True))
    spec = importlib.util.spec_from_file_location(name, out)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    np.testing.assert_allclose(module.grad_picked(X, -2), s2sad.grad(picked)(X, -2), rtol=1e-12)
    with pytest.raises(IndexError) as raised:
        module.grad_picked(X, 3)
    start = inspect.getsourcelines(picked)[1]
    told = f"test_jit_bounds.py line {start + 1} (`return x[k] * 3.0 + x[0]`)"
    assert str(raised.value).startswith("index 3 is out of bounds for axis 0 with size 3\n  at ")
    assert str(raised.value).endswith(told), str(raised.value)


def test_the_pullbacks_sweep_keeps_the_read_that_checks_its_index():
    """A jitted pullback's sweep runs the primal again without what its adjoint does not read,
    but keeps `x[k]`: its check comes before the adjoint's `add_at(dx, k, ...)`, even where the
    sweep runs alone (a scalar output's whole compiled Jacobian calls nothing else)."""
    sweep = s2sad.source(s2sad.vjp(picked, jit=True), X, 1).split("def vjp_picked_sweep")[1]
    assert sweep.index("= x[k]") < sweep.index("add_at(dx, k,")
    jacobian = s2sad.jacobian(picked, jit=True)
    for _ in range(20):  # (past the calls after which the whole Jacobian is compiled)
        np.testing.assert_allclose(jacobian(X, 1), [1.0, 3.0, 0.0])
    _out_of_range_in(jacobian, picked, (X, 3), "return x[k] * 3.0 + x[0]")
