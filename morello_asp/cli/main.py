"""The `morello-asp` command. Each feature area registers its own subcommands from its
own module (listed in COMMAND_MODULES), so this file stays a dispatcher and the one
error boundary: every failure becomes one line on stderr and a documented exit status
(EPILOG)."""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import traceback

from morello_asp import cli_signals as signals
from morello_asp.errors import Interrupted, MorelloError, RefutedError

COMMAND_MODULES = [
    "morello_asp.cli.schedule",
    "morello_asp.cli.programs",
    "morello_asp.cli.synth",
    "morello_asp.cli.verify",
    "morello_asp.cli.db",
    "morello_asp.cli.kinds",
    "morello_asp.cli.precompute",
    "morello_asp.cli.onnx_model",
]

EPILOG = """\
exit status:
  0    success
  1    a check ran and failed: a proof refuted, a program that differs from numpy,
       a spec not in the memo table (query)
  2    bad input (a spec, file, option or environment variable: the message names
       it) and every other error morello-asp reports
  3    internal error: a bug in morello-asp (--debug shows the traceback; please report it)
  130  interrupted (Ctrl-C or SIGTERM); synth and explain keep what they decided in
       their table, precompute every finished task (continue with --resume)
  141  the output was closed early (e.g. piped into head)

environment:
  MORELLO_ASP_JOBS=N              clingo worker processes (default: one per core, up to 8)
  MORELLO_ASP_GROUND_TIMEOUT=S    time limit of one clingo call in CPU seconds (default 60,
                                  plus 0.1% per spec of a batch)
  MORELLO_ASP_WHY_NONE_SPECS=N    specs looked at to say why a spec has no implementation
                                  (default 2000)
  MORELLO_ASP_CACHE=DIR           compiled modules and default memo tables (default
                                  ~/.cache/morello-asp)
  MORELLO_ASP_DB=off              no default memo table: keep nothing without --db
  MORELLO_ASP_PREFETCH=off        no software prefetch in the emitted C (default on;
                                  unsplit: prefetch in one loop, to measure against)
"""

EXIT_OK, EXIT_REFUTED, EXIT_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_PIPE = 0, 1, 2, 3, 130, 141


class UsageError(Exception):
    """A command line argparse refuses (exit 2, one line)."""


class ArgParser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def build_parser() -> argparse.ArgumentParser:
    parser = ArgParser(
        prog="morello-asp",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Synthesizing compiler for tensor programs (rules and targets as logic programs).",
    )
    parser.add_argument("--debug", action="store_true", help="on an error, also print the Python traceback")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def one_line(text: str) -> str:
    """A message as one line: its lines joined with '; '."""
    return "; ".join(ln.strip() for ln in str(text).splitlines() if ln.strip())


def say(kind: str, text, prog: str = "morello-asp") -> None:
    print(f"{prog}: {kind}: {one_line(text)}", file=sys.stderr, flush=True)


def _raise_on_sigterm(signum, frame):
    raise Interrupted(signum)


_raise_on_sigterm.raises_interrupted = True  # type: ignore[attr-defined]  # a search may take it over (solver/logic/interrupt.py)


def _silence_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null so the flush at exit is quiet."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
        os.close(fd)
    except (OSError, ValueError):
        pass


def main(argv=None) -> int:
    restore = None
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:  # SIGTERM stops a command as Ctrl-C does
        try:
            signal.signal(signal.SIGTERM, _raise_on_sigterm)
            restore = signal.SIG_DFL
        except ValueError:  # not the main thread
            pass
    try:
        return _main(argv)
    finally:
        workers = sys.modules.get("morello_asp.solver.logic.clingo_run")
        if workers is not None:  # no clingo call outlives the command, even on an error
            workers.shutdown()
        if restore is not None:
            signal.signal(signal.SIGTERM, restore)


def _main(argv) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv  # accepted anywhere on the line
    argv = [a for a in argv if a != "--debug"]

    def run() -> int:
        # Until here (imports) and after this (exit), Ctrl-C ends the command process
        # at once in one line (morello_asp/cli_signals.py); inside, the command's own handling.
        handed = signals.hand_over(_raise_on_sigterm)
        try:
            parser = build_parser()
            try:
                args = parser.parse_args(argv)
            except SystemExit as e:  # --help
                sys.stdout.flush()
                return e.code if isinstance(e.code, int) else 0
            rc = args.func(args) or 0
            sys.stdout.flush()  # here, so that a closed pipe is seen here
            return rc
        finally:
            signals.take_back(handed)

    try:
        return _guarded(run, "morello-asp", debug)
    except Exception as e:  # a bug: one line, the traceback with --debug
        _trace(debug)
        say(
            "internal error",
            f"{type(e).__name__}: {e} (a bug in morello-asp; rerun with --debug for the traceback "
            "and please report it)",
        )
        return EXIT_INTERNAL


def _guarded(fn, prog: str, debug: bool) -> int:
    """Run fn; an error a user can cause becomes one line on stderr and its exit status."""
    try:
        return fn() or 0
    except UsageError as e:
        say("error", e, prog)
        return EXIT_INPUT
    except RefutedError as e:  # a check ran and failed: exit 1, as a refuted proof does
        _trace(debug)
        say("error", e, prog)
        return EXIT_REFUTED
    except MorelloError as e:
        _trace(debug)
        say("error", e, prog)
        return EXIT_INPUT
    except KeyboardInterrupt:
        _trace(debug)
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_PIPE


def run_script(fn, name: str) -> int:
    """The error boundary of the benchmark scripts, the CLI's: an error a user can cause
    (a memo table built by other rules, a bad spec) is one line and exit 2, Ctrl-C exit
    130; a bug keeps its traceback."""
    try:
        return _guarded(fn, name, debug=False)
    finally:
        workers = sys.modules.get("morello_asp.solver.logic.clingo_run")
        if workers is not None:
            workers.shutdown()


def _trace(debug: bool) -> None:
    if debug:
        traceback.print_exc()


if __name__ == "__main__":
    sys.exit(main())
