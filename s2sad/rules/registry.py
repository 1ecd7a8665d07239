"""The rule tables, and how an op declares its rules: one entry per op, in its family's file.

Tables (keyed by `id(function)`; the registry keeps the functions alive):
- VJP: the op's `Rule` (adjoint templates, rule.py), and its templates for a batched cotangent;
- FORWARD: its tangent rule when its VJP templates are not it (kind, parameters, templates);
- LINEAR, MULTILINEAR: the batched counterpart of a linear or multilinear op, by name (forward
  mode applies it to a tangent with a batch axis); EXPLICIT: explicit tangent templates for a
  batched tangent `t`;
- NONDIFF: functions whose outputs carry no derivative.

Adding an op is one entry in the family file under s2sad/rules/ it belongs to, plus its tests.
Without a helper of its own (templates of NumPy calls and shared helpers, rules/common.py):

    @batched_helper
    def batched_sum(a, axis=None, dtype=None, out=None, keepdims=False): ...  # np.sum per row

    defvjp(np.sum, "a, axis=None, dtype=None, out=None, keepdims=False",
           a="expand_reduced(g, a, axis=axis, keepdims=keepdims)",
           jvp=linear("a", batched=batched_sum))

- the signature is NumPy's; a keyword per differentiable parameter holds its adjoint template
  (rule.py says what a template may name); `unary`/`binary` are the elementwise short forms,
  `nondiff(f)` marks a function whose result carries no derivative;
- `jvp=` says how its tangent follows: ELEMENTWISE (the VJP templates with the tangent for `g`),
  `linear(params)` (the same call on the tangent), `multilinear(params)`, `reduction(param)`
  (the VJP weights for a cotangent of ones) or `explicit(param=template)` over the parameters,
  `ans`, `t` (the tangent) and `elt`; with no `jvp=` forward mode refuses the op;
- `batched=` gives adjoint templates for a batched cotangent where the plain one calls NumPy on
  `g` itself (elementwise templates and helper calls need none: rules/batching.py); `linear`'s
  and `multilinear`'s `batched=` name the function forward mode applies to a batched tangent,
  `explicit`'s holds templates for a batched `t`.

With helpers: each is defined right above the entry, its forms side by side (rules/helpers.py
says how the Numba forms are registered without importing Numba):

    @helper(batch_safe=True, jvp=linear("g"))  # its own tangent rule: Hessians differentiate
    def cumsum_vjp(g, a, axis=None): ...       # generated gradients again

    @numba_of(cumsum_vjp)                      # Numba's form (an `overload` typer), if jitted
    def _cumsum_vjp(g, a, axis=None): ...      # code may call it

    defvjp(np.cumsum, "a, axis=None, dtype=None, out=None", a="cumsum_vjp(g, a, axis=axis)",
           jvp=linear("a", batched=batched_cumsum))

A helper not right for a batched cotangent as it is gets `@batched_of(helper)` beside it.
Helpers, their forms and an entry's tangent and batched functions are linked by Python objects,
never by names in strings; templates are code that names helpers, and tests/test_architecture.py
checks that every name a template uses is defined.
"""

from __future__ import annotations

import ast
import inspect
import sys
import threading
from dataclasses import dataclass, field

from .rule import Bound, Rule, Template  # noqa: F401  (Bound: for those importing it here)

VJP: dict[int, Rule] = {}  # id(function) -> rule
NONDIFF: dict[int, object] = {}  # id(function) -> function, outputs carry no derivative
FORWARD: dict[int, tuple] = {}  # id(function) -> (kind, parameters, extra)
LINEAR: dict[int, str] = {}  # id(linear function) -> its batched counterpart's name
MULTILINEAR: dict[int, str] = {}  # id(multilinear function) -> its batched counterpart's name
EXPLICIT: dict[int, dict] = {}  # id(function) -> parameter -> tangent template for a batched t
NAMESPACE: dict[str, object] = {}  # user-registered rule functions, by the name code calls
# id(function) -> function returning a list of arrays (np.split): its cotangent is one flat
# array (rules/splitting.py), into which reading an item never adds in place (pipeline/reverse.py)
LIST_VALUED: dict[int, object] = {}
VERSION = [0]  # counts rule registrations
# functions `provide(func) -> bool` that register a rule for a callable object at its first look-up
# (a function s2sad transformed, met inside another: s2sad/compose.py); a look-up of it comes
# here before any transform uses it, so the registration leaves VERSION (every cache) alone
PROVIDERS: list = []
# id(such an object without a tangent rule, or of its rule functions, whose derivatives would be
# third derivatives) -> (message, hint) of forward mode's refusal of it
SECOND_ORDER: dict[int, tuple] = {}
_KEEP_ALIVE: list[object] = []

