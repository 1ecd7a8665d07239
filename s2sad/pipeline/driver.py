"""The pipeline driver: it runs the stages in order, each in its own module,

    parse (-> treeparams, for parameter trees and has_aux) -> normalize -> analyze (classify,
    activity, ranks) -> reverse or forward -> tape -> optimize -> lower (jit only) -> fuse,
    row tapes and buffers made before loops (jit only: fusion/, row_tapes.py, hoist.py) or
    threads (parallel only: independence.py, parallel.py) -> emit -> load,

and refuses what a stage cannot take (`grad` of a tuple, code nesting too deeply). It consumes a
Python function and produces a `Compiled` (pipeline/load.py); the transform cache
(s2sad/transform_cache.py) calls it once per code object, wrt, mode, ranks and jit.
"""

from __future__ import annotations

import ast
import copy
import os

from .. import ir
from ..deep import DEEP, TooDeep, deepest_statement, depth, with_room
from ..errors import NestingTooDeepError, NonScalarOutputError, UnsupportedSyntaxError
from .accumulate import accumulate_in_place, extrema_in_place
from .activity import active_names
from . import bounds
from .bounds import checked, reverse_checked
from .checkpoint_loops import checkpoint_loops
from .classify import classify
from .emit import changes_primal, emit, emit_jvp
from .fusion import fuse
from .hoist import hoist_buffers
from .load import Compiled, load, without_gc_pauses
from .carried import assigned_before, carried_in_dtype, numbers_carried, numbers_in_dtype
from .lower import drop_constant_branches, jit_copy, lower_for_numba
from .promotions import dtype_kinds
from .names import assigned, names_mentioned, simple_statements
from .nodes import own_nodes
from .normalize import hygienic, normalize, reserved_names
from .normalize.fresh import taking_casts
from .numba_forms import NumbaForms
from .optimize import drop_unread, optimize, read_primal_values
from .independence import independent_loops
from .parallel import Threads, serial_note
from .parse import parse_function
from .integer_writes import certain_floats, drop_truncating_stores, refuse_float_updates
from .unbound_reads import refuse_unbound_reads
from .ranks import (
    adjoint_rank,
    drop_number_checks,
    infer_ranks,
    integer_arrays,
    scalar_output_ranks,
)
from .reuse import reuse_buffers
from .sum_first import sum_first
from .small_vectors import small_vectors
from .constant_cotangents import fold_constant_cotangents
from .list_cotangents import refuse_list_cotangents
from .reverse import reverse
from .snapshots import (
    FinalReads,
    final_reads_need_no_snapshot,
    rebound_reads_need_no_snapshot,
    scalar_reads_need_no_snapshot,
    shape_read_snapshots_need_no_copy,
)
from .tangent import Forward, prune
from .markers import without_markers
from .tape import copy_blocks, record
from .row_tapes import row_tapes
from .rows_before import rows_before
from .shape_tapes import shape_only_tapes
from .treeparams import flatten_parameters
from .treereturns import tree_returns, tuple_return_error
from .wrt_reads import refuse_unread_wrt

# Two forms the jitted code takes, where compiled code pays more for memory traffic than for
# arithmetic: cheap loop values are recomputed in the adjoint instead of recorded, and a read of
# an array that nothing writes afterwards is a view rather than a copy. S2SAD_JIT_FORMS=1 makes
# the Python code take them too, for testing them against the whole test suite.
_JIT_FORMS = os.environ.get("S2SAD_JIT_FORMS") == "1"
# Jitted code fuses elementwise runs into loop nests (pipeline/fusion/); S2SAD_FUSE=0 leaves
# them as array statements, to compare the two
_FUSE = os.environ.get("S2SAD_FUSE") != "0"
# NumPy-mode gradients write elementwise results into dying temporaries' arrays
# (pipeline/reuse.py); S2SAD_REUSE=0 leaves every result a fresh array, to compare the two
_REUSE = os.environ.get("S2SAD_REUSE") != "0"
# the modes of a scalar function's gradient ("checked_grad": a jitted grad, see emit)
_GRADS = ("grad", "value_and_grad", "checked_grad")


