"""The C side of a target, read from its fact files (tgt_c_* and tgt_kernel_c atoms).

Codegen asks the target, never a Python table, which headers, flags, vector types and
kernel templates to use, so a new kernel or target is a fact-file change only.
"""

from __future__ import annotations

import functools
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import clingo

from morello_asp.codegen.errors import CodegenError
from morello_asp.errors import TargetError
from morello_asp.naming import snake
from morello_asp.target import Target, as_target, get_target, rule_file


@dataclass(frozen=True)
class CTarget:
    target: Target
    headers: tuple[str, ...]
    flags: tuple[str, ...]
    vector_types: dict = field(default_factory=dict)  # (dtype, bytes) -> C type
    prefixes: dict = field(default_factory=dict)  # bytes -> intrinsic prefix
    templates: dict = field(default_factory=dict)  # (kernel, dtype) -> template text
    compiler: str = ""  # tgt_c_compiler/1 ("" : $CC or gcc)
    run_mode: str = "inprocess"  # tgt_run_mode/1: inprocess | standalone
    emulator: tuple[str, ...] = ()  # tgt_run_emulator/1, split into words
    cpu_flags: tuple[str, ...] = ()  # tgt_cpu_flag/1
    c_ops: dict = field(default_factory=dict)  # tgt_c_op/3: (operator, dtype) -> template
    c_consts: dict = field(default_factory=dict)  # tgt_c_const/3: (constant, dtype) -> C text
    kernel_headers: dict = field(default_factory=dict)  # tgt_c_kernel_header/2: kernel -> headers it needs
    helpers: dict = field(default_factory=dict)  # tgt_c_helper/2: name -> C code (functions kernels call)
    kernel_helpers: dict = field(default_factory=dict)  # tgt_c_kernel_helper/2: kernel -> helper names
    prefetch: dict = field(default_factory=dict)  # tgt_c_prefetch/3: level -> (min loop bytes, one line's C)

    @property
    def native(self) -> bool:
        return not self.emulator

    @property
    def compiler_command(self) -> str:
        """The compiler to run: $CC overrides the target's for native targets."""
        if self.native and os.environ.get("CC"):
            return os.environ["CC"]
        return self.compiler or os.environ.get("CC", "gcc")

    def missing_cpu_flags(self) -> list[str]:
        """The target's CPU flags this machine lacks (none for an emulated target)."""
        if not self.native:
            return []
        have = cpu_flags()
        return [f for f in self.cpu_flags if f not in have]

    def cannot_run(self) -> str:
        """Why this machine cannot run the target's programs, or "" if it can."""
        if shutil.which(self.compiler_command) is None:
            return f"C compiler {self.compiler_command} not found on PATH"
        if self.emulator and shutil.which(self.emulator[0]) is None:
            return f"emulator {self.emulator[0]} not found on PATH"
        missing = self.missing_cpu_flags()
        if missing:
            return f"this CPU lacks {', '.join(missing)} (not in the flags of /proc/cpuinfo)"
        return ""

    def template(self, kernel: str, dtype: str) -> str:
        k = snake(kernel)
        text = _for_dtype(self.templates, k, dtype)
        if text is None:
            raise CodegenError(
                f"target {self.target.name} has no C for kernel {kernel} on {dtype}: add "
                f'tgt_kernel_c({k}, {dtype}, "...") (or dtype `any`) to its fact files'
            )
        return text

    def c_op(self, op: str, dtype: str) -> str:
        text = _for_dtype(self.c_ops, op, dtype)
        if text is None:
            raise CodegenError(
                f"target {self.target.name} has no C for operator {op} on {dtype}: add "
                f'tgt_c_op({op}, {dtype}, "...") to its fact files'
            )
        return text

    def c_const(self, c, dtype: str) -> str:
        if isinstance(c, int):
            return str(c)
        try:
            return self.c_consts[(c, dtype)]
        except KeyError:
            raise CodegenError(
                f"target {self.target.name} has no C for constant {c} on {dtype}: add "
                f'tgt_c_const({c}, {dtype}, "...") to its fact files'
            ) from None

    def vector_type(self, dtype: str, nbytes: int) -> str:
        try:
            return self.vector_types[(dtype, nbytes)]
        except KeyError:
            raise CodegenError(
                f"target {self.target.name} has no tgt_c_vector_type({dtype}, {nbytes}, _) fact"
            ) from None

    def prefix(self, nbytes: int) -> str:
        try:
            return self.prefixes[nbytes]
        except KeyError:
            raise CodegenError(f"target {self.target.name} has no tgt_c_intrinsic_prefix({nbytes}, _) fact") from None


