"""The functions of the peers' public test suites, run through s2sad.

tests/peer_tangent.py holds functions in the spirit of Google Tangent's corpus (scalars, branches,
loops, calls, tuples and dicts, in-place writes), tests/peer_autograd.py those of autograd's
test_numpy/test_systematic/test_scalar_ops/test_linalg (one NumPy construct each, at the shapes
that suite uses). Each is differentiated in NumPy mode and compared with float64 central
differences, and, where the function has no in-place writes, with autograd and JAX running the
same source (skipped when they are not installed). A sample also runs with `jit=True`, which must
give NumPy mode's numbers (or fall back with a warning).
"""

from __future__ import annotations

import copy
import functools
import sys
import types
import warnings
from pathlib import Path

import numpy as np
import pytest

import peer_autograd as ag
import peer_jax as pj
import peer_tangent as tg
import s2sad
from conftest import check_grad, check_jvp, check_vjp
from s2sad.jit import JitFallbackWarning

HERE = Path(__file__).parent


def r(*shape, seed=0, low=-1.0, high=1.0):
    return np.random.default_rng(seed).uniform(low, high, size=shape)


def pos(*shape, seed=0):
    return r(*shape, seed=seed, low=0.5, high=2.0)


def spd(n, seed=0):
    a = r(n, n, seed=seed)
    return a @ a.T + n * np.eye(n)


class Case(types.SimpleNamespace):
    """One peer function: its arguments, `wrt`, grad or vjp, and whether autograd/JAX run it."""

    def __init__(self, f, args, wrt=0, kind="grad", pure=True, label=None):
        super().__init__(f=f, args=args, wrt=wrt, kind=kind, pure=pure)
        self.id = label or f.__name__


C = Case
TANGENT = [
    *(
        C(getattr(tg, n), (0.7,), label=f"{n}")
        for n in (
            "identity negate tanh_of alias plus_one named_like_an_adjoint np_multiply sum_of_list"
            " list_element rebind_argument rebind_copy cube_by_products cube_by_power cube_by_loop"
            " cube_by_loop_from_a repeated_squares branch_in_loop loop_in_branch cubes_in_loop exp_of"
            " exp_of_exp sqrt_of augmented_multiply square_twice chain_of_squares binops binop_terms"
            " chain_of_square_calls halve_while_big nested_loops"
        ).split()
    ),
    *(
        C(getattr(tg, n), (a,), label=f"{n}[{a}]")
        for n in (
            "rebind_in_branches nested_branches tangled_branches branches_in_series elif_chain"
            " nested_branch_rebinds"
        ).split()
        for a in (-1.3, 0.8, 12.0)
    ),
    *(
        C(getattr(tg, n), (0.7, -1.2, 0.4), wrt=(0, 1, 2))
        for n in ("axpy axpy_by_calls axpy_in_steps axpy_rebound").split()
    ),
    *(
        C(getattr(tg, n), (a, b), wrt=(0, 1), label=f"{n}[{a},{b}]")
        for n in (
            "times plus compare_arguments call_helper call_helper_in_branches call_through_two"
        ).split()
        for a, b in ((0.7, -1.2), (-1.2, 0.7))
    ),
    C(tg.power_of, (1.3, 2.1), wrt=(0, 1)),
    *(
        C(getattr(tg, n), (0.9, 3), wrt="a")
        for n in (
            "loops_in_series branch_then_loop loop_then_branch repeated_squares_n call_helper_in_loop"
            " local_def_in_loop"
        ).split()
    ),
    *(
        C(getattr(tg, n), (r(4),))
        for n in (
            "total total_of_array rebind_to_sum sum_of_list_of_elements product_of_elements mean_of"
            " tail_sum"
        ).split()
    ),
    *(
        C(getattr(tg, n), (r(4),), pure=False)
        for n in ("write_element write_element_of_square copy_by_elements broadcast_rows").split()
    ),
    C(tg.strided_newaxis, (r(5, 3),)),
    C(tg.logistic_regression, (r(5, 3), np.array([0.0, 1, 1, 0, 1]), r(3, seed=1), 0.2), (0, 2, 3)),
    C(tg.rnn, (r(3, 2), r(2, 3, seed=1)), wrt=(0, 1), pure=False),
    C(
        tg.bilinear,
        (r(2, 3), r(2, 4, seed=1), r(4, 5, seed=2), r(3, 5, seed=3), r(5, seed=4)),
        wrt=(0, 1, 2, 3, 4),
    ),
    C(tg.two_results, (0.7,), kind="vjp"),
    C(tg.cart2polar, (0.7, -1.2), wrt=(0, 1), kind="vjp"),
    C(tg.pick_from_tuple, (0.7, -1.2, 0.4, 1), wrt=(0, 1, 2)),
    *(
        C(getattr(tg, n), (r(3, 4),), kind="vjp")
        for n in ("expand_front expand_back squeeze_expanded flat reshape_round_trip").split()
    ),
    *(
        C(getattr(tg, n), (r(2, 3, 4, 2),), kind="vjp")
        for n in ("reduce_sum_keep reduce_mean_axes reduce_max_axes").split()
    ),
    C(tg.squared_difference, (r(3, 4), r(3, 4, seed=1)), wrt=(0, 1), kind="vjp"),
    C(tg.maximum_of, (r(3, 4), r(4, seed=1)), wrt=(0, 1), kind="vjp"),
    C(tg.rsqrt, (pos(3, 4),), kind="vjp"),
    C(tg.matmul_transposed, (r(3, 2), r(4, 3, seed=1)), wrt=(0, 1), kind="vjp"),
    C(tg.batched_matmul_transposed, (r(2, 3, 4), r(2, 3, 5, seed=1)), wrt=(0, 1), kind="vjp"),
]

