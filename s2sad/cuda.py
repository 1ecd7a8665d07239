"""`target="cuda"`: the gradient (or tangent) of a scalar function of scalars as a Numba CUDA
device function, and a kernel applying it elementwise over arrays (like `vmap(grad(f))`).

The device function is the code `s2sad.grad(f)` generates for scalar arguments, with NumPy's
scalar functions spelled through `math`. A function whose adjoint needs a tape (a loop that
records values) is refused: device code has no lists. Without a GPU, Numba's simulator
(`NUMBA_ENABLE_CUDASIM=1`) runs the same kernels.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import math

import numpy as np

from .transform_cache import transform_and_read
from .pipeline.normalize import NameAllocator, reserved_names
from .errors import S2SADError, UnsupportedSyntaxError
from .transformed import Transformed

# NumPy's scalar functions as device code spells them: `math`'s, or a helper below. Numba's CUDA
# target does not compile NumPy's ufuncs reliably on scalars (on an H200 with numba-cuda 0.68,
# np.exp and np.sqrt failed, np.log compiled), so device code calls none but those in _KEPT.
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
}
# compiled on the GPU as they are (NaN-propagating, unlike the builtins max and min)
_KEPT = {"maximum", "minimum", "fmax", "fmin"}

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
def unbroadcast(g, x):
    return g


@cuda.jit(device=True)
def nan_skip_split(x1, x2, wins):
    if math.isnan(x2):
        return 0.0 if math.isnan(x1) else 1.0
    return wins * (0.5 if x1 == x2 else 1.0)


@cuda.jit(device=True)
def np_square(x):
    return x * x


@cuda.jit(device=True)
def np_reciprocal(x):
    return 1.0 / x


@cuda.jit(device=True)
def np_exp2(x):
    return math.pow(2.0, x)


@cuda.jit(device=True)
def np_logaddexp(x1, x2):
    top = max(x1, x2)
    if math.isinf(top):
        return x1 + x2 if top < 0 else top
    return top + math.log1p(math.exp(-abs(x1 - x2)))


@cuda.jit(device=True)
def pow_vjp_exponent(g, ans, x):
    if x > 0:
        return g * ans * math.log(x)
    return 0.0


@cuda.jit(device=True)
def builtin_extremum_vjp(g, args, k, ans):
    ties = 0
    for a in args:
        if a == ans:
            ties += 1
    if ties == 0:
        return 0.0 * g
    return g * (args[k] == ans) / ties


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
        return node


def _unknown_names(tree, namespace) -> list[str]:
    """Names the device code reads that nothing defines: a helper with no device form."""
    bound = {a.arg for node in ast.walk(tree) if isinstance(node, ast.arguments) for a in node.args}
    bound |= {
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
    }
    read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return sorted(read - bound - set(namespace) - set(dir(builtins)))


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
        if _numpy_calls(tree):
            raise UnsupportedSyntaxError(
                f"the gradient of {self.func.__name__} calls {', '.join(_numpy_calls(tree))}, "
                "which has no CUDA device form here",
                hint="write it with math's functions, or use target='cpu' (jit=True)",
            )
        device = ast.unparse(tree).replace(f"def {compiled.name}(", f"def {compiled.name}_py(", 1)
        n_out = len(self.wrt) if self.mode == "grad" else 2
        # the kernel's names: the generated code's for the parameters, and its own unlike them
        generated = inspect.signature(compiled.functions[compiled.name]).parameters
        params = list(generated)[: len(self.params)]  # (a jvp's tangents follow)
        names = NameAllocator(set(params) | set(compiled.data) | reserved_names(self.func.__name__))
        dots = [names.fresh(f"{w}_dot") for w in compiled_wrt(self, params)]
        i, r = names.fresh("i"), names.fresh("r" if n_out > 1 else "r0")
        out = [names.fresh(f"out{k}") for k in range(n_out)]
        self._names = (params, dots, out, i, r)
        self.compiled, self.n_out = compiled, n_out
        self._device = _DEVICE_HELPERS + "\n\n" + device
        self._device += f"\n\n{compiled.name} = cuda.jit(device=True)({compiled.name}_py)\n"
        self._namespace: dict = {"math": math, "np": np}
        self._namespace.update(compiled.globals)
        exec(compile(self._device, f"<s2sad cuda {compiled.name}>", "exec"), self._namespace)
        missing = _unknown_names(tree, self._namespace)
        if missing:
            raise UnsupportedSyntaxError(
                f"the gradient of {self.func.__name__} calls {', '.join(missing)}, "
                "which has no CUDA device form here",
                hint="use target='cpu' (jit=True)",
            )
        self._kernels: dict = {}
        every = (True,) * (len(params) + len(dots) * (self.mode == "jvp"))
        self.source = self._device + self._kernel_text(every)
        self._kernel = self._kernel_for(every)

    def _kernel_text(self, arrays: tuple) -> str:
        """The kernel over arrays: each argument read at the thread's index, or, where `arrays`
        says it is a scalar, as it is (nothing spread over the GPU's memory)."""
        params, dots, out, i, r = self._names
        dots = dots if self.mode == "jvp" else []
        inputs = params + dots
        reads = [f"{p}[{i}]" if a else p for p, a in zip(inputs, arrays)]
        # the user's data: kernel arguments, read at each call (CUDA would freeze globals)
        call = ", ".join(reads + list(self.compiled.data))
        signature = ", ".join(inputs + out + list(self.compiled.data))
        stores = (
            "\n".join(f"        {o}[{i}] = {r}[{k}]" for k, o in enumerate(out))
            if len(out) > 1
            else f"        {out[0]}[{i}] = {r}"
        )
        name = self.compiled.name
        return f"""

@cuda.jit
def {name}_kernel({signature}):
    {i} = cuda.grid(1)
    if {i} < {out[0]}.shape[0]:
        {r} = {name}({call})
{stores}
"""

    def _kernel_for(self, arrays: tuple):
        if arrays not in self._kernels:
            namespace = dict(self._namespace)
            text = self._kernel_text(arrays)
            exec(compile(text, f"<s2sad cuda {self.compiled.name} kernel>", "exec"), namespace)
            self._kernels[arrays] = namespace[f"{self.compiled.name}_kernel"]
        return self._kernels[arrays]

    def __call__(self, *args, tangent=None, out=None):
        """`out=`: arrays of the result's shape (one, or a tuple of them) to write into, as
        NumPy's ufuncs take: on the GPU this saves allocating the results at each call."""
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
        cuda = self._namespace["cuda"]
        inputs = [*args, *tangents]
        scalar = [np.ndim(a) == 0 and not _on_device(cuda, a) for a in inputs]
        on_device = any(_on_device(cuda, a) for a in inputs)
        if on_device:
            flat, shape = self._device_inputs(inputs, scalar)
        else:  # NumPy arrays: broadcast, copied to the device, and the results back
            arrays = np.broadcast_arrays(
                *[np.asarray(a, dtype=np.float64) for a, s in zip(inputs, scalar) if not s]
            )
            shape = arrays[0].shape if arrays else ()
            copies = iter([cuda.to_device(np.ascontiguousarray(a).ravel()) for a in arrays])
            flat = [float(a) if s else next(copies) for a, s in zip(inputs, scalar)]
        size = int(np.prod(shape))
        given = self._outputs(out, shape, on_device)
        outs = (
            [o.reshape(size) for o in given]
            if given and on_device
            else [cuda.device_array(size, dtype=np.float64) for _ in range(self.n_out)]
        )
        threads = 256
        blocks = max(1, (size + threads - 1) // threads)
        kernel = self._kernel_for(tuple(not s for s in scalar))
        kernel[blocks, threads](*flat, *outs, *values)
        if given:
            if not on_device:
                for o, g in zip(outs, given):
                    o.copy_to_host(g.reshape(size))
            results = tuple(out) if isinstance(out, (tuple, list)) else (out,)
        elif on_device:
            results = tuple(o.reshape(shape) for o in outs)
        else:
            results = tuple(o.copy_to_host().reshape(shape) for o in outs)
        if self.mode == "jvp":
            return results
        return results if self.plain.wrt_tuple else results[0]

    def _outputs(self, out, shape, on_device):
        if out is None:
            return None
        cuda = self._namespace["cuda"]
        given = list(out) if isinstance(out, (tuple, list)) else [out]
        if len(given) != self.n_out:
            raise ValueError(f"out= needs {self.n_out} arrays, one per result, not {len(given)}")
        checked = []
        for o in given:
            if on_device:
                if not _on_device(cuda, o):
                    raise TypeError("with arguments on the GPU, out= takes device arrays")
                o = o if cuda.devicearray.is_cuda_ndarray(o) else cuda.as_cuda_array(o)
            elif not isinstance(o, np.ndarray):
                raise TypeError("with NumPy arguments, out= takes NumPy arrays")
            contiguous = o.is_c_contiguous() if on_device else o.flags.c_contiguous
            if tuple(o.shape) != tuple(shape) or o.dtype != np.float64 or not contiguous:
                raise ValueError(
                    f"out= arrays must be C-contiguous float64 of shape {tuple(shape)}, "
                    f"not {o.dtype} of shape {tuple(o.shape)}"
                )
            checked.append(o)
        return checked

    def _device_inputs(self, inputs, scalar):
        """Arrays already on the GPU stay there: one shape, C-contiguous; scalars are passed."""
        cuda = self._namespace["cuda"]
        shapes = {tuple(a.shape) for a in inputs if _on_device(cuda, a)}
        if len(shapes) > 1:
            raise ValueError(
                f"{self.func.__name__}'s CUDA kernel got device arrays of shapes "
                f"{sorted(shapes)}: broadcast them on the device to one shape first "
                "(or pass NumPy arrays, which are broadcast before they are copied)"
            )
        (shape,) = shapes
        size = int(np.prod(shape))
        flat = []
        names = self.params + ["tangent"] * (len(inputs) - len(self.params))
        for name, a, s in zip(names, inputs, scalar):
            if s:
                flat.append(float(a))
                continue
            if not _on_device(cuda, a):
                raise ValueError(
                    f"{self.func.__name__}'s CUDA kernel got a NumPy array for {name!r} beside "
                    "device arrays: move it to the device (numba.cuda.to_device) or pass a scalar"
                )
            a = a if cuda.devicearray.is_cuda_ndarray(a) else cuda.as_cuda_array(a)
            if not a.is_c_contiguous():
                raise ValueError(
                    f"{self.func.__name__}'s CUDA kernel needs C-contiguous device arrays; "
                    f"{name!r} is not (copy it on the device first)"
                )
            if a.dtype.kind != "f":
                raise TypeError(f"{name!r} is a device array of {a.dtype}, not of floats")
            flat.append(a.reshape(size))
        return flat, shape


def _on_device(cuda, a) -> bool:
    """A GPU array: Numba's own, or any with the CUDA array interface (CuPy, PyTorch)."""
    return hasattr(a, "__cuda_array_interface__") or cuda.devicearray.is_cuda_ndarray(a)


def compiled_wrt(transformed, params: list[str]) -> list[str]:
    """The generated code's names of the `wrt` parameters (by position in f's signature)."""
    user = list(transformed.params)
    return [params[user.index(w)] for w in transformed.wrt]


def cuda_transform(func, wrt, mode: str) -> CudaTransformed:
    if mode not in ("grad", "jvp"):
        raise S2SADError(f"target='cuda' supports grad and jvp, not {mode}")
    return CudaTransformed(func, wrt, mode)
