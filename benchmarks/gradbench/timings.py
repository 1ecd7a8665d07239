"""Time the tool's evals at gradbench's default sizes, without gradbench:
`python -m benchmarks.gradbench.timings [--jit] [--evals gmm ode ...] [--min-runs 3]`.

Inputs come from our own generators with the default sizes of gradbench's eval scripts (gmm: d
in 2 10 20 32 64, k in 5 10 25 50 100, n = 1000; lstm: l in 2 4, c in 1024 4096; ode: n in 1000
10000 100000, s in 1 10 100; ba: the sizes of ADBench's ba1 and ba2, one camera copied as
gradbench does; lse: n from 2500 to 1280000, doubling; llsq: m = 128, n from 16 to 16392; det:
ell from 5 to 11; kmeans: k in 10 100 1000, n in 1000 10000 100000, d in 8 16, the centroids
the last k points; particle: w = 0; saddle: start (1, 1); hello: x = 3), except ht, whose eval
reads ADBench's hand models: here a random 22-bone hand of 544 vertices (the size of ADBench's
small model) with 100 and 192 correspondences, without and with `us`.

Each line is one evaluate message through the tool (tool.py): the median of its runs' timings,
the untimed prepare (transform, compile), and `ok` where the output passed its check against an
independent reference (`check`), for the evals that have one: a closed form (hello, lse, llsq,
det, kmeans), the value gradbench's eval expects (particle, saddle), or central differences
along a random direction (ode); gmm, lstm, ba and ht are checked against central differences
on small inputs by the tests only.
"""

from __future__ import annotations

import argparse
import os
import time

from .tool import THREAD_VARIABLES, Tool

for _variable in THREAD_VARIABLES:  # one thread, as the tool runs (before NumPy is imported)
    os.environ.setdefault(_variable, "1")

import numpy as np  # noqa: E402

from .checks import check  # noqa: E402


