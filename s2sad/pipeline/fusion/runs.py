"""Gathering runs: consecutive statements elementwise over arrays of one rank, and what each
reads, assigns and accumulates; a run emits itself fused (loops.py) or as it was."""

from __future__ import annotations

import ast

from ...astcopy import clone, walk_nodes
from ..names import fresh_in
from ..nodes import assigned_name
from .dtypes import by_dtype, integer_derived, with_integers
from .extents import Extents, moved_up
from .gather import base_views
from .loops import Emitter
from .scatters import copied_into, scatter_of, takes_slices, with_slices_checked
from .row_adds import sharing, took_row_add
from .shapes import axis_reduction, expansion, fusible_test, guard, in_run_dtype, size
from .shapes import right_aligned, unit_axes, units_of, with_small_powers
from .syntax import (
    BINOPS,
    COMPARE,
    SHAPE_ONLY,
    UFUNCS,
    aliased,
    assign,
    called,
    load,
    names_in,
    origin,
    name_reads,
    promoted_value,
    text_of,
    whole_sum,
    written_in_place,
)


class Fuser:
    def __init__(self, rank_of, nodes, taken: set[str], integers=frozenset()):
        self.rank_of = rank_of
        self.integers = integer_derived(nodes, integers)  # (dtypes.py)
        self.value_reads, self.shape_reads = name_reads(nodes)
        self.written = written_in_place(nodes)
        self.shared_writes = written_in_place(nodes, owned=False)  # (aliases: see _take)
        self.taken = taken
        self.runs: list = []
        self._indices: dict[str, list[str]] = {}
        self.shares = sharing(nodes)  # name -> the names that may share its memory
        self.copied_into = copied_into(nodes, self.written, rank_of)  # (for stores)
        self.known: dict[str, int] = {}  # the ranks of the views scatter-adds make
        self.units = unit_axes(nodes, self.rank)  # name -> its axes known to be of length 1
        self.views = base_views(nodes, self.rank)  # view -> (the array it views, its starts)
        self.extents = Extents(nodes, self.rank)  # the lengths of the axes, symbolically
        self.kind_reads: dict = {}  # name -> how often `reads` reads it for its kind alone (fuse)

    def indices(self, rank: int, letter: str = "i") -> list[str]:
        """The loop indices of a nest of `rank` loops: `i0, i1, ...` (`j0, j1, ...` for a
        gather's, over the gradient's shape), one set for every run (no fused loop is inside
        another), renamed where the function has those names."""
        names = self._indices.setdefault(letter, [])
        while len(names) < rank:
            names.append(self.fresh(f"{letter}{len(names)}"))
        return names[:rank]

    def fresh(self, name: str) -> str:
        return fresh_in(self.taken, name)

    def rank(self, node: ast.expr):
        """`node`'s rank, where known: the analysis's, and that of the calls a run may hold
        (s2sad's helpers, which the analysis knows only by their resolved objects)."""
        if isinstance(node, ast.Constant):
            return 0 if isinstance(node.value, (int, float)) else None
        if isinstance(node, ast.Name) and node.id in self.known:
            return self.known[node.id]
        if promoted_value(node, self.rank) is not None:
            return self.rank(promoted_value(node, self.rank))
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
        if expansion(node) is not None:
            return self.rank(node.args[1])
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
        stmts = list(stmts)
        while stmts:
            stmt = stmts.pop(0)
            if run is not None and run.take(stmt):
                continue
            if run is not None and run.over_another_shape(stmt):  # its later ones moved up
                for later in moved_up(stmts, stmt, run.take):
                    stmts.remove(later)
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
        if assigned_name(stmt) is None:
            return None
        value, scatter = stmt.value, scatter_of(stmt, self.rank)
        summed = text_of(getattr(value, "func", None)) in ("np.sum", "sum_over", "unbroadcast")
        # over the array summed (its axes of length 1 not looped), or the slice scattered
        over = scatter.value if scatter else value.args[0] if summed and value.args else None
        if over is not None:
            rank = self.rank(over)
            units = units_of(over, self.units, self.rank)
        else:
            rank = self.rank(stmt.targets[0])
            units = self.units.get(stmt.targets[0].id, frozenset())
        if not isinstance(rank, int) or rank < 1:
            return None
        run = Run(self, rank, depth, units)
        return run if run.take(stmt) else None


