"""Where a run's own time goes: wall and CPU seconds by phase (building the rows with their
transform probes, each entry's first call, each entry's timed calls, the checks), so that the
runner's cost can be read per workload and per column. Kept in results.json ("run_cost") and
summed on stderr at the end of a run; it changes no reported number."""

from __future__ import annotations

import time
from contextlib import contextmanager


class Ledger:
    """Wall and CPU seconds (process time: all threads) under labels, in order of first use."""

    def __init__(self):
        self.spent: dict[str, list[float]] = {}

    def add(self, label: str, wall: float, cpu: float) -> None:
        acc = self.spent.setdefault(label, [0.0, 0.0])
        acc[0] += wall
        acc[1] += cpu

    @contextmanager
    def phase(self, label: str):
        w0, c0 = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.add(label, time.perf_counter() - w0, time.process_time() - c0)

    def as_dict(self) -> dict:
        return {k: {"wall_s": w, "cpu_s": c} for k, (w, c) in self.spent.items()}


def summary(results: list[dict], case_wall: list[float], total: float, least: float = 0.5) -> str:
    """Each case's wall time and its phases of `least` seconds or more (wall, CPU), largest
    first: the lines a run prints on stderr at its end."""
    lines = [
        f"where the run's time went (wall s, CPU s): {total:.1f} s in all, "
        f"{total - sum(case_wall):.1f} s before the first case (imports, peers, warm-up)"
    ]
    for r, total in zip(results, case_wall):
        spent = r.get("run_cost", {})
        lines.append(f"  {r['workload']} {r['size']}: {total:.1f} s")
        for label, t in sorted(spent.items(), key=lambda kv: -kv[1]["wall_s"]):
            if t["wall_s"] >= least:
                lines.append(f"      {t['wall_s']:6.1f} {t['cpu_s']:6.1f}  {label}")
    return "\n".join(lines)
