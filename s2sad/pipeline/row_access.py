"""Fused runs that write and read the rows of loops' tapes in place, for the fused jitted code:
where a loop pushes an array a fused run wrote every element of into a buffer (hoist.py), and
its tape's rows are made like that buffer before the loop (rows_before.py), the run writes the
elements into the tape's row instead; where the adjoint pops a row into a name that only a
fused run reads, element by element, the run reads the elements from the tape.

    for t in range(n):                          for t in range(n):
        if fusible(...):                            if fusible(...):
            x = reused(x_buffer, s, d)                  row_fits(x_tape, t_taped, s)
            for i0 in range(...):                       for i0 in range(...):
                x[i0] = ...                                 x_tape[t_taped, i0] = ...
        else:                                       else:
            x = ...                                     x = ...
        push_row(x_tape, t_taped, x)                    push_row(x_tape, t_taped, x)

    for t in range(n - 1, -1, -1):              for t in range(n - 1, -1, -1):
        x = pop_row(x_tape, t_taped)                if fusible(g, k) and fusible_row(g, x_tape):
        if fusible(g, k) and fusible(g, x):             for i0 in range(g.shape[0]):
            for i0 in range(g.shape[0]):                    ... x_tape[t_taped, i0] ...
                ... x[i0] ...                       else:
        else:                                           x = pop_row(x_tape, t_taped)
            ... x ...                                   ... x ...

Why: each array a compiled loop binds to a name is a reference Numba counts, an atomic
increment and decrement per iteration (the buffer `reused` hands back, the view `pop_row`
makes), and `push_row` copies the buffer into the row. RK4 on an 8-vector spent about a fifth
of its jitted gradient's time in those counts (perf, 2026-11-29); written and read in place,
2.03x the `numba.njit` primal's time where it took 2.66x (side by side, README).

`row_fits` raises what `push_row` raises where the row does not fit (the call then runs in the
code without fused loops, which keeps lists), `fusible_row` is `fusible` of a row. A name is
left as it was where it is read or written otherwise in the run (its shape, a slice of it,
a call), mentioned after the run in the loop's body or read after the loop, where the tape or
its count changes between the pop or push and the run, where the tape is not one of rows (a
list of views), or, for a push, where the rows are not made like the buffer right before the
loop (a loop nested in another: rows_before.py makes them before the outermost). The `else:`
branch, the original statements, pops and pushes as before. The pass runs last on the fused
jitted code; it consumes and produces statement lists (copies)."""

from __future__ import annotations

import ast
from collections import Counter

from ..astcopy import walk_nodes
from .. import ir
from .hoist import _exposed, _fused_guard
from .names import names_mentioned, names_read, names_stored
from .nodes import assigned_name, call_of, load_name

_ROWS = frozenset({"row_tape", "rows_like"})  # a tape of rows (view_rows: maybe a list)
# what an element's index may hold beside counters and integers (`x[i0 + 1, 0]`)
_INDEX_NODES = (ast.Tuple, ast.BinOp, ast.Load, ast.Add, ast.Sub, ast.Mult)


def rows_in_place(blocks: list[list], reads: list) -> list[list]:
    """`blocks` (a function's statement lists, in order) with fused runs writing and reading
    tapes' rows in place where they can; `reads` are the nodes the function reads last."""
    blocks = _fresh(blocks)
    nodes = list(walk_nodes(ast.Module([s for b in blocks for s in b], [])))
    stored = Counter(
        n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    )
    made = Counter(n.targets[0].id for n in nodes if _rows_made(n))
    rows = {name for name, k in made.items() if stored[name] == k}  # (bound to rows alone)
    end = [[ast.Expr(r) for r in reads]]
    for k, block in enumerate(blocks):
        _visit(block, blocks[k + 1 :] + end, rows)
    return blocks


def _fresh(x):
    """A copy of `x`, nodes and lists of them, whose nodes share their other attributes with
    `x`'s (the origin `ir.copy_origin` records, positions): the pass rewrites the copy in place,
    and an origin is only read (`clone` would deep-copy a statement's ParsedFunction)."""
    if isinstance(x, list):
        return [_fresh(v) for v in x]
    if not isinstance(x, ast.AST):
        return x
    y = x.__class__.__new__(x.__class__)
    y.__dict__.update(x.__dict__)
    for field in x._fields:
        value = getattr(x, field, None)
        if isinstance(value, (list, ast.AST)):
            setattr(y, field, _fresh(value))
    return y


def _rows_made(node) -> bool:
    """Whether `node` is `x_tape = row_tape(...)` or `rows_like(...)`."""
    return _bound_call(node, _ROWS) is not None


