"""What `wrt` names must be in the body: a parameter of the function as transformed, checked
after the tree rewrite (treeparams.py). A path into a tree (`wrt="p.W"`) is a parameter only
where a call's arguments gave the tree's structure, which makes its leaves parameters; code
made without them (`s2sad emit`, `s2sad.source(g)` before a call) cannot tell which of the
body's reads is that leaf, and its gradient would be zeros: refused here, at the line reading
the tree. A parameter the output does not depend on keeps its true zero gradient.

Consumes a `ParsedFunction` and `wrt`; produces nothing, or raises a `WrtError`.
"""

from __future__ import annotations

import ast

from ..errors import WrtError


def refuse_unread_wrt(parsed, wrt) -> None:
    """A `WrtError` for the first item of `wrt` that is not one of `parsed`'s parameters."""
    for item in wrt:
        if item in parsed.params:
            continue
        root, key = _root_of(item)
        name = getattr(parsed.func, "__qualname__", parsed.name)
        raise parsed.error(
            WrtError,
            f"wrt={item!r} names a leaf of the parameter {root}, and this code is made without "
            f"example arguments (s2sad emit, or s2sad.source(g) before any call): it does not "
            f"know {root}'s structure, so it cannot tell which read of {root} is that leaf",
            _first_read(parsed.tree, root, key),
            hint=f"give example arguments, from which s2sad learns {root}'s structure: "
            f"s2sad.source(g, *args) shows the code for them, and `s2sad emit` reads them from "
            f"an `inputs(rng)` function in the file returning {{{name!r}: (args...)}} (as in "
            f"examples/model_class.py); or differentiate a function taking {item} as an array",
        )


def _root_of(item: str) -> tuple[str, object]:
    """(the parameter, the first key) of a leaf's path as the API spells it (`p['W']`,
    `layers[0]['b']`); (item, None) for anything else."""
    try:
        node = ast.parse(item, mode="eval").body
    except SyntaxError:
        return item, None
    key = None
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        if isinstance(node, ast.Attribute):
            key = node.attr
        elif isinstance(node.slice, ast.Constant):
            key = node.slice.value
        node = node.value
    return (node.id, key) if isinstance(node, ast.Name) else (item, None)


def _first_read(tree: ast.FunctionDef, root: str, key) -> ast.AST:
    """The first node reading `root[key]` or `root.key` (else `root`, else the `def`)."""
    reads = sorted(
        (
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.Name) and n.id == root and isinstance(n.ctx, ast.Load)
        ),
        key=lambda n: (n.lineno, n.col_offset),
    )
    keyed = [n for n in ast.walk(tree) if _reads_key(n, root, key)]
    if keyed:
        return min(keyed, key=lambda n: (n.lineno, n.col_offset))
    return reads[0] if reads else tree


def _reads_key(node, root: str, key) -> bool:
    if not isinstance(node, (ast.Subscript, ast.Attribute)):
        return False
    if not (isinstance(node.value, ast.Name) and node.value.id == root):
        return False
    if isinstance(node, ast.Attribute):
        return node.attr == key
    return isinstance(node.slice, ast.Constant) and node.slice.value == key
