"""Stores into slices in fused runs (s2sad/pipeline/fusion/scatters.py): `z[1:] = t`, with `t`
computed elementwise over the slice's shape (the primal of `z[1:] = x[1:] * y[:-1]`), becomes a
write of each element inside the loop that computes it (`z[i0 + 1] = ...`), where Numba made
`t` and copied it through its generic slice assignment. The fused code must give Python mode's
numbers (and finite differences') for any slices, steps and shapes; a store whose array the run
reads, itself or through a view (`z[1:] = z[:-1] * 2`, NumPy's right side computed first), must
stay as it was; the guard must send another dtype or shape to the original code."""

from __future__ import annotations

import ast
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_jit_fuse import fd_grad, fused_ran, rng
from test_jit_fuse_slices import _unit

import s2sad
from s2sad.pipeline.fusion import fuse
from s2sad.transform_cache import transform

numba = pytest.importorskip("numba")

pytestmark = pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaWarning")

STORED = re.compile(r"\b\w+\[i0 \+ 1(, i1)?\] = ")


def rhs_steps(x, n):  # gradbench's RK4 right-hand side, in a loop
    y = x * 0.5
    for _ in range(n):
        z = np.zeros_like(y)
        z[0] = x[0]
        z[1:] = x[1:] * y[:-1]
        y = y + 0.3 * z
    return np.sum(y * y)


# NumPy computes a store's right side first: no element sees another's write. (`z` is not
# differentiated, so no snapshot of its old elements stands between their reads and the store.)
def self_shifted(x, c):
    z = c * 1.0
    z[1:] = z[:-1] * 2.0
    return np.sum(z * z * x)


def view_before(x, c):  # `w` views `z`, taken before the store
    z = np.sin(c)
    w = z[:-1]
    u = np.cos(c[1:])
    z[1:] = w * u
    return np.sum(z * x)


def block(u, w):  # two axes, one reversed
    z = np.zeros_like(u)
    z[1:, ::-1] = np.tanh(u[:-1, :]) * w
    return np.sum(z * u)


def read_after(x):  # the stored value is read again after the store
    z = np.zeros_like(x)
    t = x[1:] * x[:-1]
    z[1:] = t
    return np.sum(z * x) + np.sum(t * t)


def float64_into(x):  # `z` float64 whatever `x` is
    z = np.zeros(x.shape)
    z[1:] = x[1:] * x[:-1]
    return np.sum(z * z)


def _grads(f, args, wrt="x"):
    jitted = s2sad.grad(f, wrt=wrt, jit="strict")
    got = jitted(*args)
    expected = s2sad.grad(f, wrt=wrt)(*args)
    assert got.shape == args[0].shape and got.dtype == args[0].dtype
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got, fd_grad(f, args, 0), rtol=1e-6, atol=1e-7)
    return jitted


def _primal(source: str) -> str:
    return source[: source.index("# adjoint sweep")]


def test_the_rk4_right_hand_side_writes_its_product_in_the_loop():
    jitted = _grads(rhs_steps, (rng().normal(size=9), 3))
    assert fused_ran(jitted)
    primal = _primal(s2sad.source(jitted))
    assert STORED.search(primal) and "[1:].shape == " in primal and "float_arrays(" in primal


