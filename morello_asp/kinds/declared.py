"""Spec kinds, read from their logic declarations (encodings/kinds/*.lp and a user's rule
files; the predicates are documented in encodings/kinds/declare.lp).

The declaration is the only source of truth: operand shapes and tiles' halos, reductions,
accumulating pairs, the numpy semantics (codegen/reference.py evaluates `Kind.values`),
FLOPs, C parameter names and spec text sugar all derive from it. Python never parses the
files: clingo grounds them and we read the atoms, as for targets.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import clingo

from morello_asp.encodings import DIR as ENCODINGS_DIR
from morello_asp.errors import RuleError
from morello_asp.naming import camel
from morello_asp.user_cache import pickled, stamp

if TYPE_CHECKING:
    from morello_asp.kinds.compose import ComposeInfo

# Expressions of the per-point semantics: ("op", operand index) | ("const", int | "neg_inf"
# | "pos_inf") | (operator, *arguments) | ("red", combiner, spec dimension, expression):
# the combiner over every index of that dimension (the others fixed), e.g. a softmax's
# row maximum. A merge (kind_merge/3) also has ("old", output index), the output's
# contents before the run, and ("new", output index), its value over the run's points.
Expr = tuple
OPERATORS = {"add": 2, "sub": 2, "mul": 2, "div": 2, "max": 2, "min": 2, "neg": 1, "exp": 1}
CONSTANTS = ("neg_inf", "pos_inf")
# The operators' numpy functions, by name (the reference semantics and the fills' check
# use them; numpy is imported when one is called, not when the kinds are read).
NUMPY_OPS = {
    "add": "add",
    "sub": "subtract",
    "mul": "multiply",
    "div": "divide",
    "max": "maximum",
    "min": "minimum",
    "neg": "negative",
    "exp": "exp",
}


def numpy_op(name: str):
    """Operator `name` as its numpy function."""
    import numpy as np

    return getattr(np, NUMPY_OPS[name])


# A combiner and the value it starts from (what the accumulating variant's init kind must write).
COMBINERS: dict[str, int | str] = {"add": 0, "mul": 1, "max": "neg_inf", "min": "pos_inf"}


@dataclass(frozen=True)
class Access:
    """One logical dimension of an operand: the sum of spec dimensions `dims`, each
    times its coefficient in `coefs` (all 1 when not given), plus `offset` indexes it,
    so its extent is sum(coef * (size - 1)) + 1 + offset. A convolution with stride 2
    reads image row 2*h + fh: dims (h, fh), coefs (2, 1)."""

    dims: tuple[int, ...]
    offset: int = 0
    coefs: tuple[int, ...] = ()

    def __post_init__(self):
        if not self.coefs:  # the same Access whether or not the ones are spelled out
            object.__setattr__(self, "coefs", (1,) * len(self.dims))
        elif len(self.coefs) != len(self.dims):
            raise ValueError(f"Access: {len(self.coefs)} coefficients for {len(self.dims)} dimensions")

    def extent(self, shape) -> int:
        return sum(c * (shape[d] - 1) for d, c in zip(self.dims, self.coefs)) + 1 + self.offset

    @property
    def terms(self) -> tuple[tuple[int, int], ...]:
        """(spec dimension, coefficient) of each term of the sum."""
        return tuple(zip(self.dims, self.coefs))

    def coef(self, d: int) -> int:
        """The coefficient of spec dimension d in this index (0: d does not move it)."""
        return sum(c for e, c in self.terms if e == d)

    @property
    def unit(self) -> bool:
        """A dimension of size one indexed by 0 (a reduction's output keeps the rank of
        its input, as Morello's Max and SoftmaxDenominator do)."""
        return not self.dims and not self.offset

    @property
    def single(self) -> int | None:
        """The spec dimension this dimension is, if it is exactly one (coefficient 1, no offset)."""
        return self.dims[0] if len(self.dims) == 1 and self.coefs == (1,) and not self.offset else None

    def text(self, names) -> str:
        """The index as text over dimension names: `2*h + fh`, `m`, `0`."""
        t = " + ".join(names[d] if c == 1 else f"{c}*{names[d]}" for d, c in self.terms)
        t += f" + {self.offset}" if self.offset and t else str(self.offset) if self.offset else ""
        return t or "0"


@dataclass(frozen=True)
class Kind:
    name: str  # CamelCase, as in spec text
    atom: str  # snake_case, as in the logic files
    dims: tuple[str, ...] | None  # dimension names; None: any rank (pointwise)
    params: tuple[str, ...]  # operand names
    outputs: tuple[int, ...]
    accesses: tuple[tuple[Access, ...], ...] | None  # per operand; None: pointwise
    values: tuple[Expr, ...]  # per output (in `outputs` order)
    combiners: tuple[str | None, ...]  # per output
    accum_of: str | None = None  # accumulating variant of this kind
    init_kind: str | None = None  # the kind that initialises an accumulating kind's outputs
    defaults: tuple[tuple[int, int], ...] = ()  # (dimension, size) spec text may leave out
    source: str = ""
    # any-rank kinds: per operand, the spec dimensions along which it has size one (kind_unit/3)
    units: tuple[tuple[int, ...], ...] = ()
    # a Compose (morello_asp/compose.py): its components and how they are wired; None otherwise
    components: ComposeInfo | None = None
    compose_scans: tuple[int, ...] = ()  # a Compose's dimensions that no tile may cut
    merges: tuple[Expr | None, ...] = ()  # per output: its kind_merge/3 (accumulating kinds), or None
    fills: tuple[tuple[int, str], ...] = ()  # accumulating kinds: (output, init kind) per filled output
    numpy: str | None = None  # kind_numpy/2: what a user would call in numpy instead (a baseline)
    numpy_axis: int | None = None  # kind_numpy_axis/2: the {axis} of that expression
    _by_rank: dict = field(default_factory=dict, compare=False, hash=False, repr=False)  # access() memo
    _shapes: dict = field(default_factory=dict, compare=False, hash=False, repr=False)  # operand_shapes() memo

    @property
    def rank(self) -> int | None:
        return None if self.dims is None else len(self.dims)

    @property
    def is_accum(self) -> bool:
        return self.accum_of is not None

    @property
    def output(self) -> int:
        """The first (usually only) output."""
        return self.outputs[0]

    def dim_names(self, rank: int) -> list[str]:
        return list(self.dims) if self.dims is not None else [f"d{i}" for i in range(rank)]

    def arity(self, rank: int = 0) -> int:
        return len(self.params)

    @property
    def is_compose(self) -> bool:
        return self.components is not None

    @property
    def min_rank(self) -> int:
        """Fewest dimensions a spec of this kind may have (an any-rank kind that names
        dimension D in kind_unit/3 or red(...) needs D + 1)."""
        if self.dims is not None:
            return len(self.dims)
        named = [d for u in self.units for d in u] + [d for v in self.values for d in expr_red_dims(v)]
        return max(named, default=-1) + 1

    def access(self, rank: int) -> tuple[tuple[Access, ...], ...]:
        if self.accesses is not None:
            return self.accesses
        a = self._by_rank.get(rank)
        if a is None:
            units = self.units or tuple(() for _ in self.params)
            a = self._by_rank[rank] = tuple(
                tuple(Access(()) if d in u else Access((d,)) for d in range(rank)) for u in units
            )
        return a

    def reduction_of(self, out: int, rank: int) -> tuple[int, ...]:
        """Spec dimensions output `out` does not span: its values combine over them."""
        seen = {d for a in self.access(rank)[out] for d in a.dims}
        return tuple(d for d in range(rank) if d not in seen)

    def scans(self, rank: int) -> tuple[int, ...]:
        """Spec dimensions an output's value reads along whole (red(...) in kind_value/3:
        a softmax's row): no tile may cut them, though outputs span them."""
        if self.components is not None:
            return self.compose_scans
        # A merged output's partial results combine exactly, so a loop may cut what it reduces.
        merged = {d for o in self.outputs if self.merge(o) is not None for d in self.reduction_of(o, rank)}
        return tuple(sorted({d for v in self.values for d in expr_red_dims(v)} - merged))

    @property
    def filled(self) -> tuple[int, ...]:
        """The outputs an accumulating kind reads back (each filled by to_accum first)."""
        return tuple(o for o, _ in self.fills)

    def merge(self, out: int) -> Expr | None:
        """Output `out`'s kind_merge/3, which only an accumulating variant applies."""
        return self.merges[self.outputs.index(out)] if self.merges and self.is_accum else None

    @property
    def merged(self) -> bool:
        """Some output merges jointly with others (an accumulating kind with kind_merge/3)."""
        return any(self.merge(o) is not None for o in self.outputs)

    def deps(self, rank: int) -> tuple[tuple[int, ...], ...]:
        """Per operand, the spec dimensions it depends on (in order)."""
        return tuple(tuple(sorted({d for a in acc for d in a.dims})) for acc in self.access(rank))

    def operand_shapes(self, shape) -> tuple[tuple[int, ...], ...]:
        # Asked for again and again by the search for the same few thousand shapes.
        out = self._shapes.get(shape)
        if out is None:
            out = self._shapes[shape] = tuple(tuple(a.extent(shape) for a in acc) for acc in self.access(len(shape)))
        return out

    def reduction(self, rank: int) -> tuple[int, ...]:
        """Spec dimensions absent from some output (its values combine over them, so
        only an accumulating variant may split them)."""
        return tuple(sorted({d for o in self.outputs for d in self.reduction_of(o, rank)}))

    def value(self, out: int) -> Expr:
        return self.values[self.outputs.index(out)]

    @property
    def is_copy(self) -> bool:
        """Every output is one input's value, point by point (Move, a cast): data movement
        that a schedule places around the work rather than work itself."""
        return all(
            self.value(o)[0] == "op" and self.value(o)[1] not in self.outputs and not self.combiner(o)
            for o in self.outputs
        )

    def combiner(self, out: int) -> str | None:
        return self.combiners[self.outputs.index(out)]

    def user_files(self) -> tuple[str, ...]:
        """The declaring file, for a kind not built in (engines that schedule the kind load it);
        a Compose's are its components'."""
        if self.components is not None:
            return tuple(dict.fromkeys(f for p in self.components.parts for f in p.kind.user_files()))
        return () if Path(self.source) in builtin_files() else (self.source,)

    def describe(self) -> str:
        """One line: `Matmul[b m k n](lhs[b, m, k], rhs[b, k, n] -> out[b, m, n] = add of lhs * rhs)`."""
        dims = self.dims if self.dims is not None else ("d0", "d1", "...")

        def acc_text(i):
            if self.accesses is None:
                units = self.units[i] if self.units else ()
                ds = [dims[d] if d not in units else "0" for d in range(len(dims) - 1)] + [dims[-1]]
                if units and max(units) >= len(dims) - 1:
                    ds = [("0" if d in units else f"d{d}") for d in range(max(units) + 1)] + ["..."]
                return f"{self.params[i]}[{', '.join(ds)}]"
            return f"{self.params[i]}[{', '.join(a.text(dims) for a in self.accesses[i])}]"

        ins = ", ".join(acc_text(i) for i in range(len(self.params)) if i not in self.outputs)
        if self.components is not None:
            chain = " . ".join(c.kind.name for c in self.components.parts)
            return f"{self.name}[{' '.join(dims)}]({ins} -> {acc_text(self.output)} = {chain})"
        outs = []
        rank = len(dims) if self.dims is not None else self.min_rank
        for o, e, c in zip(self.outputs, self.values, self.combiners):
            red = self.reduction_of(o, rank)
            # a family's placeholder names ("d0 d1 ...") stop at d1: d2 on is d2, not "..."
            names = [dims[d] if self.dims is not None and d < len(dims) else f"d{d}" for d in red]
            how = f"{c} over {', '.join(names)} of " if c and red else f"{c} " if c else ""
            acc = f"{acc_text(o)} {'<-' if self.is_accum and c else '='} "
            m = self.merge(o)
            merged = f" (merged: {expr_text(m, self.params, self.dims)})" if m is not None else ""
            outs.append(acc + how + expr_text(e, self.params, self.dims) + merged)
        head = f"{self.name}[{' '.join(dims)}]"
        several = len(self.fills) > 1
        inits = ", ".join(camel(i) + (f" ({self.params[o]})" if several else "") for o, i in self.fills)
        extra = f"; accumulates {self.accum_of}, initialised by {inits}" if self.is_accum else ""
        extra += "".join(f"; {dims[d]} defaults to {n}" for d, n in self.defaults)
        return f"{head}({ins}{' -> ' if ins else ''}{'; '.join(outs)}){extra}"


def expr_text(e: Expr, params, dims=None) -> str:
    if e[0] == "op":
        return params[e[1]]
    if e[0] in ("old", "new"):
        return f"{e[0]}({params[e[1]]})"
    if e[0] == "const":
        return str(e[1])
    if e[0] == "red":
        d = e[2]
        name = dims[d] if dims is not None and d < len(dims) else f"d{d}"
        return f"{e[1]} over {name} of {expr_text(e[3], params, dims)}"
    sym = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
    if e[0] in sym:
        return f"({expr_text(e[1], params, dims)} {sym[e[0]]} {expr_text(e[2], params, dims)})"
    return f"{e[0]}({', '.join(expr_text(a, params, dims) for a in e[1:])})"


def expr_args(e: Expr) -> tuple:
    """The sub-expressions of `e`."""
    if e[0] in ("op", "const", "old", "new"):
        return ()
    return (e[3],) if e[0] == "red" else tuple(e[1:])


def expr_ops(e: Expr) -> int:
    """Arithmetic operators in `e` (for FLOP counts)."""
    return 0 if e[0] in ("op", "const", "old", "new") else 1 + sum(expr_ops(a) for a in expr_args(e))


def eval_merge(e: Expr, old, new, const):
    """A merge (kind_merge/3) with numpy's operators: old[o] and new[o] are output o's
    contents and part, const(c) the value of a constant."""
    if e[0] == "old":
        return old[e[1]]
    if e[0] == "new":
        return new[e[1]]
    if e[0] == "const":
        return const(e[1])
    return numpy_op(e[0])(*(eval_merge(a, old, new, const) for a in expr_args(e)))


def expr_operands(e: Expr) -> set[int]:
    if e[0] == "op":
        return {e[1]}
    return set().union(*(expr_operands(a) for a in expr_args(e)))


def expr_red_dims(e: Expr) -> set[int]:
    """Spec dimensions some red(...) of `e` combines over."""
    own = {e[2]} if e[0] == "red" else set()
    return own.union(*(expr_red_dims(a) for a in expr_args(e)))


# ------------------------------------------------------------------------- loading
KINDS_DIR = ENCODINGS_DIR / "kinds"
DECLARE = KINDS_DIR / "declare.lp"


def builtin_files() -> tuple[Path, ...]:
    """The kind files every program loads: declare.lp first, then encodings/kinds/*.lp."""
    return (DECLARE, *sorted(p for p in KINDS_DIR.glob("*.lp") if p != DECLARE))


_SIGS = (
    ("kind", 1),
    ("kind_dim", 3),
    ("kind_any_rank", 1),
    ("kind_operand", 3),
    ("kind_output", 2),
    ("kind_access", 3),
    ("kind_value", 3),
    ("kind_combine", 3),
    ("kind_accum", 3),
    ("kind_default_dim", 3),
    ("kind_unit", 3),
    ("kind_merge", 3),
    ("kind_accum_fill", 3),
    ("kind_batch", 2),
    ("kind_numpy", 2),
    ("kind_numpy_axis", 2),
)


def _ground(files: Iterable[Path]) -> dict[str, list[clingo.Symbol]]:
    messages: list[str] = []
    ctl = clingo.Control(["--warn=none"], logger=lambda c, m: messages.append(m))
    try:
        for f in files:
            ctl.load(str(f))
        ctl.ground([("base", [])])
    except RuntimeError:
        raise RuleError("clingo cannot load the kind declarations:\n" + "\n".join(messages)) from None
    out: dict[str, list[clingo.Symbol]] = {n: [] for n, _ in _SIGS}
    for name, arity in _SIGS:
        out[name] = [a.symbol for a in ctl.symbolic_atoms.by_signature(name, arity)]
    return out


class KindError(RuleError):
    pass


def _build(atoms, source_of) -> dict[str, Kind]:
    """Kinds from grounded atoms; refuses malformed declarations naming file and kind."""

    by_kind: dict[tuple[str, str], list] = {}  # (predicate, kind) -> argument lists, indexed once
    for name, syms in atoms.items():
        for sym in syms:
            args = sym.arguments
            by_kind.setdefault((name, str(args[0])), []).append(args)

    def args_of(name, k):
        return list(by_kind.get((name, k), ()))

    kinds: dict[str, Kind] = {}
    names = sorted({str(s.arguments[0]) for s in atoms["kind"]})
    for sig, _ in _SIGS[1:]:
        for s in atoms[sig]:
            k = str(s.arguments[0])
            if k not in names and sig != "kind_accum":
                raise KindError(f"{source_of(k)}: {sig}({k}, ...) declares something about {k}, which is not a kind/1")
    accum = {str(a[0]): (str(a[1]), str(a[2])) for s in atoms["kind_accum"] for a in [s.arguments]}
    for k in names:
        kinds[k] = _kind(k, args_of, accum, source_of)
    for ka, (base, init) in accum.items():
        where = f"{source_of(ka)}: kind {ka}"
        if base not in kinds:
            raise KindError(f"{where}: kind_accum/3 accumulates {base!r}, which is not a kind")
        if init not in kinds:
            raise KindError(f"{where}: kind_accum/3 initialises with {init!r}, which is not a kind")
        _check_fills(kinds[ka], kinds, where)
    for a in atoms["kind_batch"]:
        k, name = str(a.arguments[0]), str(a.arguments[1])
        _check_batch(kinds[k], name, f"{source_of(k)}: kind {k}")
    axes = {str(a.arguments[0]): a.arguments[1] for a in atoms["kind_numpy_axis"]}
    for a in atoms["kind_numpy"]:
        k, text = str(a.arguments[0]), a.arguments[1]
        where = f"{source_of(k)}: kind {k}"
        if text.type != clingo.SymbolType.String:
            raise KindError(f"{where}: kind_numpy/2 takes a string, not {text}")
        ax = axes.get(k)
        if ax is not None and ax.type != clingo.SymbolType.Number:
            raise KindError(f"{where}: kind_numpy_axis/2 takes a dimension number, not {ax}")
        named = {m for m in _PLACEHOLDER.findall(text.string)} - {"axis"}
        ins = {kinds[k].params[i] for i in range(len(kinds[k].params)) if i not in kinds[k].outputs}
        if not named <= ins:
            raise KindError(f"{where}: kind_numpy/2 names {sorted(named - ins)}; its inputs are {sorted(ins)}")
        kinds[k] = replace(kinds[k], numpy=text.string, numpy_axis=None if ax is None else ax.number)
    return kinds


_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _check_batch(k: Kind, name: str, where: str) -> None:
    """A batch dimension (kind_batch/2) indexes every operand by itself: the search loops
    over it before anything else (rules/batch_first.lp), which is only free if no value
    is reused across it."""
    if k.dims is None or name not in k.dims:
        raise KindError(f"{where}: kind_batch/2 names {name}, which is not a dimension of the kind")
    d = k.dims.index(name)
    for op, acc in zip(k.params, k.accesses or ()):
        if not any(a.single == d for a in acc):
            raise KindError(
                f"{where}: kind_batch/2 names {name}, but operand {op} is not indexed by it alone "
                "(a batch dimension indexes every operand)"
            )


def _check_fills(ka: Kind, kinds: dict[str, Kind], where: str) -> None:
    """Every output an accumulating kind combines or merges has one fill, a one-operand
    any-rank kind writing the combiner's identity (for a merge: a value the merge leaves
    every part unchanged from, checked on sample values)."""
    filled = dict(ka.fills)
    for o in ka.outputs:
        if (ka.combiner(o) or ka.merge(o) is not None) and o not in filled:
            raise KindError(f"{where}: output {ka.params[o]} accumulates but has no fill (kind_accum_fill/3)")
    for o, init in ka.fills:
        if o not in ka.outputs or not (ka.combiner(o) or ka.merge(o) is not None):
            raise KindError(f"{where}: kind_accum_fill/3 fills {ka.params[o]}, which neither combines nor merges")
        ik = kinds.get(init)
        if ik is None:
            raise KindError(f"{where}: {ka.params[o]} is filled by {init!r}, which is not a kind")
        if ik.dims is not None or len(ik.params) != 1 or ik.values[0][0] != "const":
            raise KindError(
                f"{where}: its init kind {init} must be kind_any_rank/1 with one operand and a constant value"
            )
        if ka.merge(o) is None:
            want = COMBINERS[ka.combiner(o) or ""]
            if ik.values[0] != ("const", want):
                raise KindError(
                    f"{where}: init kind {init} writes {expr_text(ik.values[0], ik.params)}, but combiner "
                    f"{ka.combiner(o)} starts from {want}"
                )
    merged = {o: m for o in ka.outputs if (m := ka.merge(o)) is not None}
    import numpy as np

    def const(c):
        return {"neg_inf": -np.inf, "pos_inf": np.inf}.get(c, c)

    old = {o: const(kinds[i].values[0][1]) for o, i in ka.fills}
    for sample in ((0.5, 1.25), (-3.0, 2.0), (7.0, 0.125)):
        new = {o: sample[j % len(sample)] for j, o in enumerate(ka.outputs)}
        for o, m in merged.items():
            with np.errstate(all="ignore"):
                got = float(eval_merge(m, old, new, const))
            if not np.isclose(got, new[o], rtol=1e-9, atol=1e-12):
                raise KindError(
                    f"{where}: the fills are not the identity of {ka.params[o]}'s merge "
                    f"(merging {new} into the fills gives {got} for {ka.params[o]})"
                )


def _kind(k, args_of, accum, source_of) -> Kind:
    """One kind from its declaration atoms (args_of(predicate, kind) -> argument lists)."""
    where = f"{source_of(k)}: kind {k}"

    def bad(msg, where=where) -> NoReturn:
        raise KindError(f"{where}: {msg}")

    dims_at = {a[1].number: str(a[2]) for a in args_of("kind_dim", k) if a[1].type == clingo.SymbolType.Number}
    if len(dims_at) != len(args_of("kind_dim", k)):
        bad("kind_dim/3 needs a dimension number and one name per number")
    any_rank = bool(args_of("kind_any_rank", k))
    if any_rank and dims_at:
        bad("declares both kind_dim/3 and kind_any_rank/1")
    if not any_rank and not dims_at:
        bad("declares no dimensions (kind_dim/3) and is not kind_any_rank/1")
    if dims_at and sorted(dims_at) != list(range(len(dims_at))):
        bad(f"dimensions must be numbered 0..{len(dims_at) - 1}, got {sorted(dims_at)}")
    dims = tuple(dims_at[i] for i in range(len(dims_at))) if not any_rank else None
    if dims is not None and len(set(dims)) != len(dims):
        bad(f"two dimensions share a name: {', '.join(dims)}")
    ops_at: dict[int, str] = {}
    for a in args_of("kind_operand", k):
        if a[1].type != clingo.SymbolType.Number or a[1].number in ops_at:
            bad("kind_operand/3 needs one name per operand number")
        ops_at[a[1].number] = str(a[2])
    if not ops_at or sorted(ops_at) != list(range(len(ops_at))):
        bad(f"operands must be numbered 0..n-1 (kind_operand/3), got {sorted(ops_at)}")
    params = tuple(ops_at[i] for i in range(len(ops_at)))
    if len(set(params)) != len(params):
        bad(f"two operands share a name: {', '.join(params)}")
    for p in params:
        if p in OPERATORS or p in CONSTANTS or p in (dims or ()):
            bad(f"operand name {p!r} is also an operator, constant or dimension name")
    index = {p: i for i, p in enumerate(params)}

    def operand(sym, what):
        n = str(sym)
        if n not in index:
            bad(f"{what} names operand {n!r}; the operands are {', '.join(params)}")
        return index[n]

    outputs = tuple(sorted({operand(a[1], "kind_output/2") for a in args_of("kind_output", k)}))
    if not outputs:
        bad("has no output (kind_output/2)")
    accesses = None
    if dims is not None:
        acc: dict[int, tuple[Access, ...]] = {}
        for a in args_of("kind_access", k):
            i = operand(a[1], "kind_access/3")
            if i in acc:
                bad(f"operand {params[i]} has two kind_access/3 declarations")
            acc[i] = _access(a[2], dims, params[i], bad)
        missing = [params[i] for i in range(len(params)) if i not in acc]
        if missing:
            bad(f"operand {missing[0]} has no kind_access/3")
        accesses = tuple(acc[i] for i in range(len(params)))
        for o in outputs:
            if any(x.single is None and not x.unit for x in accesses[o]):
                bad(
                    f"output {params[o]} must index each dimension by one spec dimension or 0 "
                    "(no sums, coefficients or offsets)"
                )
            named = [x.dims[0] for x in accesses[o] if not x.unit]
            if len(set(named)) != len(named):
                bad(f"output {params[o]} repeats a dimension")
        if len({len(accesses[o]) for o in outputs}) > 1:
            bad(
                f"outputs {', '.join(params[o] for o in outputs)} have different ranks; outputs have one rank "
                "(an output that reduces a dimension keeps it with size one: 0 in kind_access/3)"
            )
    elif args_of("kind_access", k):
        bad("a kind_any_rank/1 kind takes no kind_access/3 (every operand spans every dimension)")
    units_at: dict[int, set[int]] = {}
    for a in args_of("kind_unit", k):
        if dims is not None:
            bad("kind_unit/3 is for kind_any_rank/1 kinds (a fixed-rank kind writes 0 in kind_access/3)")
        i = operand(a[1], "kind_unit/3")
        if a[2].type != clingo.SymbolType.Number or a[2].number < 0:
            bad(f"kind_unit/3 gives operand {params[i]} the dimension {a[2]}; dimensions are numbers from 0")
        units_at.setdefault(i, set()).add(a[2].number)
    units = tuple(tuple(sorted(units_at.get(i, ()))) for i in range(len(params))) if units_at else ()
    values_at: dict[int, Expr] = {}
    for a in args_of("kind_value", k):
        o = operand(a[1], "kind_value/3")
        if o not in outputs:
            bad(f"kind_value/3 gives a value to {params[o]}, which is not an output")
        if o in values_at:
            bad(f"output {params[o]} has two kind_value/3 declarations")
        values_at[o] = _expr(a[2], index, bad, dims)
        used = expr_operands(values_at[o]) & set(outputs)
        if used:
            bad(f"the value of {params[o]} reads output {params[min(used)]}; values read inputs only")
    for o in outputs:
        if o not in values_at:
            bad(f"output {params[o]} has no kind_value/3")
    comb_at: dict[int, str] = {}
    for a in args_of("kind_combine", k):
        o = operand(a[1], "kind_combine/3")
        c = str(a[2])
        if c not in COMBINERS:
            bad(f"unknown combiner {c!r} (one of {', '.join(COMBINERS)})")
        comb_at[o] = c
    probe = Kind(camel(k), k, dims, params, outputs, accesses, tuple(values_at[o] for o in outputs), (), units=units)
    rank_probe = len(dims) if dims is not None else max(1, probe.min_rank)
    for o in outputs:
        if probe.reduction_of(o, rank_probe) and o not in comb_at:
            bad(f"has reduction dimensions but output {params[o]} has no kind_combine/3")
    if k in accum and not comb_at:
        bad(f"accumulates but no output has a kind_combine/3 (output {params[outputs[0]]})")
    merge_at: dict[int, Expr] = {}
    for a in args_of("kind_merge", k):
        o = operand(a[1], "kind_merge/3")
        if o not in outputs or o in merge_at:
            bad(f"kind_merge/3 merges {params[o]}, which is not an output or has two merges")
        merge_at[o] = _expr(a[2], index, bad, dims, outputs=set(outputs))
        if expr_operands(merge_at[o]) or expr_red_dims(merge_at[o]):
            bad(f"the merge of {params[o]} reads operands or reduces: it combines old(...) and new(...) of outputs")
    fills = []
    for a in args_of("kind_accum_fill", k):
        o = operand(a[1], "kind_accum_fill/3")
        fills.append((o, str(a[2])))
    if len({o for o, _ in fills}) != len(fills):
        bad("an output has two fills (kind_accum_fill/3)")
    defaults = []
    for a in args_of("kind_default_dim", k):
        n = str(a[1])
        if dims is None or n not in dims:
            bad(f"kind_default_dim/3 names dimension {n!r}, which {k} does not have")
        if a[2].type != clingo.SymbolType.Number or a[2].number < 1:
            bad(f"kind_default_dim/3 gives {n} the size {a[2]}; sizes are positive integers")
        defaults.append((list(dims or ()).index(n), a[2].number))
    base, init = accum.get(k, (None, None))
    return Kind(
        camel(k),
        k,
        dims,
        params,
        outputs,
        accesses,
        tuple(values_at[o] for o in outputs),
        tuple(comb_at.get(o) for o in outputs),
        camel(base) if base else None,
        camel(init) if init else None,
        tuple(sorted(defaults)),
        source_of(k),
        units,
        merges=tuple(merge_at.get(o) for o in outputs) if merge_at else (),
        fills=tuple(sorted(fills)),
    )


def _access(sym, dims, op, bad: Callable[[str], NoReturn]) -> tuple[Access, ...]:
    items = sym.arguments if sym.type == clingo.SymbolType.Function and sym.name == "" else [sym]
    out = []
    for it in items:
        if it.type == clingo.SymbolType.Number and it.number == 0:
            out.append(Access(()))  # a dimension of size one, indexed by 0
            continue
        terms = it.arguments if it.type == clingo.SymbolType.Function and it.name == "sum" else [it]
        ds: list[int] = []
        cs: list[int] = []
        off = 0
        for t in terms:
            coef = 1
            if t.type == clingo.SymbolType.Function and t.name == "scale":
                a = t.arguments
                if len(a) != 2 or a[0].type != clingo.SymbolType.Number or a[0].number < 1:
                    bad(f"operand {op}: {t} in {it} must be scale(A, D), A an integer >= 1 and D a spec dimension")
                coef, t = a[0].number, a[1]
            if t.type == clingo.SymbolType.Number and coef == 1:
                if t.number < 0:
                    bad(f"operand {op}: offset {t.number} in {it} must be at least 0")
                off += t.number
            elif t.type == clingo.SymbolType.Function and not t.arguments and t.name in dims:
                d = dims.index(t.name)
                if d in ds:
                    bad(f"operand {op}'s dimension {it} names {t.name} twice")
                ds.append(d)
                cs.append(coef)
            else:
                bad(f"operand {op}'s dimension {it} names {t}, which is not a spec dimension ({', '.join(dims)})")
        if not ds:
            bad(f"operand {op}'s dimension {it} names no spec dimension (write 0 for a dimension of size one)")
        out.append(Access(tuple(ds), off, tuple(cs)))
    return tuple(out)


def _expr(sym, index, bad: Callable[[str], NoReturn], dims=None, outputs=None) -> Expr:
    if outputs is not None and sym.type == clingo.SymbolType.Function and sym.name in ("old", "new"):
        arg = sym.arguments[0] if len(sym.arguments) == 1 else None
        if arg is None or str(arg) not in index or index[str(arg)] not in outputs:
            bad(f"{sym} must name one output ({', '.join(n for n, i in index.items() if i in outputs)})")
        return (sym.name, index[str(arg)])
    if sym.type == clingo.SymbolType.Number:
        return ("const", sym.number)
    if sym.type == clingo.SymbolType.Function and sym.name == "red":
        if len(sym.arguments) != 3:
            bad(f"red takes a combiner, a dimension and an expression: red(max, n, x), got {sym}")
        c, d, e = sym.arguments
        if str(c) not in COMBINERS:
            bad(f"unknown combiner {c} in {sym} (one of {', '.join(COMBINERS)})")
        if d.type == clingo.SymbolType.Number and dims is None and d.number >= 0:
            dim = d.number
        elif dims is not None and str(d) in dims:
            dim = dims.index(str(d))
        else:
            what = ", ".join(dims) if dims is not None else "a number from 0, for a kind_any_rank/1 kind"
            bad(f"{sym} combines over {d}, which is not a spec dimension ({what})")
        return ("red", str(c), dim, _expr(e, index, bad, dims, outputs))
    if sym.type == clingo.SymbolType.Function:
        if not sym.arguments:
            if sym.name in index:
                return ("op", index[sym.name])
            if sym.name in CONSTANTS:
                return ("const", sym.name)
            bad(f"the semantics name {sym.name!r}, which is not an operand ({', '.join(index)}) or a constant")
        n = OPERATORS.get(sym.name)
        if n is None:
            bad(f"unknown operator {sym.name!r} in {sym} (operators: {', '.join(OPERATORS)})")
        if len(sym.arguments) != n:
            bad(f"operator {sym.name} takes {n} argument(s), got {len(sym.arguments)} in {sym}")
        return (sym.name, *(_expr(a, index, bad, dims, outputs) for a in sym.arguments))
    bad(f"cannot read {sym} as an expression")


# --------------------------------------------------------------------- the registry
_LOCK = threading.Lock()
_KINDS: dict[str, Kind] = {}
_LOADED: set[str] = set()


@functools.cache
def _builtin() -> dict[str, Kind]:
    """The built-in kinds, from the user's cache when the kind files, this module and
    clingo are the ones they were built from (grounding and reading the declarations
    through clingo's API was a sixth of a warm `query`)."""
    files = builtin_files()
    here = Path(__file__)
    contents = [(f.resolve(), f.read_bytes()) for f in files]  # paths too: Kind.source names them
    return pickled(
        "kinds",
        stamp((here, here.parents[1] / "naming.py"), contents, clingo.__version__),
        lambda: _build(_ground(files), lambda k: _source(k, files)),
        lambda v: isinstance(v, dict) and all(isinstance(k, Kind) for k in v.values()),
    )


@functools.cache
def _declared_in(f: Path) -> frozenset[str]:
    """The kinds file `f` declares by itself (with declare.lp's derivations)."""
    return frozenset(str(s.arguments[0]) for s in _ground((DECLARE, f))["kind"])


def _source(k: str, files) -> str:
    """The file that declares kind k, for messages."""
    for f in files:
        if f != DECLARE and k in _declared_in(Path(f)):
            return str(f)
    return str(files[-1]) if files else "?"


def _ensure() -> None:
    if not _KINDS:
        with _LOCK:
            if not _KINDS:
                _KINDS.update({k.name: k for k in _builtin().values()})


def loaded_files() -> tuple[str, ...]:
    """The users' logic files loaded so far (load/1), sorted: what else they declare
    (pipeline steps: morello_asp/rewrites/pipeline.py) is read from them too."""
    return tuple(sorted(_LOADED))


def load(files: Iterable[str | Path]) -> list[Kind]:
    """Add the kinds that the logic files `files` declare (a user's --rules files); the
    built-in ones are always there. Returns the new kinds. A file declaring a kind that
    exists with another declaration is refused."""
    _ensure()
    new: list[Kind] = []
    for f in files:
        p = str(Path(f).resolve())
        if p in _LOADED or Path(p) in builtin_files():
            continue
        files_ = (*builtin_files(), Path(p))
        atoms = _ground(files_)
        declared = _build(atoms, lambda k, p=p: p if k not in _builtin() else _source(k, builtin_files()))
        with _LOCK:
            for k in declared.values():
                old = _KINDS.get(k.name)
                if old is None:
                    _KINDS[k.name] = k
                    new.append(k)
                elif _same(old, k):
                    continue
                else:
                    raise KindError(f"{p}: kind {k.atom} is already declared differently in {old.source}")
            _LOADED.add(p)
    return new


def _same(a: Kind, b: Kind) -> bool:
    """The same declaration, wherever it was read from."""
    return a == replace(b, source=a.source)


def all_kinds() -> dict[str, Kind]:
    _ensure()
    return dict(_KINDS)


def declared_kind(name: str) -> Kind | None:
    """The kind a logic file declares under `name` (None: no file does; a Compose is
    built from its components by morello_asp.kinds.compose.kind)."""
    _ensure()
    return _KINDS.get(name)


def declared_names() -> list[str]:
    _ensure()
    return list(_KINDS)


def summary() -> str:
    """The kinds for a message: a family along dimensions 0..3 as one entry
    (`Softmax0..3`), then Compose."""
    import re

    groups: dict[str, list[str]] = {}
    for n in sorted(all_kinds()):
        m = re.fullmatch(r"(.*?)(\d+)", n)
        groups.setdefault(m.group(1) if m else n, []).append(n)
    parts = []
    for base, names in sorted(groups.items(), key=lambda g: (len(g[1]) > 1, g[0])):
        if len(names) == 1:
            parts.append(names[0])
        else:
            digits = sorted(int(x[len(base) :]) for x in names)
            parts.append(f"{base}{digits[0]}..{digits[-1]}")
    return ", ".join(parts) + ", Compose((...))"


def unknown_kind_hint(name: str) -> str:
    """What a user probably meant by a kind name that is not one: a family named without
    its dimension (`Softmax` for Softmax0..3) or with one it lacks, a family of
    fixed-rank kinds named with a number it lacks (`ConvS5`: ConvS2..ConvS4 are the
    strides declared), or a near spelling (`MatMul`). '' if nothing is near."""
    import difflib
    import re

    names = sorted(all_kinds())
    m = re.fullmatch(r"(.*?)(\d*)", name)
    base = m.group(1) if m else name
    family = sorted((n for n in names if re.fullmatch(re.escape(base) + r"\d+", n)), key=lambda n: int(n[len(base) :]))
    if family and any(all_kinds()[n].dims is not None for n in family):
        # a fixed-rank family's number is not a dimension (ConvS2..ConvS4: the stride)
        return f"{name} is not declared; its family declares {', '.join(family)}"
    if family:
        ex = family[min(1, len(family) - 1)]
        return (
            f"{base} works along one dimension, written after its name: {family[0]}..{family[-1]} "
            f"(e.g. {ex}(...) along dimension {ex[len(base) :]})"
        )
    near = difflib.get_close_matches(name, names, n=1, cutoff=0.75)
    if not near:
        lower = {n.lower(): n for n in names}
        near = [lower[name.lower()]] if name.lower() in lower else []
    return f"did you mean {near[0]}?" if near else ""


def accum_pairs() -> list[tuple[str, str]]:
    """(accumulating kind, its base kind) for every pair."""
    return [(k.name, k.accum_of) for k in all_kinds().values() if k.accum_of]
