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
from morello_asp.errors import ScheduleError
from morello_asp.solver.memo.table import DictMemo
from morello_asp.solver.proofs.verify import verify
from morello_asp.solver.search.dp import Search
from morello_asp.solver.search.engine import get_engine
from morello_asp.synthesis import synthesize

SPECS = [
    "Matmul(3x5x7, f32)",
    "Matmul(1x2x16, f32)",
    "Matmul(1x2x16, i32)",
    "Matmul(2x3x21, f32)",
    "Matmul(2x3x21, i32)",
]


def check_where_the_cpu_can(imp, skipped: str) -> None:
    """Compile `imp` and check it against numpy where this CPU has what avx512 programs need;
    elsewhere skip, the message naming the missing flags and then `skipped`."""
    missing = get_ctarget("avx512").missing_cpu_flags()
    if missing:
        pytest.skip(f"this CPU lacks {', '.join(missing)}{skipped}")
    err, tol = imp.compile().check()
    assert err <= tol


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
    check_where_the_cpu_can(program, " (/proc/cpuinfo): AVX-512 programs compiled, not run")


def test_the_register_block_comes_from_the_target_facts():
    """recipes.register_block: two of the widest vectors per row; as many rows of two
    accumulators as the vector level holds besides B's row and one broadcast."""
    from morello_asp.recipes import register_block

    for name in ("avx2", "avx512", "neon"):
        tgt = get_ctarget(name).target
        lanes = max(tgt.vector_types) // 4
        regs = tgt.vector_levels[0].capacity
        blk = register_block(name)
        assert (blk.lanes, blk.cols) == (lanes, 2 * lanes)
        assert 2 * blk.rows + 3 <= regs < 2 * (blk.rows + 1) + 3
    assert (register_block("avx2").rows, register_block("avx2").cols) == (6, 16)  # the classic AVX2 block


