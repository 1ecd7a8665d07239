"""Indexing: a read x[index] scatters its cotangent back (repeated indices add up); a scatter-add
(`np.add.at`, normalized to a write of `scatter_added`) gathers it."""

import numpy as np

from .. import runtime
from .registry import defvjp


def is_add_at(callee) -> bool:
    """Whether `callee` is np.add.at, a new bound method at every access (so never `is`)."""
    return getattr(callee, "__self__", None) is np.add and getattr(callee, "__name__", "") == "at"


def getitem(x, index):
    """Stands for the subscript `x[index]` in the rule table."""
    return x[index]


defvjp(getitem, "x, index", inert=("index",), x="getitem_vjp(g, x, index)")
defvjp(
    runtime.scatter_added,
    "a, index, values",
    inert=("index",),
    a="g",
    values="unbroadcast(g[index], values)",
)
