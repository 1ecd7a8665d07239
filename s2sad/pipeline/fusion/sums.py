"""Full sums taken out of the arithmetic on numbers around them, so that a run can fold them in.

The adjoint of `x - a` for a number `a` accumulates `da = da - sum_over(dz, None, False)`: a
number computed from a sum, which no run takes (a run folds in a statement that is a sum, and
stops at one reading a sum). Written

    da_sum = sum_over(dz, None, False)    # an accumulator of the run computing dz
    da = da - da_sum                      # after that run

the sum is added up in the loop that computes `dz`, not in a pass over memory of its own (lse's
gradient: the loop making the cotangent of `x - a` sums it too). It consumes and produces
statement lists (the originals untouched); the statements taken apart compute what they did, in the same order.
"""

from __future__ import annotations

import ast
import copy

from ...astcopy import walk_nodes
from ..names import fresh_in
from ..nodes import assigned_name
from .syntax import assign, bodies_mapped, load, origin, whole_sum


def sums_apart(stmts: list, rank_of, taken: set[str], made: dict) -> list:
    """`stmts` with each full sum of an array nested in the value of a number assigned by name
    (`s = s - np.sum(g)`) computed first, into a name of its own (taken from `taken`, and
    entered in `made` with its rank, 0: the analysis that gives `rank_of` never saw it)."""
    out: list = []
    for stmt in stmts:
        if isinstance(stmt, (ast.For, ast.While, ast.If)):
            out.append(bodies_mapped(stmt, lambda body: sums_apart(body, rank_of, taken, made)))
            continue
        target = assigned_name(stmt)
        if target is None or rank_of(stmt.targets[0]) != 0 or whole_sum(stmt.value) is not None:
            out.append(stmt)
            continue
        taker = _Taker(rank_of, taken, target)
        value = taker.visit(stmt.value)
        for name, total in taker.found:
            made[name] = 0
            out.append(origin(ast.copy_location(assign(name, total), stmt), stmt))
        if taker.found:
            stmt = copy.copy(stmt)
            stmt.value = value
        out.append(stmt)
    return out


class _Taker(ast.NodeTransformer):
    """Replaces each full sum of an array (not inside another call: its arguments may not be
    evaluated, or be evaluated otherwise) by a fresh name, keeping (name, sum) in order."""

    def __init__(self, rank_of, taken: set[str], target: str):
        self.rank_of, self.taken, self.target = rank_of, taken, target
        self.found: list = []

    def visit_Call(self, node: ast.Call):
        summed = whole_sum(node)
        rank = self.rank_of(summed) if summed is not None else None
        if not isinstance(rank, int) or rank < 1 or _calls_in(summed):
            return node
        name = fresh_in(self.taken, f"{self.target}_sum")
        self.found.append((name, node))
        return load(name)

    def visit_IfExp(self, node):  # evaluated in part: left as it is
        return node

    def visit_BoolOp(self, node):
        return node


def _calls_in(node: ast.expr) -> bool:
    return any(isinstance(n, ast.Call) for n in walk_nodes(node))
