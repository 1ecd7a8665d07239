"""Check `s2sad.hessian` over every call a set of tests makes: a wrong second derivative is
silent, since forward mode takes an undeclared tangent of a runtime helper as zero.

    python scripts/hessian_sweep.py tests/test_rules_reductions.py [more test files or -k ...]
    python scripts/hessian_sweep.py --unbatched tests/...   # also hessian(batched=False)

runs the tests with s2sad's `grad`, `value_and_grad` and `vjp` watched: each distinct call
(function, wrt, argument types and shapes) whose `wrt` is one float64 array of at most 30
elements (or one Python float) is recorded with a copy of its arguments. Afterwards, for each
whose function returns a real scalar, `s2sad.hessian(f, wrt)(*args)` is compared with central
differences of `s2sad.grad(f, wrt)` (step 1e-5, tolerance 1e-5 times the larger of 1 and the
largest |gradient| or |difference|). Where differences with steps 1e-5 and 1e-4 disagree (a
kink, a branch, a sort order changing near the point) the call is skipped: there is no Hessian
to check. It prints one line per disagreement (a silently wrong Hessian), the refusals grouped
by message (fine when they are clear S2SADErrors), the other exceptions with where they were
raised (internal errors: defects), and a summary; the exit status is 1 if there are wrong
Hessians or internal errors. A sample of the same check is tests/test_hessian_sweep.py.

A function whose result is a float64 array is checked through sum(sin(f(...)) * W), W fixed.
Run over the test suite (2026-11-24, in batches of test files), it checked 2,147 distinct
calls (the rule tests' 1,563 also with --unbatched): 4 silently wrong Hessians (gradient code copying a read of an array it writes
later: the copy's tangent was the array's own), 2 internal errors (eigh's pair with no
cotangent for the vectors), and refusals of np.cumprod and np.select (now covered); all fixed.
Left refused, with clear messages: np.corrcoef's cotangent, math.fabs (math.copysign), matrix
norms other than Frobenius, undefined derivatives of decompositions, user rules without a
forward rule. scripts/helper_tangent_audit.py checks the helpers' declared rules directly.
"""

from __future__ import annotations

import collections
import copy
import importlib.util
import itertools
import re
import tempfile
import sys
import traceback
import warnings

import numpy as np
import pytest

import s2sad
from s2sad.errors import S2SADError

MODES = ("grad", "value_and_grad", "vjp")
MAX_SIZE = 30
_SEEN: dict[tuple, tuple] = {}


def _kind(value) -> object:
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape)
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_kind(v) for v in value))
    return type(value).__name__


def _position(f, wrt) -> int | None:
    """The index of the one positional argument `wrt` names, else None."""
    if isinstance(wrt, (int, np.integer)) and not isinstance(wrt, bool):
        return int(wrt)
    code = getattr(f, "__code__", None)
    if isinstance(wrt, str) and code is not None:
        names = code.co_varnames[: code.co_argcount]
        return names.index(wrt) if wrt in names else None
    return None


def _eligible(value) -> bool:
    if isinstance(value, float):
        return True
    return type(value) is np.ndarray and value.dtype == np.float64 and 0 < value.size <= MAX_SIZE


class _Watched:
    """The transformed function, recording its calls (other attributes: the transformed's)."""

    def __init__(self, inner, record):
        self._inner, self._record = inner, record

    def __call__(self, *args, **kwargs):
        self._record(args, kwargs)
        return self._inner(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._inner, name)


def _watch(transform):
    def watched(f=None, *targs, **tkwargs):
        inner = transform(f, *targs, **tkwargs)
        if f is None or tkwargs.get("jit") or tkwargs.get("has_aux") or not callable(inner):
            return inner
        if not hasattr(f, "__code__") or set(tkwargs) - {"wrt"} or len(targs) > 1:
            return inner
        wrt = targs[0] if targs else tkwargs.get("wrt", 0)
        at = _position(f, wrt)
        if at is None:
            return inner

        def record(args, kwargs):
            if not kwargs and at < len(args) and _eligible(args[at]):
                key = (f.__code__, repr(wrt), tuple(_kind(a) for a in args))
                if key not in _SEEN:
                    try:
                        _SEEN[key] = (f, wrt, at, copy.deepcopy(args))
                    except Exception:  # noqa: BLE001  (an argument that cannot be copied)
                        pass

        return _Watched(inner, record)

    return watched


_WRAPPER = """
import numpy as np


def weighted({params}):
    return np.sum(np.sin(_F({params})) * _W)
"""
_DIR = tempfile.mkdtemp(prefix="hessian-sweep-")
_COUNTER = itertools.count()


def _weighted(f, out, nargs):
    """A scalar function of f's arguments, sum(sin(f(...)) * W) with W fixed, for an `f` whose
    result is a real array (its Hessian takes in the second derivatives of every item)."""
    params = ", ".join(f"a{k}" for k in range(nargs))
    name = f"hessian_sweep_{next(_COUNTER)}"
    path = f"{_DIR}/{name}.py"
    with open(path, "w") as file:
        file.write(_WRAPPER.format(params=params))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module._F = f
    module._W = np.cos(np.arange(np.size(out), dtype=float) + 0.5).reshape(np.shape(out))
    return module.weighted


def _fd(grad, args, at, eps):
    x = np.asarray(args[at], dtype=float)
    columns = []
    for k in range(x.size):
        e = np.zeros(x.size)
        e[k] = eps
        e = e.reshape(x.shape)
        moved = []
        for sign in (1, -1):
            shifted = list(copy.deepcopy(args))
            moved_x = x + sign * e
            shifted[at] = moved_x if isinstance(args[at], np.ndarray) else type(args[at])(moved_x)
            moved.append(np.asarray(grad(*shifted), dtype=float))
        columns.append(np.ravel(moved[0] - moved[1]) / (2 * eps))
    return np.stack(columns, axis=-1).reshape(x.shape + x.shape)


