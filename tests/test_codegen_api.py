"""Codegen API: calling convention checks, errors, module cache, benchmark, CLI."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from morello_asp import parse_spec
from morello_asp.codegen.asm import have_objdump, inner_loop_asm
from morello_asp.codegen.build import build
from morello_asp.codegen.ctarget import get_ctarget
from morello_asp.errors import CodegenError, CompileError, MorelloError, ScheduleError
from morello_asp.recipes import complete, fast_matmul, scalar


@pytest.fixture(scope="module")
def small():
    return fast_matmul(12, 16, 32)


def test_to_c_is_one_readable_function(small):
    src = small.to_c()
    assert "#include <immintrin.h>" in src
    assert "void kernel(const float *restrict lhs, const float *restrict rhs, float *restrict out)" in src
    assert "_mm256_fmadd_ps" in src and "_mm256_broadcast_ss" in src
    assert "__m256 vout_0, vout_1" in src  # one named variable per register, no arrays


def test_call_2d_3d_and_out(small):
    fn = small.compile()
    rng = np.random.default_rng(1)
    a = rng.random((12, 16), dtype=np.float32)
    b = rng.random((16, 32), dtype=np.float32)
    r = fn(a, b)
    assert r.shape == (12, 32)
    np.testing.assert_allclose(r, a @ b, rtol=1e-5)
    r3 = fn(a[None], b[None])
    assert r3.shape == (1, 12, 32)
    out = np.full((12, 32), 7, dtype=np.float32)
    assert fn(a, b, out=out) is out
    np.testing.assert_allclose(out, a @ b, rtol=1e-5)
    # non-contiguous, unaligned inputs are copied into aligned buffers
    big = rng.random((12, 33), dtype=np.float32)
    np.testing.assert_allclose(fn(big[:, 1:17], b), big[:, 1:17] @ b, rtol=1e-5)


def test_call_errors(small):
    fn = small.compile()
    a = np.zeros((12, 16), np.float32)
    b = np.zeros((16, 32), np.float32)
    with pytest.raises(CodegenError, match="dtype float64"):
        fn(a.astype(np.float64), b)
    with pytest.raises(CodegenError, match="shape"):
        fn(a, b.T)
    with pytest.raises(CodegenError, match="takes 2 input"):
        fn(a)
    with pytest.raises(CodegenError, match="shape"):
        fn(a, b, out=np.zeros((3, 3), np.float32))


def test_incomplete_program_is_rejected():
    imp = parse_spec("Matmul(4x4x4, f32)").to_accum()
    with pytest.raises(CodegenError, match="incomplete"):
        imp.to_c()


def test_compile_error_carries_gcc_message():
    with pytest.raises(CompileError) as e:
        build("void kernel(void) { this is not C; }", "void kernel(void);")
    assert "error" in str(e.value) and "gcc failed" in str(e.value)
    assert isinstance(e.value, MorelloError)


def test_kernel_without_template_and_bad_placeholder(monkeypatch, small):
    from morello_asp.codegen import emit

    ct = get_ctarget("avx2")
    no_bvma = dataclasses.replace(
        ct, templates={k: v for k, v in ct.templates.items() if k[0] != "broadcast_vec_mult_add"}
    )
    monkeypatch.setattr(emit, "get_ctarget", lambda name, rules=(): no_bvma)
    with pytest.raises(CodegenError, match="no C for kernel BroadcastVecMultAdd"):
        emit.to_c(small)
    bad = dict(ct.templates)
    bad[("memset_zero", "any")] = "memset({result_ptr}, 0, 4);"
    monkeypatch.setattr(emit, "get_ctarget", lambda name, rules=(): dataclasses.replace(ct, templates=bad))
    with pytest.raises(CodegenError, match="result"):
        emit.to_c(small)


def test_module_cache_dir_and_reuse(tmp_path, monkeypatch):
    monkeypatch.setenv("MORELLO_ASP_CACHE", str(tmp_path))
    imp = complete(parse_spec("Matmul(2x3x5, i32)").to_accum(), scalar)
    fn1 = imp.compile()
    assert list(tmp_path.glob("_morello_*.so"))
    fn2 = imp.compile()
    assert fn1.module is fn2.module  # same source hash: no rebuild


def test_benchmark_reports_time_and_gflops(small):
    r = small.compile().benchmark(reps=3, min_time=0.001)
    assert r.seconds > 0 and r.gflops > 0 and len(r.times) == 3 and r.iters >= 1
    assert "GFLOP/s" in str(r)


def test_cli_run_and_bench_on_saved_program(tmp_path, small, capsys):
    from morello_asp.cli import main
    from morello_asp.serialize import save

    path = tmp_path / "prog.json"
    save(small, path)
    assert main(["run", str(path)]) == 0
    assert "OK" in capsys.readouterr().out
    assert main(["bench", str(path), "--reps", "3"]) == 0
    assert "GFLOP/s" in capsys.readouterr().out


def test_kernel_on_a_non_contiguous_cache_view_is_refused():
    """A cache move keeps the view's contiguousness (move.lp), so a memset cannot be
    selected for a 2x16 block of a wider row-major matrix."""
    imp = parse_spec("Matmul(4x4x32, f32)").to_accum()
    with pytest.raises(ScheduleError, match="MemsetZero"):
        imp.subschedule([0], lambda z: z.tile([1, 2, 16]).move_param(0, "L1").select("MemsetZero"))


@pytest.mark.skipif(not have_objdump(), reason="needs objdump")
def test_register_tile_stays_in_registers():
    """The 6x16 tile's inner loop: 12 FMAs a trip of k on ymm registers (a multiple of 12
    in the loop gcc unrolls, -funroll-loops), nothing on the stack."""
    import re

    fn = fast_matmul(48, 64, 64).compile()
    asm = inner_loop_asm(fn.module.__file__)
    m = re.search(r"(\d+) FMAs, 0 stack accesses", asm)
    assert "vbroadcastss" in asm and m and int(m[1]) % 12 == 0, asm


def test_out_aliasing_an_input_is_safe():
    fn = fast_matmul(12, 16, 16).compile()
    rng = np.random.default_rng(3)
    a = rng.random((12, 16), dtype=np.float32)
    b = rng.random((16, 16), dtype=np.float32)
    want = a @ b
    np.testing.assert_allclose(fn(a, b, out=a), want, rtol=1e-5)


def test_cli_bad_inputs_are_one_line_errors_and_create_nothing(tmp_path, capsys):
    from morello_asp.cli import main

    cases = [
        (["run", str(tmp_path / "missing.json")], "no program file"),
        (["synth", "Matmul(4x4x4, f33)", "--quiet"], "a dtype (one of"),
        (["synth", "Convolve(4x4x4, f32)", "--quiet"], "a spec kind (one of"),
        (["query", "Matmul(4x4x4, f32)", "--db", str(tmp_path / "none.db")], "no memo table at"),
        (["synth", "Matmul(4x4x4, f32)", "--rules", str(tmp_path / "none.lp"), "--quiet"], "rule file not found"),
    ]
    for argv, msg in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("morello-asp: error:") and msg in err and "Traceback" not in err, err
    assert list(tmp_path.iterdir()) == []


def test_benchmark_times_every_call_of_a_register_resident_program():
    """A program that keeps everything in registers, inlined into its timing loop, must
    still run once per call: gcc hoisted its loads and sank its stores out of the loop,
    and benchmarks timed an empty loop (0.2 ps per call; calibration fitted on that)."""
    from pathlib import Path

    from morello_asp.serialize import load

    prog = load(Path(__file__).parent / "fixtures" / "register_resident_8x8x8.json")
    fn = prog.compile()
    err, tol = fn.check()
    assert err <= tol
    r = fn.benchmark(reps=3, min_time=0.002)
    # 1,024 flops: no x86 core does them in less than ~1 ns (a physical bound, not a speed claim)
    assert r.gflops < 2000, f"{r.seconds * 1e9:.4f} ns per call: the timing loop was optimized away"
