"""The `s2sad` command: write adjoints of functions in a file as standalone modules."""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import os
import stat
import sys
from pathlib import Path

import numpy as np

from .version import __version__
from .transformed import JVPTransformed, Transformed
from .transform_cache import transform
from .errors import S2SADError
from .diskcache import atomic_write
from .standalone import jit_module, standalone_module
from .pipeline.emit import format_source
from .trees import wrapper_source

_HELP = """\
Write the adjoint of a Python/NumPy function as a standalone, readable module.

The file named in PATH.py:FUNC is imported (so its module-level code runs) to resolve the names the
function uses. The emitted module imports numpy and math only, never s2sad.
"""


class CLIError(Exception):
    pass


def load_function(spec: str):
    path, sep, name = spec.rpartition(":")
    if not sep or not path or not name:
        raise CLIError(f"expected PATH.py:FUNC, got {spec!r}")
    module = _load_module(Path(path))
    func = module
    for part in name.split("."):  # `Model.loss`: a method, differentiated with `self` a tree
        func = getattr(func, part, None)
    if func is None:
        raise CLIError(f"{path} has no function named {name!r}")
    return func


def _load_module(file: Path):
    """Import `file` as a module (once per process), so its functions' names resolve."""
    if not file.is_file():
        raise CLIError(f"no such file: {file}")
    module_name = f"_s2sad_cli_{file.stem}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    sys.path.insert(0, str(file.resolve().parent))
    try:
        mod_spec = importlib.util.spec_from_file_location(module_name, file)
        module = importlib.util.module_from_spec(mod_spec)
        sys.modules[module_name] = module
        mod_spec.loader.exec_module(module)
    except Exception as exc:  # the user's module failed to import
        sys.modules.pop(module_name, None)
        raise CLIError(f"importing {file} failed: {type(exc).__name__}: {exc}") from exc
    finally:
        sys.path.pop(0)
    return module


def _wrt(func, names):
    if not names:
        return 0
    # `--wrt 1` is the second parameter, as `wrt=1` is (no Python name is all digits)
    names = [int(n) if n.isdigit() else n for n in names]
    return tuple(names) if len(names) > 1 else names[0]


def emit_text(spec: str, wrt_names, mode: str, jit: bool = False) -> str:
    func = load_function(spec)
    if mode == "jvp":
        transformed = JVPTransformed(func, _wrt(func, wrt_names), mode)
    else:
        transformed = Transformed(func, _wrt(func, wrt_names), mode)
    trees = _with_trees(spec, func, transformed, mode, jit)
    if trees is not None:
        return trees
    if jit:
        # (no workspace parameter: the module's caller has none to pass, pipeline/numba_forms.py)
        compiled = transform(func, transformed.wrt, mode, None, True, workspace=False)
        origin = f"{_project_path(Path(spec.rpartition(':')[0]))}:{func.__code__.co_firstlineno}"
        return jit_module(compiled, func, mode, transformed.wrt, __version__, origin)
    origin = f"{_project_path(Path(spec.rpartition(':')[0]))}:{func.__code__.co_firstlineno}"
    return standalone_module(transformed.compiled, func, mode, transformed.wrt, __version__, origin)


def _with_trees(spec: str, func, transformed, mode: str, jit: bool) -> str | None:
    """The module for a function taking parameter trees, specialized on the structure of its
    module's example arguments (`inputs(rng)[name]`): the generated function takes the leaves,
    and a wrapper of the function's name takes the trees whole (grad, with or without --jit).
    None for a function whose example arguments hold no tree. A method (`Model.loss`) takes its
    object as `self`, a tree of its attributes."""
    module = sys.modules.get(func.__module__)
    example = getattr(module, "inputs", None)
    if example is None or mode != "grad":
        return None
    args = example(np.random.default_rng(0)).get(spec.rpartition(":")[2])
    if args is None:
        return None
    bound = transformed._bind(tuple(args), {})
    if bound.passed:
        raise CLIError(
            f"{spec}: {func.__name__} takes a function ({', '.join(bound.passed)}), which a "
            "standalone module cannot be specialized on; emit a function that passes it "
            f"(`def loss(...): return {func.__name__}(rhs, ...)`)"
        )
    if not bound.trees:
        return None
    compiled = transform(transformed.func, bound.wrt, mode, None, jit, bound.trees, workspace=False)
    inner = f"{compiled.name}_leaves"
    params = list(inspect.signature(func).parameters)
    wrapper = wrapper_source(
        compiled.name, inner, params, bound.trees, bound.layout, transformed.wrt_tuple
    )
    if wrapper is None:
        raise CLIError(f"{spec}: s2sad emit spells only dicts, lists and tuples of arrays")
    origin = f"{_project_path(Path(spec.rpartition(':')[0]))}:{func.__code__.co_firstlineno}"
    # (with --jit, the one `def {compiled.name}(` is the plain function calling the compiled one)
    emit = jit_module if jit else standalone_module
    text = emit(compiled, func, mode, bound.wrt, __version__, origin)
    text = text.replace(f"def {compiled.name}(", f"def {inner}(", 1)
    return format_source(text + "\n\n" + wrapper)


