"""Precomputing memo tables (issue 19): every spec of a grid, stage by stage, in parallel.

**The grid** (`Grid`) is a set of root specs: for each kind, dtype and shape whose
dimensions are powers of two up to a size (a batch dimension stays 1), the spec with
every tensor in the slowest level, row-major, and the target's whole memory (the
`Kind(MxKxN, dtype)` sugar). The levels, layouts, vector sizes and memory limits the
rules reach from a root are not enumerated here: solving a root solves its whole closure
(every sub-spec the rules leave, at every limit they pass down), and all of it enters
the table.

**Stages** (Morello's diagonals, `precompute/src/main.rs`): roots are grouped by their
kind's phase (kinds with fewer operands first, an accumulating kind before the kind it
accumulates for: Zero, Move, MatmulAccum, Matmul) and then by the sum of the log2 of
their dimensions. Every sub-spec a rewrite leaves is no larger in any dimension and
smaller in one, or has the same shape in another level, layout or kind, so a root's
sub-specs that are roots themselves are all in earlier stages; the rest of its closure
either is already in the table or is solved by the task itself. Tasks of one stage never
wait for each other.

**Tasks and workers.** A task is one root. A worker (a process of the local executor or
a Ray actor, `solver/precompute/executors.py`) holds an engine of its own and a read-only
replica of the table *as it was when the stage began*; it solves the root with the
ordinary dynamic program (`solver/search/dp.py`) over that replica plus a task-local table,
and returns only the decisions it made, as table rows (key, lo, hi, value). A task's
answer is therefore a function of the task and the table at the stage's start alone,
whatever worker ran it and whatever ran beside it.

**The driver** alone writes the SQLite table. Each task's answer is validated (the
rules' hash, the kinds and levels, every coordinate within the grid's bounds, the
limits within the target's, a decision that decodes for its spec) and then *staged*
(committed to the `staged` table) as it arrives; when a stage is complete its answers
enter the decision table in task order, in one transaction that also records the stage
as done. So the table is the same whatever the executor, the worker count or the order
in which answers arrive; a crash of a worker (its task is run again on a new one) or of
the driver loses nothing committed, and `--resume` continues with the tasks not staged
yet, against the same table, and ends with the same table as an uninterrupted run.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
import zlib
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import product
from pathlib import Path
from typing import Any

from morello_asp.dtypes import Dtype
from morello_asp.errors import InputError, MorelloError
from morello_asp.kinds import all_kinds, kind
from morello_asp.layout import Layout
from morello_asp.serialize import target_ref
from morello_asp.solver.logic import interrupt
from morello_asp.solver.logic.rule_check import check_rules
from morello_asp.solver.memo.coords import NOPAX
from morello_asp.solver.memo.sqlite import Decoder, SqliteMemo, logic_hash, operand_ranks
from morello_asp.solver.precompute import executors as ex
from morello_asp.solver.precompute.worker import PROTOCOL, Worker, load_kinds, pack, rule_payload
from morello_asp.solver.search.dp import Progress  # the status line, as synth's
from morello_asp.spec import Spec, parse_spec
from morello_asp.target import as_target, engine_files

PROGRESS_VERSION = "1"


# =============================================================== the grid and its order
def kind_names() -> list[str]:
    return list(all_kinds())


def parse_kinds(text) -> tuple[str, ...]:
    """Kind names as users type them (`matmul`, `MatmulAccum`, `matmul_accum`)."""
    items = [t for t in (text.split(",") if isinstance(text, str) else text) if str(t).strip()]
    if not items:
        raise InputError("--kinds: give at least one spec kind, e.g. matmul")
    known = {k.lower(): k for k in kind_names()}
    out = []
    for t in items:
        k = known.get(str(t).strip().lower().replace("_", ""))
        if k is None:
            raise InputError(f"--kinds: unknown spec kind {t!r}; known: {', '.join(kind_names())}")
        out.append(k)
    return tuple(dict.fromkeys(out))


def parse_dtypes(text) -> tuple[str, ...]:
    items = [t.strip() for t in (text.split(",") if isinstance(text, str) else text) if str(t).strip()]
    if not items:
        raise InputError("--dtypes: give at least one dtype, e.g. f32")
    for t in items:
        try:
            Dtype.parse(t)
        except ValueError:
            raise InputError(f"--dtypes: unknown dtype {t!r}; expected one of {Dtype.choices()}") from None
    return tuple(dict.fromkeys(items))


def kind_phase(kinds) -> dict[str, int]:
    """The order in which kinds' roots are solved: fewer operands first, an accumulating
    kind before the kind it accumulates for (what a rewrite of one leaves is then solved)."""

    def key(name):
        k = kind(name)
        rank = k.rank or 2
        return (k.arity(rank), 0 if k.is_accum else 1, name)

    return {k: i for i, k in enumerate(sorted(set(kinds), key=key))}


def diagonal(shape) -> int:
    """Sum of the (ceiling) log2 of the dimensions: the grid's diagonals."""
    return sum((d - 1).bit_length() for d in shape)


