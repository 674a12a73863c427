"""Software prefetch of cache moves (codegen/prefetch.py): the C of a program prefetches
the lines of the tile a cache move brings in at the next iteration of its loop, spread
over the loop nest inside it; the program still matches numpy, with and without it.

The fixture is the program the default search finds for Matmul(1024x1024x1024, f32)
(`morello-asp query ... --out`): for each 6-row strip of A it moves a 6 x 128 tile
into L1 as it is (rows 4 KB apart) and a 6 x 64 tile of the output."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from morello_asp.recipes import fast_matmul
from morello_asp.serialize import load

FIXTURE = Path(__file__).parent / "fixtures" / "matmul_1024_default.json"
# The program the default search found for Matmul(2048x2048x2048, f32) on avx512
# (2026-11-27): 8 x 32 register blocks in 8-row strips, the same loops as avx2's; its specs
# state an L2 limit (8192 lines) since avx512 declares that level (2026-11-29), unused here.
AVX512 = Path(__file__).parent / "fixtures" / "matmul_2048_avx512_default.json"


def _tables(c: str) -> dict[str, list[int]]:
    return {
        m[1]: [int(x) for x in m[2].split(", ")]
        for m in re.finditer(r"static const int (\w+)\[\d+\] = \{([^}]*)\};", c)
    }


def test_the_next_strip_of_a_is_prefetched_one_line_a_trip_of_the_kernels_loop():
    imp = load(FIXTURE)
    c = imp.to_c()
    tables = _tables(c)
    # A's next 6 x 128 tile: 6 rows 1024 floats apart, 8 lines (16 floats) each, the
    # first line of every row first.
    want = [r * 1024 + 16 * j for j in range(8) for r in range(6)]
    assert tables["pf_lhs"] == want
    # ... spread over the loop nest inside the strip, the 4 trips of the 16-column loop
    # times the 128 of the k loop inside it: one line in each of the first 48 trips,
    # from the strip 6 rows on, and only while there is one. The k loop runs as two:
    # its trips before the 48th of the nest prefetch, the rest test nothing.
    split = (
        "int k1_pf = 48 - (n1 / 16) * 128;\n"
        + " " * 28
        + "if (k1_pf < 0) k1_pf = 0;\n"
        + " " * 28
        + "if (k1_pf > 128) k1_pf = 128;\n"
        + " " * 28
        + "for (int k1 = 0; k1 < k1_pf; k1++) {"
    )
    assert split in c
    k_loop = c[c.index("for (int k1 = 0; k1 < k1_pf; k1++) {") :]
    head = k_loop[: k_loop.index("/* vrhs")]
    assert "if (m0 < 1014) {" in head
    line = "_mm_prefetch((const char *)((lhs + k0 + 1024 * m0 + 6144) + pf_lhs[(n1 / 16) * 128 + k1]), _MM_HINT_T0);"
    assert line in head
    # The output's next 6 x 64 tile likewise: 6 rows of 4 lines, in the first 24 trips.
    assert tables["pf_out"] == [r * 1024 + 16 * j for j in range(4) for r in range(6)]
    assert "if (m0 < 1014 && (n1 / 16) * 128 + k1 < 24) {" in head
    # The rest of the k loop: the same body, no prefetch.
    rest = c[c.index("for (int k1 = k1_pf; k1 < 128; k1++) {") :]
    rest = rest[: rest.index("_mm256_storeu_ps((out")]
    assert "_mm_prefetch" not in rest and rest.count("_mm256_fmadd_ps") == 12
    # Nothing between the strip loop and the k loop (the loads of the register block).
    strip = c[c.index("for (int m0 = 0;") : c.index("for (int k1 = 0;")]
    assert "_mm_prefetch" not in strip
    err, tol = imp.compile().check()
    assert err <= tol


def test_the_prefetching_program_matches_numpy_and_so_does_the_one_without(monkeypatch):
    imp = load(FIXTURE)
    err, tol = imp.compile().check()
    assert err <= tol
    monkeypatch.setenv("MORELLO_ASP_PREFETCH", "off")
    c = imp.to_c()
    assert "_mm_prefetch" not in c
    err, tol = imp.compile().check()
    assert err <= tol


def test_unsplit_prefetches_in_one_loop_testing_the_trip_and_matches_numpy(monkeypatch):
    """MORELLO_ASP_PREFETCH=unsplit: the C before loops were split (benchmarks/programs.py
    --prefetch-ab times it): one k loop that tests the trip number in every trip."""
    monkeypatch.setenv("MORELLO_ASP_PREFETCH", "unsplit")
    imp = load(FIXTURE)
    c = imp.to_c()
    assert "k1_pf" not in c and "for (int k1 = 0; k1 < 128; k1++) {" in c
    assert "if (m0 < 1014 && (n1 / 16) * 128 + k1 < 48) {" in c
    err, tol = imp.compile().check()
    assert err <= tol


def test_a_loop_over_less_than_the_l2_gets_no_prefetch():
    """avx2 prefetches only in loops whose operands span 512 KiB or more
    (`tgt_c_prefetch/3`): a smaller loop's tiles stay in the L2. The hand 6 x 16 recipe
    at 48 x 64 x 64 has none, nor has the fixture's loop that packs a 128 x 64 panel of B."""
    small = fast_matmul(48, 64, 64)
    assert "_mm_prefetch" not in small.to_c()
    err, tol = small.compile().check()
    assert err <= tol
    c = load(FIXTURE).to_c()
    pack = c[c.index("for (int d1_0 = 0;") : c.index("for (int m0 = 0;")]
    assert "_mm_prefetch" not in pack


