"""Explicit index checks in jitted code (pipeline/bounds.py, index_ranges.py): generated code is
compiled without Numba's `boundscheck`, and checks each of the user's indices it cannot prove
in range (`check_index(i, len(x))` before its statement). The proofs are tested against
every loop they claim (hypothesis), the placed checks by the source and by running out of
range (reads, writes, negative indices, index arrays): jit, Python mode and finite
differences agree where the indices are in range."""

import ast
import inspect

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import s2sad
from s2sad.pipeline.index_ranges import Ranges, loop_bounds


def _proven(code: str, params=("x",)) -> dict:
    """{index text: proven} for each subscript `a[e]` of a name inside `code`'s loops."""
    stmts = ast.parse(code).body
    ranges = Ranges(stmts, {}, params, lambda name: 1 if name.id in params else None)
    found = {}

    def visit(body, loops):
        for stmt in body:
            if isinstance(stmt, ast.For):
                visit(stmt.body, loop_bounds(stmt, ranges, loops))
                continue
            for node in ast.walk(stmt):
                if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
                    text = ast.unparse(node)
                    found[text] = ranges.in_range(node.slice, node.value.id, 0, loops)

    visit(stmts, {})
    return found


def test_indices_proven_by_their_loops_bounds():
    found = _proven(
        "n = x.shape[0]\nm = w.shape[0]\ny = np.zeros(n - m + 1)\nz = np.empty_like(x)\n"
        "for i in range(1, n):\n    a = x[i - 1] + x[i] + z[-i] + x[i - n]\n"
        "for i in range(n - m + 1):\n    for k in range(m):\n        b = x[i + k] + w[k] + y[i]\n"
        "for i in range(n - 1, -1, -1):\n    for j in range(i):\n        c = x[j + 1]\n",
        ("x", "w"),
    )
    assert all(found.values()), found
    assert len(found) == 8


def test_indices_not_proven():
    """Past the end, past minus the length, a loop's variable rebound in its body, a name
    bound twice, a parameter bound again, a bound of a parameter of unknown kind."""
    found = _proven(
        "n = x.shape[0]\ny = np.zeros(n + 1)\nk = 2\nk = 3\nx = x + 1.0\n"
        "for i in range(n):\n    a = y[i + 2] + x[i] + w[i - n - 2]\n"
        "for j in range(1, n):\n    j = j + 1\n    b = w[j]\n"
        "for i in range(k):\n    c = w[i]\n"
        "for i in range(p):\n    d = w[i]\n"
        "lst = [0.0]\nz = np.zeros(len(lst))\nlst.append(1.0)\n"
        "for i in range(len(lst)):\n    e = z[i]\n",
        ("x", "w", "p"),
    )
    assert found == {
        "y[i + 2]": False,
        "x[i]": False,  # (x bound again: another array than the one measured)
        "w[i - n - 2]": False,
        "w[j]": False,
        "w[i]": False,
        "z[i]": False,  # (a list's length changes with `lst.append`: only an array's is stable)
    }


def test_bounds_bound_once_inside_a_loop():
    """An inner loop's bound bound once in the outer loop's body (as normalize writes
    `for j in range(n1 - 1)`) is a stable value; one naming the outer loop's variable, or
    bound twice, is not."""
    found = _proven(
        "n0 = w.shape[0]\nn1 = x.shape[0]\n"
        "for i in range(n0 - 1):\n    stop = n1 - 1\n    for j in range(stop):\n"
        "        a = x[j + 1]\n"
        "for i in range(n0):\n    top = i + 1\n    for j in range(top):\n        b = w[j]\n"
        "for i in range(n0):\n    if i:\n        k = n0 + 1\n    else:\n        k = n0\n"
        "    for j in range(k):\n        c = w[j - 1]\n",
        ("x", "w"),
    )
    assert found == {"x[j + 1]": True, "w[j]": False, "w[j - 1]": False}, found


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 3),
    st.integers(-3, 2),
    st.sampled_from([1, -1]),
    st.integers(-4, 3),
    st.integers(-1, 2),
)
def test_a_proof_holds_for_every_step_of_its_loop(start, stop, step, offset, longer):
    """`for i in range(...)` over `n = x.shape[0]`, `y[i + offset]` of `y = np.zeros(n +
    longer)`: where proven, every index the loop takes is in range (negative ones too)."""
    bounds = f"{start}, n + {stop}" if step == 1 else f"n + {stop}, {start} - 1, -1"
    code = (
        f"n = x.shape[0]\ny = np.zeros(n + {longer})\n"
        f"for i in range({bounds}):\n    a = y[i + {offset}]\n"
    )
    [proven] = _proven(code).values()
    if proven:
        for n in range(max(0, -longer), 8):
            length = n + longer
            steps = range(start, n + stop) if step == 1 else range(n + stop, start - 1, -1)
            assert all(-length <= i + offset < length for i in steps), (code, n)


