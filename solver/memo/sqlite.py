"""The persistent memo table: RectMemo boxes in one SQLite file (WAL).

Every box change is written inside an open IMMEDIATE transaction that is committed every
`batch` changes and on flush/close/exit, so a kill -9 loses at most one uncommitted batch
and a rerun resumes from the rest. The meta table records schema version, target and a
hash of the logic files; a mismatch is refused rather than silently reused."""

from __future__ import annotations

import atexit
import functools
import hashlib
import json
import os
import re
import sqlite3
import time
import weakref
import zlib
from fractions import Fraction
from pathlib import Path

from morello_asp.cost import cost_fingerprint
from morello_asp.errors import InputError, MemoError, MorelloError
from morello_asp.kinds import kind
from morello_asp.native import how_to_name
from morello_asp.rewrites import Action
from morello_asp.solver.logic.files import contents_hash, read_logic
from morello_asp.solver.memo.coords import from_coords, to_coords
from morello_asp.solver.memo.table import _UNREAD, Decision, RectMemo
from morello_asp.solver.search.engine import Expansion
from morello_asp.user_cache import user_cache_dir

SCHEMA_VERSION = "3"  # 2: box costs per unit of volume; 3: a stride axis per operand
EXPANSIONS_VERSION = "2"  # format of the expansion cache; another value empties it
# precompute and staged: a precompute's progress and answers not yet applied (solver/precompute/driver.py)
# The box index (_BOX_SQL) and its R*Tree's own tables.
BOX_TABLES = {"dkeys", "decisions_box", "decisions_box_node", "decisions_box_rowid", "decisions_box_parent"}
OUR_TABLES = {"meta", "decisions", "ekeys", "expansions", "sqlite_sequence", "precompute", "staged"} | BOX_TABLES
_SQLITE_MAGIC = b"SQLite format 3\0"


def logic_hash(files) -> str:
    """The hash of what the logic files say: their texts and those of every file they
    #include (rules/*.lp and a target's own files are included by synth.lp and the
    target's entry file), so a table solved under other rules is never reused."""
    return contents_hash(read_logic(files))


def ints_json(t, sep: str = ", ") -> str:
    """json.dumps(list(t)) (with `sep` between items) for a sequence of ints, without the
    encoder: a search writes tens of thousands of points and boxes, and the encoder took
    a tenth of the table's time."""
    if all(type(x) is int for x in t):
        return "[" + sep.join(map(str, t)) + "]"
    return json.dumps(list(t), separators=(sep, ": "))


def encode_decision(d: Decision) -> str:
    """Box values hold cost per unit of volume, a fraction: stored as text "n/d". A
    chain of sums ("n") is written only where there is one (most decisions have none)."""
    row = {
        "a": None if d.action is None else d.action.to_json(),
        "c": str(Fraction(d.cost)),
        "p": list(d.peak),
        "d": d.depth,
    }
    if d.chain:
        row["n"] = d.chain
    return json.dumps(row, separators=(",", ":"), sort_keys=True)


def operand_ranks(k, rank: int) -> tuple[int, ...]:
    """The rank of each operand of kind `k` at spec rank `rank`."""
    return tuple(len(acc) for acc in k.access(rank))


def key_ranks(key: str) -> tuple[int, ...]:
    """Operand ranks of the specs under a table key (what an action's JSON needs): the
    same at every point of the key, so found from its kind and rank alone."""

    k = json.loads(key)
    return operand_ranks(kind(k["kind"]), k["rank"])


class Decoder:
    """Box values (encode_decision's text) to Decisions, the ranks of each key computed
    once and each action decoded once per text (opening a table decodes every row)."""

    def __init__(self):
        self._ranks: dict[str, tuple[int, ...]] = {}
        self._actions: dict[tuple, Action] = {}
        # A third of a table's values are distinct (the same rewrite at the same cost per
        # volume recurs): each text is decoded once per operand ranks. Decisions are frozen.
        self._decisions: dict[tuple, Decision] = {}

    def __call__(self, val: str, key: str) -> Decision:
        ranks = self._ranks.get(key)
        if ranks is None:
            ranks = self._ranks[key] = key_ranks(key)
        d = self._decisions.get((val, ranks))
        if d is not None:
            return d
        o = json.loads(val)
        a = o["a"]
        if a is not None:
            text = json.dumps(a, sort_keys=True)
            act = self._actions.get((text, ranks))
            if act is None:
                act = self._actions[(text, ranks)] = Action.from_json(a, ranks)
            a = act
        d = self._decisions[(val, ranks)] = Decision(a, Fraction(o["c"]), tuple(o["p"]), o["d"], o.get("n", 0))
        return d


