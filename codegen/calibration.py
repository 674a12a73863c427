"""A calibrated copy of a target (avx2, avx512, ...), the cost model as a linear function
of its numbers, and the sampled programs calibration fits them on.

Which files the copy keeps, and how, is read from the base target's entry file and the
files it includes (`layout_of`), nothing per target here: a file without kernels or C
(the machine, the ISA) is copied rule by rule (read with clingo's parser); a kernel file
(`tgt_kernel/1`, `kernel_cost/3`) whose kernels have size terms (`kernel_units/3`, in a
`kernel_units.lp` beside one of the target's files: `avx2/kernel_units.lp`,
`avx512/kernel_units.lp`) is copied too, and a file of C that serves only those kernels
is #included; kernel files without size terms (mixed precision, softmax, convolutions),
and the C that serves their kernels, are left out. The copy keeps every rule
but the numbers calibration replaces: the level weights (`tgt_level/6`), the cost of
one loop iteration (`tgt_loop_overhead/1`), the cost of one copying move per
destination level (`tgt_move_overhead/2`) and the kernel costs (`kernel_cost/3`),
which become `Fixed + PerUnit * U`. One cost unit is 1 ps.

With the weights of RF and VRF held at 0, the cost of a serial program is linear in
theta = (per kernel: Fixed, PerUnit; per memory level: weight; per loop iteration; per
copying move into each level), so cost(program) = features(program) . theta, and theta
can be fitted to measured times.

Programs to fit on (`sample_program`, `distinct_programs`) are drawn from the search's
own alternatives: starting at the root, each open spec takes its optimal rewrite with
probability `p_opt`, else one of its `k` cheapest other feasible rewrites (from
`Search.explain`), and its sub-specs are sampled the same way; below `depth` every open
spec gets its optimal program. Programs are deduplicated by their C (comments and blank
space removed), so two programs that differ only in code-free cache moves count once.
`recost` gives a program's cost under another target.

`benchmarks/calibrate.py` measures and fits; `benchmarks/cost_rank.py` checks the fit.
"""

from __future__ import annotations

import datetime
import random
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from morello_asp.codegen.emit import emit_function, resolve
from morello_asp.cost import compute_cost
from morello_asp.cost_model import CostModel
from morello_asp.errors import TargetError
from morello_asp.ir import Alloc, Impl, KernelApp, Loop
from morello_asp.naming import snake
from morello_asp.rewrites import for_node, node_from_expansion
from morello_asp.solver.logic.files import own_rules, with_includes
from morello_asp.solver.search.engine import Engine
from morello_asp.spec import Spec
from morello_asp.target import ENCODINGS, Target

PS_PER_UNIT = 1  # one cost unit of the calibrated target, in picoseconds
TARGETS = ENCODINGS / "targets"
UNITS = "kernel_units.lp"  # the size terms of the kernels of the files beside it (kernel_units/3)
REPLACED = {"tgt_name", "tgt_level", "tgt_loop_overhead", "tgt_move_overhead", "kernel_cost", "tgt_carried_trip"}
# (tgt_carried_trip/2 is in the ISA's cost units, not fitted: a calibrated copy goes without it)
LOOP = "loop.iter"  # the feature and number of tgt_loop_overhead/1
MOVE = "move"  # "<LEVEL>.move": the feature and number of tgt_move_overhead(level, _)
# gcc flags of the calibrated target (added to the base target's): no auto-vectorization.
NO_VECTORIZE = ("-fno-tree-vectorize", "-fno-tree-slp-vectorize")


@dataclass
class Calibration:
    """The numbers a calibrated target replaces (cost units)."""

    weights: dict[str, int] = field(default_factory=dict)  # level name -> cost per line
    kernels: dict[str, tuple[int, int]] = field(default_factory=dict)  # kernel -> (Fixed, PerUnit)
    loop_per_iter: int = 0
    move_overhead: dict[str, int] = field(default_factory=dict)  # level name -> cost per copying move


def rel_name(path: Path) -> str:
    """How a target file is named in an #include and in comments: relative to
    encodings/targets, or its absolute path for a file elsewhere."""
    try:
        return str(path.resolve().relative_to(TARGETS.resolve()))
    except ValueError:
        return str(path.resolve())


