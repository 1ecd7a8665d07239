"""The syntax the fusion modules share: which calls are elementwise, which names a piece of
code reads (for its value, or for its shape alone) or writes into, and small node builders."""

from __future__ import annotations

import ast
import copy
from collections import Counter

from ... import ir
from ...astcopy import walk_nodes

# the elementwise NumPy functions whose scalar forms Numba has
UFUNCS = frozenset(
    f"np.{name}"
    for name in (
        "abs absolute arccos arcsin arctan arctanh arcsinh arccosh cos cosh exp exp2 expm1 log "
        "log10 log1p log2 maximum minimum negative sign sin sinh sqrt square tan tanh"
    ).split()
)
# ufuncs whose element fused loops compute by a helper LLVM vectorises (rules/lanes.py)
LANES = {"np.tanh": "tanh_lanes", "np.exp": "exp_lanes", "np.log": "log_lanes"}
BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)
COMPARE = (ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq)
# helpers that read their second argument for its shape alone
SHAPE_ONLY = frozenset({"unbroadcast", "expand_reduced"})
# the same among all calls, the shape tapes' pushes and pops too (rules/tapes.py): a run need not
# store a value recorded for its shape alone
# (and the count `per_count(s, x, axis)` divides by, means.py)
SHAPE_READS = SHAPE_ONLY | {"shape_push", "shape_pop", "per_count"}


def names_in(nodes) -> set[str]:
    return {n.id for node in nodes for n in walk_nodes(node) if isinstance(n, ast.Name)}


def text_of(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{text_of(node.value)}.{node.attr}"
    return ""


def whole_sum(value) -> ast.expr | None:
    """The array a full sum adds up: `np.sum(t)`, or `sum_over(t, None, False)` as lowering
    writes it for Numba; else None."""
    if not isinstance(value, ast.Call) or value.keywords:
        return None
    name, args = text_of(value.func), value.args
    if name == "np.sum" and len(args) == 1:
        return args[0]
    plain = [isinstance(a, ast.Constant) for a in args[1:]] == [True, True]
    if name == "sum_over" and len(args) == 3 and plain and args[1].value is None:
        return args[0] if args[2].value is False else None
    return None


def name_reads(nodes) -> tuple[Counter, Counter]:
    """How often each name is read for its value, and for its shape alone (the second argument
    of `unbroadcast`, `expand_reduced`, `shape_push` and `shape_pop`); `x += g` and `x[i] = v`
    read `x`."""
    shape_only = set()
    for node in nodes:
        for n in walk_nodes(node):
            if (
                isinstance(n, ast.Call)
                and text_of(n.func) in SHAPE_READS
                and len(n.args) >= 2
                and isinstance(n.args[1], ast.Name)
            ):
                shape_only.add(id(n.args[1]))
    value, shape = Counter(), Counter()
    for node in nodes:
        for n in walk_nodes(node):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                (shape if id(n) in shape_only else value)[n.id] += 1
            elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
                value[n.target.id] += 1
    return value, shape


# calls that write into their first argument, and methods that write into their array
_WRITING_CALLS = frozenset(
    {
        "add_at",
        "np.copyto",
        "np.put",
        "np.place",
        "np.putmask",
        "np.fill_diagonal",
        "np.put_along_axis",
        "np.random.shuffle",
    }
)
_WRITING_METHODS = frozenset({"fill", "sort", "put", "itemset", "resize", "partition"})
# calls that write into their first argument only where no other name of its array is read
# after (pipeline/accumulate.py makes them so): a copy by name made before is no hazard
_OWNED_WRITES = frozenset({"extremum_added"})


def written_in_place(nodes, owned=True) -> set[str]:
    """Names of arrays the function writes into: `x[i] = v`, `x += g`, `add_at(x, ...)`,
    `np.copyto(x, ...)`, `np.add.at(x, ...)`, `f(..., out=x)`, `x.fill(0)` (and, with
    `owned`, `extremum_added(x, ...)`)."""
    found = set()
    for node in nodes:
        for n in walk_nodes(node):
            targets = []
            if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store):
                targets.append(n.value)
            elif isinstance(n, ast.AugAssign):
                targets.append(n.target)
            elif isinstance(n, ast.Call):
                writing = _WRITING_CALLS | _OWNED_WRITES if owned else _WRITING_CALLS
                if n.args and text_of(n.func) in writing:
                    targets.append(n.args[0])
                if isinstance(n.func, ast.Attribute) and n.func.attr in _WRITING_METHODS:
                    targets.append(n.func.value)
                if isinstance(n.func, ast.Attribute) and n.func.attr == "at" and n.args:
                    targets.append(n.args[0])  # a ufunc's unbuffered `np.add.at(x, i, v)`
                targets += [k.value for k in n.keywords if k.arg == "out"]
            for target in targets:
                while isinstance(target, (ast.Subscript, ast.Attribute)):
                    target = target.value
                if isinstance(target, ast.Name):
                    found.add(target.id)
    return found


def called(node, name: str, arity: int) -> bool:
    """`node` is `name(...)` of `arity` positional arguments and no keywords, as the rules and
    the lowering write the helper calls the fusion passes match."""
    return (
        isinstance(node, ast.Call)
        and text_of(node.func) == name
        and len(node.args) == arity
        and not node.keywords
    )


def promoted_value(node, rank_of) -> ast.expr | None:
    """`x` of `promoted(x, m)` of an array `x` (pipeline/promotions.py: `x` in NumPy's dtype
    with the integers `m`), which a run reads as `x`: its guard's `kept_dtype` holds only where
    NumPy keeps `x`'s dtype, and the cast is none. Else None: a number `n` may be an int, whose
    `promoted` compiled code refuses where its dtype would decide the result's."""
    if isinstance(node, ast.Call) and text_of(node.func) == "promoted" and node.args:
        return node.args[0] if rank_of(node.args[0]) not in (0, None) else None
    return None


def aliased(value):
    """The array `value` is (`x`, or `unbroadcast(x, p)` of one rank: the identity), else None."""
    if isinstance(value, ast.Name):
        return value.id
    if (
        isinstance(value, ast.Call)
        and text_of(value.func) == "unbroadcast"
        and len(value.args) == 2
        and isinstance(value.args[0], ast.Name)
    ):
        return value.args[0].id
    return None


def load(name: str) -> ast.Name:
    return ast.Name(name, ast.Load())


def store(name: str) -> ast.Name:
    return ast.Name(name, ast.Store())


def assign(name: str, value: ast.expr) -> ast.Assign:
    return ast.Assign([store(name)], value)


def empty(anchor: str) -> ast.expr:
    shape = ast.Attribute(ast.Name(anchor, ast.Load()), "shape", ast.Load())
    return ast.Call(ast.Attribute(ast.Name("np", ast.Load()), "empty", ast.Load()), [shape], [])


def bodies_mapped(stmt, each):
    """A copy of a loop or branch with `each` applied to its bodies (the unfused code keeps the
    original)."""
    stmt = copy.copy(stmt)
    stmt.body, stmt.orelse = each(stmt.body), each(stmt.orelse)
    return stmt


def origin(new: ast.stmt, old: ast.stmt) -> ast.stmt:
    return ir.copy_origin(new, old)
