"""A target read from its logic fact file (`encodings/targets/NAME.lp`) through clingo.

Python never parses the fact file itself: clingo grounds it and we read the atoms, so a
target written with rules (e.g. levels derived from other facts) works as well.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from pathlib import Path

import clingo

from morello_asp import native
from morello_asp.encodings import DIR
from morello_asp.errors import RuleError, TargetError
from morello_asp.kinds import builtin_files
from morello_asp.solver.logic.files import read_logic, with_includes
from morello_asp.user_cache import pickled, stamp

ENCODINGS = DIR


@dataclass(frozen=True)
class Level:
    name: str  # upper case, as in spec text: RF, VRF, L1, GL
    index: int
    capacity: int
    unit: str  # value | vector | line | byte
    weight: int
    kind: str  # register | cache | memory
    prefix: str = ""  # tgt_level_prefix/2: names of its buffers in listings and C start with it

    @property
    def atom(self) -> str:
        return self.name.lower()

    @property
    def is_register(self) -> bool:
        return self.kind == "register"

    @property
    def holds_vectors(self) -> bool:
        """A vector register file: its tensors have a vector size."""
        return self.unit == "vector"

    @property
    def has_layout(self) -> bool:
        return self.kind != "register"


@dataclass
class Target:
    name: str
    files: tuple[Path, ...]
    levels: tuple[Level, ...]
    line_bytes: int
    vector_types: dict[int, str]
    threads: int
    parallel_setup: int
    parallel_per_iter: int
    move_dests: frozenset[tuple[str, str]]
    loop_per_iter: int = 0  # tgt_loop_overhead/1: cost of one (per-thread) loop iteration
    carried_trip: int = 0  # tgt_carried_trip/2: latency of a sum into the same registers ...
    carried_hidden: int = 0  # ... and how much of a chain of them the CPU overlaps
    move_overhead: dict[str, int] = field(default_factory=dict)  # tgt_move_overhead/2: level -> cost per copy
    fetch_lines: int = 0  # tgt_fetch_lines/1: lines the memory system moves together (0: not declared)
    kernel_c: dict[tuple[str, str], str] = field(default_factory=dict)  # (kernel, dtype) -> C

    def level(self, name: str) -> Level:
        for lv in self.levels:
            if lv.name == name.upper():
                return lv
        raise TargetError(
            f"target {self.name} has no memory level {name!r}; levels: {', '.join(lv.name for lv in self.levels)}"
        )

    @property
    def level_names(self) -> list[str]:
        return [lv.name for lv in self.levels]

    @property
    def register_levels(self) -> frozenset[str]:
        return frozenset(lv.name for lv in self.levels if lv.kind == "register")

    @property
    def key(self) -> tuple[str, ...]:
        """The files that make this target: equal keys, equal targets."""
        return tuple(str(f) for f in self.files)

    def holds_vectors(self, level: str) -> bool:
        return self.level(level).holds_vectors

    def is_register(self, level: str) -> bool:
        return self.level(level).is_register

    @property
    def vector_levels(self) -> tuple[Level, ...]:
        return tuple(lv for lv in self.levels if lv.holds_vectors)

    @property
    def cache_levels(self) -> tuple[Level, ...]:
        """Hardware-managed levels, fastest first."""
        return tuple(lv for lv in self.levels if lv.kind == "cache")

    @property
    def memory_level(self) -> Level:
        """The slowest level: where the sugar form puts every tensor and programs' arguments live."""
        return self.levels[-1]

    def prefix(self, level: str) -> str:
        return self.level(level).prefix

    def max_limits(self) -> tuple[int, ...]:
        return tuple(lv.capacity for lv in self.levels)

    def units(self, level: str, volume: int, nbytes: int, vector_size: int | None) -> int:
        """Capacity units a buffer of `volume` values occupies at `level`."""
        lv = self.level(level)
        if lv.unit == "value":
            return volume
        if lv.unit == "vector":
            v = vector_size or 1
            return -(-volume // v)
        if lv.unit == "line":
            return -(-(volume * nbytes) // self.line_bytes)
        return volume * nbytes

    def vector_type(self, vector_size: int, nbytes: int) -> str:
        try:
            return self.vector_types[vector_size * nbytes]
        except KeyError:
            raise TargetError(f"target {self.name} has no {vector_size * nbytes}-byte vector registers") from None


def _sym(s: clingo.Symbol):
    if s.type == clingo.SymbolType.Number:
        return s.number
    if s.type == clingo.SymbolType.String:
        return s.string
    return str(s)


def _declares_levels(entry: Path) -> bool:
    """Whether a file, with what it #includes, declares memory levels (tgt_level/6): a
    target's entry file does; a file that targets include need not."""
    ctl = clingo.Control(["--warn=none"])
    try:
        ctl.load(str(entry))
        ctl.ground([("base", [])])
    except RuntimeError:
        return True  # a broken target is still a target: loading it says what is wrong
    return any(True for _ in ctl.symbolic_atoms.by_signature("tgt_level", 6))


def installed_targets() -> tuple[dict[str, Path], dict[str, list[str]]]:
    """The targets in encodings/targets/ by name, and the other .lp files there, which
    targets #include (c_scalar.lp: the C of the generic scalar kernel), each with the
    targets that include it. A target's entry file declares the machine's memory levels
    (tgt_level/6), itself or in a file it includes."""
    files = sorted((ENCODINGS / "targets").glob("*.lp"))
    entries = {f.stem: f for f in files if _declares_levels(f)}
    includes: dict[str, list[str]] = {f.stem: [] for f in files if f.stem not in entries}
    for name, f in entries.items():
        for g in with_includes([f])[1:]:
            if g.resolve().parent == f.resolve().parent and g.stem in includes:
                includes[g.stem].append(name)
    return entries, includes


NATIVE = "native"  # the host's target, written by morello_asp/native.py
TARGET_ENV = "MORELLO_ASP_TARGET"  # names the default target (a name or a path); unset: native


def default_target() -> str:
    """The target used where none is named (the CLI, the Python API, the benchmarks):
    $MORELLO_ASP_TARGET, else native."""
    return os.environ.get(TARGET_ENV, "").strip() or NATIVE


def target_entry(name_or_path: str | Path) -> Path:
    if str(name_or_path) == NATIVE:
        return native.entry()
    p = Path(name_or_path)
    if p.suffix == ".lp" and p.exists():
        return p.resolve()
    cand = ENCODINGS / "targets" / f"{name_or_path}.lp"
    if cand.exists():
        return cand  # an include file (no levels) is named as one when it is loaded
    known = ", ".join([NATIVE, *installed_targets()[0]])
    raise TargetError(f"unknown target {name_or_path!r}; known targets: {known} (or pass a path to a .lp file)")


def not_a_target(entry: Path) -> str | None:
    """For a file of encodings/targets/ that targets #include (no levels of its own):
    what to say instead of "no tgt_level/6 facts"."""
    entries, includes = installed_targets() if entry.parent == ENCODINGS / "targets" else ({}, {})
    if entry.stem not in includes:
        return None
    by = ", ".join(includes[entry.stem]) or "none"
    known = ", ".join([NATIVE, *entries])
    return f"{entry.stem} is not a target but a file targets include ({by}); known targets: {known}"


# Optional rule sets that the default rules have absorbed, and what replaced them.
RETIRED_RULE_SETS = {
    "l1_ways": "the default rules see strides now (rules/aliasing.lp)",
    "rows6": "targets declare their register blocks now (tgt_block_size/4, rules/register_blocks.lp)",
    "cache_half": "the default rules keep a view in a cache only if it fills at most half of it now "
    "(tgt_cache_share/2, rules/aliasing.lp)",
}


def rule_file(name_or_path: str | Path) -> Path:
    """A user's rule file, or an optional rule set shipped in `encodings/options/` by name."""
    p = Path(name_or_path)
    if p.exists():
        return p.resolve()
    cand = ENCODINGS / "options" / f"{name_or_path}.lp"
    if p.suffix != ".lp" and cand.exists():
        return cand
    known = sorted(q.stem for q in (ENCODINGS / "options").glob("*.lp"))
    if str(name_or_path) in RETIRED_RULE_SETS:
        raise RuleError(
            f"optional rule set {name_or_path} is retired: {RETIRED_RULE_SETS[str(name_or_path)]}; "
            f"drop it (optional rule sets by name: {', '.join(known)})"
        )
    raise RuleError(f"rule file not found: {name_or_path} (optional rule sets by name: {', '.join(known)})")


def load_target_file(entry: Path, extra: tuple[Path, ...] = ()) -> Target:
    messages: list[str] = []
    ctl = clingo.Control(["--warn=none"], logger=lambda code, msg: messages.append(msg))
    try:
        for f in (entry, *extra):
            ctl.load(str(f))
        ctl.ground([("base", [])])
    except RuntimeError:
        raise TargetError(f"cannot load target {entry}:\n" + "\n".join(messages)) from None
    atoms: dict[str, list[tuple]] = {}
    for a in ctl.symbolic_atoms:
        if a.is_fact or True:
            s = a.symbol
            atoms.setdefault(s.name, []).append(tuple(_sym(x) for x in s.arguments))

    def one(name):
        rows = atoms.get(name, [])
        if len(rows) != 1:
            raise TargetError(f"target {entry}: expected exactly one {name}/… fact, found {len(rows)}")
        return rows[0]

    prefixes = {str(n).upper(): str(p) for n, p in atoms.get("tgt_level_prefix", [])}
    levels = sorted(
        (
            Level(str(n).upper(), i, cap, str(u), w, str(k), prefixes.get(str(n).upper(), str(n)[0].lower()))
            for n, i, cap, u, w, k in atoms.get("tgt_level", [])
        ),
        key=lambda lv: lv.index,
    )
    if not levels:
        raise TargetError(not_a_target(entry) or f"target {entry}: no tgt_level/6 facts")
    if [lv.index for lv in levels] != list(range(len(levels))):
        raise TargetError(f"target {entry}: tgt_level indices must be 0..{len(levels) - 1}")
    for lv in levels:
        if lv.unit not in ("value", "vector", "line", "byte") or lv.kind not in ("register", "cache", "memory"):
            raise TargetError(f"target {entry}: bad tgt_level for {lv.name}: unit {lv.unit}, kind {lv.kind}")
    setup, per_iter = one("tgt_parallel_overhead")
    names = {lv.name for lv in levels}
    move_overhead = {}
    for lv, c in atoms.get("tgt_move_overhead", []):
        if str(lv).upper() not in names or not isinstance(c, int) or c < 0:
            raise TargetError(f"target {entry}: bad tgt_move_overhead({lv}, {c}): needs a level and a cost >= 0")
        move_overhead[str(lv).upper()] = c
    carried = one("tgt_carried_trip") if "tgt_carried_trip" in atoms else (0, 0)
    if not all(isinstance(x, int) and x >= 0 for x in carried):
        raise TargetError(
            f"target {entry}: bad tgt_carried_trip{tuple(carried)}: needs a latency and a hidden cost >= 0"
        )
    fetch = one("tgt_fetch_lines")[0] if "tgt_fetch_lines" in atoms else 0
    if not isinstance(fetch, int) or fetch < 0:
        raise TargetError(f"target {entry}: bad tgt_fetch_lines({fetch}): needs a number of lines >= 1")
    kernel_c = {}
    for k, dt, c in atoms.get("tgt_kernel_c", []):
        kernel_c[(str(k), str(dt))] = c
    return Target(
        name=str(one("tgt_name")[0]),
        files=(entry, *extra),
        levels=tuple(levels),
        line_bytes=one("tgt_line_bytes")[0],
        vector_types={b: t for b, t in atoms.get("tgt_vector_bytes", [])},
        threads=one("tgt_threads")[0],
        parallel_setup=setup,
        parallel_per_iter=per_iter,
        move_dests=frozenset((str(a).upper(), str(b).upper()) for a, b in atoms.get("tgt_move_dest", [])),
        loop_per_iter=one("tgt_loop_overhead")[0] if "tgt_loop_overhead" in atoms else 0,
        carried_trip=carried[0],
        carried_hidden=carried[1],
        move_overhead=move_overhead,
        fetch_lines=fetch,
        kernel_c=kernel_c,
    )


def get_target(name_or_path: str | Path | None = None, extra: tuple[str, ...] = ()) -> Target:
    """The target by name or entry file (None: the default target), with extra fact
    files; one object per set of files."""
    if name_or_path is None:
        try:
            entry = target_entry(default_target())
        except TargetError as e:
            if os.environ.get(TARGET_ENV, "").strip():
                raise TargetError(f"{TARGET_ENV}={os.environ[TARGET_ENV]!r}: {e}") from None
            raise
    else:
        entry = target_entry(name_or_path)
    return _load(str(entry), tuple(str(Path(e).resolve()) for e in extra))


@functools.cache
def _load(entry: str, extra: tuple[str, ...]) -> Target:
    """The target, from the user's cache when its files (and those they #include), this
    module and clingo are the ones it was read from (grounding the files through clingo's
    API was a tenth of a warm `query`); a target that fails to load is not kept."""
    files = [Path(entry), *(Path(e) for e in extra)]
    return pickled(
        "targets",
        stamp((Path(__file__),), read_logic(files), clingo.__version__, entry, *extra),
        lambda: load_target_file(Path(entry), tuple(Path(e) for e in extra)),
        lambda v: isinstance(v, Target),
    )


def as_target(t: str | Path | Target | None) -> Target:
    """A Target from a name, a path to its entry file, or a Target (None: the default)."""
    if isinstance(t, Target):
        return t
    return get_target(str(t) if t is not None else None)


def engine_files(target, rules) -> list[Path]:
    """The files an engine for `target` and `rules` loads (solver/search/engine.py, Engine)."""
    return [ENCODINGS / "synth.lp", *builtin_files(), *as_target(target).files, *(rule_file(r) for r in rules)]
