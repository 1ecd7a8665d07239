"""Stage 4: the reverse transform. Walks the normalized statements backwards and emits, for each
active one, one statement that adds its rule's contributions into the operands' adjoints.
Adjoint names are the primal names with a `d` in front (`h` -> `dh`).

Control flow reverses structurally: an `if` becomes the same `if` over the adjoints of its
branches, and a loop becomes a loop running backwards (`for i in reversed(range(...))`; a `while`
loop runs `for _ in range(iters)`): reverse_control.py. What the adjoint needs from overwritten
primal values is put back by the tape pass (`tape.py`), which fills in the markers this pass
leaves.

Inside loops an adjoint may be known to be zero without holding zero (a "lazy" zero, after the
value it belongs to was overwritten); such a name is assigned, not accumulated, on its next
contribution, and set to zero explicitly where a later iteration would read it. A zero held in
a variable has its value's shape (`0.0` only for a known scalar), so no rule receives a scalar
zero for an array; and a reversed loop only handles the adjoints that a live value reaches.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from .. import ir
from ..astcopy import clone, walk_nodes
from .fresh_writes import unread_writes
from .list_cotangents import LIST_ZEROS
from .lower import jit_copy
from .normalize import NameAllocator
from .names import assign_counts
from .nodes import (
    assign_to,
    batched_slice,
    call_of,
    index_expr,
    is_basic_index,
    load_name,
    subscript_index,
    weighed_by_dtype,
)
from .reverse_control import BranchesAndLoops, Context, branch_tests
from .markers import Marker
from ..rules.batching import batch_adjoint, rename_helpers
from ..rules.helpers import RUNTIME

# the cotangent of an item of a list of arrays, by the name a read's cotangent has otherwise
_ITEM_OF_LIST = {"getitem_vjp": "item_vjp", "batched_getitem_vjp": "batched_item_vjp"}


@dataclass
class Adjoint:
    stmts: list[ast.stmt]  # the adjoint sweep, with tape markers
    seeds: list[str]  # adjoint names of the outputs, in output order
    grads: list[ast.expr]  # the returned cotangent of each wrt input
    batch: str | None = None  # batched mode: the name holding the number of rows
    primal_of: dict = field(default_factory=dict)  # adjoint name -> its primal's name


class _ScalarUnbroadcasts(ast.NodeTransformer):
    """Reverser.scalars' rewrite of `unbroadcast` calls (one class, not one per call)."""

    def __init__(self, rank, result_rank, total: str, same: str | None):
        self.rank, self.result_rank, self.total, self.same = rank, result_rank, total, same

    def visit_Call(self, node: ast.Call) -> ast.expr:
        self.generic_visit(node)
        if (
            isinstance(node.func, ast.Name)
            and node.func.id == "unbroadcast"
            and len(node.args) == 2
        ):
            if self.rank(node.args[1]) == 0:
                return node.args[0] if self.result_rank == 0 else call_of(self.total, node.args[0])
            if self.same is not None and ast.dump(node.args[1]) == self.same:
                return node.args[0]
        return node


