"""Per-signature decisions of a jitted call, made once: a small gradient in an optimisation loop
is called many times with arguments of the same kinds, and deciding again at each call what the
kinds fix (the transform for their ranks, whether floats meet float32, how the compiled
signature's numbers come back) cost a call more than the compiled code did.

A call's kinds are `signature_key(args)`: each argument's type and Numba's own fingerprint of
it (dtype, rank, layout, writability: what Numba compiles a function separately for), computed
in C. The decisions themselves stay where they are made (jit.py, transformed.py); what they
decided for one key is kept here as a `Plan`, and anything that could change between calls
(the data read, memory shared, a fallback taken since) is still checked at each call.
Calls without a plan make Numba's Python floats NumPy numbers again by `float32_scalars`.
"""

from __future__ import annotations

import numpy as np

from . import workspace

_FINGERPRINT = []  # Numba's compute_fingerprint, once Numba is loaded (jit.py loads it)

PLANS_KEPT = 64  # plans per Jitted or Transformed: more kinds than this start again


def use_fingerprint() -> None:
    """Numba's fingerprint of a value, for `signature_key` (called when Numba has loaded)."""
    if not _FINGERPRINT:
        from numba._dispatcher import compute_fingerprint  # (Numba loads on first use)

        _FINGERPRINT.append(compute_fingerprint)


def signature_key(args) -> tuple | None:
    """What decides a jitted call of `args`: their types and Numba's fingerprints of them;
    None where Numba has not loaded or cannot fingerprint one (a call then decides anew)."""
    if not _FINGERPRINT:
        return None
    try:
        return tuple(map(type, args)), tuple(map(_FINGERPRINT[0], args))
    except (ValueError, TypeError, NotImplementedError):
        return None


class NotPlain(Exception):
    """(raised by `_walk` at a value that is neither plain nor a dict, list or tuple)"""


def tree_key(args, plain, kinds_of=signature_key) -> tuple | None:
    """The key of positional arguments that are `plain` values (arrays, numbers) or dicts, lists
    and tuples of them, at any depth, and their leaves in order: the key is each container's
    structure (its type, a dict's keys in order) with `kinds_of` the leaves; None for
    anything else (a user's object, a function, a string: `_bind` decides each call)."""
    leaves = []
    try:
        structure = tuple([_walk(a, leaves, plain) for a in args])
    except NotPlain:
        return None
    kinds = kinds_of(leaves)
    return None if kinds is None else ((structure, kinds), leaves)


def _walk(value, leaves: list, plain):
    cls = type(value)
    if cls in plain:
        leaves.append(value)
        return None
    if cls is dict:
        return (tuple(value), tuple([_walk(v, leaves, plain) for v in value.values()]))
    if cls is list or cls is tuple:
        return (cls, tuple([_walk(v, leaves, plain) for v in value]))
    raise NotPlain


ANEW = object()  # (what a planned call returns where its plan no longer serves: decided anew)


class Deferred:
    """A message's text made only where a message is made (`str`): each call used to format
    the user's transform as they wrote it (`Transformed.jit_label`) for messages never shown."""

    __slots__ = ("text",)

    def __init__(self, text):
        self.text = text  # a function of no arguments

    def __str__(self):
        return self.text()


def keep(plans: dict, key, plan) -> None:
    """Add a plan under `key` (none: nothing), the dict bounded."""
    if plan is None:
        return
    if len(plans) >= PLANS_KEPT:
        plans.clear()
    plans[key] = plan


class Plan:
    """What a Jitted decided for one signature (its route: this one's compiled code, which the
    key fixes, a NumPy float64 told from a Python float by its type): the dispatcher that ran
    it, in `namespace`, the module it was loaded into (a reload makes a new one and the plan no
    longer applies), and how the result's Python floats come back (`retype`, from the compiled
    signature's return type), and its workspace's `pool` (jit.py) with the positions of the
    arguments whose bytes decide whether a call takes it (`pool_for`)."""

    __slots__ = ("namespace", "dispatcher", "returns", "floats", "pool", "sized")

    def __init__(self, namespace, dispatcher, args, pool=None, given=()):
        self.namespace = namespace
        self.dispatcher = dispatcher
        self.returns = _return_type(dispatcher, args)  # (Numba's type: fast_calls.py reads it)
        self.floats = _float_positions(self.returns)
        self.pool = pool
        self.sized = tuple(i for i, a in enumerate(given) if type(a) is np.ndarray)

    @classmethod
    def made(cls, namespace, dispatcher, args, pool=None, given=()) -> "Plan | None":
        """The plan of a call that ran `dispatcher` on `args` (the arguments `given`, and the
        workspace where `pool`'s was passed); None where its signature cannot be found."""
        try:
            return cls(namespace, dispatcher, args, pool, given)
        except Exception:  # noqa: BLE001  (then each call decides, as before plans)
            return None

    def pool_for(self, args):
        """The pool whose workspace a call on `args` takes (`workspace.pooling`, with the
        arrays' positions known: their sizes may change from call to call), or None."""
        pool = self.pool
        if pool is None or not workspace.ENABLED:
            return None
        size = 0
        for i in self.sized:
            size += args[i].nbytes
        return pool if workspace.takes(pool, size) else None

    def retype(self, result):
        """`result` with the Python floats Numba returned as the NumPy numbers of the compiled
        signature (`_retyped`), by position."""
        floats = self.floats
        if floats is None:
            return result
        if type(floats) is not tuple:  # a number
            return floats(result) if type(result) is float else result
        return _placed(result, floats)


