"""Names and attributes with a fixed meaning in the code s2sad writes: `RESERVED` (the names
generated code uses that are not the user's), `reserved_names` (those of one transform),
`s2sad_object` (what such a name means) and `STATIC_ATTRS` (array attributes that carry no
derivative). A leaf module: normalization, name resolution, classification and `register_vjp`
read it, and it reads only the runtime helpers, the rule table, CUDA's device helpers and what
modules `s2sad emit --jit` writes define beside their function.
"""

from __future__ import annotations

import builtins
import math

import numpy as np

from .. import runtime
from ..cuda_device import HELPERS as CUDA_HELPERS
from ..module_returns import FUNCTIONS as MODULE_RETURNS
from ..rules.helpers import BATCHED, RUNTIME, numba_names
from ..rules.registry import NAMESPACE

STATIC_ATTRS = {"shape", "ndim", "size", "dtype"}


# Every name generated code may use that is not the user's: NumPy and math, the runtime helpers
# (plain, batched and Numba's, whose module a jitted gradient imports with `*`; CUDA's), the
# builtins s2sad writes itself, and the pullback it defines. A user's name among them is renamed
# in the generated code (see `hygienic`), so nothing of the user's can shadow them nor they the
# user's.
RESERVED = (
    {"np", "math", "pullback", "range", "len", "reversed", "slice", "min", "max", "cuda"}
    | set(CUDA_HELPERS)  # device code's helpers (s2sad/cuda_device.py)
    | {"NonScalarOutputError"}
    | {"prange", "thread_count", "get_thread_id"}  # loops on threads (s2sad/threads.py)
    | {f.__name__ for f in MODULE_RETURNS}  # beside a module's function (`s2sad emit --jit`)
    | set(RUNTIME)  # private ones too: `s2sad emit` copies them beside the user's constants
    | set(BATCHED)
    | numba_names()
)
_MODES = ("grad", "value_and_grad", "vjp", "jvp", "vjp_batched", "jvp_batched", "checked_grad")


def reserved_names(func_name: str) -> set[str]:
    """RESERVED, the names of registered rules, and the functions a transform of `func_name`
    defines (`grad_f`, `vjp_f_sweep`, ...)."""
    defined = {f"{m}_{func_name}" for m in _MODES}
    late = set(RUNTIME) | set(BATCHED)  # helpers of rules registered on import (scipy.special)
    return RESERVED | late | set(NAMESPACE) | defined | {f"{d}_sweep" for d in defined}


_OWN_LOCAL = object()


def s2sad_object(name: str):
    """What generated code means by the reserved `name` (a marker where it is a local of its
    own, or Numba's)."""
    for scope in (NAMESPACE, vars(runtime), {"np": np, "math": math}):
        if name in scope:
            return scope[name]
    return getattr(builtins, name, _OWN_LOCAL)
