"""Compiling generated code with Numba (`jit=True` or `jit="strict"`).

The generated source is written to a file in s2sad's cache directory, keyed by its text and
s2sad's version, and compiled from its text, so Numba's on-disk cache serves a second process
without compiling again; the directory is checked before anything in it is loaded (see
s2sad/diskcache.py). Runtime helpers are replaced by versions Numba can compile; a helper Numba
cannot type makes compilation fail, and then `jit="strict"` raises `JitError` naming it while
`jit=True` warns and runs the Python version. (Lowering the code to forms Numba compiles is a
pipeline stage: pipeline/lower.py.)
"""

from __future__ import annotations

import ast
import contextvars
import dataclasses
import hashlib
import sys
import threading
import types
import warnings

import numpy as np

from . import version
from .diskcache import (  # noqa: F401  (generated modules import trusted_njit from here)
    CacheWarning,
    atomic_write,
    cache_dir,
    numba_opt,
    read_private,
    short_name,
    trusted_cache_root,
    quiet_performance_hints,
    trusted_njit,
    user_stacklevel,
)
from .call_plans import Plan, float32_scalars, keep, signature_key, use_fingerprint
from .callee_fingerprint import callees_fingerprint
from .custom import numba_form, user_callee
from .errors import S2SADError
from .fused_guards import BROADCAST_KEPT, ShapesNotFused, fused_only, shapes
from .rules.helpers import forms_fingerprint, forms_used, numba_source
from .numba_failures import (
    at_user_line,
    axis_error,
    called_transform,
    from_numba_cache,
    is_numba_error,
    mixed_product,
    unknown_int,
    no_numba_form,
    numba_reason,
    row_misfit,
    shape_assertion,
    UNBOX_HINT,
    unboxed_argument,
)
from .numba_types import two_types
from .pipeline.names import defined_functions
from .generated_lines import argument_in_user_terms
from .serial_loops import serial_warning
from .workspace import Pool, pooling


class JitError(S2SADError):
    """Numba could not compile a generated function (`jit="strict"`)."""


class JitFallbackWarning(UserWarning):
    """`jit=True` runs the plain Python version because Numba could not compile it."""


# whether the call running now is jit="strict"'s: jit=True and "strict" share one transform, and
# code that runs in Python and compiles its own parts (s2sad.checkpoint's loops) reads it there
STRICT = contextvars.ContextVar("s2sad_strict", default=False)

# set where the user was told already in this call that a function runs its Python version:
# s2sad.checkpoint runs its segments several times a call (its descent, revolve's advances, the
# sweeps), and says so once
TOLD = contextvars.ContextVar("s2sad_fallback_told", default=False)


# a cached module's `njit` keeps Numba's files in s2sad's checked directory (trusted_njit)
_IMPORT = (
    "import math\n\nimport numpy as np\n\n"
    "from s2sad.numba_helpers import *  # noqa: F401,F403\n"
    "from s2sad.fused_guards import ShapesNotFused\n"
    "from s2sad.jit import trusted_njit as njit\n"
)


# Numba's parallel options with only `prange` loops on threads: with the others, each whole-array
# expression becomes a parallel region of its own, inside serial loops too, where starting the
# threads costs more than the work (a loop GMM's gradient ran 5x slower on one thread), and the
# loops on threads would no longer be the ones `s2sad.source` shows. Without them, Numba 0.68
# cannot lower an array expression its rewrite pass fused inside a prange body ("Unsupported
# op-code encountered: arrayexpr"), so parallel builds also turn rewrites off (`no_rewrites`):
# normalized code has one operation per statement, which leaves that fusion little to do.
_PRANGE_ONLY = (
    '{"prange": True, "fusion": True, "comprehension": False, "reduction": False, '
    '"inplace_binop": False, "setitem": False, "numpy": False, "stencil": False}'
)


