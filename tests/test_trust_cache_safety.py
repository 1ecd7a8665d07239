"""The disk cache loads only what this user's s2sad wrote; files are written whole, privately and
never through a link; names pasted into generated code cannot break out of it; emitted modules
run; first calls from many threads work; every Numba failure falls back naming the transform."""

import contextlib
import importlib.util
import io
import os
import pickle
import stat
import subprocess
import sys
import types
import warnings
from pathlib import Path

import numpy as np
import pytest

import s2sad
from s2sad import cli, diskcache, jit, numba_failures
from s2sad.jit import CacheWarning, JitError, JitFallbackWarning
from s2sad.callee_fingerprint import callees_fingerprint
from s2sad.transform_cache import _CACHE
from conftest import load_module

numba = pytest.importorskip("numba")
pytestmark = pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaWarning")

ROOT = Path(__file__).resolve().parent.parent
SOURCE = "def f(x):\n    return x * 2.0\n"


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    path = tmp_path / "cache"
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(path))
    for name in [n for n in sys.modules if n.startswith("s2sad_f_")]:
        del sys.modules[name]  # SOURCE's module, loaded by an earlier test from its own cache
    return path


_module = load_module


class _Planted:
    """Unpickling this creates the file `marker`: proof that a planted pickle ran."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


# ----------------------------------------------------------------------------- what is loaded


def test_cache_directories_are_0700_and_files_0600_with_no_temporary_left(cache):
    out = s2sad.grad(lambda_free_square, jit="strict")(np.arange(3.0))
    np.testing.assert_allclose(out, 2 * np.arange(3.0))
    assert _mode(cache) == 0o700 and _mode(cache / "numba") == 0o700
    module = jit._module_for(SOURCE, "f")
    module.f._cache._cache_file._save_index({})  # Numba's index, as its cache writes it
    files = [p for p in cache.rglob("*") if p.is_file()]
    assert any(p.suffix == ".nbi" for p in files) and all(_mode(p) == 0o600 for p in files)
    assert not [p for p in cache.rglob("*") if "tmp" in p.name]


_TWICE = """
import numpy as np, s2sad

def cached_twice(x):
    return np.sum(np.tanh(x) ** 2)

