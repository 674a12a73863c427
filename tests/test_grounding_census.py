"""Where a search's work goes: benchmarks/grounding.py --census (each rule's body
matches: the distinct bindings of its positive atoms, by file and line) and
benchmarks/synthesis.py --classes (the classes grounded, by kind and operand levels)."""

from __future__ import annotations


def test_census_counts_each_rules_body_matches(tmp_path, benchmark_script):
    rules = tmp_path / "r.lp"
    rules.write_text(
        "% three rules\nq(X, Y) :- p(X), r(Y).\ns(X) :- p(X), r(_), X > 1.\nt(N) :- N = #count { X: p(X) }.\n"
    )
    rows, total, _ = benchmark_script("grounding").census((str(rules),), "p(1..3). r(1..2).")
    got = {where: (n, text) for n, where, text in rows}
    assert got[f"{tmp_path.name}/r.lp:2"] == (6, "q(X, Y) :- p(X), r(Y).")  # 3 x 2 bindings
    assert got[f"{tmp_path.name}/r.lp:3"][0] == 2  # X in 2..3; the two r(_) are not told apart
    assert got[f"{tmp_path.name}/r.lp:4"][0] == 1  # no positive atom: one match
    assert total == 6 + 2 + 1 and [r[0] for r in rows] == sorted((r[0] for r in rows), reverse=True)


def test_synthesis_benchmark_groups_every_class_it_grounded(benchmark_script):
    """benchmarks/synthesis.py --classes: the groups (kind, operand levels) cover
    exactly the classes the search grounded, at the target's levels."""
    r = benchmark_script("synthesis").run(2)
    err, tol = r["program"].compile().check()  # the program it found matches numpy
    assert err <= tol
    assert sum(r["groups"].values()) == r["classes"] > 0
    assert r["groups"][("MatmulAccum", ("GL", "GL", "GL"))] > 0
    assert {"RF", "L1", "GL"} <= {lv for _, lvs in r["groups"] for lv in lvs} <= {"RF", "VRF", "L1", "GL"}


def test_census_of_a_cold_search_names_the_rule_files(benchmark_script, capsys):
    """On the real rules: every rule row names a file and line of encodings/, and the
    per-file totals add up to the matches in all."""
    import re

    from morello_asp.solver.search.engine import Engine

    grounding = benchmark_script("grounding")
    program = grounding.print_census(2, 1000, Engine("avx2")._files)
    err, tol = program.compile().check()  # the search the census came from found a correct program
    assert err <= tol
    out = capsys.readouterr().out
    total = int(re.search(r"([\d,]+) body matches in all", out).group(1).replace(",", ""))
    rules_part, files_part = out.split("| body matches | share | file |")
    assert re.search(r"`rules/tile\.lp:\d+` ", rules_part)
    files = re.findall(r"^\| ([\d,]+) \| [\d.]+% \| `([\w/.]+\.lp)` \|$", files_part, re.M)
    assert ("rules/tile.lp" in {f for _, f in files}) and sum(int(n.replace(",", "")) for n, _ in files) == total


def test_pruning_benchmark_bounds_are_admissible_and_prune_at_a_tight_upper_bound(benchmark_script):
    """benchmarks/pruning.py: no spec's lower bound exceeds its optimum; with the optimum
    as upper bound fewer classes are reached than with a looser one, and with no bound
    at all every class the exact search needed (none more)."""
    pruning = benchmark_script("pruning")
    r = pruning.run(4, [1.0, 1.25, 1e9])
    err, tol = r["program"].compile().check()  # the exact search's program matches numpy
    assert err <= tol
    assert r["over"] == [] and r["extra"] == 0
    assert r["rate"]["Matmul"] == r["rate"]["MatmulAccum"] > 0  # Matmul's work is done by MatmulAccum kernels
    got = r["reached"]
    assert 0 < got[1.0] < got[1.25] < got[1e9] == r["classes"], got
