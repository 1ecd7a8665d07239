"""Stage 1: read a function's source into an AST that remembers where it came from."""

from __future__ import annotations

import ast
import functools
import inspect
import re
import textwrap
import weakref
from dataclasses import dataclass, field

from ..astcopy import clone, walk_nodes
from ..errors import SourceChangedError, SourceUnavailableError, UnsupportedSyntaxError

# a checkpointed loop's segment function (checkpoint_loops.py) -> (the user's file, the loop's
# line, its header as written), which its parse quotes for its own `range` loop
SEGMENT_LOOPS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@dataclass
class ParsedFunction:
    func: object  # the user's Python function
    tree: ast.FunctionDef
    filename: str
    source: str  # dedented source of the function
    line_offset: int  # add to an AST line number to get the line in `filename`
    params: list[str] = field(default_factory=list)
    # a name `normalize.naming.hygienic` gave a local -> the user's name of it
    original: dict[str, str] = field(default_factory=dict)
    # a parameter bound to a function the call passes -> that function (treeparams.py)
    passed: dict = field(default_factory=dict)
    # the TreeDef of a tree the function returns, whose leaves it now returns (treereturns.py)
    output: object = None
    # names whose objects the inliner knows, for the tree rewrite (a classmethod's cls)
    known: dict = field(default_factory=dict)
    # a name the transform made for a checkpointed loop -> its object (checkpoint_loops.py)
    synthesized: dict = field(default_factory=dict)
    # a forward mode's: a helper's loops marked s2sad.checkpoint lose the mark, not refused
    drops_checkpoints: bool = False
    # a checkpointed loop's segment (checkpoint_loops.py): (the user's file, the loop's line, its
    # header as written), which the segment's own `for t in range(t_start, ...)` stands for
    loop_of: tuple | None = None

    @property
    def name(self) -> str:
        return self.tree.name

    def file_line(self, node: ast.AST) -> int:
        return getattr(node, "lineno", 1) + self.line_offset

    def opening_line(self, node: ast.AST) -> tuple[int, str]:
        """(file line, text) of the first line of a branch or loop, as a label quotes it: a
        segment's loop quotes the user's loop, in messages and comments alike."""
        if self.loop_of is not None and isinstance(node, ast.For):
            if node.lineno == self.tree.lineno + 1:  # (the segment's one outer statement)
                return self.loop_of[1], self.loop_of[2]
        return self.file_line(node), self.split_lines[node.lineno - 1].strip()

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
    def split_lines(self) -> list[str]:
        """`source.splitlines()`, split once: labels of branches and loops quote their line."""
        return self.source.splitlines()

    @functools.cached_property
    def _source_lines(self) -> list[str]:
        # as the parser (and ast.get_source_segment) splits: at \r\n, \r and \n only
        return re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z", self.source)

    def error(self, cls, what: str, node: ast.AST | None = None, hint: str | None = None):
        """Build an error of class `cls` located at `node`, quoting that source line."""
        node = node if node is not None else self.tree
        line = getattr(node, "lineno", 1)
        text = self.split_lines[line - 1] if line <= len(self.split_lines) else ""
        return cls(what, file=self.filename, line=line + self.line_offset, source=text, hint=hint)


_FUTURE_FLAGS = 0
for _feature in __import__("__future__").all_feature_names:
    _FUTURE_FLAGS |= getattr(__import__("__future__"), _feature).compiler_flag


def _same_code(a, b) -> bool:
    """The same bytecode, names and constants (line numbers aside)."""
    if (
        a.co_code != b.co_code
        or a.co_names != b.co_names
        or a.co_varnames != b.co_varnames
        or a.co_freevars != b.co_freevars
        or a.co_cellvars != b.co_cellvars
        or a.co_argcount != b.co_argcount
        or a.co_kwonlyargcount != b.co_kwonlyargcount
        or len(a.co_consts) != len(b.co_consts)
    ):
        return False
    for x, y in zip(a.co_consts, b.co_consts):
        if hasattr(x, "co_code") or hasattr(y, "co_code"):
            if not (hasattr(x, "co_code") and hasattr(y, "co_code") and _same_code(x, y)):
                return False
        elif type(x) is not type(y) or (x != y and x == x):  # nan: equal to itself as code
            return False
    return True


