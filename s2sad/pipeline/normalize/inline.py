"""Inlining: a call of the user's own function (module-level, a nested `def`, a lambda) is
replaced by its body, flattened into the caller's statements by a flattener of its own (its
`parent` is the caller's: one allocator of names, one set of varied names, one list of memory
hazards). Its parameters are bound to the call's atoms, its defaults read as Python reads them
(at the call for a global function, checked by the transform cache; where the `def` stands for a
nested one). The result is a name (or a tuple of names) annotated with what it may share with the
caller's arrays (`ir.Inlined`).
"""

from __future__ import annotations

import ast
import inspect
import types
from typing import NamedTuple

from ... import ir
from ...astcopy import clone
from ...errors import UnsupportedSyntaxError
from ..names import names_read, names_stored
from ..parse import parse_function
from ..resolve import is_data
from ..checkpoint_marks import helper_marks
from ..treeparams import flat_signature, flatten_parameters, self_by_name, star_trees
from .calls import refuse_factory
from .control import ControlFlow


class VariedArguments(NamedTuple):
    """Per argument of a call being inlined, whether it may vary (now or in a later iteration of
    a loop around): the callee's parameters bound to those vary in its body."""

    positional: list[bool]
    keywords: dict[str, bool]


class Inlining(ControlFlow):
    """Flattening of calls of the user's functions (see the module docstring)."""

    def __init__(self, parsed, wrt, parent: Inlining | None = None, **kwargs):
        super().__init__(parsed, wrt, parent, **kwargs)
        self.inlining: list[object] = parent.inlining if parent is not None else []  # the calls
        # per nested def or lambda (by id): its defaults, as evaluated where it stands
        self.local_defaults: dict[int, dict[str, ast.expr]] = (
            parent.local_defaults if parent is not None else {}
        )
        # per nested def or lambda passed to a function inlined (by id): the parsed function
        # it stands in and the index of that function's scopes (see Reads)
        self.local_owner: dict[int, tuple] = parent.local_owner if parent is not None else {}
        # SSA names of integers (and truths) known when the function is transformed
        self.constants: dict[str, object] = parent.constants if parent is not None else {}
        # names assigned more than once (a loop's carried values, its counters): never known
        self.unstable: set[str] = parent.unstable if parent is not None else set()
        self.folded: set[str] = parent.folded if parent is not None else set()  # what tests read

    def append(self, name: str, rhs: ast.expr, varied: bool) -> ast.stmt:
        stmt = super().append(name, rhs, varied)
        if name in self.constants or name in self.unstable:
            self.constants.pop(name, None)
            self.unstable.add(name)
        elif not varied:
            value = self.known(rhs)
            if value is not None:
                self.constants[name] = value
                if self.unrolling():  # read by the tests it decides, maybe by nothing else
                    self.folded.add(name)
        return stmt

    def unrolling(self) -> bool:
        """Whether a recursive function is being inlined (its tests that constants decide take
        one branch)."""
        return any(_recursive(t) for t in self.inlining)

    def loop_body(self, node, body, setup):
        """A name a loop changes holds another value in each iteration: none is known."""
        for var in names_stored(body):
            if var in self.env:
                self.constants.pop(self.env[var], None)
                self.unstable.add(self.env[var])
        return super().loop_body(node, body, setup)

    def known(self, node: ast.expr):
        """The integer or truth `node` computes, where constants decide it; else None."""
        return _evaluate(node, lambda name: self.constants.get(self.env.get(name, name)))

    def if_(self, node: ast.If) -> None:
        """In a recursive function being unrolled, a test that constants decide takes its branch
        alone (the other may recurse without end)."""
        if self.unrolling() and not any(
            isinstance(n, (ast.Break, ast.Continue)) for n in ast.walk(node)
        ):
            value = self.known(node.test)
            if value is not None:
                self.block_into(self.out, node.body if value else node.orelse)
                return
        super().if_(node)

    def refuse_deep_recursion(self, target, node: ast.Call) -> None:
        """Refuse `target` called inside itself deeper than s2sad unrolls."""
        if sum(t is target for t in self.inlining) >= MAX_RECURSION:
            raise self.parsed.error(
                UnsupportedSyntaxError,
                f"s2sad unrolls a recursive function only where integer constants decide its "
                f"depth (at most {MAX_RECURSION} calls deep): here its depth is not known "
                "when the function is transformed",
                node,
                hint="pass the depth as a constant (`power(x, 3)`), or write the recursion as "
                "a loop",
            )

    def inline(self, node: ast.Call, base: str) -> ast.expr:
        target = self.inlinable(node.func)
        refuse_factory(self.parsed, target, node)
        if not self.mentions_varied(node) and not self.reads_local_function(node):
            # (a nested def, called or passed on as in `rk4(rhs, y0)`, has no global name)
            if isinstance(target, ast.Lambda) or ir.tree_call(node.func):
                pass  # a lambda has no name, and trees' leaves need the callee's
            else:
                return self.rename(node)
        self.refuse_deep_recursion(target, node)
        if any(isinstance(a, ast.Starred) for a in node.args) or any(
            k.arg is None for k in node.keywords
        ):
            raise self.unsupported(node, "*args or **kwargs in a call to an inlined function")
        # per argument, asked before flattening them: an argument may be an inlined call itself
        varied = VariedArguments(
            [self.mentions_varied(a) for a in node.args],
            {k.arg: self.mentions_varied(k.value) for k in node.keywords},
        )
        # a function passes as it is; a list literal stays one, of atoms: the helper reads it
        # as a list (see lists.py)
        args = [a if self.local_function(a) else self.sequence(a, base) for a in node.args]
        keywords = {
            k.arg: k.value if self.local_function(k.value) else self.sequence(k.value, base)
            for k in node.keywords
        }
        owner = None
        if inspect.ismethod(target):  # a method of the user's object: `self` is the object
            func = node.func
            if not (isinstance(func, ast.Attribute) and func.attr == target.__name__):
                # `layer(x)`: its __call__, read (and checked) as `layer.__call__`
                func = ast.copy_location(ast.Attribute(func, "__call__", ast.Load()), func)
                if ir.tree_call(node.func):  # its parameter trees' leaves, as for a method
                    ir.set_tree_call(func, ir.tree_call(node.func))
            owner = (func.value, target.__self__)
            args.insert(0, self.atom(func.value, base))
            varied.positional.insert(0, False)
            call = ast.Call(func, [func.value, *node.args], node.keywords)
            node = ast.copy_location(call, node)
            target = target.__func__
            self.refuse_deep_recursion(target, node)
        elif inspect.isfunction(target):  # `Model.loss(model, p, x)`: `self` is the object
            owner = _object_passed_as_self(target, node, self)
        self.inlining.append(target)
        try:
            if isinstance(target, (ast.FunctionDef, ast.Lambda)):
                return self.inline_local(target, args, keywords, node, varied)
            return self.inline_global(target, args, keywords, node, varied, owner)
        finally:
            self.inlining.pop()

    def _bind_params(
        self,
        sub: Inlining,
        signature: inspect.Signature,
        args,
        keywords,
        node,
        defaults_spelled,
        varied: VariedArguments,
    ) -> None:
        rebound = set(names_stored([sub.parsed.tree]))
        try:
            bound = signature.bind(*args, **keywords)
        except TypeError as exc:
            raise self.parsed.error(UnsupportedSyntaxError, f"bad call: {exc}", node) from None
        given_args = signature.bind(*node.args, **{k.arg: k.value for k in node.keywords}).arguments
        # the parameters that are the caller's arrays (or views of them), with those arrays
        memory, text_of = self.memory, self.parsed.text_of
        sources = {
            name: memory.argument_memory(arg, bound.arguments[name], self.env, text_of(arg))
            for name, arg in given_args.items()
        }
        sub.memory.param_sources = {name: s for name, s in sources.items() if s is not None}
        for name, param in signature.parameters.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise self.unsupported(node, "calls to functions with *args or **kwargs")
            if name in given_args and name not in rebound:
                local = self.local_function(given_args[name])
                if local is not None:  # `rk4(lambda y: -k * y, y, h)`
                    self.pass_local_function(sub, name, local, given_args[name])
                    continue
                passed = self.passed_function(given_args[name])
                if passed is not None:  # `rk4(dynamics, y, h)`: `f` is `dynamics` in rk4
                    sub.resolver.functions[name] = passed
                    sub.locals.discard(name)
                    continue
            if name in bound.arguments:
                value = bound.arguments[name]
            else:
                value = defaults_spelled(name, param.default)
            if self.bind_list_param(sub, name, value):
                # a list of differentiated values (see lists.py)
                sub.memory.elements_of_param(name, sub.lists[name].elts)
                continue
            if (
                isinstance(value, ast.Name)
                and (
                    value.id not in self.resolver.namespace
                    or isinstance(self.resolver.namespace[value.id], type)  # a classmethod's cls
                )
                and name not in rebound
            ):  # a parameter the callee rebinds gets its own copy
                sub.env[name] = value.id
            else:
                local = self.names.fresh(name)
                self.append(local, value, varied=self.atom_varied(value))
                sub.env[name] = local
                if sources.get(name) is not None:
                    # the callee's parameter is the caller's array (or a view of it)
                    sub.memory.aliases[local] = sources[name][0]
        # a parameter whose argument varies (now or in a later iteration) varies in the body
        per_param = signature.bind(*varied.positional, **varied.keywords).arguments
        sub.loop_varied |= {param for param, varies in per_param.items() if varies}

    def local_function(self, arg: ast.expr):
        """The nested def or lambda an argument is, or None."""
        if isinstance(arg, ast.Lambda):
            return arg
        if isinstance(arg, ast.Name) and arg.id in self.local_funcs:
            return self.local_funcs[arg.id]
        return None

    def pass_local_function(self, sub: Inlining, param: str, fn, arg: ast.expr) -> None:
        """A nested def or lambda passed to a function being inlined, as `param` there: a copy
        whose free names read this caller's values as they are at the call (the callee cannot
        rebind them)."""
        args = fn.args
        if args.defaults or any(d is not None for d in args.kw_defaults):
            raise self.unsupported(arg, "a nested function with defaults passed as an argument")
        fn = clone(fn)
        body = fn.body if isinstance(fn, ast.FunctionDef) else [fn.body]
        own = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs} | set(
            names_stored(body)
        )
        free = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)} - own
        for name in free & set(self.env):
            current = self.env[name]
            for n in ast.walk(fn):
                if isinstance(n, ast.Name) and n.id == name:
                    n.id = current
            sub.env[current] = current
            sub.locals.add(current)
        for name in free & set(self.local_funcs):
            sub.local_funcs.setdefault(name, self.local_funcs[name])
        sub.local_funcs[param] = fn
        self.local_defaults[id(fn)] = {}
        self.local_owner[id(fn)] = self.local_owner.get(
            id(fn), (self.parsed, self.resolver.scopes())
        )

    def passed_function(self, arg: ast.expr):
        """The function an argument names (`dynamics` in `rk4(dynamics, y, h)`: a module's
        function, a closure a factory returned, a NumPy function, a class), with the spec that reads it
        again at each call and the caller's spelling of it; None for any other argument."""
        root = arg
        while isinstance(root, ast.Attribute):
            root = root.value
        if not isinstance(root, ast.Name) or root.id in self.locals:
            return None
        obj, spec = self.resolver.resolve_spec(arg)
        if is_data(obj) or isinstance(obj, types.ModuleType):
            return None  # (a class passes: a classmethod's `cls.apply(x)` is inlined)
        return obj, spec, self.rename(arg)

    def _run_inlined(self, sub: Inlining, body: list[ast.stmt], label: str) -> ast.expr:
        result = self.names.fresh(f"{label}_result")
        body, arity = sub.lift(sub.function_body(body), result)
        sub.locals |= {result} | {f"{result}{i}" for i in range(arity)}
        sub.mark_loop_varied(body)  # as for the main function: what varies anywhere is split
        sub.block_into(self.out, body)
        results = [f"{result}{i}" for i in range(arity)] or _listed_cotangents(self, sub, result)
        sub.refuse_list_results(results or [result])
        if results:
            out = ast.Tuple([ast.Name(sub.env[r], ast.Load()) for r in results], ast.Load())
            # per element: the caller's arrays it may be (a view of), or an earlier element
            # whose memory it may share (`return h, h`, `return v[:2], v[2:]` share `v`)
            elements = []
            sharing = sub.memory.sharing
            for i, r in enumerate(results):
                mine = sharing.get(r, set())
                same = [j for j in range(i) if mine & sharing.get(results[j], set())]
                elements.append((same[0] if same else None, self.caller_memory(sub, r)))
            ir.set_inlined(out, ir.Inlined(elements=elements))
        else:
            out = ast.Name(sub.env[result], ast.Load())
            ir.set_inlined(out, ir.Inlined(alias=self.caller_memory(sub, result) or None))
        return out

    def caller_memory(self, sub: Inlining, result: str):
        """What the inlined `result` may share with this caller (see Memory.shared_with_caller)."""
        return self.memory.shared_with_caller(sub.memory, sub.env, result, self.env)

    def inline_global(self, func, args, keywords, node, varied, owner=None) -> ast.expr:
        _, spec = self.resolver.resolve_spec(node.func)
        if spec is None:  # not reached by a name of the user's: nothing could check it later
            raise self.unsupported(node, "a call of this function")
        reads = self.resolver.reads
        index = reads.helper(spec, func)
        trees = ir.tree_call(node.func)
        star = star_trees(func, len(args), list(keywords)) if not trees else None
        if star is not None:  # a functools.wraps wrapper: its *args and **kwargs as trees
            trees, renamed = star
            keywords = {renamed.get(k, k): v for k, v in keywords.items()}
        parsed = parse_function(func, star=list(trees or ()))
        helper_marks(parsed, self.parsed)
        if owner is not None:  # `self.W`, `self.predict(x)` read through the object's name
            self_by_name(parsed, *owner)
            params = parsed.tree.args.posonlyargs + parsed.tree.args.args
            if isinstance(owner[1], type) and params:  # a classmethod: `cls` is the class
                parsed.known[params[0].arg] = owner[1]
        signature = inspect.signature(func)
        if trees:  # called with parameter trees: the callee takes their leaves (treeparams)
            flatten_parameters(parsed, trees)
            signature = flat_signature(func, trees)
        sub = type(self)(parsed, [], parent=self, env={}, index=index)
        sub.user_stmt = self.user_stmt
        positional = [
            p.name
            for p in inspect.signature(func).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is not p.empty
        ]

        def default(name, value):
            # read again at each call: a number or array as a parameter, anything else checked
            if name in positional:
                where = (index, "default", positional.index(name), ())
            else:
                where = (index, "kwdefault", name, ())
            if is_data(value) and not _is_literal(value):
                spelled = reads.parameter(where, f"{parsed.name}_{name}", self.resolver.namespace)
                return ast.Name(spelled, ast.Load())
            reads.checks[where] = value
            if _is_literal(value):
                return ast.Constant(value)
            spelled = self.names.fresh(f"{parsed.name}_{name}")  # not __name__: any text
            self.resolver.namespace[spelled] = value
            return ast.Name(spelled, ast.Load())

        self._bind_params(sub, signature, args, keywords, node, default, varied)
        return self._run_inlined(sub, parsed.tree.body, parsed.name)

    def inline_local(self, fn, args, keywords, node, varied) -> ast.expr:
        """A `def` or lambda inside the function: its closure is the current environment."""
        if isinstance(fn, ast.Lambda):
            body = [ast.copy_location(ast.Return(fn.body), fn.body)]
        else:
            body = fn.body
        params = [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs]
        if fn.args.vararg or fn.args.kwarg:
            raise self.unsupported(node, "calls to functions with *args or **kwargs")
        tree = ast.FunctionDef(getattr(fn, "name", "lambda"), fn.args, body, [], None)
        parsed, index = self.local_owner.get(id(fn), (self.parsed, None))
        sub = type(self)(
            parsed,
            [],
            parent=self,
            index=index,
            env=dict(self.env),
            extra_locals=self.locals | set(params) | set(names_stored([tree])),
            local_funcs=dict(self.local_funcs),
            loop_varied=self.loop_varied,
        )
        sub.resolver.locals = sub.locals
        sub.user_stmt = self.user_stmt
        held = self.local_defaults.get(id(fn), {})
        empty = inspect.Parameter.empty
        sig_params = [
            inspect.Parameter(
                a.arg, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=held.get(a.arg, empty)
            )
            for a in fn.args.posonlyargs + fn.args.args
        ] + [
            inspect.Parameter(a.arg, inspect.Parameter.KEYWORD_ONLY, default=held.get(a.arg, empty))
            for a in fn.args.kwonlyargs
        ]
        signature = inspect.Signature(sig_params)
        renamed = {old: new for new, old in self.parsed.original.items()}
        keywords = {renamed.get(k, k): v for k, v in keywords.items()}  # `h(np=...)`: see hygienic
        varied = varied._replace(
            keywords={renamed.get(k, k): v for k, v in varied.keywords.items()}
        )
        self._bind_params(
            sub,
            signature,
            args,
            keywords,
            node,
            lambda name, _: self.default_of(fn, name, node),
            varied,
        )
        label = getattr(node.func, "id", tree.name)
        return self._run_inlined(sub, body, label)

    def evaluate_defaults(self, fn) -> None:
        """Python evaluates a nested def's (or lambda's) defaults where the def stands, not at
        the call: a default that reads a local is bound to a name of its own here (`h_k = k`),
        which a later `k = ...` does not change; constants and globals stay as written."""
        args = fn.args
        positional = args.posonlyargs + args.args
        pairs = list(zip(positional[len(positional) - len(args.defaults) :], args.defaults))
        pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
        held = {}
        for arg, default in pairs:
            if not (names_read([default]) & self.locals):
                held[arg.arg] = default
                continue
            local = self.names.fresh(f"{getattr(fn, 'name', 'lambda')}_{arg.arg}")
            self.locals.add(local)
            self.assign_target(ast.Name(local, ast.Store()), default)
            held[arg.arg] = ast.copy_location(ast.Name(local, ast.Load()), default)
        self.local_defaults[id(fn)] = held

    def default_of(self, fn, name: str, node) -> ast.expr:
        """The default of parameter `name` of a nested def, as evaluated at the def."""
        value = self.local_defaults[id(fn)][name]
        if isinstance(value, ast.Name) and value.id not in self.env and value.id in self.locals:
            raise self.parsed.error(
                UnsupportedSyntaxError,
                f"`{getattr(node.func, 'id', 'lambda')}` is called after the loop that defines it, "
                f"and its default for `{name}` was evaluated inside that loop",
                node,
                hint="define the function before the loop, or pass the argument explicitly",
            )
        return self.rename(value)


