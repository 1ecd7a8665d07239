"""Python lists of differentiated values, followed while the flattener knows their contents.

A list that holds a differentiated value (`parts = [a * x, np.sin(x)]`, `out = []` then
`out.append(v)`) is never a run-time object in the generated code: the flattener keeps, per user
name, the list's elements (each an atom), and a read of the list is the list literal of them,
which every rule taking a list already reads (`np.concatenate(parts)`, `np.stack(out)`,
`np.mean(vals)`, `sum(terms)`). `parts[k]` with a constant `k` is that element, `len(parts)` a
constant, `parts[i]` with an index known only at run time an item of `np.stack(parts)`.

A loop that fills such a list, or iterates over one, is unrolled where its trip count is known
when the function is transformed: `for i in range(3)` (literals, globals, `len` of a known
list), `for v in parts`, `enumerate`/`zip` of known lists, `for piece in np.split(x, 3)`. A
comprehension is unrolled the same way, and `sum(...)` of a generator whose length is not known
becomes an accumulating loop (list_loops.py).

Refused, by name: such a list changed inside a branch or a loop of unknown trip count, read
after the branch or loop that built it, returned, or holding a view of an array the function
writes in place (a list holds its elements by reference: the write would show through it).
Lists of values that carry no derivative stay run-time lists, as the user wrote them.
"""

from __future__ import annotations

import ast

import numpy as np

from ... import ir
from ...astcopy import clone
from ...errors import UnsupportedSyntaxError
from ..names import names_stored
from .statements import Statements

_MUTATORS = {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse"}


class _List:
    """A list's contents: `elts` (user-level atoms: proxies or constants) where they are known
    differentiated values; else a run-time list of `count` items (None: unknown)."""

    def __init__(self, level: int, elts=None, count=None, node=None, made=None, tuple_=False):
        self.level, self.elts, self.count, self.node = level, elts, count, node
        self.tuple = tuple_  # a tuple (read as a tuple literal; never changed)
        self.made = made  # a run-time list's statement making it, and the block holding it

    @property
    def varied(self) -> bool:
        return self.elts is not None


def mutated_names(stmts) -> set[str]:
    """Names a block changes in place as a list: `n.append(...)`, `n[...] = v`, `n += ...`."""
    out = set()
    for stmt in stmts:
        for node in ast.walk(stmt):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in _MUTATORS
                and isinstance(node.func.value, ast.Name)
            ):
                out.add(node.func.value.id)
            elif isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
                targets = (
                    node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
                )
                for t in targets:
                    if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
                        out.add(t.value.id)
                    elif isinstance(node, ast.AugAssign) and isinstance(t, ast.Name):
                        out.add(t.id)
    return out


