"""What loops that run on threads call (`parallel=True`: pipeline/parallel.py), in the form
Python mode runs: `prange` is `range`, and there is one thread, number 0. Jitted code has
Numba's `prange` and `get_thread_id` instead, and a `thread_count` giving the most threads Numba
runs in the process (NUMBA_NUM_THREADS; jit.module_text), so the same source runs in both (and a
jitted function that falls back to Python runs these)."""

prange = range


def thread_count() -> int:
    """The rows of a loop's per-thread partial sums: one, in Python."""
    return 1


def get_thread_id() -> int:
    """The row of the partial sums this thread adds into: 0, in Python."""
    return 0
