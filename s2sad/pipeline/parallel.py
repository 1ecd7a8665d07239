"""Threads (`parallel=True`, jitted code only): the loops independence.py finds independent,
written as Numba `prange` loops whose sums are race-free.

A scalar sum (`s = s + a`, through temporaries or not) becomes `s += c`, c the iteration's
contribution, which Numba reduces per thread. An adjoint's array sum, and additions into a shared
array at indices other iterations also add into (`add_at(dw, k, g)`, `dx[j] += g`), go to this
thread's row of `dw_threads` (`get_thread_id()`), and the rows are added to `dw` after the
loop. So the numbers are the serial loop's up to the order of the additions. A loop invariant
read after the loop moves before it. An adjoint loop becomes a `prange` (over the ascending range) only where
its primal loop did, and where its own accesses are race-free. Loops inside a `prange` stay
serial. Consumes and produces the final statement lists (after lowering).
"""

from __future__ import annotations

import ast
import textwrap

from .. import ir
from ..astcopy import clone, walk_nodes
from .independence import (
    Plan,
    callee_name,
    nested_loops,
    outside_of,
    owned_arrays,
    plan,
    statements,
    walk_loops,
)
from .normalize import NameAllocator
from .raising import array_valued, first_alone
from .nodes import load_name


class Threads:
    """Writes the loops that may run on threads as `prange` loops (the primal's first, then the
    adjoint loops of those, matched by user line and index)."""

    def __init__(self, taken: set[str], rank_of, unchecked: bool = False):
        self.names = NameAllocator(set(taken))
        self.rank_of = rank_of
        # an index s2sad could not check itself, left to Numba's `boundscheck`, which checks
        # nothing inside a prange loop: then no loop runs on threads
        self.unchecked = unchecked
        self.primal_keys: set = set()  # (user line, index) of the primal's prange loops
        self.serial: list[str] = []  # why each primal loop stays serial ("line n: reason")

    def primal(self, stmts: list, params=(), tail=()) -> list:
        """`stmts` with their independent loops as prange loops (`tail`: code that runs after
        them, such as the adjoint sweep, which must not read a loop's private values)."""
        if self.unchecked:
            self.serial.append(UNCHECKED)
            return stmts
        owned = owned_arrays(stmts, params)
        tail = [s for s in tail if isinstance(s, ast.AST)]
        counts = _loop_keys(stmts)
        nested = nested_loops(stmts)
        for loop, after in list(walk_loops(stmts)):
            if _in_prange(stmts, loop) or id(loop) in nested:
                continue
            result = plan(loop, after + tail, outside_of(stmts, loop), self._rank, owned)
            key = _key(loop)
            if isinstance(result, Plan):
                first = clone(loop.body) if array_valued(loop.body, self._rank) else None
                self.rewrite(result, stmts, first)
                if counts.get(key) == 1:
                    self.primal_keys.add(key)
            else:
                self.serial.append(f"{_line(loop)}{result}")
        return stmts

    def noted(self, source: str) -> str:
        """`source` with, where no loop in it runs on threads, a last comment saying so and why
        (the first loop's reason): `s2sad.source` shows it, and the first call warns with it
        (jit.py, `serial_warning`)."""
        if not self.serial or "prange(" in source:
            return source
        said = f"{SERIAL} {self.serial[0]}"
        return source + "\n" + textwrap.fill(said, 99, initial_indent="# ", subsequent_indent="# ")

    def adjoint(self, stmts: list) -> list:
        """The adjoint loops of the primal's prange loops, as prange loops where race-free."""
        counts = _loop_keys(stmts)
        for loop, after in list(walk_loops(stmts)):
            key = _key(loop)
            if key not in self.primal_keys or counts.get(key) != 1 or _in_prange(stmts, loop):
                continue
            bounds = _forward_bounds(loop)
            if bounds is None:
                continue
            backward, loop.iter = loop.iter, ast.Call(load_name("range"), bounds, [])
            result = plan(loop, after, outside_of(stmts, loop), self._rank, None)
            if isinstance(result, Plan):
                self.rewrite(result, stmts)
            else:  # stays serial, backwards as it was
                loop.iter = backward
        return stmts

    def _rank(self, name: str):
        return self.rank_of(load_name(name) if isinstance(name, str) else name)

    def rewrite(self, plan_: Plan, stmts: list, first: list | None = None) -> None:
        """`plan_.loop` as a prange loop: sums as `s += c`, shared arrays by rows per thread.
        `first`: the loop's serial body, where its first iteration runs alone before the
        threads start, so that an error of its shapes is raised, not lost (raising.py)."""
        loop = plan_.loop
        loop.iter = ast.Call(load_name("prange"), loop.iter.args, [])
        before, after = [], []
        if first is not None:
            before.append(first_alone(loop, first, list(loop.iter.args)))
        for stmt in plan_.hoist:  # a loop invariant read after the loop: computed before it
            loop.body.remove(stmt)
            before.append(stmt)
        for name, chain in plan_.sums.items():
            if self._rank(name) == 0:
                _as_reduction(loop.body, name, chain, None)
                continue
            rows = self.names.fresh(f"{name}_threads")
            before.append(_rows_for(rows, name))
            _as_reduction(loop.body, name, chain, rows)
            after.append(_assign(name, f"{name} + np.sum({rows}, axis=0)"))
        if plan_.shared:
            thread = self.names.fresh("thread")
            for name in sorted(plan_.shared):
                rows = self.names.fresh(f"{name}_threads")
                before.append(_rows_for(rows, name))
                _add_into_rows(loop.body, name, rows, thread)
                after.append(_assign(name, f"{name} + np.sum({rows}, axis=0)"))
            loop.body.insert(0, _assign(thread, "get_thread_id()"))
        for s in (
            before[len(plan_.hoist) + (first is not None) :]
            + after
            + ([loop.body[0]] if plan_.shared else [])
        ):
            ir.copy_origin(s, loop)
        block = _holding(stmts, loop)
        k = next(j for j, s in enumerate(block) if s is loop)
        block[k : k + 1] = before + [loop] + after


