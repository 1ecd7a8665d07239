"""The `s2sad` command and the checked-in generated/ directory."""

import contextlib
import importlib.util
import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import s2sad
from s2sad import cli
from s2sad.trees import flatten

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def _example_cases():
    cases = []
    for file in sorted(EXAMPLES.glob("*.py")):
        if "EMIT" not in file.read_text():
            continue
        module = cli._load_module(file)
        for name, options in module.EMIT.items():
            cases.append(pytest.param(file, name, options, id=f"{file.stem}:{name}"))
    return cases


def _run_command(*args, cwd=ROOT):
    """`python -m s2sad ARGS` in a fresh interpreter (its imports: a second of CPU a call)."""
    return subprocess.run(
        [sys.executable, "-m", "s2sad", *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def _run(*args):
    """`s2sad ARGS` as `python -m s2sad` runs it (`sys.exit(cli.main())`), in this process and
    from the repository's root: its exit status, stdout and stderr. The command itself, in an
    interpreter of its own, is run by the --debug test and the top-level --help."""
    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()  # (contextlib.chdir is Python 3.11's)
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = cli.main(list(args))
    except SystemExit as exc:  # argparse's --help and usage errors
        status = exc.code
    finally:
        os.chdir(here)
    status = 0 if status is None else status
    return subprocess.CompletedProcess(args, status, out.getvalue(), err.getvalue())


def _import_without_s2sad(path: Path):
    """Import a generated module in a fresh interpreter where `import s2sad` fails."""
    code = (
        "import sys, importlib.util, pickle\n"
        "sys.modules['s2sad'] = None\n"
        f"spec = importlib.util.spec_from_file_location('gen', {str(path)!r})\n"
        "mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)\n"
        "print('ok', sorted(n for n in dir(mod) if not n.startswith('_'))[:3])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("file, name, options", _example_cases())
def test_emitted_module_is_standalone_and_matches_grad(file, name, options, tmp_path):
    out = tmp_path / f"{name.replace('.', '_')}_grad.py"
    args = ["emit", f"{file}:{name}", "-o", str(out)]
    for w in options.get("wrt", []):
        args += ["--wrt", w]
    result = _run(*args)
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    assert "import s2sad" not in text and "from s2sad" not in text
    assert _import_without_s2sad(out).startswith("ok")

    spec = importlib.util.spec_from_file_location(f"gen_{name}", out)
    generated = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generated)
    module = cli._load_module(file)
    args_ = module.inputs(np.random.default_rng(0))[name]
    func = cli.load_function(f"{file}:{name}")  # `Model.loss`: a method, its object an argument
    expected = s2sad.grad(func, wrt=tuple(options["wrt"]))(*args_)
    got = getattr(generated, f"grad_{func.__name__}")(*args_)
    got = got if isinstance(got, tuple) else (got,)
    assert flatten(got)[0] == flatten(expected)[0]  # a dict of parameters gives a dict
    for e, g in zip(flatten(expected)[1], flatten(got)[1]):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)


def test_generated_directory_is_current():
    stale = cli.emit_all(str(EXAMPLES), str(ROOT / "generated"), check=True)
    assert stale == 0, "generated/ is stale: run `s2sad emit --all examples -o generated`"


def test_emit_a_method_takes_its_object_whole(tmp_path):
    """`PATH.py:Class.method` differentiates the method with its object a tree of attributes
    (`--wrt self`): the generated gradient takes the object and gives a dict of them."""
    out = tmp_path / "method.py"
    spec = "examples/model_class.py:SoftmaxClassifier.loss"
    result = _run("emit", spec, "--wrt", "self", "-o", str(out))
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    assert "def grad_loss_leaves(self_W, self_b, x, labels" in text
    assert "grads = grad_loss_leaves(self.W, self.b, x, labels)" in text
    assert '    return {"W": grads[0], "b": grads[1]}' in text
    spec_ = importlib.util.spec_from_file_location("gen_method", out)
    generated = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(generated)
    module = cli._load_module(EXAMPLES / "model_class.py")
    model, x, labels = module.inputs(np.random.default_rng(1))["SoftmaxClassifier.loss"]
    got = generated.grad_loss(model, x, labels)
    expected = s2sad.grad(model.loss, wrt="self")(x, labels)
    assert sorted(got) == ["W", "b"]
    for k in got:
        np.testing.assert_allclose(got[k], expected[k], rtol=1e-12)
    missing = _run("emit", "examples/model_class.py:SoftmaxClassifier.fit")
    assert "has no function named 'SoftmaxClassifier.fit'" in missing.stderr


def test_emit_all_check_reports_a_stale_file(tmp_path, capsys):
    assert cli.emit_all(str(EXAMPLES), str(tmp_path), check=False) == 0
    victim = sorted(tmp_path.glob("*.py"))[0]
    victim.write_text(victim.read_text() + "# edited by hand\n")
    assert cli.emit_all(str(EXAMPLES), str(tmp_path), check=True) == 1
    assert f"stale: {victim}" in capsys.readouterr().err


def test_emit_to_stdout_has_header_and_function():
    result = _run("emit", "examples/mlp.py:loss", "--wrt", "W1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith('"""Adjoint of loss from examples/mlp.py:')
    assert "mode=grad, wrt=W1" in result.stdout and "def grad_loss(" in result.stdout


def test_emit_vjp_mode_module(tmp_path):
    out = tmp_path / "vjp_chain.py"
    result = _run(
        "emit", "examples/broadcasting.py:chain", "--mode", "vjp", "--wrt", "y", "-o", str(out)
    )
    assert result.returncode == 0, result.stderr
    spec = importlib.util.spec_from_file_location("vjp_chain", out)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    x, y, z = (np.ones((2, 2, 2)), np.eye(2), np.ones((2, 2, 2)))
    value, pullback = mod.vjp_chain(x, y, z)
    assert value == pytest.approx(16.0)
    np.testing.assert_allclose(pullback(1.0), s2sad.grad(_chain(), wrt=1)(x, y, z))


def test_emit_into_a_directory_names_the_module(tmp_path, capsys):
    """`-o DIR/` (or an existing directory) writes the module under the name `--all` gives it;
    the name is decided before the transform, and the directory is made."""
    spec = "examples/broadcasting.py:chain"
    assert cli.main(["emit", spec, "--wrt", "y", "-o", f"{tmp_path}/new/"]) == 0
    made = tmp_path / "new" / "broadcasting_chain_grad.py"
    assert made.read_text().startswith('"""Adjoint of chain') and "wrote" in capsys.readouterr().err
    assert cli.main(["emit", spec, "--mode", "vjp", "--wrt", "y", "-o", str(tmp_path)]) == 0
    assert "def vjp_chain(" in (tmp_path / "broadcasting_chain_vjp.py").read_text()


def _chain():
    return cli._load_module(EXAMPLES / "broadcasting.py").chain


def test_emit_of_a_function_taking_a_function_is_refused_with_the_way_out(tmp_path):
    source = (
        "import numpy as np\n\n\ndef rhs(y):\n    return np.sin(y)\n\n\n"
        "def integrate(f, y0):\n    return np.sum(y0 + 0.1 * f(y0))\n\n\n"
        "def inputs(rng):\n    return {'integrate': (rhs, np.ones(2))}\n"
    )
    (tmp_path / "takes_f.py").write_text(source)
    result = _run("emit", f"{tmp_path / 'takes_f.py'}:integrate", "--wrt", "y0")
    assert result.returncode == 1
    assert "integrate takes a function (f)" in result.stderr and "passes it" in result.stderr


def test_show_interleaves_source_and_adjoint():
    result = _run("show", "examples/mlp.py:loss", "--wrt", "W1")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    src = next(i for i, line in enumerate(lines) if "h = np.tanh(x @ W1 + b1)" in line)
    block = lines[src + 1 : src + 8]
    assert any("primal  | h_matmul = x @ W1" in line for line in block)
    assert any("adjoint | dW1 = matmul_vjp_rhs(" in line for line in block)


@pytest.mark.parametrize(
    "args, message",
    [
        (["emit", "nope.py:f"], "no such file: nope.py"),
        (["emit", "examples/mlp.py:missing"], "has no function named 'missing'"),
        (["emit", "examples/mlp.py"], "expected PATH.py:FUNC"),
        (["emit", "examples/mlp.py:loss", "--wrt", "zz"], "wrt='zz' is not a parameter"),
    ],
)
def test_errors_are_one_line_without_traceback(args, message):
    result = _run(*args)
    assert result.returncode == 1
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("s2sad: error: ")


def test_import_failure_and_unsupported_construct(tmp_path):
    (tmp_path / "broken.py").write_text("import numpy as np\nraise RuntimeError('boom')\n")
    result = _run("emit", str(tmp_path / "broken.py") + ":f")
    assert result.returncode == 1 and "importing" in result.stderr and "boom" in result.stderr
    (tmp_path / "loop.py").write_text(
        "def f(x):\n    with open(x):\n        x = x * 2\n    return x\n"
    )
    result = _run("emit", str(tmp_path / "loop.py") + ":f")
    assert result.returncode == 1 and "`with` blocks" in result.stderr
    assert "loop.py:2" in result.stderr and "Traceback" not in result.stderr
    debug = _run_command("--debug", "emit", str(tmp_path / "loop.py") + ":f")
    assert "Traceback" in debug.stderr


@pytest.mark.parametrize("command", [[], ["emit"], ["show"]])
def test_help_is_complete(command):
    result = (_run if command else _run_command)(*command, "--help")
    assert result.returncode == 0
    text = result.stdout
    if command:
        for flag in ("--wrt", "--mode", "PATH.py:FUNC"):
            assert flag in text
    else:
        assert "emit" in text and "show" in text and "imported" in text
    if command == ["emit"]:
        assert "--all" in text and "-o" in text and "--check" in text


def test_console_script_entry_point_is_declared():
    text = (ROOT / "pyproject.toml").read_text()
    assert 's2sad = "s2sad.cli:main"' in text


def test_emitted_jit_module_carries_only_the_helpers_it_calls(tmp_path):
    """`emit --jit` embeds the Numba forms the gradient calls, with those they call in turn,
    not all of them: a module compiles only what it uses."""
    from s2sad.rules.helpers import numba_source

    out = tmp_path / "spring_jit.py"
    result = _run("emit", "examples/physics.py:spring_energy", "--jit", "-o", str(out))
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    assert "def getitem_vjp(" in text and "def _sum_to(" in text  # called, and called by a form
    assert "eigh" not in text and "cholesky" not in text  # forms nothing here calls
    assert text.count("\ndef ") < numba_source().count("\ndef ") // 3
    assert _import_without_s2sad(out).startswith("ok")
    spec = importlib.util.spec_from_file_location("spring_jit", out)
    generated = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generated)
    module = cli._load_module(EXAMPLES / "physics.py")
    args = module.inputs(np.random.default_rng(0))["spring_energy"]
    wrt = module.EMIT["spring_energy"]["wrt"]
    expected = s2sad.grad(module.spring_energy, wrt=tuple(wrt))(*args)
    got = generated.grad_spring_energy(*args)
    for e, g in zip(expected, got if isinstance(got, tuple) else (got,)):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)


