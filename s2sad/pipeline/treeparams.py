"""Parameter trees in the body (see s2sad/trees.py for the API side): before normalization, a
function whose parameters are trees gets one parameter per leaf, and the body's reads of the
tree are rewritten to those leaves:

- `p["W"]`, `p.W`, `p[0]`, `p[-1]`, `p[1:]` (constant keys), `len(p)`;
- `W, b = p` and `layer = p[0]` (a name bound to a part of a tree is an alias of it);
- `for W, b in layers:`, `for i, layer in enumerate(layers)`, `zip(...)`, `p.items()`, and
  comprehensions over a tree are unrolled: the tree's length is part of its structure;
- a tree passed to the user's own function, or a method of a tree's class called
  (`self.predict(x)`): the call passes the leaves, and the inliner flattens the callee the same
  way (`ir.tree_call`).

Anything else done with a whole tree is refused at its line. Also here, for `has_aux=True`:
`return value, aux` becomes `return value` (the API computes aux with a plain call).

Consumes a `ParsedFunction` and each tree parameter's `TreeDef` and leaf names; rewrites it in
place.
"""

from __future__ import annotations

import ast
import inspect

from .. import ir
from ..astcopy import clone
from ..errors import UnsupportedSyntaxError
from ..trees import LEAF, TreeDef, code_names, leaf_names
from .names import names_stored
from .treeexprs import SEQUENCES, Node, TreeExpressions, tree_value


def flatten_parameters(parsed, trees: dict, has_aux: bool = False) -> None:
    """Rewrite `parsed` (in place): each parameter in `trees` (name -> (TreeDef, leaf names))
    becomes its leaves, every parameter plain positional without a default (the wrappers pass
    all of them), and the body reads the leaves."""
    tree = parsed.tree
    if has_aux:
        _first_of_returns(parsed, tree)
        tree.body = _without_dead_assignments(tree.body)
    if not trees:
        return
    parsed.passed = {p: d.aux.function for p, (d, _) in trees.items() if d.kind == "function"}
    trees = {p: t for p, t in trees.items() if p not in parsed.passed}
    args = tree.args
    new = []
    stars = [a for a in (args.vararg, args.kwarg) if a is not None]
    for a in args.posonlyargs + args.args + stars + args.kwonlyargs:
        if a.arg in parsed.passed:
            continue  # read through the resolver (see ParsedFunction.passed)
        if a.arg in trees:
            new += [ast.copy_location(ast.arg(n), a) for n in trees[a.arg][1]]
        else:
            new.append(a)
    tree.args = ast.arguments([], new, None, [], [], None, [])
    env = {p: tree_value(d, iter(names), p) for p, (d, names) in trees.items()}
    tree.body = _Rewriter(parsed, env).block(tree.body, nested=False) or [
        ast.copy_location(ast.Pass(), tree)
    ]
    parsed.params = [a.arg for a in new]


def flat_signature(func, trees: dict) -> inspect.Signature:
    """`func`'s signature with each tree parameter replaced by its leaves (for the inliner)."""
    params = []
    for p in sorted(
        inspect.signature(func, follow_wrapped=False).parameters.values(),
        key=lambda p: p.kind == p.VAR_KEYWORD,
    ):
        if p.name in trees:
            params += [inspect.Parameter(n, p.POSITIONAL_OR_KEYWORD) for n in trees[p.name][1]]
        elif p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            params.append(p.replace(kind=p.POSITIONAL_OR_KEYWORD))
        else:
            params.append(p)
    return inspect.Signature(params)


