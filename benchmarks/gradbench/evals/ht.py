"""gradbench's `ht` eval (ADBench's hand tracking).

Input: `theta` (26: global rotation as an angle-axis vector, global translation, then the
fingers' angles), `us` (one pair a correspondence, or empty), and `data`: `correspondences`
(npts), `points` (npts, 3) and the hand `model`: `parents` (a bone's parent comes before it, -1
for the root), `base_relatives` and `inverse_base_absolutes` (one 4 x 4 matrix a bone, as rows),
`base_positions` (a vertex a row, homogeneous: 4), `weights` (a vertex a row, a bone a column),
`triangles` (three vertices a row), `is_mirrored`.

The model poses each bone by its Euler angles, chains the bones from the root, skins the
vertices with the weights, mirrors x for a left hand, and applies the global rotation, scale
(1) and translation. Without `us`, residual i is points[i] - vertex[correspondences[i]]; with
`us`, the hand point is u0 a + u1 b + (1 - u0 - u1) c over the vertices of triangle
correspondences[i]. `objective` answers the 3 npts residuals; `jacobian` their Jacobian as
rows, 26 columns for theta, with two columns d/du0 and d/du1 first when `us` is given (each
residual depends on its own pair alone).

The Jacobian is forward mode: 26 tangents, one per entry of theta, and with `us` two more, each
set in the same component of every pair (the same trick as BA's), all in one batched sweep.
"""

from __future__ import annotations

import numpy as np

from ..forward import Columns

FUNCTIONS = ("objective", "jacobian")
N_THETA = 26


def angle_axis_to_rotation_matrix(angle_axis):
    norm = np.sqrt(np.sum(angle_axis * angle_axis))
    if norm < 0.0001:
        return np.eye(3)
    x = angle_axis[0] / norm
    y = angle_axis[1] / norm
    z = angle_axis[2] / norm
    s = np.sin(norm)
    c = np.cos(norm)
    return np.array(
        [
            [x * x + (1 - x * x) * c, x * y * (1 - c) - z * s, x * z * (1 - c) + y * s],
            [x * y * (1 - c) + z * s, y * y + (1 - y * y) * c, y * z * (1 - c) - x * s],
            [x * z * (1 - c) - y * s, z * y * (1 - c) + x * s, z * z + (1 - z * z) * c],
        ]
    )


def euler_angles_to_rotation_matrix(xzy):
    tx = xzy[0]
    ty = xzy[2]
    tz = xzy[1]
    Rx = np.array([[1.0, 0.0, 0.0], [0.0, np.cos(tx), -np.sin(tx)], [0.0, np.sin(tx), np.cos(tx)]])
    Ry = np.array([[np.cos(ty), 0.0, np.sin(ty)], [0.0, 1.0, 0.0], [-np.sin(ty), 0.0, np.cos(ty)]])
    Rz = np.array([[np.cos(tz), -np.sin(tz), 0.0], [np.sin(tz), np.cos(tz), 0.0], [0.0, 0.0, 1.0]])
    return Rz @ Ry @ Rx


def to_pose_params(theta, n_bones):
    """Rows: global rotation, scale (1), global translation, then three angles a bone; each
    finger's four bones read 4 angles of theta (two for its base, one for each other joint)."""
    pose = np.zeros((n_bones + 3, 3))
    pose[0] = theta[0:3]
    pose[1] = 1.0
    pose[2] = theta[3:6]
    i_theta = 6
    i_pose = 5
    for finger in range(5):
        for joint in range(3):
            pose[i_pose, 0] = theta[i_theta]
            i_theta = i_theta + 1
            if joint == 0:
                pose[i_pose, 1] = theta[i_theta]
                i_theta = i_theta + 1
            i_pose = i_pose + 1
        i_pose = i_pose + 1
    return pose


