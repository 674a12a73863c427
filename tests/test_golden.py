"""Golden outputs: the CLI's listing, C and `explain` text of a few small specs must not
change unless a change means to change them. Each case runs `morello-asp` in this process
and compares its stdout with tests/golden/<name>; `pytest --update-golden` rewrites the
files instead (then review the diff). Every program a case synthesizes is also saved
(`--out`), compiled, run and checked against numpy.

The files were made with `MORELLO_ASP_JOBS=1 morello-asp ARGS > tests/golden/NAME`."""

from __future__ import annotations

from pathlib import Path

import pytest

from morello_asp.cli import main
from morello_asp.cli.schedule import FIGURE1, figure1
from morello_asp.serialize import load

GOLDEN = Path(__file__).resolve().parent / "golden"

CASES = {
    "matmul_4x4x4_f32.listing.txt": ["synth", "Matmul(4x4x4, f32)", "-q"],
    "matmul_4x4x4_f32.c": ["synth", "Matmul(4x4x4, f32)", "-q", "--emit", "c"],
    "matmul_3x5x7_i32.listing.txt": ["synth", "Matmul(3x5x7, i32)", "-q"],
    "matmul_8x8x8_f32.listing.txt": ["synth", "Matmul(8x8x8, f32)", "-q"],
    "matmul_8x8x8_f32.c": ["synth", "Matmul(8x8x8, f32)", "-q", "--emit", "c"],
    "matmul_4x4x4_f32.explain.txt": ["explain", "Matmul(4x4x4, f32)"],
    "figure1.listing.txt": ["demo"],
    "figure1.explain.txt": ["explain", FIGURE1],
}


def check_against_numpy(imp):
    err, tol = imp.compile().check()
    assert err <= tol, (err, tol)


@pytest.mark.parametrize("name", list(CASES))
def test_golden(name, capsys, tmp_path, monkeypatch, update_golden):
    monkeypatch.setenv("MORELLO_ASP_JOBS", "1")  # as the files were made
    argv = CASES[name]
    synth = argv[0] == "synth"
    prog = tmp_path / "prog.json"
    capsys.readouterr()
    assert main(argv + ["--out", str(prog)] if synth else argv) == 0
    out = capsys.readouterr().out
    path = GOLDEN / name
    if update_golden:
        path.write_text(out)
    else:
        assert path.is_file(), f"no golden file {path}: run pytest {__file__} --update-golden"
        assert out == path.read_text(), (
            f"`morello-asp {' '.join(argv)}` differs from {path} (--update-golden rewrites it)"
        )
    if synth:  # the program the CLI printed, checked against numpy
        imp = load(prog)
        if argv[-2:] == ["--emit", "c"]:
            assert imp.to_c() + "\n" == out
        else:
            assert f"{imp}\n{imp.cost}\n" == out
        check_against_numpy(imp)
    elif argv == ["demo"]:
        check_against_numpy(figure1())
