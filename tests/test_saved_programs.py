"""Saved programs: proofs check kernels, `run` refuses what is not proved, and a program
records its target and rule files so it runs from anywhere (issue 21, part 3)."""

from __future__ import annotations

import json

import pytest

from morello_asp import parse_spec
from morello_asp.cli import main
from morello_asp.errors import SpecError
from morello_asp.serialize import load, load_with_rules, save
from morello_asp.solver.proofs.verify import verify
from morello_asp.synthesis import synthesize
from morello_asp.target import ENCODINGS

SPEC = "Matmul(2x2x2, f32)"


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    d = tmp_path_factory.mktemp("prog")
    imp = synthesize(SPEC)
    err, tol = imp.compile().check()
    assert err <= tol
    path = d / "p.json"
    save(imp, path)
    return path


def _tampered(saved, tmp_path, old, new, name="bad.json"):
    text = saved.read_text()
    assert old in text
    p = tmp_path / name
    p.write_text(text.replace(old, new, 1))
    return p


def test_verify_proves_a_saved_program_and_its_kernels(saved, capsys):
    rep = verify(load(saved))
    assert rep.ok, str(rep)
    assert any(o.what.startswith("kernel MultAdd applies") and o.status == "proved" for o in rep.obligations)
    assert main(["verify", str(saved)]) == 0


def _bump_multadd_cost(saved, tmp_path):
    doc = json.loads(saved.read_text())

    def bump(n):
        if n.get("node") == "kernel" and n["kernel"] == "MultAdd":
            n["cost"] += 5
        for c in [n.get(k) for k in ("body", "load", "store")] + n.get("stmts", []) + n.get("boundaries", []):
            if isinstance(c, dict):
                bump(c)

    bump(doc["program"])
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    return bad


@pytest.mark.parametrize(
    "tamper,why",
    [
        (lambda s, t: _tampered(s, t, '"kernel": "MultAdd"', '"kernel": "ValueZero"'), "do not apply ValueZero"),
        (lambda s, t: _tampered(s, t, '"kernel": "MultAdd"', '"kernel": "NoSuchKernel"'), "do not apply NoSuchKernel"),
        (_bump_multadd_cost, "the target's rules give 1"),
    ],
    ids=["swapped", "unknown", "cost"],
)
def test_verify_refutes_a_tampered_kernel_and_run_refuses_it(saved, tmp_path, capsys, tamper, why):
    bad = tamper(saved, tmp_path)
    rep = verify(load(bad))
    assert not rep.ok
    assert any(o.status == "refuted" and why in o.detail for o in rep.obligations), str(rep)
    capsys.readouterr()
    assert main(["verify", str(bad)]) == 1
    # run refuses it with one line and exit 1
    assert main(["run", str(bad)]) == 1
    err = capsys.readouterr().err.strip()
    assert "not proved legal" in err and "\n" not in err and "Traceback" not in err


def test_run_no_verify_executes_a_tampered_program_and_numpy_catches_it(saved, tmp_path, capsys):
    bad = _tampered(saved, tmp_path, '"kernel": "MultAdd"', '"kernel": "ValueZero"')
    assert main(["run", str(bad), "--no-verify"]) == 1
    assert "MISMATCH" in capsys.readouterr().out


def test_a_padded_layout_is_refused_by_parse_with_the_reason(capsys):
    text = (
        "(Matmul(1x6x2x2, (f32, GL, [0, 1, 2, 1 p(4)]), (f32, GL, row_major), (f32, GL, row_major)), "
        "[16, 16, 1024, 33554432])"
    )
    with pytest.raises(SpecError, match="a pack must divide its dimension"):
        parse_spec(text)
    assert main(["parse", text]) == 2
    assert "a pack must divide" in capsys.readouterr().err
    # the same layout on a shape it divides is a spec, and its program is proved
    ok = parse_spec(text.replace("1x6x2x2", "1x8x2x2"))
    imp = synthesize(ok)
    assert verify(imp).ok
    err, tol = imp.compile().check()
    assert err <= tol


def test_a_saved_program_records_its_rules_and_target_and_runs_from_anywhere(tmp_path, monkeypatch, capsys):
    # a target given by a relative path, and a kernel that only a --rules file defines
    machine = (ENCODINGS / "targets" / "avx2" / "machine.lp").read_text().replace("tgt_name(avx2).", "tgt_name(mine).")
    work = tmp_path / "work"
    (work / "mine").mkdir(parents=True)
    (work / "mine" / "machine.lp").write_text(machine)
    avx = ENCODINGS / "targets" / "avx2"
    (work / "mine.lp").write_text(
        f'#include "mine/machine.lp".\n#include "{avx}/isa.lp".\n#include "{avx}/kernels.lp".\n'
        f'#include "{avx}/kernels_c.lp".\n'
    )
    (work / "cheap.lp").write_text(
        "kernel_applies(S, cheap_zero) :- spec(S, zero), spec_operand(S, 0, _, L, _, _, _, _), L != rf, L != vrf,"
        " contiguous(S, 0).\n"
        "kernel_cost(S, cheap_zero, 0) :- kernel_applies(S, cheap_zero).\n"
        'tgt_kernel_c(cheap_zero, f32, "memset({out_ptr}, 0, {out_bytes}); /* cheap */").\n'
    )
    monkeypatch.chdir(work)
    assert main(["synth", SPEC, "-q", "--target", "mine.lp", "--rules", "cheap.lp", "--out", "p.json"]) == 0
    doc = json.loads((work / "p.json").read_text())
    assert doc["target"] == str((work / "mine.lp").resolve())
    assert doc["rules"] == [str((work / "cheap.lp").resolve())]
    imp, rules = load_with_rules(work / "p.json")
    assert imp.spec.target.name == "mine" and any("CheapZero" == getattr(n, "kernel", None) for n in imp.walk())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    capsys.readouterr()
    assert main(["run", str(work / "p.json")]) == 0
    assert "OK" in capsys.readouterr().out
    assert main(["verify", str(work / "p.json")]) == 0


def test_malformed_program_json_is_one_error_not_a_traceback(saved, tmp_path, capsys):
    doc = json.loads(saved.read_text())
    doc["program"]["body"] = 7  # right version, wrong structure
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    assert main(["verify", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert "malformed program" in err and "Traceback" not in err
