"""Shapes across ranks in a fused run: which axes of a value are known to have length 1
(`keepdims`, `x[:, None]`, `x[:, 2:3]`), how an array's axes map onto the loops of a run
(NumPy's right-aligned broadcasting, index 0 along a length-1 axis), and the reductions over an
axis a run folds in as accumulators. A run's guard compares the actual shapes with what these
assume, so a wrong guess costs a fallback to the unfused statements, never a wrong number."""

from __future__ import annotations

import ast

from ...astcopy import clone, walk_nodes
from .syntax import SHAPE_ONLY, UFUNCS, assign, load, origin, text_of

# s2sad's reductions over an axis as the lowering writes them: `sum_over(x, 1, True)`
_OVER = frozenset({"sum_over", "max_over", "min_over", "mean_over", "prod_over", "norm_over"})
_SPREADS = frozenset({"var_over", "std_over"})  # (a fourth argument: ddof)
# calls whose value has the shape of their one array argument
_SAME_SHAPE = frozenset({"stop_gradient"}) | UFUNCS


def constant_int(node):
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = constant_int(node.operand)
        return None if value is None else -value
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def unit_axes(nodes, rank, proven: bool = False) -> dict[str, frozenset]:
    """Each name -> the axes of its value known to have length 1, where every assignment of it
    says so (a guess the guards check: names assigned nowhere here have none). `proven`: only
    the axes of length 1 whatever the shapes (`x[:, None]`, `keepdims`), not those of slices
    (`x[:, 2:3]` is empty where `x` has two columns), for code no guard protects."""
    found: dict[str, frozenset] = {}
    for node in nodes:
        for n in walk_nodes(node):
            if isinstance(n, ast.Assign) and len(n.targets) == 1:
                target = n.targets[0]
                if isinstance(target, ast.Name):
                    units = units_of(n.value, found, rank, proven)
                    found[target.id] = found.get(target.id, units) & units
    return found


def units_of(node, found: dict, rank, proven: bool = False) -> frozenset:
    """The axes of `node`'s value known to have length 1, given those of the names (`found`);
    `proven`: as `unit_axes`."""
    none = frozenset()
    if isinstance(node, ast.Name):
        return found.get(node.id, none)
    if isinstance(node, ast.Subscript):
        return _subscript_units(node, found, rank, proven)
    name = text_of(getattr(node, "func", None))
    if (
        isinstance(node, ast.Call)
        and len(node.args) == 3 + (name in _SPREADS)
        and (name in _OVER | _SPREADS)
    ):
        axis, keep, r = constant_int(node.args[1]), node.args[2], rank(node.args[0])
        if axis is None or not (isinstance(keep, ast.Constant) and keep.value is True) or not r:
            return none
        return units_of(node.args[0], found, rank, proven) | {axis % r}
    if isinstance(node, ast.Call) and name in SHAPE_ONLY and len(node.args) > 1:
        return units_of(node.args[1], found, rank, proven)  # of the shape of its second argument
    if isinstance(node, ast.Call) and name in _SAME_SHAPE and len(node.args) == 1:
        return units_of(node.args[0], found, rank, proven)
    if isinstance(node, ast.Call) and name == "per_count" and node.args:  # a mean (means.py)
        return units_of(node.args[0], found, rank, proven)
    if isinstance(node, ast.UnaryOp):
        return units_of(node.operand, found, rank, proven)
    if isinstance(node, ast.BinOp) and not isinstance(node.op, ast.MatMult):
        operands = [node.left, node.right]
    elif isinstance(node, ast.Call) and (name in _SAME_SHAPE or name == "np.where"):
        operands = list(node.args)
    else:
        return none
    r = rank(node)
    if not isinstance(r, int):
        return none
    units = set(range(r))
    for operand in operands:
        q = rank(operand)
        if not isinstance(q, int):
            return none
        mine = units_of(operand, found, rank, proven)
        units -= {r - q + j for j in range(q) if j not in mine}
    return frozenset(units)


