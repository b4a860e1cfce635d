"""Pausing Python's cyclic garbage collector around the batch stages (load, render, write,
and reading a rendered directory back; `orksync apply DIR` runs paused throughout).

Those stages build hundreds of thousands of containers (10,000 custom resources: millions)
and free almost none of them in cycles: freed objects go by reference counting. The cyclic
collector does not know that; its full collections walk the whole heap again and again as
it grows, so without the pause the stages' cost grows faster than their input, spent on
collections that find nothing.

The pause is safe only for code that makes little cyclic garbage, which the stages' tests
check (`tests/foundations/test_gcpause.py` counts what a collection finds after each
stage). Reentrant and thread-safe: the collector is off while at least one pause is
active, and is switched back on by the last one to end, and only if it was on when the
first one began.
"""

from __future__ import annotations

import functools
import gc
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

_lock = threading.Lock()
_active = 0
_was_enabled = False

P = ParamSpec("P")
R = TypeVar("R")


@contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic collector off for the duration (reference counting still frees)."""
    global _active, _was_enabled
    with _lock:
        if _active == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0 and _was_enabled:
                gc.enable()


def gc_paused(fn: Callable[P, R]) -> Callable[P, R]:
    """`fn` runs inside `paused_gc()`."""
    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with paused_gc():
            return fn(*args, **kwargs)
    return wrapper
