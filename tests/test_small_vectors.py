"""NumPy mode's small vectors (pipeline/small_vectors.py, rules/element_adds.py): the RK4 step's
`y[0]`, `y[1]`, `y[1]` reads' cotangents make one array of zeros, not one each and a sum each,
and its `np.array([a, b])` of numbers stays np.array, not np.stack. The numbers must be those
of finite differences, and `getitem_added` those of the sum it stands for wherever it cannot
add in place."""

import numpy as np
import pytest

import s2sad
from conftest import check_grad
from s2sad.rules.element_adds import getitem_added
from s2sad.rules.indexing import getitem_vjp


def heun(theta, y0, h, n):
    omega, zeta = theta[0], theta[1]
    rhs = lambda y: np.array([y[1], -2.0 * zeta * omega * y[1] - omega**2 * y[0]])  # noqa: E731
    y = y0
    for _ in range(n):
        k1 = rhs(y)
        k2 = rhs(y + h * k1)
        y = y + 0.5 * h * (k1 + k2)
    return np.sum(y**2) + y[0] * y[1]


def test_an_rk_steps_element_reads_add_into_one_array():
    args = (np.array([1.8, 0.15]), np.array([1.0, -0.3]), 0.05, 6)
    src = s2sad.source(s2sad.grad(heun, wrt=(0, 1)), *args)
    assert "getitem_added(" in src and "+ getitem_vjp(" not in src
    assert "np.stack(" not in src and "k1 = np.array([" in src  # (a vector of numbers)
    check_grad(heun, args, wrt=(0, 1))
    # jitted code adds into its array by add_at, and never calls it
    assert "getitem_added(" not in s2sad.source(s2sad.grad(heun, jit=True), *args)


@pytest.mark.parametrize(
    "dx, g, x, index",
    [
        (np.zeros(3), np.float64(2.0), np.ones(3), 1),  # in place
        (np.zeros(3), 2.0, np.ones(3), -1),  # in place, a Python float
        (np.zeros(3, np.float32), np.float64(2.0), np.ones(3, np.float32), 1),  # widened
        (np.zeros(3, np.float32), 2.0, np.ones(3, np.float32), 0),  # float64 as getitem_vjp's
        (np.zeros((2, 3)), np.arange(3.0), np.ones((2, 3)), 1),  # a row
        (np.zeros(3), np.float64(2.0), np.ones(3), np.array([0, 0])),  # repeated, not an int
        (np.zeros((1, 3)), np.float64(2.0), np.ones(3), 1),  # broadcast by the sum
        (np.zeros(3, np.float32), np.float32(2.0), np.ones(3), 2),  # x wider than dx
    ],
)
def test_getitem_added_is_the_sum_it_stands_for(dx, g, x, index):
    expected = dx + getitem_vjp(g, x, index)
    got = getitem_added(dx.copy(), g, x, index)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)
