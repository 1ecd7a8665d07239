"""The helpers generated code calls by name, registered where their op's rules are.

A family file defines, right above the op entry whose templates call it, each helper in up to
three forms side by side, linked by the Python objects (never by names in strings):

    @helper(jvp=linear("g"))               # the NumPy form, what generated Python code calls
    def mean_vjp(g, x, axis=None, keepdims=False): ...

    @batched_of(mean_vjp)                  # the same for a cotangent with a leading batch axis
    def batched_mean_vjp(g, x, axis=None, keepdims=False): ...

    @numba_of(mean_vjp)                    # Numba's form: a numba.extending.overload typer
    def _mean_vjp(g, x, axis=None, keepdims=False): ...

- `@helper` takes `jvp=` (the helper's own tangent rule, registry.py), `batch_safe=True` (right
  for a batched cotangent as it is: elementwise in it, or linear algebra broadcasting over
  leading axes) and `nondiff=True` (its result carries no derivative);
- `@batched_helper` registers a batched function that is no helper's counterpart (the batched
  form of a NumPy function, named by an entry's `linear(..., batched=...)`);
- `@numba_of(f)` gives `f` (a helper, or a Numba-only stub defined beside it) a Numba form:
  called with Numba types, it returns the implementation for them (or None);
  `@numba_jitable` marks a plain function Numba compiles inline where a form calls it.

Numba forms are only recorded here: `import s2sad` never imports Numba. s2sad.numba_helpers,
which jitted code imports, applies `overload` to each (stub, form) pair once per process. The
forms name Numba's objects (`types`, `literal_unroll`, `tuple_setitem`, `as_dtype`) as
globals of their own module, imported there under `typing.TYPE_CHECKING` only (so readers and
linters see where they come from); numba_helpers binds them in that module (`NUMBA_NAMES`)
before any form runs. `numba_source()` is the same forms as one module's text, for
`s2sad emit --jit`.
"""

from __future__ import annotations

import ast
import builtins
import dis
import functools
import hashlib
import inspect
import sys

from . import registry
from .registry import Tangent

RUNTIME: dict[str, object] = {}  # name -> NumPy form, in registration order
BATCHED: dict[str, object] = {}  # name -> batched helper
BATCHED_NAME: dict[str, str] = {}  # helper name -> its batched counterpart's name
BATCH_SAFE: set[str] = set()  # helpers right for a batched cotangent as they are
SHAPE_ONLY: dict[str, frozenset] = {}  # helper name -> parameters it reads for shape and dtype
SHAPED_LIKE: dict[str, int] = {}  # helper name -> the position of the parameter of its shape
NUMBA: list[tuple[object, object]] = []  # (stub, Numba form), in registration order
JITABLE: list[object] = []  # plain functions Numba compiles where a form calls them
_TYPE_TESTS: dict[str, object] = {}  # name -> function of Numba types that forms share

# the Numba objects forms may name, and the module each comes from
NUMBA_NAMES = {
    "types": ("numba", "types"),
    "literal_unroll": ("numba", "literal_unroll"),
    "objmode": ("numba", "objmode"),
    "tuple_setitem": ("numba.cpython.unsafe.tuple", "tuple_setitem"),
    "as_dtype": ("numba.np.numpy_support", "as_dtype"),
    "TypingError": ("numba.core.errors", "TypingError"),
}


def helper(
    func=None,
    *,
    jvp: Tangent | None = None,
    batch_safe=False,
    nondiff=False,
    shape_only=(),
    shaped_like=None,
):
    """Register a NumPy helper (bare `@helper`, or `@helper(jvp=..., batch_safe=True)`).

    `shape_only` names the parameters every form of the helper reads only for their shape and
    dtype (`x` of `unbroadcast(g, x)`): a tape may keep a stand-in there (`shape_stub`).
    `shaped_like` names the parameter whose shape the result always has (`x` of `mean_vjp(g,
    x)`): rank inference and fusion's extents read the result's axes off that argument's."""
    if func is None:
        return functools.partial(
            helper,
            jvp=jvp,
            batch_safe=batch_safe,
            nondiff=nondiff,
            shape_only=shape_only,
            shaped_like=shaped_like,
        )
    _claim(func)
    RUNTIME[func.__name__] = func
    params = list(inspect.signature(func).parameters)
    if shape_only:
        SHAPE_ONLY[func.__name__] = frozenset([(params.index(p), p) for p in shape_only])
    if shaped_like is not None:
        SHAPED_LIKE[func.__name__] = params.index(shaped_like)
    if batch_safe:
        BATCH_SAFE.add(func.__name__)
    if jvp is not None:
        registry.declare_tangent(func, jvp)
    if nondiff:
        registry.nondiff(func)
    return func


