"""The calibrated AVX2 target (benchmarks/calibrate.py) is a target like any other, and
its costs are the linear function of its numbers that calibration fits."""

import random
from pathlib import Path

import numpy as np
import pytest

from morello_asp import parse_spec
from morello_asp.codegen.api import compile_many
from morello_asp.codegen.calibration import LOOP, NO_VECTORIZE, CostTerms, read_calibration, recost, sample_program
from morello_asp.codegen.ctarget import get_ctarget
from morello_asp.solver.search.engine import get_engine
from morello_asp.synthesis import make_search, synthesize
from morello_asp.target import get_target


@pytest.mark.slow  # ~10 s or more on idle cores; the slow part of CI runs it
def test_calibrated_target_synthesizes_a_matmul_that_matches_numpy():
    tgt = get_target("avx2_calibrated")
    assert tgt.name == "avx2_calibrated"
    imp = synthesize("Matmul(4x4x4, f32)", target="avx2_calibrated")
    assert imp.is_complete
    assert imp.spec.target is tgt  # the program carries its target: compiled for it
    fn = imp.compile()
    rng = np.random.default_rng(3)
    a = rng.random((4, 4), dtype=np.float32)
    b = rng.random((4, 4), dtype=np.float32)
    np.testing.assert_allclose(fn(a, b), a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_cost_is_the_linear_function_calibration_fits():
    """features(program) . numbers == the cost the calibrated target's logic files give,
    for programs of different shapes (so kernel units, loop trips and lines all vary),
    and the fitted per-iteration loop cost is one of those numbers."""
    search = make_search("avx2")
    engine = get_engine("avx2_calibrated")
    terms = CostTerms(get_target("avx2"))
    cal = read_calibration(engine.target)
    text = Path(engine.target.files[0]).read_text()
    assert cal.loop_per_iter > 0 and f"tgt_loop_overhead({cal.loop_per_iter})." in text.splitlines()
    assert cal.move_overhead.get("L1", 0) > 1 and f"tgt_move_overhead(l1, {cal.move_overhead['L1']})." in text
    theta = terms.theta(cal)
    rng = random.Random(0)
    spec = parse_spec("Matmul(4x4x4, f32)")
    progs = [sample_program(search, spec, rng, k=4, p_opt=0.3, depth=8) for _ in range(6)]
    iters = set()
    for imp in progs:
        f = terms.features(imp)
        iters.add(f[terms.names.index(LOOP)])
        assert recost(imp, engine) == sum(a * b for a, b in zip(f, theta))
    assert len(iters) > 1 and max(iters) > 0  # the loop term varies, so it is really in the cost
    for fn in compile_many(progs, "avx2_calibrated"):
        err, tol = fn.check()
        assert err <= tol


def test_calibrated_target_compiles_without_auto_vectorization(monkeypatch):
    """Its programs are built as calibration timed them: avx2's flags plus gcc's
    vectorizers off (scalar kernels stay scalar, as the cost model assumes)."""
    import morello_asp.codegen.api as api

    flags = get_ctarget("avx2_calibrated").flags
    assert set(NO_VECTORIZE) <= set(flags) and set(get_ctarget("avx2").flags) <= set(flags)
    assert not set(NO_VECTORIZE) & set(get_ctarget("avx2").flags)
    seen = []
    real = api.build

    def spy(src, cdef, fl=(), omp=False, **kw):
        seen.append(fl)
        return real(src, cdef, fl, omp, **kw)

    monkeypatch.setattr(api, "build", spy)
    imp = synthesize("Matmul(2x3x5, f32)", target="avx2_calibrated")
    fn = compile_many([imp], "avx2_calibrated")[0]
    assert seen and set(NO_VECTORIZE) <= set(seen[-1])  # gcc got them
    err, tol = fn.check()
    assert err <= tol


@pytest.mark.slow
def test_loop_and_move_overheads_count_only_real_loops_and_copies(tmp_path):
    """tgt_loop_overhead is paid per iteration of a loop codegen writes as a loop, not of
    one it unrolls through registers; tgt_move_overhead is paid per move that copies into
    its level, not per cache-only move."""
    from morello_asp.cost import compute_cost
    from morello_asp.ir import Alloc, Loop
    from morello_asp.target import ENCODINGS, load_target_file

    avx = ENCODINGS / "targets" / "avx2"
    # Both targets without tgt_carried_trip/2: a chain's least cost is a max, not a sum,
    # so the overheads would not add up where it binds (it is priced by its own test).
    isa = (avx / "isa.lp").read_text()
    assert "tgt_carried_trip(16, 160)." in isa
    (tmp_path / "isa.lp").write_text(isa.replace("tgt_carried_trip(16, 160).", ""))
    machine = (avx / "machine.lp").read_text().replace("tgt_name(avx2).", "tgt_name(overheads).")
    (tmp_path / "base_m.lp").write_text(machine.replace("tgt_name(overheads).", "tgt_name(no_overheads)."))
    machine = machine.replace("tgt_loop_overhead(0).", "tgt_loop_overhead(7). tgt_move_overhead(l1, 100).")
    (tmp_path / "m.lp").write_text(machine)
    rest = f'#include "isa.lp".\n#include "{avx}/kernels.lp".\n#include "{avx}/kernels_c.lp".\n'
    entry, base_entry = tmp_path / "overheads.lp", tmp_path / "no_overheads.lp"
    entry.write_text('#include "m.lp".\n' + rest)
    base_entry.write_text('#include "base_m.lp".\n' + rest)
    tgt, base = load_target_file(entry), load_target_file(base_entry)
    assert not tgt.carried_trip and not base.carried_trip
    assert tgt.loop_per_iter == 7 and tgt.move_overhead == {"L1": 100}

    search = make_search("avx2")
    rng = random.Random(1)
    progs = [sample_program(search, parse_spec("Matmul(8x8x8, f32)"), rng, k=6, p_opt=0.3, depth=10) for _ in range(12)]
    seen = {"unrolled": 0, "loop": 0, "copy": 0, "cache": 0}
    for imp in progs:
        want = 0

        def walk(node, mult):
            nonlocal want
            if isinstance(node, Loop):
                real = not node.unrolled({"RF", "VRF"})
                seen["loop" if real else "unrolled"] += 1
                want += 7 * mult * node.trips * real
                walk(node.body, mult * node.trips)
                for b in node.boundaries:
                    walk(b, mult)
                return
            if isinstance(node, Alloc) and node.new.level == "L1":
                copies = node.load is not None or node.store is not None
                seen["copy" if copies else "cache"] += 1
                want += 100 * mult * copies
            for c in node.children:
                walk(c, mult)

        walk(imp, 1)
        assert compute_cost(imp, tgt).main - compute_cost(imp, base).main == want
    assert all(seen.values()), seen  # every case occurred


def test_cost_terms_remove_the_directory_they_made():
    """A CostTerms without a workdir writes its probe target into a directory of its own;
    that directory goes with the object instead of staying in /tmp."""
    import gc

    terms = CostTerms(get_target("avx2"))
    made = terms.probe_path.parent
    assert made.is_dir() and terms.probe_path.is_file()
    del terms
    gc.collect()
    assert not made.exists()
