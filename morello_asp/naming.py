"""Kernel and kind names: CamelCase in Python and listings, snake_case atoms in logic
files; a Compose's name lists its components (morello_asp/kinds/compose.py)."""

from __future__ import annotations

import functools
import re

from morello_asp.errors import SpecError

_COMPOSE = re.compile(r"^Compose\(\((.*)\)\)(?:@(\d+))?$")


@functools.cache
def snake(name: str) -> str:
    if is_compose_name(name):  # Compose((Softmax2, Matmul)) -> compose__softmax2__matmul
        return _compose_snake(name)
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


@functools.cache
def camel(name: str) -> str:
    if name.startswith("compose__"):
        return _compose_camel(name)
    return "".join(p.capitalize() for p in name.split("_"))


def compose_name(components, rank: int | None = None) -> str:
    """`Compose((Softmax2, Matmul))`; with `@R` when no component fixes the rank."""
    return f"Compose(({', '.join(components)}))" + (f"@{rank}" if rank is not None else "")


def parse_compose_name(name: str) -> tuple[tuple[str, ...], int | None] | None:
    """(component names, rank or None) of a Compose's name; None for another name."""
    m = _COMPOSE.match(name)
    if not m:
        return None
    return tuple(p.strip() for p in m.group(1).split(",")), int(m.group(2)) if m.group(2) else None


def is_compose_name(name: str) -> bool:
    return name.startswith("Compose((")


def _compose_snake(name: str) -> str:
    """The logic files' atom: compose__softmax2__matmul (compose__..__r2 with a rank)."""
    parsed = parse_compose_name(name)
    if parsed is None:
        raise SpecError(f"not a Compose kind: {name!r}")
    comps, rank = parsed
    return "compose__" + "__".join(snake(c) for c in comps) + (f"__r{rank}" if rank is not None else "")


def _compose_camel(atom: str) -> str:
    parts = atom.split("__")[1:]
    rank = None
    if parts and re.fullmatch(r"r\d+", parts[-1]):
        rank = int(parts.pop()[1:])
    return compose_name([camel(p) for p in parts], rank)
