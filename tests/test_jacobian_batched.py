"""The one-sweep Jacobian: batched cotangents (reverse mode) and batched tangents (forward mode).

Every case is checked in both modes against float64 central differences and against the
per-basis Jacobian (`batched=False`: one pullback per output element, one jvp per input element).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import s2sad
from s2sad import runtime as B  # (the batched helpers are in the runtime namespace too)
from s2sad import runtime as rt
from s2sad.trees import flatten

RNG = np.random.default_rng(20261122)
MODES = ("reverse", "forward")


def normal(*shape):
    return RNG.normal(size=shape)


def positive(*shape):
    return RNG.uniform(0.5, 2.0, size=shape)


def fd_jacobian(f, args, wrt, eps=1e-6):
    """Central differences of `f(*args)` in argument `wrt`, shaped out.shape + arg.shape."""
    args = list(args)
    x = args[wrt]
    out = np.asarray(f(*args), dtype=float)
    arr = np.asarray(x, dtype=float)
    J = np.zeros(out.shape + arr.shape)
    for idx in np.ndindex(arr.shape):
        plus, minus = arr.copy(), arr.copy()
        plus[idx] += eps
        minus[idx] -= eps
        if isinstance(x, float):
            plus, minus = float(plus), float(minus)
        args[wrt] = plus
        hi = np.asarray(f(*args), dtype=float)
        args[wrt] = minus
        lo = np.asarray(f(*args), dtype=float)
        J[(...,) + idx] = (hi - lo) / (2 * eps)
    args[wrt] = x
    return J


def check(f, *args, wrt=0, modes=MODES, atol=1e-6, rtol=1e-6):
    """Batched Jacobian == per-basis Jacobian == finite differences, in each mode."""
    positions = list(wrt) if isinstance(wrt, tuple) else [wrt]
    expected = [fd_jacobian(f, args, p) for p in positions]
    results = {}
    for mode in modes:
        J = s2sad.jacobian(f, wrt=wrt, mode=mode)(*args)
        reference = s2sad.jacobian(f, wrt=wrt, mode=mode, batched=False)(*args)
        Js = J if isinstance(wrt, tuple) else (J,)
        refs = reference if isinstance(wrt, tuple) else (reference,)
        assert isinstance(J, tuple) == isinstance(wrt, tuple)
        for got, ref, fd in zip(Js, refs, expected):
            assert got.shape == fd.shape, (mode, got.shape, fd.shape)
            assert got.dtype == ref.dtype == np.float64
            np.testing.assert_allclose(got, ref, rtol=1e-11, atol=1e-11, err_msg=mode)
            np.testing.assert_allclose(got, fd, rtol=rtol, atol=atol, err_msg=mode)
        results[mode] = J
    return results


# ----------------------------------------------------------------------------- elementwise

UNARY = {
    "sin": (np.sin, normal),
    "cos": (np.cos, normal),
    "tan": (np.tan, lambda *s: RNG.uniform(-1, 1, size=s)),
    "exp": (np.exp, normal),
    "exp2": (np.exp2, normal),
    "expm1": (np.expm1, normal),
    "log": (np.log, positive),
    "log2": (np.log2, positive),
    "log10": (np.log10, positive),
    "log1p": (np.log1p, positive),
    "sqrt": (np.sqrt, positive),
    "cbrt": (np.cbrt, positive),
    "square": (np.square, normal),
    "reciprocal": (np.reciprocal, positive),
    "abs": (np.abs, positive),
    "arcsin": (np.arcsin, lambda *s: RNG.uniform(-0.8, 0.8, size=s)),
    "arccos": (np.arccos, lambda *s: RNG.uniform(-0.8, 0.8, size=s)),
    "arctan": (np.arctan, normal),
    "sinh": (np.sinh, normal),
    "cosh": (np.cosh, normal),
    "tanh": (np.tanh, normal),
    "arcsinh": (np.arcsinh, normal),
    "arctanh": (np.arctanh, lambda *s: RNG.uniform(-0.8, 0.8, size=s)),
    "negative": (np.negative, normal),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("shape", [(3,), (2, 3), ()])
def test_unary(name, shape):
    op, draw = UNARY[name]

    def f(x):
        return op(x) * 1.5

    check(f, draw(*shape))


def test_unary_on_python_float_and_math_module():
    def f(x):
        return math.sin(x) * math.exp(x) + math.log(x) + math.sqrt(x) + abs(x) + float(x) ** 2

    results = check(f, 0.7)
    assert results["reverse"].shape == ()


def math_pow(x, y):
    return math.pow(x, y) + math.atan2(x, y) + math.hypot(x, y)


def test_math_two_argument_functions():
    check(math_pow, 1.3, 0.6, wrt=(0, 1))


BINARY = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
    "power": np.power,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "arctan2": np.arctan2,
    "hypot": np.hypot,
    "logaddexp": np.logaddexp,
    "mod": np.mod,
}
SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((3, 1), (1, 4)), ((), (2, 3)), ((2, 1, 3), (4, 1))]


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_binary_with_broadcasting(name, shapes):
    op = BINARY[name]

    def f(a, b):
        return op(a, b)

    a, b = positive(*shapes[0]), positive(*shapes[1])
    if name in ("maximum", "minimum"):
        b = b + 0.05  # no ties
    if name == "mod":
        a, b = a + 3.0, np.full(b.shape, 1.7)
    check(f, a, b, wrt=(0, 1))


@pytest.mark.parametrize("scalar", [0.7, np.float64(0.7), np.array(0.7)], ids=type)
def test_binary_with_scalars_and_zero_d_arrays(scalar):
    def f(s, x):
        return s * x + x / s - s**2 + np.sin(s)

    check(f, scalar, normal(2, 3), wrt=(0, 1))


def test_where_and_clip():
    def f(x, y):
        return np.where(x > 0, x * y, y) + np.clip(x, -0.5, 0.5) * 2

    x = np.array([[-1.0, 0.2, 0.9], [0.3, -0.1, 1.5]])
    check(f, x, normal(3), wrt=(0, 1))


def test_a_constant_larger_than_the_tangent_broadcasts_it():
    """x + C with C larger than x: forward mode's tangent takes C's shape."""
    C = np.zeros((3, 2))

    def f(x):
        y = x + C
        return np.sum(y, axis=0) + y[1] * y[2]

    check(f, normal(2))


# ----------------------------------------------------------------------------- reductions

REDUCTIONS = {
    "sum": np.sum,
    "mean": np.mean,
    "prod": np.prod,
    "max": np.max,
    "min": np.min,
    "var": np.var,
    "std": np.std,
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2), 1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions(name, axis, keepdims):
    op = REDUCTIONS[name]

    def f(x):
        return op(x, axis=axis, keepdims=keepdims) * 2

    check(f, positive(2, 3, 4))


def test_reductions_as_methods_and_ddof():
    def f(x):
        return x.sum(axis=1) * x.mean() + x.var(axis=0, ddof=1).sum() + x.max(axis=-1) * x.std()

    check(f, positive(3, 4))


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"axis": 1}, {"ord": 1, "axis": 0}, {"ord": 3, "axis": -1}, {"ord": np.inf, "axis": 1}]
    + [{"ord": o} for o in ("fro", "nuc", 2, 1, np.inf)]
    + [{"axis": (0, 1), "keepdims": True}],
    ids=str,
)
def test_norm(kwargs):
    order, axis, keepdims = kwargs.get("ord"), kwargs.get("axis"), kwargs.get("keepdims", False)

    def f(x):
        return np.linalg.norm(x, ord=order, axis=axis, keepdims=keepdims)

    check(f, normal(3, 4), atol=1e-5)


def test_norm_of_a_stack_of_matrices():
    def f(x):
        return np.linalg.norm(x, ord="fro", axis=(1, 2))

    check(f, normal(2, 3, 4))


# ----------------------------------------------------------------------------- linear algebra

MATMUL = [((3,), (3,)), ((3,), (3, 4)), ((2, 3), (3,)), ((2, 3), (3, 4))]
MATMUL += [((2, 2, 3), (3, 4)), ((1, 2, 3), (2, 3, 4)), ((5, 2, 3), (3,)), ((3,), (2, 3, 4))]


@pytest.mark.parametrize("shapes", MATMUL, ids=str)
def test_matmul(shapes):
    def f(a, b):
        return np.tanh(a @ b)

    check(f, normal(*shapes[0]), normal(*shapes[1]), wrt=(0, 1))


@pytest.mark.parametrize(
    "shapes",
    [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)), ((), (3,))]
    + [((2, 3), ()), ((2, 2, 3), (4, 3, 2))],
    ids=str,
)
def test_dot(shapes):
    def f(a, b):
        return np.dot(a, b) * 2

    a = normal(*shapes[0]) if shapes[0] else 0.8
    check(f, a, normal(*shapes[1]), wrt=(0, 1))


def test_dot_method_and_outer():
    def f(a, b):
        return a.dot(b) + np.sum(np.outer(a, b[::-1] ** 2), axis=0)

    check(f, normal(3), normal(3), wrt=(0, 1))


def test_outer_of_matrices_flattens_them():
    def f(a, b):
        return np.outer(a, b)

    check(f, normal(2, 2), normal(3), wrt=(0, 1))


@pytest.mark.parametrize(
    "spec, shapes",
    [
        ("ij,jk->ik", [(2, 3), (3, 4)]),
        ("ij,jk", [(2, 3), (3, 4)]),
        ("i,i", [(3,), (3,)]),
        ("ij,j->i", [(2, 3), (3,)]),
        ("ii->", [(3, 3)]),
        ("ii->i", [(3, 3)]),
        ("ij->", [(2, 3)]),
        ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]),
    ],
)
def test_einsum(spec, shapes):
    operands = [normal(*s) for s in shapes]

    def one(a):
        return np.einsum(spec, a)

    def two(a, b):
        return np.einsum(spec, a, b)

    if len(operands) == 1:
        check(one, *operands)
    else:
        check(two, *operands, wrt=(0, 1))


def test_einsum_with_an_ellipsis_forward_mode():
    def f(a, b):
        return np.einsum("...ij,jk->...ik", a, b)

    check(f, normal(2, 2, 3), normal(3, 2), wrt=(0, 1), modes=("forward",))


@pytest.mark.parametrize("kwargs", [{}, {"offset": 1}, {"axis1": 1, "axis2": 2}], ids=str)
def test_trace(kwargs):
    offset, axis1, axis2 = kwargs.get("offset", 0), kwargs.get("axis1", 0), kwargs.get("axis2", 1)

    def f(a):
        return np.trace(a, offset=offset, axis1=axis1, axis2=axis2) * 3

    check(f, normal(3, 3, 3))


def well_conditioned(*shape):
    n = shape[-1]
    return normal(*shape) + 3 * np.eye(n)


@pytest.mark.parametrize(
    "a_shape, b_shape", [((3, 3), (3,)), ((3, 3), (3, 2)), ((2, 3, 3), (2, 3, 2))]
)
def test_inv_solve_det(a_shape, b_shape):
    def f(a, b):
        return np.linalg.solve(a, b) + np.sum(np.linalg.inv(a)) * np.linalg.det(a)

    def g(a, b):
        return np.linalg.solve(a, b) * np.linalg.det(a)[:, None, None] + np.linalg.inv(a) @ b

    check(f if len(a_shape) == 2 else g, well_conditioned(*a_shape), normal(*b_shape), wrt=(0, 1))


@pytest.mark.parametrize(
    "a_shape, b_shape", [((2, 3, 3), (3,)), ((2, 3, 3), (3, 2)), ((3, 3), (2, 3, 2))], ids=str
)
def test_solve_broadcasting(a_shape, b_shape):
    """b broadcast over a stack of matrices, and matrices over a stack of b: the batched
    tangents and cotangents line up with the matrices they meet."""

    def f(a, b):
        return np.linalg.solve(a, b)

    check(f, well_conditioned(*a_shape), normal(*b_shape), wrt=(0, 1))


# ----------------------------------------------------------------------------- shape


def shapes_chain(x):
    y = x.reshape(3, 4) * 2
    z = np.reshape(y, (-1,))[::2] + np.ravel(x.T)[:6]
    w = x.reshape(2, 6).flatten()
    return np.concatenate([z, w[:3]]) ** 2


def layout(x):
    a = np.transpose(x, (2, 0, 1))
    b = np.swapaxes(x, 0, -1)
    c = np.moveaxis(x, 0, 2)
    d = np.transpose(x, (0, -1, 1))
    return a * 2 + np.sin(b) + c**2 + np.transpose(d, (2, 1, 0)) + x.transpose(2, 1, 0).T.T


def stacking(x, y):
    s = np.stack([x, y * 2], axis=0) + np.stack([y, x], axis=-1).T
    c = np.concatenate([x, y], axis=1)
    d = np.concatenate([x, y], axis=None)
    e = np.concatenate([x, np.ones((3, 3))], axis=-1)
    return (
        np.sum(s, axis=0) * np.sum(c) + d[:9].reshape(3, 3) + e[:, 1:4] + np.stack([x, y], 1)[:, 1]
    )


def dims(x):
    a = np.expand_dims(x, 0) * np.expand_dims(x, -2)
    b = np.squeeze(x[None, :, None, :], axis=(0, 2))
    c = np.broadcast_to(x, (4, 2, 3))
    return np.sum(a, axis=1) + b + np.sum(c, axis=0) + x[None].squeeze()


@pytest.mark.parametrize(
    "f, shapes",
    [
        (shapes_chain, [(3, 4)]),
        (layout, [(3, 3, 3)]),
        (stacking, [(3, 3), (3, 3)]),
        (dims, [(2, 3)]),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_shape_operations(f, shapes):
    args = [normal(*s) for s in shapes]
    check(f, *args, wrt=tuple(range(len(args))) if len(args) > 1 else 0)


# ----------------------------------------------------------------------------- indexing

IDX = np.array([0, 2, 2, 1])
MASK = np.array([[True, False, True], [False, True, True]])


def reads(x):
    return np.concatenate(
        [
            x[0] * 2,
            x[-1, ::-2],
            x[1:, 1],
            x[..., 0],
            np.ravel(x[:, IDX]),
            x[MASK] ** 2,
            x[[1, 0, 1]][:, 0],
            x[1, 2:3],
        ]
    )


def separated_advanced(x):
    """NumPy moves separated advanced indices' axes to the front."""
    return np.sin(x[IDX[:2], :, IDX[1:3]]) + x[0, :, IDX[:2]] * 2


