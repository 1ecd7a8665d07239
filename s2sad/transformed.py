"""`Transformed`: a differentiated function with the user function's signature, which binds
the arguments, checks them, runs the transform for their ranks (made on the first call and
cached, see transform_cache.py) and hands back gradients the caller owns; and its forward-mode
forms, `JVPTransformed` and `BatchedJVPTransformed`."""

from __future__ import annotations

import copy
import functools
import inspect
import numbers

import numpy as np

from .errors import S2SADError, SeedShapeError
from .call_plans import ANEW, PLANS_KEPT, Deferred, keep, signature_key, tree_key
from .conform import owned_gradients
from .fast_calls import fast_call
from .callables import FlatBound, Target
from .jit import Jitted
from .generated_lines import note_user_line, user_lines
from .keywords import refuse_misspelled
from .pipeline.integer_writes import refuse_float_numbers
from .pipeline.normalize.fresh import refuse_uncast
from .pipeline.ranks import rank_of_argument
from .python_dtypes import NARROW, any_dtype, cast_to, dtypes_of, kind_of
from .pullback import Pullback, arrays_in, detach, own_copy, tree_output
from .python_plans import python_key, python_result
from .rules.common import grad_seed
from .rules.registry import VERSION
from .trees import flatten, is_container, is_passed_function
from .transform_cache import transform, transform_and_read
from .input_checks import check_input, check_parallel, refuse_complex


def _structured(value) -> bool:
    """A tree, or a function passed as an argument: bound by `Target.bind_flat`."""
    return is_container(value) or is_passed_function(value)


# argument types that are never trees: a call passing only these binds without looking further
_PLAIN = frozenset({np.ndarray, float, int, np.float64, np.float32, np.int64, bool})


