"""gradbench's `ba` eval (ADBench's bundle adjustment). The residuals are
benchmarks/workloads/ba.py's `ba_residuals`: every observation's reprojection error (2) and
weight error 1 - w^2, over arrays of observations.

Input: `n` cameras, `m` points, `p` observations, and one camera `cam` (11), point `x` (3),
weight `w` and feature `feat` (2), which every camera, point, weight and feature copies;
observation i sees camera i mod n and point i mod m. `objective` answers the residuals as
gradbench lists them, the first observation's and a count:
`{"reproj_error": {"elements": [2], "repeated": p}, "w_err": {"element": e, "repeated": p}}`.
`jacobian` answers the (3p) x (11n + 3m + p) Jacobian in compressed sparse rows
(`{"rows": 3p + 1 offsets, "cols", "vals"}`): two rows of 15 entries per observation (its
camera's 11 columns, its point's 3, its weight's 1), then one row per weight error.

The Jacobian's 15 columns of each observation's block are 15 forward-mode tangents, one per
parameter slot, each set in that slot of every observation at once: observations are
independent, so tangent `slot` gives column `slot` of every block.
"""

from __future__ import annotations

import numpy as np

from benchmarks.workloads.ba import ba_residuals

from ..forward import Columns

FUNCTIONS = ("objective", "jacobian")
N_CAM, N_PT = 11, 3
SLOTS = N_CAM + N_PT + 1
CHUNK = 4096  # observations per forward sweep: 15 tangents of each stay in cache


def parse(input: dict) -> dict:
    n, m, p = int(input["n"]), int(input["m"]), int(input["p"])
    obs = np.arange(p)
    return {
        "n": n,
        "m": m,
        "cams": np.tile(np.asarray(input["cam"], dtype=np.float64), (n, 1)),
        "X": np.tile(np.asarray(input["x"], dtype=np.float64), (m, 1)),
        "w": np.full(p, float(input["w"])),
        "feats": np.tile(np.asarray(input["feat"], dtype=np.float64), (p, 1)),
        "cam_of": obs % n,
        "point_of": obs % m,
    }


def slot_tangents(p: int) -> tuple:
    """Tangent `slot` is 1 in that parameter slot of every one of p observations."""
    t_cams = np.zeros((SLOTS, p, N_CAM))
    t_X = np.zeros((SLOTS, p, N_PT))
    t_w = np.zeros((SLOTS, p))
    for j in range(N_CAM):
        t_cams[j, :, j] = 1.0
    for j in range(N_PT):
        t_X[N_CAM + j, :, j] = 1.0
    t_w[-1] = 1.0
    return t_cams, t_X, t_w


def sparse_layout(n: int, m: int, cam_of, point_of) -> tuple:
    """The CSR row offsets and column indices of the Jacobian (they depend on the sizes alone)."""
    p = cam_of.shape[0]
    rows = np.concatenate([np.arange(0, 30 * p + 1, 15), 30 * p + np.arange(1, p + 1)])
    block_cols = np.concatenate(
        [
            N_CAM * cam_of[:, None] + np.arange(N_CAM),
            N_CAM * n + N_PT * point_of[:, None] + np.arange(N_PT),
            (N_CAM * n + N_PT * m + np.arange(p))[:, None],
        ],
        axis=1,
    )  # (p, 15): the columns of each observation's two reprojection rows
    cols = np.concatenate([np.repeat(block_cols, 2, axis=0).ravel(), block_cols[:, -1]])
    return rows, cols


def prepare(function: str, input: dict, jit: bool):
    data = parse(input)
    if function == "objective":
        cams, X, w, feats = data["cams"], data["X"], data["w"], data["feats"]
        cam_of, point_of = data["cam_of"], data["point_of"]
        return lambda: ba_residuals(cams[cam_of], X[point_of], w, feats)
    if function == "jacobian":
        return jacobian_of(data)
    raise ValueError(f"the ba eval has no function {function!r}")


def jacobian_of(data: dict):
    """The timed work of `jacobian` on parsed data (any cameras, points, weights and features,
    not only copies of one): gather each observation's camera and point, push the 15 slot
    tangents through in chunks of observations, and lay the blocks out in CSR."""
    cams, X, w, feats = data["cams"], data["X"], data["w"], data["feats"]
    cam_of, point_of = data["cam_of"], data["point_of"]
    p = w.shape[0]
    columns = Columns(ba_residuals, ("cams", "X", "w"))  # NumPy mode under --jit too
    tangents = slot_tangents(min(p, CHUNK))
    columns((cams[:1], X[:1], w[:1], feats[:1]), tuple(t[:, :1] for t in tangents))  # transform
    rows, cols = sparse_layout(data["n"], data["m"], cam_of, point_of)

    def jacobian():
        blocks = np.empty((SLOTS, p, 3))  # blocks[slot, i]: column `slot` of block i
        obs_cams, obs_X = cams[cam_of], X[point_of]
        for lo in range(0, p, CHUNK):
            part = slice(lo, lo + CHUNK)
            size = min(p, lo + CHUNK) - lo
            args = (obs_cams[part], obs_X[part], w[part], feats[part])
            blocks[:, part] = columns(args, tuple(t[:, :size] for t in tangents))
        reproj = np.transpose(blocks[:, :, :2], (1, 2, 0))  # (p, 2, 15): rows of each block
        vals = np.concatenate([reproj.ravel(), blocks[-1, :, 2]])
        return rows, cols, vals

    return jacobian


def output(function: str, result):
    if function == "objective":
        p = result.shape[0]
        return {
            "reproj_error": {"elements": result[0, :2].tolist(), "repeated": p},
            "w_err": {"element": float(result[0, 2]), "repeated": p},
        }
    rows, cols, vals = result
    return {"rows": rows.tolist(), "cols": cols.tolist(), "vals": vals.tolist()}
