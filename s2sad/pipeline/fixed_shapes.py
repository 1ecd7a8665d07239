"""Which shape tapes record the same shape on every push, and of which value: a proof over the
primal's statements, for jitted code (shape_tapes.py), where a tape of such shapes need keep
nothing and its pop can make a stand-in of that value's shape instead.

Each value gets a symbolic shape, a term: a parameter's shape as passed (`("of", x)`), `()` for
a number, the broadcast of its operands' (an elementwise operation; equal terms broadcast to
themselves, exactly as NumPy does), a basic index of a term (`x[1:]` and `y[:-1]` are both "one
element less" of an axis: max(n - 1, 0), exactly), the term of the argument a result takes its
shape from (`np.zeros_like(y)`, `np.empty(k.shape, ...)`, `@helper(shaped_like=...)`), or an
atom of its own where nothing is known (after `x op= v`, `x_1 = in_place(x + v, x)`, which
raises otherwise, x_1 has x's term). An atom made inside a loop stands for a shape that may
change from one iteration to the next; a term without one is the same on every iteration. A
name a loop carries has its term from before the loop in the first iteration and, in the later
ones, the term the first gave it, where the body provably gives it that term again (an
induction over the iterations, repeated with fewer such names until it holds); any other
carried name is an atom of the loop's. A push records one shape where the first iteration and
the later ones give it one term: a state `y = y0` that `y = y + h * (-k * y)` widens to the
broadcast of y0 and k, then keeps, gives `-k * y` that broadcast's term in every iteration.

A tape qualifies where its one push records a term with no loop's atom, and an expression of
the parameters as passed has that term: its witness (`x`, `x[1:]`), which the tape's making, at
the function's entry, evaluates; for a broadcast of terms, the witnesses of its terms, whose
broadcast the tape is made like. Unproven cases keep their tapes (a value that grows, a slice
to the loop's index, a value whose shape a broadcast widens at the first iteration)."""

from __future__ import annotations

import ast
import itertools

from ..astcopy import walk_nodes
from ..rules.helpers import SHAPED_LIKE
from .fusion.syntax import UFUNCS, text_of, written_in_place

SCALAR = ("scalar",)
WITNESSES = 3  # the most arrays whose broadcast a tape is made like (rules/tapes.py)
_LIKE = frozenset({"np.zeros_like", "np.empty_like", "np.ones_like", "np.full_like", "np.copy"})
_OF_SHAPE = frozenset({"np.zeros", "np.empty", "np.ones", "np.full"})
_SAME = frozenset({"snapshot", "widened_by", "stop_gradient"})  # (their first argument's shape)
_METHODS = frozenset({"copy", "astype"})
_INT_OPS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)
_OTHER = object()  # an index bound that is no constant
_JUMPS = (ast.Break, ast.Continue, ast.Return)


def fixed_shape_witnesses(primal, adjoint, tapes: dict[str, str], params, rank) -> dict:
    """{tape: witness expressions} for the shape tapes `tapes` (tape -> the name it records) of
    `primal` whose pushes provably record one shape on every iteration, the broadcast of the
    witnesses' at the function's entry (`[x]`; `[k, y0]` for the shape of `k * y0`). Pushes are
    still `tape.append(shape_stub(x))` here; `adjoint` is read for the names it binds and
    writes into."""
    proof = _Proof(primal, adjoint, tapes, params, rank)
    # a parameter's shape as passed: of an array or a number (a list's items may differ)
    arrays = [p for p in params if type(rank(ast.Name(p, ast.Load()))) is int]
    proof.walk(primal, {p: ("of", p) for p in arrays}, 0)
    found = {}
    for tape, term in proof.pushed.items():
        if proof.counts.get(tape, 0) != 1 or term == SCALAR or _varying(term):
            continue  # (a number's push and pop are free already)
        parts = term[1] if term[0] == "broadcast" and term not in proof.witness else [term]
        if len(parts) <= WITNESSES and all(t in proof.witness for t in parts):
            found[tape] = sorted((proof.witness[t] for t in parts), key=ast.unparse)
    return found


