"""Compiling generated code with Numba (`jit=True` or `jit="strict"`).

The generated source is written to a file in s2sad's cache directory, keyed by its text and
s2sad's version, and imported from there, so Numba's on-disk cache (`cache=True`) serves a
second process without compiling again. Runtime helpers are replaced by versions Numba can
compile; a helper Numba cannot type makes compilation fail, and then `jit="strict"` raises
`JitError` naming it while `jit=True` warns and runs the Python version.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import os
import re
import sys
import warnings
from pathlib import Path

import numpy as np

from .errors import S2SADError


class JitError(S2SADError):
    """Numba could not compile a generated function (`jit="strict"`)."""


class JitFallbackWarning(UserWarning):
    """`jit=True` runs the plain Python version because Numba could not compile it."""


def cache_dir() -> Path:
    root = os.environ.get("S2SAD_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "s2sad"
    )
    return Path(root)


# the Numba versions of the runtime helpers (s2sad/numba_helpers.py)
_HELPERS = (Path(__file__).parent / "numba_helpers.py").read_text()
_IMPORT = (
    "import math\n\nimport numpy as np\nfrom numba import njit\n\n"
    "from s2sad.numba_helpers import *  # noqa: F401,F403\n"
)


def module_text(source: str, name: str | None = None, embed: bool = True) -> str:
    """`source` with each function it defines compiled by Numba, and the Numba helpers before it:
    their text (`embed`, for a standalone module) or an import of s2sad's module of them, which
    a process then compiles once for all generated functions. (`name` is accepted for older
    callers; every top-level function is compiled.)"""
    from .compile import defined_functions

    text = source
    tail = []
    for fn in defined_functions(source):
        text = text.replace(f"def {fn}(", f"def _{fn}_py(", 1)
        tail.append(f"{fn} = njit(cache=True)(_{fn}_py)")
    head = _HELPERS if embed else _IMPORT
    return head + "\n\n" + text + "\n\n" + "\n".join(tail) + "\n"


def _module_for(source: str, name: str, fresh: bool = False):
    """Import `source` (compiled by Numba, the helpers imported) from a file in the cache
    directory. The file's name hashes its text, the helpers' text and s2sad's version, so Numba's
    disk cache is never read for other code. `fresh` first deletes Numba's cached machine code
    for it (it could not be loaded)."""
    from . import __version__

    text = module_text(source, name, embed=False)
    digest = hashlib.sha256(f"{__version__}\n{_HELPERS}\n{text}".encode()).hexdigest()[:20]
    directory = cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"s2sad_{name}_{digest}.py"
    if not path.exists() or path.read_text() != text:
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(text)
        os.replace(tmp, path)  # atomic: two processes compiling at once both see a whole file
    module_name = path.stem
    if fresh:
        for stale in directory.glob(f"__pycache__/{module_name}.*"):
            stale.unlink(missing_ok=True)
        sys.modules.pop(module_name, None)
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def jit_copy(node: ast.expr, rank) -> ast.expr:
    """A copy of what `node` reads, for Numba, whose floats have no `.copy()`: an element needs
    none, an array is copied, and where the rank is unknown `snapshot` decides when compiled."""
    if rank == 0:
        return node
    if rank is None:
        return ast.Call(ast.Name("snapshot", ast.Load()), [node], [])
    return ast.Call(ast.Attribute(node, "copy", ast.Load()), [], [])


def _constant(node: ast.expr) -> bool:
    """An expression of constants and operators only (`-1.65 * 0.74 < 0.6`)."""
    return all(
        isinstance(n, (ast.Constant, ast.expr_context, ast.operator, ast.unaryop, ast.cmpop))
        or isinstance(n, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.boolop))
        for n in ast.walk(node)
    )


def drop_constant_branches(stmts: list) -> list:
    """Statements with each branch on a condition of constants replaced by the branch taken.

    Numba drops the branch a constant condition never takes before it types the code: the
    primal compiles even when that branch does not. The gradient's tapes are typed by their
    pushes, and a tape pushed only in a dropped branch would have no type; so the jitted
    transform decides these branches itself, before it differentiates."""
    counts: dict[str, int] = {}
    values: dict[str, ast.expr] = {}
    for node in ast.walk(ast.Module(list(stmts), [])):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        counts[n.id] = counts.get(n.id, 0) + 1
                        values[n.id] = node.value
        elif isinstance(node, ast.For):
            for n in ast.walk(node.target):
                if isinstance(n, ast.Name):
                    counts[n.id] = counts.get(n.id, 0) + 2

    def decided(test: ast.expr):
        if isinstance(test, ast.Name) and counts.get(test.id) == 1:
            test = values[test.id]
        if not _constant(test):
            return None
        try:
            return bool(eval(compile(ast.Expression(test), "<condition>", "eval"), {}))
        except Exception:  # left to Numba
            return None

    def block(body: list) -> list:
        out = []
        for stmt in body:
            if isinstance(stmt, ast.If):
                taken = decided(stmt.test)
                if taken is not None:
                    out += block(stmt.body if taken else stmt.orelse)
                    continue
                stmt.body, stmt.orelse = block(stmt.body), block(stmt.orelse)
            elif isinstance(stmt, (ast.For, ast.While)):
                stmt.body = block(stmt.body)
            out.append(stmt)
        return out

    return block(list(stmts))


def lower_for_numba(stmts: list, rank_of=lambda node: None) -> list:
    """Adjoint statements in forms Numba compiles, and compiles fast: a reshape back to an
    input's shape copies a strided cotangent first (`reshape_like`); `np.add.at` and additions
    into more than one element (`d[i, :] += g`) become `add_at`; `np.array(x)` is `np.copy(x)`,
    `np.stack` of numbers `np.array` and of a list of arrays `np.stack` of a tuple,
    the trace over the last two axes `trace_last`, and `np.where` of numbers a conditional
    expression. `rank_of` gives the rank of an expression where known."""
    from .ops import _index_expr

    class Lower(ast.NodeTransformer):
        def visit_AugAssign(self, node: ast.AugAssign) -> ast.stmt:
            # d[index] += g: add_at picks an element store or an in-place add into the view
            # by the index's type (Numba's own slice assignment compiles slowly)
            self.generic_visit(node)
            if (
                isinstance(node.target, ast.Subscript)
                and isinstance(node.op, ast.Add)
                and rank_of(node.target) != 0
            ):
                index = node.target.slice
                if isinstance(index, ast.Slice) or (
                    isinstance(index, ast.Tuple)
                    and any(isinstance(e, ast.Slice) for e in index.elts)
                ):
                    index = _index_expr(index)
                call = ast.Call(
                    ast.Name("add_at", ast.Load()), [node.target.value, index, node.value], []
                )
                new = ast.Expr(call)
                new.src = getattr(node, "src", None)
                new.src_parsed = getattr(node, "src_parsed", None)
                return new
            return node

        def visit_Call(self, node: ast.Call) -> ast.expr:
            self.generic_visit(node)
            text = ast.unparse(node.func)
            if (
                text == "np.reshape"
                and len(node.args) == 2
                and isinstance(node.args[1], ast.Call)
                and ast.unparse(node.args[1].func) == "np.shape"
                and not node.keywords
            ):
                return ast.Call(
                    ast.Name("reshape_like", ast.Load()), [node.args[0], node.args[1].args[0]], []
                )
            if text == "np.add.at":
                node.func = ast.Name("add_at", ast.Load())
            if text == "np.array" and len(node.args) == 1 and isinstance(node.args[0], ast.Name):
                node.func = ast.parse("np.copy", mode="eval").body  # Numba copies no arrays so
            if (
                text == "np.stack"
                and len(node.args) == 1
                and isinstance(node.args[0], ast.List)
                and not node.keywords
                and all(rank_of(e) == 0 for e in node.args[0].elts)
            ):  # of numbers (np.array([a, b]) of the user's code): Numba stacks only arrays
                node.func = ast.parse("np.array", mode="eval").body
            elif (
                text == "np.stack"
                and node.args
                and isinstance(node.args[0], ast.List)
                and all((rank_of(e) or 0) > 0 for e in node.args[0].elts)
            ):  # of arrays: Numba takes them as a tuple
                node.args[0] = ast.Tuple(node.args[0].elts, ast.Load())
            if (
                text == "np.where"
                and len(node.args) == 3
                and not node.keywords
                and all(rank_of(a) == 0 for a in node.args)
            ):  # of numbers: Numba's np.where would give a 0-d array
                return ast.IfExp(node.args[0], node.args[1], node.args[2])
            keywords = {k.arg: ast.unparse(k.value) for k in node.keywords}
            if text == "np.trace" and keywords == {"axis1": "-2", "axis2": "-1"}:
                return ast.Call(ast.Name("trace_last", ast.Load()), node.args, [])
            return node

    lower = Lower()
    return [lower.visit(stmt) if isinstance(stmt, ast.AST) else stmt for stmt in stmts]


class Jitted:
    """The functions of a generated source compiled by Numba on their first call, or their
    Python fallbacks."""

    def __init__(self, compiled):
        self.compiled = compiled
        self.namespace = None
        self.failed = {}  # function name -> the exception Numba raised for it
        self.module_failed = None
        self.reloaded = False

    def __call__(self, args, strict: bool, name: str | None = None):
        name = name or self.compiled.name
        if self.namespace is None and self.module_failed is None:
            self.load()
        failed = self.module_failed or self.failed.get(name)
        if failed is None:
            try:
                return self.namespace[name](*args)
            except Exception as exc:
                if _from_numba_cache(exc) and not self.reloaded:
                    # a damaged cache file: delete it and compile again, trusting nothing
                    self.reloaded = True
                    self.load(fresh=True)
                    return self(args, strict, name)
                if not _is_numba_error(exc):
                    raise
                self.failed[name] = failed = exc
        return self.fallback(name, failed, args, strict)

    def load(self, fresh: bool = False):
        try:
            module = _module_for(self.compiled.source, self.compiled.name, fresh)
            namespace = vars(module)
            for key, value in self.compiled.globals.items():
                if namespace.setdefault(key, value) is not value:
                    # the same code text calling another function under this name: Numba has
                    # compiled the first one into it (data never gets here: it is an argument)
                    raise JitError(
                        f"'{key}' names another object than in an earlier compile of the same "
                        "generated code in this process",
                        hint="give the two functions different names",
                    )
            self.namespace = namespace
        except Exception as exc:  # the module itself failed: report like a typing error
            self.module_failed = exc

    def fallback(self, name: str, failed, args, strict: bool):
        message = f"Numba cannot compile {name}: {_reason(failed)}"
        if strict:
            raise JitError(
                message,
                hint="use jit=True to fall back to Python, or keep to "
                "operations Numba supports in nopython mode",
            )
        warnings.warn(message + "; running the Python version", JitFallbackWarning, stacklevel=3)
        return self.compiled.functions.get(name, self.compiled.function)(*args)


_TELLING = (
    "Untyped global name",
    "NameError",
    "No implementation of function",
    "Unknown attribute",
    "Cannot determine Numba type",
    "Invalid use of",
    "Cannot unify",
    "Cannot infer the type",
    "not supported",
    "scipy",
)


def _reason(exc) -> str:
    """The line of Numba's message that names the operation, and the generated line it was at."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    reason = next(
        (line for line in lines if any(t in line for t in _TELLING)),
        lines[0] if lines else type(exc).__name__,
    )
    where = next(
        (
            lines[i + 1]
            for i, line in enumerate(lines[:-1])
            if line.startswith("File ") and "line" in line
        ),
        "",
    )
    return reason[:240] + (f" (at `{where[:120]}`)" if where and not where.startswith("<") else "")


def _from_numba_cache(exc) -> bool:
    """Whether `exc` was raised while Numba read its on-disk cache (a truncated or foreign
    index or data file: unpickling errors of every kind)."""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.replace("\\", "/").endswith("numba/core/caching.py"):
            return True
        tb = tb.tb_next
    return False


def _is_numba_error(exc) -> bool:
    """A failure to compile: Numba's own errors, and the ImportError its linear algebra raises
    while compiling when SciPy is missing ("scipy 0.16+ is required for linear algebra")."""
    try:
        from numba.core.errors import NumbaError
    except ImportError:  # pragma: no cover
        return False
    return isinstance(exc, NumbaError) or (
        isinstance(exc, ImportError) and "scipy" in str(exc).lower()
    )


__all__ = ["JitError", "JitFallbackWarning", "Jitted", "cache_dir", "np"]
