"""Shared helpers for the rule tests: gradients and pullbacks checked against finite differences.

`check_grad(f, args, wrt=0)` compares `s2sad.grad(f, wrt)(*args)` with float64 central differences
of `f`, and checks that every gradient has exactly the type, shape and dtype of its input (a Python
float gives a Python float). `check_vjp(f, args, wrt=0)` draws a random seed shaped like `f`'s
output and compares `pullback(seed)` with the finite differences of `sum(seed * f(...))`.

Both return what s2sad computed (the gradient, or the cotangents), so a test can also compare it
with exact expected numbers.
"""

from __future__ import annotations

import os

# CI has no GPU: the CUDA tests run on Numba's simulator (set before anything imports numba)
os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
# The jit tests check what compiles and the numbers it gives, not speed: LLVM at -O0 halves
# Numba's compile time. (At -O0 Numba declines to cache some functions on disk, so the
# disk-cache test in test_jit.py compiles at -O3 in its own processes.)
os.environ.setdefault("NUMBA_OPT", "0")
# Jitted transforms are kept on disk (s2sad/disk_transforms.py): the suite checks the pipeline
# that makes them, so it transforms in every process; tests/test_disk_transforms.py turns the
# disk cache on where it tests it
os.environ.setdefault("S2SAD_TRANSFORM_CACHE", "0")

import copy
import gc
import importlib.util
import inspect
import textwrap

import numpy as np
import pytest

import s2sad

# A worker's heap grows large (Numba's compiled code and types), and each full collection walks
# all of it: measured on four test files, collections took 24.7 of 124 CPU s. What is alive after
# the imports lives for the whole run, so it is set aside (gc.freeze), and collections run ten
# times less often: 9.4 of 110 CPU s, 8% more peak memory.
import numba  # noqa: E402,F401  (imported here so that its objects are set aside too)

gc.collect()
gc.freeze()
gc.set_threshold(10_000, 20, 20)

EPS = 1e-6
RTOL = 1e-5
ATOL = 1e-7


# ----------------------------------------------------------------------------- argument handling


def load_module(directory, name: str, text: str, file_name: str | None = None):
    """Import `text` (dedented) as module `name` from a file in `directory`: s2sad reads the
    functions' source, so a test's function must live in a file of its own."""
    path = directory / (file_name or f"{name}.py")
    path.write_text(textwrap.dedent(text))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _wrt_indices(f, wrt) -> tuple[list[int], bool]:
    """Positions of the `wrt` parameters (index, name or tuple) and whether wrt is a tuple."""
    params = list(inspect.signature(f).parameters)
    items = wrt if isinstance(wrt, (tuple, list)) else (wrt,)
    out = []
    for item in items:
        if isinstance(item, str):
            out.append(params.index(item))
        else:
            out.append(item % len(params))
    return out, isinstance(wrt, (tuple, list))


def _copy_args(args):
    return [copy.deepcopy(a) for a in args]


