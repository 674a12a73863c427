"""A calibrated copy of a target and the cost model as a linear function of its numbers:
now `morello_asp.codegen.calibration` (tests use it too); re-exported here for the
calibration scripts in this folder."""

from morello_asp.codegen.calibration import (  # noqa: F401
    LOOP,
    MOVE,
    NO_VECTORIZE,
    PS_PER_UNIT,
    REPLACED,
    TARGETS,
    Calibration,
    CostTerms,
    default_header,
    kept_rules,
    kernels_of,
    layout_of,
    read_calibration,
    rel_name,
    rewritten,
    target_text,
    write_target,
)
