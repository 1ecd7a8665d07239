"""The reverse pass's tape markers and what adjoint code reads around them: a `Marker` holds a
place in the adjoint sweep that the tape pass (tape.py) fills with pops, a write-back or a
zeroing, or leaves empty where no adjoint code after it reads what it would bring back.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from .names import names_mentioned, names_read
from .shape_reads import value_reads


@dataclass
class Marker:
    """A place the tape pass fills: pops at a block's start, a header or array restore."""

    kind: str  # "block" | "header" | "restore" | "kill"
    node: object  # the primal block (list id), the end-copy or the subscript write
    src: ast.stmt | None = None
    owning: list = field(default_factory=list)  # a kill's statements making dy an array of its own
    # a kill's copies of dy[index] (`dy[i].copy()`, jit's `snapshot(dy[i])`), taken before the
    # zeroing writes into dy: where the zeroing goes, they read dy[index] as it is
    copies: list = field(default_factory=list)


def value_reads_of(node) -> set[str]:
    """The names `node` reads for their values (see `shape_reads.value_reads`)."""
    if isinstance(node, list):
        return set().union(*(value_reads_of(n) for n in node)) if node else set()
    if isinstance(node, Marker):
        return set()
    return value_reads([node])


def all_reads(node) -> set[str]:
    """The names `node` reads for their values or shapes; a restore's the array and index it
    writes into (`y[i] = y_old`: the y and i of that iteration), a kill's its index and what
    makes dy its own reads of the primal (`dy = as_accumulator(dy, y)`)."""
    if isinstance(node, list):
        return set().union(*(all_reads(n) for n in node)) if node else set()
    if isinstance(node, Marker) and node.kind == "restore":
        return names_mentioned([node.node.targets[0]])
    if isinstance(node, Marker) and node.kind == "kill":
        index = names_mentioned([node.node.targets[0].slice])
        return index | names_read(node.owning) - {node.node.targets[0].value.id}
    return set() if isinstance(node, Marker) else names_read([node])


def future_reads(stmts: list, after: set[str], out: dict, reads=value_reads_of) -> set[str]:
    """For each marker, the names adjoint code may read after it runs (a loop's whole body
    counts: its next iteration runs after); `reads`: what a node reads. Returns what `stmts`
    read."""
    future = set(after)
    for stmt in reversed(stmts):
        if isinstance(stmt, Marker):
            if stmt.kind in ("restore", "kill"):
                # the one name asked about (the array written), not a copy of `future`
                # per marker: that copy made the pass quadratic in the function's length
                base = stmt.node.targets[0].value.id
                out[id(stmt)] = {base} & future
            elif stmt.kind == "header":  # is the value it pops read afterwards?
                name = stmt.node.targets[0].id
                key = ("header", id(stmt.node))
                out[key] = out.get(key, set()) | ({name} & future)
            future |= reads(stmt)
        elif isinstance(stmt, ast.If):
            future_reads(stmt.body, future, out, reads)
            future_reads(stmt.orelse, future, out, reads)
            future |= reads(stmt.test) | reads(stmt.body) | reads(stmt.orelse)
        elif isinstance(stmt, ast.For):
            whole = reads(stmt.iter) | reads(stmt.body)
            future_reads(stmt.body, future | whole, out, reads)
            future |= whole
        else:
            future |= reads(stmt)
    return future


def markers(stmts):
    """The markers in `stmts`, in order, branches' and loops' too."""
    for stmt in stmts:
        if isinstance(stmt, Marker):
            yield stmt
        elif isinstance(stmt, (ast.If, ast.For)):
            yield from markers(stmt.body)
            yield from markers(stmt.orelse)


def without_markers(stmts) -> list[ast.stmt]:
    """Adjoint statements without tape markers, for collecting the names they use."""
    out = []
    for s in stmts:
        if isinstance(s, Marker):
            continue
        if isinstance(s, ast.If):
            s = ast.If(s.test, without_markers(s.body), without_markers(s.orelse))
        elif isinstance(s, ast.For):
            s = ast.For(s.target, s.iter, without_markers(s.body), [])
        out.append(s)
    return out