decode_decision = Decoder()  # shared by every table this process opens
_ROW_ERRORS = (ValueError, KeyError, TypeError, IndexError, MorelloError)  # what a row of another version raises


# The box index: an R*Tree over each row's key (by its id in dkeys) and its box's range on
# the first BOX_AXES axes of the point (the log2 dims of a power-of-two key, else the first
# operand's level, vector size, contiguity and alignment), kept by triggers whichever
# program writes the file. A look-up then reads the few rows whose boxes can hold its
# point (SqliteMemo._read_point), not every row of its key: most of a warm query's time.
BOX_AXES = 4
# Look-ups of a key answered from the box index before the key is read whole: at least
# POINT_READS, and one per ROWS_PER_POINT_READ of its rows (a point read costs about as
# much as reading that many rows, so a search that goes on to read the key whole spends
# at most twice what reading it at once would). A query makes a few look-ups per key; a
# search makes thousands, which the key's filed boxes answer.
POINT_READS = 8
ROWS_PER_POINT_READ = 40
COUNT_CAP = 256 * ROWS_PER_POINT_READ  # so at most 256 point reads before a key is read whole
_I32 = (-(2**31), 2**31 - 1)


def _box_axes(row: str) -> str:
    """SQL for the index's columns of `row` (new or a table alias): key id twice, then
    each axis's lower and upper bound, clamped to 32 bits (absent: the widest range)."""
    lo, hi = _I32
    cols = []
    for i in range(BOX_AXES):
        for corner, missing in (("lo", lo), ("hi", hi)):
            cols.append(f"max({lo}, min({hi}, coalesce(json_extract({row}.{corner}, '$[{i}]'), {missing})))")
    return ", ".join(cols)


_BOX_SQL = (
    "CREATE TABLE IF NOT EXISTS dkeys(id INTEGER PRIMARY KEY, key TEXT UNIQUE)",
    "CREATE VIRTUAL TABLE IF NOT EXISTS decisions_box USING rtree_i32(seq, k0, k1, "
    + ", ".join(f"a{i}, b{i}" for i in range(BOX_AXES))
    + ")",
    "CREATE TRIGGER IF NOT EXISTS decisions_box_ins AFTER INSERT ON decisions BEGIN "
    "INSERT OR IGNORE INTO dkeys(key) VALUES (new.key); "
    f"INSERT INTO decisions_box SELECT new.seq, id, id, {_box_axes('new')} FROM dkeys WHERE key = new.key; END",
    "CREATE TRIGGER IF NOT EXISTS decisions_box_upd AFTER UPDATE OF lo, hi ON decisions BEGIN "
    "DELETE FROM decisions_box WHERE seq = old.seq; "
    f"INSERT INTO decisions_box SELECT new.seq, id, id, {_box_axes('new')} FROM dkeys WHERE key = new.key; END",
    "CREATE TRIGGER IF NOT EXISTS decisions_box_del AFTER DELETE ON decisions BEGIN "
    "DELETE FROM decisions_box WHERE seq = old.seq; END",
)
# Rows written before the index existed (or by a version without it).
_BOX_FILL = (
    "INSERT OR IGNORE INTO dkeys(key) SELECT DISTINCT key FROM decisions",
    "DELETE FROM decisions_box",
    f"INSERT INTO decisions_box SELECT d.seq, k.id, k.id, {_box_axes('d')} "
    "FROM decisions d JOIN dkeys k ON k.key = d.key",
)


def _box_index(con: sqlite3.Connection) -> bool:
    """Create the box index (and fill it from the rows already there) inside the caller's
    transaction; False where this SQLite has no R*Tree or JSON functions."""
    had = "decisions_box" in _tables(con)
    try:
        for q in _BOX_SQL:
            con.execute(q)
    except sqlite3.OperationalError as e:
        if "rtree" in str(e) or "json" in str(e) or "no such module" in str(e):
            return False
        raise
    if not had:
        for q in _BOX_FILL:
            con.execute(q)
    return True


