"""Buffers made once before a loop, for the fused jitted code: an array a fused run in the loop's
body allocates and writes every element of, each iteration, is allocated before the loop and
reused, where nothing it makes outlives the iteration.

    for t in range(n):                        dk_buffer = np.empty(dy.shape, dy.dtype)
        ...                                   for t in range(n):
        if fusible(dy_new, k):                    ...
            dk = np.empty(dy_new.shape, ...)      if fusible(dy_new, k):
            for i0 in range(...):                     dk = reused(dk_buffer, dy_new.shape, ...)
                dk[i0] = ...                          for i0 in range(...):

`reused` (rules/loop_tests.py) hands back the buffer where its shape and dtype are those asked
for, else a fresh array: the buffer's shape, read before the loop, is the first iteration's
guess (each name the allocation reads as it stands at the loop's entry, through the body's plain
copies, `dy_new = dy`), so a shape that changes from one iteration to the next costs what it cost
before, never a wrong value. The array does not outlive the iteration when nothing it may share
memory with (the names assigned from an expression reading it, transitively) is read before
being assigned in the body (carried to the next iteration), read outside the loop, returned,
appended to a list (a tape keeping a reference: `push_row` and `shape_push` copy or read its
shape only), stored into a container not known as an array, or passed to a call not known to
keep no reference. A buffer made before an inner loop moves before the loops around it too,
where the names its shape reads are defined there. The 32 lanes a fused run in the body adds a
sum into (`s_lanes = np.zeros(32)`) are made before the loop too, and zeroed at each iteration
(`reused_zeros`). The pass runs on the fused jitted code only,
after the tapes of rows; it consumes and produces statement lists.
"""

from __future__ import annotations

import ast
import copy

from ..astcopy import clone, walk_nodes
from .. import ir
from ..rules.helpers import SHAPE_ONLY
from .fusion.extents import UNIT, Extents
from .names import certainly_assigned, names_mentioned, read_before_assigned
from .nodes import assign_to, call_of, load_name
from .normalize import NameAllocator

# calls whose result shares no memory with their arguments, or that keep none of them (a
# `shape_stub`'s name is read for its shape alone: what its elements become
# is never read)
_FRESH = frozenset(
    {"row_tape", "shape_push", "shape_pop", "push_row", "add_at", "sum_over", "mean_over"}
    | {"push_shape_row", "pop_shape_row"}
    | {"fusible", "float_arrays", "len", "expand_reduced", "snapshot", "shape_stub"}
)
# the argument read for its shape
_SHAPE_TAPES = {"shape_push": 1, "shape_pop": 1, "row_tape": 0, "pop_shape_row": 2}
_SHAPE_ATTRS = frozenset({"shape", "dtype", "size", "ndim"})
_ALLOCATORS = {"empty": "reused", "zeros": "reused_zeros"}


def hoist_buffers(blocks: list[list], reads: list, params, taken: set[str], rank_of) -> list:
    """`blocks` (a function's statement lists, in order) with the fused runs' arrays in loops
    allocated before them where they can be; `reads` are the function's other nodes that read
    values (outputs, returned gradients), `params` its parameters, `taken` every name it uses."""
    everything = [s for b in blocks for s in b] + list(reads)
    hoister = _Hoister(rank_of, NameAllocator(taken | names_mentioned(everything)))
    hoister.extents = Extents(everything, rank_of)
    defined = set(params)
    out = []
    end = [[ast.Expr(r) for r in reads]]  # what the function returns reads last
    for k, block in enumerate(blocks):
        out.append(hoister.block(block, defined, blocks[k + 1 :] + end))
        defined |= certainly_assigned(block)
    return out


