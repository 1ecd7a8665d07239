"""Bundle adjustment residuals and their Jacobian (ADBench's "BA" objective).

A camera has 11 parameters: a Rodrigues rotation vector r (3), the camera centre C (3), the
focal length f (1), the principal point x0 (2) and two radial distortion coefficients k (2).
An observation i sees point X (3) through camera c(i), with a weight w_i and a measured feature
(2). Its residuals are

    Xcam = R(r) (X - C)                    R: Rodrigues' rotation by the vector r
    p    = -Xcam[:2] / Xcam[2]             projection onto the image plane
    L    = 1 + k1 |p|^2 + k2 |p|^4         radial distortion
    reprojection residual = w (f L p + x0 - feature)        (2 values)
    weight residual       = 1 - w^2                         (1 value)

R(r) X = X cos t + (u x X) sin t + u (u . X)(1 - cos t), with t = |r| and u = r / t; where
|r|^2 is exactly 0 the rotation is X + r x X, the first-order form (as ADBench does).

The quantity is the Jacobian of each observation's 3 residuals with respect to its camera (11),
its point (3) and its weight (1): a 3 x 15 block per observation (ADBench's sparse BA Jacobian
holds exactly these blocks: a 2 x 15 block per reprojection and d(1 - w^2)/dw). Every row here
returns it as three arrays, (p, 3, 11), (p, 3, 3) and (p, 3).

Inputs follow ADBench's generator: one base camera, point, weight and feature replicated to n
cameras, m points and p observations, observation i seeing camera i mod n and point i mod m;
here each copy gets small noise (fixed seed), so that no two blocks are equal. The objective
takes the cameras and points already gathered per observation ((p, 11) and (p, 3)), since the
blocks are derivatives with respect to each observation's copy; the gather is done once when
the inputs are made.

Two workloads:

- `ba`: the residuals of all observations at once, written over arrays (the small-angle branch
  becomes np.where). Observations are independent, so reverse mode with one seed per residual,
  the same residual of every observation, gives row r of every block at once: s2sad takes one
  `s2sad.vjp` of the residuals and pulls the three seeds back at once with
  `pullback.stacked` (the equivalent of vmap(jacrev), and what JAX and PyTorch do; jitted, one
  compiled call runs the forward sweep once and the adjoint once per seed). Forward mode, one `s2sad.jvp(..., batched=True)`
  of 15 tangents (vmap(jacfwd)), costs about three times as much (`build_s2sad_forward`). JAX:
  jax.jit(jax.vmap(jax.jacrev(per-observation residual))); PyTorch:
  torch.func.vmap(torch.func.jacrev(...)); autograd has no vmap, so it calls autograd.jacobian
  once per observation, at a smaller p.
- `ba-perobs`: `s2sad.jacobian` of the per-observation residual function, called once per
  observation from a Python loop (how the issue asks for it), in NumPy mode and with
  jit="strict". Its primal is the per-observation residual called in the same loop (with
  jit=True: numba.njit of it, called in the same loop). The peers are those of `ba`.
"""

from __future__ import annotations

import numpy as np

import s2sad
from s2sad.compiled_jacobian import CALLS_BEFORE_COMPILING

from .common import Case, rng_for

N_CAM, N_PT = 11, 3
SLOTS = N_CAM + N_PT + 1  # parameters per observation: camera, point, weight
CHUNK = 4096  # observations per sweep (their values and cotangents stay in cache)

# (n cameras, m points, p observations). ADBench's ba1 is n=49, m=7776, p=31843.
SIZES = {
    "smoke": {"ba": [(3, 4, 6)], "ba-perobs": [(3, 4, 6)]},
    "quick": {"ba": [(49, 7776, 31843)], "ba-perobs": [(49, 500, 1000)]},
    "full": {"ba": [(49, 7776, 31843), (161, 48126, 182072)], "ba-perobs": [(49, 7776, 31843)]},
}
# autograd's per-observation loop (about 1 ms an observation): a smaller p
AUTOGRAD_P = {"quick": 200, "full": 1000}


# ----------------------------------------------------------------------------- inputs


