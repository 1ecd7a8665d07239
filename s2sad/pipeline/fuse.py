"""Fusion, the last stage of a jitted transform before emission: a run of elementwise statements
over arrays of one shape becomes one loop nest, so compiled code makes no temporary arrays.

Numba compiles `t = a * b; u = np.tanh(t) + c; s = np.sum(u)` into three loops and two
allocations; fused, it is one loop whose body holds `t` and `u` as numbers. A run is a sequence
of consecutive assignments (at the top level or in a loop body) of rank-`r` arrays built from
`+ - * / **`, unary minus, elementwise ufuncs, `np.where`, names and numbers, of
`unbroadcast(g, x)` where `g` and `x` have one rank (the identity when their shapes agree), of
`expand_reduced(s, x)` of a number `s` (`s` everywhere), and of full sums `np.sum(t)` (folded in
as accumulators); slicing views (`v = u[1:, :-1]`) and arithmetic on numbers are moved above it.

Emitted, a run is

    if fusible(a, b, x):          # the arrays it reads: float64, one shape (compiled code only)
        u = np.empty(a.shape)     # the values read after the run, allocated once
        s = 0.0
        for i0 in range(a.shape[0]):
            ...                   # one statement per original one, on elements
    else:
        ...                       # the original statements: broadcasting, other dtypes, Python

A value read after the run only for its shape (`unbroadcast(g, t)` in the adjoint) is not
computed: the fused branch names an array of the run's shape for it (`t = u`). The run stops
before a statement that would see a different order of effects: one reading a sum the run is
still accumulating, one assigning a name the run has read as an input (a loop-carried value,
`h = h_new`), or one making an alias (`y = x`) of an array written in place later. It consumes
and produces statement lists; the unfused lists stay as they were (the driver emits both, and
jit.py falls back to the unfused code where Numba cannot type the fused one).
"""

from __future__ import annotations

import ast
import copy
from collections import Counter

from .. import ir
from ..astcopy import clone, walk_nodes

# the elementwise NumPy functions whose scalar forms Numba has
_UFUNCS = frozenset(
    f"np.{name}"
    for name in (
        "abs absolute arccos arcsin arctan arctanh arcsinh arccosh cos cosh exp exp2 expm1 log "
        "log10 log1p log2 maximum minimum negative sign sin sinh sqrt square tan tanh"
    ).split()
)
_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)
_COMPARE = (ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq)
# helpers that read their second argument for its shape alone
_SHAPE_ONLY = frozenset({"unbroadcast", "expand_reduced"})


def fuse(blocks: list[list], rank_of, reads: list, taken: set[str]) -> list[list]:
    """The statement lists of one generated function with their fusible runs fused. `rank_of`
    gives an expression's rank (None where unknown); `reads` are the other nodes of the function
    that read values (its outputs and returned gradients); `taken`, every name it uses."""
    nodes = [s for b in blocks for s in b if isinstance(s, ast.AST)] + list(reads)
    fuser = _Fuser(rank_of, nodes, set(taken) | _names(nodes))
    return [fuser.block(b) for b in blocks]


def _names(nodes) -> set[str]:
    return {n.id for node in nodes for n in walk_nodes(node) if isinstance(n, ast.Name)}


def _text(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_text(node.value)}.{node.attr}"
    return ""


def _reads(nodes) -> tuple[Counter, Counter]:
    """How often each name is read for its value, and for its shape alone (the second argument
    of `unbroadcast` and `expand_reduced`); `x += g` and `x[i] = v` read `x`."""
    shape_only = set()
    for node in nodes:
        for n in walk_nodes(node):
            if (
                isinstance(n, ast.Call)
                and _text(n.func) in _SHAPE_ONLY
                and len(n.args) >= 2
                and isinstance(n.args[1], ast.Name)
            ):
                shape_only.add(id(n.args[1]))
    value, shape = Counter(), Counter()
    for node in nodes:
        for n in walk_nodes(node):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                (shape if id(n) in shape_only else value)[n.id] += 1
            elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
                value[n.target.id] += 1
    return value, shape


def _written_in_place(nodes) -> set[str]:
    """Names of arrays the function writes into: `x[i] = v`, `x += g`, `add_at(x, ...)`."""
    found = set()
    for node in nodes:
        for n in walk_nodes(node):
            target = None
            if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store):
                target = n.value
            elif isinstance(n, ast.AugAssign):
                target = n.target
            elif isinstance(n, ast.Call) and n.args and _text(n.func) == "add_at":
                target = n.args[0]
            while isinstance(target, ast.Subscript):
                target = target.value
            if isinstance(target, ast.Name):
                found.add(target.id)
    return found


