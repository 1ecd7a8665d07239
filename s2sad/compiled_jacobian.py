"""A jitted Jacobian called again and again with arguments of one kind (a small function's
Jacobian per observation, in a Python loop): one Numba function computes all of it, and a lean
Python path calls it. Consumes what `Jacobian`'s compiled path (jacobians.py) learned from a
call it completed; produces a `FastJacobian`, which later calls try first.

The Numba function (`rows_text`, `columns_text`) runs the compiled pullback once per output
element (reverse mode), or the compiled jvp once per input element (forward mode), as the
compiled path does from Python, and writes each row or column into blocks the caller
allocates: one call per Jacobian instead of one per row, and no blocks built in Python. The
guard in front of it (`FastJacobian.call`, generated per kind of arguments) checks what the
compiled path decided on: each argument's type, an array's dtype and rank (the transform is
made for the ranks; the blocks take the dtypes), the function's code, the rules' version, and
the kinds of the user's data read now (globals, closure cells) as the compiled path reads them
at each call; the Numba function checks the shapes against the blocks' (the mode and the
blocks were chosen for them) before it writes. Anything else, and any exception, goes back to
the compiled path, which raises or warns exactly as before; Numba failing to compile the
whole-Jacobian function turns it off for that kind.
"""

from __future__ import annotations

import inspect

import numpy as np

from .jit import _module_for
from .numba_failures import from_numba_cache, is_numba_error, shape_assertion
from .rules.registry import VERSION

# compiled-path calls with one kind of arguments before that kind gets its whole compiled
# Jacobian: Numba compiles it in about a second (cached on disk after), which a Jacobian called
# a few times does not win back; one called in a loop does (about 2 µs a call, not 40)
CALLS_BEFORE_COMPILING = 16

# the argument and data types the guard checks by type alone (numbers), or by dtype and rank
_NUMBERS = (float, int, np.float64, np.float32, np.int64)
_FLOAT_BLOCKS = (np.dtype(np.float32), np.dtype(np.float64))


def call_key(args: tuple):
    """The kind of a call's arguments the whole-Jacobian path is made for: each argument's
    type, an array's dtype and shape as well."""
    return tuple((a.dtype, a.shape) if type(a) is np.ndarray else type(a) for a in args)


def fits(args: tuple, inputs: list, values: tuple) -> bool:
    """Whether a call can have a whole compiled Jacobian: plain numbers and arrays (no
    subclass, no tree), every input differentiated an array of at least one element or a
    number, their blocks float32 or float64."""
    for a in (*args, *values):
        if not (type(a) is np.ndarray or type(a) in _NUMBERS):
            return False
    for x in inputs:
        if type(x) is np.ndarray and (x.ndim == 0 or x.size == 0):
            return False
        if np.result_type(np.asarray(x).dtype, np.float32) not in _FLOAT_BLOCKS:
            return False
    return True


class _Names:
    """Fresh names for the whole-Jacobian function's locals, none of the parameters'."""

    def __init__(self, taken):
        self.taken = set(taken) | {"np"}

    def __call__(self, base: str) -> str:
        while base in self.taken:
            base += "_"
        self.taken.add(base)
        return base


def _signature(compiled, name: str) -> list[str]:
    """The function's parameters, less its workspace (numba_forms.py), which its callers here
    leave to its default."""
    params = list(inspect.signature(compiled.functions[name]).parameters)
    return params[:-1] if name in compiled.slots else params


