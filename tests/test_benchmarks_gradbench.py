"""The benchmark workloads of gradbench's evals (benchmarks/workloads/gb_*.py) whose rows are not
gradients: kmeans' Newton direction and HT's Jacobian, built as the runner builds them, against
exact values and central differences; and every peer's version of every gradbench workload
against s2sad's numbers, where that peer is installed (the gradients' rows are checked against
central differences in test_benchmarks_smoke.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import s2sad

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.runner.builders import peer_builder  # noqa: E402
from benchmarks.workloads import all_cases, gb_arrays, gb_ht  # noqa: E402

GRADBENCH = [c for c in all_cases("smoke") if c.family == "gradbench"]


def test_kmeans_direction_is_the_step_to_the_cluster_means():
    """J / diag(H) for the k-means cost is C_j - mean of the points nearest C_j (J_j = 2 sum
    (C_j - P_i), H_j = 2 n_j), exactly."""
    inputs = gb_arrays.kmeans_inputs(k=3, n=12, d=2)
    run, fetch, probe = gb_arrays.build_s2sad_kmeans(gb_arrays.kmeans_eval.cost, inputs, None)
    probe()
    (got,) = fetch(run())
    points, centroids = inputs["points"], inputs["centroids"]
    nearest = np.argmin(((points[:, None, :] - centroids[None]) ** 2).sum(axis=2), axis=1)
    means = np.array([points[nearest == j].mean(axis=0) for j in range(3)])
    np.testing.assert_allclose(got, centroids - means, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("complicated", [False, True], ids=["ht", "ht-complicated"])
def test_ht_jacobian_matches_central_differences(complicated):
    inputs = gb_ht.make_inputs(3, complicated)
    f = gb_ht.ht_eval.ht_objective_complicated if complicated else gb_ht.ht_eval.ht_objective
    wrt = ("theta", "us") if complicated else ("theta",)
    run, fetch, probe = gb_ht.build_s2sad(f, inputs, wrt)
    probe()
    (J,) = fetch(run())
    assert J.shape == (9, 28 if complicated else 26)
    names, args = list(inputs), list(inputs.values())
    expected = []
    if complicated:  # the column of u0 (u1) moves u0 (u1) of every correspondence
        for j in range(2):
            step = np.zeros_like(inputs["us"])
            step[:, j] = 1e-6
            hi, lo = list(args), list(args)
            hi[names.index("us")] = inputs["us"] + step
            lo[names.index("us")] = inputs["us"] - step
            expected.append((f(*hi) - f(*lo)) / 2e-6)
    for k in range(26):
        hi, lo = list(args), list(args)
        hi[0], lo[0] = inputs["theta"].copy(), inputs["theta"].copy()
        hi[0][k] += 1e-6
        lo[0][k] -= 1e-6
        expected.append((f(*hi) - f(*lo)) / 2e-6)
    np.testing.assert_allclose(J, np.array(expected).T, rtol=1e-6, atol=1e-7)


def _s2sad_numbers(case, inputs):
    if "s2sad" in case.build:
        run, fetch, _ = case.build["s2sad"](case.numpy_f, inputs, case.wrt)
        return fetch(run())
    grads = s2sad.grad(case.numpy_f, wrt=case.wrt)(*inputs.values())
    return tuple(np.asarray(g, dtype=np.float64) for g in grads)


@pytest.mark.parametrize("peer", ["jax", "torch", "autograd"])
def test_peers_agree_with_s2sad(peer):
    """Each peer's version of each gradbench workload (its objective, its derivative) gives
    s2sad's numbers: the runner's check, at the smoke sizes."""
    module = pytest.importorskip(peer)
    if peer == "jax":
        module.config.update("jax_enable_x64", True)
    for case in GRADBENCH:
        inputs = case.inputs()
        run, fetch = peer_builder(case, peer)(case.peers[peer](), inputs, case.wrt)
        got, mine = fetch(run()), _s2sad_numbers(case, inputs)
        assert len(got) == len(mine), case.workload
        for g, m in zip(got, mine):
            assert g.shape == m.shape, case.workload
            np.testing.assert_allclose(g, m, rtol=1e-9, atol=1e-12, err_msg=case.workload)
