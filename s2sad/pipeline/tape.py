"""To-be-recorded analysis: which overwritten primal values the adjoint reads, and the pushes and
pops that bring them back. Only names the adjoint actually reads are recorded, each on its own
list (`h_tape`), so a loop that only accumulates records nothing beyond what its rules read.

- a value a block inside a loop assigns is pushed at the end of the block (and at each `break`
  leaving it) and popped where the reversed block starts;
- a loop-carried value is pushed before the end-of-body copy overwrites it, popped after its adjoint;
- the elements a subscript write overwrites are saved before it, written back after its adjoint.

The reverse pass leaves a `Marker` (markers.py) where pops and restores go; `record` consumes the primal and
the adjoint sweep with its markers and produces both with the pushes and pops in place.
"""

from __future__ import annotations

import ast
import copy
import numpy as np

from .. import ir, runtime
from ..astcopy import clone, walk_nodes
from .normalize import NameAllocator
from .nodes import assigned_name, load_name, stored_base
from .names import names_mentioned, names_read, statements_in_order
from .markers import Marker, all_reads, future_reads, markers
from .recorded import bound_for_breaks, owned, walk_skipping_loops
from .shape_reads import value_reads
from .snapshots import FinalReads, fresh_arrays, written_memory


class Tape:
    def __init__(self, primal: list, adjoint: list, taken: set, owned=(), is_int=None, returned=()):
        self.names = NameAllocator(taken)
        # (a kill's `dy = as_accumulator(dy, y)` reads y where the kill is kept)
        seen = adjoint + [s for m in markers(adjoint) for s in m.owning]
        self.reads = names_read(seen)
        self.shapes = self.reads - value_reads(seen)  # read for shape and dtype alone
        self.tapes: dict[str, str] = {}  # primal name -> its tape list
        self.saves: dict[int, tuple[str, bool]] = {}  # id(subscript write) -> (name, on tape)
        self.recorded: dict[int, list[str]] = {}  # id(block) -> names pushed at its end
        self._blocks: list[list] = []  # keeps the original block lists alive (their ids are keys)
        self.scalar = lambda name: False  # names known to hold scalars (no views to copy)
        self.saved = _copy  # the expression that saves the elements a write overwrites
        self.recompute = False  # recompute cheap values in the adjoint instead of recording
        self.separate_saves = False  # a tape per write for the elements it overwrites
        self.recomputed: dict[int, list[ast.stmt]] = {}  # id(block) -> statements to run again
        # loops that will run on threads (pipeline/parallel.py): their values are all recomputed
        # in the adjoint where they can be, since only one thread may push onto a tape
        self.threaded: set[int] = set()
        self.unrecorded: set[int] = set()  # ids of end copies whose old value is not recorded
        # statements in program order, and where each array is last written in place
        self.order: dict[int, int] = {}
        self.last_write: dict[str, int] = {}
        for i, stmt in enumerate(statements_in_order(primal)):
            self.order[id(stmt)] = i
            for t in getattr(stmt, "targets", []):
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
                    self.last_write[t.value.id] = i
        self.fresh = fresh_arrays(primal, value_reads(adjoint)) | set(owned)
        self.finals = FinalReads(primal, owned, is_int or (lambda node: False))
        self.allocated = _allocated_values(primal)
        self.written = written_memory(primal)  # None: any array may be written into
        self.mutates = any(
            isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store)
            for n in walk_nodes(ast.Module(primal, []))
        )
        self.future = {}  # id(restore marker) -> names read by adjoint code that may run after it
        # the returned cotangents are read after the sweep: dx[0] = 0.0 of `x[0] = 3.0` on a
        # parameter x is what makes its gradient zero there, never a dead store
        future_reads(adjoint, set(returned), self.future)
        # the same for a serial loop's carried values, counting reads of a shape and what a
        # restore or a kill reads (`dy[i] = 0.0` reads i as it was in that iteration)
        self.read_after: dict = {}
        future_reads(adjoint, set(returned), self.read_after, all_reads)
        self.restored = set()  # ids of subscript writes whose overwritten values come back
        self.pushed_once: set[int] = set()  # ids of blocks pushing before a break (_leaving_at)
        self.uncopied: set[int] = set()  # ids of the copies of dropped kills (Marker.copies)
        for marker in markers(adjoint):
            if marker.kind not in ("restore", "kill"):
                continue
            index = names_mentioned([marker.node.targets[0].slice])
            self.shapes -= index  # `y[idx] = ...`: idx's elements are read
            base = marker.node.targets[0].value.id
            kept = base in self.future[id(marker)]  # (a kept `dy[idx] = 0.0` reads idx then)
            if marker.kind == "restore" and (kept or base not in self.fresh):
                self.restored.add(id(marker.node))
                self.shapes.discard(base)  # its elements are written back: a stub would not do
            if kept or id(marker.node) in self.restored:
                self.reads |= index

    def tape(self, name) -> str:
        """The tape of a name, or of one write's saved elements (a key `(base, id)`)."""
        if name not in self.tapes:
            label = name if isinstance(name, str) else f"{name[0]}_old"
            self.tapes[name] = self.names.fresh(f"{label}_tape")
        return self.tapes[name]

    def push(self, name: str, value: ast.expr | None = None) -> ast.stmt:
        if value is None and name in self.shapes and not self.scalar(name):
            # the adjoint asks this value its shape alone: keep no copy of its elements
            value = ast.Call(load_name("shape_stub"), [load_name(name)], [])
        if value is None:
            value = load_name(name)
            shared = self.written is None or name in self.written
            if self.mutates and shared and not self.scalar(name) and name not in self.allocated:
                # a view of an array written later would change on the tape
                value = ast.Call(load_name("snapshot"), [value], [])
        call = ast.Call(
            ast.Attribute(load_name(self.tape(name)), "append", ast.Load()), [value], []
        )
        return ast.Expr(call)

    def pop(self, name: str) -> ast.expr:
        return ast.Call(ast.Attribute(load_name(self.tape(name)), "pop", ast.Load()), [], [])

    # ------------------------------------------------------------------ primal side
    def primal(
        self,
        block: list[ast.stmt],
        in_loop: bool,
        exits: list[list[str]],
        varying: dict | None = None,
        indices: tuple = (),
        loops: tuple = (),
    ) -> list:
        """`block` with its pushes; `exits` holds the pushes owed by enclosing blocks at a break;
        `varying` holds what the innermost enclosing loop changes, `indices` the indices of the
        enclosing `for` loops, `loops` those loops, outermost first."""
        if in_loop:
            defs = _definitions(block)
            mine = [
                n
                for n in owned(block)
                if n in self.reads and not _invariant(defs.get(n, []), n, varying or {})
                # a branch's name its enclosing block records already comes back where that
                # reversed block starts
                and not any(n in owed for owed in exits)
            ]
        else:
            mine = []
        if self.recompute and in_loop and mine:
            start = min((self.order.get(id(x), 0) for x in statements_in_order(block)), default=0)
            later = {n for n, i in self.last_write.items() if i >= start}
            threaded = any(id(x) in self.threaded for x in loops)
            # a value the adjoint reads for its shape alone is recorded as its shape, not computed
            # again (llsq's `x[j] * t**j`); a loop on threads pushes nothing, computing it all
            valued = [n for n in mine if threaded or n not in self.shapes or self.scalar(n)]
            again = _recomputable(
                block,
                valued,
                varying or {},
                set(indices),
                later,
                lambda read: self.finals.final(read, loops),
                _pure if threaded else _cheap,
            )
            if again:
                self.recomputed[id(block)] = again
                defined = {s.targets[0].id for s in again}
                mine = [n for n in mine if n not in defined]
        self.recorded[id(block)] = mine
        self._blocks.append(block)
        out: list[ast.stmt] = []
        leaving = _leaving_at(block, mine) if mine else None
        if leaving is not None:
            self.pushed_once.add(id(block))
        for k, stmt in enumerate(block):
            if k == leaving:  # pushed once, here: the break after it and the end push none
                out += [self.at(self.push(n), stmt) for n in mine]
                mine = []
            if isinstance(stmt, ast.If):
                stmt.body = self.primal(stmt.body, in_loop, exits + [mine], varying, indices, loops)
                stmt.orelse = self.primal(
                    stmt.orelse, in_loop, exits + [mine], varying, indices, loops
                )
            elif isinstance(stmt, (ast.For, ast.While)):
                inner = _changed_by(stmt)  # invariant in every enclosing loop, not just this one
                varying = varying or {}
                merged = {n: max(varying.get(n, 0), c) for n, c in inner.items()}
                merged.update({n: c for n, c in varying.items() if n not in inner})
                index = (stmt.target.id,) if isinstance(stmt, ast.For) else ()
                body = stmt.body
                stmt.body = self.primal(body, True, [], merged, indices + index, loops + (stmt,))
                if id(body) not in self.pushed_once:
                    out += [self.at(b, stmt) for b in bound_for_breaks(body, self.recorded)]
            elif isinstance(stmt, ast.Break):
                for names in exits + [mine]:
                    out += [self.at(self.push(n), stmt) for n in names]
            elif isinstance(stmt, ast.Assign) and ir.is_end_copy(stmt):
                target = stmt.targets[0].id
                if target in self.reads and not self.unread(stmt, loops):
                    out.append(self.at(self.push(target), stmt))
            elif isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Subscript):
                self.save(stmt, in_loop, out)
            out.append(stmt)
        if not (out and isinstance(out[-1], ast.Break)):
            out += [self.at(self.push(n), block[-1] if block else None) for n in mine]
        return out

    def unread(self, end_copy: ast.Assign, loops: tuple) -> bool:
        """Whether no adjoint code reads the value a loop-carried name had before this iteration
        (`c = k - 1` in a loop, read after it alone): then it is not recorded, a tape popped into
        nothing. A loop on threads counts reads of values (what it can, it computes again); a
        serial loop those of shapes too, and the index of each write put back or zeroed."""
        threaded = any(id(x) in self.threaded for x in loops)
        future = self.future if threaded else self.read_after
        if future.get(("header", id(end_copy)), {None}):
            return False
        self.unrecorded.add(id(end_copy))
        return True

    def save(self, stmt: ast.Assign, in_loop: bool, out: list) -> None:
        target = stmt.targets[0]
        base = target.value.id
        if id(stmt) not in self.restored:
            return
        old = self.saved(ast.Subscript(load_name(base), target.slice, ast.Load()))
        if in_loop:
            # compiled code types a list by its elements: each write gets its own tape there,
            # apart from the array's own values and other writes' rows or elements
            key = (base, id(stmt)) if self.separate_saves else base
            self.saves[id(stmt)] = (key, True)
            out.append(self.at(self.push(key, old), stmt))
        else:
            name = self.names.fresh(f"{base}_old")
            self.saves[id(stmt)] = (name, False)
            out.append(self.at(ast.Assign([ast.Name(name, ast.Store())], old), stmt))

    @staticmethod
    def at(stmt: ast.stmt, src) -> ast.stmt:
        return ir.take_origin(stmt, src)

    # ------------------------------------------------------------------ adjoint side
    def adjoint(self, stmts: list) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for stmt in stmts:
            if isinstance(stmt, Marker):
                out += self.fill(stmt)
            elif isinstance(stmt, (ast.If, ast.For)):
                stmt.body = self.adjoint(stmt.body)
                stmt.orelse = self.adjoint(stmt.orelse)
                out.append(stmt)
            else:
                out.append(stmt)
        return out

    def fill(self, marker: Marker) -> list[ast.stmt]:
        if marker.kind == "kill":
            target = marker.node.targets[0].value.id
            kept = target in self.future.get(id(marker), ())
            if not kept:
                self.uncopied |= {id(c) for c in marker.copies}
            return marker.owning + [marker.node] if kept else []
        if marker.kind == "block":
            return [
                ast.Assign([ast.Name(n, ast.Store())], self.pop(n))
                for n in reversed(self.recorded.get(marker.node, []))
            ] + [_again(s) for s in self.recomputed.get(marker.node, [])]
        stmt = marker.node
        if marker.kind == "header":
            target = stmt.targets[0].id
            if target not in self.reads or id(stmt) in self.unrecorded:
                return []
            return [self.at(ast.Assign([ast.Name(target, ast.Store())], self.pop(target)), stmt)]
        saved = self.saves.get(id(stmt))
        if saved is None:
            return []
        name, on_tape = saved
        target = stmt.targets[0]
        value = self.pop(name) if on_tape else load_name(name)
        store = ast.Subscript(load_name(target.value.id), target.slice, ast.Store())
        return [self.at(ast.Assign([store], value), stmt)]

    def inits(self) -> list[ast.stmt]:
        return [
            ast.Assign([ast.Name(t, ast.Store())], ast.List([], ast.Load()))
            for t in self.tapes.values()
        ]