AUTOGRAD = [
    C(ag.dot, (r(10, 11), r(11, seed=1)), wrt=(0, 1), kind="vjp", label="dot[mat,vec]"),
    C(ag.dot, (r(10, 11), r(11, 10, seed=1)), wrt=(0, 1), kind="vjp", label="dot[mat,mat]"),
    C(ag.dot, (r(10), r(10, 11, seed=1)), wrt=(0, 1), kind="vjp", label="dot[vec,mat]"),
    C(ag.dot, (r(11), r(11, seed=1)), wrt=(0, 1), label="dot[vec,vec]"),
    C(ag.dot, (r(10, 11), 0.3), wrt=(0, 1), kind="vjp", label="dot[mat,float]"),
    C(ag.dot, (0.3, r(10)), wrt=(0, 1), kind="vjp", label="dot[float,vec]"),
    C(ag.dot, (1.5, 0.3), wrt=(0, 1), label="dot[float,float]"),
    C(ag.dot, (r(2, 3), r(3, 4, seed=1)), wrt=(0, 1), kind="vjp", label="dot[2x3,3x4]"),
    C(ag.outer, (r(11), r(11, seed=1)), wrt=(0, 1), kind="vjp"),
    C(ag.max_all, (r(10, 11),)),
    *(
        C(getattr(ag, n), (r(3, 4, 5),), kind="vjp")
        for n in (
            "max_axis1 max_axis1_keep min_axis1_keep sum_axis0_keep mean_axis0_keep"
            " cumsum_axis0 cumsum_flat flipud fliplr rot90 transpose_attr"
        ).split()
    ),
    C(ag.sum_axes12, (r(10, 11, 7),), kind="vjp"),
    C(ag.builtin_sum_of_list, (r(10, 11), r(10, 11, seed=1)), wrt=(0, 1), kind="vjp"),
    *(
        C(getattr(ag, n), (r(5, 6, 4),), kind="vjp")
        for n in (
            "index_ints index_slices index_list index_mixed slice_fanout reshape_method"
            " reshape_varargs ravel_method flatten_method"
        ).split()
    ),
    C(ag.slice_of_slice, (r(7),), kind="vjp"),
    C(ag.append_scalar, (r(3), 4.0), wrt=(0, 1), kind="vjp"),
    C(ag.concatenate_three, (r(5, 6, 4), r(5, 6, 4, seed=1)), wrt=(0, 1), kind="vjp"),
    C(ag.trace_offset, (r(10, 11),)),
    C(ag.trace_offset, (r(11, 10),), label="trace_offset[tall]"),
    C(ag.trace_negative_offset, (r(4, 5),)),
    C(ag.first_half, (r(10),), kind="vjp"),
    C(ag.trace_4d, (r(5, 6, 4, 3),), kind="vjp"),
    *(
        C(getattr(ag, n), (r(5, 5),), kind="vjp")
        for n in (
            "diag_of roll_axis1 triu_k2 tril_k2 clip_kw diagonal_last_axes einsum_transpose"
        ).split()
    ),
    C(ag.diagonal_last_axes, (r(3, 4, 4),), kind="vjp", label="diagonal_last_axes[3d]"),
    C(ag.prod_all, (pos(2, 3),)),
    C(ag.prod_axis0_keep, (pos(2, 3),), kind="vjp"),
    *(
        C(getattr(ag, n), (3.0,), kind="vjp")
        for n in (
            "array_1d array_2d array_2d_fanout array_of_scalar max_equal_rows min_three_way"
            " maximum_equal_2d"
        ).split()
    ),
    C(ag.max_equal_rows, (-1.0,), kind="vjp", label="max_equal_rows[-1]"),
    C(ag.maximum_equal_2d, (2.0,), kind="vjp", label="maximum_equal_2d[2]"),
    C(ag.max_of_equal, (1.0,)),
    C(ag.maximum_self, (1.0,)),
    C(ag.array_of_arrays, (r(3, 2),), kind="vjp"),
    C(ag.len_assert, (r(3, 2),), kind="vjp"),
    *(C(getattr(ag, n), (r(3, 2),), kind="vjp") for n in ("r_double r_const c_const".split())),
    C(ag.var_ddof, (r(3, 4),), kind="vjp"),
    C(ag.std_ddof, (r(3, 4),), kind="vjp"),
    C(ag.where_mask, (r(4, 5), r(4, 5, seed=1)), wrt=(0, 1), kind="vjp"),
    C(ag.squeeze_method, (r(5, 1, 4),), kind="vjp"),
    C(ag.repeat_axis1, (r(5, 3, 4),), kind="vjp"),
    C(ag.expand_axis2, (r(5, 1, 4),), kind="vjp"),
    C(ag.tensordot_positional, (1.0,)),
    C(ag.repeated_index, (r(3),)),
    C(ag.dot_of_halves, (r(4),)),
    C(ag.cast_to_int_index, (np.c_[r(5, 9), [0.5, 2.5, 1.5, 4.5, 3.5]],), pure=False),
    C(ag.nan_to_num_shifted, (r(4),)),
    C(ag.linspace_5, (1.2, 3.4), wrt=(0, 1), kind="vjp"),
    C(ag.linspace_5, (1.2, -3.4), wrt=(0, 1), kind="vjp", label="linspace_5[down]"),
    C(ag.astype_sin, (r(3),)),
    C(ag.transpose_axes, (r(2, 3, 4),), kind="vjp"),
    C(ag.tensordot_axes, (r(2, 3, 4), r(2, 2, 3, 4, seed=1)), wrt=(0, 1), kind="vjp"),
    C(ag.tensordot_axes2, (r(4, 2, 2), r(2, 2, 4, seed=1)), wrt=(0, 1), kind="vjp"),
    C(ag.sort_of, (r(7),), kind="vjp"),
    C(ag.partition_of, (r(7),), kind="vjp"),
    *(
        C(ag.atleast_3d_of, (x,), kind="vjp", label=f"atleast_3d_of[{np.ndim(x)}]")
        for x in (1.2, r(7), r(2, 4), r(2, 4, 5), r(2, 4, 3, 5))
    ),
    C(ag.einsum_covsum, (r(3, 4, 4), r(4, 4, 3, seed=1)), wrt=(0, 1), kind="vjp"),
    C(ag.einsum_ellipsis, (r(3, 4, 4), r(3, 4, 4, seed=1)), wrt=(0, 1), kind="vjp"),
    C(
        ag.einsum_three,
        (r(3, 4, 4), r(4, 4, 3, seed=1), r(4, 4, 3, seed=2)),
        wrt=(0, 1, 2),
        kind="vjp",
    ),
    C(ag.remainder_of, (r(3, 4, low=-0.9, high=0.9), pos(3, 4, seed=1)), wrt=(0, 1), kind="vjp"),
    C(ag.mod_operator, (r(3, 4), -pos(3, 4, seed=1)), wrt=(0, 1), kind="vjp"),
    C(ag.power_operator, (pos(3, 4), r(3, 4, seed=1)), wrt=(0, 1), kind="vjp"),
    C(ag.logaddexp2_of, (r(3, 4), r(4, seed=1)), wrt=(0, 1), kind="vjp"),
    C(ag.true_divide_of, (r(3, 4), -pos(3, 4, seed=1)), wrt=(0, 1), kind="vjp"),
    C(ag.stats, (pos(3, 4),)),
    C(ag.stats_axis, (pos(3, 4),), kind="vjp"),
    C(ag.unary_ufuncs, (r(3, 4, low=0.1, high=0.9),), kind="vjp"),
    C(ag.unary_ufuncs, (r(3, 4, low=-0.9, high=-0.1),), kind="vjp", label="unary_ufuncs[neg]"),
    C(ag.unary_ufuncs_positive, (pos(3, 4),), kind="vjp"),
    C(ag.real_if_close_of, (r(3),), kind="vjp"),
    C(ag.angle_of, (r(3),), kind="vjp"),
    C(ag.inv_of, (spd(4),), kind="vjp"),
    C(ag.inv_of, (spd(4)[None] + r(3, 4, 4),), kind="vjp", label="inv_of[3d]"),
    C(ag.solve_of, (spd(4), r(4, seed=1)), wrt=(0, 1), kind="vjp"),
    C(ag.solve_of, (spd(4), r(4, 3, seed=1)), wrt=(0, 1), kind="vjp", label="solve_of[mat]"),
    C(
        ag.solve_of,
        (spd(4)[None] + r(2, 4, 4), r(2, 4, 3, seed=1)),
        wrt=(0, 1),
        kind="vjp",
        label="solve_of[3d]",
    ),
    C(ag.det_of, (r(4, 4),)),
    C(ag.det_of, (r(3, 4, 4),), kind="vjp", label="det_of[3d]"),
    C(ag.slogdet_of, (spd(4),)),
    C(ag.slogdet_of, (spd(4)[None] + r(3, 4, 4),), kind="vjp", label="slogdet_of[3d]"),
    C(ag.norm_2, (r(6),)),
    C(ag.norm_2, (r(3, 4),), label="norm_2[mat]"),
    C(ag.norm_fro_axis, (r(3, 4, 2),), kind="vjp"),
    C(ag.norm_ord, (r(3, 4),), kind="vjp"),
    C(ag.norm_nuc, (r(3, 4),)),
    C(ag.eigh_of, (spd(4),), kind="vjp"),
    C(ag.eigh_sym, (r(3, 4, 4),)),
    C(ag.cholesky_of, (r(4, 4),), kind="vjp"),
    C(ag.svd_values, (r(3, 5),), kind="vjp"),
    C(ag.svd_values, (r(2, 5, 3),), kind="vjp", label="svd_values[3d]"),
    C(ag.svd_vectors, (r(3, 5),)),
    C(ag.svd_vectors, (r(5, 5),), label="svd_vectors[square]"),
    C(ag.svd_vectors, (r(2, 5, 3),), label="svd_vectors[3d]"),
    C(ag.pinv_of, (r(3, 5),), kind="vjp"),
    C(ag.matrix_power_of, (r(3, 3),), kind="vjp"),
]
AUTOGRAD += [C(ag.scalar_unary, (x,), label=f"scalar_unary[{x}]") for x in (1.1, -1.1, 0.37)] + [
    C(ag.scalar_positive, (1.3,)),
    C(ag.scalar_binary, (1.3, 0.6), wrt=(0, 1)),
    C(ag.scalar_binary, (1.3, -0.6), wrt=(0, 1), label="scalar_binary[neg]"),
]