def _same(a, b) -> bool:
    """Exact equality of two argument values, for the no-mutation check."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    try:
        return bool(a == b) or (a != a and b != b)
    except Exception:  # pragma: no cover - exotic argument types
        return True


def _float64_input(name, x):
    """Finite differences are only meaningful for float64 inputs."""
    if isinstance(x, float) and not isinstance(x, np.generic):
        return
    arr = np.asarray(x)
    assert (
        arr.dtype == np.float64
    ), f"test bug: differentiated argument {name!r} must be float64, got {arr.dtype}"


def _perturbed(x, flat_index, delta):
    """A copy of `x` (Python float, NumPy scalar or array) with one element moved by `delta`."""
    if isinstance(x, np.ndarray):
        y = np.array(x, dtype=x.dtype, copy=True, order="C")  # reshape(-1) must be a view
        y.reshape(-1)[flat_index] += delta
        return y
    if isinstance(x, np.generic):
        return type(x)(x + delta)
    return float(x) + delta


def _as_float_output(value) -> float:
    arr = np.asarray(value, dtype=np.float64)
    assert arr.shape == (), f"test bug: the function under test returned shape {arr.shape}"
    return float(arr)


def _fd(scalar_fn, args, index, eps):
    """Central differences of scalar_fn(*args) with respect to args[index], shaped like it."""
    x = args[index]
    n = int(np.size(x))
    out = np.empty(n, dtype=np.float64)
    for k in range(n):
        plus = list(args)
        minus = list(args)
        plus[index] = _perturbed(x, k, eps)
        minus[index] = _perturbed(x, k, -eps)
        out[k] = (scalar_fn(*_copy_args(plus)) - scalar_fn(*_copy_args(minus))) / (2 * eps)
    return out.reshape(np.shape(x))


def assert_like_input(g, x, what="gradient"):
    """`g` has exactly the type, shape and dtype of the input `x`."""
    if isinstance(x, float) and not isinstance(x, np.generic):
        assert type(g) is float, f"{what} of a Python float should be a Python float, got {type(g)}"
        return
    if isinstance(x, np.generic):
        assert type(g) is type(x), f"{what} of a {type(x)} should be one, got {type(g)}"
        return
    assert isinstance(g, np.ndarray), f"{what} of an array should be an ndarray, got {type(g)}"
    assert g.shape == np.shape(x), f"{what} has shape {g.shape}, input has {np.shape(x)}"
    assert (
        g.dtype == np.asarray(x).dtype
    ), f"{what} has dtype {g.dtype}, input {np.asarray(x).dtype}"


def _assert_close(actual, expected, rtol, atol, what):
    np.testing.assert_allclose(
        np.asarray(actual, dtype=np.float64), expected, rtol=rtol, atol=atol, err_msg=what
    )


# ----------------------------------------------------------------------------- public helpers


def check_grad(f, args, wrt=0, *, eps=EPS, rtol=RTOL, atol=ATOL):
    """Check s2sad.grad(f, wrt)(*args) against central finite differences; return the gradient."""
    args = list(args)
    indices, is_tuple = _wrt_indices(f, wrt)
    params = list(inspect.signature(f).parameters)
    for i in indices:
        _float64_input(params[i], args[i])
    before = _copy_args(args)

    grads = s2sad.grad(f, wrt=wrt)(*args)

    for a, b in zip(args, before):
        assert _same(a, b), "s2sad.grad modified an argument in place"
    if is_tuple:
        assert isinstance(grads, tuple) and len(grads) == len(
            indices
        ), f"grad with a tuple wrt should return a tuple of {len(indices)}, got {grads!r}"
        grad_list = list(grads)
    else:
        grad_list = [grads]

    def scalar_fn(*a):
        return _as_float_output(f(*a))

    scalar_fn(*_copy_args(args))  # the function under test must be scalar-valued
    for g, i in zip(grad_list, indices):
        assert_like_input(g, args[i], f"gradient wrt {params[i]!r}")
        expected = _fd(scalar_fn, args, i, eps)
        _assert_close(g, expected, rtol, atol, f"gradient wrt {params[i]!r} vs finite differences")
    return grads


def random_seed_like(out, rng):
    """A random seed with the shape (and Python/NumPy type) of one output."""
    if isinstance(out, float) and not isinstance(out, np.generic):
        return float(rng.standard_normal())
    shape = np.shape(out)
    seed = rng.standard_normal(shape)
    if isinstance(out, np.ndarray):
        return np.asarray(seed, dtype=np.float64)
    return np.float64(seed)


def check_vjp(f, args, wrt=0, *, seed=0, eps=EPS, rtol=RTOL, atol=ATOL):
    """Check vjp(f, wrt)(*args)'s pullback of a random seed against finite differences of
    sum(seed * f(...)). Handles tuple outputs (a tuple of seeds). Returns the cotangents."""
    args = list(args)
    rng = np.random.default_rng(seed)
    indices, is_tuple = _wrt_indices(f, wrt)
    params = list(inspect.signature(f).parameters)
    for i in indices:
        _float64_input(params[i], args[i])
    before = _copy_args(args)

    out, pullback = s2sad.vjp(f, wrt=wrt)(*args)

    expected_out = f(*_copy_args(args))
    tuple_out = isinstance(expected_out, tuple)
    outs = expected_out if tuple_out else (expected_out,)
    got_outs = out if tuple_out else (out,)
    assert len(got_outs) == len(outs)
    for o, e in zip(got_outs, outs):
        assert np.shape(o) == np.shape(e), f"vjp output shape {np.shape(o)} != {np.shape(e)}"
        _assert_close(o, np.asarray(e, dtype=np.float64), 1e-12, 1e-12, "vjp primal output")
    seeds = tuple(random_seed_like(o, rng) for o in outs)
    seed_arg = seeds if tuple_out else seeds[0]
    frozen = copy.deepcopy(seeds)

    cots = pullback(seed_arg)

    for s, s0 in zip(seeds, frozen):
        assert _same(s, s0), "pullback modified its seed in place"
    for a, b in zip(args, before):
        assert _same(a, b), "s2sad.vjp modified an argument in place"
    cot_list = list(cots) if is_tuple else [cots]
    if is_tuple:
        assert isinstance(cots, tuple) and len(cots) == len(indices)

    def scalar_fn(*a):
        res = f(*a)
        res = res if tuple_out else (res,)
        return float(
            sum(
                np.sum(np.asarray(s, dtype=np.float64) * np.asarray(r, dtype=np.float64))
                for s, r in zip(seeds, res)
            )
        )

    for g, i in zip(cot_list, indices):
        assert_like_input(g, args[i], f"cotangent wrt {params[i]!r}")
        expected = _fd(scalar_fn, args, i, eps)
        _assert_close(g, expected, rtol, atol, f"cotangent wrt {params[i]!r} vs finite differences")
    return cots


def _moved(args, indices, tangents, h):
    out = list(args)
    for i, t in zip(indices, tangents):
        x = out[i]
        if isinstance(x, np.ndarray):
            out[i] = x + h * t
        elif isinstance(x, np.generic):
            out[i] = type(x)(x + h * t)
        else:
            out[i] = float(x) + h * float(t)
    return out


def check_jvp(f, args, wrt=0, *, seed=0, eps=EPS, rtol=RTOL, atol=ATOL):
    """Check jvp(f, wrt)(*args, tangent=t) for a random tangent `t` against central differences
    of `f` along `t`; each output tangent must have its output's type and shape. Handles tuple
    outputs. Returns the output tangent(s)."""
    args = list(args)
    rng = np.random.default_rng(seed + 1)
    indices, is_tuple = _wrt_indices(f, wrt)
    params = list(inspect.signature(f).parameters)
    for i in indices:
        _float64_input(params[i], args[i])
    tangents = [random_seed_like(args[i], rng) for i in indices]
    frozen = copy.deepcopy(tangents)
    before = _copy_args(args)

    out, tangent = s2sad.jvp(f, wrt=wrt)(
        *args, tangent=tuple(tangents) if is_tuple else tangents[0]
    )

    for t, t0 in zip(tangents, frozen):
        assert _same(t, t0), "jvp modified its tangent in place"
    for a, b in zip(args, before):
        assert _same(a, b), "s2sad.jvp modified an argument in place"
    expected_out = f(*_copy_args(args))
    tuple_out = isinstance(expected_out, tuple)
    outs = expected_out if tuple_out else (expected_out,)
    got = out if tuple_out else (out,)
    touts = tangent if tuple_out else (tangent,)
    assert len(got) == len(outs) and len(touts) == len(outs)
    plus = f(*_copy_args(_moved(args, indices, tangents, eps)))
    minus = f(*_copy_args(_moved(args, indices, tangents, -eps)))
    plus, minus = (plus, minus) if tuple_out else ((plus,), (minus,))
    for k, (o, e, t) in enumerate(zip(got, outs, touts)):
        _assert_close(o, np.asarray(e, dtype=np.float64), 1e-12, 1e-12, "jvp primal output")
        if isinstance(e, float) and not isinstance(e, np.generic):
            assert type(t) is float, f"tangent of a Python float output is {type(t)}"
        else:
            assert np.shape(t) == np.shape(e), f"tangent shape {np.shape(t)} != {np.shape(e)}"
        fd = (np.asarray(plus[k], dtype=np.float64) - np.asarray(minus[k], dtype=np.float64)) / (
            2 * eps
        )
        _assert_close(t, fd, rtol, atol, f"tangent of output {k} vs finite differences")
    return tangent


def rand(*shape, seed=0, low=-1.0, high=1.0):
    """A float64 array of the given shape, uniform in [low, high)."""
    return np.random.default_rng(seed).uniform(low, high, size=shape).astype(np.float64)


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


# ----------------------------------------------------------------------------- helpers' code, shared
# Most of a jit test's compile time is Numba compiling s2sad's helpers (their forms, per argument
# types), not the generated function. s2sad keeps those on disk under S2SAD_CACHE_DIR
# (s2sad/helper_cache.py), but most jit test files point S2SAD_CACHE_DIR at a fresh directory for
# each test or module (so that the generated code really compiles), and a dispatcher keeps the
# directory it was made with: each xdist worker compiled the same helpers again. Here the
# helpers' code goes to one directory per session, shared by the workers (a worker loads what
# the other compiled; a test file's helpers from a warm directory took 8.6 s of CPU, not 23.3 s).
# The generated functions still compile in each test's own directory. Files that test the
# cache directories themselves keep the helpers in theirs.
_OWN_HELPER_DIRS = {
    "test_helper_cache",
    "test_disk_transforms",
    "test_trust_cache_safety",
    "test_cache",
}


@pytest.fixture(scope="session")
def _helpers_root(tmp_path_factory):
    """The session's directory (the xdist workers' common parent directory under -n)."""
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "s2sad-helpers"
    root.mkdir(mode=0o700, exist_ok=True)
    return root


@pytest.fixture(autouse=True)
def _shared_helpers(request, monkeypatch, _helpers_root):
    if request.module.__name__ in _OWN_HELPER_DIRS:
        return
    from s2sad import helper_cache

    monkeypatch.setattr(helper_cache, "cache_dir", lambda: _helpers_root)
    monkeypatch.setattr(helper_cache, "trusted_cache_root", lambda: _helpers_root)


# Make the helpers importable as `from conftest import ...` from any test module.
__all__ = ["check_grad", "check_vjp", "check_jvp", "assert_like_input", "random_seed_like", "rand"]


# ----------------------------------------------------------------------------- fuzzer options


def pytest_addoption(parser):
    """Options of tests/test_fuzz.py: the CI run checks a fixed set of seeds; `--fuzz-long` checks
    thousands of others (`--fuzz-count`, `--fuzz-start` pick them)."""
    group = parser.getgroup("s2sad fuzzer")
    group.addoption(
        "--fuzz-long",
        action="store_true",
        default=False,
        help="tests/test_fuzz.py: check 3000 programs (seeds from 100000) instead of the CI set",
    )
    group.addoption(
        "--fuzz-count", type=int, default=None, help="tests/test_fuzz.py: how many programs"
    )
    group.addoption(
        "--fuzz-start", type=int, default=None, help="tests/test_fuzz.py: the first seed"
    )
