"""A nested def or lambda that reads a differentiated value of its enclosing function, called in
a loop of that function: what the loop assigns from the call varies from the first iteration
(the call reads the closure, whose free names carry the derivative), so the body is flattened
with it split out. It was an internal error ("the operator Mult has a differentiated operand
nested in an expression") where the loop itself read nothing differentiated (new-user trial).
Each gradient is compared with central differences (conftest)."""

import numpy as np
import pytest

from conftest import check_grad, load_module

CLOSURES = """
import numpy as np

def def_in_for(omega, y0):
    def rot(y):
        return np.array([y[1], -y[0]]) * omega
    y = y0
    for i in range(2):
        y = y + rot(y)
    return np.sum(y ** 2)

def lambda_in_for(omega, y0):
    rhs = lambda y: np.array([y[1], -omega * y[0]])
    y = y0
    for i in range(2):
        y = y + 0.1 * rhs(y)
    return np.sum(y)

def def_in_while(omega, y0):
    def rhs(y):
        return np.array([y[1], -omega * y[0]])
    y = y0
    k = 0
    while k < 3:
        y = y + 0.1 * rhs(y)
        k += 1
    return np.sum(y * y)

def two_deep(omega, y0):
    def inner(y):
        return np.sin(y * 2.0) * omega
    def outer(y):
        return np.sin(inner(y)) + y
    y = y0
    for i in range(2):
        y = y + 0.1 * outer(y)
    return np.sum(y)

def def_inside_the_loop(omega, y0):
    y = y0
    for i in range(2):
        def step(v):
            return v * np.cos(omega)
        y = y + 0.5 * step(y)
    return np.sum(y)

def closure_of_a_value_the_loop_changes(omega, y0):
    s = 1.0
    def scale(v):
        return v * s
    y = y0
    for i in range(3):
        y = y + 0.5 * scale(y)
        s = s * omega
    return np.sum(y)
"""

CASES = [
    "def_in_for",
    "lambda_in_for",
    "def_in_while",
    "two_deep",
    "def_inside_the_loop",
    "closure_of_a_value_the_loop_changes",
]


@pytest.mark.parametrize("name", CASES)
def test_loop_calling_a_closure_of_a_differentiated_value(tmp_path, name):
    module = load_module(tmp_path, "closure_loops", CLOSURES)
    check_grad(getattr(module, name), (0.9, np.array([1.0, 2.0])))