g = s2sad.grad(cached_twice, jit="strict")
print(g(np.linspace(0.0, 1.0, 4)).tolist())
dispatcher = g.compiled.jitted.namespace[g.compiled.name]
print(sum(dispatcher.stats.cache_hits.values()))
"""


def test_the_checked_cache_still_serves_a_second_process(tmp_path):
    (tmp_path / "twice.py").write_text(_TWICE)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "S2SAD_CACHE_DIR": str(tmp_path / "cache"),
        "NUMBA_OPT": "3",  # at -O0 Numba declines to cache some functions
    }
    runs = [
        subprocess.run(
            [sys.executable, str(tmp_path / "twice.py")],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
        for _ in range(2)
    ]
    assert all(r.returncode == 0 for r in runs), runs[-1].stderr
    (value1, hits1), (value2, hits2) = (r.stdout.split("\n")[:2] for r in runs)
    assert value1 == value2 and hits1 == "0" and hits2 == "1"


def lambda_free_square(x):
    return np.sum(x * x)


def test_a_planted_pyc_beside_the_module_is_never_run(cache, tmp_path):
    module = jit._module_for(SOURCE, "f")
    path = Path(module.__file__)
    marker = tmp_path / "pyc-ran"
    evil = compile(f"open({str(marker)!r}, 'w').close()\n" + SOURCE, str(path), "exec")
    st = path.stat()
    from importlib import _bootstrap_external

    pyc = Path(importlib.util.cache_from_source(str(path)))
    pyc.parent.mkdir(exist_ok=True)
    pyc.write_bytes(_bootstrap_external._code_to_timestamp_pyc(evil, st.st_mtime, st.st_size))
    del sys.modules[module.__name__]
    again = jit._module_for(SOURCE, "f")
    assert not marker.exists()
    assert again.f(1.5) == 3.0


def _index_path(module) -> Path:
    return Path(module.f._cache._cache_file._index_path)


@pytest.mark.parametrize("how", ["writable by others", "owned by someone else"])
def test_a_planted_numba_index_is_never_unpickled(cache, tmp_path, how, monkeypatch):
    module = jit._module_for(SOURCE, "f")
    index = _index_path(module)
    marker = tmp_path / "pickle-ran"
    index.write_bytes(pickle.dumps(_Planted(marker)))
    if how == "writable by others":
        index.chmod(0o666)
    elif os.geteuid() == 0:
        os.chown(index, 12345, 12345)
    else:
        monkeypatch.setattr(diskcache, "_me", lambda: os.geteuid() + 1)
    assert module.f(1.5) == 3.0
    assert not marker.exists()


@pytest.mark.parametrize("how", ["group-writable", "foreign", "foreign (simulated)"])
def test_a_cache_directory_others_can_write_is_not_used(cache, tmp_path, how, monkeypatch):
    module = jit._module_for(SOURCE, "f")  # as if written by this user earlier...
    index = _index_path(module)
    marker = tmp_path / "pickle-ran"
    index.write_bytes(pickle.dumps(_Planted(marker)))  # ...but then anyone could plant this
    del sys.modules[module.__name__]
    if how == "group-writable":
        cache.chmod(0o775)
        expected = "writable by group or others"
    elif how == "foreign":
        if os.geteuid() != 0:
            pytest.skip("only root can give a directory away")
        os.chown(cache, 12345, 12345)
        expected = "owned by uid 12345"
    else:
        monkeypatch.setattr(diskcache, "_me", lambda: os.geteuid() + 1)
        expected = "owned by uid"
    before = sorted(p.name for p in cache.rglob("*"))
    diskcache._PRIVATE.clear()
    with pytest.warns(CacheWarning, match=expected):
        again = jit._module_for(SOURCE, "f")
    assert again.f(1.5) == 3.0
    assert not marker.exists()
    assert sorted(p.name for p in cache.rglob("*")) == before  # nothing written there either
    assert Path(again.__file__).parent != cache


def test_a_link_at_a_predictable_temporary_name_is_not_written_through(cache, tmp_path):
    """Writers once used `<module>.tmp<pid>`: another user could put a link there."""
    module = jit._module_for(SOURCE, "f")
    path = Path(module.__file__)
    del sys.modules[module.__name__]
    path.unlink()
    victim = tmp_path / "victim"
    victim.write_text("precious")
    for name in (path.with_suffix(f".tmp{os.getpid()}"), path.with_name(path.name + ".tmp")):
        name.symlink_to(victim)
    jit._module_for(SOURCE, "f")
    assert victim.read_text() == "precious"
    assert path.read_text().endswith(
        'f = njit(cache=True, error_model="numpy", boundscheck=True)(_f_py)\n'
    )
    assert _mode(path) == 0o600


# ----------------------------------------------------------------------------- first calls


_THREADS = """
import threading, numpy as np, s2sad

def shared_first_call(x, y):
    return np.sum(np.sin(x) * y + x**2)

x, y = np.linspace(-1.0, 1.0, 5), 0.7
expected = s2sad.grad(shared_first_call, wrt=(0, 1))(x, y)
g = s2sad.grad(shared_first_call, wrt=(0, 1), jit="strict")
barrier, results = threading.Barrier(8), []

def first_call():
    barrier.wait()
    try:
        results.append(g(x, y))
    except Exception as exc:
        results.append(exc)

threads = [threading.Thread(target=first_call) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
for got in results + [g(x, y)]:
    assert not isinstance(got, Exception), repr(got)
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-12)
    assert abs(got[1] - expected[1]) <= 1e-12 * abs(expected[1])
print(len(results))
"""


def test_eight_threads_making_the_first_call_all_get_the_gradient(tmp_path):
    """In a new process: the first call there also imports and compiles the Numba helpers."""
    (tmp_path / "threads.py").write_text(_THREADS)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "S2SAD_CACHE_DIR": str(tmp_path / "cache")}
    result = subprocess.run(
        [sys.executable, str(tmp_path / "threads.py")],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0 and result.stdout.strip() == "8", result.stderr


# ----------------------------------------------------------------------------- Numba failures


def format_print(x):
    print("x[0] = {:.3f}".format(x[0]))  # (an f-string's print is dropped from jitted code)
    return np.sum(x**2)


HALF = np.ones(3, dtype=np.float16)


def float16_global(x):
    return np.sum(x**2) * HALF[0]


@pytest.mark.parametrize("func", [format_print, float16_global])
def test_every_numba_failure_falls_back_naming_the_transform(func, capsys):
    x = np.array([0.5, -1.0, 2.0])
    expected = s2sad.grad(func)(x)
    with pytest.warns(JitFallbackWarning, match=rf"s2sad\.grad\({func.__name__}, jit=True\)"):
        got = s2sad.grad(func, jit=True)(x)
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    with pytest.raises(JitError, match=rf"s2sad\.grad\({func.__name__}, jit='strict'\)"):
        s2sad.grad(func, jit="strict")(x)


def test_the_fallback_warning_points_at_the_users_call():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s2sad.grad(format_print, jit=True)(np.ones(2))
    (warning,) = [w for w in caught if w.category is JitFallbackWarning]
    assert warning.filename == __file__


def test_failures_inside_numba_are_compile_failures_and_the_codes_own_errors_are_not():
    @numba.njit
    def lowers_float16():
        return HALF[0]

    @numba.njit
    def raises(x):
        if x > 0:
            raise ValueError("the compiled code's own error")
        return x

    with pytest.raises(NotImplementedError) as inside:
        lowers_float16()
    with pytest.raises(ValueError) as own:
        raises(1.0)
    assert numba_failures.is_numba_error(inside.value)
    assert not numba_failures.is_numba_error(own.value)


def reshaped_transpose(x):
    return np.sum(np.tanh(x.T.reshape(2, 3)))


def test_numbas_run_time_refusal_falls_back_to_python():
    """Numba's compiled reshape of a non-contiguous array raises NotImplementedError as it runs
    (fuzz seed 251911): jit=True warns and gives Python mode's numbers instead of the error."""
    x = np.arange(6.0).reshape(2, 3) / 10
    expected = s2sad.grad(reshaped_transpose)(x)
    with pytest.warns(JitFallbackWarning, match="incompatible shape"):
        got = s2sad.grad(reshaped_transpose, jit=True)(x)
    np.testing.assert_allclose(got, expected, rtol=1e-12)


