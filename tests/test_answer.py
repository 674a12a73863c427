"""Reading clingo's printed answer (solver/logic/answer.py) on answers written by hand: the
shapes the rules print, and the ones a user's rule file may (deep terms, strings with
spaces, commas and quotes)."""

from morello_asp.solver.logic.answer import errors, parse

DEEP = "f(g(h(i(1))),x)"  # four levels of parentheses

ANSWER = (
    # children before their actions, and in no particular order, as clingo prints them
    f"child_dim(1,{DEEP},0,1,4) child_dim(1,{DEEP},0,0,2) child_kind(1,{DEEP},0,matmul_accum)\n"
    f"child_operand(1,{DEEP},0,1,f32,l1,1,2,0,7) child_operand(1,{DEEP},0,0,f32,gl,0,1,8,3) "
    f"child_stride(1,{DEEP},0,1,12) child_serial(1,{DEEP},0) action(1,{DEEP}) "
    "action(0,to_accum) child_kind(0,to_accum,1,zero) child_dim(0,to_accum,1,0,8) "
    'bad(0,move(2,vrf,2,8),"no such move,  here: \\"vrf\\" (twice)") '
    'bad(0,move(2,vrf,2,8),"and another") bad(1,select(k),"x") '
    "alloc(1,move(0,l1,2,0),l1,16) alloc(1,move(0,l1,2,0),l1,16) kernel_cost(0,value_zero,3) "
    # a child of an action that was not taken is not a child of anything
    "child_kind(0,tile1(2,1,0),0,matmul)\nSATISFIABLE\n"
)


def test_answer_atoms_are_grouped_per_spec_action_and_child():
    (acts0, bads0, k0, al0), (acts1, bads1, k1, al1) = parse(ANSWER, 2)
    assert acts1 == {
        DEEP: {
            0: (
                "matmul_accum",
                (2, 4),
                (("f32", "gl", "0", "1", "8", "3", ""), ("f32", "l1", "1", "2", "0", "7", "12")),
                True,
            )
        }
    }
    assert acts0 == {"to_accum": {1: ("zero", (8,), (), False)}}
    assert bads0 == {"move(2,vrf,2,8)": ['no such move,  here: \\"vrf\\" (twice)', "and another"]}
    assert bads1 == {"select(k)": ["x"]}
    assert k0 == {"value_zero": 3} and k1 == {}
    assert al1 == {"move(0,l1,2,0)": ("l1", 16)} and al0 == {}


def test_error_atoms_are_read_with_their_text():
    assert errors(ANSWER) == []
    assert errors('error("the tile, of size 3, does not divide") error(bad_dim(2)) SATISFIABLE') == [
        "the tile, of size 3, does not divide",
        "bad_dim(2)",
    ]


def test_a_child_like_its_parent_keeps_only_what_its_atoms_state():
    text = (
        "action(0,tile1(1,4,0)) child_like(0,tile1(1,4,0),0) child_dim(0,tile1(1,4,0),0,1,4) "
        "child_operand(0,tile1(1,4,0),0,0,f32,gl,1,1,0,2) child_stride(0,tile1(1,4,0),0,0,9) "
        "action(0,move(1,vrf,2,8)) child_like(0,move(1,vrf,2,8),1) "
        "action(0,to_accum) child_like(0,to_accum,1) child_kind(0,to_accum,1,matmul_accum) SATISFIABLE"
    )
    ((acts, _, _, _),) = parse(text, 1)
    assert acts == {
        "tile1(1,4,0)": {0: (None, ((1, 4),), ((0, ("f32", "gl", "1", "1", "0", "2", "9")),), False, None)},
        "move(1,vrf,2,8)": {1: (None, (), (), False, None)},
        "to_accum": {1: (None, (), (), False, "matmul_accum")},
    }


def test_a_child_that_states_nothing_is_its_parent(tmp_path):
    """Engine._like completes a child_like/3 child from its parent's fields, written as
    the rules would state them: for a child stating nothing, the key must give back the
    parent's own class (stride, contiguousness, alignment, vector size, packed layout)."""
    from morello_asp import parse_spec
    from morello_asp.solver.search.engine import Engine

    tracked = tmp_path / "tracked.lp"
    tracked.write_text("track_alignment.\n")
    for rules, text in [
        (
            (),
            "(MatmulAccum(1x4x16x16, (f32, GL, row_major), (f32, GL, row_major, c1, s12), (f32, GL, row_major, c1)), "
            "[16, 16, 1024, 33554432])",
        ),
        (
            (),
            "(MatmulAccum(1x4x128x16, (bf16, L1, row_major), (bf16, L1, col_major, c0), "
            "(f32, VRF, row_major, v8), serial), [64, 1024, 32768, 1073741824])",
        ),
        (
            (tracked,),
            "(MatmulAccum(1x4x128x16, (bf16, L1, row_major), (bf16, L1, col_major, ua, c0), "
            "(f32, VRF, row_major, v8), serial), [64, 1024, 32768, 1073741824])",
        ),
        ((), "Matmul(8x1024x8, f32)"),
        ((), "Softmax1(4x32, f32)"),
        ((), "Conv(1x2x2x3x3x2x2, f32)"),
    ]:
        engine = Engine("avx2", rules)
        limited = parse_spec(text)
        assert engine.expand(limited)  # read the spec's answer (its layouts are numbered)
        spec = limited.without_limits
        child = engine._child(engine._like(spec, (None, (), (), False, None)))
        assert child == spec, text


def test_equal_values_in_an_answer_are_one_object():
    """The same operand and the same child recur across a batch; read once, they pickle
    once when the answer goes to the search's process."""
    import pickle

    op = "f32,l1,1,2,0,7"
    text = " ".join(
        f"action({s},tile1(1,{t},0)) child_like({s},tile1(1,{t},0),0) child_dim({s},tile1(1,{t},0),0,1,4) "
        f"child_operand({s},tile1(1,{t},0),0,0,{op})"
        for s in range(3)
        for t in (4, 8)
    )
    parsed = parse(text + " SATISFIABLE", 3)
    kids = [k for acts, _, _, _ in parsed for per in acts.values() for k in per.values()]
    assert len(kids) == 6 and all(k is kids[0] for k in kids)  # one child, stated six times
    assert kids[0] == (None, ((1, 4),), ((0, ("f32", "l1", "1", "2", "0", "7", "")),), False, None)
    once = len(pickle.dumps(kids[0]))
    assert len(pickle.dumps(parsed)) < len(pickle.dumps(parsed[0])) + 2 * once
