"""The softmax family (encodings/kinds/softmax.lp) and its decompositions
(encodings/rules/softmax.lp, pipeline steps): declared semantics against numpy written
here independently, hand-scheduled programs with the AVX2 row kernels compiled, run
against a float64 softmax and proved by z3, and (slow) every kind of the family
synthesized at small odd sizes.

Tolerance: a program's output is compared with the float64 result; it may differ by
4 * eps(f32) * n * max(1, max |want|) where n is the number of values each output value
sums or reads whole (the scan dimension for a softmax: codegen/reference.py, tolerance).
"""

from __future__ import annotations

import numpy as np
import pytest

from morello_asp import parse_spec
from morello_asp.codegen.api import max_error
from morello_asp.codegen.reference import random_operands, reference, tolerance
from morello_asp.errors import ScheduleError
from morello_asp.solver.proofs.verify import verify
from morello_asp.synthesis import synthesize


def softmax64(x: np.ndarray, axis: int) -> np.ndarray:
    """scipy.special.softmax, in float64."""
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def close(got, want, spec) -> None:
    tol = tolerance(spec, np.asarray(want, dtype=np.float32))
    err = max_error(got, want)
    assert err <= tol, f"max |error| {err} > tolerance {tol}"


# ------------------------------------------------------------------ declarations
def test_family_text_round_trips_and_shapes():
    for text, shapes in [
        ("Softmax1(3x5, f32)", [(3, 5), (3, 5)]),
        ("Max1(3x5, f32)", [(3, 5), (3, 1)]),
        ("MaxAccum0(3x5, f32)", [(3, 5), (1, 5)]),
        ("SoftmaxDenominator2(2x3x4, f32)", [(2, 3, 4), (2, 3, 1), (2, 3, 1)]),
        ("SoftmaxDenominatorAndUnscaled1(3x5, f32)", [(3, 5), (3, 1), (3, 5)]),
        ("SoftmaxComplete1(3x5, f32)", [(3, 5), (3, 1), (3, 1), (3, 5)]),
        ("DivideVecScalar1(3x5, f32)", [(3, 5), (3, 1), (3, 5)]),
        ("Broadcast0(3x5, f32)", [(1, 5), (3, 5)]),
        ("FillNegInf(3x5, f32)", [(3, 5)]),
    ]:
        s = parse_spec(text)
        assert [tuple(x) for x in s.operand_shapes] == shapes, text
        assert parse_spec(s.text()) == s
    with pytest.raises(Exception, match="at least 3 dimensions"):
        parse_spec("Softmax2(3x5, f32)")


def test_declared_semantics_match_numpy():
    rng = np.random.default_rng(3)
    x = (rng.random((3, 7)) * 8 - 4).astype(np.float32)
    s = parse_spec("Softmax1(3x7, f32)")
    close(reference(s, x, np.zeros_like(x)), softmax64(x, 1), s)
    s0 = parse_spec("Softmax0(3x7, f32)")
    close(reference(s0, x, np.zeros_like(x)), softmax64(x, 0), s0)
    m = x.max(axis=1, keepdims=True)
    np.testing.assert_array_equal(reference(parse_spec("Max1(3x7, f32)"), x, np.zeros((3, 1), np.float32)), m)
    acc = np.full((3, 1), 1.5, np.float32)
    np.testing.assert_array_equal(reference(parse_spec("MaxAccum1(3x7, f32)"), x, acc), np.maximum(acc, m))
    d = np.exp(x - m).sum(axis=1, keepdims=True)
    got = reference(parse_spec("SoftmaxDenominator1(3x7, f32)"), x, m, np.zeros((3, 1), np.float32))
    np.testing.assert_allclose(got, d, rtol=1e-5)
    den, un = reference(
        parse_spec("SoftmaxDenominatorAndUnscaled1(3x7, f32)"), x, np.zeros((3, 1), np.float32), np.zeros_like(x)
    )
    np.testing.assert_allclose(un, np.exp(x - m), rtol=1e-5)
    np.testing.assert_allclose(den, d, rtol=1e-5)
    mx, den2 = reference(
        parse_spec("SoftmaxDenominatorAndMax1(3x7, f32)"), x, np.zeros((3, 1), np.float32), np.zeros((3, 1), np.float32)
    )
    np.testing.assert_array_equal(mx, m)
    np.testing.assert_allclose(den2, d, rtol=1e-5)
    got = reference(parse_spec("SoftmaxComplete1(3x7, f32)"), x, m, d.astype(np.float32), np.zeros_like(x))
    close(got, softmax64(x, 1), s)
    np.testing.assert_allclose(
        reference(parse_spec("DivideVecScalar1(3x7, f32)"), x, d.astype(np.float32), np.zeros_like(x)), x / d, rtol=1e-6
    )
    b = reference(parse_spec("Broadcast1(3x7, f32)"), m, np.zeros_like(x))
    np.testing.assert_array_equal(b, np.broadcast_to(m, x.shape))


