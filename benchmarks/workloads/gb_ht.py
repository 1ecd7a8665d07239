"""gradbench's `ht` (ADBench's hand tracking): the Jacobian of the residuals of a skinned hand
model, side by side with the peers.

The NumPy objective and s2sad's Jacobian are the gradbench tool's (benchmarks/gradbench/evals/
ht.py): one batched `s2sad.jvp` of 26 tangents, one per entry of theta (`ht`), or 28 with the
two barycentric coordinates of every correspondence (`ht-complicated`: each residual depends on
its own pair alone, so one tangent set in u0 of every pair gives that column for all of them).
The Jacobian is returned as gradbench's (3 npts, 26 or 28) matrix.

The peers compute the same columns the same way, by forward mode along the same tangents: JAX,
jax.jit(jax.vmap(jax.jvp)); PyTorch, torch.func.vmap(torch.func.jvp); autograd (no vmap), its
forward mode (autograd.make_jvp) once per tangent. Their hand model is written functionally
(lists of bone transforms instead of in-place writes) for all three at once: each rotation is
I + sin(t) K + (1 - cos(t)) K^2 with the axis' constant cross-product matrix K, equal to the
eval's explicit matrices. They skip the eval's small-angle branch of the global rotation (a
Python `if` that jit cannot trace); the inputs here never take it.

The hand is synthetic (the sizes of ADBench's model: 22 bones, 544 vertices, 1084 triangles),
a random tree of rigid bones with random skinning weights; npts correspondences.
"""

from __future__ import annotations

import numpy as np

from benchmarks.gradbench.evals import ht as ht_eval
from benchmarks.gradbench.forward import Columns

from .common import Case, rng_for

BONES, VERTICES, TRIANGLES, N_THETA = 22, 544, 1084, 26
SIZES = {"smoke": [5], "quick": [1600], "full": [192, 1600, 12800]}  # 192: gradbench's hand2
AUTOGRAD_NPTS = {"quick": 200, "full": 200}  # its per-tangent forward passes are slow


# ----------------------------------------------------------------------------- inputs


def _rigid(rng) -> np.ndarray:
    rotation, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    m = np.eye(4)
    m[:3, :3] = rotation
    m[:3, 3] = rng.normal(size=3)
    return m


def make_inputs(npts: int, complicated: bool = False) -> dict:
    """The eval's arguments in the order of ht_objective (ht_objective_complicated with us)."""
    rng = rng_for("ht-complicated" if complicated else "ht", {"npts": npts})
    weights = rng.uniform(size=(VERTICES, BONES))
    model = {
        "parents": np.array([-1] + [int(rng.integers(0, i)) for i in range(1, BONES)]),
        "base_relatives": np.array([_rigid(rng) for _ in range(BONES)]),
        "inverse_base_absolutes": np.array([_rigid(rng) for _ in range(BONES)]),
        "base_positions": np.hstack([rng.normal(size=(VERTICES, 3)), np.ones((VERTICES, 1))]),
        "weights": weights / weights.sum(axis=1, keepdims=True),
        "is_mirrored": False,
    }
    theta = 0.3 * rng.normal(size=N_THETA)
    theta[0:3] += 0.2  # a global rotation well away from the small-angle branch
    if not complicated:
        correspondences = rng.integers(0, VERTICES, size=npts)
        return {"theta": theta, **model, "correspondences": correspondences,
                "points": rng.normal(size=(npts, 3))}  # fmt: skip
    return {
        "theta": theta,
        "us": 0.5 * rng.uniform(size=(npts, 2)),
        **model,
        "triangles": rng.integers(0, VERTICES, size=(TRIANGLES, 3)),
        "correspondences": rng.integers(0, TRIANGLES, size=npts),
        "points": rng.normal(size=(npts, 3)),
    }


def make_complicated_inputs(npts: int) -> dict:
    return make_inputs(npts, complicated=True)


