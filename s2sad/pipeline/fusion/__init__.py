"""Fusion, the last stage of a jitted transform before emission: a run of elementwise statements
over arrays of one shape becomes one loop nest, so compiled code makes no temporary arrays.

Numba compiles `t = a * b; u = np.tanh(t) + c; s = np.sum(u)` into three loops and two
allocations; fused, it is one loop whose body holds `t` and `u` as numbers. A run is a sequence
of consecutive assignments (at the top level or in a loop body) of rank-`r` arrays built from
`+ - * / **`, unary minus, elementwise ufuncs, `np.where`, names and numbers, of
`unbroadcast(g, x)` where `g` and `x` have one rank (the identity when their shapes agree), of
`expand_reduced(s, x)` of a number `s` (`s` everywhere), and of full sums `np.sum(t)` (folded in
as accumulators: over two axes or more, one per column, over one axis at the top level, 32
lanes over blocks of 32 elements, loops LLVM vectorises; a sum that a jitted grad reads for
its kind alone, the output, is a number of that kind, `s = in_dtype_of(0.0, a)`); slicing views
(`v = u[1:, :-1]`) and arithmetic on numbers are moved above it.

Emitted, a run is

    if fusible(a, b) and fusible(a, x):   # the arrays it reads: one float dtype, one shape
        u = np.empty(a.shape, a.dtype)   # the values read after the run, allocated once
        s = 0.0                   # sums accumulate in float64...
        for i0 in range(a.shape[0]):
            ...                   # one statement per original one, on elements
        s = in_dtype_of(s, a)     # ...then take the run's dtype (float32 stays float32)
    else:
        ...                       # the original statements: broadcasting inputs, and Python
        u = in_dtype_of(u, a)     # (compiled code widens float32 meeting a Python float)

A value read after the run only for its shape (`unbroadcast(g, t)` in the adjoint) is not
computed: the fused branch names an array of the run's shape for it (`t = u`). The run stops
before a statement that would see a different order of effects: one reading a sum the run is
still accumulating, one assigning a name the run has read as an input and not assigned yet (a
loop-carried value, `h = h_new`; `dx = dx + a` then `dx = dx + b` is taken), or one making an
alias (`y = x`) of an array written in place later. A value a later fused run alone reads is
recomputed there when cheap (remat.py). It consumes and produces statement lists; the unfused
lists stay as they were (the driver emits both, and jit.py falls back to the unfused code where
Numba cannot type the fused one).

A run may broadcast across ranks: lower-rank arrays and axes known to have length 1
(`keepdims`, `x[:, None]`) are read through NumPy's index maps (`b[i1]`, `s[i0, 0]`), sums over
an axis (`np.sum(t, axis=1)`, `unbroadcast(g, b)` to a lower rank) are accumulated into their
arrays, and the guard is `float_arrays(...)` followed by comparisons of the actual shapes with
those the maps assume (shapes.py).

The adjoint's scatters of basic slices join a run over the slices' shape (scatters.py):
`du = getitem_vjp(g, u, (slice(1, None, None), ...))` and the `add_at(du, index, h)` of the
other slices of `u` become `du = np.zeros(u.shape)` above the loops and `du[i0 + 1, i1] += g_i`
inside, each slice's shape checked by the guard. Where those adds are all the run makes and
the slices have steps of 1 and constant starts (the stencil's), the run is a gather instead
(gather.py): each element of `du` computed once, from the cotangents at shifted positions, which
LLVM vectorises, as it does reads of a view `c = u[:-1, 1:]` written `u[i0, i1 + 1]`.

The adjoint's adds into rows of a gradient (`add_at(dw, (k, slice(0, n, None)), v)`) join a run
that computes `v`: added element by element into a view taken above it (row_adds.py).

A run keeps to one shape (extents.py): a statement over a shape provably another (`u[1:, :]`
beside `u`, the lengths of their axes derived from the slices) does not join it, whose guard
would otherwise send every call to the unfused branch; statements further on of the run's
shape, independent of those between, move up to join it.

Before runs are gathered, the adjoint's pieces of a cotangent are written as the views they
are (views.py): `concatenate_vjp(g, [a, b, c], 2, axis=1)` as `g[:, lo : lo + c.shape[1]]`
(a length written as 1 only where proven, as of `x[:, None]`: these slices are outside any guard;
`c = x[:, 2:3]` is a column to the runs that read the slice, their guards checking it), the
cotangent of
`x[:, None]` as `g[:, 0]` where nothing sharing its memory is written into or returned; runs
then read them, knowing their axes of length 1, and the adds into their columns
(`add_at(du, (slice(None), slice(2, 3)), du2)`) join the run computing them. A slice of an
array nothing writes into that arithmetic reads (`dv / mass[1:-1]`) is named there too
(`mass_view = mass[1:-1]`): a run reads it in place, where the subscript ended the run.

runs.py gathers the runs, loops.py writes a run's fused branch, remat.py plans recomputation,
shapes.py holds the index maps and guards across ranks, scatters.py the slices added into,
gather.py the gathers and the views read through their arrays, row_adds.py the adds into rows
and columns, extents.py the lengths of the axes, views.py the pieces of cotangents, sums.py the
full sums taken out of arithmetic on numbers (`da = da - np.sum(g)`: the sum joins the run
computing `g`), means.py the means written as sums and broadcasts of a number over the count
(`per_count`), so that they fold in as sums do, dtypes.py the integer arrays a run reads,
accumulators.py the sums an adjoint loop adds into that a run reads (started in their array's
float dtype, not float64), and syntax.py what they all share.
"""

from __future__ import annotations

