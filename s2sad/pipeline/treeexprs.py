"""The expressions of parameter trees in a function's body (treeparams.py has the stage): a
`Node` is a tree value (its structure and, per child, a Node, a leaf's parameter name or a
constant), and `TreeExpressions` rewrites an expression to one: `p["W"]`, `p.W`, `p[1:]`,
`len(p)`, comprehensions over a tree (unrolled), calls passing trees to the user's functions
(`ir.tree_call`) and methods of a tree's class. Consumes expressions of the parsed function;
produces expressions reading leaves, or Nodes."""

from __future__ import annotations

import ast
import builtins
import inspect

import numpy as np

from .. import ir
from ..astcopy import clone
from ..errors import UnsupportedSyntaxError
from ..trees import TreeDef, code_names, leaf_names

SEQUENCES = ("list", "tuple", "namedtuple")


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


class TreeExpressions:
    """The expression layer of the rewrite (see the module docstring)."""

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
        self.scope.update(parsed.known)

    def refuse(self, node, what, hint=None):
        return self.parsed.error(
            UnsupportedSyntaxError,
            what,
            node,
            hint=hint
            or "read the tree's leaves (p['W'], p.W, `W, b = p`) with constant keys, or loop "
            "over a list of them with `for`",
        )

    def elements(self, it, where):
        """The values a `for` over a tree takes (then it is unrolled), or None."""
        v = self.value(clone(it), probe=True)
        if isinstance(v, Node):
            if v.d.kind == "dict":
                return [ast.Constant(k) for k in v.d.keys]
            if v.d.kind in SEQUENCES or v.d.kind == "registered":
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

    # ------------------------------------------------------------------ expressions
    def leaf(self, name: str, where) -> ast.expr:
        return ast.copy_location(ast.Name(name, ast.Load()), where)

    def expr_of(self, v, where):
        if isinstance(v, Node):
            raise self.refuse(where, *_read_whole(v))
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
                if probe:  # (a method, looked at by `call`)
                    return e
                found = inspect.getattr_static(base.d.cls, e.attr, None)
                if base.d.kind != "dict" and isinstance(found, property) and found.fget:
                    # `obj.area`: the property's getter, inlined with the tree
                    spelled = self.class_name(base, e.attr, e)
                    getter = ast.Attribute(spelled, "fget", ast.Load())
                    call = ast.copy_location(ast.Call(getter, [], []), e)
                    return self.tree_call(call, found.fget, [base], [])
                if base.d.kind != "dict" and _constant_like(found):  # a class's constant
                    return ast.copy_location(self.class_name(base, e.attr, e), e)
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
            inner = type(self)(self.parsed, self._shadowed_lambda(e))
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
                sub = TreeDef(
                    d.kind, d.cls, tuple(range(len(chosen))), tuple(d.children[i] for i in chosen)
                )
                return Node(sub, [base.items[i] for i in chosen], f"{base.text}[...]")
        value = _constant(key)
        if value is None:
            raise self.refuse(
                e,
                f"{base.text} is a parameter tree (a {d.kind}); s2sad reads it only with "
                f"constant keys, not `{ast.unparse(e)}`",
                hint=(
                    f"pass an array (`np.asarray({base.text})`) where it is meant as one; else "
                    if isinstance(e.slice, (ast.Tuple, ast.Slice))  # (an index only arrays take)
                    else ""
                )
                + "loop over the tree itself (`for layer in layers:`, `enumerate(layers)`), "
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
        if isinstance(self.value(clone(func), probe=True), Node):  # `layer(x)`: its __call__
            func = e.func = ast.copy_location(ast.Attribute(func, "__call__", ast.Load()), func)
        if isinstance(func, ast.Attribute):
            base = self.value(func.value, probe=True)
            if isinstance(base, Node) and func.attr not in base.d.keys:
                method = self.method(base, func, e)
        values = [self._arg(a) for a in e.args]
        keywords = []
        for k in e.keywords:
            v = self._arg(k.value)
            if k.arg is None and isinstance(v, Node) and v.d.kind == "dict":  # **tree
                keywords += [
                    (ast.keyword(key, k.value), item) for key, item in zip(v.d.keys, v.items)
                ]
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
            if isinstance(v, Node) and v.d.kind in SEQUENCES:
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
                f"{base.text} is a parameter tree (a {base.d.kind}); s2sad cannot call its "
                f"'{func.attr}' here",
                hint="call methods the tree's class defines with `def`, or read its leaves (or "
                f"pass an array, `np.asarray({base.text})`, where it is meant as one)",
            )
        return target, ast.copy_location(self.class_name(base, func.attr, e), func), base

    def class_name(self, base: Node, attr: str, e) -> ast.expr:
        """`Class.attr` for the class of the tree `base`, read by its global name."""
        cls = base.d.cls
        spelled = next(
            (n for n, v in self.parsed.func.__globals__.items() if v is cls and n.isidentifier()),
            None,
        )
        if spelled is None:
            raise self.refuse(
                e,
                f"s2sad follows {base.text}.{attr} through the class's global name, and "
                f"{cls.__qualname__} has none in this module",
                hint="define (or import) the class at module level",
            )
        return ast.Attribute(ast.Name(spelled, ast.Load()), attr, ast.Load())

    def tree_call(self, e, callee, values, keywords):
        """A call passing trees: to the user's own function, which is flattened like this one
        when it is inlined (`ir.tree_call` carries each tree parameter's structure)."""
        callee = _called(_static(e.func, self.scope) if callee is None else callee)
        # a classmethod (`Model.apply(params, x)`) or a method of the user's object
        # (`model.loss(params, x)`): its signature without cls or self, which the inliner
        # passes as the class or the object the call names
        function = callee.__func__ if inspect.ismethod(callee) else callee
        if not inspect.isfunction(function) or callee.__module__.split(".")[0] in (
            "numpy",
            "s2sad",
        ):
            shown = next(v for v in values + [v for _, v in keywords] if isinstance(v, Node))
            shown = shown[1] if isinstance(shown, tuple) else shown
            if type(callee).__module__ == "s2sad.transformed":  # df = s2sad.grad(f), called here
                raise self.refuse(
                    e,
                    f"{shown.text} is a parameter tree passed to {ast.unparse(e.func)}, a "
                    "transform s2sad made; s2sad differentiates through one only where it is "
                    "passed arrays and floats",
                    hint="transform a function taking the tree's leaves (def f(W, b, x)) "
                    "and pass it p['W'], p['b']",
                )
            literal = sequence_literals(self._plain, e, values, keywords)
            if literal is not None:
                return literal
            raise self.refuse(
                e,
                f"{shown.text} is a parameter tree passed to {ast.unparse(e.func)}, which is not "
                "a Python function of yours that s2sad can inline",
                hint="pass its leaves (p['W'], p.W) instead",
            )
        positional = []
        for v in values:
            positional += v[1].items if isinstance(v, tuple) else [v]  # *tree: its items
        if any(k.arg is None for k, _ in keywords):
            raise self.refuse(e, "**mapping in a call that passes parameter trees")
        signature = inspect.signature(callee, follow_wrapped=False)
        try:
            bound = signature.bind(
                *[_Arg(v) for v in positional], **{k.arg: _Arg(v) for k, v in keywords}
            )
        except TypeError as exc:
            raise self.refuse(e, f"bad call of {callee.__qualname__}: {exc}") from None
        taken = code_names(function)
        trees = {}
        for param, got in bound.arguments.items():
            if isinstance(got, _Arg) and isinstance(got.value, Node):
                names = leaf_names(param, got.value.d, taken)
                taken |= set(names)
                trees[param] = (got.value.d, tuple(names))
            elif not isinstance(got, _Arg):  # *args or **kwargs of the callee
                inside = got.values() if isinstance(got, dict) else got
                if any(isinstance(a.value, Node) for a in inside):
                    raise self.refuse(
                        e,
                        f"a parameter tree passed into *{param} of {callee.__qualname__}",
                        hint="give the function a named parameter for the tree",
                    )
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


