"""Compile-and-run: programs covering every IR node and every AVX2 kernel, f32 and i32,
shapes that divide and shapes that leave boundary regions, checked against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from morello_asp import Alloc, Block, KernelApp, Loop, parse_spec
from morello_asp.codegen.reference import random_operands, reference
from morello_asp.recipes import complete, fast_matmul, reg_block, scalar, to_l1

LIMITS = "[16, 16, 1024, 33554432]"


def kernels(imp):
    return {n.kernel for n in imp.walk() if isinstance(n, KernelApp)}


def assert_matches(imp, seed=0):
    fn = imp.compile()
    err, tol = fn.check(seed)
    assert err <= tol, f"max error {err} > {tol}\n{imp.to_c()}"
    return fn


@pytest.mark.parametrize("dt", ["f32", "i32"])
@pytest.mark.parametrize("shape,tile", [((4, 6, 8), (2, 3, 4)), ((5, 7, 3), (2, 3, 2))])
def test_scalar_kernels_with_and_without_boundaries(dt, shape, tile):
    m, k, n = shape
    imp = parse_spec(f"Matmul({m}x{k}x{n}, {dt})").to_accum()
    imp = imp.subschedule([1], lambda a: a.tile([1, tile[0], tile[1], tile[2]]))
    imp = complete(imp, scalar)
    assert {"ValueZero", "MultAdd"} <= kernels(imp)
    loops = [x for x in imp.walk() if isinstance(x, Loop)]
    assert any(x.boundaries for x in loops) == any(s % t for s, t in zip(shape, tile))
    assert_matches(imp)


@pytest.mark.parametrize("dt", ["f32", "i32"])
def test_rf_accumulator_with_value_assign(dt):
    """out moved to a scalar register (RF): loaded and stored with ValueAssign."""
    imp = parse_spec(f"Matmul(3x5x4, {dt})").to_accum()
    imp = imp.subschedule([0], lambda z: z.select("MemsetZero"))

    def acc(h):
        h = h.tile([1, 1, 5, 1]).move_param(2, "L1").move_param(2, "RF")
        h = h.subschedule([0, 0, 0], lambda m: m.select("ValueAssign"))
        h = h.subschedule([0, 0, 2], lambda m: m.select("ValueAssign"))
        return complete(h, scalar)

    imp = imp.subschedule([1], acc)
    assert any(isinstance(x, Alloc) and x.new.level == "RF" for x in imp.walk())
    assert {"MemsetZero", "ValueAssign", "MultAdd"} <= kernels(imp)
    assert_matches(imp)


@pytest.mark.parametrize("dt", ["f32", pytest.param("i32", marks=pytest.mark.slow)])
@pytest.mark.parametrize("m,k,n", [(12, 8, 32), (13, 5, 20)])
def test_vector_register_blocks(dt, m, k, n):
    """out blocks in VRF (__m256 and, for a 4-wide boundary, __m128), rhs rows loaded
    with VectorAssign, BroadcastVecMultAdd; n=20 gives unaligned rows and boundaries."""
    imp = parse_spec(f"Matmul({m}x{k}x{n}, {dt})").to_accum()
    imp = imp.subschedule([0], lambda z: z.select("MemsetZero"))
    imp = imp.subschedule([1], lambda a: a.tile([1, 3, k, 8]))
    imp = complete(imp, reg_block)
    assert {"VectorAssign", "BroadcastVecMultAdd"} <= kernels(imp)
    src = imp.to_c()
    if n % 8:
        assert "__m128" in src and "loadu" in src
    assert_matches(imp)


@pytest.mark.parametrize("dt", ["f32", "i32"])
def test_vector_zero(dt):
    """Matmul with its whole output in VRF: to_accum leaves Zero on registers."""
    spec = parse_spec(
        f"(Matmul(1x1x4x16, ({dt}, L1, row_major), ({dt}, L1, row_major), ({dt}, L1, row_major), serial), {LIMITS})"
    )
    imp = spec.move_param(2, "VRF", "row_major", vector_size=8)
    imp = imp.subschedule([1], lambda s: s.select("VectorAssign"))  # store
    imp = imp.subschedule([0], lambda b: b.to_accum())
    imp = imp.subschedule([0, 0], lambda z: z.tile([1, 1, 8]).select("VectorZero"))  # one vector each
    imp = imp.subschedule([0, 1], lambda a: complete(a, reg_block))
    assert "VectorZero" in kernels(imp)
    assert_matches(imp)


def test_dot_product_loop_and_col_major_operand():
    spec = parse_spec(
        f"(Matmul(1x3x64x5, (f32, GL, row_major), (f32, GL, col_major), (f32, GL, row_major), serial), {LIMITS})"
    )
    imp = spec.to_accum().subschedule([0], lambda z: z.select("MemsetZero"))
    imp = imp.subschedule([1], lambda a: to_l1(a.tile([1, 1, 64, 1]), [0, 1, 2]).select("DotProductLoop"))
    assert "DotProductLoop" in kernels(imp)
    fn = assert_matches(imp)
    a = np.arange(3 * 64, dtype=np.float32).reshape(3, 64) / 100
    b = np.arange(64 * 5, dtype=np.float32).reshape(64, 5) / 100
    np.testing.assert_allclose(fn(a, b), a @ b, rtol=1e-5)


@pytest.mark.parametrize("dt", ["f32", pytest.param("i32", marks=pytest.mark.slow)])
@pytest.mark.parametrize("size", [(12, 16, 32), (32, 32, 32), (50, 96, 96)])
def test_fast_matmul_recipe(dt, size):
    """The example's recipe: packed B (stack buffer, or heap above 32 KiB), 6x16 register
    tile, boundary rows; f32 and i32."""
    imp = fast_matmul(*size, dtype=dt)
    assert any(isinstance(x, Alloc) and x.new.layout.is_packed for x in imp.walk())
    kernel = imp.to_c().split("kernel_bench")[0]  # the program, not its timing harness's arena
    assert ("aligned_alloc" in kernel) == (size[1] * size[2] * 4 > 32 * 1024)
    assert_matches(imp)


def test_parallel_loop():
    spec = parse_spec("Matmul(8x8x8, f32, parallel)")
    imp = spec.tile([1, 4, 8, 8], parallel=True)
    imp = imp.subschedule([0], lambda b: b.to_accum())
    imp = complete(imp, scalar)
    fn = imp.compile()
    assert "#pragma omp parallel for" in fn.source and fn.openmp
    err, tol = fn.check()
    assert err <= tol


def test_move_programs_transpose_and_pack():
    """Top-level Moves: a col-major -> row-major copy (layout-aware calling convention)."""
    spec = parse_spec(f"(Move(5x7, (f32, GL, col_major), (f32, GL, row_major), serial), {LIMITS})")
    fn = assert_matches(complete(spec, scalar))
    a = np.arange(35, dtype=np.float32).reshape(5, 7)
    np.testing.assert_array_equal(fn(a), a)


def test_zero_program_and_top_level_registers():
    """A top-level Zero, and a spec whose operands are registers (paper Figure 1)."""
    z = parse_spec(f"(Zero(4x8, (i32, GL, row_major), serial), {LIMITS})").select("MemsetZero")
    fn = z.compile()
    out = np.ones((4, 8), dtype=np.int32)
    assert fn(out=out) is out and not out.any()
    from morello_asp.cli.schedule import figure1

    assert_matches(figure1())


def test_block_alloc_loop_nodes_all_present():
    imp = fast_matmul(12, 16, 32)
    kinds = {type(x) for x in imp.walk()}
    assert {Block, Alloc, Loop, KernelApp} <= kinds


def test_reference_semantics():
    spec = parse_spec("MatmulAccum(2x3x4, i32)")
    lhs, rhs, out = random_operands(spec)
    np.testing.assert_array_equal(reference(spec, lhs, rhs, out), out + lhs @ rhs)
    z = parse_spec(f"(Zero(3x2, (f32, GL, row_major), serial), {LIMITS})")
    assert not reference(z, np.ones((3, 2), np.float32)).any()


def test_l1_copy_with_layout_change():
    """lhs copied into an L1 stack buffer in col_major (a real load Move), then used."""
    imp = parse_spec("Matmul(4x8x4, f32)").to_accum()
    imp = imp.subschedule([0], lambda z: z.select("MemsetZero"))
    imp = imp.subschedule([1], lambda a: a.move_param(0, "L1", "col_major"))
    imp = complete(imp, scalar)
    alloc = next(x for x in imp.walk() if isinstance(x, Alloc) and x.load is not None)
    assert alloc.new.level == "L1" and str(alloc.new.layout) == "col_major"
    assert "__attribute__((aligned(64)))" in imp.to_c()
    assert_matches(imp)


@pytest.mark.parametrize("dt", ["f32", "i32"])
def test_packed_operand_passed_from_numpy(dt):
    """A top-level operand in a packed layout: the wrapper packs the logical array."""
    spec = parse_spec(
        f"(Matmul(1x4x8x16, ({dt}, GL, row_major), ({dt}, GL, [0, 2, 1, 2 p(8)]), ({dt}, GL, row_major), "
        f"serial), {LIMITS})"
    )
    imp = spec.to_accum().subschedule([0], lambda z: z.select("MemsetZero"))
    imp = imp.subschedule([1], lambda a: a.tile([1, 2, 8, 8]))
    imp = complete(imp, reg_block)
    fn = assert_matches(imp)
    a = np.arange(32).reshape(4, 8).astype(dt.replace("f", "float").replace("i", "int"))
    b = np.arange(128).reshape(8, 16).astype(a.dtype)
    np.testing.assert_array_equal(fn(a, b), a @ b)


def test_vector_copy_packs_rows_and_refuses_a_transpose():
    """VectorCopy (memcpy of a contiguous run between L1 buffers): the search packs B's
    rows into 16-wide panels with it, and the packed copy is what numpy wants; a 4x4
    block copied into another layout is contiguous in both but orders its values
    differently, so the rules refuse VectorCopy there."""
    from morello_asp.errors import ScheduleError
    from morello_asp.synthesis import synthesize

    spec = parse_spec(f"(Move(1x4x32, (f32, GL, row_major), (f32, GL, [0, 2, 1, 2 p(16)]), serial), {LIMITS})")
    imp = synthesize(spec, db=None)
    assert any(isinstance(x, KernelApp) and x.kernel == "VectorCopy" for x in imp.walk())
    assert "memcpy(" in imp.to_c()
    b = np.arange(128, dtype=np.float32).reshape(1, 4, 32)
    np.testing.assert_array_equal(imp.compile()(b), b)
    t = parse_spec(f"(Move(4x4, (f32, L1, row_major), (f32, L1, col_major), serial), {LIMITS})")
    with pytest.raises(ScheduleError, match="VectorCopy"):
        t.select("VectorCopy")


def test_vector_copy_refuses_a_row_of_an_odd_even_strip():
    """Issue 57 (found with avx512's mixed kernels): a 1x1x32 view of an f32 [0, 1, 2, 2
    oe(16)] buffer is contiguous and has one dimension longer than 1, yet holds each strip's
    even values first; VectorCopy of it into a [0, 2, 1, 2 p(16)] panel (memcpy) scrambled
    the row. The rules refuse it (avx2_same_order/3 asks that neither view be shuffled);
    the optimum of the same move copies in logical order, and matches numpy."""
    from morello_asp.errors import ScheduleError
    from morello_asp.synthesis import synthesize

    text = "Move(1x1x32, (f32, L1, [0, 1, 2, 2 oe(16)]), (f32, L1, [0, 2, 1, 2 p(16)]), serial)"
    for target in ("avx2", "avx512"):
        with pytest.raises(ScheduleError, match="VectorCopy"):
            parse_spec(text, target=target).select("VectorCopy")
    spec = parse_spec(text, target="avx2")
    imp = synthesize(spec, db=None)
    assert not any(isinstance(x, KernelApp) and x.kernel == "VectorCopy" for x in imp.walk())
    src, dst = random_operands(spec, 1)
    np.testing.assert_array_equal(imp.compile()(src), reference(spec, src, dst))