def differentiate(
    func,
    wrt: tuple[str, ...],
    mode: str,
    ranks=None,
    jit: bool = False,
    trees=(),
    has_aux=False,
    parallel: bool = False,
    reuse: bool = False,
    pooled: bool = True,
) -> Compiled:
    """The `mode` transform of `func`, generated and loaded (modes: transform_cache.transform).
    `trees`: (parameter, TreeDef, leaf names) per parameter passed as a tree's leaves (`wrt` and
    `ranks` name the leaves); `has_aux`: `func` returns `(value, aux)`, and the transform is of
    the value; `parallel` (with `jit`): independent loops run on threads (pipeline/parallel.py);
    `reuse` (NumPy-mode grad, value_and_grad and vjp): elementwise results go into dying
    temporaries' arrays (pipeline/reuse.py), for code that nothing differentiates again;
    `pooled=False` (jit): no function takes a workspace (numba_forms.py), which an `emit
    --jit` module's caller has none of.
    A function nesting deeply runs on a thread with room; the cyclic collector waits
    meanwhile."""

    def parse():
        parsed = parse_function(func, star=[p for p, _, _ in trees])
        if mode in _GRADS and not has_aux:
            pair = next(
                (
                    r
                    for r in own_nodes(parsed.tree)
                    if isinstance(r, ast.Return) and isinstance(r.value, ast.Tuple)
                ),
                None,
            )
            if pair is not None:  # before normalization refuses what aux holds (a dict)
                raise tuple_return_error(parsed, len(pair.value.elts))
            returns = [r for r in own_nodes(parsed.tree) if isinstance(r, ast.Return)]
            if tree_returns(parsed, refuse_named=False) is not None:  # `return {"l": l}`
                raise parsed.error(
                    NonScalarOutputError,
                    f"grad of {parsed.name} needs one scalar output, but {parsed.name} returns "
                    "a tree (a dict or namedtuple)",
                    returns[-1],
                    hint="return the scalar alone, or (value, aux) with has_aux=True; "
                    "s2sad.vjp and s2sad.jacobian take tree outputs",
                )
        if mode in ("vjp", "jvp", "vjp_batched", "jvp_batched") and not has_aux:
            parsed.output = tree_returns(parsed)  # `return {"a": u, "b": v}`: its leaves
        flatten_parameters(parsed, {p: (d, names) for p, d, names in trees}, has_aux)
        refuse_unread_wrt(parsed, wrt)
        checkpoint_loops(parsed, mode, differentiate, jit)
        refuse_unbound_reads(parsed)  # (after: a checkpointed loop's refusal names its carries)
        return parsed

    parsed = parse()
    unused = [parsed]

    def run() -> Compiled:  # a second run (with room) starts from a fresh parse
        with without_gc_pauses():
            parsed_ = unused.pop() if unused else parse()
            reused = reuse and _REUSE and not jit and mode in ("grad", "value_and_grad", "vjp")
            args = (wrt, mode, ranks, jit, jit and parallel, reused, pooled)
            try:
                compiled = _pipeline(parsed_, *args)
            except UnsupportedSyntaxError as refused:  # (`np.asarray(x, np.float32)`: fresh.py)
                rerun = lambda casts: _pipeline(parse(), *args, float_casts=casts)  # noqa: E731
                return taking_casts(refused, parsed_, ranks, rerun)
            note = serial_note(compiled) if jit and parallel else None
            if note is None:
                return compiled
            # no loop runs on threads: the serial build's code (fused, its indices checked
            # where not proven), which the unfused code on one thread only trails, with the
            # note saying why (the first call warns with it)
            compiled = _pipeline(parse(), wrt, mode, ranks, jit, False, reused, pooled, note)
            compiled.parallel = True
            return compiled

    try:
        return with_room(run, deep=depth(parsed.tree) > DEEP)
    except TooDeep:
        raise parsed.error(
            NestingTooDeepError,
            f"{parsed.name} nests too deeply for s2sad (an expression, or a chain of helpers "
            "calling each other, thousands of levels deep)",
            deepest_statement(parsed.tree),
            hint="split the longest expression into several statements (`s = a + b` then "
            "`s = s + c`), or call fewer helpers inside one another",
        ) from None


