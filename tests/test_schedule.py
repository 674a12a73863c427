"""Schedules: Figure 1 program and hand cost, default child, errors, boundaries, serialize."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from morello_asp import ScheduleError, parse_spec
from morello_asp.cli.schedule import FIGURE1, figure1
from morello_asp.ir import Alloc, KernelApp, Loop, loop_regions
from morello_asp.serialize import from_json, to_json

LAYOUTS3 = ["row_major", "col_major", "[0, 2, 1, 2 p(8)]", "[0, 1, 2, 2 oe(8)]", "[1, 0, 2]"]


# ---------------------------------------------------------------- schedules and cost


def _register_tile_k_loop(k: int, *tiles):
    """MatmulAccum 1 x 16 x k with the output moved into vector registers and its k loop
    tiled by `tiles` in turn down to one FMA a trip: every trip adds into the same two
    registers."""
    spec = parse_spec(
        f"(MatmulAccum(1x1x{k}x16, (f32, RF, row_major), (f32, VRF, row_major, v8), (f32, L1, row_major), serial), "
        "[16, 16, 1024, 33554432])",
        "avx2",
    )

    def body(b):
        for t in tiles:
            b = b.tile([1, 1, t, 16])
        return b.select("BroadcastVecMultAdd")

    return (
        spec.move_param(2, "VRF", "row_major", vector_size=8)
        .subschedule([0], lambda load: load.select("VectorAssign"))
        .subschedule([2], lambda store: store.select("VectorAssign"))
        .subschedule([1], body)
    )


def test_a_chain_of_sums_into_the_same_registers_costs_its_latency_however_it_is_nested():
    """A k loop whose every trip adds into the same register tile waits on the trip
    before: with the loops nested inside it, it costs at least its whole chain times
    tgt_carried_trip's latency (16 on avx2: 4 cycles of two FMA units), less what the CPU
    overlaps (160, ten sums), however cheap its body (cost_model.py). Split into two loops
    of 4 it costs the same as one of 16: the inner loop reports its chain upward (cost.py,
    node_chain), so nesting cannot hide it. A chain of 10 is all hidden, and Figure 1's
    loop moves the output into registers in each trip, so nothing carries over."""
    regs = frozenset({"RF", "VRF"})
    # the output's load and store, 2 each; its line in L1, 2; each FMA of two vectors 5
    ten = _register_tile_k_loop(10, 1)
    assert ten.cost.main == 2 + 2 + 2 + 10 * 5  # 10 * 16 - 160 = 0 < 10 * 5: hidden
    flat = _register_tile_k_loop(16, 1)
    loop = flat.children[1]
    assert isinstance(loop, Loop) and loop.trips == 16 and loop.carries_sum(regs)
    assert flat.cost.main == 2 + 2 + 2 + 16 * 16 - 160 == 102  # max(16 * 5, 16 * 16 - 160)
    nested = _register_tile_k_loop(16, 4, 1)
    outer = nested.children[1]
    assert outer.trips == 4 and outer.body.trips == 4 and outer.body.cost.chain == 4
    assert outer.cost.chain == 16 and nested.cost.chain == 0  # the move closes the chain
    assert nested.cost.main == flat.cost.main
    assert not figure1().carries_sum(regs) and figure1().cost.chain == 0
    for imp in (flat, nested):
        err, tol = imp.compile().check()
        assert err <= tol


def test_figure1_program_and_hand_computed_cost():
    imp = figure1()
    assert isinstance(imp, Loop) and imp.tile_shape == (1, 1, 1, 16) and imp.trips == 16
    alloc = imp.body
    assert isinstance(alloc, Alloc) and alloc.new.level == "VRF" and alloc.new.vector_size == 8
    assert [c.kernel for c in alloc.children] == ["VectorAssign", "BroadcastVecMultAdd", "VectorAssign"]
    # Paper 3 by hand. tout = 1x1x16 f32 in L1, contiguous: 64 B = 1 line, weight 2 -> m = 2;
    # vout in VRF -> m = 0. VectorAssign moves 16/8 = 2 vectors: cost 2 each.
    # BroadcastVecMultAdd: 2 * (16/8) + 1 = 5 (lhs in RF adds m = 0).
    # alloc = 2 + 0 + 2 + 5 + 2 = 11; the loop runs 4 (m) x 4 (k) = 16 trips: 176.
    assert imp.cost.main == 16 * (2 + 0 + 2 + 5 + 2) == 176
    assert imp.cost.peak[1] == 2  # two vector registers
    text = str(imp)
    assert "tile (tlhs: (1×1×1, f32, RF) ← lhs" in text and "alloc vout" in text
    assert from_json(to_json(imp)).cost == imp.cost and str(from_json(to_json(imp))) == text


def test_default_child_and_errors():
    spec = parse_spec(FIGURE1)
    imp = spec.tile([1, 1, 1, 16]).move_param(2, "VRF", "row_major", vector_size=8)
    with pytest.raises(ScheduleError, match="no sole one that is not a copy"):
        parse_spec("Matmul(8x8x8, f32)").to_accum().tile([1, 4, 4, 4])
    with pytest.raises(ScheduleError, match="does not apply"):
        imp.select("MultAdd")
    with pytest.raises(ScheduleError, match="vector size does not divide"):
        parse_spec("Matmul(2x2x2, f32)").move_param(2, "L1").move_param(2, "VRF", vector_size=8)
    with pytest.raises(ScheduleError, match="reduction"):
        parse_spec("Matmul(8x8x8, f32)").tile([1, 8, 4, 8])
    with pytest.raises(ScheduleError, match="serial-only"):
        parse_spec("Matmul(8x8x8, f32)").tile([1, 4, 8, 8], parallel=True)
    with pytest.raises(ScheduleError, match="4 sizes|dimensions"):
        parse_spec("Matmul(8x8x8, f32)").tile([4, 8])
    done = imp.select("BroadcastVecMultAdd")
    assert isinstance(done.body.body, KernelApp)


def test_select_of_an_unknown_kernel_names_it_and_those_that_apply():
    """Issue 56: select("Foo") said only that it does not apply. An unknown kernel is named
    as unknown for the target, with the kernels that apply to the spec, in one line; a
    known kernel that does not apply lists them too."""
    rf = "(f32, RF, row_major)"
    spec = parse_spec(f"(MatmulAccum(1x1x1, {rf}, {rf}, {rf}), [64, 16, 1024, 1000000])")
    for name in ("Foo", "foo_bar"):
        with pytest.raises(ScheduleError) as e:
            spec.select(name)
        msg = str(e.value)
        assert msg == f"unknown kernel {name} for target avx2; kernels that apply to this spec: MultAdd, Point", msg
    with pytest.raises(ScheduleError, match="does not apply.*; kernels that apply to this spec: MultAdd, Point"):
        spec.select("VectorZero")
    gl = "(f32, GL, row_major)"
    with pytest.raises(ScheduleError, match="^unknown kernel Foo for target avx2; no kernel applies to this spec$"):
        parse_spec(f"(Matmul(4x4x4, {gl}, {gl}, {gl}), [64, 16, 1024, 1000000])").select("Foo")
    assert isinstance(spec.select("mult_add"), KernelApp)  # either spelling of a known one


def test_non_dividing_tile_leaves_boundaries_that_partition():
    spec = parse_spec("Matmul(7x8x5, f32)")
    imp = spec.tile([1, 3, 8, 2])
    regs = loop_regions(spec.shape, (1, 3, 8, 2))
    covered = np.zeros(spec.shape, dtype=int)
    main = [r for r in regs if r[2]][0]
    for idx in itertools.product(*[range(s) for s in imp.steps]):
        sl = tuple(slice(i * t, (i + 1) * t) for i, t in zip(idx, imp.tile_shape))
        covered[sl] += 1
    for (off, shp), child in zip(imp.regions(), imp.boundaries):
        assert child.spec.shape == shp
        covered[tuple(slice(o, o + s) for o, s in zip(off, shp))] += 1
    assert (covered == 1).all() and main[0] == (0, 0, 0, 0) and main[1] == (1, 3, 8, 2)


def test_parallel_sugar_allows_parallel_tiles():
    imp = parse_spec("Matmul(8x8x8, f32, parallel)").tile([1, 4, 8, 8], parallel=True)
    assert imp.parallel and imp.body.spec.serial


def test_subschedule_fills_the_chosen_child():
    spec = parse_spec(FIGURE1)
    imp = spec.tile([1, 1, 1, 16]).move_param(2, "VRF", "row_major", vector_size=8)
    # path (0, 1): the loop body's alloc, then its middle child (the accumulation)
    done = imp.subschedule((0, 1), lambda h: h.select("BroadcastVecMultAdd"))
    assert isinstance(done.body.children[1], KernelApp)
    assert done.body.children[1].kernel == "BroadcastVecMultAdd"
    assert str(done.body.children[0]).count("VectorAssign") == 0  # loads still open holes


def test_the_scheduling_api_is_the_registered_families_primitives():
    """Every method of the scheduling API asks for some registered family's actions, and
    every family's primitives are methods of specs and programs: a new family without a
    primitive, or a primitive without a family, fails here."""
    import inspect

    from morello_asp import schedule
    from morello_asp.rewrites import families
    from morello_asp.schedulable import Schedulable

    declared = [p for fam in families() for p in fam.primitives]
    assert len(declared) == len(set(declared)), "a primitive is claimed by two families"
    assert all(fam.primitives for fam in families()), [f.name for f in families() if not f.primitives]
    methods = {n for n, _ in inspect.getmembers(Schedulable, inspect.isfunction) if not n.startswith("_")}
    assert methods - {"subschedule"} == set(declared)
    for name in declared:  # each calls morello_asp.schedule: its own function, or pipeline(step=name)
        src = inspect.getsource(getattr(Schedulable, name))
        assert 'port("schedule").' in src, name
        assert (f".{name}(" in src and callable(getattr(schedule, name, None))) or f'"{name}"' in src, name