def test_forward_mode_writes_the_store_and_its_tangent_in_the_loop():
    x, v = rng().normal(size=8), rng(1).normal(size=8)
    jitted = s2sad.jvp(rhs_steps, wrt="x", jit="strict")
    out, tangent = jitted(x, 3, tangent=v)
    expected = s2sad.jvp(rhs_steps, wrt="x")(x, 3, tangent=v)
    np.testing.assert_allclose((out, tangent), expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(tangent, s2sad.grad(rhs_steps)(x, 3) @ v, rtol=1e-10)
    assert len(STORED.findall(s2sad.source(jitted))) == 2  # z and its tangent


@pytest.mark.parametrize("f", [self_shifted, view_before])
def test_a_store_into_an_array_the_run_reads_is_not_fused(f):
    jitted = _grads(f, (rng().normal(size=7), rng(1).normal(size=7)))
    assert not STORED.search(_primal(s2sad.source(jitted)))


def test_two_axes_one_reversed():
    u, w = rng().normal(size=(5, 4)), rng(1).normal(size=(4, 4))
    jitted = _grads(block, (u, w), wrt="u")
    assert fused_ran(jitted)
    assert "z[i0 + 1, z.shape[1] - 1 - i1] = z_mul_i" in _primal(s2sad.source(jitted))


def test_a_stored_value_read_later_is_kept():
    jitted = _grads(read_after, (rng().normal(size=8),))
    assert fused_ran(jitted) and STORED.search(_primal(s2sad.source(jitted)))


def test_another_dtype_or_shape_takes_the_original_statements():
    x = rng().normal(size=6)
    jitted = s2sad.grad(float64_into, jit="strict")
    for arg in (x, x.astype(np.float32), x[:1], x[:0]):
        got = jitted(arg)
        assert got.dtype == arg.dtype and got.shape == arg.shape
        expected = s2sad.grad(float64_into)(arg)
        np.testing.assert_allclose(got, expected, rtol=1e-5 if arg.dtype == np.float32 else 1e-12)


class _Guards:
    """The jitted transform's code run by Python with its guards as Numba's forms decide them
    (one float dtype; `fusible`: one shape), so that the fused loops run."""

    def __init__(self, compiled):
        self.namespace, self.kept = compiled.function.__globals__, {}

    def __enter__(self):
        for name in ("fusible", "float_arrays"):
            self.kept[name] = self.namespace[name]
        self.namespace["fusible"] = lambda *a: all(b.shape == a[0].shape for b in a) and (
            len({b.dtype for b in a}) == 1
        )
        self.namespace["float_arrays"] = lambda *a: len({b.dtype for b in a}) == 1
        return self

    def __exit__(self, *exc):
        self.namespace.update(self.kept)


_PARTS = st.sampled_from([None, 0, 1, 2, -1, -2, 9])
_STEPS = st.sampled_from([None, 1, 2, -1, -3])


def _text(part: tuple) -> str:
    lower, upper, step = ("" if p is None else str(p) for p in part)
    return f"{lower}:{upper}" + (f":{step}" if step else "")


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(0, 7),
    first=st.tuples(_PARTS, _PARTS, _STEPS),
    second=st.tuples(_PARTS, _PARTS, _STEPS),
)
def test_random_slices_stored_in_the_loop_give_python_modes_gradient(
    tmp_path_factory, n, first, second
):
    """`z[first] = sin(x[second]) * x[second]`, where the two slices have one length: the
    fused code (run by Python, guards as compiled) against Python mode and NumPy."""
    from conftest import load_module

    if len(range(n)[slice(*first)]) != len(range(n)[slice(*second)]):
        return
    text = (
        "import numpy as np\n\n\ndef f(x):\n"
        "    z = np.zeros_like(x)\n"
        f"    z[{_text(first)}] = np.sin(x[{_text(second)}]) * x[{_text(second)}]\n"
        "    return np.sum(z * x)\n"
    )
    module = load_module(tmp_path_factory.mktemp("store"), "store_case", text)
    x = rng().normal(size=n)
    compiled = transform(module.f, ("x",), "grad", (("x", 1),), True)
    if not (_unit(first) or _unit(second)):  # (a slice of length 1 broadcasts: not a store)
        assert re.search(r"\bz\w*\[[^\]]*i0[^\]]*\] = ", _primal(compiled.source))
    with _Guards(compiled):
        got = compiled.function(x)
    got = got[1] if isinstance(got, tuple) else got
    np.testing.assert_allclose(got, s2sad.grad(module.f)(x), rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------- the fusion stage alone
# (Differentiated code reaches a store through a snapshot or a copy of the elements it
# overwrites wherever the store's array is read before it; the stage must refuse it alone.)


def _rank_of(node):
    if isinstance(node, ast.Constant):
        return 0
    return 1 if isinstance(node, (ast.Name, ast.Subscript)) else None


def _fused(text: str) -> str:
    stmts = ast.parse(text).body
    reads = [ast.parse("z, m, q").body[0]]  # read after the statements
    names = {n.id for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Name)}
    out = fuse([stmts], _rank_of, reads, names | {"z", "m", "q"})
    return ast.unparse(ast.fix_missing_locations(ast.Module(out[0], [])))


def _run(code: str, x, z):
    scope = {
        "np": np,
        "fusible": lambda *a: all(b.shape == a[0].shape for b in a),
        "float_arrays": lambda *a: True,
        "in_dtype_of": lambda v, a: v,
        "x": x,
        "z": z,
    }
    exec(code, scope)
    return scope["z"]


@pytest.mark.parametrize(
    "text, fused",
    [
        ("t = x[:-1]\nm = t * 2.0\nz[1:] = m\nq = x * 3.0\n", True),
        ("t = z[:-1]\nm = t * 2.0\nz[1:] = m\nq = x * 3.0\n", False),  # reads z itself
        ("w = z[::-1]\nt = w[1:]\nm = t * 2.0\nz[1:] = m\nq = x * 3.0\n", False),  # a view
    ],
)
def test_a_store_joins_a_run_only_where_the_run_reads_nothing_sharing_its_array(text, fused):
    code = _fused(text)
    assert ("z[i0 + 1] = m_i" in code) == fused
    x, z = rng().normal(size=6), rng(1).normal(size=6)
    expected = _run(text, x.copy(), z.copy())
    np.testing.assert_array_equal(_run(code, x.copy(), z.copy()), expected)


def test_a_run_reads_no_array_it_stored_into_after_the_store():
    """`q` reads elements later iterations store: NumPy's reads the new ones."""
    text = "m = x * 2.0\nz[:-1] = m\nw = z[1:]\nq = w * 3.0\n"
    code = _fused(text)
    loop = code[: code.index("else:")]
    assert "z[i0] = m_i" in loop and "q" not in loop
    x, z = rng().normal(size=5), rng(1).normal(size=6)
    np.testing.assert_array_equal(_run(code, x.copy(), z.copy()), _run(text, x.copy(), z.copy()))
