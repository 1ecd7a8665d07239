"""Generated names never clash with the user's (issue #13, classes 3 and 4).

Rule templates are instantiated hygienically: a user's rule whose parameters are named like the
template's placeholders (`g`, `ans`) gets its own arguments. Every name generated code uses that
is not the user's (NumPy, math, runtime/batched/Numba helpers, registered rules, the builtins and
functions s2sad writes) is reserved: a user's parameter, local, global constant or global function
spelled like one is renamed in the generated code, so neither shadows the other.

Each clash is checked against the same function with an innocent name, which must give exactly
the same numbers (and is itself checked against finite differences).
"""

from __future__ import annotations

import ast
import builtins
import itertools
import re
import warnings

import numpy as np
import pytest

import s2sad
from s2sad import cli
from s2sad.transform_cache import _CACHE
from s2sad.jit import JitFallbackWarning
from s2sad.pipeline.normalize import reserved_names
from s2sad.rules.registry import Rule
from conftest import load_module

X = np.array([0.3, -1.2, 0.7])
Y = np.array([[1.5, -0.4, 2.0], [0.2, 0.9, -1.1]])
_COUNT = itertools.count()


def _module(tmp_path, text: str):
    """Import `text` as a module from a file of its own (s2sad reads the source)."""
    return load_module(tmp_path, f"names_case_{next(_COUNT)}", text)


def _fd_grad(f, args, i, eps=1e-6):
    args = [np.array(a, dtype=float) for a in args]
    out = np.zeros_like(args[i])
    for k in np.ndindex(args[i].shape):
        up = [a.copy() for a in args]
        down = [a.copy() for a in args]
        up[i][k] += eps
        down[i][k] -= eps
        out[k] = (f(*up) - f(*down)) / (2 * eps)
    return out


# ------------------------------------------------------------------ class 3: rule templates


def test_custom_vjp_parameter_named_g(tmp_path):
    mod = _module(
        tmp_path,
        """
        import numpy as np
        import s2sad

        @s2sad.custom_vjp
        def square(g):
            return g * g

        @square.defvjp
        def square_rule(dy, y, g):
            return dy * 2 * g

        def f(x):
            return 5 * square(x)

        def v(x):
            return np.sum(5 * square(x))

        def w(x):
            return 5 * square(x)
        """,
    )
    assert s2sad.grad(mod.f)(3.0) == 30.0  # was 50: the cotangent stood for the parameter
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a fallback is fine: the numbers are the point
        assert s2sad.grad(mod.f, jit=True)(3.0) == 30.0
    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(s2sad.grad(mod.v)(x), 10 * x)
    np.testing.assert_allclose(s2sad.jacobian(mod.w, mode="reverse")(x), np.diag(10 * x))
    np.testing.assert_allclose(
        s2sad.jacobian(mod.v, mode="reverse")(x), 10 * x  # the batched (row by row) form
    )


def test_register_vjp_parameters_named_like_placeholders(tmp_path):
    mod = _module(
        tmp_path,
        """
        import numpy as np
        import s2sad

        def cube(ans):
            return ans ** 3

        def prod(g, ans):
            return g * ans

        def scale(scale_vjp):
            return 4.0 * scale_vjp

        s2sad.register_vjp(cube, lambda dy, y, ans: dy * 3 * ans ** 2)
        s2sad.register_vjp(prod, lambda dy, y, g, ans: (dy * ans, dy * g))
        s2sad.register_vjp(scale, lambda dy, y, scale_vjp: dy * 4.0)

        def f(x):
            return 5 * cube(x)

        def h(a, b):
            return prod(a, b) * 2.0

        def k(x):
            return scale(x) * x
        """,
    )
    assert s2sad.grad(mod.f)(2.0) == 60.0  # was 960: the result stood for the parameter
    assert s2sad.grad(mod.h, wrt=(0, 1))(3.0, 5.0) == (10.0, 6.0)  # the joint call
    assert s2sad.grad(mod.k)(1.5) == 12.0


def test_rule_parameter_may_not_be_a_placeholder():
    with pytest.raises(ValueError, match="placeholder"):
        Rule("r", "g, /", {"g": "g * 2"})
    with pytest.raises(ValueError, match="placeholder"):
        Rule("r", "arrays, k", {"arrays": "g[k]"}, seq=("arrays",))


