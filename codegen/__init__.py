"""Backend: implementation tree -> C (AVX2) -> cffi module -> call on numpy arrays.

The names below are imported on first use (PEP 562): every `morello-asp` command imports
this package for its command-line module (morello_asp/cli/programs.py), and numpy and cffi are a large
part of a warm `query`, which uses neither. The reference semantics are the submodule
`reference` (morello_asp.codegen.reference.reference)."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from morello_asp.codegen.api import BenchResult, Program, compile_impl, compile_many
    from morello_asp.codegen.emit import generate, to_c
    from morello_asp.codegen.reference import flops

_FROM = {
    "BenchResult": ".api",
    "Program": ".api",
    "compile_impl": ".api",
    "compile_many": ".api",
    "generate": ".emit",
    "to_c": ".emit",
    "flops": ".reference",
}

__all__ = ["BenchResult", "Program", "compile_impl", "compile_many", "flops", "generate", "to_c"]


def __getattr__(name: str):
    module = _FROM.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(module, __name__), name)