def recurrence(x, a):
    n = x.shape[0]
    y = np.zeros(n)
    y[0] = x[0]
    for i in range(1, n):
        y[i] = a * y[i - 1] + x[i]
    return np.sum(y**2)


def window(x, w):
    n = x.shape[0]
    m = w.shape[0]
    y = np.zeros(n - m + 1)
    for i in range(n - m + 1):
        for k in range(m):
            y[i] = y[i] + w[k] * x[i + k]
    return np.sum(np.tanh(y))


def written(x, n, o, idx):
    y = np.zeros(3)
    for i in range(n):
        y[i - o] = y[i - o] + x[i] * x[i]
    return np.sum(y * x[1:4]) + np.sum(x[idx] ** 2)


def columns(u, idx):
    return np.sum(u[:, idx] ** 2)


def test_loops_over_the_arrays_own_lengths_have_no_checks():
    """Only `x[0]` outside the loop is checked (an empty array has none): `y[0]` beside it
    needs none, y of x's length (`np.zeros(n)`, `n = x.shape[0]`: index_ranges.py); the
    loops', and the adjoint's that mirror them, are proven. A gather checks its index array
    once, against its axis."""
    x, w = np.linspace(0.1, 1.0, 7), np.array([0.5, -0.25, 1.0])
    text = s2sad.source(s2sad.grad(recurrence, jit=True), x, 0.9)
    checks = [line.strip() for line in text.splitlines() if "check_index" in line]
    assert checks == ["check_index(0, len(x))"]
    assert "check_index" not in s2sad.source(s2sad.grad(window, jit=True), x, w)
    jvp = s2sad.source(s2sad.jvp(recurrence, jit=True), x, 0.9)
    assert jvp.count("check_index") == 1
    text = s2sad.source(s2sad.grad(columns, jit=True), np.ones((2, 3)), np.zeros((2, 2), int))
    assert text.count("check_index") == 1 and "check_index(idx, u.shape[1])" in text


def _numeric_grad(f, x, *rest, h=1e-6):
    g = np.zeros_like(x)
    for k in range(x.size):
        e = np.zeros_like(x)
        e.flat[k] = h
        g.flat[k] = (f(x + e, *rest) - f(x - e, *rest)) / (2 * h)
    return g


def _line(f, text: str) -> int:
    lines, start = inspect.getsourcelines(f)
    return start + next(n for n, line in enumerate(lines) if text in line)


