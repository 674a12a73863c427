"""The worker side of precompute (solver/precompute/driver.py drives it): what runs in a
worker process or Ray actor (one engine, one replica of the table), and the wire
format of tasks and answers between driver and workers."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import zlib
from pathlib import Path

from morello_asp import kinds
from morello_asp.errors import MorelloError
from morello_asp.solver.logic import clingo_run
from morello_asp.solver.logic.files import is_shipped
from morello_asp.solver.memo.coords import to_coords
from morello_asp.solver.memo.sqlite import Decoder, encode_decision
from morello_asp.solver.memo.table import DictMemo, RectMemo, limits_range, normalize
from morello_asp.solver.search.dp import Search
from morello_asp.solver.search.engine import get_engine
from morello_asp.spec import parse_spec
from morello_asp.target import engine_files

PROTOCOL = 1  # of tasks and answers between driver and workers


def load_kinds(target, rules) -> None:
    """Make the kinds the rule files declare known (as an engine does), so a grid may
    name them."""
    if rules:
        kinds.load(engine_files(target, rules)[-len(rules) :])


# ================================================================= rows on the wire
def pack(rows) -> bytes:
    """Table rows (key, lo, hi, value text) as compressed JSON (no pickle: a worker's
    answer is data the driver reads, never code it runs)."""
    return zlib.compress(json.dumps(rows, separators=(",", ":")).encode(), 1)


def unpack(blob: bytes):
    return json.loads(zlib.decompress(blob))


# ===================================================================== worker side
def _replica_class():
    """The table as a worker reads it: boxes in table order, looked up as the table
    does (the first box holding a point answers), never merged (a merged table answers
    exactly like the sequence of its puts, so its boxes and later puts may be mixed)."""

    class _Replica(RectMemo):
        def __init__(self, levels):
            super().__init__(levels)
            self.decode = Decoder()

        def add(self, rows) -> int:
            for key, lo, hi, val in rows:
                self._seq += 1
                self._add_loaded(self._seq, key, tuple(lo), tuple(hi), self.decode(val, key))
            return len(rows)

    return _Replica


class TaskMemo:
    """The replica, then what this task decided (in the order it decided it)."""

    def __init__(self, base):
        self.base = base
        self.local = DictMemo()
        self.puts: list = []

    def get(self, spec):
        d = self.base.get(spec)
        return d if d is not None else self.local.get(spec)

    def put(self, spec, d) -> None:
        self.local.put(spec, d)
        self.puts.append((spec, d))

    def flush(self) -> None:
        pass


def rule_payload(rules) -> list[dict]:
    """Rule files travel by content (a worker on another machine has not got the file);
    optional rule sets shipped with morello-asp travel by name."""

    out = []
    for r in rules:
        p = Path(str(r))
        if p.is_file() and not is_shipped(p):
            out.append({"file": p.name, "text": p.read_text(encoding="utf-8")})
        else:
            out.append({"name": str(r)})
    return out


class Worker:
    """What runs in a worker process or Ray actor: one engine, one replica."""

    def __init__(self, cfg: dict):
        clingo_run.run_inline(True)  # this process is the worker: clingo runs here
        os.environ.setdefault("MORELLO_ASP_JOBS", "1")
        if cfg.get("protocol") != PROTOCOL:
            raise MorelloError(f"worker speaks precompute protocol {PROTOCOL}, the driver {cfg.get('protocol')}")
        # The driver's rule files arrive as text: written to a directory of this worker's
        # only while its engine starts (the engine grounds copies it takes then, and a
        # worker ends with os._exit, so nothing would remove the directory later).
        tmp = tempfile.mkdtemp(prefix="morello-asp-worker-rules-") if any("file" in r for r in cfg["rules"]) else None
        try:
            rules = []
            for i, r in enumerate(cfg["rules"]):
                if "file" in r:
                    assert tmp is not None
                    d = Path(tmp) / str(i)
                    d.mkdir()
                    f = d / r["file"]
                    f.write_text(r["text"], encoding="utf-8")
                    rules.append(str(f))
                else:
                    rules.append(r["name"])
            self.engine = get_engine(cfg["target"], tuple(rules))
        finally:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
        self.target = self.engine.target
        self.levels = tuple(self.target.level_names)
        self.hash = self.engine.logic_hash
        self.replica = _replica_class()(self.levels)

    def load(self, blob: bytes) -> int:
        return self.replica.add(unpack(blob))

    def run(self, text: str) -> bytes:
        """Solve the roots of a task (spec texts, one a line); the decisions made, as
        rows, with the rules' hash and statistics."""

        t0 = time.perf_counter()
        cpu0 = _cpu_with_helpers()  # clingo runs in this process (or its helpers): its time counts
        specs = [parse_spec(t, self.target) for t in text.splitlines()]
        memo = TaskMemo(self.replica)
        search = Search(self.engine, memo)
        grounded = self.engine.stats.specs
        lent = clingo_run.LENT_CALLS
        search.prefetch(*specs)
        for spec in specs:
            search.solve(spec)
        rows = []
        n = len(self.levels)
        for s, d in memo.puts:
            key, p = to_coords(s, self.levels)
            llo, lhi = limits_range(s, d)
            rows.append([key, [*p[:-n], *llo], [*p[:-n], *lhi], encode_decision(normalize(d, s))])
        out = {
            "protocol": PROTOCOL,
            "hash": self.hash,
            "rows": rows,
            "seconds": time.perf_counter() - t0,
            "cpu": _cpu_with_helpers() - cpu0,
            "classes": self.engine.stats.specs - grounded,
            "lent": clingo_run.LENT_CALLS - lent,
        }
        return zlib.compress(json.dumps(out, separators=(",", ":")).encode(), 1)


def _cpu_with_helpers() -> float:
    """CPU seconds of this process and of the clingo helpers it has started (a worker
    borrows idle workers' cores through them: clingo_run.lend_cores)."""

    total = time.process_time()
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    for pid in clingo_run.workers():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
        except (OSError, IndexError, ValueError):
            pass
    return total


# ================================================================ driver: validation