class _Fuser:
    def __init__(self, rank_of, nodes, taken: set[str]):
        self.rank_of = rank_of
        self.value_reads, self.shape_reads = _reads(nodes)
        self.written = _written_in_place(nodes)
        self.taken = taken

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
            isinstance(node, ast.Call) and _text(node.func) in _UFUNCS | {"np.where"}
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
        if isinstance(node, ast.Call) and _text(node.func) in _SHAPE_ONLY and len(node.args) > 1:
            rank = self.rank(node.args[1])
            if _text(node.func) == "unbroadcast" and self.rank(node.args[0]) != rank:
                return None
            if _text(node.func) == "expand_reduced" and (
                len(node.args) > 2 or node.keywords or self.rank(node.args[0]) != 0
            ):
                return None
            return rank
        return self.rank_of(node)

    def block(self, stmts: list) -> list:
        out: list = []
        run = None
        for stmt in stmts:
            if run is not None and run.take(stmt):
                continue
            if run is not None:
                out += run.emit()
            run = self.start(stmt)
            if run is not None:
                continue
            if isinstance(stmt, (ast.For, ast.While, ast.If)):
                stmt = copy.copy(stmt)  # the unfused code keeps the original
                stmt.body = self.block(stmt.body)
                stmt.orelse = self.block(stmt.orelse)
            out.append(stmt)
        if run is not None:
            out += run.emit()
        return out

    def start(self, stmt):
        """A run beginning with `stmt`, or None where no run can."""
        if not (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
        ):
            return None
        value = stmt.value
        if _text(getattr(value, "func", None)) == "np.sum" and value.args:
            rank = self.rank(value.args[0])
        else:
            rank = self.rank(stmt.targets[0])
        if not isinstance(rank, int) or rank < 1:
            return None
        run = _Run(self, rank)
        return run if run.take(stmt) else None


class _Run:
    """A run being gathered: its statements, what it reads and assigns."""

    def __init__(self, fuser: _Fuser, rank: int):
        self.f = fuser
        self.rank = rank
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
        if rank == 0 and _text(getattr(value, "func", None)) == "np.sum":
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
        source = _aliased(value)
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
        self.mentioned |= _names([stmt])
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
                return isinstance(n.op, _BINOPS) and visit(n.left) and visit(n.right)
            if isinstance(n, ast.UnaryOp):
                return isinstance(n.op, (ast.USub, ast.UAdd)) and visit(n.operand)
            if not isinstance(n, ast.Call) or n.keywords:
                return False
            name, args = _text(n.func), n.args
            if name in _UFUNCS:
                return all(visit(a) for a in args)
            if name == "np.where" and len(args) == 3:
                cond = args[0]
                if not (
                    isinstance(cond, ast.Compare)
                    and all(isinstance(o, _COMPARE) for o in cond.ops)
                    and self.f.rank(cond) in (0, self.rank)
                ):
                    return False
                operands = [cond.left] + cond.comparators + args[1:]
                return all(visit(a) for a in operands)
            if name in _SHAPE_ONLY and len(args) == 2 and isinstance(args[1], ast.Name):
                if self.f.rank(args[1]) != self.rank or args[1].id in self.sums:
                    return False
                if name == "unbroadcast" and self.f.rank(args[0]) != self.rank:
                    return False
                witnesses.append(args[1].id)
                return visit(args[0])
            return False

        return (reads, witnesses) if visit(node) else None

    # ------------------------------------------------------------------ emitting
    def emit(self) -> list:
        """The run's statements: fused where it is worth it, else as they were."""
        worth = sum(1 for _, kind in self.entries if kind != "alias")
        arrays = list(dict.fromkeys(list(self.inputs) + list(self.witnesses)))
        if worth < 2 or not arrays:
            return list(self.stmts)
        last = max(self.stmts.index(s) for s, _ in self.entries)
        after = self.stmts[last + 1 :]  # views and numbers after the last entry stay there
        before = [s for s in self.hoisted if s not in after]
        unfused = [s for s in self.stmts if s not in self.hoisted]
        fused = _Emitter(self, arrays).statements()
        guard = ast.Call(
            ast.Name("fusible", ast.Load()), [ast.Name(a, ast.Load()) for a in arrays], []
        )
        return before + [ast.If(guard, fused, unfused)] + after


def _aliased(value):
    """The array `value` is (`x`, or `unbroadcast(x, p)` of one rank: the identity), else None."""
    if isinstance(value, ast.Name):
        return value.id
    if (
        isinstance(value, ast.Call)
        and _text(value.func) == "unbroadcast"
        and len(value.args) == 2
        and isinstance(value.args[0], ast.Name)
    ):
        return value.args[0].id
    return None


