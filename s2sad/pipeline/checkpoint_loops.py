"""Loops marked `for t in s2sad.checkpoint(range(n), snapshots=k):` (before normalizing).

Reverse modes: the loop becomes one call of a `CheckpointedLoop` (s2sad/checkpointing.py),

    y = euler_loop4(range(n), k, y, h)        # for i in s2sad.checkpoint(range(n), snapshots=k):

whose segment function is the loop over a sub-range, made a function of the loop's state (the
names the body assigns that are bound before the loop) and its other inputs (the locals and
closure values it reads): `def euler_loop4(i_start, i_stop, i_step, y, h): for i in range(...):
<body>; return y`, with the body's own lines. Forward modes keep the loop and drop the mark:
tangents need no tape. What a segment function cannot express (break, continue, return, a trip
count unknown before the loop, writes into arrays from outside the body, values carried across
steps but unbound before the loop, a function passed in) is refused at its line.
"""

from __future__ import annotations

import ast
import linecache
import textwrap
import types

from ..checkpointing import CheckpointedLoop
from . import checkpoint_flow
from .checkpoint_marks import FORWARD_MODES, check, marked, own, refuse
from .parse import SEGMENT_LOOPS

_MADE: dict = {}  # (code object, line, jit) -> the CheckpointedLoop made for that loop


def checkpoint_loops(parsed, mode: str, differentiate, jit=False) -> None:
    """Rewrite each marked loop of `parsed` in place (see the module's docstring)."""
    parsed.drops_checkpoints = mode in FORWARD_MODES
    for parent, field, index, loop in marked(parsed, parsed.tree):
        call = loop.iter
        if mode in FORWARD_MODES:
            getattr(parent, field)[index].iter = call.args[0]
            continue
        getattr(parent, field)[index] = _replaced(parsed, loop, differentiate, jit)


