"""Whole ONNX blocks: morello_asp.onnx.InferenceSession beside onnxruntime, one thread.

    python benchmarks/onnx_models.py [--only attention] [--target T] [--db F] [--rounds 7]
    python benchmarks/onnx_models.py --only resnet50      # torchvision's ResNet-50, end to end
    python benchmarks/onnx_models.py --only attention --fuse   # chains fused where the search says

Each block (morello_asp/onnx/blocks.py, built with onnx.helper, random weights) is
compiled twice: cold (an empty memo table, or --db's as it is) and warm (a second
session on the same table: every spec answered from it, modules from the compile
cache). It is then checked against onnxruntime on random inputs and both are timed in
interleaved rounds (median seconds per run; onnxruntime with intra_op_num_threads = 1,
its default full-ISA kernels). The ratio is onnxruntime's time over ours (> 1: ours is
faster). The table names the CPU and target. With --fuse both sessions also search each
chain one Compose spec expresses (softmax(Q @ K^T)) fused, and take it where it costs
less; the "fused" column says how many chains were taken of those found.

ResNet-50 (torchvision's, random weights, exported at 1 x 3 x 224 x 224 by torch's
TorchScript exporter, opset 17) runs only when named (`--only resnet50`: its cold compile
searches 44 distinct specs) and needs torch and torchvision (`pip install torch
torchvision`, not in any extra); without them its row says so.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from host import full_isa, title

full_isa(sys.argv)  # must precede numpy's import

from morello_asp.codegen.calling import per_call  # noqa: E402
from morello_asp.onnx import InferenceSession  # noqa: E402
from morello_asp.onnx.blocks import attention, bottleneck  # noqa: E402
from morello_asp.onnx.compare import bench, check  # noqa: E402


@dataclass(frozen=True)
class Case:
    label: str
    build: object  # () -> ModelProto, or None when what builds it is not installed
    heavy: bool = False  # run only when --only names it


def resnet50():
    """torchvision's ResNet-50 with random weights as an ONNX model, or None without torch
    and torchvision."""
    try:
        import torch
        import torchvision
    except ImportError:
        return None
    import io
    import warnings

    import onnx

    net = torchvision.models.resnet50(weights=None).eval()
    buf = io.BytesIO()
    with warnings.catch_warnings():  # the TorchScript exporter's deprecation notice
        warnings.simplefilter("ignore")
        x = torch.randn(1, 3, 224, 224)
        torch.onnx.export(net, (x,), buf, input_names=["x"], output_names=["y"], opset_version=17, dynamo=False)
    return onnx.load_from_string(buf.getvalue())


CASES = [
    Case("attention s=128 d=64", lambda: attention(s=128, d=64)),
    Case("attention s=256 d=64", lambda: attention(s=256, d=64)),
    Case("bottleneck 16-8-32 14x14 (stride 2)", lambda: bottleneck(cin=16, cmid=8, cout=32, hw=14)),
    Case("resnet50 1x3x224x224 (torchvision)", resnet50, heavy=True),
]


def run_case(case: Case, target, db: str, rounds: int, fuse: bool = False) -> dict | None:
    model = case.build()  # type: ignore[operator]
    if model is None:
        return None
    t0 = time.perf_counter()
    InferenceSession(model, target=target, db=db, fuse=fuse)
    cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    sess = InferenceSession(model, target=target, db=db, fuse=fuse)
    warm = time.perf_counter() - t0
    c = check(sess)
    if not c.ok:
        raise SystemExit(f"{case.label}: differs from onnxruntime by {c.error:.3g} (tolerance {c.tolerance:.3g})")
    t = bench(sess, rounds=rounds)
    fused = f"{sum(f.taken for f in sess.fusions)} of {len(sess.fusions)}"
    return dict(case=case.label, steps=len(sess.plan.steps), specs=len(sess.programs), cold=cold, warm=warm,
                err=c.error, ours=t.ours, ort=t.onnxruntime, ratio=t.ratio, fused=fused)  # fmt: skip


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="ONNX blocks: morello-asp vs onnxruntime, single-threaded")
    ap.add_argument("--only", nargs="*", default=None, help="cases whose label contains one of these words")
    ap.add_argument("--target", default=None, help="target (default: native, this machine's)")
    ap.add_argument("--db", default=None, help="memo table (default: a new one: cold compiles are cold)")
    ap.add_argument("--rounds", type=int, default=7, help="interleaved timing rounds (default 7)")
    ap.add_argument("--fuse", action="store_true", help="fuse chains where the search prices them lower")
    args = ap.parse_args(argv)
    cases = [c for c in CASES if (not args.only and not c.heavy) or any(w in c.label for w in args.only or ())]
    print(title(args.target))
    fcol = (" fused |", "---|") if args.fuse else ("", "")
    head = "cold compile s | warm compile s | max error | ours | onnxruntime | ort / ours |"
    print(f"| block | steps | specs |{fcol[0]} {head}")
    print(f"|---|---|---|{fcol[1]}---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or str(Path(tmp) / "onnx_models.db")
        for case in cases:
            r = run_case(case, args.target, db, args.rounds, args.fuse)
            if r is None:
                print(f"| {case.label} | skipped: torch and torchvision are not installed | | | | | | | |", flush=True)
                continue
            print(
                f"| {r['case']} | {r['steps']} | {r['specs']} |{' ' + r['fused'] + ' |' if args.fuse else ''}"
                f" {r['cold']:.1f} | {r['warm']:.2f} | {r['err']:.2g} "
                f"| {per_call(r['ours'])} | {per_call(r['ort'])} | {r['ratio']:.2f} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    from morello_asp.cli import run_script

    sys.exit(run_script(main, Path(__file__).name))
