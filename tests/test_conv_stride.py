"""Strided and dilated convolutions (kinds/conv.lp's family ConvS2..4, ConvD2, ConvS2D2..
ConvS4D2, issue 59): affine accesses with coefficients (kind_access/3's scale/2). The
declared semantics against a direct loop; programs synthesized by the search, proved by
z3, compiled, run and compared with the direct loop; the strided view spatial_split
leaves (every S-th pixel of an image row) and a false claim of its contiguity refuted."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from morello_asp import kinds
from morello_asp.codegen.reference import flops, random_operands, reference
from morello_asp.kinds import KindError
from morello_asp.serialize import from_json, to_json
from morello_asp.solver.proofs.verify import verify
from morello_asp.spec import parse_spec
from morello_asp.synthesis import synthesize

LIMITS = "[16, 16, 1024, 33554432]"
LAST = "(f32, GL, [0, 2, 3, 1]), (f32, GL, [2, 3, 1, 0]), (f32, GL, [0, 2, 3, 1])"
# (kind, stride, dilation) of the family
FAMILY = [
    ("Conv", 1, 1),
    ("ConvS2", 2, 1),
    ("ConvS3", 3, 1),
    ("ConvS4", 4, 1),
    ("ConvD2", 1, 2),
    ("ConvS2D2", 2, 2),
    ("ConvS3D2", 3, 2),
    ("ConvS4D2", 4, 2),
]


def kind_name(s: int, d: int) -> str:
    return "Conv" + (f"S{s}" if s > 1 else "") + (f"D{d}" if d > 1 else "")


def channels_last(kind: str, shape: str) -> str:
    return f"({kind}({shape}, {LAST}, serial), {LIMITS})"


def direct_conv(img, filters, s: int, d: int, shape):
    """out[b, f, y, x] = sum over c, i, j of img[b, c, s*y + d*i, s*x + d*j] * filters[f, c, i, j],
    by loops over the filter positions (independent of the declarations)."""
    b, f, c, h, w, fh, fw = shape
    out = np.zeros((b, f, h, w))
    img64, filt64 = img.astype(np.float64), filters.astype(np.float64)
    for i in range(fh):
        for j in range(fw):
            win = img64[:, :, d * i : d * i + s * (h - 1) + 1 : s, d * j : d * j + s * (w - 1) + 1 : s]
            out += np.einsum("bcyx,fc->bfyx", win, filt64[:, :, i, j])
    return out


def image_shape(s, d, shape):
    b, f, c, h, w, fh, fw = shape
    return (b, c, s * (h - 1) + d * (fh - 1) + 1, s * (w - 1) + d * (fw - 1) + 1)


@pytest.mark.parametrize("kind,s,d", FAMILY)
def test_declared_semantics_match_a_direct_loop(kind, s, d):
    rng = random.Random(f"{kind}")
    for _ in range(3):
        shape = tuple(rng.choice([1, 2, 3, 5]) for _ in range(7))
        spec = parse_spec(f"{kind}({'x'.join(map(str, shape))}, f32)")
        assert spec.operand_shapes[0] == image_shape(s, d, shape)
        assert flops(spec) == 2 * int(np.prod(shape))
        img, filt, out = random_operands(spec, seed=1)
        want = direct_conv(img, filt, s, d, shape)
        np.testing.assert_allclose(reference(spec, img, filt, out), want, rtol=1e-5, atol=1e-5)
        acc = parse_spec(f"{kind}Accum({'x'.join(map(str, shape))}, f32)")
        np.testing.assert_allclose(reference(acc, img, filt, out + 1), out + 1 + want, rtol=1e-5, atol=1e-5)


def test_the_family_is_declared_with_coefficients():
    k = kinds.all_kinds()["ConvS2D2"]
    assert k is not None and k.accesses is not None
    img = k.accesses[0]
    assert [a.text(k.dims) for a in img] == ["b", "c", "2*h + 2*fh", "2*w + 2*fw"]
    assert kinds.all_kinds()["ConvS3Accum"].accum_of == "ConvS3"
    assert "img[b, c, 2*h + fh, 2*w + fw]" in kinds.all_kinds()["ConvS2"].describe()


@pytest.mark.parametrize(
    "access,problem",
    [
        ("sum(scale(0, m), n)", "scale(A, D), A an integer >= 1"),
        ("sum(scale(2, q), n)", "which is not a spec dimension"),
    ],
)
def test_bad_coefficients_are_refused_by_name(tmp_path, access, problem):
    f = tmp_path / "bad.lp"
    f.write_text(
        textwrap.dedent(
            f"""\
            kind(bad_s). kind_dim(bad_s, 0, m). kind_dim(bad_s, 1, n). kind_operand(bad_s, 0, x).
            kind_operand(bad_s, 1, out). kind_output(bad_s, out). kind_access(bad_s, x, ({access},)).
            kind_access(bad_s, out, (m,)). kind_value(bad_s, out, x). kind_combine(bad_s, out, add).
            """
        )
    )
    with pytest.raises(KindError) as e:
        kinds.load([f])
    assert str(f) in str(e.value) and "kind bad_s" in str(e.value) and problem in str(e.value), str(e.value)


def check(imp, s, d, seed=0):
    """Proved, compiled, run, and equal to the direct loop."""
    rep = verify(imp)
    assert rep.ok, [o for o in rep.obligations if o.status != "proved"][:3]
    fn = imp.compile()
    img, filt, _ = random_operands(imp.spec, seed)
    got = fn(img, filt)
    want = direct_conv(img, filt, s, d, imp.spec.shape)
    np.testing.assert_allclose(got, want.reshape(got.shape), rtol=1e-4, atol=1e-4)
    return imp


def _split_bodies(node: dict):
    if node.get("node") == "filter_loop":
        yield node["body"]
    for v in node.values():
        for x in v if isinstance(v, list) else [v]:
            if isinstance(x, dict):
                yield from _split_bodies(x)


@pytest.mark.slow  # ~6 s
def test_a_strided_pointwise_convolution_reads_a_strided_lhs():
    """A 1x1 stride-2 channels-last convolution: spatial_split's image view is a row of
    every other pixel (rows 2c values apart), so the Matmul(Accum) it leaves sees an lhs
    that is not contiguous (c1); the program is proved and runs. Claiming the view
    contiguous is refuted by verify. (The search copies such a layer's pixels densely
    first, tests/test_subsample.py; here its rows are split by hand.)"""
    spec = parse_spec(channels_last("ConvS2", "1x16x8x3x5x1x1"))
    rows = spec.tile([1, 16, 8, 1, 5, 1, 1]).subschedule([0], lambda a: a.spatial_split())
    imp = check(rows.synthesize_all(), 2, 1)
    doc = to_json(imp)
    bodies = list(_split_bodies(doc["program"]))
    assert bodies
    lhs = parse_spec(bodies[0]["spec"]).operands[0]
    assert not lhs.is_contiguous() and lhs.contig == 1, lhs
    # the same program with the split's image view claimed contiguous
    text = bodies[0]["spec"]
    wrong = text.replace(", c1", "", 1)
    assert wrong != text
    bodies[0]["spec"] = wrong
    mutant = from_json(json.loads(json.dumps(doc)))
    rep = verify(mutant)
    assert not rep.ok
    bad = [o for o in rep.obligations if o.status == "refuted"]
    assert any(o.what.startswith("Matmul") and "operand lhs" in o.what for o in bad), bad


@pytest.mark.parametrize(
    "text,s,d",
    [
        ("ConvS2(1x2x2x3x3x2x2, f32)", 2, 1),  # row-major: copied into channels-last first
        (channels_last("ConvD2", "1x8x3x2x3x2x2"), 1, 2),
    ],
)
def test_small_strided_and_dilated_convolutions_synthesize_prove_and_run(text, s, d):
    check(synthesize(text), s, d)


def test_the_cli_synthesizes_runs_and_verifies_a_strided_convolution():
    r = subprocess.run(
        [sys.executable, "-m", "morello_asp.cli", "synth", "ConvS3(1x2x2x2x3x2x1, f32)", "--run", "--verify"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert "checked against numpy" in r.stdout and "OK" in r.stdout and "refuted" not in r.stdout + r.stderr


def test_another_stride_is_one_fact_in_a_rules_file(tmp_path):
    """conv_family/4 in a user's --rules file declares a stride the built-in family lacks;
    without it the name is refused with the family's names (exit 2)."""
    f = tmp_path / "stride5.lp"
    f.write_text("conv_family(conv_s5, conv_s5_accum, 5, 1).\n")
    cli = [sys.executable, "-m", "morello_asp.cli"]
    r = subprocess.run([*cli, "parse", "ConvS5(1x2x2x2x2x2x1, f32)"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "ConvS5 is not declared; its family declares ConvS2, ConvS3, ConvS4" in r.stderr
    assert "Traceback" not in r.stderr
    spec = "ConvS5(1x2x2x2x2x2x1, f32)"
    r = subprocess.run(
        [*cli, "synth", spec, "--rules", str(f), "--run", "--verify", "-q"], capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr
    assert "OK" in r.stdout and "refuted" not in r.stdout + r.stderr


def _random_cases(n: int, seed: int):
    """Random strides and dilations with shapes of ones and small primes (and 8, 16:
    the vector width), channels-last or row-major."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        s, d = rng.choice([1, 2, 3, 4]), rng.choice([1, 2])
        b = 1
        f, c = rng.choice([1, 3, 8, 16]), rng.choice([1, 2, 3, 5, 8])
        h, w = rng.choice([1, 2, 3, 5]), rng.choice([1, 2, 3, 5, 7])
        fh, fw = rng.choice([1, 2, 3]), rng.choice([1, 2, 3])
        shape = "x".join(map(str, (b, f, c, h, w, fh, fw)))
        kind = kind_name(s, d)
        out.append((channels_last(kind, shape) if rng.random() < 0.7 else f"{kind}({shape}, f32)", s, d))
    return out


@pytest.mark.slow  # ~2-8 s each on a loaded Zen 5
@pytest.mark.parametrize("text,s,d", _random_cases(16, seed=59))
def test_random_strides_and_dilations_synthesize_prove_and_run(text, s, d):
    check(synthesize(text), s, d)


@pytest.mark.slow  # ~10 s of CPU
def test_the_conv_guide_blocks_a_strided_convolution():
    """The conv guide takes any stride (ConvS2 here: filters packed by 16 output
    channels, blocks of a row of pixels, spatial_split) and its program proves and runs."""
    imp = synthesize(channels_last("ConvS2", "1x32x16x3x14x3x3"), guide="conv", db=None)
    check(imp, 2, 1)
    assert "spatial_split" in str(imp)


@pytest.mark.slow  # ~1 min
def test_memo_boxes_of_a_strided_convolution_prove(tmp_path):
    """The memo table's boxes of a strided kind (extents with coefficients) prove."""
    db = tmp_path / "s2.db"
    cli = [sys.executable, "-m", "morello_asp.cli"]
    r = subprocess.run([*cli, "synth", "ConvS2(1x2x2x2x3x2x1, f32)", "--db", str(db), "--quiet"], text=True)
    assert r.returncode == 0
    r = subprocess.run([*cli, "db", "verify", str(db)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert " 0 refuted, 0 unknown" in r.stdout, r.stdout
