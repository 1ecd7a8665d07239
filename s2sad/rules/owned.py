"""What generated code wraps a user's vjp rule in (custom.py).

A cotangent of its own for a rule that writes into it (`dy *= 2.0`): generated code's cotangents
are often read-only broadcast views (Python's `expand_reduced`) or arrays other adjoints read
too, so such a rule raised NumPy's "output array is read-only" in Python and could change other
gradients in compiled code. custom.py calls a rule through `own_copy` only where the rule's code
writes into its cotangent: the others take theirs as it is, at no cost. And what a rule returns
checked at each call (`rule_cotangents`): one cotangent per argument, each of its shape and of
a dtype keeping its precision, None taken for zeros and a list for a tuple.
"""

import typing

import numpy as np

from .common import _array
from .helpers import helper, numba_jitable, numba_of, type_test
from .registry import linear

if typing.TYPE_CHECKING:  # bound by s2sad.numba_helpers (see rules/helpers.py)
    from numba import types
    from numba.np.numpy_support import as_dtype


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
    argument (one value for a function of one argument, or JAX's tuple of one, or a list of one,
    which is taken apart; a tuple or a list of them for more), each float argument's of its shape
    and of a dtype that keeps its precision (anything passes for an argument that is no float:
    an index, a flag); else a ValueError naming the rule (`rule`: its name, file and line) and
    what was expected. A wrong count or shape would otherwise surface far from the rule, or not
    at all (an array unpacked by its rows as two cotangents); a float32 cotangent of a float64
    argument would round its gradient silently. None is a zero cotangent (as in JAX), returned
    as zeros of the argument's shape and dtype, in a list as in a tuple."""
    names = rule[rule.rindex("(") + 1 : -1]  # (`rule` ends with the function's parameters)
    params = names.split(", ")
    if len(args) == 1:
        if isinstance(result, (tuple, list)) and not isinstance(args[0], (tuple, list)):
            if len(result) != 1:
                raise ValueError(
                    f"your vjp rule {rule} returned {len(result)} values where 1 cotangent was "
                    f"expected, one value for `{names}` (or a tuple of one)"
                )
            result = result[0]
        given = (result,)
    elif not isinstance(result, (tuple, list)) or len(result) != len(args):
        k = len(result) if isinstance(result, (tuple, list)) else None
        count = "one value" if k is None else f"{k} value{'s' * (k != 1)}"  # (a tuple of one)
        raise ValueError(
            f"your vjp rule {rule} returned {count} where {len(args)} cotangents were expected, a tuple of one "
            f"per argument ({names})"
        )
    else:
        given = tuple(result)
    checked = []
    for ct, arg, name in zip(given, args, params):
        floats = isinstance(arg, (float, np.floating)) or (
            isinstance(arg, np.ndarray) and arg.dtype.kind == "f"
        )
        if ct is None and floats:  # a zero cotangent
            ct = np.zeros_like(arg) if isinstance(arg, np.ndarray) else type(arg)(0.0)
        if ct is not None and floats and np.shape(ct) != np.shape(arg):
            raise ValueError(
                f"your vjp rule {rule} returned a cotangent of shape {np.shape(ct)} for `{name}`, of shape "
                f"{np.shape(arg)}: each cotangent has its argument's shape"
            )
        if ct is not None and floats:  # (a narrower float, or complex: see _dtype_message)
            dtype, wanted = np.asarray(ct).dtype, np.result_type(arg)
            if dtype.kind == "c" or dtype.kind == "f" and dtype.itemsize < wanted.itemsize:
                raise ValueError(_DTYPE_TOLD.format(rule=rule, ct=dtype, name=name, arg=wanted))
        checked.append(ct)
    return checked[0] if len(args) == 1 else tuple(checked)


_DTYPE_TOLD = (
    "your vjp rule {rule} returned a cotangent of dtype {ct} for `{name}`, of dtype {arg}: "
    "return each cotangent in its argument's dtype"
)


