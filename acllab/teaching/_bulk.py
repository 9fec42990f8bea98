"""Runs of acllab's own programs (the seed's scenarios, the pipeline explorer's loops) with
Python's cyclic garbage collector paused.

Such a run keeps every task it makes alive until it ends (they are its trace), so each of
the collector's full passes walks tens of thousands of live records and frees nothing: in
``acllab seed`` those passes were a third of the wall time. Only acllab's code runs inside
(no learner code), the state the collector was in is restored afterwards (also after an
exception), and whatever short-lived cycles the run left are collected by the collector's
next ordinary pass. Nothing the run computes depends on it: traces and figures are the same
with the collector on or off (tests/test_bulk_gc.py).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused"]


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while the block (or the function decorated with
    ``@collector_paused()``) runs."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
