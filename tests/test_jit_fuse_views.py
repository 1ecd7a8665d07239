"""Pieces of a cotangent as views in fused code (s2sad/pipeline/fusion/views.py), and columns
added into inside runs over an axis of length 1 (row_adds.py): the adjoint's
`concatenate_vjp(g, [a, b, c], k, axis=j)` is written `g[:, lo:hi]`, the cotangent of
`x[:, None]` is `g[:, 0]` where nothing written into may share its memory, and
`add_at(du, (slice(None), slice(2, 3)), v)` of a column joins the run computing `v`. The fused
code must give Python mode's numbers (and finite differences') for any axis and shapes, repeated
and negative or strided column reads included."""

from __future__ import annotations

import ast
import inspect
import re
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_jit_fuse import fd_grad, fused_ran, rng
from test_jit_fuse_slices import in_python

import s2sad
from benchmarks.workloads import ba
from s2sad.pipeline.fusion import fuse
from s2sad.pipeline.fusion.shapes import unit_axes
from s2sad.pipeline.fusion.views import viewed
from s2sad.transform_cache import transform


def cross(r, P):
    """BA's cross product: columns of two matrices, combined and concatenated along axis 1."""
    r0, r1, r2 = r[:, 0:1], r[:, 1:2], r[:, 2:3]
    P0, P1, P2 = P[:, 0:1], P[:, 1:2], P[:, 2:3]
    z = np.concatenate([r1 * P2 - r2 * P1, r2 * P0 - r0 * P2, r0 * P1 - r1 * P0], axis=1)
    return np.sum(z * z * P)


def rotated(r, P):
    """BA's rotation: the columns of `u` read, its gradient made before they are added into."""
    theta = np.sqrt(np.sum(r * r, axis=1))
    u = r / theta[:, None]
    u0, u1, u2 = u[:, 0:1], u[:, 1:2], u[:, 2:3]
    P0, P1, P2 = P[:, 0:1], P[:, 1:2], P[:, 2:3]
    z = np.concatenate([u1 * P2 - u2 * P1, u2 * P0 - u0 * P2, u0 * P1 - u1 * P0], axis=1)
    return np.sum(z * z * u)


def rows_joined(x, y):
    """Along axis 0, pieces of lengths known only at run time."""
    z = np.concatenate([np.sin(x), x * y, y], axis=0)
    return np.sum(z * z)


def last_axis(x, y):
    z = np.concatenate([x * y, np.cos(y)], axis=-1)  # rank 3, axis -1
    return np.sum(z * z * x[:, :, :1])


def new_axis(x, a):
    """`v[:, None]`: its cotangent is a view of the product's, `g[:, 0]`."""
    s = np.sin(x)[:, None]
    return np.sum(s * a + a * a * np.cos(x)[:, None])


def new_axis_twice(x, a):
    """`x[:, None]` and `x[1:, None]`: the second adds into the first's cotangent, which must
    then stay an array of its own."""
    return np.sum(x[:, None] * a) + np.sum(x[1:, None] * a[1:] * a[1:])


def columns(x, w):
    """Column reads: repeated, from the end, strided; their cotangents added into `dx`."""
    a = x[:, 1:2]
    b = x[:, 1:2]
    c = x[:, -1:]
    d = x[:, ::2]
    return np.sum(a * b * w + c * a) + np.sum(d * d * c)


CASES = {
    "cross": (cross, lambda: [rng().normal(size=(6, 3)), rng(1).normal(size=(6, 3))], (0, 1)),
    "rotated": (rotated, lambda: [rng().normal(size=(6, 3)), rng(1).normal(size=(6, 3))], (0, 1)),
    "rows_joined": (
        rows_joined,
        lambda: [rng().normal(size=(3, 2)), rng(1).normal(size=(3, 2))],
        (0, 1),
    ),
    "last_axis": (
        last_axis,
        lambda: [rng().normal(size=(2, 3, 2)), rng(1).normal(size=(2, 3, 2))],
        (0, 1),
    ),
    "new_axis": (new_axis, lambda: [rng().normal(size=5), rng(1).normal(size=(5, 3))], (0, 1)),
    "new_axis_twice": (
        new_axis_twice,
        lambda: [rng().normal(size=5), rng(1).normal(size=(5, 3))],
        (0, 1),
    ),
    "columns": (columns, lambda: [rng().normal(size=(6, 5)), rng(1).normal(size=(6, 1))], (0, 1)),
}
_JITTED: dict = {}
BA_RANKS = (("cams", 2), ("X", 2), ("w", 1), ("feats", 2))


