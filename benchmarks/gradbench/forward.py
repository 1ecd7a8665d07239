"""Forward mode along chosen tangents, for the evals whose derivative is a set of Jacobian
columns (BA's blocks, HT's Jacobian)."""

from __future__ import annotations

import s2sad


class Columns:
    """`Columns(f, wrt)(args, tangents)`: the derivatives of `f(*args)` along each tangent,
    stacked on a new first axis. `tangents` holds one array per `wrt` argument, each with the
    tangents on its first axis; all of them go through one batched `s2sad.jvp` sweep (the
    primal runs once).

    This is NumPy mode under `--jit` too: s2sad has no compiled batched jvp yet, and the jitted
    `s2sad.jvp` run once per tangent would run the primal once per tangent, and neither BA's nor
    HT's compiles: Numba has no np.concatenate of a list (BA), nor the np.stack that the tangent
    of HT's np.array([[...], ...]) of rotation entries becomes, and s2sad falls back to Python."""

    def __init__(self, f, wrt: tuple):
        self.jvp = s2sad.jvp(f, wrt=wrt, batched=True)

    def __call__(self, args: tuple, tangents: tuple):
        return self.jvp(*args, tangent=tangents)[1]
