"""Stage 5: emit. Assemble the primal and adjoint sweeps into one function, a comment above each
block naming the user's line, and format the result with black.
"""

from __future__ import annotations

import ast
import functools

import black

from .reverse import primal_blocks


def _block_lines(parsed, blocks, indent: str) -> list[str]:
    lines = []
    for src, stmts in blocks:
        lines.append(f"{indent}# line {parsed.file_line(src)}: {parsed.text_of(src)}")
        lines += [indent + ast.unparse(ast.fix_missing_locations(s)) for s in stmts]
    return lines


def emit(parsed, norm, adjoint, wrt: list[str], mode: str, name: str) -> str:
    """Python source of the gradient (`mode="grad"`) or the vjp (`mode="vjp"`) function."""
    params = ", ".join(norm.params)
    where = f"{parsed.name} ({parsed.filename.rsplit('/', 1)[-1]}:{parsed.line_offset + parsed.tree.lineno})"
    grads = ", ".join(ast.unparse(g) for g in adjoint.grads)
    primal = _block_lines(parsed, primal_blocks(norm.stmts), "    ")
    out = ", ".join(norm.outputs)
    if mode == "grad":
        lines = [f"def {name}({params}):",
                 f'    """Gradient of {where} with respect to {", ".join(wrt)}."""']
        lines += primal
        lines.append(f"    {adjoint.seeds[0]} = grad_seed({norm.outputs[0]})")
        lines += _block_lines(parsed, adjoint.blocks, "    ")
        value = f"{out}, " if mode == "value_and_grad" else ""
        lines.append(f"    return {value}{'(' + grads + ')' if value and len(wrt) > 1 else grads}")
    else:
        lines = [f"def {name}({params}):",
                 f'    """Value of {where} and its pullback to {", ".join(wrt)}."""']
        lines += primal
        lines.append(f"    def pullback({', '.join(adjoint.seeds)}):")
        lines += _block_lines(parsed, adjoint.blocks, "        ")
        lines.append(f"        return {grads}")
        lines.append(f"    return {'(' + out + ')' if norm.tuple_output else out}, pullback")
    return format_source("\n".join(lines) + "\n")


@functools.lru_cache(maxsize=512)
def format_source(source: str) -> str:
    return black.format_str(source, mode=black.Mode(line_length=100))
