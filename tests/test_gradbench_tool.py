"""The gradbench tool (benchmarks/gradbench): each of its evals hello, gmm, lstm, ba, ht and ode
gives, through its JSON input and output layouts, derivatives that match central differences
of its objective on small inputs from our own generators (following each eval's definition);
the protocol round-trips in a scripted session with the tool as a subprocess."""

from __future__ import annotations

import copy
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks.gradbench import checks, tool
from benchmarks.gradbench.evals import ba, gmm, hello, ht, lstm, ode

ROOT = Path(__file__).resolve().parent.parent
EPS = 1e-6


def run_eval(module, function, input, jit=False):
    """What the tool answers for one evaluation (one run), as JSON would carry it."""
    result = module.prepare(function, input, jit)()
    return json.loads(json.dumps(module.output(function, result)))


def central(objective, input, paths):
    """Central differences of `objective(input)` (an array) along each input entry `path`
    (a tuple of keys and indices into the JSON input): one column a path."""
    columns = []
    for path in paths:
        moved = []
        for step in (EPS, -EPS):
            changed = copy.deepcopy(input)
            place = changed
            for key in path[:-1]:
                place = place[key]
            place[path[-1]] += step
            moved.append(np.asarray(objective(changed), dtype=np.float64))
        columns.append((moved[0] - moved[1]) / (2 * EPS))
    return np.array(columns).T


def entries(input, key):
    """The paths of every number in the (nested list) input[key], in row-major order."""
    shape = np.shape(input[key])
    return [(key, *index) for index in np.ndindex(*shape)]


def assert_close(actual, expected, rtol=1e-6, atol=1e-7):
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)


# ----------------------------------------------------------------------------- generators