# ----------------------------------------------------------------------------- trees (Tangent)


def _fd_leaf(f, args, get, put, eps=1e-6):
    """Central differences of the scalar f(*args) with respect to one float leaf."""
    x = get(args)
    return (float(f(*put(args, x + eps))) - float(f(*put(args, x - eps)))) / (2 * eps)


def test_tuple_and_dict_arguments():
    """Tangent's packed arguments: gradients come back with the argument's structure."""
    abc = (0.7, -1.2, 0.4)
    for f in (tg.unpack_tuple, tg.first_of_tuple):
        g = s2sad.grad(f)(abc)
        assert isinstance(g, tuple) and len(g) == 3, f.__name__
        for k in range(3):

            def put(args, v, k=k):
                t = list(args[0])
                t[k] = v
                return (tuple(t),)

            expected = _fd_leaf(f, (abc,), lambda a, k=k: a[0][k], put)
            assert type(g[k]) is float
            np.testing.assert_allclose(g[k], expected, rtol=1e-6, atol=1e-9, err_msg=f.__name__)
    with pytest.raises(
        s2sad.S2SADError, match=r"peer_tangent\.py:\d+: no derivative rule for dict"
    ):
        s2sad.grad(tg.dict_from_tuple)(abc)  # a dict built by `dict(a=a, ...)`: refused by name
    d = {"a": 0.7, "b": -1.2, "c": 0.4}
    g = s2sad.grad(tg.dict_axpy)(d)
    assert g == pytest.approx({"a": -1.2, "b": 0.7, "c": 1.0}, rel=1e-12)
    p = {"i": {"j": 0.7, "k": -1.2}}
    g = s2sad.grad(tg.nested_dict)(p)
    assert list(g) == ["i"] and g["i"] == pytest.approx({"j": -1.2, "k": 0.7}, rel=1e-12)


