"""Spec kinds as logic declarations (encodings/kinds/): the built-in kinds come from
them, a user's file adds kinds with no Python change (synthesized, compiled and checked
against numpy written independently of the derived semantics), affine operand maps give
tiles their halos and z3 proves them, and malformed declarations are refused by name."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from morello_asp import kinds
from morello_asp.codegen.reference import flops, random_operands, reference
from morello_asp.kinds import KindError, declared
from morello_asp.spec import parse_spec
from morello_asp.synthesis import synthesize

USER_KINDS = """\
% AddVec: out = a + b, pointwise, any rank.
kind(add_vec).
kind_any_rank(add_vec).
kind_operand(add_vec, 0, a). kind_operand(add_vec, 1, b). kind_operand(add_vec, 2, out).
kind_output(add_vec, out).
kind_value(add_vec, out, add(a, b)).

% SumRows: out[m] = sum over n of x[m, n].
kind(sum_rows).
kind_dim(sum_rows, 0, m). kind_dim(sum_rows, 1, n).
kind_operand(sum_rows, 0, x). kind_operand(sum_rows, 1, out).
kind_output(sum_rows, out).
kind_access(sum_rows, x, (m, n)). kind_access(sum_rows, out, (m,)).
kind_value(sum_rows, out, x).
kind_combine(sum_rows, out, add).
kind_accum(sum_rows_accum, sum_rows, zero).

% SumDiff: two outputs, s = a + b and d = a - b.
kind(sum_diff).
kind_any_rank(sum_diff).
kind_operand(sum_diff, 0, a). kind_operand(sum_diff, 1, b).
kind_operand(sum_diff, 2, s). kind_operand(sum_diff, 3, d).
kind_output(sum_diff, s). kind_output(sum_diff, d).
kind_value(sum_diff, s, add(a, b)). kind_value(sum_diff, d, sub(a, b)).