def test_scan_dimension_is_never_tiled():
    s = parse_spec("Softmax1(4x8, f32)")
    with pytest.raises(ScheduleError, match="reads whole"):
        s.tile([4, 4])
    assert s.tile([2, 8]).spec == s


# ------------------------------------------------------------ hand schedules, run
def _accum_row(spec, fill: str, moves: list[int], kernel: str):
    """to_accum, the fill by `fill`, the accumulation on rows moved to L1 by `kernel`."""

    def body(a):
        for op in moves:
            a = a.move_param(op, "L1")
        return a.select(kernel)

    return spec.to_accum().subschedule([0], lambda f: f.select(fill)).subschedule([1], body)


def _unscaled_row(row):
    """Softmax on one row: to_softmax_parts, then Max, exp-store-sum and a scaled store,
    each an AVX2 row kernel (the program the search finds for long rows)."""
    return (
        row.to_softmax_parts("RF")
        .subschedule([0], lambda x: x.to_max_and_unscaled("RF"))
        .subschedule([0, 0], lambda m: _accum_row(m, "Point", [0], "VectorMaxLoop"))
        .subschedule([0, 1], lambda d: _accum_row(d, "ValueZero", [0, 3], "VectorSoftmaxDenominatorAndUnscaledLoop"))
        .subschedule([1], lambda d: d.move_param(0, "L1").move_param(2, "L1").select("VectorDivideScalarLoop"))
    )


def _recompute_row(row):
    """Softmax on one row the other way: maxima and denominators, then exp again."""
    return (
        row.to_softmax_parts_recompute("RF")
        .subschedule([0], lambda x: x.to_max_and_denominator())
        .subschedule([0, 0], lambda m: _accum_row(m, "Point", [0], "VectorMaxLoop"))
        .subschedule([0, 1], lambda d: _accum_row(d, "ValueZero", [0], "VectorSoftmaxDenominatorLoop"))
        .subschedule([1], lambda c: c.move_param(0, "L1").move_param(3, "L1").select("VectorSoftmaxCompleteLoop"))
    )


def test_hand_scheduled_softmax_runs_and_is_proved(tmp_path):
    """Both decompositions on rows of 21 (two vectors, then a scalar tail), compiled in
    one module, run against float64, proved; a program saved and loaded is the same."""
    from morello_asp.codegen.api import compile_many
    from morello_asp.serialize import load, save

    s = parse_spec("Softmax1(3x21, f32)")
    progs = [s.tile([1, 21]).subschedule([0], sched) for sched in (_unscaled_row, _recompute_row)]
    text = str(progs[0])
    assert "pipeline to_softmax_parts(RF, row_major) (rdenom: (1×1, f32, RF))" in text
    assert "VectorDivideScalarLoop(lout1, rdenom, lout2)" in text  # in place: out is x and out
    c = progs[1].to_c()
    assert "avx2_exp_ps" in c and c.count("#define MORELLO_HELPER_AVX2_EXP") == 1
    x = (np.random.default_rng(1).random((3, 21)) * 20 - 10).astype(np.float32)
    for prog, fn in zip(progs, compile_many(progs)):
        assert prog.is_complete
        close(fn(x), softmax64(x, 1), s)
        rep = verify(prog)
        assert rep.ok, str(rep)
    save(progs[0], tmp_path / "p.json")
    back = load(tmp_path / "p.json")
    assert str(back) == text and back.to_c() == progs[0].to_c()


def _online_row(row):
    """Softmax on one row in two passes: the online kernel gives the maximum and the
    denominator in one pass (SoftmaxDenominatorAndMax), then exp again (SoftmaxComplete)."""
    return (
        row.to_softmax_parts_recompute("RF")
        .subschedule([0], lambda m: m.move_param(0, "L1").select("VectorSoftmaxDenominatorAndMaxOnlineLoop"))
        .subschedule([1], lambda c: c.move_param(0, "L1").move_param(3, "L1").select("VectorSoftmaxCompleteLoop"))
    )


