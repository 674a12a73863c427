"""Compose specs (morello_asp/compose.py, spec.py): Morello's text form parsed
and printed, the merged iteration space and its dataflow graph, fusion by tiling a
Compose, bufferize into pipelines (encodings/rules/bufferize.lp), each program compiled,
run against numpy written here and proved by z3; (slow) three chains synthesized."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

from morello_asp import kinds, parse_spec
from morello_asp.codegen.api import compile_many
from morello_asp.codegen.reference import reference, tolerance
from morello_asp.errors import ScheduleError, SpecError
from morello_asp.kinds.compose import dataflow_graph, execution_order
from morello_asp.serialize import from_json, to_json
from morello_asp.solver.proofs.verify import verify
from morello_asp.synthesis import synthesize


def softmax64(x, axis):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def assert_close(got, want, spec):
    tol = tolerance(spec, np.asarray(want, dtype=np.float32))
    err = float(np.abs(np.asarray(got, np.float64) - np.asarray(want, np.float64)).max())
    assert err <= tol, f"max |error| {err} > tolerance {tol}"


def rand(*shape, seed=0):
    return (np.random.default_rng(seed).random(shape) * 2 - 1).astype(np.float32)


FULL = (
    "(Compose((Softmax2, Matmul), [(1x8x4, f32, GL, row_major), (1x4x16, f32, L1, row_major, ua), "
    "out=(1x8x16, f32, GL, row_major)], serial), [16, 16, 1024, 33554432])"
)


def test_text_round_trips_and_sugar():
    s = parse_spec(FULL)
    assert s.text() == FULL and parse_spec(s.text()) == s
    sugar = parse_spec("Compose((Softmax2, Matmul), [1x8x4, 1x4x16], f32)")
    assert sugar.shape == (1, 8, 4, 16) and sugar.operand_shapes[-1] == (1, 8, 16)
    assert parse_spec(sugar.text()) == sugar
    mm = parse_spec("Compose((Matmul, Matmul), [(1x16x5, f32), (1x8x3, f32), (1x3x16, f32)])")
    assert mm.k.params == ("rhs", "lhs", "rhs1", "out") and mm.operand_shapes[-1] == (1, 8, 5)
    att = parse_spec("Compose((Matmul, Softmax2, Matmul), [1x6x5, 1x4x3, 1x3x6], f32)")
    assert att.operand_shapes[-1] == (1, 4, 5)
    assert parse_spec(att.text()) == att


@pytest.mark.parametrize(
    "text, problem",
    [
        ("Compose((Softmax2, Matmul), [1x8x4, 1x5x16], f32)", "dimension k is 4 in one operand and 5"),
        ("Compose((Softmax2, Matmul), [1x8x4, 1x4x16, 1x8x15], f32)", "dimension n is 16 in one operand and 15 in out"),
        ("Compose((Softmax2), [1x8x4], f32)", "at least two components"),
        ("Compose((Softmax2, Frob), [1x8x4], f32)", "unknown spec kind 'Frob'"),
        ("Compose((Softmax2, Matmul), [1x8x4, 1x4x16])", "needs a dtype"),
        ("Compose((MatmulAccum, Matmul), [1x8x4, 1x4x16, 1x4x8], f32)", "accumulates into its output"),
    ],
)
def test_bad_compose_is_refused_by_name(text, problem):
    with pytest.raises(SpecError, match=re.escape(problem)):
        parse_spec(text)


def test_bad_compose_on_the_command_line_is_one_line_exit_2():
    r = subprocess.run(
        [sys.executable, "-m", "morello_asp.cli", "synth", "Compose((Softmax2, Matmul), [1x8x4, 1x5x16], f32)"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "dimension k is 4" in r.stderr


def test_merged_dimensions_and_dataflow():
    k = kinds.kind("Compose((Softmax2, Matmul))")
    assert k.dims == ("b", "m", "k", "n") and k.params == ("lhs", "rhs", "out")
    assert k.reduction(4) == (2,) and k.scans(4) == (3,)  # k summed, n read whole by the softmax
    g = dataflow_graph([p.kind for p in k.components.parts], k.components.sources)
    assert g.has_edge(("c", 1), ("c", 0)) and g.has_edge(("c", 0), ("op", 2))
    assert execution_order(k) == [1, 0]
    three = kinds.kind("Compose((Matmul, Softmax2, Matmul))")
    assert execution_order(three) == [2, 1, 0]
    # a tile may cut b and m (the rows) only: fusion computes a softmax(A @ B) row band at a time
    s = parse_spec("Compose((Softmax2, Matmul), [1x4x3, 1x3x5], f32)")
    with pytest.raises(ScheduleError, match="reads whole"):
        s.tile([1, 4, 3, 4])
    with pytest.raises(ScheduleError, match="reduction"):
        s.tile([1, 4, 1, 5])


def _fused_softmax_matmul():
    """softmax(A @ B) a row at a time: each row's A @ B into an L1 row, then its softmax."""
    s = parse_spec("Compose((Softmax2, Matmul), [1x3x2, 1x2x9], f32)")
    return s.tile([1, 1, 2, 9]).subschedule([0], lambda row: row.bufferize(0, "L1")).synthesize_all()


def _matmul_chain():
    s = parse_spec("Compose((Matmul, Matmul), [1x4x3, 1x3x2, 1x2x4], f32)")
    return s.bufferize(0, "L1").synthesize_all()


