"""Shared pytest options.

`--update-golden`: test_golden.py rewrites tests/golden/ from the current outputs
instead of comparing (review the diff before committing it).

The user's default memo table is off for the whole run (MORELLO_ASP_DB=off, inherited
by the CLI subprocesses too): a test searches from scratch unless it names a table, and
nothing is written to the home directory. tests/test_default_table.py turns it on in a
temporary directory.
"""

from __future__ import annotations

import os

import pytest

os.environ["MORELLO_ASP_DB"] = "off"


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
