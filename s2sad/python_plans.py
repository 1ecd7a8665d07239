"""Python mode's call plans: a `grad` or `value_and_grad` called again by position with
arguments of an earlier call's kinds runs the generated function that call chose, with the data
read now, without binding the arguments again. Binding a dict of parameters (its flattening,
inspect.Signature.bind, each leaf's checks) cost 180-300 us a call, where a small model's
primal takes 15-44 us. The kinds (`python_key`) are what decides the binding's checks and the
transform: each leaf's type, and an array's dtype and rank (transformed.py keeps the plans,
as it keeps a jitted call's by Numba's fingerprints)."""

from __future__ import annotations

import numpy as np

from .conform import owned_gradients
from .generated_lines import note_user_line


def python_key(args) -> tuple:
    """The kinds of `args` that decide a Python-mode call: types, an array's dtype and rank."""
    return tuple(
        [(np.ndarray, a.dtype, a.ndim) if type(a) is np.ndarray else type(a) for a in args]
    )


def python_result(transformed, function, args: tuple, values: tuple, wrt, template):
    """What `transformed` returns from its generated `function` run on `args` (a tree's
    leaves) and the data `values` read now: the gradients the caller's own, regrouped into the
    trees of `template` (`_keep_plan`'s), and the value for value_and_grad."""
    try:
        result = function(*args, *values)
    except Exception as exc:
        note_user_line(exc, function)
        raise
    grads = result if transformed.mode == "grad" else result[1]
    grads = grads if len(wrt) > 1 else (grads,)
    out = owned_gradients(grads, [args[i] for i in wrt], list(args))
    if template is not None:
        out = template.regroup(out)
    out = tuple(out) if transformed.wrt_tuple else out[0]
    return out if transformed.mode == "grad" else (result[0], out)
