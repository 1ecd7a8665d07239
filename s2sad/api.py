"""The public transforms. Each returns a callable with the user function's signature; the source
transform runs on its first call (so names defined later in the module resolve) and is cached.
"""

from __future__ import annotations

import functools
import inspect
import linecache
import numbers
import re

import numpy as np

from .transform_cache import transform, transform_and_read
from .pipeline.ranks import rank_of_argument
from .cuda import CudaTransformed, cuda_transform
from .jit import Jitted
from .errors import (
    NonScalarOutputError,
    NonDifferentiableInputError,
    S2SADError,
    SeedShapeError,
    SourceUnavailableError,
    WrtError,
)


def _wrt_names(func, wrt) -> tuple[tuple[str, ...], bool]:
    """Parameter names for `wrt` (an index, a name, or a tuple of them) and whether it was a tuple."""
    if not inspect.isfunction(func):
        raise SourceUnavailableError(
            f"{func!r} is not a Python function with source code",
            hint="differentiate a plain `def` function that calls it; NumPy functions already "
            "have rules, and others can get one with s2sad.register_vjp",
        )
    params = list(inspect.signature(func, follow_wrapped=False).parameters)
    items = wrt if isinstance(wrt, (tuple, list)) else (wrt,)
    names = []
    for item in items:
        if isinstance(item, numbers.Integral) and not isinstance(item, bool):
            if not -len(params) <= item < len(params):
                raise WrtError(
                    f"wrt={item!r} is out of range: {func.__name__} has parameters "
                    f"{', '.join(params) or '(none)'}",
                    hint="pass an index below the number of parameters or a name",
                )
            names.append(params[item])
        elif isinstance(item, str) and item in params:
            names.append(item)
        else:
            raise WrtError(
                f"wrt={item!r} is not a parameter of {func.__name__}; its parameters "
                f"are {', '.join(params) or '(none)'}",
                hint="pass a parameter name or its position",
            )
    if len(set(names)) != len(names):
        raise WrtError(f"wrt={wrt!r} names a parameter twice")
    return tuple(names), isinstance(wrt, (tuple, list))


def _check_input(name: str, value) -> None:
    if isinstance(value, (bool, np.bool_)) or (
        isinstance(value, numbers.Integral) and not isinstance(value, np.ndarray)
    ):
        raise NonDifferentiableInputError(
            f"argument '{name}' is an integer ({value!r}); gradients exist only for floats",
            hint=f"pass {name} as a float, e.g. {float(value)!r}, or leave it out of wrt",
        )
    dtype = (
        np.result_type(value)
        if isinstance(value, (np.ndarray, np.generic, float))
        else np.asarray(value).dtype
    )
    if not np.issubdtype(dtype, np.floating):
        raise NonDifferentiableInputError(
            f"argument '{name}' has dtype {dtype}; gradients exist only for real floats",
            hint=f"convert it first, e.g. {name}.astype(float), or leave it out of wrt",
        )


def _refuse_complex(value, what: str) -> None:
    """A complex value the transform did not see (written into a complex array): an error,
    never a derivative with its imaginary half dropped."""
    if np.iscomplexobj(value):
        raise S2SADError(
            f"a complex value reached the {what}; s2sad does not differentiate complex values yet",
            hint="keep the differentiated path real, or give the function a rule with "
            "s2sad.register_vjp",
        )


def _conform(g, x, others):
    """The cotangent `g` with exactly the type, shape and dtype of the input `x`."""
    _refuse_complex(g, "gradient")
    if isinstance(x, float) and not isinstance(x, np.generic):
        return float(np.asarray(g).reshape(()))
    x_arr = np.asarray(x)
    g_arr = np.asarray(g, dtype=x_arr.dtype)
    if g_arr.shape != x_arr.shape:
        raise S2SADError(
            f"internal error: a gradient of shape {g_arr.shape} for an input of "
            f"shape {x_arr.shape}; please report this with the function"
        )
    if isinstance(x, np.generic):
        return g_arr[()]
    if not isinstance(x, np.ndarray):
        return g_arr.copy() if any(np.may_share_memory(g_arr, o) for o in others) else g_arr
    if not g_arr.flags.writeable or any(np.may_share_memory(g_arr, o) for o in others):
        g_arr = g_arr.copy()
    return g_arr


