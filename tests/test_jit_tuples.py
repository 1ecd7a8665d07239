"""jit=True on np.linalg's tuple results, and what jit="strict" says when it cannot compile.

The jitted reverse pass carries the cotangent of `w, v = np.linalg.eigh(a)` as two adjoints,
`dw` and `dv`, and the rule's Numba form receives the tuple `(dw, dv)`, None for a part no
cotangent reached (rules/tuple_results.py). tests/test_jit_corpus.py checks functions reading
every part; here the cases where a part is unread (None), in grad and jvp, compiled once each.
"""

from __future__ import annotations

import importlib.util
import warnings

import numpy as np
import pytest

import s2sad
from conftest import rand
from s2sad.cli import emit_text
from s2sad.jit import JitError, JitFallbackWarning

numba = pytest.importorskip("numba")
pytestmark = pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaWarning")


@pytest.fixture(scope="module", autouse=True)
def _cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("S2SAD_CACHE_DIR", str(tmp_path_factory.mktemp("jit-tuples")))
        yield


def eigh_vectors_only(a):
    w, v = np.linalg.eigh(a)
    return np.sum(v[:, 0] ** 2 * np.arange(3.0)) * 0.5


def eigh_values_only(a):
    w, v = np.linalg.eigh(a)
    return np.sum(w**3)


def svd_u_only(a):
    u, s, vt = np.linalg.svd(a, full_matrices=False)
    return np.sum(u**4)


def qr_square(a):
    q, r = np.linalg.qr(a)
    return np.sum(r**2 * np.arange(3.0)) + np.sum(q[:, 0] ** 3)


def slogdet_sign_only(a):
    sign, logdet = np.linalg.slogdet(a)
    return sign * 2.0


def sym(seed):
    m = rand(3, 3, seed=seed)
    return m + m.T + np.diag([0.0, 3.0, 7.0])  # eigenvalues well apart


CASES = [
    (eigh_vectors_only, sym(1)),
    (eigh_values_only, sym(2)),
    (svd_u_only, rand(4, 3, seed=3)),
    (qr_square, rand(3, 3, seed=4) + 3 * np.eye(3)),
    (slogdet_sign_only, rand(3, 3, seed=5) + 3 * np.eye(3)),
]


def central(f, a, eps=1e-6):
    out = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        e = np.zeros_like(a)
        e[i] = eps
        out[i] = (f(a + e) - f(a - e)) / (2 * eps)
    return out


