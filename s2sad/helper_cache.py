"""The Numba helpers' compiled code kept on disk, so a fresh process loads them, not compiles.

Numba compiles each helper's form once per process and argument types (its overload template
jits the implementation the form returns), and a small gradient's first call is mostly that.
Here each such implementation's dispatcher gets a disk cache of s2sad's own, in
`<cache>/helpers/<key>` (`$S2SAD_CACHE_DIR`, else ~/.cache/s2sad; checked as diskcache.py
checks it): never NUMBA_CACHE_DIR or the installed package (maybe read-only), and the user's own
`numba.njit(cache=True)` functions cache where Numba puts them (its locators are untouched).

Why not `overload(..., jit_options={"cache": True})` with a cache locator of s2sad's own in
Numba's `_CacheImpl._locator_classes`: that keeps Numba's index-and-data files, and with them
(Numba 0.68) a corrupt or truncated file raising into the caller's typing (numba#10434), a full
disk failing the compile, two processes saving different signatures of one function numbering
their data files alike (an index entry can then name another signature's code), and a key
without the caller's inherited flags (`error_model`). So each form's overload template is given a jit
decorator of s2sad's (`_get_jit_decorator`, the one hook), which sets the dispatcher's cache to
`HelperCache`: one file per specialisation, named by a hash of Numba's own key (signature,
CPU, the implementation's bytecode and closure) and the caller's flags the compile inherits
(`inherited`: callers alike in those share one dispatcher, `_shared_impls`), which the file
stores and is checked against; written whole under a random name and renamed (atomic_write, 0600);
a digest checked before it is unpickled, so a damaged file is deleted and compiled again; a
file that cannot be written is simply not kept. Two processes compiling at once write the same
name with the same code, and nothing is read-modified-written.

The key of the directory (`helpers_key`) hashes the forms' code and constants as loaded
(`forms_fingerprint`: a form calling another form is covered too, since all are hashed
together), s2sad's, Python's, Numba's, llvmlite's and NumPy's versions, Numba's optimisation
level and the CPU (Numba's own index keys on the source file's timestamp only); directories of
other keys are deleted once unused for two weeks (prune.py). Where Numba's
internals differ (a name missing) the helpers are simply compiled in each process, as before.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import pickle
import re
import sys
from pathlib import Path

import llvmlite
import numba
import numpy as np
from numba.extending import overload, register_jitable

from . import version
from .diskcache import (
    atomic_write,
    cache_dir,
    numba_opt,
    private_dir,
    read_private,
    short_name,
    trusted_cache_root,
)
from .prune import prune_dirs
from .rules.helpers import forms_fingerprint

try:
    from numba.core import caching, serialize
    from numba.core.registry import cpu_target
    from numba.core.targetconfig import ConfigStack
    from numba.core.typing.templates import builtin_registry

    _CacheBase, _ImplBase, _LocatorBase = (
        caching.Cache,
        caching.CompileResultCacheImpl,
        caching._CacheLocator,
    )
except (ImportError, AttributeError):  # pragma: no cover  (another Numba: no helper cache)
    _CacheBase = _ImplBase = _LocatorBase = None

_DIGEST = 32  # bytes of sha256 before each file's pickle


def helpers_key() -> str:
    """What the helpers' machine code depends on, hashed: a directory of its own for each."""
    _, cpu, features = cpu_target.target_context.codegen().magic_tuple()
    parts = [
        f"s2sad {version.__version__}",
        f"python {sys.version}",
        f"numba {numba.__version__} llvmlite {llvmlite.__version__} numpy {np.__version__}",
        f"{numba_opt()} cpu {cpu} {features}",
        forms_fingerprint(),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:24]


# (cache directory configured, forms' fingerprint, Numba's optimisation level) -> helpers_dir()
_DIRS: dict[tuple, Path] = {}


