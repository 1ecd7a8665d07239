"""Stage 2: A-normal form. One operation per statement, and each name assigned once outside loops.

Only statements that touch differentiated values are split: an expression that does not depend on
the `wrt` inputs stays as the user wrote it. Temporaries are named after the assignment they come
from and the operation they hold (`loss_sub`, `loss_pow`); a re-assigned name gets a suffix
(`h`, `h_1`). Every statement keeps a link (`.src`) to the user's statement it came from.

Control flow stays structured (`if`, `for i in range(...)`, `while`):
- branches that assign the same variable merge into one name, assigned at the end of each branch;
- a variable a loop changes keeps its pre-loop name as the loop-carried value: the body computes
  `s_new` and copies it back (`s = s_new`) at the end of the body and before each `break`; a
  name the body assigns that did not exist before is live out of the loop only if it is read
  after the loop or read in the body before the body assigns it;
- a view of an array the function writes in place (`y[i]`, `y.T`, `y.reshape(...)`, any call
  not known to make a new array, or `y` itself under another name) is taken as a copy when it is read (`snapshot(...)`), so that a
  later write does not change what the adjoint reads back; a named view read after its array
  was written (where NumPy's view would show the write) is refused;
- `for row in x`, `enumerate` and `zip` become loops over an index;
- calls to the user's own functions (module-level, nested `def`s, lambdas) are inlined.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ..astcopy import clone, walk_nodes
from .. import rules, runtime
from ..rules.indexing import is_add_at
from ..rules.helpers import numba_names
from ..rules.registry import NAMESPACE
from ..errors import NameResolutionError, UnsupportedSyntaxError
from .parse import parse_function
from .resolve import Resolver, is_data
from .restructure import always_assigns, lift_returns, restructure_jumps

STATIC_ATTRS = {"shape", "ndim", "size", "dtype"}
_OPNAMES = {
    ast.Add: "add",
    ast.Sub: "sub",
    ast.Mult: "mul",
    ast.Div: "div",
    ast.Pow: "pow",
    ast.MatMult: "matmul",
    ast.Mod: "mod",
    ast.FloorDiv: "floordiv",
    ast.USub: "neg",
    ast.UAdd: "pos",
    ast.Not: "not",
}
_UNSUPPORTED_STMTS = {
    ast.Try: "`try` blocks",
    ast.With: "`with` blocks",
    ast.Raise: "`raise`",
    ast.ClassDef: "class definitions",
    ast.Global: "`global`",
    ast.Nonlocal: "`nonlocal`",
    ast.Import: "imports",
    ast.ImportFrom: "imports",
    ast.Delete: "`del`",
    ast.AsyncFunctionDef: "async functions",
    ast.Match: "`match` statements",
    ast.Break: "`break`",
    ast.Continue: "`continue`",
    ast.AsyncFor: "`async for`",
}
# What a value may share memory with is decided by an allowlist: a call is known to return a new
# array (or a scalar) only if it is below; any other call on arrays (np.flip, np.asarray, np.split,
# `y.view()`, `y.conj()`, a user's rule, ...) may return a view of its arguments or one of them
# itself, and is taken to do so.
_FRESH_FUNCS = {
    getattr(module, name)
    for module, names in (
        (
            np,
            "sum mean prod std var amax amin max min cumsum cumprod diff dot outer inner vdot "
            "trace tril triu roll sort argsort argmax argmin where clip concatenate stack hstack "
            "vstack dstack column_stack tile repeat kron cross copy zeros ones empty full "
            "zeros_like ones_like empty_like full_like eye identity arange linspace logspace "
            "allclose isclose array_equal count_nonzero nonzero round around tensordot "
            "median cov corrcoef histogram interp polyval convolve correlate take "
            "nansum nanmean nanmax nanmin ptp average",
        ),
        (np.linalg, "norm det inv solve slogdet pinv cholesky eigh svd qr lstsq"),
        (builtins, "float int bool abs len sum complex"),
    )
    for name in names.split()
    if hasattr(module, name)
}
_FRESH_METHODS = set(
    "copy sum mean prod std var max min cumsum cumprod dot round clip all any argmax argmin "
    "argsort tolist item flatten trace nonzero".split()
)  # `astype` too, unless given copy=False
_INERT_ATTRS = STATIC_ATTRS | {"itemsize", "nbytes", "strides", "size"}


# Every name generated code may use that is not the user's: NumPy and math, the runtime helpers
# (plain, batched and Numba's, whose module a jitted gradient imports with `*`; CUDA's), the
# builtins s2sad writes itself, and the pullback it defines. A user's name among them is renamed
# in the generated code (see `hygienic`), so nothing of the user's can shadow them nor they the
# user's.
RESERVED = (
    {"np", "math", "pullback", "range", "len", "reversed", "slice", "min", "max", "cuda", "np_sign"}
    | {
        n
        for n, v in vars(runtime).items()
        if not n.startswith("_") and callable(v) and not inspect.ismodule(v)
    }
    | numba_names()
)
_MODES = ("grad", "value_and_grad", "vjp", "jvp", "vjp_batched", "jvp_batched")


def reserved_names(func_name: str) -> set[str]:
    """RESERVED, the names of registered rules, and the functions a transform of `func_name`
    defines (`grad_f`, `vjp_f_sweep`, ...)."""
    defined = {f"{m}_{func_name}" for m in _MODES}
    return RESERVED | set(NAMESPACE) | defined | {f"{d}_sweep" for d in defined}


_OWN_LOCAL = object()


def s2sad_object(name: str):
    """What generated code means by the reserved `name` (a marker where it is a local of its
    own, or Numba's)."""
    for scope in (NAMESPACE, vars(runtime), {"np": np, "math": math}):
        if name in scope:
            return scope[name]
    return getattr(builtins, name, _OWN_LOCAL)


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


@dataclass
class Normalized:
    stmts: list[ast.stmt]  # see the module docstring for the statement forms
    outputs: list[str]  # the returned names (several for a tuple return)
    tuple_output: bool
    params: list[str]
    varied: set[str]  # names that may depend on the wrt inputs
    taken: set[str] = field(default_factory=set)  # every name in use, for later allocations


def _assigned_names(tree) -> set[str]:
    names = set()
    for node in walk_nodes(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def _assigned_in(stmts: list[ast.stmt]) -> list[str]:
    """User names a block rebinds, in order of first appearance."""
    names: dict[str, None] = {}
    for stmt in stmts:
        for node in walk_nodes(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.setdefault(node.id)
    return list(names)


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
        while name in self.taken:
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


def _copy_stmt(stmt: ast.Assign) -> ast.Assign:
    """A copy of a generated assignment that still points at the same user statement."""
    new = ast.Assign([clone(t) for t in stmt.targets], clone(stmt.value))
    new.src, new.src_parsed = stmt.src, stmt.src_parsed
    new.end_copy = getattr(stmt, "end_copy", False)
    return new


def _breaks(stmt: ast.stmt) -> bool:
    """Whether a `break` inside `stmt` (outside nested loops) leaves the enclosing loop."""
    if isinstance(stmt, ast.Break):
        return True
    if isinstance(stmt, ast.If):
        return any(_breaks(s) for s in stmt.body + stmt.orelse)
    return False


def _rename_in(stmts: list[ast.stmt], old: str, new: str) -> None:
    for stmt in stmts:
        for node in walk_nodes(stmt):
            if isinstance(node, ast.Name) and node.id == old:
                node.id = new
            for attr in ("header", "liveout", "merged"):
                names = getattr(node, attr, None)
                if names and old in names:
                    setattr(node, attr, [new if n == old else n for n in names])


def _makes_complex(node: ast.expr) -> bool:
    """Whether an expression brings in complex numbers: a literal like `1j`, `complex(...)`, or a
    complex dtype (`np.complex128`, `dtype="complex64"`). The rules are those of real calculus
    (`abs`, for one, would give the wrong sign), so such a value is refused, not differentiated."""
    for n in walk_nodes(node):
        if isinstance(n, ast.Constant) and (
            isinstance(n.value, complex) or (isinstance(n.value, str) and "complex" in n.value)
        ):
            return True
        if (isinstance(n, ast.Name) and n.id == "complex") or (
            isinstance(n, ast.Attribute)
            and n.attr.startswith(("complex", "clongdouble", "csingle", "cdouble"))
        ):
            return True
    return False


def _rebinding(node: ast.AugAssign) -> str:
    """`z += v` spelled as the assignment of a new value, `z = z + v`."""
    value = ast.BinOp(ast.Name(node.target.id, ast.Load()), node.op, node.value)
    return f"{node.target.id} = {ast.unparse(value)}"


def _snapshot_of(rhs: ast.expr) -> ast.Call:
    func = ast.Name("snapshot", ast.Load())
    func.s2sad_callee = runtime.snapshot
    return ast.Call(func, [rhs], [])


def _loads(node) -> set[str]:
    return {
        n.id for n in walk_nodes(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    }


def _exposed(stmts: list[ast.stmt], bound: set[str], out: set[str]) -> set[str] | None:
    """Adds to `out` the names `stmts` may read before assigning them (given the names in
    `bound` are assigned); returns the names surely assigned after the block (None when every
    path leaves it by `break`)."""
    bound = set(bound)
    for stmt in stmts:
        if isinstance(stmt, ast.Break):
            return None
        if isinstance(stmt, ast.If):
            out |= _loads(stmt.test) - bound
            after = [_exposed(branch, bound, out) for branch in (stmt.body, stmt.orelse)]
            after = [a for a in after if a is not None]
            if not after:
                return None
            bound = set.intersection(*after)
        elif isinstance(stmt, (ast.For, ast.While)):
            head = stmt.iter if isinstance(stmt, ast.For) else stmt.test
            out |= _loads(head) - bound
            inner = set(bound) | ({stmt.target.id} if isinstance(stmt, ast.For) else set())
            _exposed(stmt.body, inner, out)  # may run no iteration: assigns nothing for sure
        else:
            out |= _loads(stmt) - bound
            for t in getattr(stmt, "targets", []):
                if not isinstance(t, ast.Subscript):  # y[i] = v reads y, binds nothing
                    bound |= {n.id for n in walk_nodes(t) if isinstance(n, ast.Name)}
    return bound


def _drop_unread_copies(stmts: list[ast.stmt], outputs: set[str]) -> None:
    """Remove the copies (`merged = old` ending a branch, `carried = last` ending an iteration)
    whose value nothing reads afterwards: dead code, which would also fail where the old value
    may not exist (the last value of a loop that ran no iteration, a name only one branch
    assigned) though Python reads nothing there. A copy counts as read only where a statement
    other than a dead copy reads it, so copies that only feed each other around a loop (a name
    each iteration assigns before reading it) go too."""
    needed: set[int] = set()
    _live_before(stmts, set(outputs), set(outputs), needed)
    _drop_copies_in(stmts, needed)


def _is_copy(stmt: ast.stmt) -> bool:
    return getattr(stmt, "merge_copy", False) or getattr(stmt, "end_copy", False)


def _live_before(block: list[ast.stmt], live: set[str], at_exit: set[str], needed: set) -> set:
    """The names `block` may read before assigning them, given those in `live` are read after it
    and those in `at_exit` after the innermost loop (a `break`). Adds to `needed` the ids of the
    copies whose target is read later; a copy nothing reads reads nothing itself."""
    live = set(live)
    for stmt in reversed(block):
        if isinstance(stmt, ast.Break):
            live = set(at_exit)
        elif isinstance(stmt, ast.If):
            live = (
                _live_before(stmt.body, live, at_exit, needed)
                | _live_before(stmt.orelse, live, at_exit, needed)
                | _loads(stmt.test)
            )
        elif isinstance(stmt, (ast.For, ast.While)):
            live = _live_around_loop(stmt, live, needed)
        elif _is_copy(stmt):
            target = stmt.targets[0].id
            if target in live:
                needed.add(id(stmt))
                live = (live - {target}) | _loads(stmt.value)
        elif isinstance(stmt, ast.Assign):
            bound = {
                n.id
                for t in stmt.targets
                if not isinstance(t, ast.Subscript)  # y[i] = v reads y, binds nothing
                for n in walk_nodes(t)
                if isinstance(n, ast.Name)
            }
            live = (live - bound) | _loads(stmt)
        else:
            live |= _loads(stmt)
    return live


def _live_around_loop(loop, after: set[str], needed: set) -> set[str]:
    """Names live before a loop: those read after it, by its header, or by an iteration before
    the iteration assigns them (grown from those read after it until nothing is added, so
    copies that only feed each other stay unread)."""
    head = set(after) | (_loads(loop.test) if isinstance(loop, ast.While) else set())
    while True:
        body = _live_before(loop.body, head, after, needed)
        if isinstance(loop, ast.For):
            body -= {loop.target.id}
        grown = head | body
        if grown == head:
            break
        head = grown
    return head | (_loads(loop.iter) if isinstance(loop, ast.For) else set())


def _drop_copies_in(block: list[ast.stmt], needed: set[int]) -> None:
    """Drop the unneeded copies, and the names they alone assigned from the loops' carried
    names and the `if`s' merged ones."""
    block[:] = [s for s in block if not _is_copy(s) or id(s) in needed]
    for stmt in block:
        for field_ in ("body", "orelse"):
            inner = getattr(stmt, field_, None)
            if isinstance(inner, list):
                _drop_copies_in(inner, needed)
        if isinstance(stmt, (ast.For, ast.While)) and getattr(stmt, "header", None):
            assigned = _assigned_names(ast.Module(stmt.body, []))
            stmt.header = [n for n in stmt.header if n in assigned]
        elif isinstance(stmt, ast.If) and getattr(stmt, "merged", None):
            # a name one path no longer assigns is no merge: nothing reads it after the `if`
            # (the tape records it where it is assigned)
            stmt.merged = [
                n
                for n in stmt.merged
                if _surely_assigns(stmt.body, n) and _surely_assigns(stmt.orelse, n)
            ]


def _surely_assigns(block: list[ast.stmt], name: str) -> bool:
    """Whether every path through `block` that reaches its end (or a `break`) assigns `name`."""
    for stmt in block:
        if isinstance(stmt, ast.Break):
            return True
        if isinstance(stmt, ast.Assign) and any(
            isinstance(n, ast.Name) and n.id == name
            for t in stmt.targets
            if not isinstance(t, ast.Subscript)
            for n in walk_nodes(t)
        ):
            return True
        if (
            isinstance(stmt, ast.If)
            and _surely_assigns(stmt.body, name)
            and _surely_assigns(stmt.orelse, name)
        ):
            return True
    return False


def _prune_liveout(stmts: list[ast.stmt], outputs: set[str]) -> None:
    """Keep in each loop's `liveout` only the names whose last value the rest of the function
    may read: read outside the loop, or read in the body before it assigns them (a value from an
    earlier iteration). The others are local to each iteration, which matters where no
    iteration assigns them (a path skipped by `continue`): nothing may read them then."""
    loops = [n for n in walk_nodes(ast.Module(stmts, [])) if isinstance(n, (ast.For, ast.While))]
    every = Counter()
    for node in walk_nodes(ast.Module(stmts, [])):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            every[node.id] += 1
    for loop in loops:
        if not getattr(loop, "liveout", None):
            continue
        inside = Counter()
        for node in loop.body:
            for n in walk_nodes(node):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                    inside[n.id] += 1
        exposed: set[str] = set()
        if isinstance(loop, ast.While):
            exposed |= _loads(loop.test)
        _exposed(loop.body, {loop.target.id} if isinstance(loop, ast.For) else set(), exposed)
        loop.liveout = [
            n for n in loop.liveout if n in outputs or n in exposed or every[n] > inside[n]
        ]


class Normalizer:
    def __init__(
        self,
        parsed,
        wrt: list[str],
        parent: Normalizer | None = None,
        env: dict[str, str] | None = None,
        extra_locals: set[str] = frozenset(),
        index: int | None = None,
    ):
        self.parsed = parsed
        self.locals = set(parsed.params) | _assigned_names(parsed.tree) | set(extra_locals)
        if parent is None:
            self.resolver = Resolver(parsed, self.locals)
            all_names = {n.id for n in walk_nodes(parsed.tree) if isinstance(n, ast.Name)}
            reserved = reserved_names(parsed.name)
            self.names = NameAllocator(all_names | set(parsed.params) | reserved)
            self.resolver.hygiene(reserved, self.names, self.locals)
            self.varied = set(wrt)
            self.inlining: list[object] = []
            self.loop_varied: set[str] = set()
        else:
            self.resolver = Resolver(parsed, self.locals, parent=parent.resolver, index=index)
            self.names = parent.names
            self.names.taken |= {n.id for n in walk_nodes(parsed.tree) if isinstance(n, ast.Name)}
            self.varied = parent.varied
            self.inlining = parent.inlining
            self.loop_varied = set()
        self.env = dict(env) if env is not None else {p: p for p in parsed.params}
        self.inlined = parent is not None  # inlined code takes fresh names for its locals
        self.local_funcs: dict[str, ast.AST] = {}
        # per nested def or lambda (by id): its defaults, as evaluated where it stands
        self.local_defaults: dict[int, dict[str, ast.expr]] = (
            parent.local_defaults if parent is not None else {}
        )
        self.aliases: dict[str, str] = {}  # SSA name -> the expression it may alias
        self.written = {
            t.value.id
            for t in walk_nodes(parsed.tree)  # arrays written in place
            if isinstance(t, ast.Subscript)
            and isinstance(t.ctx, ast.Store)
            and isinstance(t.value, ast.Name)
        } | _scatter_adds_as_assignments(parsed.tree, self.resolver, self.locals)
        self.maybe_undefined: set[str] = set()  # names that some path leaves unassigned
        self.pending_alias: str | None = None
        self.views: dict[str, str] = {}  # user name -> the written array it was bound as a view of
        self.stale: set[str] = set()  # ... of which the array has been written since
        # In-place arithmetic on a name (`z += v`) writes into an ndarray, which every name
        # sharing its memory sees; s2sad makes it a new value (`z_1 = z + v`), which is right
        # only where no other live name shares the memory, or where `z` is a scalar. So:
        self.sharing: dict[str, set[str]] = {}  # user name -> locals whose memory it may share
        self.shared_by: dict[str, set[str]] = {}  # the reverse (may hold names since rebound)
        # user name -> (SSA name of the array written, the write, its user name) for names
        # sharing memory with an array written by `op=` since they were bound: reading one is a
        # hazard
        self.aug_stale: dict[str, tuple[str, ast.stmt, str]] = {}
        # (SSA name, node, message, hint): refused unless that value is known to be a scalar,
        # which only the ranks after normalization tell
        self.hazards: list[tuple[str, ast.AST, str, str]] = (
            parent.hazards if parent is not None else []
        )
        self.ranks = None  # the arguments' ranks, as pairs (set by `normalize`)
        # an inlined function's parameters that are the caller's arrays (or views of them):
        # the caller's expression and the names it shares memory with
        self.param_sources: dict[str, tuple[str, set[str]]] = {}
        self.headers: list[set[str]] = []  # user names carried by each enclosing loop
        self.out: list[ast.stmt] = []
        self.src: ast.stmt | None = None
        self.exit_copies: list[tuple[dict, ...]] = []  # per enclosing loop: (header map,)
        self._varied_memo: dict[int, tuple] | None = None  # see mentions_varied

    # ------------------------------------------------------------------ driving
    def run(self) -> Normalized:
        body = self.function_body(self.parsed.tree.body)
        result = self.names.fresh(self.parsed.name)
        body, arity = self.lift(body, result)
        self.locals |= {result} | {f"{result}{i}" for i in range(arity)}
        self.mark_loop_varied(body)  # a name that varies anywhere is split from the start
        self.out = []
        self.block_into(self.out, body)
        if arity:
            outputs = [self.env[f"{result}{i}"] for i in range(arity)]
        else:
            outputs = [self.env[result]]
        _drop_unread_copies(self.out, set(outputs))
        self.check_hazards()  # (ranks of what remains: a dead copy may not tell a rank)
        _prune_liveout(self.out, set(outputs))
        return Normalized(
            self.out, outputs, bool(arity), list(self.parsed.params), self.varied, self.names.taken
        )

    def check_hazards(self) -> None:
        """Refuse the first in-place write through shared memory (see `in_place`) whose array
        is not known to be a scalar for the arguments' ranks."""
        if not self.hazards:
            return
        from .ranks import infer_ranks  # (ranks reads ops, which reads this module)

        shapes = infer_ranks(self.out, dict(self.ranks or {}))
        for name, node, message, hint in self.hazards:
            if shapes.get(name) != 0:
                raise self.parsed.error(UnsupportedSyntaxError, message, node, hint=hint)

    def function_body(self, body: list[ast.stmt]) -> list[ast.stmt]:
        if (
            body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            body = body[1:]  # docstring
        return body

    def lift(self, body: list[ast.stmt], result: str) -> tuple[list[ast.stmt], int]:
        """Lift returns into assignments of `result` (or result0, result1, ... for tuples)."""
        returns = [
            n
            for s in body
            for n in walk_nodes(s)
            if isinstance(n, ast.Return) and not self._in_nested_def(body, n)
        ]
        if not returns or any(r.value is None for r in returns):
            node = next((r for r in returns if r.value is None), body[-1] if body else None)
            raise self.parsed.error(
                UnsupportedSyntaxError,
                f"{self.parsed.name} must return a value",
                node,
                hint="s2sad differentiates the returned value",
            )
        arities = {len(r.value.elts) if isinstance(r.value, ast.Tuple) else 0 for r in returns}
        if len(arities) > 1:
            raise self.parsed.error(
                UnsupportedSyntaxError,
                "all returns must give the same number of values",
                returns[-1],
            )
        arity = arities.pop()
        target = (
            ast.Tuple([ast.Name(f"{result}{i}", ast.Store()) for i in range(arity)], ast.Store())
            if arity
            else ast.Name(result, ast.Store())
        )
        lifted = lift_returns(body, target, self.parsed)
        check = f"{result}0" if arity else result
        if not always_assigns(lifted, check):
            raise self.parsed.error(
                UnsupportedSyntaxError,
                f"{self.parsed.name} does not return a value on every path",
                body[-1] if body else None,
                hint="end every branch with a `return`",
            )
        return lifted, arity

    @staticmethod
    def _in_nested_def(body, node) -> bool:
        for stmt in body:
            for inner in walk_nodes(stmt):
                if isinstance(inner, (ast.FunctionDef, ast.Lambda)) and any(
                    n is node for n in walk_nodes(inner)
                ):
                    return True
        return False

    def block_into(self, out: list[ast.stmt], stmts: list[ast.stmt]) -> None:
        saved, saved_src = self.out, self.src
        self.out = out
        for node in stmts:
            if not getattr(node, "s2sad_synthetic", False):
                self.src = node
            self.statement(node)
        self.out, self.src = saved, saved_src

    # ------------------------------------------------------------------ statements
    def statement(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Assign):
            first = self.assign_target(node.targets[0], node.value)
            for target in node.targets[1:]:
                self.assign_target(target, first)
        elif isinstance(node, ast.AnnAssign):
            if node.value is not None:
                self.assign_target(node.target, node.value)
        elif isinstance(node, ast.AugAssign):
            if isinstance(node.target, ast.Name):
                self.in_place(node)
            load = clone(node.target)
            for n in walk_nodes(load):
                if hasattr(n, "ctx"):
                    n.ctx = ast.Load()
            self.assign_target(
                node.target, ast.copy_location(ast.BinOp(load, node.op, node.value), node)
            )
        elif isinstance(node, (ast.Expr, ast.Assert)):
            if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
                self.emit_expr(node)
        elif isinstance(node, ast.Pass):
            pass
        elif isinstance(node, ast.If):
            self.if_(node)
        elif isinstance(node, ast.For):
            self.for_(node)
        elif isinstance(node, ast.While):
            self.while_(node)
        elif isinstance(node, ast.FunctionDef):
            if node.decorator_list:
                raise self.unsupported(node, "decorated nested functions")
            self.local_funcs[node.name] = node
            self.evaluate_defaults(node)
        elif isinstance(node, ast.Return):
            raise self.unsupported(node, "this `return`")
        else:
            what = _UNSUPPORTED_STMTS.get(type(node), type(node).__name__)
            raise self.unsupported(node, what)

    def unsupported(self, node: ast.AST, what: str):
        return self.parsed.error(
            UnsupportedSyntaxError,
            f"s2sad cannot differentiate {what} yet",
            node,
            hint="rewrite this part in plain NumPy, or give the function containing it "
            "a rule with s2sad.register_vjp",
        )

    def emit_expr(self, node: ast.stmt) -> None:
        call = node.value if isinstance(node, ast.Expr) else None
        if (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == "append"
            and isinstance(call.func.value, ast.Name)
            and call.func.value.id in self.locals
            and not call.keywords
            and any(not self.is_atom(a) and self.mentions_varied(a) for a in call.args)
        ):
            # a value pushed on a list (a tape of s2sad's own gradient code) gets a name, so
            # that forward mode carries its tangent onto the list of tangents
            base = call.func.value.id
            args = [
                self.atom(a, base) if self.mentions_varied(a) else self.rename(a) for a in call.args
            ]
            node = ast.Expr(ast.Call(self.rename(call.func), args, []))
            self.put(node)
            return
        self.put(self.rename(node))

    def put(self, stmt: ast.stmt) -> ast.stmt:
        stmt.src = self.src
        stmt.src_parsed = self.parsed
        self.out.append(stmt)
        return stmt

    def assign_target(self, target: ast.expr, value: ast.expr) -> ast.expr:
        """Assign `value` to `target`; returns an atom holding the value."""
        if isinstance(target, ast.Name):
            alias = ast.unparse(value) if self.may_alias(value) else None
            if isinstance(value, ast.Lambda):
                self.local_funcs[target.id] = value
                self.evaluate_defaults(value)
                return ast.Constant(None)
            if getattr(value, "s2sad_scatter", False):
                self.written_now({target.id})  # in Python, np.add.at wrote into the array
            viewed = self.written_view(value)
            shared = self.shared_bases(value)
            start = len(self.out)
            rhs = self.expr(value, target.id)  # may read the target: as the view it was
            self.views.pop(target.id, None)
            self.stale.discard(target.id)
            self.aug_stale.pop(target.id, None)
            self.unshare(target.id)
            self.share(target.id, shared)
            if isinstance(rhs, ast.Name) and getattr(rhs, "s2sad_inlined", False):
                name = self.rebind(target.id)  # the inlined result takes the user's name
                _rename_in(self.out[start:], rhs.id, name)
                if rhs.id in self.varied:
                    self.varied.add(name)
                if getattr(rhs, "s2sad_alias", None):
                    self.aliases[name], shared = rhs.s2sad_alias
                    self.share(target.id, shared)
                return ast.Name(name, ast.Load())
            if isinstance(rhs, ast.Tuple) and getattr(rhs, "s2sad_inlined", False):
                rhs = ast.Tuple(rhs.elts, ast.Load())
            if viewed is not None:
                # a view of an array written in place later: the values as they are now (a read
                # after the write is refused, see `load`)
                self.views[target.id] = viewed
                rhs = _snapshot_of(rhs)
            self.pending_alias = alias  # (after the right-hand side, which may bind names)
            return self.bind(
                target.id, rhs, varied=self.atom_varied(rhs) or self.mentions_varied(value)
            )
        if isinstance(target, (ast.Tuple, ast.List)) and all(
            isinstance(t, ast.Name) for t in target.elts
        ):
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
                shared = [self.shared_bases(v) for v in value.elts]
                atoms = [self.atom(v, t.id) for t, v in zip(target.elts, value.elts)]
                for t, v, a, bases in zip(target.elts, value.elts, atoms, shared):
                    if self.may_alias(v):  # `a, b = y, z`: `a` is `y`
                        self.pending_alias = ast.unparse(v)
                    self.bind(t.id, a, varied=self.atom_varied(a))
                    self.pending_alias = None
                    self.stale.discard(t.id)
                    self.aug_stale.pop(t.id, None)
                    self.unshare(t.id)
                    self.share(t.id, bases)
                return ast.Tuple(atoms, ast.Load())
            shared = self.shared_bases(value)  # `a, b = np.split(y, 2)`, `a, b = y`
            whole = self.atom(value, "_".join(t.id for t in target.elts))
            names = [t.id for t in target.elts]
            for name in names:
                self.stale.discard(name)
                self.aug_stale.pop(name, None)
                self.unshare(name)
            if isinstance(whole, ast.Tuple) and len(whole.elts) == len(target.elts):
                for t, a in zip(target.elts, whole.elts):
                    self.bind(t.id, a, varied=self.atom_varied(a))
                elements = getattr(whole, "s2sad_alias_elts", None)
                self.unpacked_sharing(names, elements, ast.unparse(value))
                return whole
            if not self.atom_varied(whole):
                stmt = ast.Assign(
                    [
                        ast.Tuple(
                            [ast.Name(self.rebind(t.id), ast.Store()) for t in target.elts],
                            ast.Store(),
                        )
                    ],
                    whole,
                )
                self.put(stmt)
            else:
                for i, t in enumerate(target.elts):
                    item = ast.Subscript(whole, ast.Constant(i), ast.Load())
                    self.bind(t.id, item, varied=True)
            if shared:
                text = ast.unparse(value)
                self.unpacked_sharing(names, [(None, (text, shared))] * len(names), text)
            return whole
        if (
            isinstance(target, ast.Subscript)
            and isinstance(target.value, ast.Name)
            and target.value.id in self.locals
        ):
            base = self.load(target.value)
            if base.id in self.aliases:
                raise self.parsed.error(
                    UnsupportedSyntaxError,
                    f"`{target.value.id}` may share memory with another array (it was assigned "
                    f"from `{self.aliases[base.id]}`); s2sad does not follow writes through "
                    "such aliases",
                    self.src,
                    hint=f"write into a copy (`{target.value.id} = ....copy()`) or into the "
                    "original array",
                )
            index = self.index(target.slice, target.value.id)
            atom = self.atom(value, target.value.id)
            stmt = ast.Assign([ast.Subscript(base, index, ast.Store())], atom)
            self.put(stmt)
            if self.atom_varied(atom):
                self.varied.add(base.id)
            self.written_now({target.value.id})
            return atom
        raise self.unsupported(self.src, "assignment to this kind of target")

    def shared_bases(self, value: ast.expr) -> set[str]:
        """The local user names whose memory `value` may share (see `memory_roots`), and,
        through them, what those names share."""
        return {b for n in self.memory_roots(value) for b in {n} | self.sharing.get(n, set())}

    def memory_roots(self, node: ast.expr, whole: bool = True) -> set[str]:
        """The local names `node` may be, or be a view of. Conservative: arithmetic and the calls
        known to make new arrays (`_FRESH_FUNCS`, `_FRESH_METHODS`) share nothing; a name, a
        subscript, an attribute such as `.T` or `.real`, either value of `a if c else b`, an
        element of a tuple or list, and what any other call returns may be (a view of) every
        array it reads. A call of the user's own function as the `whole` right-hand side is
        followed by inlining (see `_run_inlined`)."""
        if isinstance(node, ast.Name):
            return {node.id} if node.id in self.locals else set()
        if isinstance(node, ast.Attribute):
            return set() if node.attr in _INERT_ATTRS else self.memory_roots(node.value, False)
        if isinstance(node, (ast.Subscript, ast.Starred, ast.NamedExpr)):
            return self.memory_roots(node.value, False)
        if isinstance(node, ast.IfExp):
            parts = [node.body, node.orelse]
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            parts = node.elts
        elif isinstance(node, ast.BoolOp):  # `a or b` is one of them
            parts = node.values
        elif isinstance(node, ast.Call):
            func = node.func
            try:
                inlined = whole and self.inlinable(func) is not None
                if inlined or self.fresh_call(node):
                    return set()
                method = isinstance(func, ast.Attribute) and self.resolver.resolve(func) is None
            except NameResolutionError:  # (reported where the call is normalized)
                method = False
            parts = ([func.value] if method else []) + node.args + [k.value for k in node.keywords]
        else:
            return set()  # arithmetic, comparisons, constants: new values
        return {n for part in parts for n in self.memory_roots(part, False)}

    def fresh_call(self, node: ast.Call) -> bool:
        """Whether the call is known to return a new array (or a scalar), never an argument or
        a view of one."""
        keywords = {k.arg: k.value for k in node.keywords}
        if "out" in keywords:
            return False
        copy = keywords.get("copy")
        copies = copy is None or (isinstance(copy, ast.Constant) and copy.value is True)
        func = node.func
        if isinstance(func, ast.Name) and func.id in self.local_funcs:
            return False  # (inlined, or a local function value: its result may be anything)
        if isinstance(func, ast.Attribute) and self.resolver.resolve(func) is None:
            return func.attr in _FRESH_METHODS or (func.attr == "astype" and copies)
        callee = self.resolver.resolve(func)
        if callee is np.array:
            return copies
        if callee is np.diff:  # `np.diff(a, 0)` is `a` itself
            n = node.args[1] if len(node.args) > 1 else keywords.get("n", ast.Constant(1))
            return isinstance(n, ast.Constant) and n.value != 0
        if callee is np.einsum:  # one operand may give a view (`np.einsum("ii->i", a)`)
            operands = len(node.args) - isinstance(node.args[0], ast.Constant) if node.args else 0
            return operands > 1
        module = getattr(callee, "__module__", None) or ""
        if module.split(".")[0] == "s2sad":
            return True  # runtime helpers in the code s2sad writes (normalized again)
        if isinstance(callee, np.ufunc) or module == "math":
            return True
        try:
            return callee in _FRESH_FUNCS
        except TypeError:  # unhashable
            return False

    def unpacked_sharing(self, names: list[str], elements, text: str) -> None:
        """`names = text` (`a, b = ...`) has bound `names`; `elements` gives, per name, a pair:
        the index of an earlier name whose memory it may share (`h, out = cell(x)` returning
        one array twice) or None, and what else it may share, (the expression, the locals), or
        None."""
        for name, (same, memory) in zip(names, elements or ()):
            if same is not None:  # either may be written and the other read
                other = names[same]
                self.aliases[self.env[name]] = text
                self.aliases.setdefault(self.env[other], text)
                self.share(other, self.sharing.get(other, set()) | {name})
                self.share(name, self.sharing.get(name, set()) | {other})
            if memory is not None:
                self.aliases[self.env[name]] = memory[0]
                self.share(name, self.sharing.get(name, set()) | memory[1])

    def unshare(self, name: str) -> None:
        """`name` is bound to a new value: it shares nothing yet, and a later write into it is
        not one into the memory other names were bound from. (Their sets are replaced, not
        changed, and `shared_by` is kept: an `if` restores `sharing` for its other branch.)"""
        self.sharing.pop(name, None)
        for other in self.shared_by.get(name, ()):
            if name in self.sharing.get(other, ()):
                self.sharing[other] = self.sharing[other] - {name}

    def share(self, name: str, bases: set[str]) -> None:
        """`name` now holds a value that may share memory with the locals `bases`."""
        if bases:
            self.sharing[name] = bases
            for base in bases:
                self.shared_by.setdefault(base, set()).add(name)

    def in_place(self, node: ast.AugAssign) -> None:
        """`z op= v` on a name: where `z` is an array, NumPy writes into it. That is what s2sad
        computes (a new value of `z`) unless the memory is shared: `z` was bound from another
        array (`z = y`, `z = y[1:]`, a parameter of an inlined function), or another name bound
        from `z` is read after the write. Those cases are refused unless `z` is a scalar."""
        target = node.target.id
        current = self.env.get(target)
        if current is None:
            return  # (load reports the name used before assignment)
        if current in self.aliases:
            self.hazards.append(
                (
                    current,
                    node,
                    f"`{ast.unparse(node)}` writes in place into `{target}`, which may share "
                    f"memory with `{self.aliases[current]}` (it was assigned from it); s2sad "
                    "does not follow writes through such aliases",
                    f"write `{_rebinding(node)}` to make a new array, or assign `{target}` "
                    f"from a copy (`{target} = {self.aliases[current]}.copy()`)",
                )
            )
        self.aug_written({target}, node)

    def aug_written(self, targets: set[str], node: ast.stmt) -> None:
        """The arrays `targets` are changed in place by `node`: the names that share their
        memory no longer hold the values they were bound with."""
        for written in sorted(targets):
            for name in self.shared_by.get(written, ()):
                if name not in targets and written in self.sharing.get(name, ()):
                    self.aug_stale[name] = (self.env.get(written, written), node, written)

    def synthesize(self, base: str) -> str:
        """A new local name of s2sad's own (a loop index), readable like a user's."""
        name = self.names.fresh(base)
        self.locals.add(name)
        self.env[name] = name
        return name

    def rebind(self, user_name: str) -> str:
        """A fresh SSA name for the next value of `user_name`."""
        if user_name not in self.env:
            name = self.names.fresh(user_name) if self.inlined else user_name
            self.names.taken.add(name)
        elif self.headers and user_name in self.headers[-1]:
            name = self.names.fresh(f"{user_name}_new")
        else:
            name = self.names.fresh(f"{user_name}_1")
        self.env[user_name] = name
        return name

    def may_alias(self, value: ast.expr) -> bool:
        """Whether a value may be a view of (or the same object as) a local array; or an element
        or view of any named array (a global's included)."""
        if isinstance(value, ast.Name):
            return value.id in self.locals and value.id in self.env
        if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name):
            return True
        return bool(self.memory_roots(value))

    def bind(self, user_name: str, rhs: ast.expr, varied: bool) -> ast.Name:
        name = self.rebind(user_name)
        if self.pending_alias is not None:
            self.aliases[name] = self.pending_alias
            self.pending_alias = None
        self.append(name, rhs, varied)
        return ast.Name(name, ast.Load())

    def append(self, name: str, rhs: ast.expr, varied: bool) -> ast.stmt:
        if varied and _makes_complex(rhs):
            raise self.parsed.error(
                UnsupportedSyntaxError,
                "s2sad does not differentiate complex values yet: "
                f"`{ast.unparse(rhs)}` makes one from a differentiated value",
                self.src,
                hint="keep the differentiated path real (write the real and imaginary parts as "
                "two real arrays), or give the function a rule with s2sad.register_vjp",
            )
        stmt = self.put(ast.Assign([ast.Name(name, ast.Store())], rhs))
        if varied:
            self.varied.add(name)
        return stmt

    # ------------------------------------------------------------------ control flow
    def condition(self, test: ast.expr) -> ast.expr:
        if isinstance(test, (ast.Name, ast.Constant)):
            return self.rename(test)
        name = self.names.fresh("cond")
        self.append(name, self.rename(test), varied=False)
        return ast.Name(name, ast.Load())

    def if_(self, node: ast.If) -> None:
        test = self.condition(node.test)
        before = dict(self.env)
        stale = set(self.stale)
        shared = (dict(self.sharing), dict(self.aug_stale))
        body: list[ast.stmt] = []
        breaks = bool(node.body) and isinstance(node.body[-1], ast.Break)
        if breaks:  # the statements before the break, then the loop's exit copies
            self.block_into(body, node.body[:-1])
            body += self.exit_copies_for_break()
            env_body, self.env = None, dict(before)
        else:
            self.block_into(body, node.body)
            env_body, self.env = self.env, dict(before)
        stale, self.stale = self.stale, stale
        shared_body = (self.sharing, self.aug_stale)
        self.sharing, self.aug_stale = dict(shared[0]), dict(shared[1])
        orelse: list[ast.stmt] = []
        self.block_into(orelse, node.orelse)
        self.stale |= stale
        for name, bases in shared_body[0].items():  # either path's sharing may hold
            self.share(name, self.sharing.get(name, set()) | bases)
        for name, write in shared_body[1].items():
            self.aug_stale.setdefault(name, write)
        env_else = self.env
        stmt = ast.If(test, body, orelse)
        stmt.merged = []
        if env_body is not None:
            self.env = self.merge(before, (env_body, body), (env_else, orelse), stmt=stmt)
        self.put(stmt)

    def merge(self, before, *branches, stmt) -> dict:
        """One name per variable after the `if`, assigned at the end of each branch: the
        branch's own last assignment is renamed to it, or a copy is appended."""
        env = dict(before)
        variables = [v for e, _ in branches for v in e]
        for var in dict.fromkeys(variables):
            names = [e.get(var) for e, _ in branches]
            if len(set(names)) == 1:
                env[var] = names[0]
                continue
            if any(n is None for n in names):  # assigned on one path only, as Python allows
                env[var] = next(n for n in names if n is not None)
                if env[var] not in before.values():  # (not a value from before the `if`)
                    self.maybe_undefined.add(env[var])
                continue
            # Every value keeps a name of its own, even where the old value may not exist (a
            # loop's last value, a name one branch assigns): the adjoint reads old values and
            # starts each adjoint from zero where its value is made, so no name may be assigned
            # twice. A copy that nothing reads is dropped (Python reads nothing there either,
            # so it must not fail where the old value may not exist).
            merged = self.names.fresh(f"{var}_1")
            varied = any(n in self.varied for n in names)
            for (_, stmts), name in zip(branches, names):
                if (
                    name != before.get(var)
                    and name not in self.parsed.params
                    and (name in self.varied or not varied)
                ):
                    _rename_in(stmts, name, merged)
                else:
                    # (a constant branch value stays constant in the statements that made and
                    # read it, which were split into single operations only where they vary)
                    copy_stmt = ast.Assign(
                        [ast.Name(merged, ast.Store())], ast.Name(name, ast.Load())
                    )
                    copy_stmt.src, copy_stmt.src_parsed = self.src, self.parsed
                    copy_stmt.merge_copy = True
                    stmts.append(copy_stmt)
            if varied:
                self.varied.add(merged)
            shared = [self.aliases[n] for n in names if n in self.aliases]
            if shared:  # a path on which the value may be another array's memory
                self.aliases[merged] = shared[0]
            if any(n in self.maybe_undefined for n in names):
                self.maybe_undefined.add(merged)
            stmt.merged.append(merged)
            env[var] = merged
        return env

    def loop_body(self, node, body: list[ast.stmt], setup) -> tuple[list[ast.stmt], dict, list]:
        """Normalize a loop body; returns (statements, header map, live-out user names)."""
        before = dict(self.env)
        modified = [v for v in _assigned_in(body)]
        header = {v: before[v] for v in modified if v in before}
        self.headers.append(set(header))
        self.exit_copies.append(header)
        out: list[ast.stmt] = []
        saved, self.out = self.out, out
        setup()  # the loop's items first: whether they vary decides what varies in the body
        self.out = saved
        self.mark_loop_varied(body)
        self.block_into(out, body)
        self.sink(out, self.copies_back(header))
        self.headers.pop()
        self.exit_copies.pop()
        after = dict(before)
        for var in modified:
            if var not in header and var in self.env:
                after[var] = self.env[var]
        liveout = [after[v] for v in modified if v not in header and v in after]
        self.maybe_undefined |= set(liveout)  # the loop may run no iteration
        self.env = after
        return out, header, liveout

    def sink(self, block: list[ast.stmt], copies: list[ast.stmt]) -> None:
        """Put the end-of-iteration copies at the end of every path that does not `break`."""
        last = block[-1] if block else None
        if isinstance(last, ast.If) and _breaks(last):
            for branch in (last.body, last.orelse):
                if not (branch and isinstance(branch[-1], ast.Break)):
                    self.sink(branch, [_copy_stmt(c) for c in copies])
            return
        block.extend(copies)

    def copies_back(self, header: dict) -> list[ast.stmt]:
        copies = []
        for var, name in header.items():
            current = self.env.get(var, name)
            if current != name:
                stmt = ast.Assign([ast.Name(name, ast.Store())], ast.Name(current, ast.Load()))
                stmt.src, stmt.src_parsed = self.src, self.parsed
                stmt.end_copy = True  # the loop-carried value for the next iteration
                copies.append(stmt)
                if current in self.varied:
                    self.varied.add(name)
        return copies

    def exit_copies_for_break(self) -> list[ast.stmt]:
        if not self.exit_copies:
            raise self.unsupported(self.src, "`break` outside a loop")
        exit_ = ast.Break()
        exit_.src, exit_.src_parsed = self.src, self.parsed
        return self.copies_back(self.exit_copies[-1]) + [exit_]

    def mark_loop_varied(self, body: list[ast.stmt]) -> None:
        """Variables that become varied in some iteration are varied from the first."""
        changed = True
        while changed:
            changed = False
            for stmt in walk_nodes(ast.Module(body=body, type_ignores=[])):
                if isinstance(stmt, ast.For) and self.mentions_varied(stmt.iter):
                    # the items of `for row in x`, `enumerate(x)`, `zip(x, y)` vary with x
                    target = stmt.target
                    it = stmt.iter
                    if (
                        isinstance(it, ast.Call)
                        and self.resolver.resolve(it.func) is enumerate
                        and isinstance(target, ast.Tuple)
                        and len(target.elts) == 2
                    ):
                        target = target.elts[1]  # the index does not vary
                    for n in walk_nodes(target):
                        if isinstance(n, ast.Name) and n.id not in self.loop_varied:
                            self.loop_varied.add(n.id)
                            changed = True
                elif isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                    value = stmt.value
                    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                    if value is not None and (
                        self.mentions_varied(value)
                        or (isinstance(stmt, ast.AugAssign) and self.mentions_varied(stmt.target))
                    ):
                        for t in targets:
                            while isinstance(t, ast.Subscript):  # y[i] = v varies y only
                                t = t.value
                            for n in walk_nodes(t):
                                if isinstance(n, ast.Name) and n.id not in self.loop_varied:
                                    self.loop_varied.add(n.id)
                                    changed = True

    def loop_writes(self, body: list[ast.stmt]) -> None:
        """Views of arrays a loop writes hold other values from its second trip on."""
        for stmt in body:
            for n in ast.walk(stmt):
                if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
                    self.aug_written({n.target.id}, n)
        self.written_now(
            {
                n.value.id
                for stmt in body
                for n in walk_nodes(stmt)
                if isinstance(n, ast.Subscript)
                and isinstance(n.ctx, ast.Store)
                and isinstance(n.value, ast.Name)
            }
        )

    def for_(self, node: ast.For) -> None:
        if node.orelse:
            raise self.unsupported(node, "`for ... else`")
        self.loop_writes(node.body)
        body, breaks = restructure_jumps(node.body, self.parsed)
        index, range_call, bind_items = self.iteration(node)
        trips = None
        if breaks:
            trips = self.names.fresh("trips")
            self.append(trips, ast.Constant(0), varied=False)

        def setup():
            if trips is not None:
                self.append(
                    trips,
                    ast.BinOp(ast.Name(trips, ast.Load()), ast.Add(), ast.Constant(1)),
                    varied=False,
                ).counter = True
            bind_items()

        stmts, header, liveout = self.loop_body(node, body, setup)
        loop = ast.For(ast.Name(index, ast.Store()), range_call, stmts, [])
        loop.header, loop.liveout, loop.trips, loop.index = (
            list(header.values()),
            liveout,
            trips,
            index,
        )
        if trips is not None:
            loop.header.append(trips)
        self.put(loop)

    def iteration(self, node: ast.For):
        """The index name, the `range(...)` call, and a callback binding the loop's items."""
        it, target = node.iter, node.target
        func = it.func if isinstance(it, ast.Call) else None
        callee = (
            self.resolver.resolve(func)
            if func is not None and not (isinstance(func, ast.Name) and func.id in self.locals)
            else None
        )
        inner = it.args[0] if callee is reversed and len(it.args) == 1 else None
        trimmed = inner.slice if isinstance(inner, ast.Subscript) else None  # range(...)[:n]
        inner = inner.value if trimmed is not None else inner
        backwards = isinstance(inner, ast.Call) and self.resolver.resolve(inner.func) is range
        if callee is range or backwards:
            if not isinstance(target, ast.Name):
                raise self.unsupported(target, "this loop target")
            index = self.rebind(target.id)
            bounds = inner.args if backwards else it.args
            span = ast.Call(
                ast.Name("range", ast.Load()), [self.atom(a, "range") for a in bounds], []
            )
            if trimmed is not None:
                span = ast.Subscript(span, self.index(trimmed, "range"), ast.Load())
            if backwards:  # as in s2sad's own adjoint loops
                span = ast.Call(ast.Name("reversed", ast.Load()), [span], [])
            return index, span, lambda: None
        if (
            callee is enumerate
            and isinstance(target, ast.Tuple)
            and len(target.elts) == 2
            and len(it.args) == 1
            and not it.keywords
        ):
            seq = self.sequence_of(it.args[0], node.body)
            index = self.rebind(target.elts[0].id)
            item = target.elts[1]
            stop = ast.Call(ast.Name("len", ast.Load()), [seq], [])
            return (
                index,
                ast.Call(ast.Name("range", ast.Load()), [stop], []),
                lambda: self.assign_target(
                    item, ast.Subscript(seq, ast.Name(target.elts[0].id, ast.Load()), ast.Load())
                ),
            )
        if (
            callee is zip
            and isinstance(target, ast.Tuple)
            and not it.keywords
            and len(target.elts) == len(it.args)
        ):
            seqs = [self.sequence_of(a, node.body) for a in it.args]
            index = self.synthesize(f"{target.elts[0].id}_index")
            stop = (
                ast.Call(
                    ast.Name("min", ast.Load()),
                    [ast.Call(ast.Name("len", ast.Load()), [s], []) for s in seqs],
                    [],
                )
                if len(seqs) > 1
                else ast.Call(ast.Name("len", ast.Load()), seqs, [])
            )

            def bind_zip():
                for t, s in zip(target.elts, seqs):
                    self.assign_target(t, ast.Subscript(s, ast.Name(index, ast.Load()), ast.Load()))

            return index, ast.Call(ast.Name("range", ast.Load()), [stop], []), bind_zip
        if isinstance(target, ast.Name):
            seq = self.sequence_of(it, node.body)
            index = self.synthesize(f"{target.id}_index")
            stop = ast.Call(ast.Name("len", ast.Load()), [seq], [])
            return (
                index,
                ast.Call(ast.Name("range", ast.Load()), [stop], []),
                lambda: self.assign_target(
                    target, ast.Subscript(seq, ast.Name(index, ast.Load()), ast.Load())
                ),
            )
        raise self.unsupported(
            node, "this kind of `for` loop (use range, enumerate, zip or " "an array)"
        )

    def sequence_of(self, node: ast.expr, body: list[ast.stmt]) -> ast.Name:
        """What a `for` loop iterates over, as a name of its own: Python evaluates it once, so a
        body that rebinds the name must not change the rows the loop reads. The rows it binds
        are views of what `node` may share memory with (`for row in y: y += 1.0`)."""
        shared = self.shared_bases(node)
        seq = self.atom(node, "items")
        seq = self._sequence_name(node, seq, body)
        self.share(seq.id, self.sharing.get(seq.id, set()) | shared - {seq.id})
        return seq

    def _sequence_name(self, node: ast.expr, seq: ast.expr, body: list[ast.stmt]) -> ast.Name:
        rebound = isinstance(node, ast.Name) and node.id in _assigned_in(body)
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

    def while_(self, node: ast.While) -> None:
        if node.orelse:
            raise self.unsupported(node, "`while ... else`")
        self.loop_writes(node.body)
        body, _ = restructure_jumps(node.body, self.parsed)
        iters = self.names.fresh("iters")
        self.append(iters, ast.Constant(0), varied=False)
        self.mark_loop_varied(body)
        test = self.rename(node.test)  # reads the loop-carried names, as the body's end sets them
        count = ast.BinOp(ast.Name(iters, ast.Load()), ast.Add(), ast.Constant(1))

        def setup():
            self.append(iters, count, varied=False).counter = True

        stmts, header, liveout = self.loop_body(node, body, setup)
        loop = ast.While(test, stmts, [])
        loop.header, loop.liveout, loop.iters = list(header.values()) + [iters], liveout, iters
        self.put(loop)

    # ------------------------------------------------------------------ expressions
    def mentions_varied(self, node: ast.AST) -> bool:
        """Whether `node` reads a value that may depend on the wrt inputs. Within one expression
        the answer for each node is kept (`expr` asks it at every level: a 1,000-term sum, a
        1,000-deep tree, would otherwise be walked 1,000 times)."""
        memo = self._varied_memo
        if memo is None:
            return self._mentions_varied(node)
        known = memo.get(id(node))
        if known is not None and known[0] is node:
            return known[1]
        answer = self._mentions_varied(node)
        memo[id(node)] = (node, answer)
        return answer

    def _mentions_varied(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Attribute) and node.attr in STATIC_ATTRS:
            return False
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id not in self.locals
            and node.func.id in ("len", "isinstance")
        ):
            return False
        if isinstance(node, ast.Name):
            return self.env.get(node.id, node.id) in self.varied or node.id in self.loop_varied
        return any(self.mentions_varied(c) for c in ast.iter_child_nodes(node))

    def atom_varied(self, node: ast.expr) -> bool:
        return any(isinstance(n, ast.Name) and n.id in self.varied for n in walk_nodes(node))

    def is_atom(self, node: ast.expr) -> bool:
        if isinstance(node, (ast.Name, ast.Constant)):
            return True
        if isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant):
            return True
        if isinstance(node, (ast.Tuple, ast.List)):
            return all(self.is_atom(e) for e in node.elts)
        if isinstance(node, ast.Attribute):
            return node.attr in STATIC_ATTRS or self.resolver.resolve(node) is not None
        if isinstance(node, ast.Subscript):  # x.shape[0]
            return (
                isinstance(node.value, ast.Attribute)
                and node.value.attr in STATIC_ATTRS
                and self.is_atom(node.slice)
            )
        return False

    def is_cheap(self, node: ast.expr) -> bool:
        return not any(
            isinstance(n, (ast.Call, ast.IfExp))
            or (isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult))
            for n in walk_nodes(node)
        )

    def atom(self, node: ast.expr, base: str) -> ast.expr:
        """An operand: a name, a constant or a cheap expression of constants; else a temp."""
        if self.is_atom(node) or (not self.mentions_varied(node) and self.is_cheap(node)):
            return self.rename(node)
        rhs = self.expr(node, base)
        if isinstance(rhs, (ast.Name, ast.Tuple)) and getattr(rhs, "s2sad_inlined", False):
            return rhs
        if self.views_written(node):
            # the array is written in place later: keep this value, not a view of it
            rhs = _snapshot_of(rhs)
        name = self.names.fresh(f"{base}_{self.opname(node)}")
        self.append(name, rhs, self.mentions_varied(node) or self.atom_varied(rhs))
        return ast.Name(name, ast.Load())

    def views_written(self, node: ast.expr) -> bool:
        """Whether `node` may give a view of an array the function writes in place: a subscript,
        `.T`, or a view-making call such as reshape or transpose."""
        return not isinstance(node, ast.Name) and self.written_view(node) is not None

    def written_view(self, node: ast.expr) -> str | None:
        """The array the function writes in place that `node` may be a view of (or the very
        object of): the array itself, a subscript, `.T`, or any call not known to make a new
        array (see `memory_roots`); else None."""
        written = sorted(
            n for n in self.shared_bases(node) if n in self.written and n in self.locals
        )
        return written[0] if written else None

    def written_now(self, arrays: set[str]) -> None:
        """`arrays` are written in place here: the views bound from them no longer hold the
        values they were bound with."""
        self.stale |= {v for v, a in self.views.items() if a in arrays}

    def opname(self, node: ast.expr) -> str:
        if isinstance(node, (ast.BinOp, ast.UnaryOp)):
            return _OPNAMES.get(type(node.op), "op")
        if isinstance(node, ast.Call):
            func = node.func
            return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "call")
        if isinstance(node, ast.Attribute):
            return node.attr
        if isinstance(node, ast.Subscript):
            return "item"
        if isinstance(node, ast.Compare):
            return "cmp"
        return "tmp"

    def expr(self, node: ast.expr, base: str) -> ast.expr:
        """`node` with its operands reduced to atoms; the operation itself is kept."""
        if self._varied_memo is not None:
            return self._expr(node, base)
        # no name of the expression is rebound while it is reduced: what it reads is fixed
        self._varied_memo = {}
        try:
            return self._expr(node, base)
        finally:
            self._varied_memo = None

    def _expr(self, node: ast.expr, base: str) -> ast.expr:
        if isinstance(node, ast.Call) and self.inlinable(node.func) is not None:
            result = self.inline(node, base)
            self._varied_memo.clear()  # an inlined body may write into the caller's arrays
            return result
        if not self.mentions_varied(node):
            return self.rename(node)
        loc = node
        if isinstance(node, ast.BinOp):
            node = ast.BinOp(self.atom(node.left, base), node.op, self.atom(node.right, base))
        elif isinstance(node, ast.UnaryOp):
            node = ast.UnaryOp(node.op, self.atom(node.operand, base))
        elif isinstance(node, ast.Call):
            node = self.call(node, base)
        elif isinstance(node, ast.Attribute):
            node = ast.Attribute(self.atom(node.value, base), node.attr, ast.Load())
        elif isinstance(node, ast.Subscript):
            node = ast.Subscript(
                self.atom(node.value, base), self.index(node.slice, base), ast.Load()
            )
        elif isinstance(node, ast.Compare):
            node = ast.Compare(
                self.atom(node.left, base), node.ops, [self.atom(c, base) for c in node.comparators]
            )
        elif isinstance(node, (ast.Tuple, ast.List)):
            node = type(node)([self.atom(e, base) for e in node.elts], ast.Load())
        elif isinstance(node, ast.Name):
            node = self.rename(node)
        elif isinstance(node, ast.IfExp):
            return self.if_expression(node, base)
        else:
            what = {
                ast.Lambda: "lambdas",
                ast.BoolOp: "`and`/`or` on differentiated values",
                ast.ListComp: "list comprehensions",
                ast.GeneratorExp: "generators",
                ast.Starred: "starred arguments",
            }.get(type(node), type(node).__name__)
            raise self.unsupported(node, what)
        return ast.copy_location(node, loc)

    def if_expression(self, node: ast.IfExp, base: str) -> ast.expr:
        """`a if c else b` becomes an `if` statement assigning one name."""
        name = self.names.fresh(f"{base}_pick")
        self.locals.add(name)
        stmt = ast.If(
            node.test,
            [ast.Assign([ast.Name(name, ast.Store())], node.body)],
            [ast.Assign([ast.Name(name, ast.Store())], node.orelse)],
        )
        for child in (stmt, stmt.body[0], stmt.orelse[0]):
            child.s2sad_synthetic = True
        self.if_(stmt)
        return ast.Name(self.env[name], ast.Load())

    def call(self, node: ast.Call, base: str) -> ast.Call:
        func = node.func
        if isinstance(func, ast.Attribute) and self.resolver.resolve(func) is None:
            new_func = ast.Attribute(self.atom(func.value, base), func.attr, ast.Load())
        elif self.array_of_literal(node):
            return self.stacked(node.args[0], node.keywords, base)
        else:
            new_func = self.rename(func)
            new_func.s2sad_callee = self.resolver.resolve(func)
        if any(isinstance(a, ast.Starred) for a in node.args):
            raise self.unsupported(node, "starred arguments (*args) in a call")
        if any(k.arg is None for k in node.keywords):
            raise self.unsupported(node, "**kwargs in a call")
        args = [self.sequence(a, base) for a in node.args]
        keywords = [ast.keyword(k.arg, self.sequence(k.value, base)) for k in node.keywords]
        return ast.Call(new_func, args, keywords)

    def array_of_literal(self, node: ast.Call) -> bool:
        """`np.array([[a, b], [c, d]])` (or np.asarray) of differentiated values."""
        callee = self.resolver.resolve(node.func)
        return (
            any(callee is f for f in (np.array, np.asarray))
            and len(node.args) == 1
            and isinstance(node.args[0], (ast.List, ast.Tuple))
            and all(k.arg == "dtype" for k in node.keywords)
        )

    def stacked(self, literal, keywords, base: str) -> ast.Call:
        """A (nested) list literal made an array by np.stack, level by level: the same array
        as np.array makes of it, by a call with a rule."""
        elts = []
        for e in literal.elts:
            if isinstance(e, (ast.List, ast.Tuple)):
                row = self.stacked(e, [], base)
                name = self.names.fresh(f"{base}_row")
                self.append(name, row, self.atom_varied(row))
                elts.append(ast.Name(name, ast.Load()))
            else:
                elts.append(self.atom(e, base))
        func = ast.Attribute(ast.Name("np", ast.Load()), "stack", ast.Load())
        func.s2sad_callee = np.stack
        keywords = [ast.keyword(k.arg, self.atom(k.value, base)) for k in keywords]
        return ast.Call(func, [ast.List(elts, ast.Load())], keywords)

    def sequence(self, node: ast.expr, base: str) -> ast.expr:
        """A call argument; a list or tuple literal keeps its shape with atom elements."""
        if isinstance(node, (ast.List, ast.Tuple)) and self.mentions_varied(node):
            return type(node)([self.atom(e, base) for e in node.elts], ast.Load())
        return self.atom(node, base)

    def index(self, node: ast.expr, base: str) -> ast.expr:
        if isinstance(node, ast.Slice):
            parts = [
                None if p is None else self.atom(p, base)
                for p in (node.lower, node.upper, node.step)
            ]
            return ast.Slice(*parts)
        if isinstance(node, ast.Tuple):
            return ast.Tuple([self.index(e, base) for e in node.elts], ast.Load())
        return self.atom(node, base)

    # ------------------------------------------------------------------ inlining
    def inlinable(self, func: ast.expr):
        """The user function (or local def/lambda node) a call refers to, if s2sad inlines it."""
        if isinstance(func, ast.Name) and func.id in self.local_funcs:
            return self.local_funcs[func.id]
        if isinstance(func, ast.Name) and func.id in self.locals:
            return None
        if not isinstance(func, (ast.Name, ast.Attribute)):
            return None
        obj = self.resolver.resolve(func)
        if not inspect.isfunction(obj) or rules.lookup(obj) is not None or rules.is_nondiff(obj):
            return None
        module = getattr(obj, "__module__", "") or ""
        if module.split(".")[0] in ("numpy", "s2sad", "math"):
            return None
        return obj

    def inline(self, node: ast.Call, base: str) -> ast.expr:
        target = self.inlinable(node.func)
        if not self.mentions_varied(node):
            if isinstance(target, (ast.FunctionDef, ast.Lambda)):
                pass  # local functions have no global name: inline them anyway
            else:
                return self.rename(node)
        if any(t is target for t in self.inlining):
            raise self.parsed.error(
                UnsupportedSyntaxError,
                "s2sad cannot differentiate recursive functions",
                node,
                hint="write the recursion as a loop",
            )
        if any(isinstance(a, ast.Starred) for a in node.args) or any(
            k.arg is None for k in node.keywords
        ):
            raise self.unsupported(node, "*args or **kwargs in a call to an inlined function")
        self.call_varied = [self.mentions_varied(a) for a in node.args] + [
            self.mentions_varied(k.value) for k in node.keywords
        ]
        args = [self.atom(a, base) for a in node.args]
        keywords = {k.arg: self.atom(k.value, base) for k in node.keywords}
        self.inlining.append(target)
        try:
            if isinstance(target, (ast.FunctionDef, ast.Lambda)):
                return self.inline_local(target, args, keywords, node)
            return self.inline_global(target, args, keywords, node)
        finally:
            self.inlining.pop()

    def _bind_params(
        self, sub: Normalizer, signature: inspect.Signature, args, keywords, node, defaults_spelled
    ) -> None:
        rebound = _assigned_names(sub.parsed.tree)
        try:
            bound = signature.bind(*args, **keywords)
        except TypeError as exc:
            raise self.parsed.error(UnsupportedSyntaxError, f"bad call: {exc}", node) from None
        given_args = signature.bind(*node.args, **{k.arg: k.value for k in node.keywords}).arguments
        # the parameters that are the caller's arrays (or views of them), with those arrays
        sub.param_sources = {
            name: (ast.unparse(arg), self.shared_bases(arg))
            for name, arg in given_args.items()
            if self.may_alias(arg)
        }
        for name, param in signature.parameters.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise self.unsupported(node, "calls to functions with *args or **kwargs")
            if name in bound.arguments:
                value = bound.arguments[name]
            else:
                value = defaults_spelled(name, param.default)
            if (
                isinstance(value, ast.Name)
                and value.id not in self.resolver.namespace
                and name not in rebound
            ):  # a parameter the callee rebinds gets its own copy
                sub.env[name] = value.id
            else:
                local = self.names.fresh(name)
                self.append(local, value, varied=self.atom_varied(value))
                sub.env[name] = local
                if name in given_args and self.may_alias(given_args[name]):
                    # the callee's parameter is the caller's array (or a view of it)
                    sub.aliases[local] = ast.unparse(given_args[name])
        # a parameter whose argument varies (now or in a later iteration) varies in the body
        given = list(bound.arguments)
        for param, varies in zip(given, getattr(self, "call_varied", [])):
            if varies:
                sub.loop_varied.add(param)

    def _run_inlined(self, sub: Normalizer, body: list[ast.stmt], label: str) -> ast.expr:
        result = self.names.fresh(f"{label}_result")
        body, arity = sub.lift(sub.function_body(body), result)
        sub.locals |= {result} | {f"{result}{i}" for i in range(arity)}
        sub.mark_loop_varied(body)  # as for the main function: what varies anywhere is split
        sub.block_into(self.out, body)
        if arity:
            results = [f"{result}{i}" for i in range(arity)]
            out = ast.Tuple([ast.Name(sub.env[r], ast.Load()) for r in results], ast.Load())
            # per element: the caller's arrays it may be (a view of), or an earlier element
            # whose memory it may share (`return h, h`, `return v[:2], v[2:]` share `v`)
            elements = []
            for i, r in enumerate(results):
                mine = sub.sharing.get(r, set())
                same = [j for j in range(i) if mine & sub.sharing.get(results[j], set())]
                elements.append((same[0] if same else None, self.caller_memory(sub, r)))
            out.s2sad_alias_elts = elements
        else:
            out = ast.Name(sub.env[result], ast.Load())
            shared = self.caller_memory(sub, result)
            if shared:
                out.s2sad_alias = shared
        out.s2sad_inlined = True
        return out

    def caller_memory(self, sub: Normalizer, result: str) -> tuple[str, set[str]] | None:
        """What an inlined function's `result` may share with the caller: a parameter that is
        the caller's array (or a view of it), or, for a nested def, a name of its closure
        (the caller's own value); as (the caller's expression, the caller's locals)."""
        texts, bases = [], set()
        for p in sorted(sub.sharing.get(result, ())):
            if p in sub.param_sources:
                text, shared = sub.param_sources[p]
                texts.append(text)
                bases |= shared
            elif p in self.env and sub.env.get(p) == self.env[p] and p in self.locals:
                texts.append(p)
                bases |= {p} | self.sharing.get(p, set())
        return (texts[0], bases) if texts else None

    def inline_global(self, func, args, keywords, node) -> ast.expr:
        _, spec = self.resolver.resolve_spec(node.func)
        if spec is None:  # not reached by a name of the user's: nothing could check it later
            raise self.unsupported(node, "a call of this function")
        reads = self.resolver.reads
        index = reads.helper(spec, func)
        parsed = parse_function(func)
        sub = Normalizer(parsed, [], parent=self, env={}, index=index)
        sub.src = self.src
        positional = [
            p.name
            for p in inspect.signature(func).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is not p.empty
        ]

        def default(name, value):
            # read again at each call: a number or array as a parameter, anything else checked
            if name in positional:
                where = (index, "default", positional.index(name), ())
            else:
                where = (index, "kwdefault", name, ())
            if is_data(value) and not _is_literal(value):
                spelled = reads.parameter(where, f"{parsed.name}_{name}", self.resolver.namespace)
                return ast.Name(spelled, ast.Load())
            reads.checks[where] = value
            if _is_literal(value):
                return ast.Constant(value)
            spelled = self.names.fresh(f"{parsed.name}_{name}")  # not __name__: any text
            self.resolver.namespace[spelled] = value
            return ast.Name(spelled, ast.Load())

        self._bind_params(sub, inspect.signature(func), args, keywords, node, default)
        return self._run_inlined(sub, parsed.tree.body, parsed.name)

    def inline_local(self, fn, args, keywords, node) -> ast.expr:
        """A `def` or lambda inside the function: its closure is the current environment."""
        if isinstance(fn, ast.Lambda):
            body = [ast.copy_location(ast.Return(fn.body), fn.body)]
        else:
            body = fn.body
        params = [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs]
        if fn.args.vararg or fn.args.kwarg:
            raise self.unsupported(node, "calls to functions with *args or **kwargs")
        tree = ast.FunctionDef(getattr(fn, "name", "lambda"), fn.args, body, [], None)
        sub = Normalizer(
            self.parsed,
            [],
            parent=self,
            env=dict(self.env),
            extra_locals=self.locals | set(params) | _assigned_names(tree),
        )
        sub.resolver.locals = sub.locals
        sub.local_funcs = dict(self.local_funcs)
        sub.loop_varied = self.loop_varied
        sub.src = self.src
        held = self.local_defaults.get(id(fn), {})
        empty = inspect.Parameter.empty
        sig_params = [
            inspect.Parameter(
                a.arg, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=held.get(a.arg, empty)
            )
            for a in fn.args.posonlyargs + fn.args.args
        ] + [
            inspect.Parameter(a.arg, inspect.Parameter.KEYWORD_ONLY, default=held.get(a.arg, empty))
            for a in fn.args.kwonlyargs
        ]
        signature = inspect.Signature(sig_params)
        renamed = {old: new for new, old in getattr(self.parsed, "original", {}).items()}
        keywords = {renamed.get(k, k): v for k, v in keywords.items()}  # `h(np=...)`: see hygienic
        self._bind_params(
            sub, signature, args, keywords, node, lambda name, _: self.default_of(fn, name, node)
        )
        label = getattr(node.func, "id", tree.name)
        return self._run_inlined(sub, body, label)

    def evaluate_defaults(self, fn) -> None:
        """Python evaluates a nested def's (or lambda's) defaults where the def stands, not at
        the call: a default that reads a local is bound to a name of its own here (`h_k = k`),
        which a later `k = ...` does not change; constants and globals stay as written."""
        args = fn.args
        positional = args.posonlyargs + args.args
        pairs = list(zip(positional[len(positional) - len(args.defaults) :], args.defaults))
        pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
        held = {}
        for arg, default in pairs:
            if not (_loads(default) & self.locals):
                held[arg.arg] = default
                continue
            local = self.names.fresh(f"{getattr(fn, 'name', 'lambda')}_{arg.arg}")
            self.locals.add(local)
            self.assign_target(ast.Name(local, ast.Store()), default)
            held[arg.arg] = ast.copy_location(ast.Name(local, ast.Load()), default)
        self.local_defaults[id(fn)] = held

    def default_of(self, fn, name: str, node) -> ast.expr:
        """The default of parameter `name` of a nested def, as evaluated at the def."""
        value = self.local_defaults[id(fn)][name]
        if isinstance(value, ast.Name) and value.id not in self.env and value.id in self.locals:
            raise self.parsed.error(
                UnsupportedSyntaxError,
                f"`{getattr(node.func, 'id', 'lambda')}` is called after the loop that defines it, "
                f"and its default for `{name}` was evaluated inside that loop",
                node,
                hint="define the function before the loop, or pass the argument explicitly",
            )
        return self.rename(value)

    # ------------------------------------------------------------------ names
    def load(self, node: ast.Name) -> ast.Name:
        if node.id not in self.env:
            user_name = getattr(self.parsed, "original", {}).get(node.id, node.id)
            raise self.parsed.error(
                NameResolutionError,
                f"local variable '{user_name}' is used before it is assigned",
                node,
            )
        if node.id in self.aug_stale:
            written_ssa, write, written = self.aug_stale[node.id]
            self.hazards.append(
                (
                    written_ssa,
                    node,
                    f"`{node.id}` may share memory with `{written}`, which "
                    f"`{ast.unparse(write)}` (line {write.lineno + self.parsed.line_offset}) "
                    f"changes in place after `{node.id}` was assigned; s2sad does not follow "
                    "writes through such aliases",
                    f"write `{_rebinding(write)}` to make a new array, or assign `{node.id}` "
                    "from a copy (`.copy()`)",
                )
            )
        if node.id in self.stale:  # refused unless it is a scalar (an element is no view)
            self.hazards.append(
                (
                    self.env[node.id],
                    node,
                    f"`{node.id}` may be a view of `{self.views[node.id]}`, which is written in "
                    f"place after `{node.id}` was assigned; s2sad does not follow writes through "
                    "views",
                    f"assign `{node.id}` from a copy (`....copy()`), or read "
                    f"`{self.views[node.id]}` itself after the write",
                )
            )
        return ast.Name(self.env[node.id], ast.Load())

    def rename(self, node: ast.AST) -> ast.AST:
        """A copy of `node` reading current SSA names, with globals spelled canonically."""
        return _Rename(self).visit(clone(node))


