"""Issue 13, crashes and resource use: deeply nested code (a 300-term sum, a chain of 200
helpers) is differentiated, or refused with file and line, never a bare RecursionError; and the
transform's work grows linearly with the function's length (counted, never timed)."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

import s2sad
from s2sad import transform_cache as compile_
from s2sad import deep
from s2sad.pipeline import optimize
from s2sad.errors import NestingTooDeepError, S2SADError
from s2sad.pipeline.normalize import NameAllocator, Normalizer

ROOT = Path(__file__).resolve().parent.parent


def _load(tmp_path, name: str, source: str):
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, path


def _sum_module(tmp_path, terms: int, name: str = "deep_sum"):
    """`f(x) = 1*x[0] + 2*x[1] + ... + terms*x[terms-1]`, one expression, `terms` levels deep."""
    expr = " + ".join(f"x[{i}] * {i + 1}.0" for i in range(terms))
    return _load(tmp_path, f"{name}{terms}", f"def f(x):\n    return {expr}\n")


def _chain_module(tmp_path, depth: int):
    """f0 calls f1 calls ... f{depth-1}: each multiplies by 1.01, the last takes np.sin."""
    lines = ["import numpy as np", ""]
    for i in range(depth - 1):
        lines += [f"def f{i}(x):", f"    return f{i + 1}(x) * 1.01", ""]
    lines += [f"def f{depth - 1}(x):", "    return np.sin(x)", ""]
    lines += ["def loss(x):", "    return np.sum(f0(x))", ""]
    return _load(tmp_path, f"chain{depth}", "\n".join(lines))


@pytest.mark.parametrize("terms", [300, 1000])
def test_long_sum_is_differentiated_exactly(tmp_path, terms):
    module, _ = _sum_module(tmp_path, terms)
    x = np.linspace(-1.0, 1.0, terms)
    limit = sys.getrecursionlimit()
    value, g = s2sad.value_and_grad(module.f)(x)
    assert sys.getrecursionlimit() == limit  # raised only while the transform ran
    weights = np.arange(1.0, terms + 1)
    np.testing.assert_allclose(value, module.f(x), rtol=1e-12)
    np.testing.assert_array_equal(g, weights)
    if terms == 300:
        source = s2sad.source(s2sad.grad(module.f), x)  # black formats it
        assert "def grad_f(x)" in source
        _, tangent = s2sad.jvp(module.f)(x, tangent=np.ones(terms))
        np.testing.assert_allclose(tangent, weights.sum(), rtol=1e-12)


def test_long_sum_in_jitted_mode(tmp_path):
    module, _ = _sum_module(tmp_path, 300, "deep_sum_jit")
    x = np.linspace(-1.0, 1.0, 300)
    np.testing.assert_array_equal(s2sad.grad(module.f, jit=True)(x), np.arange(1.0, 301))


def test_long_sum_of_constants_stays_one_expression(tmp_path):
    """An expression no differentiated value reaches is emitted as written, 1,000 levels deep:
    unparse, compile and black must cope with it too."""
    terms = " + ".join(f"c[{i}]" for i in range(1000))
    module, _ = _load(
        tmp_path, "constant_sum", f"def f(x, c):\n    k = {terms}\n    return k * x[0]\n"
    )
    c = np.linspace(0.0, 1.0, 1000)
    g = s2sad.grad(module.f)
    np.testing.assert_allclose(g(np.ones(2), c), [c.sum(), 0.0], rtol=1e-12)
    assert "c[999]" in s2sad.source(g, np.ones(2), c)


def test_chain_of_200_helpers(tmp_path):
    module, _ = _chain_module(tmp_path, 200)
    x = np.array([0.0, 0.5, -1.2])
    np.testing.assert_allclose(
        s2sad.grad(module.loss)(x), 1.01**199 * np.cos(x), rtol=1e-12, atol=0
    )


def test_too_deep_is_refused_with_file_and_line(tmp_path, monkeypatch):
    """Deeper than the raised limit reaches: a clean S2SADError naming the file and the line."""
    monkeypatch.setattr(deep, "RECURSION_LIMIT", 1000)  # so that the retry overruns it too
    module, path = _sum_module(tmp_path, 1000, "too_deep")
    limit = sys.getrecursionlimit()
    with pytest.raises(NestingTooDeepError) as info:
        s2sad.grad(module.f)(np.ones(1000))
    assert isinstance(info.value, S2SADError)
    assert info.value.file == str(path) and info.value.line == 2
    assert "split the longest expression" in str(info.value)
    assert sys.getrecursionlimit() == limit


def test_recursion_error_is_retried_once_with_room(monkeypatch):
    """A transform that overruns the limit on a shallow-looking tree (a helper chain) gets one
    more run with room, on another thread, and its error (if any) comes back to the caller."""
    depths = []

    def needs_room():
        depths.append(sys.getrecursionlimit())
        if len(depths) == 1:
            raise RecursionError
        return "done"

    assert deep.with_room(needs_room) == "done"
    assert depths[1] >= deep.RECURSION_LIMIT > depths[0]

    def fails():
        raise KeyError("inner")

    with pytest.raises(KeyError, match="inner"):
        deep.with_room(fails, deep=True)


def test_nested_run_on_the_large_stack_does_not_wait_for_itself():
    """A transform started on the large-stack thread (a nested one) that overruns even the raised
    limit is refused there; it must not wait for the lock its own caller holds."""

    def inner():
        raise RecursionError

    def outer():
        with pytest.raises(deep.TooDeep):
            deep.with_room(inner)
        return "outer"

    assert deep.with_room(outer, deep=True) == "outer"


# ---------------------------------------------------------------- linear work, counted


def _long_function(tmp_path, lines: int):
    spec = importlib.util.spec_from_file_location(
        "transform_time", ROOT / "scripts/transform_time.py"
    )
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    module = script.load(script.long_source(lines), str(tmp_path), f"long{lines}")
    return module.f, script.arguments()


def _python_calls(func, args) -> int:
    """Python function calls made by the transform (deterministic, unlike its time)."""
    compile_._CACHE.clear()
    calls = [0]

    def count(frame, event, arg):
        if event == "call":
            calls[0] += 1

    sys.setprofile(count)
    try:
        s2sad.grad(func)(*args)
    finally:
        sys.setprofile(None)
    return calls[0]


@pytest.mark.parametrize("shape", ["straight", "loop body"])
def test_transform_work_grows_linearly(tmp_path, shape):
    make = _long_function if shape == "straight" else _loop_function
    small, args = make(tmp_path, 100)
    large, _ = make(tmp_path, 400)
    s2sad.grad(small)(*args)  # imports and first-use caches out of the way (not counted)
    ratio = _python_calls(large, args) / _python_calls(small, args)
    assert ratio < 4.6, ratio  # 4 times the lines: 4 times the calls, not 16


def test_fresh_names_cost_one_probe_each(monkeypatch):
    """The 1,000th `h` is `h1000` after one look-up, not after probing h2 ... h999."""
    probes = [0]
    numbered = NameAllocator._numbered

    def counted(base, k):
        probes[0] += 1
        return numbered(base, k)

    monkeypatch.setattr(NameAllocator, "_numbered", staticmethod(counted))
    names = NameAllocator({"h", "h3"})
    got = [names.fresh("h") for _ in range(1000)]
    assert got[:3] == ["h2", "h4", "h5"] and len(set(got)) == 1000
    assert probes[0] <= 1002
    state = names.state()
    assert names.fresh("h") == "h1003"
    names.restore(state)  # a rolled-back allocation is given again
    assert names.fresh("h") == "h1003"


def test_varied_check_is_linear_in_a_long_sum(tmp_path, monkeypatch):
    """Normalizing a sum asks at each level whether the operand reads a differentiated value;
    the answer for each node is computed once, not once per level above it."""
    calls = [0]
    original = Normalizer._mentions_varied

    def counted(self, node):
        calls[0] += 1
        return original(self, node)

    monkeypatch.setattr(Normalizer, "_mentions_varied", counted)
    counts = []
    for terms in (100, 400):
        module, _ = _sum_module(tmp_path, terms, "varied")
        compile_._CACHE.clear()
        calls[0] = 0
        s2sad.grad(module.f)(np.ones(terms))
        counts.append(calls[0])
    assert counts[1] / counts[0] < 5, counts


def _loop_function(tmp_path, lines: int, nested: bool = False):
    """scripts/transform_time.py's function whose statements lie in one loop body (or two)."""
    spec = importlib.util.spec_from_file_location(
        "transform_time", ROOT / "scripts/transform_time.py"
    )
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    source = script.loop_source(lines, nested=nested)
    module = script.load(source, str(tmp_path), f"loop{lines}{'n' if nested else ''}")
    return module.f, script.arguments()


