"""Check the runtime helpers' declared tangent rules against the helpers' actual behaviour.

    python scripts/helper_tangent_audit.py tests/test_rules_reductions.py [more test files ...]

runs the tests and records, for each helper with a declared tangent rule (`@helper(jvp=...)`:
linear, multilinear or explicit over some parameters; rules/registry.py), the calls made to it
(a few per helper). Forward mode, and with it every Hessian, takes the tangent of a parameter the
rule does not name as zero: the helper must not vary with it, or only piecewise-constantly
(through its shape, a sort order, an argmax). For each recorded call and each float parameter the
rule leaves out, the parameter is moved by a tiny step (1e-7 relative); a helper whose result
moves with it (beyond rounding) is printed: its tangent rule misses a dependence (unless that
parameter is a function of a declared one the rule accounts for, as `ans` of `prod_vjp`). For
linear rules it also checks homogeneity in the declared parameters (f(2 g) = 2 f(g)).
"""

from __future__ import annotations

import collections
import copy
import sys
import warnings

import numpy as np
import pytest

import s2sad  # noqa: F401  (fills the tables)
from s2sad.rules import registry
from s2sad.rules.helpers import RUNTIME

PER_HELPER = 6
_CODES = {}
for _name, _f in RUNTIME.items():
    _entry = registry.FORWARD.get(id(_f))
    if _entry is not None and hasattr(_f, "__code__"):
        _CODES[_f.__code__] = (_name, _f, _entry)
_CALLS: dict[str, list] = collections.defaultdict(list)


def _profile(frame, event, arg):
    if event != "call":
        return
    found = _CODES.get(frame.f_code)
    if found is None or len(_CALLS[found[0]]) >= PER_HELPER:
        return
    code = frame.f_code
    names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    try:
        values = {n: copy.deepcopy(frame.f_locals[n]) for n in names}
    except Exception:  # noqa: BLE001
        return
    _CALLS[found[0]].append(values)


def _floats(value) -> bool:
    if isinstance(value, float):
        return True
    return isinstance(value, np.ndarray) and value.dtype.kind == "f" and value.size > 0


def _moved(value, scale):
    rng = np.random.default_rng(0)
    step = rng.standard_normal(np.shape(value)) * scale * (1.0 + np.abs(value))
    return value + step if isinstance(value, np.ndarray) else float(value + step)


def _flat(out):
    if isinstance(out, (tuple, list)):
        return np.concatenate([_flat(o) for o in out]) if out else np.zeros(0)
    a = np.asarray(out)
    if a.dtype == object:
        return np.concatenate([_flat(o) for o in a.ravel() if o is not None] or [np.zeros(0)])
    return a.astype(float).ravel()


def _differs(a, b) -> bool:
    a, b = _flat(a), _flat(b)
    if a.shape != b.shape:
        return True
    scale = 1.0 + float(np.max(np.abs(a), initial=0))
    return not np.allclose(a, b, rtol=0, atol=1e-10 * scale, equal_nan=True)


def _audit(name, f, entry, values) -> list[str]:
    kind, params, _ = entry
    findings = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            base = f(**copy.deepcopy(values))
        except Exception:  # noqa: BLE001
            return []
        for p, v in values.items():
            if p in params or not _floats(v):
                continue
            outs = []
            for step in (1e-7, 2e-7):
                moved = dict(copy.deepcopy(values))
                moved[p] = _moved(v, step)
                try:
                    outs.append(_flat(f(**moved)))
                except Exception:  # noqa: BLE001
                    break
            if len(outs) < 2 or not _differs(base, outs[0]):
                continue
            # smooth: twice the step moves it twice as far; a jump (x == ans broken) does not
            near, far = outs[0] - _flat(base), outs[1] - _flat(base)
            if near.shape == far.shape and np.allclose(far, 2 * near, rtol=0.1, atol=1e-12):
                findings.append(f"{name}: {kind}{params} but varies smoothly with `{p}`")
            else:
                findings.append(f"{name}: {kind}{params}, jumps with `{p}` (piecewise: fine)")
        if kind == "linear":
            doubled = dict(copy.deepcopy(values))
            scaled = [p for p in params if _floats(doubled.get(p))]
            for p in scaled:
                doubled[p] = doubled[p] * 2.0
            if not scaled:  # (a tuple of parts: not checked)
                return findings
            try:
                out = f(**doubled)
                if _differs(_flat(base) * 2.0, out):
                    findings.append(f"{name}: linear{params} but f(2 g) != 2 f(g)")
            except Exception:  # noqa: BLE001
                pass
    return findings


class _Plugin:
    def pytest_runtest_call(self, item):
        sys.setprofile(_profile)

    def pytest_runtest_teardown(self, item):
        sys.setprofile(None)


def main(argv: list[str]) -> int:
    pytest.main(["-q", "-p", "no:cacheprovider", "--no-header", *argv], plugins=[_Plugin()])
    sys.setprofile(None)
    findings = collections.Counter()
    for name, calls in _CALLS.items():
        _, f, entry = next(v for v in _CODES.values() if v[0] == name)
        for values in calls:
            for finding in _audit(name, f, entry, values):
                findings[finding] += 1
    for finding, n in sorted(findings.items()):
        print(f"{finding} ({n} of the calls recorded)")
    unseen = sorted({v[0] for v in _CODES.values()} - set(_CALLS))
    print(f"{len(_CALLS)} helpers with tangent rules called, {len(findings)} findings")
    print("not called: " + ", ".join(unseen))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
