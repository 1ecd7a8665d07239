"""Flow facts about a loop marked `s2sad.checkpoint` (user's code, before normalizing), for
checkpoint_loops.py: which names may be bound when the loop starts (its state is what the body
assigns among them), which the body may read before assigning them (carried from one step to the
next), and which a read after the loop may see the loop's last value of.

Decided by paths, not by text order: `z = y * 2.0` after the loop does not bind z before it, and
`if t == 0: c = ...` does not bind c for the steps after the first. Where a path is not followed
(the loop inside another loop or a `try`), a read counts wherever it is: that refuses more, never
less.
"""

from __future__ import annotations

import ast

from .names import read_before_assigned

_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def reads(node, skip=frozenset()) -> set[str]:
    """The names `node` reads in the function's own scope: not a comprehension's own targets,
    not inside a function or lambda it defines; `x += 1` reads x. `skip`: ids of nodes to leave
    out with all they hold (the loop's body)."""
    found: set[str] = set()
    todo = [(node, frozenset())]
    while todo:
        node, local = todo.pop()
        if id(node) in skip:
            continue
        if isinstance(node, _COMPREHENSIONS):
            local = local | {
                n.id for g in node.generators for n in ast.walk(g.target) if _stores(n)
            }
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in local:
            found.add(node.id)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            found.add(node.target.id)
        if not isinstance(node, _SCOPES):
            todo.extend((child, local) for child in ast.iter_child_nodes(node))
    return found


def _stores(node) -> bool:
    return isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)


def stored(nodes, skip=frozenset()) -> set[str]:
    """The names the nodes bind in the function's scope (not in functions they define)."""
    found, todo = set(), list(nodes)
    while todo:
        node = todo.pop()
        if id(node) in skip:
            continue
        if _stores(node):
            found.add(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            found.add(node.name)
        if isinstance(node, _SCOPES):
            found.add(getattr(node, "name", None) or "")
        else:
            todo.extend(ast.iter_child_nodes(node))
    return found - {""}


def _path(tree, loop) -> list:
    """(parent, block, index) from the function down to `loop`: block[index] holds it."""
    for field in ("body", "orelse", "finalbody", "handlers", "cases"):
        block = getattr(tree, field, None)
        if not isinstance(block, list):
            continue
        for index, node in enumerate(block):
            if node is loop:
                return [(tree, block, index)]
            if isinstance(node, _SCOPES):
                continue
            below = _path(node, loop)
            if below:
                return [(tree, block, index)] + below
    return []


def _wraps(parent, block) -> bool:
    """Whether the end of `block` goes back to its start (a loop's body)."""
    return isinstance(parent, (ast.For, ast.AsyncFor, ast.While)) and block is parent.body


def bound_at_entry(tree, loop, params) -> set[str]:
    """The names that may be bound when `loop` starts: the parameters, what the statements on
    the way to it bind, and what an enclosing loop binds anywhere (its next iteration)."""
    skip = {id(loop)}
    names = set(params)
    for parent, block, index in _path(tree, loop):
        names |= stored(block[:index])
        if _wraps(parent, block) or isinstance(parent, ast.ExceptHandler):
            names |= stored([parent], skip)
    return names


def read_after(tree, loop, names: set[str]) -> set[str]:
    """The names of `names` that a read after `loop` may find as the loop left them."""
    skip, found, bound = {id(loop)}, set(), set()
    for parent, block, index in reversed(_path(tree, loop)):
        out: set[str] = set()
        ends = read_before_assigned(block[index + 1 :], bound, out, reads)
        found |= out & names
        bound = ends if ends is not None else set()
        if _wraps(parent, block) or isinstance(parent, (ast.Try, ast.ExceptHandler, ast.Match)):
            found |= reads(parent, skip) & names  # the path is not followed here: any read
            bound = set()
    return found


def carried(loop, names: set[str]) -> set[str]:
    """The names of `names` that the body may read before it assigns them in the same step."""
    out: set[str] = set()
    read_before_assigned(loop.body, set(), out, reads)
    return out & names


def first_read(body, name: str):
    """The body's first read of `name` (in text order), for the error's line."""
    found = [
        n
        for s in body
        for n in ast.walk(s)
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
    ]
    return min(found, key=lambda n: (n.lineno, n.col_offset), default=None)
