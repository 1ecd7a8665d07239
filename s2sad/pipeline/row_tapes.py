"""Tapes of rows for Numba: where a `for` loop's trip count is known when the loop starts, the
values its body records go into one preallocated array each, a row an iteration, instead of
onto lists. Compiled, a list tape allocates (and keeps alive) one array a step and pushes and
pops it; a jitted LSTM spent half its gradient there. The rows are made at the first push, when
the values' shapes are known (`row_tape`, rules/tapes.py), and a value that does not fit (another
shape, a large array) goes onto a list beside them, so the rows need no proof of equal shapes.

    x_tape = []                       ->  t_taped = 0
    for t in range(n):                    for t in range(n):
        ...                                   ...
        x_tape.append(x)                      if t_taped == 0:
        y_tape.append(y)                          x_tape = row_tape(x, n)
                                                  y_tape = row_tape(y, n)
                                              push_row(x_tape, t_taped, x)
                                              push_row(y_tape, t_taped, y)
                                              t_taped += 1
    ...                                   ...
    for t in reversed(range(n)):          for t in reversed(range(n)):
        y = y_tape.pop()                      t_taped -= 1
        x = x_tape.pop()                      y = pop_row(y_tape, t_taped)
                                              x = pop_row(x_tape, t_taped)

The values pushed together at one place (the end of a loop's body) share one count. A tape
stays a list where it is pushed at more than one place (a `break` pushes what the body's end
would), popped other than into a name as one run, where the name it is popped into is written
into by the adjoint (a row is a copy, not the array the primal had), where
the value's rank is not known, or where a loop around the push is a `while` or a `for` whose
trip count an enclosing loop may change (`range(t)` in a loop over `t`). A tape of an array's
shapes (shape_tapes.py: `shape_push(x_tape, x)`, not proven of one shape) pushed and popped in
the runs of a group goes into rows of integers counted with it (`x_tape = shape_rows(trips, 1)`,
`push_shape_row(x_tape, t_taped, x.shape)`, `x = pop_shape_row(x_tape, t_taped, x)`): the push
takes the shape alone, no reference to the array. A tape of arrays bound to a subscript (views,
`z = y[:-1]`) is made by `view_rows` and pushed by `push_view`: compiled without a workspace, a
list keeping the views uncopied (rows made afresh cost the RK4 ODE at n=1000 twice the list's
time); with one, rows in it the elements are copied into (rules/pools.py: at n=1e5 the list
held 320 MB of arrays the steps made, fresh pages at every call). The pass runs on the
fused jitted code only (not on threads): the unfused code, its fallback, keeps lists. It
consumes and produces statement lists."""

from __future__ import annotations

import ast

from ..astcopy import clone, walk_nodes
from .names import names_mentioned
from .nodes import assign_to, call_of, load_name, stored_base
from .normalize import NameAllocator
from .shape_tapes import _copied


