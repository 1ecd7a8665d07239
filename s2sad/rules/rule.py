"""One rule: an op's adjoint templates, bound to a call and instantiated.

A template is a Python expression over the argument names of the function's signature, plus `g`
(the cotangent of the result), `ans` (the result) and `k` (an operand's position in a list
argument). It is substituted with the call's own expressions, all names at once (a substituted
expression is never substituted again), and emitted as one statement of the adjoint. A rule whose
parameters take those names (a user's function with a parameter `g`) spells the placeholders
otherwise (`placeholders`): a placeholder is never a parameter. A keyword argument `k=p` in a
template is dropped when the user's call did not give `p`, so emitted code shows only what the
user wrote. Rules are declared in s2sad/rules/registry.py (`defvjp`).
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass
from typing import Callable, Union

from ..astcopy import clone

Template = Union[str, Callable[[dict], str]]


@dataclass
class Bound:
    """A call matched against a rule's signature."""

    rule: "Rule"
    args: dict[str, ast.expr]  # every parameter, defaults filled in
    given: set[str]  # parameters the user's call spelled out


_PLACEHOLDERS = {"g": "g", "ans": "ans", "k": "k"}  # role -> its spelling in templates


class Rule:
    def __init__(
        self,
        name: str,
        signature: str,
        templates: dict[str, Template],
        seq: tuple[str, ...] = (),
        placeholders: dict[str, str] | None = None,
    ):
        self.name = name
        fn = ast.parse(f"def _({signature}): pass").body[0]
        self.signature = _signature_of(fn.args)
        self.placeholders = {**_PLACEHOLDERS, **(placeholders or {})}
        roles = ("g", "ans", "k") if seq else ("g", "ans")  # `k` only marks a list's element
        clash = {self.placeholders[r] for r in roles} & set(self.signature.parameters)
        if clash:  # a template could not tell the parameter from the placeholder
            raise ValueError(f"rule {name}: parameter {', '.join(sorted(clash))} is a placeholder")
        self.templates = {
            k: (ast.parse(v, mode="eval").body if isinstance(v, str) else v)
            for k, v in templates.items()
        }
        self.seq = set(seq)  # parameters that take a list of arrays
        self.joint: ast.expr | None = None  # one call giving every parameter's cotangent
        self.elementwise = False  # templates are also the tangent rule (registry.ELEMENTWISE)
        self.batched_templates: dict = {}  # for a batched cotangent, where the plain ones differ
        self.literal: dict[str, tuple] = {}  # parameter -> the literal values the rule covers
        # parameters with no template whose derivative is truly zero (a condition, an index, an
        # array read only for its shape); any other parameter without one refuses a
        # differentiated argument
        self.inert: set[str] = set()
        # a function with a tuple result (np.linalg.eigh): (bound arguments) -> whether this call
        # gives one; its cotangent is then a tuple of the parts' (None where none reached)
        self.parts: Callable[[dict], bool] | None = None
        # a user's rule (register_vjp): `rule (file.py:line) of f(x, y)`, for messages
        self.user: str | None = None

    def bind(self, args: list[ast.expr], keywords: dict[str, ast.expr]) -> Bound:
        ba = self.signature.bind(*args, **keywords)  # TypeError when it does not fit
        given = set(ba.arguments)
        ba.apply_defaults()
        bound = {
            k: ast.Tuple(list(v), ast.Load()) if isinstance(v, tuple) else v
            for k, v in ba.arguments.items()
        }  # *operands arrive as a tuple of nodes
        return Bound(self, bound, given)

    def outside_literal(self, args: dict) -> str | None:
        """Why the call is outside what the templates cover (a parameter not spelled as one of its
        literal values), or None."""
        for param, allowed in self.literal.items():
            arg = args.get(param)
            value = arg.value if isinstance(arg, ast.Constant) else arg
            if (
                isinstance(arg, ast.AST)
                and not isinstance(arg, ast.Constant)
                or value not in allowed
            ):
                spelled = " or ".join(f"{param}={v!r}" for v in allowed)
                shown = ast.unparse(arg) if isinstance(arg, ast.AST) else repr(arg)
                return f"with {param}={shown} (s2sad differentiates {spelled})"
        return None

    def differentiable(self, bound: Bound) -> list[str]:
        return [p for p in self.templates if p in bound.args]

    def joint_adjoint(self, bound: Bound, g: str, ans: str) -> ast.expr:
        return self._instantiate(self.joint, bound, g, ans, None)

    def adjoint(
        self,
        bound: Bound,
        param: str,
        g: str | ast.expr,
        ans: str,
        index: int | None = None,
        batched: bool = False,
    ) -> ast.expr:
        """The contribution to `param` (element `index` of a list parameter); `batched`: for a
        cotangent with a leading batch axis (see rules/batching.py). `g` is the cotangent's name,
        or an expression to put in its place."""
        template = self.templates[param]
        if batched and param in self.batched_templates:
            template = self.batched_templates[param]
        if callable(template):
            template = ast.parse(template(bound.args), mode="eval").body
        return self._instantiate(template, bound, g, ans, index)

    def _instantiate(self, template, bound: Bound, g, ans: str, index) -> ast.expr:
        """`template` with every placeholder and parameter replaced at once."""
        spell = self.placeholders
        mapping = {spell["g"]: g if isinstance(g, ast.expr) else ast.Name(g, ast.Load())}
        mapping[spell["ans"]] = ast.Name(ans, ast.Load())
        if index is not None:
            mapping[spell["k"]] = ast.Constant(index)
        mapping.update(bound.args)  # (a parameter `k` of a rule without lists is the parameter)
        return _Substitute(bound, mapping).visit(clone(template))


