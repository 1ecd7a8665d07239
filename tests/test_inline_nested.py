"""A helper called with another helper's result as an argument, inside a loop (`f(g(x), s)`):
which of `f`'s parameters vary in a later iteration is decided from `f`'s own arguments, not from
those of the call flattened while binding them (`g`'s), and keyword arguments are matched to the
parameters they name. Each gradient is compared with central differences (conftest)."""

import numpy as np
import pytest

from conftest import check_grad, load_module

HELPERS = """
import numpy as np

def h(v):
    return v * v

def g(x):
    return 2.0 * x

def g2(x, y):
    return x * y

def f(a, b):
    return a + h(b)

def f_loop(a, b):
    t = b
    for k in range(2):
        t = h(t) * 0.5
    return a + t

def f3(a, b, c):
    return a + h(b) + c

def nested(x):
    s = 1.0
    for i in range(3):
        s = f(g(np.sum(x)), s)
    return s

def nested_loop_in_callee(x):
    s = 1.0
    for i in range(3):
        s = f_loop(g(np.sum(x)), s)
    return s

def nested_three_parameters(x):
    s = 1.0
    for i in range(3):
        s = f3(g(np.sum(x)), s, 1.0) * 0.1
    return s

def nested_two_arguments(x):
    s = 0.5
    c = 0.3
    for i in range(3):
        s = f(g2(np.sum(x), c), s) * 0.1
    return s

K = 2

def nested_def_binds_its_own_name(x):
    def helper(v):
        K = 0
        return v * 2.0 + K
    return helper(x[K])

def nested_def_in_a_loop_binds_its_own_name(x):
    s = 0.0
    for i in range(2):
        def helper(v):
            K = 0
            return v * 3.0 + K
        s = s + helper(x[K])
    return s

def comprehension_binds_its_own_name(x):
    s = sum([x[K] * 2.0 for K in range(2)]) + sum(x[K] * 3.0 for K in range(1))
    return s + x[K]

def keywords_out_of_order(x):
    s = 0.5
    for i in range(3):
        s = f(b=s, a=0.5) * 0.1 + np.sum(x)
    return s
"""

CASES = [
    "nested",
    "nested_loop_in_callee",
    "nested_three_parameters",
    "nested_two_arguments",
    "keywords_out_of_order",
]


@pytest.mark.parametrize("name", CASES)
def test_loop_varied_parameters_of_nested_inlined_calls(tmp_path, name):
    module = load_module(tmp_path, "inline_nested", HELPERS)
    check_grad(getattr(module, name), (np.array([0.3, -0.2, 0.4]),))


@pytest.mark.parametrize(
    "name",
    [
        "nested_def_binds_its_own_name",
        "nested_def_in_a_loop_binds_its_own_name",
        "comprehension_binds_its_own_name",
    ],
)
def test_a_nested_defs_own_local_leaves_the_outer_global(tmp_path, name):
    """`K = 0` in a nested def, or `for K in` in a comprehension, binds a `K` of its own
    (Python's scoping): the outer function's `K` stays the global 2 (it was refused as a local
    read before its assignment)."""
    module = load_module(tmp_path, "inline_nested", HELPERS)
    grad = check_grad(getattr(module, name), (np.arange(1.0, 6.0),))
    expected = {
        "nested_def_binds_its_own_name": [0.0, 0.0, 2.0, 0.0, 0.0],
        "nested_def_in_a_loop_binds_its_own_name": [0.0, 0.0, 6.0, 0.0, 0.0],
        "comprehension_binds_its_own_name": [5.0, 2.0, 1.0, 0.0, 0.0],
    }[name]
    np.testing.assert_array_equal(grad, expected)
