"""The transform cache: reused while nothing it read has changed, rebuilt when something has."""

import importlib
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import s2sad
from s2sad import transform_cache as stage


def _module(tmp_path, name, text):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(text))
    sys.path.insert(0, str(tmp_path))
    try:
        if name in sys.modules:
            del sys.modules[name]
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(tmp_path))


def test_second_transform_is_the_cached_one(tmp_path):
    mod = _module(
        tmp_path,
        "cache_a",
        """
        import numpy as np
        def f(x):
            return np.sum(x ** 2)
    """,
    )
    first = s2sad.grad(mod.f).compiled
    assert s2sad.grad(mod.f).compiled is first


def test_rebinding_a_global_constant_invalidates(tmp_path):
    mod = _module(
        tmp_path,
        "cache_b",
        """
        import numpy as np
        SCALE = 2.0
        def f(x):
            return np.sum(SCALE * x ** 2)
    """,
    )
    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(s2sad.grad(mod.f)(x), 4 * x)
    mod.SCALE = 5.0
    np.testing.assert_allclose(s2sad.grad(mod.f)(x), 10 * x)


def test_redefining_an_inlined_helper_invalidates(tmp_path):
    _module(
        tmp_path,
        "cache_h",
        """
        def helper(v):
            return v ** 2
    """,
    )
    mod = _module(
        tmp_path,
        "cache_c",
        """
        import numpy as np
        import cache_h
        def f(x):
            return np.sum(cache_h.helper(x))
    """,
    )
    x = np.array([1.0, 2.0])
    g = s2sad.grad(mod.f)
    np.testing.assert_allclose(g(x), 2 * x)
    (tmp_path / "cache_h.py").write_text("def helper(v):\n    return v ** 3\n")
    import linecache

    linecache.checkcache()
    sys.path.insert(0, str(tmp_path))
    try:
        importlib.reload(sys.modules["cache_h"])  # as an editor's reload would
    finally:
        sys.path.remove(str(tmp_path))
    np.testing.assert_allclose(g(x), 3 * x**2)


def test_registering_a_rule_invalidates(tmp_path):
    mod = _module(
        tmp_path,
        "cache_d",
        """
        import numpy as np
        def black_box(v):
            return v * 2.0
        def f(x):
            return np.sum(black_box(x))
    """,
    )
    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(s2sad.grad(mod.f)(x), [2.0, 2.0])  # inlined
    s2sad.register_vjp(mod.black_box, lambda dy, y, v: dy * 7.0)
    np.testing.assert_allclose(s2sad.grad(mod.f)(x), [7.0, 7.0])  # the rule now
    assert any(k[0] is mod.f.__code__ for k in stage._CACHE)


# ----------------------------------------------------------------------------- the disk cache

_RUN = (
    "import sys; sys.path.insert(0, {root!r}); sys.path.insert(0, {here!r})\n"
    "import s2sad, test_jit\n"
    "print(repr(s2sad.grad(test_jit.euler, jit='strict')(0.3, 0.8, 100)))\n"
)


def _run_in_new_process(cache, count=1):
    import os
    import subprocess
    from pathlib import Path

    here = Path(__file__).parent
    code = _RUN.format(root=str(here.parent), here=str(here))
    # at conftest's NUMBA_OPT=0 Numba declines to cache some functions on disk
    env = {**os.environ, "S2SAD_CACHE_DIR": str(cache), "NUMBA_OPT": "3"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(count)
    ]
    results = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, results):
        assert p.returncode == 0, err
    return [out for out, _ in results]


@pytest.fixture(scope="module")
def compiled_at_once(tmp_path_factory):
    """Two processes compiling the same function at once into one empty cache: what each
    printed, and the cache they left (the damage test below damages a copy of it)."""
    cache = tmp_path_factory.mktemp("at-once") / "disk"
    return cache, _run_in_new_process(cache, count=2)


def test_two_processes_compiling_the_same_function_at_once_both_work(compiled_at_once):
    _, (first, second) = compiled_at_once
    assert first == second
    assert float(first) == pytest.approx(
        s2sad.grad(__import__("test_jit").euler)(0.3, 0.8, 100), rel=1e-12
    )


def test_damaged_cache_files_are_rebuilt_not_trusted(compiled_at_once, tmp_path):
    written, (expected, _) = compiled_at_once
    cache = tmp_path / "disk"
    shutil.copytree(written, cache)  # (modes kept: the cache directory is the user's alone)
    numba_files = list(cache.rglob("*.nbi")) + list(cache.rglob("*.nbc"))
    assert numba_files
    for path in numba_files:  # truncated, foreign bytes
        path.write_bytes(b"\x90not a pickle")
    assert _run_in_new_process(cache) == [expected]
    for path in cache.glob("*.py"):  # a generated module cut short
        path.write_text(path.read_text()[:50])
    assert _run_in_new_process(cache) == [expected]
    assert float(expected) == pytest.approx(
        s2sad.grad(__import__("test_jit").euler)(0.3, 0.8, 100), rel=1e-12
    )


def test_the_disk_cache_is_keyed_on_s2sads_version(tmp_path, monkeypatch):
    from s2sad import jit

    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path))
    source = "def f(x):\n    return x\n"
    first = jit._module_for(source, "f")
    monkeypatch.setattr(s2sad.version, "__version__", s2sad.__version__ + ".post1")
    second = jit._module_for(source, "f")
    assert first.__file__ != second.__file__ and len(list(tmp_path.glob("*.py"))) == 2


def test_the_disk_cache_is_keyed_on_numbas_optimisation_level(tmp_path, monkeypatch):
    """Numba's cache files do not record NUMBA_OPT (the tests run at 0): a process at another
    level compiles its own module rather than load unoptimised machine code."""
    from numba.core import config

    from s2sad import jit

    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path))
    source = "def f(x):\n    return x\n"
    first = jit._module_for(source, "f")
    monkeypatch.setattr(config, "OPT", 3 if int(config.OPT) == 0 else 0)
    second = jit._module_for(source, "f")
    assert first.__name__ != second.__name__


def test_transforming_does_not_format_only_reading_does(monkeypatch, tmp_path):
    """black costs more than the whole transform, so it runs only when the code is read."""
    from s2sad.pipeline import emit

    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path))  # (black's text is kept on disk)
    mod_f = __import__("test_jit").euler
    stage._CACHE.clear()
    calls = []
    real = emit.black.format_str
    monkeypatch.setattr(
        emit.black, "format_str", lambda text, mode: calls.append(text) or real(text, mode=mode)
    )
    emit.format_source.cache_clear()
    g = s2sad.grad(mod_f)
    assert g(0.3, 0.8, 10) == pytest.approx(s2sad.grad(mod_f)(0.3, 0.8, 10))
    assert calls == []
    text = s2sad.source(g, 0.3, 0.8, 10)
    assert len(calls) == 1 and text.startswith("def grad_euler(")


def test_the_disk_cache_key_does_not_depend_on_numba_being_loaded_yet():
    """A process's first jitted gradient is keyed before anything has imported Numba: the key
    must equal the one a later gradient of the same code gets, or a second process compiles
    byte-identical code again under another name (a new user's trial: 56-95 s each)."""
    code = (
        "from s2sad import diskcache\n"
        "before = diskcache.numba_opt()\n"
        "import numba\n"
        "print(before == diskcache.numba_opt(), before)\n"
    )
    env = {**os.environ, "NUMBA_OPT": "3"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "opt=3"]
