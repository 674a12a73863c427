"""Programs on disk: a stable JSON form that records every node's spec, so a saved
program can be run, benchmarked or verified without re-running the rules."""
from __future__ import annotations

import json
from pathlib import Path

from .errors import MorelloError
from .ir import Alloc, Block, Impl, KernelApp, Loop, Pipeline, SpecHole
from .spec import parse_spec, parse_tensor_spec

FORMAT = "morello-asp-program"
VERSION = 1


def to_json(impl: Impl, target: str = "avx2") -> dict:
    return {"format": FORMAT, "version": VERSION, "target": target, "program": _node(impl)}


def _node(n: Impl) -> dict:
    d: dict = {"spec": n.spec.text()}
    if isinstance(n, SpecHole):
        d["node"] = "hole"
    elif isinstance(n, Loop):
        d.update(node="loop", tile=list(n.tile_shape), parallel=n.parallel, body=_node(n.body),
                 boundaries=[_node(b) for b in n.boundaries])
    elif isinstance(n, Block):
        d.update(node="block", stmts=[_node(c) for c in n.stmts])
    elif isinstance(n, Pipeline):
        d.update(node="pipeline", intermediates=[t.text() for t in n.intermediates], stages=[_node(c) for c in n.stages])
    elif isinstance(n, Alloc):
        d.update(node="alloc", operand=n.operand, new=n.new.text(), body=_node(n.body),
                 load=_node(n.load) if n.load is not None else None,
                 store=_node(n.store) if n.store is not None else None)
    elif isinstance(n, KernelApp):
        d.update(node="kernel", kernel=n.kernel, cost=n.kernel_cost)
    else:
        raise MorelloError(f"cannot serialize {type(n).__name__}")
    return d


def from_json(doc: dict) -> Impl:
    if doc.get("format") != FORMAT:
        raise MorelloError(f"not a morello-asp program (format {doc.get('format')!r})")
    if doc.get("version") != VERSION:
        raise MorelloError(f"program format version {doc.get('version')} is not supported (expected {VERSION})")
    return _load(doc["program"], doc.get("target", "avx2"))


def _load(d: dict, target: str) -> Impl:
    spec = parse_spec(d["spec"], target)
    kind = d["node"]
    if kind == "hole":
        return SpecHole(spec)
    if kind == "loop":
        return Loop(spec, tuple(d["tile"]), d["parallel"], _load(d["body"], target), tuple(_load(b, target) for b in d["boundaries"]))
    if kind == "block":
        return Block(spec, tuple(_load(c, target) for c in d["stmts"]))
    if kind == "alloc":
        op = d["operand"]
        new = parse_tensor_spec(d["new"], len(spec.operand_shapes[op])).canonical(spec.operand_shapes[op])
        opt = lambda x: _load(x, target) if x is not None else None  # noqa: E731
        return Alloc(spec, op, new, _load(d["body"], target), opt(d["load"]), opt(d["store"]))
    if kind == "kernel":
        return KernelApp(spec, d["kernel"], d["cost"])
    raise MorelloError(f"unknown program node {kind!r}")


def save(impl: Impl, path: str | Path, target: str = "avx2") -> None:
    Path(path).write_text(json.dumps(to_json(impl, target), indent=1) + "\n")


def load(path: str | Path) -> Impl:
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise MorelloError(f"cannot read program {path}: {e}") from None
    return from_json(doc)
