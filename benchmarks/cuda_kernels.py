"""The CUDA kernels of `target="cuda"` on a GPU, side by side with `jax.jit(jax.vmap(jax.grad))`.

    python benchmarks/cuda_kernels.py [--sizes 1e6 1e7 1e8] [--repeat 10] [--json out.json]

Needs a GPU, Numba's CUDA target and JAX with CUDA; run with NUMBA_ENABLE_CUDASIM unset (or 0).
For three scalar functions with branches (those of tests/test_cuda.py), it times the gradient
kernel called with arrays already on the GPU (`numba.cuda.to_device`), the same call writing
into results allocated once (`out=`), the same call with NumPy arrays (copied to the GPU and
back at each call), and JAX's jitted `vmap(grad)` of the same
function written with `jnp.where`, on arrays on the GPU, float64 throughout. Each timing is the
best of `--repeat` calls after two warm-ups, each synchronised (`cuda.synchronize()`,
`block_until_ready`). It checks that s2sad's and JAX's numbers agree before timing, and reports
the gradient's memory traffic (inputs read and outputs written once) as GB/s.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import s2sad  # noqa: E402


def softplus(x):
    if x > 20.0:
        return x
    return math.log1p(math.exp(x))


def lorentz(x, y):
    r = np.sqrt(x * x + y * y)
    if r < 1.0:
        return np.sin(r) * x
    return np.cos(r) / r + y * x


def gaussian_mix(x, mu, s):
    a = np.exp(-((x - mu) ** 2) / (2 * s * s))
    b = 0.5 * np.exp(-((x + mu) ** 2) / (2 * s * s))
    return np.log(a + b + 1e-3)


def jax_versions(jnp):
    def softplus_j(x):
        return jnp.where(x > 20.0, x, jnp.log1p(jnp.exp(jnp.minimum(x, 20.0))))

    def lorentz_j(x, y):
        r = jnp.sqrt(x * x + y * y)
        return jnp.where(r < 1.0, jnp.sin(r) * x, jnp.cos(r) / r + y * x)

    def gaussian_mix_j(x, mu, s):
        a = jnp.exp(-((x - mu) ** 2) / (2 * s * s))
        b = 0.5 * jnp.exp(-((x + mu) ** 2) / (2 * s * s))
        return jnp.log(a + b + 1e-3)

    return softplus_j, lorentz_j, gaussian_mix_j


def best_of(call, sync, repeat):
    for _ in range(2):
        sync(call())
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        sync(call())
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[1e6, 1e7, 1e8])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)

    import jax
    import jax.numpy as jnp
    from numba import cuda

    jax.config.update("jax_enable_x64", True)
    gpu = (
        "the simulator" if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" else str(cuda.gpus[0].name)
    )
    print(f"GPU: {gpu}")
    print(f"jax {jax.__version__} on {jax.devices()[0]}")
    softplus_j, lorentz_j, gaussian_mix_j = jax_versions(jnp)
    cases = [
        # (name, f, JAX's f, wrt, each argument: an array of n numbers or a scalar)
        ("softplus", softplus, softplus_j, 0, (None,)),
        ("lorentz", lorentz, lorentz_j, (0, 1), (None, None)),
        ("gaussian_mix", gaussian_mix, gaussian_mix_j, (0, 1, 2), (None, 0.7, 0.4)),
    ]
    rows = []
    for size in [int(s) for s in args.sizes]:
        rng = np.random.default_rng(0)
        for name, f, fj, wrt, scalars in cases:
            host = [rng.uniform(-2.5, 2.5, size) if s is None else s for s in scalars]
            on_gpu = [cuda.to_device(h) if np.ndim(h) else h for h in host]
            g = s2sad.grad(f, wrt=wrt, target="cuda")
            argnums = wrt if isinstance(wrt, tuple) else 0
            in_axes = tuple(0 if s is None else None for s in scalars)
            gj = jax.jit(jax.vmap(jax.grad(fj, argnums=argnums), in_axes=in_axes))
            on_jax = [jnp.asarray(h) if np.ndim(h) else h for h in host]

            ours = g(*on_gpu)
            ours = [o.copy_to_host() for o in (ours if isinstance(ours, tuple) else (ours,))]
            theirs = gj(*on_jax)
            theirs = [np.asarray(t) for t in (theirs if isinstance(theirs, tuple) else (theirs,))]
            error = max(
                float(np.max(np.abs(a - b) / (1 + np.abs(b)))) for a, b in zip(ours, theirs)
            )

            def sync_numba(_):
                cuda.synchronize()

            def sync_jax(out):
                jax.block_until_ready(out)

            t_dev = best_of(lambda: g(*on_gpu), sync_numba, args.repeat)
            outs = tuple(cuda.device_array(size) for _ in ours)
            t_out = best_of(lambda: g(*on_gpu, out=outs), sync_numba, args.repeat)
            t_host = best_of(lambda: g(*host), sync_numba, max(3, args.repeat // 3))
            t_jax = best_of(lambda: gj(*on_jax), sync_jax, args.repeat)
            moved = 8 * size * (sum(1 for h in host if np.ndim(h)) + len(ours))
            row = {
                "function": name,
                "n": size,
                "s2sad_device_ms": t_dev * 1e3,
                "s2sad_out_ms": t_out * 1e3,
                "s2sad_numpy_ms": t_host * 1e3,
                "jax_ms": t_jax * 1e3,
                "s2sad_over_jax": t_dev / t_jax,
                "s2sad_out_over_jax": t_out / t_jax,
                "s2sad_out_GBps": moved / t_out / 1e9,
                "max_rel_diff_vs_jax": error,
            }
            rows.append(row)
            print(
                f"{name:13s} n={size:.0e}  s2sad {t_dev * 1e3:8.3f} ms, out= {t_out * 1e3:8.3f} ms "
                f"({row['s2sad_out_GBps']:6.0f} GB/s), with copies {t_host * 1e3:8.2f} ms  "
                f"JAX {t_jax * 1e3:8.3f} ms  s2sad/JAX {t_dev / t_jax:5.2f}, "
                f"out= {t_out / t_jax:5.2f}  "
                f"max diff {error:.1e}",
                flush=True,
            )
    if args.json:
        Path(args.json).write_text(json.dumps({"gpu": gpu, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