@pytest.mark.parametrize("n", [5, 21, 77, 200])
def test_online_softmax_kernel_runs_and_is_proved(n):
    """The one-pass (online) maximum and denominator: rows of n (only a tail; vectors and
    a tail; blocks of 4 vectors, a vector and a tail; blocks only), values spanning 60
    (the running maximum rises across blocks, the denominator is rescaled), against
    float64 and in Softmax1 through to_softmax_parts_recompute; proved by z3."""
    from morello_asp.codegen.api import compile_many

    m = parse_spec(f"SoftmaxDenominatorAndMax1(3x{n}, f32)")
    mp = m.tile([1, n]).subschedule(
        [0],
        lambda r: (
            r.move_param(0, "L1")
            .move_param(1, "L1")
            .move_param(2, "L1")
            .select("VectorSoftmaxDenominatorAndMaxOnlineLoop")
        ),
    )
    s = parse_spec(f"Softmax1(3x{n}, f32)")
    sp = s.tile([1, n]).subschedule([0], _online_row)
    rng = np.random.default_rng(n)
    x = (rng.random((3, n)) * 60 - 30).astype(np.float32)
    x[1] = np.sort(x[1])  # the maximum rises block after block
    fm, fs = compile_many([mp, sp])
    xmax, denom = fm(x, out=(np.zeros((3, 1), np.float32), np.zeros((3, 1), np.float32)))
    x64 = x.astype(np.float64)
    np.testing.assert_array_equal(xmax[:, 0], x.max(1))
    want = np.exp(x64 - x64.max(1, keepdims=True)).sum(1, keepdims=True)
    close(denom, want, m)
    for w, g in zip(reference(m, x, np.zeros((3, 1), np.float32), np.zeros((3, 1), np.float32)), (xmax, denom)):
        close(g, w, m)
    close(fs(x), softmax64(x, 1), s)
    for prog in (mp, sp):
        rep = verify(prog)
        assert rep.ok, str(rep)


# ------------------------------------------------ the AVX-512 C of the row kernels
@pytest.mark.parametrize("n", [5, 37, pytest.param(200, marks=pytest.mark.slow)])  # 200: ~5 s
def test_avx512_row_kernels_run_and_are_proved(n):
    """The avx512 target's C of every softmax row kernel (avx512/softmax_kernels_c.lp:
    16-wide, masked tails): rows of n (only a tail; whole vectors and a tail; blocks of
    4 vectors, then a part of a vector), values spanning 60 with the maximum rising along a row,
    through the three decompositions (unscaled then divided, denominator then exp again,
    online then exp again) and the online accumulation over parts of 64, 16 or 8 and a
    boundary part; compiled in one module, run against float64 where the CPU has avx512f, proved.
    The kernels' costs count 16-wide vectors there (avx2_lanes/1)."""
    from morello_asp.codegen.api import compile_many
    from morello_asp.codegen.ctarget import get_ctarget

    s = parse_spec(f"Softmax1(3x{n}, f32)", "avx512")

    def split_online(r):
        return (
            r.to_softmax_parts_recompute("RF")
            .subschedule([0], lambda m: m.to_accum().subschedule([2], lambda a: a.tile([1, part])))
            .subschedule([1], lambda c: c.move_param(0, "L1").move_param(3, "L1").select("VectorSoftmaxCompleteLoop"))
        )

    progs = [s.tile([1, n]).subschedule([0], f) for f in (_unscaled_row, _recompute_row, _online_row)]
    part = next((p for p in (64, 16, 8) if p < n), None)
    if part:
        progs.append(s.tile([1, n]).subschedule([0], split_online).synthesize_all(db=None))
    for prog in progs:
        c = prog.to_c()
        assert "avx512_exp_ps" in c and "avx2_exp_ps" not in c, c
        rep = verify(prog)
        assert rep.ok, str(rep)
    m = "MaxAccum1(1x64, (f32, L1, row_major), (f32, RF, row_major), serial)"
    costs = [str(parse_spec(m, t).select("VectorMaxLoop")).split("cost ")[1] for t in ("avx512", "avx2")]
    assert costs == ["5", "9"]  # 64 / 16 or 64 / 8 vectors, + 1: each target's width
    missing = get_ctarget("avx512").missing_cpu_flags()
    if missing:
        pytest.skip(f"this CPU lacks {', '.join(missing)}: AVX-512 programs compiled, not run")
    rng = np.random.default_rng(n)
    x = (rng.random((3, n)) * 60 - 30).astype(np.float32)
    x[1] = np.sort(x[1])  # the running maximum rises block after block
    for fn in compile_many(progs):
        close(fn(x), softmax64(x, 1), s)