def _leaving_at(block: list[ast.stmt], mine: list[str]) -> int | None:
    """Where a block that records `mine` can push them once for both ways out, the `break` and
    its end: the position of the statement holding its first `break` (`if change < tol:
    break`), where from there on it only leaves, counts or copies carried values (writing into
    no array, binding none of `mine`); else None, and the break and the end each push."""
    at = next(
        (
            k
            for k, s in enumerate(block)
            if any(isinstance(n, ast.Break) for n in walk_skipping_loops(s))
        ),
        None,
    )
    if at is None:
        return None

    def plain(stmt) -> bool:
        if isinstance(stmt, ast.If):
            calls = any(isinstance(n, ast.Call) for n in walk_nodes(stmt.test))
            return not calls and all(plain(s) for s in stmt.body + stmt.orelse)
        if isinstance(stmt, ast.Assign) and (ir.is_end_copy(stmt) or ir.is_counter(stmt)):
            return stmt.targets[0].id not in mine and isinstance(stmt.value, (ast.Name, ast.BinOp))
        return isinstance(stmt, (ast.Break, ast.Pass))

    return at if all(plain(s) for s in block[at:]) else None


def _recomputable(
    block: list[ast.stmt],
    names: list[str],
    varying: dict,
    indices: set[str],
    written: set[str],
    final_read=lambda read: False,
    cheap=None,
):
    """The statements of `block` that compute `names` again, in order, where that needs only
    the indices of the enclosing loops, values no enclosing loop changes, and other such
    statements of the block: `c = u[i, j]` with `u` never written. Running them at the start
    of the reversed block gives the values a tape would (compiled, recomputing costs less than
    recording). Arrays in `written` (written in place at or after the block) are not read again
    (a write after the loop need not be undone before the adjoint reaches it), except for reads
    `final_read` proves see an element's final value (`y[i - 1]` where the loop writes only
    `y[i]`). Blocks with a `break` keep their tapes."""
    if any(isinstance(s, ast.Break) for s in block):
        return []
    counts = _changed_by(ast.Module(block, []))
    top: dict[str, tuple[int, ast.Assign]] = {}
    for i, s in enumerate(block):
        if (
            assigned_name(s) is not None
            and not ir.is_end_copy(s)
            and not ir.is_counter(s)
            and counts.get(s.targets[0].id) == 1
        ):
            top[s.targets[0].id] = (i, s)
    needed: dict[int, ast.Assign] = {}

    def available(name: str, before: int, seen: frozenset, final=False) -> bool:
        if final:
            return True  # an array whose elements read here keep their values (FinalReads)
        if name in written:
            return False
        if name in indices or name not in varying and name not in counts:
            return True
        if name not in top or name in seen:
            return False
        i, s = top[name]
        if i >= before or not (cheap or _cheap)(s.value):
            return False
        reads = names_read([s.value])
        finals = _final_bases(s.value, final_read)
        if all(available(m, i, seen | {name}, m in finals) for m in reads):
            needed[i] = s
            return True
        return False

    chosen = [n for n in names if available(n, len(block), frozenset())]
    if not chosen:
        return []
    # the statements the chosen names need (those of names that failed are not kept)
    keep: dict[int, ast.Assign] = {}

    def collect(name: str) -> None:
        if name in top and top[name][0] in needed and top[name][0] not in keep:
            i, s = top[name]
            keep[i] = s
            for n in walk_nodes(s.value):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                    collect(n.id)

    for n in chosen:
        collect(n)
    return [keep[i] for i in sorted(keep)]


