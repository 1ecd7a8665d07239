"""A cotangent of its own for a user's vjp rule that writes into it (`dy *= 2.0`): generated
code's cotangents are often read-only broadcast views (Python's `expand_reduced`) or arrays
other adjoints read too, so such a rule raised NumPy's "output array is read-only" in Python and
could change other gradients in compiled code. custom.py calls a rule through `own_copy` only
where the rule's code writes into its cotangent: the others take theirs as it is, at no cost.
"""

import numpy as np

from .common import _array
from .helpers import helper, numba_of
from .registry import linear


@helper(jvp=linear("g"), batch_safe=True, shaped_like="g")
def own_copy(g):
    """`g` as a new array the caller may write into (a number as it is: nothing writes into
    one)."""
    return g.copy() if isinstance(g, np.ndarray) else g


@numba_of(own_copy)
def _own_copy(g):
    if _array(g):
        return lambda g: g.copy()
    return lambda g: g
