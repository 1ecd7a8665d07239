"""Name resolution: what each free name of the function refers to, and how emitted code spells it.

NumPy is recognised under any alias (`import numpy as onp`, `from numpy import exp`) and always
emitted as `np.<path>`; `math` likewise as `math.<name>`. Functions, classes and modules keep the
user's name and are placed in the namespace the generated code runs in. Data (numbers, arrays,
anything not callable and not a module) is never placed there: it becomes a trailing parameter
of the generated function, which each call fills with the value the user's scope holds then
(`Reads`), so neither a cached transform nor Numba's compiled code keeps an old value.

Every read is recorded as a spec `(function, kind, key, attributes)`: function 0 is the
differentiated function and 1, 2, ... the helpers inlined into it (each reached by an earlier
spec), kind is "global" (then the builtins), "closure" (an index into the cells), "default" (an
index into `__defaults__`), "kwdefault" or "argument" (a function the call passes as an
argument, by parameter name), and the attributes follow it (`config.LR`).
"""

from __future__ import annotations

import ast
import builtins
import keyword
import math
import types
from dataclasses import dataclass, field

import numpy as np

from .. import ir, runtime
from ..astcopy import clone
from ..errors import NameResolutionError, UnsupportedSyntaxError
from . import frame_readers
from .libraries import is_library_code
from .reserved import s2sad_object

_NUMPY_MODULES = {"np": np, "np.linalg": np.linalg}


def _named_alias(spelled: str | None, prefix: str, obj, name: str) -> bool:
    """Whether `spelled` already names `obj` by its own __name__ in the same module, and `name`
    is another alias (np.long of np.int64, np.asin of np.arcsin): the spelling users read in
    NumPy's documentation, and the one NumPy 1.x also has (np.bool_ stays: np.bool is 2.x only)."""
    own = getattr(obj, "__name__", None)
    return spelled == f"{prefix}.{own}" and name != own and own != "bool"


def _canonical_table() -> dict[int, str]:
    table: dict[int, str] = {}
    for prefix, module in [("math", math), ("np.linalg", np.linalg), ("np", np)]:
        for name in dir(module):
            if not name.startswith("_"):
                obj = getattr(module, name)
                if callable(obj) or isinstance(obj, float):
                    if _named_alias(table.get(id(obj)), prefix, obj, name):
                        continue  # np.int32, not np.intc; np.arcsin, not np.asin
                    table[id(obj)] = f"{prefix}.{name}"
    table[id(runtime.stop_gradient)] = "stop_gradient"
    table[id(runtime.scatter_added)] = "scatter_added"  # what np.add.at statements become
    table[id(np)] = "np"
    table[id(np.linalg)] = "np.linalg"
    table[id(math)] = "math"
    return table


_CANONICAL = _canonical_table()
_NOT_FOUND = object()
_CANONICAL_MODULES = (np, np.linalg, math)


def is_data(value) -> bool:
    """A value generated code receives at each call rather than keeping: not a function,
    class or module."""
    return not callable(value) and not isinstance(value, types.ModuleType)


@dataclass
class Reads:
    """What a transform read from the user's scopes, shared by the function and its helpers."""

    checks: dict = field(default_factory=dict)  # spec -> the object it must still name
    data: dict = field(default_factory=dict)  # spec -> the parameter that receives it
    helpers: list = field(default_factory=list)  # (spec reaching helper k+1, its code)
    # spec -> an int the generated code's shape depends on (an unrolled loop's trip count): a
    # call reading another value is transformed again
    pinned: dict = field(default_factory=dict)
    spelled: set = field(default_factory=set)  # specs the generated code names itself
    fresh: object = None  # a name allocator's `fresh`, for data parameters that would clash
    taken: object = None  # whether generated code uses a name already (see Resolver.hygiene)
    reserve: object = None  # keeps a name from later allocations (see Resolver.reserve)

    def record(self, spec, value) -> None:
        if spec is None or is_data(value):
            return
        if isinstance(value, types.MethodType):  # a new object at each access: its function
            spec, value = spec[:3] + (spec[3] + ("__func__",),), value.__func__
        self.checks.setdefault(spec, value)

    def pin(self, spec, value: int) -> None:
        if spec is not None:
            self.pinned.setdefault(spec, value)

    def helper(self, spec, func) -> int:
        """The index of inlined helper `func` reached by `spec` (its code is what is checked)."""
        for k, (s, code) in enumerate(self.helpers):
            if s == spec and code is func.__code__:
                return k + 1
        self.helpers.append((spec, func.__code__))
        return len(self.helpers)

    def parameter(self, spec, preferred: str, namespace: dict) -> str:
        """The name of the data parameter that receives what `spec` reads."""
        if spec in self.data:
            return self.data[spec]
        name = preferred
        if (
            name in namespace
            or name in self.data.values()
            or (self.taken is not None and self.taken(name))
        ):
            name = self.fresh(preferred) if self.fresh else f"{preferred}_{len(self.data)}"
        elif self.reserve is not None:  # (`cfg_scale`: a name no source wrote, kept from others)
            self.reserve(name)
        self.data[spec] = name
        return name

    def final_checks(self) -> tuple:
        """Identity checks to run at each call: an inlined helper is checked by its code (a new
        closure of the same factory reuses the transform) unless the code also calls it."""
        inlined = {s for s, _ in self.helpers}
        return tuple(
            (s, v) for s, v in self.checks.items() if s not in inlined or s in self.spelled
        )


