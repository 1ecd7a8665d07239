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
import tokenize
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
            if kind is not None and not _sizes(stmt.value):
                found.append((stmt.value, *kind))
    return found


def _sizes(node: ast.expr) -> bool:
    """Whether `node` is a subtraction of a length or size (`x.shape[0] - (k + 1)`): integer
    arithmetic, no array for a slot."""
    if not isinstance(node, ast.BinOp):
        return False
    return any(_size(e) for e in (node.left, node.right))


def _size(e: ast.expr) -> bool:
    if isinstance(e, ast.BinOp):
        return _size(e.left) or _size(e.right)
    if isinstance(e, ast.Call):
        return isinstance(e.func, ast.Name) and e.func.id == "len"
    if isinstance(e, ast.Attribute):
        return e.attr in ("size", "ndim")
    return (
        isinstance(e, ast.Subscript)
        and isinstance(e.value, ast.Attribute)
        and e.value.attr == "shape"
    )


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
    text = source.encode()  # (ast's columns count bytes)
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    edits = []  # (first byte, byte after the last, text put there)
    slots = {}
    name = _unused_name(tree)
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef) or not _simple(fn):
            continue
        count = 0
        for node, helper, dtype in _sites(fn.body):
            call = _call(text, starts, node, f"{helper}({name}, {count}, ", dtype)
            if call is None:
                continue
            edits.append(call)
            count += 1
        if count:
            slots[fn.name] = count
            edits.append(_parameter(text, starts, fn, name))
    for first, after, new in sorted(edits, reverse=True):
        text = text[:first] + new + text[after:]
    return text.decode(), slots


def _span(starts: list, node) -> tuple[int, int]:
    return (
        starts[node.lineno - 1] + node.col_offset,
        starts[node.end_lineno - 1] + node.end_col_offset,
    )


def _parameter(text: bytes, starts: list, fn: ast.FunctionDef, name: str) -> tuple:
    """The edit appending `name=None` to `fn`'s parameters, before the `)` closing them (after
    the last one's default, annotation, parentheses, comments and trailing comma)."""
    lines = text.decode().splitlines(keepends=True)[fn.lineno - 1 :]
    tokens = tokenize.generate_tokens(iter(lines).__next__)
    depth, last = 0, None
    for token in tokens:  # (a decorator is above `fn.lineno`: the first `(` opens the parameters)
        if token.type in (tokenize.NL, tokenize.COMMENT):
            continue
        if token.type == tokenize.OP:
            depth += token.string in "([{"
            depth -= token.string in ")]}"
            if depth == 0 and token.string == ")":
                break
        last = token
    row, col = token.start
    at = starts[fn.lineno - 2 + row] + len(lines[row - 1][:col].encode())
    return at, at, (f" {name}=None" if last.string == "," else f", {name}=None").encode()


def _call(text: bytes, starts: list, node: ast.expr, head: str, dtype: str | None):
    """The edit making allocation `node` the call `head...)`, its operands' own text (and
    `dtype` last) as the arguments, each on the line it was on; None where it cannot."""
    operands = [node.left, node.right] if isinstance(node, ast.BinOp) else node.args
    first, after = _span(starts, node)
    pieces, at = [head.encode()], first
    for k, operand in enumerate(operands):
        begin, end = _span(starts, operand)
        if not at <= begin <= end <= after:
            return None
        segment = text[begin:end]
        if isinstance(operand, (ast.Tuple, ast.NamedExpr)) and not segment.startswith(b"("):
            segment = b"(" + segment + b")"
        pieces += [b", " if k else b"", _gap(text[at:begin]), segment]
        at = end
    pieces += [f", {dtype}".encode() if dtype else b"", _gap(text[at:after]), b")"]
    return first, after, b"".join(pieces)


def _gap(between: bytes) -> bytes:
    """The line breaks of the text between two operands, and the last line's indentation (the
    text is in the call's parentheses: what else was there, `(`, `-`, comments, goes)."""
    if b"\n" not in between:
        return b""
    tail = between.rsplit(b"\n", 1)[1]
    return b"\n" * between.count(b"\n") + tail[: len(tail) - len(tail.lstrip())]


def rewritten(source: str) -> tuple[str, dict[str, int]]:
    """`with_workspace(source)`, or `source` as it is where its text is not one it rewrites."""
    try:
        return with_workspace(source)
    except SyntaxError:
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


def pooling(args=()) -> bool:
    """Whether a call on `args` takes a workspace: where its arrays hold POOLED_BYTES or more
    together (a call on small arrays makes no array the pool would keep, and passing the
    workspace costs Numba's typing of one more argument: 130 µs a call of GMM's d=2 gradient,
    about 40% of it); S2SAD_WORKSPACE=0 turns them off (each call's arrays then fresh, as
    before; for comparing the two in one process)."""
    if os.environ.get("S2SAD_WORKSPACE", "1") == "0":
        return False
    size = 0
    for a in args:
        size += getattr(a, "nbytes", 0)
    return size >= POOLED_BYTES
