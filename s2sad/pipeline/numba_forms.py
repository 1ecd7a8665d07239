"""Stage (jit only, after fusion and row tapes, before emit): the two forms of compiled code that
Python mode has no use for, written into each top-level function's statements that run once a
call (outside loops, into `if`s), in one walk:

- a workspace: each allocation the statements make (`np.empty`, `np.zeros`, a stack product, an
  elementwise `a - b`: rules/pools.py) takes a slot of a last parameter `workspace=None`, which
  s2sad's call hands the compiled function (s2sad/workspace.py keeps its memory between calls);
  called without one (by the Python fallback, another generated function) each is the
  allocation it was. An `s2sad emit --jit` module's code has none (`pooled=False`): its caller
  has no workspace to pass;
- mask checks (`checks`: Numba's bounds checks on, code that indexes: bounds.py): each
  subscript of a name by an item not known to be a number (`x[m]`, `x[i, m]`, `x[y > 0]`,
  `y[m] = v`) becomes `x[mask_fits(x, 0, m)]`, since Numba's `x[m]` takes a boolean mask
  shorter than the axis (its first elements) where NumPy raises IndexError, and its
  `boundscheck` does not check that; `mask_fits` (rules/indexing.py) is `m` itself for any
  other index. Every statement's, loops' too.

Loops' statements (fusion's, the user's) take no slot: a slot taken in a loop would be one
array for every iteration. Save a loop's tapes of rows, made at its first push (row_tapes.py:
`row_tape`, `view_rows`): their helpers hand a slot's region out once a call, a fresh array
after that. The statements changed are copies (the unfused code's and the
fused code's share nodes), each keeping its statement's line and origin (the `# line` comments,
and messages naming the user's line); the text `s2sad.source` shows is the text Numba compiles.
"""

from __future__ import annotations

import ast
import copy
import math

from ..rules.pools import POOLED_BYTES

# allocations of generated code -> the helper taking a slot (rules/pools.py)
_NUMPY = {"empty": "pooled", "zeros": "pooled_zeros"}
_HELPERS = {
    "matmul_stacks": ("pooled_matmul", 2),
    "matmul_vjp_rhs": ("pooled_matmul_vjp_rhs", 3),
    "rows_like": ("pooled_rows_like", 2),
    "row_tape": ("pooled_row_tape", 2),
    "view_rows": ("pooled_view_rows", 2),
}
# made at a loop's first push (row_tapes.py), so in the loop: a slot all the same (the helper
# hands the slot's region out once a call)
_IN_LOOPS = frozenset({"row_tape", "view_rows"})
_BINARY = {
    ast.Sub: "pooled_subtract",
    ast.Add: "pooled_add",
    ast.Mult: "pooled_multiply",
    ast.Div: "pooled_divide",
}
# statements whose insides run any number of times a call (or are not this function's)
REPEATED = (ast.For, ast.While, ast.FunctionDef, ast.With, ast.Try)


