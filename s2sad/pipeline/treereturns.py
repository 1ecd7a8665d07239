"""Parameter trees as outputs (vjp, jvp, jacobian): a differentiated function that returns a
dict literal with constant keys, a namedtuple it constructs, or a tuple or list nesting these
(`return {"mean": m, "parts": (a, b)}`) returns the flat tuple of their leaves instead, and its
`TreeDef` goes with the transform (`Compiled.output`): the API rebuilds the output, the output
tangent and the Jacobian in that structure, and flattens a pullback's seed tree to its leaves.

Consumes the parsed differentiated function (before its trees are flattened); rewrites its
`return` statements in place and returns the output's TreeDef, or None for a function whose
returns are not trees (a flat tuple stays a tuple output, as before).
"""

from __future__ import annotations

import ast
import builtins
import keyword
import re

from ..errors import NonScalarOutputError, UnsupportedSyntaxError
from .nodes import own_nodes
from ..trees import LEAF, TreeDef, code_names, paths


def tree_returns(parsed, refuse_named: bool = True):
    """Rewrite `parsed`'s returns of trees to flat tuples; the output's TreeDef or None.
    `refuse_named`: refuse a return of a name bound to a dict literal (`out = {...}; return
    out`), which the transform would refuse less clearly."""
    returns = list(_own_returns(parsed.tree))
    scope = _scope(parsed.func)
    if refuse_named:
        _refuse_named_trees(parsed, returns, scope)
    found = [(r, _structure(r.value, scope, parsed)) for r in returns if r.value is not None]
    trees = [(r, d) for r, d in found if d is not None and _nested(d)]
    if not trees:
        return None
    d = trees[0][1]
    for r, other in found:
        if other != d:
            raise parsed.error(
                UnsupportedSyntaxError,
                "every return of a function whose output is a tree must return one of the same "
                "structure (the same keys, in the same order, and lengths)",
                r,
                hint="return the same dict literal (or namedtuple) everywhere",
            )
    names = _output_names(d, parsed)
    _Named(names, scope).visit(parsed.tree)
    return d


def _output_names(d, parsed) -> list[str]:
    """A name per leaf of the output, from its path (`value`, `parts_1_mean`), none a name the
    function uses: the generated code computes each leaf into it."""
    taken = code_names(parsed.func) | {
        n.id for n in ast.walk(parsed.tree) if isinstance(n, ast.Name)
    }
    out = []
    for path in paths(d):
        base = "_".join(re.sub(r"\W", "_", str(k)) for k in path)
        if not base.isidentifier() or keyword.iskeyword(base):
            base = f"{parsed.name}_{base}"
        name, k = base, 2
        while name in taken:
            name, k = f"{base}_{k}", k + 1
        taken.add(name)
        out.append(name)
    return out


class _Named(ast.NodeTransformer):
    """`return {"a": u, "b": v}` -> `a = u; b = v; return (a, b)` (a leaf that is a name is
    returned as it is)."""

    def __init__(self, names, scope):
        self.names, self.scope = names, scope

    def visit_FunctionDef(self, node):
        if getattr(self, "_inside", False):
            return node  # a nested def's returns are its own
        self._inside = True
        self.generic_visit(node)
        return node

    def visit_Lambda(self, node):
        return node

    def visit_ClassDef(self, node):
        return node

    def visit_Return(self, node):
        if node.value is None:
            return node
        stmts, elts = [], []
        for name, leaf in zip(self.names, _leaves(node.value, self.scope)):
            if isinstance(leaf, ast.Name):
                elts.append(leaf)
                continue
            assign = ast.Assign([ast.Name(name, ast.Store())], leaf)
            stmts.append(ast.copy_location(assign, node))
            elts.append(ast.Name(name, ast.Load()))
        node.value = ast.copy_location(ast.Tuple(elts, ast.Load()), node.value)
        return stmts + [node]


def _refuse_named_trees(parsed, returns, scope) -> None:
    """A returned name every assignment of which is a dict literal or namedtuple: refused."""
    names = {r.value.id: r for r in returns if isinstance(r.value, ast.Name)}
    values: dict[str, list] = {}
    for node in ast.walk(parsed.tree):
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.With, ast.NamedExpr)):
            targets = [node.target] if hasattr(node, "target") else []
        for target in targets:
            for n in ast.walk(target):
                if isinstance(n, ast.Name) and n.id in names:
                    literal = target is n and isinstance(node, ast.Assign)
                    values.setdefault(n.id, []).append(node.value if literal else None)
    for name, assigned in values.items():
        tree = all(
            v is not None and (isinstance(v, ast.Dict) or _namedtuple_class(v, scope))
            for v in assigned
        )
        if tree:
            shown = ast.unparse(assigned[0])
            raise parsed.error(
                UnsupportedSyntaxError,
                f"s2sad reads a tree output from the return statement itself, and "
                f"{parsed.name} returns `{name}`, a name bound to one",
                names[name],
                hint=(
                    f"return the literal: `return {shown}`"
                    if len(shown) < 60
                    else "return the dict literal (or namedtuple) itself"
                ),
            )