def star_trees(func, n_args: int, keyword_names) -> tuple[dict, dict] | None:
    """For a call of a helper taking *args, or of a functools.wraps wrapper taking *args and
    **kwargs: its star parameters as trees of the call's arguments (a tuple of `n_args`, a dict
    of the keywords), and the keyword arguments' names among its leaves. None for other
    functions (a helper's own **kwargs stays refused)."""
    code = func.__code__
    # any helper's *args (a tuple of the call's extra arguments); **kwargs only a wrapper's
    stars = inspect.CO_VARARGS | (inspect.CO_VARKEYWORDS if hasattr(func, "__wrapped__") else 0)
    if not code.co_flags & stars or code.co_flags & ~stars & inspect.CO_VARKEYWORDS:
        return None
    params = inspect.signature(func, follow_wrapped=False).parameters.values()
    named = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    trees, renamed, taken = {}, {}, code_names(func)
    for p in params:
        if p.kind == p.VAR_POSITIONAL:
            n = max(n_args - len(named), 0)
            d = TreeDef("tuple", tuple, tuple(range(n)), (LEAF,) * n)
        elif p.kind == p.VAR_KEYWORD:
            keys = tuple(k for k in keyword_names if k not in named)
            d = TreeDef("dict", dict, keys, (LEAF,) * len(keys))
        else:
            continue
        names = tuple(leaf_names(p.name, d, taken))
        taken |= set(names)
        trees[p.name] = (d, names)
        if p.kind == p.VAR_KEYWORD:
            renamed.update(zip(d.keys, names))
    return trees, renamed


def self_by_name(parsed, spelled: ast.expr, obj) -> None:
    """A method of the user's object `obj` (a global the caller spells `spelled`) inlined: its
    `self` reads become reads of that global, so that `self.W` is read as the caller's data and
    `self.predict(x)` is inlined in turn. Only where the method's module reads the same object
    by that name and the method never rebinds `self`."""
    tree = parsed.tree
    params = tree.args.posonlyargs + tree.args.args
    if not (params and isinstance(spelled, ast.Name)):
        return
    if parsed.func.__globals__.get(spelled.id, None) is not obj:
        return
    name = params[0].arg
    if name in names_stored(tree.body) or spelled.id in names_stored([tree]):
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load):
            node.id = spelled.id


def _without_dead_assignments(body: list) -> list:
    """has_aux: the function's top-level assignments that nothing after them reads (what only
    aux was made of: `aux = {"r": r}`) left out of the transform, which computes the value
    alone (aux comes from a plain call of the function)."""
    live: set[str] = set()
    kept = []
    for stmt in reversed(body):
        if (
            isinstance(stmt, (ast.Assign, ast.AnnAssign))
            and all(isinstance(t, ast.Name) and t.id not in live for t in _targets(stmt))
            and stmt.value is not None
        ):
            continue
        kept.append(stmt)
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and all(
            isinstance(t, ast.Name) for t in _targets(stmt)
        ):
            live -= {t.id for t in _targets(stmt)}
        live |= {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}
    return kept[::-1] or [ast.copy_location(ast.Pass(), body[0])]


def _targets(stmt) -> list:
    return stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]


def _first_of_returns(parsed, tree) -> None:
    """has_aux: `return value, aux` -> `return value` (`return r` -> `return r[0]`)."""
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, ast.Return):
            if node.value is None:
                raise parsed.error(
                    UnsupportedSyntaxError,
                    "with has_aux=True the function must return a pair (value, aux)",
                    node,
                )
            if isinstance(node.value, ast.Tuple):
                if len(node.value.elts) != 2:
                    raise parsed.error(
                        UnsupportedSyntaxError,
                        f"with has_aux=True the function must return a pair (value, aux), "
                        f"not a tuple of {len(node.value.elts)}",
                        node,
                        hint="return (value, aux), with aux a tuple or dict of the rest",
                    )
                node.value = node.value.elts[0]
            else:
                node.value = ast.copy_location(
                    ast.Subscript(node.value, ast.Constant(0), ast.Load()), node.value
                )
            continue
        todo.extend(ast.iter_child_nodes(node))


