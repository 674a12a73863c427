"""Memo tables: the interval-compressed table in memory, its SQLite store, and the integer
coordinates of specs."""
