"""Transforms compose: a gradient s2sad made (`df = s2sad.grad(f)`) has a derivative rule, so any
transform meeting a call of it differentiates through it, and `grad(grad(f))`, `jacobian(grad(f))`,
`jvp(grad(f))` are transforms of a small function calling the inner one (`composed`).

The rules are second derivatives of `f`, forward mode over the gradient code s2sad generates for
`f` (as `s2sad.hessian`): for `gx = grad_W f(*args)`,
- the cotangent of each float argument A, given the cotangent v of gx, is H[A, W] v (the Hessian is
  symmetric): the tangent of the gradient with respect to every float argument, pushed forward
  from v on the leaves of W and zero elsewhere;
- the tangent of gx along the tangent t of an argument A is H[W, A] t, the same sweep from t.
A `value_and_grad` object's rule adds the cotangent of its value (v0 * grad_A f).

Registered at the first look-up of the object (registry.PROVIDERS), under names from the user's
(`grad_f_vjp`, `grad_f_jvp`), and kept with it: a transform's cache checks the object its code
calls, so another object of the same name is transformed again.

Consumes `Transformed` objects; produces their rules and the functions composing them.
"""

from __future__ import annotations

import ast
import inspect
import linecache
import numbers

import numpy as np

from .custom import _signature_text, _unlike
from .errors import S2SADError
from .pipeline.integer_writes import FloatNumberError
from .pipeline.reserved import RESERVED
from .rules.registry import NAMESPACE, PROVIDERS, SECOND_ORDER, explicit, register
from .transform_cache import transform_and_read
from .transformed import JVPTransformed, Transformed, flat_tangents
from .trees import flatten, unflatten

_COMPOSABLE = ("grad", "value_and_grad")


def refusal(inner) -> str | None:
    """Why `inner` (a Transformed) cannot be composed, or None."""
    if type(inner) is not Transformed or inner.mode not in _COMPOSABLE:
        kind = "jvp" if isinstance(inner, JVPTransformed) else inner.mode
        return (
            f"s2sad composes with gradients (s2sad.grad, s2sad.value_and_grad), not with "
            f"s2sad.{kind} ({inner.func.__qualname__})"
        )
    if inner.has_aux:
        return f"s2sad does not compose with a gradient taken with has_aux=True ({inner!r})"
    if _parameters(inner) is None:
        return f"s2sad does not compose with {inner!r}: its function takes *args or **kwargs"
    if any(path for _, path in inner.target.items):
        return f"s2sad does not compose with {inner!r}: its wrt names a part of an argument"
    return None


def _parameters(inner):
    params = list(inspect.signature(inner).parameters.values())
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
        return None
    return params


