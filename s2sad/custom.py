"""User-given derivatives: `register_vjp` for any callable, `custom_vjp` for a function whose
rule the user writes next to it, and `stop_gradient`.

A rule is called as `rule(dy, y, *args)`: the upstream cotangent, the primal result and the
call's arguments; it returns the cotangent of each argument (one value for a one-argument
function, a tuple otherwise). Generated code calls it by a name derived from the function's.
"""

from __future__ import annotations

import ast
import functools
import inspect
import keyword
import os
import re
import textwrap
import types
import weakref

from .callee_fingerprint import callees_fingerprint
from .errors import S2SADError
from .pipeline.bounds import BOUNDSCHECK
from .pipeline.reserved import RESERVED
from .rules.registry import NAMESPACE, VJP, nondiff, register
from .rules.common import stop_gradient

nondiff(stop_gradient)


def _argnames(func, argnames) -> list[str]:
    if argnames is not None:
        return list(argnames)
    nin = getattr(func, "nin", None)
    if isinstance(nin, int):  # a NumPy/SciPy ufunc: its inputs, not out=, where=, signature=...
        return [f"x{i + 1}" for i in range(nin)] if nin > 1 else ["x"]
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        nin = getattr(func, "nin", None)  # a NumPy/SciPy ufunc
        if nin is None:
            raise S2SADError(
                f"cannot read the parameters of {func!r}",
                hint="pass argnames=('x', ...) to register_vjp",
            ) from None
        return [f"x{i + 1}" for i in range(nin)] if nin > 1 else ["x"]
    names = []
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise S2SADError(
                f"{func!r} takes *args or **kwargs", hint="pass argnames=('x', ...) to register_vjp"
            )
        names.append(p.name)
    return names


def register_vjp(func, rule, argnames=None) -> None:
    """Use `rule(dy, y, *args)` for the derivative of `func` wherever differentiated code calls it.

    The parameters come from `inspect.signature(func)`: a call may leave out those with defaults
    (the rule gets the default) and pass keyword-only ones by name. `argnames=('x', 'y')` names
    them where there is no signature to read (a builtin, a function taking *args); the rule then
    takes exactly those, all required."""
    names = _argnames(func, argnames)
    for name in names:
        if not name.isidentifier() or keyword.iskeyword(name):
            raise S2SADError(
                f"argnames must be parameter names, not {name!r}",
                hint="pass argnames=('x', ...) of identifiers",
            )
    _check_rule_takes(rule, func, names)
    # the rule's name goes into generated code: only the identifier characters of the function's
    base = re.sub(r"\W", "_", str(getattr(func, "__name__", "func")).strip("<>")) or "func"
    base = f"{'_' if base[0].isdigit() else ''}{base}_vjp"
    rule_name, k = base, 2
    # generated code calls it by this name: not another rule's, nor s2sad's own (`prod_vjp`)
    while (
        (rule_name in NAMESPACE and NAMESPACE[rule_name] is not rule)
        or rule_name in names
        or rule_name in RESERVED
    ):
        rule_name, k = f"{base}{k}", k + 1
    NAMESPACE[rule_name] = rule
    # the template's placeholders for the cotangent and the result, spelled unlike any parameter
    g, ans = (_unlike(p, set(names) | {rule_name}) for p in ("g", "ans"))
    # a rule writing into its cotangent gets one of its own (rules/owned.py), in both modes
    cotangent = f"own_copy({g})" if _writes_into_cotangent(rule) else g
    call = f"{rule_name}({cotangent}, {ans}, {', '.join(names)})"
    # what it returns checked at each call (rules/owned.py): the count, and each one's shape
    of = f"{getattr(func, '__name__', 'a function')}({', '.join(names)})"
    described = f"{_described(rule)} of {of}"
    call = f"rule_cotangents({call}, ({', '.join(names)},), {described!r})"
    templates = {n: call if len(names) == 1 else f"{call}[{i}]" for i, n in enumerate(names)}
    joint = call if len(names) > 1 else None
    signature = _signature_text(func, names, rule_name) if argnames is None else ", ".join(names)
    register(func, signature, templates, joint=joint, placeholders={"g": g, "ans": ans})
    VJP[id(func)].user = described


def _check_rule_takes(rule, func, names) -> None:
    """Refuse, when it is registered, a rule that cannot take `(dy, y, *args)` (a JAX- or
    autograd-style `rule(dy, x)`): otherwise Python's TypeError comes from generated code."""
    try:
        signature = inspect.signature(rule)
    except (TypeError, ValueError):
        return  # (a builtin: nothing to read)
    try:
        signature.bind("dy", "y", *names)
    except TypeError:
        of = f"{getattr(func, '__name__', 'the function')}({', '.join(names)})"
        raise S2SADError(
            f"the derivative rule {_described(rule)} of {of} takes ({', '.join(signature.parameters)})",
            hint=f"a rule takes (dy, y, {', '.join(names)}): the upstream cotangent, the function's "
            "result, then its arguments",
        ) from None


