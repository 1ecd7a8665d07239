"""The cleanup passes after flattening, on the normalized statements: drop the copies nothing
reads (`drop_unread_copies`), and keep in each loop's `liveout` only the names read after it
(`prune_liveout`). Both read and rewrite the annotations of `s2sad.ir` (`end_copy`, `merge_copy`,
`header`, `merged`, `liveout`).
"""

from __future__ import annotations

import ast
from collections import Counter

from ... import ir
from ...astcopy import walk_nodes
from ..names import names_mentioned, names_read, names_stored, read_before_assigned


def _bound_by(stmt: ast.stmt) -> set[str]:
    """The names an assignment binds: `y[i] = v` reads `y`, binds nothing."""
    targets = getattr(stmt, "targets", ())
    return names_mentioned([t for t in targets if not isinstance(t, ast.Subscript)])


def drop_unread_copies(stmts: list[ast.stmt], outputs: set[str]) -> None:
    """Remove the copies (`merged = old` ending a branch, `carried = last` ending an iteration)
    whose value nothing reads afterwards: dead code, which would also fail where the old value
    may not exist (the last value of a loop that ran no iteration, a name only one branch
    assigned) though Python reads nothing there. A copy counts as read only where a statement
    other than a dead copy reads it, so copies that only feed each other around a loop (a name
    each iteration assigns before reading it) go too."""
    needed: set[int] = set()
    _live_before(stmts, set(outputs), set(outputs), needed)
    _drop_copies_in(stmts, needed)


def _live_before(block: list[ast.stmt], live: set[str], at_exit: set[str], needed: set) -> set:
    """The names `block` may read before assigning them, given those in `live` are read after it
    and those in `at_exit` after the innermost loop (a `break`). Adds to `needed` the ids of the
    copies whose target is read later; a copy nothing reads reads nothing itself."""
    live = set(live)
    for stmt in reversed(block):
        if isinstance(stmt, ast.Break):
            live = set(at_exit)
        elif isinstance(stmt, ast.If):
            live = (
                _live_before(stmt.body, live, at_exit, needed)
                | _live_before(stmt.orelse, live, at_exit, needed)
                | names_read([stmt.test])
            )
        elif isinstance(stmt, (ast.For, ast.While)):
            live = _live_around_loop(stmt, live, needed)
        elif ir.is_copy(stmt):
            target = stmt.targets[0].id
            if target in live:
                needed.add(id(stmt))
                live = (live - {target}) | names_read([stmt.value])
        elif isinstance(stmt, ast.Assign):
            live = (live - _bound_by(stmt)) | names_read([stmt])
        else:
            live |= names_read([stmt])
    return live


def _live_around_loop(loop, after: set[str], needed: set) -> set[str]:
    """Names live before a loop: those read after it, by its header, or by an iteration before
    the iteration assigns them (grown from those read after it until nothing is added, so
    copies that only feed each other stay unread)."""
    head = set(after) | (names_read([loop.test]) if isinstance(loop, ast.While) else set())
    while True:
        body = _live_before(loop.body, head, after, needed)
        if isinstance(loop, ast.For):
            body -= {loop.target.id}
        grown = head | body
        if grown == head:
            break
        head = grown
    return head | (names_read([loop.iter]) if isinstance(loop, ast.For) else set())


def _drop_copies_in(block: list[ast.stmt], needed: set[int]) -> None:
    """Drop the unneeded copies, and the names they alone assigned from the loops' carried
    names and the `if`s' merged ones."""
    block[:] = [s for s in block if not ir.is_copy(s) or id(s) in needed]
    for stmt in block:
        for field_ in ("body", "orelse"):
            inner = getattr(stmt, field_, None)
            if isinstance(inner, list):
                _drop_copies_in(inner, needed)
        if isinstance(stmt, (ast.For, ast.While)) and ir.header(stmt):
            assigned = set(names_stored(stmt.body))
            ir.set_header(stmt, [n for n in ir.header(stmt) if n in assigned])
        elif isinstance(stmt, ast.If) and ir.merged(stmt):
            # a name one path no longer assigns is no merge: nothing reads it after the `if`
            # (the tape records it where it is assigned)
            ir.set_merged(
                stmt,
                [
                    n
                    for n in ir.merged(stmt)
                    if _surely_assigns(stmt.body, n) and _surely_assigns(stmt.orelse, n)
                ],
            )


def _surely_assigns(block: list[ast.stmt], name: str) -> bool:
    """Whether every path through `block` that reaches its end (or a `break`) assigns `name`."""
    for stmt in block:
        if isinstance(stmt, ast.Break):
            return True
        if isinstance(stmt, ast.Assign) and name in _bound_by(stmt):
            return True
        if (
            isinstance(stmt, ast.If)
            and _surely_assigns(stmt.body, name)
            and _surely_assigns(stmt.orelse, name)
        ):
            return True
    return False


def prune_liveout(stmts: list[ast.stmt], outputs: set[str]) -> None:
    """Keep in each loop's `liveout` only the names whose last value the rest of the function
    may read: read outside the loop, or read in the body before it assigns them (a value from an
    earlier iteration). The others are local to each iteration, which matters where no
    iteration assigns them (a path skipped by `continue`): nothing may read them then."""
    loops = [n for n in walk_nodes(ast.Module(stmts, [])) if isinstance(n, (ast.For, ast.While))]
    every = Counter()
    for node in walk_nodes(ast.Module(stmts, [])):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            every[node.id] += 1
    for loop in loops:
        if not ir.liveout(loop):
            continue
        inside = Counter()
        for node in loop.body:
            for n in walk_nodes(node):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                    inside[n.id] += 1
        exposed: set[str] = set()
        if isinstance(loop, ast.While):
            exposed |= names_read([loop.test])
        read_before_assigned(
            loop.body, {loop.target.id} if isinstance(loop, ast.For) else set(), exposed
        )
        ir.set_liveout(
            loop,
            [n for n in ir.liveout(loop) if n in outputs or n in exposed or every[n] > inside[n]],
        )


def drop_unread_constants(stmts: list[ast.stmt], known: set[str], outputs: set[str]) -> None:
    """Remove the assignments of integers known when the function was transformed (`known`:
    the depth of a recursion unrolled, its tests decided) that nothing reads any more."""
    while True:
        read = names_read(stmts) | set(outputs)
        dead = set(known) - read
        if not _drop_assignments(stmts, dead):
            return


def _drop_assignments(block: list[ast.stmt], dead: set[str]) -> bool:
    kept = [
        s
        for s in block
        if not (
            isinstance(s, ast.Assign)
            and isinstance(s.targets[0], ast.Name)
            and len(s.targets) == 1
            and s.targets[0].id in dead
        )
    ]
    dropped = len(kept) < len(block)
    block[:] = kept
    for stmt in block:
        for field_ in ("body", "orelse"):
            inner = getattr(stmt, field_, None)
            if isinstance(inner, list) and _drop_assignments(inner, dead):
                dropped = True
    return dropped
