"""Rematerialization: a value one fused loop computes and later fused loops alone read is
recomputed there, not stored."""

from __future__ import annotations

import ast
from collections import Counter

from ...astcopy import clone, walk_nodes
from ..names import assign_counts
from ..nodes import assigned_name
from .syntax import SHAPE_ONLY, aliased, name_reads, text_of

# how many operations a value's recipe may hold for a later loop to recompute it, not store it
_CHEAP = 8


def plan_rematerialization(runs: list, nodes: list, written: set[str]) -> None:
    """Values a fused run computes that later fused runs alone read, recomputed there from the
    arrays they came from instead of stored (`dv = dv_item - c` in the primal, read by the
    adjoint's loop): storing an array costs more than a few operations per element. Only
    values assigned once, from arrays assigned once outside loops and never written into (nor
    any view of them): so the recomputation reads what the first computation read. A run in a
    loop qualifies too: each iteration computes the one value (RK4's `k2_neg = -k`, allocated
    and stored at every step for the adjoint's loop to read `-k[i0]` back)."""
    counts = assign_counts([n for n in nodes if isinstance(n, ast.stmt)])
    in_loops = _assigned_in_loops(nodes)
    unstable = reaching(written, _view_links(nodes))
    unstable |= {n for n, c in counts.items() if c > 1}
    fusing = [r for r in runs if r.fuses()]
    for k, first in enumerate(fusing):
        if not first.plain():
            continue
        for name, recipe in _recipes(first).items():
            names = {n.id for n in walk_nodes(recipe) if isinstance(n, ast.Name)}
            if name in unstable or names & (unstable | in_loops) or names & _assigned_by(fusing):
                continue
            readers = [r for r in fusing[k + 1 :] if name in r.inputs]
            if not all(r.plain() for r in readers):
                continue  # a run broadcasting the value reads it with another index map
            count = sum(name_reads([s for s, _ in r.entries])[0][name] for r in readers)
            inside = name_reads([s for s, _ in first.entries])[0][name]
            if not readers or count != first.f.value_reads[name] - inside:
                continue  # something else reads the array: it is stored anyway
            if any(
                kind == "alias" and aliased(s.value) == name
                for r in readers
                for s, kind in r.entries
            ):
                continue  # `v = y` in a later run names the array itself: it is stored
            statement = next(s for s, _ in reversed(first.entries) if assigned_name(s) == name)
            for r in readers:
                r.remat[name] = (statement, recipe)
            first.rematerialized.add(name)


def _recipes(run) -> dict:
    """Each value the run assigns once -> its expression over the run's inputs, where cheap
    and free of s2sad's helpers (whose identity holds only for equal shapes)."""
    known: dict = {}
    # (sums and scatters are added into, stores written into: never read in the run)
    entries = [
        (s, kind) for s, kind in run.entries if kind not in ("sum", "scatter", "row_add", "store")
    ]
    assigned = Counter(s.targets[0].id for s, _ in entries)
    for stmt, kind in entries:
        target = stmt.targets[0].id

        class Expand(ast.NodeTransformer):
            def visit_Name(self, node):
                return clone(known[node.id]) if node.id in known else node

        if any(
            isinstance(n, ast.Call) and text_of(n.func) in SHAPE_ONLY
            for n in walk_nodes(stmt.value)
        ) or any(
            isinstance(n, ast.Name) and n.id in run.assigned and n.id not in known
            for n in walk_nodes(stmt.value)
        ):
            known.pop(target, None)
            continue
        recipe = Expand().visit(clone(stmt.value))
        operations = sum(
            isinstance(n, (ast.BinOp, ast.UnaryOp, ast.Call, ast.Compare))
            for n in walk_nodes(recipe)
        )
        if operations <= _CHEAP and assigned[target] == 1:
            known[target] = recipe
        else:
            known.pop(target, None)
    return known


def _assigned_by(runs) -> set[str]:
    return {name for r in runs for name in r.assigned} | {name for r in runs for name in r.sums}


def _assigned_in_loops(nodes) -> set[str]:
    found = set()
    for node in nodes:
        for n in walk_nodes(node):
            if isinstance(n, (ast.For, ast.While)):
                found |= {
                    m.id
                    for b in n.body
                    for m in walk_nodes(b)
                    if isinstance(m, ast.Name) and isinstance(m.ctx, ast.Store)
                }
                if isinstance(n, ast.For):
                    found |= {m.id for m in walk_nodes(n.target) if isinstance(m, ast.Name)}
    return found


def _roots(value) -> set[str]:
    """The arrays `value` may be a view of (`b[1:]`, `b.T`, `b.reshape(...)`, `f(b, ...)`)."""
    while isinstance(value, (ast.Subscript, ast.Attribute, ast.Starred)):
        value = value.value
    if isinstance(value, ast.Name):
        return {value.id}
    if isinstance(value, ast.Call):
        found = _roots(value.func) if isinstance(value.func, ast.Attribute) else set()
        return found | (_roots(value.args[0]) if value.args else set())
    if isinstance(value, (ast.Tuple, ast.List)):
        return set().union(*(_roots(e) for e in value.elts)) if value.elts else set()
    return set()


def _view_links(nodes) -> dict:
    """Each name -> the names assigned from it that may share its memory."""
    return assignment_links(nodes, _roots)


def assignment_links(nodes, roots, arrays=frozenset()) -> dict:
    """Each name -> the names assigned from a value `roots(value)` says may be (a view of) it.
    A write into elements of one of `arrays` (NumPy arrays, not lists) copies values: no link."""
    links: dict = {}
    for node in nodes:
        for n in walk_nodes(node):
            if isinstance(n, ast.Assign):
                targets = {
                    m.id
                    for t in n.targets
                    if not (
                        isinstance(t, ast.Subscript)
                        and isinstance(t.value, ast.Name)
                        and t.value.id in arrays
                    )
                    for m in walk_nodes(t)
                    if isinstance(m, ast.Name)
                }
                for root in roots(n.value):
                    links.setdefault(root, set()).update(targets)
    return links


def reaching(written: set[str], links: dict) -> set[str]:
    """The names some array written into may share memory with (its views, what it views)."""
    reverse: dict = {}
    for root, targets in links.items():
        for t in targets:
            reverse.setdefault(t, set()).add(root)
    found, todo = set(), list(written)
    while todo:
        name = todo.pop()
        if name not in found:
            found.add(name)
            todo += list(links.get(name, ())) + list(reverse.get(name, ()))
    return found
