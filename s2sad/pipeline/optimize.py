"""Stage 5: optimize. Adjoint code built one rule at a time is full of copies (`dy_mul = dy_add`,
`dy_new = dy`); a reader should not have to follow them. Two rewrites, both local to one block
of statements and both checked against every assignment in the function:

- a copy `b = a` right after `a = b`, with neither changed in between, is dropped;
- a copy `a = b` whose name is assigned nowhere else and read only later in the same block is
  forwarded: its reads become `b`, provided `b` does not change before the last of them.

The rewrites are applied one at a time, always the first that applies in reading order (a
statement, then the blocks inside it), until none does. Doing that literally (re-walking the
whole function for every candidate after every rewrite) costs the square of the function's
length, so the same sequence of rewrites is found with bookkeeping that each rewrite updates:

- every statement's assigned and read names (its whole subtree) are counted once, and a rewrite
  adjusts the counts of the statements it changes and of the statements around them;
- a copy `c = d` that was tried and cannot be rewritten is remembered, and skipped until a
  rewrite touches `c` or `d`. A rewrite of the copy `a = b` only changes assignments and reads of
  `a` and `b` (it deletes `a = b` or `b = a` and turns reads of `a` into reads of `b`), and every
  condition checked for `c = d` is about assignments, reads and copies of `c` and `d`;
- after a rewrite the search resumes at the earliest copy that may now apply: the rewritten one's
  place, or an earlier copy whose remembered failure the rewrite invalidated. The copies that may
  apply are kept in a heap by place, so resuming does not step over the statements between;
- a statement's position in its block is its first position less the deletions before it
  (a Fenwick tree per block), not a search of the block.
"""

from __future__ import annotations

import ast
import heapq
from collections import Counter

from .bounds import indexes_by_integers
from .fusion.syntax import written_in_place
from .nodes import assigned_name


def _is_copy(stmt) -> tuple[str, str] | None:
    target = assigned_name(stmt)
    if target is not None and isinstance(stmt.value, ast.Name):
        return target, stmt.value.id
    return None


class _RenameReads(ast.NodeTransformer):
    """Reads of `old` become reads of `new` (a copy `old = new` forwarded)."""

    def __init__(self, old: str, new: str):
        self.old, self.new = old, new

    def visit_Name(self, node):
        if node.id == self.old and isinstance(node.ctx, ast.Load):
            return ast.copy_location(ast.Name(self.new, ast.Load()), node)
        return node


def _blocks(stmt) -> list[list]:
    """The statement lists the search goes into: `body`, then `orelse`."""
    out = []
    for name in ("body", "orelse"):
        inner = getattr(stmt, name, None)
        if isinstance(inner, list):
            out.append(inner)
    return out


def _own_names(stmt, blocks: list[list]) -> tuple[Counter, Counter]:
    """Names `stmt` assigns and reads outside the blocks the search goes into (those statements
    are counted on their own): what `_assigned` and `_reads` count, in one walk."""
    assigned, reads = Counter(), Counter()
    if not isinstance(stmt, ast.AST):
        return assigned, reads
    skip = {id(b) for b in blocks}
    todo = [stmt]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Store):
                assigned[node.id] += 1
            elif isinstance(node.ctx, ast.Load):
                reads[node.id] += 1
            continue
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            assigned[node.target.id] += 1
        for field in node._fields:
            value = getattr(node, field, None)
            if isinstance(value, ast.AST):
                todo.append(value)
            elif isinstance(value, list) and id(value) not in skip:
                todo.extend(v for v in value if isinstance(v, ast.AST))
    return assigned, reads


