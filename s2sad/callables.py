"""What the transforms accept as a function, and how a call's arguments reach the generated
code. A `Target` unwraps the callable (a `def` or a lambda, a bound method, a `functools.partial`,
a `staticmethod` or `classmethod`, a `functools.wraps` wrapper is differentiated as the wrapper it
is) to the Python function transformed and the arguments it fixes, resolves `wrt` (an index or a
name of the callable's parameters, or a path into a tree: `"self.W"`, `"params.W"`), and binds a
call: the arguments of the function, each tree flattened to its leaves (trees.py), as a
`FlatBound`, which also carries the leaves differentiated and how to put their gradients back.

Consumes the user's callable, `wrt` and each call's arguments; produces `FlatBound`s.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import numbers
import re

import numpy as np

from .errors import SourceUnavailableError, WrtError
from .pipeline.parse import parse_function
from .trees import (
    code_names,
    flatten,
    is_passed_function,
    leaf_names,
    needs_flattening,
    passed_function,
    path_text,
    paths,
    unflatten,
)


class FlatBound(inspect.BoundArguments):
    """Bound arguments of the generated function (trees as leaves), with `wrt` (the leaves
    differentiated, by parameter name), `trees` (per flattened parameter: its name, TreeDef and
    leaf names: part of the specialization; a function passed as an argument is one with no
    leaves, and `passed` holds it by name) and `layout` (per wrt item: the TreeDef of the
    differentiated part, or None for a plain argument, and its leaves' names)."""

    __slots__ = ("wrt", "trees", "layout", "shown", "plain", "passed", "positional")

    def __init__(self, signature, arguments):
        super().__init__(signature, arguments)
        # the arguments, where the call passed each by position and the generated function
        # takes them so: `args` without inspect's walk over the signature (Transformed._bind)
        self.positional = None

    def copy_with(self, arguments: dict) -> FlatBound:
        new = FlatBound(self.signature, arguments)
        new.wrt, new.trees, new.layout, new.shown = self.wrt, self.trees, self.layout, self.shown
        new.plain, new.passed = self.plain, self.passed
        return new

    def regroup(self, leaves: list):
        """Per wrt item, its value built from the leaves' values (in `wrt` order)."""
        if self.plain:  # no tree differentiated: one leaf per item
            return leaves
        it = iter(leaves)
        out = []
        for d, names in self.layout:
            part = [next(it) for _ in names]
            out.append(part[0] if d is None else unflatten(d, part))
        return out


def _unwrap(f):
    """(the Python function, positional arguments it fixes, keywords it fixes, the parameter
    read as an object (a bound method's self) or None)."""
    prefix, keywords, obj = (), {}, None
    if isinstance(f, (staticmethod, classmethod)):
        f = f.__func__
    call = getattr(type(f), "__call__", None)
    if (
        not inspect.isroutine(f)
        and inspect.isfunction(call)
        and not isinstance(f, type)
        and (call.__module__ or "").split(".")[0] not in ("numpy", "s2sad")
    ):
        f = f.__call__  # an object of the user's called like a function: its __call__
    while True:
        if isinstance(f, functools.partial):
            prefix = tuple(f.args) + prefix
            keywords = {**f.keywords, **keywords}
            f = f.func
        elif inspect.ismethod(f):
            if prefix or keywords:  # partial(obj.method, ...): self comes first
                pass
            prefix = (f.__self__,) + prefix
            if obj is None and not isinstance(f.__self__, type):
                obj = True
            f = f.__func__
        else:
            break
    if not inspect.isfunction(f):
        raise SourceUnavailableError(
            f"{_short(f)} is not a Python function with source code",
            hint="differentiate a plain `def` function that calls it; NumPy functions already "
            "have rules, and others can get one with s2sad.register_vjp",
        )
    return f, prefix, keywords, obj


def _short(value) -> str:
    """A value as messages show it: never the whole repr of an array."""
    text = repr(value)
    return text if len(text) <= 80 else f"<{type(value).__name__} object>"


class Target:
    """The callable a transform was given (see the module docstring)."""

    def __init__(self, f, wrt):
        self.original = f
        self.func, self.prefix, self.keywords, obj = _unwrap(f)
        self.func_signature = inspect.signature(self.func, follow_wrapped=False)
        params = list(self.func_signature.parameters)
        self.objects = {params[0]} if obj and params else set()
        self.fixed = params[: len(self.prefix)]
        # what the user calls: the partial's or bound method's own parameters
        self.signature = (
            self.func_signature
            if f is self.func
            else inspect.signature(
                f if not isinstance(f, (staticmethod, classmethod)) else self.func
            )
        )
        self.plain = f is self.func
        # a functools.wraps wrapper taking *args/**kwargs: called as the function it wraps
        # (its signature, wrt by its parameters), its `args` and `kwargs` passed as trees
        code = self.func.__code__
        self.star = bool(code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)) and (
            hasattr(self.func, "__wrapped__") and self.plain
        )
        if self.star:
            self.signature = inspect.signature(f)  # the wrapped function's
        elif code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS):
            parse_function(self.func)  # refuses *args/**kwargs, at their line
        self.taken = code_names(self.func) | set(params)
        self.items, self.is_tuple = self._wrt(wrt)
        self.wrt = tuple(path_text(root, path) if path else root for root, path in self.items)

    def _wrt(self, wrt):
        """Per wrt item (a parameter of the function and a path into it), and whether wrt was a
        tuple."""
        name = getattr(self.original, "__name__", type(self.original).__name__)
        shown = list(self.signature.parameters)
        every = list(self.func_signature.parameters)
        items = wrt if isinstance(wrt, (tuple, list)) else (wrt,)
        out = []
        for item in items:
            if isinstance(item, numbers.Integral) and not isinstance(item, bool):
                if not -len(shown) <= item < len(shown):
                    raise WrtError(
                        f"wrt={item!r} is out of range: {name} has parameters "
                        f"{', '.join(shown) or '(none)'}",
                        hint="pass an index below the number of parameters or a name",
                    )
                out.append((shown[item], ()))
                continue
            root, path = _path(item) if isinstance(item, str) else (None, ())
            if root not in every and not (self.star and root in shown):
                obj = min(self.objects, default="self")
                close = difflib.get_close_matches(str(root), [*shown, *self.objects], n=1)
                raise WrtError(
                    f"wrt={item!r} is not a parameter of {name}; its parameters "
                    f"are {', '.join(shown) or '(none)'}"
                    + (f" (and {', '.join(self.objects)}, its object)" if self.objects else ""),
                    hint=(f"did you mean wrt={close[0]!r}? " if close else "")
                    + "pass a parameter name or its position, or a path into a tree "
                    f"argument such as 'params.W' or '{obj}.W'"
                    + (
                        f" (a method's object is named as its first parameter: '{obj}')"
                        if obj != "self"
                        else ""
                    ),
                )
            out.append((root, path))
        if len(set(out)) != len(out):
            raise WrtError(f"wrt={wrt!r} names a parameter twice")
        return out, isinstance(wrt, (tuple, list))

    def bind_flat(self, args, kwargs, check) -> FlatBound:
        """`flat(bind(args, kwargs))` (a wrapper's wrt names translated to paths into its
        `args` and `kwargs`)."""
        if not self.star:
            return self.flat(self.bind(args, kwargs), check, self.items)
        inner = _bound(self.signature, self.func.__name__, args, kwargs)
        bound = self.bind(inner.args, inner.kwargs)
        params = [p for p in self.func_signature.parameters.values()]
        stars = {p.kind: p.name for p in params if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
        positional = list(inner.signature.parameters)[: len(inner.args)]
        items = []
        for root, path in self.items:
            if root in bound.arguments:
                items.append((root, path))
            elif root in positional and inspect.Parameter.VAR_POSITIONAL in stars:
                items.append(
                    (stars[inspect.Parameter.VAR_POSITIONAL], (positional.index(root),) + path)
                )
            elif root in inner.kwargs and inspect.Parameter.VAR_KEYWORD in stars:
                items.append((stars[inspect.Parameter.VAR_KEYWORD], (root,) + path))
            else:
                raise WrtError(f"wrt={root!r}: {self.func.__name__} was called without it")
        # the leaves of *args and **kwargs by the wrapped function's names for them
        labels = {
            stars[k]: n
            for k, n in (
                (inspect.Parameter.VAR_POSITIONAL, positional),
                (inspect.Parameter.VAR_KEYWORD, list(inner.kwargs)),
            )
            if k in stars
        }
        return self.flat(bound, check, items, labels)

    def bind(self, args, kwargs) -> inspect.BoundArguments:
        """The function's arguments for a call of the callable (defaults applied)."""
        if self.keywords:
            kwargs = {**self.keywords, **kwargs}
        bound = _bound(self.func_signature, self.func.__name__, (*self.prefix, *args), kwargs)
        bound.apply_defaults()
        return bound

    def flat(self, bound: inspect.BoundArguments, check, items, labels=None) -> FlatBound:
        """`bound` with its trees as leaves; `check(shown name, value)` per leaf differentiated
        (`items`: the wrt items, as parameters of the function and paths into them; `labels`:
        names for a flat tree's leaves, where they are free: a wrapper's `x` for `args[0]`)."""
        roots = {root for root, _ in items}
        stars = {
            p.name
            for p in bound.signature.parameters.values()
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        }
        trees, flat, shown, passed = [], {}, {}, {}
        for name, value in bound.arguments.items():
            obj = name in self.objects
            if not obj and is_passed_function(value):  # static: part of the specialization
                if name in roots:
                    raise WrtError(
                        f"wrt={name!r} names a function passed as an argument; s2sad "
                        "differentiates arrays and numbers, and inlines the function",
                        hint="leave it out of wrt (differentiate its parameters instead)",
                    )
                trees.append((name, passed_function(value), ()))
                passed[name] = value
                continue
            if obj or name in stars or needs_flattening(value, name in roots):
                d, leaves = flatten(value, as_object=obj)
                names = leaf_names(name, d, self.taken | set(flat))
                chosen = list((labels or {}).get(name, ()))
                free = not (set(chosen) & (self.taken | set(flat) | set(bound.arguments)))
                if (
                    chosen
                    and len(chosen) == len(names)
                    and free
                    and len(set(chosen)) == len(chosen)
                ):
                    names = chosen
                trees.append((name, d, tuple(names)))
                flat.update(zip(names, leaves))
                from_tree = dict(zip(paths(d), names))
                shown.update({n: path_text(name, p, d) for p, n in from_tree.items()})
                if names is chosen:
                    shown.update({n: n for n in names})
            else:
                flat[name] = value
                shown[name] = name
        layout, wrt = [], []
        for root, path in items:
            tree = next((t for t in trees if t[0] == root), None)
            if tree is None:
                if path:
                    raise WrtError(f"wrt={path_text(root, path)!r}: {root} is not a tree here")
                layout.append((None, (root,)))
                wrt.append(root)
                continue
            d, names = _subtree(tree[1], tree[2], path, root)
            if d is not None and d.kind == "object":  # wrt="self": its float attributes
                d, names = _floats_of(d, names, flat)
            if not names:
                raise WrtError(f"wrt={path_text(root, path)!r} holds no arrays or numbers")
            layout.append((d, names))
            wrt += names
        if len(set(wrt)) != len(wrt):
            raise WrtError("wrt names a part of a tree twice (once inside another)")
        for n in wrt:
            check(shown[n], flat[n])
        if trees:
            signature = _flat_signature(tuple(flat))
            out = FlatBound(signature, flat)
        else:
            out = FlatBound(bound.signature, bound.arguments)
        out.wrt, out.trees, out.layout, out.shown = tuple(wrt), tuple(trees), layout, shown
        out.plain = all(d is None for d, _ in layout)
        out.passed = passed
        return out


def _bound(signature, name: str, args, kwargs) -> inspect.BoundArguments:
    """`signature.bind(*args, **kwargs)`, its errors worded as Python's call would word them: a
    keyword the function has no parameter for is named before any missing argument (inspect
    reports the missing one first)."""
    try:
        return signature.bind(*args, **kwargs)
    except TypeError as exc:
        params = signature.parameters.values()
        if not any(p.kind == p.VAR_KEYWORD for p in params):
            named = {p.name for p in params if p.kind != p.POSITIONAL_ONLY}
            unexpected = next((k for k in kwargs if k not in named), None)
            if unexpected is not None:
                raise TypeError(
                    f"{name}() got an unexpected keyword argument '{unexpected}'"
                ) from None
        raise TypeError(f"{name}(): {exc}") from None


def _path(text: str):
    """'self.W' -> ('self', ('W',)); "params['W']" and 'layers[0].b' too."""
    if text.isidentifier():
        return text, ()
    found = re.fullmatch(
        r"([A-Za-z_]\w*)((?:\.[A-Za-z_]\w*|\[\s*-?\d+\s*\]|\[\s*'[^']*'\s*\]"
        r'|\[\s*"[^"]*"\s*\])*)',
        text.strip(),
    )
    if found is None:
        return text, ()
    keys = []
    for name, index, key1, key2 in re.findall(
        r"\.([A-Za-z_]\w*)|\[\s*(-?\d+)\s*\]|\[\s*'([^']*)'\s*\]|\[\s*\"([^\"]*)\"\s*\]",
        found.group(2),
    ):
        keys.append(name or (int(index) if index else key1 or key2))
    return found.group(1), tuple(keys)


def _subtree(d, names, path, root):
    """The part of tree `d` (leaves `names`) at `path`: its TreeDef (None for a leaf) and names."""
    start = 0
    for key in path:
        if d.kind == "leaf":
            raise WrtError(f"wrt={path_text(root, path)!r}: no such part of {root}")
        keys = d.keys
        if key not in keys and isinstance(key, int) and d.kind == "namedtuple":
            key = keys[key]
        if key not in keys:
            raise WrtError(
                f"wrt={path_text(root, path)!r}: {root} has no key {key!r} here "
                f"(keys: {', '.join(map(str, keys))})"
            )
        i = keys.index(key)
        start += sum(c.leaf_count() for c in d.children[:i])
        d = d.children[i]
    part = tuple(names[start : start + d.leaf_count()])
    return (None if d.kind == "leaf" else d), part


def _floats_of(d, names, flat):
    """An object's attributes whose leaves are all floats (arrays or numbers): what
    `wrt="self"` differentiates; the gradient is a dict of them."""
    keys, children, kept, start = [], [], [], 0
    for key, child in zip(d.keys, d.children):
        part = names[start : start + child.leaf_count()]
        start += child.leaf_count()
        if part and all(_is_float(flat[n]) for n in part):
            keys.append(key)
            children.append(child)
            kept += part
    return d._replace(keys=tuple(keys), children=tuple(children)), tuple(kept)


def _is_float(value) -> bool:
    if isinstance(value, (bool, str, bytes)) or value is None or callable(value):
        return False
    try:
        return np.issubdtype(np.result_type(value), np.floating)
    except TypeError:
        return False


@functools.lru_cache(maxsize=256)
def _flat_signature(names: tuple) -> inspect.Signature:
    return inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names]
    )


def generated_names(generated, signature) -> dict:
    """The generated function's name for each parameter of `signature`: its positional ones in
    order, then its keyword-only ones (the data it takes sit between them)."""
    theirs = inspect.signature(generated).parameters.values()
    positional = [p.name for p in theirs if p.kind != p.KEYWORD_ONLY]
    keyword = [p.name for p in theirs if p.kind == p.KEYWORD_ONLY]
    names = {}
    for p in signature.parameters.values():
        taken = keyword if p.kind == p.KEYWORD_ONLY and keyword else positional
        if taken:  # (as many as it has: a zip's)
            names[p.name] = taken.pop(0)
    return names
