"""Loop code: objectives whose natural form is a Python loop over scalars or array elements.

- `ode-euler`: explicit Euler for a forced logistic equation with decay,
      y' = a y (1 - y) - c y + 0.1 sin(t),   y(0) = y0,   t in [0, t_end],
  in `steps` steps of h = t_end / steps; the objective is y(t_end), differentiated with respect
  to (y0, a, c).
- `linrec`: the linear recurrence y_0 = x_0, y_i = a y_(i-1) + x_i, written as in-place writes
  into an array; the objective is mean(y^2), differentiated with respect to (x, a).
- `stencil-loops`: a discrete Ginzburg-Landau energy of a 2-D field u (N x N),
      E = sum_(i,j < N-1) 0.5 k ((u[i+1,j] - u[i,j])^2 + (u[i,j+1] - u[i,j])^2)
                          + 0.25 (u[i,j]^2 - 1)^2,
  as a double loop over grid points; differentiated with respect to u.
- `stencil`: the same energy with array slices (no loop).
- `conv1d-loops`: a valid 1-D convolution (cross-correlation) of a signal x (n) with a filter
  w (m), y_i = sum_k w_k x_(i+k) for i < n - m + 1, as two nested loops with a scalar
  accumulator and in-place writes y[i] = acc; the objective is sum(tanh(y)), differentiated
  with respect to (x, w).

JAX runs the loops with lax.fori_loop / lax.scan under jit (for conv1d-loops, each output's
window is read with one lax.dynamic_slice: see conv1d_jax). The PyTorch and autograd versions
are the same Python loops; PyTorch unbinds the array into scalars once (`x.unbind()`), because
indexing one element at a time makes its backward pass quadratic. Where a Python-loop peer
would take too long at the benchmark size it runs at a smaller size (`reduced`); s2sad, when it
can, is then also timed at that size for the ratio.
"""

from __future__ import annotations

import math

import numpy as np

from .common import Case, rng_for

# ----------------------------------------------------------------------------- explicit Euler


def ode_inputs(steps: int) -> dict:
    return {"y0": 0.1, "a": 1.5, "c": 0.5, "steps": steps, "t_end": 10.0}


def ode_euler(y0, a, c, steps, t_end):
    """Works unchanged on Python floats (NumPy primal, s2sad), autograd boxes and torch 0-d
    tensors: the only function it calls is math.sin of the (undifferentiated) time."""
    h = t_end / steps
    y = y0
    for i in range(steps):
        t = i * h
        y = y + h * (a * y * (1.0 - y) - c * y + 0.1 * math.sin(t))
    return y


def ode_jax():
    import jax.numpy as jnp
    from jax import lax

    def ode_euler(y0, a, c, steps, t_end):
        h = t_end / steps

        def body(i, y):
            t = i * h
            return y + h * (a * y * (1.0 - y) - c * y + 0.1 * jnp.sin(t))

        return lax.fori_loop(0, steps, body, y0)

    return ode_euler


def ode_same():
    return ode_euler


# ----------------------------------------------------------------------------- linear recurrence


def linrec_inputs(n: int) -> dict:
    rng = rng_for("linrec", {"n": n})
    return {"x": rng.normal(size=n), "a": 0.9}


def linrec(x, a):
    n = x.shape[0]
    y = np.zeros(n)
    y[0] = x[0]
    for i in range(1, n):
        y[i] = a * y[i - 1] + x[i]
    return np.mean(y**2)


def linrec_autograd():
    def linrec(x, a):
        # autograd cannot write into arrays, and its stack of n boxes has an O(n^2) backward:
        # carry the recurrence in a scalar and sum the squares as they come
        n = x.shape[0]
        y = x[0]
        total = y * y
        for i in range(1, n):
            y = a * y + x[i]
            total = total + y * y
        return total / n

    return linrec


def linrec_torch():
    import torch

    def linrec(x, a):
        xs = x.unbind(0)
        ys = [xs[0]]
        for i in range(1, len(xs)):
            ys.append(a * ys[i - 1] + xs[i])
        y = torch.stack(ys)
        return torch.mean(y**2)

    return linrec


def linrec_jax():
    import jax.numpy as jnp
    from jax import lax

    def linrec(x, a):
        def step(prev, xi):
            y = a * prev + xi
            return y, y

        _, rest = lax.scan(step, x[0], x[1:])
        y = jnp.concatenate([x[:1], rest])
        return jnp.mean(y**2)

    return linrec


