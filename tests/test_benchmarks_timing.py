"""The runner's timing loop (benchmarks/runner/timing.py) and its own cost ledger
(benchmarks/runner/cost.py): every round starts with the last round's garbage collected, the
objects alive before the rounds are frozen only while they run, and the ledger records each
entry's first call and timed calls. No time is asserted, only what is recorded and collected.

The checks of the collector run in a fresh interpreter, all in one: a full collection looks at
every object alive, and in a worker of the suite (millions of objects: Numba's compiled code)
each took seconds, several a check."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import traceback
import weakref
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.runner.cost import Ledger, summary  # noqa: E402
from benchmarks.runner.timing import Entry, time_interleaved, warm_up  # noqa: E402


class _Node:
    def __init__(self):
        self.me = self  # a reference cycle: only the cyclic collector frees it


def _cycle_maker(seen: list):
    """A callable that leaves a reference cycle behind at each call and records whether the
    one its previous call left had been freed by then."""
    last = []

    def run():
        if last:
            seen.append(last[-1]() is None)
        node = _Node()
        last.append(weakref.ref(node))

    return run


def _each_round_starts_with_the_last_rounds_garbage_collected():
    seen: list = []
    entries = [Entry("cycles", _cycle_maker(seen)), Entry("other", lambda: None)]
    old = _Node()  # alive before the rounds (frozen during them), garbage after them
    probe = weakref.ref(old)
    ledger = Ledger()
    time_interleaved(entries, budget=1e9, min_reps=4, max_reps=4, ledger=ledger)
    assert len(entries[0].times) == len(entries[1].times) == 4
    assert seen == [True, True, True]  # the cycle of each call was freed before the next
    assert gc.get_freeze_count() == 0  # unfrozen again
    del old
    gc.collect()
    assert probe() is None  # what was frozen is collectable again
    assert set(ledger.as_dict()) == {"gc between rounds"}


def _a_failing_timed_call_still_unfreezes():
    def boom():
        raise RuntimeError("boom")

    entry = Entry("boom", boom)
    try:
        time_interleaved([entry], budget=0.0, min_reps=1, max_reps=1)
    except RuntimeError:
        pass
    else:
        raise AssertionError("the timed call's error was swallowed")
    assert gc.get_freeze_count() == 0


def _kept_frozen_the_next_cases_collections_skip_what_was_alive_until_the_run_ends():
    old = _Node()  # alive before the rounds: kept frozen after them (run.py's cases)
    probe = weakref.ref(old)
    try:
        time_interleaved([Entry("x", lambda: None)], 1e9, 2, 2, keep_frozen=True)
        assert gc.get_freeze_count() > 0
        del old
        gc.collect()
        assert probe() is not None  # frozen: not looked at
    finally:
        gc.unfreeze()  # (run.py's end)
    gc.collect()
    assert probe() is None


COLLECTOR_CHECKS = [
    _each_round_starts_with_the_last_rounds_garbage_collected,
    _a_failing_timed_call_still_unfreezes,
    _kept_frozen_the_next_cases_collections_skip_what_was_alive_until_the_run_ends,
]


def _run_collector_checks() -> None:
    """Each check's name and its traceback ("" where it passed), as JSON on stdout."""
    verdicts = {}
    for check in COLLECTOR_CHECKS:
        try:
            check()
            verdicts[check.__name__] = ""
        except BaseException:
            verdicts[check.__name__] = traceback.format_exc()
    print(json.dumps(verdicts))


@pytest.fixture(scope="module")
def collector_verdicts():
    here = Path(__file__).resolve().parent
    code = f"import sys; sys.path.insert(0, {str(here)!r})\n"
    code += "import test_benchmarks_timing as t; t._run_collector_checks()"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


@pytest.mark.parametrize("check", COLLECTOR_CHECKS, ids=lambda c: c.__name__[1:])
def test_the_collector(check, collector_verdicts):
    assert collector_verdicts[check.__name__] == "", collector_verdicts[check.__name__]


def test_the_ledger_sums_phases_and_the_summary_lists_them():
    ledger = Ledger()
    with ledger.phase("setup"):
        sum(range(1000))
    with ledger.phase("setup"):
        pass
    entry = Entry("primal", lambda: sum(range(1000)))
    warm_up(entry)
    assert entry.first_s > 0 and entry.first_cpu_s >= 0 and entry.error is None
    ledger.add("first call: primal", entry.first_s, entry.first_cpu_s)
    ledger.add("first call: primal", 1.0, 0.5)
    spent = ledger.as_dict()
    assert list(spent) == ["setup", "first call: primal"]
    assert spent["first call: primal"]["wall_s"] == entry.first_s + 1.0
    assert spent["first call: primal"]["cpu_s"] == entry.first_cpu_s + 0.5
    row = {"workload": "w", "size": "n=1", "run_cost": spent}
    text = summary([row], [3.0], total=4.0)
    assert "4.0 s in all, 1.0 s before the first case" in text
    assert "w n=1: 3.0 s" in text and "first call: primal" in text
    assert "setup" not in text  # under the 0.5 s shown
