"""Mixed precision (issue 17): casting moves, bf16 at the boundary, the bf16 and u8 x i8
kernels of the avx2 target. Every program here is proved with z3, compiled, run and
compared with numpy (the reference converts inputs to the output's dtype first)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from morello_asp import ScheduleError, parse_spec
from morello_asp.codegen.reference import reference
from morello_asp.dtypes import Dtype
from morello_asp.errors import CodegenError
from morello_asp.ir import Alloc, KernelApp
from morello_asp.rewrites import for_node
from morello_asp.serialize import from_json, to_json
from morello_asp.solver.proofs.obligations import prove_cast
from morello_asp.solver.proofs.verify import verify

BF16 = ml_dtypes.bfloat16
LIMITS = "[16, 16, 1024, 33554432]"


def bf16(rng, shape) -> np.ndarray:
    return (rng.random(shape) * 2 - 1).astype(BF16)


def proved_and_checked(imp):
    rep = verify(imp)
    assert rep.ok, str(rep) + "\n" + "\n".join(str(o) for o in rep.obligations if o.status != "proved")
    fn = imp.compile()
    err, tol = fn.check()
    assert err <= tol, (err, tol, imp.to_c())
    return fn


# ---------------------------------------------------------------- rules and errors


def test_casts_only_widen_and_only_inputs():
    spec = parse_spec(
        f"(MatmulAccum(1x1x1x8, (f32, L1, row_major), (bf16, L1, row_major), (f32, VRF, row_major, v8), serial), "
        f"{LIMITS})"
    )
    with pytest.raises(ScheduleError, match="must widen exactly"):
        spec.move_param(0, "RF", dtype="bf16")  # f32 -> bf16 narrows
    with pytest.raises(ScheduleError, match="unknown dtype 'f64'"):
        spec.move_param(1, "VRF", vector_size=8, dtype="f64")
    ints = parse_spec(f"(Matmul(1x1x2x16, (u8, L1, row_major), (i8, L1, row_major), (i16, L1, row_major)), {LIMITS})")
    with pytest.raises(ScheduleError, match="must widen exactly"):
        ints.move_param(1, "L1", "[0, 2, 1]", dtype="u16")  # i8 -> u16 loses the negative values
    with pytest.raises(ScheduleError, match="only an input is cast"):
        ints.move_param(2, "GL", "[0, 2, 1]", dtype="i32")  # i16 -> i32 widens, but its store would narrow
    # The operand's own dtype is a plain move (no cast term).
    plain = spec.move_param(1, "VRF", vector_size=8, dtype="bf16")
    assert isinstance(plain, Alloc) and plain.new.dtype is Dtype.BF16
    assert len(for_node(plain).action_of(plain).args) == 4


def test_prove_cast_refutes_lossy_casts():
    assert prove_cast(Dtype.BF16, Dtype.F32).status == "proved"
    assert prove_cast(Dtype.U8, Dtype.I16).status == "proved"
    bad = prove_cast(Dtype.I8, Dtype.U16)
    assert bad.status == "refuted" and "not a u16 value" in bad.detail
    assert prove_cast(Dtype.F32, Dtype.BF16).status == "refuted"


def test_search_offers_casts_into_registers_with_the_new_dtype_bytes():
    from morello_asp.solver.search.engine import get_engine

    spec = parse_spec(
        f"(MatmulAccum(1x1x1x16, (bf16, L1, row_major), (bf16, L1, row_major), (f32, L1, row_major), serial), {LIMITS})"
    )
    exps = {str(e.action): e for e in get_engine(spec.target).expand(spec)}
    vec = exps["move_param(1, VRF, row_major, v8, dtype=f32)"]  # 16 f32: 2 ymm (16 bf16 would be 1)
    assert vec.alloc == (1, 2)
    assert "move_param(0, RF, row_major, dtype=f32)" in exps
    # An f32 output is never cast; a bf16 input is never cast into a same-layout L1 copy.
    assert not any("dtype" in a and a.startswith("move_param(2") for a in exps)
    assert "move_param(1, L1, row_major, dtype=f32)" not in exps
    # The generic point kernel's C would compute on bf16's raw bits: not offered (tgt_c_raw_dtype/1).
    one = parse_spec(
        f"(MatmulAccum(1x1x1x1, (bf16, L1, row_major), (bf16, L1, row_major), (f32, L1, row_major), serial), {LIMITS})"
    )
    assert not [e for e in get_engine(one.target).expand(one) if e.action.name == "select"]


def test_bf16_out_of_a_program_is_a_bfloat16_array():
    spec = parse_spec(f"(Move(1x3x8, (bf16, GL, row_major), (bf16, GL, col_major)), {LIMITS})")
    imp = spec.move_param(0, "L1").move_param(1, "L1", "col_major").tile([1, 1, 1]).select("ValueAssign")
    fn = proved_and_checked(imp)
    x = bf16(np.random.default_rng(3), (3, 8))
    y = fn(x)
    assert y.dtype == BF16 and np.array_equal(y.view(np.uint16), x.view(np.uint16))


# ---------------------------------------------------------------- hand schedules


def test_bf16_cast_moves_then_f32_kernel_with_bf16_arrays_and_raw_words():
    spec = parse_spec(
        f"(MatmulAccum(1x1x1x16, (bf16, L1, row_major), (bf16, L1, row_major), (f32, VRF, row_major, v8), serial), "
        f"{LIMITS})"
    )
    imp = (
        spec.move_param(0, "RF", dtype="f32")
        .move_param(1, "VRF", vector_size=8, dtype="f32")
        .select("BroadcastVecMultAdd")
        .subschedule([0], lambda m: m.select("ValueCastBf16"))
        .subschedule([1, 0], lambda m: m.select("VectorCastBf16"))
    )
    text = str(imp)
    assert "alloc rlhs: (1×1×1, f32, RF) ← lhs" in text and "(1×1×16, f32, VRF, v8) ← rhs" in text
    assert imp.cost.peak[1] == 2  # 16 f32 values: two vector registers
    back = from_json(to_json(imp))
    assert str(back) == text and back.cost == imp.cost
    assert str(for_node(imp.body).action_of(imp.body)) == "move_param(1, VRF, row_major, v8, dtype=f32)"
    fn = proved_and_checked(imp)
    rng = np.random.default_rng(1)
    a, b = bf16(rng, (1, 1)), bf16(rng, (1, 16))
    acc = rng.random((1, 16)).astype(np.float32)
    want = acc + a.astype(np.float32) * b.astype(np.float32)
    got = fn(a, b, out=acc.copy())
    np.testing.assert_allclose(got, want, rtol=1e-6)
    raw = fn(a.view(np.uint16), b.view(np.uint16), out=acc.copy())  # raw bf16 words work too
    np.testing.assert_array_equal(raw, got)
    with pytest.raises(CodegenError, match="ml_dtypes.bfloat16"):
        fn(a.astype(np.float32), b, out=acc.copy())


@pytest.mark.parametrize("lhs", ["bf16", pytest.param("f32", marks=pytest.mark.slow)])
def test_bf16_broadcast_fma_kernel(lhs):  # f32 lhs runs by default in the row-major matvec test
    spec = parse_spec(
        f"(MatmulAccum(1x1x1x24, ({lhs}, L1, row_major), (bf16, L1, row_major), (f32, VRF, row_major, v8), serial), "
        f"{LIMITS})"
    )
    imp = spec.select("BroadcastVecMultAddBf16")
    c = imp.to_c()
    assert "_mm256_cvtepu16_epi32" in c and "_mm256_fmadd_ps" in c
    proved_and_checked(imp)


def test_bf16_dot_products_plain_and_interleaved():
    # Weights as gemma stores them ([0, 2, 1]: each output's column contiguous in k).
    spec = parse_spec(
        f"(MatmulAccum(1x1x64x1, (bf16, L1, row_major), (bf16, L1, [0, 2, 1]), (f32, RF, row_major), serial), {LIMITS})"
    )
    proved_and_checked(spec.select("DotProductLoopBf16"))
    oe = (
        spec.move_param(0, "L1", "[0, 1, 2, 2 oe(16)]", dtype="f32")
        .select("DotProductLoopBf16Oe")
        .subschedule([0], lambda m: m.tile([1, 1, 16]).select("VectorInterleaveBf16"))
    )
    assert "(1×1×64, f32, L1, [0, 1, 2, 2 oe(16)]) ← lhs" in str(oe)
    assert "_mm256_and_si256" in oe.to_c()
    proved_and_checked(oe)


def test_u8_i8_to_i16_vpmaddubsw_pair():
    spec = parse_spec(
        f"(MatmulAccum(1x1x4x16, (u8, L1, row_major), (i8, L1, [0, 1, 2, 1 p(2)]), (i16, VRF, row_major, v16), "
        f"serial), {LIMITS})"
    )
    imp = (
        spec.tile([1, 1, 2, 16])
        .move_param(1, "VRF", "[0, 1, 2, 1 p(2)]", vector_size=32)
        .select("TwoVecBroadcastVecMultAddU8S8S16")
        .subschedule([0, 0], lambda m: m.select("VectorAssign"))
    )
    assert "_mm256_maddubs_epi16" in imp.to_c()
    fn = proved_and_checked(imp)
    rng = np.random.default_rng(2)
    a = rng.integers(0, 128, (1, 4)).astype(np.uint8)  # pair sums stay within i16: no saturation
    b = rng.integers(-128, 128, (4, 16)).astype(np.int8)
    want = (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int16)
    np.testing.assert_array_equal(fn(a, b), want)


def test_reference_converts_inputs_to_the_output_dtype():
    spec = parse_spec(f"(Matmul(1x2x3x2, (bf16, GL, row_major), (u8, GL, row_major), (f32, GL, row_major)), {LIMITS})")
    a = np.array([[[1.5, -2, 3], [0.25, 1, 1]]], dtype=BF16)
    b = np.array([[[1, 2], [3, 4], [255, 0]]], dtype=np.uint8)
    out = reference(spec, a, b, np.zeros((1, 2, 2), np.float32))
    np.testing.assert_array_equal(out, a.astype(np.float32) @ b.astype(np.float32))


# ---------------------------------------------------------------- synthesis


def test_synthesized_mixed_bf16_f32_matmul_odd_size():
    from morello_asp.synthesis import synthesize

    imp = synthesize(
        f"(Matmul(1x1x3x5, (f32, GL, row_major), (bf16, GL, row_major), (f32, GL, row_major)), {LIMITS})",
        progress=False,
    )
    casts = [n for n in imp.walk() if isinstance(n, Alloc) and n.new.dtype != n.spec.operands[n.operand].dtype]
    kernels = {n.kernel for n in imp.walk() if isinstance(n, KernelApp)}
    assert casts or kernels & {"BroadcastVecMultAddBf16", "DotProductLoopBf16"}, str(imp)
    proved_and_checked(imp)


@pytest.mark.slow
@pytest.mark.parametrize(
    "text",
    [
        "(Matmul(1x3x5x7, (bf16, GL, row_major), (bf16, GL, row_major), (f32, GL, row_major)), LIM)",
        "(Matmul(1x2x32x16, (bf16, GL, row_major), (bf16, GL, [0, 2, 1]), (f32, GL, row_major), serial), LIM)",
        "(Matmul(1x1x5x7, (bf16, GL, row_major), (bf16, GL, [0, 2, 1]), (f32, GL, row_major)), LIM)",
        "(Matmul(1x3x5x7, (u8, GL, row_major), (i8, GL, row_major), (i16, GL, row_major)), LIM)",
        "(Matmul(1x2x4x16, (u8, GL, row_major), (i8, GL, row_major), (i16, GL, row_major), serial), LIM)",
        "(Matmul(1x3x4x5, (i8, GL, row_major), (i8, GL, row_major), (i32, GL, row_major)), LIM)",
    ],
)
def test_synthesized_mixed_matmuls(text):
    from morello_asp.synthesis import synthesize

    imp = synthesize(text.replace("LIM", LIMITS), progress=False)
    proved_and_checked(imp)


def test_cli_runs_and_verifies_a_saved_casting_program(tmp_path, capsys):
    from morello_asp.cli import main
    from morello_asp.serialize import save

    spec = parse_spec(
        f"(MatmulAccum(1x1x1x8, (bf16, L1, row_major), (bf16, L1, row_major), (f32, VRF, row_major, v8), serial), "
        f"{LIMITS})"
    )
    imp = (
        spec.move_param(0, "RF", dtype="f32")
        .select("BroadcastVecMultAddBf16")
        .subschedule([0], lambda m: m.select("ValueCastBf16"))
    )
    p = tmp_path / "cast.json"
    save(imp, p)
    assert main(["run", str(p)]) == 0
    assert main(["verify", str(p)]) == 0
    text = p.read_text()
    assert '"new": "(f32, RF, row_major)"' in text
    bad = tmp_path / "bad.json"
    bad.write_text(text.replace('"new": "(f32, RF, row_major)"', '"new": "(i32, RF, row_major)"'))
    capsys.readouterr()
    assert main(["verify", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "[REFUTED] the cast bf16 -> i32 is exact" in out
    assert "the load sees (f32, RF, row_major), not (i32, RF, row_major)" in out


def test_matvec_schedules_serial_and_parallel_small(benchmark_script):
    """The benchmark's programs at 1 x 64 x 256 (gemma's [0, 2, 1] weights with the
    interleaved dot product, row-major weights with register tiles), each with a
    parallel tile. The cost model charges a parallel loop ceil(trips / threads) bodies
    plus its setup and per-iteration overhead (tgt_parallel_overhead/2), as if each
    thread had its own memory bandwidth: at 1 x 2048 x 16384 it predicts 1.97x for two
    threads, where memory-bound programs gain less (README, Mixed precision)."""
    from morello_asp.codegen.api import compile_many
    from morello_asp.cost import compute_cost
    from morello_asp.ir import Loop

    mv = benchmark_script("matvec")
    progs = [mv.gemma_program(64, 256, True), mv.rowmajor_program(64, 256, True, nt=64, kb=16)]
    for imp in progs:
        assert verify(imp).ok
    for fn in compile_many(progs):
        err, tol = fn.check()
        assert err <= tol
    assert "#pragma omp parallel for" in progs[0].to_c()
    tgt = progs[0].spec.target
    par = next(n for n in progs[0].walk() if isinstance(n, Loop) and n.parallel)
    per_thread = -(-par.trips // tgt.threads)
    body = compute_cost(par.body).main
    assert compute_cost(par).main == per_thread * body + tgt.parallel_setup + tgt.parallel_per_iter * per_thread


def test_matvec_benchmark_int8_program_at_its_size(benchmark_script):
    """The benchmark's u8 x i8 -> i16 program at the size it times (256^3): its k-pair
    columns of W are 512 B apart, so it caches them in L1 in k blocks of 64, which the
    aliasing rules admit (all 256 rows at once would not be)."""
    imp = benchmark_script("matvec").int8_program(256)
    assert verify(imp).ok
    err, tol = imp.compile().check()
    assert err <= tol