class NumbaForms:
    """The pass over one transform's functions: `workspace`, the parameter's name (a name the
    code does not use); `checks`, whether subscripts' masks are checked; `rank_of`, an
    expression's rank where known (arithmetic on numbers takes no slot); `pooled`, whether the
    functions take a workspace (not where a parameter cannot follow theirs: `*args`); `given`,
    the functions' parameters and data."""

    def __init__(self, names: set[str], rank_of, checks: bool, pooled: bool = True, given=()):
        name, k = "workspace", 1
        while name in names:
            k += 1
            name = f"workspace{k}"
        self.workspace = name
        self.rank_of = rank_of
        self.checks = checks
        self.pooled = pooled
        self.given = set(given)  # the parameters and data: a float may be among them

    def function(self, *blocks: list, adjoint: bool = False) -> tuple[list[list], int]:
        """Copies of `blocks`, one function's statements in order, with their allocations taking
        slots numbered from 0, their masks checked and their ranges' bounds (`range_checked`;
        not the last block's where it is an `adjoint`, whose loops' trips the primal's were);
        and the number of slots (0: the function takes no workspace)."""
        self.slots, self.looped, self.counters = 0, False, frozenset()
        given = _given_values([s for b in blocks for s in b], self.given)
        out = [self._block(b) for b in blocks]
        checked = out[:-1] if adjoint else out
        return [range_checked(b, given) for b in checked] + out[len(checked) :], self.slots

    def _block(self, stmts: list) -> list:
        return [self._statement(s) if isinstance(s, ast.stmt) else s for s in stmts]

    def _statement(self, stmt: ast.stmt) -> ast.stmt:
        if isinstance(stmt, ast.FunctionDef) or (
            isinstance(stmt, REPEATED) and not self.checks and not _makes_rows(stmt)
        ):
            return stmt
        looped, counters = self.looped, self.counters
        self.looped = looped or isinstance(stmt, REPEATED)  # (masks checked there, no slots)
        if isinstance(stmt, ast.For) and _counted(stmt):  # (`for i0 in range(n)`: i0 no mask)
            self.counters = counters | {stmt.target.id}
        new = copy.copy(stmt)
        for field in stmt._fields:
            value = getattr(stmt, field, None)
            if isinstance(value, ast.expr):
                setattr(new, field, self._checked(value, stmt))
            elif isinstance(value, list):
                values = [self._part(v, stmt) for v in value]
                if any(v is not w for v, w in zip(values, value)):
                    setattr(new, field, values)
        self.looped, self.counters = looped, counters
        if (
            isinstance(new, ast.Assign)
            and len(new.targets) == 1
            and isinstance(new.targets[0], ast.Name)
            and (not looped or _called(new.value, *_IN_LOOPS))
        ):
            new.value = self._pooled(new.value, stmt)
        changed = any(getattr(new, f, None) is not getattr(stmt, f, None) for f in stmt._fields)
        return new if changed else stmt

    def _part(self, part, stmt: ast.stmt):
        """A statement's item: a nested statement, an `except` clause, a `with` item, an
        expression (a copy where a mask in it is checked)."""
        if isinstance(part, ast.stmt):
            return self._statement(part)
        if isinstance(part, (ast.ExceptHandler, ast.withitem)):
            new = copy.copy(part)
            for field in part._fields:
                value = getattr(part, field, None)
                if isinstance(value, list):
                    setattr(new, field, [self._part(v, stmt) for v in value])
                elif field != "optional_vars":
                    setattr(new, field, self._checked(value, stmt))
            return new
        return self._checked(part, stmt)

    def _checked(self, e, stmt: ast.stmt):
        """`e` with each subscript of a name by names checked (a copy where one is)."""
        if not self.checks or not isinstance(e, ast.expr):
            return e
        if not any(self._masks(n) for n in ast.walk(e)):
            return e
        e = _copied(e)
        for node in ast.walk(e):
            masks = self._masks(node)
            if not masks:
                continue
            tupled = isinstance(node.slice, ast.Tuple)
            items = list(node.slice.elts) if tupled else [node.slice]
            for k, axis in masks:
                call = ast.Call(
                    ast.Name("mask_fits", ast.Load()),
                    [ast.Name(node.value.id, ast.Load()), ast.Constant(axis), items[k]],
                    [],
                )
                items[k] = _at(call, stmt)
            if tupled:
                node.slice.elts = items
            else:
                node.slice = items[0]
        return e

    def _masks(self, node) -> list[tuple[int, int]]:
        """(position, axis) of each item of subscript `node` that may be a boolean array (`x[m]`,
        `x[y > 0]`, `x[:, m]`, `x[..., m]`): an item not known to be a number (`mask_fits` of
        an integer or an index array is that index), where the array is a name. Each item
        takes one axis (`None` none), counted from the front before `...` and from the back
        after it (-1 the mask ending at the last axis, -2 one axis before it); past an item of
        several axes (a mask of them takes as many) the axes are not counted, and nothing
        further from its side is checked. Every mask, in loops too: the code may be compiled
        with Numba's checks (bounds.py could not place its own, an `emit --jit` module), which
        do not check a mask's length (break-it review)."""
        if not isinstance(node, ast.Subscript) or not isinstance(node.value, ast.Name):
            return []
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        dots = [k for k, i in enumerate(items) if isinstance(i, ast.Constant) and i.value is ...]
        front = list(enumerate(items[: dots[0]] if dots else items))
        back = list(reversed(list(enumerate(items))[dots[0] + 1 :])) if dots else []
        out = self._counted(front, lambda axis: axis)
        return out + self._counted(back, lambda axis: -axis - 1)

    def _counted(self, items, axis_of) -> list[tuple[int, int]]:
        """The masks among `items` (position, item), the axis of each given by `axis_of` of the
        number of axes the items before it (in this order) take."""
        out, axis = [], 0
        for k, i in items:
            if isinstance(i, ast.Slice) or isinstance(i, ast.Constant):
                axis += not (isinstance(i, ast.Constant) and i.value is None)
                continue
            rank = self.rank_of(i)
            if rank == 0 or self._counter(i) or _called(i, "slice"):
                axis += 1
                continue
            out.append((k, axis_of(axis)))
            if isinstance(rank, int) and rank > 1:
                break
            axis += 1
        return out

    def _counter(self, item: ast.expr) -> bool:
        """Arithmetic on the variables of the `range` loops around (fusion's `i0`, of a rank
        inference does not know) and integer literals: a number."""
        return all(
            (isinstance(n, ast.Name) and n.id in self.counters)
            or (isinstance(n, ast.Constant) and type(n.value) is int)
            or isinstance(n, (ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop, ast.Load))
            for n in ast.walk(item)
        )

    def _pooled(self, value: ast.expr, stmt: ast.stmt) -> ast.expr:
        """`value` taking the next slot where it is an allocation a slot may hold."""
        found = _allocation(value) if self.pooled else None
        if found is None:
            return value
        helper, operands, dtype = found
        if helper in _NUMPY.values() and _small(operands[0]):
            return value  # (a few numbers: malloc's free lists serve it, no page to fault)
        if isinstance(value, ast.BinOp) and not self._arrays(value):
            return value
        args = [ast.Name(self.workspace, ast.Load()), ast.Constant(self.slots), *operands]
        if dtype is not None:
            args.append(ast.Attribute(ast.Name("np", ast.Load()), dtype, ast.Load()))
        self.slots += 1
        return _at(ast.Call(ast.Name(helper, ast.Load()), args, []), stmt)

    def _arrays(self, value: ast.BinOp) -> bool:
        """Whether arithmetic `value` is on arrays (a slot's helper takes two): an operand known
        to be one, neither known to be a number (nor a length: `x.shape[0] - 1`). Code of
        numbers alone (a CUDA kernel's device function) takes no slot."""
        ranks = [self.rank_of(value.left), self.rank_of(value.right)]
        return 0 not in ranks and any(r is not None and r >= 1 for r in ranks) and not _sizes(value)

    def parameter(self, slots: int) -> list[str]:
        """The parameter a function of `slots` slots takes last: `workspace=None`, or none."""
        return [f"{self.workspace}=None"] if slots else []


