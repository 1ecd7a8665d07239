"""Shape tapes proven fixed (s2sad/pipeline/fixed_shapes.py), side by side in one process: the
jitted gradient of gradbench's ode eval (RK4 over an array state) as s2sad emits it ("fixed":
each shape tape made like `x` or `x[1:]`, keeping nothing), the same source with every shape
tape a list again ("lists": `shape_tape()`, as before), the same with the shape tapes' pushes
and pops deleted by hand ("none": the floor), and JAX's `jax.jit(jax.grad)`. One thread; each
round calls every variant `--calls` times, in rotating order; the table shows best and median
CPU time a call over the rounds.

    python benchmarks/shape_tapes_side_by_side.py                  # n=1000 s=100
    python benchmarks/shape_tapes_side_by_side.py --n 100000 --rounds 5 --calls 2
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.side_by_side import best_and_median, one_thread, rounds  # noqa: E402

one_thread(numba=True, xla=True)

import numpy as np  # noqa: E402

import s2sad  # noqa: E402
from benchmarks.gradbench.evals import ode  # noqa: E402
from benchmarks.runner.builders import load_peers  # noqa: E402
from benchmarks.workloads.gb_arrays import jax_ode  # noqa: E402
from s2sad.fused_guards import fused_only  # noqa: E402
from s2sad.jit import module_text  # noqa: E402

_PUSH = re.compile(r"^\s*shape_push\(\w+, \w+\)\n", re.M)
_POP = re.compile(r"^\s*\w+ = shape_pop\(\w+, \w+\)\n", re.M)


def _variants(source: str) -> dict[str, str]:
    lists = re.sub(r"shape_tape\(.+\)\n", "shape_tape()\n", source)
    return {"fixed": source, "lists": lists, "none": _POP.sub("", _PUSH.sub("", lists))}


def _compiled(source: str, compiled, tag: str):
    """`source` (a variant of the gradient's) compiled by Numba in a module of its own."""
    text = module_text(source, compiled.name, embed=False).replace("cache=True", "cache=False")
    module = types.ModuleType(f"shape_tapes_{tag}")
    exec(compile(text, f"<{tag}>", "exec"), vars(module))
    for key, value in compiled.globals.items():
        vars(module).setdefault(key, value)
    return vars(module)[compiled.name]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--s", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args(argv)
    x, s = np.random.default_rng(0).random(args.n), args.s
    g = s2sad.grad(ode.ode_last, jit="strict")
    want = g(x, s)
    source = fused_only(g.compiled.source)
    assert "shape_tape(x)" in source, "no shape tape proven fixed"
    calls = {}
    for tag, variant in _variants(source).items():
        f = _compiled(variant, g.compiled, tag)
        np.testing.assert_allclose(f(x, s)[1], want, rtol=1e-12)
        calls[tag] = f
    if load_peers().get("jax") is not None:
        import jax

        jx = jax.jit(jax.grad(jax_ode(), argnums=0), static_argnums=1)
        np.testing.assert_allclose(jx(x, s), want, rtol=1e-9)
        calls["jax"] = lambda x, s: jx(x, s).block_until_ready()
    variants = {tag: (lambda f=f: f(x, s)) for tag, f in calls.items()}
    times = rounds(variants, args.rounds, args.calls)
    print(f"ode n={args.n} s={s}: best / median CPU ms a call, {args.rounds} rounds")
    for tag, t in times.items():
        best, median = best_and_median(t)
        print(f"  {tag:6s} {best:8.3f} {median:8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
