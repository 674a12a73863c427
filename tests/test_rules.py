"""Logic-file unit tests: clingo on encodings/synth.lp + the avx2 target with small fact fixtures."""

from __future__ import annotations

from pathlib import Path

import clingo
import pytest

from morello_asp import parse_spec
from morello_asp.errors import RuleError
from morello_asp.solver.search.engine import Engine
from morello_asp.solver.search.facts import spec_facts

ENGINE = Engine()
TARGET = ENGINE.target


def solve(specs, extra=()):
    """Ground and solve synth.lp + target with spec_facts for each spec; return atoms as strings."""

    ctl = clingo.Control(["--warn=none", "--models=1"])
    for f in ENGINE.files:
        ctl.load(str(f))
    facts = list(ENGINE._catalog_facts)
    for i, s in enumerate(specs):
        facts += spec_facts(i, s, TARGET, ENGINE.ids)
    facts += list(extra)
    ctl.add("base", [], "\n".join(facts))
    ctl.ground([("base", [])])
    out = []
    ctl.solve(on_model=lambda m: out.extend(str(a) for a in m.symbols(shown=True)))
    return set(out)


ACCUM = (
    "(MatmulAccum(1x1x1x8, (f32, RF, row_major), (f32, VRF, row_major, v8), "
    "(f32, VRF, row_major, v8), serial), [64, 1024, 32768, 1073741824])"
)


def test_broadcast_vec_mult_add_applies_with_cost_3():
    atoms = solve([parse_spec(ACCUM)])
    assert "action(0,select(broadcast_vec_mult_add))" in atoms, sorted(atoms)
    assert "kernel_cost(0,broadcast_vec_mult_add,3)" in atoms, sorted(a for a in atoms if "kernel" in a)


def test_a_broadcast_from_l1_costs_what_one_from_a_register_does():
    # vbroadcastss from memory is one load: the row of a 6 x 16 block must not pay lhs's
    # m(t) on top of the broadcast (that priced the 2 x 32 block below it; docs/default_matmul.md "A
    # broadcast costs one load"). 2 * (16 / 8) + 1 for lhs in RF and in L1 alike.
    wide = ACCUM.replace("1x1x1x8", "1x1x1x16")
    atoms = solve([parse_spec(wide), parse_spec(wide.replace("(f32, RF, row_major)", "(f32, L1, row_major)"))])
    for s in (0, 1):
        assert f"kernel_cost({s},broadcast_vec_mult_add,5)" in atoms, sorted(a for a in atoms if "kernel_cost" in a)


def test_requested_vector_move_on_volume_4_is_bad_with_reason():
    # a Move of operand 2 (volume 1x2x2 = 4) into VRF with vector size 8: the logic files
    # reject it and, because it was requested, show the reason.  (Memory limits are applied
    # in Python by Engine._apply_limits, not in the logic files, so no memory reason here.)
    spec = parse_spec(
        "(Matmul(1x2x2x2, (f32, L1, row_major), (f32, L1, row_major), (f32, L1, row_major), serial), "
        "[64, 1024, 32768, 1073741824])"
    )
    lid = ENGINE.ids.id(spec.operands[2].layout)
    atoms = solve([spec], [f"requested(0,move(2,vrf,{lid},8))."])
    bad = [a for a in atoms if a.startswith("bad(0,move(2,vrf")]
    assert any("vector size does not divide" in a for a in bad), sorted(atoms)
    assert f"action(0,move(2,vrf,{lid},8))" not in atoms


def test_tile_actions_for_matmul_skip_the_reduction_dim():
    atoms = solve([parse_spec("Matmul(8x8x8, f32)")])
    tiles = {a for a in atoms if a.startswith("action(0,tile1(")}
    assert "action(0,tile1(1,4,0))" in tiles and "action(0,tile1(3,2,0))" in tiles
    assert not any(a.startswith("action(0,tile1(2,") for a in tiles)  # k is a reduction dim
    assert "action(0,to_accum)" in atoms
    # A tile's child is its parent's spec with the dimensions the tile cuts stated.
    assert "child_like(0,tile1(1,4,0),0)" in atoms and "child_dim(0,tile1(1,4,0),0,1,4)" in atoms
    assert not any(a.startswith("child_dim(0,tile1(1,4,0),0,3,") for a in atoms)


