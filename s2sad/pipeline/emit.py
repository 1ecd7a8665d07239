"""Stage 5: emit. Assemble the primal and adjoint sweeps into one function, a comment above each
block naming the user's line. The text is compiled as it is; black formats it only when someone
reads it (`Compiled.source`), which keeps the transform fast. `changes_primal` decides the
pullback's form: a closure over the primal's scope, or a sweep that runs the primal again.
"""

from __future__ import annotations

import ast
import functools

import black

from .. import ir
from ..astcopy import clone, walk_nodes
from .names import assigned, names_mentioned, names_read
from .markers import without_markers
from .maybe_unbound import unbound_lines


def _where(parsed) -> str:
    """The function's name and where it is from, for the docstring: its file and line, or, for
    code s2sad wrote (a Hessian's forward sweep over a gradient), the user's line behind it."""
    name = parsed.filename
    if parsed.loop_of is not None:  # a checkpointed loop's segment: where the loop is
        return f"{parsed.name} ({parsed.loop_of[0].rsplit('/', 1)[-1]}:{parsed.loop_of[1]})"
    if name.startswith("<") and name.endswith(">"):
        inner = name[1:-1]
        if inner.startswith("s2sad ") and " of " in inner:
            inner = f"s2sad's code for {inner.split(' of ', 1)[1].rsplit('/', 1)[-1]}"
        return f"{parsed.name} ({inner})"
    return f"{parsed.name} ({name.rsplit('/', 1)[-1]}:{parsed.line_offset + parsed.tree.lineno})"


def docstring(text: str) -> str:
    """`text` as a string literal for generated code: a plain triple-quoted docstring where the
    text can be pasted between the quotes as it is, else its `repr` (a file or function name
    holding quotes, backslashes or control characters must never become code)."""
    lines = text.split("\n")
    if all(line.isprintable() for line in lines) and "\\" not in text and '"' not in text:
        return f'"""{text}"""'
    return repr(text)


def _is_literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
        return True
    except ValueError:
        return False


def _parameters(tree: ast.FunctionDef, extra=(), last=(), jit: bool = False) -> str:
    """The user's parameter list with its literal defaults, then the `extra` positional ones
    (tangents, the user's data: `=None` after parameters with defaults), then `last` as given
    (`workspace=None`); a non-literal default is dropped (with those before it), since s2sad's
    wrapper always passes every argument. Jitted, keyword-only parameters come before `extra`
    as positional ones: jit.py passes every argument by position in that order (Numba's
    dispatcher, and the Python fallback, would otherwise bind a tangent to `scale` of
    `f(x, *, scale)`)."""
    args = clone(tree.args)
    for a in args.posonlyargs + args.args + args.kwonlyargs:
        a.annotation = None
    if jit and args.kwonlyargs and args.vararg is None:
        positional = len(args.posonlyargs) + len(args.args)
        given = [None] * (positional - len(args.defaults)) + args.defaults + args.kw_defaults
        args.args += args.kwonlyargs
        args.kwonlyargs, args.kw_defaults = [], []
        args.defaults = []
        for d in reversed(given):  # (the defaults a positional list can keep: a suffix)
            if d is None:
                break
            args.defaults.insert(0, d)
    literal = [_is_literal(d) for d in args.defaults]
    while literal and not all(literal):
        literal.pop(0)
        args.defaults.pop(0)
    args.kw_defaults = [d if d is not None and _is_literal(d) else None for d in args.kw_defaults]
    args.args += [ast.arg(name) for name in extra]
    if args.defaults:
        args.defaults += [ast.Constant(None) for _ in extra]
    return ", ".join(t for t in (ast.unparse(args), *last) if t)


