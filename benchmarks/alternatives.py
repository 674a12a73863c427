"""Many different complete programs of one spec, drawn from the search's own
alternatives, and their cost under any target: now `morello_asp.codegen.calibration`
(tests use it too); re-exported here for the calibration scripts in this folder."""

from morello_asp.codegen.calibration import code_key, distinct_programs, recost, sample_program  # noqa: F401
