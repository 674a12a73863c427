"""The registry of rewrite families: the one place that maps an action's name, a logic
file's action functor or an IR node class to the family that owns it. The families
register themselves in morello_asp/rewrites/__init__.py (or a user's code calls
`register`); an Action finds its family here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from morello_asp.errors import RuleError, ScheduleError

if TYPE_CHECKING:
    from morello_asp.rewrites.base import Rewrite

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
