"""Standalone modules: the generated code plus every runtime helper and user constant it uses,
so the file runs with NumPy alone and can be read, diffed and vendored.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import inspect
import math
import symtable
import sys
import textwrap
import types

import numpy as np

from .rules.helpers import NUMBA_HEADER, RUNTIME, constants_read, function_source
from .pipeline.emit import docstring, format_source
from .errors import S2SADError
from . import module_returns
from .jit import module_text
from .pipeline import bounds
from .pipeline.names import names_in, names_stored
from .pipeline.nodes import own_nodes
from .pipeline.libraries import is_library_code


def runtime_helpers(source: str) -> list[str]:
    """Helpers `source` calls, directly or through each other, in registration order."""
    needed, todo = set(), [source]
    while todo:
        for name in names_in(todo.pop()) & set(RUNTIME) - needed:
            needed.add(name)
            todo.append(inspect.getsource(RUNTIME[name]))
    order = list(RUNTIME)
    return sorted(needed, key=order.index)


def _literal(value) -> str | None:
    """Python source that evaluates to `value` in a module that imports numpy as np and math,
    or None. `repr` is not such source for every constant: `repr(float("inf"))` is `inf`."""
    if value is None or type(value) in (bool, int, str, bytes):
        return repr(value)
    if type(value) is float:
        return repr(value) if math.isfinite(value) else f"float({repr(value)!r})"
    if type(value) is complex:
        return f"complex({_literal(value.real)}, {_literal(value.imag)})"
    if type(value) in (tuple, list):
        items = [_literal(v) for v in value]
        if None in items and not all(v is None for v in value):
            return None
        items = [repr(None) if v is None else i for v, i in zip(value, items)]
        if type(value) is tuple:
            return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
        return f"[{', '.join(items)}]"
    if isinstance(value, np.generic) and hasattr(np, value.dtype.name):
        inner = _literal(value.item())
        return inner and f"np.{value.dtype.name}({inner})"
    if isinstance(value, np.ndarray) and value.size <= 1000 and hasattr(np, value.dtype.name):
        items = _literal(value.tolist())
        return items and f"np.array({items}, dtype=np.{value.dtype.name})"
    return None


# the modules of the objects s2sad's transforms make (a custom_vjp is the user's function)
_TRANSFORMS = ("s2sad.transformed", "s2sad.compose", "s2sad.jacobians", "s2sad.cuda")


def _constant(name: str, value, user_name: str | None = None) -> str:
    """`name = value` as source; `user_name`: the user's name of a global that generated code
    renames (`unbroadcast2` for a function `unbroadcast`, which would replace s2sad's)."""
    if isinstance(value, types.ModuleType):
        if not all(part.isidentifier() for part in value.__name__.split(".")):
            raise S2SADError(f"the module {value.__name__!r} cannot be imported by name")
        return f"import {value.__name__} as {name}" if value.__name__ != name else f"import {name}"
    literal = _literal(value)
    if literal is not None:
        return f"{name} = {literal}"
    if getattr(value, "compiles_itself", False):
        raise S2SADError(
            f"the generated code calls '{name}', a loop marked s2sad.checkpoint, whose gradient "
            "runs s2sad's revolve schedule and transforms at run time",
            hint="emit a copy of the function without s2sad.checkpoint (a taped loop), or "
            "call s2sad.grad at run time",
        )
    owner = getattr(value, "__self__", value)  # (a bound method: a composed gradient's rule)
    if type(owner).__module__ in _TRANSFORMS and not isinstance(value, type):
        raise S2SADError(  # a gradient s2sad made (`h = s2sad.grad(f)`), or its rule: not f
            f"the generated code calls '{name}' ({owner!r}), which s2sad made: a standalone "
            "module cannot hold it",
            hint="emit the gradient of a function that calls plain functions, or use s2sad "
            "itself (s2sad.grad(g)) for code calling transforms",
        )
    func = getattr(value, "func", value)  # a custom_vjp wraps the user's function
    library = not inspect.isfunction(func) or is_library_code(func)
    if library and _import_of(name, value):
        return _import_of(name, value)
    if _written_as_source(func, name, user_name):
        return _function_source(func, name)
    raise S2SADError(
        f"the generated code refers to '{name}' ({type(value).__name__}), which "
        "cannot be written into a standalone module",
        hint="make it a literal constant or a parameter of the function",
    )


def _written_as_source(func, name: str, user_name: str | None = None) -> bool:
    """Whether the user's function `func` is written into the module as its source, under the
    name generated code calls it by: its own, or one the resolver gave it (`modb_sq` for a
    second module's `sq`, `cube_vjp` for a custom_vjp rule the user named `cube_rule`). A lambda
    has no `def` to rename."""
    if not inspect.isfunction(func) or is_library_code(func):
        return False
    return func.__name__ in (name, user_name) or func.__name__ != "<lambda>"


def _import_of(name: str, value) -> str | None:
    """`from module import attr as name` for a library's function (or ufunc: SciPy's): the
    module, among those imported, is the public one of the fewest parts that holds it."""
    attr = getattr(value, "__name__", None)
    if not callable(value) or not isinstance(attr, str) or not attr.isidentifier():
        return None
    owners = [
        m
        for m, module in list(sys.modules.items())
        if module is not None
        and not any(part.startswith("_") for part in m.split("."))
        and getattr(module, attr, None) is value
    ]
    if not owners:
        return None
    module = min(owners, key=lambda m: (m.count("."), m))
    return f"from {module} import {attr}" + (f" as {name}" if name != attr else "")


def _function_source(func, name: str | None = None) -> str:
    """The user's function as source for the module, defined as `name` (its own by default): no
    decorators or annotations (names the module would not define); a function reading closure
    variables cannot be written."""
    if func.__code__.co_freevars:
        raise S2SADError(
            f"the generated code calls {func.__qualname__}, which reads the closure variables "
            f"{', '.join(func.__code__.co_freevars)}: it cannot be written into a standalone "
            "module",
            hint="define it at module level, reading module-level constants",
        )
    tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    node = tree.body[0]
    node.decorator_list = []
    node.name = name or node.name
    node.returns = None
    for arg in ast.walk(node.args):
        if isinstance(arg, ast.arg):
            arg.annotation = None
    return ast.unparse(tree)


def _with_dependencies(items: dict) -> dict:
    """`items` (name -> value) and, for each function among them written as source, the
    module-level names its body reads, from its own module (transitively). A name that means
    one thing here and another in a function's module cannot be written: refused."""
    out, todo = dict(items), list(items.items())
    while todo:
        name, value = todo.pop()
        func = getattr(value, "func", value)
        if not _written_as_source(func, name):
            continue  # a library's function is imported (`_constant`)
        for dep in sorted(free_globals(_function_source(func))):
            if dep in func.__globals__:
                dep_value = func.__globals__[dep]
            elif hasattr(builtins, dep):
                continue
            else:
                raise S2SADError(
                    f"{func.__qualname__} reads '{dep}', which its module does not define"
                )
            if dep in out and out[dep] is not dep_value:
                raise S2SADError(
                    f"'{dep}' names two things in the standalone module: {func.__qualname__}'s "
                    f"{dep} and the generated code's",
                    hint="rename one of them in the source",
                )
            if dep not in out:
                out[dep] = dep_value
                todo.append((dep, dep_value))
    return out


def free_globals(source: str) -> set[str]:
    """The names `source` reads from module level (or builtins) without binding them there."""
    table = symtable.symtable(source, "<generated>", "exec")
    bound = {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported()}
    free: set[str] = set()

    def walk(t, top: bool):
        for sym in t.get_symbols():
            name = sym.get_name()
            reads = sym.is_referenced() and (top and not sym.is_assigned() or sym.is_global())
            if reads and name not in bound:
                free.add(name)
        for child in t.get_children():
            walk(child, False)

    walk(table, True)
    return free


def check_module(text: str, what: str) -> str:
    """`text` if it is a module that runs: every name it reads is defined in it or a builtin,
    and (without Numba) executing it defines its functions. Else an S2SADError: a module that
    fails when imported or called must not be written."""
    missing = sorted(n for n in free_globals(text) if not hasattr(builtins, n))
    if missing:
        raise S2SADError(
            f"the standalone module for {what} would read {', '.join(missing)}, which it does "
            "not define",
            hint="make these literal constants or parameters of the function, or report this",
        )
    if "from numba import" not in text:
        try:
            exec(compile(text, "<standalone module>", "exec"), {"__name__": "s2sad_emit_check"})
        except Exception as exc:
            raise S2SADError(
                f"the standalone module for {what} fails when imported: "
                f"{type(exc).__name__}: {exc}",
                hint="report this; the non-standalone s2sad.grad still works",
            ) from None
    return text


def baked(compiled, func) -> tuple[str, dict]:
    """The generated source with the user's data as module constants, and every constant the
    source needs by name: each top-level function's data parameters default to the constant of
    their name, so a standalone module holds the values of the day it was written (it is
    regenerated, not kept in step)."""
    values = compiled.read(func)
    if values is None:
        raise S2SADError(
            f"the names {func.__qualname__} reads changed while its module was written; "
            "run the command again"
        )
    constants = dict(compiled.globals)
    constants.update(zip(compiled.data, values))
    if not compiled.data:
        return compiled.source, constants
    lines = [
        _with_defaults(line, compiled.data) if line.startswith("def ") else line
        for line in compiled.code.splitlines()
    ]
    return format_source("\n".join(lines) + "\n"), constants


def _with_defaults(line: str, data: tuple) -> str:
    """`def f(x, k):` as `def f(x, k=k):` for the data parameters `data` (the last ones)."""
    tree = ast.parse(line + "\n    pass").body[0]
    args = tree.args
    defaults = [ast.Name(name, ast.Load()) for name in data]
    if args.defaults:
        args.defaults[-len(data) :] = defaults
    else:
        args.defaults = defaults
    return f"def {tree.name}({ast.unparse(args)}):"


def standalone_module(compiled, func, mode: str, wrt, version: str, origin: str) -> str:
    """The text of a module defining `compiled`'s function with nothing of s2sad imported."""
    lines = [
        docstring(
            f"Adjoint of {func.__qualname__} from {origin}.\n\n"
            f"Generated by s2sad {version} (mode={mode}, wrt={', '.join(wrt)}). Do not edit: "
            "regenerate with `s2sad emit`.\n"
        ),
        "",
        "import math",
        "",
        "import numpy as np",
        "",
    ]
    source, constants = baked(compiled, func)
    source, returns = _returning_like_inputs(source, compiled.name, mode, wrt, func)
    for text in _constant_lines(compiled, constants, set(lines)):
        lines.append(text + ("\n\n" if text.startswith("def ") else ""))
    helpers = runtime_helpers(source)
    if "grad_seed" in helpers:
        lines.append("NonScalarOutputError = ValueError")
    lines += constants_read([RUNTIME[name] for name in helpers]).values()
    for name in helpers:
        lines += ["", "", function_source(RUNTIME[name])]
    lines += ["", "", *(inspect.getsource(f) for f in returns), source]
    return check_module(format_source("\n".join(lines)), func.__qualname__)


def _users_parameters(args: ast.arguments, users: list) -> list[str]:
    """The generated function's parameters standing for the user's `users` (inspect's), in
    their order: its positional ones, then its keyword-only ones (the data it takes sit
    between them), or all positional where a jitted function takes them so (emit.py)."""
    positional = [a.arg for a in args.posonlyargs + args.args]
    keyword = [a.arg for a in args.kwonlyargs]
    told = sum(p.kind != p.KEYWORD_ONLY for p in users)
    return positional[:told] + keyword if keyword else positional[: len(users)]


def _returning_like_inputs(source: str, name: str, mode: str, wrt, func) -> tuple[str, list]:
    """`source` with its gradients returned as in-process s2sad returns them, each with its
    input's type, dtype and shape (`return like_inputs((dx, dy), (x, y))`; a vjp's pullback or
    sweep), and the functions of module_returns.py that this calls. An input the function
    rebinds is read as given, at its top (`v_given = v`)."""
    if mode not in ("grad", "value_and_grad", "vjp"):
        return source, []
    tree = ast.parse(source)
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    owner = defs.get(f"{name}_sweep") or defs[name]
    returning = owner
    if mode == "vjp" and owner.name == name:  # the pullback it returns, defined in it
        returning = next((n for n in owner.body if isinstance(n, ast.FunctionDef)), None)
        if returning is None:
            raise S2SADError(f"internal error: {name} defines no pullback; please report this")
    a = owner.args
    params = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]
    users = list(inspect.signature(func, follow_wrapped=False).parameters.values())
    theirs = _users_parameters(a, users)
    users = [p.name for p in users]
    # a parameter the generated code renamed (hygiene) sits where the user's does
    inputs = [w if w in params or w not in users else theirs[users.index(w)] for w in wrt]
    if not set(inputs) <= set(params):
        raise S2SADError(f"internal error: {owner.name} does not take {', '.join(wrt)}")
    stored, taken = set(names_stored(owner.body, nested_defs=True)), names_in(source)
    given = {x: _fresh(f"{x}_given", taken) for x in inputs if x in stored}
    xs = [ast.Name(given.get(x, x), ast.Load()) for x in inputs]
    helper = module_returns.like_input if len(inputs) == 1 else module_returns.like_inputs
    lines = source.splitlines()
    returns = [n for n in own_nodes(returning) if isinstance(n, ast.Return)]
    for ret in sorted(returns, key=lambda r: -r.lineno):
        value = ret.value
        grads = value.elts[1] if mode == "value_and_grad" else value
        if len(inputs) > 1 and not (isinstance(grads, ast.Tuple) and len(grads.elts) == len(xs)):
            raise S2SADError(
                f"internal error: the gradient code of {func.__qualname__} returns "
                f"{ast.unparse(grads)}, not one gradient per input; please report this"
            )
        inputs_node = xs[0] if len(xs) == 1 else ast.Tuple(xs, ast.Load())
        new = ast.Call(ast.Name(helper.__name__, ast.Load()), [grads, inputs_node], [])
        if mode == "value_and_grad":
            new = ast.Tuple([value.elts[0], new], ast.Load())
        indent = lines[ret.lineno - 1][: ret.col_offset]
        lines[ret.lineno - 1 : ret.end_lineno] = [indent + ast.unparse(ast.Return(new))]
    if given:
        first = owner.body[0]
        at = first.end_lineno if ast.get_docstring(owner) is not None else first.lineno - 1
        indent = " " * first.col_offset
        said = f"{indent}# the inputs as given, for the gradients' types (the code rebinds them)"
        lines[at:at] = [said] + [f"{indent}{g} = {x}" for x, g in given.items()]
    needs = [module_returns.like_input] + ([helper] if len(inputs) > 1 else [])
    return format_source("\n".join(lines) + "\n"), needs


