"""Jitted transforms kept on disk (s2sad/disk_transforms.py): a new process, or this one with its
transform cache emptied, loads the generated code instead of transforming, and its gradient is
the pipeline's; a stale entry is never used: a changed helper (in another module, rebound, or in
a closure), a registered rule, other s2sad source files, other options or a damaged file each
transform again, while changed data is read at the call. Also the pruning of old cache entries
(s2sad/prune.py) and black's text kept on disk (s2sad/formatted.py)."""

import importlib
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import s2sad
from s2sad import disk_transforms, formatted, helper_cache, prune, transform_cache
from s2sad.rules.registry import VERSION

MODULE = """
import numpy as np
import dt_helpers as h

SCALE = 2.0


def local(x):
    return np.tanh(x) * SCALE


def f(x, y):
    return np.sum(local(x) * h.bump(y) + x * y)


def make(inner):
    def g(x):
        return np.sum(inner(x) * x)

    return g


def square(x):
    return x * x


def scaled(x, p=2.0, k=3):
    return np.sin(x) * p + x**k


def with_defaults(x):
    return np.sum(scaled(x))


def cube(x):
    return x * x * x


def picked(x, y):
    return x[0] * y[1] + np.sum(x * y)
"""

HELPERS = "import numpy as np\n\n\ndef bump(y):\n    return {body}\n"


