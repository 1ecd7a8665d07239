"""Room for deeply nested code: a 1,000-term sum is one expression 1,000 levels deep, and a chain of
200 helpers is inlined 200 calls deep. The passes (and `ast.unparse`, `compile`, black) recurse
over such trees and overrun Python's default recursion limit of 1,000.

A transform that raises `RecursionError` runs once more on a thread with a large stack (so that
deep recursion through C code cannot overflow it) and a raised recursion limit. The limit is the
process's, so it is raised only while that thread runs, one such thread at a time. Code deeper
still is refused by `transform` with `NestingTooDeepError`, naming the deepest line.
"""

from __future__ import annotations

import ast
import sys
import threading

STACK_BYTES = 512 * 2**20  # reserved address space; only the pages used are committed
RECURSION_LIMIT = 40_000  # about 13 KB of that stack per Python frame: far more than a frame uses
_ONE_AT_A_TIME = threading.Lock()
_inside = threading.local()  # `room` is set on the large-stack thread


class TooDeep(Exception):
    """Still too deep with the raised limit, or no thread with a large stack could start."""


# a tree deeper than this goes straight to the large stack (the passes take 2-3 frames a level)
DEEP = 150


def with_room(fn, *args, deep: bool = False, **kwargs):
    """`fn(*args, **kwargs)`; if it overruns the recursion limit, again with room (raises `TooDeep`
    if that overruns it too). `fn` must be safe to run twice (no state kept from a failed run).
    `deep`: the caller knows it is deep, so it runs with room at once."""
    if getattr(_inside, "room", False):  # already on the large stack (a nested transform)
        try:
            return fn(*args, **kwargs)
        except RecursionError as exc:
            raise TooDeep(str(exc)) from None
    if not deep:
        try:
            return fn(*args, **kwargs)
        except RecursionError:
            pass
    return _on_large_stack(fn, args, kwargs)


def _on_large_stack(fn, args, kwargs):
    outcome: dict = {}

    def run():
        _inside.room = True
        try:
            outcome["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # handed to the calling thread
            outcome["error"] = exc

    with _ONE_AT_A_TIME:
        old_limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(old_limit, RECURSION_LIMIT))
        try:
            _start(run).join()
        finally:
            sys.setrecursionlimit(old_limit)
    error = outcome.get("error")
    if isinstance(error, RecursionError):
        raise TooDeep(str(error)) from None
    if error is not None:
        raise error
    return outcome["value"]


def _start(run) -> threading.Thread:
    try:
        old_size = threading.stack_size(STACK_BYTES)
    except (ValueError, RuntimeError) as exc:  # no such stack on this system
        raise TooDeep(str(exc)) from None
    try:
        thread = threading.Thread(target=run, name="s2sad-deep", daemon=True)
        thread.start()
    except (RuntimeError, MemoryError) as exc:
        raise TooDeep(str(exc)) from None
    finally:
        threading.stack_size(old_size)
    return thread


def depth(tree: ast.AST) -> int:
    """How deeply nodes nest in `tree` (walked level by level, without recursion)."""
    level, deepest = [tree], -1
    while level:
        deepest += 1
        below: list = []
        for node in level:
            for name in node._fields:
                value = getattr(node, name, None)
                if isinstance(value, ast.AST):
                    below.append(value)
                elif isinstance(value, list):
                    below.extend([v for v in value if isinstance(v, ast.AST)])
        level = below
    return deepest


def deepest_line(tree: ast.AST) -> int:
    """The line of the most deeply nested node of `tree`."""
    return _deepest(tree)[1]


def _deepest(tree: ast.AST) -> tuple[int, int]:  # only for an error: need not be fast
    best, line = -1, getattr(tree, "lineno", 1)
    todo = [(tree, 0, line)]
    while todo:
        node, depth, at = todo.pop()
        at = getattr(node, "lineno", at)
        if depth > best:
            best, line = depth, at
        todo.extend((child, depth + 1, at) for child in ast.iter_child_nodes(node))
    return best, line


def deepest_statement(tree: ast.FunctionDef) -> ast.AST:
    """The node at the deepest line of `tree` (where a refusal for nesting points)."""
    line = deepest_line(tree)
    return next((n for n in ast.walk(tree) if getattr(n, "lineno", None) == line), tree)
