"""A rewrite as a value: the family's name and its arguments.

Actions are what the memo table stores and what a user's scheduling call asks for; all
that depends on the family (text, JSON, decoding, the IR node it builds) is looked up
in the registry (morello_asp/rewrites/registry.py), never by comparing names here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from morello_asp.rewrites.registry import family


@dataclass(frozen=True)
class Action:
    """A rewrite: `name` is its family (tile, to_accum, move, select, ...), `args` the
    family's arguments (see each family's module for their meaning)."""

    name: str
    args: tuple[Any, ...] = ()

    @property
    def family(self):
        return family(self.name)

    def text(self) -> str:
        return self.family.text(self)

    def __str__(self) -> str:
        return self.text()

    def to_json(self) -> dict:
        return {"rewrite": self.name, **self.family.args_to_json(self)}

    @staticmethod
    def from_json(obj: dict, ranks: tuple[int, ...] = ()) -> Action:
        """Inverse of to_json; `ranks` (operand ranks of the spec) parses layouts."""
        return family(obj["rewrite"]).args_from_json(obj, ranks)
