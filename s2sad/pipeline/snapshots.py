"""Which snapshot copies the generated code can drop. The adjoint reads `snapshot(x[...])`
where `x` may be written in place after the read; the copy is needed only where a later write
reaches the elements read. These passes run on the normalized primal after the reverse pass
(they consume its statements and rank inference's shapes, and drop copies in place);
`FinalReads` proves, for the jitted forms, that no later write in a counting loop reaches a read.
"""

from __future__ import annotations

import ast

from .. import ir
from ..astcopy import walk_nodes
from .fusion.remat import reaching
from .fusion.row_adds import sharing
from .names import simple_statements, statements_in_order
from .normalize.fresh import makes_new_array
from .nodes import stored_base
from .shape_reads import shape_only_reads, value_reads


def scalar_reads_need_no_snapshot(stmts, shapes) -> None:
    """snapshot(x[i]) of a scalar element is x[i]: only a view can change after the read."""
    for stmt in simple_statements(stmts):
        value = getattr(stmt, "value", None)
        if (
            isinstance(value, ast.Call)
            and getattr(value.func, "id", "") == "snapshot"
            and shapes.of(value.args[0]) == 0
        ):
            stmt.value = value.args[0]


def final_reads_need_no_snapshot(stmts, final=lambda read, loops: False) -> None:
    """snapshot(x[...]) keeps what a read saw when `x` is written in place afterwards. Where no
    write to `x` follows the read (later in the code, or anywhere in a loop around the read), or
    `final` proves that no later write reaches the elements read (tape.FinalReads), the view keeps
    it as well, and the copy is dropped."""
    order: list[tuple[ast.stmt, list]] = []  # simple statements in order, with their loops

    def walk(block, loops):
        for stmt in block:
            if isinstance(stmt, (ast.For, ast.While)):
                walk(stmt.body, loops + [stmt])
            elif isinstance(stmt, ast.If):
                walk(stmt.body, loops)
                walk(stmt.orelse, loops)
            else:
                order.append((stmt, loops))

    def writes(node) -> set[str]:
        return {
            n.value.id
            for n in walk_nodes(node)
            if isinstance(n, ast.Subscript)
            and isinstance(n.ctx, ast.Store)
            and isinstance(n.value, ast.Name)
        }

    walk(stmts, [])
    later: set[str] = set()
    for stmt, loops in reversed(order):
        value = getattr(stmt, "value", None)
        if (
            isinstance(value, ast.Call)
            and getattr(value.func, "id", "") == "snapshot"
            and isinstance(value.args[0], ast.Subscript)
            and isinstance(value.args[0].value, ast.Name)
        ):
            base = value.args[0].value.id
            if (base not in later and not any(base in writes(loop) for loop in loops)) or final(
                value.args[0], tuple(loops)
            ):
                stmt.value = value.args[0]
        later |= writes(stmt)


FRESH_ALLOCATORS = {
    "zeros",
    "zeros_like",
    "sum_zeros_like",
    "ones",
    "ones_like",
    "empty",
    "empty_like",
    "full",
    "full_like",
    "copy",
    "array",
}


_MUTATING = {"copyto", "put", "place", "putmask", "fill_diagonal", "at", "shuffle"}


def fresh_arrays(stmts, adjoint_values=frozenset()) -> set[str]:
    """Arrays the function makes itself (np.zeros, x.copy(), x0 * 2.0, ...): writes into them
    need no restoring for the caller's sake, only where the adjoint reads them. A name rebound in
    a loop to arithmetic's new array (`v = v0.copy()`, then `v_new = v * 0.999; v = v_new` for
    `v *= 0.999`) is one too, where the adjoint reads none of the names bound to that array for
    their elements (a write through `v` would change them: only reads of `v` itself are followed).
    """
    defs: dict[str, list] = {}
    for node in walk_nodes(ast.Module(stmts, [])):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            defs.setdefault(node.targets[0].id, []).append(node.value)
    bound = _binding_counts(stmts)

    def allocates(value) -> bool:
        if not isinstance(value, ast.Call):
            return False
        func = value.func
        short = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        # (`y = np.where(c, a, b)`, `y = np.cumsum(x)`: a new array, as np.zeros's is)
        return short in FRESH_ALLOCATORS or makes_new_array(ir.callee(func), value)

    def new_array(value) -> bool:  # a name bound once, to arithmetic's result or an allocation
        if not isinstance(value, ast.Name) or value.id in adjoint_values:
            return False
        if bound.get(value.id) != 1:
            return False
        (of,) = defs.get(value.id) or [None]
        return isinstance(of, (ast.BinOp, ast.UnaryOp)) or allocates(of)

    fresh = set()
    for name, values in defs.items():
        if len(values) == 1 and allocates(values[0]):
            fresh.add(name)
        elif bound.get(name) == len(values) and all(
            allocates(v) or new_array(v) or isinstance(v, (ast.BinOp, ast.UnaryOp)) for v in values
        ):  # (`y = x0 * 2.0`: arithmetic's new array, as `y = x0.copy()` is)
            fresh.add(name)
    return fresh


