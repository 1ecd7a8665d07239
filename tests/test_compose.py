"""Transforms compose (s2sad/compose.py): grad(grad(f)), jacobian/jvp/vjp of grad(f), and every
transform of a function calling a gradient s2sad made, against exact second derivatives and
central differences."""

import functools
import re
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import s2sad
from s2sad import cli
from s2sad.rules import registry
from conftest import check_grad, check_jvp, check_vjp

X = np.array([0.3, 0.5, -0.4])
Y = np.array([1.2, -0.7, 0.9])


def cubic(x):
    return np.sin(x) * x**3


def d2_cubic(x):
    return -np.sin(x) * x**3 + 6 * np.cos(x) * x**2 + 6 * np.sin(x) * x


def quartic(x):
    return x**4 / 12.0


def coupled(x):
    return np.sum(np.sin(x) * x[0]) + np.sum(x**3) / 3.0


def two(x, y):
    return np.sum(np.sin(x) * y**2 + x * y)


d_two = s2sad.grad(two)  # wrt x
d_two_y = s2sad.grad(two, wrt=1)
vg_two = s2sad.value_and_grad(two)


def calls_grad(x, y):
    return np.sum(d_two(x, y) ** 2)


def calls_grad_y(x, y):
    return np.sum(d_two_y(x, y) * x)


def calls_value_and_grad(x, y):
    value, gx = vg_two(x, y)
    return value * 2.0 + np.sum(gx**2)


def value_part(x, y):
    value, gx = vg_two(x, y)
    return value


def grad_parts(x, y):
    value, g = vg_both(x, y)
    gx, gy = g
    return np.sum(gy * gx) + value


vg_both = s2sad.value_and_grad(two, wrt=(0, 1))


def maps_grad(x, y):
    return d_two(x, y) * y


def central(f, x, h=1e-6):
    """Central differences of f (array -> array) at x: shaped f(x).shape + x.shape."""
    x = np.asarray(x, dtype=float)
    cols = []
    for k in range(x.size):
        e = np.zeros(x.size)
        e[k] = h
        e = e.reshape(x.shape)
        cols.append((np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * h))
    return np.moveaxis(np.array(cols), 0, -1).reshape(np.shape(f(x)) + x.shape)


def test_grad_of_grad_is_the_second_derivative():
    d2 = s2sad.grad(s2sad.grad(cubic))
    for x in (0.7, -1.3, 2.0):
        assert d2(x) == pytest.approx(d2_cubic(x), rel=1e-12)
    assert isinstance(d2(0.7), float)
    assert s2sad.grad(s2sad.grad(quartic))(1.5) == pytest.approx(1.5**2)
    x32 = np.float32(0.7)
    assert type(d2(x32)) is np.float32 and d2(x32) == pytest.approx(d2_cubic(0.7), rel=1e-5)


def test_grad_of_value_and_grad_and_the_source():
    with pytest.raises(s2sad.S2SADError, match="returns a pair"):
        s2sad.grad(s2sad.value_and_grad(cubic))
    out, pullback = s2sad.vjp(s2sad.value_and_grad(cubic))(0.7)
    assert out == pytest.approx((cubic(0.7), s2sad.grad(cubic)(0.7)))
    # d/dx (2 f(x) + 3 f'(x))
    assert pullback((2.0, 3.0)) == pytest.approx(2 * s2sad.grad(cubic)(0.7) + 3 * d2_cubic(0.7))
    d2 = s2sad.grad(s2sad.grad(cubic))
    d2(0.5)
    text = s2sad.source(d2)
    again = s2sad.grad(s2sad.grad(cubic))  # one function composing equal gradients
    assert again.func is d2.func and s2sad.source(again) == text
    assert "def grad_grad_cubic(x):" in text
    assert "grad_cubic = s2sad_grad_cubic(x)" in text
    assert re.search(r"dx = grad_cubic_vjp\d*\(dgrad_cubic, grad_cubic, x\)", text)


