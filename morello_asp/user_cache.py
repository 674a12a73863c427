"""The user's cache directory, $MORELLO_ASP_CACHE or ~/.cache/morello-asp: compiled
modules (codegen/build.py), the default memo tables (solver/memo/sqlite.py,
default_table) and the native target (morello_asp/native.py) live there, side by side,
with what an engine remembers between runs (solver/logic/anonymous_vars.py,
solver/proofs/catalog.py) and the built-in kinds (morello_asp/kinds/declared.py)."""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def user_cache_dir() -> Path:
    env = os.environ.get("MORELLO_ASP_CACHE")
    return Path(env or Path.home() / ".cache" / "morello-asp")


def keep(path: Path, data: str | bytes) -> None:
    """Write `data` to `path` in the cache whole or not at all (another process may read
    it meanwhile); a cache that cannot be written keeps nothing."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(tmp, path)
    except OSError:
        pass


def stamp(code: Iterable[Path], contents: Iterable[tuple[Path, bytes | None]], *versions: str) -> str:
    """A cache key for what the modules `code` build from the files `contents` (path and
    bytes, None for a missing file) under this Python and the `versions` named."""
    h = hashlib.sha256(f"{sys.version}\0{chr(0).join(versions)}\0".encode())
    for f in code:
        h.update(f"{Path(f).resolve()}\0".encode() + Path(f).read_bytes() + b"\0")
    for f, data in contents:
        h.update(f"{f}\0".encode() + (b"\0missing" if data is None else data) + b"\0")
    return h.hexdigest()


def pickled(namespace: str, key: str, build: Callable[[], T], check: Callable[[object], bool]) -> T:
    """`build()`, kept pickled in the cache under `namespace`/`key`: the key must name
    everything the value depends on (file contents, the code that builds it, versions).
    The cache is the user's own directory, trusted as Python's __pycache__ is; an entry
    that does not unpickle, or that `check` refuses, is built again."""
    path = user_cache_dir() / namespace / key
    try:
        value = pickle.loads(path.read_bytes())
        if check(value):
            return value  # check() vouched for the type
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError, ValueError):
        pass
    value = build()
    keep(path, pickle.dumps(value))
    return value