def test_tangent_rule_argument_named_like_a_placeholder(tmp_path):
    """A reduction's tangent instantiates its VJP weights with ones for the cotangent: a user's
    name is never taken for that placeholder."""
    mod = _module(
        tmp_path,
        """
        import numpy as np

        def f(x):
            __ones__ = x * 2.0
            return np.prod(__ones__)
        """,
    )
    x = np.array([0.5, 1.5, -2.0])
    t = np.array([1.0, -0.5, 0.25])
    _, dot = s2sad.jvp(mod.f)(x, tangent=t)
    np.testing.assert_allclose(dot, _fd_grad(mod.f, [x], 0) @ t, rtol=1e-7)


# ------------------------------------------------------------------ class 4: reserved names

# one name of each kind generated code uses (`vjp_batched_f_sweep` is a generated function's)
NAMES = [
    "unbroadcast",
    "grad_seed",
    "zeros_like",
    "expand_reduced",
    "mean_vjp",
    "snapshot",
    "batched_zeros",
    "batched_unbroadcast",
    "stack_rows",
    "batched_lift",
    "add_at",
    "types",
    "njit",
    "np",
    "math",
    "pullback",
    "reversed",
    "len",
    "vjp_batched_f_sweep",
]
_HEAD = """
import numpy as onp
import s2sad

def cube(a):
    return a ** 3

s2sad.register_vjp(cube, lambda dy, y, a: dy * 3 * a ** 2)
"""
_BODIES = {
    "local": """
def f(x, y):
    NAME = x * 2.0
    t = onp.mean(NAME * y, axis=0)
    s = onp.sum(onp.sin(NAME))CUBE[x]
    for i in range(2):
        s = s + onp.sum(t * x[i])
    return s
""",
    "param": """
def f(NAME, y):
    u = NAME * 2.0
    t = onp.mean(u * y, axis=0)
    s = onp.sum(onp.sin(u))CUBE[NAME]
    for i in range(2):
        s = s + onp.sum(t * NAME[i])
    return s
""",
    "constant": """
NAME = 2.0

def f(x, y):
    u = x * NAME
    t = onp.mean(u * y, axis=0)
    s = onp.sum(onp.sin(u))CUBE[x]
    for i in range(2):
        s = s + onp.sum(t * x[i])
    return s
""",
    "function": """
def NAME(a):
    return a * 100.0

def f(x, y):
    u = x * (NAME(2.0) / 100.0)
    t = onp.mean(u * y, axis=0)
    s = onp.sum(onp.sin(u))CUBE[x]
    for i in range(2):
        s = s + onp.sum(t * x[i])
    return s
""",
}


def _case(tmp_path, kind: str, name: str, rule: bool = False):
    """`f` of case `kind` with the user's name `name`; `rule`: `f` also calls `cube`, which has
    a register_vjp rule (called as `cube_vjp`)."""
    text = re.sub(r"CUBE\[(\w+)\]", r" + onp.sum(cube(\1))" if rule else "", _BODIES[kind])
    return _module(tmp_path, _HEAD + text.replace("NAME", name)).f


def _results(f, jit=False, reverse_only=False):
    """Every transform of `f` at (X, Y)."""
    seed = 0.7
    tx, ty = np.full_like(X, 0.5), np.linspace(-1.0, 1.0, Y.size).reshape(Y.shape)
    out = {"grad": s2sad.grad(f, wrt=(0, 1), jit=jit)(X, Y)}
    value, pullback = s2sad.vjp(f, wrt=(0, 1), jit=jit)(X, Y)
    out["vjp"] = (value, *pullback(seed))
    if jit:
        return out
    out["jacobian"] = s2sad.jacobian(f, wrt=(0, 1), mode="reverse")(X, Y)
    if reverse_only:  # user rules have no tangent rule
        return out
    out["jvp"] = s2sad.jvp(f, wrt=(0, 1))(X, Y, tangent=(tx, ty))
    out["jvp_batched"] = s2sad.jvp(f, wrt=0, batched=True)(X, Y, tangent=np.eye(3))
    out["jacobian_forward"] = s2sad.jacobian(f, wrt=(0, 1), mode="forward")(X, Y)
    out["hessian"] = s2sad.hessian(f, wrt=0)(X, Y)
    return out


