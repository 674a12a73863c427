"""Checks of a user's logic files (`--rules FILE`, a target given by path) before an
engine loads them: each must be an existing UTF-8 text file, and the whole set must
ground (with no spec) within the time limit of a clingo call, in a worker process,
so a rule that grounds for ever is reported naming its file instead of hanging. A
symbolic constant that occurs in no other logic file but is one letter away from one
that does (`vrff` for `vrf`) matches nothing and is reported as a warning."""

from __future__ import annotations

import difflib
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

import clingo.ast as cast

from morello_asp.encodings import DIR
from morello_asp.errors import InputError

_IDENT = re.compile(r"(?<![A-Za-z0-9_#'\"])([a-z_][A-Za-z0-9_']*)(\s*\()?")
_COMMENT = re.compile(r"%\*.*?\*%|%[^\n]*", re.S)
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_KEYWORDS = {
    "not",
    "from",
    "import",
    "include",
    "const",
    "show",
    "defined",
    "external",
    "program",
    "minimize",
    "maximize",
    "count",
    "sum",
    "sum_plus",
    "min",
    "max",
    "inf",
    "sup",
    "true",
    "false",
    "base",
}


def is_shipped(f) -> bool:
    enc = str(DIR)
    return unsnapshot(str(Path(f).resolve())).startswith(enc + os.sep)


def read_text(f, what: str = "rule file") -> str:
    """The text of a user's logic file; InputError naming it unless it is a readable
    UTF-8 file."""
    p = Path(f)
    if p.is_dir():
        raise InputError(f"{what} {f} is a directory, not a logic file")
    if not p.exists():
        raise InputError(f"{what} {f} does not exist")
    try:
        data = p.read_bytes()
    except OSError as e:
        raise InputError(f"cannot read {what} {f}: {e.strerror}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise InputError(
            f"{what} {f} is not UTF-8 text (byte 0x{data[e.start]:02x} on line {line}); save it as UTF-8"
        ) from None


def _strip(text: str) -> str:
    """Comments and strings blanked out, keeping line numbers."""
    blank = lambda m: re.sub(r"[^\n]", " ", m.group(0))  # noqa: E731
    return _STRING.sub(blank, _COMMENT.sub(blank, text))


def _identifiers(text: str):
    """(name, is a function or predicate name, line) of every lower-case identifier."""
    clean = _strip(text)
    for m in _IDENT.finditer(clean):
        name = m.group(1)
        if name in _KEYWORDS:
            continue
        yield name, m.group(2) is not None, clean.count("\n", 0, m.start()) + 1


def typo_warnings(user_file, user_text: str, other_texts: list[str]) -> list[str]:
    known: set[str] = set()
    for t in other_texts:
        known.update(n for n, _, _ in _identifiers(t))
    mine = list(_identifiers(user_text))
    defined = known | {n for n, fn, _ in mine if fn} | _declared_names(user_text)
    out, said = [], set()
    for name, fn, line in mine:
        if fn or name in defined or name in said:
            continue
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.75)
        if close and abs(len(close[0]) - len(name)) <= 2:
            said.add(name)
            out.append(
                f"rule file {user_file} line {line}: constant {name} occurs in no other logic file, so it "
                f"matches nothing; did you mean {close[0]}?"
            )
    return out


_KIND_ATOM = re.compile(r"\bkind(?:_[a-z_]+)?\(([^.]*)\)")


def _declared_names(text: str) -> set[str]:
    """Names a file introduces in kind declarations (kinds, dimensions, operands): they
    need not occur elsewhere (encodings/kinds/declare.lp)."""
    return {n for m in _KIND_ATOM.finditer(_COMMENT.sub("", text)) for n, _, _ in _identifiers(m.group(1))}


_INCLUDE = re.compile(r'#include\s+"([^"]+)"\s*\.')


def with_includes(files) -> list[Path]:
    """`files` and every file they #include, recursively (clingo resolves an include
    from the including file's directory), each once, in a fixed order: what a set of
    logic files means, for hashing it."""
    out: list[Path] = []
    seen: set[Path] = set()

    def visit(f: Path) -> None:
        key = f.resolve()
        if key in seen:
            return
        seen.add(key)
        out.append(f)
        try:
            text = f.read_text(errors="replace")
        except OSError:
            return
        for m in _INCLUDE.findall(_COMMENT.sub("", text)):
            visit(f.parent / m)

    for f in files:
        visit(Path(f))
    return out


@dataclass(frozen=True)
class Rule:
    """One rule of a logic file, as clingo's parser reads it (own_rules)."""

    head: str  # the head atom's name ("" for a constraint or a head clingo's parser does not name)
    args: tuple[str, ...]  # its arguments, as written
    text: str  # the rule, one line (clingo's parser)