def test_getitem():
    check(reads, normal(2, 3))


def test_getitem_with_separated_advanced_indices():
    check(separated_advanced, normal(3, 2, 3))


def writes(x, v):
    y = np.zeros((3, 4))
    y[0] = x
    y[1:, :2] = v * 2
    y[2, IDX[:2]] = x[:2] ** 2
    y[:, 3] = y[:, 0] * v[0, 0]
    y[y > 10.0] = 0.0
    z = y.copy()
    z[1] = z[1] + x
    return z * y


def test_setitem():
    check(writes, normal(4), normal(2, 2), wrt=(0, 1))


def separated_write(x, v):
    y = np.zeros((3, 2, 3))
    y[0, :, IDX[:2]] = v
    y[1] = x
    return y**2


def test_setitem_with_separated_advanced_indices():
    check(separated_write, normal(2, 3), normal(2, 2), wrt=(0, 1))


# ----------------------------------------------------------------------------- control flow


def recurrence(x, a):
    y = np.zeros_like(x)
    y[0] = x[0]
    for i in range(1, x.shape[0]):
        if x[i] > y[i - 1]:
            y[i] = a * y[i - 1] + (1 - a) * x[i]
        else:
            y[i] = y[i - 1] * np.cos(x[i])
    return y


def carried(x, w):
    h = np.zeros(w.shape[0])
    outs = np.zeros((x.shape[0], w.shape[0]))
    for t in range(x.shape[0]):
        h = np.tanh(w @ h + x[t])
        outs[t] = h
    return outs


