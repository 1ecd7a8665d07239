"""The reverse transform of branches and loops (a part of `Reverser`, reverse.py): an `if`
becomes the same `if` over the adjoints of its branches, with the adjoints each branch leaves
zero made explicit; a loop becomes a loop running backwards over just the adjoints a live value
reaches, with its loop-carried adjoints and lazy zeros settled at each iteration's end. It
consumes normalized statements (with their `merged`, `liveout`, `trips`, ... annotations) and
produces adjoint statements with the tape markers the tape pass fills.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from .. import ir
from ..astcopy import clone
from .names import assign_counts, assigned, simple_statements
from .nodes import assign_to, call_of, load_name
from .markers import Marker


@dataclass
class Context:
    """Where the walk is: the innermost primal loop and what its body assigns and carries."""

    loop: object = None  # innermost primal loop
    local: set[str] = field(default_factory=set)  # names assigned in its body
    carried: set[str] = field(default_factory=set)  # its loop-carried and live-out names
    indices: set[str] = field(default_factory=set)  # integer loop indices in scope


class BranchesAndLoops:
    """Adjoints of `if`, `for` and `while` statements; `Reverser` gives the statements' own."""

    def zero_of(self, primal: str) -> ast.expr:
        """A zero cotangent held in a variable: `0.0` for a scalar, else an array shaped like
        the value, so that no rule ever receives a scalar zero in place of an array (in batched
        mode, where every adjoint keeps its shape, the batched zeros)."""
        if self.batched:
            return self.zeros(primal)
        if self.rank(load_name(primal)) == 0:
            return ast.Constant(0.0)
        return call_of("zeros_like", load_name(primal))

    def nonzero_in(self, loop, touched: set[str]) -> set[str]:
        """The primal names whose adjoints may be nonzero somewhere in the reversed `loop`: those
        live before it (after the loop in the primal) and, transitively, the active operands of
        the statements assigning or writing such names."""
        nonzero = {p for p in touched if self.live(self.dname(p))}
        writers: dict[str, list] = {}  # a worklist: sweeps until nothing changes are quadratic
        for s in simple_statements(loop.body):
            op = ir.op(s)
            if op is not None and op.kind in ("rule", "setitem"):
                writers.setdefault(op.target, []).append(op)
        todo = list(nonzero)
        while todo:
            for op in writers.get(todo.pop(), ()):
                for _, _, operand in op.operands:
                    if operand in self.active and operand not in nonzero:
                        nonzero.add(operand)
                        todo.append(operand)
        return nonzero

    # ------------------------------------------------------------------ control flow
    def if_(self, stmt: ast.If, ctx: Context) -> list:
        before = self.state()
        inside = assign_counts(stmt.body + stmt.orelse)
        only_here = {n for n, c in inside.items() if c == self.assign_counts.get(n, 0)}
        local_b = (assigned(stmt.body) & only_here) - self.params
        local_e = (assigned(stmt.orelse) & only_here) - self.params
        body, after_b, orelse, after_e = self.branches(stmt, ctx)
        # adjoints first assigned in only one branch but read after the `if`: start them at zero
        # before it, and transform the branches again (starting an adjoint can make a loop in a
        # branch contribute to others, so until no new one is needed)
        inits: list = []
        started: list[str] = []
        while True:
            need = {
                d
                for d in after_b[0] ^ after_e[0]
                if d not in before[0]
                and d not in started
                and not self._local_adjoint(d, local_b | local_e)
            }
            if not need:
                break
            for d in sorted(need):
                zero = assign_to(d, self.zero_of(self.primal_of[d]))
                inits.append(self.at(self.where_made(zero, self.primal_of[d], stmt), stmt))
                started.append(d)
            self.restore(before)
            for d in started:
                self.adjoint[self.primal_of[d]] = d  # the name the branches gave it
                self.names.taken.add(d)
                self.defined.add(d)
            body, after_b, orelse, after_e = self.branches(stmt, ctx)
        # a lazy zero on one side only must hold zero on that side
        for branch, mine, other in ((body, after_b, after_e), (orelse, after_e, after_b)):
            for d in sorted((mine[1] - other[1]) & other[0] & mine[0]):
                primal = self.primal_of[d]
                branch.append(self.at(assign_to(d, self.zero_of(primal)), stmt))
        self.defined = after_b[0] | after_e[0]
        self.zero = after_b[1] & after_e[1]
        self.owned = after_b[2] & after_e[2]
        self.adjoint.update(after_b[3])
        self.adjoint.update(after_e[3])
        self.names.taken |= after_b[4] | after_e[4]
        body = [Marker("block", id(stmt.body))] + body
        orelse = [Marker("block", id(stmt.orelse))] + orelse
        node = ast.If(clone(stmt.test), body, orelse)
        ir.copy_origin(node, stmt)
        ir.mark_adjoint(node)
        return inits + [node]

    def where_made(self, zero: ast.stmt, primal: str, stmt) -> ast.stmt:
        """`zero` (`dy = zeros_like(y)`, made before `stmt`'s adjoint) run only where `primal`
        exists: an `if` made it that does not enclose `stmt` (`if c > 0: y = ...`, then
        `if c > 0: z = z * y`: where c <= 0, y was never bound and Python read none of it), so
        the zero is made under that `if`'s recorded test; a value bound twice (a merge's copy
        made under the first test, normalize/control.py's `guarded`) under either binding's.
        A value made in a loop is left as it is (unbound_reads.py refuses a read of it outside
        a later `if`)."""
        chains, here = self.made_in.get(primal), self.enclosing.get(id(stmt), ())
        if chains is None or not isinstance(zero.value, ast.Call):  # (0.0 reads nothing)
            return zero
        alternatives = []  # (a name bound twice, as a merge's guarded copy: either binding's)
        for made in chains:
            shared = 0
            while shared < min(len(made), len(here)) and made[shared][0] == here[shared]:
                shared += 1  # (the `if`s around both: their tests hold here)
            tests = [test for _, test in made[shared:]]
            if not tests or any(t is None for t in tests):
                return zero
            alternatives.append(tests[0] if len(tests) == 1 else ast.BoolOp(ast.And(), tests))
        test = alternatives[0] if len(alternatives) == 1 else ast.BoolOp(ast.Or(), alternatives)
        node = ast.If(clone(test), [zero], [])
        ir.mark_adjoint(node)
        return node

    def branches(self, stmt: ast.If, ctx: Context):
        start = self.state()
        body = self.block(stmt.body, ctx)
        after_b = self.state()
        self.restore(start)
        orelse = self.block(stmt.orelse, ctx)
        after_e = self.state()
        return body, after_b, orelse, after_e

    def _local_adjoint(self, d: str, local: set[str]) -> bool:
        return self.primal_of.get(d) in local

    def loop(self, stmt, ctx: Context) -> list:
        body_names = assigned(stmt.body)
        carried = set(ir.header(stmt)) | set(ir.liveout(stmt))
        index = ir.loop_index(stmt) if isinstance(stmt, ast.For) else None
        inner = Context(
            stmt, body_names - carried, carried, ctx.indices | ({index} if index else set())
        )
        inits: list = []
        # adjoints the reversed body accumulates into across iterations start here
        touched = set()
        for s in simple_statements(stmt.body):
            op = ir.op(s)
            if op is None or op.target not in self.active:
                continue  # (no adjoint: its operands get nothing from it)
            names = {o for _, _, o in op.operands} | {op.target}
            touched |= {n for n in names if n in self.active and n not in inner.local}
        inplace = {
            op.target if op.kind == "setitem" else op.operands[0][2]
            for op in map(ir.op, simple_statements(stmt.body))
            if op is not None
            and (
                op.kind == "setitem"
                or (op.kind == "rule" and op.operands and op.bound.rule.name == "getitem")
            )
        }
        # only adjoints that can become nonzero in the loop take part: the others stay zero in
        # every iteration, so their contributions are skipped, not computed from zeros
        nonzero = self.nonzero_in(stmt, touched)
        touched &= nonzero
        for primal in sorted(touched):
            if primal in inplace:
                self.make_owned(inits, stmt, primal)
            elif not self.live(self.dname(primal)):
                d = self.dname(primal)
                zero = self.zero_of(primal)
                if self.batched and primal in ir.liveout(stmt):  # unassigned if the loop never ran
                    zero.args[1] = ast.Lambda(_no_arguments(), load_name(primal))
                inits.append(self.at(self.where_made(assign_to(d, zero), primal, stmt), stmt))
                self.defined.add(d)
                self.zero.discard(d)
                self.owned.discard(d)
        if self.jit:  # Numba types a name once: a float32 input's sum starts as float64 would
            for init in inits:
                init = init.body[0] if isinstance(init, ast.If) else init  # (where_made's)
                zero = getattr(init, "value", None)
                if isinstance(zero, ast.Call) and getattr(zero.func, "id", "") == "zeros_like":
                    zero.func.id = "sum_zeros_like"
        for primal in body_names - carried:
            d = self.adjoint.get(primal)
            if d is not None:
                self.defined.discard(d)
                self.zero.discard(d)
        body = [Marker("block", id(stmt.body))] + self.block(stmt.body, inner)
        for primal in sorted(carried & self.active & nonzero):
            d = self.dname(primal)
            if d in self.zero:
                if primal in inplace:  # updated in place next iteration: an owned array
                    body.append(self.at(assign_to(d, self.zeros(primal)), stmt))
                    self.owned.add(d)
                else:
                    # Numba types a name once: an array's zero is an array (shaped like the
                    # stale adjoint, so the primal need not be recorded for its shape). Not
                    # where the rank is unknown: `h = 0.0` before the loop, an array in it,
                    # whose entry value's zero is shaped like it, not like the stale adjoint
                    zero = (
                        call_of("zeros_like", load_name(d))
                        if self.jit
                        and not self.batched
                        and self.rank(load_name(primal)) not in (0, None)
                        else self.zero_of(primal)
                    )
                    body.append(self.at(assign_to(d, zero), stmt))
                    self.owned.discard(d)
                self.zero.discard(d)
        for primal in (touched | carried) & nonzero:
            d = self.adjoint.get(primal)
            if d is not None and primal in self.active:
                self.defined.add(d)
        for primal in body_names - carried:
            d = self.adjoint.get(primal)
            if d is not None:
                self.defined.discard(d)
        if isinstance(stmt, ast.For):
            span = clone(stmt.iter)
            backwards = isinstance(span, ast.Call) and getattr(span.func, "id", "") == "reversed"
            if backwards:  # the adjoint of a backward loop runs forward
                span = span.args[0]
            if self.jit and not backwards:  # Numba has no reversed(range(...))
                node = ast.For(
                    ast.Name(ir.loop_index(stmt), ast.Store()),
                    _backward_range(span, ir.trips(stmt)),
                    body,
                    [],
                )
                ir.copy_origin(node, stmt)
                ir.mark_adjoint(node)
                return inits + [node]
            trips = ir.trips(stmt)
            if trips is not None:
                span = ast.Subscript(span, ast.Slice(None, load_name(trips), None), ast.Load())
            node = ast.For(
                ast.Name(ir.loop_index(stmt), ast.Store()),
                span if backwards else call_of("reversed", span),
                body,
                [],
            )
        else:
            counter = ast.Name(self.unused(), ast.Store())
            node = ast.For(counter, call_of("range", load_name(ir.iters(stmt))), body, [])
        ir.copy_origin(node, stmt)
        ir.mark_adjoint(node)
        return inits + [node]


