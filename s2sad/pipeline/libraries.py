"""Which code is an installed library's (the standard library's, site-packages'), not the user's:
s2sad inlines, compiles and writes out only the user's functions."""

from __future__ import annotations

import functools
import os
import site
import sysconfig


def _library_directories() -> tuple[str, ...]:
    """Where installed code lives: the standard library and the site-packages directories."""
    paths = sysconfig.get_paths()
    found = [paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")]
    found += list(getattr(site, "getsitepackages", list)()) + [site.getusersitepackages()]
    return tuple(dict.fromkeys(os.path.join(os.path.realpath(p), "") for p in found if p))


_LIBRARIES = _library_directories()


def is_library_code(func) -> bool:
    """Whether `func` is an installed library's (SciPy's, the standard library's), not the
    user's: s2sad never inlines it, so a call of one without a rule is refused by its name at
    the user's line, not deep inside the library."""
    return _in_libraries(func.__code__.co_filename)


@functools.lru_cache(maxsize=None)
def _in_libraries(filename: str) -> bool:
    return not filename.startswith("<") and os.path.realpath(filename).startswith(_LIBRARIES)