def test_reads_and_writes_out_of_range_raise_at_the_users_line():
    """`y[i - o]` and `x[i]`, unproven (n, o are arguments), and `x[idx]` by a 2-D index array:
    negative indices wrap as in Python; past either end (an array's bad entry neither its first
    nor its last), IndexError naming the line, as Python mode raises it. In range, jit, Python
    mode and finite differences agree."""
    x = np.linspace(0.5, 1.5, 5)
    jitted, python = s2sad.grad(written, jit="strict"), s2sad.grad(written)
    idx = np.array([[0, -1], [4, -5]])
    for n, o in ((3, 0), (3, 2), (4, 3), (0, 9)):
        expected = python(x, n, o, idx)
        np.testing.assert_allclose(jitted(x, n, o, idx), expected, rtol=1e-12)
        np.testing.assert_allclose(expected, _numeric_grad(written, x, n, o, idx), rtol=1e-6)
    text = s2sad.source(jitted, x, 3, 0, idx)
    # (its read checked, its write in the same step not again; x[i] once too)
    assert text.count("check_index(i - o, len(y))") == 1
    assert text.count("check_index(i, len(x))") == 1
    # (an index array of two axes is read through `masked`, which checks its entries itself)
    assert "masked(x, idx)" in text and "check_index(idx" not in text
    loop = f"{__file__} line {_line(written, 'y[i - o] = y[i - o]')}"
    gather = f"{__file__} line {_line(written, 'np.sum(x[idx] ** 2)')}"
    for n, o, bad, where in (
        (4, 0, idx, loop),  # past y's end
        (3, 4, idx, loop),  # before minus its length
        (6, 3, idx, loop),  # past x's end
        (3, 0, np.array([[0, 1], [5, 2]]), gather),
        (3, 0, np.array([[0, -6], [1, 2]]), gather),
    ):
        with pytest.raises(IndexError):
            python(x, n, o, bad)
        with pytest.raises(IndexError) as raised:
            jitted(x, n, o, bad)
        assert where in str(raised.value), str(raised.value)


def last_axis(u, k):
    return np.sum(u[..., k] ** 2)


def positive_prefix(x):
    i = 0
    s = 0.0
    while i < x.shape[0] and x[i] > 0:
        s = s + x[i]
        i = i + 1
    return s


def test_an_index_no_check_can_be_placed_for_keeps_numbas_checks():
    """`u[..., k]` (its axis not counted) and a `while` test's `x[i]` (evaluated again at each
    step): the function is compiled with Numba's `boundscheck=True`, without checks of its own;
    code whose checks are placed is compiled without it."""
    x, u = np.array([1.0, 2.0, -1.0]), np.ones((2, 3))
    for f, args, numba_checks in (
        (last_axis, (u, 1), True),
        (positive_prefix, (x,), True),
        (recurrence, (x, 0.5), False),
    ):
        transformed = s2sad.grad(f, jit=True)
        compiled = transformed.specialized(transformed._bind(args, {}))
        assert compiled.indexed and compiled.numba_checks is numba_checks
        assert ("check_index" in s2sad.source(transformed, *args)) is not numba_checks


def masked_column(x, m):
    return np.sum(x[m, 0] ** 2)


def test_a_mask_beside_an_integer_is_checked():
    """`x[m, 0]`: the mask's length checked once, by mask_fits (numba_forms.py, which takes
    each item for one axis), not by check_index too (the function is compiled without Numba's
    checks: a mask one too long read and wrote past x, or crashed the process; break-it
    review)."""
    x = np.arange(1.0, 7.0).reshape(3, 2)
    jitted = s2sad.value_and_grad(masked_column, jit="strict")
    good = np.array([True, False, True])
    expected = s2sad.value_and_grad(masked_column)(x, good)
    np.testing.assert_allclose(jitted(x, good)[1], expected[1])
    text = s2sad.source(jitted, x, good)
    assert "check_index(m, len(x))" not in text and "x[mask_fits(x, 0, m), 0]" in text
    for bad in (np.array([True, False, False, True]), np.array([True, False])):
        with pytest.raises(IndexError):
            jitted(x, bad)


def masked_in_a_loop(x, m):
    s = 0.0
    for i in range(3):
        s = s + np.sum(x[m]) * i
    return s


def test_a_mask_in_a_loop_is_checked_by_mask_fits():
    """A mask read in a loop has its length checked by mask_fits (numba_forms.py), as outside
    one, and not by check_index too."""
    x, m = np.arange(3.0), np.array([True, False, True])
    text = s2sad.source(s2sad.grad(masked_in_a_loop, jit=True), x, m)
    loop = text[text.index("for i in range(3):") :]
    assert "x[mask_fits(x, 0, m)]" in loop and "check_index" not in text


