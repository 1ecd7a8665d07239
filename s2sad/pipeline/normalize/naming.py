"""Names: `NameAllocator` gives fresh names (`h`, `h2`, `h_1`), and `hygienic` renames the user's
names that clash with s2sad's own (see `reserved.RESERVED`). Every later stage allocates its names
from the allocator normalization filled.
"""

from __future__ import annotations

import ast
import keyword


class NameAllocator:
    def __init__(self, taken: set[str]):
        self.taken = set(taken)
        self.made: set[str] = set()  # the names it gave
        # base -> the first suffix not yet tried: `taken` only grows, so every name below it
        # stays taken, and the hundredth `h` costs one lookup rather than a hundred
        self._next: dict[str, int] = {}

    def fresh(self, base: str) -> str:
        k = self._next.get(base, 1)
        name = base if k == 1 else self._numbered(base, k)
        while name in self.taken or keyword.iskeyword(name):  # `del`, the adjoint of `el`
            k += 1
            name = self._numbered(base, k)
        self._next[base] = k + 1
        self.taken.add(name)
        self.made.add(name)
        return name

    def state(self) -> set[str]:
        """What `restore` needs to take back every name allocated since."""
        return set(self.taken)

    def restore(self, taken: set[str]) -> None:
        # names given since are free again: the suffixes remembered may pass over them
        self.taken = set(taken)
        self._next.clear()

    @staticmethod
    def _numbered(base: str, k: int) -> str:
        return f"{base}{k}" if not base[-1].isdigit() else f"{base}_{k}"


def hygienic(parsed, reserved: set[str]) -> None:
    """Rename every name the function binds (parameters, locals, nested functions and their
    parameters, comprehension variables) that is reserved, throughout its code: `unbroadcast`
    becomes `unbroadcast2`. The resolver reads a renamed name that is global somewhere under its
    own name (`parsed.original`)."""
    tree = parsed.tree
    bound: set[str] = set()
    every: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            every.add(node.id)
            if not isinstance(node.ctx, ast.Load):
                bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.FunctionDef) and node is not tree:
            bound.add(node.name)
    clash = sorted(bound & reserved)
    parsed.original = {}
    if not clash:
        return
    names = NameAllocator(every | bound | reserved)
    new = {old: names.fresh(old) for old in clash}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in new:
            node.id = new[node.id]
        elif isinstance(node, ast.arg) and node.arg in new:
            node.arg = new[node.arg]
        elif isinstance(node, ast.FunctionDef) and node is not tree and node.name in new:
            node.name = new[node.name]
    parsed.params = [new.get(p, p) for p in parsed.params]
    parsed.original = {v: k for k, v in new.items()}