@dataclass(frozen=True)
class Grid:
    """Every spec of the given kinds and dtypes whose dimensions are powers of two up
    to `max_size` (a dimension with a default size, such as a batch, keeps it; a kind of
    no fixed rank is taken as 2-D)."""

    kinds: tuple[str, ...] = ("Matmul",)
    dtypes: tuple[str, ...] = ("f32",)
    max_size: int = 128

    def __post_init__(self):
        object.__setattr__(self, "kinds", parse_kinds(self.kinds))
        object.__setattr__(self, "dtypes", parse_dtypes(self.dtypes))
        if not isinstance(self.max_size, int) or not 1 <= self.max_size <= 2**30:
            raise InputError(f"--max-size: expected a whole number from 1 to 2^30, got {self.max_size!r}")

    def roots(self) -> list[str]:
        sizes = [1 << i for i in range(self.max_size.bit_length()) if 1 << i <= self.max_size]
        out = []
        for name in self.kinds:
            k = kind(name)
            rank = k.rank or 2
            fixed = dict(k.defaults)  # dimensions spec text may leave out (a batch of one)
            axes = [[fixed[d]] if d in fixed else sizes for d in range(rank)]
            for dt in self.dtypes:
                for shape in product(*axes):
                    out.append(f"{name}({'x'.join(map(str, shape))}, {dt})")
        return out

    def describe(self) -> str:
        return (
            f"--kinds {','.join(k.lower() for k in self.kinds)} --dtypes {','.join(self.dtypes)} "
            f"--max-size {self.max_size}"
        )


TASKS_PER_STAGE = 8  # default: a stage of more roots groups them, so that it has about this many tasks


@dataclass
class Stage:
    key: tuple[int, int]  # (kind phase, diagonal)
    specs: list[Any]  # its roots, largest first
    tasks: list[list[Any]]  # the roots of each task (the largest tasks first)


def stages_of(specs, tasks_per_stage: int = TASKS_PER_STAGE) -> list[Stage]:
    """Stages in order. Roots of a stage are dealt round-robin, largest first, into at
    most `tasks_per_stage` tasks: roots solved together share their clingo calls and
    sub-specs. The grouping depends on the grid alone (not on the workers), so the table
    does too; 0 puts every root in a task of its own."""
    phase = kind_phase({s.kind for s in specs})
    by: dict[tuple[int, int], list] = {}
    for s in dict.fromkeys(specs):
        by.setdefault((phase[s.kind], diagonal(s.shape)), []).append(s)
    out = []
    for key in sorted(by):
        group = sorted(by[key], key=lambda s: (-s.volume, s.text()))
        k = len(group) if tasks_per_stage <= 0 else min(len(group), tasks_per_stage)
        out.append(Stage(key, group, [group[j::k] for j in range(k)]))
    return out


def grid_specs(specs_or_grid, target) -> tuple[list, str]:
    """(root specs, a description for messages) of a Grid or an iterable of specs/texts."""

    if isinstance(specs_or_grid, Grid):
        return [parse_spec(t, target) for t in specs_or_grid.roots()], specs_or_grid.describe()
    if isinstance(specs_or_grid, (str, Spec)):
        specs_or_grid = [specs_or_grid]
    out = []
    for s in specs_or_grid:
        if isinstance(s, str):
            s = parse_spec(s, target)
        elif not isinstance(s, Spec):
            raise InputError(f"precompute expects a Grid or specs (text or Spec), got {type(s).__name__}")
        elif s.target is not target:
            s = parse_spec(s.text(), target)
        out.append(s)
    if not out:
        raise InputError("precompute: no specs given")
    return out, f"{len(out)} spec{'s' if len(out) > 1 else ''}"