def test_jacobian_of_grad_is_the_hessian():
    exact = s2sad.hessian(coupled)(X)
    for mode in ("forward", "reverse", None):
        h = s2sad.jacobian(s2sad.grad(coupled), mode=mode)(X)
        np.testing.assert_allclose(h, exact, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(exact, central(s2sad.grad(coupled), X), rtol=1e-6, atol=1e-8)
    h32 = s2sad.jacobian(s2sad.grad(coupled))(X.astype(np.float32))
    assert h32.dtype == np.float32


def test_jvp_and_vjp_of_grad_are_hessian_vector_products():
    h = s2sad.hessian(coupled)(X)
    v = np.array([1.0, -2.0, 0.5])
    g, hv = s2sad.jvp(s2sad.grad(coupled))(X, tangent=v)
    np.testing.assert_allclose(g, s2sad.grad(coupled)(X))
    np.testing.assert_allclose(hv, h @ v, rtol=1e-12)
    out, pullback = s2sad.vjp(s2sad.grad(coupled))(X)
    np.testing.assert_allclose(pullback(v), v @ h, rtol=1e-12)


def test_grad_of_a_function_calling_a_gradient():
    # the outer wrt (x, y) differs from the inner's (x): mixed partials
    check_grad(calls_grad, (X, Y), wrt=(0, 1))
    check_grad(calls_grad_y, (X, Y), wrt=(0, 1))
    check_grad(calls_grad, (X, Y), wrt=1)
    check_grad(calls_value_and_grad, (X, Y), wrt=(0, 1))
    check_grad(value_part, (X, Y), wrt=(0, 1))  # no cotangent reaches the gradient part
    check_grad(grad_parts, (X, Y), wrt=(0, 1))
    text = s2sad.source(s2sad.grad(calls_grad, wrt=(0, 1)))
    assert "g_d_two = d_two(x, y)" in text or "d_two(x, y)" in text
    assert "grad_two_vjp(" in text


def test_vjp_jvp_jacobian_of_a_function_calling_a_gradient():
    check_vjp(maps_grad, (X, Y), wrt=(0, 1))
    check_jvp(maps_grad, (X, Y), wrt=(0, 1))
    expected = central(lambda y: maps_grad(X, y), Y)
    for mode in ("forward", "reverse"):
        jac = s2sad.jacobian(maps_grad, wrt=1, mode=mode)(X, Y)
        np.testing.assert_allclose(jac, expected, rtol=1e-6, atol=1e-8)


def test_float32_kept():
    x, y = X.astype(np.float32), Y.astype(np.float32)
    gx, gy = s2sad.grad(calls_grad, wrt=(0, 1))(x, y)
    assert gx.dtype == np.float32 and gy.dtype == np.float32
    exact = s2sad.grad(calls_grad, wrt=(0, 1))(X, Y)
    np.testing.assert_allclose(gx, exact[0], rtol=1e-4)


def test_jit_falls_back_and_strict_refuses():
    expected = s2sad.grad(calls_grad, wrt=(0, 1))(X, Y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = s2sad.grad(calls_grad, wrt=(0, 1), jit=True)(X, Y)
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-12)
    np.testing.assert_allclose(got[1], expected[1], rtol=1e-12)
    with pytest.raises(s2sad.S2SADError, match="d_two"):
        s2sad.grad(calls_grad, wrt=(0, 1), jit="strict")(X, Y)


def test_refusals():
    with pytest.raises(s2sad.S2SADError, match="not with s2sad.jvp"):
        s2sad.grad(s2sad.jvp(cubic))
    with pytest.raises(s2sad.S2SADError, match="has_aux"):
        s2sad.grad(s2sad.grad(lambda x: (x**2, 1.0), has_aux=True))
    with pytest.raises(s2sad.S2SADError, match="jacobian"):
        s2sad.grad(s2sad.jacobian(cubic))
    with pytest.raises(s2sad.S2SADError, match="target='cuda'"):
        s2sad.grad(s2sad.grad(cubic), target="cuda")


class Model:
    def __init__(self):
        self.W = np.array([0.5, -1.0, 2.0])

    def loss(self, x, *, scale=1.5):
        return scale * np.sum(np.sin(self.W * x) ** 2)


def ridge(w, A, lam):
    return np.sum((A @ w) ** 2) + lam * np.sum(w**2)


def test_methods_partials_keywords_and_a_parameter_named_t():
    m = Model()
    for kw in ({}, {"scale": 2.0}):
        h = s2sad.jacobian(s2sad.grad(m.loss))(X, **kw)
        np.testing.assert_allclose(h, s2sad.hessian(m.loss)(X, **kw), rtol=1e-12)
    part = functools.partial(ridge, A=np.diag([1.0, 2.0, 3.0]), lam=0.1)
    np.testing.assert_allclose(
        s2sad.jacobian(s2sad.grad(part))(X), np.diag([2.2, 8.2, 18.2]), rtol=1e-12
    )
    cube = s2sad.grad(lambda t: np.sum(t**3))  # `t` is also the tangent rules' placeholder
    for mode in ("forward", "reverse"):
        np.testing.assert_allclose(s2sad.jacobian(cube, mode=mode)(X), np.diag(6 * X))


def test_integer_arguments_and_rebinding():
    global d_power
    d_power = s2sad.grad(power)
    np.testing.assert_allclose(s2sad.grad(calls_power)(X), 6 * X)
    version = registry.VERSION[0]
    d_power = s2sad.grad(power2)  # another gradient under the same name: transformed again
    np.testing.assert_allclose(s2sad.grad(calls_power)(X), 2 * np.ones(3))
    assert registry.VERSION[0] == version  # its rule left the other transforms' caches alone


def power(x, n):
    return np.sum(x**n)


def power2(x, n):
    return np.sum(x**2) * n / 3


def calls_power(x):
    return np.sum(d_power(x, 3))


d_power = None


def test_second_order_only():
    with pytest.raises(s2sad.S2SADError, match="no third derivatives through s2sad.grad"):
        s2sad.hessian(calls_grad)(X, Y)
    with pytest.raises(s2sad.S2SADError, match="no third derivatives through s2sad.grad"):
        s2sad.grad(s2sad.grad(s2sad.grad(quartic)))(1.0)
    with pytest.raises(s2sad.S2SADError, match="no forward-mode .* s2sad.value_and_grad"):
        s2sad.jvp(value_part)(X, Y, tangent=X)


def loss(p, x):
    return np.sum(np.tanh(p["W"] @ x + p["b"]) ** 2)


d_loss = s2sad.grad(loss)


def calls_with_a_tree(p, x):
    return np.sum(d_loss(p, x)["b"])


def test_tree_passed_to_a_gradient_is_refused():
    p = {"W": np.ones((2, 3)), "b": np.zeros(2)}
    with pytest.raises(s2sad.S2SADError, match="parameter tree passed to d_loss, a transform"):
        s2sad.grad(calls_with_a_tree)(p, X)


d_both = s2sad.grad(two, wrt=(0, 1))


def product_of_parts(x, y):
    gx, gy = d_both(x, y)
    return gx * gy


def in_a_loop(x):
    s = 0.0
    for k in range(3):
        s = s + np.sum(d_both(x * k, x)[1] ** 2)
    return s


def test_an_inner_gradient_with_a_tuple_wrt_and_calls_in_a_loop():
    expected = central(lambda x: product_of_parts(x, Y), X)
    for mode in ("forward", "reverse"):
        jac = s2sad.jacobian(product_of_parts, mode=mode)(X, Y)
        np.testing.assert_allclose(jac, expected, rtol=1e-6, atol=1e-8)
    check_jvp(product_of_parts, (X, Y), wrt=(0, 1))
    check_grad(in_a_loop, (X,))


def scaled(x, s):
    return np.sum(np.sin(x) * s**2)


d_scaled = s2sad.grad(scaled, wrt=(0, 1))


def parts_of_two_shapes(x, s):
    gx, gs = d_scaled(x, s)
    return gx * gs


def test_gradients_of_two_shapes():
    expected = central(lambda x: parts_of_two_shapes(x, 0.7), X)
    for options in ({"mode": "forward"}, {"mode": "reverse", "batched": False}):
        got = s2sad.jacobian(parts_of_two_shapes, **options)(X, 0.7)
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-8)
    check_jvp(parts_of_two_shapes, (X, 0.7), wrt=(0, 1))
    check_vjp(parts_of_two_shapes, (X, 0.7), wrt=(0, 1))
    with pytest.raises(s2sad.S2SADError, match="batched reverse sweep"):
        s2sad.jacobian(parts_of_two_shapes, mode="reverse")(X, 0.7)


