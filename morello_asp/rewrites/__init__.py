"""The registry of rewrite families: the one place that maps an action's name, a logic
file's action functor or an IR node class to the family that owns it.

Adding a family: a logic file in encodings/rules/ (included from encodings/synth.lp)
deriving `cand(S, Term)` and its children, and a module here with a `Rewrite` subclass,
registered below (or by a user's code with `register`).
"""

from __future__ import annotations

from morello_asp.ir import Impl, SpecHole
from morello_asp.rewrites.action import Action
from morello_asp.rewrites.base import Rewrite, split_term
from morello_asp.rewrites.move import Move
from morello_asp.rewrites.pipeline import PipelineFamily
from morello_asp.rewrites.registry import families, family, for_atom, for_node, for_node_tag, register
from morello_asp.rewrites.select import Select
from morello_asp.rewrites.spatial_split import SpatialSplit
from morello_asp.rewrites.subsample import Subsample
from morello_asp.rewrites.tile import Tile
from morello_asp.rewrites.to_accum import ToAccum
from morello_asp.spec import Spec


def node_from_expansion(spec: Spec, exp, children: list[Impl] | None = None) -> Impl:
    """The IR node a rewrite builds, with `children` (default: open holes)."""
    kids: list[Impl] = children if children is not None else [SpecHole(c) for c in exp.children]
    return family(exp.action.name).build(spec, exp, kids)


for _f in (Tile(), ToAccum(), SpatialSplit(), Subsample(), Move(), Select(), PipelineFamily()):
    register(_f)

__all__ = [
    "node_from_expansion",
    "Action",
    "Rewrite",
    "family",
    "families",
    "for_atom",
    "for_node",
    "for_node_tag",
    "register",
    "split_term",
]
