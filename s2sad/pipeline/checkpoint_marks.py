"""The marks of `for t in s2sad.checkpoint(range(n), snapshots=k):` loops, for
checkpoint_loops.py (which replaces a marked loop of the differentiated function) and for the
inliner (a helper's marked loop loses the mark in forward modes and is refused in reverse ones):
finding them, and refusing what a segment function cannot be (break, continue, return, a trip
count unknown before the loop, an else:).
"""

from __future__ import annotations

import ast
import builtins

from ..errors import UnsupportedSyntaxError

FORWARD_MODES = ("jvp", "jvp_batched")


def helper_marks(helper, caller) -> None:
    """A helper `caller` calls, about to be inlined: its marked loops lose the mark in forward
    modes, as the function's own do; reverse modes refuse them, which would be taped step by
    step (a helper's loop has no CheckpointedLoop: the helper is inlined after this stage)."""
    helper.drops_checkpoints = caller.drops_checkpoints
    for _, _, _, loop in marked(helper, helper.tree):
        if not caller.drops_checkpoints:
            raise refuse(
                helper,
                loop,
                f"a loop marked in {helper.name}, which {caller.name} calls (only the loops of "
                "the function differentiated are checkpointed)",
                f"move the loop into {caller.name}, or differentiate {helper.name}",
            )
        loop.iter = check(helper, loop)[1]


def marked(parsed, tree):
    """(parent, field, index, loop) of each loop marked by s2sad.checkpoint, not those inside
    another (its segment function holds them)."""
    found, todo = [], [tree]
    while todo:
        parent = todo.pop()
        for field in ("body", "orelse", "finalbody", "handlers"):
            block = getattr(parent, field, None)
            if not isinstance(block, list):
                continue
            for index, stmt in enumerate(block):
                if isinstance(stmt, ast.For) and _is_mark(parsed, stmt.iter):
                    found.append((parent, field, index, stmt))
                elif not isinstance(stmt, (ast.FunctionDef, ast.ClassDef)):
                    todo.append(stmt)
    return found


def _is_mark(parsed, node) -> bool:
    if not isinstance(node, ast.Call):
        return False
    # told by name: s2sad.checkpointing imports what imports the inliner, which calls this
    found = _lookup(parsed, node.func)
    return callable(found) and (
        getattr(found, "__module__", None),
        getattr(found, "__qualname__", None),
    ) == ("s2sad.checkpointing", "checkpoint")


def _lookup(parsed, node):
    """The object a Name or Attribute chain of globals denotes (None for anything else)."""
    if isinstance(node, ast.Attribute):
        base = _lookup(parsed, node.value)
        try:  # a property of the user's may raise anything: then it is no mark
            return getattr(base, node.attr, None) if base is not None else None
        except Exception:
            return None
    if not isinstance(node, ast.Name):
        return None
    func = parsed.func
    if func.__closure__ and node.id in func.__code__.co_freevars:
        try:
            return func.__closure__[func.__code__.co_freevars.index(node.id)].cell_contents
        except ValueError:
            return None
    scope = func.__globals__
    return scope[node.id] if node.id in scope else getattr(builtins, node.id, None)


def refuse(parsed, node, what: str, hint: str):
    return parsed.error(UnsupportedSyntaxError, f"s2sad.checkpoint: {what}", node, hint=hint)


def check(parsed, loop):
    """The loop's target, trip and snapshots; refuses what a step function cannot be."""
    call = loop.iter
    if len(call.args) != 1 or any(k.arg != "snapshots" for k in call.keywords):
        raise refuse(
            parsed,
            loop,
            "takes the loop's range and snapshots=",
            "write checkpoint(range(n), snapshots=k)",
        )
    trip = call.args[0]
    if not (isinstance(trip, ast.Call) and _lookup(parsed, trip.func) is range):
        raise refuse(
            parsed,
            loop,
            f"the loop runs over {ast.unparse(trip)}, whose length is unknown before the loop",
            "checkpoint a loop over range(...)",
        )
    if not isinstance(loop.target, ast.Name):
        raise refuse(parsed, loop, "the loop's target must be one name", "write `for t in ...`")
    if loop.orelse:
        raise refuse(parsed, loop, "a checkpointed loop has no else:", "move it after the loop")
    for node in own(loop.body):
        if isinstance(node, (ast.Break, ast.Continue, ast.Return, ast.Yield, ast.YieldFrom)):
            word = type(node).__name__.lower()
            raise refuse(
                parsed,
                node,
                f"`{word}` inside a checkpointed loop",
                "every step must run the whole body: use an if around the rest of the body",
            )
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            raise refuse(
                parsed, node, "global or nonlocal inside a checkpointed loop", "pass it in"
            )
    snaps = call.keywords[0].value if call.keywords else ast.Constant(None)
    return loop.target.id, trip, snaps


def own(body):
    """The nodes of `body`, not inside functions or lambdas it defines."""
    todo = list(body)
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))