class _Hoister:
    def __init__(self, rank_of, names: NameAllocator):
        self.rank_of, self.names = rank_of, names
        self.buffers: set[str] = set()  # the buffers made so far

    def block(self, stmts: list, defined: set, after: list) -> list:
        """`stmts` with their loops' buffers made before them; `after`, the statement lists
        that may run after them, in order (a loop around them: the loop statement itself)."""
        out: list = []
        defined = set(defined)
        for k, stmt in enumerate(stmts):
            then = [stmts[k + 1 :]] + after
            if isinstance(stmt, (ast.For, ast.While)):
                stmt = copy.copy(stmt)
                inner = set(defined)
                if isinstance(stmt, ast.For) and isinstance(stmt.target, ast.Name):
                    inner.add(stmt.target.id)
                stmt.body = self.block(stmt.body, inner, [[stmt]] + then)
                out += self.hoist(stmt, defined, _exposed(then))
            elif isinstance(stmt, ast.If) and not _fused_guard(stmt):
                stmt = copy.copy(stmt)
                stmt.body = self.block(stmt.body, defined, then)
                stmt.orelse = self.block(stmt.orelse, defined, then)
            out.append(stmt)
            defined |= certainly_assigned([stmt])
        return out

    def hoist(self, loop, defined: set, outside: set) -> list:
        """The allocations made before `loop` (its body rewritten in place); `outside` are the
        names read after it before being assigned."""
        carried = _exposed([[loop]])  # read in the body before it assigns them
        made: list = []
        body = list(loop.body)
        for k, stmt in enumerate(loop.body):
            if _fused_guard(stmt):
                inner = list(stmt.body)
                for m, alloc in enumerate(stmt.body):
                    if _lanes(alloc):  # a sum's lanes: zeroed in place at each iteration
                        buffer = self.names.fresh(f"{alloc.targets[0].id}_buffer")
                        made.append(ir.copy_origin(assign_to(buffer, clone(alloc.value)), loop))
                        shape, dtype = _attribute(buffer, "shape"), _attribute(buffer, "dtype")
                        call = call_of("reused_zeros", load_name(buffer), shape, dtype)
                        inner[m] = ir.copy_origin(assign_to(alloc.targets[0].id, call), alloc)
                        continue
                    kind = _allocation(alloc)
                    if kind is None:
                        continue
                    buffer = self.buffer_before(
                        alloc, stmt, loop, body[:k], defined, outside, carried
                    )
                    if buffer is None:
                        continue
                    made.append(buffer)
                    shape, dtype = alloc.value.args
                    call = call_of(_ALLOCATORS[kind], load_name(buffer.targets[0].id), shape, dtype)
                    inner[m] = ir.copy_origin(assign_to(alloc.targets[0].id, call), alloc)
                if inner != stmt.body:
                    body[k] = copy.copy(stmt)
                    body[k].body = inner
            elif self.snapshot(stmt):  # `x = snapshot(v)`: copied into a buffer
                name = stmt.targets[0].id
                like = call_of("np.empty", _attribute(name, "shape"), _attribute(name, "dtype"))
                # (the arrays a fused run reading it tests it against have its shape)
                guard = next((g for g in body[k:] if name in _guarded(g)[0]), None)
                buffer = self.buffer_before(
                    assign_to(name, like), guard, loop, body[: k + 1], defined, outside, carried
                )
                if buffer is not None:
                    made.append(buffer)
                    into = call_of("snapshot_into", load_name(buffer.targets[0].id))
                    into.args += stmt.value.args
                    body[k] = ir.copy_origin(assign_to(name, into), stmt)
            elif _allocation(stmt) == "empty" and stmt.targets[0].id in self.buffers:
                # a buffer made before an inner loop: before this one too, where it can be
                before = [s for s in body[:k] if s is not None]
                moved = self.move_before(stmt, before, defined, outside, carried)
                if moved:
                    made.append(stmt)
                    body[k] = None
        loop.body = [s for s in body if s is not None]
        return made

    def buffer_before(self, alloc, guard, loop, before: list, defined, outside, carried):
        """The allocation of `alloc` (in the fused run behind `guard`, or one reading a snapshot)
        made before `loop`, or None where it cannot be."""
        name = alloc.targets[0].id
        if self.escapes(name, loop.body, outside, carried):
            return None
        shapes, dtypes = _guarded(guard)
        entry = []
        for expr, alike in zip(alloc.value.args, (shapes, dtypes)):
            # (the guard's arrays of one shape, or of one dtype, stand for each other)
            known = [expr] + (
                [_attribute(a, expr.attr) for a in alike] if _attribute_in(expr, alike) else []
            )
            found = [f for f in (self.entry(e, before, defined) for e in known) if f is not None]
            fixed = [f for f in found if not (names_mentioned([f[0]]) & set(self.extents.counts))]
            entry += (fixed + found + [[]])[0]
        if len(entry) != 2:
            return None
        buffer = self.names.fresh(f"{name}_buffer")
        self.buffers.add(buffer)
        made = assign_to(buffer, ast.Call(clone(alloc.value.func), entry, []))
        made.value.func.attr = "empty"
        return ir.copy_origin(made, loop)

    def snapshot(self, stmt) -> bool:
        """Whether `stmt` is `x = snapshot(v)` of an array `x` (a copy made each iteration)."""
        return (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and isinstance(stmt.value, ast.Call)
            and _callee(stmt.value) == "snapshot"
            and len(stmt.value.args) == 1
            and not stmt.value.keywords
            and isinstance(self.rank_of(stmt.targets[0]), int)
            and self.rank_of(stmt.targets[0]) >= 1
        )

    def move_before(self, stmt, before: list, defined, outside, carried) -> bool:
        name = stmt.targets[0].id
        if name in carried or name in outside or _assigned_in(before, name):
            return False
        entry = [self.entry(e, before, defined) for e in stmt.value.args]
        if None in entry:
            return False
        stmt.value.args = [e for [e] in entry]
        return True

    def entry(self, expr, before: list, defined: set) -> list | None:
        """[`expr`] as it stands at the loop's entry, or None: each name through the body's
        copies before it (`_at_entry`), or an array's shape from the lengths of its axes where
        fusion's extents relate each to an axis of an argument (`(x.shape[1],)` for a row of
        `x`), and its dtype from the array a view or an element of which it is. Of those, one
        reading only names the function never assigns, where there is one: its buffer moves out
        of the loops around this one too."""
        found = [_at_entry([expr], before, defined)]
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
            if expr.attr == "shape":
                shape = self.shape_of(expr.value.id, defined)
                found.append(None if shape is None else [shape])
            elif expr.attr == "dtype":
                base = _viewed(expr.value.id, before)
                if base is not None:
                    found.append(_at_entry([_attribute(base, "dtype")], before, defined))
        found = [f for f in found if f is not None and self.arrays_only(f[0])]
        fixed = [f for f in found if not (names_mentioned([f[0]]) & set(self.extents.counts))]
        return (fixed + found + [None])[0]

    def arrays_only(self, expr) -> bool:
        """Whether each `x.shape` and `x.dtype` in `expr` is an array's (of a known rank): the
        allocation runs before the loop, in Python too (a checkpointed loop's code)."""
        return all(
            isinstance(self.rank_of(n.value), int) and self.rank_of(n.value) >= 1
            for n in walk_nodes(expr)
            if isinstance(n, ast.Attribute) and n.attr in _SHAPE_ATTRS
        )

    def shape_of(self, name: str, defined: set):
        """`name`'s shape as a tuple of the lengths of axes of arrays in `defined`, or None."""
        axes = self.extents.found.get(name)
        if axes is None or None in axes:
            return None
        sizes = []
        for axis in axes:
            root, removed = self.extents.canonical(axis)
            if (root, removed) == UNIT:
                sizes.append(ast.Constant(1))
                continue
            size = None
            for member in [root] + list(self.extents.parent):
                if member[0] != "in" or member[1] not in defined:
                    continue
                other, fewer = self.extents.canonical((member, 0))
                if other == root:
                    size = _length(member, fewer - removed)
                    break
            if size is None:
                return None
            sizes.append(size)
        return ast.Tuple(sizes, ast.Load())

    def escapes(self, name: str, body: list, outside: set, carried: set) -> bool:
        """Whether `name`'s array, or one sharing its memory, may outlive an iteration of the
        loop whose body is `body`."""
        aliases = {name}
        grown = True
        while grown:
            grown = False
            for node in walk_nodes(ast.Module(body, [])):
                for target in self.aliased_by(node, aliases):
                    if target is None:
                        return True
                    if target not in aliases:
                        aliases.add(target)
                        grown = True
        return bool(aliases & (outside | carried))

    def aliased_by(self, node, aliases: set):
        """The names `node` makes share memory with `aliases` (None: a reference kept where the
        pass does not follow it)."""
        if isinstance(node, ast.For):  # the rows of an array are views of it
            return _leaves_named(node.target) if self.shares(node.iter, aliases) else []
        if isinstance(node, ast.Return):
            return [None] if self.shares(node.value, aliases) else []
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            call = node.value
            if isinstance(call.func, ast.Attribute) and call.func.attr in (
                "append",
                "extend",
                "insert",
            ):
                return [None] if any(self.shares(a, aliases) for a in call.args) else []
            return [None] if self.shares(call, aliases) else []
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            if not self.shares(node.value, aliases):
                return []
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out = []
            for target in targets:
                for leaf in _leaves(target):
                    if isinstance(leaf, ast.Name):
                        out.append(leaf.id)
                    elif isinstance(leaf, ast.Subscript) and isinstance(leaf.value, ast.Name):
                        # elements copied into an array; a list would keep the reference
                        if not isinstance(self.rank_of(leaf.value), int):
                            out.append(None)
                    else:
                        out.append(None)
            return out
        return []

    def shares(self, node, aliases: set) -> bool:
        """Whether the value of `node` may share memory with (or keep) an array in `aliases`."""
        if node is None or isinstance(node, ast.Constant):
            return False
        if isinstance(node, ast.Name):
            return node.id in aliases
        if isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Compare)):
            return False  # arithmetic makes a fresh array (or a number), never a view
        if isinstance(node, ast.Attribute):
            return node.attr not in _SHAPE_ATTRS and self.shares(node.value, aliases)
        if isinstance(node, ast.Subscript):  # a view, or an element
            return self.rank_of(node) != 0 and self.shares(node.value, aliases)
        if isinstance(node, (ast.Tuple, ast.List)):
            return any(self.shares(e, aliases) for e in node.elts)
        if isinstance(node, ast.IfExp):
            return self.shares(node.body, aliases) or self.shares(node.orelse, aliases)
        if isinstance(node, ast.Call):
            name = _callee(node)
            if name in _FRESH:
                return False
            shape_only = _shape_only_args(node)
            args = [a for k, a in enumerate(node.args) if k not in shape_only]
            args += [k.value for k in node.keywords]
            if isinstance(node.func, ast.Attribute):  # a method: its object too
                args.append(node.func.value)
            return any(self.shares(a, aliases) for a in args)
        return any(isinstance(n, ast.Name) and n.id in aliases for n in walk_nodes(node))