def _makes_rows(stmt: ast.stmt) -> bool:
    """Whether a loop makes a tape of rows (a slot, where nothing else in it takes one)."""
    return any(_called(n, *_IN_LOOPS) for n in ast.walk(stmt))


def _counted(loop: ast.For) -> bool:
    """`for i in range(...)` (or `prange`), the body never binding i."""
    call = loop.iter
    return (
        isinstance(loop.target, ast.Name)
        and _called(call, "range", "prange")
        and not any(loop.target.id in _stored(s) for s in loop.body)
    )


def _called(node: ast.expr, *names: str) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names


def _stored(stmt: ast.stmt) -> set:
    return {
        n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
    }


def _allocation(call: ast.expr):
    """(helper, its operands, the dtype to append or None) where `call` is an allocation a slot
    may hold, else None."""
    if isinstance(call, ast.BinOp) and type(call.op) in _BINARY:
        return _BINARY[type(call.op)], [call.left, call.right], None
    if not isinstance(call, ast.Call) or call.keywords:
        return None
    if any(isinstance(a, ast.Starred) for a in call.args):
        return None
    f = call.func
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "np":
        if f.attr in _NUMPY and len(call.args) in (1, 2):
            return _NUMPY[f.attr], call.args, ("float64" if len(call.args) == 1 else None)
    if isinstance(f, ast.Name) and f.id in _HELPERS and len(call.args) == _HELPERS[f.id][1]:
        return _HELPERS[f.id][0], call.args, None
    return None


def _small(shape: ast.expr) -> bool:
    """A shape of literal lengths whose array is under POOLED_BYTES in any dtype (fusion's
    lanes of partial sums: `np.zeros(32)`)."""
    items = shape.elts if isinstance(shape, ast.Tuple) else [shape]
    if not all(isinstance(i, ast.Constant) and type(i.value) is int for i in items):
        return False
    return math.prod(i.value for i in items) * 16 < POOLED_BYTES


