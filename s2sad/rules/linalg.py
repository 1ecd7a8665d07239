"""Linear algebra. Batched matmul transposes only the last two axes and sums broadcast batches."""

import numpy as np

from .registry import binary, defvjp

binary(np.matmul, "matmul_vjp_lhs(g, x1, x2)", "matmul_vjp_rhs(g, x1, x2)")
defvjp(np.dot, "a, b, out=None", a="dot_vjp_lhs(g, a, b)", b="dot_vjp_rhs(g, a, b)")
defvjp(np.outer, "a, b, out=None", a="outer_vjp_lhs(g, a, b)", b="outer_vjp_rhs(g, a, b)")
defvjp(
    np.einsum,
    "subscripts, /, *operands",
    seq=("operands",),
    operands="einsum_vjp(g, subscripts, operands, k)",
)
defvjp(
    np.trace,
    "a, offset=0, axis1=0, axis2=1, dtype=None, out=None",
    a="trace_vjp(g, a, offset=offset, axis1=axis1, axis2=axis2)",
)
defvjp(np.linalg.inv, "a", a="inv_vjp(g, ans)")
defvjp(np.linalg.solve, "a, b", a="solve_vjp_a(g, a, b, ans)", b="solve_vjp_b(g, a, b)")
defvjp(np.linalg.det, "a", a="det_vjp(g, a, ans)")