def test_a_tile_that_is_one_run_is_left_to_the_hardware(monkeypatch):
    """With the target's threshold at 0 bytes, the hand recipe's k loop still gets no
    prefetch: it moves single values of A and 1 x 16 rows of packed B into L1, each one
    run of memory that the next one follows (a prefetch would cost a load slot in the
    hottest loop). Its 6 x 16 output tile, rows apart, is prefetched once per strip,
    before the k loop."""
    from dataclasses import replace

    from morello_asp.codegen import emit

    real = emit.get_ctarget

    def no_threshold(*a, **k):
        ct = real(*a, **k)
        return replace(ct, prefetch={lv: (0, code) for lv, (_, code) in ct.prefetch.items()})

    monkeypatch.setattr(emit, "get_ctarget", no_threshold)
    imp = fast_matmul(48, 64, 64)
    c = imp.to_c()
    k_loop = c[c.index("for (int k0 = 0; k0 < 64; k0++)") :]
    k_loop = k_loop[: k_loop.index("_mm256_storeu_ps((out")]
    assert "_mm_prefetch" not in k_loop
    before = c[: c.index("for (int k0 = 0; k0 < 64; k0++)")]
    lines = re.findall(r"_mm_prefetch\(\(const char \*\)\(\(out \+ n0 \+ 64 \* m0 \+ 384\) \+ (\d+)\)", before)
    assert sorted(int(x) for x in lines) == [64 * r for r in range(6)]
    err, tol = imp.compile().check()
    assert err <= tol


def test_a_bad_switch_is_refused(monkeypatch):
    from morello_asp.errors import InputError

    monkeypatch.setenv("MORELLO_ASP_PREFETCH", "sometimes")
    with pytest.raises(InputError, match="MORELLO_ASP_PREFETCH"):
        fast_matmul(12, 16, 16).to_c()


def test_no_prefetch_for_the_next_trip_of_a_parallel_loop(tmp_path):
    """The next trip of an OpenMP loop runs on another core: prefetching its tile here
    would only fill this core's cache. The fixture with its 6-row strip loop made
    parallel keeps only the boundary strip's prefetch (for the next block of k, which
    this thread runs), and still matches numpy."""
    import json

    d = json.loads(FIXTURE.read_text())
    strips = d["program"]["stmts"][1]["body"]["body"]["body"]
    assert strips["node"] == "loop" and strips["tile"] == [1, 6, 128, 64]
    strips["parallel"] = True
    path = tmp_path / "parallel.json"
    path.write_text(json.dumps(d))
    imp = load(path)
    c = imp.to_c()
    assert "#pragma omp parallel for" in c
    assert set(_tables(c)) == {"pf_lhs"}  # the boundary's 4 x 128 tile of A at the next k
    assert len(_tables(c)["pf_lhs"]) == 32
    err, tol = imp.compile().check()
    assert err <= tol


def test_the_standalone_program_prefetches_too_and_builds():
    """`--emit c --standalone` writes the same function: its prefetch tables (static
    arrays inside loops) must be C99 the target's compiler accepts."""
    from morello_asp.codegen.standalone import build_executable

    imp = load(FIXTURE)
    assert "pf_lhs" in imp.to_c(standalone=True)
    assert build_executable(imp).exists()


def test_avx512_spreads_a_strips_tiles_over_every_trip_of_the_kernels_loop():
    """avx512 prefetches in loops over 1 MiB (the L2 of the machines it models). Its
    strip moves 8 x 128 of A (64 lines) and 8 x 64 of the output (32 lines): spread
    over the first loop inside alone, that was 48 prefetches in each of its 2 trips, a
    burst (8% slower at 1024^3 when tried); now one line in each of the first trips of
    the 2 x 128 of the column and k loops."""
    c = load(AVX512).to_c()
    tables = _tables(c)
    assert tables["pf_lhs"] == [r * 2048 + 16 * j for j in range(8) for r in range(8)]
    assert tables["pf_out"] == [r * 2048 + 16 * j for j in range(4) for r in range(8)]
    k_loop = c[c.index("for (int k1 = 0; k1 < k1_pf; k1++) {") :]
    head = k_loop[: k_loop.index("/* vrhs")]
    assert "int k1_pf = 64 - (n1 / 32) * 128;" in c
    assert "if (m0 < 2040) {" in head
    assert "if (m0 < 2040 && (n1 / 32) * 128 + k1 < 32) {" in head
    assert c.count("_mm_prefetch") == 2


def test_the_avx512_program_with_prefetch_matches_numpy():
    from morello_asp.codegen.ctarget import get_ctarget

    missing = get_ctarget("avx512").missing_cpu_flags()
    if missing:
        pytest.skip(f"this CPU lacks {', '.join(missing)}: avx512 programs do not run here")
    err, tol = load(AVX512).compile().check()
    assert err <= tol