def rows_text(compiled, n_args: int, wrt: list[int], ranks: list, out_rank):
    """Reverse mode: the primal (for the output's shape), then the compiled pullback of each
    output element. `wrt`: the positions of the inputs differentiated; `ranks`: theirs (None
    for a number); `out_rank`: the output's (None for a number). Returns the function's name
    and text."""
    sweep = compiled.name + "_sweep"
    params = _signature(compiled, sweep)
    args, values = params[:n_args], params[n_args + 1 :]
    name = _Names([*params, compiled.name, sweep])
    fname = name(f"{compiled.name}_jacobian")
    blocks = [name(f"jac_{args[k]}") for k in wrt]
    rows = [name(f"rows_{args[k]}") for k in wrt]
    grads = [name(f"d_{args[k]}") for k in wrt]
    out, n, i, seed = name("out"), name("n"), name("i"), name("seed")
    ks = [name(f"k{d}") for d in range(max(r or 0 for r in ranks))]
    lines = _head(fname, [*args, *values, *blocks], compiled.name, "pullback per output")
    if out_rank is None:
        lines.append(f"    {n} = 1")
    else:
        lines.append(f"    {out} = {compiled.name}({', '.join([*args, *values])})")
    lines += _shapes_checked(args, wrt, ranks, blocks, out_rank or 0, out if out_rank else None)
    if out_rank is not None:
        lines.append(f"    {n} = {out}.size")
    for k, block, row, rank in zip(wrt, blocks, rows, ranks):
        shape = f"{n}" if rank is None else f"({n},) + {args[k]}.shape"
        lines.append(f"    {row} = {block}.reshape({shape})  # row i: output element i")
    if out_rank is None:
        body, index, seeded = "    ", "0", "1.0"
    else:
        body, index, seeded = "        ", i, f"{seed}.reshape({out}.shape)"
        lines += [
            f"    for {i} in range({n}):",
            f"        {seed} = np.zeros({n})",
            f"        {seed}[{i}] = 1.0",
        ]
    unpacked = ", ".join(grads)  # (one input: the sweep returns its gradient alone)
    lines.append(f"{body}{unpacked} = {sweep}({', '.join([*args, seeded, *values])})")
    differ = [f"{g}.shape != {args[k]}.shape" for k, g, r in zip(wrt, grads, ranks) if r]
    if differ:
        lines += [f"{body}if {' or '.join(differ)}:", f"{body}    return False"]
    for row, grad, rank in zip(rows, grads, ranks):
        lines += _copied(body, f"{row}[{index}, ...]", grad, ks[: rank or 0])
    lines.append("    return True")
    return fname, "\n".join(lines) + "\n"


def columns_text(compiled, n_args: int, wrt: list[int], ranks: list, out_rank):
    """Forward mode: the compiled jvp of each input element, the others' tangents zero (the
    arguments as `rows_text`'s). Returns the function's name and text."""
    params = _signature(compiled, compiled.name)
    args, values = params[:n_args], params[n_args + len(wrt) :]
    name = _Names([*params, compiled.name])
    fname = name(f"{compiled.name}_jacobian")
    blocks = [name(f"jac_{args[k]}") for k in wrt]
    columns = [name(f"columns_{args[k]}") for k in wrt]
    zeros = [name(f"zero_{args[k]}") for k in wrt]
    out, dot, j, e = name("out"), name("dot"), name("j"), name("e")
    ks = [name(f"k{d}") for d in range(out_rank or 0)]
    lines = _head(fname, [*args, *values, *blocks], compiled.name, "jvp per input")
    for k, zero, rank in zip(wrt, zeros, ranks):
        lines.append(f"    {zero} = {'0.0' if rank is None else f'np.zeros({args[k]}.shape)'}")
    lead = out_rank or 0
    lines += _shapes_checked(args, wrt, ranks, blocks, lead)
    for k, block, column, rank in zip(wrt, blocks, columns, ranks):
        shape = (f"{block}.shape[:{lead}] + " if lead else "") + f"({_size(args[k], rank)},)"
        lines.append(f"    {column} = {block}.reshape({shape})  # [..., j]: input element j")
    for at, (k, column, rank) in enumerate(zip(wrt, columns, ranks)):
        if rank is None:
            body, index, tangent = "    ", "0", "1.0"
        else:
            body, index, tangent = "        ", j, f"{e}.reshape({args[k]}.shape)"
            lines += [
                f"    for {j} in range({args[k]}.size):",
                f"        {e} = np.zeros({args[k]}.size)",
                f"        {e}[{j}] = 1.0",
            ]
        tangents = [tangent if i == at else z for i, z in enumerate(zeros)]
        lines.append(
            f"{body}{out}, {dot} = {compiled.name}({', '.join([*args, *tangents, *values])})"
        )
        if lead:
            lines.append(
                f"{body}if {out}.shape != {blocks[0]}.shape[:{lead}] or {dot}.shape != {out}.shape:"
            )
            lines.append(f"{body}    return False")
        lines += _copied(body, f"{column}[..., {index}]", dot, ks)
    lines.append("    return True")
    return fname, "\n".join(lines) + "\n"