class _Lines:
    """Statements to indented source lines, with one comment per run of the same user line."""

    def __init__(self, parsed):
        self.parsed = parsed

    def label(self, src, src_parsed) -> str:
        parsed = src_parsed or self.parsed
        if isinstance(src, (ast.If, ast.For, ast.While)):
            line, text = parsed.opening_line(src)
        else:
            line, text = parsed.file_line(src), parsed.text_of(src)
        if parsed.name != self.parsed.name or parsed.filename != self.parsed.filename:
            return f"# {parsed.name}, line {line}: {text}"
        return f"# line {line}: {text}"

    def block(self, stmts, indent: str, parent_src=None) -> list[str]:
        """Lines of code for `stmts`; empty when they hold no code (comments alone are none)."""
        lines: list[str] = []
        previous, shown = parent_src, None
        for stmt in stmts:
            src = ir.src(stmt)
            code = self.statement(stmt, indent, src)
            if not code:
                continue
            if src is not None and src is not previous:
                label = indent + self.label(src, ir.src_parsed(stmt))
                if label != shown:  # two statements made of one line (a tree's return) share it
                    lines.append(label)
                previous, shown = src, label
            lines += code
        return lines

    def statement(self, stmt, indent: str, src) -> list[str]:
        inner = indent + "    "
        if isinstance(stmt, ast.If):
            test = stmt.test
            body = self.block(stmt.body, inner, src)
            orelse = self.block(stmt.orelse, inner, src)
            if not body and not orelse:
                return []
            if not body:
                test, body, orelse = ast.UnaryOp(ast.Not(), test), orelse, []
            out = [f"{indent}if {ast.unparse(test)}:"] + body
            if orelse:
                out += [f"{indent}else:"] + orelse
            return out
        if isinstance(stmt, (ast.For, ast.While)):
            body = self.block(stmt.body, inner, src)
            if not body and ir.is_adjoint(stmt):
                return []  # an adjoint loop with nothing to do
            if isinstance(stmt, ast.For):
                head = f"{indent}for {ast.unparse(stmt.target)} in {ast.unparse(stmt.iter)}:"
            else:
                head = f"{indent}while {ast.unparse(stmt.test)}:"
            return [head] + (body or [inner + "pass"])
        return [indent + _unparse_statement(stmt)]


def _unparse_statement(stmt: ast.stmt) -> str:
    """`ast.unparse` of a generated statement. It reads a statement's line number (to look up a
    type comment), nothing below it: setting that one, rather than every node's with
    `ast.fix_missing_locations`, costs nothing, where the full walk cost a tenth of the
    transform."""
    if getattr(stmt, "lineno", None) is None:
        stmt.lineno = 1
    try:
        return ast.unparse(stmt)
    except AttributeError:  # a statement nested in it (a `def`'s body) without its line
        return ast.unparse(ast.fix_missing_locations(stmt))


def _data_note(parsed, data, last=()) -> str:
    """The docstring's word on the data parameters and the workspace (`last`), where there are
    any."""
    lines = [f"{', '.join(data)}: what {parsed.name} reads from its scope, passed in at each call."]
    lines = lines if data else []
    lines += [
        f"{p.split('=')[0]}: memory s2sad keeps between calls for its large arrays (None: fresh)."
        for p in last
    ]
    return "".join(
        f"\n\n    {line}" if k == 0 else f"\n    {line}" for k, line in enumerate(lines)
    ) + ("\n    " if lines else "")


def _own_copies(names, stmts, indent: str) -> list[str]:
    """`a = a.copy()` for each parameter the code writes into, so the caller's array (and a
    pullback's saved argument) stays as it was."""
    written = set()
    for stmt in stmts:
        for node in walk_nodes(stmt) if isinstance(stmt, ast.AST) else ():
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
                while isinstance(node, ast.Subscript):
                    node = node.value
                if isinstance(node, ast.Name):
                    written.add(node.id)
    return [
        f"{indent}{n} = {n}.copy()  # written in place below; the caller's array stays unchanged"
        for n in names
        if n in written
    ]


def _parameter_names(tree: ast.FunctionDef) -> list[str]:
    args = tree.args
    return [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]


def _held(jit: bool):
    """`held(stmts, bound, indent, after)`: the lines binding to `unbound("y")` each name the
    statements may read where no path bound it (maybe_unbound.py); none in jitted code, where
    Numba reads a value no line computed there, which nothing then reads."""

    def held(stmts, bound, indent="    ", after=()) -> list[str]:
        bound = [b for b in bound if b is not None]
        return (
            [] if jit else unbound_lines(stmts, bound, indent, [a for a in after if a is not None])
        )

    return held


