"""The engine grounds copies of the rule files whose anonymous variables are named
(solver/logic/anonymous_vars.py): the same answers as the files as written, with lines and
columns kept for clingo's messages."""

from __future__ import annotations

from pathlib import Path

from morello_asp import parse_spec
from morello_asp.solver.logic import clingo_run
from morello_asp.solver.logic.anonymous_vars import name_anonymous
from morello_asp.solver.search.engine import Engine
from morello_asp.solver.search.facts import spec_facts


def test_names_the_anonymous_variables_of_positive_body_literals_only():
    text = (
        "% a comment with p(_)\n"
        "a(X) :- b(X, _, _), not c(X, _), #count { Y : d(Y, _) } > 1.\n"
        '#show g(S) : h(S, _), S != "_".\n'
        "e(A) :- f(A, _), A = tile(_).\n"
    )
    out = name_anonymous(text)
    lines = out.splitlines()
    assert lines[0] == "% a comment with p(_)"
    assert lines[1] == "a(X) :- b(X, A, B), not c(X, _), #count { Y : d(Y, C) } > 1."
    assert lines[2] == '#show g(S) : h(S, A), S != "_".'
    assert lines[3] == "e(A) :- f(A, B), A = tile(C)."  # A is taken: the next free letters
    assert [len(x) for x in lines] == [len(x) for x in text.splitlines()]


def test_keeps_includes_and_text_it_cannot_parse():
    text = '#include "elsewhere.lp".\na :- b(_).\n'
    assert name_anonymous(text) == '#include "elsewhere.lp".\na :- b(A).\n'
    bad = "a :- b(_.\n"
    assert name_anonymous(bad) == bad


def test_the_engine_copies_answer_as_the_files_as_written():
    """A batch of Matmul, MatmulAccum, Zero and Softmax classes at several levels and strides: the shown
    atoms of one clingo call on the copies equal those on the files as written."""
    engine = Engine("avx2")
    specs = [
        "Matmul(4x8x16, f32)",
        "MatmulAccum(1x4x8x16, f32)",
        "MatmulAccum(1x6x16x16, (f32, L1, row_major), (f32, L1, row_major, c2, s9), (f32, GL, row_major))",
        "Zero(8x16, (f32, L1, row_major))",
        "Softmax1(3x64, f32)",
    ]
    facts: list[str] = []
    for i, s in enumerate(specs):
        facts += spec_facts(i, parse_spec(s).without_limits, engine.target, engine.ids)
    text = engine._text(facts)
    written = tuple(str(f) for f in engine.files)
    assert written != engine._files
    rc_a, ans_a, _ = clingo_run.answer(written, text)
    rc_b, ans_b, _ = clingo_run.answer(engine._files, text)
    assert rc_a == rc_b == 30
    atoms = sorted(ans_a.split())
    assert len(atoms) > 500  # the batch has rewrites to compare
    assert atoms == sorted(ans_b.split())


def test_a_file_included_by_an_absolute_path_is_never_written(tmp_path):
    """The engine rewrites its snapshot's copies only. A file #included by an absolute
    path is read where it lies (the calibrated-target tests include the shipped avx2
    kernels so), so it must keep its text, `_` and all."""
    shared = tmp_path / "elsewhere" / "helper.lp"
    shared.parent.mkdir()
    text = "% a user's helper\nmy_kind_seen(K) :- spec(S, K), spec_dim(S, _, _).\n"
    shared.write_text(text)
    entry = tmp_path / "mine.lp"
    entry.write_text(f'#include "{shared}".\nmy_spec_seen(S) :- spec(S, _).\n')
    engine = Engine("avx2", (str(entry),))
    assert shared.read_text() == text
    assert entry.read_text().endswith("my_spec_seen(S) :- spec(S, _).\n")
    copy = Path(engine._files[-1])
    assert copy != entry and copy.read_text().endswith("my_spec_seen(S) :- spec(S, A).\n")