def _constant_lines(compiled, values: dict, written: set) -> list[str]:
    """The definitions of the constants (and the functions they read) the module needs, without
    builtins and without an import the module's header has `written` already (`np`)."""
    lines = []
    for n, v in sorted(_with_dependencies(values).items()):
        if getattr(builtins, n, None) is v:
            continue  # builtins need no definition
        text = _constant(n, v, compiled.user_names.get(n))
        if text not in written:
            lines.append(text)
    return lines


def _fresh(base: str, taken: set) -> str:
    """`base`, or `base2`, `base3`, ...: the first not in `taken`."""
    name, k = base, 1
    while name in taken:
        k += 1
        name = f"{base}{k}"
    return name


def jit_module(compiled, func, mode: str, wrt, version: str, origin: str) -> str:
    """A standalone module whose function Numba compiles (`s2sad emit --jit`). Its code is not
    fused (pipeline/fusion): the fused loops compile for arrays of one float dtype only, and a
    module has no unfused code to fall back on for mixed or integer dtypes."""
    if compiled.unfused_code is not None:
        compiled = dataclasses.replace(compiled, code=compiled.unfused_code, unfused_code=None)
    header = [
        docstring(
            f"Adjoint of {func.__qualname__} from {origin}, compiled with Numba.\n\n"
            f"Generated by s2sad {version} (mode={mode}, wrt={', '.join(wrt)}, jit). Do not "
            "edit: regenerate with `s2sad emit --jit`.\n"
        ),
    ]
    source, values = baked(compiled, func)
    # a function of the user's the code calls (a custom_vjp, its rule, what they call) compiled
    # too: nopython code cannot call a Python function
    checks = ", boundscheck=True" if bounds.BOUNDSCHECK else ""  # (an index out of range raises)
    constants = [
        (
            f'@njit(cache=True, error_model="numpy"{checks})\n{text}'
            if text.startswith("def ")
            else text
        )
        for text in _constant_lines(compiled, values, set(NUMBA_HEADER.splitlines()))
    ]
    # the constants come before the functions: a data parameter defaults to one (`K=K`)
    body = module_text(
        source, compiled.name, constants="\n".join(constants), indexed=compiled.numba_checks
    )
    body = _called_through(body, source, compiled.name, mode, wrt, origin)
    text = format_source("\n".join(header + [body]) + "\n")
    return check_module(text, func.__qualname__)