def _same(a, b, where):
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b), where
        for p, q in zip(a, b):
            _same(p, q, where)
    else:
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, err_msg=where)


@pytest.fixture(scope="module")
def baselines(tmp_path_factory):
    """The innocent spelling of each case, checked against finite differences."""
    tmp = tmp_path_factory.mktemp("baseline")
    out = {}
    for kind in _BODIES:
        f = _case(tmp, kind, "innocent")
        results = _results(f)
        gx, gy = results["grad"]
        np.testing.assert_allclose(gx, _fd_grad(f, [X, Y], 0), rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(gy, _fd_grad(f, [X, Y], 1), rtol=1e-6, atol=1e-8)
        out[kind] = results
        f = _case(tmp, kind, "innocent", rule=True)
        out[kind, "rule"] = results = _results(f, reverse_only=True)
        gx, gy = results["grad"]
        np.testing.assert_allclose(gx, _fd_grad(f, [X, Y], 0), rtol=1e-6, atol=1e-8)
    return out


@pytest.mark.parametrize("kind", list(_BODIES))
@pytest.mark.parametrize("name", NAMES)
def test_user_name_spelled_like_generated_code(tmp_path, baselines, kind, name):
    f = _case(tmp_path, kind, name)
    results = _results(f)
    for mode, expected in baselines[kind].items():
        _same(results[mode], expected, f"{kind} {name!r} in {mode}")


@pytest.mark.parametrize("kind", list(_BODIES))
def test_user_name_spelled_like_a_registered_rule(tmp_path, baselines, kind):
    """register_vjp(cube, ...) is called as `cube_vjp` in generated code."""
    f = _case(tmp_path, kind, "cube_vjp", rule=True)
    results = _results(f, reverse_only=True)
    for mode, expected in baselines[kind, "rule"].items():
        _same(results[mode], expected, f"{kind} 'cube_vjp' in {mode}")


def test_rule_named_like_a_runtime_helper(tmp_path):
    """A user's function `prod` with a rule is not called `prod_vjp`: that is s2sad's own."""
    mod = _module(
        tmp_path,
        """
        import numpy as np
        import s2sad

        def prod(a, b):
            return a * b

        s2sad.register_vjp(prod, lambda dy, y, a, b: (dy * b, dy * a))

        def f(x):
            return prod(x, 3.0) + np.prod(x)
        """,
    )
    assert s2sad.grad(mod.f)(2.0) == 4.0
    x = np.array([0.5, 1.5, -2.0])
    _, dot = s2sad.jvp(lambda_free_prod(tmp_path))(x, tangent=np.ones(3))
    np.testing.assert_allclose(dot, 0.5 * 1.5 + 0.5 * -2.0 + 1.5 * -2.0)


def lambda_free_prod(tmp_path):
    return _module(tmp_path, "import numpy as np\ndef g(x):\n    return np.prod(x)\n").g


# The jitted cases share compiles: one function holds a parameter, a local and a constant
# spelled like helpers (the three kinds of _BODIES in one body), each checked against its
# innocent spelling; a global function falls back, so it has a function of its own.
_JIT_BODY = """
CONSTANT = 2.0

def f(PARAM, y):
    LOCAL = PARAM * CONSTANT
    t = onp.sum(LOCAL * y, axis=0)
    s = onp.sum(onp.sin(LOCAL))
    for i in range(2):
        s = s + onp.sum(t * PARAM[i])
    return s
"""
_JIT_CASES = [
    {"param": "zeros_like", "local": "unbroadcast", "constant": "types"},
    {"local": "np", "constant": "unbroadcast"},
    {"function": "unbroadcast"},
]


def _jitted_case(tmp_path, names: dict):
    """`f` with each kind's name spelled as `names` says (the others innocent)."""
    if "function" in names:
        text = _BODIES["function"].replace("onp.mean(", "onp.sum(").replace("CUBE[x]", "")
        return _module(tmp_path, _HEAD + text.replace("NAME", names["function"])).f
    spelled = {"PARAM": "x", "LOCAL": "u", "CONSTANT": "scale"}
    spelled.update({kind.upper(): name for kind, name in names.items()})
    text = re.sub(r"PARAM|LOCAL|CONSTANT", lambda m: spelled[m.group()], _JIT_BODY)
    return _module(tmp_path, _HEAD + text).f


@pytest.mark.parametrize(
    "names", _JIT_CASES, ids=[",".join(f"{k}-{v}" for k, v in c.items()) for c in _JIT_CASES]
)
def test_user_name_spelled_like_a_helper_jitted(tmp_path, names):
    """Jitted code imports every Numba helper with `*` and puts the user's globals beside them.
    (Numba has no np.mean with an axis: these take np.sum.)"""
    innocent = {kind: f"innocent_{kind}" for kind in names}
    expected = _results(_jitted_case(tmp_path, innocent), reverse_only=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = _results(_jitted_case(tmp_path, names), jit=True)
    if "function" not in names:  # Numba compiles no call of a Python function: that one falls back
        assert not [w for w in caught if issubclass(w.category, JitFallbackWarning)]
    for mode, value in results.items():
        _same(value, expected[mode], f"jit {names} in {mode}")


def test_generated_names_use_only_reserved_or_user_names(tmp_path, baselines):
    """Every global the generated code reads is a user's (in its namespace) or reserved: the
    reserved list is complete, so the renaming above covers every name s2sad writes."""
    assert _CACHE
    reserved = {}  # reserved_names(name), once per name (it runs over every process's cache)
    for compiled in [c for variants in list(_CACHE.values()) for c in variants]:
        nodes = list(ast.walk(ast.parse(compiled.code)))
        local = {a.arg for a in nodes if isinstance(a, ast.arg)}
        names = [n for n in nodes if isinstance(n, ast.Name)]
        local |= {n.id for n in names if not isinstance(n.ctx, ast.Load)}
        local |= {n.name for n in nodes if isinstance(n, ast.FunctionDef)}
        free = {n.id for n in names} - local
        func_name = compiled.name.split("_")[-1]
        if func_name not in reserved:
            reserved[func_name] = reserved_names(func_name)
        unknown = free - set(compiled.globals) - reserved[func_name] - {"True", "False"}
        builtins_called = {"float", "int", "abs", "round", "sum", "tuple", "list", "zip"}
        unknown -= set(compiled.user_names) | builtins_called
        assert not unknown, (compiled.name, unknown)


def test_user_underscore_survives_the_adjoint_loop(tmp_path):
    """The adjoint of a `while` loop counts its iterations with a name of its own."""
    mod = _module(
        tmp_path,
        """
        def f(x):
            _ = x * 3.0
            s = x
            i = 0
            while i < 3:
                s = s * _
                i += 1
            return s
        """,
    )
    assert s2sad.grad(mod.f)(2.0) == 4 * 27 * 2.0**3  # was 216: `_` counted the iterations


@pytest.mark.parametrize("name", ["dx", "dloss", "d_x", "x_dot", "s_tape", "iters", "batch"])
def test_user_names_like_adjoint_names(tmp_path, name):
    """Adjoints, tangents, tapes and counters take names no user name has."""
    body = """
    import numpy as np

    def loss(x):
        NAME = np.sin(x) * 2.0
        s = x
        i = 0
        while i < 2:
            s = s * NAME + x
            i += 1
        return np.sum(s * NAME)
    """
    f = _module(tmp_path, body.replace("NAME", name)).loss
    g = _module(tmp_path, body.replace("NAME", "innocent")).loss
    x = np.array([0.3, -0.8])
    np.testing.assert_allclose(s2sad.grad(g)(x), _fd_grad(g, [x], 0), rtol=1e-6)
    _same(s2sad.grad(f)(x), s2sad.grad(g)(x), name)
    _same(s2sad.jvp(f)(x, tangent=x), s2sad.jvp(g)(x, tangent=x), name)
    _same(s2sad.jacobian(f, mode="reverse")(x), s2sad.jacobian(g, mode="reverse")(x), name)
    _same(s2sad.jacobian(f, mode="forward")(x), s2sad.jacobian(g, mode="forward")(x), name)


def test_renamed_parameter_by_keyword_and_wrt_name(tmp_path):
    mod = _module(
        tmp_path,
        """
        import numpy as onp

        def f(x, snapshot, *, np=3.0):
            return onp.sum(x * snapshot) * np
        """,
    )
    x, s = np.array([1.0, 2.0]), np.array([0.5, -1.0])
    np.testing.assert_allclose(s2sad.grad(mod.f, wrt="snapshot")(x, snapshot=s, np=2.0), 2 * x)
    np.testing.assert_allclose(s2sad.grad(mod.f)(x, s, np=2.0), 2 * s)
    # the docstring and signature name the generated parameters; the comments the user's code
    code = s2sad.source(s2sad.grad(mod.f, wrt="snapshot"))
    assert "def grad_f(x, snapshot2, *, np2=3.0):" in code
    assert "return onp.sum(x * snapshot) * np" in code


def test_renamed_global_is_reread_when_it_changes(tmp_path):
    """A renamed global still invalidates the cached transform when the user rebinds it."""
    mod = _module(
        tmp_path,
        """
        unbroadcast = 2.0

        def f(x):
            return x * x * unbroadcast
        """,
    )
    grad = s2sad.grad(mod.f)
    assert grad(3.0) == 12.0
    mod.unbroadcast = 5.0
    assert s2sad.grad(mod.f)(3.0) == 30.0


def test_standalone_module_with_user_globals_named_like_helpers(tmp_path):
    """`s2sad emit` writes a renamed global under its generated name, and the module runs."""
    mod = _module(
        tmp_path,
        """
        import numpy as np

        unbroadcast = 2.0

        def snapshot(a):
            return a * 10.0

        def f(x, y):
            return np.sum(x * y * unbroadcast) + np.sum(x * snapshot(1.0))
        """,
    )
    spec = f"{mod.__file__}:f"
    text = cli.emit_text(spec, ["x", "y"], "grad")
    assert "unbroadcast2 = 2.0" in text and "def snapshot2(a):" in text
    namespace: dict = {}
    exec(compile(text, "<emitted>", "exec"), namespace)
    _same(namespace["grad_f"](X, Y), s2sad.grad(mod.f, wrt=(0, 1))(X, Y), "emit")
    jit_text = cli.emit_text(spec, ["x", "y"], "grad", jit=True)
    compile(jit_text, "<emitted jit>", "exec")
    assert "unbroadcast2 = 2.0" in jit_text and "\nunbroadcast = 2.0" not in jit_text


def test_cuda_kernel_names_unlike_the_users(tmp_path):
    """The kernel's own names (`i`, `out0`, `cuda`) and device helpers (np.sign's stand-in) never
    meet a user's parameter or local (run on Numba's CUDA simulator without a GPU)."""
    mod = _module(
        tmp_path,
        """
        import numpy as np

        def f(i, out0, cuda):
            sign = np.sign(i) * 2.0
            return sign * i * i * out0 + cuda

        def g(a, b, c):
            s = np.sign(a) * 2.0
            return s * a * a * b + c
        """,
    )
    args = (np.linspace(-1.0, 1.0, 5), np.linspace(0.5, 2.0, 5), np.full(5, 0.25))
    got = s2sad.grad(mod.f, wrt=(0, 1, 2), target="cuda")(*args)
    expected = s2sad.grad(mod.g, wrt=(0, 1, 2), target="cuda")(*args)
    _same(got, expected, "cuda")
    np.testing.assert_allclose(expected[0], 4 * np.abs(args[0]) * args[1])
    _, dot = s2sad.jvp(mod.f, wrt=1, target="cuda")(*args, tangent=np.ones(5))
    np.testing.assert_allclose(dot, 2 * np.sign(args[0]) * args[0] ** 2)


def test_global_of_an_inlined_function_named_like_a_local(tmp_path):
    """A function inlined into `f` reads its own module's global `scale`, not `f`'s local
    `scale`; two inlined functions' globals of one name are two values."""
    other = _module(
        tmp_path,
        """
        scale = 10.0
        offset = 1.0

        def helper(v):
            return v * scale + offset
        """,
    )
    third = _module(tmp_path, "offset = 100.0\n\ndef shift(v):\n    return v * offset\n")
    mod = _module(
        tmp_path,
        """
        def f(x):
            scale = 2.0
            return helper(x) * scale + shift(x) * offset

        offset = 0.5
        """,
    )
    mod.helper, mod.shift = other.helper, third.shift
    assert mod.f(3.0) == (30.0 + 1.0) * 2.0 + 300.0 * 0.5
    assert s2sad.grad(mod.f)(3.0) == 20.0 + 50.0  # was 4 + ...: the local stood for the global
    value, dot = s2sad.jvp(mod.f)(3.0, tangent=1.0)
    assert (value, dot) == (mod.f(3.0), 70.0)


def test_standalone_module_with_user_globals_named_like_private_helpers(tmp_path):
    """Helpers whose names start with `_` are copied into emitted modules too (`_lead_axis`,
    cumsum's); a user's global of that name is renamed, not replaced by the helper."""
    mod = _module(
        tmp_path,
        """
        import numpy as np

        _lead_axis = 2.0

        def f(x):
            return np.sum(np.cumsum(x, axis=0) * _lead_axis)
        """,
    )
    text = cli.emit_text(f"{mod.__file__}:f", ["x"], "grad")
    assert "_lead_axis2 = 2.0" in text and "def _lead_axis(" in text
    namespace: dict = {}
    exec(compile(text, "<emitted>", "exec"), namespace)
    _same(namespace["grad_f"](X), s2sad.grad(mod.f)(X), "emit")


@pytest.mark.parametrize("name", ["masked", "mask_fits", "set_masked", "grad_seed"])
def test_a_jitted_module_of_a_function_named_like_a_helper(tmp_path, name):
    """`s2sad emit --jit` of a function named like a Numba helper (`masked`): the module carries
    the helpers its code calls, not those whose names only its docstrings and `def`s spell (it
    carried `masked`'s form, and not `_integer_array`, which that reads: refused)."""
    mod = _module(
        tmp_path, f"import numpy as np\n\ndef {name}(x, m):\n    return np.sum(x[m] ** 2)\n"
    )
    text = cli.emit_text(f"{mod.__file__}:{name}", ["x"], "grad", jit=True)
    compile(text, "<emitted jit>", "exec")
    assert "mask_fits(x, 0, m)" in text and "def masked(" not in text


def test_each_numba_helper_carries_what_it_reads():
    """A standalone module holding one helper's Numba form defines every name the form reads
    (`masked`'s read `_integer_array`, which was no type test: not copied)."""
    from s2sad.rules.helpers import forms_used, numba_source
    from s2sad.standalone import free_globals

    for helper in ["masked", "set_masked", "add_masked"]:
        text = numba_source(forms_used(f"{helper}(a, m)"))
        assert {n for n in free_globals(text) if not hasattr(builtins, n)} == set(), helper


def keyword_adjoints(x):
    el = np.sin(x)
    ef = el * 2.0
    return np.sum(el**2 + ef)


def test_an_adjoint_named_like_a_keyword_gets_another_name():
    """`el` and `ef` have adjoints `del` and `def` by the d-prefix: keywords, so they get a
    number (the generated code did not parse)."""
    x = np.linspace(0.1, 1.0, 3)
    expected = 2 * np.sin(x) * np.cos(x) + 2 * np.cos(x)
    np.testing.assert_allclose(s2sad.grad(keyword_adjoints)(x), expected, rtol=1e-12)
    np.testing.assert_allclose(
        s2sad.jvp(keyword_adjoints)(x, tangent=np.ones(3))[1], np.sum(expected), rtol=1e-12
    )
    assert "del2" in s2sad.source(s2sad.grad(keyword_adjoints), x)


def test_the_same_code_in_two_files_names_its_own_file(tmp_path):
    """Code objects compare equal across files: each file's function gets a transform naming
    that file (the cache keys on the file too)."""
    text = "def f(x):\n    return x * x\n"
    one = load_module(tmp_path, "same_code_one", text)
    two = load_module(tmp_path, "same_code_two", text)
    assert s2sad.grad(one.f)(3.0) == 6.0
    assert s2sad.grad(two.f)(3.0) == 6.0
    assert "same_code_one.py:1" in s2sad.source(s2sad.grad(one.f), 3.0)
    assert "same_code_two.py:1" in s2sad.source(s2sad.grad(two.f), 3.0)