# ----------------------------------------------------------------------------- 2-D stencil energy


def stencil_inputs(N: int) -> dict:
    rng = rng_for("stencil", {"N": N})
    return {"u": rng.normal(size=(N, N)), "k": 0.7}


def stencil_loops(u, k):
    n0, n1 = u.shape
    energy = 0.0
    for i in range(n0 - 1):
        for j in range(n1 - 1):
            c = u[i, j]
            dv = u[i + 1, j] - c
            dh = u[i, j + 1] - c
            energy = energy + 0.5 * k * (dv * dv + dh * dh) + 0.25 * (c * c - 1.0) ** 2
    return energy


def stencil_loops_autograd():
    return stencil_loops  # autograd's boxes index and add like the NumPy scalars do


def stencil_loops_torch():
    def stencil_loops(u, k):
        cells = [row.unbind(0) for row in u.unbind(0)]
        n0, n1 = len(cells), len(cells[0])
        energy = 0.0
        for i in range(n0 - 1):
            for j in range(n1 - 1):
                c = cells[i][j]
                dv = cells[i + 1][j] - c
                dh = cells[i][j + 1] - c
                energy = energy + 0.5 * k * (dv * dv + dh * dh) + 0.25 * (c * c - 1.0) ** 2
        return energy

    return stencil_loops


def stencil_loops_jax():
    from jax import lax

    def stencil_loops(u, k):
        n0, n1 = u.shape

        def row(i, energy):
            def col(j, energy):
                c = u[i, j]
                dv = u[i + 1, j] - c
                dh = u[i, j + 1] - c
                return energy + 0.5 * k * (dv * dv + dh * dh) + 0.25 * (c * c - 1.0) ** 2

            return lax.fori_loop(0, n1 - 1, col, energy)

        return lax.fori_loop(0, n0 - 1, row, 0.0)

    return stencil_loops


def make_stencil(np):
    """The vectorised energy for a NumPy-like module (numpy, autograd.numpy, jax.numpy)."""

    def stencil(u, k):
        c = u[:-1, :-1]
        dv = u[1:, :-1] - c
        dh = u[:-1, 1:] - c
        return np.sum(0.5 * k * (dv * dv + dh * dh) + 0.25 * (c * c - 1.0) ** 2)

    return stencil


stencil = make_stencil(np)


def stencil_autograd():
    import autograd.numpy as anp

    return make_stencil(anp)


def stencil_jax():
    import jax.numpy as jnp

    return make_stencil(jnp)


def stencil_torch():
    import torch

    return make_stencil(torch)  # torch.sum and slicing read the same


# ----------------------------------------------------------------------------- 1-D convolution


def conv1d_inputs(n: int, m: int) -> dict:
    rng = rng_for("conv1d", {"n": n, "m": m})
    return {"x": rng.normal(size=n), "w": rng.normal(scale=1.0 / m**0.5, size=m)}


def conv1d_loops(x, w):
    n = x.shape[0]
    m = w.shape[0]
    y = np.zeros(n - m + 1)
    for i in range(n - m + 1):
        acc = 0.0
        for k in range(m):
            acc += w[k] * x[i + k]
        y[i] = acc
    return np.sum(np.tanh(y))


def conv1d_autograd():
    import autograd.numpy as anp

    def conv1d_loops(x, w):
        # autograd cannot write into arrays: sum tanh(y_i) as each y_i is done
        n = x.shape[0]
        m = w.shape[0]
        total = 0.0
        for i in range(n - m + 1):
            acc = 0.0
            for k in range(m):
                acc = acc + w[k] * x[i + k]
            total = total + anp.tanh(acc)
        return total

    return conv1d_loops


def conv1d_torch():
    import torch

    def conv1d_loops(x, w):
        xs, ws = x.unbind(0), w.unbind(0)
        n, m = len(xs), len(ws)
        ys = []
        for i in range(n - m + 1):
            acc = 0.0
            for k in range(m):
                acc = acc + ws[k] * xs[i + k]
            ys.append(acc)
        return torch.sum(torch.tanh(torch.stack(ys)))

    return conv1d_loops


