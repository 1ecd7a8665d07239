"""`normalize`: the stage's entry. It runs the flattener over the function (`Normalizer`, the
layers of flatten.py ... inline.py), then the cleanup passes (liveness.py) and the memory
hazards' check (memory.py), and hands on a `Normalized` function.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from ..resolve import Resolver
from .inline import Inlining
from .fresh import not_integers
from .liveness import drop_unread_constants, drop_unread_copies, prune_liveout


@dataclass
class Normalized:
    stmts: list[ast.stmt]  # see the package docstring for the statement forms
    outputs: list[str]  # the returned names (several for a tuple return)
    tuple_output: bool
    params: list[str]
    varied: set[str]  # names that may depend on the wrt inputs
    taken: set[str] = field(default_factory=set)  # every name in use, for later allocations
    floats: set[str] = field(default_factory=set)  # names certainly of floats (jit only)


class Normalizer(Inlining):
    """The flattener of one function, all its layers (an inlined body has one of its own)."""

    def run(self, ranks=None, wrt=(), float_casts=None) -> Normalized:
        """`ranks`: the arguments' ranks, as pairs, for the memory hazards' check (and, with
        `wrt` and `float_casts`, for what an `np.asarray` casting a parameter makes: fresh.py)."""
        self.memory.not_integers = not_integers(self.parsed, ranks, wrt)
        self.memory.float_casts = float_casts
        body = self.function_body(self.parsed.tree.body)
        result = self.names.fresh(self.parsed.name)
        body, arity = self.lift(body, result)
        self.locals |= {result} | {f"{result}{i}" for i in range(arity)}
        self.mark_loop_varied(body)  # a name that varies anywhere is split from the start
        self.out = []
        self.block_into(self.out, body)
        self.refuse_list_results([f"{result}{i}" for i in range(arity)] or [result])
        if arity:
            outputs = [self.env[f"{result}{i}"] for i in range(arity)]
        else:
            outputs = [self.env[result]]
        drop_unread_copies(self.out, set(outputs))
        drop_unread_constants(self.out, self.folded, set(outputs))
        # (ranks of what remains: a dead copy may not tell a rank)
        self.memory.check_hazards(self.out, ranks)
        prune_liveout(self.out, set(outputs))
        return Normalized(
            self.out, outputs, bool(arity), list(self.parsed.params), self.varied, self.names.taken
        )


def normalize(parsed, wrt: list[str], ranks=None, float_casts=None) -> tuple[Normalized, Resolver]:
    """`wrt` and the results name parameters as the generated code does (see `hygienic`);
    `ranks` (pairs of a parameter and its rank, or None) tell which values are scalars."""
    norm = Normalizer(parsed, wrt)
    result = norm.run(ranks, wrt, float_casts)
    return result, norm.resolver
