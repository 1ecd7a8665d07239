"""The Numba helpers' compiled code on disk (s2sad/helper_cache.py): a second process loads it
from s2sad's cache directory and compiles none of it, nothing is written anywhere else (the
user's own `numba.njit(cache=True)` functions still cache where Numba puts them), two processes
compiling at once agree, a damaged file is compiled again, and another key is another
directory."""

import json
import os
import pickle
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

numba = pytest.importorskip("numba")

from s2sad import helper_cache  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

# a tiny gradient (few helpers: cheap to compile), the same in Python mode, and a user's own
# cached njit function; what compiled and what the helper cache loaded, as one JSON line
_SCRIPT = """
import json, sys
import numba, numpy as np
from numba.core import event
import s2sad
from s2sad import helper_cache
sys.path.insert(0, sys.argv[1])
import user_cached

compiled, loaded = [], []

class Compiles(event.Listener):
    def on_start(self, ev):
        compiled.append(ev.data["dispatcher"].py_func.__module__)

    def on_end(self, ev):
        pass

load = helper_cache.HelperCache.load_overload

def counted(self, sig, target_context):
    result = load(self, sig, target_context)
    loaded.append(result is not None)
    return result

helper_cache.HelperCache.load_overload = counted

def f(x):
    return np.sum(np.tanh(x) * x)

x = np.linspace(-1.0, 1.0, 7)
with event.install_listener("numba:compile", Compiles()):
    jitted = s2sad.grad(f, jit="strict")(x)
print(json.dumps({
    "jit": jitted.tolist(),
    "python": s2sad.grad(f)(x).tolist(),
    "helpers_compiled": sum(m.startswith("s2sad.rules") for m in compiled),
    "helpers_loaded": sum(loaded),
    "user": user_cached.twice(2.0),
}))
"""

_USER = "import numba\n\n\n@numba.njit(cache=True)\ndef twice(x):\n    return 2.0 * x\n"


def _env(tmp: Path) -> dict:
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "S2SAD_CACHE_DIR": str(tmp / "cache"),
        "NUMBA_CACHE_DIR": str(tmp / "numba-own"),  # where the user's cache=True goes
        "HOME": str(tmp / "home"),
        "XDG_CACHE_HOME": str(tmp / "home" / ".cache"),
    }


def _start(tmp: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(tmp / "script.py"), str(tmp / "user")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(tmp),
    )


def _result(process: subprocess.Popen) -> dict:
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    np.testing.assert_allclose(result["jit"], result["python"], rtol=1e-13, atol=0)
    assert result["user"] == 4.0
    return result


def _forget_the_gradient(tmp: Path) -> None:
    """Delete the generated module and its machine code: the next process compiles the gradient
    again, and with it asks for the helpers."""
    cache = tmp / "cache"
    for path in list(cache.glob("s2sad_*.py")) + list((cache / "numba").iterdir()):
        path.unlink()


def _helper_files(tmp: Path) -> list[Path]:
    return sorted((tmp / "cache" / "helpers").rglob("*.nbc"))


@pytest.fixture(scope="module")
def compiled_twice_at_once(tmp_path_factory):
    """Two processes compiling the helpers at once into one empty cache directory."""
    tmp = tmp_path_factory.mktemp("helpers")
    (tmp / "script.py").write_text(_SCRIPT)
    (tmp / "user").mkdir()
    (tmp / "user" / "user_cached.py").write_text(_USER)
    results = [_result(p) for p in [_start(tmp), _start(tmp)]]
    return tmp, results


