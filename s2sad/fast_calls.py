"""The lean call of a jitted `grad` or `value_and_grad` whose arguments are of the kinds of a
planned call (call_plans.py): one generated Python function per kind that goes from the
arguments to the Numba dispatcher and back.

A small gradient in a Python loop spends most of its call around the compiled code: the planned
path (`Transformed._planned`, `Jitted.__call__`, `Plan.retype`, `grad_seed`, `owned_gradients`)
ran about 25 Python functions a call, 5-12 µs warm, and 120-290 µs where the caches are cold (a
benchmark's rounds in between), against 0.2 µs and 16-25 µs for `numba.njit`'s dispatch. What
those functions decide from the kinds of the arguments alone is decided here once, when the
function is made, from the signature Numba compiled: the output's kind (a float: grad_seed has
nothing to refuse), each gradient's Python type (a Python float stays one, a NumPy number is
made one), which gradients are arrays and so need the memory check. What can change between
calls of one kind is still checked at each: the function's code and the rules' version, the
user's data read now (and its kinds), the Jitted's state (a reload, a fallback, broadcasting
shapes), each array gradient's shape and the memory it shares with the arguments, the data and
the gradients before it (`np.may_share_memory`: a copy where it does). Anything else, and any
exception from the compiled code, goes back to the planned path, which decides, raises or warns
as before.
"""

from __future__ import annotations

import numpy as np

from . import workspace
from .call_plans import ANEW, signature_key
from .python_dtypes import NARROW, any_dtype
from .rules.pools import POOLED_BYTES
from .rules.registry import VERSION


def fast_call(owner, plan, args, values):
    """The generated call for `owner`'s (a Transformed's) plan of a call of these plain positional
    `args` with the user's data `values` read now, or None where it has no lean form (a plan of
    trees, no compiled route kept for the kinds, a result of a kind not listed above)."""
    compiled, code, wrt, ranks, last, template = plan
    jitted = compiled.jitted
    full = (*args, *values)
    kinds = signature_key(full)
    found = jitted.plans.get((compiled.name, kinds)) if kinds is not None else None
    if template is not None or found is None:
        return None
    if found.namespace is not jitted.namespace or getattr(found, "returns", None) is None:
        return None
    finishes = _finishes(found.returns, args, wrt, len(wrt) > 1)
    if finishes is None:
        return None
    compiled.read(owner.func, None)  # (makes its reader, which the call then runs itself)
    env = {
        "ANEW": ANEW,
        "owner": owner,
        "f": owner.func,
        "CODE": code,
        "RULES": compiled.rules_version,
        "VERSION": VERSION,
        "read": compiled._reader,
        "J": jitted,
        "NS": found.namespace,
        "D": found.dispatcher,
        "PLAN": found,
        "WRT": wrt,
        "RANKS": ranks,
        "LAST": last,
        "MSM": np.may_share_memory,
        "MI": _mem_info(),
        "fp": _fingerprint(),
        "NP64": np.float64,
        "NP32": np.float32,
    }
    names = [f"a{k}" for k in range(len(args))]
    checks = []
    for k, n in enumerate(names):
        env[f"T{k}"], env[f"F{k}"] = kinds[0][k], kinds[1][k]
        checks.append(f"type({n}) is T{k} and fp({n}) == F{k}")
    data = [f"v{k}" for k in range(len(values))]
    data_checks = []
    for k, n in enumerate(data):
        env[f"VT{k}"], env[f"VF{k}"] = kinds[0][len(args) + k], kinds[1][len(args) + k]
        data_checks.append(f"type({n}) is VT{k} and fp({n}) == VF{k}")
    lines = [
        "def call(args):",
        f"    if len(args) != {len(args)}:",
        "        return ANEW",
        f"    {_unpacked(names)} = args",
        f"    if not ({' and '.join(checks)}):",
        "        return ANEW",
        "    if f.__code__ is not CODE or VERSION[0] != RULES:",
        "        return ANEW  # edited, or a rule registered since: transformed again",
        "    values = read(f, None)",
        "    if values is None:",
        "        return ANEW  # the user's helpers or names changed: transformed again",
    ]
    if data:
        lines += [
            f"    {_unpacked(data)} = values",
            f"    if not ({' and '.join(data_checks)}):",
            "        return ANEW",
        ]
    else:
        lines += ["    if values:", "        return ANEW"]
    called = ", ".join(names + data)
    lines += [
        "    if J.namespace is not NS or J.module_failed is not None or J.broadcast or J.misfits:",
        "        return ANEW  # reloaded, failed, or shapes that take another form",
        "    try:",
    ]
    if found.pool is None:
        lines.append(f"        result = D({called})")
    else:  # (as Plan.pool_for: the workspace where the arrays are large)
        env["WS"], env["POOL"], env["POOLED_BYTES"] = workspace, found.pool, POOLED_BYTES
        size = " + ".join(f"{(names + data)[i]}.nbytes" for i in found.sized) or "0"
        lines += [
            f"        if WS.ENABLED and {size} >= POOLED_BYTES:",
            f"            result = POOL.call(D, ({called},))[0]",
            "        else:",
            f"            result = D({called})",
        ]
    lines += [
        "    except Exception:  # noqa: BLE001  (the planned path runs it again, and raises)",
        "        owner._fast = None",
        "        return ANEW",
        "    owner.last_ranks, owner._last = RANKS, LAST",
    ]
    lines += _finish_lines(finishes, names, data, owner, args, values, wrt)
    text = "\n".join(lines)
    exec(text, env)
    env["call"].text = text  # (for reading: tests and profiles)
    return env["call"]