@pytest.fixture
def mod(tmp_path, monkeypatch):
    """The module above (and its helpers' module), imported from files of this test's own, with
    the disk cache on in a directory of its own."""
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("S2SAD_TRANSFORM_CACHE", "1")
    # rules other tests registered in this process would turn the cache off
    monkeypatch.setattr(disk_transforms, "_RULES", VERSION[0])
    monkeypatch.setattr(disk_transforms, "NAMESPACE", {})
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # (reloads read the text)
    (tmp_path / "dt_helpers.py").write_text(HELPERS.format(body="np.sin(y) * y"))
    (tmp_path / "dt_module.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("dt_module", "dt_helpers"):
        sys.modules.pop(name, None)
    module = importlib.import_module("dt_module")
    yield module
    for name in ("dt_module", "dt_helpers"):
        sys.modules.pop(name, None)
    transform_cache._CACHE.clear()


@pytest.fixture
def transforms(monkeypatch):
    """The functions the pipeline transformed for jit, in order."""
    made = []
    real = transform_cache.differentiate

    def counted(func, wrt, mode, ranks, jit, *args):
        if jit:
            made.append(func.__name__)
        return real(func, wrt, mode, ranks, jit, *args)

    monkeypatch.setattr(transform_cache, "differentiate", counted)
    return made


def jitted_code(f, *args, wrt=(0, 1)):
    """The jitted value_and_grad's transform for `args` (from the caches, as a new process
    would find them: this process's emptied) and what its code returns, run by Python."""
    transform_cache._CACHE.clear()
    g = s2sad.value_and_grad(f, wrt=wrt, jit=True)
    bound = g._bind(args, {})
    compiled, values = g.prepared(bound)
    value, grads = compiled.function(*bound.arguments.values(), *values)
    return compiled, (value, *np.atleast_1d(*grads))


def python_mode(f, *args, wrt=(0, 1)):
    value, grads = s2sad.value_and_grad(f, wrt=wrt)(*args)
    return (value, *np.atleast_1d(*grads))


def same(a, b) -> bool:
    return len(a) == len(b) and all(np.allclose(x, y, rtol=1e-12, atol=0) for x, y in zip(a, b))


X, Y = np.linspace(-1.0, 1.0, 6), np.linspace(0.5, 2.0, 6)


def entries(mod) -> list:
    return sorted(Path(os.environ["S2SAD_CACHE_DIR"], "transforms").glob("*.entry"))


def test_a_kept_transform_is_loaded_and_gives_the_pipelines_numbers(mod, transforms):
    made, first = jitted_code(mod.f, X, Y)
    assert transforms == ["f"] and len(entries(mod)) == 1
    loaded, again = jitted_code(mod.f, X, Y)
    assert transforms == ["f"], "loaded from disk, not transformed"
    assert loaded is not made and loaded.code == made.code
    assert loaded.unfused_code == made.unfused_code and loaded.data_specs == made.data_specs
    assert same(again, first) and same(first, python_mode(mod.f, X, Y))
    # changed data is read at the call, not kept: the loaded transform follows it
    mod.SCALE = -3.0
    assert same(jitted_code(mod.f, X, Y)[1], python_mode(mod.f, X, Y))
    assert transforms == ["f"]


def test_a_loaded_transform_keeps_whether_its_code_indexes(mod, transforms):
    # jit.py compiles code that indexes by integers with Numba's index checks: a loaded transform
    # that forgot it had none got them (Compiled's default), so each new process compiled its
    # gradient again under another module name, with checks the pipeline's had not
    for f, indexes in ((mod.f, False), (mod.picked, True)):
        made, first = jitted_code(f, X, Y)
        loaded, again = jitted_code(f, X, Y)
        assert transforms[-1:] == [f.__name__] and loaded is not made
        assert made.indexed is indexes and loaded.indexed is indexes
        assert same(again, first) and same(first, python_mode(f, X, Y))
    assert transforms == ["f", "picked"]


def test_finite_differences_agree_with_a_loaded_transform(mod):
    jitted_code(mod.f, X, Y)
    _, (value, gx, gy) = jitted_code(mod.f, X, Y)
    eps = 1e-6
    for k in range(len(X)):
        step = np.zeros_like(X)
        step[k] = eps
        dx = (mod.f(X + step, Y) - mod.f(X - step, Y)) / (2 * eps)
        dy = (mod.f(X, Y + step) - mod.f(X, Y - step)) / (2 * eps)
        assert gx[k] == pytest.approx(dx, rel=1e-6) and gy[k] == pytest.approx(dy, rel=1e-6)


def test_a_changed_helper_in_another_module_is_transformed_again(mod, transforms, tmp_path):
    jitted_code(mod.f, X, Y)
    (tmp_path / "dt_helpers.py").write_text(HELPERS.format(body="np.cos(y) * y * 3.0"))
    importlib.reload(sys.modules["dt_helpers"])
    _, numbers = jitted_code(mod.f, X, Y)
    assert transforms == ["f", "f"]
    assert same(numbers, python_mode(mod.f, X, Y))
    assert len(entries(mod)) == 1  # (the entry replaced: one per function and options)


def test_a_changed_module_function_called_on_data_is_transformed_again(mod, transforms, tmp_path):
    """With wrt=0, `h.bump(y)` is not differentiated: the code calls it by a bare name bound to
    the module's function, kept by its path `h.bump` and checked by its code when loaded."""
    jitted_code(mod.f, X, Y, wrt=0)
    assert len(entries(mod)) == 1
    _, numbers = jitted_code(mod.f, X, Y, wrt=0)
    assert transforms == ["f"] and same(numbers, python_mode(mod.f, X, Y, wrt=0))
    (tmp_path / "dt_helpers.py").write_text(HELPERS.format(body="np.cos(y) * y * 3.0"))
    importlib.reload(sys.modules["dt_helpers"])
    _, numbers = jitted_code(mod.f, X, Y, wrt=0)
    assert transforms == ["f", "f"] and same(numbers, python_mode(mod.f, X, Y, wrt=0))


def test_a_rebound_global_function_is_transformed_again(mod, transforms):
    jitted_code(mod.f, X, Y)
    mod.local = mod.cube
    _, numbers = jitted_code(mod.f, X, Y)
    assert transforms == ["f", "f"] and same(numbers, python_mode(mod.f, X, Y))


def test_a_closure_over_another_function_is_transformed_again(mod, transforms):
    by_square, by_cube = mod.make(mod.square), mod.make(mod.cube)
    assert by_square.__code__ is by_cube.__code__
    jitted_code(by_square, X, wrt=0)
    _, numbers = jitted_code(by_cube, X, wrt=0)
    assert transforms == ["g", "g"] and same(numbers, python_mode(by_cube, X, wrt=0))
    _, numbers = jitted_code(mod.make(mod.cube), X, wrt=0)  # a new closure, the same helper
    assert transforms == ["g", "g"] and same(numbers, python_mode(by_cube, X, wrt=0))


def test_a_helpers_changed_literal_default_is_transformed_again(mod, transforms):
    jitted_code(mod.with_defaults, X, wrt=0)
    jitted_code(mod.with_defaults, X, wrt=0)
    assert transforms == ["with_defaults"]  # kept, and loaded
    mod.scaled.__defaults__ = (5.0, 2)
    _, numbers = jitted_code(mod.with_defaults, X, wrt=0)
    assert transforms == ["with_defaults"] * 2
    assert same(numbers, python_mode(mod.with_defaults, X, wrt=0))


def test_a_registered_rule_turns_the_disk_cache_off(mod, transforms):
    jitted_code(mod.f, X, Y)
    before = [p.read_bytes() for p in entries(mod)]

    def opaque(x):
        return x

    s2sad.register_vjp(opaque, lambda dy, y, x: dy)
    jitted_code(mod.f, X, Y)
    assert transforms == ["f", "f"]
    assert [p.read_bytes() for p in entries(mod)] == before  # nor written


def test_other_s2sad_source_or_options_miss(mod, transforms, monkeypatch):
    jitted_code(mod.f, X, Y)
    jitted_code(mod.f, X, Y, wrt=0)  # other options: an entry of their own
    assert transforms == ["f", "f"] and len(entries(mod)) == 2
    monkeypatch.setattr(disk_transforms, "_SOURCE", ["another s2sad"])
    jitted_code(mod.f, X, Y)
    assert transforms == ["f", "f", "f"]
    # a source file changed after s2sad was imported: the process runs other code than the
    # files hold, so nothing is loaded
    monkeypatch.setattr(disk_transforms, "_SOURCE", [])
    monkeypatch.setattr(disk_transforms, "_IMPORTED", 0.0)
    assert disk_transforms._s2sad_source() is None
    jitted_code(mod.f, X, Y)
    assert transforms == ["f", "f", "f", "f"]


def test_a_damaged_entry_is_transformed_again_and_replaced(mod, transforms):
    _, first = jitted_code(mod.f, X, Y)
    (path,) = entries(mod)
    good = path.read_bytes()
    damaged = good[:-40] + b"x" * 40
    path.write_bytes(damaged)
    _, numbers = jitted_code(mod.f, X, Y)
    assert transforms == ["f", "f"] and same(numbers, first)
    # replaced by a whole entry, which the next lookup reads without transforming (its bytes
    # need not equal the first's: marshal writes a shared reference only for an object that
    # has more than one, so the same code may be written otherwise later in a process)
    assert path.read_bytes() != damaged
    _, again = jitted_code(mod.f, X, Y)
    assert transforms == ["f", "f"] and same(again, first)


def test_identities_hold_across_processes_only_for_known_kinds(mod):
    class Local:
        pass

    assert disk_transforms.identity(np.tanh) == ("canonical", "np.tanh")
    assert disk_transforms.identity(np) == ("canonical", "np")
    assert disk_transforms.identity(mod) == ("module", "dt_module")
    assert disk_transforms.identity(s2sad.stop_gradient) == ("canonical", "stop_gradient")
    assert disk_transforms.identity(len) == ("library", "builtins", "len", "")
    assert disk_transforms.identity(s2sad.checkpoint)[:3] == (
        "library",
        "s2sad.checkpointing",
        "checkpoint",
    )
    assert disk_transforms.identity(mod.square)[0] == "function"
    assert disk_transforms.identity(mod.square) != disk_transforms.identity(mod.cube)
    assert disk_transforms.identity(2.0) == ("literal", "float", "2.0")
    assert disk_transforms.identity(-0.0) != disk_transforms.identity(0.0)
    assert disk_transforms.identity(True) != disk_transforms.identity(1)
    assert disk_transforms.identity(Local) is None
    assert disk_transforms.identity(lambda x: x) is None


_SCRIPT = """
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import s2sad
from s2sad import transform_cache
import dt_module

made = []
real = transform_cache.differentiate
transform_cache.differentiate = lambda func, *a: made.append(func.__name__) or real(func, *a)
x, y = np.linspace(-1.0, 1.0, 6), np.linspace(0.5, 2.0, 6)
g = s2sad.value_and_grad(dt_module.f, wrt=(0, 1), jit=True if sys.argv[2] == "True" else "strict")
if sys.argv[2] == "strict":  # Numba compiles the code the first process generated
    from s2sad.pipeline import emit
    emit.black.format_str = None  # and black's text of it is read from disk too
    value, (gx, gy) = g(x, y)
else:  # the transform, and black's text as jit.Jitted.load asks for it, kept
    g.prepared(g._bind((x, y), {}))[0].formatted_source(on_disk=True)
    value, gx, gy = 0.0, x, y
print(json.dumps({"made": made, "numbers": [float(value), gx.tolist(), gy.tolist()]}))
"""


def test_a_new_process_loads_the_transform_and_numba_runs_it(mod, tmp_path):
    def run(jit: str) -> dict:
        out = subprocess.run(
            [sys.executable, "-c", _SCRIPT, str(tmp_path), jit],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(Path(s2sad.__file__).parents[1])},
            timeout=300,
        )
        assert out.returncode == 0, out.stderr
        return __import__("json").loads(out.stdout)

    assert run("True")["made"] == ["f"]
    second = run("strict")
    assert second["made"] == []
    value, gx, gy = python_mode(mod.f, X, Y)
    assert second["numbers"][0] == pytest.approx(value, rel=1e-12)
    assert np.allclose(second["numbers"][1], gx, rtol=1e-12, atol=0)
    assert np.allclose(second["numbers"][2], gy, rtol=1e-12, atol=0)