def gmm_input(d=3, k=4, n=6, seed=0):
    rng = np.random.default_rng(seed)
    return {
        "d": d,
        "k": k,
        "n": n,
        "alpha": rng.normal(size=k).tolist(),
        "means": rng.uniform(size=(k, d)).tolist(),
        "icf": rng.normal(scale=0.5, size=(k, d + d * (d - 1) // 2)).tolist(),
        "x": rng.normal(size=(n, d)).tolist(),
        "gamma": 1.3,
        "m": 2,
        "min_runs": 1,
        "min_seconds": 0,
    }


def lstm_input(layers=2, c=4, b=14, seed=0):
    rng = np.random.default_rng(seed)
    return {
        "main_params": rng.normal(scale=0.5, size=(2 * layers, 4 * b)).tolist(),
        "extra_params": rng.normal(scale=0.5, size=(3, b)).tolist(),
        "state": rng.normal(scale=0.5, size=(2 * layers, b)).tolist(),
        "sequence": rng.uniform(size=(c, b)).tolist(),
    }


BA_CAM = [0.12, -0.35, 0.2, 1.5, -0.8, -12.0, 420.0, 0.6, -0.4, 2e-3, 5e-6]


def ba_input(n=3, m=4, p=7):
    return {"n": n, "m": m, "p": p, "cam": BA_CAM, "x": [0.4, -0.7, 2.5], "w": 0.8,
            "feat": [-60.0, 35.0]}  # fmt: skip


def _rigid(rng):
    rotation, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    m = np.eye(4)
    m[:3, :3] = rotation
    m[:3, 3] = rng.normal(size=3)
    return m.tolist()


def ht_input(complicated, mirrored=False, seed=0, vertices=12, points=5, triangles=8):
    """A random 22-bone hand (the bone count theta's 26 parameters pose)."""
    rng = np.random.default_rng(seed)
    bones = 22
    weights = rng.uniform(size=(vertices, bones))
    model = {
        "bone_count": bones,
        "bone_names": [f"bone{i}" for i in range(bones)],
        "parents": [-1] + [int(rng.integers(0, i)) for i in range(1, bones)],
        "base_relatives": [_rigid(rng) for _ in range(bones)],
        "inverse_base_absolutes": [_rigid(rng) for _ in range(bones)],
        "base_positions": np.hstack([rng.normal(size=(vertices, 3)), np.ones((vertices, 1))]),
        "weights": weights / weights.sum(axis=1, keepdims=True),
        "triangles": rng.integers(0, vertices, size=(triangles, 3)).tolist(),
        "is_mirrored": mirrored,
    }
    model["base_positions"] = model["base_positions"].tolist()
    model["weights"] = model["weights"].tolist()
    targets = triangles if complicated else vertices
    return {
        "theta": (0.3 * rng.normal(size=26)).tolist(),
        "us": (0.5 * rng.uniform(size=(points, 2))).tolist() if complicated else [],
        "data": {
            "model": model,
            "correspondences": rng.integers(0, targets, size=points).tolist(),
            "points": rng.normal(size=(points, 3)).tolist(),
        },
    }


# ----------------------------------------------------------------------------- evals


def test_hello():
    assert run_eval(hello, "square", 3.0) == 9.0
    assert run_eval(hello, "double", 3.0) == 6.0
    with pytest.raises(ValueError, match="no function 'cube'"):
        hello.prepare("cube", 3.0, False)


def naive_gmm_log_posterior(input):
    """The GMM objective from densities: the log-likelihood of the mixture of Gaussians with
    precisions Q^T Q, MINUS the log Wishart(V = I / gamma^2, n' = d + m + 1) density of each
    precision: ADBench's objective (and gradbench's reference, its C++ and PyTorch code) adds
    0.5 gamma^2 |Q|_F^2 - m sum(q) - K C, the negated log-density, so we follow it."""
    from scipy.special import multigammaln

    d, k = input["d"], input["k"]
    alpha, means, x = (np.array(input[key]) for key in ("alpha", "means", "x"))
    icf = np.array(input["icf"])
    weights = np.exp(alpha) / np.sum(np.exp(alpha))
    log_likelihood = 0.0
    precisions = []
    for c in range(k):
        Q = np.diag(np.exp(icf[c, :d]))
        pos = d
        for col in range(d):
            for row in range(col + 1, d):
                Q[row, col] = icf[c, pos]
                pos += 1
        precisions.append(Q.T @ Q)
    for xi in x:
        density = 0.0
        for c in range(k):
            r = xi - means[c]
            norm = np.sqrt(np.linalg.det(precisions[c]) / (2 * np.pi) ** d)
            density += weights[c] * norm * np.exp(-0.5 * r @ precisions[c] @ r)
        log_likelihood += np.log(density)
    gamma, n_prime = input["gamma"], d + input["m"] + 1
    log_prior = 0.0
    for P in precisions:  # log Wishart pdf of P with V = I / gamma^2
        log_prior += (
            0.5 * (n_prime - d - 1) * np.log(np.linalg.det(P))
            - 0.5 * gamma**2 * np.trace(P)
            - 0.5 * n_prime * d * np.log(2.0)
            + n_prime * d * np.log(gamma)
            - multigammaln(0.5 * n_prime, d)
        )
    return log_likelihood - log_prior


def test_gmm_objective_and_gradient():
    input = gmm_input()
    value = run_eval(gmm, "objective", input)
    assert isinstance(value, float)
    assert math.isclose(value, naive_gmm_log_posterior(input), rel_tol=1e-10)
    gradient = run_eval(gmm, "jacobian", input)
    paths = entries(input, "alpha") + entries(input, "means") + entries(input, "icf")
    expected = central(lambda i: run_eval(gmm, "objective", i), input, paths)
    assert len(gradient) == 4 + 4 * 3 + 4 * 6
    assert_close(gradient, expected)


def test_gmm_q_and_l_layout():
    """An input with q and l (each component's lower part column by column) apart."""
    input = gmm_input(d=3, k=2)
    split = {key: value for key, value in input.items() if key != "icf"}
    split["q"] = [row[:3] for row in input["icf"]]
    split["l"] = [row[3:] for row in input["icf"]]
    assert run_eval(gmm, "objective", split) == run_eval(gmm, "objective", input)


def test_lstm_objective_and_gradient():
    input = lstm_input()
    value = run_eval(lstm, "objective", input)
    assert isinstance(value, float)
    gradient = run_eval(lstm, "jacobian", input)
    paths = entries(input, "main_params") + entries(input, "extra_params")
    expected = central(lambda i: run_eval(lstm, "objective", i), input, paths)
    assert_close(gradient, expected)


def test_ode_primal_and_gradient():
    rng = np.random.default_rng(3)
    input = {"x": rng.uniform(size=5).tolist(), "s": 4, "min_runs": 1, "min_seconds": 0}
    y = run_eval(ode, "primal", input)
    # y_0 = x_0 t exactly; y_1 = x_1 x_0 t^2 / 2 (RK4 is exact on polynomials of degree <= 4)
    x = input["x"]
    assert math.isclose(y[0], 2 * x[0], rel_tol=1e-12)
    assert math.isclose(y[1], x[1] * x[0] * 2.0, rel_tol=1e-12)
    gradient = run_eval(ode, "gradient", input)
    expected = central(lambda i: run_eval(ode, "primal", i)[-1], input, entries(input, "x"))
    assert_close(gradient, expected)


def dense_from_csr(rows, cols, vals, shape):
    dense = np.zeros(shape)
    for r in range(shape[0]):
        for k in range(rows[r], rows[r + 1]):
            dense[r, cols[k]] += vals[k]
    return dense


def test_ba_objective_layout():
    out = run_eval(ba, "objective", ba_input())
    assert set(out) == {"reproj_error", "w_err"}
    assert out["reproj_error"]["repeated"] == 7 and len(out["reproj_error"]["elements"]) == 2
    assert math.isclose(out["w_err"]["element"], 1 - 0.8**2) and out["w_err"]["repeated"] == 7


def test_ba_sparse_jacobian():
    """On distinct cameras, points, weights and features (not copies of one), so that a block
    in the wrong place shows: the CSR matrix, made dense, is the central differences of every
    residual (reprojection rows 2i, 2i + 1, then the weight rows) in every parameter."""
    n, m, p = 3, 4, 7
    data = ba.parse(ba_input(n, m, p))
    rng = np.random.default_rng(1)
    data["cams"] = data["cams"] + rng.normal(size=data["cams"].shape) * ba_noise()
    data["X"] = data["X"] + 0.1 * rng.normal(size=data["X"].shape)
    data["w"] = data["w"] + 0.05 * rng.normal(size=p)
    data["feats"] = data["feats"] + rng.normal(size=data["feats"].shape)
    rows, cols, vals = ba.jacobian_of(data)()
    assert len(rows) == 3 * p + 1 and len(cols) == len(vals) == 30 * p + p
    shape = (3 * p, 11 * n + 3 * m + p)
    jacobian = dense_from_csr(rows, cols, vals, shape)

    def residuals(flat):
        cams = flat[: 11 * n].reshape(n, 11)
        X = flat[11 * n : 11 * n + 3 * m].reshape(m, 3)
        w = flat[11 * n + 3 * m :]
        r = ba.ba_residuals(cams[data["cam_of"]], X[data["point_of"]], w, data["feats"])
        return np.concatenate([r[:, :2].ravel(), r[:, 2]])

    theta = np.concatenate([data["cams"].ravel(), data["X"].ravel(), data["w"]])
    expected = np.zeros(shape)
    for j in range(shape[1]):
        step = np.zeros_like(theta)
        step[j] = EPS * max(1.0, abs(theta[j]))
        expected[:, j] = (residuals(theta + step) - residuals(theta - step)) / (2 * step[j])
    assert_close(jacobian, expected, rtol=1e-5, atol=1e-5 * np.max(np.abs(expected)))


def ba_noise():
    return np.array([0.02, 0.02, 0.02, 0.1, 0.1, 0.1, 5.0, 0.05, 0.05, 1e-4, 1e-7])


@pytest.mark.parametrize("complicated, mirrored", [(False, False), (True, True)])
def test_ht_objective_and_jacobian(complicated, mirrored):
    input = ht_input(complicated, mirrored)
    residuals = run_eval(ht, "objective", input)
    assert len(residuals) == 3 * 5
    jacobian = np.array(run_eval(ht, "jacobian", input))
    assert jacobian.shape == (15, 28 if complicated else 26)

    def objective(i):
        return run_eval(ht, "objective", i)

    expected = central(objective, input, [("theta", j) for j in range(26)])
    if complicated:  # column c: d residual(3i + r) / d us[i][c], from each pair's own moves
        full = central(objective, input, entries(input, "us"))  # (15, 10)
        us_columns = np.zeros((15, 2))
        for i in range(5):
            for c in range(2):
                column = full[:, 2 * i + c]
                us_columns[3 * i : 3 * i + 3, c] = column[3 * i : 3 * i + 3]
                assert np.all(np.delete(column, range(3 * i, 3 * i + 3)) == 0)
        expected = np.hstack([us_columns, expected])
    assert_close(jacobian, expected)


# the forward sweep computes the rotation norm's tangent (0 / 0 at a zero rotation) before the
# branch that does not read it
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_ht_small_rotation_branch():
    """A global rotation under 1e-4 takes the identity branch (as ADBench's does): its columns
    are zero, and nothing else is touched by the norm's unused 0 / 0 tangent."""
    input = ht_input(False)
    input["theta"][:3] = [0.0, 0.0, 0.0]
    jacobian = np.array(run_eval(ht, "jacobian", input))
    assert np.all(jacobian[:, :3] == 0) and np.all(np.isfinite(jacobian))
    expected = central(lambda i: run_eval(ht, "objective", i), input, [("theta", 5)])
    assert_close(jacobian[:, 5:6], expected)


# ----------------------------------------------------------------------------- timings' checks


def test_timings_checks_pass_right_outputs_and_catch_wrong_ones():
    """timings.py checks each output at gradbench's default sizes against an independent
    reference (checks.py): the tool's outputs pass, and a slightly wrong one is caught."""
    rng = np.random.default_rng(3)
    points = rng.random((40, 2))
    cases = [
        ("lse", "gradient", {"x": rng.random(7).tolist()}),
        ("llsq", "gradient", {"x": rng.random(4).tolist(), "n": 9}),
        ("det", "gradient", {"A": rng.random(16).tolist(), "ell": 4}),
        ("kmeans", "dir", {"points": points.tolist(), "centroids": points[-3:].tolist()}),
        ("kmeans", "cost", {"points": points.tolist(), "centroids": points[-3:].tolist()}),
        ("ode", "gradient", {"x": rng.random(6).tolist(), "s": 4}),
        ("hello", "double", 3.0),
    ]
    for name, function, input in cases:
        module = tool.Tool().load(name)
        output = run_eval(module, function, input)
        assert checks.check(name, function, input, output) == "ok", name
        wrong = np.asarray(output) * (1 + 1e-4) + 1e-6
        assert checks.check(name, function, input, wrong.tolist()).startswith("WRONG"), name
    assert checks.check("particle", "rr", {"w": 0.0}, checks.PARTICLE) == "ok"
    assert checks.check("saddle", "rr", {"start": [1.0, 1.0]}, [0.1] * 4).startswith("WRONG")
    assert checks.check("gmm", "jacobian", {}, [0.0]) == "-"  # (the tests check gmm)


# ----------------------------------------------------------------------------- protocol


def test_repeat_honours_min_runs_and_min_seconds():
    calls = []
    result, timings = tool.repeat(lambda: calls.append(1) or len(calls), 3, 0.0)
    assert result == 3 and len(timings) == 3
    assert all(t["name"] == "evaluate" and isinstance(t["nanoseconds"], int) for t in timings)
    result, timings = tool.repeat(lambda: None, 1, 0.02)
    assert sum(t["nanoseconds"] for t in timings) >= 0.02e9 and len(timings) > 1
    assert tool.runs_of({"min_runs": 4, "min_seconds": 0.5}) == (4, 0.5)
    assert tool.runs_of({"runs": 2}) == (2, 0.0)
    assert tool.runs_of(3.0) == (1, 0.0)  # hello's input is a number


def session(messages, *args):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    text = "".join(json.dumps(m) + "\n" for m in messages)
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.gradbench", *args],
        input=text,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_protocol_session():
    gmm_in = gmm_input() | {"min_runs": 3, "min_seconds": 0}
    replies = session(
        [
            {"id": 0, "kind": "start", "eval": "gmm", "config": {"n": 6}},
            {"id": 1, "kind": "define", "module": "gmm"},
            {"id": 2, "kind": "evaluate", "module": "gmm", "function": "objective",
             "input": gmm_in, "description": "3_4_6"},
            {"id": 3, "kind": "analysis", "of": 2, "valid": True},
            {"id": 4, "kind": "evaluate", "module": "gmm", "function": "jacobian",
             "input": gmm_in},
            {"id": 5, "kind": "evaluate", "module": "gmm", "function": "hessian",
             "input": gmm_in},
            {"id": 6, "kind": "define", "module": "no_such_eval"},
            {"id": 7, "kind": "evaluate", "module": "no_such_eval", "function": "f",
             "input": {}},
            {"id": 8, "kind": "evaluate", "module": "gmm", "function": "objective",
             "input": gmm_in | {"x": [[1.0]]}},
            {"id": 9, "kind": "end"},
            {"id": 10, "kind": "define", "module": "gmm"},  # after end: never read
        ]
    )  # fmt: skip
    assert [r["id"] for r in replies] == list(range(9))
    assert replies[0] == {"id": 0, "tool": "s2sad", "config": {"jit": False}}
    assert replies[1] == {"id": 1, "success": True}
    objective, gradient = replies[2], replies[4]
    assert objective["success"] and gradient["success"]
    assert math.isclose(objective["output"], naive_gmm_log_posterior(gmm_in), rel_tol=1e-10)
    assert len(gradient["output"]) == 40
    for reply in (objective, gradient):
        assert len(reply["timings"]) >= 3
        assert all(set(t) == {"name", "nanoseconds"} for t in reply["timings"])
        assert all(t["name"] == "evaluate" and t["nanoseconds"] > 0 for t in reply["timings"])
    assert replies[3] == {"id": 3}
    assert replies[5]["success"] is False and "no function 'hessian'" in replies[5]["error"]
    assert replies[6] == {"id": 6, "success": False,
                          "error": "s2sad has no module for the eval 'no_such_eval'"}  # fmt: skip
    assert replies[7]["success"] is False and "no_such_eval" in replies[7]["error"]
    assert replies[8]["success"] is False and "Traceback" in replies[8]["error"]


def test_protocol_session_jit():
    """--jit: the configuration says so, and hello's derivative is compiled by Numba."""
    replies = session(
        [
            {"id": 0, "kind": "start", "eval": "hello"},
            {"id": 1, "kind": "define", "module": "hello"},
            {"id": 2, "kind": "evaluate", "module": "hello", "function": "double", "input": 1.5},
            {"id": 3, "kind": "evaluate", "module": "hello", "function": "square", "input": 1.5},
            {"id": 4, "kind": "end"},
        ],
        "--jit",
    )
    assert replies[0]["config"] == {"jit": True}
    assert replies[2]["output"] == 3.0 and len(replies[2]["timings"]) == 1
    assert replies[3]["output"] == 2.25


def test_protocol_edges_undefined_module_and_nan_output():
    """An evaluate of a module not defined first is an error reply; an output holding NaN is an
    error reply, not a line strict JSON parsers reject; evals.txt lists the evals, sorted."""
    replies = session(
        [
            {"id": 0, "kind": "start", "eval": "lse"},
            {"id": 1, "kind": "evaluate", "module": "lse", "function": "primal",
             "input": {"x": [1.0, 2.0]}},
            {"id": 2, "kind": "define", "module": "lse"},
            {"id": 3, "kind": "evaluate", "module": "lse", "function": "gradient",
             "input": {"x": [1.0, float("nan")]}},
            {"id": 4, "kind": "evaluate", "module": "lse", "function": "primal",
             "input": {"x": [1.0, 2.0]}},
            {"id": 5, "kind": "end"},
        ]
    )  # fmt: skip
    assert replies[1] == {
        "id": 1,
        "success": False,
        "error": "the eval 'lse' was not defined first",
    }
    assert replies[3]["success"] is False and "NaN" in replies[3]["error"]
    assert replies[4]["success"] and math.isclose(replies[4]["output"], np.logaddexp(1.0, 2.0))
    listed = (ROOT / "benchmarks" / "gradbench" / "evals.txt").read_text().split()
    modules = sorted(p.stem for p in (ROOT / "benchmarks/gradbench/evals").glob("[a-z]*.py"))
    assert listed == modules == sorted(listed) and len(listed) == 12
