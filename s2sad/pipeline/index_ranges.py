"""Integer indices proven in range by their loops' bounds (jit only): `y[i - 1]` in
`for i in range(1, n)`, where `n = x.shape[0]` and `y = np.zeros(n)`, needs no check. An index
is a linear form over the loops' variables and the function's stable values (names bound once,
at the top level, or never; axes of arrays bound so); the form's largest value under the loops'
bounds must stay below the axis's length and its smallest at or above minus it (Python's
negative indices). Consumes the statements of one generated function; bounds.py asks it of
each index it would otherwise check.
"""

from __future__ import annotations

import ast

_SHAPED = {"zeros", "ones", "empty", "full"}  # np.f(shape, ...): an array of that shape
_SHAPED_LIKE = {"zeros_like", "ones_like", "empty_like", "full_like", "copy"}
_CONST = ()  # the constant term's key in a form


class Ranges:
    """The stable values of a function's statements (`stmts`; `params`, its parameters):
    `primal_of` maps a derivative array to the primal array whose shape it has; `rank_of`, an
    expression's rank where known. Only an array's length is stable: a list's changes with
    `lst.append` (a method call, no rebinding), so `len` of a name of rank unknown (a list, a
    dict) is no form, nor an atom of one (break-it review: checks dropped past a grown list)."""

    def __init__(self, stmts: list, primal_of: dict, params=(), rank_of=None):
        self.primal_of = primal_of
        self.rank_of = rank_of
        self.defs: dict[str, ast.expr] = {}
        counts: dict[str, int] = {}
        for stmt in stmts:
            for node in ast.walk(stmt) if isinstance(stmt, ast.AST) else ():
                for name in bound_names(node):
                    counts[name] = counts.get(name, 0) + 1
        for stmt in stmts:  # (top level, bound once: one value from its binding on)
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                target = stmt.targets[0]
                if isinstance(target, ast.Name):
                    self.defs[target.id] = stmt.value
                elif isinstance(target, ast.Tuple) and _is_shape(stmt.value):
                    for k, t in enumerate(target.elts):
                        if isinstance(t, ast.Name):
                            self.defs[t.id] = ast.Subscript(stmt.value, ast.Constant(k))
        # (a parameter bound again has two values)
        self.stable = {n for n, c in counts.items() if c == 1 and n in self.defs} - set(params)
        self.unbound = lambda n: n not in counts  # (a parameter, a global)
        # names bound in the block being checked, and still holding, to the value bound
        # (`acc_add = i + k` before `x[acc_add]`): bounds.py keeps it as it walks the code
        self.local: dict[str, ast.expr] = {}
        self._nested_numbers(stmts, counts, set(params))

    def _nested_numbers(self, stmts: list, counts: dict, params: set) -> None:
        """Names bound once inside a loop or branch (`stop = n1 - 1` in an outer loop's body,
        the inner loop's bound) to a form of stable values alone: one value wherever they are
        bound, so stable too. Forms naming a loop's variable, or anything bound twice, are not."""
        nested = [
            node
            for stmt in stmts
            if isinstance(stmt, (ast.For, ast.While, ast.If, ast.With, ast.Try))
            for node in ast.walk(stmt)
            if isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and counts.get(node.targets[0].id) == 1
            and node.targets[0].id not in params
        ]
        for _ in range(len(nested)):  # (a bound may name another one's: until none is added)
            added = [a for a in nested if self.form(a.value, {}) is not None]
            for a in added:
                self.defs[a.targets[0].id] = a.value
                self.stable.add(a.targets[0].id)
            nested = [a for a in nested if a not in added]
            if not added:
                break

    def is_stable(self, name: str) -> bool:
        return name in self.stable or self.unbound(name)

    def is_array(self, name: str, depth: int = 0) -> bool:
        """Whether `name` holds an array (of a fixed length): of a rank known to be one or more,
        or made by NumPy (`np.zeros(n)`), or an alias of such a name."""
        rank = self.rank_of(ast.Name(name, ast.Load())) if self.rank_of else None
        if isinstance(rank, int) and rank >= 1:
            return True
        made = self.defs.get(name) if name in self.stable else None
        if isinstance(made, ast.Call) and _np_call(made) in _SHAPED | _SHAPED_LIKE:
            return True
        return isinstance(made, ast.Name) and depth < 20 and self.is_array(made.id, depth + 1)

    def in_range(self, index: ast.expr, array: str, axis: int, loops: dict) -> bool:
        """Whether `index` (an integer) is in range of `array`'s `axis` wherever it runs inside
        `loops` (variable -> its (lowest, highest) forms, or None where not known)."""
        form = self.form(index, loops)
        length = self.shape(array, axis)
        if form is None or length is None:
            return False
        high, low = self.extreme(form, loops, 1), self.extreme(form, loops, -1)
        if high is None or low is None:
            return False
        below = _nonnegative(_sum(length, high, -1, -1))
        return below and (_nonnegative(low) or _nonnegative(_sum(low, length, 1)))

    def extreme(self, form: dict, loops: dict, sign: int) -> dict | None:
        """`form`'s largest (`sign` 1) or smallest (-1) value, its loops' variables replaced by
        their bounds, innermost first (a bound may name an outer loop's variable)."""
        form = dict(form)
        for _ in range(32):
            loop = next((a for a in form if a and a[0] == "loop"), None)
            if loop is None:
                return form
            coef = form.pop(loop)
            bounds = loops.get(loop[1])
            if bounds is None:
                return None
            form = _sum(form, bounds[1] if coef * sign > 0 else bounds[0], coef)
        return None

    def form(self, node: ast.expr, loops: dict, depth: int = 0) -> dict | None:
        """`node` as {atom: coefficient} (the constant under `()`), or None where it is no
        linear form of stable values and loop variables."""
        if depth > 20:
            return None
        if isinstance(node, ast.Constant):
            ok = isinstance(node.value, int) and not isinstance(node.value, bool)
            return {_CONST: node.value} if ok else None
        if isinstance(node, ast.Name):
            if node.id in loops:
                return {("loop", node.id): 1} if loops[node.id] is not None else None
            if node.id in self.stable:
                found = self.form(self.defs[node.id], {}, depth + 1)
                return {("name", node.id): 1} if found is None else found
            if node.id in self.local:
                return self.form(self.local[node.id], loops, depth + 1)
            return {("name", node.id): 1} if self.unbound(node.id) else None
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            inner = self.form(node.operand, loops, depth + 1)
            return _sum({}, inner, -1 if isinstance(node.op, ast.USub) else 1) if inner else None
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
            left = self.form(node.left, loops, depth + 1)
            right = self.form(node.right, loops, depth + 1)
            if left is None or right is None:
                return None
            if isinstance(node.op, ast.Mult):
                for a, b in ((left, right), (right, left)):
                    if set(a) <= {_CONST}:
                        return _sum({}, b, a.get(_CONST, 0))
                return None
            return _sum(left, right, 1 if isinstance(node.op, ast.Add) else -1)
        if _is_shape(getattr(node, "value", None)) and isinstance(node.slice, ast.Constant):
            return self.shape(node.value.value.id, node.slice.value, depth + 1)
        if _called(node, "len") and isinstance(node.args[0], ast.Name):
            return self.shape(node.args[0].id, 0, depth + 1)
        return None

    def shape(self, array: str, axis: int, depth: int = 0) -> dict | None:
        """The length of `array`'s `axis` as a form: from the shape the array was made with
        where known, else the atom `array.shape[axis]` (of a stable array)."""
        array = self.primal_of.get(array, array)
        if array in self.local and not self.is_stable(array):
            return self._local_shape(self.local[array], axis, depth)
        if not isinstance(axis, int) or not self.is_stable(array) or depth > 20:
            return None
        if not self.is_array(array):
            return None
        made = self.defs.get(array) if array in self.stable else None
        if isinstance(made, ast.Call) and made.args and _np_call(made) in _SHAPED:
            given = made.args[0]
            if isinstance(given, ast.Tuple):
                if axis < len(given.elts):
                    found = self.form(given.elts[axis], {}, depth + 1)
                    return found if found is not None and _known(found) else _atom(array, axis)
            elif axis == 0:  # (an integer, not a shape tuple held by a name)
                found = self.form(given, {}, depth + 1)
                return found if found is not None and _known(found) else _atom(array, axis)
        if isinstance(made, ast.Name):  # (an alias)
            return self.shape(made.id, axis, depth + 1) or _atom(array, axis)
        if isinstance(made, ast.Call) and made.args and _np_call(made) in _SHAPED_LIKE:
            if isinstance(made.args[0], ast.Name) and not made.keywords:
                return self.shape(made.args[0].id, axis, depth + 1) or _atom(array, axis)
        return _atom(array, axis)

    def _local_shape(self, made: ast.expr, axis, depth: int) -> dict | None:
        """The length of `axis` of an array bound in the block being checked (`t = np.zeros(m)`
        in a loop's body), where its allocation gives it from stable values."""
        if not (isinstance(made, ast.Call) and made.args and _np_call(made) in _SHAPED):
            return None
        given = made.args[0]
        if isinstance(given, ast.Tuple):
            given = given.elts[axis] if isinstance(axis, int) and axis < len(given.elts) else None
        elif axis != 0:
            return None
        found = self.form(given, {}, depth + 1) if given is not None and depth < 20 else None
        return found if found is not None and _known(found) else None