# the note `noted` ends a source with where no loop runs on threads
SERIAL = "parallel=True, but no loop runs on threads:"
UNCHECKED = (
    "it indexes where s2sad cannot place its own checks, and Numba checks no index on threads"
)


def serial_note(compiled) -> str | None:
    """The note ending a parallel build's source where no loop of it runs on threads (`noted`),
    with its line break; None where a loop runs on threads. The driver then builds the serial
    code instead (fused, its indices checked where not proven), and ends it with this note."""
    code = compiled.code
    at = code.rfind("\n# " + SERIAL)
    return None if at < 0 or "prange(" in code else code[at:]


def _line(loop) -> str:
    """ "line n: " of the user's line a loop came from, where known."""
    src, parsed = ir.src(loop), ir.src_parsed(loop)
    if src is None or parsed is None or not hasattr(src, "lineno"):
        return ""
    return f"line {src.lineno + parsed.line_offset}: "


def _key(loop):
    return (id(ir.src(loop)), getattr(loop.target, "id", None))


def _loop_keys(stmts) -> dict:
    counts: dict = {}
    for node in walk_nodes(ast.Module([s for s in stmts if isinstance(s, ast.AST)], [])):
        if isinstance(node, ast.For):
            counts[_key(node)] = counts.get(_key(node), 0) + 1
    return counts


def _in_prange(stmts, loop) -> bool:
    for node in walk_nodes(ast.Module([s for s in stmts if isinstance(s, ast.AST)], [])):
        if isinstance(node, ast.For) and node is not loop and _is_prange(node):
            if any(n is loop for n in walk_nodes(ast.Module(node.body, []))):
                return True
    return False


def _is_prange(loop) -> bool:
    it = loop.iter
    return isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "prange"


