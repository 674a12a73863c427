"""The logic files document every predicate once, Potassco style (`%*! name(Args) ...
*%`), and the generic ones (encodings/rules, encodings/options) name no memory level:
levels belong to the target (encodings/README.md, "Levels belong to the target")."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import clingo
import clingo.ast as cast
import pytest

ROOT = Path(__file__).resolve().parent.parent
ENCODINGS = ROOT / "encodings"
FIXTURE = ROOT / "tests" / "fixtures" / "renamed_target"
LP_FILES = sorted(ENCODINGS.rglob("*.lp")) + sorted(FIXTURE.glob("*.lp"))
GENERIC = sorted((ENCODINGS / "rules").glob("*.lp")) + sorted((ENCODINGS / "options").glob("*.lp"))
AVX2_LEVELS = {"rf", "vrf", "l1", "gl"}

DOC = re.compile(r"%\*!(.*?)\n(.*?)\*%", re.S)
HEAD = re.compile(r"\s*([a-z_][A-Za-z0-9_]*)\s*(?:\((.*)\))?\s*$")


def _arity(args: str | None) -> int:
    if args is None or not args.strip():
        return 0
    depth, n = 0, 1
    for ch in args:
        depth += ch in "(["
        depth -= ch in ")]"
        n += ch == "," and depth == 0
    return n


def _split_heads(line: str) -> list[str]:
    """`a(X) / b(X, Y)` -> ["a(X)", "b(X, Y)"]: the " / " between signatures, not a
    division inside parentheses."""
    out, depth, cur = [], 0, ""
    for ch in line:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "/" and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return out + [cur]


def doc_blocks(files=LP_FILES) -> dict[tuple[str, int], list[str]]:
    """(name, arity) -> where a `%*! name(...)` block documents it."""
    docs: dict[tuple[str, int], list[str]] = defaultdict(list)
    for f in files:
        text = f.read_text()
        for m in DOC.finditer(text):
            line = text[: m.start()].count("\n") + 1
            assert m.group(2).strip(), f"{f.name}:{line}: documentation block without a description"
            for head in _split_heads(m.group(1)):
                h = HEAD.match(head)
                assert h, f"{f.name}:{line}: cannot read the signature {head!r}"
                docs[(h.group(1), _arity(h.group(2)))].append(f"{f.relative_to(ROOT)}:{line}")
    return docs


def _walk(node):
    if isinstance(node, cast.AST):
        yield node
        for k in node.child_keys:
            yield from _walk(getattr(node, k))
    elif not isinstance(node, (str, int, clingo.Symbol)) and node is not None:
        try:
            items = list(node)
        except TypeError:
            return
        for x in items:
            yield from _walk(x)


def _statements(path: Path) -> list:
    """The statements of one file (not those of the files it includes)."""
    out: list = []
    cast.parse_files([str(path)], out.append)
    return [s for s in out if Path(s.location.begin.filename).resolve() == path.resolve()]


def _pred(term) -> tuple[str, int] | None:
    if term.ast_type == cast.ASTType.Function:
        return term.name, len(term.arguments)
    if term.ast_type == cast.ASTType.SymbolicTerm and term.symbol.type == clingo.SymbolType.Function:
        return term.symbol.name, len(term.symbol.arguments)
    return None


def predicates(path: Path) -> dict[tuple[str, int], int]:
    """(name, arity) -> first line of each predicate the file uses: in a head, a body,
    a fact, a #defined or a #show statement."""
    found: dict[tuple[str, int], int] = {}
    for stmt in _statements(path):
        line = stmt.location.begin.line
        if stmt.ast_type in (cast.ASTType.Defined, cast.ASTType.ShowSignature):
            if stmt.name:  # `#show.` hides everything and names nothing
                found.setdefault((stmt.name, stmt.arity), line)
            continue
        for node in _walk(stmt):
            if node.ast_type == cast.ASTType.SymbolicAtom:
                p = _pred(node.symbol)
                if p:
                    found.setdefault(p, line)
            elif node.ast_type == cast.ASTType.ShowTerm:
                p = _pred(node.term)
                if p:
                    found.setdefault(p, line)
    return found


