"""Writes into a fresh array whose overwritten cotangent no adjoint reads (pipeline/fresh_writes.py):
their adjoint reads `dz[index]` as it is, with no copy, no array of its own and no zeroing. Each
case is checked against finite differences and the jitted gradient against the Python one,
cases the analysis must refuse included; the test of which elements two indices share is
checked against NumPy's own indexing over random slices."""

import ast

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import s2sad
from benchmarks.gradbench.evals import ode
from conftest import _fd
from s2sad import ir
from s2sad.pipeline.fresh_writes import _apart, overwritten_zeros, unread_writes

numba = pytest.importorskip("numba")

pytestmark = pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaWarning")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))


def shifted(x):  # the RK4 right-hand side, in a loop
    y = x * 0.5
    for _ in range(3):
        z = np.zeros_like(y)
        z[0] = x[0]
        z[1:] = x[1:] * y[:-1]
        y = y + 0.3 * z
    return np.sum(y * y)


def overlapping(x):  # the second write overwrites an element of the first: its dz is read
    z = np.zeros_like(x)
    z[:3] = np.sin(x[:3])
    z[2:] = x[2:] * 2.0
    return np.sum(z * z)


def read_between(x):  # z is read between its writes
    z = np.zeros_like(x)
    z[:-1] = np.sin(x[:-1])
    s = np.sum(z * x)
    z[-1] = x[0] * 3.0
    return s + np.sum(z * z)


def from_the_back(x):
    z = np.empty_like(x)
    z[-1] = x[0] * x[1]
    z[:-1] = np.cos(x[1:])
    return np.sum(z**3)


def rows(x):  # a matrix written row by row, then by a block of rows
    z = np.zeros((3, x.shape[0]))
    z[0, :] = x * x
    z[1:, :] = np.outer(np.ones(2), np.sin(x))
    return np.sum(z * np.arange(3.0)[:, None])


def invariant_value(x):  # the written value is made before the loop: its cotangent adds up
    v = np.sin(x[1:])
    t = 0.0
    for i in range(3):
        z = np.zeros_like(x)
        z[1:] = v
        z[0] = x[0] * i
        t = t + np.sum(z * x)
    return t


def returned_and_read(x):  # z read after its writes, twice
    z = np.zeros_like(x)
    z[1:] = x[:-1] * x[1:]
    w = z
    return np.sum(w * z) + np.sum(z)


def filled(x, a):  # np.full's value is differentiable: its adjoint reads dz
    z = np.full(x.shape, a)
    z[1:] = x[1:]
    return np.sum(z * x)


CASES = [
    (shifted, (np.linspace(0.2, 0.9, 6),)),
    (overlapping, (np.linspace(0.2, 0.9, 6),)),
    (read_between, (np.linspace(0.2, 0.9, 5),)),
    (from_the_back, (np.linspace(0.2, 0.9, 5),)),
    (rows, (np.linspace(0.2, 0.9, 4),)),
    (invariant_value, (np.linspace(0.2, 0.9, 5),)),
    (returned_and_read, (np.linspace(0.2, 0.9, 5),)),
    (filled, (np.linspace(0.2, 0.9, 5), 0.7)),
]


