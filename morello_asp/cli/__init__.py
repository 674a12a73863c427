"""The `morello-asp` command: `main` (morello_asp/cli/main.py) dispatches to the
subcommands each module here registers; `run_script` gives a benchmark script the same
one-line errors and exit statuses. (Ctrl-C while the command starts is handled before
this package loads: morello_asp/cli_signals.py, the package's first import.)"""

from morello_asp.cli.main import main, run_script

__all__ = ["main", "run_script"]
