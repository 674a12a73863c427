"""Targets declare how their programs are built and run (tgt_c_compiler, tgt_run_mode,
tgt_run_emulator, tgt_cpu_flag), and codegen obeys: no target name in Python."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from morello_asp import parse_spec
from morello_asp.codegen.api import compile_impl
from morello_asp.codegen.ctarget import cpu_flags, get_ctarget
from morello_asp.errors import CodegenError, TargetError
from morello_asp.synthesis import synthesize
from morello_asp.target import get_target


def test_avx2_declares_its_compiler_run_mode_and_cpu_flags():
    ct = get_ctarget("avx2")
    assert ct.compiler == "gcc" and ct.run_mode == "inprocess" and ct.emulator == ()
    assert set(ct.cpu_flags) == {"avx2", "fma"}
    assert ct.native


def test_a_program_needing_a_flag_this_cpu_lacks_is_not_loaded(tmp_path):
    extra = tmp_path / "flag.lp"
    extra.write_text('tgt_cpu_flag("no_such_cpu_flag").\n')
    ct = get_ctarget("avx2", (str(extra),))
    assert ct.missing_cpu_flags() == ["no_such_cpu_flag"]
    assert "no_such_cpu_flag" in ct.cannot_run()
    imp = synthesize(parse_spec("Matmul(2x2x2, f32)"))
    with pytest.raises(CodegenError, match="lacks no_such_cpu_flag"):
        compile_impl(imp, "avx2", (str(extra),))


def test_bad_run_mode_is_a_target_error(tmp_path):
    extra = tmp_path / "mode.lp"
    extra.write_text("tgt_run_mode(sideways).\n")
    with pytest.raises(TargetError, match="tgt_run_mode"):
        get_ctarget("avx2", (str(extra),))


def test_a_malformed_carried_trip_is_a_target_error(tmp_path):
    """tgt_carried_trip/2 takes two costs >= 0; anything else is refused by name when the
    target loads, not met as a type error in the middle of a search."""
    extra = tmp_path / "carried.lp"
    extra.write_text('tgt_carried_trip("x", 160).\n')
    with pytest.raises(TargetError, match=r"bad tgt_carried_trip\('x', 160\)"):
        get_target("scalar", (str(extra),))
    extra.write_text("tgt_carried_trip(16, 160).\n")
    assert get_target("scalar", (str(extra),)).carried_trip == 16


def test_cpu_flags_are_read_from_proc_cpuinfo():
    flags = cpu_flags()
    assert isinstance(flags, frozenset)


def test_targets_command_lists_installed_targets_and_whether_they_run_here(capsys):
    from morello_asp.cli import main
    from morello_asp.target import ENCODINGS

    assert main(["targets", "-v"]) == 0
    out = capsys.readouterr().out
    for entry in sorted((ENCODINGS / "targets").glob("*.lp")):
        if entry.stem == "c_scalar":  # included by the targets: not one itself (issue 56)
            continue
        assert any(line.startswith(entry.stem + " ") for line in out.splitlines()), entry.stem
    assert "cannot load" not in out and not any(ln.startswith("c_scalar") for ln in out.splitlines()), out
    assert out.splitlines()[-1].startswith("include files, not targets (included by): c_scalar.lp (avx2, "), out
    why = get_ctarget("avx2").cannot_run()
    line = next(ln for ln in out.splitlines() if ln.startswith("avx2 "))
    assert ("runs here" in line) if not why else (why in line)
    assert "cpu flags avx2 fma" in out


def test_an_include_file_is_not_offered_or_loaded_as_a_target():
    """Issue 56: `targets` listed c_scalar (a file the targets #include, with no memory
    levels) as a target that "cannot load", and the known targets named it. A target's
    entry file declares levels (tgt_level/6); --target c_scalar says what c_scalar is."""
    from morello_asp.target import get_target, installed_targets

    entries, includes = installed_targets()
    assert "c_scalar" not in entries and {"avx2", "avx512", "neon"} <= set(entries)
    assert {"avx2", "avx512", "neon"} <= set(includes["c_scalar"]) and set(includes["c_scalar"]) <= set(entries)
    known = ", ".join(["native", *entries])  # native, the host's, is written when it is first named
    with pytest.raises(TargetError) as e:
        get_target("c_scalar")
    assert str(e.value) == (
        f"c_scalar is not a target but a file targets include ({', '.join(includes['c_scalar'])}); "
        f"known targets: {known}"
    )
    with pytest.raises(TargetError) as e:
        get_target("avx3")
    assert str(e.value) == f"unknown target 'avx3'; known targets: {known} (or pass a path to a .lp file)"


ROOT = Path(__file__).resolve().parent.parent
FACTS_ONLY = ["avx512", "neon"]  # targets added by fact files alone


@pytest.mark.parametrize("target", FACTS_ONLY)
def test_adding_the_target_added_no_python_line(target):
    """Every commit that added one of the target's files (its entry file, and each fact
    file under encodings/targets/NAME/: later kernels such as avx512's masked tails and
    neon's casts too) touched only encodings/targets/, tests/ and documentation."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    shallow = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=ROOT, capture_output=True, text=True)
    if shallow.stdout.strip() == "true":
        pytest.skip("a shallow clone: the commit that added the target is not in its history")
    entry = f"encodings/targets/{target}.lp"
    log = subprocess.run(
        ["git", "log", "--diff-filter=A", "--format=%H", "--", entry, f"encodings/targets/{target}/"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    commits = log.stdout.split()
    if log.returncode != 0 or not commits:
        pytest.skip(f"{entry} is not committed yet")
    for commit in commits:
        files = subprocess.run(
            ["git", "show", "--name-only", "--format=", commit], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.split()
        other = [f for f in files if not f.startswith(("encodings/targets/", "tests/")) and not f.endswith(".md")]
        assert not other, f"a commit adding {target} files ({commit[:10]}) also changed {other}"


def test_a_target_is_remembered_until_a_file_it_includes_changes(tmp_path, monkeypatch):
    """A target read once is read from the user's cache after (no grounding); an edit of
    a file its entry #includes is another entry, read afresh."""
    import shutil

    from morello_asp import target as target_module

    monkeypatch.setenv("MORELLO_ASP_CACHE", str(tmp_path / "cache"))
    src = Path(target_module.__file__).resolve().parent.parent / "encodings" / "targets"
    shutil.copytree(src, tmp_path / "targets")
    entry = tmp_path / "targets" / "avx2.lp"
    load = target_module._load.__wrapped__  # past the per-process cache, to the user's
    first = load(str(entry), ())
    assert first.threads == 2
    real = target_module.load_target_file

    def no_loading(*a, **k):
        raise AssertionError("the target was read from its files although the cache holds it")

    monkeypatch.setattr(target_module, "load_target_file", no_loading)
    assert load(str(entry), ()) == first
    monkeypatch.setattr(target_module, "load_target_file", real)
    machine = tmp_path / "targets" / "avx2" / "machine.lp"
    machine.write_text(machine.read_text().replace("tgt_threads(2).", "tgt_threads(4)."))
    assert load(str(entry), ()).threads == 4
    assert len(list((tmp_path / "cache" / "targets").iterdir())) == 2


def facts(entry: Path) -> list[str]:
    """Every atom of a target's files grounded with no spec, as text, sorted."""
    import clingo

    ctl = clingo.Control(["--warn=none"])
    ctl.load(str(entry))
    ctl.ground([("base", [])])
    return sorted(str(a.symbol) for a in ctl.symbolic_atoms)


@pytest.mark.parametrize("name", ["avx2", "avx512", "neon"])
def test_shipped_targets_state_the_same_facts_as_before_the_isa_split(name):
    # machine.lp was split into the machine (machine.lp) and the ISA (isa.lp): the entry
    # files ground to exactly the atoms they did before (tests/golden/targets/, from main;
    # avx512's with the softmax row kernels it includes since, and memory at 4 a line; each
    # with its native-target facts, tgt_native_family/1 and tgt_native_rank/1, since; the
    # softmax kernels' avx2_lanes/1, and avx512's own softmax C, since issue 59; max and min
    # as comparisons, not fmaxf/fminf, and avx512's VectorTranspose16, since issue 60; Matmul's register
    # block sizes, tgt_block_size(matmul, ...), since 2026-11-29; the epilogue kernels, later that day;
    # tgt_carried_trip/2, the latency of a chain of sums in registers, since 2026-11-30;
    # avx512's vector loads from L2, tgt_move_dest(l2, vrf), since the tenth session that day; and
    # avx512's tgt_fetch_lines(2), strided views of whole fetches, since the eleventh)
    want = (ROOT / "tests" / "golden" / "targets" / f"{name}.facts").read_text().splitlines()
    assert facts(ROOT / "encodings" / "targets" / f"{name}.lp") == want


@pytest.mark.parametrize("target, pays", [("avx512", {32: 1, 16: 2}), ("avx2", {32: 2, 16: 2})])
def test_a_strided_view_of_whole_fetches_is_not_charged_double(target, pays):
    """tgt_fetch_lines(2) (avx512/machine.lp): a channels-last view whose runs are whole
    pairs of lines (32 f32 channels of each pixel) moves as a contiguous one does; runs of
    one line (16 channels) pay double, and so does every strided view on a target without
    the fact (avx2) (morello_asp/cost_model.py, m(t))."""
    from dataclasses import replace

    from morello_asp.cost_model import CostModel
    from morello_asp.spec import parse_spec
    from morello_asp.target import get_target

    model = CostModel.of(get_target(target))
    for c, factor in pays.items():
        tensors = "(f32, GL, [0, 2, 3, 1], c1), (f32, GL, [1, 2, 0]), (f32, GL, [0, 2, 3, 1])"
        spec = parse_spec(f"DepthwiseConv(1x{c}x4x4x3x3, {tensors}, serial)", target)
        strided, shape = spec.operands[0], spec.operand_shapes[0]
        assert strided.contig == 1
        contiguous = replace(strided, contig=None, stride=None)
        assert model.move(strided, shape) == factor * model.move(contiguous, shape), (target, c)
