"""What a `for` loop iterates over, evaluated once at loop entry as Python does: the sequence
of `for row in x`, `enumerate` and `zip` (`sequence_of`), bound to a name of its own where the
body rebinds the name it reads, and the `range` bounds (and `enumerate`'s start) that read a name
the body rebinds (`entry_bound`), so that the adjoint, the tangent and the tapes' trip counts
iterate over the values the loop did, not the last ones.
"""

from __future__ import annotations

import ast

from ..names import names_read, names_stored
from .list_loops import ListLoops


class Iterables(ListLoops):
    """The loops' iterables, as names that keep their entry values (see the module docstring)."""

    def entry_bound(self, node: ast.expr, role: str, rebound: set[str], renamed=False):
        """A `range` bound as an operand that keeps its value at loop entry: Python evaluates the
        bounds once, so where the body rebinds a name they read, the adjoint's (and a tape's)
        trip count must not read its last value. Such a bound gets a name of its own,
        `n_stop = n`, assigned before the loop (and taped like any value, in an outer loop)."""
        user_names = names_read([node]) if not renamed else set()
        seq = node if renamed else self.atom(node, role)
        if renamed:  # an operand already renamed: its SSA names map back to user names
            back = {v: k for k, v in self.env.items()}
            user_names = {back.get(n, n) for n in names_read([seq])}
        if isinstance(seq, ast.Constant) or not user_names & rebound:
            return seq
        if isinstance(seq, ast.Name) and seq.id not in self.env.values():
            self.locals.add(seq.id)  # a temp of its own, assigned before the loop
            self.env.setdefault(seq.id, seq.id)
            return seq
        read = [n.id for n in ast.walk(seq) if isinstance(n, ast.Name)]  # n, or x of x.shape[0]
        base = self.parsed.original.get(read[0], read[0])
        name = self.synthesize(f"{base}_{role}" if role != "range" else f"{base}_bound")
        self.append(name, seq, varied=self.atom_varied(seq))
        return ast.Name(name, ast.Load())

    def zipped(self, it: ast.expr, target: ast.expr, body: list[ast.stmt]):
        """For `zip(a, b)` read into a tuple target `(u, v)`: [(u, a's items), (v, b's items)]
        (a `zip` inside, read into a tuple, likewise); else None."""
        if not (
            isinstance(it, ast.Call)
            and isinstance(target, ast.Tuple)
            and not (isinstance(it.func, ast.Name) and it.func.id in self.locals)
            and self.resolver.resolve(it.func) is zip
            and not it.keywords
            and it.args
            and len(target.elts) == len(it.args)
        ):
            return None
        pairs = []
        for t, a in zip(target.elts, it.args):
            pairs += self.zipped(a, t, body) or [(t, self.sequence_of(a, body))]
        return pairs

    def bind_items(self, pairs, at: ast.Name) -> None:
        """Each target of the loop bound to its sequence's item at index `at`."""
        for t, seq in pairs:
            self.assign_target(t, ast.Subscript(seq, at, ast.Load()))

    def sequence_of(self, node: ast.expr, body: list[ast.stmt]) -> ast.Name:
        """What a `for` loop iterates over, as a name of its own: Python evaluates it once, so a
        body that rebinds the name must not change the rows the loop reads. The rows it binds
        are views of what `node` may share memory with (`for row in y: y += 1.0`)."""
        shared = self.memory.shared_bases(node)
        seq = self.atom(node, "items")
        seq = self._sequence_name(node, seq, body)
        memory = self.memory
        memory.share(seq.id, memory.sharing.get(seq.id, set()) | shared - {seq.id})
        return seq

    def _sequence_name(self, node: ast.expr, seq: ast.expr, body: list[ast.stmt]) -> ast.Name:
        rebound = isinstance(node, ast.Name) and node.id in names_stored(body)
        if rebound or not isinstance(seq, ast.Name) or seq.id not in self.env.values():
            name = (
                self.names.fresh(f"{getattr(node, 'id', 'items')}_items")
                if rebound
                else (seq.id if isinstance(seq, ast.Name) else self.names.fresh("items"))
            )
            if rebound or not isinstance(seq, ast.Name):
                self.append(name, seq, varied=self.atom_varied(seq))
            self.locals.add(name)
            self.env.setdefault(name, name)
            return ast.Name(name, ast.Load())
        self.locals.add(seq.id)  # already an SSA name: it reads as itself from here on
        self.env.setdefault(seq.id, seq.id)
        return seq
