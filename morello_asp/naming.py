"""Kernel and kind names: CamelCase in Python and listings, snake_case atoms in logic files."""
from __future__ import annotations

import functools
import re


@functools.lru_cache(maxsize=None)
def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


@functools.lru_cache(maxsize=None)
def camel(name: str) -> str:
    return "".join(p.capitalize() for p in name.split("_"))
