"""Stopping a search at a safe point on SIGINT (Ctrl-C) or SIGTERM.

Inside `handling()`, both signals only set a flag: the search checks it (`check()`)
between specs and between batches, so it never stops in the middle of a memo-table
update, and what it decided so far can be committed. While the main thread is only
waiting (for clingo workers, in `threading` waits) there is nothing to protect, so the
signal raises `Interrupted` there at once; a second signal also raises at once.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager

from morello_asp.errors import Interrupted

SIGNALS = (signal.SIGINT, signal.SIGTERM)
_pending: int | None = None
_depth = 0
_WAIT_FILE = threading.__file__


def pending() -> int | None:
    """The signal received since the outermost `handling()` began, if any."""
    return _pending


def check() -> None:
    """Raise `Interrupted` if a signal came; call at safe points."""
    if _pending is not None:
        raise Interrupted(_pending)


def _handler(signum, frame):
    global _pending
    again = _pending is not None
    _pending = signum
    if again or (frame is not None and frame.f_code.co_filename == _WAIT_FILE and frame.f_code.co_name == "wait"):
        raise Interrupted(signum)


_DEFAULTS = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}


def _replaceable(s, h) -> bool:
    """The default handler, or one that raises Interrupted at once (the CLI's for SIGTERM)."""
    return h is _DEFAULTS[s] or getattr(h, "raises_interrupted", False)


@contextmanager
def handling():
    """Turn SIGINT and SIGTERM into a flag for the duration (re-entrant). A signal whose
    handler the program has set itself is left alone, and so is everything outside the
    main thread, where signals cannot be handled."""
    global _depth, _pending
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {}
    if _depth == 0:
        _pending = None
        for s in SIGNALS:
            h = signal.getsignal(s)
            if _replaceable(s, h):
                saved[s] = h
                signal.signal(s, _handler)
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0:
            for s, h in saved.items():
                signal.signal(s, h if h is not None else signal.SIG_DFL)
