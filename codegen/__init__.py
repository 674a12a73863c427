"""Backend: implementation tree -> C (AVX2) -> cffi module -> call on numpy arrays."""
from .api import BenchResult, Program, attach, compile_impl
from .emit import generate, to_c
from .reference import flops, reference

__all__ = ["BenchResult", "Program", "attach", "compile_impl", "flops", "generate", "reference", "to_c"]