def test_syntax_error_in_user_rule_file_names_file_and_line(tmp_path):
    p = tmp_path / "broken.lp"
    p.write_text("% fine\nforbid(S, A) :- cand(S, A)\n")
    with pytest.raises(RuleError) as e:
        Engine(rules=(p,))
    # the rule on line 2 lacks its final '.', which clingo notices at EOF (line 3)
    assert "broken.lp:3:" in str(e.value) and "syntax error" in str(e.value), str(e.value)


def test_forbid_removes_to_accum(tmp_path):
    spec = parse_spec("Matmul(8x8x8, f32)")
    assert any(
        x.action.text().startswith("to_accum") or "to_accum" in x.action.text().lower() for x in ENGINE.expand(spec)
    )
    p = tmp_path / "no_accum.lp"
    p.write_text("forbid(S, A) :- cand(S, A), A = to_accum.\n")
    exps = Engine(rules=(p,)).expand(spec)
    assert exps and not any("to_accum" in x.action.text().lower() or "toaccum" in x.action.text().lower() for x in exps)


def test_relayouts_offered_only_to_the_operands_the_catalog_names(tmp_path):
    """By default only the matmul rhs may be repacked (relayout_operand/2 in layouts.lp);
    a user's rule file widens it to the lhs without any Python change."""
    spec = parse_spec("Matmul(8x16x16, f32)")

    def packed_ops(engine):
        return {e.action.args[0] for e in engine.expand(spec) if e.action.name == "move" and e.action.args[2].is_packed}

    assert packed_ops(ENGINE) == {1}
    p = tmp_path / "pack_lhs.lp"
    p.write_text("relayout_operand(matmul, 0).\n")
    assert packed_ops(Engine(rules=(p,))) == {0, 1}


def test_relayouts_and_cast_layouts_only_for_reused_operands(tmp_path):
    """relayout_pays/2: the rhs of a matvec (m = 1, each weight read once) gets no
    packed copy and no odd-even cast copy; with m = 3 it gets both; the lhs (reused
    along n) keeps its odd-even cast; a rule file brings every relayout back."""
    lim = "[16, 16, 1024, 33554432]"

    def copies(engine, m):
        spec = parse_spec(
            f"(Matmul(1x{m}x32x16, (bf16, GL, row_major), (bf16, GL, row_major), (f32, GL, row_major)), {lim})"
        )
        return {
            (e.action.args[0], str(e.action.args[2]))
            for e in engine.expand(spec)
            if e.action.name == "move" and e.action.args[1] != "VRF" and e.action.args[2].is_packed
        }

    oe = "[0, 1, 2, 2 oe(16)]"
    vec = copies(ENGINE, 1)
    assert (0, oe) in vec and not {c for c in vec if c[0] == 1}, vec
    mat = copies(ENGINE, 3)
    assert (1, oe) in mat and (1, "[0, 2, 1, 2 p(16)]") in mat, mat
    p = tmp_path / "all.lp"
    p.write_text("relayout_pays(S, Op) :- spec_operand(S, Op, _, _, _, _, _, _).\n")
    assert copies(Engine(rules=(p,)), 1) == mat | {(0, oe)}


def test_a_catalog_layout_that_aliases_is_rejected_when_loaded(tmp_path):
    """Layouts from logic files are proved by z3 as the engine loads them: one that
    forgets the rows (dimension 1) maps every row of a column to one offset."""
    p = tmp_path / "bad_layout.lp"
    p.write_text("layout_cand(3, (pd(0,dyn,0), pd(2,dyn,0), pd(2,pack,8)), 3).\n")
    with pytest.raises(RuleError, match="layout_cand offers .* (both map|outside|padding)"):
        Engine(rules=(p,))