def row_tapes(
    inits: list[ast.stmt],
    primal: list[ast.stmt],
    adjoint: list[ast.stmt],
    taken: set[str],
    rank_of,
) -> tuple[list[ast.stmt], list[ast.stmt], list[ast.stmt]]:
    """`inits`, `primal` and `adjoint` with the list tapes that qualify kept in rows: those
    popped into a name `rank_of` knows the rank of (a number or an array)."""
    tapes = {
        s.targets[0].id
        for s in inits
        if isinstance(s.value, ast.List) and not s.value.elts and len(s.targets) == 1
    }
    if not tapes:
        return inits, primal, adjoint
    uses = dict.fromkeys(tapes | {s.targets[0].id for s in inits if _unfixed_shape_tape(s)}, 0)
    for node in walk_nodes(ast.Module(primal + adjoint, [])):
        if isinstance(node, ast.Name) and node.id in uses:
            uses[node.id] += 1
    pushes: dict[str, list] = {t: [] for t in tapes}  # tape -> [(block, push, loops)]
    _find_pushes(primal, (), tapes, pushes)
    pops: dict[str, list] = {t: [] for t in tapes}  # tape -> [(block, pop)]
    _find_pops(adjoint, tapes, pops)
    written = _written(adjoint)
    views = _views(primal, rank_of)
    ok = {
        t
        for t in tapes
        if len(pushes[t]) == 1
        and len(pops[t]) == 1
        and uses[t] == 2
        and _known_trips(pushes[t][0][2])
        and pops[t][0][1].targets[0].id not in written
        and isinstance(rank_of(pops[t][0][1].targets[0]), int)
    }
    viewed = {t for t in ok if pops[t][0][1].targets[0].id in views}
    shapes = {  # tapes of shapes not proven fixed (shape_tapes.py), used by one push and pop
        s.targets[0].id for s in inits if _unfixed_shape_tape(s) and uses.get(s.targets[0].id) == 2
    }
    names = NameAllocator(taken | names_mentioned(inits + primal + adjoint))
    converted: set[str] = set()
    counts = []
    for group in list(_push_groups(primal, ok, pushes)):
        block, loops = group[0][0], group[0][2]
        pushed = [s for _, s, _ in group]
        tapes_here = [s.value.func.value.id for s in pushed]
        pop_block = pops[tapes_here[0]][0][0]
        if not all(pops[t][0][0] is pop_block for t in tapes_here):
            continue
        popped = [pops[t][0][1] for t in tapes_here]
        at = sorted(_index(pop_block, s) for s in popped)
        if not all(_pop_like(pop_block[i]) for i in range(at[0], at[-1] + 1)):
            continue  # the pops are not one run: the count could not go down once for all
        stem = loops[-1].target.id.strip("_")  # `for _ in range(n)`: step_taped
        stem = stem if stem.isidentifier() else "step"
        count = names.fresh(f"{stem}_taped")
        counts.append(assign_to(count, ast.Constant(0)))
        converted.update(tapes_here)
        shaped = _shape_rows(block, pushed, pop_block, popped, shapes, rank_of)
        converted.update(shaped)
        capacity = _capacity(loops)
        if len(pushed) + len(shaped) > 1 and not isinstance(capacity, ast.Name):
            trips = names.fresh(f"{stem}_trips")
            bound = _copied(assign_to(trips, capacity), pushed[0])
            capacity = load_name(trips)
        else:
            bound = None
        _rewrite_pushes(block, pushed, count, capacity, bound, shaped, viewed)
        _rewrite_pops(pop_block, popped, count, shaped)
    return [s for s in inits if s.targets[0].id not in converted] + counts, primal, adjoint


def _index(block: list, stmt) -> int:
    """Where `stmt` itself (not an equal statement) stands in `block`."""
    return next(i for i, s in enumerate(block) if s is stmt)


def _push_of(stmt, tapes) -> str | None:
    """The tape of a statement `tape.append(value)`, else None."""
    if not isinstance(stmt, ast.Expr):
        return None
    return _tape_called(stmt.value, "append", 1, tapes)


def _pop_of(stmt, tapes) -> str | None:
    """The tape of a statement `name = tape.pop()`, else None."""
    if not (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
    ):
        return None
    return _tape_called(stmt.value, "pop", 0, tapes)


def _tape_called(call, method: str, count: int, tapes) -> str | None:
    """The tape of `tape.method(...)` with `count` positional arguments, else None."""
    if (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == method
        and isinstance(call.func.value, ast.Name)
        and call.func.value.id in tapes
        and len(call.args) == count
        and not call.keywords
    ):
        return call.func.value.id
    return None


def _push_like(stmt) -> bool:
    """A push onto a list tape or a shape tape (`shape_push(x_tape, x)`)."""
    if _push_of(stmt, _ANY) is not None:
        return True
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and getattr(stmt.value.func, "id", None) in ("shape_push", "push_shape_row")
    )


def _pop_like(stmt) -> bool:
    """A pop from a list tape or a shape tape (`x = shape_pop(x_tape, x)`)."""
    if _pop_of(stmt, _ANY) is not None:
        return True
    return (
        isinstance(stmt, ast.Assign)
        and isinstance(stmt.value, ast.Call)
        and getattr(stmt.value.func, "id", None) in ("shape_pop", "pop_shape_row")
    )


class _Any:
    def __contains__(self, name) -> bool:
        return True


_ANY = _Any()


def _find_pushes(block: list, loops: tuple, tapes, out: dict) -> None:
    for stmt in block:
        tape = _push_of(stmt, tapes)
        if tape is not None:
            out[tape].append((block, stmt, loops))
        elif isinstance(stmt, ast.If):
            _find_pushes(stmt.body, loops, tapes, out)
            _find_pushes(stmt.orelse, loops, tapes, out)
        elif isinstance(stmt, (ast.For, ast.While)):
            _find_pushes(stmt.body, loops + (stmt,), tapes, out)
            _find_pushes(stmt.orelse, loops, tapes, out)


