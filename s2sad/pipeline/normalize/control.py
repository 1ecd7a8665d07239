"""Control flow, kept structured: `if`, `for i in range(...)` and `while`; `return`s lifted into
assignments of the result at the end of each path (`lift`).

- Branches that assign the same variable merge into one name, assigned at the end of each branch
  (`merge`; the `If` lists the names in `merged`).
- A variable a loop changes keeps its pre-loop name as the loop-carried value: the body computes
  `s_new` and copies it back (`s = s_new`, an `end_copy`) at the end of the body and before each
  `break`; the loop lists the carried names in `header` and those first assigned in the body in
  `liveout` (pruned later by liveness.py).
- `for row in x`, `enumerate` and `zip` become loops over an index (iterables.py).
- A user name that varies with `wrt` in some iteration varies from the first
  (`mark_loop_varied`, by dependence.py).
"""

from __future__ import annotations

import ast

from ... import ir
from ...astcopy import clone, walk_nodes
from ...errors import UnsupportedSyntaxError
from ..dependence import assignment_flows, closure_flow, dependents
from ..names import names_read, names_stored
from ..restructure import always_assigns, lift_returns, restructure_jumps
from .flatten import rename_in
from .iterables import Iterables
from .sugar import Sugar


def _copy_stmt(stmt: ast.Assign) -> ast.Assign:
    """A copy of a generated assignment that still points at the same user statement."""
    new = ast.Assign([clone(t) for t in stmt.targets], clone(stmt.value))
    ir.copy_origin(new, stmt)
    ir.mark_end_copy(new, ir.is_end_copy(stmt))
    return new


def _breaks(stmt: ast.stmt) -> bool:
    """Whether a `break` inside `stmt` (outside nested loops) leaves the enclosing loop."""
    if isinstance(stmt, ast.Break):
        return True
    if isinstance(stmt, ast.If):
        return any(_breaks(s) for s in stmt.body + stmt.orelse)
    return False


_BOUND_ROLES = {0: [], 1: ["stop"], 2: ["start", "stop"], 3: ["start", "stop", "step"]}


def _span(pairs) -> ast.Call:
    """`range(len(a))`, or `range(min(len(a), len(b)))` for the pairs of a `zip`."""
    lengths = [ast.Call(ast.Name("len", ast.Load()), [s], []) for _, s in pairs]
    stop = lengths[0] if len(lengths) == 1 else ast.Call(ast.Name("min", ast.Load()), lengths, [])
    return ast.Call(ast.Name("range", ast.Load()), [stop], [])


