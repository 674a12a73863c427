"""The C side of a target, read from its fact files (tgt_c_* and tgt_kernel_c atoms).

Codegen asks the target, never a Python table, which headers, flags, vector types and
kernel templates to use, so a new kernel or target is a fact-file change only.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import clingo

from morello_asp.errors import TargetError
from morello_asp.naming import snake
from morello_asp.target import Target, as_target, get_target, rule_file

from .errors import CodegenError


@dataclass(frozen=True)
class CTarget:
    target: Target
    headers: tuple[str, ...]
    flags: tuple[str, ...]
    vector_types: dict = field(default_factory=dict)  # (dtype, bytes) -> C type
    prefixes: dict = field(default_factory=dict)  # bytes -> intrinsic prefix
    templates: dict = field(default_factory=dict)  # (kernel, dtype) -> template text

    def template(self, kernel: str, dtype: str) -> str:
        k = snake(kernel)
        for key in ((k, dtype), (k, "any")):
            if key in self.templates:
                return self.templates[key]
        raise CodegenError(
            f"target {self.target.name} has no C for kernel {kernel} on {dtype}: add "
            f'tgt_kernel_c({k}, {dtype}, "...") (or dtype `any`) to its fact files'
        )

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
        if a.symbol.name.startswith("tgt_c_") or a.symbol.name == "tgt_kernel_c":
            rows.setdefault(a.symbol.name, []).append(tuple(_val(x) for x in a.symbol.arguments))
    return CTarget(
        target=tgt,
        headers=tuple(sorted(h for (h,) in rows.get("tgt_c_header", []))),
        flags=tuple(sorted(f for (f,) in rows.get("tgt_c_flag", []))),
        vector_types={(str(d), b): t for d, b, t in rows.get("tgt_c_vector_type", [])},
        prefixes={b: p for b, p in rows.get("tgt_c_intrinsic_prefix", [])},
        templates={(str(k), str(d)): c for k, d, c in rows.get("tgt_kernel_c", [])},
    )
