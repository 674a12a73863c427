"""`morello-asp db stats|compact|export|import|merge|verify`: inspect, re-merge, ship, combine and
prove memo tables."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import zlib
from collections import defaultdict
from pathlib import Path

from morello_asp import native
from morello_asp.cli.args import add_rules_option, add_target_option, check_rules, int_range, output_file
from morello_asp.errors import InputError, MemoError, MorelloError, TargetError
from morello_asp.solver.memo.coords import from_coords
from morello_asp.solver.memo.sqlite import (
    EXPANSIONS_VERSION,
    SCHEMA_VERSION,
    SqliteMemo,
    _damaged,
    connect,
    decode_decision,
    encode_decision,
    open_memo,
    recorded_rules,
)
from morello_asp.solver.memo.table import RectMemo
from morello_asp.solver.search.engine import get_engine
from morello_asp.target import ENCODINGS, NATIVE
from morello_asp.user_cache import user_cache_dir


def _volume(lo, hi) -> int:
    v = 1
    for a, b in zip(lo, hi):
        v *= b - a + 1
    return v


def _pow2_count(a: int, b: int) -> int:
    """How many of 0, 1, 2, 4, 8, ... lie in [a, b]."""
    return (a == 0) + sum(1 for k in range(64) if a <= (1 << k) <= b)


def _lattice_volume(lo, hi, nlimits) -> int:
    """Points of the box whose memory limits are 0 or powers of two (the limits the search
    visits; comparable to the paper's log2 coordinates)."""
    n = len(lo) - nlimits
    v = _volume(lo[:n], hi[:n])
    for a, b in zip(lo[n:], hi[n:]):
        v *= _pow2_count(a, b)
    return v


IDENTITY = ("schema", "target", "levels", "logic", "cost")  # what a table was built by and for


def _connect(path: str, create: bool = False) -> sqlite3.Connection:
    """A memo table file, refused untouched if it is not one (memo_db.connect)."""
    con = connect(path, create)
    try:
        meta = dict(con.execute("SELECT k, v FROM meta")) if {"meta"} <= _names(con) else {}
    except sqlite3.DatabaseError as e:
        con.close()
        raise _damaged(Path(path), e) from None
    if meta and meta.get("schema") != SCHEMA_VERSION:
        con.close()
        raise MemoError(f"memo table {path} has schema {meta.get('schema')!r}; this version reads {SCHEMA_VERSION!r}")
    return con


def _names(con) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _rows(path: str, con: sqlite3.Connection, sql: str):
    """The rows of a query, a damaged file reported as a MemoError naming it."""
    try:
        yield from con.execute(sql)
    except sqlite3.DatabaseError as e:
        raise _damaged(Path(path), e) from None


def stats(path: str) -> dict:
    """Specs covered = points inside the boxes (limit vectors count one by one)."""
    con = _connect(path)
    meta = dict(_rows(path, con, "SELECT k, v FROM meta"))
    per: defaultdict[tuple, list[int]] = defaultdict(lambda: [0, 0, 0])
    try:
        for key, lo, hi in _rows(path, con, "SELECT key, lo, hi FROM decisions"):
            k = json.loads(key)
            lo, hi = json.loads(lo), json.loads(hi)
            p = per[(k["kind"], meta.get("target"))]
            p[0] += 1
            p[1] += _lattice_volume(lo, hi, k["nlimits"])
            p[2] += _volume(lo, hi)
    except (ValueError, KeyError, TypeError) as e:
        raise MemoError(f"memo table {path} has a row this version cannot read ({type(e).__name__}: {e})") from None
    classes = next(_rows(path, con, "SELECT count(*) FROM expansions"))[0] if "expansions" in _names(con) else 0
    con.close()
    size = sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))
    rects = sum(v[0] for v in per.values())
    covered = sum(v[1] for v in per.values())
    return {
        "rectangles": rects,
        "specs_covered": covered,
        "values_per_rectangle": round(covered / rects, 1) if rects else 0.0,
        "integer_limit_vectors_covered": sum(v[2] for v in per.values()),
        "bytes": size,
        "expanded_spec_classes": classes,
        "per_kind": {f"{k} ({t})": {"rectangles": r, "specs_covered": c} for (k, t), (r, c, _) in per.items()},
    }


def export(path: str, out: str) -> int:
    """The table's decisions as JSON lines (the expansion cache is left out: it is
    only a cache, and a rerun rebuilds it)."""
    con = _connect(path)
    meta = dict(_rows(path, con, "SELECT k, v FROM meta"))
    rows = list(_rows(path, con, "SELECT key, lo, hi, value FROM decisions ORDER BY seq"))
    con.close()
    try:
        with open(out, "w", encoding="utf-8") as f:
            f.write(json.dumps({"meta": {k: meta.get(k) for k in IDENTITY}}) + "\n")
            for key, lo, hi, val in rows:
                f.write(
                    json.dumps({"key": key, "lo": json.loads(lo), "hi": json.loads(hi), "value": json.loads(val)})
                    + "\n"
                )
    except OSError as e:
        raise InputError(f"cannot write {out}: {e.strerror}") from None
    except ValueError as e:
        raise MemoError(f"memo table {path} has a row this version cannot read ({e})") from None
    return len(rows)


