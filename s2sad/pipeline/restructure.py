"""Rewrites of the user's AST before normalization, so that control leaves blocks only at
their ends: early `return`s become assignments in tail position, and `if c: continue` /
`if c: break` at the top of a loop body become `if`/`else` around the rest of the body.
"""

from __future__ import annotations

import ast
import copy
from collections import deque

from .. import ir
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


def lift_returns(stmts: list[ast.stmt], result: ast.expr, parsed, fresh=None) -> list[ast.stmt]:
    """Every `return e` becomes `<result> = e` at the end of its path; code after it is dropped.
    A `return` inside a loop (`fresh` names the flag and value it needs) becomes a `break`
    (see `_loop_returns`)."""
    out: list[ast.stmt] = []
    for i, stmt in enumerate(stmts):
        if isinstance(stmt, ast.Return):
            assign = ast.Assign([clone(result)], stmt.value)
            out.append(ast.copy_location(assign, stmt))
            return out
        if isinstance(stmt, (ast.For, ast.While)) and _contains(stmt, ast.Return):
            node = _find(stmt, ast.Return)
            if fresh is None or stmt.orelse:
                raise parsed.error(
                    UnsupportedSyntaxError,
                    "s2sad cannot differentiate a `return` inside this loop yet",
                    node,
                    hint="assign the result and `break`, then return after the loop",
                )
            out += _loop_returns(stmt, stmts[i + 1 :], result, parsed, fresh)
            return out
        if isinstance(stmt, ast.If) and _contains(stmt, ast.Return):
            rest = stmts[i + 1 :]
            new = copy.copy(stmt)
            new.body = lift_returns(stmt.body + rest, result, parsed, fresh)
            new.orelse = lift_returns(stmt.orelse + rest, result, parsed, fresh)
            out.append(new)
            return out
        out.append(stmt)
    return out


def _loop_returns(loop, rest: list[ast.stmt], result: ast.expr, parsed, fresh) -> list[ast.stmt]:
    """`for ...: ... if c: stmts; return e` followed by `rest` becomes

        returned = 0
        for ...: ... if c: returned = 1; break
        if returned == 1: stmts; <result> = e
        else: rest (its returns lifted)

    The statements of the exit run after the loop, where every name holds the value it held at
    the `break` (as a loop's values do after it). A `return` must stand last in an `if`
    directly in a loop's body, or in a loop inside it, which then breaks out of the loops
    around it too."""
    flag = fresh("returned")
    exits: list[list[ast.stmt]] = []  # per exit: its statements, the return last

    def at(node, where):
        ast.copy_location(node, where)
        ast.fix_missing_locations(node)
        return node

    def leave(stmts: list[ast.stmt], where) -> list[ast.stmt]:
        exits.append(stmts)
        code = ast.Assign([ast.Name(flag, ast.Store())], ast.Constant(len(exits)))
        return [at(code, where), at(ast.Break(), where)]

    def refuse(node):
        return parsed.error(
            UnsupportedSyntaxError,
            "s2sad supports a `return` inside a loop only as the last statement of an `if` "
            "(or of its `else`) directly in the loop's body, not of an `elif` or an `if` nested "
            "in another",
            node,
            hint="write each exit as its own `if c: return v` in the loop's body (an `elif` "
            "becomes a second `if`), or assign the result and `break`, then return after the "
            "loop",
        )

    def body_of(loop_stmt):
        new = copy.copy(loop_stmt)
        body = []
        for stmt in loop_stmt.body:
            if isinstance(stmt, ast.Return):
                raise refuse(stmt)
            if isinstance(stmt, ast.If) and _contains(stmt, ast.Return):
                stmt = copy.copy(stmt)
                if not (stmt.body and isinstance(stmt.body[-1], ast.Return)) and (
                    stmt.orelse and isinstance(stmt.orelse[-1], ast.Return)
                ):  # if c: ... else: ...; return e
                    stmt.test = at(ast.UnaryOp(ast.Not(), stmt.test), stmt.test)
                    stmt.body, stmt.orelse = stmt.orelse, stmt.body
                last = stmt.body[-1] if stmt.body else None
                if (
                    not isinstance(last, ast.Return)
                    or _contains(stmt.body[:-1] + stmt.orelse, ast.Return)
                    or _contains(stmt.body, (ast.Break, ast.Continue))
                ):
                    raise refuse(_find(stmt, ast.Return))
                stmt.body = leave(stmt.body, last)
            elif isinstance(stmt, (ast.For, ast.While)) and _contains(stmt, ast.Return):
                if stmt.orelse:
                    raise refuse(_find(stmt, ast.Return))
                inner = body_of(stmt)
                body.append(inner)
                test = ast.Compare(ast.Name(flag, ast.Load()), [ast.Gt()], [ast.Constant(0)])
                stmt = at(ast.If(test, [at(ast.Break(), inner)], []), inner)
                ir.mark_synthetic(stmt)
            body.append(stmt)
        new.body = body
        return new

    start = at(ast.Assign([ast.Name(flag, ast.Store())], ast.Constant(0)), loop)
    line = parsed.split_lines[loop.lineno - 1] if loop.lineno <= len(parsed.split_lines) else ""
    start.end_lineno, start.end_col_offset = loop.lineno, len(line.encode())  # its first line
    new_loop = body_of(loop)
    after = lift_returns(rest, result, parsed, fresh)
    endless = isinstance(loop, ast.While) and isinstance(loop.test, ast.Constant)
    if endless and loop.test.value and not _contains_outside_loops(loop.body, ast.Break):
        after = lift_returns(exits.pop(), result, parsed, fresh)  # left only by its returns
    for k in reversed(range(len(exits))):
        test = ast.Compare(ast.Name(flag, ast.Load()), [ast.Eq()], [ast.Constant(k + 1)])
        branch = at(ast.If(test, lift_returns(exits[k], result, parsed, fresh), after), loop)
        ir.mark_synthetic(branch)
        after = [branch]
    if not exits and not _reads(new_loop, flag):  # its one exit needs no flag
        return [_unflagged(new_loop, flag)] + after
    return [start, new_loop] + after


def _reads(node, name: str) -> bool:
    return any(
        isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
        for n in ast.walk(node)
    )


def _unflagged(node, flag: str):
    """`node` without its assignments of `flag` (copied where changed)."""

    def block(stmts):
        out = []
        for stmt in stmts:
            if isinstance(stmt, ast.Assign) and [getattr(t, "id", None) for t in stmt.targets] == [
                flag
            ]:
                continue
            if isinstance(stmt, (ast.If, ast.For, ast.While)):
                stmt = copy.copy(stmt)
                stmt.body, stmt.orelse = block(stmt.body), block(stmt.orelse)
            out.append(stmt)
        return out

    node = copy.copy(node)
    node.body = block(node.body)
    return node


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
    return isinstance(last, ast.Raise)  # a path that raises returns nothing


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
