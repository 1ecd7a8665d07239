"""black's formatting of generated code, kept on disk: black costs more than many transforms
(BA's pullback: about half a second), and a jitted function's module is the formatted text, so
without this a fresh process would format again code that an earlier one already formatted.

A file `<cache>/formatted/<hash>.py` holds the formatted text of the code whose hash, with
black's version and mode, names it; its first line is the sha256 of the rest, so a damaged file
is formatted again (and replaced). Files are written whole under a random name and renamed,
read only where diskcache.py finds them this user's alone, and pruned once unused for
`KEEP_DAYS` (prune.py). Where the directory cannot be used, black simply runs.

Consumes generated code; produces its formatted text.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import black

from .diskcache import atomic_write, private_dir, read_private, trusted_cache_root
from .pipeline.emit import format_source
from .prune import prune_files, used

# what the text depends on besides the code: black's version and the options s2sad gives it
_CODE = getattr(format_source, "__wrapped__", format_source).__code__
_MODE = f"black {black.__version__} {_CODE.co_consts!r} {_CODE.co_names!r}"


def _directory() -> Path | None:
    try:
        directory = private_dir(trusted_cache_root() / "formatted")
    except OSError:
        return None
    prune_files(directory, ".py")
    return directory


def formatted(code: str) -> str:
    """black's text of `code` (`format_source`), read from the disk cache where an earlier
    process formatted the same code with the same black."""
    key = hashlib.sha256(f"{_MODE}\n{code}".encode()).hexdigest()[:40]
    directory = _directory()
    path = directory / f"{key}.py" if directory is not None else None
    raw = read_private(path) if path is not None else None
    if raw is not None:
        digest, _, body = raw.partition(b"\n")
        if digest == hashlib.sha256(body).hexdigest().encode():
            used(path)
            return body.decode()
    text = format_source(code)
    if path is not None:
        body = text.encode()
        try:
            with atomic_write(path) as f:
                f.write(hashlib.sha256(body).hexdigest().encode() + b"\n" + body)
        except OSError:  # not kept (a full disk): formatted again next time
            pass
    return text