class Resolver:
    """Looks up free names through the closure, the globals and the builtins."""

    def __init__(self, parsed, local_names: set[str], parent=None, index: int | None = None):
        self.parsed = parsed
        self.reads = parent.reads if parent is not None else Reads()
        # which function's scopes this resolver reads (see Reads)
        self.index = index if index is not None else (parent.index if parent is not None else 0)
        func = parsed.func
        self.locals = local_names
        self.closure = {}
        if func.__closure__:
            for name, cell in zip(func.__code__.co_freevars, func.__closure__):
                try:
                    self.closure[name] = cell.cell_contents
                except ValueError:  # an empty cell: defined later in the enclosing scope
                    pass
        self.globals = func.__globals__
        # a parameter bound to a function the caller passed (`rk4(dynamics, y, h)` inlined):
        # its name -> (the function, the caller's spec reading it, how the caller spells it)
        self.functions: dict[str, tuple] = {}
        # shared with the functions inlined into this one: generated code has one namespace
        self.namespace: dict[str, object] = (
            parent.namespace if parent is not None else {"np": np, "math": math}
        )
        # a user's global spelled like one of s2sad's names: its name in generated code, by
        # (name, id of the object); and the user's name of each such spelling
        self.aliases: dict[tuple, str] = parent.aliases if parent is not None else {}
        self.original: dict[str, str] = parent.original if parent is not None else {}
        self.reserved, self.names, self.top_locals = (
            (parent.reserved, parent.names, parent.top_locals) if parent else (set(), None, set())
        )

    def pass_functions(self, passed: dict) -> None:
        """The differentiated function's parameters bound to functions the call passes (see
        trees.is_passed_function): a call of one is inlined, or has its rule, as if the
        parameter named it; generated code spells a NumPy function as NumPy's."""
        for name, func in passed.items():
            canonical = _CANONICAL.get(id(func))
            if canonical is not None:
                spelled = ast.parse(canonical, mode="eval").body
            else:  # placed in the namespace only where the code calls it (see spelling)
                spelled = ast.Name(name, ast.Load())
            self.functions[name] = (func, (self.index, "argument", name, ()), spelled)

    def scopes(self) -> int:
        """The index of the function whose scopes this resolver reads (see Reads)."""
        return self.index

    def hygiene(self, reserved: set[str], names, top_locals: set[str]) -> None:
        """Spell with a fresh name from `names` each global whose name is in `reserved`, or
        names a local of the generated function (`top_locals`, or a name s2sad made: a global of
        a function inlined into it), or another object already; data parameters likewise."""
        self.reserved, self.names, self.top_locals = reserved, names, top_locals
        self.reads.fresh, self.reads.reserve = names.fresh, self.reserve
        self.reads.taken = lambda name: (
            name in reserved or name in top_locals or name in names.made
        )

    def lookup(self, name: str, node: ast.AST):
        return self.locate(name, node)[0]

    def locate(self, name: str, node: ast.AST):
        """The object `name` denotes and the spec that reads it again at a call."""
        if name in self.functions:
            return self.functions[name][:2]
        name = self.parsed.original.get(name, name)  # renamed by `hygienic`
        made = self.parsed.synthesized
        if name in made:  # a checkpointed loop (checkpoint_loops.py): made per code object
            return made[name], None
        if name in self.closure:
            spec = (self.index, "closure", self.parsed.func.__code__.co_freevars.index(name), ())
            return self._seen(self.closure[name], name, node), spec
        for scope in (self.globals, vars(builtins)):
            if name in scope:
                return self._seen(scope[name], name, node), (self.index, "global", name, ())
        raise self.parsed.error(
            NameResolutionError,
            f"name '{name}' is not defined",
            node,
            hint="define it at module level or in the enclosing function before the first call",
        )

    def _seen(self, value, name: str, node: ast.AST):
        """`value`, unless it reads the frame's variables by name, or hands out objects by a
        name given at run time (frame_readers.py)."""
        what = frame_readers.what_it_does(value)
        if what is not None:
            raise self.reader_refused(name, node, what)
        return value

    def reader_refused(self, name: str, node: ast.AST, what: str):
        return self.parsed.error(
            UnsupportedSyntaxError,
            f"'{name}' {what}, which s2sad cannot follow (the generated code renames the "
            "function's variables and reuses their arrays; `eval` and the like read them)",
            node,
            hint="refer to the variables directly, or compute the value outside the "
            "differentiated function and pass it in",
        )

    def check_getattr(self, call: ast.Call, callee) -> None:
        """Refuses `getattr(module, name)` unless `name` is a string constant naming an object
        `_seen` lets through: a computed name can hand out `eval` and the like."""
        if callee is not getattr or not call.args:
            return
        module = self.resolve(call.args[0])
        name = call.args[1] if len(call.args) > 1 else None
        if isinstance(name, ast.Constant) and isinstance(name.value, str):
            if name.value in frame_readers.NAMESPACE_ATTRIBUTES:
                raise self.reader_refused(ast.unparse(call), call, frame_readers.HANDS_OUT)
            found = getattr(module, name.value, _NOT_FOUND) if module is not None else _NOT_FOUND
            if found is not _NOT_FOUND:
                self._seen(found, ast.unparse(call), call)
            return
        if not isinstance(module, types.ModuleType):
            return  # an attribute of the user's own object by a computed name
        raise self.parsed.error(
            UnsupportedSyntaxError,
            f"'{ast.unparse(call)}' takes an attribute of a module by a name computed at run "
            "time, which s2sad cannot follow (it may hand out `eval` or another reader of the "
            "function's variables)",
            call,
            hint=f"name the attribute in the code (`{ast.unparse(call.args[0])}.sin`), or pass "
            "the function in as an argument",
        )

    def resolve(self, node: ast.expr):
        """The object a Name or Attribute chain denotes, or None if it starts at a local name."""
        return self.resolve_spec(node)[0]

    def resolve_spec(self, node: ast.expr):
        """`resolve(node)` and the spec reading it again at a call (None where nothing needs
        reading: a runtime helper, NumPy's own attributes). Each object read is recorded for the
        cache's checks, except attributes of data (the code reads them when it runs; a function
        inlined from one is checked by its code)."""
        helper = ir.runtime_helper(node)
        if helper is not None:  # put there by normalization
            return helper, None
        if isinstance(node, ast.Name):
            if node.id in self.locals:
                return None, None
            value, spec = self.locate(node.id, node)
            self.reads.record(spec, value)
            return value, spec
        if isinstance(node, ast.Attribute):
            base, spec = self.resolve_spec(node.value)
            if base is None:
                return None, None
            value = getattr(base, node.attr, _NOT_FOUND)
            if node.attr in frame_readers.NAMESPACE_ATTRIBUTES or (
                node.attr == "__dict__" and isinstance(base, types.ModuleType)
            ):
                raise self.reader_refused(ast.unparse(node), node, frame_readers.HANDS_OUT)
            if value is _NOT_FOUND:
                raise self.parsed.error(
                    NameResolutionError,
                    f"'{ast.unparse(node.value)}' has no attribute '{node.attr}'",
                    node,
                )
            value = self._seen(value, ast.unparse(node), node)
            if spec is None or any(base is m for m in _CANONICAL_MODULES):
                return value, None
            spec = spec[:3] + (spec[3] + (node.attr,),)
            if not is_data(base):  # an attribute of data is read when the code runs
                self.reads.record(spec, value)
            return value, spec
        return None, None

    def spelling(self, node: ast.expr, obj) -> ast.expr:
        """How emitted code refers to `obj`, which the user wrote as `node`: data read through a
        name becomes a parameter the call fills in (see Reads), never a constant."""
        if isinstance(node, ast.Name) and ir.runtime_helper(node) is not None:
            return clone(node)  # s2sad's own (`in_place`, put there by normalization)
        if isinstance(node, ast.Name) and node.id in self.functions:
            func, spec, spelled = self.functions[node.id]
            if spec is not None and spec[1] == "argument" and isinstance(spelled, ast.Name):
                self.namespace[spelled.id] = func  # a function passed that the code calls
            return clone(spelled)  # as the caller spells what it passed
        root = node
        while isinstance(root, ast.Attribute):
            root = root.value
        if (
            isinstance(root, ast.Name)
            and root.id not in self.locals
            and ir.runtime_helper(root) is None
        ):
            base, spec = self.locate(root.id, root)
            if is_data(base):
                return _renamed_root(node, self.reads.parameter(spec, root.id, self.namespace))
            _, spec = self.resolve_spec(node)
            if spec is not None and spec[3] and is_data(obj) and id(obj) not in _CANONICAL:
                preferred = "_".join((root.id,) + spec[3])
                return ast.Name(self.reads.parameter(spec, preferred, self.namespace), ast.Load())
            if spec is not None:
                self.reads.spelled.add(spec)
                self.reads.spelled.add(spec[:3] + ((),))
        canonical = _CANONICAL.get(id(obj))
        if canonical is None and isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            if isinstance(base, types.ModuleType) and id(base) in _CANONICAL:
                canonical = f"{_CANONICAL[id(base)]}.{node.attr}"
        if canonical is not None:
            return ast.parse(canonical, mode="eval").body
        if isinstance(node, ast.Attribute) and _users_function(obj):
            # `gp.sqdist(X)`, not inlined: called by a name, as a helper of a bare name is
            # (compiled code reads no function of a module by attribute); `gp_sqdist` where
            # `sqdist` names another object already (`moda.sq` and `modb.sq`)
            qualified = "_".join(_dotted(node.value) + [obj.__name__])
            key = (obj.__name__, id(obj))
            if self.globals.get(obj.__name__, obj) is not obj and key not in self.aliases:
                # the user's own `sq` is another object: `modb_sq` from the start
                self.aliases[key] = self.names.fresh(qualified)
                self.original[self.aliases[key]] = obj.__name__
            name = self.global_name(obj.__name__, obj, qualified)
            self.namespace[name] = obj
            return ast.Name(name, ast.Load())
        root = node
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name):
            value = self.lookup(root.id, root)
            root.id = self.global_name(root.id, value)
            self.namespace[root.id] = value
        return node

    def global_name(self, name: str, value, other: str | None = None) -> str:
        """The name generated code gives the user's global `name`: its own, unless the generated
        code uses that name for something else (`unbroadcast` -> `unbroadcast2`; `other`, if
        given, is the base of the new name). The name is taken from the allocator at once: no
        name s2sad makes later (`dtheta`, `theta_dot`, a temporary) is spelled like it, even
        where the user's source never wrote it (`feats.dtheta(X)` is called as `dtheta`)."""
        user_name = self.parsed.original.get(name, name)
        key = (name, id(value))
        if key not in self.aliases and not self._clashes(name, value):
            if name != user_name:
                self.original[name] = user_name
            self.reserve(name)
            return name
        if key not in self.aliases:
            self.aliases[key] = self.names.fresh(other or name)
            self.original[self.aliases[key]] = user_name
        return self.aliases[key]

    def reserve(self, name: str) -> None:
        """`name` is bound in generated code's namespace: no later allocation gives it out."""
        if self.names is not None:
            self.names.taken.add(name)

    def _clashes(self, name: str, value) -> bool:
        if name in self.namespace:
            return self.namespace[name] is not value
        if name in self.reserved:
            return s2sad_object(name) is not value
        return (
            name in self.top_locals
            or name in self.reads.data.values()
            or (self.names is not None and name in self.names.made)
        )


def _users_function(obj) -> bool:
    """Whether `obj` is a plain function of the user's code (or one with a custom_vjp rule, which
    wraps it as `func`), named as a name can be."""
    if hasattr(obj, "defvjp") and type(getattr(obj, "func", None)) is types.FunctionType:
        obj = obj.func  # (custom.custom_vjp, which this stage does not import)
    return (
        type(obj) is types.FunctionType
        and obj.__name__.isidentifier()
        and not keyword.iskeyword(obj.__name__)
        and (obj.__module__ or "").split(".")[0] not in ("numpy", "s2sad", "math")
        and not is_library_code(obj)
    )


def _dotted(node: ast.expr) -> list[str]:
    """The names of a Name or Attribute chain (`a.b.c`: a, b, c)."""
    if isinstance(node, ast.Attribute):
        return _dotted(node.value) + [node.attr]
    return [node.id] if isinstance(node, ast.Name) else []


def _renamed_root(node: ast.expr, name: str) -> ast.expr:
    """`node` (a Name or Attribute chain) with its root name replaced by `name`."""
    if isinstance(node, ast.Name):
        return ast.Name(name, ast.Load())
    return ast.Attribute(_renamed_root(node.value, name), node.attr, ast.Load())
