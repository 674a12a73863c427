"""The calibrated AVX2 target (benchmarks/calibrate.py) is a target like any other, and
its costs are the linear function of its numbers that calibration fits."""
import random
import sys
from pathlib import Path

import numpy as np

from morello_asp import parse_spec
from morello_asp.codegen.api import compile_many
from morello_asp.solver.engine import get_engine
from morello_asp.synthesis import make_search, synthesize
from morello_asp.target import get_target

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from alternatives import recost, sample_program  # noqa: E402
from calibrated_target import CostTerms  # noqa: E402


def test_calibrated_target_synthesizes_a_matmul_that_matches_numpy():
    tgt = get_target("avx2_calibrated")
    assert tgt.name == "avx2_calibrated"
    imp = synthesize("Matmul(4x4x4, f32)", target="avx2_calibrated")
    assert imp.is_complete
    fn = imp.compile(target="avx2_calibrated")
    rng = np.random.default_rng(3)
    a = rng.random((4, 4), dtype=np.float32)
    b = rng.random((4, 4), dtype=np.float32)
    np.testing.assert_allclose(fn(a, b), a @ b, rtol=1e-5, atol=1e-5)


def test_cost_is_the_linear_function_calibration_fits():
    """features(program) . numbers == the cost the calibrated target's logic files give,
    for programs of different shapes (so kernel units, trips and lines all vary)."""
    search = make_search("avx2")
    engine = get_engine("avx2_calibrated")
    terms = CostTerms(get_target("avx2"))
    text = Path(engine.target.files[0]).read_text()
    numbers = {}
    for line in text.splitlines():
        if line.startswith("tgt_kernel_calibration("):
            k, f, p = line[len("tgt_kernel_calibration("):-2].split(", ")
            numbers[f"{k}.fixed"], numbers[f"{k}.per_unit"] = int(f), int(p)
    for lv in engine.target.levels:
        numbers[f"{lv.name}.line"] = lv.weight
    theta = [numbers[n] for n in terms.names]
    rng = random.Random(0)
    spec = parse_spec("Matmul(4x4x4, f32)")
    progs = [sample_program(search, spec, rng, k=4, p_opt=0.3, depth=8) for _ in range(6)]
    for imp in progs:
        want = sum(a * b for a, b in zip(terms.features(imp), theta))
        assert recost(imp, engine) == want
    for fn in compile_many(progs):
        err, tol = fn.check()
        assert err <= tol