def _has_prange(source: str) -> bool:
    return any(
        isinstance(n, ast.For)
        and isinstance(n.iter, ast.Call)
        and getattr(n.iter.func, "id", None) == "prange"
        for n in ast.walk(ast.parse(source))
    )


def _threads_text(threaded: bool) -> str:
    """What parallel code imports: Numba's `prange` and `get_thread_id`, and `thread_count`, the
    rows of per-thread partial sums. That is NUMBA_NUM_THREADS (get_thread_id is below it), as a
    number in the text: cached machine code has it inlined, and the module's name hashes the
    text, so another setting compiles again. (numba.get_num_threads would keep the function from
    being cached at all.)"""
    import numba  # (Numba loads on first use: s2sad imports fast)

    count = int(numba.config.NUMBA_NUM_THREADS)
    serial = "" if threaded else "  # (compiled without threads: prange is a range)"
    return (
        f"from numba import get_thread_id, prange{serial}\n\n"
        f"thread_count = njit()(lambda: {count})  # NUMBA_NUM_THREADS: rows of partial sums\n"
    )


def module_text(
    source: str,
    name: str | None = None,
    embed: bool = True,
    constants: str = "",
    parallel: bool = False,
    threads: bool = True,
    indexed: bool = True,
) -> str:
    """`source` with each function it defines compiled by Numba, and the Numba helpers before it:
    their text (`embed`, for a standalone module) or an import of s2sad's module of them, which
    a process then compiles once for all generated functions. `constants` (source) stand between
    the helpers and the functions, whose defaults may read them. `parallel`: compiled with
    Numba's `parallel=True`, its `prange` loops on threads (unless `threads=False`: where
    Numba's parallel passes refuse the code, it runs them as `range`). `indexed`: the code indexes
    by integers where it could not place its own checks (pipeline/bounds.py: `numba_checks`,
    False under S2SAD_BOUNDSCHECK=0), which Numba then checks. (`name` is accepted for older
    callers; every top-level function is compiled.)"""
    text = source
    tail = []
    # a build with no prange loop compiles as a serial one (Numba would warn that it found
    # nothing to run in parallel), its text still its own
    threaded = parallel and threads and _has_prange(source)
    threads = f", parallel={_PRANGE_ONLY}, no_rewrites=True" if threaded else ""
    checks = ", boundscheck=True" if indexed else ""
    for fn in defined_functions(source):
        text = text.replace(f"def {fn}(", f"def _{fn}_py(", 1)
        # IEEE arithmetic as NumPy's: 1 / 0 is inf (a singular point), never ZeroDivisionError
        tail.append(f'{fn} = njit(cache=True, error_model="numpy"{checks}{threads})(_{fn}_py)')
    head = numba_source(forms_used(constants + "\n" + text)) if embed else _IMPORT
    head += _threads_text(threaded) if parallel else ""
    return head + "\n\n" + constants + "\n\n" + text + "\n\n" + "\n".join(tail) + "\n"


_LOAD_LOCK = threading.RLock()  # first loads of generated modules, one at a time


