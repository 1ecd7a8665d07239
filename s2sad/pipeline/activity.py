"""Stage 3: activity analysis. A value is active if it depends on a `wrt` input through
differentiable operations and the output depends on it the same way; only active values get
adjoints. A value that is active but flows through a function with no rule is an error here,
at transform time, not a silently zero gradient later.
"""

from __future__ import annotations

import ast

import numpy as np

from .. import ir
from ..errors import NoRuleError, NonDifferentiableInputError, S2SADError, UnsupportedSyntaxError
from ..rules.indexing import getitem
from .dependence import dependents


def _mutating_call(stmt) -> bool:
    """`obj.method(...)` on a local object, as in `h.append(x)`: a mutation s2sad cannot see."""
    value = getattr(stmt, "value", None)
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and ir.callee(value.func) is None
        and isinstance(value.func.value, ast.Name)
    )


# NumPy functions that write into an argument (and return None, or the array written)
_IN_PLACE = {np.copyto, np.put, np.place, np.putmask, np.fill_diagonal, np.put_along_axis}
# ndarray methods that change the array they are called on (and `__iadd__` and its kin), each
# with the assignment of a new array that does the same where s2sad can follow it (`{y}`: the
# array's name)
_IN_PLACE_METHODS = {
    "sort": "`{y} = np.sort({y})`",
    "fill": "`{y} = np.full_like({y}, v)`",
    "put": "`{y}[i] = v` (put's indices count the elements of the flattened array)",
    "partition": "`{y} = np.partition({y}, k)`",
    "resize": "`{y} = {y}[:n]` to shrink it, `{y} = np.pad({y}, (0, k))` or `np.concatenate` to "
    "grow it with zeros as resize does, `.reshape(...)` for another shape",
    "itemset": "`{y}[i] = v`",
    "setfield": None,
    "byteswap": None,
}


def _writes_in_place(value, kind: str) -> bool:
    """An assigned call that may also write into an argument: an `out=` array, a NumPy function
    that writes (`z = np.copyto(y, v)`), or a method s2sad has no rule for on a local object
    (`z = y.sort()`, `z = y.fill(0.0)`): its result may be unused, its write is not."""
    if not isinstance(value, ast.Call):
        return False
    if any(k.arg == "out" and not _is_none(k.value) for k in value.keywords):
        return True
    if ir.callee(value.func) in _IN_PLACE or ir.callee(value.func) is np.random.shuffle:
        return True
    func = value.func
    return (
        kind == "unknown"
        and _mutating_call(ast.Expr(value))
        and (func.attr in _IN_PLACE_METHODS or func.attr.startswith("__i"))
    )


def _is_none(node) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def refuse_hidden_writes(parsed, ops, varied: set[str], followed=lambda stmt: False) -> None:
    """A call whose result is discarded is there for what it does to its arguments: given
    differentiated values, it may write them into an array (`np.copyto`, `np.put`, `np.add.at`,
    `out=`, a helper writing into its parameter) where the derivative cannot see it. Refuse it,
    rather than miss the write. `followed(stmt)` says which such calls the caller differentiates
    itself; printing is harmless. A write into an array no derivative flows through is
    refused too where a differentiated operation reads that array (`a = np.sin(u) * m`, then
    `m.sort()`): its derivative reads the array after the write."""
    needed = set().union(*(op.reads for op in ops if op.reads & varied))
    for op in ops:
        stmt = op.stmt
        if followed(stmt):
            continue
        if not op.reads & varied:
            written = _arrays_written(stmt) & needed
            if written:
                _refuse_write_into_read(parsed, stmt, sorted(written)[0])
            continue
        assigned = isinstance(stmt, ast.Assign) and _writes_in_place(stmt.value, op.kind)
        if not assigned and op.kind != "effect":
            continue
        if not (isinstance(stmt, (ast.Expr, ast.Assign)) and isinstance(stmt.value, ast.Call)):
            continue
        if ir.callee(stmt.value.func) is print:
            continue
        where = ir.src_parsed(stmt) or parsed
        call = ast.unparse(stmt.value.func)
        if _mutating_call(stmt) and not assigned:
            raise _mutation_error(where, stmt, call)
        raise where.error(
            UnsupportedSyntaxError,
            f"s2sad cannot see what `{call}(...)` writes into its arguments, and some of them "
            "are differentiated",
            ir.src(stmt),
            hint="write the update as an assignment s2sad follows (`y[i] = v`, `y = y + v`; "
            "for repeated indices a loop `for k in range(n): y[idx[k]] += v[k]`), or wrap "
            "values that need no derivative in s2sad.stop_gradient",
        )