def skinned_vertices(
    theta, parents, base_relatives, inverse_base_absolutes, base_positions, weights, is_mirrored
):
    """The posed hand's vertices, (nverts, 3)."""
    n_bones = parents.shape[0]
    pose = to_pose_params(theta, n_bones)
    absolutes = np.zeros((n_bones, 4, 4))
    for i in range(n_bones):
        posed = np.eye(4)
        posed[:3, :3] = euler_angles_to_rotation_matrix(pose[i + 3])
        relative = base_relatives[i] @ posed
        if parents[i] == -1:
            absolutes[i] = relative
        else:
            absolutes[i] = absolutes[parents[i]] @ relative
    positions = np.zeros((base_positions.shape[0], 3))
    for i in range(n_bones):
        transform = absolutes[i] @ inverse_base_absolutes[i]
        moved = base_positions @ transform.T
        positions = positions + moved[:, :3] * weights[:, i : i + 1]
    if is_mirrored:
        positions = positions * np.array([-1.0, 1.0, 1.0])
    R = angle_axis_to_rotation_matrix(pose[0]) * pose[1]
    return positions @ R.T + pose[2]


def ht_objective(
    theta,
    parents,
    base_relatives,
    inverse_base_absolutes,
    base_positions,
    weights,
    is_mirrored,
    correspondences,
    points,
):
    vertices = skinned_vertices(
        theta, parents, base_relatives, inverse_base_absolutes, base_positions, weights, is_mirrored
    )
    return np.ravel(points - vertices[correspondences])


def ht_objective_complicated(
    theta,
    us,
    parents,
    base_relatives,
    inverse_base_absolutes,
    base_positions,
    weights,
    is_mirrored,
    triangles,
    correspondences,
    points,
):
    vertices = skinned_vertices(
        theta, parents, base_relatives, inverse_base_absolutes, base_positions, weights, is_mirrored
    )
    corners = triangles[correspondences]
    u0 = us[:, 0:1]
    u1 = us[:, 1:2]
    hand = u0 * vertices[corners[:, 0]] + u1 * vertices[corners[:, 1]]
    hand = hand + (1.0 - u0 - u1) * vertices[corners[:, 2]]
    return np.ravel(points - hand)


def parse(input: dict) -> tuple:
    """(theta, us or None, model arguments, triangles, correspondences, points)."""
    data, model = input["data"], input["data"]["model"]
    theta = np.asarray(input["theta"], dtype=np.float64)
    us = np.asarray(input.get("us", []), dtype=np.float64).reshape(-1, 2)
    arrays = (
        np.asarray(model["parents"], dtype=np.int64),
        np.asarray(model["base_relatives"], dtype=np.float64),
        np.asarray(model["inverse_base_absolutes"], dtype=np.float64),
        np.asarray(model["base_positions"], dtype=np.float64),
        np.asarray(model["weights"], dtype=np.float64),
        bool(model["is_mirrored"]),
    )
    triangles = np.asarray(model["triangles"], dtype=np.int64).reshape(-1, 3)
    correspondences = np.asarray(data["correspondences"], dtype=np.int64)
    points = np.asarray(data["points"], dtype=np.float64)
    return theta, (us if us.shape[0] else None), arrays, triangles, correspondences, points


def prepare(function: str, input: dict, jit: bool):
    if function not in FUNCTIONS:
        raise ValueError(f"the ht eval has no function {function!r}")
    theta, us, model, triangles, correspondences, points = parse(input)
    if us is None:
        f, wrt = ht_objective, ("theta",)
        args = (theta, *model, correspondences, points)
        tangents = (np.eye(N_THETA),)
    else:
        f, wrt = ht_objective_complicated, ("theta", "us")
        args = (theta, us, *model, triangles, correspondences, points)
        t_us = np.zeros((2 + N_THETA,) + us.shape)
        t_us[0, :, 0] = 1.0
        t_us[1, :, 1] = 1.0
        tangents = (np.vstack([np.zeros((2, N_THETA)), np.eye(N_THETA)]), t_us)
    if function == "objective":
        return lambda: f(*args)
    columns = Columns(f, wrt)  # NumPy mode under --jit too (forward.py says why)
    columns(args, tangents)  # transform before the timed runs
    return lambda: columns(args, tangents).T


def output(function: str, result):
    return np.asarray(result, dtype=np.float64).tolist()