class _Rename(ast.NodeTransformer):
    def __init__(self, norm: Normalizer):
        self.norm = norm
        self.bound: set[str] = set()  # names a comprehension around the node binds

    def visit_Name(self, node: ast.Name) -> ast.expr:
        if node.id in self.bound:
            return node
        if node.id in self.norm.locals:
            return ast.copy_location(self.norm.load(node), node)
        obj = self.norm.resolver.resolve(node)
        return ast.copy_location(self.norm.resolver.spelling(node, obj), node)

    def visit_Attribute(self, node: ast.Attribute) -> ast.expr:
        obj = self.norm.resolver.resolve(node)
        if obj is None:
            self.generic_visit(node)
            return node
        return ast.copy_location(self.norm.resolver.spelling(node, obj), node)

    def visit_Call(self, node: ast.Call) -> ast.Call:
        if isinstance(node.func, ast.Name) and node.func.id in self.norm.local_funcs:
            raise self.norm.unsupported(node, "a call of a local function inside this expression")
        callee = self.norm.resolver.resolve(node.func)
        self.generic_visit(node)
        if callee is not None:
            node.func.s2sad_callee = callee
        return node

    def visit_Lambda(self, node):
        raise self.norm.unsupported(node, "lambdas used in place")

    def _comprehension(self, node):
        """A comprehension of values that carry no derivative (differentiated ones are refused
        before this): its own variables stay as they are."""
        saved = self.bound
        self.bound = saved | {
            n.id for g in node.generators for n in walk_nodes(g.target) if isinstance(n, ast.Name)
        }
        self.generic_visit(node)
        self.bound = saved
        return node

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _comprehension


