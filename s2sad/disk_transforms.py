"""Jitted transforms kept on disk, so that a fresh process's first jitted call loads the code an
earlier process generated for the same function instead of transforming it again (BA's
pullback: most of a warm first call's second; Numba's machine code for it is on disk already).

An entry is found by a key that hashes everything the transform read before it resolved a name:
s2sad's own source files, Python's, NumPy's and Numba's versions, the pipeline's switches
(S2SAD_FUSE, S2SAD_JIT_FORMS, S2SAD_REUSE), the transform's options (mode, wrt, ranks,
parallel, has_aux), and the function: its code and the text of its file. What the transform
read through names is in the entry and is checked against the process's objects before the
entry is used: each inlined helper by its code and file (as the key checks the function), and
each other object it named by an identity that holds across processes (a NumPy or math function
by its canonical name, a module by its name, a library's function by module and name, a user's
function or Numba dispatcher by its code and file, a helper's literal default by its type and
value). An entry whose checks fail is not used: the
function is transformed and the entry replaced. Data is never in an entry (it is read at each
call, as for a transform made in the process), nor are unrolled trip counts' values (`pinned`:
the reader checks them at each call).

Kept only where every such object has an identity of those kinds, and only while no rule of the
user's is registered (register_vjp, custom_vjp, composed gradients: their rules are objects of
the process); never for parameter trees, tree outputs, lambdas, functions passed as arguments,
or code made by a transform (checkpointed loops). s2sad's source files are hashed once a
process; if one changed after s2sad was imported, nothing is kept or loaded (the process runs
other code than the files hold). Files are written whole under a random name and renamed, read
only where diskcache.py finds them this user's alone, checked by a digest, and pruned once
unused for prune.KEEP_DAYS. S2SAD_TRANSFORM_CACHE=0 turns the cache off.

Consumes a function and the transform's options; produces a `Compiled` (or None: transform it),
and keeps one made by the pipeline.
"""

from __future__ import annotations

import builtins
import hashlib
import importlib
import linecache
import marshal
import math
import os
import sys
import time
import types
from pathlib import Path

import numpy as np

from .diskcache import atomic_write, private_dir, read_private, trusted_cache_root
from .pipeline import bounds, driver
from .pipeline.load import assemble
from .pipeline.resolve import _CANONICAL
from .prune import prune_files, used
from .rules.registry import NAMESPACE, VERSION

_LAYOUT = 4  # the entries' format (4: whether the code indexes, whether Numba checks it, its slots)
_IMPORTED = time.time()
_RULES = VERSION[0]  # s2sad's own rules, all registered by now (the package imports them first)
_SOURCE: list = []  # s2sad's source files' hash (None: one changed after the import), once
_LIBRARIES = ("numpy", "math", "builtins", "scipy", "s2sad", "numba")
_LITERALS = (bool, int, float, complex, str, bytes, type(None))
_MISSED = (OSError, LookupError, AttributeError, ValueError, TypeError, EOFError, RecursionError)


def enabled() -> bool:
    return os.environ.get("S2SAD_TRANSFORM_CACHE") != "0"


def _s2sad_source() -> str | None:
    """A hash of s2sad's source files, as this process loaded them (None where one changed
    since the import, or cannot be read)."""
    if not _SOURCE:
        root = Path(__file__).resolve().parent
        digest = hashlib.sha256()
        try:
            for path in sorted(root.rglob("*.py")):
                if path.stat().st_mtime > _IMPORTED:
                    raise OSError(f"{path} changed after s2sad was imported")
                digest.update(f"{path.relative_to(root)}\0".encode() + path.read_bytes() + b"\0")
            _SOURCE.append(digest.hexdigest())
        except OSError:
            _SOURCE.append(None)
    return _SOURCE[0]


def _const(value) -> str:
    """A constant of code as text that is the same in every process (a frozenset's order
    follows string hashing, which differs)."""
    if isinstance(value, frozenset):
        return "frozenset(" + repr(sorted(_const(v) for v in value)) + ")"
    if isinstance(value, tuple):
        return "(" + ", ".join(_const(v) for v in value) + ",)"
    return f"{type(value).__name__}:{value!r}"


