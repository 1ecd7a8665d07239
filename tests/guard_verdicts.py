"""The verdicts of a jitted transform's fused guards (s2sad/fused_guards.py), without Numba: the
transform's calls are recorded and its generated code is run by Python with each guard
evaluated as compiled code evaluates it (`fusible`: float arrays of one dtype and shape,
`float_arrays`: of one float dtype, then the shape comparisons that follow it). A guard that
fails sends the call, and the later ones of those shapes, to code Numba compiles a second time.
"""

from __future__ import annotations

import ast

import numpy as np

from s2sad import jit as s2sad_jit
from s2sad.fused_guards import _is_guard


def _float_arrays(*arrays) -> bool:
    return all(
        type(a) is np.ndarray and a.dtype.kind == "f" and a.dtype == arrays[0].dtype for a in arrays
    )


def _kept_dtype(source, *arrays) -> bool:
    return _float_arrays(source) and all(
        type(a) is np.ndarray and np.result_type(source.dtype, a.dtype) == source.dtype
        for a in arrays
    )


def _fusible(*arrays) -> bool:
    return _float_arrays(*arrays) and all(a.shape == arrays[0].shape for a in arrays)


class _Verdicts(ast.NodeTransformer):
    """Each guard's test `t` as `verdict_(line, t)`."""

    def visit_If(self, node):
        self.generic_visit(node)
        if node.orelse and _is_guard(node.test):
            line = ast.Constant(node.lineno)
            node.test = ast.Call(ast.Name("verdict_", ast.Load()), [line, node.test], [])
        return node


def guard_verdicts(run, monkeypatch) -> list[tuple[str, bool]]:
    """(the guard's first line, whether it passed) of every fused guard the calls of jitted
    transforms that `run()` makes evaluate, in order; those calls run in Python."""
    calls = []

    def recorded(self, args, strict, name=None, what=None, key=None):
        name = name or self.compiled.name
        calls.append((self.compiled, name, tuple(args)))
        return self.compiled.functions.get(name, self.compiled.function)(*args)

    monkeypatch.setattr(s2sad_jit.Jitted, "__call__", recorded)
    run()
    monkeypatch.undo()
    found = []
    for compiled, name, args in calls:
        lines = compiled.source.splitlines()
        tree = ast.fix_missing_locations(_Verdicts().visit(ast.parse(compiled.source)))
        namespace = dict(compiled.function.__globals__)
        namespace.update(fusible=_fusible, float_arrays=_float_arrays, kept_dtype=_kept_dtype)
        namespace["verdict_"] = lambda line, passed: found.append((lines[line - 1], passed)) or (
            passed
        )
        exec(compile(tree, f"<{name}, guards evaluated>", "exec"), namespace)
        namespace[name](*args)
    return found