def _pipeline(
    parsed, wrt, mode, ranks, jit, parallel, reuse, pooled, note="", float_casts=None
) -> Compiled:
    """normalize -> classify -> forward or reverse mode (to the emitted source) -> load.
    `note`: a last comment for the source (why no loop of a parallel build runs on threads)."""
    hygienic(parsed, reserved_names(parsed.name))
    wrt, ranks = _renamed(parsed, wrt, ranks)
    float_numbers = refuse_float_updates(parsed, dict(ranks or ()), wrt)
    norm, resolver = normalize(parsed, list(wrt), ranks, float_casts)
    if mode in _GRADS and norm.tuple_output:
        raise tuple_return_error(parsed, len(norm.outputs))
    if jit:
        norm.stmts = drop_constant_branches(norm.stmts)
    simple = list(simple_statements(norm.stmts))
    local_names = set(norm.params) | assigned(norm.stmts)
    for stmt in simple:
        ir.set_op(stmt, classify(stmt, local_names))
    drop_truncating_stores(norm.stmts, dict(ranks or ()), [ir.op(s) for s in simple], wrt)
    norm.floats = certain_floats(norm.stmts, dict(ranks or ()), wrt) if jit else set()
    batched = mode in ("vjp_batched", "jvp_batched")
    if mode in ("jvp", "jvp_batched"):
        source, name, unfused, indexed, numba_checks = _forward_mode(
            parsed, norm, resolver, wrt, ranks, batched, jit, parallel, pooled
        )
    else:
        active = active_names(parsed, [ir.op(s) for s in simple], list(wrt), norm.outputs)
        source, name, unfused, indexed, numba_checks = _reverse_mode(
            parsed,
            norm,
            resolver,
            wrt,
            mode,
            ranks,
            batched,
            jit,
            active,
            local_names,
            parallel,
            reuse,
            pooled,
        )
    (source, slots), (unfused, unfused_slots) = source, unfused
    source, unfused = source + note, unfused + note
    compiled = load(parsed, resolver, norm, source, name)
    compiled.unfused_code = unfused if unfused != source else None
    compiled.slots, compiled.unfused_slots = slots, unfused_slots
    compiled.parallel = parallel
    compiled.indexed = indexed
    compiled.numba_checks = numba_checks
    compiled.float_numbers = float_numbers
    return compiled


