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
    assert ct.compiler_command == "aarch64-linux-gnu-gcc" and ct.cpu_flags == ("asimd",)
    assert ct.missing_cpu_flags() == []  # emulated: the flag is what a native aarch64 host needs
    assert "arm_neon.h" in ct.headers


@pytest.mark.parametrize(
    "spec",
    [
        "Matmul(3x5x7, f32)",
        pytest.param("Matmul(4x4x8, f32)", marks=pytest.mark.slow),
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


# ---- every kind the product declares, through the standalone path under qemu

SIZES = (3, 5, 2, 3, 3, 2, 2)  # small, odd where they can be


def small_spec(kind) -> str:
    """A small f32 spec of `kind` in its sugar form: its own dimensions, or (any rank)
    the fewest it allows, at least two."""
    rank = kind.rank if kind.rank is not None else max(2, kind.min_rank)
    return f"{kind.name}({'x'.join(str(SIZES[i % len(SIZES)]) for i in range(rank))}, f32)"


def _check_on_neon(text: str, rules=(), seed: int = 3):
    imp = synthesize(parse_spec(text, "neon", rules=rules), rules=rules)
    prog = imp.compile(rules)
    assert isinstance(prog, StandaloneProgram)
    err, tol = prog.check(seed=seed)
    assert err <= tol, f"{text}: max error {err} > {tol}\n{imp}"
    return prog


@pytest.mark.parametrize(
    "text",
    [
        "SoftmaxDenominatorAndMax1(3x5, f32)",  # two outputs
        "(Move(3x5, (bf16, GL, row_major), (f32, GL, row_major), serial), [16, 32, 1024, 33554432])",  # casts
        "(Move(3x5, (i8, GL, row_major), (i32, GL, row_major), serial), [16, 32, 1024, 33554432])",
        "(Move(2x3, (u8, GL, row_major), (i16, GL, row_major), serial), [16, 32, 1024, 33554432])",
        "DivideVecScalar1(3x5, f32)",
    ],
)
def test_other_kinds_and_casting_moves_match_numpy_under_qemu(text):
    _needs_tools()
    _check_on_neon(text)


def test_a_user_kind_with_two_outputs_matches_numpy_under_qemu(tmp_path):
    """A declared kind with two outputs: the standalone program writes both."""
    _needs_tools()
    f = tmp_path / "sum_diff.lp"
    f.write_text(
        "kind(sum_diff). kind_any_rank(sum_diff).\n"
        "kind_operand(sum_diff, 0, a). kind_operand(sum_diff, 1, b).\n"
        "kind_operand(sum_diff, 2, s). kind_operand(sum_diff, 3, d).\n"
        "kind_output(sum_diff, s). kind_output(sum_diff, d).\n"
        "kind_value(sum_diff, s, add(a, b)). kind_value(sum_diff, d, sub(a, b)).\n"
    )
    import numpy as np

    prog = _check_on_neon("SumDiff(3x5, f32)", rules=(str(f),))
    a = np.arange(15, dtype=np.float32).reshape(3, 5)
    b = np.full((3, 5), 2, np.float32)
    s, d = prog(a, b)
    np.testing.assert_array_equal(s, a + b)
    np.testing.assert_array_equal(d, a - b)


@pytest.mark.slow
@pytest.mark.parametrize(
    "text", ["Softmax1(3x5, f32)", "Conv(1x2x2x3x3x2x2, f32)", "Compose((Softmax2, Matmul), [1x3x4, 1x4x5], f32)"]
)
def test_softmax_conv_and_compose_match_numpy_under_qemu(text):
    _needs_tools()
    _check_on_neon(text)


@pytest.mark.slow
def test_every_declared_kind_matches_numpy_under_qemu():
    """Every kind that exists (kinds.all_kinds(): the built-in declarations, whatever
    they are when this runs), on a small spec, synthesized for neon, cross-compiled and
    checked against its numpy semantics under qemu."""
    _needs_tools()
    from morello_asp.kinds import all_kinds

    failed = []
    for kind in sorted(all_kinds().values(), key=lambda k: k.name):
        if kind.is_compose:
            continue
        text = small_spec(kind)
        try:
            _check_on_neon(text)
        except AssertionError as e:
            failed.append(str(e).splitlines()[0])
        except Exception as e:  # a kind without a program on neon is a failure too, named
            failed.append(f"{text}: {type(e).__name__}: {e}")
    assert not failed, "\n".join(failed)
