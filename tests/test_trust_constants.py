"""What generated code trusts about the user's globals, closures and helpers (issue #13, classes
1, 9 and 10, and the transform cache's memory): data is read at every call, in Python and jitted
mode alike; functions are checked; a source file edited after import is refused."""

import gc
import importlib
import os
import subprocess
import sys
import textwrap
import weakref
from pathlib import Path

import numpy as np
import pytest

import s2sad
from s2sad import transform_cache as stage
from s2sad import SourceChangedError

numba = pytest.importorskip("numba")
pytestmark = pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaWarning")

MODES = [False, "strict"]  # strict: a Numba failure is an error, not a silent Python fallback
ROOT = Path(__file__).parent.parent


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))


def _module(directory, name, text):
    """Import `text` as module `name` from a file in `directory` (a fresh import each time)."""
    path = Path(directory) / f"{name}.py"
    path.write_text(textwrap.dedent(text))
    sys.path.insert(0, str(directory))
    try:
        sys.modules.pop(name, None)
        importlib.invalidate_caches()
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(directory))


def _reload(directory, module):
    sys.path.insert(0, str(directory))
    try:
        return importlib.reload(module)
    finally:
        sys.path.remove(str(directory))


def make(k):
    def loss(x):
        return k * np.sum(x**2)

    return loss


@pytest.mark.parametrize("jit", MODES)
def test_three_closures_of_one_factory_get_their_own_constant(jit):
    x = np.array([1.0, -2.0, 3.0])
    for k in (1.0, 10.0, 100.0):
        np.testing.assert_array_equal(s2sad.grad(make(k), jit=jit)(x), 2 * k * x)
    for k in (100.0, 1.0):  # and again, in another order, the transform already cached
        np.testing.assert_array_equal(s2sad.grad(make(k), jit=jit)(x), 2 * k * x)


@pytest.mark.parametrize("jit", MODES)
def test_a_new_closure_per_batch_reuses_one_transform(jit):
    x = np.array([1.0, 2.0])
    for k in range(1, 6):
        np.testing.assert_array_equal(s2sad.grad(make(float(k)), jit=jit)(x), 2 * k * x)
    mode = "checked_grad" if jit else "grad"
    keys = [key for key in stage._CACHE if key[0] is make(1.0).__code__ and key[3] == mode]
    assert len(keys) == 1 and len(stage._CACHE[keys[0]]) == 1


@pytest.mark.parametrize("jit", MODES)
def test_module_global_changed_after_the_first_call(tmp_path, jit):
    mod = _module(
        tmp_path,
        f"trust_global_{bool(jit)}",
        """
        import numpy as np
        SCALE = 2.0
        W = np.array([1.0, 1.0])
        def f(x):
            return SCALE * np.sum(W * x ** 2)
        """,
    )
    x = np.array([1.0, 2.0])
    g = s2sad.grad(mod.f, jit=jit)
    np.testing.assert_array_equal(g(x), 4 * x)
    mod.SCALE = 5.0  # rebinding the name
    np.testing.assert_array_equal(g(x), 10 * x)
    mod.W[:] = 3.0  # writing into the array the code reads
    np.testing.assert_array_equal(g(x), 30 * x)
    mod.W = np.array([0.5, 2.0])
    np.testing.assert_array_equal(g(x), 5 * 2 * mod.W * x)
    np.testing.assert_array_equal(s2sad.grad(mod.f, jit=jit)(x), 5 * 2 * mod.W * x)


@pytest.mark.parametrize("jit", MODES)
def test_a_module_constant_read_through_an_attribute(tmp_path, jit):
    _module(tmp_path, f"trust_config_{bool(jit)}", "LR = 3.0\n")
    mod = _module(
        tmp_path,
        f"trust_user_{bool(jit)}",
        f"""
        import numpy as np
        import trust_config_{bool(jit)} as config
        def f(x):
            return config.LR * np.sum(x ** 2)
        """,
    )
    x = np.array([1.0, 2.0])
    g = s2sad.grad(mod.f, jit=jit)
    np.testing.assert_array_equal(g(x), 6 * x)
    mod.config.LR = 0.5
    np.testing.assert_array_equal(g(x), 1 * x)


