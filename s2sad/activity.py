"""Stage 3: activity analysis. A value is active if it depends on a `wrt` input through
differentiable operations and the output depends on it the same way; only active values get
adjoints. A value that is active but flows through a function with no rule is an error here,
at transform time, not a silently zero gradient later.
"""

from __future__ import annotations

from .errors import NoRuleError


def active_names(parsed, ops, wrt: list[str], outputs: list[str]) -> set[str]:
    varied = set(wrt)
    for op in ops:
        if op.target is None:
            continue
        if op.kind == "rule":
            hit = any(name in varied for _, _, name in op.operands)
        else:
            hit = op.kind == "unknown" and bool(op.reads & varied)
        if hit:
            varied.add(op.target)
        else:
            varied.discard(op.target)
    useful = set(outputs)
    for op in reversed(ops):
        if op.target in useful:
            if op.kind == "rule":
                useful.update(name for _, _, name in op.operands)
            elif op.kind == "unknown":
                useful.update(op.reads)
    for op in ops:
        if op.kind == "unknown" and op.target in useful and op.reads & varied:
            raise parsed.error(
                NoRuleError,
                f"no derivative rule for {op.what or 'this operation'}",
                op.stmt.src,
                hint="use an operation s2sad knows (see s2sad.rules), wrap the value in "
                "s2sad.stop_gradient if no gradient should flow, or give the function a "
                "rule with s2sad.register_vjp",
            )
    return varied & useful
