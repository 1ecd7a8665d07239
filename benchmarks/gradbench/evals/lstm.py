"""gradbench's `lstm` eval (ADBench's diagonal LSTM; the model is benchmarks/workloads/lstm.py's
`lstm_objective`, a Python loop over time steps and layers). Input: `main_params` (2l, 4b),
`extra_params` (3, b), `state` (2l, b), `sequence` (c, b). `objective` is the loss (a float);
`jacobian` its gradient with respect to main_params and extra_params, each flattened row by row,
concatenated (a list)."""

from __future__ import annotations

import numpy as np

import s2sad
from benchmarks.workloads.lstm import lstm_objective

FUNCTIONS = ("objective", "jacobian")


def parse(input: dict) -> tuple:
    names = ("main_params", "extra_params", "state", "sequence")
    return tuple(np.asarray(input[name], dtype=np.float64) for name in names)


def prepare(function: str, input: dict, jit: bool):
    args = parse(input)
    if function == "objective":
        return lambda: lstm_objective(*args)
    if function == "jacobian":
        grad = s2sad.grad(lstm_objective, wrt=("main_params", "extra_params"), jit=jit)
        grad(*args)  # transform (and compile) before the timed runs
        return lambda: grad(*args)
    raise ValueError(f"the lstm eval has no function {function!r}")


def output(function: str, result):
    if function == "objective":
        return float(result)
    return np.concatenate([np.ravel(g) for g in result]).tolist()
