"""What generated code wraps a user's vjp rule in (custom.py).

A cotangent of its own for a rule that writes into it (`dy *= 2.0`): generated code's cotangents
are often read-only broadcast views (Python's `expand_reduced`) or arrays other adjoints read
too, so such a rule raised NumPy's "output array is read-only" in Python and could change other
gradients in compiled code. custom.py calls a rule through `own_copy` only where the rule's code
writes into its cotangent: the others take theirs as it is, at no cost. And what a rule returns
checked at each call (`rule_cotangents`): one cotangent per argument, each of its shape.
"""

import typing

import numpy as np

from .common import _array
from .helpers import helper, numba_jitable, numba_of, type_test
from .registry import linear

if typing.TYPE_CHECKING:  # bound by s2sad.numba_helpers (see rules/helpers.py)
    from numba import types


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


# ----------------------------------------------------------------------------- what a rule returns


@helper
def rule_cotangents(result, args, rule):
    """What a user's vjp rule returned, checked where generated code calls it: one cotangent per
    argument (one value for a function of one argument, or JAX's tuple of one, which is taken
    apart), each float argument's of its shape (None passes, as does anything for an argument
    that is no float: an index, a flag); else a ValueError naming the rule (`rule`: its name,
    file and line) and what was expected. A wrong count or shape would otherwise surface far
    from the rule, or not at all (an array unpacked by its rows as two cotangents)."""
    names = rule[rule.rindex("(") + 1 : -1]  # (`rule` ends with the function's parameters)
    params = names.split(", ")
    if len(args) == 1:
        if (
            isinstance(result, tuple)
            and len(result) == 1
            and not isinstance(args[0], (tuple, list))
        ):
            result = result[0]
        given = (result,)
    elif not isinstance(result, (tuple, list)) or len(result) != len(args):
        count = f"{len(result)} values" if isinstance(result, (tuple, list)) else "one value"
        raise ValueError(
            f"your vjp rule {rule} returned {count} where {len(args)} cotangents were expected, a tuple of one "
            f"per argument ({names})"
        )
    else:
        given = result
    for ct, arg, name in zip(given, args, params):
        floats = isinstance(arg, (float, np.floating)) or (
            isinstance(arg, np.ndarray) and arg.dtype.kind == "f"
        )
        if ct is not None and floats and np.shape(ct) != np.shape(arg):
            raise ValueError(
                f"your vjp rule {rule} returned a cotangent of shape {np.shape(ct)} for `{name}`, of shape "
                f"{np.shape(arg)}: each cotangent has its argument's shape"
            )
    return result


@type_test
def _shape_differs(ct, arg) -> bool | None:
    """Whether the cotangent `ct` cannot have the shape of the float argument `arg` (from the
    types: its rank), None where only the values tell (both arrays of one rank); False where
    nothing is checked (no float argument, a cotangent None)."""
    if isinstance(ct, (types.NoneType, types.Omitted)) or not (
        isinstance(arg, types.Float) or (_array(arg) and isinstance(arg.dtype, types.Float))
    ):
        return False
    ct_ndim = ct.ndim if _array(ct) else 0 if isinstance(ct, types.Number) else -1
    arg_ndim = arg.ndim if _array(arg) else 0
    if ct_ndim != arg_ndim:
        return True
    return None if _array(ct) else False


@numba_jitable
def _raising(n):
    """True, for a branch Numba cannot drop before it types the code after it."""
    return n >= 0


@numba_of(rule_cotangents)
def _rule_cotangents(result, args, rule):
    if not isinstance(rule, types.StringLiteral):
        return None  # (Numba asks again with the string's value)
    told = f"your vjp rule {rule.literal_value}"
    names = rule.literal_value[rule.literal_value.rindex("(") + 1 : -1]
    params = names.split(", ")
    n = len(args.types)
    tuple_of = isinstance(result, types.BaseTuple)
    if n > 1 and (not tuple_of or len(result.types) != n):
        count = f"{len(result.types)} values" if tuple_of else "one value"
        wrong = (
            f"{told} returned {count} where {n} cotangents were expected, a tuple of one per "
            f"argument ({names})"
        )

        def refused(result, args, rule):  # (`args`: a tuple of the count expected)
            if _raising(n):
                raise ValueError(wrong)
            return args

        return refused
    one = n == 1 and tuple_of and len(result.types) == 1
    one = one and not isinstance(args.types[0], types.BaseTuple)  # (JAX's tuple of one)
    given = result.types[:1] if one else (result,) if n == 1 else result.types
    checks = [(i, _shape_differs(t, a)) for i, (t, a) in enumerate(zip(given, args.types))]
    messages = [
        f"{told} returned a cotangent {'of another rank' if c else 'of another shape'} than "
        f"`{params[i]}`'s: each cotangent has its argument's shape"
        for i, c in checks
    ]
    if any(c for _, c in checks):  # known wrong from the types
        wrong = messages[next(i for i, c in checks if c)]

        def refused_rank(result, args, rule):
            if _raising(n):
                raise ValueError(wrong)
            return result[0] if one else result

        return refused_rank
    m0, m1, m2, m3 = (messages + [""] * 4)[:4]

    def one_checked(result, args, rule):
        if not _same_shape(result, args[0]):
            raise ValueError(m0)
        return result

    def one_of_tuple(result, args, rule):
        if not _same_shape(result[0], args[0]):
            raise ValueError(m0)
        return result[0]

    def two(result, args, rule):
        if not _same_shape(result[0], args[0]):
            raise ValueError(m0)
        if not _same_shape(result[1], args[1]):
            raise ValueError(m1)
        return result

    def three(result, args, rule):
        if not (_same_shape(result[0], args[0]) and _same_shape(result[1], args[1])):
            raise ValueError(m0 if not _same_shape(result[0], args[0]) else m1)
        if not _same_shape(result[2], args[2]):
            raise ValueError(m2)
        return result

    def four(result, args, rule):
        if not (_same_shape(result[0], args[0]) and _same_shape(result[1], args[1])):
            raise ValueError(m0 if not _same_shape(result[0], args[0]) else m1)
        if not (_same_shape(result[2], args[2]) and _same_shape(result[3], args[3])):
            raise ValueError(m2 if not _same_shape(result[2], args[2]) else m3)
        return result

    if one:
        return one_of_tuple
    # (a rule of more arguments: its count checked above, its shapes not)
    return {1: one_checked, 2: two, 3: three, 4: four}.get(n, lambda result, a, r: result)


def _same_shape(ct, arg):
    return True


@numba_of(_same_shape)
def _same_shape_impl(ct, arg):
    """Whether a cotangent has its float argument's shape (true for what is not checked)."""
    if _shape_differs(ct, arg) is None:
        return lambda ct, arg: ct.shape == arg.shape
    return lambda ct, arg: True