def _final_bases(value: ast.expr, final_read) -> set[str]:
    """Arrays that `value` reads only through subscripts `final_read` accepts."""
    ok: dict[str, bool] = {}
    inside = set()
    for node in walk_nodes(value):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            inside.add(id(node.value))
            name = node.value.id
            ok[name] = ok.get(name, True) and final_read(node)
    for node in walk_nodes(value):
        if isinstance(node, ast.Name) and id(node) not in inside and node.id in ok:
            ok[node.id] = False  # the whole array read as well
    return {n for n, v in ok.items() if v}


def _cheap(value: ast.expr) -> bool:
    """Arithmetic, reads and elementwise functions: cheaper to run again than to record (a
    product of matrices, a reduction or a solve is recorded instead)."""
    for node in walk_nodes(value):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            return False
        if isinstance(node, ast.Call):
            callee = ir.callee(node.func)
            elementwise = isinstance(callee, np.ufunc) or callee is runtime.snapshot
            if not elementwise and getattr(callee, "__module__", None) != "math":
                return False
    return True


def _pure(value: ast.expr) -> bool:
    """Computes the same value when run again: NumPy (but its random numbers), math and
    s2sad's helpers. (A loop that runs on threads recomputes such values, however costly.)"""
    for node in walk_nodes(value):
        if isinstance(node, ast.Call):
            callee = ir.callee(node.func)
            module = getattr(callee, "__module__", None) or ""
            if isinstance(callee, np.ufunc) or module == "math" or module.startswith("s2sad."):
                continue
            if callee is None and isinstance(node.func, ast.Attribute):
                if node.func.attr in ("copy", "astype", "reshape", "sum", "T", "transpose"):
                    continue
            if not module.startswith("numpy") or module.startswith("numpy.random"):
                return False
    return True