def _closure(adjoint) -> ast.FunctionDef:
    """The pullback a vjp returns, as a tree, for the names of its function it reads."""
    args = ast.arguments(
        posonlyargs=[],
        args=[ast.arg(s) for s in adjoint.seeds],
        kwonlyargs=[],
        kw_defaults=[],
        defaults=[],
    )
    grads = ast.Tuple([g for g in adjoint.grads if isinstance(g, ast.AST)], ast.Load())
    body = [s for s in adjoint.stmts if isinstance(s, ast.AST)] + [ast.Return(grads)]
    return ast.FunctionDef(name="pullback", args=args, body=body, decorator_list=[])


def _tape_lines(tape_inits, indent: str) -> list[str]:
    if not tape_inits:
        return []
    return [indent + "# tapes: values the adjoint sweep reads back, in reverse order"] + [
        indent + _unparse_statement(s) for s in tape_inits
    ]


def emit(
    parsed,
    norm,
    primal,
    adjoint,
    tape_inits,
    wrt: list[str],
    mode: str,
    name: str,
    plain_primal=None,
    jit: bool = False,
    data: list[str] = (),
    rows: bool = False,
    workspace: dict | None = None,
    rows_code=None,
) -> str:
    """Python source of the gradient (`mode="grad"`), value and gradient, or vjp function.

    A vjp with `plain_primal` re-runs the recording sweep on each pullback call (see below); with
    `jit` it is two top-level functions and no closure, which Numba compiles: `vjp_f(args)`
    returning the value and `vjp_f_sweep(args, seeds)` returning the cotangents; with `rows`
    also `vjp_f_rows(args, stacked seeds)` (see `_rows_function`), of `rows_code` (its primal
    and adjoint) where given. Every top-level function takes the user's `data` (globals, closure
    values), then what `workspace` gives it by name (`workspace=None`: numba_forms.py)."""
    data, workspace = list(data), workspace or {}
    params = _parameters(parsed.tree, data, workspace.get(name, ()), jit)
    held = _held(jit)
    note = _data_note(parsed, data, workspace.get(name, ()))
    where = _where(parsed)
    names = _parameter_names(parsed.tree) + data
    swept = mode in ("grad", "value_and_grad", "checked_grad") or plain_primal is not None
    as_given, given_lines = _inputs_kept(primal, adjoint, wrt, names, jit and swept)
    grads = ", ".join(_returned(adjoint.grads, wrt, jit, as_given))
    text = _Lines(parsed)
    out = _joined(norm.outputs, norm.tuple_output)
    batch = _batch_line(adjoint, adjoint.seeds[0] if adjoint.seeds else None)
    if mode == "vjp_batched":
        mode = "vjp"
        lines = [
            f"def {name}({params}):",
            "    "
            + docstring(
                f"Value of {where} and its batched pullback to {', '.join(wrt)} (one seed per "
                f"row).{note}"
            ),
        ]
    elif mode in ("grad", "value_and_grad"):
        what = "Gradient" if mode == "grad" else "Value and gradient"
        lines = [
            f"def {name}({params}):",
            "    " + docstring(f"{what} of {where} with respect to {', '.join(wrt)}.{note}"),
        ]
    elif mode == "checked_grad":
        lines = [
            f"def {name}({params}):",
            "    "
            + docstring(
                f"Gradient of {where} with respect to {', '.join(wrt)}, after the output's kind "
                f"(grad checks it).{note}"
            ),
        ]
    elif mode == "vjp" and jit and plain_primal is not None:  # no closures in Numba
        lines = [
            f"def {name}({params}):",
            "    "
            + docstring(
                f"Value of {where}; {name}_sweep({', '.join(_parameter_names(parsed.tree))}, "
                f"{', '.join(adjoint.seeds)}) is its pullback to {', '.join(wrt)}.{note}"
            ),
        ]
    else:
        lines = [
            f"def {name}({params}):",
            "    " + docstring(f"Value of {where} and its pullback to {', '.join(wrt)}.{note}"),
        ]
    if mode == "vjp" and plain_primal is not None:
        # the adjoint consumes its tape and writes back overwritten values: each pullback call
        # runs the recording forward sweep again (in its own function, which owns the
        # parameters), so the pullback can be called any number of times
        seeds = ", ".join(adjoint.seeds)
        names = _parameter_names(parsed.tree)
        sweep = f"{name}_sweep"
        if not jit:
            # defined first, its defaults keep the arguments as given (the sweep may rebind them)
            kept = ", ".join(f"{n}={n}" for n in names + data)
            lines.append(f"    def pullback({seeds}, {kept}):")
            lines.append(f"        return {sweep}({', '.join(names + adjoint.seeds + data)})")
        outputs = [ast.Name(o, ast.Load()) for o in norm.outputs]
        lines += held(plain_primal, names + data + workspace.get(name, []), after=outputs)
        lines += _own_copies(names, plain_primal, "    ")
        lines += text.block(plain_primal, "    ")
        value = "(" + out + ")" if norm.tuple_output else out
        lines.append(f"    return {value}" if jit else f"    return {value}, pullback")
        lines += [
            "",
            "",
            f"def {sweep}({', '.join(names + adjoint.seeds + data + workspace.get(sweep, []))}):",
            f'    """The recording forward sweep of {parsed.name}, then its adjoint."""',
        ]
        bound = names + adjoint.seeds + data + workspace.get(sweep, []) + [adjoint.batch]
        lines += held(tape_inits + primal + adjoint.stmts, bound, after=adjoint.grads)
        lines += given_lines
        lines += _own_copies(names, primal, "    ")
        lines += _tape_lines(tape_inits, "    ")
        lines += text.block(primal, "    ")
        lines.append("    # adjoint sweep: from the output back to the inputs")
        lines += ["    " + b for b in batch]
        lines += text.block(adjoint.stmts, "    ")
        lines.append(f"    return {grads}")
        if rows:
            rows_name = f"{name}_rows"
            params = names + data + workspace.get(rows_name, [])
            lines += _rows_function(
                parsed, *(rows_code or (primal, adjoint)), wrt, params, rows_name
            )
        return "\n".join(lines) + "\n"
    bound = _parameter_names(parsed.tree) + data + workspace.get(name, []) + adjoint.seeds
    outputs = [ast.Name(o, ast.Load()) for o in norm.outputs]
    if mode in ("grad", "value_and_grad", "checked_grad"):
        lines += held(tape_inits + primal + adjoint.stmts, bound, after=adjoint.grads + outputs)
    else:  # (the pullback reads the values the primal bound by the time it is called)
        lines += held(tape_inits + primal, bound, after=outputs + [_closure(adjoint)])
    lines += given_lines
    lines += _own_copies(_parameter_names(parsed.tree), primal, "    ")
    lines += _tape_lines(tape_inits, "    ")
    lines += text.block(primal, "    ")
    if mode in ("grad", "value_and_grad", "checked_grad"):
        lines.append("    # adjoint sweep: from the output back to the inputs")
        lines.append(f"    {adjoint.seeds[0]} = grad_seed({norm.outputs[0]})")
        lines += text.block(adjoint.stmts, "    ")
        # (a jitted grad returns the output's kind, not its value: Numba then drops the code
        # computing the value where the gradient reads none of it)
        value = {"value_and_grad": f"{out}, ", "checked_grad": f"output_kind({out}), "}
        value = value.get(mode, "")
        lines.append(f"    return {value}{'(' + grads + ')' if value and len(wrt) > 1 else grads}")
    else:
        lines.append(f"    def pullback({', '.join(adjoint.seeds)}):")
        bound = adjoint.seeds + [adjoint.batch]
        lines += held(adjoint.stmts, bound, "        ", after=adjoint.grads)
        lines += ["        " + b for b in batch]
        lines += text.block(adjoint.stmts, "        ")
        lines.append(f"        return {grads}")
        lines.append(f"    return {'(' + out + ')' if norm.tuple_output else out}, pullback")
    return "\n".join(lines) + "\n"