def _atom(array: str, axis: int) -> dict:
    return {("shape", array, axis): 1}


def _known(form: dict) -> bool:
    """A form of constants and axes' lengths only (no name of unknown kind: a shape tuple)."""
    return all(a == _CONST or a[0] == "shape" for a in form)


def _sum(a: dict, b: dict, scale: int, constant: int = 0) -> dict:
    """`a + scale * b + constant`, terms that cancel dropped."""
    out = dict(a)
    for atom, coef in b.items():
        out[atom] = out.get(atom, 0) + scale * coef
    out[_CONST] = out.get(_CONST, 0) + constant
    return {k: v for k, v in out.items() if v}


def _nonnegative(form: dict) -> bool:
    """Provably >= 0: a constant >= 0 plus axes' lengths (never negative) added."""
    return form.get(_CONST, 0) >= 0 and all(
        a == _CONST or (a[0] == "shape" and c > 0) for a, c in form.items()
    )


def _is_shape(node) -> bool:
    """`x.shape` of a name."""
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "shape"
        and isinstance(node.value, ast.Name)
    )


def _called(node, name: str) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == name
        and len(node.args) == 1
        and not node.keywords
    )


def _np_call(node: ast.Call) -> str | None:
    func = node.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return func.attr if func.value.id in ("np", "numpy") else None
    return None