def sequence_literals(plain, e, values, keywords):
    """The call `e` to a library function with each tuple or list tree of leaves it passes
    written as the literal of those leaves (`sum(args)` in a helper taking *args:
    `sum((args_0, args_1))`), which the rules read element by element; None where it passes
    another tree. `plain` writes a leaf or a value as an expression."""

    def literal(v):
        if not isinstance(v, Node):
            return plain(v, e)
        if v.d.kind not in ("tuple", "list") or any(isinstance(i, Node) for i in v.items):
            return None
        elts = [plain(i, e) for i in v.items]
        return ast.copy_location((ast.Tuple if v.d.kind == "tuple" else ast.List)(elts), e)

    args = [literal(v) for v in values]
    given = [literal(v) for _, v in keywords]
    if any(a is None for a in args + given):
        return None
    e.args = args
    for (k, _), v in zip(keywords, given):
        k.value = v
    e.keywords = [k for k, _ in keywords]
    return e


class _Arg:
    """An argument, as a call binds it to the callee's parameters."""

    def __init__(self, value):
        self.value = value


def _constant_like(value) -> bool:
    """A class attribute the generated code may read as `Class.attr`: a number, a string, an
    array, None (not a function, descriptor or class)."""
    return value is None or isinstance(value, (int, float, complex, str, bytes, np.ndarray))


def _constant(e):
    if isinstance(e, ast.Constant):
        return e.value
    if (
        isinstance(e, ast.UnaryOp)
        and isinstance(e.op, ast.USub)
        and isinstance(e.operand, ast.Constant)
    ):
        return -e.operand.value
    return None


def _called(callee):
    """What a call of `callee` runs: for an object of the user's called like a function, its
    bound `__call__`."""
    call = getattr(type(callee), "__call__", None)
    mine = (getattr(call, "__module__", "") or "").split(".")[0] not in ("numpy", "s2sad")
    if not inspect.isroutine(callee) and not isinstance(callee, type) and inspect.isfunction(call):
        return callee.__call__ if mine else callee
    return callee


def _static(func, scope):
    """The object a call's function expression names in the module's scope, or None."""
    if isinstance(func, ast.Name):
        return scope.get(func.id)
    if isinstance(func, ast.Attribute):
        base = _static(func.value, scope)
        return getattr(base, func.attr, None) if base is not None else None
    return None


def _read_whole(v) -> tuple:
    """What a tree read whole is told, and the way out (None: the general one). A list or
    tuple of leaves is mostly a list of floats passed for an array (README: lists are trees)."""
    d = v.d
    if d.kind not in ("list", "tuple") or any(c.kind != "leaf" for c in d.children):
        return (
            f"{v.text} is a parameter tree ({d.kind}); s2sad reads trees only through their leaves",
            None,
        )
    n = len(d.children)
    return (
        f"{v.text} is a {d.kind} of {n} values, a parameter tree to s2sad (its gradient a "
        f"{d.kind} of {n}), read whole here (a NumPy function's argument may be: "
        f"np.sin({v.text}), np.asarray({v.text}))",
        f"pass np.asarray(...) of it to differentiate one array, write `{v.text} = "
        f"np.asarray({v.text})` first in the function, or read its elements ({v.text}[0], "
        f"`for v in {v.text}:`)",
    )