def helpers_dir() -> Path | None:
    """The checked directory this process keeps the helpers' code in (None: none is usable).
    Checked and keyed once a process for each setting of what the key reads that can change in
    one (the directory configured, the forms' code, Numba's optimisation level), not for each
    helper built; made again if it was removed. Those of other keys (other versions, NUMBA_OPT
    levels, CPUs) go once unused for prune.KEEP_DAYS."""
    setting = (os.path.abspath(cache_dir()), forms_fingerprint(), numba_opt())
    known = _DIRS.get(setting)
    if known is not None and known.is_dir():
        return known
    try:
        root = private_dir(trusted_cache_root() / "helpers")
        _DIRS[setting] = directory = private_dir(root / helpers_key())
    except OSError:
        return None
    prune_dirs(root, directory.name)
    return directory


class _Files:
    """A compiled specialisation's file: `<form>.<hash of the key>.nbc`, holding the sha256 of
    the pickle that follows, which holds the key and Numba's reduced compile result."""

    def __init__(self, directory: Path, base: str, flags: str):
        self._directory, self._base, self._flags = directory, base, flags

    def _path(self, key) -> Path | None:
        """The file of `key`; None where its text names an object by its address (a function
        passed as an argument), which another process would name otherwise: not kept."""
        text = repr((key, self._flags))
        if " at 0x" in text:
            return None
        name = hashlib.sha256(text.encode()).hexdigest()[:24]
        return self._directory / f"{self._base}.{name}.nbc"

    def load(self, key):
        path = self._path(key)
        raw = None if path is None else read_private(path)  # (None: not this user's alone)
        if raw is None:
            return None
        body = raw[_DIGEST:]
        try:
            if hashlib.sha256(body).digest() != raw[:_DIGEST]:
                raise ValueError("digest")
            stored, data = pickle.loads(body)
        except Exception:  # damaged: compiled again, and the file replaced
            path.unlink(missing_ok=True)
            return None
        return data if stored == (key, self._flags) else None

    def save(self, key, data) -> None:
        path = self._path(key)
        if path is not None:
            body = serialize.dumps(((key, self._flags), data))
            with atomic_write(path) as f:
                f.write(hashlib.sha256(body).digest() + body)

    def flush(self) -> None:
        """(Numba's `Dispatcher` flushes only on request: each file stands alone.)"""


if _CacheBase is not None:

    class _Locator(_LocatorBase):
        """Where a helper's files are: the directory it was given, whatever the file it is
        defined in (so Numba's search of its own locators never sees it)."""

        def __init__(self, py_func, directory: Path):
            self._py_file = py_func.__code__.co_filename
            self._directory = directory

        def ensure_cache_path(self):
            private_dir(self._directory)

        def get_cache_path(self):
            return str(self._directory)

        def get_source_stamp(self):
            return None  # the directory's key covers the source

        def get_disambiguator(self):
            return ""

        @classmethod
        def from_function(cls, py_func, py_file):
            return None

    class _Impl(_ImplBase):
        def __init__(self, py_func, directory: Path):  # (Numba's searches its locators)
            self._lineno = py_func.__code__.co_firstlineno
            self._locator = _Locator(py_func, directory)
            qualname = (
                py_func.__qualname__.replace("<locals>.", "").replace("<", "").replace(">", "")
            )
            stem = Path(py_func.__code__.co_filename).stem
            self._filename_base = short_name(f"{stem}.{qualname}-{self._lineno}", 80)

        def check_cachable(self, cres):
            """Whether Numba can keep `cres` (not a form with lifted object-mode code, such as
            np.partition's): others are compiled in each process, without Numba's warning."""
            return not cres.library.has_dynamic_globals and all(x.can_cache for x in cres.lifted)

    class HelperCache(_CacheBase):
        """A helper implementation's disk cache (see the module's docstring)."""

        def __init__(self, py_func, directory: Path, flags: str):
            self._directory = directory
            super().__init__(py_func)
            self._cache_file = _Files(directory, self._impl.filename_base, flags)

        def _impl_class(self, py_func):  # (Numba's Cache builds its impl by this name)
            return _Impl(py_func, self._directory)

        def load_overload(self, sig, target_context):
            try:
                return super().load_overload(sig, target_context)
            except Exception:  # a file Numba cannot rebuild: compiled again
                return None

        def save_overload(self, sig, data):
            try:
                super().save_overload(sig, data)
            except Exception:  # not kept (a full disk, a closure Numba cannot pickle): it runs
                pass