class Run:
    """A run being gathered: its statements, what it reads and assigns."""

    def __init__(self, fuser: Fuser, rank: int, depth: int, units=frozenset()):
        self.f = fuser
        self.rank = rank
        self.units = units  # the axes of the run's shape of length 1, not looped over
        # each array read -> the loop axis (None: index 0) each of its axes follows
        self.maps: dict[str, tuple] = {}
        self.reductions: dict[str, tuple] = {}  # an axis sum -> its map, the array of its shape
        self.masks: set[str] = set()  # arrays read as np.where's condition (of any dtype)
        self.numbers: set[str] = set()  # arrays read as numbers (float64, checked)
        self._pending = None
        self.depth = depth  # how many loops it is in
        self.remat: dict[str, tuple] = {}  # an input -> (its statement, its recipe): recomputed
        self.rematerialized: set[str] = set()  # values other runs recompute, never stored
        self.stmts: list = []  # every statement taken, in order (the unfused branch)
        self.hoisted: list = []  # views and arithmetic on numbers, moved above the run
        # (statement, kind): "element", "alias", "sum", "reduce", "scatter" or "row_add"
        self.entries: list = []
        self.assigned: dict[str, None] = {}  # names the run assigns elementwise, in order
        self.inputs: dict[str, None] = {}  # rank-r arrays read before the run assigns them
        self.witnesses: dict[str, None] = {}  # arrays read for their shape alone
        self.sums: set[str] = set()
        self.mentioned: set[str] = set()
        self.sliced: dict[str, str] = {}  # an array the run scatters into -> the array sliced
        self.scatters: dict[int, object] = {}  # id of a scatter statement -> its Scatter
        self.stores: dict[int, object] = {}  # id of a store into slices -> its Scatter
        self.row_adds: dict[int, tuple] = {}  # id(add_at statement) -> (its view, the value)
        self.added_into: set[str] = set()  # arrays added into, and what may share their memory
        self.extent = None  # the axes of the run's shape, symbolically (extents.py), if known

    # ------------------------------------------------------------------ gathering
    def take(self, stmt) -> bool:
        """Whether `stmt` joins the run: one over a shape provably not the run's does not."""
        if self.over_another_shape(stmt) or not self._take(stmt):
            return False
        shape = self.f.extents.over(stmt)
        if shape is not None and len(shape) == self.rank:
            self.extent = self.f.extents.filled(self.extent, shape)
        return True

    def over_another_shape(self, stmt) -> bool:
        """Whether `stmt` computes over a shape not provably the run's (extents.py)."""
        return self.f.extents.apart(self.extent, self.f.extents.over(stmt))

    def _take(self, stmt) -> bool:
        self._pending = None  # what _elementwise found in the statement
        if took_row_add(self, stmt):  # `add_at(dw, j, v)`: added element by element
            return True
        if names_in([stmt]) & self.added_into:
            return False  # a read of an array the run adds into
        taken = takes_slices(self, stmt)  # a scatter or a store into slices, if it is one
        if taken is not None:
            return taken
        target = assigned_name(stmt)
        if target is None:
            return False
        value = stmt.value
        if target in self.inputs.keys() - self.assigned or target in {*self.witnesses, *self.sums}:
            return False
        if target in self.sliced.values():  # the shape its scatters' positions are read from
            return False
        if any(h.targets[0].id == target for h in self.hoisted):
            return False
        rank = self.f.rank(stmt.targets[0])
        if isinstance(rank, int) and 1 <= rank <= self.rank and _is_view(self, value):
            source = value.value.id
            if target in self.mentioned or source in self.assigned or source in self.sums:
                return False
            return self._add(stmt, "hoisted", target, [], [])
        summed = whole_sum(value)
        if rank == 0 and summed is not None:
            if target in self.mentioned:
                return False
            found = self._elementwise(summed)
            return found is not None and self._add(stmt, "sum", target, *found)
        if rank == 0:
            if target in self.mentioned or not self._scalar(value):
                return False
            return self._add(stmt, "hoisted", target, [], [])
        reduction = _reduction(self, value)
        if reduction is not None:
            summed, mapping, witness = reduction
            found = self._elementwise(summed)
            if found is None or target in self.mentioned or target in self.assigned:
                return False
            witnesses = found[1] + ([witness] if witness else [])
            if not self._agree(witnesses):
                return False
            self.reductions[target] = (mapping, witness, summed)
            return self._add(stmt, "reduce", target, found[0], witnesses)
        if rank != self.rank:
            return False
        found = self._elementwise(value)
        if found is None or not self._agree(found[1]):
            return False
        source = aliased(value)
        if source is not None and {target, source} & self.f.shared_writes:
            return False  # the original shares the array that is written into later
        return self._add(stmt, "alias" if source is not None else "element", target, *found)

    def _agree(self, witnesses: list) -> bool:
        """Whether the arrays read for their shape are read (if at all) by broadcasting's map,
        the one the shape they stand for assumes."""
        pending = self._pending[0] if self._pending else {}
        for name in witnesses:
            if name not in self.assigned:
                mapping = self.map_of(name)
                if self.maps.get(name, mapping) != mapping or pending.get(name, mapping) != mapping:
                    return False
        return True

    def _add(self, stmt, kind: str, target: str, reads: list, witnesses: list) -> bool:
        if self._pending is not None:
            maps, masks, numbers = self._pending
            self.maps.update(maps)
            self.masks.update(masks)
            self.numbers.update(numbers)
        for name in reads:
            if name not in self.assigned:
                self.inputs.setdefault(name)
        for name in witnesses:
            if name not in self.assigned:
                self.witnesses.setdefault(name)
                self.maps.setdefault(name, self.map_of(name))
        self.stmts.append(stmt)
        if kind == "hoisted":
            self.hoisted.append(stmt)
        else:
            self.entries.append((stmt, kind))
            if kind in ("sum", "reduce", "scatter"):
                self.sums.add(target)
            elif kind not in ("row_add", "store"):
                self.assigned.setdefault(target)
        self.mentioned |= names_in([stmt])
        return True

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

    def full(self) -> tuple:
        """The map of an array of the run's shape."""
        return tuple(None if k in self.units else k for k in range(self.rank))

    def map_of(self, name: str):
        """How `name`'s axes follow the run's loops: its own where the run assigns it, else
        NumPy's broadcasting (right-aligned, index 0 along its axes of length 1)."""
        if name in self.assigned:
            return self.full()
        q = self.f.rank(load(name))
        if not isinstance(q, int) or not 1 <= q <= self.rank:
            return None
        return right_aligned(self.rank, q, self.f.units.get(name, frozenset()), self.units)

    def _elementwise(self, node):
        """(the arrays `node` reads, the names it reads for their shape), where `node` is
        elementwise over the run's shape, broadcasting arrays into it; else None."""
        reads: list = []
        witnesses: list = []
        masks: list = []
        maps: dict = {}
        everything = {k for k in range(self.rank) if k not in self.units}

        def array(name: str, mapping):
            """The loop axes `name` covers read with `mapping`; None where it cannot be."""
            if mapping is None or name in self.sums:
                return None
            if name not in self.assigned:
                if maps.setdefault(name, mapping) != mapping:
                    return None
                if self.maps.get(name, mapping) != mapping:
                    return None
            return {k for k in mapping if k is not None}

        def visit(n):
            if promoted_value(n, self.f.rank) is not None:
                return visit(promoted_value(n, self.f.rank))
            rank = self.f.rank(n)
            if rank == 0:
                return set() if self._scalar(n) else None
            if not isinstance(rank, int) or rank > self.rank:
                return None
            if isinstance(n, ast.Name):
                reads.append(n.id)
                return array(n.id, self.map_of(n.id))
            if isinstance(n, ast.Subscript):  # `x[None, :, :]`: x's axes moved right
                mapping = self._expanded_view(n, rank)
                if mapping is None:
                    return None
                reads.append(n.value.id)
                return array(n.value.id, mapping)
            if isinstance(n, ast.BinOp):
                return union([n.left, n.right]) if isinstance(n.op, BINOPS) else None
            if isinstance(n, ast.UnaryOp):
                return union([n.operand]) if isinstance(n.op, (ast.USub, ast.UAdd)) else None
            if not isinstance(n, ast.Call):
                return None
            name, args = text_of(n.func), n.args
            expanded = expansion(n)
            if expanded is not None:
                g, mapping = self._expanded(*expanded)
                if mapping is None or array(g, mapping) is None:
                    return None
                reads.append(g)
                witnesses.append(expanded[1].id)
                return everything
            if n.keywords:
                return None
            if name in UFUNCS:
                return union(args)
            if name == "np.where" and len(args) == 3:
                cond = args[0]
                if isinstance(cond, ast.Name) and self.f.rank(cond) not in (0, None):
                    # a mask, read by its truth: of any dtype
                    if cond.id in self.assigned or array(cond.id, self.map_of(cond.id)) is None:
                        return None
                    masks.append(cond.id)
                    values = union(args[1:])  # None: a branch value the loop cannot read
                    return None if values is None else values | array(cond.id, self.map_of(cond.id))
                if not (
                    isinstance(cond, ast.Compare) and all(isinstance(o, COMPARE) for o in cond.ops)
                ):
                    return None
                return union([cond.left] + cond.comparators + args[1:])
            if name in SHAPE_ONLY and len(args) == 2 and isinstance(args[1], ast.Name):
                witness = args[1].id
                if witness in self.sums or self.map_of(witness) != self.full():
                    return None
                covered = visit(args[0])
                if covered is None or (name == "unbroadcast" and covered != everything):
                    return None
                witnesses.append(witness)
                return everything
            return None

        def union(operands: list):
            covered: set = set()
            for operand in operands:
                found = visit(operand)
                if found is None:
                    return None
                covered |= found
            return covered

        if visit(node) != everything:
            return None
        self._pending = (maps, masks, reads)  # kept if the statement is taken (_add)
        return reads + masks, witnesses

    def _expanded_view(self, node: ast.Subscript, rank: int):
        """The map of `x` in `x[:, None]`, `x[None, :, :]` (whole slices and new axes) read by
        the run, an array it does not assign; None for other subscripts."""
        x = node.value
        if not isinstance(x, ast.Name) or x.id in self.assigned or x.id in self.sums:
            return None
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        units = self.f.units.get(x.id, frozenset())
        q = self.f.rank(x)
        if not isinstance(q, int):
            return None
        whole = [i for i in items if isinstance(i, ast.Slice)]
        items = items + [ast.Slice()] * (q - len(whole))  # the axes after those named
        mapping, out = [], self.rank - rank  # the loop axis of each axis of the subscript
        for item in items:
            if isinstance(item, ast.Constant) and item.value is None:
                out += 1
            elif isinstance(item, ast.Slice) and item.lower is item.upper is item.step is None:
                j = len(mapping)
                if j not in units and out in self.units:
                    return None
                mapping.append(None if j in units else out)
                out += 1
            else:
                return None
        if len(mapping) != q or out != self.rank:
            return None
        return tuple(mapping)

    def _expanded(self, g, x, axis: int, keep: bool):
        """(g's name, its map) of `expand_reduced(g, x, axis=k, keepdims=...)`: `g` broadcast
        along the reduced axis of `x`, an array of the run's shape; (None, None) otherwise."""
        if not (isinstance(g, ast.Name) and isinstance(x, ast.Name)):
            return None, None
        if x.id in self.sums or self.map_of(x.id) != self.full() or g.id in self.assigned:
            return None, None
        if not -self.rank <= axis < self.rank or self.f.rank(g) != self.rank - (not keep):
            return None, None
        mapping = list(self.full())
        if keep:
            mapping[axis % self.rank] = None
        else:
            del mapping[axis % self.rank]
        units = self.f.units.get(g.id, frozenset())
        return g.id, tuple(None if j in units else k for j, k in enumerate(mapping))

    # ------------------------------------------------------------------ emitting
    def fuses(self) -> bool:
        """Whether the run is worth a loop: two arrays or more made, over arrays it reads (one
        statement may make several: the adjoint's `dz = g * a + g * b` makes three)."""
        worth = sum(self._made(stmt) for stmt, kind in self.entries if kind != "alias")
        return worth >= 2 and bool(self.inputs or self.witnesses)

    def _made(self, stmt) -> int:
        """How many arrays an elementwise statement makes unfused: one per operation on arrays
        in an element statement, one for any other statement."""
        operations = (ast.BinOp, ast.UnaryOp, ast.Compare, ast.Call)
        made = sum(
            1
            for n in walk_nodes(stmt.value)
            if isinstance(n, operations) and (self.f.rank(n) or 0) >= 1
        )
        return max(made, 1)

    def emit(self) -> list:
        """The run's statements: fused where it is worth it, else as they were."""
        if not self.fuses():
            return list(self.stmts)
        inputs = [n for n in self.inputs if n not in self.remat]
        for _, recipe in self.remat.values():
            inputs += [n.id for n in walk_nodes(recipe) if isinstance(n, ast.Name)]
        arrays = [n for n in dict.fromkeys(inputs + list(self.witnesses)) if self.f.rank(load(n))]
        maps = {n: self.maps.get(n, self.full()) for n in arrays}
        sizes = {}  # each loop axis -> the size of an array along it (of the run's shape first)
        ordered = sorted(maps.items(), key=lambda item: item[1] != self.full())
        for name, mapping in ordered:
            for j, k in enumerate(mapping):
                if k is not None:
                    sizes.setdefault(k, size(name, j))
        if len(sizes) + len(self.units) != self.rank:  # never expected: a loop of no size
            return list(self.stmts)
        # the array whose dtype the run's arrays share (the guard checks it): its allocations'
        numbers = [n for n in arrays if n not in self.masks - self.numbers]
        if not numbers:  # masks alone: nothing to take a float dtype from
            return list(self.stmts)
        numbers, integers = by_dtype(self, numbers)  # the dtype's source first (dtypes.py)
        last = max(self.stmts.index(s) for s, _ in self.entries)
        after = self.stmts[last + 1 :]  # views and numbers after the last entry stay there
        before = [s for s in self.hoisted if s not in after]
        # the values the fused loop recomputes, computed again where it does not run
        again = [origin(assign(x, clone(r)), s) for x, (s, r) in self.remat.items()]
        fused = (emitter := Emitter(self, maps, sizes, numbers[0])).statements()
        if self.undefined(fused):  # never expected: the statements as they were are right
            return again + list(self.stmts)
        unfused = again + [s for s in self.stmts if s not in self.hoisted]
        unfused += in_run_dtype(fused, unfused, numbers[0])
        if self.plain():
            test = fusible_test([n for n in arrays if n not in integers])
        else:
            test = guard(maps, sizes, self.full(), self.masks - self.numbers | set(integers))
        test = with_integers(test, numbers[0], integers, self.plain())
        if self.sliced or self.stores:  # the arrays sliced: the run's dtype, slices its shape
            test = with_slices_checked(test, self, maps, sizes, numbers[0])
        test = with_small_powers(test, emitter.powers)
        return before + [ast.If(test, fused, unfused)] + after

    def plain(self) -> bool:
        """Whether the run reads and writes arrays of one shape alone (its guard `fusible`)."""
        full = self.full()
        if self.units or self.reductions or self.masks:
            return False
        return all(m == full for m in self.maps.values())

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