def _code(code: types.CodeType, digest) -> None:
    for attr in (
        "co_argcount",
        "co_posonlyargcount",
        "co_kwonlyargcount",
        "co_flags",
        "co_qualname",
        "co_firstlineno",
        "co_filename",
        "co_names",
        "co_varnames",
        "co_freevars",
        "co_cellvars",
        "co_code",
    ):
        digest.update(repr(getattr(code, attr, None)).encode() + b"\0")
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _code(const, digest)
        else:
            digest.update(_const(const).encode() + b"\0")


def function_digest(func) -> str | None:
    """A user's function as the transform reads it: its code and its file's text (which the
    transform quotes in comments, as inspect reads it now); None for a lambda or a function
    without source text."""
    if not isinstance(func, types.FunctionType) or func.__code__.co_name == "<lambda>":
        return None
    filename = func.__code__.co_filename
    linecache.checkcache(filename)
    lines = linecache.getlines(filename, func.__globals__)
    if not lines:
        return None
    digest = hashlib.sha256()
    _code(func.__code__, digest)
    digest.update("".join(lines).encode())
    return digest.hexdigest()


def identity(obj) -> tuple | None:
    """What `obj` is, the same in every process that has the same object (None: no such
    identity, so a transform naming it is not kept)."""
    if type(obj) in _LITERALS:  # a helper's literal default, which the code was made for
        return ("literal", type(obj).__name__, repr(obj))
    canonical = _CANONICAL.get(id(obj))
    if canonical is not None:
        return ("canonical", canonical)
    if isinstance(obj, types.ModuleType):
        return ("module", obj.__name__) if sys.modules.get(obj.__name__) is obj else None
    py_func = getattr(obj, "py_func", None)
    if type(obj).__module__.startswith("numba.") and isinstance(py_func, types.FunctionType):
        digest = function_digest(py_func)
        return ("dispatcher", type(obj).__qualname__, digest) if digest else None
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if isinstance(module, str) and isinstance(qualname, str):
        root = module.partition(".")[0]
        if root in _LIBRARIES and _found(module, qualname) is obj:
            return ("library", module, qualname, str(getattr(sys.modules[root], "__version__", "")))
    if isinstance(obj, types.FunctionType):
        digest = function_digest(obj)
        return ("function", digest) if digest else None
    return None


def _found(module: str, qualname: str):
    found = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return found


def _key(func, options: tuple) -> str | None:
    """The entry's key (None: this transform is not kept on disk)."""
    source = _s2sad_source()
    digest = function_digest(func)
    if source is None or digest is None or VERSION[0] != _RULES or NAMESPACE:
        return None
    versions = (
        sys.version,
        np.__version__,
        importlib.import_module("numba").__version__,
        (driver._JIT_FORMS, driver._FUSE, driver._REUSE, bounds.BOUNDSCHECK),
    )
    return repr((_LAYOUT, source, versions, options, func.__module__, func.__qualname__, digest))


def _read(funcs: list, spec):
    """What `spec` (resolve.Reads) reads now from `funcs` (the function and its helpers)."""
    index, kind, key, attrs = spec
    f = funcs[index]
    if kind == "global":
        value = f.__globals__[key] if key in f.__globals__ else vars(builtins)[key]
    elif kind == "closure":
        value = f.__closure__[key].cell_contents
    elif kind == "default":
        value = f.__defaults__[key]
    elif kind == "kwdefault":
        value = f.__kwdefaults__[key]
    else:  # a function passed as an argument: such transforms are not kept
        raise LookupError(kind)
    for attr in attrs:
        value = getattr(value, attr)
    return value


def _path(key: str) -> Path | None:
    try:
        directory = private_dir(trusted_cache_root() / "transforms")
    except OSError:
        return None
    prune_files(directory, ".entry")
    return directory / f"{hashlib.sha256(key.encode()).hexdigest()[:40]}.entry"