class Lists(Statements):
    """The flattening of lists of differentiated values (see the module docstring)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.lists: dict[str, _List] = {}  # user name -> what the flattener knows of its list
        self.lost_lists: dict[str, _List] = {}  # built in a block since left
        self.list_level = 0

    # ------------------------------------------------------------------ errors
    def list_error(self, node, message: str, hint: str):
        return self.parsed.error(UnsupportedSyntaxError, message, node, hint=hint)

    def refuse_list_results(self, names: list[str]) -> None:
        """A list of differentiated values is not a result s2sad differentiates."""
        for name in names:
            known = self.lists.get(name) or self.lost_lists.get(name)
            if known is not None and known.varied:
                raise self.list_error(
                    known.node or self.user_stmt,
                    "s2sad cannot return a list of differentiated values",
                    "return an array (`np.stack(parts)`) or a tuple (`return a, b`)",
                )

    # ------------------------------------------------------------------ blocks
    def block_into(self, out, stmts) -> None:
        self.list_level += 1
        try:
            super().block_into(out, stmts)
        finally:
            level = self.list_level
            self.list_level -= 1
        for name, known in list(self.lists.items()):
            if known.level >= level and self.list_level > 0:
                del self.lists[name]
                if known.varied:
                    self.lost_lists[name] = known

    def statement(self, node: ast.stmt) -> None:
        if self.parsed.filename.startswith("<s2sad "):
            super().statement(node)  # s2sad's own gradient code: its tapes are run-time lists
            return
        if isinstance(node, ast.For):
            it = self.expand(node.iter)
            if self.unrolled_for(node, it):
                return
            self.before_block(node)
            loop = ast.For(node.target, it, node.body, node.orelse)
            super().statement(ast.copy_location(loop, node))
            return
        if isinstance(node, (ast.If, ast.While)):
            self.before_block(node)
            test = self.expand(node.test)
            super().statement(ast.copy_location(type(node)(test, node.body, node.orelse), node))
            return
        if isinstance(node, (ast.FunctionDef, ast.Pass)):
            super().statement(node)
            return
        if self.list_statement(node):
            return
        node = self.expand(node)
        if isinstance(node, ast.Assign):
            for target in node.targets:
                for n in ast.walk(target):
                    if isinstance(n, ast.Name):
                        self.lists.pop(n.id, None)
                        self.lost_lists.pop(n.id, None)
            if (
                len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, (ast.List, ast.Tuple))
                and (isinstance(node.value, ast.List) or self.mentions_varied(node.value))
            ):
                self.assign_list(node.targets[0].id, node.value, node)
                return
        super().statement(node)

    def before_block(self, node: ast.stmt) -> None:
        """A list changed inside a branch or a loop not unrolled: a run-time list stops being
        followed there; a list of differentiated values is refused."""
        body = node.body + node.orelse
        changed = mutated_names(body) | set(names_stored(body))
        for name in sorted(changed & set(self.lists)):
            known = self.lists.pop(name, None)
            if known is None:
                continue
            for other in [n for n, k in self.lists.items() if k is known]:
                del self.lists[other]  # the same list under another name
            if known.varied:
                raise self.list_error(
                    node,
                    f"s2sad cannot follow the list `{name}` of differentiated values through "
                    "this branch or loop, which changes it",
                    "build the list in straight-line code or in a loop of a constant trip count "
                    "(`for i in range(3)`, `for v in parts`), which s2sad unrolls; or write the "
                    "values into an array (`y = np.zeros(...)`, then `y[i] = v`)",
                )

    # ------------------------------------------------------------------ list statements
    def list_statement(self, node: ast.stmt) -> bool:
        """`name = [...]`, `q = name`, `name.append(v)`, `name[k] = v`: handled here, or False."""
        self.refuse_writes_into_elements(node)
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
            if isinstance(target, ast.Name):
                return self.alias_list(target.id, value)
            if (
                isinstance(target, ast.Subscript)
                and isinstance(target.value, ast.Name)
                and target.value.id in self.lists
                and self.lists[target.value.id].varied
            ):
                known = self.lists[target.value.id]
                self.refuse_callers_list(target.value.id, known, node)
                if known.tuple:
                    raise self.list_error(
                        node, f"`{target.value.id}` is a tuple: it cannot be changed", "use a list"
                    )
                k = self.constant_int(target.slice)
                if k is None or not -len(known.elts) <= k < len(known.elts):
                    raise self.list_error(
                        node,
                        f"s2sad writes into the list `{target.value.id}` only at a constant "
                        "index within it",
                        "build a new list, or write into an array",
                    )
                known.elts[k] = self.element(
                    self.expand(value), f"{target.value.id}_{k % len(known.elts)}"
                )
                return True
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            call = node.value
            func = call.func
            if (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id in self.lists
            ):
                return self.mutate(func.value.id, func.attr, call, node)
        if (
            isinstance(node, ast.AugAssign)
            and isinstance(node.target, ast.Subscript)
            and isinstance(node.target.value, ast.Name)
            and node.target.value.id in self.lists
            and self.lists[node.target.value.id].varied
        ):
            new = ast.BinOp(clone(node.target), node.op, node.value)
            made = self.lists[node.target.value.id].node
            made = (
                f" (it was assigned from `{ast.unparse(made.value)}`)"
                if isinstance(made, ast.Assign)
                else ""
            )
            raise self.list_error(
                node,
                f"`{node.target.value.id}` may share memory with another array{made}: "
                f"`{ast.unparse(node)}` changes the list's element in place, and the list holds "
                "it by reference; s2sad does not follow writes through such aliases",
                f"write `{ast.unparse(node.target)} = {ast.unparse(new)}`, or put copies in "
                "the list (`.copy()`)",
            )
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            known = self.lists.get(node.target.id)
            if known is not None and known.varied:
                raise self.list_error(
                    node,
                    f"s2sad cannot follow `{ast.unparse(node)}` on a list of differentiated "
                    "values",
                    "use append, or a new list (`parts = parts + [v]`)",
                )
        return False

    def refuse_writes_into_elements(self, node: ast.stmt) -> None:
        """`parts[0][1] = v`, `parts[0].x = v`, `parts[0][1] += v`: a write into an element the
        list holds by reference, which may be a view of another array."""
        targets = [node.target] if isinstance(node, ast.AugAssign) else []
        for part in ast.walk(ast.Tuple(getattr(node, "targets", targets), ast.Store())):
            inner = getattr(part, "value", None)
            if isinstance(part, (ast.Subscript, ast.Attribute)) and isinstance(
                inner, ast.Subscript
            ):
                known = self.lists.get(getattr(inner.value, "id", None))
                if known is not None and known.varied:
                    raise self.list_error(
                        node,
                        f"`{ast.unparse(part)}` writes into an element of the list "
                        f"`{inner.value.id}` in place; the list holds it by reference and it may "
                        "share memory with another array, and s2sad does not follow writes "
                        "through such aliases",
                        "write into the array itself, or put copies in the list (`.copy()`)",
                    )

    def alias_list(self, name: str, value: ast.expr) -> bool:
        """`q = parts`: `q` is the same list (a change through either shows through both)."""
        if not (isinstance(value, ast.Name) and value.id in self.lists):
            return False
        known = self.lists[value.id]
        if not known.varied:  # a run-time list under two names, followed as one
            self.assign_target(ast.Name(name, ast.Store()), value)
            self.lists[name] = known
            return True
        self.lists[name] = known
        self.env.pop(name, None)
        self.lost_lists.pop(name, None)
        return True

    def assign_list(self, name: str, value: ast.List, node) -> None:
        """`name = [...]` (its reads of known lists already expanded)."""
        if not self.mentions_varied(value):
            self.assign_target(ast.Name(name, ast.Store()), value)
            made = (self.out[-1], self.out) if self.out else None
            self.lists[name] = _List(self.list_level, count=len(value.elts), made=made)
            return
        elts = [self.element(e, f"{name}_{k}") for k, e in enumerate(value.elts)]
        self.memory.rebound(name)
        self.env.pop(name, None)
        tuple_ = isinstance(value, ast.Tuple)
        self.lists[name] = _List(self.list_level, elts=elts, node=node, tuple_=tuple_)

    def mutate(self, name: str, method: str, call: ast.Call, node) -> bool:
        known = self.lists[name]
        if known.level != self.list_level and not known.varied:
            self.lists.pop(name)
            return False
        self.refuse_callers_list(name, known, node)
        args = [self.expand(a) for a in call.args]
        if method == "append" and len(args) == 1 and not call.keywords:
            if not known.varied and not self.mentions_varied(args[0]):
                if known.count is not None:
                    known.count += 1
                return False
            if not known.varied:
                if known.count is None:
                    raise self.list_error(
                        node,
                        f"s2sad cannot tell what the list `{name}` holds here",
                        "build the list of differentiated values in straight-line code",
                    )
                known.elts = [
                    self.element(
                        ast.Subscript(ast.Name(name, ast.Load()), ast.Constant(k)), f"{name}_{k}"
                    )
                    for k in range(known.count)
                ]
                self.drop_unread(name, known)
                self.env.pop(name, None)
            known.elts.append(self.element(args[0], f"{name}_{len(known.elts)}"))
            known.node = node
            return True
        if not known.varied:
            self.lists.pop(name)
            return False
        raise self.list_error(
            node,
            f"s2sad cannot follow `{name}.{method}(...)` on a list of differentiated values",
            "use append, or build a new list",
        )

    def refuse_callers_list(self, name: str, known: _List, node) -> None:
        if known.level < 0:
            raise self.list_error(
                node,
                f"s2sad cannot follow a change to `{name}`, the caller's list of differentiated "
                "values: the caller would see it too",
                "build a new list in the helper (`parts = parts + [v]`), or return the value",
            )

    def bind_list_param(self, sub: Lists, name: str, value: ast.expr) -> bool:
        """A helper's parameter given a list of differentiated values (`join([a, b])`,
        `join(parts)`): the helper reads the caller's elements (and may not change the list)."""
        if not (isinstance(value, (ast.List, ast.Tuple)) and self.atom_varied(value)):
            return False

        def proxies(node, base):
            if isinstance(node, (ast.List, ast.Tuple)):
                elts = [proxies(e, f"{base}_{k}") for k, e in enumerate(node.elts)]
                return type(node)(elts, ast.Load())
            if not isinstance(node, ast.Name):
                return clone(node)
            proxy = sub.synthesize(base)
            sub.env[proxy] = node.id
            return ast.Name(proxy, ast.Load())

        elts = [proxies(e, f"{name}_{k}") for k, e in enumerate(value.elts)]
        sub.lists[name] = _List(-1, elts=elts, tuple_=isinstance(value, ast.Tuple))
        return True

    def drop_unread(self, name: str, known: _List) -> None:
        """The run-time list a list of differentiated values started as (`out = []`): its
        statement goes where nothing reads it."""
        if known.made is None or self.env.get(name) is None:
            return
        stmt, block = known.made
        ssa = self.env[name]
        if not any(s is stmt for s in block):
            return
        after = block[[id(s) for s in block].index(id(stmt)) + 1 :]
        if any(isinstance(n, ast.Name) and n.id == ssa for s in after for n in ast.walk(s)):
            return
        block.remove(stmt)

    def element(self, value: ast.expr, base: str) -> ast.expr:
        """An element (`base`: the list's name and its index, `parts_0`): a proxy name for its
        atom, a constant, or a list of elements."""
        if isinstance(value, (ast.List, ast.Tuple)):
            return type(value)(
                [self.element(e, f"{base}_{k}") for k, e in enumerate(value.elts)], ast.Load()
            )
        if self.memory.written_view(value) is not None:
            raise self.list_error(
                value,
                f"`{ast.unparse(value)}` may share memory with an array written in place, and "
                "a list holds it by reference",
                "put a copy in the list (`parts.append(v.copy())`)",
            )
        shared = self.memory.shared_bases(value)
        atom = self.atom(value, base.rsplit("_", 1)[0])  # named after the list (`parts_mul`)
        if isinstance(atom, ast.Constant):
            return atom
        if not isinstance(atom, ast.Name):
            tmp = self.names.fresh(base)
            self.append(tmp, atom, self.atom_varied(atom))
            atom = ast.Name(tmp, ast.Load())
        proxy = self.synthesize(base)
        self.env[proxy] = atom.id
        # the list holds the array itself: an in-place `y += v` shows through it (a hazard)
        self.memory.share(proxy, shared)
        return ast.Name(proxy, ast.Load())

    # ------------------------------------------------------------------ reading lists
    def expand(self, node):
        """`node` with each known list read as the literal of its elements."""
        return _Expand(self).visit(clone(node))

    def literal_of(self, name: str, where: ast.AST) -> ast.List:
        """The list `name` as a literal of its elements, placed at `where` (for messages)."""
        known = self.lists[name]
        literal = (ast.Tuple if known.tuple else ast.List)(
            [clone(e) for e in known.elts], ast.Load()
        )
        for n in ast.walk(literal):
            ast.copy_location(n, where)
        return literal

    def constant_int(self, node) -> int | None:
        """An int known when the function is transformed, or None."""
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            v = self.constant_int(node.operand)
            return None if v is None else -v
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
            a, b = self.constant_int(node.left), self.constant_int(node.right)
            if a is None or b is None:
                return None
            return {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b}[type(node.op)]
        if isinstance(node, (ast.Name, ast.Attribute)):
            if isinstance(node, ast.Name) and node.id in self.locals:
                return None
            value, spec = self.resolver.resolve_spec(node)
            if type(value) is not int:
                return None
            self.resolver.reads.pin(spec, value)  # unrolled for this value: checked at each call
            return value
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "len"
            and len(node.args) == 1
            and isinstance(node.args[0], (ast.List, ast.Tuple))
            and not any(isinstance(e, ast.Starred) for e in node.args[0].elts)
        ):
            return len(node.args[0].elts)
        return None

    # ------------------------------------------------------------------ unrolling (list_loops.py)
    def unrolled_for(self, node: ast.For, it: ast.expr) -> bool:
        raise NotImplementedError

    def comprehension(self, node) -> ast.expr | None:
        raise NotImplementedError

    def sum_of_generator(self, node: ast.Call) -> ast.expr:
        raise NotImplementedError


