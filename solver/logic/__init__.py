"""Reading and running logic files: clingo in this process or in workers with a time limit,
the files' snapshots and includes, and the checks of a user's rule files."""
