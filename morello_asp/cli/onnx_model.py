"""`morello-asp onnx MODEL.onnx`: an ONNX model compiled to synthesized programs; prints
the plan (each node's spec, its cost and search time), and with --run the largest
difference from onnxruntime, with --bench both latencies, with --emit c the whole model as
one C file and its weights (docs/onnx.md)."""

from __future__ import annotations

import sys
import time

from morello_asp.cli.args import add_rules_option, add_target_option, check_logic_inputs, int_range
from morello_asp.errors import InputError, RefutedError
from morello_asp.solver.search.dp import Progress
from morello_asp.synthesis import DEFAULT_TABLE


def _onnx(args) -> int:
    # here, not above: onnx, onnxruntime and numpy take a while to load, and every other
    # command (a `query` above all) starts without them
    from morello_asp.codegen.calling import per_call  # numpy: heavy
    from morello_asp.onnx import InferenceSession  # onnx, onnxruntime: heavy, optional
    from morello_asp.onnx.compare import bench, check  # (the same)

    check_logic_inputs(args)
    if args.standalone and args.emit != "c":
        raise InputError("--standalone needs --emit c")
    if args.emit == "c" and not args.out:
        raise InputError("--emit c writes the model's C and its weights: give --out FILE.c")
    db = None if args.no_db else (args.db or DEFAULT_TABLE)
    t0 = time.perf_counter()
    progress = Progress(enabled=False if args.quiet else None)
    sess = InferenceSession(args.model, target=args.target, db=db, rules=args.rules, progress=progress, fuse=args.fuse)
    total = time.perf_counter() - t0
    print(f"{args.model}: {len(sess.plan.steps)} steps, {len(sess.programs)} distinct specs, compiled in {total:.1f} s")
    for label, out, what, cost, secs in sess.describe():
        tail = "" if cost is None else f"  cost {cost}" + ("  (searched above)" if secs is None else f"  {secs:.2f} s")
        print(f"  {label} -> {out}: {what}{tail}")
    for f in sess.fusions:
        fused = "no fused program" if f.fused_cost is None else f"fused cost {f.fused_cost}"
        verdict = "fused" if f.taken else "kept separate"
        print(f"fusion: {f.label}: {fused} against {f.separate_cost} separate ({f.seconds:.2f} s): {verdict}")
    print(
        f"intermediates: {sess.intermediate_bytes} bytes in {len(sess.buffers)} buffers "
        f"({sess.unplanned_bytes} without reuse)"
    )
    sys.stdout.flush()
    if args.emit == "c":
        from morello_asp.onnx.emit_c import model_c  # numpy: heavy, as above

        mc = model_c(sess, standalone=args.standalone)
        c_file, w_file = mc.save(args.out)
        print(f"wrote {c_file} and its weights {w_file} ({len(mc.weights)} bytes)")
        if args.standalone:
            exe = c_file.with_suffix("")
            print("build: " + " ".join(x.format(c=c_file, exe=exe) for x in mc.build))
            names = " ".join(n.upper() + ".bin" for n, _ in mc.inputs + mc.outputs)
            print(f"run:   {exe} {w_file} [{names}]")
    if args.run or args.bench:
        c = check(sess)
        verdict = "OK" if c.ok else "FAILED"
        print(f"checked against onnxruntime: max |error| {c.error:.3g} (tolerance {c.tolerance:.3g}) {verdict}")
        if not c.ok:
            raise RefutedError(f"{args.model}: the outputs differ from onnxruntime's by {c.error:.3g}")
    if args.bench:
        t = bench(sess, rounds=args.rounds)
        print(
            f"latency (median of {t.rounds} interleaved rounds, onnxruntime on 1 thread): "
            f"ours {per_call(t.ours)}, onnxruntime {per_call(t.onnxruntime)}, onnxruntime / ours {t.ratio:.2f}"
        )
    return 0


def register(sub) -> None:
    p = sub.add_parser(
        "onnx", help="compile an ONNX model to synthesized programs; check or time it against onnxruntime"
    )
    p.add_argument("model", metavar="MODEL.onnx", help="an ONNX model with static shapes, float32")
    add_target_option(p)
    add_rules_option(p, "extra logic file, or an optional rule set of encodings/options/ by name (repeatable)")
    g = p.add_mutually_exclusive_group()
    g.add_argument(
        "--db",
        metavar="FILE",
        help="memo table for the whole model, reused and grown (default: the user's default table, as synth's)",
    )
    g.add_argument("--no-db", action="store_true", help="keep nothing: search from scratch, write no table")
    p.add_argument(
        "--fuse",
        action="store_true",
        help="also search each chain one Compose spec expresses (softmax after a matmul) fused, "
        "and take it where it costs less (a longer search)",
    )
    p.add_argument("--run", action="store_true", help="run on random inputs and check against onnxruntime")
    p.add_argument("--bench", action="store_true", help="also time a run beside onnxruntime's (one thread)")
    p.add_argument(
        "--rounds",
        type=int_range(1, 1000, "a number of rounds"),
        default=7,
        help="interleaved timing rounds (default 7)",
    )
    p.add_argument(
        "--emit",
        choices=["c"],
        help="c: the whole model as one C file (every program, and model_run over one arena) "
        "and its weights beside it (FILE.weights.bin); needs --out",
    )
    p.add_argument(
        "--standalone",
        action="store_true",
        help="with --emit c: a main() that reads the weights and inputs from files, writes the outputs, times runs",
    )
    p.add_argument("--out", metavar="FILE.c", help="where --emit c writes the C (the weights go beside it)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    p.set_defaults(func=_onnx)
