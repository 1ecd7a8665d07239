"""Time and peak memory of s2sad's gradient against its primal on 10^5-step loops, then the
taped gradient of a long Euler loop against the same loop under s2sad.checkpoint.

    python benchmarks/tape_memory.py [--steps 1000000] [--skip-short] [--no-jit]

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
from s2sad.checkpointing import LAST, default_snapshots  # noqa: E402


def euler(y0, k, n):
    y = y0
    for i in range(n):
        y = y + 0.01 * (-k * y + np.sin(y))
    return y


def euler_checkpointed(y0, k, n, snaps):
    y = y0
    for i in s2sad.checkpoint(range(n), snapshots=snaps):
        y = y + 0.01 * (-k * y + np.sin(y))
    return y


def recurrence(x, a):
    y = np.zeros_like(x)
    y[0] = x[0]
    for i in range(1, x.shape[0]):
        y[i] = a * y[i - 1] + x[i]
    return np.sum(y)


def measure(f, *args, repeat=3):
    f(*args)  # warm up (and transform, for gradients)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        f(*args)
        best = min(best, time.perf_counter() - start)
    tracemalloc.start()
    f(*args)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return best, peak


def checkpointed_table(n: int, jit: bool) -> None:
    """The taped gradient of n Euler steps against the checkpointed one, at a few snapshot
    counts (None: s2sad's default, about (2n)^(1/3) states and a taped segment as long, 64 times
    longer under jit; each step then runs forward at most 4 times: the primal, 2 recomputations,
    the taped one)."""
    mode = "jit=True" if jit else "Python"
    print(
        f"\n{'euler, ' + format(n, '.0e') + ' steps, ' + mode:38s} {'time':>9s} {'x taped':>8s} "
        f"{'peak':>10s} {'states':>7s} {'tape':>7s} {'steps run':>10s}"
    )
    args = (0.3, 0.8, n)
    taped, taped_peak = measure(s2sad.grad(euler, wrt=(0, 1), jit=jit), *args, repeat=2)
    print(f"{'taped':38s} {taped:7.2f} s {1:8.2f} {taped_peak / 1e6:7.2f} MB {0:7d} {n:7d} {n:10d}")
    for snaps in (None, 20):
        grad = s2sad.grad(euler_checkpointed, wrt=(0, 1), jit=jit)
        t, peak = measure(grad, *args, snaps, repeat=2)
        used = default_snapshots(n, jit) if snaps is None else snaps
        label = f"checkpoint(snapshots={snaps})" + (f" = {used}" if snaps is None else "")
        print(
            f"{label:38s} {t:7.2f} s {t / taped:8.2f} {peak / 1e6:7.2f} MB {LAST.most_saved:7d} "
            f"{LAST.segment:7d} {n + (LAST.advances + LAST.adjoints) * LAST.segment:10d}"
        )


def main():
    steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 10**6
    if "--skip-short" not in sys.argv:
        short_table()
    checkpointed_table(steps, jit=False)
    if "--no-jit" not in sys.argv:
        checkpointed_table(steps, jit=True)


def short_table():
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