def running_product(x):
    return np.sum(np.cumprod(x))


def correlations(x):
    return np.sum(np.corrcoef(np.stack([x, x**2, np.sin(x)])))


def test_an_inner_gradient_forward_mode_cannot_read_is_refused():
    with pytest.raises(s2sad.S2SADError, match="by forward mode over its gradient code"):
        s2sad.jvp(s2sad.grad(correlations))(X, tangent=Y)


def test_an_inner_gradient_through_cumprod():
    _, hv = s2sad.jvp(s2sad.grad(running_product))(X, tangent=Y)
    np.testing.assert_allclose(hv, s2sad.hessian(running_product)(X) @ Y, rtol=1e-10)
    check_jvp(s2sad.grad(running_product), (X,))


def test_grad_of_grad_jitted_falls_back():
    """The warning says plainly why (it was Numba's "Untyped global name 's2sad_grad_cubic'")
    and what to do."""
    said = r"calls <s2sad.grad of cubic wrt x> \(the name 's2sad_grad_cubic'\), a transform "
    said += "s2sad made, which compiled code cannot call.*pass jit=False"
    with pytest.warns(UserWarning, match=said):
        got = s2sad.grad(s2sad.grad(cubic), jit=True)(0.7)
    assert got == pytest.approx(d2_cubic(0.7), rel=1e-12)


STANDALONE = """
import numpy as np
import s2sad
from s2sad import cli


@s2sad.grad
def h(x):
    return np.sum(np.sin(x) ** 2)


def k(x, c):
    return np.sum(x) * np.sum(h(c))
"""


