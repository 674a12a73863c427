"""Coordinates for the compressed memo table (paper 4.1; design map "Search and memo table").

`to_coords(spec)` maps a spec to (key, point); `from_coords(key, point)` inverts it.

* key (a string): everything that must match exactly -- kind, rank, serial, operand
  dtypes and layouts, and the level names in force. When some dimension is not a power of
  two the shape goes into the key too (the "exact-key store": no dimension axes).
* point (a tuple of ints), in this order:
    - log2 of each dimension (power-of-two shapes only),
    - per operand (OPERAND_AXES): level index, vector size (0 = none), contiguity
      (-1 = unset), aligned 0/1, stride exponent (-1 = none: contiguous or unknown),
    - each memory limit, in units, as is.
  Limits are kept as raw integers rather than log2(limit): a decision holds on the
  integer interval [peak, limit], and integers make that box exact, with no conservative
  rounding between powers of two. The limit axes are the last `len(spec.limits)` entries.
"""

from __future__ import annotations

import json

from morello_asp.dtypes import Dtype
from morello_asp.layout import Layout
from morello_asp.spec import Spec, TensorSpec
from morello_asp.target import Target, as_target

# The point's axes for each operand, in order.
OPERAND_AXES = ("lv", "v", "c", "al", "st")
NOPAX = len(OPERAND_AXES)


def _pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def to_coords(spec: Spec, levels: tuple[str, ...]) -> tuple[str, tuple[int, ...]]:
    # The key and the non-limit part of the point depend on the spec class only; the
    # search asks for them millions of times, so they are kept on the class object.
    cls = spec.without_limits
    cached = cls.__dict__.get("_coords")
    if cached is None or cached[0] != (levels, len(spec.limits)):
        key, point = _class_coords(cls, levels, len(spec.limits))
        cached = ((levels, len(spec.limits)), key, point)
        object.__setattr__(cls, "_coords", cached)
    return cached[1], cached[2] + tuple(spec.limits)


def _class_coords(spec: Spec, levels, nlimits: int) -> tuple[str, tuple[int, ...]]:
    pow2 = all(_pow2(d) for d in spec.shape)
    key = {
        "kind": spec.kind,
        "rank": len(spec.shape),
        "serial": spec.serial,
        "ops": [[o.dtype.name, str(o.layout)] for o in spec.operands],
        "levels": list(levels),
        "nlimits": nlimits,
    }
    if not pow2:
        key["shape"] = list(spec.shape)
    point: list[int] = []
    if pow2:
        point += [d.bit_length() - 1 for d in spec.shape]
    for o in spec.operands:
        point += [
            list(levels).index(o.level),
            o.vector_size or 0,
            -1 if o.contig is None else o.contig,
            int(o.aligned),
            -1 if o.stride is None else o.stride,
        ]
    return json.dumps(key, sort_keys=True, separators=(",", ":")), tuple(point)


def from_coords(key: str, point: tuple[int, ...], target: Target | None = None) -> Spec:
    """The spec at `point` (for `target`, whose level names the key records; default:
    the default target)."""
    target = as_target(target)
    k = json.loads(key)
    rest = list(point)
    if "shape" in k:
        shape = tuple(k["shape"])
    else:
        shape = tuple(1 << e for e in rest[: k["rank"]])
        rest = rest[k["rank"] :]
    kind_shapes = Spec(k["kind"], shape, (), target=target).operand_shapes
    ops = []
    for i, (dt, lay) in enumerate(k["ops"]):
        lv, v, c, a, st = rest[NOPAX * i : NOPAX * i + NOPAX]
        ops.append(
            TensorSpec(
                Dtype[dt],
                k["levels"][lv],
                Layout.parse(lay, len(kind_shapes[i]), validate=False),
                bool(a),
                None if c == -1 else c,
                v or None,
                None if st == -1 else st,
            )
        )
    rest = rest[NOPAX * len(k["ops"]) :]
    assert len(rest) == k["nlimits"]
    return Spec(k["kind"], shape, tuple(ops), k["serial"], tuple(rest), target)


def limit_axes(point_len: int, nlimits: int) -> range:
    return range(point_len - nlimits, point_len)
