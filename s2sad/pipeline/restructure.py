"""Rewrites of the user's AST before normalization, so that control leaves blocks only at
their ends: early `return`s become assignments in tail position, and `if c: continue` /
`if c: break` at the top of a loop body become `if`/`else` around the rest of the body.
"""

from __future__ import annotations

import ast
import copy
from collections import deque

from ..astcopy import clone
from ..errors import UnsupportedSyntaxError

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _find(node_or_list, kinds):
    """A node of `kinds` in these statements' own code, or None: a nested `def` or lambda is a
    scope of its own (its `return` leaves it, not the function)."""
    todo = deque(node_or_list if isinstance(node_or_list, list) else [node_or_list])
    while todo:
        node = todo.popleft()  # in the order of the source
        if isinstance(node, kinds):
            return node
        if not isinstance(node, _SCOPES):
            todo.extend(ast.iter_child_nodes(node))
    return None


def _contains(node_or_list, kinds) -> bool:
    return _find(node_or_list, kinds) is not None


def _contains_outside_loops(stmts: list[ast.stmt], kinds) -> bool:
    for stmt in stmts:
        if isinstance(stmt, kinds):
            return True
        if isinstance(stmt, ast.If) and (
            _contains_outside_loops(stmt.body, kinds) or _contains_outside_loops(stmt.orelse, kinds)
        ):
            return True
    return False


def lift_returns(stmts: list[ast.stmt], result: ast.expr, parsed) -> list[ast.stmt]:
    """Every `return e` becomes `<result> = e` at the end of its path; code after it is dropped."""
    out: list[ast.stmt] = []
    for i, stmt in enumerate(stmts):
        if isinstance(stmt, ast.Return):
            assign = ast.Assign([clone(result)], stmt.value)
            out.append(ast.copy_location(assign, stmt))
            return out
        if isinstance(stmt, (ast.For, ast.While)) and _contains(stmt, ast.Return):
            node = _find(stmt, ast.Return)
            raise parsed.error(
                UnsupportedSyntaxError,
                "s2sad cannot differentiate a `return` inside a loop yet",
                node,
                hint="assign the result and `break`, then return after the loop",
            )
        if isinstance(stmt, ast.If) and _contains(stmt, ast.Return):
            rest = stmts[i + 1 :]
            new = copy.copy(stmt)
            new.body = lift_returns(stmt.body + rest, result, parsed)
            new.orelse = lift_returns(stmt.orelse + rest, result, parsed)
            out.append(new)
            return out
        out.append(stmt)
    return out


def always_assigns(stmts: list[ast.stmt], name: str) -> bool:
    """Whether every path through `stmts` ends by assigning the (lifted) result `name`."""
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, ast.Assign):
        target = last.targets[0]
        names = [t.id for t in ast.walk(target) if isinstance(t, ast.Name)]
        return name in names
    if isinstance(last, ast.If):
        return always_assigns(last.body, name) and always_assigns(last.orelse, name)
    return False


def _is_jump(stmt: ast.stmt, kind) -> bool:
    """`if c: ...; break` (or continue) with no `else`, the jump last and nowhere else."""
    return (
        isinstance(stmt, ast.If)
        and stmt.body
        and isinstance(stmt.body[-1], kind)
        and (not stmt.orelse or kind is ast.Break or isinstance(stmt.body[-1], ast.Break))
        and not _contains_outside_loops(stmt.body[:-1] + stmt.orelse, (ast.Break, ast.Continue))
    )


def restructure_jumps(body: list[ast.stmt], parsed) -> tuple[list[ast.stmt], bool]:
    """`if c: continue` / `if c: break` followed by the rest become `if c: ... else: rest`.

    Returns the new body and whether it breaks."""
    out: list[ast.stmt] = []
    for i, stmt in enumerate(body):
        if _is_jump(stmt, (ast.Break, ast.Continue)):
            rest, breaks = restructure_jumps(body[i + 1 :], parsed)
            new = copy.copy(stmt)
            if isinstance(stmt.body[-1], ast.Break):  # if c: ...; break / else: ...; the rest
                new.body, new.orelse = list(stmt.body), list(stmt.orelse) + rest
            elif len(stmt.body) == 1:  # if not c: the rest
                new.test = ast.copy_location(ast.UnaryOp(ast.Not(), stmt.test), stmt.test)
                new.body, new.orelse = rest, []
            else:  # if c: ... / else: the rest
                new.body, new.orelse = list(stmt.body[:-1]), rest
            out.append(new)
            return out, breaks or isinstance(stmt.body[-1], ast.Break)
        if isinstance(stmt, (ast.Break, ast.Continue)) or (
            isinstance(stmt, ast.If) and _contains_outside_loops([stmt], (ast.Break, ast.Continue))
        ):
            node = next(n for n in ast.walk(stmt) if isinstance(n, (ast.Break, ast.Continue)))
            word = "break" if isinstance(node, ast.Break) else "continue"
            raise parsed.error(
                UnsupportedSyntaxError,
                f"s2sad supports `{word}` only as `if <condition>: {word}` "
                "directly in a loop body",
                node,
                hint=f"move the `{word}` into its own `if` at the loop's top level",
            )
        out.append(stmt)
    return out, False
