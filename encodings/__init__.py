"""The logic files: rules, kind declarations and targets (encodings/README.md)."""

from pathlib import Path

DIR = Path(__file__).resolve().parent  # where synth.lp, rules/, kinds/ and targets/ are