def test_the_catalog_is_remembered_under_the_hash_of_the_files(tmp_path, monkeypatch):
    """An engine reads its layout catalog from the user's cache when the logic files are
    the ones it was grounded from, grounds again when the entry is unreadable, and a
    user's file that offers a layout makes another entry."""
    from morello_asp.solver.search import engine as engine_module

    monkeypatch.setenv("MORELLO_ASP_CACHE", str(tmp_path))
    first = Engine()
    (entry,) = (tmp_path / "catalogs").iterdir()
    real = engine_module.clingo.Control

    def no_control(*a, **k):
        raise AssertionError("the catalog was grounded although the cache holds it")

    monkeypatch.setattr(engine_module.clingo, "Control", no_control)
    assert Engine()._catalog_facts == first._catalog_facts == ENGINE._catalog_facts
    monkeypatch.setattr(engine_module.clingo, "Control", real)
    entry.write_text("[[2, ")
    assert Engine()._catalog_facts == first._catalog_facts
    p = tmp_path / "more.lp"
    p.write_text("layout_cand(2, (pd(1,dyn,0), pd(0,dyn,0)), 1).\n")
    more = Engine(rules=(p,))
    assert len(list((tmp_path / "catalogs").iterdir())) == 2
    assert len(more._catalog_facts) == len(first._catalog_facts) + 1
    assert any(f.startswith("layout_id((pd(1,dyn,0),pd(0,dyn,0)),") for f in more._catalog_facts)


# Fully hand-written fixtures: the facts a Zero of 1x8 f32 in VRF (v8, row-major);
# LID is the id ENGINE's LayoutIds gives the rank-2 row-major layout.
ZERO_VRF = """
spec(0,zero). spec_rank(0,2). spec_dim(0,0,1). spec_dim(0,1,8). spec_serial(0).
kind_rank_output(zero,2,0). kind_rank_opdim(zero,2,0,0,0). kind_rank_opdim(zero,2,0,1,1).
spec_operand(0,0,f32,vrf,1,2,8,LID).
spec_npdims(0,0,2). spec_opvol(0,0,8). spec_mcost(0,0,0).
spec_pdim(0,0,0,1,dyn,1,8,1). spec_pdim(0,0,1,0,dyn,1,1,8).
"""


def solve_text(facts):
    ctl = clingo.Control(["--warn=none", "--models=1"])
    for f in ENGINE.files:
        ctl.load(str(f))
    ctl.add("base", [], "\n".join(ENGINE._catalog_facts) + facts)
    ctl.ground([("base", [])])
    out = []
    ctl.solve(on_model=lambda m: out.extend(str(a) for a in m.symbols(shown=True)))
    return set(out)


def test_hand_written_zero_in_vrf_fixture():
    s = parse_spec("(Zero(1x8, (f32, VRF, row_major, v8), serial), [16, 16, 1024, 1024])")
    facts = ZERO_VRF.replace("LID", str(ENGINE.ids.id(s.operands[0].layout)))
    assert set(facts.split()) == set(spec_facts(0, s, TARGET, ENGINE.ids))
    atoms = solve_text(facts)
    sel = sorted(a for a in atoms if a.startswith("action(0,select("))
    assert "action(0,select(vector_zero))" in sel, sorted(atoms)
    assert not any(a.startswith("action(0,to_accum") for a in atoms)


def test_readme_worked_example_atoms():
    s = parse_spec(
        "(MatmulAccum(1x1x1x8, (f32, L1, row_major), (f32, L1, row_major), (f32, VRF, row_major, v8), "
        "serial), [16, 16, 1024, 1024])"
    )
    atoms = solve([s])
    for a in [
        "action(0,move(1,vrf,2,8))",
        "alloc(0,move(1,vrf,2,8),vrf,1)",
        "child_like(0,move(1,vrf,2,8),1)",
        "child_operand(0,move(1,vrf,2,8),1,1,f32,vrf,1,3,8,2)",
        "action(0,move(0,rf,2,0))",
    ]:
        assert a in atoms, a
    assert not any("tile1" in a for a in atoms)
    assert "action(0,move(1,l1,8,0))" not in atoms  # m = 1: the rhs is read once, not repacked
    m2 = solve([parse_spec(str(s).replace("1x1x1x8", "1x2x1x8"))])
    assert "action(0,move(1,l1,8,0))" in m2


# ---- Levels belong to the target: the same rewrites under a target with every level
# renamed (tests/fixtures/renamed_target: rf -> sreg, vrf -> vreg, l1 -> cache1,
# gl -> dram). clingo directly, on hand-written facts in avx2's level names.


def _renamed_paths():
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    return root / "encodings", root / "tests" / "fixtures" / "renamed_target" / "renamed.lp"


RENAME = {"rf": "sreg", "vrf": "vreg", "l1": "cache1", "gl": "dram"}


def _rename(text, table=RENAME):
    import re

    return re.sub(r"(?<![\w\"])(" + "|".join(table) + r")(?![\w])", lambda m: table[m.group(1)], text)


