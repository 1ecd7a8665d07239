"""The lengths of the arrays' axes, symbolically, so that a run keeps to one shape: a statement
over a shape that is not provably the run's does not join it, whose guard would otherwise send
every call to the unfused branch (a fused loop that never runs, and a second compile).

An axis is `(root, removed)`: a length less `removed` elements. A root is an axis of an array
this code does not assign (`("in", "u", 0)`) or of a name it assigns again and again (`("var",
"h", 0)`, related to each value assigned), the number of elements of a slice whose bounds are
sums of multiples of names (`u[b:2 * b]` has b, as `w[:b]` has), the length of another slice
(`u[:, d:]`, `u[::2]`: one root for one text), the sum of a concatenation's pieces, or the
length 1 (`UNIT`: a new axis, a reduction's kept one); None is an axis nothing is known about.
Statements relate roots, in classes whose links carry a difference (`len(x) == len(y) - k`):
elementwise operations (NumPy's broadcasting requires the lengths equal, a length 1 aside, which
only costs the fallback a guard exists for), matrix products (`a`'s columns, `b`'s rows), a
name's assignments, and the helpers whose result has an argument's shape
(`@helper(shaped_like=...)`, rules/helpers.py).

Two shapes of one rank are `apart` where an axis of each is known (of a length other than 1) and
they are not provably equal: of one root less different numbers of elements (`u[1:, :]` beside
`u`), or of roots nothing relates (GMM's `icf[:, :d]`, d long, beside `icf[:, d:]`, d(d-1)/2
long; its n data points beside its K components). A slice is taken to have its bounds'
difference of elements: where the axis is shorter, the guard still checks. Anything else may be
equal: no claim is made."""

from __future__ import annotations

import ast

from ...astcopy import walk_nodes
from ...rules.helpers import SHAPED_LIKE
from ..nodes import assigned_name
from .shapes import _OVER, _SAME_SHAPE, constant_int
from .syntax import called, names_in, text_of, written_in_place

UNIT = (("unit",), 0)  # an axis of length 1
_MATMUL = frozenset({"matmul_stacks", "np.matmul"})


