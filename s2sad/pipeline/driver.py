"""Stage 6: compile and cache. The generated source is executed in a namespace holding exactly
the names it uses (NumPy as `np`, `math`, the runtime helpers and the functions, classes and
modules the user's code calls), and registered with linecache so tracebacks show the generated
lines. The user's data (numbers, arrays: anything not callable and not a module) is not in that
namespace: every generated function takes it as trailing parameters, which `Compiled.read` fills
at each call from the function's globals, closure cells and its helpers' scopes as they are then.
So the cache, keyed by the code object, holds no user data, and a closure made per data batch
reuses one transform.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import copy
import functools
import gc
import types
import linecache
import os
from dataclasses import dataclass, field

from ..astcopy import clone, walk_nodes
from ..deep import DEEP, TooDeep, deepest_line, depth, with_room
from ..errors import NestingTooDeepError
from .. import runtime
from .activity import active_names
from .emit import emit, emit_jvp, format_source
from ..errors import NonScalarOutputError
from .tangent import Forward, prune
from ..jit import drop_constant_branches, jit_copy, lower_for_numba
from .normalize import hygienic, normalize, reserved_names
from .optimize import optimize
from .classify import classify
from .parse import parse_function
from .reverse import Marker, assigned, reverse, simple_statements
from .ranks import infer_ranks
from ..errors import S2SADError
from .tape import FinalReads, record
from ..rules.registry import NAMESPACE, VERSION


@dataclass
class Compiled:
    function: object  # the generated Python function
    code: str  # the text it was compiled from, as emitted (tracebacks show these lines)
    name: str
    tuple_output: bool
    globals: dict  # the functions, classes and modules the source calls, by the name it uses
    rules_version: int = 0
    jitted: object = None  # the Numba-compiled version, made on first use (see jit.py)
    functions: dict = field(default_factory=dict)  # every function the source defines, by name
    user_names: dict = field(default_factory=dict)  # a global's name in `globals` -> the user's
    # the trailing parameters of every function the source defines: the user's data the code
    # reads (globals, closure cells, helpers' defaults), filled by `read` at each call
    data: tuple = ()
    data_specs: tuple = ()  # how to read each (resolve.Reads)
    helpers: tuple = ()  # (spec reaching inlined helper k + 1, the code it had)
    checks: tuple = ()  # (spec, the object it must still read)
    _reader: object = field(default=None, repr=False, compare=False)  # made by the first read

    def read(self, func):
        """The data values to pass after the arguments, read from `func` and its helpers now;
        None if anything the transform relied on has changed (then transform again)."""
        if self._reader is None:
            self._reader = _reader(self.helpers, self.checks, self.data_specs)
        return self._reader(func)

    @property
    def source(self) -> str:
        """The code formatted by black: only made when someone reads it (`s2sad.source`, the
        CLI, jit), since formatting costs more than the whole transform."""
        try:
            with _without_gc_pauses():  # black, as the transform, makes many small objects
                return with_room(format_source, self.code)
        except TooDeep:
            raise NestingTooDeepError(
                f"the code generated for {self.name} nests too deeply for black to format",
                hint="split the longest expression into several statements",
            ) from None


# Two forms the jitted code takes, where compiled code pays more for memory traffic than for
# arithmetic: cheap loop values are recomputed in the adjoint instead of recorded, and a read of
# an array that nothing writes afterwards is a view rather than a copy. S2SAD_JIT_FORMS=1 makes
# the Python code take them too, for testing them against the whole test suite.
_JIT_FORMS = os.environ.get("S2SAD_JIT_FORMS") == "1"
_RUNTIME = {n: f for n, f in vars(runtime).items() if callable(f) and not n.startswith("_")}
# code object, wrt, mode, ranks, jit -> the transforms made for functions with that code (most
# recent first): a few variants for functions whose scopes name different helpers
_CACHE: dict[tuple, tuple[Compiled, ...]] = {}
_BUILTINS = vars(builtins)
_VARIANTS = 8


def _spec_expr(spec) -> str:
    """A Python expression reading `spec` (resolve.Reads) from function `f<index>` now."""
    index, kind, key, attrs = spec
    f = f"f{index}"
    if kind == "global":
        text = f"({f}.__globals__[{key!r}] if {key!r} in {f}.__globals__ else B[{key!r}])"
    elif kind == "closure":
        text = f"{f}.__closure__[{key!r}].cell_contents"
    elif kind == "default":
        text = f"{f}.__defaults__[{key!r}]"
    else:
        text = f"{f}.__kwdefaults__[{key!r}]"
    return text + "".join(f".{attr}" for attr in attrs)


def _reader(helpers, checks, data_specs):
    """A function of the differentiated function returning the data values its transform takes,
    or None where a helper's code or a checked object differs. It is generated once per
    transform (straight-line code: a call reads a few names, cells or defaults and compares a
    few objects, about a microsecond)."""
    env = {"B": _BUILTINS, "M": types.ModuleType}
    lines = ["def read(f0):", "    try:", "        pass"]
    for k, (spec, code) in enumerate(helpers):
        env[f"C{k + 1}"] = code
        lines.append(f"        f{k + 1} = {_spec_expr(spec)}")
        lines.append(f"        if f{k + 1}.__code__ is not C{k + 1}: return None")
    for k, (spec, expected) in enumerate(checks):
        env[f"E{k}"] = expected
        lines.append(f"        if {_spec_expr(spec)} is not E{k}: return None")
    values = [f"v{k}" for k in range(len(data_specs))]
    lines += [f"        v{k} = {_spec_expr(spec)}" for k, spec in enumerate(data_specs)]
    lines.append("    except (LookupError, AttributeError, ValueError, TypeError):")
    lines.append("        return None  # a name, cell or default is gone: transform again")
    for v in values:  # data stays data (a name now naming a function is transformed again)
        lines.append(f"    if callable({v}) or isinstance({v}, M): return None")
    lines.append(f"    return ({''.join(v + ', ' for v in values)})")
    exec("\n".join(lines), env)
    return env["read"]


def adjoint_statements(stmts) -> list[ast.stmt]:
    """Adjoint statements without tape markers, for collecting the names they use."""
    out = []
    for s in stmts:
        if isinstance(s, Marker):
            continue
        if isinstance(s, ast.If):
            s = ast.If(s.test, adjoint_statements(s.body), adjoint_statements(s.orelse))
        elif isinstance(s, ast.For):
            s = ast.For(s.target, s.iter, adjoint_statements(s.body), [])
        out.append(s)
    return out


def _finish_jvp(
    parsed, norm, resolver, wrt, key, ranks=None, batched=False, jit: bool = False
) -> Compiled:
    shapes = infer_ranks(norm.stmts, dict(ranks) if ranks else {})
    fwd = Forward(parsed, norm.stmts, list(wrt), norm.taken, batched, shapes)
    tangents_in = [fwd.dot(p) for p in wrt]
    body = fwd.block(norm.stmts)
    # a parameter outside wrt that the function rebinds from varied values has a tangent, which
    # starts at zero (unused ones are pruned below)
    body = [
        ast.Assign([ast.Name(fwd.dot(p), ast.Store())], fwd.zeros(p))
        for p in norm.params
        if p in fwd.active and p not in wrt
    ] + body
    outputs = [
        ast.Name(fwd.dot(o), ast.Load()) if o in fwd.active else fwd.zeros(o) for o in norm.outputs
    ]
    keep = set(tangents_in) | {o.id for o in outputs if isinstance(o, ast.Name)}
    body = prune(body, keep, set(fwd.tangent.values()))
    primal_names = set(norm.params) | assigned(norm.stmts)
    body = optimize(body, primal_names | keep)
    if jit:
        body = lower_for_numba(body)
    name = f"{'jvp_batched' if batched else 'jvp'}_{parsed.name}"
    data = list(resolver.reads.data.values())
    source = emit_jvp(parsed, norm, body, list(wrt), tangents_in, outputs, name, fwd.batch, data)
    return _compile(parsed, resolver, norm, source, name, key)


def _scalar_reads_need_no_snapshot(stmts, shapes) -> None:
    """snapshot(x[i]) of a scalar element is x[i]: only a view can change after the read."""
    for stmt in simple_statements(stmts):
        value = getattr(stmt, "value", None)
        if (
            isinstance(value, ast.Call)
            and getattr(value.func, "id", "") == "snapshot"
            and shapes.of(value.args[0]) == 0
        ):
            stmt.value = value.args[0]


def _final_reads_need_no_snapshot(stmts, final=lambda read, loops: False) -> None:
    """snapshot(x[...]) keeps what a read saw when `x` is written in place afterwards. Where no
    write to `x` follows the read (later in the code, or anywhere in a loop around the read), or
    `final` proves that no later write reaches the elements read (tape.FinalReads), the view keeps
    it as well, and the copy is dropped."""
    order: list[tuple[ast.stmt, list]] = []  # simple statements in order, with their loops

    def walk(block, loops):
        for stmt in block:
            if isinstance(stmt, (ast.For, ast.While)):
                walk(stmt.body, loops + [stmt])
            elif isinstance(stmt, ast.If):
                walk(stmt.body, loops)
                walk(stmt.orelse, loops)
            else:
                order.append((stmt, loops))

    def writes(node) -> set[str]:
        return {
            n.value.id
            for n in walk_nodes(node)
            if isinstance(n, ast.Subscript)
            and isinstance(n.ctx, ast.Store)
            and isinstance(n.value, ast.Name)
        }

    walk(stmts, [])
    later: set[str] = set()
    for stmt, loops in reversed(order):
        value = getattr(stmt, "value", None)
        if (
            isinstance(value, ast.Call)
            and getattr(value.func, "id", "") == "snapshot"
            and isinstance(value.args[0], ast.Subscript)
            and isinstance(value.args[0].value, ast.Name)
        ):
            base = value.args[0].value.id
            if (base not in later and not any(base in writes(loop) for loop in loops)) or final(
                value.args[0], tuple(loops)
            ):
                stmt.value = value.args[0]
        later |= writes(stmt)


def _clone(stmts):
    """A copy of the block structure (compound statements and their lists); simple statements
    are shared."""
    out = []
    for stmt in stmts:
        if isinstance(stmt, (ast.If, ast.For, ast.While)):
            stmt = copy.copy(stmt)
            stmt.body, stmt.orelse = _clone(stmt.body), _clone(stmt.orelse)
        out.append(stmt)
    return out


def _changes_primal(adjoint_stmts, primal_names: set[str]) -> bool:
    """Whether the adjoint sweep assigns or writes into primal values (pops, restores), or
    rebinds as an adjoint loop's counter a primal name it also reads outside that loop (`x * i`
    after `for i in ...`): in a pullback closure such a name is the pullback's own local, unbound
    where it is read, so the pullback must run in the sweep's scope."""
    module = ast.Module(adjoint_statements(adjoint_stmts), [])
    counters: set[str] = set()
    for node in walk_nodes(module):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                base = t.value if isinstance(t, ast.Subscript) else t
                if isinstance(base, ast.Name) and base.id in primal_names:
                    return True
        elif isinstance(node, ast.For):
            counters |= {n.id for n in walk_nodes(node.target) if isinstance(n, ast.Name)}
    counters &= primal_names
    return bool(counters) and bool(_reads_outside_loops_over(module.body, counters))


