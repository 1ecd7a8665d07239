"""Compiling generated code with Numba (`jit=True` or `jit="strict"`).

The generated source is written to a file in s2sad's cache directory, keyed by its text and
s2sad's version, and compiled from its text, so Numba's on-disk cache serves a second process
without compiling again; the directory is checked before anything in it is loaded (see "the
disk cache" below). Runtime helpers are replaced by versions Numba can
compile; a helper Numba cannot type makes compilation fail, and then `jit="strict"` raises
`JitError` naming it while `jit=True` warns and runs the Python version.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import marshal
import os
import re
import shutil
import stat
import sys
import tempfile
import threading
import types
import warnings
from pathlib import Path

from .errors import S2SADError
from .pipeline.names import defined_functions


class JitError(S2SADError):
    """Numba could not compile a generated function (`jit="strict"`)."""


class JitFallbackWarning(UserWarning):
    """`jit=True` runs the plain Python version because Numba could not compile it."""


def cache_dir() -> Path:
    """The cache directory as configured (`S2SAD_CACHE_DIR`, else the user's cache home)."""
    root = os.environ.get("S2SAD_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "s2sad"
    )
    return Path(root)


# the Numba versions of the runtime helpers (s2sad/numba_helpers.py)
_HELPERS = (Path(__file__).parent / "numba_helpers.py").read_text()
# a cached module's `njit` keeps Numba's files in s2sad's checked directory (trusted_njit)
_IMPORT = (
    "import math\n\nimport numpy as np\n\n"
    "from s2sad.numba_helpers import *  # noqa: F401,F403\n"
    "from s2sad.jit import trusted_njit as njit\n"
)


def module_text(
    source: str, name: str | None = None, embed: bool = True, constants: str = ""
) -> str:
    """`source` with each function it defines compiled by Numba, and the Numba helpers before it:
    their text (`embed`, for a standalone module) or an import of s2sad's module of them, which
    a process then compiles once for all generated functions. `constants` (source) stand between
    the helpers and the functions, whose defaults may read them. (`name` is accepted for older
    callers; every top-level function is compiled.)"""
    text = source
    tail = []
    for fn in defined_functions(source):
        text = text.replace(f"def {fn}(", f"def _{fn}_py(", 1)
        # IEEE arithmetic as NumPy's: 1 / 0 is inf (a singular point), never ZeroDivisionError
        tail.append(f'{fn} = njit(cache=True, error_model="numpy")(_{fn}_py)')
    head = _HELPERS if embed else _IMPORT
    return head + "\n\n" + constants + "\n\n" + text + "\n\n" + "\n".join(tail) + "\n"


# ----------------------------------------------------------------------------- the disk cache
#
# What s2sad loads from its cache directory is code: the generated modules, and Numba's index
# and data files, which are pickles. So the directory must be one that only this user can have
# written: owned by them, writable by no one else, and each parent owned by them or root and
# writable by no one else but for sticky ones like /tmp (or the group of a user private group).
# Where it is not, a CacheWarning says so and a private directory serves the process.
# s2sad creates the directory 0700 and its files 0600, each written under a random
# name and renamed into place. A generated module is never imported through Python's import
# system (which would run a planted `.pyc`): s2sad compiles the text it generated itself, and
# the file only gives Numba a source to stamp its cache with.


class CacheWarning(UserWarning):
    """The cache directory is not safe to load code from: a private one is used instead."""


class UntrustedPath(OSError):
    """A file or directory in the cache that someone else could have written."""


_LOAD_LOCK = threading.RLock()  # first loads of generated modules, one at a time
_PRIVATE: dict[str, Path] = {}  # configured directory refused -> this process's own one


def _me() -> int | None:
    """This process's user id (None where the system has none: Windows, whose access control
    lists s2sad does not read)."""
    return os.geteuid() if hasattr(os, "geteuid") else None


def _unsafe(st, is_kind) -> str | None:
    """Why a file or directory with status `st` may hold what someone else wrote (None: it
    cannot)."""
    if not is_kind(st.st_mode):
        return "is a symbolic link" if stat.S_ISLNK(st.st_mode) else "is not of the expected kind"
    if _me() is None:
        return None
    if st.st_uid != _me():
        return f"is owned by uid {st.st_uid}, not by this user (uid {_me()})"
    if st.st_mode & 0o022:
        return f"is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def private_dir(path: Path) -> Path:
    """`path`, created 0700 if missing, after checking that only this user can write in it."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    why = _unsafe(os.lstat(path), stat.S_ISDIR)
    if why:
        raise UntrustedPath(f"{path} {why}")
    return path


def _checked_root(configured: Path) -> Path:
    """The configured cache directory, resolved and checked with its parents."""
    root = Path(os.path.realpath(configured))
    root.parent.mkdir(parents=True, exist_ok=True)
    private_dir(root)
    for parent in root.parents if _me() is not None else ():
        st = os.stat(parent)
        # writable by others only with the sticky bit (/tmp); by the group only if it is the
        # user's own (a user private group)
        others = st.st_mode & 0o002 and not st.st_mode & stat.S_ISVTX
        group = st.st_mode & 0o020 and st.st_gid != os.getegid()
        if st.st_uid not in (0, _me()) or others or group:
            raise UntrustedPath(f"{parent}, a parent of {root}, can be changed by other users")
    private_dir(root / "numba")
    return root


def trusted_cache_root() -> Path:
    """The directory s2sad keeps compiled code in: the configured one where it is safe, else a
    private one for this process (with a CacheWarning saying why)."""
    configured = cache_dir()
    try:
        return _checked_root(configured)
    except OSError as exc:
        key = str(configured)
        if key not in _PRIVATE:
            warnings.warn(
                f"s2sad does not load code from the cache directory {configured}: {exc}. "
                "Compiled code is kept for this process only; make the directory the user's "
                "own (chmod 700), or set S2SAD_CACHE_DIR to a directory of the user's own",
                CacheWarning,
                stacklevel=_user_stacklevel(),
            )
            temp = Path(tempfile.mkdtemp(prefix="s2sad-cache-"))
            os.mkdir(temp / "numba", 0o700)
            atexit.register(shutil.rmtree, temp, True)
            _PRIVATE[key] = temp
        return _PRIVATE[key]


@contextlib.contextmanager
def atomic_write(path: Path, mode: int = 0o600):
    """A file object whose contents replace `path` whole when the block ends: written under a
    random name in the same directory (mkstemp: created new, never through a link), given
    `mode`, then renamed over `path` (which replaces a link at `path`, not its target)."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".s2sad-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            if hasattr(os, "fchmod"):  # the file itself, not whatever the name leads to now
                os.fchmod(f.fileno(), mode)
        if not hasattr(os, "fchmod"):  # pragma: no cover  (Windows: read-only or not)
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _read_private(path: Path) -> bytes | None:
    """The contents of `path` if it is a regular file only this user can have written."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if _unsafe(os.fstat(fd), stat.S_ISREG):
            return None
        return f.read()


def _short(name: str, keep: int = 40) -> str:
    """`name` cut to `keep` characters, with a hash of the whole where cut: file names stay
    within the file system's limit (255 bytes) for functions with long names."""
    if len(name) <= keep:
        return name
    return f"{name[:keep]}_{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def code_fingerprint(objects: dict) -> str:
    """A hash of the code of the functions generated code calls (`objects`: name -> object, the
    Numba dispatchers, rules and helpers it reads by name). Numba compiles a called function into
    the caller's machine code and its disk cache does not notice when that function is edited,
    so the generated module's name hashes this too: an edited callee gives a new module."""
    digest = hashlib.sha256()
    for name in sorted(objects):
        value = objects[name]
        for candidate in (value, getattr(value, "py_func", None), getattr(value, "func", None)):
            code = getattr(candidate, "__code__", None)
            if code is not None:
                try:
                    digest.update(name.encode() + marshal.dumps(code))
                except ValueError:  # a constant marshal cannot write: its repr stands in
                    digest.update(name.encode() + repr(code.co_consts).encode() + code.co_code)
    return digest.hexdigest()


def _module_for(source: str, name: str, fresh: bool = False, callees: str = ""):
    """The module of `source` compiled by Numba, its functions each compiled on first call.

    Its text is written to the checked cache directory under a name hashing the text, the
    helpers and s2sad's version (so Numba's files for it are never another code's), then
    compiled from the text itself, not read back. The module enters `sys.modules` (where Numba
    looks it up when it loads cached code) only once it has run, and one thread at a time loads.
    `fresh` first deletes Numba's cached machine code for it (it could not be loaded).
    `callees` (`code_fingerprint`) names the code of the functions it calls."""
    from . import __version__

    text = module_text(source, name, embed=False)
    key = f"{__version__}\n{_HELPERS}\n{callees}\n{text}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:20]
    module_name = f"s2sad_{_short(name)}_{digest}"
    with _LOAD_LOCK:
        if fresh:
            sys.modules.pop(module_name, None)
        elif module_name in sys.modules:
            return sys.modules[module_name]
        root = trusted_cache_root()
        path = root / f"{module_name}.py"
        if _read_private(path) != text.encode():
            with atomic_write(path) as f:
                f.write(text.encode())
        if fresh:
            for stale in (root / "numba").glob(f"{module_name}.*"):
                stale.unlink(missing_ok=True)
        module = types.ModuleType(module_name)
        module.__file__ = str(path)
        exec(compile(text, str(path), "exec"), vars(module))
        sys.modules[module_name] = module
        return module


def _numba_cache_class():
    """Numba's function cache, kept in s2sad's checked directory: its index and data files are
    written 0600 under random names, named within the file system's limits, and loaded only when
    their directory and they themselves are this user's alone. (Numba's own cache would follow
    NUMBA_CACHE_DIR or a shared __pycache__.) None where Numba's cache internals differ."""
    try:
        from numba.core import caching

        base_locator = (caching._SourceFileBackedLocatorMixin, caching._CacheLocator)
        base_impl, base_file = caching.CompileResultCacheImpl, caching.IndexDataCacheFile
        base_cache = caching.FunctionCache
    except (ImportError, AttributeError):  # pragma: no cover
        return None

    class Locator(*base_locator):
        def __init__(self, py_func, py_file):
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno
            self._cache_path = os.path.join(os.path.dirname(py_file), "numba")

        def ensure_cache_path(self):
            private_dir(Path(self._cache_path))

        def get_cache_path(self):
            return self._cache_path

    class Impl(base_impl):
        def __init__(self, py_func):  # Numba's looks for a locator; this one has its own
            self._lineno = py_func.__code__.co_firstlineno
            py_file = py_func.__code__.co_filename
            self._locator = Locator(py_func, py_file)
            qualname = _short(py_func.__qualname__.replace("<", "").replace(">", ""))
            version = f"{sys.version_info[0]}{sys.version_info[1]}{getattr(sys, 'abiflags', '')}"
            self._filename_base = f"{Path(py_file).stem}.{qualname}-{self._lineno}.py{version}"

    class DataFile(base_file):
        def _open_for_write(self, filepath):
            return atomic_write(Path(filepath))

    class Cache(base_cache):
        _impl_class = Impl

        def __init__(self, py_func):
            super().__init__(py_func)
            self._cache_file = DataFile(
                self._cache_path, self._impl.filename_base, self._impl.locator.get_source_stamp()
            )

        def load_overload(self, sig, target_context):
            if not _numba_files_private(Path(self._cache_path), self._impl.filename_base):
                return None
            return super().load_overload(sig, target_context)

        def save_overload(self, sig, data):
            try:
                super().save_overload(sig, data)
            except OSError:  # not kept on disk (unsafe directory, disk full): it still runs
                pass

    return Cache


def _numba_files_private(directory: Path, base: str) -> bool:
    """Whether Numba may read its files for `base` in `directory`: the directory is this user's
    alone, and so is each file (one that is not is deleted, so it is compiled again)."""
    try:
        if _unsafe(os.lstat(directory), stat.S_ISDIR):
            return False
        for entry in os.scandir(directory):
            if entry.name.startswith(base + ".") and _unsafe(
                entry.stat(follow_symlinks=False), stat.S_ISREG
            ):
                os.unlink(entry.path)
    except OSError:
        return False
    return True


_CACHE_CLASS = []


def trusted_njit(cache: bool = False, **options):
    """`numba.njit` for s2sad's cached modules: with `cache`, Numba's files are kept by
    `_numba_cache_class`'s rules (or not kept, where Numba's internals differ)."""
    from numba import njit

    def build(py_func):
        dispatcher = njit(**options)(py_func)
        if cache:
            if not _CACHE_CLASS:
                _CACHE_CLASS.append(_numba_cache_class())
            if _CACHE_CLASS[0] is not None:
                dispatcher._cache = _CACHE_CLASS[0](py_func)
        return dispatcher

    return build


def _user_stacklevel() -> int:
    """The stack level of the first caller outside s2sad, for warnings to point at."""
    here = os.path.dirname(__file__) + os.sep  # the s2sad package and its subpackages
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(here):
        frame, level = frame.f_back, level + 1
    return level


class Jitted:
    """The functions of a generated source compiled by Numba on their first call, or their
    Python fallbacks."""

    def __init__(self, compiled):
        self.compiled = compiled
        self.namespace = None
        self.failed = {}  # function name -> the exception Numba raised for it
        self.module_failed = None
        self.reloaded = False
        self.lock = threading.Lock()

    @classmethod
    def of(cls, compiled) -> "Jitted":
        """`compiled`'s one Jitted, made by the first thread to ask."""
        with _LOAD_LOCK:
            if compiled.jitted is None:
                compiled.jitted = cls(compiled)
            return compiled.jitted

    def __call__(self, args, strict: bool, name: str | None = None, what: str | None = None):
        """Run the compiled `name` (the main function by default) on `args`. `what` names the
        user's transform in messages ("s2sad.grad(f, jit=True)")."""
        name = name or self.compiled.name
        if self.namespace is None and self.module_failed is None:
            with self.lock:
                if self.namespace is None and self.module_failed is None:
                    self.load()
        failed = self.module_failed or self.failed.get(name)
        if failed is None:
            try:
                return self.namespace[name](*args)
            except Exception as exc:
                if _from_numba_cache(exc) and not self.reloaded:
                    # a damaged cache file: delete it and compile again, trusting nothing
                    with self.lock:
                        if not self.reloaded:
                            self.reloaded = True
                            self.load(fresh=True)
                    return self(args, strict, name, what)
                if not _is_numba_error(exc):
                    raise
                self.failed[name] = failed = exc
        return self.fallback(name, failed, args, strict, what)

    def load(self, fresh: bool = False):
        try:
            callees = code_fingerprint(self.compiled.globals)
            module = _module_for(self.compiled.source, self.compiled.name, fresh, callees)
            namespace = vars(module)
            for key, value in self.compiled.globals.items():
                if namespace.setdefault(key, value) is not value:
                    # the same code text calling another function under this name: Numba has
                    # compiled the first one into it (data never gets here: it is an argument)
                    raise JitError(
                        f"'{key}' names another object than in an earlier compile of the same "
                        "generated code in this process",
                        hint="give the two functions different names",
                    )
            self.namespace = namespace
        except Exception as exc:  # the module itself failed: report like a typing error
            self.module_failed = exc

    def fallback(self, name: str, failed, args, strict: bool, what: str | None = None):
        where = f" (its generated function {name})" if what else ""
        message = f"Numba cannot compile {what or name}{where}: {_reason(failed)}"
        if strict:
            raise JitError(
                message,
                hint="use jit=True to fall back to Python, or keep to "
                "operations Numba supports in nopython mode",
            )
        warnings.warn(
            message + "; running the Python version",
            JitFallbackWarning,
            stacklevel=_user_stacklevel(),
        )
        return self.compiled.functions.get(name, self.compiled.function)(*args)


_TELLING = (
    "Untyped global name",
    "NameError",
    "No implementation of function",
    "Unknown attribute",
    "Cannot determine Numba type",
    "Invalid use of",
    "Cannot unify",
    "Cannot infer the type",
    "not supported",
    "scipy",
)


def _reason(exc) -> str:
    """The line of Numba's message that names the operation, and the generated line it was at."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    reason = next(
        (line for line in lines if any(t in line for t in _TELLING)),
        lines[0] if lines else type(exc).__name__,
    )
    where = next(
        (
            lines[i + 1]
            for i, line in enumerate(lines[:-1])
            if line.startswith("File ") and "line" in line
        ),
        "",
    )
    return reason[:240] + (f" (at `{where[:120]}`)" if where and not where.startswith("<") else "")


def _from_numba_cache(exc) -> bool:
    """Whether `exc` was raised while Numba read its on-disk cache (a truncated or foreign
    index or data file: unpickling errors of every kind)."""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.replace("\\", "/").endswith("numba/core/caching.py"):
            return True
        tb = tb.tb_next
    return False


def _is_numba_error(exc) -> bool:
    """A failure to compile: Numba's own errors, the ImportError its linear algebra raises
    while compiling when SciPy is missing ("scipy 0.16+ is required for linear algebra"), and
    any exception raised inside Numba while it compiles (UnsupportedBytecodeError, which is no
    NumbaError, NotImplementedError from its lowering, OSError from its cache). An exception the
    compiled code raises as it runs has no frame in Numba, and is the user's, except
    NotImplementedError: that is Numba's run-time library declining what NumPy does (`reshape`
    of a non-contiguous array), and Python mode runs it."""
    try:
        from numba.core.errors import NumbaError
    except ImportError:  # pragma: no cover
        return False
    if isinstance(exc, (NumbaError, NotImplementedError)) or (
        isinstance(exc, ImportError) and "scipy" in str(exc).lower()
    ):
        return True
    tb = exc.__traceback__
    while tb is not None:
        if _in_numba(tb.tb_frame.f_code.co_filename):
            return True
        tb = tb.tb_next
    return False


def _in_numba(filename: str) -> bool:
    import numba

    return filename.startswith(os.path.dirname(numba.__file__) + os.sep)


__all__ = ["JitError", "JitFallbackWarning", "Jitted", "cache_dir", "np"]
