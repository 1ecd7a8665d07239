"""The helpers' Numba forms, registered with Numba: what jitted generated code calls.

Each form is written next to its op in s2sad/rules/ and only recorded there (`@numba_of`,
rules/helpers.py), so `import s2sad` never imports Numba. Importing this module binds Numba's
names in the forms' modules, applies `numba.extending.overload` to each (helper, form) pair and
`register_jitable` to the plain functions the forms call, their compiled code kept on disk
(helper_cache.py), and exports the helpers by name: generated modules that s2sad compiles import
it with `*`, so a process compiles (or loads) each helper once for all of them (`s2sad emit
--jit` embeds `numba_source()`, the same forms as text, instead).

A helper with no implementation for the types it meets makes Numba fail, and the error names it.
"""

import importlib
import sys

from .helper_cache import jitable_cached, overload_cached
from .rules.helpers import JITABLE, NUMBA, NUMBA_NAMES, numba_modules


def _bind_numba_names() -> None:
    values = {n: getattr(importlib.import_module(m), a) for n, (m, a) in NUMBA_NAMES.items()}
    for module in numba_modules():
        vars(sys.modules[module]).update(values)


def _register() -> dict[str, object]:
    """Register every form once; the helpers generated code calls, by name."""
    for func in JITABLE:
        jitable_cached(func)
    for stub, form in NUMBA:
        overload_cached(stub, form)
    return {s.__name__: s for s, _ in NUMBA if not s.__name__.startswith("_")}


_bind_numba_names()
_EXPORTS = _register()
globals().update(_EXPORTS)
__all__ = sorted(_EXPORTS)
