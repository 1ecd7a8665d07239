"""Jacobians and Hessians, built from the transforms: `Jacobian` picks forward or reverse mode
by the sizes of input and output (one batched sweep, or one sweep per basis vector), and
`Hessian` is forward mode over the generated gradient's source. Consumes the user's function;
produces arrays shaped `out.shape + arg.shape`."""

from __future__ import annotations

import functools
import inspect

import numpy as np

from .compiled_jacobian import WholeJacobians
from .callables import generated_names
from .compose import composable
from .errors import NonScalarOutputError, NoRuleError, S2SADError
from .hessian_messages import in_users_terms
from .input_checks import refuse_complex
from .jit import Jitted
from .keywords import caller, refuse
from .pipeline.integer_writes import FloatNumberError
from .pipeline.ranks import rank_of_argument
from .transform_cache import transform, transform_and_read
from .transformed import JVPTransformed, Transformed, unboxed
from .pullback import tree_output
from .trees import flatten, unflatten


def _basis(x):
    x = np.asarray(x, dtype=float)
    for k in range(x.size):
        e = np.zeros(x.size)
        e[k] = 1.0
        yield e.reshape(x.shape)


class Jacobian:
    """`jacobian(f, wrt, mode)`: call it like `f`; `s2sad.source` shows the batched code."""

    def __init__(self, f, wrt=0, mode=None, batched=True, jit=False, parallel=False):
        if mode not in (None, "forward", "reverse"):
            raise ValueError(f"mode must be 'forward' or 'reverse', not {mode!r}")
        self.forward = JVPTransformed(f, wrt, "jvp", jit, parallel=parallel)
        self.backward = Transformed(f, wrt, "vjp", jit, parallel=parallel)
        self.func, self.mode, self.batched = self.backward.func, mode, batched and not jit
        self.asked_batched = batched  # jitted: a sweep per direction (no Numba batched helpers)
        self.wrt, self.wrt_tuple = self.backward.wrt, self.backward.wrt_tuple
        shown = self.func.__qualname__
        threads = ", parallel=True" if parallel else ""
        self.forward.label = self.backward.label = f"s2sad.jacobian({shown}, jit={jit!r}{threads})"
        self.last = None  # (mode, ranks, wrt, trees, functions passed) of the last call
        self.per_basis_mode = mode  # unbatched (and jitted): the sweeps the last call ran
        self._out_shapes: dict = {}  # argument shapes -> output shape seen, to pick a mode
        # the default's mode whose transform met an op without a rule in it (a function given
        # only a vjp rule has no tangent rule): the other runs from then on; and the one tried
        self.refused = self.trying = None
        # jitted: the whole Jacobian compiled for each kind of arguments it is called with often
        self._whole = WholeJacobians(self.wrt_tuple, on=bool(jit))
        functools.update_wrapper(self, f)

    def __call__(self, *args, **kwargs):
        fast = self._whole.last
        if fast is not None and not kwargs:  # (compiled_jacobian.py: its guard first)
            result = fast.call(args)
            if result is not None:
                return result
        try:
            return self._call(args, kwargs)
        except NoRuleError as exc:
            if self.mode is not None or self.refused is not None or self.trying is None:
                raise  # (mode="forward" given: its message says to use mode="reverse")
            self.refused, first = self.trying, exc
        try:
            return self._call(args, kwargs)
        except NoRuleError:  # (neither mode has a rule: the first refusal, as before)
            self.refused = None
            raise first from None

    def _call(self, args, kwargs):
        fast = None  # (__call__ tried the last whole Jacobian on a call by position)
        if kwargs:  # the same call by position, which the compiled paths take
            args, kwargs = self._by_position(args, kwargs)
            fast = self._whole.last
        if not kwargs:  # (compiled_jacobian.py)
            result = None if fast is None else fast.call(args)
            if result is None:
                result = self._whole.other(args)
            if result is not None:
                return result
        bound = self.backward._bind(args, kwargs)
        if not self.batched:
            return self._per_basis(bound, args, kwargs)
        inputs = [bound.arguments[n] for n in bound.wrt]
        ranks = tuple((n, rank_of_argument(v)) for n, v in bound.arguments.items())
        n_in = sum(np.size(x) for x in inputs)
        mode, ran = self.mode, None
        if mode is None:
            key = _shapes_key(bound)
            if key not in self._out_shapes and self.refused is None:
                self.trying = "reverse"
                ran = self._reverse_primal(bound, ranks)  # the output's size decides
                self._out_shapes[key] = sum(np.size(o) for o in ran[0])
            mode = _OTHER.get(self.refused) or (
                "forward" if n_in <= self._out_shapes[key] else "reverse"
            )
        self.last = (mode, ranks, bound.wrt, bound.trees, bound.passed)
        self.trying = mode
        if mode == "reverse":
            outs, pullback, compiled = ran or self._reverse_primal(bound, ranks)
            sizes = [np.size(o) for o in outs]
            total, offsets = sum(sizes), np.cumsum([0] + sizes)
            if total == 0 or n_in == 0:
                return self._zeros(tree_output(compiled, _one(outs, compiled)), inputs, bound)
            seeds = []  # row k: the derivative of output element k (of all the outputs)
            for o, size, start in zip(outs, sizes, offsets):
                seed = np.zeros((total, size))
                seed[start : start + size] = np.eye(size)
                seeds.append(seed.reshape((total,) + np.shape(o)))
            rows = pullback(*seeds)
            rows = rows if len(bound.wrt) > 1 else (rows,)
            rows = [_rows(r, total, x) for r, x in zip(rows, inputs)]
            per_output = []
            for o, size, start in zip(outs, sizes, offsets):
                blocks = [
                    np.reshape(r[start : start + size], np.shape(o) + np.shape(x))
                    for r, x in zip(rows, inputs)
                ]
                per_output.append(self._conformed(blocks, inputs, bound))
        else:
            if n_in == 0:
                out = self.forward.target.original(*args, **kwargs)
                return self._zeros(out, inputs, bound)
            tangents, offsets = [], np.cumsum([0] + [np.size(x) for x in inputs])
            for k, x in enumerate(inputs):
                t = np.zeros((n_in, np.size(x)))
                t[offsets[k] : offsets[k + 1]] = np.eye(np.size(x))
                tangents.append(t.reshape((n_in,) + np.shape(x)))
            compiled, values = self.backward.read_mode(bound, "jvp_batched")
            out, out_dot = compiled.function(*bound.args, *tangents, *values, **bound.kwargs)
            outs, dots = (out, out_dot) if compiled.tuple_output else ((out,), (out_dot,))
            per_output = []
            for o, d in zip(outs, dots):
                rows = _rows(d, n_in, o)
                blocks = []
                for k, x in enumerate(inputs):
                    part = rows[offsets[k] : offsets[k + 1]].reshape((np.size(x), np.size(o)))
                    blocks.append(np.reshape(part.T, np.shape(o) + np.shape(x)))
                per_output.append(self._conformed(blocks, inputs, bound))
        # several outputs (a tuple or a tree): the output's structure outside, wrt's inside
        return tree_output(compiled, _one(tuple(per_output), compiled))

    def _by_position(self, args, kwargs):
        """Arguments passed by keyword moved to their places, where those before them are all
        given and each may be passed either way; else the call as it is."""
        names, params = self.backward._positional, self.backward.signature.parameters
        if names is None:
            return args, kwargs
        given, left = list(args), dict(kwargs)
        for name in names[len(args) :]:
            if name not in left or params[name].kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD:
                break
            given.append(left.pop(name))
        return (tuple(given), {}) if not left else (args, kwargs)

    def _reverse_primal(self, bound, ranks):
        """The outputs (a tuple, one per output leaf), the batched pullback and the transform."""
        compiled, values = self.backward.read_mode(bound, "vjp_batched")
        out, pullback = compiled.function(*bound.args, *values, **bound.kwargs)
        return (out if compiled.tuple_output else (out,)), pullback, compiled

    def _zeros(self, out, inputs, bound):
        d, outs = flatten(out)  # a tuple or tree output: a zero Jacobian per leaf
        per_output = []
        for o in outs:
            blocks = [np.zeros(np.shape(o) + np.shape(x)) for x in inputs]
            per_output.append(self._conformed(blocks, inputs, bound))
        return unflatten(d, per_output)

    def _per_basis(self, bound, args, kwargs):
        """One vjp pullback per output element, or one jvp per input element (batched=False)."""
        forward, backward = self.forward, self.backward
        inputs = [bound.arguments[n] for n in bound.wrt]

        def given(flat):  # values per leaf differentiated -> what the wrappers take
            items = bound.regroup(flat)
            return tuple(items) if self.wrt_tuple else items[0]

        def leaves(result):  # a pullback's result -> its values per leaf differentiated
            items = result if self.wrt_tuple else (result,)
            return [leaf for item in items for leaf in flatten(item)[1]]

        only = self.mode or _OTHER.get(self.refused)  # (the one mode to run, if any)
        if self.backward.jit and bound.plain:
            if only != "forward":
                self.trying = "reverse"
                rows = self._compiled_rows(bound, inputs, (args, kwargs))
                if rows is not None:
                    self.per_basis_mode = "reverse"
                    return rows
            if only != "reverse":
                self.trying = "forward"
                columns = self._compiled_columns(bound, inputs, (args, kwargs))
                if columns is not None:
                    self.per_basis_mode = "forward"
                    return columns
        self.trying = only or "reverse"
        if only == "forward":  # never the reverse transform: it may refuse what jvp follows
            zeros = [np.zeros(np.shape(x)) for x in inputs]
            out = forward(*args, tangent=given(zeros), **kwargs)[0]
        else:
            out, pullback = backward(*args, **kwargs)
        d, outs = flatten(out)  # a tuple or tree output: a Jacobian per leaf, in its structure
        n_in = sum(np.size(x) for x in inputs)
        chosen = only or ("forward" if n_in <= sum(np.size(o) for o in outs) else "reverse")
        self.per_basis_mode = self.trying = chosen
        per_output = []
        if chosen == "reverse":
            zeros = [np.zeros(np.shape(o)) for o in outs]
            for i, o in enumerate(outs):
                seeds = (unflatten(d, zeros[:i] + [e] + zeros[i + 1 :]) for e in _basis(o))
                rows = [leaves(pullback(seed)) for seed in seeds]
                blocks = []
                for k, x in enumerate(inputs):
                    parts = np.array([r[k] for r in rows], dtype=float)
                    blocks.append(np.reshape(parts, np.shape(o) + np.shape(x)))
                per_output.append(blocks)
        else:
            columns = [[[] for _ in inputs] for _ in outs]
            for k, x in enumerate(inputs):
                for e in _basis(x):
                    tangents = [
                        e if j == k else np.zeros(np.shape(inputs[j])) for j in range(len(inputs))
                    ]
                    _, dot = forward(*args, tangent=given(tangents), **kwargs)
                    for i, t in enumerate(flatten(dot)[1]):
                        refuse_complex(t, "Jacobian")
                        columns[i][k].append(np.asarray(t, dtype=float))
            for o, by_input in zip(outs, columns):
                blocks = []
                for x, cols in zip(inputs, by_input):
                    stacked = np.moveaxis(np.array(cols), 0, -1) if cols else np.zeros(0)
                    blocks.append(np.reshape(stacked, np.shape(o) + np.shape(x)))
                per_output.append(blocks)
        return unflatten(d, [self._conformed(b, inputs, bound) for b in per_output])

    def _compiled_rows(self, bound, inputs, given):
        """Reverse mode compiled, for one array output and plain arguments: the compiled
        pullback once per output element, its rows written straight into the Jacobian's
        blocks. A Jacobian of a small function called in a Python loop is mostly this loop's
        overhead, so it skips what `Pullback` checks for seeds a user passes. None where
        forward mode is the cheaper one, or the output is a tuple or a tree. `given`: the
        call's own (args, kwargs)."""
        backward = self.backward
        compiled, values = backward.prepared(bound)
        if compiled.tuple_output or compiled.output is not None:
            return None
        out = backward._run(compiled, values, bound)
        if self._falls_back(compiled, compiled.name, (*bound.arguments.values(), *values)):
            return self._batched_instead(given)
        n_in = sum(np.size(x) for x in inputs)
        if self.mode is None and self.refused is None and n_in <= np.size(out):
            return None
        sweep = compiled.name + "_sweep"
        blocks = [np.empty((np.size(out), np.size(x))) for x in inputs]
        args = (*bound.arguments.values(),)
        first = None
        for i, seed in enumerate(_basis(out)):
            if i == 0:
                grads = first = backward._run(compiled, values, bound, (unboxed(seed),), name=sweep)
                for g in grads if len(inputs) > 1 else (grads,):
                    refuse_complex(g, "gradient")  # every row has the first one's types
                called = (*args, unboxed(seed), *values)
                ran = Jitted.of(compiled).ran(sweep, called)
                if ran is None and self._falls_back(compiled, sweep, called):
                    return self._batched_instead(given)
                direct = None if ran is None else ran.namespace.get(sweep)
            elif direct is not None:  # compiled for the first row's types: call it directly
                grads = direct(*args, unboxed(seed), *values)
            else:
                grads = backward._run(compiled, values, bound, (unboxed(seed),), name=sweep)
            grads = grads if len(inputs) > 1 else (grads,)
            for block, g in zip(blocks, grads):
                block[i] = np.ravel(g)
        blocks = [np.reshape(b, np.shape(out) + np.shape(x)) for b, x in zip(blocks, inputs)]
        self._whole.remember(backward, ran, compiled, values, bound, given, out, first)
        return self._conformed(blocks, inputs, bound)

    def _compiled_columns(self, bound, inputs, given):
        """Forward mode compiled, for one array output and plain arguments: the compiled jvp
        once per input element, after the first column calling Numba's dispatcher directly
        (as `_compiled_rows`). None where the output is a tuple or a tree, or reverse mode is
        the cheaper one."""
        forward = self.forward
        compiled, values = forward.prepared(bound)
        if compiled.tuple_output or compiled.output is not None:
            return None
        jitted, args = Jitted.of(compiled), (*bound.arguments.values(),)
        strict, what = forward.jit == "strict", forward.jit_label()
        zeros = [unboxed(np.zeros(np.shape(x))) for x in inputs]
        offsets = np.cumsum([0] + [np.size(x) for x in inputs])
        columns = direct = out = first = ran = None
        for k, x in enumerate(inputs):
            for i, e in enumerate(_basis(x)):
                tangents = (*zeros[:k], unboxed(e), *zeros[k + 1 :])
                if direct is not None:
                    out, dot = direct(*args, *tangents, *values)
                else:
                    called = (*args, *tangents, *values)
                    out, dot = jitted(called, strict=strict, what=what)
                    if self._falls_back(compiled, compiled.name, called):
                        return self._batched_instead(given)
                    if columns is None:
                        cheaper = offsets[-1] > np.size(out)  # (reverse mode's rows)
                        if self.mode is None and self.refused is None and cheaper:
                            return None
                        refuse_complex(dot, "tangent")  # every column has the first one's types
                        columns, first = np.empty((np.size(out), offsets[-1])), dot
                    ran = jitted.ran(compiled.name, called)
                    direct = None if ran is None else ran.namespace.get(compiled.name)
                columns[:, offsets[k] + i] = np.ravel(dot)
        if columns is None:  # nothing to differentiate: no call ran
            return None
        blocks = [
            np.reshape(columns[:, offsets[k] : offsets[k + 1]], np.shape(out) + np.shape(x))
            for k, x in enumerate(inputs)
        ]
        self._whole.remember(forward, ran, compiled, values, bound, given, out, first)
        return self._conformed(blocks, inputs, bound)

    def _falls_back(self, compiled, name: str, args) -> bool:
        """Whether Numba cannot compile the sweeps (warned once), batched ones asked for."""
        return self.asked_batched and Jitted.of(compiled).falls_back(name, args)

    def _batched_instead(self, given):
        self.batched = True  # Numba cannot compile the sweeps: jit=False's batched ones from now on
        return self(*given[0], **given[1])  # (`given`: the call's own args and kwargs)

    def _conformed(self, blocks, inputs, bound):
        """Like a gradient, each block takes its input's float dtype (float32 stays float32);
        a tree argument's blocks come back in its structure."""
        dtypes = [np.result_type(np.asarray(x).dtype, np.float32) for x in inputs]
        blocks = bound.regroup([b.astype(t) for b, t in zip(blocks, dtypes)])
        return tuple(blocks) if self.wrt_tuple else blocks[0]

    def source(self, *args, **kwargs) -> str:
        """The batched code a call with these arguments runs (of the last call without any).
        Jitted (or unbatched): the sweep run once per row (reverse) or column (forward), and
        the compiled function that runs them all once the Jacobian is called often."""
        if not self.batched:
            fast = self._whole.last
            if args or kwargs:  # the sweeps such a call runs: the mode its sizes pick
                bound = self.backward._bind(args, kwargs)
                mode = self.mode or _OTHER.get(self.refused)
                if mode is None:
                    n_in = sum(np.size(bound.arguments[n]) for n in bound.wrt)
                    out = self.backward.target.original(*args, **kwargs)
                    n_out = sum(np.size(o) for o in flatten(out)[1])
                    mode = "forward" if n_in <= n_out else "reverse"
                sweeps = self.forward if mode == "forward" else self.backward
                return sweeps.specialized(sweeps._bind(args, kwargs)).source
            mode = fast.mode if fast is not None else self.per_basis_mode
            sweeps = self.forward if mode == "forward" else self.backward
            shown = sweeps.compiled.source
            if fast is not None:
                shown += (
                    "\n\n# called often with arguments of one kind, this compiled function runs\n"
                    "# the sweeps above for every row or column\n" + fast.text
                )
            return shown
        wrt, trees, passed = self.wrt, (), None
        if args or kwargs:
            bound = self.backward._bind(args, kwargs)
            ranks = tuple((n, rank_of_argument(v)) for n, v in bound.arguments.items())
            wrt, trees, passed = bound.wrt, bound.trees, bound.passed
            mode = self.mode or _OTHER.get(self.refused)
            if mode is None:
                outs = self._reverse_primal(bound, ranks)[0]
                n_in = sum(np.size(bound.arguments[n]) for n in bound.wrt)
                mode = "forward" if n_in <= sum(np.size(o) for o in outs) else "reverse"
        elif self.last is not None:
            mode, ranks, wrt, trees, passed = self.last
        else:
            mode, ranks = self.mode or "reverse", None
        batched = "jvp_batched" if mode == "forward" else "vjp_batched"
        return transform(self.func, wrt, batched, ranks, False, trees, False, passed).source

    def __repr__(self):
        return f"<s2sad.jacobian of {self.func.__qualname__} wrt {', '.join(self.wrt)}>"


