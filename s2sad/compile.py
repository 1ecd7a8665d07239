"""Stage 6: compile and cache. The generated source is executed in a namespace holding exactly
the names it uses (NumPy as `np`, `math`, the runtime helpers and the user's own globals), and
registered with linecache so tracebacks show the generated lines.
"""

from __future__ import annotations

import ast
import linecache
from dataclasses import dataclass

from . import runtime
from .activity import active_names
from .emit import emit
from .normalize import normalize
from .ops import classify
from .parse import parse_function
from .reverse import reverse
from .rules.registry import NAMESPACE


@dataclass
class Compiled:
    function: object  # the generated Python function
    source: str
    name: str
    tuple_output: bool
    globals: dict  # the user's objects the source refers to, by the name it uses


_RUNTIME = {n: getattr(runtime, n) for n in dir(runtime) if not n.startswith("_")}
_CACHE: dict[tuple, Compiled] = {}


def _used_names(source: str) -> set[str]:
    return {n.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name)}


def _closure_key(func) -> tuple:
    cells = func.__closure__ or ()
    out = []
    for cell in cells:
        try:
            out.append(id(cell.cell_contents))
        except ValueError:
            out.append(None)
    return tuple(out)


def transform(func, wrt: tuple[str, ...], mode: str) -> Compiled:
    """Generate, compile and cache the `mode` ("grad" or "vjp") transform of `func`."""
    key = (func.__code__, id(func.__globals__), _closure_key(func), wrt, mode)
    hit = _CACHE.get(key)
    if hit is not None:
        return hit
    parsed = parse_function(func)
    norm, resolver = normalize(parsed, list(wrt))
    local_names = set(norm.params) | {
        n.id
        for s in norm.stmts
        for t in getattr(s, "targets", [])
        for n in ast.walk(t)
        if isinstance(n, ast.Name)
    }
    ops = [classify(s, local_names) for s in norm.stmts]
    active = active_names(parsed, ops, list(wrt), norm.outputs)
    adjoint = reverse(ops, active, list(wrt), norm.outputs, norm.taken)
    name = f"{mode}_{parsed.name}"
    source = emit(parsed, norm, adjoint, list(wrt), mode, name)
    filename = f"<s2sad {name} of {parsed.filename}:{parsed.line_offset + parsed.tree.lineno}>"
    namespace = dict(_RUNTIME)
    namespace.update(NAMESPACE)
    namespace.update(resolver.namespace)
    exec(compile(source, filename, "exec"), namespace)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    user_globals = {k: v for k, v in resolver.namespace.items() if k not in ("np", "math")}
    user_globals.update({k: v for k, v in NAMESPACE.items() if k in _used_names(source)})
    compiled = Compiled(namespace[name], source, name, norm.tuple_output, user_globals)
    _CACHE[key] = compiled
    return compiled
