"""The SQLite memo table: reuse across processes, refusal of foreign tables, survival of
kill -9, and two writers on one file. Every program is checked against numpy."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from dataclasses import replace

import pytest

from morello_asp import parse_spec
from morello_asp.errors import MorelloError
from morello_asp.solver.memo.table import Decision
from morello_asp.synthesis import synthesize

SPEC = "Matmul(4x4x8, f32)"
# Large enough to be killed part-way: 4x4x8 ends (the process too) in about a second,
# sometimes before a poll sees its rows.
KILL_SPEC = "Matmul(8x8x8, f32)"
SCRIPT = (
    "import sys; from morello_asp.synthesis import synthesize; "
    "imp = synthesize(sys.argv[1], db=sys.argv[2]); print(imp.cost.main); print(imp)"
)


def run(spec, db, **kw):
    r = subprocess.run([sys.executable, "-c", SCRIPT, spec, str(db)], capture_output=True, text=True, **kw)
    assert r.returncode == 0, r.stderr  # what went wrong, in the test's report
    return r.stdout


def rows(db):
    with sqlite3.connect(str(db)) as c:
        return c.execute("SELECT count(*) FROM decisions").fetchone()[0]


def test_table_is_reused_and_gives_the_same_program(tmp_path):
    db = tmp_path / "m.db"
    a = synthesize("Matmul(4x4x4, f32)", db=db)
    n = rows(db)
    assert n > 100
    b = synthesize("Matmul(4x4x4, f32)", db=db)
    assert str(a) == str(b) and rows(db) == n  # all answers came from the table
    err, tol = b.compile().check()
    assert err <= tol


def test_table_built_by_other_rules_is_refused(tmp_path):
    db = tmp_path / "m.db"
    synthesize("Matmul(2x2x2, f32)", db=db)
    extra = tmp_path / "extra.lp"
    extra.write_text("% no-op rule file\nforbid(S, A) :- cand(S, A), A = select(dot_product_loop).\n")
    with pytest.raises(MorelloError, match="was built with no rule files but this run has rule files"):
        synthesize("Matmul(2x2x2, f32)", db=db, rules=[extra])


def test_a_table_refused_for_its_rules_names_them_and_how_to_use_it(tmp_path, capsys, monkeypatch):
    """Issue 56: a table built with --rules X, then used without them, said only "use
    another file": it names the rule files it was built with, this run's, and the option
    that uses it; a rule file edited since, and a table too old to record its rules, are
    told apart."""
    from morello_asp.cli import main

    db = tmp_path / "m.db"
    extra = tmp_path / "extra.lp"
    extra.write_text("forbid(S, A) :- cand(S, A), A = select(dot_product_loop).\n")
    assert main(["synth", "Matmul(2x2x2, f32)", "-q", "--db", str(db), "--rules", str(extra)]) == 0
    capsys.readouterr()

    def refused(*argv) -> str:
        rc = main(["synth", "Matmul(2x2x2, f32)", "-q", "--db", str(db), *argv])
        out, err = capsys.readouterr()
        assert rc == 2 and not out and len(err.strip().splitlines()) == 1, (rc, out, err)
        return err

    err = refused()
    assert f"was built with rule files {extra} but this run has no rule files" in err, err
    assert f"to use it, run with --rules {extra}" in err, err
    err = refused("--rules", "fuse_in_cache")  # an optional rule set is named as --rules takes it
    assert f"built with rule files {extra} but this run has rule files fuse_in_cache" in err, err
    err = refused("--target", "avx512", "--rules", str(extra))
    assert "was built for target avx2 but this run is for avx512; to use it, pass --target avx2" in err, err
    with sqlite3.connect(str(db)) as c:
        assert json.loads(c.execute("SELECT v FROM meta WHERE k = 'rules'").fetchone()[0]) == [str(extra)]
    extra.write_text(extra.read_text() + "% edited\n")
    from morello_asp.solver.search import engine

    monkeypatch.setattr(engine, "_ENGINES", {})  # as a new process would: the engine reads the file as it is now
    err = refused("--rules", str(extra))
    assert "was built with the same rule files" in err and "have changed since" in err, err
    with sqlite3.connect(str(db)) as c:  # a table made before tables recorded their rule files
        c.execute("DELETE FROM meta WHERE k = 'rules'")
    err = refused()
    assert "does not record its rule files" in err and "pass the --rules it was built with" in err, err


@pytest.mark.slow
def test_kill_9_keeps_committed_rows_and_rerun_matches(tmp_path):
    db = tmp_path / "k.db"
    p = subprocess.Popen([sys.executable, "-c", SCRIPT, KILL_SPEC, str(db)], stdout=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and p.poll() is None:
        time.sleep(0.2)
        try:
            if db.exists() and rows(db) >= 500:
                break
        except sqlite3.OperationalError:
            pass
    assert p.poll() is None, "synthesis finished before it could be killed; use a larger spec"
    p.send_signal(signal.SIGKILL)
    p.wait()
    committed = rows(db)
    assert committed >= 500
    resumed = run(KILL_SPEC, db)
    assert rows(db) >= committed
    clean = run(KILL_SPEC, tmp_path / "clean.db")
    assert resumed == clean
    err, tol = synthesize(KILL_SPEC, db=db).compile().check()  # answered from the resumed table
    assert err <= tol


@pytest.mark.slow
def test_two_processes_on_one_file(tmp_path):
    db = tmp_path / "c.db"
    specs = ["Matmul(4x4x8, f32)", "Matmul(4x4x4, f32)"]
    procs = [
        subprocess.Popen([sys.executable, "-c", SCRIPT, s, str(db)], stdout=subprocess.PIPE, text=True) for s in specs
    ]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    for i, (s, out) in enumerate(zip(specs, outs)):
        assert out == run(s, tmp_path / f"solo{i}.db")
    for s in specs:
        err, tol = synthesize(s, db=db).compile().check()
        assert err <= tol


def test_a_running_search_sees_rows_another_writer_committed(tmp_path):
    """Two tables open on one file, as two processes would have them: what one commits,
    the other finds on its next miss (refresh), and the program built from it runs."""
    from morello_asp.solver.memo.sqlite import open_memo
    from morello_asp.solver.search.dp import Search
    from morello_asp.solver.search.engine import get_engine

    engine = get_engine()
    db = tmp_path / "shared.db"
    a = open_memo(db, engine)
    b = open_memo(db, engine)
    b.refresh_every = 0.0
    spec = parse_spec("Matmul(2x4x4, f32)")
    assert b.get(spec) is None
    imp = Search(engine, a).build(spec)
    a.flush()
    d = b.get(spec)
    assert d is not None and d.cost == imp.cost.main
    again = Search(engine, b).build(spec)  # every sub-spec answered by the other writer's rows
    assert str(again) == str(imp) and rows(db) == len(list(a.boxes()))
    err, tol = again.compile().check()
    assert err <= tol
    a.close()
    b.close()


def test_a_second_connection_leaves_the_first_ones_locks(tmp_path):
    """Opening a table twice in one process must not drop the first connection's locks
    (closing any descriptor of a file drops the process's POSIX locks on it): another
    process, seeing none, would checkpoint and delete the write-ahead log under the
    first connection, and what it wrote next would be lost."""
    from morello_asp.solver.memo.sqlite import connect

    p = tmp_path / "t.db"
    first = connect(p, create=True)
    first.execute("PRAGMA journal_mode=WAL")
    first.execute("CREATE TABLE meta(k TEXT PRIMARY KEY, v TEXT)")
    first.execute("CREATE TABLE decisions(seq INTEGER PRIMARY KEY, key TEXT, lo TEXT, hi TEXT, value TEXT)")
    first.execute("INSERT INTO meta VALUES ('a', '1')")
    second = connect(p)  # reads the file's header
    count = (
        f"import sqlite3; c = sqlite3.connect({str(p)!r}); "
        "print(c.execute('SELECT count(*) FROM meta').fetchone()[0]); c.close()"
    )
    other = subprocess.run([sys.executable, "-c", count], capture_output=True, text=True, check=True)
    assert other.stdout.strip() == "1"
    assert (tmp_path / "t.db-wal").exists()  # the other process did not take it for the last
    first.execute("INSERT INTO meta VALUES ('b', '2')")
    first.close()
    second.close()
    later = subprocess.run([sys.executable, "-c", count], capture_output=True, text=True, check=True)
    assert later.stdout.strip() == "2"


def test_logic_hash_covers_included_files(tmp_path):
    """A table is keyed by what its rules say: a change in a file that another #includes
    (as synth.lp includes rules/*.lp) is a change of rules, and the table is not reused."""
    from morello_asp.solver.logic.files import with_includes
    from morello_asp.solver.memo.sqlite import logic_hash
    from morello_asp.target import engine_files

    (tmp_path / "sub").mkdir()
    entry, inc = tmp_path / "entry.lp", tmp_path / "sub" / "inc.lp"
    entry.write_text('#include "sub/inc.lp".\np(1).\n')
    inc.write_text("q(1).\n")
    before = logic_hash([entry])
    inc.write_text("q(2).\n")
    assert logic_hash([entry]) != before
    names = {f.name for f in with_includes(engine_files(None, ()))}
    assert {"aliasing.lp", "tile.lp", "machine.lp", "kernels.lp"} <= names


def test_an_engine_grounds_the_rules_as_they_were_when_it_started(tmp_path):
    """Editing a rule file during a search does not change the search's rules: the
    engine grounds copies taken when it started, and keys its tables by their hash."""
    from morello_asp.errors import ScheduleError
    from morello_asp.solver.search.engine import Engine

    rule = tmp_path / "no_tiles.lp"
    rule.write_text("% forbids nothing yet\n")
    eng = Engine(None, (str(rule),))
    spec = parse_spec("Matmul(4x4x4, f32)")
    before = {str(e.action) for e in eng.expand(spec)}
    rule.write_text("forbid(S, A) :- cand(S, A).\n")  # would leave no rewrite at all
    eng._class_cache.clear()
    eng._cache.clear()
    assert {str(e.action) for e in eng.expand(spec)} == before
    assert Engine(None, (str(rule),)).logic_hash != eng.logic_hash
    with pytest.raises(ScheduleError):
        Engine(None, (str(rule),)).request(spec, eng.expand(spec)[0].action)


def test_a_file_included_by_an_absolute_path_is_in_the_snapshot_too(tmp_path):
    """A rule file may #include another by its absolute path; the engine's copy includes
    the copy of that file, so an edit of it during a search changes nothing either."""
    from morello_asp.solver.search.engine import Engine

    inner = tmp_path / "elsewhere" / "forbid.lp"
    inner.parent.mkdir()
    inner.write_text("% forbids nothing yet\n")
    rule = tmp_path / "mine.lp"
    rule.write_text(f'#include "{inner.resolve()}".\n')
    eng = Engine(None, (str(rule),))
    spec = parse_spec("Matmul(4x4x4, f32)")
    before = {str(e.action) for e in eng.expand(spec)}
    assert before
    inner.write_text("forbid(S, A) :- cand(S, A).\n")  # would leave no rewrite at all
    eng._class_cache.clear()
    eng._cache.clear()
    assert {str(e.action) for e in eng.expand(spec)} == before
    fresh = Engine(None, (str(rule),))
    assert fresh.logic_hash != eng.logic_hash
    assert fresh.expand(spec) == []


def test_snapshots_of_processes_that_are_gone_are_removed(tmp_path):
    """A process killed before its exit handlers ran leaves its rule snapshot behind; the
    next process to take one removes it, and leaves a live process's alone."""
    import os
    import subprocess

    from morello_asp.solver.logic.files import _remove_orphans

    gone = subprocess.Popen(["true"])
    gone.wait()
    dead, live = tmp_path / f"morello-asp-rules-ab-{gone.pid}", tmp_path / f"morello-asp-rules-cd-{os.getpid()}"
    for d in (dead, live):
        (d / "x").mkdir(parents=True)
    _remove_orphans(tmp_path)
    assert not dead.exists() and live.exists()


def test_a_look_up_reads_only_the_rows_of_its_key(tmp_path, monkeypatch):
    """A table is read per key when first needed: answering one spec reads the rows of
    its key, not the whole file; listing every box reads the rest, and the two agree
    with the rows on disk. With the box index, a look-up reads no key whole."""
    from morello_asp.solver.memo import sqlite as memo_db
    from morello_asp.solver.memo.coords import to_coords
    from morello_asp.solver.memo.sqlite import open_memo
    from morello_asp.solver.search.engine import get_engine

    db = tmp_path / "t.db"
    imp = synthesize("Matmul(4x4x4, f32)", db=db)
    engine = get_engine()
    with sqlite3.connect(str(db)) as c:
        keys = {k for (k,) in c.execute("SELECT DISTINCT key FROM decisions")}
    assert len(keys) > 3
    spec = parse_spec("Matmul(4x4x4, f32)")
    for reads, loaded in ((0, {to_coords(spec, tuple(engine.target.level_names))[0]}), (memo_db.POINT_READS, set())):
        monkeypatch.setattr(memo_db, "POINT_READS", reads)
        monkeypatch.setattr(memo_db, "ROWS_PER_POINT_READ", 10**9)
        m = open_memo(db, engine)
        d = m.get(spec)
        assert d is not None and d.cost == imp.cost.main
        assert m._loaded == loaded
        assert len(list(m.boxes())) == rows(db)
        m.close()


def _box_index_rows(db):
    """(seq, key, bounds on the indexed axes) of every row, from the rows and from the index."""
    from morello_asp.solver.memo.sqlite import BOX_AXES

    with sqlite3.connect(str(db)) as c:
        want = set()
        for seq, key, lo, hi in c.execute("SELECT seq, key, lo, hi FROM decisions"):
            lo, hi = json.loads(lo), json.loads(hi)
            want.add((seq, key, tuple(x for i in range(BOX_AXES) for x in (lo[i], hi[i]))))
        cols = ", ".join(f"b.a{i}, b.b{i}" for i in range(BOX_AXES))
        got = {
            (seq, key, tuple(rest))
            for seq, key, *rest in c.execute(
                f"SELECT b.seq, k.key, {cols} FROM decisions_box b JOIN dkeys k ON k.id = b.k0 AND k.id = b.k1"
            )
        }
    return want, got


def test_the_box_index_follows_every_row_and_is_built_for_older_tables(tmp_path):
    """The box index holds each row's key and bounds, through the inserts, merges and
    deletes of a search (triggers in the file); a table written without it gets it when
    opened, and then answers as before."""
    from morello_asp.solver.memo.sqlite import open_memo
    from morello_asp.solver.search.engine import get_engine

    db = tmp_path / "t.db"
    synthesize("Matmul(4x8x8, f32)", db=db)
    want, got = _box_index_rows(db)
    assert len(want) > 50 and got == want
    with sqlite3.connect(str(db)) as c:
        # Boxes merged (updated) and deleted by the search leave no stale index row.
        assert c.execute("SELECT max(seq) FROM decisions").fetchone()[0] > len(want)
        for t in ("decisions_box_ins", "decisions_box_upd", "decisions_box_del"):
            c.execute(f"DROP TRIGGER {t}")
        c.execute("DROP TABLE decisions_box")
        c.execute("DROP TABLE dkeys")
    engine = get_engine()
    spec = parse_spec("Matmul(4x8x8, f32)")
    m = open_memo(db, engine)
    assert m.get(spec) is not None and m._loaded == set()
    m.close()
    assert _box_index_rows(db)[1] == want
    assert synthesize("Matmul(4x8x8, f32)", db=db).compile().check()[0] <= 1e-3


def test_a_table_without_the_rtree_module_reads_whole_keys(tmp_path, monkeypatch):
    """Where SQLite lacks the R*Tree module, the table works as before: keys read whole."""
    from morello_asp.solver.memo import sqlite as memo_db
    from morello_asp.solver.memo.sqlite import open_memo
    from morello_asp.solver.search.engine import get_engine

    monkeypatch.setattr(memo_db, "_BOX_SQL", tuple(q.replace("rtree_i32", "no_such_rtree") for q in memo_db._BOX_SQL))
    db = tmp_path / "t.db"
    imp = synthesize("Matmul(4x4x4, f32)", db=db)
    m = open_memo(db, get_engine())
    assert not m._has_boxes
    assert m.get(parse_spec("Matmul(4x4x4, f32)")).cost == imp.cost.main
    assert m._loaded
    m.close()


@pytest.mark.slow  # ~5 s
def test_a_key_scanned_before_filing_answers_as_the_filed_key(tmp_path, monkeypatch):
    """A key read from the file is scanned row by row for its first look-ups and filed in
    the point index after: both give every box's corners the same answer (the first box by
    sequence that contains the point), as does a table filed from the start."""
    from morello_asp.solver.memo import sqlite as memo_db
    from morello_asp.solver.memo import table as memo
    from morello_asp.solver.memo.coords import from_coords
    from morello_asp.solver.memo.sqlite import open_memo
    from morello_asp.solver.search.engine import get_engine

    db = tmp_path / "t.db"
    synthesize("Matmul(4x4x8, f32)", db=db)
    engine = get_engine()
    # Boxes that overlap with different values, where the order of the scan decides.
    w = open_memo(db, engine)
    s = parse_spec("Matmul(4x4x8, f32)")
    d = w.get(s)
    zero = tuple(0 for _ in s.limits)
    for i, cost in enumerate((7, 5, 3)):
        grown = tuple(x + 4 - i for x in s.limits)
        w.put(replace(s, limits=grown), Decision(d.action, cost * s.volume, zero, 1))
    w.close()
    monkeypatch.setattr(memo_db, "POINT_READS", 0)  # the reference: keys read whole
    monkeypatch.setattr(memo_db, "ROWS_PER_POINT_READ", 10**9)
    filed = open_memo(db, engine)
    assert filed.get(replace(s, limits=tuple(x + 1 for x in s.limits))).cost == 7 * s.volume
    corners = [(key, p) for key, _, lo, hi, _ in filed.boxes() for p in (lo, hi)]
    assert len(corners) > 200
    specs = [from_coords(key, tuple(p)) for key, p in corners]
    want = [filed.get(s) for s in specs]
    assert all(d is not None for d in want)
    looked_up = Counter(key for key, _ in corners)
    for scans in (10**9, 3):  # never filed; filed after three look-ups of a key
        monkeypatch.setattr(memo, "SCANS_BEFORE_FILING", scans)
        m = open_memo(db, engine)
        assert [m.get(s) for s in specs] == want
        assert set(m._staged) == {k for k, n in looked_up.items() if n <= scans}
        m.close()
    # Every look-up answered from the box index, no key read whole: the same answers.
    monkeypatch.setattr(memo_db, "POINT_READS", 10**9)
    m = open_memo(db, engine)
    assert [m.get(s) for s in specs] == want
    assert not m._loaded and m._has_boxes
    m.close()
    filed.close()


def test_a_query_imports_neither_numpy_nor_the_compiler(tmp_path):
    """A warm `query` prints a stored program: numpy, ml_dtypes and cffi (a third of its
    time when they were imported up front) stay unloaded, and so does z3."""
    db = tmp_path / "t.db"
    imp = synthesize("Matmul(4x4x4, f32)", db=db)
    err, tol = imp.compile().check()
    assert err <= tol
    code = (
        "import sys; from morello_asp.cli import main; "
        "rc = main(['query', 'Matmul(4x4x4, f32)', '--db', sys.argv[1]]); "
        "print(sorted(m for m in ('numpy', 'ml_dtypes', 'cffi', 'z3') if m in sys.modules)); sys.exit(rc)"
    )
    r = subprocess.run([sys.executable, "-c", code, str(db)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "MultAdd(" in r.stdout  # the program's kernel
    assert r.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.slow  # ~8 s
def test_a_merged_table_rebuilds_the_sources_programs_without_grounding(tmp_path):
    """`db merge` carries each source's expansion cache over (its classes renumbered in the
    destination's key ids), so a program of a source is rebuilt from the merged table
    with no clingo call, and it is the source's program."""
    from morello_asp.cli.db import merge
    from morello_asp.solver.memo.sqlite import open_memo
    from morello_asp.solver.search.dp import Search
    from morello_asp.solver.search.engine import Engine

    def build(db, spec):
        engine = Engine("avx2")  # fresh: a table keeps the classes its search grounded
        m = open_memo(db, engine)
        imp = Search(engine, m).build(parse_spec(spec))
        m.close()
        return engine, imp

    a, b = tmp_path / "a.db", tmp_path / "b.db"
    build(a, "Matmul(4x4x4, f32)")
    _, want = build(b, "Matmul(2x4x8, f32)")
    merge(str(a), [str(b)])
    engine, got = build(a, "Matmul(2x4x8, f32)")
    assert engine.stats.calls == 0
    assert str(got) == str(want)
    err, tol = got.compile().check()
    assert err <= tol


def test_boxes_and_expansions_read_back_as_the_search_left_them(tmp_path):
    """The file holds the boxes the search merged in memory, row for row, and each spec
    class the search saved reads back from it, in a fresh engine, as the search grounded
    it: the same rewrites, children, child keys, kernel costs and allocations."""
    from morello_asp.solver.memo.sqlite import open_memo
    from morello_asp.solver.search.dp import Search
    from morello_asp.solver.search.engine import Engine

    db = tmp_path / "m.db"
    engine = Engine("avx2")  # its own: the shared one knows classes of other tests
    search = Search(engine, open_memo(db, engine))
    imp = search.build(parse_spec("Matmul(4x8x8, f32)"))
    boxes = sorted((seq, key, tuple(lo), tuple(hi)) for key, seq, lo, hi, _ in search.memo.boxes())
    search.memo.close()
    err, tol = imp.compile().check()
    assert err <= tol
    # the boxes as merged in memory are the file's rows (written when each batch commits)
    with sqlite3.connect(str(db)) as c:
        stored = sorted(
            (seq, key, tuple(json.loads(lo)), tuple(json.loads(hi)))
            for seq, key, lo, hi in c.execute("SELECT seq, key, lo, hi FROM decisions")
        )
        assert c.execute("SELECT count(*) FROM decisions_box").fetchone()[0] == len(stored)
    assert stored == boxes and len(boxes) > 100
    grounded = dict(search.engine._class_cache)
    memo = open_memo(db, Engine("avx2"))
    try:
        got = memo.load_expansions(list(grounded))
    finally:
        memo.close()
    assert len(got) == len(grounded) > 50
    for cls, exps in grounded.items():
        mine = [(e.action, e.children, e.keys, e.kernel_cost, e.alloc) for e in got[cls]]
        assert mine == [(e.action, e.children, e.keys, e.kernel_cost, e.alloc) for e in exps], cls


def test_a_table_killed_during_a_checkpoint_opens(tmp_path):
    """kill -9 while SQLite copies the write-ahead log into the file can leave the header
    declaring more pages than the file has yet; the log holds them, so this is no
    truncated table (it was refused as one, now and then, after kill -9)."""
    from morello_asp.solver.memo.sqlite import connect

    db = tmp_path / "w.db"
    con = sqlite3.connect(str(db), isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA wal_autocheckpoint=0")
    con.execute("CREATE TABLE meta(k TEXT PRIMARY KEY, v TEXT)")  # the two tables connect() looks for
    con.execute("CREATE TABLE decisions(x BLOB)")
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for _ in range(20):
        con.execute("INSERT INTO decisions VALUES (?)", (b"x" * 3000,))
    wal = (tmp_path / "w.db-wal").read_bytes()
    # The copy's first step: page 1 (the header, now declaring every page) is written
    # into the file before the pages after the file's end. Frames: 24 bytes, then a page.
    page = int.from_bytes(wal[8:12], "big")
    last_page1 = None
    for off in range(32, len(wal) - page, 24 + page):
        if int.from_bytes(wal[off : off + 4], "big") == 1:
            last_page1 = wal[off + 24 : off + 24 + page]
    assert last_page1 is not None
    # Keep this copy of the file as it is: a process that still has the table open would
    # checkpoint it when it closes.
    snap = tmp_path / "s.db"
    snap.write_bytes(db.read_bytes())
    (tmp_path / "s.db-wal").write_bytes(wal)
    con.close()
    with open(snap, "r+b") as f:
        f.write(last_page1)
    head = snap.read_bytes()[:100]
    assert snap.stat().st_size < page * int.from_bytes(head[28:32], "big")  # the header is ahead
    # Beside a file that is not a log, the short table is still refused, and nothing touched.
    odd = tmp_path / "o.db"
    odd.write_bytes(snap.read_bytes())
    (tmp_path / "o.db-wal").write_bytes(b"\0" * len(wal))
    with pytest.raises(MorelloError, match=r"is truncated \(\d+ bytes"):
        connect(odd)
    assert (tmp_path / "o.db-wal").read_bytes() == b"\0" * len(wal)
    c = connect(snap)
    assert c.execute("SELECT count(*) FROM decisions").fetchone()[0] == 20
    assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_a_changed_cost_term_changes_the_memo_key(tmp_path, monkeypatch):
    """A table holds optima under one cost model: after a change to a family's cost rule
    (here the tile rule, one more per loop), the table built before is refused by name
    and the default table is another file, instead of answering with old optima."""
    from morello_asp.cost import cost_fingerprint
    from morello_asp.errors import MemoError
    from morello_asp.rewrites.tile import Tile
    from morello_asp.solver.memo.sqlite import default_table
    from morello_asp.solver.search.engine import get_engine

    db = tmp_path / "m.db"
    imp = synthesize(parse_spec("Matmul(2x2x2, f32)"), db=str(db))
    err, tol = imp.compile().check()
    assert err <= tol
    before, table_before = cost_fingerprint(), default_table(get_engine())
    original = Tile.cost

    def one_more_per_loop(self, node, child_costs, target):
        return original(self, node, child_costs, target) + 1

    monkeypatch.setattr(Tile, "cost", one_more_per_loop)
    monkeypatch.setenv("MORELLO_ASP_DB", "on")
    assert cost_fingerprint() != before
    assert default_table(get_engine()) != table_before
    with pytest.raises(MemoError, match="cost="):
        synthesize(parse_spec("Matmul(2x2x2, f32)"), db=str(db))
    monkeypatch.setattr(Tile, "cost", original)
    assert cost_fingerprint() == before
    again = synthesize(parse_spec("Matmul(2x2x2, f32)"), db=str(db))  # the same model again: the table answers
    assert again.cost == imp.cost


def test_the_cost_models_terms_are_in_the_memo_key(tmp_path, monkeypatch):
    """One cost model object per target (CostModel), its terms read from the target's
    facts: a target file with one term changed (L1's weight per line) has another model
    and another memo key (the logic files' hash), so its default table is another file."""
    from morello_asp.cost_model import CostModel
    from morello_asp.solver.memo.sqlite import default_table
    from morello_asp.solver.search.engine import Engine
    from morello_asp.target import ENCODINGS, get_target

    src = ENCODINGS / "targets" / "avx2"
    machine = (src / "machine.lp").read_text()
    line = next(ln for ln in machine.splitlines() if ln.startswith("tgt_level(l1,"))
    parts = line.split(",")
    parts[4] = f" {int(parts[4]) + 1}"  # tgt_level(Name, Index, Capacity, Unit, Weight, Kind)
    (tmp_path / "machine.lp").write_text(machine.replace(line, ",".join(parts)))
    entry = (ENCODINGS / "targets" / "avx2.lp").read_text()
    entry = entry.replace('#include "avx2/machine.lp".', '#include "machine.lp".')
    entry = entry.replace('#include "avx2/', f'#include "{src}/')
    entry = entry.replace('#include "c_scalar.lp".', f'#include "{src.parent}/c_scalar.lp".')
    (tmp_path / "heavier.lp").write_text(entry)
    monkeypatch.setenv("MORELLO_ASP_DB", "on")
    t, heavier = get_target("avx2"), get_target(str(tmp_path / "heavier.lp"))
    assert CostModel.of(heavier).terms()["L1.line"] == CostModel.of(t).terms()["L1.line"] + 1
    assert default_table(Engine(heavier)) != default_table(Engine(t))
