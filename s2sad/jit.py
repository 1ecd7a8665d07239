"""Compiling generated code with Numba (`jit=True` or `jit="strict"`).

The generated source is written to a file in s2sad's cache directory, keyed by its text and
s2sad's version, and imported from there, so Numba's on-disk cache (`cache=True`) serves a
second process without compiling again. Runtime helpers are replaced by versions Numba can
compile; a helper Numba cannot type makes compilation fail, and then `jit="strict"` raises
`JitError` naming it while `jit=True` warns and runs the Python version.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import sys
import warnings
from pathlib import Path

import numpy as np

from .errors import S2SADError


class JitError(S2SADError):
    """Numba could not compile a generated function (`jit="strict"`)."""


class JitFallbackWarning(UserWarning):
    """`jit=True` runs the plain Python version because Numba could not compile it."""


def cache_dir() -> Path:
    root = os.environ.get("S2SAD_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "s2sad"
    )
    return Path(root)


_HELPERS = """
import math

import numpy as np
from numba import njit
from numba.extending import overload


def zeros_like(x):
    return np.zeros_like(x)


@overload(zeros_like)
def _zeros_like(x):
    from numba import types

    if isinstance(x, types.Array):
        return lambda x: np.zeros_like(x)
    return lambda x: 0.0


def as_accumulator(dx, x):
    return dx


@overload(as_accumulator)
def _as_accumulator(dx, x):
    return lambda dx, x: np.zeros_like(x) + dx


def unbroadcast(g, x):
    return g


@overload(unbroadcast)
def _unbroadcast(g, x):
    from numba import types

    if not isinstance(x, types.Array):
        if isinstance(g, types.Array):
            return lambda g, x: np.sum(g)
        return lambda g, x: g
    if isinstance(g, types.Array) and g.ndim == x.ndim:
        def same_rank(g, x):
            if g.shape != x.shape:
                raise ValueError("jitted unbroadcast: shapes differ in broadcast axes")
            return g
        return same_rank
    return None


def broadcast_like(t, ans):
    return t


@overload(broadcast_like)
def _broadcast_like(t, ans):
    from numba import types

    if isinstance(ans, types.Array):
        return lambda t, ans: np.zeros_like(ans) + t
    return lambda t, ans: t


def snapshot(v):
    return v


@overload(snapshot)
def _snapshot(v):
    from numba import types

    if isinstance(v, types.Array):
        return lambda v: v.copy()
    return lambda v: v


@njit(cache=True)
def grad_seed(out):
    return 1.0


@njit(cache=True)
def stop_gradient(x):
    return x


@njit(cache=True)
def expand_reduced(g, x):
    return np.zeros_like(x) + g


@njit(cache=True)
def mean_vjp(g, x):
    return (np.zeros_like(x) + g) / x.size


@njit(cache=True)
def getitem_vjp(g, x, index):
    dx = np.zeros_like(x)
    dx[index] += g
    return dx
"""


def module_text(source: str, name: str) -> str:
    """`source` with the Numba helpers before it and its function compiled by Numba."""
    return (
        _HELPERS
        + "\n\n"
        + source.replace(f"def {name}(", f"def _{name}_py(", 1)
        + f"\n\n{name} = njit(cache=True)(_{name}_py)\n"
    )


def _module_for(source: str, name: str):
    """Import `source` (with the Numba helpers above it) from a file in the cache directory."""
    from . import __version__

    text = module_text(source, name)
    digest = hashlib.sha256(f"{__version__}\n{text}".encode()).hexdigest()[:20]
    directory = cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"s2sad_{name}_{digest}.py"
    if not path.exists() or path.read_text() != text:
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(text)
        os.replace(tmp, path)  # atomic: two processes compiling at once both see a whole file
    module_name = path.stem
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


class Jitted:
    """A generated function compiled by Numba on its first call, or its Python fallback."""

    def __init__(self, compiled):
        self.compiled = compiled
        self.function = None
        self.failed = None

    def __call__(self, args, strict: bool):
        if self.failed is None and self.function is None:
            try:
                module = _module_for(self.compiled.source, self.compiled.name)
                namespace = vars(module)
                for key, value in self.compiled.globals.items():
                    namespace.setdefault(key, value)
                self.function = namespace[self.compiled.name]
            except Exception as exc:  # the module itself failed: report like a typing error
                self.failed = exc
        if self.function is not None and self.failed is None:
            try:
                return self.function(*args)
            except Exception as exc:
                if not _is_numba_error(exc):
                    raise
                self.failed = exc
        return self.fallback(args, strict)

    def fallback(self, args, strict: bool):
        message = f"Numba cannot compile {self.compiled.name}: {_reason(self.failed)}"
        if strict:
            raise JitError(
                message,
                hint="use jit=True to fall back to Python, or keep to "
                "operations Numba supports in nopython mode",
            )
        warnings.warn(message + "; running the Python version", JitFallbackWarning, stacklevel=3)
        return self.compiled.function(*args)


_TELLING = (
    "Untyped global name",
    "NameError",
    "No implementation of function",
    "Unknown attribute",
    "Cannot determine Numba type",
    "Invalid use of",
    "Cannot unify",
    "not supported",
)


def _reason(exc) -> str:
    """The line of Numba's message that names the operation, and the generated line it was at."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    reason = next(
        (line for line in lines if any(t in line for t in _TELLING)),
        lines[0] if lines else type(exc).__name__,
    )
    where = next(
        (
            lines[i + 1]
            for i, line in enumerate(lines[:-1])
            if line.startswith("File ") and "line" in line
        ),
        "",
    )
    return reason[:240] + (f" (at `{where[:120]}`)" if where and not where.startswith("<") else "")


def _is_numba_error(exc) -> bool:
    try:
        from numba.core.errors import NumbaError
    except ImportError:  # pragma: no cover
        return False
    return isinstance(exc, NumbaError)


__all__ = ["JitError", "JitFallbackWarning", "Jitted", "cache_dir", "np"]
