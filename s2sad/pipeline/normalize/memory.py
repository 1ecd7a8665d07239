"""Memory sharing: which of the function's arrays may be the same memory, so that a write into
one (`y[i] = v`, `z += v`, `np.add.at`) shows through another. s2sad computes new values where
NumPy writes in place; that is right only where nothing else sees the memory, so the `Memory`
tracker keeps, while the flattener walks the function in order:

- `aliases`: SSA names that may be another array's memory (a write into one is refused);
- `views`/`stale`: user names bound as views of arrays written in place later (read as
  snapshots; a read after the write is refused);
- `sharing`/`aug_stale`: names sharing memory with an array `z op= v` writes (a hazard, refused
  unless `z` is a scalar, which the ranks tell after flattening: `check_hazards`).

The flattener calls it with the current environment (user name -> SSA name) where it needs one;
it never calls the flattener. It also holds the rewrite of `np.add.at(y, i, v)` into an
assignment (`arrays_written`).
"""

from __future__ import annotations

import ast
import re

from ... import ir, runtime
from ...astcopy import walk_nodes
from ...errors import NameResolutionError, UnsupportedSyntaxError
from ...rules.indexing import is_add_at
from ..ranks import infer_ranks
from ..reserved import STATIC_ATTRS
from .calls import inlinable
from .fresh import fresh_call

_INERT_ATTRS = STATIC_ATTRS | {"itemsize", "nbytes", "strides", "size"}


def snapshot_of(rhs: ast.expr) -> ast.Call:
    """`snapshot(rhs)`: the values of a view as they are now."""
    func = ast.Name("snapshot", ast.Load())
    ir.set_callee(func, runtime.snapshot)
    return ast.Call(func, [rhs], [])


def _rebinding(node: ast.AugAssign) -> str:
    """`z += v` spelled as the assignment of a new value, `z = z + v`."""
    value = ast.BinOp(ast.Name(node.target.id, ast.Load()), node.op, node.value)
    return f"{node.target.id} = {ast.unparse(value)}"


def _subscript_stores(stmts) -> set[str]:
    """The names a subscript assignment writes into (`y[i] = v`)."""
    return {
        n.value.id
        for stmt in stmts
        for n in walk_nodes(stmt)
        if isinstance(n, ast.Subscript)
        and isinstance(n.ctx, ast.Store)
        and isinstance(n.value, ast.Name)
    }


def arrays_written(parsed, resolver, local_names) -> set[str]:
    """The arrays the function writes in place (`y[i] = v`, `np.add.at(y, ...)`, rewritten as an
    assignment here)."""
    written = _subscript_stores([parsed.tree])
    return written | _scatter_adds_as_assignments(parsed.tree, resolver, local_names)