def test_emitted_jit_module_of_a_loop_runs_standalone(tmp_path):
    """A loop summing an input's cotangent starts the sum with `sum_zeros_like`, whose Numba
    form the module must carry in full (it called one the module did not define)."""
    out = tmp_path / "smooth_jit.py"
    result = _run(
        "emit", "examples/loops.py:smooth", "--jit", "--wrt", "x", "--wrt", "a", "-o", str(out)
    )
    assert result.returncode == 0, result.stderr
    assert "sum_zeros_like(" in out.read_text()
    assert _import_without_s2sad(out).startswith("ok")
    spec = importlib.util.spec_from_file_location("smooth_jit", out)
    generated = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generated)
    module = cli._load_module(EXAMPLES / "loops.py")
    args = module.inputs(np.random.default_rng(0))["smooth"]
    expected = s2sad.grad(module.smooth, wrt=(0, 1))(*args)
    for e, g in zip(expected, generated.grad_smooth(*args)):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)
    # an index out of range the compiled code's check meets is told at the user's line, as
    # in-process jit tells it (the module's Python version, run again, finds it)
    with pytest.raises(IndexError, match=r"size 0\n  at \S*loops.py line 17 \(`y\[0\] = x\[0\]`\)"):
        generated.grad_smooth(np.zeros(0), 0.7)