def _sizes(node: ast.BinOp) -> bool:
    """Whether `node` is arithmetic on a length or size (`x.shape[0] - (k + 1)`)."""
    return any(_size(e) for e in (node.left, node.right))


def _size(e: ast.expr) -> bool:
    if isinstance(e, ast.BinOp):
        return _size(e.left) or _size(e.right)
    if isinstance(e, ast.Call):
        return isinstance(e.func, ast.Name) and e.func.id == "len"
    if isinstance(e, ast.Attribute):
        return e.attr in ("size", "ndim")
    return (
        isinstance(e, ast.Subscript)
        and isinstance(e.value, ast.Attribute)
        and e.value.attr == "shape"
    )


def _copied(node):
    """A copy of expression `node`'s nodes (what is recorded on them shared, not copied)."""
    new = copy.copy(node)
    for field in node._fields:
        value = getattr(node, field, None)
        if isinstance(value, ast.AST):
            setattr(new, field, _copied(value))
        elif isinstance(value, list):
            setattr(new, field, [_copied(v) if isinstance(v, ast.AST) else v for v in value])
    return new


def _at(node: ast.expr, stmt: ast.stmt) -> ast.expr:
    """`node`, and its new nodes, on `stmt`'s line (where the user's line is read from)."""
    line = getattr(stmt, "lineno", None)
    if line is not None:
        for n in ast.walk(node):
            if getattr(n, "lineno", None) is None:
                n.lineno = n.end_lineno = line
                n.col_offset = n.end_col_offset = 0
    return node


# ------------------------------------------------------------------------------ range bounds


def range_checked(stmts: list, given: set) -> list:
    """`stmts` with `check_range(n)` (rules/loop_tests.py) before each loop over a `range` of
    a bound that may be a float (`range(n)` of a parameter n, or of a value computed from
    one): Python raises TypeError there, where Numba's range truncates it. Copies of the loops
    and branches holding such a loop; the check is nothing, compiled, for integers."""
    out = []
    for stmt in stmts:
        if isinstance(stmt, ast.For) and _floats_maybe(stmt.iter, given):
            call = ast.Call(ast.Name("check_range", ast.Load()), stmt.iter.args, [])
            out.append(_at(ast.Expr(_copied(call)), stmt))
        if isinstance(stmt, (ast.For, ast.While, ast.If)):
            body, orelse = range_checked(stmt.body, given), range_checked(stmt.orelse, given)
            if (
                len(body) != len(stmt.body)
                or len(orelse) != len(stmt.orelse)
                or any(a is not b for a, b in zip(body + orelse, stmt.body + stmt.orelse))
            ):
                stmt = copy.copy(stmt)
                stmt.body, stmt.orelse = body, orelse
        out.append(stmt)
    return out


def _floats_maybe(it: ast.expr, given: set) -> bool:
    """Whether `range(...)` call `it` has a bound that may be a float: a float constant, or an
    expression reading a name of `given` that is not a length (`len(x)`, `x.shape[0]`)."""
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name)):
        return False
    if it.func.id not in ("range", "prange") or it.keywords:
        return False
    return any(not _integer(a) and _reads(a, given) for a in it.args)


def _reads(e: ast.expr, given: set) -> bool:
    return any(
        (isinstance(n, ast.Name) and n.id in given)
        or (isinstance(n, ast.Constant) and type(n.value) is float)
        for n in ast.walk(e)
    )


def _integer(e: ast.expr) -> bool:
    """An expression of integers whatever the values given: int constants, lengths and sizes."""
    if isinstance(e, ast.Constant):
        return type(e.value) in (int, bool)
    if isinstance(e, ast.BinOp):
        return not isinstance(e.op, ast.Div) and _integer(e.left) and _integer(e.right)
    if isinstance(e, ast.UnaryOp):
        return _integer(e.operand)
    return _size(e) or (
        isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id in ("len", "int")
    )


def _given_values(stmts: list, given: set) -> set:
    """`given` and the names assigned from them in `stmts` (`n_stop = n`), transitively."""
    found, more = set(given), True
    assigns = [
        n for s in stmts if isinstance(s, ast.AST) for n in ast.walk(s) if isinstance(n, ast.Assign)
    ]
    while more:
        more = False
        for a in assigns:
            if _integer(a.value) or not _reads(a.value, found):
                continue
            for t in a.targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name) and n.id not in found:
                        found.add(n.id)
                        more = True
    return found