def eval_input(inputs: dict) -> dict:
    """The same arguments in the layout of gradbench's ht input (what the tool's prepare
    reads; arrays where the eval sends lists)."""
    model = {k: inputs[k] for k in ("parents", "base_relatives", "inverse_base_absolutes",
                                    "base_positions", "weights", "is_mirrored")}  # fmt: skip
    model["triangles"] = inputs.get("triangles", np.zeros((0, 3), dtype=np.int64))
    data = {"model": model, "correspondences": inputs["correspondences"],
            "points": inputs["points"]}  # fmt: skip
    return {"theta": inputs["theta"], "us": inputs.get("us", []), "data": data}


def tangents(inputs: dict) -> tuple[np.ndarray, ...]:
    """One tangent per Jacobian column, in gradbench's column order (u0, u1, then theta)."""
    if "us" not in inputs:
        return (np.eye(N_THETA),)
    npts = inputs["us"].shape[0]
    t_us = np.zeros((2 + N_THETA, npts, 2))
    t_us[0, :, 0] = 1.0
    t_us[1, :, 1] = 1.0
    return np.vstack([np.zeros((2, N_THETA)), np.eye(N_THETA)]), t_us


# ----------------------------------------------------------------------------- s2sad


def _matrix(result):
    return (np.asarray(result, dtype=np.float64),)


def build_s2sad(f, inputs: dict, wrt):
    """The tool's `jacobian`: prepare() builds the batched jvp and runs it once; it is called at
    the row's first call, so that the first call includes the transform."""
    prepared = []

    def run():
        if not prepared:
            prepared.append(ht_eval.prepare("jacobian", eval_input(inputs), False))
        return prepared[0]()

    def probe():
        fresh = Columns(f, wrt)
        fresh.jvp.specialized(fresh.jvp._bind(list(inputs.values()), {}))

    return run, _matrix, probe


# ----------------------------------------------------------------------------- peers


AXES = np.zeros((3, 3, 3))  # AXES[a]: the cross-product matrix of the unit vector along a
AXES[0, 2, 1], AXES[0, 1, 2] = 1.0, -1.0
AXES[1, 0, 2], AXES[1, 2, 0] = 1.0, -1.0
AXES[2, 1, 0], AXES[2, 0, 1] = 1.0, -1.0


def make_hand(xp, const, cat, inputs: dict):
    """The residuals as a function of (theta,) or (theta, us), for an array module `xp`, with
    the model's arrays closed over as constants (`const` converts a NumPy array)."""
    n = inputs["parents"].shape[0]
    parents = [int(p) for p in inputs["parents"]]
    relatives = const(inputs["base_relatives"])
    inverses = const(inputs["inverse_base_absolutes"])
    base, weights = const(inputs["base_positions"]), const(inputs["weights"])
    points = const(inputs["points"])
    axes, eye3, corner = const(AXES), const(np.eye(3)), const(np.eye(4)[3:] * np.eye(4)[:, 3:])
    embed = const(np.eye(3, 4))  # 3 x 4: a 3 x 3 block into the top left of a 4 x 4
    # each bone's three Euler angles as positions in theta (26 is an appended zero)
    index = np.full((n, 3), N_THETA)
    i_theta = 6
    for finger in range(5):
        for joint in range(3):
            bone = 2 + 4 * finger + joint
            index[bone, 0] = i_theta
            i_theta += 1
            if joint == 0:
                index[bone, 1] = i_theta
                i_theta += 1
    index = const(index)
    mirror = const(np.array([-1.0, 1.0, 1.0]) if inputs["is_mirrored"] else np.ones(3))
    zero = const(np.zeros(1))
    if "triangles" in inputs:
        corners = inputs["triangles"][inputs["correspondences"]]
        picks = [const(corners[:, j]) for j in range(3)]
    else:
        picks = [const(inputs["correspondences"])]

    def axis_rotation(a, t):
        K = axes[a]
        return eye3 + xp.sin(t) * K + (1.0 - xp.cos(t)) * (K @ K)

    def residuals(theta, us=None):
        angles = cat([theta, zero])[index]  # (bones, 3): x, z, y
        absolutes = []
        moved = 0.0
        for i in range(n):
            a = angles[i]
            R = axis_rotation(2, a[1]) @ axis_rotation(1, a[2]) @ axis_rotation(0, a[0])
            relative = relatives[i] @ (embed.T @ R @ embed + corner)
            absolute = relative if parents[i] == -1 else absolutes[parents[i]] @ relative
            absolutes.append(absolute)
            transform = absolute @ inverses[i]
            moved = moved + (base @ transform.T)[:, :3] * weights[:, i : i + 1]
        aa = theta[0:3]
        norm = xp.sqrt(xp.sum(aa * aa))
        u = aa / norm
        cross = u[0] * axes[0] + u[1] * axes[1] + u[2] * axes[2]
        rotation = xp.cos(norm) * eye3 + xp.sin(norm) * cross
        rotation = rotation + (1.0 - xp.cos(norm)) * (u[:, None] * u[None, :])
        vertices = (moved * mirror) @ rotation.T + theta[3:6]
        if us is None:
            hand = vertices[picks[0]]
        else:
            u0, u1 = us[:, 0:1], us[:, 1:2]
            hand = u0 * vertices[picks[0]] + u1 * vertices[picks[1]]
            hand = hand + (1.0 - u0 - u1) * vertices[picks[2]]
        return (points - hand).reshape(-1)

    return residuals


