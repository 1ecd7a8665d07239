"""A jitted function's large temporaries kept from one call to the next (its workspace).

glibc gives a freed block over 32 MB back to the kernel, so each call's large arrays come as
fresh pages the kernel faults in and zeroes: half of GMM's jitted gradient at d=64 K=200.
s2sad must not change the process's malloc (it is the user's whole process), so it keeps its
own memory, for the calls `Jitted` makes:

- `with_workspace(source)` is the text Numba compiles: each top-level function gets a last
  parameter, `workspace=None`, and each allocation its body makes outside loops (`np.empty`,
  `np.zeros`, a stack product, a subtraction: rules/pools.py) takes a slot of it. The text
  keeps its lines (errors name the same lines of `s2sad.source`, which shows the code without
  it); called without a workspace (by another generated function) the code is what it was;
- `Pool.call` hands the compiled function this thread's arena of bytes and a table of a region
  of it per slot, laid out after each call for the sizes that call asked (POOLED_BYTES or
  more): the same arena while it holds them and is at most twice their size, else a new one.

What it keeps: per compiled function and per thread, the large arrays (POOLED_BYTES or more)
its last call made outside loops, at most twice their bytes (GMM d=64 K=200 n=1e4: four 1 GB
arrays; peak memory is that of a call without it, plus the old arena while a call of larger
shapes runs). A thread's arena goes when the thread ends; all of them with the compiled code
(which the transform cache keeps while the process runs), or at `s2sad.release_workspaces()`;
S2SAD_WORKSPACE=0 in the environment turns pooling off (read at each call).

Rules that keep it right: an array returned is never memory the pool keeps (an output in the
arena is copied, and its slot's arrays made afresh from then on); a call from inside a call on
the same thread (a custom_vjp calling the gradient) takes no workspace; two threads never share
one; `np.zeros` is set to zero in its region.
"""

from __future__ import annotations

import ast
import os
import threading
import weakref

import numpy as np

from .rules.pools import POOLED_BYTES

# allocations of generated code -> (the helper taking a slot, the dtype an omitted one means)
_NUMPY = {"empty": "pooled", "zeros": "pooled_zeros"}
_HELPERS = {"matmul_stacks": ("pooled_matmul", 2), "matmul_vjp_rhs": ("pooled_matmul_vjp_rhs", 3)}


def _allocation(call: ast.expr):
    """(helper name, the dtype to append or None) where `call` is an allocation a slot may
    hold, else None."""
    if isinstance(call, ast.BinOp) and isinstance(call.op, ast.Sub):
        return "pooled_subtract", None
    if not isinstance(call, ast.Call) or call.keywords:
        return None
    if any(isinstance(a, ast.Starred) for a in call.args):
        return None
    f = call.func
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "np":
        if f.attr in _NUMPY and len(call.args) in (1, 2):
            return _NUMPY[f.attr], ("np.float64" if len(call.args) == 1 else None)
    if isinstance(f, ast.Name) and f.id in _HELPERS and len(call.args) == _HELPERS[f.id][1]:
        return _HELPERS[f.id][0], None
    return None


def _sites(body: list) -> list:
    """The allocations assigned to one name in `body`'s statements, outside loops (run at most
    once a call), in order."""
    found = []
    for stmt in body:
        if isinstance(stmt, ast.If):
            found += _sites(stmt.body) + _sites(stmt.orelse)
        elif (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
        ):
            kind = _allocation(stmt.value)
            if kind is not None:
                found.append((stmt.value, *kind))
    return found


def _simple(fn: ast.FunctionDef) -> bool:
    """Parameters a last positional one can follow."""
    a = fn.args
    return bool(a.args) and not (a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs)


def _unused_name(tree: ast.Module) -> str:
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    names |= {n.arg for n in ast.walk(tree) if isinstance(n, ast.arg)}
    name, k = "workspace", 1
    while name in names:
        k += 1
        name = f"workspace{k}"
    return name


def with_workspace(source: str) -> tuple[str, dict[str, int]]:
    """`source` with its top-level functions' allocations outside loops taking slots of a last
    parameter `workspace=None`, line for line; and each such function's number of slots."""
    tree = ast.parse(source)
    lines = source.encode().splitlines(keepends=True)  # (as ast counts lines; its columns: bytes)
    edits = []  # (line, byte column, bytes removed, text inserted)
    slots = {}
    name = _unused_name(tree)
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef) or not _simple(fn):
            continue
        count = 0
        for node, helper, dtype in _sites(fn.body):
            try:
                edits += _edits(lines, node, f"{helper}({name}, {count}, ", dtype)
            except _Unsplittable:
                continue
            count += 1
        if count:
            slots[fn.name] = count
            last = fn.args.args[-1]
            edits.append((last.end_lineno, last.end_col_offset, 0, f", {name}=None"))
    for line, col, removed, text in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        old = lines[line - 1]
        lines[line - 1] = old[:col] + text.encode() + old[col + removed :]
    return b"".join(lines).decode(), slots


