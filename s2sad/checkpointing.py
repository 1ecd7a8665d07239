"""`s2sad.checkpoint`: binomial checkpointing (Griewank's revolve) for a long loop's gradient.

    for t in s2sad.checkpoint(range(n), snapshots=20):
        y = y + h * f(y, t)

In plain Python `checkpoint(steps)` is `steps`. Under `grad`, `vjp` and `value_and_grad` the
transform (pipeline/checkpoint_loops.py) makes the loop a function of a sub-range, the state the
loop carries (the names it assigns that live across iterations) and the loop's other inputs, and
the generated gradient calls one `CheckpointedLoop` in the loop's place. Its forward run keeps
no tape; its rule (`CheckpointedLoop.vjp`) cuts the steps into segments, saves at most
`snapshots` states at segment starts and reverses the segments by revolve (`revolve`),
recomputing forward from the nearest saved state; each segment is reversed by its own taped vjp,
so the tape holds one segment. Under jit the segments run in Numba, but for a segment where
a step changes a state's rank, which Numba cannot type (`_keeps_ranks` tells by one step in
Python).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from math import comb

import numpy as np

from .custom import register_vjp
from .jit import STRICT, TOLD, JitError, Jitted
from .pipeline.ranks import rank_of_argument


def checkpoint(steps, snapshots=None):
    """Mark `for t in checkpoint(range(n), snapshots=k):` for binomial checkpointing: its
    gradient keeps at most `k` of the loop's states and the tape of one segment of
    ceil(n / binomial(k + 2, 2)) steps, instead of a tape entry per step; each step runs forward
    at most twice more. Default k: about (2n) ** (1/3), as many as a segment's steps (with
    jit, about (2n / 64) ** (1/3): a compiled segment is 64 times longer).
    Returns `steps`."""
    _check_snapshots(snapshots)
    return steps


def _check_snapshots(snapshots) -> None:
    if snapshots is not None and (
        isinstance(snapshots, bool) or not isinstance(snapshots, numbers.Integral) or snapshots < 1
    ):
        raise ValueError(f"snapshots must be a positive int, not {snapshots!r}")


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


def default_snapshots(steps: int, jit=False) -> int:
    """As many snapshots as steps in a taped segment (`segment_length`): the least c with
    c * binomial(c + 2, 2) >= steps, about (2 * steps) ** (1 / 3). Jitted segments are 64 times
    longer (a call into Numba costs as much as many steps)."""
    c = 1
    while c * comb(c + 2, 2) * (64 if jit else 1) < steps:
        c += 1
    return c


@dataclass
class Counts:
    """What the last `revolve` did: forward steps, adjoint steps, states saved at most at once."""

    advances: int = 0
    adjoints: int = 0
    most_saved: int = 0
    reused: int = 0  # steps of the first descent, run by the forward run
    segment: int = 1  # the steps in each unit reversed (CheckpointedLoop.vjp sets it)


LAST = Counts()


def _copy(state: tuple) -> tuple:
    """A state to advance from: the body may write into its arrays."""
    return tuple(np.array(v, copy=True) if isinstance(v, np.ndarray) else v for v in state)


def _split(length: int, free: int) -> int:
    """Revolve's first part of `length` steps reversed from `free` states: at most
    binomial(free + r - 1, r - 1) steps (run r - 1 times more), leaving at least
    binomial(free + r - 2, r - 1) (run r times, with one state fewer)."""
    r = repetitions(length, free)
    return max(1, min(comb(free + r - 1, r - 1), length - comb(free + r - 2, r - 1), length - 1))


def first_descent(steps: int, snapshots: int) -> list[int]:
    """The steps before which revolve saves a state on its first way forward (0 first): the
    forward run saves them, and the reverse sweep starts from them."""
    at, lo, free = [0], 0, snapshots
    while steps - lo > 1 and free > 1:
        lo += _split(steps - lo, free)
        at.append(lo)
        free -= 1
    return at


def revolve(advance, adjoint, steps: int, snapshots: int, bar, saved: list):
    """Reverse `steps` steps from the cotangent `bar` of the last state, holding at most
    `snapshots` states: `advance(i, j, state)` is the state after steps i..j-1, `adjoint(i,
    state, bar)` the cotangent of the state before step i (accumulating what else it reads),
    `saved` the states of `first_descent`, as [(step, state), ...]. The split is revolve's,
    which meets Griewank's bound (`least_advances`) with the first descent. Returns the first
    state's cotangent."""
    counts = Counts(reused=saved[-1][0] if steps else 0, most_saved=len(saved) if steps else 0)
    hi = steps  # steps [0, hi) remain to reverse
    while hi > 0:
        lo, start = saved[-1]
        length = hi - lo
        free = snapshots - len(saved) + 1  # the states this part may hold, its first included
        if length == 1:
            bar = adjoint(lo, _copy(start), bar)
            counts.adjoints += 1
            hi = lo
            saved.pop()
            continue
        last = hi - 1 if free <= 1 else lo + _split(length, free)
        run = advance(lo, last, _copy(start))
        counts.advances += last - lo
        if free <= 1:  # no room: run forward from the part's start to its last step
            bar = adjoint(last, run, bar)
            counts.adjoints += 1
            hi = last
        else:
            saved.append((last, run))
            counts.most_saved = max(counts.most_saved, len(saved))
    LAST.__dict__.update(counts.__dict__, segment=LAST.segment)
    return bar


