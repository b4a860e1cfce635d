"""Orkestra's `runtime.cleanup`: a custom resource whose cleanup conditions pass is
deleted, at once or `deleteAfter` after they first passed. Pure: the live custom resource
comes in, a verdict goes out (docs/katalog-semantics.md#runtimecleanup)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from orksync.durations import parse_duration
from orksync.katalog.model import CrdEntry
from orksync.render.conditions import evaluate_conditions

__all__ = ["MET_AT", "cleanup_block", "cleanup_due", "conditions_met", "fingerprint",
           "met_at"]

MET_AT = "cleanupConditionsMetAt"  # in status.orksync: when the conditions first passed


def cleanup_block(entry: CrdEntry) -> Mapping[str, Any] | None:
    """The entry's `runtime.cleanup` when it has conditions, else None."""
    runtime = entry.operator_box.get("runtime")
    block = runtime.get("cleanup") if isinstance(runtime, Mapping) else None
    if not isinstance(block, Mapping) or not (block.get("when") or block.get("or")):
        return None
    return block


def conditions_met(block: Mapping[str, Any], data: Mapping[str, Any], templates: Any) -> bool:
    """Whether the cleanup conditions pass on `data` (the custom resource with its live
    status). `templates`: the Katalog's Templates."""
    return evaluate_conditions(data, block.get("when"), block.get("or"), templates.render,
                               clock=templates.clock)


def met_at(live_status: Mapping[str, Any]) -> datetime | None:
    """When the conditions first passed, as the custom resource's status notes it."""
    own = live_status.get("orksync")
    raw = own.get(MET_AT) if isinstance(own, Mapping) else None
    if not isinstance(raw, str):
        return None
    try:
        return datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None


def cleanup_due(block: Mapping[str, Any], data: Mapping[str, Any], templates: Any,
                now: datetime) -> str:
    """Why the custom resource is to be deleted now ("" when it is not): its conditions
    pass on `data` and `deleteAfter` (default 0) has passed since they first did."""
    if not conditions_met(block, data, templates):
        return ""
    wait = parse_duration(str(block.get("deleteAfter") or "0s"))
    if wait > timedelta(0):
        status = data.get("status")
        since = met_at(status if isinstance(status, Mapping) else {})
        if since is None or now < since + wait:
            return ""
        return (f"runtime.cleanup: its conditions pass since {since.isoformat()} and "
                f"deleteAfter ({block.get('deleteAfter')}) has passed")
    return "runtime.cleanup: its conditions pass"


def fingerprint(body: Mapping[str, Any]) -> str:
    """A digest of the custom resource as Git holds it: the same text, the same digest."""
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]
