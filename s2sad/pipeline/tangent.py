"""Stage 4, forward mode: after each active primal statement, one statement computing its
tangent (`x` -> `x_dot`). Control flow keeps its shape and nothing is recorded: tangents flow
along with the values. Tangent rules are the `jvp=` of each op's entry in `rules/`.
"""

from __future__ import annotations

import ast
import copy

import numpy as np

from ..astcopy import clone
from .. import ir, rules, runtime
from .activity import refuse_hidden_writes
from .dependence import dependents
from ..errors import NoRuleError, UnsupportedSyntaxError
from .normalize import NameAllocator
from .names import names_mentioned, simple_statements
from .nodes import batched_slice, call_of, load_name, weighed_by_dtype
from ..rules.batching import batch_adjoint
from ..rules.registry import (
    EXPLICIT,
    LINEAR,
    MULTILINEAR,
    SECOND_ORDER,
    kind_of,
    signature_of,
)
from ..rules.indexing import getitem, is_add_at
from .tangent_rules import (
    ReplaceNames,
    copies_written,
    cotangent_form,
    explicit_term,
    ranked,
    tangent_reads,
    tuple_cotangent,
)

_GETITEM = (getitem,)


def _substitute(node, mapping: dict[int, ast.expr]):
    """A copy of `node` with the sub-nodes in `mapping` (by identity) replaced."""
    if id(node) in mapping:
        return mapping[id(node)]
    new = copy.copy(node)
    for field, value in ast.iter_fields(node):
        if isinstance(value, list):
            setattr(
                new,
                field,
                [_substitute(v, mapping) if isinstance(v, ast.AST) else v for v in value],
            )
        elif isinstance(value, ast.AST):
            setattr(new, field, _substitute(value, mapping))
    return new


class _Unlift(ast.NodeTransformer):
    """`batched_lift(x)` becomes `x`."""

    def visit_Call(self, node):
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "batched_lift":
            return node.args[0]
        return node


class _StripUnbroadcast(ast.NodeTransformer):
    """`unbroadcast(g, x)` becomes `g`."""

    def visit_Call(self, node):
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "unbroadcast":
            return node.args[0]
        return node


def _list_call(stmt, method: str):
    """`lst.<method>(...)` in an expression statement or an assignment, or None."""
    value = getattr(stmt, "value", None)  # (an assert has none)
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr == method
        and isinstance(value.func.value, ast.Name)
    ):
        return value
    return None


def _add_at(stmt):
    """`np.add.at(a, index, values)` (or the runtime's `add_at`) as a statement, or None."""
    value = stmt.value if isinstance(stmt, ast.Expr) else None
    if not isinstance(value, ast.Call) or len(value.args) != 3 or value.keywords:
        return None
    callee = ir.callee(value.func)
    if callee is runtime.add_at or is_add_at(callee):
        return value
    return None


