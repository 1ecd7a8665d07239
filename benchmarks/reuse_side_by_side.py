"""NumPy-mode gradients with and without buffer reuse (pipeline/reuse.py), side by side in one
process, on one BLAS thread: each round calls both once, in alternating order, and the table
shows each one's best and median CPU time over the rounds (a shared machine's drift hits both
alike).

    python benchmarks/reuse_side_by_side.py                 # stencil, mlp, gmm (quick sizes)
    python benchmarks/reuse_side_by_side.py stencil --rounds 30
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.side_by_side import best_and_median, one_thread, rounds  # noqa: E402

one_thread()

import numpy as np  # noqa: E402

from benchmarks.workloads import gmm, loops, mlp  # noqa: E402
from s2sad.transformed import Transformed  # noqa: E402


def _cases(only):
    for case in loops.cases("quick") + mlp.cases("quick") + gmm.cases("quick"):
        if case.workload in only:
            yield case


def _label(case) -> str:
    sizes = " ".join(f"{k}={v}" for k, v in case.size.items())
    return f"{case.workload} {sizes}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("only", nargs="*", default=["stencil", "mlp", "gmm"])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    print(f"{'case':<48} {'fresh best':>11} {'reuse best':>11} {'ratio':>6} {'medians':>17}")
    for case in _cases(args.only):
        label, f, inputs, wrt = _label(case), case.numpy_f, case.make_inputs(**case.size), case.wrt
        values = list(inputs.values())
        fresh = Transformed(f, wrt, "grad")
        reused = Transformed(f, wrt, "grad", reuse=True)
        a, b = fresh(*values), reused(*values)
        a, b = (a, b) if isinstance(a, tuple) else ((a,), (b,))
        same = all(np.array_equal(x, y) for x, y in zip(a, b))
        times = rounds(
            {"fresh": lambda: fresh(*values), "reused": lambda: reused(*values)}, args.rounds
        )
        (best0, med0), (best1, med1) = (best_and_median(t) for t in times.values())
        note = "" if same else "  (numbers differ!)"
        print(
            f"{label:<48} {best0:>9.2f}ms {best1:>9.2f}ms {best1 / best0:>6.2f} "
            f"{med0:>7.2f}/{med1:<7.2f}ms{note}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
