"""The fused branch of a run: allocations for the values read after it, the loop nest with
one statement per original one on elements, and the names standing for values whose shape
alone is read later."""

from __future__ import annotations

import ast

from ...astcopy import clone
from .gather import gather_starts, gathered, shifted
from .scatters import position

LANE_COUNT = 32  # a blocked loop's sums (16 or 8 in a loop of that count: not vectorised)
from .syntax import LANES, SHAPE_ONLY, aliased, assign, load, name_reads, origin, promoted_value
from .syntax import store, text_of


class Emitter:
    """The fused branch of a run: allocations, the loop nest, the shape stand-ins."""

    def __init__(self, run, maps: dict, sizes: dict, dtype: str):
        self.run, self.f = run, run.f
        self.dtype = dtype  # an array the run reads, of the float dtype its arrays share
        self.maps, self.sizes = maps, sizes  # each array's index map; each loop's size
        # an array of the run's shape, if it reads one
        self.anchor = next((n for n, m in maps.items() if m == run.full()), None)
        self.index = self.f.indices(run.rank)
        inside_values, inside_shapes = name_reads([s for s, _ in run.entries])
        self.inside_values = inside_values
        self.final = {}  # name -> the position of its last assignment in the run
        for k, (stmt, kind) in enumerate(run.entries):
            if kind not in ("sum", "reduce", "scatter", "row_add", "store"):
                self.final[stmt.targets[0].id] = k
        self.live, self.standins = set(), []
        for name in self.final:
            # (a value later runs recompute is read there only where they do not run)
            if name not in run.rematerialized and self.f.value_reads[name] > inside_values[name]:
                self.live.add(name)
            elif self.f.shape_reads[name] > inside_shapes[name]:
                self.standins.append(name)
        self.scalar: dict[str, ast.expr] = {}  # a name the run assigned -> its element
        self.lane: str | None = None  # the lane index of a one-loop run's blocked sums
        self.powers: list = []  # the exponents of `power_lanes`, which the guard checks

    def element(self, name: str) -> ast.expr:
        if name in self.scalar:
            return clone(self.scalar[name])
        if name in self.run.remat:
            return self.translate(self.run.remat[name][1])
        return self.at(name, ast.Load(), self.maps.get(name))

    def at(self, name: str, ctx, mapping=None) -> ast.expr:
        """`name`'s element: indexed by the loops its axes follow (the run's own shape where
        `mapping` is None), 0 along its axes of length 1."""
        mapping = self.run.full() if mapping is None else mapping
        view = self.f.views.get(name) if isinstance(ctx, ast.Load) else None
        if view is not None and mapping == tuple(range(len(view[1]))):
            # `u[i0 + 1, i1]` for `v = u[1:, :-1]`: a read LLVM vectorises (gather.py)
            name = view[0]
            index = [shifted(load(self.index[k]), s) for k, s in enumerate(view[1])]
        else:
            index = [ast.Constant(0) if k is None else load(self.index[k]) for k in mapping]
        item = index[0] if len(index) == 1 else ast.Tuple(index, ast.Load())
        return ast.Subscript(ast.Name(name, ast.Load()), item, ctx)

    def shape(self, mapping=None) -> ast.expr:
        """The shape of an array with `mapping` (the run's own shape where it is None)."""
        if mapping is None and self.anchor is not None:
            return ast.Attribute(load(self.anchor), "shape", ast.Load())
        mapping = self.run.full() if mapping is None else mapping
        sizes = [ast.Constant(1) if k is None else clone(self.sizes[k]) for k in mapping]
        return ast.Tuple(sizes, ast.Load())

    def translate(self, node: ast.expr) -> ast.expr:
        """`node` on one element: an array read at the loop's index, a value the run assigned
        by its element's name; `promoted(x, m)` as `x`, the run's guard `kept_dtype` holding."""
        if promoted_value(node, self.f.rank) is not None:
            return self.translate(promoted_value(node, self.f.rank))
        if self.f.rank(node) == 0:
            return clone(node)
        if isinstance(node, ast.Name):
            return self.element(node.id)
        if isinstance(node, ast.Subscript):  # `x[:, None]`: x read by its own map
            return self.element(node.value.id)
        if isinstance(node, ast.BinOp) and _varying_power(node, self.f.rank):
            self.powers.append(node.right)
            return ast.Call(load("power_lanes"), [self.translate(node.left), clone(node.right)], [])
        if isinstance(node, ast.BinOp):
            return ast.BinOp(self.translate(node.left), node.op, self.translate(node.right))
        if isinstance(node, ast.UnaryOp):
            return ast.UnaryOp(node.op, self.translate(node.operand))
        if isinstance(node, ast.Compare):
            return ast.Compare(
                self.translate(node.left), node.ops, [self.translate(c) for c in node.comparators]
            )
        name = text_of(node.func)
        if name == "np.where":
            cond, yes, no = (self.translate(a) for a in node.args)
            return ast.IfExp(cond, yes, no)
        if name in SHAPE_ONLY:
            return self.translate(node.args[0])
        args = [self.translate(a) for a in node.args]
        if name in LANES and len(args) == 1:
            return ast.Call(load(LANES[name]), args, [])
        return ast.Call(clone(node.func), args, [])

    def empty(self) -> ast.expr:
        return ast.Call(
            ast.Attribute(load("np"), "empty", ast.Load()), self.typed(self.shape()), []
        )

    def typed(self, shape: ast.expr) -> list:
        """The arguments of an array allocation of `shape` in the run's dtype."""
        return [shape, ast.Attribute(load(self.dtype), "dtype", ast.Load())]

    def cast(self, name: str, stmt) -> ast.stmt:
        """`s = in_dtype_of(s, a)`: a sum, accumulated in float64 (NumPy's float32 sums are
        pairwise, more accurate than one float32 accumulator), in the run's dtype."""
        value = ast.Call(load("in_dtype_of"), [load(name), load(self.dtype)], [])
        return origin(assign(name, value), stmt)

    def statements(self) -> list:
        run = self.run
        head, body, tail = [], [], []
        allocated, aliases, casts = [], [], []
        for k, (stmt, kind) in enumerate(run.entries):
            if kind == "scatter":  # added into the elements of `du` the slice covers
                head, body = self.scatter(stmt, head, body)
                continue
            if kind == "store":  # `z[1:] = t`: t's element written where the slices reach
                head, body = self.scatter(stmt, head, body)
                continue
            if kind == "row_add":  # `add_at(a, j, v)`: v's element added into a's view
                view, value = run.row_adds[id(stmt)]
                added = ast.AugAssign(self.at(view, ast.Store()), ast.Add(), self.element(value))
                body.append(origin(added, stmt))
                continue
            target = stmt.targets[0].id
            if kind == "sum" and self.kind_only(target):
                casts.append(origin(assign(target, self.kind_stand_in()), stmt))
                continue
            if kind == "reduce":
                mapping, witness, summed = run.reductions[target]
                value = self.translate(summed)
            else:
                value = self.translate(stmt.value.args[0] if kind == "sum" else stmt.value)
            if kind == "sum":
                columns, lanes = self.columns(target), self.lanes(target)
                if columns is None and lanes is None:
                    head.append(origin(assign(target, ast.Constant(0.0)), stmt))
                    added = store(target)
                else:  # one sum per column (or lane), added up after the loops
                    last = self.run.rank - 1
                    count = ast.Constant(LANE_COUNT) if lanes else clone(self.sizes[last])
                    columns = columns or lanes
                    zeros = ast.Call(
                        ast.Attribute(load("np"), "zeros", ast.Load()),
                        [count if lanes else ast.Tuple([count], ast.Load())],
                        [],
                    )
                    head.append(origin(assign(columns, zeros), stmt))
                    at = self.lane if lanes else self.index[last]
                    added = ast.Subscript(load(columns), load(at), ast.Store())
                    total = ast.Call(
                        ast.Attribute(load("np"), "sum", ast.Load()), [load(columns)], []
                    )
                    casts.append(origin(assign(target, total), stmt))
                body.append(origin(ast.AugAssign(added, ast.Add(), value), stmt))
                casts.append(self.cast(target, stmt))
                continue
            if kind == "reduce":  # a sum over axes: added into its array, zeroed before
                shape = self.shape(mapping)
                if witness is not None:
                    shape = ast.Attribute(load(witness), "shape", ast.Load())
                zeros = ast.Call(ast.Attribute(load("np"), "zeros", ast.Load()), [shape], [])
                head.append(origin(assign(target, zeros), stmt))
                added = self.at(target, ast.Store(), mapping)
                body.append(origin(ast.AugAssign(added, ast.Add(), value), stmt))
                casts.append(self.cast(target, stmt))
                continue
            stored = self.final[target] == k and target in self.live
            later = name_reads([s for s, _ in run.entries[k + 1 :]])[0][target] > 0
            source = aliased(stmt.value) if kind == "alias" else None
            if stored and source is not None and source not in run.assigned:
                # `y = x` of an array the run reads: the same array, as in the original
                head.append(origin(assign(target, load(source)), stmt))
                self.scalar.pop(target, None)
                continue
            if stored and not later and source in self.live and self.final[source] < k:
                # `y = x` of an array the run stores, final already: that array, once stored
                aliases.append(origin(assign(target, load(source)), stmt))
                continue
            if stored:
                # an array the run also reads as an input is written into a new one
                out = self.f.fresh(f"{target}_out") if target in run.inputs else target
                head.append(origin(assign(out, self.empty()), stmt))
                allocated.append(out)
                if out != target:
                    tail.append(assign(target, load(out)))
                if not later:
                    body.append(origin(ast.Assign([self.at(out, ast.Store())], value), stmt))
                    self.scalar.pop(target, None)
                    continue
            elif not later:
                continue  # a value whose shape alone is read after the run
            if not stored and isinstance(value, (ast.Name, ast.Constant, ast.Subscript)):
                self.scalar[target] = value  # another name for an element: no statement
                continue
            element = self.f.fresh(f"{target}_i")
            body.append(origin(assign(element, value), stmt))
            self.scalar[target] = load(element)
            if stored:
                body.append(origin(ast.Assign([self.at(out, ast.Store())], load(element)), stmt))
        stand = allocated[0] if allocated else self.anchor
        if stand is None and self.standins:  # an array of the run's shape, for its shape alone
            stand = self.standins[0]
            tail.append(assign(stand, self.empty()))
        # a stand-in repeating one zero, not another name for `stand`: a name the loop around
        # the run carries to its adjoint, rebound every iteration, then counts no references
        # (an RK4 step on 8 elements: 20 such names, 3.8 ms of 11 in 10^4 steps)
        stub = ast.Call(load("shape_stub"), [load(stand)], [])
        tail += aliases + [assign(n, clone(stub)) for n in self.standins if n != stand]
        body = _without_dead_elements(body)
        starts = gather_starts(self) if body else None
        if starts is not None:  # the slices' cotangents gathered, each element once
            return gathered(self, head, body, starts) + casts + tail
        return head + (self.loops(body) if body else []) + casts + tail

    def kind_only(self, target: str) -> bool:
        """Whether a full sum's value is read only for its kind (a jitted grad's output, which
        `grad_seed` and `output_kind` read for its dtype alone): then no sum is computed, where
        its accumulators (an array of columns) kept the loop nest computing it alive."""
        kinds = self.f.kind_reads.get(target, 0)
        return kinds > 0 and self.f.value_reads[target] - self.inside_values[target] == kinds

    def kind_stand_in(self) -> ast.expr:
        """A number of the sum's kind, `in_dtype_of(0.0, a)`: what the sum would be cast to."""
        return ast.Call(load("in_dtype_of"), [ast.Constant(0.0), load(self.dtype)], [])

    def columns(self, target: str) -> str | None:
        """The name of the float64 array a full sum over two axes or more adds each column
        into, `s_columns[i1] += t_i` (a sum per element of the innermost loop, which LLVM
        vectorises, where one number added to in order runs at the speed of an addition's
        latency), at the function's top level; None for one accumulator (one loop, or in a
        loop's body, where an array a step would cost more than it saves)."""
        last = self.run.rank - 1
        if self.run.rank < 2 or self.run.depth or last in self.run.units:
            return None
        return self.f.fresh(f"{target}_columns")

    def lanes(self, target: str) -> str | None:
        """The name of the float64 array of LANE_COUNT sums a full sum of a one-loop run
        adds into, the loop blocked (`s_lanes[i0_lane] += t_i`): a loop LLVM vectorises, and
        each lane a sum of 1/LANE_COUNT of the elements (more accurate than one accumulator);
        None elsewhere. (In a loop's body, hoist.py makes the lanes once before the loop.)"""
        if self.run.rank != 1 or self.run.units:
            return None
        if self.lane is None:
            self.lane = self.f.fresh(f"{self.index[0]}_lane")
        return self.f.fresh(f"{target}_lanes")

    def scatter(self, stmt, head: list, body: list) -> tuple[list, list]:
        """`head` and `body` with a scatter's zeroed array (for `getitem_vjp`), its slices'
        starts, and its addition into the element an iteration reaches (a store's write)."""
        stored = self.run.stores.get(id(stmt))
        scatter = stored or self.run.scatters[id(stmt)]
        source = scatter.target if stored else self.run.sliced[scatter.target]
        if scatter.source is not None and not stored:
            zeros = ast.Call(
                ast.Attribute(load("np"), "zeros", ast.Load()), self.typed(_shape(source)), []
            )
            head = head + [origin(assign(scatter.target, zeros), stmt)]
        index = [None if k in self.run.units else self.index[k] for k in range(self.run.rank)]
        starts, element = position(scatter, source, index, self.f.fresh)
        head = head + [origin(s, stmt) for s in starts]
        value = self.translate(scatter.value)
        if stored:
            return head, body + [origin(ast.Assign([element], value), stmt)]
        added = ast.AugAssign(element, ast.Add(), value)
        return head, body + [origin(added, stmt)]

    def loops(self, body: list) -> list:
        """`body` in a loop nest over the run's shape, the last axis innermost (none along its
        axes of length 1); blocked in LANE_COUNT elements where sums add into lanes."""
        if self.lane is not None:
            return self.blocked(body)
        for k in reversed(range(self.run.rank)):
            if k in self.run.units:
                continue
            iterate = ast.Call(load("range"), [clone(self.sizes[k])], [])
            body = [ast.For(store(self.index[k]), iterate, body, [])]
        return body

    def blocked(self, body: list) -> list:
        """`body` over whole blocks of LANE_COUNT elements, `for i0 in range(i0_start, i0_start
        + 32)` (a loop of a known count, which LLVM vectorises; with `min(32, n - i0_start)` it
        ran at half the speed), then over the elements after the last block; the lane is `i0`
        less its block's start (an index assigned in the loop, `i0 = i0_start + i0_lane`, made
        GMM's whole gradient 2.5x slower)."""
        index, size = self.index[0], self.sizes[0]
        start, whole = self.f.fresh(f"{index}_start"), self.f.fresh(f"{index}_blocks_end")
        count = ast.Constant(LANE_COUNT)
        end = ast.BinOp(clone(size), ast.Sub(), ast.BinOp(clone(size), ast.Mod(), count))
        stop = ast.BinOp(load(start), ast.Add(), clone(count))
        inner = ast.For(
            store(index), _range(load(start), stop), _lanes(body, self.lane, index, start), []
        )
        rest = _lanes(body, self.lane, index, whole)
        return [
            assign(whole, end),
            ast.For(store(start), _range(ast.Constant(0), load(whole), clone(count)), [inner], []),
            ast.For(store(index), _range(load(whole), clone(size)), rest, []),
        ]


