"""`morello-asp precompute` (issue 19): the grid and its stages, tables that are the same
whatever the executor and the worker count, answers the driver refuses, `db merge`,
resuming after Ctrl-C or kill -9 of the driver, a worker killed mid-run, and a real Ray
cluster (started here with `ray start`, in a network namespace with loopback only).

The default suite builds the grid Matmul f32 up to 2 (8 roots) a few times; the runs
on Matmul f32 up to 4 (27 roots, 7 stages), with processes killed and a Ray cluster, are
marked slow."""

from __future__ import annotations

import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest
from test_interrupt import alive, children  # process helpers (tests/ is on sys.path)

from morello_asp.errors import InputError, MemoError, MorelloError
from morello_asp.solver.precompute import driver as pc
from morello_asp.solver.precompute.executors import LocalExecutor, can_isolate, isolated
from morello_asp.spec import parse_spec

CLI = [sys.executable, "-m", "morello_asp.cli"]


def rows(db: Path) -> list:
    with sqlite3.connect(str(db)) as c:
        return list(c.execute("SELECT seq, key, lo, hi, value FROM decisions ORDER BY seq"))


def progress_state(db: Path) -> dict:
    try:
        with sqlite3.connect(str(db), timeout=30) as c:
            state = dict(c.execute("SELECT k, v FROM precompute"))
            state["staged"] = c.execute("SELECT count(*) FROM staged").fetchone()[0]
            return state
    except sqlite3.Error:
        return {}


def run_cli(*args, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=900, **kw)


# ----------------------------------------------------------------- grid and stages
def test_grid_roots_and_stages_put_every_smaller_root_first():
    grid = pc.Grid("matmul,zero", "f32", 4)
    specs, describe = pc.grid_specs(grid, None)
    assert describe == "--kinds matmul,zero --dtypes f32 --max-size 4"
    assert len(specs) == 27 + 9  # m, k, n in 1, 2, 4 (batch 1); Zero is 2-D
    stages = pc.stages_of(specs)
    where = {s: i for i, st in enumerate(stages) for s in st.specs}
    assert [st.key for st in stages] == sorted(st.key for st in stages)
    for a in specs:
        for b in specs:
            if a.kind == b.kind and a != b and all(x <= y for x, y in zip(b.shape, a.shape)):
                assert where[b] < where[a], (b, a)
    # Zero (what Matmul's to_accum leaves) is solved before any Matmul
    assert max(where[s] for s in specs if s.kind == "Zero") < min(where[s] for s in specs if s.kind == "Matmul")
    # each stage's roots are dealt into at most 8 tasks, each root once, the largest task first
    for st in stages:
        flat = [s for t in st.tasks for s in t]
        assert sorted(flat, key=str) == sorted(st.specs, key=str) and len(st.tasks) <= 8
    assert pc.fingerprint(stages) != pc.fingerprint(pc.stages_of(specs, 2))  # another grouping, another run


def test_grid_options_are_checked():
    with pytest.raises(InputError, match="unknown spec kind 'conv2'"):
        pc.Grid("matmul,conv2", "f32", 8)
    with pytest.raises(InputError, match="unknown dtype 'f64'"):
        pc.Grid("matmul", "f64", 8)
    assert pc.Grid("MatmulAccum,matmul_accum", "f32", 8).kinds == ("MatmulAccum",)
    r = run_cli("precompute", "--db", "/nonexistent-dir/x.db", "--kinds", "nope")
    assert r.returncode == 2 and "unknown spec kind 'nope'" in r.stderr and len(r.stderr.splitlines()) == 1