def jitted_case(name):
    if name not in _JITTED:
        f, _, wrt = CASES[name]
        _JITTED[name] = s2sad.grad(f, wrt=wrt, jit="strict")
    return _JITTED[name]


@pytest.mark.parametrize("name", sorted(CASES))
def test_jitted_gives_python_modes_numbers_and_finite_differences(name):
    f, make, wrt = CASES[name]
    args = make()
    jitted = jitted_case(name)
    got = jitted(*args)
    assert fused_ran(jitted)
    expected = s2sad.grad(f, wrt=wrt)(*args)
    for k, g, e in zip(wrt, got, expected):
        assert g.shape == args[k].shape and g.dtype == args[k].dtype
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(g, fd_grad(f, args, k), rtol=1e-6, atol=1e-6)


def test_float32_pieces_keep_float32():
    f, make, wrt = CASES["cross"]
    args = [a.astype(np.float32) for a in make()]
    got = jitted_case("cross")(*args)
    expected = s2sad.grad(f, wrt=wrt)(*args)
    for a, g, e in zip(args, got, expected):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4)


def _adjoint(name: str) -> str:
    jitted = jitted_case(name)
    jitted(*CASES[name][1]())
    return s2sad.source(jitted).split("# adjoint sweep:")[1]


def _fused_parts(source: str) -> str:
    """The statements of `source` outside the unfused branches (each run's `else:`)."""
    kept, skipping = [], None
    for line in source.splitlines():
        indent = len(line) - len(line.lstrip())
        if skipping is not None and line.strip() and indent <= skipping:
            skipping = None
        if skipping is None and line.strip() == "else:":
            skipping = indent
            continue
        if skipping is None:
            kept.append(line)
    return "\n".join(kept)


def test_bundle_adjustments_pieces_are_views_and_its_columns_added_in_the_loops():
    compiled = transform(ba.ba_residuals, ("cams", "X", "w"), "vjp", BA_RANKS, True)
    adjoint = _fused_parts(compiled.source.split("# adjoint sweep:")[1].split("\ndef ")[0])
    assert "concatenate_vjp" not in adjoint  # the fused code's; its fallback keeps the calls
    # a column (bounded by the pieces' shapes, slices of `r`), read as a number in the loop
    assert "dr_x_P_sub = dr_x_P[:, : r_x_P_sub.shape[1]]" in adjoint
    assert "dr_x_P_sub3[i0, 0]" in adjoint
    assert "dtheta = du_item[:, 0]" in adjoint  # the cotangent of `theta[:, None]`
    for column in range(3):  # `u[:, k:k + 1]`: added into `du` where the run computes them
        assert f"du[slice(None, None, None), slice({column}, {column + 1}, None)]" in adjoint
    assert len(re.findall(r"du_view\d* ?\[i0, 0\] \+= du\d_i", adjoint)) == 3
    assert adjoint.count("add_at(") <= 5
    assert "getitem_vjp(du_item" not in adjoint


def test_a_column_added_into_a_gradient_made_before_gives_python_modes_numbers():
    adjoint = _adjoint("rotated")
    assert "dz_sub = dz[:, : z_sub.shape[1]]" in adjoint and "dz_sub3[i0, 0]" in adjoint
    assert "du_view" in adjoint or "add_at(du" in adjoint


def test_a_piece_of_unknown_length_is_bounded_by_its_shape():
    adjoint = _adjoint("rows_joined")
    assert "dz_sin = dz[: z_sin.shape[0]]" in adjoint
    assert "dz_mul = dz[z_sin.shape[0] : z_sin.shape[0] + z_mul.shape[0]]" in adjoint


