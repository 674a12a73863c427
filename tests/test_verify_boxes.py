"""Symbolic proofs over memo boxes (`db verify`): a real table proves; boxes corrupted on
purpose are refuted with a counterexample that is a spec of the box and really fails;
hand-built boxes spanning several shapes prove."""

from __future__ import annotations

import dataclasses
import json
from fractions import Fraction
from itertools import product
from math import prod

import pytest
import z3

from morello_asp import parse_spec
from morello_asp.cli import main
from morello_asp.codegen.ctarget import get_ctarget
from morello_asp.errors import CodegenError
from morello_asp.ir import loop_regions
from morello_asp.layout import Layout
from morello_asp.solver.memo.coords import from_coords, to_coords
from morello_asp.solver.memo.sqlite import open_memo
from morello_asp.solver.memo.table import Decision
from morello_asp.solver.proofs.box_space import BoxSpace
from morello_asp.solver.proofs.boxes import sym_layout, sym_regions
from morello_asp.solver.proofs.verify import prove_decision_views, verify, verify_table
from morello_asp.solver.search.engine import Action, get_engine
from morello_asp.synthesis import synthesize
from morello_asp.target import get_target

LEVELS = tuple(get_target().level_names)

FULL = "[16, 16, 1024, 33554432]"


class Boxes:
    """A table given as its boxes: what verify_table reads (RectMemo.boxes())."""

    def __init__(self, rows):
        self.rows = [tuple(r) for r in rows]

    def boxes(self):
        return iter(self.rows)


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    path = tmp_path_factory.mktemp("db") / "m248.db"
    imp = synthesize("Matmul(2x4x8, f32)", db=str(path))
    err, tol = imp.compile().check()
    assert err <= tol
    memo = open_memo(path, get_engine())
    rows = list(memo.boxes())
    memo.close()
    return path, rows


def in_box(spec, key, lo, hi) -> bool:
    k, p = to_coords(spec, LEVELS)
    return k == key and all(a <= x <= b for a, x, b in zip(lo, p, hi))


def refuted(rep, words):
    return [o for o in rep.obligations if o.status == "refuted" and words in o.what]