def _varying(term) -> bool:
    """Whether `term` holds an atom a loop made (a shape that may change per iteration)."""
    return any(atom[2] for atom in _atoms(term))


def _atoms(term):
    """The atoms in `term`."""
    if term[0] == "atom":
        yield term
        return
    for part in term[1:]:
        for t in part if isinstance(part, frozenset) else (part,):
            if isinstance(t, tuple) and t and isinstance(t[0], str):
                yield from _atoms(t)


def _bound_names(nodes) -> dict[str, int]:
    """How many times each name is bound in `nodes`: once a binding, as `names.assign_counts`
    counts, but of every kind (`x += 1`, whose target is a store too, a loop's target, a
    comprehension's)."""
    counts: dict[str, int] = {}
    for node in nodes:
        for n in walk_nodes(node):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                counts[n.id] = counts.get(n.id, 0) + 1
    return counts


class _Proof:
    """One walk of the primal, keeping each name's term (`env`), the terms of the pushes
    (`pushed`: tape -> term) and, for each term, the first expression of the parameters as
    passed that has it (`witness`)."""

    def __init__(self, primal, adjoint, tapes, params, rank):
        self.tapes, self.rank, self.params = tapes, rank, set(params)
        bound = _bound_names(primal + adjoint)
        top_bound = _bound_names([s for s in primal if isinstance(s, ast.Assign)])
        in_place = written_in_place(primal + adjoint)
        # numbers an index may read (bounds of a slice): bound once, at the top, or parameters
        # never bound, and never written into
        once = {n for n, c in bound.items() if c == 1 and top_bound.get(n) == 1}
        self.values = {
            n
            for n in once | (self.params - set(bound))
            if n not in in_place and rank(ast.Name(n, ast.Load())) == 0
        }
        self.ints = _integer_names(primal)
        self.counts: dict[str, int] = {}
        for node in primal:
            for n in walk_nodes(node):
                tape = _pushed_tape(n, tapes)
                if tape is not None:
                    self.counts[tape] = self.counts.get(tape, 0) + 1
        self.pushed: dict = {}
        self.witness: dict = {("of", p): ast.Name(p, ast.Load()) for p in params}
        self.atoms = itertools.count()

    def atom(self, depth: int) -> tuple:
        return ("atom", next(self.atoms), depth > 0)

    # ------------------------------------------------------------------ statements
    def walk(self, block: list, env: dict, depth: int) -> dict:
        """`env` after `block` (updated in place and returned)."""
        for stmt in block:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                target = stmt.targets[0]
                if isinstance(target, ast.Name):
                    env[target.id] = self.term(stmt.value, env, depth)
                    continue
            if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
                old = env.get(stmt.target.id) or self.atom(depth)
                env[stmt.target.id] = _broadcast([old, self.term(stmt.value, env, depth)])
            elif isinstance(stmt, ast.Expr):
                tape = _pushed_tape(stmt, self.tapes)
                if tape is not None:
                    value = self.tapes[tape]
                    self.pushed[tape] = self._term(ast.Name(value, ast.Load()), env, depth)
            elif isinstance(stmt, ast.If):
                self._branches(stmt, env, depth)
            elif isinstance(stmt, (ast.For, ast.While)):
                self._loop(stmt, env, depth)
            else:  # anything else binds what it binds to shapes nothing is known about
                for name in _bound_names([stmt]):
                    env[name] = self.atom(depth)
        return env

    def _branches(self, stmt: ast.If, env: dict, depth: int) -> None:
        body = self.walk(stmt.body, dict(env), depth)
        orelse = self.walk(stmt.orelse, dict(env), depth)
        for name in set(body) | set(orelse):
            a, b = body.get(name), orelse.get(name)
            env[name] = a if a == b or b is None else b if a is None else self.atom(depth)

    def _loop(self, stmt, env: dict, depth: int) -> None:
        """The loop's names. A carried name enters the first iteration with its term before the
        loop and each later one with its term after the first (the steady term), where the body
        gives it that steady term again (an induction, repeated with fewer such names until it
        holds; any other carried name is an atom of the loop's). The body is walked for the
        first iteration and, where a steady term differs, for the later ones: a push records
        one shape where both walks give it one term (`-k * y` of a state `y = y0` that the
        step widens to the broadcast of y0 and k). After the loop, a name keeps a term every
        iteration count (none too) agrees on."""
        assigned = set(_bound_names(stmt.body + stmt.orelse))
        target = _range_target(stmt)
        # an iteration cut short leaves its names as they were mid-body: nothing is carried
        jumps = any(isinstance(n, _JUMPS) for s in stmt.body for n in walk_nodes(s))
        carried = set() if jumps else {n for n in assigned if n in env} - {target}
        mark = next(self.atoms)  # (atoms made after it are the loop's)
        start = {n: env[n] for n in carried}
        first = end = self.walk(stmt.body, self._entered(stmt, env, start, depth), depth + 1)
        pushes = dict(self.pushed)
        steady = {n: first[n] for n in carried if not _made_after(first[n], mark)}
        while steady != start:  # the later iterations
            end = self.walk(stmt.body, self._entered(stmt, env, steady, depth), depth + 1)
            kept = {n: t for n, t in steady.items() if end.get(n) == t}
            if kept == steady:
                break
            steady = kept
        for tape, term in self.pushed.items():
            if pushes.get(tape) != term:
                self.pushed[tape] = self.atom(depth + 1)
        for name in assigned | set(
            _bound_names([stmt.target]) if isinstance(stmt, ast.For) else ()
        ):
            before, after = env.get(name), end.get(name)
            kept = not jumps and first.get(name) == after and before in (None, after)
            env[name] = after if kept else self.atom(depth)
        self.walk(stmt.orelse, env, depth)

    def _entered(self, stmt, env: dict, carried: dict, depth: int) -> dict:
        """The names at the start of an iteration of the loop `stmt`: `carried` with the terms
        given, the loop's target a number, any other name the body binds an atom of the loop's."""
        inner = {**env, **carried}
        for name in set(_bound_names(stmt.body + stmt.orelse)) - set(carried):
            inner[name] = self.atom(depth + 1)
        if isinstance(stmt, ast.For):
            target = _range_target(stmt)
            for name in _bound_names([stmt.target]):
                inner[name] = SCALAR if name == target else self.atom(depth + 1)
        return inner

    # ------------------------------------------------------------------ expressions
    def term(self, node, env: dict, depth: int) -> tuple:
        found = self._term(node, env, depth)
        if self._evaluable(node, env):
            self.witness.setdefault(found, node)
        return found

    def _term(self, node, env: dict, depth: int) -> tuple:
        if isinstance(node, ast.Constant):
            return SCALAR if isinstance(node.value, (int, float, bool)) else self.atom(depth)
        if isinstance(node, ast.Name):
            if self.rank(node) == 0 or node.id in self.ints:
                return SCALAR
            return env[node.id] if node.id in env else self.atom(depth)
        if isinstance(node, ast.UnaryOp):
            return self.term(node.operand, env, depth)
        if isinstance(node, ast.BinOp) and not isinstance(node.op, ast.MatMult):
            return _broadcast([self.term(node.left, env, depth), self.term(node.right, env, depth)])
        if isinstance(node, ast.Compare) and len(node.comparators) == 1:
            operands = [node.left, node.comparators[0]]
            return _broadcast([self.term(o, env, depth) for o in operands])
        if isinstance(node, ast.Subscript):
            return self._indexed(node, env, depth)
        if isinstance(node, ast.Call):
            return self._called(node, env, depth)
        return self.atom(depth)

    def _called(self, node: ast.Call, env: dict, depth: int) -> tuple:
        name, args = text_of(node.func), node.args
        if isinstance(node.func, ast.Attribute) and node.func.attr in _METHODS:
            return self.term(node.func.value, env, depth)  # `x.copy()`, `x.astype(t)`
        if not args or any(k.arg in ("shape", "out") for k in node.keywords):
            return self.atom(depth)
        if name in UFUNCS and not node.keywords:
            return _broadcast([self.term(a, env, depth) for a in args])
        if name in _LIKE or name in _SAME:
            return self.term(args[0], env, depth)
        if name in _OF_SHAPE:
            shape = args[0]
            if isinstance(shape, ast.Attribute) and shape.attr == "shape":
                return self.term(shape.value, env, depth)
            return self.atom(depth)
        if name == "in_place" and len(args) > 1:  # `x op= v`: x's shape (else it raises)...
            kept = self.term(args[1], env, depth)
            return kept if kept != () else self.term(args[0], env, depth)  # (...or a number's)
        if name in SHAPED_LIKE and len(args) > SHAPED_LIKE[name] and not node.keywords:
            return self.term(args[SHAPED_LIKE[name]], env, depth)
        return self.atom(depth)

    def _indexed(self, node: ast.Subscript, env: dict, depth: int) -> tuple:
        """A basic index: its base's term and one key an axis (`("less", k)` for a slice
        dropping k elements in all, `("int",)` for an integer, `("text", ...)` for a slice of
        fixed bounds); anything else an atom."""
        base = self.term(node.value, env, depth)
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        keys = []
        for part in parts:
            key = self._key(part)
            if key is None:
                return self.atom(depth)
            keys.append(key)
        if all(k == ("less", 0) for k in keys):
            return base
        return ("index", base, tuple(keys))

    def _key(self, part) -> tuple | None:
        if isinstance(part, ast.Slice):
            bounds = [_int_or_none(p) for p in (part.lower, part.upper)]
            step = _int_or_none(part.step)
            lower, upper = bounds
            if (
                step in (None, 1)
                and _OTHER not in (lower, upper)
                and (lower is None or lower >= 0)
                and (upper is None or upper < 0)
            ):  # max(n - lower + upper, 0) elements, exactly
                return ("less", (lower or 0) - (upper or 0))
            if all(p is None or self._fixed_value(p) for p in (part.lower, part.upper, part.step)):
                return ("text", ast.unparse(part))
            return None
        if type(_int_or_none(part)) is int or self._integer(part):
            return ("int",)
        if isinstance(part, ast.Constant) and part.value is None:
            return ("new",)
        if self._fixed_value(part):
            return ("text", ast.unparse(part))
        return None

    def _integer(self, node) -> bool:
        """An integer expression of loop indices and integers (an index that drops an axis)."""
        return _is_integer(node, self.ints)

    def _fixed_value(self, node) -> bool:
        """An expression of constants and numbers nothing reassigns or writes into."""
        if isinstance(node, ast.Constant):
            return isinstance(node.value, (int, float, bool)) or node.value is None
        if isinstance(node, ast.Name):
            return node.id in self.values
        if isinstance(node, ast.UnaryOp):
            return self._fixed_value(node.operand)
        if isinstance(node, ast.BinOp):
            return self._fixed_value(node.left) and self._fixed_value(node.right)
        return False

    def _evaluable(self, node, env: dict) -> bool:
        """A witness: a parameter holding the value passed, or slices of one by constant
        integers, as many as its axes at most (evaluated at the entry even where the loop
        never runs, it raises nothing the code would not)."""
        base = node.value if isinstance(node, ast.Subscript) else node
        if not (isinstance(base, ast.Name) and env.get(base.id) == ("of", base.id)):
            return False
        if base is node:
            return True
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        rank = self.rank(base)
        return (
            isinstance(rank, int)
            and len(parts) <= rank
            and all(
                isinstance(s, ast.Slice)
                and all(
                    type(_int_or_none(p)) in (int, type(None)) for p in (s.lower, s.upper, s.step)
                )
                and _int_or_none(s.step) != 0
                for s in parts
            )
        )


