"""Derivative rules, one table per family. Importing this package fills the registry."""

from . import elementwise, indexing, linalg, reductions, shape  # noqa: F401
from . import forward  # noqa: F401  (tangent rules; after the others, which it reads)
from . import batched  # noqa: F401  (batched templates for the one-sweep Jacobian)
from .registry import NONDIFF, VJP, Bound, Rule, defvjp, is_nondiff, lookup, nondiff

__all__ = ["VJP", "NONDIFF", "Bound", "Rule", "defvjp", "nondiff", "lookup", "is_nondiff"]