def _mutation_error(where, stmt, call: str) -> UnsupportedSyntaxError:
    """`y.append(v)`, `y.resize(n)` as a statement: a change to a local object, told with the way
    to build a new one (an array's method has its own, a list's is filled by a loop)."""
    func = stmt.value.func
    if func.attr in _IN_PLACE_METHODS:
        instead = _IN_PLACE_METHODS[func.attr] or "`{y} = ...` of a new array"
        return where.error(
            UnsupportedSyntaxError,
            f"s2sad cannot follow differentiated values through `{call}(...)`, which changes "
            f"`{func.value.id}` in place",
            ir.src(stmt),
            hint="make a new array instead: " + instead.format(y=func.value.id),
        )
    return where.error(
        UnsupportedSyntaxError,
        f"s2sad cannot follow differentiated values through a mutable container (`{call}(...)`)",
        ir.src(stmt),
        hint="s2sad unrolls a loop filling a list where its trip count is known when it "
        "transforms the function (`range(3)`, a global int, `len` of a known list); otherwise "
        "collect the values in an array (np.zeros, then writes y[i] = v)",
    )


def _arrays_written(stmt) -> set[str]:
    """The names of arrays a call statement writes into: an in-place method's object
    (`m.sort()`), a writing function's first argument (`np.copyto(m, k)`), an `out=` array, a
    ufunc's positional out (`np.multiply(m, 3.0, m)`)."""
    value = getattr(stmt, "value", None)
    if not isinstance(stmt, (ast.Expr, ast.Assign)) or not isinstance(value, ast.Call):
        return set()
    func, found = value.func, []
    if isinstance(func, ast.Attribute) and func.attr in _IN_PLACE_METHODS:
        found.append(func.value)
    callee = ir.callee(func)
    if (callee in _IN_PLACE or callee is np.random.shuffle) and value.args:
        found.append(value.args[0])
    if isinstance(callee, np.ufunc) and len(value.args) > callee.nin:
        found += value.args[callee.nin :]
    found += [k.value for k in value.keywords if k.arg == "out"]
    return {n.id for n in found if isinstance(n, ast.Name)}


def _refuse_write_into_read(parsed, stmt, name: str):
    where = ir.src_parsed(stmt) or parsed
    raise where.error(
        UnsupportedSyntaxError,
        f"`{ast.unparse(stmt.value.func)}(...)` writes into `{name}` in place, and a "
        f"differentiated operation reads `{name}`: its derivative would read the values "
        "written after it",
        ir.src(stmt),
        hint=f"bind a new array instead (`{name} = np.sort({name})`, "
        f"`{name} = np.full_like({name}, v)`, `{name} = k.copy()`, "
        f"`{name} = np.multiply({name}, 3.0)`), which s2sad follows",
    )


def _sources(op) -> set[str]:
    """The names a statement's result depends on differentiably."""
    if op.kind in ("rule", "setitem"):
        return {name for _, _, name in op.operands}
    if op.kind == "unknown":
        return op.reads
    return set()


def _fixed(op) -> set[str]:
    """The names a rule's operation reads through parameters with no derivative."""
    return set().union(*op.fixed.values()) if op.kind == "rule" else set()


