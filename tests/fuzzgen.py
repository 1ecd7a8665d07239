"""A random-program fuzzer for s2sad.

`generate(seed)` writes a random but valid NumPy function (and the helper functions it calls) from
the constructs s2sad supports: elementwise arithmetic and functions, broadcasting between random
compatible shapes, reductions over random axes, matmul/dot/einsum chains, reshapes, transposes,
concatenate/stack, indexing reads (ints, slices, integer arrays, boolean masks), in-place writes
into fresh arrays, `if`/`elif`/`else` on data, `for` and `while` loops with carried state (with
`break`/`continue`), calls to helper functions and local lambdas, the `math` module on scalars,
and scalar, array or tuple outputs. Gated constructs (`EXTRAS`; `DEFAULT_EXTRAS`, on by default,
are all but the last) add what binds late or shares memory: arrays written in place through a
second name or a view, writes through repeated indices, nested defs reading a variable rebound
before the call or keeping a default rebound after the def, and functions made by a factory
closing over captured values; and `loop-branch`: if/elif/else in loops assigning names read after
the if and by later iterations.

The same seed always gives the same program. Every program is written twice from one stream of
random choices: the *plain* version, which s2sad differentiates, and the *probe* version, where
every kink (abs, maximum/minimum, max/min reductions, clip, comparisons in branches, loops, masks
and `where`, std) goes through a recorder that measures how close the test point is to the kink.
A test point within `KINK_MARGIN` of a kink is redrawn (finite differences are unreliable there),
and so is one where a comparison decides differently at some point of the small finite-difference
stencils along a direction the check moves the inputs in (an input element, the jvp tangent): a
value that moves steeply crosses its threshold there however far it starts from it. So a mismatch
with finite differences means a wrong derivative, not a bad test point.

Domains are kept safe by construction: `log`, `sqrt` and fractional powers only see positive
expressions (`e**2 + c`, `exp(e)`, ...), divisors are bounded away from zero, `exp` only sees
bounded arguments, and rough magnitude bounds are tracked so that values stay moderate.

`check_program(seed, workdir)` generates, runs and checks one program and returns an `Outcome`:

- "ok": s2sad's gradient (`grad`, for scalar outputs), pullback (`vjp`, with a random seed) and
  directional derivative (`jvp`, with a random tangent) match central finite differences, have
  the input's (for jvp: the output's) type/shape/dtype, the primal output matches, and no
  argument, seed or tangent was modified; for a single output of at most JACOBIAN_MAX_OUT
  elements, `jacobian` in forward and in reverse mode has blocks shaped out.shape + in.shape
  that match finite differences, and the reverse-mode rows match vjp pullbacks of the output's
  basis seeds (modes "grad", "vjp", "jvp", "jacobian"; `modes=` picks some);
- "refused": s2sad raised an `S2SADError` (a deliberate refusal) in some mode ("jacobian-forward"
  and "jacobian-reverse" count apart), and every mode that did not refuse was correct;
- "fail": anything else inside s2sad: another exception, a wrong value, a wrong type/shape, a
  mutated argument, or an S2SADError that calls itself an internal error;
- "rejected": no test point away from kinks / overflow was found (the generator's problem, not
  s2sad's; kept rare).

With `jit=True`, the program's gradient (or one vjp pullback, for array outputs) is also taken
with `jit=True` and must agree with Python mode to JIT_RTOL, whether Numba compiled it or it fell
back to Python with a JitFallbackWarning (`Outcome.jit` says which); a factory's second instance
likewise, and in Python mode against finite differences.
"""

from __future__ import annotations

import copy
import importlib.util
import math
import os
import random
import signal
import sys
import traceback
from dataclasses import dataclass, field

import numpy as np

KINK_MARGIN = 1e-3  # a test point must be at least this far from every kink
EPS = 1e-6
RTOL = 1e-4
ATOL = 1e-6
MAX_VALUE = 1e6  # reject test points whose outputs get larger than this
PROGRAM_TIMEOUT_S = 20
JIT_TIMEOUT_S = 180  # compiling with Numba takes seconds, the first time many
JIT_RTOL = 1e-10  # jitted and Python-mode derivatives must agree to this (relative)

# Constructs that alias memory or bind names late (issue #13), each gated so that a run can show
# which class a failure belongs to: with none of them, every seed writes the program older
# versions of the generator wrote (their choices come from a stream of their own).
#   alias         `z = y; z += e`, `v = y[1:]; y *= e` and the like, then reads of every name
#   repeat-index  `y[[0, 0, 1]] = e`, `y[np.array([2, -1])] += e` (the last write wins)
#   closure       a nested def reading a variable rebound before the call; `def h(q, k=k)`
#                 with `k` rebound after the def
#   factory       the function is made by a factory closing over an array and a float (one of
#                 them a module constant); a second instance with other values is checked too
#   loop-branch   an if/elif/else in a loop body assigning a name in its arms (all of them, or
#                 some with a def earlier in the body or before the loop), read after the if, by
#                 the next iteration (the next iteration's `if` too), written into an array row
#                 by row, with a `break` ending an arm; not in DEFAULT_EXTRAS (the CI seeds keep
#                 their programs): tests/test_fuzz.py runs a few seeds of its own with it
EXTRAS = ("alias", "repeat-index", "closure", "factory", "loop-branch")
DEFAULT_EXTRAS = frozenset(EXTRAS) - {"loop-branch"}
P_EXTRA = {"alias": 0.035, "closure": 0.03, "repeat-index": 0.1, "factory": 0.12}
P_LOOP_BRANCH = 0.6  # per loop (and for a last loop in the function), when "loop-branch" is on


# =============================================================================== the probe


