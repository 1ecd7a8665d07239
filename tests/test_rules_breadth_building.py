"""Building and splitting arrays (rules/stacking.py, rules/splitting.py): vstack, hstack, dstack,
column_stack, row_stack, append, repeat, tile, pad, split, array_split, hsplit, vsplit, dsplit,
atleast_1d/2d/3d, flipud, fliplr, rot90, rollaxis. Pullbacks and tangents against finite
differences (random shapes and axes from hypothesis), exact values, both Jacobian modes batched
against per-basis, Hessians, the jitted forms, and the refusals."""

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes

import s2sad
from conftest import check_jvp, check_vjp, rand
from test_derivatives import fd_hessian
from test_jacobian_batched import check


def r(*shape, seed=0):
    return rand(*shape, seed=seed)


# ----------------------------------------------------------------------------- joins


def vstack_list(x, y):
    return np.vstack([x, y])


def vstack_tuple(x, y):
    return np.vstack((x, y)) * 2.0


def row_stack_fn(x, y):
    return np.vstack((x, x * y))


def hstack_fn(x, y):
    return np.hstack((x, y))


def dstack_fn(x, y):
    return np.dstack((x, y))


def column_stack_fn(x, y):
    return np.column_stack((x, y))


def stack_with_constant(x):
    return np.vstack((x, np.ones(3))) * x


def append_flat(x, y):
    return np.append(x, y)


def append_axis(x, y, axis):
    return np.append(x, y, axis=axis)


def append_scalar(x, c):
    return np.append(x, c) ** 2


# ----------------------------------------------------------------------------- repeat, tile, pad


def repeat_flat(x):
    return np.repeat(x, 2)


def repeat_counts(x):
    return np.repeat(x, np.array([2, 0, 1])) * np.sum(x)


def repeat_axis(x, repeats, axis):
    return np.repeat(x, repeats, axis=axis)


def tile_fn(x, reps):
    return np.tile(x, reps)


def pad_zeros(x):
    return np.pad(x, 1)


def pad_values(x, c):
    return np.pad(x, ((1, 0), (2, 1)), constant_values=c)


def pad_edge(x, width):
    return np.pad(x, width, mode="edge")


def pad_reflect(x, width):
    return np.pad(x, width, mode="reflect")


def pad_symmetric(x, width):
    return np.pad(x, width, mode="symmetric")


def pad_wrap(x, width):
    return np.pad(x, width, mode="wrap")


def pad_constant(x, width):
    return np.pad(x, width, mode="constant")


PAD_MODES = {
    "constant": pad_constant,
    "edge": pad_edge,
    "reflect": pad_reflect,
    "symmetric": pad_symmetric,
    "wrap": pad_wrap,
}

# ----------------------------------------------------------------------------- splits, ranks, turns


def split_unpacked(x):
    a, b = np.split(x, 2)
    return a * b


def split_indexed(x, sections, axis):
    parts = np.split(x, sections, axis=axis)
    return parts[0] * 2.0 + parts[-1] ** 2


def split_three_reads(x):
    parts = np.split(x, 3, axis=1)
    return parts[0] * parts[2] + parts[1]


def array_split_ragged(x):
    a, b, c = np.array_split(x, 3)
    return np.sum(a) * np.sum(b**2) - np.sum(c)


def split_at_indices(x):
    a, b = np.split(x, [1])
    return np.sum(a) * np.sum(b)


def hsplit_fn(x):
    a, b = np.hsplit(x, 2)
    return a * b


def vsplit_fn(x):
    a, b = np.vsplit(x, [1])
    return np.sum(a) * b


def dsplit_fn(x):
    a, b = np.dsplit(x, 2)
    return a * b


def split_in_a_loop(x):
    s = 0.0
    for p in np.split(x, 2):
        s = s + np.sum(p**2)
    return s


def atleast_1d_fn(x):
    return np.atleast_1d(x) * 2.0


def atleast_2d_fn(x):
    return np.atleast_2d(x)


def atleast_3d_fn(x):
    return np.atleast_3d(x) ** 2


def flipud_fn(x):
    return np.flipud(x) * x


def fliplr_fn(x):
    return np.fliplr(x) * x


def rot90_fn(x):
    return np.rot90(x) ** 2


def rot90_k(x, k, axes):
    return np.rot90(x, k, axes=axes)


