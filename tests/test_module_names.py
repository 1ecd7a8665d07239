"""Names the resolver binds in generated code for functions the user's source never names bare:
`moda.sq(X)`, not inlined, is called by a name (compiled code reads no function of a module by
attribute), and that name is neither another object's (`modb.sq`) nor one s2sad makes later
(the adjoint `dtheta`, the tangent `theta_dot`)."""

import importlib.util

import numpy as np
import pytest

import s2sad
from s2sad import cli

SQ_A = """
import numpy as np

def sq(X):
    return np.sum(X * X, axis=1)
"""

SQ_B = """
import numpy as np

def sq(X):
    return np.sum(np.abs(X), axis=1) + 10.0
"""

TWO_MODULES = """
import numpy as np
import s2sad_names_moda as moda
import s2sad_names_modb as modb


def two_modules(theta, X):
    a = moda.sq(X)
    b = modb.sq(X)
    return np.sum(theta[0] * a + theta[1] * b)
"""

BARE_AND_MODULE = """
import numpy as np
import s2sad_names_moda as moda
import s2sad_names_modb as modb
from s2sad_names_moda import sq


def bare_and_module(theta, X):
    b = modb.sq(X)
    a = sq(X)
    c = moda.sq(X)
    return np.sum(theta[0] * a + theta[1] * b * c)
"""

FEATS = """
def dtheta(X):
    return X[:, 0] * 5.0


def theta_dot(X):
    return X[:, 1] * 2.0
"""

SPELLED_LIKE_GENERATED = """
import numpy as np
import s2sad_names_feats as feats


def loss(theta, X):
    a = feats.dtheta(X)
    return np.sum(theta[0] * a)


def loss_jvp(theta, X):
    a = feats.theta_dot(X)
    return np.sum(theta[0] * a * theta[1])
"""

CUSTOM = """
import numpy as np
import s2sad


@s2sad.custom_vjp
def dx(v):
    return np.sum(v**3)


@dx.defvjp
def dx_rule(dy, y, v):
    return dy * 3.0 * v * v
"""

CALLS_CUSTOM = """
import numpy as np
import s2sad_names_custom as cm


def cubes(x):
    return cm.dx(x) + np.sum(x * 2.0)
"""

THETA = np.array([0.7, -0.4])
X = np.random.default_rng(1).normal(size=(4, 2))


def _write(directory, name, text):
    (directory / f"{name}.py").write_text(text)


@pytest.fixture
def users_modules(tmp_path, monkeypatch):
    """The user's modules, importable by name (the functions' source is read from their files)."""
    for name, text in [
        ("s2sad_names_moda", SQ_A),
        ("s2sad_names_modb", SQ_B),
        ("s2sad_names_feats", FEATS),
        ("s2sad_names_two", TWO_MODULES),
        ("s2sad_names_spelled", SPELLED_LIKE_GENERATED),
        ("s2sad_names_bare", BARE_AND_MODULE),
        ("s2sad_names_custom", CUSTOM),
        ("s2sad_names_cubes", CALLS_CUSTOM),
    ]:
        _write(tmp_path, name, text)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in list(importlib.sys.modules):
        if name.startswith("s2sad_names_"):
            monkeypatch.delitem(importlib.sys.modules, name)
    return tmp_path


def _central(f, theta, X, h=1e-6):
    return np.array([(f(theta + e * h, X) - f(theta - e * h, X)) / (2 * h) for e in np.eye(2)])


def _exact_two_modules(X):
    """d/dtheta of sum(theta0 * a + theta1 * b): (sum a, sum b), each module's own sq."""
    return np.array([np.sum(X * X), np.sum(np.abs(X)) + 10.0 * len(X)])


