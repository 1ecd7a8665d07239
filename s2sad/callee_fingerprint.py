"""What the functions jitted code calls contribute to the compiled module's name (jit only).

Numba compiles a called function into its caller's machine code, freezing with it what that
function reads: its defaults, the values its closure holds, the globals it reads (numbers and
arrays as constants) and the functions it calls in turn. Numba's disk cache notices none of
these when they change, so the module's name hashes them all, as bytes that are the same in
every process (no addresses, no reference counts): an edit to any of them gives a new module,
never the old machine code.
"""

from __future__ import annotations

import hashlib
import types

import numpy as np

from .rules.helpers import code_bytes, global_names, stable_repr

_LIBRARIES = ("numpy", "math", "scipy", "numba", "s2sad", "builtins")
_NUMBERS = (bool, int, float, complex, str, bytes, type(None), type(Ellipsis))


def callees_fingerprint(objects: dict) -> str:
    """A hash of what the named objects generated code calls (`objects`: name -> object, the
    Numba dispatchers, rules and helpers it reads by name) would freeze into machine code."""
    digest = hashlib.sha256()
    if objects:  # (modules cached before rules were named by their code: custom.py)
        digest.update(b"rules named by their code;")
    seen: set[int] = set()
    objects = dict(objects)
    for name, value in list(objects.items()):
        # a user's module the code reads by attribute (`userh.h(...)`): its functions
        if isinstance(value, types.ModuleType) and not _library(value):
            for attr, member in vars(value).items():
                if isinstance(getattr(member, "py_func", member), types.FunctionType):
                    objects[f"{name}.{attr}"] = member
    for name in sorted(objects):
        digest.update(name.encode() + b"=" + _bytes_of(objects[name], seen) + b";")
    return digest.hexdigest()


def _bytes_of(value, seen: set[int]) -> bytes:
    if type(value) in _NUMBERS:
        return stable_repr(value).encode()
    if type(value) in (tuple, list, frozenset, set):
        return b"(" + b",".join(_bytes_of(v, seen) for v in _ordered(value)) + b")"
    if isinstance(value, np.ndarray):
        head = f"array {value.dtype.str} {value.shape}".encode()
        return head + hashlib.sha256(np.ascontiguousarray(value).tobytes()).digest()
    if isinstance(value, np.generic):
        return f"{value.dtype.str} {value!r}".encode()
    if id(value) in seen:  # (a function calling itself, or met before: hashed there)
        return b"@" + _qualified(value)
    seen.add(id(value))
    if isinstance(value, types.ModuleType):
        return b"module " + value.__name__.encode()
    func = getattr(value, "py_func", value)  # a Numba dispatcher: its Python function
    if isinstance(func, types.FunctionType):
        return _function_bytes(func, seen)
    # an object holding functions (s2sad.custom_vjp: func and rule; functools.partial)
    parts = [_qualified(value)]
    for attr in ("func", "rule", "args", "keywords"):
        if hasattr(value, attr):
            parts.append(attr.encode() + b"=" + _bytes_of(getattr(value, attr), seen))
    return b"|".join(parts)


def _function_bytes(func: types.FunctionType, seen: set[int]) -> bytes:
    code = func.__code__
    parts = [
        _qualified(func),
        code_bytes(code),
        stable_repr(func.__defaults__).encode(),
        stable_repr(sorted((func.__kwdefaults__ or {}).items())).encode(),
    ]
    for cell in func.__closure__ or ():
        try:
            parts.append(_bytes_of(cell.cell_contents, seen))
        except ValueError:  # an empty cell (a name the enclosing function binds later)
            parts.append(b"<empty>")
    scope = func.__globals__
    for name in sorted(global_names(code)):
        if name in scope:
            value = scope[name]
            parts.append(name.encode() + b"=" + _bytes_of(value, seen))
            if isinstance(value, types.ModuleType) and not _library(value):
                # `mod.h(v)`: the members of a user's module the code reads by attribute
                for attr in sorted(set(code.co_names) & set(vars(value))):
                    member = _bytes_of(getattr(value, attr), seen)
                    parts.append(f"{name}.{attr}=".encode() + member)
    return b"|".join(parts)


def _library(module: types.ModuleType) -> bool:
    return module.__name__.split(".")[0] in _LIBRARIES


def _qualified(value) -> bytes:
    kind = value if isinstance(value, type) else type(value)
    name = getattr(value, "__qualname__", None) or kind.__qualname__
    return f"{getattr(value, '__module__', None) or kind.__module__}.{name}".encode()


def _ordered(values) -> list:
    if isinstance(values, (set, frozenset)):
        return sorted(values, key=stable_repr)
    return list(values)
