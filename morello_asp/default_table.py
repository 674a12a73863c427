"""The `db=` default of the synthesis API: the user's default memo table
(morello_asp.solver.memo.sqlite.default_table), so work is kept unless the caller says `db=None`."""

from __future__ import annotations

from typing import Any


class _DefaultTable:
    def __repr__(self) -> str:
        return "DEFAULT_TABLE"


DEFAULT_TABLE: Any = _DefaultTable()