class Reverser(BranchesAndLoops):
    """The adjoint sweep of straight-line statements: each active statement's rule
    contributions, accumulated into its operands' adjoints (branches and loops: the base)."""

    def __init__(self, active: set[str], taken: set[str], ranks=None, batched: bool = False):
        self.active = active
        self.ranks = ranks
        self.jit = False  # Numba-compilable loop headers
        self.names = NameAllocator(taken)
        self.taken = set(taken)
        # batched: every adjoint has a leading axis of `self.batch` rows (rules/batching.py)
        self.batched = batched
        self.batch = self.names.fresh("batch") if batched else None
        self.adjoint: dict[str, str] = {}
        self.primal_of: dict[str, str] = {}  # adjoint name -> primal name (never rolled back)
        self.defined: set[str] = set()  # adjoint names holding a value
        self.zero: set[str] = set()  # ... of which known (lazily) zero
        self.owned: set[str] = set()  # ... of which own their buffer (safe to update in place)
        self.unread: set[int] = set()  # ids of writes no later adjoint reads (fresh_writes.py)
        # tuple results carried part by part (`tuple_results`): name -> each part's adjoint
        self.parted: dict[str, list[str | None]] = {}

    # ------------------------------------------------------------------ names and state
    def dname(self, primal: str) -> str:
        if primal not in self.adjoint:
            base = f"d{primal}" if f"d{primal}" not in self.taken else f"d_{primal}"
            self.adjoint[primal] = self.names.fresh(base)
            self.primal_of[self.adjoint[primal]] = primal
        return self.adjoint[primal]

    def unused(self) -> str:
        """The name of a value nothing reads (`_`, unless the user's code has a `_`)."""
        if not hasattr(self, "_unused"):
            self._unused = self.names.fresh("_")
        return self._unused

    def live(self, d: str) -> bool:
        return d in self.defined and d not in self.zero

    def state(self):
        return (
            set(self.defined),
            set(self.zero),
            set(self.owned),
            dict(self.adjoint),
            self.names.state(),
        )

    def restore(self, state) -> None:
        defined, zero, owned, adjoint, taken = state
        self.defined, self.zero, self.owned = set(defined), set(zero), set(owned)
        self.adjoint = dict(adjoint)
        self.names.restore(taken)

    # ------------------------------------------------------------------ contributions
    def accumulate(self, out: list, src, primal: str, expr: ast.expr, straight=False) -> None:
        """Add the contribution `expr` into the adjoint of `primal`. `straight`: the statement
        is outside loops, where an adjoint known to own its array may be updated in place."""
        d = self.dname(primal)
        name = getattr(expr.func, "id", "") if isinstance(expr, ast.Call) else ""
        if name in _ITEM_OF_LIST and len(expr.args) == 3 and self.is_list(expr.args[1]):
            # an item of np.split's list: its cotangent is flat (rules/splitting.py)
            expr.func = ast.Name(_ITEM_OF_LIST[name], ast.Load())
            name = ""
        if (
            self.jit
            and not self.batched
            and name == "getitem_vjp"
            and len(expr.args) == 3
            and (d in self.owned or self.rank(ast.Subscript(expr.args[1], expr.args[2])) == 0)
        ):
            # dx = dx + getitem_vjp(g, x, index) adds into dx in place (no array of zeros for
            # each read): `dx[i] += g` where x[i] is one element, else add_at (repeated indices
            # add up)
            g, x, index = expr.args
            d = self.make_owned(out, src, primal)
            if self.rank(ast.Subscript(x, index, ast.Load())) == 0:
                target = ast.Subscript(load_name(d), clone(index), ast.Store())
                out.append(self.at(ast.AugAssign(target, ast.Add(), g), src))
            else:
                out.append(self.at(ast.Expr(call_of("add_at", load_name(d), index, g)), src))
            return
        inplace = straight and d in self.owned and self.numpy_array(primal)
        if inplace and name == "getitem_vjp" and self.sliced(expr):
            # NumPy mode, dx already a fresh array: `dx[1:, :-1] += g` (no array of zeros and
            # no second full-size sum for each slice read)
            g, x, index = expr.args
            target = ast.Subscript(load_name(d), subscript_index(index), ast.Store())
            out.append(self.at(ast.AugAssign(target, ast.Add(), g), src))
            return
        negated = isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub)
        op, term = (ast.Sub(), expr.operand) if negated else (ast.Add(), expr)  # dx - g, not + -g
        if inplace and self.live(d):
            # dx holds an array of its own (a sum made here, or the zeros of a slice's
            # cotangent) with the contribution's shape: `dx += g` makes no new array
            out.append(self.at(ast.AugAssign(ast.Name(d, ast.Store()), op, term), src))
            return
        if self.live(d):
            value = ast.BinOp(load_name(d), op, term)
            self.owned.add(d)
        else:
            value = expr
            fresh = name == "getitem_vjp" or isinstance(expr, (ast.BinOp, ast.UnaryOp))
            if fresh and not self.batched and self.array(primal):
                # an array made by this statement, nowhere else referenced (NumPy's or Numba's;
                # getitem_vjp's zeros): later reads of slices add into it
                self.owned.add(d)
            else:
                self.owned.discard(d)
        self.defined.add(d)
        self.zero.discard(d)
        out.append(self.at(assign_to(d, value), src))

    def array(self, primal: str) -> bool:
        """`primal` known to be an array (rank >= 1), not a list or a tuple's parts."""
        if primal in self.parted or self.is_list(primal):
            return False
        rank = self.rank(load_name(primal))
        return rank is not None and rank >= 1

    def numpy_array(self, primal: str) -> bool:
        """NumPy mode (not jitted, not batched) and `primal` known to be an array (rank >= 1):
        its adjoint, where made by an arithmetic operation, is an array no one else holds."""
        return not self.jit and not self.batched and self.array(primal)

    def sliced(self, expr: ast.Call) -> bool:
        """`getitem_vjp(g, x, index)` in NumPy mode with `x` an array and `index` plain slices
        and integers with a slice among them (a view of `x`, no element named twice), known
        from the code: its addition into a fresh adjoint can be an in-place `+=`."""
        if self.jit or self.batched or len(expr.args) != 3 or expr.keywords:
            return False
        rank = self.rank(expr.args[1])
        if rank is None or rank < 1:
            return False
        index = subscript_index(expr.args[2])
        items = index.elts if isinstance(index, ast.Tuple) else [index]
        return any(isinstance(e, ast.Slice) for e in items) and all(
            isinstance(e, ast.Slice)
            or (isinstance(e, ast.Constant) and (e.value is None or type(e.value) is int))
            for e in items
        )

    def zeros(self, primal: str) -> ast.expr:
        """A zero adjoint for `primal` (with the batch rows in batched mode)."""
        if self.is_list(primal):  # np.split's pieces: refused (rules/splitting.py)
            return call_of(LIST_ZEROS, load_name(primal))
        if self.batched:
            return call_of("batched_zeros", load_name(self.batch), load_name(primal))
        return call_of("zeros_like", load_name(primal))

    def subscript(self, d: str, index: ast.expr, ctx, indices: set[str]) -> ast.Subscript:
        """`d[index]`; in batched mode the same elements of every row."""
        index = clone(index)
        if not self.batched:
            return ast.Subscript(load_name(d), index, ctx)
        return ast.Subscript(load_name(d), batched_slice(d, index, indices), ctx)

    def make_owned(self, out: list, src, primal: str) -> str:
        """Before an in-place update: the adjoint of `primal` as an array it owns."""
        d = self.dname(primal)
        accumulator = "batched_accumulator" if self.batched else "as_accumulator"
        if not self.live(d):
            out.append(self.at(assign_to(d, self.zeros(primal)), src))
        elif d not in self.owned:
            out.append(
                self.at(assign_to(d, call_of(accumulator, load_name(d), load_name(primal))), src)
            )
        self.defined.add(d)
        self.zero.discard(d)
        self.owned.add(d)
        return d

    def rank(self, node: ast.expr):
        return None if self.ranks is None else self.ranks.of(node)

    def is_list(self, node: ast.expr | str) -> bool:
        """Whether `node` names a list of arrays (np.split's pieces)."""
        name = node.id if isinstance(node, ast.Name) else node
        return isinstance(name, str) and name in getattr(self.ranks, "lists", ())

    def scalars(
        self, expr: ast.expr, result_rank, batched: bool = False, shaped_like=None
    ) -> ast.expr:
        """`unbroadcast(g, x)` for a scalar `x` needs no shape: `g` itself when the result is a
        scalar too, else `np.sum(g)` (`batched_sum(g)`: each row's sum). The adjoint then does not
        read `x`, nor the tape keep it. `shaped_like` is an operand known to have the result's
        shape (the other operands of its elementwise operation are scalars): unbroadcasting to it
        is the identity."""
        total = "batched_sum" if batched else "np.sum"
        same = None if shaped_like is None else ast.dump(shaped_like)
        return _ScalarUnbroadcasts(self.rank, result_rank, total, same).visit(expr)

    @staticmethod
    def at(stmt: ast.stmt, src) -> ast.stmt:
        return ir.take_origin(stmt, src)

    # ------------------------------------------------------------------ statements
    def block(self, stmts: list[ast.stmt], ctx: Context) -> list:
        out: list = []
        for stmt in reversed(stmts):
            if isinstance(stmt, ast.If):
                out += self.if_(stmt, ctx)
            elif isinstance(stmt, (ast.For, ast.While)):
                out += self.loop(stmt, ctx)
            elif isinstance(stmt, ast.Assign):
                out += self.simple(stmt, ctx)
        return out

    def simple(self, stmt: ast.Assign, ctx: Context) -> list:
        op = ir.op(stmt)
        out: list = []
        if op.kind == "setitem":
            self.setitem(stmt, op, ctx, out)
            return out
        if op.target in self.active and op.kind == "rule" and not self.part_read(op):
            g = self.cotangent(op.target)
            if g is not None:
                self.contributions(stmt, op, g, ctx, out)
        if op.target in ctx.carried and op.target in self.adjoint:
            g = self.adjoint[op.target]  # the value before this assignment is another value:
            self.zero.add(g)  # its adjoint starts from zero
            self.owned.discard(g)
        if ir.is_end_copy(stmt):
            out.append(Marker("header", stmt, stmt))
        return out

    def part_read(self, op) -> bool:
        """`x = t[k]` of a tuple result carried part by part: part k's adjoint is x's own (the
        reads follow t's assignment at once, so nothing changes dx before t's rule reads it)."""
        if op.bound.rule.name != "getitem" or not op.operands:
            return False
        parts = self.parted.get(op.operands[0][2])
        if parts is None:
            return False
        d = self.adjoint.get(op.target)
        parts[op.bound.args["index"].value] = d if d is not None and self.live(d) else None
        return True

    def cotangent(self, primal: str) -> str | ast.Tuple | None:
        """The cotangent of `primal`: its adjoint's name, or for a tuple result carried part by
        part a tuple of its parts' adjoints (None for a part none reached); None where none
        reached it at all."""
        if primal not in self.parted:
            d = self.dname(primal)
            return d if self.live(d) else None
        parts = self.parted[primal]
        if all(d is None for d in parts):
            return None
        elts = [ast.Constant(None) if d is None else load_name(d) for d in parts]
        return ast.Tuple(elts, ast.Load())

    def contributions(self, stmt, op, g: str | ast.expr, ctx: Context, out: list) -> None:
        rule, bound = op.bound.rule, op.bound
        live = [(p, i, o) for p, i, o in op.operands if o in self.active]
        if rule.joint is not None and len({o for _, _, o in live}) > 1:
            self.joint(stmt, op, g, live, out)
            return
        if rule.name == "getitem" and ctx.loop is not None and live and live[0][2] not in ctx.local:
            self.scatter(stmt, op, g, live[0][2], ctx, out)
            return
        grouped: dict[str, list[ast.expr]] = {}
        for param, index, operand in live:
            expr = self.rule_adjoint(rule, bound, param, g, op.target, index)
            grouped.setdefault(operand, []).append(expr)
        for operand, exprs in grouped.items():
            total = exprs[0]
            if len(exprs) > 1 and len({ast.dump(e) for e in exprs}) == 1:
                # x * x: the same contribution twice, computed once and doubled (exactly)
                total = ast.BinOp(ast.Constant(len(exprs)), ast.Mult(), total)
                exprs = []
            for e in exprs[1:]:
                total = ast.BinOp(total, ast.Add(), e)
            self.accumulate(out, stmt, operand, total, straight=ctx.loop is None)

    def shaped_like_result(self, rule, bound, param, target: str):
        """The argument `param` of an elementwise call whose other arguments are all scalars
        (its shape is the result's), or `x` of `x_add = x + v` stored by `in_place(x_add, x)`;
        else None."""
        if not rule.elementwise or not isinstance(bound.args.get(param), ast.expr):
            return None
        if (target, getattr(bound.args[param], "id", None)) in self.kept:
            # (`x += dt * v`: unbroadcasting to x reads no tape of x) where the check proves
            # it: x an array (a number x, `s += dt * v`, becomes the array, as in Python)
            old, new = self.rank(bound.args[param]), self.rank(load_name(target))
            if old is not None and (old > 0 or new == 0):
                return bound.args[param]
        others = [  # every other argument broadcasts with it (np.where's condition too)
            v
            for q, v in bound.args.items()
            if q != param and not (isinstance(v, ast.Constant) and v.value is None)
        ]
        own = ast.dump(bound.args[param])  # x * x: x itself is no other shape
        if others and all(self.rank(o) == 0 or ast.dump(o) == own for o in others):
            return bound.args[param]
        return None

    def rule_adjoint(self, rule, bound, param, g: str, target: str, index) -> ast.expr:
        """The contribution of one rule to `param`. In batched mode the template for a batched
        cotangent, or, where there is none (a user's rule), the plain one applied row by row."""
        rank = self.rank(load_name(target))
        same = self.shaped_like_result(rule, bound, param, target)
        if not self.batched:
            return self.scalars(rule.adjoint(bound, param, g, target, index), rank, False, same)
        expr = self.scalars(rule.adjoint(bound, param, g, target, index, True), rank, True, same)
        expr = batch_adjoint(expr, g)
        if expr is not None:
            return expr
        row = self.names.fresh(f"{g}_row")
        plain = self.scalars(rule.adjoint(bound, param, row, target, index), rank)
        return _by_rows(plain, g, row)

    def joint(self, stmt, op, g: str, live, out: list) -> None:
        """A user rule giving every cotangent at once: called once, its results unpacked."""
        targets, later = [], []
        for param in op.bound.rule.templates:
            operand = next((o for p, _, o in live if p == param), None)
            if operand is None:
                targets.append(self.unused())
            elif self.live(self.dname(operand)) or operand in [o for o, _ in later]:
                part = self.names.fresh(f"{self.dname(operand)}_part")
                targets.append(part)
                later.append((operand, part))
            else:
                d = self.dname(operand)
                targets.append(d)
                self.defined.add(d)
                self.zero.discard(d)
                self.owned.discard(d)
        if self.batched:  # a user's rule sees one cotangent: called once per row
            row = self.names.fresh(f"{g}_row")
            call = _by_rows(op.bound.rule.joint_adjoint(op.bound, row, op.target), g, row)
        else:
            call = op.bound.rule.joint_adjoint(op.bound, g, op.target)
        lhs = ast.Tuple([ast.Name(t, ast.Store()) for t in targets], ast.Store())
        out.append(self.at(ast.Assign([lhs], call), stmt))
        for operand, part in later:
            self.accumulate(out, stmt, operand, load_name(part))

    def int_names(self) -> set[str]:
        """Names known to hold integers (from the ranks of the arguments)."""
        return {n for n, v in self.ranks.ints.items() if v} if self.ranks is not None else set()

    def scatter(self, stmt, op, g: str, base: str, ctx: Context, out: list) -> None:
        """x[index] read inside a loop: add the cotangent into dx in place."""
        read = stmt.value.args[0] if isinstance(stmt.value, ast.Call) else stmt.value  # snapshot
        index = read.slice
        d = self.make_owned(out, stmt, base)
        ints = self.int_names()
        if is_basic_index(index, ctx.indices | ints):
            target = self.subscript(d, index, ast.Store(), ctx.indices | ints)
            out.append(self.at(ast.AugAssign(target, ast.Add(), load_name(g)), stmt))
        else:
            index_expr = op.bound.args["index"]
            add_at = "batched_add_at" if self.batched else "np.add.at"
            call = call_of(add_at, load_name(d), clone(index_expr), load_name(g))
            out.append(self.at(ast.Expr(call), stmt))

    def setitem(self, stmt: ast.Assign, op, ctx: Context, out: list) -> None:
        """y[index] = v: v gets dy[index]; the overwritten elements of y get no cotangent."""
        base = op.target
        if base in self.active:
            d = self.dname(base)
            unread = id(stmt) in self.unread and d not in self.owned and not self.batched
            if self.live(d):
                deferred: list[ast.expr] = []
                copies: list[ast.expr] = []  # (dropped with the zeroing where that goes)
                index = stmt.targets[0].slice
                for _, _, operand in op.operands:
                    if operand in self.active:
                        part = self.subscript(d, index, ast.Load(), ctx.indices)
                        rank = self.rank(ast.Subscript(load_name(base), index, ast.Load()))
                        if not (unread or op.weighed):  # (`dy[i] * inexact(y)`: a new array)
                            copies.append(_copied(part, rank, self.jit, self.batched))
                            part = copies[-1]
                        if not is_basic_index(index, ctx.indices | self.int_names()):
                            # an integer array may repeat an element: the last write wins
                            part = call_of(
                                "last_written", part, load_name(base), index_expr(clone(index))
                            )
                        part = weighed_by_dtype(part, base) if op.weighed else part
                        contribution = self.scalars(
                            call_of("unbroadcast", part, load_name(operand)), rank, self.batched
                        )
                        if self.batched:
                            contribution = rename_helpers(contribution)
                        if operand == base:  # y[index] = y: take dy[index] before zeroing it
                            held = self.names.fresh(f"{d}_written")
                            out.append(self.at(assign_to(held, contribution), stmt))
                            deferred.append(load_name(held))
                        else:
                            self.accumulate(out, stmt, operand, contribution)
                if not unread:  # (else dy[index] was read as it is: nothing writes into dy)
                    owning: list = []  # (`dy = as_accumulator(dy, y)`, for the zeroing alone)
                    d = self.make_owned(owning, stmt, base)
                    zero = self.subscript(d, index, ast.Store(), ctx.indices)
                    kill = self.at(ast.Assign([zero], ast.Constant(0.0)), stmt)
                    out.append(Marker("kill", kill, stmt, owning, copies))  # kept where dy is read
                for held in deferred:
                    self.accumulate(out, stmt, base, held)
        out.append(Marker("restore", stmt, stmt))


