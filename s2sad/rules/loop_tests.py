"""The tests compiled code makes before a fused loop nest or a lowered loop (pipeline/fusion,
pipeline/lower.py): whether the fused loops may stand for the array statements they replace,
and the test of a `while True:` that Numba cannot fold. In Python (the fallback of a jitted
function) the array statements run: the guards are False there.
"""

import typing

from .common import _array
from .helpers import helper, numba_of

if typing.TYPE_CHECKING:  # bound by s2sad.numba_helpers (see rules/helpers.py)
    from numba import literal_unroll, types


@helper(nondiff=True)
def fusible(*arrays):
    """Whether a fused loop nest (pipeline/fuse.py) may stand for the array statements it
    replaces: in compiled code, when the arrays are of one shape. Python runs the array
    statements, which are faster there than a loop over elements: here it is False."""
    return False


@numba_of(fusible)
def _fusible(*arrays):
    # float64 only: for other dtypes the fused loops (float64 arrays, a float64 sum) would not
    # have the types of the statements they replace, which Numba would silently widen where
    # both meet; it compiles the code unfused instead (jit.py), keeping NumPy's promotions
    if not all(_array(t) and t.dtype == types.float64 for t in arrays):
        return None
    if len({t.ndim for t in arrays}) != 1:
        return None
    if len(arrays) == 1:
        return lambda *arrays: True
    if len(arrays) == 2:  # (fused code compares each array with the first: pipeline/fusion)
        return lambda *arrays: arrays[0].shape == arrays[1].shape

    def same_shape(*arrays):
        shape = arrays[0].shape
        same = True
        for a in literal_unroll(arrays):
            same = same and a.shape == shape
        return same

    return same_shape


@helper(nondiff=True)
def forever():
    """The test of a `while True:` loop in compiled code (pipeline/lower.py): Numba miscompiles
    some loops whose test it can fold."""
    return True


@numba_of(forever)
def _forever():
    return lambda: True


@helper(nondiff=True)
def float64_arrays(*arrays):
    """Whether a fused loop nest broadcasting arrays across ranks (pipeline/fusion) may stand
    for the array statements it replaces, with the shape comparisons that follow it: in
    compiled code, when the arrays are float64. Python runs the array statements: False."""
    return False


@numba_of(float64_arrays)
def _float64_arrays(*arrays):
    # as fusible: other dtypes compile the unfused code (jit.py)
    if not all(_array(t) and t.dtype == types.float64 for t in arrays):
        return None
    return lambda *arrays: True