% MaxRows: out[m] = max over n of relu(x[m, n] - y[m, n]); its accumulator starts at -inf.
kind(lowest).
kind_any_rank(lowest).
kind_operand(lowest, 0, out).
kind_output(lowest, out).
kind_value(lowest, out, neg_inf).
kind(max_rows).
kind_dim(max_rows, 0, m). kind_dim(max_rows, 1, n).
kind_operand(max_rows, 0, x). kind_operand(max_rows, 1, y). kind_operand(max_rows, 2, out).
kind_output(max_rows, out).
kind_access(max_rows, x, (m, n)). kind_access(max_rows, y, (m, n)). kind_access(max_rows, out, (m,)).
kind_value(max_rows, out, max(sub(x, y), 0)).
kind_combine(max_rows, out, max).
kind_accum(max_rows_accum, max_rows, lowest).
"""

CONV1 = """\
% Conv1d: out[n] = sum over k of img[n + k] * w[k] (the image has n + k - 1 values).
kind(conv1d).
kind_dim(conv1d, 0, n). kind_dim(conv1d, 1, k).
kind_operand(conv1d, 0, img). kind_operand(conv1d, 1, w). kind_operand(conv1d, 2, out).
kind_output(conv1d, out).
kind_access(conv1d, img, (sum(n, k),)). kind_access(conv1d, w, (k,)). kind_access(conv1d, out, (n,)).
kind_value(conv1d, out, mul(img, w)).
kind_combine(conv1d, out, add).
kind_accum(conv1d_accum, conv1d, zero).
"""


@pytest.fixture(scope="module")
def user_kinds(tmp_path_factory):
    f = tmp_path_factory.mktemp("kinds") / "user_kinds.lp"
    f.write_text(USER_KINDS)
    return str(f)


@pytest.fixture(scope="module")
def conv1(tmp_path_factory):
    f = tmp_path_factory.mktemp("kinds") / "conv1.lp"
    f.write_text(CONV1)
    return str(f)


def test_builtin_kinds_come_from_the_declarations():
    mm = kinds.kind("Matmul")
    assert mm.source.endswith("encodings/kinds/matmul.lp")
    assert mm.dims == ("b", "m", "k", "n") and mm.params == ("lhs", "rhs", "out")
    assert mm.operand_shapes((2, 3, 5, 7)) == ((2, 3, 5), (2, 5, 7), (2, 3, 7))
    assert mm.reduction(4) == (2,)
    acc = kinds.kind("MatmulAccum")
    assert (acc.accum_of, acc.init_kind, acc.is_accum) == ("Matmul", "Zero", True)
    assert kinds.kind("Move").operand_shapes((3, 4)) == ((3, 4), (3, 4))
    # the sugar's batch of one is kind_default_dim(matmul, b, 1)
    assert parse_spec("Matmul(3x5x7, f32)").shape == (1, 3, 5, 7)
    assert parse_spec("MatmulAccum(3x5x7, f32)").shape == (1, 3, 5, 7)
    assert flops(parse_spec("Matmul(3x5x7, f32)")) == 2 * 3 * 5 * 7
    assert flops(parse_spec("Move(3x5, f32)")) == 0


def test_builtin_kinds_are_remembered_until_a_kind_file_changes(tmp_path, monkeypatch):
    """The built-in kinds are kept in the user's cache: a second process reads them without
    grounding; an unreadable cache file is rebuilt; another kind file is another entry."""
    monkeypatch.setenv("MORELLO_ASP_CACHE", str(tmp_path))
    builtin = declared._builtin.__wrapped__  # past the per-process cache, to the user's
    built = builtin()
    (entry,) = (tmp_path / "kinds").iterdir()
    real_ground = declared._ground

    def no_grounding(files):
        raise AssertionError("grounded although the cache holds the kinds")

    monkeypatch.setattr(declared, "_ground", no_grounding)
    assert builtin() == built
    entry.write_bytes(b"not a pickle")
    monkeypatch.setattr(declared, "_ground", real_ground)
    assert builtin() == built
    edited = tmp_path / "kinds-src"
    edited.mkdir()
    files = []
    for f in kinds.builtin_files():
        files.append(edited / f.name)
        files[-1].write_text(f.read_text() + "\n% an edit\n")
    monkeypatch.setattr(declared, "builtin_files", lambda: tuple(files))
    assert {k: v.params for k, v in builtin().items()} == {k: v.params for k, v in built.items()}
    assert len(list((tmp_path / "kinds").iterdir())) == 2


def test_derived_semantics_match_numpy():
    s = parse_spec("Matmul(2x3x5x7, f32)")
    a, b, c = random_operands(s)
    np.testing.assert_allclose(reference(s, a, b, c), a @ b, rtol=1e-5)
    s = parse_spec("MatmulAccum(3x4x5, i32)")
    a, b, c = random_operands(s, seed=1)
    c = c + 3
    np.testing.assert_array_equal(reference(s, a, b, c), c + a @ b)
    s = parse_spec("Move(3x4, i32)")
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    np.testing.assert_array_equal(reference(s, x, np.zeros_like(x)), x)


@pytest.mark.parametrize(
    "text, dtype",
    [("AddVec(3x5, f32)", np.float32), ("AddVec(4x8, i32)", np.int32), ("AddVec(2x3x3, f32)", np.float32)],
)
def test_user_elementwise_kind_synthesizes_and_runs(user_kinds, text, dtype):
    imp = synthesize(text, rules=[user_kinds])
    fn = imp.compile([user_kinds])
    rng = np.random.default_rng(0)
    shape = imp.spec.shape
    a = (rng.integers(-9, 9, shape)).astype(dtype)
    b = (rng.integers(-9, 9, shape)).astype(dtype)
    np.testing.assert_array_equal(fn(a, b), a + b)


@pytest.mark.parametrize("text", ["SumRows(7x6, f32)", "SumRows(5x3, i32)", "SumRows(8x16, f32)"])
def test_user_reduction_kind_synthesizes_and_runs(user_kinds, text):
    imp = synthesize(text, rules=[user_kinds])
    fn = imp.compile([user_kinds])
    dt = imp.spec.operands[0].dtype.np_dtype
    x = np.random.default_rng(1).integers(-9, 9, imp.spec.shape).astype(dt)
    np.testing.assert_allclose(fn(x), x.sum(axis=1), rtol=1e-6)


def test_user_kind_with_two_outputs(user_kinds):
    imp = synthesize("SumDiff(3x5, f32)", rules=[user_kinds])
    fn = imp.compile([user_kinds])
    rng = np.random.default_rng(5)
    a, b = (rng.random((3, 5)).astype(np.float32) for _ in range(2))
    s, d = fn(a, b)
    np.testing.assert_allclose(s, a + b, rtol=1e-6)
    np.testing.assert_allclose(d, a - b, rtol=1e-6)
    err, tol = fn.check(seed=1)
    assert err <= tol


def test_user_max_reduction_starts_from_its_fill(user_kinds):
    """max(x - y, 0) reduced with max: the generic scalar kernel's operators (max) and
    the init kind's -inf, lowered to C from the declaration."""
    imp = synthesize("MaxRows(5x7, f32)", rules=[user_kinds])
    fn = imp.compile([user_kinds])
    rng = np.random.default_rng(2)
    x, y = (rng.random((5, 7)).astype(np.float32) - 0.5 for _ in range(2))
    np.testing.assert_allclose(fn(x, y), np.maximum(x - y, 0).max(axis=1), rtol=1e-6)
    kinds_used = {n.spec.kind for n in imp.walk()}
    assert {"Lowest", "MaxRowsAccum"} <= kinds_used, kinds_used  # to_accum with the declared fill