def _forward_mode(
    parsed, norm, resolver, wrt, ranks, batched, jit, parallel, pooled
) -> tuple[str, str, str, bool]:
    """forward -> optimize -> lower -> fuse or threads -> emit: the tangent code's source, its
    function's name, (jitted) its source unfused, and whether it indexes by integers (its
    compiled code checks them: bounds.py)."""
    shapes = infer_ranks(norm.stmts, dict(ranks) if ranks else {})
    drop_number_checks(norm.stmts, shapes)
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
    fused, indexed, numba_checks = body, False, False
    if jit:  # a tangent has its primal's rank (batched code has a batch axis more: unknown)
        primal_of = {} if batched else {d: p for p, d in fwd.tangent.items()}
        rank_of = adjoint_rank(shapes, primal_of) if primal_of else shapes.of
        given = list(norm.params) + list(tangents_in) + list(resolver.reads.data.values())
        kinds = dtype_kinds(shapes, norm)
        body = numbers_carried(
            lower_for_numba(body, rank_of, kinds, shapes._is_int), rank_of, given
        )
        taken = set(norm.params) | set(tangents_in) | reserved_names(parsed.name)
        if parallel:  # loops on threads; their builds are not fused (yet)
            independent_loops(norm.stmts, norm.params, shapes.of, parsed)  # refuses a prange
            threads_taken = primal_names | names_mentioned(body + outputs) | norm.taken
            params = list(norm.params) + list(tangents_in)
            # (indices checked first: a loop holding a check stays serial, independence.py)
            [body], indexed, numba_checks = checked(
                [body], rank_of, shapes.kind, primal_of, given, batched
            )
            threads = Threads(threads_taken, rank_of, unchecked=numba_checks)
            body = threads.primal(body, params)
        # (after threads: a reduction on threads is told by its own pattern, parallel.py)
        body = numbers_in_dtype(body, rank_of, taken | names_mentioned(body), given)
        if not parallel:
            [body], indexed, numba_checks = checked(
                [body], rank_of, shapes.kind, primal_of, given, batched
            )
        fused = body
        if not parallel and _FUSE:
            reads = outputs + [ast.Name(o, ast.Load()) for o in norm.outputs]
            [fused] = fuse([body], rank_of, reads, taken, integer_arrays(shapes))
            named = taken | names_mentioned(fused) | norm.taken
            [fused] = hoist_buffers([fused], reads, given, named, rank_of)
    name = f"{'jvp_batched' if batched else 'jvp'}_{parsed.name}"
    data = list(resolver.reads.data.values())

    def emitted(body) -> tuple[str, dict]:
        slots, workspace = {}, {}
        forms = _forms(parsed, body + outputs, rank_of, indexed, data, pooled) if jit else None
        if forms is not None:
            [body], slots[name] = forms.function(body)
            workspace[name] = forms.parameter(slots[name])
        args = (parsed, norm, body, list(wrt), tangents_in, outputs, name, fwd.batch, data)
        return emit_jvp(*args, jit=jit, workspace=workspace), _counted(slots)

    unfused = emitted(body)
    if jit and parallel:  # (where no loop runs on threads, why: the first call warns)
        unfused = (threads.noted(unfused[0]), unfused[1])
    if fused is body:
        return unfused, name, unfused, indexed, numba_checks
    return emitted(fused), name, unfused, indexed, numba_checks


