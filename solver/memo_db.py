"""The persistent memo table: RectMemo boxes in one SQLite file (WAL).

Every box change is written inside an open IMMEDIATE transaction that is committed every
`batch` changes and on flush/close/exit, so a kill -9 loses at most one uncommitted batch
and a rerun resumes from the rest. The meta table records schema version, target and a
hash of the logic files; a mismatch is refused rather than silently reused."""
from __future__ import annotations

import atexit
import hashlib
import json
import sqlite3
import time
from fractions import Fraction
from pathlib import Path

from morello_asp.errors import MorelloError

from .coords import from_coords
from .memo import Decision, RectMemo

SCHEMA_VERSION = "2"  # 2: box costs per unit of volume


def logic_hash(files) -> str:
    h = hashlib.sha256()
    for f in files:
        h.update(Path(f).name.encode() + b"\0" + Path(f).read_bytes() + b"\0")
    return h.hexdigest()


def encode_decision(d: Decision) -> str:
    """Box values hold cost per unit of volume, a fraction: stored as text "n/d"."""
    return json.dumps({"a": None if d.action is None else d.action.to_json(), "c": str(Fraction(d.cost)),
                       "p": list(d.peak), "d": d.depth}, separators=(",", ":"), sort_keys=True)


def decode_decision(text: str, key: str, lo) -> Decision:
    from .engine import Action

    o = json.loads(text)
    a = None
    if o["a"] is not None:
        ranks = [len(s) for s in from_coords(key, lo).operand_shapes]
        a = Action.from_json(o["a"], ranks)
    return Decision(a, Fraction(o["c"]), tuple(o["p"]), o["d"])


def _retry(fn, tries=50):
    """SQLite reports 'database is locked' past the busy timeout; back off and retry."""
    for i in range(tries):
        try:
            return fn()
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) and "busy" not in str(e) or i == tries - 1:
                raise
            time.sleep(0.05 * (i + 1))


class SqliteMemo(RectMemo):
    def __init__(self, path: Path, target: str, levels, files_hash: str, batch: int = 200,
                 refresh_every: float = 1.0):
        super().__init__(levels)
        self.refresh_every = refresh_every
        self.path = Path(path)
        self.batch = batch
        self._pending = 0
        self._in_txn = False
        self.con = sqlite3.connect(str(path), timeout=60, isolation_level=None)
        self.con.execute("PRAGMA busy_timeout=60000")
        _retry(lambda: self.con.execute("PRAGMA journal_mode=WAL"))
        _retry(lambda: self.con.executescript(
            "BEGIN IMMEDIATE;"
            "CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v TEXT);"
            "CREATE TABLE IF NOT EXISTS decisions(seq INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT, lo TEXT, hi TEXT, value TEXT);"
            "COMMIT;"))
        want = {"schema": SCHEMA_VERSION, "target": target, "levels": ",".join(levels), "logic": files_hash}
        have = dict(self.con.execute("SELECT k, v FROM meta"))
        if not have:
            def init():
                self.con.execute("BEGIN IMMEDIATE")
                if not list(self.con.execute("SELECT 1 FROM meta")):
                    self.con.executemany("INSERT INTO meta VALUES (?, ?)", want.items())
                self.con.execute("COMMIT")
            _retry(init)
            have = dict(self.con.execute("SELECT k, v FROM meta"))
        for k, v in want.items():
            if have.get(k) != v:
                self.con.close()
                raise MorelloError(
                    f"memo table {path} was built with {k}={have.get(k)!r} but this run has {k}={v!r}; "
                    "use another file (or delete this one)")
        self._mine: set[int] = set()
        self._seen = 0
        self._refreshed = time.monotonic()
        for seq, key, lo, hi, val in self.con.execute("SELECT seq, key, lo, hi, value FROM decisions ORDER BY seq"):
            lo, hi = json.loads(lo), json.loads(hi)
            self._add_loaded(seq, key, lo, hi, decode_decision(val, key, lo))
            self._seen = max(self._seen, seq)
        for g in self._g.values():
            for bs in g.values():
                bs.sort(key=lambda b: b[0])
        atexit.register(self.close)

    def get(self, spec):
        d = super().get(spec)
        if d is None and time.monotonic() - self._refreshed >= self.refresh_every:
            if self.refresh():
                d = super().get(spec)
        return d

    def refresh(self) -> int:
        """Load rows other processes committed since the last look (a miss triggers
        this at most every `refresh_every` seconds); returns how many were new."""
        self._refreshed = time.monotonic()
        rows = list(self.con.execute(
            "SELECT seq, key, lo, hi, value FROM decisions WHERE seq > ? ORDER BY seq", (self._seen,)))
        n = 0
        for seq, key, lo, hi, val in rows:
            self._seen = max(self._seen, seq)
            if seq in self._mine:
                continue
            lo, hi = json.loads(lo), json.loads(hi)
            self._add_loaded(seq, key, lo, hi, decode_decision(val, key, lo), sort=True)
            n += 1
        return n

    def _begin(self):
        if not self._in_txn:
            _retry(lambda: self.con.execute("BEGIN IMMEDIATE"))
            self._in_txn = True

    def _tick(self):
        self._pending += 1
        if self._pending >= self.batch:
            self.flush()

    def _store_insert(self, key, lo, hi, d) -> int:
        self._begin()
        cur = self.con.execute("INSERT INTO decisions(key, lo, hi, value) VALUES (?, ?, ?, ?)",
                               (key, json.dumps(list(lo)), json.dumps(list(hi)), encode_decision(d)))
        self._mine.add(cur.lastrowid)
        return cur.lastrowid

    def _store_update(self, seq, lo, hi) -> None:
        self._begin()
        self.con.execute("UPDATE decisions SET lo = ?, hi = ? WHERE seq = ?", (json.dumps(list(lo)), json.dumps(list(hi)), seq))

    def _store_delete(self, seq) -> None:
        self._begin()
        self.con.execute("DELETE FROM decisions WHERE seq = ?", (seq,))

    def put(self, spec, decision) -> None:
        super().put(spec, decision)
        self._tick()

    def flush(self) -> None:
        if self._in_txn:
            _retry(lambda: self.con.execute("COMMIT"))
            self._in_txn = False
        self._pending = 0

    def close(self) -> None:
        try:
            self.flush()
            self.con.close()
        except sqlite3.ProgrammingError:
            pass  # already closed


def open_memo(path: Path, engine, batch: int = 200) -> SqliteMemo:
    """The persistent table for `engine`'s target and logic files."""
    t = engine.target
    return SqliteMemo(path, t.name, tuple(t.level_names), logic_hash(engine.files), batch)