def _where(exc) -> str:
    """The innermost frame of s2sad (or of generated code) that raised `exc`."""
    frames = traceback.extract_tb(exc.__traceback__)
    inside = [fr for fr in frames if "s2sad" in fr.filename or "<" in fr.filename]
    fr = (inside or frames)[-1]
    return f"{fr.filename.split('s2sad/')[-1]}:{fr.lineno} {fr.name}"


def _check(record, batched=True, wrap=True):
    """('agree' | 'skip' | 'refused' | 'internal' | 'wrong', detail)."""
    f, wrt, at, args = record
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = f(*copy.deepcopy(args))
            if type(out) is np.ndarray and out.dtype == np.float64 and out.ndim and wrap:
                f, wrt = _weighted(f, out, len(args)), at
            elif np.ndim(out) != 0 or not np.isrealobj(out):
                return "skip", "not a real scalar or float64 array"
            grad = s2sad.grad(f, wrt)
            g = np.asarray(grad(*copy.deepcopy(args)), dtype=float)
            fine = _fd(grad, args, at, 1e-5)
            coarse = _fd(grad, args, at, 1e-4)
    except Exception as exc:  # noqa: BLE001  (the gradient itself refused: not ours)
        return "skip", f"gradient: {type(exc).__name__}: {str(exc)[:60]}"
    if not (np.all(np.isfinite(fine)) and np.all(np.isfinite(g)) and np.isfinite(fine).all()):
        return "skip", "not finite"
    scale = max(1.0, float(np.max(np.abs(g), initial=0)), float(np.max(np.abs(fine))))
    if np.max(np.abs(fine - coarse)) > 1e-4 * scale:
        return "skip", "kink"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            H = s2sad.hessian(f, wrt, batched=batched)(*copy.deepcopy(args))
    except Exception as exc:  # noqa: BLE001
        message = str(exc).splitlines()[0] if str(exc) else ""
        # one group per reason: without the file and line, the function's name
        message = re.sub(r"^\S+:\d+: ", "", message)
        message = re.sub(r"s2sad\.hessian\([^)]+\)", "s2sad.hessian(f)", message)
        message = re.sub(r"for this line: ", "", message.replace("s2sad writes ", ""))[:200]
        # a runtime helper refuses a value it has no derivative at with a ValueError of its own
        raised = traceback.extract_tb(exc.__traceback__)[-1].filename
        own = "s2sad" in message or "/s2sad/rules/" in raised
        if isinstance(exc, S2SADError) or (isinstance(exc, ValueError) and own):
            return "refused", message
        return "internal", f"{type(exc).__name__}: {message[:120]} at {_where(exc)}"
    H = np.asarray(H, dtype=float)
    if H.shape != fine.shape:
        return "wrong", f"shape {H.shape}, expected {fine.shape}"
    err = float(np.max(np.abs(H - fine), initial=0))
    if not err <= 1e-5 * scale:
        k = int(np.argmax(np.abs(H - fine)))
        return (
            "wrong",
            f"off by {err:.3g} (scale {scale:.3g}): {H.ravel()[k]:.6g} vs {fine.ravel()[k]:.6g}",
        )
    return "agree", ""


class _Plugin:
    def pytest_configure(self, config):
        for mode in MODES:
            setattr(s2sad, mode, _watch(getattr(s2sad, mode)))
        source = s2sad.source
        s2sad.source = lambda t, *a, **k: source(getattr(t, "_inner", t), *a, **k)


def main(argv: list[str]) -> int:
    warnings.filterwarnings("ignore", message=".*Cannot cache compiled function")
    modes = [True]
    if "--unbatched" in argv:
        argv = [a for a in argv if a != "--unbatched"]
        modes.append(False)
    originals = {m: getattr(s2sad, m) for m in MODES + ("source",)}
    pytest.main(["-q", "-p", "no:cacheprovider", "--no-header", *argv], plugins=[_Plugin()])
    for mode, transform in originals.items():
        setattr(s2sad, mode, transform)
    counts = collections.Counter()
    refusals = collections.Counter()
    skips = collections.Counter()
    for record in _SEEN.values():
        for batched in modes:
            outcome, detail = _check(record, batched)
            counts[outcome] += 1
            f = record[0]
            where = f"{f.__code__.co_filename.split('/')[-1]}:{f.__code__.co_firstlineno}"
            label = f"{where} {f.__name__} wrt={record[1]!r} {_kind(record[3][record[2]])}"
            if not batched:
                label += " (batched=False)"
            if outcome == "refused":
                refusals[detail] += 1
            elif outcome == "skip":
                skips[detail] += 1
            elif outcome in ("wrong", "internal"):
                print(f"{outcome.upper()}: {label}: {detail}")
            if outcome == "skip":
                break
    print("\nrefusals:")
    for message, n in refusals.most_common():
        print(f"  {n:4d}  {message}")
    print("skipped: " + ", ".join(f"{k} {n}" for k, n in skips.most_common()))
    print(
        f"{len(_SEEN)} distinct calls: {counts['agree']} Hessians agreed, "
        f"{counts['refused']} refused, {counts['skip']} skipped, {counts['wrong']} WRONG, "
        f"{counts['internal']} internal errors"
    )
    return 1 if counts["wrong"] or counts["internal"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