def _reverse_mode(
    parsed,
    norm,
    resolver,
    wrt,
    mode,
    ranks,
    batched,
    jit,
    active,
    local_names,
    parallel,
    reuse,
    pooled,
) -> tuple[str, str, str, bool]:
    """reverse -> tape -> optimize (buffer reuse) -> lower -> fuse -> emit: the adjoint code's
    source, its function's name, (jitted) its source unfused, and whether it indexes by
    integers (its compiled code checks them: bounds.py)."""
    if mode in ("grad", "value_and_grad", "checked_grad"):  # (the output a number: grad_seed)
        shapes = scalar_output_ranks(norm.stmts, dict(ranks or ()), norm.outputs[0])
    else:
        shapes = infer_ranks(norm.stmts, dict(ranks) if ranks else {})
    drop_number_checks(norm.stmts, shapes)
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
    plain = copy_blocks(norm.stmts)  # the primal before the tape pass adds its pushes
    # loops to run on threads (and a prange the user wrote that cannot be is refused here)
    threaded = independent_loops(norm.stmts, norm.params, shapes.of, parsed) if parallel else ()
    primal, tape_inits = _tapes(norm, adjoint, shapes, jit, threaded)
    protected = (
        local_names
        | set(adjoint.seeds)
        | {t.targets[0].id for t in tape_inits}
        | names_mentioned(adjoint.grads)
    )
    adjoint.stmts = optimize(adjoint.stmts, protected)
    adjoint.stmts = read_primal_values(primal, adjoint.stmts, norm.params)
    refuse_list_cotangents(parsed, adjoint.stmts)
    # a jitted pullback is always the re-running sweep: Numba compiles no closures
    rerun = mode in ("vjp", "vjp_batched") and (jit or changes_primal(adjoint.stmts, local_names))
    # the sweep computes only what its adjoint or output reads (not a dropped tuple element),
    # before reuse could take a dead array as spare memory; a re-running sweep's value is elsewhere
    kept = names_mentioned(adjoint.grads) | (set() if rerun else set(norm.outputs))
    primal = drop_unread(primal, tape_inits + adjoint.stmts, kept, rerun)
    if reuse:  # (NumPy mode, grad, value_and_grad and vjp only: see differentiate)
        closure = mode == "vjp" and not rerun
        primal = _reused(norm, adjoint, primal, tape_inits, shapes, closure)
    if jit:
        adjoint_ranks = adjoint_rank(shapes, adjoint.primal_of)
        kinds = dtype_kinds(shapes, norm)  # ("?": dtypes the compiled helpers read, promotions.py)
        adjoint.stmts = lower_for_numba(adjoint.stmts, adjoint_ranks, kinds, shapes._is_int)
        in_use = protected | names_mentioned(primal + adjoint.stmts) | norm.taken
        params = list(norm.params) + list(resolver.reads.data.values()) + list(adjoint.seeds)
        given = assigned_before(primal, params)
        adjoint.stmts = carried_in_dtype(
            adjoint.stmts, adjoint.primal_of, in_use, adjoint_ranks, given
        )
        adjoint.stmts = numbers_carried(adjoint.stmts, adjoint_ranks, given)
        primal = numbers_carried(
            lower_for_numba(primal, shapes.of, kinds, shapes._is_int), shapes.of, params
        )
        if rerun:  # the value function a re-running pullback's vjp returns with it
            plain = numbers_carried(
                lower_for_numba(plain, shapes.of, kinds, shapes._is_int), shapes.of, params
            )
        if not parallel:  # (on threads, after them: a reduction there has its own pattern)
            adjoint.stmts = numbers_in_dtype(adjoint.stmts, adjoint_ranks, in_use, given)
            primal = numbers_in_dtype(primal, shapes.of, in_use, params)
            plain = numbers_in_dtype(plain, shapes.of, in_use, params) if rerun else plain
        tape_inits, (primal, adjoint.stmts) = shape_only_tapes(
            tape_inits, [primal, adjoint.stmts], norm.params, shapes.of
        )
        if not parallel:  # (threads add into rows of their own)
            adjoint.stmts = accumulate_in_place(adjoint.stmts, adjoint_ranks, protected)
            adjoint.stmts = extrema_in_place(adjoint.stmts, adjoint_ranks, protected)
    if rerun:  # (again: what lowering left unread)
        primal = drop_unread(primal, tape_inits + adjoint.stmts, kept, rerun)
    name = f"{mode}_{parsed.name}"
    data = list(resolver.reads.data.values())
    bound = list(norm.params) + data + list(adjoint.seeds)
    if parallel:
        # indices checked before threads: a loop holding a check stays serial (independence.py)
        primal, adjoint.stmts, plain, indexed, numba_checks = reverse_checked(
            primal, adjoint, plain, rerun, shapes, adjoint_ranks if jit else None, bound, batched
        )
        taken = protected | names_mentioned(primal + adjoint.stmts) | norm.taken
        threads = Threads(taken, adjoint_ranks, unchecked=numba_checks)
        if rerun:
            plain = threads.primal(plain, norm.params, adjoint.stmts)
        primal = threads.primal(primal, norm.params, adjoint.stmts)
        adjoint.stmts = threads.adjoint(adjoint.stmts)
        if jit:  # each serial loop's numbers in NumPy's dtype, as in a build without threads
            in_use = taken | names_mentioned(primal + adjoint.stmts + plain)
            given = assigned_before(primal, params)
            adjoint.stmts = numbers_in_dtype(adjoint.stmts, adjoint_ranks, in_use, given)
            primal = numbers_in_dtype(primal, shapes.of, in_use, params)
            plain = numbers_in_dtype(plain, shapes.of, in_use, params) if rerun else plain

    # many seeds from one point in one compiled call: the adjoint looped over them, where it
    # reads no tape, writes no primal value and every input is an array (Pullback.stacked)
    given = dict(ranks or ())
    rows = (
        rerun
        and jit
        and mode == "vjp"
        and not parallel
        and not tape_inits
        and not norm.tuple_output
        and len(adjoint.seeds) == 1
        and all(isinstance(given.get(x), int) and given[x] >= 1 for x in wrt)
        and not changes_primal(adjoint.stmts, local_names)
    )

    def emitted(primal, adjoint, plain, tape_inits=tape_inits) -> tuple[str, dict]:
        """The source of these statements, and its functions' workspace slots (jit)."""
        slots, rows_code = {}, None
        code = tape_inits + primal + adjoint.stmts + (plain if rerun else [])
        forms = _forms(parsed, code, adjoint_ranks, indexed, data, pooled) if jit else None
        if forms is not None:
            if rerun:
                [plain], slots[name] = forms.function(plain)
            if rows:  # (its adjoint runs once per row: left as it is)
                [rows_primal], slots[f"{name}_rows"] = forms.function(primal)
                rows_code = (rows_primal, adjoint)
            whole = f"{name}_sweep" if rerun else name
            adjoint = copy.copy(adjoint)
            [tape_inits, primal, adjoint.stmts], slots[whole] = forms.function(
                tape_inits, primal, adjoint.stmts, adjoint=True
            )
        workspace = {fn: forms.parameter(count) for fn, count in slots.items()}
        return emit(
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
            data=data,
            rows=rows,
            workspace=workspace,
            rows_code=rows_code,
        ), _counted(slots)

    if not parallel:
        primal, adjoint.stmts, plain, indexed, numba_checks = reverse_checked(
            primal, adjoint, plain, rerun, shapes, adjoint_ranks if jit else None, bound, batched
        )
    source = emitted(primal, adjoint, plain)
    if parallel:  # (where no loop runs on threads, why: the first call warns)
        source = (threads.noted(source[0]), source[1])
    if not jit or parallel or not _FUSE:  # builds on threads are not fused (yet)
        return source, name, source, indexed, numba_checks
    # the sweep fused: the unfused source is kept for where Numba cannot type the fused one
    reads = [ast.Name(o, ast.Load()) for o in norm.outputs] + [
        g for g in adjoint.grads if isinstance(g, ast.AST)
    ]
    taken = set(norm.params) | set(adjoint.seeds) | set(data) | reserved_names(parsed.name)
    taken |= names_mentioned([t for t in tape_inits if isinstance(t, ast.AST)])
    kinds = set(norm.outputs) if mode == "checked_grad" else set()  # (grad_seed, output_kind)
    fused_primal, fused_adjoint = fuse(
        [primal, adjoint.stmts], adjoint_ranks, reads, taken, integer_arrays(shapes), kinds
    )
    fused = copy.copy(adjoint)
    # the fused code keeps loops' tapes in rows; the unfused code, its fallback, keeps lists
    row_inits, fused_primal, fused.stmts = row_tapes(
        tape_inits,
        fused_primal,
        fused_adjoint,
        taken | names_mentioned(fused_primal + fused_adjoint) | norm.taken,
        adjoint_ranks,
    )
    # the fused runs' arrays in loops made once before them, where nothing outlives an iteration
    fused_primal, fused.stmts = hoist_buffers(
        [fused_primal, fused.stmts],
        reads,
        list(norm.params) + list(data) + list(adjoint.seeds),
        taken | names_mentioned(row_inits + fused_primal + fused.stmts) | norm.taken,
        adjoint_ranks,
    )
    # the rows of values written into those buffers made before their loops too
    fused_primal = rows_before(fused_primal)
    if rerun:  # the value function a re-running pullback's vjp returns, fused on its own
        outputs = [ast.Name(o, ast.Load()) for o in norm.outputs]
        [plain] = fuse(
            [plain], adjoint_ranks, outputs, taken - set(adjoint.seeds), integer_arrays(shapes)
        )
    return emitted(fused_primal, fused, plain, row_inits), name, source, indexed, numba_checks