class ControlFlow(Iterables):
    """Flattening of `if`, `for` and `while` (see the module docstring)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.maybe_undefined: set[str] = set()  # names that some path leaves unassigned
        # of those, each bound only in the body of `if`s, not in a loop -> their tests,
        # outermost first (a merge's copy of it is made under them: `guarded`)
        self.made_under: dict[str, list] = {}
        self.exit_copies: list[dict] = []  # per enclosing loop: its header map

    # ------------------------------------------------------------------ returns
    def function_body(self, body: list[ast.stmt]) -> list[ast.stmt]:
        if (
            body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            body = body[1:]  # docstring
        sugar = Sugar(self.parsed, self.resolve_callee, self.names.fresh)
        body = sugar.body(body)
        self.locals |= sugar.made
        return body

    def lift(self, body: list[ast.stmt], result: str) -> tuple[list[ast.stmt], int]:
        """Lift returns into assignments of `result` (or result0, result1, ... for tuples)."""
        returns = [
            n
            for s in body
            for n in walk_nodes(s)
            if isinstance(n, ast.Return) and not self._in_nested_def(body, n)
        ]
        if not returns or any(r.value is None for r in returns):
            node = next((r for r in returns if r.value is None), body[-1] if body else None)
            raise self.parsed.error(
                UnsupportedSyntaxError,
                f"{self.parsed.name} must return a value",
                node,
                hint="s2sad differentiates the returned value",
            )
        arities = {len(r.value.elts) if isinstance(r.value, ast.Tuple) else 0 for r in returns}
        if len(arities) > 1:
            raise self.parsed.error(
                UnsupportedSyntaxError,
                "all returns must give the same number of values",
                returns[-1],
            )
        arity = arities.pop()
        target = (
            ast.Tuple([ast.Name(f"{result}{i}", ast.Store()) for i in range(arity)], ast.Store())
            if arity
            else ast.Name(result, ast.Store())
        )
        made = []

        def fresh(base):
            made.append(self.names.fresh(base))
            return made[-1]

        lifted = lift_returns(body, target, self.parsed, fresh)
        self.locals |= set(made)
        check = f"{result}0" if arity else result
        if not always_assigns(lifted, check):
            raise self.parsed.error(
                UnsupportedSyntaxError,
                f"{self.parsed.name} does not return a value on every path",
                body[-1] if body else None,
                hint="end every branch with a `return`",
            )
        return lifted, arity

    @staticmethod
    def _in_nested_def(body, node) -> bool:
        for stmt in body:
            for inner in walk_nodes(stmt):
                if isinstance(inner, (ast.FunctionDef, ast.Lambda)) and any(
                    n is node for n in walk_nodes(inner)
                ):
                    return True
        return False

    # ------------------------------------------------------------------ branches
    def condition(self, test: ast.expr) -> ast.expr:
        if isinstance(test, (ast.Name, ast.Constant)):
            return self.rename(test)
        name = self.names.fresh("cond")
        self.append(name, self.rename(test), varied=False)
        return ast.Name(name, ast.Load())

    def if_(self, node: ast.If) -> None:
        test = self.condition(node.test)
        before = dict(self.env)
        memory_before = self.memory.before_branches()
        body: list[ast.stmt] = []
        breaks = bool(node.body) and isinstance(node.body[-1], ast.Break)
        if breaks:  # the statements before the break, then the loop's exit copies
            self.block_into(body, node.body[:-1])
            body += self.exit_copies_for_break()
            env_body, self.env = None, dict(before)
        else:
            self.block_into(body, node.body)
            env_body, self.env = self.env, dict(before)
        memory_body = self.memory.between_branches(memory_before)
        orelse: list[ast.stmt] = []
        self.block_into(orelse, node.orelse)
        self.memory.after_branches(memory_body)  # either path's sharing may hold
        env_else = self.env
        stmt = ast.If(test, body, orelse)
        ir.set_merged(stmt, [])
        if env_body is not None:
            self.env = self.merge(
                before, (env_body, body), (env_else, orelse), stmt=stmt, test=test
            )
        self.put(stmt)

    def merge(self, before, *branches, stmt, test=None) -> dict:
        """One name per variable after the `if`, assigned at the end of each branch: the
        branch's own last assignment is renamed to it, or a copy is appended."""
        env = dict(before)
        variables = [v for e, _ in branches for v in e]
        for var in dict.fromkeys(variables):
            names = [e.get(var) for e, _ in branches]
            if len(set(names)) == 1:
                env[var] = names[0]
                continue
            if any(n is None for n in names):  # assigned on one path only, as Python allows
                env[var] = next(n for n in names if n is not None)
                if env[var] not in before.values():  # (not a value from before the `if`)
                    self.maybe_undefined.add(env[var])
                    if test is not None and names[0] is not None:
                        self.made_under[env[var]] = [test] + self.made_under.get(env[var], [])
                continue
            # Every value keeps a name of its own, even where the old value may not exist (a
            # loop's last value, a name one branch assigns): the adjoint reads old values and
            # starts each adjoint from zero where its value is made, so no name may be assigned
            # twice. A copy that nothing reads is dropped (Python reads nothing there either,
            # so it must not fail where the old value may not exist).
            merged = self.names.fresh(f"{var}_1")
            varied = any(n in self.varied for n in names)
            for (_, stmts), name in zip(branches, names):
                if (
                    name != before.get(var)
                    and name not in self.parsed.params
                    and (name in self.varied or not varied)
                ):
                    rename_in(stmts, name, merged)
                else:
                    # (a constant branch value stays constant in the statements that made and
                    # read it, which were split into single operations only where they vary)
                    copy_stmt = ast.Assign(
                        [ast.Name(merged, ast.Store())], ast.Name(name, ast.Load())
                    )
                    ir.set_origin(copy_stmt, self.user_stmt, self.parsed)
                    ir.mark_merge_copy(copy_stmt)
                    stmts.append(self.guarded(copy_stmt, name))
            if varied:
                self.varied.add(merged)
            aliases = self.memory.aliases
            shared = [aliases[n] for n in names if n in aliases]
            if shared:  # a path on which the value may be another array's memory
                aliases[merged] = shared[0]
            if any(n in self.maybe_undefined for n in names):
                self.maybe_undefined.add(merged)
            ir.merged(stmt).append(merged)
            env[var] = merged
        return env

    def guarded(self, copy: ast.Assign, name: str) -> ast.stmt:
        """A merge's copy of `name` made only where `name` exists: under the `if`s that bound
        it (`if c: y = ...`, then `if c: y = ...` again: where c is false, Python left y
        unbound and `else: y_1 = y` would read no value). The merged name is then unbound
        where Python's is. A name a loop binds has no such test (README: a gap); nor has a
        copy in a loop, whose old value may be a previous iteration's."""
        if name not in self.maybe_undefined or self.headers:
            return copy
        for test in reversed(self.made_under.get(name, [])):
            copy = ast.If(clone(test), [copy], [])
            ir.set_origin(copy, self.user_stmt, self.parsed)
        return copy

    def loop_body(self, node, body: list[ast.stmt], setup) -> tuple[list[ast.stmt], dict, list]:
        """Normalize a loop body; returns (statements, header map, live-out user names)."""
        before = dict(self.env)
        modified = names_stored(body)
        header = {v: before[v] for v in modified if v in before}
        self.headers.append(set(header))
        self.exit_copies.append(header)
        out: list[ast.stmt] = []
        saved, self.out = self.out, out
        setup()  # the loop's items first: whether they vary decides what varies in the body
        self.out = saved
        self.mark_loop_varied(body)
        self.block_into(out, body)
        self.sink(out, self.copies_back(header))
        self.headers.pop()
        self.exit_copies.pop()
        after = dict(before)
        for var in modified:
            if var not in header and var in self.env:
                after[var] = self.env[var]
        liveout = [after[v] for v in modified if v not in header and v in after]
        self.maybe_undefined |= set(liveout)  # the loop may run no iteration
        self.env = after
        return out, header, liveout

    def sink(self, block: list[ast.stmt], copies: list[ast.stmt]) -> None:
        """Put the end-of-iteration copies at the end of every path that does not `break`."""
        last = block[-1] if block else None
        if isinstance(last, ast.If) and _breaks(last):
            for branch in (last.body, last.orelse):
                if not (branch and isinstance(branch[-1], ast.Break)):
                    self.sink(branch, [_copy_stmt(c) for c in copies])
            return
        block.extend(copies)

    def copies_back(self, header: dict) -> list[ast.stmt]:
        copies = []
        for var, name in header.items():
            current = self.env.get(var, name)
            if current != name:
                stmt = ast.Assign([ast.Name(name, ast.Store())], ast.Name(current, ast.Load()))
                ir.set_origin(stmt, self.user_stmt, self.parsed)
                ir.mark_end_copy(stmt)  # the loop-carried value for the next iteration
                copies.append(stmt)
                if current in self.varied:
                    self.varied.add(name)
        return copies

    def exit_copies_for_break(self) -> list[ast.stmt]:
        if not self.exit_copies:
            raise self.unsupported(self.user_stmt, "`break` outside a loop")
        exit_ = ast.Break()
        ir.set_origin(exit_, self.user_stmt, self.parsed)
        return self.copies_back(self.exit_copies[-1]) + [exit_]

    def mark_loop_varied(self, body: list[ast.stmt]) -> None:
        """Variables that become varied in some iteration are varied from the first."""
        resolve = self.resolver.resolve
        flows = assignment_flows(body, self.locals, lambda call: resolve(call.func) is enumerate)
        flows += [closure_flow(name, fn) for name, fn in self.local_funcs.items()]
        sources = {n for reads, _ in flows for n in reads if self.env.get(n, n) in self.varied}
        self.loop_varied |= dependents(sources | self.loop_varied, flows)

    def for_(self, node: ast.For) -> None:
        if node.orelse:
            raise self.unsupported(node, "`for ... else`")
        self.memory.loop_writes(node.body, self.env)
        body, breaks = restructure_jumps(node.body, self.parsed)
        index, range_call, bind_items = self.iteration(node)
        trips = None
        if breaks:
            trips = self.names.fresh("trips")
            self.append(trips, ast.Constant(0), varied=False)

        def setup():
            if trips is not None:
                counter = self.append(
                    trips,
                    ast.BinOp(ast.Name(trips, ast.Load()), ast.Add(), ast.Constant(1)),
                    varied=False,
                )
                ir.mark_counter(counter)
            bind_items()

        stmts, header, liveout = self.loop_body(node, body, setup)
        loop = ast.For(ast.Name(index, ast.Store()), range_call, stmts, [])
        carried = list(header.values()) + ([trips] if trips is not None else [])
        ir.set_for_loop(loop, carried, liveout, index, trips)
        if _is_prange(node.iter, self.resolver, self.locals):
            ir.mark_asserted_parallel(loop)
        self.put(loop)

    def iteration(self, node: ast.For):
        """The index name, the `range(...)` call, and a callback binding the loop's items."""
        it, target = node.iter, node.target
        func = it.func if isinstance(it, ast.Call) else None
        callee = (
            self.resolver.resolve(func)
            if func is not None and not (isinstance(func, ast.Name) and func.id in self.locals)
            else None
        )
        inner = it.args[0] if callee is reversed and len(it.args) == 1 else None
        trimmed = inner.slice if isinstance(inner, ast.Subscript) else None  # range(...)[:n]
        inner = inner.value if trimmed is not None else inner
        backwards = isinstance(inner, ast.Call) and self.resolver.resolve(inner.func) is range
        if callee is range or backwards or _is_prange(it, self.resolver, self.locals):
            if not isinstance(target, ast.Name):
                raise self.unsupported(target, "this loop target")
            bounds = inner.args if backwards else it.args
            roles = _BOUND_ROLES[len(bounds)] if len(bounds) <= 3 else ["range"] * len(bounds)
            rebound = set(names_stored(node.body)) | {target.id}
            atoms = [self.entry_bound(a, role, rebound) for a, role in zip(bounds, roles)]
            if trimmed is not None:
                trimmed = self.index(trimmed, "range")
                if isinstance(trimmed, ast.Slice):
                    trimmed.lower, trimmed.upper, trimmed.step = [
                        None if p is None else self.entry_bound(p, "range", rebound, renamed=True)
                        for p in (trimmed.lower, trimmed.upper, trimmed.step)
                    ]
            index = self.rebind(target.id)
            span = ast.Call(ast.Name("range", ast.Load()), atoms, [])
            if trimmed is not None:
                span = ast.Subscript(span, trimmed, ast.Load())
            if backwards:  # as in s2sad's own adjoint loops
                span = ast.Call(ast.Name("reversed", ast.Load()), [span], [])
            return index, span, lambda: None
        if (
            callee is enumerate
            and isinstance(target, ast.Tuple)
            and len(target.elts) == 2
            and isinstance(target.elts[0], ast.Name)
            and 1 <= len(it.args) + len(it.keywords) <= 2
            and all(k.arg == "start" for k in it.keywords)
        ):
            counter, item = target.elts
            first = (it.args[1:] + [k.value for k in it.keywords] + [None])[0]
            stored = set(names_stored(node.body))
            if first is not None and names_read([first]) & stored:  # else read where it is
                first = self.entry_bound(first, "start", stored)
            pairs = self.zipped(it.args[0], item, node.body) or [
                (item, self.sequence_of(it.args[0], node.body))
            ]
            if first is None:  # the counter is the loop's index
                index = self.rebind(counter.id)
                at = ast.Name(counter.id, ast.Load())
                return index, _span(pairs), lambda: self.bind_items(pairs, at)
            index = self.synthesize(f"{counter.id}_index")
            at = ast.Name(index, ast.Load())
            offset = ast.BinOp(at, ast.Add(), first)

            def bind_counted():
                self.assign_target(counter, offset)
                self.bind_items(pairs, at)

            return index, _span(pairs), bind_counted
        pairs = self.zipped(it, target, node.body)
        if pairs:
            index = self.synthesize(
                f"{pairs[0][0].id if isinstance(pairs[0][0], ast.Name) else 'item'}_index"
            )
            at = ast.Name(index, ast.Load())
            return index, _span(pairs), lambda: self.bind_items(pairs, at)
        if isinstance(target, ast.Name):
            seq = self.sequence_of(it, node.body)
            index = self.synthesize(f"{target.id}_index")
            stop = ast.Call(ast.Name("len", ast.Load()), [seq], [])
            return (
                index,
                ast.Call(ast.Name("range", ast.Load()), [stop], []),
                lambda: self.assign_target(
                    target, ast.Subscript(seq, ast.Name(index, ast.Load()), ast.Load())
                ),
            )
        raise self.unsupported(
            node, "this kind of `for` loop (use range, enumerate, zip or " "an array)"
        )

    def while_(self, node: ast.While) -> None:
        if node.orelse:
            raise self.unsupported(node, "`while ... else`")
        self.memory.loop_writes(node.body, self.env)
        body, _ = restructure_jumps(node.body, self.parsed)
        iters = self.names.fresh("iters")
        self.append(iters, ast.Constant(0), varied=False)
        self.mark_loop_varied(body)
        test = self.rename(node.test)  # reads the loop-carried names, as the body's end sets them
        count = ast.BinOp(ast.Name(iters, ast.Load()), ast.Add(), ast.Constant(1))

        def setup():
            ir.mark_counter(self.append(iters, count, varied=False))

        stmts, header, liveout = self.loop_body(node, body, setup)
        loop = ast.While(test, stmts, [])
        ir.set_while_loop(loop, list(header.values()) + [iters], liveout, iters)
        self.put(loop)


def _is_prange(it: ast.expr, resolver, local_names) -> bool:
    """`numba.prange(...)` (or `prange` imported from numba): a `range` whose iterations the
    user says are independent (pipeline/independence.py checks it; without threads, a range)."""
    if not (isinstance(it, ast.Call) and not it.keywords and 1 <= len(it.args) <= 3):
        return False
    if isinstance(it.func, ast.Name) and it.func.id in local_names:
        return False
    callee = resolver.resolve(it.func)
    module = getattr(callee, "__module__", "") or ""
    return getattr(callee, "__name__", "") == "prange" and module.startswith("numba")
