"""Jitted code's large temporaries kept between calls (s2sad/workspace.py, rules/pools.py): the
rewrite of the compiled text, the numbers (against Python mode, finite differences and the same
code without a workspace), and the rules: outputs the caller's own, threads and nested calls
never sharing a buffer, zeroed buffers, memory kept and freed."""

import ast
import re
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

import s2sad
from s2sad.rules.pools import POOLED_BYTES
from s2sad.fused_guards import fused_only
from s2sad.pipeline.numba_forms import NumbaForms
from s2sad.workspace import Pool, pooling, release_workspaces

# (K, d, n): the (K, d, n) arrays, 5 MB, and the (K, n) sums, 1.3 MB, are pooled
K, D, N = 4, 4, 40_000
assert K * N * 8 >= POOLED_BYTES


def mixture(Q, mu, x):
    centred = x.T[None, :, :] - mu[:, :, None]
    y = Q @ centred
    return np.sum(np.log(np.sum(y**2, axis=1) + 1.0))


def wave(x):
    return np.sum(np.sin(x) ** 2)


def _inputs(seed):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(K, D, D)), rng.normal(size=(K, D)), rng.normal(size=(N, D))


@pytest.fixture(scope="module")
def mixture_grad():
    return s2sad.grad(mixture, wrt=("Q", "mu", "x"), jit="strict")


def _pool(g):
    pools = g.compiled.jitted.pools
    assert pools, "the compiled text took no workspace"
    return next(iter(pools.values()))


def _regions(pool):
    """This thread's regions of the pool's arena, as arrays."""
    table, arena = pool.local.table, pool.local.arena
    return [arena[s : s + n] for s, n in zip(table[1], table[2]) if n]


def _forms(body: str, ranks=None, checks=False, names=()):
    """The pass (pipeline/numba_forms.py) over the function body `body`: its statements' text,
    the slots, the pass, and the statements before and after."""
    stmts = ast.parse(textwrap.dedent(body)).body
    mentioned = {n.id for s in stmts for n in ast.walk(s) if isinstance(n, ast.Name)}
    forms = NumbaForms(mentioned | set(names), lambda e: (ranks or {}).get(ast.unparse(e)), checks)
    [out], slots = forms.function(stmts)
    return [ast.unparse(s) for s in out], slots, forms, stmts, out


def test_the_pass_pools_allocations_outside_loops_under_a_free_name():
    body = """
        t = np.empty(a.shape, a.dtype)
        z = np.zeros((a.shape[0], 2))
        for i in range(3):
            u = np.empty(a.shape, a.dtype)
        if a.ndim:
            v = a - workspace
        else:
            v = matmul_stacks(t, z)
        m = x.shape[0] - (k + 1)
        n = c - d
        e = p * q
        lanes = np.zeros(32)
        return matmul_stacks(t, z)
    """
    text, slots, forms, before, after = _forms(body, ranks={"a": 2, "c": 0, "d": 1})
    assert slots == 4 and forms.workspace == "workspace2"
    assert forms.parameter(slots) == ["workspace2=None"] and forms.parameter(0) == []
    assert text[0] == "t = pooled(workspace2, 0, a.shape, a.dtype)"
    assert text[1] == "z = pooled_zeros(workspace2, 1, (a.shape[0], 2), np.float64)"
    assert text[2] == ast.unparse(before[2])  # in a loop: fresh each time
    assert text[3] == (
        "if a.ndim:\n    v = pooled_subtract(workspace2, 2, a, workspace)\n"
        "else:\n    v = pooled_matmul(workspace2, 3, t, z)"
    )
    # sizes, a number, ranks unknown (a CUDA kernel's numbers), lanes, a return
    assert text[4:] == [ast.unparse(s) for s in before[4:]]
    assert after[2] is before[2] and after[4] is before[4]  # (unchanged: not copied)
    assert ast.unparse(before[0]) == "t = np.empty(a.shape, a.dtype)"  # (a copy was changed)


def test_the_pass_checks_masks_on_the_statements_lines():
    body = """
        a = x[m]
        x[i, m] = x[:, m]
        z = x[k]
        if y[m]:
            b = x[m, None]
        for j in range(3):
            c = x[j]
        while j:
            c = x[y > j]
        return a
    """
    text, slots, _, before, after = _forms(body, checks=True, ranks={"k": 0, "y > j": 1})
    assert slots == 0
    assert text[0] == "a = x[mask_fits(x, 0, m)]"
    assert text[1] == "x[mask_fits(x, 0, i), mask_fits(x, 1, m)] = x[:, mask_fits(x, 1, m)]"
    assert text[2] == "z = x[k]"  # (a number: mask_fits(x, 0, k) would be k)
    assert text[3] == "if y[mask_fits(y, 0, m)]:\n    b = x[mask_fits(x, 0, m), None]"
    assert text[4] == ast.unparse(before[4])  # a `range` loop's variable (fusion's i0)
    assert text[5] == "while j:\n    c = x[mask_fits(x, 0, y > j)]"  # (a mask in a loop too)
    assert text[6] == "return a"
    assert _forms(body)[0] == [ast.unparse(s) for s in before]  # (bounds not checked)
    # every node the pass made is on its statement's line (what messages name)
    for old, new in zip(before, after):
        for node in ast.walk(new):
            if isinstance(node, ast.expr):
                assert node.lineno in range(old.lineno, old.end_lineno + 1), ast.unparse(node)
    for old, new in zip(before, after):
        assert getattr(new, "lineno") == old.lineno


