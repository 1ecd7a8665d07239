"""Functions in the spirit of autograd's test suite (tests/test_numpy.py, test_systematic.py,
test_scalar_ops.py, test_linalg.py), rewritten: one NumPy construct each, with the shapes and
arguments that suite exercises. Run by tests/test_peer_suites.py against finite differences,
autograd and JAX; the argument makers and kinds are in that file.
"""

import numpy as np

C32 = np.linspace(-1.0, 1.0, 6).reshape(3, 2)
MASK45 = (np.arange(20).reshape(4, 5) % 3) == 0


# ----------------------------------------------------------------------------- test_numpy.py


def dot(x, y):
    return np.dot(x, y)


def outer(x, y):
    return np.outer(x, y)


def max_all(x):
    return np.max(x)


def max_axis1(x):
    return np.max(x, axis=1)


def max_axis1_keep(x):
    return np.max(x, axis=1, keepdims=True)


def min_axis1_keep(x):
    return np.min(x, axis=1, keepdims=True)


def sum_axis0_keep(x):
    return np.sum(x, axis=0, keepdims=True)


def sum_axes12(x):
    return np.sum(x, axis=(1, 2))


def mean_axis0_keep(x):
    return np.mean(x, axis=0, keepdims=True)


def flipud(x):
    return np.flipud(x)


def fliplr(x):
    return np.fliplr(x)


def rot90(x):
    return np.rot90(x)


def cumsum_axis0(x):
    return np.cumsum(x, axis=0)


def cumsum_flat(x):
    return np.cumsum(x)


def builtin_sum_of_list(x, y):
    return sum([x, y])


def index_ints(x):
    return x[3, 0, 1]


def index_slices(x):
    return x[::-1, 2:4, :]


def index_list(x):
    return x[[0, 1, 2], :, :]


def index_mixed(x):
    return x[3, 2:, [1, 3]]


def slice_fanout(x):
    y = x[::-1, 2:4, :]
    z = x[::-1, 3:5, :]
    return y + z


def slice_of_slice(x):
    y = x[2:6]
    z = y[1:3]
    return z


def reshape_method(x):
    return x.reshape((5 * 4, 6))


def reshape_varargs(x):
    return x.reshape(5 * 4, 6)


def ravel_method(x):
    return x.ravel()


def flatten_method(x):
    return x.flatten()


def append_scalar(a, b):
    return np.append(a, b)


def concatenate_three(x, b):
    return np.concatenate((b, x, b), 1)


def trace_offset(x):
    return np.trace(x, offset=2)


def first_half(x):
    return np.split(x, 2)[0]


def trace_4d(x):
    return np.trace(x, offset=1)


def diag_of(x):
    return np.diag(x)


def transpose_attr(x):
    return x.T


def roll_axis1(x):
    return np.roll(x, 2, axis=1)


def triu_k2(x):
    return np.triu(x, k=2)


def tril_k2(x):
    return np.tril(x, k=2)


def clip_kw(x):
    return np.clip(x, a_min=0.1, a_max=1.1)


def prod_all(x):
    return np.prod(x)


def prod_axis0_keep(x):
    return np.prod(x, axis=0, keepdims=True)


def array_1d(x):
    return np.array([x, x * 1.0, x + 2.5])


def array_2d(x):
    return np.array([[x, x * 1.0, x + 2.5], [x**2, x, x / 2.0]])


def array_2d_fanout(x):
    A = np.array([[x, x * 1.0, x + 2.5], [x**2, x, x / 2.0]])
    return A + A


def array_of_scalar(x):
    return np.array(x)


def array_of_arrays(x):
    return np.array([[2 * x, x + 1], [x, x]])


def len_assert(x):
    assert len(x) == 3
    return x


def r_double(x):
    return np.r_[x, x]


def r_const(x):
    return np.r_[x, C32, x]


def c_const(x):
    return np.c_[x, C32, x]


def var_ddof(x):
    return np.var(x, axis=1, keepdims=True, ddof=2)


def std_ddof(x):
    return np.std(x, axis=None, keepdims=True, ddof=1)


def where_mask(x, y):
    return np.where(MASK45, x, y)


def squeeze_method(x):
    return x.squeeze()


def repeat_axis1(x):
    return np.repeat(x, 2, axis=1)


def expand_axis2(x):
    return np.expand_dims(x, 2)


def tensordot_positional(x):
    return np.tensordot(x * np.ones((2, 2)), x * np.ones((2, 2)), 2)