def batched_of(func):
    """Register the decorated function as the batched counterpart of helper `func`."""

    def register(batched):
        BATCHED_NAME[func.__name__] = batched.__name__
        return batched_helper(batched)

    return register


def batched_helper(func):
    """Register a batched function generated code calls by name (a NumPy function's batched form,
    named by an op entry's `linear(..., batched=...)`)."""
    _claim(func)
    BATCHED[func.__name__] = func
    return func


def _claim(func) -> None:
    """Generated code calls helpers by name: two helpers of one name would silently be one."""
    name = func.__name__
    for table in (RUNTIME, BATCHED):
        other = table.get(name)
        if other is not None and other.__code__ is not func.__code__:
            raise ValueError(
                f"helper {name} of {func.__module__} is already defined in {other.__module__}"
            )


def numba_of(stub):
    """Record the decorated function as `stub`'s Numba form (applied by numba_helpers)."""

    def record(form):
        NUMBA.append((stub, form))
        return form

    return record


def numba_jitable(func):
    """Record a plain function Numba compiles where a form's implementation calls it."""
    JITABLE.append(func)
    return func


def type_test(func):
    """Register a function of Numba types that Numba forms call (copied into numba_source)."""
    _TYPE_TESTS[func.__name__] = func
    return func


def numba_modules() -> set[str]:
    """The modules whose functions are Numba forms or type tests (where NUMBA_NAMES are bound)."""
    forms = [f for _, f in NUMBA] + JITABLE + list(_TYPE_TESTS.values())
    return {f.__module__ for f in forms}


def function_source(func) -> str:
    """`func`'s source from its `def` line (its decorators dropped)."""
    lines = inspect.getsource(func).splitlines(keepends=True)
    while not lines[0].startswith("def "):
        lines.pop(0)
    return "".join(lines)


def global_names(code) -> set[str]:
    """The global names `code` (and the functions it defines) reads."""
    names = {i.argval for i in dis.get_instructions(code) if i.opname == "LOAD_GLOBAL"}
    for const in code.co_consts:
        if isinstance(const, type(code)):
            names |= global_names(const)
    return names


def constants_read(funcs) -> dict[str, str]:
    """The module-level number, string and tuple constants the functions read (`_BERNOULLI`), as
    source lines for a module that copies the functions (`s2sad emit`)."""
    found = {}
    for func in funcs:
        for name in sorted(global_names(func.__code__)):
            value = func.__globals__.get(name)
            if type(value) in (int, float, str, tuple) and name not in found:
                found[name] = f"{name} = {value!r}"
    return found


def numba_names() -> set[str]:
    """Every name `numba_source()` binds at its top level, without building it."""
    names = {"math", "np", "njit", "overload"} | set(NUMBA_NAMES)
    names |= {s.__name__ for s, _ in NUMBA} | {f.__name__ for _, f in NUMBA}
    names |= {f"_{s.__name__}_compiled" for s, _ in NUMBA}
    forms = list(_TYPE_TESTS.values()) + JITABLE + [f for pair in NUMBA for f in pair]
    return names | {f.__name__ for f in JITABLE} | set(_TYPE_TESTS) | set(constants_read(forms))


NUMBA_HEADER = (
    "import math\n\nimport numpy as np\n"
    "from numba import literal_unroll, njit, objmode, types\n"
    "from numba.core.errors import TypingError\n"
    "from numba.cpython.unsafe.tuple import tuple_setitem\n"
    "from numba.extending import overload\n"
    "from numba.np.numpy_support import as_dtype\n"
)


def _forms_by_name() -> dict[str, list]:
    """Each name generated code or a form may call -> the functions that define it."""
    found: dict[str, list] = {}
    for stub, form in NUMBA:
        found.setdefault(stub.__name__, []).append(form)
    for func in JITABLE + list(_TYPE_TESTS.values()):
        found.setdefault(func.__name__, []).append(func)
    return found


def forms_used(text: str) -> frozenset[str]:
    """The helpers, plain functions and type tests that code `text` calls, with those their
    Numba forms call in turn: all a standalone jitted module has to carry. The names the code
    reads, not every word of it: a docstring naming the user's function `masked` or a `def` of
    that name is no call of the helper `masked`."""
    known = _forms_by_name()
    stubs = {stub.__name__: stub for stub, _ in NUMBA}
    read = {n.id for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Name)}
    todo = [name for name in read if name in known]
    used: set[str] = set()
    while todo:
        name = todo.pop()
        if name not in used:
            used.add(name)
            # (and the helpers its NumPy form calls: numba_source writes that where it can)
            funcs = known[name] + ([stubs[name]] if name in stubs else [])
            for func in funcs:
                todo += [n for n in global_names(func.__code__) if n in known and n not in used]
    return frozenset(used)