def _head(fname: str, params: list[str], called: str, each: str) -> list[str]:
    return [
        f"def {fname}({', '.join(params)}):",
        f'    """The Jacobian of {called}\'s output into blocks shaped out.shape + arg.shape, one',
        f'    compiled {each} element; False where the shapes are not the blocks\'."""',
    ]


def _copied(body: str, target: str, source: str, ks: list[str]) -> list[str]:
    """`target = source` element by element (`...` in target: where the indices go): Numba
    compiles an array assigned into a slice in seconds, loops in a fraction of one."""
    lines = [f"{body}{'    ' * d}for {k} in range({source}.shape[{d}]):" for d, k in enumerate(ks)]
    at = (
        target.replace("...", ", ".join(ks))
        if ks
        else target.replace("..., ", "").replace(", ...", "")
    )
    read = f"{source}[{', '.join(ks)}]" if ks else source
    lines.append(f"{body}{'    ' * len(ks)}{at} = {read}")
    return lines


def _size(arg: str, rank) -> str:
    return "1" if rank is None else f"{arg}.size"


def _shapes_checked(args, wrt, ranks, blocks, lead: int, out=None) -> list[str]:
    """Lines returning False where the blocks given are not shaped `out.shape + arg.shape`
    (the guard in front checks the arguments' ranks, not their shapes)."""
    tests = [f"{out}.shape != {blocks[0]}.shape[:{lead}]"] if out else []
    tests += [
        f"{args[k]}.shape != {block}.shape[{lead}:]"
        for k, block, rank in zip(wrt, blocks, ranks)
        if rank is not None
    ]
    if not tests:
        return []
    return [f"    if {' or '.join(tests)}:", "        return False"]


class WholeJacobians:
    """A jitted Jacobian's whole compiled functions: how often the compiled path ran for each
    kind of arguments, the `FastJacobian` made for each kind called often, and the one the last
    call used (`last`, which `Jacobian.__call__` tries first)."""

    def __init__(self, wrt_tuple: bool, on: bool):
        self.wrt_tuple, self.on = wrt_tuple, on
        self.calls: dict = {}
        self.fast: dict = {}
        self.last = None

    def other(self, args):
        """The Jacobian from the whole compiled function of another kind of arguments seen
        often, or None."""
        if len(self.fast) < 2:
            return None
        fast = self.fast.get((len(args), call_key(args)))
        if fast is None or fast is self.last:
            return None
        result = fast.call(args)
        if result is not None:
            self.last = fast
        return result

    def remember(self, owner, ran, compiled, values, bound, given, out, first):
        """After a call the compiled path completed (`owner`: the vjp transform, for rows, or
        the jvp one; `ran`: the Jitted whose code computed the rows or columns, None where
        Python did; `first`: the first row's gradients, or the first column): count calls of
        its kind, and make the whole compiled Jacobian for the kind once it is called often
        (again where the data's kinds or the output's shape changed since)."""
        args, kwargs = given
        inputs = [bound.arguments[n] for n in bound.wrt]
        if not self.on or kwargs:
            return
        n_given = len(args)
        # the kind: the arguments passed (a call leaving some to defaults is another kind,
        # whose guard reads the defaults at each call)
        key = (n_given, call_key(args))
        if n_given != len(bound.arguments):  # the rest left to their defaults, or not a plain call
            filled = _defaults_filled(owner.func, bound, n_given)
            if filled is None:
                return
            args = (*args, *filled)
        if any(a is not b for a, b in zip(args, bound.arguments.values())):
            return  # (a method's self, a partial's arguments)
        if not fits(args, inputs, values):
            return
        fast = self.fast.get(key)
        if fast is None:
            if len(self.calls) > 64:  # many kinds, seldom the same: start counting again
                self.calls.clear()
            if len(self.fast) > 64:  # (kinds differ by shape: the texts are the same)
                self.fast.clear()
            self.calls[key] = self.calls.get(key, 0) + 1
            if self.calls[key] < CALLS_BEFORE_COMPILING:
                return
        elif fast.off or (fast.made_for == _made_for(values, out) and fast.compiled is compiled):
            self.last = None if fast.off else fast
            return  # (another transform: the function, a helper or the rules changed: made anew)
        fast = self._made(owner, ran, compiled, values, bound, args, out, first, n_given)
        if fast is not None:
            self.fast[key] = self.last = fast

    def _made(self, owner, jitted, compiled, values, bound, args, out, first, given):
        """The whole compiled Jacobian for this call's kind, or None where the compiled path
        did not run Numba's code, or the output or first row is not an array or number of the
        kind the texts are written for."""
        inputs = [bound.arguments[n] for n in bound.wrt]
        rows = owner.mode == "vjp"
        names = [compiled.name, compiled.name + "_sweep"] if rows else [compiled.name]
        if jitted is None or any(jitted.namespace.get(n) is None for n in names):
            return None
        ranks = [_rank(x) for x in inputs]
        out_rank = _rank(out)
        if out_rank == 0 or not np.size(out):
            return None
        firsts = (first if len(inputs) > 1 else (first,)) if rows else (first,)
        for g, like in zip(firsts, inputs if rows else [out]):  # the kinds the text is for
            if _rank(g) != _rank(like) or np.shape(g) != np.shape(like):
                return None
        positions = list(bound.arguments)
        wrt = [positions.index(n) for n in bound.wrt]
        text = (rows_text if rows else columns_text)(compiled, len(args), wrt, ranks, out_rank)
        blocks = [
            (np.shape(out) + np.shape(x), np.result_type(np.asarray(x).dtype, np.float32))
            for x in inputs
        ]
        fast = FastJacobian(
            jitted, text, owner.func, compiled, args, values, blocks, self.wrt_tuple, given
        )
        fast.made_for = _made_for(values, out)
        fast.mode = "reverse" if rows else "forward"
        return fast


