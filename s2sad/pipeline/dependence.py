"""Dependence analysis, once for every stage: which names depend on a given set of names.

A stage describes its code as flows, pairs `(reads, targets)`: the targets of a flow depend on
the given names when one of its reads does. `dependents` follows the flows to a fixpoint (loops
and in-place writes assign a name more than once, so one pass in order is not enough), by a
worklist over the flows reading each name: linear in the flows, where sweeping every statement
until nothing changes takes a sweep per step of a chain.

Consumers: normalization (`loop_varied`: which of the user's names vary with `wrt` in some loop
iteration), activity analysis (forward: what depends on `wrt`; backward: what the outputs
depend on) and forward mode (`Forward.varied`).
"""

from __future__ import annotations

import ast
from typing import Callable, Collection, Iterable, Union

from ..astcopy import walk_nodes
from .names import names_stored
from .reserved import STATIC_ATTRS

# a flow's targets, or a function giving them, called once, when the flow is first followed
Targets = Union[Collection[str], Callable[[], Collection[str]]]


def dependents(sources: Iterable[str], flows: Iterable[tuple[Collection[str], Targets]]) -> set:
    """The targets of every flow that reads one of `sources` or a name that depends on them,
    to a fixpoint. A source is in the result only where some flow reaching it assigns it."""
    readers: dict[str, list[list]] = {}
    for reads, targets in flows:
        box = [targets]  # (shared by the names it reads: its targets are computed once)
        for name in reads:
            readers.setdefault(name, []).append(box)
    reached: set = set()
    seen = set(sources)
    todo = list(seen)
    while todo:
        for box in readers.get(todo.pop(), ()):
            targets = box[0]
            if callable(targets):
                targets = box[0] = targets()
            for name in targets:
                if name not in reached:
                    reached.add(name)
                    if name not in seen:
                        seen.add(name)
                        todo.append(name)
    return reached


def derivative_reads(node: ast.AST, local_names: Collection[str]) -> set[str]:
    """The names whose value `node` reads in a way a derivative may flow through: not under a
    static attribute (`x.shape`) nor in a call of `len` or `isinstance` (unless the user's own).
    `names.names_read` is every name read, these included."""
    names: set[str] = set()
    todo = [node]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Attribute) and node.attr in STATIC_ATTRS:
            continue
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id not in local_names
            and node.func.id in ("len", "isinstance")
        ):
            continue
        if isinstance(node, ast.Name):
            names.add(node.id)
        else:
            todo.extend(ast.iter_child_nodes(node))
    return names


def assignment_flows(body: list[ast.stmt], local_names, is_enumerate) -> list[tuple]:
    """The flows of the user's statements (nested blocks included): an assignment's value (and,
    for `z op= v`, `z`) to its targets (`y[i] = v` changes `y`); a `for` loop's iterable to its
    target (not the index of `enumerate`: `is_enumerate(call)`, asked only where the iterable
    depends on the sources, says which calls are)."""
    flows = []
    for stmt in walk_nodes(ast.Module(body=body, type_ignores=[])):
        if isinstance(stmt, ast.For):
            flows.append((derivative_reads(stmt.iter, local_names), _items_of(stmt, is_enumerate)))
        elif isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            if stmt.value is None:
                continue
            reads = derivative_reads(stmt.value, local_names)
            if isinstance(stmt, ast.AugAssign):
                reads |= derivative_reads(stmt.target, local_names)
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            flows.append((reads, _changed(targets)))
        elif isinstance(stmt, ast.FunctionDef):
            flows.append(closure_flow(stmt.name, stmt))
    return flows


def closure_flow(name: str, fn: ast.FunctionDef | ast.Lambda) -> tuple[set[str], list[str]]:
    """The flow from what a nested def or lambda reads of its enclosing function (its free
    names) to its name: a call `rot(y)` reads `rot`, so a loop calling a closure that reads a
    differentiated `omega` changes what it assigns with `omega`'s derivative."""
    args = fn.args
    own = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    own |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    body = fn.body if isinstance(fn, ast.FunctionDef) else [fn.body]
    own |= set(names_stored(body))
    reads = {n.id for n in walk_nodes(fn) if isinstance(n, ast.Name)}
    return reads - own, [name]


def _changed(targets: list[ast.expr]) -> list[str]:
    names = []
    for t in targets:
        while isinstance(t, ast.Subscript):  # y[i] = v changes y only
            t = t.value
        names += [n.id for n in walk_nodes(t) if isinstance(n, ast.Name)]
    return names


def _items_of(loop: ast.For, is_enumerate) -> Callable[[], list[str]]:
    """The names a `for` loop binds to its items: `for row in x`, `enumerate(x)`, `zip(x, y)`
    vary with x."""

    def items():
        target, it = loop.target, loop.iter
        if (
            isinstance(it, ast.Call)
            and is_enumerate(it)
            and isinstance(target, ast.Tuple)
            and len(target.elts) == 2
        ):
            target = target.elts[1]  # the index does not vary
        return [n.id for n in walk_nodes(target) if isinstance(n, ast.Name)]

    return items
