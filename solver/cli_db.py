"""`morello-asp db stats|compact|export|import|verify`: inspect, re-merge, ship and prove memo tables."""
from __future__ import annotations

import json
import os
import sqlite3
import sys
from collections import defaultdict
from pathlib import Path

from morello_asp.errors import MorelloError


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


def _connect(path: str) -> sqlite3.Connection:
    if not Path(path).exists():
        raise MorelloError(f"no memo table at {path}")
    con = sqlite3.connect(path, timeout=60)
    con.execute("PRAGMA busy_timeout=60000")
    return con


def stats(path: str) -> dict:
    """Specs covered = points inside the boxes (limit vectors count one by one)."""
    con = _connect(path)
    meta = dict(con.execute("SELECT k, v FROM meta"))
    per = defaultdict(lambda: [0, 0, 0])
    for key, lo, hi in con.execute("SELECT key, lo, hi FROM decisions"):
        k = json.loads(key)
        lo, hi = json.loads(lo), json.loads(hi)
        p = per[(k["kind"], meta.get("target"))]
        p[0] += 1
        p[1] += _lattice_volume(lo, hi, k["nlimits"])
        p[2] += _volume(lo, hi)
    con.close()
    size = sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))
    rects = sum(v[0] for v in per.values())
    covered = sum(v[1] for v in per.values())
    return {"rectangles": rects, "specs_covered": covered,
            "values_per_rectangle": round(covered / rects, 1) if rects else 0.0,
            "integer_limit_vectors_covered": sum(v[2] for v in per.values()), "bytes": size,
            "per_kind": {f"{k} ({t})": {"rectangles": r, "specs_covered": c} for (k, t), (r, c, _) in per.items()}}


def export(path: str, out: str) -> int:
    con = _connect(path)
    n = 0
    with open(out, "w") as f:
        f.write(json.dumps({"meta": dict(con.execute("SELECT k, v FROM meta"))}) + "\n")
        for key, lo, hi, val in con.execute("SELECT key, lo, hi, value FROM decisions ORDER BY seq"):
            f.write(json.dumps({"key": key, "lo": json.loads(lo), "hi": json.loads(hi), "value": json.loads(val)}) + "\n")
            n += 1
    con.close()
    return n


def import_(path: str, src: str) -> int:
    """Appends rows in file order (which keeps first-inserted priority); meta must match
    an existing table's, or initializes a new file."""
    lines = Path(src).read_text().splitlines()
    meta = json.loads(lines[0])["meta"]
    con = sqlite3.connect(path, timeout=60, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("BEGIN IMMEDIATE")
    con.execute("CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v TEXT)")
    con.execute("CREATE TABLE IF NOT EXISTS decisions(seq INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT, lo TEXT, hi TEXT, value TEXT)")
    have = dict(con.execute("SELECT k, v FROM meta"))
    if have and have != meta:
        con.execute("ROLLBACK")
        raise MorelloError(f"{src} was exported from a table with {meta}, but {path} has {have}")
    if not have:
        con.executemany("INSERT INTO meta VALUES (?, ?)", meta.items())
    n = 0
    for line in lines[1:]:
        o = json.loads(line)
        con.execute("INSERT INTO decisions(key, lo, hi, value) VALUES (?, ?, ?, ?)",
                    (o["key"], json.dumps(o["lo"]), json.dumps(o["hi"]), json.dumps(o["value"], separators=(",", ":"), sort_keys=True)))
        n += 1
    con.execute("COMMIT")
    con.close()
    return n


def compact(path: str) -> tuple[int, int]:
    """Re-merge: replay every row in sequence order into a fresh RectMemo, rewrite the file."""
    from .memo import RectMemo
    from .memo_db import decode_decision, encode_decision

    con = sqlite3.connect(path, timeout=60, isolation_level=None)
    con.execute("PRAGMA busy_timeout=60000")
    meta = dict(con.execute("SELECT k, v FROM meta"))
    m = RectMemo(tuple(meta["levels"].split(",")))
    rows = list(con.execute("SELECT key, lo, hi, value FROM decisions ORDER BY seq"))
    for key, lo, hi, val in rows:
        lo, hi = tuple(json.loads(lo)), tuple(json.loads(hi))
        m._insert_box(key, lo, hi, decode_decision(val, key, list(lo)))
    con.execute("BEGIN IMMEDIATE")
    con.execute("DELETE FROM decisions")
    for key, seq, lo, hi, d in sorted(m.boxes(), key=lambda b: b[1]):
        con.execute("INSERT INTO decisions(key, lo, hi, value) VALUES (?, ?, ?, ?)",
                    (key, json.dumps(list(lo)), json.dumps(list(hi)), encode_decision(d)))
    con.execute("COMMIT")
    con.execute("VACUUM")
    con.close()
    return len(rows), len(m)


def verify(path: str, rules=(), limit: int | None = None, quiet: bool = False) -> int:
    """Prove every box of the table (solver/verify_boxes.py); 1 if any claim is refuted."""
    from .engine import get_engine
    from .memo_db import open_memo
    from .verify_boxes import verify_table

    con = _connect(path)
    try:
        meta = dict(con.execute("SELECT k, v FROM meta"))
    except sqlite3.DatabaseError as e:
        raise MorelloError(f"{path} is not a memo table ({e})") from None
    finally:
        con.close()
    engine = get_engine(meta.get("target", "avx2"), tuple(str(r) for r in rules))
    try:
        memo = open_memo(Path(path), engine)
    except MorelloError as e:
        raise MorelloError(f"{e}\n(db verify checks a table against the logic files that built it: pass the same --rules)") from None
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
    s.add_argument("file")
    s.set_defaults(func=lambda a: print(json.dumps(stats(a.file), indent=2)) or 0)
    c = dsub.add_parser("compact", help="re-merge the rectangles")
    c.add_argument("file")
    c.set_defaults(func=lambda a: print("%d rectangles -> %d" % compact(a.file)) or 0)
    e = dsub.add_parser("export", help="write the table as JSON lines")
    e.add_argument("file")
    e.add_argument("out")
    e.set_defaults(func=lambda a: print(f"{export(a.file, a.out)} rectangles written") or 0)
    i = dsub.add_parser("import", help="append JSON lines into a table")
    i.add_argument("file")
    i.add_argument("src")
    i.set_defaults(func=lambda a: print(f"{import_(a.file, a.src)} rectangles read") or 0)
    v = dsub.add_parser("verify", help="prove every rectangle's decision legal for every spec it holds (z3)")
    v.add_argument("file")
    v.add_argument("--limit", type=int, help="only the first N rectangles")
    v.add_argument("--rules", action="append", default=[], metavar="FILE.lp|NAME", help="the extra rule files or rule sets the table was built with")
    v.add_argument("-q", "--quiet", action="store_true", help="no progress line, no list of unknowns")
    v.set_defaults(func=lambda a: verify(a.file, a.rules, a.limit, a.quiet))