def newton(a):
    x = a
    k = 0
    while k < 6:
        x = 0.5 * (x + a / x)
        k += 1
    return x


def branchy(x):
    s = np.sum(x)
    if s > 0:
        y = np.sin(x) * s
    else:
        y = x**3
    total = 0.0
    for v in x:
        if v > 0.1:
            total = total + v * y[0]
    return y * total


def rows_loop(x):
    acc = np.zeros(x.shape[1])
    for row in x:
        acc = acc * 0.5 + row**2
    for k, row in enumerate(x):
        acc[k % 2] = acc[k % 2] + row[0]
    return acc


def helper(u, scale):
    return np.tanh(u) * scale


def uses_helper(x, s):
    return helper(x, s) + helper(x[::-1], 2.0) * s


@pytest.mark.parametrize(
    "f, args, wrt",
    [
        (recurrence, (np.array([0.3, -0.2, 0.9, 0.1, 1.4]), 0.6), (0, 1)),
        (carried, (normal(4, 3), 0.5 * normal(3, 3)), (0, 1)),
        (newton, (2.0,), 0),
        (branchy, (np.array([0.5, -0.2, 0.8]),), 0),
        (branchy, (np.array([-0.5, -0.2, 0.3]),), 0),
        (rows_loop, (normal(3, 2),), 0),
        (uses_helper, (normal(3), 0.7), (0, 1)),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_control_flow(f, args, wrt):
    check(f, *args, wrt=wrt)


def array_while(x):
    y = x.copy()
    n = 0
    while np.max(np.abs(y)) > 0.1 and n < 50:
        y = y * 0.5 + np.sin(y) * 0.1
        n += 1
    return y


def test_while_loop_on_arrays():
    check(array_while, np.array([0.8, -1.2, 0.4]))


# ----------------------------------------------------------------------------- user rules


@s2sad.custom_vjp
def softplus(x):
    return np.log1p(np.exp(x))


@softplus.defvjp
def _softplus_vjp(dy, y, x):
    assert np.shape(dy) == np.shape(x)  # one row of the batch at a time
    return dy / (1 + np.exp(-x))


def uses_softplus(x):
    return softplus(x * 2) * x


def pair(a, b):
    return a * np.sin(b)


def _pair_vjp(dy, y, a, b):
    return dy * np.sin(b), dy * a * np.cos(b)


s2sad.register_vjp(pair, _pair_vjp)


def uses_pair(a, b):
    return pair(a, b) ** 2


def test_custom_vjp_is_called_once_per_row_in_reverse_mode():
    check(uses_softplus, normal(3), modes=("reverse",))
    src = s2sad.source(s2sad.jacobian(uses_softplus, mode="reverse"), normal(3))
    assert "stack_rows(" in src and "softplus_vjp(" in src


def test_register_vjp_with_two_cotangents():
    check(uses_pair, normal(2, 3), normal(2, 3), wrt=(0, 1), modes=("reverse",))
    src = s2sad.source(s2sad.jacobian(uses_pair, wrt=(0, 1), mode="reverse"), 1.0, 2.0)
    assert "da, db = stack_rows(" in src and "pair_vjp(" in src


def test_forward_mode_through_a_custom_vjp_is_refused_clearly():
    with pytest.raises(s2sad.NoRuleError, match="forward-mode") as caught:
        s2sad.jacobian(uses_softplus, mode="forward")(normal(3))
    assert "s2sad.jacobian(f, mode='reverse')" in caught.value.hint


def test_the_default_mode_takes_reverse_where_forward_has_no_rule():
    """Equal sizes pick forward mode, which has no rule for a function given only a vjp rule:
    the default runs reverse mode instead (batched and per basis, from the first call on);
    a Hessian, forward over reverse, says so and what to do."""
    x = normal(3)
    expected = fd_jacobian(uses_softplus, (x,), 0)
    for batched in (True, False):
        jac = s2sad.jacobian(uses_softplus, batched=batched)
        for _ in range(2):
            np.testing.assert_allclose(jac(x), expected, rtol=1e-6, atol=1e-6)
        assert jac.refused == "forward"
    with pytest.raises(s2sad.NoRuleError, match="no forward-mode") as caught:
        s2sad.hessian(lambda x: np.sum(uses_softplus(x)))(x)
    assert "register_vjp" in caught.value.hint and "central differences" in caught.value.hint


def test_every_builtin_rule_is_vectorized():
    """Only user rules go row by row: every template of the built-in table has a batched form."""
    import ast

    from s2sad.rules.batching import batch_adjoint
    from s2sad.rules.registry import NAMESPACE, VJP

    rows = []
    for rule in VJP.values():
        for param, template in rule.templates.items():
            if param in rule.batched_templates:
                continue
            if callable(template):  # built from the call's arguments: try plain names
                args = {p: ast.Name(p, ast.Load()) for p in rule.signature.parameters}
                template = ast.parse(template(args), mode="eval").body
            calls = {
                n.func.id
                for n in ast.walk(template)
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
            }
            if calls & set(NAMESPACE):
                continue  # a user's rule
            if batch_adjoint(ast.parse(ast.unparse(template), mode="eval").body, "g") is None:
                rows.append(f"{rule.name}.{param}")
    assert rows == ["pow.y"]  # math.pow's `... if x > 0 else 0.0`: row by row, still right


# ----------------------------------------------------------------------------- the API


def layer(x):
    return np.tanh(x @ np.arange(12.0).reshape(3, 4) / 10) * np.array([[1.0], [2.0]])


def test_seed000_shape_and_values_in_both_modes():
    x = normal(2, 3)
    results = check(layer, x)
    assert results["reverse"].shape == (2, 4, 2, 3)
    np.testing.assert_allclose(s2sad.jacobian(layer)(x), results["reverse"], atol=1e-12)


def test_tuple_wrt_mixing_floats_and_arrays():
    def f(a, x, b):
        return a * np.sin(x) + b * x**2

    Ja, Jx, Jb = check(f, 0.5, normal(2, 2), 1.5, wrt=(0, 1, 2))["forward"]
    assert Ja.shape == (2, 2) and Jx.shape == (2, 2, 2, 2) and Jb.shape == (2, 2)


def test_scalar_output_and_python_float_input_keep_todays_types():
    def f(x):
        return x * 2.0

    for mode in MODES:
        for x in (1.5, np.float32(1.5)):
            J = s2sad.jacobian(f, mode=mode)(x)
            ref = s2sad.jacobian(f, mode=mode, batched=False)(x)
            assert type(J) is type(ref) is np.ndarray and J.shape == () and J.dtype == ref.dtype


@pytest.mark.parametrize("mode", MODES)
def test_float32_inputs_give_a_float32_jacobian_either_way(mode):
    x = normal(2, 3).astype(np.float32)
    J = s2sad.jacobian(layer, mode=mode)(x)
    ref = s2sad.jacobian(layer, mode=mode, batched=False)(x)
    assert J.dtype == ref.dtype == np.float32
    np.testing.assert_allclose(J, ref, rtol=1e-5, atol=1e-6)


def test_output_independent_of_the_input_is_zero():
    def f(x, y):
        return y * 2

    for mode in MODES:
        J = s2sad.jacobian(f, mode=mode)(normal(3), normal(2))
        assert J.shape == (2, 3) and not J.any()


def test_default_mode_is_the_one_with_fewer_rows():
    def wide(x):
        return np.sum(x**2)

    def tall(x):
        return np.outer(x, x)

    jw, jt = s2sad.jacobian(wide), s2sad.jacobian(tall)
    jw(normal(5))
    jt(normal(2))
    assert jw.last[0] == "reverse" and jt.last[0] == "forward"
    assert "def vjp_batched_wide(x):" in s2sad.source(jw)
    assert "def jvp_batched_tall(x, x_dot):" in s2sad.source(jt)


def test_tuple_output_gives_a_jacobian_per_output():
    def f(x):
        return x, np.sum(x * 2), np.outer(x, x)

    x = normal(2)
    for mode in MODES:
        for batched in (True, False):
            eye, twos, outer = s2sad.jacobian(f, mode=mode, batched=batched)(x)
            np.testing.assert_array_equal(eye, np.eye(2))
            np.testing.assert_array_equal(twos, [2.0, 2.0])
            assert outer.shape == (2, 2, 2)
            expected = fd_jacobian(lambda v: np.outer(v, v), (x,), 0)
            np.testing.assert_allclose(outer, expected, rtol=1e-6)


CALLS = []


def counted(x):
    CALLS.append(1)
    y = np.zeros_like(x)
    y[0] = x[0]
    for i in range(1, x.shape[0]):
        y[i] = y[i - 1] * np.cos(x[i]) + x[i]
    return y * 2


@pytest.mark.parametrize("mode", MODES)
def test_one_sweep(mode):
    """The batched Jacobian runs the primal once (plus, in reverse mode, one recording sweep
    for its one pullback call: this adjoint pops a tape); per basis it runs once per row."""
    x = normal(5)
    CALLS.clear()
    J = s2sad.jacobian(counted, mode=mode)(x)
    batched_calls = len(CALLS)
    CALLS.clear()
    reference = s2sad.jacobian(counted, mode=mode, batched=False)(x)
    assert batched_calls == (2 if mode == "reverse" else 1)
    assert len(CALLS) == 1 + x.size  # per basis: the vjp's primal, then a sweep per row
    np.testing.assert_allclose(J, reference, rtol=1e-12)
    np.testing.assert_allclose(J, fd_jacobian(counted, [x], 0), atol=1e-6)


def test_source_shows_the_batched_code():
    jac = s2sad.jacobian(recurrence, mode="reverse")
    src = s2sad.source(jac, np.ones(4), 0.5)
    assert "def vjp_batched_recurrence(x, a):" in src
    assert "dy[:, i] = 0.0" in src and "dy[:, i - 1] += " in src and "dx[:, i] += " in src
    src = s2sad.source(s2sad.jacobian(recurrence, mode="forward"), np.ones(4), 0.5)
    assert "def jvp_batched_recurrence(x, a, x_dot):" in src and "y_dot[:, i] = " in src


def twice_sin(v):
    return np.sin(v) * 2


def test_batched_and_unbatched_transforms_are_cached_apart():
    x = normal(3)
    for _ in range(2):
        np.testing.assert_allclose(
            s2sad.jacobian(twice_sin, mode="reverse")(x), np.diag(2 * np.cos(x))
        )
        np.testing.assert_allclose(
            s2sad.jacobian(twice_sin, mode="forward")(x), np.diag(2 * np.cos(x))
        )
        _, pullback = s2sad.vjp(twice_sin)(x)
        np.testing.assert_allclose(pullback(np.ones(3)), 2 * np.cos(x))
        _, tangent = s2sad.jvp(twice_sin)(x, tangent=np.ones(3))
        np.testing.assert_allclose(tangent, 2 * np.cos(x))


# ----------------------------------------------------------------------------- helpers directly


@st.composite
def broadcast_pair(draw):
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=3))
    a, b = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, base_shape=shape)).input_shapes
    return a, b