def _by_rows(expr: ast.expr, g: str, row: str) -> ast.expr:
    """`stack_rows([expr for row in g])`: `expr` for each row of the batched `g`."""
    loop = ast.comprehension(ast.Name(row, ast.Store()), load_name(g), [], 0)
    return call_of("stack_rows", ast.ListComp(expr, [loop]))


def _in_place_stores(stmts) -> set[tuple[str, str]]:
    """(x_add, x) of each `x_1 = in_place(x_add, x, "add")`, the store of `x_add = x op v` for
    `x op= v` (normalize/statements.py): it raises where x_add's shape is not x's (an array
    x), so past it, x_add has x's shape."""
    return {
        (call.args[0].id, call.args[1].id)
        for call in walk_nodes(ast.Module(list(stmts), []))
        if isinstance(call, ast.Call)
        and ir.callee(call.func) is RUNTIME["in_place"]
        and all(isinstance(a, ast.Name) for a in call.args[:2])
    }


def _copied(part: ast.expr, rank, jit: bool, batched: bool) -> ast.expr:
    """`dy[index]`, read for a store's value before dy[index] is zeroed: a copy where it may be a
    view of dy (Numba's element needs none; where the rank is unknown `snapshot` decides)."""
    if jit and not batched:
        return jit_copy(part, rank)
    if batched or rank != 0:
        return ast.Call(ast.Attribute(part, "copy", ast.Load()), [], [])
    return part


