"""`s2sad.checkpoint`: binomial checkpointing (Griewank's revolve) for a long loop's gradient.

    for t in s2sad.checkpoint(range(n), snapshots=20):
        y = y + h * f(y, t)

In plain Python `checkpoint(steps)` is `steps`. Under `grad`, `vjp` and `value_and_grad` the
transform (pipeline/checkpoint_loops.py) makes the loop's body a function of the state the loop
carries (the names it assigns that live across iterations) and the loop's other inputs, and the
generated gradient calls one `CheckpointedLoop` in the loop's place. Its forward run keeps no
tape; its rule (`CheckpointedLoop.vjp`) reverses the loop holding at most `snapshots` states,
recomputing forward from the nearest one (`revolve`), each step's adjoint being the step
function's own s2sad vjp.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from math import comb

import numpy as np

from .custom import register_vjp
from .pipeline.ranks import rank_of_argument


def checkpoint(steps, snapshots=None):
    """Mark `for t in checkpoint(range(n), snapshots=k):` for binomial checkpointing: its
    gradient keeps at most `k` of the loop's states (default: about sqrt(2n), so that no step
    runs forward more than three times) instead of a tape entry per step. Returns `steps`."""
    if snapshots is not None and (
        isinstance(snapshots, bool) or not isinstance(snapshots, numbers.Integral) or snapshots < 1
    ):
        raise ValueError(f"snapshots must be a positive int, not {snapshots!r}")
    return steps


def repetitions(steps: int, snapshots: int) -> int:
    """The fewest forward runs of a step that reversing `steps` steps from `snapshots` saved
    states (the first included) needs: the least r with binomial(snapshots + r, r) >= steps."""
    r = 0
    while comb(snapshots + r, r) < steps:
        r += 1
    return r


def least_advances(steps: int, snapshots: int) -> int:
    """Griewank's bound: the fewest forward steps (beyond each adjoint step's own) that reversing
    `steps` steps takes from `snapshots` saved states."""
    if steps <= 1:
        return 0
    r = repetitions(steps, snapshots)
    return r * steps - comb(snapshots + r, r - 1)


def default_snapshots(steps: int) -> int:
    """The fewest snapshots with which each step runs forward at most twice in the reverse
    sweep: about sqrt(2 * steps)."""
    c = 1
    while comb(c + 2, 2) < steps:
        c += 1
    return c


@dataclass
class Counts:
    """What the last `revolve` did: forward steps, adjoint steps, states saved at most at once."""

    advances: int = 0
    adjoints: int = 0
    most_saved: int = 0


LAST = Counts()


def _copy(state: tuple) -> tuple:
    """A state to advance from: the body may write into its arrays."""
    return tuple(np.array(v, copy=True) if isinstance(v, np.ndarray) else v for v in state)


def revolve(advance, adjoint, state: tuple, steps, snapshots: int, bar):
    """Reverse the loop `for t in steps: state = advance(t, state)` from the cotangent `bar` of
    its last state, with `adjoint(t, state, bar)` giving the cotangent of the state before step
    t (and accumulating what else it reads), saving at most `snapshots` states (the first one
    included). The split is revolve's, which meets Griewank's bound (`least_advances`). Returns the first state's
    cotangent."""
    counts = Counts()
    n = len(steps)
    saved = [(0, _copy(state))]  # (index, state): the stack of snapshots
    hi = n  # steps [0, hi) remain to reverse
    while hi > 0:
        lo, start = saved[-1]
        length = hi - lo
        free = snapshots - len(saved) + 1  # the states this segment may hold, its first included
        if length == 1:
            bar = adjoint(steps[lo], _copy(start), bar)
            counts.adjoints += 1
            hi = lo
            saved.pop()
            continue
        if free <= 1:  # no room: run forward from the segment's start to its last step
            run, last = _copy(start), hi - 1
        else:
            r = repetitions(length, free)
            # the first part: at most binomial(free + r - 1, r - 1) steps (run r - 1 times more),
            # the rest at least binomial(free + r - 2, r - 1) (r times, one state fewer)
            first = min(comb(free + r - 1, r - 1), length - comb(free + r - 2, r - 1), length - 1)
            run, last = _copy(start), lo + max(first, 1)
        for k in range(lo, last):
            run = advance(steps[k], run)
        counts.advances += last - lo
        if free <= 1:
            bar = adjoint(steps[last], run, bar)
            counts.adjoints += 1
            hi = last
        else:
            saved.append((last, run))
            counts.most_saved = max(counts.most_saved, len(saved))
    counts.most_saved = max(counts.most_saved, 1 if n else 0)
    LAST.advances, LAST.adjoints, LAST.most_saved = (
        counts.advances,
        counts.adjoints,
        counts.most_saved,
    )
    return bar


class CheckpointedLoop:
    """A checkpointed loop as the generated gradient calls it: `loop(steps, snapshots, *state,
    *inputs)` runs `state = step(t, *state, *inputs)` for t in steps and returns the last state
    (a tuple for several names); `vjp` is its rule. `differentiate` is the pipeline's, for the
    step function's vjp (made once per set of argument ranks)."""

    def __init__(self, step, name: str, state: tuple, inputs: tuple, differentiate):
        self.step, self.__name__, self.__qualname__ = step, name, name
        self.state, self.inputs = state, inputs
        self.differentiate = differentiate
        self.transforms: dict = {}
        register_vjp(self, self.vjp, ("steps", "snapshots") + state + inputs)

    def __call__(self, steps, snapshots, *values):
        n = len(self.state)
        state, inputs = _copy(values[:n]), values[n:]
        for t in steps:
            state = self.advance(t, state, inputs)
        return state[0] if n == 1 else state

    def advance(self, t, state: tuple, inputs: tuple) -> tuple:
        out = self.step(t, *state, *inputs)
        return (out,) if len(self.state) == 1 else tuple(out)

    def vjp(self, g, ans, steps, snapshots, *values):
        """The rule: the cotangents of (steps, snapshots, *state, *inputs) from that of the
        last state, `g` (for several names, an array with one entry per name, 0 where none)."""
        n = len(self.state)
        state, inputs = values[:n], values[n:]
        bar = (g,) if n == 1 else tuple(g[i] for i in range(n))
        bar = tuple(_zero_like(b, s) for b, s in zip(bar, state))
        sums = [None] * len(inputs)

        def adjoint(t, st, b):
            args = (t, *st, *inputs)
            compiled, wrt = self._vjp_of(args)
            _, pullback = compiled.function(*args, *compiled.read(self.step))
            got = pullback(*b)
            got = (got,) if len(wrt) == 1 else got
            out = [None] * n
            for k, d in zip(wrt, got):
                if k <= n:
                    out[k - 1] = d
                else:
                    i = k - 1 - n
                    sums[i] = d if sums[i] is None else sums[i] + d
            return tuple(_zero_like(o, s) for o, s in zip(out, st))

        if snapshots is None:
            snapshots = default_snapshots(len(steps))
        advance = lambda t, st: self.advance(t, st, inputs)  # noqa: E731
        bar = revolve(advance, adjoint, tuple(state), steps, snapshots, bar)
        inputs_bar = [_zero_like(s, x) for s, x in zip(sums, inputs)]
        return (None, None, *bar, *inputs_bar)

    def _vjp_of(self, args):
        """The step function's vjp for these arguments' ranks, and the indices of its
        differentiated parameters (the real floats)."""
        ranks = tuple(rank_of_argument(a) for a in args)
        if ranks not in self.transforms:
            params = list(self.step.__code__.co_varnames[: len(args)])
            wrt = tuple(
                k for k in range(1, len(args)) if np.issubdtype(np.result_type(args[k]), np.floating)
            )
            compiled = self.differentiate(
                self.step,
                tuple(params[k] for k in wrt),
                "vjp",
                tuple(zip(params, ranks)),
            )
            self.transforms[ranks] = (compiled, wrt)
        return self.transforms[ranks]


def _zero_like(value, like):
    """`value`, or a zero shaped like `like` where no cotangent reached (None or a 0)."""
    if value is None or (np.ndim(value) == 0 and np.ndim(like) > 0 and value == 0):
        if isinstance(like, np.ndarray):
            return np.zeros_like(like, dtype=np.result_type(like, np.float32))
        return 0.0
    return value