def _broadcast(terms: list) -> tuple:
    """The term of NumPy's broadcast of `terms`: a number's `()` drops out, equal terms are one,
    and a broadcast's own terms join the others' (broadcasting is associative: where it does
    not raise, the shape of `(a * b) * c` is that of `a * (b * c)`)."""
    kept = []
    for term in terms:
        for t in term[1] if term[0] == "broadcast" else (term,):
            if t != SCALAR and t not in kept:
                kept.append(t)
    if not kept:
        return SCALAR
    if len(kept) == 1:
        return kept[0]
    return ("broadcast", frozenset(kept))


def _made_after(term, mark: int) -> bool:
    """Whether `term` holds an atom made after the atom numbered `mark`."""
    return any(atom[1] > mark for atom in _atoms(term))


def _int_or_none(node):
    """A constant integer's value, None for none given, _OTHER for anything else."""
    if node is None or isinstance(node, ast.Constant) and node.value is None:
        return None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _int_or_none(node.operand)
        return -value if type(value) is int else _OTHER
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return _OTHER


def _range_target(stmt) -> str | None:
    """The name `for name in range(...)` binds, else None."""
    if (
        isinstance(stmt, ast.For)
        and isinstance(stmt.target, ast.Name)
        and isinstance(stmt.iter, ast.Call)
        and text_of(stmt.iter.func) == "range"
    ):
        return stmt.target.id
    return None