class Forward:
    def __init__(
        self, parsed, stmts, wrt: list[str], taken: set[str], batched: bool = False, ranks=None
    ):
        self.parsed = parsed
        self.ranks = ranks
        self.names = NameAllocator(taken)
        # batched: every tangent has a leading axis of `self.batch` rows (rules/batching.py)
        self.batched = batched
        self.batch = self.names.fresh("batch") if batched else None
        self.ranks = ranks
        self.indices = {
            n.target.id for n in ast.walk(ast.Module(stmts, [])) if isinstance(n, ast.For)
        }
        self.tangent: dict[str, str] = {}
        self.active = self.varied(stmts, set(wrt))
        refuse_hidden_writes(
            parsed,
            [ir.op(s) for s in simple_statements(stmts) if ir.is_classified(s)],
            self.active,
            lambda s: _list_call(s, "append") is not None or _add_at(s) is not None,
        )
        self.written = {
            s.targets[0].value.id
            for s in simple_statements(stmts)
            if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Subscript)
        }

    def dot(self, name: str) -> str:
        if name not in self.tangent:
            self.tangent[name] = self.names.fresh(f"{name}_dot")
        return self.tangent[name]

    def zeros(self, value) -> ast.expr:
        """A zero tangent for `value` (a name or an expression)."""
        node = load_name(value) if isinstance(value, str) else clone(value)
        if self.batched:
            return call_of("batched_zeros", load_name(self.batch), node)
        return call_of("zeros_like", node)

    def rank(self, node):
        return None if self.ranks is None else self.ranks.of(node)

    # ------------------------------------------------------------------ activity
    def varied(self, stmts, varied: set[str]) -> set[str]:
        varied |= dependents(varied, [self.flow(stmt) for stmt in simple_statements(stmts)])
        return varied

    def flow(self, stmt) -> tuple[set[str], list[str]]:
        """What a statement's targets depend on, as (reads, targets): see dependence.py."""
        op = ir.op(stmt)
        if isinstance(stmt, ast.Expr):
            call = _list_call(stmt, "append")
            if call is not None:
                return names_mentioned(call.args), [call.func.value.id]
            call = _add_at(stmt)
            if call is not None:
                targets = [call.args[0].id] if isinstance(call.args[0], ast.Name) else []
                return names_mentioned(call.args[2:]), targets
            return set(), []
        if not isinstance(stmt, ast.Assign) or op is None:
            return set(), []
        if op.kind == "setitem":
            return ({op.operands[0][2]} if op.operands else set()), [op.target]
        reads = tangent_reads(op) if op.target is not None and op.kind != "nondiff" else set()
        if _list_call(stmt, "pop") is not None:
            return reads | {stmt.value.func.value.id}, [op.target]
        return reads, [op.target] if reads else []

    # ------------------------------------------------------------------ statements
    def block(self, stmts) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for stmt in stmts:
            if isinstance(stmt, ast.If):
                new = ast.If(stmt.test, self.block(stmt.body), self.block(stmt.orelse))
            elif isinstance(stmt, ast.For):
                new = ast.For(stmt.target, stmt.iter, self.block(stmt.body), [])
            elif isinstance(stmt, ast.While):
                new = ast.While(stmt.test, self.block(stmt.body), [])
            else:
                out.append(stmt)
                out += [self.at(t, stmt) for t in self.tangents(stmt)]
                continue
            ir.copy_origin(new, stmt)
            out.append(new)
        return out

    @staticmethod
    def at(stmt, src):
        return ir.copy_origin(stmt, src)

    def tangents(self, stmt) -> list[ast.stmt]:
        if isinstance(stmt, ast.Expr):
            call = _list_call(stmt, "append")
            if call is not None and call.func.value.id in self.active:
                arg = call.args[0]
                self.named_operand(stmt, arg)
                value = (
                    load_name(self.dot(arg.id))
                    if isinstance(arg, ast.Name) and arg.id in self.active
                    else self.zeros(arg)
                )
                return [
                    ast.Expr(
                        ast.Call(
                            ast.Attribute(
                                load_name(self.dot(call.func.value.id)), "append", ast.Load()
                            ),
                            [value],
                            [],
                        )
                    )
                ]
            call = _add_at(stmt)
            if call is not None:
                self.named_operand(stmt, call.args[2])
            if (
                call is not None
                and isinstance(call.args[2], ast.Name)
                and call.args[2].id in self.active
            ):
                return [
                    ast.Expr(
                        call_of(
                            "batched_add_at" if self.batched else "np.add.at",
                            load_name(self.dot(call.args[0].id)),
                            clone(call.args[1]),
                            load_name(self.dot(call.args[2].id)),
                        )
                    )
                ]
            return []
        if not isinstance(stmt, ast.Assign) or not ir.is_classified(stmt):
            return []
        op = ir.op(stmt)
        if op.kind == "setitem":
            if op.target not in self.active:
                return []
            index = clone(stmt.targets[0].slice)
            d = self.dot(op.target)
            if self.batched:
                index = batched_slice(d, index, self.indices)
            target = ast.Subscript(load_name(d), index, ast.Store())
            value = stmt.value
            tangent = (
                load_name(self.dot(value.id))
                if isinstance(value, ast.Name) and value.id in self.active
                else ast.Constant(0.0)
            )
            slot = ast.Subscript(load_name(op.target), stmt.targets[0].slice, ast.Load())
            if (
                self.batched
                and isinstance(tangent, ast.Name)
                and (self.rank(value) is None or self.rank(value) != self.rank(slot))
            ):  # rows of a lower rank would broadcast against the wrong axes
                tangent = call_of("batched_lift", tangent, clone(slot))
            if op.weighed and isinstance(tangent, ast.Name):
                tangent = weighed_by_dtype(tangent, op.target)
            return [ast.Assign([target], tangent)]
        if op.target is None or op.target not in self.active:
            return []
        target = self.dot(op.target)
        if _list_call(stmt, "pop") is not None:
            lst = stmt.value.func.value.id
            return [ast.Assign([ast.Name(target, ast.Store())], call_of(f"{self.dot(lst)}.pop"))]
        if isinstance(stmt.value, ast.List) and not stmt.value.elts:
            return [ast.Assign([ast.Name(target, ast.Store())], ast.List([], ast.Load()))]
        expr = self.expression(stmt, op)
        if op.target in self.written and not _is_fresh(expr):
            expr = call_of("np.array", expr)  # written in place below: must own its buffer
        elif copies_written(stmt.value, expr, {self.tangent.get(w) for w in self.written}):
            expr = call_of("snapshot", expr)
        return [ast.Assign([ast.Name(target, ast.Store())], expr)]

    def named_operand(self, stmt, arg: ast.expr) -> None:
        """A differentiated value a statement stores needs a name to carry its tangent: one
        left as an expression would get a zero tangent, a wrong derivative, so it is refused."""
        if not isinstance(arg, ast.Name) and names_mentioned([arg]) & self.active:
            where = ir.src_parsed(stmt) or self.parsed
            raise where.error(
                UnsupportedSyntaxError,
                f"s2sad cannot carry the tangent of `{ast.unparse(arg)}` into "
                f"`{ast.unparse(stmt.value.func)}(...)` in forward mode",
                ir.src(stmt),
                hint="assign the value to a name first",
            )

    def expression(self, stmt, op) -> ast.expr:
        """The tangent of the statement's value: a sum of one term per active operand."""
        if op.kind == "nondiff" or not (op.reads & self.active):
            return self.zeros(op.target)
        entry = kind_of(op.func) if op.func is not None else None
        signature = signature_of(op.func) if op.func is not None else None
        if entry is None or signature is None:
            raise self.no_rule(stmt, op)
        kind, params, extra = entry
        try:
            bound = signature.bind(*op.args, **op.keywords)
        except TypeError:
            raise self.no_rule(stmt, op) from None
        given = set(bound.arguments)
        bound.apply_defaults()
        args = dict(bound.arguments)
        rule = rules.lookup(op.func)
        if rule is not None and rule.outside_literal(args):
            raise self.no_rule(stmt, op)
        missing = op.without_rule(self.active)  # np.einsum(x, [0, 1], [1, 0])
        if missing:
            raise self.no_rule(stmt, op, missing)
        terms = []
        seq = rule.seq if rule is not None else ()
        for param in params:
            if param not in args:
                continue
            value = args[param]
            if tuple_cotangent(op, kind, param, value, seq):
                terms += self.parts_term(op, param, value, args, extra)
                continue
            nodes = (
                list(value)
                if isinstance(value, (tuple, list))
                else (list(value.elts) if isinstance(value, (ast.List, ast.Tuple)) else [value])
            )
            for k, node in enumerate(nodes):
                if not (isinstance(node, ast.Name) and node.id in self.active):
                    continue
                term = self.term(stmt, op, kind, param, node, nodes, k, args, given, extra)
                if term is not None:
                    terms.append(term)
        if not terms:
            return self.zeros(op.target)
        total = terms[0]
        for t in terms[1:]:
            total = ast.BinOp(total, ast.Add(), t)
        if kind == "elementwise" and not self.full_shape(total, op):
            broadcast = "batched_broadcast_to" if self.batched else "np.broadcast_to"
            if isinstance(total, ast.Call) and getattr(total.func, "id", "") == "batched_lift":
                total = total.args[0]  # batched_broadcast_to lifts it
            total = call_of(broadcast, total, call_of("np.shape", load_name(op.target)))
        return total

    def parts_term(self, op, param, value: ast.Tuple, args, extra) -> list[ast.expr]:
        """The term of a tuple result's cotangent `(dw, dv)` passed to its rule's helper
        (pipeline/reverse.py): the template with the tuple of the parts' tangents, None for a
        part with none (the helpers are linear in the cotangent)."""
        if not any(_is_active(e, self.active) for e in value.elts):
            return []
        dots = [
            load_name(self.dot(e.id)) if _is_active(e, self.active) else ast.Constant(None)
            for e in value.elts
        ]
        template = extra[param]
        if self.batched:
            template = EXPLICIT.get(id(op.func), {}).get(param, template)
        return [explicit_term(template, args, op.target, ast.Tuple(dots, ast.Load()), 0)]

    def full_shape(self, total: ast.expr, op) -> bool:
        """Whether an elementwise tangent has the result's shape: it does when it reads the
        result, or every operand that is not a scalar (directly or through its tangent). Else,
        `x + c` with a larger constant `c`, it is broadcast to that shape."""
        primal_of = {d: p for p, d in self.tangent.items()}
        unlifted = _Unlift().visit(clone(total))  # a lift reads only the rank
        # names read whole: `x` in `t * x`, not in `x[2:3]` (a part has a shape of its own)
        parts = {
            id(n.value) for n in ast.walk(unlifted) if isinstance(n, (ast.Subscript, ast.Attribute))
        }
        read = {
            primal_of.get(n.id, n.id)
            for n in ast.walk(unlifted)
            if isinstance(n, ast.Name) and id(n) not in parts
        }
        if op.target in read:
            return True
        seen = {ast.dump(n) for n in ast.walk(unlifted) if isinstance(n, ast.expr)}
        for operand in list(op.args) + list(op.keywords.values()):
            if isinstance(operand, ast.Constant):
                continue
            if isinstance(operand, ast.Name):
                if operand.id in read or self.rank(operand) == 0:
                    continue
                return False
            # an operand expression (a condition `x[2:3] > c`): read as it is, or a number
            if ast.dump(operand) not in seen and self.rank(operand) != 0:
                return False
        return True

    def term(self, stmt, op, kind, param, node, nodes, k, args, given, extra):
        if self.batched:
            return self.batched_term(stmt, op, kind, param, node, nodes, k, args, given, extra)
        t = load_name(self.dot(node.id))
        if kind in ("linear", "multilinear"):
            mapping = {id(node): t}
            if kind == "linear" and not self.list_tangents(mapping, nodes, k):
                return None
            return _substitute(stmt.value, mapping)
        rule = op.bound.rule if op.bound is not None else None
        if kind == "elementwise":
            # an element of a list argument, or of *args (bound as a tuple of nodes)
            index = k if isinstance(args.get(param), (ast.List, ast.Tuple, tuple)) else None
            expr = rule.adjoint(op.bound, param, self.dot(node.id), op.target, index)
            return _StripUnbroadcast().visit(expr)
        if kind == "reduction":
            return self.reduction_term("np.sum", rule, op, param, args, given, t)
        return explicit_term(extra[param], args, op.target, t, k)

    def list_tangents(self, mapping: dict, nodes: list, k: int) -> bool:
        """For element `k` of a list argument (np.concatenate, np.stack): the other elements'
        tangents, zeros where they have none, added to `mapping`. False when an earlier element
        is active, whose call then covers the whole list."""
        if any(_is_active(nodes[j], self.active) for j in range(k)):
            return False
        for j, other in enumerate(nodes):
            if j != k and id(other) not in mapping:
                active = _is_active(other, self.active)
                mapping[id(other)] = load_name(self.dot(other.id)) if active else self.zeros(other)
        return True

    def reduction_term(self, total: str, rule, op, param, args, given, t) -> ast.expr:
        """A nonlinear reduction's tangent: the VJP weights times the tangent, reduced."""
        ones = call_of("np.ones_like", load_name(op.target))
        weights = rule.adjoint(op.bound, param, ones, op.target, None)
        keywords = [ast.keyword(kw, clone(args[kw])) for kw in ("axis", "keepdims") if kw in given]
        product = ast.BinOp(weights, ast.Mult(), t)
        return ast.Call(ast.parse(total, mode="eval").body, [product], keywords)

    def batched_term(self, stmt, op, kind, param, node, nodes, k, args, given, extra):
        """`term` for a tangent with a leading batch axis."""
        d = self.dot(node.id)
        t = load_name(d)
        rule = op.bound.rule if op.bound is not None else None
        if kind == "linear" and op.func in _GETITEM:
            read = stmt.value.args[0] if isinstance(stmt.value, ast.Call) else stmt.value
            rows = ast.Subscript(t, batched_slice(d, read.slice, self.indices), ast.Load())
            return _substitute(stmt.value, {id(read): rows})  # keeps snapshot(...)
        if kind in ("linear", "multilinear"):
            mapping = {id(node): t}
            if kind == "linear" and not self.list_tangents(mapping, nodes, k):
                return None
            batched = (LINEAR if kind == "linear" else MULTILINEAR).get(id(op.func))
            if batched is None and kind == "linear" and ranked(op, self.rank):
                batched = cotangent_form(op.func, param)
            if batched is None:  # no batched counterpart: the call for each row
                row = self.names.fresh(f"{d}_row")
                call = _substitute(stmt.value, {id(node): load_name(row)})
                loop = ast.comprehension(ast.Name(row, ast.Store()), t, [], 0)
                return call_of("stack_rows", ast.ListComp(call, [loop]))
            positional = [_substitute(a, mapping) for a in op.args]
            keywords = [ast.keyword(n, _substitute(v, mapping)) for n, v in op.keywords.items()]
            if kind == "multilinear":
                which = k if op.func is np.einsum else list(op.bound.rule.templates).index(param)
                if op.func is np.einsum:
                    keywords = [ast.keyword("which", ast.Constant(which))]
                else:
                    positional, keywords = positional[:2] + [ast.Constant(which)], []
            return ast.Call(load_name(batched), positional, keywords)
        if kind == "elementwise":
            index = k if isinstance(args.get(param), (ast.List, ast.Tuple, tuple)) else None
            expr = _StripUnbroadcast().visit(rule.adjoint(op.bound, param, d, op.target, index))
            safe = batch_adjoint(clone(expr), d)
            if safe is None:  # the template for each row
                row = self.names.fresh(f"{d}_row")
                plain = rule.adjoint(op.bound, param, row, op.target, index)
                loop = ast.comprehension(ast.Name(row, ast.Store()), t, [], 0)
                return call_of("stack_rows", ast.ListComp(_StripUnbroadcast().visit(plain), [loop]))
            rank = self.rank(node)
            if rank is None or rank != self.rank(load_name(op.target)):
                lifted = call_of("batched_lift", t, load_name(op.target))
                safe = ReplaceNames({d: lifted}).visit(safe)
            return safe
        if kind == "reduction":
            return self.reduction_term("batched_sum", rule, op, param, args, given, t)
        template = EXPLICIT.get(id(op.func), {}).get(param, extra[param])
        return explicit_term(template, args, op.target, t, k)

    def no_rule(self, stmt, op, what=None):
        where = ir.src_parsed(stmt) or self.parsed
        if op.func is not None and id(op.func) in SECOND_ORDER:  # (compose.py)
            message, hint = SECOND_ORDER[id(op.func)]
            return where.error(NoRuleError, message, ir.src(stmt), hint=hint)
        return where.error(
            NoRuleError,
            f"no forward-mode (jvp) rule for {what or op.what or 'this'}",
            ir.src(stmt),
            hint="use an operation with a tangent rule (see the `jvp=` of the op's entry in "
            "s2sad/rules/); a function given only a reverse-mode rule (s2sad.register_vjp, "
            "custom_vjp) has none: differentiate it in reverse mode (s2sad.grad, s2sad.vjp, "
            "s2sad.jacobian(f, mode='reverse'))",
        )


