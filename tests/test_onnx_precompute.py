"""`morello-asp precompute --onnx MODEL.onnx` (issue 60): a memo table filled with a
model's specs by 2 local workers answers every spec `InferenceSession` asks for, so the
session searches nothing (its search solves and expands no spec, and the table gains no
row) and still runs as onnxruntime does. `model_specs` lists exactly the specs the
session builds (both go through `step_spec`), in a text form that keeps their layouts.
What the CLI refuses is one line, exit 2. Models come from morello_asp.onnx.blocks at
tiny sizes: the workers' search is the slow part."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from test_precompute import run_cli_without  # the CLI without an extra (tests/ is on sys.path)

onnx = pytest.importorskip("onnx", reason="the onnx extra is not installed (make setup-onnx)")
pytest.importorskip("onnxruntime", reason="the onnx extra is not installed (make setup-onnx)")

from onnx import helper as h  # noqa: E402

from morello_asp.onnx import InferenceSession, import_model, model_specs  # noqa: E402
from morello_asp.onnx.blocks import attention, bottleneck, mlp  # noqa: E402
from morello_asp.onnx.blocks import model as _model  # noqa: E402
from morello_asp.onnx.compare import check  # noqa: E402
from morello_asp.onnx.specs import step_spec  # noqa: E402
from morello_asp.solver.precompute import driver as pc  # noqa: E402
from morello_asp.spec import parse_spec  # noqa: E402
from morello_asp.target import as_target  # noqa: E402

CLI = [sys.executable, "-m", "morello_asp.cli"]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=600)


def decisions(db: Path) -> int:
    with sqlite3.connect(str(db)) as c:
        return c.execute("SELECT count(*) FROM decisions").fetchone()[0]


class SearchWatch:
    """A progress display that keeps the most the search did: specs solved (decided)
    and specs expanded (grounded to search them). A spec answered by the table does
    neither: its program is rebuilt from the stored decisions."""

    def __init__(self):
        self.solved = 0
        self.expanded = 0

    def update(self, stats, engine=None) -> None:
        self.solved = max(self.solved, stats.solved)
        self.expanded = max(self.expanded, stats.expanded)

    def done(self) -> None:
        pass


# ---------------------------------------------------------------- model_specs
def test_model_specs_are_the_specs_the_session_searches_and_read_back():
    target = as_target(None)
    for model in (mlp(), attention(), bottleneck(cin=2, cmid=2, cout=4, hw=4)):
        steps = [st for st in import_model(model).steps if st.spec is not None]
        want = list(dict.fromkeys(step_spec(st, target) for st in steps))
        texts = model_specs(model, target)
        assert len(texts) == len(want)
        # precompute parses the texts back for its target: the very specs the session builds
        assert [parse_spec(t, target) for t in texts] == want
        specs, describe = pc.grid_specs(texts, target)
        assert specs == want and describe == f"{len(want)} specs"
    # attention's Q, K and V projections are one spec, listed once; its K^T is read as a
    # col_major operand, which the sugar form would lose
    texts = model_specs(attention(), target)
    assert len(texts) < sum(st.spec is not None for st in import_model(attention()).steps)
    assert sum("col_major" in t for t in texts) == 1
    assert any(st.layouts for st in import_model(attention()).steps)
    # a conv's channels-last image and output, and its filters' order, are kept too
    conv = [t for t in model_specs(bottleneck(cin=2, cmid=2, cout=4, hw=4), target) if t.startswith("(ConvS2(")]
    assert len(conv) == 1 and "(f32, GL, [0, 2, 3, 1])" in conv[0]
    with pytest.raises(ValueError, match="is a view"):
        step_spec(next(st for st in import_model(mlp()).steps if st.spec is None), target)


# ------------------------------------------------------------ what is refused
def test_onnx_with_a_grid_option_is_refused(tmp_path):
    path = tmp_path / "mlp.onnx"
    onnx.save(mlp(), str(path))
    db = tmp_path / "t.db"
    for opt in (["--max-size", "4"], ["--kinds", "matmul"]):
        r = run_cli("precompute", "--db", str(db), "--onnx", str(path), *opt)
        assert r.returncode == 2, r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and f"argument --onnx: not allowed with argument {opt[0]}" in lines[0]
    assert not db.exists()


def test_a_model_the_importer_refuses_is_its_one_line_error(tmp_path):
    path = tmp_path / "square.onnx"
    onnx.save(_model([h.make_node("Mul", ["x", "x"], ["y"], name="square")], [("x", [2, 4])], [("y", [2, 4])]), path)
    r = run_cli("precompute", "--db", str(tmp_path / "t.db"), "--onnx", str(path))
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("morello-asp: error: node square (Mul): only multiplication by a scalar constant")
    assert not (tmp_path / "t.db").exists()


def test_without_the_onnx_extra_it_says_how_to_install(tmp_path):
    r = run_cli_without("onnx", "precompute", "--db", str(tmp_path / "t.db"), "--onnx", "m.onnx")
    assert r.returncode == 2, r.stderr
    assert "pip install 'morello-asp[onnx]'" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "t.db").exists()


# ------------------------------------------- precomputed, then searched nothing
def _precompute_then_run(tmp_path: Path, model, name: str) -> None:
    """Fill a fresh table with the model's specs through the CLI (2 local workers), then
    build the session on it: nothing searched, nothing added, outputs as onnxruntime's."""
    path, db = tmp_path / f"{name}.onnx", tmp_path / f"{name}.db"
    onnx.save(model, str(path))
    texts = model_specs(str(path))
    r = run_cli("precompute", "--db", str(db), "--onnx", str(path), "--workers", "2")
    assert r.returncode == 0, r.stderr
    assert f"precomputed --onnx {path} into {db}: {len(texts)} root specs" in r.stderr
    assert "with 2 local workers" in r.stderr
    rows = decisions(db)
    watch = SearchWatch()
    sess = InferenceSession(str(path), db=str(db), progress=watch)
    assert (watch.solved, watch.expanded) == (0, 0), "the session searched a spec the table should have answered"
    assert decisions(db) == rows
    assert sorted(p.spec.text() for p in sess.programs.values()) == sorted(texts)
    c = check(sess)
    assert c.ok, (c.error, c.tolerance)


@pytest.mark.slow  # ~6 s
def test_a_precomputed_mlp_is_answered_by_its_table(tmp_path):
    _precompute_then_run(tmp_path, mlp(m=2, k=4, hid=8, n=4), "mlp")


@pytest.mark.slow
def test_a_precomputed_bottleneck_is_answered_by_its_table(tmp_path):
    # convs (a strided, padded 3x3), pointwise convs as matmuls, biases, a residual
    _precompute_then_run(tmp_path, bottleneck(cin=2, cmid=2, cout=4, hw=4), "bottleneck")