def _find_pops(block: list, tapes, out: dict) -> None:
    for stmt in block:
        tape = _pop_of(stmt, tapes)
        if tape is not None:
            out[tape].append((block, stmt))
        elif isinstance(stmt, (ast.If, ast.For, ast.While)):
            _find_pops(stmt.body, tapes, out)
            _find_pops(stmt.orelse, tapes, out)


def _written(stmts: list) -> set[str]:
    """Names the adjoint writes into (`x[i] = v`, `x += v`): a row popped into one would be
    written in place of the array the primal had."""
    out = set()
    for node in walk_nodes(ast.Module(stmts, [])):
        target = None
        if isinstance(node, ast.AugAssign):
            target = node.target
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            target = node
        while isinstance(target, ast.Subscript):
            target = target.value
        if isinstance(target, ast.Name):
            out.add(target.id)
    return out


def _views(primal: list, rank_of) -> set[str]:
    """Arrays bound to a subscript (`z = y[:-1]`, likely a view): a list keeps such a view
    without a copy, where a row would copy its elements (the RK4 ODE's were slower so)."""
    out = set()
    for node in walk_nodes(ast.Module(primal, [])):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Subscript)
            and rank_of(node.targets[0]) != 0
        ):
            out.add(node.targets[0].id)
    return out


def _known_trips(loops: tuple) -> bool:
    """Whether every loop around a push is `for _ in range(...)` whose bounds no loop around the
    push changes: then the product of their trip counts, computed at the first push, is the
    number of pushes at most."""
    if not loops:
        return False
    changed = set()
    for loop in loops:
        changed |= _assigned(loop)
    for loop in loops:
        if not (
            isinstance(loop, ast.For)
            and isinstance(loop.target, ast.Name)
            and isinstance(loop.iter, ast.Call)
            and getattr(loop.iter.func, "id", None) == "range"
            and 1 <= len(loop.iter.args) <= 3
            and not loop.iter.keywords
            and not loop.orelse
        ):
            return False
        if names_mentioned(loop.iter.args) & changed:
            return False
    return True


def _assigned(loop) -> set[str]:
    """Names a loop binds or writes into, its index included."""
    out = set()
    for node in walk_nodes(loop):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            out.add(stored_base(node))
    return out - {None}


def _push_groups(block: list, ok: set, pushes: dict):
    """Runs of pushes of qualifying tapes, each run one block's consecutive pushes (shape tapes'
    among them), as lists of (block, push, loops)."""
    for stmt in block:
        if isinstance(stmt, (ast.If, ast.For, ast.While)):
            yield from _push_groups(stmt.body, ok, pushes)
            yield from _push_groups(stmt.orelse, ok, pushes)
    run: list = []
    for stmt in block:
        tape = _push_of(stmt, ok)
        if tape is not None:
            run.append(pushes[tape][0])
        elif not _push_like(stmt):
            if run:
                yield run
            run = []
    if run:
        yield run


def _capacity(loops: tuple) -> ast.expr:
    """The product of the loops' trip counts: `n` for `range(n)`, else `len(range(a, b))`."""
    total = None
    for loop in loops:
        args = loop.iter.args
        trips = args[0] if len(args) == 1 else ast.Call(load_name("len"), [loop.iter], [])
        total = trips if total is None else ast.BinOp(total, ast.Mult(), trips)
    return total


def _unfixed_shape_tape(stmt) -> bool:
    """`x_tape = shape_tape()`: a tape of shapes not proven of one (shape_tapes.py)."""
    return (
        isinstance(stmt.value, ast.Call)
        and getattr(stmt.value.func, "id", None) == "shape_tape"
        and not stmt.value.args
        and len(stmt.targets) == 1
    )