# ------------------------------------------- the online form, split across tiles
def test_online_accumulation_is_declared_and_merges_exactly():
    """SoftmaxDenominatorAndMaxAccum merges a part's maximum and denominator into the
    running pair (kind_merge/3): parts of a row merged one after another, in the declared
    semantics, give the whole row's pair; the scan dimension it merges over may be tiled."""
    from morello_asp.kinds import kind

    ka = kind("SoftmaxDenominatorAndMaxAccum1")
    assert ka.accum_of == "SoftmaxDenominatorAndMax1"
    assert [(ka.params[o], i) for o, i in ka.fills] == [("xmax", "fill_neg_inf"), ("denom", "zero")]
    assert ka.scans(2) == () and kind("SoftmaxDenominatorAndMax1").scans(2) == (1,)
    assert "merged: " in ka.describe() and "FillNegInf (xmax), Zero (denom)" in ka.describe()
    rng = np.random.default_rng(4)
    x = (rng.random((3, 37)) * 60 - 30).astype(np.float32)
    x[1] = np.sort(x[1])  # the maximum rises part after part
    x64 = x.astype(np.float64)
    whole = parse_spec("SoftmaxDenominatorAndMax1(3x37, f32)")
    want = np.exp(x64 - x64.max(1, keepdims=True)).sum(1, keepdims=True)
    for step in (1, 5, 8, 36):
        m, d = np.full((3, 1), -np.inf, np.float32), np.zeros((3, 1), np.float32)
        for lo in range(0, 37, step):
            part = np.ascontiguousarray(x[:, lo : lo + step])
            m, d = reference(parse_spec(f"SoftmaxDenominatorAndMaxAccum1(3x{part.shape[1]}, f32)"), part, m, d)
        np.testing.assert_array_equal(m[:, 0], x.max(1))
        close(d, want, whole)


def _kernels(imp) -> set[str]:
    from morello_asp.ir import KernelApp

    return {n.kernel for n in imp.walk() if isinstance(n, KernelApp)}


@pytest.mark.parametrize("n, t", [(37, 8), (200, 64), (5, 1)])
def test_online_softmax_split_across_tiles_runs_and_is_proved(n, t):
    """Softmax1 through to_softmax_parts_recompute, its SoftmaxDenominatorAndMax by
    to_accum (FillNegInf, Zero, then the accumulating variant) over parts of t of each
    row and a boundary part, the rest synthesized: the AVX2 online accumulating kernel on
    parts of vectors, the generic point kernel's merge on parts of one; run against
    float64 and proved by z3."""
    s = parse_spec(f"Softmax1(3x{n}, f32)")

    def row(r):
        return (
            r.to_softmax_parts_recompute("RF")
            .subschedule([0], lambda m: m.to_accum().subschedule([2], lambda a: a.tile([1, t])))
            .subschedule([1], lambda c: c.move_param(0, "L1").move_param(3, "L1").select("VectorSoftmaxCompleteLoop"))
        )

    prog = s.tile([1, n]).subschedule([0], row).synthesize_all()
    text = str(prog)
    assert "FillNegInf" in text or "Point(rxmax)" in text, text
    if t >= 8:
        assert "VectorSoftmaxDenominatorAndMaxOnlineAccumLoop" in _kernels(prog), text
    else:
        assert "Point" in _kernels(prog), text
    rng = np.random.default_rng(n)
    x = (rng.random((3, n)) * 60 - 30).astype(np.float32)
    x[1] = np.sort(x[1])
    close(prog.compile()(x), softmax64(x, 1), s)
    rep = verify(prog)
    assert rep.ok, str(rep)


@pytest.mark.slow  # ~4 s
def test_the_search_splits_a_long_row_with_the_online_form():
    """A row twice L1 (64 KiB): the search reads it twice, once by the online
    accumulation over halves kept in L1, once to store the results, where without the
    accumulating variant it read it three times (maximum, denominator, results)."""
    imp = synthesize("Softmax1(1x16384, f32)", db=None)
    assert "VectorSoftmaxDenominatorAndMaxOnlineAccumLoop" in _kernels(imp), str(imp)
    x = (np.random.default_rng(0).random((1, 16384)) * 20 - 10).astype(np.float32)
    close(imp.compile()(x), softmax64(x, 1), imp.spec)