def load(func, options: tuple):
    """The `Compiled` an earlier process kept for `func` and `options` (wrt, mode, ranks, jit,
    trees, has_aux, parallel, reuse), if its checks hold for the objects `func` reads now; else
    None."""
    if not enabled():
        return None
    try:
        key = _key(func, options)
        path = _path(key) if key is not None else None
        raw = read_private(path) if path is not None else None
        if raw is None:
            return None
        digest, _, body = raw.partition(b"\n")
        if digest != hashlib.sha256(body).hexdigest().encode():
            return None
        entry = marshal.loads(body)
        if entry["key"] != key:
            return None
        funcs, helpers, checks = [func], [], []
        for spec, expected in entry["helpers"]:
            helper = _read(funcs, spec)
            if function_digest(helper) != expected:
                return None
            funcs.append(helper)
            helpers.append((spec, helper.__code__))
        for spec, expected in entry["checks"]:
            obj = _read(funcs, spec)
            if identity(obj) != expected:
                return None
            checks.append((spec, obj))
        objects = {"np": np, "math": math}
        objects.update((name, _read(funcs, spec)) for name, spec in entry["namespace"])
        compiled = assemble(
            entry["code"],
            entry["name"],
            entry["where"],
            objects,
            entry["keywords"],
            tuple_output=entry["tuple_output"],
            user_names=entry["user_names"],
            data=entry["data"],
            data_specs=entry["data_specs"],
            helpers=tuple(helpers),
            checks=tuple(checks),
            pinned=entry["pinned"],
        )
    except _MISSED:
        return None
    compiled.unfused_code = entry["unfused"]
    compiled.parallel = entry["parallel"]
    # (which checks its compiled code needs: pipeline/bounds.py)
    compiled.indexed, compiled.numba_checks = entry["indexed"]
    compiled.float_numbers = entry["float_numbers"]
    compiled.float_casts = entry.get("float_casts", ())
    compiled.slots, compiled.unfused_slots = entry["slots"], entry["unfused_slots"]
    used(path)
    return compiled


def store(func, options: tuple, compiled) -> None:
    """Keep `compiled`, the pipeline's transform of `func` for `options`, where its checks can
    be made in another process (see the module's docstring)."""
    if not enabled() or compiled.output is not None or compiled.rules_version != _RULES:
        return
    try:
        key = _key(func, options)
        entry = _entry(func, compiled, key) if key is not None else None
        path = _path(key) if entry is not None else None
        if path is None:
            return
        body = marshal.dumps(entry)
        with atomic_write(path) as f:
            f.write(hashlib.sha256(body).hexdigest().encode() + b"\n" + body)
    except _MISSED:  # not kept (a full disk, an object without an identity)
        pass


def _entry(func, compiled, key: str) -> dict | None:
    """What is kept of `compiled`, or None where something it read has no identity."""
    funcs, helpers, checks = [func], [], []
    for spec, code in compiled.helpers:
        helper = _read(funcs, spec)
        digest = function_digest(helper)
        if digest is None or helper.__code__ is not code:
            return None
        funcs.append(helper)
        helpers.append((spec, digest))
    for spec, obj in compiled.checks:
        found = identity(obj)
        if found is None or _read(funcs, spec) is not obj:
            return None
        checks.append((spec, found))
    namespace = []
    for name, obj in compiled.globals.items():
        found = [s for s, o in compiled.checks if o is obj]  # (a name read first, else a path:
        spec = min(found, key=lambda s: len(s[3]), default=None)  # `h.bump` bound as `bump`)
        if spec is None:  # made by the transform, or passed: not kept
            return None
        namespace.append((name, spec))
    return {
        "key": key,
        "code": compiled.code,
        "name": compiled.name,
        "where": compiled.where,
        "keywords": dict(compiled.keywords),
        "tuple_output": compiled.tuple_output,
        "user_names": dict(compiled.user_names),
        "data": tuple(compiled.data),
        "data_specs": tuple(compiled.data_specs),
        "pinned": tuple(compiled.pinned),
        "helpers": tuple(helpers),
        "checks": tuple(checks),
        "namespace": tuple(namespace),
        "unfused": compiled.unfused_code,
        "parallel": compiled.parallel,
        "indexed": (compiled.indexed, compiled.numba_checks),
        "float_numbers": compiled.float_numbers,
        "float_casts": compiled.float_casts,
        "slots": dict(compiled.slots),
        "unfused_slots": dict(compiled.unfused_slots),
    }