class Transformed:
    """A differentiated function: call it like the original, read it with `s2sad.source`."""

    def __init__(self, func, wrt, mode: str, jit=False, has_aux=False, parallel=False, reuse=False):
        """`reuse`: NumPy-mode grad, value_and_grad and vjp code writes elementwise results into
        dying temporaries' arrays (pipeline/reuse.py); for the user's own gradients, never for
        code s2sad differentiates again (forward mode refuses `out=`)."""
        if jit not in (False, True, "strict"):
            raise ValueError(f"jit must be False, True or 'strict', not {jit!r}")
        check_parallel(parallel, jit)
        self.jit = jit
        self.parallel = bool(parallel)
        self.reuse = bool(reuse)
        if isinstance(func, Transformed):
            raise S2SADError(  # (the public transforms pass compose.composed(func) instead)
                f"internal error: a Transformed of {func!r}; please report this"
            )
        if has_aux and mode not in ("grad", "value_and_grad", "vjp"):
            raise ValueError(f"has_aux=True is for grad, value_and_grad and vjp, not {mode}")
        self.target = Target(func, wrt)
        self.has_aux = bool(has_aux)
        func = self.target.func  # the Python function transformed (a method's, a partial's)
        self.func = func
        self.mode = mode
        self.wrt, self.wrt_tuple = self.target.wrt, self.target.is_tuple
        self.signature = inspect.signature(func, follow_wrapped=False)  # a wrapper's own
        self._defaults = (func.__defaults__, func.__kwdefaults__)
        # the parameters, where every one may be passed by position: a call passing each by
        # position binds without inspect (whose bind costs more than a small jitted gradient)
        kinds = {p.kind for p in self.signature.parameters.values()}
        plain = kinds <= {
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        }
        simple = self.target.plain and not any(path for _, path in self.target.items)
        self._layout = [(None, (n,)) for n in self.wrt]
        self._positional = tuple(self.signature.parameters) if plain and simple else None
        self._plans = {}  # signature_key -> what a jitted call by position decided (_planned)
        self._fasts = {}  # signature_key -> (its plan, the lean call made of it: _fast_for)
        self._value_dtypes = {}  # kinds of arguments -> Python mode's dtype of the value (_value)
        self._what = Deferred(self.jit_label)
        self._pullback_what = Deferred(lambda: f"the pullback of {self.jit_label()}")
        self.last_ranks = None
        self._last = (self.wrt, (), None)  # the flat wrt, trees and functions of the last call
        functools.update_wrapper(self, self.target.original)

    @property
    def compiled(self):
        """The generated function for the arguments of the last call (generic before any)."""
        wrt, trees, passed = self._last
        return transform(
            self.func,
            wrt,
            self._generated_mode(),
            self.last_ranks,
            bool(self.jit),
            trees,
            self.has_aux,
            passed,
            self.parallel,
            self.reuse,
        )

    def specialized(self, bound):
        """The generated function for these arguments' ranks (scalars need no unbroadcast)."""
        return self.prepared(bound)[0]

    def prepared(self, bound):
        """`specialized(bound)` and the values of the user's data it takes after the arguments
        (globals, closure cells, helpers' defaults), read now."""
        return self.read_mode(bound, self._generated_mode(), bool(self.jit))

    def read_mode(self, bound, mode, jit=False):
        """The `mode` transform for these bound arguments and its data values (see prepared)."""
        arguments = bound.arguments
        ranks = tuple(zip(arguments, map(rank_of_argument, arguments.values())))
        self.last_ranks, self._last = ranks, (bound.wrt, bound.trees, bound.passed)
        compiled, values = transform_and_read(
            self.func,
            bound.wrt,
            mode,
            ranks,
            jit,
            bound.trees,
            self.has_aux,
            bound.passed,
            self.parallel,
            self.reuse,
        )
        if compiled.written:
            _refuse_shared_writes(compiled.written, bound)
        if compiled.float_numbers:
            refuse_float_numbers(compiled.float_numbers, arguments)
        if compiled.float_casts:
            refuse_uncast(*compiled.float_casts, arguments)
        return compiled, values

    def _generated_mode(self):
        # jitted gradients also return the output's kind (`output_kind`), so the scalar check
        # happens here; the value itself is not computed where the gradient needs none
        return "checked_grad" if self.jit and self.mode == "grad" else self.mode

    def _run(self, compiled, values, bound, extra=(), name=None):
        if not self.jit:
            function = compiled.function
            try:  # (user_lines' work without a context manager's microsecond a call)
                if bound.positional is not None:  # every argument passed by position (_bind)
                    return function(*bound.positional, *values)
                return function(*bound.args, *values, **bound.kwargs)
            except Exception as exc:
                note_user_line(exc, function)
                raise
        args = (*bound.arguments.values(), *extra, *values)
        what = self._what if name is None else self._pullback_what
        jitted = compiled.jitted or Jitted.of(compiled)
        return jitted(args, strict=self.jit == "strict", name=name, what=what)

    label = None  # what the user called, where this is part of it (s2sad.jacobian)

    def jit_label(self) -> str:
        """The user's transform as they wrote it, for messages about compiling it."""
        threads = ", parallel=True" if self.parallel else ""
        return self.label or (
            f"s2sad.{self.mode}({self.func.__qualname__}, jit={self.jit!r}{threads})"
        )

    def _jitted_vjp(self, compiled, values, bound):
        """The value from the compiled primal; each pullback runs the compiled sweep (the
        recording forward pass, then the adjoint) from copies of the array arguments and of the
        user's data taken now, so that it belongs to this point even if the caller changes its
        arrays (or a global array) in between."""
        out = self._run(compiled, values, bound)
        bound = bound.copy_with({n: own_copy(v) for n, v in bound.arguments.items()})
        values = tuple(own_copy(v) for v in values)
        sweep = compiled.name + "_sweep"

        def pullback(*seeds):
            seeds = tuple(unboxed(s) for s in seeds)
            return self._run(compiled, values, bound, seeds, name=sweep)

        rows = compiled.name + "_rows"

        def stacked(seeds):  # (Pullback.stacked's: float64 seeds, one C-ordered array)
            return self._run(compiled, values, bound, (seeds,), name=rows)

        stacked = stacked if rows in compiled.functions else None
        return tree_output(compiled, out), Pullback(self, bound, out, pullback, compiled, stacked)

    def _bind(self, args, kwargs) -> FlatBound:
        """The generated function's arguments for a call: trees as their leaves (callables.py),
        the leaves differentiated checked to be floats."""
        names = self._positional
        if not kwargs and names is not None and len(args) == len(names):
            plain = _PLAIN
            if all(type(a) in plain for a in args) or not any(map(_structured, args)):
                # the common case, without inspect
                bound = FlatBound(self.signature, dict(zip(names, args)))
                bound.wrt, bound.trees, bound.shown = self.wrt, (), None
                bound.layout, bound.plain, bound.passed = self._layout, True, None
                bound.positional = args
                for name in self.wrt:
                    check_input(name, bound.arguments[name])
                return bound
        func = self.func
        held = self._defaults
        if func.__defaults__ is not held[0] or func.__kwdefaults__ is not held[1]:  # replaced
            self.signature = inspect.signature(func, follow_wrapped=False)
            self.target.func_signature = self.signature
            self._defaults = (func.__defaults__, func.__kwdefaults__)
        return self.target.bind_flat(args, kwargs, check_input)

    def _finish(self, grads, bound, extra=()):
        grads = grads if len(bound.wrt) > 1 else (grads,)
        inputs = [bound.arguments[n] for n in bound.wrt]
        out = owned_gradients(grads, inputs, list(bound.arguments.values()) + list(extra))
        out = bound.regroup(out)
        return tuple(out) if self.wrt_tuple else out[0]

    def _aux(self, args, kwargs):
        """has_aux: the aux of `f(*args) = (value, aux)`, from a plain call of the function."""
        result = self.target.original(*args, **kwargs)
        if not (isinstance(result, tuple) and len(result) == 2):
            raise S2SADError(
                f"with has_aux=True, {self.func.__name__} must return a pair (value, aux), "
                f"not {type(result).__name__}"
            )
        return result[1]

    _fast = None  # the lean call of the last planned kind (fast_calls.py), tried first

    def __call__(self, *args, **kwargs):
        fast = self._fast
        if fast is not None and not kwargs:
            result = fast(args)
            if result is not ANEW:
                return result
        result = self._call(args, kwargs)
        if not self.has_aux:
            return result
        aux = self._aux(args, kwargs)
        if self.mode == "vjp":
            return result[0], result[1], aux
        if self.mode == "value_and_grad":
            return (result[0], aux), result[1]
        return result, aux

    def _call(self, args, kwargs):
        if self._plans and not kwargs:
            key, leaves = self._kinds(args), args
            plan = self._plans.get(key)
            if plan is None and self._tree_plans:  # (trees: planned by structure and leaves)
                found = tree_key(args, _PLAIN, self._kinds)
                if found is not None:
                    (key, leaves), plan = found, self._plans.get(found[0])
            if plan is not None:
                result = self._planned(plan, leaves, key, args)
                if result is not ANEW:
                    return result
        bound = self._bind(args, kwargs)
        compiled, values = self.prepared(bound)
        if self.mode == "vjp" and self.jit:
            return self._jitted_vjp(compiled, values, bound)
        if self.mode == "vjp":
            with user_lines(compiled.function):
                out, pullback = compiled.function(*bound.args, *values, **bound.kwargs)
            detach(pullback, arrays_in((*bound.arguments.values(), *values, out)))
            return tree_output(compiled, out), Pullback(self, bound, out, pullback, compiled)
        result = self._run(compiled, values, bound)
        if self.jit and self.mode in ("grad", "value_and_grad"):
            # jitted code seeds any output with 1.0: refuse here what Python mode's seed refuses
            # (an array, an integer or boolean output), with its message
            grad_seed(result[0])
        if self.mode in ("grad", "value_and_grad"):
            self._keep_plan(compiled, args, bound)
        if self.jit and self.mode == "grad":
            return self._finish(result[1], bound)
        if self.mode == "value_and_grad" and self.jit:
            given = (*bound.arguments.values(), *values)
            return self._value(result[0], given, args, kwargs), self._finish(result[1], bound)
        if self.mode == "value_and_grad":
            return result[0], self._finish(result[1], bound)
        return self._finish(result, bound)

    def _keep_plan(self, compiled, args, bound) -> None:
        """The transform a jitted grad or value_and_grad chose for plain values (arrays, numbers)
        passed by position, which it writes into none of: kept for `_planned`. Dicts, lists
        and tuples of them too, by structure and leaves (`tree_key`), where the generated
        function took exactly those leaves in that order (a tuple `_bind` did not flatten, a
        constant of the transform, makes no plan)."""
        if compiled.written or self._positional is None:
            return
        if (compiled.jitted is None) if self.jit else compiled.float_numbers:
            return
        if bound.positional is not None and all(type(a) in _PLAIN for a in args):
            wrt = tuple(self._positional.index(n) for n in self.wrt)
            plan = (compiled, self.func.__code__, wrt, self.last_ranks, self._last, None)
            keep(self._plans, self._kinds(args), plan)
            return
        found = tree_key(args, _PLAIN, self._kinds) if len(args) == len(self._positional) else None
        names = list(bound.arguments)
        if found is None or len(found[1]) != len(names):
            return
        if any(a is not b for a, b in zip(found[1], bound.arguments.values())):
            return
        wrt = tuple(names.index(n) for n in bound.wrt)
        template = bound.copy_with({})  # (its trees and layout: regroup's)
        plan = (compiled, self.func.__code__, wrt, self.last_ranks, self._last, template)
        keep(self._plans, found[0], plan)
        self._tree_plans = True

    _tree_plans = False  # (whether a plan of trees was kept: calls with trees look them up)

    def _kinds(self, args):
        """What decides a call by position: Numba's fingerprints (jit), else python_key."""
        return signature_key(args) if self.jit else python_key(args)

    def _planned(self, plan, args, key, call):
        """A call with the kinds (`key`: they fix `_bind`'s checks and the ranks) of a kept one:
        its transform run with the data read now, as `_call` (ANEW where what it read changed).
        `args`: the generated function's (a tree's leaves, for a plan of trees); `call`: the
        call's own."""
        compiled, code, wrt, ranks, last, template = plan
        if compiled.rules_version != VERSION[0] or self.func.__code__ is not code:
            return ANEW
        values = compiled.read(self.func, None)
        if values is None:
            return ANEW
        self.last_ranks, self._last = ranks, last
        args = tuple(args)
        if not self.jit:
            return python_result(self, compiled.function, args, values, wrt, template)
        jitted_key = None if values else key[1] if template is not None else key
        result = compiled.jitted(args + values, self.jit == "strict", None, self._what, jitted_key)
        out = self._planned_result(result, args, values, wrt, template, call)
        if template is None and not self.has_aux:  # (the next call of this kind: fast_calls.py)
            self._fast = self._fast_for(plan, key, args, values)
        return out

    def _planned_result(self, result, args, values, wrt, template=None, call=None):
        """What a planned call returns from the compiled code's `result` (retyped by its Plan):
        the output's kind checked, the gradients made the caller's own (and regrouped into the
        trees of `template`), the value in Python mode's dtype."""
        grad_seed(result[0])  # (as _call: the output's kind refused as Python mode does)
        grads = result[1] if len(wrt) > 1 else (result[1],)
        out = owned_gradients(grads, [args[i] for i in wrt], list(args))
        if template is not None:
            out = template.regroup(out)
        out = tuple(out) if self.wrt_tuple else out[0]
        if self.mode == "grad":
            return out
        return self._value(result[0], args + values, args if call is None else call, {}), out

    def _fast_for(self, plan, key, args, values):
        """The lean call (fast_calls.py) of `plan`, made at its first planned call; None where
        it has none."""
        made = self._fasts.get(key)
        if made is None or made[0] is not plan:
            if len(self._fasts) >= PLANS_KEPT:
                self._fasts.clear()
            made = self._fasts[key] = (plan, fast_call(self, plan, args, values))
        return made[1]

    def _value(self, value, given, args, kwargs):
        """A jitted value that is a number, in the dtype Python mode gives it: Numba types a
        Python float as float64, so float32 meeting one (`e = 0.0` then `e + r2`, `4.0 * eps`)
        comes back float64 where NumPy 2 keeps float32. Where float32 is among the inputs and
        the value is float64, the function runs once per kind of arguments to learn its dtype
        (as JVPTransformed's `_in_python_dtypes`)."""
        if type(value) is not np.float64 or not any_dtype(given, NARROW):
            return value
        key = tuple(kind_of(v) for v in given)
        if key not in self._value_dtypes:
            ran = self._python_value(args, kwargs)
            self._value_dtypes[key] = ran.dtype if isinstance(ran, np.generic) else None
        return cast_to(value, self._value_dtypes[key])

    def _python_value(self, args, kwargs):
        """Python mode's value for a call, computed on copies (a function writing into its
        arguments must not write the caller's): the function itself on deep copies, or where an
        argument refuses `copy.deepcopy` (an object holding a lock), the Python-mode generated
        code on copies of the arrays it takes, the leaves. None where that raises (what Numba
        gave is kept)."""
        try:
            copied = copy.deepcopy((args, kwargs))
        except Exception:  # noqa: BLE001  (anything an object's __deepcopy__ raises)
            copied = None
        try:
            if copied is not None:
                ran = self.target.original(*copied[0], **copied[1])
                return ran[0] if self.has_aux and isinstance(ran, tuple) else ran
            bound = self._bind(args, kwargs)
            bound = bound.copy_with({n: own_copy(v) for n, v in bound.arguments.items()})
            python, values = self.read_mode(bound, self.mode, False)
            values = tuple(own_copy(v) for v in values)
            return python.function(*bound.args, *values, **bound.kwargs)[0]
        except Exception:  # noqa: BLE001
            return None

    def __repr__(self):
        return f"<s2sad.{self.mode} of {self.func.__qualname__} wrt {', '.join(self.wrt)}>"


