"""Name-set walkers the stages share: the names a block assigns, reads or mentions, those it may
read before assigning them, how often each is assigned, its simple statements in order, and the
functions a piece of source defines.

They consume syntax trees (statement lists, in which the reverse pass's tape markers, not being
`ast` nodes, are skipped) or source text, and produce sets, counts and lists of names.
"""

from __future__ import annotations

import ast

from ..astcopy import walk_nodes


def fresh_in(taken: set[str], base: str) -> str:
    """`base`, else `base2`, `base3`, ...: the first not in `taken`, which then holds it."""
    candidate, k = base, 2
    while candidate in taken:
        candidate, k = f"{base}{k}", k + 1
    taken.add(candidate)
    return candidate


def assigned(stmts: list[ast.stmt]) -> set[str]:
    """Names a block of normalized code assigns (at any depth): `=` targets and loop indices,
    the only bindings left after normalization (`names_stored` reads the user's code)."""
    names = set()
    for stmt in stmts:
        for node in walk_nodes(stmt):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        names.add(t.id)
                    elif isinstance(t, ast.Tuple):
                        names |= {e.id for e in t.elts if isinstance(e, ast.Name)}
            elif isinstance(node, ast.For):
                names.add(node.target.id)
    return names


def assign_counts(stmts: list[ast.stmt]) -> dict[str, int]:
    """How many statements assign each name (loop targets included)."""
    counts: dict[str, int] = {}
    for stmt in stmts:
        for node in walk_nodes(stmt):
            names = []
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    names += (
                        [t.id]
                        if isinstance(t, ast.Name)
                        else [e.id for e in getattr(t, "elts", []) if isinstance(e, ast.Name)]
                    )
            elif isinstance(node, ast.For):
                names.append(node.target.id)
            for n in names:
                counts[n] = counts.get(n, 0) + 1
    return counts


def certainly_assigned(stmts: list[ast.stmt]) -> set[str]:
    """The names `stmts` assign on every path through them (not those only a loop's body or
    one branch assigns: a loop may run no iteration)."""
    out: set[str] = set()
    for stmt in stmts:
        if isinstance(stmt, ast.Assign):
            out |= {n.id for t in stmt.targets for n in ast.walk(t) if _stored(n)}
        elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)) and isinstance(stmt.target, ast.Name):
            out.add(stmt.target.id)
        elif isinstance(stmt, ast.If):
            out |= certainly_assigned(stmt.body) & certainly_assigned(stmt.orelse)
    return out


def read_before_assigned(
    stmts: list[ast.stmt], bound: set[str], out: set[str], reads=None, breaks=None
) -> set[str] | None:
    """Adds to `out` the names `stmts` may read before assigning them, given those in `bound` are
    assigned; returns the names surely assigned where the block ends (None where every path
    leaves it by `break`). `reads(node)`: the names a statement or expression counts as reading
    (default `names_read`; a buffer's hoisting leaves out those read for their shape alone).
    `breaks`, a list, gets (the `break`, the names surely assigned there) for each one leaving
    the loop around the block, which the caller follows to where it goes."""
    reads = reads or (lambda node: names_read([node]))
    bound = set(bound)
    for stmt in stmts:
        if isinstance(stmt, ast.Break):
            if breaks is not None:
                breaks.append((stmt, bound))
            return None
        if isinstance(stmt, ast.If):
            out |= reads(stmt.test) - bound
            ends = [
                read_before_assigned(b, bound, out, reads, breaks) for b in (stmt.body, stmt.orelse)
            ]
            ends = [e for e in ends if e is not None]
            if not ends:
                return None
            bound = set.intersection(*ends)
        elif isinstance(stmt, (ast.For, ast.While)):
            head = stmt.iter if isinstance(stmt, ast.For) else stmt.test
            out |= reads(head) - bound
            target = (
                {n.id for n in ast.walk(stmt.target) if _stored(n)}
                if isinstance(stmt, ast.For)
                else set()
            )
            # it may run no iteration: assigns nothing for sure (its breaks stop at its end)
            read_before_assigned(stmt.body, bound | target, out, reads)
            read_before_assigned(stmt.orelse, bound, out, reads, breaks)
        else:
            out |= reads(stmt) - bound
            bound |= certainly_assigned([stmt])
    return bound


def _stored(node) -> bool:
    return isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)


def simple_statements(stmts: list[ast.stmt]):
    """The assignments, expression statements and asserts of a block, at any depth, in order."""
    for stmt in stmts:
        if isinstance(stmt, (ast.If, ast.For, ast.While)):
            yield from simple_statements(stmt.body)
            yield from simple_statements(stmt.orelse)
        elif isinstance(stmt, (ast.Assign, ast.Expr, ast.Assert)):
            yield stmt


def statements_in_order(stmts):
    """The simple statements of `stmts`, at any depth, in program order."""
    for stmt in stmts:
        if isinstance(stmt, (ast.If, ast.For, ast.While)):
            yield from statements_in_order(stmt.body)
            yield from statements_in_order(stmt.orelse)
        else:
            yield stmt


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def names_stored(nodes, nested_defs: bool = False) -> list[str]:
    """Every name the nodes bind (a `Store`: `=`, `+=`, loop targets, `:=`), at any depth, in
    order of first appearance: for the user's code, which binds names in more ways than
    `assigned` sees. A def, lambda, class or comprehension inside the nodes binds names of its
    own (Python's scoping: a nested def's `K = 0`, or `for K in` in a comprehension, leaves the
    outer `K` global), so its body and targets are not read unless `nested_defs` (the code
    reading them as well, as the standalone module's does)."""
    names: dict[str, None] = {}
    for node in nodes:
        todo = [node]
        for n in todo:  # breadth first, like walk_nodes; the list grows as it is read
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                names.setdefault(n.id)
            elif n is not node and isinstance(n, _SCOPES) and not nested_defs:
                todo.extend(_evaluated_outside(n))
                continue
            elif isinstance(n, ast.comprehension) and not nested_defs:
                todo.extend([n.iter, *n.ifs])  # (its target is the comprehension's own)
                continue
            todo.extend(ast.iter_child_nodes(n))
    return list(names)


def _evaluated_outside(scope) -> list[ast.AST]:
    """The parts of a nested def, lambda or class evaluated in the scope around it: decorators,
    default values, base classes."""
    if isinstance(scope, ast.ClassDef):
        return scope.decorator_list + scope.bases + [k.value for k in scope.keywords]
    defaults = scope.args.defaults + [d for d in scope.args.kw_defaults if d is not None]
    return getattr(scope, "decorator_list", []) + defaults


def names_read(stmts, skip=frozenset()) -> set[str]:
    """Every name the statements read (tape markers excluded); `x += g` reads x too. `skip`:
    the ids of Name nodes not to count."""
    names = set()
    for stmt in stmts:
        if not isinstance(stmt, ast.AST):
            continue
        for node in walk_nodes(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                if id(node) not in skip:
                    names.add(node.id)
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
    return names


def names_mentioned(nodes) -> set[str]:
    """Every name the nodes mention, read or written."""
    return {n.id for node in nodes for n in walk_nodes(node) if isinstance(n, ast.Name)}


def names_in(source: str) -> set[str]:
    """Every name a piece of source mentions."""
    return names_mentioned([ast.parse(source)])


def defined_functions(source: str) -> list[str]:
    """The names of the top-level functions `source` defines, in order."""
    return [n.name for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)]
