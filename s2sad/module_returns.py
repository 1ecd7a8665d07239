"""What a module `s2sad emit` writes returns: the plain functions it copies beside its function,
so that a call returns what in-process `grad`, `value_and_grad`, `vjp` and `jvp` return. A
plain module's function returns its gradients through `like_input` (one) or `like_inputs`
(several); a `--jit` module's calls the compiled one through `_returned`.

Numba takes a 0-d array and its number as different types (a loop carrying one fails to unify),
returns a float32 number as a Python float, and a 0-d array's gradient as a number: the module's
function calls the compiled one with each 0-d array as its number, then gives each gradient its
input's type, dtype and shape, and each value or tangent NumPy's scalar type (np.float32 where
the compiled signature says float32). Nothing here imports s2sad: the text is copied as is.
"""

import numpy as np


def _unboxed(value):
    """A 0-d array as the number it holds (compiled code types the two differently)."""
    return value[()] if isinstance(value, np.ndarray) and value.ndim == 0 else value


def like_input(g, x):
    """The gradient `g` with the type, dtype and shape of its input `x` (a Python float for a
    Python number), an array that can be written into and shares no memory with `x`. An integer
    or bool input's gradient stays float64: its dtype would truncate the numbers. A list or
    tuple input (code made without example arguments reads it as one array) gets a list or
    tuple of gradients, as in-process s2sad gives; an element no cotangent reached (the 0 of an
    array of objects) is zeros of that element's shape."""
    if type(x) in (list, tuple) and isinstance(g, np.ndarray) and g.ndim and len(g) == len(x):
        return type(x)(
            like_input(np.zeros(np.shape(e)) if type(d) is int else d, e) for d, e in zip(g, x)
        )
    if isinstance(x, np.ndarray):
        dtype = x.dtype if x.dtype.kind in "fc" else np.float64
        g = np.asarray(g, dtype=dtype).reshape(x.shape)
        shared = not g.flags.writeable or np.may_share_memory(g, x)
        return g.copy() if shared else g
    if isinstance(x, np.inexact):
        return x.dtype.type(g)
    return float(g) if isinstance(x, (int, float, np.generic)) else g


def like_inputs(grads, inputs):
    """Each gradient as `like_input` gives it, an array of its own: none shares memory with an
    input or with another (the code may compute two gradients as one array)."""
    out = []
    for g, x in zip(grads, inputs):
        g = like_input(g, x)
        if isinstance(g, np.ndarray) and any(np.may_share_memory(g, o) for o in (*inputs, *out)):
            g = g.copy()
        out.append(g)
    return tuple(out)


def _retyped(value, numba_type):
    """A Python float Numba returned as NumPy's number of the compiled type, in tuples too."""
    if isinstance(value, tuple):
        parts = getattr(numba_type, "types", ())
        return tuple(_retyped(v, t) for v, t in zip(value, parts))
    if type(value) is float:
        return np.float32(value) if str(numba_type) == "float32" else np.float64(value)
    return value


def _returned(function, args, inputs, mode, origin=None):
    """The compiled `function`'s result for `args` as in-process s2sad returns it: `mode`'s
    gradients (of `inputs`, those differentiated) in their inputs' kinds, values retyped. An
    index out of range, which the compiled code checks, raises IndexError naming `origin` (the
    function's file and line): the module has no Python version to find the index's line."""
    args = tuple(_unboxed(a) for a in args)
    try:
        result = function(*args)
    except IndexError as exc:
        if str(exc) != "index is out of bounds":  # (Numba's check's message)
            raise
        where = _index_line(function, args, origin)
        if where is not None:
            raise IndexError(f"{where[0]}\n  at {where[1]}") from None
        where = f" of {origin}" if origin else ""
        raise IndexError(
            f"{exc}: an integer index in the code{where} is out of range (the module "
            "`s2sad emit` writes without --jit raises this at its line)"
        ) from None
    signature = tuple(function.typeof_pyval(a) for a in args)
    returns = function.overloads[signature].signature.return_type
    if mode in ("jvp", "vjp"):  # (a vjp's function returns the value; its sweep, gradients)
        return _retyped(result, returns)
    value, grads = result if mode == "value_and_grad" else (None, result)
    if len(inputs) == 1:
        grads = like_input(grads, inputs[0])
    else:
        grads = like_inputs(grads, inputs)
    if mode == "value_and_grad":
        return _retyped(value, returns.types[0]), grads
    return grads


def _index_line(function, args, origin):
    """(NumPy's message, `FILE line N (`code`)`) for the index out of range the compiled
    `function` met, which Numba's check does not place: its Python version run on the same
    arguments (it copies what it writes into; the helpers it calls run their compiled forms)
    raises NumPy's IndexError at the generated line whose `# line N: code` comment names the
    user's. None where that run raises no IndexError in this file."""
    code = function.py_func.__code__
    try:
        function.py_func(*args)
    except IndexError as found:
        tb, at = found.__traceback__, None
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == code.co_filename:
                at = tb.tb_lineno
            tb = tb.tb_next
        with open(code.co_filename, encoding="utf-8") as module:
            lines = module.read().splitlines()[: at or 0]
        for text in reversed(lines):
            said = text.strip()[2:].partition(", ")[2] or text.strip()[2:]  # (`f, line N:`)
            if text.strip().startswith("# ") and said.startswith("line ") and ": " in said:
                number, _, line = said.partition(": ")
                file = (origin or "the function").rsplit(":", 1)[0]
                return str(found), f"{file} {number} (`{line}`)"
    except Exception:  # noqa: BLE001  (another error: the compiled code's message stands)
        return None
    return None


FUNCTIONS = (_unboxed, like_input, like_inputs, _retyped, _index_line, _returned)
