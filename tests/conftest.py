"""Shared pytest options.

`--update-golden`: test_golden.py rewrites tests/golden/ from the current outputs
instead of comparing (review the diff before committing it).

The user's default memo table is off for the whole run (MORELLO_ASP_DB=off, inherited
by the CLI subprocesses too): a test searches from scratch unless it names a table, and
nothing is written to the home directory. tests/test_default_table.py turns it on in a
temporary directory. The default target is avx2 (MORELLO_ASP_TARGET), whatever the CPU.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

os.environ["MORELLO_ASP_DB"] = "off"
# The default target is the host's (native), which varies with the CPU; the suite runs on
# avx2 wherever it runs (the goldens are avx2's), and tests/test_native.py tests native.
os.environ["MORELLO_ASP_TARGET"] = "avx2"


def pytest_addoption(parser):
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite the files of tests/golden/ instead of comparing against them",
    )


@pytest.fixture
def update_golden(request) -> bool:
    return request.config.getoption("--update-golden")


@pytest.fixture
def benchmark_script():
    """A script of benchmarks/ loaded as a module, for tests that run its functions at
    small sizes: benchmark_script("matvec")."""

    def load(name: str):
        path = Path(__file__).resolve().parent.parent / "benchmarks" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(f"{name}_bench", path)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod  # a dataclass in the script looks its module up there
        spec.loader.exec_module(mod)
        return mod

    return load