class Composition:
    """The second derivatives of one gradient object `inner`, as its rules call them."""

    def __init__(self, inner):
        self.inner = inner
        self.params = _parameters(inner)
        self.names = [p.name for p in self.params]
        self.wrt = [name for name, _ in inner.target.items]  # whole arguments (see refusal)
        self._all = {}  # the float arguments' names -> the gradient of f with respect to them
        self._forward = {}  # generated gradient function -> its forward transform (few: one
        # per float arguments and ranks)

    def __repr__(self):
        return f"<the derivative rules of {self.inner!r}>"

    def _call_parts(self, values):
        """The user's positional and keyword arguments for the parameters' values."""
        args, kwargs = [], {}
        for p, v in zip(self.params, values):
            if p.kind == p.KEYWORD_ONLY:
                kwargs[p.name] = v
            else:
                args.append(v)
        return tuple(args), kwargs

    def second(self, values, seeds: dict):
        """For the arguments `values` (one per parameter) and tangents by parameter name (a
        value shaped like that argument, a tree for a tree): the gradient of f and its tangent,
        each as {parameter name: value} over the float arguments."""
        args, kwargs = self._call_parts(values)
        floats = tuple(n for n, v in zip(self.names, values) if _is_float(v))
        if not floats:
            return {}, {}
        gradient = self._all.get(floats)
        if gradient is None:
            gradient = self._all[floats] = Transformed(self.inner.target.original, floats, "grad")
        bound = gradient._bind(args, kwargs)
        given = dict(zip(self.names, values))
        seeded = tuple(seeds[n] if n in seeds else _zeros(given[n]) for n in floats)
        tangents = flat_tangents(bound, seeded, True, floats)
        try:
            out, out_dot = self._sweep(gradient, bound, tangents, ranked=True)
        except FloatNumberError:
            raise
        except S2SADError:
            try:  # as s2sad.hessian: the generic code keeps the copies ranks let it drop
                out, out_dot = self._sweep(gradient, bound, tangents, ranked=False)
            except S2SADError as exc:
                raise S2SADError(
                    f"s2sad differentiates through {self.inner!r} by forward mode over its "
                    f"gradient code, which stops here: {exc.what}",
                    file=exc.file,
                    line=exc.line,
                    source=exc.source,
                    hint="call a function with a rule instead (s2sad.register_vjp), or take "
                    "central differences of the gradient",
                ) from None
        if len(bound.wrt) == 1:
            out, out_dot = (out,), (out_dot,)
        grads = dict(zip(floats, bound.regroup(list(out))))
        dots = dict(zip(floats, bound.regroup(list(out_dot))))
        return grads, dots

    def _sweep(self, gradient, bound, tangents, ranked):
        """The gradient and its tangent: forward mode over the gradient code (`ranked`: the
        code specialized on the arguments' ranks, else the generic code)."""
        if ranked:
            compiled, data = gradient.prepared(bound)
        else:
            compiled, data = transform_and_read(
                gradient.func, bound.wrt, "grad", None, False, bound.trees
            )
        generated = compiled.functions[compiled.name]
        renamed = dict(zip(bound.signature.parameters, inspect.signature(generated).parameters))
        forward = self._forward.get(generated)
        if forward is None:
            forward = JVPTransformed(generated, tuple(renamed[n] for n in bound.wrt), "jvp")
            if len(self._forward) >= 16:  # (code made for data since replaced)
                self._forward.clear()
            self._forward[generated] = forward
        keywords = {renamed.get(k, k): v for k, v in bound.kwargs.items()}
        return forward(*bound.args, *data, tangent=tuple(tangents), **keywords)

    def vjp(self, v, ans, *values):
        """The cotangents of the inner gradient's arguments (one per parameter; None for one
        that is not a float)."""
        v = _like(v, ans)
        v0 = None
        if self.inner.mode == "value_and_grad":
            v0, v = v
        items = v if self.inner.wrt_tuple else (v,)
        seeds = {n: item for n, item in zip(self.wrt, items) if item is not None}
        grads, dots = self.second(values, seeds)
        out = []
        for n in self.names:
            if n not in dots:
                out.append(None)
                continue
            d = dots[n]
            if v0 is not None:
                d = d + grads[n] * v0
            out.append(d)
        return out[0] if len(out) == 1 else tuple(out)

    def jvp(self, t, name, *values):
        """The tangent of the inner gradient along the tangent `t` of parameter `name`."""
        _, dots = self.second(values, {name: t})
        inner = self.inner
        parts = Parts(dots[n] for n in self.wrt)
        return parts if inner.wrt_tuple else parts[0]

    def jvp_batched(self, t, name, *values):
        """`jvp` for tangents with a leading batch axis: row by row."""
        rows = [self.jvp(row, name, *values) for row in t]
        if self.inner.wrt_tuple:  # each part's rows (Parts: batched code reads part k as [:, k])
            return Parts(np.stack([np.asarray(r[k]) for r in rows]) for k in range(len(rows[0])))
        return np.stack([np.asarray(r) for r in rows])


class Parts(tuple):
    """The tangent of a tuple of gradients: forward mode adds the terms of several arguments'
    tangents (`+`, part by part, not tuple concatenation) and reads part k of a batch of them
    as `t[:, k]`."""

    def __add__(self, other):
        if not isinstance(other, tuple) or len(other) != len(self):
            return NotImplemented
        return Parts(a + b for a, b in zip(self, other))

    __radd__ = __add__

    def __getitem__(self, index):
        if isinstance(index, tuple) and len(index) == 2 and index[0] == slice(None):
            return tuple.__getitem__(self, index[1])  # the batch axis comes first in each part
        return tuple.__getitem__(self, index)


def _is_float(value) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return False
    if isinstance(value, (list, tuple, dict)) or hasattr(value, "__dataclass_fields__"):
        _, leaves = flatten(value)
        return bool(leaves) and all(_is_float(x) for x in leaves)
    if isinstance(value, numbers.Integral) and not isinstance(value, np.ndarray):
        return False
    try:
        return np.issubdtype(np.result_type(value), np.floating)
    except TypeError:
        return False


def _zeros(value):
    if isinstance(value, (list, tuple, dict)) or hasattr(value, "__dataclass_fields__"):
        d, leaves = flatten(value)
        return unflatten(d, [np.zeros_like(np.asarray(x)) for x in leaves])
    return np.zeros_like(np.asarray(value))


