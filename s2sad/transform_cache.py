"""The transform cache: the entry point the wrappers call. A transform is made once per code
object, `wrt`, mode, ranks, jit, parallel and reuse, and serves every later call whose function still reads the
same helpers, classes and modules (`Compiled.read` checks them, and reads the data at each call).

Consumes a Python function; produces a `Compiled` (pipeline/load.py) and the data values its
function takes after the arguments.
"""

from __future__ import annotations

from . import disk_transforms
from .pipeline import bounds
from .errors import S2SADError
from .pipeline.driver import differentiate
from .pipeline.load import Compiled
from .rules.registry import VERSION

# code object, wrt, mode, ranks, jit, trees, has_aux, parallel, reuse, workspace, whether jitted
# code checks its indices -> the transforms made for functions with that code (most
# recent first): a few variants for functions whose scopes name different helpers
_CACHE: dict[tuple, tuple[Compiled, ...]] = {}
_VARIANTS = 8


def transform(
    func,
    wrt: tuple[str, ...],
    mode: str,
    ranks: tuple | None = None,
    jit: bool = False,
    trees: tuple = (),
    has_aux: bool = False,
    passed: dict | None = None,
    parallel: bool = False,
    reuse: bool = False,
    workspace: bool = True,
) -> Compiled:
    """Generate, compile and cache the `mode` transform: "grad", "value_and_grad", "vjp", "jvp",
    "vjp_batched"/"jvp_batched" (every cotangent or tangent with a leading batch axis, for
    the one-sweep Jacobian), or "checked_grad" (a jitted grad: the gradient after the output's
    kind, `output_kind`, which Transformed checks). Call its function with `read(func)`'s values after the arguments
    (`transform_and_read` gives both)."""
    return transform_and_read(
        func, wrt, mode, ranks, jit, trees, has_aux, passed, parallel, reuse, workspace
    )[0]


def transform_and_read(
    func,
    wrt: tuple[str, ...],
    mode: str,
    ranks: tuple | None = None,
    jit: bool = False,
    trees: tuple = (),
    has_aux: bool = False,
    passed: dict | None = None,
    parallel: bool = False,
    reuse: bool = False,
    workspace: bool = True,
) -> tuple[Compiled, tuple]:
    """The transform and the data values its function takes after the arguments, read now.

    The cache keys on the code object and its file, wrt, mode, ranks, jit, the parameter trees' structures
    (`trees`: see pipeline/driver.differentiate), has_aux, parallel (loops on threads) and reuse
    (NumPy-mode grad, value_and_grad and vjp writing into dying temporaries, for the user's own
    gradients: code s2sad differentiates again is made without); `passed` holds the functions
    passed as arguments, by parameter name (their data is read from them). A cached transform serves a
    call if no rule was registered since and `read` finds every function, class and module it
    used unchanged (helpers by their code); data is never part of the key or of the cache.
    `workspace=False` (jit): the functions take no workspace (an `emit --jit` module's caller
    has none to pass). The key holds whether jitted code checks its indices (bounds.py)."""
    parallel = bool(jit and parallel)
    reuse = bool(reuse and not jit and mode in ("grad", "value_and_grad", "vjp"))
    workspace = bool(workspace or not jit)
    checked = bool(jit and bounds.BOUNDSCHECK)
    # (code objects compare equal across files: the file is part of what the transform names)
    key = (
        func.__code__,
        func.__code__.co_filename,
        wrt,
        mode,
        ranks,
        jit,
        trees,
        has_aux,
        parallel,
        reuse,
        workspace,
        checked,
    )
    for hit in _CACHE.get(key, ()):
        if hit.rules_version != VERSION[0]:
            continue
        values = hit.read(func, passed)
        if values is not None:
            return hit, values
    # a jitted transform an earlier process made (disk_transforms.py: its first call is then
    # mostly Numba loading machine code), else the pipeline's, kept there for the next one
    kept = jit and not trees and not passed
    options = (wrt, mode, ranks, jit, has_aux, parallel, reuse, workspace)
    compiled = disk_transforms.load(func, options) if kept else None
    values = compiled.read(func, passed) if compiled is not None else None
    if values is None:
        compiled = differentiate(
            func, wrt, mode, ranks, jit, trees, has_aux, parallel, reuse, workspace
        )
        if kept:
            disk_transforms.store(func, options, compiled)
    # one assignment replaces the tuple: threads reading the cache see the old or the new one
    _CACHE[key] = (compiled,) + _CACHE.get(key, ())[: _VARIANTS - 1]
    values = values if values is not None else compiled.read(func, passed)
    if values is None:
        raise S2SADError(
            f"the names {func.__qualname__} reads changed while it was being transformed",
            hint="define its globals before the first call",
        )
    return compiled, values
