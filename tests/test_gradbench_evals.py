"""The gradbench evals' modules (benchmarks/gradbench/evals/): on small inputs made the way each
eval's definition makes them, every derivative an eval reports matches central differences of
its objective, the objective matches a direct NumPy computation, and the outputs have the eval's
JSON layout. particle and saddle are nested (a derivative inside a descent that is
differentiated again): their outer derivatives, in all four mode pairs, match central
differences of the differentiated function, and their results match the values gradbench's
evals expect. kmeans' Hessian diagonal (forward over reverse along ones) is the dense Hessian's
diagonal and central differences of its gradient. Two cases run under jit=True (saddle rr,
nested generated code compiled; kmeans dir)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import s2sad
from benchmarks.gradbench.evals import det, kmeans, llsq, lse, particle, saddle


def central(f, x, h=1e-6):
    """Central differences of scalar f at array x, shaped like x."""
    x = np.asarray(x, dtype=np.float64)
    g = np.zeros_like(x)
    for k in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[k] = h
        g[k] = (f(x + e) - f(x - e)) / (2 * h)
    return g


def evaluate(module, function, input, jit=False):
    """What the tool does for one evaluate message: prepare, run, output (and JSON)."""
    run = module.prepare(function, input, jit)
    result = module.output(function, run())
    return json.loads(json.dumps(result))


# ----------------------------------------------------------------------- inputs, as gradbench's


def lse_input(rng, n):
    return {"x": rng.random(n).tolist()}


def llsq_input(rng, m, n):
    return {"x": rng.random(m).tolist(), "n": n}


def kmeans_input(rng, k, n, d):
    points = rng.random((n, d))
    return {"points": points.tolist(), "centroids": points[-k:].tolist()}  # no empty cluster


def det_input(rng, ell):
    return {"A": rng.random(ell * ell).tolist(), "ell": ell}


# --------------------------------------------------------------------------------------- evals


@pytest.mark.parametrize("n", [1, 2, 9])
def test_lse(n):
    rng = np.random.default_rng(n)
    input = lse_input(rng, n)
    x = np.array(input["x"])
    value = evaluate(lse, "primal", input)
    assert isinstance(value, float)
    assert np.isclose(value, np.log(np.sum(np.exp(x))), rtol=1e-14)
    gradient = evaluate(lse, "gradient", input)
    assert len(gradient) == n and all(isinstance(v, float) for v in gradient)
    assert np.allclose(gradient, central(lse.lse, x), rtol=1e-6, atol=1e-9)
    # shifted far from 0 the max trick keeps it finite: the gradient is still the softmax
    far = {"x": (x + 800.0).tolist()}
    assert np.allclose(evaluate(lse, "gradient", far), np.exp(x) / np.sum(np.exp(x)))


@pytest.mark.parametrize("m, n", [(1, 2), (4, 7), (6, 16)])
def test_llsq(m, n):
    rng = np.random.default_rng(m * n)
    input = llsq_input(rng, m, n)
    x = np.array(input["x"])
    t = np.array([-1.0 + i * 2.0 / (n - 1) for i in range(n)])
    direct = 0.5 * np.sum((np.sign(t) - np.vander(t, m, increasing=True) @ x) ** 2)
    value = evaluate(llsq, "primal", input)
    assert isinstance(value, float) and np.isclose(value, direct, rtol=1e-13)
    gradient = evaluate(llsq, "gradient", input)
    assert len(gradient) == m
    assert np.allclose(gradient, central(lambda v: llsq.llsq(v, n), x), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("k, n, d", [(1, 5, 1), (3, 30, 2), (4, 40, 3)])
def test_kmeans(k, n, d):
    rng = np.random.default_rng(k * n * d)
    input = kmeans_input(rng, k, n, d)
    points, centroids = np.array(input["points"]), np.array(input["centroids"])

    def direct(c):
        return np.sum(np.min(np.sum((points[:, None, :] - c[None, :, :]) ** 2, axis=2), axis=1))

    cost = evaluate(kmeans, "cost", input)
    assert isinstance(cost, float) and np.isclose(cost, direct(centroids), rtol=1e-12)
    out = np.array(evaluate(kmeans, "dir", input))
    assert out.shape == (k, d)
    # J by central differences; H (diagonal) by second differences: the cost is piecewise
    # quadratic, so both are exact up to rounding while no point changes its centroid
    h = 1e-3
    J, H = np.zeros((k, d)), np.zeros((k, d))
    for j in np.ndindex(k, d):
        e = np.zeros((k, d))
        e[j] = h
        up, down = direct(centroids + e), direct(centroids - e)
        J[j] = (up - down) / (2 * h)
        H[j] = (up - 2 * direct(centroids) + down) / h**2
    assert np.allclose(out, J / H, rtol=1e-5, atol=1e-8)
    # the Hessian is twice each cluster's size, on the diagonal
    sizes = np.bincount(np.argmin(((points[:, None] - centroids) ** 2).sum(2), axis=1), None, k)
    assert np.allclose(H, 2.0 * sizes[:, None], rtol=1e-5)


def test_kmeans_hessian_diagonal_is_the_dense_hessians():
    """H ones, forward mode over the gradient code (what `dir` divides by), is the diagonal of
    the dense Hessian (s2sad.hessian), which is diagonal, and central differences of the
    gradient give both: the Hessian column of each centroid coordinate."""
    rng = np.random.default_rng(5)
    input = kmeans_input(rng, 3, 20, 2)
    points, centroids = np.array(input["points"]), np.array(input["centroids"])
    J, diagonal = kmeans.gradient_and_hvp(points, centroids, False)(np.ones_like(centroids))
    dense = s2sad.hessian(kmeans.cost, wrt=1)(points, centroids).reshape(6, 6)
    np.testing.assert_array_equal(diagonal.ravel(), np.diag(dense))
    np.testing.assert_array_equal(dense, np.diag(np.diag(dense)))  # diagonal, as the eval says
    gradient = s2sad.grad(kmeans.cost, wrt="centroids")
    assert np.allclose(J, gradient(points, centroids), rtol=1e-14)
    h = 1e-4
    for j in range(6):
        step = np.zeros(6)
        step[j] = h
        step = step.reshape(3, 2)
        column = (gradient(points, centroids + step) - gradient(points, centroids - step)) / (2 * h)
        assert np.allclose(column.ravel(), dense[:, j], rtol=1e-8, atol=1e-8)
    # each coordinate's entry is twice the number of points nearest that centroid
    sizes = np.bincount(kmeans.nearest(points, centroids), minlength=3)
    np.testing.assert_array_equal(diagonal, 2.0 * np.repeat(sizes, 2).reshape(3, 2))


def test_kmeans_jit_gives_the_numbers_of_numpy_mode():
    rng = np.random.default_rng(6)
    input = kmeans_input(rng, 4, 5000, 3)  # more points than one block of `nearest`
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a JitFallbackWarning would fail here
        jitted = np.array(evaluate(kmeans, "dir", input, jit=True))
    np.testing.assert_allclose(jitted, evaluate(kmeans, "dir", input), rtol=1e-13, atol=1e-15)
    points = np.array(input["points"])
    nearest = kmeans.nearest(points, np.array(input["centroids"]))
    means = np.array([points[nearest == j].mean(axis=0) for j in range(4)])
    np.testing.assert_allclose(jitted, np.array(input["centroids"]) - means, rtol=1e-12)


@pytest.mark.parametrize("ell", [1, 2, 3, 5])
def test_det(ell):
    rng = np.random.default_rng(ell)
    input = det_input(rng, ell)
    A = np.array(input["A"])
    value = evaluate(det, "primal", input)
    assert isinstance(value, float)
    assert np.isclose(value, np.linalg.det(A.reshape(ell, ell)), rtol=1e-12, atol=1e-14)
    gradient = evaluate(det, "gradient", input)
    assert len(gradient) == ell * ell
    # det is linear in each entry: central differences are exact up to rounding
    assert np.allclose(gradient, central(lambda a: det.det(a, ell), A), rtol=1e-7, atol=1e-9)


def test_det_gradient_is_the_cofactor_matrix():
    M = np.array([[2.0, -1.0, 0.5], [1.0, 3.0, -2.0], [0.0, 4.0, 1.0]])
    run = det.prepare("gradient", {"A": M.ravel().tolist(), "ell": 3}, False)
    cofactors = np.linalg.det(M) * np.linalg.inv(M).T
    assert np.allclose(run(), cofactors.ravel(), rtol=1e-13)


# ------------------------------------------------------------------------------ nested: particle


MODES = ["ff", "fr", "rf", "rr"]


@pytest.mark.parametrize("function", MODES)
def test_particle(function):
    # gradbench's particle eval sends w = 0 and expects this w
    assert np.isclose(evaluate(particle, function, {"w": 0.0}), 0.2071918746486116, rtol=1e-12)


def test_particle_derivatives():
    particle.prepare("rr", {"w": 0.0}, False)  # generates the force code
    # the inner derivative: the gradient of the potential, in both modes
    x0, x1, w = 1.3, 5.2, 0.4
    expected = central(lambda x: particle.potential(x[0], x[1], w), [x0, x1])
    assert np.allclose(particle.force(x0, x1, w, False), expected, rtol=1e-7)
    assert np.allclose(particle.force(x0, x1, w, True), expected, rtol=1e-7)
    # the outer one: d/dw of the whole trajectory, forward and reverse over both forces
    for forward in (False, True):
        for w in (-0.3, 0.0, 0.21):
            fd = central(lambda v: particle.naive_euler(float(v[0]), forward), [w])[0]
            by_jvp = s2sad.jvp(particle.naive_euler, wrt="w")(w, forward, tangent=1.0)[1]
            by_grad = s2sad.grad(particle.naive_euler, wrt="w")(w, forward)
            assert np.isclose(by_jvp, fd, rtol=1e-6) and np.isclose(by_grad, fd, rtol=1e-6)
            assert np.isclose(by_jvp, by_grad, rtol=1e-12)


# -------------------------------------------------------------------------------- nested: saddle


@pytest.mark.parametrize("function", MODES)
def test_saddle(function):
    out = evaluate(saddle, function, {"start": [1.0, 1.0]})
    assert len(out) == 4 and all(isinstance(v, float) for v in out)
    assert np.allclose(out, [8.246324826140356e-06] * 4, rtol=1e-10)


def test_saddle_derivatives():
    saddle.prepare("rr", {"start": [1.0, 1.0]}, False)  # generates the inner derivative code
    b0, b1, a0, a1 = 0.7, -0.4, 0.3, 1.1
    expected = central(lambda b: saddle.descent_loss(b[0], b[1], a0, a1), [b0, b1])
    for forward in (False, True):
        assert np.allclose(saddle.inner_gradient(b0, b1, a0, a1, forward), expected, rtol=1e-8)
    # d r1 / da through the inner descent loop, every mode pair
    for a in ([1.0, 1.0], [0.5, -0.25]):
        for inner in (False, True):
            fd = central(lambda v: saddle.max_over_b(v[0], v[1], 1.0, 1.0, inner), a)
            for outer in (False, True):
                value, g = saddle.derivative(saddle.max_over_b, (0, 1), outer, False)(
                    np.array(a), 1.0, 1.0, inner
                )
                assert np.isclose(value, saddle.max_over_b(a[0], a[1], 1.0, 1.0, inner))
                assert np.allclose(g, fd, rtol=1e-6, atol=1e-9)


def test_saddle_jit_gives_the_numbers_of_numpy_mode():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a JitFallbackWarning would fail here
        jitted = evaluate(saddle, "rr", {"start": [1.0, 1.0]}, jit=True)
    assert jitted == evaluate(saddle, "rr", {"start": [1.0, 1.0]})


# ---------------------------------------------------------------------------------- interface


@pytest.mark.parametrize(
    "module, input",
    [
        (lse, {"x": [1.0]}),
        (llsq, {"x": [1.0], "n": 2}),
        (kmeans, {"points": [[0.0]], "centroids": [[0.0]]}),
        (det, {"A": [1.0], "ell": 1}),
        (particle, {"w": 0.0}),
        (saddle, {"start": [1.0, 1.0]}),
    ],
)
def test_unknown_function_is_refused(module, input):
    with pytest.raises(ValueError, match="has no function 'hessian'"):
        module.prepare("hessian", input, False)
