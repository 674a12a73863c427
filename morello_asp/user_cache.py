"""The user's cache directory, $MORELLO_ASP_CACHE or ~/.cache/morello-asp: compiled
modules (codegen.build) and the default memo tables (solver.memo_db.default_table) live
there, side by side, with what an engine remembers between runs (solver/anonymous_vars.py,
solver/catalog_proofs.py) and the built-in kinds (morello_asp/kinds.py)."""

from __future__ import annotations

import os
from pathlib import Path


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