def _rank(value):
    """An array's rank, None for a number (a 0-d array is neither: rank 0)."""
    if isinstance(value, np.ndarray):
        return value.ndim
    return None if isinstance(value, (float, np.floating)) else 0


def _made_for(values, out) -> tuple:
    """What a whole compiled Jacobian is made for beyond the arguments' kind: the data's kinds,
    and the output's shape (which the data may change)."""
    kinds = tuple((type(v), getattr(v, "dtype", None), np.ndim(v)) for v in values)
    return kinds, np.shape(out)


class FastJacobian:
    """The whole compiled Jacobian for one kind of arguments, and the guard that checks a call
    is of that kind. `call(args)` returns the blocks (one, or a tuple for a tuple `wrt`), or
    None where the call is not of that kind or the compiled path must decide."""

    def __init__(self, jitted, named_text, func, compiled, args, values, blocks, wrt_tuple, given):
        self.jitted, (self.name, self.text) = jitted, named_text
        self.func, self.compiled = func, compiled
        # what the guard checks (not the arrays themselves: they stay the caller's to free)
        self.made = (_kinds(args), _kinds(values), blocks, wrt_tuple)
        self.off = self.reloaded = False
        self.given = given  # arguments passed; the rest are the function's defaults
        self.call = _guarded_call(self, self.whole(), *self.made)

    def whole(self, fresh: bool = False):
        """The Numba function, in a module of its own cached on disk beside the generated
        module it calls (its name hashes that module's, so an edited callee compiles anew);
        Numba compiles it at its first call."""
        namespace = self.jitted.namespace
        module = _module_for(self.text, self.name, fresh, callees=namespace["__name__"])
        for name in self.compiled.functions:
            vars(module)[name] = namespace[name]
        return getattr(module, self.name)

    def failed(self, exc) -> None:
        """After an exception from the whole Jacobian: Numba's failure to compile it turns it
        off (a damaged cache file is deleted and compiled again, once), as does the check of
        Numba's parallel array analysis that the compiled path answers by compiling without
        threads; the user's own errors leave it on (the compiled path runs again, and raises
        them). Returns None: the compiled path's turn."""
        if from_numba_cache(exc) and not self.reloaded:
            self.reloaded = True
            self.call = _guarded_call(self, self.whole(fresh=True), *self.made)
        elif is_numba_error(exc) or shape_assertion(exc):  # (the latter: Numba's threads)
            self.off = True
            self.call = _declined


def _defaults_filled(func, bound, n_given: int):
    """The defaults a call left to the function (its parameters after the `n_given` passed), as
    `func.__defaults__` holds them; None where the bound values are not those (keyword-only
    parameters, a method's or a partial's arguments)."""
    defaults = getattr(func, "__defaults__", None) or ()
    missing = list(bound.arguments)[n_given:]
    if not missing or len(missing) > len(defaults):
        return None
    tail = defaults[len(defaults) - len(missing) :]
    if any(bound.arguments[m] is not d for m, d in zip(missing, tail)):
        return None
    return tail