def test_the_hand_recipe_on_avx512_keeps_its_block_in_zmm_registers():
    from morello_asp.recipes import fast_matmul, register_block

    blk = register_block("avx512")
    c = fast_matmul(2 * blk.rows, 8, blk.cols, target="avx512").to_c()
    accs = 2 * blk.rows  # one register variable per accumulator vector, 28 zmm
    assert "__m512 vout_0," in c and f"vout_{accs - 1};" in c and f"vout_{accs}" not in c
    assert "p(32)" in c and "_mm512_fmadd_ps" in c


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc on PATH")
@pytest.mark.slow  # ~8 s
def test_matmul_benchmark_builds_avx512_programs_and_runs_them_only_where_it_can():
    """`benchmarks/matmul.py --target avx512`: synthesizes and compiles; on a CPU without
    avx512f one line names the flag (exit 0, no traceback); with it, the timing table."""
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parent.parent / "benchmarks" / "matmul.py"
    r = subprocess.run(
        [sys.executable, str(script), "--target", "avx512", "--sizes", "32", "64", "--hold-back"],  # libraries as set
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    assert "14 x 32 f32 register block" in r.stdout
    missing = get_ctarget("avx512").missing_cpu_flags()
    if missing:
        (line,) = [ln for ln in r.stdout.splitlines() if "cannot run here" in ln]
        assert "compiled" in line and "lacks avx512f" in line
    else:
        assert "morello-asp GFLOP/s" in r.stdout and "cannot run" not in r.stdout
        assert "f32 FMA peak with avx512's vectors" in r.stdout and "% peak" in r.stdout
    bad = subprocess.run(
        [sys.executable, str(script), "--target", "avx512", "--sizes", "48"], capture_output=True, text=True
    )
    assert bad.returncode == 1 and "multiples of 32" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.parametrize("text", ["Matmul(3x5x7, f32)", "Matmul(2x3x21, i32)"])
def test_tails_are_masked(text):
    """avx512/kernels_masked.lp: a row of 2 to 15 values (n = 7, or the 5 that a
    16-wide tile of 21 leaves) is one masked FMA, not a scalar MultAdd per value."""
    imp = synthesize(parse_spec(text, "avx512"))
    assert "MaskedBroadcastVecMultAdd" in str(imp) and "MultAdd(" not in str(imp).replace("VecMultAdd(", "")
    tail = text.split("x")[-1].split(",")[0]
    c = imp.to_c()
    assert f"(1u << {int(tail) % 16}) - 1u" in c and "_mm512_mask_storeu_" in c


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc on PATH")
def test_matmul_benchmark_names_a_size_the_hand_schedule_cannot_build():
    """At 1024^3 avx512's 14-row C block has rows 4 KB apart, more than L1's 8 ways: the
    rules refuse to keep it in L1 as it is, and the benchmark says so in one line."""
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parent.parent / "benchmarks" / "matmul.py"
    cmd = [sys.executable, str(script), "--target", "avx512", "--sizes", "1024", "--hold-back"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    (line,) = [ln for ln in r.stdout.splitlines() if "no hand schedule" in ln]
    assert line.startswith("avx512: no hand schedule for N = 1024: move_param(2, L1")


@pytest.mark.parametrize(
    "text", [pytest.param("Softmax1(4x1000, f32)", marks=pytest.mark.slow), "Softmax1(5x37, f32)"]
)  # 4x1000: ~12 s, with the slow tests
def test_softmax_takes_the_vector_row_kernels_and_matches_numpy_where_the_cpu_has_avx512(text):
    """avx512 offers the softmax family's row kernels (AVX2's 256-bit code, which AVX-512
    CPUs run); without them its softmax was scalar, 12 times slower than numpy."""
    from morello_asp.ir import KernelApp

    imp = synthesize(parse_spec(text, "avx512"), target="avx512")
    kernels = {n.kernel for n in imp.walk() if isinstance(n, KernelApp)}
    assert any(k.startswith("VectorSoftmax") for k in kernels), kernels
    check_where_the_cpu_can(imp, " (/proc/cpuinfo): AVX-512 softmax compiled, not run")


MIXED = [
    # issue 57: avx512 had no cast kernels, so no bf16 matmul had an implementation
    "MatmulAccum(1x2x3x5, (bf16, GL, row_major), (bf16, GL, col_major), (f32, GL, row_major))",
    pytest.param(  # ~5 s
        "Matmul(1x1x64x16, (f32, GL, row_major), (bf16, GL, [0, 2, 1]), (f32, GL, row_major))", marks=pytest.mark.slow
    ),
    "Matmul(1x1x2x16, (u8, GL, row_major), (i8, GL, row_major), (i16, GL, row_major))",
    "Move(4x64, (bf16, GL, row_major), (f32, L1, row_major))",
    pytest.param(
        "MatmulAccum(1x5x13x33, (bf16, GL, row_major), (bf16, GL, col_major), (f32, GL, row_major))",
        marks=pytest.mark.slow,  # a cold search of minutes
    ),
]


@pytest.mark.parametrize("text", MIXED)
def test_mixed_precision_specs_have_programs_on_avx512_and_match_numpy_where_the_cpu_has_it(text):
    """avx512 takes AVX2's mixed-precision kernels (casts, bf16, u8 x i8: 256-bit code,
    which AVX-512 CPUs run; avx2/kernels_mixed.lp and kernels_mixed_c.lp): before issue
    57, bf16 MatmulAccum(1x5x13x33) with a col-major rhs had a program on avx2 and none
    here. Each program is searched from an empty table, compiled and run against numpy."""
    imp = synthesize(parse_spec(text, "avx512"), target="avx512", db=None)
    c = imp.to_c()
    assert "_mm256_" in c or "_mm512_" in c or "<< 16" in c  # a cast or vector kernel, not plain C only
    check_where_the_cpu_can(imp, " (/proc/cpuinfo): AVX-512 programs compiled, not run")


def test_the_l2_holds_only_packed_copies():
    """avx512's model machine (and so the native target on an AVX-512 host) has an L2 for
    packed panels only (tgt_level_copies_only/1, rules/copy_levels.lp): a cache move of a
    view into it is not offered, a packing move is (of a view too large for L1: one that
    fits there is copied there), and a program through it runs."""

    def into_l2(text):
        spec = parse_spec(text, "avx512")
        moves = [x.action for x in get_engine("avx512").class_expansions(spec) if x.action.name == "move"]
        return spec, [a for a in moves if a.args[1] == "L2"]

    spec, moves = into_l2("Matmul(256x256x256, f32)")  # each operand 4,096 lines, L1 1,024
    assert moves and all(a.args[2] != spec.operands[a.args[0]].layout for a in moves)
    assert into_l2("Matmul(64x64x64, f32)")[1] == []  # 256 lines each: they fit in L1
    small = parse_spec("Matmul(1x128x160, f32)", "avx512")  # B: 1,280 lines
    with pytest.raises(ScheduleError, match="does not apply"):
        small.to_accum().subschedule([1], lambda a: a.move_param(1, "L2"))
    partial = small.to_accum().subschedule([1], lambda a: a.move_param(1, "L2", "[0, 2, 1, 2 p(16)]"))
    impl = Search(get_engine("avx512"), DictMemo()).complete(partial)
    assert impl.cost.peak[3] > 0 and "L2, [0, 2, 1, 2 p(16)]" in str(impl)
    assert verify(impl).ok
    check_where_the_cpu_can(impl, ": the program is synthesized and proved, not run")


def test_a_register_block_loads_its_row_of_b_straight_from_the_l2_panel():
    """A vector load may read an L2 panel (tgt_move_dest(l2, vrf) in avx512/machine.lp):
    a register block keeps its sums over all of the panel's k and loads each row of B
    from the panel, with no move of B's rows into L1 between (docs/default_matmul.md,
    "Loads from L2"). The program is proved, and run against numpy where the CPU can."""
    packed = "[0, 2, 1, 2 p(16)]"
    spec = parse_spec("Matmul(4x128x160, f32)", "avx512")  # B: 1,280 lines, more than L1

    def block(a):
        t = a.move_param(1, "L2", packed).tile([1, 4, 128, 16])
        t = t.move_param(2, "L1").move_param(2, "VRF", vector_size=16).split(1)
        return t.move_param(1, "VRF", packed, vector_size=16)  # from the L2 panel

    impl = Search(get_engine("avx512"), DictMemo()).complete(spec.to_accum().subschedule([1], block))
    loads = [line for line in str(impl).splitlines() if "VRF, [0, 2, 1, 2 p(16)], v16) ←" in line]
    assert loads and "L2" in str(impl) and impl.cost.peak[3] > 0
    assert verify(impl).ok
    check_where_the_cpu_can(impl, ": the program is synthesized and proved, not run")


def test_a_transposing_move_turns_16x16_blocks_around_in_registers():
    """A col_major tile copied into row-major order: the search moves each 16 x 16 block's
    output into vector registers and VectorTranspose16 (avx512/kernels_transpose.lp)
    loads the block's 16 columns and shuffles them into its 16 rows; z3 proves the
    program, and it matches numpy where the CPU has avx512f."""
    spec = parse_spec("Move(1x32x16, (f32, GL, col_major), (f32, GL, row_major))", "avx512")
    imp = synthesize(spec, db=None)
    assert "VectorTranspose16" in str(imp), str(imp)
    assert verify(imp).ok
    check_where_the_cpu_can(imp, " (/proc/cpuinfo): the program compiled, not run")