def _is_active(node, active: set[str]) -> bool:
    return isinstance(node, ast.Name) and node.id in active


def _is_fresh(expr) -> bool:
    return (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Name)
        and expr.func.id in ("zeros_like", "batched_zeros")
    )


def prune(stmts, keep: set[str], tangents: set[str]) -> list[ast.stmt]:
    """Drop tangent assignments nothing reads (the tangent of a value that does not reach the
    output). A tangent popped off a list of tangents where nothing reads it is still popped
    (`x_tape_dot.pop()`) while another pop of that list is kept: the tangents must come off in
    step with their values."""
    while True:
        reads = set(keep)
        for node in ast.walk(ast.Module(stmts, [])):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                reads.add(node.id)
        dead = tangents - reads
        popped = {
            lst
            for stmt in ast.walk(ast.Module(stmts, []))
            for lst in [_popped(stmt)]
            if lst is not None and stmt.targets[0].id not in dead
        }
        before = _count(stmts)
        stmts = _drop(stmts, dead, popped)
        if _count(stmts) == before:
            return stmts


def _popped(stmt) -> str | None:
    """The list `name = lst.pop()` pops, else None."""
    if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name):
        call = _list_call(stmt, "pop")
        if call is not None and not call.args:
            return call.func.value.id
    return None


def _drop(stmts, dead, popped):
    out = []
    for stmt in stmts:
        if isinstance(stmt, (ast.If, ast.For, ast.While)):
            stmt.body = _drop(stmt.body, dead, popped)
            stmt.orelse = _drop(stmt.orelse, dead, popped)
        elif (
            isinstance(stmt, ast.Assign)
            and isinstance(stmt.targets[0], ast.Name)
            and stmt.targets[0].id in dead
        ):
            if _popped(stmt) in popped:
                out.append(Forward.at(ast.Expr(stmt.value), stmt))
            continue
        out.append(stmt)
    return out


def _count(stmts) -> int:
    return sum(1 for _ in ast.walk(ast.Module(stmts, [])))
