"""Functions in the spirit of JAX's NumPy gradient tests (lax_numpy_test.py's grad records and
special values), rewritten: inverse hyperbolic functions, sinc at 0, and logaddexp/logaddexp2 of
broadcasting operands, to second order. Run by tests/test_peer_suites.py.
"""

import numpy as np


def arcsinh_sum(x):
    return np.sum(np.arcsinh(x))


def arccosh_sum(x):
    return np.sum(np.arccosh(x))


def arctanh_sum(x):
    return np.sum(np.arctanh(x))


def sinc_sum(x):
    return np.sum(np.sinc(x))


def logaddexp_sum(x, y):
    return np.sum(np.logaddexp(x, y) ** 2)


def logaddexp2_sum(x, y):
    return np.sum(np.logaddexp2(x, y) ** 2)
