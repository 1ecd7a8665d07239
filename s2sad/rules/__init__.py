"""Derivative rules, one file per family of ops; importing this package fills the tables.

Each family file holds, per op, its entry (VJP templates, tangent rule, batched templates:
registry.py) right below the helpers it calls (NumPy, batched and Numba forms: helpers.py).
common.py holds the helpers every family shares. The families load in this order, which is
also the order `s2sad emit` copies helpers into a standalone module.
"""

# the families, in the order standalone modules list their helpers
from . import buffers  # noqa: F401
from . import common, folds, reductions, elementwise, mathfuncs, products, solvers  # noqa: F401
from . import contractions, decompositions, matrix_functions  # noqa: F401
from . import decomposition_tangents  # noqa: F401
from . import scans, shape, indexing, element_adds, stacking, splitting, selection  # noqa: F401
from . import statistics  # noqa: F401
from . import special, tuple_results  # noqa: F401
from . import numerical, interpolation, nanstats, vectors, arrays  # noqa: F401
from . import tapes, accumulate, loop_tests, lanes, pools, owned, promotion  # noqa: F401
from . import unbound, in_place  # noqa: F401
from .registry import NONDIFF, VJP, Bound, Rule, defvjp, is_nondiff, lookup, nondiff

__all__ = ["VJP", "NONDIFF", "Bound", "Rule", "defvjp", "nondiff", "lookup", "is_nondiff"]
