"""Work is kept by default: synth and the Python API write the user's default memo table
(one per target and rule set) unless told --no-db / db=None, and a rerun is answered
from it."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

SPEC = "Matmul(2x4x2, f32)"


def _cli(args, cache, **env):
    e = dict(os.environ, MORELLO_ASP_CACHE=str(cache), **env)
    e.pop("MORELLO_ASP_DB", None)  # conftest turns the default table off
    e.update(env)
    return subprocess.run(
        [sys.executable, "-m", "morello_asp.cli", *args], capture_output=True, text=True, env=e, timeout=600
    )


def test_cli_keeps_work_in_the_default_table(tmp_path):
    first = _cli(["synth", SPEC, "--run"], tmp_path)
    assert first.returncode == 0, first.stderr
    assert "OK" in first.stdout
    tables = sorted(tmp_path.glob("avx2-*.db"))
    assert len(tables) == 1
    again = _cli(["synth", SPEC, "--run"], tmp_path)
    assert again.returncode == 0, again.stderr
    assert " 0 specs solved" in again.stderr  # every decision came from the table
    assert again.stdout == first.stdout
    q = _cli(["query", SPEC], tmp_path)
    assert q.returncode == 0, q.stderr
    assert q.stdout.splitlines()[-1] == first.stdout.splitlines()[-2]  # the cost line
    # another rule set gets its own table
    other = tmp_path / "extra.lp"
    other.write_text("% no rules\n")
    assert _cli(["synth", SPEC, "-q", "--rules", str(other)], tmp_path).returncode == 0
    assert len(list(tmp_path.glob("avx2-*.db"))) == 2


@pytest.mark.slow  # ~10 s or more on idle cores; the slow part of CI runs it
def test_no_db_and_off_keep_nothing(tmp_path):
    r = _cli(["synth", SPEC, "--no-db", "-q"], tmp_path)
    assert r.returncode == 0, r.stderr
    r = _cli(["synth", SPEC, "-q"], tmp_path, MORELLO_ASP_DB="off")
    assert r.returncode == 0, r.stderr
    assert not list(tmp_path.glob("*.db"))
    q = _cli(["query", SPEC], tmp_path)
    assert q.returncode == 2 and "no default table at" in q.stderr and "Traceback" not in q.stderr


def test_bad_switch_is_one_line(tmp_path):
    r = _cli(["synth", SPEC, "-q"], tmp_path, MORELLO_ASP_DB="maybe")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "morello-asp: error: MORELLO_ASP_DB='maybe': expected off or on (name a table with --db FILE)"
    ]
    r = _cli(["synth", SPEC, "--db", str(tmp_path / "a.db"), "--no-db"], tmp_path)
    assert r.returncode == 2 and "not allowed with" in r.stderr


def test_python_api_default_table(tmp_path, monkeypatch):
    from morello_asp import synthesize

    monkeypatch.setenv("MORELLO_ASP_CACHE", str(tmp_path))
    monkeypatch.delenv("MORELLO_ASP_DB")
    imp = synthesize(SPEC)
    assert len(list(tmp_path.glob("avx2-*.db"))) == 1
    fn = imp.compile()
    err, tol = fn.check()
    assert err <= tol
    lhs, rhs = np.ones((1, 2, 4), np.float32), np.ones((1, 4, 2), np.float32)
    assert np.all(fn(lhs, rhs) == 4)
    monkeypatch.setenv("MORELLO_ASP_CACHE", str(tmp_path / "none"))
    synthesize(SPEC, db=None)
    assert not (tmp_path / "none").exists()
