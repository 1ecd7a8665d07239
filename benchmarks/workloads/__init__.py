"""The benchmark workloads, one module per family. `all_cases(mode)` lists them in table order;
mode is "smoke" (tiny sizes, for the tests), "quick" or "full"."""

from __future__ import annotations

from . import ba, gb_arrays, gb_ht, gb_nested, gmm, loops, lstm, mlp
from .common import PEERS, Case

FAMILIES = (gmm, lstm, mlp, ba, loops, gb_arrays, gb_ht, gb_nested)


def all_cases(mode: str) -> list[Case]:
    if mode not in ("smoke", "quick", "full"):
        raise ValueError(f"mode must be smoke, quick or full, not {mode!r}")
    return [case for family in FAMILIES for case in family.cases(mode)]


def workload_names() -> list[str]:
    names = []
    for case in all_cases("smoke"):
        if case.workload not in names:
            names.append(case.workload)
    return names


__all__ = ["Case", "PEERS", "FAMILIES", "all_cases", "workload_names"]