def _binding_counts(stmts) -> dict[str, int]:
    """How many times each name is bound, by any kind of binding."""
    counts: dict[str, int] = {}
    for n in walk_nodes(ast.Module(stmts, [])):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            counts[n.id] = counts.get(n.id, 0) + 1
    return counts


def written_memory(primal: list[ast.stmt]) -> set[str] | None:
    """The names that may share memory with an array the code writes into (`z[1:] = v`), or
    None where a write this cannot follow is there (`out=`, a mutating call, a write into an
    attribute). A view of an array no one writes into (`y[:-1]`, `y` rebound, never written)
    keeps its values: a tape may hold it without a copy."""
    written = set()
    for node in walk_nodes(ast.Module(list(primal), [])):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            base = stored_base(node)
            if base is None:
                return None
            written.add(base)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            written.add(node.target.id)  # `a += b` writes into an array
        elif isinstance(node, ast.Call):
            if any(k.arg == "out" for k in node.keywords):
                return None
            func = node.func
            short = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if short in _MUTATING or (isinstance(func, ast.Attribute) and short == "fill"):
                return None
    return reaching(written, sharing(primal))


def _bound_targets(node) -> list[str]:
    """Names a statement binds (assignment targets, loop targets)."""
    targets = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For)):
        targets = [node.target]
    out = []
    for t in targets:
        for n in walk_nodes(t):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                out.append(n.id)
    return out


def _allocates_fresh(value) -> bool:
    """np.zeros(...)-like calls and `x.copy()`: a new array no other name shares."""
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    short = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if short not in FRESH_ALLOCATORS or any(
        k.arg not in ("dtype", "order") for k in value.keywords
    ):
        return False
    if short == "copy" and isinstance(func, ast.Attribute) and not value.args:
        return True  # x.copy()
    callee = ir.callee(func)
    return callee is not None and getattr(callee, "__module__", "").startswith("numpy")