def test_wrt_by_position_is_the_same_module_as_by_name():
    by_name = cli.emit_text("examples/mlp.py:loss", ["W1"], "grad")
    assert cli.emit_text("examples/mlp.py:loss", ["0"], "grad") == by_name


def zero_d_sum(x):
    s = np.zeros(())
    for i in range(x.shape[0]):
        s += np.sum(x[i] ** 2)
    return s


@pytest.mark.parametrize("f", [zero_d_sum])
def test_emitted_jit_module_compiles_without_ranks(tmp_path, f):
    """A module `emit --jit` writes knows no argument's rank: a loop's 0-d array (`np.zeros(())`
    then `s += np.sum(...)`) is carried as a number, so Numba compiles it (reductions: the test
    below); the gradient is Python mode's."""
    name = f"emitted_{f.__name__}"
    out = tmp_path / f"{name}.py"
    out.write_text(cli.emit_text(f"{__file__}:{f.__name__}", ["x"], "grad", jit=True))
    spec = importlib.util.spec_from_file_location(name, out)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x = np.random.default_rng(0).normal(size=(4, 3))
    got = getattr(module, f"grad_{f.__name__}")(x)
    np.testing.assert_allclose(got, s2sad.grad(f)(x), rtol=1e-12, atol=1e-14)
    assert got.dtype == x.dtype and got.shape == x.shape


