"""Part of lowering for Numba (jit only): the values a loop carries from one iteration to the
next, given one type before the loop as Numba requires of a name. An adjoint loop's cotangent
keeps the dtype Python mode carries it in (`carried_in_dtype`), and a 0-d array a loop carries
is a number from the start (`numbers_carried`), as it is after one step.

Only names certainly assigned before the loop are touched: a statement placed before the loop
reads them (a name the loop assigns on one iteration and reads on a later one is not).
"""

from __future__ import annotations

import ast

from .. import ir
from .names import certainly_assigned, names_read
from .nodes import load_name


def carried_in_dtype(stmts: list, primal_of: dict, taken: set, rank_of, given=()) -> list:
    """The adjoint's loops with each cotangent they carry from one iteration to the next kept in
    one dtype: `dy_entry = dy` first in the body, `dy = in_dtype_of(dy, dy_entry)` last. Numba
    types a name once, and a float32 cotangent meeting a Python float (`dy * (h / 6.0)`) is
    float64 there, where NumPy keeps float32: without the cast the loop does not compile. Where
    a float64 array it meets makes it float64 in NumPy too (`dy * w`), it is widened before the
    loop (`dy = widened_by(dy, w.dtype)`, of the arrays assigned before the loop that its step reads), so
    the loop carries it in float64 as Python mode does (but for the first step's products with
    float32 arrays, which Python computes in float32). Numbers unify (float32 and float64 make a
    float64): arrays only. (The primal's own values are left as they are: where NumPy itself
    widens them, so does Numba. `taken`: the names in use, mutated; `given`: the names assigned
    before `stmts` run.)"""

    def block(body: list, defined: set) -> list:
        wide = set()  # sums a loop adds into, float64 from the start (`sum_zeros_like`)
        out, defined = [], set(defined)
        for stmt in body:
            if isinstance(stmt, (ast.For, ast.While)):
                stmt.body = block(stmt.body, defined | _loop_targets(stmt))
                widen, stmt.body = _kept(stmt.body, wide, defined)
                out += [ir.copy_origin(w, stmt) for w in widen]
            elif isinstance(stmt, ast.If):
                stmt.body, stmt.orelse = block(stmt.body, defined), block(stmt.orelse, defined)
            elif isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name):
                call = getattr(stmt.value, "func", None)
                if isinstance(call, ast.Name) and call.id == "sum_zeros_like":
                    wide.add(stmt.targets[0].id)
            defined |= certainly_assigned([stmt])
            out.append(stmt)
        return out

    def _kept(body: list, wide: set, defined: set) -> tuple[list, list]:
        code = [s for s in body if isinstance(s, ast.AST)]
        seen, carried = set(), []
        for stmt in code:
            fresh = names_read([stmt]) - seen - wide
            carried += sorted(
                n for n in fresh if n in primal_of and rank_of(ast.Name(n, ast.Load())) != 0
            )
            seen |= certainly_assigned([stmt])
        widen, first, last = [], [], []
        for name in dict.fromkeys(n for n in carried if n in seen & defined):
            arrays = sorted(
                a
                for a in (step_reads(code, name) & defined) - {name}
                if (rank_of(ast.Name(a, ast.Load())) or 0) > 0  # (not a tape, not a function)
            )
            if arrays:
                dtypes = [ast.Attribute(load_name(a), "dtype", ast.Load()) for a in arrays]
                args = [load_name(name)] + dtypes  # (dtypes: no array passed, none aliased)
                widen.append(_assign(name, ast.Call(load_name("widened_by"), args, []), code[0]))
            at_entry, cast_back = kept_in_entry_dtype(name, taken, code)
            first.append(at_entry)
            last.append(cast_back)
        return widen, first + body + last

    return block(list(stmts), set(given))


def numbers_carried(stmts: list, rank_of, given=()) -> list:
    """Each loop's carried values of rank 0 as numbers before it (`s = as_number(s)`): a 0-d
    array (`np.zeros(())`, a 0-d input) is a number after a step of `s = s + x` in compiled code,
    as in NumPy, and Numba gives a name one type. (`given`: the names assigned before `stmts`.)"""

    def block(body: list, defined: set) -> list:
        out, defined, numbers = [], set(defined), set()
        for stmt in body:
            if isinstance(stmt, (ast.For, ast.While)):
                stmt.body = block(stmt.body, defined | _loop_targets(stmt))
                code = [s for s in stmt.body if isinstance(s, ast.AST)]
                seen, carried = set(), []
                for s in code:
                    carried += sorted(names_read([s]) - seen)
                    seen |= certainly_assigned([s])
                for name in dict.fromkeys(n for n in carried if n in seen & defined - numbers):
                    if rank_of(ast.Name(name, ast.Load())) == 0:
                        call = ast.Call(load_name("as_number"), [load_name(name)], [])
                        out.append(ir.copy_origin(_assign(name, call, stmt), stmt))
            elif isinstance(stmt, ast.If):
                stmt.body, stmt.orelse = block(stmt.body, defined), block(stmt.orelse, defined)
            assigned = certainly_assigned([stmt])
            defined |= assigned
            numbers -= assigned
            if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant):
                numbers |= assigned  # (`s = 0.0`: a number already)
            out.append(stmt)
        return out

    return block(list(stmts), set(given))


