"""Expressions flattened to one operation each: the operands of an operation that depends on the
`wrt` inputs become atoms (a name, a constant, a cheap expression of constants), each other
operand a temporary named after the assignment and the operation (`loss_sub`, `loss_pow`); an
expression that does not depend on them stays as written (`rename`d to the current names).

Consumes user expressions; produces, through `append`, the statements computing them, and the
expression left. A call of a user's function is inlined (inline.py), `a if c else b` becomes an
`if` statement (control.py).
"""

from __future__ import annotations

import ast

import numpy as np

from ... import ir
from ...rules.helpers import RUNTIME
from ...astcopy import walk_nodes
from ...errors import UnsupportedSyntaxError
from ..random_draws import refuse_random_draw
from ..reserved import STATIC_ATTRS
from .calls import array_literals, refuse_factory
from .flatten import Flattener
from .memory import snapshot_of

_OPNAMES = {
    ast.Add: "add",
    ast.Sub: "sub",
    ast.Mult: "mul",
    ast.Div: "div",
    ast.Pow: "pow",
    ast.MatMult: "matmul",
    ast.Mod: "mod",
    ast.FloorDiv: "floordiv",
    ast.USub: "neg",
    ast.UAdd: "pos",
    ast.Not: "not",
}


class Expressions(Flattener):
    """Flattening of expressions (see the module docstring)."""

    def inline(self, node: ast.Call, base: str) -> ast.expr:
        raise NotImplementedError  # inline.py

    def if_(self, node: ast.If) -> None:
        raise NotImplementedError  # control.py

    # ------------------------------------------------------------------ dependence
    def mentions_varied(self, node: ast.AST) -> bool:
        """Whether `node` reads a value that may depend on the wrt inputs. Within one expression
        the answer for each node is kept (`expr` asks it at every level: a 1,000-term sum, a
        1,000-deep tree, would otherwise be walked 1,000 times)."""
        memo = self._varied_memo
        if memo is None:
            return self._mentions_varied(node)
        known = memo.get(id(node))
        if known is not None and known[0] is node:
            return known[1]
        answer = self._mentions_varied(node)
        memo[id(node)] = (node, answer)
        return answer

    def _mentions_varied(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Attribute) and node.attr in STATIC_ATTRS:
            return False
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id not in self.locals
            and node.func.id in ("len", "isinstance")
        ):
            return False
        if isinstance(node, ast.Name) and node.id in self.local_funcs:
            return self.closure_varied(self.local_funcs[node.id])
        if isinstance(node, ast.Name):
            return self.env.get(node.id, node.id) in self.varied or node.id in self.loop_varied
        if isinstance(node, ast.Call) and ir.tree_call(node.func):
            return True  # a call passing trees' leaves is always inlined (treeparams.py)
        return any(self.mentions_varied(c) for c in ast.iter_child_nodes(node))

    def closure_varied(self, fn: ast.AST) -> bool:
        """Whether a nested def or lambda reads a value that may depend on the wrt inputs (a
        name of this function's that varies, or another such function): `rhs` in
        `np.sum(rhs(y0))` or `rk4(rhs, y0)`, where only the closure reads the varied `a`."""
        if id(fn) in self._closures_seen:
            return False  # a function calling itself: its other reads decide
        self._closures_seen.add(id(fn))
        try:
            return any(self.mentions_varied(n) for n in ast.walk(fn) if isinstance(n, ast.Name))
        finally:
            self._closures_seen.discard(id(fn))

    def reads_local_function(self, node: ast.AST) -> bool:
        """Whether `node` names a nested def (to call it or pass it on): it has no name outside,
        so its calls are inlined even where nothing in them varies."""
        return any(isinstance(n, ast.Name) and n.id in self.local_funcs for n in ast.walk(node))

    def atom_varied(self, node: ast.expr) -> bool:
        return any(isinstance(n, ast.Name) and n.id in self.varied for n in walk_nodes(node))

    def is_atom(self, node: ast.expr) -> bool:
        if isinstance(node, (ast.Name, ast.Constant)):
            return True
        if isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant):
            return True
        if isinstance(node, (ast.Tuple, ast.List)):
            return all(self.is_atom(e) for e in node.elts)
        if isinstance(node, ast.Attribute):
            return node.attr in STATIC_ATTRS or self.resolver.resolve(node) is not None
        if isinstance(node, ast.Subscript):  # x.shape[0]
            return (
                isinstance(node.value, ast.Attribute)
                and node.value.attr in STATIC_ATTRS
                and self.is_atom(node.slice)
            )
        return False

    def is_cheap(self, node: ast.expr) -> bool:
        return not any(
            isinstance(n, (ast.Call, ast.IfExp))
            or (isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult))
            for n in walk_nodes(node)
        )

    def atom(self, node: ast.expr, base: str) -> ast.expr:
        """An operand: a name, a constant or a cheap expression of constants; else a temp."""
        if self.is_atom(node) or (not self.mentions_varied(node) and self.is_cheap(node)):
            return self.rename(node)
        rhs = self.expr(node, base)
        inlined = ir.inlined(rhs)
        if isinstance(rhs, ast.Name) and inlined and self.memory.written_base(inlined.alias):
            rhs = snapshot_of(rhs)  # an inlined call's view of an array written in place
        elif isinstance(rhs, (ast.Name, ast.Tuple)) and inlined:
            return rhs
        elif self.memory.views_written(node):
            # the array is written in place later: keep this value, not a view of it
            if (taken := self.snapshot_taken(rhs)) is not None:
                return ast.Name(taken, ast.Load())
            rhs = snapshot_of(rhs)
        name = self.names.fresh(f"{base}_{self.opname(node)}")
        stmt = self.append(name, rhs, self.mentions_varied(node) or self.atom_varied(rhs))
        self.took_snapshot(name, stmt)
        if inlined and inlined.alias:  # (its snapshot) in NumPy that memory itself
            self.memory.results[name] = inlined.alias
        return ast.Name(name, ast.Load())

    def opname(self, node: ast.expr) -> str:
        return _opname(node)

    def expr(self, node: ast.expr, base: str) -> ast.expr:
        """`node` with its operands reduced to atoms; the operation itself is kept."""
        if self._varied_memo is not None:
            return self._expr(node, base)
        # no name of the expression is rebound while it is reduced: what it reads is fixed
        self._varied_memo = {}
        try:
            return self._expr(node, base)
        finally:
            self._varied_memo = None

    def _expr(self, node: ast.expr, base: str) -> ast.expr:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Call):  # `make(a)(y)`
            refuse_factory(self.parsed, self.inlinable(node.func.func), node.func)
        if isinstance(node, ast.Call) and self.inlinable(node.func) is not None:
            result = self.inline(node, base)
            self._varied_memo.clear()  # an inlined body may write into the caller's arrays
            return result
        if not self.mentions_varied(node) and not self.reads_local_function(node):
            return self.rename(node)
        loc = node
        if isinstance(node, ast.BinOp):
            node = ast.BinOp(self.atom(node.left, base), node.op, self.atom(node.right, base))
        elif isinstance(node, ast.UnaryOp):
            node = ast.UnaryOp(node.op, self.atom(node.operand, base))
        elif isinstance(node, ast.Call) and self.builtin_of_literal(node):
            return self._expr(self.unpacked(node), base)
        elif isinstance(node, ast.Call):
            node = self.call(node, base)
        elif isinstance(node, ast.Attribute):
            node = ast.Attribute(self.atom(node.value, base), node.attr, ast.Load())
        elif isinstance(node, ast.Subscript) and self.index_join(node) is not None:
            node = self.joined(node, self.index_join(node), base)
        elif isinstance(node, ast.Subscript):
            value = self.atom(node.value, base)
            if isinstance(value, ast.Tuple) and ir.inlined(value):
                return self.element_of(value, node.slice)  # `helper(x)[1]`: its second result
            node = ast.Subscript(value, self.index(node.slice, base), ast.Load())
        elif isinstance(node, ast.Compare):
            node = ast.Compare(
                self.atom(node.left, base), node.ops, [self.atom(c, base) for c in node.comparators]
            )
        elif isinstance(node, (ast.Tuple, ast.List)):
            node = type(node)([self.atom(e, base) for e in node.elts], ast.Load())
        elif isinstance(node, ast.Name):
            node = self.rename(node)
        elif isinstance(node, ast.IfExp):
            return self.if_expression(node, base)
        elif isinstance(node, ast.Dict):
            raise self.dict_refused(node)
        else:
            what = {
                ast.Lambda: "lambdas",
                ast.BoolOp: "`and`/`or` on differentiated values",
                ast.ListComp: "list comprehensions",
                ast.GeneratorExp: "generators",
                ast.Starred: "starred arguments",
            }.get(type(node), type(node).__name__)
            raise self.unsupported(node, what)
        return ast.copy_location(node, loc)

    def dict_refused(self, node: ast.Dict):
        """A dict literal holding differentiated values that `sugar.py` could not split into
        names (a local read only by constant keys): most often a helper's `(loss, aux)` return,
        inlined, whose dict the caller drops."""
        name = self.parsed.name
        return self.parsed.error(
            UnsupportedSyntaxError,
            f"s2sad cannot differentiate the dict `{self.parsed.text_of(node)}` (in `{name}`), a "
            "dict of differentiated values used other than by constant keys: it follows one only "
            'as a local read by constant keys (`d = {"a": x}; d["a"]`), not one that a helper '
            "the differentiated code calls returns (in a tuple), even where the caller drops it",
            node,
            hint="keep such values in names or a tuple (`return loss, (norm,)`); a helper "
            "returning `(value, aux_dict)` is differentiated with its dict kept by "
            "`s2sad.grad(helper, has_aux=True)` called outside the differentiated function",
        )

    def if_expression(self, node: ast.IfExp, base: str) -> ast.expr:
        """`a if c else b` becomes an `if` statement assigning one name."""
        name = self.names.fresh(f"{base}_pick")
        self.locals.add(name)
        stmt = ast.If(
            node.test,
            [ast.Assign([ast.Name(name, ast.Store())], node.body)],
            [ast.Assign([ast.Name(name, ast.Store())], node.orelse)],
        )
        for child in (stmt, stmt.body[0], stmt.orelse[0]):
            ir.mark_synthetic(child)
        self.if_(stmt)
        return ast.Name(self.env[name], ast.Load())

    def call(self, node: ast.Call, base: str) -> ast.Call:
        func = node.func
        if isinstance(func, ast.Name) and func.id in self.locals:
            raise self.local_callee(func)
        if isinstance(func, ast.Attribute) and self.resolver.resolve(func) is None:
            refuse_random_draw(self.parsed, node, None)
            new_func = ast.Attribute(self.atom(func.value, base), func.attr, ast.Load())
        elif self.array_of_literal(node):
            return self.stacked(node.args[0], node.keywords, base)
        else:
            new_func = self.rename(func)
            ir.set_callee(new_func, self.resolver.resolve(func))
            self.resolver.check_getattr(node, ir.callee(new_func))
            refuse_random_draw(self.parsed, node, ir.callee(new_func))
        if any(isinstance(a, ast.Starred) for a in node.args):
            raise self.unsupported(node, "starred arguments (*args) in a call")
        if any(k.arg is None for k in node.keywords):
            raise self.unsupported(node, "**kwargs in a call")
        # a list literal a rule reads as one array (np.mean([a, b])): made one, as np.array would
        literals = array_literals(ir.callee(new_func), node.args, node.keywords)
        args = [self.sequence(a, base, id(a) in literals) for a in node.args]
        keywords = [
            ast.keyword(k.arg, self.sequence(k.value, base, id(k.value) in literals))
            for k in node.keywords
        ]
        return ast.Call(new_func, args, keywords)

    def local_callee(self, func: ast.Name):
        """The refusal of a call of a function held in a variable (s2sad cannot tell which)."""
        name = self.parsed.original.get(func.id, func.id)
        if func.id in self.parsed.params and not self.inlined:
            what = (
                f"`{name}` is a parameter of {self.parsed.name} that the call does not pass a "
                "function s2sad can read (a def, a lambda, a closure or a NumPy function)"
            )
            hint = (
                "pass a function, or wrap a method or functools.partial in one "
                "(`lambda y: model.rhs(y)`)"
            )
        else:
            what = (
                f"s2sad cannot tell which function `{name}` holds: a function passed as an "
                "argument must be named at the call (a module-level function, or a closure a "
                "factory returned, held in a module-level name)"
            )
            hint = (
                "pass the function by its module-level name, or as an argument of the "
                "differentiated function"
            )
        return self.parsed.error(UnsupportedSyntaxError, what, func, hint=hint)

    def builtin_of_literal(self, node: ast.Call) -> bool:
        """The builtin `sum([a, b, c])` (or `sum((a, b), start)`, `start=`), `max([a, b])`,
        `min((a, b))`."""
        callee = self.resolver.resolve(node.func)
        if not node.args or not isinstance(node.args[0], (ast.List, ast.Tuple)):
            return False
        if callee is sum:
            starts = len(node.args) - 1 + len(node.keywords)
            return starts <= 1 and all(k.arg == "start" for k in node.keywords)
        return (
            (callee is max or callee is min)
            and len(node.args) == 1
            and not node.keywords
            and len(node.args[0].elts) > 1
        )

    def unpacked(self, node: ast.Call) -> ast.expr:
        """sum([a, b, c], start) as ((start + a) + b) + c (start: 0 unless given), as Python adds
        them; max([a, b]) as max(a, b)."""
        if self.resolver.resolve(node.func) is not sum:
            return ast.copy_location(ast.Call(node.func, list(node.args[0].elts), []), node)
        starts = node.args[1:] + [k.value for k in node.keywords]
        total = starts[0] if starts else ast.Constant(0)
        for e in node.args[0].elts:
            total = ast.copy_location(ast.BinOp(total, ast.Add(), e), node)
        return total

    def index_join(self, node: ast.Subscript):
        """np.r_ or np.c_ where `node` is `np.r_[a, b]` (or np.c_) of values alone (no slices, no
        directive strings), else None."""
        if not isinstance(node.value, (ast.Name, ast.Attribute)):
            return None
        obj = self.resolver.resolve(node.value)
        if not any(obj is j for j in (np.r_, np.c_)):
            return None
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if any(
            isinstance(e, ast.Slice) or isinstance(getattr(e, "value", None), str) for e in items
        ):
            return None
        return obj

    def joined(self, node: ast.Subscript, join, base: str) -> ast.Call:
        """`np.r_[a, b]` as np.concatenate of each at least 1-d; `np.c_[a, b]` as c_join."""
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        atoms = [self.atom(e, base) for e in items]
        if join is np.c_:
            func = ast.Name("c_join", ast.Load())
            ir.set_callee(func, RUNTIME["c_join"])
            return ast.Call(func, [ast.List(atoms, ast.Load())], [])
        names = []
        for a in atoms:
            func = ast.Attribute(ast.Name("np", ast.Load()), "atleast_1d", ast.Load())
            ir.set_callee(func, np.atleast_1d)
            call = ast.Call(func, [a], [])
            name = self.names.fresh(f"{base}_row")
            self.append(name, call, self.atom_varied(a))
            names.append(ast.Name(name, ast.Load()))
        func = ast.Attribute(ast.Name("np", ast.Load()), "concatenate", ast.Load())
        ir.set_callee(func, np.concatenate)
        return ast.Call(func, [ast.List(names, ast.Load())], [])

    def array_of_literal(self, node: ast.Call) -> bool:
        """`np.array([[a, b], [c, d]])` (or np.asarray) of differentiated values."""
        callee = self.resolver.resolve(node.func)
        return (
            any(callee is f for f in (np.array, np.asarray))
            and len(node.args) == 1
            and isinstance(node.args[0], (ast.List, ast.Tuple))
            and all(k.arg == "dtype" for k in node.keywords)
        )

    def stacked(self, literal, keywords, base: str) -> ast.Call:
        """A (nested) list literal made an array by np.stack, level by level: the same array
        as np.array makes of it, by a call with a rule."""
        elts = []
        for e in literal.elts:
            if isinstance(e, (ast.List, ast.Tuple)):
                row = self.stacked(e, [], base)
                name = self.names.fresh(f"{base}_row")
                self.append(name, row, self.atom_varied(row))
                elts.append(ast.Name(name, ast.Load()))
            else:
                elts.append(self.atom(e, base))
        func = ast.Attribute(ast.Name("np", ast.Load()), "stack", ast.Load())
        ir.set_callee(func, np.stack)
        keywords = [ast.keyword(k.arg, self.atom(k.value, base)) for k in keywords]
        if keywords:  # np.array casts to its dtype as `unsafe` does (floats to ints truncated)
            keywords.append(ast.keyword("casting", ast.Constant("unsafe")))
        return ast.Call(func, [ast.List(elts, ast.Load())], keywords)

    def sequence(self, node: ast.expr, base: str, array: bool = False) -> ast.expr:
        """A call argument; a list or tuple literal keeps its shape with atom elements, or is
        stacked into one array (`array`, see `stacked`)."""
        if isinstance(node, (ast.List, ast.Tuple)) and self.mentions_varied(node):
            if array:
                stacked = self.stacked(node, [], base)
                name = self.names.fresh(f"{base}_array")
                self.append(name, stacked, self.atom_varied(stacked))
                return ast.Name(name, ast.Load())
            return type(node)([self.atom(e, base) for e in node.elts], ast.Load())
        return self.atom(node, base)

    def element_of(self, value: ast.Tuple, index: ast.expr) -> ast.expr:
        """The element `value[index]` names, `value` the tuple of an inlined helper's results
        and `index` a constant integer (else refused)."""
        try:
            k = ast.literal_eval(index)
        except ValueError:
            k = None
        if type(k) is not int or not -len(value.elts) <= k < len(value.elts):
            raise self.parsed.error(
                UnsupportedSyntaxError,
                f"s2sad indexes the tuple a helper returns only by a constant integer from "
                f"{-len(value.elts)} to {len(value.elts) - 1}",
                index,
                hint="unpack the helper's results (`a, b = helper(x)`) and pick one",
            )
        element = value.elts[k]
        if isinstance(element, ast.Name):  # with what it may share with the caller's arrays
            alias = ir.inlined(value).elements[k][1]
            element = ast.Name(element.id, ast.Load())
            ir.set_inlined(element, ir.Inlined(alias=alias or None))
        return element

    def index(self, node: ast.expr, base: str) -> ast.expr:
        if isinstance(node, ast.Slice):
            parts = [
                None if p is None else self.atom(p, base)
                for p in (node.lower, node.upper, node.step)
            ]
            return ast.Slice(*parts)
        if isinstance(node, ast.Tuple):
            return ast.Tuple([self.index(e, base) for e in node.elts], ast.Load())
        return self.atom(node, base)


def _opname(node: ast.expr) -> str:
    """The word a value's name takes from its operation (`y_add`, `y_sum`, `y_item`)."""
    if isinstance(node, (ast.BinOp, ast.UnaryOp)):
        return _OPNAMES.get(type(node.op), "op")
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name) and func.id == "in_place_kind":
            return "stored"  # (`y[i] op= v`'s value, normalize/statements.py)
        return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "call")
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):
        return "item"
    if isinstance(node, ast.Compare):
        return "cmp"
    return "tmp"