def _cached_jit(**options):
    """Numba's jit for a form's implementation, its dispatcher caching in `helpers_dir()`."""

    def build(py_func):
        dispatcher = numba.jit(**options)(py_func)
        try:
            directory = helpers_dir()
            if directory is not None:
                # the caller's flags the compile inherits (not its bounds checks, say: never
                # the helper's)
                summary = repr(inherited(ConfigStack.top_or_none()))
                dispatcher._cache = HelperCache(py_func, directory, summary)
        except (AttributeError, TypeError):  # Numba's internals differ: compiled, not kept
            pass
        return dispatcher

    return build


def _inherited_names() -> tuple[str, ...] | None:
    """The flags a CPU compile takes from its caller where its own options leave them unset
    (Numba 0.68: nrt, fastmath, error_model, forceinline), read from Numba's own code; None
    where that cannot be read (then every flag counts)."""
    try:
        from numba.core.cpu import CPUTargetOptions

        text = inspect.getsource(CPUTargetOptions.finalize)
    except (ImportError, AttributeError, OSError, TypeError):  # pragma: no cover
        return None
    names = set(re.findall(r"inherit_if_not_set\(\s*[\"'](\w+)[\"']", text))
    return tuple(sorted(names)) if "error_model" in names else None  # (else: code not as read)


_INHERITED = _inherited_names()


def inherited(flags) -> tuple:
    """What of a caller's `flags` (Numba's ConfigStack top, or None) a helper's compile takes:
    callers that differ only in the rest (bounds checks, parallel, no wrapper) get one
    dispatcher and one file, not one each."""
    if flags is None:
        return ()
    if _INHERITED is None:  # pragma: no cover  (Numba's code unreadable: all of them)
        return (flags.summary(),)
    values = ((name, getattr(flags, name, None)) for name in _INHERITED)  # (another target's)
    # (fastmath's flags are a set: sorted, so that its text is the same in every process)
    return tuple((n, repr(sorted(v.flags) if hasattr(v, "flags") else v)) for n, v in values)


def _shared_impls(template) -> None:
    """Numba's template keeps a form's implementation (its dispatcher) by the argument types and
    the caller's whole flags: a helper called from a gradient with Numba's bounds checks and
    from one without (or from a Numba internal compiled without a wrapper) compiled twice, to
    the same code. Here one dispatcher serves callers alike in what the compile inherits."""
    get_impl, shared = template._get_impl, {}

    def _get_impl(self, args, kws):
        key = (self.context, tuple(args), tuple(kws.items()), inherited(ConfigStack.top_or_none()))
        found = shared.get(key)
        if found is None:
            found = get_impl(self, args, kws)
            if found[0] is not None:
                shared[key] = found
        return found

    template._get_impl = _get_impl


def _caching(get_jit_decorator):
    """A template's `_get_jit_decorator` that gives `_cached_jit` where the original gives
    Numba's CPU jit (another target's, CUDA's, is left as it is)."""

    def jit_decorator(template):
        jitter = get_jit_decorator(template)
        return _cached_jit if jitter is numba.jit else jitter

    return jit_decorator


def _cache_forms_of(func) -> None:
    """Give the overload template just registered for `func` the caching jit decorator (where
    Numba's internals are as expected: else it compiles in each process, as Numba does)."""
    if _CacheBase is None or os.environ.get("S2SAD_HELPER_CACHE") == "0":
        return
    value, fnty = builtin_registry.globals[-1] if builtin_registry.globals else (None, None)
    templates = getattr(fnty, "templates", ())
    if value is func and len(templates) == 1 and hasattr(templates[0], "_get_jit_decorator"):
        templates[0]._get_jit_decorator = _caching(templates[0]._get_jit_decorator)
        if _INHERITED is not None:
            _shared_impls(templates[0])


def overload_cached(stub, form) -> None:
    """`numba.extending.overload(stub)(form)`, its implementations cached on disk."""
    overload(stub)(form)
    _cache_forms_of(stub)


def jitable_cached(func) -> None:
    """`numba.extending.register_jitable(func)`, its compiled code cached on disk."""
    register_jitable(func)
    _cache_forms_of(func)