def _signature_of(args: ast.arguments) -> inspect.Signature:
    params = []
    kinds = [(a, inspect.Parameter.POSITIONAL_ONLY) for a in args.posonlyargs]
    kinds += [(a, inspect.Parameter.POSITIONAL_OR_KEYWORD) for a in args.args]
    defaults = [None] * (len(kinds) - len(args.defaults)) + list(args.defaults)
    for (a, kind), default in zip(kinds, defaults):
        params.append(
            inspect.Parameter(
                a.arg, kind, default=default if default is not None else inspect.Parameter.empty
            )
        )
    if args.vararg is not None:
        params.append(inspect.Parameter(args.vararg.arg, inspect.Parameter.VAR_POSITIONAL))
    for a, default in zip(args.kwonlyargs, args.kw_defaults):
        params.append(
            inspect.Parameter(
                a.arg,
                inspect.Parameter.KEYWORD_ONLY,
                default=default if default is not None else inspect.Parameter.empty,
            )
        )
    return inspect.Signature(params)


class _Substitute(ast.NodeTransformer):
    """Simultaneous substitution of names: what replaces a name is a copy, never visited."""

    def __init__(self, bound: Bound, mapping: dict[str, ast.expr]):
        self.bound, self.mapping = bound, mapping

    def visit_Call(self, node: ast.Call) -> ast.Call:
        node.keywords = [
            k
            for k in node.keywords
            if not (
                isinstance(k.value, ast.Name)
                and k.value.id in self.bound.args
                and k.value.id not in self.bound.given
            )
        ]
        self.generic_visit(node)
        return node

    def visit_Name(self, node: ast.Name) -> ast.expr:
        if node.id in self.mapping:
            return clone(self.mapping[node.id])
        return node

    def visit_Subscript(self, node: ast.Subscript) -> ast.expr:
        """`choicelist[k]` of a list the call spelled out is that element (`x`, not
        `[x, y][0]`: forward mode has no rule for a subscript of a list display)."""
        self.generic_visit(node)
        items, at = node.value, node.slice
        if (
            isinstance(items, (ast.List, ast.Tuple))
            and isinstance(node.ctx, ast.Load)
            and not any(isinstance(e, ast.Starred) for e in items.elts)
            and isinstance(at, ast.Constant)
            and type(at.value) is int
            and -len(items.elts) <= at.value < len(items.elts)
        ):
            return items.elts[at.value]
        return node
