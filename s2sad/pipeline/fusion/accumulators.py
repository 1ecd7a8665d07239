"""The sums an adjoint loop adds an array's cotangents into, in the fused code: made in the
array's float dtype where a fused run in the loop reads them.

Lowering starts such a sum as float64 (`dv = sum_zeros_like(v)`, pipeline/reverse_control.py):
the unfused code computes a float32 input's cotangents in float64 wherever they meet a Python
float, and Numba types a name once. A fused run computes in the one float dtype of its arrays
(`fusible`, `float_arrays`: rules/loop_tests.py), float32 for a float32 input, so a run reading
that float64 sum beside the input's float32 arrays did not type: every call of such a function
with float32 arrays compiled the fused code, failed, and compiled the unfused code (a loop's
gradient taken through `v = np.tanh(A[k] @ v)`, or a pair energy's scatter into `dpos[j]`).

Here, where a guard in the loop reads the sum (or a name or view taken of it there), the sum
starts as `zeros_like(v)` (float32 for float32, float64 for float64 and for integers, as
before), widened before the loop by the arrays made before it that its step reads
(`dv = widened_by(dv, w.dtype)`: NumPy carries it in float64 when it meets a float64 one), and,
where the loop assigns it, kept in the dtype it enters with (`dv_entry = dv` first in the body,
`dv = in_dtype_of(dv, dv_entry)` last), as pipeline/carried.py keeps the other cotangents a loop
carries. The sum then holds float32 values, as Python mode's NumPy sum does. The unfused code
keeps its float64 sums: the statements changed are copies.
"""

from __future__ import annotations

import ast
import copy

from ... import ir
from ..carried import kept_in_entry_dtype, step_reads
from ..names import certainly_assigned
from ..nodes import assign_to, assigned_name, call_of, load_name
from .syntax import called, text_of

# the tests in front of fused runs (fused_guards.py reads the same)
_GUARDS = ("fusible", "float_arrays")


def sums_in_run_dtype(blocks: list[list], rank_of, taken: set) -> list[list]:
    """`blocks` (a function's fused statement lists, in order) with the sums their loops add
    into made in their arrays' float dtype where a fused run in the loop reads them. `rank_of`
    gives an expression's rank; `taken`: the names in use, mutated."""
    defined: set = set()
    out = []
    for stmts in blocks:
        out.append(_block(stmts, defined, rank_of, taken))
        defined |= certainly_assigned([s for s in stmts if isinstance(s, ast.AST)])
    return out


def _block(stmts: list, defined: set, rank_of, taken: set) -> list:
    out, defined = [], set(defined)
    sums: dict[str, int] = {}  # a sum started for the next loop -> its place in `out`
    for stmt in stmts:
        if isinstance(stmt, (ast.For, ast.While)):
            stmt = copy.copy(stmt)  # (the unfused code keeps the original)
            stmt.body = _block(stmt.body, defined, rank_of, taken)
            for name in [n for n in sums if _guard_reads(stmt, n)]:
                out[sums[name]] = _in_own_dtype(out[sums[name]])
                out += _widened(stmt, name, defined, rank_of)
                if name in _stored_in(stmt.body):
                    stmt.body = _kept(stmt.body, name, taken)
            sums = {}
        elif isinstance(stmt, ast.If):
            stmt = copy.copy(stmt)
            stmt.body = _block(stmt.body, defined, rank_of, taken)
            stmt.orelse = _block(stmt.orelse, defined, rank_of, taken)
        elif _started_sum(stmt):
            sums[assigned_name(stmt)] = len(out)
        if isinstance(stmt, ast.AST):
            defined |= certainly_assigned([stmt])
            sums = {n: i for n, i in sums.items() if n not in _stored_in([stmt]) or i == len(out)}
        out.append(stmt)
    return out


def _started_sum(stmt) -> bool:
    """`dv = sum_zeros_like(v)`."""
    return assigned_name(stmt) is not None and called(stmt.value, "sum_zeros_like", 1)


def _in_own_dtype(init: ast.Assign) -> ast.Assign:
    """`dv = zeros_like(v)` for `dv = sum_zeros_like(v)`, a new statement."""
    call = call_of("zeros_like", *init.value.args)
    return ir.copy_origin(assign_to(assigned_name(init), call), init)


def _guard_reads(loop, name: str) -> bool:
    """Whether a fused run's guard in `loop` reads `name`, or a name the loop binds to it or to
    a view of it (`dv_new = dv`, `dpos_view = dpos[j]`)."""
    aliases, grew = {name}, True
    while grew:
        grew = False
        for node in ast.walk(loop):
            target = assigned_name(node)
            if target is not None and target not in aliases and _base(node.value) in aliases:
                aliases.add(target)
                grew = True
    return any(
        isinstance(node, ast.If)
        and any(isinstance(n, ast.Call) and text_of(n.func) in _GUARDS for n in ast.walk(node.test))
        and any(isinstance(n, ast.Name) and n.id in aliases for n in ast.walk(node.test))
        for node in ast.walk(loop)
    )


def _base(value) -> str | None:
    """The name `value` is, or takes a view of (`dpos[j]`, `g[:, 0]`)."""
    while isinstance(value, ast.Subscript):
        value = value.value
    return value.id if isinstance(value, ast.Name) else None


def _stored_in(stmts: list) -> set:
    return {
        n.id
        for s in stmts
        if isinstance(s, ast.AST)
        for n in ast.walk(s)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }


def _widened(loop, name: str, defined: set, rank_of) -> list:
    """`dv = widened_by(dv, w.dtype)` of the arrays made before the loop that its step reads,
    or nothing where there are none."""
    code = [s for s in loop.body if isinstance(s, ast.AST)]
    arrays = sorted(
        a
        for a in (step_reads(code, name) & defined) - {name}
        if (rank_of(ast.Name(a, ast.Load())) or 0) > 0  # (not a tape, not a function)
    )
    if not arrays:
        return []
    dtypes = [ast.Attribute(load_name(a), "dtype", ast.Load()) for a in arrays]
    call = call_of("widened_by", load_name(name), *dtypes)
    return [ir.copy_origin(assign_to(name, call), loop)]


def _kept(body: list, name: str, taken: set) -> list:
    code = [s for s in body if isinstance(s, ast.AST)]
    at_entry, cast_back = kept_in_entry_dtype(name, taken, code)
    return [at_entry] + body + [cast_back]