__all__ = ["Bound", "Rule", "Template", "VJP", "NONDIFF", "defvjp", "lookup", "kind_of"]


@dataclass(frozen=True)
class Tangent:
    """How an op's tangent follows (see the module docstring): `kind` over `params`, with
    `templates` (explicit) and the forms for a batched tangent (`batched`)."""

    kind: str
    params: tuple[str, ...] = ()
    templates: dict[str, str] = field(default_factory=dict)
    batched: object = None


ELEMENTWISE = Tangent("elementwise")


def linear(*params: str, batched=None) -> Tangent:
    return Tangent("linear", params, batched=batched)


def multilinear(*params: str, batched=None) -> Tangent:
    return Tangent("multilinear", params, batched=batched)


def reduction(param: str) -> Tangent:
    return Tangent("reduction", (param,))


def explicit(batched: dict[str, str] | None = None, **templates: str) -> Tangent:
    """Tangent templates over the parameters, `ans`, `t` (the argument's tangent) and `elt` (its
    position in a list argument); `batched`: those that change for a batched `t`."""
    return Tangent("explicit", tuple(templates), templates, batched or {})


def _parsed(templates: dict) -> dict:
    return {
        k: ast.parse(v, mode="eval").body if isinstance(v, str) else v for k, v in templates.items()
    }


def declare_tangent(func, tangent: Tangent) -> None:
    """Record `func`'s tangent rule (from `defvjp(jvp=...)` or `@helper(jvp=...)`)."""
    _KEEP_ALIVE.append(func)
    if tangent.kind == "elementwise":
        VJP[id(func)].elementwise = True
        return
    if tangent.kind != "explicit":
        FORWARD[id(func)] = (tangent.kind, tangent.params, None)
        if tangent.batched is not None:
            table = LINEAR if tangent.kind == "linear" else MULTILINEAR
            table[id(func)] = tangent.batched.__name__
        return
    signature = signature_of(func)
    clash = {"t", "elt"} & set(signature.parameters if signature is not None else ())
    if clash:
        raise ValueError(f"tangent rule of {func!r}: parameter {clash.pop()} is a placeholder")
    FORWARD[id(func)] = ("explicit", tangent.params, _parsed(tangent.templates))
    if tangent.batched:
        EXPLICIT[id(func)] = _parsed(tangent.batched)


def defvjp(
    func,
    signature: str,
    seq: tuple[str, ...] = (),
    joint: str | None = None,
    literal: dict[str, tuple] | None = None,
    inert: tuple[str, ...] = (),
    jvp: Tangent | None = None,
    batched: dict[str, Template] | None = None,
    **templates: Template,
) -> None:
    """Register the adjoint templates of `func`; one entry per differentiable argument.

    `joint`, if given, computes all cotangents in one call (a tuple in parameter order); it is
    used when several arguments are differentiated, so the rule runs once. `literal` limits
    parameters to literal values the templates are right for; other calls have no rule.
    `inert` names the parameters without a template whose derivative is zero (an index, a
    condition, an array read for its shape only); a differentiated value in any other parameter
    without a template is refused. `jvp` and `batched`: see the module docstring.
    """
    register(func, signature, templates, seq, joint, literal, inert=inert, jvp=jvp, batched=batched)


