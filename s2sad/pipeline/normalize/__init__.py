"""Stage 2: A-normal form. One operation per statement, and each name assigned once outside loops.

Only statements that touch differentiated values are split: an expression that does not depend on
the `wrt` inputs stays as the user wrote it. Temporaries are named after the assignment they come
from and the operation they hold (`loss_sub`, `loss_pow`); a re-assigned name gets a suffix
(`h`, `h_1`). Every statement keeps a link (`ir.src`) to the user's statement it came from.

Control flow stays structured (`if`, `for i in range(...)`, `while`):
- branches that assign the same variable merge into one name, assigned at the end of each branch;
- a variable a loop changes keeps its pre-loop name as the loop-carried value: the body computes
  `s_new` and copies it back (`s = s_new`) at the end of the body and before each `break`; a
  name the body assigns that did not exist before is live out of the loop only if it is read
  after the loop or read in the body before the body assigns it;
- a view of an array the function writes in place (`y[i]`, `y.T`, `y.reshape(...)`, any call
  not known to make a new array, or `y` itself under another name) is taken as a copy when it is
  read (`snapshot(...)`), so that a later write does not change what the adjoint reads back; a named view read after its array
  was written (where NumPy's view would show the write) is refused;
- `for row in x`, `enumerate` and `zip` become loops over an index;
- a list of differentiated values is no run-time object: its reads are the literal of its
  elements, and a loop filling it or iterating over it is unrolled where its trip count is known
  (lists.py);
- calls to the user's own functions (module-level, nested `def`s, lambdas) are inlined.

Consumes the parsed function (parse.py) and the `wrt` names; produces `Normalized` (the flat
statements, annotated as `s2sad.ir` lists) and the `Resolver` that read the function's globals.

The package, one concern per module:
- normalizer.py: `normalize`, `Normalized`, `Normalizer` (the walk, then the cleanup passes);
- flatten.py: the walk's state (current SSA names, statements written) and its primitives;
- expressions.py / statements.py / control.py / inline.py: the layers of the one recursive walk
  (expressions to atoms; assignments; if/for/while and their merges, returns lifted; inlining);
- iterables.py: what a `for` loop iterates over, kept at its entry value (sequences, bounds);
- lists.py / list_loops.py: lists of differentiated values, followed element by element while
  their contents are known (reads become list literals), and the loops and comprehensions over
  them unrolled;
- memory.py: `Memory`, what arrays may share (views, aliases, in-place hazards); fresh.py:
  which calls make new arrays;
- naming.py: `NameAllocator`, `hygienic`; calls.py: which calls are inlined;
- liveness.py: the copy and live-out cleanup passes, functions of the statements.
Dependence (`mark_loop_varied`) is dependence.py's, shared with the later stages.
"""

from ..reserved import RESERVED, STATIC_ATTRS, reserved_names, s2sad_object
from .naming import NameAllocator, hygienic
from .normalizer import Normalized, Normalizer, normalize

__all__ = [
    "RESERVED",
    "STATIC_ATTRS",
    "NameAllocator",
    "Normalized",
    "Normalizer",
    "hygienic",
    "normalize",
    "reserved_names",
    "s2sad_object",
]