_OTHER = {"forward": "reverse", "reverse": "forward"}


def _one(values: tuple, compiled):
    """The per-output values as the transform returns its output: alone for one output."""
    return values if compiled.tuple_output else values[0]


def _shapes_key(bound) -> tuple:
    """What decides the output's size: the arguments' shapes, the trees' structures and the
    functions passed (by code: `TreeDef("function")`)."""
    shapes = tuple((n, np.shape(v), type(v)) for n, v in bound.arguments.items())
    return shapes + (bound.trees,)


def _rows(g, size, x):
    """A batched derivative as float64 rows shaped `(size,) + x.shape`."""
    refuse_complex(g, "Jacobian")  # (a complex constant times x: never its real half alone)
    g = np.asarray(g, dtype=float)
    shape = (size,) + np.shape(x)
    if g.ndim == 0 and not g:  # an all-zero derivative may come back as one number
        return np.zeros(shape)
    if g.shape != shape:
        raise S2SADError(
            f"internal error: a batched derivative of shape {g.shape} where {shape} was "
            "expected; please report this with the function"
        )
    return g


def jacobian(f, wrt=0, mode=None, batched=True, *, jit=False, parallel=False, **unknown):
    """The Jacobian, shaped `out.shape + arg.shape` (a tuple of them for a tuple `wrt`).

    One batched sweep: `mode="reverse"` runs the primal once and pulls the identity over the
    output's elements back, every adjoint carrying one leading axis with a row per output
    element; `mode="forward"` pushes the identity over the inputs' elements forward the same
    way. The default picks the mode with fewer rows. `batched=False` takes one sweep per basis
    direction instead (the slower reference). `jit=True` or `"strict"` compiles the pullback
    and tangent code with Numba, one sweep per basis direction (the batched helpers have no
    Numba versions yet), all of them in one compiled call for a kind of arguments it is called
    with often (compiled_jacobian.py); with `parallel=True` as well, their independent loops
    run on threads."""
    refuse("jacobian", unknown, ("wrt", "mode", "batched", "jit", "parallel"))
    return Jacobian(composable(f, outer="jacobian"), wrt, mode, batched, jit, parallel)


