"""The code `s2sad.grad(f)` generates for scalar arguments, made CUDA device code: NumPy's scalar
functions spelled with `math`'s or a device helper of this module, the helpers it uses written
beside it, and a refusal, naming the user's line, of what CUDA cannot compile.

Numba's CUDA target does not compile NumPy's ufuncs reliably on scalars (on an H200 with
numba-cuda 0.68, np.exp, np.sqrt and np.sum failed where np.log compiled), while its simulator
runs any of them as Python does; so device code calls none of NumPy's functions but `_KEPT`.
"""

from __future__ import annotations

import ast
import builtins
import inspect

from .errors import UnsupportedSyntaxError

_MATH = {
    "exp": "math.exp",
    "log": "math.log",
    "log1p": "math.log1p",
    "expm1": "math.expm1",
    "log2": "math.log2",
    "log10": "math.log10",
    "sqrt": "math.sqrt",
    "sin": "math.sin",
    "cos": "math.cos",
    "tan": "math.tan",
    "arcsin": "math.asin",
    "arccos": "math.acos",
    "arctan": "math.atan",
    "sinh": "math.sinh",
    "cosh": "math.cosh",
    "tanh": "math.tanh",
    "arcsinh": "math.asinh",
    "arccosh": "math.acosh",
    "arctanh": "math.atanh",
    "arctan2": "math.atan2",
    "hypot": "math.hypot",
    "floor": "math.floor",
    "ceil": "math.ceil",
    "abs": "math.fabs",
    "absolute": "math.fabs",
    "fabs": "math.fabs",
    "power": "math.pow",
    "deg2rad": "math.radians",
    "radians": "math.radians",
    "rad2deg": "math.degrees",
    "degrees": "math.degrees",
    "sign": "np_sign",
    "square": "np_square",
    "reciprocal": "np_reciprocal",
    "exp2": "np_exp2",
    "logaddexp": "np_logaddexp",
    "not_equal": "np_not_equal",
}
# compiled on the GPU as they are (NaN-propagating, unlike the builtins max and min)
_KEPT = {"maximum", "minimum", "fmax", "fmin"}

HEADER = """import math

import numpy as np
from numba import cuda
"""

# The device helpers: generated code's runtime helpers for numbers, and NumPy's functions that
# `math` lacks. Their names are reserved (pipeline/reserved.py): a user's name never shadows them.
HELPERS = {
    "grad_seed": "def grad_seed(out):\n    return 1.0",
    "stop_gradient": "def stop_gradient(x):\n    return x",
    # the kernel stores each result into an array of its dtype
    "in_dtype_of": "def in_dtype_of(v, x):\n    return v",
    # a loop's values are numbers on the device (pipeline/carried.py's forms for arrays)
    "as_number": "def as_number(v):\n    return v",
    "widened_by": "def widened_by(v, *dtypes):\n    return v",
    "zeros_like": "def zeros_like(x):\n    return 0.0",
    "unbroadcast": "def unbroadcast(g, x):\n    return g",
    "np_sign": """def np_sign(x):
    if x > 0:
        return 1.0
    if x < 0:
        return -1.0
    if x == 0:
        return 0.0
    return x  # NaN""",
    "nan_skip_split": """def nan_skip_split(x1, x2, wins):
    if math.isnan(x2):
        return 0.0 if math.isnan(x1) else 1.0
    return wins * (0.5 if x1 == x2 else 1.0)""",
    "np_square": "def np_square(x):\n    return x * x",
    "np_not_equal": "def np_not_equal(x1, x2):\n    return x1 != x2",
    "np_reciprocal": "def np_reciprocal(x):\n    return 1.0 / x",
    "np_exp2": "def np_exp2(x):\n    return math.pow(2.0, x)",
    "np_logaddexp": """def np_logaddexp(x1, x2):
    top = max(x1, x2)
    if math.isinf(top):
        return x1 + x2 if top < 0 else top
    return top + math.log1p(math.exp(-abs(x1 - x2)))""",
    "pow_vjp_exponent": """def pow_vjp_exponent(g, ans, x):
    if x > 0:
        return g * ans * math.log(x)
    return 0.0""",
    "builtin_extremum_vjp": """def builtin_extremum_vjp(g, args, k, ans):
    ties = 0
    for a in args:
        if a == ans:
            ties += 1
    if ties == 0:
        return 0.0 * g
    return g * (args[k] == ans) / ties""",
    "even_split": """def even_split(x1, x2):
    if x1 == x2:
        return 0.5
    return 1.0""",
}


