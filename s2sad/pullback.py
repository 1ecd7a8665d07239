"""The pullback `vjp` returns, and the copies that make it the caller's: a pullback belongs to
the point where `vjp` was called, even if the caller then changes its arrays in place. Consumes
the generated pullback (a closure, or the re-running sweep) and the caller's values; produces
`pullback(seed)`."""

from __future__ import annotations

import numpy as np

from .errors import SeedShapeError
from .generated_lines import user_lines
from .trees import flatten, same_structure, unflatten


def own_copy(value):
    """A copy of an argument array (same memory layout and writeability, so a jitted sweep keeps
    its compiled signature), or of a list or tuple holding arrays; other values as they are."""
    if isinstance(value, np.ndarray):
        copied = np.array(value, copy=True, order="K")
        copied.flags.writeable = value.flags.writeable
        return copied
    if type(value) in (list, tuple) and any(isinstance(v, np.ndarray) for v in value):
        return type(value)(own_copy(v) for v in value)
    return value


def arrays_in(values) -> list:
    """The arrays among `values` and inside their lists and tuples: memory the caller holds."""
    found = []
    for value in values:
        if isinstance(value, np.ndarray):
            found.append(value)
        elif type(value) in (list, tuple):
            found += arrays_in(value)
    return found


# what may hold the caller's memory (a tape holds values of one kind: its first tells)
_HELD = (np.ndarray, list, tuple)


def detach(pullback, arrays) -> None:
    """Give a Python-mode pullback its own copies of the values it reads that share memory with
    `arrays` (the caller's arguments, or the output it returns): the caller may change those in
    place before calling the pullback, which belongs to the point where vjp was called. Only
    what the pullback holds (its closure and defaults, tapes included) is copied."""
    if not arrays:
        return

    def own(value, depth=0):
        if isinstance(value, np.ndarray):
            if any(np.may_share_memory(value, a) for a in arrays):
                return own_copy(value)
            return value
        if depth < 4 and (
            type(value) is tuple or (type(value) is list and value and isinstance(value[0], _HELD))
        ):
            held = [own(v, depth + 1) for v in value]  # a tape, or a list the caller passed
            if any(h is not v for h, v in zip(held, value)):
                return type(value)(held)  # (a new one: the caller's list stays as it is)
        return value

    if getattr(pullback, "__defaults__", None):  # a re-running pullback binds its arguments
        pullback.__defaults__ = tuple(own(v) for v in pullback.__defaults__)
    for cell in getattr(pullback, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:  # a name the function never assigned
            continue
        held = own(value)
        if held is not value:
            cell.cell_contents = held


def tree_output(compiled, out):
    """The output as the user's function returns it: a tree's leaves (see
    pipeline/treereturns.py) in its structure, anything else as it is."""
    return out if compiled.output is None else unflatten(compiled.output, out)


class Pullback:
    """`pullback(seed)`: the vector-Jacobian product for a seed with the output's shape (a tree
    of seeds for a tree output)."""

    def __init__(self, owner, bound, out, pullback, compiled, rows=None):
        self.owner, self.bound, self.out = owner, bound, out
        self.pullback, self.tuple_output = pullback, compiled.tuple_output
        self.output = compiled.output
        self.rows = rows  # the compiled pullback of stacked seeds, where there is one

    def stacked(self, seeds):
        """The pullbacks of many seeds at this point: `seeds` has a new first axis, one seed
        shaped like the (array) output per row, and so has each gradient. Jitted, one compiled
        call runs the forward sweep once and the adjoint once per row (where the adjoint reads
        no tape and the inputs differentiated are arrays); else one pullback per row."""
        if self.output is not None or self.tuple_output:
            raise SeedShapeError(
                f"pullback.stacked takes one output array; {self.owner.func.__name__} returns "
                "a tuple or a tree",
                hint="call the pullback once per seed",
            )
        seeds = np.asarray(seeds)
        if seeds.shape[1:] != np.shape(self.out) or seeds.ndim != np.ndim(self.out) + 1:
            raise SeedShapeError(
                f"pullback.stacked takes seeds of shape (rows,) + {np.shape(self.out)} (the "
                f"output's shape after a first axis of rows), not {seeds.shape}",
                hint="stack the seeds along a new first axis",
            )
        if self.bound.trees:
            raise SeedShapeError(
                "pullback.stacked takes inputs differentiated that are arrays or numbers, not "
                "trees (dicts, lists, dataclasses)",
                hint="call the pullback once per seed",
            )
        inputs = [self.bound.arguments[n] for n in self.bound.wrt]
        fresh = self.rows is not None and seeds.dtype.kind == "f"
        if fresh:  # the compiled rows, arrays of their own
            grads = self.rows(np.ascontiguousarray(seeds, dtype=np.float64))
            grads = grads if len(inputs) > 1 else (grads,)
        else:
            each = [self(s) for s in seeds]
            grads = list(zip(*each)) if self.owner.wrt_tuple else [each]
            grads = grads or [()] * len(inputs)
        out = []
        for g, x in zip(grads, inputs):
            dtype = np.result_type(np.asarray(x).dtype, np.float32)
            shape = (len(seeds),) + np.shape(x)
            if fresh and g.dtype == dtype and g.shape == shape:
                out.append(g)
            else:
                out.append(np.array(g, dtype=dtype).reshape(shape))
        return tuple(out) if self.owner.wrt_tuple else out[0]

    def __call__(self, seed):
        if self.output is not None:
            d, leaves = flatten(seed)
            if not same_structure(d, self.output):
                raise SeedShapeError(
                    f"the output of {self.owner.func.__name__} is a tree; pass a seed of the "
                    f"same structure ({unflatten(self.output, ['...'] * len(self.out))!r})"
                )
            seed = tuple(leaves)
        outs = self.out if self.tuple_output else (self.out,)
        seeds = seed if self.tuple_output else (seed,)
        if self.tuple_output and (not isinstance(seed, (tuple, list)) or len(seed) != len(outs)):
            raise SeedShapeError(
                f"the output is a tuple of {len(outs)}; pass a tuple of " f"{len(outs)} seeds"
            )
        conformed = []
        for s, o in zip(seeds, outs):
            if np.shape(s) != np.shape(o):
                raise SeedShapeError(
                    f"the seed has shape {np.shape(s)} but the output of "
                    f"{self.owner.func.__name__} has shape {np.shape(o)}",
                    hint="pass a seed shaped like the output",
                )
            conformed.append(s)
        with user_lines(self.pullback):
            grads = self.pullback(*conformed)
        return self.owner._finish(grads, self.bound, conformed)