def _reads_outside_loops_over(stmts, names: set[str]) -> set[str]:
    """Which of `names` the statements read outside the loops whose counter each one is."""
    found: set[str] = set()
    for stmt in stmts:
        if isinstance(stmt, ast.For):
            bound = {n.id for n in walk_nodes(stmt.target) if isinstance(n, ast.Name)}
            found |= _reads_outside_loops_over(stmt.body, names - bound)
            found |= {n.id for n in walk_nodes(stmt.iter) if isinstance(n, ast.Name)} & names
        elif isinstance(stmt, (ast.If, ast.While)):
            found |= {n.id for n in walk_nodes(stmt.test) if isinstance(n, ast.Name)} & names
            found |= _reads_outside_loops_over(stmt.body + stmt.orelse, names)
        else:
            found |= {
                n.id
                for n in walk_nodes(stmt)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
            } & names
    return found


def adjoint_rank(shapes, primal_of: dict):
    """The rank of an expression over adjoint names (`dx[i]`): that of the same expression over
    their primals (`x[i]`)."""

    class Primal(ast.NodeTransformer):
        def visit_Name(self, node):
            return ast.Name(primal_of.get(node.id, node.id), ast.Load())

    return lambda node: shapes.of(Primal().visit(clone(node)))


def defined_functions(source: str) -> list[str]:
    """The names of the top-level functions `source` defines, in order."""
    return [n.name for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)]


