"""Functions in the spirit of Google Tangent's test corpus (its tests/functions.py), rewritten:
scalar arguments `a`, `b`, `c`, an integer trip count `n`, vectors `x`. Run by
tests/test_peer_suites.py against finite differences, autograd and JAX.

Each entry of CASES is (function, arguments maker, wrt, kind): kind is "grad" for a scalar
output and "vjp" otherwise; `pure` functions (no in-place writes) also run under autograd.
"""

import numpy as np


def identity(a):
    return a


def negate(a):
    return -a


def total(x):
    return np.sum(x)


def total_of_array(x):
    return np.sum(np.array(x))


def rebind_to_sum(x):
    x = np.sum(x)
    x = x * x
    return x


def tanh_of(a):
    return np.tanh(a)


def alias(a):
    b = a
    return b


def plus_one(a):
    return a + 1


def axpy(a, b, c):
    return a * b + c


def times(a, b):
    return a * b


def plus(a, b):
    return a + b


def axpy_by_calls(a, b, c):
    return plus(times(a, b), c)


def axpy_in_steps(a, b, c):
    prod = a * b
    res = prod + c
    return res


def axpy_rebound(a, b, c):
    t = a * b
    t = t + c
    return t


def named_like_an_adjoint(a):
    da = a * a
    return da


def rebind_in_branches(a):
    if a > 0:
        a = a * 3.0
    else:
        a = a * 2.0
    return a


def binops(a):
    return (a * 3.0 + 3.0 * a + a * a + a / 3.0 + 3.0 / a + a / a) * (a - 3.0 + 3.0 - a + a - a)


def binop_terms(a):
    return a * 3.0 + 3.0 * a + a * a + a / 3.0 + 3.0 / a + a / a + a - 3.0 + 3.0 - a + a + a


def nested_branches(a):
    if a > 0:
        if a < 10:
            a = a * a
    else:
        a = 3.0 * a
    return a


def tangled_branches(a):
    if a * a / 3.0 > 0:
        b = 3.0
    else:
        b = 4.0
    a = a * b
    if a < b - a * b:
        a = a * a
    elif a > b + 3.0 * a:
        if a / 2.0 < 0:
            a = a / b
        else:
            a = a * b
    else:
        a = -a
    return a


def np_multiply(a):
    return np.multiply(a, 3.0)


def two_results(a):
    return 2 * a, a


def sum_of_list(a):
    parts = [1, a * a, 2]
    return np.sum(parts)


def sum_of_list_of_elements(x):
    parts = [1, x[0] * x[1] * x[2], 3]
    return np.sum(parts)


def product_of_elements(x):
    first = x[0]
    second = x[1]
    return first * second


def write_element(x):
    first = x[0]
    second = x[1]
    x[0] = first * second
    return np.sum(x)


def write_element_of_square(x):
    y = x**2.0
    x[0] = y[1] * y[2]
    return np.sum(x * y)


def list_element(a):
    vals = [1.0, a, 3.0]
    return vals[0] * vals[1]


def branches_in_series(a):
    if a > 0:
        a = a * a
    a = a + a
    if a < 0:
        a = 3.0 * a
    return a


def compare_arguments(a, b):
    if a > b:
        a = a * a
    else:
        a = a * b
    return a


def loops_in_series(a, n):
    for i in range(n):
        a = a * a
    a = 2.0 * a
    for i in range(n + 1):
        a = a * 3.0
    return a


def branch_then_loop(a, n):
    if a > 0:
        a = a * a
    a = 2.0 * a
    for i in range(n):
        a = a * a
    return a


def loop_then_branch(a, n):
    for i in range(n):
        a = a * a
    a = 2.0 * a
    if a > 0:
        a = a * a
    return a


def nested_branch_rebinds(a):
    if a > 0:
        a = a * 3.0
        if a < 10:
            a = a * a
        else:
            a = a * 2.0
    return a


def elif_chain(a):
    if a > 0:
        a = a * 3.0
    elif 0 > a:
        a = a * 2.0
    else:
        a = 1.0 * a
    return a


def rebind_argument(a):
    a = a * 3.0
    return a


def rebind_copy(a):
    b = a
    b = b * 3.0
    return b


def cube_by_products(a):
    return a * a * a


def cube_by_power(a):
    return a**3


def cube_by_loop(a):
    out = 1
    for i in range(3):
        out = out * a
    return out


def cube_by_loop_from_a(a):
    out = a
    for i in range(3 - 1):
        out = out * a
    return out


def repeated_squares(a):
    for i in range(3):
        a = a * a
    return a


def repeated_squares_n(a, n):
    for i in range(n):
        a = a * a
    return a