class Memory:
    """What the arrays of one function (or inlined body) may share; see the module docstring."""

    def __init__(self, parsed, resolver, local_names, local_funcs, written, hazards):
        self.parsed = parsed
        self.resolver = resolver
        self.locals = local_names  # (the flattener's set: it grows as names are made)
        self.local_funcs = local_funcs
        self.written = written  # arrays written in place
        self.aliases: dict[str, str] = {}  # SSA name -> the expression it may alias
        self.pending_alias: str | None = None  # for the next name bound
        self.views: dict[str, str] = {}  # user name -> the written array it was bound as a view of
        self.stale: set[str] = set()  # ... of which the array has been written since
        # In-place arithmetic on a name (`z += v`) writes into an ndarray, which every name
        # sharing its memory sees; s2sad makes it a new value (`z_1 = z + v`), which is right
        # only where no other live name shares the memory, or where `z` is a scalar. So:
        self.sharing: dict[str, set[str]] = {}  # user name -> locals whose memory it may share
        self.shared_by: dict[str, set[str]] = {}  # the reverse (may hold names since rebound)
        # user name -> (SSA name of the array written, the write, its user name) for names
        # sharing memory with an array written by `op=` since they were bound: reading one is a
        # hazard
        self.aug_stale: dict[str, tuple[str, ast.stmt, str]] = {}
        # (SSA name, node, message, hint): refused unless that value is known to be a scalar,
        # which only the ranks after normalization tell (shared with the inlined bodies)
        self.hazards: list[tuple[str, ast.AST, str, str]] = hazards
        # an inlined function's parameters that are the caller's arrays (or views of them):
        # the caller's expression and the names it shares memory with
        self.param_sources: dict[str, tuple[str, set[str]]] = {}
        # an inlined call's result snapshotted as an operand (SSA name) -> its `Inlined.alias`:
        # passed on to another helper, it is that memory, as in NumPy (`ident(ident(y))`)
        self.results: dict[str, tuple[str, set[str]]] = {}
        self.not_integers: set[str] = set()  # parameters of no integer or boolean kind
        self.float_casts: set | None = None  # (fresh.py's `_cast`)

    # ------------------------------------------------------------------ what a value shares
    def shared_bases(self, value: ast.expr) -> set[str]:
        """The local user names whose memory `value` may share (see `memory_roots`), and,
        through them, what those names share."""
        return {b for n in self.memory_roots(value) for b in {n} | self.sharing.get(n, set())}

    def memory_roots(self, node: ast.expr, whole: bool = True) -> set[str]:
        """The local names `node` may be, or be a view of. Conservative: arithmetic and the calls
        known to make new arrays (fresh.py) share nothing; a name, a
        subscript, an attribute such as `.T` or `.real`, either value of `a if c else b`, an
        element of a tuple or list, and what any other call returns may be (a view of) every
        array it reads. A call of the user's own function as the `whole` right-hand side is
        followed by inlining (see `inline.py`)."""
        if isinstance(node, ast.Name):
            return {node.id} if node.id in self.locals else set()
        if isinstance(node, ast.Attribute):
            return set() if node.attr in _INERT_ATTRS else self.memory_roots(node.value, False)
        if isinstance(node, (ast.Subscript, ast.Starred, ast.NamedExpr)):
            return self.memory_roots(node.value, False)
        if isinstance(node, ast.IfExp):
            parts = [node.body, node.orelse]
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            parts = node.elts
        elif isinstance(node, ast.BoolOp):  # `a or b` is one of them
            parts = node.values
        elif isinstance(node, ast.Call):
            func = node.func
            try:
                inlined = (
                    whole
                    and inlinable(func, self.resolver, self.locals, self.local_funcs) is not None
                )
                fresh = fresh_call(
                    node, self.resolver, self.local_funcs, self.not_integers, self.float_casts
                )
                if inlined or fresh:
                    return set()
                method = isinstance(func, ast.Attribute) and self.resolver.resolve(func) is None
            except NameResolutionError:  # (reported where the call is normalized)
                method = False
            parts = ([func.value] if method else []) + node.args + [k.value for k in node.keywords]
        else:
            return set()  # arithmetic, comparisons, constants: new values
        return {n for part in parts for n in self.memory_roots(part, False)}

    def may_alias(self, value: ast.expr, env: dict) -> bool:
        """Whether a value may be a view of (or the same object as) a local array; or an element
        or view of any named array (a global's included)."""
        if isinstance(value, ast.Name):
            return value.id in self.locals and value.id in env
        if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name):
            return True
        return bool(self.memory_roots(value))

    def argument_memory(self, arg: ast.expr, atom: ast.expr, env: dict, text: str):
        """What a parameter of a function being inlined may share with this caller, its argument
        `arg` (as the user wrote it: `text`) flattened to `atom`: an inlined call's result what
        that call returned (`ident(ident(y))`, `ident(first((y,)))` are `y`), else what `arg` may
        be (a view of); as (the caller's expression, the caller's locals), or None."""
        inlined = ir.inlined(atom)
        if isinstance(atom, ast.Name) and atom.id in self.results:
            return self.results[atom.id]
        displays = (ast.Tuple, ast.List)
        if (
            isinstance(arg, displays)
            and type(atom) is type(arg)
            and len(atom.elts) == len(arg.elts)
        ):
            # (each element as an argument of its own: `first((double(y),))` shares nothing)
            parts = [self.argument_memory(a, t, env, text) for a, t in zip(arg.elts, atom.elts)]
            parts = [p for p in parts if p]
            return (text, set().union(*(p[1] for p in parts))) if parts else None
        if inlined is None:
            if not self.may_alias(arg, env):
                return None
            return text, self.shared_bases(arg)
        if inlined.alias:
            return inlined.alias
        parts = [e[1] for e in inlined.elements or () if e[1]]  # a tuple: any element's memory
        return (text, set().union(*(p[1] for p in parts))) if parts else None

    def written_view(self, node: ast.expr) -> str | None:
        """The array the function writes in place that `node` may be a view of (or the very
        object of): the array itself, a subscript, `.T`, or any call not known to make a new
        array (see `memory_roots`); else None."""
        written = sorted(
            n for n in self.shared_bases(node) if n in self.written and n in self.locals
        )
        return written[0] if written else None

    def written_base(self, shared) -> str | None:
        """The array written in place among what an inlined result may share with the caller
        (`Inlined.alias`, an element's memory: (the caller's expression, its locals)), if any."""
        if not shared:
            return None
        bases = sorted(b for b in shared[1] if b in self.written and b in self.locals)
        return bases[0] if bases else None

    def views_written(self, node: ast.expr) -> bool:
        """Whether `node` may give a view of an array the function writes in place: a subscript,
        `.T`, or a view-making call such as reshape or transpose."""
        return not isinstance(node, ast.Name) and self.written_view(node) is not None

    # ------------------------------------------------------------------ bindings
    def rebound(self, name: str) -> None:
        """The user name `name` is bound to a new value: nothing written since made it stale."""
        self.stale.discard(name)
        self.aug_stale.pop(name, None)
        self.unshare(name)

    def unpacked_sharing(self, names: list[str], elements, text: str, env: dict) -> None:
        """`names = text` (`a, b = ...`) has bound `names`; `elements` gives, per name, a pair:
        the index of an earlier name whose memory it may share (`h, out = cell(x)` returning
        one array twice) or None, and what else it may share, (the expression, the locals), or
        None."""
        for name, (same, memory) in zip(names, elements or ()):
            if same is not None:  # either may be written and the other read
                other = names[same]
                self.aliases[env[name]] = text
                self.aliases.setdefault(env[other], text)
                self.share(other, self.sharing.get(other, set()) | {name})
                self.share(name, self.sharing.get(name, set()) | {other})
            if memory is not None:
                self.aliases[env[name]] = memory[0]
                self.share(name, self.sharing.get(name, set()) | memory[1])

    def unshare(self, name: str) -> None:
        """`name` is bound to a new value: it shares nothing yet, and a later write into it is
        not one into the memory other names were bound from. (Their sets are replaced, not
        changed, and `shared_by` is kept: an `if` restores `sharing` for its other branch.)"""
        self.sharing.pop(name, None)
        for other in self.shared_by.get(name, ()):
            if name in self.sharing.get(other, ()):
                self.sharing[other] = self.sharing[other] - {name}

    def share(self, name: str, bases: set[str]) -> None:
        """`name` now holds a value that may share memory with the locals `bases`."""
        if bases:
            self.sharing[name] = bases
            for base in bases:
                self.shared_by.setdefault(base, set()).add(name)

    def shared_with_caller(self, inner: Memory, inner_env: dict, result: str, env: dict):
        """What an inlined function's `result` (its memory `inner`, its environment `inner_env`)
        may share with this caller: a parameter that is the caller's array (or a view of it),
        or, for a nested def, a name of its closure (the caller's own value); as (the caller's
        expression, the caller's locals), or None."""
        texts, bases = [], set()
        for p in sorted(inner.sharing.get(result, ())):
            if p in inner.param_sources:
                text, shared = inner.param_sources[p]
                texts.append(text)
                bases |= shared
            elif p in env and inner_env.get(p) == env[p] and p in self.locals:
                texts.append(p)
                bases |= {p} | self.sharing.get(p, set())
        return (texts[0], bases) if texts else None

    def elements_of_param(self, param: str, elements: list[ast.expr]) -> None:
        """An inlined function's list parameter `param` is read through the names in
        `elements`, proxies of the caller's elements: each may be the caller's array `param`'s
        argument holds (`first((y,))` returning `t[0]` is `y` itself, and a write through it
        one into `y`). Messages name element k as the user wrote it: `y` of `(y,)`, else `t[k]`
        (never the caller's temporaries)."""
        if param not in self.param_sources:
            return
        text, shared = self.param_sources[param]
        try:
            spelled = ast.parse(text, mode="eval").body
        except SyntaxError:
            spelled = None
        if not (isinstance(spelled, (ast.Tuple, ast.List)) and len(spelled.elts) == len(elements)):
            spelled = None
        for k, element in enumerate(elements):
            each = ast.unparse(spelled.elts[k]) if spelled is not None else f"{text}[{k}]"
            for proxy in (n.id for n in ast.walk(element) if isinstance(n, ast.Name)):
                self.param_sources[proxy] = (each, shared)

    # ------------------------------------------------------------------ branches
    def before_branches(self):
        """The state an `if` restores for its `else` branch."""
        return set(self.stale), dict(self.sharing), dict(self.aug_stale)

    def between_branches(self, before):
        """After the `if` branch: back to `before`; returns the branch's own state."""
        body = self.stale, self.sharing, self.aug_stale
        self.stale = before[0]
        self.sharing, self.aug_stale = dict(before[1]), dict(before[2])
        return body

    def after_branches(self, body) -> None:
        """After the `else` branch: either path's staleness and sharing may hold."""
        self.stale |= body[0]
        for name, bases in body[1].items():
            self.share(name, self.sharing.get(name, set()) | bases)
        for name, write in body[2].items():
            self.aug_stale.setdefault(name, write)

    # ------------------------------------------------------------------ writes
    def in_place(self, node: ast.AugAssign, env: dict) -> None:
        """`z op= v` on a name: where `z` is an array, NumPy writes into it. That is what s2sad
        computes (a new value of `z`) unless the memory is shared: `z` was bound from another
        array (`z = y`, `z = y[1:]`, a parameter of an inlined function), or another name bound
        from `z` is read after the write. Those cases are refused unless `z` is a scalar."""
        target = node.target.id
        current = env.get(target)
        if current is None:
            return  # (load reports the name used before assignment)
        if current in self.aliases:
            self.hazards.append(
                (
                    current,
                    node,
                    f"`{ast.unparse(node)}` writes in place into `{target}`, which may share "
                    f"memory with `{self.aliases[current]}` (it was assigned from it); s2sad "
                    "does not follow writes through such aliases",
                    f"write `{_rebinding(node)}` to make a new array, or "
                    + _copy_of(target, self.aliases[current]),
                )
            )
        self.aug_written({target}, node, env)

    def aug_written(self, targets: set[str], node: ast.stmt, env: dict) -> None:
        """The arrays `targets` are changed in place by `node`: the names that share their
        memory no longer hold the values they were bound with."""
        for written in sorted(targets):
            for name in self.shared_by.get(written, ()):
                if name not in targets and written in self.sharing.get(name, ()):
                    self.aug_stale[name] = (env.get(written, written), node, written)

    def written_now(self, arrays: set[str]) -> None:
        """`arrays` are written in place here: the views bound from them no longer hold the
        values they were bound with."""
        self.stale |= {v for v, a in self.views.items() if a in arrays}

    def loop_writes(self, body: list[ast.stmt], env: dict) -> None:
        """Views of arrays a loop writes hold other values from its second trip on."""
        for stmt in body:
            for n in ast.walk(stmt):
                if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
                    self.aug_written({n.target.id}, n, env)
        self.written_now(_subscript_stores(body))
        self._carried_aliases(body)
        self._carried_views(body)

    def _carried_aliases(self, body: list[ast.stmt]) -> None:
        """A name the loop writes into (`prev[0] = v`) and binds to another array's memory in
        the body (`prev = y`, after the write): from the second pass on, the write changes that
        array, which the tracking of one pass in order does not see. Refused, as a write
        through an alias is (the adjoint would read the changed values back)."""
        written = _subscript_stores(body)
        for node in (n for stmt in body for n in walk_nodes(stmt)):
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
                continue
            target = node.targets[0]
            if not (isinstance(target, ast.Name) and target.id in written):
                continue
            shared = sorted(self.memory_roots(node.value) - {target.id})
            if not shared:
                continue
            write = next(
                n
                for stmt in body
                for n in walk_nodes(stmt)
                if isinstance(n, ast.Subscript)
                and isinstance(n.ctx, ast.Store)
                and isinstance(n.value, ast.Name)
                and n.value.id == target.id
            )
            raise self.parsed.error(
                UnsupportedSyntaxError,
                f"`{target.id}` is written in place in this loop and bound to `{shared[0]}`'s "
                f"memory by `{ast.unparse(node)}` (line {node.lineno + self.parsed.line_offset}):"
                f" on the next pass the write changes `{shared[0]}`; s2sad does not follow "
                "writes through such aliases",
                write,
                hint=f"assign `{target.id} = {ast.unparse(node.value)}.copy()` (a new array)",
            )

    def _carried_views(self, body: list[ast.stmt]) -> None:
        """A name the loop binds to (a view of) an array it writes in place (`prev = h[0]` at a
        step's end, `h[j] = v` in the next step): from the second pass on, the name holds the
        view bound in the last pass when the body starts, and a write before its binding shows
        through it, which one pass in order does not see. So it is taken as such a view from
        the loop's start: read after the write (before its binding), it is refused as in
        straight code; read before the write, its snapshot holds the right values."""
        stores = _subscript_stores(body)
        updated = {
            n.target.id
            for stmt in body
            for n in walk_nodes(stmt)
            if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name)
        }
        for node in (n for stmt in body for n in walk_nodes(stmt)):
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
                continue
            target = node.targets[0]
            if not isinstance(target, ast.Name):
                continue
            viewed = self.written_view(node.value)
            if viewed is not None and viewed in stores:
                self.views[target.id] = viewed
            bases = self.shared_bases(node.value) - {target.id}
            if bases & updated:
                self.share(target.id, self.sharing.get(target.id, set()) | bases)

    # ------------------------------------------------------------------ hazards
    def read(self, node: ast.Name, env: dict) -> None:
        """The user name `node` is read: a name sharing memory with an array written since, or
        a view of one, is a hazard."""
        if node.id in self.aug_stale:
            written_ssa, write, written = self.aug_stale[node.id]
            self.hazards.append(
                (
                    written_ssa,
                    node,
                    f"`{node.id}` may share memory with `{written}`, which "
                    f"`{ast.unparse(write)}` (line {write.lineno + self.parsed.line_offset}) "
                    f"changes in place after `{node.id}` was assigned; s2sad does not follow "
                    "writes through such aliases",
                    f"write `{_rebinding(write)}` to make a new array, or copy `{node.id}` "
                    f"where it is assigned (`{node.id} = {node.id}.copy()`)",
                )
            )
        if node.id in self.stale:  # refused unless it is a scalar (an element is no view)
            # (after branches that rebind it, the array it may view is not tracked by name)
            base = self.views.get(node.id)
            shown = f"`{base}`" if base else "an array"
            self.hazards.append(
                (
                    env[node.id],
                    node,
                    f"`{node.id}` may be a view of {shown}, which is written in place after "
                    f"`{node.id}` was assigned; s2sad does not follow writes through views",
                    f"copy `{node.id}` where it is assigned (`{node.id} = {node.id}.copy()`), or read "
                    f"{shown} itself after the write",
                )
            )

    def check_hazards(self, stmts: list[ast.stmt], ranks) -> None:
        """Refuse the first in-place write through shared memory (see `in_place`) whose array
        is not known to be a scalar for the arguments' ranks."""
        if not self.hazards:
            return
        shapes = infer_ranks(stmts, dict(ranks or {}))
        for name, node, message, hint in self.hazards:
            if shapes.get(name) != 0 and not _never_a_view(name, stmts, shapes):
                raise self.parsed.error(UnsupportedSyntaxError, message, node, hint=hint)


