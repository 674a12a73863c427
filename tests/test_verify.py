"""z3 legality proofs: good layouts and programs prove, crafted bad ones are refuted
with counterexamples that really fail; and verify refutes every program codegen refuses
(the search's optimum under an old wrong rule, programs with one claim made wrong)."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from morello_asp import Layout, parse_spec
from morello_asp.cli import main
from morello_asp.cli.schedule import figure1
from morello_asp.codegen.ctarget import get_ctarget
from morello_asp.codegen.emitter import Buffer, Emitter, View
from morello_asp.codegen.simplify import VarRange
from morello_asp.errors import CodegenError, LegalityError
from morello_asp.expr import Const, Var
from morello_asp.ir import Loop
from morello_asp.serialize import from_json, load, save, to_json
from morello_asp.solver.memo.table import DictMemo
from morello_asp.solver.proofs.verify import _ViewWalk, prove_layout, verify
from morello_asp.solver.search.dp import Search
from morello_asp.solver.search.engine import get_engine
from morello_asp.synthesis import synthesize


@pytest.mark.parametrize(
    "text,shape",
    [
        ("row_major", (6, 8)),
        ("col_major", (6, 8)),
        ("[1, 0, 1 p(4)]", (6, 8)),
        ("[0, 2, 1, 2 p(16)]", (1, 8, 32)),
        ("[0, 1, 1 oe(8)]", (3, 16)),
        ("[2, 0, 1]", (2, 3, 4)),
    ],
)
def test_good_layouts_prove(text, shape):
    assert prove_layout(Layout.parse(text, len(shape)), shape).status == "proved"


def offset(lay, shape, coord):
    names = [f"d{i}" for i in range(len(shape))]
    return lay.buffer_expr(shape, names).eval(dict(zip(names, coord)))


def test_aliasing_layout_refuted_with_a_real_collision():
    lay = Layout.parse("[0, 1 p(4)]", 2, validate=False)  # dim 1 folded modulo 4
    ob = prove_layout(lay, (6, 8))
    assert ob.status == "refuted"
    a, b = (list(map(int, re.findall(r"\d+", c))) for c in re.findall(r"\[[\d, ]+\]", ob.detail)[:2])
    assert a != b and offset(lay, (6, 8), a) == offset(lay, (6, 8), b)


def test_padding_layout_refuted():
    ob = prove_layout(Layout.parse("[0, 1, 1 p(3)]", 2), (6, 8))
    assert ob.status == "refuted" and "padding" in ob.detail


def test_figure1_and_scheduled_programs_prove():
    assert verify(figure1()).ok
    imp = parse_spec("Matmul(7x8x5, f32)").to_accum().subschedule([1], lambda a: a.tile([1, 3, 8, 2]))
    rep = verify(imp)
    assert rep.ok, str(rep)


def test_synthesized_program_proves_and_runs():
    imp = synthesize("Matmul(3x5x7, f32)")
    assert verify(imp).ok
    err, tol = imp.compile().check()
    assert err <= tol


def test_off_by_one_tile_refuted():
    loop = parse_spec("Matmul(8x8x8, f32)").tile([1, 4, 8, 8])
    body = loop.body
    wrong = dataclasses.replace(body.spec, shape=(1, 3, 8, 8))
    bad = Loop(loop.spec, loop.tile_shape, False, type(body)(wrong))
    rep = verify(bad)
    assert not rep.ok and "covered by" in str(rep)


def test_a_tile_body_over_other_tensors_is_refuted():
    """The body of a tile views the parent's operands: the same dtype, level and vector
    size (a body claiming registers or another dtype proved before)."""
    loop = parse_spec("Matmul(8x8x8, f32)").tile([1, 4, 8, 8])
    body = loop.body
    assert verify(loop).ok
    for change in ({"level": "L1"}, {"dtype": body.spec.operands[0].dtype.parse("i32")}):
        ops = list(body.spec.operands)
        ops[0] = dataclasses.replace(ops[0], **change)
        wrong = dataclasses.replace(body.spec, operands=tuple(ops))
        rep = verify(Loop(loop.spec, loop.tile_shape, False, type(body)(wrong)))
        assert not rep.ok and "the body's operand 0 is" in str(rep), str(rep)


def test_a_fill_over_another_tensor_is_refuted():
    block = parse_spec("Matmul(8x8x8, f32)").to_accum()
    assert verify(block).ok
    fill = block.stmts[0]
    ops = [dataclasses.replace(fill.spec.operands[0], level="L1")]
    wrong = type(fill)(dataclasses.replace(fill.spec, operands=tuple(ops)))
    rep = verify(dataclasses.replace(block, stmts=(wrong, *block.stmts[1:])))
    assert not rep.ok and "(f32, L1, row_major) runs on (f32, GL, row_major)" in str(rep), str(rep)


def test_missing_boundary_refuted():
    loop = parse_spec("Matmul(7x8x8, f32)").tile([1, 4, 8, 8])
    bad = Loop(loop.spec, loop.tile_shape, False, loop.body, ())
    rep = verify(bad)
    assert not rep.ok and "covered by nothing" in str(rep)


def test_oversized_register_tile_refuted():
    spec = parse_spec(
        "(MatmulAccum(1x1x1x256, (f32, L1, row_major), (f32, L1, row_major), (f32, L1, row_major), "
        "serial), [16, 64, 1024, 1024])"
    )
    good = spec.move_param(2, "VRF", "row_major", vector_size=8)  # 32 vector registers: fits the spec's 64
    rep = verify(good)
    assert not rep.ok and "capacity 16" in str(rep)


def test_a_move_whose_body_has_another_shape_is_refuted_and_not_run(tmp_path, capsys):
    """A saved program edited by hand: the root says 4x4x5, its move's body still 4x4x4.
    Each node's C follows its own spec, so this must not prove (it did: 31 of 31)."""
    from morello_asp.synthesis import synthesize

    good = tmp_path / "good.json"
    save(synthesize("Matmul(4x4x4, f32)", db=None), good)
    text = good.read_text()
    bad = tmp_path / "bad.json"
    bad.write_text(text.replace("Matmul(1x4x4x4", "Matmul(1x4x4x5", 1))
    assert main(["verify", str(good)]) == 0
    assert main(["run", str(good)]) == 0  # compiled, run and checked against numpy
    assert main(["verify", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "the move of operand 0 keeps the kind, the shape and the other operands: the body is Matmul(1x4x4x4" in out
    assert main(["run", str(bad)]) == 1  # not proved legal, not run
    assert "not proved legal" in capsys.readouterr().err


def test_cli_verify_layout_and_program(tmp_path, capsys):
    assert main(["verify", "--layout", "[1, 0, 1 p(4)]", "--shape", "6x8"]) == 0
    assert main(["verify", "--layout", "[0, 1 p(4)]", "--shape", "6x8"]) == 1
    assert "both map to offset" in capsys.readouterr().out
    p = tmp_path / "f1.json"
    save(figure1(), p)
    assert main(["verify", str(p)]) == 0


@pytest.mark.parametrize(
    "argv,want",
    [
        # issue 56: "[0]" at shape 4x8 was printed as row_major and refuted (exit 1)
        (["--layout", "[0]", "--shape", "4x8"], "--layout [0] is a layout of rank 1"),
        (["--layout", "[0, 1, 2]", "--shape", "4x8"], "--layout [0, 1, 2] is a layout of rank 3"),
        (["--layout", "[0, 0]", "--shape", "4x8"], "but --shape 4x8 has rank 2"),
        # a program and a layout in one run: the program was silently ignored
        (["PROGRAM", "--layout", "row_major", "--shape", "4x8"], "give a program"),
        (["--shape", "4x8"], "--shape is the shape of --layout"),
    ],
)
def test_cli_verify_layout_of_another_rank_or_with_a_program_is_bad_input(tmp_path, capsys, argv, want):
    p = tmp_path / "f1.json"
    save(figure1(), p)
    rc = main(["verify", *(str(p) if a == "PROGRAM" else a for a in argv)])
    out, err = capsys.readouterr()
    assert rc == 2 and not out, (rc, out, err)
    assert len(err.strip().splitlines()) == 1 and err.startswith("morello-asp: error:"), err
    assert want in err, err
    if argv[0] == "--layout":  # the message names both the layout and the shape
        assert argv[1] in err and "4x8" in err
    # a layout of the right rank that is no bijection is still a refutation (exit 1)
    assert main(["verify", "--layout", "[1, 1]", "--shape", "4x8"]) == 1


def test_user_layout_with_padding_is_rejected_when_scheduled():
    with pytest.raises(LegalityError, match="padding"):
        parse_spec("Matmul(8x8x8, f32)").move_param(1, "GL", "[0, 2, 1, 2 p(3)]")


def test_catalog_proofs_are_remembered_only_when_they_succeed(tmp_path, monkeypatch):
    """An engine proves the layout catalog when it starts; a proof that succeeded is kept
    in the cache directory (a marker per layout), one that fails is proved and reported
    every time."""
    from morello_asp.solver.proofs.catalog import prove_catalog_layout_cached

    monkeypatch.setenv("MORELLO_ASP_CACHE", str(tmp_path))
    good = Layout.parse("[0, 1, 1 p(16)]", 2)
    assert prove_catalog_layout_cached(good, 2) == (True, None)
    markers = list((tmp_path / "proofs").iterdir())
    assert len(markers) == 1 and str(good) in markers[0].read_text()
    assert prove_catalog_layout_cached(good, 2) == (True, None)  # from the marker
    bad = Layout.parse("[0, 1 p(4)]", 2, validate=False)  # dim 1 folded modulo 4: aliases
    proved, ob = prove_catalog_layout_cached(bad, 2)
    assert not proved and ob.status == "refuted"
    assert len(list((tmp_path / "proofs").iterdir())) == 1


# ---- what codegen assumes of views (issue 57): verify refutes what codegen refuses ---------
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _codegen_refuses(imp) -> str:
    try:
        imp.to_c()
    except CodegenError as e:
        return str(e)
    return ""


@pytest.mark.slow  # ~10 s: with the slow tests, so the default suite stays under 5 minutes
def test_verify_refutes_the_old_rules_conv_optimum():
    """Issue 57: under the old spatial_split rule the search's optimum for
    Conv(1x16x8x5x5x1x1) moved 8 channels of a one-pixel output tile (25 values apart)
    into a vector register as if adjacent; codegen refused it and verify proved it."""
    imp = load(FIXTURES / "conv_1x1_old_rules.json")
    assert "operand src is contiguous in its spec but its view of out is not" in _codegen_refuses(imp)
    rep = verify(imp)
    assert not rep.ok
    bad = [o for o in rep.obligations if o.status == "refuted"]
    assert any(
        o.what.startswith("Move(1x1x8, L1, VRF): operand src (f32, L1, row_major) is fully contiguous") for o in bad
    ), rep
    # where the wrong claim starts: the split's view of the output (c1), 25 values a channel
    split = "MatmulAccum(1x1x8x16, GL, L1, GL): operand out"
    assert any(o.what.startswith(split) and "25 slots" in o.detail for o in bad)
    # the same program under the fixed rule proves and runs
    fixed = parse_spec(json.loads((FIXTURES / "conv_1x1_old_rules.json").read_text())["program"]["spec"])
    new = fixed.synthesize(db=None)
    assert verify(new).ok and not _codegen_refuses(new)


def _nodes(d: dict):
    yield d
    for v in d.values():
        for x in v if isinstance(v, list) else [v]:
            if isinstance(x, dict) and "spec" in x:
                yield from _nodes(x)


_CLAIM = re.compile(r", c(\d+)(, s(\d+))?\)")
SEARCH: dict[str, Search] = {}


def _mutants(imp):
    """Copies of a program with one node's claim of adjacency or stride made wrong, as a
    wrong rule would: an operand's adjacency (cN) made full, either at that node alone
    or with the node's subtree synthesized again under the wrong claim (its kernels
    then read the view as dense: codegen refuses many), or its stride exponent (sN)
    moved by one."""
    search = SEARCH.setdefault("avx2", Search(get_engine("avx2"), DictMemo()))
    doc = to_json(imp)
    for i, node in enumerate(_nodes(doc["program"])):
        for m in _CLAIM.finditer(node["spec"]):
            s = node["spec"]
            full = s[: m.start()] + ")" + s[m.end() :]
            subs = [(full, False), (full, True)]
            if m.group(3):
                subs.append((s[: m.start(3)] + str(int(m.group(3)) + 1) + s[m.end(3) :], False))
            for text, again in subs:
                mutant = json.loads(json.dumps(doc))
                at = list(_nodes(mutant["program"]))[i]
                if again:
                    at.clear()
                    at.update(to_json(search.build(parse_spec(text, target="avx2")))["program"])
                else:
                    at["spec"] = text
                try:
                    yield f"node {i}{' synthesized again' if again else ''}: {text}", from_json(mutant)
                except Exception:  # a claim the spec language refuses (a stride on a contiguous view)
                    continue


LIMITS = "[16, 16, 1024, 33554432]"
CORPUS = [
    f"(Matmul(1x5x7x9, (f32, GL, col_major), (f32, GL, row_major), (f32, GL, row_major), serial), {LIMITS})",
    f"(Softmax0(9x16, (f32, GL, row_major), (f32, GL, row_major), serial), {LIMITS})",
    f"(Conv(1x16x8x5x5x1x1, (f32, GL, row_major), (f32, GL, row_major), (f32, GL, row_major), serial), {LIMITS})",
]


@pytest.mark.parametrize(
    "text",
    [pytest.param(CORPUS[0], marks=pytest.mark.slow), CORPUS[1], pytest.param(CORPUS[2], marks=pytest.mark.slow)],
    ids=["matmul", "softmax0", "conv"],
)  # matmul ~8 s, conv ~16 s: with the slow tests
def test_verify_refutes_every_mutant_codegen_refuses(text):
    """verify is at least as strict as codegen: a program codegen refuses never proves,
    on the search's programs and on copies with one claim made wrong (verify refutes
    every such copy: it proves each view's claim at every node, where codegen checks
    kernels only)."""
    imp = parse_spec(text, target="avx2").synthesize(db=None)
    assert verify(imp).ok and not _codegen_refuses(imp)
    seen, refused_by_codegen = 0, 0
    for what, mutant in _mutants(imp):
        seen += 1
        refused = _codegen_refuses(mutant)
        rep = verify(mutant)
        assert not (refused and rep.ok), f"{what}: codegen refuses ({refused}) but verify proves it"
        assert not rep.ok, f"{what}: verify proves a wrong claim"
        refused_by_codegen += bool(refused)
    assert seen and refused_by_codegen, (seen, refused_by_codegen)


def test_a_cache_move_of_a_view_whose_layout_pads_at_its_shape_proves():
    """Found by the fuzzer (issue 57): a 1x1x1 tile of a [0, 2, 1, 2 p(16)] rhs moved into
    L1 as it is copies nothing, so no buffer pads; verify refuted it as if the move made
    a 16-slot buffer for one value, and move_param refused it, where the search offers it
    and codegen compiles it. A copy into a layout that pads is still refused."""
    spec = parse_spec(
        "(Matmul(1x1x1x16, (f32, L1, row_major), (f32, GL, [0, 2, 1, 2 p(16)]), (f32, GL, row_major)), "
        "[16, 16, 1024, 33554432])",
        target="avx2",
    )
    tiled = spec.tile([1, 1, 1, 1])
    imp = tiled.subschedule([0], lambda a: a.move_param(1, "L1", "[0, 2, 1, 2 p(16)]")).synthesize_all()
    rep = verify(imp)
    assert rep.ok, rep
    err, tol = imp.compile().check(seed=1)
    assert err <= tol
    with pytest.raises(LegalityError, match="16 slots for 1 values"):
        tiled.subschedule([0], lambda a: a.move_param(1, "GL", "[0, 1, 2, 2 p(16)]"))


# ---- alignment (issue 57): what codegen's aligned variants rely on, what specs claim -------
def test_every_aligned_access_codegen_emits_is_proved_and_a_wrong_one_refuted(monkeypatch):
    """codegen picks a kernel's aligned variant (_mm256_load_ps) where it finds the view
    aligned; verify proves each such access with z3, not trusting codegen: with a codegen
    that takes every view as aligned, the loads from the program's parameters (which a
    caller passes aligned only to their element) are refuted."""
    imp = load(FIXTURES / "matmul_1024_default.json")
    assert "_mm256_load_ps(" in imp.to_c()
    rep = verify(imp)
    mine = [o for o in rep.obligations if "aligned access" in o.what]
    assert rep.ok and mine, rep
    assert mine[0].what.startswith("Move(1x1x16, L1, VRF): kernel VectorAssign's aligned access to src"), mine
    assert mine[0].what.endswith("is 32-byte aligned in lrhs")
    monkeypatch.setattr(Emitter, "aligned", lambda self, v, nbytes, coord=None: True)
    assert "_mm256_store_ps(" in imp.to_c()
    bad = [o for o in verify(imp).obligations if o.status == "refuted"]
    assert bad and all("aligned access" in o.what for o in bad), bad
    assert "buffer out (a parameter) is only known to be 4-byte aligned" in bad[0].detail


def test_an_aligned_access_at_an_odd_row_is_refuted_with_the_loop_counter():
    """An allocated (64-byte aligned) 4x12 f32 buffer: a 32-byte load of row k starts
    48 * k bytes in, which k = 1 breaks."""
    ts = parse_spec("(Zero(1x4x12, (f32, L1, row_major)), [16, 16, 1024, 33554432])").operands[0]
    em = _ViewWalk(get_ctarget("avx2"))
    buf = Buffer("lb", (1, 4, 12), ts, False)
    em.env["k0"] = VarRange(0, 3, 1)
    em.rely_aligned("a load", View(buf, (Const(0), Var("k0"), Const(0)), (1, 1, 8), ts), 32, [(0, 0, 0)])
    em.env["k0"] = VarRange(0, 2, 2)  # even rows only: 96 bytes apart
    em.rely_aligned("a load of even rows", View(buf, (Const(0), Var("k0"), Const(0)), (1, 1, 8), ts), 32, [(0, 0, 0)])
    odd, even = em.claims.values()
    assert odd.status == "refuted" and "its value at slot 12 (at k0 = 1) is 16 bytes past a 32-byte" in odd.detail
    assert even.status == "proved", even


# A rule file that keeps a tile's alignment whatever the tile's steps (tile.lp keeps it
# only for whole cache lines of a contiguous parent): the claim codegen never reads and
# verify now proves where a rule file declares track_alignment/0.
WRONG_ALIGNMENT = (
    "track_alignment.\ntile_caligned(S, A, M, Op, 1) :- tile_child(S, A, M), spec_operand(S, Op, _, _, 1, _, _, _).\n"
)


@pytest.mark.slow  # ~8 s
def test_a_rule_that_claims_alignment_wrongly_is_refuted(tmp_path):
    """Under track_alignment every view whose spec claims alignment (no `ua`) must
    start on a cache line; the shipped rules' claims prove, a rule file that keeps
    alignment for any tile is refuted at a tile 32 bytes past a line."""
    right, wrong = tmp_path / "tracked.lp", tmp_path / "wrong.lp"
    right.write_text("track_alignment.\n")
    wrong.write_text(WRONG_ALIGNMENT)
    # (8x8x8's program since the chain of sums is priced loops k outside the rows of its
    # register tile, and takes no unaligned view: 8x16x8's still does)
    spec = "Matmul(8x16x8, f32)"
    good = synthesize(spec, db=None, rules=[str(right)])
    rep = verify(good, [str(right)])
    claims = [o for o in rep.obligations if "is aligned to a 64-byte line" in o.what]
    assert rep.ok and claims, rep
    assert any("ua" in o.what for o in rep.obligations)  # the tracked search has unaligned views
    bad = synthesize(spec, db=None, rules=[str(wrong)])
    rep = verify(bad, [str(wrong)])
    refuted = [o for o in rep.obligations if o.status == "refuted"]
    assert refuted and all("is aligned to a 64-byte line" in o.what for o in refuted), rep
    assert any("bytes past a 64-byte boundary" in o.detail for o in refuted)
    # without track_alignment the same claims say nothing, and are not proved
    assert not any("64-byte line" in o.what for o in verify(bad, ()).obligations)


# ---- vector loads and stores (issue 57): each vector's values adjacent, in order ---------
# avx2's VectorAssign rule without contiguous/2: a rule file that lets the kernel move any
# operand. A row of a col-major rhs (1x1x8, c0: its values 8 apart) is then loaded as if
# they were adjacent; codegen writes the program, and it computes the wrong product.
VECTOR_ANY = (
    "kernel_applies(S, vector_assign) :- spec(S, move), same_dtype(S), not scalar(S, 0),\n"
    "    spec_operand(S, 0, _, L0, _, _, V0, Lay), spec_operand(S, 1, _, L1, _, _, V1, Lay),\n"
    "    avx2_vassign_side(L0, L1), V = V0 + V1, V0 * V1 == 0, V > 0, spec_opvol(S, 0, Vol), Vol \\ V == 0.\n"
)
COL_MAJOR_RHS = (
    "(Matmul(8x8x8, (f32, GL, row_major), (f32, GL, col_major), (f32, GL, row_major)), [16, 16, 1024, 33554432])"
)


@pytest.mark.slow  # ~15 s: with the slow tests, so the default suite stays under 5 minutes
def test_a_vector_kernel_on_an_operand_whose_values_are_not_adjacent_is_refuted(tmp_path):
    """Every vector a kernel template loads or stores ({X_v}) is proved to be its values
    in order at consecutive offsets, for every value of the loop counters: only the
    kernels' rules (contiguous operands) said so. A rule file that applies VectorAssign
    to a c0 view is refuted, naming the view; without it the same spec proves."""
    rules = tmp_path / "vector_any.lp"
    rules.write_text(VECTOR_ANY)
    bad = synthesize(COL_MAJOR_RHS, db=None, rules=[str(rules)])
    err, tol = bad.compile().check()
    assert err > tol  # codegen wrote it, and it is wrong
    refuted = [o for o in verify(bad, [str(rules)]).obligations if o.status == "refuted"]
    assert len(refuted) == 1, refuted
    assert refuted[0].what == (
        "Move(1x1x8, L1, VRF): kernel VectorAssign's vectors of src (f32, L1, row_major, c0) are runs of 8 "
        "adjacent values in rhs"
    )
    assert (
        refuted[0].detail == "its vector 0's value 1 (at [0, 0, 1]) is 8 slots from its value 0 (at [0, 0, 0]), not 1"
    )
    good = verify(synthesize(COL_MAJOR_RHS, db=None))
    assert good.ok, good


@pytest.mark.parametrize(
    "program",
    [
        lambda: load(FIXTURES / "matmul_1024_default.json"),
        lambda: load(FIXTURES / "register_resident_8x8x8.json"),
        lambda: synthesize("Conv(1x16x8x5x5x1x1, f32)", db=None),
    ],
    ids=["matmul_1024", "register_resident", "conv"],
)
def test_the_vectors_of_legal_programs_prove(program):
    """The shipped rules' programs (memory views and register views alike) prove."""
    rep = verify(program())
    assert rep.ok and any("adjacent values in" in o.what for o in rep.obligations), rep


def test_a_vector_that_crosses_a_pack_at_some_iteration_is_refuted_with_the_loop_counter():
    """Where the offsets' terms do not cancel (packs), z3 decides: 4 values along a
    dimension packed by 4, from a column stepping by 2, cross into the next pack at
    k0 = 2; stepping by 4 they never do."""
    ts = parse_spec("(Zero(1x2x16, (f32, L1, [0, 2, 1, 2 p(4)])), [16, 16, 1024, 33554432])").operands[0]
    em = _ViewWalk(get_ctarget("avx2"))
    buf = Buffer("pb", (1, 2, 16), ts, False)
    run = [[(0, 0, i) for i in range(4)]]
    for step in (2, 4):
        em.env["k0"] = VarRange(0, 12, step)
        em.rely_vector(f"a load by {step}", View(buf, (Const(0), Const(0), Var("k0")), (1, 1, 4), ts), run, 4)
    by2, by4 = em.claims.values()
    assert by2.status == "refuted", by2
    m = re.fullmatch(
        r"its vector 0's value (\d) \(at \[0, 0, \d\]\) is \d+ slots from its value 0 \(at \[0, 0, 0\]\) "
        r"\(at k0 = (\d+)\), not \d",
        by2.detail,
    )
    assert m and int(m.group(2)) % 4 == 2 and int(m.group(1)) >= 4 - int(m.group(2)) % 4, by2.detail
    assert by4.status == "proved", by4