class _Optimizer:
    def __init__(self, body: list, protected: set[str]):
        self.protected = protected
        self.order: dict[int, int] = {}  # statement id -> its place in reading order
        self.stmts: list = []  # statements in reading order (never moved, some deleted)
        self.block_of: dict[int, list] = {}  # statement id -> the list holding it
        self.parent: dict[int, object] = {}  # statement id -> the statement around it
        self.children: dict[int, list] = {}  # statement id -> statements directly inside
        self.assigned: dict[int, Counter] = {}  # statement id -> names its subtree assigns
        self.reads: dict[int, Counter] = {}  # statement id -> names its subtree reads
        self.dead: set[int] = set()
        self.counts, self.total_reads = Counter(), Counter()  # over the whole function
        self.failed: dict[int, tuple[str, str]] = {}  # copy id -> the copy that could not go
        self.failed_by_name: dict[str, set[int]] = {}
        self.assigners: dict[str, list] = {}  # name -> statements assigning it (not nested)
        self.slot: dict[int, int] = {}  # statement id -> its first place in its block
        self.gone: dict[int, list] = {}  # block id -> deletions before each slot (Fenwick)
        for i, stmt in enumerate(body):
            self.slot[id(stmt)] = i
            self._index(stmt, body, None)
            self.counts.update(self.assigned[id(stmt)])
            self.total_reads.update(self.reads[id(stmt)])
        self.gone[id(body)] = [0] * (len(body) + 1)

    def _index(self, stmt, block: list, parent) -> None:
        key = id(stmt)
        self.order[key] = len(self.stmts)
        self.stmts.append(stmt)
        self.block_of[key] = block
        self.parent[key] = parent
        blocks = _blocks(stmt)
        assigned, reads = _own_names(stmt, blocks)
        for name in assigned:
            self.assigners.setdefault(name, []).append(stmt)
        kids = []
        for inner in blocks:
            self.gone[id(inner)] = [0] * (len(inner) + 1)
            for i, s in enumerate(inner):
                self.slot[id(s)] = i
                self._index(s, inner, stmt)
                assigned.update(self.assigned[id(s)])
                reads.update(self.reads[id(s)])
                kids.append(s)
        self.children[key] = kids
        self.assigned[key], self.reads[key] = assigned, reads

    # ------------------------------------------------------------------ bookkeeping

    def _around(self, stmt):
        """The statements enclosing `stmt`, innermost first."""
        outer = self.parent[id(stmt)]
        while outer is not None:
            yield outer
            outer = self.parent[id(outer)]

    def _position(self, block: list, stmt) -> int:
        """`block.index(stmt)` without reading the block: its first place less the statements
        deleted before it (a loop body of n statements is looked up n times)."""
        tree, k = self.gone[id(block)], self.slot[id(stmt)]
        before = 0
        while k > 0:
            before += tree[k]
            k -= k & -k
        return self.slot[id(stmt)] - before

    def _delete(self, block: list, index: int) -> None:
        stmt = block.pop(index)
        tree, k = self.gone[id(block)], self.slot[id(stmt)] + 1
        while k < len(tree):
            tree[k] += 1
            k += k & -k
        assigned, reads = self.assigned[id(stmt)], self.reads[id(stmt)]
        for total in [self.counts] + [self.assigned[id(s)] for s in self._around(stmt)]:
            total.subtract(assigned)
            _drop_zeros(total, assigned)
        for total in [self.total_reads] + [self.reads[id(s)] for s in self._around(stmt)]:
            total.subtract(reads)
            _drop_zeros(total, reads)
        self.dead.add(id(stmt))

    def _rename(self, stmt, old: str, new: str):
        moved = self.reads[id(stmt)][old]
        renamed = _RenameReads(old, new).visit(stmt)
        assert renamed is stmt
        todo = [stmt]
        while todo:  # the statement and every statement inside it
            s = todo.pop()
            counts = self.reads[id(s)]
            n = counts.pop(old, 0)
            if n:
                counts[new] += n
            todo.extend(self.children[id(s)])
        if moved:
            for counts in [self.total_reads] + [self.reads[id(s)] for s in self._around(stmt)]:
                counts[old] -= moved
                if not counts[old]:
                    del counts[old]
                counts[new] += moved
        return renamed

    def _fail(self, stmt, copy: tuple[str, str]) -> None:
        self.failed[id(stmt)] = copy
        for name in copy:
            self.failed_by_name.setdefault(name, set()).add(id(stmt))

    def _invalidate(self, names) -> list[int]:
        """Forget the failures a rewrite touching `names` may have undone; the places of the
        copies to try again."""
        places = []
        for name in names:
            for key in self.failed_by_name.pop(name, ()):
                if self.failed.pop(key, None) is not None and key not in self.dead:
                    places.append(self.order[key])
        return places

    def _first_assigning(self, block: list, stmt, a: str, b: str):
        """The first statement of `block` after `stmt` that assigns `a` or `b` (in itself or in a
        statement inside it), or None; from the statements assigning them, or by reading the
        block where it is shorter."""
        assigners = self.assigners.get(a, []) + self.assigners.get(b, [])
        start = self.order[id(stmt)]
        if len(assigners) >= len(block):
            for later in block[self._position(block, stmt) + 1 :]:
                names = self.assigned[id(later)]
                if a in names or b in names:
                    return later
            return None
        first = None
        for s in assigners:
            if id(s) in self.dead:
                continue
            while s is not None and self.block_of[id(s)] is not block:
                s = self.parent[id(s)]
            if s is not None and self.order[id(s)] > start:
                if first is None or self.order[id(s)] < self.order[id(first)]:
                    first = s
        return first

    # ------------------------------------------------------------------ the search

    def run(self) -> None:
        # the places of the copies that may apply (not deleted, not failed as they now read),
        # smallest first: the copies a forward scan from the earliest of them would try, in its
        # order, without stepping over every statement between (a loop body of n statements
        # and n rewrites that each send the scan back would cost n squared steps)
        pending = [place for place, stmt in enumerate(self.stmts) if _is_copy(stmt)]
        while pending:
            place = heapq.heappop(pending)
            stmt = self.stmts[place]
            key = id(stmt)
            copy = None if key in self.dead else _is_copy(stmt)
            if copy is None or self.failed.get(key) == copy:
                continue
            if not self._try(stmt, copy):
                self._fail(stmt, copy)
                continue
            if key not in self.dead:
                heapq.heappush(pending, place)
            for again in self._invalidate(set(copy)):
                heapq.heappush(pending, again)

    def _try(self, stmt, copy) -> bool:
        a, b = copy
        block = self.block_of[id(stmt)]
        i = self._position(block, stmt)
        if a == b:
            self._delete(block, i)
            return True
        assigned = self.assigned
        # a later `b = a` with neither changed in between is redundant, even where `b` is
        # protected: b keeps the value it has (`dx_new = dx`, then `dx = dx_new` of an identity
        # adjoint); none where `b` is assigned nowhere (the search ends at the first assignment)
        if self.counts[b]:
            later = self._first_assigning(block, stmt, a, b)
            if later is not None and _is_copy(later) == (b, a):
                self._delete(block, self._position(block, later))
                return True
        if a in self.protected or self.counts[a] != 1:
            return False
        # every read of `a` is later in this block: the last is where their count is reached
        total = self.total_reads[a]
        seen, last = 0, None
        for j in range(i + 1, len(block)):
            n = self.reads[id(block[j])][a]
            if n:
                seen += n
                if seen == total:
                    last = j
                    break
        if last is None:
            return False  # read elsewhere (another block) or never
        for j in range(i + 1, last):
            if b in assigned[id(block[j])]:
                return False
        if b in assigned[id(block[last])] and not isinstance(block[last], ast.Assign):
            return False  # inside a loop or branch, b may change before a is read
        for j in range(i + 1, last + 1):
            block[j] = self._rename(block[j], a, b)
        self._delete(block, i)
        return True