@pytest.mark.parametrize("f,a", CASES, ids=[f.__name__ for f, _ in CASES])
def test_a_part_no_cotangent_reaches_compiles_and_agrees(f, a):
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitFallbackWarning)
        jitted = s2sad.grad(f, jit="strict")(a)
        t = rand(*a.shape, seed=9)
        _, tangent = s2sad.jvp(f, jit="strict")(a, tangent=t)
    plain = s2sad.grad(f)(a)
    assert jitted.shape == a.shape and jitted.dtype == np.float64
    np.testing.assert_allclose(jitted, plain, rtol=1e-10, atol=1e-12)
    if f is not eigh_values_only and f is not eigh_vectors_only:  # eigh reads one triangle
        np.testing.assert_allclose(jitted, central(f, a), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(tangent, np.sum(plain * t), rtol=1e-8, atol=1e-10)


def eigh_in_loop(a):
    total = 0.0
    for i in range(2):
        w, v = np.linalg.eigh(a * (i + 1.0))
        total = total + np.sum(w * v[0] ** 2)
    return total


def slogdet_read_later(a):
    """The pair is read after another statement: carried as one value (Python mode)."""
    pair = np.linalg.slogdet(a)
    b = a * 2.0
    return pair[1] * np.sum(b)


def test_tuple_results_in_a_loop_and_read_later():
    a = sym(6)
    jitted = s2sad.grad(eigh_in_loop, jit="strict")(a)
    plain = s2sad.grad(eigh_in_loop)(a)
    np.testing.assert_allclose(jitted, plain, rtol=1e-10, atol=1e-12)
    lower = np.tril(central(lambda m: eigh_in_loop(np.tril(m) + np.tril(m, -1).T), a))
    np.testing.assert_allclose(plain, lower, rtol=1e-6, atol=1e-7)  # eigh reads the lower half
    b = rand(3, 3, seed=7) + 3 * np.eye(3)
    np.testing.assert_allclose(
        s2sad.grad(slogdet_read_later)(b), central(slogdet_read_later, b), rtol=1e-6, atol=1e-7
    )
    value, pullback = s2sad.vjp(eigh_in_loop)(a)
    np.testing.assert_allclose(pullback(2.0), 2.0 * plain, rtol=1e-12)


def test_jitted_eigenvectors_refuse_repeated_eigenvalues_like_python():
    a = np.eye(3)
    for jit in (False, "strict"):
        with pytest.raises(ValueError, match="eigenvalues repeat"):
            s2sad.grad(eigh_vectors_only, jit=jit)(a)


# ----------------------------------------------------------------------------- grad's output


def count_positive(x):
    return np.sum(x > 0)


def length_twice(x):
    return len(x) * 2


@pytest.mark.parametrize("f", [count_positive, length_twice])
def test_an_integer_output_is_refused_in_every_mode(f):
    """jit=True seeded the integer output and returned zeros; every mode refuses it alike."""
    messages = set()
    for jit in (False, True, "strict"):
        with pytest.raises(s2sad.NonScalarOutputError, match="scalar float output") as info:
            s2sad.grad(f, jit=jit)(np.array([0.5, -1.0, 2.0]))
        messages.add(str(info.value))
    assert len(messages) == 1


# ----------------------------------------------------------------------------- strict's messages


def contracted(a, b):
    return np.sum(np.einsum("ij,jk->ik", a, b) ** 2)


def test_strict_names_a_helper_without_numba_form_and_the_users_line():
    with pytest.raises(JitError) as info:
        s2sad.grad(contracted, jit="strict")(np.ones((3, 2)), np.ones((2, 3)))
    text = str(info.value)
    assert "NameError" not in text and "checked_grad_contracted" not in text
    assert "s2sad.grad(contracted, jit='strict')" in text
    assert "helper einsum_vjp" in text and "has no Numba form" in text
    assert "test_jit_tuples.py line " in text and "np.einsum(" in text


def cumulative(x):
    return np.sum(np.cumsum(x, axis=1))


def test_strict_keeps_numbas_argument_types():
    with pytest.raises(JitError) as info:
        s2sad.grad(cumulative, jit="strict")(np.ones((2, 3)))
    text = str(info.value)
    assert "s2sad.grad(cumulative, jit='strict')" in text
    assert "checked_grad_cumulative" not in text
    assert "no compiled form of the derivative of np.cumsum" in text
    assert "a 2-d float64 array" in text and "`return np.sum(np.cumsum(x, axis=1))`" in text


# ----------------------------------------------------------------------------- .real and .imag


def parts(x, y):
    """On real arrays x.real is x and x.imag is zeros: d/dx = y + 0, d/dy = x + 3 y^2 (y.T)."""
    return np.sum(x.real * y + x.imag * x + y.T.real**3)


def parts_vector(x):
    return x.real * 2.0 + x.imag + x.T


def test_real_and_imag_attributes_in_every_mode():
    x, y = rand(2, 2, seed=11), rand(2, 2, seed=12)
    want = (y, x + 3 * y**2)
    for jit in (False, "strict"):
        got = s2sad.grad(parts, wrt=(0, 1), jit=jit)(x, y)
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.dtype == np.float64
            np.testing.assert_allclose(g, w, rtol=1e-12)
        t = (rand(2, 2, seed=13), rand(2, 2, seed=14))
        _, tangent = s2sad.jvp(parts, wrt=(0, 1), jit=jit)(x, y, tangent=t)
        np.testing.assert_allclose(tangent, np.sum(want[0] * t[0] + want[1] * t[1]), rtol=1e-12)
    np.testing.assert_allclose(s2sad.grad(parts)(x, y), central(lambda a: parts(a, y), x))
    hess = s2sad.hessian(parts, wrt=1)(x, y)  # 6 y on the diagonal
    np.testing.assert_allclose(hess.reshape(4, 4), np.diag(6 * y.ravel()), atol=1e-12)
    v = rand(3, seed=15)
    np.testing.assert_allclose(s2sad.jacobian(parts_vector)(v), 3 * np.eye(3), rtol=1e-12)
    np.testing.assert_allclose(s2sad.grad(lambda_free_scalar)(0.5), 3.0)


def lambda_free_scalar(a):
    return a.real * 3.0 + a.imag


def complex_made(x):
    return np.sum((x * 1j).imag)


def test_real_and_imag_of_complex_values_stay_refused():
    with pytest.raises(s2sad.S2SADError, match="complex"):
        s2sad.grad(complex_made)(np.ones(2))
    with pytest.raises(s2sad.S2SADError, match="complex"):
        s2sad.grad(parts)(np.ones((2, 2)) + 1j, np.ones((2, 2)))


def test_emit_jit_of_a_tuple_result_is_a_standalone_module(tmp_path):
    """`s2sad emit --jit` embeds the Numba forms, whose messages it must define."""
    path = tmp_path / "emitted_eigh.py"
    path.write_text(emit_text(f"{__file__}:eigh_vectors_only", [], "grad", jit=True))
    spec = importlib.util.spec_from_file_location("emitted_eigh", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    a = sym(1)
    np.testing.assert_allclose(
        module.grad_eigh_vectors_only(a),
        s2sad.grad(eigh_vectors_only)(a),
        rtol=1e-10,
        atol=1e-12,
    )


def test_a_fallback_warning_names_the_users_line_not_the_generated_function():
    a, b = np.ones((3, 2)), np.ones((2, 3))
    with pytest.warns(JitFallbackWarning) as record:
        _, pullback = s2sad.vjp(contracted, jit=True)(a, b)
        pullback(1.0)
    texts = [str(w.message) for w in record if issubclass(w.category, JitFallbackWarning)]
    assert texts and all("s2sad.vjp(contracted, jit=True)" in t for t in texts)
    assert all("vjp_contracted" not in t and "np.einsum(" in t for t in texts)


def lstsq_every_part(a, b):
    x, res, rank, sv = np.linalg.lstsq(a, b, rcond=None)
    return np.sum(x**3) + np.sum(res) + np.sum(sv)


def test_a_tuple_result_with_several_parts_read_under_jit_true():
    """lstsq's four parts, three of them read: jit=True (which runs Python here, lstsq's
    cotangent having no Numba form) gives Python mode's numbers; its scatter-add of one part
    into the tuple's cotangent raised a ValueError."""
    rng = np.random.default_rng(0)
    a, b = rng.random((4, 3)), rng.random((4, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        jitted = s2sad.grad(lstsq_every_part, jit=True)(a, b)
    np.testing.assert_allclose(jitted, s2sad.grad(lstsq_every_part)(a, b), rtol=1e-12)
