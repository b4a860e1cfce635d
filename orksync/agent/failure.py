"""A failed sync of the agent, written where `orksync status` and `kubectl` read: the sync
root's inventory ConfigMap (annotations) and, when the sync failed before any custom
resource's status was written (a revision that does not load, a render refused as
empty), each custom resource of the root (its `Ready` condition).

The root's annotations, written by a JSON merge patch beside the inventory's own
server-side apply (whose field manager does not own them, so it never removes them):

* `orksync.io/sync-result`: `Succeeded`, `Failed` or `Stalled` (a refusal that cannot
  succeed without a change of the repository or the cluster: retried at a new revision,
  or after the backoff);
* `orksync.io/sync-revision`: the revision the agent last tried;
* `orksync.io/sync-message`: why it failed (empty after a success);
* `orksync.io/sync-time`: when (RFC 3339, UTC).

A custom resource's `Ready` condition becomes False with reason `SyncFailed` (or
`Stalled`) naming the revision and the error, and `status.orksync.lastAttemptedRevision`
the revision; only where orksync manages the conditions (the live status has a `Ready`
condition). The next successful sync writes the whole status again (its server-side apply
is forced and compares with the live status). Messages are cut to 1,024 characters and
carry no generated value: they are load, render and API errors, which never quote one.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from orksync.cluster.kube import MERGE_PATCH, Kube
from orksync.errors import ClusterError
from orksync.model import ObjRef
from orksync.sync import annotate_inventory

log = logging.getLogger(__name__)

RESULT_ANNOTATION = "orksync.io/sync-result"
REVISION_ANNOTATION = "orksync.io/sync-revision"
MESSAGE_ANNOTATION = "orksync.io/sync-message"
TIME_ANNOTATION = "orksync.io/sync-time"
MAX_MESSAGE = 1024
SUCCEEDED, FAILED, STALLED = "Succeeded", "Failed", "Stalled"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _bounded(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE - 1] + "…"


def report_root(kube: Kube, *, name: str, namespace: str, result: str, revision: str,
                message: str) -> bool:
    """The root's annotations (see the module doc); whether they were written (not when
    the root has no inventory yet: nothing was ever synced to report beside)."""
    return annotate_inventory(kube, name, namespace, {
        RESULT_ANNOTATION: result, REVISION_ANNOTATION: revision,
        MESSAGE_ANNOTATION: _bounded(message), TIME_ANNOTATION: _now()},
        field_manager="orksync-agent")


def report_custom_resources(kube: Kube, refs: Iterable[ObjRef], *, result: str,
                            revision: str, message: str) -> int:
    """Each custom resource's `Ready` condition False (see the module doc); how many
    were written. One that is gone, or whose status orksync does not manage, is left."""
    written = 0
    text = _bounded(f"revision {revision[:12]} not synced: {message}")
    for ref in refs:
        try:
            res = kube.resource(ref.api_version, ref.kind)
            live = kube.get_or_none(res, ref.namespace, ref.name)
        except ClusterError as err:
            log.debug("%s: status not written: %s", ref, err)
            continue
        if live is None or "status" not in res.subresources:
            continue
        status = live.get("status") or {}
        conditions: list[Any] = list(status.get("conditions") or [])
        ready = next((i for i, c in enumerate(conditions)
                      if isinstance(c, dict) and c.get("type") == "Ready"), None)
        if ready is None:
            continue
        before = conditions[ready]
        if before.get("status") == "False" and before.get("message") == text:
            continue
        conditions[ready] = {
            **before, "status": "False", "reason": "SyncFailed" if result == FAILED
            else STALLED, "message": text,
            "lastTransitionTime": before.get("lastTransitionTime")
            if before.get("status") == "False" else _now()}
        body = {"status": {"conditions": conditions,
                           "orksync": {"lastAttemptedRevision": revision}}}
        try:
            kube.request("PATCH", res.path(ref.namespace, ref.name, "status"), body=body,
                         content_type=MERGE_PATCH, query={"fieldManager": "orksync-agent"},
                         subject=str(ref))
        except ClusterError as err:
            if err.status != 404:
                raise
            continue
        written += 1
    return written