def register(
    func,
    signature: str,
    templates: dict,
    seq=(),
    joint=None,
    literal=None,
    placeholders=None,
    inert=(),
    jvp: Tangent | None = None,
    batched: dict | None = None,
) -> None:
    """defvjp with the templates as a dict: parameter names never meet defvjp's own.
    `placeholders` respells `g`, `ans` or `k` in the templates (see Rule); `inert` names the
    parameters whose derivative is zero (an index, a condition)."""
    name = getattr(func, "__name__", repr(func))
    rule = Rule(name, signature, templates, seq, placeholders)
    rule.literal = literal or {}
    rule.inert = set(inert)
    rule.batched_templates = _parsed(batched or {})
    if joint is not None:
        rule.joint = ast.parse(joint, mode="eval").body
    VJP[id(func)] = rule
    VERSION[0] += 1  # transforms made before a rule changed are stale
    _KEEP_ALIVE.append(func)
    if jvp is not None:
        declare_tangent(func, jvp)


def nondiff(*funcs) -> None:
    """Mark functions whose outputs have no derivative (sign, floor, comparisons, shapes)."""
    for func in funcs:
        NONDIFF[id(func)] = func


def unary(func, template: str) -> None:
    defvjp(func, "x, /", x=template, jvp=ELEMENTWISE)


def binary(func, template1: Template, template2: Template, **options) -> None:
    defvjp(func, "x1, x2, /", x1=template1, x2=template2, **{"jvp": ELEMENTWISE, **options})


# an optional library's module -> the function registering the rules of its functions, run at the
# first look-up after the user's code imported that module (`on_import`)
_ON_IMPORT: dict[str, object] = {}
_ON_IMPORT_LOCK = threading.Lock()


def on_import(module: str):
    """Decorator: the decorated function registers the rules of `module`'s functions (a library
    s2sad does not depend on, such as scipy.special); it runs at the first look-up after the
    user's code imported `module`, so s2sad never imports it nor pays for it at `import s2sad`."""

    def record(register):
        _ON_IMPORT[module] = register
        return register

    return record


def _imported_late() -> bool:
    """Register the rules of the `on_import` modules imported by now; whether any were."""
    if not any(m in sys.modules for m in list(_ON_IMPORT)):
        return False
    with _ON_IMPORT_LOCK:
        ready = [m for m in _ON_IMPORT if m in sys.modules]
        # a rule the user registered (`register_vjp`) before these ran stays theirs
        users = {k: rule for k, rule in VJP.items() if getattr(rule, "user", None)}
        for module in ready:
            version = VERSION[0]
            _ON_IMPORT.pop(module)()
            VJP.update(users)
            # no transform made so far met one of the module's functions (a look-up of one
            # would have come here first), so each stays right
            VERSION[0] = version
    return bool(ready)


def lookup(func) -> Rule | None:
    rule = VJP.get(id(func))
    if rule is None and _ON_IMPORT and _imported_late():
        rule = VJP.get(id(func))
    if rule is None and PROVIDERS and _provided(func):
        rule = VJP.get(id(func))
    return rule


def _provided(func) -> bool:
    """Whether a PROVIDERS entry registered a rule for `func` now."""
    for provide in PROVIDERS:
        version = VERSION[0]
        if provide(func):
            VERSION[0] = version  # no transform has met `func` yet (it would have come here)
            return True
    return False


def is_nondiff(func) -> bool:
    if id(func) not in NONDIFF and _ON_IMPORT:
        _imported_late()
    return id(func) in NONDIFF


def kind_of(func):
    """The forward rule of `func`: its FORWARD entry, or ("elementwise", ...) from its VJP rule."""
    if id(func) not in VJP and (_ON_IMPORT or PROVIDERS):
        lookup(func)
    entry = FORWARD.get(id(func))
    if entry is not None:
        return entry
    rule = VJP.get(id(func))
    if rule is not None and rule.elementwise:
        return ("elementwise", tuple(rule.templates), None)
    return None


def signature_of(func) -> inspect.Signature | None:
    rule = lookup(func)
    if rule is not None:
        return rule.signature
    try:
        return inspect.signature(func)
    except (TypeError, ValueError):
        return None