class FinalReads:
    """Which element reads in a loop see the element's final value, so that the adjoint can read
    it again from the array instead of recording it: in

        y = np.zeros(n)
        for i in range(1, n):
            y[i] = a * y[i - 1] + x[i]

    iteration i reads y[i - 1], which no later iteration writes (they write y[j], j > i), and
    nothing after the loop writes y. Only the simplest, provable case is taken:

    - `y` is the function's own array, bound once (np.zeros(...), x.copy(), or a parameter the
      code copies and never rebinds), and every array the function writes into is such an array
      (no write can reach `y` through a view); `y` is not passed whole to a call that could
      write into it (`out=`, a method);
    - the read lies in a `for i in range(start, stop[, step])` loop L that no other loop encloses,
      with `i` not reassigned, a positive constant step, and `start` a constant (or absent);
    - every write into `y` comes before L, or lies in L with an index whose position p is
      `i + c_w` (c_w a constant), with only integers or slices before it; the read has
      `i + c_r` at the same position, with c_r < c_w, and start + c_r >= 0, start + c_w >= 0
      (no index wraps around to the end of the array); or the write is a statement of L's body
      before the one holding the read, both at `i + c` along the first axis (the iteration's
      own row, written before it is read: `y[i] = v; s = s + np.sum(y[i])`).

    Then in every later iteration (and later in the same one) each write's index at p is at
    least i + c_w > i + c_r: it names another element. Restores of overwritten elements in the
    adjoint write those same other elements back, so the element still holds, in the reversed
    iteration, the value the read saw."""

    def __init__(self, primal: list[ast.stmt], owned=(), is_int=lambda node: False):
        self.is_int = is_int  # whether an index expression is an integer (ranks.Ranks)
        module = ast.Module(list(primal), [])
        self.order = {id(s): k for k, s in enumerate(statements_in_order(primal))}
        binds: dict[str, list] = {}
        for node in walk_nodes(module):
            for t in _bound_targets(node):
                binds.setdefault(t, []).append(getattr(node, "value", None))
        self.own: set[str] = set()
        for name, values in binds.items():
            if len(values) == 1 and _allocates_fresh(values[0]):
                self.own.add(name)
        self.own |= {p for p in owned if p not in binds}
        # every write into an array: base name -> [(subscript, statement)]
        self.writes: dict[str, list] = {}
        self.broken = False  # a write this analysis cannot follow: then nothing is final
        for stmt in statements_in_order(primal):
            for node in walk_nodes(stmt):
                if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
                    if not isinstance(node.value, ast.Name) or node.value.id not in self.own:
                        self.broken = True
                    else:
                        self.writes.setdefault(node.value.id, []).append((node, stmt))
                if isinstance(node, ast.Call) and any(k.arg == "out" for k in node.keywords):
                    self.broken = True
        self.escaped = set()  # arrays used whole where something might write into them
        for node in walk_nodes(module):
            if isinstance(node, ast.Call):
                func = node.func
                if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                    if func.attr != "copy":
                        self.escaped.add(func.value.id)
                callee = ir.callee(func)
                if callee is None or getattr(callee, "__name__", "") in _MUTATING:
                    for a in node.args:
                        if isinstance(a, ast.Name):
                            self.escaped.add(a.id)
        self.top = {id(s) for s in primal}  # statements no block encloses

    def final(self, read: ast.Subscript, loops: tuple) -> bool:
        base = read.value.id if isinstance(read.value, ast.Name) else None
        if self.broken or base not in self.own or base in self.escaped or not loops:
            return False
        outer = loops[0]
        if not isinstance(outer, ast.For) or id(outer) not in self.top:
            return False
        loop = _counting(outer)
        if loop is None:
            return False
        index, start = loop
        inside = {id(s) for s in statements_in_order(outer.body)}
        first = min((self.order.get(i, 0) for i in inside), default=0)
        read_items = _index_items(read.slice)
        if read_items is None:
            return False
        reading = next((s for s in outer.body if any(n is read for n in walk_nodes(s))), None)
        for sub, stmt in self.writes.get(base, []):
            if id(stmt) in inside:
                items = _index_items(sub.slice)
                if items is None:
                    return False
                if not _leading_ok(read_items, items, index, start, self.is_int) and not (
                    _own_row(read_items, items, index, start)
                    and any(s is stmt for s in outer.body)
                    and reading is not None
                    and self.order.get(id(stmt), 0) < self.order.get(id(reading), 0)
                ):
                    return False
            elif self.order.get(id(stmt), first) >= first:
                return False  # written after the loop
        return True


def _counting(loop: ast.For):
    """(index, start) of `for index in range(start, stop[, step])` with a constant integer
    start (0 when absent) and a positive constant step; else None."""
    it = loop.iter
    if not (
        isinstance(loop.target, ast.Name)
        and isinstance(it, ast.Call)
        and isinstance(it.func, ast.Name)
        and it.func.id == "range"  # the normalized loops' own (pipeline/normalize/)
        and 1 <= len(it.args) <= 3
        and not it.keywords
    ):
        return None
    start = 0
    if len(it.args) >= 2:
        start = _int_constant(it.args[0])
    step = _int_constant(it.args[2]) if len(it.args) == 3 else 1
    if start is None or step is None or step <= 0:
        return None
    index = loop.target.id
    assigned = sum(
        1
        for n in walk_nodes(ast.Module(loop.body, []))
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id == index
    )
    return (index, start) if assigned == 0 else None


def _int_constant(node):
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _int_constant(node.operand)
        return None if inner is None else -inner
    return None


