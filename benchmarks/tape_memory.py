"""Time and peak memory of s2sad's gradient against its primal on 10^5-step loops, then the
taped gradient of a long loop against the same loop under s2sad.checkpoint (issue #17's goal 5:
a 10^7-step loop's gradient in O(sqrt n) or O(log n) states within 3x the taped time).

    python benchmarks/tape_memory.py [--steps 1000000] [--array-steps 100000] [--array-size 100]
                                     [--skip-short] [--skip-array] [--no-jit]

The tape holds only what the adjoint reads: for the scalar Euler step that is the state `y`,
one float per step; for the recurrence with an in-place write, y[i - 1] per step; for the
Euler step over an array state, that array per step, which is where checkpointing matters.

The checkpointed tables compare, for each loop and mode (Python, jit=True): the taped gradient;
s2sad.checkpoint with its default snapshots (about (2n)^(1/3) states: O(n^(1/3)), within
O(sqrt n)); and with k = ceil(log2 n) snapshots (O(log n) states). `states` is the most states
revolve held at once, `tape` the steps of the one segment taped at a time, `steps run` every
forward step the gradient ran (the primal's n included), `≤3x` whether it kept within 3x the
taped gradient's time. Peak memory is tracemalloc's peak over one call of the gradient (NumPy's
arrays included; the jitted tapes' arrays show in it too). Times are the best of 2 after a
warm-up call that transforms and compiles.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import s2sad  # noqa: E402
from s2sad.checkpointing import LAST, default_snapshots  # noqa: E402

TARGET = 3.0  # the checkpointed gradient's time over the taped one, at most


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


def euler_array(y0, k, n):
    """The same step over an array state (k an array too): the tape holds an array a step."""
    y = y0
    for i in range(n):
        y = y + 0.01 * (-k * y + np.sin(y))
    return np.sum(y)


def euler_array_checkpointed(y0, k, n, snaps):
    y = y0
    for i in s2sad.checkpoint(range(n), snapshots=snaps):
        y = y + 0.01 * (-k * y + np.sin(y))
    return np.sum(y)


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


def checkpointed_table(label: str, taped_f, checkpointed_f, args: tuple, jit: bool) -> list:
    """The taped gradient of `taped_f(*args)` against `checkpointed_f(*args, k)` at the
    default k and at k = ceil(log2 n) (n = args[2], the steps). Prints the table and returns
    its rows as (what, seconds, ratio to taped, peak bytes, states)."""
    n = args[2]
    mode = "jit=True" if jit else "Python"
    head = f"{label}, {n:.0e} steps, {mode}"
    print(
        f"\n{head:44s} {'time':>9s} {'x taped':>8s} {'≤3x':>4s} {'peak':>10s} {'states':>7s} "
        f"{'tape':>7s} {'steps run':>10s}"
    )
    taped, taped_peak = measure(s2sad.grad(taped_f, wrt=(0, 1), jit=jit), *args, repeat=2)
    print(
        f"{'taped':44s} {taped:7.3f} s {1:8.2f} {'':>4s} {taped_peak / 1e6:7.2f} MB {0:7d} "
        f"{n:7d} {n:10d}"
    )
    rows = [("taped", taped, 1.0, taped_peak, 0)]
    log_k = math.ceil(math.log2(n))
    for snaps, what in ((None, "default"), (log_k, "log2 n")):
        grad = s2sad.grad(checkpointed_f, wrt=(0, 1), jit=jit)
        t, peak = measure(grad, *args, snaps, repeat=2)
        used = default_snapshots(n, jit) if snaps is None else snaps
        name = f"checkpoint(snapshots={snaps}): {what}, k = {used}"
        ratio = t / taped
        print(
            f"{name:44s} {t:7.3f} s {ratio:8.2f} {'yes' if ratio <= TARGET else 'NO':>4s} "
            f"{peak / 1e6:7.2f} MB {LAST.most_saved:7d} {LAST.segment:7d} "
            f"{n + (LAST.advances + LAST.adjoints) * LAST.segment:10d}"
        )
        rows.append((name, t, ratio, peak, LAST.most_saved))
    return rows


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


def _options(argv=None):
    parser = argparse.ArgumentParser(
        description="Time and peak memory of taped and checkpointed loop gradients."
    )
    count = lambda text: int(float(text))  # noqa: E731  (1e6 as well as 1000000)
    parser.add_argument("--steps", type=count, default=10**6, help="the long scalar loop")
    parser.add_argument("--array-steps", type=count, default=10**5, help="the array loop")
    parser.add_argument("--array-size", type=count, default=100, help="floats in its state")
    parser.add_argument("--skip-short", action="store_true", help="no 10^5-step table")
    parser.add_argument("--skip-array", action="store_true", help="no array-state loop")
    parser.add_argument("--no-jit", action="store_true", help="Python mode only")
    return parser.parse_args(argv)


def main():
    options = _options()
    steps, array_steps, size = options.steps, options.array_steps, options.array_size
    if not options.skip_short:
        short_table()
    modes = [False] if options.no_jit else [False, True]
    for jit in modes:
        checkpointed_table("euler", euler, euler_checkpointed, (0.3, 0.8, steps), jit)
    if not options.skip_array:
        rng = np.random.default_rng(0)
        y0, k = rng.random(size), 0.5 + rng.random(size)
        label = f"euler over {size} floats"
        for jit in modes:
            args = (y0, k, array_steps)
            checkpointed_table(label, euler_array, euler_array_checkpointed, args, jit)


if __name__ == "__main__":
    main()