def _renamed(parsed, wrt, ranks):
    """`wrt` and `ranks` by the names the generated code gives the parameters (`hygienic`)."""
    new = {old: new for new, old in parsed.original.items()}
    wrt = tuple(new.get(w, w) for w in wrt)
    if ranks is not None:
        ranks = tuple((new.get(p, p), r) for p, r in ranks)
    return wrt, ranks


def _keywords_renamed(function, parsed):
    """`function`, called with the user's names for keyword-only parameters that `hygienic`
    renamed (s2sad's wrappers pass keyword-only arguments by name)."""
    args = parsed.tree.args.kwonlyargs
    new = {parsed.original[a.arg]: a.arg for a in args if a.arg in parsed.original}
    if not new:
        return function

    @functools.wraps(function)
    def call(*args, **kwargs):
        return function(*args, **{new.get(k, k): v for k, v in kwargs.items()})

    return call


def _source_name(base: str, source: str) -> str:
    """A linecache name for `source`: `base`, or `base` numbered where another source has it (a
    gradient for another wrt or other ranks). Hessians read the gradient code back by this name:
    a shared one would differentiate the other code."""
    filename, k = f"<{base}>", 2
    while filename in linecache.cache and "".join(linecache.cache[filename][2]) != source:
        filename, k = f"<{base} #{k}>", k + 1
    return filename


