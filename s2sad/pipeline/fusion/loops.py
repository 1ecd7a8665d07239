"""The fused branch of a run: allocations for the values read after it, the loop nest with
one statement per original one on elements, and the names standing for values whose shape
alone is read later."""

from __future__ import annotations

import ast

from ...astcopy import clone
from .syntax import SHAPE_ONLY, aliased, assign, empty, load, name_reads, origin, store, text_of


class Emitter:
    """The fused branch of a run: allocations, the loop nest, the shape stand-ins."""

    def __init__(self, run, arrays: list[str]):
        self.run, self.f = run, run.f
        self.anchor = arrays[0]
        self.index = self.f.indices(run.rank)
        inside_values, inside_shapes = name_reads([s for s, _ in run.entries])
        self.final = {}  # name -> the position of its last assignment in the run
        for k, (stmt, kind) in enumerate(run.entries):
            if kind != "sum":
                self.final[stmt.targets[0].id] = k
        self.live, self.standins = set(), []
        for name in self.final:
            # (a value later runs recompute is read there only where they do not run)
            if name not in run.rematerialized and self.f.value_reads[name] > inside_values[name]:
                self.live.add(name)
            elif self.f.shape_reads[name] > inside_shapes[name]:
                self.standins.append(name)
        self.scalar: dict[str, ast.expr] = {}  # a name the run assigned -> its element

    def element(self, name: str) -> ast.expr:
        if name in self.scalar:
            return clone(self.scalar[name])
        if name in self.run.remat:
            return self.translate(self.run.remat[name][1])
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
        name = text_of(node.func)
        if name == "np.where":
            cond, yes, no = (self.translate(a) for a in node.args)
            return ast.IfExp(cond, yes, no)
        if name in SHAPE_ONLY:
            return self.translate(node.args[0])
        return ast.Call(clone(node.func), [self.translate(a) for a in node.args], [])

    def statements(self) -> list:
        run = self.run
        head, body, tail = [], [], []
        allocated, aliases = [], []
        for k, (stmt, kind) in enumerate(run.entries):
            target = stmt.targets[0].id
            value = self.translate(stmt.value.args[0] if kind == "sum" else stmt.value)
            if kind == "sum":
                head.append(origin(assign(target, ast.Constant(0.0)), stmt))
                body.append(origin(ast.AugAssign(store(target), ast.Add(), value), stmt))
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
                head.append(origin(assign(out, empty(self.anchor)), stmt))
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
        tail += aliases + [assign(n, load(stand)) for n in self.standins]
        body = _without_dead_elements(body)
        return head + (self.loops(body) if body else []) + tail

    def loops(self, body: list) -> list:
        """`body` in a loop nest over the anchor's shape, the last axis innermost."""
        for k in reversed(range(self.run.rank)):
            size = ast.Subscript(
                ast.Attribute(load(self.anchor), "shape", ast.Load()), ast.Constant(k), ast.Load()
            )
            iterate = ast.Call(load("range"), [size], [])
            body = [ast.For(store(self.index[k]), iterate, body, [])]
        return body


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