CUSTOM = """
import numpy as np
import s2sad


@s2sad.custom_vjp
def safe_norm(v):
    return np.sqrt(np.sum(v * v))


@safe_norm.defvjp
def safe_norm_vjp(dy, y, v):
    return dy * v / max(y, 1e-12)


def custom_norms(v):
    return safe_norm(v) ** 2 + safe_norm(2 * v)
"""


def test_emitted_jit_module_compiles_a_custom_vjp_and_its_rule(tmp_path):
    """`emit --jit` of code calling a custom_vjp function writes it and its rule compiled by
    Numba, as in-process jit="strict" runs them (written as plain functions, the first call
    failed: "Untyped global name 'safe_norm'"), and numpy is imported once."""
    (tmp_path / "custom_norms.py").write_text(CUSTOM)
    text = cli.emit_text(f"{tmp_path / 'custom_norms.py'}:custom_norms", ["v"], "grad", jit=True)
    assert text.count("import numpy as np") == 1
    assert '@njit(cache=True, error_model="numpy", boundscheck=True)\ndef safe_norm(' in text
    out = tmp_path / "emitted_custom_norms.py"
    out.write_text(text)
    spec = importlib.util.spec_from_file_location("emitted_custom_norms", out)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    v = np.random.default_rng(0).normal(size=4)
    got = module.grad_custom_norms(v)
    np.testing.assert_allclose(got, 2 * v + 2 * v / np.linalg.norm(v), rtol=1e-12)


def test_the_readmes_tour_shows_the_code_s2sad_prints():
    """README's "unedited" generated gradient of examples/mlp.py's loss is what `s2sad.source`
    prints today (it showed `unbroadcast(-dloss_sub, log_norm)` after the code had changed)."""
    module = cli._load_module(EXAMPLES / "mlp.py")
    printed = s2sad.source(s2sad.grad(module.loss, wrt=("W1", "b1", "W2", "b2")))
    assert f"```python\n{printed}```" in (ROOT / "README.md").read_text()


def reductions_of_unknown_rank(x, v):
    """Reductions a module `emit --jit` writes without ranks: of a number (`v.sum(0)` of a
    vector) then a method, of a vector over its axis, over one axis given as a tuple, and
    `np.linalg.norm` over an axis (Numba's takes none)."""
    a = v.sum(0).max() + v.std(axis=0).sum() + np.sum(x.std(axis=0))
    return a + np.sum(x.mean(axis=(0,)) ** 2) + np.sum(np.linalg.norm(x, axis=1))


