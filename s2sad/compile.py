"""Stage 6: compile and cache. The generated source is executed in a namespace holding exactly
the names it uses (NumPy as `np`, `math`, the runtime helpers and the user's own globals), and
registered with linecache so tracebacks show the generated lines.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import gc
import linecache
import os
from dataclasses import dataclass, field

from .astcopy import clone, walk_nodes
from .deep import DEEP, TooDeep, deepest_line, depth, with_room
from .errors import NestingTooDeepError
from . import batched, runtime
from .activity import active_names
from .emit import emit, emit_jvp, format_source
from .forward import Forward, prune
from .jit import drop_constant_branches, jit_copy, lower_for_numba
from .normalize import normalize
from .optimize import optimize
from .ops import classify
from .parse import parse_function
from .reverse import Marker, assigned, reverse, simple_statements
from .ranks import infer_ranks
from .tape import FinalReads, record
from .rules.registry import NAMESPACE, VERSION


@dataclass
class Compiled:
    function: object  # the generated Python function
    code: str  # the text it was compiled from, as emitted (tracebacks show these lines)
    name: str
    tuple_output: bool
    globals: dict  # the user's objects the source refers to, by the name it uses
    inlined: list = field(default_factory=list)  # (function, its code) for each inlined call
    rules_version: int = 0
    jitted: object = None  # the Numba-compiled version, made on first use (see jit.py)
    functions: dict = field(default_factory=dict)  # every function the source defines, by name

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
_RUNTIME = {n: getattr(runtime, n) for n in dir(runtime) if not n.startswith("_")}
_RUNTIME.update(
    {n: getattr(batched, n) for n in dir(batched) if n.startswith(("batched_", "stack_"))}
)
_CACHE: dict[tuple, Compiled] = {}


def _closure_key(func) -> tuple:
    cells = func.__closure__ or ()
    out = []
    for cell in cells:
        try:
            out.append(id(cell.cell_contents))
        except ValueError:
            out.append(None)
    return tuple(out)


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
    source = emit_jvp(parsed, norm, body, list(wrt), tangents_in, outputs, name, fwd.batch)
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
    """Whether the adjoint sweep assigns or writes into primal values (pops, restores)."""
    for node in walk_nodes(ast.Module(adjoint_statements(adjoint_stmts), [])):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                base = t.value if isinstance(t, ast.Subscript) else t
                if isinstance(base, ast.Name) and base.id in primal_names:
                    return True
    return False


def adjoint_rank(shapes, primal_of: dict):
    """The rank of an expression over adjoint names (`dx[i]`): that of the same expression over
    their primals (`x[i]`)."""

    class Primal(ast.NodeTransformer):
        def visit_Name(self, node):
            return ast.Name(primal_of.get(node.id, node.id), ast.Load())

    return lambda node: shapes.of(Primal().visit(clone(node)))


def _still_valid(compiled: Compiled, func) -> bool:
    """A cached transform is reused only if nothing it read has changed since: no rule was
    registered, every global name it resolved still names the same object, and every function it
    inlined still has the same code."""
    if compiled.rules_version != VERSION[0]:
        return False
    scopes = (func.__globals__,)
    for name, value in compiled.globals.items():
        if any(name in scope and scope[name] is not value for scope in scopes):
            return False
    for helper, code in compiled.inlined:
        if (
            helper.__code__ is not code
            or helper.__globals__.get(helper.__name__, helper) is not helper
        ):
            return False
    return True


def defined_functions(source: str) -> list[str]:
    """The names of the top-level functions `source` defines, in order."""
    return [n.name for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)]


def _compile(parsed, resolver, norm, source, name, key) -> Compiled:
    filename = f"<s2sad {name} of {parsed.filename}:{parsed.line_offset + parsed.tree.lineno}>"
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
    compiled = Compiled(
        namespace[name],
        source,
        name,
        norm.tuple_output,
        globals=user_globals,
        inlined=[(f, f.__code__) for f in resolver.inlined],
        rules_version=VERSION[0],
        functions={n.name: namespace[n.name] for n in tree.body if isinstance(n, ast.FunctionDef)},
    )
    _CACHE[key] = compiled
    return compiled


def transform(
    func, wrt: tuple[str, ...], mode: str, ranks: tuple | None = None, jit: bool = False
) -> Compiled:
    """Generate, compile and cache the `mode` transform: "grad", "value_and_grad", "vjp", "jvp",
    or "vjp_batched"/"jvp_batched" (every cotangent or tangent with a leading batch axis, for
    the one-sweep Jacobian)."""
    key = (func.__code__, id(func.__globals__), _closure_key(func), wrt, mode, ranks, jit)
    hit = _CACHE.get(key)
    if hit is not None and _still_valid(hit, func):
        return hit
    parsed = parse_function(func)
    unused = [parsed]

    def run() -> Compiled:  # a second run (with room) starts from a fresh parse
        with _without_gc_pauses():
            return _transform(
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


def _transform(parsed, wrt, mode, ranks, jit, key) -> Compiled:
    norm, resolver = normalize(parsed, list(wrt))
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
    )
    return _compile(parsed, resolver, norm, source, name, key)