def make_inputs(n: int, m: int, p: int) -> dict:
    rng = rng_for("ba", {"n": n, "m": m, "p": p})
    base_cam = np.array([0.12, -0.35, 0.2, 1.5, -0.8, -12.0, 420.0, 0.6, -0.4, 2e-3, 5e-6])
    cam_noise = np.array([0.02, 0.02, 0.02, 0.1, 0.1, 0.1, 5.0, 0.05, 0.05, 1e-4, 1e-7])
    cams = base_cam + cam_noise * rng.normal(size=(n, N_CAM))
    points = np.array([0.4, -0.7, 2.5]) + 0.1 * rng.normal(size=(m, 3))
    obs = np.arange(p)
    return {
        "cams": cams[obs % n],
        "X": points[obs % m],
        "w": 0.8 + 0.05 * rng.normal(size=p),
        "feats": np.array([-60.0, 35.0]) + rng.normal(size=(p, 2)),
    }


# ----------------------------------------------------------------------------- NumPy


def ba_residuals(cams, X, w, feats):
    """All observations at once: (p, 3) residuals."""
    r = cams[:, 0:3]
    P = X - cams[:, 3:6]
    theta2 = np.sum(r * r, axis=1)
    rotated = theta2 != 0.0
    theta = np.sqrt(np.where(rotated, theta2, 1.0))  # no 0/0 in the branch not taken
    c = np.cos(theta)[:, None]
    s = np.sin(theta)[:, None]
    u = r / theta[:, None]
    P0, P1, P2 = P[:, 0:1], P[:, 1:2], P[:, 2:3]
    u0, u1, u2 = u[:, 0:1], u[:, 1:2], u[:, 2:3]
    r0, r1, r2 = r[:, 0:1], r[:, 1:2], r[:, 2:3]
    u_x_P = np.concatenate([u1 * P2 - u2 * P1, u2 * P0 - u0 * P2, u0 * P1 - u1 * P0], axis=1)
    r_x_P = np.concatenate([r1 * P2 - r2 * P1, r2 * P0 - r0 * P2, r0 * P1 - r1 * P0], axis=1)
    t = (1.0 - c) * np.sum(u * P, axis=1, keepdims=True)
    Xcam = np.where(rotated[:, None], P * c + u_x_P * s + u * t, P + r_x_P)
    proj = -Xcam[:, 0:2] / Xcam[:, 2:3]
    rsq = np.sum(proj * proj, axis=1, keepdims=True)
    L = 1.0 + cams[:, 9:10] * rsq + cams[:, 10:11] * rsq * rsq
    err = w[:, None] * (cams[:, 6:7] * L * proj + cams[:, 7:9] - feats)
    return np.concatenate([err, (1.0 - w * w)[:, None]], axis=1)


def ba_obs(cam, X, w, feat):
    """One observation: cam (11,), X (3,), w a float, feat (2,); returns its 3 residuals.
    Written on scalars with an `if` for the small angle, as ADBench's C++ is."""
    r0, r1, r2 = cam[0], cam[1], cam[2]
    p0 = X[0] - cam[3]
    p1 = X[1] - cam[4]
    p2 = X[2] - cam[5]
    theta2 = r0 * r0 + r1 * r1 + r2 * r2
    if theta2 != 0.0:
        theta = np.sqrt(theta2)
        c = np.cos(theta)
        s = np.sin(theta)
        u0 = r0 / theta
        u1 = r1 / theta
        u2 = r2 / theta
        t = (1.0 - c) * (u0 * p0 + u1 * p1 + u2 * p2)
        x0 = p0 * c + (u1 * p2 - u2 * p1) * s + u0 * t
        x1 = p1 * c + (u2 * p0 - u0 * p2) * s + u1 * t
        x2 = p2 * c + (u0 * p1 - u1 * p0) * s + u2 * t
    else:
        x0 = p0 + (r1 * p2 - r2 * p1)
        x1 = p1 + (r2 * p0 - r0 * p2)
        x2 = p2 + (r0 * p1 - r1 * p0)
    q0 = -x0 / x2
    q1 = -x1 / x2
    rsq = q0 * q0 + q1 * q1
    L = 1.0 + cam[9] * rsq + cam[10] * rsq * rsq
    e0 = w * (cam[6] * L * q0 + cam[7] - feat[0])
    e1 = w * (cam[6] * L * q1 + cam[8] - feat[1])
    return np.array([e0, e1, 1.0 - w * w])


