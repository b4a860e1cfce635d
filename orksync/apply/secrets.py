"""Writing Secrets against the live cluster: the I/O shell around `orksync.secrets.plan`.

I/O: reads the `fromSecret` source, sends the one request a plan asks for and turns the
outcome into one `Change`. Every decision (keep, fill, rotate, renew) is the pure planner's;
the clock and the randomness are passed in.

* `write_secret` is called by the apply engine for every `v1 Secret` of a render.
* `rotate_due` backs `orksync rotate` and the agent's scheduled rotation: it finds the
  managed Secrets that carry rotation or TLS annotations and rotates the due ones in place,
  from the annotations alone (no repository needed).

Writes: a missing Secret is created with POST (fails when it appeared meanwhile: another
writer's generated values are never overwritten; the Secret is then read and planned
again); everything else is a forced server-side apply with field manager `orksync`; a
rotation carries `metadata.resourceVersion`, so a concurrent write turns it into a 409,
reported as a failed change and retried on the next run. One request per write: the Secret
is never absent and never half-written (the key always travels with its certificate).

No value ever reaches a message: reasons are built from key names, and API error texts
are scrubbed of every value of the body.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Set
from datetime import datetime
from typing import Any

from orksync.apply.compare import is_subset
from orksync.apply.kube import Kube, Resource
from orksync.errors import ClusterError
from orksync.model import (
    MANAGED_SELECTOR,
    Action,
    Change,
    ChangeSet,
    ObjRef,
    RenderedObject,
    WritePolicy,
)
from orksync.render.notes.random import RandomSource
from orksync.secrets.mask import scrub, secret_values
from orksync.secrets.plan import (
    ROTATE_AFTER,
    TLS_ANNOTATION,
    UNMANAGED,
    SecretPlan,
    data_hash,
    directives_from_annotations,
    owned_desired,
    plan_secret,
)

__all__ = ["MANAGED_SELECTOR", "rotate_due", "write_secret"]

log = logging.getLogger(__name__)

CONFLICT_MESSAGE = ("conflict: the Secret changed since it was read (resourceVersion "
                    "precondition); nothing was written, retried on the next run")


class _AlreadyExists(Exception):
    """The POST found the Secret already there (created meanwhile, or not prefetched)."""


def write_secret(kube: Kube, obj: RenderedObject, body: Mapping[str, Any],
                 live: Mapping[str, Any] | None, *, field_manager: str, now: datetime,
                 random: RandomSource, dry_run: bool) -> tuple[Change, str | None]:
    """Plan and write one Secret. Returns its change and the hash of its data (None when
    no Secret exists afterwards)."""
    ref = obj.ref
    res = kube.resource("v1", "Secret")
    source = None
    copy_from = obj.directives.get("fromSecret")
    if copy_from:
        src_ns = str(copy_from.get("namespace") or ref.namespace)
        try:
            source = kube.get_or_none(res, src_ns, str(copy_from.get("name")))
        except ClusterError as err:
            return (Change(ref=ref, action=Action.FAILED,
                           message=f"cannot read the source Secret: {err.detail}"),
                    _hash_of(live))
    for _attempt in range(2):
        plan = plan_secret(body, obj.directives, live, policy=obj.policy, now=now,
                           random=random, source=source)
        try:
            change = _execute(kube, res, ref, plan, live, field_manager=field_manager,
                              dry_run=dry_run)
        except _AlreadyExists:
            try:
                live = kube.get_or_none(res, ref.namespace, ref.name)
            except ClusterError as err:
                return Change(ref=ref, action=Action.FAILED, message=err.detail), None
            continue
        written = change.action in (Action.CREATED, Action.CONFIGURED, Action.UNCHANGED)
        digest = plan.data_hash if written and plan.write != "skip" else _hash_of(live)
        return change, digest
    return (Change(ref=ref, action=Action.FAILED,
                   message="created and deleted concurrently; retried on the next run"),
            None)


def rotate_due(kube: Kube, *, now: datetime, random: RandomSource, dry_run: bool = False,
               force: Set[str] = frozenset(), field_manager: str = "orksync",
               namespace: str = "") -> ChangeSet:
    """Rotate every managed Secret whose rotation is due (or named `ns/name` in `force`)
    and renew certificates near expiry. `namespace` limits the scan ("" = all)."""
    res = kube.resource("v1", "Secret")
    changes = ChangeSet()
    seen: set[str] = set()
    for live in kube.list(res, namespace=namespace, label_selector=MANAGED_SELECTOR):
        ref = ObjRef.of(live)
        key = f"{ref.namespace}/{ref.name}"
        annotations = (live.get("metadata") or {}).get("annotations") or {}
        forced = key in force
        if not (forced or annotations.get(ROTATE_AFTER) or annotations.get(TLS_ANNOTATION)):
            continue
        seen.add(key)
        try:
            directives = directives_from_annotations(annotations)
        except (ValueError, TypeError) as err:
            changes.add(ref, Action.FAILED, f"cannot rotate: {err}")
            continue
        if forced and not (directives.get("generated") or directives.get("tls")):
            changes.add(ref, Action.SKIPPED, "nothing to rotate: no generated keys, no tls")
            continue
        plan = plan_secret(owned_desired(live, field_manager), directives, live,
                           policy=WritePolicy.APPLY, now=now, random=random,
                           force_rotate=forced)
        if plan.write != "rotate" and not plan.failed:
            changes.add(ref, Action.UNCHANGED, "not due")
            continue
        try:
            changes.changes.append(_execute(kube, res, ref, plan, live,
                                            field_manager=field_manager, dry_run=dry_run))
        except _AlreadyExists:  # pragma: no cover - rotations never create
            changes.add(ref, Action.FAILED, "unexpected create during rotation")
    for key in sorted(set(force) - seen):
        ns, _, name = key.rpartition("/")
        changes.add(ObjRef(api_version="v1", kind="Secret", namespace=ns, name=name),
                    Action.FAILED, "cannot rotate: not found, or not managed by orksync")
    return changes


def _execute(kube: Kube, res: Resource, ref: ObjRef, plan: SecretPlan,
             live: Mapping[str, Any] | None, *, field_manager: str,
             dry_run: bool) -> Change:
    """Send the plan's one request (if any) and describe what happened."""
    suffix = " (dry run)" if dry_run else ""
    if plan.failed:
        return Change(ref=ref, action=Action.FAILED, message=plan.reason.removeprefix("error: "))
    if plan.write == "skip" or plan.body is None:
        action = Action.SKIPPED if plan.reason == UNMANAGED else Action.UNCHANGED
        return Change(ref=ref, action=action, message=plan.reason)
    body = plan.body
    try:
        if plan.write == "create":
            if dry_run:
                kube.request("POST", res.path(ref.namespace), body=body, subject=str(ref),
                             query={"fieldManager": field_manager, "dryRun": "All"})
            else:
                kube.create(res, body, field_manager=field_manager, subject=str(ref),
                            metadata_only=True)
            log.debug("%s: %s", ref, plan.reason)
            return Change(ref=ref, action=Action.CREATED, message=plan.reason + suffix)
        if plan.write == "apply" and live is not None and is_subset(body, live):
            return Change(ref=ref, action=Action.UNCHANGED)
        before = ((live or {}).get("metadata") or {}).get("resourceVersion")
        created, result = kube.apply(res, body, field_manager=field_manager, force=True,
                                     subject=str(ref), dry_run=dry_run, metadata_only=True)
    except ClusterError as err:
        if plan.write == "create" and err.status == 409:
            raise _AlreadyExists from None
        if err.status == 409:
            return Change(ref=ref, action=Action.FAILED, message=CONFLICT_MESSAGE)
        message = scrub(err.detail, secret_values(body) + secret_values(live))
        return Change(ref=ref, action=Action.FAILED, message=message)
    after = ((result or {}).get("metadata") or {}).get("resourceVersion")
    log.debug("%s: %s", ref, plan.reason)
    if created:
        return Change(ref=ref, action=Action.CREATED, message=plan.reason + suffix)
    if plan.write == "apply" and before is not None and before == after:
        return Change(ref=ref, action=Action.UNCHANGED)
    return Change(ref=ref, action=Action.CONFIGURED, message=plan.reason + suffix)


def _hash_of(live: Mapping[str, Any] | None) -> str | None:
    if live is None:
        return None
    return data_hash({str(k): str(v) for k, v in (live.get("data") or {}).items()})
