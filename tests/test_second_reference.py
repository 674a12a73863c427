"""The derived numpy reference (codegen/reference.py over the kinds' declarations) against
a second implementation written without them (tests/second_reference.py: hand-written
numpy, and torch where it is importable), for every declared kind, its accumulating
variant and small Compose pipelines, on random shapes with ones and primes in every
dtype the kind takes (issue 57, item 4): a wrong declaration cannot hide behind its own
reference. A kind with no second implementation fails, saying where to add one."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest
import second_reference as second

from morello_asp import parse_spec
from morello_asp.codegen.reference import random_operands, reference
from morello_asp.kinds import all_kinds as every_kind


def all_kinds():
    """The shipped kinds: a test elsewhere in this process may have declared its own in a
    --rules file (test_kinds' SumDiff), which brings no second implementation."""
    return {n: k for n, k in every_kind().items() if not k.user_files()}


def spec_text(name: str, shape: tuple[int, ...], dtypes: tuple[str, ...], n_operands: int) -> str:
    dims = "x".join(map(str, shape))
    if len(dtypes) == 1:
        return f"{name}({dims}, {dtypes[0]})"
    assert len(dtypes) == n_operands, (name, dtypes)
    shapes = parse_spec(f"{name}({dims}, f32)").operand_shapes
    ops = ", ".join(f"({dt}, GL, row_major)" for dt, s in zip(dtypes, shapes))
    return f"{name}({dims}, {ops})"


def draw_shape(fam: second.Family, name: str, rng: np.random.Generator) -> tuple[int, ...]:
    shape = fam.shape(rng)
    if fam.rank_from_name:  # a Softmax{D}-family kind needs rank D + 1 at least
        axis = int(re.search(r"(\d+)$", name).group(1))  # type: ignore[union-attr]
        while len(shape) <= axis:
            shape = (*shape, int(rng.choice(second.SIZES)))
    return shape


def is_float(dt: np.dtype) -> bool:
    return np.issubdtype(dt, np.floating) or dt == np.dtype(ml_dtypes.bfloat16)


def close(name: str, text: str, want: np.ndarray, got: np.ndarray, terms: int, what: str) -> None:
    """`got` (float64/int64, this module's) rounded to `want`'s dtype equals `want`:
    exactly for integers (both wrap on the store), within rounding for floats."""
    assert got.shape == want.shape, f"{text}: {what} has shape {got.shape}, the reference {want.shape}"
    if not is_float(want.dtype):
        np.testing.assert_array_equal(want, got.astype(want.dtype), err_msg=f"{text}: {what}")
        return
    eps = float(ml_dtypes.finfo(want.dtype).eps)
    w, g = want.astype(np.float64), got.astype(want.dtype).astype(np.float64)
    tol = 8 * eps * max(1, terms)
    finite = np.isfinite(w)
    scale = max(1.0, float(np.abs(w[finite]).max(initial=0.0)))
    np.testing.assert_allclose(g, w, rtol=tol, atol=tol * scale, err_msg=f"{text}: {what}")


def check_kind(name: str, shape: tuple[int, ...], dtypes: tuple[str, ...], seed: int, torch: bool = False) -> str:
    k = all_kinds()[name]
    text = spec_text(name, shape, dtypes, len(k.params))
    spec = parse_spec(text)
    args = random_operands(spec, seed)
    outputs = tuple(spec.k.outputs)
    want = reference(spec, *(a.copy() for a in args))
    want = want if isinstance(want, tuple) else (want,)
    got = second.second_outputs(name, spec.shape, [a.copy() for a in args], outputs)
    ins = [a for i, a in enumerate(args) if i not in outputs]
    terms = max(1, max(a.size for a in ins) // max(1, min(args[o].size for o in outputs))) if ins else 1
    for o, w, g in zip(outputs, want, got):
        close(name, text, np.asarray(w), g, terms, f"output {o} (second implementation)")
    # torch computes in float64: integer outputs (which wrap on the store) are numpy's alone
    if torch and not re.search(r"Accum\d*$", name) and all(is_float(args[o].dtype) for o in outputs):
        by_torch = second.torch_outputs(name, spec.shape, [a.copy() for a in args], outputs)
        for o, w, g in zip(outputs, want, by_torch or ()):
            close(name, text, np.asarray(w), g, terms, f"output {o} (torch)")
    return text


def test_every_declared_kind_has_a_second_implementation():
    """A new kind brings its second implementation: the message says where."""
    missing = sorted(n for n in all_kinds() if second.family_of(n) is None)
    assert not missing, f"kinds with no second implementation: {', '.join(missing)}; {second.WHERE}"
    no_accum = sorted(
        n
        for n in all_kinds()
        if re.search(r"Accum\d*$", n) and second.family_of(n).accum is None  # type: ignore[union-attr]
    )
    assert not no_accum, f"accumulating kinds whose family states no accumulation: {', '.join(no_accum)}"


def test_every_kind_agrees_with_its_second_implementation_smoke():
    """Every declared kind once, in its first dtype, on one small random shape."""
    rng = np.random.default_rng(57)
    for name in sorted(all_kinds()):
        fam = second.family_of(name)
        assert fam is not None, f"kind {name} has no second implementation: {second.WHERE}"
        check_kind(name, draw_shape(fam, name, rng), fam.dtypes[0], seed=1)


@pytest.mark.slow
def test_every_kind_and_dtype_agrees_with_its_second_implementation_on_random_shapes():
    """Every declared kind (accumulating variants included), in every dtype it takes,
    on six random shapes each (ones, primes, a vector width and one more), against
    hand-written numpy and, where torch is importable, torch."""
    rng = np.random.default_rng(5757)
    seen = 0
    for name in sorted(all_kinds()):
        fam = second.family_of(name)
        assert fam is not None, f"kind {name} has no second implementation: {second.WHERE}"
        for dtypes in fam.dtypes:
            for i in range(6):
                check_kind(name, draw_shape(fam, name, rng), dtypes, seed=i, torch=True)
                seen += 1
    assert seen >= 6 * len(all_kinds())


COMPOSES = [
    ("Softmax2", "Matmul"),
    ("Softmax1", "Matmul"),
    ("Matmul", "Matmul"),
    ("Matmul", "Softmax2"),
    ("Matmul", "Softmax2", "Matmul"),
    ("Relu", "ElementwiseAdd", "Matmul"),
    ("Relu", "BiasAdd", "Conv"),
    ("Softmax2", "BatchMulScalar", "Matmul"),
]


def compose_text(components: tuple[str, ...], rng: np.random.Generator) -> str:
    b, m, k, n, p = 1, *(int(rng.choice(second.SIZES)) for _ in range(4))
    shapes = {  # the operands (not the output), head first, by hand
        ("Softmax2", "Matmul"): [(b, m, k), (b, k, n)],
        ("Softmax1", "Matmul"): [(b, m, k), (b, k, n)],
        ("Matmul", "Matmul"): [(b, n, p), (b, m, k), (b, k, n)],
        ("Matmul", "Softmax2"): [(b, n, p), (b, m, n)],
        ("Matmul", "Softmax2", "Matmul"): [(b, n, p), (b, m, k), (b, k, n)],
        ("Relu", "ElementwiseAdd", "Matmul"): [(b, m, n), (b, m, k), (b, k, n)],
        ("Relu", "BiasAdd", "Conv"): [(n,), (b, k, m + 2, p + 1), (n, k, 3, 2)],
        ("Softmax2", "BatchMulScalar", "Matmul"): [(1, 1, 1), (b, m, k), (b, k, n)],
    }[components]
    ops = [f"({'x'.join(map(str, s))}, f32, GL, row_major)" for s in shapes]
    if components[-1] == "Conv":
        ops.append(f"out=({b}x{n}x{m}x{p}, f32, GL, row_major)")
    return f"Compose(({', '.join(components)}), [{', '.join(ops)}])"


@pytest.mark.parametrize("components", COMPOSES, ids=lambda c: "-".join(c))
def test_compose_pipelines_agree_with_a_chain_of_second_implementations(components):
    """A Compose's reference (each component's derived reference, innermost first)
    against the chain of second implementations, on four random shapes."""
    rng = np.random.default_rng(len(components))
    for seed in range(4):
        text = compose_text(components, rng)
        spec = parse_spec(text)
        args = random_operands(spec, seed)
        want = np.asarray(reference(spec, *(a.copy() for a in args)))
        got = second.compose_outputs(list(components), [a.copy() for a in args])
        terms = max(a.size for a in args[:-1])
        close(str(components), text, want, got.astype(np.float64), terms, "the output")


@pytest.mark.parametrize("dt", ["i32", "i8", "u8"])
def test_fill_neg_inf_of_an_integer_dtype_is_its_lowest_value(dt):
    """Found by the second implementation (issue 57): the derived reference took neg_inf
    as the lowest value of the int64 it computes in, which the store to i32 wrapped to 0,
    so a FillNegInf(3x5, i32) program (INT32_MIN everywhere) differed from numpy. The
    constant is the output dtype's own; the program, compiled and run, agrees."""
    from morello_asp.synthesis import synthesize

    spec = parse_spec(f"FillNegInf(3x5, {dt})", target="avx2")
    (out,) = random_operands(spec, 0)
    want = reference(spec, out.copy())
    np.testing.assert_array_equal(want, np.full(out.shape, np.iinfo(out.dtype).min, out.dtype))
    got = synthesize(spec, db=None).compile()(out=out.copy())
    np.testing.assert_array_equal(got, want)