@functools.cache
def cpu_flags() -> frozenset[str]:
    """The flags of this CPU (the `flags` line of /proc/cpuinfo; empty where there is none)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, val = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(val.split())
    return frozenset()


def _val(s: clingo.Symbol):
    if s.type == clingo.SymbolType.Number:
        return s.number
    if s.type == clingo.SymbolType.String:
        return s.string
    return str(s)


def get_ctarget(target: str | Target | None = None, rules=()) -> CTarget:
    """The C side of a target (a name, an entry file or a Target; None: the default),
    plus kernels defined in extra rule files."""
    tgt = as_target(target)
    return _ctarget(tgt.key, tuple(str(rule_file(r)) for r in rules or ()))


@functools.cache
def _ctarget(key: tuple[str, ...], rules: tuple[str, ...]) -> CTarget:
    tgt = get_target(key[0], key[1:])
    name = tgt.name
    ctl = clingo.Control(["--warn=none"])
    try:
        for f in (*tgt.files, *rules):
            ctl.load(str(f))
        ctl.ground([("base", [])])
    except RuntimeError as e:
        raise TargetError(f"cannot load target {name}: {e}") from None
    rows: dict[str, list] = {}
    for a in ctl.symbolic_atoms:
        if a.symbol.name.startswith(("tgt_c_", "tgt_run_", "tgt_cpu_")) or a.symbol.name == "tgt_kernel_c":
            rows.setdefault(a.symbol.name, []).append(tuple(_val(x) for x in a.symbol.arguments))
    return CTarget(
        target=tgt,
        headers=tuple(sorted(h for (h,) in rows.get("tgt_c_header", []))),
        flags=tuple(sorted(f for (f,) in rows.get("tgt_c_flag", []))),
        vector_types={(str(d), b): t for d, b, t in rows.get("tgt_c_vector_type", [])},
        prefixes={b: p for b, p in rows.get("tgt_c_intrinsic_prefix", [])},
        templates={(str(k), str(d)): c for k, d, c in rows.get("tgt_kernel_c", [])},
        compiler=str(_single(rows, "tgt_c_compiler", name, "")),
        run_mode=str(_single(rows, "tgt_run_mode", name, "inprocess")),
        emulator=tuple(str(_single(rows, "tgt_run_emulator", name, "")).split()),
        cpu_flags=tuple(sorted(str(f) for (f,) in rows.get("tgt_cpu_flag", []))),
        c_ops={(str(o), str(d)): str(t) for o, d, t in rows.get("tgt_c_op", [])},
        c_consts={(str(c), str(d)): str(t) for c, d, t in rows.get("tgt_c_const", [])},
        kernel_headers=_by_kernel(rows.get("tgt_c_kernel_header", [])),
        helpers={str(n): str(c) for n, c in rows.get("tgt_c_helper", [])},
        kernel_helpers=_by_kernel(rows.get("tgt_c_kernel_helper", [])),
        prefetch={str(lv).upper(): (int(b), str(c)) for lv, b, c in rows.get("tgt_c_prefetch", [])},
    )


def _for_dtype(table: dict, name: str, dtype: str) -> str | None:
    """A (name, dtype) fact's text, else the name's `any` one, else None."""
    return table.get((name, dtype), table.get((name, "any")))


def _by_kernel(rows) -> dict[str, tuple[str, ...]]:
    """(kernel, text) rows as kernel -> its texts (headers or helper names), in order."""
    out: dict[str, list[str]] = {}
    for k, h in sorted(rows):
        out.setdefault(str(k), []).append(str(h))
    return {k: tuple(v) for k, v in out.items()}


def _single(rows: dict, pred: str, name: str, default):
    vals = rows.get(pred, [])
    if len(vals) > 1:
        raise TargetError(f"target {name}: more than one {pred}/1 fact: {', '.join(str(v[0]) for v in vals)}")
    if pred == "tgt_run_mode" and vals and str(vals[0][0]) not in ("inprocess", "standalone"):
        raise TargetError(f"target {name}: tgt_run_mode({vals[0][0]}): the mode is inprocess or standalone")
    return vals[0][0] if vals else default