def _compile(parsed, resolver, norm, source, name, key) -> Compiled:
    where = f"{parsed.filename}:{parsed.line_offset + parsed.tree.lineno}"
    filename = _source_name(f"s2sad {name} of {where}", source)
    namespace = dict(_RUNTIME)
    namespace.update(NAMESPACE)
    namespace.update(resolver.namespace)
    tree = ast.parse(source, filename)  # parsed once, for the code and the names it defines
    exec(compile(tree, filename, "exec"), namespace)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    user_globals = {k: v for k, v in resolver.namespace.items() if k not in ("np", "math")}
    if NAMESPACE:
        used = {n.id for n in walk_nodes(tree) if isinstance(n, ast.Name)}
        user_globals.update({k: v for k, v in NAMESPACE.items() if k in used})
    reads = resolver.reads
    compiled = Compiled(
        _keywords_renamed(namespace[name], parsed),
        source,
        name,
        norm.tuple_output,
        globals=user_globals,
        rules_version=VERSION[0],
        functions={n.name: namespace[n.name] for n in tree.body if isinstance(n, ast.FunctionDef)},
        user_names=dict(resolver.original),
        data=tuple(reads.data.values()),
        data_specs=tuple(reads.data),
        helpers=tuple(reads.helpers),
        checks=reads.final_checks(),
    )
    # one assignment replaces the tuple: threads reading the cache see the old or the new one
    _CACHE[key] = (compiled,) + _CACHE.get(key, ())[: _VARIANTS - 1]
    return compiled


def _tuple_return(parsed, count: int) -> NonScalarOutputError:
    """grad of a function returning `loss, aux`: refused here, at its return line."""
    returns = [n for n in _own_nodes(parsed.tree) if isinstance(n, ast.Return)]
    shown = next((r for r in returns if isinstance(r.value, ast.Tuple)), None)
    return parsed.error(
        NonScalarOutputError,
        f"grad of {parsed.name} needs one scalar output, but {parsed.name} returns a tuple of "
        f"{count} values (grad(..., has_aux=True) for `return loss, aux` is not supported yet)",
        shown or (returns[-1] if returns else None),
        hint="return the scalar alone (compute the other values in a separate function), or "
        "use s2sad.vjp, which takes a tuple of seeds for a tuple output",
    )


def _own_nodes(tree):
    """The nodes of a function's body, not of the functions and lambdas defined in it."""
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))


def transform(
    func, wrt: tuple[str, ...], mode: str, ranks: tuple | None = None, jit: bool = False
) -> Compiled:
    """Generate, compile and cache the `mode` transform: "grad", "value_and_grad", "vjp", "jvp",
    or "vjp_batched"/"jvp_batched" (every cotangent or tangent with a leading batch axis, for
    the one-sweep Jacobian). Call its function with `read(func)`'s values after the arguments
    (`transform_and_read` gives both)."""
    return transform_and_read(func, wrt, mode, ranks, jit)[0]


def transform_and_read(
    func, wrt: tuple[str, ...], mode: str, ranks: tuple | None = None, jit: bool = False
) -> tuple[Compiled, tuple]:
    """The transform and the data values its function takes after the arguments, read now.

    The cache keys on the code object, wrt, mode, ranks and jit; a cached transform serves a
    call if no rule was registered since and `read` finds every function, class and module it
    used unchanged (helpers by their code); data is never part of the key or of the cache."""
    key = (func.__code__, wrt, mode, ranks, jit)
    for hit in _CACHE.get(key, ()):
        if hit.rules_version != VERSION[0]:
            continue
        values = hit.read(func)
        if values is not None:
            return hit, values
    compiled = _transform(func, key, wrt, mode, ranks, jit)
    values = compiled.read(func)
    if values is None:
        raise S2SADError(
            f"the names {func.__qualname__} reads changed while it was being transformed",
            hint="define its globals before the first call",
        )
    return compiled, values