def _range(*args) -> ast.expr:
    return ast.Call(load("range"), list(args), [])


def _lanes(body: list, lane: str, index: str, start: str) -> list:
    """Copies of `body` with the placeholder `lane` read as `i0 - start`."""
    return [_Lane(lane, index, start).visit(clone(stmt)) for stmt in body]


class _Lane(ast.NodeTransformer):
    def __init__(self, lane: str, index: str, start: str):
        self.lane, self.index, self.start = lane, index, start

    def visit_Name(self, node):
        if node.id != self.lane:
            return node
        return ast.BinOp(load(self.index), ast.Sub(), load(self.start))


def _without_dead_elements(body: list) -> list:
    """The loop body without the elements nothing stored or summed reads (a value the run
    computes only for another that later runs recompute)."""
    kept: list = []
    needed: set[str] = set()
    for stmt in reversed(body):
        target = stmt.targets[0] if isinstance(stmt, ast.Assign) else None
        if isinstance(target, ast.Name) and target.id not in needed:
            continue
        kept.append(stmt)
        needed |= {n.id for n in ast.walk(stmt.value) if isinstance(n, ast.Name)}
    return kept[::-1]


def _shape(name: str) -> ast.expr:
    return ast.Attribute(load(name), "shape", ast.Load())


def _varying_power(node: ast.BinOp, rank) -> bool:
    """`t ** j` of a number `j` not written as a constant (`t ** 2` Numba unrolls itself)."""
    return (
        isinstance(node.op, ast.Pow)
        and rank(node.right) == 0
        and not isinstance(node.right, (ast.Constant, ast.UnaryOp))
    )