@pytest.mark.parametrize("nested", [False, True], ids=["loop", "nested"])
def test_copy_optimizer_work_in_a_loop_body_grows_linearly(tmp_path, monkeypatch, nested):
    """The optimizer forwards the chain of adjoint copies of a long loop body (`ds_new = ds`, ...)
    one rewrite at a time; each rewrite may revive an earlier copy, and resuming the search there
    must not step over every statement in between (1,000 lines: 2.5 million statements looked at
    instead of 8,000)."""
    calls = [0]
    is_copy = optimize._is_copy

    def counted(stmt):
        calls[0] += 1
        return is_copy(stmt)

    monkeypatch.setattr(optimize, "_is_copy", counted)
    counts = []
    for lines in (100, 400):
        f, args = _loop_function(tmp_path, lines, nested)
        compile_._CACHE.clear()
        calls[0] = 0
        s2sad.grad(f)(*args)
        counts.append(calls[0])
    assert counts[1] / counts[0] < 4.6, counts


def test_long_loop_body_gradient_matches_finite_differences(tmp_path):
    f, _ = _loop_function(tmp_path, 100)
    rng = np.random.default_rng(0)  # distinct entries: no ties at np.max
    h, W, b = rng.uniform(-1, 1, 4), rng.uniform(-0.5, 0.5, (4, 4)), rng.uniform(-1, 1, 4)
    grad = s2sad.grad(f)(h, W, b)
    eps = 1e-6
    fd = [(f(h + eps * e, W, b) - f(h - eps * e, W, b)) / (2 * eps) for e in np.eye(h.size)]
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-8)