def bound_names(node: ast.AST) -> list:
    """The names `node` binds (an assignment's, a loop's, a `with`'s, a definition's...)."""
    if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
        return [node.id]
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.ExceptHandler) and node.name:
        return [node.name]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in node.names]
    return []


def loop_bounds(stmt: ast.For, ranges: Ranges, loops: dict) -> dict:
    """`loops` inside `stmt`: its variable's (lowest, highest) forms where it runs over a
    `range` with a constant step and its body never rebinds it; None (not known) otherwise."""
    inner = dict(loops)
    if not isinstance(stmt.target, ast.Name):
        for node in ast.walk(stmt.target):
            if isinstance(node, ast.Name):
                inner[node.id] = None
        return inner
    var = stmt.target.id
    inner[var] = None
    call = stmt.iter
    if not (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Name)
        and call.func.id in ("range", "prange")
        and 1 <= len(call.args) <= 3
        and not call.keywords
    ):
        return inner
    if any(var in bound_names(n) for s in stmt.body for n in ast.walk(s)):
        return inner
    args = list(call.args)
    start = ranges.form(args[0], loops) if len(args) > 1 else {}
    stop = ranges.form(args[1] if len(args) > 1 else args[0], loops)
    step = ranges.form(args[2], loops) if len(args) == 3 else {_CONST: 1}
    if start is None or stop is None or step is None or not set(step) <= {_CONST}:
        return inner
    step = step.get(_CONST, 0)
    if step > 0:
        inner[var] = (start, _sum(stop, {}, 1, -1))
    elif step < 0:
        inner[var] = (_sum(stop, {}, 1, 1), start)
    return inner