@dataclass(frozen=True)
class Layout:
    """Which files of a base target a calibrated copy keeps, and how (`layout_of`)."""

    entry: Path
    copied: tuple[Path, ...]  # files without kernels or C (machine, ISA): rules but REPLACED
    kernel_files: tuple[Path, ...]  # kernel files with costs: rules but REPLACED and kernel_cost
    included: tuple[Path, ...]  # #included as they are: the size terms, then C (c_scalar.lp)
    kernels: tuple[str, ...]  # the kernels calibrated (snake case), sorted
    left_out: tuple[Path, ...]  # kernel files without size terms, and C serving their kernels
    flag_files: tuple[Path, ...]  # included files that give gcc flags (tgt_c_flag/1)


def layout_of(entry: Path) -> Layout:
    """The layout of a calibrated copy of the target whose entry file is `entry`, read
    from the files it includes (the module's docstring)."""
    entry = Path(entry)
    files = with_includes([entry])
    if not all(f.is_file() for f in files):
        missing = ", ".join(str(f) for f in files if not f.is_file())
        raise TargetError(f"target {entry}: cannot read {missing}")
    rules = {f: own_rules(f) for f in files}
    units_files: list[Path] = []
    for f in files:
        u = f.parent / UNITS
        if u.is_file() and u.resolve() not in {g.resolve() for g in (*files, *units_files)}:
            units_files.append(u)
    units: dict[str, Path] = {}  # kernel -> the file giving its size term
    for u in units_files:
        for r in own_rules(u):
            if r.head == "kernel_units" and len(r.args) == 3:
                units.setdefault(r.args[1], u)
    kernels: set[str] = set()
    kinds: dict[Path, str] = {}
    for f in files:
        declared = {r.args[0] for r in rules[f] if r.head == "tgt_kernel" and r.args}
        costs = any(r.head == "kernel_cost" for r in rules[f])
        if not declared and not costs:
            kinds[f] = "c" if any(r.head == "tgt_kernel_c" for r in rules[f]) else "copied"
            continue
        if declared and not declared & set(units):
            kinds[f] = "left out"
            continue
        if declared - set(units):
            raise TargetError(
                f"{rel_name(f)}: kernels {', '.join(sorted(declared - set(units)))} have no size term "
                f"(kernel_units/3 in a {UNITS} beside the target's files), the others do: "
                "calibration cannot fit them"
            )
        kernels |= declared
        kinds[f] = "kernels" if costs else "c"
    served = {f: {r.args[0] for r in rules[f] if r.head == "tgt_kernel_c" and r.args} for f in files}
    for f in files:  # C for kernels left out goes with them (avx2/kernels_mixed_c.lp, softmax's)
        if kinds[f] == "c" and served[f] - kernels:
            kinds[f] = "left out"
    without_c = kernels - {k for f in files if kinds[f] in ("c", "kernels") for k in served[f]}
    if without_c:
        raise TargetError(
            f"target {entry}: no C for the kernels {', '.join(sorted(without_c))} outside files that also "
            "serve kernels without size terms: calibration keeps only the C of the kernels it fits"
        )
    used_units = [u for u in units_files if u in {units[k] for k in kernels}]
    as_is = [f for f in files if kinds[f] == "c"]
    return Layout(
        entry=entry,
        copied=tuple(f for f in files if kinds[f] == "copied" and rules[f]),
        kernel_files=tuple(f for f in files if kinds[f] == "kernels"),
        included=tuple(used_units + as_is),
        kernels=tuple(sorted(kernels)),
        left_out=tuple(f for f in files if kinds[f] == "left out"),
        flag_files=tuple(f for f in as_is if any(r.head == "tgt_c_flag" for r in rules[f])),
    )


def kept_rules(path: Path, drop: frozenset[str] | set[str] = frozenset(REPLACED)) -> list[str]:
    """The rules of a target file itself other than those calibration replaces."""
    return [r.text for r in own_rules(path) if r.head not in drop]


def kernels_of(target: Target) -> list[str]:
    """Kernel names (snake case) the calibrated copy of `target` fits: those of its files
    with size terms (layout_of)."""
    return list(layout_of(target.files[0]).kernels)


def _names(files) -> str:
    """avx2/machine.lp and isa.lp: files in a list, a folder named once for a run of its files."""
    out, folder = [], None
    for f in files:
        rel = rel_name(f)
        here = str(Path(rel).parent)
        out.append(Path(rel).name if here == folder else rel)
        folder = here
    return out[0] if len(out) == 1 else ", ".join(out[:-1]) + " and " + out[-1]


