"""Fused runs writing and reading loops' tape rows in place (pipeline/row_access.py): a value a
loop pushes, written by a fused run into a buffer, is written into its row instead; a row the
adjoint pops into a name only a fused run reads element by element is read from the tape. The
pass is read on small statement lists (no compile); the helpers it calls are compiled once.
The gradients it changes run in test_jit_hoist.py (gated, shrinking: a row that does not fit),
test_jit_row_tapes.py and the corpus, against Python mode and finite differences."""

import ast

import numpy as np
import pytest

from s2sad.pipeline.row_access import rows_in_place

FORWARD = """
x_buffer = np.empty(a.shape, a.dtype)
x_tape = rows_like(x_buffer, n)
t_taped = 0
for t in range(n):
    if fusible(a, b):
        x = reused(x_buffer, a.shape, a.dtype)
        for i0 in range(a.shape[0]):
            x[i0] = a[i0] * b[i0]
        s = shape_stub(x)
    else:
        x = a * b
        s = x
    push_row(x_tape, t_taped, x)
    t_taped += 1
"""

ADJOINT = """
x_tape = row_tape(a, n)
for t in range(n - 1, -1, -1):
    t_taped -= 1
    x = pop_row(x_tape, t_taped)
    if fusible(g, k) and fusible(g, x):
        out = np.empty(g.shape, g.dtype)
        for i0 in range(g.shape[0]):
            out[i0] = g[i0] * x[i0 + 1 - 1]
    else:
        out = g * x
    g = out
"""


def _passed(source: str) -> str:
    [block] = rows_in_place([ast.parse(source).body], [])
    return ast.unparse(ast.Module(block, []))


def _same(source: str) -> bool:
    return _passed(source) == ast.unparse(ast.parse(source))


def test_a_pushed_value_is_written_into_its_row():
    out = _passed(FORWARD)
    assert "row_fits(x_tape, t_taped, a.shape)" in out
    assert "x_tape[t_taped, i0] = a[i0] * b[i0]" in out
    assert "s = shape_stub(x_buffer)" in out and "reused(" not in out
    loop = ast.parse(out).body[-1]
    guard = loop.body[0]
    assert ast.unparse(guard.orelse[-1]) == "push_row(x_tape, t_taped, x)"  # (the else: pushes)
    assert [ast.unparse(s) for s in loop.body[1:]] == ["t_taped += 1"]


@pytest.mark.parametrize(
    "old, new",
    [
        ("    t_taped += 1\n", "    t_taped += 1\n    y = x + 1\n"),  # read after the push
        ("        s = shape_stub(x)\n", "        s = x[0:2]\n"),  # a slice of it in the run
        ("    push_row(", "    t_taped = t_taped + 1\n    push_row("),  # the count changes
        ("x_tape = rows_like(x_buffer, n)\n", ""),  # rows made elsewhere, maybe in the loop
        ("rows_like(x_buffer, n)", "view_rows(x_buffer, n)"),  # maybe a list of views
        ("reused(x_buffer, a.shape, a.dtype)", "np.empty(a.shape, a.dtype)"),  # no buffer
    ],
)
def test_a_pushed_value_stays_where_it_cannot_be_written_in_place(old, new):
    assert old in FORWARD
    assert _same(FORWARD.replace(old, new))


def test_a_popped_row_is_read_in_place():
    out = _passed(ADJOINT)
    assert "if fusible(g, k) and fusible_row(g, x_tape):" in out
    assert "out[i0] = g[i0] * x_tape[t_taped, i0 + 1 - 1]" in out
    loop = ast.parse(out).body[-1]
    assert [ast.unparse(s) for s in loop.body[:1]] == ["t_taped -= 1"]
    assert ast.unparse(loop.body[1].orelse[0]) == "x = pop_row(x_tape, t_taped)"


@pytest.mark.parametrize(
    "old, new",
    [
        ("range(g.shape[0])", "range(x.shape[0])"),  # its shape read in the run
        ("    g = out\n", "    g = out + x\n"),  # read after the run
        ("fusible(g, x)", "fusible(g, x, k)"),  # tested otherwise than in a pair
        ("x[i0 + 1 - 1]", "x[t]"),  # indexed by a name that is no counter of the run
        ("row_tape(a, n)", "view_rows(a, n)"),  # maybe a list of views
        ("    if fusible", "    t_taped = 0\n    if fusible"),  # the count changes
    ],
)
def test_a_popped_row_stays_where_it_cannot_be_read_in_place(old, new):
    assert old in ADJOINT
    assert _same(ADJOINT.replace(old, new))


def test_the_row_helpers():
    numba = pytest.importorskip("numba")
    import s2sad.numba_helpers  # noqa: F401  (registers the helpers' Numba forms)
    from s2sad.rules.loop_tests import fusible_row
    from s2sad.rules.tapes import ROW_TAPE_MISFIT, row_fits

    @numba.njit
    def fits(tape, k, like):
        row_fits(tape, k, like.shape)
        return fusible_row(like, tape)

    tape = np.zeros((3, 4))
    assert fits(tape, 2, np.ones(4)) is True
    for k, like in ((3, np.ones(4)), (0, np.ones(5))):  # past the rows; another shape
        with pytest.raises(ValueError, match=ROW_TAPE_MISFIT):
            fits(tape, k, like)
    assert fusible_row(np.ones(4), tape) is False  # Python runs the array statements
