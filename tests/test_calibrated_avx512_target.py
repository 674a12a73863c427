"""The calibrated AVX-512 target (`benchmarks/calibrate.py --target avx512`, fitted on an
AVX-512 CPU) is a target like any other: avx512's files but for the numbers calibration
replaces, its costs the linear function of them that calibration fits. Its programs are
built and costed anywhere and run where the CPU has avx512f (skipped elsewhere, naming
the missing flags). Which files a calibrated copy keeps is read from the base target's
includes (codegen/calibration.py, layout_of), for avx2 and avx512 alike."""

import random
from pathlib import Path

import numpy as np
import pytest

from morello_asp import parse_spec
from morello_asp.codegen.api import compile_many
from morello_asp.codegen.calibration import (
    LOOP,
    NO_VECTORIZE,
    CostTerms,
    layout_of,
    read_calibration,
    recost,
    rel_name,
    rewritten,
    sample_program,
)
from morello_asp.codegen.ctarget import get_ctarget
from morello_asp.errors import TargetError
from morello_asp.solver.search.engine import get_engine
from morello_asp.synthesis import make_search, synthesize
from morello_asp.target import ENCODINGS, get_target

NAME = "avx512_calibrated"


def _run_here(name: str = NAME) -> None:
    missing = get_ctarget(name).missing_cpu_flags()
    if missing:
        pytest.skip(f"this CPU lacks {', '.join(missing)} (/proc/cpuinfo): {name}'s programs are built, not run")


def test_avx512_calibrated_is_avx512_with_measured_numbers():
    """Same levels (but their weights), vectors, threads and moves as avx512; avx512's
    gcc flags plus the vectorizers off; the CPU flags avx512 needs (so `targets` says
    this one needs AVX-512 too); a number for every kernel it keeps, masked tails too."""
    cal, base = get_ctarget(NAME), get_ctarget("avx512")
    t, b = cal.target, base.target
    assert t.name == NAME
    shape = [(lv.name, lv.index, lv.capacity, lv.unit, lv.kind, lv.prefix) for lv in t.levels]
    assert shape == [(lv.name, lv.index, lv.capacity, lv.unit, lv.kind, lv.prefix) for lv in b.levels]
    assert t.vector_types == b.vector_types and t.threads == b.threads and t.move_dests == b.move_dests
    assert set(cal.flags) == set(base.flags) | set(NO_VECTORIZE)
    assert set(cal.cpu_flags) == set(base.cpu_flags) and "avx512f" in cal.cpu_flags
    numbers = read_calibration(t)
    assert set(numbers.kernels) == set(layout_of(b.files[0]).kernels)
    assert "masked_broadcast_vec_mult_add" in numbers.kernels
    assert all(f >= 1 for f, _ in numbers.kernels.values()) and numbers.loop_per_iter >= 1
    assert all(lv.weight >= 1 for lv in t.levels if not lv.is_register)


def test_targets_lists_it_and_the_cpu_flags_it_needs(capsys):
    from morello_asp.cli import main

    assert main(["targets", "-v"]) == 0
    lines = capsys.readouterr().out.splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.startswith(NAME + " "))
    why = get_ctarget(NAME).cannot_run()
    assert ("runs here" in lines[i]) if not why else ("does not run here" in lines[i] and "avx512f" in lines[i])
    assert "cpu flags avx2 avx512bw avx512f fma" in lines[i + 1]


@pytest.mark.parametrize(("name", "base"), [("avx2_calibrated", "avx2"), (NAME, "avx512")])
def test_the_shipped_file_is_what_calibration_writes_from_its_numbers(name, base):
    """The file is its numbers (header, levels' weights, overheads, kernels) over the base
    target's files as they are: the code path that wrote it writes it again. After an
    edit to the base's files: `python benchmarks/calibrate.py --target BASE --rewrite`."""
    path = Path(get_target(name).files[0])
    assert rewritten(path, get_target(base)) == path.read_text(), (
        f"{path.name} is stale against {base}'s files: python benchmarks/calibrate.py --target {base} --rewrite"
    )