class Hessian:
    """`hessian(f, wrt)`: call it like `f`; `s2sad.source` shows the batched forward sweep."""

    def __init__(self, f, wrt=0, batched=True):
        self.gradient = Transformed(f, wrt, "grad")
        if self.gradient.wrt_tuple or len(self.gradient.wrt) != 1:
            file, line = caller()
            one = self.gradient.wrt[0] if self.gradient.wrt else 0
            raise S2SADError(
                f"hessian takes one wrt argument, not wrt={wrt!r}",
                file=file,
                line=line,
                hint=f"take the Hessian in one argument at a time (s2sad.hessian(f, wrt={one!r})"
                ", ...), in one flat array the function splits (`x, y = z[:n], z[n:]`), or, for "
                f"the blocks across the arguments, s2sad.jacobian(s2sad.grad(f, wrt={wrt!r}), "
                f"wrt={wrt!r})",
            )
        self.batched = batched
        self.last_source = None  # the batched sweep's code of the last call (`source()`)
        functools.update_wrapper(self, f)

    def _leaf(self, bound) -> str:
        """The one argument (a leaf of the generated code's) the Hessian is taken in."""
        if len(bound.wrt) != 1 or bound.layout[0][0] is not None:
            name, tree = self.gradient.wrt[0], bound.layout[0][0]
            kind = f"a {tree.kind}" if tree is not None else "a parameter tree"
            key = tree.keys[0] if tree is not None and tree.keys else None
            leaf = (
                f"{name}.{key}" if isinstance(key, str) and kind != "a dict" else f"{name}[{key!r}]"
            )
            file, line = caller()
            raise S2SADError(
                f"hessian takes one array or number argument, and '{name}' is {kind} of "
                f"{len(bound.wrt)} {'leaf' if len(bound.wrt) == 1 else 'leaves'}: s2sad does not "
                "assemble a Hessian over a tree's leaves",
                file=file,
                line=line,
                hint=f'name one leaf (s2sad.hessian(f, wrt="{leaf}")), or pass one flat '
                "array the function splits (`W, b = z[:n], z[n:]`)",
            )
        return bound.wrt[0]

    def _generated(self, bound, ranked=True):
        """The gradient code for these arguments, its name for each of f's parameters (it
        renames those spelled like s2sad's own names), and the user's data values it takes
        after them. `ranked=False`: the generic code, not specialized on the arguments' ranks,
        which keeps every copy it takes of an array's element or row (`snapshot(y[i])`,
        `dy[i].copy()`), so forward mode can read it where the ranks it has lost would leave a
        value that may be a view."""
        if ranked:
            compiled, data = self.gradient.prepared(bound)
        else:
            gradient = self.gradient
            compiled, data = transform_and_read(
                gradient.func, bound.wrt, gradient._generated_mode(), None, False, bound.trees
            )
        generated = compiled.functions[compiled.name]
        return generated, generated_names(generated, bound.signature), data

    def _forward(self, bound, second):
        """`second(generated, names, data)` for the gradient code specialized on the ranks,
        else for the generic code; a refusal of both is restated at the user's line."""
        try:
            return second(*self._generated(bound))
        except FloatNumberError:
            raise
        except S2SADError:
            pass
        generated = None
        try:
            generic = self._generated(bound, ranked=False)
            generated = generic[0]
            return second(*generic)
        except S2SADError as exc:
            raise in_users_terms(exc, generated, self.__wrapped__) from None

    def _second(self, args, kwargs):
        """The bound arguments, the user's data values the gradient code takes after them, and
        the batched forward transform of the gradient code with its own data values."""
        bound = self.gradient._bind(args, kwargs)
        ranks = tuple((name, rank_of_argument(value)) for name, value in bound.arguments.items())
        leaf = self._leaf(bound)

        def second(generated, names, data):
            arg_ranks = tuple((names[p], r) for p, r in ranks)
            forward = transform_and_read(generated, (names[leaf],), "jvp_batched", arg_ranks)
            return bound, data, names, forward

        return self._forward(bound, second)

    def __call__(self, *args, **kwargs):
        try:
            return self._hessian(args, kwargs)
        except NonScalarOutputError as exc:  # (grad_seed's words: hessian's are wanted)
            if "grad needs" not in exc.what:  # (a tuple returned: told at its return line)
                raise
            file, line = caller()
            raise NonScalarOutputError(
                exc.what.replace(
                    "grad needs", f"s2sad.hessian({self.__wrapped__.__name__}) needs"
                ).partition("; use ")[0],
                file=file,
                line=line,
                hint="a Hessian is of a scalar function: sum or pick the output (np.sum(f(x))), "
                "or take s2sad.jacobian(s2sad.jacobian(f)) for the second derivatives of every "
                "output element",
            ) from None

    def _hessian(self, args, kwargs):
        first = self.gradient._bind(args, kwargs)
        leaf = self._leaf(first)
        x = first.arguments[leaf]
        n = np.size(x)
        if self.batched and n:
            bound, data, names, (compiled, values) = self._second(args, kwargs)
            tangent = np.eye(n).reshape((n,) + np.shape(x))
            keywords = _keywords(bound, names)
            self.last_source = compiled.source
            rows = compiled.function(*bound.args, *data, tangent, *values, **keywords)[1]
            stacked = np.moveaxis(_rows(rows, n, x), 0, -1)
        else:
            bound = self.gradient._bind(args, kwargs)

            def columns(generated, names, data):
                second = JVPTransformed(generated, names[leaf], "jvp")
                keywords = _keywords(bound, names)
                return [  # (the forward transform runs at the first call)
                    np.asarray(second(*bound.args, *data, tangent=e, **keywords)[1], dtype=float)
                    for e in _basis(x)
                ]

            stacked = np.moveaxis(np.array(self._forward(bound, columns)), 0, -1)
        result = np.reshape(stacked, np.shape(x) + np.shape(x))
        if isinstance(x, np.generic):  # a NumPy scalar gets its own scalar type back
            return result.astype(np.result_type(x, np.float32))[()]
        return (
            float(result) if isinstance(x, float) else result.astype(np.result_type(x, np.float32))
        )

    def source(self, *args, **kwargs) -> str:
        """The batched forward sweep over the gradient code, for these arguments (none: the
        last call's)."""
        if not (args or kwargs):
            if self.last_source is not None:
                return self.last_source
            raise S2SADError(
                "pass the arguments, or call the Hessian first: its code depends on their ranks"
            )
        return self._second(args, kwargs)[3][0].source


def _keywords(bound, names: dict) -> dict:
    """The keyword arguments of `bound` by the generated code's names for them."""
    return {names.get(k, k): v for k, v in bound.kwargs.items()}


def hessian(f, wrt=0, batched=True, **unknown):
    """The Hessian of a scalar `f`, shaped `arg.shape + arg.shape`: forward mode applied to the
    gradient code s2sad generates (forward over reverse), in one sweep whose tangents carry the
    identity over the argument's elements (`batched=False`: one sweep per element)."""
    refuse("hessian", unknown, ("wrt", "batched"))
    return Hessian(composable(f, outer="hessian"), wrt, batched)