def _again(stmt: ast.stmt) -> ast.stmt:
    """A copy of a statement run again in the adjoint, labelled with the same user line."""
    new = clone(stmt)
    ir.copy_origin(new, stmt)
    return new


def _copy(read: ast.expr) -> ast.expr:
    return ast.Call(ast.Attribute(read, "copy", ast.Load()), [], [])


def _changed_by(loop) -> dict[str, int]:
    """Names a loop assigns or writes into (its index included), with how many statements do;
    a name written into counts as changed twice, so it is never taken as invariant."""
    counts: dict[str, int] = {}
    for node in walk_nodes(loop):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            counts[node.id] = counts.get(node.id, 0) + 1
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
        ):
            counts[node.value.id] = counts.get(node.value.id, 0) + 2
    return counts


def _definitions(block: list[ast.stmt]) -> dict[str, list[ast.Assign]]:
    """The statements of `block` assigning each name, in order."""
    defs: dict[str, list[ast.Assign]] = {}
    for s in block:
        if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name):
            defs.setdefault(s.targets[0].id, []).append(s)
    return defs


def _invariant(defs: list[ast.Assign], name: str, varying: dict) -> bool:
    """Whether `name` gets the same value in every iteration of every enclosing loop: assigned by
    one statement (`defs`: the statements of its block assigning it), from names no enclosing
    loop changes. Then its last value serves every reversed iteration, and no tape is needed."""
    if len(defs) != 1 or not varying or varying.get(name, 0) != 1:
        return False  # reassigned elsewhere in the loops (a counter, say): it changes
    reads = names_mentioned([defs[0].value])
    return not any(r in varying for r in reads) and not any(
        isinstance(n, ast.Call) and not ir.callee(n.func) for n in walk_nodes(defs[0].value)
    )