# --------------------------------------------------- a small grid, 1 and 2 workers
@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    """The grid Matmul f32 up to 2 built twice: by the CLI with 2 workers (stderr is a
    pipe: no progress line), and through the API with 1 worker and a progress line."""
    d = tmp_path_factory.mktemp("pc")
    cmd = [*CLI, "precompute", "--db", str(d / "two.db"), "--max-size", "2", "--workers", "2"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # meanwhile:
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COLUMNS", "200")  # the whole line: an 80-column terminal would cut its end
        rep = pc.precompute(
            pc.Grid("matmul", "f32", 2), d / "one.db", workers=1, progress=pc.Progress(enabled=True, stream=out)
        )
    stdout, stderr = p.communicate(timeout=600)
    return d, subprocess.CompletedProcess(cmd, p.returncode, stdout, stderr), rep, out.getvalue()


def test_two_workers_build_the_same_table_as_one(tables):
    d, r, rep, _ = tables
    assert r.returncode == 0, r.stderr
    assert "\r" not in r.stderr  # not a terminal: no progress line, only the summary
    assert "8 root specs in 4 stages" in r.stderr and "with 2 local workers" in r.stderr
    assert rep.tasks == 8 and rep.stages == 4 and rep.decisions > 100
    assert rows(d / "one.db") == rows(d / "two.db")
    assert progress_state(d / "two.db")["finished"] == "1"


def test_progress_line_shows_stage_specs_rate_and_eta(tables):
    text = tables[3]
    last = text.split("\r")[-1]
    assert "precompute: stage 4/4" in last and "8/8 root specs" in last and "decisions" in last
    assert "/s" in last and "ETA" in text


def test_query_answers_from_the_precomputed_table_like_synth(tables):
    d = tables[0]
    q = run_cli("query", "Matmul(2x2x1, f32)", "--db", str(d / "two.db"))
    assert q.returncode == 0, q.stderr
    from morello_asp.synthesis import synthesize

    imp = synthesize("Matmul(2x2x1, f32)")  # from nothing, in this process
    assert q.stdout == f"{imp}\n{imp.cost}\n"


def test_a_users_rule_file_reaches_the_workers_and_leaves_no_files(tmp_path, monkeypatch):
    """The driver sends a rule file's text; a worker writes it only while its engine
    starts. Workers end with os._exit, so a directory kept until exit stayed in the
    temporary directory for good (dozens had piled up in /tmp)."""
    import tempfile

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    rule = tmp_path / "no_parallel.lp"
    rule.write_text("% no parallel loops\nforbid(S, tile1(D, T, 1)) :- cand(S, tile1(D, T, 1)).\n")
    rep = pc.precompute(pc.Grid("matmul", "f32", 2), tmp_path / "r.db", workers=2, rules=(rule,))
    assert rep.tasks == 8 and rep.decisions > 100
    workers = set()
    for e in tmp.iterdir():  # what may stay: engines' snapshots of the rules, named by pid
        assert e.name.startswith("morello-asp-rules-") and e.name.rsplit("-", 1)[1].isdigit(), e.name
        workers.add(int(e.name.rsplit("-", 1)[1]))
    assert len(workers - {os.getpid()}) == 2  # each worker's engine grounded its own copy


def test_a_rerun_of_a_finished_grid_adds_nothing(tables):
    d = tables[0]
    before = rows(d / "one.db")
    rep = pc.precompute(pc.Grid("matmul", "f32", 2), d / "one.db", workers=1)
    assert rep.decisions == 0 and rows(d / "one.db") == before


# -------------------------------------------------------- answers the driver refuses
def _answer(tables, mutate=None, big=False, **over) -> bytes:
    """A worker's answer made of a real table's rows (ten that cover one spec class, as
    a worker's do: the table merged the others), perhaps altered."""
    d = tables[0]
    got = [[k, json.loads(lo), json.loads(hi), v] for _, k, lo, hi, v in rows(d / "one.db")]
    got = [r for r in got if r[1][:-4] == r[2][:-4] and (not big or "shape" not in r[0] and r[1][1] > 0)][:10]
    from morello_asp.solver.memo.sqlite import logic_hash
    from morello_asp.target import engine_files

    ans = {"protocol": pc.PROTOCOL, "hash": logic_hash(engine_files(None, ())), "rows": got, "seconds": 0.1}
    if mutate:
        mutate(ans["rows"])
    ans.update(over)
    return zlib.compress(json.dumps(ans).encode())


def _validator():
    from morello_asp.solver.memo.sqlite import logic_hash
    from morello_asp.target import as_target, engine_files

    t = as_target(None)
    return pc.Validator(t.level_names, t.max_limits(), logic_hash(engine_files(t, ())), 2, t)


def _set(i, j, v):
    def f(rs):
        rs[0][i][j] = v

    return f


def _both(j, v):
    def f(rs):
        rs[0][1][j] = rs[0][2][j] = v

    return f


def _key(**kw):
    def f(rs):
        k = json.loads(rs[0][0])
        k.update(kw)
        rs[0][0] = json.dumps(k, sort_keys=True, separators=(",", ":"))

    return f


@pytest.mark.parametrize(
    ("mutate", "over", "why"),
    [
        (None, {"hash": "0" * 64}, "other logic files"),
        (None, {"protocol": 99}, "protocol"),
        (_key(kind="Conv9"), {}, "unknown spec kind"),
        (_key(levels=["RF", "VRF", "L1", "L2", "GL"]), {}, "levels other than"),
        (_set(1, 1, 5), {}, "one spec class"),  # a box over several classes
        (_both(1, 9), {}, "larger than the grid"),  # log2 m = 9 on both corners
        (_set(2, -1, 1 << 40), {}, "limits outside"),
        (lambda rs: rs[0].__setitem__(3, "{"), {}, "JSONDecodeError"),
        (lambda rs: rs[0].pop(), {}, r"not \[key, lo, hi, value\]"),
    ],
)
def test_a_bad_or_hostile_answer_is_refused_whole(tables, mutate, over, why):
    v = _validator()
    root = [parse_spec("Matmul(2x2x2, f32)")]
    good, _ = v.rows(_answer(tables), root)
    assert len(good) == 10
    with pytest.raises(pc.BadAnswer, match=why):
        v.rows(_answer(tables, mutate, **over), root)


def test_a_spec_larger_than_its_task_is_refused(tables):
    v = _validator()
    with pytest.raises(pc.BadAnswer, match="larger than the task"):
        v.rows(_answer(tables, big=True), [parse_spec("Matmul(1x1x1, f32)")])


class HostileExecutor(LocalExecutor):
    """Real workers whose every answer is altered on the way: a limit beyond the
    target's (what a buggy or hostile worker might send)."""

    def poll(self, timeout):
        out = []
        for i, blob, err in super().poll(timeout):
            ans = json.loads(zlib.decompress(blob))
            if ans["rows"]:
                ans["rows"][-1][2][-1] = 1 << 50
            out.append((i, zlib.compress(json.dumps(ans).encode()), err))
        return out


def test_the_table_takes_nothing_from_a_hostile_worker(tmp_path):
    db = tmp_path / "h.db"
    with pytest.raises(MorelloError, match="refused, nothing of it entered"):
        pc.precompute(["Matmul(1x1x1, f32)"], db, executor=HostileExecutor(1))
    assert rows(db) == [] and progress_state(db)["staged"] == 0


# ------------------------------------------------------------------- resume rules
def test_an_unfinished_run_is_continued_only_with_resume(tmp_path):
    state = {"version": pc.PROGRESS_VERSION, "grid": "abc", "describe": "--max-size 4", "next": "2", "stages": "7"}
    with pytest.raises(InputError, match="add --resume"):
        pc._check_progress({**state, "finished": "0"}, "abc", "", "t.db", False, False, 7)
    assert pc._check_progress({**state, "finished": "0"}, "abc", "", "t.db", True, False, 7) == 2
    with pytest.raises(InputError, match="another grid"):
        pc._check_progress({**state, "finished": "0"}, "xyz", "", "t.db", True, False, 7)
    assert pc._check_progress({**state, "finished": "0"}, "xyz", "", "t.db", False, True, 7) is None
    assert pc._check_progress({**state, "finished": "1"}, "abc", "", "t.db", True, False, 7) is None
    assert pc._check_progress({}, "abc", "", "t.db", False, False, 7) is None


# --------------------------------------------------------------------------- merge
def test_db_merge_combines_tables_and_refuses_other_rules(tables, tmp_path):
    from morello_asp.cli.db import merge
    from morello_asp.solver.memo.coords import from_coords
    from morello_asp.solver.memo.sqlite import SqliteMemo, decode_decision
    from morello_asp.solver.memo.table import denormalize

    d = tables[0]
    n, before, after = merge(str(tmp_path / "m.db"), [str(d / "one.db"), str(d / "two.db")])
    assert n == 2 * len(rows(d / "one.db")) and before == 0 and after <= len(rows(d / "one.db"))
    levels = ("RF", "VRF", "L1", "GL")
    src = {r[0]: r for r in rows(d / "one.db")}
    meta = dict(sqlite3.connect(str(d / "one.db")).execute("SELECT k, v FROM meta"))
    m = SqliteMemo(tmp_path / "m.db", meta["target"], levels, meta["logic"])
    for _, key, lo, _hi, val in src.values():  # every box's corner answers as in the source
        spec = from_coords(key, json.loads(lo))
        assert m.get(spec) == denormalize(decode_decision(val, key), spec)
    m.close()
    other = SqliteMemo(tmp_path / "o.db", meta["target"], levels, "f" * 64)
    other.close()
    r = run_cli("db", "merge", str(tmp_path / "m.db"), str(tmp_path / "o.db"))
    assert r.returncode == 2 and "logic=" in r.stderr and "same rules and target" in r.stderr
    r = run_cli("db", "merge", str(tmp_path / "m.db"), str(tmp_path / "m.db"))
    assert r.returncode == 2 and "into itself" in r.stderr
    with pytest.raises(MemoError, match="no memo table"):
        merge(str(tmp_path / "m.db"), [str(tmp_path / "missing.db")])


# ---------------------------------------------------------------------- ray extra
def run_cli_without(module: str, *args: str) -> subprocess.CompletedProcess:
    """The CLI where `module` (an optional extra's) cannot be imported."""
    code = (
        f"import sys; sys.modules[{module!r}] = None\nfrom morello_asp.cli import main\nsys.exit(main({list(args)!r}))"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_ray_option_without_ray_says_how_to_install(tmp_path):
    r = run_cli_without("ray", "precompute", "--db", str(tmp_path / "r.db"), "--max-size", "1", "--ray", "auto")
    assert r.returncode == 2
    assert "pip install 'morello-asp[ray]'" in r.stderr and len(r.stderr.strip().splitlines()) == 1


# ========================================================= slow: grid up to 4
GRID4 = ("--max-size", "4", "-q")


@pytest.fixture(scope="module")
def reference4(tmp_path_factory) -> list:
    """Matmul f32 up to 4 built by one local worker, uninterrupted."""
    db = tmp_path_factory.mktemp("ref") / "ref.db"
    r = run_cli("precompute", "--db", str(db), "--workers", "1", *GRID4)
    assert r.returncode == 0, r.stderr
    return rows(db)


def start_and_wait(db: Path, until, workers: int = 2) -> tuple[subprocess.Popen, list[int]]:
    p = subprocess.Popen(
        [*CLI, "precompute", "--db", str(db), "--workers", str(workers), *GRID4],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C's default action even when this test runs in a background job (which ignores it)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.time() + 300
    while time.time() < deadline and p.poll() is None:
        if until(progress_state(db)) and len(children(p.pid)) >= workers:
            break
        time.sleep(0.05)
    assert p.poll() is None, f"precompute finished before it could be stopped: {p.stderr.read() if p.stderr else ''}"
    return p, children(p.pid)


@pytest.mark.slow
def test_tables_are_identical_whatever_the_worker_count_or_grouping(tmp_path, reference4):
    r = run_cli("precompute", "--db", str(tmp_path / "a.db"), "--workers", "2", *GRID4)
    assert r.returncode == 0, r.stderr
    assert rows(tmp_path / "a.db") == reference4
    # one task per root: the same answers in another order
    r = run_cli("precompute", "--db", str(tmp_path / "b.db"), "--tasks-per-stage", "0", *GRID4)
    assert r.returncode == 0, r.stderr
    from morello_asp.cli.db import merge

    n, before, after = merge(str(tmp_path / "b.db"), [str(tmp_path / "a.db")])
    assert after == before  # every decision of a was already in b


@pytest.mark.slow
def test_a_busy_worker_borrows_idle_cores_and_the_table_is_the_same(tmp_path, monkeypatch):
    """A worker whose partner has no task grounds its batches in helper processes on the
    partner's core. With one task per stage the partner never has one, so the borrowing
    does not hang on timing (with the default grouping it happens only when a stage's
    last task outlasts the others, which a busy machine can deny). This grid's batches
    are too small to be split unless told to (forked workers inherit it). Where the
    calls ran does not change the table: it equals a lone worker's, which borrows
    nothing."""
    from morello_asp.solver.search import engine

    monkeypatch.setattr(engine, "SPLIT_MIN", 1)
    grid = pc.Grid("matmul", "f32", 4)
    rep = pc.precompute(grid, tmp_path / "b.db", workers=2, tasks_per_stage=1)
    assert rep.lent_calls > 0
    one = pc.precompute(grid, tmp_path / "one.db", workers=1, tasks_per_stage=1)
    assert one.lent_calls == 0  # a lone worker has nobody's core to borrow
    assert rows(tmp_path / "b.db") == rows(tmp_path / "one.db")


@pytest.mark.slow
def test_a_worker_killed_mid_run_is_replaced_and_the_table_is_the_same(tmp_path, reference4):
    db = tmp_path / "w.db"
    p, workers = start_and_wait(db, lambda s: int(s.get("next", 0)) >= 3)
    os.kill(workers[0], signal.SIGKILL)
    out, err = p.communicate(timeout=600)
    assert p.returncode == 0, err
    assert rows(db) == reference4


@pytest.mark.slow
def test_driver_killed_then_resume_gives_the_same_table(tmp_path, reference4):
    db = tmp_path / "d.db"
    p, workers = start_and_wait(db, lambda s: int(s.get("next", 0)) >= 3 and s.get("staged", 0) > 0)
    p.kill()
    p.wait()
    deadline = time.time() + 10
    while time.time() < deadline and any(alive(w) for w in workers):
        time.sleep(0.05)
    assert not any(alive(w) for w in workers), "a worker outlived its driver"
    state = progress_state(db)
    assert state["finished"] == "0" and int(state["next"]) >= 3
    again = run_cli("precompute", "--db", str(db), *GRID4)
    assert again.returncode == 2 and "add --resume" in again.stderr
    done = run_cli("precompute", "--db", str(db), "--resume", *GRID4)
    assert done.returncode == 0, done.stderr
    assert rows(db) == reference4


@pytest.mark.slow
def test_ctrl_c_keeps_finished_tasks_and_resume_finishes(tmp_path, reference4):
    db = tmp_path / "c.db"
    p, workers = start_and_wait(db, lambda s: int(s.get("next", 0)) >= 2)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130 and "--resume" in err
    assert not any(alive(w) for w in workers)
    done = run_cli("precompute", "--db", str(db), "--resume", *GRID4)
    assert done.returncode == 0, done.stderr
    assert rows(db) == reference4


# --------------------------------------------------------------- a real Ray cluster
RAY_SCRIPT = r"""
import os, signal, subprocess, sys, time, sqlite3
from morello_asp.solver.precompute.executors import LocalRayCluster
out = sys.argv[1]
cli = [sys.executable, "-m", "morello_asp.cli", "precompute", "--max-size", "4", "-q"]
with LocalRayCluster(2) as c:
    # 2 workers, uninterrupted
    r = subprocess.run([*cli, "--db", out + "/ray2.db", "--ray", c.address], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    # 2 workers, one Ray worker process killed with SIGKILL mid-run
    p = subprocess.Popen([*cli, "--db", out + "/rayk.db", "--ray", c.address], stderr=subprocess.PIPE, text=True)
    killed = None
    deadline = time.time() + 300
    while killed is None and time.time() < deadline and p.poll() is None:
        try:
            with sqlite3.connect(out + "/rayk.db", timeout=30) as con:
                nxt = int(dict(con.execute("SELECT k, v FROM precompute")).get("next", 0))
        except sqlite3.Error:
            nxt = 0
        if nxt >= 3:
            for d in os.listdir("/proc"):
                if d.isdigit():
                    try:
                        cmd = open(f"/proc/{d}/cmdline", "rb").read()
                    except OSError:
                        continue
                    if cmd.startswith(b"ray::RayWorker"):
                        os.kill(int(d), signal.SIGKILL)
                        killed = int(d)
                        break
        time.sleep(0.05)
    err = p.communicate(timeout=600)[1]
    assert p.returncode == 0, err
    print("killed", killed)
"""


@pytest.mark.slow
def test_a_local_ray_cluster_builds_the_same_table(tmp_path, reference4):
    pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'morello-asp[ray]')")
    why = can_isolate()
    if why:
        pytest.skip(f"no loopback-only network namespace for the Ray cluster: {why}")
    r = subprocess.run(
        isolated([sys.executable, "-c", RAY_SCRIPT, str(tmp_path)]), capture_output=True, text=True, timeout=1500
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "killed None" not in r.stdout, "no Ray worker process was found to kill"
    assert rows(tmp_path / "ray2.db") == reference4
    assert rows(tmp_path / "rayk.db") == reference4
