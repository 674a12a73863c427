"""Where an ONNX model's run goes: each step's call timed inside the sequence of a run,
beside the same call repeated alone (its data then hot in the caches).

    python benchmarks/onnx_steps.py MODEL.onnx --db TABLE [--runs 20] [--top 25]

The session is built as `morello-asp onnx` builds it (the memo table named: a model's
cold compile can take many minutes). Rows group the steps by spec (`copy`: a staging
copy of a strided view), sorted by the time lost in sequence, where a step's operands
come from memory instead of the caches (a model's weights, larger than the last cache,
do). Prints a table; --plot FILE draws the two times per group (needs matplotlib). A
model it cannot take is one line, exit 2.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time

from host import full_isa, title

full_isa(sys.argv)  # must precede numpy's import

import numpy as np  # noqa: E402

from morello_asp.errors import InputError  # noqa: E402
from morello_asp.onnx import InferenceSession  # noqa: E402
from morello_asp.onnx.compare import random_feed  # noqa: E402


def call_labels(sess: InferenceSession) -> list[str]:
    """Each bound call's spec (its kind and dimensions), or `copy` for a staging copy."""
    programs = iter(st.spec for st in sess.plan.steps if st.spec is not None)
    labels = []
    for c in sess._calls:
        staging = isinstance(c, functools.partial) and c.func is np.copyto
        labels.append("copy" if staging else str(next(programs)).split(",")[0])
    return labels


def profile(sess: InferenceSession, runs: int) -> tuple[np.ndarray, np.ndarray]:
    """Milliseconds per call: inside a run's sequence (mean of `runs`), and alone (the
    call repeated 4 times right after itself, mean)."""
    sess.run(None, random_feed(sess))  # inputs into the kept buffers; modules warm
    calls, pc = sess._calls, time.perf_counter
    seq, alone = np.zeros(len(calls)), np.zeros(len(calls))
    for _ in range(runs):
        sess._made = {}
        for i, c in enumerate(calls):
            t0 = pc()
            c()
            seq[i] += pc() - t0
    reps = max(1, runs // 4)
    for _ in range(reps):
        for i, c in enumerate(calls):
            c()
            t0 = pc()
            for _ in range(4):
                c()
            alone[i] += (pc() - t0) / 4
    return seq * 1e3 / runs, alone * 1e3 / reps


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", help="ONNX model file")
    p.add_argument("--db", required=True, help="memo table (the model's compile searches what it lacks)")
    p.add_argument("--target", default=None, help="target (default: native, this machine's)")
    p.add_argument("--runs", type=int, default=20, help="runs timed in sequence (default 20)")
    p.add_argument("--top", type=int, default=25, help="rows printed (default 25)")
    p.add_argument("--plot", metavar="FILE", help="draw the groups' times into FILE (needs matplotlib)")
    a = p.parse_args(argv)
    try:
        sess = InferenceSession(a.model, target=a.target, db=a.db)
    except InputError as e:  # a missing or unsupported model, a bad target: one line, exit 2
        print(f"onnx_steps.py: error: {e}", file=sys.stderr)
        return 2
    seq, alone = profile(sess, a.runs)
    groups: dict[str, list[float]] = {}
    for label, s, t in zip(call_labels(sess), seq, alone):
        g = groups.setdefault(label, [0, 0.0, 0.0])
        g[0] += 1
        g[1] += s
        g[2] += t
    print(f"{a.model}: {len(sess._calls)} calls, {title(sess.target)}")
    unit, k = ("ms", 1.0) if seq.sum() >= 1 else ("us", 1e3)  # a block's calls take microseconds
    print(f"in sequence {seq.sum() * k:.2f} {unit}, alone {alone.sum() * k:.2f} {unit} (sum over the calls)")
    print(f"| spec | calls | in sequence {unit} | alone {unit} | lost {unit} |")
    print("|---|---|---|---|---|")
    rows = sorted(groups.items(), key=lambda kv: -(kv[1][1] - kv[1][2]))
    for label, (n, s, t) in rows[: a.top]:
        print(f"| {label} | {n} | {s * k:.2f} | {t * k:.2f} | {(s - t) * k:.2f} |")
    if a.plot:
        import matplotlib.pyplot as plt

        top = rows[: a.top]
        fig, ax = plt.subplots(figsize=(9, 0.3 * len(top) + 1))
        y = np.arange(len(top))
        ax.barh(y - 0.2, [g[1] * k for _, g in top], 0.4, label="in sequence")
        ax.barh(y + 0.2, [g[2] * k for _, g in top], 0.4, label="alone")
        ax.set_yticks(y, [k for k, _ in top], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel(f"{unit} per run")
        ax.legend()
        fig.tight_layout()
        fig.savefig(a.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
