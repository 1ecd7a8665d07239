"""Stage 2: A-normal form. One operation per statement, every name assigned once.

Only statements that touch differentiated values are split: an expression that does not depend on
the `wrt` inputs stays as the user wrote it. Temporaries are named after the assignment they come
from and the operation they hold (`loss_sub`, `loss_pow`); a re-assigned name gets a suffix
(`h`, `h_1`). Every statement keeps a link (`.src`) to the user's statement it came from.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from . import runtime
from .errors import NameResolutionError, UnsupportedSyntaxError
from .resolve import Resolver

STATIC_ATTRS = {"shape", "ndim", "size", "dtype"}
_STATIC_CALLS = {len, isinstance}
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
_UNSUPPORTED_STMTS = {
    ast.If: "`if` statements",
    ast.For: "`for` loops",
    ast.While: "`while` loops",
    ast.Try: "`try` blocks",
    ast.With: "`with` blocks",
    ast.Raise: "`raise`",
    ast.FunctionDef: "nested function definitions",
    ast.ClassDef: "class definitions",
    ast.Global: "`global`",
    ast.Nonlocal: "`nonlocal`",
    ast.Import: "imports",
    ast.ImportFrom: "imports",
    ast.Delete: "`del`",
    ast.AsyncFunctionDef: "async functions",
    ast.Match: "`match` statements",
    ast.Break: "`break`",
    ast.Continue: "`continue`",
}
RESERVED = {"np", "math"} | {n for n in dir(runtime) if not n.startswith("_")}


@dataclass
class Normalized:
    stmts: list[ast.stmt]  # ast.Assign with one Name target, or ast.Expr; each has .src
    outputs: list[str]  # the returned names (several for a tuple return)
    tuple_output: bool
    params: list[str]
    varied: set[str]  # names that may depend on the wrt inputs
    taken: set[str] = field(default_factory=set)  # every name in use, for later allocations


def _assigned_names(tree: ast.FunctionDef) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


class NameAllocator:
    def __init__(self, taken: set[str]):
        self.taken = set(taken)

    def fresh(self, base: str) -> str:
        name, k = base, 2
        while name in self.taken:
            name = f"{base}{k}" if not base[-1].isdigit() else f"{base}_{k}"
            k += 1
        self.taken.add(name)
        return name


class Normalizer:
    def __init__(self, parsed, wrt: list[str]):
        self.parsed = parsed
        self.locals = set(parsed.params) | _assigned_names(parsed.tree)
        self.resolver = Resolver(parsed, self.locals)
        all_names = {n.id for n in ast.walk(parsed.tree) if isinstance(n, ast.Name)}
        self.names = NameAllocator(all_names | set(parsed.params) | RESERVED)
        self.env = {p: p for p in parsed.params}  # user name -> current SSA name
        self.varied = set(wrt)
        self.stmts: list[ast.stmt] = []
        self.src: ast.stmt | None = None

    # ------------------------------------------------------------------ statements
    def run(self) -> Normalized:
        body = list(self.parsed.tree.body)
        if (
            body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            body = body[1:]  # docstring
        if not body or not isinstance(body[-1], ast.Return) or body[-1].value is None:
            raise self.parsed.error(
                UnsupportedSyntaxError,
                f"{self.parsed.name} must end with `return <value>`",
                body[-1] if body else None,
                hint="s2sad differentiates the returned value",
            )
        for node in body[:-1]:
            self.src = node
            self.statement(node)
        self.src = body[-1]
        outputs, is_tuple = self.returned(body[-1].value)
        return Normalized(
            self.stmts, outputs, is_tuple, list(self.parsed.params), self.varied, self.names.taken
        )

    def statement(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Assign):
            if len(node.targets) != 1:
                first = self.assign_target(node.targets[0], node.value)
                for target in node.targets[1:]:
                    self.assign_target(target, first)
                return
            self.assign_target(node.targets[0], node.value)
        elif isinstance(node, ast.AnnAssign):
            if node.value is not None:
                self.assign_target(node.target, node.value)
        elif isinstance(node, ast.AugAssign):
            if not isinstance(node.target, ast.Name):
                raise self.unsupported(node, "augmented assignment to a subscript or attribute")
            load = ast.Name(node.target.id, ast.Load())
            self.assign_target(
                node.target, ast.copy_location(ast.BinOp(load, node.op, node.value), node)
            )
        elif isinstance(node, ast.Expr):
            if not (isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
                self.emit_expr(node)
        elif isinstance(node, ast.Assert):
            self.emit_expr(node)
        elif isinstance(node, ast.Pass):
            pass
        elif isinstance(node, ast.Return):
            raise self.unsupported(node, "a `return` before the end of the function")
        else:
            what = _UNSUPPORTED_STMTS.get(type(node), type(node).__name__)
            raise self.unsupported(node, what)

    def unsupported(self, node: ast.AST, what: str):
        return self.parsed.error(
            UnsupportedSyntaxError,
            f"s2sad cannot differentiate {what} yet",
            node,
            hint="rewrite this part in straight-line NumPy, or give the function containing it "
            "a rule with s2sad.register_vjp",
        )

    def emit_expr(self, node: ast.stmt) -> None:
        new = self.rename(node)
        new.src = self.src
        self.stmts.append(new)

    def assign_target(self, target: ast.expr, value: ast.expr) -> ast.expr:
        """Assign `value` to `target`; returns an atom holding the value."""
        if isinstance(target, ast.Name):
            rhs = self.expr(value, target.id)
            return self.bind(target.id, rhs, varied=self.mentions_varied(value))
        if isinstance(target, (ast.Tuple, ast.List)) and all(
            isinstance(t, ast.Name) for t in target.elts
        ):
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
                atoms = [self.atom(v, t.id) for t, v in zip(target.elts, value.elts)]
                for t, a in zip(target.elts, atoms):
                    self.bind(t.id, a, varied=self.atom_varied(a))
                return ast.Tuple(atoms, ast.Load())
            whole = self.atom(value, "_".join(t.id for t in target.elts))
            if not self.atom_varied(whole):
                stmt = ast.Assign(
                    [
                        ast.Tuple(
                            [ast.Name(self.rebind(t.id), ast.Store()) for t in target.elts],
                            ast.Store(),
                        )
                    ],
                    whole,
                )
                stmt.src = self.src
                self.stmts.append(stmt)
                return whole
            for i, t in enumerate(target.elts):
                item = ast.Subscript(whole, ast.Constant(i), ast.Load())
                self.bind(t.id, item, varied=True)
            return whole
        raise self.unsupported(self.src, "assignment to a subscript or attribute")

    def returned(self, value: ast.expr) -> tuple[list[str], bool]:
        base = self.parsed.name
        if isinstance(value, ast.Tuple):
            outs = []
            for i, elt in enumerate(value.elts):
                outs.append(self.named(elt, f"{base}{i}"))
            return outs, True
        return [self.named(value, base)], False

    def named(self, value: ast.expr, base: str) -> str:
        if isinstance(value, ast.Name) and value.id in self.locals:
            return self.load(value).id
        rhs = self.expr(value, base)
        name = self.names.fresh(base)
        self.append(name, rhs, self.mentions_varied(value))
        return name

    def rebind(self, user_name: str) -> str:
        """A fresh SSA name for the next value of `user_name`."""
        name = user_name if user_name not in self.env else self.names.fresh(f"{user_name}_1")
        self.env[user_name] = name
        return name

    def bind(self, user_name: str, rhs: ast.expr, varied: bool) -> ast.Name:
        name = self.rebind(user_name)
        self.append(name, rhs, varied)
        return ast.Name(name, ast.Load())

    def append(self, name: str, rhs: ast.expr, varied: bool) -> None:
        stmt = ast.Assign([ast.Name(name, ast.Store())], rhs)
        stmt.src = self.src
        self.stmts.append(stmt)
        if varied:
            self.varied.add(name)
        else:
            self.varied.discard(name)

    # ------------------------------------------------------------------ expressions
    def mentions_varied(self, node: ast.AST) -> bool:
        """Whether `node` reads a value that may depend on the wrt inputs."""
        if isinstance(node, ast.Attribute) and node.attr in STATIC_ATTRS:
            return False
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id not in self.locals
            and node.func.id in ("len", "isinstance")
        ):
            return False
        if isinstance(node, ast.Name):
            return self.env.get(node.id, node.id) in self.varied
        return any(self.mentions_varied(c) for c in ast.iter_child_nodes(node))

    def atom_varied(self, node: ast.expr) -> bool:
        return any(isinstance(n, ast.Name) and n.id in self.varied for n in ast.walk(node))

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
            isinstance(n, ast.Call) or (isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult))
            for n in ast.walk(node)
        )

    def atom(self, node: ast.expr, base: str) -> ast.expr:
        """An operand: a name, a constant or a cheap expression of constants; else a temp."""
        if self.is_atom(node) or (not self.mentions_varied(node) and self.is_cheap(node)):
            return self.rename(node)
        rhs = self.expr(node, base)
        name = self.names.fresh(f"{base}_{self.opname(node)}")
        self.append(name, rhs, self.mentions_varied(node))
        return ast.Name(name, ast.Load())

    def opname(self, node: ast.expr) -> str:
        if isinstance(node, (ast.BinOp, ast.UnaryOp)):
            return _OPNAMES.get(type(node.op), "op")
        if isinstance(node, ast.Call):
            func = node.func
            return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "call")
        if isinstance(node, ast.Attribute):
            return node.attr
        if isinstance(node, ast.Subscript):
            return "item"
        if isinstance(node, ast.Compare):
            return "cmp"
        return "tmp"

    def expr(self, node: ast.expr, base: str) -> ast.expr:
        """`node` with its operands reduced to atoms; the operation itself is kept."""
        if not self.mentions_varied(node):
            return self.rename(node)
        loc = node
        if isinstance(node, ast.BinOp):
            node = ast.BinOp(self.atom(node.left, base), node.op, self.atom(node.right, base))
        elif isinstance(node, ast.UnaryOp):
            node = ast.UnaryOp(node.op, self.atom(node.operand, base))
        elif isinstance(node, ast.Call):
            node = self.call(node, base)
        elif isinstance(node, ast.Attribute):
            node = ast.Attribute(self.atom(node.value, base), node.attr, ast.Load())
        elif isinstance(node, ast.Subscript):
            node = ast.Subscript(
                self.atom(node.value, base), self.index(node.slice, base), ast.Load()
            )
        elif isinstance(node, ast.Compare):
            node = ast.Compare(
                self.atom(node.left, base), node.ops, [self.atom(c, base) for c in node.comparators]
            )
        elif isinstance(node, (ast.Tuple, ast.List)):
            node = type(node)([self.atom(e, base) for e in node.elts], ast.Load())
        elif isinstance(node, ast.Name):
            node = self.rename(node)
        else:
            what = {
                ast.IfExp: "conditional expressions (`a if c else b`)",
                ast.Lambda: "lambdas",
                ast.BoolOp: "`and`/`or` on differentiated values",
                ast.ListComp: "list comprehensions",
                ast.GeneratorExp: "generators",
                ast.Starred: "starred arguments",
            }.get(type(node), type(node).__name__)
            raise self.unsupported(node, what)
        return ast.copy_location(node, loc)

    def call(self, node: ast.Call, base: str) -> ast.Call:
        func = node.func
        if isinstance(func, ast.Attribute) and self.resolver.resolve(func) is None:
            new_func = ast.Attribute(self.atom(func.value, base), func.attr, ast.Load())
        else:
            new_func = self.rename(func)
            new_func.s2sad_callee = self.resolver.resolve(func)
        if any(isinstance(a, ast.Starred) for a in node.args):
            raise self.unsupported(node, "starred arguments (*args) in a call")
        args = [self.sequence(a, base) for a in node.args]
        keywords = [ast.keyword(k.arg, self.sequence(k.value, base)) for k in node.keywords]
        if any(k.arg is None for k in node.keywords):
            raise self.unsupported(node, "**kwargs in a call")
        return ast.Call(new_func, args, keywords)

    def sequence(self, node: ast.expr, base: str) -> ast.expr:
        """A call argument; a list or tuple literal keeps its shape with atom elements."""
        if isinstance(node, (ast.List, ast.Tuple)) and self.mentions_varied(node):
            return type(node)([self.atom(e, base) for e in node.elts], ast.Load())
        return self.atom(node, base)

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

    # ------------------------------------------------------------------ names
    def load(self, node: ast.Name) -> ast.Name:
        if node.id not in self.env:
            raise self.parsed.error(
                NameResolutionError,
                f"local variable '{node.id}' is used before it is assigned",
                node,
            )
        return ast.Name(self.env[node.id], ast.Load())

    def rename(self, node: ast.AST) -> ast.AST:
        """A copy of `node` reading current SSA names, with globals spelled canonically."""
        return _Rename(self).visit(_copy(node))


class _Rename(ast.NodeTransformer):
    def __init__(self, norm: Normalizer):
        self.norm = norm

    def visit_Name(self, node: ast.Name) -> ast.expr:
        if node.id in self.norm.locals:
            return ast.copy_location(self.norm.load(node), node)
        obj = self.norm.resolver.resolve(node)
        return ast.copy_location(self.norm.resolver.spelling(node, obj), node)

    def visit_Attribute(self, node: ast.Attribute) -> ast.expr:
        obj = self.norm.resolver.resolve(node)
        if obj is None:
            self.generic_visit(node)
            return node
        return ast.copy_location(self.norm.resolver.spelling(node, obj), node)

    def visit_Call(self, node: ast.Call) -> ast.Call:
        callee = self.norm.resolver.resolve(node.func)
        self.generic_visit(node)
        if callee is not None:
            node.func.s2sad_callee = callee
        return node

    def visit_Lambda(self, node):
        raise self.norm.unsupported(node, "lambdas")


def _copy(node):
    import copy

    return copy.deepcopy(node)


def normalize(parsed, wrt: list[str]) -> tuple[Normalized, Resolver]:
    norm = Normalizer(parsed, wrt)
    return norm.run(), norm.resolver