def test_affine_kind_tiles_with_halos_and_proves(conv1):
    from morello_asp.solver.proofs.verify import verify

    spec = parse_spec("Conv1d(10x3, f32)", rules=[conv1])
    k = spec.k
    assert spec.operand_shapes == ((12,), (3,), (10,))
    # a tile of 4 outputs and 2 filter taps reads 5 image values; the image tiles overlap
    assert k.operand_shapes((4, 2)) == ((5,), (2,), (4,))
    imp = synthesize(spec, rules=[conv1])
    rep = verify(imp, [conv1])
    assert rep.ok, rep
    assert any("operand views stay inside" in o.what for o in rep.obligations)
    fn = imp.compile([conv1])
    rng = np.random.default_rng(3)
    img, w = rng.random(12).astype(np.float32), rng.random(3).astype(np.float32)
    want = np.einsum("nk,k->n", np.lib.stride_tricks.sliding_window_view(img, 3), w)
    np.testing.assert_allclose(fn(img, w), want, rtol=1e-5)


def test_affine_hand_schedule_with_boundaries_runs(conv1):
    """Tiles that do not divide the outputs leave boundary regions whose image views are
    shorter; the whole program is proved and checked."""
    from morello_asp.solver.proofs.verify import verify

    spec = parse_spec("Conv1dAccum(11x4, f32)", rules=[conv1])
    loop = spec.tile([4, 3])
    shapes = [c.spec.operand_shapes for c in loop.children]
    # the body (4 outputs, 3 taps: 6 image values), the 3 leftover outputs, the leftover
    # tap under the 8 outputs of the full tiles, and the corner
    assert shapes == [((6,), (3,), (4,)), ((5,), (3,), (3,)), ((8,), (1,), (8,)), ((3,), (1,), (3,))]
    full = synthesize(spec, rules=[conv1])
    assert verify(full, [conv1]).ok
    fn = full.compile([conv1])
    rng = np.random.default_rng(4)
    img, w = rng.random(14).astype(np.float32), rng.random(4).astype(np.float32)
    out = rng.random(11).astype(np.float32)
    want = out + np.einsum("nk,k->n", np.lib.stride_tricks.sliding_window_view(img, 4), w)
    np.testing.assert_allclose(fn(img, w, out=out.copy()), want, rtol=1e-5)


def test_z3_refutes_a_view_past_the_operand(conv1):
    """A loop whose body claims a larger image tile than the halo allows is refuted."""
    from morello_asp.ir import Loop, SpecHole
    from morello_asp.rewrites.tile import Tile

    spec = parse_spec("Conv1dAccum(8x3, f32)", rules=[conv1])
    body = SpecHole(parse_spec("Conv1dAccum(4x3, f32)", rules=[conv1]))
    good = Loop(spec, (4, 3), False, body, ())
    bad = Loop(spec, (4, 3), False, SpecHole(parse_spec("Conv1dAccum(4x4, f32)", rules=[conv1])), ())
    fam = Tile()
    assert fam._operands_in_bounds("t", good, [2, 1], [("main", [0, 0], [8, 3], (4, 3))]).status == "proved"
    ob = fam._operands_in_bounds("t", bad, [2, 1], [("main", [0, 0], [8, 3], (4, 3))])
    assert ob.status == "refuted", ob


