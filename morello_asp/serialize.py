"""Programs on disk: a stable JSON form that records every node's spec, so a saved
program can be run, benchmarked or verified without re-running the rules."""

from __future__ import annotations

import json
from pathlib import Path

from morello_asp import native
from morello_asp.errors import InputError, MorelloError, TargetError
from morello_asp.ir import Impl, SpecHole
from morello_asp.kinds import load as load_kinds
from morello_asp.rewrites import for_node, for_node_tag
from morello_asp.spec import parse_spec
from morello_asp.target import ENCODINGS, Target, get_target, rule_file

FORMAT = "morello-asp-program"
VERSION = 1


def target_ref(target: Target) -> str:
    """How a saved program names its target: a shipped target by name, any other by the
    absolute path of its entry file, so the program loads from any directory."""
    entry = Path(target.files[0])
    if entry.parent == ENCODINGS / "targets" and get_target(entry.stem) is target:
        return entry.stem
    return str(entry.resolve())


def to_json(impl: Impl, rules=()) -> dict:
    """The program, its target and the rule files whose kernels it may use."""
    tgt = impl.spec.target
    return {
        "format": FORMAT,
        "version": VERSION,
        "target": target_ref(tgt),
        "target_extra": [str(Path(f).resolve()) for f in tgt.files[1:]],
        "rules": [str(rule_file(r)) for r in rules],
        "program": _node(impl),
    }


def _node(n: Impl) -> dict:
    d: dict = {"spec": n.spec.text()}
    if isinstance(n, SpecHole):
        d["node"] = "hole"
        return d
    d.update(for_node(n).node_to_json(n, _node))
    return d


def from_json(doc: dict) -> Impl:
    return from_json_with_rules(doc)[0]


def from_json_with_rules(doc: dict) -> tuple[Impl, tuple[str, ...]]:
    """The program and the rule files it was saved with."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        got = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise MorelloError(f"not a morello-asp program (format {got!r})")
    if doc.get("version") != VERSION:
        raise MorelloError(f"program format version {doc.get('version')} is not supported (expected {VERSION})")
    try:
        _check_target_file(doc.get("target"))
        target = get_target(doc.get("target") or None, tuple(doc.get("target_extra", ())))
        rules = tuple(str(rule_file(r)) for r in doc.get("rules", ()))
        if rules:
            load_kinds(rules)  # the program's kinds may be declared in its rule files
        return _load(doc["program"], target, root=True), rules
    except MorelloError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
        raise MorelloError(f"malformed program: {type(e).__name__}: {e}") from None


def _check_target_file(ref) -> None:
    """A program names a target that is not installed by its file's absolute path
    (target_ref): a file missing here (a native target is written on the machine it is
    made for) is a TargetError saying what to do, not "unknown target"."""
    if not isinstance(ref, str) or not ref.endswith(".lp") or not Path(ref).is_absolute() or Path(ref).exists():
        return
    if Path(ref).name.startswith(native.FILE_PREFIX):
        raise TargetError(
            f"the program was saved for target file {ref}, a native target written on the machine the program was "
            "made on, and that file is not here: copy it here to that path, or synthesize the program again here"
        )
    raise TargetError(f"the program was saved for target file {ref}, which does not exist: put the file back there")


def _load(d: dict, target: Target, root: bool = False) -> Impl:
    spec = parse_spec(d["spec"], target, buffers=root)  # below the root, operands are views
    kind = d["node"]
    if kind == "hole":
        return SpecHole(spec)
    try:
        fam = for_node_tag(kind)
    except ValueError as e:
        raise MorelloError(str(e)) from None
    return fam.node_from_json(d, spec, lambda x: _load(x, target))


def save(impl: Impl, path: str | Path, rules=()) -> None:
    """Write the program to `path`; a file that cannot be written is an InputError
    naming it (as graph.write_graph does for --graph)."""
    text = json.dumps(to_json(impl, rules), indent=1) + "\n"
    try:
        Path(path).write_text(text)
    except OSError as e:
        raise InputError(f"cannot write {path}: {e.strerror or e}") from None


def load(path: str | Path) -> Impl:
    return load_with_rules(path)[0]


def load_with_rules(path: str | Path) -> tuple[Impl, tuple[str, ...]]:
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise MorelloError(f"cannot read program {path}: {e}") from None
    try:
        return from_json_with_rules(doc)
    except MorelloError as e:
        raise type(e)(f"{path}: {e}") from None
