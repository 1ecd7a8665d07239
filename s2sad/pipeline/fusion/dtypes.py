"""The integer arrays a fused run may read (runs.py). A broadcasting run's guard asks its arrays
to be of one float dtype (`float_arrays`), the dtype its allocations take; an integer array it
reads (`x * m.sum(axis=0, keepdims=True)` of an integer `m`) failed that guard on every call.
Such an array may join where NumPy keeps the run's dtype when it meets it (`kept_dtype`: an
integer or boolean array of fewer bits, or one of that dtype, checked as the code compiles),
and where every value the run computes from it also reads a float array: a value computed from
integers alone would be an integer array, which the run would allocate as a float one.
"""

from __future__ import annotations

import ast

from ...astcopy import walk_nodes
from .syntax import SHAPE_READS, load, text_of, whole_sum

# entries that add or write into an array the run does not make: no value of their own
_WRITES = ("scatter", "store", "row_add")


def integer_derived(nodes, integers) -> set[str]:
    """The names whose value may be computed from the integer or boolean arrays `integers` (the
    arguments ranks.py knows to be): each name an assignment reading one of them binds, through
    loops (to a fixed point). More than the integer values: `x * m` is float, and is named."""
    derived = set(integers)
    if not derived:
        return derived
    assignments = []
    for node in nodes:
        for n in walk_nodes(node):
            if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and n.value is not None:
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                bound = set().union(*map(_bound, targets))  # (`x[i] = v` binds x, reads i)
                reads = _names(n.value) | set().union(*map(_names, targets)) - bound
                assignments.append((bound, reads))
            elif isinstance(n, ast.For):
                assignments.append((_names(n.target), _names(n.iter)))
    changed = True
    while changed:
        changed = False
        for bound, reads in assignments:
            if reads & derived and not bound <= derived:
                derived |= bound
                changed = True
    return derived


def by_dtype(run, numbers: list) -> tuple[list, list]:
    """The arrays a run reads for their values (`numbers`) as (those of its float dtype, the
    one its allocations take first; those it may read as integer arrays). The first is one the
    run does not rebind (`dk = dk + t * c`: `t`), so that the unfused branch's casts after its
    statements read the dtype the run started with, and one not computed from an integer
    argument where there is one. An integer array is one the run's `integer_derived` names
    where every value the run computes reading it also reads a float array, one of the others
    or a value computed from one; at least one array stays to give the dtype."""
    derived = run.f.integers
    numbers = sorted(numbers, key=lambda n: (n in run.assigned, n in derived))
    recomputed = {n for _, recipe in run.remat.values() for n in _names(recipe)}
    found: list[str] = []
    for name in numbers:
        if name not in derived or name in recomputed or len(found) + 1 == len(numbers):
            continue
        if _anchored(run, set(found) | {name}, set(numbers) | set(run.assigned)):
            found.append(name)
    return [n for n in numbers if n not in found], found


def _anchored(run, integers: set[str], arrays: set[str]) -> bool:
    """Whether each value the run computes from `integers` also reads another array (of the
    run's float dtype), or a value computed from one. A sum of an array's elements needs none:
    it adds up in float64 and both branches give it the run's dtype (`in_run_dtype`), as NumPy
    adds integers exactly (in int64)."""
    maybe = set(integers)  # integer arrays, or values computed from them alone
    for stmt, kind in run.entries:
        if kind in _WRITES:
            continue
        target = stmt.targets[0].id
        summed = whole_sum(stmt.value) if kind == "sum" else None
        summed = run.reductions[target][2] if kind == "reduce" else summed
        reads = _value_reads(stmt.value)
        if reads & maybe and not (reads & arrays) - maybe and not isinstance(summed, ast.Name):
            return False
        maybe.discard(target)
    return True


def _value_reads(node) -> set[str]:
    """The names `node` reads for their values (not the shape-only arguments of `unbroadcast`,
    `expand_reduced`)."""
    shape_only = {
        id(n.args[1])
        for n in walk_nodes(node)
        if isinstance(n, ast.Call) and text_of(n.func) in SHAPE_READS and len(n.args) >= 2
    }
    return {
        n.id
        for n in walk_nodes(node)
        if isinstance(n, ast.Name) and id(n) not in shape_only and isinstance(n.ctx, ast.Load)
    }


def _names(node) -> set[str]:
    return {n.id for n in walk_nodes(node) if isinstance(n, ast.Name)}


def _bound(target) -> set[str]:
    """The names an assignment to `target` binds or writes into: `x` of `x[i, j]`, not `i`."""
    while isinstance(target, (ast.Subscript, ast.Attribute, ast.Starred)):
        target = target.value
    if isinstance(target, (ast.Tuple, ast.List)):
        return set().union(*map(_bound, target.elts))
    return {target.id} if isinstance(target, ast.Name) else set()


def with_integers(test: ast.expr, source: str, integers: list, same_shape: bool) -> ast.expr:
    """`test and kept_dtype(a, m, k)`, and where the run takes one shape (`fusible`'s guard)
    `m.shape == a.shape` for each: the integer arrays the run reads (`integers`), in the dtype
    of its float array `source` as NumPy computes with them."""
    if not integers:
        return test
    checks = [ast.Call(load("kept_dtype"), [load(source)] + [load(n) for n in integers], [])]
    if same_shape:
        checks += [ast.Compare(_shape(n), [ast.Eq()], [_shape(source)]) for n in integers]
    tests = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
    return ast.BoolOp(ast.And(), tests[:1] + checks + tests[1:])


def _shape(name: str) -> ast.expr:
    return ast.Attribute(load(name), "shape", ast.Load())