def _is_integer(node, ints: set) -> bool:
    if isinstance(node, ast.Constant):
        return type(node.value) is int
    if isinstance(node, ast.Name):
        return node.id in ints
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return _is_integer(node.operand, ints)
    if isinstance(node, ast.BinOp) and isinstance(node.op, _INT_OPS):
        return _is_integer(node.left, ints) and _is_integer(node.right, ints)
    if isinstance(node, ast.Subscript):  # `x.shape[k]`
        value = node.value
        shape = isinstance(value, ast.Attribute) and value.attr == "shape"
        return shape and _is_integer(node.slice, ints)
    return False


def _integer_names(primal) -> set[str]:
    """Names every binding of which is an integer: `range` loops' targets, and names assigned
    integer expressions of them (`W = 2 * j`), found by growing the set until it holds."""
    bindings: dict[str, list] = {}
    for node in primal:
        for n in walk_nodes(node):
            if isinstance(n, ast.For):
                target = _range_target(n)
                for name in _bound_names([n.target]):
                    bindings.setdefault(name, []).append("range" if name == target else None)
            elif isinstance(n, ast.Assign):
                plain = len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
                for name in _bound_names(n.targets):
                    bindings.setdefault(name, []).append(n.value if plain else None)
            elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
                value = ast.BinOp(n.target, n.op, n.value)
                bindings.setdefault(n.target.id, []).append(value)
            elif isinstance(n, (ast.With, ast.NamedExpr, ast.comprehension, ast.ExceptHandler)):
                for name in _bound_names([n]):
                    bindings.setdefault(name, []).append(None)
    ints = set(bindings)
    while True:
        kept = {
            name
            for name in ints
            if all(v == "range" or v is not None and _is_integer(v, ints) for v in bindings[name])
        }
        if kept == ints:
            return ints
        ints = kept


def _pushed_tape(node, tapes) -> str | None:
    """The tape of a statement `tape.append(shape_stub(x))` of one of `tapes`, else None."""
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
        return None
    func = node.value.func
    if (
        isinstance(func, ast.Attribute)
        and func.attr == "append"
        and isinstance(func.value, ast.Name)
        and func.value.id in tapes
    ):
        return func.value.id
    return None