@functools.lru_cache(maxsize=16)
def _compiled_file(filename: str, text: str, flags: int):
    """The code Python makes of `text` (a whole file, as inspect reads it now), or None."""
    try:
        return compile(text, filename, "exec", flags=flags, dont_inherit=True)
    except (SyntaxError, ValueError):
        return None


def _check_source_is_loaded(func, filename: str, first: int) -> None:
    """Refuse source text that is not what `func` runs: its file was edited after the module
    was imported (inspect reads the file as it is now, at the line the code object names).
    The file as it is now is compiled, and the code object at that line must be the loaded one
    (compiling the function alone is not enough: a module's imports change its bytecode)."""
    loaded = func.__code__  # the code the object runs (a decorator's wrapper: not __wrapped__)
    if any(name.startswith("@") for name in loaded.co_names):
        return  # rewritten by pytest (its asserts): no compiler gives this code from the text
    qualname = getattr(loaded, "co_qualname", loaded.co_name)
    try:
        lines = inspect.findsource(loaded)[0]  # the whole file, as getsourcelines read it
    except (OSError, TypeError):
        return
    module = _compiled_file(loaded.co_filename, "".join(lines), loaded.co_flags & _FUTURE_FLAGS)
    if module is None:
        return  # not compilable as a whole (a notebook cell with magics): nothing to compare
    if first == loaded.co_firstlineno and any(
        getattr(c, "co_qualname", c.co_name) == qualname
        and c.co_firstlineno == loaded.co_firstlineno
        and _same_code(c, loaded)
        for c in _all_code(module)
    ):
        return
    raise SourceChangedError(
        f"the source of {func.__qualname__} in {filename} is not the code Python loaded for it: "
        "the file was edited after the module was imported (or an import hook rewrote the "
        "function)",
        file=filename,
        line=first,
        hint="reload the module (importlib.reload) or restart Python, then transform again",
    )


def _all_code(code):
    """Every code object defined inside `code`."""
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            yield const
            yield from _all_code(const)


def parse_function(func, star=()) -> ParsedFunction:
    """`func`'s source as a `ParsedFunction`. `star`: the names of *args/**kwargs parameters
    the caller passes as trees (treeparams.py); others are refused."""
    if not inspect.isfunction(func):
        raise SourceUnavailableError(
            f"{func!r} is not a Python function with source code",
            hint="differentiate a plain `def` function; for builtins or compiled code, give a "
            "derivative rule with s2sad.register_vjp",
        )
    filename = inspect.getsourcefile(func) or func.__code__.co_filename
    if func.__code__.co_name == "<lambda>":
        return _with_params(_parse_lambda(func, filename), star)
    try:
        # the code the object runs: inspect would follow a decorator's `__wrapped__` to the
        # undecorated function and differentiate that, without the decorator
        lines, first = inspect.getsourcelines(func.__code__)
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
    _check_source_is_loaded(func, filename, first)
    parsed = ParsedFunction(func, node, filename, source, first - 1)
    parsed.loop_of = SEGMENT_LOOPS.get(func)
    return _with_params(parsed, star)


def _with_params(parsed: ParsedFunction, star=()) -> ParsedFunction:
    """Refuse generators and *args/**kwargs; fill in the parameters."""
    func, node = parsed.func, parsed.tree
    for inner in walk_nodes(node):
        if isinstance(inner, (ast.Yield, ast.YieldFrom, ast.Await)):
            raise parsed.error(
                UnsupportedSyntaxError,
                "s2sad cannot differentiate generators or coroutines",
                inner,
                hint="return the value instead of yielding it",
            )
    args = node.args
    stars = [a for a in (args.vararg, args.kwarg) if a is not None]
    if stars and all(a.arg in star for a in stars):
        parsed.params = [a.arg for a in args.posonlyargs + args.args + stars + args.kwonlyargs]
        return parsed
    if (args.vararg or args.kwarg) and hasattr(func, "__wrapped__"):
        raise _decorated(parsed, args.vararg or args.kwarg)
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