class JVPTransformed(Transformed):
    """`jvp(f, wrt)(*args, tangent=t)` returns `(f(*args), J t)`."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._python_dtypes = {}  # Python mode's dtypes of the results, by kind of arguments

    def __call__(self, *args, tangent=None, **kwargs):
        if tangent is None:
            refuse_misspelled("jvp", kwargs, ("tangent",), _parameters(self.func))
            raise TypeError(
                f"jvp of {self.func.__name__} needs tangent= (shaped like "
                f"{', '.join(self.wrt)})"
            )
        bound = self._bind(args, kwargs)
        tangents = flat_tangents(bound, tangent, self.wrt_tuple, self.wrt)
        for name, t in zip(bound.wrt, tangents):
            if np.shape(t) != np.shape(bound.arguments[name]):
                shown = bound.shown[name] if bound.shown else name
                raise SeedShapeError(
                    f"the tangent of '{shown}' has shape {np.shape(t)} but "
                    f"'{shown}' has shape {np.shape(bound.arguments[name])}"
                )
        compiled, values = self.prepared(bound)
        if self.jit:
            out, out_dot = Jitted.of(compiled)(
                (*bound.arguments.values(), *(unboxed(t) for t in tangents), *values),
                strict=self.jit == "strict",
                what=self._what,
            )
            out, out_dot = self._in_python_dtypes(compiled, bound, tangents, values, out, out_dot)
        else:
            with user_lines(compiled.function):
                out, out_dot = compiled.function(*bound.args, *tangents, *values, **bound.kwargs)
        if compiled.tuple_output:
            out_dot = tuple(_conform_output(d, o) for d, o in zip(out_dot, out))
            return tree_output(compiled, out), tree_output(compiled, out_dot)
        return out, _conform_output(out_dot, out)

    def _in_python_dtypes(self, compiled, bound, tangents, values, out, out_dot):
        """The jitted value and tangent in the dtypes Python mode gives: Numba types a Python
        float as float64, so a float32 array meeting one (`x * 1.5`, `s = 0.0` carried) comes
        back float64 where NumPy keeps float32. Where float32 is among the inputs and a result
        is float64, Python mode runs once per kind of arguments to learn its dtypes."""
        given = (*bound.arguments.values(), *tangents, *values)
        if not (any_dtype(given, NARROW) and any_dtype((out, out_dot), (np.float64,))):
            return out, out_dot
        key = (compiled.name, tuple(kind_of(v) for v in given))
        dtypes = self._python_dtypes.get(key)
        if dtypes is None:
            python, values = self.read_mode(bound, self.mode, False)
            ran = python.function(*bound.args, *tangents, *values, **bound.kwargs)
            dtypes = self._python_dtypes[key] = dtypes_of(ran)
        return cast_to(out, dtypes[0]), cast_to(out_dot, dtypes[1])


def flat_tangents(bound, tangent, is_tuple, wrt) -> tuple:
    """The tangents given (one per wrt item, each shaped like its argument: a tree for a tree)
    as one per leaf differentiated."""
    tangents = tangent if is_tuple else (tangent,)
    if len(tangents) != len(bound.layout):
        raise SeedShapeError(f"pass one tangent per wrt input ({len(wrt)})")
    out = []
    for (d, names), t, shown in zip(bound.layout, tangents, wrt):
        if d is None:
            out.append(t)
            continue
        td, leaves = flatten(t)
        if _shape_of(td) != _shape_of(d):
            raise SeedShapeError(
                f"the tangent of '{shown}' must be a tree of the same structure as '{shown}'"
            )
        out += leaves
    return tuple(out)


def _shape_of(d):
    """A TreeDef's kinds and keys (a tangent may be a dict where the argument is a dict
    subclass... but not a tuple where it is a dict)."""
    return (d.kind, d.keys, tuple(_shape_of(c) for c in d.children))


class BatchedJVPTransformed(Transformed):
    """`jvp(f, wrt, batched=True)(*args, tangent=T)`: T holds a batch of tangents along its
    first axis; returns `(f(*args), rows)`, row k the derivative along tangent k, in one sweep
    (the primal runs once)."""

    def __call__(self, *args, tangent=None, **kwargs):
        if tangent is None:
            refuse_misspelled("jvp", kwargs, ("tangent",), _parameters(self.func))
            raise TypeError(
                f"jvp of {self.func.__name__} needs tangent= (a batch of tangents of "
                f"{', '.join(self.wrt)} along a first axis)"
            )
        bound = self._bind(args, kwargs)
        tangents = flat_tangents(bound, tangent, self.wrt_tuple, self.wrt)
        rows = {np.shape(t)[0] if np.ndim(t) else None for t in tangents}
        for name, t in zip(bound.wrt, tangents):
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
            return tree_output(compiled, out), tree_output(compiled, tuple(rows))
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


def unboxed(value):
    """A 0-d array as the number it holds: compiled code types the two differently."""
    return value[()] if isinstance(value, np.ndarray) and value.ndim == 0 else value


def _conform_output(t, out):
    """The tangent `t` shaped like `out`: a Python float for a Python number, else NumPy values
    of at least float32 precision (float64 for integer outputs)."""
    refuse_complex(t, "tangent")
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


def _refuse_shared_writes(written: frozenset, bound: FlatBound) -> None:
    """One array passed as two arguments, one of which the function writes into (`f(b, b)`):
    NumPy's function sees its own writes through the other; s2sad's code copies the written one
    (the caller's array stays unchanged) and would differentiate two arrays."""
    arrays = [(n, v) for n, v in bound.arguments.items() if isinstance(v, np.ndarray)]
    for name, value in arrays:
        if name not in written:
            continue
        for other, v in arrays:
            if other != name and np.may_share_memory(value, v):
                label = (bound.shown or {}).get
                raise S2SADError(
                    f"{label(name, name)} is written in place and shares memory with "
                    f"{label(other, other)}: s2sad differentiates arguments as distinct arrays",
                    hint="pass a copy of one of them (`f(b, b.copy())`)",
                )


def _parameters(func) -> tuple:
    """The names `func` takes (none known for a callable without a signature)."""
    try:
        return tuple(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        return ()