def branch_tests(stmts: list[ast.stmt], counts: dict[str, int]) -> tuple[dict, dict]:
    """(each name every binding of which is `name = value` in a branch -> for each binding, the
    tests of the `if`s around it, outermost first, `not t` for an `else` (a merge's two
    bindings of one `if` taken as that `if`'s: `_either`); each `if` or loop -> that of the
    `if`s around it). A loop around it counts as a test None (where_made gives up); a test
    that is not a name (the normalized `cond`) too."""
    made: dict[str, list] = {}
    enclosing: dict[int, tuple] = {}

    def walk(block, tests, keys):
        for stmt in block:
            if isinstance(stmt, (ast.If, ast.For, ast.While)):
                enclosing[id(stmt)] = keys
            if isinstance(stmt, ast.If):
                name = stmt.test if isinstance(stmt.test, ast.Name) else None
                negated = name and ast.UnaryOp(ast.Not(), name)
                walk(stmt.body, tests + [name], keys + ((id(stmt), True),))
                walk(stmt.orelse, tests + [negated], keys + ((id(stmt), False),))
            elif isinstance(stmt, (ast.For, ast.While)):
                walk(stmt.body, tests + [None], keys + ((id(stmt), True),))
            elif isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name):
                chains = made.setdefault(stmt.targets[0].id, [])
                chains.append(tuple(zip(keys, tests)))

    walk(stmts, [], ())
    made = {n: _either(c) for n, c in made.items() if len(c) == counts.get(n)}
    return {n: c for n, c in made.items() if all(c)}, enclosing