def _stored(nodes) -> set[str]:
    return {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _replaced(parsed, loop, differentiate, jit) -> ast.stmt:
    target, trip, snaps = check(parsed, loop)
    body = list(own(loop.body))
    assigned = _stored(body)
    body_ids = {id(n) for n in body}
    outside = [n for n in own(parsed.tree.body) if id(n) not in body_ids and n is not loop.target]
    # every local outside the body: what the body reads of them is passed in (unbound where
    # Python's loop would find it unbound)
    before = set(parsed.params) | _stored(outside)
    before |= {n.name for n in outside if isinstance(n, ast.FunctionDef)}  # `def rhs(y):`
    state = _refuse_lost(parsed, loop, target, assigned)
    freevars = set(parsed.func.__code__.co_freevars)
    read = [n.id for n in body if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
    # the closure's values too: a closure made again (same code) reuses this transform
    inputs = tuple(
        sorted({r for r in read if r not in assigned and r != target and r in before | freevars})
    )
    for node in body:
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in inputs
        ):
            raise refuse(
                parsed,
                node,
                f"the loop calls '{node.func.id}', a local or closure value of {parsed.name}, "
                "whose function s2sad cannot tell",
                "call a module-level function in a checkpointed loop, passing it what the "
                f"local function reads (`{node.func.id}(y, omega)` for a closure over `omega`)",
            )
    for node in body:
        written = None
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(t, (ast.Subscript, ast.Attribute)):
                    root = t
                    while isinstance(root, (ast.Subscript, ast.Attribute)):
                        root = root.value
                    if isinstance(root, ast.Name) and (root.id in before or root.id in freevars):
                        written = root.id
        if written is not None:
            raise refuse(
                parsed,
                node,
                f"a write into '{written}', which lives outside the checkpointed loop's body",
                f"rebind it instead ({written} = ...), or copy it inside the body first",
            )
    if not state:
        raise refuse(parsed, loop, "the loop carries no state", "drop s2sad.checkpoint")
    line = parsed.file_line(loop)
    key = (parsed.func.__code__, line, jit)
    if key not in _MADE:
        step = _step_function(parsed, loop, target, state, inputs)
        made = CheckpointedLoop(step, step.__name__, state, inputs, differentiate, jit)
        made.assigned_at = _first_stores(parsed, body, state)
        _MADE[key] = made
    made = _MADE[key]
    parsed.synthesized[made.__name__] = made
    call = ast.Call(
        ast.Name(made.__name__, ast.Load()),
        [trip, snaps] + [ast.Name(n, ast.Load()) for n in state + inputs],
        [],
    )
    out = (
        ast.Name(state[0], ast.Store())
        if len(state) == 1
        else ast.Tuple([ast.Name(n, ast.Store()) for n in state], ast.Store())
    )
    new = ast.fix_missing_locations(ast.copy_location(ast.Assign([out], call), loop))
    # its comment in generated code quotes the loop's header, not its body
    new.end_lineno, new.end_col_offset = loop.iter.end_lineno, loop.iter.end_col_offset
    header = parsed.split_lines[new.end_lineno - 1]
    if header[len(header.encode()[: new.end_col_offset].decode()) :].lstrip().startswith(":"):
        new.end_col_offset += 1
    return new


def _first_stores(parsed, body, names) -> dict:
    """name -> (file, line, the line's text) of the body's first assignment to it, for the
    messages of jit="strict" about a state's rank (checkpointing.py)."""
    lines = {}
    for node in body:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id in names:
            lines[node.id] = min(lines.get(node.id, node.lineno), node.lineno)
    return {
        n: (parsed.filename, line + parsed.line_offset, parsed.split_lines[line - 1].strip())
        for n, line in lines.items()
    }


def _refuse_lost(parsed, loop, target: str, assigned: set[str]) -> tuple[str, ...]:
    """The loop's state: the names the body assigns that may be bound when it starts. Refuses a
    value the segments would lose: a name the body assigns, unbound before the loop, that a read
    after the loop may see, or that the body may read before assigning it (carried from one
    step to the next); and the loop's target, where a read after the loop may see its last
    value."""
    bound = checkpoint_flow.bound_at_entry(parsed.tree, loop, parsed.params)
    local = assigned - bound - {target}
    seen_after = checkpoint_flow.read_after(parsed.tree, loop, local | {target})
    lost = sorted(local & seen_after)
    if lost:
        raise refuse(
            parsed,
            loop,
            f"'{lost[0]}' is assigned in the checkpointed loop and read after it, but not bound "
            "before it",
            f"assign {lost[0]} before the loop",
        )
    if target in seen_after:
        raise refuse(
            parsed,
            loop,
            f"the loop's target '{target}' is read after the loop (its last value is not kept)",
            "give the loop a target of its own",
        )
    carried = sorted(checkpoint_flow.carried(loop, local))
    if carried:
        raise refuse(
            parsed,
            checkpoint_flow.first_read(loop.body, carried[0]) or loop,
            f"'{carried[0]}' is carried from one step to the next but not bound before the loop",
            f"assign {carried[0]} before the loop",
        )
    return tuple(sorted(assigned & bound))


def _step_function(parsed, loop, target, state, inputs):
    """The loop as `def <f>_loop<line>(<t>_start, <t>_stop, <t>_step, *state, *inputs)`, running
    the body over that range and returning the state: a segment of the loop, compiled from a file
    of its own whose lines are the user's (an error in it names the user's line)."""
    name = f"{parsed.name}_loop{parsed.file_line(loop)}"
    used = {n.id for n in ast.walk(loop) if isinstance(n, ast.Name)} | {name}
    bounds = [_unused(f"{target}_{b}", used) for b in ("start", "stop", "step")]
    text = _body_text(parsed, loop)
    padding = parsed.file_line(loop.body[0]) - 3 if loop.body[0].lineno > loop.lineno else 0
    returned = state[0] if len(state) == 1 else ", ".join(state)
    source = (
        "\n" * max(padding, 0)
        + f"def {name}({', '.join(tuple(bounds) + state + inputs)}):\n"
        + f"    for {target} in range({', '.join(bounds)}):\n"
        + text
        + f"\n    return {returned}\n"
    )
    filename = f"<s2sad.checkpoint: {name} in {parsed.filename}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    code = compile(source, filename, "exec")
    body_code = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    segment = types.FunctionType(body_code, parsed.func.__globals__, name)
    # its comments and messages quote the user's loop (parse.py), not its `range` header
    header = parsed.split_lines[loop.lineno - 1].strip()
    SEGMENT_LOOPS[segment] = (parsed.filename, parsed.file_line(loop), header)
    return segment


def _body_text(parsed, loop) -> str:
    """The loop's body, indented for the segment function: the user's lines where the body is
    as written, so the segment's line N is the file's line N; else (a body on the `for` line,
    or one rewritten already: `p["W"]` read as the leaf `p_W`) the body's statements unparsed,
    each from its own line where there is room. Never the text alone when it was rewritten: the
    segment would read `p` as a global of the module."""
    first, last = loop.body[0].lineno, loop.body[-1].end_lineno
    if first > loop.lineno:
        text = textwrap.dedent("\n".join(parsed.split_lines[first - 1 : last]))
        try:
            written = ast.parse(text).body
        except SyntaxError:
            written = []
        if [ast.dump(s) for s in written] == [ast.dump(s) for s in loop.body]:
            return textwrap.indent(text, " " * 8)
    lines: list[str] = []
    for stmt in loop.body:
        lines += [""] * (stmt.lineno - first - len(lines))
        lines += ast.unparse(stmt).splitlines()
    return textwrap.indent("\n".join(lines), " " * 8)


def _unused(name: str, used: set[str]) -> str:
    made, k = name, 2
    while made in used:
        made, k = f"{name}{k}", k + 1
    used.add(made)
    return made