class Transformed:
    """A differentiated function: call it like the original, read it with `s2sad.source`."""

    def __init__(self, func, wrt, mode: str, jit=False):
        if jit not in (False, True, "strict"):
            raise ValueError(f"jit must be False, True or 'strict', not {jit!r}")
        self.jit = jit
        if isinstance(func, Transformed):
            raise S2SADError(
                "s2sad cannot yet differentiate a function it has already "
                "transformed (higher-order derivatives come with s2sad.hessian)"
            )
        self.func = func
        self.mode = mode
        self.wrt, self.wrt_tuple = _wrt_names(func, wrt)
        self.signature = inspect.signature(func, follow_wrapped=False)  # a wrapper's own
        self._defaults = (func.__defaults__, func.__kwdefaults__)
        # the parameters, where every one may be passed by position: a call passing each by
        # position binds without inspect (whose bind costs more than a small jitted gradient)
        kinds = {p.kind for p in self.signature.parameters.values()}
        plain = kinds <= {
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        }
        self._positional = tuple(self.signature.parameters) if plain else None
        self.last_ranks = None
        functools.update_wrapper(self, func)

    @property
    def compiled(self):
        """The generated function for the arguments of the last call (generic before any)."""
        return transform(
            self.func, self.wrt, self._generated_mode(), self.last_ranks, bool(self.jit)
        )

    def specialized(self, bound):
        """The generated function for these arguments' ranks (scalars need no unbroadcast)."""
        return self.prepared(bound)[0]

    def prepared(self, bound):
        """`specialized(bound)` and the values of the user's data it takes after the arguments
        (globals, closure cells, helpers' defaults), read now."""
        ranks = tuple((name, rank_of_argument(value)) for name, value in bound.arguments.items())
        self.last_ranks = ranks
        return transform_and_read(
            self.func, self.wrt, self._generated_mode(), ranks, bool(self.jit)
        )

    def _generated_mode(self):
        # jitted gradients also return the value, so the scalar check happens here
        return "value_and_grad" if self.jit and self.mode == "grad" else self.mode

    def _run(self, compiled, values, bound, extra=(), name=None):
        if not self.jit:
            return compiled.function(*bound.args, *values, **bound.kwargs)
        args = (*bound.arguments.values(), *extra, *values)
        what = self.jit_label() if name is None else f"the pullback of {self.jit_label()}"
        return Jitted.of(compiled)(args, strict=self.jit == "strict", name=name, what=what)

    label = None  # what the user called, where this is part of it (s2sad.jacobian)

    def jit_label(self) -> str:
        """The user's transform as they wrote it, for messages about compiling it."""
        return self.label or f"s2sad.{self.mode}({self.func.__qualname__}, jit={self.jit!r})"

    def _jitted_vjp(self, compiled, values, bound):
        """The value from the compiled primal; each pullback runs the compiled sweep (the
        recording forward pass, then the adjoint) from copies of the array arguments and of the
        user's data taken now, so that it belongs to this point even if the caller changes its
        arrays (or a global array) in between."""
        out = self._run(compiled, values, bound)
        bound = inspect.BoundArguments(
            bound.signature, {n: _own_copy(v) for n, v in bound.arguments.items()}
        )
        values = tuple(_own_copy(v) for v in values)
        sweep = compiled.name + "_sweep"

        def pullback(*seeds):
            seeds = tuple(_unboxed(s) for s in seeds)
            return self._run(compiled, values, bound, seeds, name=sweep)

        return out, _Pullback(self, bound, out, pullback, compiled.tuple_output)

    def _bind(self, args, kwargs):
        names = self._positional
        if not kwargs and names is not None and len(args) == len(names):
            bound = inspect.BoundArguments(self.signature, dict(zip(names, args)))
            for name in self.wrt:
                _check_input(name, bound.arguments[name])
            return bound
        func = self.func
        held = self._defaults
        if func.__defaults__ is not held[0] or func.__kwdefaults__ is not held[1]:  # replaced
            self.signature = inspect.signature(func, follow_wrapped=False)
            self._defaults = (func.__defaults__, func.__kwdefaults__)
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{self.func.__name__}(): {exc}") from None
        bound.apply_defaults()
        for name in self.wrt:
            _check_input(name, bound.arguments[name])
        return bound

    def _finish(self, grads, bound, extra=()):
        grads = grads if len(self.wrt) > 1 else (grads,)
        # each gradient is the caller's own: sharing memory with no argument, seed or other
        # gradient (dx and dy of sin(x + y) are one array in the generated code)
        others = list(bound.arguments.values()) + list(extra)
        out = []
        for g, n in zip(grads, self.wrt):
            out.append(_conform(g, bound.arguments[n], others))
            others.append(out[-1])
        return tuple(out) if self.wrt_tuple else out[0]

    def __call__(self, *args, **kwargs):
        bound = self._bind(args, kwargs)
        compiled, values = self.prepared(bound)
        if self.mode == "vjp" and self.jit:
            return self._jitted_vjp(compiled, values, bound)
        if self.mode == "vjp":
            out, pullback = compiled.function(*bound.args, *values, **bound.kwargs)
            _detach(pullback, _arrays_in((*bound.arguments.values(), *values, out)))
            return out, _Pullback(self, bound, out, pullback, compiled.tuple_output)
        result = self._run(compiled, values, bound)
        if self.jit and self.mode == "grad":
            if np.ndim(result[0]) != 0:
                raise NonScalarOutputError(
                    f"grad of {self.func.__name__} needs a scalar output, got shape "
                    f"{np.shape(result[0])}; use s2sad.vjp or s2sad.jacobian"
                )
            return self._finish(result[1], bound)
        if self.mode == "value_and_grad":
            return result[0], self._finish(result[1], bound)
        return self._finish(result, bound)

    def __repr__(self):
        return f"<s2sad.{self.mode} of {self.func.__qualname__} wrt {', '.join(self.wrt)}>"