def helpers_used(tree) -> str:
    """The text of the device helpers the device code calls, each a device function."""
    read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    return "".join(
        f"\n\n@cuda.jit(device=True)\n{text}\n" for name, text in HELPERS.items() if name in read
    )


class _ToMath(ast.NodeTransformer):
    """np.sin(x) -> math.sin(x), np.sign(x) -> np_sign(x): device code has math, not ufuncs."""

    def visit_Attribute(self, node):
        self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id == "np" and node.attr in _MATH:
            return ast.parse(_MATH[node.attr], mode="eval").body
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        func = node.func
        if (  # np.sum of a number (an unbroadcast to a scalar) is the number
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id == "np"
            and func.attr == "sum"
            and len(node.args) == 1
            and not node.keywords
        ):
            return node.args[0]
        if (  # as are the whole sums and means jitted code is lowered to
            isinstance(func, ast.Name)
            and func.id in ("sum_over", "mean_over")
            and len(node.args) == 3
            and all(isinstance(a, ast.Constant) for a in node.args[1:])
            and [a.value for a in node.args[1:]] == [None, False]
            and not node.keywords
        ):
            return node.args[0]
        return node


def device_tree(func, code: str):
    """The generated code as device code, or a refusal of what CUDA cannot compile."""
    if "_tape = []" in code or "_tape = shape_tape()" in code or "push_row(" in code:
        raise UnsupportedSyntaxError(
            f"{where(func, None)}: the gradient of {func.__name__} records values on a tape "
            "(a loop), which CUDA device code cannot hold",
            hint="use target='cpu' (jit=True) for loops whose adjoint records values",
        )
    tree = _ToMath().visit(ast.parse(code))
    calls = _numpy_calls(tree)
    if calls:
        raise UnsupportedSyntaxError(
            f"{where(func, calls[0])}: the gradient of {func.__name__} calls "
            f"{', '.join(calls)}, which {'have' if len(calls) > 1 else 'has'} no CUDA device "
            "form here",
            hint="write it with math's functions, or use target='cpu' (jit=True)",
        )
    return tree


def refuse_unknown(func, tree, namespace) -> None:
    """Names the device code reads that nothing defines: a helper with no device form."""
    bound = {a.arg for node in ast.walk(tree) if isinstance(node, ast.arguments) for a in node.args}
    bound |= {
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
    }
    read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    missing = sorted(read - bound - set(namespace) - set(dir(builtins)))
    if missing:
        raise UnsupportedSyntaxError(
            f"{where(func, None)}: the gradient of {func.__name__} needs s2sad's "
            f"{', '.join(missing)}, which CUDA device code lacks: target='cuda' differentiates "
            "functions of numbers (the body of an elementwise kernel), not of arrays",
            hint="use target='cpu' (jit=True)",
        )


def _numpy_calls(tree) -> list[str]:
    """NumPy functions left in device code that CUDA does not compile on scalars."""
    return sorted(
        {
            f"np.{node.func.attr}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "np"
            and node.func.attr not in _KEPT
        }
    )


def where(func, call) -> str:
    """`file:line` of the user's line calling `call` (`np.cbrt`), or of the function's def."""
    code = func.__code__
    line = code.co_firstlineno
    if call is not None:
        try:
            lines, first = inspect.getsourcelines(func)
        except (OSError, TypeError):
            lines, first = [], line
        attr = "." + call.split(".")[-1] + "("
        line = next((first + k for k, text in enumerate(lines) if attr in text), line)
    return f"{code.co_filename}:{line}"
