"""Differential tests against JAX: the same NumPy source, run by JAX with `jax.numpy` in place of
`numpy`, differentiated by `jax.grad`/`jax.jacrev`/`jax.jvp` and compared with s2sad.

Two sources of functions: the hand-written corpus in tests/oracle_corpus.py (models, loops,
branches, linear algebra, shapes), and the fuzzer's random programs (tests/fuzzgen.py) that JAX can
run (no in-place writes), at the fuzzer's test points away from every kink. Skipped when JAX is
not installed (`pip install -e ".[oracle]"`).
"""

from __future__ import annotations

import math
import os
import sys
import types
from pathlib import Path

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

import fuzzgen  # noqa: E402
import oracle_corpus  # noqa: E402
import s2sad  # noqa: E402

RTOL = 1e-9
ATOL = 1e-11


def _jax_module(path: Path, name: str, source: str | None = None) -> types.ModuleType:
    """The module at `path` with `numpy` replaced by `jax.numpy`, `scipy.special` by
    `jax.scipy.special`, and `math` by a module whose functions accept JAX values."""
    text = source if source is not None else path.read_text()
    assert "import numpy as np" in text
    text = text.replace("import numpy as np", "import jax.numpy as np")
    text = text.replace("from scipy import special", "from jax.scipy import special")
    module = types.ModuleType(name)
    module.__file__ = str(path)
    exec(compile(text, str(path), "exec"), module.__dict__)
    module.math = _JAX_MATH
    return module


_JAX_MATH = types.SimpleNamespace(
    **{n: getattr(jnp, n) for n in ("sin", "cos", "tan", "exp", "log", "sqrt", "tanh", "sinh")},
    **{n: getattr(jnp, n) for n in ("cosh", "arctan", "log1p", "expm1", "hypot")},
    atan=jnp.arctan,
    asin=jnp.arcsin,
    acos=jnp.arccos,
    pow=jnp.power,
    fabs=jnp.abs,
    pi=math.pi,
    e=math.e,
)


def _as_tuple(wrt):
    return wrt if isinstance(wrt, tuple) else (wrt,)


def _close(ours, theirs, what: str):
    ours_t = ours if isinstance(ours, tuple) else (ours,)
    theirs_t = theirs if isinstance(theirs, tuple) else (theirs,)
    assert len(ours_t) == len(theirs_t), what
    for k, (a, b) in enumerate(zip(ours_t, theirs_t)):
        b = np.asarray(b)
        assert np.shape(a) == b.shape, f"{what}[{k}]: shape {np.shape(a)} vs JAX {b.shape}"
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL, err_msg=f"{what}[{k}]")


def _compare(f, fj, args, wrt, jacobians=True):
    """s2sad against JAX on every transform that applies to `f`'s output."""
    out = f(*args)
    argnums = _as_tuple(wrt)
    rng = np.random.default_rng(0)
    tangents = tuple(
        (rng.normal(size=np.shape(args[i])) if np.ndim(args[i]) else float(rng.normal()))
        for i in argnums
    )
    _, dot = s2sad.jvp(f, wrt=wrt)(
        *args, tangent=tangents if isinstance(wrt, tuple) else tangents[0]
    )
    _, dot_jax = jax.jvp(
        lambda *xs: fj(*[xs[argnums.index(i)] if i in argnums else a for i, a in enumerate(args)]),
        tuple(args[i] for i in argnums),
        tangents,
    )
    _close(dot, dot_jax, "jvp")
    if isinstance(out, tuple):  # a seed per output
        seed = tuple(rng.normal(size=np.shape(o)) for o in out)
        _, pullback = s2sad.vjp(f, wrt=wrt)(*args)
        _, pullback_jax = jax.vjp(
            lambda *xs: fj(
                *[xs[argnums.index(i)] if i in argnums else a for i, a in enumerate(args)]
            ),
            *[args[i] for i in argnums],
        )
        theirs = pullback_jax(seed)
        _close(pullback(seed), theirs if isinstance(wrt, tuple) else theirs[0], "vjp")
    elif np.ndim(out) == 0:
        _close(s2sad.grad(f, wrt=wrt)(*args), jax.grad(fj, argnums=wrt)(*args), "grad")
    else:
        seed = rng.normal(size=np.shape(out))
        _, pullback = s2sad.vjp(f, wrt=wrt)(*args)
        _, pullback_jax = jax.vjp(
            lambda *xs: fj(
                *[xs[argnums.index(i)] if i in argnums else a for i, a in enumerate(args)]
            ),
            *[args[i] for i in argnums],
        )
        theirs = pullback_jax(seed)
        _close(pullback(seed), theirs if isinstance(wrt, tuple) else theirs[0], "vjp")
        for mode in ("forward", "reverse") if jacobians else ():
            _close(
                s2sad.jacobian(f, wrt=wrt, mode=mode)(*args),
                jax.jacrev(fj, argnums=wrt)(*args),
                f"jacobian({mode})",
            )


