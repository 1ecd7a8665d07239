"""The flattener's state and its primitives: the current names (`env`: user name -> SSA name),
the statements being written (`out`), and the steps every part of the flattening uses: bind a
new SSA name (`rebind`, `bind`, `append`), read one (`load`, `rename`), write a statement
(`put`, stamping the user's statement it comes from: see `s2sad.ir`).

`Flattener` is the base of the layers of the one recursive walk over the user's function
(expressions.py, statements.py, control.py, inline.py, normalizer.py): a statement holds
expressions, an `if` holds statements, a call of a user's function holds a whole body. What is
not that walk keeps its own object (`Memory`, `NameAllocator`) or is a function of its inputs
(liveness.py, dependence.py).
"""

from __future__ import annotations

import ast

from ... import ir, runtime
from ...astcopy import clone, walk_nodes
from ...errors import NameResolutionError, UnsupportedSyntaxError
from ..names import names_mentioned, names_stored
from ..reserved import reserved_names
from ..random_draws import refuse_random_draw
from ..resolve import Resolver
from .fresh import makes_new_array
from .memory import Memory, arrays_written
from .calls import inlinable
from .naming import NameAllocator


def _makes_complex(node: ast.expr) -> bool:
    """Whether an expression brings in complex numbers: a literal like `1j`, `complex(...)`, or a
    complex dtype (`np.complex128`, `dtype="complex64"`). The rules are those of real calculus
    (`abs`, for one, would give the wrong sign), so such a value is refused, not differentiated."""
    for n in walk_nodes(node):
        if isinstance(n, ast.Constant) and (
            isinstance(n.value, complex) or (isinstance(n.value, str) and "complex" in n.value)
        ):
            return True
        if (isinstance(n, ast.Name) and n.id == "complex") or (
            isinstance(n, ast.Attribute)
            and n.attr.startswith(("complex", "clongdouble", "csingle", "cdouble"))
        ):
            return True
    return False


def rename_in(stmts: list[ast.stmt], old: str, new: str) -> None:
    """The SSA name `old` becomes `new` in these statements (and their annotations)."""
    for stmt in stmts:
        for node in walk_nodes(stmt):
            if isinstance(node, ast.Name) and node.id == old:
                node.id = new
            ir.rename_in_annotations(node, old, new)