def reverse(
    stmts,
    active: set[str],
    wrt: list[str],
    outputs: list[str],
    taken: set[str],
    ranks=None,
    jit: bool = False,
    params: tuple = (),
    batched: bool = False,
) -> Adjoint:
    rev = Reverser(active, taken, ranks, batched)
    rev.jit = jit
    rev.assign_counts = assign_counts(stmts)
    rev.made_in, rev.enclosing = branch_tests(stmts, rev.assign_counts)
    rev.unread = unread_writes(stmts)
    rev.kept = _in_place_stores(stmts)
    rev.params = set(params) | set(wrt)
    if not batched:  # a batched cotangent keeps getitem_vjp's one value (rules/decompositions.py)
        rev.parted = {t: [None] * n for t, n in tuple_results(stmts, outputs).items()}
    seeds = [rev.dname(o) for o in outputs]
    rev.defined |= set(seeds)
    adjoint_stmts = rev.block(stmts, Context())
    grads = []
    for p in wrt:
        d = rev.adjoint.get(p)
        if d is not None and rev.live(d):
            grads.append(load_name(d))
        else:
            grads.append(rev.zeros(p))
    return Adjoint(adjoint_stmts, seeds, grads, rev.batch, dict(rev.primal_of))


def _blocks(stmts: list[ast.stmt]):
    """Each statement list: the function's body and those of its branches and loops."""
    yield stmts
    for stmt in stmts:
        for field_ in ("body", "orelse"):
            inner = getattr(stmt, field_, None)
            if isinstance(stmt, (ast.If, ast.For, ast.While)) and inner:
                yield from _blocks(inner)