def _forward_bounds(loop) -> list | None:
    """The bounds of an adjoint loop's range as an ascending range: `range(n - 1, -1, -1)` is
    range(n)'s, `range(b - 1, a - 1, -1)` range(a, b)'s."""
    it = loop.iter
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"):
        return None
    if len(it.args) <= 2 and not it.keywords:
        return list(it.args)  # a backward primal loop: its adjoint runs forward
    if len(it.args) != 3 or ast.unparse(it.args[2]) != "-1":
        return None
    start, stop = it.args[0], it.args[1]
    if (
        isinstance(start, ast.BinOp)
        and isinstance(start.op, ast.Sub)
        and ast.unparse(start.right) == "1"
    ):
        upper = start.left
    else:
        upper = ast.BinOp(start, ast.Add(), ast.Constant(1))
    if ast.unparse(stop) == "-1":
        return [upper]
    return [ast.BinOp(stop, ast.Add(), ast.Constant(1)), upper]


def _holding(stmts: list, loop) -> list:
    for stmt, block in statements(stmts):
        if stmt is loop:
            return block
    raise ValueError("internal error: the loop is not in the statements")


def _assign(name: str, text: str) -> ast.stmt:
    return ast.Assign([ast.Name(name, ast.Store())], ast.parse(text, mode="eval").body)


def _rows_for(rows: str, name: str) -> ast.stmt:
    """One row per thread, zeros shaped and typed like `name`."""
    return _assign(rows, f"np.zeros((thread_count(),) + {name}.shape, dtype={name}.dtype)")


def _as_reduction(body: list, name: str, chain: list, rows: str | None) -> None:
    """The chain summing into `name` as one iteration's contribution, added by `name += c`
    (a scalar: Numba's reduction) or into this thread's row of `rows`."""
    first, last = chain[0], chain[-1]
    if isinstance(first, ast.AugAssign):
        contribution = first.value
        if isinstance(first.op, ast.Sub):
            contribution = ast.UnaryOp(ast.USub(), contribution)
        _replace(body, first, _sum_into(name, contribution, rows))
        return
    value = first.value
    left = isinstance(value.left, ast.Name) and value.left.id == name
    other = value.right if left else value.left
    if isinstance(value.op, ast.Sub):
        other = ast.UnaryOp(ast.USub(), other)
    if first is last:  # `s = s + e`
        _replace(body, first, _sum_into(name, other, rows))
        return
    # `t = s + a` becomes `t = a`, and `s = t` becomes `s += t` (new statements: the primal's
    # simple statements may be shared with another copy of it, a vjp's value function)
    _replace(body, first, ast.Assign([clone(t) for t in first.targets], other))
    _replace(body, last, _sum_into(name, last.value, rows))


def _sum_into(name: str, contribution: ast.expr, rows: str | None) -> ast.stmt:
    if rows is None:
        return ast.AugAssign(ast.Name(name, ast.Store()), ast.Add(), contribution)
    thread = ast.Call(load_name("get_thread_id"), [], [])
    return ast.Expr(ast.Call(load_name("add_at"), [load_name(rows), thread, contribution], []))


def _replace(body: list, old: ast.stmt, new: ast.stmt) -> None:
    block = _holding(body, old)
    k = next(j for j, s in enumerate(block) if s is old)
    block[k] = ir.copy_origin(new, old)


def _add_into_rows(body: list, name: str, rows: str, thread: str) -> None:
    """Every addition into `name` in `body` (`add_at(name, ...)`, `name[j] += g`) goes to
    `rows[thread]` instead."""
    row = ast.Subscript(load_name(rows), load_name(thread), ast.Load())
    for stmt, _ in list(statements(body)):
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if isinstance(call, ast.Call) and callee_name(call) == "add_at" and call.args:
            if isinstance(call.args[0], ast.Name) and call.args[0].id == name:
                new = clone(stmt)
                new.value.args[0] = clone(row)
                _replace(body, stmt, new)
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Subscript):
            new = clone(stmt)
            sub = new.target
            while isinstance(sub.value, ast.Subscript):
                sub = sub.value
            if not (isinstance(sub.value, ast.Name) and sub.value.id == name):
                continue
            index = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
            if sub is new.target and not any(isinstance(e, ast.Slice) for e in index):
                # `dx[j] += g` as `dx_threads[thread, j] += g`: one element, no view made
                sub.value = load_name(rows)
                sub.slice = ast.Tuple([load_name(thread)] + index, ast.Load())
            else:
                sub.value = clone(row)
            _replace(body, stmt, new)


__all__ = ["SERIAL", "Threads", "serial_note"]
