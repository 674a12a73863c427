"""What the core model's objects offer users but the layers above implement.

`spec.tile(...)`, `spec.synthesize()`, `impl.compile()`, `impl.cost`, `str(impl)`:
methods of the core classes (spec.py, ir.py, schedulable.py) whose work is done by the
scheduling API, the search, codegen, the cost model's tree walk and the printer, all
built on the core. The core calls them through the slots here; morello_asp/__init__.py,
which Python runs before any module of the package, plugs them in. So the layers import
one way only (DESIGN.md; `make lint` checks it) and a user still writes `imp.compile()`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any


@dataclass
class Ports:
    schedule: ModuleType | None = None  # morello_asp.schedule: the scheduling primitives
    synthesize: Callable[..., Any] | None = None  # (spec, db, rules, progress, guide) -> Impl
    synthesize_all: Callable[..., Any] | None = None  # (impl, db, rules, progress) -> Impl
    compute_cost: Callable[..., Any] | None = None  # (impl) -> Cost
    listing: Callable[..., str] | None = None  # (impl) -> the program's text
    program_graph: Callable[..., Any] | None = None  # (impl) -> networkx DiGraph
    write_graph: Callable[..., None] | None = None  # (graph, path)
    compile: Callable[..., Any] | None = None  # (impl, target, rules) -> Program
    to_c: Callable[..., str] | None = None  # (impl, target, rules) -> C
    standalone_c: Callable[..., str] | None = None  # (impl, target, rules) -> C with main


PORTS = Ports()


def port(name: str) -> Any:
    """The implementation plugged into slot `name`."""
    fn = getattr(PORTS, name)
    if fn is None:  # only if morello_asp/__init__.py did not run to its end
        raise RuntimeError(f"morello_asp: {name} is not available (the package did not finish importing)")
    return fn
