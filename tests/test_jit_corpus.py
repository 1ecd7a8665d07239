"""The promise of `jit=True`: whenever Numba compiles a function itself, s2sad's jitted derivative
of it compiles too, and gives the numbers of the Python version.

The corpus takes functions from the rest of the test suite (the rule tests, the control-flow
tests, the derivative tests) and every function the examples emit. For each, the derivative
is taken with `jit="strict"` (a gradient, a pullback of a random seed, or a tangent) and must
equal the Python version's to 1e-10. Where that fails, the primal is compiled with
`numba.njit` on the test's inputs; where Numba refuses it too, the case is skipped, since the
promise does not cover it. (A case whose primal Numba refuses but whose derivative compiles
and agrees passes.)

`REFUSED` names each function whose primal compiles but whose jitted derivative does not yet,
with the reason: none today (np.linalg's tuple results, slogdet, eigh, svd and qr, were the last).

This file keeps a sample that covers each runtime helper and each kind of code. The same check
was run once over every call the rest of the test suite makes: 2,006 distinct calls, of which
760 (function, argument types) have a primal Numba compiles. All 760 derivatives compile and
agree (as `grad` or `vjp`, as the tests call them), as do the tangents of one signature per
function (333 of 338), except where s2sad refuses the function in Python too (`for ... else`,
writes through aliases, and the like). Random programs from tests/fuzzgen.py whose primal
Numba compiles were checked the same way.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import s2sad
from conftest import rand
from s2sad.jit import JitFallbackWarning
from s2sad.rules.helpers import numba_source

numba = pytest.importorskip("numba")

# Numba's hints (and, at the tests' -O0, its notes on what it does not cache) are not failures
pytestmark = pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaWarning")

import test_control_flow as cf  # noqa: E402
import test_derivatives as der  # noqa: E402
import test_dtypes as td  # noqa: E402
import test_jit_hoist as th  # noqa: E402
import test_python_constructs as pc  # noqa: E402
import test_rules_breadth_elementwise as eb  # noqa: E402
import test_rules_breadth_selection as sel  # noqa: E402
import test_rules_breadth_building as bb  # noqa: E402
import test_rules_breadth_linalg as bl  # noqa: E402
import test_rules_breadth_numerical as num  # noqa: E402
import test_rules_broadcasting as bc  # noqa: E402
import test_rules_elementwise as el  # noqa: E402
import test_rules_higher_order as ho  # noqa: E402
import test_rules_linalg as la  # noqa: E402
import test_rules_nondiff as nd  # noqa: E402
import test_rules_reductions as red  # noqa: E402
import test_rules_scans_layout as sl  # noqa: E402
import test_rules_shape_indexing as sh  # noqa: E402
import peer_autograd as pa  # noqa: E402
import test_rules_sort as so  # noqa: E402
import test_trust_refusals as tr  # noqa: E402
import test_lists as tl  # noqa: E402
import test_jit_forms as jf  # noqa: E402
import test_jit_products as jp  # noqa: E402
import test_jit_reductions_folded as rf  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

# primal-compilable functions whose jitted derivative does not compile yet: name -> reason
REFUSED: dict[str, str] = {}


@pytest.fixture(scope="module", autouse=True)
def _cache(tmp_path_factory):
    """One fresh cache directory for the module, so that every case really compiles."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("S2SAD_CACHE_DIR", str(tmp_path_factory.mktemp("jit-corpus")))
        yield


def r(*shape, seed=0, low=-1.0, high=1.0):
    return rand(*shape, seed=seed, low=low, high=high)


def well_conditioned(n, seed=0):
    return rand(n, n, seed=seed, low=-0.5, high=0.5) + n * np.eye(n)


def distinct(*shape, seed=0):
    """Values well apart, so max, min and norms have no ties."""
    n = int(np.prod(shape))
    rng = np.random.default_rng(seed)
    return (rng.permutation(n) * 0.1 - 0.05 * n + rng.uniform(-0.01, 0.01, n)).reshape(shape)


A = cf.A
IDX = np.array([2, 0, 2, 1])  # a repeated index: its cotangents add up
MASK = np.array([True, False, True])