def _parse_lambda(func, filename: str) -> ParsedFunction:
    """A lambda, found in its file by its code object's positions (several lambdas on a line
    are told apart by the columns their instructions come from), as a `def` returning its body:
    named after the name it is assigned to (`loss = lambda w: ...`), else `lambda_`."""
    code = func.__code__
    try:
        lines = inspect.findsource(code)[0]
    except (OSError, TypeError) as exc:
        raise SourceUnavailableError(
            f"cannot read the source of {func.__qualname__} ({exc})",
            file=code.co_filename,
            line=code.co_firstlineno,
            hint="define the lambda in a .py file, or write it as a `def`",
        ) from None
    text = "".join(lines)
    module = _parsed_file(filename, text)
    spots = [
        (line, col, end_line, end_col)
        for line, end_line, col, end_col in code.co_positions()
        if line is not None and col is not None and (line, col) != (end_line, end_col)
    ]  # (the instructions of the lambda's body; RESUME's position is empty)
    found = None
    for node in walk_nodes(module) if module is not None else ():
        if not isinstance(node, ast.Lambda) or node.lineno != code.co_firstlineno:
            continue
        if len(node.args.posonlyargs + node.args.args + node.args.kwonlyargs) != (
            code.co_argcount + code.co_kwonlyargcount
        ):
            continue
        span = ((node.lineno, node.col_offset), (node.end_lineno, node.end_col_offset))
        if all(span[0] <= (a, b) and (c, d) <= span[1] for a, b, c, d in spots):
            if found is None or span[0] >= (found.lineno, found.col_offset):  # innermost
                found = node
    if found is None:
        raise SourceUnavailableError(
            f"cannot find the source of {func.__qualname__} in {filename}",
            file=filename,
            line=code.co_firstlineno,
            hint="write it as a `def`",
        )
    _check_source_is_loaded(func, filename, code.co_firstlineno)
    name = next(
        (
            n.targets[0].id
            for n in walk_nodes(module)
            if isinstance(n, ast.Assign)
            and n.value is found
            and len(n.targets) == 1
            and isinstance(n.targets[0], ast.Name)
        ),
        "lambda_",
    )
    found = clone(found)  # (the file's tree is cached; the transform rewrites its own)
    body = [ast.copy_location(ast.Return(found.body), found.body)]
    tree = ast.copy_location(ast.FunctionDef(name, found.args, body, [], None, None), found)
    tree.end_lineno, tree.end_col_offset = found.end_lineno, found.end_col_offset
    return ParsedFunction(func, tree, filename, text, 0)


@functools.lru_cache(maxsize=8)
def _parsed_file(filename: str, text: str):
    try:
        return ast.parse(text, filename)
    except (SyntaxError, ValueError):
        return None


def _decorated(parsed, star) -> UnsupportedSyntaxError:
    """A decorated function (functools.wraps): s2sad differentiates the wrapper the object runs,
    which passes *args/**kwargs on; never the undecorated function in its place."""
    inner = getattr(parsed.func.__wrapped__, "__qualname__", repr(parsed.func.__wrapped__))
    return parsed.error(
        UnsupportedSyntaxError,
        f"{parsed.func.__qualname__} is decorated: the object runs the decorator's wrapper "
        f"`{parsed.name}` (wrapping {inner}), whose *args/**kwargs ('{star.arg}') s2sad cannot "
        "follow",
        parsed.tree,
        hint="differentiate the undecorated function (`f.__wrapped__`) and apply what the "
        "decorator does in a plain function calling it, give the wrapper explicit parameters, "
        "or give the decorated function a rule with s2sad.register_vjp",
    )
