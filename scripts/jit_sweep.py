"""Check `jit=True`'s promise over every call a set of tests makes, not only the jit corpus.

    python scripts/jit_sweep.py tests/test_rules_breadth_linalg.py [more test files or -k ...]

runs the tests with s2sad's `grad`, `value_and_grad`, `vjp` and `jvp` watched: each distinct
call (function, mode, wrt, argument types and shapes) is recorded with a copy of its arguments.
Afterwards, for each one whose primal `numba.njit` compiles, the derivative is taken with
`jit="strict"` and compared with Python mode (1e-10). It prints one line per disagreement or
jitted derivative that does not compile, and a summary; the exit status is 1 if there are any.
The same check, on a sample, is tests/test_jit_corpus.py.
"""

from __future__ import annotations

import copy
import sys
import warnings

import numpy as np
import pytest

import s2sad

MODES = ("grad", "value_and_grad", "vjp", "jvp")
_SEEN: dict[tuple, tuple] = {}


def _kind(value) -> object:
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape)
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_kind(v) for v in value))
    return type(value).__name__


def _watch(mode: str, transform):
    def watched(f, *targs, **tkwargs):
        inner = transform(f, *targs, **tkwargs)
        if tkwargs.get("jit") or not callable(inner) or not hasattr(f, "__code__"):
            return inner

        def call(*args, **kwargs):
            key = (f.__code__, mode, repr(targs), repr(sorted(tkwargs.items())))
            key += (tuple(_kind(a) for a in args), repr(sorted(kwargs)))
            if key not in _SEEN and not kwargs:
                try:
                    _SEEN[key] = (f, mode, targs, tkwargs, copy.deepcopy(args))
                except Exception:  # noqa: BLE001  (an argument that cannot be copied)
                    pass
            return inner(*args, **kwargs)

        return call

    return watched


def _flat(value):
    if isinstance(value, (tuple, list)):
        return [x for v in value for x in _flat(v)]
    return [np.asarray(value)] if not callable(value) else []


def _derivative(f, mode, targs, tkwargs, args, jit):
    transform = getattr(s2sad, mode)(f, *targs, **tkwargs, jit=jit)
    if mode == "vjp":
        value, pullback = transform(*copy.deepcopy(args))
        seed = np.ones_like(np.asarray(value))
        return _flat(value) + _flat(pullback(seed if np.ndim(value) else 1.0))
    if mode == "jvp":
        wrt = tkwargs.get("wrt", 0)
        picks = wrt if isinstance(wrt, tuple) else (wrt,)
        tangents = [
            np.ones_like(np.asarray(args[w], dtype=float)) for w in picks if isinstance(w, int)
        ]
        if len(tangents) != len(picks):
            raise TypeError("named wrt: skipped")
        return _flat(transform(*copy.deepcopy(args), *tangents))
    return _flat(transform(*copy.deepcopy(args)))


def _check(record) -> str | None:
    import numba

    f, mode, targs, tkwargs, args = record
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            numba.njit(f)(*copy.deepcopy(args))
    except Exception:  # noqa: BLE001  (outside the promise)
        return "skip"
    try:
        plain = _derivative(f, mode, targs, tkwargs, args, jit=False)
    except Exception:  # noqa: BLE001  (refused in Python mode too, or an odd call shape)
        return "skip"
    try:
        jitted = _derivative(f, mode, targs, tkwargs, args, jit="strict")
    except Exception as exc:  # noqa: BLE001
        return f"does not compile: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    if len(plain) != len(jitted):
        return "different number of results"
    for p, j in zip(plain, jitted):
        if p.shape != j.shape or p.dtype != j.dtype:
            return f"results differ: {p.dtype}{p.shape} and {j.dtype}{j.shape} (jit)"
        # float32 code rounds at float32's precision, in whatever order Numba evaluates it
        rtol = 1e-10 if p.dtype != np.float32 else 1e-5
        if not np.allclose(p, j, rtol=rtol, atol=rtol * 1e-2, equal_nan=True):
            return f"values differ: {p.ravel()[:3]} and {j.ravel()[:3]} (jit)"
    return None


class _Plugin:
    def pytest_configure(self, config):
        for mode in MODES:
            setattr(s2sad, mode, _watch(mode, getattr(s2sad, mode)))


def main(argv: list[str]) -> int:
    warnings.filterwarnings("ignore", message=".*Cannot cache compiled function")
    originals = {m: getattr(s2sad, m) for m in MODES}
    pytest.main(["-q", "-p", "no:cacheprovider", "-x", "--no-header", *argv], plugins=[_Plugin()])
    for mode, transform in originals.items():
        setattr(s2sad, mode, transform)
    counts = {"agree": 0, "skip": 0, "bad": 0}
    for record in _SEEN.values():
        outcome = _check(record)
        if outcome is None:
            counts["agree"] += 1
        elif outcome == "skip":
            counts["skip"] += 1
        else:
            counts["bad"] += 1
            f, mode = record[0], record[1]
            where = f"{f.__code__.co_filename}:{f.__code__.co_firstlineno}"
            kinds = ", ".join(str(_kind(a)) for a in record[4])
            print(f"{where} {f.__name__} {mode} ({kinds}): {outcome}")
    print(
        f"{len(_SEEN)} distinct calls: {counts['agree']} compiled and agreed, "
        f"{counts['skip']} outside the promise (Numba refuses the primal, or s2sad the function), "
        f"{counts['bad']} failed"
    )
    return 1 if counts["bad"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
