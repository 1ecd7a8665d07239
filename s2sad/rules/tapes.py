"""Tapes of values the adjoint reads only for their shape and dtype (`unbroadcast(g, x)`).

Generated Python keeps such a tape as a list of stand-ins (`x_tape.append(shape_stub(x))`,
`x = x_tape.pop()`). Compiled by Numba, that is a list append and pop per loop iteration, about
as much as a stencil's or a recurrence's own arithmetic, for a value whose shape never changes:
a scalar's. So jitted code calls these helpers instead. Their Numba forms keep nothing for a
scalar (its type, fixed when Numba compiles the function, says all the adjoint asks): the push
does nothing, and the pop gives back the name's current value, which has that type. An array's
shape goes on the tape as integers, and comes back as a stand-in of that shape and dtype.
Anything else is kept as the list kept it. The NumPy forms are the lists themselves (the Python
fallback of a jitted function).

A tape made with `like`, a value whose shape every push's value has (proven by
pipeline/fixed_shapes.py), keeps nothing at all when compiled: it is that shape, the push does
nothing and the pop makes its stand-in in that shape. The NumPy forms still keep the lists:
Python runs the code Numba could not type, whose names' dtypes Numba has not fixed either.
"""

import typing

import numpy as np

from .common import shape_stub
from .helpers import helper, numba_jitable, numba_of

if typing.TYPE_CHECKING:  # bound by s2sad.numba_helpers (see rules/helpers.py)
    from numba import types
    from numba.cpython.unsafe.tuple import tuple_setitem
    from numba.np.numpy_support import as_dtype


@helper(nondiff=True)
def shape_tape(*like):
    """An empty tape of shapes (given arrays `like`, of values all of their broadcast's shape)."""
    return []


@numba_of(shape_tape)
def _shape_tape(*like):
    if not like:

        def empty(*like):
            dims = [0]  # typed as a list of integers, then emptied
            dims.pop()
            return dims

        return empty
    if len(like) > 3 or not all(isinstance(t, types.Array) and t.ndim for t in like):
        return None
    # the broadcast's shape (all the tape need know), from the array of the most axes; arrays
    # that do not broadcast give one the code never records: its broadcast raises first
    order = sorted(range(len(like)), key=lambda k: -like[k].ndim)
    if len(like) == 1:
        return lambda *like: like[0].shape
    first, second = order[0], order[1]
    if len(like) == 2:
        return lambda *like: _widened(like[first].shape, like[second].shape)
    third = order[2]
    return lambda *like: _widened(
        _widened(like[first].shape, like[second].shape), like[third].shape
    )


@numba_jitable
def _widened(shape, other):
    """`shape` with each axis of length 1 given `other`'s length there (axes from the right)."""
    offset = len(shape) - len(other)
    for k in range(len(other)):
        if shape[offset + k] == 1:
            shape = tuple_setitem(shape, offset + k, other[k])
    return shape


@helper(nondiff=True)
def shape_push(tape, x):
    """Record the shape and dtype of `x`."""
    tape.append(shape_stub(x))


@numba_of(shape_push)
def _shape_push(tape, x):
    if isinstance(x, types.Array) and not isinstance(tape, types.BaseTuple):

        def dims(tape, x):
            for n in x.shape:
                tape.append(n)

        return dims
    return lambda tape, x: None  # (a number's type says all; a fixed shape is the tape)


@helper(nondiff=True)
def shape_pop(tape, x):
    """A value with the shape and dtype `x` had where it was recorded (its elements unread);
    `x` is the name's current value."""
    return tape.pop()


@numba_of(shape_pop)
def _shape_pop(tape, x):
    if isinstance(x, types.Array):
        zero = np.zeros((), as_dtype(x.dtype))  # a constant of the compiled code
        ndim = x.ndim
        if isinstance(tape, types.BaseTuple):  # the one shape of a tape made `like` a value
            return lambda tape, x: np.broadcast_to(zero, tape)

        def stand_in(tape, x):
            shape = x.shape
            for k in range(ndim - 1, -1, -1):
                shape = tuple_setitem(shape, k, tape.pop())
            return np.broadcast_to(zero, shape)

        return stand_in
    return lambda tape, x: x


# Tapes of rows (pipeline/row_tapes.py): in jitted code, where a loop's trip count is known
# when it starts, a value it records once an iteration goes into a row of one array made at the
# first push, or before the loop like a buffer the value is written into (`rows_like`), not
# onto a list: one allocation a loop where the list kept one array a step (and held them all),
# no list traffic, and the adjoint reads the rows back from one block. A value that does not
# fit its row (another shape or dtype) raises a ValueError saying ROW_TAPE_MISFIT, and the
# call runs again in the code without fused loops, which keeps lists (jit.py). The NumPy forms
# are lists: Python mode keeps the arrays themselves, which costs less there than a copy.
ROW_TAPE_MISFIT = "s2sad: a value recorded in a loop does not fit its tape's rows"


@helper(nondiff=True)
def row_tape(x, capacity):
    """A tape for `capacity` values like `x`: compiled, an array of `capacity` rows shaped like
    `x`, made at the first push; in Python, a list."""
    return []


