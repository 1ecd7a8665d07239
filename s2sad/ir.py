"""The intermediate representation: Python `ast` nodes plus the annotations the stages stamp on
them. This module is the one place that names them; read and write them through its functions,
never by `getattr(node, "...")`. Each accessor is one attribute look-up (they sit in the hot loops
of the transform) and gives the annotation's default where a node has none.

Annotation     On                     Set by                       Read by                     Meaning
-------------  ---------------------  ---------------------------  --------------------------  ---------------------------------------------
src            normalized statement   normalize (and every stage   activity, tangent, reverse,  the user's statement it comes from (errors,
                                      copying a statement)         tape, emit, jit             comments, line numbers)
src_parsed     normalized statement   same as `src`                same as `src`               the ParsedFunction `src` belongs to (an
                                                                                               inlined helper's own file)
end_copy       Assign `h = h_new`     normalize.control            normalize.liveness,         copies the loop-carried value back at the end
                                                                   reverse, tape               of an iteration (or before a `break`)
merge_copy     Assign `h_1 = h`       normalize.control            normalize.liveness          copies a branch's value to the name merged
                                                                                               after the `if`
counter        Assign `trips += 1`    normalize.control            tape                        counts a loop's trips (`trips`, `iters`)
header         For / While            normalize.control (pruned    reverse, tape               names carried from one iteration to the next
                                      by normalize.liveness)                                   (pre-loop SSA names), and the counter
liveout        For / While            normalize.control (pruned    reverse, tape               names first assigned in the body whose last
                                      by normalize.liveness)                                   value is read after the loop
index          For                    normalize.control            reverse                     the loop's index name (`for <index> in range`)
trips          For                    normalize.control            reverse                     the trip counter of a loop that may `break`,
                                                                                               or None
iters          While                  normalize.control            reverse                     the iteration counter
merged         If                     normalize.control (pruned    tape                        names assigned on both paths, merged into one
                                      by normalize.liveness)                                   name after the `if`
op             simple statement       driver (classify)            activity, tangent,          what the statement computes (classify.Op)
                                                                   reverse, tape
s2sad_callee   Call.func              normalize (rename, calls)    classify, ranks, activity,  the object the call calls, resolved once
                                                                   tangent, tape
s2sad_runtime  Name                   normalize.memory             resolve                     the runtime helper the name denotes (a name
                                                                                               s2sad wrote, `scatter_added`)
s2sad_scatter  Call                   normalize.memory             normalize                   the rewrite of `np.add.at(y, i, v)` as
                                                                                               `y = scatter_added(y, i, v)`
s2sad_synthetic statement             normalize (if-expression)    normalize                   written by s2sad: keeps the enclosing `src`
inlined        Name / Tuple           normalize.inline             normalize                   the result of an inlined call, with what it
                                                                                               may share memory with (`Inlined`)

`ParsedFunction.original` (set by `normalize.naming.hygienic`: a renamed name -> the user's) is a
field of the parsed function, not of a node.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any, Optional


# ---------------------------------------------------------------------------- origin
def src(node: ast.AST) -> Optional[ast.stmt]:
    return getattr(node, "src", None)


def src_parsed(node: ast.AST):
    return getattr(node, "src_parsed", None)


def set_origin(node: ast.AST, src_stmt: Optional[ast.stmt], parsed) -> ast.AST:
    node.src = src_stmt
    node.src_parsed = parsed
    return node


def copy_origin(new: ast.AST, old: ast.AST) -> ast.AST:
    """`new` comes from the same user statement as `old`."""
    new.src = getattr(old, "src", None)
    new.src_parsed = getattr(old, "src_parsed", None)
    return new


# ---------------------------------------------------------------------------- copies, counters
def is_end_copy(stmt: ast.AST) -> bool:
    return getattr(stmt, "end_copy", False)


def mark_end_copy(stmt: ast.AST, value: bool = True) -> None:
    stmt.end_copy = value


def is_merge_copy(stmt: ast.AST) -> bool:
    return getattr(stmt, "merge_copy", False)


def mark_merge_copy(stmt: ast.AST) -> None:
    stmt.merge_copy = True


def is_copy(stmt: ast.AST) -> bool:
    """A copy normalization added (`end_copy` or `merge_copy`)."""
    return getattr(stmt, "merge_copy", False) or getattr(stmt, "end_copy", False)


def is_counter(stmt: ast.AST) -> bool:
    return getattr(stmt, "counter", False)


def mark_counter(stmt: ast.AST) -> None:
    stmt.counter = True


# ---------------------------------------------------------------------------- loops and ifs
def header(loop: ast.AST) -> Optional[list[str]]:
    return getattr(loop, "header", None)


def set_header(loop: ast.AST, names: list[str]) -> None:
    loop.header = names


def liveout(loop: ast.AST) -> Optional[list[str]]:
    return getattr(loop, "liveout", None)


def set_liveout(loop: ast.AST, names: list[str]) -> None:
    loop.liveout = names


def loop_index(loop: ast.For) -> Optional[str]:
    return getattr(loop, "index", None)


def trips(loop: ast.For) -> Optional[str]:
    return getattr(loop, "trips", None)


def iters(loop: ast.While) -> Optional[str]:
    return getattr(loop, "iters", None)


def set_for_loop(loop: ast.For, carried, live, index: str, trip_counter) -> None:
    loop.header, loop.liveout, loop.trips, loop.index = carried, live, trip_counter, index


def set_while_loop(loop: ast.While, carried, live, counter: str) -> None:
    loop.header, loop.liveout, loop.iters = carried, live, counter


def merged(stmt: ast.If) -> Optional[list[str]]:
    return getattr(stmt, "merged", None)


def set_merged(stmt: ast.If, names: list[str]) -> None:
    stmt.merged = names


_NAME_LISTS = ("header", "liveout", "merged")  # the annotations that list SSA names


def rename_in_annotations(node: ast.AST, old: str, new: str) -> None:
    """`old` becomes `new` in the node's lists of names (`header`, `liveout`, `merged`)."""
    for attr in _NAME_LISTS:
        names = getattr(node, attr, None)
        if names and old in names:
            setattr(node, attr, [new if n == old else n for n in names])


