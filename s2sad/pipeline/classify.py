"""What each normalized statement computes, matched against the rule table.

Activity analysis and the reverse transform both read this view, so a statement is classified once.
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass, field

import numpy as np

from .. import ir, rules
from .reserved import STATIC_ATTRS
from .nodes import index_expr
from ..rules.indexing import getitem
from ..rules.common import snapshot
from ..rules.elementwise import DTYPE_AT, astype, item_of
from ..rules.registry import Bound

BINOPS = {
    ast.Add: np.add,
    ast.Sub: np.subtract,
    ast.Mult: np.multiply,
    ast.Div: np.divide,
    ast.Pow: np.power,
    ast.MatMult: np.matmul,
    ast.Mod: np.mod,
    ast.FloorDiv: np.floor_divide,
}
UNARYOPS = {ast.USub: np.negative, ast.UAdd: np.positive}
_BITOPS = {
    ast.BitAnd: np.bitwise_and,
    ast.BitOr: np.bitwise_or,
    ast.BitXor: np.bitwise_xor,
    ast.LShift: np.left_shift,
    ast.RShift: np.right_shift,
}


def ufunc_name(op: type) -> str:
    """The ufunc an operator (its type) applies, as NumPy's errors name it (`/`: 'divide')."""
    return {**BINOPS, **_BITOPS}[op].__name__


METHODS = {
    "sum": np.sum,
    "mean": np.mean,
    "prod": np.prod,
    "max": np.max,
    "min": np.min,
    "var": np.var,
    "std": np.std,
    "reshape": np.reshape,
    "ravel": np.ravel,
    "flatten": np.ravel,
    "squeeze": np.squeeze,
    "transpose": np.transpose,
    "swapaxes": np.swapaxes,
    "dot": np.dot,
    "copy": np.copy,
    "clip": np.clip,
    "trace": np.trace,
    "cumsum": np.cumsum,
    "cumprod": np.cumprod,
    "diagonal": np.diagonal,
    "argmax": np.argmax,
    "argmin": np.argmin,
    "any": np.any,
    "item": item_of,  # x.item() of a number or a one-element array (with an index: refused)
    "astype": astype,  # np.astype (NumPy >= 2.1), or a stand-in
    "conj": np.conjugate,
    "conjugate": np.conjugate,
    "all": np.all,
}
_VARARG_METHODS = {"reshape", "transpose"}  # x.reshape(2, 3) means np.reshape(x, (2, 3))
# attributes read as functions of the array: their rules are the functions'
_ARRAY_ATTRS = {"T": np.transpose, "real": np.real, "imag": np.imag}
_NONDIFF_BUILTINS = {len, isinstance, range}


@dataclass
class Op:
    stmt: ast.stmt
    target: str | None
    kind: str  # "rule" | "nondiff" | "unknown" | "effect"
    bound: Bound | None = None
    operands: list[tuple[str, int | None, str]] = field(default_factory=list)
    # (rule parameter, element index for a list parameter, operand name)
    reads: set[str] = field(default_factory=set)  # every local name the statement reads
    what: str = ""  # the callee, for error messages
    func: object = None  # the function the statement applies (operators map to ufuncs)
    args: list = field(default_factory=list)  # its positional arguments (AST nodes of the call)
    keywords: dict = field(default_factory=dict)
    nested: set[str] = field(default_factory=set)  # names read inside a non-atomic operand
    fixed: dict[str, set[str]] = field(default_factory=dict)
    # rule parameter the rule has no derivative for -> the local names its argument reads
    weighed: bool = False  # a store into an array of unknown dtype (integer_writes.py)

    def without_rule(self, varied: set[str]) -> str | None:
        """What has no derivative rule when a differentiated value reaches a parameter the rule
        has no template for (np.einsum's subscripts in its sublist form), or None."""
        for param, names in self.fixed.items():
            if names & varied:
                shown = ", ".join(sorted(names & varied))
                return (
                    f"{self.what} in its argument `{param}`, which is differentiated here "
                    f"({shown})"
                )
        return None