def _transform(func, key, wrt, mode, ranks, jit) -> Compiled:
    parsed = parse_function(func)
    unused = [parsed]

    def run() -> Compiled:  # a second run (with room) starts from a fresh parse
        with _without_gc_pauses():
            return _pipeline(
                unused.pop() if unused else parse_function(func), wrt, mode, ranks, jit, key
            )

    try:
        return with_room(run, deep=depth(parsed.tree) > DEEP)
    except TooDeep:
        raise parsed.error(
            NestingTooDeepError,
            f"{parsed.name} nests too deeply for s2sad (an expression, or a chain of helpers "
            "calling each other, thousands of levels deep)",
            _deepest_statement(parsed.tree),
            hint="split the longest expression into several statements (`s = a + b` then "
            "`s = s + c`), or call fewer helpers inside one another",
        ) from None


@contextlib.contextmanager
def _without_gc_pauses():
    """The transform makes hundreds of thousands of small tree nodes, and each of the cyclic
    collector's passes over the older ones costs more the longer the function: they took a third
    of a 2,000-line transform. Collection waits until the transform is done (nothing it makes
    lives on but the result)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _deepest_statement(tree: ast.FunctionDef) -> ast.AST:
    line = deepest_line(tree)
    return next((n for n in walk_nodes(tree) if getattr(n, "lineno", None) == line), tree)


def _pipeline(parsed, wrt, mode, ranks, jit, key) -> Compiled:
    hygienic(parsed, reserved_names(parsed.name))
    wrt, ranks = _renamed(parsed, wrt, ranks)
    norm, resolver = normalize(parsed, list(wrt), ranks)
    if mode in ("grad", "value_and_grad") and norm.tuple_output:
        raise _tuple_return(parsed, len(norm.outputs))
    if jit:
        norm.stmts = drop_constant_branches(norm.stmts)
    simple = list(simple_statements(norm.stmts))
    local_names = set(norm.params) | assigned(norm.stmts)
    for stmt in simple:
        stmt.op = classify(stmt, local_names)
    batched = mode in ("vjp_batched", "jvp_batched")
    if mode in ("jvp", "jvp_batched"):
        return _finish_jvp(parsed, norm, resolver, wrt, key, ranks, batched, jit)
    active = active_names(parsed, [s.op for s in simple], list(wrt), norm.outputs)
    shapes = infer_ranks(norm.stmts, dict(ranks) if ranks else {})
    adjoint = reverse(
        norm.stmts,
        active,
        list(wrt),
        norm.outputs,
        norm.taken,
        shapes,
        jit,
        tuple(norm.params),
        batched,
    )
    module = ast.Module(adjoint_statements(adjoint.stmts), [])
    taken = norm.taken | {n.id for n in walk_nodes(module) if isinstance(n, ast.Name)}
    plain = _clone(norm.stmts)  # the primal before the tape pass adds its pushes
    _scalar_reads_need_no_snapshot(norm.stmts, shapes)
    if jit or _JIT_FORMS:
        finals = FinalReads(norm.stmts, norm.params, shapes._is_int)
        _final_reads_need_no_snapshot(norm.stmts, finals.final)
    primal, adjoint.stmts, tape_inits = record(
        norm.stmts,
        adjoint.stmts,
        taken,
        scalar=lambda name: shapes.get(name) == 0,
        owned=norm.params,
        saved=(lambda read: jit_copy(read, shapes.of(read))) if jit else None,
        recompute=jit or _JIT_FORMS,
        is_int=shapes._is_int,
    )
    protected = (
        local_names
        | set(adjoint.seeds)
        | {t.targets[0].id for t in tape_inits}
        | {n.id for g in adjoint.grads for n in walk_nodes(g) if isinstance(n, ast.Name)}
    )
    adjoint.stmts = optimize(adjoint.stmts, protected)
    if jit:
        adjoint.stmts = lower_for_numba(adjoint.stmts, adjoint_rank(shapes, adjoint.primal_of))
        primal = lower_for_numba(primal, shapes.of)
    name = f"{mode}_{parsed.name}"
    # a jitted pullback is always the re-running sweep: Numba compiles no closures
    rerun = mode in ("vjp", "vjp_batched") and (jit or _changes_primal(adjoint.stmts, local_names))
    source = emit(
        parsed,
        norm,
        primal,
        adjoint,
        tape_inits,
        list(wrt),
        mode,
        name,
        plain if rerun else None,
        jit=jit,
        data=list(resolver.reads.data.values()),
    )
    return _compile(parsed, resolver, norm, source, name, key)
