"""Loop independence (`parallel=True`, jitted code only): which `for` loops run their
iterations independently, so that parallel.py can write them as Numba `prange` loops.

A loop `for i in range(...)` is independent when one iteration never sees another's work:
- every array it writes is either allocated by the iteration itself, or written and read only at
  indices whose first component is `i` itself (`y[i] = ...`, `Y[i, j] = ...`, `Y[i, :]`), and
  is an array the function allocated or was passed (not a global, no view of it read in the
  loop under another name);
- every name read in an iteration before the iteration assigns it is a sum: `s = s + e`,
  `s = s - e` or `s += e`, possibly through temporaries (`t = s + a`, `s = t + b`), read nowhere
  else in the loop, and a number (in adjoint code an array too: an adjoint keeps its primal's
  shape, where the user's array sum may grow by broadcasting); nothing else it assigns is read
  after the loop;
- it leaves by no `break`, pushes or pops no tape, and calls nothing that writes in place
  (other than `add_at`, followed as a write).
In adjoint code (`plan(..., params=None)`), additions into shared arrays at other indices
(`add_at(dw, k, g)`, `dx[j] += g`) are accepted too where the array is only ever added into in
the loop: parallel.py gives each thread a row of partial sums.

`plan` reads one loop of final (lowered) code; `independent_loops` reads the normalized primal
before the tape pass, which then recomputes an independent loop's values in its adjoint instead
of recording them (a tape is a list only one thread may push onto), and refuses a loop the user
wrote as `numba.prange` that is not independent. Consumes statement lists; produces `Plan`s.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from .. import ir
from ..astcopy import walk_nodes
from ..errors import UnsupportedSyntaxError
from .names import assigned, names_mentioned, names_read
from .nodes import constant_value
from .raising import value_errors

# calls that write into an argument: a loop making them is not independent
_WRITING_METHODS = {"append", "pop", "extend", "insert", "remove", "clear", "sort", "fill"}
_WRITING_METHODS |= {"put", "itemset", "resize", "setfield", "partition", "setflags"}
_WRITING_FUNCTIONS = {"copyto", "put", "place", "putmask", "fill_diagonal", "put_along_axis"}
_ALLOCATORS = {"zeros", "zeros_like", "ones", "ones_like", "empty", "empty_like", "full"}
_ALLOCATORS |= {"full_like", "copy", "array", "snapshot", "sum_zeros_like"}


@dataclass
class Plan:
    """How one loop runs on threads: its sums, and the arrays added into at shared indices."""

    loop: ast.For
    sums: dict = field(default_factory=dict)  # name -> the statements of its chain, in order
    shared: set = field(default_factory=set)  # arrays added into at indices other threads use
    hoist: list = field(default_factory=list)  # statements of loop invariants read after it


def _leading(index: ast.expr) -> ast.expr:
    return index.elts[0] if isinstance(index, ast.Tuple) and index.elts else index


def _base(node: ast.Subscript):
    """The array a subscript chain reads or writes, and its first index (`Y[i][j]`: Y, i)."""
    while isinstance(node.value, ast.Subscript):
        node = node.value
    return (node.value.id, node.slice) if isinstance(node.value, ast.Name) else (None, None)


def callee_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _allocates(value: ast.expr) -> bool:
    """A new array no other name shares: an allocation or a copy."""
    return isinstance(value, ast.Call) and callee_name(value) in _ALLOCATORS


class _Accesses:
    """The array accesses of a loop body: for each array, (kind, first index) with kind "read",
    "write" or "add", and the arrays read whole (passed to a call, bound to a name)."""

    def __init__(self, body: list):
        self.of: dict[str, list] = {}
        self.whole: set[str] = set()
        self.hazard: str | None = None
        inside: set[int] = set()
        for node in walk_nodes(ast.Module(body, [])):
            if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Subscript):
                name, index = _base(node.target)
                kind = "add" if isinstance(node.op, (ast.Add, ast.Sub)) else "write"
                self._note(name, kind, index, node.target, inside)
            elif isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Subscript):
                        name, index = _base(t)
                        self._note(name, "write", index, t, inside)
            elif isinstance(node, ast.Call):
                self._call(node, inside)
            elif isinstance(node, ast.Subscript) and id(node) not in inside:
                name, index = _base(node)
                self._note(name, "read", index, node, inside)
            elif isinstance(node, ast.Name) and id(node) not in inside:
                if isinstance(node.ctx, ast.Load):
                    self.whole.add(node.id)

    def _note(self, name, kind, index, node, inside) -> None:
        chain = node
        while isinstance(chain, ast.Subscript):
            inside.add(id(chain))
            chain = chain.value
        inside.add(id(chain))
        if name is not None:
            self.of.setdefault(name, []).append((kind, index))
        elif kind != "read":  # `a.T[i] = v`: into an array with no name of its own
            self.hazard = f"`{ast.unparse(node)}` writes through an attribute or a call"

    def _call(self, call: ast.Call, inside) -> None:
        name = callee_name(call)
        module = getattr(ir.callee(call.func), "__module__", None) or ""
        if "random" in ast.unparse(call.func) or module.startswith("numpy.random"):
            self.hazard = f"`{ast.unparse(call)}` draws random numbers (in order, serially)"
        elif any(k.arg == "out" for k in call.keywords):
            self.hazard = f"`{ast.unparse(call)}` writes into its `out=`"
        elif isinstance(call.func, ast.Attribute) and name in _WRITING_METHODS:
            base = call.func.value
            if isinstance(base, ast.Name) and base.id.endswith("_tape") and name == "append":
                self.hazard = (  # (tape.py's lists: a value of each iteration the adjoint reads)
                    f"its adjoint reads values of each iteration from a tape ({base.id}), which "
                    "one thread at a time may push onto"
                )
            elif not (isinstance(base, ast.Name) and base.id in ("np", "math")):
                self.hazard = f"`{ast.unparse(call)}` writes into {ast.unparse(base)}"
        elif name == "check_index":  # (bounds.py: an index not proven in range)
            self.hazard = (
                f"it checks an index ({ast.unparse(call.args[0])}), and Numba's threads lose "
                "the IndexError a check raises"
            )
        elif name in _WRITING_FUNCTIONS:
            self.hazard = f"`{ast.unparse(call)}` writes into its argument"
        elif name == "add_at" and call.args and isinstance(call.args[0], ast.Name):
            target = call.args[0]
            inside.add(id(target))
            index = call.args[1] if len(call.args) > 1 else None
            self.of.setdefault(target.id, []).append(("add", index))


def _reads_before_assigned(block: list, defined: set, out: set) -> set:
    """Names `block` reads before it surely assigns them (into `out`); returns what is surely
    assigned after it."""
    defined = set(defined)
    for stmt in block:
        if isinstance(stmt, ast.If):
            out |= names_read([stmt.test]) - defined
            a = _reads_before_assigned(stmt.body, defined, out)
            b = _reads_before_assigned(stmt.orelse, defined, out)
            defined |= a & b
        elif isinstance(stmt, (ast.For, ast.While)):
            head = stmt.iter if isinstance(stmt, ast.For) else stmt.test
            out |= names_read([head]) - defined
            inner = defined | (
                names_mentioned([stmt.target]) if isinstance(stmt, ast.For) else set()
            )
            _reads_before_assigned(stmt.body, inner, out)
        elif isinstance(stmt, ast.AST):
            out |= names_read([stmt]) - defined
            if isinstance(stmt, ast.Assign):
                for t in stmt.targets:
                    if isinstance(t, (ast.Name, ast.Tuple)):
                        defined |= names_mentioned([t])
    return defined


def statements(block: list):
    """Every statement of `block`, with the list holding it, at any depth."""
    for stmt in block:
        yield stmt, block
        if isinstance(stmt, (ast.If, ast.For, ast.While)):
            yield from statements(stmt.body)
            yield from statements(stmt.orelse)


def _sum_chain(name: str, body: list):
    """The statements by which an iteration adds into `name` (`t = s + a; s = t + b`, or
    `s += a`), in order and in one block; None where `name` is used in any other way."""
    uses = [
        (s, blk)
        for s, blk in statements(body)
        if not isinstance(s, (ast.If, ast.For, ast.While)) and name in names_mentioned([s])
    ]
    if len(uses) == 1:
        s, _ = uses[0]
        if (
            isinstance(s, ast.AugAssign)
            and isinstance(s.target, ast.Name)
            and isinstance(s.op, (ast.Add, ast.Sub))
            and name not in names_mentioned([s.value])
        ):
            return [s]
    chain, current, block = [], name, None
    for _ in range(len(uses) + 1):
        readers = [
            (s, blk)
            for s, blk in statements(body)
            if isinstance(s, ast.AST)
            and not isinstance(s, (ast.If, ast.For, ast.While))
            and current in names_read([s])
        ]
        if len(readers) != 1:
            return None
        s, blk = readers[0]
        if block is not None and blk is not block:
            return None
        block = blk
        if not (isinstance(s, ast.Assign) and len(s.targets) == 1):
            return None
        target = s.targets[0]
        if not isinstance(target, ast.Name):
            return None
        if chain and isinstance(s.value, ast.Name) and target.id == name:
            return chain + [s] if s.value.id == current else None  # `s = t`: the chain's end
        value = s.value
        if not (isinstance(value, ast.BinOp) and isinstance(value.op, (ast.Add, ast.Sub))):
            return None
        left = isinstance(value.left, ast.Name) and value.left.id == current
        right = isinstance(value.right, ast.Name) and value.right.id == current
        other = value.right if left else value.left
        if not (left or (right and isinstance(value.op, ast.Add))) or current in names_mentioned(
            [other]
        ):
            return None
        if name in names_mentioned([other]):
            return None
        chain.append(s)
        if target.id == name:  # `s = s + e`
            return chain if len(chain) == 1 else None
        current = target.id
    return None


def _range_args(loop) -> list | None:
    """The bounds of a loop over `range(n)` or `range(a, b)` (step 1), else None."""
    it = loop.iter
    if not (
        isinstance(loop, ast.For)
        and isinstance(loop.target, ast.Name)
        and isinstance(it, ast.Call)
        and isinstance(it.func, ast.Name)
        and it.func.id in ("range", "prange")
        and 1 <= len(it.args) <= 2
        and not it.keywords
    ):
        return None
    return it.args


def _non_negative(node: ast.expr) -> bool:
    """Whether `node` is an expression of integer constants whose value is 0 or more."""
    value = constant_value(node)
    return type(value) is int and value >= 0


def plan(loop, after: list, outside: list, rank_of, params=frozenset()):
    """A `Plan` for running `loop` on threads, or why it cannot (a string). `after`: the
    statements that run after it (where its values could be read); `outside`: every statement
    of the function outside it; `rank_of`: a name's rank where known. `params`: a set of arrays
    the code owns (own parameters, fresh allocations) that the loop may write at its index, or
    None to trust every array written (adjoint code, which writes only arrays it owns)."""
    bounds = _range_args(loop)
    if bounds is None:
        return "it is not a loop over range(n) or range(a, b)"
    if len(bounds) == 2 and not _non_negative(bounds[0]):
        # x[-1] is x[n - 1]: two iterations of range(-n, n) write one element
        return "its range may start below 0, where indices count from the end"
    i = loop.target.id
    body = loop.body
    if any(isinstance(s, ast.Break) for s, _ in statements(body)):
        return "it may leave early (`break`)"
    if i in assigned(body):
        return f"it assigns its index {i}"
    acc = _Accesses(body)
    if acc.hazard:
        return acc.hazard
    lost = value_errors(body, i, rank_of)  # (an error on threads is lost: raising.py)
    if lost:
        return lost
    mine = assigned(body)
    carried: set[str] = set()
    _reads_before_assigned(body, {i}, carried)
    carried &= mine
    result = Plan(loop)
    for name in sorted(carried):
        chain = _sum_chain(name, body)
        if chain is None:
            return f"{name} carries a value from one iteration to the next"
        if name in acc.of:
            return f"{name} is summed whole and written by element"
        rank = rank_of(ast.Name(name, ast.Load()))
        if rank is None:
            return f"the rank of {name}, which it sums, is not known"
        if rank != 0 and params is not None:
            # a row per thread needs the sum's shape before the loop, and the user's sum may
            # grow by broadcasting ((1, n) + (m, n)); an adjoint keeps its primal's shape
            return f"{name} is an array sum, whose shape may change in the loop"
        result.sums[name] = chain
    live = set()
    _reads_before_assigned(after, set(), live)
    if i in live:  # on threads, each thread's last index is its own
        return f"its index {i} is read after it"
    local = (mine - set(result.sums)) & live
    for name in sorted(local):
        invariant = _invariant(name, body, mine | {i} | set(acc.of))
        if invariant is None:
            return f"{name}, assigned in it, is read after it"
        result.hoist.append(invariant)
    private = {
        t.id
        for s, blk in statements(body)
        if blk is body and isinstance(s, ast.Assign) and _allocates(s.value)
        for t in s.targets
        if isinstance(t, ast.Name)
    }
    for name, uses in sorted(acc.of.items()):
        kinds = {k for k, _ in uses}
        if name in mine:
            if name in private and name not in carried and kinds != {"read"}:
                continue  # an array each iteration allocates
            if kinds == {"read"}:
                continue
            return f"it writes into {name}, which it also binds"
        if kinds == {"read"}:
            continue
        at_index = all(
            ix is not None and isinstance(_leading(ix), ast.Name) and _leading(ix).id == i
            for _, ix in uses
        )
        if at_index and name not in acc.whole:
            if params is not None and name not in params:
                return f"it writes into {name}, which may share memory with other arrays"
            if params is not None and _viewed(name, outside, names_mentioned(body)):
                return f"it reads a view of {name}, which it writes"
            continue
        if kinds == {"add"} and name not in acc.whole and params is None:
            if rank_of(ast.Name(name, ast.Load())) in (None, 0):
                return f"the rank of {name}, which it adds into, is not known"
            result.shared.add(name)
            continue
        return f"it writes into {name} at other indices than [{i}, ...], or reads it there"
    return result


def _invariant(name: str, body: list, varying: set):
    """The statement of `body` assigning `name` from values no iteration changes, with no call
    and no subscript but a shape's (`range_sub = n1 - 1`): it can run once before the loop.
    None if there is none such."""
    assigning = [s for s, _ in statements(body) if name in assigned([s])]
    if len(assigning) != 1 or not any(s is assigning[0] for s in body):
        return None
    stmt = assigning[0]
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
        return None
    for n in walk_nodes(stmt.value):  # nothing that may raise where the loop would not run
        if isinstance(n, ast.Call) or (
            isinstance(n, ast.Subscript)
            and not (isinstance(n.value, ast.Attribute) and n.value.attr == "shape")
        ):
            return None
    return None if names_read([stmt.value]) & varying else stmt


_VIEWS = {"reshape", "ravel", "transpose", "swapaxes", "moveaxis", "squeeze", "expand_dims"}
_VIEWS |= {"broadcast_to", "asarray", "diagonal", "flip", "fliplr", "flipud", "rot90", "view"}
_VIEWS |= {"atleast_1d", "atleast_2d", "atleast_3d", "real", "imag", "T", "flat"}


def _viewed(name: str, outside: list, used: set) -> bool:
    """Whether a name the loop reads may be a view of `name`, bound outside the loop."""
    views, grew = {name}, True
    while grew:
        grew = False
        for node in walk_nodes(ast.Module(outside, [])):
            if not (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)):
                continue
            target, value = node.targets[0].id, node.value
            if target in views:
                continue
            while isinstance(value, (ast.Subscript, ast.Attribute)) or (
                isinstance(value, ast.Call) and callee_name(value) in _VIEWS
            ):
                if isinstance(value, ast.Call):
                    value = value.func.value if not value.args else value.args[0]
                else:
                    value = value.value
            if isinstance(value, ast.Name) and value.id in views:
                views.add(target)
                grew = True
    return bool((views - {name}) & used)


def owned_arrays(stmts: list, params) -> set[str]:
    """Arrays the function owns: its parameters (copied before any write) and the names bound
    once, to an allocation."""
    values: dict[str, list] = {}
    for node in walk_nodes(ast.Module(stmts, [])):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    values.setdefault(t.id, []).append(node.value)
    owned = {n for n, vs in values.items() if len(vs) == 1 and _allocates(vs[0])}
    return owned | (set(params) - set(values))


def walk_loops(stmts: list, after=()):
    """Each `for` loop with the statements after it (its enclosing blocks' too), outermost
    first; a loop's inner loops come after it."""
    for k, stmt in enumerate(stmts):
        rest = list(stmts[k + 1 :]) + list(after)
        if isinstance(stmt, ast.For):
            yield stmt, rest
        if isinstance(stmt, (ast.For, ast.While, ast.If)):
            inner_after = (stmt.body if isinstance(stmt, (ast.For, ast.While)) else []) + rest
            yield from walk_loops(stmt.body, inner_after)
            yield from walk_loops(stmt.orelse, rest)


def nested_loops(stmts: list) -> set[int]:
    """The ids of the loops inside another loop, which run on threads only where the user wrote
    `prange`: threads there would start and stop at each iteration of the loop outside."""
    return {
        id(n)
        for loop in walk_nodes(ast.Module(stmts, []))
        if isinstance(loop, (ast.For, ast.While))
        for n in walk_nodes(ast.Module(loop.body + loop.orelse, []))
        if isinstance(n, ast.For) and not ir.asserted_parallel(n)
    }


def independent_loops(stmts: list, params, rank_of, parsed=None) -> set[int]:
    """The ids of the outermost independent loops of normalized `stmts`. With `parsed`, a loop
    the user wrote as `numba.prange` that is not independent is refused at its line."""
    owned = owned_arrays(stmts, params)
    found: set[int] = set()
    inside: set[int] = set()
    nested = nested_loops(stmts)
    for loop, after in walk_loops(stmts):
        if id(loop) in inside:
            result = "it is inside a loop that runs on threads"
        elif id(loop) in nested:
            result = "it is inside a loop that runs in order"
        else:
            outside = outside_of(stmts, loop)
            result = plan(loop, after, outside, rank_of, owned)
        if isinstance(result, Plan):
            found.add(id(loop))
            inside |= {id(n) for n in walk_nodes(ast.Module(loop.body, []))}
        elif (
            parsed is not None
            and ir.asserted_parallel(loop)
            and id(loop) not in inside
            and "not known" not in result  # undecided, not dependent: it runs in order
        ):
            where = ir.src_parsed(loop) or parsed
            raise where.error(
                UnsupportedSyntaxError,
                f"s2sad cannot run this prange loop on threads: {result}",
                ir.src(loop),
                hint="write it as range(...) (it then runs in order), or give each iteration "
                "its own outputs (write y[i], sum with s += ...)",
            )
    return found


def outside_of(stmts: list, loop) -> list:
    """The function's statements with `loop` left out (its enclosing blocks kept)."""
    out = []
    for stmt in stmts:
        if stmt is loop:
            continue
        if isinstance(stmt, (ast.For, ast.While, ast.If)):
            copy = ast.If(
                ast.Constant(True), outside_of(stmt.body, loop), outside_of(stmt.orelse, loop)
            )
            out.append(copy)
        elif isinstance(stmt, ast.AST):
            out.append(stmt)
    return out


__all__ = [
    "Plan",
    "callee_name",
    "independent_loops",
    "outside_of",
    "owned_arrays",
    "plan",
    "statements",
    "walk_loops",
]