def _drop_zeros(total: Counter, names) -> None:
    for name in names:
        if total[name] <= 0:
            del total[name]


def optimize(stmts: list, protected: set[str]) -> list:
    """`stmts` with redundant copies removed; names in `protected` are never forwarded away
    (a back copy `b = a` after `a = b`, which changes nothing, goes for them too)."""
    module = ast.Module(stmts, [])
    _Optimizer(module.body, protected).run()
    return module.body


_PURE_BUILTINS = frozenset({"float", "int", "abs", "min", "max", "len"})


def _pure(expr: ast.expr) -> bool:
    """Whether computing `expr` changes nothing: arithmetic, subscripts and calls of NumPy's
    functions (not np.random's, which advance a generator) or a few builtins."""
    for node in ast.walk(expr):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name):
                if func.id not in _PURE_BUILTINS:
                    return False
                continue
            chain = []
            while isinstance(func, ast.Attribute):
                chain.append(func.attr)
                func = func.value
            if not (isinstance(func, ast.Name) and func.id == "np") or "random" in chain:
                return False
        elif isinstance(node, (ast.NamedExpr, ast.Lambda, ast.Await, ast.Yield, ast.YieldFrom)):
            return False
    return True


def drop_unread(stmts: list, later: list, keep: set[str], rerun: bool) -> list:
    """`stmts` without the top-level assignments of pure values to names that nothing reads:
    not `stmts`, not the statements `later` (the adjoint), not `keep` (the outputs, but in a
    re-running pullback's sweep, which computes the function's value only where its adjoint
    reads it). Its errors go with it: a dead `np.linalg.inv(a)` raises no LinAlgError. There a
    read by an index stays (`x[k]`): it raises IndexError where the index is out of range
    (jitted code checks it), before the adjoint's `add_at(dx, k, g)` would write there; where
    the outputs are kept, a value nothing reads has no cotangent, so no adjoint indexes by it."""
    while True:
        reads = Counter(
            n.id
            for n in ast.walk(ast.Module(list(stmts) + list(later), []))
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
        )
        kept = [
            s
            for s in stmts
            if (name := assigned_name(s)) is None
            or reads[name]
            or name in keep
            or not _pure(s.value)
            or (rerun and indexes_by_integers([s]))
        ]
        if len(kept) == len(stmts):
            return kept
        stmts = kept