# ----------------------------------------------------------------------------- the checks


def _check(case):
    if case.kind == "grad":
        return check_grad(case.f, case.args, case.wrt)
    return check_vjp(case.f, case.args, case.wrt)


@pytest.mark.parametrize("case", TANGENT, ids=lambda c: c.id)
def test_tangent_function_against_finite_differences(case):
    _check(case)


@pytest.mark.parametrize("case", AUTOGRAD, ids=lambda c: c.id)
def test_autograd_function_against_finite_differences(case):
    _check(case)


def _seeds(out, rng):
    if isinstance(out, tuple):
        return tuple(_seeds(o, rng) for o in out)
    return rng.standard_normal(np.shape(out)) if np.ndim(out) else float(rng.standard_normal())


def _indices(f, wrt):
    names = list(f.__code__.co_varnames[: f.__code__.co_argcount])
    items = wrt if isinstance(wrt, tuple) else (wrt,)
    return [names.index(w) if isinstance(w, str) else w for w in items]


def _s2sad_result(case, seed):
    """The derivative by s2sad as a flat list: gradients, or cotangents of `seed`."""
    if case.kind == "grad":
        got = s2sad.grad(case.f, wrt=case.wrt)(*copy.deepcopy(case.args))
    else:
        got = s2sad.vjp(case.f, wrt=case.wrt)(*copy.deepcopy(case.args))[1](seed)
    return list(got) if isinstance(case.wrt, tuple) else [got]