@functools.cache
def numba_source(used: frozenset[str] | None = None) -> str:
    """The Numba forms as the text of one module (`s2sad emit --jit` embeds it): all of them,
    or only those named in `used` (`forms_used`), so that a module compiles only what it calls."""

    def wanted(func) -> bool:
        return used is None or func.__name__ in used

    parts = [NUMBA_HEADER]
    tests = [f for f in _TYPE_TESTS.values() if wanted(f)]
    jitable = [f for f in JITABLE if wanted(f)]
    pairs = [(stub, form) for stub, form in NUMBA if wanted(stub)]
    # (with those helpers' NumPy forms read, which are then copied as they are: see below)
    constants = constants_read(tests + jitable + [f for pair in pairs for f in pair])
    parts += list(constants.values())
    parts += [function_source(f) for f in tests]
    parts += ["@njit\n" + function_source(f) for f in jitable]
    # each helper also runs when Python calls it (the module's Python version of its function
    # runs to find the line of an index out of range: module_returns._returned): its NumPy
    # form where that reads only NumPy, math, the helpers and the constants written above,
    # else its compiled form
    plain = (
        {"np", "math"} | {stub.__name__ for stub, _ in pairs} | set(dir(builtins)) | set(constants)
    )
    for stub, form in pairs:
        signature, name = inspect.signature(form), stub.__name__
        parts.append(f"@overload({name})\n" + function_source(form))
        if global_names(stub.__code__) <= plain:
            parts.insert(-1, function_source(stub))
            continue
        called = ", ".join(
            f"*{p.name}" if p.kind is p.VAR_POSITIONAL else p.name
            for p in signature.parameters.values()
        )
        parts.insert(-1, f"def {name}{signature}:\n    return _{name}_compiled({called})\n")
        parts.append(f"@njit\ndef _{name}_compiled{signature}:\n    return {name}({called})\n")
    return "\n\n".join(parts)


def stable_repr(value) -> str:
    """`repr`, with sets sorted (their order changes with the process's string hashes)."""
    if isinstance(value, (set, frozenset)):
        return "{" + ", ".join(sorted(stable_repr(v) for v in value)) + "}"
    if type(value) is tuple:
        return "(" + ", ".join(stable_repr(v) for v in value) + ")"
    return repr(value)


def code_bytes(code) -> bytes:
    """A code object as bytes that depend on what it does alone (marshal's output also depends
    on reference counts): its bytecode, names, signature, flags, line and constants, nested code
    included."""
    described = (code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars)
    counts = (code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount, code.co_flags)
    parts = [code.co_code, repr(described + counts + (code.co_firstlineno,)).encode()]
    for const in code.co_consts:
        is_code = isinstance(const, type(code))
        parts.append(code_bytes(const) if is_code else stable_repr(const).encode())
    return b"|".join(parts)


def _fingerprint_value(value) -> bytes | None:
    """What a module-level name holds, as bytes that change when Numba's code from it would: a
    function's code (its nested implementations with it) and defaults, a constant's repr. None
    for anything else, which is not hashed (what a module binds later, such as NUMBA_NAMES or a
    cache filled on first use, must not change the hash)."""
    code = getattr(value, "__code__", None)
    if code is not None:
        return code_bytes(code) + stable_repr(getattr(value, "__defaults__", None)).encode()
    if type(value) in (bool, int, float, complex, str, bytes, tuple, frozenset):
        return stable_repr(value).encode()
    return None


@functools.cache
def forms_fingerprint() -> str:
    """A hash of the code and constants, as loaded in this process, of every module that defines
    a Numba form, plain function or type test: what the helpers' compiled code can depend on
    within s2sad (the forms `numba_source()` copies, what they call while typing, the constants
    they read), cheaper than `numba_source()` and never the file edited since it was imported."""
    digest = hashlib.sha256()
    for name in sorted(numba_modules() | {__name__}):
        digest.update(name.encode())
        for attr, value in sorted(vars(sys.modules[name]).items()):
            found = _fingerprint_value(value)
            if found is not None and not attr.startswith("__") and attr not in NUMBA_NAMES:
                digest.update(attr.encode() + b"=" + found + b";")
    return digest.hexdigest()