def _own_returns(tree):
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, ast.Return):
            yield node
            continue
        todo.extend(ast.iter_child_nodes(node))


def _scope(func) -> dict:
    scope = dict(vars(builtins))
    scope.update(getattr(func, "__globals__", {}))
    code = getattr(func, "__code__", None)
    for name, cell in zip(code.co_freevars if code else (), func.__closure__ or ()):
        try:
            scope[name] = cell.cell_contents
        except ValueError:
            pass
    return scope


def _namedtuple_class(e, scope):
    """The namedtuple class a call `P(a, b)` constructs, or None."""
    if not isinstance(e, ast.Call):
        return None
    cls = _static(e.func, scope)
    if isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields"):
        return cls
    return None


def _static(e, scope):
    if isinstance(e, ast.Name):
        return scope.get(e.id)
    if isinstance(e, ast.Attribute):
        base = _static(e.value, scope)
        return getattr(base, e.attr, None) if base is not None else None
    return None


def _structure(e, scope, parsed):
    """The TreeDef of a returned expression (a leaf for anything that is not a literal tree)."""
    if isinstance(e, ast.Dict):
        if any(k is None or not isinstance(k, ast.Constant) for k in e.keys):
            return LEAF  # `{**d}` or computed keys: left to normalization, which refuses them
        keys = tuple(k.value for k in e.keys)
        children = tuple(_structure(v, scope, parsed) for v in e.values)
        return TreeDef("dict", dict, keys, children)
    if isinstance(e, (ast.Tuple, ast.List)):
        if any(isinstance(v, ast.Starred) for v in e.elts):
            return LEAF
        kind = "tuple" if isinstance(e, ast.Tuple) else "list"
        children = tuple(_structure(v, scope, parsed) for v in e.elts)
        return TreeDef(
            kind, tuple if kind == "tuple" else list, tuple(range(len(e.elts))), children
        )
    cls = _namedtuple_class(e, scope)
    if cls is not None:
        args = _namedtuple_args(e, cls, parsed)
        children = tuple(_structure(v, scope, parsed) for v in args)
        return TreeDef("namedtuple", cls, tuple(cls._fields), children)
    return LEAF


def _namedtuple_args(e: ast.Call, cls, parsed) -> list:
    """The arguments of `P(a, b=...)` in field order."""
    fields = list(cls._fields)
    given = dict(zip(fields, e.args))
    for k in e.keywords:
        if k.arg is None or k.arg not in fields or k.arg in given:
            raise parsed.error(UnsupportedSyntaxError, f"bad call of {cls.__name__}", e)
        given[k.arg] = k.value
    if any(isinstance(a, ast.Starred) for a in e.args) or len(e.args) > len(fields):
        raise parsed.error(UnsupportedSyntaxError, f"bad call of {cls.__name__}", e)
    missing = [f for f in fields if f not in given]
    if missing:
        raise parsed.error(
            UnsupportedSyntaxError,
            f"{cls.__name__}(...) returned without {', '.join(missing)}: s2sad reads a "
            "namedtuple output from all its fields given at the return",
            e,
        )
    return [given[f] for f in fields]


def _nested(d) -> bool:
    """A structure the API rebuilds: anything but a leaf or a flat tuple of leaves."""
    if d.kind == "leaf":
        return False
    return d.kind != "tuple" or any(c.kind != "leaf" for c in d.children)


def _leaves(e, scope) -> list:
    if isinstance(e, ast.Dict):
        return [x for v in e.values for x in _leaves(v, scope)]
    if isinstance(e, (ast.Tuple, ast.List)):
        return [x for v in e.elts for x in _leaves(v, scope)]
    cls = _namedtuple_class(e, scope)
    if cls is not None:
        fields = list(cls._fields)
        given = dict(zip(fields, e.args))
        given.update({k.arg: k.value for k in e.keywords})
        return [x for f in fields for x in _leaves(given[f], scope)]
    return [e]


def tuple_return_error(parsed, count: int) -> NonScalarOutputError:
    """grad of a function returning `loss, aux`: refused here, at its return line."""
    returns = [n for n in own_nodes(parsed.tree) if isinstance(n, ast.Return)]
    shown = next((r for r in returns if isinstance(r.value, ast.Tuple)), None)
    error = parsed.error(
        NonScalarOutputError,
        f"grad of {parsed.name} needs one scalar output, but {parsed.name} returns a tuple of "
        f"{count} values",
        shown or (returns[-1] if returns else None),
        hint="for `return loss, aux` pass has_aux=True (grad then returns (gradient, aux)); "
        "else return the scalar alone, or use s2sad.vjp, which takes a tuple of seeds for a "
        "tuple output",
    )
    error.tuple_output = count  # (the command line words its own way out: cli.py)
    return error