def _rows_function(parsed, primal, adjoint, wrt, params, name) -> list[str]:
    """`name(args, seeds)`: the recording forward sweep once, then the adjoint once per row of
    `seeds` (many seeds pulled back from one point: each residual of independent observations),
    each input's cotangents stacked along a new first axis. For an adjoint that reads no tape and
    writes no primal value (the driver checks), and inputs that are arrays: it is the sweep's
    text, its adjoint inside a loop over the rows."""
    taken = names_mentioned([s for s in primal + adjoint.stmts if isinstance(s, ast.AST)])
    taken |= set(params) | set(adjoint.seeds)

    def fresh(base: str) -> str:
        while base in taken:
            base += "_"
        taken.add(base)
        return base

    seed = adjoint.seeds[0]
    stack, row = fresh(f"{seed}_rows"), fresh("row")
    stacks = [  # the gradients' names, stacked: dx_rows
        fresh(f"{g.id if isinstance(g, ast.Name) else 'd' + x}_rows")
        for g, x in zip(adjoint.grads, wrt)
    ]
    names = _parameter_names(parsed.tree)
    text = _Lines(parsed)
    lines = [
        "",
        "",
        f"def {name}({', '.join(names + [stack] + params[len(names):])}):",
        f'    """The recording forward sweep of {parsed.name} once, then its adjoint once per row of',
        f'    {stack} (a seed each); each cotangent stacked along a new first axis."""',
    ]
    lines += _own_copies(names, primal, "    ")
    lines += text.block(primal, "    ")
    lines.append("    # adjoint sweep, once per seed: from the output back to the inputs")
    lines += [f"    {r} = np.empty(({stack}.shape[0],) + {x}.shape)" for r, x in zip(stacks, wrt)]
    lines.append(f"    for {row} in range({stack}.shape[0]):")
    lines.append(f"        {seed} = {stack}[{row}]")
    lines += text.block(adjoint.stmts, "        ")
    for r, g in zip(stacks, adjoint.grads):
        lines.append(f"        {r}[{row}] = {ast.unparse(g)}")
    lines.append(f"    return {', '.join(stacks)}")
    return lines


