"""A jitted function's large temporaries kept from one call to the next (its workspace).

glibc gives a freed block over 32 MB back to the kernel, so each call's large arrays come as
fresh pages the kernel faults in and zeroes: half of GMM's jitted gradient at d=64 K=200.
s2sad must not change the process's malloc (it is the user's whole process), so it keeps its
own memory, for the calls `Jitted` makes:

- the code Numba compiles takes it (pipeline/numba_forms.py writes it in, and `s2sad.source`
  shows it): each top-level function a last parameter, `workspace=None`, and each allocation
  its body makes outside loops (`np.empty`, `np.zeros`, a stack product, an array's arithmetic:
  rules/pools.py), and each tape of rows, a slot of it; called without a workspace (by the Python fallback, another
  generated function) each allocation is what it was;
- `Pool.call` hands the compiled function this thread's arena of bytes and a table of a region
  of it per slot, laid out after each call for the sizes that call asked (POOLED_BYTES or
  more): the same arena while it holds them and is at most twice their size, else a new one.

What it keeps: per compiled function and per thread, the large arrays (POOLED_BYTES or more)
its last call made outside loops and its loops' tapes of rows, at most twice their bytes (GMM d=64 K=200 n=1e4: four 1 GB
arrays; peak memory is that of a call without it, plus the old arena while a call of larger
shapes runs). A thread's arena goes when the thread ends; all of them with the compiled code
(which the transform cache keeps while the process runs), or at `s2sad.release_workspaces()`;
S2SAD_WORKSPACE=0 in the environment turns pooling off (`ENABLED`, read once).

Rules that keep it right: an array returned is never memory the pool keeps (an output in the
arena is copied, and its slot's arrays made afresh from then on); a call from inside a call on
the same thread (a custom_vjp calling the gradient) takes no workspace; two threads never share
one; `np.zeros` is set to zero in its region.
"""

from __future__ import annotations

import os
import threading
import weakref

import numpy as np

from .rules.pools import POOLED_BYTES

_ALIGN = 64  # each slot's region starts at a multiple of this many bytes
_NUMBERS = (int, float, complex, bool, str, bytes, np.generic, type(None))


class Pool:
    """One compiled function's buffers, per thread: one array of bytes (the arena) holding a
    region per slot, and a table of three rows: the bytes each slot asked in the last call,
    where its region starts, its size (0: the slot's arrays are made afresh). Two arrays, not a
    buffer per slot: Numba types a tuple's arrays one by one at each call (GMM at d=2: 15 µs)."""

    def __init__(self, slots: int):
        self.slots = slots
        # whether its last call asked a region: calls on arguments under POOLED_BYTES take the
        # workspace while it does (`takes`)
        self.asked = True
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
        self.asked = table[0].max() >= POOLED_BYTES
        if local.arena.size or self.asked:
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


# S2SAD_WORKSPACE=0 in the environment: no call takes a workspace (each call's arrays fresh, as
# before). Read once; a program comparing the two in one process sets this.
ENABLED = os.environ.get("S2SAD_WORKSPACE", "1") != "0"


def pooling(args=(), pool=None) -> bool:
    """Whether a call on `args` takes a workspace: where its arrays hold POOLED_BYTES or more
    together (a call on small arrays makes no array the pool would keep, and passing the
    workspace costs Numba's typing of one more argument: 130 µs a call of GMM's d=2 gradient,
    about 40% of it), or MIDDLE_BYTES or more where `pool`'s last call asked a region (`takes`),
    and `ENABLED`. (A planned call decides as this, call_plans.Plan.pool_for.)"""
    if not ENABLED:
        return False
    size = 0
    for a in args:
        size += getattr(a, "nbytes", 0)
    return takes(pool, size)


# Arguments of this many bytes take the workspace where the function's last call asked a
# region: a loop's tape of rows holds all its steps (the RK4 ODE at n=1e5: x 800 KB, four tapes
# of 80 MB each, their pages faulted at every call without one: 30% of its gradient's time).
MIDDLE_BYTES = 1 << 16


def takes(pool, size: int) -> bool:
    """Whether a call on arrays of `size` bytes in all takes `pool`'s workspace."""
    if size >= POOLED_BYTES:
        return True
    return size >= MIDDLE_BYTES and pool is not None and pool.asked
