"""NumPy mode's memory: the buffers of dying temporaries that elementwise results are written
into (`spare`, for pipeline/reuse.py's `out=spare(t, a, b)`), read-only broadcast views made
without np.broadcast_to's Python cost (`_broadcast_view`, for `expand_reduced`), and the number
a constant cotangent holds (`constant_value`, pipeline/constant_cotangents.py). Plain NumPy
forms only: jitted code neither reuses buffers this way nor calls them.
"""

import numpy as np

from .helpers import helper

# below this many elements (64 KiB of float64) a fresh array costs about what reusing one saves
# (`spare`): malloc's free lists hand it memory already touched. Above it, glibc gives memory back
# to the kernel as a call's temporaries die (mmap'd blocks, the heap's top trimmed), and the next
# call's arrays come as fresh pages: the stencil at N=200 (40,000 elements) took 2.6 ms a
# gradient that way in a fresh process, 1.0 ms reusing (its objective 0.1-0.5 ms)
SPARE_SIZE = 8192


@helper(nondiff=True)
def spare(buffer, *operands):
    """The array of a temporary nothing reads again (pipeline/reuse.py), for an elementwise
    result over `operands` to be written into (`out=`) where it fits exactly: a float array
    owning its memory, large enough that a fresh one costs more (SPARE_SIZE elements), with the
    operands' broadcast shape and each array operand's dtype (numbers Python's own), sharing
    memory with no other operand. Else None: the result is a fresh array."""
    if type(buffer) is not np.ndarray or buffer.size < SPARE_SIZE or buffer.base is not None:
        return None
    dtype = buffer.dtype
    if dtype.kind != "f" or not buffer.flags.writeable:
        return None
    shapes = []
    for x in operands:
        if type(x) is np.ndarray or isinstance(x, np.generic):
            if x.dtype != dtype or (x is not buffer and np.may_share_memory(x, buffer)):
                return None
            shapes.append(x.shape)
        elif type(x) not in (float, int, bool):
            return None
    try:
        return buffer if np.broadcast_shapes(*shapes) == buffer.shape else None
    except ValueError:  # the operation raises its own error
        return None


@helper(nondiff=True)
def constant_value(v):
    """One element of `v`, an array every element of which is that number (a constant cotangent,
    pipeline/constant_cotangents.py): a NumPy number of `v`'s dtype, whose arithmetic NumPy
    computes as the array's; 0 of that dtype where `v` is empty."""
    v = v if type(v) is np.ndarray else np.asarray(v)
    return v[(0,) * v.ndim] if v.size else v.dtype.type(0)


@helper
def _broadcast_view(g, shape, reduced):
    """`g` with the axes `reduced` inserted, broadcast to `shape`, as np.broadcast_to's read-only
    view; None where `g` is not a contiguous float array that broadcasts so (np.broadcast_to
    then decides, and raises its error). Its Python cost, a few microseconds a call, was a good
    part of a small gradient's time (GMM at d=2: eight calls)."""
    if g.ndim + len(reduced) != len(shape) or len(set(reduced)) != len(reduced):
        return None
    if not (g.size and g.dtype.kind == "f" and g.flags.c_contiguous):
        return None
    kept, strides = iter(zip(g.shape, g.strides)), []
    for i, n in enumerate(shape):
        length, stride = (1, 0) if i in reduced else next(kept)
        if length != n and length != 1:
            return None
        strides.append(stride if length == n else 0)
    view = np.ndarray(shape, g.dtype, g, 0, tuple(strides))
    view.flags.writeable = False
    return view