class _Expand(ast.NodeTransformer):
    """Reads of known lists as list literals; comprehensions of differentiated values unrolled."""

    def __init__(self, norm: Lists):
        self.norm = norm

    def known(self, node):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            norm = self.norm
            if node.id in norm.lost_lists and node.id not in norm.env:
                raise norm.list_error(
                    node,
                    f"s2sad cannot follow the list `{node.id}` of differentiated values out of "
                    "the branch or loop that built it",
                    "build the list before the branch, or in a loop of a constant trip count",
                )
            known = norm.lists.get(node.id)
            if known is not None and known.varied:
                return node.id
        return None

    def visit_Name(self, node):
        name = self.known(node)
        if name is None:
            return node
        return self.norm.literal_of(name, node)

    def visit_Subscript(self, node):
        name = self.known(node.value) if isinstance(node.ctx, ast.Load) else None
        if name is None:
            self.generic_visit(node)
            return node
        node.slice = self.visit(node.slice)
        elts = self.norm.lists[name].elts
        k = self.norm.constant_int(node.slice)
        if k is not None:
            if not -len(elts) <= k < len(elts):
                raise self.norm.list_error(
                    node, f"index {k} is out of range for the list `{name}`", "check the index"
                )
            return ast.copy_location(clone(elts[k]), node)  # (a name or a constant)
        if isinstance(node.slice, ast.Slice):
            bounds = [
                None if b is None else self.norm.constant_int(b)
                for b in (node.slice.lower, node.slice.upper, node.slice.step)
            ]
            given = [b for b in (node.slice.lower, node.slice.upper, node.slice.step)]
            if all(b is None or v is not None for b, v in zip(given, bounds)):
                literal = self.norm.literal_of(name, node)
                literal.elts = literal.elts[slice(*bounds)]
                return literal
        # an index known at run time only: an item of the list stacked into one array
        func = ast.Attribute(ast.Name("np", ast.Load()), "stack", ast.Load())
        ir.set_runtime_helper(func, np.stack)
        stacked = ast.Call(func, [self.norm.literal_of(name, node)], [])
        return ast.copy_location(ast.Subscript(stacked, node.slice, ast.Load()), node)

    def visit_BinOp(self, node):
        """`parts + [v]` of known lists: one list."""
        self.generic_visit(node)
        left, right = node.left, node.right
        if (
            isinstance(node.op, ast.Add)
            and type(left) is type(right)
            and isinstance(left, (ast.List, ast.Tuple))
            and self.norm.mentions_varied(node)
        ):
            return ast.copy_location(type(left)(left.elts + right.elts, ast.Load()), node)
        return node

    def visit_Call(self, node):
        func = node.func
        if (  # `a.copy()`, `list(a)`: a new list of the same elements (as a literal of them)
            not node.args
            and not node.keywords
            and isinstance(func, ast.Attribute)
            and func.attr == "copy"
            and self.known(func.value) is not None
        ) or (
            isinstance(func, ast.Name)
            and func.id == "list"
            and len(node.args) == 1
            and not node.keywords
            and self.known(node.args[0]) is not None
            and self.norm.resolver.resolve(func) is list
        ):
            name = func.value.id if isinstance(func, ast.Attribute) else node.args[0].id
            literal = self.norm.literal_of(name, node)
            return ast.copy_location(ast.List(literal.elts, ast.Load()), node)
        if (
            isinstance(func, ast.Name)
            and func.id == "len"
            and len(node.args) == 1
            and self.known(node.args[0]) is not None
        ):
            return ast.copy_location(ast.Constant(len(self.norm.lists[node.args[0].id].elts)), node)
        if (
            node.args
            and isinstance(node.args[0], ast.GeneratorExp)
            and self.norm.resolver.resolve(func) is sum
            and self.norm.mentions_varied(node.args[0])
        ):
            gen = self.visit(node.args[0])
            if isinstance(gen, ast.GeneratorExp):  # not unrolled: a loop adding up
                if (
                    len(gen.generators) == 1
                    and isinstance(gen.generators[0].target, ast.Name)
                    and not gen.generators[0].ifs
                    and len(node.args) <= 2
                    and not node.keywords
                ):
                    node.args[0] = gen
                    return self.norm.sum_of_generator(node)
                return node
            node.args[0] = gen
            node.args[1:] = [self.visit(a) for a in node.args[1:]]
            return node
        self.generic_visit(node)
        return node

    def _comprehension(self, node):
        self.generic_visit(node)
        if not self.norm.mentions_varied(node):
            return node
        literal = self.norm.comprehension(node)
        if literal is None and isinstance(node, ast.ListComp):
            raise self.norm.list_error(
                node,
                "s2sad differentiates list comprehensions only over items known when it "
                "transforms the function (`range` of constants, a list, "
                "`np.split(x, 3)`), with one `for` and no `if`",
                "write the values into an array in a loop (`y = np.zeros((n, ...))`, then "
                "`y[i] = v`)",
            )
        if literal is None:
            return node
        literal = self.visit(literal)  # reads of known lists its items brought in
        return ast.copy_location(literal, node)

    visit_ListComp = visit_GeneratorExp = _comprehension
