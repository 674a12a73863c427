"""The ARM NEON (aarch64) target is fact files only (encodings/targets/neon.lp, neon/):
its programs are cross-compiled by aarch64-linux-gnu-gcc and run as standalone
executables under qemu-aarch64, checked against numpy. Without the tools (`make
cross-tools` installs them) the running tests skip, naming the missing tool."""

from __future__ import annotations

import pytest

from morello_asp import parse_spec
from morello_asp.codegen.ctarget import get_ctarget
from morello_asp.codegen.standalone import StandaloneProgram
from morello_asp.synthesis import synthesize

LIMITS = "[16, 32, 1024, 33554432]"
VF, VI = "(f32, VRF, row_major, v4)", "(i32, VRF, row_major, v4)"


def _needs_tools() -> None:
    why = get_ctarget("neon").cannot_run()
    if why:
        pytest.skip(f"cannot run neon programs here: {why} (make cross-tools installs them)")


def test_neon_target_facts():
    ct = get_ctarget("neon")
    tgt = ct.target
    assert tgt.name == "neon" and sorted(tgt.vector_types) == [16] and tgt.level("VRF").capacity == 32
    assert ct.run_mode == "standalone" and ct.emulator == ("qemu-aarch64",)
    assert ct.compiler_command == "aarch64-linux-gnu-gcc" and ct.cpu_flags == ()
    assert "arm_neon.h" in ct.headers


@pytest.mark.parametrize(
    "spec",
    [
        "Matmul(3x5x7, f32)",
        "Matmul(4x4x8, f32)",
        "Matmul(1x9x2, f32)",
        "Matmul(2x3x5, i32)",
        f"(MatmulAccum(1x1x32x1, (f32, GL, row_major), (f32, GL, col_major), (f32, GL, row_major), serial), {LIMITS})",
        f"(Move(5x7, (f32, GL, col_major), (f32, GL, row_major), serial), {LIMITS})",
        f"(Zero(3x2, (i32, GL, row_major), serial), {LIMITS})",
    ],
)
def test_synthesized_programs_match_numpy_under_qemu(spec):
    _needs_tools()
    imp = synthesize(parse_spec(spec, "neon"))
    prog = imp.compile()  # the target runs standalone: compile() gives the executable
    assert isinstance(prog, StandaloneProgram)
    err, tol = prog.check(seed=1)
    assert err <= tol


@pytest.mark.parametrize(
    "spec, kernel",
    [
        (
            f"(MatmulAccum(1x1x1x16, (f32, RF, row_major), {VF}, {VF}, serial)",
            "BroadcastVecMultAdd",
        ),
        (
            f"(MatmulAccum(1x1x1x8, (f32, L1, row_major), {VF}, {VF}, serial)",
            "BroadcastVecMultAdd",
        ),
        (
            f"(MatmulAccum(1x1x1x8, (i32, RF, row_major), {VI}, {VI}, serial)",
            "BroadcastVecMultAdd",
        ),
        ("(Move(2x8, (f32, L1, row_major), (f32, VRF, row_major, v4), serial)", "VectorAssign"),
        ("(Move(2x8, (f32, VRF, row_major, v4), (f32, L1, row_major), serial)", "VectorAssign"),
        ("(Move(2x8, (i32, L1, row_major), (i32, VRF, row_major, v4), serial)", "VectorAssign"),
        ("(Zero(1x4, (f32, VRF, row_major, v4), serial)", "VectorZero"),
        ("(Zero(1x4, (i32, VRF, row_major, v4), serial)", "VectorZero"),
    ],
)
def test_every_vector_kernel_matches_numpy_under_qemu(spec, kernel):
    _needs_tools()
    imp = parse_spec(f"{spec}, {LIMITS})", "neon").select(kernel)
    err, tol = StandaloneProgram(imp).check(seed=2)
    assert err <= tol


def test_hand_recipe_with_the_neon_register_block_matches_numpy_under_qemu():
    """recipes.fast_matmul on neon: 14 x 8 blocks (4-lane vectors, 32 registers), a
    boundary block of rows, B packed into 8-wide panels."""
    _needs_tools()
    from morello_asp.recipes import fast_matmul

    imp = fast_matmul(30, 5, 24, target="neon")
    assert "p(8)" in str(imp)
    err, tol = imp.compile().check(seed=4)
    assert err <= tol
