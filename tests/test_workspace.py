"""Jitted code's large temporaries kept between calls (s2sad/workspace.py, rules/pools.py): the
rewrite of the compiled text, the numbers (against Python mode, finite differences and the same
code without a workspace), and the rules: outputs the caller's own, threads and nested calls
never sharing a buffer, zeroed buffers, memory kept and freed."""

import threading
from pathlib import Path

import numpy as np
import pytest

import s2sad
from s2sad.rules.pools import POOLED_BYTES
from s2sad.workspace import Pool, pooling, release_workspaces, with_workspace

GENERATED = Path(__file__).resolve().parent.parent / "generated"

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


def test_rewrite_keeps_lines_and_takes_a_free_name():
    source = (
        "def f(a, workspace):\n"
        "    t = np.empty(a.shape, a.dtype)\n"
        "    z = np.zeros(\n"
        "        (a.shape[0], 2)\n"
        "    )\n"
        "    for i in range(3):\n"
        "        u = np.empty(a.shape, a.dtype)\n"
        "    if a.ndim:\n"
        "        v = a - workspace\n"
        "    return matmul_stacks(t, z)\n"
    )
    text, slots = with_workspace(source)
    assert slots == {"f": 3}
    assert text.count("\n") == source.count("\n")
    lines = text.splitlines()
    assert lines[0] == "def f(a, workspace, workspace2=None):"
    assert lines[1] == "    t = pooled(workspace2, 0, a.shape, a.dtype)"
    assert lines[2] == "    z = pooled_zeros(workspace2, 1, "
    assert lines[3] == "        (a.shape[0], 2), np.float64"
    assert lines[6] == "        u = np.empty(a.shape, a.dtype)"  # in a loop: fresh each time
    assert lines[8] == "        v = pooled_subtract(workspace2, 2, a, workspace)"
    assert lines[9] == "    return matmul_stacks(t, z)"  # returned: not an assignment


TRICKY = [
    "def f(x, y, scale=2.0):\n    d = x - y\n    return d * scale\n",
    "def f(x, y=(1.0), z: 'a)' = ')',  # )\n      ):\n    d = x - y\n    return d\n",
    "def f(x, y,\n      z=None,\n):\n    d = np.empty(x.shape)\n    return d\n",
    "@dec(1)\ndef f(x, y):\n    d = (x * 2) - y\n    e = x - (y + 1)\n    return d\n",
    "def f(x, y):\n    d = x - (y - (x - 1))\n    w = np.empty((n))\n    return d\n",
    "def f(x, y):\n    s = x - \\\n      y\n    t = (x -\n  # c\n   (y - 1))\n    u = '-'\n    return s\n",
    "def f(x, *a):\n    d = x - a\n",
    "def f(x, *, a):\n    d = x - a\n",
    "def f(x, **a):\n    d = x - a\n",
]


@pytest.mark.parametrize("source", TRICKY + sorted(GENERATED.glob("*.py")), ids=str)
def test_rewrite_compiles_and_keeps_lines(source):
    """Defaults, annotations, parenthesised or continued operands, strings holding `-`: the
    rewritten text compiles, line for line (and the subtraction keeps its operands)."""
    if not isinstance(source, str):
        source = source.read_text()
    text, slots = with_workspace(source)
    compile(text, "rewritten", "exec")
    assert text.count("\n") == source.count("\n")
    assert bool(slots) == ("workspace=None" in text)


def test_rewrite_keeps_operands_and_leaves_sizes():
    text, slots = with_workspace(TRICKY[0])
    assert text.splitlines()[0] == "def f(x, y, scale=2.0, workspace=None):"
    text, _ = with_workspace(TRICKY[3])
    assert "pooled_subtract(workspace, 0, x * 2, y)" in text
    assert "pooled_subtract(workspace, 1, x, y + 1)" in text
    text, _ = with_workspace(TRICKY[4])
    assert "pooled_subtract(workspace, 0, x, y - (x - 1))" in text
    assert "pooled(workspace, 1, n, np.float64)" in text
    assert with_workspace(TRICKY[6]) == (TRICKY[6], {})  # (a parameter cannot follow *a)
    sizes = "def f(x, k):\n    m = x.shape[0] - (k + 1)\n    n = len(x) - 1\n    return m\n"
    assert with_workspace(sizes) == (sizes, {})  # integer arithmetic: no slot


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
    monkeypatch.setenv("S2SAD_WORKSPACE", "0")  # the same code without a workspace
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
    monkeypatch.delenv("S2SAD_WORKSPACE", raising=False)
    assert not pooling((np.zeros(1000), 2.0))
    assert pooling((np.zeros(POOLED_BYTES // 16), np.zeros(POOLED_BYTES // 16)))
    monkeypatch.setenv("S2SAD_WORKSPACE", "0")
    assert not pooling((np.zeros(POOLED_BYTES),))