def repeated_index(x):
    return np.sum(x[[0, 1, 0]])


def dot_of_halves(x):
    return np.dot(x[:2], x[2:])


def cast_to_int_index(W):
    new_W = W[:, :-1]
    new_inds = np.int64(W[:, -1])
    return new_W[new_inds].sum()


def diagonal_last_axes(D):
    return np.diagonal(D, axis1=-1, axis2=-2)


def nan_to_num_shifted(x):
    y = np.array([0.0, np.nan, np.inf, -np.inf])
    return np.sum(np.sin(np.nan_to_num(x + y)))


def max_of_equal(x):
    return np.max(np.array([x, x]))


def max_equal_rows(x):
    return np.max(np.array([[x, x], [x, 0.5]]), axis=1)


def min_three_way(x):
    return np.min(np.array([[x, x, x], [x, 0.5, 0.5], [0.5, 0.5, 0.5], [x, x, 0.5]]), axis=0)


def maximum_self(x):
    return np.maximum(x, x)


def maximum_equal_2d(x):
    return np.maximum(np.array([x, x, 0.5]), np.array([[x, 0.5, x], [x, x, 0.5]]))


def linspace_5(x, y):
    return np.linspace(x, y, 5)


def astype_sin(x):
    return np.sum(np.sin(x.astype("float64")))


# ----------------------------------------------------------------------------- test_systematic.py


def transpose_axes(x):
    return np.transpose(x, (2, 0, 1))


def tensordot_axes(x, y):
    return np.tensordot(x, y, axes=[(0, 1), (1, 2)])


def tensordot_axes2(x, y):
    return np.tensordot(x, y, axes=2)


def sort_of(x):
    return np.sort(x)


def partition_of(x):
    return np.partition(x, 3)


def atleast_3d_of(x):
    return np.atleast_3d(x)


def einsum_transpose(x):
    return np.einsum("ij->ji", x)


def einsum_covsum(x, y):
    return np.einsum("ijk,lji->lki", x, y)


def einsum_ellipsis(x, y):
    return np.einsum("...jk,...lj->...lk", x, y)


def einsum_three(x, y, z):
    return np.einsum("ijk,lji,lli->lki", x, y, z)


def trace_negative_offset(x):
    return np.trace(x, offset=-1)


def remainder_of(x, y):
    return np.remainder(x, y)


def mod_operator(x, y):
    return x % y


def power_operator(x, y):
    return x**y


def logaddexp2_of(x, y):
    return np.logaddexp2(x, y)


def true_divide_of(x, y):
    return np.true_divide(x, y)


def stats(x):
    return np.max(x) + np.mean(x) + np.min(x) + np.sum(x) + np.prod(x) + np.var(x) + np.std(x)


def stats_axis(x):
    return np.var(x, axis=1) + np.std(x, axis=1, keepdims=False) + np.prod(x, axis=1)


def unary_ufuncs(x):
    y = np.sin(x) + np.cos(x) + np.tan(x) + np.sinh(x) + np.cosh(x) + np.tanh(x)
    y = y + np.exp(x) + np.exp2(x) + np.expm1(x) + np.square(x) + np.fabs(x) + np.abs(x)
    y = y + np.deg2rad(x) + np.degrees(x) / 50.0 + np.rad2deg(x) / 50.0 + np.radians(x)
    y = y + np.arcsinh(x) + np.arctanh(x / 2) + np.sign(x) + np.floor(x) + np.ceil(x)
    y = y + np.real(x) + np.imag(x) + np.conj(x) + np.absolute(x) + np.reciprocal(x)
    return y


def unary_ufuncs_positive(x):
    y = np.log(x) + np.log10(x) + np.log1p(x) + np.log2(x) + np.sqrt(x) + np.arccosh(x + 1)
    y = y + np.arcsin(x / 4) + np.arccos(x / 4) + np.arctan(x) + np.sinc(x)
    return y


def real_if_close_of(x):
    return np.real_if_close(x)


def angle_of(x):
    return np.angle(x)


# ----------------------------------------------------------------------------- test_linalg.py


def inv_of(x):
    return np.linalg.inv(x)


def solve_of(a, b):
    return np.linalg.solve(a, b)


def det_of(x):
    return np.linalg.det(x)


def slogdet_of(x):
    return np.linalg.slogdet(x)[1]


def norm_2(x):
    return np.linalg.norm(x)


