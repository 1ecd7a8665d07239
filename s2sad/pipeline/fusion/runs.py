"""Gathering runs: consecutive statements elementwise over arrays of one rank, and what each
reads, assigns and accumulates; a run emits itself fused (loops.py) or as it was."""

from __future__ import annotations

import ast

from ...astcopy import clone, walk_nodes
from .loops import Emitter
from .syntax import (
    BINOPS,
    COMPARE,
    SHAPE_ONLY,
    UFUNCS,
    aliased,
    assign,
    load,
    names_in,
    origin,
    name_reads,
    text_of,
    written_in_place,
)


class Fuser:
    def __init__(self, rank_of, nodes, taken: set[str]):
        self.rank_of = rank_of
        self.value_reads, self.shape_reads = name_reads(nodes)
        self.written = written_in_place(nodes)
        self.taken = taken
        self.runs: list = []
        self._indices: list[str] = []

    def indices(self, rank: int) -> list[str]:
        """The loop indices of a nest of `rank` loops: `i0, i1, ...`, one set for every run (no
        fused loop is inside another), renamed where the function has those names."""
        while len(self._indices) < rank:
            self._indices.append(self.fresh(f"i{len(self._indices)}"))
        return self._indices[:rank]

    def fresh(self, name: str) -> str:
        candidate, k = name, 2
        while candidate in self.taken:
            candidate, k = f"{name}{k}", k + 1
        self.taken.add(candidate)
        return candidate

    def rank(self, node: ast.expr):
        """`node`'s rank, where known: the analysis's, and that of the calls a run may hold
        (s2sad's helpers, which the analysis knows only by their resolved objects)."""
        if isinstance(node, ast.Constant):
            return 0 if isinstance(node.value, (int, float)) else None
        if isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Compare)) or (
            isinstance(node, ast.Call) and text_of(node.func) in UFUNCS | {"np.where"}
        ):
            if isinstance(node, ast.BinOp):
                operands = [node.left, node.right]
            elif isinstance(node, ast.UnaryOp):
                operands = [node.operand]
            elif isinstance(node, ast.Compare):
                operands = [node.left] + node.comparators
            else:
                operands = node.args
            ranks = [self.rank(o) for o in operands]
            matmul = isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult)
            if matmul or any(r is None for r in ranks):
                return self.rank_of(node)
            return max(ranks, default=0)
        if isinstance(node, ast.Call) and text_of(node.func) in SHAPE_ONLY and len(node.args) > 1:
            rank = self.rank(node.args[1])
            if text_of(node.func) == "unbroadcast" and self.rank(node.args[0]) != rank:
                return None
            if text_of(node.func) == "expand_reduced" and (
                len(node.args) > 2 or node.keywords or self.rank(node.args[0]) != 0
            ):
                return None
            return rank
        return self.rank_of(node)

    def gather(self, stmts: list, depth: int) -> list:
        """`stmts` with each run gathered into a `Run` (in `self.runs` too, in order), and each
        loop or branch as (statement, its body gathered, its else gathered)."""
        out: list = []
        run = None
        for stmt in stmts:
            if run is not None and run.take(stmt):
                continue
            run = self.start(stmt, depth)
            if run is not None:
                out.append(run)
                self.runs.append(run)
            elif isinstance(stmt, (ast.For, ast.While, ast.If)):
                deeper = depth + (not isinstance(stmt, ast.If))
                out.append((stmt, self.gather(stmt.body, deeper), self.gather(stmt.orelse, deeper)))
            else:
                out.append(stmt)
        return out

    def start(self, stmt, depth: int):
        """A run beginning with `stmt`, or None where no run can."""
        if not (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
        ):
            return None
        value = stmt.value
        if text_of(getattr(value, "func", None)) == "np.sum" and value.args:
            rank = self.rank(value.args[0])
        else:
            rank = self.rank(stmt.targets[0])
        if not isinstance(rank, int) or rank < 1:
            return None
        run = Run(self, rank, depth)
        return run if run.take(stmt) else None