def segment_length(steps: int, snapshots: int) -> int:
    """The steps one taped segment holds: enough that the segments need at most 2 forward runs
    each from `snapshots` saved states (1 where binomial(snapshots + 2, 2) >= steps)."""
    return max(1, -(-steps // comb(snapshots + 2, 2)))


class CheckpointedLoop:
    """A checkpointed loop as the generated gradient calls it: `loop(steps, snapshots, *state,
    *inputs)` runs the loop over `steps` and returns its last state (a tuple for several names);
    `vjp` is its rule. `segment(start, stop, step, *state, *inputs)` is the loop over that
    range, made from the user's loop (pipeline/checkpoint_loops.py); `differentiate` is the
    pipeline's, for its taped vjp (made once per set of argument ranks and real arguments)."""

    # under jit, the code calling it runs in Python and its segments in Numba (jit.Jitted)
    compiles_itself = True

    def __init__(self, segment, name: str, state: tuple, inputs: tuple, differentiate, jit=False):
        self.segment, self.__name__, self.__qualname__ = segment, name, name
        self.state, self.inputs = state, inputs
        self.differentiate, self.jit = differentiate, jit
        self.transforms: dict = {}
        # _key(args) -> under jit, the state whose rank a step changes (then Python runs the
        # segment; jit="strict" refuses it: see _changed_rank), or None where Numba runs it
        self.numba: dict = {}
        self.assigned_at: dict = {}  # state name -> (file, line, text) of its assignment
        self.kept = None  # (the last call's result, the states it saved)
        self.told = False  # a segment ran in Python in this call, and the user was told
        lead, taken = [], set(state + inputs)
        for base in ("steps", "snapshots"):  # unlike the user's names the loop reads
            name, k = base, 2
            while name in taken:
                name, k = f"{base}{k}", k + 1
            lead.append(name)
            taken.add(name)
        register_vjp(self, self.vjp, tuple(lead) + state + inputs)

    def __call__(self, steps, snapshots, *values):
        """The loop's last state; the states of revolve's first descent are kept for `vjp`
        (the last call's only, told by the result it returned)."""
        self.told = False
        self.kept = self._descend(steps, snapshots, values)
        return self.kept[0]

    def _descend(self, steps, snapshots, values) -> tuple:
        """The loop's last state, and the states of revolve's first descent."""
        n = len(self.state)
        state, inputs = _copy(values[:n]), values[n:]
        length, segments, snapshots = self._plan(steps, snapshots)
        saved, state = [(0, state)], _copy(state)  # the body may write into its state
        out = values[0] if n == 1 else values[:n]
        at = first_descent(segments, snapshots) + [segments]
        for a, b in zip(at, at[1:]):
            out = self._run(steps[a * length : b * length], state, inputs)
            state = (out,) if n == 1 else tuple(out)
            if b < segments:
                saved.append((b, _copy(state)))
        return out, saved

    def _plan(self, steps, snapshots):
        """The steps per segment, the segments and the snapshots for a run over `steps`."""
        _check_snapshots(snapshots)  # the loop's mark is not called: its argument comes here
        if snapshots is None:
            snapshots = default_snapshots(len(steps), bool(self.jit))
        length = segment_length(len(steps), snapshots)
        return length, -(-len(steps) // length), snapshots

    def _run(self, steps: range, state: tuple, inputs: tuple):
        args = (steps.start, steps.stop, steps.step, *state, *inputs)
        if not self.jit or not steps:
            return self.segment(*args)
        if _key(args) not in self.numba:
            self.numba[_key(args)] = self._changed_rank(steps, state, inputs)
        changed = self.numba[_key(args)]
        if changed is not None:
            if STRICT.get():
                raise self._rank_error(*changed)
            return self.segment(*args)
        primal, _, _, data = self._forms(args)
        return primal(*args, *data)

    def _changed_rank(self, steps: range, state: tuple, inputs: tuple):
        """(name, rank before, rank after) of the first state whose rank the first step, run in
        Python, changes, or None: one that changes it (`h = 0.0` before the loop, `h =
        np.tanh(y)` in it) makes a segment Numba cannot type, whose form for Numba gave h's
        cotangent h's shape after the step; such segments run and are reversed in Python (once
        per kind of arguments)."""
        first = steps[:1]
        out = self.segment(first.start, first.stop, first.step, *_copy(state), *inputs)
        after = (out,) if len(self.state) == 1 else out
        for name, v, w in zip(self.state, state, after):
            if rank_of_argument(v) != rank_of_argument(w):
                return name, rank_of_argument(v), rank_of_argument(w)
        return None

    def _rank_error(self, name: str, before: int, after: int) -> JitError:
        file, line, text = self.assigned_at.get(name, (None, None, None))
        return JitError(
            f"Numba cannot compile s2sad.checkpoint's {self.__name__}: '{name}' is of rank "
            f"{before} before the loop and of rank {after} after its first step, and Numba "
            "cannot type a value whose rank changes",
            file=file,
            line=line,
            source=text,
            hint=f"bind {name} before the loop to a value of the rank the loop gives it, or use "
            "jit=True to run such segments in Python",
        )

    def vjp(self, g, ans, steps, snapshots, *values):
        """The rule: the cotangents of (steps, snapshots, *state, *inputs) from that of the
        last state, `g` (for several names, an array with one entry per name, 0 where none).
        Revolve reverses segments of the loop, each by the segment function's taped vjp."""
        n = len(self.state)
        inputs = values[n:]
        bar = (g,) if n == 1 else tuple(g[i] for i in range(n))
        # a zero shaped like the last state, not the first: a rank may change in the loop
        bar = tuple(_zero_like(b, s) for b, s in zip(bar, (ans,) if n == 1 else ans))
        sums = [None] * len(inputs)
        length, segments, snapshots = self._plan(steps, snapshots)
        kept, self.kept = self.kept, None
        if kept is not None and kept[0] is ans:
            saved = kept[1]
        else:  # another call's result: run the first descent again
            saved = self._descend(steps, snapshots, values)[1]
        LAST.segment = length

        def advance(i, j, st):
            out = self._run(steps[i * length : j * length], st, inputs)
            return (out,) if n == 1 else tuple(out)

        def adjoint(i, st, b):
            seg = steps[i * length : (i + 1) * length]
            args = (seg.start, seg.stop, seg.step, *st, *inputs)
            _, sweep, wrt, data = self._forms(args)
            got = sweep(*args, *b, *data)
            got = (got,) if len(wrt) == 1 else got
            out = [None] * n
            for k, d in zip(wrt, got):
                if k < 3 + n:
                    out[k - 3] = d
                else:
                    i = k - 3 - n
                    sums[i] = d if sums[i] is None else sums[i] + d
            return tuple(_zero_like(o, s) for o, s in zip(out, st))

        bar = revolve(advance, adjoint, segments, snapshots, bar, saved)
        inputs_bar = [_zero_like(s, x) for s, x in zip(sums, inputs)]
        return (None, None, *bar, *inputs_bar)

    def _forms(self, args):
        """For these arguments' ranks: the segment's primal and its recording sweep (`sweep(*args,
        *seeds, *data)` returns the cotangents), Numba's under jit; the indices of the
        differentiated parameters (the real floats); the data they read (globals, as now)."""
        key = _key(args)
        ranks, wrt = key
        if key in self.transforms:
            primal, sweep, wrt, compiled = self.transforms[key]
            data = compiled.read(self.segment)
            if data is not None:
                return primal, sweep, wrt, data
        params = list(self.segment.__code__.co_varnames[: len(args)])
        numba = bool(self.jit) and self.numba.get(key) is None
        compiled = self.differentiate(
            self.segment,
            tuple(params[k] for k in wrt),
            "vjp",
            tuple(zip(params, ranks)),
            numba,
        )
        primal, sweep = compiled.function, compiled.functions.get(f"{compiled.name}_sweep")
        if numba:  # Numba's: the value, and the sweep (a jitted vjp re-runs it)
            # jit=True's and "strict"'s calls share this loop: each call tells which it is
            jitted, what = Jitted.of(compiled), f"s2sad.checkpoint's {self.__name__}"

            def primal(*a, name=compiled.name):
                return self._compiled(jitted, a, name, what)

            def sweep(*a, name=f"{compiled.name}_sweep"):
                return self._compiled(jitted, a, name, what)

        elif sweep is None:  # the pullback is a closure over the forward run's values

            count, seeds = len(args), len(self.state)  # a cotangent per state name

            def sweep(*rest):
                _, pullback = compiled.function(*rest[:count], *rest[count + seeds :])
                return pullback(*rest[count : count + seeds])

        self.transforms[key] = (primal, sweep, wrt, compiled)
        return primal, sweep, wrt, compiled.read(self.segment)

    def _compiled(self, jitted: Jitted, args: tuple, name: str, what: str):
        """`name` of a segment's Numba code run on `args`. Where Numba could not compile it, its
        Python version runs, and the warning saying so comes once a call of the user's
        (`__call__` starts one), not at each of the call's runs of the segments."""
        told = TOLD.set(self.told)
        try:
            return jitted(args, STRICT.get(), name, what)
        finally:
            TOLD.reset(told)
            self.told = self.told or jitted.falls_back(name, args)


def _key(args: tuple) -> tuple:
    """What a segment's transform is made for: the arguments' ranks and which of them are real
    (differentiated). The second because `s = 0` is rank 0 like the float it is after a step:
    a transform made from the int's segment, without s, must not reverse the later ones."""
    ranks = tuple(rank_of_argument(a) for a in args)
    return ranks, tuple(k for k in range(3, len(args)) if _real(args[k]))


def _real(value) -> bool:
    """A value to differentiate: a real float or an array of them."""
    if isinstance(value, np.ndarray):
        return np.issubdtype(value.dtype, np.floating)
    return isinstance(value, (float, np.floating))


def _zero_like(value, like):
    """`value`, or a zero shaped like `like` where no cotangent reached (None or a 0)."""
    if value is None or (np.ndim(value) == 0 and np.ndim(like) > 0 and value == 0):
        if isinstance(like, np.ndarray):
            return np.zeros_like(like, dtype=np.result_type(like, np.float32))
        return 0.0
    return value