def grown(x, g, idx):
    lst = [0.0]
    a = np.zeros(len(lst))
    for t in range(g):
        lst.append(1.0)
    for k in range(len(lst)):
        a[k] = x[k]
    j = idx.copy()
    s = x[j[0]]
    j[0] = j[1]
    return s * x[j[0]] + np.sum(a**2)


def searched(x, y):
    i = 0
    while x[i] < 0.0:
        i = i + 1
    s = x[i]
    for k in range(2):
        s = s + np.sum(x[y > k])
    return s


def test_what_may_change_an_index_or_a_length_is_checked_again():
    """Break-it review, each out of range returned numbers in jitted code where Python raises
    IndexError: `len` of a list grown since (only an array's length is stable), an index array
    written into between two reads by `j[0]`, and (`searched`: a `while` test's subscript makes
    the function keep Numba's checks, which do not check a mask's length) a mask written as a
    comparison inside the subscript, in a loop."""
    x, idx, y = np.linspace(0.5, 1.5, 5), np.array([0, 2]), np.ones(5)
    for f, good, bads in (
        (grown, (x, 0, idx), [(x, 1, idx), (x, 0, np.array([0, 5]))]),
        (searched, (x, y), [(x, y[:4])]),
    ):
        jitted, python = s2sad.grad(f, jit="strict"), s2sad.grad(f)
        np.testing.assert_allclose(jitted(*good), python(*good), rtol=1e-12)
        for args in bads:
            with pytest.raises(IndexError):
                python(*args)
            with pytest.raises(IndexError):
                jitted(*args)
    text = s2sad.source(s2sad.grad(grown, jit=True), x, 0, idx)
    assert "check_index(k, len(a))" in text and text.count("check_index(j[0], len(x))") == 2
    text = s2sad.source(s2sad.grad(searched, jit=True), x, y)
    assert text.count("x[mask_fits(x, 0, ") == 1 and "check_index" not in text


def copied_first(x):
    y = np.zeros_like(x)
    y[0] = x[0]
    z = y
    return np.sum(y**2) + z[0]


def test_a_check_implied_by_an_earlier_one_is_dropped():
    """`y[0]` after `x[0]` was checked, y of x's length (`np.zeros_like(x)`), and `z[0]`, z
    an alias of y: the prover (index_ranges.py) shows the one check covers them."""
    text = s2sad.source(s2sad.grad(copied_first, jit=True), np.arange(3.0))
    assert text.count("check_index(") == 1, text


def offsets(x, c):
    n = x.shape[0]
    s = 0.0
    for i in range(n - 1):
        j = i + 1  # bound in the loop, before the read: x[j] is proven
        s = s + x[j] * x[i]
        j = i + 2  # bound again: x[j] past the end at the last i, checked
        if c > 0:
            s = s + x[j]
        if c > 1:
            k = i
        else:
            k = i + 3
        s = s + c * x[k]  # k bound in a branch: not taken as either value, checked
    return s


def test_an_index_named_by_a_value_bound_before_it_in_its_block_is_proven():
    """`acc_add = i + k` before `x[acc_add]` (what `x[i + k]` normalizes to, a convolution's
    read): the binding holds until the name or what it reads is bound again, and one inside a
    branch does not hold after it. Found measuring `parallel=True`, where a check keeps a loop
    from running on threads."""
    text = s2sad.source(s2sad.grad(offsets, jit=True), np.arange(5.0), 2.0)
    checks = sorted(line.strip() for line in text.splitlines() if "check_index" in line)
    assert len(checks) == 2 and "check_index(k, len(x))" in checks, text
    x = np.linspace(0.3, 1.2, 6)
    for c in (2.0, 0.5):  # (c > 0: x[i + 2] is read past the end at the last i)
        with pytest.raises(IndexError):
            s2sad.grad(offsets, jit="strict")(x, c)