import ast
import copy
from collections import Counter

from ..fresh_writes import emptied, overwritten_zeros
from .accumulators import sums_in_run_dtype
from .remat import plan_rematerialization
from .runs import Fuser, Run
from .means import means_apart, rejoined
from .sums import sums_apart
from .syntax import names_in, text_of
from .views import slices_named, viewed


def fuse(
    blocks: list[list],
    rank_of,
    reads: list,
    taken: set[str],
    integers=frozenset(),
    kinds=frozenset(),
) -> list[list]:
    """The statement lists of one generated function with their fusible runs fused. `rank_of`
    gives an expression's rank (None where unknown); `reads` are the other nodes of the function
    that read values (its outputs and returned gradients); `taken`, every name it uses;
    `integers`, the integer and boolean arrays among its arguments (dtypes.py); `kinds`, the
    names among `reads` read there for their kind alone (a jitted grad's output: loops.py)."""
    named = set(taken) | names_in([s for b in blocks for s in b if isinstance(s, ast.AST)])
    made: dict[str, int] = {}  # the names sums_apart gives sums -> their rank, 0
    split: dict = {}  # the pairs means_apart makes, rejoined where no run takes a part
    blocks = [means_apart(_without_zeroing(b), rank_of, named, made, split) for b in blocks]
    rank_of = _with_numbers(rank_of, made)
    blocks = [sums_apart(b, rank_of, named, made) for b in blocks]
    if made:
        rank_of = _with_numbers(rank_of, made)
    blocks = viewed(blocks, rank_of, reads)
    views: dict[str, int] = {}
    blocks = slices_named(blocks, rank_of, reads, named, views)
    rank_of = _with_numbers(rank_of, views)
    nodes = [s for b in blocks for s in b if isinstance(s, ast.AST)] + list(reads)
    fuser = Fuser(rank_of, nodes, set(taken) | names_in(nodes), integers)
    fuser.kind_reads = _kind_reads(blocks, reads, kinds, fuser.value_reads)
    gathered = [fuser.gather(b, 0) for b in blocks]
    plan_rematerialization(fuser.runs, nodes, fuser.written)
    emitted = [_emitted(rejoined(g, split)) for g in gathered]
    in_use = named | names_in([s for b in emitted for s in b if isinstance(s, ast.AST)])
    return sums_in_run_dtype(emitted, rank_of, in_use)


def _kind_reads(blocks: list[list], reads: list, kinds, value_reads: Counter) -> Counter:
    """Each name's reads for its kind alone: by `reads` (of `kinds`), and by arithmetic at a
    block's top level assigning a name that is read for its kind alone (`l = 3.0 * s`, which
    has one kind whatever number of s's kind s is: a fused sum so read is not computed)."""
    counted = Counter(n.id for n in reads if isinstance(n, ast.Name) and n.id in kinds)
    stores = Counter(
        n.id
        for b in blocks
        for s in b
        if isinstance(s, ast.AST)
        for n in ast.walk(s)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    )
    todo = [
        s
        for b in blocks
        for s in b
        if isinstance(s, ast.Assign)
        and len(s.targets) == 1
        and isinstance(s.targets[0], ast.Name)
        and stores[s.targets[0].id] == 1
        and _arithmetic(s.value)
    ]
    found = True
    while found:
        found = False
        for stmt in list(todo):
            target = stmt.targets[0].id
            if counted[target] and counted[target] == value_reads[target]:
                counted.update(n.id for n in ast.walk(stmt.value) if isinstance(n, ast.Name))
                todo.remove(stmt)
                found = True
    return counted


def _arithmetic(node) -> bool:
    """Numbers, names and `+ - * / **` of them, and `per_count` of them (a mean of a sum,
    means.py): an expression of one kind for any values of its names' kinds, which compiled
    code computes without raising (NumPy's error model)."""
    if isinstance(node, ast.Call) and text_of(node.func) == "per_count" and node.args:
        return _arithmetic(node.args[0])
    if isinstance(node, ast.BinOp):
        return _arithmetic(node.left) and _arithmetic(node.right)
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, (ast.USub, ast.UAdd)) and _arithmetic(node.operand)
    return isinstance(node, ast.Name) or (
        isinstance(node, ast.Constant) and type(node.value) in (int, float)
    )


def _with_numbers(rank_of, numbers: dict):
    """`rank_of`, told the ranks of names made after the analysis behind it ran."""
    return lambda node: (
        numbers[node.id] if isinstance(node, ast.Name) and node.id in numbers else rank_of(node)
    )


def _without_zeroing(stmts: list) -> list:
    """`stmts` where zeros every element of which is written before it is read are made empty
    (fresh_writes.overwritten_zeros), in copies: the unfused code keeps the original."""
    overwritten = overwritten_zeros(stmts)
    out: list = []
    for stmt in stmts:
        if id(stmt) in overwritten:
            stmt = emptied(stmt)
        elif isinstance(stmt, (ast.For, ast.While, ast.If)):
            stmt = copy.copy(stmt)
            stmt.body, stmt.orelse = _without_zeroing(stmt.body), _without_zeroing(stmt.orelse)
        out.append(stmt)
    return out


def _emitted(items: list) -> list:
    out: list = []
    for item in items:
        if isinstance(item, Run):
            out += item.emit()
        elif isinstance(item, tuple):  # a loop or branch, its bodies gathered
            stmt, body, orelse = item
            stmt = copy.copy(stmt)  # the unfused code keeps the original
            stmt.body, stmt.orelse = _emitted(body), _emitted(orelse)
            out.append(stmt)
        else:
            out.append(item)
    return out