def test_no_workspace_after_keyword_only_parameters():
    """A parameter cannot follow keyword-only ones positionally: such a function takes no
    workspace."""

    def keyed(x, *, scale):
        return np.sum(np.sin(x) ** 2) * scale

    g = s2sad.grad(keyed, jit=True)
    x = np.linspace(0.0, 1.0, 5)
    text = s2sad.source(g, x, scale=2.0)
    assert "workspace=None" not in text and "pooled" not in text


def test_gradient_with_workspace(mixture_grad):
    Q, mu, x = _inputs(0)
    got = mixture_grad(Q, mu, x)
    again = mixture_grad(Q, mu, x)  # from the buffers the first call left (zeroed sums too)
    pool = _pool(mixture_grad)
    assert len(_regions(pool)) >= 5  # centred, y, its cotangent, centred's; the (K, n) sums
    assert pool.kept_bytes() <= 2 * (4 * K * D * N + 2 * K * N) * 8 + 64 * pool.slots
    python = s2sad.grad(mixture, wrt=("Q", "mu", "x"))(Q, mu, x)
    for a, b, p, v in zip(got, again, python, (Q, mu, x)):
        assert a.shape == v.shape and a.dtype == v.dtype
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, p, rtol=1e-10, atol=1e-12)
    # a directional derivative against central differences, in float64
    rng = np.random.default_rng(1)
    dirs = [rng.normal(size=v.shape) for v in (Q, mu, x)]
    h = 1e-6
    plus = mixture(*(v + h * t for v, t in zip((Q, mu, x), dirs)))
    minus = mixture(*(v - h * t for v, t in zip((Q, mu, x), dirs)))
    slope = sum(np.sum(a * t) for a, t in zip(got, dirs))
    assert abs((plus - minus) / (2 * h) - slope) <= 1e-6 * max(1.0, abs(slope))


def test_what_numba_compiles_is_what_source_shows(mixture_grad):
    """The workspace and the slots are in the code `s2sad.source` shows, which is the text
    Numba compiles (its fused runs' `else:` branches aside: fused_guards.py)."""
    args = _inputs(0)
    mixture_grad(*args)
    shown = s2sad.source(mixture_grad, *args)
    jitted = mixture_grad.compiled.jitted
    name = jitted.compiled.name
    assert f"def {name}(Q, mu, x, workspace=None):" in shown
    assert "workspace: memory s2sad keeps between calls" in shown  # (its docstring says why)
    compiled = Path(jitted.namespace["__file__"]).read_text()
    assert fused_only(shown).replace(f"def {name}(", f"def _{name}_py(", 1) in compiled
    # (a call black wraps puts its slot on a line of its own)
    slots = [int(k) for k in re.findall(r"pooled\w*\(\s*workspace,\s*(\d+),", shown)]
    assert sorted(slots) == list(range(jitted.pools[name].slots)) and len(slots) >= 5
    assert re.search(r"centred = pooled_subtract\(workspace, \d+, ", shown)


def test_outputs_are_the_callers(monkeypatch):
    g = s2sad.grad(wave, jit="strict")  # its gradient written into a pooled np.empty
    x1, x2 = np.linspace(0, 1, 200_000), np.linspace(1, 3, 200_000)
    first = g(x1)
    kept = first.copy()
    second = g(x2)
    third = g(x1)
    np.testing.assert_array_equal(first, kept)  # not overwritten by the later calls
    np.testing.assert_array_equal(third, kept)
    np.testing.assert_allclose(second, np.sin(2 * x2), rtol=1e-12, atol=1e-14)
    for a, b in ((first, second), (second, third), (first, third)):
        assert not np.shares_memory(a, b)
    for out in (first, second, third):
        assert not np.shares_memory(out, _pool(g).local.arena)
    assert _pool(g).local.escaped  # its slot: made afresh (no copy) from the second call on
    monkeypatch.setattr("s2sad.workspace.ENABLED", False)  # the same code without a workspace
    np.testing.assert_array_equal(g(x1), kept)