def _operand(s, op, level, dims, vs=0, lid=2, contig=None, dt="f32"):
    """Facts of a row-major operand: `dims` lists (spec dim, size) per logical dim,
    outermost first; physical dim 0 is the innermost logical dim."""
    r = len(dims)
    vol = 1
    for _, n in dims:
        vol *= n
    mcost = {"gl": 20, "l1": 2}.get(level, 0)
    f = [
        f"spec_operand({s},{op},{dt},{level},1,{r if contig is None else contig},{vs},{lid}).",
        f"spec_npdims({s},{op},{r}).",
        f"spec_opvol({s},{op},{vol}).",
        f"spec_mcost({s},{op},{mcost}).",
    ]
    f += [f"spec_opdim({s},{op},{j},{d})." for j, (d, _) in enumerate(dims)]
    f += [f"spec_opext({s},{op},{j},{x})." for j, (_, x) in enumerate(dims)]
    stride = 1
    for p, j in enumerate(reversed(range(r))):
        f.append(f"spec_pdim({s},{op},{p},{j},dyn,1,{dims[j][1]},{stride}).")
        stride *= dims[j][1]
    return f


def _matmul(s, kind, shape, levels, vss=(0, 0, 0), serial=True, contig=(None, None, None)):
    b, m, k, n = shape
    f = [f"spec({s},{kind}).", f"spec_rank({s},4).", f"spec_output({s},2).", f"spec_reduction({s},2)."]
    f += [f"spec_dim({s},{d},{x})." for d, x in enumerate(shape)]
    f += [f"spec_serial({s})."] if serial else []
    opdims = ([(0, b), (1, m), (2, k)], [(0, b), (2, k), (3, n)], [(0, b), (1, m), (3, n)])
    for op in range(3):
        f += _operand(s, op, levels[op], opdims[op], vss[op], contig=contig[op])
    return f


# The catalog's layout ids (ids 0 and 1: the packed B panels of rules/layouts.lp); 2 is
# row-major rank 3 and 3 row-major rank 2 in the facts below.
CATALOG = [
    "layout_id((pd(0,dyn,0),pd(2,dyn,0),pd(1,dyn,0),pd(2,pack,8)),0).",
    "layout_id((pd(0,dyn,0),pd(2,dyn,0),pd(1,dyn,0),pd(2,pack,16)),1).",
]
RENAMED_SPECS = (
    # 0: the README's worked example (moves into every level, alloc/4)
    _matmul(0, "matmul_accum", (1, 1, 1, 8), ("l1", "l1", "vrf"), (0, 0, 8))
    # 1: a Matmul in global memory, not serial (tiles, parallel tiles, to_accum, moves)
    + _matmul(1, "matmul", (1, 4, 4, 8), ("gl", "gl", "gl"), serial=False)
    # 2: a vector load L1 -> VRF (vector_assign); 3: a Zero in VRF (vector_zero)
    + [
        "spec(2,move).",
        "spec_rank(2,2).",
        "spec_dim(2,0,1).",
        "spec_dim(2,1,8).",
        "spec_serial(2).",
        "spec_output(2,1).",
    ]
    + _operand(2, 0, "l1", [(0, 1), (1, 8)], lid=3)
    + _operand(2, 1, "vrf", [(0, 1), (1, 8)], vs=8, lid=3)
    + [
        "spec(3,zero).",
        "spec_rank(3,2).",
        "spec_dim(3,0,1).",
        "spec_dim(3,1,8).",
        "spec_serial(3).",
        "spec_output(3,0).",
    ]
    + _operand(3, 0, "vrf", [(0, 1), (1, 8)], vs=8, lid=3)
    # 4: a scalar MatmulAccum in RF and L1 (mult_add)
    + _matmul(4, "matmul_accum", (1, 1, 1, 1), ("rf", "l1", "rf"))
    # 5: a strided 16-row lhs in GL whose stride is unknown: rules/aliasing.lp forbids
    # caching it in L1 (16 rows > 8 ways); 6: the same with rows 2^8 * odd bytes apart,
    # which spread over 16 groups of sets and may stay
    + _matmul(5, "matmul_accum", (1, 16, 16, 16), ("gl", "gl", "gl"), contig=(1, None, None))
    + _matmul(6, "matmul_accum", (1, 16, 16, 16), ("gl", "gl", "gl"), contig=(1, None, None))
    + ["spec_stride(6,0,8)."]
    # requested rewrites show their reasons (bad/3): into VRF or RF from GL, a vector
    # size in L1, none in VRF, one that does not divide; a wrong kernel; and a 3-row
    # tile of 4 rows, which applies with a boundary region (child 2: the mask of m)
    + [
        "requested(1,move(2,vrf,2,8)).",
        "requested(1,move(1,rf,2,0)).",
        "requested(1,move(1,l1,2,8)).",
        "requested(0,move(1,vrf,2,0)).",
        "requested(0,move(0,vrf,2,8)).",
        "requested(4,select(vector_zero)).",
        "requested(1,tile(0)).",
        "req_tile(1,0,1).",
        "req_tile(1,1,3).",
        "req_tile(1,2,4).",
        "req_tile(1,3,8).",
    ]
)