def _described(rule) -> str:
    """`name (file.py:line)` of a rule, or its repr where it has no code (a builtin)."""
    code = getattr(rule, "__code__", None)
    if code is None:
        return repr(rule)
    return f"{rule.__name__} ({os.path.basename(code.co_filename)}:{code.co_firstlineno})"


# methods and functions writing into their array (`dy.fill(0.0)`, `np.copyto(dy, v)`)
_WRITING_METHODS = frozenset({"fill", "sort", "put", "partition", "resize", "itemset", "setflags"})
_WRITING_FUNCTIONS = frozenset({"copyto", "at", "place", "putmask", "put", "fill_diagonal"})


def _root(node: ast.expr) -> str | None:
    """The name an expression reads its array from (`dy` of `dy.reshape(-1)[0]`), if any."""
    while isinstance(node, (ast.Subscript, ast.Attribute, ast.Call, ast.Starred)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _writes_into_cotangent(rule) -> bool:
    """Whether `rule`'s code may write into its first parameter, the cotangent (`dy *= 2.0`,
    `dy[0] = 0.0`, `out=dy`, `dy.fill(0.0)`), or into a name bound to a view of it. A rule whose
    source cannot be read (a builtin, a NumPy function) writes into nothing of s2sad's."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(rule)))
    except (OSError, TypeError, SyntaxError):
        return False
    defs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.Lambda))]
    params = defs[0].args.posonlyargs + defs[0].args.args if defs else []
    if not params or isinstance(defs[0], ast.Lambda):
        return False  # (a lambda cannot write)
    views, nodes = {params[0].arg}, list(ast.walk(defs[0]))
    for _ in range(len(nodes)):  # names bound to the cotangent or a view of it, to a fixpoint
        grown = {
            t.id
            for n in nodes
            if isinstance(n, ast.Assign) and _root(n.value) in views
            for t in n.targets
            if isinstance(t, ast.Name)
        }
        if grown <= views:
            break
        views |= grown
    for n in nodes:
        if isinstance(n, ast.AugAssign) and _root(n.target) in views:
            return True
        targets = n.targets if isinstance(n, ast.Assign) else []
        if any(not isinstance(t, ast.Name) and _root(t) in views for t in targets):
            return True
        if isinstance(n, ast.Call):
            if any(k.arg == "out" and _root(k.value) in views for k in n.keywords):
                return True
            if isinstance(n.func, ast.Attribute):
                if n.func.attr in _WRITING_METHODS and _root(n.func.value) in views:
                    return True
                if n.func.attr in _WRITING_FUNCTIONS and n.args and _root(n.args[0]) in views:
                    return True
    return False


def _signature_text(func, names, rule_name) -> str:
    """`func`'s parameters as a rule's signature: defaults spelled as literals where they are
    numbers, strings, None or tuples of those, else by a name generated code can read
    (`<rule>_<param>`), and `/` and `*` where the function has them."""
    try:
        params = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return ", ".join(names)
    if [p.name for p in params] != names:
        return ", ".join(names)
    parts, star = [], False
    for i, p in enumerate(params):
        if p.kind == p.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        text = p.name
        if p.default is not p.empty:
            if _is_literal(p.default):
                text += f"={p.default!r}"
            else:
                spelled = f"{rule_name}_{p.name}"
                NAMESPACE[spelled] = p.default
                text += f"={spelled}"
        parts.append(text)
        if p.kind == p.POSITIONAL_ONLY and (
            i + 1 == len(params) or params[i + 1].kind != p.POSITIONAL_ONLY
        ):
            parts.append("/")
    return ", ".join(parts)


def _is_literal(value) -> bool:
    if isinstance(value, tuple):
        return all(_is_literal(v) for v in value)
    if type(value) in (int, float, bool, str, complex, type(None)):
        try:
            return ast.literal_eval(repr(value)) == value or value != value
        except (ValueError, SyntaxError):
            return False
    return False


def _unlike(base: str, taken: set[str]) -> str:
    """`base`, or `base_2`, `base_3`, ...: the first not in `taken`."""
    name, k = base, 2
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    return name


class custom_vjp:  # noqa: N801  (used as a decorator, like functools.wraps)
    """Decorate `f`; then decorate its rule with `@f.defvjp`."""

    def __init__(self, func):
        self.func = func
        self.rule = None
        functools.update_wrapper(self, func)

    def __call__(self, *args, **kwargs):
        return self.func(*args, **kwargs)

    def defvjp(self, rule):
        self.rule = rule
        register_vjp(self, rule)  # (the signature of `func`, its defaults with it)
        return rule


_NUMBA_FORMS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def numba_form(value):
    """What Numba-compiled code calls for a user's function it reads by name (a custom_vjp
    function, a vjp rule): the plain Python function, which nopython code cannot call, compiled
    by `numba.njit` (NumPy's error model and bounds checks, as generated code's), one dispatcher per object so a
    module loaded twice sees the same one. Where Numba cannot compile it, compiling the code
    that calls it fails, and jit=True runs the Python version, naming it (`user_callee`).
    A function reading data from its globals or closure (a number, an array) stays in Python:
    Numba would freeze the value it first saw, where s2sad reads globals at each call.
    Anything else comes back as it is."""
    func = value.func if isinstance(value, custom_vjp) else value
    if type(func) is not types.FunctionType:
        return value
    code, dispatcher = _NUMBA_FORMS.get(value, (None, None))
    if code is func.__code__:  # (a new one where its code was replaced: %autoreload's edit)
        return dispatcher
    if _data_read(func, set()) is not None:
        return value
    import numba  # (Numba loads on first use: s2sad imports fast)

    # bounds checked as the generated code's: an index out of range raises
    dispatcher = numba.njit(error_model="numpy", boundscheck=BOUNDSCHECK)(_named_by_code(func))
    _NUMBA_FORMS[value] = (func.__code__, dispatcher)
    return dispatcher


def _named_by_code(func: types.FunctionType) -> types.FunctionType:
    """`func` under a qualified name holding a hash of its code and what it calls. Numba names
    machine code by module, qualified name and a counter of its own, which two processes can
    give an edited rule and its first version alike: a process that loaded both modules from the
    disk cache (the rule edited in place) ran the first one loaded for both."""
    copy = types.FunctionType(
        func.__code__, func.__globals__, func.__name__, func.__defaults__, func.__closure__
    )
    copy.__kwdefaults__, copy.__module__ = func.__kwdefaults__, func.__module__
    copy.__qualname__ = f"{func.__qualname__}_{callees_fingerprint({'': func})[:12]}"
    return copy


def _code_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


def _data_read(func: types.FunctionType, seen: set) -> str | None:
    """The first global or closure variable `func` (or a plain function it calls) reads whose
    value is data rather than a module, function or class: what compiled code would freeze."""
    if func in seen:
        return None
    seen.add(func)
    cells = zip(func.__code__.co_freevars, func.__closure__ or ())
    values = [(n, c.cell_contents) for n, c in cells if _filled(c)]
    names = _code_names(func.__code__)
    values += [(n, func.__globals__[n]) for n in sorted(names) if n in func.__globals__]
    for name, v in values:
        if type(v) is types.FunctionType:
            found = _data_read(v, seen)
            if found is not None:
                return found
        elif not (
            isinstance(v, (types.ModuleType, type, types.BuiltinFunctionType))
            or callable(v)
            and hasattr(v, "py_func")  # the user's own numba.njit function
        ):
            return name
    return None


def _returns_list(func) -> bool:
    """Whether a function's code returns a list display (`return [g * b, 0.0]`)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    except (OSError, TypeError, SyntaxError):
        return False
    return any(isinstance(n, ast.Return) and isinstance(n.value, ast.List) for n in ast.walk(tree))


