"""The native target (morello_asp/native.py): a target fact file written for the host from
archspec's answer and sysfs. Made here from fake sysfs trees and fake archspec answers
(real files, read by real clingo), and for the real host where its ISA runs. The suite
itself runs on avx2 (tests/conftest.py pins it: the goldens are avx2's)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from test_targets import facts  # the atoms of a target's files (tests/ is on sys.path)

from morello_asp import native
from morello_asp.target import ENCODINGS, as_target, default_target, get_target, load_target_file


def fake_sysfs(root: Path, caches, cpus=(0, 1), smt: int = 1) -> Path:
    """A sysfs cpu tree: `caches` are (level, type, size, ways, line, shared_cpu_list)."""
    for c in cpus:
        top = root / f"cpu{c}" / "topology"
        top.mkdir(parents=True)
        (top / "core_id").write_text(f"{c // smt}\n")
        (top / "physical_package_id").write_text("0\n")
        for i, (level, kind, size, ways, line, shared) in enumerate(caches):
            d = root / f"cpu{c}" / "cache" / f"index{i}"
            d.mkdir(parents=True)
            for k, v in dict(
                level=level, type=kind, size=size, ways_of_associativity=ways, coherency_line_size=line
            ).items():
                (d / k).write_text(f"{v}\n")
            (d / "shared_cpu_list").write_text(f"{shared}\n")
    return root


def cpu(name, family="x86_64", features=(), vendor="AuthenticAMD"):
    """An answer as archspec.cpu.host() gives it."""
    return SimpleNamespace(name=name, vendor=vendor, family=SimpleNamespace(name=family), features=set(features))


AVX512 = ("avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd")
ZEN5_CACHES = [
    (1, "Data", "48K", 12, 64, "0"),
    (1, "Instruction", "32K", 8, 64, "0"),
    (2, "Unified", "1024K", 16, 64, "0"),
    (3, "Unified", "32768K", 16, 64, "0-7"),
]
ZEN3_CACHES = [
    (1, "Data", "32K", 8, 64, "0-1"),
    (2, "Unified", "512K", 8, 64, "0-1"),
    (3, "Unified", "32M", 16, 64, "0-7"),
]


def test_an_avx512_host_gets_its_l1_threads_and_the_avx512_files(tmp_path):
    sysfs = fake_sysfs(tmp_path / "sys", ZEN5_CACHES, cpus=range(4))
    host = native.detect(sysfs, cpu("zen5", features=AVX512), cpus={0, 1, 2})
    assert host.isa == "avx512" and host.cores == 3
    path = native.write_target(host, tmp_path / "cache")
    assert path.parent == tmp_path / "cache" and path.name.startswith("native-zen5-")
    text = path.read_text()
    assert "tgt_level(l1, 2, 768, line, 2, cache)." in text  # 48 KiB of 64-byte lines
    assert "tgt_cache_ways(l1, 12). tgt_cache_sets(l1, 64)." in text  # 48 KiB / (12 x 64 B)
    assert "L2 unified 1 MiB, 16-way, 1024 sets, 64-byte lines, private" in text
    assert str(ENCODINGS / "targets" / "avx512" / "isa.lp") in text
    assert 'avx512/machine.lp"' not in text  # the model machine is stated, not included
    # an ordinary target: clingo reads it, the loader makes a Target of it
    t = load_target_file(path)
    assert t.name == "native_zen5" and t.threads == 3 and t.line_bytes == 64
    # the model's second cache level is the host's L2, half of it (tgt_native_fraction(l2, 2))
    assert [(lv.name, lv.capacity) for lv in t.levels] == [
        ("RF", 16),
        ("VRF", 32),
        ("L1", 768),
        ("L2", 8192),
        ("GL", 33554432),
    ]
    assert set(t.vector_types) == {16, 32, 64}
    atoms = set(facts(path))
    assert {"tgt_cache_ways(l1,12)", "tgt_cache_sets(l1,64)", "tgt_block_size(matmul_accum,1,12,1)"} <= atoms
    assert {"tgt_cache_ways(l2,16)", "tgt_cache_sets(l2,1024)", "tgt_level_copies_only(l2)"} <= atoms
    assert not any(a.startswith(("tgt_cache_ways(l1,8)", "tgt_threads(2)")) for a in atoms)  # the model's, replaced
    # the same host writes the same file; other caches, another file
    assert (
        native.write_target(native.detect(sysfs, cpu("zen5", features=AVX512), cpus={0, 1, 2}), tmp_path / "cache")
        == path
    )
    other = native.detect(fake_sysfs(tmp_path / "sys3", ZEN3_CACHES), cpu("zen5", features=AVX512))
    assert native.write_target(other, tmp_path / "cache") != path


def test_an_avx2_host_gets_the_avx2_files_and_counts_smt_siblings_once(tmp_path):
    sysfs = fake_sysfs(tmp_path / "sys", ZEN3_CACHES, cpus=range(4), smt=2)
    host = native.detect(sysfs, cpu("zen3", features=("avx", "avx2", "fma")), cpus={0, 1, 2, 3})
    assert host.isa == "avx2" and host.cores == 2
    t = load_target_file(native.write_target(host, tmp_path))
    assert t.level("L1").capacity == 512 and t.level("VRF").capacity == 16 and set(t.vector_types) == {16, 32}
    assert t.threads == 2
    assert "tgt_cache_ways(l1,8)" in facts(t.files[0]) and "tgt_cache_sets(l1,64)" in facts(t.files[0])


def test_the_isa_is_chosen_by_the_isa_files_facts_not_by_a_table_in_python(tmp_path):
    # each ISA's files say what a host needs (tgt_native_family/1, tgt_cpu_flag/1) and its
    # rank (tgt_native_rank/1): a CPU with exactly avx512's flags gets avx512; without one
    # of them (but avx2's), avx2; one without FMA runs neither
    flags = {i.name: i.flags for i in native.isas()}
    assert "avx512f" in flags["avx512"] and set(flags["avx2"]) <= set(flags["avx512"])
    sysfs = fake_sysfs(tmp_path / "sys", ZEN3_CACHES, cpus=[0])
    assert native.detect(sysfs, cpu("a", features=flags["avx512"]), cpus=[0]).isa == "avx512"
    assert native.detect(sysfs, cpu("b", features=set(flags["avx512"]) - {"avx512f"}), cpus=[0]).isa == "avx2"
    no_fma = native.detect(sysfs, cpu("x", features=("avx2", "avx512f")), cpus=[0])
    assert no_fma.isa == "scalar" and "avx2 needs x86_64 and avx2, fma" in no_fma.isa_reason
    arm_flags_on_x86 = native.detect(sysfs, cpu("x", features=("asimd",)), cpus=[0])
    assert arm_flags_on_x86.isa == "scalar"  # neon's family is aarch64


def test_an_aarch64_host_gets_neon_built_and_run_here(tmp_path):
    from morello_asp.codegen.ctarget import get_ctarget

    sysfs = fake_sysfs(tmp_path / "sys", [(1, "Data", "64K", 4, 64, "0"), (2, "Unified", "1M", 8, 64, "0")], cpus=[0])
    host = native.detect(sysfs, cpu("neoverse_n1", family="aarch64", features=("asimd",), vendor="ARM"), cpus=[0])
    assert host.isa == "neon"
    t = load_target_file(native.write_target(host, tmp_path))
    ct = get_ctarget(t)
    # the shipped neon target cross-compiles and runs under qemu; the host's runs natively
    assert not ct.emulator and ct.run_mode == "inprocess" and ct.compiler == "" and "-static" not in ct.flags
    assert "-march=armv8-a" in ct.flags and t.level("L1").capacity == 1024 and t.threads == 1


def test_a_cpu_no_isa_file_serves_falls_back_to_scalar_c_and_says_so(tmp_path, monkeypatch, capsys):
    sysfs = fake_sysfs(tmp_path / "sys", [(1, "Data", "32K", 8, 64, "0")], cpus=[0])
    host = native.detect(sysfs, cpu("power9le", family="ppc64le", features=("altivec",), vendor="IBM"), cpus=[0])
    assert host.isa == "scalar"
    monkeypatch.setenv("MORELLO_ASP_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(native, "host", lambda: host)
    native.entry.cache_clear()
    try:
        path = native.entry()
    finally:
        native.entry.cache_clear()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "native target" in err and "scalar C" in err and "power9le" in err
    t = load_target_file(path)
    assert t.vector_levels == () and t.name == "native_power9le" and t.level("L1").capacity == 512
    # and it runs: the generic point kernel, plain C
    from morello_asp import parse_spec, synthesize

    imp = synthesize(parse_spec("Matmul(3x4x5, f32)", t), db=None)
    err_, tol = imp.compile().check()
    assert err_ <= tol


def test_sysfs_without_caches_keeps_the_model_machine(tmp_path):
    (tmp_path / "sys" / "cpu0").mkdir(parents=True)
    host = native.detect(tmp_path / "sys", cpu("x86_64_v3", features=("avx2", "fma")), cpus=[0])
    assert host.caches == () and host.cores == 1
    t = load_target_file(native.write_target(host, tmp_path))
    assert t.level("L1").capacity == get_target("avx2").level("L1").capacity and t.threads == 1
    assert "sysfs describes none" in t.files[0].read_text()


def test_the_default_target_is_native_unless_morello_asp_target_names_one(monkeypatch):
    assert default_target() == "avx2" and as_target(None).name == "avx2"  # conftest pins the suite to avx2
    monkeypatch.delenv("MORELLO_ASP_TARGET")
    assert default_target() == "native"
    monkeypatch.setenv("MORELLO_ASP_TARGET", "avx9")
    from morello_asp.errors import TargetError

    with pytest.raises(TargetError, match=r"MORELLO_ASP_TARGET='avx9': unknown target 'avx9'; known targets: native, "):
        as_target(None)


def _native_runs() -> str:
    from morello_asp.codegen.ctarget import get_ctarget

    return get_ctarget("native").cannot_run()


def test_the_real_host_native_target_synthesizes_and_runs():
    host = native.host()
    t = get_target("native")
    assert t is as_target("native") and t.name == native.target_name(host)
    l1 = host.data_cache(1)
    if l1 is not None:
        assert t.level("L1").capacity == l1.size // l1.line
    why = _native_runs()
    if why:
        pytest.skip(f"the native target ({host.isa}) does not run here: {why}")
    from morello_asp import parse_spec, synthesize

    imp = synthesize(parse_spec("Matmul(8x8x16, f32)", "native"), target="native", db=None)
    assert imp.spec.target is t
    err, tol = imp.compile().check()
    assert err <= tol


def test_the_targets_command_shows_what_native_detected_and_where_its_file_is(capsys):
    from morello_asp.cli import main

    assert main(["targets"]) == 0
    out = capsys.readouterr().out.splitlines()
    host, path = native.host(), native.entry()
    assert out[0].startswith("native ") and ("runs here" in out[0] or "does not run here" in out[0])
    block = out[1 : out.index(next(ln for ln in out[1:] if not ln.startswith(" ")))]
    text = "\n".join(ln.strip() for ln in block)
    assert f"microarchitecture {host.microarch} (archspec" in text
    assert f"instruction set {host.isa}: " in text and f"{host.cores} core" in text
    assert all(c.text() in text for c in host.caches)
    assert f"file {path}" in text


def test_a_table_built_for_a_native_target_says_how_to_name_it(tmp_path, capsys):
    from morello_asp.cli import main

    host = native.detect(fake_sysfs(tmp_path / "sys", ZEN3_CACHES), cpu("zen3", features=("avx2", "fma")), cpus=[0])
    path = native.write_target(host, tmp_path)
    db = tmp_path / "t.db"
    assert main(["synth", "Matmul(2x2x2, f32)", "-q", "--target", str(path), "--db", str(db)]) == 0
    capsys.readouterr()
    assert main(["synth", "Matmul(2x2x2, f32)", "-q", "--target", "avx2", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "was built for target native_zen3 but this run is for avx2; to use it, pass --target native on a" in err


def test_archspec_answer_is_remembered_in_the_user_cache(tmp_path, monkeypatch):
    import archspec.cpu

    monkeypatch.setenv("MORELLO_ASP_CACHE", str(tmp_path))
    real = archspec.cpu.host()
    first = native.archspec_host()
    assert (first.name, first.family) == (real.name, real.family.name) and first.features == frozenset(real.features)

    def no_asking():
        raise AssertionError("archspec was asked again although the cache holds its answer")

    monkeypatch.setattr(archspec.cpu, "host", no_asking)
    assert native.archspec_host() == first


# ---- tables and programs of a native target, proved through the CLI (issue 57) ----------
def test_db_verify_proves_a_table_built_with_this_machines_native_target(tmp_path, capsys):
    """A table records its target's name (native_<microarchitecture>), which is no
    --target name: db verify resolves this machine's native target from it (it said
    "unknown target 'native_...'", exit 2). A program saved with native proves too."""
    from morello_asp.cli import main

    db, prog = tmp_path / "t.db", tmp_path / "p.json"
    args = ["synth", "Matmul(4x4x4, f32)", "-q", "--target", "native", "--db", str(db), "--out", str(prog)]
    assert main(args) == 0
    capsys.readouterr()
    assert main(["db", "verify", str(db)]) == 0
    out = capsys.readouterr().out
    assert " 0 refuted, 0 unknown" in out, out
    assert main(["verify", str(prog)]) == 0
    assert " obligations proved" in capsys.readouterr().out


def test_db_verify_of_another_machines_native_table_says_what_to_pass(tmp_path, capsys):
    """A table built for the native target of another machine (here a fake Zen 3's file)
    names a target no file here has: one line naming the table and the target and what
    to pass (its file, with --target), exit 2; with --target and that file it proves."""
    from morello_asp.cli import main

    host = native.detect(fake_sysfs(tmp_path / "sys", ZEN3_CACHES), cpu("zen3", features=("avx2", "fma")), cpus=[0])
    if native.target_name(native.host()) == native.target_name(host):
        pytest.skip("this machine's native target has the fake host's name")
    path = native.write_target(host, tmp_path / "other")
    db = tmp_path / "t.db"
    assert main(["synth", "Matmul(2x2x2, f32)", "-q", "--target", str(path), "--db", str(db)]) == 0
    capsys.readouterr()
    assert main(["db", "verify", str(db)]) == 2
    cap = capsys.readouterr()
    err = cap.err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    assert err.startswith(f"morello-asp: error: memo table {db} was built for target native_zen3, the native target")
    assert "pass --target with that file" in err
    assert main(["db", "verify", str(db), "--target", str(path)]) == 0
    assert " 0 refuted, 0 unknown" in capsys.readouterr().out


def test_a_program_whose_native_target_file_is_gone_says_what_to_do(tmp_path, capsys):
    """A program saved with a native target names the target's file; where that file is
    missing (a program made on another machine), run and verify say so in one line."""
    from morello_asp.cli import main

    host = native.detect(fake_sysfs(tmp_path / "sys", ZEN3_CACHES), cpu("zen3", features=("avx2", "fma")), cpus=[0])
    path = native.write_target(host, tmp_path / "other")
    prog = tmp_path / "p.json"
    assert main(["synth", "Matmul(2x2x2, f32)", "-q", "--target", str(path), "--out", str(prog)]) == 0
    assert main(["verify", str(prog)]) == 0
    path.unlink()
    capsys.readouterr()
    for cmd in (["verify", str(prog)], ["run", str(prog)]):
        assert main(cmd) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and f"the program was saved for target file {path}, a native target" in err, err
        assert "copy it here to that path, or synthesize the program again here" in err