@type_test
def _dtype_message(ct, arg, rule: str, name: str) -> str | None:
    """What a cotangent of dtype `ct` for a float argument of dtype `arg` raises, or None where
    it fits: a narrower float (float32 for float64) would round the gradient silently, a complex
    number has no place in a real one; a wider float or an integer passes (the gradient is cast
    to its argument's dtype in the end). Numba's form asks it with the types' dtypes."""
    if not (ct.kind == "c" or ct.kind == "f" and ct.itemsize < arg.itemsize):
        return None
    return _DTYPE_TOLD.format(rule=rule, ct=ct, name=name, arg=arg)


@type_test
def _shape_differs(ct, arg) -> bool | None:
    """Whether the cotangent `ct` cannot have the shape of the float argument `arg` (from the
    types: its rank), None where only the values tell (both arrays of one rank); False where
    nothing is checked (no float argument, a cotangent None)."""
    if isinstance(ct, (types.NoneType, types.Omitted)) or not _floats(arg):
        return False
    ct_ndim = ct.ndim if _array(ct) else 0 if isinstance(ct, types.Number) else -1
    arg_ndim = arg.ndim if _array(arg) else 0
    if ct_ndim != arg_ndim:
        return True
    return None if _array(ct) and _array(arg) else False


@type_test
def _floats(arg) -> bool:
    """Whether an argument is a float or an array of floats (whose cotangent is checked)."""
    return isinstance(arg, types.Float) or (_array(arg) and isinstance(arg.dtype, types.Float))


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
    n = len(args.types)
    tuple_of = isinstance(result, types.BaseTuple)
    list_of = isinstance(result, types.List)
    expected = f"where {n} cotangents were expected, a tuple of one per argument ({names})"
    if n > 1 and (not (tuple_of or list_of) or tuple_of and len(result.types) != n):
        k = len(result.types) if tuple_of else None
        count = "one value" if k is None else f"{k} value{'s' * (k != 1)}"
        wrong = f"{told} returned {count} {expected}"

        def refused(result, args, rule):  # (`args`: a tuple of the count expected)
            if _raising(n):
                raise ValueError(wrong)
            return args

        return refused
    if n > 1:
        length = f"{told} returned a list of another length {expected}"

        def each(result, args, rule):  # (a list's length known only from its value)
            if len(result) != n:
                raise ValueError(length)
            return _cotangents_from(result, args, rule, 0)

        return each
    if isinstance(args.types[0], types.BaseTuple):
        return lambda result, args, rule: _cotangents_from((result,), args, rule, 0)[0]
    single = f"where 1 cotangent was expected, one value for `{names}` (or a tuple of one)"
    if tuple_of and len(result.types) != 1:
        wrong = f"{told} returned {len(result.types)} values {single}"

        def refused_one(result, args, rule):
            if _raising(n):
                raise ValueError(wrong)
            return args[0]

        return refused_one
    if tuple_of:
        return lambda result, args, rule: _cotangents_from(result, args, rule, 0)[0]
    if list_of:
        length = f"{told} returned a list of another length {single}"

        def one(result, args, rule):  # (a list's length known only from its value)
            if len(result) != 1:
                raise ValueError(length)
            return _cotangents_from(result, args, rule, 0)[0]

        return one
    return lambda result, args, rule: _cotangents_from((result,), args, rule, 0)[0]


def _cotangents_from(result, args, rule, i):
    """The cotangents `result[i:]` of `args[i:]`, each checked (Numba's form only)."""
    return tuple(result[i:])