def _subscript_units(node: ast.Subscript, found: dict, rank, proven: bool) -> frozenset:
    """`x[:, None]`, `x[:, 2:3]`, `x[0]`: the axes of the result of length 1 (of slices, a
    guess: none where `proven`)."""
    r = rank(node.value)
    if not isinstance(r, int):
        return frozenset()
    mine = units_of(node.value, found, rank, proven)
    items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    units, axis, out = set(), 0, 0
    for item in items:
        if isinstance(item, ast.Constant) and item.value is None:
            units.add(out)
            out += 1
        elif isinstance(item, ast.Slice):
            lower = 0 if item.lower is None else constant_int(item.lower)
            upper = constant_int(item.upper)
            step = constant_int(item.step) if item.step is not None else 1
            whole = item.lower is None and item.upper is None and item.step is None
            if whole and axis in mine:
                units.add(out)
            elif proven:
                pass
            elif item.step is None and _unit_span(item, found):  # `g[:, a.shape[1] : ...]`
                units.add(out)
            elif step == 1 and lower == -1 and item.upper is None:  # `x[:, -1:]`
                units.add(out)
            elif (
                lower is not None
                and upper is not None
                and step == 1
                and upper - lower == 1
                and (lower >= 0 or upper < 0)
            ):
                units.add(out)
            axis, out = axis + 1, out + 1
        elif constant_int(item) is not None:
            axis += 1
        else:
            return frozenset()
    units |= {out + j - axis for j in mine if j >= axis}
    return frozenset(units)


def _unit_span(item: ast.Slice, found: dict) -> bool:
    """`lo : lo + 1` or `lo : lo + a.shape[j]` (`: a.shape[j]`) where `a`'s axis `j` is taken to
    have length 1: the slices a concatenation's cotangent is cut into (fusion/views)."""
    upper = item.upper
    if item.lower is None:
        length = upper
    elif isinstance(upper, ast.BinOp) and isinstance(upper.op, ast.Add):
        if ast.dump(upper.left) != ast.dump(item.lower):
            return False
        length = upper.right
    else:
        return False
    if isinstance(length, ast.Constant):
        return length.value == 1
    if not (isinstance(length, ast.Subscript) and isinstance(length.value, ast.Attribute)):
        return False
    shape = length.value
    j = constant_int(length.slice)
    return (
        shape.attr == "shape"
        and isinstance(shape.value, ast.Name)
        and j is not None
        and j in found.get(shape.value.id, frozenset())
    )


def right_aligned(rank: int, q: int, units: frozenset, run_units: frozenset):
    """The loop axis (None: index 0) each axis of a rank-`q` array with length-1 `units` reads
    in a run of `rank` loops, `run_units` of them of length 1; None where it cannot."""
    mapping = []
    for j in range(q):
        k = rank - q + j
        if j in units:
            mapping.append(None)
        elif k in run_units:
            return None  # an axis the run does not loop over
        else:
            mapping.append(k)
    return tuple(mapping)


def axis_reduction(value, rank):
    """(the array summed, its axis, keepdims) of `np.sum(g, axis=k)`, `sum_over(g, k, True)`."""
    if not isinstance(value, ast.Call):
        return None
    name = text_of(value.func)
    if name == "np.sum" and len(value.args) == 1 and len(value.keywords) == 1:
        keyword = value.keywords[0]
        axis, keep = (keyword.value if keyword.arg == "axis" else None), False
    elif name == "sum_over" and len(value.args) == 3 and not value.keywords:
        axis, keep = value.args[1], value.args[2]
        if not (isinstance(keep, ast.Constant) and isinstance(keep.value, bool)):
            return None
        keep = keep.value
    else:
        return None
    axis, r = constant_int(axis), rank(value.args[0])
    if axis is None or not isinstance(r, int) or not -r <= axis < r:
        return None
    return value.args[0], axis % r, keep


def expansion(node):
    """(g, x, axis, keepdims) of `expand_reduced(g, x, axis=k[, keepdims=True])`."""
    if not (
        isinstance(node, ast.Call)
        and text_of(node.func) == "expand_reduced"
        and len(node.args) == 2
        and {k.arg for k in node.keywords} in ({"axis"}, {"axis", "keepdims"})
    ):
        return None
    options = {k.arg: k.value for k in node.keywords}
    axis = constant_int(options["axis"])
    keep = options.get("keepdims", ast.Constant(False))
    if axis is None or not (isinstance(keep, ast.Constant) and isinstance(keep.value, bool)):
        return None
    return node.args[0], node.args[1], axis, keep.value