@numba_of(row_tape)
def _row_tape(x, capacity):
    if isinstance(x, types.Array):
        return lambda x, capacity: np.empty((capacity,) + x.shape, x.dtype)
    if isinstance(x, (types.Number, types.Boolean)):
        dtype = as_dtype(x)
        return lambda x, capacity: np.empty(capacity, dtype)
    return None


@helper(nondiff=True)
def rows_like(buffer, capacity):
    """A tape for `capacity` values like `buffer`, made before their loop (pipeline/
    rows_before.py): compiled, an array of `capacity` rows shaped like `buffer`; in Python, a
    list."""
    return []


@numba_of(rows_like)
def _rows_like(buffer, capacity):
    if isinstance(buffer, types.Array):
        return lambda buffer, capacity: np.empty((capacity,) + buffer.shape, buffer.dtype)
    return None


@helper(nondiff=True)
def shape_rows(capacity, axes):
    """A tape for `capacity` shapes of `axes` axes, counted with a group of rows
    (pipeline/row_tapes.py): compiled, an array of `capacity` rows of `axes` integers; in
    Python, a list."""
    return []


@numba_of(shape_rows)
def _shape_rows(capacity, axes):
    return lambda capacity, axes: np.empty((capacity, axes), np.intp)


@helper(nondiff=True)
def push_shape_row(tape, k, shape):
    """Record `shape` (an array's, passed alone: no reference to the array is taken) as the
    tape's `k`-th."""
    tape.append(shape)


@numba_of(push_shape_row)
def _push_shape_row(tape, k, shape):
    def push(tape, k, shape):
        if k >= tape.shape[0] or len(shape) != tape.shape[1]:
            raise ValueError(ROW_TAPE_MISFIT)
        for axis in range(len(shape)):
            tape[k, axis] = shape[axis]

    return push


@helper(nondiff=True)
def pop_shape_row(tape, k, x):
    """A stand-in (`shape_stub`) of the tape's `k`-th shape, in the dtype of `x`, the name's
    current value."""
    return shape_stub(np.broadcast_to(np.zeros((), np.asarray(x).dtype), tape.pop()))


@numba_of(pop_shape_row)
def _pop_shape_row(tape, k, x):
    if not isinstance(x, types.Array):
        return None
    zero = np.zeros((), as_dtype(x.dtype))  # a constant of the compiled code
    ndim = x.ndim

    def stand_in(tape, k, x):
        shape = x.shape
        for axis in range(ndim):
            shape = tuple_setitem(shape, axis, tape[k, axis])
        return np.broadcast_to(zero, shape)

    return stand_in


@helper(nondiff=True)
def push_row(tape, k, x):
    """Record `x` as the tape's `k`-th value (from 0)."""
    tape.append(x)


@numba_of(push_row)
def _push_row(tape, k, x):
    if isinstance(x, types.Array):
        if x.dtype != tape.dtype or x.ndim != tape.ndim - 1:  # (rows made like a buffer)

            def misfit(tape, k, x):
                raise ValueError(ROW_TAPE_MISFIT)

            return misfit
        if x.ndim == 1:  # element by element: Numba's `tape[k] = x` is a generic broadcast

            def row_push(tape, k, x):
                if k >= tape.shape[0] or x.shape[0] != tape.shape[1]:
                    raise ValueError(ROW_TAPE_MISFIT)
                for j in range(x.shape[0]):
                    tape[k, j] = x[j]

            return row_push

        def array_push(tape, k, x):
            if k >= tape.shape[0] or x.shape != tape.shape[1:]:
                raise ValueError(ROW_TAPE_MISFIT)
            tape[k] = x

        return array_push

    def number_push(tape, k, x):
        if k >= tape.shape[0]:
            raise ValueError(ROW_TAPE_MISFIT)
        tape[k] = x

    return number_push


@helper(nondiff=True)
def pop_row(tape, k):
    """The tape's `k`-th value, the last recorded and not yet popped."""
    return tape.pop()


@numba_of(pop_row)
def _pop_row(tape, k):
    if isinstance(tape, types.List):  # (views kept as they were: `view_rows`)
        return lambda tape, k: tape.pop()
    return lambda tape, k: tape[k]


@helper(nondiff=True)
def view_rows(x, capacity):
    """A tape for `capacity` arrays like `x`, each bound to a subscript (likely a view of an
    array the loop made): compiled, a list of them, as a list tape kept them; compiled with a
    workspace, rows in it (rules/pools.py: `pooled_view_rows`). In Python, a list."""
    return []


@numba_of(view_rows)
def _view_rows(x, capacity):
    if not isinstance(x, types.Array):
        return None

    def listed(x, capacity):
        tape = [x]  # (typed as a list of such arrays, then emptied)
        tape.pop()
        return tape

    return listed


@helper(nondiff=True)
def push_view(tape, k, x):
    """Record `x` as the `k`-th value of a tape `view_rows` made: the array itself on a list,
    its elements into a row."""
    tape.append(x)


@numba_of(push_view)
def _push_view(tape, k, x):
    if isinstance(tape, types.List):
        return lambda tape, k, x: tape.append(x)
    return lambda tape, k, x: push_row(tape, k, x)
