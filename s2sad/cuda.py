"""`target="cuda"`: the gradient (or tangent) of a scalar function of scalars as a Numba CUDA
device function, and a kernel applying it elementwise over arrays (like `vmap(grad(f))`).

The device function is the code `s2sad.grad(f)` generates for scalar arguments, with NumPy's
scalar functions spelled through `math`. A function whose adjoint needs a tape (a loop that
records values) is refused: device code has no lists. Without a GPU, Numba's simulator
(`NUMBA_ENABLE_CUDASIM=1`) runs the same kernels.
"""

from __future__ import annotations

import ast
import inspect
import math

import numpy as np

from .transform_cache import transform_and_read
from .pipeline.normalize import NameAllocator, reserved_names
from .errors import S2SADError, UnsupportedSyntaxError
from .transformed import Transformed

_MATH = {
    "exp": "exp",
    "log": "log",
    "log1p": "log1p",
    "expm1": "expm1",
    "sqrt": "sqrt",
    "sin": "sin",
    "cos": "cos",
    "tan": "tan",
    "arcsin": "asin",
    "arccos": "acos",
    "arctan": "atan",
    "sinh": "sinh",
    "cosh": "cosh",
    "tanh": "tanh",
    "arctan2": "atan2",
    "hypot": "hypot",
    "floor": "floor",
    "ceil": "ceil",
    "abs": "fabs",
    "absolute": "fabs",
}

_DEVICE_HELPERS = """
import math

import numpy as np
from numba import cuda


@cuda.jit(device=True)
def grad_seed(out):
    return 1.0


@cuda.jit(device=True)
def stop_gradient(x):
    return x


@cuda.jit(device=True)
def in_dtype_of(v, x):
    return v  # the kernel stores each result into an array of its dtype


@cuda.jit(device=True)
def zeros_like(x):
    return 0.0


@cuda.jit(device=True)
def np_sign(x):
    if x > 0:
        return 1.0
    if x < 0:
        return -1.0
    return 0.0


@cuda.jit(device=True)
def pow_vjp_exponent(g, ans, x):
    if x > 0:
        return g * ans * math.log(x)
    return 0.0


@cuda.jit(device=True)
def even_split(x1, x2):
    if x1 == x2:
        return 0.5
    return 1.0
"""


class _ToMath(ast.NodeTransformer):
    """np.sin(x) -> math.sin(x), np.sign(x) -> np_sign(x): device code has math, not ufuncs."""

    def visit_Attribute(self, node):
        self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id == "np":
            if node.attr in _MATH:
                return ast.Attribute(ast.Name("math", ast.Load()), _MATH[node.attr], ast.Load())
            if node.attr == "sign":
                return ast.Name("np_sign", ast.Load())
        return node


class CudaTransformed:
    """Call with arrays (broadcast together); returns the gradients (or value and tangent)."""

    def __init__(self, func, wrt, mode: str):
        self.plain = Transformed(func, wrt, mode)
        self.func, self.mode, self.wrt = func, mode, self.plain.wrt
        self.params = list(self.plain.signature.parameters)
        self._kernel = None
        self.source = None

    def build(self):
        ranks = tuple((p, 0) for p in self.params)
        compiled = transform_and_read(self.func, self.wrt, self.mode, ranks, True)[0]
        if "_tape = []" in compiled.code or "_tape = shape_tape()" in compiled.code:
            raise UnsupportedSyntaxError(
                f"{compiled.name} records values on a tape, which CUDA device code cannot hold",
                hint="use target='cpu' (jit=True) for loops whose adjoint records values",
            )
        tree = _ToMath().visit(ast.parse(compiled.code))
        device = ast.unparse(tree).replace(f"def {compiled.name}(", f"def {compiled.name}_py(", 1)
        n_out = len(self.wrt) if self.mode == "grad" else 2
        # the kernel's names: the generated code's for the parameters, and its own unlike them
        generated = inspect.signature(compiled.functions[compiled.name]).parameters
        params = list(generated)[: len(self.params)]  # (a jvp's tangents follow)
        names = NameAllocator(set(params) | set(compiled.data) | reserved_names(self.func.__name__))
        dots = [names.fresh(f"{w}_dot") for w in compiled_wrt(self, params)]
        i, r = names.fresh("i"), names.fresh("r" if n_out > 1 else "r0")
        out = [names.fresh(f"out{k}") for k in range(n_out)]
        args, outs = ", ".join(params), ", ".join(out)
        reads = ", ".join(f"{p}[{i}]" for p in params)
        extra = ", ".join(f"{d}[{i}]" for d in dots) if self.mode == "jvp" else ""
        # the user's data: kernel arguments, read at each call (CUDA would freeze globals)
        extra = ", ".join(filter(None, [extra, *compiled.data]))
        data = "".join(f", {d}" for d in compiled.data)
        dots = ", ".join(dots) if self.mode == "jvp" else ""
        result = r
        stores = (
            "\n".join(f"        {o}[{i}] = {r}[{k}]" for k, o in enumerate(out))
            if n_out > 1
            else f"        {out[0]}[{i}] = {r}"
        )
        kernel = f"""

{compiled.name} = cuda.jit(device=True)({compiled.name}_py)


@cuda.jit
def {compiled.name}_kernel({args}{', ' + dots if dots else ''}, {outs}{data}):
    {i} = cuda.grid(1)
    if {i} < {out[0]}.shape[0]:
        {result} = {compiled.name}({reads}{', ' + extra if extra else ''})
{stores}
"""
        self.source = _DEVICE_HELPERS + "\n\n" + device + kernel
        namespace: dict = {"math": math, "np": np}
        namespace.update(compiled.globals)
        exec(compile(self.source, f"<s2sad cuda {compiled.name}>", "exec"), namespace)
        self._kernel = namespace[f"{compiled.name}_kernel"]
        self.n_out = n_out
        self.compiled = compiled

    def __call__(self, *args, tangent=None):
        if len(args) != len(self.params):
            raise TypeError(f"{self.func.__name__} takes {len(self.params)} arguments")
        if self.mode == "jvp" and tangent is None:
            raise TypeError("the jvp kernel needs tangent=")
        values = None if self._kernel is None else self.compiled.read(self.func)
        if values is None:  # first call, or a function or helper it calls changed: build again
            self.build()
            values = self.compiled.read(self.func)
        tangents = (
            [] if tangent is None else list(tangent if isinstance(tangent, tuple) else (tangent,))
        )
        arrays = np.broadcast_arrays(
            *[np.asarray(a, dtype=np.float64) for a in args],
            *[np.asarray(t, dtype=np.float64) for t in tangents],
        )
        shape = arrays[0].shape
        flat = [np.ascontiguousarray(a).ravel() for a in arrays]
        outs = [np.zeros(flat[0].size) for _ in range(self.n_out)]
        threads = 128
        blocks = max(1, (flat[0].size + threads - 1) // threads)
        self._kernel[blocks, threads](*flat, *outs, *values)
        results = tuple(o.reshape(shape) for o in outs)
        if self.mode == "jvp":
            return results
        return results if self.plain.wrt_tuple else results[0]


def compiled_wrt(transformed, params: list[str]) -> list[str]:
    """The generated code's names of the `wrt` parameters (by position in f's signature)."""
    user = list(transformed.params)
    return [params[user.index(w)] for w in transformed.wrt]


def cuda_transform(func, wrt, mode: str) -> CudaTransformed:
    if mode not in ("grad", "jvp"):
        raise S2SADError(f"target='cuda' supports grad and jvp, not {mode}")
    return CudaTransformed(func, wrt, mode)
