"""The search: the engine that asks the logic files for a spec's rewrites (clingo), the
facts it writes, and the dynamic programming over specs."""
