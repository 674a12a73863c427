"""The registry of rewrite families: the one place that maps an action's name, a logic
file's action functor or an IR node class to the family that owns it.

Adding a family: a logic file in encodings/rules/ (included from encodings/synth.lp)
deriving `cand(S, Term)` and its children, and a module here with a `Rewrite` subclass,
registered below (or by a user's code with `register`).
"""

from __future__ import annotations

from morello_asp.errors import RuleError, ScheduleError

from .action import Action
from .base import Rewrite, split_term

_BY_NAME: dict[str, Rewrite] = {}
_BY_ATOM: dict[str, Rewrite] = {}
_BY_NODE: dict[type, Rewrite] = {}
_BY_TAG: dict[str, Rewrite] = {}


def register(fam: Rewrite) -> Rewrite:
    """Make a family known; its name, action functors and node class must be new."""
    tables: list[tuple[dict, list]] = [
        (_BY_NAME, [fam.name]),
        (_BY_ATOM, list(fam.atoms)),
        (_BY_NODE, [fam.node]),
        (_BY_TAG, [fam.node_tag]),
    ]
    for table, keys in tables:
        for k in keys:
            if k in table and table[k] is not fam:
                raise ValueError(f"rewrite family {fam.name}: {k!r} is already owned by {table[k].name}")
    _BY_NAME[fam.name] = fam
    for a in fam.atoms:
        _BY_ATOM[a] = fam
    _BY_NODE[fam.node] = fam
    _BY_TAG[fam.node_tag] = fam
    return fam


def family(name: str) -> Rewrite:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ScheduleError(f"unknown rewrite {name!r}; known: {', '.join(sorted(_BY_NAME))}") from None


def for_atom(functor: str) -> Rewrite:
    try:
        return _BY_ATOM[functor]
    except KeyError:
        raise RuleError(
            f"a logic file derived an action the engine does not know: {functor}(...); "
            f"known action terms: {', '.join(sorted(_BY_ATOM))}"
        ) from None


def for_node(node) -> Rewrite:
    try:
        return _BY_NODE[type(node)]
    except KeyError:
        raise TypeError(f"no rewrite builds a {type(node).__name__}") from None


def for_node_tag(tag: str) -> Rewrite:
    try:
        return _BY_TAG[tag]
    except KeyError:
        raise ValueError(f"unknown program node {tag!r}; known: hole, {', '.join(sorted(_BY_TAG))}") from None


def families() -> list[Rewrite]:
    return list(_BY_NAME.values())


from .move import Move  # noqa: E402
from .pipeline import PipelineFamily  # noqa: E402
from .select import Select  # noqa: E402
from .spatial_split import SpatialSplit  # noqa: E402
from .tile import Tile  # noqa: E402
from .to_accum import ToAccum  # noqa: E402

for _f in (Tile(), ToAccum(), SpatialSplit(), Move(), Select(), PipelineFamily()):
    register(_f)

__all__ = ["Action", "Rewrite", "family", "families", "for_atom", "for_node", "for_node_tag", "register", "split_term"]