class Extents:
    """Each name's axes (`found`), where known, and the classes of roots the statements of one
    function relate (`canonical`, `apart`)."""

    def __init__(self, nodes, rank):
        self.rank = rank
        self.parent: dict = {}  # a root -> (the root it has the length of, less so many)
        self.joined: set = set()  # the roots related to another
        self.found: dict[str, tuple] = {}
        assigns = [
            n
            for node in nodes
            for n in walk_nodes(node)
            if isinstance(n, ast.Assign)
            and len(n.targets) == 1
            and isinstance(n.targets[0], ast.Name)
        ]
        self.counts: dict[str, int] = {}
        for n in assigns:
            self.counts[n.targets[0].id] = self.counts.get(n.targets[0].id, 0) + 1
        for name, count in self.counts.items():  # assigned again and again: axes of its own,
            r = rank(ast.Name(name, ast.Load()))  # related to each value's (a loop's `h = h2`)
            if count > 1 and isinstance(r, int):
                self.found[name] = tuple((("var", name, k), 0) for k in range(r))
        for n in assigns:
            name = n.targets[0].id
            axes = self.axes_of(n.value)  # relates what it combines, whatever its target
            if self.counts[name] == 1 and axes is not None:
                self.found[name] = axes
            elif name in self.found and axes is not None and len(axes) == len(self.found[name]):
                for a, b in zip(self.found[name], axes):
                    self._union(a, b, units=True)

    # ------------------------------------------------------------------ classes of roots
    def canonical(self, axis) -> tuple:
        """`axis` as (the root of its class, the elements it has fewer than that root)."""
        root, removed = axis
        while root in self.parent:  # the root's length is its parent's less `fewer`
            root, fewer = self.parent[root]
            removed += fewer
        return root, removed

    def _union(self, a, b, units: bool = False) -> None:
        """Record that axes `a` and `b` have one length (where each is known; one of length 1
        only where `units`: a name assigned a value with that axis)."""
        if a is None or b is None or not units and UNIT in (self.canonical(a), self.canonical(b)):
            return
        (x, k), (y, j) = self.canonical(a), self.canonical(b)
        if x == UNIT[0]:
            (x, k), (y, j) = (y, j), (x, k)  # the length 1 stays a root
        if x != y:  # len(x) - k == len(y) - j
            self.parent[x] = (y, j - k)
            self.joined |= {x, y}

    def known(self, axis) -> bool:
        """Whether `axis` is known, of a length other than 1: not a name's assigned again and
        again that no value relates to anything."""
        if axis is None:
            return False
        root, _ = axis = self.canonical(axis)
        return axis != UNIT and (root[0] != "var" or root in self.joined)

    def apart(self, a: tuple | None, b: tuple | None) -> bool:
        """Whether two shapes of one rank are not provably equal: an axis of each known, of a
        length other than 1, and the two not of one class with one number removed."""
        if a is None or b is None or len(a) != len(b):
            return False
        return any(
            self.known(x) and self.known(y) and self.canonical(x) != self.canonical(y)
            for x, y in zip(a, b)
        )

    # ------------------------------------------------------------------ axes of expressions
    def axes_of(self, node):
        """`node`'s axes (a tuple of axes, each None where unknown), or None."""
        r = self.rank(node)
        if isinstance(node, ast.Constant):
            return () if r == 0 else None
        if isinstance(node, ast.Name):
            if node.id in self.found:
                return self.found[node.id]
            if node.id in self.counts or not isinstance(r, int):
                return None
            return tuple((("in", node.id, k), 0) for k in range(r))  # an array taken as given
        if isinstance(node, ast.Subscript):
            return self._sliced(node)
        if isinstance(node, ast.Attribute) and node.attr == "T":
            axes = self.axes_of(node.value)
            return None if axes is None else axes[::-1]
        if isinstance(node, ast.UnaryOp):
            return self.axes_of(node.operand)
        name = text_of(getattr(node, "func", None))
        if name == "np.concatenate" and isinstance(node, ast.Call):
            return self._joined(node)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            return self._product(node.left, node.right, r)
        if isinstance(node, ast.BinOp):
            return self._broadcast([node.left, node.right], r)
        if not isinstance(node, ast.Call) or node.keywords and name not in SHAPED_LIKE:
            return None
        if name in SHAPED_LIKE and len(node.args) > SHAPED_LIKE[name]:
            return self.axes_of(node.args[SHAPED_LIKE[name]])
        if name in _MATMUL and len(node.args) == 2:
            return self._product(*node.args, r)
        if name in _OVER and len(node.args) == 3:
            return self._reduced(*node.args)
        if name in _SAME_SHAPE or name == "np.where":
            return self._broadcast(list(node.args), r)
        return None

    def _broadcast(self, operands: list, r) -> tuple | None:
        """The axes of an elementwise result: NumPy's broadcasting, right-aligned; the axes it
        requires equal are related."""
        if not isinstance(r, int):
            return None
        shapes = [self.axes_of(o) for o in operands]
        whole = all(s is not None for s in shapes)  # else an operand may make an axis longer
        shapes = [s for s in shapes if s is not None and len(s) <= r]
        out = []
        for k in range(r):
            axes = [s[k - r + len(s)] for s in shapes if k - r + len(s) >= 0]
            known = [a for a in axes if a is not None and self.canonical(a) != UNIT]
            for a in known[1:]:
                self._union(known[0], a)
            if known:
                out.append(known[0])
            else:
                out.append(
                    UNIT
                    if whole
                    and axes
                    and all(a is not None and self.canonical(a) == UNIT for a in axes)
                    else None
                )
        return tuple(out)

    def _product(self, left, right, r) -> tuple | None:
        """`a @ b`: the rows of `a` and the columns of `b` (after the stacks' axes); `a`'s
        columns and `b`'s rows are related."""
        a, b = self.axes_of(left), self.axes_of(right)
        if a is None or b is None or not a or not b:
            return None
        self._union(a[-1], b[0] if len(b) == 1 else b[-2])
        if len(a) == 1:
            out = b[:-2] + b[-1:]
        elif len(b) == 1:
            out = a[:-1]
        else:
            stacks = _longer(a[:-2], b[:-2])
            out = stacks + (a[-2], b[-1])
        return out if r is None or len(out) == r else None

    def _joined(self, node: ast.Call) -> tuple | None:
        """`np.concatenate((a, b), axis=k)`: along `k` a length of its own, the sum of the
        pieces' (one root for the same pieces); the other axes the pieces', related."""
        options = {k.arg: k.value for k in node.keywords}
        if len(node.args) != 1 or set(options) - {"axis"}:
            return None
        pieces = node.args[0]
        if not isinstance(pieces, (ast.Tuple, ast.List)) or not pieces.elts:
            return None
        shapes = [self.axes_of(p) for p in pieces.elts]
        k = constant_int(options.get("axis", ast.Constant(0)))
        if any(s is None or len(s) != len(shapes[0]) for s in shapes) or k is None:
            return None
        if not -len(shapes[0]) <= k < len(shapes[0]):
            return None
        k %= len(shapes[0])
        out = []
        for j, axes in enumerate(zip(*shapes)):
            if j == k:  # its pieces' lengths added up
                if any(a is None for a in axes):
                    return None
                out.append((("sum",) + tuple(sorted(repr(a) for a in axes)), 0))
                continue
            known = [a for a in axes if self.known(a)]
            for a in known[1:]:
                self._union(known[0], a)
            out.append(known[0] if known else None)
        return tuple(out)

    def _reduced(self, x, axis, keep) -> tuple | None:
        """`sum_over(x, axis, keepdims)` and the other reductions lowering writes."""
        axes = self.axes_of(x)
        if axes is None or not (isinstance(keep, ast.Constant) and isinstance(keep.value, bool)):
            return None
        if isinstance(axis, ast.Constant) and axis.value is None:
            return tuple(UNIT for _ in axes) if keep.value else ()
        k = constant_int(axis)
        if k is None or not -len(axes) <= k < len(axes):
            return None
        k %= len(axes)
        return axes[:k] + ((UNIT,) if keep.value else ()) + axes[k + 1 :]

    def _sliced(self, node: ast.Subscript):
        """A basic subscript of an array whose axes are known: slices (`u[1:, :-1]`, with
        `slice(...)`), numbers (`x[0]`) and new axes (`x[:, None]`)."""
        base = self.axes_of(node.value)
        if base is None:
            return None
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        out, axis = [], 0
        for item in items:
            if isinstance(item, ast.Constant) and item.value is None:
                out.append(UNIT)
                continue
            if axis >= len(base):
                return None
            if not _slice(item) and self.rank(item) == 0:
                axis += 1  # an index: the axis goes
                continue
            if not _slice(item):
                return None
            bounds, length = _bounds(item), _length(item)
            if bounds == (0, None, 1) or [_text(p) for p in _slice_parts(item)] == [None, None, -1]:
                out.append(base[axis])  # the whole axis, or reversed
            elif length is not None:  # `b:2 * b`, `:d`: so many elements (if the axis has them)
                out.append(UNIT if length == ((), 1) else (("length", length), 0))
            elif bounds is None or base[axis] is None or bounds[2] != 1 or bounds[0] < 0:
                out.append(self._symbolic(base[axis], item))
            else:  # `lower:` or `lower:-e`: the axis less lower + e elements
                lower, upper, _ = bounds
                removed = base[axis][1] + lower - (upper if upper is not None else 0)
                out.append((base[axis][0], removed))
            axis += 1
        return tuple(out) + tuple(base[axis:])

    def _symbolic(self, axis, item):
        """The length of a slice known only when the code runs: a root of its own, one for
        the same slice of the same axis (`u[:, :d]` twice)."""
        if axis is None or axis == UNIT:
            return None
        parts = tuple(_text(p) for p in _slice_parts(item))
        return (("slice", axis, parts), 0)  # (the axis as written: a class's root may change)

    # ------------------------------------------------------------------ statements
    def over(self, stmt):
        """The axes a statement computes over, where known (not a view's: moved above a run);
        a scatter's are those of the slice it adds into."""
        if isinstance(stmt, ast.Expr) and called(stmt.value, "add_at", 3):
            array, index, _ = stmt.value.args
            return self._sliced(ast.Subscript(array, index, ast.Load()))
        if assigned_name(stmt) is None or isinstance(stmt.value, ast.Subscript):
            return None
        value = stmt.value
        if called(value, "getitem_vjp", 3):
            return self._sliced(ast.Subscript(value.args[1], value.args[2], ast.Load()))
        if text_of(getattr(value, "func", None)) in ("np.sum", "sum_over") and value.args:
            value = value.args[0]
        return self.axes_of(value)

    def filled(self, a: tuple | None, b: tuple | None) -> tuple | None:
        """A run's shape `a` with its unknown axes taken from `b`, a statement it takes."""
        if a is None or b is None or len(a) != len(b):
            return a if a is not None else b
        return tuple(x if self.known(x) else y for x, y in zip(a, b))