@pytest.mark.parametrize(
    "decl, problem",
    [
        (
            "kind(bad_a). kind_dim(bad_a, 0, m). kind_operand(bad_a, 0, x). kind_operand(bad_a, 1, out). "
            "kind_output(bad_a, out). kind_access(bad_a, x, (m, q)). kind_access(bad_a, out, (m,)). "
            "kind_value(bad_a, out, x).",
            "names q, which is not a spec dimension",
        ),
        (
            "kind(bad_b). kind_dim(bad_b, 0, m). kind_dim(bad_b, 1, n). kind_operand(bad_b, 0, x). "
            "kind_operand(bad_b, 1, o1). kind_operand(bad_b, 2, o2). kind_output(bad_b, o1). kind_output(bad_b, o2). "
            "kind_access(bad_b, x, (m, n)). kind_access(bad_b, o1, (m,)). kind_access(bad_b, o2, (m, n)). "
            "kind_value(bad_b, o1, x). kind_value(bad_b, o2, x). kind_combine(bad_b, o1, add). "
            "kind_combine(bad_b, o2, add).",
            "have different ranks",
        ),
        (
            "kind(bad_c). kind_any_rank(bad_c). kind_operand(bad_c, 0, x). kind_operand(bad_c, 1, out). "
            "kind_output(bad_c, out). kind_value(bad_c, out, tanh(x)).",
            "unknown operator 'tanh'",
        ),
        (
            "kind(bad_d). kind_dim(bad_d, 0, m). kind_dim(bad_d, 1, n). kind_operand(bad_d, 0, x). "
            "kind_operand(bad_d, 1, out). kind_output(bad_d, out). kind_access(bad_d, x, (m, n)). "
            "kind_access(bad_d, out, (m,)). kind_value(bad_d, out, x).",
            "has no kind_combine/3",
        ),
        (
            "kind(bad_e). kind_any_rank(bad_e). kind_operand(bad_e, 0, x). kind_operand(bad_e, 1, out). "
            "kind_output(bad_e, out). kind_value(bad_e, out, x). kind_combine(bad_e, out, max). "
            "kind_accum(bad_e_accum, bad_e, zero).",
            "but combiner max starts from neg_inf",
        ),
        (
            "kind(bad_f). kind_dim(bad_f, 0, m). kind_dim(bad_f, 1, n). kind_operand(bad_f, 0, x). "
            "kind_operand(bad_f, 1, out). kind_output(bad_f, out). kind_access(bad_f, x, (m, n)). "
            "kind_access(bad_f, out, (m, 0)). kind_value(bad_f, out, x). kind_combine(bad_f, out, add). "
            "kind_merge(bad_f, out, add(old(out), new(out))). kind_accum(bad_f_accum, bad_f, zero). "
            "kind_accum_fill(bad_f_accum, out, fill_neg_inf).",
            "the fills are not the identity of out's merge",
        ),
        (
            "kind(bad_g). kind_dim(bad_g, 0, m). kind_dim(bad_g, 1, n). kind_operand(bad_g, 0, x). "
            "kind_operand(bad_g, 1, out). kind_output(bad_g, out). kind_access(bad_g, x, (m, n)). "
            "kind_access(bad_g, out, (m, 0)). kind_value(bad_g, out, x). kind_combine(bad_g, out, add). "
            "kind_merge(bad_g, out, add(old(out), x)). kind_accum(bad_g_accum, bad_g, zero).",
            "reads operands or reduces",
        ),
        (
            "kind(bad_h). kind_dim(bad_h, 0, m). kind_dim(bad_h, 1, n). kind_operand(bad_h, 0, x). "
            "kind_operand(bad_h, 1, out). kind_output(bad_h, out). kind_access(bad_h, x, (m, n)). "
            "kind_access(bad_h, out, (m,)). kind_value(bad_h, out, x). kind_combine(bad_h, out, add). "
            "kind_batch(bad_h, n).",
            "operand out is not indexed by it alone",
        ),
    ],
)
def test_malformed_declarations_are_refused_by_name(tmp_path, decl, problem):
    f = tmp_path / "bad.lp"
    f.write_text(textwrap.fill(decl, 100) + "\n")
    with pytest.raises(KindError) as e:
        kinds.load([f])
    msg = str(e.value)
    assert str(f) in msg and "kind bad_" in msg and problem in msg, msg
    if "bad_a" not in decl:
        return  # one run of the CLI is enough to check its exit code and message
    r = subprocess.run(
        [sys.executable, "-m", "morello_asp.cli", "kinds", "--rules", str(f)], capture_output=True, text=True
    )
    assert r.returncode == 2 and problem in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_kinds_command_lists_declared_and_user_kinds(user_kinds):
    r = subprocess.run(
        [sys.executable, "-m", "morello_asp.cli", "kinds", "--rules", user_kinds], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert any(ln.startswith("Matmul[b m k n](lhs[b, m, k], rhs[b, k, n] -> out[b, m, n]") for ln in lines)
    assert any(ln.startswith("SumRows[m n](x[m, n] -> out[m] = add over n of x)") for ln in lines)
    assert any("AddVec" in ln and "(from --rules)" in ln for ln in lines)


def test_a_family_kind_names_the_dimension_it_reduces(capsys):
    """Issue 56: `kinds` printed Max2 as "max over ... of x": a kind of a family (its
    dimensions d0 d1 ...) names the dimension it reduces, d2, whatever its number, in
    its reduction and in the expressions of its parts."""
    from morello_asp.cli import main

    assert main(["kinds"]) == 0
    lines = {ln.split("[", 1)[0]: ln for ln in capsys.readouterr().out.splitlines()}
    assert not [ln for ln in lines.values() if "over ..." in ln]
    for n in range(4):
        assert lines[f"Max{n}"].endswith(f" = max over d{n} of x)"), lines[f"Max{n}"]
        assert f"exp((x - max over d{n} of x)) / add over d{n} of " in lines[f"Softmax{n}"], lines[f"Softmax{n}"]
    assert lines["Max2"] == "Max2[d0 d1 ...](x[d0, d1, ...] -> out[d0, d1, 0, ...] = max over d2 of x)"


def test_user_kind_from_the_cli_runs(user_kinds):
    r = subprocess.run(
        [sys.executable, "-m", "morello_asp.cli", "synth", "SumRows(6x5, i32)", "--rules", user_kinds, "--run"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert "checked against numpy" in r.stdout and "OK" in r.stdout


@pytest.mark.parametrize("text", ["MaxRows(3x5, f32)", "SumRows(4x3, i32)"])
def test_user_kinds_run_on_neon_under_qemu(user_kinds, text):
    """A declared kind runs on every target that includes c_scalar.lp: here cross-compiled
    for aarch64 and checked against the derived numpy semantics under qemu."""
    from morello_asp.codegen.ctarget import get_ctarget

    why = get_ctarget("neon").cannot_run()
    if why:
        pytest.skip(f"cannot run neon programs here: {why} (make cross-tools installs them)")
    imp = synthesize(parse_spec(text, "neon", rules=[user_kinds]), rules=[user_kinds])
    prog = imp.compile([user_kinds])
    err, tol = prog.check(seed=2)
    assert err <= tol


@pytest.mark.slow
def test_memo_boxes_of_an_affine_kind_prove(conv1, tmp_path):
    """A memo table of a user kind with halos: every stored box proved by z3 (db verify)."""
    db = tmp_path / "conv1.db"
    cli = [sys.executable, "-m", "morello_asp.cli"]
    r = subprocess.run([*cli, "synth", "Conv1d(8x4, f32)", "--rules", conv1, "--db", str(db), "--quiet"], text=True)
    assert r.returncode == 0
    r = subprocess.run([*cli, "db", "verify", str(db), "--rules", conv1], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert " 0 refuted, 0 unknown" in r.stdout and "boxes" in r.stdout, r.stdout