def test_emitted_jit_module_reduces_values_of_unknown_rank(tmp_path):
    """`v.sum(0).max()` (a number's method), `x.mean(axis=(0,))` and their kin compile in a
    module `emit --jit` writes (the reductions' helpers take numbers and one-axis tuples); the
    gradients are Python mode's and central differences', in the inputs' dtypes and shapes."""
    out = tmp_path / "emitted_unknown_rank.py"
    text = cli.emit_text(f"{__file__}:reductions_of_unknown_rank", ["x", "v"], "grad", jit=True)
    out.write_text(text)
    spec = importlib.util.spec_from_file_location("emitted_unknown_rank", out)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rng = np.random.default_rng(1)
    x, v = rng.uniform(0.5, 1.5, (4, 3)), rng.uniform(0.5, 1.5, 5)
    got = module.grad_reductions_of_unknown_rank(x, v)
    want = s2sad.grad(reductions_of_unknown_rank, wrt=(0, 1))(x, v)
    for k, (g, w, a) in enumerate(zip(got, want, (x, v))):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)
        assert g.dtype == a.dtype and g.shape == a.shape
        fd = np.zeros_like(a)
        for i in np.ndindex(a.shape):
            step = np.zeros_like(a)
            step[i] = 1e-6
            up, down = ((x + step, v), (x - step, v)) if k == 0 else ((x, v + step), (x, v - step))
            fd[i] = (reductions_of_unknown_rank(*up) - reductions_of_unknown_rank(*down)) / 2e-6
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)


def test_emitted_jit_module_of_a_function_taking_a_dict_reads_inputs(tmp_path):
    """`emit --jit` of a function taking a dict of parameters specializes on the file's
    `inputs(rng)`, as emit without --jit does (it refused, asking for those very inputs): the
    compiled function takes the leaves and a plain one of the function's name the dict. (Not
    imported here: Numba's compile of it costs seconds; the wrapper is the one the module
    without --jit has, whose numbers tests above check.)"""
    text = cli.emit_text(f"{EXAMPLES / 'mlp_dict.py'}:loss", ["params"], "grad", jit=True)
    assert "_grad_loss_jit = njit(" in text
    # (its caller has no workspace to pass: none taken, no pool helper carried; numba_forms.py)
    assert "def grad_loss_leaves(params_W0, params_b0, params_W1, params_b1, x, y):" in text
    assert "def grad_loss(params, x, y):" in text
    assert "workspace=None" not in text and "pooled" not in text and "POOLED_BYTES" not in text
    call = 'grad_loss_leaves(params["W0"], params["b0"], params["W1"], params["b1"], x, y)'
    assert f"grads = {call}" in text
    assert 'return {"W0": grads[0], "b0": grads[1], "W1": grads[2], "b1": grads[3]}' in text
    compile(text, "mlp_dict_jit.py", "exec")


def test_emit_of_a_loss_and_aux_function_hints_what_the_command_can_do(tmp_path, capsys):
    """The command has no has_aux: its hint is a function returning the loss alone, which
    emits, or --mode vjp (it hinted `has_aux=True`, which no flag passes)."""
    source = (
        "import numpy as np\n\n\ndef loss(w, x):\n    z = x * w\n"
        "    return np.sum(z**2), np.max(z)\n"
    )
    (tmp_path / "aux_cli.py").write_text(source)
    assert cli.main(["emit", f"{tmp_path / 'aux_cli.py'}:loss"]) == 1
    err = capsys.readouterr().err
    assert "returns a tuple of 2 values" in err and "has_aux=True" not in err
    wrapper = "def loss_value(w, x): return loss(w, x)[0]"
    assert f"`{wrapper}` next to loss" in err and "--mode vjp" in err
    (tmp_path / "aux_cli_value.py").write_text(source + "\n\n" + wrapper + "\n")
    assert cli.main(["emit", f"{tmp_path / 'aux_cli_value.py'}:loss_value"]) == 0
    assert "def grad_loss_value(w, x):" in capsys.readouterr().out
