"""benchmarks/grounding.py --census: the body-match count it gives each rule is the
number of distinct bindings of the rule's positive atoms, by file and line."""

from __future__ import annotations


def test_census_counts_each_rules_body_matches(tmp_path, benchmark_script):
    rules = tmp_path / "r.lp"
    rules.write_text(
        "% two rules\nq(X, Y) :- p(X), r(Y).\ns(X) :- p(X), r(_), X > 1.\nt(N) :- N = #count { X: p(X) }.\n"
    )
    rows, total, _ = benchmark_script("grounding").census((str(rules),), "p(1..3). r(1..2).")
    got = {where: (n, text) for n, where, text in rows}
    assert got[f"{tmp_path.name}/r.lp:2"] == (6, "q(X, Y) :- p(X), r(Y).")  # 3 x 2 bindings
    assert got[f"{tmp_path.name}/r.lp:3"][0] == 2  # X in 2..3; the two r(_) are not told apart
    assert got[f"{tmp_path.name}/r.lp:4"][0] == 1  # no positive atom: one match
    assert total == 6 + 2 + 1 and [r[0] for r in rows] == sorted((r[0] for r in rows), reverse=True)