def _wrt_values(inputs: dict) -> tuple:
    return (inputs["theta"],) if "us" not in inputs else (inputs["theta"], inputs["us"])


def build_jax(factory, inputs: dict, wrt):
    import jax
    import jax.numpy as jnp

    f = make_hand(jnp, jnp.asarray, jnp.concatenate, inputs)
    primals = tuple(jnp.asarray(v) for v in _wrt_values(inputs))
    T = tuple(jnp.asarray(t) for t in tangents(inputs))
    columns = jax.jit(jax.vmap(lambda *t: jax.jvp(f, primals, t)[1]))
    return (lambda: jax.block_until_ready(columns(*T)).T), _matrix


def build_torch(factory, inputs: dict, wrt):
    import torch
    from torch.func import jvp, vmap

    f = make_hand(torch, torch.tensor, torch.cat, inputs)
    primals = tuple(torch.tensor(v) for v in _wrt_values(inputs))
    T = tuple(torch.tensor(t) for t in tangents(inputs))
    columns = vmap(lambda *t: jvp(f, primals, t)[1])

    def run():
        with torch.no_grad():
            return columns(*T).T

    return run, lambda r: _matrix(r.numpy())


def build_autograd(factory, inputs: dict, wrt):
    import autograd.numpy as anp
    from autograd import make_jvp

    f = make_hand(anp, lambda a: a, anp.concatenate, inputs)
    primals = _wrt_values(inputs)
    jvp = make_jvp(f, tuple(range(len(primals))))(*primals)
    T = tangents(inputs)

    def run():
        return np.array([jvp(tuple(t[k] for t in T))[1] for k in range(T[0].shape[0])]).T

    return run, _matrix


def _na_factory():  # the rows are built from the inputs (make_hand), not from a factory
    return None


# ----------------------------------------------------------------------------- cases


def cases(mode: str) -> list[Case]:
    out = []
    reduced_npts = AUTOGRAD_NPTS.get(mode)
    for complicated in (False, True):
        for npts in SIZES[mode]:
            reduced = {}
            if reduced_npts is not None and npts > reduced_npts:
                reduced = {"autograd": {"npts": reduced_npts}}
            out.append(
                Case(
                    workload="ht-complicated" if complicated else "ht",
                    family="gradbench",
                    quick=False,
                    size={"npts": npts},
                    make_inputs=make_complicated_inputs if complicated else make_inputs,
                    numpy_f=(
                        ht_eval.ht_objective_complicated if complicated else ht_eval.ht_objective
                    ),
                    wrt=("theta", "us") if complicated else ("theta",),
                    peers={p: _na_factory for p in ("jax", "torch", "autograd")},
                    reduced=reduced,
                    build={
                        "s2sad": build_s2sad,
                        "jax": build_jax,
                        "torch": build_torch,
                        "autograd": build_autograd,
                    },
                    notes=[
                        (
                            f"Jacobian ({'28' if complicated else '26'} columns), not a gradient: "
                            "forward mode along the same tangents, s2sad one batched jvp, JAX "
                            "jit(vmap(jvp)), torch.func vmap(jvp), autograd make_jvp per tangent"
                        )
                    ],
                )
            )
    return out