def rollaxis_fn(x, axis, start):
    return np.rollaxis(x, axis, start)


CASES = [
    (vstack_list, (r(3), r(3, seed=1)), (0, 1)),
    (vstack_list, (r(2, 3), r(3, seed=1)), (0, 1)),
    (vstack_tuple, (r(2, 3), r(1, 3, seed=1)), (0, 1)),
    (vstack_tuple, (r(2, 3, 2), r(1, 3, 2, seed=1)), (0, 1)),
    (row_stack_fn, (r(3), r(3, seed=1)), (0, 1)),
    (hstack_fn, (r(3), r(2, seed=1)), (0, 1)),
    (hstack_fn, (r(2, 3), r(2, 1, seed=1)), (0, 1)),
    (dstack_fn, (r(3), r(3, seed=1)), (0, 1)),
    (dstack_fn, (r(2, 3), r(2, 3, 2, seed=1)), (0, 1)),
    (column_stack_fn, (r(3), r(3, 2, seed=1)), (0, 1)),
    (stack_with_constant, (r(3),), 0),
    (append_flat, (r(2, 3), r(2, seed=1)), (0, 1)),
    (append_axis, (r(2, 3), r(1, 3, seed=1), 0), (0, 1)),
    (append_axis, (r(2, 3), r(2, 2, seed=1), -1), (0, 1)),
    (append_scalar, (r(3), 0.5), (0, 1)),
    (repeat_flat, (r(2, 3),), 0),
    (repeat_counts, (r(3),), 0),
    (repeat_axis, (r(2, 3), [1, 0, 3], 1), 0),
    (repeat_axis, (r(2, 3), 2, -2), 0),
    (tile_fn, (r(2, 3), 3), 0),
    (tile_fn, (r(3), (2, 1, 2)), 0),
    (tile_fn, (r(2, 3, 2), (2, 1)), 0),
    (pad_zeros, (r(2, 3),), 0),
    (pad_values, (r(2, 3), 0.5), (0, 1)),
    (pad_values, (r(2, 3), np.array([0.5, -0.3])), (0, 1)),
    (pad_values, (r(2, 3), r(2, 2, seed=1)), (0, 1)),
    (pad_values, (r(2, 3), r(2, 1, seed=1)), (0, 1)),
    (split_unpacked, (r(4, 3),), 0),
    (split_indexed, (r(4, 6), 3, 1), 0),
    (split_indexed, (r(5, 2), [1, 3], 0), 0),
    (split_three_reads, (r(4, 6),), 0),
    (array_split_ragged, (r(7),), 0),
    (split_at_indices, (r(4),), 0),
    (hsplit_fn, (r(4, 6),), 0),
    (hsplit_fn, (r(6),), 0),
    (vsplit_fn, (r(3, 2),), 0),
    (dsplit_fn, (r(2, 3, 4),), 0),
    (atleast_1d_fn, (0.7,), 0),
    (atleast_1d_fn, (r(2, 3),), 0),
    (atleast_2d_fn, (r(3),), 0),
    (atleast_3d_fn, (r(3),), 0),
    (atleast_3d_fn, (r(2, 3),), 0),
    (flipud_fn, (r(4, 3),), 0),
    (fliplr_fn, (r(4, 3, 2),), 0),
    (rot90_fn, (r(4, 3),), 0),
    (rot90_k, (r(2, 3, 4), 3, (2, 0)), 0),
    (rollaxis_fn, (r(2, 3, 4), 2, 1), 0),
    (rollaxis_fn, (r(2, 3, 4), 0, -1), 0),
]
CASES += [(f, (r(4, 5), ((1, 2), (3, 0))), 0) for f in PAD_MODES.values()]
IDS = [f"{f.__name__}-{i}" for i, (f, _, _) in enumerate(CASES)]


@pytest.mark.parametrize("f,args,wrt", CASES, ids=IDS)
def test_vjp_and_jvp(f, args, wrt):
    check_vjp(f, args, wrt=wrt)  # also: each cotangent has its input's shape and dtype
    check_jvp(f, args, wrt=wrt)


@pytest.mark.parametrize("f,args,wrt", CASES, ids=IDS)
def test_jacobian_batched_matches_per_basis(f, args, wrt):
    check(f, *args, wrt=wrt)
