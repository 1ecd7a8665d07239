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
import builtins
import inspect

from .. import ir
from ..astcopy import clone
from ..errors import UnsupportedSyntaxError
from ..trees import LEAF, TreeDef, code_names, leaf_names
from .names import names_stored

_SEQUENCES = ("list", "tuple", "namedtuple")


class Node:
    """A tree value in the body: its structure and, per child, a Node, a leaf's parameter
    name (str) or a constant expression (an `enumerate` index)."""

    def __init__(self, d: TreeDef, items: list, text: str):
        self.d, self.items, self.text = d, items, text

    def child(self, key, text):
        return self.items[self.d.keys.index(key)], text

    def leaves(self) -> list:
        out = []
        for item in self.items:
            out += item.leaves() if isinstance(item, Node) else [item]
        return out


def tree_value(d: TreeDef, names, text: str):
    """The Node for structure `d` whose leaves are `names` (an iterator), in order."""
    if d.kind == "leaf":
        return next(names)
    items = []
    for k, c in zip(d.keys, d.children):
        sub = f"{text}.{k}" if d.kind in ("namedtuple", "dataclass", "object") else f"{text}[{k!r}]"
        items.append(tree_value(c, names, sub))
    return Node(d, items, text)


def flatten_parameters(parsed, trees: dict, has_aux: bool = False) -> None:
    """Rewrite `parsed` (in place): each parameter in `trees` (name -> (TreeDef, leaf names))
    becomes its leaves, every parameter plain positional without a default (the wrappers pass
    all of them), and the body reads the leaves."""
    tree = parsed.tree
    if has_aux:
        _first_of_returns(parsed, tree)
    if not trees:
        return
    args = tree.args
    new = []
    stars = [a for a in (args.vararg, args.kwarg) if a is not None]
    for a in args.posonlyargs + args.args + stars + args.kwonlyargs:
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
    """For a call of a functools.wraps wrapper taking *args/**kwargs: its star parameters as
    trees of the call's arguments (a tuple of `n_args`, a dict of the keywords), and the
    keyword arguments' names among its leaves. None for other functions."""
    code = func.__code__
    if not hasattr(func, "__wrapped__") or not code.co_flags & (
        inspect.CO_VARARGS | inspect.CO_VARKEYWORDS
    ):
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