def test_synthesized_table_proves_through_the_cli(table, capsys):
    path, rows = table
    assert main(["db", "verify", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"{len(rows)} boxes" in out and " 0 refuted, 0 unknown" in out


def test_widened_tile_box_is_refuted_with_a_spec_the_tile_does_not_fit(table):
    _, rows = table
    for key, seq, lo, hi, d in rows:  # noqa: B007  (the loop finds them)
        a = d.action
        if a is None or a.name != "tile" or "shape" in json.loads(key):
            continue
        fixed = [i for i, t in enumerate(a.args[0]) if t > 1 and lo[i] == hi[i] == t.bit_length() - 1]
        if fixed:
            break
    else:
        pytest.fail("no tile box to corrupt")
    i = fixed[0]
    wide = list(lo)
    wide[i] -= 1  # now also holds shapes half as big along dimension i
    rep = verify_table(Boxes([(key, seq, tuple(wide), hi, d)]))
    [ob] = refuted(rep, "the tile fits every shape")
    cx = ob.counterexample
    assert in_box(cx, key, wide, hi) and cx.shape[i] < a.args[0][i]
    assert refuted(rep, "the rule files derive it")  # and clingo agrees it does not apply there


def test_reduction_split_in_a_non_accumulating_matmul_is_refuted(table):
    _, rows = table
    key, seq, lo, hi, d = next(
        r
        for r in rows
        if r[4].action is not None
        and r[4].action.name == "tile"
        and json.loads(r[0])["kind"] == "Matmul"
        and r[2][2] > 0
    )
    tile = list(d.action.args[0])
    tile[2] = 1  # split k
    bad = dataclasses.replace(d, action=Action("tile", (tuple(tile), False)))
    rep = verify_table(Boxes([(key, seq, lo, hi, bad)]))
    [ob] = refuted(rep, "reductions split only")
    assert "splits reduction dimension 2" in ob.detail and ob.counterexample.shape[2] > 1
    assert in_box(ob.counterexample, key, lo, hi)


def test_widened_packed_move_is_refuted_at_a_shape_the_pack_does_not_divide(table):
    _, rows = table
    for key, seq, lo, hi, d in rows:  # noqa: B007  (the loop finds them)
        a = d.action
        if (
            a is not None
            and a.name == "move"
            and a.args[2].is_packed
            and a.args[1] == "VRF"
            and all(o.level != "VRF" for o in from_coords(key, lo).operands)
        ):
            break  # (a VRF operand's vector size would keep n >= 8 on its own)
    else:
        pytest.fail("no packed move to corrupt")
    wide = list(lo)
    wide[3] = 0  # n from 1: the p(8) pack no longer divides it
    rep = verify_table(Boxes([(key, seq, tuple(wide), hi, d)]), rules=False)
    [ob] = refuted(rep, "is a bijection onto its buffer")
    cx = ob.counterexample
    shape = cx.operand_shapes[a.args[0]]
    assert in_box(cx, key, wide, hi)
    assert a.args[2].buffer_volume(shape) != prod(shape)  # padding, for real
    [vec] = refuted(rep, "divides every volume")
    assert prod(vec.counterexample.operand_shapes[a.args[0]]) % a.args[3]


def test_peak_over_the_box_limits_is_refuted(table):
    _, rows = table
    key, seq, lo, hi, d = next(
        r for r in rows if r[4].action is not None and r[4].action.name == "move" and r[4].action.args[1] == "L1"
    )
    peak = list(d.peak)
    peak[2] = lo[-2] + 1  # one L1 line more than the box's lowest limit
    rep = verify_table(Boxes([(key, seq, lo, hi, dataclasses.replace(d, peak=tuple(peak)))]), rules=False)
    [ob] = refuted(rep, "within every limit vector")
    assert ob.counterexample.limits[2] < peak[2] and in_box(ob.counterexample, key, lo, hi)


def test_cli_lists_refutations_and_fails(table, tmp_path, capsys):
    path, rows = table
    out = tmp_path / "rows.jsonl"
    assert main(["db", "export", str(path), str(out)]) == 0
    lines = out.read_text().splitlines()
    for j, line in enumerate(lines[1:], 1):
        o = json.loads(line)
        if o["value"]["a"] and o["value"]["a"]["rewrite"] == "tile" and "shape" not in json.loads(o["key"]):
            t = o["value"]["a"]["tile"]
            i = next((i for i, x in enumerate(t) if x > 1 and o["lo"][i] == o["hi"][i]), None)
            if i is not None:
                o["lo"][i] -= 1
                lines[j] = json.dumps(o)
                break
    out.write_text("\n".join(lines) + "\n")
    bad = tmp_path / "bad.db"
    assert main(["db", "import", str(bad), str(out)]) == 0
    capsys.readouterr()
    assert main(["db", "verify", str(bad), "-q"]) == 1
    text = capsys.readouterr().out
    assert "[REFUTED]" in text and "the tile fits every shape" in text and "counterexample (" in text


def test_cli_errors_are_messages(tmp_path, capsys):
    junk = tmp_path / "junk.db"
    junk.write_text("not sqlite")
    assert main(["db", "verify", str(junk)]) == 2
    assert main(["db", "verify", str(tmp_path / "none.db")]) == 2
    err = capsys.readouterr().err
    assert "is not a memo table" in err and "no memo table" in err


# ---- boxes spanning several shapes, built by hand --------------------------------------
def box(text, dims, action, peak, limits_lo):
    """The box of `text`'s spec with dimension axes widened to `dims` {axis: (lo, hi)
    exponents} and limits from `limits_lo` up to the spec's."""
    key, p = to_coords(parse_spec(text), LEVELS)
    lo, hi = list(p), list(p)
    for i, (a, b) in dims.items():
        lo[i], hi[i] = a, b
    n = len(limits_lo)
    lo[-n:] = limits_lo
    return key, 1, tuple(lo), tuple(hi), Decision(action, Fraction(1), tuple(peak), 1)


def test_hand_built_multi_shape_boxes_prove():
    p8 = Layout.parse("[0, 2, 1, 2 p(8)]", 3)
    rows = [
        # m in 8..32: one loop over 4-row tiles
        box(
            f"(MatmulAccum(1x8x8x8, (f32, GL, row_major), (f32, GL, row_major), (f32, GL, row_major), serial), {FULL})",
            {1: (3, 5)},
            Action("tile", ((1, 4, 8, 8), False)),
            (0, 0, 0, 0),
            (0, 0, 0, 0),
        ),
        # n in 8..32: pack rhs into 8-wide panels in L1 (n/2 lines, at most 16); m = 2:
        # the rules repack only an operand that is reused (relayout_pays/2)
        box(
            f"(MatmulAccum(1x2x8x8, (f32, L1, row_major), (f32, GL, row_major), (f32, L1, row_major), serial), {FULL})",
            {3: (3, 5)},
            Action("move", (1, "L1", p8, 0)),
            (0, 0, 16, 0),
            (0, 0, 16, 0),
        ),
        # rows in 1..4: whole-vector copies into registers
        box(
            f"(Move(1x1x8, (f32, L1, row_major), (f32, VRF, row_major, v8), serial), {FULL})",
            {1: (0, 2)},
            Action("select", ("VectorAssign",)),
            (0, 0, 0, 0),
            (0, 0, 0, 0),
        ),
        box(
            f"(Zero(1x1x8, (f32, L1, row_major), serial), {FULL})",
            {1: (0, 4)},
            Action("select", ("MemsetZero",)),
            (0, 0, 0, 0),
            (0, 0, 0, 0),
        ),
    ]
    rep = verify_table(Boxes(rows))
    assert rep.ok, str(rep)
    rules = [o for o in rep.obligations if "rule files" in o.what]
    assert [o.detail for o in rules] == ["3 classes", "3 classes", "3 classes", "5 classes"]
    assert any("bijection" in o.what for o in rep.obligations)
    assert any("cover every point exactly once" in o.what for o in rep.obligations)


def test_dropping_a_boundary_region_breaks_coverage(monkeypatch):
    row = box(
        f"(MatmulAccum(1x8x8x8, (f32, GL, row_major), (f32, GL, row_major), (f32, GL, row_major), serial), {FULL})",
        {1: (2, 4)},
        Action("tile", ((1, 3, 8, 8), False)),
        (0, 0, 0, 0),
        (0, 0, 0, 0),
    )
    assert verify_table(Boxes([row]), rules=False).ok  # m in 4..16, tiles of 3: boundary rows
    from morello_asp.solver.proofs import boxes as verify_boxes  # the tile family states coverage with its sym_regions

    monkeypatch.setattr(
        verify_boxes, "sym_regions", lambda dims, tile: [r for r in sym_regions(dims, tile) if r.mask != 2]
    )
    rep = verify_table(Boxes([row]), rules=False)
    [ob] = refuted(rep, "exactly once")  # the rows left over by m % 3
    assert "covered by nothing" in ob.detail and ob.counterexample.shape[1] % 3


# ---- the symbolic terms agree with the IR at concrete shapes -----------------------------
@pytest.mark.parametrize("shape,tile", [((7, 8, 5), (3, 8, 2)), ((4, 6), (4, 4)), ((1, 16, 9, 8), (1, 4, 2, 8))])
def test_sym_regions_are_loop_regions(shape, tile):
    regions = [
        r
        for r in sym_regions(list(shape), tile)
        if z3.is_true(z3.simplify(z3.BoolVal(True) if r.present is True else r.present))
    ]
    got = [
        (
            tuple(z3.simplify(z3.IntVal(0) + o).as_long() for o in r.offset),
            tuple(z3.simplify(z3.IntVal(0) + c).as_long() for c in r.child),
        )
        for r in regions
    ]
    assert got == [(o, s) for o, s, _ in loop_regions(shape, tile)]


@pytest.mark.parametrize(
    "text,shape", [("[0, 2, 1, 2 p(8)]", (1, 3, 16)), ("[0, 1, 1 oe(8)]", (3, 16)), ("col_major", (2, 3, 4))]
)
def test_sym_layout_is_buffer_expr(text, shape):
    lay = Layout.parse(text, len(shape))
    dims = [z3.Int(f"D{i}") for i in range(len(shape))]
    xs = [z3.Int(f"x{i}") for i in range(len(shape))]
    off, size = sym_layout(lay, dims, xs)
    names = [f"d{i}" for i in range(len(shape))]
    expr = lay.buffer_expr(shape, names)
    at = [(d, z3.IntVal(n)) for d, n in zip(dims, shape)]
    assert z3.simplify(z3.substitute(size, *at)).as_long() == lay.buffer_volume(shape)
    for c in product(*(range(n) for n in shape)):
        env = at + [(x, z3.IntVal(v)) for x, v in zip(xs, c)]
        assert z3.simplify(z3.substitute(off, *env)).as_long() == expr.eval(dict(zip(names, c)))


def test_box_space_decodes_points_of_the_box():
    key, _, lo, hi, _ = box(
        f"(Zero(1x1x8, (f32, L1, row_major), serial), {FULL})", {1: (0, 4)}, None, (0,) * 4, (0,) * 4
    )
    sp = BoxSpace(key, lo, hi, get_engine().target)
    assert sp.dim_values[1] == [1, 2, 4, 8, 16] and sp.n_classes() == 5
    assert [from_p.shape for from_p in (sp.spec_at(p) for p in sp.classes())] == [(1, m, 8) for m in (1, 2, 4, 8, 16)]


# issue 57's bug, as a user rule file: every operand with some contiguousness has its
# channels adjacent in spatial_split's view (rules/spatial_split.lp before ddd68a9)
OLD_SPATIAL = "spatial_chan_adj(S, Op) :- action(S, spatial_split), spec_operand(S, Op, _, _, _, C, _, _), C > 0.\n"


@pytest.mark.slow  # ~11 s: with the slow tests, so the default suite stays under 5 minutes
def test_a_box_whose_views_do_not_back_its_childrens_claims_is_refuted(tmp_path, capsys):
    """db verify proves what codegen assumes of the views a box's decision builds, as
    verify does for programs (prove_views): with issue 57's spatial_split rule back, the
    table of Conv(1x8x4x2x2x1x1) holds spatial_split boxes whose child view claims c1 of
    channels h * w values apart (codegen refused the program); db verify refutes them,
    naming the claim, two values that are not adjacent and a spec of the box. The table
    the shipped rules build proves."""
    from morello_asp.errors import CodegenError

    bad = tmp_path / "old_spatial.lp"
    bad.write_text(OLD_SPATIAL)
    spec = "Conv(1x8x4x2x2x1x1, f32)"
    old, new = tmp_path / "old.db", tmp_path / "new.db"
    imp = synthesize(spec, db=str(old), rules=[str(bad)])
    with pytest.raises(CodegenError, match="a rule gave it the wrong contiguousness"):
        imp.to_c()
    assert main(["db", "verify", str(old), "--rules", str(bad)]) == 1
    out = capsys.readouterr().out
    views = [ln for ln in out.splitlines() if ln.startswith("[REFUTED]") and "the views it builds back" in ln]
    assert views and all("spatial_split()" in ln for ln in views), out
    assert "claims adjacent; counterexample (ConvAccum(" in views[0], views[0]
    imp = synthesize(spec, db=str(new))
    err, tol = imp.compile().check()
    assert err <= tol
    assert main(["db", "verify", str(new)]) == 0
    assert " 0 refuted, 0 unknown" in capsys.readouterr().out


# ---- alignment and operands claiming no adjacency (issue 57) ------------------------------
def test_a_box_whose_child_claims_alignment_wrongly_is_refuted(tmp_path, capsys):
    """Under track_alignment/0 db verify proves each child's claim of alignment in the
    views a box's decision builds, taking the box's own operands' claims (an operand
    claiming alignment starts on a line): the shipped tile rule's claims prove, a rule
    file that keeps alignment for any tile is refuted at its tiles (the same rule file
    verify refutes the program of: tests/test_verify.py)."""
    right, wrong = tmp_path / "tracked.lp", tmp_path / "wrong.lp"
    right.write_text("track_alignment.\n")
    wrong.write_text(
        "track_alignment.\n"
        "tile_caligned(S, A, M, Op, 1) :- tile_child(S, A, M), spec_operand(S, Op, _, _, 1, _, _, _).\n"
    )
    for rules, code in ((right, 0), (wrong, 1)):
        db = tmp_path / f"{rules.stem}.db"
        synthesize("Matmul(4x4x4, f32)", db=str(db), rules=[str(rules)])
        assert main(["db", "verify", str(db), "--rules", str(rules)]) == code
        out = capsys.readouterr().out
        bad = [ln for ln in out.splitlines() if ln.startswith("[REFUTED]")]
        assert bool(bad) == bool(code), out
    assert all("tile(" in ln and "is aligned to a 64-byte line" in ln for ln in bad), bad
    assert any("bytes past a 64-byte boundary; counterexample (" in ln for ln in bad), bad


# A rule file that gives a tile of an operand claiming no adjacency (c0) full
# contiguity: true of a plain view of a row-major buffer, false of the views of
# spatial_split's strided children and of copies that step over values.
C0_TILE = (
    "tile_ccontig(S, A, M, Op, NP) :- tile_child(S, A, M), spec_npdims(S, Op, NP), "
    "spec_operand(S, Op, _, _, _, 0, _, _).\n"
)


@pytest.mark.slow  # ~9 s
def test_a_c0_operand_is_proved_at_views_with_no_adjacent_values(tmp_path, capsys):
    """A box's operand claiming c0 lies in db verify in a view with no two values
    adjacent (every k-th position of a larger buffer): before, it kept its exact buffer,
    where it is contiguous, and the table below proved though codegen refuses its
    program. Now its tile boxes are refuted, naming the view."""
    bad = tmp_path / "c0_tile.lp"
    bad.write_text(C0_TILE)
    db = tmp_path / "conv.db"
    imp = synthesize("Conv(1x8x4x2x2x1x1, f32)", db=str(db), rules=[str(bad)])
    with pytest.raises(CodegenError, match="a rule gave it the wrong contiguousness"):
        imp.to_c()
    assert not verify(imp, [str(bad)]).ok
    assert main(["db", "verify", str(db), "--rules", str(bad)]) == 1
    out = capsys.readouterr().out
    views = [ln for ln in out.splitlines() if ln.startswith("[REFUTED]")]
    assert views and all("tile(" in ln and "the views it builds back" in ln for ln in views), out
    assert any("one position in 2 along dimension" in ln and "row_major, c0)" in ln for ln in views), views


def test_a_packed_operand_is_proved_at_every_origin_in_its_packs():
    """Where a layout has packs, which values of a view are adjacent depends on where
    it starts in them: an operand claiming c1 of [0, 2, 1, 1 p(2), 2 p(2)] may start at
    row 1 of a pack of two rows, and there a child claiming full contiguity of a row
    (true at row 0) is refuted. At its exact buffer alone it proved."""
    spec = parse_spec("(Zero(1x2x6, (f32, L1, [0, 2, 1, 1 p(2), 2 p(2)], c1)), [16, 16, 1024, 33554432])")
    spec = spec.without_limits
    engine = get_engine()
    exp = next(e for e in engine.expand(spec) if str(e.action) == "tile([1, 1, 6])")
    child = exp.children[0]
    op = child.operands[0]
    assert op.contig < op.layout.full_contiguity()  # the rules' claim: not a whole row
    wrong = dataclasses.replace(child, operands=(dataclasses.replace(op, contig=op.layout.full_contiguity()),))
    wrong_exp = dataclasses.replace(exp, children=(wrong, *exp.children[1:]))
    ct = get_ctarget(engine.target)
    assert prove_decision_views(spec, exp, ct) is None
    ob = prove_decision_views(spec, wrong_exp, ct)
    assert ob is not None and ob.status == "refuted", ob
    assert "is fully contiguous in out (out in a 1x4x9 buffer at origin [0, 1, 0])" in ob.what, ob


# ---- vector loads and stores (issue 57) ----------------------------------------------------
@pytest.mark.slow  # ~7 s
def test_a_box_whose_vector_kernel_takes_an_operand_with_no_adjacent_values_is_refuted(tmp_path, capsys):
    """db verify proves each vector a box's kernel loads or stores ({X_v}) adjacent and in
    order, in the views it places the box's operands in: a rule file applying VectorAssign
    to operands claiming c0 (tests/test_verify.py's VECTOR_ANY) is refuted at its Move boxes
    (a c0 operand one position in 2 of its buffer, a c1 one in a buffer one longer); the
    shipped rules' table of the same spec proves."""
    from test_verify import VECTOR_ANY  # tests/ is on sys.path

    rules = tmp_path / "vector_any.lp"
    rules.write_text(VECTOR_ANY)
    spec = "(Matmul(1x8x8, (f32, GL, row_major), (f32, GL, col_major), (f32, GL, row_major)), [16, 16, 1024, 33554432])"
    for extra, code in (([], 0), ([str(rules)], 1)):
        db = tmp_path / f"t{len(extra)}.db"
        synthesize(spec, db=str(db), rules=extra)
        assert main(["db", "verify", str(db), *(["--rules", *extra] if extra else [])]) == code
        out = capsys.readouterr().out
        bad = [ln for ln in out.splitlines() if ln.startswith("[REFUTED]")]
        assert bool(bad) == bool(code), out
    assert all("select(VectorAssign)" in ln and "kernel VectorAssign's vectors of src" in ln for ln in bad), bad
    assert any(
        "vectors of src (f32, L1, row_major, c0) are runs of 8 adjacent values in src (src in a 1x1x15 buffer, one "
        "position in 2 along dimension 2): its vector 0's value 1 (at [0, 0, 1]) is 2 slots from its value 0" in ln
        for ln in bad
    ), bad