def numbers_in_dtype(stmts: list, rank_of, taken: set, given=()) -> list:
    """Each loop's carried float numbers kept in the dtype NumPy carries them in: widened before
    the loop by the values its step reads (`s = widened_by(s, x.dtype, c)`), `s_entry = s`
    first in the body and `s = in_dtype_of(s, s_entry)` last. Numba unifies a float32 number
    meeting a Python float (`s + np.sum(x) * 0.5`) into a float64 where NumPy keeps float32,
    and arrays computed from it on the way are typed float32, then float64, which Numba
    refuses. (A float64 number the step reads widens it from the start, as a np.float64 does
    in NumPy; a Python float does not in NumPy, so there the value is float64 as before.) A
    `prange` loop's numbers are its sums on threads, in the form Numba's reductions take
    (`s += c`: pipeline/parallel.py): left as they are; the loops in its body are kept."""

    def block(body: list, defined: set) -> list:
        out, defined, counts = [], set(defined), set()
        for stmt in body:
            if isinstance(stmt, (ast.For, ast.While)):
                stmt.body = block(stmt.body, defined | _loop_targets(stmt))
                if not _on_threads(stmt):
                    widen, stmt.body = _kept(stmt, defined - counts)
                    out += widen
            elif isinstance(stmt, ast.If):
                stmt.body, stmt.orelse = block(stmt.body, defined), block(stmt.orelse, defined)
            assigned = certainly_assigned([stmt])
            defined |= assigned
            counts -= assigned
            if isinstance(stmt, ast.Assign) and isinstance(getattr(stmt.value, "value", 0.0), int):
                counts |= assigned  # (`k = 0`: an integer count, no float to keep)
            out.append(stmt)
        return out

    def _kept(loop, defined: set) -> tuple[list, list]:
        code = [s for s in loop.body if isinstance(s, ast.AST)]
        seen, carried = set(), []
        for stmt in code:
            carried += sorted(names_read([stmt]) - seen)
            seen |= certainly_assigned([stmt])
        widen, first, last = [], [], []
        for name in dict.fromkeys(n for n in carried if n in seen & defined):
            if rank_of(ast.Name(name, ast.Load())) != 0:
                continue
            reads = {a: rank_of(ast.Name(a, ast.Load())) for a in step_reads(code, name)}
            args = [load_name(name)] + [  # (dtypes of arrays: no array passed, none aliased)
                ast.Attribute(load_name(a), "dtype", ast.Load()) if rank else load_name(a)
                for a, rank in sorted(reads.items())
                if a != name and a in defined and rank is not None
            ]
            if len(args) > 1:
                call = ast.Call(load_name("widened_by"), args, [])
                widen.append(ir.copy_origin(_assign(name, call, loop), loop))
            at_entry, cast_back = kept_in_entry_dtype(name, taken, code)
            first.append(at_entry)
            last.append(cast_back)
        return widen, first + loop.body + last

    return block(list(stmts), set(given))


def _on_threads(loop) -> bool:
    """A `for ... in prange(...)` loop (pipeline/parallel.py writes them)."""
    it = getattr(loop, "iter", None)
    return isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "prange"


def assigned_before(stmts: list, params) -> set:
    """The parameters and the names `stmts` (a function's top level) certainly assign."""
    return set(params) | certainly_assigned(stmts)


def _loop_targets(loop) -> set:
    target = getattr(loop, "target", None)
    return {n.id for n in ast.walk(target) if _stored(n)} if target is not None else set()


def _stored(node) -> bool:
    return isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)


def step_reads(code: list, name: str) -> set:
    """The names a loop body's new value of `name` is computed from, through the values the
    body assigns (each statement's reads, where it assigns one of them)."""
    needed, grew = {name}, True
    while grew:
        grew = False
        for stmt in code:
            targets = {n.id for n in ast.walk(stmt) if _stored(n)}
            if targets & needed and not names_read([stmt]) <= needed:
                needed |= names_read([stmt])
                grew = True
    return needed


def _assign(name: str, value: ast.expr, like: ast.stmt) -> ast.Assign:
    return ir.copy_origin(ast.Assign([ast.Name(name, ast.Store())], value), like)


def kept_in_entry_dtype(name: str, taken: set, code: list) -> tuple:
    """`name_entry = name` at the top of a loop's body and `name = in_dtype_of(name,
    name_entry)` at its end: the value a loop carries keeps the dtype it enters with."""
    entry = f"{name}_entry"
    while entry in taken:
        entry += "_"
    taken.add(entry)
    cast = ast.Call(load_name("in_dtype_of"), [load_name(name), load_name(entry)], [])
    return _assign(entry, load_name(name), code[0]), _assign(name, cast, code[-1])
