"""One error class per failure kind, so callers and the CLI can say what went wrong."""


class MorelloError(Exception):
    """Base of every error morello-asp raises on purpose."""


class SpecSyntaxError(MorelloError):
    """Spec text that does not parse; the message names the position and what was expected."""


class SpecError(MorelloError):
    """A spec that parses but is not well formed (wrong arity, bad vector size, ...)."""


class ScheduleError(MorelloError):
    """A rewrite that does not apply to the spec it was asked of."""


class TargetError(MorelloError):
    """A target fact file that is missing or malformed."""


class RuleError(MorelloError):
    """A logic file with a syntax or grounding error, or one that reports error/1 atoms."""


class NoImplementationError(MorelloError):
    """No implementation of a spec under the rules and memory limits in force; the message
    says which: no rewrite applies to a spec below it, or every one exceeds its limits."""


class LegalityError(MorelloError):
    """A program or layout that a z3 legality proof refutes."""


class RefutedError(MorelloError):
    """A check that ran and failed: a proof refuted, a result that differs from numpy
    (the CLI exits 1 for these, 2 for bad input)."""


class CodegenError(MorelloError):
    """A program that cannot be lowered to C (open specs, a kernel without C, a bad template)."""


class CompileError(CodegenError):
    """gcc rejected the generated C; the message carries the compiler's output."""


class InputError(MorelloError):
    """Bad user input outside the spec language: a missing or unreadable file, an option
    or environment variable out of range. The message names the input."""


class InputTypeError(InputError, TypeError):
    """An argument of the wrong type (`synthesize(spec, db=42)`); the message names the
    argument and what it accepts."""


class SpecTypeError(InputTypeError):
    """A value of the wrong type where spec text (or a spec) was expected."""


class MemoError(MorelloError):
    """A memo table file that is not ours (another SQLite file, garbage, truncated, a
    directory) or cannot be read or written; the file is refused untouched."""


class Interrupted(KeyboardInterrupt):
    """A search stopped by SIGINT (Ctrl-C) or SIGTERM at a safe point: what it decided
    so far is kept. A KeyboardInterrupt, so code that handles Ctrl-C handles this too."""

    def __init__(self, signum: int = 2):
        super().__init__(signum)
        self.signum = signum
