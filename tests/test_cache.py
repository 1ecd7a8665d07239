"""The transform cache: reused while nothing it read has changed, rebuilt when something has."""

import importlib
import sys
import textwrap

import numpy as np

import s2sad
from s2sad import compile as stage


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
