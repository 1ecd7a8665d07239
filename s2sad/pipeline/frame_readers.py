"""What reads a function's variables by their names, or hands out objects by a name given at
run time (which can be such a reader): the generated code's frame holds other names than the
user's, and reuses their arrays, so such a read gives other values, and no derivative flows
through it. Name resolution (resolve.py) refuses each object of this kind a differentiated
function reaches by name, attribute, `getattr` or a container it reads."""

from __future__ import annotations

import builtins
import functools
import importlib
import inspect
import operator
import sys
import traceback
import types

READS = "reads variables by their names"
HANDS_OUT = "hands out objects by name"

_READERS = (builtins.locals, builtins.vars, builtins.eval, builtins.exec, builtins.dir)
_READERS += (builtins.globals, sys._getframe, sys._current_frames, inspect.currentframe)
_READERS += (inspect.stack, inspect.trace, inspect.getouterframes, traceback.walk_stack)
_HANDERS = (builtins.__import__, importlib.__import__, importlib.import_module, vars(builtins))
_HANDERS += (sys.modules, operator.attrgetter, operator.methodcaller)

# attributes that hand out a module's or a frame's namespace
NAMESPACE_ATTRIBUTES = frozenset({"__globals__", "__builtins__", "f_locals", "f_globals", "f_back"})

# names in a function's code that reach its caller's frame (`sys._getframe(1).f_locals`)
_CALLER_FRAME_NAMES = frozenset(
    {"_getframe", "currentframe", "_current_frames", "walk_stack", "getouterframes", "f_back"}
)
_SCANNED = 256  # the elements of a container looked at (a list of numbers is data)


def what_it_does(value, depth: int = 0) -> str | None:
    """READS or HANDS_OUT for a reader of variables by name (or a partial of one, a small
    container holding one, a function of the user's whose code reaches its caller's frame),
    else None."""
    if depth > 3:
        return None
    if any(value is f for f in _READERS):
        return READS
    if any(value is f for f in _HANDERS):
        return HANDS_OUT
    if isinstance(value, functools.partial):
        return what_it_does(value.func, depth + 1)
    if isinstance(value, (dict, list, tuple)) and len(value) <= _SCANNED:
        items = value.values() if isinstance(value, dict) else value
        for item in items:
            if callable(item) or isinstance(item, (dict, list, tuple)):
                found = what_it_does(item, depth + 1)
                if found is not None:
                    return found
        return None
    if isinstance(value, types.MethodType):
        value = value.__func__
    elif not isinstance(value, (type, types.FunctionType)):  # an object called: its __call__
        value = getattr(type(value), "__call__", None)
    if isinstance(value, types.FunctionType) and _reaches_callers_frame(value.__code__):
        return READS
    return None


@functools.lru_cache(maxsize=4096)
def _reaches_callers_frame(code: types.CodeType) -> bool:
    if _CALLER_FRAME_NAMES & set(code.co_names) or {"inspect", "stack"} <= set(code.co_names):
        return True
    return any(isinstance(c, types.CodeType) and _reaches_callers_frame(c) for c in code.co_consts)