def _batch_line(adjoint, seed: str | None) -> list[str]:
    """Batched code: the line naming the number of rows, where the code uses it."""
    if adjoint.batch is None or seed is None:
        return []
    used = names_mentioned(
        [s for s in list(adjoint.stmts) + list(adjoint.grads) if isinstance(s, ast.AST)]
    )
    if adjoint.batch not in used:
        return []
    return [f"{adjoint.batch} = len({seed})  # adjoints have one row per seed"]


def emit_jvp(
    parsed,
    norm,
    body,
    wrt: list[str],
    tangents: list[str],
    outputs: list[ast.expr],
    name: str,
    batch: str | None = None,
    data: list[str] = (),
    jit: bool = False,
    workspace: dict | None = None,
) -> str:
    """Python source of the forward-mode function: primal and tangent statements interleaved
    (`batch`: batched tangents, with the name holding their number of rows); it takes the
    tangents after the arguments, then the user's `data`. Jitted, each tangent returned is in
    its output's float dtype (`in_dtype_of`); `workspace`: as `emit`'s."""
    workspace = workspace or {}
    params = _parameters(parsed.tree, list(tangents) + list(data), workspace.get(name, ()), jit)
    where = _where(parsed)
    what = "each row of the tangents" if batch else "the tangents"
    lines = [
        f"def {name}({params}):",
        "    "
        + docstring(
            f"Value of {where} and its derivative along {what} of {', '.join(wrt)}."
            f"{_data_note(parsed, data, workspace.get(name, ()))}"
        ),
    ]
    bound = _parameter_names(parsed.tree) + list(tangents) + list(data) + [batch]
    lines += _held(jit)(body, bound + workspace.get(name, []), after=outputs)
    lines += _own_copies(_parameter_names(parsed.tree) + list(tangents), body, "    ")
    used = names_mentioned(body + outputs)
    if batch is not None and batch in used:
        lines.append(f"    {batch} = len({tangents[0]})  # tangents have one row per direction")
    lines += _Lines(parsed).block(body, "    ")
    out = _joined(norm.outputs, norm.tuple_output)
    dots = _joined(_returned(outputs, norm.outputs, jit), norm.tuple_output)
    if norm.tuple_output:
        lines.append(f"    return ({out}), ({dots})")
    else:
        lines.append(f"    return {out}, {dots}")
    return "\n".join(lines) + "\n"


