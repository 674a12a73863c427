"""A session beside onnxruntime: the same inputs, the largest difference of the outputs,
and the latency of both on one thread in interleaved rounds (what `morello-asp onnx
--run --bench` prints, and benchmarks/onnx_models.py)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from statistics import median

import numpy as np

from morello_asp.errors import InputError
from morello_asp.onnx.session import InferenceSession

# float32 results within RTOL of the largest output value (times at least one): the
# programs sum in another order than onnxruntime's kernels
RTOL = 1e-4


def onnxruntime_session(model, threads: int = 1):
    """onnxruntime's CPU session for the model, on `threads` intra-op threads."""
    try:
        import onnxruntime as ort  # optional dependency (the onnx extra)
    except ImportError:
        raise InputError("onnxruntime is not installed (pip install 'morello-asp[onnx]')") from None
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def random_feed(session: InferenceSession, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {i.name: rng.standard_normal(i.shape).astype(np.float32) for i in session.get_inputs()}


@dataclass
class Check:
    error: float  # max |ours - onnxruntime| over every output
    tolerance: float

    @property
    def ok(self) -> bool:
        return self.error <= self.tolerance


def check(session: InferenceSession, seed: int = 0, reference=None) -> Check:
    """Run both on the same random inputs (standard normal)."""
    ref = reference or onnxruntime_session(session.model)
    feed = random_feed(session, seed)
    ours = session.run(None, feed)
    want = ref.run(None, feed)
    err = max(float(np.max(np.abs(o - w), initial=0.0)) for o, w in zip(ours, want))
    scale = max(1.0, max(float(np.max(np.abs(w), initial=0.0)) for w in want))
    return Check(err, RTOL * scale)


@dataclass
class Timing:
    ours: float  # median seconds per run
    onnxruntime: float
    rounds: int

    @property
    def ratio(self) -> float:
        """onnxruntime's time over ours: above 1, ours is faster."""
        return self.onnxruntime / self.ours


def _per_call(fn, min_time: float) -> float:
    t0 = time.perf_counter()
    fn()
    once = max(time.perf_counter() - t0, 1e-9)
    n = max(1, int(min_time / once))
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


def bench(session: InferenceSession, rounds: int = 7, min_time: float = 0.05, reference=None) -> Timing:
    """Median latency of a run of each, onnxruntime on one thread, in interleaved rounds."""
    ref = reference or onnxruntime_session(session.model)
    feed = random_feed(session)
    names = [o.name for o in session.get_outputs()]

    def ours():
        session.run(names, feed)

    def theirs():
        ref.run(names, feed)

    for fn in (ours, theirs, ours, theirs):  # warm up
        fn()
    a, b = [], []
    for _ in range(rounds):
        a.append(_per_call(ours, min_time))
        b.append(_per_call(theirs, min_time))
    return Timing(median(a), median(b), rounds)
