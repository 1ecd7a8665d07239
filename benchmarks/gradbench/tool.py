"""The gradbench protocol on stdin/stdout: one JSON object a line in, one a line out.

Messages (each carries an integer `id`, which the reply repeats):

- `start` (`eval`, optional `config`): reply `{"id", "tool": "s2sad", "config": {"jit": ...}}`;
- `define` (`module`): import `benchmarks.gradbench.evals.<module>`; reply `success` (and an
  `error` saying why not, for a module we do not have);
- `evaluate` (`module`, `function`, `input`): `prepare` the eval's work (untimed), then run it
  until it has run `min_runs` times and for `min_seconds` in all (an input without them runs
  once; an older eval's `runs` counts as `min_runs`), timing each run with
  `time.perf_counter_ns`; reply `success`, `output` and `timings`, one `{"name": "evaluate",
  "nanoseconds": ...}` per run, or `success: false` with the `error`;
- `analysis` (the eval's verdict on an output): reply `{"id"}`;
- `end`: no reply; the tool exits.

`--jit` builds the derivatives with `jit=True`; `--multithreaded` leaves BLAS's and Numba's
thread counts alone (by default they are set to one, before NumPy is imported).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
import traceback

TOOL = "s2sad"
EVALS_PACKAGE = "benchmarks.gradbench.evals"
# one thread for BLAS and Numba unless --multithreaded (gradbench's tools run on one core; on a
# shared machine, BLAS threads oversubscribe: GMM's gradient ran 8x slower with them on 2 cores)
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMBA_NUM_THREADS",
)


class Tool:
    """The tool's state across one session: the configuration and the eval modules defined."""

    def __init__(self, jit: bool = False):
        self.jit = jit
        self.modules: dict[str, object] = {}

    def handle(self, message: dict) -> dict | None:
        """The reply to one message (None for `end`)."""
        kind = message.get("kind")
        reply = {"id": message.get("id")}
        if kind == "start":
            return reply | {"tool": TOOL, "config": {"jit": self.jit}}
        if kind == "define":
            return reply | self.define(message["module"])
        if kind == "evaluate":
            return reply | self.evaluate(message)
        if kind == "analysis":
            return reply
        if kind == "end":
            return None
        return reply | {"success": False, "error": f"unknown message kind {kind!r}"}

    def load(self, name: str):
        if name not in self.modules:
            if not name.isidentifier():
                raise ModuleNotFoundError(f"no eval module named {name!r}")
            self.modules[name] = importlib.import_module(f"{EVALS_PACKAGE}.{name}")
        return self.modules[name]

    def define(self, name: str) -> dict:
        try:
            self.load(name)
        except ModuleNotFoundError as e:
            if e.name not in (None, f"{EVALS_PACKAGE}.{name}"):
                return {"success": False, "error": _traceback(e)}  # a missing dependency
            return {"success": False, "error": f"s2sad has no module for the eval {name!r}"}
        except Exception as e:  # an eval module that fails to import
            return {"success": False, "error": _traceback(e)}
        return {"success": True}

    def evaluate(self, message: dict) -> dict:
        name, function, input = message["module"], message["function"], message["input"]
        if name not in self.modules:
            return {"success": False, "error": f"the eval {name!r} was not defined first"}
        module = self.modules[name]
        functions = getattr(module, "FUNCTIONS", None)
        if functions is not None and function not in functions:
            known = ", ".join(functions)
            return {
                "success": False,
                "error": f"the eval {name!r} has no function {function!r} " f"(it has {known})",
            }
        try:
            run = module.prepare(function, input, self.jit)
            result, timings = repeat(run, *runs_of(input))
            return {"success": True, "output": module.output(function, result), "timings": timings}
        except Exception as e:
            return {"success": False, "error": _traceback(e)}


def runs_of(input) -> tuple[int, float]:
    """(min_runs, min_seconds) from an evaluate message's input."""
    if not isinstance(input, dict):
        return 1, 0.0
    min_runs = input.get("min_runs", input.get("runs", 1))
    return max(int(min_runs), 1), float(input.get("min_seconds", 0.0))


def repeat(run, min_runs: int, min_seconds: float):
    """Call `run()` until it has run `min_runs` times and `min_seconds` in all: (the last result,
    the protocol's timings of every run)."""
    timings = []
    total = 0
    while len(timings) < min_runs or total < min_seconds * 1e9:
        start = time.perf_counter_ns()
        result = run()
        elapsed = time.perf_counter_ns() - start
        total += elapsed
        timings.append({"name": "evaluate", "nanoseconds": elapsed})
    return result, timings


def _traceback(e: BaseException) -> str:
    return "".join(traceback.format_exception(type(e), e, e.__traceback__))


def serve(tool: Tool, lines, write) -> None:
    """Answer each message line until `end` (or the end of the input)."""
    for line in lines:
        if not line.strip():
            continue
        message = json.loads(line)
        reply = tool.handle(message)
        if reply is None:
            return
        try:  # JSON has no NaN or Infinity: such an output is an error, not an invalid line
            text = json.dumps(reply, allow_nan=False)
        except ValueError:
            error = "the output holds NaN or Infinity, which JSON cannot carry"
            text = json.dumps({"id": message.get("id"), "success": False, "error": error})
        write(text + "\n")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.gradbench",
        description="s2sad as a gradbench tool: the protocol on stdin and stdout",
    )
    parser.add_argument(
        "--jit", action="store_true", help="compile the derivatives with Numba (s2sad's jit=True)"
    )
    parser.add_argument(
        "--multithreaded",
        action="store_true",
        help="let BLAS and Numba use their own thread counts (default: one thread, set before "
        "NumPy is imported, unless the environment sets it)",
    )
    args = parser.parse_args(argv)
    if not args.multithreaded:
        for variable in THREAD_VARIABLES:
            os.environ.setdefault(variable, "1")

    def write(text):
        sys.stdout.write(text)
        sys.stdout.flush()

    serve(Tool(jit=args.jit), sys.stdin, write)