def test_threads_never_share_buffers(mixture_grad):
    inputs = [_inputs(seed) for seed in (2, 3)]
    expected = [s2sad.grad(mixture, wrt=("Q", "mu", "x"))(*v) for v in inputs]
    pool = _pool(mixture_grad)
    results, buffers, errors = {}, {}, []
    start = threading.Barrier(2)

    def work(i):
        try:
            start.wait()
            for _ in range(2):  # the second from the first's arena
                results[i] = mixture_grad(*inputs[i])
            buffers[i] = pool.local.arena
        except Exception as exc:  # noqa: BLE001  (reported below)
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for i in (0, 1):
        for a, p in zip(results[i], expected[i]):
            np.testing.assert_allclose(a, p, rtol=1e-10, atol=1e-12)
    assert buffers[0].size and buffers[1].size
    assert not np.shares_memory(buffers[0], buffers[1])


def test_nested_call_takes_no_workspace():
    pool, seen = Pool(1), []

    def dispatcher(depth, *workspace):
        seen.append(workspace)
        if depth:
            pool.call(dispatcher, (depth - 1,))
        if workspace:
            ((table, arena),) = workspace
            table[0, 0] = POOLED_BYTES
        return depth

    assert pool.call(dispatcher, (1,))[0] == 1
    assert len(seen) == 2 and len(seen[0]) == 1 and seen[1] == ()  # the inner call: none
    assert pool.kept_bytes() == POOLED_BYTES
    arena = pool.local.arena
    pool.call(dispatcher, (0,))
    assert seen[2][0][1] is arena  # the next call gets it, its region laid out
    assert pool.local.table[1:, 0].tolist() == [0, POOLED_BYTES]


def test_an_output_the_pool_cannot_copy_keeps_the_arena():
    pool = Pool(1)

    class Box:  # a returned object holding an array of the arena: it cannot be copied
        def __init__(self, array):
            self.array = array

    def dispatcher(*workspace):
        ((table, arena),) = workspace
        table[0, 0] = POOLED_BYTES
        if arena.size:
            view = arena[:8].view(np.float64)
            view[0] = 7.0
            return Box(view), (view,)
        return Box(None), (np.zeros(1),)

    pool.call(dispatcher, ())
    arena = pool.local.arena
    (box, (copied,)), _ = pool.call(dispatcher, ())
    assert box.array.base is arena and pool.local.arena is not arena  # the box's now
    assert copied[0] == 7.0 and not np.shares_memory(copied, arena)
    assert pool.local.escaped == {0} and pool.kept_bytes() == 0  # its slot: fresh arrays


def test_release_frees_every_pool(mixture_grad):
    mixture_grad(*_inputs(4))
    assert _pool(mixture_grad).kept_bytes() > 0
    release_workspaces()
    assert _pool(mixture_grad).kept_bytes() == 0


def test_only_calls_on_large_arguments_take_a_workspace(monkeypatch):
    """Small arguments make no array the pool keeps, and the workspace argument costs Numba's
    typing at each call: such calls run as before (GMM d=2 had slowed from 217 to 346 µs)."""
    assert not pooling((np.zeros(1000), 2.0))
    assert pooling((np.zeros(POOLED_BYTES // 16), np.zeros(POOLED_BYTES // 16)))
    monkeypatch.setattr("s2sad.workspace.ENABLED", False)  # (S2SAD_WORKSPACE=0)
    assert not pooling((np.zeros(POOLED_BYTES),))


def test_a_planned_call_decides_by_its_arguments_sizes(monkeypatch):
    """A signature's plan keeps its pool, and each call's arrays decide whether it takes the
    workspace: the same kinds, small then large arrays, then pooling off."""
    g = s2sad.grad(wave, jit="strict")
    small, large = np.linspace(0, 1, 100), np.linspace(0, 1, POOLED_BYTES // 8 + 1)
    for _ in range(3):  # (a plan made, then used)
        np.testing.assert_allclose(g(small), np.sin(2 * small), rtol=1e-12, atol=1e-14)
    pool = _pool(g)
    pool.clear()
    [plan] = g.compiled.jitted.plans.values()
    assert plan.pool is pool and plan.pool_for((small,)) is None
    assert plan.pool_for((large,)) is pool
    np.testing.assert_allclose(g(small), np.sin(2 * small), rtol=1e-12, atol=1e-14)
    assert getattr(pool.local, "table", None) is None  # (no workspace passed)
    assert [plan] == list(g.compiled.jitted.plans.values())  # (the planned path ran)
    np.testing.assert_allclose(g(large), np.sin(2 * large), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(g(large), np.sin(2 * large), rtol=1e-12, atol=1e-14)
    assert pool.local.table[0].max() >= large.nbytes  # (its gradient asked a slot)
    monkeypatch.setattr("s2sad.workspace.ENABLED", False)
    assert plan.pool_for((large,)) is None