def test_pipeline_memory_is_counted_and_limited():
    """The intermediates take their level's units while every stage runs: a limit one
    short of them refuses the step, and verify sums them along every path."""
    s = parse_spec("(Softmax1(1x8, (f32, GL, row_major), (f32, GL, row_major), serial), [16, 16, 1024, 1024])")
    prog = s.to_softmax_parts("L1")  # one line of L1 for the 1x1 denominator
    assert prog.cost.peak[2] == 1
    tight = parse_spec("(Softmax1(1x8, (f32, GL, row_major), (f32, GL, row_major), serial), [16, 16, 0, 1024])")
    with pytest.raises(ScheduleError, match="needs 1 lines of L1"):
        tight.to_softmax_parts("L1")


def test_in_place_on_a_reducing_stage_is_refuted():
    """Passing one buffer as input and output of a stage that reads along what it writes
    (not pointwise) is refused by the proof."""
    from dataclasses import replace

    s = parse_spec("Softmax1(2x8, f32)")
    prog = s.to_softmax_parts("GL")
    wrong = replace(prog, wiring=((1, -1, 1), (1, -1, 1)))  # the unscaled stage reads out as x
    rep = verify(wrong)
    assert not rep.ok
    assert any(o.status == "refuted" and "safe in place" in o.what for o in rep.obligations), str(rep)


# --------------------------------------------------------------------- synthesis
@pytest.mark.slow
@pytest.mark.parametrize(
    "text",
    [
        "Softmax1(3x21, f32)",
        "Softmax0(5x3, f32)",
        "Softmax2(2x3x9, f32)",
        "Max1(3x11, f32)",
        "SoftmaxDenominator1(3x9, f32)",
        "SoftmaxDenominatorAndMax1(3x9, f32)",
        "SoftmaxDenominatorAndMaxAccum1(3x9, f32)",
        "SoftmaxDenominatorAndUnscaled1(3x9, f32)",
        "SoftmaxDenominatorAndUnscaledFromMax1(3x9, f32)",
        "SoftmaxComplete1(3x9, f32)",
        "DivideVecScalar1(3x9, f32)",
        "Broadcast0(3x5, f32)",
        "DivideVec(3x5, f32)",
        "FillNegInf(3x5, f32)",
    ],
)
def test_every_family_kind_synthesizes_and_runs(text):
    imp = synthesize(text)
    fn = imp.compile()
    spec = imp.spec
    ops = random_operands(spec, seed=2)
    outs = spec.outputs
    want = reference(spec, *ops)
    got = fn(
        *[a for i, a in enumerate(ops) if i not in outs],
        out=tuple(ops[o].copy() for o in outs) if len(outs) > 1 else ops[outs[0]].copy(),
    )
    for g, w in zip(got if len(outs) > 1 else [got], want if len(outs) > 1 else [want]):
        close(g, w, spec)
    if spec.kind.startswith("Softmax") and spec.kind[7:].isdigit():
        close(got, softmax64(ops[0], int(spec.kind[7:])), spec)
    assert verify(imp).ok


@pytest.mark.slow
def test_a_users_pipeline_step_is_synthesized_run_and_proved():
    """A step a --rules file declares (tests/fixtures/two_pass_softmax.lp) is searched,
    built into a program (its wiring read from that file), compiled, run and proved."""
    from pathlib import Path

    rules = [str(Path(__file__).parent / "fixtures" / "two_pass_softmax.lp")]
    imp = synthesize("Softmax1(2x19, f32)", rules=rules)
    text = str(imp)
    assert "pipeline two_pass(" in text and "to_softmax_parts" not in text
    x = (np.random.default_rng(3).random((2, 19)) * 20 - 10).astype(np.float32)
    close(imp.compile(rules)(x), softmax64(x, 1), imp.spec)
    rep = verify(imp, rules)
    assert rep.ok, str(rep)
    by_name = parse_spec("Softmax1(2x19, f32)").pipeline("to_softmax_parts_recompute", "RF")  # a built-in step
    assert [c.spec.kind for c in by_name.children] == ["SoftmaxDenominatorAndMax1", "SoftmaxComplete1"]
