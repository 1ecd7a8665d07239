"""Every helper generated code calls, by the name it calls it: the NumPy forms (`RUNTIME`) and the
batched forms (`BATCHED`) that the rule families register next to their ops (s2sad/rules/).

This module is their namespace (`runtime.unbroadcast`, `vars(runtime)`); what each computes is
said where it is defined.
"""

from .errors import NonScalarOutputError  # noqa: F401  (grad_seed's; reserved in generated code)
from .rules.helpers import BATCHED, RUNTIME
from .threads import get_thread_id, prange, thread_count  # noqa: F401  (parallel loops)

globals().update(RUNTIME)
globals().update(BATCHED)
