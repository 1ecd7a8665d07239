"""`s2sad emit` (and `--jit`) of user functions generated code calls by a name of its own: a
second module's `sq` called as `modb_sq` (with what it reads from its module: a helper, a
constant) and a custom_vjp rule the user named `cube_rule`, called as `cube_vjp`. Each module is
imported, and the plain ones run, in one interpreter where `import s2sad` fails."""

import importlib
import re
import subprocess
import sys

import numpy as np
import pytest

import s2sad
from s2sad import cli

MODA = """
import numpy as np

SCALE = 2.0


def sq(X):
    return SCALE * np.sum(X * X, axis=1)
"""

MODB = """
import numpy as np

OFFSET = 10.0


def _shifted(X):
    return np.abs(X) + OFFSET


def sq(X):
    return np.sum(_shifted(X), axis=1)
"""

USER = """
import numpy as np
import s2sad
import s2sad_renamed_moda as moda
import s2sad_renamed_modb as modb


def two_modules(theta, X):
    a = moda.sq(X)
    b = modb.sq(X)
    return np.sum(theta[0] * a + theta[1] * b)


@s2sad.custom_vjp
def cube(v):
    return v**3


@cube.defvjp
def cube_rule(dy, y, v):
    return (3.0 * dy * v * v,)


def with_rule(x):
    return np.sum(cube(x) * 2.0)
"""

THETA, X = np.array([0.7, -0.4]), np.linspace(-1.0, 1.0, 8).reshape(4, 2)
RUN = """
import importlib.util, sys
import numpy as np
sys.modules["s2sad"] = None
for path in sys.argv[1:]:
    spec = importlib.util.spec_from_file_location(path.rsplit("/", 1)[-1][:-3], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if "_jit" not in path:  # (a --jit module imported: its names defined, nothing compiled)
        theta, x = np.array([0.7, -0.4]), np.linspace(-1.0, 1.0, 8).reshape(4, 2)
        g = module.grad_two_modules(theta, x) if hasattr(module, "grad_two_modules") else (
            module.grad_with_rule(x))
        print(path, repr(g.tolist()))
"""


@pytest.fixture
def user(tmp_path, monkeypatch):
    for name, text in [("moda", MODA), ("modb", MODB), ("user", USER)]:
        (tmp_path / f"s2sad_renamed_{name}.py").write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in list(sys.modules):
        if name.startswith("s2sad_renamed_"):
            monkeypatch.delitem(sys.modules, name)
    return tmp_path


def test_renamed_functions_and_rules_are_written_with_what_they_read(user):
    module = importlib.import_module("s2sad_renamed_user")
    want = {
        "two_modules": s2sad.grad(module.two_modules)(THETA, X),
        "with_rule": s2sad.grad(module.with_rule)(X),
    }
    np.testing.assert_allclose(want["with_rule"], 6.0 * X**2, rtol=1e-12)
    paths = []
    for name in want:
        for jit in (False, True):
            text = cli.emit_text(f"{user / 's2sad_renamed_user.py'}:{name}", None, "grad", jit)
            if name == "two_modules":
                assert "def modb_sq(X):" in text and "def _shifted(X):" in text
                assert "OFFSET = 10.0" in text and "SCALE = 2.0" in text
            else:
                # (`cube_vjp2`, ...: each load of the file registers the rule anew)
                assert re.search(r"^def cube_vjp\d*\(dy, y, v\):", text, re.M)
            path = user / f"emitted_{name}{'_jit' if jit else ''}.py"
            path.write_text(text)
            paths.append(str(path))
    ran = subprocess.run(
        [sys.executable, "-c", RUN, *paths], capture_output=True, text=True, timeout=120
    )
    assert ran.returncode == 0, ran.stderr
    lines = dict(line.split(" ", 1) for line in ran.stdout.splitlines())
    assert len(lines) == 2
    for path, got in lines.items():
        name = "two_modules" if "two_modules" in path else "with_rule"
        np.testing.assert_allclose(np.array(eval(got)), want[name], rtol=1e-12)
