"""Python written as people write it, rewritten into the plainer Python the flattener reads,
before it reads a function's body (each body, the inlined ones too):

- `with np.errstate(...):` of settings that only decide whether NumPy warns ('ignore', 'warn')
  becomes its body: the body is differentiated as if the `with` were absent (NumPy may then
  warn where the user's code was quiet; other settings are refused);
- `try:` becomes its body, then its `else:` and `finally:` blocks: the derivative is that of
  the path on which the body does not raise (the handlers are not differentiated);
- a walrus (`(n := len(x))`) becomes an assignment before its statement;
- `getattr(x, "name")`, of a literal name and without a default, becomes `x.name`;
- a dict held in a local and read by constant keys (`d = {"a": x, "b": y}; d["a"]`) becomes one
  local per key (`d_a`, `d_b`); a key no literal or write gives is refused (a key that a later
  literal leaves out keeps its value, where Python would raise KeyError).

What cannot be rewritten so is left as it is, and the flattener refuses it at its line.
"""

from __future__ import annotations

import ast
import builtins
import copy

import numpy as np

from ... import ir
from ...errors import UnsupportedSyntaxError

# np.errstate's settings that change only whether NumPy warns: dropping them keeps the values
_QUIET = {"ignore", "warn"}
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_LAZY = (ast.BoolOp, ast.IfExp, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


class Sugar:
    """The rewrites of one body: `resolve` names what a call's function is, `fresh` gives a new
    local name, `parsed` words the refusals."""

    def __init__(self, parsed, resolve, fresh):
        self.parsed = parsed
        self.resolve = resolve
        self.fresh = fresh
        self.made: set[str] = set()  # the locals the rewrites made

    def body(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        stmts = [_Getattrs(self.resolve).visit(s) for s in self.block(stmts)]
        return _Dicts(self).rewrite(stmts)

    # ------------------------------------------------------------------ statements
    def block(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for stmt in stmts:
            out += self.statement(stmt)
        return out

    def statement(self, stmt: ast.stmt) -> list[ast.stmt]:
        if isinstance(stmt, ast.With) and self.quiet_context(stmt):
            return self.block(stmt.body)
        if isinstance(stmt, ast.Try):
            return self.block(stmt.body) + self.block(stmt.orelse) + self.block(stmt.finalbody)
        if isinstance(stmt, _SCOPES):
            return [stmt]
        if isinstance(stmt, (ast.If, ast.For, ast.While)):
            stmt = copy.copy(stmt)
            if isinstance(stmt, ast.While) and _walruses(stmt.test):
                raise self.error(_walruses(stmt.test)[0], "a walrus in a `while` condition")
            head = stmt.test if isinstance(stmt, (ast.If, ast.While)) else stmt.iter
            before, head = self.hoisted(head)
            if isinstance(stmt, ast.For):
                stmt.iter = head
            else:
                stmt.test = head
            stmt.body = self.block(stmt.body)
            stmt.orelse = self.block(stmt.orelse)
            return before + [stmt]
        before, stmt = self.hoisted(stmt)
        return before + [stmt]

    def quiet_context(self, stmt: ast.With) -> bool:
        """Whether every context of a `with` is np.errstate(...) of settings that only decide
        whether NumPy warns (refused where a setting raises or calls a function)."""
        for item in stmt.items:
            call = item.context_expr
            if (
                not (isinstance(call, ast.Call) and self.resolve(call.func) is np.errstate)
                or item.optional_vars is not None
            ):
                return False
            for k in call.keywords:
                if not (isinstance(k.value, ast.Constant) and k.value.value in _QUIET):
                    raise self.parsed.error(
                        UnsupportedSyntaxError,
                        f"s2sad keeps np.errstate only for settings that decide whether NumPy "
                        f"warns ('ignore', 'warn'), not `{ast.unparse(k)}`",
                        stmt,
                        hint="check the values with an `if` and `raise` instead",
                    )
            if call.args:
                return False
        return True

    # ------------------------------------------------------------------ walrus
    def hoisted(self, node):
        """`node` with each walrus replaced by its name, and the assignments to put before it,
        in the order Python evaluates them."""
        found = _walruses(node)
        if not found:
            return [], node
        for lazy in (n for n in ast.walk(node) if isinstance(n, _LAZY)):
            inner = _walruses(lazy)
            if inner:
                raise self.error(
                    inner[0],
                    "a walrus inside `and`/`or`, `... if ... else ...` or a comprehension",
                )
        for w in found:  # hoisted, a read of its name before it would see the new value
            inside = {id(n) for n in ast.walk(w)}
            for n in ast.walk(node):
                if (
                    isinstance(n, ast.Name)
                    and n.id == w.target.id
                    and id(n) not in inside
                    and (n.lineno, n.col_offset) < (w.lineno, w.col_offset)
                ):
                    raise self.error(w, "a walrus whose name its statement reads before it")
        before: list[ast.stmt] = []
        node = _Hoist(before).visit(copy.deepcopy(node))
        return before, node

    def error(self, node, what):
        return self.parsed.error(
            UnsupportedSyntaxError,
            f"s2sad cannot differentiate {what} yet",
            node,
            hint="assign the value on a line of its own first",
        )


class _Getattrs(ast.NodeTransformer):
    """`getattr(x, "name")`, a literal name and no default, is `x.name`."""

    def __init__(self, resolve):
        self.resolve = resolve

    def visit_Call(self, node):
        self.generic_visit(node)
        if (
            len(node.args) == 2
            and not node.keywords
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and node.args[1].value.isidentifier()
            and self.resolve(node.func) is builtins.getattr
        ):
            return ast.copy_location(
                ast.Attribute(node.args[0], node.args[1].value, ast.Load()), node
            )
        return node


def _walruses(node) -> list[ast.NamedExpr]:
    """The walruses in `node`'s own code (not in a nested def or lambda), in source order."""
    found = []
    todo = [node]
    while todo:
        n = todo.pop()
        if isinstance(n, ast.NamedExpr):
            found.append(n)
        if n is node or not isinstance(n, _SCOPES):
            todo.extend(reversed(list(ast.iter_child_nodes(n))))
    return found


class _Hoist(ast.NodeTransformer):
    """Each walrus (innermost first, left to right) becomes an assignment put in `before`."""

    def __init__(self, before: list[ast.stmt]):
        self.before = before

    def visit_NamedExpr(self, node: ast.NamedExpr):
        self.generic_visit(node)
        assign = ast.Assign([ast.Name(node.target.id, ast.Store())], node.value)
        self.before.append(ast.copy_location(assign, node))
        return ast.copy_location(ast.Name(node.target.id, ast.Load()), node)

    def visit_Lambda(self, node):
        return node

    visit_FunctionDef = visit_Lambda


# ---------------------------------------------------------------------- dicts


def _key(node: ast.expr):
    """A dict key s2sad follows: a constant string or integer."""
    if isinstance(node, ast.Constant) and type(node.value) in (str, int):
        return node.value
    return None


class _Dicts:
    """Dicts held in locals, read and written by constant keys, as one local per key."""

    def __init__(self, sugar: Sugar):
        self.sugar = sugar

    def rewrite(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        module = ast.Module(stmts, [])
        names = self.followed(module)
        if not names:
            return stmts
        keys: dict[tuple, str] = {}

        def local(name, key):
            if (name, key) not in keys:
                text = str(key)
                base = f"{name}_{text}" if text.isidentifier() else f"{name}_item"
                keys[(name, key)] = self.sugar.fresh(base)
                self.sugar.made.add(keys[(name, key)])
            return keys[(name, key)]

        rewrite = _DictRewrite(names, local)
        new = rewrite.visit(copy.deepcopy(module))
        stored = {
            n.id
            for n in ast.walk(new)
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
        }
        for n, (name, key) in rewrite.reads:
            if n.id not in stored:
                raise self.sugar.parsed.error(
                    UnsupportedSyntaxError,
                    f"the dict `{name}` never has the key {key!r}",
                    n,
                )
        return new.body

    def followed(self, module) -> set[str]:
        """The locals that hold a dict literal of constant keys and are used only by such keys
        (not parameters: a dict argument is a tree of parameters)."""
        candidates: set[str] = set()
        for n in ast.walk(module):
            if (
                isinstance(n, ast.Assign)
                and len(n.targets) == 1
                and isinstance(n.targets[0], ast.Name)
                and isinstance(n.value, ast.Dict)
            ):
                if all(k is not None and _key(k) is not None for k in n.value.keys):
                    candidates.add(n.targets[0].id)
        candidates -= set(self.sugar.parsed.params)
        if not candidates:
            return set()
        ok = set(candidates)
        allowed: set[int] = set()
        for n in ast.walk(module):
            if (
                isinstance(n, ast.Assign)
                and len(n.targets) == 1
                and isinstance(n.targets[0], ast.Name)
            ):
                if isinstance(n.value, ast.Dict):
                    allowed.add(id(n.targets[0]))
            if (
                isinstance(n, ast.Subscript)
                and isinstance(n.value, ast.Name)
                and _key(n.slice) is not None
            ):
                allowed.add(id(n.value))
        for n in ast.walk(module):
            if isinstance(n, ast.Name) and n.id in candidates and id(n) not in allowed:
                ok.discard(n.id)
            if isinstance(n, _SCOPES):  # a nested def or lambda that reads it: left alone
                ok -= {m.id for m in ast.walk(n) if isinstance(m, ast.Name)}
        return ok


class _DictRewrite(ast.NodeTransformer):
    def __init__(self, names: set[str], local):
        self.names = names
        self.local = local
        self.reads: list[tuple] = []  # (the local a read became, (the dict, the key))

    def visit_Assign(self, node: ast.Assign):
        target = node.targets[0] if len(node.targets) == 1 else None
        if (
            isinstance(target, ast.Name)
            and target.id in self.names
            and isinstance(node.value, ast.Dict)
        ):
            values = [self.visit(v) for v in node.value.values]
            out = []
            for k, v in zip(node.value.keys, values):
                name = self.local(target.id, _key(k))
                out.append(ast.copy_location(ast.Assign([ast.Name(name, ast.Store())], v), node))
            made = {a.targets[0].id for a in out}
            read = {n.id for v in values for n in ast.walk(v) if isinstance(n, ast.Name)}
            if made & read:  # all values first, as Python evaluates the literal
                temps = ast.Tuple(
                    [ast.Name(a.targets[0].id, ast.Store()) for a in out], ast.Store()
                )
                both = ast.Assign([temps], ast.Tuple(values, ast.Load()))
                return ast.copy_location(both, node)
            for a in out[1:]:  # one user statement: one comment above them
                ir.mark_synthetic(a)
            return out or ast.copy_location(ast.Pass(), node)  # (`d = {}`)
        self.generic_visit(node)
        return node

    def visit_Subscript(self, node: ast.Subscript):
        if isinstance(node.value, ast.Name) and node.value.id in self.names:
            key = _key(node.slice)
            name = ast.Name(self.local(node.value.id, key), type(node.ctx)())
            if isinstance(node.ctx, ast.Load):
                self.reads.append((name, (node.value.id, key)))
            return ast.copy_location(name, node)
        self.generic_visit(node)
        return node
