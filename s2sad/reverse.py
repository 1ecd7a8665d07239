"""Stage 4: the reverse transform. Walks the normalized statements backwards and emits, for each
active one, one statement that adds its rule's contributions into the operands' adjoints.
Adjoint names are the primal names with a `d` in front (`h` -> `dh`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from .normalize import NameAllocator


@dataclass
class Adjoint:
    blocks: list[tuple[ast.stmt, list[ast.stmt]]]  # (user statement, adjoint statements)
    seeds: list[str]  # adjoint names of the outputs, in output order
    grads: list[ast.expr]  # the returned cotangent of each wrt input


def _group(pairs: list[tuple[ast.stmt, ast.stmt]]) -> list[tuple[ast.stmt, list[ast.stmt]]]:
    blocks: list[tuple[ast.stmt, list[ast.stmt]]] = []
    for src, stmt in pairs:
        if blocks and blocks[-1][0] is src:
            blocks[-1][1].append(stmt)
        else:
            blocks.append((src, [stmt]))
    return blocks


def primal_blocks(stmts: list[ast.stmt]):
    return _group([(s.src, s) for s in stmts])


def reverse(ops, active: set[str], wrt: list[str], outputs: list[str], taken: set[str]) -> Adjoint:
    names = NameAllocator(taken)
    adjoint: dict[str, str] = {}

    def dname(primal: str) -> str:
        if primal not in adjoint:
            adjoint[primal] = names.fresh(
                f"d{primal}" if f"d{primal}" not in taken else f"d_{primal}"
            )
        return adjoint[primal]

    seeds = [dname(o) for o in outputs]
    defined = set(seeds)
    pairs = []
    for op in reversed(ops):
        if op.target not in active:
            continue
        g = adjoint[op.target]
        contributions: dict[str, list[ast.expr]] = {}
        live = [(param, operand) for param, _, operand in op.operands if operand in active]
        if op.bound.rule.joint is not None and len(live) > 1:
            # one call of the rule; fresh adjoints take its results directly
            targets = []
            for param in op.bound.rule.templates:
                operand = next((o for p, o in live if p == param), None)
                if operand is None:
                    targets.append("_")
                elif dname(operand) in defined:  # accumulated, or claimed earlier in this tuple
                    part = names.fresh(f"{dname(operand)}_part")
                    contributions.setdefault(operand, []).append(ast.Name(part, ast.Load()))
                    targets.append(part)
                else:
                    defined.add(dname(operand))
                    targets.append(dname(operand))
            call = op.bound.rule.joint_adjoint(op.bound, g, op.target)
            lhs = ast.Tuple([ast.Name(t, ast.Store()) for t in targets], ast.Store())
            pairs.append((op.stmt.src, ast.Assign([lhs], call)))
            live = []
        for param, index, operand in op.operands:
            if operand not in active or (param, operand) not in live:
                continue
            expr = op.bound.rule.adjoint(op.bound, param, g, op.target, index)
            contributions.setdefault(operand, []).append(expr)
        for operand, exprs in contributions.items():
            target = dname(operand)
            if target in defined:
                exprs = [ast.Name(target, ast.Load())] + exprs
            total = exprs[0]
            for e in exprs[1:]:
                total = ast.BinOp(total, ast.Add(), e)
            defined.add(target)
            pairs.append((op.stmt.src, ast.Assign([ast.Name(target, ast.Store())], total)))
    grads = []
    for p in wrt:
        if p in adjoint and adjoint[p] in defined:
            grads.append(ast.Name(adjoint[p], ast.Load()))
        else:
            grads.append(ast.parse(f"zeros_like({p})", mode="eval").body)
    return Adjoint(_group(pairs), seeds, grads)