def gmm_inputs(rng):
    for d in (2, 10, 20, 32, 64):
        for k in (5, 10, 25, 50, 100):
            n = 1000
            yield f"d={d} k={k} n={n}", {
                "d": d,
                "k": k,
                "n": n,
                "alpha": rng.normal(size=k).tolist(),
                "means": rng.uniform(size=(k, d)).tolist(),
                "icf": rng.normal(scale=0.3, size=(k, d + d * (d - 1) // 2)).tolist(),
                "x": rng.normal(size=(n, d)).tolist(),
                "gamma": 1.0,
                "m": 0,
            }


def lstm_inputs(rng):
    for layers in (2, 4):
        for c in (1024, 4096):
            yield f"l={layers} c={c}", {
                "main_params": rng.normal(scale=0.5, size=(2 * layers, 56)).tolist(),
                "extra_params": rng.normal(scale=0.5, size=(3, 14)).tolist(),
                "state": rng.normal(scale=0.5, size=(2 * layers, 14)).tolist(),
                "sequence": rng.uniform(size=(c, 14)).tolist(),
            }


def ode_inputs(rng):
    for n in (1000, 10000, 100000):
        for s in (1, 10, 100):
            yield f"n={n} s={s}", {"x": rng.uniform(size=n).tolist(), "s": s}


def ba_inputs(rng):
    cam = [0.12, -0.35, 0.2, 1.5, -0.8, -12.0, 420.0, 0.6, -0.4, 2e-3, 5e-6]
    for n, m, p in ((49, 7776, 31843), (21, 11315, 36455)):
        yield f"n={n} m={m} p={p}", {
            "n": n, "m": m, "p": p, "cam": cam, "x": [0.4, -0.7, 2.5], "w": 0.8,
            "feat": [-60.0, 35.0],
        }  # fmt: skip


def _rigid(rng):
    rotation, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    m = np.eye(4)
    m[:3, :3] = rotation
    m[:3, 3] = rng.normal(size=3)
    return m.tolist()


def ht_inputs(rng):
    bones, vertices, triangles = 22, 544, 1084
    weights = rng.uniform(size=(vertices, bones))
    model = {
        "bone_count": bones,
        "bone_names": [f"bone{i}" for i in range(bones)],
        "parents": [-1] + [int(rng.integers(0, i)) for i in range(1, bones)],
        "base_relatives": [_rigid(rng) for _ in range(bones)],
        "inverse_base_absolutes": [_rigid(rng) for _ in range(bones)],
        "base_positions": np.hstack([rng.normal(size=(vertices, 3)), np.ones((vertices, 1))]),
        "weights": (weights / weights.sum(axis=1, keepdims=True)).tolist(),
        "triangles": rng.integers(0, vertices, size=(triangles, 3)).tolist(),
        "is_mirrored": False,
    }
    model["base_positions"] = model["base_positions"].tolist()
    for complicated in (False, True):
        for points in (100, 192):
            targets = triangles if complicated else vertices
            yield f"{'complicated' if complicated else 'simple'} c={points}", {
                "theta": (0.3 * rng.normal(size=26)).tolist(),
                "us": rng.uniform(0, 0.5, size=(points, 2)).tolist() if complicated else [],
                "data": {
                    "model": model,
                    "correspondences": rng.integers(0, targets, size=points).tolist(),
                    "points": rng.normal(size=(points, 3)).tolist(),
                },
            }


def hello_inputs(rng):
    yield "x=3", 3.0


def lse_inputs(rng):
    for n in (2500, 5000, 10000, 20000, 40000, 80000, 160000, 320000, 640000, 1280000):
        yield f"n={n}", {"x": rng.random(n).tolist()}


def llsq_inputs(rng):
    for n in (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8196, 16392):
        yield f"m=128 n={n}", {"x": rng.random(128).tolist(), "n": n}


def det_inputs(rng):
    for ell in range(5, 12):
        yield f"ell={ell}", {"A": rng.random(ell * ell).tolist(), "ell": ell}


def kmeans_inputs(rng):
    for k in (10, 100, 1000):
        for n in (1000, 10000, 100000):
            for d in (8, 16):
                points = rng.random((n, d)).tolist()
                yield f"k={k} n={n} d={d}", {"points": points, "centroids": points[-k:]}


def particle_inputs(rng):
    yield "w=0", {"w": 0.0}


def saddle_inputs(rng):
    yield "start=(1, 1)", {"start": [1.0, 1.0]}


EVALS = {
    "hello": (hello_inputs, ("square", "double")),
    "gmm": (gmm_inputs, ("objective", "jacobian")),
    "lstm": (lstm_inputs, ("objective", "jacobian")),
    "ode": (ode_inputs, ("primal", "gradient")),
    "ba": (ba_inputs, ("objective", "jacobian")),
    "ht": (ht_inputs, ("objective", "jacobian")),
    "lse": (lse_inputs, ("primal", "gradient")),
    "llsq": (llsq_inputs, ("primal", "gradient")),
    "kmeans": (kmeans_inputs, ("cost", "dir")),
    "det": (det_inputs, ("primal", "gradient")),
    "particle": (particle_inputs, ("rr", "ff", "fr", "rf")),
    "saddle": (saddle_inputs, ("rr", "ff", "fr", "rf")),
}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gradbench.timings")
    parser.add_argument("--jit", action="store_true")
    parser.add_argument("--evals", nargs="+", default=list(EVALS), choices=list(EVALS))
    parser.add_argument("--min-runs", type=int, default=3)
    parser.add_argument("--min-seconds", type=float, default=0.0)
    args = parser.parse_args(argv)
    tool = Tool(jit=args.jit)
    rng = np.random.default_rng(31337)
    ident = 0
    for name in args.evals:
        make, functions = EVALS[name]
        assert tool.define(name)["success"]
        for size, input in make(rng):
            if isinstance(input, dict):
                input = input | {"min_runs": args.min_runs, "min_seconds": args.min_seconds}
            for function in functions:
                start = time.perf_counter()
                message = {"id": ident, "kind": "evaluate", "module": name,
                           "function": function, "input": input}  # fmt: skip
                reply = tool.handle(message)
                wall = time.perf_counter() - start
                ident += 1
                if not reply["success"]:
                    print(f"{name:8} {function:10} {size:28} FAILED: {reply['error']}")
                    continue
                times = [t["nanoseconds"] / 1e9 for t in reply["timings"]]
                prepare = wall - sum(times)
                verdict = check(name, function, input, reply["output"])
                print(
                    f"{name:8} {function:10} {size:28} median {np.median(times) * 1e3:10.3f} ms"
                    f"  (prepare {prepare:6.2f} s, {len(times)} runs)  {verdict}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
