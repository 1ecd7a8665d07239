"""Indexing reads: x[index] scatters its cotangent back; repeated indices add up."""

from .registry import defvjp


def getitem(x, index):
    """Stands for the subscript `x[index]` in the rule table."""
    return x[index]


defvjp(getitem, "x, index", x="getitem_vjp(g, x, index)")
