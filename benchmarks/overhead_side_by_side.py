"""The per-call cost of s2sad's wrapper around a jitted gradient: `s2sad.grad(f, jit="strict")`
(and value_and_grad) called as a user calls it, beside the Numba function it runs called
directly with the same arguments (what the wrapper adds: binding, the transform for the
arguments' kinds, the data read, result types, gradients made the caller's own), on a tiny
function and on stencil-loops (N=200). CPU time a call, best and median over rounds, one
thread, in one process (side_by_side.py).

    PYTHONPATH=. python benchmarks/overhead_side_by_side.py [--rounds 15]
"""

from __future__ import annotations

import argparse

from benchmarks.side_by_side import one_thread, rounds

one_thread(numba=True)

import numpy as np  # noqa: E402

import s2sad  # noqa: E402
from s2sad.jit import Jitted  # noqa: E402
from benchmarks.workloads.loops import stencil_inputs, stencil_loops  # noqa: E402


def tiny(x):
    return np.sum(x * x)


def direct(transformed, args):
    """The Numba function a call of `transformed` on `args` runs, and the arguments it takes."""
    bound = transformed._bind(args, {})
    compiled, values = transformed.prepared(bound)
    full = (*bound.arguments.values(), *values)
    return Jitted.of(compiled).namespace[compiled.name], full


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    count = parser.parse_args().rounds
    inputs = stencil_inputs(200)
    cases = {
        "tiny": (tiny, (np.array([1.0, 2.0, 3.0]),), 20000),
        "stencil-loops": (stencil_loops, (inputs["u"], inputs["k"]), 200),
    }
    print("microseconds a call (best / median); wrapper = s2sad's best - Numba's best")
    for label, (f, args, calls) in cases.items():
        for mode in ("grad", "value_and_grad"):
            transformed = getattr(s2sad, mode)(f, jit="strict")
            transformed(*args)  # compiles
            dispatcher, full = direct(transformed, args)
            times = rounds(
                {"numba": lambda: dispatcher(*full), "s2sad": lambda: transformed(*args)},
                count,
                calls,
            )
            best = {k: min(v) * 1e6 for k, v in times.items()}
            median = {k: sorted(v)[len(v) // 2] * 1e6 for k, v in times.items()}
            print(
                f"{label:14s} {mode:15s} numba {best['numba']:8.2f} / {median['numba']:8.2f}"
                f"   s2sad {best['s2sad']:8.2f} / {median['s2sad']:8.2f}"
                f"   wrapper {best['s2sad'] - best['numba']:6.2f}"
            )


if __name__ == "__main__":
    main()