def _index_items(index) -> list | None:
    """The items of a basic index (integers and slices), or None for anything else (an array,
    None, an Ellipsis, a name holding a tuple)."""
    items = index.elts if isinstance(index, ast.Tuple) else [index]
    for item in items:
        if isinstance(item, ast.Constant) and (item.value is None or item.value is Ellipsis):
            return None
    return list(items)


def _offset(item, index: str):
    """c where `item` is `index + c`, `index - c`, `c + index` or `index` (c a constant)."""
    if isinstance(item, ast.Name) and item.id == index:
        return 0
    if isinstance(item, ast.BinOp) and isinstance(item.op, (ast.Add, ast.Sub)):
        left, right = item.left, item.right
        if isinstance(left, ast.Name) and left.id == index:
            c = _int_constant(right)
            if c is not None:
                return c if isinstance(item.op, ast.Add) else -c
        if isinstance(item.op, ast.Add) and isinstance(right, ast.Name) and right.id == index:
            return _int_constant(left)
    return None


def _apart(read_item, write_item, index: str, start: int) -> bool:
    """The write, in this or any later iteration, names another element along this axis."""
    c_r, c_w = _offset(read_item, index), _offset(write_item, index)
    return c_r is not None and c_w is not None and c_r < c_w and start + c_r >= 0


def _own_row(read_items, write_items, index: str, start: int) -> bool:
    """Read and write name row `i + c` (the same c, start + c >= 0) along the first axis: only
    iteration i writes that row. (A write in the loop's body itself, before the read, is then
    the row's last: `y[i] = v; s = s + np.sum(y[i])`.)"""
    c_r, c_w = _offset(read_items[0], index), _offset(write_items[0], index)
    return c_r is not None and c_r == c_w and start + c_r >= 0


def _leading_ok(read_items, write_items, index: str, start: int, is_int) -> bool:
    """The items before the first axis where read and write are apart are integers or slices
    in both (so that positions name the same axes), and no write index wraps around."""
    for r, w in zip(read_items, write_items):
        if _apart(r, w, index, start):
            c_w = _offset(w, index)
            return start + c_w >= 0
        if not all(isinstance(e, ast.Slice) or is_int(e) for e in (r, w)):
            return False
    return False


def rebound_reads_need_no_snapshot(stmts) -> None:
    """`k = snapshot(z)` of a whole array keeps what `z` held when a write into it follows. In

        for _ in range(s):
            z = np.zeros_like(y)     # bound nowhere else
            z[0] = x[0]
            z[1:] = x[1:] * y[:-1]
            k = snapshot(z)          # (an inlined function's `return z`)

    every write into `z` comes before the read, in the block that binds `z` afresh before them:
    a later write (the next pass's) goes into another array. Where that holds, and nothing that
    may share the memory of `z` or `k` is written into anywhere else, `k = z`."""
    bound: dict[str, list] = {}
    for node in walk_nodes(ast.Module(list(stmts), [])):
        for name in _bound_targets(node):
            bound.setdefault(name, []).append(getattr(node, "value", None))
    arrays = {n for n, vs in bound.items() if len(vs) == 1 and _allocates_fresh(vs[0])}
    links = sharing(stmts, arrays)
    for block in _all_blocks(stmts):
        for p, stmt in enumerate(block):
            value = stmt.value if _snapshot_read(stmt) else None
            if value is None or not isinstance(value.args[0], ast.Name):
                continue
            z = value.args[0].id
            values = bound.get(z, [])
            if len(values) != 1 or not _allocates_fresh(values[0]):
                continue
            q = next((j for j, s in enumerate(block) if z in _bound_targets(s)), None)
            if q is None or q > p:
                continue
            shared = reaching({z, stmt.targets[0].id}, links) | {z, stmt.targets[0].id}
            if _written_only_between(stmts, block, q, p, shared):
                stmt.value = value.args[0]


def _snapshot_read(stmt) -> bool:
    """Whether `stmt` is `n = snapshot(expr)`."""
    value = getattr(stmt, "value", None)
    return (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and isinstance(value, ast.Call)
        and getattr(value.func, "id", "") == "snapshot"
        and len(value.args) == 1
    )


