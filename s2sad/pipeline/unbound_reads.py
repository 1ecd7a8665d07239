"""Reads of a name that an `if` binds on some paths only (`if c: y = ...`, then `np.sum(y)`),
or that only the body of a loop which may run no iteration binds (`for i in range(n): y = ...`):
where nothing that binds it ran, Python raises UnboundLocalError, and Numba reads a value no
line computed (zero, or garbage) instead. Python mode and jitted code must agree, so such a
read is refused before normalizing, in both.

A read inside a later `if` or a branch of a conditional expression is taken to follow the same
condition (`if c: z = y`, `np.sum(y) if c else 0.0`) and is let through, as is a read in a loop
of a name the loop's body binds on any path (the value of a previous iteration: `if i == 0 or
...: y = ...`, then `s = s + y`): both are common and right. Only `while True` and a `for` over
a non-empty `range` of int literals or a non-empty list or tuple display certainly run their
body (`_runs`), and only `return` and `raise` end a path.
So this refuses what certainly depends on one `if`'s branch or a loop's trip count and misses
the rest (an unrelated later condition, a loop whose first iteration does not bind the name).
A previous iteration's value of a name the body binds twice or more, and nothing before the
loop, is refused wherever it may be read (`refuse_stale`): normalization carries a loop's
values to the next iteration only from a binding before the loop.
"""

from __future__ import annotations

import ast

from ..errors import UnsupportedSyntaxError

_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def refuse_unbound_reads(parsed) -> None:
    """Raise UnsupportedSyntaxError at the first read of a name some `if` binds on some paths
    only, outside any later `if`; see the module's docstring."""
    declared = {
        n
        for node in ast.walk(parsed.tree)
        if isinstance(node, (ast.Global, ast.Nonlocal))
        for n in node.names
    }
    args = parsed.tree.args
    params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    params |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    _Paths(parsed, declared).block(parsed.tree.body, params, {}, frozenset())


class _Paths:
    def __init__(self, parsed, declared: set[str]):
        self.parsed, self.declared = parsed, declared

    def block(self, stmts, bound: set[str], maybe: dict, assumed: frozenset):
        """The names bound after `stmts` on every path (None where every path returns or
        raises) and those bound on some path (name -> the `if` that may skip it). `assumed`:
        names taken as bound, inside a branch of a later `if`."""
        bound, maybe = set(bound), dict(maybe)
        for stmt in stmts:
            if isinstance(stmt, ast.If):
                self.reads(stmt.test, bound, maybe, assumed)
                inside = assumed | set(maybe)
                after = [self.block(b, bound, maybe, inside) for b in (stmt.body, stmt.orelse)]
                for _, some in after:
                    maybe.update(some)
                paths = [b for b, _ in after if b is not None]
                if not paths:
                    return None, maybe
                every = set.intersection(*paths)
                for name in set.union(*paths) - every:
                    maybe.setdefault(name, stmt)
                bound = every
            elif isinstance(stmt, (ast.For, ast.While)):
                self.reads(
                    stmt.iter if isinstance(stmt, ast.For) else stmt.test, bound, maybe, assumed
                )
                inside = bound | (_stored(stmt.target) if isinstance(stmt, ast.For) else set())
                carried = set().union(*map(_stored, stmt.body))  # a previous iteration's
                self.refuse_stale(stmt.body, inside)
                body, some = self.block(stmt.body, inside | carried, maybe, assumed)
                maybe.update(some)
                after = inside | (body or set())
                if not _runs(stmt):  # what only its body binds: unbound where it runs none
                    for name in after - bound:
                        maybe.setdefault(name, stmt)
                    after = bound
                bound, some = self.block(stmt.orelse, after, maybe, assumed)
                maybe.update(some)
                if bound is None:
                    return None, maybe
            elif isinstance(stmt, (ast.Return, ast.Raise)):
                self.reads(stmt, bound, maybe, assumed)
                return None, maybe
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound.add(stmt.name)
            elif isinstance(stmt, ast.With):
                for item in stmt.items:
                    self.reads(item.context_expr, bound, maybe, assumed)
                    bound |= _stored(item.optional_vars) if item.optional_vars else set()
                bound, some = self.block(stmt.body, bound, maybe, assumed)
                maybe.update(some)
                if bound is None:
                    return None, maybe
            elif isinstance(stmt, (ast.Try, ast.Match) + _TRY_STAR):
                bound |= _stored(stmt)  # (not followed: every name it binds taken as bound)
            else:
                self.reads(stmt, bound, maybe, assumed)
                bound |= _stored(stmt)
        return bound, maybe

    def refuse_stale(self, body: list[ast.stmt], before: set[str]) -> None:
        """A name a loop's body binds by two statements or more, unbound before the loop, read
        where this iteration may not have bound it yet (`if i == 0: y = x`, then `y = y * x`):
        Python reads the previous iteration's last value, which s2sad's code does not carry
        to the next iteration (a carried value starts from one bound before the loop), so both
        modes computed wrong values and gradients. Refused at the read."""
        counts: dict[str, int] = {}
        inner = set()  # (a comprehension's own targets)
        for stmt in body:
            for n in _own_walk(stmt):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                    counts[n.id] = counts.get(n.id, 0) + 1
                elif isinstance(n, _COMPREHENSIONS):
                    inner |= comprehension_targets(n)
        names = {n for n, c in counts.items() if c > 1} - before - self.declared - inner
        read = _stale_read(body, set(before), names) if names else None
        if read is not None:
            raise self.parsed.error(
                UnsupportedSyntaxError,
                f"`{read.id}` is read here where this iteration of the loop may not have bound "
                "it yet, so it holds the previous iteration's value, and the loop binds it "
                "more than once: s2sad carries a loop's values from one iteration to the next "
                "only where they are bound before the loop",
                read,
                hint=f"bind `{read.id}` before the loop",
            )

    def reads(self, node: ast.AST, bound: set[str], maybe: dict, assumed: frozenset) -> None:
        inner = {
            n.id
            for c in ast.walk(node)
            if isinstance(c, _COMPREHENSIONS)
            for g in c.generators
            for n in ast.walk(g.target)
            if isinstance(n, ast.Name)
        }
        # the branches of a conditional expression follow its test, as a later `if`'s do
        branches = {
            id(n)
            for c in _own_walk(node)
            if isinstance(c, ast.IfExp)
            for n in ast.walk(ast.Tuple([c.body, c.orelse], ast.Load()))
        }
        for n in _own_walk(node):
            if (
                isinstance(n, ast.Name)
                and isinstance(n.ctx, ast.Load)
                and n.id in maybe
                and n.id not in bound | assumed | inner | self.declared
                and id(n) not in branches
            ):
                binder = maybe[n.id]
                where = self.parsed.file_line(binder)
                if isinstance(binder, ast.If):
                    what = f"the `if` at line {where} binds it on some paths only"
                    hint = f"bind `{n.id}` before that `if`, or in each of its branches"
                else:
                    loop = "for" if isinstance(binder, ast.For) else "while"
                    what = (
                        f"only the body of the `{loop}` loop at line {where} binds it, and that "
                        "loop may run no iteration"
                    )
                    hint = f"bind `{n.id}` before that loop"
                raise self.parsed.error(
                    UnsupportedSyntaxError,
                    f"`{n.id}` is read here, but {what}: where it is unbound, Python raises "
                    "UnboundLocalError (and jitted code would read a value no line computed)",
                    n,
                    hint=hint,
                )