OPS = sorted(BINARY)


@settings(max_examples=60, deadline=None)
@given(shapes=broadcast_pair(), name=st.sampled_from(OPS), mode=st.sampled_from(MODES))
def test_binary_random_broadcast_shapes(shapes, name, mode):
    op = BINARY[name]

    def f(a, b):
        return op(a, b)

    rng = np.random.default_rng(abs(hash((shapes, name))) % 2**32)
    a = rng.uniform(0.5, 2.0, size=shapes[0])
    b = rng.uniform(0.5, 2.0, size=shapes[1]) + (0.03 if name in ("maximum", "minimum") else 0)
    if name == "mod":
        a, b = a + 3.0, np.full(shapes[1], 1.7)
    Ja, Jb = s2sad.jacobian(f, wrt=(0, 1), mode=mode)(a, b)
    for J, position in ((Ja, 0), (Jb, 1)):
        np.testing.assert_allclose(J, fd_jacobian(f, [a, b], position), rtol=1e-6, atol=1e-6)


@settings(max_examples=80, deadline=None)
@given(shapes=broadcast_pair(), rows=st.integers(1, 3))
def test_batched_unbroadcast_is_unbroadcast_row_by_row(shapes, rows):
    out = np.broadcast_shapes(*shapes)
    g = np.random.default_rng(0).normal(size=(rows,) + out)
    for shape in shapes:
        x = np.zeros(shape)
        expected = np.stack([rt.unbroadcast(row, x) for row in g])
        got = B.batched_unbroadcast(g, x)
        assert got.shape == (rows,) + shape
        np.testing.assert_allclose(got, expected, atol=1e-12)