def test_fused_and_bufferized_chains_run_and_are_proved():
    fused, chain = _fused_softmax_matmul(), _matmul_chain()
    text = str(fused)
    assert text.startswith("tile (") and "pipeline bufferize(0, L1, row_major) (lx: (1×1×9, f32, L1))" in text
    f1, f2 = compile_many([fused, chain])
    a, b = rand(1, 3, 2, seed=1), rand(1, 2, 9, seed=2)
    assert_close(f1(a, b), softmax64(a @ b, 2), fused.spec)
    c, x, y = rand(1, 4, 3, seed=3), rand(1, 3, 2, seed=4), rand(1, 2, 4, seed=5)  # (x @ y) @ c
    want = (x.astype(np.float64) @ y) @ c
    assert_close(f2(c, x, y), want, chain.spec)
    np.testing.assert_allclose(reference(chain.spec, c, x, y, np.zeros((1, 3, 3), np.float32)), want, rtol=1e-5)
    for prog in (fused, chain):
        rep = verify(prog)
        assert rep.ok, str(rep)
        assert str(from_json(to_json(prog))) == str(prog)
        assert any("the stages write every point of output" in o.what for o in rep.obligations)


def test_fuse_in_cache_keeps_the_intermediate_in_the_innermost_cache():
    """options/fuse_in_cache.lp on a target with two cache levels (avx512: L1 and L2):
    bufferize is offered at L1 only; without the option at every level. (On the native
    Zen 5 target the search had taken the whole intermediate in L2, the separate program
    with its buffer there, 1.6 times slower than bands in L1: docs/results/softmax.md.)"""
    from morello_asp.solver.search.engine import get_engine

    s = parse_spec("Compose((Softmax2, Matmul), [1x8x8, 1x8x64], f32)", "avx512")

    def levels(rules):
        acts = (str(x.action) for x in get_engine("avx512", rules).expand(s))
        return sorted(a.split(", ")[1] for a in acts if a.startswith("bufferize"))

    assert levels(()) == ["GL", "L1", "L2", "VRF"]
    assert levels(("fuse_in_cache",)) == ["L1"]


# --------------------------------------------------------------------- synthesis
@pytest.mark.slow
@pytest.mark.parametrize(
    "text",
    [
        "Compose((Softmax2, Matmul), [1x3x2, 1x2x9], f32)",
        "Compose((Matmul, Matmul), [1x3x4, 1x5x2, 1x2x3], f32)",
        "Compose((Matmul, Softmax2, Matmul), [1x5x3, 1x3x2, 1x2x5], f32)",
        # softmax(A @ B^T * s): B^T a col-major view, s = 1 / sqrt(d) a 1 x 1 x 1 operand
        "Compose((Softmax2, BatchMulScalar, Matmul), [(1x1x1, f32, GL, row_major), (1x3x2, f32, GL, row_major), "
        "(1x2x9, f32, GL, col_major), out=(1x3x9, f32, GL, row_major)], serial)",
    ],
)
def test_chains_synthesize_run_and_are_proved(text):
    imp = synthesize(text)
    assert imp.is_complete
    spec = imp.spec
    ins = [rand(*spec.operand_shapes[i], seed=i) for i in range(len(spec.operands) - 1)]
    got = imp.compile()(*ins)
    assert_close(got, reference(spec, *ins, np.zeros(spec.operand_shapes[-1], np.float32)), spec)
    if spec.kind == "Compose((Softmax2, Matmul))":
        assert_close(got, softmax64(ins[0] @ ins[1], 2), spec)
    if spec.kind == "Compose((Softmax2, BatchMulScalar, Matmul))":
        assert_close(got, softmax64(ins[0][0, 0, 0] * (ins[1] @ ins[2]), 2), spec)
    rep = verify(imp)
    assert rep.ok, str(rep)


# --------------------------------------------------------------------- graphs
def test_program_and_compose_graphs_are_dot(tmp_path):
    """--graph: the program's dataflow (the pipeline's intermediate between the kernels
    that write and read it) and the Compose's component graph, as DOT; the CLI writes both."""
    import networkx as nx

    from morello_asp.graph import compose_graph, to_dot

    fused = _fused_softmax_matmul()
    g = fused.graph()
    mids = [n for n, d in g.nodes(data=True) if d["kind"] == "intermediate"]
    assert len(mids) >= 1 and nx.is_directed_acyclic_graph(g)
    lx = next(n for n in mids if g.nodes[n]["label"].startswith("lx "))
    writers = {g.nodes[p]["label"] for p in g.predecessors(lx)}
    readers = {g.nodes[s]["label"] for s in g.successors(lx)}
    assert writers and readers and not writers & readers
    ins = [n for n, d in g.nodes(data=True) if d["kind"] == "input"]
    out = next(n for n, d in g.nodes(data=True) if d["kind"] == "output")
    assert all(nx.has_path(g, i, out) for i in ins) and len(ins) == 2
    dot = to_dot(g)
    assert dot.startswith('digraph "program" {') and dot.count("->") == g.number_of_edges()
    cg = compose_graph(fused.spec)
    assert sorted(d["label"] for n, d in cg.nodes(data=True) if d["kind"] == "op") == ["0: Softmax2", "1: Matmul"]
    path = tmp_path / "p.dot"
    fused.write_graph(path)
    assert path.read_text() == dot
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        pass  # a .png needs matplotlib (an error message otherwise)
    else:
        fused.write_graph(tmp_path / "p.png")
        assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    cli = [sys.executable, "-m", "morello_asp.cli", "synth", "Matmul(1x1x2, f32)", "-q", "--graph"]
    r = subprocess.run([*cli, str(tmp_path / "m.dot")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "m.dot").read_text().startswith('digraph "program"')
    assert not (tmp_path / "m.compose.dot").exists()  # not a Compose
    r = subprocess.run([*cli, str(tmp_path / "no" / "g.dot")], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "does not exist" in r.stderr
