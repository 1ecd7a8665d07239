"""s2sad: source-to-source reverse-mode automatic differentiation for Python and NumPy.

Reads a function's source, writes its adjoint as readable Python, and runs it.
"""

from . import rules  # noqa: F401  (fills the rule table)
from .api import grad, hessian, jacobian, jvp, source, value_and_grad, vjp
from .checkpointing import checkpoint
from .custom import custom_vjp, register_vjp, stop_gradient
from .trees import register_tree
from .errors import (
    NameResolutionError,
    NoRuleError,
    NonDifferentiableInputError,
    NonScalarOutputError,
    S2SADError,
    SeedShapeError,
    SourceChangedError,
    SourceUnavailableError,
    TransformKeywordError,
    UnsupportedSyntaxError,
    WrtError,
)

from .version import __version__  # noqa: F401
from .workspace import release_workspaces

__all__ = [
    "grad",
    "jvp",
    "jacobian",
    "hessian",
    "vjp",
    "value_and_grad",
    "source",
    "custom_vjp",
    "register_vjp",
    "register_tree",
    "stop_gradient",
    "checkpoint",
    "release_workspaces",
    "S2SADError",
    "UnsupportedSyntaxError",
    "NoRuleError",
    "WrtError",
    "SourceUnavailableError",
    "SourceChangedError",
    "NameResolutionError",
    "NonDifferentiableInputError",
    "NonScalarOutputError",
    "SeedShapeError",
    "TransformKeywordError",
]
