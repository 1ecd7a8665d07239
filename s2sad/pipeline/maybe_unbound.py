"""Names generated Python code may read where no path bound them, bound first to `unbound(name)`.

unbound_reads.py lets a user's read of a name some paths leave unbound through where a later
`if` guards it (`if c: y = ...`, then `if c: z = z * y`), as Python runs such code. The code
s2sad generates around such a value reads it on more paths than the user's does: a loop's tape
keeps it at each iteration (`y_tape.append(y)`), a merge copies it where the branch did not
bind it (`else: y_1 = y`), and the adjoint makes its zero (`dy = zeros_like(y)`) before the
loop or branch that binds it. In Python each raised UnboundLocalError where the user's code
ran; compiled by Numba, each reads a value no line computed, which nothing then reads. So in
Python mode each function binds, at its top, every name one of its reads may find unbound to
`unbound("y")` (rules/unbound.py): a tape keeps and a merge copies it as it is, its zero is
0.0, and any other use raises Python's UnboundLocalError, as the user's code does where its
later test does not follow the binding.

emit.py asks for those lines, of each function's statements, in Python mode.
"""

from __future__ import annotations

import ast

from .unbound_reads import _runs, comprehension_targets

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_TRY_STAR = (ast.TryStar,) if hasattr(ast, "TryStar") else ()
_BRANCHING = (ast.If, ast.For, ast.While, ast.With, ast.Try, ast.Match) + _TRY_STAR
_NOTE = (
    "# bound on some paths only: read by this code where not bound, they raise UnboundLocalError"
)


def unbound_lines(stmts: list, bound, indent: str, after=()) -> list[str]:
    """The lines binding to `unbound("y")` each name that `stmts`, run from the names `bound`,
    then the expressions `after`, may read where no path bound it (see the module's
    docstring); none where there is no such name."""
    stmts = [s for s in stmts if isinstance(s, ast.AST)]
    if not any(isinstance(s, _BRANCHING) for s in stmts):  # (straight code reads what it bound)
        return []
    flow = _Flow()
    state = flow.block(stmts, _State(set(bound), {}))
    for node in after if state is not None else ():
        if isinstance(node, ast.AST):
            flow.simple(node, state)
    names = [n for n in flow.found if n in flow.stored and n not in flow.declared]
    if not names:
        return []
    return [indent + _NOTE] + [f'{indent}{n} = unbound("{n}")' for n in names]


class _Flow:
    """Which names are bound on every path to each statement of one function: a state is those
    names and what each test known by name implies (`(cond, True)` -> the names `if cond:`
    bound), or None where no path reaches. A read under `if cond:` of a name an earlier `if
    cond:` bound is taken as bound, as unbound_reads.py takes the user's: the adjoint's branches
    follow the primal's tests (`cond` again, or popped from its tape), so a value the branch
    read was bound there; so is a read in a loop over the trips of a loop that bound it (the
    adjoint's `for i in reversed(range(n))` of the primal's `for i in range(n)`)."""

    def __init__(self):
        self.found: dict[str, None] = {}  # names read where not bound (ordered)
        self.stored: set[str] = set()  # names the function binds (the rest: globals)
        self.declared: set[str] = set()  # `global` and `nonlocal` names
        self.breaks: list[list] = []  # per enclosing loop, the states at its `break`s
        self.continues: list[list] = []  # and at its `continue`s

    def block(self, stmts, state):
        for stmt in stmts:
            if state is None:
                return None
            state = self.statement(stmt, state)
        return state

    def statement(self, stmt, state):
        """The state after `stmt` (`state` itself, updated, for a simple statement)."""
        if isinstance(stmt, ast.If):
            self.simple(stmt.test, state)
            tests = _tests(stmt.test)
            # (an `else` holds `not cond`; that of `a and b` holds no one test)
            negated = (
                [(t, not value, names) for t, value, names in tests] if len(tests) == 1 else []
            )
            paths = []
            for block, holds in ((stmt.body, tests), (stmt.orelse, negated)):
                after = self.block(block, state.assuming(holds))
                if after is not None:
                    for key in holds:
                        after.imply(key, after.bound - state.bound)
                    paths.append(after)
            return _State.joined(paths)
        if isinstance(stmt, (ast.For, ast.While)):
            return self.loop(stmt, state)
        if isinstance(stmt, (ast.Break, ast.Continue)):
            exits = self.breaks if isinstance(stmt, ast.Break) else self.continues
            if exits:
                exits[-1].append(state)
            return None
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            # a closure reads the enclosing function's names when called: those bound by then
            self.simple(stmt, state)
            state.bound.add(stmt.name)
            return state
        if isinstance(stmt, ast.With):
            for item in stmt.items:
                self.simple(item, state)
            return self.block(stmt.body, state)
        if isinstance(stmt, (ast.Global, ast.Nonlocal)):
            self.declared.update(stmt.names)
            return state
        if isinstance(stmt, (ast.Try, ast.Match) + _TRY_STAR):  # (generated code has none)
            stored = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}
            self.stored |= stored
            state.bound |= stored
            return state
        self.simple(stmt, state)
        return None if isinstance(stmt, (ast.Return, ast.Raise)) else state

    def loop(self, stmt, state):
        self.simple(stmt.iter if isinstance(stmt, ast.For) else stmt.test, state)
        runs = _loop_keys(stmt)  # (the adjoint's loop over the same trips reads its values)
        inside = state.assuming(runs)
        if isinstance(stmt, ast.For):
            self.simple(stmt.target, inside)
        self.breaks.append([])
        self.continues.append([])
        body = self.block(stmt.body, inside)
        breaks, continues = self.breaks.pop(), self.continues.pop()
        if body is not None:  # (what every iteration binds: `continue`s end some early)
            every = set.intersection(body.bound, *[c.bound for c in continues + breaks])
            for key in runs:
                body.imply(key, every - state.bound)
        if isinstance(stmt, ast.While) and _runs(stmt):  # (`while True`: left by a break)
            return _State.joined(breaks)
        after = state.assuming([])
        if _runs(stmt) and body is not None and not breaks:
            after.bound = body.bound
        for left in [body] + breaks if body is not None else breaks:
            for key, names in left.implied.items():  # (each iteration's bindings stay)
                after.imply(key, names)
        return self.block(stmt.orelse, after)

    def simple(self, node: ast.AST, state) -> None:
        """Follow `node`, a simple statement or an expression (or a nested function, whose
        reads of this scope's names count here): record its reads of names `state` has not
        bound, then bind what it stores. Storing a test's name drops what it implied, unless
        the value is popped from its tape (the adjoint's `cond = cond_tape.pop()`)."""
        reads, stored, inner = [], set(), set()  # (inner: comprehensions' and functions' own)
        todo = [node]
        while todo:
            n = todo.pop()
            if isinstance(n, ast.Name):
                if isinstance(n.ctx, ast.Store):
                    stored.add(n.id)
                else:
                    reads.append(n.id)
                continue
            if isinstance(n, _COMPREHENSIONS):
                inner |= comprehension_targets(n)
            elif isinstance(n, _SCOPES) and (n is not node or isinstance(n, ast.FunctionDef)):
                inner |= {a.arg for a in ast.walk(n) if isinstance(a, ast.arg)}
                inner |= {
                    m.id
                    for m in ast.walk(n)
                    if isinstance(m, ast.Name) and isinstance(m.ctx, ast.Store)
                }
            elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
                reads.append(n.target.id)  # (`y += x` reads y)
            todo.extend(ast.iter_child_nodes(n))
        for name in reads:
            if name not in state.bound and name not in inner:
                self.found[name] = None
        stored -= inner
        self.stored |= stored
        state.bound |= stored
        popped = isinstance(node, ast.Assign) and _is_pop(node.value)  # (a tape's test)
        if stored and not popped:
            state.implied = {k: v for k, v in state.implied.items() if not k[2] & stored}