def _module_for(
    source: str,
    name: str,
    fresh: bool = False,
    callees: str = "",
    parallel: bool = False,
    threads: bool = True,
    indexed: bool = True,
):
    """The module of `source` compiled by Numba, its functions each compiled on first call.

    Its text is written to the checked cache directory under a name hashing the text, the
    helpers and s2sad's version (so Numba's files for it are never another code's), then
    compiled from the text itself, not read back. The module enters `sys.modules` (where Numba
    looks it up when it loads cached code) only once it has run, and one thread at a time loads.
    `fresh` first deletes Numba's cached machine code for it (it could not be loaded).
    `callees` (`callees_fingerprint`) names the code of the functions it calls; `parallel`: Numba's
    parallel=True (its text says so, so a parallel and a serial build never share a module);
    `threads=False`: a parallel build compiled without Numba's parallel options; `indexed`: its
    indices checked (module_text)."""
    with _LOAD_LOCK:
        # (under the lock: the key reads Numba's configuration, and the first thread to import
        # Numba must finish before another reads its modules' attributes)
        text = module_text(
            source, name, embed=False, parallel=parallel, threads=threads, indexed=indexed
        )
        # Numba's optimisation level too: its cache files do not record it (NUMBA_OPT=0, as the
        # tests set it, would otherwise leave unoptimised code for a later process to load)
        # (the forms' loaded code, hashed: numba_source() would rebuild their text, 0.15 s a process)
        key = f"{version.__version__}\n{forms_fingerprint()}\n{callees}\n{numba_opt()}\n{text}"
        digest = hashlib.sha256(key.encode()).hexdigest()[:20]
        module_name = f"s2sad_{short_name(name)}_{digest}"
        if fresh:
            sys.modules.pop(module_name, None)
        elif module_name in sys.modules:
            return sys.modules[module_name]
        root = trusted_cache_root()
        quiet_performance_hints(root)
        path = root / f"{module_name}.py"
        if read_private(path) != text.encode():
            with atomic_write(path) as f:
                f.write(text.encode())
        if fresh:
            for stale in (root / "numba").glob(f"{module_name}.*"):
                stale.unlink(missing_ok=True)
        module = types.ModuleType(module_name)
        module.__file__ = str(path)
        exec(compile(text, str(path), "exec"), vars(module))
        sys.modules[module_name] = module
        return module


def _float64_meets_32(args) -> bool:
    """A float32 array beside a float64 array or NumPy float64 number: NumPy computes in
    float64 there (only Python's floats are weak), but Numba types np.float64 as it types a
    Python float, and a fused float32 run would take it for one. The unfused code keeps
    NumPy's dtypes."""
    f32 = f64 = False
    for a in args:
        if type(a) is np.ndarray:
            f32 = f32 or a.dtype == np.float32
            f64 = f64 or a.dtype == np.float64
        elif type(a) is np.float64:
            f64 = True
    return f32 and f64