def shape_of(sizes: dict, rank: int) -> ast.expr:
    """The tuple of a run's loop sizes (1 along the axes it does not loop over)."""
    items = [sizes[k] if k in sizes else ast.Constant(1) for k in range(rank)]
    return ast.Tuple(items, ast.Load())


def size(name: str, axis: int) -> ast.expr:
    shape = ast.Attribute(load(name), "shape", ast.Load())
    return ast.Subscript(shape, ast.Constant(axis), ast.Load())


def guard(maps: dict, sizes: dict, full: tuple, masks: set) -> ast.expr:
    """`float_arrays(a, b) and b.shape == a.shape and c.shape[0] == a.shape[1] and ...`: the
    arrays' shapes are those the run's index maps assume; those read only as `np.where`'s
    condition (`masks`) may have any dtype."""
    numbers = [load(n) for n in maps if n not in masks]
    checks: list = [ast.Call(load("float_arrays"), numbers, [])]
    anchor = next((n for n, m in maps.items() if m == full), None)
    for name, mapping in maps.items():
        if anchor is not None and name != anchor and mapping == full:
            whole = [ast.Attribute(load(n), "shape", ast.Load()) for n in (name, anchor)]
            checks.append(ast.Compare(whole[0], [ast.Eq()], whole[1:]))
            continue
        for j, k in enumerate(mapping):
            expected = ast.Constant(1) if k is None else sizes[k]
            if ast.dump(expected) != ast.dump(size(name, j)):  # not the size itself
                checks.append(ast.Compare(size(name, j), [ast.Eq()], [expected]))
    return ast.BoolOp(ast.And(), checks) if len(checks) > 1 else checks[0]


def in_run_dtype(fused: list, unfused: list, dtype: str) -> list:
    """`t = in_dtype_of(t, a)` for each value both branches assign: the statements widen a
    float32 value meeting a Python float (`0.5 * k * u`) to float64 in compiled code, where the
    fused branch, as NumPy, keeps the dtype of the run's arrays (`a`); Numba types a name once,
    and fails to where the two branches disagree. An identity for float64 runs, and in Python.
    Each is of the unfused branch's last statement, under its `# line` comment (the run's own
    last statement may be one left after the branches, of another line)."""
    defined = _assigned(fused)
    last = unfused[-1] if unfused else None
    return [
        origin(assign(n, ast.Call(load("in_dtype_of"), [load(n), load(dtype)], [])), last)
        for n in _assigned(unfused)
        if n in defined
    ]


def _assigned(stmts: list) -> dict:
    """The names the top-level statements `stmts` assign, in order."""
    return {
        t.id: None
        for s in stmts
        if isinstance(s, ast.Assign)
        for t in s.targets
        if isinstance(t, ast.Name)
    }


def fusible_test(arrays: list[str]) -> ast.expr:
    """`fusible(a, b) and fusible(a, c)`: each array against the first (Numba passes a call's
    arrays as one tuple, which for twenty arrays cost more than the loop they guard)."""
    if len(arrays) == 1:
        return ast.Call(load("fusible"), [load(arrays[0])], [])
    pairs = [ast.Call(load("fusible"), [load(arrays[0]), load(a)], []) for a in arrays[1:]]
    return pairs[0] if len(pairs) == 1 else ast.BoolOp(ast.And(), pairs)


def with_small_powers(test: ast.expr, exponents: list) -> ast.expr:
    """`test and 0 <= j < 256` for each exponent `j` of the run's `power_lanes(t_i, j)`, whose
    form for an integer `j` holds in that range alone (rules/lanes.py)."""
    for exponent in exponents:
        small = ast.Compare(
            ast.Constant(0), [ast.LtE(), ast.Lt()], [clone(exponent), ast.Constant(256)]
        )
        test = ast.BoolOp(ast.And(), [test, small])
    return test
