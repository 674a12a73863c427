"""morello-asp: a synthesizing compiler for tensor programs whose rewrite rules and
targets are logic programs."""
from .dtypes import Dtype
from .errors import (
    LegalityError, MorelloError, NoImplementationError, RuleError, ScheduleError, SpecError,
    SpecSyntaxError, TargetError,
)
from .ir import Alloc, Block, Impl, KernelApp, Loop, Pipeline, SpecHole
from .layout import Layout, PhysDim
from .spec import Spec, TensorSpec, parse_spec
from .target import Target, get_target
from . import schedule as _schedule  # noqa: F401  (attaches scheduling methods)
from .cost import Cost, compute_cost
from .codegen import api as _codegen_api  # noqa: F401,E402  (attaches to_c/compile/benchmark)
from .synthesis import synthesize, synthesize_all  # noqa: E402  (attaches synthesize_all)

__all__ = [
    "Alloc", "Block", "Cost", "Dtype", "Impl", "KernelApp", "Layout", "LegalityError", "Loop",
    "MorelloError", "NoImplementationError", "PhysDim", "Pipeline", "RuleError", "ScheduleError",
    "Spec", "SpecError", "SpecHole", "SpecSyntaxError", "TargetError", "TensorSpec", "Target",
    "compute_cost", "get_target", "parse_spec", "synthesize", "synthesize_all",
]