def _longer(a: tuple, b: tuple) -> tuple:
    """The stacks' axes of a matrix product: broadcast, the longer's where one is missing."""
    if len(a) < len(b):
        a, b = b, a
    return a[: len(a) - len(b)] + tuple(
        y if x is None or x == UNIT else x for x, y in zip(a[len(a) - len(b) :], b)
    )


def _slice(item) -> bool:
    return isinstance(item, ast.Slice) or (
        isinstance(item, ast.Call)
        and text_of(item.func) == "slice"
        and 1 <= len(item.args) <= 3
        and not item.keywords
    )


def _length(item):
    """The number of elements `lower:upper` takes, as a linear form (`2 * b:3 * b`: b), where
    both bounds are (`lower` may be omitted), not negative numbers, and the step is 1."""
    lower, upper, step = _slice_parts(item)
    if step is not None and constant_int(step) != 1 or upper is None:
        return None
    stop, start = _linear(upper), _linear(lower) if lower is not None else ((), 0)
    if stop is None or start is None or stop[1] < 0 and not stop[0] or start[1] < 0:
        return None
    terms = dict(stop[0])
    for term, k in start[0]:
        terms[term] = terms.get(term, 0) - k
    return tuple(sorted((t, k) for t, k in terms.items() if k)), stop[1] - start[1]