def _read_jsonl(src: str) -> tuple[dict, list[tuple]]:
    """(meta, rows) of an exported table, every line checked before anything is written."""

    p = Path(src)
    if p.is_dir():
        raise InputError(f"{src} is a directory, not a JSON lines file")
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"no file {src}") from None
    except UnicodeDecodeError:
        raise InputError(f"{src} is not UTF-8 text (not a table exported by `morello-asp db export`)") from None
    except OSError as e:
        raise InputError(f"cannot read {src}: {e.strerror}") from None
    lines = text.splitlines()
    if not lines:
        raise InputError(f"{src} is empty (expected the JSON lines written by `morello-asp db export`)")

    def bad(i, why):
        return InputError(f"{src} line {i}: {why} (expected the JSON lines written by `morello-asp db export`)")

    try:
        head = json.loads(lines[0])
    except ValueError as e:
        raise bad(1, f"not JSON ({e})") from None
    meta = head.get("meta") if isinstance(head, dict) else None
    if not isinstance(meta, dict) or not all(isinstance(meta.get(k), str) for k in IDENTITY):
        raise bad(1, f'the first line must be {{"meta": {{...}}}} with {", ".join(IDENTITY)}')
    if meta["schema"] != SCHEMA_VERSION:
        raise bad(1, f"schema {meta['schema']!r}; this version reads {SCHEMA_VERSION!r}")
    rows = []
    for i, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        try:
            o = json.loads(line)
            key, lo, hi, value = o["key"], o["lo"], o["hi"], o["value"]
            k = json.loads(key)
            ok = (
                isinstance(k, dict)
                and isinstance(k.get("nlimits"), int)
                and isinstance(lo, list)
                and isinstance(hi, list)
                and len(lo) == len(hi) > k["nlimits"]
                and all(type(x) is int and type(y) is int and x <= y for x, y in zip(lo, hi))
            )
            if not ok:
                raise ValueError("a box needs a key with nlimits and integer corners lo <= hi of equal length")
            val = json.dumps(value, separators=(",", ":"), sort_keys=True)
            if value.get("a") is not None:
                from_coords(key, lo)  # the point must be a spec its action applies to
            decode_decision(val, key)  # the row must mean something
        except Exception as e:  # noqa: BLE001 - any failure is the line's fault
            raise bad(i, f"{type(e).__name__}: {e}") from None
        rows.append((key, json.dumps(lo), json.dumps(hi), val))
    return {k: meta[k] for k in IDENTITY}, rows


def import_(path: str, src: str) -> int:
    """Appends rows in file order (which keeps first-inserted priority); meta must match
    an existing table's, or initializes a new file. Nothing is written unless every
    line of `src` reads."""
    meta, rows = _read_jsonl(src)
    con = _connect(path, create=True)
    try:
        have = dict(con.execute("SELECT k, v FROM meta")) if "meta" in _names(con) else {}
        mine = {k: have.get(k) for k in IDENTITY}
        if have and mine != meta:
            raise MemoError(f"{src} was exported from a table with {meta}, but {path} has {mine}")
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("BEGIN IMMEDIATE")
        con.execute("CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v TEXT)")
        con.execute(
            "CREATE TABLE IF NOT EXISTS decisions(seq INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT, lo TEXT, "
            "hi TEXT, value TEXT)"
        )
        if not have:
            con.executemany("INSERT INTO meta VALUES (?, ?)", meta.items())
        con.executemany("INSERT INTO decisions(key, lo, hi, value) VALUES (?, ?, ?, ?)", rows)
        con.execute("COMMIT")
    except sqlite3.DatabaseError as e:
        raise MemoError(f"memo table {path}: {e}") from None
    finally:
        con.close()
    return len(rows)


