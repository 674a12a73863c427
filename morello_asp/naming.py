"""Kernel and kind names: CamelCase in Python and listings, snake_case atoms in logic files."""

from __future__ import annotations

import functools
import re


@functools.cache
def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


@functools.cache
def camel(name: str) -> str:
    return "".join(p.capitalize() for p in name.split("_"))