def test_a_standalone_module_never_holds_a_gradient_s2sad_made(tmp_path, capsys):
    """`h` is a gradient: the module held h's primal under its name (wrong values)."""
    path = tmp_path / "calls_h.py"
    path.write_text(STANDALONE)
    assert cli.main(["emit", f"{path}:k", "-o", str(tmp_path / "out.py")]) != 0
    assert "calls 'h' (<s2sad.grad of h wrt x>), which s2sad made" in capsys.readouterr().err
    assert not (tmp_path / "out.py").exists()


def broadcast_energy(x, w):
    return np.sum(np.tanh(x * w) ** 2) + np.sum(x) ** 2


d_energy = s2sad.grad(broadcast_energy, wrt=(0, 1))


def energy_parts(x, w):
    gx, gw = d_energy(x, w)
    return np.sum(gx * np.cos(x)) + np.sum(gw**2)


@settings(max_examples=12, deadline=None)
@given(
    st.integers(1, 2)
    .flatmap(lambda rank: hnp.array_shapes(min_dims=rank, max_dims=rank, max_side=3))
    .flatmap(
        lambda shape: st.tuples(
            hnp.arrays(np.float64, shape, elements=st.floats(-1.5, 1.5)),
            hnp.arrays(np.float64, shape[-1:], elements=st.floats(-1.5, 1.5)),
        )
    )
)
def test_random_shapes_against_hessian_and_differences(arrays):
    x, w = arrays  # w broadcasts along x's last axis
    np.testing.assert_allclose(
        s2sad.jacobian(s2sad.grad(broadcast_energy))(x, w),
        s2sad.hessian(broadcast_energy)(x, w),
        rtol=1e-10,
        atol=1e-12,
    )
    gx, gw = s2sad.grad(energy_parts, wrt=(0, 1))(x, w)
    assert gx.shape == x.shape and gw.shape == w.shape
    np.testing.assert_allclose(gx, central(lambda x: energy_parts(x, w), x), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(gw, central(lambda w: energy_parts(x, w), w), rtol=1e-6, atol=1e-6)


def readme_f(x, y):
    return np.sum(np.sin(x) * y**2)


readme_df = s2sad.grad(readme_f)


def readme_g(x, y):
    return np.sum(readme_df(x, y) ** 2)


def test_readme_transforms_compose():
    """README, "Transforms compose": g(x, y) = sum((cos(x) y^2)^2) = sum(cos(x)^2 y^4)."""
    x, y = np.array([0.1, 0.4]), np.array([1.0, 2.0])
    dx, dy = s2sad.grad(readme_g, wrt=(0, 1))(x, y)
    np.testing.assert_allclose(dx, -np.sin(2 * x) * y**4, rtol=1e-12)
    np.testing.assert_allclose(dy, 4 * np.cos(x) ** 2 * y**3, rtol=1e-12)
    shown = s2sad.source(s2sad.grad(readme_g, wrt=(0, 1)), x, y)
    assert "dx, dy = grad_readme_f_vjp(" in shown


def test_a_tuple_of_gradients_in_forward_mode_and_jvp():
    """grad over two arguments returns a pair: the forward Jacobian, the reverse one and jvp
    agree with the Hessian's blocks (they gave an internal error, or a TypeError in jvp)."""
    x, y = X, Y * 0.5
    H = s2sad.jacobian(s2sad.grad(two, wrt=(0, 1)), wrt=(0, 1), mode="reverse")(x, y)
    Hf = s2sad.jacobian(s2sad.grad(two, wrt=(0, 1)), wrt=(0, 1), mode="forward")(x, y)
    for i in range(2):
        for j in range(2):
            np.testing.assert_allclose(Hf[i][j], H[i][j], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(H[0][0], s2sad.hessian(two, wrt=0)(x, y), rtol=1e-12)
    np.testing.assert_allclose(H[1][1], s2sad.hessian(two, wrt=1)(x, y), rtol=1e-12)
    v, w = np.array([1.0, 0.5, -1.0]), np.array([0.2, -0.3, 0.7])
    _, (tx, ty) = s2sad.jvp(s2sad.grad(two, wrt=(0, 1)), wrt=(0, 1))(x, y, tangent=(v, w))
    np.testing.assert_allclose(tx, H[0][0] @ v + H[0][1] @ w, rtol=1e-12)
    np.testing.assert_allclose(ty, H[1][0] @ v + H[1][1] @ w, rtol=1e-12)


def test_jacobian_of_value_and_grad_and_a_transform_without_its_function_are_refused():
    with pytest.raises(s2sad.S2SADError, match="value, gradient"):
        s2sad.jacobian(s2sad.value_and_grad(two))(X, Y)
    with pytest.raises(s2sad.S2SADError, match="waiting for its function"):
        s2sad.grad(s2sad.grad(None))(0.3)
    with pytest.raises(s2sad.S2SADError, match="not int"):
        s2sad.grad(3)