@pytest.mark.parametrize("length", [80, 240])
def test_long_function_names_keep_cache_file_names_short(tmp_path, cache, length):
    name = "loss_" + "x" * (length - 5)
    module = _module(
        tmp_path,
        f"long_{length}",
        f"""
        import numpy as np
        def {name}(x):
            return np.sum(x ** 3)
        """,
    )
    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(s2sad.grad(getattr(module, name), jit="strict")(x), 3 * x**2)
    out, pullback = s2sad.vjp(getattr(module, name), jit="strict")(x)
    np.testing.assert_allclose(pullback(1.0), 3 * x**2)
    assert max(len(p.name) for p in cache.rglob("*")) <= 160


# ----------------------------------------------------------------------------- names in code

WEIRD = ['we"""ird\\Uname\\x.py', 'evil"""+str(open(\'MARK\',\'w\'))+""".py']


@pytest.mark.parametrize("file_name", WEIRD)
def test_a_file_name_cannot_break_or_inject_into_generated_code(tmp_path, monkeypatch, file_name):
    monkeypatch.chdir(tmp_path)
    module = _module(
        tmp_path,
        f"weird_{WEIRD.index(file_name)}",
        """
        import numpy as np
        def f(x):
            return np.sum(x ** 2)
        """,
        file_name,
    )
    x = np.array([1.0, 2.0])
    for jitted in (False, "strict"):
        np.testing.assert_allclose(s2sad.grad(module.f, jit=jitted)(x), 2 * x)
    np.testing.assert_allclose(s2sad.jvp(module.f)(x, tangent=np.ones(2))[1], 6.0)
    result = _cli("emit", f"{tmp_path / file_name}:f", "-o", "out.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    generated = _load(tmp_path / "out.py")
    np.testing.assert_allclose(generated.grad_f(x), 2 * x)
    assert file_name in generated.__doc__ and file_name in generated.grad_f.__doc__
    assert not (tmp_path / "MARK").exists()


# ----------------------------------------------------------------------------- s2sad emit


def _cli(*args, cwd=ROOT):
    """`python -m s2sad ARGS` in `cwd`: its exit status and what it wrote to stderr. Run in this
    process (a new one would spend most of its time importing), as a new process would: the
    user's modules an earlier `emit` imported and the transforms made so far are put aside, and
    the ones this run makes dropped. (The transforms too: one of a function of the same code
    from another file would be served, its docstring naming that file.)"""
    saved = {name: sys.modules.pop(name) for name in list(sys.modules) if _cli_module(name)}
    transforms = dict(_CACHE)
    _CACHE.clear()
    stderr, here = io.StringIO(), os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stderr(stderr):
            returncode = cli.main(list(args))
    finally:
        os.chdir(here)
        for name in [name for name in sys.modules if _cli_module(name)]:
            del sys.modules[name]
        sys.modules.update(saved)
        _CACHE.clear()
        _CACHE.update(transforms)
    return types.SimpleNamespace(returncode=returncode, stderr=stderr.getvalue())


def _cli_module(name: str) -> bool:
    return name.startswith("_s2sad_cli_")  # a user's module, as s2sad.cli imports it


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"emitted_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


EXAMPLE = """
import numpy as np
import s2sad

CAP = float("inf")
FLOOR = np.array([-np.inf, 0.0, np.nan])
SCALE = 3.0


def capped(x):
    return np.sum(np.minimum(x, CAP) ** 2) + np.sum(np.nan_to_num(FLOOR) * x)


@s2sad.custom_vjp
def scaled_square(x):
    return SCALE * x * x


@scaled_square.defvjp
def scaled_square_vjp(g, ans, x):
    return g * 2.0 * SCALE * x


def with_rule(x):
    return np.sum(scaled_square(x))
"""


@pytest.mark.parametrize("name", ["capped", "with_rule"])
def test_emitted_modules_with_infinite_constants_and_a_rules_globals_run(tmp_path, name):
    (tmp_path / "example.py").write_text(EXAMPLE)
    out = tmp_path / "out.py"
    result = _cli("emit", f"{tmp_path / 'example.py'}:{name}", "-o", str(out))
    assert result.returncode == 0, result.stderr
    x = np.array([0.5, -1.0, 2.0])
    example = _module(tmp_path, "example_again", EXAMPLE)
    expected = s2sad.grad(getattr(example, name))(x)
    np.testing.assert_allclose(getattr(_load(out), f"grad_{name}")(x), expected, rtol=1e-12)
    # the jitted module runs too: its data parameters default to constants defined before them
    jit_out = tmp_path / "jit_out.py"
    jitted = _cli("emit", f"{tmp_path / 'example.py'}:{name}", "--jit", "-o", str(jit_out))
    assert jitted.returncode == 0, jitted.stderr
    if name == "capped":  # (a custom_vjp rule is a Python function Numba cannot call)
        np.testing.assert_allclose(getattr(_load(jit_out), f"grad_{name}")(x), expected, rtol=1e-12)


def test_emit_refuses_a_module_that_would_not_run():
    from s2sad.standalone import check_module

    with pytest.raises(s2sad.S2SADError, match="would read inf"):
        check_module("C = inf\ndef f(x):\n    return x * C\n", "f")
    with pytest.raises(s2sad.S2SADError, match="would read SCALE"):
        check_module("def f(x):\n    return x * SCALE\n", "f")
    assert check_module("C = 1.0\ndef f(x):\n    return x * C + len([x])\n", "f")


def _emit_to(tmp_path, out):
    return _cli("emit", "examples/mlp.py:loss", "--wrt", "W1", "-o", str(out))


def test_emit_replaces_a_link_instead_of_writing_through_it(tmp_path, monkeypatch):
    target = tmp_path / "target.txt"
    target.write_text("not yours")
    out = tmp_path / "out.py"
    out.symlink_to(target)
    Path(f"{out}.tmp{os.getpid()}").symlink_to(target)  # where emit once wrote first
    monkeypatch.chdir(ROOT)
    assert cli.main(["emit", "examples/mlp.py:loss", "--wrt", "W1", "-o", str(out)]) == 0
    assert target.read_text() == "not yours"
    assert not out.is_symlink() and "def grad_loss(" in out.read_text()


def test_emit_keeps_an_existing_files_mode(tmp_path):
    out = tmp_path / "out.py"
    out.write_text("old")
    out.chmod(0o600)
    assert _emit_to(tmp_path, out).returncode == 0
    assert _mode(out) == 0o600 and "def grad_loss(" in out.read_text()


def test_emit_to_a_directory_names_the_file_and_a_missing_one_is_an_error(tmp_path):
    result = _emit_to(tmp_path, tmp_path)  # (an existing directory: the module under its name)
    assert result.returncode == 0, result.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["mlp_loss_grad.py"]
    missing = _emit_to(tmp_path, tmp_path / "no" / "out.py")
    assert missing.returncode == 1 and "cannot write" in missing.stderr
    assert "Traceback" not in missing.stderr
    assert not [p for p in ROOT.iterdir() if ".tmp" in p.name]


def test_a_crafted_function_name_or_argname_never_becomes_code(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    class Crafted:
        __name__ = "x(0); open('MARK', 'w'); y"

        def __call__(self, v):
            return v * 3.0

    crafted = Crafted()
    s2sad.register_vjp(crafted, lambda g, ans, v: g * 3.0, argnames=("v",))
    module = _module(
        tmp_path,
        "uses_crafted",
        """
        import numpy as np
        def f(x):
            return np.sum(crafted(x))
        """,
    )
    module.crafted = crafted
    np.testing.assert_allclose(s2sad.grad(module.f)(np.ones(2)), [3.0, 3.0])
    assert not (tmp_path / "MARK").exists()
    with pytest.raises(s2sad.S2SADError, match="argnames must be parameter names"):
        s2sad.register_vjp(np.cbrt, lambda g, ans, v: g, argnames=("v); open('MARK', 'w'",))


def test_an_inlined_helpers_renamed_function_name_never_becomes_code(tmp_path):
    module = _module(
        tmp_path,
        "renamed_helper",
        """
        import numpy as np
        W = np.array([1.0, 2.0])
        def helper(v, w=W):
            return v * w
        helper.__name__ = "x = 1\\nopen('MARK', 'w')\\ny"
        def f(x):
            return np.sum(helper(x) ** 2)
        """,
    )
    x = np.array([0.5, -1.0])
    np.testing.assert_allclose(s2sad.grad(module.f)(x), 2 * x * module.W**2)


def test_a_compiled_helper_read_through_a_users_module_is_in_the_fingerprint():
    """`userh.h(3.0)` in the function: Numba freezes `h` into the generated module's machine
    code, and its disk cache would keep it after `h` is edited (a stale value in a new process):
    the module's name hashes the code of the compiled functions a user's module holds."""
    import types

    def made(body: str):
        module = types.ModuleType("userh")
        exec(f"import numba\n@numba.njit\ndef h(v):\n    return {body}\n", vars(module))
        return module

    twice, five_times = made("v * 2.0"), made("v * 5.0")
    assert callees_fingerprint({"userh": twice}) == callees_fingerprint({"userh": made("v * 2.0")})
    assert callees_fingerprint({"userh": twice}) != callees_fingerprint({"userh": five_times})
    assert callees_fingerprint({"np": np}) == callees_fingerprint({"np": np})


def test_the_fingerprint_of_equal_code_does_not_depend_on_reference_counts():
    """Two compilations of one source (a process that made a transform, one that loaded it from
    disk): marshal's bytes differ where a constant or name is referenced more often, which
    named the generated module differently and compiled it again in every other process."""
    text = "def f(x):\n    y = x * 2.5\n    return y + len('abc')\n"
    first, second = {}, {}
    exec(compile(text, "m.py", "exec"), first)
    exec(compile(text, "m.py", "exec"), second)
    held = [first["f"].__code__.co_names] * 5  # more references to one copy's names
    assert callees_fingerprint({"f": first["f"]}) == callees_fingerprint({"f": second["f"]})
    assert held and callees_fingerprint({"f": first["f"]}) != callees_fingerprint(
        {"f": _made_other()}
    )


def _made_other():
    namespace = {}
    exec(compile("def f(x):\n    return x * 3.5\n", "m.py", "exec"), namespace)
    return namespace["f"]


@pytest.mark.parametrize(
    "case",
    [
        (
            "def make(c, d):\n    @numba.njit\n    def h(v):\n        return v * c\n    return h\n"
            "h = make(2.0, 5.0)\n",
            "v * c",
            "v * d",
        ),
        ("@numba.njit\ndef h(*v):\n    return len(v) * 2.0\n", "(*v)", "(v)"),
        ("@numba.njit\ndef h(v, c=2.0):\n    return v * c\n", "c=2.0", "c=5.0"),
        ("K = 2.0\n@numba.njit\ndef h(v):\n    return v * K\n", "K = 2.0", "K = 5.0"),
        (
            "@numba.njit\ndef g(v):\n    return v * 2.0\n@numba.njit\ndef h(v):\n    return g(v)\n",
            "v * 2.0",
            "v * 5.0",
        ),
        (
            "def make(c):\n    @numba.njit\n    def h(v):\n        return v * c\n    return h\n"
            "h = make(2.0)\n",
            "make(2.0)",
            "make(5.0)",
        ),
        ("W = np.ones(3)\n@numba.njit\ndef h(v):\n    return v * W[0]\n", "np.ones", "np.zeros"),
    ],
    ids=["free-variable", "signature", "default", "global", "callee", "closure", "array"],
)
def test_the_fingerprint_sees_what_numba_freezes_from_a_callee(case):
    """Numba freezes a callee's defaults, closure values, globals and callees into the machine
    code its disk cache keeps: each edit must name a new module (break-it review: each gave the
    old gradient in a new process)."""
    text, old, new = case
    assert old in text

    def made(source):
        namespace = {"numba": numba, "np": np}
        exec(compile(source, "m.py", "exec"), namespace)
        return namespace["h"]

    assert callees_fingerprint({"h": made(text)}) == callees_fingerprint({"h": made(text)})
    assert callees_fingerprint({"h": made(text)}) != callees_fingerprint(
        {"h": made(text.replace(old, new))}
    )