def ba_perobs(cams, X, w, feats):
    """The primal of `ba-perobs`: ba_obs called once per observation."""
    p = w.shape[0]
    out = np.zeros((p, 3))
    for i in range(p):
        out[i] = ba_obs(cams[i], X[i], w[i], feats[i])
    return out


def _observations(inputs: dict):
    cams, X, w, feats = inputs.values()
    return [(cams[i], X[i], float(w[i]), feats[i]) for i in range(w.shape[0])]


def _stack_blocks(blocks) -> tuple[np.ndarray, ...]:
    return tuple(np.array([b[k] for b in blocks], dtype=np.float64) for k in range(3))


def _as_blocks(result) -> tuple[np.ndarray, ...]:
    return tuple(np.asarray(r, dtype=np.float64) for r in result)


# ----------------------------------------------------------------------------- s2sad rows


def build_s2sad_perobs(f, inputs: dict, wrt, jit=False, **options):
    """s2sad.jacobian of ba_obs, called per observation. The probe, which the runner times
    with empty caches, transforms: in NumPy mode it calls a fresh jacobian on the first
    observation (the batched transform plus one call, about 0.1 ms); with jit, where the
    jacobian runs one compiled pullback per output row, it asks for that pullback's code alone
    (Numba compiles it at the first call). `options` (parallel=True) go to s2sad.jacobian."""
    J = s2sad.jacobian(ba_obs, wrt=(0, 1, 2), jit=jit, **options)
    obs = _observations(inputs)
    warm = [bool(jit)]

    def run():
        if warm[0]:  # the first call (the runner's warm-up, reported as the first call) makes
            warm[0] = False  # the one compiled function for all rows, however few observations
            for _ in range(CALLS_BEFORE_COMPILING + 1):
                J(*obs[0])
        return [J(*o) for o in obs]

    def probe():
        fresh = s2sad.jacobian(ba_obs, wrt=(0, 1, 2), jit=jit, **options)
        if jit:
            fresh.backward.specialized(fresh.backward._bind(obs[0], {}))
        else:
            fresh(*obs[0])

    return run, lambda r: _stack_blocks(r), probe


def build_s2sad_perobs_jit(f, inputs: dict, wrt, **options):
    return build_s2sad_perobs(f, inputs, wrt, jit="strict", **options)


def build_numba_perobs(f, inputs: dict):
    import numba

    compiled = numba.njit(ba_obs, cache=True)  # (as builders.build_numba_primal)
    obs = _observations(inputs)
    return lambda: [compiled(*o) for o in obs]


def build_s2sad_vectorised(f, inputs: dict, wrt, jit=False, **options):
    """One s2sad.vjp of the residuals per chunk of observations and its pullback of three seeds
    (`pullback.stacked`), seed r being residual r of every observation: pullback r gives row r
    of every block at once (the blocks' rows are independent across observations). The primal
    runs once per chunk; jitted, the pullback's forward sweep too, and its adjoint per seed."""
    vjp = s2sad.vjp(f, wrt=("cams", "X", "w"), jit=jit, **options)
    args = list(inputs.values())
    p = args[2].shape[0]

    def run():
        blocks = np.empty((p, 3, N_CAM)), np.empty((p, 3, N_PT)), np.empty((p, 3))
        seeds = np.zeros((3, min(CHUNK, p), 3))  # seed r: residual r of every observation
        for r in range(3):
            seeds[r, :, r] = 1.0
        for lo in range(0, p, CHUNK):
            part = slice(lo, lo + CHUNK)
            out, pullback = vjp(*(a[part] for a in args))
            rows = pullback.stacked(seeds[:, : out.shape[0]])  # (3, chunk, ...): row r of each
            for block, row in zip(blocks, rows):
                block[part] = np.moveaxis(row, 0, 1)
        return blocks

    def probe():  # the transform alone, as for the gradient workloads
        fresh = s2sad.vjp(f, wrt=("cams", "X", "w"), jit=jit, **options)
        fresh.specialized(fresh._bind(args, {}))

    return run, _as_blocks, probe


def build_s2sad_vectorised_jit(f, inputs: dict, wrt, **options):
    return build_s2sad_vectorised(f, inputs, wrt, jit="strict", **options)