def compact(path: str) -> tuple[int, int]:
    """Re-merge: replay every row in sequence order into a fresh RectMemo, rewrite the file."""

    con = _connect(path)
    meta = dict(_rows(path, con, "SELECT k, v FROM meta"))
    m = RectMemo(tuple(meta["levels"].split(",")))
    rows = list(_rows(path, con, "SELECT key, lo, hi, value FROM decisions ORDER BY seq"))
    try:
        for key, lo, hi, val in rows:
            lo, hi = tuple(json.loads(lo)), tuple(json.loads(hi))
            m._insert_box(key, lo, hi, decode_decision(val, key))
    except (ValueError, KeyError, TypeError, IndexError, MorelloError) as e:
        con.close()
        raise MemoError(
            f"memo table {path} has a row this version cannot read ({type(e).__name__}: {e}); not compacting it"
        ) from None
    con.execute("BEGIN IMMEDIATE")
    con.execute("DELETE FROM decisions")
    for key, _seq, lo, hi, d in sorted(m.boxes(), key=lambda b: b[1]):
        con.execute(
            "INSERT INTO decisions(key, lo, hi, value) VALUES (?, ?, ?, ?)",
            (key, json.dumps(list(lo)), json.dumps(list(hi)), encode_decision(d)),
        )
    con.execute("COMMIT")
    con.execute("VACUUM")
    con.close()
    return len(rows), len(m)


def _read_all(path: str, *queries: str) -> list[list]:
    """Every row of each query, read from the table at `path` and closed again."""
    con = _connect(path)
    try:
        return [list(_rows(path, con, q)) for q in queries]
    finally:
        con.close()


def merge(dest: str, sources: list[str]) -> tuple[int, int, int]:
    """Every decision of each source table into `dest` (created if missing), in the
    source's order, merging rectangles as they go in; `dest`'s own answers keep their
    priority. Refused, with the reason and nothing written, unless every table was
    built by the same schema, target, levels and logic files. Returns (rows read,
    rectangles before, rectangles after)."""

    read: list[tuple[str, dict, list]] = []
    for src in sources:
        if Path(src).resolve() == Path(dest).resolve():
            raise InputError(f"cannot merge {src} into itself")
        meta_rows, rows = _read_all(
            src, "SELECT k, v FROM meta", "SELECT key, lo, hi, value FROM decisions ORDER BY seq"
        )
        read.append((src, dict(meta_rows), rows))
    if Path(dest).exists():
        con = _connect(dest)
        try:
            want = dict(_rows(dest, con, "SELECT k, v FROM meta"))
        finally:
            con.close()
        first = dest
    else:
        first, want = read[0][0], read[0][1]
    for src, meta, _ in read:
        for k in IDENTITY:
            if meta.get(k) != want.get(k):
                raise MemoError(
                    f"cannot merge {src} into {dest}: {first} was built with {k}={want.get(k)!r} and {src} with "
                    f"{k}={meta.get(k)!r}; tables merge only when built by the same rules and target (and the same "
                    "version of morello-asp)"
                )
    expansions = [x for src, meta, _ in read for x in _read_expansions(src, meta)]
    decoded = []
    for src, _, rows in read:
        try:
            for key, lo, hi, val in rows:
                lo, hi = tuple(json.loads(lo)), tuple(json.loads(hi))
                decoded.append((key, lo, hi, decode_decision(val, key)))
        except (ValueError, KeyError, TypeError, IndexError, MorelloError) as e:
            raise MemoError(
                f"memo table {src} has a row this version cannot read ({type(e).__name__}: {e}); nothing merged"
            ) from None
    rules = recorded_rules(want)
    memo = SqliteMemo(
        Path(dest),
        want["target"],
        tuple(want["levels"].split(",")),
        want["logic"],
        batch=1 << 30,
        rules=None if rules is None else tuple(rules),
        cost=want.get("cost"),
    )
    try:
        before = len(memo)
        memo._begin()
        for key, lo, hi, d in decoded:
            memo._insert_box(key, lo, hi, d)
        memo.store_expansion_rows(expansions)
        memo.flush()
        return len(decoded), before, len(memo)
    finally:
        memo.close()


def _read_expansions(src: str, meta: dict) -> list[tuple[str, str, list]]:
    """The source's expansion cache as SqliteMemo.store_expansion_rows takes it (class
    keys as text), for merge to number in the destination's ids: without it, a merged
    table answers the source's specs but grounds their classes again when it rebuilds a
    program. Empty for another format of the cache."""

    if meta.get("expansions") != EXPANSIONS_VERSION:
        return []
    key_rows, rows = _read_all(src, "SELECT id, key FROM ekeys", "SELECT kid, point, value FROM expansions")
    keys = dict(key_rows)
    out = []
    try:
        for kid, point, value in rows:
            enc = json.loads(zlib.decompress(value))
            for exp in enc:
                exp[1] = [[keys[k], p] for k, p in exp[1]]
            out.append((keys[kid], point, enc))
    except (ValueError, KeyError, TypeError, IndexError, zlib.error) as e:
        raise MemoError(
            f"memo table {src} has an expansion this version cannot read ({type(e).__name__}: {e}); nothing merged"
        ) from None
    return out