def _is_view(run, value) -> bool:
    """`u[1:, :-1]`, `v[:, None]`, `w[k, :b]`: a slice of an array, every axis kept or taken
    at an index computed above the run (a row of a matrix), new ones of length 1 (read by the
    run as an array of that shape)."""
    if not (isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name)):
        return False
    items = value.slice.elts if isinstance(value.slice, ast.Tuple) else [value.slice]
    slices = [i for i in items if not (isinstance(i, ast.Constant) and i.value is None)]
    kept = [i for i in slices if isinstance(i, ast.Slice)]
    if kept != slices and (not kept or len(slices) != len(items)):
        return False  # an index beside a new axis, or no axis kept: not a view taken here
    return run.f.rank(value.value) == len(slices) and all(
        (
            all(p is None or run._scalar(p) for p in (i.lower, i.upper, i.step))
            if isinstance(i, ast.Slice)
            else run._scalar(i)
        )
        for i in slices
    )


def _reduction(run, value):
    """(the array summed, the map of the sum, the array of its shape) of a sum over axes of
    the run's shape: `np.sum(g, axis=1)`, `sum_over(g, 1, True)`, `unbroadcast(g, b)` (or
    its negative) to a lower rank or to axes of length 1."""
    found = axis_reduction(value, run.f.rank)
    if found is not None:
        summed, axis, keep = found
        if run.f.rank(summed) != run.rank:
            return None
        mapping = list(run.full())
        if keep:
            mapping[axis] = None
        else:
            del mapping[axis]
        return (summed, tuple(mapping), None) if mapping else None
    negated = isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub)
    if negated:
        value = value.operand
    if not (called(value, "unbroadcast", 2) and isinstance(value.args[1], ast.Name)):
        return None
    witness = value.args[1].id
    mapping = run.map_of(witness)
    if witness in run.assigned or witness in run.sums or mapping in (None, run.full()):
        return None
    summed = ast.UnaryOp(ast.USub(), value.args[0]) if negated else value.args[0]
    return summed, mapping, witness
