"""morello-asp: a synthesizing compiler for tensor programs whose rewrite rules and
targets are logic programs."""

# First, before anything else loads: Ctrl-C while the command starts is one line, exit 130.
from morello_asp import cli_signals  # noqa: F401  # isort: skip

from morello_asp import schedule
from morello_asp.cost import Cost, compute_cost
from morello_asp.dtypes import Dtype
from morello_asp.errors import (
    LegalityError,
    MorelloError,
    NoImplementationError,
    RuleError,
    ScheduleError,
    SpecError,
    SpecSyntaxError,
    TargetError,
)
from morello_asp.graph import program_graph, write_graph
from morello_asp.ir import Alloc, Block, Impl, KernelApp, Loop, SpecHole
from morello_asp.layout import Layout, PhysDim
from morello_asp.ports import PORTS
from morello_asp.printer import listing
from morello_asp.rewrites import Action
from morello_asp.solver.precompute.driver import Grid, precompute
from morello_asp.spec import Spec, TensorSpec, parse_spec
from morello_asp.synthesis import synthesize, synthesize_all
from morello_asp.target import Target, get_target

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


# The core objects' user methods (morello_asp/ports.py: spec.tile, impl.compile, ...),
# plugged in here, above every layer. Codegen loads numpy and cffi, which a `query`
# never needs: it is imported on a program's first compile.
def _compile(impl, target, rules):
    from morello_asp.codegen.api import compile_impl  # heavy (numpy, cffi): on first use

    return compile_impl(impl, target, rules)


def _to_c(impl, target, rules):
    from morello_asp.codegen.emit import to_c  # heavy (numpy): on first use

    return to_c(impl, target, rules)


def _standalone_c(impl, target, rules):
    from morello_asp.codegen.standalone import standalone_c  # heavy (numpy): on first use

    return standalone_c(impl, target, rules)


PORTS.schedule = schedule
PORTS.synthesize = synthesize
PORTS.synthesize_all = synthesize_all
PORTS.compute_cost = compute_cost
PORTS.listing = listing
PORTS.program_graph = program_graph
PORTS.write_graph = write_graph
PORTS.compile = _compile
PORTS.to_c = _to_c
PORTS.standalone_c = _standalone_c
