"""The gemma.cpp matvec (issue 17): 1 x 2048 x 16384, bf16 operands, f32 result.

    python benchmarks/matvec.py [--plot matvec.png] [--rounds 7] [--k 2048 --n 16384]
                                [--threads 1,2] [--synth PROG.json]

Programs (each proved with z3, compiled, checked against numpy, then timed):

- `[0, 2, 1]` weights, as gemma stores them (each output's column contiguous in k), the
  schedule of Morello's examples/matvec_gemma_x86_bf16f32.rs: the bf16 vector is cast
  once into f32 odd-even strips of 16 in L1 (VectorInterleaveBf16), then for every
  output a DotProductLoopBf16Oe over its column (16 bf16 per 32-byte load: evens by a
  shift, odds by a mask), the columns split across threads by a parallel tile; and the
  same with four columns per kernel (DotProductLoopBf16OeX4), which keeps four weight
  streams in flight.
- row-major weights: the vector cast once to f32 in L1 (ValueCastBf16); the output
  zeroed, then for each block of 4 rows of W the outputs 64 at a time in 8 ymm
  registers (the 4 rows stream together along n; the f32 outputs, 64 KiB, stay in L2
  between blocks), each 128-byte row chunk converted and FMA'd by
  BroadcastVecMultAddBf16. (Measured: k blocks of 4 rows ran ~6.5 ms, 16 rows ~10 ms,
  all 2048 rows per output tile ~20 ms.)
- with --synth, a saved program (`morello-asp synth SPEC --out PROG.json`) of the same
  shape, e.g. the one the search finds from the spec alone (README, Mixed precision).

Each runs serial (one thread) and parallel (both cores: `tile(..., parallel=True)`,
OpenMP), timed in interleaved rounds beside numpy f32 (`x @ W`, W in f32: twice the
bytes) with OpenBLAS on the same number of threads, and torch bf16 (`torch.matmul` on
bfloat16 tensors; W stored [0, 2, 1] and row-major, "vs torch" against the faster)
when torch imports ("torch not installed" otherwise). Every program at every thread
count runs once per round in one interpreter (numpy's OpenBLAS, torch and OpenMP are
switched to the round's thread count), so the thread counts see the same load; a
2-thread row's "vs 1 thread" is paired with the same program's 1-thread time (a serial
program at 1 thread). A STREAM-like read and copy of 256 MiB in C with the same threads
gives the machine's memory bandwidth, timed in the same rounds. Then a u8 x i8 -> i16
matmul 256^3 beside numpy's int32 matmul, one thread.

The machine is a shared 2-core VM: read ratios within a round, not absolute figures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

LIMITS = "[16, 16, 1024, 33554432]"
TORCH_021 = "torch bf16, W [0,2,1]"
TORCH_ROW = "torch bf16, W row-major"


def cpu_name() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return platform.processor() or "unknown CPU"
    fields = {}
    for line in out.splitlines():
        k, _, v = line.partition(":")
        fields[k.strip()] = v.strip()
    parts = [fields.get("Model name", "?"), f"family {fields.get('CPU family', '?')} model {fields.get('Model', '?')}"]
    parts.append(f"{fields.get('CPU(s)', '?')} CPUs")
    if "L1d cache" in fields:
        parts.append(f"L1d {fields['L1d cache']}")
    flags = fields.get("Flags", "").split()
    parts.append("AVX-512" if "avx512f" in flags else "no AVX-512")
    return ", ".join(parts)


# ----------------------------------------------------------------------------- programs
def gemma_program(k: int, n: int, parallel: bool, cols: int = 4):
    """Morello's schedule for weights stored [0, 2, 1]; `cols` = 4: four columns per
    kernel (DotProductLoopBf16OeX4: four weight streams in flight), 1: Morello's one."""
    from morello_asp import parse_spec

    serial = "" if parallel else ", serial"
    spec = parse_spec(
        f"(Matmul(1x1x{k}x{n}, (bf16, GL, row_major), (bf16, GL, [0, 2, 1]), (f32, GL, row_major){serial}), {LIMITS})"
    )

    def column(m):  # one output: zero it in a register, dot product over its column
        return (
            m.move_param(2, "L1")
            .move_param(2, "RF")
            .to_accum()
            .subschedule([0, 0, 0], lambda z: z.select("ValueZero"))
            .subschedule([0, 0, 1], lambda a: a.move_param(1, "L1").select("DotProductLoopBf16Oe"))
            .subschedule([0, 1], lambda s: s.select("ValueAssign"))
        )

    def columns4(m):  # four outputs: zero them in L1, four dot products sharing the vector
        return (
            m.move_param(2, "L1")
            .to_accum()
            .subschedule([0, 0], lambda z: z.select("MemsetZero"))
            .subschedule([0, 1], lambda a: a.move_param(1, "L1", "col_major").select("DotProductLoopBf16OeX4"))
        )

    each, width = (columns4, 4) if cols == 4 else (column, 1)

    def body(b):
        if parallel:
            return b.tile([1, 1, k, n // 2], parallel=True).tile([1, 1, k, width]).subschedule([0, 0], each)
        return b.tile([1, 1, k, width]).subschedule([0], each)

    return (
        spec.move_param(0, "L1", "[0, 1, 2, 2 oe(16)]", dtype="f32")
        .subschedule([0], lambda m: m.tile([1, 1, 16]).move_param(0, "L1").select("VectorInterleaveBf16"))
        .subschedule([1], body)
    )


def rowmajor_program(k: int, n: int, parallel: bool, nt: int = 64, kb: int = 4):
    """Row-major weights: zero the output, then for each block of kb rows of W (outer)
    each nt-wide tile of the output (inner) in registers: the kb row streams advance
    together along n, and the output (64 KiB) stays in L2 between blocks."""
    from morello_asp import parse_spec

    serial = "" if parallel else ", serial"
    spec = parse_spec(
        f"(Matmul(1x1x{k}x{n}, (bf16, GL, row_major), (bf16, GL, row_major), (f32, GL, row_major){serial}), {LIMITS})"
    )
    kb = min(kb, k)

    def vectors(p, kernel):  # a 1 x nt register tile: one kernel per 8-wide vector
        return p.tile([1, 1, 8]).select(kernel)

    def block(b):  # out[n0:n0+nt] += x[k0:k0+kb] . W[k0:k0+kb, n0:n0+nt]
        acc = b.move_param(2, "L1").move_param(2, "VRF", vector_size=8)
        acc = acc.subschedule([0, 0], lambda ld: vectors(ld, "VectorAssign"))
        acc = acc.subschedule([0, 2], lambda st: vectors(st, "VectorAssign"))
        return acc.subschedule(
            [0, 1], lambda mm: mm.tile([1, 1, 1, nt]).move_param(1, "L1").select("BroadcastVecMultAddBf16")
        )

    def part(b):  # Matmul(1x1xKxW) on f32 x (L1), bf16 W, f32 out in GL
        width = b.spec.shape[3]
        tiles = ([[1, 1, kb, width]] if kb < k else []) + ([[1, 1, kb, nt]] if nt < width else [])

        def accum(a):
            for t in tiles:
                a = a.tile(t)
            return a.subschedule([0] * len(tiles), block)

        return b.to_accum().subschedule([0], lambda z: z.select("MemsetZero")).subschedule([1], accum)

    def body(b):
        if parallel:
            return b.tile([1, 1, k, n // 2], parallel=True).subschedule([0], part)
        return part(b)

    return (
        spec.move_param(0, "L1", dtype="f32")
        .subschedule([0], lambda m: m.tile([1, 1, 1]).move_param(0, "L1").select("ValueCastBf16"))
        .subschedule([1], body)
    )


def int8_program(size: int):
    """u8 x i8 -> i16: W packed once into k-pairs (`[0, 1, 2, 1 p(2)]`), then 4 x 16
    output tiles in four ymm registers, k in blocks of 64, each k-pair a
    TwoVecBroadcastVecMultAddU8S8S16 (vpmaddubsw + vpaddw) per row."""
    from morello_asp import parse_spec

    s = size
    spec = parse_spec(
        f"(Matmul(1x{s}x{s}x{s}, (u8, GL, row_major), (i8, GL, row_major), (i16, GL, row_major), serial), {LIMITS})"
    )
    pair = "[0, 1, 2, 1 p(2)]"
    rows = lambda p: p.tile([1, 1, 16]).select("VectorAssign")  # noqa: E731  (a 4x16 tile, a row at a time)

    def block(a):  # MatmulAccum(1x4xsx16) with operands in GL
        a = a.move_param(0, "L1").move_param(1, "L1", pair).move_param(2, "L1").move_param(2, "VRF", vector_size=16)
        a = a.tile([1, 4, 2, 16]).move_param(1, "VRF", pair, vector_size=32)
        a = a.tile([1, 1, 2, 16]).select("TwoVecBroadcastVecMultAddU8S8S16")
        # paths: alloc l(lhs) > alloc l(rhs) > alloc l(out) > alloc v(out) [load, body, store]
        a = a.subschedule([0, 0, 0, 0], rows).subschedule([0, 0, 0, 2], rows)
        return a.subschedule([0, 0, 0, 1, 0, 0], lambda ld: ld.select("VectorAssign"))

    prog = spec.move_param(1, "GL", pair).to_accum()
    prog = prog.subschedule(
        [0],
        lambda m: (
            m.tile([1, 2, 16]).move_param(0, "L1").move_param(1, "L1", pair).tile([1, 1, 1]).select("ValueAssign")
        ),
    )
    prog = prog.subschedule([1, 0], lambda z: z.select("MemsetZero"))
    # k in blocks of at most 64: the k-pairs of a 16-wide column of W lie s bytes apart,
    # and more than 32 of them 512 B apart would fill more than half the ways of their L1
    # sets (rules/aliasing.lp), so the rules refuse to keep a taller one there without a copy
    kb = min(s, 64)
    return prog.subschedule(
        [1, 1],
        lambda a: a.tile([1, 4, s, 16]).subschedule([0], lambda b: b.tile([1, 4, kb, 16]).subschedule([0], block)),
    )


# ----------------------------------------------------------------------------- one thread count
STREAM_C = r"""
#include <immintrin.h>
#include <omp.h>
float stream_read(const float *restrict a, long n) {  /* n a multiple of 64 */
    float total = 0;
    #pragma omp parallel for reduction(+:total)
    for (long b = 0; b < n; b += 1 << 16) {
        __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
        long e = b + (1 << 16) < n ? b + (1 << 16) : n;
        for (long i = b; i < e; i += 32) {
            s0 = _mm256_add_ps(s0, _mm256_load_ps(a + i));
            s1 = _mm256_add_ps(s1, _mm256_load_ps(a + i + 8));
            s2 = _mm256_add_ps(s2, _mm256_load_ps(a + i + 16));
            s3 = _mm256_add_ps(s3, _mm256_load_ps(a + i + 24));
        }
        __m256 s = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));
        float v[8];
        _mm256_storeu_ps(v, s);
        total += v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
    }
    return total;
}
void stream_copy(float *restrict b, const float *restrict a, long n) {
    #pragma omp parallel for
    for (long i = 0; i < n; i += 8) _mm256_store_ps(b + i, _mm256_load_ps(a + i));
}
"""


def _stream():
    from morello_asp.codegen.build import build

    mod = build(
        STREAM_C,
        "float stream_read(const float *a, long n); void stream_copy(float *b, const float *a, long n);"
        " void omp_set_num_threads(int n);",
        ("-mavx2", "-mfma"),
        True,
    )
    return mod


def _openblas_threads():
    """numpy's OpenBLAS thread-count setter (None if this numpy has no OpenBLAS)."""
    import ctypes

    import numpy as np

    np.ones((2, 2)) @ np.ones((2, 2))  # loaded
    with open("/proc/self/maps") as f:
        libs = sorted({ln.split()[-1] for ln in f if "openblas" in ln.lower() and ln.split()[-1].startswith("/")})
    for path in libs:
        lib = ctypes.CDLL(path)
        for fn in ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_", "openblas_set_num_threads"):
            if hasattr(lib, fn):
                return getattr(lib, fn)
    return None


def _seconds(fn) -> Callable[[], float]:
    return lambda: fn.benchmark(reps=3, min_time=0.15).seconds


def _torch_timer(torch, time_python, lhs, rhs, out) -> Callable[[], float]:
    return lambda: time_python(lambda: torch.matmul(lhs, rhs, out=out), reps=3, min_time=0.15)


def run_all(args) -> dict:
    """Check every program at every thread count, then time them all in interleaved
    rounds (each round runs every program at every thread count once), in this
    interpreter: the thread counts see the same load. Returns {threads: rows}."""
    import ml_dtypes
    import numpy as np

    from morello_asp.codegen.baseline import time_python
    from morello_asp.codegen.convert import aligned_empty
    from morello_asp.solver.proofs.verify import verify

    counts = [int(t) for t in args.threads.split(",")]
    k, n = args.k, args.n
    rng = np.random.default_rng(0)
    x = (rng.random((1, k)) * 2 - 1).astype(ml_dtypes.bfloat16)
    w = (rng.random((k, n)) * 2 - 1).astype(ml_dtypes.bfloat16)
    xf, wf = x.astype(np.float32), w.astype(np.float32)
    want = xf.astype(np.float64) @ wf.astype(np.float64)
    st = _stream()
    blas = _openblas_threads()
    try:
        import torch
    except ImportError:
        torch = None

    def use(threads: int) -> None:  # numpy, torch and OpenMP (ours, the C copy) on `threads`
        st.lib.omp_set_num_threads(threads)
        if blas is not None:
            blas(threads)
        if torch is not None:
            torch.set_num_threads(threads)

    synth = None
    if args.synth:  # a program `morello-asp synth SPEC --out FILE` found from the spec alone
        from morello_asp.serialize import load

        synth = load(args.synth)
        if synth.spec.shape != (1, 1, k, n):
            raise SystemExit(f"{args.synth}: its spec {synth.spec.short()} is not the 1 x {k} x {n} matvec")
    big = aligned_empty(64 * 1024 * 1024, np.float32)  # 256 MiB
    big[:] = 1
    dst = aligned_empty(big.size, np.float32)
    pa, pb = st.ffi.from_buffer("float[]", big), st.ffi.from_buffer("float[]", dst)
    out = np.empty((1, n), np.float32)
    results: dict[int, dict[str, dict]] = {}
    timers: list[tuple[int, str, Callable[[], float]]] = []
    for threads in counts:
        parallel = threads > 1
        rows: dict[str, dict] = {}
        progs = {
            "[0,2,1] bf16, 1 column (Morello)": gemma_program(k, n, parallel, cols=1),
            "[0,2,1] bf16, 4 columns": gemma_program(k, n, parallel, cols=4),
            "row-major bf16": rowmajor_program(k, n, parallel),
        }
        if synth is not None:
            progs[f"synthesized ({os.path.basename(args.synth)})"] = synth
        for name, imp in progs.items():
            rep = verify(imp)
            if not rep.ok:
                raise SystemExit(f"{name}: not proved:\n{rep}")
            fn = imp.compile()
            use(threads)
            got = fn(x, np.ascontiguousarray(w))  # logical k x n either way: the wrapper lays it out
            err = float(np.abs(got - want).max())
            tol = 4 * np.finfo(np.float32).eps * k * max(1.0, float(np.abs(want).max()))
            if err > tol:
                raise SystemExit(f"{name}: differs from numpy: {err} > {tol}")
            timers.append((threads, name, _seconds(fn)))
            rows[name] = {"cost": imp.cost.main, "err": err, "obligations": len(rep.obligations)}
        timers.append(
            (threads, "numpy f32", lambda: time_python(lambda: np.matmul(xf, wf, out=out), reps=3, min_time=0.15))
        )
        rows["numpy f32"] = {}
        if torch is not None:
            tx, tw = torch.from_numpy(xf).to(torch.bfloat16), torch.from_numpy(wf).to(torch.bfloat16)
            twt = tw.t().contiguous()  # n x k: W stored [0, 2, 1], as gemma and nn.Linear keep it
            tout = torch.empty((1, n), dtype=torch.bfloat16)
            for name, lhs, rhs in ((TORCH_021, tx, twt.t()), (TORCH_ROW, tx, tw)):
                use(threads)
                got = torch.matmul(lhs, rhs).to(torch.float32).numpy()
                err = float(np.abs(got - want).max())  # a bf16 result: 8 bits of mantissa
                if err > 2**-7 * max(1.0, float(np.abs(want).max())) + 1e-3:
                    raise SystemExit(f"{name}: differs from numpy: {err}")
                timers.append((threads, name, _torch_timer(torch, time_python, lhs, rhs, tout)))
                rows[name] = {"err": err}
        else:
            rows[TORCH_021] = {"missing": "torch not installed"}
        timers.append(
            (
                threads,
                "read 256 MiB",
                lambda: time_python(lambda: st.lib.stream_read(pa, big.size), reps=3, min_time=0.3),
            )
        )
        timers.append(
            (
                threads,
                "copy 256 MiB",
                lambda: time_python(lambda: st.lib.stream_copy(pb, pa, big.size), reps=3, min_time=0.3),
            )
        )
        rows["read 256 MiB"], rows["copy 256 MiB"] = {}, {}
        results[threads] = rows
    for _ in range(args.rounds):
        for threads, name, t in timers:
            use(threads)
            results[threads][name].setdefault("times", []).append(t())
    for rows in results.values():
        for r in rows.values():
            if r.get("times"):
                r["seconds"] = statistics.median(r["times"])
    # int8 256^3 (the second table): a serial program, one thread
    if 1 in counts and not args.skip_int8:
        use(1)
        s = args.int_size
        imp = int8_program(s)
        rep = verify(imp)
        fn = imp.compile()
        a = rng.integers(0, 128, (s, s)).astype(np.uint8)  # pair sums within i16: no saturation
        b = rng.integers(-128, 128, (s, s)).astype(np.int8)
        ok = np.array_equal(fn(a, b), (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int16))
        ai, bi = a.astype(np.int32), b.astype(np.int32)
        oi = np.empty((s, s), np.int32)
        t_prog, t_np = [], []
        for _ in range(args.rounds):
            t_prog.append(fn.benchmark(reps=3, min_time=0.1).seconds)
            t_np.append(time_python(lambda: np.matmul(ai, bi, out=oi), reps=3, min_time=0.1))
        results[1]["u8 x i8 -> i16"] = {
            "seconds": statistics.median(t_prog),
            "numpy": statistics.median(t_np),
            "paired": statistics.median(p / q for p, q in zip(t_np, t_prog)),
            "proved": rep.ok,
            "checked": ok,
            "cost": imp.cost.main,
        }
    return results


def child(args) -> dict:
    """run_all in a fresh interpreter whose OpenBLAS and OpenMP start with the most threads."""
    most = str(max(int(t) for t in args.threads.split(",")))
    env = dict(os.environ)
    env["OPENBLAS_NUM_THREADS"] = env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = most
    cmd = [sys.executable, __file__, "--child", "--threads", args.threads, "--k", str(args.k), "--n", str(args.n)]
    cmd += ["--rounds", str(args.rounds), "--int-size", str(args.int_size)]
    if args.skip_int8:
        cmd.append("--skip-int8")
    if args.synth:
        cmd += ["--synth", args.synth]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"the benchmark run failed:\n{r.stderr[-3000:]}")
    return {int(t): rows for t, rows in json.loads(r.stdout.strip().splitlines()[-1]).items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--k", type=int, default=2048)
    ap.add_argument("--n", type=int, default=16384)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", default="1,2", help="thread counts, comma separated (default 1,2)")
    ap.add_argument("--int-size", type=int, default=256)
    ap.add_argument("--skip-int8", action="store_true")
    ap.add_argument("--synth", metavar="PROG.json", help="also time a saved program (morello-asp synth SPEC --out)")
    ap.add_argument("--plot", metavar="FILE", help="bar chart of GB/s per program and thread count")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(run_all(args)))
        return 0
    t0 = time.time()
    print(f"# CPU: {cpu_name()}; load average {os.getloadavg()[0]:.2f} at start")
    wbytes = args.k * args.n * 2
    results = child(args)
    print(f"# matvec 1 x {args.k} x {args.n}: bf16 x bf16 -> f32 ({wbytes / 2**20:.0f} MiB of bf16 weights per call)")
    print(
        "| threads | program | ms/call | GB/s of weights | vs numpy f32 (paired) "
        "| vs torch bf16 (paired, best layout) | vs 1 thread (paired) | % of read / copy BW |"
    )
    print("|---|---|---|---|---|---|---|---|")
    plot = []
    for th, rows in results.items():
        read_bw = 256 * 2**20 / rows["read 256 MiB"]["seconds"] / 1e9
        copy_bw = 2 * 256 * 2**20 / rows["copy 256 MiB"]["seconds"] / 1e9
        # torch's best layout in each round (W [0,2,1] is the fast one: row-major bf16 takes a slow path)
        torch_t = [min(ts) for ts in zip(*(rows[t]["times"] for t in (TORCH_021, TORCH_ROW) if t in rows))]

        def paired(t: list, r: dict) -> str:  # median of the per-round ratios
            return f"{statistics.median(a / b for a, b in zip(t, r['times'])):.2f}x" if t else "n/a"

        for name, r in rows.items():
            if "seconds" not in r or name.startswith(("read", "copy", "u8")):
                continue
            nbytes = 2 * wbytes if name == "numpy f32" else wbytes
            gbs = nbytes / r["seconds"] / 1e9
            ratio, tr = paired(rows["numpy f32"]["times"], r), paired(torch_t, r)
            ms = r["seconds"] * 1e3
            bw = f"{100 * gbs / read_bw:.0f}% / {100 * gbs / copy_bw:.0f}%"
            one_t = results.get(1, {}).get(name, {}).get("times", []) if th != 1 else []
            print(f"| {th} | {name} | {ms:.2f} | {gbs:.1f} | {ratio} | {tr} | {paired(one_t, r)} | {bw} |")
            plot.append((f"{name} ({th}t)", gbs))
        if "missing" in rows.get(TORCH_021, {}):
            print(f"| {th} | torch bf16 | - | - | - | - | - | {rows[TORCH_021]['missing']} |")
        rd, cp = (
            paired(results.get(1, {}).get(m, {}).get("times", []) if th != 1 else [], rows[m])
            for m in ("read 256 MiB", "copy 256 MiB")
        )
        mem = f"| {th} | memory: read / copy (C, {th} thread(s)) | - | {read_bw:.1f} / {copy_bw:.1f} |"
        print(f"{mem} | | {rd} / {cp} | |")
    one = results.get(1, {})
    if "u8 x i8 -> i16" in one:
        r = one["u8 x i8 -> i16"]
        s = args.int_size
        print(f"\n# matmul {s}^3 integers, one thread (checked: {r['checked']}, proved: {r['proved']})")
        print("| program | ms/call | numpy int32 ms | speed-up (paired) |")
        print("|---|---|---|---|")
        print(
            f"| u8 x i8 -> i16 (vpmaddubsw) | {r['seconds'] * 1e3:.3f} | {r['numpy'] * 1e3:.2f} | {r['paired']:.1f}x |"
        )
    print(f"# {time.time() - t0:.0f} s; load average {os.getloadavg()[0]:.2f} at the end")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(8, 0.4 * len(plot) + 1.5))
        ax.barh([p[0] for p in plot], [p[1] for p in plot])
        ax.set_xlabel("GB/s of weights read (numpy f32 reads twice the bytes)")
        ax.set_title(f"matvec 1x{args.k}x{args.n} bf16 -> f32 ({cpu_name().split(',')[0]})")
        fig.tight_layout()
        fig.savefig(args.plot)
        print(f"# plot: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