def _oracle_module(module, numpy_name):
    """`module`'s source run with `import numpy as np` replaced by another NumPy."""
    path = Path(module.__file__)
    text = path.read_text().replace("import numpy as np", f"import {numpy_name} as np")
    out = types.ModuleType(module.__name__ + "_oracle")
    out.__file__ = str(path)
    exec(compile(text, str(path), "exec"), out.__dict__)
    return out


# what an oracle does not run, or runs differently: case id -> why
NOT_IN_AUTOGRAD = {
    "two_results": "autograd's pullback of a plain tuple output is 0 (it needs autograd's tuple)",
    "cart2polar": "autograd's pullback of a plain tuple output is 0 (it needs autograd's tuple)",
    "einsum_three": "autograd refuses an output subscript repeated in an operand",
    "matrix_power_of": "autograd has no VJP for matrix_power",
    "eigh_of": "autograd reads the other triangle than NumPy (finite differences agree with s2sad)",
}
NOT_IN_JAX = {
    "sum_of_list": "jnp.sum refuses a Python list",
    "sum_of_list_of_elements": "jnp.sum refuses a Python list",
    "clip_kw": "jnp.clip has no a_min/a_max keywords",
    "repeated_index": "JAX refuses a list as an index",
    "partition_of": "jnp.partition orders the other elements differently (another function)",
    "eigh_of": "JAX symmetrizes the input (finite differences agree with s2sad)",
    "real_if_close_of": "jax.numpy has no real_if_close",
}
# JAX runs op by op here (a second or more for the longer functions), so it sees what autograd
# cannot run and a sample of the rest; autograd sees every function without in-place writes
JAX_SAMPLE = {
    "tangled_branches[0.8]",
    "bilinear",
    "index_mixed",
    "einsum_ellipsis",
    "linspace_5",
    "det_of[3d]",
    "norm_nuc",
    "eigh_sym",
}
PURE = [c for c in TANGENT + AUTOGRAD if c.pure]
ORACLE_CASES = [pytest.param(c, "autograd", id=f"{c.id}-autograd") for c in PURE] + [
    pytest.param(c, "jax", id=f"{c.id}-jax")
    for c in PURE
    if c.id in JAX_SAMPLE or (c.id in NOT_IN_AUTOGRAD and c.id not in NOT_IN_JAX)
]


def _autograd_result(case, f, seed):
    autograd = pytest.importorskip("autograd")
    args = case.args
    if case.kind == "grad":
        return [autograd.grad(f, i)(*copy.deepcopy(args)) for i in _indices(case.f, case.wrt)]
    indices = _indices(case.f, case.wrt)
    pullbacks = [autograd.make_vjp(f, i)(*copy.deepcopy(args))[0] for i in indices]
    return [pullback(seed) for pullback in pullbacks]