def fingerprint(stages: list[Stage]) -> str:
    h = hashlib.sha256(f"precompute {PROTOCOL}\n".encode())
    for st in stages:
        h.update(f"{st.key}\n".encode())
        for task in st.tasks:
            h.update(b"task\n")
            for s in task:
                h.update(s.text().encode() + b"\n")
    return h.hexdigest()[:16]


class BadAnswer(MorelloError):
    """A worker's answer that the driver refuses (nothing of it enters the table)."""


class Validator:
    """Checks every row of a worker's answer before it may enter the table: made under
    the same rules (hash), a known kind over the table's levels, one spec class per row
    (its non-limit coordinates a point), dimensions within the grid, limits within the
    target's and the root's, a decision that decodes for its spec with a peak that is
    the box's lower corner. A bad or hostile worker can thus put nothing ill-formed,
    foreign or out of bounds into the table (that a well-formed decision is optimal
    only solving it again can tell; `db verify` proves every box legal)."""

    def __init__(self, levels, max_limits, logic: str, max_dim: int, target):
        self.levels = list(levels)
        self.max_limits = tuple(max_limits)
        self.logic = logic
        self.max_dim = max_dim
        self.target = target
        self.kinds = all_kinds()
        self._keys: dict[str, tuple] = {}
        self.decode = Decoder()

    def _key(self, key: str):
        got = self._keys.get(key)
        if got is not None:
            return got

        if not isinstance(key, str) or len(key) > 10_000:
            raise BadAnswer("a row's key is not a string of a reasonable size")
        k = json.loads(key)
        if not isinstance(k, dict) or set(k) - {"kind", "rank", "serial", "ops", "levels", "nlimits", "shape"}:
            raise BadAnswer(f"key {key[:80]} has unknown fields")
        kind = self.kinds.get(str(k.get("kind")))
        if kind is None:
            raise BadAnswer(f"key {key[:80]}: unknown spec kind {k.get('kind')!r}")
        rank = k.get("rank")
        if type(rank) is not int or not 1 <= rank <= 16 or (kind.rank is not None and rank != kind.rank):
            raise BadAnswer(f"key {key[:80]}: bad rank for {kind.name}")
        if k.get("levels") != self.levels or k.get("nlimits") != len(self.levels):
            raise BadAnswer(f"key {key[:80]}: levels other than the table's {self.levels}")
        if type(k.get("serial")) is not bool:
            raise BadAnswer(f"key {key[:80]}: serial must be true or false")
        ops = k.get("ops")
        ranks = operand_ranks(kind, rank)
        if not isinstance(ops, list) or len(ops) != len(ranks):
            raise BadAnswer(f"key {key[:80]}: {kind.name} takes {len(ranks)} operands")
        for op, r in zip(ops, ranks):
            if not (isinstance(op, list) and len(op) == 2 and op[0] in Dtype.__members__ and isinstance(op[1], str)):
                raise BadAnswer(f"key {key[:80]}: an operand is not [dtype, layout]")
            Layout.parse(op[1], r)
        shape = k.get("shape")
        if shape is not None:
            if (
                not isinstance(shape, list)
                or len(shape) != rank
                or not all(type(d) is int and 1 <= d <= self.max_dim for d in shape)
            ):
                raise BadAnswer(f"key {key[:80]}: shape outside the grid (dimensions 1..{self.max_dim})")
        got = self._keys[key] = (kind, rank, ranks, shape, len(ops))
        return got

    def rows(self, blob: bytes, task) -> tuple[list[tuple], dict]:
        """The answer's rows as (key, lo, hi, Decision, value text) for the table, and its
        statistics."""
        try:
            ans = json.loads(zlib.decompress(blob))
            if not isinstance(ans, dict) or ans.get("protocol") != PROTOCOL:
                raise BadAnswer(f"not a precompute answer of protocol {PROTOCOL}")
            if ans.get("hash") != self.logic:
                raise BadAnswer(
                    f"made under other logic files (hash {str(ans.get('hash'))[:12]}, the table's {self.logic[:12]}): "
                    "the worker runs another version of morello-asp or other rules"
                )
            rows = ans.get("rows")
            if not isinstance(rows, list):
                raise BadAnswer("no rows")
            out = []
            root_volume = max(s.volume for s in task)
            n = len(self.levels)
            for row in rows:
                if not isinstance(row, list) or len(row) != 4:
                    raise BadAnswer("a row is not [key, lo, hi, value]")
                key, lo, hi, val = row
                kind, rank, ranks, shape, nops = self._key(key)
                npoint = (0 if shape is not None else rank) + NOPAX * nops + n
                if not (
                    isinstance(lo, list)
                    and isinstance(hi, list)
                    and len(lo) == len(hi) == npoint
                    and all(type(x) is int for x in lo + hi)
                ):
                    raise BadAnswer(f"row of {key[:60]}: corners are not {npoint} integers each")
                if lo[:-n] != hi[:-n]:
                    raise BadAnswer(f"row of {key[:60]}: a decision covers one spec class (one point)")
                dims = shape if shape is not None else [1 << e for e in lo[:rank] if 0 <= e <= 40]
                if shape is None and (len(dims) != rank or any(not 0 <= e <= 40 for e in lo[:rank])):
                    raise BadAnswer(f"row of {key[:60]}: bad dimension coordinates")
                if any(d > self.max_dim for d in dims):
                    raise BadAnswer(f"row of {key[:60]}: a dimension larger than the grid's {self.max_dim}")
                volume = 1
                for d in dims:
                    volume *= d
                if volume > root_volume:
                    raise BadAnswer(f"row of {key[:60]}: a spec larger than the task's roots")
                ops = lo[rank if shape is None else 0 : -n]
                for i in range(nops):
                    lv, vs, contig, aligned, stride = ops[NOPAX * i : NOPAX * i + NOPAX]
                    if not (
                        0 <= lv < n
                        and 0 <= vs <= 1 << 16
                        and -1 <= contig <= 64
                        and aligned in (0, 1)
                        and -1 <= stride <= 62
                    ):
                        raise BadAnswer(f"row of {key[:60]}: operand {i} coordinates out of range")
                llo, lhi = lo[-n:], hi[-n:]
                if not all(0 <= a <= b <= m for a, b, m in zip(llo, lhi, self.max_limits)):
                    raise BadAnswer(f"row of {key[:60]}: limits outside 0..{list(self.max_limits)}")
                if not isinstance(val, str) or len(val) > 100_000:
                    raise BadAnswer(f"row of {key[:60]}: the value is not text")
                d = self.decode(val, key)
                if not isinstance(d.cost, Fraction) or d.cost < 0 or type(d.depth) is not int or d.depth < 0:
                    raise BadAnswer(f"row of {key[:60]}: a negative or malformed cost or depth")
                if type(d.chain) is not int or d.chain < 0:
                    raise BadAnswer(f"row of {key[:60]}: a negative or malformed chain of sums")
                if len(d.peak) != n or not all(type(x) is int for x in d.peak):
                    raise BadAnswer(f"row of {key[:60]}: a peak of {len(d.peak)} levels")
                if d.action is not None and (list(d.peak) != llo or d.depth < 1):
                    raise BadAnswer(f"row of {key[:60]}: the box must start at the decision's peak")
                if d.action is None and any(llo):
                    raise BadAnswer(f"row of {key[:60]}: 'no implementation' holds from zero limits up")
                out.append((key, tuple(lo), tuple(hi), d, val))
            stats = {
                k: ans.get(k) for k in ("seconds", "cpu", "classes", "lent") if isinstance(ans.get(k), (int, float))
            }
            return out, stats
        except BadAnswer:
            raise
        except Exception as e:  # noqa: BLE001 - whatever fails to read is the answer's fault
            raise BadAnswer(f"{type(e).__name__}: {e}") from None