@pytest.mark.parametrize(
    "index",
    [
        (0, slice(None), IDX[:2]),
        (IDX[:2], slice(None), IDX[1:3]),
        (slice(1, None), np.array([1, 0, 1])),
        (Ellipsis, 1),
        MASK[:1, :2],
        (None, 0),
    ],
    ids=str,
)
def test_batched_index_selects_each_rows_elements(index):
    g = np.arange(4 * 3 * 2 * 3.0).reshape(4, 3, 2, 3)
    if isinstance(index, np.ndarray):
        g = np.arange(4 * 1 * 2 * 3.0).reshape(4, 1, 2, 3)
    got = g[B.batched_index(g, index)]
    np.testing.assert_array_equal(got, np.stack([row[index] for row in g]))


# ----------------------------------------------------------------------------- more writes and reads


def scatter_reads(x):
    """Reads inside a loop scatter into dx in place: a loop index, a computed index, an array."""
    s = np.zeros(2)
    for i in range(x.shape[0] - 1):
        j = i + 1
        s = s + x[i] * x[j] + np.sum(x[IDX[:3] % x.shape[0]]) * x[i]
    return s * np.array([1.0, 2.0])


def broadcast_writes(x, s):
    y = np.ones((3, 4))
    y[0] = s
    y[1:, :2] = x[:2]
    y[:, 3] = x[3] * s
    y[:] = y * 2
    y[2] = y[2] + y[1]
    return y


