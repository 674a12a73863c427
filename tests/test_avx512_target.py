"""The AVX-512 target is fact files only (encodings/targets/avx512.lp, avx512/): it
synthesizes, its C compiles everywhere gcc does (-mavx512f needs no AVX-512 CPU), and
its programs run against numpy where the CPU has avx512f (skipped elsewhere, naming
the missing flag)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from morello_asp import parse_spec
from morello_asp.codegen.ctarget import get_ctarget
from morello_asp.codegen.standalone import build_command
from morello_asp.synthesis import synthesize

SPECS = ["Matmul(3x5x7, f32)", "Matmul(1x2x16, f32)", "Matmul(1x2x16, i32)"]


@pytest.fixture(scope="module", params=SPECS)
def program(request):
    return synthesize(parse_spec(request.param, "avx512"))


def test_avx512_target_facts():
    ct = get_ctarget("avx512")
    assert ct.target.name == "avx512"
    assert sorted(ct.target.vector_types) == [16, 32, 64]
    assert ct.target.level("VRF").capacity == 32
    assert "-mavx512f" in ct.flags and "avx512f" in ct.cpu_flags


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc on PATH")
def test_avx512_programs_compile_here(program, tmp_path):
    ct = get_ctarget("avx512")
    c = program.to_c(standalone=True)
    if program.spec.shape[-1] % 16 == 0 and str(program.spec.operands[0].dtype) == "f32":
        assert "_mm512_" in c and "__m512" in c  # 16-wide rows use zmm registers
    (tmp_path / "prog.c").write_text(c)
    cmd = build_command(ct, str(tmp_path / "prog.c"), str(tmp_path / "prog"), False)
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_avx512_programs_match_numpy_where_the_cpu_has_avx512(program):
    missing = get_ctarget("avx512").missing_cpu_flags()
    if missing:
        pytest.skip(f"this CPU lacks {', '.join(missing)} (/proc/cpuinfo): AVX-512 programs compiled, not run")
    err, tol = program.compile().check()
    assert err <= tol
