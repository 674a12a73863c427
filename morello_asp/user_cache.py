"""The user's cache directory, $MORELLO_ASP_CACHE or ~/.cache/morello-asp: compiled
modules (codegen.build) and the default memo tables (solver.memo_db.default_table) live
there, side by side, with what an engine remembers between runs (solver/anonymous_vars.py,
solver/catalog_proofs.py) and the built-in kinds (morello_asp/kinds.py)."""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable
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