def _jax_result(case, f, seed):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    indices = _indices(case.f, case.wrt)

    def of_wrt(*xs):
        args = list(case.args)
        for i, x in zip(indices, xs):
            args[i] = x
        return f(*args)

    wrt_args = [case.args[i] for i in indices]
    if case.kind == "grad":
        return list(jax.grad(of_wrt, argnums=tuple(range(len(indices))))(*wrt_args))
    return list(jax.vjp(of_wrt, *wrt_args)[1](seed))


@pytest.fixture(scope="module")
def oracle_modules():
    return {}


@pytest.mark.parametrize("case, oracle", ORACLE_CASES)
def test_same_numbers_as_autograd_and_jax(case, oracle, oracle_modules):
    """s2sad's derivative equals the peer's on the same source (NumPy swapped for theirs)."""
    if oracle == "autograd" and case.id in NOT_IN_AUTOGRAD:
        pytest.skip(NOT_IN_AUTOGRAD[case.id])
    pytest.importorskip(oracle)
    module = case.f.__module__
    if (oracle, module) not in oracle_modules:
        numpy_name = "autograd.numpy" if oracle == "autograd" else "jax.numpy"
        oracle_modules[oracle, module] = _oracle_module(sys.modules[module], numpy_name)
    f = getattr(oracle_modules[oracle, module], case.f.__name__)
    seed = _seeds(case.f(*copy.deepcopy(case.args)), np.random.default_rng(0))
    seed = seed if case.kind == "vjp" else None
    ours = _s2sad_result(case, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = (_autograd_result if oracle == "autograd" else _jax_result)(case, f, seed)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(np.asarray(a, float), np.asarray(b, float), 1e-8, 1e-10)


# ----------------------------------------------------------------------------- autograd's wrappers


def test_value_and_grad_of_a_python_float():
    value, g = s2sad.value_and_grad(ag.power_3_2)(1.7)
    assert value == ag.power_3_2(1.7) and type(g) is float
    assert g == pytest.approx(3.0 * 3.2 * 1.7**2.2, rel=1e-12)
    value, g = s2sad.value_and_grad(ag.sin_squared)(r(5))
    np.testing.assert_allclose(g, check_grad(ag.sin_squared, (r(5),)), rtol=1e-15)


def test_hessian_of_a_quadratic_form():
    H = r(5, 5, seed=1)
    np.testing.assert_allclose(s2sad.hessian(ag.quadratic)(r(5), H), H + H.T, atol=1e-14)


def test_gradient_in_named_arguments_given_by_keyword():
    """autograd's multigrad: some positions, in another order, with keywords passed."""
    args = (0.5, -0.3, 0.2, -1.1, 0.7)
    g = s2sad.grad(ag.many_arguments, wrt=(3, 1, "f"))(*args, f=0.6, g=-0.1)
    assert g == pytest.approx((-np.sin(-1.1), np.cos(-0.3), 1.0), rel=1e-12)
    g = s2sad.grad(ag.packed_pair)((r(3), r(3, seed=1)))
    np.testing.assert_allclose(g[0], np.ones(3))
    np.testing.assert_allclose(g[1], np.cos(r(3, seed=1)), rtol=1e-14)


def test_elementwise_gradient_as_a_pullback_of_ones():
    a = r(10)
    np.testing.assert_allclose(s2sad.vjp(ag.elementwise)(a, 0.9)[1](np.ones(10)), 1 + np.cos(a))
    np.testing.assert_allclose(s2sad.vjp(ag.elementwise, wrt=1)(0.9, a)[1](np.ones(10)), np.sinh(a))


@pytest.mark.parametrize("shape", [(5,), (5, 4), (5, 4, 3)])
def test_hessian_and_jacobian_products_of_any_rank(shape):
    a, v = r(*shape), r(*shape, seed=2)
    hess = s2sad.hessian(ag.sum_of_sines)(a)
    assert hess.shape == shape + shape
    np.testing.assert_allclose(np.tensordot(hess, v, axes=len(shape)), -np.sin(a) * v, atol=1e-14)
    jac = s2sad.jacobian(ag.rolled_sines)(a)
    assert jac.shape == shape + shape
    np.testing.assert_allclose(
        np.tensordot(v, jac, axes=len(shape)), s2sad.vjp(ag.rolled_sines)(a)[1](v), atol=1e-14
    )
    np.testing.assert_allclose(s2sad.jacobian(ag.rolled_sines, mode="forward")(a), jac, atol=1e-14)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_gradient_keeps_a_low_precision_dtype(dtype):
    x = r(10, 10).astype(dtype)
    g = s2sad.grad(ag.sum_of_squares)(x)
    assert g.dtype == dtype
    np.testing.assert_allclose(g, 2 * x, rtol=1e-3)


def test_helpers_called_twice_and_through_partial():
    assert s2sad.grad(ag.two_affine_calls)(3.0) == pytest.approx(2 + 1 / 3 + 2 + 6.0, rel=1e-14)
    H = r(5, 5, seed=1)
    g = s2sad.grad(functools.partial(ag.quadratic, H=H))(r(5))
    np.testing.assert_allclose(g, (H + H.T) @ r(5), atol=1e-14)


@pytest.mark.parametrize(
    "f, args, wrt",
    [
        (ag.varargs_call, (3.0,), 0),  # autograd's `lambda *args: sum(args)`
        (ag.varargs_loop, (r(3), r(3, seed=1)), (0, 1)),
        (ag.varargs_slice, (r(3),), 0),
        (ag.varargs_unpacked, (r(3),), 0),
    ],
    ids=lambda v: getattr(v, "__name__", None),
)
def test_helpers_taking_star_args(f, args, wrt):
    """A helper's *args is the tuple of the call's extra arguments, in every mode."""
    check_grad(f, args, wrt)
    check_jvp(f, args, wrt)


def test_refusals_name_the_construct_file_and_line():
    """What the peers' suites exercise and s2sad does not differentiate yet: refused by name."""
    with pytest.raises(
        s2sad.S2SADError, match=r"peer_autograd\.py:\d+: \*args and \*\*kwargs.*'opts'"
    ):
        s2sad.grad(ag.kwargs_call)(r(3))  # a helper's own **kwargs
    with pytest.raises(s2sad.S2SADError, match=r"peer_tangent\.py:\d+: .*list comprehensions"):
        s2sad.grad(tg.sum_of_comprehension)(r(4))  # a comprehension over an array's items
    with pytest.raises(
        s2sad.S2SADError, match=r"peer_autograd\.py:\d+: no derivative rule for np\.linalg\.eig\b"
    ):
        s2sad.vjp(ag.eig_real)(spd(3))  # eigenvalues of a general matrix (complex in general)


# ----------------------------------------------------------------------------- jit=True

JIT_SAMPLE = ["rnn", "logistic_regression", "index_mixed"]


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """A cache directory of the test's own, so that the jitted code really compiles."""
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize(
    "case", [c for c in TANGENT + AUTOGRAD if c.id in JIT_SAMPLE], ids=lambda c: c.id
)
def test_jit_gives_numpy_modes_numbers(case, fresh_cache):
    """jit=True compiles or falls back with a warning; either way NumPy mode's numbers."""
    seed = _seeds(case.f(*copy.deepcopy(case.args)), np.random.default_rng(0))
    seed = seed if case.kind == "vjp" else None
    plain = _s2sad_result(case, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitFallbackWarning)
        if case.kind == "grad":
            got = s2sad.grad(case.f, wrt=case.wrt, jit=True)(*copy.deepcopy(case.args))
        else:
            got = s2sad.vjp(case.f, wrt=case.wrt, jit=True)(*copy.deepcopy(case.args))[1](seed)
    got = list(got) if isinstance(case.wrt, tuple) else [got]
    assert len(got) == len(plain)
    for a, b in zip(got, plain):
        assert type(a) is type(b) and np.shape(a) == np.shape(b)
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


# ----------------------------------------------------------------------------- JAX's grad records


@pytest.mark.parametrize(
    "f, x, slope, curvature",
    [
        (pj.arcsinh_sum, 0.0, 1.0, 0.0),
        (pj.arcsinh_sum, 1000.0, 1 / np.sqrt(1 + 1e6), -1000.0 / (1 + 1e6) ** 1.5),
        (pj.arccosh_sum, 1000.0, 1 / np.sqrt(1e6 - 1), -1000.0 / (1e6 - 1) ** 1.5),
        (pj.arctanh_sum, 0.0, 1.0, 0.0),
        (pj.sinc_sum, 0.0, 0.0, -(np.pi**2) / 3),
    ],
    ids=lambda v: getattr(v, "__name__", None),
)
def test_special_values_to_second_order(f, x, slope, curvature):
    for arg in (x, np.array([x])):
        g, h = s2sad.grad(f)(arg), s2sad.hessian(f)(arg)
        assert type(g) is type(arg) and np.shape(h) == np.shape(arg) * 2
        np.testing.assert_allclose(g, np.reshape(slope, np.shape(arg)), rtol=1e-12)
        np.testing.assert_allclose(h, np.reshape(curvature, np.shape(h)), rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("f", [pj.logaddexp_sum, pj.logaddexp2_sum], ids=lambda f: f.__name__)
@pytest.mark.parametrize(
    "shapes", [((), (3, 4)), ((3, 4), (3, 1)), ((3, 1), (1, 4)), ((2, 3, 4), (2, 1, 4))], ids=str
)
def test_logaddexp_of_broadcasting_operands_to_second_order(f, shapes):
    a, b = r(*shapes[0], low=-0.9, high=0.9), r(*shapes[1], seed=1, low=-0.9, high=0.9)
    a = float(a) if a.ndim == 0 else a
    check_grad(f, (a, b), wrt=(0, 1))
    hess = s2sad.hessian(f)(a, b)
    grad_a = s2sad.grad(f)
    # the Hessian's columns are central differences of the gradient
    for k in range(np.size(a)):
        step = np.zeros(np.shape(a))
        step.flat[k] = 1e-6
        column = (grad_a(a + step, b) - grad_a(a - step, b)) / 2e-6
        np.testing.assert_allclose(
            np.reshape(hess, (np.size(a), np.size(a)))[:, k], np.ravel(column), rtol=1e-6, atol=1e-8
        )


# ----------------------------------------------------------------------------- Tangent's other modes

# a tuple indexed by a run-time int becomes np.stack(...)[i]: the value and its tangent are
# np.float64 where the function returns a Python float (the numbers are right)
NUMPY_SCALAR_OUTPUT = {"pick_from_tuple"}


@pytest.mark.parametrize("case", TANGENT + AUTOGRAD, ids=lambda c: c.id)
def test_forward_mode_against_finite_differences(case):
    """Tangent's forward-mode tests: every function through s2sad.jvp."""
    if case.id not in NUMPY_SCALAR_OUTPUT:
        check_jvp(case.f, case.args, case.wrt)
        return
    indices = _indices(case.f, case.wrt)
    tangents = tuple(float(k + 1) for k in range(len(indices)))
    value, tangent = s2sad.jvp(case.f, wrt=case.wrt)(*case.args, tangent=tangents)
    assert value == case.f(*case.args) and type(tangent) is np.float64
    moved = [list(case.args), list(case.args)]
    for i, t in zip(indices, tangents):
        moved[0][i] += 1e-6 * t
        moved[1][i] -= 1e-6 * t
    assert tangent == pytest.approx((case.f(*moved[0]) - case.f(*moved[1])) / 2e-6, rel=1e-6)


def _moved_arg(args, i, k, step):
    out = list(copy.deepcopy(args))
    if isinstance(out[i], np.ndarray):
        out[i].flat[k] += step
    else:
        out[i] = out[i] + step
    return out


@pytest.mark.parametrize(
    "case", [c for c in TANGENT + AUTOGRAD if c.kind == "grad"], ids=lambda c: c.id
)
def test_hessian_against_differences_of_the_gradient(case):
    """Tangent's reverse-over-reverse and Hessian-vector tests: s2sad.hessian in each argument."""
    for i in _indices(case.f, case.wrt):
        x = case.args[i]
        if case.id == "norm_nuc":
            with pytest.raises(ValueError, match="no second derivative of np.linalg.norm"):
                s2sad.hessian(case.f, wrt=i)(*case.args)
            return
        hess = s2sad.hessian(case.f, wrt=i)(*copy.deepcopy(case.args))
        assert np.shape(hess) == np.shape(x) * 2
        grad = s2sad.grad(case.f, wrt=i)
        for k in range(np.size(x)):
            column = grad(*_moved_arg(case.args, i, k, 1e-5)) - grad(
                *_moved_arg(case.args, i, k, -1e-5)
            )
            np.testing.assert_allclose(
                np.reshape(hess, (np.size(x), -1))[:, k],
                np.ravel(column) / 2e-5,
                rtol=1e-5,
                atol=1e-6,
            )


def test_partition_weighted_by_position():
    """A value that depends on the order np.partition leaves the other elements in (its jitted
    form, which must keep NumPy's order, is in tests/test_jit_corpus.py)."""
    x = r(7, seed=3)
    assert s2sad.value_and_grad(ag.partition_weighted)(x)[0] == ag.partition_weighted(x)
    check_grad(ag.partition_weighted, (x,))
    check_jvp(ag.partition_weighted, (x,))