def _is_literal(value) -> bool:
    """A default s2sad writes into the code as a constant (and checks at each call)."""
    try:
        ast.literal_eval(repr(value))
        return True
    except (ValueError, SyntaxError):
        return False


MAX_RECURSION = 24  # calls of one function inside itself that s2sad unrolls

_BINOPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b if b else None,
    ast.Mod: lambda a, b: a % b if b else None,
}
_COMPARE = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
}


def _evaluate(node: ast.expr, lookup):
    """`node`'s value where it is integer arithmetic, comparisons and `not`/`and`/`or` of
    constants and names `lookup` knows (ints and bools only); else None."""
    if isinstance(node, ast.Constant):
        return node.value if type(node.value) in (int, bool) else None
    if isinstance(node, ast.Name):
        return lookup(node.id)
    if isinstance(node, ast.UnaryOp):
        v = _evaluate(node.operand, lookup)
        if v is None:
            return None
        if isinstance(node.op, ast.Not):
            return not v
        return -v if isinstance(node.op, ast.USub) else None
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        a, b = _evaluate(node.left, lookup), _evaluate(node.right, lookup)
        return None if a is None or b is None else _BINOPS[type(node.op)](a, b)
    if isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
        values = [_evaluate(v, lookup) for v in [node.left] + node.comparators]
        if any(v is None for v in values):
            return None
        return all(_COMPARE[type(op)](a, b) for op, a, b in zip(node.ops, values, values[1:]))
    if isinstance(node, ast.BoolOp):
        values = [_evaluate(v, lookup) for v in node.values]
        if any(v is None for v in values):
            return None
        return all(values) if isinstance(node.op, ast.And) else any(values)
    return None