def tuple_results(stmts: list[ast.stmt], outputs: list[str]) -> dict[str, int]:
    """Names holding a tuple result (np.linalg.eigh's pair: `Rule.parts`) assigned once and read
    only as `x = t[k]`, k a constant, in the statements right after: their cotangent is carried
    as one adjoint per part (`dw`, `dv`), a tuple of arrays Numba types, not as one value, and
    the rule's helper receives `(dw, dv)` (forward mode over it: pipeline/tangent.py's
    parts_term). Each name -> its number of parts."""
    counts = assign_counts(stmts)
    loads: dict[str, int] = {}
    for stmt in stmts:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                loads[node.id] = loads.get(node.id, 0) + 1
    found = {}
    for block in _blocks(stmts):
        for i, stmt in enumerate(block):
            op = ir.op(stmt) if isinstance(stmt, ast.Assign) else None
            parts = getattr(op.bound.rule, "parts", None) if op and op.kind == "rule" else None
            n = parts(op.bound.args) if parts is not None else 0
            if not n:
                continue
            t, reads, seen = op.target, 0, set()
            for later in block[i + 1 :]:
                read = ir.op(later) if isinstance(later, ast.Assign) else None
                if read is None or read.kind != "rule" or read.bound is None:
                    break
                index = read.bound.args.get("index")
                if (
                    read.bound.rule.name != "getitem"
                    or [o for _, _, o in read.operands] != [t]
                    or not isinstance(index, ast.Constant)
                    or type(index.value) is not int
                    or not 0 <= index.value < n
                    or index.value in seen
                    or counts.get(read.target) != 1
                ):
                    break
                reads += 1
                seen.add(index.value)
            if reads and reads == loads.get(t) and counts.get(t) == 1 and t not in outputs:
                found[t] = n
    return found