def _callee(call: ast.Call) -> str | None:
    return call.func.id if isinstance(call.func, ast.Name) else None


def _leaves_named(target) -> list:
    return [leaf.id if isinstance(leaf, ast.Name) else None for leaf in _leaves(target)]


def _leaves(target):
    if isinstance(target, (ast.Tuple, ast.List)):
        return [leaf for elt in target.elts for leaf in _leaves(elt)]
    if isinstance(target, ast.Starred):
        return _leaves(target.value)
    return [target]


def _fused_guard(stmt) -> bool:
    """Whether `stmt` is a fused run's `if fusible(...) ...:` (pipeline/fusion)."""
    if not isinstance(stmt, ast.If):
        return False
    return any(
        isinstance(n, ast.Call) and _callee(n) in ("fusible", "float_arrays")
        for n in walk_nodes(stmt.test)
    )


def _lanes(stmt) -> bool:
    """Whether `stmt` makes the lanes a fused run adds a sum into, `s_lanes = np.zeros(32)`
    (fusion/loops.py): read by that run alone, never outliving it."""
    return (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and stmt.targets[0].id.endswith("_lanes")
        and isinstance(stmt.value, ast.Call)
        and ast.unparse(stmt.value.func) == "np.zeros"
        and len(stmt.value.args) == 1
        and isinstance(stmt.value.args[0], ast.Constant)
        and not stmt.value.keywords
    )


