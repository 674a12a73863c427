"""The native target: a target fact file written for the host, the default target.

`archspec` names the host's microarchitecture and its features; sysfs gives its caches
(size, ways, sets, line size, which CPUs share each) and the cores this process may use.
From the features comes the instruction set whose files the target includes: of those
whose facts say the CPU can run them (tgt_native_family/1, tgt_cpu_flag/1), the one of
highest tgt_native_rank/1 (avx512, avx2, neon, scalar C; the scalar fallback is said in
one line on stderr). The machine is the ISA's own model machine (`targets/<isa>/machine.lp`)
with the host's numbers in place of the model's: each cache level's capacity in lines (the
model's cache levels in index order are the host's L1, L2, ...; tgt_native_fraction/2
may give a level part of its cache), its ways and sets (rules/aliasing.lp), the line
size and the threads; how
programs are built and run is the defaults' (gcc, in process), since they run here.

The file is written into the user's cache directory (`native/`), named by
microarchitecture and the hash of its text, so hosts with the same microarchitecture,
caches and cores write the same file and share memo tables (whose key is the hash of
the logic files). It is an ordinary target: a user may copy it, edit it and pass the
copy with `--target PATH`.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import clingo

from morello_asp.encodings import DIR
from morello_asp.errors import TargetError
from morello_asp.solver.logic.files import own_rules, read_logic
from morello_asp.user_cache import keep, pickled, stamp, user_cache_dir

TARGETS = DIR / "targets"
SYSFS = Path("/sys/devices/system/cpu")
SCALAR = "scalar"  # the ISA of the fallback message (targets/scalar.lp)
# The facts of an ISA's model machine the host's numbers replace (each cache level's
# tgt_level/6, tgt_cache_ways/2 and tgt_cache_sets/2 too), and how the model's programs
# are built and run (a cross compiler, an emulator): native programs run here.
REPLACED = frozenset({"tgt_name", "tgt_threads", "tgt_line_bytes"})
BUILD = frozenset({"tgt_c_compiler", "tgt_c_flag", "tgt_run_mode", "tgt_run_emulator"})
CACHE_FACTS = frozenset({"tgt_level", "tgt_cache_ways", "tgt_cache_sets"})


@dataclass(frozen=True)
class Cache:
    """One cache of the host, as sysfs describes it (cpu*/cache/index*)."""

    level: int
    type: str  # Data, Instruction or Unified
    size: int  # bytes
    ways: int
    sets: int
    line: int  # bytes
    shared_by: int  # CPUs sharing one copy

    def text(self) -> str:
        size = f"{self.size // 2**20} MiB" if self.size % 2**20 == 0 else f"{self.size // 1024} KiB"
        share = "private" if self.shared_by <= 1 else f"shared by {self.shared_by} CPUs"
        shape = f"{self.ways}-way, {self.sets} sets, {self.line}-byte lines"
        return f"L{self.level} {self.type.lower()} {size}, {shape}, {share}"


@dataclass(frozen=True)
class Isa:
    """An instruction set the native target may include: a shipped entry file
    targets/NAME.lp over NAME/isa.lp and NAME/machine.lp, and what its facts say it needs."""

    name: str
    family: str | None  # tgt_native_family/1: archspec's CPU family; None: any
    rank: int  # tgt_native_rank/1
    flags: tuple[str, ...]  # tgt_cpu_flag/1: the CPU features its programs need


def ground_facts(path: Path) -> dict[tuple[str, int], list[tuple[clingo.Symbol, ...]]]:
    """The atoms a logic file derives on its own, by (name, arity): their arguments."""
    ctl = clingo.Control(["--warn=none"])
    ctl.load(str(path))
    ctl.ground([("base", [])])
    out: dict[tuple[str, int], list[tuple[clingo.Symbol, ...]]] = {}
    for a in ctl.symbolic_atoms:
        out.setdefault((a.symbol.name, len(a.symbol.arguments)), []).append(tuple(a.symbol.arguments))
    return out


def _isa_facts(entry: Path) -> Isa | None:
    facts = ground_facts(entry)

    def args(name: str) -> list[clingo.Symbol]:
        return [a[0] for a in facts.get((name, 1), [])]

    ranks = [a.number for a in args("tgt_native_rank")]
    if not ranks:
        return None  # not offered to hosts
    fams = [a.name or a.string for a in args("tgt_native_family")]
    flags = tuple(sorted(a.string for a in args("tgt_cpu_flag")))
    return Isa(entry.stem, fams[0] if fams else None, max(ranks), flags)


@functools.cache
def isas() -> tuple[Isa, ...]:
    """The shipped instruction sets, read from their facts (once a process; remembered in
    the user's cache by the files' contents: grounding them took about 12 ms a process)."""
    entries = sorted(e for e in TARGETS.glob("*.lp") if (TARGETS / e.stem / "isa.lp").is_file())
    key = stamp((Path(__file__),), read_logic(entries), clingo.__version__)
    return pickled(
        "native",
        f"isas-{key[:32]}",
        lambda: tuple(i for i in map(_isa_facts, entries) if i is not None),
        lambda v: isinstance(v, tuple) and all(isinstance(i, Isa) for i in v),
    )


@dataclass(frozen=True)
class Host:
    """What the native target is made from."""

    microarch: str  # archspec's name: zen4, skylake_avx512, x86_64_v4, neoverse_n1, ...
    vendor: str
    family: str  # x86_64, aarch64, ...
    features: frozenset[str]
    caches: tuple[Cache, ...]
    cores: int  # cores this process may use

    def data_cache(self, level: int) -> Cache | None:
        return next((c for c in self.caches if c.level == level and c.type in ("Data", "Unified")), None)

    def runs(self, isa: Isa) -> bool:
        return (isa.family is None or isa.family == self.family) and all(f in self.features for f in isa.flags)

    @property
    def isa(self) -> str:
        """The instruction set whose files serve this CPU: of those it can run, the one
        of highest tgt_native_rank/1."""
        fits = [i for i in isas() if self.runs(i)]
        return max(fits, key=lambda i: (i.rank, i.name)).name if fits else SCALAR

    @property
    def isa_reason(self) -> str:
        chosen = next((i for i in isas() if i.name == self.isa), None)
        if chosen is not None and chosen.flags:
            return f"the CPU has {', '.join(chosen.flags)}"
        if chosen is not None and chosen.family is not None:
            return f"a {chosen.family} CPU"
        better = [i for i in isas() if chosen is None or i.rank > chosen.rank]
        needs = "; ".join(f"{i.name} needs {i.family or 'any'} and {', '.join(i.flags) or 'nothing'}" for i in better)
        return f"no other ISA file serves it ({needs})"


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def cpu_list(text: str) -> set[int]:
    """A sysfs CPU list ("0-3,8,10-11") as a set."""
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def _size(text: str) -> int:
    m = re.fullmatch(r"(\d+)\s*([KMG]?)", text.strip(), re.I)
    if not m:
        raise ValueError(text)
    return int(m.group(1)) * {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[m.group(2).upper()]


def read_caches(sysfs: Path, cpu: int) -> tuple[Cache, ...]:
    """The caches CPU `cpu` sees (sysfs cpu<N>/cache/index*); none where sysfs says nothing."""
    out = []
    for d in sorted((sysfs / f"cpu{cpu}" / "cache").glob("index*")):
        try:
            level, kind = int(_read(d / "level") or ""), _read(d / "type") or ""
            size, ways = _size(_read(d / "size") or ""), int(_read(d / "ways_of_associativity") or "")
            line = int(_read(d / "coherency_line_size") or "")
        except ValueError:
            continue  # an entry sysfs leaves incomplete (some virtual machines do): not a cache we can model
        sets_text = _read(d / "number_of_sets")
        sets = int(sets_text) if sets_text and sets_text.isdigit() else size // max(1, ways * line)
        shared = cpu_list(_read(d / "shared_cpu_list") or str(cpu))
        out.append(Cache(level, kind, size, ways, sets, line, max(1, len(shared))))
    return tuple(sorted(out, key=lambda c: (c.level, c.type)))


def count_cores(sysfs: Path, cpus: Iterable[int]) -> int:
    """Physical cores among `cpus` (SMT siblings count once; sysfs topology), or the
    number of CPUs where sysfs has no topology."""
    cores = set()
    for c in cpus:
        top = sysfs / f"cpu{c}" / "topology"
        core, pkg = _read(top / "core_id"), _read(top / "physical_package_id")
        cores.add((pkg, core) if core is not None else ("cpu", c))
    return max(1, len(cores))


@dataclass(frozen=True)
class Cpu:
    """archspec's answer, as kept in the user's cache."""

    name: str
    vendor: str
    family: str
    features: frozenset[str]


_VARYING = re.compile(rb"^(cpu mhz|bogomips)\s*:.*$", re.I | re.M)  # lines of /proc/cpuinfo that change by the second


def archspec_host() -> Cpu:
    """archspec.cpu.host(), remembered in the user's cache by what archspec reads (the
    text of /proc/cpuinfo, less its clock lines) and its version: loading its database
    took most of the 70 ms the native target added to every command."""
    import archspec  # the package alone, for its version: its database is archspec.cpu, loaded only in ask()

    try:
        info = _VARYING.sub(b"", Path("/proc/cpuinfo").read_bytes())
    except OSError:
        info = b""
    key = hashlib.sha256(info + b"\0" + archspec.__version__.encode() + b"\0" + sys.platform.encode()).hexdigest()

    def ask() -> Cpu:
        import archspec.cpu  # only when the answer is not in the cache: its database takes a while to load

        c = archspec.cpu.host()
        return Cpu(str(c.name), str(c.vendor), str(c.family.name), frozenset(str(f) for f in c.features))

    return pickled("native", f"cpu-{key[:32]}", ask, lambda v: isinstance(v, Cpu))


def detect(sysfs: Path = SYSFS, cpu: Any = None, cpus: Iterable[int] | None = None) -> Host:
    """The host: `cpu` is archspec's answer (archspec_host() when None), `cpus` the
    CPUs this process may run on (os.sched_getaffinity when None)."""
    if cpu is None:
        cpu = archspec_host()
    allowed = sorted(os.sched_getaffinity(0) if cpus is None else cpus) or [0]
    return Host(
        microarch=str(cpu.name),
        vendor=str(cpu.vendor),
        family=str(getattr(cpu.family, "name", cpu.family)),
        features=frozenset(str(f) for f in cpu.features),
        caches=read_caches(sysfs, allowed[0]),
        cores=count_cores(sysfs, allowed),
    )


def rules_except(path: Path, drop: Callable[[str, str], bool]) -> list[str]:
    """The rules of a logic file (read with clingo's parser, one per line) but those whose
    head `drop(name, first argument)` refuses; comments and directives are left out."""
    return [r.text for r in own_rules(path) if not (r.head and drop(r.head, r.args[0] if r.args else ""))]


def _levels(facts: dict) -> list[tuple]:
    """The tgt_level/6 atoms of a machine file's facts (ground_facts): (name, index,
    capacity, unit, weight, kind), by index."""
    atoms = facts.get(("tgt_level", 6), [])
    rows = [(str(n), i.number, cap.number, str(u), w.number, str(k)) for n, i, cap, u, w, k in atoms]
    return sorted(rows, key=lambda r: r[1])


_INCLUDE = re.compile(r'^\s*#include\s+"([^"]+)"\s*\.', re.M)


def isa_files(isa: str) -> list[Path]:
    """The files the ISA's shipped entry file includes but its model machine."""
    entry = TARGETS / f"{isa}.lp"
    return [(entry.parent / f).resolve() for f in _INCLUDE.findall(entry.read_text()) if f != f"{isa}/machine.lp"]


