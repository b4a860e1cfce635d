"""Results cached by the identity of an argument that cannot be hashed.

A render asks the same questions of the same Katalog entry for every custom resource
(which unknown fields an entry has, which cluster-scoped kinds it names): the entry is a
parsed mapping, not hashable, but it lives as long as its loaded repository. The cache
keeps the argument beside its result, so that its id cannot be reused by another object
while the result is cached, and is bounded (cleared when full: a long-running agent loads
the repository again after every commit).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

R = TypeVar("R")


class IdentityCache(Generic[R]):
    def __init__(self, maxsize: int = 4096) -> None:
        self.maxsize = maxsize
        self._items: dict[tuple[int, Hashable], tuple[Any, R]] = {}
        self._lock = threading.Lock()

    def get(self, obj: Any, extra: Hashable, compute: Callable[[], R]) -> R:
        """`compute()`, or what it returned before for this very `obj` and `extra`."""
        key = (id(obj), extra)
        found = self._items.get(key)
        if found is not None and found[0] is obj:
            return found[1]
        result = compute()
        with self._lock:
            if len(self._items) >= self.maxsize:
                self._items.clear()
            self._items[key] = (obj, result)
        return result