def _recursive(target) -> bool:
    """Whether a function (or a nested def's node) calls itself by its name."""
    if isinstance(target, ast.FunctionDef):
        return any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == target.name
            for n in ast.walk(target)
        )
    code = getattr(target, "__code__", None)
    return code is not None and code.co_name in code.co_names


def _object_passed_as_self(function, node: ast.Call, inliner):
    """(name, object) for a method's function called on the user's global object passed
    first (`Model.loss(model, p, x)`), as for `model.loss(p, x)`; else None."""
    first = node.args[0] if node.args else None
    if not isinstance(first, ast.Name) or first.id in inliner.locals:
        return None
    if first.id in inliner.local_funcs:
        return None
    obj = inliner.resolver.resolve(first)
    return (first, obj) if getattr(type(obj), function.__name__, None) is function else None


def _listed_cotangents(caller, sub, result: str) -> list[str]:
    """The elements of a list a vjp rule returns (`return [g]`), where s2sad's own gradient code
    calls the rule (`caller`: forward mode over that code, a Hessian's): there the list only goes
    to `rule_cotangents`, which takes a list as it takes a tuple, so it is read as the tuple of
    its elements (names, or constants: None), as a list is no value forward mode follows. Else
    none (the list is refused)."""
    known = sub.lists.get(result)
    if not caller.parsed.filename.startswith("<s2sad ") or known is None or not known.varied:
        return []
    if not all(isinstance(e, (ast.Name, ast.Constant)) for e in known.elts):
        return []
    names = []
    for e in known.elts:  # a constant (None: a zero cotangent) named in the caller's code
        name = e.id if isinstance(e, ast.Name) else caller.names.fresh(f"{result}_constant")
        if isinstance(e, ast.Constant):
            caller.append(name, e, varied=False)
            sub.env[name] = name
        names.append(name)
    return names