class _Emitter:
    """The fused branch of a run: allocations, the loop nest, the shape stand-ins."""

    def __init__(self, run: _Run, arrays: list[str]):
        self.run, self.f = run, run.f
        self.anchor = arrays[0]
        self.index = [self.f.fresh(f"i{k}") for k in range(run.rank)]
        inside_values, inside_shapes = _reads([s for s, _ in run.entries])
        self.final = {}  # name -> the position of its last assignment in the run
        for k, (stmt, kind) in enumerate(run.entries):
            if kind != "sum":
                self.final[stmt.targets[0].id] = k
        self.live, self.standins = set(), []
        for name in self.final:
            if self.f.value_reads[name] > inside_values[name]:
                self.live.add(name)
            elif self.f.shape_reads[name] > inside_shapes[name]:
                self.standins.append(name)
        self.scalar: dict[str, str] = {}  # a name assigned in the run -> its element's name

    def element(self, name: str) -> ast.expr:
        if name in self.scalar:
            return ast.Name(self.scalar[name], ast.Load())
        return self.at(name, ast.Load())

    def at(self, name: str, ctx) -> ast.expr:
        index = [ast.Name(i, ast.Load()) for i in self.index]
        item = index[0] if len(index) == 1 else ast.Tuple(index, ast.Load())
        return ast.Subscript(ast.Name(name, ast.Load()), item, ctx)

    def translate(self, node: ast.expr) -> ast.expr:
        """`node` on one element: an array read at the loop's index, a value the run assigned
        by its element's name."""
        if self.f.rank(node) == 0:
            return clone(node)
        if isinstance(node, ast.Name):
            return self.element(node.id)
        if isinstance(node, ast.BinOp):
            return ast.BinOp(self.translate(node.left), node.op, self.translate(node.right))
        if isinstance(node, ast.UnaryOp):
            return ast.UnaryOp(node.op, self.translate(node.operand))
        if isinstance(node, ast.Compare):
            return ast.Compare(
                self.translate(node.left), node.ops, [self.translate(c) for c in node.comparators]
            )
        name = _text(node.func)
        if name == "np.where":
            cond, yes, no = (self.translate(a) for a in node.args)
            return ast.IfExp(cond, yes, no)
        if name in _SHAPE_ONLY:
            return self.translate(node.args[0])
        return ast.Call(clone(node.func), [self.translate(a) for a in node.args], [])

    def statements(self) -> list:
        run = self.run
        head, body, tail = [], [], []
        allocated = []
        for k, (stmt, kind) in enumerate(run.entries):
            target = stmt.targets[0].id
            value = self.translate(stmt.value.args[0] if kind == "sum" else stmt.value)
            if kind == "sum":
                head.append(_origin(_assign(target, ast.Constant(0.0)), stmt))
                body.append(_origin(ast.AugAssign(_store(target), ast.Add(), value), stmt))
                continue
            stored = self.final[target] == k and target in self.live
            later = _reads([s for s, _ in run.entries[k + 1 :]])[0][target] > 0
            source = _aliased(stmt.value) if kind == "alias" else None
            if stored and source is not None and source not in run.assigned:
                # `y = x` of an array the run reads: the same array, as in the original
                head.append(_origin(_assign(target, _name(source)), stmt))
                self.scalar.pop(target, None)
                continue
            if stored:
                # an array the run also reads as an input is written into a new one
                out = self.f.fresh(f"{target}_out") if target in run.inputs else target
                head.append(_origin(_assign(out, _empty(self.anchor)), stmt))
                allocated.append(out)
                if out != target:
                    tail.append(_assign(target, _name(out)))
                if not later:
                    body.append(_origin(ast.Assign([self.at(out, ast.Store())], value), stmt))
                    self.scalar.pop(target, None)
                    continue
            elif not later:
                continue  # a value whose shape alone is read after the run
            element = self.scalar.get(target) or self.f.fresh(f"{target}_i")
            body.append(_origin(_assign(element, value), stmt))
            self.scalar[target] = element
            if stored:
                body.append(_origin(ast.Assign([self.at(out, ast.Store())], _name(element)), stmt))
        stand = allocated[0] if allocated else self.anchor
        tail += [_assign(n, _name(stand)) for n in self.standins]
        return head + self.loops(body) + tail

    def loops(self, body: list) -> list:
        """`body` in a loop nest over the anchor's shape, the last axis innermost."""
        for k in reversed(range(self.run.rank)):
            size = ast.Subscript(
                ast.Attribute(_name(self.anchor), "shape", ast.Load()), ast.Constant(k), ast.Load()
            )
            iterate = ast.Call(_name("range"), [size], [])
            body = [ast.For(_store(self.index[k]), iterate, body, [])]
        return body


def _name(name: str) -> ast.Name:
    return ast.Name(name, ast.Load())


def _store(name: str) -> ast.Name:
    return ast.Name(name, ast.Store())


def _assign(name: str, value: ast.expr) -> ast.Assign:
    return ast.Assign([_store(name)], value)


def _empty(anchor: str) -> ast.expr:
    shape = ast.Attribute(ast.Name(anchor, ast.Load()), "shape", ast.Load())
    return ast.Call(ast.Attribute(ast.Name("np", ast.Load()), "empty", ast.Load()), [shape], [])


def _origin(new: ast.stmt, old: ast.stmt) -> ast.stmt:
    return ir.copy_origin(new, old)