@pytest.mark.parametrize("jit", MODES)
def test_helper_in_another_module_reads_its_own_scope_at_each_call(tmp_path, jit):
    tag = "jit" if jit else "py"
    helpers = _module(
        tmp_path,
        f"trust_helpers_{tag}",
        """
        import numpy as np
        C = 2.0

        def make(k):
            def scaled(x):
                return k * x

            def set_k(value):
                nonlocal k
                k = value

            return scaled, set_k

        scaled, set_k = make(3.0)

        def with_global(x):
            return C * x

        def with_default(x, s=5.0, w=np.array([1.0, 1.0])):
            return s * w * x
        """,
    )
    mod = _module(
        tmp_path,
        f"trust_main_{tag}",
        f"""
        import numpy as np
        import trust_helpers_{tag} as h
        def loss(x):
            return np.sum(h.with_global(x) + h.scaled(x) + h.with_default(x))
        """,
    )
    x = np.array([1.0, 2.0])
    g = s2sad.grad(mod.loss, jit=jit)
    np.testing.assert_array_equal(g(x), [2.0 + 3.0 + 5.0] * 2)
    helpers.C = 20.0  # the helper's module global
    helpers.set_k(30.0)  # the helper's closure cell
    helpers.with_default.__defaults__ = (50.0, np.array([1.0, 2.0]))  # its defaults
    expected = np.array([20.0 + 30.0 + 50.0, 20.0 + 30.0 + 100.0])
    np.testing.assert_array_equal(g(x), expected)
    np.testing.assert_array_equal(s2sad.grad(mod.loss, jit=jit)(x), expected)
    helpers.with_default.__defaults__[1][:] = 0.0  # writing into a default array
    np.testing.assert_array_equal(g(x), [50.0, 50.0])


@pytest.mark.parametrize("jit", MODES)
def test_helper_redefined_in_its_module_is_transformed_again(tmp_path, jit):
    tag = "jit" if jit else "py"
    helpers = _module(tmp_path, f"trust_redef_h_{tag}", "def act(x):\n    return 2.0 * x\n")
    mod = _module(
        tmp_path,
        f"trust_redef_main_{tag}",
        f"""
        import numpy as np
        import trust_redef_h_{tag} as h
        def loss(x):
            return np.sum(h.act(x))
        """,
    )
    x = np.array([1.0, 2.0])
    g = s2sad.grad(mod.loss, jit=jit)
    np.testing.assert_array_equal(g(x), [2.0, 2.0])
    path = Path(helpers.__file__)
    path.write_text("def act(x):\n    return 7.0 * x * x\n")
    os.utime(path, (path.stat().st_atime, path.stat().st_mtime + 5))
    _reload(tmp_path, helpers)
    np.testing.assert_array_equal(g(x), 14.0 * x)


def test_source_edited_after_import_is_refused(tmp_path):
    mod = _module(
        tmp_path,
        "trust_edited",
        """
        import numpy as np
        def f(x):
            return np.sum(x ** 2)
        """,
    )
    x = np.array([1.0, 2.0])
    path = Path(mod.__file__)
    path.write_text(path.read_text().replace("np.sum(x ** 2)", "np.sum(3.0 * x ** 3)"))
    os.utime(path, (path.stat().st_atime, path.stat().st_mtime + 5))
    with pytest.raises(SourceChangedError, match="reload the module") as info:
        s2sad.grad(mod.f)(x)
    assert "trust_edited.py" in str(info.value) and "f" in str(info.value)
    # what Python runs is still x ** 2; after a reload both agree again
    np.testing.assert_array_equal(mod.f(x), 5.0)
    _reload(tmp_path, mod)
    np.testing.assert_array_equal(s2sad.grad(mod.f)(x), 9.0 * x**2)


def test_helper_source_edited_after_import_is_refused(tmp_path):
    helper = _module(tmp_path, "trust_edited_h", "def act(x):\n    return 2.0 * x\n")
    mod = _module(
        tmp_path,
        "trust_edited_main",
        """
        import numpy as np
        from trust_edited_h import act
        def loss(x):
            return np.sum(act(x))
        """,
    )
    path = Path(helper.__file__)
    path.write_text("def act(x):\n    return 20.0 * x * x\n")
    os.utime(path, (path.stat().st_atime, path.stat().st_mtime + 5))
    with pytest.raises(SourceChangedError, match="act"):
        s2sad.grad(mod.loss)(np.array([1.0, 2.0]))


def test_closures_and_nested_functions_are_not_mistaken_for_edited_source():
    def outer(a):
        b = 2.0

        def inner(x):
            return a * b * np.sum(x**2)

        return inner

    x = np.array([1.0, 2.0])
    np.testing.assert_array_equal(s2sad.grad(outer(3.0))(x), 12.0 * x)


_PROCESS = """
import sys
sys.path.insert(0, {root!r})
sys.path.insert(0, {project!r})
import numpy as np
import s2sad
import model
print(repr(s2sad.grad(model.loss, jit="strict")(np.array([1.0, 2.0])).tolist()))
"""


def _gradient_in_a_new_process(tmp_path, project) -> str:
    """`s2sad.grad(model.loss, jit="strict")` at [1, 2] in a fresh Python, sharing one cache
    directory with the other calls (-O3: at -O0 Numba declines to cache some functions on
    disk, see conftest.py)."""
    env = {**os.environ, "S2SAD_CACHE_DIR": str(tmp_path / "shared"), "NUMBA_OPT": "3"}
    code = _PROCESS.format(root=str(ROOT), project=str(project))
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


