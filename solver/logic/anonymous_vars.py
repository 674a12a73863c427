"""Naming the anonymous variables of positive body literals before clingo grounds them.

For a body literal with `_` arguments, such as `spec_operand(S, Op, _, _, _, _, _, _)`,
gringo introduces a projection: an auxiliary predicate over the other arguments with a
rule of its own, so that tuples differing only in the dropped arguments are joined once.
In these rule files a projection almost never drops a duplicate (a spec has one
spec_operand fact per operand), so each one only adds a rule to ground: a quarter of the
ground rules of a Matmul batch were projections. With the `_` named by a fresh variable
(which changes no answer: a variable that occurs once in a positive literal is free
there, exactly as `_` is) the same batch grounds about 1.5 times faster and the whole
clingo call 1.3-1.4 times, answer set for answer set (`benchmarks/grounding.py`).

Only copies are rewritten (the engine's snapshot, solver/logic/files.py); the files a
user reads and edits keep their `_`. A `_` keeps its meaning inside a negative literal
(`not p(X, _)`: no p(X, Y) for any Y), so it is left alone there, and in heads. Each
`_` becomes one upper-case letter that the statement does not use, so lines and
columns, which clingo's messages quote, stay where they were; a statement with too few
free letters keeps its remaining `_`.
"""

from __future__ import annotations

import hashlib
import re
import string

import clingo.ast as cast
from clingo import __version__ as clingo_version

from morello_asp.solver.logic.files import in_snapshot, with_includes
from morello_asp.user_cache import keep, user_cache_dir

_VERSION = 1  # of the rewriting below: a change of it must not reuse cached results

_INCLUDE = re.compile(rb'#include\s+"[^"]*"\s*\.')


def _anonymous(node, out: list, names: set, negated: bool = False) -> None:
    """Collect the locations of `_` outside negative literals, and every variable name."""
    if node is None:
        return
    if not isinstance(node, cast.AST):  # a sequence of ASTs (ASTSequence)
        for x in node:
            _anonymous(x, out, names, negated)
        return
    t = node.ast_type
    if t == cast.ASTType.Variable:
        names.add(node.name)
        if node.name == "_" and not negated:
            out.append(node.location.begin)
        return
    if t == cast.ASTType.Literal and node.sign != cast.Sign.NoSign:
        negated = True
    for key in node.child_keys:
        _anonymous(getattr(node, key), out, names, negated)


def name_anonymous(text: str) -> str:
    """`text` with the `_` of positive body literals named (same lines and columns).
    Text clingo cannot parse is returned as it is: loading it reports the error."""
    data = text.encode()
    # #include is resolved by the snapshot, not here: blank it out (same length) so the
    # parser does not open the included file.
    blanked = _INCLUDE.sub(lambda m: b" " * len(m.group(0)), data)
    edits: list[tuple[int, int, str]] = []  # (line, column, name), 1-based byte columns

    def statement(st) -> None:
        if st.ast_type not in (cast.ASTType.Rule, cast.ASTType.ShowTerm):
            return
        if st.location.begin.filename != "<string>":
            return
        spots: list = []
        names: set = set()
        _anonymous(st.body, spots, names)
        if not spots:
            return
        _anonymous(st.head if st.ast_type == cast.ASTType.Rule else st.term, [], names)
        free = [c for c in string.ascii_uppercase if c not in names]
        for pos, name in zip(spots, free):
            edits.append((pos.line, pos.column, name))

    try:
        cast.parse_string(blanked.decode(), statement, logger=lambda code, msg: None)
    except RuntimeError:
        return text
    if not edits:
        return text
    lines = data.split(b"\n")
    for line, col, name in edits:
        row = lines[line - 1]
        if row[col - 1 : col] != b"_":  # not where the parser said: leave the file alone
            return text
        lines[line - 1] = row[: col - 1] + name.encode() + row[col:]
    return b"\n".join(lines).decode()


_MEMO: dict[str, str] = {}


def _named_cached(text: str) -> str:
    """name_anonymous, remembered in this process and in the user's cache directory
    (walking the syntax trees takes a quarter of a second for the shipped files, which
    a warm query cannot afford)."""
    got = _MEMO.get(text)
    if got is not None:
        return got

    key = hashlib.sha256(f"{_VERSION}\0{clingo_version}\0".encode() + text.encode()).hexdigest()
    path = user_cache_dir() / "named" / f"{key}.lp"
    try:
        got = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        got = name_anonymous(text)
        keep(path, got)  # a read-only cache: computed every time
    _MEMO[text] = got
    return got


def name_anonymous_in_snapshot(files) -> None:
    """Rewrite in place the snapshot's copies among `files` (an engine's snapshot,
    solver/logic/files.py) and the files they #include (copies too, even a file included
    by an absolute path: the snapshot points such includes at its copy). The originals,
    shipped or a user's, are never written."""

    for f in with_includes(files):
        if not in_snapshot(f):
            continue
        try:
            text = f.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):  # clingo reports it when it loads the file
            continue
        new = _named_cached(text)
        if new != text:
            f.write_text(new, encoding="utf-8")