def test_same_named_functions_of_two_modules_keep_their_own_names(users_modules):
    """`moda.sq(X)` and `modb.sq(X)` were both spelled `sq` and both ran modb.sq (wrong value,
    gradient and tangent): now `sq` and `modb_sq`, in grad, value_and_grad and jvp; the
    gradient is the finite differences' and jit's."""
    import s2sad_names_two as user

    f = user.two_modules
    want = _exact_two_modules(X)
    np.testing.assert_allclose(_central(f, THETA, X), want, rtol=1e-7)
    source = s2sad.source(s2sad.grad(f))
    assert "= sq(X)" in source and "= modb_sq(X)" in source
    np.testing.assert_allclose(s2sad.grad(f)(THETA, X), want, rtol=1e-12)
    value, grad = s2sad.value_and_grad(f)(THETA, X)
    np.testing.assert_allclose(value, f(THETA, X), rtol=1e-12)
    np.testing.assert_allclose(grad, want, rtol=1e-12)
    _, tangent = s2sad.jvp(f)(THETA, X, tangent=np.array([1.0, 0.0]))
    np.testing.assert_allclose(tangent, want[0], rtol=1e-12)
    np.testing.assert_allclose(s2sad.grad(f, jit="strict")(THETA, X), want, rtol=1e-12)


def test_a_modules_function_whose_name_the_user_gives_another(users_modules):
    """`modb.sq(X)` called first, where the user's bare `sq` is moda's: `modb_sq`, and the
    user's `sq` (and `moda.sq`, the same object) keep the name `sq`."""
    import s2sad_names_bare as user

    f = user.bare_and_module
    source = s2sad.source(s2sad.grad(f))
    assert "b = modb_sq(X)" in source and "a = sq(X)" in source and "c = sq(X)" in source
    want = _central(f, THETA, X)
    np.testing.assert_allclose(s2sad.grad(f)(THETA, X), want, rtol=1e-7)


def test_emit_jit_writes_each_modules_function_under_its_own_name(users_modules):
    """`s2sad emit --jit` of the two-module case defines `sq` (moda's) and `modb_sq`
    (modb's), and its gradient is the exact one."""
    text = cli.emit_text(f"{users_modules / 's2sad_names_two.py'}:two_modules", None, "grad", True)
    assert "def sq(X):" in text and "def modb_sq(X):" in text
    out = users_modules / "emitted_two_modules.py"
    out.write_text(text)
    spec = importlib.util.spec_from_file_location("emitted_two_modules", out)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    np.testing.assert_allclose(module.grad_two_modules(THETA, X), _exact_two_modules(X), rtol=1e-12)


def test_a_modules_function_named_like_an_adjoint_or_tangent(users_modules):
    """`feats.dtheta(X)` is called as `dtheta`, so the adjoint of theta takes another name (it
    was `dtheta` too: UnboundLocalError); `feats.theta_dot(X)` likewise under jvp (the tangent
    parameter shadowed the function: "'numpy.ndarray' object is not callable")."""
    import s2sad_names_spelled as user

    source = s2sad.source(s2sad.grad(user.loss))
    assert "a = dtheta(X)" in source and "return d_theta" in source
    want = np.array([np.sum(X[:, 0] * 5.0), 0.0])
    np.testing.assert_allclose(_central(user.loss, THETA, X), want, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(s2sad.grad(user.loss)(THETA, X), want, rtol=1e-12)
    np.testing.assert_allclose(s2sad.grad(user.loss, jit="strict")(THETA, X), want, rtol=1e-12)
    tangent_in = np.array([1.0, 1.0])
    value, tangent = s2sad.jvp(user.loss_jvp)(THETA, X, tangent=tangent_in)
    a = X[:, 1] * 2.0
    np.testing.assert_allclose(value, user.loss_jvp(THETA, X), rtol=1e-12)
    np.testing.assert_allclose(tangent, np.sum(a) * (THETA[1] + THETA[0]), rtol=1e-12)


def test_a_custom_vjp_function_called_through_its_module(users_modules):
    """`cm.dx(x)`, a custom_vjp function, is called by its name as a plain function is
    (compiled code stopped at "Unknown attribute 'dx' of type Module" and ran Python), and the
    adjoint of `x` is not `dx`."""
    import s2sad_names_cubes as user

    x = np.array([0.5, 1.0, 2.0])
    source = s2sad.source(s2sad.grad(user.cubes))
    assert "= dx(x)" in source and "return d_x" in source
    want = 3.0 * x * x + 2.0
    np.testing.assert_allclose(s2sad.grad(user.cubes)(x), want, rtol=1e-12)
    np.testing.assert_allclose(s2sad.grad(user.cubes, jit="strict")(x), want, rtol=1e-12)