def _linear(node):
    """`node` as (((term, coefficient), ...), constant): a sum of integer multiples of terms
    (names, other expressions: their text) and a number; None where a number is not an int."""
    if isinstance(node, ast.Constant):
        return ((), node.value) if type(node.value) is int else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _linear(node.operand)
        return None if inner is None else (tuple((t, -k) for t, k in inner[0]), -inner[1])
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        a, b = _linear(node.left), _linear(node.right)
        if a is None or b is None:
            return None
        sign = 1 if isinstance(node.op, ast.Add) else -1
        terms = dict(a[0])
        for t, k in b[0]:
            terms[t] = terms.get(t, 0) + sign * k
        return tuple(sorted((t, k) for t, k in terms.items() if k)), a[1] + sign * b[1]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        for factor, other in ((node.left, node.right), (node.right, node.left)):
            k = constant_int(factor)
            inner = _linear(other) if k is not None else None
            if inner is not None:
                return tuple((t, k * c) for t, c in inner[0] if k * c), k * inner[1]
    return (((ast.dump(node), 1),), 0)


def _text(part):
    """A slice's bound as a key: an int (`-1` and `-(1)` alike), else its text, or None."""
    if part is None:
        return None
    value = constant_int(part)
    return value if value is not None else ast.dump(part)


def _slice_parts(item) -> list:
    """A slice's (start, stop, step) nodes, None where omitted: `:d` and `slice(None, d,
    None)` alike."""
    if isinstance(item, ast.Slice):
        parts = [item.lower, item.upper, item.step]
    else:
        parts = list(item.args)
        parts = [None, parts[0], None] if len(parts) == 1 else parts + [None] * (3 - len(parts))
    return [None if isinstance(p, ast.Constant) and p.value is None else p for p in parts]


def _bounds(item):
    """(start, stop or None, step) of a slice with constant bounds, or None."""
    if isinstance(item, ast.Slice):
        parts = [item.lower, item.upper, item.step]
    elif (
        isinstance(item, ast.Call)
        and text_of(item.func) == "slice"
        and len(item.args) == 3
        and not item.keywords
    ):
        parts = list(item.args)
    else:
        return None
    values = []
    for part, default in zip(parts, (0, None, 1)):
        if part is None or (isinstance(part, ast.Constant) and part.value is None):
            values.append(default)
        else:
            value = constant_int(part)
            if value is None:
                return None
            values.append(value)
    return tuple(values)


def moved_up(stmts: list, refused, take) -> list:
    """The statements after `refused` that `take` (the run's) accepted, to run before it and
    those between: plain assignments to names, among plain assignments, reading nothing the
    statements they pass assign and assigning nothing those read. One the run does not take
    stays where it is, and is passed like `refused`: what reads its name stays after it. Nothing
    moves past a statement that writes into an array (`t = Q.sort()`, `out=`): what it writes
    may be read through any view."""
    skipped = [refused]
    found = []
    for stmt in stmts[:32]:
        if not all(_plain(s) for s in skipped) or written_in_place(skipped[-1:]):
            break
        if _plain(stmt):
            mine = {stmt.targets[0].id}
            theirs = {s.targets[0].id for s in skipped}
            if (
                not (names_in([stmt.value]) & theirs)
                and not any(mine & names_in([s]) for s in skipped)
                and take(stmt)
            ):
                found.append(stmt)
                continue
        skipped.append(stmt)
    return found


def _plain(stmt) -> bool:
    return (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
    )