def _placed(result: tuple, floats: tuple) -> tuple:
    """`result` with the Python floats at `floats`' positions (in its tuples too) NumPy's."""
    if len(floats) == 1 and type(floats[0][1]) is not tuple:
        i, number = floats[0]  # (a grad's value and gradients: the value alone, quickly)
        if type(result[i]) is float:
            return (*result[:i], number(result[i]), *result[i + 1 :])
        return result
    parts = list(result)
    for i, number in floats:
        if type(number) is tuple:
            parts[i] = _placed(parts[i], number)
        elif type(parts[i]) is float:
            parts[i] = number(parts[i])
    return tuple(parts)


def _return_type(dispatcher, args):
    """The return type Numba compiled for these arguments (the parameters after them left to
    their defaults: a generated function's `workspace=None`, workspace.py, is `omitted`)."""
    signature = tuple(dispatcher.typeof_pyval(a) for a in args)
    found = dispatcher.overloads.get(signature)
    if found is None:
        found = next(
            o
            for typed, o in dispatcher.overloads.items()
            if typed[: len(signature)] == signature
            and all(type(t).__name__ == "Omitted" for t in typed[len(signature) :])
        )
    return found.signature.return_type


def _number(numba_type):
    """What a Python float of this type becomes (as `_retyped`); None for an array."""
    if str(numba_type).startswith("array("):
        return None
    return np.float32 if str(numba_type) == "float32" else np.float64


def _float_positions(numba_type):
    """How a result of `numba_type` comes back: None (an array), the NumPy type a Python float
    becomes, or for a tuple ((position, that type), ...), a tuple in it (a grad's gradients for
    several wrt, a Jacobian's blocks per output and input) by (position, its own positions),
    at any depth, where it holds numbers."""
    parts = getattr(numba_type, "types", None)
    if parts is None:
        return _number(numba_type)
    floats = []
    for i, part in enumerate(parts):
        inner = _float_positions(part)
        if inner is not None:
            floats.append((i, inner))
    return tuple(floats) or None


def float32_scalars(dispatcher, args, result):
    """`result` with the numbers Numba returned as Python floats made NumPy's again, as NumPy
    code returns them (a function's value, or a jvp's tangent): a float32 one np.float32, a
    float64 one np.float64 (a subclass of float, so also what `x * y` of Python floats gives).
    The compiled signature says which, even with no float32 argument (`np.sum(x, dtype=...)`)."""
    if not _has_float(result):
        return result
    if not _returns_float32(dispatcher) and not any(_float32(a) for a in args):
        return _float64s(result)
    try:
        overloads = dispatcher.overloads
        if len(overloads) == 1:  # (the usual case: typing the arguments costs microseconds)
            returns = next(iter(overloads.values())).signature.return_type
        else:
            returns = _return_type(dispatcher, args)
    except Exception:  # noqa: BLE001  (not a compiled signature: as with no float32 argument)
        return result if any(_float32(a) for a in args) else _float64s(result)
    return _retyped(result, returns)


def _returns_float32(dispatcher) -> bool:
    """Whether a signature the dispatcher compiled returns a float32 number (in a tuple too),
    kept on it for its number of signatures."""
    count = len(dispatcher.overloads)
    kept = getattr(dispatcher, "_s2sad_float32_returns", None)
    if kept is None or kept[0] != count:
        found = any(
            "float32" in str(o.signature.return_type).replace("array(float32", "")
            for o in list(dispatcher.overloads.values())
        )
        kept = (count, found)
        try:
            dispatcher._s2sad_float32_returns = kept
        except AttributeError:  # (not a Numba dispatcher: asked again next time)
            pass
    return kept[1]


def _has_float(value) -> bool:
    return type(value) is float or type(value) is tuple and any(_has_float(v) for v in value)


def _float32(value) -> bool:
    dtype = getattr(value, "dtype", None)
    return (
        dtype is not None
        and dtype.char == "f"
        or isinstance(value, (tuple, list))
        and any(_float32(v) for v in value)
    )


def _float64s(value):
    """`value` with each Python float in it (or in its tuples) an np.float64: with no float32
    argument, Numba's floats are float64."""
    if type(value) is float:
        return np.float64(value)
    if type(value) is tuple:
        return tuple(_float64s(v) for v in value)
    return value


def _retyped(value, numba_type):
    if isinstance(value, tuple):
        parts = getattr(numba_type, "types", None)
        if parts is None or len(parts) != len(value):
            return value
        return tuple(_retyped(v, t) for v, t in zip(value, parts))
    if type(value) is float:
        return np.float32(value) if str(numba_type) == "float32" else np.float64(value)
    return value