def _either(chains: list[tuple]) -> list[tuple]:
    """`chains` (the tests around each binding of one name) with the two branches of one `if`
    taken as that `if`'s own (a merge's two bindings of `y_1`: it exists where the `if` ran),
    so a value every path binds has an empty chain, and its zero no test."""
    chains = list(dict.fromkeys(chains))
    for a in chains:
        for b in chains:
            if a and b and a[:-1] == b[:-1] and a[-1][0][0] == b[-1][0][0] and a is not b:
                rest = [c for c in chains if c is not a and c is not b]
                return _either(rest + [a[:-1]])
    return chains


def _no_arguments() -> ast.arguments:
    return ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[])


def _backward_range(span: ast.Call, trips: str | None) -> ast.expr:
    """range(a, b, s) run backwards (its first `trips` values only, if given), as a plain range."""
    args = [ast.unparse(a) for a in span.args]
    a, b, step = (
        ("0", args[0], "1")
        if len(args) == 1
        else ((args[0], args[1], "1") if len(args) == 2 else tuple(args))
    )
    count = trips or (f"({b}) - ({a})" if step == "1" else f"len(range({a}, {b}, {step}))")
    if step == "1":
        text = (
            f"range(({a}) + ({count}) - 1, ({a}) - 1, -1)"
            if a != "0"
            else f"range({count} - 1, -1, -1)" if trips else f"range({b} - 1, -1, -1)"
        )
    else:
        text = f"range(({a}) + (({count}) - 1) * ({step}), ({a}) - ({step}), -({step}))"
    return ast.parse(text, mode="eval").body