# NumPy functions of one array, pure: the same argument gives the same value
_UNARY = frozenset(
    "sin cos tan sinh cosh tanh arcsin arccos arctan arcsinh arccosh arctanh exp exp2 expm1 "
    "log log2 log10 log1p sqrt cbrt square reciprocal".split()
)


def _unary_call(node) -> tuple[str, str] | None:
    """(`f`, `x`) for `np.f(x)` of a name, one positional argument."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "np"
        and node.func.attr in _UNARY
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Name)
        and not node.keywords
    ):
        return node.func.attr, node.args[0].id
    return None


class _ReadComputed(ast.NodeTransformer):
    """`np.f(x)` becomes `y` where the primal computed `y = np.f(x)`."""

    def __init__(self, computed: dict):
        self.computed = computed

    def visit_Call(self, node):
        self.generic_visit(node)
        name = self.computed.get(_unary_call(node))
        return ast.copy_location(ast.Name(name, ast.Load()), node) if name else node


def read_primal_values(primal: list, adjoint: list, params) -> list:
    """The adjoint with `np.f(x)` read as `y` where the primal's top level computed
    `y = np.f(x)`: a rule's `g * np.cos(x)` beside the primal's `c = np.cos(x)` (BA's
    rotation), where the adjoint would compute the cosine again (once per seed in a stacked
    pullback). Only where `y` is bound once in the function, `x` once before it at the top
    level (or a parameter never bound), and neither is written into anywhere."""
    nodes = [s for s in list(primal) + list(adjoint) if isinstance(s, ast.AST)]
    bound = Counter(
        n.id
        for n in ast.walk(ast.Module(nodes, []))
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    )
    written = written_in_place(nodes)
    computed: dict[tuple[str, str], str] = {}
    before: set[str] = {p for p in params if bound[p] == 0}
    for stmt in primal:
        name = assigned_name(stmt) if isinstance(stmt, ast.AST) else None
        call = _unary_call(stmt.value) if name is not None else None
        if (
            call is not None
            and call[1] in before
            and bound[name] == 1
            and not {name, call[1]} & written
        ):
            computed.setdefault(call, name)
        if name is not None and bound[name] == 1:
            before.add(name)
    if not computed:
        return adjoint
    return [_ReadComputed(computed).visit(s) if isinstance(s, ast.AST) else s for s in adjoint]
