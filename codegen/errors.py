"""Codegen's error classes live in morello_asp.errors; re-exported here for imports."""

from morello_asp.errors import CodegenError, CompileError  # noqa: F401