def _returned(values: list, like: list[str], jit: bool, kept=None) -> list[str]:
    """The cotangents (tangents) returned, as source: jitted, each in the float dtype of its
    input (output) `like`, which Numba may have widened (`in_dtype_of`: no cast where it did
    not); for an input the code rebinds (a loop's `x = x_new`), in that of the input as given,
    which `kept` names."""
    kept = kept or {}
    return [
        (
            f"in_dtype_of({ast.unparse(v)}, {kept.get(name, name)})"
            if jit and not isinstance(v, ast.Constant)
            else ast.unparse(v)
        )
        for v, name in zip(values, like)
    ]


def _inputs_kept(primal, adjoint, wrt, names: list, jit: bool) -> tuple[dict, list[str]]:
    """Jitted: for each input in `wrt` the code rebinds (`v = np.tanh(A[k] @ v)`), a name for
    it as given (`v_given = v`), whose dtype its gradient is returned in; and those lines."""
    code = [s for s in primal if isinstance(s, ast.AST)]
    rebound = [x for x in wrt if x in assigned(code)] if jit else []
    if not rebound:
        return {}, []
    taken = names_mentioned(code + [s for s in adjoint.stmts if isinstance(s, ast.AST)])
    taken |= set(names) | set(adjoint.seeds)
    kept = {}
    for x in rebound:
        name = f"{x}_given"
        while name in taken:
            name += "_"
        taken.add(name)
        kept[x] = name
    return kept, [
        f"    {kept[x]} = {x}  # as given, for its gradient's dtype (rebound below)"
        for x in rebound
    ]


def _joined(names, tuple_output: bool) -> str:
    """The outputs as a return spells them: a tuple of one (`return (u,)`) keeps its comma."""
    return ", ".join(names) + ("," if tuple_output and len(names) == 1 else "")


@functools.lru_cache(maxsize=512)
def format_source(source: str) -> str:
    return black.format_str(source, mode=black.Mode(line_length=100))


def changes_primal(adjoint_stmts, primal_names: set[str]) -> bool:
    """Whether the adjoint sweep assigns or writes into primal values (pops, restores), or
    rebinds as an adjoint loop's counter a primal name it also reads outside that loop (`x * i`
    after `for i in ...`): in a pullback closure such a name is the pullback's own local, unbound
    where it is read, so the pullback must run in the sweep's scope."""
    module = ast.Module(without_markers(adjoint_stmts), [])
    counters: set[str] = set()
    for node in walk_nodes(module):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                base = t.value if isinstance(t, ast.Subscript) else t
                if isinstance(base, ast.Name) and base.id in primal_names:
                    return True
        elif isinstance(node, ast.For):
            counters |= names_mentioned([node.target])
    counters &= primal_names
    return bool(counters) and bool(_reads_outside_loops_over(module.body, counters))


def _reads_outside_loops_over(stmts, names: set[str]) -> set[str]:
    """Which of `names` the statements read outside the loops whose counter each one is."""
    found: set[str] = set()
    for stmt in stmts:
        if isinstance(stmt, ast.For):
            bound = names_mentioned([stmt.target])
            found |= _reads_outside_loops_over(stmt.body, names - bound)
            found |= names_mentioned([stmt.iter]) & names
        elif isinstance(stmt, (ast.If, ast.While)):
            found |= names_mentioned([stmt.test]) & names
            found |= _reads_outside_loops_over(stmt.body + stmt.orelse, names)
        else:
            found |= names_read([stmt]) & names
    return found