def _all_blocks(stmts):
    yield stmts
    for stmt in stmts:
        if isinstance(stmt, (ast.If, ast.For, ast.While)):
            yield from _all_blocks(stmt.body)
            yield from _all_blocks(stmt.orelse)


def _written_only_between(stmts, block, q: int, p: int, names: set[str]) -> bool:
    """Whether every write into the arrays `names` lies in `block[q + 1 : p]` (a write into an
    element, not `a += b` on the whole: that too is refused)."""
    inside = {id(n) for s in block[q + 1 : p] for n in walk_nodes(s)}
    for node in walk_nodes(ast.Module(list(stmts), [])):
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            if node.target.id in names:
                return False
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            base = stored_base(node)
            if base is None or (base in names and id(node) not in inside):
                return False
        if isinstance(node, ast.Call) and any(k.arg == "out" for k in node.keywords):
            return False
    return True


def shape_read_snapshots_need_no_copy(stmts, adjoint, kept=()) -> None:
    """`n = snapshot(x[...])` keeps what the read saw for whoever reads `n` after a write into
    `x`. In `v[1:-1] += dt * a` (normalized `v_item = snapshot(v[1:-1])`, ..., `v_add = v_item +
    v_div`, `v[1:-1] = v_add`) the primal reads `n` for its elements only before the write, and
    the adjoint for its shape alone (`unbroadcast(dv_add, v_item)`), which a write leaves as it
    was: the copy, one array a step in a loop, is dropped (`n = x[...]`). Refused where `n` is
    bound more than once, kept (`kept`: outputs, parameters), read by the adjoint for its
    elements, read by the primal for its elements after a write that may reach its memory, or
    assigned to another name that may share its memory."""
    adjoint_values = value_reads(adjoint)
    bound: dict[str, int] = {}
    for node in walk_nodes(ast.Module(list(stmts), [])):
        for name in _bound_targets(node):
            bound[name] = bound.get(name, 0) + 1
    skip = shape_only_reads(stmts)
    for block in _all_blocks(stmts):
        for p, stmt in enumerate(block):
            value = stmt.value if _snapshot_read(stmt) else None
            if not (
                value is not None
                and isinstance(value.args[0], ast.Subscript)
                and isinstance(value.args[0].value, ast.Name)
            ):
                continue
            n, base = stmt.targets[0].id, value.args[0].value.id
            if bound.get(n) != 1 or n in kept or _computed_from(stmts, n, skip) & adjoint_values:
                continue
            links = sharing(stmts)
            if links.get(n):
                continue  # a name assigned from `n` may be a view of it
            memory = reaching({base, n}, links) | {base, n}
            q = next(
                (j for j in range(p + 1, len(block)) if _writes_into(block[j], memory)),
                len(block),
            )
            before = {id(node) for s in block[p + 1 : q] for node in walk_nodes(s)}
            reads = [
                node
                for node in walk_nodes(ast.Module(list(stmts), []))
                if isinstance(node, ast.Name)
                and node.id == n
                and isinstance(node.ctx, ast.Load)
                and id(node) not in skip
            ]
            if all(id(node) in before for node in reads):
                stmt.value = value.args[0]


def _computed_from(stmts, name: str, skip: set[int]) -> set[str]:
    """`name` and the names whose values the statements compute from its elements: the adjoint
    may compute such a value again (the tape's `recompute`), reading `name` then."""
    found, grown = {name}, True
    while grown:
        grown = False
        for stmt in simple_statements(stmts):
            reads = {
                n.id
                for n in walk_nodes(stmt)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and id(n) not in skip
            }
            new = set(_bound_targets(stmt)) - found
            if reads & found and new:
                found |= new
                grown = True
    return found


def _writes_into(stmt, names: set[str]) -> bool:
    """Whether `stmt` may write into the memory of `names` (a write it cannot follow counts)."""
    for node in walk_nodes(stmt):
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            if node.target.id in names:
                return True
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            base = stored_base(node)
            if base is None or base in names:
                return True
        if isinstance(node, ast.Call):
            func = node.func
            short = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if any(k.arg == "out" for k in node.keywords) or short in _MUTATING or short == "fill":
                return True
    return False