def _like(v, ans):
    """The cotangent `v` of the result `ans` in ans's structure: a tuple result's cotangent comes
    as an array of its parts (rules/indexing.getitem_vjp: numbers, or objects with 0 for a part
    no cotangent reached) or None; each part None or shaped like its part of `ans`."""
    if isinstance(ans, tuple):
        if v is None or (np.ndim(v) == 0 and not isinstance(v, tuple)):
            return tuple(None for _ in ans)
        numbers_array = isinstance(v, np.ndarray) and v.dtype != object
        if numbers_array and len({np.shape(a) for a in ans}) > 1:
            # (a batched sweep met parts of several shapes: rules/indexing.batched_getitem_vjp
            # gives an array of the parts' batches, which the sweep cannot take apart by rows)
            raise S2SADError(
                "s2sad.jacobian's batched reverse sweep cannot pass the cotangents of a tuple of "
                "gradients of different shapes through a gradient s2sad made yet",
                hint="use s2sad.jacobian(..., batched=False), or mode='forward'",
            )
        return tuple(_like(part, a) for part, a in zip(v, ans))
    if v is None or isinstance(ans, (dict, list)) or hasattr(ans, "__dataclass_fields__"):
        return v
    dtype = np.result_type(np.asarray(ans).dtype, np.float32)  # (a Python float: float64)
    return np.broadcast_to(np.asarray(v, dtype=dtype), np.shape(ans))


def provide(func) -> bool:
    """PROVIDERS' entry: register the rules of a composable gradient object."""
    if not isinstance(func, Transformed) or refusal(func) is not None:
        return False
    composition = Composition(func)
    names = composition.names
    base = f"{func.mode}_{_identifier(func.func.__name__)}"
    rule_name = _free(f"{base}_vjp", names)
    NAMESPACE[rule_name] = composition.vjp
    tangent_name = _free(f"{base}_jvp", names + [rule_name])
    NAMESPACE[tangent_name] = composition.jvp
    batched_name = _free(f"{base}_jvp_batched", names + [rule_name, tangent_name])
    NAMESPACE[batched_name] = composition.jvp_batched
    shown = f"s2sad.{func.mode}({func.func.__qualname__})"
    for name in (rule_name, tangent_name, batched_name):
        SECOND_ORDER[id(NAMESPACE[name])] = (
            f"no third derivatives through {shown} yet: forward mode meets the rule of a "
            f"gradient s2sad made ({name})",
            "s2sad composes transforms to second order (grad(grad(f)), jacobian(grad(f)), "
            "hessian(f)); for a third derivative take central differences of one of those",
        )
    if func.mode == "value_and_grad":
        SECOND_ORDER[id(func)] = (
            f"no forward-mode (jvp) rule for {shown} yet",
            "call an s2sad.grad of the function (and the function for its value) instead",
        )
    # the rules' parameters: f's, but `t` and `elt`, which tangent templates use themselves
    spelled = [_unlike(f"{n}_", set(names)) if n in ("t", "elt") else n for n in names]
    g, ans = (_unlike(p, set(spelled) | {rule_name}) for p in ("g", "ans"))
    arguments = ", ".join(spelled)
    call = f"{rule_name}({g}, {ans}, {arguments})"
    templates = {n: call if len(names) == 1 else f"{call}[{i}]" for i, n in enumerate(spelled)}
    joint = call if len(names) > 1 else None
    signature = _signature_text(func, names, rule_name)
    if spelled != names:
        signature = _respelled(signature, dict(zip(names, spelled)))
    tangent = None
    if func.mode == "grad":
        tangent = explicit(
            batched={s: f"{batched_name}(t, {n!r}, {arguments})" for n, s in zip(names, spelled)},
            **{s: f"{tangent_name}(t, {n!r}, {arguments})" for n, s in zip(names, spelled)},
        )
    register(
        func, signature, templates, joint=joint, placeholders={"g": g, "ans": ans}, jvp=tangent
    )
    return True


def _respelled(signature: str, spelled: dict) -> str:
    """A signature's text with parameters renamed (`t` -> `t_`): the names it binds."""
    tree = ast.parse(f"def _({signature}): pass").body[0].args
    for a in tree.posonlyargs + tree.args + tree.kwonlyargs:
        a.arg = spelled.get(a.arg, a.arg)
    return ast.unparse(tree)


_SOURCES: dict[str, str] = {}  # the composed functions' file names -> their source
# (f, wrt, mode, jit, its defaults) -> the function composing a gradient of f: an equal gradient made again
# reuses it (and its transforms)
_COMPOSED: dict[tuple, object] = {}


def _identifier(name: str) -> str:
    text = "".join(c if c.isalnum() or c == "_" else "_" for c in name.strip("<>")) or "f"
    return text if not text[0].isdigit() else f"_{text}"


def _free(name: str, taken) -> str:
    candidate, k = name, 2
    while (candidate in NAMESPACE) or candidate in taken or candidate in RESERVED:
        candidate, k = f"{name}{k}", k + 1
    return candidate


PROVIDERS.append(provide)