def _own_copy(value):
    """A copy of an argument array (same memory layout and writeability, so a jitted sweep keeps
    its compiled signature), or of a list or tuple holding arrays; other values as they are."""
    if isinstance(value, np.ndarray):
        copied = np.array(value, copy=True, order="K")
        copied.flags.writeable = value.flags.writeable
        return copied
    if type(value) in (list, tuple) and any(isinstance(v, np.ndarray) for v in value):
        return type(value)(_own_copy(v) for v in value)
    return value


def _arrays_in(values) -> list:
    """The arrays among `values` and inside their lists and tuples: memory the caller holds."""
    found = []
    for value in values:
        if isinstance(value, np.ndarray):
            found.append(value)
        elif type(value) in (list, tuple):
            found += _arrays_in(value)
    return found


# what may hold the caller's memory (a tape holds values of one kind: its first tells)
_HELD = (np.ndarray, list, tuple)


def _detach(pullback, arrays) -> None:
    """Give a Python-mode pullback its own copies of the values it reads that share memory with
    `arrays` (the caller's arguments, or the output it returns): the caller may change those in
    place before calling the pullback, which belongs to the point where vjp was called. Only
    what the pullback holds (its closure and defaults, tapes included) is copied."""
    if not arrays:
        return

    def own(value, depth=0):
        if isinstance(value, np.ndarray):
            if any(np.may_share_memory(value, a) for a in arrays):
                return _own_copy(value)
            return value
        if depth < 4 and (
            type(value) is tuple or (type(value) is list and value and isinstance(value[0], _HELD))
        ):
            held = [own(v, depth + 1) for v in value]  # a tape, or a list the caller passed
            if any(h is not v for h, v in zip(held, value)):
                return type(value)(held)  # (a new one: the caller's list stays as it is)
        return value

    if getattr(pullback, "__defaults__", None):  # a re-running pullback binds its arguments
        pullback.__defaults__ = tuple(own(v) for v in pullback.__defaults__)
    for cell in getattr(pullback, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:  # a name the function never assigned
            continue
        held = own(value)
        if held is not value:
            cell.cell_contents = held


class _Pullback:
    """`pullback(seed)`: the vector-Jacobian product for a seed with the output's shape."""

    def __init__(self, owner, bound, out, pullback, tuple_output):
        self.owner, self.bound, self.out = owner, bound, out
        self.pullback, self.tuple_output = pullback, tuple_output

    def __call__(self, seed):
        outs = self.out if self.tuple_output else (self.out,)
        seeds = seed if self.tuple_output else (seed,)
        if self.tuple_output and (not isinstance(seed, (tuple, list)) or len(seed) != len(outs)):
            raise SeedShapeError(
                f"the output is a tuple of {len(outs)}; pass a tuple of " f"{len(outs)} seeds"
            )
        conformed = []
        for s, o in zip(seeds, outs):
            if np.shape(s) != np.shape(o):
                raise SeedShapeError(
                    f"the seed has shape {np.shape(s)} but the output of "
                    f"{self.owner.func.__name__} has shape {np.shape(o)}",
                    hint="pass a seed shaped like the output",
                )
            conformed.append(s)
        grads = self.pullback(*conformed)
        return self.owner._finish(grads, self.bound, conformed)


class JVPTransformed(Transformed):
    """`jvp(f, wrt)(*args, tangent=t)` returns `(f(*args), J t)`."""

    def __call__(self, *args, tangent=None, **kwargs):
        if tangent is None:
            raise TypeError(
                f"jvp of {self.func.__name__} needs tangent= (shaped like "
                f"{', '.join(self.wrt)})"
            )
        bound = self._bind(args, kwargs)
        tangents = tangent if self.wrt_tuple else (tangent,)
        if len(tangents) != len(self.wrt):
            raise SeedShapeError(f"pass one tangent per wrt input ({len(self.wrt)})")
        for name, t in zip(self.wrt, tangents):
            if np.shape(t) != np.shape(bound.arguments[name]):
                raise SeedShapeError(
                    f"the tangent of '{name}' has shape {np.shape(t)} but "
                    f"'{name}' has shape {np.shape(bound.arguments[name])}"
                )
        compiled, values = self.prepared(bound)
        if self.jit:
            out, out_dot = Jitted.of(compiled)(
                (*bound.arguments.values(), *(_unboxed(t) for t in tangents), *values),
                strict=self.jit == "strict",
                what=self.jit_label(),
            )
        else:
            out, out_dot = compiled.function(*bound.args, *tangents, *values, **bound.kwargs)
        if compiled.tuple_output:
            return out, tuple(_conform_output(d, o) for d, o in zip(out_dot, out))
        return out, _conform_output(out_dot, out)


class BatchedJVPTransformed(Transformed):
    """`jvp(f, wrt, batched=True)(*args, tangent=T)`: T holds a batch of tangents along its
    first axis; returns `(f(*args), rows)`, row k the derivative along tangent k, in one sweep
    (the primal runs once)."""

    def __call__(self, *args, tangent=None, **kwargs):
        if tangent is None:
            raise TypeError(
                f"jvp of {self.func.__name__} needs tangent= (a batch of tangents of "
                f"{', '.join(self.wrt)} along a first axis)"
            )
        bound = self._bind(args, kwargs)
        tangents = tangent if self.wrt_tuple else (tangent,)
        if len(tangents) != len(self.wrt):
            raise SeedShapeError(f"pass one batch of tangents per wrt input ({len(self.wrt)})")
        rows = {np.shape(t)[0] if np.ndim(t) else None for t in tangents}
        for name, t in zip(self.wrt, tangents):
            shape = np.shape(bound.arguments[name])
            if np.ndim(t) == 0 or np.shape(t)[1:] != shape:
                raise SeedShapeError(
                    f"the tangents of '{name}' have shape {np.shape(t)}; a batch of them has "
                    f"shape (rows,) + {shape}"
                )
        if len(rows) != 1:
            raise SeedShapeError(f"every wrt input needs the same number of tangents, not {rows}")
        (size,) = rows
        tangents = [np.asarray(t, dtype=np.result_type(t, np.float32)) for t in tangents]
        compiled, values = self.prepared(bound)
        out, out_dot = compiled.function(*bound.args, *tangents, *values, **bound.kwargs)
        others = list(bound.arguments.values()) + list(tangents)
        if compiled.tuple_output:
            rows = []
            for d, o in zip(out_dot, out):
                rows.append(_batch_rows(d, size, o, others))
                others.append(rows[-1])
            return out, tuple(rows)
        return out, _batch_rows(out_dot, size, out, others)


def _batch_rows(t, size, out, others=()):
    """Batched tangent rows shaped `(size,) + out.shape`, in out's float dtype, sharing memory
    with none of `others` (the arguments, the tangents given, the rows returned before)."""
    dtype = np.result_type(np.asarray(out).dtype, np.float32)
    t = np.asarray(t, dtype=dtype)
    if t.ndim == 0:
        return np.broadcast_to(t, (size,) + np.shape(out)).copy()
    if not t.flags.writeable or any(np.may_share_memory(t, o) for o in others):
        return t.copy()
    return t


def _unboxed(value):
    """A 0-d array as the number it holds: compiled code types the two differently."""
    return value[()] if isinstance(value, np.ndarray) and value.ndim == 0 else value


def _conform_output(t, out):
    """The tangent `t` shaped like `out`: a Python float for a Python number, else NumPy values
    of at least float32 precision (float64 for integer outputs)."""
    _refuse_complex(t, "tangent")
    if isinstance(out, numbers.Real) and not isinstance(out, (np.generic, bool)):
        return float(np.asarray(t).reshape(()))
    if not np.issubdtype(np.result_type(out), np.inexact):
        out = np.asarray(out, dtype=np.float64)
    shaped = np.broadcast_to(np.asarray(t), np.shape(out))
    return (
        np.array(shaped, dtype=np.result_type(out, np.float32))
        if np.ndim(out)
        else np.result_type(out, np.float32).type(shaped[()])
    )


def jvp(f=None, wrt=0, *, batched=False, jit=False, target="cpu"):
    """Forward mode: `jvp(f, wrt)(*args, tangent=t)` returns `(out, out_tangent)`; `t` is an
    array shaped like the input (a tuple of them for a tuple `wrt`). With `batched=True`, `t`
    holds many tangents along a new first axis, and all of them are pushed through in one
    sweep: the result has that axis too (`vmap` of a jvp over the tangents)."""

    def build(func):
        if target == "cuda":
            return cuda_transform(func, wrt, "jvp")
        if batched:
            if jit:
                raise S2SADError(
                    "jvp(batched=True) has no jit=True yet: the batched helpers have no Numba "
                    "versions; call the jitted jvp once per tangent"
                )
            return BatchedJVPTransformed(func, wrt, "jvp_batched", False)
        return JVPTransformed(func, wrt, "jvp", jit)

    return build if f is None else build(f)


def _zero_tangents(forward, inputs):
    zeros = tuple(np.zeros(np.shape(x)) for x in inputs)
    return zeros if forward.wrt_tuple else zeros[0]


def _basis(x):
    x = np.asarray(x, dtype=float)
    for k in range(x.size):
        e = np.zeros(x.size)
        e[k] = 1.0
        yield e.reshape(x.shape)


class Jacobian:
    """`jacobian(f, wrt, mode)`: call it like `f`; `s2sad.source` shows the batched code."""

    def __init__(self, f, wrt=0, mode=None, batched=True, jit=False):
        if mode not in (None, "forward", "reverse"):
            raise ValueError(f"mode must be 'forward' or 'reverse', not {mode!r}")
        self.forward = JVPTransformed(f, wrt, "jvp", jit)
        self.backward = Transformed(f, wrt, "vjp", jit)
        # the batched helpers have no Numba versions: compiled, it is one sweep per direction
        self.func, self.mode, self.batched = f, mode, batched and not jit
        self.wrt, self.wrt_tuple = self.backward.wrt, self.backward.wrt_tuple
        self.forward.label = self.backward.label = f"s2sad.jacobian({f.__qualname__}, jit={jit!r})"
        self.last = None  # (mode, ranks) of the last call
        self._out_shapes: dict = {}  # argument shapes -> output shape seen, to pick a mode
        functools.update_wrapper(self, f)

    def __call__(self, *args, **kwargs):
        bound = self.backward._bind(args, kwargs)
        if not self.batched:
            return self._per_basis(bound, args, kwargs)
        inputs = [bound.arguments[n] for n in self.wrt]
        ranks = tuple((n, rank_of_argument(v)) for n, v in bound.arguments.items())
        n_in = sum(np.size(x) for x in inputs)
        mode, ran = self.mode, None
        if mode is None:
            key = _shapes_key(bound)
            if key not in self._out_shapes:
                ran = self._reverse_primal(bound, ranks)  # the output's size decides
                self._out_shapes[key] = np.shape(ran[0])
            mode = "forward" if n_in <= _size(self._out_shapes[key]) else "reverse"
        self.last = (mode, ranks)
        if mode == "reverse":
            out, pullback = ran or self._reverse_primal(bound, ranks)
            size = np.size(out)
            if size == 0 or n_in == 0:
                return self._zeros(out, inputs)
            seed = np.eye(size).reshape((size,) + np.shape(out))
            rows = pullback(seed)
            rows = rows if len(self.wrt) > 1 else (rows,)
            blocks = [
                np.reshape(_rows(r, size, x), np.shape(out) + np.shape(x))
                for r, x in zip(rows, inputs)
            ]  # row k: the derivative of output element k
        else:
            if n_in == 0:
                out = self.func(*args, **kwargs)
                return self._zeros(out, inputs)
            tangents, offsets = [], np.cumsum([0] + [np.size(x) for x in inputs])
            for k, x in enumerate(inputs):
                t = np.zeros((n_in, np.size(x)))
                t[offsets[k] : offsets[k + 1]] = np.eye(np.size(x))
                tangents.append(t.reshape((n_in,) + np.shape(x)))
            compiled, values = transform_and_read(self.func, self.wrt, "jvp_batched", ranks)
            self._check_single(compiled.tuple_output)
            out, out_dot = compiled.function(*bound.args, *tangents, *values, **bound.kwargs)
            rows = _rows(out_dot, n_in, out)
            blocks = []
            for k, x in enumerate(inputs):
                part = rows[offsets[k] : offsets[k + 1]].reshape((np.size(x), np.size(out)))
                blocks.append(np.reshape(part.T, np.shape(out) + np.shape(x)))
        return self._conformed(blocks, inputs)

    def _reverse_primal(self, bound, ranks):
        compiled, values = transform_and_read(self.func, self.wrt, "vjp_batched", ranks)
        self._check_single(compiled.tuple_output)
        out, pullback = compiled.function(*bound.args, *values, **bound.kwargs)
        return out, pullback

    def _check_single(self, tuple_output):
        if tuple_output:
            raise S2SADError(
                "jacobian needs a function with one output; take the jacobian of "
                "each output separately"
            )

    def _zeros(self, out, inputs):
        return self._conformed([np.zeros(np.shape(out) + np.shape(x)) for x in inputs], inputs)

    def _per_basis(self, bound, args, kwargs):
        """One vjp pullback per output element, or one jvp per input element (batched=False)."""
        forward, backward = self.forward, self.backward
        inputs = [bound.arguments[n] for n in backward.wrt]
        if self.mode == "forward":  # never the reverse transform: it may refuse what jvp follows
            out = forward(*args, tangent=_zero_tangents(forward, inputs), **kwargs)[0]
        else:
            out, pullback = backward(*args, **kwargs)
        if isinstance(out, tuple):
            self._check_single(True)
        n_in = sum(np.size(x) for x in inputs)
        chosen = self.mode or ("forward" if n_in <= np.size(out) else "reverse")
        blocks = []
        if chosen == "reverse":
            rows = [pullback(seed) for seed in _basis(out)]
            for k, x in enumerate(inputs):
                parts = [r[k] for r in rows] if backward.wrt_tuple else rows
                blocks.append(np.reshape(np.array(parts, dtype=float), np.shape(out) + np.shape(x)))
        else:
            for k, x in enumerate(inputs):
                columns = []
                for e in _basis(x):
                    tangents = tuple(
                        e if j == k else np.zeros(np.shape(inputs[j])) for j in range(len(inputs))
                    )
                    _, dot = forward(
                        *args, tangent=tangents if forward.wrt_tuple else tangents[0], **kwargs
                    )
                    columns.append(np.asarray(dot, dtype=float))
                stacked = np.moveaxis(np.array(columns), 0, -1) if columns else np.zeros(0)
                blocks.append(np.reshape(stacked, np.shape(out) + np.shape(x)))
        return self._conformed(blocks, inputs)

    def _conformed(self, blocks, inputs):
        """Like a gradient, each block takes its input's float dtype (float32 stays float32)."""
        blocks = [
            b.astype(np.result_type(np.asarray(x).dtype, np.float32))
            for b, x in zip(blocks, inputs)
        ]
        return tuple(blocks) if self.wrt_tuple else blocks[0]

    def source(self, *args, **kwargs) -> str:
        """The batched code a call with these arguments runs (of the last call without any)."""
        if args or kwargs:
            bound = self.backward._bind(args, kwargs)
            ranks = tuple((n, rank_of_argument(v)) for n, v in bound.arguments.items())
            mode = self.mode
            if mode is None:
                out = self._reverse_primal(bound, ranks)[0]
                n_in = sum(np.size(bound.arguments[n]) for n in self.wrt)
                mode = "forward" if n_in <= np.size(out) else "reverse"
        elif self.last is not None:
            mode, ranks = self.last
        else:
            mode, ranks = self.mode or "reverse", None
        batched = "jvp_batched" if mode == "forward" else "vjp_batched"
        return transform(self.func, self.wrt, batched, ranks).source

    def __repr__(self):
        return f"<s2sad.jacobian of {self.func.__qualname__} wrt {', '.join(self.wrt)}>"


def _size(shape) -> int:
    return int(np.prod(shape, dtype=int))


def _shapes_key(bound) -> tuple:
    return tuple((n, np.shape(v), type(v)) for n, v in bound.arguments.items())


def _rows(g, size, x):
    """A batched derivative as float64 rows shaped `(size,) + x.shape`."""
    g = np.asarray(g, dtype=float)
    shape = (size,) + np.shape(x)
    if g.ndim == 0 and not g:  # an all-zero derivative may come back as one number
        return np.zeros(shape)
    if g.shape != shape:
        raise S2SADError(
            f"internal error: a batched derivative of shape {g.shape} where {shape} was "
            "expected; please report this with the function"
        )
    return g


def jacobian(f, wrt=0, mode=None, batched=True, *, jit=False):
    """The Jacobian, shaped `out.shape + arg.shape` (a tuple of them for a tuple `wrt`).

    One batched sweep: `mode="reverse"` runs the primal once and pulls the identity over the
    output's elements back, every adjoint carrying one leading axis with a row per output
    element; `mode="forward"` pushes the identity over the inputs' elements forward the same
    way. The default picks the mode with fewer rows. `batched=False` takes one sweep per basis
    direction instead (the slower reference). `jit=True` or `"strict"` compiles the pullback
    and tangent code with Numba, one sweep per basis direction (the batched helpers have no
    Numba versions yet)."""
    return Jacobian(f, wrt, mode, batched, jit)


class Hessian:
    """`hessian(f, wrt)`: call it like `f`; `s2sad.source` shows the batched forward sweep."""

    def __init__(self, f, wrt=0, batched=True):
        self.gradient = Transformed(f, wrt, "grad")
        if self.gradient.wrt_tuple or len(self.gradient.wrt) != 1:
            raise S2SADError("hessian takes one wrt argument")
        self.name, self.batched = self.gradient.wrt[0], batched
        functools.update_wrapper(self, f)

    def _generated(self, bound, ranked=True):
        """The gradient code for these arguments, its name for each of f's parameters (it
        renames those spelled like s2sad's own names), and the user's data values it takes
        after them. `ranked=False`: the generic code, not specialized on the arguments' ranks,
        which keeps every copy it takes of an array's element or row (`snapshot(y[i])`,
        `dy[i].copy()`), so forward mode can read it where the ranks it has lost would leave a
        value that may be a view."""
        if ranked:
            compiled, data = self.gradient.prepared(bound)
        else:
            gradient = self.gradient
            compiled, data = transform_and_read(
                gradient.func, gradient.wrt, gradient._generated_mode(), None, False
            )
        generated = compiled.functions[compiled.name]
        names = dict(
            zip(self.gradient.signature.parameters, inspect.signature(generated).parameters)
        )
        return generated, names, data

    def _forward(self, bound, second):
        """`second(generated, names, data)` for the gradient code specialized on the ranks,
        else for the generic code; a refusal of both is restated at the user's line."""
        try:
            return second(*self._generated(bound))
        except S2SADError:
            pass
        generated = None
        try:
            generic = self._generated(bound, ranked=False)
            generated = generic[0]
            return second(*generic)
        except S2SADError as exc:
            raise _in_users_terms(exc, generated, self.__wrapped__) from None

    def _second(self, args, kwargs):
        """The bound arguments, the user's data values the gradient code takes after them, and
        the batched forward transform of the gradient code with its own data values."""
        bound = self.gradient._bind(args, kwargs)
        ranks = tuple((name, rank_of_argument(value)) for name, value in bound.arguments.items())

        def second(generated, names, data):
            arg_ranks = tuple((names[p], r) for p, r in ranks)
            forward = transform_and_read(generated, (names[self.name],), "jvp_batched", arg_ranks)
            return bound, data, names, forward

        return self._forward(bound, second)

    def __call__(self, *args, **kwargs):
        x = self.gradient._bind(args, kwargs).arguments[self.name]
        n = np.size(x)
        if self.batched and n:
            bound, data, names, (compiled, values) = self._second(args, kwargs)
            tangent = np.eye(n).reshape((n,) + np.shape(x))
            keywords = _keywords(bound, names)
            rows = compiled.function(*bound.args, *data, tangent, *values, **keywords)[1]
            stacked = np.moveaxis(_rows(rows, n, x), 0, -1)
        else:
            bound = self.gradient._bind(args, kwargs)

            def columns(generated, names, data):
                second = JVPTransformed(generated, names[self.name], "jvp")
                keywords = _keywords(bound, names)
                return [  # (the forward transform runs at the first call)
                    np.asarray(second(*bound.args, *data, tangent=e, **keywords)[1], dtype=float)
                    for e in _basis(x)
                ]

            stacked = np.moveaxis(np.array(self._forward(bound, columns)), 0, -1)
        result = np.reshape(stacked, np.shape(x) + np.shape(x))
        return (
            float(result) if isinstance(x, float) else result.astype(np.result_type(x, np.float32))
        )

    def source(self, *args, **kwargs) -> str:
        """The batched forward sweep over the gradient code, for these arguments."""
        if not (args or kwargs):
            raise S2SADError("pass the arguments: the gradient code depends on their ranks")
        return self._second(args, kwargs)[3][0].source


def _in_users_terms(exc: S2SADError, generated, f) -> S2SADError:
    """A refusal met in s2sad's own gradient code, restated at the user's line it came from:
    the generated names in it are nothing the user can change."""
    if not str(exc.file or "").startswith("<s2sad ") or exc.line is None:
        return exc
    try:
        lines = inspect.getsource(generated).splitlines()[: exc.line]
        code = f.__code__
    except (OSError, TypeError, AttributeError):
        return exc
    line, source = code.co_firstlineno, None
    for text in reversed(lines):  # the `# line N: <source>` comment heading the block
        found = _LINE_COMMENT.match(text)
        if found:
            source = found.group(2)
            user = "".join(linecache.getline(code.co_filename, int(found.group(1))).split())
            if user.startswith("".join(source.split())[:16]):  # (not a helper's other file)
                line = int(found.group(1))
            break
    what = exc.what.splitlines()[0] if exc.what else type(exc).__name__
    return type(exc)(
        f"s2sad.hessian({f.__qualname__}) cannot apply forward mode to the gradient code s2sad "
        f"writes for this line: {what}",
        file=code.co_filename,
        line=line,
        source=source,
        hint="forward mode does not read all of s2sad's own gradient code yet (loops writing "
        "array elements are where it stops most often); take central differences of "
        "s2sad.grad(f) instead: (grad(x + h*e) - grad(x - h*e)) / (2*h) for each basis "
        "direction e",
    )


_LINE_COMMENT = re.compile(r"\s*# line (\d+): (.*)$")


def _keywords(bound, names: dict) -> dict:
    """The keyword arguments of `bound` by the generated code's names for them."""
    return {names.get(k, k): v for k, v in bound.kwargs.items()}


def hessian(f, wrt=0, batched=True):
    """The Hessian of a scalar `f`, shaped `arg.shape + arg.shape`: forward mode applied to the
    gradient code s2sad generates (forward over reverse), in one sweep whose tangents carry the
    identity over the argument's elements (`batched=False`: one sweep per element)."""
    return Hessian(f, wrt, batched)


def _transform_decorator(mode):
    def make(f=None, wrt=0, *, jit=False, target="cpu"):
        def build(func):
            if target == "cuda":
                return cuda_transform(func, wrt, mode)
            if target != "cpu":
                raise ValueError(f"target must be 'cpu' or 'cuda', not {target!r}")
            return Transformed(func, wrt, mode, jit)

        return build if f is None else build(f)

    return make


grad = _transform_decorator("grad")
grad.__doc__ = """Gradient of a scalar-valued `f` with respect to `wrt` (index, name or tuple).

    Usable as `s2sad.grad(f)`, `@s2sad.grad` or `@s2sad.grad(wrt="w")`."""
vjp = _transform_decorator("vjp")
vjp.__doc__ = """`vjp(f, wrt)(*args)` returns `(out, pullback)`; `pullback(seed)` is seed^T J."""
value_and_grad = _transform_decorator("value_and_grad")
value_and_grad.__doc__ = """Like `grad`, returning `(value, gradient)` from one run."""


def source(transformed, *args, **kwargs) -> str:
    """The generated Python source behind a function made by s2sad.

    With arguments, the code specialized for them (as a call with them runs); without, the code
    of the last call, or the generic code (valid for any argument) before the first call."""
    if isinstance(transformed, CudaTransformed):
        if transformed.source is None:
            transformed.build()
        return transformed.source
    if isinstance(transformed, (Jacobian, Hessian)):
        return transformed.source(*args, **kwargs)
    if not isinstance(transformed, Transformed):
        raise S2SADError(
            f"{transformed!r} was not made by s2sad; pass the result of "
            "s2sad.grad, s2sad.vjp or s2sad.value_and_grad"
        )
    if args or kwargs:
        return transformed.specialized(transformed._bind(args, kwargs)).source
    return transformed.compiled.source
