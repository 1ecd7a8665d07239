"""Nodes the stages build: a name read, a call, an assignment, a subscript's index as an ordinary
expression, whether an index is basic (a view, known without running it), and the index
selecting it in every row of a batched value. They consume and produce `ast` nodes."""

from __future__ import annotations

import ast

from ..astcopy import clone


def load_name(name: str) -> ast.Name:
    return ast.Name(name, ast.Load())


def call_of(func: str, *args: ast.expr) -> ast.Call:
    """A call of `func` (a name or a dotted path, `np.zeros_like`)."""
    return ast.Call(ast.parse(func, mode="eval").body, list(args), [])


def weighed_by_dtype(value: ast.expr, array: str) -> ast.BinOp:
    """`value * inexact(array)`: the derivative of a value stored into `array`, whose dtype is
    known only at run time (zero where its integers truncate the value)."""
    return ast.BinOp(value, ast.Mult(), call_of("inexact", load_name(array)))


def assign_to(name: str, value: ast.expr) -> ast.Assign:
    return ast.Assign([ast.Name(name, ast.Store())], value)


def assigned_name(stmt: ast.AST) -> str | None:
    """The name `stmt` binds where it is `name = value`, else None."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target = stmt.targets[0]
        return target.id if isinstance(target, ast.Name) else None
    return None


def stored_base(node: ast.Subscript) -> str | None:
    """The name a subscript store writes into (`a[i][j] = v`: `a`), or None (an attribute's)."""
    base = node.value
    while isinstance(base, ast.Subscript):
        base = base.value
    return base.id if isinstance(base, ast.Name) else None


def index_expr(node: ast.expr) -> ast.expr:
    """A subscript's index as an ordinary expression: 1:3 becomes slice(1, 3, None)."""
    if isinstance(node, ast.Slice):
        parts = [
            p if p is not None else ast.Constant(None) for p in (node.lower, node.upper, node.step)
        ]
        return ast.Call(ast.Name("slice", ast.Load()), parts, [])
    if isinstance(node, ast.Tuple):
        return ast.Tuple([index_expr(e) for e in node.elts], ast.Load())
    return node


def subscript_index(node: ast.expr) -> ast.expr:
    """The inverse of index_expr: slice(1, 3, None) becomes 1:3 again (a copy), for a subscript."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "slice"
        and len(node.args) == 3
        and not node.keywords
    ):
        parts = [
            None if isinstance(p, ast.Constant) and p.value is None else clone(p) for p in node.args
        ]
        return ast.Slice(*parts)
    if isinstance(node, ast.Tuple):
        return ast.Tuple([subscript_index(e) for e in node.elts], ast.Load())
    return clone(node)


def is_basic_index(node: ast.expr, indices: set[str]) -> bool:
    """An index NumPy treats as a view (no repeated elements), known without running it."""
    if isinstance(node, ast.Constant):
        return node.value is None or node.value is Ellipsis or isinstance(node.value, int)
    if isinstance(node, ast.Name):
        return node.id in indices
    if isinstance(node, ast.Slice):
        return True
    if isinstance(node, ast.Tuple):
        return all(is_basic_index(e, indices) for e in node.elts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        return is_basic_index(node.left, indices) and is_basic_index(node.right, indices)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return is_basic_index(node.operand, indices)
    return False


def batched_slice(d: str, index: ast.expr, indices: set[str]) -> ast.expr:
    """The index selecting `index` in every row of the batched `d`: `:, index` where that is
    plain (ints, slices, loop indices, a single array or mask), else computed at run time (NumPy
    moves separated advanced indices to the front; see batched_index)."""
    items = index.elts if isinstance(index, ast.Tuple) else [index]
    simple = all(is_basic_index(e, indices) for e in items) or (
        not isinstance(index, ast.Tuple) and isinstance(index, (ast.List, ast.Compare))
    )
    if simple:
        return ast.Tuple([ast.Slice(None, None, None)] + items, ast.Load())
    value = ast.Tuple(items, ast.Load()) if isinstance(index, ast.Tuple) else index
    return ast.Call(
        ast.Name("batched_index", ast.Load()), [ast.Name(d, ast.Load()), index_expr(value)], []
    )


NOT_CONSTANT = object()  # what `constant_value` gives for an expression it cannot evaluate


def constant_value(node: ast.expr):
    """The value of an expression of constants and operators only (`-1.65 * 0.74 < 0.6`, a
    rule's exponent `-2 - (-2 != 0)`), else NOT_CONSTANT."""
    if not all(
        isinstance(n, (ast.Constant, ast.expr_context, ast.operator, ast.unaryop, ast.cmpop))
        or isinstance(n, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.boolop))
        for n in ast.walk(node)
    ):
        return NOT_CONSTANT
    try:
        return eval(compile(ast.Expression(node), "<constant>", "eval"), {"__builtins__": {}})
    except Exception:  # 1 / 0, say: left to run time
        return NOT_CONSTANT


def own_nodes(tree):
    """The nodes of a function's body, not of the functions and lambdas defined in it."""
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))
