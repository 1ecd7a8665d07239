"""Name resolution: what each free name of the function refers to, and how emitted code spells it.

NumPy is recognised under any alias (`import numpy as onp`, `from numpy import exp`) and always
emitted as `np.<path>`; `math` likewise as `math.<name>`. Anything else keeps the user's name and is
placed in the namespace the generated code runs in.
"""

from __future__ import annotations

import ast
import builtins
import math
import types

import numpy as np

from .errors import NameResolutionError

_NUMPY_MODULES = {"np": np, "np.linalg": np.linalg}


def _canonical_table() -> dict[int, str]:
    table: dict[int, str] = {}
    for prefix, module in [("math", math), ("np.linalg", np.linalg), ("np", np)]:
        for name in dir(module):
            if not name.startswith("_"):
                obj = getattr(module, name)
                if callable(obj) or isinstance(obj, float):
                    table[id(obj)] = f"{prefix}.{name}"
    from . import runtime

    table[id(runtime.stop_gradient)] = "stop_gradient"
    table[id(runtime.scatter_added)] = "scatter_added"  # what np.add.at statements become
    table[id(np)] = "np"
    table[id(np.linalg)] = "np.linalg"
    table[id(math)] = "math"
    return table


_CANONICAL = _canonical_table()
_NOT_FOUND = object()


class Resolver:
    """Looks up free names through the closure, the globals and the builtins."""

    def __init__(self, parsed, local_names: set[str], parent: Resolver | None = None):
        self.parsed = parsed
        func = parsed.func
        self.locals = local_names
        self.closure = {}
        if func.__closure__:
            for name, cell in zip(func.__code__.co_freevars, func.__closure__):
                try:
                    self.closure[name] = cell.cell_contents
                except ValueError:  # an empty cell: defined later in the enclosing scope
                    pass
        self.globals = func.__globals__
        # shared with the functions inlined into this one: generated code has one namespace
        self.namespace: dict[str, object] = (
            parent.namespace if parent is not None else {"np": np, "math": math}
        )
        # a user's global spelled like one of s2sad's names: its name in generated code, by
        # (name, id of the object); and the user's name of each such spelling
        self.aliases: dict[tuple, str] = parent.aliases if parent is not None else {}
        self.original: dict[str, str] = parent.original if parent is not None else {}
        self.reserved, self.names, self.top_locals = (
            (parent.reserved, parent.names, parent.top_locals) if parent else (set(), None, set())
        )

    def hygiene(self, reserved: set[str], names, top_locals: set[str]) -> None:
        """Spell with a fresh name from `names` each global whose name is in `reserved`, or
        names a local of the generated function (`top_locals`, or a name s2sad made: a global of
        a function inlined into it), or another object already."""
        self.reserved, self.names, self.top_locals = reserved, names, top_locals

    def lookup(self, name: str, node: ast.AST):
        name = getattr(self.parsed, "original", {}).get(name, name)  # renamed by `hygienic`
        for scope in (self.closure, self.globals, vars(builtins)):
            if name in scope:
                return scope[name]
        raise self.parsed.error(
            NameResolutionError,
            f"name '{name}' is not defined",
            node,
            hint="define it at module level or in the enclosing function before the first call",
        )

    def resolve(self, node: ast.expr):
        """The object a Name or Attribute chain denotes, or None if it starts at a local name."""
        if getattr(node, "s2sad_runtime", None) is not None:  # put there by normalization
            return node.s2sad_runtime
        if isinstance(node, ast.Name):
            if node.id in self.locals:
                return None
            return self.lookup(node.id, node)
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            if base is None:
                return None
            value = getattr(base, node.attr, _NOT_FOUND)
            if value is _NOT_FOUND:
                raise self.parsed.error(
                    NameResolutionError,
                    f"'{ast.unparse(node.value)}' has no attribute '{node.attr}'",
                    node,
                )
            return value
        return None

    def spelling(self, node: ast.expr, obj) -> ast.expr:
        """How emitted code refers to `obj`, which the user wrote as `node`."""
        canonical = _CANONICAL.get(id(obj))
        if canonical is None and isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            if isinstance(base, types.ModuleType) and id(base) in _CANONICAL:
                canonical = f"{_CANONICAL[id(base)]}.{node.attr}"
        if canonical is not None:
            return ast.parse(canonical, mode="eval").body
        root = node
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name):
            value = self.lookup(root.id, root)
            root.id = self.global_name(root.id, value)
            self.namespace[root.id] = value
        return node

    def global_name(self, name: str, value) -> str:
        """The name generated code gives the user's global `name`: its own, unless the generated
        code uses that name for something else (`unbroadcast` -> `unbroadcast2`)."""
        user_name = getattr(self.parsed, "original", {}).get(name, name)
        key = (name, id(value))
        if key not in self.aliases and not self._clashes(name, value):
            if name != user_name:
                self.original[name] = user_name
            return name
        if key not in self.aliases:
            self.aliases[key] = self.names.fresh(name)
            self.original[self.aliases[key]] = user_name
        return self.aliases[key]

    def _clashes(self, name: str, value) -> bool:
        from .normalize import s2sad_object

        if name in self.namespace:
            return self.namespace[name] is not value
        if name in self.reserved:
            return s2sad_object(name) is not value
        return name in self.top_locals or (self.names is not None and name in self.names.made)