class _Rewriter(TreeExpressions):
    """The statement layer: assignments binding names to parts of trees, loops over trees
    unrolled, writes into trees refused."""

    # ------------------------------------------------------------------ statements
    def block(self, stmts, nested: bool) -> list:
        out = []
        for s in stmts:
            out += self.stmt(s, nested)
        return out

    def stmt(self, s, nested):
        if isinstance(s, ast.Assign):
            v = self.value(s.value)
            if isinstance(v, Node) and len(s.targets) == 1:
                return self.bind(s.targets[0], v, s, nested)
            s.value = self.expr_of(v, s.value)
            for t in s.targets:
                self.store(t, nested)
            return [s]
        if isinstance(s, (ast.AugAssign, ast.AnnAssign)):
            if s.value is not None:
                s.value = self.expr(s.value)
            self.store(s.target, nested)
            return [s]
        if isinstance(s, ast.For):
            elements = self.elements(s.iter, s)
            if elements is not None:
                return self.unroll(s, elements, nested)
            s.iter = self.expr(s.iter)
            self.store(s.target, True)
            s.body = self.block(s.body, True) or [ast.copy_location(ast.Pass(), s)]
            s.orelse = self.block(s.orelse, True)
            return [s]
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            inner = _Rewriter(self.parsed, self._shadowed(s))
            inner.consts = dict(self.consts)
            if not isinstance(s, ast.ClassDef):
                s.args = inner.generic(s.args)
            s.body = inner.block(s.body, True) or [ast.copy_location(ast.Pass(), s)]
            self.store(ast.Name(getattr(s, "name", ""), ast.Store()), nested)
            return [s]
        if isinstance(s, ast.Return) and s.value is not None:
            v = self.value(s.value)
            if isinstance(v, Node):
                raise self.refuse(
                    s,
                    f"s2sad cannot return a parameter tree ({v.text}) yet",
                    hint="return an array or a number (or a tuple of them)",
                )
            s.value = self.expr_of(v, s.value)
            return [s]
        # if, while, with, try, raise, assert, expressions: their expressions and blocks
        for field, value in ast.iter_fields(s):
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                setattr(s, field, self.block(value, True) or [ast.copy_location(ast.Pass(), s)])
            elif isinstance(value, list):
                setattr(s, field, [self.generic(v) if isinstance(v, ast.AST) else v for v in value])
            elif isinstance(value, ast.AST):
                setattr(s, field, self.generic(value))
        if isinstance(s, (ast.If, ast.While)) and _calls_with_trees(s.test):
            return self.hoisted_test(s)
        return [s]

    def hoisted_test(self, s) -> list:
        """`if f(tree) > 1:` -> `cond = f(tree) > 1` then `if cond:`: normalization keeps a
        condition as written, and a call passing a tree's leaves must be inlined. A `while`
        computes it again at the end of each trip."""
        taken = {n.id for n in ast.walk(self.parsed.tree) if isinstance(n, ast.Name)}
        name, k = "tree_test", 2
        while name in taken:
            name, k = f"tree_test_{k}", k + 1
        first = ast.copy_location(ast.Assign([ast.Name(name, ast.Store())], s.test), s.test)
        test = s.test
        s.test = ast.copy_location(ast.Name(name, ast.Load()), test)
        if isinstance(s, ast.While):
            if any(isinstance(n, ast.Continue) and _own_level(s, n) for n in ast.walk(s)):
                raise self.refuse(
                    s,
                    "a `while` whose condition passes a parameter tree to a function, and whose "
                    "body uses `continue`",
                    hint="compute the condition in the body, or avoid `continue`",
                )
            again = ast.Assign([ast.Name(name, ast.Store())], clone(test))
            s.body = s.body + [ast.copy_location(again, test)]
        return [first, s]

    def _shadowed(self, fn) -> dict:
        """The env inside a nested def: without the names it binds itself."""
        own = set(names_stored(fn.body if isinstance(fn, ast.ClassDef) else [fn]))
        if not isinstance(fn, ast.ClassDef):
            a = fn.args
            own |= {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
        return {k: v for k, v in self.env.items() if k not in own}

    def store(self, target, nested):
        """A target of an ordinary assignment: its names stop being aliases of a tree."""
        if isinstance(target, ast.Name):
            if target.id in self.env and nested:
                raise self.refuse(
                    target,
                    f"'{target.id}' names a part of a parameter tree and is assigned here, "
                    "inside a branch or loop",
                    hint="use another name for the new value",
                )
            self.env.pop(target.id, None)
            self.consts.pop(target.id, None)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                self.store(t, nested)
        elif isinstance(target, ast.Starred):
            self.store(target.value, nested)
        else:  # a subscript or attribute: the base must not be a tree
            base = self.value(target.value)
            if isinstance(base, (Node, str)):  # the tree, or one of its leaves
                raise self.refuse(
                    target,
                    f"s2sad does not write into a parameter tree ({ast.unparse(target.value)})",
                    hint="build new arrays from its leaves instead of assigning into it (or "
                    f"write into a copy: `w = {ast.unparse(target.value)}.copy()`)",
                )
            target.value = self.expr_of(base, target.value)
            if isinstance(target, ast.Subscript):
                target.slice = self.expr(target.slice)

    def bind(self, target, v, where, nested) -> list:
        """`target = v` for a tree value `v` (a Node, a leaf's name or a constant)."""
        if isinstance(target, ast.Name):
            if isinstance(v, Node):
                if nested:
                    raise self.refuse(
                        where,
                        f"'{target.id}' is bound to a part of a parameter tree ({v.text}) "
                        "inside a branch or loop",
                        hint="bind it before the branch or loop, or loop over the tree with "
                        "`for` (which s2sad unrolls)",
                    )
                self.consts.pop(target.id, None)
                self.env[target.id] = v
                return []
            if isinstance(v, str):
                self.store(target, nested)
                return [ast.copy_location(ast.Assign([target], self.leaf(v, where)), where)]
            self.env.pop(target.id, None)
            self.consts[target.id] = v
            return []
        if isinstance(target, (ast.Tuple, ast.List)) and isinstance(v, Node):
            if v.d.kind == "dict":
                items = [ast.Constant(k) for k in v.d.keys]
            elif v.d.kind in SEQUENCES or v.d.kind == "registered":
                items = v.items
            else:
                raise self.refuse(where, f"s2sad cannot unpack {v.text} (a {v.d.kind})")
            if any(isinstance(t, ast.Starred) for t in target.elts):
                raise self.refuse(where, "starred unpacking of a parameter tree is not supported")
            if len(items) != len(target.elts):
                raise self.refuse(
                    where,
                    f"{v.text} has {len(items)} elements; this unpacks {len(target.elts)}",
                )
            if all(
                isinstance(t, ast.Name) and isinstance(i, str) for t, i in zip(target.elts, items)
            ):
                for t in target.elts:  # `W, b = layers_0_W, layers_0_b`: one statement
                    self.store(t, nested)
                leaves = ast.Tuple([self.leaf(i, where) for i in items], ast.Load())
                return [ast.copy_location(ast.Assign([target], leaves), where)]
            out = []
            for t, item in zip(target.elts, items):
                out += self.bind(t, item, where, nested)
            return out
        if isinstance(v, Node):
            raise self.refuse(where, f"s2sad cannot assign the parameter tree {v.text} here")
        value = self.leaf(v, where) if isinstance(v, str) else v
        self.store(target, nested)
        return [ast.copy_location(ast.Assign([target], value), where)]

    def unroll(self, loop, elements, nested) -> list:
        for inner in ast.walk(ast.Module(loop.body, [])):
            if isinstance(inner, (ast.Break, ast.Continue)) and _own_level(loop, inner):
                raise self.refuse(
                    inner,
                    "`break` and `continue` in a loop over a parameter tree are not supported "
                    "(s2sad unrolls the loop)",
                    hint="loop over the tree without break/continue",
                )
        # the bindings of each trip come from the loop's header (`for W, b in layers`)
        header = ast.copy_location(ast.Pass(), loop)
        header.end_lineno, header.end_col_offset = loop.iter.end_lineno, loop.iter.end_col_offset
        out = []
        for element in elements:
            out += self.bind(clone(loop.target), element, header, nested)
            out += self.block(clone(loop.body), nested)
        return out + self.block(loop.orelse, nested)


def _calls_with_trees(node) -> bool:
    return any(isinstance(n, ast.Call) and ir.tree_call(n.func) for n in ast.walk(node))


def _own_level(loop, node) -> bool:
    """Whether a break/continue belongs to `loop` (not to a loop nested in its body)."""
    todo = list(loop.body)
    while todo:
        n = todo.pop()
        if n is node:
            return True
        if isinstance(n, (ast.For, ast.While, ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        todo.extend(ast.iter_child_nodes(n))
    return False