def own_rules(path: Path) -> tuple[Rule, ...]:
    """The rules of a logic file itself, not of the files it #includes (directives and
    comments left out): what a generated file may copy of it rule by rule."""
    out: list[Rule] = []

    def visit(stmt) -> None:
        if stmt.ast_type != cast.ASTType.Rule:
            return
        head = ""
        args: tuple[str, ...] = ()
        if stmt.head.ast_type == cast.ASTType.Literal:
            sym = getattr(stmt.head.atom, "symbol", None)
            head = getattr(sym, "name", "") or ""
            args = tuple(str(a) for a in (getattr(sym, "arguments", None) or ()))
        out.append(Rule(head, args, str(stmt)))

    cast.parse_string(_INCLUDE.sub("", Path(path).read_text()), visit)
    return tuple(out)


def texts_with_includes(files) -> list[str]:
    """The texts of `files` and of every file they #include."""
    out = []
    for f in with_includes(files):
        try:
            out.append(f.read_text(errors="replace"))
        except OSError:
            continue
    return out


def read_logic(files) -> list[tuple[Path, bytes | None]]:
    """`files` and every file they #include, with their contents now (None: missing)."""
    out: list[tuple[Path, bytes | None]] = []
    for f in with_includes(files):
        try:
            out.append((f, f.read_bytes()))
        except OSError:
            out.append((f, None))
    return out


_SNAPSHOTS: list[str] = []
_INCLUDE_BYTES = re.compile(_INCLUDE.pattern.encode())  # the same grammar, over a file's bytes


def snapshot(files, contents: list[tuple[Path, bytes | None]]) -> tuple[str, ...]:
    """Copies of `files` and of every file they #include, each at its own absolute path
    under a new private directory (so relative includes resolve as they did). An engine
    grounds the copies: clingo reads its files at every call, and an edit of a rule file
    during a long search must not mix two sets of rules in one search and one memo table.
    The copies hold `contents` (read_logic's of `files`, read earlier). The directories go
    when the process exits."""
    import atexit
    import tempfile

    root = str(Path(tempfile.mkdtemp(prefix="morello-asp-rules-", suffix=f"-{os.getpid()}")).resolve())
    if not _SNAPSHOTS:
        atexit.register(_remove_snapshots)
        _remove_orphans(Path(root).parent)
    _SNAPSHOTS.append(root)

    def mirror(f) -> Path:
        return Path(root + str(Path(f).resolve()))

    def to_mirror(m: re.Match) -> bytes:
        # An include by absolute path would be read where it lies, outside the snapshot:
        # it names the copy instead (with_includes listed the file, so it is copied too).
        # A relative one resolves from the copy's directory as from the original's.
        if not m.group(1).startswith(b"/"):
            return m.group(0)
        start, end = m.start(1) - m.start(), m.end(1) - m.start()
        return m.group(0)[:start] + str(mirror(m.group(1).decode())).encode() + m.group(0)[end:]

    for f, data in contents:
        if data is None:  # a missing include: clingo reports it, naming it
            continue
        dst = mirror(f)
        try:
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(_INCLUDE_BYTES.sub(to_mirror, data))
        except OSError:  # a copy not written is a file clingo cannot load, and says so
            pass
    return tuple(str(mirror(f)) for f in files)


def _remove_orphans(tmp: Path) -> None:
    """Snapshots of this user's processes that are gone without their exit handlers (a
    precompute worker killed, a process that ended with os._exit)."""
    import shutil

    for d in tmp.glob("morello-asp-rules-*-*"):
        pid = d.name.rsplit("-", 1)[1]
        try:
            if not pid.isdigit() or d.stat().st_uid != os.getuid():
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
        except OSError:  # alive under another user, or unreadable: not ours to remove
            continue


def _remove_snapshots() -> None:
    """At exit, the snapshots this process took (a forked child inherits the list)."""
    import shutil

    for d in _SNAPSHOTS:
        if d.endswith(f"-{os.getpid()}"):
            shutil.rmtree(d, ignore_errors=True)


def in_snapshot(f) -> bool:
    """Whether `f` is one of the snapshots' copies (an original, shipped or a user's, is
    never written)."""
    path = str(Path(f).resolve())
    return any(path.startswith(root + os.sep) for root in _SNAPSHOTS)


def unsnapshot(text: str) -> str:
    """`text` (a path, or a message of clingo's) with snapshots' paths back to the
    originals the user knows."""
    for root in _SNAPSHOTS:
        text = text.replace(root + os.sep, os.sep)
    return text


def contents_hash(contents) -> str:
    """logic_hash of the files and contents logic_files.read_logic read."""
    h = hashlib.sha256()
    for f, data in contents:
        if data is None:  # a missing include: clingo reports it when it loads the files
            data = b"\0missing"
        h.update(f.name.encode() + b"\0" + data + b"\0")
    return h.hexdigest()