def _scatter_adds_as_assignments(tree, resolver, local_names) -> set[str]:
    """Rewrite each statement `np.add.at(y, index, v)` (y a local array) as
    `y = scatter_added(y, index, v)`: the values np.add.at leaves in y, by a call with a rule,
    and an assignment every pass follows (loops carry y, branches merge it). Returns the arrays
    so updated: like arrays written in place, their earlier views go stale."""
    updated = set()
    for node in walk_nodes(tree):
        for field in ("body", "orelse"):
            block = getattr(node, field, None)
            if not isinstance(block, list):
                continue
            for k, stmt in enumerate(block):
                if isinstance(stmt, ast.Assign) and getattr(stmt.value, "s2sad_scatter", False):
                    updated.add(stmt.targets[0].id)  # rewritten before (a cached tree)
                if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
                    continue
                call = stmt.value
                if len(call.args) != 3 or call.keywords or not isinstance(call.args[0], ast.Name):
                    continue
                if call.args[0].id not in local_names:
                    continue
                if not is_add_at(resolver.resolve(call.func)):
                    continue
                func = ast.copy_location(ast.Name("scatter_added", ast.Load()), call.func)
                func.s2sad_runtime = runtime.scatter_added
                value = ast.copy_location(ast.Call(func, call.args, []), call)
                value.s2sad_scatter = True
                target = ast.Name(call.args[0].id, ast.Store())
                block[k] = ast.copy_location(ast.Assign([target], value), stmt)
                ast.fix_missing_locations(block[k])
                updated.add(call.args[0].id)
    return updated


def _is_literal(value) -> bool:
    """A default s2sad writes into the code as a constant (and checks at each call)."""
    try:
        ast.literal_eval(repr(value))
        return True
    except (ValueError, SyntaxError):
        return False


def normalize(parsed, wrt: list[str], ranks=None) -> tuple[Normalized, Resolver]:
    """`wrt` and the results name parameters as the generated code does (see `hygienic`);
    `ranks` (pairs of a parameter and its rank, or None) tell which values are scalars."""
    norm = Normalizer(parsed, wrt)
    norm.ranks = ranks
    result = norm.run()
    return result, norm.resolver