class _State:
    def __init__(self, bound: set[str], implied: dict):
        self.bound, self.implied = bound, implied

    def assuming(self, holds) -> "_State":
        """A copy, with the names bound that each key of `holds` implies."""
        known = set().union(*[self.implied.get(h, ()) for h in holds])
        return _State(self.bound | known, dict(self.implied))

    def imply(self, key, names) -> None:
        if names:
            self.implied[key] = self.implied.get(key, frozenset()) | frozenset(names)

    @staticmethod
    def joined(paths):
        """The state after paths meet: the names all bound, and all they imply."""
        if not paths:
            return None
        joined = _State(set.intersection(*[p.bound for p in paths]), {})
        for p in paths:
            for key, names in p.implied.items():
                joined.imply(key, names)
        return joined


def _tests(test: ast.expr) -> list[tuple]:
    """The keys (text, value, names it reads) that hold inside `if test:`: `cond`, `not cond`,
    `a and b`."""
    if isinstance(test, ast.Name):
        return [(test.id, True, frozenset([test.id]))]
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return [(text, not value, names) for text, value, names in _tests(test.operand)][:1]
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return [key for v in test.values for key in _tests(v)]
    return []


def _loop_keys(loop: ast.For | ast.While) -> list[tuple]:
    """The keys that hold inside `loop` and inside another over the same trips: a `for` over
    `range(...)` (`reversed(range(...))` alike), a `while` counting its trips (`iters = iters +
    1`, its adjoint's `range(iters)`)."""
    if isinstance(loop, ast.For):
        trips = loop.iter
        if _call_of(trips, "reversed") and len(trips.args) == 1:
            trips = trips.args[0]
        return [_trips_key(trips)] if _call_of(trips, "range") else []
    counters = [
        s.targets[0].id
        for s in loop.body
        if isinstance(s, ast.Assign)
        and isinstance(s.targets[0], ast.Name)
        and ast.dump(s.value) == ast.dump(ast.parse(f"{s.targets[0].id} + 1", mode="eval").body)
    ]
    return [_trips_key(ast.parse(f"range({c})", mode="eval").body) for c in counters]


def _trips_key(trips: ast.expr) -> tuple:
    names = frozenset(n.id for n in ast.walk(trips) if isinstance(n, ast.Name)) - {"range"}
    return (ast.dump(trips), True, names)


def _call_of(node: ast.expr, name: str) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name


def _is_pop(value: ast.expr) -> bool:
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr == "pop"
        and not value.args
    )
