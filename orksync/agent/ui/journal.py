"""What the agent remembers for its web view: the last syncs (history) and the drift it
repaired, each a bounded list, and a change counter that the view's live updates wait on.
In memory only: a restarted agent starts with empty lists."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from orksync.model import Change, ObjRef

__all__ = ["Journal", "Repair", "SyncRecord"]

KEEP_SYNCS = 20
KEEP_REPAIRS = 50


@dataclass(frozen=True, slots=True)
class SyncRecord:
    root: str
    at: datetime
    kind: str  # "full" or "scoped"
    revision: str
    ok: bool
    counts: Mapping[str, int] = field(default_factory=dict)  # by action, those not zero
    message: str = ""  # why it failed


@dataclass(frozen=True, slots=True)
class Repair:
    root: str
    at: datetime
    ref: ObjRef
    action: str
    message: str


class Journal:
    """Thread-safe; the agent's jobs and drift repair write, the web view reads."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._syncs: deque[SyncRecord] = deque(maxlen=KEEP_SYNCS)
        self._repairs: deque[Repair] = deque(maxlen=KEEP_REPAIRS)
        self._version = 0

    def synced(self, root: str, *, kind: str, revision: str, ok: bool,
               counts: Mapping[str, int] | None = None, message: str = "") -> None:
        record = SyncRecord(root, datetime.now(UTC), kind, revision, ok,
                            {k: v for k, v in (counts or {}).items() if v}, message)
        with self._lock:
            self._syncs.appendleft(record)
        self.touch()

    def repaired(self, root: str, change: Change) -> None:
        """A change drift repair made (a write; an unchanged object is no repair)."""
        if change.action.value in ("unchanged", "skipped"):
            return
        with self._lock:
            self._repairs.appendleft(Repair(root, datetime.now(UTC), change.ref,
                                            change.action.value, change.detail))
        self.touch()

    def touch(self) -> None:
        """Something the view shows may have changed (a watch event, a sync)."""
        with self._lock:
            self._version += 1
            self._lock.notify_all()

    def syncs(self, root: str) -> list[SyncRecord]:
        with self._lock:
            return [s for s in self._syncs if s.root == root]

    def repairs(self, root: str) -> list[Repair]:
        with self._lock:
            return [r for r in self._repairs if r.root == root]

    @property
    def version(self) -> int:
        with self._lock:
            return self._version

    def wait(self, seen: int, timeout: float) -> int:
        """The version once it is past `seen`, or after `timeout` seconds."""
        with self._lock:
            self._lock.wait_for(lambda: self._version != seen, timeout=timeout)
            return self._version