def target_text(
    name: str,
    base: Target,
    cal: Calibration,
    header: str = "",
    include_dir: Path | None = None,
    c_flags: tuple[str, ...] = NO_VECTORIZE,
) -> str:
    """The fact file of a calibrated copy of `base` (its layout: layout_of). Includes are
    relative to encodings/targets unless `include_dir` (that folder, for files written
    elsewhere) is given. `c_flags` are gcc flags added to the base target's."""
    lay = layout_of(base.files[0])

    def inc(f: Path) -> str:
        rel = rel_name(f)
        return str(include_dir / rel) if include_dir and not Path(rel).is_absolute() else rel

    lines = [f"% {lv}" if lv else "%" for lv in header.splitlines()]
    lines += ["", f"tgt_name({name}).", ""]
    for lv in base.levels:
        w = cal.weights.get(lv.name, lv.weight)
        lines.append(f"tgt_level({lv.atom}, {lv.index}, {lv.capacity}, {lv.unit}, {w}, {lv.kind}).")
    lines += [
        "",
        "% Cost of one loop iteration (calibrated; loops through registers are unrolled, so free):",
        f"tgt_loop_overhead({cal.loop_per_iter}).",
    ]
    if cal.move_overhead:
        lines += ["", "% Cost of one move that copies, per destination level (calibrated):"]
        lines += [" ".join(f"tgt_move_overhead({lv.lower()}, {c})." for lv, c in sorted(cal.move_overhead.items()))]
    if lay.copied:
        lines += ["", f"% {_names(lay.copied)} without tgt_name, tgt_level, tgt_loop_overhead and tgt_move_overhead:"]
        lines += [r for f in lay.copied for r in kept_rules(f)]
    if lay.kernel_files:
        lines += ["", f"% {_names(lay.kernel_files)} without kernel_cost (applicability unchanged):"]
        lines += [r for f in lay.kernel_files for r in kept_rules(f)]
    lines += ["", "% Calibrated kernel costs: Fixed + PerUnit * kernel_units (1 ps units)."]
    lines += [f"tgt_kernel_calibration({k}, {f}, {p})." for k, (f, p) in sorted(cal.kernels.items())]
    if c_flags:
        whose = f"{_names(lay.flag_files)}'s" if lay.flag_files else f"{base.name}'s"
        lines += [
            "",
            f"% gcc flags added to {whose}: programs run as the kernels' templates say",
            "% (no auto-vectorized scalar loops), as the calibration measured them.",
            " ".join(f'tgt_c_flag("{f}").' for f in c_flags),
        ]
    lines += ["", *(f'#include "{inc(f)}".' for f in lay.included), ""]
    return "\n".join(lines)


def write_target(
    path: Path, name: str, base: Target, cal: Calibration, header: str = "", c_flags: tuple[str, ...] = NO_VECTORIZE
) -> Path:
    in_targets = path.resolve().parent == TARGETS.resolve()
    path.write_text(target_text(name, base, cal, header, None if in_targets else TARGETS, c_flags))
    return path


def default_header(method: str, base: str = "avx2") -> str:
    return (
        f"Target {base} calibrated on this machine by benchmarks/calibrate.py, {datetime.date.today()}.\n"
        f"One cost unit = {PS_PER_UNIT} ps. {method}"
    )


