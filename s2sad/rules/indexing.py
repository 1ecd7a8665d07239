"""Indexing: a read x[index] scatters its cotangent back (repeated indices add up); a scatter-add
(`np.add.at`, normalized to a write of `scatter_added`) gathers it."""

from .. import runtime
from .registry import defvjp


def getitem(x, index):
    """Stands for the subscript `x[index]` in the rule table."""
    return x[index]


defvjp(getitem, "x, index", x="getitem_vjp(g, x, index)")
defvjp(
    runtime.scatter_added,
    "a, index, values",
    a="g",
    values="unbroadcast(g[index], values)",
)
