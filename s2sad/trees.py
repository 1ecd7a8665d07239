"""Parameter trees: arguments that are dicts, lists, tuples, namedtuples, dataclasses (or classes
registered with `register_tree`) of arrays and numbers, nested. The transforms flatten them at
the API boundary: the generated function takes each leaf as a parameter of its own (named after
the path to it, `params_W`, `layers_0_b`), the body's `p["W"]`, `p.W`, `W, b = p` and loops over
a list of layers are rewritten to those leaves (pipeline/treeparams.py), and the gradients come
back in the argument's structure. A tree's structure (`TreeDef`: kinds, keys, lengths, classes)
is part of what a transform is specialized on, like the arguments' ranks.

Consumes the caller's argument values; produces leaves, their names and the `TreeDef` that
rebuilds the structure (`unflatten`).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import re
import sys
import sysconfig
import types
import weakref
from typing import NamedTuple

from .errors import S2SADError

# class -> (to_children, from_children): see register_tree
_REGISTERED: dict[type, tuple] = {}


def register_tree(cls, to_children, from_children) -> None:
    """Let instances of `cls` be parameter trees (like JAX's `register_pytree_node`).

    `to_children(obj)` returns `(children, aux)`: `children` a dict of name -> value (the body
    reads them as `obj.name` or `obj["name"]`) or a list/tuple (read as `obj[i]`); `aux` hashable
    data that is not differentiated (it becomes part of the specialization). `from_children(aux,
    children)` rebuilds an object from children of the same form (the gradients)."""
    if not isinstance(cls, type):
        raise TypeError(f"register_tree takes a class, not {cls!r}")
    _REGISTERED[cls] = (to_children, from_children)


class TreeDef(NamedTuple):
    """The structure of a tree: `kind` one of leaf, dict, list, tuple, namedtuple, dataclass,
    object (a bound method's `self`), registered or function (a function passed as an
    argument: no leaves); `keys` the children's keys in order."""

    kind: str
    cls: object = None
    keys: tuple = ()
    children: tuple = ()
    aux: object = None

    def leaf_count(self) -> int:
        if self.kind == "leaf":
            return 1
        return sum(c.leaf_count() for c in self.children)


LEAF = TreeDef("leaf")


def is_container(value) -> bool:
    cls = type(value)
    return (
        cls in (dict, list, tuple)
        or isinstance(value, (dict, list, tuple))
        or cls in _REGISTERED
        or (dataclasses.is_dataclass(value) and not isinstance(value, type))
        or is_user_object(value)
    )


# modules whose objects are never read as trees of their attributes
_LIBRARIES = {"builtins", "numpy", "scipy", "numba", "s2sad", "functools", "collections", "types"}


def is_user_object(value) -> bool:
    """An instance of a class of the user's (a model object): read through its attributes, a
    tree of them (`model.W`), its methods inlined (`model.predict(x)`). Never an installed
    library's object, nor an array-like."""
    cls = type(value)
    return (
        hasattr(value, "__dict__")
        and not isinstance(value, (type, types.ModuleType, types.FunctionType, types.MethodType))
        and (cls.__module__ or "").split(".")[0] not in _LIBRARIES
        and not callable(getattr(cls, "__array__", None))
        and not _installed(cls.__module__)
    )


@functools.lru_cache(maxsize=None)
def _installed(module_name: str) -> bool:
    """Whether a module is an installed library's (in the standard library or site-packages)."""
    file = getattr(sys.modules.get(module_name), "__file__", None)
    if not file:
        return False
    paths = sysconfig.get_paths()
    roots = [paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")]
    real = os.path.realpath(file)
    return any(r and real.startswith(os.path.join(os.path.realpath(r), "")) for r in roots)


def is_passed_function(value) -> bool:
    """A function passed as an argument (`integrate(rhs, y0)`: a `def`, a lambda, a closure a
    factory returned, a NumPy function): static, like a tree's structure. The transform inlines
    it (or applies its rule) where the body calls it, and is specialized on its code."""
    if isinstance(value, (type, types.ModuleType)) or is_container(value):
        return False
    return inspect.isfunction(value) or (
        callable(value)
        and not inspect.ismethod(value)
        and not isinstance(value, functools.partial)
        and (type(value).__module__ or "").split(".")[0] in ("numpy", "builtins", "s2sad")
    )


class Passed:
    """A function passed as an argument, in its TreeDef (kind "function"), whose `cls` is the
    specialization key (the function's code; the object for a NumPy function): any two are
    equal, so that a closure of another factory call reuses the transform (the transform reads
    the function's data from the argument at each call)."""

    __slots__ = ("_ref",)

    def __init__(self, function):
        try:  # the transform cache keeps the key: it must not keep a closure's data alive
            self._ref = weakref.ref(function)
        except TypeError:  # a NumPy ufunc or builtin: long-lived anyway
            self._ref = lambda: function

    @property
    def function(self):
        """The function (None once the caller dropped it: a later call brings its own)."""
        return self._ref()

    def __eq__(self, other):
        return isinstance(other, Passed)

    def __hash__(self):
        return 0

    def __repr__(self):
        return f"Passed({getattr(self.function, '__qualname__', self.function)!r})"


def passed_function(value) -> TreeDef:
    """The TreeDef of a function passed as an argument (no leaves; see is_passed_function)."""
    key = value.__code__ if inspect.isfunction(value) else value
    return TreeDef("function", key, aux=Passed(value))


def needs_flattening(value, differentiated: bool) -> bool:
    """Whether an argument is passed to the generated code as leaves: every container that is
    differentiated, and any holding a dict, dataclass or other structured value (a plain list or
    tuple of arrays outside `wrt` is passed as it is, as before trees existed)."""
    if not is_container(value):
        return False
    if differentiated or type(value) not in (list, tuple):
        return True
    return any(needs_flattening(v, False) for v in value)


def _children(value) -> tuple[TreeDef, list]:
    """The node (without its children's structure) and the child values."""
    cls = type(value)
    if cls in _REGISTERED:
        children, aux = _REGISTERED[cls][0](value)
        try:
            hash(aux)
        except TypeError:
            raise S2SADError(
                f"register_tree({cls.__name__}): its aux data {type(aux).__name__} is not "
                "hashable; return hashable aux data (a tuple, a number, a string)"
            ) from None
        if isinstance(children, dict):
            return TreeDef("registered", cls, tuple(children), aux=(True, aux)), list(
                children.values()
            )
        children = list(children)
        return TreeDef("registered", cls, tuple(range(len(children))), aux=(False, aux)), children
    if isinstance(value, dict):
        return TreeDef("dict", cls, tuple(value)), list(value.values())
    if isinstance(value, tuple) and hasattr(cls, "_fields"):
        return TreeDef("namedtuple", cls, tuple(cls._fields)), list(value)
    if isinstance(value, (list, tuple)):
        kind = "list" if isinstance(value, list) else "tuple"
        return TreeDef(kind, cls, tuple(range(len(value)))), list(value)
    if dataclasses.is_dataclass(value):
        names = tuple(f.name for f in dataclasses.fields(value))
        return TreeDef("dataclass", cls, names), [getattr(value, n) for n in names]
    # a bound method's `self`: its instance attributes
    attrs = vars(value)
    return TreeDef("object", cls, tuple(attrs)), list(attrs.values())


def flatten(value, as_object: bool = False, _within=()) -> tuple[TreeDef, list]:
    """The structure of `value` and its leaves, depth first. `as_object`: `value` is a user
    object read through its attributes (a bound method's `self`). A value holding itself is a
    leaf where it comes back."""
    if not (as_object or is_container(value)) or id(value) in _within:
        return LEAF, [value]
    node, children = _children(value)
    leaves, defs = [], []
    for child in children:
        d, ls = flatten(child, False, _within + (id(value),))
        defs.append(d)
        leaves += ls
    return node._replace(children=tuple(defs)), leaves


def unflatten(treedef: TreeDef, leaves):
    """The tree of `treedef`'s structure holding `leaves` (an iterator or a sequence)."""
    it = iter(leaves)
    return _build(treedef, it)


def _build(d: TreeDef, it):
    if d.kind == "leaf":
        return next(it)
    values = [_build(c, it) for c in d.children]
    if d.kind == "dict":
        return d.cls(zip(d.keys, values)) if d.cls is not dict else dict(zip(d.keys, values))
    if d.kind == "namedtuple":
        return d.cls(*values)
    if d.kind in ("list", "tuple"):
        return d.cls(values) if d.cls in (list, tuple) else d.cls(values)
    if d.kind == "dataclass":
        obj = object.__new__(d.cls)  # as the instance was: no __init__/__post_init__ logic
        for k, v in zip(d.keys, values):
            object.__setattr__(obj, k, v)
        return obj
    if d.kind == "registered":
        named, aux = d.aux
        children = dict(zip(d.keys, values)) if named else values
        return _REGISTERED[d.cls][1](aux, children)
    return dict(zip(d.keys, values))  # an object's attributes: a dict of them


def same_structure(a: TreeDef, b: TreeDef) -> bool:
    """Whether two trees have the same kinds, keys and lengths (a dict subclass may stand for a
    dict, a list for a tuple: a seed or tangent given for an output or argument)."""
    if a.kind == "leaf" or b.kind == "leaf":
        return a.kind == b.kind
    kinds = {a.kind, b.kind}
    if a.kind != b.kind and not kinds <= {"list", "tuple"}:
        return False
    return a.keys == b.keys and all(same_structure(x, y) for x, y in zip(a.children, b.children))


def paths(d: TreeDef, prefix=()) -> list[tuple]:
    """The path (keys from the root) of each leaf, depth first."""
    if d.kind == "leaf":
        return [prefix]
    out = []
    for k, c in zip(d.keys, d.children):
        out += paths(c, prefix + (k,))
    return out


def path_text(name: str, path: tuple, d: TreeDef | None = None) -> str:
    """`params['W']`, `layers[0].b`: a leaf as the user would write it."""
    text = name
    for k in path:
        text += f"[{k!r}]" if not (isinstance(k, str) and _attribute_kind(d)) else f".{k}"
        d = _child(d, k)
    return text


def _attribute_kind(d) -> bool:
    return d is not None and d.kind in ("namedtuple", "dataclass", "object")


def _child(d, k):
    if d is None or d.kind == "leaf":
        return None
    return d.children[d.keys.index(k)]


def leaf_names(name: str, d: TreeDef, taken) -> list[str]:
    """The generated code's parameter for each leaf: the path joined by underscores
    (`params_W`, `layers_0_b`), never one of `taken` nor another leaf's."""
    used = set(taken)
    out = []
    for path in paths(d):
        base = "_".join([name] + [re.sub(r"\W", "_", str(k)) for k in path])
        spelled, k = base, 2
        while spelled in used:
            spelled, k = f"{base}_{k}", k + 1
        used.add(spelled)
        out.append(spelled)
    return out


def code_names(func) -> set[str]:
    """Every name `func`'s code (and the code nested in it) uses: leaf names avoid them."""
    names: set[str] = set()
    todo = [func.__code__]
    while todo:
        code = todo.pop()
        names.update(code.co_varnames, code.co_names, code.co_cellvars, code.co_freevars)
        todo += [c for c in code.co_consts if hasattr(c, "co_code")]
    return names


def read_expression(name: str, d: TreeDef, path: tuple) -> str:
    """Python source reading the leaf at `path` of the tree `name` of structure `d`."""
    text = name
    for k in path:
        text += f".{k}" if d.kind in ("namedtuple", "dataclass", "object") else f"[{k!r}]"
        d = d.children[d.keys.index(k)]
    return text


def build_expression(d: TreeDef, leaves) -> str | None:
    """Python source building a tree of structure `d` from the leaf expressions `leaves` (an
    iterator), or None where it needs a class (only dicts, lists and tuples are spelled; an
    object's attributes are a dict of them, as `unflatten` gives)."""
    if d.kind == "leaf":
        return next(leaves)
    parts = [build_expression(c, leaves) for c in d.children]
    if any(p is None for p in parts) or (d.cls not in (dict, list, tuple) and d.kind != "object"):
        return None
    if d.kind in ("dict", "object"):
        return "{" + ", ".join(f"{k!r}: {p}" for k, p in zip(d.keys, parts)) + "}"
    if d.kind == "list":
        return "[" + ", ".join(parts) + "]"
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def wrapper_source(name: str, inner: str, params, trees, layout, is_tuple) -> str | None:
    """A gradient function `name(*params)` taking the trees whole: it calls `inner` (the
    generated function, which takes their leaves) and builds the gradients' trees (for
    `s2sad emit` of a function taking trees). None where a tree needs a class to rebuild."""
    by_param = {p: (d, names) for p, d, names in trees}
    args = []
    for p in params:
        if p in by_param:
            d, _ = by_param[p]
            args += [read_expression(p, d, path) for path in paths(d)]
        else:
            args.append(p)
    count = sum(len(names) for _, names in layout)
    results = iter([f"grads[{i}]" for i in range(count)] if count > 1 else ["grads"])
    built = []
    for d, names in layout:
        built.append(next(results) if d is None else build_expression(d, results))
    if any(b is None for b in built):
        return None
    value = f"({', '.join(built)})" if is_tuple else built[0]
    return (
        f"def {name}({', '.join(params)}):\n"
        f'    """The gradient, taking and giving the trees whole (their leaves go to {inner})."""\n'
        f"    grads = {inner}({', '.join(args)})\n"
        f"    return {value}\n"
    )