# ------------------------------------------------------------------ linear cost terms
class CostTerms:
    """features(program): how much each calibrated number contributes to its cost.

    The loop feature counts loop iterations executed: each Loop node's trips times the
    number of times the node itself runs, for loops codegen emits as loops (not those it
    unrolls through registers). A move feature per level counts copying moves executed.
    Kernel sizes (U) come from the logic files themselves: a probe target whose every
    kernel costs exactly its units (Fixed 0, PerUnit 1) is asked for each kernel spec.
    """

    def __init__(
        self,
        base: Target,
        levels=None,
        workdir: Path | None = None,
        c_flags: tuple[str, ...] = NO_VECTORIZE,
        move_levels=None,
    ):
        """`levels`: those whose line weight is fitted (default: the caches and memory);
        `move_levels`: those whose per-copy overhead is fitted (default: all)."""
        import tempfile

        if levels is None:
            levels = [lv.name for lv in base.levels if not lv.is_register]
        if move_levels is None:
            move_levels = list(base.level_names)
        self.base = base
        self.kernels = kernels_of(base)
        self.levels = list(levels)
        self.names = (
            [f"{k}.fixed" for k in self.kernels]
            + [f"{k}.per_unit" for k in self.kernels]
            + [f"{lv}.line" for lv in self.levels]
            + [LOOP]
            + [f"{lv}.{MOVE}" for lv in move_levels]
        )
        self.move_levels = list(move_levels)
        self._registers = base.register_levels
        # A directory of our own is removed when this object goes (it held 12 KB per
        # calibration, left in /tmp for ever before).
        self._tmp = None
        if not workdir:
            self._tmp = tempfile.TemporaryDirectory(prefix="morello-cal-")
            workdir = Path(self._tmp.name)
        d = Path(workdir)
        d.mkdir(parents=True, exist_ok=True)
        probe = write_target(
            d / f"{base.name}_units.lp",
            f"{base.name}_units",
            base,
            Calibration(kernels={k: (0, 1) for k in self.kernels}),
            c_flags=c_flags,
        )
        self.probe_path = probe  # a target with the calibrated target's C (flags): compile with it
        self.units_engine = Engine(str(probe))
        self._one_level = {
            lv: self._weights_target({o.name: int(o.name == lv) for o in base.levels}) for lv in self.levels
        }
        self._units: dict = {}

    def _weights_target(self, weights: dict[str, int]) -> Target:
        return replace(self.base, levels=tuple(replace(lv, weight=weights.get(lv.name, 0)) for lv in self.base.levels))

    def _kernel_units(self, kernels: list[KernelApp]) -> None:
        todo = [n.spec for n in kernels if (n.spec, n.kernel) not in self._units]
        for spec, exps in zip(todo, self.units_engine.expand_many(todo)):
            for e in exps:
                if e.kernel_cost is not None:  # a kernel (select) rewrite
                    self._units[(spec, e.action.args[0])] = e.kernel_cost

    def features(self, impl: Impl) -> list[float]:
        """Coefficient of each calibrated number (self.names) in the cost of `impl`."""
        self._kernel_units([n for n in impl.walk() if isinstance(n, KernelApp)])
        f = dict.fromkeys(self.names, 0)

        def walk(node: Impl, mult: int):
            if isinstance(node, Loop):
                if node.parallel:
                    raise ValueError("CostTerms covers serial programs (parallel loops add a fixed overhead)")
                if not node.unrolled(self._registers):
                    f[LOOP] += mult * node.trips
                walk(node.body, mult * node.trips)
                for b in node.boundaries:
                    walk(b, mult)
                return
            if isinstance(node, KernelApp):
                k = snake(node.kernel)
                f[f"{k}.fixed"] += mult
                f[f"{k}.per_unit"] += mult * self._units[(node.spec, node.kernel)]
            elif isinstance(node, Alloc):
                shape = node.spec.operand_shapes[node.operand]
                for lv, tgt in self._one_level.items():
                    f[f"{lv}.line"] += mult * (
                        CostModel.of(tgt).move(node.spec.operands[node.operand], shape)
                        + CostModel.of(tgt).move(node.new, shape)
                    )
                if (node.load is not None or node.store is not None) and node.new.level in self.move_levels:
                    f[f"{node.new.level}.{MOVE}"] += mult
            for c in node.children:
                walk(c, mult)

        walk(impl, 1)
        return [f[n] for n in self.names]

    def split(self, theta) -> Calibration:
        """theta (in cost units, aligned with self.names) -> the target's numbers."""
        t = dict(zip(self.names, (int(round(x)) for x in theta)))
        return Calibration(
            {lv: t[f"{lv}.line"] for lv in self.levels},
            {k: (t[f"{k}.fixed"], t[f"{k}.per_unit"]) for k in self.kernels},
            t[LOOP],
            {lv: t[f"{lv}.{MOVE}"] for lv in self.move_levels},
        )

    def theta(self, cal: Calibration) -> list[int]:
        """The inverse of split: cal's numbers aligned with self.names."""
        t = {LOOP: cal.loop_per_iter}
        t.update({f"{lv}.{MOVE}": cal.move_overhead.get(lv, 0) for lv in self.move_levels})
        t.update({f"{lv}.line": w for lv, w in cal.weights.items()})
        for k, (fixed, per_unit) in cal.kernels.items():
            t[f"{k}.fixed"], t[f"{k}.per_unit"] = fixed, per_unit
        # A kernel added to the target after `cal` was fitted (VectorCopy) has no numbers
        # there, and the calibrated target's programs never use it: 0.
        return [t.get(n, 0) for n in self.names]