def _project_path(file: Path) -> str:
    """`file` relative to its project root (the nearest pyproject.toml or .git), so the header
    of an emitted module does not depend on the directory the command ran in."""
    file = file.resolve()
    for parent in file.parents:
        if (parent / "pyproject.toml").is_file() or (parent / ".git").exists():
            return file.relative_to(parent).as_posix()
    return file.name


def emit_all(directory: str, outdir: str | None, check: bool) -> int:
    """Emit the EMIT list of every example file; with `check`, report stale files instead."""
    if outdir is None:
        raise CLIError("--all needs -o OUTDIR")
    root = Path(directory)
    if not root.is_dir():
        raise CLIError(f"no such directory: {directory}")
    stale = []
    for file in sorted(root.glob("*.py")):
        if "EMIT" not in file.read_text():
            continue  # only files that list functions to emit are imported
        module = _load_module(file)
        for func_name, options in getattr(module, "EMIT", {}).items():
            mode = options.get("mode", "grad")
            text = emit_text(f"{file.as_posix()}:{func_name}", options.get("wrt"), mode)
            out = Path(outdir) / module_name(file, func_name, mode)
            if check:
                if not out.is_file() or out.read_text() != text:
                    stale.append(str(out))
            else:
                out.parent.mkdir(parents=True, exist_ok=True)
                write_output(out, text)
                print(f"wrote {out}")
    for name in stale:
        print(f"stale: {name}", file=sys.stderr)
    return 1 if stale else 0


def module_name(file: Path, func_name: str, mode: str, jit: bool = False) -> str:
    """The file name an emitted module gets in a directory: `loops_smooth_grad.py`."""
    return f"{file.stem}_{func_name.replace('.', '_')}_{mode}{'_jit' if jit else ''}.py"


def output_path(output: str, spec: str, mode: str, jit: bool) -> Path:
    """`-o`'s path: a directory (one that exists, or a name ending in a slash) takes the
    module under its `module_name`, as `--all` names them."""
    path = Path(output)
    if path.is_dir() or output.endswith(("/", os.sep)):
        file, _, func_name = spec.rpartition(":")
        return path / module_name(Path(file), func_name, mode, jit)
    return path


def write_output(path: Path, text: str) -> None:
    """Replace `path` with `text` whole (a reader never sees half a module, a failure leaves no
    temporary file): an existing file keeps its mode, a symbolic link at `path` is replaced by
    the file rather than written through, and a directory is refused."""
    if path.is_dir():
        raise CLIError(f"{path} is a directory: -o names the file to write (--all: a directory)")
    try:
        st = os.lstat(path)
        mode = stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else _new_file_mode()
    except FileNotFoundError:
        mode = _new_file_mode()
    try:
        with atomic_write(path, mode) as f:
            f.write(text.encode())
    except OSError as exc:
        raise CLIError(f"cannot write {path}: {exc.strerror or exc}") from None


def _new_file_mode() -> int:
    """The mode a file created now gets: 0666 less the process's umask."""
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