def norm_fro_axis(x):
    return np.linalg.norm(x, ord="fro", axis=(0, 1))


def norm_ord(x):
    return np.linalg.norm(x, ord=3, axis=0)


def norm_nuc(x):
    return np.linalg.norm(x, ord="nuc")


def eigh_of(x):
    w, v = np.linalg.eigh(x)
    return w, v


def eigh_sym(x):
    w, v = np.linalg.eigh(x + np.swapaxes(x, -1, -2))
    return np.sum(w) + np.sum(np.abs(v[..., 0]))


def cholesky_of(x):
    return np.linalg.cholesky(x @ x.T + 3 * np.eye(x.shape[0]))


def svd_values(x):
    return np.linalg.svd(x, compute_uv=False)


def svd_vectors(x):
    u, s, vt = np.linalg.svd(x, full_matrices=False)
    return np.sum(np.abs(u)) + np.sum(s) + np.sum(np.abs(vt))


def pinv_of(x):
    return np.linalg.pinv(x)


def matrix_power_of(x):
    return np.linalg.matrix_power(x, 3)


def eig_real(x):
    return np.linalg.eig(x)[0]


# ----------------------------------------------------------------------------- test_scalar_ops.py


def scalar_unary(x):
    y = 3.0 * np.abs(x) + 3.0 * np.sin(x) + 3.0 * np.sign(x) + 3.0 * np.exp(x) + 3.0 * -x
    y = y + np.cos(x) + np.tan(x) + np.cosh(x) + np.sinh(x) + np.tanh(x) + np.arctan(x)
    y = y + np.arcsin(x / 2) + np.arccos(x / 2) + np.arcsinh(x) + np.arctanh(x / 2)
    y = y + np.reciprocal(x) + np.negative(x) + np.rad2deg(x) + np.deg2rad(x) + np.sinc(x)
    return y + np.radians(x) + np.degrees(x)


def scalar_positive(x):
    y = np.log(x) + np.log2(x) + np.log10(x) + np.log1p(x) + np.expm1(x) + np.sqrt(x)
    return y + np.arccosh(x + 1)


def scalar_binary(x, y):
    z = np.power(x, y) + np.mod(x, y) + np.divide(x, y) + np.multiply(x, y)
    return z + np.true_divide(x, y) + np.arctan2(x, y) + np.hypot(x, y)


# ----------------------------------------------------------------------------- test_wrappers.py


def power_3_2(x):
    return 3.0 * x**3.2


def sin_squared(x):
    return np.sum(np.sin(x) ** 2)


def quadratic(x, H):
    return np.dot(np.dot(x, H), x)


def many_arguments(a, b, c, d, e, f=1.1, g=9.0):
    return a + np.sin(b) + np.cosh(c) + np.cos(d) + np.tan(e) + f + g


def packed_pair(xy):
    return np.sum(xy[0] + np.sin(xy[1]))


def elementwise(a, b):
    return a + np.sin(a) + np.cosh(b)


def sum_of_sines(a):
    return np.sum(np.sin(a))


def rolled_sines(a):
    return np.roll(np.sin(a), 1)


def sum_of_squares(x):
    return np.sum(x**2)


def _affine(x, y):
    return 2 * x + y + 5


def two_affine_calls(x):
    return _affine(x, x / 3.0) + _affine(x, x**2)


def _add_all(*args):
    return sum(args)


def varargs_call(x):
    return _add_all(x, x / 3.0)


W7 = np.linspace(-1.0, 2.0, 7)


def partition_weighted(x):
    return np.sum(np.partition(x, 3) * W7) + np.sum(x[np.argpartition(x, 2)] * W7)


def _weighted(w, *terms, scale=1.0):
    total = 0.0
    for k, t in enumerate(terms):
        total = total + w[k] * np.sum(t**2)
    return scale * total + len(terms)


def varargs_loop(x, w):
    return _weighted(w, x, np.sin(x), x[:2], scale=2.0)


def _first_times_rest(*args):
    return args[0] * np.stack(args[1:])


def varargs_slice(x):
    return np.sum(_first_times_rest(x, x * 2, np.cos(x)))


def _unpacked(*args):
    a, b = args
    return a * b


def varargs_unpacked(x):
    return np.sum(_unpacked(x, np.exp(x))) + _add_all() + _add_all(1.0, 2.0)


def _options(x, **opts):
    return x * opts["a"] + opts["b"]


def kwargs_call(x):
    return np.sum(_options(x, a=x, b=2.0))
