"""Backend: implementation tree -> C (AVX2) -> cffi module -> call on numpy arrays."""

from .api import BenchResult, Program, compile_impl, compile_many
from .emit import generate, to_c
from .reference import flops, reference

__all__ = ["BenchResult", "Program", "compile_impl", "compile_many", "flops", "generate", "reference", "to_c"]