def test_two_processes_compiling_at_once_keep_the_helpers_in_s2sads_directory(
    compiled_twice_at_once,
):
    tmp, results = compiled_twice_at_once
    assert all(r["helpers_compiled"] > 0 for r in results)
    assert results[0]["jit"] == results[1]["jit"]
    files = _helper_files(tmp)
    assert files and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in files)
    (key_dir,) = {p.parent for p in files}
    assert stat.S_IMODE(key_dir.stat().st_mode) == 0o700
    assert not [p for p in key_dir.iterdir() if "tmp" in p.name]
    # Numba's own files: the user's function where NUMBA_CACHE_DIR says, nothing of s2sad's
    # there, in the home directory or beside s2sad's source
    own = [p.name for p in (tmp / "numba-own").rglob("*.nbi")]
    assert own and all(name.startswith("user_cached.twice") for name in own)
    assert not list((tmp / "home").rglob("*.nb*"))
    assert not list((ROOT / "s2sad").rglob("*.nb[ic]"))


def test_a_second_process_loads_the_helpers_and_compiles_none(compiled_twice_at_once):
    tmp, (first, _) = compiled_twice_at_once
    _forget_the_gradient(tmp)
    before = _helper_files(tmp)
    again = _result(_start(tmp))
    assert again["helpers_compiled"] == 0 and again["helpers_loaded"] > 0
    assert again["jit"] == first["jit"]
    assert _helper_files(tmp) == before


def test_damaged_helper_files_are_compiled_again(compiled_twice_at_once):
    tmp, (first, _) = compiled_twice_at_once
    for i, path in enumerate(_helper_files(tmp)):
        raw = bytearray(path.read_bytes())
        if i % 3 == 0:
            raw = raw[:100]  # cut short
        elif i % 3 == 1:
            raw[-20] ^= 0xFF  # one byte changed
        else:
            raw = b""
        path.write_bytes(bytes(raw))
    _forget_the_gradient(tmp)
    again = _result(_start(tmp))
    assert again["jit"] == first["jit"]
    assert again["helpers_compiled"] > 0 and again["helpers_loaded"] == 0
    _forget_the_gradient(tmp)
    mended = _result(_start(tmp))
    assert mended["helpers_compiled"] == 0 and mended["helpers_loaded"] > 0
    assert mended["jit"] == first["jit"]


# ----------------------------------------------------------------------------- in this process


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_another_key_is_another_directory(cache, monkeypatch):
    first = helper_cache.helpers_dir()
    assert first.parent == cache / "helpers" and first.is_dir()
    monkeypatch.setattr(helper_cache, "forms_fingerprint", lambda: "a form edited")
    edited = helper_cache.helpers_dir()
    monkeypatch.setattr(numba.config, "OPT", 1 if numba.config.OPT != 1 else 2)
    optimised = helper_cache.helpers_dir()
    assert len({first, edited, optimised}) == 3
    assert all(stat.S_IMODE(d.stat().st_mode) == 0o700 for d in (first, edited, optimised))


def test_the_directory_is_checked_once_for_each_setting(cache, monkeypatch):
    first = helper_cache.helpers_dir()
    keyed = []
    monkeypatch.setattr(helper_cache, "helpers_key", lambda: keyed.append(1) or "another key")
    assert helper_cache.helpers_dir() == first and not keyed  # (not for each helper built)
    first.rmdir()
    again = helper_cache.helpers_dir()  # removed: checked and made again
    assert again == cache / "helpers" / "another key" and again.is_dir() and keyed == [1]
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(cache.parent / "elsewhere"))
    assert helper_cache.helpers_dir().parent == cache.parent / "elsewhere" / "helpers"