class Flattener:
    """The state of the walk over one function (or one inlined body: `parent` is the caller's)."""

    def __init__(
        self,
        parsed,
        wrt: list[str],
        parent: Flattener | None = None,
        env: dict[str, str] | None = None,
        extra_locals: set[str] = frozenset(),
        index: int | None = None,
        local_funcs: dict | None = None,
        loop_varied: set[str] | None = None,
    ):
        self.parsed = parsed
        self.locals = set(parsed.params) | set(names_stored([parsed.tree])) | set(extra_locals)
        if parent is None:
            self.resolver = Resolver(parsed, self.locals)
            self.resolver.pass_functions(parsed.passed)
            all_names = names_mentioned([parsed.tree])
            reserved = reserved_names(parsed.name)
            self.names = NameAllocator(all_names | set(parsed.params) | reserved)
            self.resolver.hygiene(reserved, self.names, self.locals)
            self.varied = set(wrt)  # SSA names that may depend on the wrt inputs
        else:
            self.resolver = Resolver(parsed, self.locals, parent=parent.resolver, index=index)
            self.names = parent.names
            self.names.taken |= names_mentioned([parsed.tree])
            self.varied = parent.varied
        # user names that vary in some iteration of a loop around (see mark_loop_varied)
        self.loop_varied: set[str] = loop_varied if loop_varied is not None else set()
        self.env = dict(env) if env is not None else {p: p for p in parsed.params}
        self.inlined = parent is not None  # inlined code takes fresh names for its locals
        self.local_funcs: dict[str, ast.AST] = local_funcs if local_funcs is not None else {}
        self.memory = Memory(
            parsed,
            self.resolver,
            self.locals,
            self.local_funcs,
            arrays_written(parsed, self.resolver, self.locals),
            parent.memory.hazards if parent is not None else [],
        )
        self.headers: list[set[str]] = []  # user names carried by each enclosing loop
        self.out: list[ast.stmt] = []
        self.user_stmt: ast.stmt | None = None  # the user's statement being flattened
        self._varied_memo: dict[int, tuple] | None = None  # see mentions_varied
        self._closures_seen: set[int] = set()  # nested defs being read (see closure_varied)
        self.snapshots: dict[str, tuple] = {}  # a view read -> its snapshot (see snapshot_taken)

    # ------------------------------------------------------------------ the walk's entries
    def statement(self, node: ast.stmt) -> None:
        raise NotImplementedError  # statements.py

    def block_into(self, out: list[ast.stmt], stmts: list[ast.stmt]) -> None:
        saved, saved_src = self.out, self.user_stmt
        self.out = out
        for node in stmts:
            if not ir.is_synthetic(node):
                self.user_stmt = node
            self.statement(node)
        self.out, self.user_stmt = saved, saved_src

    def unsupported(self, node: ast.AST, what: str):
        return self.parsed.error(
            UnsupportedSyntaxError,
            f"s2sad cannot differentiate {what} yet",
            node,
            hint="rewrite this part in plain NumPy, or give the function containing it "
            "a rule with s2sad.register_vjp",
        )

    def resolve_callee(self, func: ast.expr):
        """What a call's function is, where it is not a local (else None)."""
        root = func
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name) and root.id in self.locals:
            return None
        return self.resolver.resolve(func)

    def inlinable(self, func: ast.expr):
        """The user function (or local def/lambda node) a call refers to, if s2sad inlines it."""
        return inlinable(func, self.resolver, self.locals, self.local_funcs)

    # ------------------------------------------------------------------ writing statements
    def put(self, stmt: ast.stmt) -> ast.stmt:
        ir.set_origin(stmt, self.user_stmt, self.parsed)
        self.out.append(stmt)
        return stmt

    def synthesize(self, base: str) -> str:
        """A new local name of s2sad's own (a loop index), readable like a user's."""
        name = self.names.fresh(base)
        self.locals.add(name)
        self.env[name] = name
        return name

    def rebind(self, user_name: str) -> str:
        """A fresh SSA name for the next value of `user_name`."""
        if user_name not in self.env:
            name = self.names.fresh(user_name) if self.inlined else user_name
            self.names.taken.add(name)
        elif self.headers and user_name in self.headers[-1]:
            name = self.names.fresh(f"{user_name}_new")
        else:
            name = self.names.fresh(f"{user_name}_1")
        self.env[user_name] = name
        return name

    def bind(self, user_name: str, rhs: ast.expr, varied: bool) -> ast.Name:
        name = self.rebind(user_name)
        if self.memory.pending_alias is not None:
            self.memory.aliases[name] = self.memory.pending_alias
            self.memory.pending_alias = None
        self.append(name, rhs, varied)
        return ast.Name(name, ast.Load())

    def append(self, name: str, rhs: ast.expr, varied: bool) -> ast.stmt:
        if varied and _makes_complex(rhs):
            raise self.parsed.error(
                UnsupportedSyntaxError,
                "s2sad does not differentiate complex values yet: "
                f"`{ast.unparse(rhs)}` makes one from a differentiated value",
                self.user_stmt,
                hint="keep the differentiated path real (write the real and imaginary parts as "
                "two real arrays), or give the function a rule with s2sad.register_vjp",
            )
        stmt = self.put(ast.Assign([ast.Name(name, ast.Store())], rhs))
        if varied:
            self.varied.add(name)
        return stmt

    def snapshot_taken(self, view: ast.expr) -> str | None:
        """The snapshot this statement took already of the same view: `u[1:-1]`, read twice in
        `u[1:-1] += r * (u[2:] - 2 * u[1:-1])`, is copied once. Only where nothing since can
        have written into memory: no write into an element, no call but snapshots and NumPy's
        making new arrays."""
        name, stmt, user = self.snapshots.get(ast.dump(view), (None, None, None))
        if name is None or user is not self.user_stmt:
            return None
        at = next((i for i, s in enumerate(self.out) if s is stmt), None)
        if at is None or any(
            isinstance(n, ast.AugAssign)
            or (isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store))
            or (isinstance(n, ast.Call) and not _pure_call(n))
            for s in self.out[at + 1 :]
            for n in walk_nodes(s)
        ):
            return None
        return name

    def took_snapshot(self, name: str, stmt: ast.Assign) -> None:
        """Remember `name = snapshot(view)`, for the same view read again (snapshot_taken)."""
        if ir.callee(getattr(stmt.value, "func", None)) is runtime.snapshot:
            self.snapshots[ast.dump(stmt.value.args[0])] = (name, stmt, self.user_stmt)

    # ------------------------------------------------------------------ reading names
    def load(self, node: ast.Name) -> ast.Name:
        if node.id not in self.env:
            user_name = self.parsed.original.get(node.id, node.id)
            raise self.parsed.error(
                NameResolutionError,
                f"local variable '{user_name}' is used before it is assigned",
                node,
            )
        self.memory.read(node, self.env)
        return ast.Name(self.env[node.id], ast.Load())

    def rename(self, node: ast.AST) -> ast.AST:
        """A copy of `node` reading current SSA names, with globals spelled canonically."""
        return _Rename(self).visit(clone(node))


class _Rename(ast.NodeTransformer):
    def __init__(self, norm: Flattener):
        self.norm = norm
        self.bound: set[str] = set()  # names a comprehension around the node binds

    def visit_Name(self, node: ast.Name) -> ast.expr:
        if node.id in self.bound:
            return node
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
        if isinstance(node.func, ast.Name) and node.func.id in self.norm.local_funcs:
            raise self.norm.unsupported(node, "a call of a local function inside this expression")
        callee = self.norm.resolver.resolve(node.func)
        self.norm.resolver.check_getattr(node, callee)
        refuse_random_draw(self.norm.parsed, node, callee)
        self.generic_visit(node)
        if callee is not None:
            ir.set_callee(node.func, callee)
        return node

    def visit_Lambda(self, node):
        raise self.norm.unsupported(node, "lambdas used in place")

    def _comprehension(self, node):
        """A comprehension of values that carry no derivative (differentiated ones are refused
        before this): its own variables stay as they are."""
        saved = self.bound
        self.bound = saved | names_mentioned([g.target for g in node.generators])
        self.generic_visit(node)
        self.bound = saved
        return node

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _comprehension


def _pure_call(node: ast.Call) -> bool:
    """A call writing into no array: a snapshot, or NumPy's making a new array (np.sin(v))."""
    callee = ir.callee(node.func)
    return callee is runtime.snapshot or makes_new_array(callee, node)
