"""Shared pytest options.

`--update-golden`: test_golden.py rewrites tests/golden/ from the current outputs
instead of comparing (review the diff before committing it).
"""

from __future__ import annotations

import pytest


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