class _Planted:
    """Unpickling this creates the file `marker`."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_file_is_loaded_only_for_its_own_key_whole_and_private(cache, tmp_path):
    directory = helper_cache.helpers_dir()
    files = helper_cache._Files(directory, "form-1", "flags")
    files.save(("sig", "cpu"), {"code": 1})
    assert files.load(("sig", "cpu")) == {"code": 1}
    assert helper_cache._Files(directory, "form-1", "other flags").load(("sig", "cpu")) is None
    # a file copied under another key's name is not that key's
    files._path(("sig", "cpu")).rename(files._path(("other", "cpu")))
    assert files.load(("other", "cpu")) is None
    # a damaged one is deleted; one others could have written is not unpickled
    files.save(("sig", "cpu"), {"code": 1})
    path = files._path(("sig", "cpu"))
    path.write_bytes(path.read_bytes()[:-3])
    assert files.load(("sig", "cpu")) is None and not path.exists()
    body = pickle.dumps(_Planted(tmp_path / "ran"))
    path.write_bytes(__import__("hashlib").sha256(body).digest() + body)
    path.chmod(0o666)
    assert files.load(("sig", "cpu")) is None and not (tmp_path / "ran").exists()


def test_the_key_follows_the_forms_code_not_what_a_process_did(monkeypatch):
    from s2sad.rules import helpers, reductions

    fingerprint = helpers.forms_fingerprint.__wrapped__
    before = fingerprint()
    __import__("s2sad.numba_helpers")  # binds Numba's names in the forms' modules
    assert fingerprint() == before
    name = next(n for n, v in vars(reductions).items() if hasattr(v, "__code__"))
    monkeypatch.setattr(reductions, name, lambda x: x)  # a form's module edited
    assert fingerprint() != before
    monkeypatch.undo()
    monkeypatch.setattr(reductions, "_S2SAD_TEST_CONSTANT", 2, raising=False)
    assert fingerprint() != before


def test_a_key_naming_an_address_is_not_kept(cache):
    files = helper_cache._Files(helper_cache.helpers_dir(), "form-1", "flags")
    key = ("type(CPUDispatcher(<function f at 0x7f4aeb0ee2a0>))", "cpu")
    files.save(key, {"code": 1})
    assert files.load(key) is None and not list(helper_cache.helpers_dir().iterdir())


def _plus_one(x):
    return x + 1.0


def test_without_numbas_expected_internals_the_helpers_compile_uncached(cache, monkeypatch):
    def moved(*args):
        raise AttributeError("magic_tuple")

    monkeypatch.setattr(helper_cache, "helpers_dir", moved)
    dispatcher = helper_cache._cached_jit(nopython=True)(_plus_one)
    assert dispatcher(1.0) == 2.0 and dispatcher.stats.cache_path is None
    assert not cache.exists()
    # another target's jit (CUDA's) is left as Numba chose it
    assert helper_cache._caching(lambda template: "cuda jit")(None) == "cuda jit"


def test_callers_alike_in_what_a_helper_inherits_share_its_compiled_code(cache):
    """Numba keeps a form's implementation by the caller's whole flags: a gradient with Numba's
    bounds checks and one without compiled each helper twice, to the same code (the checks are
    the caller's own: never the helper's). One compile now, and one file."""
    from numba.core import event

    from s2sad.numba_helpers import broadcast_like

    compiled = []

    class Compiles(event.Listener):
        def on_start(self, ev):
            compiled.append(ev.data["dispatcher"].py_func.__module__)

        def on_end(self, ev):
            pass

    def form(t, x):
        return broadcast_like(t, x)

    plain = numba.njit(error_model="numpy")(form)
    checked = numba.njit(error_model="numpy", boundscheck=True)(form)
    x = np.ones((2, 3), np.int16)  # (argument types no other test gives this form)
    with event.install_listener("numba:compile", Compiles()):
        np.testing.assert_array_equal(plain(np.int16(2), x), np.full((2, 3), 2, np.int16))
        first = [m for m in compiled if m.startswith("s2sad.rules")]
        files = sorted(helper_cache.helpers_dir().iterdir())
        np.testing.assert_array_equal(checked(np.int16(2), x), plain(np.int16(2), x))
    assert first and [m for m in compiled if m.startswith("s2sad.rules")] == first
    assert sorted(helper_cache.helpers_dir().iterdir()) == files
    # (what Numba's code says a compile inherits: read from it, so another Numba is followed)
    assert "error_model" in helper_cache._INHERITED and "boundscheck" not in helper_cache._INHERITED