def level_atoms(stmts, levels=AVX2_LEVELS) -> list[tuple[int, str]]:
    """(line, name) of every constant in `stmts` that is one of `levels`."""
    out = []
    for stmt in stmts:
        for node in _walk(stmt):
            name = None
            if node.ast_type == cast.ASTType.Function and not node.arguments:
                name = node.name
            elif (
                node.ast_type == cast.ASTType.SymbolicTerm
                and node.symbol.type == clingo.SymbolType.Function
                and not node.symbol.arguments
            ):
                name = node.symbol.name
            if name in levels:
                out.append((node.location.begin.line, name))
    return out


def test_every_predicate_is_documented_exactly_once():
    docs = doc_blocks()
    twice = {f"{n}/{a}": w for (n, a), w in docs.items() if len(w) > 1}
    assert not twice, f"documented more than once: {twice}"
    missing = []
    for f in LP_FILES:
        for (n, a), line in sorted(predicates(f).items()):
            if (n, a) not in docs:
                missing.append(f"{f.relative_to(ROOT)}:{line}: {n}/{a}")
    assert not missing, "predicates without a %*! block:\n" + "\n".join(missing)


def test_every_documented_predicate_exists():
    """A block whose name or arity matches nothing is stale (a renamed predicate)."""
    used = set()
    for f in LP_FILES:
        used |= set(predicates(f))
    stale = {f"{n}/{a}": w for (n, a), w in doc_blocks().items() if (n, a) not in used}
    assert not stale, f"documented but used nowhere: {stale}"


@pytest.mark.parametrize("path", GENERIC, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_generic_files_name_no_level(path):
    found = level_atoms(_statements(path))
    assert not found, f"{path.relative_to(ROOT)} names levels of the avx2 target: {found}"


def test_the_level_check_sees_levels_in_terms_heads_and_bodies():
    stmts: list = []
    cast.parse_string('p(S) :- q(S, vrf), r(move(1, l1, 2, 8)).\nw(gl, 8).\nx(rf2, "vrf").', stmts.append)
    assert sorted(n for _, n in level_atoms(stmts)) == ["gl", "l1", "vrf"]


def test_readme_public_names_are_documented():
    """Every `name/arity` encodings/README.md mentions, and every `name(Args)` in the
    first column of its tables (the contract: input facts, output atoms, target facts,
    public helpers), is a documented predicate."""
    docs = doc_blocks()
    text = (ENCODINGS / "README.md").read_text()
    named = {(n, int(a)) for n, a in re.findall(r"`([a-z_][a-z0-9_]*)/(\d+)`", text)}
    for row in re.findall(r"^\| ([^|]*)\|", text, re.M):
        named |= {(n, _arity(a)) for n, a in re.findall(r"`([a-z_][a-z0-9_]*)\(([^`]*)\)`", row)}
    assert len(named) > 40, f"README's tables name few predicates: {sorted(named)}"
    missing = sorted(f"{n}/{a}" for n, a in named if (n, a) not in docs)
    assert not missing, f"encodings/README.md names undocumented predicates: {missing}"


def test_avx2_targets_give_every_level_a_prefix():
    """tgt_level_prefix/2 (read by Python for buffer names) covers each avx2 level, in
    the calibrated copy too."""
    for entry in ("avx2.lp", "avx2_calibrated.lp"):
        ctl = clingo.Control(["--warn=none"])
        ctl.load(str(ENCODINGS / "targets" / entry))
        ctl.ground([("base", [])])
        levels = {str(a.symbol.arguments[0]) for a in ctl.symbolic_atoms.by_signature("tgt_level", 6)}
        prefixes = {
            str(a.symbol.arguments[0]): a.symbol.arguments[1].string
            for a in ctl.symbolic_atoms.by_signature("tgt_level_prefix", 2)
        }
        assert prefixes == {"rf": "r", "vrf": "v", "l1": "l", "gl": "g"} and set(prefixes) == levels, entry
