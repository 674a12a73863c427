"""Ctrl-C and SIGTERM while the `morello-asp` command starts up or shuts down.

Python turns SIGINT into a KeyboardInterrupt wherever the interpreter is, and before the
command's error boundary (`morello_asp.cli.main`) runs, that is an import: a traceback of
the import machinery (numpy, clingo and the package take a tenth of a second to load).
So the package, imported by the command, first sets `stop` for both signals (before it
imports anything else); `main` hands the signals to its own handling while the command
runs (`hand_over`) and back to `stop` when it ends (`take_back`). At those times nothing
is open (no table, no worker), so `stop` ends the process at once: one line, exit 130.
A program that imports morello_asp is left alone: only the command's process (its
script, or `python -m morello_asp.cli`) gets `stop`."""

from __future__ import annotations

import _signal as signal  # the C module: `signal`'s import builds enums, time a Ctrl-C could land in
import os
import sys

SIGNALS = (signal.SIGINT, signal.SIGTERM)
EXIT_INTERRUPTED = 130  # the CLI's documented status (morello_asp/cli/main.py)


def stop(signum, frame) -> None:
    """Say so in one line and exit 130, at once (nothing to save yet, or any more)."""
    try:
        os.write(2, b"morello-asp: interrupted\n")
    finally:
        os._exit(EXIT_INTERRUPTED)


def is_the_command() -> bool:
    """Whether this process is the `morello-asp` command: its script, or
    `python -m morello_asp.cli` (whose argv[0] is "-m" while the package loads)."""
    argv0 = os.path.basename(sys.argv[0]) if sys.argv else ""
    if argv0 in ("morello-asp", "morello-asp.exe"):
        return True
    orig = list(getattr(sys, "orig_argv", ()))
    return any(a == "-m" and b == "morello_asp.cli" for a, b in zip(orig, orig[1:]))


def install() -> None:
    """`stop` for SIGINT and SIGTERM, where they have their default handlers (one a
    parent set to ignore, as a shell does for a background job, stays ignored)."""
    for s in SIGNALS:
        try:
            if signal.getsignal(s) in (signal.default_int_handler, signal.SIG_DFL):
                signal.signal(s, stop)
        except ValueError:  # not the main thread
            return


def hand_over(sigterm_handler) -> list:
    """While the command runs: SIGINT raises KeyboardInterrupt again and SIGTERM runs
    `sigterm_handler`, where `stop` had them. Returns what to give back (`take_back`)."""
    handed = []
    for s, h in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, sigterm_handler)):
        try:
            if signal.getsignal(s) is stop:
                signal.signal(s, h)
                handed.append(s)
        except ValueError:
            pass
    return handed


def take_back(handed: list) -> None:
    """`stop` again for the signals `hand_over` took: the command is done."""
    for s in handed:
        try:
            signal.signal(s, stop)
        except ValueError:
            pass


if is_the_command():
    install()