class Probe:
    """Kink recorder used by the probe version of a program (the `_K` global)."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.sites = []  # (what, distance to the kink), in execution order
        self.decisions = []  # the outcome of each comparison, in execution order

    def _note(self, m, what):
        m = float(m)
        self.sites.append((what, m if m == m else -1.0))

    @staticmethod
    def _amin(a):
        a = np.asarray(a, dtype=np.float64)
        return float(np.min(a)) if a.size else math.inf

    def abs(self, x):
        self._note(self._amin(np.abs(x)), "abs")
        return np.abs(x)

    def maximum(self, a, b):
        self._note(self._amin(np.abs(np.subtract(a, b))), "maximum")
        return np.maximum(a, b)

    def minimum(self, a, b):
        self._note(self._amin(np.abs(np.subtract(a, b))), "minimum")
        return np.minimum(a, b)

    def _gap(self, e, axis, which):
        a = np.asarray(e, dtype=np.float64)
        if axis is None:
            flat = a.reshape(1, -1)
        else:
            axes = axis if isinstance(axis, tuple) else (axis,)
            axes = tuple(ax % a.ndim for ax in axes)
            moved = np.moveaxis(a, axes, tuple(range(a.ndim - len(axes), a.ndim)))
            n = int(np.prod([a.shape[ax] for ax in axes]))
            flat = moved.reshape(-1, n)
        if flat.shape[1] < 2:
            return
        s = np.sort(flat, axis=1)
        if which == "max":
            self._note(self._amin(s[:, -1] - s[:, -2]), "max-reduction tie")
        else:
            self._note(self._amin(s[:, 1] - s[:, 0]), "min-reduction tie")

    def max(self, e, axis=None, keepdims=False):
        self._gap(e, axis, "max")
        return np.max(e, axis=axis, keepdims=keepdims)

    def min(self, e, axis=None, keepdims=False):
        self._gap(e, axis, "min")
        return np.min(e, axis=axis, keepdims=keepdims)

    def clip(self, x, lo, hi):
        self._note(self._amin(np.abs(np.subtract(x, lo))), "clip low")
        self._note(self._amin(np.abs(np.subtract(x, hi))), "clip high")
        return np.clip(x, lo, hi)

    def _decide(self, r):
        self.decisions.append(np.asarray(r, dtype=bool).tobytes())
        return r

    def gt(self, a, b):
        self._note(self._amin(np.abs(np.subtract(a, b))), "comparison")
        return self._decide(a > b)

    def lt(self, a, b):
        self._note(self._amin(np.abs(np.subtract(a, b))), "comparison")
        return self._decide(a < b)

    def std(self, e, axis=None, keepdims=False, ddof=0):
        r = np.std(e, axis=axis, keepdims=keepdims, ddof=ddof)
        self._note(self._amin(r), "std at 0")
        return r


def _near_kinks(base, moved):
    """The kink sites of `base` closer than KINK_MARGIN that matter. A tie that is exact at the
    test point and stays exact when every input moves (max over equal copies, abs(x - x), two
    zeros of a fresh array) is between identical functions: every one-sided derivative agrees, so
    finite differences are fine there (std at 0 excepted: its derivative is infinite)."""
    near = [(i, w, m) for i, (w, m) in enumerate(base) if m < KINK_MARGIN]
    if not near or moved is None or len(moved) != len(base):
        return near
    return [
        (i, w, m)
        for i, w, m in near
        if not (w != "std at 0" and m <= 1e-12 and moved[i][0] == w and moved[i][1] <= 1e-12)
    ]


# =============================================================================== shapes


def bcast(*shapes):
    return tuple(np.broadcast_shapes(*shapes))


def size(shape):
    return int(np.prod(shape)) if shape else 1


@dataclass
class Var:
    name: str  # the code that reads it (a name, or `x[i]` inside a loop)
    shape: tuple
    bound: float
    kind: str = "array"  # array | float | int | item


@dataclass
class E:
    """A generated expression: its code, shape, a rough bound on |value|, and whether the value
    is a fresh array (not a view of a variable)."""

    code: str
    shape: tuple
    bound: float
    fresh: bool = True


@dataclass
class Program:
    seed: int
    source: str  # plain version: what s2sad reads
    probe_source: str
    fname: str
    params: list  # (name, kind, shape) ; kind in array | float | int
    int_values: dict
    out_kind: str  # scalar | array | tuple
    wrt: object  # index, name or tuple of them
    features: set = field(default_factory=set)
    factory: bool = False  # made by a factory: the module also holds a second instance, <fname>_b


ADVERSARIAL_NAMES = [
    "dx",
    "x_1",
    "dv0",
    "v_mul",
    "tmp_tape",
    "s_add",
    "d",
    "t_sum",
    "trips",
    "iters",
]


class Gen:
    """One program. `probe` switches the rendering of kinks; the random choices never depend on it,
    so both renderings of a seed describe the same program."""

    MAX_DIM = 5

    def __init__(self, seed: int, probe: bool, extras=DEFAULT_EXTRAS):
        self.r = random.Random(seed)
        self.rx = random.Random(f"extras-{seed}")  # decides where the gated constructs go
        self.rb = random.Random(f"loop-branch-{seed}")  # and loop-branch, apart (its own stream)
        self.force_branch = False  # the next loop gets a loop-branch
        self.extras = frozenset(extras)
        assert self.extras <= set(EXTRAS), sorted(self.extras - set(EXTRAS))
        self.seed = seed
        self.probe = probe
        self.captured: list[Var] = []  # what the factory closes over (read-only in the body)
        self.env: list[Var] = []
        self.lines: list[str] = []
        self.ind = 1
        self.counter = 0
        self.helpers: list[str] = []  # source of helper functions
        self.helper_sigs: list[tuple] = []  # (name, param shapes, n_defaults, return shape)
        self.features: set[str] = set()
        self.loop_depth = 0
        self.block_depth = 0
        self.write_phase: set[str] = set()  # arrays being written: no views of them may be named
        self.in_helper = False
        self.used_names: set[str] = set()
        self.n_helpers = 0

    # ------------------------------------------------------------------ utilities
    def emit(self, line: str):
        self.lines.append("    " * self.ind + line)

    def fresh(self, prefix="v") -> str:
        if not self.in_helper and self.r.random() < 0.04:
            for cand in self.r.sample(ADVERSARIAL_NAMES, len(ADVERSARIAL_NAMES)):
                if cand not in self.used_names and cand not in self.param_names:
                    self.used_names.add(cand)
                    self.features.add("adversarial-name")
                    return cand
        self.counter += 1
        name = f"{prefix}{self.counter}"
        self.used_names.add(name)
        return name

    def const(self, lo=-2.0, hi=2.0, nonzero=False):
        while True:
            c = round(self.r.uniform(lo, hi), 2)
            if not nonzero or abs(c) > 0.1:
                return c

    def pick(self, items, weights=None):
        return self.r.choices(items, weights=weights, k=1)[0]

    def chance(self, p):
        return self.r.random() < p

    def rand_dim(self):
        return self.pick([1, 2, 3, 4], [1, 4, 4, 2])

    def rand_shape(self, lo=0, hi=3):
        nd = self.r.randint(lo, hi)
        return tuple(self.rand_dim() for _ in range(nd))

    def vars_of(self, shape=None, kinds=("array", "float", "item", "int")):
        return [v for v in self.env if v.kind in kinds and (shape is None or v.shape == shape)]

    def pick_var(self, cands):
        # prefer recently defined values so that more of the program reaches the output
        w = [1.0 + i for i in range(len(cands))]
        return self.pick(cands, w)

    def target_shape(self):
        shapes = [v.shape for v in self.env if v.kind in ("array", "item", "float")]
        u = self.r.random()
        if shapes and u < 0.6:
            return self.pick(shapes)
        if shapes and u < 0.85:
            # a shape related to an existing one
            s = list(self.pick(shapes))
            how = self.pick(["drop", "add", "reverse", "change"])
            if how == "drop" and s:
                del s[self.r.randrange(len(s))]
            elif how == "add" and len(s) < 3:
                s.insert(self.r.randint(0, len(s)), self.rand_dim())
            elif how == "reverse":
                s = s[::-1]
            elif s:
                s[self.r.randrange(len(s))] = self.rand_dim()
            return tuple(s)
        return self.rand_shape(0, 3)

    # kinks, rendered plainly or through the probe
    def k(self, name):
        return f"_K.{name}" if self.probe else f"np.{name}"

    def cmp(self, a: str, op: str, b: str) -> str:
        if self.probe:
            return f"_K.{'gt' if op == '>' else 'lt'}({a}, {b})"
        return f"({a} {op} {b})"

    def cond(self, a: str, op: str, b: str) -> str:
        """A condition for if/while/break: plain `a > b` (no outer parentheses)."""
        if self.probe:
            return f"_K.{'gt' if op == '>' else 'lt'}({a}, {b})"
        return f"{a} {op} {b}"

    # ------------------------------------------------------------------ expressions
    def squash(self, e: E, limit=30.0) -> E:
        if e.bound <= limit:
            return e
        kind = self.pick(["tanh", "sin", "scale"])
        if kind == "tanh":
            return E(f"np.tanh({e.code})", e.shape, 1.0)
        if kind == "sin":
            return E(f"np.sin({e.code})", e.shape, 1.0)
        c = round(1.0 / e.bound, 6)
        return E(f"({c} * {e.code})", e.shape, 1.0)

    def expr(self, shape, depth) -> E:
        shape = tuple(shape)
        if depth <= 0 or self.chance(0.2):
            return self.leaf(shape)
        nd = len(shape)
        options = [
            ("binary", 10),
            ("unary", 6),
            ("exp", 2),
            ("div", 3),
            ("logsqrt", 3),
            ("pow", 2),
            ("abs", 1.5),
            ("maxmin", 1.5),
            ("where", 1.5),
            ("clip", 1),
            ("reduce", 6),
            ("matmul", 4),
            ("index", 4),
            ("helper", 2.5),
        ]
        if nd >= 1:
            options += [("reshape", 1.5), ("concat", 1.5), ("stack", 1.2), ("bcast", 0.7)]
        if nd >= 2:
            options += [("transpose", 2)]
        if nd == 0:
            options += [("math", 2.5), ("masksum", 1.2), ("einsum", 0.8)]
        if nd in (1, 2):
            options += [("einsum", 1.2)]
        if any(1 in shape for _ in [0]):
            options += [("expand", 1)]
        kind = self.pick([o[0] for o in options], [o[1] for o in options])
        e = getattr(self, "x_" + kind)(shape, depth - 1)
        if e is None:
            e = self.leaf(shape)
        assert e.shape == shape, (kind, e.shape, shape)
        return self.squash(e)

    def leaf(self, shape) -> E:
        cands = self.vars_of(shape)
        if shape == () and (not cands or self.chance(0.05)):
            c = self.const(nonzero=True)
            return E(repr(c) if c > 0 else f"({c!r})", (), 2.0)
        if cands and self.chance(0.9):
            v = self.pick_var(cands)
            return E(v.name, shape, v.bound, fresh=False)
        return self.adapt(shape)

    def adapt(self, shape) -> E:
        """Some variable turned into `shape`: indexed, sliced, reduced, reshaped, transposed or
        broadcast (through a scalar only when nothing else fits)."""
        vs = self.vars_of(kinds=("array", "float", "item"))
        assert vs, "no variables in scope"
        arrays = [v for v in vs if v.shape != ()]
        options = {
            "index": [v for v in arrays if v.shape[1:] == shape],
            "slice": [
                v
                for v in arrays
                if shape
                and v.shape != shape
                and len(v.shape) == len(shape)
                and all(a >= b for a, b in zip(v.shape, shape))
            ],
            "reduce": [v for v in vs if _reduces_to(v.shape, shape)],
            "reshape": [v for v in arrays if shape and size(v.shape) == size(shape)],
            "broadcast": [v for v in arrays if v.shape != shape and _broadcasts_to(v.shape, shape)],
            "scalar": [v for v in vs if v.shape == ()] if shape else [],
        }
        weights = {"index": 3, "slice": 3, "reduce": 3, "reshape": 2, "broadcast": 2, "scalar": 1}
        avail = [k for k, c in options.items() if c]
        if avail:
            how = self.pick(avail, [weights[k] for k in avail])
            v = self.pick_var(options[how])
            if how == "index":
                j = self.r.randrange(v.shape[0])
                return E(f"{v.name}[{j}]", shape, v.bound, fresh=False)
            if how == "slice":
                parts = []
                for a, b in zip(v.shape, shape):
                    o = self.r.randint(0, a - b)
                    parts.append(":" if a == b else f"{o}:{o + b}")
                return E(f"{v.name}[{', '.join(parts)}]", shape, v.bound, fresh=False)
            if how == "reduce":
                return self.reduce_from(E(v.name, v.shape, v.bound, fresh=False), shape)
            if how == "reshape":
                if len(v.shape) == 2 and v.shape[::-1] == shape and self.chance(0.6):
                    return E(f"{v.name}.T", shape, v.bound, fresh=False)
                if v.shape == shape:
                    return E(v.name, shape, v.bound, fresh=False)
                return E(f"{v.name}.reshape({shape!r})", shape, v.bound, fresh=False)
            if how == "broadcast" and self.chance(0.4):
                self.features.add("broadcast_to")
                return E(f"np.broadcast_to({v.name}, {shape!r})", shape, v.bound, fresh=False)
            return E(f"({v.name} * {self.spread(shape)})", shape, v.bound * 1.5)
        v = self.pick_var(vs)
        s = E(f"np.mean({v.name})", (), v.bound)
        if shape == ():
            return s
        return E(f"({s.code} * {self.spread(shape)})", shape, s.bound * 1.5)

    def spread(self, shape) -> str:
        """A constant array of `shape` with distinct entries (np.ones would make every max/min
        over it a tie)."""
        n = size(shape)
        if n == 1:
            return f"np.ones({shape!r})"
        lo = self.pick([0.5, -0.5, 0.25])
        return f"np.linspace({lo}, 1.5, {n}).reshape({shape!r})"

    def split_broadcast(self, shape):
        """Two operand shapes that broadcast together to exactly `shape`."""
        nd = len(shape)

        def shrink(full_cover):
            # drop some leading dims and set some dims to 1, but only where `full_cover` says the
            # other operand has the full size
            s = list(shape)
            lead = 0
            while lead < nd and full_cover[lead] and self.chance(0.3):
                lead += 1
            for i in range(lead, nd):
                if full_cover[i] and s[i] != 1 and self.chance(0.25):
                    s[i] = 1
            return tuple(s[lead:])

        if nd == 0:
            return (), ()
        s1 = shrink([True] * nd) if self.chance(0.5) else tuple(shape)
        pad = (None,) * (nd - len(s1)) + s1
        cover = [p is not None and p == shape[i] for i, p in enumerate(pad)]
        s2 = shrink(cover) if self.chance(0.6) else tuple(shape)
        if self.chance(0.5):
            s1, s2 = s2, s1
        assert bcast(s1, s2) == tuple(shape), (s1, s2, shape)
        return s1, s2

    def x_bcast(self, shape, depth):
        s1, s2 = self.split_broadcast(shape)
        if s1 == shape:
            s1 = s2
        if s1 == shape:
            return None
        a = self.expr(s1, depth)
        self.features.add("broadcast")
        return E(f"({a.code} + 0.1 * {self.spread(shape)})", shape, a.bound + 0.15)

    def x_binary(self, shape, depth):
        s1, s2 = self.split_broadcast(shape)
        if s1 != shape or s2 != shape:
            self.features.add("broadcast")
        a, b = self.expr(s1, depth), self.expr(s2, depth)
        op = self.pick(["+", "-", "*"], [3, 2, 4])
        bound = a.bound + b.bound if op != "*" else a.bound * b.bound
        return E(f"({a.code} {op} {b.code})", shape, bound)

    def x_unary(self, shape, depth):
        a = self.expr(shape, depth)
        f = self.pick(["sin", "cos", "tanh", "neg", "sq", "cube", "scale"])
        if f == "neg":
            return E(f"(-{a.code})", shape, a.bound)
        if f == "sq":
            return E(f"({a.code} ** 2)", shape, a.bound**2)
        if f == "cube":
            a = self.squash(a, 4.0)
            return E(f"({a.code} ** 3)", shape, a.bound**3)
        if f == "scale":
            c = self.const(nonzero=True)
            return E(f"({c} * {a.code})", shape, abs(c) * a.bound)
        self.features.add(f)
        return E(f"np.{f}({a.code})", shape, 1.0)

    def x_exp(self, shape, depth):
        a = self.squash(self.expr(shape, depth), 3.0)
        self.features.add("exp")
        return E(f"np.exp({a.code})", shape, math.exp(a.bound))

    def pos(self, shape, depth):
        """A positive expression: (code, lower bound, upper bound)."""
        kind = self.pick(["sq", "exp", "abs", "sqrtsq", "tanhsq"], [4, 3, 1, 1, 1])
        if kind == "sq":
            a = self.squash(self.expr(shape, depth), 10.0)
            c = self.pick([0.5, 1.0, 1.5])
            return f"({a.code} ** 2 + {c})", c, a.bound**2 + c
        if kind == "exp":
            a = self.squash(self.expr(shape, depth), 2.0)
            self.features.add("exp")
            return f"np.exp({a.code})", math.exp(-a.bound), math.exp(a.bound)
        if kind == "abs":
            a = self.squash(self.expr(shape, depth), 10.0)
            c = self.pick([0.5, 1.0])
            self.features.add("abs")
            return f"({self.k('abs')}({a.code}) + {c})", c, a.bound + c
        if kind == "sqrtsq":
            a = self.squash(self.expr(shape, depth), 10.0)
            self.features.add("sqrt")
            return f"np.sqrt({a.code} ** 2 + 1.0)", 1.0, a.bound + 1
        a = self.expr(shape, depth)
        return f"(1.0 + np.tanh({a.code}) ** 2)", 1.0, 2.0

    def x_div(self, shape, depth):
        s1, s2 = self.split_broadcast(shape)
        a = self.expr(s1, depth)
        p, lb, ub = self.pos(s2, depth)
        self.features.add("div")
        if self.chance(0.2):
            return E(f"({a.code} / {p} ** 2)", shape, a.bound / lb**2)
        return E(f"({a.code} / {p})", shape, a.bound / lb)

    def x_logsqrt(self, shape, depth):
        p, lb, ub = self.pos(shape, depth)
        f = self.pick(["log", "sqrt", "pow"])
        self.features.add(f)
        if f == "log":
            return E(f"np.log({p})", shape, max(abs(math.log(lb)), abs(math.log(ub))))
        if f == "sqrt":
            return E(f"np.sqrt({p})", shape, math.sqrt(ub))
        q = self.pick([0.5, 1.5, -0.5, 2.5])
        return E(f"({p} ** {q})", shape, max(ub**q, lb**q))

    def x_pow(self, shape, depth):
        if self.chance(0.5):
            # positive base, data-dependent exponent
            p, lb, ub = self.pos(shape, depth)
            ex = self.squash(self.expr(shape if self.chance(0.5) else (), depth), 1.0)
            if bcast(shape, ex.shape) != shape:
                ex = self.squash(self.expr((), depth), 1.0)
            self.features.add("pow-var-exponent")
            return E(f"({p} ** {ex.code})", shape, max(ub, 1 / lb))
        a = self.squash(self.expr(shape, depth), 4.0)
        n = self.pick([2, 3, 2.0, 4])
        return E(f"({a.code} ** {n})", shape, a.bound ** float(n))

    def x_abs(self, shape, depth):
        a = self.expr(shape, depth)
        self.features.add("abs")
        return E(f"{self.k('abs')}({a.code})", shape, a.bound)

    def x_maxmin(self, shape, depth):
        s1, s2 = self.split_broadcast(shape)
        a, b = self.expr(s1, depth), self.expr(s2, depth)
        f = self.pick(["maximum", "minimum"])
        self.features.add(f)
        return E(f"{self.k(f)}({a.code}, {b.code})", shape, max(a.bound, b.bound))

    def x_where(self, shape, depth):
        sc, _ = self.split_broadcast(shape)
        c = self.expr(sc, depth)
        s1, s2 = self.split_broadcast(shape)
        if bcast(s1, s2, sc) != shape:
            s1 = shape
        a, b = self.expr(s1, depth), self.expr(s2, depth)
        t = self.const(-0.5, 0.5)
        self.features.add("where")
        test = self.cmp(c.code, self.pick([">", "<"]), repr(t))
        # np.where gives a 0-d array for scalars: not `fresh`, so it is never named as is (a
        # later `s += ...` would then write into it in place)
        return E(
            f"np.where({test}, {a.code}, {b.code})", shape, max(a.bound, b.bound), fresh=shape != ()
        )

    def x_clip(self, shape, depth):
        a = self.expr(shape, depth)
        lo = self.const(-1.0, 0.0)
        hi = round(lo + self.r.uniform(0.3, 1.5), 2)
        self.features.add("clip")
        return E(f"{self.k('clip')}({a.code}, {lo}, {hi})", shape, max(abs(lo), abs(hi)))

    # -- reductions
    def x_reduce(self, shape, depth):
        nd = len(shape)
        ones = [i for i, d in enumerate(shape) if d == 1]
        if ones and self.chance(0.5):
            # keepdims: replace some size-1 axes with real sizes
            axes = sorted(self.r.sample(ones, self.r.randint(1, len(ones))))
            src = tuple(self.pick([2, 3, 4]) if i in axes else d for i, d in enumerate(shape))
            a = self.expr(src, depth)
            return self.reduction(a, tuple(axes), keepdims=True, out_shape=shape)
        r = self.r.randint(1, 2) if nd <= 2 else 1
        if nd + r > 4:
            r = 4 - nd
        if r <= 0:
            return None
        src_nd = nd + r
        axes = sorted(self.r.sample(range(src_nd), r))
        it = iter(shape)
        src = tuple(self.pick([2, 3, 4]) if i in axes else next(it) for i in range(src_nd))
        a = self.expr(src, depth)
        return self.reduction(a, tuple(axes), keepdims=False, out_shape=shape)

    def reduce_from(self, a: E, shape) -> E:
        """Reduce expression `a` to `shape` (which is `a.shape` with some axes deleted)."""
        axes = _reduced_axes(a.shape, shape)
        return self.reduction(a, tuple(axes), keepdims=False, out_shape=shape)

    def reduction(self, a: E, axes, keepdims, out_shape) -> E:
        src = a.shape
        n = size([src[i] for i in axes])
        f = self.pick(
            ["sum", "mean", "max", "min", "prod", "var", "std"], [5, 4, 1.5, 1.5, 1, 1, 1]
        )
        if f in ("var", "std") and n < 2:
            f = "sum"
        if f == "prod":
            a = self.squash(a, 1.5)
        if f == "std":
            # keep the variance away from 0 (std has an infinite derivative there): the spread
            # differs along every axis, so no slice of it is constant
            n = size(a.shape)
            spread = f"np.linspace(0.0, 1.0, {n}).reshape({a.shape!r})"
            a = E(f"({a.code} + 0.2 * {spread})", a.shape, a.bound + 0.2)
        # spell the axis: None, int (maybe negative), tuple
        nd = len(src)
        if len(axes) == nd and not keepdims and self.chance(0.6):
            axis_kw = ""
        elif len(axes) == 1:
            ax = axes[0]
            if self.chance(0.3):
                ax = ax - nd
            axis_kw = f"axis={ax}"
        else:
            axis_kw = f"axis={tuple(axes)!r}"
        if len(axes) == nd and not keepdims and axis_kw and self.chance(0.3):
            axis_kw = "axis=None"
        kws = [axis_kw] if axis_kw else []
        if keepdims:
            kws.append("keepdims=True")
        if f in ("var", "std") and self.chance(0.3) and n >= 2:
            kws.append("ddof=1")
        self.features.add(f"reduce-{f}")
        if keepdims:
            self.features.add("keepdims")
        kw = ", ".join(kws)
        use_method = self.chance(0.3)  # drawn in both renderings: the streams must not diverge
        if f in ("max", "min", "std") and self.probe:
            code = f"_K.{f}({a.code}{', ' + kw if kw else ''})"
        elif use_method and a.shape != () and f not in ("var", "std"):
            code = f"{_paren(a.code)}.{f}({kw})"
            self.features.add("reduce-method")
        else:
            code = f"np.{f}({a.code}{', ' + kw if kw else ''})"
        bound = {
            "sum": a.bound * n,
            "mean": a.bound,
            "max": a.bound,
            "min": a.bound,
            "prod": a.bound**n if a.bound < 1e3 else math.inf,  # a float power can overflow
            "var": a.bound**2,
            "std": a.bound,
        }[f]
        return E(code, tuple(out_shape), bound)

    def x_masksum(self, shape, depth):
        vs = [v for v in self.vars_of(kinds=("array", "item")) if v.shape != ()]
        if not vs:
            return None
        v = self.pick_var(vs)
        t = self.const(-0.5, 0.5)
        self.features.add("bool-mask-data")
        mask = self.cmp(v.name, self.pick([">", "<"]), repr(t))
        if self.chance(0.5):
            return E(f"np.sum({v.name}[{mask}])", (), v.bound * size(v.shape))
        return E(f"np.sum({v.name} * {mask})", (), v.bound * size(v.shape))

    # -- linear algebra
    def x_matmul(self, shape, depth):
        k = self.pick([2, 3, 4])
        nd = len(shape)
        if nd == 0:
            sa, sb = (k,), (k,)
        elif nd == 1:
            sa, sb = ((shape[0], k), (k,)) if self.chance(0.5) else ((k,), (k, shape[0]))
        elif nd == 2:
            sa, sb = (shape[0], k), (k, shape[1])
        elif nd == 3:
            b, m, n_ = shape
            sa, sb = self.pick(
                [((b, m, k), (k, n_)), ((b, m, k), (b, k, n_)), ((m, k), (b, k, n_))]
            )
            self.features.add("batched-matmul")
        else:
            return None
        a, b_ = self.squash(self.expr(sa, depth), 5), self.squash(self.expr(sb, depth), 5)
        style = self.pick(["@", "dot", "matmul"], [5, 2, 1])
        if style == "dot" and nd <= 2:
            self.features.add("dot")
            code = f"np.dot({a.code}, {b_.code})"
        elif style == "matmul":
            self.features.add("matmul-fn")
            code = f"np.matmul({a.code}, {b_.code})"
        else:
            self.features.add("matmul")
            code = f"({a.code} @ {b_.code})"
        return E(code, shape, a.bound * b_.bound * k)

    def x_einsum(self, shape, depth):
        k = self.pick([2, 3, 4])
        nd = len(shape)
        if nd == 0:
            sub, ops = self.pick(
                [("i,i->", [(k,), (k,)]), ("ij,ij->", [(k, 2), (k, 2)]), ("ii->", [(k, k)])]
            )
        elif nd == 1:
            (m,) = shape
            sub, ops = self.pick(
                [
                    ("ij,j->i", [(m, k), (k,)]),
                    ("ij,ij->i", [(m, k), (m, k)]),
                    ("ji->i", [(k, m)]),
                ]
            )
        elif nd == 2:
            m, n_ = shape
            sub, ops = self.pick(
                [
                    ("ij,jk->ik", [(m, k), (k, n_)]),
                    ("ij,kj->ik", [(m, k), (n_, k)]),
                    ("ji->ij", [(n_, m)]),
                    ("i,j->ij", [(m,), (n_,)]),
                ]
            )
        else:
            return None
        args = [self.squash(self.expr(s, depth), 5) for s in ops]
        self.features.add("einsum")
        b = 1.0
        for a in args:
            b *= a.bound
        return E(f"np.einsum({sub!r}, {', '.join(a.code for a in args)})", shape, b * k * k)

    # -- shapes
    def x_reshape(self, shape, depth):
        n = size(shape)
        cands = [s for s in _factorizations(n) if s != shape and len(s) >= 1]
        if not cands:
            return None
        src = self.pick(cands)
        a = self.expr(src, depth)
        style = self.r.randint(0, 3)
        self.features.add("reshape")
        if style == 0:
            code = f"{_paren(a.code)}.reshape({shape!r})"
        elif style == 1 and self.chance(0.3):
            code = f"np.reshape({a.code}, {shape!r}, order='F')"
            self.features.add("reshape-fortran")
        elif style == 1:
            code = f"np.reshape({a.code}, {shape!r})"
        elif style == 2 and len(shape) == 1:
            code = f"{_paren(a.code)}.reshape(-1)"
        elif style == 2:
            code = f"{_paren(a.code)}.reshape({', '.join(map(str, shape))})"
        else:
            s = list(shape)
            s[self.r.randrange(len(s))] = -1
            code = f"{_paren(a.code)}.reshape({tuple(s)!r})"
        return E(code, shape, a.bound, fresh=False)

    def x_transpose(self, shape, depth):
        nd = len(shape)
        if nd == 2:
            a = self.expr((shape[1], shape[0]), depth)
            self.features.add("transpose")
            code = self.pick(
                [f"{_paren(a.code)}.T", f"np.transpose({a.code})", f"np.swapaxes({a.code}, 0, 1)"]
            )
            return E(code, shape, a.bound, fresh=False)
        perm = list(range(nd))
        self.r.shuffle(perm)
        # out.shape[i] = src.shape[perm[i]]
        src = [0] * nd
        for i, p in enumerate(perm):
            src[p] = shape[i]
        a = self.expr(tuple(src), depth)
        self.features.add("transpose")
        return E(f"np.transpose({a.code}, {tuple(perm)!r})", shape, a.bound, fresh=False)

    def x_concat(self, shape, depth):
        axes = [i for i, d in enumerate(shape) if d >= 2]
        if not axes:
            return None
        ax = self.pick(axes)
        a_len = self.r.randint(1, shape[ax] - 1)
        sa = tuple(a_len if i == ax else d for i, d in enumerate(shape))
        sb = tuple(shape[ax] - a_len if i == ax else d for i, d in enumerate(shape))
        a, b = self.expr(sa, depth), self.expr(sb, depth)
        self.features.add("concatenate")
        axis = ax if self.chance(0.7) else ax - len(shape)
        kw = "" if ax == 0 and self.chance(0.4) else f", axis={axis}"
        return E(f"np.concatenate([{a.code}, {b.code}]{kw})", shape, max(a.bound, b.bound))

    def x_stack(self, shape, depth):
        ax = self.r.randrange(len(shape))
        n = shape[ax]
        sub = tuple(d for i, d in enumerate(shape) if i != ax)
        parts = [self.expr(sub, max(depth - 1, 0)) for _ in range(n)]
        if ax == 0 and self.chance(0.3):  # the same array, as np.array of a list literal
            self.features.add("array-literal")
            return E(
                f"np.array([{', '.join(p.code for p in parts)}])",
                shape,
                max(p.bound for p in parts),
            )
        self.features.add("stack")
        kw = "" if ax == 0 and self.chance(0.4) else f", axis={ax}"
        return E(
            f"np.stack([{', '.join(p.code for p in parts)}]{kw})",
            shape,
            max(p.bound for p in parts),
        )

    def x_expand(self, shape, depth):
        ones = [i for i, d in enumerate(shape) if d == 1]
        if not ones:
            return None
        ax = self.pick(ones)
        src = tuple(d for i, d in enumerate(shape) if i != ax)
        a = self.expr(src, depth)
        self.features.add("expand_dims")
        if ax == 0 and a.shape != () and self.chance(0.5):
            return E(f"{_paren(a.code)}[None]", shape, a.bound, fresh=False)
        if a.shape == ():
            return E(f"np.reshape({a.code}, {shape!r})", shape, a.bound, fresh=False)
        return E(f"np.expand_dims({a.code}, {ax})", shape, a.bound, fresh=False)

    def x_index(self, shape, depth):
        nd = len(shape)
        kinds = ["int", "slice", "intarray", "boolmask", "lastint", "midint"]
        w = [4, 4, 2, 1.5, 1, 1]
        kind = self.pick(kinds, w)
        if len(shape) >= 3 and kind in ("int", "lastint", "midint"):
            kind = "slice"
        if nd == 0 and kind in ("slice", "intarray", "boolmask"):
            kind = "int"
        if kind == "int":
            d = self.pick([2, 3, 4])
            src = (d,) + shape
            j = self.r.randrange(-d, d)
            idx = f"{j}"
        elif kind == "lastint":
            d = self.pick([2, 3, 4])
            src = shape + (d,)
            j = self.r.randrange(d)
            idx = f"..., {j}" if self.chance(0.5) or nd == 0 else ", ".join([":"] * nd + [str(j)])
        elif kind == "midint":
            if nd == 0:
                return None
            d = self.pick([2, 3, 4])
            src = shape[:1] + (d,) + shape[1:]
            j = self.r.randrange(d)
            idx = f":, {j}"
        elif kind == "slice":
            ax = self.r.randrange(nd)
            m = shape[ax]
            form = self.pick(["range", "step", "neg", "rev"])
            if form == "range":
                extra = self.r.randint(0, 2)
                d = m + extra
                a = self.r.randint(0, extra)
                sl = f"{a}:{a + m}" if a else f":{m}"
            elif form == "step":
                d = 2 * m - self.r.randint(0, 1)
                sl = "::2"
                if d < 1:
                    d = 1
            elif form == "neg":
                d = m + self.r.randint(1, 2)
                sl = f"-{m}:" if self.chance(0.5) else f"{d - m}:"
                if self.chance(0.5):
                    sl = f":-{d - m}"
            else:
                d = m
                sl = "::-1"
            src = tuple(d if i == ax else s for i, s in enumerate(shape))
            if form == "step":
                assert len(range(d)[::2]) == m
            idx = ", ".join([":"] * ax + [sl])
            self.features.add("slice")
        elif kind == "intarray":
            m = shape[0]
            d = self.pick([2, 3, 4])
            src = (d,) + shape[1:]
            ids = [self.r.randrange(d) for _ in range(m)]
            if len(set(ids)) < len(ids):
                self.features.add("intarray-repeats")
            idx = f"np.array({ids!r})" if self.chance(0.6) else repr(ids)
            if nd >= 2 and self.chance(0.3):
                # along axis 1 instead
                m1 = shape[1]
                d = self.pick([2, 3, 4])
                src = (shape[0], d) + shape[2:]
                ids = [self.r.randrange(d) for _ in range(m1)]
                idx = f":, np.array({ids!r})"
            self.features.add("intarray-index")
        else:  # constant boolean mask along axis 0
            m = shape[0]
            d = m + self.r.randint(0, 2)
            keep = sorted(self.r.sample(range(d), m))
            mask = [i in keep for i in range(d)]
            src = (d,) + shape[1:]
            idx = f"np.array({mask!r})"
            self.features.add("boolmask-const")
        if max(src, default=1) > self.MAX_DIM + 3:
            return None
        # the source: preferably a variable
        vs = self.vars_of(src, kinds=("array", "item"))
        if vs and self.chance(0.7):
            v = self.pick_var(vs)
            a = E(v.name, src, v.bound, fresh=False)
        else:
            a = self.expr(src, depth)
        if a.shape == () or (a.code.replace(".", "").replace("-", "").isdigit()):
            return None
        self.features.add("index")
        return E(f"{_paren(a.code)}[{idx}]", shape, a.bound, fresh=False)

    # -- calls
    def x_math(self, shape, depth):
        f = self.pick(["sin", "cos", "exp", "log", "sqrt", "tanh", "atan", "hypot", "pow"])
        self.features.add("math")
        if f in ("log", "sqrt"):
            p, lb, ub = self.pos((), depth)
            b = abs(math.log(lb)) + abs(math.log(ub)) if f == "log" else math.sqrt(ub)
            return E(f"math.{f}({p})", (), b)
        if f == "exp":
            a = self.squash(self.expr((), depth), 3.0)
            return E(f"math.exp({a.code})", (), math.exp(a.bound))
        if f == "hypot":
            a = self.squash(self.expr((), depth), 10)
            return E(f"math.hypot({a.code}, 1.0)", (), a.bound + 1)
        if f == "pow":
            p, lb, ub = self.pos((), depth)
            return E(f"math.pow({p}, 1.5)", (), ub**1.5)
        a = self.expr((), depth)
        return E(f"math.{f}({a.code})", (), 2.0)

    def x_helper(self, shape, depth):
        if self.in_helper and self.chance(0.7):
            return None
        # reuse a helper with this return shape, or write a new one
        reuse = [h for h in self.helper_sigs if h[3] == shape]
        if reuse and self.chance(0.5):
            name, pshapes, ndef, _ = self.pick(reuse)
        else:
            if self.n_helpers >= 3:
                return None
            n = self.pick([1, 2, 3], [4, 4, 1])
            pshapes = [shape if self.chance(0.6) else self.target_shape() for _ in range(n)]
            name, ndef = self.write_helper(pshapes, shape)
        args = [self.squash(self.expr(s, depth), 10) for s in pshapes]
        codes = [a.code for a in args]
        if ndef and self.chance(0.5):
            codes.append(repr(self.const(0.2, 1.5)))
        self.features.add("helper")
        return E(f"{name}({', '.join(codes)})", shape, 30.0, fresh=shape != ())

    def write_helper(self, pshapes, ret_shape):
        name = f"helper{self.n_helpers}"
        self.n_helpers += 1
        params = [f"p{i}" for i in range(len(pshapes))]
        ndef = 1 if self.chance(0.3) else 0
        saved = (self.env, self.lines, self.ind, self.in_helper, self.loop_depth, self.block_depth)
        saved_wp = self.write_phase
        self.env = [Var(p, s, 10.0, "array") for p, s in zip(params, pshapes)]
        if ndef:
            self.env.append(Var("scale", (), 1.5, "float"))
        self.lines, self.ind, self.in_helper = [], 1, True
        self.loop_depth, self.block_depth, self.write_phase = 0, 1, set()
        sig = ", ".join(params + (["scale=0.5"] if ndef else []))
        header = f"def {name}({sig}):"
        for _ in range(self.r.randint(0, 3)):
            self.statement(allow_return=False)
        if self.chance(0.15):
            # an early return inside an `if`
            c = self.squash(self.expr((), 1), 5)
            self.emit(f"if {self.cond(c.code, '>', repr(self.const(-1, 1)))}:")
            self.ind += 1
            self.emit(f"return {self.squash(self.expr(ret_shape, 2), 10).code}")
            self.ind -= 1
            self.features.add("helper-early-return")
        ret = self.squash(self.expr(ret_shape, 2), 10)
        self.emit(f"return {ret.code}")
        body = self.lines
        self.env, self.lines, self.ind, self.in_helper, self.loop_depth, self.block_depth = saved
        self.write_phase = saved_wp
        self.helpers.append("\n".join([header] + body))
        self.helper_sigs.append((name, pshapes, ndef, ret_shape))
        return name, ndef

    # ------------------------------------------------------------------ statements
    def define(self, name, e: E, kind="array"):
        self.env = [v for v in self.env if v.name != name]
        kind = "float" if (e.shape == () and kind == "array") else kind
        self.env.append(Var(name, e.shape, e.bound, kind))

    def rhs(self, shape, depth) -> E:
        e = self.squash(self.expr(shape, depth))
        if not e.fresh and (self.write_phase or e.shape == ()):
            e = E(f"({e.code} * 1.0)", e.shape, e.bound)  # never name a view of a written array
        return e

    def statement(self, allow_return=False):
        if self.extra_statement():
            return
        opts = [
            ("assign", 8),
            ("rebind", 3),
            ("aug", 1.5),
            ("tuple_assign", 0.7),
        ]
        if self.block_depth < 2:
            opts += [("if", 2.5), ("for", 2.5), ("while", 1.0), ("write", 2.0)]
        if not self.in_helper and self.block_depth == 0:
            opts += [("lambda", 0.5)]
        if allow_return:
            opts += [("early_return", 0.6)]
        kind = self.pick([o[0] for o in opts], [o[1] for o in opts])
        getattr(self, "s_" + kind)()

    def extra(self, name) -> bool:
        """Whether to write gated construct `name` here: drawn from the extras' own stream, so
        that disabling them leaves the main stream (and so every program) as it was."""
        return self.rx.random() < P_EXTRA[name] and name in self.extras

    def loop_branch_plan(self, carry, idx, lo, hi):
        """Whether this loop gets a branch assigning a name read after it (loop-branch), and how;
        drawn from a stream of its own, so that without it every program stays as it was. What
        must exist before the loop (the name's first value, an array the loop writes row by row)
        is emitted here."""
        if "loop-branch" not in self.extras or not carry:
            return None
        if not self.force_branch and self.rb.random() >= P_LOOP_BRANCH:
            return None
        v = carry[0]
        shape = self.pick([v.shape, (), self.target_shape()], [3, 2, 1])
        plan = {
            "v": v,
            "shape": shape,
            "name": self.fresh("y"),
            "idx": idx if idx is not None and lo == 0 else None,
            # all: every arm assigns a new name; body: a def earlier in the body and some arms;
            # carried: a def before the loop and some arms (the arm reads the previous value)
            "form": self.pick(["all", "body", "carried"], [3, 2, 2]),
            "arms": self.pick([2, 3, 1], [4, 3, 1]),
            "nested": self.chance(0.25),
            "next": self.chance(0.35),  # the next iteration's if reads it (needs a def before)
            "write": None,
            "break": self.chance(0.2),
        }
        if plan["form"] == "all" and plan["arms"] == 1:
            plan["arms"] = 2
        if plan["next"] and plan["form"] != "carried":
            plan["form"] = "carried"
        if plan["form"] == "carried":
            e = self.squash(self.rhs(shape, 1), 2.0)
            self.emit(f"{plan['name']} = {e.code}")
        if plan["idx"] is not None and self.chance(0.4) and len(shape) < 3:
            buf = self.fresh("w")
            self.emit(f"{buf} = np.zeros({(hi,) + shape!r})")
            plan["write"] = buf
        self.features.add("loop-branch")
        return plan

    def branch_cond(self, idx):
        """A condition for a loop-branch arm: on data (probed) or on the loop index."""
        if idx is not None and self.chance(0.35):
            self.features.add("loop-branch-index-cond")
            return self.pick([f"{idx} % 2 == 0", f"{idx} > 0", f"{idx} < 2", f"{idx} == 1"])
        c = self.squash(self.expr((), 1), 5)
        return self.cond(c.code, self.pick([">", "<"]), repr(self.const(-1, 1)))

    def loop_branch_arm(self, plan, b, n_arms):
        """One arm's statements: maybe a statement, maybe a nested if, then the name."""
        name, shape = plan["name"], plan["shape"]
        if self.chance(0.3):
            self.body(1, 1)
        assign = plan["form"] == "all" or b == 0 or self.chance(0.6)
        if plan["nested"] and b == 0 and assign:
            self.features.add("loop-branch-nested")
            self.emit(f"if {self.branch_cond(plan['idx'])}:")
            for k in range(2):
                if k:
                    self.emit("else:")
                self.ind += 1
                e = self.squash(self.rhs(shape, self.r.randint(1, 2)), 5)
                self.emit(f"{name} = {e.code}")
                self.ind -= 1
            return
        if not assign:
            if b == n_arms - 1 or self.chance(0.5):
                self.emit(f"{name} = {name} * {self.const(0.3, 0.9)}")
            else:
                if self.chance(0.5):
                    self.body(1, 1)
                else:
                    self.emit("pass")
            return
        e = self.squash(self.rhs(shape, self.r.randint(1, 2)), 5)
        if plan["form"] == "carried" and self.chance(0.5):
            self.emit(f"{name} = {self.const(0.2, 0.6)} * {name} + {e.code}")
        else:
            self.emit(f"{name} = {e.code}")

    def loop_branch(self, plan):
        """The if/elif/else of `plan` in the loop body, and the reads of its name after it."""
        name, shape, v = plan["name"], plan["shape"], plan["v"]
        if plan["form"] == "body":
            e = self.squash(self.rhs(shape, 1), 5)
            self.emit(f"{name} = {e.code}")
        if plan["form"] != "all":
            self.env.append(Var(name, shape, 5.0, "float" if shape == () else "array"))
        before = list(self.env)
        n_arms = plan["arms"]
        brk = plan["break"] and n_arms == 2
        for b in range(n_arms):
            self.env = list(before)
            if b == 0 and brk:
                probe = v.name if v.shape == () else f"np.sum({v.name})"
                self.emit(f"if {self.cond(probe, '>', repr(self.const(-1, 2)))}:")
            elif b == 0:
                self.emit(f"if {self.branch_cond(plan['idx'])}:")
            elif b == n_arms - 1:
                self.emit("else:")
            else:
                self.emit(f"elif {self.branch_cond(plan['idx'])}:")
            self.ind += 1
            self.loop_branch_arm(plan, b, n_arms)
            if brk and b == 0:
                # `if c: ...; break` with an else: the arm's assignments come before the break
                self.emit("break")
                self.features.add("loop-branch-break")
            self.ind -= 1
        self.env = before
        self.features.add("loop-branch-elif" if n_arms == 3 else "loop-branch-if")
        self.env = [w for w in self.env if w.name != name]
        self.env.append(Var(name, shape, 5.0, "float" if shape == () else "array"))
        # read after the if: by the carry (the next iteration reads it through that too)
        self.emit(f"{v.name} = {self.const(0.2, 0.7)} * {v.name} + {self.branch_read(plan)}")
        v.bound += 4.0
        if plan["write"]:
            self.emit(f"{plan['write']}[{plan['idx']}] = {name}")
            self.features.add("loop-branch-write")

    def branch_read(self, plan):
        """A term of the carry's shape reading the branch's name (|y| <= 5 keeps it below 1.1),
        mostly one whose derivative needs the value of the name (tanh's reuses its output)."""
        y = plan["name"]
        read = self.pick(
            [f"np.tanh({y})", f"0.04 * {y} * {y}", f"0.2 * {y} * np.cos({y})"], [1, 2, 1]
        )
        if _broadcasts_to(plan["shape"], plan["v"].shape):
            return read
        return f"np.mean({read})"

    def loop_branch_next(self, plan):
        """At the top of the body: an if whose arm reads the name the previous iteration's if
        assigned (before this iteration assigns it again)."""
        v = plan["v"]
        self.emit(f"if {self.branch_cond(plan['idx'])}:")
        self.emit(f"    {v.name} = {self.const(0.2, 0.7)} * {v.name} + {self.branch_read(plan)}")
        self.features.add("loop-branch-next")

    def extra_statement(self) -> bool:
        if self.extra("alias"):
            self.s_alias()
            return True
        if self.extra("closure") and not self.in_helper and self.block_depth == 0:
            self.s_closure()
            return True
        return False

    def owned_array(self, shape, prefix="y"):
        """`y = <expr>.copy()` (or `* 1.0`): an array no other name or argument shares yet."""
        e = self.squash(self.expr(shape, 2), 5)
        y = self.fresh(prefix)
        if self.chance(0.5):
            self.emit(f"{y} = {_paren(e.code)}.copy()")
        else:
            self.emit(f"{y} = {_paren(e.code)} * 1.0")
        return y, e.bound

    def inplace(self, target: str, shape, bound) -> float:
        """`target op= e` (or `target[...] = e`) on an array: the new bound."""
        how = self.pick(["add", "mul", "item", "slice"], [3, 3, 2, 1])
        if how == "item" or (how == "slice" and shape[0] < 2):
            j = self.r.randrange(-shape[0], shape[0])
            e = self.squash(self.expr(shape[1:], 2), 5)
            op = self.pick(["=", "+="])
            self.emit(f"{target}[{j}] {op} {e.code}")
            return bound + e.bound
        if how == "slice":
            self.emit(
                f"{target}[1:] = {self.squash(self.expr((shape[0] - 1,) + shape[1:], 2), 5).code}"
            )
            return max(bound, 5.0)
        s = shape if self.chance(0.6) else self.split_broadcast(shape)[0]
        if how == "add":
            e = self.squash(self.expr(s, 2), 5)
            self.emit(f"{target} += {e.code}")
            return bound + e.bound
        e = self.squash(self.expr(s, 2), 1.5)
        self.emit(f"{target} *= {e.code}")
        return bound * max(e.bound, 1.0)

    def s_alias(self):
        """An array written in place through a second name or through a view, then every name
        read: NumPy shares the memory, so each of them sees the write (issue #13, class 5)."""
        shapes = [v.shape for v in self.env if v.kind in ("array", "item") and v.shape != ()]
        shape = self.pick(shapes) if shapes and self.chance(0.7) else self.rand_shape(1, 3)
        y, b = self.owned_array(shape)
        nd = len(shape)
        views = ["alias", "reshape"]
        if shape[0] >= 2:
            views.append("slice")
        if nd >= 2:
            views += ["row", "T"]
        view = self.pick(views)
        v = self.fresh("z" if view == "alias" else "view")
        if view == "alias":
            self.emit(f"{v} = {y}")
            vshape = shape
        elif view == "reshape":
            vshape = self.pick(_factorizations(size(shape)))
            self.emit(f"{v} = {y}.reshape({vshape!r})")
        elif view == "slice":
            vshape = (shape[0] - 1,) + shape[1:]
            self.emit(f"{v} = {y}[1:]")
        elif view == "row":
            j = self.r.randrange(shape[0])
            vshape = shape[1:]
            self.emit(f"{v} = {y}[{j}]")
        else:
            vshape = shape[::-1]
            self.emit(f"{v} = {y}.T")
        self.features.add("alias-inplace" if view == "alias" else "view-inplace")
        self.env.append(Var(y, shape, b, "array"))
        self.env.append(Var(v, vshape, b, "array"))
        # the write: through the view (or second name), or through the first name
        if view == "alias" or self.chance(0.5):
            b = self.inplace(v, vshape, b)
        else:
            b = self.inplace(y, shape, b)
        for var in self.env[-2:]:
            var.bound = b
        if self.chance(0.3):
            # a second write, through the other name
            b = self.inplace(y, shape, b) if self.chance(0.5) else self.inplace(v, vshape, b)
            for var in self.env[-2:]:
                var.bound = b
        u = self.fresh()
        self.emit(f"{u} = np.mean({y} * {y}) + np.mean(np.sin({v}))")
        self.define(u, E(u, (), b * b + 1))
        if b > 30:
            self.emit(f"{u} = np.tanh({u})")
            self.env[-1].bound = 1.0

    def s_closure(self):
        """A nested def reading a variable of the enclosing function that is rebound before the
        call (it sees the new value), or a default `k=k` with `k` rebound after the def (it keeps
        the value at the def): issue #13, class 6."""
        kind = self.pick(["closure", "default"])
        qshape = self.target_shape()
        kshape = qshape if qshape and self.chance(0.4) else ()
        k = self.fresh("k")
        e1 = self.squash(self.rhs(kshape, 2), 3)
        self.emit(f"{k} = {e1.code}")
        self.define(k, e1)
        h = self.fresh("h")
        unary = self.pick(["np.sin", "np.tanh", "np.cos"])
        if kind == "closure":
            self.emit(f"def {h}(q):")
        else:
            self.emit(f"def {h}(q, {k}={k}):")
        self.emit(f"    return {unary}(q) * {k} + 0.5 * q ** 2")
        self.features.add(f"closure-{kind}")
        calls = []
        if self.chance(0.5):
            calls.append(self.squash(self.expr(qshape, 2), 3))  # before the rebinding too
        e2 = self.squash(self.expr(kshape, 2), 3)
        form = self.pick(["plain", "mix"])
        code = e2.code if form == "plain" else f"0.5 * {k} + {e2.code}"
        self.emit(f"{k} = {code}")
        self.define(k, E(k, kshape, 3.0 if form == "plain" else 4.5))
        calls.append(self.squash(self.expr(qshape, 2), 3))
        outs = []
        for i, arg in enumerate(calls):
            out = self.fresh()
            if kind == "default" and i == len(calls) - 1 and self.chance(0.3):
                self.emit(f"{out} = {h}({arg.code}, {k})")  # the default overridden
            else:
                self.emit(f"{out} = {h}({arg.code})")
            outs.append(out)
        for out in outs:
            self.define(out, E(out, qshape, 4.5 * 1 + 4.5 + 5))

    def s_assign(self):
        shape = self.target_shape()
        e = self.rhs(shape, self.r.randint(1, 3))
        name = self.fresh()
        self.emit(f"{name} = {e.code}")
        self.define(name, e)

    def s_rebind(self):
        vs = [
            v for v in self.env if v.kind in ("array", "float") and v.name not in self.write_phase
        ]
        if not vs:
            return self.s_assign()
        v = self.pick_var(vs)
        e = self.rhs(v.shape, self.r.randint(1, 2))
        form = self.pick(["mix", "tanh", "plain"])
        if form == "mix":
            code, b = f"{v.name} * {self.const(-0.9, 0.9)} + {e.code}", v.bound + e.bound
        elif form == "tanh":
            code, b = f"np.tanh({v.name}) + {e.code}", 1 + e.bound
        else:
            code, b = e.code, e.bound
        self.emit(f"{v.name} = {code}")
        self.features.add("rebind")
        self.define(v.name, E(v.name, v.shape, b), v.kind)
        if b > 30:
            self.emit(f"{v.name} = np.tanh({v.name})")
            self.env[-1].bound = 1.0

    def s_aug(self):
        # augmented assignment on scalar carries (Python floats / NumPy scalars only, so no aliasing)
        vs = [v for v in self.env if v.kind == "float" and v.name not in self.param_names]
        if not vs:
            return self.s_assign()
        v = self.pick_var(vs)
        op = self.pick(["+=", "-=", "*=", "/="])
        if op == "/=":
            p, lb, ub = self.pos((), 1)
            self.emit(f"{v.name} /= {p}")
            b = v.bound / lb
        elif op == "*=":
            e = self.squash(self.expr((), 1), 1.5)
            self.emit(f"{v.name} *= {e.code}")
            b = v.bound * e.bound
        else:
            e = self.expr((), self.r.randint(1, 2))
            self.emit(f"{v.name} {op} {e.code}")
            b = v.bound + e.bound
        self.features.add("augassign")
        v.bound = b
        if b > 30:
            self.emit(f"{v.name} = np.tanh({v.name})")
            v.bound = 1.0

    def s_tuple_assign(self):
        scal = [v for v in self.env if v.kind == "float" and v.name not in self.param_names]
        if len(scal) >= 2 and self.chance(0.5):
            a, b = self.r.sample(scal, 2)
            self.emit(f"{a.name}, {b.name} = {b.name}, np.tanh({a.name} * {b.name})")
            a.bound, b.bound = b.bound, 1.0
            self.features.add("tuple-swap")
            return
        s1, s2 = self.target_shape(), self.target_shape()
        e1, e2 = self.rhs(s1, 2), self.rhs(s2, 2)
        n1, n2 = self.fresh(), self.fresh()
        self.emit(f"{n1}, {n2} = {e1.code}, {e2.code}")
        self.define(n1, e1)
        self.define(n2, e2)
        self.features.add("tuple-assign")

    def s_lambda(self):
        name = self.fresh("g")
        c = self.const(nonzero=True)
        body_kind = self.pick(["lambda", "def"])
        unary = self.pick(["np.sin", "np.tanh", "np.cos"])
        if body_kind == "lambda":
            self.emit(f"{name} = lambda q: {unary}(q) * {c}")
        else:
            self.emit(f"def {name}(q, p={c}):")
            self.emit(f"    return p * {unary}(q) + q ** 2")
        self.features.add("local-" + body_kind)
        shape = self.target_shape()
        e = self.rhs(shape, 2)
        e = self.squash(e, 5)
        out = self.fresh()
        self.emit(f"{out} = {name}({e.code})")
        self.define(out, E(out, shape, abs(c) + 25))

    def body(self, n_lo=1, n_hi=3):
        self.block_depth += 1
        for _ in range(self.r.randint(n_lo, n_hi)):
            self.statement()
        self.block_depth -= 1

    def s_if(self):
        c = self.squash(self.expr((), self.r.randint(1, 2)), 10)
        t = self.const(-1.0, 1.0)
        n_branch = self.pick([2, 3, 1], [4, 2, 1])  # if/else, if/elif/else, if alone
        # the variables every branch assigns: one new one (needs an else) or an existing one
        existing = [
            v for v in self.env if v.kind in ("array", "float") and v.name not in self.write_phase
        ]
        if n_branch == 1 or (existing and self.chance(0.5)):
            if not existing:
                n_branch = 2
                target = None
            else:
                target = self.pick_var(existing)
        else:
            target = None
        shape = target.shape if target else self.target_shape()
        name = target.name if target else self.fresh()
        before = list(self.env)
        bounds = []
        self.features.add("if" if n_branch < 3 else "elif")
        for b in range(n_branch):
            self.env = list(before)
            if b == 0:
                self.emit(f"if {self.cond(c.code, self.pick(['>', '<']), repr(t))}:")
            elif b == n_branch - 1:
                self.emit("else:")
            else:
                c2 = self.squash(self.expr((), 1), 10)
                self.emit(f"elif {self.cond(c2.code, '>', repr(self.const(-1, 1)))}:")
            self.ind += 1
            self.env = list(before)
            if self.chance(0.4):
                self.body(1, 2)
            e = self.rhs(shape, self.r.randint(1, 2))
            self.emit(f"{name} = {e.code}")
            bounds.append(e.bound)
            self.ind -= 1
        self.env = before
        if target is not None:
            bounds.append(target.bound)
        self.define(name, E(name, shape, max(bounds)), "array")

    def loop_items(self, index, lo, hi):
        """Pseudo-variables readable inside `for index in range(lo, hi)`."""
        items = []
        for v in self.env:
            if v.kind not in ("array",) or v.shape == () or v.name in self.write_phase:
                continue
            if v.shape[0] >= hi:
                items.append(Var(f"{v.name}[{index}]", v.shape[1:], v.bound, "item"))
                if lo >= 1:
                    items.append(Var(f"{v.name}[{index} - 1]", v.shape[1:], v.bound, "item"))
            if len(v.shape) >= 2 and v.shape[1] >= hi and self.chance(0.5):
                items.append(
                    Var(f"{v.name}[:, {index}]", (v.shape[0],) + v.shape[2:], v.bound, "item")
                )
        return items

    def carried(self):
        """One or two carried variables: existing ones, or new ones initialised before the loop."""
        carry = []
        existing = [
            v for v in self.env if v.kind in ("array", "float") and v.name not in self.write_phase
        ]
        for _ in range(self.pick([1, 2], [3, 1])):
            if existing and self.chance(0.35):
                v = self.pick_var(existing)
                if v not in carry:
                    carry.append(v)
                continue
            shape = self.target_shape() if self.chance(0.5) else ()
            name = self.fresh("s")
            init = self.pick(["zero", "one", "expr"])
            if init == "zero" and shape == ():
                self.emit(f"{name} = 0.0")
                b = 0.0
            elif init == "one" and shape == ():
                self.emit(f"{name} = 1.0")
                b = 1.0
            elif init == "zero":
                self.emit(f"{name} = np.zeros({shape!r})")
                b = 0.0
            else:
                e = self.rhs(shape, 2)
                self.emit(f"{name} = {e.code}")
                b = e.bound
            v = Var(name, shape, b, "float" if shape == () else "array")
            self.env.append(v)
            carry.append(v)
        return carry

    def carry_update(self, v: Var, trips: int):
        """`v = <update>` keeping |v| bounded over `trips` iterations."""
        e = self.rhs(v.shape, self.r.randint(1, 2))
        e = self.squash(e, 5.0)
        form = self.pick(["acc", "decay", "tanh", "mul", "general"])
        if form == "acc":
            code, b = f"{v.name} + {e.code}", v.bound + trips * e.bound
        elif form == "decay":
            a = self.const(-0.9, 0.9)
            code, b = f"{a} * {v.name} + {e.code}", v.bound + trips * e.bound
        elif form == "tanh":
            code, b = f"np.tanh({v.name}) * {e.code}", e.bound
        elif form == "mul":
            f = self.pick(["np.cos", "np.tanh", "np.sin"])
            code, b = f"{v.name} * {f}({e.code})", v.bound
        else:
            # an arbitrary expression of the carry and the items, squashed to stay bounded
            inner = self.squash(self.expr(v.shape, 2), 5)
            code, b = f"np.tanh({inner.code}) + 0.5 * {v.name}", 2 + v.bound
        if self.chance(0.2) and form in ("acc",):
            self.emit(f"{v.name} += {e.code}" if v.kind == "float" else f"{v.name} = {code}")
        else:
            self.emit(f"{v.name} = {code}")
        return b

    def s_for(self):
        # the iteration
        arrays = [
            v
            for v in self.env
            if v.kind == "array" and v.shape != () and v.name not in self.write_phase
        ]
        kind = self.pick(
            ["range", "range_shape", "range1", "rev", "rows", "enum", "zip", "n"],
            [3, 2, 1, 1, 1.5, 1, 0.7, 1],
        )
        if kind in ("rows", "enum", "zip", "range_shape", "range1", "rev") and not arrays:
            kind = "range"
        if kind == "n" and ("n" not in self.param_names or self.in_helper):
            kind = "range"
        idx = self.fresh("i")
        extra_items = []
        if kind == "range":
            hi = self.pick([2, 3, 4])
            lo = 0
            head = f"for {idx} in range({hi}):"
        elif kind == "n":
            hi, lo = self.int_values["n"], 0
            head = f"for {idx} in range(n):"
            self.features.add("int-param")
        elif kind in ("range_shape", "range1", "rev"):
            v = self.pick_var(arrays)
            hi = v.shape[0]
            lo = 1 if kind == "range1" else 0
            if kind == "rev":
                head = f"for {idx} in range({v.name}.shape[0] - 1, -1, -1):"
                self.features.add("range-step")
            else:
                head = f"for {idx} in range({'1, ' if lo else ''}{v.name}.shape[0]):"
        else:
            v = self.pick_var(arrays)
            hi, lo = v.shape[0], 0
            row = self.fresh("row")
            if kind == "rows":
                head = f"for {row} in {v.name}:"
                extra_items.append(Var(row, v.shape[1:], v.bound, "item"))
                idx = None
            elif kind == "enum":
                head = f"for {idx}, {row} in enumerate({v.name}):"
                extra_items.append(Var(row, v.shape[1:], v.bound, "item"))
            else:
                others = [w for w in arrays if w.shape[0] == v.shape[0]]
                w = self.pick_var(others)
                row2 = self.fresh("row")
                head = f"for {row}, {row2} in zip({v.name}, {w.name}):"
                extra_items.append(Var(row, v.shape[1:], v.bound, "item"))
                extra_items.append(Var(row2, w.shape[1:], w.bound, "item"))
                idx = None
            self.features.add(f"for-{kind}")
        self.features.add("for")
        trips = max(hi - lo, 1)
        carry = self.carried()
        plan = self.loop_branch_plan(carry, idx, lo, hi)
        self.emit(head)
        self.ind += 1
        before = list(self.env)
        items = self.loop_items(idx, lo, hi) if idx else []
        if idx is not None and self.chance(0.3):
            items.append(Var(idx, (), hi, "int"))
        self.env = self.env + items + extra_items
        self.loop_depth += 1
        self.block_depth += 1
        # optional continue / break at the top of the body (as `if c: continue`)
        jump = self.pick([None, "continue", "break"], [5, 1, 1])
        if jump == "continue":
            c = self.squash(self.expr((), 1), 5)
            self.emit(f"if {self.cond(c.code, self.pick(['>', '<']), repr(self.const(-1, 1)))}:")
            self.emit("    continue")
            self.features.add("continue")
        if plan and plan["next"]:
            self.loop_branch_next(plan)
        if plan and jump == "break":
            plan["break"] = False  # one break a loop
        for v in carry:
            if self.chance(0.3):
                self.body(1, 1)
            if self.chance(0.25):
                # a branch inside the loop updating the carry
                c = self.squash(self.expr((), 1), 5)
                self.emit(
                    f"if {self.cond(c.code, self.pick(['>', '<']), repr(self.const(-1, 1)))}:"
                )
                self.ind += 1
                b1 = self.carry_update(v, trips)
                self.ind -= 1
                self.emit("else:")
                self.ind += 1
                b2 = self.carry_update(v, trips)
                self.ind -= 1
                b = max(b1, b2)
                self.features.add("if-in-loop")
            else:
                b = self.carry_update(v, trips)
            v.bound = max(v.bound, b)
        if plan:
            self.loop_branch(plan)
        if jump == "break":
            s = carry[0]
            probe = s.name if s.shape == () else f"np.sum({s.name})"
            self.emit(f"if {self.cond(probe, self.pick(['>', '<']), repr(self.const(-1, 2)))}:")
            self.emit("    break")
            self.features.add("break")
        self.block_depth -= 1
        self.loop_depth -= 1
        self.ind -= 1
        self.env = before
        if plan and plan["write"]:
            w = plan["write"]
            self.env.append(Var(w, (hi,) + plan["shape"], 5.0, "array"))
        for v in carry:
            if v.bound > 30:
                self.emit(f"{v.name} = np.tanh({v.name})")
                v.bound = 1.0

    def s_while(self):
        t = self.fresh("t")
        k = self.fresh("k")
        start = self.pick(["0.0", "expr"])
        if start == "expr":
            e = self.squash(self.rhs((), 1), 1.0)
            self.emit(f"{t} = {e.code}")
        else:
            self.emit(f"{t} = 0.0")
        use_k = self.chance(0.6)
        if use_k:
            self.emit(f"{k} = 0")
        limit = self.pick([0.5, 1.0, 2.0, 3.0])
        carry = self.carried() if self.chance(0.5) else []
        plan = self.loop_branch_plan(carry, None, 0, 0)
        self.emit(f"while {self.cond(t, '<', repr(limit))}:")
        self.ind += 1
        self.loop_depth += 1
        self.block_depth += 1
        p, lb, ub = self.pos((), 1)
        # always a floor: the bound of p assumes carried values stay within the bounds of the
        # trips below, and a value the loop itself shrinks (exp(-s), s doubling) would not end
        self.emit(f"{t} = {t} + {p} + 0.3")
        self.features.add("while")
        trips = int((limit + 1.0) / 0.3) + 1
        if plan and plan["next"]:
            self.loop_branch_next(plan)
        for v in carry:
            v.bound = max(v.bound, self.carry_update(v, trips))
        if plan:
            self.loop_branch(plan)
        if use_k:
            self.emit(f"{k} += 1")
        self.block_depth -= 1
        self.loop_depth -= 1
        self.ind -= 1
        if plan and plan["form"] != "carried":  # the loop may not run: no value after it
            self.env = [w for w in self.env if w.name != plan["name"]]
        self.env.append(Var(t, (), limit + ub + 1, "float"))
        if use_k:
            self.env.append(Var(k, (), trips, "int"))
        for v in carry:
            if v.bound > 30:
                self.emit(f"{v.name} = np.tanh({v.name})")
                v.bound = 1.0

    def s_write(self):
        """A fresh array, written in place, then used as a value."""
        shapes = [v.shape for v in self.env if v.kind == "array" and v.shape != ()]
        shape = self.pick(shapes) if shapes and self.chance(0.7) else self.rand_shape(1, 3)
        like = [
            v
            for v in self.env
            if v.kind == "array" and v.shape == shape and v.name not in self.write_phase
        ]
        y = self.fresh("y")
        init = self.pick(["zeros_like", "copy", "zeros", "ones", "ones_like", "copy_expr"])
        if init in ("zeros_like", "copy", "ones_like") and not like:
            init = "zeros"
        if init == "zeros_like":
            self.emit(f"{y} = np.zeros_like({self.pick_var(like).name})")
            b = 0.0
        elif init == "ones_like":
            self.emit(f"{y} = np.ones_like({self.pick_var(like).name})")
            b = 1.0
        elif init == "copy":
            v = self.pick_var(like)
            self.emit(f"{y} = {v.name}.copy()")
            b = v.bound
        elif init == "copy_expr":
            e = self.squash(self.expr(shape, 2), 10)
            self.emit(f"{y} = {_paren(e.code)}.copy()" if shape != () else f"{y} = {e.code}")
            b = e.bound
        else:
            self.emit(f"{y} = np.{init}({shape!r})")
            b = 1.0
        self.features.add(f"write-init-{init}")
        yv = Var(y, shape, b, "array")
        self.write_phase.add(y)
        self.env.append(yv)
        for _ in range(self.r.randint(1, 3)):
            yv.bound = max(yv.bound, self.one_write(yv))
        if self.chance(0.2):
            # a snapshot read between writes
            snap = self.fresh()
            f = self.pick(["np.sum", "np.mean"])
            self.emit(f"{snap} = {f}({y} ** 2)")
            self.env.append(Var(snap, (), yv.bound**2 * size(shape), "float"))
            yv.bound = max(yv.bound, self.one_write(yv))
            self.features.add("read-between-writes")
        self.write_phase.discard(y)
        if yv.bound > 30:
            self.emit(f"{y} = np.tanh({y})")
            yv.bound = 1.0

    def one_write(self, yv: Var) -> float:
        y, shape = yv.name, yv.shape
        if self.extra("repeat-index"):
            return self.write_repeated(yv)
        nd = len(shape)
        kind = self.pick(
            [
                "int",
                "int_aug",
                "slice",
                "col",
                "fancy",
                "mask",
                "whole",
                "loop_rec",
                "loop_fill",
                "multi",
                "slice_aug_self",
                "scatter_add",
            ],
            [3, 2, 2, 1, 1, 0.7, 1, 2, 2, 1, 0.7, 0.8],
        )
        if kind == "col" and nd < 2:
            kind = "slice"
        if kind == "multi" and nd < 2:
            kind = "int"
        if kind in ("loop_rec",) and shape[0] < 2:
            kind = "int"
        op = "="
        if kind in ("int", "int_aug"):
            j = self.r.randrange(-shape[0], shape[0])
            e = self.squash(self.expr(shape[1:], 2), 10)
            op = "=" if kind == "int" else self.pick(["+=", "-=", "*="])
            if kind == "int" and self.chance(0.3):
                code = f"np.sin({y}[{j}]) + {e.code}"
            else:
                code = e.code
            self.emit(f"{y}[{j}] {op} {code}")
            self.features.add(f"write-{kind}")
            return e.bound + yv.bound * (e.bound if op == "*=" else 1) + 1
        if kind == "scatter_add":
            k = self.r.randint(1, 4)
            idx = [self.r.randrange(-shape[0], shape[0]) for _ in range(k)]
            rows = (k,) + shape[1:] if self.chance(0.7) else shape[1:]  # or broadcast
            e = self.squash(self.expr(rows, 2), 10)
            self.emit(f"np.add.at({y}, {idx!r}, {e.code})")
            self.features.add("write-scatter-add")
            return yv.bound + k * e.bound
        if kind == "multi":
            j = [self.r.randrange(d) for d in shape[:2]]
            e = self.squash(self.expr(shape[2:], 2), 10)
            self.emit(f"{y}[{j[0]}, {j[1]}] {self.pick(['=', '+='])} {e.code}")
            self.features.add("write-multi")
            return e.bound + yv.bound
        if kind in ("slice", "slice_aug_self"):
            ax = self.r.randrange(nd) if nd > 0 else 0
            d = shape[ax]
            a = self.r.randint(0, d - 1)
            bnd = self.r.randint(a + 1, d)
            sl = f"{a}:{bnd}" if a else f":{bnd}"
            slot = tuple(bnd - a if i == ax else s for i, s in enumerate(shape))
            idx = ", ".join([":"] * ax + [sl])
            if kind == "slice_aug_self" and d >= 2:
                # overlapping read and write: y[1:] += c * y[:-1]
                src = ", ".join([":"] * ax + [":-1"])
                dst = ", ".join([":"] * ax + ["1:"])
                c = self.const(-0.9, 0.9)
                self.emit(f"{y}[{dst}] += {c} * {y}[{src}]")
                self.features.add("write-overlap-self")
                return yv.bound * 2
            s_rhs = slot if self.chance(0.6) else self.split_broadcast(slot)[0]
            e = self.squash(self.expr(s_rhs, 2), 10)
            op = self.pick(["=", "+="], [2, 1])
            self.emit(f"{y}[{idx}] {op} {e.code}")
            self.features.add("write-slice")
            return e.bound + yv.bound
        if kind == "col":
            j = self.r.randrange(shape[1])
            e = self.squash(self.expr((shape[0],) + shape[2:], 2), 10)
            self.emit(f"{y}[:, {j}] = {e.code}")
            self.features.add("write-col")
            return e.bound
        if kind == "fancy":
            m = self.r.randint(1, shape[0])
            ids = self.r.sample(range(shape[0]), m)
            e = self.squash(self.expr((m,) + shape[1:], 2), 10)
            op = self.pick(["=", "+="])
            self.emit(f"{y}[np.array({ids!r})] {op} {e.code}")
            self.features.add("write-fancy")
            return e.bound + yv.bound
        if kind == "mask":
            m = self.r.randint(1, shape[0])
            keep = set(self.r.sample(range(shape[0]), m))
            mask = [i in keep for i in range(shape[0])]
            e = self.squash(self.expr((m,) + shape[1:], 2), 10)
            self.emit(f"{y}[np.array({mask!r})] = {e.code}")
            self.features.add("write-mask")
            return e.bound
        if kind == "whole":
            if self.chance(0.5):
                c = self.const(-1.5, 1.5, nonzero=True)
                self.emit(f"{y} *= {c}")
                self.features.add("write-whole-mul")
                return yv.bound * abs(c)
            s = shape if self.chance(0.5) else self.split_broadcast(shape)[0]
            e = self.squash(self.expr(s, 2), 10)
            self.emit(f"{y} += {e.code}")
            self.features.add("write-whole-add")
            return yv.bound + e.bound
        # loops writing y[i]
        idx = self.fresh("i")
        lo = 1 if kind == "loop_rec" else 0
        hi = shape[0]
        self.emit(
            f"for {idx} in range({lo}, {y}.shape[0]):"
            if lo
            else f"for {idx} in range({y}.shape[0]):"
        )
        self.ind += 1
        before = list(self.env)
        self.env = self.env + self.loop_items(idx, lo, hi)
        self.loop_depth += 1
        if kind == "loop_rec":
            a = self.const(-0.9, 0.9)
            e = self.squash(self.expr(shape[1:], 2), 5)
            self.emit(f"{y}[{idx}] = {a} * {y}[{idx} - 1] + {e.code}")
            b = yv.bound + hi * e.bound
            self.features.add("write-loop-recurrence")
        else:
            if self.chance(0.4):
                c = self.squash(self.expr((), 1), 5)
                self.emit(f"if {self.cond(c.code, '>', repr(self.const(-1, 1)))}:")
                e1 = self.squash(self.expr(shape[1:], 2), 10)
                self.emit(f"    {y}[{idx}] = {e1.code}")
                self.emit("else:")
                e2 = self.squash(self.expr(shape[1:], 2), 10)
                self.emit(f"    {y}[{idx}] {self.pick(['=', '+='])} {e2.code}")
                b = max(e1.bound, e2.bound) + yv.bound
                self.features.add("write-in-branch-in-loop")
            else:
                e = self.squash(self.expr(shape[1:], 2), 10)
                self.emit(f"{y}[{idx}] {self.pick(['=', '+=', '='])} {e.code}")
                b = e.bound + yv.bound
                self.features.add("write-loop-fill")
        self.loop_depth -= 1
        self.env = before
        self.ind -= 1
        return b

    def write_repeated(self, yv: Var) -> float:
        """`y[[0, 0, 1]] = e` or `y[np.array([2, -1])] += e` with an index repeated (maybe as its
        negative twin): NumPy keeps the last write, and `+=` adds once (issue #13, class 8)."""
        y, shape = yv.name, yv.shape
        d = shape[0]
        k = self.r.randint(2, 4)
        ids = [self.r.randrange(-d, d) for _ in range(k)]
        j = self.r.randrange(1, k)
        twin = ids[0] if self.chance(0.6) else (ids[0] - d if ids[0] >= 0 else ids[0] + d)
        ids[j] = twin
        idx = f"np.array({ids!r})" if self.chance(0.5) else repr(ids)
        if self.chance(0.7):
            # rows that differ (a repeated index keeps one of them), or one row broadcast
            e = self.squash(self.expr((k,) + shape[1:], 2), 10)
            rowwise = (k,) + (1,) * (len(shape) - 1)
            code = f"{_paren(e.code)} * np.linspace(0.5, 1.5, {k}).reshape({rowwise!r})"
            b = 1.5 * e.bound
        else:
            e = self.squash(self.expr(shape[1:], 2), 10)
            code, b = e.code, e.bound
        op = self.pick(["=", "+="], [2, 1])
        self.emit(f"{y}[{idx}] {op} {code}")
        self.features.add("write-repeated-index")
        # read at once, so that a later write cannot hide what this one kept
        u = self.fresh()
        self.emit(f"{u} = np.mean({y} * {self.spread(shape)})")
        self.env.append(Var(u, (), 1.5 * (b + yv.bound), "float"))
        return b + yv.bound

    def s_early_return(self):
        c = self.squash(self.expr((), 1), 5)
        self.emit(f"if {self.cond(c.code, self.pick(['>', '<']), repr(self.const(-1, 1)))}:")
        self.ind += 1
        self.emit(f"return {self.output()}")
        self.ind -= 1
        self.features.add("early-return")

    # ------------------------------------------------------------------ the program
    def output(self) -> str:
        if self.out_kind == "scalar":
            terms = []
            # the first term reads the most recent values, so that most of the body is live
            recent = [v for v in self.env if v.kind in ("array", "float")][-3:]
            v = self.pick(recent)
            if v.shape == ():
                terms.append(v.name if v.bound < 1e3 else f"np.tanh({v.name})")
            else:
                axes = tuple(range(len(v.shape)))
                e = self.reduction(E(v.name, v.shape, v.bound, False), axes, False, ())
                terms.append(self.squash(e, 1e3).code)
            for _ in range(self.pick([0, 1, 2], [3, 2, 1])):
                terms.append(self.squash(self.expr((), self.r.randint(1, 3)), 1e3).code)
            return " + ".join(terms)
        if self.out_kind == "array":
            return self.squash(self.expr(self.out_shape, self.r.randint(1, 3)), 1e3).code
        return ", ".join(
            self.squash(self.expr(s, self.r.randint(1, 2)), 1e3).code for s in self.out_shape
        )

    def program(self) -> Program:
        r = self.r
        params = []
        n_arrays = self.pick([1, 2, 3], [3, 4, 2])
        names = ["x", "w", "z"]
        for i in range(n_arrays):
            shape = self.rand_shape(1, 3)
            while size(shape) > 24:
                shape = self.rand_shape(1, 2)
            params.append((names[i], "array", shape))
        if self.chance(0.35):
            params.append(("a", "float", ()))
        self.int_values = {}
        if self.chance(0.15):
            params.append(("n", "int", ()))
            self.int_values["n"] = self.pick([2, 3])
        r.shuffle(params)
        self.param_names = {p[0] for p in params}
        for name, kind, shape in params:
            if kind != "int":
                self.env.append(Var(name, shape, 1.5, "array" if kind == "array" else "float"))
        factory = self.extra("factory")
        if factory:
            self.capture()
        self.out_kind = self.pick(["scalar", "array", "tuple"], [6, 2.5, 1.5])
        if self.out_kind == "array":
            self.out_shape = self.target_shape()
            if self.out_shape == ():
                self.out_shape = (self.pick([2, 3]),)
        elif self.out_kind == "tuple":
            self.out_shape = [self.target_shape() for _ in range(self.pick([2, 3], [3, 1]))]
        for _ in range(r.randint(2, 6)):
            self.statement(allow_return=True)
        if "loop-branch" in self.extras and self.rb.random() < P_LOOP_BRANCH:
            # a loop of the function itself, last, so that the output reads what it carries
            self.force_branch = True
            self.s_for()
            self.force_branch = False
        ret = self.output()
        self.emit(f"return {ret}")
        fname = f"fz{self.seed}"
        sig = ", ".join(p[0] for p in params)
        main = f"def {fname}({sig}):\n" + "\n".join(self.lines)
        if factory:
            main = self.factory(fname, main)
        header = "import math\n\nimport numpy as np\n\n\n"
        src = header + "\n\n\n".join(self.helpers + [main]) + "\n"
        # wrt: a random non-empty set of the float parameters
        diff = [i for i, p in enumerate(params) if p[1] != "int"]
        chosen = sorted(r.sample(diff, r.randint(1, len(diff))))
        style = self.pick(["index", "name", "tuple"])
        if len(chosen) > 1 or style == "tuple":
            wrt = tuple(params[i][0] if self.chance(0.5) else i for i in chosen)
        elif style == "name":
            wrt = params[chosen[0]][0]
        else:
            wrt = chosen[0]
        return Program(
            self.seed,
            src,
            "",
            fname,
            params,
            dict(self.int_values),
            self.out_kind,
            wrt,
            self.features,
            factory,
        )

    def capture(self):
        """The values a factory closes over: an array `table` and/or a float `gain`. They are
        "item"s: read, never rebound or written (a write would make them local)."""
        self.captured = []
        which = self.pick([("table",), ("gain",), ("table", "gain")])
        for name in which:
            if name == "table":
                shape = self.rand_shape(1, 2)
                self.captured.append(Var("table", shape, 1.5, "item"))
            else:
                self.captured.append(Var("gain", (), 1.5, "item"))
        self.env.extend(self.captured)
        self.features.add("factory")

    def factory(self, fname, main) -> str:
        """`main` nested in `make_<fname>(table, gain)`, and two instances made at import: `fname`
        (with a module constant) and `<fname>_b` (other values, to check that a compiled or
        cached derivative is not shared between closures of one code)."""
        names = [v.name for v in self.captured]
        consts, calls = [], ([], [])
        for v in self.captured:
            if v.name == "table":
                n = size(v.shape)
                consts.append(f"TABLE = np.linspace(-1.2, 1.3, {n}).reshape({v.shape!r})")
                calls[0].append("TABLE")
                calls[1].append(f"np.linspace(1.4, -0.9, {n}).reshape({v.shape!r})")
            else:
                g = self.const(-1.5, 1.5, nonzero=True)
                calls[0].append(repr(g))
                calls[1].append(repr(round(-0.7 * g + 0.3, 2)))
        inner = "\n".join("    " + line if line else line for line in main.splitlines())
        maker = f"make_{fname}"
        return (
            f"def {maker}({', '.join(names)}):\n{inner}\n\n    return {fname}\n\n\n"
            + "".join(c + "\n" for c in consts)
            + f"{fname} = {maker}({', '.join(calls[0])})\n"
            + f"{fname}_b = {maker}({', '.join(calls[1])})"
        )


def _paren(code: str) -> str:
    if code.isidentifier() or (
        code.startswith("(") and code.endswith(")") and _balanced(code[1:-1])
    ):
        return code
    return f"({code})"


def _balanced(s: str) -> bool:
    depth = 0
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0


def _broadcasts_to(s, shape) -> bool:
    if len(s) > len(shape):
        return False
    try:
        return bcast(s, shape) == tuple(shape)
    except ValueError:
        return False


def _reduces_to(s, shape) -> bool:
    """`shape` is `s` with at least one axis deleted (in order)."""
    if len(s) <= len(shape):
        return False
    return _reduced_axes(s, shape) is not None


def _reduced_axes(s, shape):
    # greedy subsequence match
    axes, j = [], 0
    for i, d in enumerate(s):
        if j < len(shape) and shape[j] == d:
            j += 1
        else:
            axes.append(i)
    return axes if j == len(shape) and axes else None


def _factorizations(n):
    out = []
    for nd in (1, 2, 3):
        if nd == 1:
            out.append((n,))
            continue
        for a in range(2, n + 1):
            if n % a:
                continue
            if nd == 2:
                if n // a >= 2:
                    out.append((a, n // a))
            else:
                m = n // a
                for b in range(2, m + 1):
                    if m % b == 0 and m // b >= 2:
                        out.append((a, b, m // b))
    return out


def generate(seed: int, extras=DEFAULT_EXTRAS) -> Program:
    plain = Gen(seed, probe=False, extras=extras).program()
    probe = Gen(seed, probe=True, extras=extras).program()
    plain.probe_source = probe.source
    return plain


# =============================================================================== running


@dataclass
class Outcome:
    seed: int
    status: str  # ok | refused | fail | rejected
    detail: str = ""
    refusals: dict = field(default_factory=dict)  # mode -> S2SADError subclass name
    failures: list = field(default_factory=list)  # (mode, message)
    program: Program | None = None
    args: list | None = None
    # Python-mode results kept for the jit comparison: mode -> (derivatives, vjp seeds)
    values: dict = field(default_factory=dict)
    # with jit: instance ("" or "_b", the factory's second) -> one of JIT_OUTCOMES
    jit: dict = field(default_factory=dict)

    def report(self) -> str:
        p = self.program
        lines = [f"fuzz seed {self.seed}: {self.status}"]
        if p is not None:
            lines.append(f"wrt={p.wrt!r}")
            lines.append("args = " + _args_repr(self.args))
            lines.append("---- program ----")
            lines.append(p.source)
        for mode, msg in self.failures:
            lines.append(f"---- {mode} ----")
            lines.append(msg)
        if self.detail:
            lines.append(self.detail)
        for inst, how in self.jit.items():
            lines.append(f"jit{inst or ''}: {how}")
        return "\n".join(lines)


def _args_repr(args):
    if args is None:
        return "None"
    with np.printoptions(precision=17, threshold=10_000):
        return "[" + ", ".join(repr(a) for a in args) + "]"


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def _import(path: str, modname: str):
    spec = importlib.util.spec_from_file_location(modname, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[modname] = mod
    spec.loader.exec_module(mod)
    return mod


def make_args(prog: Program, rng) -> list:
    args = []
    for name, kind, shape in prog.params:
        if kind == "array":
            args.append(rng.uniform(-1.5, 1.5, size=shape).astype(np.float64))
        elif kind == "float":
            v = float(rng.uniform(-1.5, 1.5))
            args.append(np.float64(v) if rng.random() < 0.2 else v)
        else:
            args.append(int(prog.int_values[name]))
    return args


def _copy(args):
    return [copy.deepcopy(a) for a in args]


def _same(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return bool(a == b) or (a != a and b != b)


def _finite_and_moderate(out) -> bool:
    outs = out if isinstance(out, tuple) else (out,)
    for o in outs:
        a = np.asarray(o, dtype=np.float64)
        if not np.all(np.isfinite(a)) or (a.size and np.max(np.abs(a)) > MAX_VALUE):
            return False
    return True


def _perturbed_all(x, rng, scale):
    if isinstance(x, np.ndarray):
        return x + scale * rng.standard_normal(x.shape)
    return type(x)(x + scale * rng.standard_normal())


def _perturbed(x, k, delta):
    if isinstance(x, np.ndarray):
        y = np.array(x, dtype=np.float64, copy=True, order="C")
        y.reshape(-1)[k] += delta
        return y
    if isinstance(x, np.generic):
        return type(x)(x + delta)
    return float(x) + delta


def _fd(scalar_fn, args, index, eps, order=2):
    x = args[index]
    n = int(np.size(x))
    out = np.empty(n)
    for k in range(n):
        acc = 0.0
        for step, w in _STENCILS[order]:
            a = list(args)
            a[index] = _perturbed(x, k, step * eps)
            acc += w * scalar_fn(_copy(a))
        out[k] = acc / eps
    return out.reshape(np.shape(x))


def _close(ad, fd) -> bool:
    ad = np.asarray(ad, dtype=np.float64)
    scale = max(1.0, float(np.max(np.abs(fd))) if np.size(fd) else 1.0)
    if ad.shape != np.shape(fd) or not np.all(np.isfinite(ad)):
        return False
    return bool(np.all(np.abs(ad - fd) <= ATOL * scale + RTOL * np.abs(fd)))


def _compare(ad, scalar_fn, args, index):
    """None if `ad` matches finite differences (trying more accurate stencils before giving up),
    else a message."""
    return _compare_with(ad, lambda eps, order: _fd(scalar_fn, args, index, eps, order))


def _kind_ok(g, x) -> str | None:
    if isinstance(x, float) and not isinstance(x, np.generic):
        return None if type(g) is float else f"gradient of a Python float is {type(g).__name__}"
    if isinstance(x, np.generic):
        return (
            None if type(g) is type(x) else f"gradient of {type(x).__name__} is {type(g).__name__}"
        )
    if not isinstance(g, np.ndarray):
        return f"gradient of an array is {type(g).__name__}"
    if g.shape != x.shape or g.dtype != x.dtype:
        return f"gradient has shape {g.shape} dtype {g.dtype}, input {x.shape} {x.dtype}"
    return None


def _wrt_indices(prog: Program):
    names = [p[0] for p in prog.params]
    items = prog.wrt if isinstance(prog.wrt, tuple) else (prog.wrt,)
    return [names.index(i) if isinstance(i, str) else i for i in items], isinstance(prog.wrt, tuple)


MODES = ("grad", "vjp", "jvp", "jacobian")


JIT_OUTCOMES = ("compiled-agree", "fallback-agree", "refused", "disagree", "error")


def check_program(
    seed: int, workdir: str, modes=MODES, extras=DEFAULT_EXTRAS, jit: bool = False
) -> Outcome:
    """Generate program `seed` (with the gated constructs `extras`) and check it in `modes`; with
    `jit`, also with `jit=True` (see _check_jit)."""
    import s2sad

    prog = generate(seed, extras)
    out = Outcome(seed, "ok", program=prog)
    base = os.path.join(workdir, f"fz{seed}")
    with open(base + ".py", "w") as fh:
        fh.write(prog.source)
    with open(base + "_probe.py", "w") as fh:
        fh.write(prog.probe_source)
    mod = _import(base + ".py", f"_s2sad_fuzz_{seed}")
    pmod = _import(base + "_probe.py", f"_s2sad_fuzz_{seed}_probe")
    probe = Probe()
    pmod._K = probe
    f = getattr(mod, prog.fname)
    pf = getattr(pmod, prog.fname)

    # a test point away from kinks, with moderate values, where finite differences are stable
    rng = np.random.default_rng(seed)
    drng = np.random.default_rng(seed + 23)
    indices, is_tuple = _wrt_indices(prog)
    args = None
    why = ""
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(PROGRAM_TIMEOUT_S)
    try:
        args, why, res = _test_point(prog, pf, f, probe, rng, drng, indices, seed, modes)
    except _Timeout:
        raise AssertionError(
            f"generator bug: the program did not finish in {PROGRAM_TIMEOUT_S}s\n" + prog.source
        )
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    out.args = args
    if args is None:
        out.status, out.detail = "rejected", why
        return out
    with np.errstate(all="ignore"):
        expected = f(*_copy(args))
    if not _same_output(expected, res):
        raise AssertionError("generator bug: probe and plain programs differ\n" + prog.source)

    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(PROGRAM_TIMEOUT_S)
    try:
        with np.errstate(all="ignore"):
            for mode in modes:
                if mode == "grad" and prog.out_kind != "scalar":
                    continue
                if mode == "jvp":
                    _check_jvp(s2sad, f, prog, args, expected, indices, is_tuple, out, seed)
                elif mode == "jacobian":
                    _check_jacobian(s2sad, f, prog, args, expected, indices, is_tuple, out)
                else:
                    _check_mode(s2sad, mode, f, prog, args, expected, indices, is_tuple, out, seed)
            if prog.factory:
                _check_second_instance(s2sad, mod, pmod, probe, prog, args, indices, out, seed)
    except _Timeout:
        out.failures.append(("timeout", f"no result after {PROGRAM_TIMEOUT_S}s"))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    if jit:
        old = signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(JIT_TIMEOUT_S)
        try:
            with np.errstate(all="ignore"):
                _check_jit(s2sad, f, prog, args, expected, indices, is_tuple, out, seed, "")
                g = getattr(mod, prog.fname + "_b", None)
                if g is not None and out.jit.get("") in ("compiled-agree", "fallback-agree"):
                    expected_b = g(*_copy(args))
                    _check_jit(s2sad, g, prog, args, expected_b, indices, is_tuple, out, seed, "_b")
        except _Timeout:
            out.failures.append(("jit-timeout", f"no result after {JIT_TIMEOUT_S}s"))
            out.jit["timeout"] = "error"
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)
    if out.failures:
        out.status = "fail"
    elif out.refusals:
        out.status = "refused"
    return out


def _test_point(prog, pf, f, probe, rng, drng, indices, seed, modes):
    """Arguments away from kinks and overflow where finite differences are stable, the probe
    program's result there and, if none was found, why: (args or None, why, result)."""
    args, why, res = None, "", None
    for _attempt in range(6):
        cand = make_args(prog, rng)
        probe.reset()
        with np.errstate(all="ignore", over="raise"):
            try:
                res = pf(*_copy(cand))
            except (FloatingPointError, OverflowError):  # NumPy's, or the math module's
                # an intermediate overflowed to inf: even where the output does not depend on
                # it, reverse mode meets 0 * inf = nan there (README, "Numerical behaviour")
                why = "overflow inside the program"
                continue
            except Exception:  # the generator wrote an invalid program: its bug
                raise AssertionError(
                    "generator bug: the probe program raised\n"
                    + traceback.format_exc()
                    + "\n"
                    + prog.probe_source
                )
        base = probe.sites
        near = _near_kinks(base, None)
        if near:
            moved = [
                _perturbed_all(a, rng, 1e-5) if kind != "int" else a
                for a, (_, kind, _) in zip(cand, prog.params)
            ]
            probe.reset()
            with np.errstate(all="ignore"):
                pf(*moved)
            near = _near_kinks(base, probe.sites)
        if near:
            i, w, m = near[0]
            why = f"kink: {w} at distance {m:.3g}"
            if m == 0.0 and w != "std at 0":
                break  # a structural tie that moving the inputs breaks: no point will do
            continue
        if not _finite_and_moderate(res):
            why = "overflow or non-finite output"
            continue
        if _fd_unstable(f, cand, indices, drng):
            why = "finite differences unstable (a huge derivative)"
            continue
        flip = _branch_flips(pf, probe, cand, indices, _fd_directions(cand, indices, seed, modes))
        if flip:
            why = f"kink: comparison flips within the finite-difference stencil {flip}"
            continue
        args = cand
        break
    return args, why, res


def _same_output(a, b) -> bool:
    if isinstance(a, tuple):
        return (
            isinstance(b, tuple)
            and len(a) == len(b)
            and all(_same_output(x, y) for x, y in zip(a, b))
        )
    return np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True) and np.shape(a) == np.shape(
        b
    )


def _check_mode(s2sad, mode, f, prog, args, expected, indices, is_tuple, out, seed):
    before = _copy(args)
    call_args = list(args)
    try:
        if mode == "grad":
            res = s2sad.grad(f, wrt=prog.wrt)(*call_args)
            seeds = None
        else:
            primal, pullback = s2sad.vjp(f, wrt=prog.wrt)(*call_args)
            srng = np.random.default_rng(seed + 7)
            outs = expected if isinstance(expected, tuple) else (expected,)
            seeds = tuple(_seed_like(o, srng) for o in outs)
            frozen = copy.deepcopy(seeds)
            res = pullback(seeds if isinstance(expected, tuple) else seeds[0])
    except _Timeout:
        raise
    except Exception as exc:
        _raised(s2sad, mode, exc, out)
        return
    for a, b in zip(call_args, before):
        if not _same(a, b):
            out.failures.append((mode, "s2sad modified an argument in place"))
            return
    if mode == "vjp":
        if not _same_primal(primal, expected):
            out.failures.append((mode, f"primal output differs: {primal!r} vs {expected!r}"))
            return
        if not all(_same(s, s0) for s, s0 in zip(seeds, frozen)):
            out.failures.append((mode, "pullback modified its seed"))
            return
    grads = list(res) if is_tuple else [res]
    if is_tuple and (not isinstance(res, tuple) or len(res) != len(indices)):
        out.failures.append((mode, f"expected a tuple of {len(indices)} gradients, got {res!r}"))
        return
    out.values[mode] = (copy.deepcopy(grads), seeds)

    if mode == "grad":

        def scalar_fn(a):
            return float(np.asarray(f(*a), dtype=np.float64))

    else:

        def scalar_fn(a):
            r = f(*a)
            r = r if isinstance(r, tuple) else (r,)
            return float(
                sum(
                    np.sum(np.asarray(s) * np.asarray(v, dtype=np.float64))
                    for s, v in zip(seeds, r)
                )
            )

    names = [p[0] for p in prog.params]
    for g, i in zip(grads, indices):
        bad = _kind_ok(g, args[i])
        if bad:
            out.failures.append((mode, f"wrt {names[i]!r}: {bad}"))
            continue
        msg = _compare(g, scalar_fn, args, i)
        if msg:
            out.failures.append((mode, f"wrong derivative wrt {names[i]!r}:\n{msg}"))


def _raised(s2sad, mode, exc, out) -> None:
    """Record an exception from s2sad: a deliberate S2SADError is a refusal, anything else (or an
    S2SADError that calls itself internal, or blames a valid program's names) a failure."""
    if isinstance(exc, s2sad.S2SADError):
        if "internal error" in str(exc):
            out.failures.append((mode, f"internal S2SADError: {type(exc).__name__}: {exc}"))
        elif isinstance(exc, s2sad.NameResolutionError):
            # generated programs define every name before use: this refusal blames a valid
            # program (typically a name from the wrong scope after inlining or renaming)
            out.failures.append((mode, f"false refusal: {type(exc).__name__}: {exc}"))
        else:
            out.refusals[mode] = (type(exc).__name__, str(exc).splitlines()[0])
        return
    tb = "".join(traceback.format_exception(exc, limit=-6))
    out.failures.append((mode, "exception inside s2sad:\n" + tb))


# ----------------------------------------------------------------------------- forward mode


def _flat_outputs(r) -> np.ndarray:
    """All outputs of one call as one float64 vector."""
    outs = r if isinstance(r, tuple) else (r,)
    return np.concatenate([np.asarray(o, dtype=np.float64).reshape(-1) for o in outs])


def _shifted(args, indices, tangents, h):
    a = list(args)
    for i, t in zip(indices, tangents):
        x = a[i]
        if isinstance(x, np.ndarray):
            a[i] = np.asarray(x + h * np.asarray(t), dtype=np.float64)
        elif isinstance(x, np.generic):
            a[i] = type(x)(x + h * t)
        else:
            a[i] = float(x) + h * float(t)
    return a


_STENCILS = {
    2: [(1, 0.5), (-1, -0.5)],
    4: [(2, -1 / 12), (1, 8 / 12), (-1, -8 / 12), (-2, 1 / 12)],
}
# (eps, order) tried in turn before a derivative is called wrong: round-off at small steps and
# strong curvature at large ones each spoil some of them
_ALTERNATES = [(1e-5, 2), (1e-4, 4), (1e-3, 4), (1e-6, 4), (1e-7, 4)]


def _fd_direction(f, args, indices, tangents, eps, order=2):
    """Central differences of all outputs along the tangent direction."""
    acc = 0.0
    for step, w in _STENCILS[order]:
        acc = acc + w * _flat_outputs(f(*_copy(_shifted(args, indices, tangents, step * eps))))
    return acc / eps


def _fd_columns(f, args, index, eps, order=2):
    """The Jacobian of all outputs with respect to args[index], (outputs, input size)."""
    x = args[index]
    cols = []
    for k in range(int(np.size(x))):
        acc = 0.0
        for step, w in _STENCILS[order]:
            a = list(args)
            a[index] = _perturbed(x, k, step * eps)
            acc = acc + w * _flat_outputs(f(*_copy(a)))
        cols.append(acc / eps)
    return np.stack(cols, axis=1) if cols else np.zeros((0, 0))


def _compare_with(ad, fd_at) -> str | None:
    """None if `ad` matches fd_at(eps, order) for some stencil, else a message."""
    fd = fd_at(EPS, 2)
    if _close(ad, fd):
        return None
    alts = {}
    for eps, order in _ALTERNATES:
        alts[(eps, order)] = fd_at(eps, order)
        if _close(ad, alts[(eps, order)]):
            return None
    with np.printoptions(precision=10, suppress=False, threshold=200):
        return (
            f"s2sad:\n{np.asarray(ad)!r}\nfinite differences (eps=1e-6):\n{fd!r}\n"
            f"finite differences (4th order, eps=1e-3):\n{alts[(1e-3, 4)]!r}"
        )


def _fd_unstable(f, args, indices, drng) -> bool:
    """Whether two finite-difference stencils disagree along a random direction, by more than
    ten times the tolerance of the comparison: the derivative is too large (or the function too
    rough) at this point for finite differences to judge s2sad, whatever s2sad says."""
    tangents = [_seed_like(args[i], drng) for i in indices]
    with np.errstate(all="ignore"):
        a = _fd_direction(f, args, indices, tangents, 1e-6, 2)
        b = _fd_direction(f, args, indices, tangents, 1e-4, 4)
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return True
    scale = max(1.0, float(np.max(np.abs(b))) if b.size else 1.0)
    return not bool(np.all(np.abs(a - b) <= 10 * (ATOL * scale + RTOL * np.abs(b))))


# the steps of the small stencils (the first ones compared): a comparison that changes its outcome
# at one of them makes every stencil straddle a jump or kink. (Between the largest step and the
# kink margin, a comparison flips only if it has a slope over 100 along the direction.)
_FLIP_STEPS = sorted(
    {
        k * eps
        for eps, order in [(EPS, 2), (1e-5, 2), (1e-6, 4), (1e-7, 4)]
        for k, _ in _STENCILS[order]
        if k > 0
    }
)


def _jvp_tangents(args, indices, seed):
    """The random tangent the jvp check uses (one per wrt input)."""
    trng = np.random.default_rng(seed + 11)
    return [_seed_like(args[i], trng) for i in indices]


def _fd_directions(args, indices, seed, modes=MODES):
    """Yields (label, shift) for every direction finite differences move the inputs in: each
    element of each wrt input (grad, vjp, jacobian) and the jvp tangent; shift(h) is the
    argument list moved by h along it."""
    if set(modes) - {"jvp"}:
        for i in indices:
            for k in range(int(np.size(args[i]))):

                def shift(h, i=i, k=k):
                    a = list(args)
                    a[i] = _perturbed(args[i], k, h)
                    return a

                yield "along an input element", shift
    if "jvp" in modes:
        tangents = _jvp_tangents(args, indices, seed)
        yield "along the jvp tangent", lambda h: _shifted(args, indices, tangents, h)


def _branch_flips(pf, probe, args, indices, directions) -> str | None:
    """Where the probe program `pf` decides a comparison (an `if`, a loop's exit, a mask, a
    `where`) differently than at `args` at some point of the small finite-difference stencils
    along one of `directions`: finite differences jump there (a value far from its threshold
    can still cross it within the stencil when it moves steeply). None if nowhere."""
    probe.reset()
    with np.errstate(all="ignore"):
        pf(*_copy(args))
    base = probe.decisions
    for label, shift in directions:
        for h in _FLIP_STEPS:
            for step in (h, -h):
                probe.reset()
                with np.errstate(all="ignore"):
                    try:
                        pf(*_copy(shift(step)))
                    except Exception:
                        return f"{label} (the program raised), at a step of {step:g}"
                if probe.decisions != base:
                    return f"{label}, at a step of {step:g}"
    return None


def _tangent_kind_ok(t, o) -> str | None:
    """The output tangent has the output's type and shape."""
    if isinstance(o, (float, int)) and not isinstance(o, (np.generic, bool)):
        return None if type(t) is float else f"tangent of a Python number is {type(t).__name__}"
    if isinstance(o, np.generic) or (isinstance(o, np.ndarray) and o.ndim == 0):
        if np.issubdtype(np.result_type(o), np.integer) and np.result_type(t) != np.float64:
            return f"tangent of an integer output is {np.result_type(t)}, not float64"
        if isinstance(t, (np.floating, np.ndarray)) and np.shape(t) == ():
            return None
        return f"tangent of a scalar {type(o).__name__} is {type(t).__name__}"
    if not isinstance(t, np.ndarray) or t.shape != np.shape(o):
        return f"tangent {type(t).__name__} of shape {np.shape(t)} for an output {np.shape(o)}"
    if not np.issubdtype(t.dtype, np.floating):
        return f"tangent of dtype {t.dtype}"
    return None


def _check_jvp(s2sad, f, prog, args, expected, indices, is_tuple, out, seed):
    """jvp with a random tangent against central differences along that tangent."""
    mode = "jvp"
    tangents = _jvp_tangents(args, indices, seed)
    frozen = copy.deepcopy(tangents)
    before = _copy(args)
    call_args = list(args)
    try:
        primal, tangent_out = s2sad.jvp(f, wrt=prog.wrt)(
            *call_args, tangent=tuple(tangents) if is_tuple else tangents[0]
        )
    except _Timeout:
        raise
    except Exception as exc:
        _raised(s2sad, mode, exc, out)
        return
    if not all(_same(a, b) for a, b in zip(call_args, before)):
        out.failures.append((mode, "s2sad modified an argument in place"))
        return
    if not all(_same(t, t0) for t, t0 in zip(tangents, frozen)):
        out.failures.append((mode, "jvp modified its tangent"))
        return
    if not _same_primal(primal, expected):
        out.failures.append((mode, f"primal output differs: {primal!r} vs {expected!r}"))
        return
    outs = expected if isinstance(expected, tuple) else (expected,)
    touts = tangent_out if isinstance(expected, tuple) else (tangent_out,)
    if isinstance(expected, tuple) and (
        not isinstance(tangent_out, tuple) or len(tangent_out) != len(expected)
    ):
        out.failures.append((mode, f"expected a tuple of {len(outs)} tangents: {tangent_out!r}"))
        return
    for k, (t, o) in enumerate(zip(touts, outs)):
        bad = _tangent_kind_ok(t, o)
        if bad:
            out.failures.append((mode, f"output {k}: {bad}"))
            return
    ad = np.concatenate([np.asarray(t, dtype=np.float64).reshape(-1) for t in touts])
    msg = _compare_with(
        ad, lambda eps, order: _fd_direction(f, args, indices, tangents, eps, order)
    )
    if msg:
        out.failures.append((mode, f"wrong directional derivative:\n{msg}"))


# ----------------------------------------------------------------------------- jacobian

JACOBIAN_MAX_OUT = 12  # jacobian is checked for single outputs of at most this many elements


def _check_jacobian(s2sad, f, prog, args, expected, indices, is_tuple, out):
    """s2sad.jacobian in both modes: each block shaped out.shape + in.shape, against central
    differences; the reverse-mode rows also against vjp pullbacks of the basis seeds."""
    if isinstance(expected, tuple) or np.size(expected) > JACOBIAN_MAX_OUT:
        return  # single outputs only (tuples: tests/test_jacobian_batched.py); small ones only
    names = [p[0] for p in prog.params]
    fd_cache = {}

    def fd_at(i):
        return lambda eps, order: fd_cache.setdefault(
            (i, eps, order), _fd_columns(f, args, i, eps, order)
        )

    for how in ("forward", "reverse"):
        mode = f"jacobian-{how}"
        before = _copy(args)
        call_args = list(args)
        try:
            jac = s2sad.jacobian(f, wrt=prog.wrt, mode=how)(*call_args)
        except _Timeout:
            raise
        except Exception as exc:
            _raised(s2sad, mode, exc, out)
            continue
        if not all(_same(a, b) for a, b in zip(call_args, before)):
            out.failures.append((mode, "s2sad modified an argument in place"))
            continue
        blocks = list(jac) if is_tuple else [jac]
        if is_tuple and (not isinstance(jac, tuple) or len(jac) != len(indices)):
            out.failures.append((mode, f"expected a tuple of {len(indices)} blocks, got {jac!r}"))
            continue
        for block, i in zip(blocks, indices):
            want = np.shape(expected) + np.shape(args[i])
            if np.shape(block) != want:
                out.failures.append(
                    (mode, f"wrt {names[i]!r}: block of shape {np.shape(block)}, expected {want}")
                )
                continue
            flat = np.asarray(block, dtype=np.float64).reshape(
                int(np.size(expected)), int(np.size(args[i]))
            )
            msg = _compare_with(flat, fd_at(i))
            if msg:
                out.failures.append((mode, f"wrong jacobian wrt {names[i]!r}:\n{msg}"))
            elif how == "reverse" and "vjp" not in out.refusals:
                msg = _against_vjp_rows(s2sad, f, prog, args, expected, flat, i, indices)
                if msg:
                    out.failures.append((mode, f"wrt {names[i]!r}: {msg}"))


def _against_vjp_rows(s2sad, f, prog, args, expected, flat, i, indices):
    """The reverse-mode Jacobian's rows are the pullbacks of the output's basis seeds."""
    _, pullback = s2sad.vjp(f, wrt=prog.wrt)(*list(args))
    k_in = indices.index(i)
    for k in range(int(np.size(expected))):
        if isinstance(expected, np.ndarray):
            seed = np.zeros(np.shape(expected))
            seed.reshape(-1)[k] = 1.0
        else:
            seed = type(expected)(1.0)
        row = pullback(seed)
        row = row[k_in] if isinstance(prog.wrt, tuple) else row
        row = np.asarray(row, dtype=np.float64).reshape(-1)
        scale = max(1.0, float(np.max(np.abs(row))) if row.size else 1.0)
        if not np.allclose(row, flat[k], rtol=1e-9, atol=1e-9 * scale):  # rounding may differ
            return f"jacobian row {k} differs from the vjp pullback of basis seed {k}"
    return None


def _same_primal(a, b) -> bool:
    if isinstance(b, tuple):
        return (
            isinstance(a, tuple)
            and len(a) == len(b)
            and all(_same_primal(x, y) for x, y in zip(a, b))
        )
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=1e-10, atol=1e-12, equal_nan=True))


def _seed_like(o, rng):
    if isinstance(o, float) and not isinstance(o, np.generic):
        return float(rng.standard_normal())
    if isinstance(o, np.ndarray):
        return rng.standard_normal(o.shape)
    return np.float64(rng.standard_normal())


# ----------------------------------------------------------------------------- jit and closures


def _derivatives(s2sad, f, prog, args, expected, seed, jit):
    """grad (scalar outputs) or the pullback of vjp's random seed, as a list per wrt input, and
    the seeds (None for grad)."""
    kw = {"jit": True} if jit else {}
    if prog.out_kind == "scalar":
        res = s2sad.grad(f, wrt=prog.wrt, **kw)(*list(args))
        seeds = None
    else:
        _, pullback = s2sad.vjp(f, wrt=prog.wrt, **kw)(*list(args))
        srng = np.random.default_rng(seed + 7)
        outs = expected if isinstance(expected, tuple) else (expected,)
        seeds = tuple(_seed_like(o, srng) for o in outs)
        res = pullback(seeds if isinstance(expected, tuple) else seeds[0])
    return (list(res) if isinstance(prog.wrt, tuple) else [res]), seeds


def _fd_of(f, prog, seeds):
    """The scalar function whose gradient _derivatives computes."""
    if seeds is None:
        return lambda a: float(np.asarray(f(*a), dtype=np.float64))

    def scalar_fn(a):
        r = f(*a)
        r = r if isinstance(r, tuple) else (r,)
        return float(
            sum(np.sum(np.asarray(s) * np.asarray(v, np.float64)) for s, v in zip(seeds, r))
        )

    return scalar_fn


def _agree(a, b) -> bool:
    """Jitted and Python-mode derivatives agree to JIT_RTOL (summation order may differ)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    scale = max(1.0, float(np.max(np.abs(b))) if b.size else 1.0)
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=JIT_RTOL, atol=JIT_RTOL * scale))


def _check_jit(s2sad, f, prog, args, expected, indices, is_tuple, out, seed, inst):
    """`jit=True`: grad for a scalar output, else one vjp pullback (compiling dominates, so one
    transform per program). It must agree with Python mode to JIT_RTOL and with finite
    differences, whether Numba compiled it or it fell back (JitFallbackWarning) to Python; a
    clean S2SADError is a refusal. out.jit[inst] says which."""
    import warnings

    from s2sad.jit import JitFallbackWarning

    mode = ("jit-grad" if prog.out_kind == "scalar" else "jit-vjp") + inst
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            got, seeds = _derivatives(s2sad, f, prog, args, expected, seed, jit=True)
        except _Timeout:
            raise
        except Exception as exc:
            n = len(out.failures)
            _raised(s2sad, mode, exc, out)
            out.jit[inst] = "error" if len(out.failures) > n else "refused"
            return
    fell_back = any(issubclass(w.category, JitFallbackWarning) for w in caught)
    try:
        want, _ = _derivatives(s2sad, f, prog, args, expected, seed, jit=False)
    except _Timeout:
        raise
    except Exception:  # Python mode refused (recorded by its own check): judge by FD alone
        want = None
    names = [p[0] for p in prog.params]
    bad = []
    for k, (g, i) in enumerate(zip(got, indices)):
        kind = _kind_ok(g, args[i])
        if kind:
            bad.append(f"wrt {names[i]!r}: {kind}")
        elif want is not None:
            if not _agree(g, want[k]):
                with np.printoptions(precision=17, threshold=200):
                    bad.append(
                        f"wrt {names[i]!r}: jit=True differs from Python mode"
                        f"{' (after a JitFallbackWarning)' if fell_back else ''}:\n"
                        f"{np.asarray(g)!r}\nPython mode:\n{np.asarray(want[k])!r}"
                    )
        elif not inst:  # Python mode refused: finite differences judge
            msg = _compare(g, _fd_of(f, prog, seeds), args, i)
            if msg:
                bad.append(f"wrong derivative wrt {names[i]!r} (jit=True):\n{msg}")
    for msg in bad:
        out.failures.append((mode, msg))
    if bad:
        out.jit[inst] = "disagree"
    else:
        out.jit[inst] = "fallback-agree" if fell_back else "compiled-agree"


def _check_second_instance(s2sad, mod, pmod, probe, prog, args, indices, out, seed):
    """A factory's second instance (same code, other captured values) at the same point, in
    Python mode, against finite differences: a derivative cached by code must not carry the first
    instance's values. Skipped where this instance is near a kink at the point."""
    g, pg = getattr(mod, prog.fname + "_b"), getattr(pmod, prog.fname + "_b")
    probe.reset()
    with np.errstate(all="ignore"):
        try:
            expected = pg(*_copy(args))
        except Exception:
            return
    if _near_kinks(probe.sites, None) or not _finite_and_moderate(expected):
        return
    if _branch_flips(pg, probe, args, indices, _fd_directions(args, indices, seed, ("grad",))):
        return
    mode = ("grad" if prog.out_kind == "scalar" else "vjp") + "_b"
    with np.errstate(all="ignore"):
        try:
            got, seeds = _derivatives(s2sad, g, prog, args, expected, seed, jit=False)
        except _Timeout:
            raise
        except Exception as exc:
            _raised(s2sad, mode, exc, out)
            return
        names = [p[0] for p in prog.params]
        for d, i in zip(got, indices):
            msg = _kind_ok(d, args[i]) or _compare(d, _fd_of(g, prog, seeds), args, i)
            if msg:
                out.failures.append((mode, f"second instance, wrt {names[i]!r}:\n{msg}"))
