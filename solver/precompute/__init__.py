"""Precompute: a memo table filled ahead of time by workers on local cores or a Ray cluster
(driver, executors, the worker side)."""