# ---------------------------------------------------------------------------- statements
def op(stmt: ast.AST):
    return getattr(stmt, "op", None)


def set_op(stmt: ast.AST, value) -> None:
    stmt.op = value


def is_synthetic(stmt: ast.AST) -> bool:
    return getattr(stmt, "s2sad_synthetic", False)


def mark_synthetic(stmt: ast.AST) -> None:
    stmt.s2sad_synthetic = True


# ---------------------------------------------------------------------------- expressions
def callee(func: ast.AST) -> Any:
    return getattr(func, "s2sad_callee", None)


def set_callee(func: ast.AST, obj) -> None:
    func.s2sad_callee = obj


def runtime_helper(name: ast.AST) -> Any:
    return getattr(name, "s2sad_runtime", None)


def set_runtime_helper(name: ast.AST, helper) -> None:
    name.s2sad_runtime = helper


def is_scatter(value: ast.AST) -> bool:
    return getattr(value, "s2sad_scatter", False)


def mark_scatter(value: ast.AST) -> None:
    value.s2sad_scatter = True


@dataclass
class Inlined:
    """What an inlined call's result may share with the caller's memory: for one value, `alias`
    (the caller's expression, the caller's locals) or None; for a tuple, `elements`: per element
    (the index of an earlier element sharing its memory or None, an `alias` or None)."""

    alias: Optional[tuple[str, set[str]]] = None
    elements: Optional[list[tuple]] = None


def inlined(node: ast.AST) -> Optional[Inlined]:
    return getattr(node, "s2sad_inlined", None)


def set_inlined(node: ast.AST, info: Inlined) -> None:
    node.s2sad_inlined = info
