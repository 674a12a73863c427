"""morello-asp: a synthesizing compiler for tensor programs whose rewrite rules and
targets are logic programs."""

# First, before anything else loads: Ctrl-C while the command starts is one line, exit 130.
from . import cli_signals  # noqa: F401  # isort: skip

from .cost import Cost, compute_cost
from .dtypes import Dtype
from .errors import (
    LegalityError,
    MorelloError,
    NoImplementationError,
    RuleError,
    ScheduleError,
    SpecError,
    SpecSyntaxError,
    TargetError,
)
from .ir import Alloc, Block, Impl, KernelApp, Loop, SpecHole
from .layout import Layout, PhysDim
from .rewrites import Action
from .solver.precompute import Grid, precompute
from .spec import Spec, TensorSpec, parse_spec
from .synthesis import synthesize, synthesize_all
from .target import Target, get_target

__all__ = [
    "Action",
    "Alloc",
    "Block",
    "Cost",
    "Dtype",
    "Grid",
    "Impl",
    "KernelApp",
    "Layout",
    "LegalityError",
    "Loop",
    "MorelloError",
    "NoImplementationError",
    "PhysDim",
    "RuleError",
    "ScheduleError",
    "Spec",
    "SpecError",
    "SpecHole",
    "SpecSyntaxError",
    "TargetError",
    "TensorSpec",
    "Target",
    "compute_cost",
    "get_target",
    "parse_spec",
    "precompute",
    "synthesize",
    "synthesize_all",
]