def read_calibration(target: Target) -> Calibration:
    """The calibrated numbers of a loaded calibrated target (its first file's facts)."""
    kernels = {}
    for line in Path(target.files[0]).read_text().splitlines():
        if line.startswith("tgt_kernel_calibration("):
            k, f, p = line[len("tgt_kernel_calibration(") : -2].split(", ")
            kernels[k] = (int(f), int(p))
    return Calibration(
        {lv.name: lv.weight for lv in target.levels}, kernels, target.loop_per_iter, dict(target.move_overhead)
    )


def rewritten(path: Path, base: Target) -> str:
    """The text calibration writes for the calibrated target at `path` (a copy of `base`)
    from that file's own header, name, numbers and C flags, with `base`'s files as they
    are now: the file itself, unless `base`'s files changed after it was written
    (`calibrate.py --rewrite` writes this; no programs are timed)."""
    path = Path(path)
    text = path.read_text()
    header = []
    for line in text.splitlines():
        if not line.startswith("%"):
            break
        header.append(line[2:] if line.startswith("% ") else line[1:])
    flags = tuple(r.args[0][1:-1] for r in own_rules(path) if r.head == "tgt_c_flag" and r.args)
    in_targets = path.resolve().parent == TARGETS.resolve()
    tgt = Engine(str(path)).target
    return target_text(tgt.name, base, read_calibration(tgt), "\n".join(header), None if in_targets else TARGETS, flags)


# ------------------------------------------------------------------ sampled programs
_COMMENT = re.compile(r"/\*.*?\*/", re.S)


def sample_program(search, spec: Spec, rng: random.Random, k: int, p_opt: float, depth: int) -> Impl:
    """One program of `spec`: a random walk over the k cheapest rewrites per spec."""
    if depth <= 0:
        return search.build(spec)
    options = [e for e, d in search.explain(spec) if d is not None][: k + 1]
    if not options:
        return search.build(spec)  # raises NoImplementationError with the reason
    e = options[0] if len(options) == 1 or rng.random() < p_opt else rng.choice(options[1:])
    kids = [sample_program(search, c, rng, k, p_opt, depth - 1) for c in e.children]
    return node_from_expansion(spec, e, kids)


def code_key(impl: Impl) -> str:
    """The program's C without comments and blank space: equal keys, equal machine code."""

    body, _ = emit_function(impl, "f", resolve(impl))
    return re.sub(r"\s+", "", _COMMENT.sub("", body))


def distinct_programs(
    search,
    spec: Spec,
    count: int,
    k: int = 3,
    p_opt: float = 0.6,
    depth: int = 12,
    seed: int = 0,
    attempts: int | None = None,
    progress=None,
    accept=None,
) -> list[Impl]:
    """Up to `count` programs of `spec` with different C; the optimal program first.
    With `accept`, a drawn program it refuses is left out (and not counted)."""
    rng = random.Random(seed)
    best = search.build(spec)
    seen = {code_key(best)}
    out = [best]
    for i in range(attempts or 40 * count):
        if len(out) >= count:
            break
        imp = sample_program(search, spec, rng, k, p_opt, depth)
        key = code_key(imp)
        if key not in seen and (accept is None or accept(imp)):
            seen.add(key)
            out.append(imp)
        if progress:
            progress(len(out), i + 1)
    return out


def recost(impl: Impl, engine) -> int:
    """Cost of `impl` under `engine`'s target: kernel costs re-derived by its rules,
    moves and loops by its level weights (the program's structure is unchanged)."""
    kernels = [n for n in impl.walk() if isinstance(n, KernelApp)]
    costs = {}
    for n, exps in zip(kernels, engine.expand_many([n.spec for n in kernels])):
        for e in exps:
            if e.action == for_node(n).action_of(n):
                costs[id(n)] = e.kernel_cost
                break
        else:
            raise ValueError(f"target {engine.target.name} has no kernel {n.kernel} for {n.spec}")

    def rebuild(node: Impl) -> Impl:
        if isinstance(node, KernelApp):
            return KernelApp(node.spec, node.kernel, costs[id(node)])
        kids = node.children
        return node.with_children([rebuild(c) for c in kids]) if kids else node

    return compute_cost(rebuild(impl), engine.target).main
