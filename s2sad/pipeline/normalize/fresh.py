"""Which calls make new arrays: memory.py takes every other call's result to be possibly one of
its arguments or a view of one, so a write through it is refused. One known to make a new array
(a copy, a reduction, arithmetic) shares nothing and frees the user's code of that refusal.
"""

from __future__ import annotations

import ast
import builtins
import inspect

import numpy as np

from ...errors import NameResolutionError, S2SADError, UnsupportedSyntaxError
from ..names import names_stored

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


def fresh_call(node: ast.Call, resolver, local_funcs, not_integers: set, float_casts=None) -> bool:
    """Whether the call is known to return a new array (or a scalar), never an argument or a
    view of one (`not_integers`, `float_casts`: see `_cast`)."""
    if any(k.arg == "out" for k in node.keywords):
        return False
    func = node.func
    if isinstance(func, ast.Name) and func.id in local_funcs:
        return False  # (inlined, or a local function value: its result may be anything)
    if isinstance(func, ast.Attribute) and resolver.resolve(func) is None:
        method = getattr(np.ndarray, func.attr, None)  # (`y.clip(0, 1, y)`: out by position)
        if func.attr == "astype":
            return _copies(node, method, True)
        return func.attr in _FRESH_METHODS and _argument(method, node, "out", True) is None
    callee = resolver.resolve(func)
    if callee is np.asarray:  # of a float array as integers or booleans: a new array
        return _cast(node, resolver, not_integers, float_casts)
    module = getattr(callee, "__module__", None) or ""
    if module.split(".")[0] == "s2sad":
        return True  # runtime helpers in the code s2sad writes (normalized again)
    return makes_new_array(callee, node)


def makes_new_array(callee, node: ast.Call) -> bool:
    """Whether `node`, a call of `callee` (NumPy's or math's function, resolved), returns a new
    array (or a scalar), never an argument or a view of one: a ufunc, or one of `_FRESH_FUNCS`
    as called."""
    keywords = {k.arg: k.value for k in node.keywords}
    if "out" in keywords:
        return False
    if isinstance(callee, np.ufunc):  # (`np.multiply(x, 2.0, y)`: out by position)
        return len(node.args) <= callee.nin
    if _argument(callee, node, "out") is not None:  # (`np.clip(x, 0, 1, y)`)
        return False
    if callee is np.array:
        return _copies(node, callee)
    if callee is np.diff:  # `np.diff(a, 0)` is `a` itself
        n = node.args[1] if len(node.args) > 1 else keywords.get("n", ast.Constant(1))
        return isinstance(n, ast.Constant) and n.value != 0
    if callee is np.einsum:  # one operand may give a view (`np.einsum("ii->i", a)`)
        operands = len(node.args) - isinstance(node.args[0], ast.Constant) if node.args else 0
        return operands > 1
    if getattr(callee, "__module__", None) == "math":
        return True
    try:
        return callee in _FRESH_FUNCS
    except TypeError:  # unhashable
        return False


def _copies(node: ast.Call, callee, method: bool = False) -> bool:
    """Whether a call given `copy=` (np.array, `.astype`) copies: no copy, or copy=True."""
    copy = _argument(callee, node, "copy", method)
    return copy is None or (isinstance(copy, ast.Constant) and copy.value is True)


def _argument(callee, node: ast.Call, name: str, method: bool = False) -> ast.expr | None:
    """What `node` passes for `callee`'s parameter `name`, by keyword or by position (a method's
    signature starts with self), or None where it passes nothing (or None)."""
    given = next((k.value for k in node.keywords if k.arg == name), None)
    if given is None:
        try:
            params = list(inspect.signature(callee).parameters.values())[int(method) :]
        except (TypeError, ValueError):  # (no signature to read: float, a builtin)
            return None
        kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        names = [p.name for p in params if p.kind in kinds]
        if name in names and names.index(name) < len(node.args):
            given = node.args[names.index(name)]
    return None if isinstance(given, ast.Constant) and given.value is None else given


def _cast(node: ast.Call, resolver, not_integers: set, float_casts: set | None) -> bool:
    """Whether `np.asarray(a, dtype)` casts a parameter of no integer or boolean kind, never
    rebound (`not_integers`), to an integer or boolean dtype: a copy, as NumPy casts. Or, given
    `float_casts`, to any dtype: a copy where the argument's dtype is another, which the
    transform leaves to each call to check (the pair (parameter, dtype) added to the set)."""
    keywords = {k.arg: k.value for k in node.keywords}
    dtype = node.args[1] if len(node.args) > 1 else keywords.get("dtype")
    source = node.args[0] if node.args else None
    if not isinstance(source, ast.Name) or source.id not in not_integers or dtype is None:
        return False
    try:
        dtype = np.dtype(
            dtype.value if isinstance(dtype, ast.Constant) else resolver.resolve(dtype)
        )
    except (TypeError, NameResolutionError):
        return False
    if dtype.kind in "biu":
        return True
    if float_casts is None:
        return False
    float_casts.add((source.id, dtype.str))
    return True


def not_integers(parsed, ranks, wrt) -> set[str]:
    """The parameters, never rebound, whose arguments have no integer or boolean kind: those
    differentiated (floats: input_checks.py), and arrays the ranks give no kind (ranks.py)."""
    kinds = dict(ranks or ())
    arrays = {p for p, r in kinds.items() if isinstance(r, int) and not isinstance(r, bool)}
    return (arrays | (set(wrt) & set(parsed.params))) - set(names_stored([parsed.tree]))


def casts_a_dtype(tree: ast.AST) -> bool:
    """Whether the function calls `asarray` with a dtype (`np.asarray(x, np.float32)`)."""
    return any(
        isinstance(n, ast.Call)
        and getattr(n.func, "attr", getattr(n.func, "id", None)) == "asarray"
        and (len(n.args) > 1 or any(k.arg == "dtype" for k in n.keywords))
        for n in ast.walk(tree)
    )


def refuse_uncast(casts: tuple, fields: dict, arguments: dict) -> None:
    """Raise the refusal `_cast` left to each call where an array argument already has the
    dtype `np.asarray` casts it to: the cast is that array itself, not the copy the transform
    took it to be."""
    for name, dtype in casts:
        value = arguments.get(name)
        if isinstance(value, np.ndarray) and value.dtype == np.dtype(dtype):
            raise UnsupportedSyntaxError(
                fields["what"] + f" (`{name}` is of dtype {value.dtype} in this call)",
                **{k: v for k, v in fields.items() if k != "what"},
            )


def taking_casts(refused: S2SADError, parsed, ranks, rerun):
    """The transform `rerun(casts)` makes taking each `np.asarray(x, dtype)` of a parameter to
    be a copy (x of another dtype), where the first run was `refused` as sharing memory; the
    refusal left to each call where x is of that dtype (`refuse_uncast`). Code made for no call
    (ranks None: `s2sad emit`) has no such check, and is refused."""
    if ranks is None or not casts_a_dtype(parsed.tree):
        raise refused
    casts = set()
    try:
        compiled = rerun(casts)
    except S2SADError:
        raise refused from None
    if not casts:
        raise refused
    fields = {k: getattr(refused, k) for k in ("what", "file", "line", "source", "hint")}
    pairs = tuple((parsed.original.get(p, p), dtype) for p, dtype in sorted(casts))
    compiled.float_casts = (pairs, fields)
    return compiled
