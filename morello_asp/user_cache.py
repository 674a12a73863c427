"""The user's cache directory, $MORELLO_ASP_CACHE or ~/.cache/morello-asp: compiled
modules (codegen.build) and the default memo tables (solver.memo_db.default_table) live
there, side by side."""

from __future__ import annotations

import os
from pathlib import Path


def user_cache_dir() -> Path:
    env = os.environ.get("MORELLO_ASP_CACHE")
    return Path(env or Path.home() / ".cache" / "morello-asp")