def _edits(lines: list, node: ast.expr, head: str, dtype: str | None) -> list:
    """The edits making allocation `node` the call `head...)` (with `dtype` last)."""
    if isinstance(node, ast.BinOp):
        # `a - b` -> `pooled_subtract(workspace, k, a, b)`: the operator becomes a comma
        left, right = node.left, node.right
        if left.end_lineno != right.lineno:
            raise _Unsplittable
        gap = right.col_offset - left.end_col_offset
        return [
            (node.lineno, node.col_offset, 0, head),
            (left.end_lineno, left.end_col_offset, gap, ", "),
            (right.end_lineno, right.end_col_offset, 0, ")"),
        ]
    func = node.func
    # `np.empty(` -> `pooled(workspace, k, `
    paren = lines[func.end_lineno - 1][func.end_col_offset : func.end_col_offset + 1]
    if func.lineno != func.end_lineno or paren != b"(":
        raise _Unsplittable
    edits = [(func.lineno, func.col_offset, func.end_col_offset + 1 - func.col_offset, head)]
    if dtype:
        arg = node.args[-1]
        edits.append((arg.end_lineno, arg.end_col_offset, 0, f", {dtype}"))
    return edits


class _Unsplittable(Exception):
    """An allocation spread over lines in a way the line-for-line rewrite does not handle."""


def rewritten(source: str) -> tuple[str, dict[str, int]]:
    """`with_workspace(source)`, or `source` as it is where its text is not one it rewrites."""
    try:
        return with_workspace(source)
    except (_Unsplittable, SyntaxError):
        return source, {}


_ALIGN = 64  # each slot's region starts at a multiple of this many bytes
_NUMBERS = (int, float, complex, bool, str, bytes, np.generic, type(None))


class Pool:
    """One compiled function's buffers, per thread: one array of bytes (the arena) holding a
    region per slot, and a table of three rows: the bytes each slot asked in the last call,
    where its region starts, its size (0: the slot's arrays are made afresh). Two arrays, not a
    buffer per slot: Numba types a tuple's arrays one by one at each call (GMM at d=2: 15 µs)."""

    def __init__(self, slots: int):
        self.slots = slots
        self.local = threading.local()
        _POOLS.add(self)

    def call(self, dispatcher, args) -> tuple:
        """`dispatcher(*args)` with this thread's workspace, and the arguments it was called with
        (the workspace last); the regions laid out for the next call."""
        local = self.local
        if getattr(local, "busy", False):  # a call inside a call: its own fresh arrays
            return dispatcher(*args), args
        table = getattr(local, "table", None)
        if table is None:
            table = local.table = np.zeros((3, self.slots), np.int64)
            local.arena, local.escaped = np.empty(0, np.uint8), set()
        table[0] = 0
        called = (*args, (table, local.arena))
        local.busy = True
        try:
            result = dispatcher(*called)
        finally:
            local.busy = False
        if local.arena.size or table[0].max() >= POOLED_BYTES:
            result = self._owned(result, local)
            self._lay_out(local)
        return result, called

    def _owned(self, result, local):
        """`result` with each array sharing memory with the arena a copy (the caller's own), its
        slot made afresh from then on (`escaped`)."""
        arena, starts, sizes = local.arena, local.table[1].tolist(), local.table[2].tolist()
        base = arena.__array_interface__["data"][0]

        def owned(value):
            if isinstance(value, np.ndarray):
                if not (arena.size and np.may_share_memory(value, arena)):
                    return value
                at = value.__array_interface__["data"][0] - base
                local.escaped.update(i for i, s in enumerate(starts) if 0 <= at - s < sizes[i])
                return value.copy(order="K")
            if isinstance(value, tuple) and hasattr(value, "_make"):  # a namedtuple
                return value._make(owned(v) for v in value)
            if isinstance(value, (tuple, list)):
                return type(value)(owned(v) for v in value)
            if type(value) is dict:
                return {k: owned(v) for k, v in value.items()}
            if not isinstance(value, _NUMBERS):  # (one it cannot copy: it keeps the arena)
                local.arena, local.table[2] = np.empty(0, np.uint8), 0
            return value

        return owned(result)

    def _lay_out(self, local) -> None:
        """Regions for the sizes the last call asked (POOLED_BYTES or more, of slots that never
        escaped), in the arena where it holds them and is at most twice their size."""
        table = local.table
        needs = table[0].tolist()
        sizes = [
            -(-n // _ALIGN) * _ALIGN if n >= POOLED_BYTES and i not in local.escaped else 0
            for i, n in enumerate(needs)
        ]
        if sizes == table[2].tolist():
            return  # (the usual call: the shapes of the last)
        total = sum(sizes)
        if not total <= local.arena.size <= 2 * total:
            # (its pages come when the next call writes them, as fresh arrays' would)
            local.arena = np.empty(total, np.uint8)
        table[2] = sizes
        table[1] = np.cumsum([0] + sizes[:-1])

    def clear(self) -> None:
        """Free every thread's buffers (a call running now keeps its own until it returns)."""
        self.local = threading.local()

    def kept_bytes(self) -> int:
        """The bytes the calling thread's arena holds."""
        arena = getattr(self.local, "arena", None)
        return 0 if arena is None else arena.size


_POOLS: "weakref.WeakSet[Pool]" = weakref.WeakSet()  # every compiled function's


def release_workspaces() -> None:
    """Free the buffers every jitted function keeps between calls, in every thread (the next
    call of each makes its arrays afresh, and keeps them again)."""
    for pool in list(_POOLS):
        pool.clear()


def pooling() -> bool:
    """Whether calls take workspaces: S2SAD_WORKSPACE=0 turns them off (each call's arrays then
    fresh, as before; for comparing the two in one process)."""
    return os.environ.get("S2SAD_WORKSPACE", "1") != "0"