def _kinds(values) -> list[tuple]:
    """Each value's type, and an array's dtype and rank: what the guard checks."""
    return [
        (type(v), v.dtype, v.ndim) if type(v) is np.ndarray else (type(v), None, None)
        for v in values
    ]


def _guarded_call(fast: FastJacobian, whole, args, values, blocks, wrt_tuple):
    """A Python function of the call's arguments: the guard, the data read now, the blocks
    allocated, the whole Jacobian run into them. Generated per kind, straight-line code (every
    part of it counts: the whole call takes about two microseconds). It checks an array's rank,
    not its shape: the whole Jacobian checks the shapes against the blocks', and the arguments
    not differentiated only need the rank the transform was made for."""
    env = {
        "fast": fast,
        "whole": whole,
        "f": fast.func,
        "CODE": fast.func.__code__,
        "compiled": fast.compiled,
        "RULES": fast.compiled.rules_version,
        "VERSION": VERSION,
        "empty": np.empty,
    }
    names = [f"a{k}" for k in range(len(args))]
    checks = []
    for k, ((kind, dtype, ndim), n) in enumerate(zip(args, names)):
        env[f"T{k}"] = kind
        checks.append(f"type({n}) is T{k}")
        if dtype is not None:
            env[f"D{k}"] = dtype
            checks.append(f"{n}.dtype is D{k} and {n}.ndim == {ndim}")
    lines = ["def call(args):", f"    if len(args) != {fast.given}:", "        return None"]
    if fast.given < len(args):  # the defaults as they are now (a changed one is checked below)
        lines += [  # (none left, `f.__defaults__ = None`: the compiled path's call)
            "    defaults = f.__defaults__ or ()",
            f"    args = args + defaults[len(defaults) - {len(args) - fast.given}:]",
            f"    if len(args) != {len(args)}:",
            "        return None",
        ]
    lines += [
        f"    {', '.join(names)}{',' if len(names) == 1 else ''} = args",
        f"    if not ({' and '.join(checks)}):",
        "        return None",
        "    if f.__code__ is not CODE or RULES != VERSION[0]:",
        "        return None  # the function was edited, or a rule registered: transform again",
    ]
    compiled = fast.compiled
    value_names = [f"v{k}" for k in range(len(values))]
    if compiled.helpers or compiled.checks or compiled.pinned or compiled.data_specs:
        # the user's data and helpers read now, as the compiled path reads them at each call
        compiled.read(fast.func, None)  # (makes the reader, which the guard calls itself)
        env["read"] = compiled._reader
        lines += ["    values = read(f, None)", "    if values is None:"]
        lines.append("        return None")
    if values:
        value_checks = []
        for k, ((kind, dtype, ndim), n) in enumerate(zip(values, value_names)):
            env[f"VT{k}"] = kind
            value_checks.append(f"type({n}) is VT{k}")
            if dtype is not None:
                env[f"VD{k}"] = dtype
                value_checks.append(f"{n}.dtype is VD{k} and {n}.ndim == {ndim}")
        lines.append(f"    {', '.join(value_names)}{',' if len(values) == 1 else ''} = values")
        lines.append(f"    if not ({' and '.join(value_checks)}):")
        lines.append("        return None")
    block_names = [f"b{k}" for k in range(len(blocks))]
    for k, ((shape, dtype), n) in enumerate(zip(blocks, block_names)):
        env[f"BS{k}"], env[f"BD{k}"] = shape, dtype
        given = "" if dtype == np.float64 else f", BD{k}"  # (np.empty's default: faster)
        lines.append(f"    {n} = empty(BS{k}{given})")
    lines += [
        "    try:",
        f"        if not whole({', '.join([*names, *value_names, *block_names])}):",
        "            return None",
        "    except Exception as exc:  # noqa: BLE001  (the compiled path runs again, and raises)",
        "        return fast.failed(exc)",
    ]
    result = ", ".join(block_names) + ("," if len(blocks) == 1 else "")
    lines.append(f"    return ({result})" if wrt_tuple else f"    return {block_names[0]}")
    exec("\n".join(lines), env)
    return env["call"]


def _declined(args):
    """The call of a whole compiled Jacobian Numba could not compile: the compiled path's."""
    return None
