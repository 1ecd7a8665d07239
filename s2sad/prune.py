"""Pruning s2sad's disk caches: what a process no longer reads goes once unused for `KEEP_DAYS`.

Each cache keys its entries by what they depend on (s2sad's code, the versions, the function),
so a new version of any of them leaves the old entries behind: helper directories of other keys
(helper_cache.py), transforms (disk_transforms.py) and formatted code (formatted.py). An entry
a process reads is marked used (its modification time set to now); each directory is looked
through at most once per process, and what has not been used for `KEEP_DAYS` is deleted.

Concurrent processes: a directory is first renamed to a random name (one process wins; what a
process still writes there fails like a full disk, which each cache takes as "not kept"), then
deleted; a file is unlinked (a reader that opened it keeps reading it, one that comes later
misses and writes it again). Nothing is deleted that a process marked used within `KEEP_DAYS`.

Consumes cache directories; produces nothing but their pruning.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
import uuid
from pathlib import Path

KEEP_DAYS = 14
_SEEN: set[str] = set()  # directories looked through by this process
_LOCK = threading.Lock()


def _first_look(directory: Path) -> bool:
    with _LOCK:
        if str(directory) in _SEEN:
            return False
        _SEEN.add(str(directory))
        return True


def _stale(entry: os.DirEntry, now: float) -> bool:
    try:
        return now - entry.stat(follow_symlinks=False).st_mtime > KEEP_DAYS * 86400
    except OSError:
        return False


def used(path: Path) -> None:
    """Mark `path` (a file or directory of a cache) used now."""
    try:
        os.utime(path)
    except OSError:
        pass


def prune_files(directory: Path, suffix: str) -> None:
    """Delete the files of `directory` named `*suffix` unused for KEEP_DAYS (once a process)."""
    if not _first_look(directory):
        return
    now = time.time()
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    for entry in entries:
        if entry.name.endswith(suffix) and entry.is_file(follow_symlinks=False):
            if _stale(entry, now):
                try:
                    os.unlink(entry.path)
                except OSError:
                    pass


def prune_dirs(root: Path, current: str) -> None:
    """Mark `root / current` used, and delete the other directories of `root` unused for
    KEEP_DAYS (once a process)."""
    used(root / current)
    if not _first_look(root):
        return
    now = time.time()
    try:
        entries = list(os.scandir(root))
    except OSError:
        return
    for entry in entries:
        if entry.name == current or not entry.is_dir(follow_symlinks=False):
            continue
        if entry.name.startswith(".pruned-") or _stale(entry, now):
            doomed = root / f".pruned-{uuid.uuid4().hex}"
            try:
                os.rename(entry.path, doomed)  # one process wins; the others move on
            except OSError:
                continue
            shutil.rmtree(doomed, ignore_errors=True)