def conv1d_jax():
    import jax.numpy as jnp
    from jax import lax

    def conv1d_loops(x, w):
        # the window is sliced once per output: reading x[i + k] in the inner loop instead
        # makes JAX's reverse pass quadratic in n (each read's cotangent is a scatter into a
        # full-length zero array carried through the scan): 5.8 s at n = 1e5 against 0.2 s
        n = x.shape[0]
        m = w.shape[0]

        def output(_, i):
            window = lax.dynamic_slice(x, (i,), (m,))

            def tap(k, acc):
                return acc + w[k] * window[k]

            return None, lax.fori_loop(0, m, tap, 0.0)

        _, y = lax.scan(output, None, jnp.arange(n - m + 1))
        return jnp.sum(jnp.tanh(y))

    return conv1d_loops


# ----------------------------------------------------------------------------- cases


REDUCED = {
    "quick": {
        "ode-euler": {"torch": {"steps": 2_000}, "autograd": {"steps": 1_000}},
        "linrec": {"torch": {"n": 5_000}, "autograd": {"n": 1_000}},
        "stencil-loops": {"torch": {"N": 40}, "autograd": {"N": 20}},
        "conv1d-loops": {"torch": {"n": 1_000, "m": 16}, "autograd": {"n": 500, "m": 16}},
    },
    "full": {
        "ode-euler": {"torch": {"steps": 20_000}, "autograd": {"steps": 4_000}},
        "linrec": {"torch": {"n": 50_000}, "autograd": {"n": 4_000}},
        "stencil-loops": {"torch": {"N": 100}, "autograd": {"N": 40}},
        "conv1d-loops": {"torch": {"n": 5_000, "m": 16}, "autograd": {"n": 2_000, "m": 16}},
    },
}


def cases(mode: str) -> list[Case]:
    smoke = mode == "smoke"
    quick = mode == "quick"
    steps = 50 if smoke else 100_000
    n_rec = 10 if smoke else 200_000
    n_grid = 5 if smoke else 200
    conv = {"n": 12, "m": 3} if smoke else {"n": 10_000 if quick else 100_000, "m": 16}
    # smaller sizes for the Python-loop peers: about 0.5 s per gradient with --quick, 2 s without
    slow = REDUCED.get(mode, {})
    out = [
        Case(
            workload="ode-euler",
            family="loops",
            jit=True,
            size={"steps": steps},
            make_inputs=ode_inputs,
            numpy_f=ode_euler,
            wrt=("y0", "a", "c"),
            peers={"jax": ode_jax, "torch": ode_same, "autograd": ode_same},
            reduced=slow.get("ode-euler", {}),
            notes=["scalar state on Python floats; JAX: lax.fori_loop"],
        ),
        Case(
            workload="linrec",
            family="loops",
            jit=True,
            size={"n": n_rec},
            make_inputs=linrec_inputs,
            numpy_f=linrec,
            wrt=("x", "a"),
            peers={"jax": linrec_jax, "torch": linrec_torch, "autograd": linrec_autograd},
            reduced=slow.get("linrec", {}),
            notes=[
                "in-place y[i] = ...; JAX: lax.scan; torch: list + stack; autograd: running sum"
            ],
        ),
        Case(
            workload="stencil-loops",
            family="loops",
            jit=True,
            parallel=True,
            size={"N": n_grid},
            make_inputs=stencil_inputs,
            numpy_f=stencil_loops,
            wrt=("u",),
            peers={
                "jax": stencil_loops_jax,
                "torch": stencil_loops_torch,
                "autograd": stencil_loops_autograd,
            },
            reduced=slow.get("stencil-loops", {}),
            notes=["double loop over grid points; JAX: nested lax.fori_loop"],
        ),
        Case(
            workload="conv1d-loops",
            family="loops",
            jit=True,
            parallel=True,
            size=conv,
            make_inputs=conv1d_inputs,
            numpy_f=conv1d_loops,
            wrt=("x", "w"),
            peers={"jax": conv1d_jax, "torch": conv1d_torch, "autograd": conv1d_autograd},
            reduced=slow.get("conv1d-loops", {}),
            notes=[
                "valid convolution as nested loops, acc += w[k] * x[i + k], y[i] = acc; JAX: "
                "lax.scan over outputs (a dynamic_slice window each), lax.fori_loop over taps"
            ],
        ),
    ]
    for N in [5] if smoke else [200, 2000]:
        out.append(
            Case(
                workload="stencil",
                family="loops",
                size={"N": N},
                make_inputs=stencil_inputs,
                numpy_f=stencil,
                wrt=("u",),
                peers={"jax": stencil_jax, "torch": stencil_torch, "autograd": stencil_autograd},
                notes=["the stencil energy with slices instead of loops"],
            )
        )
    return out