def _filled(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:  # a closure variable not yet bound
        return False
    return True


def user_callee(exc, objects: dict) -> str | None:
    """Which of the user's functions compiled by `numba_form` Numba failed inside (its message
    names it as `<function name at 0x...>`), or which one `numba_form` left in Python because
    it reads data from its globals (Numba then cannot type its name), with its file and line;
    None for none."""
    for name, value in objects.items():
        func = value.func if isinstance(value, custom_vjp) else value
        if type(func) is not types.FunctionType:
            continue
        kind = "vjp rule" if NAMESPACE.get(name) is value else "function"
        code = func.__code__
        where = f"your {kind} {func.__name__} ({os.path.basename(code.co_filename)}:{code.co_firstlineno})"
        if f"<function {func.__name__} at " in str(exc):
            return where
        if kind == "vjp rule" and "unhashable type: 'list'" in str(exc) and _returns_list(func):
            # (Numba's error boxing a list of several types, which it types but cannot return)
            return f"{where}, which returns a list of values of different types (a tuple compiles),"
        read = _data_read(func, set()) if f"'{name}'" in str(exc) else None
        if read is not None:
            return (
                f"{where}, which reads {read!r} (a value compiled code would freeze at its "
                "first call, where s2sad reads it at each call),"
            )
    return None
