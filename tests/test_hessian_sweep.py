"""Hessians against central differences of s2sad's gradient, through each runtime helper whose own
tangent rule is `linear` in its cotangent (forward mode takes its other parameters' tangents as
zero, so a rule missing one would give a wrong Hessian, silently).

Each function puts a nonlinear op before and after the helper's op, so that both the cotangent
the helper reads and the values it reads vary with x. The check is scripts/hessian_sweep.py's
(that script runs it over every call the tests make: see its docstring); a case it skips (a kink
near the point) would be a defect of this sample, so a skip fails here.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from conftest import rand

_SPEC = importlib.util.spec_from_file_location(
    "hessian_sweep", Path(__file__).resolve().parents[1] / "scripts" / "hessian_sweep.py"
)
sweep = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(sweep)

C4 = np.array([0.7, -1.3, 0.4, 2.1])


def broadcast_sum(x):  # unbroadcast
    return np.sum(np.sin(x[:, None] * x[None, :3] + x[:3]))


def reductions(x):  # expand_reduced, mean_vjp, var_vjp, extremum_vjp, ptp_vjp
    y = np.sin(x)
    return np.sum(y, axis=0) @ C4[:2] + np.mean(y**2) + np.var(y) + np.max(y) * np.ptp(y, axis=0)[1]


def scans(x):  # cumsum_vjp, diff_vjp, trace_vjp, diagonal_vjp
    y = np.tanh(x)
    return (
        np.sum(np.cumsum(y) ** 2)
        + np.sum(np.diff(y, axis=0) ** 3)
        + np.trace(y) * np.sum(np.diagonal(y**2))
    )


def joins(x):  # concatenate_vjp, stack_vjp, split_vjp, repeat_vjp, tile_vjp
    y = np.cos(x)
    a, b = np.split(np.concatenate([y, y**2]), 2)
    s = np.stack([a, b * y])
    return np.sum(s**3) + np.sum(np.repeat(y, 2) * np.tile(y, 2))


def picks(x):  # getitem_vjp, take_vjp, take_along_axis_vjp, last_written
    y = np.sin(x) * x
    z = np.zeros(4)
    z[np.array([1, 3, 1])] = y[:3]
    idx = np.array([[0, 1], [1, 0]])
    return (
        np.sum(y[::2] ** 2)
        + np.sum(np.take(y, [0, 3, 3]) ** 3)
        + np.sum(np.take_along_axis(y.reshape(2, 2), idx, axis=1) ** 2)
        + np.sum(np.exp(z))
    )


def orders(x):  # sort_vjp, partition_vjp, quantile_vjp (values far apart: no ties)
    y = x**3 + x
    return np.sum(np.sort(y) * C4) + np.sum(np.partition(y, 1)[:2] ** 2) + np.quantile(y, 0.3) ** 2


def shapes(x):  # pad_vjp, diag_vjp, rollaxis_vjp, delete_vjp, insert_vjp, meshgrid_vjp
    y = np.exp(x / 3.0)
    p = np.pad(y, 1, mode="reflect")
    d = np.diag(y[:3])
    g1, g2 = np.meshgrid(y[:2], y**2)
    r = np.insert(np.delete(y, 1), 1, y[0] ** 2)
    return np.sum(p**2) + np.sum(d @ d) + np.sum(np.rollaxis(g1 * g2, 1) ** 2) + np.sum(r**3)


def samples(x):  # linspace_vjp, ediff1d_vjp, nan_vjp
    y = np.sin(x)
    return (
        np.sum(np.linspace(y[0], y[1] ** 2, 5) ** 3)
        + np.sum(np.ediff1d(y, to_end=y[:1]) ** 2)
        + (np.nansum(y**3) * np.nanmean(y))
    )


def builtins(x):  # builtin_extremum_vjp
    y = np.sin(x) + x
    return max(y[0], y[1] * 2.0) ** 2 + min(y[2], y[3]) ** 3


def interp_edges(x):  # interp_edge_vjp, interp_fp_vjp (x outside the knots on both sides)
    knots = np.array([-0.5, 0.0, 0.5])
    v = np.interp(np.array([-1.0, 0.2, 1.0]), knots, np.sin(x[:3]), left=x[3] ** 2, right=x[0] ** 3)
    return np.sum(v**2)


CASES = [
    (broadcast_sum, rand(4, seed=1)),
    (reductions, rand(3, 2, seed=2)),
    (scans, rand(3, 3, seed=3)),
    (joins, rand(4, seed=4)),
    (picks, rand(4, seed=5)),
    (orders, np.array([0.9, -0.4, 0.1, 0.6])),
    (shapes, rand(4, seed=6)),
    (samples, rand(4, seed=7)),
    (builtins, np.array([0.3, 0.6, -0.2, 0.5])),
    (interp_edges, rand(4, seed=8)),
]


@pytest.mark.parametrize("f,x", CASES, ids=[f.__name__ for f, _ in CASES])
def test_hessian_matches_central_differences_of_the_gradient(f, x):
    outcome, detail = sweep._check((f, 0, 0, (x,)))
    assert (outcome, detail) == ("agree", "")
