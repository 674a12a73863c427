"""The differential fuzzer (benchmarks/fuzz.py, issue 57) in the suite: random specs of
every declared kind, Compose pipelines, corner shapes, layouts, levels, dtypes and memory
limits, each program proved, compiled, run against numpy and held to one answer from
`verify` and codegen; a few cases by default, more in the slow set, and every case the
fuzzer saved (tests/fixtures/fuzz_regressions.txt) replayed. (verify against codegen on
programs with wrong claims: tests/test_verify.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

FIXTURES = Path(__file__).resolve().parent / "fixtures"
REGRESSIONS = [
    ln
    for ln in (FIXTURES / "fuzz_regressions.txt").read_text().splitlines()
    if ln.strip() and not ln.lstrip().startswith("#")
]


def _fuzz(fuzz, n: int, max_volume: int, derandomize: bool, targets=None):
    """Run n hypothesis examples of the fuzzer; a failure is shrunk and reported with
    its case line (add it to tests/fixtures/fuzz_regressions.txt once fixed)."""
    targets = tuple(targets or fuzz.host_targets())

    @settings(
        max_examples=n,
        deadline=None,
        derandomize=derandomize,
        database=None,
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=fuzz.cases(targets, max_volume), data=st.data())
    def run(case, data):
        o = fuzz.run_case(case, lambda k: data.draw(st.integers(0, k)))
        assert o.status != "fail", str(o)

    run()


@pytest.mark.slow  # ~13 s: CI's short fuzz run, with the slow tests
def test_fuzz_a_few_random_specs(benchmark_script):
    _fuzz(benchmark_script("fuzz"), 6, max_volume=256, derandomize=True, targets=("avx2",))


@pytest.mark.slow  # ~2 min
def test_fuzz_many_random_specs(benchmark_script):
    _fuzz(benchmark_script("fuzz"), 40, max_volume=2048, derandomize=False)


@pytest.mark.slow  # ~1 min in all: with the slow tests, so the default suite stays under 5 minutes
@pytest.mark.parametrize("line", REGRESSIONS)
def test_fuzz_regressions(benchmark_script, line):
    fuzz = benchmark_script("fuzz")
    case = fuzz.Case.parse(line)
    if case.target not in fuzz.host_targets():
        pytest.skip(f"{case.target} programs do not run on this CPU")
    o = fuzz.run_case(case)
    assert o.status == "ok", str(o)


def test_fuzz_cases_round_trip(benchmark_script):
    fuzz = benchmark_script("fuzz")
    c = fuzz.Case("avx2", "Conv(1x16x8x5x5x1x1, f32)", 2, (3, 0, 1))
    assert fuzz.Case.parse(c.line()) == c
    assert fuzz.Case.parse(fuzz.Case("avx512", "Zero(3, f32)").line()) == fuzz.Case("avx512", "Zero(3, f32)")
    assert fuzz.corner_sizes(8)[:4] == [1, 2, 3, 8] and {7, 9, 15, 16, 17} <= set(fuzz.corner_sizes(8))