def show_text(spec: str, wrt_names, mode: str) -> str:
    """The user's source with the generated statements for each line beneath it."""
    func = load_function(spec)
    transformed = Transformed(func, _wrt(func, wrt_names), mode)
    blocks: dict[int, list[list[str]]] = {}
    current = None
    for line in transformed.compiled.source.splitlines():
        stripped = line.strip()
        if stripped.startswith("# line "):
            number = int(stripped[len("# line ") :].split(":")[0])
            current = []
            blocks.setdefault(number, []).append(current)
        elif stripped.startswith("#"):
            current = None
        elif current is not None and stripped and not stripped.startswith(("def ", "return")):
            current.append(stripped)
        if stripped.startswith(("def pullback", "return")) or not stripped:
            current = None
    lines, first = inspect.getsourcelines(func.__code__)  # the code it runs, decorated or not
    out = [f"# {transformed.compiled.name}: each source line, then its primal and adjoint code"]
    for offset, text in enumerate(lines):
        number = first + offset
        out.append(f"{number:4d} | {text.rstrip()}")
        for k, block in enumerate(blocks.get(number, [])):
            label = "primal " if k == 0 else "adjoint"
            out += [f"     {label} | {s}" for s in block]
    return "\n".join(out) + "\n"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="s2sad", description=_HELP, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"s2sad {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "target",
        metavar="PATH.py:FUNC",
        help="the file (imported to resolve names) and the function in it",
    )
    common.add_argument(
        "--wrt",
        action="append",
        metavar="NAME",
        help="differentiate with respect to this parameter, by name or position (repeatable; "
        "default: the first parameter)",
    )
    common.add_argument(
        "--mode",
        choices=["grad", "vjp", "value_and_grad", "jvp"],
        default="grad",
        help="grad: gradient of a scalar output (default); vjp: value and pullback(seed); "
        "value_and_grad: value and gradient; jvp: value and tangent (forward mode)",
    )
    emit_p = sub.add_parser(
        "emit",
        parents=[common],
        help="write a standalone adjoint module",
        description="Write a standalone adjoint module (imports numpy only).",
    )
    emit_p.add_argument(
        "-o",
        "--output",
        metavar="OUT.py",
        help="write here instead of stdout (a directory: under the name --all gives it; "
        "with --all: a directory)",
    )
    emit_p.add_argument(
        "--jit",
        action="store_true",
        help="compile the emitted function with numba.njit (the module then imports numba; "
        "grad, value_and_grad and jvp modes)",
    )
    emit_p.add_argument(
        "--all",
        action="store_true",
        help="PATH is a directory: emit every function listed in the EMIT dict "
        "of each .py file in it ({'func': {'wrt': [...], 'mode': ...}}) "
        "to OUTDIR/<file>_<func>_<mode>.py",
    )
    emit_p.add_argument(
        "--check",
        action="store_true",
        help="with --all: write nothing, exit 1 if any file in OUTDIR is stale",
    )
    sub.add_parser(
        "show",
        parents=[common],
        help="print the source with its adjoint by line",
        description="Print the function's source, each line followed by the primal "
        "and adjoint statements generated for it.",
    )
    return parser


def _cli_hint(exc: Exception, spec: str) -> Exception:
    """The error of a grad of a function returning `(loss, aux)`, with a way out the command's
    user can take: the command has no has_aux (a standalone module has no plain call of the
    function to compute the aux with), so the hint is a function returning the loss alone, or
    --mode vjp, whose module returns the tuple."""
    if getattr(exc, "tuple_output", None) is None:
        return exc
    func = load_function(spec)  # (imported already: the transform read it)
    name, params = func.__name__, ", ".join(inspect.signature(func).parameters)
    hint = (
        "the command emits the gradient of one scalar output and has no has_aux: add "
        f"`def {name}_value({params}): return {name}({params})[0]` next to {name} and emit "
        f"`{spec.rpartition(':')[0]}:{name}_value`, or emit {name} with --mode vjp (its module "
        "returns the tuple and a pullback taking a tuple of seeds)"
    )
    return type(exc)(exc.what, file=exc.file, line=exc.line, source=exc.source, hint=hint)


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "emit" and args.all:
            return emit_all(args.target, args.output, args.check)
        if args.command == "emit":
            out = args.output and output_path(args.output, args.target, args.mode, args.jit)
            text = emit_text(args.target, args.wrt, args.mode, args.jit)
            if out:
                if args.output.endswith(("/", os.sep)):  # (a directory named: made)
                    out.parent.mkdir(parents=True, exist_ok=True)
                write_output(out, text)
                print(f"wrote {out}", file=sys.stderr)
            else:
                sys.stdout.write(text)
        else:
            sys.stdout.write(show_text(args.target, args.wrt, args.mode))
    except (CLIError, S2SADError) as exc:
        if args.debug:
            raise
        exc = _cli_hint(exc, args.target)
        first = str(exc).splitlines()
        print(f"s2sad: error: {first[0]}", file=sys.stderr)
        for extra in first[1:]:
            print(f"s2sad: {extra.strip()}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