def composed(inner):
    """A Python function with the inner gradient's parameters that returns its call, for the
    transform of a transform (`grad(grad(f))`): `def grad_f(x): return s2sad_grad_f(x)`, its
    source registered with linecache so s2sad reads it like the user's."""
    original = inner.target.original
    signature = inspect.signature(inner)
    defaults = tuple(id(p.default) for p in signature.parameters.values())  # (set on the copy)
    key = (original, inner.wrt, inner.wrt_tuple, inner.mode, inner.jit, defaults)
    if inspect.isfunction(original) and key in _COMPOSED:
        return _COMPOSED[key]  # `grad(grad(f))(x)` in a loop: one function, one transform
    why = refusal(inner)
    if why is not None:
        raise S2SADError(
            why, hint="take the derivative you need of the function itself, or compose s2sad.grad"
        )
    name = f"{inner.mode}_{_identifier(inner.func.__name__)}"
    callee = f"s2sad_{name}"
    params = list(signature.parameters.values())
    passed = [f"{p.name}={p.name}" if p.kind == p.KEYWORD_ONLY else p.name for p in params]
    call = f"{callee}({', '.join(passed)})"
    if inner.mode == "grad" and inner.wrt_tuple:
        # a tuple of gradients, unpacked where it is made: each part has its own adjoint and
        # tangent, and the Jacobian's blocks come out per part
        parts = ", ".join(_free(f"d{w}", set(signature.parameters)) for w in inner.wrt)
        source = f"def {name}{_plain(signature)}:\n    {parts} = {call}\n    return {parts}\n"
    else:
        source = f"def {name}{_plain(signature)}:\n    return {call}\n"
    filename, k = f"<composed {inner.mode}({inner.func.__qualname__})>", 2
    while _SOURCES.setdefault(filename, source) != source:  # another function of that name
        filename, k = f"<composed {inner.mode}({inner.func.__qualname__}) {k}>", k + 1
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {callee: inner, "__name__": getattr(inner.func, "__module__", None)}
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102  (s2sad's own text)
    function = namespace[name]
    positional = [
        p.default for p in params if p.kind != p.KEYWORD_ONLY and p.default is not p.empty
    ]
    function.__defaults__ = tuple(positional) or None
    function.__kwdefaults__ = {
        p.name: p.default for p in params if p.kind == p.KEYWORD_ONLY and p.default is not p.empty
    } or None
    if inspect.isfunction(original):
        _COMPOSED[key] = function
    return function


def _plain(signature) -> str:
    """The signature's text without defaults or annotations (defaults are set after exec)."""
    parts, star = [], False
    params = list(signature.parameters.values())
    for i, p in enumerate(params):
        if p.kind == p.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        parts.append(p.name)
        if p.kind == p.POSITIONAL_ONLY and (
            i + 1 == len(params) or params[i + 1].kind != p.POSITIONAL_ONLY
        ):
            parts.append("/")
    return f"({', '.join(parts)})"


def composable(func, target="cpu", outer=None):
    """What the `outer` transform of `func` differentiates: `func`, or for a function s2sad
    transformed, a function calling it (`composed`)."""
    if not callable(func):
        raise S2SADError(
            f"s2sad transforms functions, not {type(func).__name__} ({func!r:.60})",
            hint="pass the function itself: s2sad.grad(f)",
        )
    if getattr(func, "__module__", None) == "s2sad.api":  # s2sad.grad(wrt=...) without f
        raise S2SADError(
            "this is a transform still waiting for its function (s2sad.grad(wrt=...) or "
            "s2sad.grad(None)), not a function to differentiate",
            hint="give it the function first: s2sad.grad(f, wrt=...)",
        )
    if isinstance(func, Transformed):
        if outer in ("grad", "value_and_grad", "hessian", "jacobian") and (
            func.mode == "value_and_grad"
        ):
            raise S2SADError(
                f"s2sad.{outer} of {func!r}, which returns a pair (value, gradient), is not "
                "supported: "
                + (
                    "its Jacobian would need forward mode through value_and_grad"
                    if outer == "jacobian"
                    else f"s2sad.{outer} needs a function with a scalar output"
                ),
                hint="take s2sad.jacobian(s2sad.grad(f)) for the Hessian, or s2sad.vjp of the pair",
            )
        if target != "cpu":
            raise S2SADError(
                f"s2sad does not compose transforms with target={target!r} ({func!r})",
                hint="take the outer transform on the CPU",
            )
        return composed(func)
    if (type(func).__module__ or "").startswith("s2sad.") and not isinstance(func, type):
        raise S2SADError(
            f"s2sad composes with gradients (s2sad.grad, s2sad.value_and_grad), not with {func!r}",
            hint="take the derivative you need of the original function directly",
        )
    return func