def active_names(parsed, ops, wrt: list[str], outputs: list[str]) -> set[str]:
    # loops and in-place writes assign a name more than once: see dependence.dependents
    sources = [_sources(op) for op in ops]
    varied = set(wrt) | dependents(
        wrt, [(sources[k], (op.target,)) for k, op in enumerate(ops) if op.target is not None]
    )
    # a value read by a parameter with no derivative is refused if differentiated, and an
    # unknown function making it is named then
    useful = set(outputs) | dependents(
        outputs,
        [
            ((op.target,), sources[k] | _fixed(op))
            for k, op in enumerate(ops)
            if op.target is not None
        ],
    )
    refuse_hidden_writes(parsed, ops, varied)
    for op in ops:
        if op.kind == "rule" and op.target in useful and op.nested & varied:
            _refuse_nested_in_user_rule(parsed, op, varied)
            raise S2SADError(  # normalization should have split it: refuse, never guess
                f"internal error: {op.what or 'an operation'} has a differentiated operand "
                "nested in an expression; please report this with the function",
                file=parsed.filename,
                line=parsed.file_line(ir.src(op.stmt)),
            )
        if op.target in useful:
            _refuse_keyed_read(parsed, op, varied)
        what = None
        if op.kind == "unknown" and op.target in useful and op.reads & varied:
            what = op.what or "this operation"
        elif op.kind == "rule" and op.target in useful:
            what = op.without_rule(varied)
        if what is not None:
            where = ir.src_parsed(op.stmt) or parsed  # inlined code: its own file
            raise where.error(
                NoRuleError,
                f"no derivative rule for {what}",
                ir.src(op.stmt),
                hint="use an operation s2sad knows (see s2sad.rules), wrap the value in "
                "s2sad.stop_gradient if no gradient should flow, or give the function a "
                "rule with s2sad.register_vjp",
            )
    return varied & useful


def _refuse_nested_in_user_rule(parsed, op, varied: set[str]) -> None:
    """A differentiated value inside an argument of a function with the user's vjp rule
    (`f((a, b))`, or a tuple tree passed on): the rule's cotangent of that argument would be a
    structure the adjoint cannot take apart yet, so it is refused, naming the rule."""
    rule = op.bound.rule
    if rule.user is None:
        return
    param, arg = next(
        (
            (p, a)
            for p, a in op.bound.args.items()
            if isinstance(a, ast.AST)
            and {n.id for n in ast.walk(a) if isinstance(n, ast.Name)} & varied
        ),
        (None, None),
    )
    if param is None:  # (not found in an argument: the caller's internal error)
        return
    kind = "list" if isinstance(arg, ast.List) else "tuple" if isinstance(arg, ast.Tuple) else None
    what = (
        f"a {kind} holding differentiated values"
        if kind
        else "an expression of differentiated values"
    )
    func = rule.name
    where = ir.src_parsed(op.stmt) or parsed
    raise where.error(
        UnsupportedSyntaxError,
        f"{func}'s argument `{param}` is {what}, and {func} has your vjp rule {rule.user}: "
        "s2sad gives a rule one array or number per parameter and cannot yet take a "
        f"{kind or 'structured'} cotangent apart",
        ir.src(op.stmt),
        hint=f"give {func} a parameter per array (and its rule a cotangent for each), or "
        f"differentiate {func} without a rule",
    )


def _refuse_keyed_read(parsed, op, varied: set[str]) -> None:
    """`p["W"]` of a differentiated `p`: a dict read as the array the code takes it for, where
    no call's arguments gave its structure (a tree argument's reads are its leaves by now), as
    in code made before any call; its adjoint would index an array by a string."""
    if not (op.func is getitem and len(op.args) == 2 and isinstance(op.args[1], ast.Constant)):
        return
    tree = op.args[0]
    if not isinstance(op.args[1].value, str) or not (
        isinstance(tree, ast.Name) and tree.id in varied
    ):
        return
    shown = parsed.original.get(tree.id, tree.id)
    where = ir.src_parsed(op.stmt) or parsed
    name = getattr(parsed.func, "__qualname__", parsed.name)
    raise where.error(
        NonDifferentiableInputError,
        f"{shown}, which is differentiated, is read by the string key {op.args[1].value!r}, as "
        "a dict, but this code takes it for an array: code made without example arguments "
        "(s2sad emit, or s2sad.source(g) before any call) does not know a tree's structure",
        ir.src(op.stmt),
        hint="give example arguments, from which s2sad learns the tree's structure (its "
        "gradient is then a tree like it): s2sad.source(g, *args) shows the code for them, and "
        f"`s2sad emit` reads them from an `inputs(rng)` function in the file returning "
        f"{{{name!r}: (args...)}} (as in examples/model_class.py)",
    )