# ===================================================================== the driver
_PC_TABLES = (
    "CREATE TABLE IF NOT EXISTS precompute(k TEXT PRIMARY KEY, v TEXT)",
    "CREATE TABLE IF NOT EXISTS staged(stage INTEGER, task INTEGER, rows BLOB, PRIMARY KEY(stage, task))",
)


@dataclass
class Report:
    """What a precompute did (also printed by the command)."""

    db: str
    grid: str
    stages: int
    tasks: int  # roots done (a root the table already held counts too)
    decisions: int = 0  # rows the workers returned and the table took in
    rectangles: int = 0
    seconds: float = 0.0
    task_seconds: float = 0.0  # summed inside workers
    task_cpu: float = 0.0  # CPU seconds the workers had for them (less than task_seconds on a busy machine)
    driver_cpu: float = 0.0  # CPU seconds of the driver (validating, staging, writing the table)
    classes: int = 0  # spec classes the workers grounded (a class may be grounded by several)
    lent_calls: int = 0  # clingo calls run in helpers on idle workers' cores
    workers: int = 0
    executor: str = "local"
    resumed_at: int | None = None
    stage_sizes: list[int] = field(default_factory=list)
    task_times: list[tuple[int, int, float]] = field(default_factory=list)  # (stage, task, seconds in the worker)

    @property
    def rate(self) -> float:
        return self.decisions / self.seconds if self.seconds else 0.0

    def summary(self) -> str:
        res = f", resumed at stage {self.resumed_at + 1}" if self.resumed_at is not None else ""
        return (
            f"precomputed {self.grid} into {self.db}: {self.tasks} root specs in {self.stages} stages{res}, "
            f"{self.decisions:,} decisions ({self.rate:,.0f}/s) in {self.seconds:.1f} s with {self.workers} "
            f"{self.executor} worker{'s' if self.workers != 1 else ''}; the table has {self.rectangles:,} rectangles"
        )


