"""Synthesis end to end: the rule files' rewrites, the dynamic program, and every
synthesized program compiled and checked against numpy."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from morello_asp import parse_spec
from morello_asp.cost import compute_cost
from morello_asp.errors import NoImplementationError, RuleError
from morello_asp.solver.memo.table import DictMemo
from morello_asp.solver.search.dp import Search
from morello_asp.solver.search.engine import Engine, get_engine
from morello_asp.synthesis import synthesize, synthesize_all

SHARED = DictMemo()  # one table across the module: later shapes reuse earlier answers


def shared_search():
    return Search(get_engine(), SHARED)


def check_runs(imp, rules=()):
    from morello_asp.solver.proofs.verify import verify

    rep = verify(imp, rules)
    assert rep.ok, str(rep)
    fn = imp.compile(rules)
    err, tol = fn.check()
    assert err <= tol, f"max error {err} > {tol}"


GRID = [s for s in itertools.product([1, 2, 4, 8, 16], repeat=3)] + [(3, 5, 7), (12, 20, 8)]


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["f32", "i32"])
def test_synthesized_matmul_grid_matches_numpy(dtype):
    """Every power-of-two shape up to 16 in each dimension, and two odd ones: each
    program is proved legal by z3, compiled (all in one C module: one gcc run) and
    checked against numpy."""
    from morello_asp.codegen import compile_many
    from morello_asp.solver.proofs.verify import verify

    search = Search(get_engine(), DictMemo())
    imps = search.build_many([parse_spec(f"Matmul({m}x{k}x{n}, {dtype})") for m, k, n in GRID])
    for (m, k, n), imp in zip(GRID, imps):
        assert imp.is_complete
        rep = verify(imp)
        assert rep.ok, f"{m}x{k}x{n}: {rep}"
    bad = []
    for (m, k, n), fn in zip(GRID, compile_many(imps)):
        err, tol = fn.check()
        if not err <= tol:
            bad.append(f"{m}x{k}x{n}: max error {err} > {tol}")
    assert not bad, bad


def test_rebuilt_cost_equals_decision_and_explain():
    s = shared_search()
    spec = parse_spec("Matmul(4x4x4, f32)")
    d = s.solve(spec)
    imp = s.build(spec)
    assert compute_cost(imp).main == d.cost
    rows = s.explain(spec)
    assert rows and min(r[1].cost for r in rows if r[1]) == d.cost
    for e, rd in rows:  # explain's costs are the costs of the rebuilt programs
        if rd is not None:
            from morello_asp.rewrites import node_from_expansion

            built = node_from_expansion(spec, e, [s.build(c) for c in e.children])
            assert compute_cost(built).main == rd.cost


def test_solve_and_explain_from_cold_expand_in_batches():
    """`solve` and `explain` called from outside the search expand what lies below the
    spec in batched clingo calls, as `build` does: solved depth first, each sub-spec was
    its own call (816 for Matmul 4x4x4, 36 s of a cold `explain`). Same decision and
    same rows as a search that built the program first."""
    spec = parse_spec("Matmul(4x4x4, f32)")
    built = Search(Engine("avx2"), DictMemo())
    imp = built.build(spec)
    ref_calls = built.engine.stats.calls
    check_runs(imp)
    solver = Search(Engine("avx2"), DictMemo())
    d = solver.solve(spec)
    assert d.cost == imp.cost.main
    assert solver.engine.stats.calls <= ref_calls
    explainer = Search(Engine("avx2"), DictMemo())
    rows = explainer.explain(spec)
    assert explainer.engine.stats.calls <= ref_calls + 2  # the spec's own class, then its sub-specs
    assert min(r.cost for _, r in rows if r) == d.cost
    assert [(str(e.action), r and r.cost) for e, r in rows] == [
        (str(e.action), r and r.cost) for e, r in built.explain(spec)
    ]


SPECS = st.sampled_from(["Matmul(2x4x2, f32)", "Matmul(4x2x4, f32)", "Matmul(2x2x8, f32)", "Matmul(4x4x4, f32)"])


@pytest.mark.slow  # ~10 s or more on idle cores; the slow part of CI runs it
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=SPECS, data=st.data())
def test_more_memory_never_costs_more_and_decision_holds_at_peak(text, data):
    s = shared_search()
    base = parse_spec(text)
    lims = tuple(data.draw(st.sampled_from([c // 4, c // 2, c])) if i < 3 else c for i, c in enumerate(base.limits))
    small = base.__class__(base.kind, base.shape, base.operands, base.serial, lims)
    d_small, d_big = s.solve(small), s.solve(base)
    assert d_big.feasible
    if d_small.feasible:
        assert d_big.cost <= d_small.cost
    # the decision found at the limit is also the decision at the peak it needs
    at_peak = base.__class__(base.kind, base.shape, base.operands, base.serial, d_big.peak)
    fresh = Search(get_engine(), DictMemo()).solve(at_peak)
    assert fresh.cost == d_big.cost


@pytest.mark.slow  # ~7 s
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=SPECS)
def test_rewrites_leave_canonical_children_never_the_spec_itself(text):
    spec = parse_spec(text)
    eng = get_engine()
    frontier = [spec]
    for _ in range(3):
        nxt = []
        for sp in frontier:
            for e in eng.expand(sp):
                for c in e.children:
                    assert c != sp
                    assert c == c.canonical()
                    nxt.append(c)
        frontier = nxt[:20]


def test_no_implementation_is_a_clear_answer():
    spec = parse_spec(
        "(Matmul(1x4x4x4, (f32, GL, row_major), (f32, GL, row_major), (f32, GL, row_major), serial), [0, 0, 0, 0])"
    )
    with pytest.raises(NoImplementationError, match="no implementation"):
        synthesize(spec)


def test_synthesize_all_completes_a_partial_schedule():
    imp = parse_spec("Matmul(8x8x8, f32)").to_accum().subschedule([1], lambda a: a.tile([1, 4, 8, 8]))
    done = imp.synthesize_all(SHARED)
    assert done.is_complete and done.children[1].tile_shape == (1, 4, 8, 8)
    check_runs(done)


# ---- extensibility: new kernels, forbidden rewrites, other targets, all without Python


def test_a_new_kernel_in_its_own_file_is_picked_when_cheaper(tmp_path):
    lp = tmp_path / "fast_zero.lp"
    lp.write_text(
        "% A zero kernel for any contiguous L1/GL tensor that is cheaper than memset.\n"
        "tgt_kernel(cheap_zero).\n"
        "kernel_applies(S, cheap_zero) :- spec(S, zero), spec_operand(S, 0, _, L, _, _, _, _), L != rf, L != vrf,"
        " contiguous(S, 0).\n"
        "kernel_cost(S, cheap_zero, 0) :- kernel_applies(S, cheap_zero).\n"
        'tgt_kernel_c(cheap_zero, f32, "memset({out_ptr}, 0, {out_bytes}); /* cheap */").\n'
    )
    spec = parse_spec("Matmul(2x2x2, f32)")
    imp = synthesize(spec, rules=[lp])
    kernels = {n.kernel for n in imp.walk() if hasattr(n, "kernel")}
    assert "CheapZero" in kernels
    assert "/* cheap */" in imp.to_c(rules=[lp])
    fn = imp.compile(rules=[lp])
    err, tol = fn.check()
    assert err <= tol


def test_a_rule_file_can_forbid_a_rewrite(tmp_path):
    lp = tmp_path / "no_vrf.lp"
    lp.write_text("% never use vector registers\nforbid(S, A) :- cand(S, A), A = move(_, vrf, _, _).\n")
    imp = synthesize(parse_spec("Matmul(4x4x8, f32)"), rules=[lp])
    assert all(getattr(n, "new", None) is None or n.new.level != "VRF" for n in imp.walk())
    check_runs(imp)


@pytest.mark.slow  # ~10 s or more on idle cores; the slow part of CI runs it
def test_a_second_target_with_tiny_l1_changes_the_program(tmp_path):
    from morello_asp.target import ENCODINGS

    machine = (ENCODINGS / "targets" / "avx2" / "machine.lp").read_text()
    tiny = machine.replace("tgt_level(l1,  2, 1024,", "tgt_level(l1,  2, 4,").replace(
        "tgt_name(avx2).", "tgt_name(tiny)."
    )
    assert tiny != machine
    (tmp_path / "tiny").mkdir()
    (tmp_path / "tiny" / "machine.lp").write_text(tiny)
    entry = tmp_path / "tiny.lp"
    avx = ENCODINGS / "targets" / "avx2"
    entry.write_text(
        f'#include "tiny/machine.lp".\n#include "{avx}/isa.lp".\n#include "{avx}/kernels.lp".\n'
        f'#include "{avx}/kernels_c.lp".\n'
    )
    spec_text = "Matmul(4x4x8, f32)"
    a = synthesize(spec_text)
    b = synthesize(parse_spec(spec_text, str(entry)), target=str(entry))
    assert str(a) != str(b)
    check_runs(a)
    assert b.spec.target.name == "tiny"  # the program carries its target: proved and compiled for it
    check_runs(b)


def test_user_rule_syntax_error_names_file_and_line(tmp_path):
    lp = tmp_path / "broken.lp"
    lp.write_text("% fine\nforbid(S, A) :- cand(S, A)\n")
    with pytest.raises(RuleError) as e:
        Engine("avx2", (lp,))
    assert "broken.lp:3" in str(e.value) or "broken.lp:2" in str(e.value)


def _tall_strided_cache_moves(imp, ways=8):
    """Alloc nodes that keep a layout, go to L1 and view a non-contiguous tile of > ways rows."""
    found = []
    for n in imp.walk():
        new = getattr(n, "new", None)
        if new is None or new.level != "L1":
            continue
        old = n.spec.operands[n.operand]
        shape = n.spec.operand_shapes[n.operand]
        if (
            old.level != "L1"
            and new.layout == old.layout
            and old.contig < old.layout.full_contiguity()
            and len(shape) >= 2
            and shape[-2] > ways
        ):
            found.append(n)
    return found


def test_strided_tiles_stay_in_l1_only_where_their_rows_do_not_alias():
    """rules/aliasing.lp: a strided tile may be cached in L1 as it is only if its rows
    spread over enough of L1's sets; the spec's stride exponent says how far."""

    def moves(b):
        tile = parse_spec(
            f"(MatmulAccum(1x4x16x16, (f32, GL, row_major), {b}, (f32, GL, row_major, c1)), [16, 16, 1024, 33554432])"
        )
        return {e.action.text() for e in Engine("avx2").expand(tile)}

    cache_b = "move_param(1, L1, row_major)"
    assert cache_b not in moves("(f32, GL, row_major, c1)")  # unknown stride: 16 rows > 8 ways
    assert cache_b not in moves("(f32, GL, row_major, c1, s12)")  # 4 KB apart: one set group
    assert cache_b in moves("(f32, GL, row_major, c1, s7)")  # 128 B * odd: 32 groups of sets
    with pytest.raises(RuleError, match="rule set l1_ways is retired: the default rules see strides"):
        Engine("avx2", ("l1_ways",))  # retired: the default rules see strides


def test_a_view_larger_than_the_cache_is_not_kept_there_as_it_is():
    """rules/aliasing.lp: a cache move of a view of more lines than half the level's ways
    times its sets (avx2: 8 x 64 lines, 32 KiB) is not offered, whatever its capacity in
    tgt_level/6 (avx2: 1024 lines) lets the program allocate; a view that fits is
    (tests/test_cache_share.py: other shares)."""

    def moves(k):
        spec = parse_spec(
            f"(MatmulAccum(1x4x{k}x128, (f32, GL, row_major), (f32, GL, row_major), (f32, GL, row_major)), "
            "[16, 16, 1024, 33554432])"
        )
        return {e.action.text() for e in Engine("avx2").expand(spec)}

    cache_b = "move_param(1, L1, row_major)"
    assert cache_b in moves(32)  # 32 x 128 f32: 16 KiB, 256 lines
    assert cache_b not in moves(64)  # 32 KiB, all of L1
    assert cache_b not in moves(128)  # 64 KiB


@pytest.mark.slow  # ~45 s; the slow part of CI runs it
def test_synthesis_packs_tiles_whose_rows_alias():
    # Tiles of B from a 32-wide matrix (rows 128 B apart) stay in L1 as they are; from a
    # 1024-wide one (rows 4 KB apart) they are packed.
    near = parse_spec("Matmul(8x32x32, f32)").to_accum().subschedule([1], lambda a: a.tile([1, 8, 32, 16]))
    far = parse_spec("Matmul(8x32x1024, f32)").to_accum().subschedule([1], lambda a: a.tile([1, 8, 32, 16]))
    near_imp, far_imp = synthesize_all(near), synthesize_all(far)
    assert _tall_strided_cache_moves(near_imp) and not _tall_strided_cache_moves(far_imp)
    check_runs(near_imp)
    check_runs(far_imp)


def test_target_block_sizes_offer_six_row_tiles_over_packed_panels():
    """avx2 declares 6-row MatmulAccum tiles over a packed B panel (tgt_block_size/4, the
    6x16 register block); rules/register_blocks.lp offers them there and nowhere else,
    and a target without the fact gets none."""
    packed = parse_spec(
        "(MatmulAccum(1x12x16x16, (f32, L1, row_major), (f32, L1, [0, 2, 1, 2 p(16)]), "
        "(f32, L1, row_major)), [16, 16, 1024, 33554432])"
    )
    plain = parse_spec(
        "(MatmulAccum(1x12x16x16, (f32, L1, row_major), (f32, L1, row_major), "
        "(f32, L1, row_major)), [16, 16, 1024, 33554432])"
    )
    six = "tile([1, 6, 16, 16])"
    avx2 = Engine("avx2")
    exps = [e for e in avx2.expand(packed) if e.action.text() == six]
    assert len(exps) == 1 and all(c.shape[1] == 6 for c in exps[0].children)
    assert six not in {e.action.text() for e in avx2.expand(plain)}
    assert six not in {e.action.text() for e in Engine("neon").expand(packed)}  # declares none
    with pytest.raises(RuleError, match="rule set rows6 is retired: targets declare their register blocks"):
        Engine("avx2", ("rows6",))  # retired: the target's facts do its work


@pytest.mark.slow  # ~10 s or more on idle cores; the slow part of CI runs it
def test_synthesis_finishes_a_packed_panel_with_six_row_register_tiles():
    # A partial program that packs B; the default search finishes it with 6-row tiles.
    partial = (
        parse_spec("Matmul(12x16x16, f32)")
        .to_accum()
        .subschedule([1], lambda a: a.move_param(1, "L1", "[0, 2, 1, 2 p(16)]"))
    )
    imp = synthesize_all(partial)
    assert any(getattr(n, "tile_shape", (0, 0))[1:2] == (6,) for n in imp.walk()), str(imp)
    check_runs(imp)


@pytest.mark.slow  # ~9 s
def test_a_batch_started_while_another_is_out_waits_for_it_and_an_abandoned_one_is_grounded_again():
    """The search keeps two batches out at once; a class the first one sends is not sent
    again by the second, and a class whose batch was never read (a stopped search) is
    grounded when it is next asked for."""
    spec = parse_spec("Matmul(4x4x8, f32)")
    kids = [c for e in Engine("avx2").expand(spec) for c in e.children]
    engine = Engine("avx2")
    first = engine.start_expand([spec, *kids[:3]])
    assert engine._inflight == {s.without_limits for s in [spec, *kids[:3]]}
    second = engine.start_expand([spec, *kids])  # spec and kids[:3] are out already
    a = first()
    b = second()
    classes = {s.without_limits for s in [spec, *kids]}
    assert engine.stats.specs == len(classes)  # none grounded twice
    assert not engine._inflight
    fresh = Engine("avx2")
    assert [str(e.action) for e, _ in a[0]] == [str(e.action) for e in fresh.expand(spec)]
    want = [[str(e.action) for e in fresh.expand(k)] for k in [spec, *kids]]
    assert [[str(e.action) for e, _ in x] for x in b] == want

    stopped = Engine("avx2")
    stopped.start_expand([spec, *kids])  # never read: its search was stopped
    again = stopped.expand_many([spec, *kids])
    assert [[str(e.action) for e in x] for x in again] == want
    assert not stopped._inflight
    # The program found from an engine left so is the one a fresh engine finds, and runs.
    imp = Search(stopped, DictMemo()).build(spec)
    assert imp.cost == Search(fresh, DictMemo()).build(spec).cost
    check_runs(imp)


@pytest.mark.parametrize("jobs", [1, pytest.param(2, marks=pytest.mark.slow)])  # 2: ~6 s, with the slow tests
def test_the_search_keeps_a_whole_batch_per_worker_out(monkeypatch, jobs):
    """With several clingo workers the search keeps one batch per worker out, each sent
    whole as one call (each call has a fixed cost), besides the one it is reading; with
    one worker, one batch besides it. Same program either way."""
    monkeypatch.setenv("MORELLO_ASP_JOBS", str(jobs))
    spec = parse_spec("Matmul(4x4x8, f32)")
    engine = Engine("avx2")
    outstanding, most, splits = [0], [0], set()
    start = engine.start_expand

    def counted(specs, split=True):
        before = len(engine._inflight)
        finish = start(specs, split)
        if len(engine._inflight) > before:  # sent classes to clingo
            splits.add(split)
        outstanding[0] += 1
        most[0] = max(most[0], outstanding[0])

        def done():
            outstanding[0] -= 1
            return finish()

        return done

    monkeypatch.setattr(engine, "start_expand", counted)
    search = Search(engine, DictMemo())
    search.prefetch(spec, batch=40)
    imp = search.build(spec)
    assert most[0] == jobs + 1
    assert splits == {jobs == 1}
    assert imp.cost == shared_search().build(spec).cost  # the module's table: searched once for both
    check_runs(imp)


@pytest.mark.parametrize("search", [True, False])
def test_the_heap_is_frozen_at_exit_after_a_search(search):
    """The interpreter's collections at exit would rescan all a search kept (7 s of a
    64^3 `synth`): a process that made a Search freezes its heap from an exit handler
    (one that only imported the package does not). A handler registered first runs
    last and sees it."""
    import subprocess
    import sys

    code = (
        "import atexit, gc\n"
        "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0))\n"
        "from morello_asp.solver.search.dp import Search\n"
        "from morello_asp.solver.search.engine import Engine\n"
        "kept = [[i] for i in range(1000)]\n"
    ) + ("Search(Engine('avx2'))\n" if search else "")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"frozen {search}"


@pytest.mark.slow  # ~11 s: with the slow tests, so the default suite stays under 5 minutes
def test_a_search_that_forgets_keeps_its_answers_in_the_table(tmp_path):
    """Search.forget drops the decisions and class expansions held in memory (a model's
    session calls it after each spec, or memory grows with the whole model); the next
    search of a spec already decided reads it from the table, grounds only the classes
    of its program's path again, and builds the same program."""
    from morello_asp.synthesis import make_search

    s = make_search(None, (), str(tmp_path / "t.db"))
    spec = parse_spec("Matmul(16x16x16, f32)")
    first = s.build(spec)
    grounded = len(s.engine._class_cache)
    s.forget()
    assert not s.engine._class_cache and not s._decided
    again = s.build(spec)
    assert str(again) == str(first)
    assert 0 < len(s.engine._class_cache) < grounded / 10


@pytest.mark.slow  # about 16 s: two searches of the whole grid
def test_forgetting_between_specs_changes_no_answer(tmp_path):
    """The differential check of a model's compile path: a grid of specs searched one after
    another into one table by a search that keeps everything in memory, and by one that
    forgets after each spec (as an ONNX session does), into another table: the same
    program, cost and listing for every spec."""
    from morello_asp.synthesis import make_search

    grid = [
        "Matmul(4x8x16, f32)",
        "Matmul(12x16x8, f32)",
        "Softmax1(8x32, f32)",
        "Relu(24x16, f32)",
        "Conv(1x4x2x4x4x3x3, f32)",
        "Matmul(8x8x16, f32)",
    ]
    keep = make_search(None, (), str(tmp_path / "keep.db"))
    forget = make_search(None, (), str(tmp_path / "forget.db"))
    for text in grid:
        spec = parse_spec(text)
        a = keep.build(spec)
        b = forget.build(spec)
        forget.forget()
        assert (a.cost.main, str(a)) == (b.cost.main, str(b)), text