def _allocation(stmt) -> str | None:
    """ "empty" or "zeros" for `x = np.empty(a.shape, a.dtype)` (or a tuple of sizes), else None."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
        return None
    if not isinstance(stmt.targets[0], ast.Name) or not isinstance(stmt.value, ast.Call):
        return None
    func, args = stmt.value.func, stmt.value.args
    if not (
        isinstance(func, ast.Attribute)
        and func.attr in _ALLOCATORS
        and isinstance(func.value, ast.Name)
        and func.value.id == "np"
        and len(args) == 2
        and not stmt.value.keywords
    ):
        return None
    shape, dtype = args
    if not (isinstance(shape, ast.Tuple) or _attribute_of(shape, "shape")):
        return None
    return func.attr if _attribute_of(dtype, "dtype") else None


def _guarded(guard) -> tuple[list[str], list[str]]:
    """The arrays `guard` (a fused run's `if`, else nothing) tests to be of one shape
    (`fusible`), and of one dtype (those and `float_arrays`'), in order."""
    shapes, dtypes = [], []
    if not _fused_guard(guard):
        return shapes, dtypes
    for node in walk_nodes(guard.test):
        if isinstance(node, ast.Call) and _callee(node) in ("fusible", "float_arrays"):
            names = [a.id for a in node.args if isinstance(a, ast.Name)]
            dtypes += [n for n in names if n not in dtypes]
            if _callee(node) == "fusible":
                shapes += [n for n in names if n not in shapes]
    return shapes, dtypes


def _attribute_in(node, names: list) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id in names
    )


def _attribute(name: str, attr: str) -> ast.Attribute:
    return ast.Attribute(load_name(name), attr, ast.Load())


def _attribute_of(node, attr: str) -> bool:
    return (
        isinstance(node, ast.Attribute) and node.attr == attr and isinstance(node.value, ast.Name)
    )


def _at_entry(exprs: list, before: list, defined: set) -> list | None:
    """`exprs` with each name as it stands at the loop's entry (a name the body assigns before,
    through its plain copies `n = m`), or None where one is not defined there."""
    out = []
    for expr in exprs:
        expr = clone(expr)
        for node in walk_nodes(expr):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id != "np":
                entry = _entry_name(node.id, before, defined)
                if entry is None:
                    return None
                node.id = entry
        out.append(expr)
    return out


def _entry_name(name: str, before: list, defined: set) -> str | None:
    for k in range(len(before) - 1, -1, -1):
        stmt = before[k]
        if not _assigned_in([stmt], name):
            continue
        single = (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
        )
        if single and isinstance(stmt.value, ast.Name) and not _assigned_in(before[:k], name):
            return _entry_name(stmt.value.id, before[:k], defined)  # `n = m`
        if single and _shape_popped(stmt.value, name):
            return _entry_name(name, before[:k], defined)  # `n = shape_pop(n_tape, n)`
        return None
    return name if name in defined else None


def _length(root: tuple, more: int) -> ast.expr:
    """`x.shape[k]`, plus `more`, for the root `("in", x, k)` (fusion/extents.py)."""
    _, name, k = root
    size = ast.Subscript(_attribute(name, "shape"), ast.Constant(k), ast.Load())
    if more == 0:
        return size
    op = ast.Add() if more > 0 else ast.Sub()
    return ast.BinOp(size, op, ast.Constant(abs(more)))


def _viewed(name: str, before: list) -> str | None:
    """The array `name` is a view, an element or a copy of one of (`n = x[...]`,
    `n = snapshot(x[...])`, `n = snapshot_into(n_buffer, x[...])`), assigned once in `before`."""
    found = [s for s in before if _assigned_in([s], name)]
    if len(found) != 1:
        return None
    stmt = found[0]
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
        return None
    value = stmt.value
    if isinstance(value, ast.Call) and _callee(value) in ("snapshot", "snapshot_into"):
        value = value.args[-1]  # a copy, of the same dtype
    if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name):
        return value.value.id
    return None