def build_s2sad_forward(f, inputs: dict, wrt):
    """One batched s2sad.jvp of the residuals over all observations: tangent row `slot` is 1 in
    that parameter slot of every observation, so output row `slot` is column `slot` of every
    observation's block. The 15 tangents go through in one sweep (the primal runs once)."""
    jvp = s2sad.jvp(f, wrt=("cams", "X", "w"), batched=True)
    args = list(inputs.values())
    cams, X, w, _ = args
    p = w.shape[0]
    T_cams = np.zeros((SLOTS, p, N_CAM))
    T_X = np.zeros((SLOTS, p, N_PT))
    T_w = np.zeros((SLOTS, p))
    for j in range(N_CAM):
        T_cams[j, :, j] = 1.0
    for j in range(N_PT):
        T_X[N_CAM + j, :, j] = 1.0
    T_w[-1] = 1.0

    def run():
        blocks = np.empty((p, 3, SLOTS))
        for lo in range(0, p, CHUNK):  # observations are independent: chunks that fit in cache
            part = slice(lo, lo + CHUNK)
            tangents = (T_cams[:, part], T_X[:, part], T_w[:, part])
            rows = jvp(*(a[part] for a in args), tangent=tangents)[1]  # (15, chunk, 3)
            blocks[part] = np.moveaxis(rows, 0, 2)
        return blocks[:, :, :N_CAM], blocks[:, :, N_CAM : N_CAM + N_PT], blocks[:, :, -1]

    def probe():  # the transform alone, as for the gradient workloads
        fresh = s2sad.jvp(f, wrt=("cams", "X", "w"), batched=True)
        fresh.specialized(fresh._bind(args, {}))

    return run, _as_blocks, probe


# ----------------------------------------------------------------------------- peers


def jax_factory():
    import jax.numpy as jnp

    def ba_obs(cam, X, w, feat):
        r = cam[0:3]
        P = X - cam[3:6]
        theta2 = jnp.sum(r * r)
        rotated = theta2 != 0.0
        theta = jnp.sqrt(jnp.where(rotated, theta2, 1.0))
        u = r / theta
        c, s = jnp.cos(theta), jnp.sin(theta)
        full = P * c + jnp.cross(u, P) * s + u * ((1.0 - c) * jnp.dot(u, P))
        Xcam = jnp.where(rotated, full, P + jnp.cross(r, P))
        proj = -Xcam[0:2] / Xcam[2]
        rsq = jnp.sum(proj * proj)
        L = 1.0 + cam[9] * rsq + cam[10] * rsq * rsq
        err = w * (cam[6] * L * proj + cam[7:9] - feat)
        return jnp.concatenate([err, jnp.stack([1.0 - w * w])])

    return ba_obs


def build_jax(f, inputs: dict, wrt):
    import jax
    import jax.numpy as jnp

    jac = jax.jit(jax.vmap(jax.jacrev(f, argnums=(0, 1, 2))))
    args = [jnp.asarray(v) for v in inputs.values()]
    return (lambda: jax.block_until_ready(jac(*args))), _as_blocks


def torch_factory():
    import torch

    def ba_obs(cam, X, w, feat):
        r = cam[0:3]
        P = X - cam[3:6]
        theta2 = torch.sum(r * r)
        rotated = theta2 != 0.0
        theta = torch.sqrt(torch.where(rotated, theta2, torch.ones_like(theta2)))
        u = r / theta
        c, s = torch.cos(theta), torch.sin(theta)
        full = P * c + torch.linalg.cross(u, P) * s + u * ((1.0 - c) * torch.dot(u, P))
        Xcam = torch.where(rotated, full, P + torch.linalg.cross(r, P))
        proj = -Xcam[0:2] / Xcam[2]
        rsq = torch.sum(proj * proj)
        L = 1.0 + cam[9] * rsq + cam[10] * rsq * rsq
        err = w * (cam[6] * L * proj + cam[7:9] - feat)
        return torch.cat([err, torch.stack([1.0 - w * w])])

    return ba_obs


def build_torch(f, inputs: dict, wrt):
    import torch
    from torch.func import jacrev, vmap

    jac = vmap(jacrev(f, argnums=(0, 1, 2)))
    args = [torch.tensor(v) for v in inputs.values()]

    def run():
        with torch.no_grad():  # torch.func transforms need no autograd graph of their own
            return jac(*args)

    return run, lambda r: tuple(t.numpy().astype(np.float64) for t in r)