def table_target(path: str, meta: dict, target: str | None = None) -> str:
    """The target to open the table at `path` with (its meta recording the name, tgt_name,
    of the target it was built for), as get_target takes it: `target` if given (--target);
    an installed target by its name; native for the name of this machine's native target.
    A name no file here has (a native target of another machine, a target file given by
    path) is a TargetError saying what to pass."""
    name = str(meta.get("target") or "avx2")
    if target is not None:
        return target
    if (ENCODINGS / "targets" / f"{name}.lp").exists():
        return name  # a shipped target: its entry file is named as it names itself
    if name.startswith(native.NAME_PREFIX):
        here = native.target_name(native.host())
        if name == here:
            return NATIVE
        raise TargetError(
            f"memo table {path} was built for target {name}, the native target of another kind of machine "
            f"(this one's is {here}), whose file is not here: pass --target with that file (the machine it was "
            f"made on keeps it in {user_cache_dir() / 'native'}; `morello-asp targets` there names it)"
        )
    raise TargetError(
        f"memo table {path} was built for target {name}, which is not an installed target (a target file given "
        f"by its path): pass --target with that file"
    )


def verify(path: str, rules=(), limit: int | None = None, quiet: bool = False, target: str | None = None) -> int:
    """Prove every box of the table (solver/proofs/boxes.py); 1 if any claim is refuted."""
    from morello_asp.solver.proofs.verify import (
        verify_table,  # z3: loaded when this command runs, not for every command
    )

    con = _connect(path)
    try:
        meta = dict(_rows(path, con, "SELECT k, v FROM meta"))
    finally:
        con.close()

    tgt = table_target(path, meta, target)
    check_rules(tgt, rules)
    engine = get_engine(tgt, tuple(str(r) for r in rules))
    try:
        memo = open_memo(Path(path), engine)
    except MorelloError as e:
        raise MorelloError(
            f"{e}\n(db verify checks a table against the logic files that built it: its target's and those of the "
            "--rules it was built with)"
        ) from None
    show = not quiet and sys.stderr.isatty()

    def progress(text):
        if show:
            sys.stderr.write(f"\rdb verify: {text}\033[K")
            sys.stderr.flush()

    rep = verify_table(memo, engine, limit, progress)
    memo.close()
    if show:
        sys.stderr.write("\n")
    print(rep.summary())
    for o in rep.obligations:
        if o.status == "refuted" or (o.status == "unknown" and not quiet):
            print(o)
    return 1 if rep.count("refuted") else 0


def register(sub) -> None:
    p = sub.add_parser("db", help="inspect and maintain memo tables")
    dsub = p.add_subparsers(dest="db_cmd", required=True)
    s = dsub.add_parser("stats", help="specs covered, rectangles, values per rectangle, bytes")
    s.add_argument("file", metavar="FILE")
    s.set_defaults(func=lambda a: print(json.dumps(stats(a.file), indent=2)) or 0)
    c = dsub.add_parser("compact", help="re-merge the rectangles")
    c.add_argument("file", metavar="FILE")
    c.set_defaults(func=lambda a: print("{} rectangles -> {}".format(*compact(a.file))) or 0)
    e = dsub.add_parser("export", help="write the table as JSON lines")
    e.add_argument("file", metavar="FILE")
    e.add_argument("out", metavar="OUT.jsonl", type=output_file())
    e.set_defaults(func=lambda a: print(f"{export(a.file, a.out)} rectangles written") or 0)
    i = dsub.add_parser("import", help="append JSON lines into a table")
    i.add_argument("file", metavar="FILE")
    i.add_argument("src", metavar="IN.jsonl")
    i.set_defaults(func=lambda a: print(f"{import_(a.file, a.src)} rectangles read") or 0)
    m = dsub.add_parser(
        "merge",
        help="combine tables built by the same rules and target into the first (re-merging rectangles)",
    )
    m.add_argument("file", metavar="FILE", help="the table to merge into (created if missing)")
    m.add_argument("sources", metavar="OTHER", nargs="+", help="tables to take the decisions of")
    m.set_defaults(func=lambda a: print("{} rows read; {} rectangles -> {}".format(*merge(a.file, a.sources))) or 0)
    v = dsub.add_parser("verify", help="prove every rectangle's decision legal for every spec it holds (z3)")
    v.add_argument("file")
    v.add_argument(
        "--limit", type=int_range(1, what="a number of rectangles"), metavar="N", help="only the first N rectangles"
    )
    add_rules_option(v, "the extra rule files or rule sets the table was built with")
    add_target_option(
        v,
        "the target the table was built for, by name or file (default: the one the table names; native for "
        "this machine's native target)",
    )
    v.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress line, no list of unknowns (warnings about your inputs still show)",
    )
    v.set_defaults(func=lambda a: verify(a.file, a.rules, a.limit, a.quiet, a.target))
