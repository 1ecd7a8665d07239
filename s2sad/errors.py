"""One exception family, so users can catch everything s2sad refuses with one clause.

Every message names the construct, where it is (file:line and the source text) and the way out.
"""

from __future__ import annotations


class S2SADError(Exception):
    """Base class of every error s2sad raises on purpose."""

    def __init__(
        self,
        what: str,
        *,
        file: str | None = None,
        line: int | None = None,
        source: str | None = None,
        hint: str | None = None,
    ):
        self.what = what
        self.file = file
        self.line = line
        self.source = source
        self.hint = hint
        super().__init__(self._format())

    def _format(self) -> str:
        where = ""
        if self.file is not None:
            where = f"{self.file}:{self.line}: " if self.line is not None else f"{self.file}: "
        msg = where + self.what
        if self.source:
            msg += "\n    " + self.source.strip()
        if self.hint:
            msg += "\n  hint: " + self.hint
        return msg


class UnsupportedSyntaxError(S2SADError):
    """A Python construct the transform does not handle (try, with, yield, class, ...)."""


class NestingTooDeepError(UnsupportedSyntaxError):
    """An expression or a chain of inlined helpers nested deeper than the transform can follow."""


class NoRuleError(S2SADError):
    """A differentiated value flows into a function that has no derivative rule."""


class WrtError(S2SADError, ValueError):
    """`wrt` names something that is not a parameter of the function."""


class SourceUnavailableError(S2SADError):
    """The function has no Python source to read (builtin, C extension, exec'd code)."""


class SourceChangedError(SourceUnavailableError):
    """The function's file was edited after its module was imported: its source is not its code."""


class NameResolutionError(S2SADError):
    """A name the function uses is defined nowhere visible to it."""


class NonDifferentiableInputError(S2SADError, TypeError):
    """A gradient was asked for an integer, boolean or non-numeric argument."""


class NonScalarOutputError(S2SADError, ValueError):
    """`grad` was used on a function whose output is not a scalar."""


class SeedShapeError(S2SADError, ValueError):
    """A `vjp` seed whose shape differs from the output's."""


class TransformKeywordError(S2SADError, TypeError):
    """A keyword the transform does not take (`argnums=`): a TypeError, as Python's own, that
    says which keyword of s2sad's to use instead."""
