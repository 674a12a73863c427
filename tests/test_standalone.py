"""`--emit c --standalone`: a whole C program with main() that compiles with plain gcc,
reads its inputs from files, writes its output (matching numpy) and its timing."""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest

from morello_asp import parse_spec
from morello_asp.codegen.ctarget import get_ctarget
from morello_asp.codegen.standalone import TIME_LINE, StandaloneProgram
from morello_asp.errors import CodegenError
from morello_asp.synthesis import synthesize

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc on PATH")

MORELLO = [sys.executable, "-m", "morello_asp.cli"]


def _can_run_avx2() -> None:
    why = get_ctarget("avx2").cannot_run()
    if why:
        pytest.skip(f"cannot run avx2 programs here: {why}")


@pytest.mark.parametrize("spec", ["Matmul(3x5x7, f32)", pytest.param("Matmul(4x4x8, f32)", marks=pytest.mark.slow)])
def test_cli_output_compiles_with_plain_gcc_runs_and_matches_numpy(tmp_path, spec):
    _can_run_avx2()
    r = subprocess.run([*MORELLO, "synth", spec, "--emit", "c", "--standalone", "-q"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    c = tmp_path / "prog.c"
    c.write_text(r.stdout)
    assert "int main(int argc, char **argv)" in r.stdout and " * alloc " in r.stdout  # the listing, as a comment
    exe = tmp_path / "prog"
    flags = get_ctarget("avx2").flags
    subprocess.run(["gcc", "-O2", "-std=c99", *flags, str(c), "-o", str(exe)], check=True)
    m, k, n = (int(x) for x in spec.split("(")[1].split(",")[0].split("x"))
    rng = np.random.default_rng(1)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    a.tofile(tmp_path / "a.bin")
    b.tofile(tmp_path / "b.bin")
    run = subprocess.run(
        [str(exe), str(tmp_path / "a.bin"), str(tmp_path / "b.bin"), str(tmp_path / "c.bin")],
        capture_output=True,
        text=True,
        env={"MORELLO_ASP_REPS": "3"},
    )
    assert run.returncode == 0, run.stderr
    got = np.fromfile(tmp_path / "c.bin", dtype=np.float32).reshape(m, n)
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-5)
    t = TIME_LINE.search(run.stderr)
    assert t and float(t.group(1)) > 0 and t.group(2) == "3"
    # no arguments: deterministic inputs and a checksum
    det = subprocess.run([str(exe)], capture_output=True, text=True, env={"MORELLO_ASP_REPS": "0"})
    assert det.returncode == 0 and det.stdout.startswith("checksum: ") and det.stderr == ""


def test_wrong_input_size_and_usage_are_errors(tmp_path):
    _can_run_avx2()
    imp = synthesize(parse_spec("Matmul(2x3x4, f32)"))
    prog = StandaloneProgram(imp)
    np.zeros(5, np.float32).tofile(tmp_path / "short.bin")
    r = subprocess.run([str(prog.exe), str(tmp_path / "short.bin"), "x", "y"], capture_output=True, text=True)
    assert r.returncode == 2 and "expected exactly 24 bytes" in r.stderr
    r = subprocess.run([str(prog.exe), "only-one"], capture_output=True, text=True)
    assert r.returncode == 2 and "usage:" in r.stderr


@pytest.mark.parametrize(
    "spec",
    [
        "Matmul(3x2x5, f32)",
        "Matmul(4x4x4, i32)",
        "(MatmulAccum(1x2x3x8, (f32, GL, row_major), (f32, GL, col_major), (f32, GL, row_major), serial), "
        "[16, 16, 1024, 33554432])",
    ],
)
def test_standalone_program_api_checks_against_numpy(spec):
    _can_run_avx2()
    imp = synthesize(parse_spec(spec))
    prog = StandaloneProgram(imp)
    err, tol = prog.check(seed=3)
    assert err <= tol
    r = prog.benchmark(reps=3)
    assert r.seconds > 0
    c = imp.to_c(standalone=True)
    assert "int main" in c


def test_standalone_program_is_called_like_an_in_process_one():
    _can_run_avx2()
    prog = StandaloneProgram(synthesize(parse_spec("Matmul(2x3x4, f32)")))
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(prog(a, b), a @ b)  # 2-D in, 2-D out
    out = np.zeros((1, 2, 4), np.float32)
    assert prog(a[None], b[None], out=out) is out
    np.testing.assert_allclose(out[0], a @ b)
    with pytest.raises(CodegenError, match="dtype float64"):
        prog(a.astype(np.float64), b)
    with pytest.raises(CodegenError, match="shape"):
        prog(b, a)


def test_a_kind_with_two_outputs_writes_both_files(tmp_path):
    """SoftmaxDenominatorAndMax1 (outputs xmax and denom): `./prog X XMAX DENOM` writes
    both outputs' files; the API returns both and checks them against numpy."""
    _can_run_avx2()
    imp = synthesize(parse_spec("SoftmaxDenominatorAndMax1(3x5, f32)"))
    prog = StandaloneProgram(imp)
    err, tol = prog.check(seed=2)
    assert err <= tol
    x = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    x.tofile(tmp_path / "x.bin")
    files = [str(tmp_path / n) for n in ("x.bin", "xmax.bin", "denom.bin")]
    r = subprocess.run([str(prog.exe), *files], capture_output=True, text=True, env={"MORELLO_ASP_REPS": "0"})
    assert r.returncode == 0, r.stderr
    xmax = np.fromfile(files[1], np.float32)
    denom = np.fromfile(files[2], np.float32)
    np.testing.assert_allclose(xmax, x.max(axis=1), rtol=1e-6)
    np.testing.assert_allclose(denom, np.exp(x - x.max(axis=1, keepdims=True)).sum(axis=1), rtol=1e-5)
    got_max, got_denom = prog(x)
    np.testing.assert_allclose(got_max.reshape(3), xmax)
    np.testing.assert_allclose(got_denom.reshape(3), denom)
