"""Statements flattened: an assignment binds a fresh SSA name to each user name it assigns (`h`,
`h_1`), tuple assignments are unpacked, `z op= v` becomes `z_1 = z op v`, and a write into an
array (`y[i] = v`) stays one statement. Each binding tells the memory tracker what the new value
may share (memory.py). Control flow goes to control.py, nested `def`s to inline.py.
"""

from __future__ import annotations

import ast

from ... import ir
from ...astcopy import clone, walk_nodes
from ...errors import UnsupportedSyntaxError
from ...rules.helpers import RUNTIME
from ..classify import ufunc_name
from .expressions import Expressions
from .flatten import rename_in
from .memory import snapshot_of

_UNSUPPORTED_STMTS = {
    ast.With: "`with` blocks other than `with np.errstate(...)`",
    ast.ClassDef: "class definitions",
    ast.Global: "`global`",
    ast.Nonlocal: "`nonlocal`",
    ast.Delete: "`del`",
    ast.AsyncFunctionDef: "async functions",
    ast.Match: "`match` statements",
    ast.Break: "`break`",
    ast.Continue: "`continue`",
    ast.AsyncFor: "`async for`",
}


class Statements(Expressions):
    """Flattening of statements other than control flow (see the module docstring)."""

    def for_(self, node: ast.For) -> None:
        raise NotImplementedError  # control.py

    def while_(self, node: ast.While) -> None:
        raise NotImplementedError  # control.py

    def evaluate_defaults(self, fn) -> None:
        raise NotImplementedError  # inline.py

    def statement(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Assign):
            first = self.assign_target(node.targets[0], node.value)
            for target in node.targets[1:]:
                self.assign_target(target, first)
        elif isinstance(node, ast.AnnAssign):
            if node.value is not None:
                self.assign_target(node.target, node.value)
        elif isinstance(node, ast.AugAssign):
            if isinstance(node.target, ast.Name):
                self.memory.in_place(node, self.env)
            load = clone(node.target)
            for n in walk_nodes(load):
                if hasattr(n, "ctx"):
                    n.ctx = ast.Load()
            value = ast.copy_location(ast.BinOp(load, node.op, node.value), node)
            self.assign_target(node.target, self.stored(node, value))
        elif isinstance(node, ast.Raise):
            self.put(self.rename(node))  # an input check: kept as it is, no derivative
        elif isinstance(node, (ast.Expr, ast.Assert)):
            if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
                self.emit_expr(node)
        elif isinstance(node, ast.Pass):
            pass
        elif isinstance(node, ast.If):
            self.if_(node)
        elif isinstance(node, ast.For):
            self.for_(node)
        elif isinstance(node, ast.While):
            self.while_(node)
        elif isinstance(node, ast.FunctionDef):
            if node.decorator_list:
                raise self.unsupported(node, "decorated nested functions")
            self.local_funcs[node.name] = node
            self.evaluate_defaults(node)
        elif isinstance(node, ast.Return):
            raise self.unsupported(node, "this `return`")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            raise self.parsed.error(
                UnsupportedSyntaxError,
                f"`{ast.unparse(node)}` inside the function: s2sad reads modules and their "
                "functions from the function's module (its globals), not from a local import",
                node,
                hint=f"move `{ast.unparse(node)}` to the top of the module; the function then "
                "reads it as a global",
            )
        else:
            what = _UNSUPPORTED_STMTS.get(type(node), type(node).__name__)
            raise self.unsupported(node, what)

    def stored(self, node: ast.AugAssign, value: ast.BinOp) -> ast.expr:
        """`x op= v` stores `x op v` into the array x, in its shape and dtype (a float32 x stays
        float32, an int8 one wraps), where NumPy raises rather than change either:
        `in_place(x op v, x, "add")` (`in_place_kind` for `x[i] op= v`, whose store casts).
        A number `v` neither broadcasts nor changes a float array's dtype (nor an integer
        one's but to floats, refused as NumPy refuses it: integer_writes.py)."""
        if isinstance(node.value, ast.Constant):
            return value
        target = node.target.value if isinstance(node.target, ast.Subscript) else node.target
        helper = "in_place" if isinstance(node.target, ast.Name) else "in_place_kind"
        if not isinstance(target, ast.Name):
            return value
        func = ast.Name(helper, ast.Load())
        ir.set_runtime_helper(func, RUNTIME[helper])
        ufunc = ast.Constant(ufunc_name(type(node.op)))
        return ast.copy_location(
            ast.Call(func, [value, ast.Name(target.id, ast.Load()), ufunc], []), node
        )

    def emit_expr(self, node: ast.stmt) -> None:
        call = node.value if isinstance(node, ast.Expr) else None
        if (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == "append"
            and isinstance(call.func.value, ast.Name)
            and call.func.value.id in self.locals
            and not call.keywords
            and any(not self.is_atom(a) and self.mentions_varied(a) for a in call.args)
        ):
            # a value pushed on a list (a tape of s2sad's own gradient code) gets a name, so
            # that forward mode carries its tangent onto the list of tangents
            base = call.func.value.id
            args = [
                self.atom(a, base) if self.mentions_varied(a) else self.rename(a) for a in call.args
            ]
            node = ast.Expr(ast.Call(self.rename(call.func), args, []))
            self.put(node)
            return
        self.put(self.rename(node))

    # ------------------------------------------------------------------ assignments
    def assign_target(self, target: ast.expr, value: ast.expr) -> ast.expr:
        """Assign `value` to `target`; returns an atom holding the value."""
        if isinstance(target, ast.Name):
            return self.assign_name(target, value)
        if isinstance(target, (ast.Tuple, ast.List)) and all(
            isinstance(t, ast.Name) for t in target.elts
        ):
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
                return self.assign_elements(target, value)
            return self.assign_unpacked(target, value)
        if self.is_item(target):
            return self.assign_item(target, value)
        if isinstance(target, (ast.Tuple, ast.List)) and all(
            isinstance(t, ast.Name) or self.is_item(t) for t in target.elts
        ):
            return self.assign_items(target, value)
        raise self.unsupported(self.user_stmt, "assignment to this kind of target")

    def assign_name(self, target: ast.Name, value: ast.expr) -> ast.expr:
        memory = self.memory
        alias = self.parsed.text_of(value) if memory.may_alias(value, self.env) else None
        if isinstance(value, ast.Lambda):
            self.local_funcs[target.id] = value
            self.evaluate_defaults(value)
            return ast.Constant(None)
        if ir.is_scatter(value):
            memory.written_now({target.id})  # in Python, np.add.at wrote into the array
        viewed = memory.written_view(value)
        shared = memory.shared_bases(value)
        start = len(self.out)
        rhs = self.expr(value, target.id)  # may read the target: as the view it was
        memory.views.pop(target.id, None)
        memory.rebound(target.id)
        memory.share(target.id, shared)
        inlined = ir.inlined(rhs)
        if isinstance(rhs, ast.Name) and inlined:
            # `v = head(y)` returning `y[:-1]`, a view of an array written in place
            viewed = memory.written_base(inlined.alias)
            if inlined.alias:  # (what names bound from `v` share: `z = v`, `ident(v)`)
                memory.share(target.id, inlined.alias[1])
                alias = inlined.alias[0]
        if isinstance(rhs, ast.Name) and inlined and viewed is None:
            name = self.rebind(target.id)  # the inlined result takes the user's name
            rename_in(self.out[start:], rhs.id, name)
            if rhs.id in self.varied:
                self.varied.add(name)
            if inlined.alias:
                memory.aliases[name], shared = inlined.alias
                memory.share(target.id, shared)
            return ast.Name(name, ast.Load())
        if isinstance(rhs, ast.Tuple) and inlined:
            rhs = ast.Tuple(rhs.elts, ast.Load())
        if viewed is not None:
            # a view of an array written in place later: the values as they are now (a read
            # after the write is refused, see `Memory.read`)
            memory.views[target.id] = viewed
            rhs = snapshot_of(rhs)
        memory.pending_alias = alias  # (after the right-hand side, which may bind names)
        return self.bind(
            target.id, rhs, varied=self.atom_varied(rhs) or self.mentions_varied(value)
        )

    def assign_elements(self, target: ast.Tuple, value: ast.Tuple) -> ast.expr:
        """`a, b = y, v`: one assignment per element."""
        memory = self.memory
        shared = [memory.shared_bases(v) for v in value.elts]
        viewed = [memory.written_view(v) for v in value.elts]  # (as `assign_name`'s, each)
        atoms = [self.atom(v, t.id) for t, v in zip(target.elts, value.elts)]
        for k, (t, v, a, bases, seen) in enumerate(
            zip(target.elts, value.elts, atoms, shared, viewed)
        ):
            if memory.may_alias(v, self.env):  # `a, b = y, z`: `a` is `y`
                text = self.parsed.text_of(v)
                if isinstance(v, ast.Name) and text != v.id:  # `a, b = t` of a tuple `t`
                    text = f"{text}[{k}]"  # (v stands for its element k, where `t` was)
                memory.pending_alias = text
            self.bind(t.id, a if seen is None else snapshot_of(a), varied=self.atom_varied(a))
            memory.pending_alias = None
            memory.views.pop(t.id, None)
            memory.rebound(t.id)
            memory.share(t.id, bases)
            if seen is not None:  # `prev, other = h[0], h[1]` with `h[0] = ...` later
                memory.views[t.id] = seen
        return ast.Tuple(atoms, ast.Load())

    def assign_unpacked(self, target: ast.Tuple, value: ast.expr) -> ast.expr:
        """`a, b = np.split(y, 2)`, `a, b = y`: the value, then its elements."""
        memory = self.memory
        shared = memory.shared_bases(value)
        whole = self.atom(value, "_".join(t.id for t in target.elts))
        names = [t.id for t in target.elts]
        for name in names:
            memory.rebound(name)
        if isinstance(whole, ast.Tuple) and len(whole.elts) == len(target.elts):
            inlined = ir.inlined(whole)
            elements = inlined.elements if inlined else None
            for k, (t, a) in enumerate(zip(target.elts, whole.elts)):
                viewed = memory.written_base(elements[k][1]) if elements else None
                if viewed is not None:  # a view of an array written in place (`return v[:2], ..`)
                    a = snapshot_of(a)  # (read after the write: refused, see `Memory.read`)
                self.bind(t.id, a, varied=self.atom_varied(a))
                memory.views.pop(t.id, None)
                if viewed is not None:
                    memory.views[t.id] = viewed
            memory.unpacked_sharing(names, elements, self.parsed.text_of(value), self.env)
            return whole
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
            self.put(stmt)
        else:  # `a, b = h`: rows of h, views of an array written in place later or not
            viewed = memory.written_view(value)
            for i, t in enumerate(target.elts):
                item = ast.Subscript(whole, ast.Constant(i), ast.Load())
                self.bind(t.id, item if viewed is None else snapshot_of(item), varied=True)
                memory.views.pop(t.id, None)
                if viewed is not None:
                    memory.views[t.id] = viewed
        if shared:  # element k is `value[k]` (a row of an array, an element of a tuple)
            text = self.parsed.text_of(value)
            whole_text = text if isinstance(value, _POSTFIX) else f"({text})"
            parts = [(None, (f"{whole_text}[{k}]", shared)) for k in range(len(names))]
            memory.unpacked_sharing(names, parts, text, self.env)
        return whole

    def is_item(self, target: ast.expr) -> bool:
        """`y[i]` for a local array `y`."""
        return (
            isinstance(target, ast.Subscript)
            and isinstance(target.value, ast.Name)
            and target.value.id in self.locals
        )

    def assign_items(self, target: ast.Tuple, value: ast.expr) -> ast.expr:
        """`s[i], s[i + 1] = cell(...)`, `s[i], t = a, b`: the values first, as Python
        evaluates them, then each element of the target from left to right."""
        if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
            atoms = [self.atom(v, _base(t)) for t, v in zip(target.elts, value.elts)]
            for k, (v, a) in enumerate(zip(value.elts, atoms)):
                written = {_base(t) for t in target.elts[:k] if not isinstance(t, ast.Name)}
                viewed = self.memory.written_view(v)
                if viewed in written and isinstance(a, ast.Name) and not isinstance(v, ast.Name):
                    # `s[0], s[1] = s[1], s[0]` of rows: Python writes the second row's
                    # values into the first, then reads the first (a view) for the second
                    self.memory.hazards.append(
                        (
                            a.id,
                            v,
                            f"`{ast.unparse(v)}` may be a view of `{viewed}`, which this "
                            "statement writes before it is read: Python reads the view "
                            "after the write, and s2sad does not follow writes through views",
                            f"copy it first (`{ast.unparse(v)}.copy()`)",
                        )
                    )
        else:
            whole = self.atom(value, "_".join(dict.fromkeys(_base(t) for t in target.elts)))
            if isinstance(whole, ast.Tuple) and len(whole.elts) == len(target.elts):
                atoms = whole.elts
            else:  # a value unpacked by its first axis (or a tuple a rule returns)
                atoms = []
                for i, t in enumerate(target.elts):
                    name = self.names.fresh(f"{_base(t)}_item")
                    item = ast.Subscript(whole, ast.Constant(i), ast.Load())
                    self.append(name, item, varied=self.atom_varied(whole))
                    atoms.append(ast.Name(name, ast.Load()))
        for t, a in zip(target.elts, atoms):
            if isinstance(t, ast.Name):
                self.bind(t.id, a, varied=self.atom_varied(a))
                self.memory.rebound(t.id)
            else:
                self.assign_item(t, a, flat=True)
        return ast.Tuple(atoms, ast.Load())

    def assign_item(self, target: ast.Subscript, value: ast.expr, flat=False) -> ast.expr:
        """`y[i] = v`: a write into a local array (`flat`: `v` is an atom already)."""
        base = self.load(target.value)
        aliases = self.memory.aliases
        if base.id in aliases:
            raise self.parsed.error(
                UnsupportedSyntaxError,
                f"`{target.value.id}` may share memory with another array (it was assigned "
                f"from `{aliases[base.id]}`); s2sad does not follow writes through "
                "such aliases",
                self.user_stmt,
                hint=f"write into a copy (`{target.value.id} = {target.value.id}.copy()` "
                "before the write) or into the original array",
            )
        index = self.index(target.slice, target.value.id)
        atom = value if flat else self.atom(value, target.value.id)
        stmt = ast.Assign([ast.Subscript(base, index, ast.Store())], atom)
        self.put(stmt)
        if self.atom_varied(atom):
            self.varied.add(base.id)
        self.memory.written_now({target.value.id})
        return atom


# expressions `[k]` may follow without parentheses
_POSTFIX = (ast.Name, ast.Attribute, ast.Subscript, ast.Call)


def _base(target: ast.expr) -> str:
    """The user's name a target element writes (`s` of `s[i]`), to name temporaries after."""
    while isinstance(target, ast.Subscript):
        target = target.value
    return target.id if isinstance(target, ast.Name) else "item"
