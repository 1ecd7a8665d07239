"""Reverse stage's refusal of a list of arrays' cotangent carried through a loop or a branch
(np.split's pieces held in a variable): the adjoint would start it from `list_cotangent_zeros`,
which raises, so the user hears it at transform time, at their line."""

import ast

from .. import ir
from ..errors import UnsupportedSyntaxError

LIST_ZEROS = "list_cotangent_zeros"


def refuse_list_cotangents(parsed, stmts) -> None:
    """A loop over np.split's pieces held in a variable (or a branch reading them) would start
    their flat cotangent from zero and add into it piece by piece, which s2sad does not do: the
    adjoint code keeps a call that raises, so refuse it now, at the user's line."""
    for stmt in stmts:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == LIST_ZEROS:
                where = ir.src_parsed(stmt) or parsed
                raise where.error(
                    UnsupportedSyntaxError,
                    "s2sad does not follow the cotangent of a list of arrays (np.split's "
                    "pieces) through a loop over it, or through a branch reading it",
                    ir.src(stmt),
                    hint="read the pieces by index outside the loop (a, b, c = np.split(x, 3)), "
                    "or loop over the split directly: for piece in np.split(x, 3):",
                )
