"""Spec text: parse/print round trip, sugar, syntax and spec errors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from morello_asp import SpecError, SpecSyntaxError, parse_spec

LAYOUTS3 = ["row_major", "col_major", "[0, 2, 1, 2 p(8)]", "[0, 1, 2, 2 oe(8)]", "[1, 0, 2]"]


@st.composite
def specs(draw):
    kind = draw(st.sampled_from(["Matmul", "MatmulAccum", "Zero", "Move"]))
    if kind.startswith("Matmul"):
        shape = [1] + [draw(st.sampled_from([8, 16, 32])) for _ in range(3)]
        nops = 3
    else:
        shape = [1, draw(st.sampled_from([8, 16])), draw(st.sampled_from([8, 16]))]
        nops = 1 if kind == "Zero" else 2
    ops = []
    for _ in range(nops):
        level = draw(st.sampled_from(["GL", "L1", "VRF", "RF"]))
        dt = draw(st.sampled_from(["f32", "i32"] if level == "VRF" else ["f32", "i32", "u8", "bf16", "i16"]))
        lay = draw(st.sampled_from(LAYOUTS3))
        parts = [dt, level, lay]
        if level not in ("RF", "VRF") and draw(st.booleans()):
            parts.append("ua")
        if draw(st.booleans()):
            parts.append(f"c{draw(st.integers(0, 2))}")
            if draw(st.booleans()):
                parts.append(f"s{draw(st.integers(0, 14))}")
        if level == "VRF":
            parts.append(draw(st.sampled_from(["v4", "v8"])))
        ops.append("(" + ", ".join(parts) + ")")
    serial = ", serial" if draw(st.booleans()) else ""
    lims = [
        draw(st.sampled_from([0, 1, 4, 16])),
        draw(st.sampled_from([0, 8, 16])),
        draw(st.sampled_from([16, 1024])),
        1 << 20,
    ]
    dims = draw(st.sampled_from(["x", "×"])).join(map(str, shape))
    return f"({kind}({dims}, {', '.join(ops)}{serial}), [{', '.join(map(str, lims))}])"


@settings(max_examples=150, deadline=None)
@given(specs())
def test_parse_print_round_trip(text):
    s = parse_spec(text)
    assert parse_spec(s.text()) == s
    assert s.text() == parse_spec(s.text()).text()


def test_paper_example_and_sugar():
    t = (
        "(MatmulAccum(1x4x128x16, (bf16, L1, row_major), (bf16, L1, col_major, ua, c0), "
        "(f32, VRF, row_major, v8), serial), [64, 1024, 32768, 1073741824])"
    )
    s = parse_spec(t)
    assert s.text() == t and s.operands[1].contig == 0 and not s.operands[1].aligned
    sugar = parse_spec("Matmul(64×32×16, f32)")
    assert sugar.shape == (1, 64, 32, 16) and all(o.level == "GL" for o in sugar.operands) and sugar.serial


@pytest.mark.parametrize(
    "text,where,what",
    [
        ("(MatmulAccum(1x4x4x16, (f33, RF, row_major)", "column 25", "dtype"),
        ("Matmul(4x4x, f32)", "column 12", "dimension size"),
        ("Matmul(4x4x4, f33)", "column 15", "a dtype (one of u8"),
        ("Foo(4x4x4, f32)", "column 1", "Matmul, MatmulAccum"),
        (
            "(Matmul(1x4x4x4, (f32, GL, row_major, zz), (f32, GL, row_major), (f32, GL, row_major)), [1,1,1,1])",
            "column",
            "ua, cN, vN or sN",
        ),
    ],
)
def test_syntax_errors_name_position_and_expectation(text, where, what):
    with pytest.raises(SpecSyntaxError) as e:
        parse_spec(text)
    assert where in str(e.value) and what in str(e.value)


@pytest.mark.parametrize(
    "text,msg",
    [
        ("Matmul(4x4, f32)", "4 dimensions"),
        (
            "(Matmul(1x4x4x4, (f32, VRF, row_major, v3), (f32, GL, row_major), (f32, GL, row_major)), [1,2,3,4])",
            "vector registers hold",
        ),
        (
            "(Matmul(1x2x2x2, (f32, VRF, row_major, v8), (f32, GL, row_major), (f32, GL, row_major)), [1,2,3,4])",
            "does not divide",
        ),
        ("(Matmul(1x2x2x2, (f32, GL, row_major), (f32, GL, row_major)), [1,2,3,4])", "3 tensor specs"),
    ],
)
def test_spec_errors(text, msg):
    with pytest.raises((SpecError, SpecSyntaxError), match=msg):
        parse_spec(text)