# ----------------------------------------------------------------------------- hand-written corpus

CORPUS_JAX = _jax_module(Path(oracle_corpus.__file__), "_oracle_corpus_jax")


@pytest.mark.parametrize("name", sorted(oracle_corpus.CORPUS))
def test_corpus_against_jax(name):
    f, make_args, wrt = oracle_corpus.CORPUS[name]
    args = make_args(np.random.default_rng(len(name)))
    _compare(f, getattr(CORPUS_JAX, name), args, wrt)


# Hessians (forward over s2sad's reverse) against jax.hessian, #14's decompositions above all
HESSIANS = {
    "decompositions": 1,  # the argument each Hessian is taken in
    "solvers": 0,
    "filling": 0,
    "elementwise": 0,
    **({"special_functions": 1} if "special_functions" in oracle_corpus.CORPUS else {}),
    "nan_statistics": 1,
    "quadratic_form": 0,
}


@pytest.mark.parametrize("name", sorted(HESSIANS))
def test_corpus_hessians_against_jax(name):
    f, make_args, _ = oracle_corpus.CORPUS[name]
    args = make_args(np.random.default_rng(len(name)))
    wrt = HESSIANS[name]
    ours = s2sad.hessian(f, wrt=wrt)(*args)
    theirs = jax.hessian(getattr(CORPUS_JAX, name), argnums=wrt)(*args)
    _close(ours, theirs, "hessian")


# ----------------------------------------------------------------------------- fuzzer programs

# CI compares the first 40 programs (JAX's op-by-op mode is slow); S2SAD_ORACLE_SEEDS=1000 runs more
FUZZ_SEEDS = range(0, int(os.environ.get("S2SAD_ORACLE_SEEDS", "40")))


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("oracle_fuzz")


def _jax_runs(fj, args, argnums) -> bool:
    """Whether JAX runs the program, and traces it for jax.jvp (newer JAX refuses a list as a
    multidimensional index of a traced array, which it still takes of a concrete one)."""
    primals = tuple(args[i] for i in argnums)
    zeros = tuple(np.zeros(np.shape(p)) if np.ndim(p) else 0.0 for p in primals)

    def moved(*xs):
        return fj(*[xs[argnums.index(i)] if i in argnums else a for i, a in enumerate(args)])

    try:
        fj(*args)
        jax.jvp(moved, primals, zeros)
        return True
    except Exception:  # in-place writes, boolean masks on traced values, ...: not JAX's kind
        return False


RAN: set[int] = set()
COMPARED: set[int] = set()


@pytest.mark.parametrize("seed", FUZZ_SEEDS)
def test_fuzz_program_against_jax(seed, fuzz_dir):
    RAN.add(seed)
    program = fuzzgen.generate(seed)
    if any(feature.startswith("write") for feature in program.features):
        pytest.skip("writes in place: JAX arrays are immutable")
    # the fuzzer's own search for a test point away from kinks (no s2sad checks)
    outcome = fuzzgen.check_program(seed, str(fuzz_dir), modes=())
    if outcome.args is None:
        pytest.skip(f"no test point away from kinks: {outcome.detail}")
    f = getattr(sys.modules[f"_s2sad_fuzz_{seed}"], program.fname)
    fj = getattr(
        _jax_module(Path(fuzz_dir) / f"fz{seed}.py", f"_oracle_fuzz_{seed}", program.source),
        program.fname,
    )
    args = outcome.args
    indices, is_tuple = fuzzgen._wrt_indices(program)
    if not _jax_runs(fj, args, list(indices)):
        pytest.skip("JAX cannot run this program")
    try:
        # jacobians are built from the same sweeps; the corpus compares them with jax.jacrev
        _compare(f, fj, args, tuple(indices) if is_tuple else indices[0], jacobians=False)
        COMPARED.add(seed)
    except s2sad.S2SADError as err:
        if "internal" in str(err).lower():
            raise
        pytest.skip(f"s2sad refuses it: {type(err).__name__}")


def test_enough_fuzz_programs_are_compared():
    """Guards the skips above: when every fuzz test ran, at least 40% really compared."""
    if len(RAN) < len(FUZZ_SEEDS):
        pytest.skip("only part of the fuzz programs ran (-k or -x)")
    assert len(COMPARED) >= 0.4 * len(FUZZ_SEEDS), sorted(COMPARED)