def _forms(parsed, code: list, rank_of, indexed: bool, data, pooled: bool) -> NumbaForms:
    """The pass writing jitted code's workspace and mask checks (numba_forms.py) for code of
    these statements: no workspace where not asked for, or where the functions' parameters take
    no positional one after them (`*args`, keyword-only ones)."""
    a = parsed.tree.args
    pooled = pooled and a.args and not (a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs)
    names = names_mentioned([s for s in code if isinstance(s, ast.AST)]) | set(data)
    names |= {p.arg for p in a.posonlyargs + a.args + a.kwonlyargs}
    given = {p.arg for p in a.posonlyargs + a.args + a.kwonlyargs} | set(data)
    return NumbaForms(names, rank_of, bounds.BOUNDSCHECK and indexed, bool(pooled), given)


def _counted(slots: dict) -> dict:
    """The functions taking a workspace, and their slots."""
    return {fn: count for fn, count in slots.items() if count}


def _reused(norm, adjoint, primal, tape_inits, shapes, closure: bool) -> list:
    """Constant cotangents' arithmetic on their number (pipeline/constant_cotangents.py), sums
    before products (pipeline/sum_first.py), buffer reuse (pipeline/reuse.py, small_vectors.py), over
    the primal and the adjoint, which they rewrite in place; returns the primal. A pullback `closure` runs its adjoint once per call over the
    primal's values: only arrays the adjoint itself makes serve it, never the primal's."""
    keep = set(norm.params) | set(norm.outputs) | set(adjoint.seeds)
    keep |= names_mentioned([g for g in adjoint.grads if isinstance(g, ast.AST)])
    keep |= names_mentioned([t for t in tape_inits if isinstance(t, ast.AST)])
    if closure:
        keep |= assigned(norm.stmts) | assigned([s for s in primal if isinstance(s, ast.AST)])
    rank_of = adjoint_rank(shapes, adjoint.primal_of)
    primal, adjoint.stmts = fold_constant_cotangents(
        [primal, adjoint.stmts], rank_of, keep, adjoint.primal_of
    )
    primal, adjoint.stmts = sum_first([primal, adjoint.stmts])
    primal, adjoint.stmts = reuse_buffers([primal, adjoint.stmts], rank_of, keep, adjoint.primal_of)
    adjoint.stmts = small_vectors(primal, adjoint.stmts, shapes.of)
    return primal