def _eta(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def table_rows(con) -> bytes:
    """The decision table's rows in table order, packed for a worker's replica."""
    return pack(
        [
            [k, json.loads(lo), json.loads(hi), v]
            for k, lo, hi, v in con.execute("SELECT key, lo, hi, value FROM decisions ORDER BY seq")
        ]
    )


def make_executor(executor, workers: int | None):
    """'local' (processes of this machine), 'ray' (the Ray cluster of RAY_ADDRESS or the
    one `ray start` made here), a Ray address ('auto', 'HOST:PORT', 'ray://HOST:10001'),
    or an executor object (solver/precompute/executors.py) used as it is."""

    if executor is None or executor == "local":
        return ex.LocalExecutor(workers)
    if isinstance(executor, str):
        return ex.RayExecutor(None if executor == "ray" else executor, workers)
    if hasattr(executor, "submit") and hasattr(executor, "poll"):
        return executor
    raise InputError(f"executor must be 'local', 'ray', a Ray address or an executor object, not {executor!r}")


def precompute(
    specs_or_grid,
    db,
    executor: Any = "local",
    workers: int | None = None,
    target=None,
    rules=(),
    resume: bool = False,
    restart: bool = False,
    progress: Progress | None = None,
    tasks_per_stage: int = TASKS_PER_STAGE,
    describe: str | None = None,
) -> Report:
    """Solve every spec of a grid (a `Grid`, or specs / spec texts) into the memo table
    `db`, stage by stage, with `workers` processes of the local executor (default: one
    per core) or an existing Ray cluster (`executor="ray"`: RAY_ADDRESS or the cluster
    `ray start` made here; or its address: "HOST:PORT", "ray://HOST:10001").
    `resume` continues an unfinished run of the same grid if there is one (without it,
    an unfinished run is refused); `restart` drops an unfinished run's staged answers.
    `tasks_per_stage`: how many tasks a stage's roots are grouped into (0: one task per
    root); it shapes the table's order, so tables compare equal only between runs with
    the same value. `describe` names the roots in the summary and in the message about an
    unfinished run (default: the grid's options, or "N specs"): the CLI's `--onnx FILE`."""

    if isinstance(rules, (str, Path)):
        rules = (rules,)
    rules = tuple(str(r) for r in rules)
    tgt = as_target(target)
    for w in check_rules(target, rules):
        print(f"morello-asp: warning: {w}", file=sys.stderr)
    load_kinds(tgt, rules)
    specs, what = grid_specs(specs_or_grid, tgt)
    describe = describe or what
    stages = stages_of(specs, tasks_per_stage)
    fp = fingerprint(stages)
    files = engine_files(tgt, rules)
    logic = logic_hash(files)
    levels = tuple(tgt.level_names)
    max_dim = max(max(s.shape) for s in specs)
    progress = progress or Progress(enabled=False)
    memo = SqliteMemo(Path(db), tgt.name, levels, logic, batch=1 << 30, target_obj=tgt, rules=rules)
    ex = None
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    report = Report(str(db), describe, len(stages), 0, stage_sizes=[len(s.specs) for s in stages])
    try:
        con = memo.con
        memo._begin()
        for sql in _PC_TABLES:
            con.execute(sql)
        memo.flush()
        state = dict(con.execute("SELECT k, v FROM precompute"))
        start = _check_progress(state, fp, describe, db, resume, restart, len(stages))
        if start is None or restart:
            memo._begin()
            con.execute("DELETE FROM staged")
            con.execute("DELETE FROM precompute")
            con.executemany(
                "INSERT INTO precompute VALUES (?, ?)",
                [
                    ("version", PROGRESS_VERSION),
                    ("grid", fp),
                    ("describe", describe),
                    ("stages", str(len(stages))),
                    ("next", "0"),
                    ("finished", "0"),
                ],
            )
            memo.flush()
            start = 0
        else:
            report.resumed_at = start
        staged: dict[int, bytes] = {}
        for task, blob in con.execute("SELECT task, rows FROM staged WHERE stage = ?", (start,)):
            staged[task] = blob
        validator = Validator(levels, tgt.max_limits(), logic, max_dim, tgt)
        ex = make_executor(executor, workers)
        # a shipped target by name, any other (native, a user's) by its entry file's path
        cfg = {"protocol": PROTOCOL, "target": target_ref(tgt), "rules": rule_payload(rules)}
        ex.start(cfg, lambda: table_rows(con))
        report.workers = ex.workers
        report.executor = ex.name
        _run_stages(memo, ex, stages, start, staged, validator, report, progress, t0)
        memo._begin()
        con.execute("UPDATE precompute SET v = '1' WHERE k = 'finished'")
        memo.flush()
    except KeyboardInterrupt:
        progress.done()
        try:
            memo.flush()
        finally:
            if ex is not None:
                ex.close()
        raise
    finally:
        progress.done()
        if ex is not None:
            ex.close()
        report.rectangles = len(memo)
        memo.close()
    report.seconds = time.perf_counter() - t0
    report.driver_cpu = time.process_time() - cpu0
    return report


def _check_progress(state, fp, describe, db, resume, restart, nstages) -> int | None:
    """The stage to continue from (None: start afresh), or an error saying why not."""
    unfinished = bool(state) and state.get("finished") != "1"
    if not unfinished:  # --resume with nothing to resume simply starts
        return None
    if restart:
        return None
    what = state.get("describe", "?")
    at = f"stage {int(state.get('next', 0)) + 1} of {state.get('stages', '?')}"
    if state.get("version") != PROGRESS_VERSION or state.get("grid") != fp:
        hint = f"continue it with `morello-asp precompute --db {db} {what} --resume`" if "--" in what else "finish it"
        raise InputError(
            f"{db} has an unfinished precompute of another grid ({what}, at {at}); {hint}, or add --restart to "
            "drop its unfinished stage (the decisions it committed stay)"
        )
    if not resume:
        raise InputError(
            f"{db} has an unfinished precompute of this grid (at {at}); add --resume to continue it, or --restart "
            "to begin again (the decisions it committed stay)"
        )
    return int(state["next"])


class _Tally:
    """Where a run is, for the progress line: stages, roots and decisions, and an ETA
    from the roots finished so far (a root weighs its diagonal plus one: larger roots
    leave more to solve)."""

    def __init__(self, stages, start: int, report: Report, t0: float):
        self.stages = stages
        self.report = report
        self.t0 = t0
        self.total = sum(len(st.specs) for st in stages)
        self.total_w = sum((st.key[1] + 1) * len(st.specs) for st in stages)
        self.done_w = sum((st.key[1] + 1) * len(st.specs) for st in stages[:start])
        self.timed_w = 0.0  # weight finished by this run
        self.stage = start
        self.tasks_done = 0

    def finished(self, task) -> None:
        w = sum(self.stages[self.stage].key[1] + 1 for _ in task)
        self.done_w += w
        self.timed_w += w
        self.tasks_done += 1

    def line(self) -> str:
        r = self.report
        st = self.stages[self.stage]
        elapsed = time.perf_counter() - self.t0
        rate = r.decisions / elapsed if elapsed > 0 else 0.0
        eta = f", ETA {_eta(elapsed * (self.total_w - self.done_w) / self.timed_w)}" if self.timed_w else ""
        return (
            f"precompute: stage {self.stage + 1}/{len(self.stages)} ({self.tasks_done}/{len(st.tasks)} tasks), "
            # the ETA before the counters: a narrow terminal cuts the line's end
            f"{r.tasks:,}/{self.total:,} root specs{eta}, {r.decisions:,} decisions, {rate:,.0f}/s, {elapsed:.0f} s"
        )


def _run_stages(memo, ex, stages, start, staged, validator, report, progress, t0) -> None:
    con = memo.con
    report.tasks = sum(len(st.specs) for st in stages[:start])
    tally = _Tally(stages, start, report, t0)
    pending = None  # (stage index, rows in task order) not yet in the decision table
    with interrupt.handling():
        for si in range(start, len(stages)):
            st = stages[si]
            tally.stage, tally.tasks_done = si, 0
            answers: dict[int, list] = {}
            for i, blob in (staged if si == start else {}).items():
                answers[i], _ = validator.rows(blob, st.tasks[i])
                report.tasks += len(st.tasks[i])
                tally.finished(st.tasks[i])
            todo = [i for i in range(len(st.tasks)) if i not in answers]
            for i in todo:
                ex.submit(i, "\n".join(s.text() for s in st.tasks[i]))
            if pending is not None:  # while the workers start on this stage
                _apply(memo, *pending)
                pending = None
            left = set(todo)
            progress.show(tally.line(), force=True)
            while left:
                for i, blob, err in ex.poll(0.2):
                    task = st.tasks[i]
                    what = str(task[0]) + (f" and {len(task) - 1} more roots" if len(task) > 1 else "")
                    if err is not None:
                        raise MorelloError(f"precompute task {what} failed in a worker: {err}")
                    try:
                        rows, stats = validator.rows(blob, task)
                    except BadAnswer as e:
                        raise MorelloError(
                            f"a worker's answer for {what} was refused, nothing of it entered {report.db}: {e}"
                        ) from None
                    memo._begin()
                    con.execute("INSERT OR REPLACE INTO staged VALUES (?, ?, ?)", (si, i, blob))
                    memo.flush()
                    answers[i] = rows
                    left.discard(i)
                    report.tasks += len(task)
                    report.decisions += len(rows)
                    report.task_seconds += float(stats.get("seconds", 0.0))
                    report.task_cpu += float(stats.get("cpu", 0.0))
                    report.task_times.append((si, i, float(stats.get("seconds", 0.0))))
                    report.classes += int(stats.get("classes", 0))
                    report.lent_calls += int(stats.get("lent", 0))
                    tally.finished(task)
                    progress.show(tally.line())
                interrupt.check()
            progress.show(tally.line(), force=True)  # the stage's end, whatever the throttle skipped
            rows = [r for i in range(len(st.tasks)) for r in answers[i]]
            ex.broadcast(pack([[k, list(lo), list(hi), val] for k, lo, hi, _, val in rows]))
            pending = (si, rows)
        if pending is not None:
            _apply(memo, *pending)


def _apply(memo, si: int, rows) -> None:
    """A complete stage into the decision table, in task order, in one transaction that
    also records it as done and drops its staged answers."""
    memo._begin()
    for key, lo, hi, d, _ in rows:
        memo._insert_box(key, lo, hi, d)
    memo.con.execute("DELETE FROM staged WHERE stage <= ?", (si,))
    memo.con.execute("UPDATE precompute SET v = ? WHERE k = 'next'", (str(si + 1),))
    memo.flush()


__all__ = ["BadAnswer", "Grid", "Progress", "Report", "Validator", "Worker", "precompute"]
