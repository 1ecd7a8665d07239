"""Stage 1: read a function's source into an AST that remembers where it came from."""

from __future__ import annotations

import ast
import functools
import inspect
import re
import textwrap
from dataclasses import dataclass, field

from .astcopy import walk_nodes
from .errors import SourceUnavailableError, UnsupportedSyntaxError


@dataclass
class ParsedFunction:
    func: object  # the user's Python function
    tree: ast.FunctionDef
    filename: str
    source: str  # dedented source of the function
    line_offset: int  # add to an AST line number to get the line in `filename`
    params: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.tree.name

    def file_line(self, node: ast.AST) -> int:
        return getattr(node, "lineno", 1) + self.line_offset

    def text_of(self, node: ast.AST) -> str:
        """The user's source of `node`, on one line."""
        segment = self._segment(node) or ast.unparse(node)
        return " ".join(segment.split())

    def _segment(self, node: ast.AST) -> str | None:
        """`ast.get_source_segment(self.source, node)`, which splits the whole source into lines
        at every call (emit asks for every statement's text: the square of the length)."""
        try:
            if node.end_lineno is None or node.end_col_offset is None:
                return None
            first, last = node.lineno - 1, node.end_lineno - 1
            start, end = node.col_offset, node.end_col_offset
        except AttributeError:
            return None
        lines = self._source_lines
        if first == last:
            return lines[first].encode()[start:end].decode()
        head = lines[first].encode()[start:].decode()
        tail = lines[last].encode()[:end].decode()
        return "".join([head] + lines[first + 1 : last] + [tail])

    @functools.cached_property
    def _source_lines(self) -> list[str]:
        # as the parser (and ast.get_source_segment) splits: at \r\n, \r and \n only
        return re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z", self.source)

    def error(self, cls, what: str, node: ast.AST | None = None, hint: str | None = None):
        """Build an error of class `cls` located at `node`, quoting that source line."""
        node = node if node is not None else self.tree
        line = getattr(node, "lineno", 1)
        text = self.source.splitlines()[line - 1] if line <= len(self.source.splitlines()) else ""
        return cls(what, file=self.filename, line=line + self.line_offset, source=text, hint=hint)


def parse_function(func) -> ParsedFunction:
    if not inspect.isfunction(func):
        raise SourceUnavailableError(
            f"{func!r} is not a Python function with source code",
            hint="differentiate a plain `def` function; for builtins or compiled code, give a "
            "derivative rule with s2sad.register_vjp",
        )
    filename = inspect.getsourcefile(func) or func.__code__.co_filename
    try:
        lines, first = inspect.getsourcelines(func)
    except (OSError, TypeError) as exc:
        raise SourceUnavailableError(
            f"cannot read the source of {func.__qualname__} ({exc})",
            file=func.__code__.co_filename,
            line=func.__code__.co_firstlineno,
            hint="define the function in a .py file (not exec or an interactive prompt without "
            "source), or give it a rule with s2sad.register_vjp",
        ) from None
    source = textwrap.dedent("".join(lines))
    try:
        module = ast.parse(source)
    except SyntaxError as exc:
        raise SourceUnavailableError(
            f"cannot parse the source of {func.__qualname__}: {exc.msg}",
            file=filename,
            line=first,
        ) from None
    node = module.body[0] if module.body else None
    if not isinstance(node, ast.FunctionDef):
        kind = "a lambda" if func.__name__ == "<lambda>" else "this kind of function"
        raise UnsupportedSyntaxError(
            f"s2sad cannot transform {kind} ({func.__qualname__})",
            file=filename,
            line=first,
            hint="write it as a `def` function",
        )
    parsed = ParsedFunction(func, node, filename, source, first - 1)
    for inner in walk_nodes(node):
        if isinstance(inner, (ast.Yield, ast.YieldFrom, ast.Await)):
            raise parsed.error(
                UnsupportedSyntaxError,
                "s2sad cannot differentiate generators or coroutines",
                inner,
                hint="return the value instead of yielding it",
            )
    args = node.args
    if args.vararg or args.kwarg:
        star = args.vararg or args.kwarg
        raise parsed.error(
            UnsupportedSyntaxError,
            f"*args and **kwargs parameters are not supported ('{star.arg}')",
            node,
            hint="list the parameters explicitly",
        )
    parsed.params = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
    return parsed