def _age(path: Path, days: float) -> None:
    then = time.time() - days * 86400
    os.utime(path, (then, then))


def test_old_helper_directories_of_other_keys_are_pruned(tmp_path, monkeypatch):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(prune, "_SEEN", set())
    root = tmp_path / "helpers"
    root.mkdir(parents=True, mode=0o700)
    old, recent = root / "old-key", root / "recent-key"
    for d in (old, recent):
        d.mkdir(mode=0o700)
        (d / "form.nbc").write_bytes(b"code")
    _age(old, prune.KEEP_DAYS + 1)
    _age(recent, prune.KEEP_DAYS - 1)
    monkeypatch.setattr(helper_cache, "_DIRS", {})
    current = helper_cache.helpers_dir()
    _age(current, prune.KEEP_DAYS + 5)  # an old directory of this key is still this key's
    monkeypatch.setattr(prune, "_SEEN", set())
    monkeypatch.setattr(helper_cache, "_DIRS", {})  # (as a new process)
    assert helper_cache.helpers_dir() == current
    assert sorted(p.name for p in root.iterdir()) == sorted([current.name, "recent-key"])
    assert time.time() - current.stat().st_mtime < 60  # marked used


def test_old_files_are_pruned_once_a_process(tmp_path, monkeypatch):
    monkeypatch.setattr(prune, "_SEEN", set())
    old, recent = tmp_path / "a.entry", tmp_path / "b.entry"
    for p in (old, recent):
        p.write_bytes(b"x")
    _age(old, prune.KEEP_DAYS + 1)
    prune.prune_files(tmp_path, ".entry")
    assert not old.exists() and recent.exists()
    _age(recent, prune.KEEP_DAYS + 1)
    prune.prune_files(tmp_path, ".entry")  # (looked through already)
    assert recent.exists()


def test_blacks_text_is_read_back_from_disk(tmp_path, monkeypatch):
    from s2sad.pipeline import emit

    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path))
    code = "def f(x):\n  return (x+1)\n"
    text = formatted.formatted(code)
    assert text == "def f(x):\n    return x + 1\n"
    emit.format_source.cache_clear()
    monkeypatch.setattr(emit.black, "format_str", None)  # black is not called again
    assert formatted.formatted(code) == text
    (path,) = (tmp_path / "formatted").glob("*.py")
    path.write_bytes(path.read_bytes().replace(b"x + 1", b"x + 2"))  # damaged: formatted again
    monkeypatch.undo()
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path))
    assert formatted.formatted(code) == text and path.read_bytes().endswith(b"x + 1\n")
