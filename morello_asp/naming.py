"""Kernel and kind names: CamelCase in Python and listings, snake_case atoms in logic files."""

from __future__ import annotations

import functools
import re


@functools.cache
def snake(name: str) -> str:
    if name.startswith("Compose(("):  # Compose((Softmax2, Matmul)) -> compose__softmax2__matmul
        from .compose import snake_name

        return snake_name(name)
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


@functools.cache
def camel(name: str) -> str:
    if name.startswith("compose__"):
        from .compose import camel_name

        return camel_name(name)
    return "".join(p.capitalize() for p in name.split("_"))