def test_two_processes_share_a_cache_with_the_same_text_and_other_constants(tmp_path):
    """Two projects with the same function text and another constant, one cache directory: the
    second process must not load the first one's constant from Numba's disk cache."""
    results = []
    for k in (1.0, 10.0):
        project = tmp_path / f"project{int(k)}"
        project.mkdir()
        (project / "model.py").write_text(
            f"import numpy as np\nK = {k}\n\n\ndef loss(x):\n    return K * np.sum(x ** 2)\n"
        )
        results.append(_gradient_in_a_new_process(tmp_path, project))
    assert results == [repr([2.0, 4.0]), repr([20.0, 40.0])]
    assert len(list((tmp_path / "shared").glob("s2sad_checked_grad_loss_*.py"))) == 1


def test_an_edited_numba_function_the_gradient_calls_is_compiled_again(tmp_path):
    """Numba compiles a called njit function into the gradient's machine code, and its disk
    cache does not notice when that function's module is edited: a second process loaded the
    first one's `h` (4x where 20x was right)."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "model.py").write_text(
        "import numpy as np\nfrom helpers import h\n\n\n"
        "def loss(x):\n    return np.sum(x ** 2) * h(2.0)\n"
    )
    results = []
    for factor in (1.0, 5.0):
        (project / "helpers.py").write_text(
            f"import numba\n\n\n@numba.njit\ndef h(v):\n    return v * {factor}\n"
        )
        results.append(_gradient_in_a_new_process(tmp_path, project))
    assert results == [repr([4.0, 8.0]), repr([20.0, 40.0])]


def weighted(w):
    def loss(x):
        return np.sum(w * x**2)

    return loss


@pytest.mark.parametrize("jit", MODES)
def test_the_cache_holds_no_captured_array(jit):
    x = np.ones(1000)
    refs = []
    # what was alive before (in a suite worker, millions of objects: seconds a full collection)
    # is frozen: the collection below looks at what the test made, and a reference from a
    # frozen object (s2sad's caches) still keeps an array alive
    gc.freeze()
    try:
        for batch in range(3):
            data = np.full(1000, float(batch))
            refs.append(weakref.ref(data))
            g = s2sad.grad(weighted(data), jit=jit)
            np.testing.assert_array_equal(g(x), 2 * data * x)
            pullback = s2sad.vjp(weighted(data), jit=jit)(x)[1]
            np.testing.assert_array_equal(pullback(1.0), 2 * data * x)
            del data, g, pullback
        gc.collect()
    finally:
        gc.unfreeze()
    assert [r() for r in refs] == [None, None, None]


@pytest.mark.parametrize("jit", MODES)
def test_jvp_and_vjp_read_the_closure_too(jit):
    x, t = np.array([1.0, 2.0]), np.array([1.0, 0.0])
    for k in (1.0, 10.0):
        _, tangent = s2sad.jvp(make(k), jit=jit)(x, tangent=t)
        assert tangent == 2 * k
        _, pullback = s2sad.vjp(make(k), jit=jit)(x)
        np.testing.assert_array_equal(pullback(1.0), 2 * k * x)


def test_hessian_and_jacobian_read_the_closure():
    x = np.array([1.0, 2.0])
    for k in (1.0, 10.0):
        np.testing.assert_array_equal(s2sad.hessian(make(k))(x), 2 * k * np.eye(2))
        np.testing.assert_array_equal(s2sad.hessian(make(k), batched=False)(x), 2 * k * np.eye(2))
        np.testing.assert_array_equal(s2sad.jacobian(make(k), mode="reverse")(x), 2 * k * x)
        np.testing.assert_array_equal(s2sad.jacobian(make(k), mode="forward")(x), 2 * k * x)


def test_a_name_that_turns_from_data_into_a_function_is_transformed_again(tmp_path):
    mod = _module(
        tmp_path,
        "trust_kind",
        """
        import numpy as np
        s = 2.0
        def f(x):
            return np.sum(x * s)
        """,
    )
    x = np.array([1.0, 2.0])
    g = s2sad.grad(mod.f)
    np.testing.assert_array_equal(g(x), [2.0, 2.0])
    mod.s = np.float64(4.0)
    np.testing.assert_array_equal(g(x), [4.0, 4.0])


@pytest.mark.parametrize("jit", MODES)
def test_a_helper_global_named_like_a_local_of_the_caller(tmp_path, jit):
    tag = "jit" if jit else "py"
    _module(tmp_path, f"trust_clash_h_{tag}", "k = 3.0\n\ndef act(x):\n    return k * x\n")
    mod = _module(
        tmp_path,
        f"trust_clash_main_{tag}",
        f"""
        import numpy as np
        from trust_clash_h_{tag} import act
        def loss(x):
            k = 100.0
            return np.sum(act(x)) + k
        """,
    )
    np.testing.assert_array_equal(s2sad.grad(mod.loss, jit=jit)(np.array([1.0, 2.0])), [3.0, 3.0])


def with_assert(x):
    assert x.shape == (2,), "two elements"
    return np.sum(x**2)


def test_a_function_pytest_rewrote_is_not_mistaken_for_edited_source():
    x = np.array([1.0, 2.0])
    np.testing.assert_array_equal(s2sad.grad(with_assert)(x), 2 * x)


@pytest.mark.parametrize("jit", MODES)
def test_a_helper_held_by_a_data_object_is_checked_by_its_code(tmp_path, jit):
    tag = "jit" if jit else "py"
    mod = _module(
        tmp_path,
        f"trust_holder_{tag}",
        """
        import types
        import numpy as np

        def double(x):
            return 2.0 * x

        def triple(x):
            return 3.0 * x

        cfg = types.SimpleNamespace(act=double)

        def loss(x):
            return np.sum(cfg.act(x))
        """,
    )
    x = np.array([1.0, 2.0])
    g = s2sad.grad(mod.loss, jit=jit)
    np.testing.assert_array_equal(g(x), [2.0, 2.0])
    mod.cfg.act = mod.triple
    np.testing.assert_array_equal(g(x), [3.0, 3.0])


class _Model:
    def __init__(self, scale):
        self.scale = scale

    def __call__(self):
        return self.scale

    def factor(self):
        return self.scale


model = _Model(2.0)


def uses_a_method(x):
    return np.sum(x**2) * model.factor()


def test_a_bound_method_is_checked_by_its_function_not_its_identity():
    x = np.array([1.0, 2.0])
    g = s2sad.grad(uses_a_method)
    np.testing.assert_array_equal(g(x), 4.0 * x)
    compiled = g.compiled
    model.scale = 3.0
    np.testing.assert_array_equal(g(x), 6.0 * x)
    assert g.compiled is compiled  # `model.factor` is a new bound method at each access


W_HELD = np.array([1.0, 2.0, 3.0])


def sin_of_held(x):
    return np.sin(W_HELD * x) * 2.0


@pytest.mark.parametrize("jit", MODES)
def test_a_pullback_keeps_the_global_arrays_of_its_vjp_call(jit):
    """A global array written in place between vjp and the pullback: the pullback belongs to the
    point of the vjp call, as for its arguments (Python mode mixed old and new values)."""
    x = np.array([0.3, -0.7, 1.2])
    w0 = W_HELD.copy()
    try:
        out, pullback = s2sad.vjp(sin_of_held, jit=jit)(x)
        W_HELD[:] = [10.0, 20.0, 30.0]
        np.testing.assert_allclose(pullback(np.ones(3)), 2.0 * w0 * np.cos(w0 * x), rtol=1e-12)
        np.testing.assert_allclose(out, 2.0 * np.sin(w0 * x), rtol=1e-12)
    finally:
        W_HELD[:] = w0


def scaled_by_default(x, k=2.0):
    return k * np.sum(x**2)


@pytest.mark.parametrize("jit", MODES)
def test_replaced_defaults_of_the_function_are_read_at_each_call(jit):
    """`f.__defaults__ = (3.0,)` after the first call: an existing gradient kept binding 2.0."""
    x = np.array([1.0, 2.0])
    g = s2sad.grad(scaled_by_default, jit=jit)
    try:
        np.testing.assert_array_equal(g(x), 4.0 * x)
        scaled_by_default.__defaults__ = (3.0,)
        np.testing.assert_array_equal(g(x), 6.0 * x)
    finally:
        scaled_by_default.__defaults__ = (2.0,)


CUDA_K = 2.0


def cuda_scaled_square(x):
    return CUDA_K * x * x


def test_a_cuda_kernel_reads_the_globals_at_each_call():
    """The kernel took the user's data as frozen globals: a rebound global kept its old value
    (Numba's CUDA simulator runs it here, as in the rest of the suite)."""
    global CUDA_K
    x = np.array([1.0, 2.0])
    g = s2sad.grad(cuda_scaled_square, target="cuda")
    t = s2sad.jvp(cuda_scaled_square, target="cuda")
    try:
        np.testing.assert_allclose(g(x), 4.0 * x)
        CUDA_K = 5.0
        np.testing.assert_allclose(g(x), 10.0 * x)
        np.testing.assert_allclose(t(x, tangent=np.ones(2))[1], 10.0 * x)
    finally:
        CUDA_K = 2.0