class Run:
    """A run being gathered: its statements, what it reads and assigns."""

    def __init__(self, fuser: Fuser, rank: int, depth: int):
        self.f = fuser
        self.rank = rank
        self.depth = depth  # how many loops it is in
        self.remat: dict[str, tuple] = {}  # an input -> (its statement, its recipe): recomputed
        self.rematerialized: set[str] = set()  # values other runs recompute, never stored
        self.stmts: list = []  # every statement taken, in order (the unfused branch)
        self.hoisted: list = []  # views and arithmetic on numbers, moved above the run
        self.entries: list = []  # (statement, kind): "element", "alias" or "sum"
        self.assigned: dict[str, None] = {}  # names the run assigns elementwise, in order
        self.inputs: dict[str, None] = {}  # rank-r arrays read before the run assigns them
        self.witnesses: dict[str, None] = {}  # arrays read for their shape alone
        self.sums: set[str] = set()
        self.mentioned: set[str] = set()

    # ------------------------------------------------------------------ gathering
    def take(self, stmt) -> bool:
        if not (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
        ):
            return False
        target, value = stmt.targets[0].id, stmt.value
        if target in self.inputs or target in self.witnesses or target in self.sums:
            return False
        if any(h.targets[0].id == target for h in self.hoisted):
            return False
        rank = self.f.rank(stmt.targets[0])
        if rank == self.rank and self._view(value):
            if target in self.mentioned or value.value.id in self.assigned:
                return False
            return self._add(stmt, "hoisted", target, [], [])
        if rank == 0 and text_of(getattr(value, "func", None)) == "np.sum":
            if len(value.args) != 1 or value.keywords or target in self.mentioned:
                return False
            found = self._elementwise(value.args[0])
            return found is not None and self._add(stmt, "sum", target, *found)
        if rank == 0:
            if target in self.mentioned or not self._scalar(value):
                return False
            return self._add(stmt, "hoisted", target, [], [])
        if rank != self.rank:
            return False
        found = self._elementwise(value)
        if found is None:
            return False
        source = aliased(value)
        if source is not None and (target in self.f.written or source in self.f.written):
            return False  # the original shares the array that is written into later
        return self._add(stmt, "alias" if source is not None else "element", target, *found)

    def _add(self, stmt, kind: str, target: str, reads: list, witnesses: list) -> bool:
        for name in reads:
            if name not in self.assigned:
                self.inputs.setdefault(name)
        for name in witnesses:
            if name not in self.assigned:
                self.witnesses.setdefault(name)
        self.stmts.append(stmt)
        if kind == "hoisted":
            self.hoisted.append(stmt)
        else:
            self.entries.append((stmt, kind))
            if kind == "sum":
                self.sums.add(target)
            else:
                self.assigned.setdefault(target)
        self.mentioned |= names_in([stmt])
        return True

    def _view(self, value) -> bool:
        """`u[1:, :-1]`: a slice of an array of the run's rank, every axis kept."""
        if not (isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name)):
            return False
        items = value.slice.elts if isinstance(value.slice, ast.Tuple) else [value.slice]
        return self.f.rank(value.value) == self.rank and all(
            isinstance(i, ast.Slice)
            and all(p is None or self._scalar(p) for p in (i.lower, i.upper, i.step))
            for i in items
        )

    def _scalar(self, node) -> bool:
        """A number computed cheaply from values the run does not assign (evaluated at each
        element, or once above the run)."""
        if self.f.rank(node) != 0:
            return False
        for n in walk_nodes(node):
            if isinstance(n, ast.Name) and (n.id in self.assigned or n.id in self.sums):
                return False
            if isinstance(n, ast.Call):
                return False
            if isinstance(n, ast.Attribute) and n.attr not in ("shape", "ndim", "size"):
                return False
        return True

    def _elementwise(self, node):
        """(the rank-r names `node` reads, the names it reads for their shape), where `node`
        is elementwise over the run's arrays; else None."""
        reads: list = []
        witnesses: list = []

        def visit(n) -> bool:
            rank = self.f.rank(n)
            if rank == 0:
                return self._scalar(n)
            if rank != self.rank:
                return False
            if isinstance(n, ast.Name):
                reads.append(n.id)
                return True
            if isinstance(n, ast.BinOp):
                return isinstance(n.op, BINOPS) and visit(n.left) and visit(n.right)
            if isinstance(n, ast.UnaryOp):
                return isinstance(n.op, (ast.USub, ast.UAdd)) and visit(n.operand)
            if not isinstance(n, ast.Call) or n.keywords:
                return False
            name, args = text_of(n.func), n.args
            if name in UFUNCS:
                return all(visit(a) for a in args)
            if name == "np.where" and len(args) == 3:
                cond = args[0]
                if not (
                    isinstance(cond, ast.Compare)
                    and all(isinstance(o, COMPARE) for o in cond.ops)
                    and self.f.rank(cond) in (0, self.rank)
                ):
                    return False
                operands = [cond.left] + cond.comparators + args[1:]
                return all(visit(a) for a in operands)
            if name in SHAPE_ONLY and len(args) == 2 and isinstance(args[1], ast.Name):
                if self.f.rank(args[1]) != self.rank or args[1].id in self.sums:
                    return False
                if name == "unbroadcast" and self.f.rank(args[0]) != self.rank:
                    return False
                witnesses.append(args[1].id)
                return visit(args[0])
            return False

        return (reads, witnesses) if visit(node) else None

    # ------------------------------------------------------------------ emitting
    def fuses(self) -> bool:
        """Whether the run is worth a loop: two array statements or more, over arrays it reads."""
        worth = sum(1 for _, kind in self.entries if kind != "alias")
        return worth >= 2 and bool(self.inputs or self.witnesses)

    def emit(self) -> list:
        """The run's statements: fused where it is worth it, else as they were."""
        if not self.fuses():
            return list(self.stmts)
        inputs = [n for n in self.inputs if n not in self.remat]
        for _, recipe in self.remat.values():
            inputs += [n.id for n in walk_nodes(recipe) if isinstance(n, ast.Name)]
        arrays = [n for n in dict.fromkeys(inputs + list(self.witnesses)) if self.f.rank(load(n))]
        last = max(self.stmts.index(s) for s, _ in self.entries)
        after = self.stmts[last + 1 :]  # views and numbers after the last entry stay there
        before = [s for s in self.hoisted if s not in after]
        # the values the fused loop recomputes, computed again where it does not run
        again = [origin(assign(x, clone(r)), s) for x, (s, r) in self.remat.items()]
        fused = Emitter(self, arrays).statements()
        if self.undefined(fused):  # never expected: the statements as they were are right
            return again + list(self.stmts)
        unfused = again + [s for s in self.stmts if s not in self.hoisted]
        guard = ast.Call(load("fusible"), [load(a) for a in arrays], [])
        return before + [ast.If(guard, fused, unfused)] + after

    def undefined(self, fused: list) -> set[str]:
        """The names read after the run that its fused branch leaves unassigned (Numba would
        read garbage, not raise)."""
        defined = {
            t.id
            for s in fused
            if isinstance(s, ast.Assign)
            for t in s.targets
            if isinstance(t, ast.Name)
        }
        values, shapes = name_reads([s for s, _ in self.entries])
        missing = set()
        for name in self.assigned:
            later = self.f.shape_reads[name] - shapes[name]
            if name not in self.rematerialized:
                later += self.f.value_reads[name] - values[name]
            if later > 0 and name not in defined:
                missing.add(name)
        return missing
