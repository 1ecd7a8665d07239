"""The disk cache s2sad loads compiled code from, and the checks that make it safe to.

What s2sad loads from its cache directory is code: the generated modules, and Numba's index
and data files, which are pickles. So the directory must be one that only this user can have
written: owned by them, writable by no one else, and each parent owned by them or root and
writable by no one else but for sticky ones like /tmp (or the group of a user private group).
Where it is not, a CacheWarning says so and a private directory serves the process.
s2sad creates the directory 0700 and its files 0600, each written under a random
name and renamed into place. A generated module is never imported through Python's import
system (which would run a planted `.pyc`): s2sad compiles the text it generated itself, and
the file only gives Numba a source to stamp its cache with.

Consumes the configured directory (`S2SAD_CACHE_DIR`); produces checked paths, atomic writes,
and `trusted_njit`, whose Numba cache keeps to these rules.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import importlib
import os
import re
import shutil
import stat
import sys
import tempfile
import warnings
from pathlib import Path


def cache_dir() -> Path:
    """The cache directory as configured (`S2SAD_CACHE_DIR`, else the user's cache home)."""
    root = os.environ.get("S2SAD_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "s2sad"
    )
    return Path(root)


class CacheWarning(UserWarning):
    """The cache directory is not safe to load code from: a private one is used instead."""


class UntrustedPath(OSError):
    """A file or directory in the cache that someone else could have written."""


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
                stacklevel=user_stacklevel(),
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


def read_private(path: Path) -> bytes | None:
    """The contents of `path` if it is a regular file only this user can have written."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if _unsafe(os.fstat(fd), stat.S_ISREG):
            return None
        return f.read()


def short_name(name: str, keep: int = 40) -> str:
    """`name` cut to `keep` characters, with a hash of the whole where cut: file names stay
    within the file system's limit (255 bytes) for functions with long names."""
    if len(name) <= keep:
        return name
    return f"{name[:keep]}_{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def numba_opt() -> str:
    """Numba's optimisation level, read from its configuration (imported here: a key taken
    before the process's first compile must equal one taken after it). Numba's cache files do
    not record it, so the keys of s2sad's compiled code and of its helpers' include it."""
    return f"opt={int(importlib.import_module('numba.core.config').OPT)}"


def _numba_cache_class():
    """Numba's function cache, kept in s2sad's checked directory: its index and data files are
    written 0600 under random names, named within the file system's limits, and loaded only when
    their directory and they themselves are this user's alone. (Numba's own cache would follow
    NUMBA_CACHE_DIR or a shared __pycache__.) None where Numba's cache internals differ."""
    try:
        from numba.core import caching  # (Numba loads on first use: s2sad imports fast)

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
            qualname = short_name(py_func.__qualname__.replace("<", "").replace(">", ""))
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
    from numba import njit  # (Numba loads on first use: s2sad imports fast)

    def build(py_func):
        dispatcher = njit(**options)(py_func)
        if cache:
            if not _CACHE_CLASS:
                _CACHE_CLASS.append(_numba_cache_class())
            if _CACHE_CLASS[0] is not None:
                dispatcher._cache = _CACHE_CLASS[0](py_func)
        return dispatcher

    return build


def user_stacklevel() -> int:
    """The stack level of the first caller outside s2sad, for warnings to point at: not in the
    package, nor in code it generated (`<s2sad checked_grad_f of ...>`, a checkpointed loop's
    segment calling its compiled form), which the user never sees."""
    here = os.path.dirname(__file__) + os.sep  # the s2sad package and its subpackages
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith((here, "<s2sad")):
        frame, level = frame.f_back, level + 1
    return level


def quiet_performance_hints(root: Path) -> None:
    """Numba's NumbaPerformanceWarning on generated code (`'@' is faster on contiguous arrays`,
    for a strided view the user passed or the code slices) points at a cache file under `root`
    the user never wrote and can do nothing about there: not shown. (A filter on those files'
    module names alone, added where missing, as after a `warnings.catch_warnings()` block that
    held the first; the user's own Numba code keeps its warnings.)"""
    from numba.core.errors import NumbaPerformanceWarning  # (Numba loads on first use)

    pattern = re.escape(os.path.join(str(root), "s2sad_"))
    for action, _, category, module, _ in warnings.filters:
        if category is NumbaPerformanceWarning and getattr(module, "pattern", None) == pattern:
            return
    warnings.filterwarnings("ignore", category=NumbaPerformanceWarning, module=pattern)