def test_a_new_axis_cotangent_is_a_view_unless_added_into():
    assert "getitem_vjp" not in _adjoint("new_axis")
    assert "ds_sin = ds[:, 0]" in _adjoint("new_axis")
    assert "getitem_vjp(" in _adjoint("new_axis_twice")  # `add_at` writes into it


def _rewritten(source: str, ranks: dict, reads=()) -> str:
    stmts = ast.parse(textwrap.dedent(source)).body

    def rank_of(node):
        return ranks.get(node.id) if isinstance(node, ast.Name) else None

    [out] = viewed([stmts], rank_of, [ast.Name(r, ast.Load()) for r in reads])
    return ast.unparse(ast.fix_missing_locations(ast.Module(out, [])))


def test_a_new_axis_cotangent_written_into_or_returned_stays_a_new_array():
    text = "dx = getitem_vjp(g, x, (slice(None, None, None), None))\n"
    ranks = {"g": 2, "x": 1, "dx": 1, "h": 1}
    assert _rewritten(text, ranks) == "dx = g[:, 0]"
    written = text + "add_at(dx, slice(1, None, None), h)\n"
    assert "getitem_vjp" in _rewritten(written, ranks)
    seed_written = text + "g[0, 0] = 1.0\n"  # what it would view is written into
    assert "getitem_vjp" in _rewritten(seed_written, ranks)
    assert "getitem_vjp" in _rewritten(text, ranks, reads=["dx"])  # an output: its own array
    other = "dx = getitem_vjp(g, x, (slice(1, None, None), None))\n"  # not whole slices
    assert "getitem_vjp" in _rewritten(other, ranks)


def test_a_piece_of_a_flattened_concatenation_or_a_list_stays_a_call():
    ranks = {"g": 1, "a": 2, "b": 2, "parts": None}
    flat = "da = concatenate_vjp(g, [a, b], 0, axis=None)\n"
    assert _rewritten(flat, ranks).startswith("da = concatenate_vjp(")
    listed = "da = concatenate_vjp(g, parts, 0, axis=0)\n"
    assert _rewritten(listed, ranks).startswith("da = concatenate_vjp(")
    default = "db = concatenate_vjp(g, [a, b], 1)\n"
    assert (
        _rewritten(default, {"g": 2, "a": 2, "b": 2})
        == "db = g[a.shape[0]:a.shape[0] + b.shape[0]]"
    )


def empty_column(x, w):
    """`x[:, 2:3]` is empty where `x` has two columns: no piece of the cotangent is its."""
    c = np.concatenate([x[:, 2:3], x[:, 0:1]], axis=1)
    return np.sum(np.sin(c) * w)


def empty_first(x, y):
    c = np.concatenate([x[:, 2:3], y], axis=1)
    return np.sum(np.sin(c) * np.arange(1.0, 3.0))


def empty_row(x, y):
    c = np.concatenate([x[1:2], y], axis=0)  # `x` of one row
    return np.sum(np.sin(c) * c)


def empty_middle(x, y, w):
    c = np.concatenate([x * 2.0, y[0:1], np.sin(x)], axis=0)  # `y` of no rows
    return np.sum(c * c * w)


def edge_padded(x, y):
    c = np.concatenate([x[0:1], y, x[-1:]])  # `x` empty
    return np.sum(np.sin(c) * c)


EMPTY_PIECES = {
    "empty_column": (empty_column, [(5, 2), (5, 1)], (0, 1)),
    "empty_first": (empty_first, [(3, 2), (3, 2)], (0, 1)),
    "empty_row": (empty_row, [(1, 3), (2, 3)], (0, 1)),
    "empty_middle": (empty_middle, [(3, 4), (0, 4), (6, 4)], (0, 1, 2)),
    "edge_padded": (edge_padded, [(0,), (3,)], (0, 1)),
    "edge_padded_full": (edge_padded, [(2,), (3,)], (0, 1)),
}