# (function, arguments, wrt, what): what is "grad", "vjp" or "jvp"
CORPUS = [
    # a filled array (np.full, np.full_like: runtime.inexact) (test_trust_refusals.py)
    (tr.fill_scalar, (0.7, np.array([0.3, -1.2, 2.0])), (0, 1), "grad"),
    # control flow: loops, branches, while, break, in-place writes (test_control_flow.py)
    (cf.euler, (0.7, 1.3, 50), (0, 1), "grad"),
    # rows read then written in nested loops: snapshots and tapes of rows made before the loops
    # (snapshot_into, rows_like, shape_rows) (test_jit_hoist.py)
    (
        th.rows_in_place,
        (np.linspace(-1, 1, 5), np.linspace(0.5, 1.5, 15).reshape(3, 5), 3),
        (0, 1),
        "grad",
    ),
    (jp.mahalanobis, (jp.Q, jp.MEANS, jp.XS), (0, 1, 2), "grad"),  # add_outer_at
    (jp.vector_times_matrix, (jp.A.astype(np.float32), jp.V), (0, 1), "grad"),  # sum_zeros_like
    # a loop's integer powers of np.arange's vector in fused loops (power_lanes)
    (rf.polyfit, (rand(4), 9), 0, "grad"),
    # dtypes: a sum's dtype= (summed_in), a loop's number (as_number), a float32 loop's
    # cotangent a float64 matrix widens (widened_by) (test_dtypes.py)
    (td.sum32, (np.linspace(0.1, 0.9, 6),), 0, "grad"),
    (td.accumulated, (0.3, 3), 0, "grad"),
    (td.kept_float32_product, (jp.V.astype(np.float32), np.outer(jp.V, jp.V), 3), (0, 1), "grad"),
    # Python as people write it: enumerate(zip), tuples of subscripts, dicts, return in a loop,
    # integers read from an array written later (test_python_constructs.py)
    (pc.weighted, (pc.X, pc.W), (0, 1), "grad"),
    (pc.swaps_in_a_loop, (pc.X,), 0, "grad"),
    (pc.dict_of_parts, (pc.X, pc.W), (0, 1), "jvp"),
    (pc.nested_exits, (pc.X * 3, pc.W), (0, 1), "grad"),
    (pc.first_of_order, (pc.X,), 0, "vjp"),
    (cf.branchy, (A,), 0, "grad"),
    (cf.recur, (A, 0.9), (0, 1), "grad"),
    (cf.newton_sqrt, (2.0,), 0, "grad"),
    (cf.with_break, (np.array([0.5, 0.9, 1.2, 0.3]),), 0, "grad"),
    (cf.rows, (cf.W.T, cf.B[:2]), (0, 1), "grad"),
    (cf.branch_in_loop, (A,), 0, "grad"),
    (cf.leaky_square, (cf.X_SIGNS,), 0, "grad"),
    (cf.branch_in_while, (cf.X_SIGNS,), 0, "vjp"),
    (cf.sum_until_over, (np.array([0.79, 0.8, 1.07, 0.6, 0.9, 0.95]),), 0, "grad"),  # forever
    (cf.write_in_branch_in_loop, (A,), 0, "grad"),
    (cf.while_break_continue, (A,), 0, "grad"),
    (cf.fill_by_index, (A,), 0, "grad"),
    (cf.write_2d, (A[:3],), 0, "grad"),
    (cf.fancy_write, (A[:2], np.array([0, 2])), 0, "grad"),
    (cf.row_writes, (A, np.array([0.7, -1.3])), (0, 1), "grad"),
    (cf.slices_a_row_in_a_loop, (cf.W, cf.B[:3]), (0, 1), "grad"),
    (cf.vector_out_loop, (A,), 0, "vjp"),
    (cf.recur, (A, 0.9), (0, 1), "jvp"),
    (cf.euler, (0.7, 1.3, 50), 0, "jvp"),
    (cf.aug_sub, (A,), 0, "jvp"),
    (der.smooth_fill, (A, 0.6), (0, 1), "vjp"),
    (der.log_sum_exp, (A,), 0, "grad"),
    (der.mlp_loss, (r(4, seed=1), r(5, 3, seed=2), r(5, seed=3)), 0, "grad"),
    # elementwise rules, broadcasting between ranks (test_rules_elementwise.py, _broadcasting.py)
    (el.power, (r(2, 3, low=0.5, high=2.0), r(3, seed=1)), (0, 1), "vjp"),
    (el.u_tanh, (r(2, 3),), 0, "vjp"),
    (el.u_abs, (0.7,), 0, "vjp"),
    (el.b_maximum, (r(2, 3), r(3, seed=1)), (0, 1), "vjp"),
    (el.b_minimum, (0.5, 0.5), (0, 1), "vjp"),
    (el.b_logaddexp, (r(2, 3), r(3, seed=1)), (0, 1), "vjp"),
    (el.b_hypot, (r(2, 3), r(3, seed=1)), (0, 1), "jvp"),
    (el.where_mask, (r(2, 3), r(3, seed=1), r(2, 3, seed=2) > 0), (0, 1), "vjp"),
    (el.clip_both, (r(3, 4),), 0, "vjp"),
    (el.clip_lower_only, (r(3, 4),), 0, "vjp"),
    (el.clip_active_bounds, (r(3, 4), r(3, 4, seed=1) - 1.0, r(4, seed=2) + 1.0), (0, 1, 2), "vjp"),
    (el.pow_half, (r(3, 4, low=0.2, high=2.0),), 0, "vjp"),
    (el.m_pow, (1.3, 0.7), (0, 1), "grad"),
    (el.m_atan2, (0.3, -1.2), (0, 1), "jvp"),
    (el.math_with_numpy, (0.4, r(3)), (0, 1), "grad"),
    (bc.sum_of_product, (r(2, 1, 3), r(4, 1, seed=1)), (0, 1), "grad"),
    (bc.fma, (np.float64(0.5), r(2, 1, 3), r(3, seed=1)), (0, 1, 2), "vjp"),
    # reductions (test_rules_reductions.py): Numba compiles sum over axes, the rest whole
    (red.l_sum_axis0, (r(3, 4, 5),), 0, "vjp"),
    (red.l_sum_tuple, (r(3, 4, 5),), 0, "vjp"),
    (red.lm_sum_axis1, (r(3, 4, 5),), 0, "jvp"),
    (red.l_mean, (r(3, 4),), 0, "vjp"),
    (red.l_prod, (np.array([0.5, 0.0, -1.5, 2.0]),), 0, "vjp"),
    (red.l_max, (distinct(3, 4),), 0, "vjp"),
    (red.l_var, (r(3, 4),), 0, "jvp"),
    (red.l_std, (r(3, 4),), 0, "vjp"),
    (red.n_default, (r(3, 4),), 0, "vjp"),
    (red.n_ord_inf, (distinct(5),), 0, "vjp"),
    (red.n_matrix_ord1, (distinct(3, 4),), 0, "vjp"),
    (red.n_matrix_spectral, (r(3, 4),), 0, "vjp"),
    # linear algebra (test_rules_linalg.py): matmul of vectors and matrices
    (la.mm_op, (r(3, 4, seed=1), r(4, 2, seed=2)), (0, 1), "vjp"),
    (la.mm_op, (r(4, seed=1), r(4, 2, seed=2)), (0, 1), "vjp"),
    (la.mm_op, (r(3, 4, seed=1), r(4, seed=2)), (0, 1), "vjp"),
    (la.mm_op, (r(4, seed=1), r(4, seed=2)), (0, 1), "jvp"),
    (la.dot_fn, (r(3, 4, seed=1), r(4, 2, seed=2)), (0, 1), "vjp"),
    (la.outer_fn, (r(2, 3, seed=1), r(4, seed=2)), (0, 1), "vjp"),
    (la.tr_offset, (r(3, 4),), 0, "vjp"),
    (la.la_inv, (well_conditioned(3),), 0, "vjp"),
    (la.la_solve, (well_conditioned(3), r(3, 2, seed=1)), (0, 1), "vjp"),
    (la.la_solve, (well_conditioned(3), r(3, seed=1)), (0, 1), "jvp"),
    (la.la_solve, (well_conditioned(3), r(3, 2, seed=1)), (0, 1), "jvp"),
    (la.la_logdet, (well_conditioned(3),), 0, "grad"),
    (la.la_det, (well_conditioned(3),), 0, "jvp"),
    (la.t_fn_axes, (r(2, 3, 4),), 0, "vjp"),
    (
        la.weighted_matmul_both_transposed,
        (r(4, 3, seed=1), r(2, 4, seed=2), r(3, 2)),
        (0, 1),
        "grad",
    ),
    # shapes and indexing (test_rules_shape_indexing.py)
    (sh.assemble, (r(3), np.array([[0, 1], [1, 2], [2, 3]])), 0, "grad"),  # Numba: no add.at
    (sh.reshape_fn, (r(3, 4),), 0, "vjp"),
    (sh.ravel_method, (r(2, 3, 4).transpose(1, 0, 2),), 0, "vjp"),
    (sh.broadcast_to, (r(3, 1),), 0, "vjp"),
    (sh.concat_1, (r(2, 3), r(2, 2, seed=1)), (0, 1), "vjp"),
    (sh.stack_1, (r(2, 3), r(2, 3, seed=1)), (0, 1), "vjp"),
    (sh.fancy, (r(3, 2), IDX), 0, "vjp"),
    (sh.fancy_pair, (r(3, 3), IDX), 0, "vjp"),
    (sh.masked, (r(3), MASK), 0, "vjp"),
    (sh.masked_rows, (r(3, 2), MASK), 0, "vjp"),
    (sh.ix_neg_step_tuple, (r(5, 4),), 0, "vjp"),
    (sh.newaxis_middle, (r(3, 4),), 0, "vjp"),
    (sh.ix_param, (r(3, 4), -1), 0, "jvp"),
    # np.array of numbers: in tangent code too, Numba builds it with np.array, not np.stack
    (sh.rotation_applied, (r(3),), 0, "jvp"),
    (sh.rotation_applied, (r(3),), 0, "vjp"),
    # scans, diagonals, triangles, flips and rolls (test_rules_scans_layout.py)
    (sl.cumsum_flat, (r(3, 4),), 0, "vjp"),
    (sl.cumsum_flat, (r(5),), 0, "jvp"),
    (sl.cumprod_flat, (np.array([0.5, 0.0, -1.5, 2.0]),), 0, "vjp"),
    (sl.cumprod_flat, (np.array([0.5, 0.0, -1.5, 2.0]),), 0, "jvp"),
    (sl.diff_1, (r(6),), 0, "vjp"),
    (sl.diag_build, (r(4),), 0, "vjp"),
    (sl.diag_read, (r(3, 5), 2), 0, "vjp"),
    (sl.tril_fn, (r(3, 4), -1), 0, "vjp"),
    (sl.flip_all, (r(3, 4),), 0, "vjp"),
    (sl.roll_flat, (r(5), 2), 0, "vjp"),
    # sorting (test_rules_sort.py): Numba's np.sort takes no axis
    (so.weighted_sorted_cube, (distinct(6),), 0, "grad"),
    (so.sort_last, (distinct(5),), 0, "jvp"),
    # np.partition, np.argpartition: NumPy's order of the other elements (test_peer_suites.py)
    (pa.partition_weighted, (distinct(7),), 0, "grad"),
    (pa.partition_weighted, (distinct(7),), 0, "jvp"),
    # elementwise breadth (test_rules_breadth_elementwise.py)
    (eb.fmax_of, (r(3, 4), r(4, seed=1)), 0, "vjp"),
    (eb.sinc_sum, (r(5, low=-2, high=2),), 0, "grad"),
    (eb.special, (1.7,), 0, "grad"),
    (eb.gamma_of, (-0.6,), 0, "jvp"),
    (eb.max_of, (np.array([0.5, 0.5, 2.0]),), 0, "grad"),
    (eb.conversions_jit, (r(3),), 0, "vjp"),
    (eb.sum_squares, (r(4),), 0, "jvp"),
    # selection and statistics (test_rules_breadth_selection.py)
    *sel.JITTED,
    # building and splitting arrays (test_rules_breadth_building.py): stacks of tuples, a
    # repeat without an axis, a split's pieces read by index
    (bb.vstack_tuple, (r(2, 3), r(1, 3, seed=1)), (0, 1), "vjp"),
    (bb.append_flat, (r(2, 3), r(2, seed=1)), (0, 1), "jvp"),
    (bb.repeat_counts, (r(3),), 0, "vjp"),
    (bb.split_three_reads, (r(4, 6),), 0, "vjp"),
    (bb.array_split_ragged, (r(7),), 0, "grad"),
    # contractions and decompositions (test_rules_breadth_linalg.py): vectors and matrices
    *[(f, args, wrt, mode) for f, args, wrt in bl.JIT for mode in ("grad", "jvp")],
    (bl.cross, (r(4, 3, seed=1), r(3, seed=2)), (0, 1), "vjp"),  # a cotangent of 3-vectors
    # tuple results: the pullback is the gradient's code, so one vjp (of three parts) stands for all
    *[(f, args, 0, m) for f, args in bl.TUPLE_RESULTS for m in ("grad", "jvp")],
    (bl.svd_vectors, (bl.rect(3, 2, seed=2),), 0, "vjp"),
    # np.linspace of scalar end points (test_rules_higher_order.py)
    (ho.samples_sum, (0.3, 1.9), (0, 1), "grad"),
    (ho.samples_sum, (0.3, 1.9), (0, 1), "jvp"),
    # lists of differentiated values, unrolled (test_lists.py): read by a run-time index, a
    # loop over split pieces
    (tl.read_at_a_run_time_index, (r(3), 5), 0, "grad"),
    (tl.split_pieces, (r(6),), 0, "jvp"),
    # numerical routines, NaN statistics, positions (test_rules_breadth_numerical.py): vectors
    *num.JITTED,
    # non-differentiable operations next to differentiable ones (test_rules_nondiff.py)
    (nd.by_argmax, (distinct(5),), 0, "grad"),
    (nd.int_axis, (r(3, 4), -1), 0, "grad"),
    # reductions over an axis that Numba lacks, lowered to s2sad's own forms (test_jit_forms.py)
    (jf.axis_reductions, (r(4, 5), r(5, seed=1)), (0, 1), "grad"),
    # reduction methods, var/std over an axis (var_over, std_over), integer sums kept
    (
        jf.reduction_methods,
        (r(4, 5, low=1.0, high=3.0), np.arange(20).reshape(4, 5) % 7),
        0,
        "grad",
    ),
]