def _scatter_adds_as_assignments(tree, resolver, local_names) -> set[str]:
    """Rewrite each statement `np.add.at(y, index, v)` (y a local array) as
    `y = scatter_added(y, index, v)`: the values np.add.at leaves in y, by a call with a rule,
    and an assignment every pass follows (loops carry y, branches merge it). Returns the arrays
    so updated: like arrays written in place, their earlier views go stale."""
    updated = set()
    for node in walk_nodes(tree):
        for field in ("body", "orelse"):
            block = getattr(node, field, None)
            if not isinstance(block, list):
                continue
            for k, stmt in enumerate(block):
                if isinstance(stmt, ast.Assign) and ir.is_scatter(stmt.value):
                    updated.add(stmt.targets[0].id)  # rewritten before (a cached tree)
                if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
                    continue
                call = stmt.value
                if len(call.args) != 3 or call.keywords or not isinstance(call.args[0], ast.Name):
                    continue
                if call.args[0].id not in local_names:
                    continue
                if not is_add_at(resolver.resolve(call.func)):
                    continue
                func = ast.copy_location(ast.Name("scatter_added", ast.Load()), call.func)
                ir.set_runtime_helper(func, runtime.scatter_added)
                value = ast.copy_location(ast.Call(func, call.args, []), call)
                ir.mark_scatter(value)
                target = ast.Name(call.args[0].id, ast.Store())
                block[k] = ast.copy_location(ast.Assign([target], value), stmt)
                ast.fix_missing_locations(block[k])
                updated.add(call.args[0].id)
    return updated