def _tables(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _damaged(path: Path, e: BaseException) -> MemoError:
    return MemoError(
        f"memo table {path} cannot be read ({e}): the file is damaged or truncated; move it away to start a new table"
    )


def _declared_size(head: bytes) -> int:
    """The database size an SQLite header declares (0 when it does not say)."""
    if len(head) < 100:
        return 100
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    pages = int.from_bytes(head[28:32], "big")
    if head[24:28] != head[92:96]:  # the page count is valid only if these agree
        return 0
    return page * pages


_WAL_MAGIC = (0x377F0682, 0x377F0683)  # the first 4 bytes of an SQLite write-ahead log


def _wal_has_frames(p: Path) -> bool:
    """Whether the table has a write-ahead log (by its magic number) that holds pages
    (more than its 32-byte header): anything else beside a short file leaves it refused."""
    try:
        wal = Path(f"{p}-wal")
        with open(wal, "rb") as f:
            magic = int.from_bytes(f.read(4), "big")
        return magic in _WAL_MAGIC and wal.stat().st_size > 32
    except OSError:
        return False


# Connections this process has open, per table file. Reading a file's header opens and
# closes a descriptor of it, and closing any descriptor of a file drops every POSIX lock
# the process holds on it, SQLite's included: a second connection's header check would
# strip the first one's locks, and another process, seeing none, could checkpoint and
# delete the write-ahead log under it (seen: a suite run lost its table while `synth` read
# it). A file with a connection open here was checked when that one opened.
class _Connection(sqlite3.Connection):
    file: tuple[int, int] | None = None

    def close(self) -> None:
        super().close()
        if self.file is not None:
            _OPEN.get(self.file, weakref.WeakSet()).discard(self)


_OPEN: dict[tuple[int, int], weakref.WeakSet] = {}


def _file_id(p: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(p)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def connect(path, create: bool = False) -> sqlite3.Connection:
    """A connection to the memo table file `path`, refusing anything that is not one
    before writing a byte: a directory, a file that is not SQLite (garbage, truncated
    header), or an SQLite database with tables of its own. With `create`, a missing file
    (in an existing directory) becomes a new table."""
    p = Path(path)
    if p.is_dir():
        raise MemoError(f"memo table {p} is a directory; give a file name, e.g. {p / 'morello.db'}")
    if not p.exists():
        if not create:
            raise MemoError(f"no memo table at {p}")
        if not p.parent.is_dir():
            raise MemoError(f"cannot create memo table {p}: directory {p.parent} does not exist")
        try:  # an empty file is an empty SQLite database; SQLite's own error would call it damaged
            p.touch(exist_ok=True)
        except OSError as e:
            raise MemoError(f"cannot create memo table {p}: {e.strerror}") from None
    elif not _OPEN.get(_file_id(p) or (0, 0)):
        try:
            with open(p, "rb") as f:
                head = f.read(100)
            size = p.stat().st_size
        except OSError as e:
            raise MemoError(f"cannot read memo table {p}: {e.strerror}") from None
        if head and head[: len(_SQLITE_MAGIC)] != _SQLITE_MAGIC:
            raise MemoError(f"{p} is not a memo table (not an SQLite database); refusing to touch it")
        # A checkpoint stopped part-way (the process killed while copying the write-ahead
        # log into the file) leaves the header ahead of the file's end; the log still
        # holds those pages and SQLite finishes the copy when the table is next opened.
        if head and (len(head) < 100 or (size < _declared_size(head) and not _wal_has_frames(p))):
            raise MemoError(
                f"memo table {p} is truncated ({size} bytes, its header declares {_declared_size(head)}); "
                "move it away to start a new table"
            )
    try:
        con = sqlite3.connect(str(p), timeout=60, isolation_level=None, factory=_Connection)
        con.execute("PRAGMA busy_timeout=60000")
        # In WAL mode NORMAL syncs at checkpoints, not at every commit: a commit survives
        # a crash or kill of the process (the OS has it), only a power loss or OS crash can
        # take the last commits back, and the file stays consistent either way.
        con.execute("PRAGMA synchronous=NORMAL")
        con.file = _file_id(p)  # the file exists now
        if con.file is not None:
            _OPEN.setdefault(con.file, weakref.WeakSet()).add(con)
        names = _tables(con)
    except sqlite3.DatabaseError as e:
        raise _damaged(p, e) from None
    if names and not ({"meta", "decisions"} <= names and names <= OUR_TABLES):
        con.close()
        shown = ", ".join(sorted(names - {"sqlite_sequence"})[:6])
        raise MemoError(
            f"{p} is an SQLite database of something else (tables: {shown}), not a morello-asp memo "
            "table; refusing to touch it"
        )
    return con


def _sql_errors(fn):
    """SQLite failures while a table is in use (disk full, read-only, damaged) become a
    MemoError naming the file."""

    @functools.wraps(fn)
    def wrapped(self, *a, **kw):
        try:
            return fn(self, *a, **kw)
        except sqlite3.DatabaseError as e:
            raise MemoError(f"memo table {self.path}: {e}") from None

    return wrapped


def _retry(fn, tries=50):
    """SQLite reports 'database is locked' past the busy timeout; back off and retry."""
    for i in range(tries):
        try:
            return fn()
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) and "busy" not in str(e) or i == tries - 1:
                raise
            time.sleep(0.05 * (i + 1))


def rule_name(rule) -> str:
    """A rule file as `--rules` takes it: a user's file by its absolute path, an optional
    rule set of encodings/options/ by its name."""
    p = Path(rule)
    return str(p.resolve()) if p.exists() else str(rule)


def recorded_rules(meta: dict) -> list[str] | None:
    """The rule files a table's meta says it was built with (their names as --rules takes
    them), or None for a table that does not record them (made by an older version)."""
    try:
        rules = json.loads(meta["rules"])
    except (KeyError, TypeError, ValueError):
        return None
    return [str(r) for r in rules] if isinstance(rules, list) else None


def _built_otherwise(path: Path, k: str, have: dict, v: str, rules: tuple[str, ...] | None) -> str:
    """Why a table is refused: what it was built with against what this run has, and
    how to use it (its target, its rule files) when that is known."""
    fresh = "or use another file (or delete this one)"
    if k == "target":
        return (
            f"memo table {path} was built for target {have.get(k)} but this run is for {v}; "
            f"to use it, pass {how_to_name(str(have.get(k)))}, {fresh}"
        )
    if k != "logic":
        return f"memo table {path} was built with {k}={have.get(k)!r} but this run has {k}={v!r}; use another file"
    built = recorded_rules(have)
    if built is None or rules is None:
        return (
            f"memo table {path} was built with other logic files than this run's (rule files, target files or "
            f"morello-asp's own rules differ); it does not record its rule files (an older table): pass the "
            f"--rules it was built with, {fresh}"
        )

    def named(rs) -> str:
        return "rule files " + ", ".join(rs) if rs else "no rule files"

    if list(built) != list(rules):
        how = " ".join(f"--rules {r}" for r in built) if built else "no --rules"
        return (
            f"memo table {path} was built with {named(built)} but this run has {named(rules)}; to use it, "
            f"run with {how}, {fresh}"
        )
    return (
        f"memo table {path} was built with the same {named(built)} as this run, but the logic files have "
        f"changed since (these rule files, the target's files or morello-asp's own rules); {fresh[3:]}"
    )


class SqliteMemo(RectMemo):
    def __init__(
        self,
        path: Path,
        target: str,
        levels,
        files_hash: str,
        batch: int = 200,
        refresh_every: float = 1.0,
        target_obj=None,
        cost: str | None = None,
        rules: tuple[str, ...] | None = None,
    ):
        super().__init__(levels)
        if rules is not None:
            rules = tuple(rule_name(r) for r in rules)
        self.refresh_every = refresh_every
        self.path = Path(path)
        self.batch = batch
        self.target = target_obj
        self._pending = 0
        self._in_txn = False
        self._next_seq = 0
        self._unwritten: dict[int, list] = {}
        self._moved: dict[int, tuple] = {}
        self._dropped: list[int] = []
        want = {
            "schema": SCHEMA_VERSION,
            "target": target,
            "levels": ",".join(levels),
            "logic": files_hash,
            "cost": cost or cost_fingerprint(),  # the cost model's code (morello_asp/cost.py)
        }
        self.con = connect(self.path, create=True)
        try:
            have = self._init_tables(want, rules)
        except sqlite3.DatabaseError as e:
            self.con.close()
            raise _damaged(self.path, e) from None
        for k, v in want.items():
            if have.get(k) != v:
                self.con.close()
                raise MemoError(_built_otherwise(self.path, k, have, v, rules))
        if rules is not None and "rules" not in have:  # a table this version made before it recorded them
            self._record_rules(rules)
        self._mine: set[int] = set()
        self._seen = 0
        self._refreshed = time.monotonic()
        self._ekeys: dict[str, int] = {}
        self._ekeys_by_id: dict[int, str] = {}
        self._kids: dict[tuple, object] = {}  # (key id, point) -> decoded spec class
        self._actions: dict[tuple, Action] = {}  # (action JSON text, ranks) -> Action
        self._action_json: dict[Action, str] = {}  # action -> its JSON text as a JSON string
        self._refs: dict = {}  # spec class -> "[key id, point]"
        self._keys_json: dict = {}  # an expansion's child keys -> their JSON text
        self.expansions_loaded = 0
        self._zeros = tuple(0 for _ in levels)
        self._coords: dict = {}  # spec class -> (key, point without limits)
        self.expansions_saved = 0
        # Rows are read per key, when a look-up or an insertion first needs that key
        # (_need): a query reads the few keys of its program, not the whole table.
        self._loaded: set[str] = set()
        self._point_reads: dict[str, int] = {}  # key -> look-ups _read_point answered
        self._point_budget: dict[str, int] = {}  # key -> how many it may answer
        self._dkeys: dict[str, int] = {}  # key -> its id in the box index
        self._point_sql: dict[int, str] = {}
        self._all_loaded = False
        try:
            self._seen = self.con.execute("SELECT coalesce(max(seq), 0) FROM decisions").fetchone()[0]
            for kid, key in self.con.execute("SELECT id, key FROM ekeys"):
                self._ekeys[key] = kid
                self._ekeys_by_id[kid] = key
        except sqlite3.DatabaseError as e:
            self.con.close()
            raise _damaged(self.path, e) from None
        atexit.register(self.close)

    def _unreadable(self, e: Exception) -> MemoError:
        return MemoError(
            f"memo table {self.path} has a row this version cannot read ({type(e).__name__}: {e}); "
            "use another file (or delete this one)"
        )

    def _decode(self, value, key):
        try:
            return decode_decision(value, key)
        except _ROW_ERRORS as e:
            raise self._unreadable(e) from None

    def _read_rows(self, rows) -> None:
        """Stage rows (seq, key, lo, hi, value) read in sequence order; values are decoded
        when a look-up returns them or the key is filed. A row this version cannot read is
        a MemoError naming the file."""
        try:
            rows = list(rows)
            # One json.loads for every corner at once: a third of the time of one per corner.
            corners = json.loads("[" + ",".join(f"{lo},{hi}" for _, _, lo, hi, _ in rows) + "]")
            if len(corners) != 2 * len(rows):
                raise ValueError("a box corner is not one list")
            by_key: dict[str, list[list]] = {}
            for i, (seq, key, _, _, val) in enumerate(rows):
                by_key.setdefault(key, []).append([seq, tuple(corners[2 * i]), tuple(corners[2 * i + 1]), val])
            for key, staged in by_key.items():
                self._stage(key, staged)
        except sqlite3.DatabaseError as e:
            raise _damaged(self.path, e) from None
        except _ROW_ERRORS as e:
            raise self._unreadable(e) from None

    def _need(self, key) -> None:
        if key in self._loaded or self._all_loaded:
            return
        self._loaded.add(key)
        self._read_rows(
            self.con.execute(
                "SELECT seq, key, lo, hi, value FROM decisions WHERE key = ? AND seq <= ? ORDER BY seq",
                (key, self._seen),
            )
        )

    @_sql_errors
    def _read_point(self, key, p):
        if not self._has_boxes or self._all_loaded or key in self._loaded:
            return _UNREAD
        try:
            n = self._point_reads.get(key)
            if n is None:
                # counted up to a cap: a key's whole count took 12 ms at 96,000 rows
                (rows,) = self.con.execute(
                    "SELECT count(*) FROM (SELECT 1 FROM decisions WHERE key = ? AND seq <= ? LIMIT ?)",
                    (key, self._seen, COUNT_CAP),
                ).fetchone()
                self._point_budget[key] = max(POINT_READS, rows // ROWS_PER_POINT_READ)
                n = 0
            if n >= self._point_budget[key]:
                return _UNREAD
            self._point_reads[key] = n + 1
            kid = self._dkeys.get(key)
            if kid is None:
                row = self.con.execute("SELECT id FROM dkeys WHERE key = ?", (key,)).fetchone()
                if row is None:
                    return None
                kid = self._dkeys[key] = row[0]
            m = min(BOX_AXES, len(p) - self._split(key))
            sql = self._point_sql.get(m)
            if sql is None:
                axes = "".join(f" AND b.a{i} <= ? AND b.b{i} >= ?" for i in range(m))
                sql = self._point_sql[m] = (
                    "SELECT d.seq, d.lo, d.hi, d.value FROM decisions_box b JOIN decisions d ON d.seq = b.seq "
                    f"WHERE b.k0 <= ? AND b.k1 >= ?{axes} AND b.seq <= ? ORDER BY b.seq"
                )
            args = (kid, kid, *(x for v in p[:m] for x in (v, v)), self._seen)
            for _, lo, hi, val in self.con.execute(sql, args):
                if all(a <= x <= c for a, x, c in zip(json.loads(lo), p, json.loads(hi))):
                    return self._decode(val, key)
        except _ROW_ERRORS as e:
            raise self._unreadable(e) from None
        return None

    def _need_all(self) -> None:
        if self._all_loaded:
            return
        loaded = self._loaded
        self._all_loaded = True
        self._read_rows(
            row
            for row in self.con.execute(
                "SELECT seq, key, lo, hi, value FROM decisions WHERE seq <= ? ORDER BY seq", (self._seen,)
            )
            if row[1] not in loaded
        )

    def _record_rules(self, rules: tuple[str, ...]) -> None:
        """Note the rule files in a table that matched this run's logic but predates the
        record (best effort: a read-only table stays as it is)."""
        try:
            _retry(
                lambda: self.con.execute("INSERT OR IGNORE INTO meta VALUES ('rules', ?)", (json.dumps(list(rules)),))
            )
        except sqlite3.DatabaseError:
            pass

    def _init_tables(self, want: dict, rules: tuple[str, ...] | None = None) -> dict:
        """Create the tables in a new file; in one of ours, add what a newer version adds
        (the expansion cache) and empty that cache if its format changed."""
        _retry(lambda: self.con.execute("PRAGMA journal_mode=WAL"))
        self._has_boxes = False

        def init():
            self.con.execute("BEGIN IMMEDIATE")
            try:
                self.con.execute("CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v TEXT)")
                self.con.execute(
                    "CREATE TABLE IF NOT EXISTS decisions(seq INTEGER PRIMARY KEY AUTOINCREMENT, "
                    "key TEXT, lo TEXT, hi TEXT, value TEXT)"
                )
                self.con.execute("CREATE TABLE IF NOT EXISTS ekeys(id INTEGER PRIMARY KEY, key TEXT UNIQUE)")
                # Rows are read per key (_need); older tables get the index when opened.
                self.con.execute("CREATE INDEX IF NOT EXISTS decisions_by_key ON decisions(key, seq)")
                self._has_boxes = _box_index(self.con)
                self.con.execute(
                    "CREATE TABLE IF NOT EXISTS expansions(kid INTEGER, point TEXT, value BLOB, "
                    "PRIMARY KEY(kid, point)) WITHOUT ROWID"
                )
                have = dict(self.con.execute("SELECT k, v FROM meta"))
                if not have:
                    self.con.executemany("INSERT INTO meta VALUES (?, ?)", want.items())
                    if rules is not None:
                        self.con.execute("INSERT INTO meta VALUES ('rules', ?)", (json.dumps(list(rules)),))
                if have.get("expansions") != EXPANSIONS_VERSION:
                    self.con.execute("DELETE FROM expansions")
                    self.con.execute("DELETE FROM ekeys")
                    self.con.execute("INSERT OR REPLACE INTO meta VALUES ('expansions', ?)", (EXPANSIONS_VERSION,))
                self.con.execute("COMMIT")
            except BaseException:
                if self.con.in_transaction:
                    self.con.execute("ROLLBACK")
                raise

        have = dict(self.con.execute("SELECT k, v FROM meta")) if _tables(self.con) else {}
        if have and any(have.get(k) != v for k, v in want.items()):
            return have  # refused by the caller, untouched
        _retry(init)
        return dict(self.con.execute("SELECT k, v FROM meta"))

    def get(self, spec):
        d = super().get(spec)
        if d is None and time.monotonic() - self._refreshed >= self.refresh_every:
            seen = self._seen
            # new rows of keys read whole, or of others (which the box index reads now)
            if self.refresh() or self._seen != seen:
                d = super().get(spec)
        return d

    @_sql_errors
    def refresh(self) -> int:
        """Load rows other processes committed since the last look (a miss triggers
        this at most every `refresh_every` seconds); returns how many were new."""
        self._refreshed = time.monotonic()
        rows = list(
            self.con.execute("SELECT seq, key, lo, hi, value FROM decisions WHERE seq > ? ORDER BY seq", (self._seen,))
        )
        n = 0
        for seq, key, lo, hi, val in rows:
            self._seen = max(self._seen, seq)
            if seq in self._mine or not (self._all_loaded or key in self._loaded):
                continue  # ours, or of a key not read yet (_need reads it whole)
            lo, hi = json.loads(lo), json.loads(hi)
            self._add_loaded(seq, key, lo, hi, self._decode(val, key), sort=True)
            n += 1
        return n

    @_sql_errors
    def _begin(self):
        if not self._in_txn:
            _retry(lambda: self.con.execute("BEGIN IMMEDIATE"))
            self._in_txn = True
            # No other writer until COMMIT: this transaction's rows are numbered here,
            # after every number the table has used (AUTOINCREMENT never reuses one).
            (self._next_seq,) = self.con.execute(
                "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'decisions'), 0), "
                "coalesce((SELECT max(seq) FROM decisions), 0))"
            ).fetchone()

    def _tick(self):
        self._pending += 1
        if self._pending >= self.batch:
            self.flush()

    # Box changes are written when the transaction commits (flush), not one statement
    # each: a new box usually grows by merges, or merges into another, before then, and
    # every statement also updates the box index. Rows of this transaction not written
    # yet (seq -> [key, lo, hi, decision]), and rows of earlier ones changed or dropped.
    @_sql_errors
    def _store_insert(self, key, lo, hi, d) -> int:
        self._begin()
        self._next_seq += 1
        seq = self._next_seq
        self._unwritten[seq] = [key, lo, hi, d]
        self._mine.add(seq)
        return seq

    @_sql_errors
    def _store_update(self, seq, lo, hi) -> None:
        self._begin()
        row = self._unwritten.get(seq)
        if row is not None:
            row[1], row[2] = lo, hi
        else:
            self._moved[seq] = (lo, hi)

    @_sql_errors
    def _store_delete(self, seq) -> None:
        self._begin()
        if self._unwritten.pop(seq, None) is None:
            self._moved.pop(seq, None)
            self._dropped.append(seq)

    def _write_boxes(self) -> None:
        """The transaction's box changes, as three statements."""
        if self._dropped:
            self.con.executemany("DELETE FROM decisions WHERE seq = ?", [(q,) for q in self._dropped])
        if self._moved:
            self.con.executemany(
                "UPDATE decisions SET lo = ?, hi = ? WHERE seq = ?",
                [(ints_json(lo), ints_json(hi), q) for q, (lo, hi) in self._moved.items()],
            )
        if self._unwritten:
            self.con.executemany(
                "INSERT INTO decisions(seq, key, lo, hi, value) VALUES (?, ?, ?, ?, ?)",
                [
                    (q, key, ints_json(lo), ints_json(hi), encode_decision(d))
                    for q, (key, lo, hi, d) in sorted(self._unwritten.items())
                ],
            )
        self._unwritten.clear()
        self._moved.clear()
        self._dropped.clear()

    # --- the expansion cache ------------------------------------------------------
    # What the logic files say about each spec class (its rewrites and their sub-spec
    # classes), saved as a search grounds it: a search that is interrupted (Ctrl-C,
    # kill -9) during its long expansion phase resumes without grounding again what it
    # had grounded, and a search of a neighbouring spec reuses the classes they share.
    # Key strings of the coordinates are numbered in `ekeys`; values are zlib'd JSON.
    def _key_id(self, key: str, create: bool = False) -> int | None:
        kid = self._ekeys.get(key)
        if kid is None:
            row = self.con.execute("SELECT id FROM ekeys WHERE key = ?", (key,)).fetchone()
            if row is None and create:
                self._begin()
                self.con.execute("INSERT OR IGNORE INTO ekeys(key) VALUES (?)", (key,))  # another writer may have
                row = self.con.execute("SELECT id FROM ekeys WHERE key = ?", (key,)).fetchone()
            if row is not None:
                kid = self._ekeys[key] = row[0]
                self._ekeys_by_id[kid] = key
        return kid

    def _class_coords(self, cls) -> tuple[str, tuple]:
        """A spec class's coordinates, as the table's own keys have them (with limits, so
        the coordinates cached on the class object serve both), limits cut off."""
        got = self._coords.get(cls)
        if got is None:
            key, point = to_coords(cls.with_limits(self._zeros), self.levels)
            got = self._coords[cls] = (key, point[: len(point) - len(self._zeros)])
        return got

    def _kid(self, kid: int, point: tuple):
        spec = self._kids.get((kid, point))
        if spec is None:
            key = self._ekeys_by_id.get(kid)
            if key is None:
                key = self.con.execute("SELECT key FROM ekeys WHERE id = ?", (kid,)).fetchone()[0]
                self._ekeys_by_id[kid] = key
            spec = from_coords(key, point + self._zeros, self.target).without_limits
            self._kids[(kid, point)] = spec
        return spec

    def _decode_expansions(self, cls, blob: bytes) -> list:
        ranks = tuple(len(s) for s in cls.operand_shapes)
        out = []
        for atext, kids, keys, kc, al in json.loads(zlib.decompress(blob)):
            action = self._actions.get((atext, ranks))
            if action is None:
                action = self._actions[(atext, ranks)] = Action.from_json(json.loads(atext), ranks)
            children = tuple(self._kid(k, tuple(pt)) for k, pt in kids)
            out.append(Expansion(action, children, tuple(keys), kc, tuple(al) if al else None))
        return out

    @_sql_errors
    def load_expansions(self, classes) -> dict:
        """The stored expansions of those spec classes (limits dropped) that have some."""
        out = {}
        for c in classes:
            key, point = self._class_coords(c)
            kid = self._key_id(key)
            if kid is None:
                continue
            row = self.con.execute(
                "SELECT value FROM expansions WHERE kid = ? AND point = ?", (kid, ints_json(point))
            ).fetchone()
            if row is None:
                continue
            try:
                out[c] = self._decode_expansions(c, row[0])
            except (ValueError, KeyError, TypeError, IndexError, zlib.error, MorelloError):
                continue  # unreadable: ground it again
        self.expansions_loaded += len(out)
        return out

    @_sql_errors
    def save_expansions(self, items: dict) -> None:
        """Store spec classes' expansions (committed with the next flush), in
        store_expansion_rows' format. The JSON text is assembled from pieces kept per
        action and per child class: a search saves every class it grounds, and the same
        children and actions recur across them."""
        out = []
        refs = self._refs
        for c, exps in items.items():
            key, point = self._class_coords(c)
            enc = []
            for e in exps:
                kids = ",".join([refs.get(ch) or self._child_ref(ch) for ch in e.children])
                al = f"[{e.alloc[0]},{e.alloc[1]}]" if e.alloc else "null"
                kc = "null" if e.kernel_cost is None else str(e.kernel_cost)  # an int
                keys = self._keys_json.get(e.keys)
                if keys is None:
                    keys = self._keys_json[e.keys] = json.dumps(list(e.keys))
                enc.append(f"[{self._action_ref(e.action)},[{kids}],{keys},{kc},{al}]")
            out.append((self._key_id(key, create=True), ints_json(point), "[" + ",".join(enc) + "]"))
        self._insert_expansions(out)

    def _action_ref(self, action) -> str:
        """An action's JSON text, as a JSON string."""
        try:
            ref = self._action_json.get(action)
            hashable = True
        except TypeError:  # an action with unhashable arguments: not kept
            ref, hashable = None, False
        if ref is None:
            ref = json.dumps(json.dumps(action.to_json(), separators=(",", ":"), sort_keys=True))
            if hashable:
                self._action_json[action] = ref
        return ref

    def _child_ref(self, cls) -> str:
        """A child class as [key id, point], JSON text."""
        ref = self._refs.get(cls)
        if ref is None:
            key, point = self._class_coords(cls)
            ref = self._refs[cls] = f"[{self._key_id(key, create=True)},{ints_json(point, ',')}]"
        return ref

    @_sql_errors
    def store_expansion_rows(self, rows) -> None:
        """Rows (class key, point as JSON text, expansions) into the expansion cache; an
        expansion is [action JSON text, [[child class key, child point], ...], child keys,
        kernel cost, allocation]. Keys are numbered in this file's ekeys and each row's
        expansions kept as zlib'd compact JSON; a class the cache has keeps its own."""
        out = []
        for key, point, enc in rows:
            for exp in enc:
                exp[1] = [[self._key_id(k, create=True), p] for k, p in exp[1]]
            out.append((self._key_id(key, create=True), point, json.dumps(enc, separators=(",", ":"))))
        self._insert_expansions(out)

    def _insert_expansions(self, rows) -> None:
        """Rows (key id, point as JSON text, expansions as JSON text), zlib'd into the
        cache; a class the cache has keeps its own."""
        if rows:
            self._begin()
            self.con.executemany(
                "INSERT OR IGNORE INTO expansions VALUES (?, ?, ?)",
                [(kid, point, zlib.compress(text.encode(), 1)) for kid, point, text in rows],
            )
            self.expansions_saved += len(rows)

    def put(self, spec, decision) -> None:
        super().put(spec, decision)
        self._tick()

    @_sql_errors
    def flush(self) -> None:
        if self._in_txn:
            self._write_boxes()
            _retry(lambda: self.con.execute("COMMIT"))
            self._in_txn = False
        self._pending = 0

    def close(self) -> None:
        try:
            self.flush()
            self.con.close()
        except sqlite3.ProgrammingError:
            pass  # already closed
        atexit.unregister(self.close)  # nothing left to do at exit: let the table be freed


def default_table(engine) -> Path | None:
    """Where work is kept when the user names no table, so a rerun is answered in seconds:
    one file per target and set of logic files (their hash) in the module cache directory
    ($MORELLO_ASP_CACHE, default ~/.cache/morello-asp). MORELLO_ASP_DB=off keeps nothing."""
    switch = os.environ.get("MORELLO_ASP_DB", "").strip().lower()
    if switch == "off":
        return None
    if switch not in ("", "on"):
        raise InputError(
            f"MORELLO_ASP_DB={os.environ['MORELLO_ASP_DB']!r}: expected off or on (name a table with --db FILE)"
        )
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", engine.target.name)
    key = hashlib.sha256(f"{engine.logic_hash} {cost_fingerprint()}".encode()).hexdigest()
    return user_cache_dir() / f"{name}-{key[:16]}.db"


def open_memo(path: Path, engine, batch: int = 200) -> SqliteMemo:
    """The persistent table for `engine`'s target and logic files."""
    t = engine.target
    return SqliteMemo(path, t.name, tuple(t.level_names), engine.logic_hash, batch, target_obj=t, rules=engine.rules)