_ALLOCATING = {
    np.dot,
    np.matmul,
    np.outer,
    np.concatenate,
    np.stack,
    np.sum,
    np.mean,
    np.prod,
    runtime.snapshot,
}


def _allocated_values(stmts) -> set[str]:
    """Names every assignment of which makes a new array that nothing writes into: arithmetic,
    ufuncs, products, joins, reductions and snapshots, or names another such name (`h = h_new`,
    a loop's end copy). Their tape pushes need no copy."""
    defs: dict[str, list] = {}
    written = set()
    for node in walk_nodes(ast.Module(stmts, [])):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            defs.setdefault(node.targets[0].id, []).append(node.value)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            written.add(stored_base(node))

    def allocates(value) -> bool:
        if isinstance(value, (ast.BinOp, ast.UnaryOp)):
            return True
        if isinstance(value, ast.Name):
            return value.id in found
        if isinstance(value, ast.Call) and not value.keywords:
            callee = ir.callee(value.func)
            return isinstance(callee, np.ufunc) or callee in _ALLOCATING
        return False

    found: set[str] = set()
    while True:  # names of names: until no name joins
        more = {n for n, vs in defs.items() if n not in written and all(map(allocates, vs))}
        if more <= found:
            return found
        found |= more


def record(
    primal: list[ast.stmt],
    adjoint: list,
    taken: set[str],
    scalar=lambda name: False,
    owned=(),
    saved=None,
    recompute: bool = False,
    is_int=None,
    threaded=frozenset(),
    returned=(),
):
    """Insert pushes into `primal`, fill the markers of `adjoint`; returns both and the tape
    initializations. `owned` names parameters the emitted code copies before writing into them
    (emit's `_own_copies`): like fresh arrays, they need restoring only for the adjoint's sake.
    `saved(read)` is the expression saving what a subscript write overwrites (by default
    `read.copy()`). `is_int(expr)` tells integer index expressions (from rank inference).
    `threaded`: the ids of loops that will run on threads, whose values are recomputed.
    `returned`: the names the returned cotangents read after the sweep."""
    tape = Tape(primal, adjoint, taken, owned, is_int, returned)
    tape.scalar = scalar
    tape.saved = saved or _copy
    tape.separate_saves = saved is not None  # compiled code
    tape.recompute = recompute
    tape.threaded = set(threaded)
    primal = tape.primal(primal, False, [])
    adjoint = tape.adjoint(adjoint)
    if tape.uncopied:
        _Uncopied(tape.uncopied).visit(ast.Module(adjoint, []))
    return primal, adjoint, tape.inits()


class _Uncopied(ast.NodeTransformer):
    """`dy[i].copy()` (or `snapshot(dy[i])`) as `dy[i]` where no zeroing of dy[i] follows: a
    store's cotangent, copied only to keep it from that zeroing (reverse.py's setitem)."""

    def __init__(self, ids: set[int]):
        self.ids = ids

    def visit_Call(self, node: ast.Call) -> ast.expr:
        self.generic_visit(node)
        if id(node) not in self.ids:
            return node
        return node.args[0] if node.args else node.func.value


def copy_blocks(stmts):
    """A copy of the block structure (compound statements and their lists); simple statements
    are shared."""
    out = []
    for stmt in stmts:
        if isinstance(stmt, (ast.If, ast.For, ast.While)):
            stmt = copy.copy(stmt)
            stmt.body, stmt.orelse = copy_blocks(stmt.body), copy_blocks(stmt.orelse)
        out.append(stmt)
    return out