def _solve_files(files, facts):
    ctl = clingo.Control(["--warn=none", "--models=1"])
    for f in files:
        ctl.load(str(f))
    ctl.add("base", [], "\n".join(facts))
    ctl.ground([("base", [])])
    out = []
    ctl.solve(on_model=lambda m: out.extend(str(a) for a in m.symbols(shown=True)))
    return set(out)


@pytest.mark.parametrize("options", [(), ("fuse_in_cache",)])
def test_renamed_target_offers_the_same_rewrites_up_to_renaming(options):
    enc, renamed = _renamed_paths()
    rules = [enc / "synth.lp", *sorted((enc / "kinds").glob("*.lp")), *(enc / "options" / f"{o}.lp" for o in options)]
    facts = CATALOG + RENAMED_SPECS
    avx2 = _solve_files([*rules, enc / "targets" / "avx2.lp"], facts)
    other = _solve_files([*rules, renamed], [_rename(f) for f in facts])
    assert {_rename(a) for a in avx2} == other, (
        sorted({_rename(a) for a in avx2} - other),
        sorted(other - {_rename(a) for a in avx2}),
    )
    # not vacuous: every family of rewrites, reasons and allocations is in the answer
    for a in [
        "action(0,move(1,vrf,2,8))",
        "alloc(0,move(1,vrf,2,8),vrf,1)",
        "action(0,move(0,rf,2,0))",
        "alloc(0,move(0,rf,2,0),rf,1)",
        "action(1,move(1,l1,0,0))",  # spec 0 has m = 1: its rhs is not repacked (relayout_pays)
        "action(1,tile1(1,2,1))",
        "action(1,to_accum)",
        "action(1,move(0,l1,2,0))",
        "action(1,tile(0))",
        "child_dim(1,tile(0),2,1,1)",
        "action(2,select(vector_assign))",
        "action(3,select(vector_zero))",
        "action(4,select(mult_add))",
        'bad(1,move(2,vrf,2,8),"no such move destination from this level in the target")',
        'bad(1,move(1,rf,2,0),"no such move destination from this level in the target")',
        'bad(1,move(1,l1,2,8),"only a tensor in a vector-register level has a vector size")',
        'bad(0,move(1,vrf,2,0),"a tensor in a vector-register level needs a vector size")',
        'bad(0,move(0,vrf,2,8),"the vector size does not divide the tensor\'s volume")',
        'bad(4,select(vector_zero),"the kernel does not apply to this spec")',
    ]:
        assert a in avx2, (a, sorted(avx2))
    assert "action(5,move(0,l1,2,0))" not in avx2  # 16 rows of unknown stride > 8 ways
    assert "action(6,move(0,l1,2,0))" in avx2  # 16 rows <= 8 ways * 16 groups of sets


def test_renamed_target_levels_have_the_same_roles():
    """The roles rules/levels.lp derives are the same for the renamed levels."""
    enc, renamed = _renamed_paths()
    roles = "#show vector_level/1. #show value_level/1. #show level_kind/2. #show level_unit/2."
    got = {}
    for name, target in (("avx2", enc / "targets" / "avx2.lp"), ("renamed", renamed)):
        ctl = clingo.Control(["--warn=none"])
        ctl.load(str(enc / "rules" / "levels.lp"))
        ctl.load(str(target))
        ctl.add("base", [], roles)
        ctl.ground([("base", [])])
        got[name] = {
            str(a.symbol)
            for a in ctl.symbolic_atoms
            if a.symbol.name in ("vector_level", "value_level", "level_kind", "level_unit")
        }
    assert {_rename(a) for a in got["avx2"]} == got["renamed"]
    assert "vector_level(vreg)" in got["renamed"] and "value_level(sreg)" in got["renamed"]


