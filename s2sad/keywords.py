"""Keywords the transforms do not take, answered in s2sad's terms: another library's habit
(JAX's `argnums`, autograd's `argnum`) gets the keyword s2sad spells it with (`wrt=`), a
misspelling the keyword meant, at the line that called the transform.
"""

from __future__ import annotations

import difflib
import os
import sys

from .errors import TransformKeywordError

_WRT = (
    "s2sad names the arguments to differentiate with `wrt=` (a position, a parameter's name, or a "
    "tuple of them): write {call}(f, wrt={value!r})"
)
_FOREIGN = {
    "argnums": _WRT,  # JAX
    "argnum": _WRT,  # autograd
    "holomorphic": "s2sad differentiates real floating-point inputs only; drop `holomorphic=`",
    "allow_int": "integer arguments have no derivative in s2sad; leave them out of `wrt=`",
    "reduce_axes": "s2sad has no `reduce_axes=`; sum the gradient yourself",
    "static_argnums": "s2sad reads every argument at each call; drop `static_argnums=`",
}
_NO_AUX = (
    "`has_aux=True` is for grad, value_and_grad and vjp; differentiate a function returning "
    "the value alone (call f for the aux)"
)


def refuse(call: str, given: dict, accepted: tuple) -> None:
    """Raise for the first keyword in `given` (those `call` did not take), saying what to use."""
    if not given:
        return
    key, value = next(iter(given.items()))
    if key in _FOREIGN:
        hint = _FOREIGN[key].format(call=call, value=value)
    elif difflib.get_close_matches(key, ("has_aux",)) and "has_aux" not in accepted:
        hint = _NO_AUX
    else:
        close = difflib.get_close_matches(key, accepted, n=1)
        hint = f"did you mean `{close[0]}=`? " if close else ""
        hint += f"{call} takes " + ", ".join(f"`{k}=`" for k in accepted)
    file, line = caller()
    raise TransformKeywordError(
        f"{call}() got an unexpected keyword argument '{key}'", file=file, line=line, hint=hint
    )


def refuse_misspelled(call: str, given: dict, accepted: tuple, own=()) -> None:
    """Raise for a keyword in `given` that misspells one of `accepted` (JAX's `tangents=` for
    `tangent=`), unless the function's own parameters (`own`) take it."""
    close = [k for k in given if k not in own and difflib.get_close_matches(k, accepted, n=1)]
    refuse(call, {close[0]: given[close[0]]} if close else {}, accepted)


def caller() -> tuple:
    """The file and line of the first frame outside s2sad: the user's call of the transform."""
    here = os.path.dirname(__file__) + os.sep
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(here):
        frame = frame.f_back
    if frame is None:  # pragma: no cover  (s2sad called from nowhere)
        return None, None
    return os.path.basename(frame.f_code.co_filename), frame.f_lineno