def test_the_layout_is_read_from_the_base_targets_includes():
    """What a calibrated copy keeps: the machine and ISA copied, the kernel files with
    size terms copied without kernel_cost, the size terms and C included; the kernel
    files without size terms (mixed precision, softmax, convolutions) and their C out."""
    avx2 = layout_of(get_target("avx2").files[0])
    assert [rel_name(f) for f in avx2.copied] == ["avx2/machine.lp", "avx2/isa.lp"]
    assert [rel_name(f) for f in avx2.kernel_files] == ["avx2/kernels.lp"]
    assert [rel_name(f) for f in avx2.included] == ["avx2/kernel_units.lp", "avx2/kernels_c.lp", "c_scalar.lp"]
    avx512 = layout_of(get_target("avx512").files[0])
    assert [rel_name(f) for f in avx512.copied] == ["avx512/machine.lp", "avx512/isa.lp"]
    assert [rel_name(f) for f in avx512.kernel_files] == ["avx2/kernels.lp", "avx512/kernels_masked.lp"]
    assert [rel_name(f) for f in avx512.included] == [
        "avx512/kernel_units.lp",
        "avx2/kernel_units.lp",
        "avx512/kernels_c.lp",
        "c_scalar.lp",
    ]
    assert set(avx512.kernels) == set(avx2.kernels) | {"masked_broadcast_vec_mult_add"}
    for lay in (avx2, avx512):
        out = {rel_name(f) for f in lay.left_out}
        assert {"avx2/kernels_mixed.lp", "avx2/kernels_mixed_c.lp", "avx2/softmax_kernels.lp"} <= out
        assert {"avx2/conv_kernels.lp", "avx2/conv_kernels_c.lp"} <= out


def test_a_kernel_file_with_kernels_missing_size_terms_is_refused(tmp_path):
    """Some of a kernel file's kernels with size terms, others without: calibration
    would drop kernels silently or fit nothing for them; it names them instead."""
    targets = ENCODINGS / "targets"
    (tmp_path / "kernels.lp").write_text(
        (targets / "avx2" / "kernels.lp").read_text() + "\ntgt_kernel(extra_kernel).\n"
    )
    (tmp_path / "kernel_units.lp").write_text((targets / "avx2" / "kernel_units.lp").read_text())
    entry = tmp_path / "mine.lp"
    entry.write_text(
        f'#include "{targets}/avx2/machine.lp".\n#include "{targets}/avx2/isa.lp".\n'
        f'#include "kernels.lp".\n#include "{targets}/avx2/kernels_c.lp".\n'
    )
    with pytest.raises(TargetError, match="kernels extra_kernel have no size term"):
        layout_of(entry)


@pytest.mark.slow  # samples, costs and compiles a dozen avx512 programs
def test_cost_is_the_linear_function_calibration_fits():
    """features(program) . numbers == the cost avx512_calibrated's logic files give, for
    programs of avx512's search of different shapes (kernel units, loop trips and lines
    all vary, masked tails among them); they match numpy where the CPU runs them."""
    search = make_search("avx512")
    engine = get_engine(NAME)
    terms = CostTerms(get_target("avx512"))
    cal = read_calibration(engine.target)
    theta = terms.theta(cal)
    rng = random.Random(0)
    progs = [
        sample_program(search, parse_spec(text, "avx512"), rng, k=4, p_opt=0.3, depth=8)
        for text in ("Matmul(4x4x4, f32)", "Matmul(2x8x7, f32)")
        for _ in range(5)
    ]
    # and the optimum of a spec in L1 with a row of 7, a masked tail (since memory's line
    # weight fell to 4, avx512's cheapest rewrites of the two above no longer move rows into
    # L1, where the masked kernel applies)
    progs.append(
        search.build(parse_spec(f"Matmul(1x2x8x7, {', '.join(['(f32, L1, row_major)'] * 3)}, serial)", "avx512"))
    )
    iters, kernels = set(), set()
    for imp in progs:
        f = terms.features(imp)
        iters.add(f[terms.names.index(LOOP)])
        kernels |= {n.split(".")[0] for n, x in zip(terms.names, f) if x and n.endswith(".fixed")}
        assert recost(imp, engine) == sum(a * b for a, b in zip(f, theta))
    assert len(iters) > 1 and max(iters) > 0  # the loop term varies, so it is really in the cost
    assert "masked_broadcast_vec_mult_add" in kernels
    fns = compile_many(progs, NAME)  # built on any CPU
    _run_here()
    for fn in fns:
        err, tol = fn.check()
        assert err <= tol


def test_avx512_calibrated_synthesizes_matmuls_that_match_numpy():
    """The default search on the calibrated target, a masked tail (n = 7) included."""
    for text in ("Matmul(4x4x4, f32)", "Matmul(2x3x7, f32)"):
        imp = synthesize(text, target=NAME)
        assert imp.is_complete and imp.spec.target is get_target(NAME)
        fn = imp.compile()
        _run_here()
        rng = np.random.default_rng(3)
        m, k, n = imp.spec.shape[1:]
        a = rng.random((m, k), dtype=np.float32)
        b = rng.random((k, n), dtype=np.float32)
        np.testing.assert_allclose(fn(a, b), a @ b, rtol=1e-5, atol=1e-5)
