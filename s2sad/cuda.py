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

from .cuda_device import HEADER, device_tree, helpers_used, refuse_unknown
from .errors import NonDifferentiableInputError, S2SADError
from .pipeline.emit import format_source
from .pipeline.normalize import NameAllocator, reserved_names
from .transform_cache import transform_and_read
from .transformed import Transformed


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
        tree = device_tree(self.func, compiled.code)
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
        self._device = HEADER + helpers_used(tree) + "\n\n" + device
        self._device += f"\n\n{compiled.name} = cuda.jit(device=True)({compiled.name}_py)\n"
        self._namespace: dict = {"math": math, "np": np}
        self._namespace.update(compiled.globals)
        exec(compile(self._device, f"<s2sad cuda {compiled.name}>", "exec"), self._namespace)
        refuse_unknown(self.func, tree, self._namespace)
        self._kernels: dict = {}
        every = (True,) * (len(params) + len(dots) * (self.mode == "jvp"))
        self.source = format_source(self._device + self._kernel_text(every))
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
        """`out=`: arrays of the results' shape and dtype (one, or a tuple of them) to write
        into, as NumPy's ufuncs take: on the GPU this saves allocating them at each call."""
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
        if self.mode == "jvp" and len(tangents) != len(self.wrt):
            raise TypeError(
                f"the jvp kernel of {self.func.__name__} takes {len(self.wrt)} tangent(s), one "
                f"per argument differentiated (a tuple for several), not {len(tangents)}"
            )
        cuda = self._namespace["cuda"]
        inputs = [*args, *tangents]
        names = self.params + [f"the tangent of {w}" for w in self.wrt]
        gpu = [_on_device(cuda, a) for a in inputs]  # each input: a GPU array or not
        for name, a, g in zip(names, inputs, gpu):
            if not g and np.iscomplexobj(a):
                raise NonDifferentiableInputError(
                    f"{name} is complex: s2sad differentiates real-valued inputs only"
                )
        scalar = [np.ndim(a) == 0 and not g for a, g in zip(inputs, gpu)]
        on_device = any(gpu)
        if on_device:
            flat, shape = self._device_inputs(inputs, names, gpu, scalar)
        else:  # NumPy arrays: broadcast, copied to the device, and the results back
            arrays = np.broadcast_arrays(
                *[np.asarray(a, dtype=_float(a)) for a, s in zip(inputs, scalar) if not s]
            )
            shape = arrays[0].shape if arrays else ()
            copies = iter([cuda.to_device(np.ascontiguousarray(a).ravel()) for a in arrays])
            flat = [float(a) if s else next(copies) for a, s in zip(inputs, scalar)]
        size = int(np.prod(shape))
        if self.mode == "grad":  # each gradient in its input's float dtype, as on the CPU
            dtypes = [_float(args[self.params.index(w)]) for w in self.wrt]
        else:
            dtypes = [np.result_type(*[_float(a) for a in inputs])] * 2
        given = self._outputs(out, shape, dtypes, flat if on_device else None)
        outs = (
            [o.reshape(size) for o in given]
            if given and on_device
            else [cuda.device_array(size, dtype=d) for d in dtypes]
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

    def _outputs(self, out, shape, dtypes, on_gpu):
        """The arrays `out=` gives, checked (`on_gpu`: the inputs on the device, or None)."""
        if out is None:
            return None
        cuda = self._namespace["cuda"]
        given = list(out) if isinstance(out, (tuple, list)) else [out]
        if len(given) != self.n_out:
            raise ValueError(f"out= needs {self.n_out} arrays, one per result, not {len(given)}")
        checked = []
        for o, dtype in zip(given, dtypes):
            if on_gpu is not None:
                if not _on_device(cuda, o):
                    raise TypeError("with arguments on the GPU, out= takes device arrays")
                o = o if cuda.devicearray.is_cuda_ndarray(o) else cuda.as_cuda_array(o)
            elif not isinstance(o, np.ndarray):
                raise TypeError("with NumPy arguments, out= takes NumPy arrays")
            contiguous = o.is_c_contiguous() if on_gpu is not None else o.flags.c_contiguous
            if tuple(o.shape) != tuple(shape) or o.dtype != dtype or not contiguous:
                raise ValueError(
                    f"out= arrays must be C-contiguous {np.dtype(dtype)} of shape "
                    f"{tuple(shape)}, not {o.dtype} of shape {tuple(o.shape)}"
                )
            checked.append(o)
        extents = [_extent(o) for o in checked]
        # an input may be written over where it is read: each thread reads its element before
        # it writes it; any other overlap would read another thread's result
        inputs = [_extent(a) for a in on_gpu or () if not isinstance(a, float)]
        for k, e in enumerate(extents):
            if any(_overlap(e, f) for f in extents[:k]):
                raise ValueError("out= arrays share memory: give each result its own")
            if any(_overlap(e, f) and e != f for f in inputs):
                raise ValueError("an out= array overlaps an input without being it")
        return checked

    def _device_inputs(self, inputs, names, gpu, scalar):
        """Arrays already on the GPU stay there: one shape, C-contiguous; scalars are passed."""
        cuda = self._namespace["cuda"]
        shapes = {tuple(a.shape) for a, g in zip(inputs, gpu) if g}
        if len(shapes) > 1:
            raise ValueError(
                f"{self.func.__name__}'s CUDA kernel got device arrays of shapes "
                f"{sorted(shapes)}: broadcast them on the device to one shape first "
                "(or pass NumPy arrays, which are broadcast before they are copied)"
            )
        (shape,) = shapes
        size = int(np.prod(shape))
        flat = []
        for name, a, g, s in zip(names, inputs, gpu, scalar):
            if s:
                flat.append(float(a))
                continue
            if not g:
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
            if a.dtype not in (np.float32, np.float64):
                raise TypeError(f"{name!r} is a device array of {a.dtype}, not of floats")
            flat.append(a.reshape(size))
        return flat, shape


def _on_device(cuda, a) -> bool:
    """A GPU array: Numba's own, or any with the CUDA array interface (CuPy, PyTorch)."""
    return hasattr(a, "__cuda_array_interface__") or cuda.devicearray.is_cuda_ndarray(a)


def _float(a):
    """The float dtype a kernel's argument keeps (float32 or float64; others are float64)."""
    dtype = getattr(a, "dtype", None)
    return dtype if dtype in (np.float32, np.float64) else np.dtype(np.float64)


def _extent(a) -> tuple:
    """The bytes a C-contiguous array spans (NumPy's, the GPU's, or the simulator's)."""
    if hasattr(a, "__cuda_array_interface__"):
        start = a.__cuda_array_interface__["data"][0]
    else:  # a NumPy array, or an array of Numba's simulator (which holds one)
        start = getattr(a, "_ary", a).__array_interface__["data"][0]
    return start, start + a.size * a.dtype.itemsize


def _overlap(e, f) -> bool:
    return e[0] < f[1] and f[0] < e[1]


def compiled_wrt(transformed, params: list[str]) -> list[str]:
    """The generated code's names of the `wrt` parameters (by position in f's signature)."""
    user = list(transformed.params)
    return [params[user.index(w)] for w in transformed.wrt]


def cuda_transform(func, wrt, mode: str) -> CudaTransformed:
    if mode not in ("grad", "jvp"):
        raise S2SADError(f"target='cuda' supports grad and jvp, not {mode}")
    return CudaTransformed(func, wrt, mode)