_TRY_STAR = (ast.TryStar,) if hasattr(ast, "TryStar") else ()


def _stale_read(stmts: list[ast.stmt], bound: set[str], names: set[str]) -> ast.Name | None:
    """The first read of one of `names` in `stmts` where not every path so far bound it, else
    None; `bound` is updated to the names bound on every path (a loop's body: none). A read
    under an `if` of the same test, as written, as an earlier `if` of these statements that
    bound the name in its body is this iteration's (`if c[i] > 0: y = ...`, then `if c[i] >
    0: y = y * x`), which s2sad's code reads right."""
    under: dict[str, set[str]] = {}  # an `if`'s test, as written -> what its body binds
    for stmt in stmts:
        heads = [stmt.test] if isinstance(stmt, (ast.If, ast.While)) else []
        heads += [stmt.iter] if isinstance(stmt, ast.For) else []
        for node in heads if heads or isinstance(stmt, (ast.If, ast.For, ast.While)) else [stmt]:
            for n in _own_walk(node):
                update = isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name)
                n = n.target if update else n  # (`y += x` reads y)
                if isinstance(n, ast.Name) and (update or isinstance(n.ctx, ast.Load)):
                    if n.id in names and n.id not in bound:
                        return n
        if isinstance(stmt, ast.If):
            test = ast.dump(stmt.test)
            paths = [bound | under.get(test, set()), set(bound)]
            for block, path in zip((stmt.body, stmt.orelse), paths):
                found = _stale_read(block, path, names)
                if found is not None:
                    return found
            under[test] = under.get(test, set()) | paths[0]
            bound |= paths[0] & paths[1]
        elif isinstance(stmt, (ast.For, ast.While)):
            inner = bound | (_stored(stmt.target) if isinstance(stmt, ast.For) else set())
            found = _stale_read(stmt.body, inner, names)
            if found is not None:
                return found
        else:
            bound |= _stored(stmt)
    return None


def _runs(loop: ast.For | ast.While) -> bool:
    """Whether `loop` certainly runs its body once: `while True`, or a `for` over `range` of
    int literals that is not empty or over a list or tuple display with an element."""
    if isinstance(loop, ast.While):
        return isinstance(loop.test, ast.Constant) and bool(loop.test.value)
    it = loop.iter
    if isinstance(it, (ast.List, ast.Tuple)):
        return any(not isinstance(e, ast.Starred) for e in it.elts)
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"):
        return False
    bounds = [b.value for b in it.args if isinstance(b, ast.Constant) and type(b.value) is int]
    if it.keywords or not 0 < len(bounds) == len(it.args) <= 3 or (bounds[2:] or [1])[0] == 0:
        return False  # (a step of 0: Python raises ValueError)
    return len(range(*bounds)) > 0


def comprehension_targets(comp: ast.AST) -> set[str]:
    """The names a comprehension's `for` clauses bind, its own."""
    return {t.id for g in comp.generators for t in ast.walk(g.target) if isinstance(t, ast.Name)}


def _own_walk(node: ast.AST):
    """The nodes of `node`, not of the lambdas and functions in it (their reads come later)."""
    todo = [node]
    while todo:
        n = todo.pop()
        yield n
        if not isinstance(n, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef)):
            todo.extend(ast.iter_child_nodes(n))


def _stored(node: ast.AST) -> set[str]:
    """The names `node` binds in the function's scope (not a comprehension's own targets)."""
    names = set()
    for n in _own_walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            names.add(n.id)
    for c in _own_walk(node):
        if isinstance(c, _COMPREHENSIONS):
            for g in c.generators:
                names -= {t.id for t in ast.walk(g.target) if isinstance(t, ast.Name)}
    return names
