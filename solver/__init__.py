"""Search engine: clingo driver, dynamic programming, memo tables, z3 legality proofs."""