NAME_PREFIX = "native_"  # tgt_name of a native target: native_<microarchitecture>
FILE_PREFIX = "native-"  # its file: native-<microarchitecture>-<hash of its text>.lp


def target_name(host: Host) -> str:
    return NAME_PREFIX + re.sub(r"[^a-z0-9_]", "_", host.microarch.lower())


def how_to_name(name: str) -> str:
    """How a user names target `name` on the command line: --target NAME, or for a native
    target (its name is not a --target name) native, or its file."""
    if name.startswith(NAME_PREFIX):
        where = user_cache_dir() / "native"
        return f"--target native on a machine like the one it was made on, or --target with its file ({where})"
    return f"--target {name}"


def target_text(host: Host) -> str:
    """The fact file of the native target for `host`."""
    isa = host.isa
    machine = TARGETS / isa / "machine.lp"
    facts = ground_facts(machine)
    # tgt_native_fraction/2: level -> D, the level gets 1/D of the host's cache
    fractions = {str(lv): d.number for lv, d in facts.get(("tgt_native_fraction", 2), [])}
    # the model's cache levels in index order are the host's L1, L2, ...: each the host has is replaced
    model_caches = [r for r in _levels(facts) if r[5] == "cache"]
    replaced = {r[0]: (r, c) for rank, r in enumerate(model_caches, 1) if (c := host.data_cache(rank)) is not None}

    def drop(name: str, arg: str) -> bool:
        return name in REPLACED or name in BUILD or (name in CACHE_FACTS and arg in replaced)

    lines = [
        "% The native target of a host, written by morello-asp (morello_asp/native.py) from what",
        "% it detected. An ordinary target: copy it, edit it and pass the copy with --target PATH.",
        f"% Microarchitecture {host.microarch} (archspec; vendor {host.vendor}, family {host.family}).",
        f"% Instruction set {isa}: {host.isa_reason}.",
        f"% {host.cores} core{'s' if host.cores != 1 else ''} this process may use.",
        "% Caches (sysfs):" if host.caches else "% Caches: sysfs describes none; the model machine's are kept.",
        *(f"%   {c.text()}" for c in host.caches),
        "",
        f"tgt_name({target_name(host)}).",
        f"tgt_threads({host.cores}).",
    ]
    l1 = host.data_cache(1)
    line = l1.line if l1 is not None else 64
    lines.append(f"tgt_line_bytes({line}).")
    for rank, (name, (row, cache)) in enumerate(replaced.items(), 1):
        _, index, _, unit, weight, kind = row
        frac = fractions.get(name, 1)
        share = "" if frac == 1 else f", 1/{frac} of it (tgt_native_fraction/2)"
        lines += [
            "",
            f"% Cache level {rank}: the host's L{cache.level} {cache.type.lower()} cache, "
            f"{cache.size // cache.line} lines of {cache.line} bytes{share}.",
            f"tgt_level({name}, {index}, {cache.size // cache.line // frac}, {unit}, {weight}, {kind}).",
            f"tgt_cache_ways({name}, {cache.ways}). tgt_cache_sets({name}, {cache.sets}).",
        ]
    lines += ["", f"% The rest of {isa}/machine.lp, the model machine:"]
    lines += rules_except(machine, drop)
    lines += ["", f"% The instruction set: {isa}.lp's files but its model machine."]
    lines += [f'#include "{f}".' for f in isa_files(isa)]
    return "\n".join(lines) + "\n"