@numba_of(_cotangents_from)
def _cotangents_from_impl(result, args, rule, i):
    """One cotangent checked and the rest, by a form for each index `i` (a literal): the
    cotangents of a tuple or list are of different types, which a loop cannot index."""
    if not isinstance(i, types.IntegerLiteral):
        return None  # (Numba asks again with the index's value)
    k = i.literal_value
    if k == len(args.types):
        return lambda result, args, rule, i: ()
    names = rule.literal_value[rule.literal_value.rindex("(") + 1 : -1]
    name, later = names.split(", ")[k], k + 1
    ct, arg = result.dtype if isinstance(result, types.List) else result.types[k], args.types[k]
    optional = isinstance(ct, types.Optional) and _floats(arg)  # a list of arrays and None
    ct = ct.type if optional else ct
    differs = _shape_differs(ct, arg)
    told = f"your vjp rule {rule.literal_value} returned a cotangent"
    wrong = f"{told} {'of another rank' if differs else 'of another shape'} than `{name}`'s: "
    wrong += "each cotangent has its argument's shape"
    if isinstance(ct, types.NoneType) and _floats(arg):  # a zero cotangent
        return _zero_unless_given(k, later, arg, "")
    # wrong whatever the value (a rank or a dtype the types tell), as Python mode raises it
    known = wrong if differs else None
    if known is None and _floats(arg):
        known = _dtype_message(*_dtypes(ct, arg), rule.literal_value, name)
    if optional:
        return _optional_form(k, later, arg, ct, known, differs is None, wrong)
    refuse, known = known is not None, known or ""

    if differs is None:  # arrays of one rank: their shapes compared

        def compared(result, args, rule, i):
            if result[k].shape != args[k].shape:
                raise ValueError(wrong)
            if refuse and _raising(k):
                raise ValueError(known)
            return (result[k],) + _cotangents_from(result, args, rule, later)

        return compared

    def checked(result, args, rule, i):  # (known wrong from the types, or not checked)
        if refuse and _raising(k):
            raise ValueError(known)
        return (result[k],) + _cotangents_from(result, args, rule, later)

    return checked


@type_test
def _dtypes(ct, arg):
    """The NumPy dtypes of a cotangent's and a float argument's types, for `_dtype_message`
    (a cotangent of no number's type: the argument's own, which passes)."""
    arg_dtype = as_dtype(arg.dtype if _array(arg) else arg)
    ct = ct.dtype if _array(ct) else ct
    return (as_dtype(ct) if isinstance(ct, types.Number) else arg_dtype), arg_dtype


@type_test
def _optional_form(k, later, arg, ct, known, compare, wrong):
    """The cotangent `k` of a list holding arrays (or numbers) and None: None is zeros of the
    argument's shape, in the cotangent's dtype (both branches give one type); another value is
    checked as one in a tuple is (`known`: the message it raises whatever its value)."""
    if known is not None:  # None passes, anything else raises
        return _zero_unless_given(k, later, arg, known)
    dtype = as_dtype(ct.dtype if _array(ct) else ct)
    zero = dtype.type(0.0)
    if not compare:  # numbers (a float argument's)

        def number(result, args, rule, i):
            c = result[k]
            return (zero if c is None else c,) + _cotangents_from(result, args, rule, later)

        return number

    def optional(result, args, rule, i):
        c = result[k]
        if c is None:
            out = np.zeros(args[k].shape, dtype)
        else:
            if c.shape != args[k].shape:
                raise ValueError(wrong)
            out = c
        return (out,) + _cotangents_from(result, args, rule, later)

    return optional


@type_test
def _zero_unless_given(k, later, arg, known):
    """The cotangent `k` as zeros of the float argument's shape and dtype (a number for a
    number, as in Python mode) where the rule gave None, else a ValueError saying `known`."""
    if _array(arg):

        def zeros(result, args, rule, i):
            if result[k] is not None:
                raise ValueError(known)
            return (np.zeros_like(args[k]),) + _cotangents_from(result, args, rule, later)

        return zeros
    zero = as_dtype(arg).type(0.0)

    def number(result, args, rule, i):
        if result[k] is not None:
            raise ValueError(known)
        return (zero,) + _cotangents_from(result, args, rule, later)

    return number