@pytest.mark.parametrize("f, args", CASES, ids=[f.__name__ for f, _ in CASES])
def test_gradients_match_finite_differences_and_python(f, args):
    python = s2sad.grad(f)(*args)
    jitted = s2sad.grad(f, jit="strict")(*args)
    np.testing.assert_allclose(python, _fd(f, args, 0, 1e-6), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(jitted, python, rtol=1e-12, atol=1e-15)
    assert jitted.shape == args[0].shape and jitted.dtype == args[0].dtype


def _adjoint(f) -> str:
    return s2sad.source(s2sad.grad(f)).split("adjoint sweep")[1]


def test_the_rk4_right_hand_side_reads_its_cotangent_as_it_is():
    adjoint = _adjoint(shifted)
    assert ".copy()" not in adjoint and "as_accumulator(dz" not in adjoint
    assert "dz[" not in adjoint.replace("dz[1:]", "").replace("dz[0]", "")  # no zeroing
    rk4 = _adjoint(ode.ode_last)
    assert ".copy()" not in rk4 and "as_accumulator(dz" not in rk4


@pytest.mark.parametrize("f", [overlapping, read_between])
def test_a_cotangent_read_later_is_still_zeroed(f):
    assert "as_accumulator(dz" in _adjoint(f)


def _writes(source: str) -> list[str]:
    """The writes `unread_writes` takes in `source`'s body, as text."""
    tree = ast.parse(source).body[0]
    for node in ast.walk(tree):  # `np.zeros` resolved, as the normalized code has it
        func = getattr(node, "func", None)
        if isinstance(func, ast.Attribute) and getattr(func.value, "id", None) == "np":
            ir.set_callee(func, getattr(np, func.attr))
    found = unread_writes(tree.body)
    return [ast.unparse(n) for n in ast.walk(tree) if id(n) in found]


def test_unread_writes():
    assert _writes("""
def f(x, y):
    for _ in range(3):
        z = np.zeros_like(y)
        z[0] = x[0]
        t = x * 2
        z[1:] = t[1:]
        k = z
""") == ["z[0] = x[0]", "z[1:] = t[1:]"]
    refused = {
        "bound twice": "z = np.zeros(3)\n    z = np.zeros(4)\n    z[0] = x",
        "read first": "z = np.zeros(3)\n    s = z * 2\n    z[0] = x",
        "value reads z": "z = np.zeros(3)\n    z[1:] = z[:-1]",
        "index reads z": "z = np.zeros(3)\n    z[int(z[0])] = x",
        "a copy of x": "z = x.copy()\n    z[0] = x[1]",
        "not numpy's": "z = zeros(3)\n    z[0] = x",
        "read before": "s = z\n    z = np.zeros(3)\n    z[0] = x",
        "augmented": "z = np.zeros(3)\n    z[0] += x",
        "in a branch": "z = np.zeros(3)\n    if x > 0:\n        z[0] = x",
    }
    for why, body in refused.items():
        assert _writes(f"def f(x):\n    {body}\n") == [], why
    # a second write overlapping the first is not taken (the first is)
    assert _writes("def f(x):\n    z = np.empty(4)\n    z[:2] = x\n    z[1:] = x\n") == [
        "z[:2] = x"
    ]


def _bound(draw_int):
    return st.one_of(st.none(), draw_int)


_ITEM = st.one_of(
    st.integers(-5, 4),
    st.tuples(
        _bound(st.integers(-6, 6)), _bound(st.integers(-6, 6)), st.sampled_from([None, 1, 2])
    ),
)


def _spelled(item) -> str:
    if isinstance(item, int):
        return str(item)
    return ":".join("" if p is None else str(p) for p in item)


@settings(max_examples=300, deadline=None)
@given(st.lists(_ITEM, min_size=1, max_size=2), st.lists(_ITEM, min_size=1, max_size=2))
def test_apart_agrees_with_numpy(a, b):
    text_a, text_b = ", ".join(map(_spelled, a)), ", ".join(map(_spelled, b))
    items = [ast.parse(f"z[{t},]", mode="eval").body.slice.elts for t in (text_a, text_b)]
    if not _apart(*items):
        return
    for n in range(1, 8):
        for m in range(1, 4):
            masks = []
            for text in (text_a, text_b):
                mask = np.zeros((n, m), dtype=bool)
                try:
                    exec(f"mask[{text}] = True", {"mask": mask})
                except IndexError:
                    break
                masks.append(mask)
            if len(masks) == 2:
                assert not (masks[0] & masks[1]).any(), (text_a, text_b, n, m)


# ------------------------------------- zeros overwritten before they are read (jitted code)


def _emptied(body: str) -> bool:
    """Whether `overwritten_zeros` takes the first statement of `body` (emitted code)."""
    stmts = ast.parse(body).body
    return overwritten_zeros(stmts) == {id(stmts[0])}


def test_overwritten_zeros():
    covered = {
        "the rk4 right-hand side": "z = np.zeros_like(y)\nz[0] = x[0]\nt = x[1:] * y[:-1]\n"
        "z[1:] = t",
        "from the back": "z = np.zeros(n)\nz[:-1] = a\nz[-1] = b",
        "in three, out of order": "z = np.zeros(n)\nz[2:] = a\nz[:1] = b\nz[1:2] = c",
        "rows": "z = np.zeros((n, m))\nz[0] = a\nz[1:, :] = b",
    }
    for why, body in covered.items():
        assert _emptied(body), why
    refused = {
        "a gap": "z = np.zeros(n)\nz[0] = a\nz[2:] = b",
        "one part": "z = np.zeros(n)\nz[1:] = a",
        "read between": "z = np.zeros(n)\nz[0] = a\ns = z * 2\nz[1:] = b",
        "value reads z": "z = np.zeros(n)\nz[0] = a\nz[1:] = z[:-1]",
        "augmented": "z = np.zeros(n)\nz[0] = a\nz[1:] += b",
        "a step of 2": "z = np.zeros(n)\nz[::2] = a\nz[1::2] = b",
        "a column left": "z = np.zeros((n, m))\nz[:, 1:] = a\nz[0] = b",
        "an index unknown": "z = np.zeros(n)\nz[:k] = a\nz[k:] = b",
        "a branch between": "z = np.zeros(n)\nz[0] = a\nif c:\n    b = 1\nz[1:] = b",
        "a loop between": "z = np.zeros(n)\nz[0] = a\nfor i in r:\n    b = i\nz[1:] = b",
        "ones": "z = np.ones(n)\nz[0] = a\nz[1:] = b",
    }
    for why, body in refused.items():
        assert not _emptied(body), why


@settings(max_examples=300, deadline=None)
@given(st.lists(_ITEM, min_size=1, max_size=4))
def test_overwritten_zeros_agrees_with_numpy(items):
    """Where the writes are taken as covering the array, NumPy's writes leave no element
    unwritten, at every length."""
    texts = [_spelled(i) for i in items]
    body = "z = np.zeros(n)\n" + "".join(f"z[{t}] = 1.0\n" for t in texts)
    if not _emptied(body):
        return
    for n in range(0, 9):
        z = np.full(n, np.nan)
        try:
            for t in texts:
                exec(f"z[{t}] = 1.0", {"z": z})
        except IndexError:
            continue  # (an integer out of range raises in both)
        assert not np.isnan(z).any(), (texts, n)


def test_the_rk4_steps_compiled_make_their_right_hand_side_empty():
    jitted = s2sad.grad(shifted, jit="strict")
    x = np.linspace(0.2, 0.9, 6)
    np.testing.assert_allclose(jitted(x), s2sad.grad(shifted)(x), rtol=1e-12, atol=1e-15)
    primal = s2sad.source(jitted).split("# adjoint sweep")[0]
    code = "\n".join(line for line in primal.splitlines() if not line.strip().startswith("#"))
    assert "z = np.empty_like(y)" in code and "np.zeros_like" not in code
