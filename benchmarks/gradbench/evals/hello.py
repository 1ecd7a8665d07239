"""gradbench's `hello` eval: `square` is x * x on a float, `double` its derivative (2x), taken
by s2sad.grad."""

from __future__ import annotations

import s2sad


def square(x):
    return x * x


FUNCTIONS = ("square", "double")


def prepare(function: str, input, jit: bool):
    x = float(input)
    if function == "square":
        return lambda: square(x)
    if function == "double":
        double = s2sad.grad(square, jit=jit)
        double(x)  # transform (and compile) before the timed runs
        return lambda: double(x)
    raise ValueError(f"the hello eval has no function {function!r}")


def output(function: str, result) -> float:
    return float(result)
