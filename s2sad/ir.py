"""The intermediate representation: Python `ast` nodes plus the annotations the stages stamp on
them. This module is the one place that names them; read and write them through its functions,
never by `getattr(node, "...")`. Each accessor is one attribute look-up (they sit in the hot loops
of the transform) and gives the annotation's default where a node has none.
`test_node_annotations_only_through_ir` (tests/test_architecture.py) fails where another module
reads or writes one of these names directly.

annotation       on           set by -> read by             meaning
---------------  -----------  ----------------------------  ----------------------------------------
src              statement    normalize (and every stage    the user's statement it comes from
                              copying one) -> activity,     (errors, comments, line numbers)
                              tangent, reverse, tape, emit
src_parsed       statement    as `src`                      the ParsedFunction of `src` (an inlined
                                                            helper's own file)
end_copy         Assign       normalize.control ->          `h = h_new`: the loop-carried value for
                              liveness, reverse, tape       the next iteration (or before `break`)
merge_copy       Assign       normalize.control ->          `h_1 = h` ending a branch: the name
                              liveness                      merged after the `if`
counter          Assign       normalize.control -> tape     `trips = trips + 1`: counts the trips
header           For, While   normalize.control (pruned by  names carried from one iteration to the
                              liveness) -> reverse, tape    next (pre-loop SSA names), counter last
liveout          For, While   as `header`                   names first assigned in the body whose
                                                            last value is read after the loop
index            For          normalize.control -> reverse  the index (`for <index> in range(...)`)
trips            For          normalize.control -> reverse  the trip counter of a loop that may
                                                            `break`, or None
iters            While        normalize.control -> reverse  the iteration counter
prange           For          normalize.control ->          the user wrote it over numba.prange:
                              parallel                      refused if not independent
merged           If           normalize.control (pruned by  names assigned on both paths, one name
                              liveness) -> tape             each after the `if`
op               statement    driver (classify) ->          what the statement computes
                              activity, tangent, reverse,   (classify.Op)
                              tape
s2sad_adjoint    If, For      reverse_control -> emit       a branch or loop of the adjoint sweep
                                                            (emit drops such a loop left empty)
s2sad_callee     Call.func    normalize -> classify, ranks, the object called, resolved once
                              activity, tangent, tape
s2sad_runtime    Name         normalize.memory -> resolve   the runtime helper a name s2sad wrote
                                                            denotes (`scatter_added`)
s2sad_scatter    Call         normalize.memory ->           `scatter_added(y, i, v)`, the rewrite of
                              normalize                     `np.add.at(y, i, v)`
s2sad_synthetic  statement    normalize.expressions ->      written by s2sad (`a if c else b` made
                              normalize.flatten             an `if`): keeps the enclosing `src`
s2sad_inlined    Name, Tuple  normalize.inline ->           the result of an inlined call and what
                              normalize.statements          it may share with the caller (`Inlined`)
s2sad_tree_call  Call.func    treeparams -> normalize.      a call passing parameter trees: per tree
                              inline                        parameter of the callee, its structure
                                                            and leaf names (the callee is flattened)

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


def take_origin(new: ast.AST, src) -> ast.AST:
    """`new` stands for `src`: the user statement `src` comes from, or `src` itself where it has
    no `src` (a user's statement, an `If` of the user's being differentiated)."""
    new.src = getattr(src, "src", src)
    new.src_parsed = getattr(src, "src_parsed", None)
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


def asserted_parallel(loop: ast.AST) -> bool:
    return getattr(loop, "prange", False)


def mark_asserted_parallel(loop: ast.AST) -> None:
    loop.prange = True


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


def is_classified(stmt: ast.AST) -> bool:
    """The driver classified it (its `op` may still be None); statements written later were not."""
    return hasattr(stmt, "op")


def set_op(stmt: ast.AST, value) -> None:
    stmt.op = value


def is_adjoint(stmt: ast.AST) -> bool:
    return getattr(stmt, "s2sad_adjoint", False)


def mark_adjoint(stmt: ast.AST) -> None:
    stmt.s2sad_adjoint = True


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


def tree_call(func: ast.AST) -> Optional[dict]:
    return getattr(func, "s2sad_tree_call", None)


def set_tree_call(func: ast.AST, trees: dict) -> None:
    func.s2sad_tree_call = trees