def test_kind_facts_are_written_once_per_call_and_the_spec_facts_derived_from_them():
    """Two specs of one kind and rank in one call: the second carries no kind_rank_*
    facts, and rules/base.lp derives each spec's operand dims, extents, output and
    reduction from the first's (a conv's summed dimension keeps its own extent)."""
    a = parse_spec("Matmul(1x4x8x16, f32)")
    b = parse_spec("Matmul(1x2x2x32, f32)")
    conv = parse_spec("Conv(1x3x5x3x5x3x3, f32)")
    kinds: set = set()
    fa = spec_facts(0, a, TARGET, ENGINE.ids, kinds)
    fb = spec_facts(1, b, TARGET, ENGINE.ids, kinds)
    fc = spec_facts(2, conv, TARGET, ENGINE.ids, kinds)
    assert any(f.startswith("kind_rank_opdim(matmul,4,") for f in fa)
    assert not any(f.startswith("kind_rank_") for f in fb)
    assert any(f.startswith("kind_rank_opsum(conv,7,") for f in fc)
    ctl = clingo.Control(["--warn=none"])
    ctl.load(str(Path(__file__).resolve().parent.parent / "encodings" / "rules" / "base.lp"))
    ctl.add("base", [], "\n".join(fa + fb + fc))
    ctl.ground([("base", [])])
    atoms = {str(s.symbol) for s in ctl.symbolic_atoms}
    # Matmul b, m, k, n: rhs (operand 1) spans b, k, n; out (2) is b, m, n; k is reduced.
    for sid, (m, k, n) in ((0, (4, 8, 16)), (1, (2, 2, 32))):
        assert {f"spec_opdim({sid},1,1,2)", f"spec_opext({sid},1,1,{k})", f"spec_opext({sid},1,2,{n})"} <= atoms
        assert {f"spec_output({sid},2)", f"spec_reduction({sid},2)", f"spec_opext({sid},2,1,{m})"} <= atoms
        assert f"spec_reduction({sid},1)" not in atoms
    # The image's rows are h + fh: summed, with the extent the facts give (3 + 3 - 1).
    assert {"spec_opsum(2,0,2,3)", "spec_opsum(2,0,2,5)", "spec_opoff(2,0,2,0)", "spec_opext(2,0,2,5)"} <= atoms


def test_explain_terms_are_the_terms_the_rules_derive(capsys):
    """Issue 56: explain printed actions as tile([1, 1, 2, 2]) and move_param(0, L1,
    row_major) while the rules match tile1(D, T, P) and move(Op, l1, LayId, V). With
    --terms each action has its term under it, and each is an action/2 term the rules
    derive for the spec (a rule of a user's matches it as printed)."""
    import re

    from morello_asp.cli import main

    spec = "Matmul(2x2x2, f32)"
    assert main(["explain", spec, "--no-db", "-q", "--terms"]) == 0
    out = capsys.readouterr().out
    printed = dict(re.findall(r"^  (\S.*?): (?:cost \d+|no implementation)\n      % action term: (\S+)$", out, re.M))
    assert len(printed) == out.count("% action term:") == len(re.findall(r"^  \S", out, re.M)), out
    assert printed["tile([1, 1, 2, 2])"] == "tile1(1,1,0)" and printed["to_accum()"] == "to_accum", out
    assert printed["move_param(0, L1, row_major)"].startswith("move(0,l1,"), out
    derived = {a[len("action(0,") : -1] for a in solve([parse_spec(spec)]) if a.startswith("action(0,")}
    assert set(printed.values()) <= derived, set(printed.values()) - derived
    rf = "(f32, RF, row_major)"
    assert (
        main(["explain", f"(MatmulAccum(1x1x1, {rf}, {rf}, {rf}), [64, 16, 1024, 1000000])", "--no-db", "--terms"]) == 0
    )
    assert "  select(MultAdd): cost 1\n      % action term: select(mult_add)\n" in capsys.readouterr().out
