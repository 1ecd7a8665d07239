"""Stage 5: emit. Assemble the primal and adjoint sweeps into one function, a comment above each
block naming the user's line, and format the result with black.
"""

from __future__ import annotations

import ast
import copy
import functools

import black

from .reverse import primal_blocks


def _block_lines(parsed, blocks, indent: str) -> list[str]:
    lines = []
    for src, stmts in blocks:
        lines.append(f"{indent}# line {parsed.file_line(src)}: {parsed.text_of(src)}")
        lines += [indent + ast.unparse(ast.fix_missing_locations(s)) for s in stmts]
    return lines


def _is_literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
        return True
    except ValueError:
        return False


def _parameters(tree: ast.FunctionDef) -> str:
    """The user's parameter list with its literal defaults; a non-literal default is dropped
    (with those before it), since s2sad's wrapper always passes every argument."""
    args = copy.deepcopy(tree.args)
    for a in args.posonlyargs + args.args + args.kwonlyargs:
        a.annotation = None
    literal = [_is_literal(d) for d in args.defaults]
    while literal and not all(literal):
        literal.pop(0)
        args.defaults.pop(0)
    args.kw_defaults = [d if d is not None and _is_literal(d) else None for d in args.kw_defaults]
    return ast.unparse(args)


def emit(parsed, norm, adjoint, wrt: list[str], mode: str, name: str) -> str:
    """Python source of the gradient (`mode="grad"`) or the vjp (`mode="vjp"`) function."""
    params = _parameters(parsed.tree)
    where = f"{parsed.name} ({parsed.filename.rsplit('/', 1)[-1]}:{parsed.line_offset + parsed.tree.lineno})"
    grads = ", ".join(ast.unparse(g) for g in adjoint.grads)
    primal = _block_lines(parsed, primal_blocks(norm.stmts), "    ")
    out = ", ".join(norm.outputs)
    if mode in ("grad", "value_and_grad"):
        what = "Gradient" if mode == "grad" else "Value and gradient"
        lines = [
            f"def {name}({params}):",
            f'    """{what} of {where} with respect to {", ".join(wrt)}."""',
        ]
        lines += primal
        lines.append("    # adjoint sweep: from the output back to the inputs")
        lines.append(f"    {adjoint.seeds[0]} = grad_seed({norm.outputs[0]})")
        lines += _block_lines(parsed, adjoint.blocks, "    ")
        value = f"{out}, " if mode == "value_and_grad" else ""
        lines.append(f"    return {value}{'(' + grads + ')' if value and len(wrt) > 1 else grads}")
    else:
        lines = [
            f"def {name}({params}):",
            f'    """Value of {where} and its pullback to {", ".join(wrt)}."""',
        ]
        lines += primal
        lines.append(f"    def pullback({', '.join(adjoint.seeds)}):")
        lines += _block_lines(parsed, adjoint.blocks, "        ")
        lines.append(f"        return {grads}")
        lines.append(f"    return {'(' + out + ')' if norm.tuple_output else out}, pullback")
    return format_source("\n".join(lines) + "\n")


@functools.lru_cache(maxsize=512)
def format_source(source: str) -> str:
    return black.format_str(source, mode=black.Mode(line_length=100))