class _Rewriter:
    def __init__(self, parsed, env: dict):
        self.parsed = parsed
        self.env = env  # name -> Node, or a leaf's parameter name
        self.consts: dict[str, ast.expr] = {}  # an unrolled loop's index -> its value now
        func = parsed.func
        self.scope = dict(vars(builtins))
        self.scope.update(getattr(func, "__globals__", {}))
        code = getattr(func, "__code__", None)
        for name, cell in zip(code.co_freevars if code else (), func.__closure__ or ()):
            try:
                self.scope[name] = cell.cell_contents
            except ValueError:
                pass

    def refuse(self, node, what, hint=None):
        return self.parsed.error(
            UnsupportedSyntaxError,
            what,
            node,
            hint=hint
            or "read the tree's leaves (p['W'], p.W, `W, b = p`) with constant keys, or loop "
            "over a list of them with `for`",
        )

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
                setattr(s, field, [self.generic(v) for v in value])
            elif isinstance(value, ast.AST):
                setattr(s, field, self.generic(value))
        return [s]

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
            if isinstance(base, Node):
                raise self.refuse(
                    target,
                    f"s2sad does not write into a parameter tree ({base.text})",
                    hint="build new arrays from its leaves instead of assigning into it",
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
            elif v.d.kind in _SEQUENCES or v.d.kind == "registered":
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
            out = []
            for t, item in zip(target.elts, items):
                out += self.bind(t, item, where, nested)
            return out
        if isinstance(v, Node):
            raise self.refuse(where, f"s2sad cannot assign the parameter tree {v.text} here")
        value = self.leaf(v, where) if isinstance(v, str) else v
        self.store(target, nested)
        return [ast.copy_location(ast.Assign([target], value), where)]

    def elements(self, it, where):
        """The values a `for` over a tree takes (then it is unrolled), or None."""
        v = self.value(clone(it), probe=True)
        if isinstance(v, Node):
            if v.d.kind == "dict":
                return [ast.Constant(k) for k in v.d.keys]
            if v.d.kind in _SEQUENCES or v.d.kind == "registered":
                return list(v.items)
            raise self.refuse(where, f"s2sad cannot iterate over {v.text} (a {v.d.kind})")
        if not (isinstance(it, ast.Call) and isinstance(it.func, (ast.Name, ast.Attribute))):
            return None
        if isinstance(it.func, ast.Attribute) and it.func.attr in ("items", "values", "keys"):
            base = self.value(clone(it.func.value), probe=True)
            if isinstance(base, Node) and base.d.kind == "dict" and not it.args:
                keys = [ast.Constant(k) for k in base.d.keys]
                if it.func.attr == "keys":
                    return keys
                if it.func.attr == "values":
                    return list(base.items)
                pairs = zip(keys, base.items)
                return [Node(TreeDef("tuple", tuple, (0, 1)), list(p), base.text) for p in pairs]
            return None
        if not isinstance(it.func, ast.Name) or it.keywords:
            return None
        name = it.func.id
        if self.scope.get(name) is enumerate and it.args:
            inner = self.elements(it.args[0], where)
            if inner is None:
                return None
            start = 0
            if len(it.args) > 1:
                first = self.expr(it.args[1])
                if not isinstance(first, ast.Constant):
                    raise self.refuse(where, "enumerate over a tree needs a constant start")
                start = first.value
            pair = TreeDef("tuple", tuple, (0, 1))
            return [Node(pair, [ast.Constant(start + k), e], "") for k, e in enumerate(inner)]
        if self.scope.get(name) is zip and it.args:
            columns = [self.elements(a, where) for a in it.args]
            if all(c is None for c in columns):
                return None
            length = min(len(c) for c in columns if c is not None)
            for k, c in enumerate(columns):
                if c is None:  # an ordinary sequence beside trees: indexed
                    columns[k] = [
                        ast.Subscript(self.expr(clone(it.args[k])), ast.Constant(j), ast.Load())
                        for j in range(length)
                    ]
            kind = TreeDef("tuple", tuple, tuple(range(len(columns))))
            return [Node(kind, [c[j] for c in columns], "") for j in range(length)]
        return None

    def unroll(self, loop, elements, nested) -> list:
        for inner in ast.walk(ast.Module(loop.body, [])):
            if isinstance(inner, (ast.Break, ast.Continue)) and _own_level(loop, inner):
                raise self.refuse(
                    inner,
                    "`break` and `continue` in a loop over a parameter tree are not supported "
                    "(s2sad unrolls the loop)",
                    hint="loop over the tree without break/continue",
                )
        out = []
        for element in elements:
            out += self.bind(clone(loop.target), element, loop, nested)
            out += self.block(clone(loop.body), nested)
        return out + self.block(loop.orelse, nested)

    # ------------------------------------------------------------------ expressions
    def leaf(self, name: str, where) -> ast.expr:
        return ast.copy_location(ast.Name(name, ast.Load()), where)

    def expr_of(self, v, where):
        if isinstance(v, Node):
            raise self.refuse(
                where,
                f"{v.text} is a parameter tree ({v.d.kind}); s2sad reads trees only through "
                "their leaves",
            )
        return self.leaf(v, where) if isinstance(v, str) else v

    def expr(self, e):
        return self.expr_of(self.value(e), e)

    def generic(self, e):
        """Rewrite the children of `e` (any node) that are expressions."""
        if isinstance(e, ast.expr):
            return self.expr(e)
        for field, value in ast.iter_fields(e):
            if isinstance(value, list):
                setattr(e, field, [self.generic(v) if isinstance(v, ast.AST) else v for v in value])
            elif isinstance(value, ast.AST):
                setattr(e, field, self.generic(value))
        return e

    def value(self, e, probe=False):
        """`e` rewritten: a Node (a tree or part of one), a leaf name (str) or an expression."""
        if isinstance(e, ast.Name) and isinstance(e.ctx, ast.Load):
            if e.id in self.env:
                return self.env[e.id]
            if e.id in self.consts:
                return ast.copy_location(clone(self.consts[e.id]), e)
            return e
        if isinstance(e, ast.Subscript):
            base = self.value(e.value, probe)
            if isinstance(base, Node):
                return self.index(base, e)
            e.value = self.expr_of(base, e.value)
            e.slice = self.expr(e.slice)
            return e
        if isinstance(e, ast.Attribute):
            base = self.value(e.value, probe)
            if isinstance(base, Node):
                if e.attr in base.d.keys and base.d.kind != "dict":
                    return base.child(e.attr, None)[0]
                raise self.refuse(
                    e,
                    f"{base.text} (a {base.d.kind}) has no field '{e.attr}' s2sad can read",
                    hint="read the tree's own fields; methods are only followed when called",
                )
            e.value = self.expr_of(base, e.value)
            return e
        if probe:
            return e
        if isinstance(e, ast.Call):
            return self.call(e)
        if isinstance(e, (ast.ListComp, ast.GeneratorExp)) and len(e.generators) == 1:
            gen = e.generators[0]
            elements = None if gen.ifs or gen.is_async else self.elements(gen.iter, e)
            if elements is not None:
                return self.comprehension(e, gen, elements)
        if isinstance(e, ast.Lambda):
            inner = _Rewriter(self.parsed, self._shadowed_lambda(e))
            inner.consts = dict(self.consts)
            e.body = inner.expr(e.body)
            return e
        return self.generic_children(e)

    def generic_children(self, e):
        for field, value in ast.iter_fields(e):
            if isinstance(value, list):
                setattr(e, field, [self.generic(v) if isinstance(v, ast.AST) else v for v in value])
            elif isinstance(value, ast.AST):
                setattr(e, field, self.generic(value))
        return e

    def _shadowed_lambda(self, e) -> dict:
        a = e.args
        own = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
        return {k: v for k, v in self.env.items() if k not in own}

    def comprehension(self, e, gen, elements):
        """`[f(W) for W in layers]` over a tree: a list of the unrolled elements."""
        out = []
        saved_env, saved_consts = dict(self.env), dict(self.consts)
        for element in elements:
            self._alias(gen.target, element, e)
            out.append(self.expr(clone(e.elt)))
        self.env, self.consts = saved_env, saved_consts
        return ast.copy_location(ast.List(out, ast.Load()), e)

    def _alias(self, target, v, where):
        if isinstance(target, ast.Name):
            if isinstance(v, (Node, str)):
                self.env[target.id] = v
            else:
                self.consts[target.id] = v
            return
        if isinstance(target, (ast.Tuple, ast.List)) and isinstance(v, Node):
            if len(v.items) == len(target.elts):
                for t, item in zip(target.elts, v.items):
                    self._alias(t, item, where)
                return
        raise self.refuse(where, "s2sad cannot unpack this part of a parameter tree here")

    def index(self, base: Node, e):
        key = self.expr(e.slice)
        d = base.d
        if isinstance(key, ast.Slice) and d.kind in ("list", "tuple"):
            bounds = [self.expr(b) if b is not None else None for b in (key.lower, key.upper)]
            step = key.step and self.expr(key.step)
            parts = [b for b in bounds + [step] if b is not None]
            if all(_constant(b) is not None for b in parts):
                lo, hi = (None if b is None else _constant(b) for b in bounds)
                chosen = list(range(len(base.items)))[slice(lo, hi, step and _constant(step))]
                sub = TreeDef(d.kind, d.cls, tuple(range(len(chosen))), tuple(d.children[i] for i in chosen))
                return Node(sub, [base.items[i] for i in chosen], f"{base.text}[...]")
        value = _constant(key)
        if value is None:
            raise self.refuse(
                e,
                f"{base.text} is a parameter tree; s2sad reads it only with constant keys, not "
                f"[{ast.unparse(key)}]",
                hint="loop over the tree itself (`for layer in layers:`, `enumerate(layers)`), "
                "which s2sad unrolls",
            )
        if d.kind in ("list", "tuple", "namedtuple") and isinstance(value, int):
            if -len(d.keys) <= value < 0:
                value += len(d.keys)
        keys = d.keys if d.kind != "namedtuple" else tuple(range(len(d.keys)))
        if value not in keys:
            raise self.refuse(
                e,
                f"{base.text} has no key {value!r} (its keys: {', '.join(map(repr, d.keys))})",
            )
        return base.items[keys.index(value)]

    def call(self, e: ast.Call):
        func = e.func
        if isinstance(func, ast.Name) and self.scope.get(func.id) is len and len(e.args) == 1:
            v = self.value(e.args[0])
            if isinstance(v, Node):
                return ast.copy_location(ast.Constant(len(v.items)), e)
            e.args = [self.expr_of(v, e.args[0])]
            return e
        method = None
        if isinstance(func, ast.Attribute):
            base = self.value(func.value, probe=True)
            if isinstance(base, Node) and func.attr not in base.d.keys:
                method = self.method(base, func, e)
        values = [self._arg(a) for a in e.args]
        keywords = []
        for k in e.keywords:
            v = self._arg(k.value)
            if k.arg is None and isinstance(v, Node) and v.d.kind == "dict":  # **tree
                keywords += [(ast.keyword(key, k.value), item) for key, item in zip(v.d.keys, v.items)]
            else:
                keywords.append((k, v))
        if method is not None:
            callee, spelled, base = method
            e.func = spelled
            if not isinstance(inspect.getattr_static(base.d.cls, func.attr), staticmethod):
                values.insert(0, base)
        else:
            e.func = self.expr(func)
            callee = None
        spread = [x for v in values for x in (v[1].items if isinstance(v, tuple) else [v])]
        if any(isinstance(v, Node) for v in spread + [v for _, v in keywords]):
            return self.tree_call(e, callee, values, keywords)
        e.args = [self._plain(v, e) for v in spread]
        for k, v in keywords:
            k.value = self._plain(v, k.value)
        e.keywords = [k for k, _ in keywords]
        return e

    def _arg(self, a):
        if isinstance(a, ast.Starred):
            v = self.value(a.value)
            if isinstance(v, Node) and v.d.kind in _SEQUENCES:
                return ("*", v)
            a.value = self.expr_of(v, a.value)
            return a
        return self.value(a)

    def method(self, base: Node, func, e):
        """`obj.method(...)` for a tree `obj` whose class defines `method`: the function and
        how the generated code names it (`Class.method`, the class read by a global name)."""
        cls = base.d.cls
        found = inspect.getattr_static(cls, func.attr, None)
        target = found.__func__ if isinstance(found, staticmethod) else found
        if not inspect.isfunction(target):
            raise self.refuse(
                e,
                f"{base.text} is a parameter tree; s2sad cannot call its '{func.attr}' here",
                hint="call methods the tree's class defines with `def`, or read its leaves",
            )
        spelled = next(
            (n for n, v in self.parsed.func.__globals__.items() if v is cls and n.isidentifier()),
            None,
        )
        if spelled is None:
            raise self.refuse(
                e,
                f"s2sad follows {base.text}.{func.attr}() through the class's global name, and "
                f"{cls.__qualname__} has none in this module",
                hint="define (or import) the class at module level",
            )
        node = ast.Attribute(ast.Name(spelled, ast.Load()), func.attr, ast.Load())
        return target, ast.copy_location(node, func), base

    def tree_call(self, e, callee, values, keywords):
        """A call passing trees: to the user's own function, which is flattened like this one
        when it is inlined (`ir.tree_call` carries each tree parameter's structure)."""
        if callee is None:
            callee = _static(e.func, self.scope)
        if not inspect.isfunction(callee) or callee.__module__.split(".")[0] in ("numpy", "s2sad"):
            shown = next(v for v in values + [v for _, v in keywords] if isinstance(v, Node))
            shown = shown[1] if isinstance(shown, tuple) else shown
            raise self.refuse(
                e,
                f"{shown.text} is a parameter tree passed to {ast.unparse(e.func)}, which is not "
                "a Python function of yours that s2sad can inline",
                hint="pass its leaves (p['W'], p.W) instead",
            )
        positional, markers = [], []
        for v in values:
            if isinstance(v, tuple):  # *tree
                positional += v[1].items
            else:
                positional.append(v)
        markers = list(range(len(positional)))
        try:
            bound = inspect.signature(callee).bind(
                *markers, **{k.arg: ("kw", k.arg) for k, _ in keywords if k.arg}
            )
        except TypeError as exc:
            raise self.refuse(e, f"bad call of {callee.__qualname__}: {exc}") from None
        taken = code_names(callee)
        trees, by_marker = {}, {}
        for param, marker in bound.arguments.items():
            markers_here = marker if isinstance(marker, tuple) and marker[0] != "kw" else (marker,)
            for m in markers_here:
                v = positional[m] if isinstance(m, int) else dict(
                    (k.arg, v) for k, v in keywords
                )[m[1]]
                if isinstance(v, Node):
                    if len(markers_here) > 1:
                        raise self.refuse(e, "a tree passed into *args of an inlined function")
                    names = leaf_names(param, v.d, taken)
                    taken |= set(names)
                    trees[param] = (v.d, tuple(names))
                    by_marker[m if isinstance(m, int) else m[1]] = v
        args = []
        for k, v in enumerate(positional):
            args += self._leaves(v, e) if isinstance(v, Node) else [self._plain(v, e)]
        new_keywords = []
        for k, v in keywords:
            if isinstance(v, Node):
                names = trees[k.arg][1]
                new_keywords += [
                    ast.keyword(n, self._plain(leaf, e)) for n, leaf in zip(names, v.leaves())
                ]
            else:
                k.value = self._plain(v, e)
                new_keywords.append(k)
        e.args, e.keywords = args, new_keywords
        ir.set_tree_call(e.func, trees)
        return e

    def _leaves(self, v: Node, where):
        return [self._plain(x, where) for x in v.leaves()]

    def _plain(self, v, where):
        if isinstance(v, tuple):
            return ast.Starred(self.expr_of(v[1], where), ast.Load())
        return self.leaf(v, where) if isinstance(v, str) else self.expr_of(v, where)


def _constant(e):
    if isinstance(e, ast.Constant):
        return e.value
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub) and isinstance(e.operand, ast.Constant):
        return -e.operand.value
    return None


def _static(func, scope):
    """The object a call's function expression names in the module's scope, or None."""
    if isinstance(func, ast.Name):
        return scope.get(func.id)
    if isinstance(func, ast.Attribute):
        base = _static(func.value, scope)
        return getattr(base, func.attr, None) if base is not None else None
    return None


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