def _names(node: ast.AST) -> set[str]:
    """Names whose values `node` reads; `x.shape`, `x.ndim`, ..., `len(x)` and
    `isinstance(x, ...)` read no value of `x` (as normalization counts them)."""
    if isinstance(node, ast.Attribute) and node.attr in STATIC_ATTRS:
        return set()
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("len", "isinstance")
        and ir.callee(node.func) in (None, len, isinstance)
    ):
        return set()
    if isinstance(node, ast.Name):
        return {node.id}
    return set().union(*(_names(c) for c in ast.iter_child_nodes(node)))


def _integer_dtype(node) -> bool:
    """Whether `node` spells an integer or boolean dtype (int, np.int32, "int64", bool): a
    result cast to it is piecewise constant, with a zero derivative."""
    return dtype_kind(node) is not None


def kind_letter(dtype: np.dtype) -> str | None:
    """ "b" for bool, "u" for uint64, "i" for the other integers, else None: ranks.py's kinds.
    uint64 stands apart as the one integer dtype that gives float64 with another (a signed one),
    in NumPy and in Numba; a uint8 index shares the transform of an int64 one."""
    if dtype.kind == "u" and dtype.itemsize == 8:
        return "u"
    return {"i": "i", "u": "i", "b": "b"}.get(dtype.kind)


def dtype_kind(node) -> str | None:
    """`kind_letter` of the dtype `node` spells, else None (ranks.py's kinds: a value stored into
    such an array is truncated, and carries no derivative)."""
    dtype = spelled_dtype(node)
    return kind_letter(dtype) if dtype is not None else None


def spelled_dtype(node) -> np.dtype | None:
    """The dtype `node` spells (`int`, `float`, `np.int32`, "float64", `bool`), else None."""
    if isinstance(node, ast.Name):
        value = {"int": int, "bool": bool, "float": float, "complex": complex}.get(node.id)
    elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        value = getattr(np, node.attr, None) if node.attr[:1].islower() else None
    elif isinstance(node, ast.Constant) and isinstance(node.value, str):
        value = node.value
    else:
        return None
    try:
        return np.dtype(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def given_dtype(callee, args: list, keywords: dict):
    """The dtype argument of a call of `callee` (`args` its positional arguments, a method's array
    first), by keyword or at the position NumPy reads it from (`np.zeros(3, np.int64)`), else
    None. A `*args` or `**kwargs` that may hold it is returned itself: a dtype not spelled."""
    if "dtype" in keywords or None in keywords:
        return keywords.get("dtype", keywords.get(None))
    at = next((at for f, at in DTYPE_AT.items() if f is callee), None)
    rule = rules.lookup(callee) if at is None and callee is not None else None
    for i, param in enumerate(rule.signature.parameters.values() if rule else ()):
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.KEYWORD_ONLY):
            break
        if param.name == "dtype":
            at = i
    starred = [a for a in args[: at if at is not None else 0] if isinstance(a, ast.Starred)]
    if at is None or starred:
        return starred[0] if starred else None
    return args[at] if at < len(args) else None