def autograd_factory():
    import autograd.numpy as anp

    def ba_obs(cam, X, w, feat):
        r = cam[0:3]
        P = X - cam[3:6]
        theta2 = anp.sum(r * r)
        if theta2 != 0.0:
            theta = anp.sqrt(theta2)
            u = r / theta
            c, s = anp.cos(theta), anp.sin(theta)
            Xcam = P * c + anp.cross(u, P) * s + u * ((1.0 - c) * anp.dot(u, P))
        else:
            Xcam = P + anp.cross(r, P)
        proj = -Xcam[0:2] / Xcam[2]
        rsq = anp.sum(proj * proj)
        L = 1.0 + cam[9] * rsq + cam[10] * rsq * rsq
        err = w * (cam[6] * L * proj + cam[7:9] - feat)
        return anp.concatenate([err, anp.array([1.0 - w * w])])

    return ba_obs


def build_autograd(f, inputs: dict, wrt):
    """autograd.jacobian takes one argument: the observation's 15 parameters as one vector
    (one forward pass and three backward ones per observation, not three of each)."""
    from autograd import jacobian

    def packed(theta, feat):
        return f(theta[:N_CAM], theta[N_CAM : N_CAM + N_PT], theta[-1], feat)

    jac = jacobian(packed)
    thetas = [(np.concatenate([c, x, [w]]), feat) for c, x, w, feat in _observations(inputs)]

    def run():
        return [jac(theta, feat) for theta, feat in thetas]

    def fetch(blocks):
        J = np.array(blocks, dtype=np.float64)  # (p, 3, 15)
        return J[:, :, :N_CAM], J[:, :, N_CAM : N_CAM + N_PT], J[:, :, -1]

    return run, fetch


# ----------------------------------------------------------------------------- cases

WRT = ("cams", "X", "w")
PEERS = {"jax": jax_factory, "torch": torch_factory, "autograd": autograd_factory}
PEER_BUILD = {"jax": build_jax, "torch": build_torch, "autograd": build_autograd}


def cases(mode: str) -> list[Case]:
    sizes = SIZES[mode]
    reduced_p = AUTOGRAD_P.get(mode)

    def slow_peers(n, m, p):
        if reduced_p is None or p <= reduced_p:
            return {}
        return {"autograd": {"n": n, "m": m, "p": reduced_p}}

    out = []
    for n, m, p in sizes["ba"]:
        reduced = slow_peers(n, m, p)
        out.append(
            Case(
                workload="ba",
                family="ba",
                size={"n": n, "m": m, "p": p},
                make_inputs=make_inputs,
                numpy_f=ba_residuals,
                wrt=WRT,
                peers=PEERS,
                reduced=reduced,
                build={
                    "s2sad": build_s2sad_vectorised,
                    "s2sad-jit": build_s2sad_vectorised_jit,
                    **PEER_BUILD,
                },
                notes=[
                    "Jacobian blocks (3 x 15 per observation), not a gradient; s2sad: one vjp "
                    "over all observations and pullback.stacked of a seed per residual; JAX, torch: "
                    "vmap(jacrev); autograd: autograd.jacobian per observation"
                ],
            )
        )
    for n, m, p in sizes["ba-perobs"]:
        out.append(
            Case(
                workload="ba-perobs",
                family="ba",
                size={"n": n, "m": m, "p": p},
                make_inputs=make_inputs,
                numpy_f=ba_perobs,
                wrt=WRT,
                peers={peer: "n/a: the peers' rows are those of ba" for peer in PEERS},
                check_peers=PEERS,
                check_make_inputs=make_inputs,
                reduced=slow_peers(n, m, p),
                jit=True,
                parallel=True,
                build={
                    "s2sad": build_s2sad_perobs,
                    "s2sad-jit": build_s2sad_perobs_jit,
                    "numba-primal": build_numba_perobs,
                    **PEER_BUILD,
                },
                notes=[
                    "s2sad.jacobian(ba_obs) called once per observation from a Python loop; "
                    "f: ba_obs in the same loop (jit: numba.njit(ba_obs) in the same loop)"
                ],
            )
        )
    return out
