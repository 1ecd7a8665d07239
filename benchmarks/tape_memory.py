"""Time and peak memory of s2sad's gradient against its primal on 10^5-step loops.

    python benchmarks/tape_memory.py

The tape holds only what the adjoint reads: for the scalar Euler step that is the state `y`,
one float per step; for the recurrence with an in-place write, y[i - 1] per step.
"""

from __future__ import annotations

import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import s2sad  # noqa: E402


def euler(y0, k, n):
    y = y0
    for i in range(n):
        y = y + 0.01 * (-k * y + np.sin(y))
    return y


def recurrence(x, a):
    y = np.zeros_like(x)
    y[0] = x[0]
    for i in range(1, x.shape[0]):
        y[i] = a * y[i - 1] + x[i]
    return np.sum(y)


def measure(f, *args):
    f(*args)  # warm up (and transform, for gradients)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        f(*args)
        best = min(best, time.perf_counter() - start)
    tracemalloc.start()
    f(*args)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return best, peak


def main():
    n = 100_000
    x = np.random.default_rng(0).normal(size=n) * 0.1
    rows = [
        ("euler, 1e5 steps", euler, (0.3, 0.8, n), (0, 1)),
        ("recurrence y[i] = a*y[i-1] + x[i], 1e5", recurrence, (x, 0.9), (0, 1)),
    ]
    print(
        f"{'loop':42s} {'primal':>10s} {'gradient':>10s} {'ratio':>6s} "
        f"{'primal peak':>12s} {'gradient peak':>14s} {'tape/step':>10s}"
    )
    for label, f, args, wrt in rows:
        tp, mp = measure(f, *args)
        tg, mg = measure(s2sad.grad(f, wrt=wrt), *args)
        print(
            f"{label:42s} {tp * 1e3:8.1f} ms {tg * 1e3:8.1f} ms {tg / tp:6.1f} "
            f"{mp / 1e6:9.2f} MB {mg / 1e6:11.2f} MB {(mg - mp) / n:7.1f} B"
        )


if __name__ == "__main__":
    main()
