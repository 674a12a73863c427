"""The call from Python (codegen/api.py, codegen/fastcall.c): arrays at any alignment
and from other libraries reach the program without a copy, the GIL is released while
C runs, every path (fast, converting, overlapping) computes what numpy does, and an
output the call allocates starts on a 64-byte line, an ordinary array freed with its
last reference."""

from __future__ import annotations

import gc
import os
import sys
import threading
import time
import tracemalloc
import weakref

import ml_dtypes
import numpy as np
import pytest

from morello_asp import parse_spec
from morello_asp.codegen import fastcall
from morello_asp.codegen.api import compile_impl
from morello_asp.errors import CodegenError
from morello_asp.recipes import fast_matmul
from morello_asp.synthesis import synthesize

LIMITS = "[64, 1024, 32768, 1073741824]"


@pytest.fixture(scope="module")
def mm():
    """A 12x16x32 f32 matmul, hand-scheduled with the target's register block."""
    return fast_matmul(12, 16, 32).compile()


def at_offset(shape, dtype, offset: int, rng) -> np.ndarray:
    """Random values in an array whose data starts `offset` bytes past a 64-byte boundary."""
    dt = np.dtype(dtype)
    n = int(np.prod(shape))
    raw = np.empty(n * dt.itemsize + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset
    a = raw[start : start + n * dt.itemsize].view(dt).reshape(shape)
    a[...] = rng.random(shape).astype(dt)
    assert a.ctypes.data % 64 == offset
    return a


def test_the_compiled_call_path_is_built_here():
    assert fastcall.module() is not None


@pytest.mark.parametrize("offset", [0, 4, 8, 16, 32, 60])
def test_any_alignment_computes_the_product(mm, offset):
    rng = np.random.default_rng(offset)
    a = at_offset((12, 16), np.float32, offset, rng)
    b = at_offset((16, 32), np.float32, (offset * 3) % 64, rng)
    np.testing.assert_allclose(mm(a, b), a @ b, rtol=1e-5)
    out = at_offset((12, 32), np.float32, (offset + 4) % 64, rng)
    assert mm(a, b, out=out) is out
    np.testing.assert_allclose(out, a @ b, rtol=1e-5)


def test_no_array_is_copied_on_the_way_in_or_out(mm):
    """numpy reports its data allocations to tracemalloc: with out= the call allocates no
    array at all; without it, the output alone (1.5 KiB), at alignments numpy gives."""
    rng = np.random.default_rng(0)
    a = at_offset((12, 16), np.float32, 16, rng)
    b = at_offset((16, 32), np.float32, 48, rng)
    out = at_offset((12, 32), np.float32, 4, rng)
    mm(a, b, out=out)  # warm: nothing cached on first use counts
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        mm(a, b, out=out)
        with_out = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.reset_peak()
        r = mm(a, b)
        fresh = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert with_out < 512, f"{with_out} bytes allocated by a call with out="
    assert r.nbytes <= fresh < r.nbytes + 1024, f"{fresh} bytes allocated for a {r.nbytes}-byte output"


def check_fresh(r: np.ndarray, shape, dtype=np.float32) -> None:
    """An output the call allocated: on a 64-byte line, an ordinary writeable C-contiguous
    array of the shape and dtype, whose memory goes when its last reference does."""
    assert r.ctypes.data % 64 == 0, f"output at {r.ctypes.data % 64} bytes past a line"
    assert type(r) is np.ndarray and r.shape == shape and r.dtype == dtype
    assert r.flags.c_contiguous and r.flags.writeable and r.flags.aligned


@pytest.mark.parametrize("path", ["fast", "python"])
def test_outputs_the_call_allocates_start_on_a_line(mm, path):
    """numpy puts an array 16 or 48 bytes past a line (large ones always): the program's
    64-byte vector stores of its output would split lines. Twenty outputs kept alive, each
    on a line; on the fast path (fastcall.c, C-contiguous inputs) and the Python path (a
    strided input), with the leading batch 1 and without; values as numpy's."""
    rng = np.random.default_rng(10)
    big = rng.random((13, 17), dtype=np.float32)
    a = big[1:, 1:] if path == "python" else np.ascontiguousarray(big[1:, 1:])
    b = rng.random((16, 32), dtype=np.float32)
    want = a @ b
    kept = []
    for k in range(20):
        r = mm(a, b) if k % 2 else mm(a[None], b[None])
        shape = (12, 32) if k % 2 else (1, 12, 32)
        assert sys.getrefcount(r) == 2  # `r` alone (and getrefcount's argument)
        np.testing.assert_allclose(r.reshape(12, 32), want, rtol=1e-5)  # zeroed, accumulated into
        check_fresh(r, shape)
        r += 1  # writeable through to its memory
        np.testing.assert_allclose(r.reshape(12, 32), want + 1, rtol=1e-5)
        kept.append(r)
    wr = weakref.ref(kept[-1].base)
    del r, kept
    gc.collect()
    assert wr() is None, "an output's memory outlived the output"


def rss() -> int:
    """This process's resident bytes now (Linux's /proc/self/statm)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads the resident size from /proc")
@pytest.mark.parametrize(("path", "calls"), [("fast", 100_000), ("python", 10_000)])
def test_fresh_outputs_do_not_leak(mm, path, calls):
    """Each call's output (1.5 KiB, and the byte array under it) dropped at once: after
    `calls` calls the process is no larger (a leak of its 1.6 KiB would be 16 MiB or
    more, of the view object alone 10 MiB on the fast path), and the dtype the plan holds
    has the references it had (fastcall.c increfs it for every output)."""
    rng = np.random.default_rng(12)
    big = rng.random((13, 17), dtype=np.float32)
    a = big[1:, 1:] if path == "python" else np.ascontiguousarray(big[1:, 1:])
    b = rng.random((16, 32), dtype=np.float32)
    for _ in range(1000):  # warm: allocator pools, caches
        mm(a, b)
    gc.collect()
    refs = sys.getrefcount(np.dtype(np.float32))
    before = rss()
    for _ in range(calls):
        mm(a, b)
    gc.collect()
    grown = rss() - before
    assert grown < 4 << 20, f"{grown / 2**20:.1f} MiB more resident after {calls} calls"
    assert sys.getrefcount(np.dtype(np.float32)) - refs < 100


def test_slices_transposes_and_other_orders_are_right(mm):
    rng = np.random.default_rng(2)
    big = rng.random((13, 40), dtype=np.float32)
    b = rng.random((16, 32), dtype=np.float32)
    a = big[1:, 3:19]  # strided: copied once
    np.testing.assert_allclose(mm(a, b), a @ b, rtol=1e-5)
    bf = np.asfortranarray(b)  # the right shape, not row-major memory
    np.testing.assert_allclose(mm(a, bf), a @ b, rtol=1e-5)
    out = np.zeros((32, 12), np.float32).T  # a transposed view as out=: written through
    assert mm(a, b, out=out) is out
    np.testing.assert_allclose(out, a @ b, rtol=1e-5)


@pytest.mark.parametrize("col", ["rhs", "out"])
def test_col_major_operands_are_used_as_they_lie(col):
    """A col_major rhs takes Fortran arrays and transposed views (`k.T`, attention's
    scores) as they are, on the compiled path; a col_major output the call allocates is
    its buffer on a 64-byte line, seen transposed, on both paths. A C-ordered array for a
    col_major operand is converted (the Python path)."""
    rhs, out = ("col_major", "row_major") if col == "rhs" else ("row_major", "col_major")
    spec = parse_spec(f"(Matmul(1x3x64x5, (f32, GL, row_major), (f32, GL, {rhs}), (f32, GL, {out}), serial), {LIMITS})")
    fn = compile_impl(synthesize(spec))
    rng = np.random.default_rng(3)
    a = rng.random((3, 64), dtype=np.float32)
    b = rng.random((64, 5), dtype=np.float32)
    kt = np.ascontiguousarray(b.T).T  # a transposed view of a row-major (5, 64) array
    for x in (b, np.asfortranarray(b), b[None], kt, np.asfortranarray(b)[None]):
        fast = fn._run(fn._fast, (a, x), None)  # the compiled path, or NotImplemented
        dense = x.flags.c_contiguous if col == "out" else x.reshape(64, 5).flags.f_contiguous
        assert (fast is not NotImplemented) == dense, f"input strides {x.strides}"
        for r in (fn(a, x), fast) if dense else (fn(a, x),):
            np.testing.assert_allclose(r.reshape(3, 5), a @ b, rtol=1e-5)
            if col == "out":
                assert r.shape[-2:] == (3, 5) and r.flags.f_contiguous and r.flags.writeable
                assert r.ctypes.data % 64 == 0
    o = np.zeros((5, 3), np.float32).T if col == "out" else np.zeros((3, 5), np.float32)
    assert fn._run(fn._fast, (a, kt if col == "rhs" else b), o) is o  # out= as it lies: no copy back
    np.testing.assert_allclose(o, a @ b, rtol=1e-5)


def test_an_input_that_is_the_output_is_read_before_it_is_written():
    fn = fast_matmul(16, 16, 16).compile()
    rng = np.random.default_rng(4)
    a = rng.random((16, 16), dtype=np.float32)
    b = rng.random((16, 16), dtype=np.float32)
    want = a @ b
    assert fn(a, b, out=a) is a
    np.testing.assert_allclose(a, want, rtol=1e-5)


class DLPackOnly:
    """A producer that speaks only DLPack (as a torch or jax tensor does to numpy)."""

    def __init__(self, a: np.ndarray, device=(1, 0)):
        self._a, self._device = a, device

    def __dlpack__(self, **kw):
        return self._a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._device


class InterfaceOnly:
    def __init__(self, a: np.ndarray):
        self.__array_interface__ = a.__array_interface__
        self._keep = a


def test_arrays_from_elsewhere_without_a_copy(mm):
    rng = np.random.default_rng(5)
    a = rng.random((12, 16), dtype=np.float32)
    b = rng.random((16, 32), dtype=np.float32)
    want = a @ b
    for x, y in [(DLPackOnly(a), DLPackOnly(b)), (InterfaceOnly(a), memoryview(b))]:
        np.testing.assert_allclose(mm(x, y), want, rtol=1e-5)
    out = np.zeros((12, 32), np.float32)
    mm(a, b, out=DLPackOnly(out))  # written through the DLPack view
    np.testing.assert_allclose(out, want, rtol=1e-5)
    out2 = np.zeros((12, 32), np.float32)
    mm(a, b, out=memoryview(out2))
    np.testing.assert_allclose(out2, want, rtol=1e-5)


def test_what_cannot_be_used_is_refused_in_one_line(mm):
    a = np.zeros((12, 16), np.float32)
    b = np.zeros((16, 32), np.float32)
    cases = [
        (lambda: mm(DLPackOnly(a, device=(2, 0)), b), "on device cuda"),
        (lambda: mm(a, b, out=np.zeros((12, 32), np.float32).tolist()), "not an array the result"),
        (lambda: mm(a, b, out=memoryview(np.zeros((12, 32), np.float32).tobytes())), "has dtype uint8"),
        (lambda: mm(a.astype(np.float16), b), "has dtype float16"),
        (lambda: mm(a, b, out=np.zeros((12, 32), np.float32)[::-1][::-1].view()), None),
    ]
    ro = np.zeros((12, 32), np.float32)
    ro.flags.writeable = False
    cases.append((lambda: mm(a, b, out=ro), "read-only"))
    for call, msg in cases:
        if msg is None:
            call()  # a writable view is fine
            continue
        with pytest.raises(CodegenError, match=msg) as e:
            call()
        assert "\n" not in str(e.value)


@pytest.mark.slow  # ~8 s
def test_bf16_operands_as_ml_dtypes_or_raw_bits():
    spec = parse_spec(
        f"(Matmul(1x4x16x8, (bf16, GL, row_major), (bf16, GL, row_major), (f32, GL, row_major), serial), {LIMITS})"
    )
    fn = compile_impl(synthesize(spec))
    rng = np.random.default_rng(6)
    a = rng.random((4, 16)).astype(ml_dtypes.bfloat16)
    b = rng.random((16, 8)).astype(ml_dtypes.bfloat16)
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(fn(a, b), want, rtol=1e-5)
    np.testing.assert_allclose(fn(a.view(np.uint16), b.view(np.uint16)), want, rtol=1e-5)


def test_several_outputs_and_a_softmax():
    fn = compile_impl(synthesize("SoftmaxDenominatorAndUnscaledFromMax1(3x20, f32)"))
    err, tol = fn.check()
    assert err <= tol
    x = np.random.default_rng(7).random((3, 20), dtype=np.float32)
    mx = x.max(axis=1, keepdims=True)
    den, uns = fn(x, mx)
    np.testing.assert_allclose(uns, np.exp(x - mx), rtol=1e-5)
    np.testing.assert_allclose(den, np.exp(x - mx).sum(axis=1, keepdims=True), rtol=1e-4)
    check_fresh(den, (3, 1))  # each of several outputs on its line
    check_fresh(uns, (3, 20))
    outs = (np.zeros((3, 1), np.float32), np.zeros((3, 20), np.float32))
    assert fn(x, mx, out=outs) is outs
    np.testing.assert_allclose(outs[1], uns, rtol=1e-6)
    sm = compile_impl(synthesize("Softmax1(5x33, f32)"))
    y = np.random.default_rng(8).random((5, 33), dtype=np.float32)[:, :]
    e = np.exp(y - y.max(axis=1, keepdims=True))
    np.testing.assert_allclose(sm(y), e / e.sum(axis=1, keepdims=True), rtol=1e-5)


def test_the_gil_is_released_while_the_program_runs():
    """A thread in a long call, the main thread counting: with the GIL held through the
    call, the main thread could take no step in the middle half of it."""
    rng = np.random.default_rng(9)
    big = fast_matmul(384, 384, 384).compile()
    x = rng.random((384, 384), dtype=np.float32)
    y = rng.random((384, 384), dtype=np.float32)
    z = np.empty((384, 384), np.float32)
    span: list[float] = []

    def worker():
        for _ in range(10):
            t0 = time.perf_counter()
            big(x, y, out=z)
            span.append((t0, time.perf_counter()))

    stamps: list[float] = []
    t = threading.Thread(target=worker)
    t.start()
    while t.is_alive():
        stamps.append(time.perf_counter())
    t.join()
    inside = 0
    for t0, t1 in span:
        q = (t1 - t0) / 4
        inside += sum(t0 + q < s < t1 - q for s in stamps)
    assert inside > 0, f"the main thread took no step during {len(span)} calls of {span[0][1] - span[0][0]:.4f} s"
    np.testing.assert_allclose(z, x @ y, rtol=1e-4)


def test_a_chain_runs_its_calls_in_order_and_stops_at_one_that_refuses(mm):
    """fastcall.chain: calls on fixed buffers made one after another from C (a session's
    steps). An entry whose input overlaps its output runs nothing and its index comes back;
    the run resumes after it. Arrays not laid out as their operands, or no out=, give no
    entry (those calls go through bind)."""
    rng = np.random.default_rng(1)
    a, b, b2 = (rng.random(s, dtype=np.float32) for s in [(12, 16), (16, 32), (16, 32)])
    out1, out2 = np.empty((12, 32), np.float32), np.zeros((12, 32), np.float32)
    shared = np.zeros((12, 32), np.float32)
    inside = shared.reshape(-1)[:192].reshape(12, 16)  # an input inside the output
    entries = [mm.chain_entry((a, b), out1), mm.chain_entry((inside, b2), shared), mm.chain_entry((a, b2), out2)]
    assert all(e is not None for e in entries)
    fast = fastcall.module()
    chain = fast.chain(entries)
    assert fast.run_chain(chain, 0) == 1
    np.testing.assert_allclose(out1, a @ b, rtol=1e-5)
    assert not shared.any() and not out2.any()  # neither the refused call nor the one after it ran
    assert fast.run_chain(chain, 2) == -1
    np.testing.assert_allclose(out2, a @ b2, rtol=1e-5)
    wide = rng.random((12, 32), dtype=np.float32)
    assert mm.chain_entry((wide[:, :16], b), out1) is None  # a strided view
    assert mm.chain_entry((a, b), None) is None
    assert mm.chain_entry((a.astype(np.float64), b), out1) is None