def _unpacked(names: list) -> str:
    return ", ".join(names) + ("," if len(names) == 1 else "")


def _fingerprint():
    from numba._dispatcher import compute_fingerprint  # (loaded: a plan exists)

    return compute_fingerprint


def _mem_info():
    from numba.core.runtime._nrt_python import _MemInfo  # (what Numba's arrays are views of)

    return _MemInfo


def _finishes(returns, args, wrt, several: bool):
    """How each gradient comes back, from the compiled return type (`(kind or value,
    gradient or (gradients...))`): "as is" (a Python float for a Python float), "NP64" or
    "NP32" (a NumPy number's type: the input's), "array" (an array of the input's dtype and
    rank); None where one is none of these, or the output is not a float. (As `_conform` makes
    them: the NumPy number's rounding is the same from either width.)"""
    from numba.core import types
    from numba.np.numpy_support import from_dtype

    parts = getattr(returns, "types", None)
    if parts is None or len(parts) != 2 or not isinstance(parts[0], types.Float):
        return None
    grads = parts[1].types if several else (parts[1],)
    if several and len(grads) != len(wrt):
        return None
    out = _Finishes()
    out.value_float32 = parts[0] == types.float32
    for i, t in zip(wrt, grads):
        x = args[i]
        if type(x) is float and isinstance(t, types.Float):  # (Numba boxes any as a float)
            out.append("as is")
        elif type(x) in (np.float64, np.float32) and isinstance(t, types.Float):
            out.append("NP64" if type(x) is np.float64 else "NP32")
        elif (
            type(x) is np.ndarray
            and isinstance(t, types.Array)
            and t.mutable
            and t.ndim == x.ndim
            and t.dtype == from_dtype(x.dtype)
        ):
            out.append("array")
        else:
            return None
    return out


class _Finishes(list):
    """(each gradient's finish, and whether the value is a float32)"""

    value_float32 = False


def _finish_lines(finishes, names, data, owner, args, values, wrt) -> list[str]:
    """The gradients made the caller's own (as conform.owned_gradients: an array of the input's
    shape, sharing memory with no argument, datum or gradient before it), and what is returned."""
    several = len(wrt) > 1
    grads = [f"g{k}" for k in range(len(wrt))]
    lines = [f"    {_unpacked(grads) if several else grads[0]} = result[1]"]
    given = [n for n, a in zip(names + data, (*args, *values)) if type(a) is np.ndarray]
    made = []  # the array gradients before
    if given and "array" in finishes:
        lines.append(f"    owned = {' and '.join(f'{o}.flags.owndata' for o in given)}")
    for g, how, i in zip(grads, finishes, wrt):
        if how in ("NP64", "NP32"):
            lines.append(f"    {g} = {how}({g})")
        if how != "array":
            continue
        lines += [
            f"    if {g}.shape != {names[i]}.shape:",
            "        return owner._planned_result(PLAN.retype(result), args, values, WRT)",
        ]
        if given or made:
            # memory Numba allocated (its MemInfo made from no Python object) is no argument's
            # that owns its memory, nor a gradient's of another allocation: np.may_share_memory
            # asks about the rest
            fresh = [f"type({g}.base) is MI", f"{g}.base.parent is None"] + ["owned"] * bool(given)
            fresh += [f"(type({m}.base) is not MI or {m}.base.data != {g}.base.data)" for m in made]
            shared = " or ".join(f"MSM({g}, {o})" for o in given + made)
            lines += [
                f"    if not ({' and '.join(fresh)}) and ({shared}):",
                f"        {g} = {g}.copy()",
            ]
        made.append(g)
    returned = f"({_unpacked(grads)})" if owner.wrt_tuple else grads[0]
    if owner.mode == "grad":
        return lines + [f"    return {returned}"]
    value = "NP32" if finishes.value_float32 else "NP64"
    lines.append(f"    value = {value}(result[0])")
    if any_dtype((*args, *values), NARROW):
        # (Python mode's dtype of the value, learned once a kind: Transformed._value)
        lines.append("    value = owner._value(value, args + values, args, {})")
    return lines + [f"    return value, {returned}"]