def _shape_popped(value, name: str) -> bool:
    """Whether `value` is `shape_pop(tape, name)`: a stand-in of the shape `name` was recorded
    with (shape_tapes.py), whose last one is the shape `name` has at the loop's entry."""
    return (
        isinstance(value, ast.Call)
        and _callee(value) == "shape_pop"
        and len(value.args) == 2
        and isinstance(value.args[1], ast.Name)
        and value.args[1].id == name
    )


def _assigned_in(stmts: list, name: str) -> bool:
    return any(
        isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
        for n in walk_nodes(ast.Module(stmts, []))
    )


def _reads(node) -> set[str]:
    """The names `node` reads, but for their shape or dtype alone (`x.shape`, `unbroadcast(g,
    x)`'s `x`, a shape tape's): a buffer's shape never changes, so a stand-in sharing it (a
    value read after a fused run for its shape only, fusion/loops.py) may outlive it."""
    out: set[str] = set()
    if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
        out.add(node.target.id)  # (`x += v` reads x)
    stack = [node]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Attribute) and node.attr in _SHAPE_ATTRS:
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            out.add(node.id)
        elif isinstance(node, ast.Call):
            skip = _shape_only_args(node)
            stack += [a for k, a in enumerate(node.args) if k not in skip]
            stack += [node.func] + [k.value for k in node.keywords]
        else:
            stack += list(ast.iter_child_nodes(node))
    return out


def _shape_only_args(call: ast.Call) -> set[int]:
    """The positions of `call`'s arguments it reads for their shape and dtype alone."""
    name = _callee(call)
    if name in _SHAPE_TAPES:
        return {_SHAPE_TAPES[name]}
    return {k for k, _ in SHAPE_ONLY.get(name, ())}


def _exposed(lists: list) -> set[str]:
    """The names the statement lists `lists`, run in order, may read before assigning them. A
    `break` goes on after the loop it leaves, the list `[loop]` that `block` puts after the
    lists of the loop's body, skipping the lists between: from there on, the names surely
    assigned are only those assigned at the `break` too."""
    out: set[str] = set()
    bound: set[str] = set()
    breaks: list = []  # (a `break`, the names surely assigned there) not yet past its loop
    for stmts in lists:
        end = read_before_assigned(stmts, bound, out, _reads, breaks)
        if len(stmts) == 1 and isinstance(stmts[0], (ast.For, ast.While)) and breaks:
            inside = {id(n) for n in walk_nodes(stmts[0])}
            bound = bound.intersection(*(b for brk, b in breaks if id(brk) in inside))
            breaks = [(brk, b) for brk, b in breaks if id(brk) not in inside]
        elif end is not None:
            bound = end
    return out
