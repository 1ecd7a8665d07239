"""`parallel=True` on code where no loop runs on threads: the transform says why at the end of
its source (pipeline/parallel.py, `Threads.noted`), and its first jitted call warns once with
that reason, where the serial build would otherwise run with no word."""

from __future__ import annotations

import warnings

from .diskcache import user_stacklevel
from .pipeline.parallel import SERIAL


class SerialLoopsWarning(UserWarning):
    """`parallel=True`, but every loop of the code stays a serial loop (the reason given)."""


def serial_warning(compiled) -> None:
    """Warn where `compiled` was built for threads and none of its loops runs on them."""
    code = compiled.code
    at = code.rfind("# " + SERIAL)
    if not compiled.parallel or at < 0 or "prange(" in code:
        return
    said = " ".join(line.lstrip("# ").strip() for line in code[at:].splitlines())
    where = f" (s2sad's code of {compiled.where})" if compiled.where else ""
    warnings.warn(
        f"{said}{where}; it runs compiled, serially",
        SerialLoopsWarning,
        stacklevel=user_stacklevel(),
    )