@pytest.mark.parametrize(
    "f, args, wrt",
    [(scatter_reads, (normal(5),), 0), (broadcast_writes, (normal(4), 0.3), (0, 1))],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_more_reads_and_writes(f, args, wrt):
    check(f, *args, wrt=wrt)


def test_empty_input_or_output():
    def f(x, y):
        return np.sum(x) * y

    for mode in MODES:
        J = s2sad.jacobian(f, mode=mode)(np.zeros(0), np.ones(2))
        assert J.shape == (2, 0)
        J = s2sad.jacobian(f, wrt=1, mode=mode)(np.ones(3), np.zeros(0))
        assert J.shape == (0, 0)


# ----------------------------------------------------------------------------- hessian


def energy(x):
    e = 0.0
    for i in range(1, x.shape[0]):
        d = x[i] - x[i - 1]
        if d > 0:
            e = e + d**3
        else:
            e = e + np.sin(d)
    return e + np.sum(np.tanh(x.reshape(-1, 1) @ x.reshape(1, -1)))


def model_loss(w, X, y):
    h = np.tanh(X @ w[:3].reshape(3, 1) + w[3])
    return np.mean((h[:, 0] - y) ** 2) + np.var(w) * np.sum(w**2)


@pytest.mark.parametrize(
    "f, args",
    [
        (energy, (np.array([0.1, 0.5, 0.2, 0.9, 0.7]),)),
        (model_loss, (normal(4), normal(6, 3), normal(6))),
        (energy, (np.array([[0.1, 0.5], [0.2, 0.9]]).ravel(),)),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_hessian_in_one_forward_sweep(f, args):
    H = s2sad.hessian(f)(*args)
    reference = s2sad.hessian(f, batched=False)(*args)
    np.testing.assert_allclose(H, reference, rtol=1e-11, atol=1e-11)
    fd = np.stack(
        [
            (s2sad.grad(f)(args[0] + e, *args[1:]) - s2sad.grad(f)(args[0] - e, *args[1:])) / 2e-6
            for e in np.eye(args[0].size) * 1e-6
        ],
        axis=-1,
    )
    np.testing.assert_allclose(H, fd, atol=1e-6)
    assert "def jvp_batched_grad_" in s2sad.source(s2sad.hessian(f), *args)


def test_hessian_of_a_float_and_float32():
    def f(x):
        return x**3 + np.sin(x)

    assert s2sad.hessian(f)(0.7) == pytest.approx(6 * 0.7 - np.sin(0.7))
    x = normal(3).astype(np.float32)

    def g(x):
        return np.sum(x**3)

    H = s2sad.hessian(g)(x)
    assert H.dtype == np.float32 and H.shape == (3, 3)
    np.testing.assert_allclose(H, np.diag(6 * x), rtol=1e-6)


# ----------------------------------------------------------------------------- found by fuzzing


def never_assigned(w, x, a):
    """`v` is assigned only in a branch the loop never takes: its zero adjoint cannot read it."""
    for i in range(2):
        if a < 0.0:
            continue
        v = w[i]
        x = x + np.sum(v) * x
    return x * w[0]


@pytest.mark.parametrize("a", [0.5, -0.5])
def test_a_loop_value_the_loop_may_never_assign(a):
    check(never_assigned, normal(2, 3), normal(3), a, wrt=(0, 1))


def rebinds_a_parameter(w, x):
    """x is not differentiated, but the loop rebinds it from w: its tangent starts at zero."""
    y = x * 2.0
    for i in range(2):
        x = x + w * y
    return y + x


def test_a_rebound_parameter_outside_wrt_starts_with_a_zero_tangent():
    check(rebinds_a_parameter, normal(3), normal(3))
    _, tangent = s2sad.jvp(rebinds_a_parameter)(np.ones(3), np.ones(3), tangent=np.ones(3))
    np.testing.assert_allclose(tangent, 4.0 * np.ones(3))


# ----------------------------------------------------------------------------- random programs


@pytest.mark.parametrize("seed", range(24))
def test_random_programs_batched_equals_per_basis(seed, tmp_path):
    """The fuzzer's random programs (tests/fuzzgen.py): the one-sweep Jacobian equals the
    per-basis one in both modes, or both refuse the program the same way."""
    import copy
    import sys

    import fuzzgen

    outcome = fuzzgen.check_program(seed, str(tmp_path), modes=())
    if outcome.args is None:
        pytest.skip("no test point away from kinks")
    prog = outcome.program
    f = getattr(sys.modules[f"_s2sad_fuzz_{seed}"], prog.fname)
    for mode in MODES:
        results = []
        for batched in (True, False):
            jac = s2sad.jacobian(f, wrt=prog.wrt, mode=mode, batched=batched)
            with np.errstate(all="ignore"):
                try:
                    results.append(jac(*copy.deepcopy(outcome.args)))
                except s2sad.S2SADError as exc:
                    results.append(type(exc))
        got, reference = results
        if isinstance(reference, type):
            assert got is reference, (mode, got, reference)
            continue
        got, reference = flatten(got), flatten(reference)  # a tuple output: tuples of tuples
        assert got[0] == reference[0]
        for a, b in zip(got[1], reference[1]):
            assert a.shape == b.shape
            np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-9, err_msg=f"seed {seed} {mode}")


def joined_after_a_constant(w, x, s):
    return np.concatenate([x[2:3, :], np.dot(w, s * np.linspace(0.25, 1.5, 8).reshape((4, 2)))])


def test_forward_batched_list_whose_first_element_carries_no_tangent():
    """Fuzz seeds 140110, 141399, ... (a long run after the merges): batched forward mode dropped
    the tangent of np.concatenate when the list's first element was inactive."""
    w, x = normal(1, 4), normal(3, 2)
    check(joined_after_a_constant, w, x, 0.3, wrt=(0, 2))


# ----------------------------------------------------------------------------- jvp(batched=True)


def tanh_layer(x, W):
    return np.tanh(W @ x) * np.sum(x**2)


def test_batched_jvp_is_the_jvp_of_each_tangent_in_one_sweep():
    x, W = normal(3), normal(4, 3)
    T, TW = normal(5, 3), normal(5, 4, 3)
    out, rows = s2sad.jvp(tanh_layer, wrt=(0, 1), batched=True)(x, W, tangent=(T, TW))
    np.testing.assert_allclose(out, tanh_layer(x, W), rtol=1e-15)
    assert rows.shape == (5, 4)
    for k in range(5):
        single = s2sad.jvp(tanh_layer, wrt=(0, 1))(x, W, tangent=(T[k], TW[k]))[1]
        np.testing.assert_allclose(rows[k], single, rtol=1e-12, atol=1e-14)


def test_batched_jvp_shares_tangents_across_independent_rows():
    """One tangent per parameter slot, the same slot in every row of a batch of independent
    problems, gives every problem's Jacobian (the BA benchmark's vmap(jacfwd))."""

    def residuals(P):  # row i depends on P[i] only
        return np.stack([P[:, 0] * P[:, 1], np.sin(P[:, 1])], axis=1)

    P = normal(6, 2)
    T = np.zeros((2, 6, 2))
    T[0, :, 0] = T[1, :, 1] = 1.0
    rows = s2sad.jvp(residuals, batched=True)(P, tangent=T)[1]  # (2, 6, 2)
    blocks = np.moveaxis(rows, 0, 2)  # (6, 2, 2): block i = d residuals[i] / d P[i]
    for i in range(6):
        expected = [[P[i, 1], P[i, 0]], [0.0, np.cos(P[i, 1])]]
        np.testing.assert_allclose(blocks[i], expected, rtol=1e-14)


def test_batched_jvp_checks_its_tangents():
    x, W = normal(3), normal(4, 3)
    batched = s2sad.jvp(tanh_layer, wrt=(0, 1), batched=True)
    with pytest.raises(s2sad.SeedShapeError, match="same number of tangents"):
        batched(x, W, tangent=(normal(5, 3), normal(4, 4, 3)))
    with pytest.raises(s2sad.SeedShapeError, match=r"shape \(rows,\)"):
        batched(x, W, tangent=(normal(3), normal(4, 3)))
    with pytest.raises(s2sad.S2SADError, match="no jit=True yet"):
        s2sad.jvp(tanh_layer, batched=True, jit=True)