def _call_of(node, names) -> ast.Call | None:
    """`node`, where it is a call of one of `names` by name, without keywords."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in names
        and not node.keywords
    ):
        return node
    return None


def _bound_call(stmt, names) -> ast.Call | None:
    """The call of one of `names` that `stmt`, `x = call(...)`, binds to one name."""
    return _call_of(stmt.value, names) if assigned_name(stmt) is not None else None


def _visit(block: list, after: list, rows: set) -> None:
    for k, stmt in enumerate(block):
        then = [block[k + 1 :]] + after
        if isinstance(stmt, (ast.For, ast.While)):
            _visit(stmt.body, [[stmt]] + then, rows)
            if isinstance(stmt, ast.For):
                # the names read before being assigned from the loop's entry on (the body
                # again, then what follows): a name the rest of the body does not mention after
                # a run is read after it only if among them
                exposed = _exposed([[stmt]] + then, _all_reads)
                _write_in_place(stmt, block[:k], exposed, rows)
                _read_in_place(stmt, exposed, rows)
        elif isinstance(stmt, ast.If) and not _fused_guard(stmt):
            _visit(stmt.body, then, rows)
            _visit(stmt.orelse, then, rows)


class _Body:
    """A loop's body, the names each statement mentions and binds, as the rewrites change it."""

    def __init__(self, loop: ast.For):
        self.loop = loop
        self.mentions: dict[int, set] = {}
        self.stores: dict[int, set] = {}
        for stmt in loop.body:
            self.changed(stmt)

    def changed(self, stmt) -> None:
        self.mentions[id(stmt)] = names_mentioned([stmt])
        self.stores[id(stmt)] = set(names_stored([stmt]))

    def mentioning(self, stmts: list, name: str) -> list[int]:
        return [k for k, s in enumerate(stmts) if name in self.mentions[id(s)]]

    def binds(self, stmts: list, names: set) -> bool:
        return any(self.stores[id(s)] & names for s in stmts)


def _write_in_place(loop: ast.For, before: list, exposed: set, rows: set) -> None:
    """Each push of `loop`'s body whose fused run can write its row in place, rewritten so."""
    body = _Body(loop)
    for stmt in list(loop.body):
        found = _tape_call(stmt, "push_row")
        if found is None or found[0] not in rows or found[2] in exposed:
            continue
        tape, count, x = found
        p = loop.body.index(stmt)
        hits = body.mentioning(loop.body, x)
        g = ([h for h in hits if h < p] or [None])[-1]
        if g is None or hits[-1] != p or not _guard_with_else(loop.body[g]):
            continue
        guard = loop.body[g]
        if body.binds(loop.body[g:p], {tape, count}) or body.binds(loop.body, {tape}):
            continue
        if x in names_mentioned([guard.test]):
            continue
        made = _written(guard.body, x, _rows_like(before, tape))
        if made is None:
            continue
        _rewrite_writes(guard, x, made, tape, count)
        guard.orelse.append(stmt)
        loop.body.remove(stmt)
        body.changed(guard)


def _read_in_place(loop: ast.For, exposed: set, rows: set) -> None:
    """Each pop of `loop`'s body into a name only a fused run reads, element by element,
    rewritten to read the row in place."""
    body = _Body(loop)
    for stmt in list(loop.body):
        found = _popped(stmt)
        if found is None or found[0] not in rows or found[2] in exposed:
            continue
        tape, count, x = found
        q = loop.body.index(stmt)
        after = loop.body[q + 1 :]
        hits = body.mentioning(after, x)
        if len(hits) != 1 or not _guard_with_else(after[hits[0]]):
            continue  # (read by the run alone, and not after it)
        guard = after[hits[0]]
        if body.binds(after[: hits[0] + 1], {tape, count}):
            continue
        pairs = _fusible_pairs(guard.test, x)
        if pairs is None or not _elements_read(guard.body, x):
            continue
        for call in pairs:
            other = next(a for a in call.args if not (isinstance(a, ast.Name) and a.id == x))
            call.func.id, call.args = "fusible_row", [other, load_name(tape)]
        _index_rows(guard.body, x, tape, count, ast.Load)
        guard.orelse.insert(0, stmt)
        loop.body.remove(stmt)
        body.changed(guard)


def _all_reads(node) -> set[str]:
    return names_read([node])


def _tape_call(stmt, name: str):
    """(tape, count, x) for `name(tape, count, x)` of three names, as a statement."""
    call = _call_of(stmt.value, {name}) if isinstance(stmt, ast.Expr) else None
    if call is None or len(call.args) != 3 or not all(isinstance(a, ast.Name) for a in call.args):
        return None
    return tuple(a.id for a in call.args)


def _popped(stmt):
    """(tape, count, x) for `x = pop_row(tape, count)`."""
    call = _bound_call(stmt, {"pop_row"})
    if call is None or len(call.args) != 2 or not all(isinstance(a, ast.Name) for a in call.args):
        return None
    tape, count = (a.id for a in call.args)
    return tape, count, stmt.targets[0].id


def _guard_with_else(stmt) -> bool:
    return _fused_guard(stmt) and bool(stmt.orelse)