def write_target(host: Host, directory: Path | None = None, text: str | None = None) -> Path:
    """The native target's file for `host` (`text`: its text, when known), written into
    `directory` (the user's cache directory's native/ by default) unless it is there
    already."""
    text = text if text is not None else target_text(host)
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    path = (
        directory or user_cache_dir() / "native"
    ) / f"{FILE_PREFIX}{re.sub(r'[^A-Za-z0-9_.-]', '_', host.microarch)}-{digest}.lp"
    if _read(path) != text.strip():
        keep(path, text)
    if _read(path) != text.strip():
        raise TargetError(
            f"cannot write the native target's file {path}: set MORELLO_ASP_CACHE to a writable directory, "
            "or name a target with --target"
        )
    return path


@functools.cache
def host() -> Host:
    return detect()


@functools.cache
def entry() -> Path:
    """The native target's file for this host, written on first use in the process; a
    CPU no ISA file serves falls back to scalar C, said in one line on stderr."""
    h = host()
    if h.isa == SCALAR:
        print(
            f"morello-asp: native target: {h.isa_reason} ({h.microarch}, {h.family}); using scalar C",
            file=sys.stderr,
        )
    # the text, remembered by the host and the files it is made from (clingo reads the ISA's machine)
    key = stamp((Path(__file__),), read_logic([TARGETS / f"{h.isa}.lp"]), repr(h), clingo.__version__)
    text = pickled("native", f"text-{key[:32]}", lambda: target_text(h), lambda v: isinstance(v, str))
    return write_target(h, text=text)


def describe(h: Host, path: Path | None) -> list[str]:
    """What `morello-asp targets` says of the native target."""
    out = [
        f"microarchitecture {h.microarch} (archspec; vendor {h.vendor}, family {h.family})",
        f"instruction set {h.isa}: {h.isa_reason}",
        f"{h.cores} core{'s' if h.cores != 1 else ''} this process may use",
        *(c.text() for c in h.caches),
    ]
    if path is not None:
        out.append(f"file {path}")
    return out
