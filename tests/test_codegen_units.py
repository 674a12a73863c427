"""Units under codegen: index simplification and layout conversion (properties)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from morello_asp.codegen.convert import from_buffer, to_buffer
from morello_asp.codegen.simplify import VarRange, simplify
from morello_asp.expr import Const, Var
from morello_asp.layout import Layout

LAYOUTS = ["row_major", "col_major", "[0, 2, 1, 2 p(8)]", "[0, 2, 1, 2 p(4)]", "[0, 1, 2, 2 oe(4)]"]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(LAYOUTS), st.integers(1, 4), st.integers(1, 6), st.integers(1, 3), st.integers(0, 3))
def test_simplify_preserves_values(lay, step_k, n_k, step_j, const):
    """Simplified layout offsets equal the originals for every loop-variable value."""
    layout = Layout.parse(lay, 3)
    shape = (2, 8, 16)
    tile_n = 4 * step_j
    env = {
        "k0": VarRange(0, step_k * (n_k - 1), step_k),
        "n0": VarRange(0, 16 - tile_n, tile_n),
        "j": VarRange(0, 3, 1),
    }
    e = layout.buffer_expr(shape, [Const(1), Var("k0") + const % 2, Var("n0") + Var("j")])
    s = simplify(e, env)
    for k0 in range(0, step_k * n_k, step_k):
        if k0 + const % 2 >= 8:
            continue
        for n0 in range(0, 16 - tile_n + 1, tile_n):
            for j in range(4):
                vals = {"k0": k0, "n0": n0, "j": j}
                assert s.eval(vals) == e.eval(vals)


def test_simplify_removes_pack_arithmetic():
    layout = Layout.parse("[0, 2, 1, 2 p(16)]", 3)
    e = layout.buffer_expr((1, 512, 512), [Const(0), Var("k0"), Var("n0") + Var("j")])
    env = {"k0": VarRange(0, 511), "n0": VarRange(0, 496, 16), "j": VarRange(0, 15)}
    assert simplify(e, env).to_c() == "(j + 16 * k0 + 512 * n0)"


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(LAYOUTS), st.sampled_from([(1, 8, 16), (2, 4, 8), (1, 16, 8)]))
def test_layout_buffers_round_trip(lay, shape):
    layout = Layout.parse(lay, 3)
    a = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    buf = to_buffer(a, layout, shape)
    assert buf.ctypes.data % 64 == 0
    assert buf.size == layout.buffer_volume(shape)
    np.testing.assert_array_equal(from_buffer(buf, layout, shape), a)


def test_loop_across_packs_is_split_so_no_division_is_left():
    """Packing B value by value in one loop over a row: the loop runs as packs of 16
    (outer) and values (inner), so the pack's / and % simplify away; still exact."""
    from morello_asp import parse_spec

    mv = parse_spec("(Move(1x4x32, (f32, L1, row_major), (f32, L1, [0, 2, 1, 2 p(16)]), serial), [16, 16, 1024, 1024])")
    imp = mv.tile([1, 1, 32]).tile([1, 1, 1]).select("ValueAssign")
    src = imp.to_c()
    body = src[src.index("void kernel(") : src.index("kernel_bench")]
    assert "/" not in body.replace("/*", "").replace("*/", "") and "%" not in body
    err, tol = imp.compile().check()
    assert err <= tol
