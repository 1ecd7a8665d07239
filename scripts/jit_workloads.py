"""Which benchmark workloads' derivatives `jit="strict"` compiles, and do they agree.

    python scripts/jit_workloads.py [substring ...]

For each workload of benchmarks/ at its smoke size (benchmarks/workloads, gradbench's evals
included), takes the derivative s2sad's row uses with `jit="strict"`: the gradient with respect
to the case's `wrt`, or, for a workload whose quantity is not a gradient (BA's and hand
tracking's Jacobians, k-means' Newton direction), the vector-Jacobian product of its objective
(sum of outputs). It compares that with Python mode (1e-10 relative) and prints one line per
workload: `compiled`, `WRONG`, or the first line of the refusal. Exit status 1 if any is WRONG.
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import s2sad  # noqa: E402
from benchmarks.workloads import all_cases  # noqa: E402


def _flat(value):
    if isinstance(value, (tuple, list)):
        return [x for v in value for x in _flat(v)]
    return [np.asarray(value, dtype=np.float64)]


def _derivative(case, jit):
    f = case.numpy_f
    inputs = case.inputs()
    args = list(inputs.values())
    if "s2sad" in case.build or case.workload in ("particle", "saddle"):
        # a Jacobian or nested workload: the pullback of its objective's outputs
        value, pullback = s2sad.vjp(f, wrt=tuple(case.wrt), jit=jit)(*args)
        seed = np.ones_like(np.asarray(value, dtype=np.float64))
        return _flat(pullback(seed if np.ndim(value) else 1.0))
    return _flat(s2sad.grad(f, wrt=tuple(case.wrt), jit=jit)(*args))


def main(picks: list[str]) -> int:
    bad = 0
    seen = set()
    for case in all_cases("smoke"):
        if case.workload in seen or (picks and not any(p in case.workload for p in picks)):
            continue
        seen.add(case.workload)
        start = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                want = _derivative(case, False)
        except Exception as err:  # noqa: BLE001
            print(f"{case.workload:16s} python mode fails: {type(err).__name__}: {err}")
            continue
        try:
            got = _derivative(case, "strict")
        except Exception as err:  # noqa: BLE001
            first = str(err).strip().splitlines()
            print(
                f"{case.workload:16s} falls back: {type(err).__name__}: {first[0] if first else ''}"
            )
            for line in first[1:6]:
                print(f"{'':18s}{line}")
            continue
        ok = len(got) == len(want) and all(
            g.shape == w.shape and np.allclose(g, w, rtol=1e-10, atol=1e-12 * (1 + np.abs(w).max()))
            for g, w in zip(got, want)
        )
        bad += not ok
        took = time.perf_counter() - start
        print(f"{case.workload:16s} {'compiled' if ok else 'WRONG'} ({took:.1f} s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