@pytest.mark.parametrize("name", sorted(EMPTY_PIECES))
def test_a_slice_taken_for_a_column_but_empty_cuts_the_cotangent_right(name):
    """The fused code's pieces, outside any guard and read by the fallback too, are bounded by
    the slices' actual lengths, not the length 1 fusion guesses for `x[:, 2:3]`, `x[-1:]`."""
    f, shapes, wrt = EMPTY_PIECES[name]
    args = [rng(j).normal(size=s) for j, s in enumerate(shapes)]
    params = tuple(inspect.signature(f).parameters)
    ranks = tuple((p, len(s)) for p, s in zip(params, shapes))
    compiled = transform(f, tuple(params[k] for k in wrt), "grad", ranks, True)
    assert "concatenate_vjp" not in _fused_parts(compiled.source)
    got, _ = in_python(compiled, *args)
    expected = s2sad.grad(f, wrt=wrt)(*args)
    for k, g, e in zip(wrt, got, expected):
        assert g.shape == args[k].shape
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(g, fd_grad(f, args, k), rtol=1e-6, atol=1e-6)


def test_only_a_proven_length_1_bounds_a_piece_by_a_number():
    """`x[:, None]` has one column whatever `x`; `x[:, 2:3]` has one only where `x` is wide
    enough: its piece is bounded by its shape, still known to the runs as a column."""
    text = (
        "u = x[:, None]\na = x2[:, 2:3]\nb = x2[:, -1:]\n"
        "du = concatenate_vjp(g, [u, a, b], 0, axis=1)\n"
        "da = concatenate_vjp(g, [u, a, b], 1, axis=1)\n"
        "db = concatenate_vjp(g, [u, a, b], 2, axis=1)\n"
    )
    ranks = {"g": 2, "x": 1, "x2": 2, "u": 2, "a": 2, "b": 2, "da": 2, "db": 2}
    assert _rewritten(text, ranks).splitlines()[3:] == [
        "du = g[:, :1]",
        "da = g[:, 1:1 + a.shape[1]]",
        "db = g[:, a.shape[1] + 1:a.shape[1] + 1 + b.shape[1]]",
    ]
    stmts = ast.parse(_rewritten(text, ranks)).body
    units = unit_axes(stmts, lambda n: ranks.get(n.id) if isinstance(n, ast.Name) else None)
    assert units["da"] == units["db"] == units["a"] == frozenset({1})  # guesses, guarded
    proven = unit_axes(stmts, lambda n: ranks.get(getattr(n, "id", None)), proven=True)
    assert proven["u"] == frozenset({1}) and not proven["a"] | proven["b"] | proven["da"]


# ----------------------------------------------------------------------------- random shapes

_BROADCAST = ["(n, 1)", "(1, k)", "(k,)", "()", "(n, k)"]


@st.composite
def _joined(draw):
    """Pieces of random widths concatenated along a random axis of a matrix, multiplied by a
    weight of a random broadcasting shape."""
    axis = draw(st.sampled_from([0, 1, -1, -2]))
    widths = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
    other = draw(st.integers(1, 4))
    weight = draw(st.sampled_from(_BROADCAST))
    return axis, widths, other, weight