def _rows_like(before: list, tape: str) -> str | None:
    """The buffer `tape = rows_like(buffer, n)` in `before` makes the tape like, where that is
    the last statement of `before` binding `tape`."""
    for stmt in reversed(before):
        if tape in names_stored([stmt]):
            call = _bound_call(stmt, {"rows_like"})
            if call is not None and call.args and isinstance(call.args[0], ast.Name):
                return call.args[0].id
            return None
    return None


def _written(run: list, x: str, buffer: str | None) -> ast.Assign | None:
    """`x = reused(buffer, shape, dtype)` at the top of the fused run `run`, where the run
    otherwise only writes `x`'s elements and reads its shape through `shape_stub(x)`."""
    made = [s for s in run if x in names_stored([s])]
    call = _bound_call(made[0], {"reused"}) if len(made) == 1 and buffer is not None else None
    if call is None or len(call.args) != 3 or ast.unparse(call.args[0]) != buffer:
        return None
    allowed = {id(made[0].targets[0])}
    counters = _counters(run)
    for node in walk_nodes(ast.Module(run, [])):
        if isinstance(node, ast.Assign) and _element_of(node.targets[0], x, counters, ast.Store):
            allowed.add(id(node.targets[0].value))
        elif _shape_stub_of(node, x):
            allowed.add(id(node.args[0]))
    uses = [n for n in walk_nodes(ast.Module(run, [])) if isinstance(n, ast.Name) and n.id == x]
    return made[0] if all(id(n) in allowed for n in uses) else None


def _elements_read(run: list, x: str) -> bool:
    """Whether the fused run `run` reads `x` only element by element, and never writes it."""
    counters = _counters(run)
    allowed = {
        id(n.value)
        for n in walk_nodes(ast.Module(run, []))
        if _element_of(n, x, counters, ast.Load)
    }
    uses = [n for n in walk_nodes(ast.Module(run, [])) if isinstance(n, ast.Name) and n.id == x]
    return bool(uses) and all(id(n) in allowed for n in uses)


def _counters(run: list) -> set[str]:
    """The names the loops of the fused run `run` count with (`i0`)."""
    return {
        n.target.id
        for n in walk_nodes(ast.Module(run, []))
        if isinstance(n, ast.For) and isinstance(n.target, ast.Name)
    }


def _element_of(node, x: str, counters: set, ctx) -> bool:
    """Whether `node` is `x[i0, ...]`, loaded or stored (`ctx`), indexed by the run's loop
    `counters` and integers alone (a basic index: the row's `tape[count, i0, ...]` is the same)."""
    if not (
        isinstance(node, ast.Subscript)
        and isinstance(node.ctx, ctx)
        and isinstance(node.value, ast.Name)
        and node.value.id == x
    ):
        return False
    for n in walk_nodes(node.slice):
        if isinstance(n, ast.Name):
            fits = n.id in counters
        elif isinstance(n, ast.Constant):
            fits = type(n.value) is int
        else:
            fits = isinstance(n, _INDEX_NODES)
        if not fits:
            return False
    return True


def _shape_stub_of(node, x: str) -> bool:
    call = _call_of(node, {"shape_stub"})
    return call is not None and [ast.unparse(a) for a in call.args] == [x]


def _fusible_pairs(test, x: str) -> list | None:
    """The `fusible(a, x)` calls of a guard's test, where `x` appears in those alone."""
    pairs = [
        n
        for n in walk_nodes(test)
        if _call_of(n, {"fusible"}) is not None
        and len(n.args) == 2
        and sum(isinstance(a, ast.Name) and a.id == x for a in n.args) == 1
    ]
    uses = sum(isinstance(n, ast.Name) and n.id == x for n in walk_nodes(test))
    return pairs if pairs and uses == len(pairs) else None


def _rewrite_writes(guard: ast.If, x: str, made: ast.Assign, tape: str, count: str) -> None:
    """The fused run of `guard` writing `x`'s elements into the tape's row `count`."""
    buffer, shape = made.value.args[0].id, made.value.args[1]
    fits = ast.Expr(call_of("row_fits", load_name(tape), load_name(count), shape))
    guard.body[guard.body.index(made)] = ir.copy_origin(fits, made)
    for node in walk_nodes(ast.Module(guard.body, [])):
        if _shape_stub_of(node, x):
            node.args[0] = load_name(buffer)  # (the row's shape, which is the buffer's)
    _index_rows(guard.body, x, tape, count, ast.Store)


def _index_rows(run: list, x: str, tape: str, count: str, ctx) -> None:
    """Each `x[index]` (`ctx`) in `run` as `tape[count, index]`."""
    counters = _counters(run)
    for node in walk_nodes(ast.Module(run, [])):
        if _element_of(node, x, counters, ctx):
            index = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            node.value = load_name(tape)
            node.slice = ast.Tuple([load_name(count)] + list(index), ast.Load())
