"""Loops and comprehensions over lists of differentiated values, unrolled where their items
are known when the function is transformed (see lists.py): `for i in range(3)` filling a list,
`for v in parts`, `enumerate`/`zip` of known lists, `for piece in np.split(x, 3)`, and list
comprehensions and generators over the same; `sum(...)` of a generator whose length only the run
time knows becomes a loop adding up.
"""

from __future__ import annotations

import ast

import numpy as np

from ... import ir
from ...astcopy import clone
from ..names import names_stored
from .lists import Lists, mutated_names

MAX_UNROLL = 256  # iterations or elements a list loop or comprehension is unrolled into
_SPLITS = (np.split, np.array_split, np.hsplit, np.vsplit, np.dsplit)


class ListLoops(Lists):
    """The unrolling of loops and comprehensions over lists (see the module docstring)."""

    def items_of(self, it: ast.expr, body_mutates: bool):
        """The items a `for` loop (or comprehension) over `it` binds, each an expression, where
        s2sad unrolls it; else None. A `range` is unrolled only where `body_mutates` a list."""
        if isinstance(it, (ast.List, ast.Tuple)):
            if any(isinstance(e, ast.Starred) for e in it.elts):
                return None
            return list(it.elts)
        if not isinstance(it, ast.Call) or it.keywords:
            return None
        func = it.func
        callee = (
            None
            if isinstance(func, ast.Name) and func.id in self.locals
            else self.resolver.resolve(func)
        )
        if callee is range and body_mutates:
            bounds = [self.constant_int(a) for a in it.args]
            if None in bounds or not bounds:
                return None
            return [ast.Constant(k) for k in range(*bounds)]
        if callee is enumerate and len(it.args) == 1:
            items = self.items_of(it.args[0], False)
            if items is None:
                return None
            return [ast.Tuple([ast.Constant(k), e], ast.Load()) for k, e in enumerate(items)]
        if callee is zip and it.args:
            seqs = [self.items_of(a, False) for a in it.args]
            if any(s is None for s in seqs):
                return None
            return [ast.Tuple(list(t), ast.Load()) for t in zip(*seqs)]
        if any(callee is s for s in _SPLITS) and len(it.args) == 2:
            sections = it.args[1]
            count = self.constant_int(sections)
            if count is None and isinstance(sections, (ast.List, ast.Tuple)):
                count = len(sections.elts) + 1
            if count is None or count < 1:
                return None
            whole = self.atom(it, "pieces")
            if isinstance(whole, ast.Name):
                proxy = self.synthesize("pieces")
                self.env[proxy] = whole.id
                whole = ast.Name(proxy, ast.Load())
            return [ast.Subscript(clone(whole), ast.Constant(k), ast.Load()) for k in range(count)]
        return None

    def unrolled_for(self, node: ast.For, it: ast.expr) -> bool:
        """A loop over known items (`it`, its iterable with known lists expanded), written out
        once per item (see the module docstring)."""
        mutates = bool(mutated_names(node.body) & set(self.lists))
        items = self.items_of(it, mutates) if mutates or self.mentions_varied(it) else None
        if items is None:
            return False
        if node.orelse or any(isinstance(n, (ast.Break, ast.Continue)) for n in ast.walk(node)):
            raise self.list_error(
                node,
                "s2sad unrolls this loop over a list, and cannot unroll `break`, `continue` or "
                "`else` in it",
                "write the loop without them",
            )
        if len(items) > MAX_UNROLL:
            raise self.list_error(
                node,
                f"this loop over a list would be unrolled into {len(items)} copies (at most "
                f"{MAX_UNROLL})",
                "write the values into an array (`y = np.zeros(...)`, then `y[i] = v`)",
            )
        stored = set(names_stored(node.body))
        substituted = False
        for item in items:
            bound = _bind_target(node.target, item)
            substituted = not (
                bound is None or set(bound) & stored or not all(map(_is_item, bound.values()))
            )
            if substituted:  # the loop variable read as the item itself
                body = [_Substitute(bound).visit(clone(stmt)) for stmt in node.body]
            else:
                self.assign_target(node.target, item)
                body = node.body
            saved = self.user_stmt
            for stmt, user in zip(body, node.body):
                if not ir.is_synthetic(user):
                    self.user_stmt = user
                self.statement(stmt)
            self.user_stmt = saved
        if substituted and self.read_after(node, set(bound)):
            self.assign_target(node.target, items[-1])  # as Python leaves it
        return True

    def read_after(self, loop: ast.For, names: set[str]) -> bool:
        """Whether the function reads a loop variable outside every loop binding it."""
        binding = {
            id(n)
            for other in ast.walk(self.parsed.tree)
            if (
                isinstance(other, ast.For)
                and names & set(names_stored([other.target]))
                or isinstance(other, (ast.ListComp, ast.GeneratorExp, ast.SetComp, ast.DictComp))
                and names & set(names_stored([g.target for g in other.generators]))
            )
            for n in ast.walk(other)
        }
        return any(
            isinstance(n, ast.Name) and n.id in names and id(n) not in binding
            for n in ast.walk(self.parsed.tree)
            if isinstance(getattr(n, "ctx", None), ast.Load)
        )

    def comprehension(self, node) -> ast.expr | None:
        """A list comprehension or generator of differentiated values as a list literal; None
        where it is not one of them (or not known, for `sum_of_generator`)."""
        if len(node.generators) != 1:
            return None
        gen = node.generators[0]
        if gen.ifs or gen.is_async or not isinstance(gen.target, (ast.Name, ast.Tuple)):
            return None
        items = self.items_of(gen.iter, True)
        if items is None:
            return None
        if len(items) > MAX_UNROLL:
            raise self.list_error(
                node,
                f"this comprehension would be unrolled into {len(items)} elements (at most "
                f"{MAX_UNROLL})",
                "write the values into an array (`y = np.zeros(...)`, then `y[i] = v`)",
            )
        out = []
        for item in items:
            bound = _bind_target(gen.target, item)
            if bound is None:
                return None
            out.append(_Substitute(bound).visit(clone(node.elt)))
        return ast.List(out, ast.Load())

    def sum_of_generator(self, node: ast.Call) -> ast.expr:
        """`sum(e for i in range(n))` with `n` known at run time only: a loop adding up."""
        gen = node.args[0]
        total = self.synthesize("total")
        index = self.synthesize(f"{gen.generators[0].target.id}_gen")
        elt = _Substitute({gen.generators[0].target.id: ast.Name(index, ast.Load())}).visit(
            clone(gen.elt)
        )
        self.locals.update({total, index})
        start = node.args[1] if len(node.args) > 1 else ast.Constant(0)
        init = ast.Assign([ast.Name(total, ast.Store())], start)
        add = ast.Assign(
            [ast.Name(total, ast.Store())],
            ast.BinOp(ast.Name(total, ast.Load()), ast.Add(), elt),
        )
        loop = ast.For(ast.Name(index, ast.Store()), gen.generators[0].iter, [add], [])
        for stmt in (init, add, loop):
            ast.copy_location(stmt, node)
            ir.mark_synthetic(stmt)
        self.statement(init)
        self.statement(loop)
        return ast.Name(total, ast.Load())


def _is_item(node) -> bool:
    """An item a loop variable can be read as in place: a constant or a name."""
    return isinstance(node, (ast.Constant, ast.Name))


def _bind_target(target, item) -> dict | None:
    if isinstance(target, ast.Name):
        return {target.id: item}
    if isinstance(item, ast.Tuple) and len(item.elts) == len(target.elts):
        out = {}
        for t, e in zip(target.elts, item.elts):
            sub = _bind_target(t, e)
            if sub is None:
                return None
            out.update(sub)
        return out
    return None


class _Substitute(ast.NodeTransformer):
    """A comprehension's variables replaced by the items they take."""

    def __init__(self, values: dict):
        self.values = values

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Load) and node.id in self.values:
            return ast.copy_location(clone(self.values[node.id]), node)
        return node

    def _scope(self, node):  # a nested comprehension rebinding the name keeps its own
        inner = {
            n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)
        }
        saved = self.values
        self.values = {k: v for k, v in saved.items() if k not in inner}
        self.generic_visit(node)
        self.values = saved
        return node

    visit_ListComp = visit_GeneratorExp = visit_SetComp = visit_DictComp = _scope
