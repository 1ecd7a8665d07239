"""The last stage: load. The generated source is executed in a namespace holding exactly the
names it uses (NumPy as `np`, `math`, the runtime helpers and the functions, classes and modules
the user's code calls), and registered with linecache so tracebacks show the generated lines.
The user's data (numbers, arrays: anything not callable and not a module) is not in that
namespace: every generated function takes it as trailing parameters, which `Compiled.read` fills
at each call from the function's globals, closure cells and its helpers' scopes as they are then.
So a `Compiled` holds no user data, and a closure made per data batch reuses one transform.

Consumes the emitted source with the parse, normalization and resolution it came from; produces
a `Compiled`.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import functools
import gc
import inspect
import linecache
import re
import types
from dataclasses import dataclass, field

from .. import runtime
from ..deep import TooDeep, with_room
from ..errors import NestingTooDeepError
from ..formatted import formatted
from .emit import format_source
from ..rules.registry import NAMESPACE, VERSION
from .names import names_mentioned

# the copy emit.py makes of each parameter the code writes into
_OWN_COPY = re.compile(r"^\s+(\w+) = \1\.copy\(\)  # written in place below", re.M)


@dataclass
class Compiled:
    function: object  # the generated Python function
    code: str  # the text it was compiled from, as emitted (tracebacks show these lines)
    name: str
    tuple_output: bool
    globals: dict  # the functions, classes and modules the source calls, by the name it uses
    rules_version: int = 0
    jitted: object = None  # the Numba-compiled version, made on first use (see jit.py)
    parallel: bool = False  # compiled with Numba's parallel=True (its loops may be prange loops)
    functions: dict = field(default_factory=dict)  # every function the source defines, by name
    user_names: dict = field(default_factory=dict)  # a global's name in `globals` -> the user's
    # the trailing parameters of every function the source defines: the user's data the code
    # reads (globals, closure cells, helpers' defaults), filled by `read` at each call
    data: tuple = ()
    data_specs: tuple = ()  # how to read each (resolve.Reads)
    helpers: tuple = ()  # (spec reaching inlined helper k + 1, the code it had)
    checks: tuple = ()  # (spec, the object it must still read)
    # (function, its code) of each user function the code calls by name (a rule, a custom_vjp's
    # function and rule): one whose code is replaced in place (%autoreload) is transformed
    # again, so jitted code, which compiles the function into itself, follows the edit too
    called: tuple = ()
    pinned: tuple = ()  # (spec, the int it must still read: the code was unrolled for it)
    # a jitted transform's code without fusion (pipeline/fuse.py), for where Numba cannot type
    # the fused loops; None where nothing fused
    unfused_code: str | None = None
    # each function's number of workspace slots (pipeline/numba_forms.py: jit.py pools them),
    # in the code and in the unfused code
    slots: dict = field(default_factory=dict)
    unfused_slots: dict = field(default_factory=dict)
    # it reads or writes by integers or index arrays (the user's indexing, pipeline/bounds.py):
    # its code checks them (`check_index` before each not proven in range), and where that
    # could not place a check (`numba_checks`), jit.py compiles it with Numba's checks instead
    indexed: bool = True
    numba_checks: bool = True
    # number parameters a call must not pass as floats (integer_writes.refuse_float_updates)
    float_numbers: tuple = ()
    # ((parameter, dtype) pairs, a refusal's fields): a call passing a parameter of that dtype
    # is refused (normalize/fresh.py took `np.asarray(x, dtype)` as a copy)
    float_casts: tuple = ()
    output: object = None  # the TreeDef of a tree output, returned as its leaves (treereturns)
    where: str = ""  # the user's file:line it was made from
    keywords: dict = field(default_factory=dict)  # a renamed keyword-only parameter's names
    # black's text of each code it was asked for (`source`), and whether kept on disk
    formatted: dict = field(default_factory=dict, repr=False, compare=False)
    _reader: object = field(default=None, repr=False, compare=False)  # made by the first read

    def read(self, func, passed=None):
        """The data values to pass after the arguments, read from `func` and its helpers now
        (`passed`: the functions passed as arguments, by parameter name); None if anything the
        transform relied on has changed (then transform again)."""
        if self._reader is None:
            self._reader = _reader(
                self.helpers, self.checks, self.data_specs, self.pinned, self.called
            )
        return self._reader(func, passed)

    @functools.cached_property
    def written(self) -> frozenset:
        """The parameters the code writes into (its own copies of them, `y = y.copy()`)."""
        return frozenset(_OWN_COPY.findall(self.code))

    @property
    def source(self) -> str:
        """The code formatted by black: only made when someone reads it (`s2sad.source`, the
        CLI, jit), since formatting costs more than the whole transform; kept."""
        return self.formatted_source()

    def formatted_source(self, on_disk: bool = False) -> str:
        """`source`; `on_disk` (jit, whose module is this text): black's text is kept in the
        cache directory too (formatted.py), where a later process finds it."""
        text = self.formatted.get((self.code, on_disk))
        if text is not None:
            return text
        try:
            with without_gc_pauses():  # black, as the transform, makes many small objects
                text = with_room(formatted if on_disk else format_source, self.code)
        except TooDeep:
            raise NestingTooDeepError(
                f"the code generated for {self.name} nests too deeply for black to format",
                hint="split the longest expression into several statements",
            ) from None
        # (a replace()d copy's code is another key; black's text is kept in this process too,
        # by emit.format_source, so the text asked for on disk after it is not formatted again)
        self.formatted[self.code, on_disk] = text
        return text


# the runtime helpers every generated source may call, by the names it calls them
_RUNTIME = {n: f for n, f in vars(runtime).items() if callable(f) and not n.startswith("_")}
_BUILTINS = vars(builtins)


def _spec_expr(spec) -> str:
    """A Python expression reading `spec` (resolve.Reads) from function `f<index>` now."""
    index, kind, key, attrs = spec
    f = f"f{index}"
    if kind == "global":
        text = f"({f}.__globals__[{key!r}] if {key!r} in {f}.__globals__ else B[{key!r}])"
    elif kind == "argument":  # a function passed as an argument (resolve.Reads)
        text = f"A[{key!r}]"
    elif kind == "closure":
        text = f"{f}.__closure__[{key!r}].cell_contents"
    elif kind == "default":
        text = f"{f}.__defaults__[{key!r}]"
    else:
        text = f"{f}.__kwdefaults__[{key!r}]"
    return text + "".join(f".{attr}" for attr in attrs)


def _reader(helpers, checks, data_specs, pinned=(), called=()):
    """A function of the differentiated function returning the data values its transform takes,
    or None where a helper's code, a called function's code or a checked object differs. It is
    generated once per transform (straight-line code: a call reads a few names, cells or
    defaults and compares a few objects, about a microsecond)."""
    env = {"B": _BUILTINS, "M": types.ModuleType}
    lines = ["def read(f0, A):", "    try:", "        pass"]
    for k, (spec, code) in enumerate(helpers):
        env[f"C{k + 1}"] = code
        lines.append(f"        f{k + 1} = {_spec_expr(spec)}")
        lines.append(f"        if f{k + 1}.__code__ is not C{k + 1}: return None")
    for k, (spec, expected) in enumerate(checks):
        env[f"E{k}"] = expected
        lines.append(f"        if {_spec_expr(spec)} is not E{k}: return None")
    for k, (func, code) in enumerate(called):
        env[f"F{k}"], env[f"K{k}"] = func, code
        lines.append(f"        if F{k}.__code__ is not K{k}: return None")
    for k, (spec, number) in enumerate(pinned):
        env[f"P{k}"] = number
        read = _spec_expr(spec)
        lines.append(f"        if type({read}) is not int or {read} != P{k}: return None")
    values = [f"v{k}" for k in range(len(data_specs))]
    lines += [f"        v{k} = {_spec_expr(spec)}" for k, spec in enumerate(data_specs)]
    lines.append("    except (LookupError, AttributeError, ValueError, TypeError):")
    lines.append("        return None  # a name, cell or default is gone: transform again")
    for v in values:  # data stays data (a name now naming a function is transformed again)
        lines.append(f"    if callable({v}) or isinstance({v}, M): return None")
    lines.append(f"    return ({''.join(v + ', ' for v in values)})")
    exec("\n".join(lines), env)
    return env["read"]


def _keywords_renamed(function, new: dict):
    """`function`, called with the user's names for keyword-only parameters that `hygienic`
    renamed (`new`: the user's name -> the parameter's; s2sad's wrappers pass keyword-only
    arguments by name)."""
    if not new:
        return function

    @functools.wraps(function)
    def call(*args, **kwargs):
        return function(*args, **{new.get(k, k): v for k, v in kwargs.items()})

    return call


def _source_name(base: str, source: str) -> str:
    """A linecache name for `source`: `base`, or `base` numbered where another source has it (a
    gradient for another wrt or other ranks). Hessians read the gradient code back by this name:
    a shared one would differentiate the other code."""
    filename, k = f"<{base}>", 2
    while filename in linecache.cache and "".join(linecache.cache[filename][2]) != source:
        filename, k = f"<{base} #{k}>", k + 1
    return filename


def load(parsed, resolver, norm, source: str, name: str) -> Compiled:
    """Execute `source` in a namespace of exactly the names it uses and register it with
    linecache; the function named `name` is the transform."""
    args = parsed.tree.args.kwonlyargs
    reads = resolver.reads
    return assemble(
        source,
        name,
        where=f"{parsed.filename}:{parsed.line_offset + parsed.tree.lineno}",
        objects=resolver.namespace,
        keywords={parsed.original[a.arg]: a.arg for a in args if a.arg in parsed.original},
        tuple_output=norm.tuple_output,
        user_names=dict(resolver.original),
        data=tuple(reads.data.values()),
        data_specs=tuple(reads.data),
        helpers=tuple(reads.helpers),
        checks=reads.final_checks(),
        pinned=tuple(reads.pinned.items()),
        output=parsed.output,
    )


def assemble(source: str, name: str, where: str, objects: dict, keywords: dict, **fields):
    """The `Compiled` of generated `source`, run in a namespace of the runtime helpers, the
    rules' names and `objects` (the functions, classes and modules it calls, by the names it
    uses); `where` (file:line) names it in tracebacks, `keywords` its renamed keyword-only
    parameters. (disk_transforms.py assembles one from what an earlier process generated.)"""
    filename = _source_name(f"s2sad {name} of {where}", source)
    namespace = dict(_RUNTIME)
    namespace.update(NAMESPACE)
    namespace.update(objects)
    code = compile(source, filename, "exec")  # (from the text: no Python tree of it is made)
    exec(code, namespace)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    user_globals = {k: v for k, v in objects.items() if k not in ("np", "math")}
    if NAMESPACE:
        used = names_mentioned([ast.parse(source, filename)])
        user_globals.update({k: v for k, v in NAMESPACE.items() if k in used})
    # the functions it defines (`def`s at the top: the module's code objects of functions)
    defined = [
        c.co_name
        for c in code.co_consts
        if isinstance(c, types.CodeType) and c.co_flags & inspect.CO_OPTIMIZED
    ]
    return Compiled(
        _keywords_renamed(namespace[name], keywords),
        source,
        name,
        globals=user_globals,
        rules_version=VERSION[0],
        functions={n: namespace[n] for n in defined if not n.startswith("<")},
        where=where,
        keywords=dict(keywords),
        called=_called_functions(user_globals),
        **fields,
    )


def _called_functions(objects: dict) -> tuple:
    """(function, its code) of each Python function among `objects`, and of those an object
    holding functions holds (a custom_vjp's `func` and `rule`)."""
    found = {}
    for value in objects.values():
        held = () if isinstance(value, (type, types.ModuleType)) else ("func", "rule")
        for func in (value, *(getattr(value, a, None) for a in held)):
            if type(func) is types.FunctionType:
                found[id(func)] = (func, func.__code__)  # (a rule: held, and named itself)
    return tuple(found.values())


@contextlib.contextmanager
def without_gc_pauses():
    """The transform makes hundreds of thousands of small tree nodes, and each of the cyclic
    collector's passes over the older ones costs more the longer the function: they took a third
    of a 2,000-line transform. Collection waits until the transform is done (nothing it makes
    lives on but the result)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