@settings(max_examples=30, deadline=None)
@given(_joined())
def test_random_concatenations_fused_give_python_modes_gradient(tmp_path_factory, case):
    from conftest import load_module

    axis, widths, other, weight = case
    shapes = [(w, other) if axis % 2 == 0 else (other, w) for w in widths]
    n, k = (sum(widths), other) if axis % 2 == 0 else (other, sum(widths))
    wshape = eval(weight, {"n": n, "k": k})
    pieces = ", ".join(f"np.sin(u{j}) * u{j}" for j in range(len(widths)))
    params = ", ".join(f"u{j}" for j in range(len(widths)))
    text = (
        f"import numpy as np\n\n\ndef f(w, {params}):\n"
        f"    z = np.concatenate([{pieces}], axis={axis})\n"
        "    c = z[:, :1]\n"
        "    return np.sum(z * z * w + c * w)\n"
    )
    module = load_module(tmp_path_factory.mktemp("joined"), "joined_case", text)
    args = [rng(9).normal(size=wshape)] + [rng(j).normal(size=s) for j, s in enumerate(shapes)]
    names = tuple(f"u{j}" for j in range(len(widths)))
    ranks = (("w", len(wshape)),) + tuple((name, 2) for name in names)
    compiled = transform(module.f, names, "grad", ranks, True)
    got, _ = in_python(compiled, *args)
    expected = s2sad.grad(module.f, wrt=names)(*args)
    got = got if isinstance(got, tuple) else (got,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert "concatenate_vjp" not in compiled.source.split("# adjoint sweep:")[1]
    for g, e, a in zip(got, expected, args[1:]):
        assert g.shape == a.shape
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "made, index",
    [
        ("p[:, 0] * 2.0", "(slice(None, None, None), None)"),  # `w[:, None]`'s cotangent
        ("p * 2.0", "(slice(None, None, None), slice(2, 3, None))"),  # a column
        ("p * 2.0", "(slice(None, None, None), slice(-1, None, None))"),  # from the end
    ],
)
def test_adds_into_a_column_or_a_new_axis_join_the_run_over_its_length_1(made, index):
    """`add_at(dw, index, v)`, `v` of shape (n, 1) computed by a run over columns, `dw` made
    before it: added where computed."""
    text = (
        f"dw = {made}\na = p[:, 2:3]\nb = p[:, 0:1]\n"
        f"v = a * b + a\nu = v * b\nadd_at(dw, {index}, v)\nout = u * a\n"
    )
    stmts = ast.parse(text).body
    ranks = {"p": 2, "a": 2, "b": 2, "v": 2, "u": 2, "out": 2, "dw": 2 if made == "p * 2.0" else 1}

    def rank_of(node):
        if isinstance(node, ast.Subscript):  # `p[:, 0]`, `p[:, 2:3]`
            return 1 if isinstance(node.slice.elts[1], ast.Constant) else 2
        return ranks.get(node.id) if isinstance(node, ast.Name) else None

    reads = [ast.Name("out", ast.Load()), ast.Name("dw", ast.Load())]
    [fused] = fuse([stmts], rank_of, reads, set(ranks) | {"np", "add_at"})
    source = ast.unparse(ast.fix_missing_locations(ast.Module(fused, [])))
    assert "add_at(" not in source.split("else:")[0]
    assert re.search(r"dw_view\[i0, 0\] \+= v_i", source)
    helpers = {"np": np, "in_dtype_of": lambda v, x: v, "float_arrays": lambda *x: True}
    helpers["add_at"] = lambda x, i, v: np.add.at(x, i, v)
    spaces = []
    for code in (source, text):
        space = dict(helpers, p=rng().normal(size=(5, 4)))
        exec(code, space)
        spaces.append(space)
    for name in ("out", "dw"):
        np.testing.assert_allclose(spaces[0][name], spaces[1][name], rtol=1e-15)


def chain(k, x0, m):
    """A mass-spring chain's step: `m[1:-1]`, a slice of an array nothing writes into, is an
    operand of the arithmetic (the rules keep it so in the adjoint too)."""
    x = x0.copy()
    v = np.zeros_like(x0)
    for step in range(3):
        f = k * (x[1:] - x[:-1])
        v[1:-1] += 0.1 * (f[1:] - f[:-1]) / m[1:-1]
        x = x + 0.1 * v
    return np.sum(x * x)


def test_a_slice_read_inside_arithmetic_is_named_and_joins_the_run():
    compiled = transform(chain, ("k",), "grad", (("k", 1), ("x0", 1), ("m", 1)), True)
    fused = _fused_parts(compiled.code)
    assert "m_view = m[1:-1]" in fused and "m_view2 = m[1:-1]" in fused  # primal and adjoint
    assert "v_div_i = v_mul_i / m[i0 + 1]" in fused and "/ m[i0 + 1]" in fused.split("sweep:")[1]
    args = (rng().uniform(1, 2, 6), np.arange(7.0), rng().uniform(1, 2, 7))
    got, _ = in_python(compiled, *args)
    np.testing.assert_allclose(got, s2sad.grad(chain)(*args), rtol=1e-12)
    np.testing.assert_allclose(got, fd_grad(chain, args, 0), rtol=1e-6)