def _tapes(norm, adjoint, shapes, jit: bool, threaded=()):
    """The tape pass: drops the snapshot copies no later write needs, then records what the
    adjoint reads of overwritten values (filling `adjoint`'s markers). Returns the primal with
    its pushes and the tapes' initializations."""
    taken = norm.taken | names_mentioned([ast.Module(without_markers(adjoint.stmts), [])])
    scalar_reads_need_no_snapshot(norm.stmts, shapes)
    rebound_reads_need_no_snapshot(norm.stmts)
    if jit or _JIT_FORMS:  # (NumPy mode keeps the copies: forward mode over it refuses views)
        shape_read_snapshots_need_no_copy(
            norm.stmts, without_markers(adjoint.stmts), set(norm.params) | set(norm.outputs)
        )
        finals = FinalReads(norm.stmts, norm.params, shapes._is_int)
        final_reads_need_no_snapshot(norm.stmts, finals.final)
    primal, adjoint.stmts, tape_inits = record(
        norm.stmts,
        adjoint.stmts,
        taken,
        scalar=lambda name: shapes.get(name) == 0,
        owned=norm.params,
        saved=(lambda read: jit_copy(read, shapes.of(read))) if jit else None,
        recompute=jit or _JIT_FORMS,
        is_int=shapes._is_int,
        threaded=threaded,
        returned=names_mentioned(adjoint.grads),
    )
    return primal, tape_inits


def _renamed(parsed, wrt, ranks):
    """`wrt` and `ranks` by the names the generated code gives the parameters (`hygienic`)."""
    new = {old: new for new, old in parsed.original.items()}
    wrt = tuple(new.get(w, w) for w in wrt)
    if ranks is not None:
        ranks = tuple((new.get(p, p), r) for p, r in ranks)
    return wrt, ranks
