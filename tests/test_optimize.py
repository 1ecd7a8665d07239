"""The copy optimizer (s2sad/optimize.py): the same rewrites as re-checking every candidate
against the whole function after each one (the reference below), at a cost linear in the
function's length."""

import ast
import copy
import random
from collections import Counter

from s2sad.pipeline import optimize as opt

# ----------------------------------------------------------------------------- the reference


def _assigned(node) -> list[str]:
    names = []
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            names.append(n.id)
        elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
            names.append(n.target.id)
    return names


def _reads(node) -> Counter:
    return Counter(
        n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    )


def reference(stmts, protected):
    module = ast.Module(stmts, [])
    while True:
        counts, reads = Counter(_assigned(module)), _reads(module)
        if not _pass(module.body, counts, reads, protected):
            return module.body


def _pass(block, counts, reads, protected):
    for i, stmt in enumerate(block):
        copy_ = opt._is_copy(stmt)
        if copy_ is not None and _try(block, i, copy_, counts, reads, protected):
            return True
        for field in ("body", "orelse"):
            inner = getattr(stmt, field, None)
            if isinstance(inner, list) and _pass(inner, counts, reads, protected):
                return True
    return False


def _try(block, i, copy_, counts, reads, protected):
    a, b = copy_
    if a == b:
        del block[i]
        return True
    rest = block[i + 1 :]
    for j, stmt in enumerate(rest):
        if opt._is_copy(stmt) == (b, a):
            del block[i + 1 + j]
            return True
        if a in _assigned(stmt) or b in _assigned(stmt):
            break
    if a in protected or counts[a] != 1:
        return False
    uses = [j for j, stmt in enumerate(rest) if _reads(stmt)[a]]
    if not uses or sum(_reads(stmt)[a] for stmt in rest) != reads[a]:
        return False
    last = uses[-1]
    if any(b in _assigned(stmt) for stmt in rest[:last]):
        return False
    if b in _assigned(rest[last]) and not isinstance(rest[last], ast.Assign):
        return False
    for j in range(last + 1):
        block[i + 1 + j] = opt._RenameReads(a, b).visit(block[i + 1 + j])
    del block[i]
    return True


# ----------------------------------------------------------------------------- programs

NAMES = ["a", "b", "c", "d", "e", "f", "g"]


def _block(rng, depth, n):
    lines = []
    for _ in range(n):
        r = rng.random()
        x, y, z = (rng.choice(NAMES) for _ in range(3))
        if r < 0.45:
            lines.append(f"{x} = {y}")
        elif r < 0.7:
            lines.append(f"{x} = {y} * {z}")
        elif r < 0.78:
            lines.append(f"{x} += {y}")
        elif r < 0.84:
            lines.append(f"{x}[0] = {y}")
        elif depth < 2 and r < 0.92:
            lines.append(f"for i in range({y}):")
            lines += ["    " + line for line in _block(rng, depth + 1, rng.randint(1, 5))]
        elif depth < 2:
            lines.append(f"if {y}:")
            lines += ["    " + line for line in _block(rng, depth + 1, rng.randint(1, 4))]
            if rng.random() < 0.5:
                lines.append("else:")
                lines += ["    " + line for line in _block(rng, depth + 1, rng.randint(1, 4))]
        else:
            lines.append(f"{x} = f({y}, {z})")
    return lines


def test_same_rewrites_as_the_reference():
    rng = random.Random(7)
    for _ in range(400):
        tree = ast.parse("\n".join(_block(rng, 0, rng.randint(2, 25))))
        protected = set(rng.sample(NAMES, rng.randint(0, 3)))
        want = reference(copy.deepcopy(tree.body), protected)
        got = opt.optimize(copy.deepcopy(tree.body), protected)
        assert ast.dump(ast.Module(got, [])) == ast.dump(ast.Module(want, [])), ast.unparse(tree)


def test_linear_in_the_length(monkeypatch):
    """A chain of copies, each forwarded into the next: every statement is walked once and
    looked at a bounded number of times (re-checking from the start costs n**2 / 2)."""
    n = 400
    lines = ["x0 = f(p)"] + [f"x{k} = x{k - 1}" for k in range(1, n)] + [f"y = g(x{n - 1})"]
    walked, looked = Counter(), Counter()
    own_names, is_copy = opt._own_names, opt._is_copy
    monkeypatch.setattr(opt, "_own_names", lambda *a: walked.update([1]) or own_names(*a))
    monkeypatch.setattr(opt, "_is_copy", lambda s: looked.update([1]) or is_copy(s))
    out = opt.optimize(ast.parse("\n".join(lines)).body, {"p", "y"})
    assert ast.unparse(ast.Module(out, [])) == "x0 = f(p)\ny = g(x0)"
    assert walked[1] == n + 1
    assert looked[1] <= 4 * n