def _called_through(body: str, source: str, name: str, mode: str, wrt, origin: str) -> str:
    """The module's text with its function `name` (and a vjp's `{name}_sweep`, which returns the
    gradients) a plain one that calls the compiled one (`_{name}_jit`) and returns what
    in-process s2sad returns (module_returns.py)."""
    trees = {n.name: n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)}
    kinds = {name: mode, f"{name}_sweep": "grad"} if mode == "vjp" else {name: mode}
    wrappers = []
    for fn, kind in kinds.items():
        if fn not in trees:
            continue
        compiled = f"{fn} = njit("
        assert body.count(compiled) == 1, fn
        body = body.replace(compiled, f"_{fn}_jit = njit(")
        wrappers.append(_wrapper(trees[fn], kind, wrt, origin))
    forms = "\n\n".join(inspect.getsource(f) for f in module_returns.FUNCTIONS)
    return "\n\n".join([body, forms] + wrappers)


def _wrapper(tree: ast.FunctionDef, mode: str, wrt, origin: str) -> str:
    """`def f(...)`: `_f_jit`'s results for its arguments, as in-process s2sad returns them."""
    params = [a.arg for a in tree.args.args]
    doc = (ast.get_docstring(tree) or "").split("\n\n")[0].rstrip(".")

    def group(names) -> str:  # (no trailing comma, which black would spread over lines)
        return f"({', '.join(names)}{',' if len(names) == 1 else ''})"

    said = textwrap.fill(
        f"{doc}: `_{tree.name}_jit`, called with each 0-d array as its number, its results as "
        'in-process s2sad returns them."""',
        96,
        initial_indent='    """',
        subsequent_indent="    ",
    )
    return (
        f"def {tree.name}({ast.unparse(tree.args)}):\n{said}\n"
        f"    return _returned(_{tree.name}_jit, {group(params)}, {group(list(wrt))}, {mode!r}, "
        f"{origin!r})\n"
    )