def _never_a_view(name: str, stmts: list[ast.stmt], shapes) -> bool:
    """Whether `name` is assigned (only) an item that is no view: an array read at as many
    scalar indices as it has axes (an element: a number, an integer say, whose rank the ranks'
    inference may not know, since the array's dtype is not known)."""
    values = [
        s.value
        for stmt in stmts
        for s in walk_nodes(stmt)
        if isinstance(s, ast.Assign)
        and isinstance(s.targets[0], ast.Name)
        and s.targets[0].id == name
    ]
    if len(values) != 1:
        return False
    value = values[0]
    if isinstance(value, ast.Call) and ir.callee(value.func) is runtime.snapshot and value.args:
        value = value.args[0]
    if not isinstance(value, ast.Subscript):
        return False
    items = value.slice.elts if isinstance(value.slice, ast.Tuple) else [value.slice]
    if any(
        isinstance(i, ast.Slice) or (isinstance(i, ast.Constant) and i.value in (None, Ellipsis))
        for i in items
    ):
        return False
    return all(shapes.of(i) == 0 for i in items) and shapes.of(value.value) == len(items)


def _copy_of(target: str, alias: str) -> str:
    """The copy a hint suggests: of what `target` was bound from, unless that is a row of a
    loop over an array (`B[r_index]`, a name the user never wrote): then of `target` itself."""
    if re.search(r"\b\w+_index\b", alias):
        return f"copy `{target}` before the write (`{target} = {target}.copy()`)"
    return f"assign `{target}` from a copy (`{target} = {alias}.copy()`)"