def _examples():
    """Every function the examples emit, with the examples' own inputs."""
    out = []
    for path in sorted(EXAMPLES.glob("*.py")):
        if path.stem == "quickstart":
            continue  # it runs (and prints) when imported
        spec = importlib.util.spec_from_file_location(f"example_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        inputs = module.inputs(np.random.default_rng(0))
        for name, options in module.EMIT.items():
            func = functools.reduce(getattr, name.split("."), module)  # "Class.method" too
            out.append((func, inputs[name], tuple(options["wrt"]), "grad"))
    return out


CORPUS += _examples()


def _id(case):
    f, args, _, what = case
    ranks = "-".join(str(np.ndim(a)) for a in args)
    return f"{f.__module__.split('.')[-1]}.{f.__name__}[{ranks}]-{what}"


def _wrt_names(f, wrt):
    params = list(inspect.signature(f).parameters)
    items = wrt if isinstance(wrt, tuple) else (wrt,)
    return [params[w] if isinstance(w, int) else w for w in items], params


def _copies(args):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def _both(what, f, args, wrt, rng):
    """The derivative, jitted and in Python: both as flat tuples of arrays."""
    names, params = _wrt_names(f, wrt)
    if what in ("grad", "vjp"):
        results = []
        if what == "grad":
            for jit in ("strict", False):
                results.append(s2sad.grad(f, wrt=wrt, jit=jit)(*_copies(args)))
        else:
            out = f(*_copies(args))
            outs = out if isinstance(out, tuple) else (out,)
            seeds = tuple(
                rng.standard_normal(np.shape(o)) if np.ndim(o) else float(rng.standard_normal())
                for o in outs
            )
            seed = seeds if isinstance(out, tuple) else seeds[0]
            for jit in ("strict", False):
                value, pullback = s2sad.vjp(f, wrt=wrt, jit=jit)(*_copies(args))
                results.append((value, pullback(seed)))
        return results
    tangents = tuple(rng.standard_normal(np.shape(args[params.index(n)])) for n in names)
    tangent = tangents if isinstance(wrt, tuple) else tangents[0]
    return [
        s2sad.jvp(f, wrt=wrt, jit=jit)(*_copies(args), tangent=tangent) for jit in ("strict", False)
    ]


def _flat(value):
    if isinstance(value, tuple):
        return [x for v in value for x in _flat(v)]
    return [value]


# CI compiles every third case (the suite's 10 minutes on 2 cores); S2SAD_JIT_CORPUS=all, every
# case. The helper coverage below transforms them all either way.
SAMPLED = CORPUS if os.environ.get("S2SAD_JIT_CORPUS") == "all" else CORPUS[::3]


def _skip_unless_numba_compiles(f, args):
    """Skip the case where Numba refuses the primal: outside the promise."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Numba's performance hints
            numba.njit(f)(*_copies(args))
    except Exception as exc:
        pytest.skip(f"Numba does not compile the primal: {type(exc).__name__}")


@pytest.mark.parametrize("case", SAMPLED, ids=[_id(c) for c in SAMPLED])
def test_jitted_derivative_of_a_numba_compilable_function(case):
    f, args, wrt, what = case
    if f.__name__ in REFUSED:
        _skip_unless_numba_compiles(f, args)
        pytest.xfail(REFUSED[f.__name__])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", JitFallbackWarning)
            jitted, plain = _both(what, f, args, wrt, np.random.default_rng(0))
        jitted, plain = _flat(jitted), _flat(plain)
        assert len(jitted) == len(plain)
        for j, p in zip(jitted, plain):
            assert np.shape(j) == np.shape(p)
            np.testing.assert_allclose(j, p, rtol=1e-10, atol=1e-12)
    except Exception:
        # the primal is compiled only to judge a failure (a compile of its own, saved in the
        # cases that pass): a failure counts where Numba compiles the primal
        _skip_unless_numba_compiles(f, args)
        raise


def test_the_corpus_covers_every_numba_helper():
    """Each runtime helper with a Numba version is called by some corpus function's jitted
    code, so the corpus exercises them all."""
    source = numba_source()  # the Numba forms, as `s2sad emit --jit` embeds them
    helpers = {
        line.split("(")[0][4:]
        for line in source.splitlines()
        if line.startswith("def ") and not line.startswith("def _")
    }
    seen = set()
    for f, args, wrt, what in CORPUS:
        mode = "jvp" if what == "jvp" else what
        try:
            transformed = {"grad": s2sad.grad, "vjp": s2sad.vjp, "jvp": s2sad.jvp}[mode](
                f, wrt=wrt, jit=True
            )
            text = s2sad.source(transformed, *_copies(args))
        except s2sad.S2SADError:
            continue
        seen |= {h for h in helpers if h + "(" in text}
    # stop_gradient is s2sad's own function: a primal calling it does not compile in Numba;
    # shape_stub is left only on a tape of shapes that is read other than by its pops (jitted
    # tapes of shapes call shape_push: pipeline/shape_tapes.py); broadcast_like only into
    # modules without ranks (`emit`: tests/test_jit_forms.py); own_copy only where a custom_vjp
    # rule writes into its cotangent (test_rule_cotangent.py), rule_cotangents wherever one is
    # called (test_rule_cotangent.py, test_rule_returns.py); the masks of several axes' helpers
    # test_jit_masks.py compiles (one gradient for all three); stack_operands only where a
    # stack's operands have ranks not known (test_jit_lowered_forms); linspace_ends only where
    # np.linspace is given `endpoint`, and indexed_by_arrays (no compiled form: a refusal)
    # where an index holds two arrays (test_jit_edges.py); weak_int, integers and int_in_dtype
    # where an integer array or its element meets a Python int (test_jit_int_promotion.py
    # compiles all three)
    exempt = {"stop_gradient", "shape_stub", "broadcast_like", "own_copy", "linspace_ends"}
    exempt |= {"indexed_by_arrays", "weak_int", "integers", "int_in_dtype"}
    exempt |= {"masked", "set_masked", "add_masked", "rule_cotangents", "stack_operands"}
    assert helpers - seen <= exempt, f"no corpus function calls {helpers - seen}"