def branch_in_loop(a):
    for i in range(3):
        if a < 20:
            a = a * a
    return a


def loop_in_branch(a):
    if a < 20:
        for i in range(3):
            a = a * a
    return a


def nested_loops(a):
    for i in range(2):
        for j in range(3):
            a = a * a
    return a


def cubes_in_loop(a):
    for i in range(3):
        a = a * a * a
    return a


def mean_of(x):
    return np.mean(x)


def exp_of(a):
    return np.exp(a)


def exp_of_exp(a):
    return np.exp(np.exp(a))


def sqrt_of(a):
    return np.sqrt(a)


def logistic_regression(inputs, label, W, b):
    h1 = np.dot(inputs, W) + b
    prediction = 0.5 * (np.tanh(h1) + 1)
    label_probabilities = prediction * label + (1 - prediction) * (1 - label)
    return -np.sum(np.log(label_probabilities))


def _inner(a, b):
    return a * b


def call_helper(a, b):
    return _inner(a, b)


def call_helper_in_branches(a, b):
    if a > b:
        o = _inner(a, b)
    else:
        o = _inner(b, a)
    return o


def call_helper_in_loop(a, n):
    for i in range(n):
        a = _inner(a, a)
    return a


def call_through_two(a, b):
    return call_helper(a, b)


def local_def_in_loop(a, n):
    def scale(u, v):
        return u * v

    for i in range(n):
        a = scale(a, a)
    return a


def unpack_tuple(abc):
    a, b, c = abc
    return a * b + c


def dict_axpy(val):
    return val["a"] * val["b"] + val["c"]


def dict_from_tuple(abc):
    a, b, c = abc
    return dict_axpy(dict(a=a, b=b, c=c))


def pick_from_tuple(a, b, c, i):
    packed = a, b, c
    return packed[i]


def first_of_tuple(abc):
    a, b, c = abc
    return a


def cart2polar(a, b):
    r = np.sqrt(a**2.0 + b**2.0)
    theta = np.arctan2(b, a)
    return r, theta


def sum_of_comprehension(x):
    return np.sum([v * 3 for v in x])


def halve_while_big(a):
    while np.abs(a) > 0.1:
        a = a * 0.5
    return a


def copy_by_elements(x):
    y = np.zeros_like(x)
    for i in range(len(x)):
        y[i] = x[i]
    return np.sum(y)


def broadcast_rows(x):
    h = np.zeros((len(x), 3))
    for t in range(len(h)):
        h[t] = x[t]
    return np.sum(h)


def tail_sum(x):
    return np.sum(x[1:])


def rnn(inputs, W):
    h = np.zeros((4, 3))
    for t in range(3):
        h[t + 1] = np.dot(inputs[t], W) + h[t]
    return np.sum(h[1:])


def augmented_multiply(a):
    x = a * a
    x *= x
    return x


def bilinear(x, h, U, W, b):
    y = np.dot(x, W)
    y = y + np.dot(h, U)
    y = y + b
    y = np.tanh(y)
    return np.sum(y)


def power_of(a, b):
    a = a**b
    return a


def square_twice(a):
    a = a * a
    y = a * a
    return y


def chain_of_squares(a):
    b = a
    b = a * a
    c = b * b
    d = c * c
    return d


def chain_of_square_calls(a):
    b = times(a, a)
    c = times(b, b)
    d = times(c, c)
    return d


def nested_dict(p):
    return p["i"]["j"] * p["i"]["k"]


def strided_newaxis(x):
    return np.sum(x[::2, np.newaxis])


# the TensorFlow-eager functions of the same corpus, in NumPy
def expand_front(t):
    return np.expand_dims(t, 0)


def expand_back(t):
    return np.expand_dims(t, 1)


def squeeze_expanded(t):
    return np.squeeze(np.expand_dims(t, 1), 1)


def flat(t):
    return np.reshape(t, (-1,))


def reshape_round_trip(t):
    return np.reshape(np.reshape(t, (-1,)), t.shape)


def reduce_sum_keep(t):
    return np.sum(t, axis=None, keepdims=True)


def reduce_mean_axes(t):
    return np.mean(t, axis=(0, 1, 2), keepdims=True)


def reduce_max_axes(t):
    return np.max(t, axis=(0, 1, 2))


def squared_difference(t1, t2):
    return (t1 - t2) ** 2


def maximum_of(t1, t2):
    return np.maximum(t1, t2)


def rsqrt(t):
    return 1.0 / np.sqrt(t)


def matmul_transposed(m1, m2):
    return np.matmul(m1.T, m2.T)


def batched_matmul_transposed(t1, t2):
    return np.matmul(np.swapaxes(t1, -1, -2), t2)