class Jitted:
    """The functions of a generated source compiled by Numba on their first call, or their
    Python fallbacks."""

    def __init__(self, compiled, branches: bool = False):
        self.compiled = compiled
        # compile the fused runs' `else:` branches too (else each raises ShapesNotFused, and
        # `branched`, the code with them, runs the calls that take one: fused_guards.py)
        self.branches = branches or compiled.unfused_code is None
        self.branched = None
        self.namespace = None
        # (function name, the arguments' kinds) -> the exception Numba raised compiling it for
        # them: a failure for mixed dtypes leaves the other calls compiled
        self.failed = {}
        self.module_failed = None
        self.reloaded = False
        self.threads = compiled.parallel  # compiled with Numba's parallel options
        self.lock = threading.Lock()
        self.pools = {}  # function name -> its workspace's buffers (workspace.py)
        self.unfused = None  # the same transform without fused loops, made if Numba needs it
        # (name, kinds, shapes) of calls whose arrays broadcast where a fused run takes one
        # shape (ShapesNotFused): `branched` runs them
        self.broadcast = set()
        # (name, kinds, shapes) of calls whose values did not fit the fused code's tapes of rows
        # (row_tapes.py: shapes that change in a loop): the code without fusion runs them
        self.misfits = set()
        # it calls what runs its own Numba code from Python (s2sad.checkpoint's loops)
        self.runs_python = any(
            getattr(v, "compiles_itself", False) for v in compiled.globals.values()
        )
        self.plans = {}  # (name, signature_key) -> the Plan of calls that ran compiled here

    @classmethod
    def of(cls, compiled) -> "Jitted":
        """`compiled`'s one Jitted, made by the first thread to ask."""
        with _LOAD_LOCK:
            if compiled.jitted is None:
                compiled.jitted = cls(compiled)
                serial_warning(compiled)  # (parallel=True where no loop runs on threads)
            return compiled.jitted

    def __call__(self, args, strict: bool, name: str | None = None, what=None, key=None):
        """Run the compiled `name` (the main function by default) on `args`. `what` names the
        user's transform in messages ("s2sad.grad(f, jit=True)"; any object whose str does);
        `key`: `signature_key(args)` where the caller has it."""
        name = name or self.compiled.name
        key = (name, signature_key(args) if key is None else key)
        plan = self.plans.get(key)
        if (
            plan is not None
            and plan.namespace is self.namespace
            and self.module_failed is None
            and not self.broadcast
            and not self.misfits
        ):
            try:
                pool = plan.pool_for(args)
                if pool is not None:
                    return plan.retype(pool.call(plan.dispatcher, args)[0])
                return plan.retype(plan.dispatcher(*args))
            except Exception:  # noqa: BLE001  (decided anew below, where the call runs again)
                self.plans.pop(key, None)
        if self.runs_python:
            told = STRICT.set(strict)
            try:
                return self.compiled.functions.get(name, self.compiled.function)(*args)
            finally:
                STRICT.reset(told)
        if self.namespace is None and self.module_failed is None:
            with self.lock:
                if self.namespace is None and self.module_failed is None:
                    self.load()
        route = self._routed(name, args)
        if route == "unfused":
            return self.without_fusion()(args, strict, name, what, key[1])
        if route == "branched":
            return self.with_branches()(args, strict, name, what, key[1])
        failed = None
        if route == "failed":
            failed = self.module_failed
            failed = self.failed.get((name, _kinds(args))) if failed is None else failed
        if failed is None:
            try:
                dispatcher, pool = self.namespace[name], self.pools.get(name)
                called = args
                if pool is not None and pooling(
                    args, pool
                ):  # its large arrays in this thread's buffers
                    result, called = pool.call(dispatcher, args)
                else:
                    result = dispatcher(*args)
                if route is None and key[1] is not None:  # (what it decided, kept)
                    plan = Plan.made(self.namespace, dispatcher, called, pool, args)
                    keep(self.plans, key, plan)
                return float32_scalars(dispatcher, called, result)
            except ShapesNotFused:
                # arrays that broadcast where a fused run takes one shape: the code with the
                # `else:` branches runs the call, and those shapes from now on (nothing the call
                # made is kept: generated code copies the arguments it writes into). All of
                # them: GMM's fused runs over arrays of unrelated lengths fail four guards, and
                # code with one branch more per failure compiled five times
                self.remember(self.broadcast, name, args)
                return self.with_branches()(args, strict, name, what)
            except Exception as exc:
                if from_numba_cache(exc) and not self.reloaded:
                    # a damaged cache file: delete it and compile again, trusting nothing
                    with self.lock:
                        if not self.reloaded:
                            self.reloaded = True
                            self.load(fresh=True)
                    return self(args, strict, name, what)
                if self.threads and (is_numba_error(exc) or shape_assertion(exc)):
                    # Numba's parallel passes refuse it: compile it without them
                    return self.without_threads(exc, args, strict, name, what)
                if row_misfit(exc, self.compiled):
                    # a value recorded in a loop changed shape: the code without fused loops
                    # (whose tapes are lists) runs the call, and later ones of these shapes;
                    # calls of other shapes keep the rows (one misfit used to demote them all)
                    self.remember(self.misfits, name, args)
                    return self.without_fusion()(args, strict, name, what)
                if not is_numba_error(exc):  # the user's error, placed at the user's line
                    python = self.compiled.functions.get(name, self.compiled.function)
                    if isinstance(exc, ZeroDivisionError):
                        # Numba's `t ** j` of a float 0.0 and an int j < 0 raises where NumPy's
                        # numbers give inf (a Python float raises in Python too): Python mode's
                        # numbers, or its error, for these arguments
                        try:
                            return python(*args)
                        except Exception:  # noqa: BLE001  (placed below, as any other)
                            pass
                    raise at_user_line(exc, python, args) from None
                self.failed[name, _kinds(args)] = failed = exc
        if self.compiled.unfused_code is not None:
            # fused loops Numba cannot type (a run over arrays of several dtypes, or of
            # integers): the code as it was before fusion
            return self.without_fusion()(args, strict, name, what)
        return self.fallback(name, failed, args, strict, what)

    def ran(self, name: str, args) -> "Jitted | None":
        """The Jitted whose compiled code ran `name` on `args` in the caller's call through
        `__call__` just now: this one, or its unfused version where Numba could not type the
        fused loops for these kinds (a run mixing dtypes); None where that call did not run compiled code
        (a fallback, threads turned off, s2sad.checkpoint's loops)."""
        if self.namespace is None or self.module_failed or self.runs_python:
            return None
        if self.threads != self.compiled.parallel:
            return None
        route = self._routed(name, args)
        if route in ("failed", "unfused"):
            return self.unfused.ran(name, args) if self.unfused is not None else None
        if route == "branched":
            return self.branched.ran(name, args) if self.branched is not None else None
        return self

    def falls_back(self, name: str, args) -> bool:
        """Whether a call of `name` on `args` through `__call__` runs the Python version (Numba
        failed to compile it for these kinds): a caller that would run it many times (a
        Jacobian's sweeps) then takes its own NumPy path, once, instead."""
        if self.runs_python:  # (its own compiled loops)
            return False
        route = self._routed(name, args)
        if route in ("failed", "unfused"):
            if self.compiled.unfused_code is not None:  # the code without fused loops ran it
                return self.unfused is not None and self.unfused.falls_back(name, args)
            return route == "failed"
        if route == "branched":
            return self.branched is not None and self.branched.falls_back(name, args)
        return False

    def _routed(self, name: str, args) -> str | None:
        """Where `__call__` sends a call of `name` on `args`, decided here alone (`ran` and
        `falls_back` follow it): "failed" (Numba could not compile it for these kinds: the
        code without fused loops runs it, else the Python version), "unfused" (a float64 meeting
        float32 in fused code, or values that did not fit its tapes of rows), "branched" (arrays
        that broadcast where a fused run takes one shape), or None (this one's compiled code)."""
        if self.module_failed is not None or self.failed and (name, _kinds(args)) in self.failed:
            return "failed"
        if self.compiled.unfused_code is not None and _float64_meets_32(args):
            return "unfused"
        if self.broadcasts(name, args):
            return "branched"
        if self.misfits and (name, _kinds(args), shapes(args)) in self.misfits:
            return "unfused"
        return None

    def remember(self, calls: set, name: str, args) -> None:
        """Add the call's (name, kinds, shapes) to `calls` (`broadcast`, `misfits`), of a
        bounded size."""
        with self.lock:
            if len(calls) >= BROADCAST_KEPT:
                calls.clear()
            calls.add((name, _kinds(args), shapes(args)))

    def broadcasts(self, name: str, args) -> bool:
        """Whether a call of `name` on `args` has shapes for which a fused run's guard failed."""
        return bool(self.broadcast) and (name, _kinds(args), shapes(args)) in self.broadcast

    def with_branches(self) -> "Jitted":
        """The same code compiled with the fused runs' `else:` branches, made on first use."""
        with self.lock:
            if self.branched is None:
                self.branched = Jitted(self.compiled, branches=True)
            return self.branched

    def without_fusion(self) -> "Jitted":
        with self.lock:
            if self.unfused is None:
                plain = dataclasses.replace(
                    self.compiled,
                    code=self.compiled.unfused_code,
                    unfused_code=None,
                    jitted=None,
                    slots=self.compiled.unfused_slots,
                )
                self.unfused = Jitted(plain)
            return self.unfused

    def without_threads(self, exc, args, strict: bool, name: str, what: str | None):
        """Compile the same code without Numba's parallel options (its `prange` loops then run
        as `range` loops), after a warning naming why, and run it."""
        warnings.warn(
            f"Numba cannot compile {what or name} on threads: {numba_reason(exc, self.compiled.source)}; running it "
            "compiled without threads",
            JitFallbackWarning,
            stacklevel=user_stacklevel(),
        )
        with self.lock:
            if self.threads:
                self.threads = False
                self.namespace = None
                self.failed = {}
                self.load()
        return self(args, strict, name, what)

    def load(self, fresh: bool = False):
        try:
            callees = callees_fingerprint(self.compiled.globals)
            source = self.compiled.formatted_source(on_disk=True)  # (formatted.py)
            if not self.branches:
                source = fused_only(source)
            # allocations outside loops take slots of a workspace kept between calls
            # (pipeline/numba_forms.py wrote them into the code)
            self.pools = {fn: Pool(count) for fn, count in self.compiled.slots.items()}
            module = _module_for(
                source,
                self.compiled.name,
                fresh,
                callees,
                self.compiled.parallel,
                self.threads,
                self.compiled.numba_checks,
            )
            namespace = vars(module)
            for key, value in self.compiled.globals.items():
                if namespace.get(key) is not value:  # a user's rule: compiled by Numba too
                    value = numba_form(value)
                if namespace.setdefault(key, value) is not value:
                    # the same code text calling another function under this name: Numba has
                    # compiled the first one into it (data never gets here: it is an argument)
                    raise JitError(
                        f"'{key}' names another object than in an earlier compile of the same "
                        "generated code in this process",
                        hint="give the two functions different names",
                    )
            self.namespace = namespace
            use_fingerprint()
        except Exception as exc:  # the module itself failed: report like a typing error
            self.module_failed = exc

    def fallback(self, name: str, failed, args, strict: bool, what: str | None = None):
        widened = two_types(failed, self.compiled.source) or called_transform(
            failed, self.compiled.globals
        )
        mixed = None if widened else mixed_product(failed, self.compiled.source, args)
        mixed = mixed or unknown_int(failed, self.compiled.source)
        unboxed = unboxed_argument(failed, args)
        reason = (
            widened[0]
            if widened
            else (mixed and mixed[0])
            or no_numba_form(failed, self.compiled.source)
            or unboxed
            or numba_reason(failed, self.compiled.source)
        )
        reason = argument_in_user_terms(reason, self.compiled, name)  # (`argument 1: ...`)
        callee = user_callee(failed, self.compiled.globals)  # (a rule of the user's: in Python)
        reason = f"{callee} does not compile with Numba: {reason}" if callee else reason
        message = f"Numba cannot compile {what or name}: {reason}"
        if strict and axis_error(failed):  # the user's error, as Python mode raises it
            raise axis_error(failed) from None
        if strict:
            raise JitError(
                message,
                hint=(
                    widened[1]
                    if widened
                    else (
                        mixed[1]
                        if mixed
                        else (
                            UNBOX_HINT
                            if unboxed
                            else "use jit=True to fall back to Python, or keep to "
                            "operations Numba supports in nopython mode"
                        )
                    )
                ),
            )
        if not TOLD.get():
            warnings.warn(
                message + "; running the Python version",
                JitFallbackWarning,
                stacklevel=user_stacklevel(),
            )
        return self.compiled.functions.get(name, self.compiled.function)(*args)


def _kinds(args) -> tuple:
    """What Numba compiles a function separately for: each argument's type, and an array's
    dtype, rank, layout and writability (a tuple's or list's, of its items: a list Numba could
    not unbox, of mixed items, fails for those items alone)."""
    return tuple(
        (
            (a.dtype.str, a.ndim, a.flags.c_contiguous, a.flags.f_contiguous, a.flags.writeable)
            if isinstance(a, np.ndarray)
            else (type(a), _kinds(a) if isinstance(a, (tuple, list)) else None)
        )
        for a in args
    )


__all__ = ["JitError", "JitFallbackWarning", "Jitted", "cache_dir", "np"]