def classify(stmt: ast.stmt, local_names: set[str]) -> Op:
    if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Subscript):
        base = stmt.targets[0].value.id  # y[index] = v: an update of y
        op = Op(stmt, base, "setitem", reads=_names(stmt) & local_names)
        if isinstance(stmt.value, ast.Name) and stmt.value.id in local_names:
            op.operands.append(("v", None, stmt.value.id))
        return op
    if not isinstance(stmt, ast.Assign) or not isinstance(stmt.targets[0], ast.Name):
        return Op(stmt, None, "effect", reads=_names(stmt) & local_names)
    target = stmt.targets[0].id
    value = stmt.value
    if isinstance(value, ast.Call) and ir.callee(value.func) is snapshot and len(value.args) == 1:
        # snapshot(x[index]), snapshot(x.reshape(...)): differentiates as the read it copies
        inner = ast.Assign(stmt.targets, value.args[0])
        op = classify(inner, local_names)
        op.stmt = stmt
        return op
    reads = _names(value) & local_names
    op = Op(stmt, target, "nondiff", reads=reads)
    func, args, keywords = None, [], {}
    if isinstance(value, ast.Name):
        func, args = np.positive, [value]
    elif isinstance(value, ast.BinOp):
        func, args = BINOPS.get(type(value.op)), [value.left, value.right]
        op.what = f"the operator {type(value.op).__name__}"
    elif isinstance(value, ast.UnaryOp):
        func, args = UNARYOPS.get(type(value.op)), [value.operand]
        if func is None:
            return op
    elif isinstance(value, ast.Call):
        callee = ir.callee(value.func)
        args = list(value.args)
        keywords = {k.arg: k.value for k in value.keywords}
        if callee is None and not isinstance(value.func, ast.Attribute):
            op.kind, op.what = "unknown", f"a call of {ast.unparse(value.func)}"
            return op
        if callee is None:  # a method call on an array
            method = value.func.attr
            if method == "astype" and args and _integer_dtype(args[0]):
                op.reads = set()  # x.astype(int): integers carry no derivative
                return op
            func = METHODS.get(method)
            op.what = f"the method .{method}()"
            if method in _VARARG_METHODS and len(args) > 1:
                args = [ast.Tuple(args, ast.Load())]
            args = [value.func.value] + args
        else:
            func = callee
            op.what = ast.unparse(value.func)
            if callee in _NONDIFF_BUILTINS or rules.is_nondiff(callee):
                op.reads = set()  # only shapes or other non-differentiable facts
                return op
    elif isinstance(value, ast.Attribute):
        if value.attr in STATIC_ATTRS:
            return op
        if value.attr in _ARRAY_ATTRS:  # x.T, x.real, x.imag: as np.transpose(x), np.real(x)
            func, args = _ARRAY_ATTRS[value.attr], [value.value]
        op.what = f"the attribute .{value.attr}"
    elif isinstance(value, ast.Subscript):
        if not (isinstance(value.value, ast.Name) and value.value.id in local_names):
            # np.r_[x, y], np.c_[...], np.s_[...]: not a read of an array s2sad follows
            op.kind, op.what = "unknown", f"{ast.unparse(value.value)}[...]"
            return op
        func, args = getitem, [value.value, index_expr(value.slice)]
    elif isinstance(value, (ast.Compare, ast.BoolOp, ast.Constant)):
        return op
    else:
        op.what = f"a {type(value).__name__} expression"
    op.func, op.args, op.keywords = func, args, keywords  # forward mode binds these itself
    rule = rules.lookup(func) if func is not None else None
    if func is not None and rules.is_nondiff(func):
        return op
    if rule is None:
        op.kind = "unknown"
        return op
    try:
        op.bound = rule.bind(args, keywords)
    except TypeError as exc:
        op.kind = "unknown"
        op.what += f" with these arguments ({exc})"
        return op
    if _integer_dtype(op.bound.args.get("dtype")):
        op.reads = set()  # np.sum(x, dtype=int), np.full(n, x, dtype=int): integer results
        return op
    outside = rule.outside_literal(op.bound.args)
    if outside:
        op.kind = "unknown"
        op.what += " " + outside
        return op
    op.kind = "rule"
    differentiable = rule.differentiable(op.bound)
    for param, arg in op.bound.args.items():
        if param not in differentiable and param not in rule.inert and isinstance(arg, ast.AST):
            if _names(arg) & local_names:  # refused if differentiated (activity.py)
                op.fixed[param] = _names(arg) & local_names
    for param in differentiable:
        arg = op.bound.args[param]
        if param in rule.seq:
            elts = arg.elts if isinstance(arg, (ast.Tuple, ast.List)) else None
            if elts is None:
                op.operands += [(param, None, n) for n in _names(arg) & local_names]
                op.kind = "unknown"
                op.what += " with a list variable (pass the list literally)"
                continue
            for i, elt in enumerate(elts):
                if isinstance(elt, ast.Name) and elt.id in local_names:
                    op.operands.append((param, i, elt.id))
                elif _names(elt) & local_names:  # max([a], b): refused if differentiated
                    op.fixed[param] = op.fixed.get(param, set()) | (_names(elt) & local_names)
        elif isinstance(arg, ast.Name) and arg.id in local_names:
            op.operands.append((param, None, arg.id))
        elif _names(arg) & local_names:  # a nested expression: fine only if it is constant
            op.nested |= _names(arg) & local_names
    return op