def _shape_rows(block, pushed, pop_block, popped, shapes: set, rank_of) -> dict:
    """{tape: (push, pop, axes)} for the tapes of shapes of arrays pushed in the run of
    `pushed` (`shape_push(tape, x)`) and popped in the run of `popped` (`x = shape_pop(tape,
    x)`): their shapes go into rows of integers (one per axis) counted with the group's."""
    pops = {}
    for stmt in _run(pop_block, popped, _pop_like):
        if isinstance(stmt, ast.Assign) and _shape_call(stmt.value, "shape_pop", shapes):
            pops[stmt.value.args[0].id] = stmt
    out = {}
    for stmt in _run(block, pushed, _push_like):
        if not (isinstance(stmt, ast.Expr) and _shape_call(stmt.value, "shape_push", shapes)):
            continue
        tape, value = (a.id for a in stmt.value.args)
        pop = pops.get(tape)
        axes = rank_of(ast.Name(value, ast.Load()))
        if pop is not None and pop.targets[0].id == value and type(axes) is int and axes >= 1:
            out[tape] = (stmt, pop, axes)
    return out


def _shape_call(call, func: str, tapes: set) -> bool:
    """`func(tape, x)`, a tape of `tapes` and a name."""
    return (
        isinstance(call, ast.Call)
        and getattr(call.func, "id", None) == func
        and len(call.args) == 2
        and all(isinstance(a, ast.Name) for a in call.args)
        and call.args[0].id in tapes
    )


def _run(block: list, stmts: list, alike) -> list:
    """The statements of `block` around `stmts` for which `alike` holds, without a break."""
    at = [_index(block, s) for s in stmts]
    first, last = min(at), max(at)
    while first > 0 and alike(block[first - 1]):
        first -= 1
    while last + 1 < len(block) and alike(block[last + 1]):
        last += 1
    return block[first : last + 1]


def _rewrite_pushes(
    block: list, pushed: list, count: str, capacity: ast.expr, bound, shaped: dict, viewed: set
) -> None:
    """The pushes `pushed` in `block` become `push_row`s after one `if count == 0:` making the
    rows (after `bound`, the trip count's name bound, where given), and the count goes up after
    the last push of their run; the pushes of `shaped`'s tapes of shapes, `push_shape_row`s;
    those of `viewed`'s tapes (of views), `push_view`s onto `view_rows`."""
    makes, at = [bound] if bound is not None else [], [_index(block, s) for s in pushed]
    for tape, (push, _, axes) in shaped.items():
        k, value = _index(block, push), push.value.args[1].id
        rows = call_of("shape_rows", clone(capacity), ast.Constant(axes))
        makes.append(_copied(assign_to(tape, rows), push))
        shape = ast.Attribute(load_name(value), "shape", ast.Load())
        block[k] = _copied(
            ast.Expr(call_of("push_shape_row", load_name(tape), load_name(count), shape)), push
        )
        at.append(k)
    for i in at[: len(pushed)]:
        stmt = block[i]
        tape, value = stmt.value.func.value.id, stmt.value.args[0]
        made, pushing = ("view_rows", "push_view") if tape in viewed else ("row_tape", "push_row")
        make = assign_to(tape, call_of(made, clone(value), clone(capacity)))
        makes.append(_copied(make, stmt))
        push = call_of(pushing, load_name(tape), load_name(count), value)
        block[i] = _copied(ast.Expr(push), stmt)
    last = max(at)
    while last + 1 < len(block) and _push_like(block[last + 1]):
        last += 1
    step = ast.AugAssign(ast.Name(count, ast.Store()), ast.Add(), ast.Constant(1))
    block.insert(last + 1, _copied(step, block[last]))
    test = ast.Compare(load_name(count), [ast.Eq()], [ast.Constant(0)])
    block.insert(min(at), _copied(ast.If(test, makes, []), block[min(at)]))


def _rewrite_pops(block: list, popped: list, count: str, shaped: dict) -> None:
    """The pops `popped` in `block` become `pop_row`s after one `count -= 1` before their run;
    the pops of `shaped`'s tapes of shapes, `pop_shape_row`s."""
    for tape, (_, pop, _) in shaped.items():
        value = pop.targets[0].id
        rows = call_of("pop_shape_row", load_name(tape), load_name(count), load_name(value))
        block[_index(block, pop)] = _copied(ast.Assign(pop.targets, rows), pop)
    at = [_index(block, s) for s in popped]
    first = min(at)
    while first > 0 and _pop_like(block[first - 1]):
        first -= 1
    for i in at:
        stmt = block[i]
        tape = stmt.value.func.value.id
        pop = call_of("pop_row", load_name(tape), load_name(count))
        block[i] = _copied(ast.Assign(stmt.targets, pop), stmt)
    step = ast.AugAssign(ast.Name(count, ast.Store()), ast.Sub(), ast.Constant(1))
    block.insert(first, _copied(step, block[first]))
