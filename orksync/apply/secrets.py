"""Writing Secrets against the live cluster: the I/O shell around `orksync.secrets.plan`
(the one request a plan asks for, turned into one `Change`), and `orksync rotate`
(docs/operations.md#writing-secrets)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Set
from datetime import datetime
from typing import Any

from orksync.apply.compare import dry_run_unchanged, is_subset
from orksync.apply.rollout import (
    ROLLED_KINDS,
    ROLLOUT_FIELD_MANAGER,
    live_digest,
    pod_template,
    referenced_secrets,
    rollout_body,
    rollout_digest,
)
from orksync.cluster.kube import METADATA_ONLY, Kube, Resource
from orksync.errors import ClusterError
from orksync.model import (
    MANAGED_SELECTOR,
    OWNER_ANNOTATION,
    SHARD_LABEL,
    Action,
    Change,
    ChangeSet,
    ObjRef,
    RenderedObject,
    WritePolicy,
)
from orksync.secrets.ca import CA_OF_ANNOTATION, ca_secret_name
from orksync.secrets.mask import scrub, secret_values
from orksync.secrets.plan import (
    ROTATE_AFTER,
    TLS_ANNOTATION,
    UNMANAGED,
    SecretPlan,
    data_after_write,
    data_hash,
    directives_from_annotations,
    owned_desired,
    plan_secret,
)
from orksync.secrets.random import Leaf, RandomSource

__all__ = ["MANAGED_SELECTOR", "Generating", "roll_readers", "rotate_due", "write_secret"]

log = logging.getLogger(__name__)

CONFLICT_MESSAGE = ("conflict: the Secret changed since it was read (resourceVersion "
                    "precondition); nothing was written, retried on the next run")


class _AlreadyExists(Exception):
    """The POST found the Secret (`ca`: its CA Secret) already there (created meanwhile,
    or not prefetched)."""

    def __init__(self, *, ca: bool = False) -> None:
        super().__init__()
        self.ca = ca


class Generating:
    """The random source of a Secret write: `random`'s values, and the expressions a
    template computed from random values (`<generate:expr:...>`) evaluated over them with
    the template notes (orksync.render.notes.expressions, imported only when a Secret holds
    such an expression), `now` the clock of their time notes."""

    def __init__(self, random: RandomSource, now: datetime) -> None:
        self._random = random
        self._now = now

    def token(self, func: str, n: int | None) -> str:
        return self._random.token(func, n)

    def evaluate(self, expression: Any, leaf: Leaf) -> str:
        from orksync.render.notes.expressions import evaluate

        return evaluate(expression, leaf, now=self._now)

    def finish(self, text: str) -> str:
        from orksync.render.notes.expressions import finish

        return finish(text)


def write_secret(kube: Kube, obj: RenderedObject, body: Mapping[str, Any],
                 live: Mapping[str, Any] | None, *, field_manager: str, now: datetime,
                 random: RandomSource, dry_run: bool,
                 ca_live: Mapping[str, Any] | None = None) -> tuple[Change, str | None]:
    """Plan and write one Secret. Returns its change and the hash of its data (None when
    no Secret exists afterwards). `ca_live`: the live CA Secret of a `tls:` Secret (as
    listed; None when absent)."""
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
                           random=Generating(random, now), source=source, ca_live=ca_live)
        try:
            change, after = _write_plan(kube, res, ref, plan, live,
                                        field_manager=field_manager, dry_run=dry_run)
        except _AlreadyExists as exists:
            try:
                if exists.ca:
                    ca_live = kube.get_or_none(res, ref.namespace, ca_secret_name(ref.name))
                else:
                    live = kube.get_or_none(res, ref.namespace, ref.name)
            except ClusterError as err:
                return Change(ref=ref, action=Action.FAILED, message=err.detail), None
            continue
        return change, data_hash(after) if after is not None else None
    return (Change(ref=ref, action=Action.FAILED,
                   message="created and deleted concurrently; retried on the next run"),
            None)


def rotate_due(kube: Kube, *, now: datetime, random: RandomSource, dry_run: bool = False,
               force: Set[str] = frozenset(), field_manager: str = "orksync",
               namespace: str = "", writer: Writer | None = None,
               shard: str = "") -> ChangeSet:
    """Rotate every managed Secret whose rotation is due (or named `ns/name` in `force`)
    and renew certificates near expiry, then roll the workloads of the same custom
    resource that read a rotated Secret. `namespace` limits the scan ("" = all), and
    `shard` to the Secrets labelled `orksync.io/shard=<shard>` (a Sync's own).
    `writer`: the connection a Secret or workload is written through, from its
    `orksync.io/owner` annotation (its custom resource's ServiceAccount,
    orksync.apply.impersonation.Identities.kube_for_owner); the scan's reads are
    `kube`'s."""
    res = kube.resource("v1", "Secret")
    changes = ChangeSet()
    seen: set[str] = set()
    selector = f"{MANAGED_SELECTOR},{SHARD_LABEL}={shard}" if shard else MANAGED_SELECTOR
    listed = list(kube.list(res, namespace=namespace, label_selector=selector))
    by_name = {(ObjRef.of(s).namespace, ObjRef.of(s).name): s for s in listed}
    rotated: dict[tuple[str, str], str] = {}  # (namespace, name) -> hash of the new data
    for live in listed:
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
                           policy=WritePolicy.APPLY, now=now,
                           random=Generating(random, now), force_rotate=forced,
                           ca_live=by_name.get((ref.namespace, ca_secret_name(ref.name))))
        if plan.write != "rotate" and not plan.failed:
            changes.add(ref, Action.UNCHANGED, "not due")
            continue
        try:
            target = _writer_of(kube, writer, live)
        except ClusterError as err:  # no identity for it: nothing is written
            changes.add(ref, Action.FAILED, f"cannot rotate: {err.detail}")
            continue
        try:
            change, after = _write_plan(target, res, ref, plan, live,
                                        field_manager=field_manager, dry_run=dry_run)
        except _AlreadyExists:  # a CA Secret created meanwhile: planned again next run
            changes.add(ref, Action.FAILED, "its CA Secret was created meanwhile; retried "
                        "on the next run")
            continue
        changes.changes.append(change)
        if change.action is Action.CONFIGURED and after is not None:
            rotated[(ref.namespace, ref.name)] = data_hash(after)
    for key in sorted(set(force) - seen):
        ns, _, name = key.rpartition("/")
        changes.add(ObjRef(api_version="v1", kind="Secret", namespace=ns, name=name),
                    Action.FAILED, "cannot rotate: not found, or not managed by orksync")
    changes.extend(roll_readers(kube, listed, rotated, dry_run=dry_run, writer=writer))
    return changes


Writer = Callable[[str], Kube]


def _writer_of(kube: Kube, writer: Writer | None, live: Mapping[str, Any]) -> Kube:
    """The connection `live` is written through (see `rotate_due`)."""
    owner = ((live.get("metadata") or {}).get("annotations") or {}).get(OWNER_ANNOTATION)
    return writer(str(owner)) if writer is not None and owner else kube


def roll_readers(kube: Kube, secrets: list[dict[str, Any]],
                 changed: Mapping[tuple[str, str], str], *, dry_run: bool = False,
                 writer: Writer | None = None) -> list[Change]:
    """Roll every Deployment, StatefulSet and DaemonSet of the same custom resource
    (`orksync.io/owner`) that reads one of the `changed` Secrets ((namespace, name) ->
    hash of its new data): its pod template's secrets-hash annotation is set to the value
    a sync computes from the same data (`secrets`: the live managed Secrets, for the
    hashes of the other Secrets it reads), by a server-side apply of that annotation
    alone under the field manager `orksync-rollout`, whatever the workload's write
    policy, through `writer` (see `rotate_due`). A workload already carrying the value is
    left alone."""
    if not changed:
        return []
    owners: dict[tuple[str, str], str] = {}
    hashes: dict[tuple[str, str, str], str] = {}  # (owner, namespace, name) -> data hash
    for secret in secrets:
        ref = ObjRef.of(secret)
        annotations = (secret.get("metadata") or {}).get("annotations") or {}
        owner = annotations.get(OWNER_ANNOTATION)
        if not owner or annotations.get(CA_OF_ANNOTATION):
            continue  # a CA Secret is not rendered, so a sync never hashes it either
        owners[(ref.namespace, ref.name)] = owner
        digest = changed.get((ref.namespace, ref.name)) or _hash_of(secret)
        if digest:
            hashes[(owner, ref.namespace, ref.name)] = digest
    out: list[Change] = []
    for namespace in sorted({ns for ns, _ in changed}):
        for api_version, kind in ROLLED_KINDS:
            try:
                res = kube.resource(api_version, kind)
                workloads = list(kube.list(res, namespace=namespace,
                                           label_selector=MANAGED_SELECTOR))
            except ClusterError as err:
                if err.status in (403, 404):
                    # not served, or not ours to read (deploy/base/clusterrole.yaml grants no
                    # DaemonSets: no Katalog key makes one): orksync wrote none of them
                    log.debug("%s %s not listed to roll: %s", api_version, kind, err)
                    continue
                out.append(Change(ref=ObjRef(api_version=api_version, kind=kind,
                                             namespace=namespace, name="*"),
                                  action=Action.FAILED,
                                  message=f"cannot list the workloads to roll: {err.detail}"))
                continue
            for workload in workloads:
                out.extend(_roll_one(kube, res, workload, changed, owners, hashes,
                                     dry_run=dry_run, writer=writer))
    return out


def _roll_one(kube: Kube, res: Resource, workload: dict[str, Any],
              changed: Mapping[tuple[str, str], str], owners: Mapping[tuple[str, str], str],
              hashes: Mapping[tuple[str, str, str], str], *, dry_run: bool,
              writer: Writer | None = None) -> list[Change]:
    ref = ObjRef.of(workload)
    owner = ((workload.get("metadata") or {}).get("annotations") or {}).get(OWNER_ANNOTATION)
    template = pod_template(workload)
    if not owner or template is None:
        return []
    reads = referenced_secrets(template.get("spec") or {})
    why = sorted(n for n in reads if (ref.namespace, n) in changed
                 and owners.get((ref.namespace, n)) == owner)
    if not why:
        return []
    own = {n: hashes[(owner, ref.namespace, n)] for n in reads
           if (owner, ref.namespace, n) in hashes}
    digest = rollout_digest(template, own)
    if digest is None or digest == live_digest(workload):
        return []
    try:  # an identity that cannot be decided fails here too: nothing is written
        _writer_of(kube, writer, workload).apply(
            res, rollout_body(ref, digest), field_manager=ROLLOUT_FIELD_MANAGER, force=True,
            subject=str(ref), dry_run=dry_run, metadata_only=True)
    except ClusterError as err:
        return [Change(ref=ref, action=Action.FAILED, message=f"cannot roll: {err.detail}")]
    suffix = " (dry run)" if dry_run else ""
    return [Change(ref=ref, action=Action.CONFIGURED,
                   message=f"rolled: reads the rotated Secret {', '.join(why)}{suffix}")]


def _write_plan(kube: Kube, res: Resource, ref: ObjRef, plan: SecretPlan,
                live: Mapping[str, Any] | None, *, field_manager: str,
                dry_run: bool) -> Written:
    """The plan's writes, in order: the CA Secret, the Secret, the removal of a legacy
    `ca.key` from it. A failure stops the sequence (the next run plans again from what
    was written: the CA key is never lost, since the TLS Secret loses it last)."""
    if plan.failed or (plan.ca_body is None and not plan.drop_legacy_ca_key):
        return _execute(kube, res, ref, plan, live, field_manager=field_manager,
                        dry_run=dry_run)
    if plan.ca_body is not None:
        problem = _write_ca(kube, res, plan.ca_body, field_manager=field_manager,
                            dry_run=dry_run)
        if problem:
            return Change(ref=ref, action=Action.FAILED, message=problem), live
    change, after = _execute(kube, res, ref, plan, live, field_manager=field_manager,
                             dry_run=dry_run)
    if not plan.drop_legacy_ca_key or change.action is Action.FAILED or dry_run:
        return change, after
    try:
        kube.request_with_status("PATCH", res.path(ref.namespace, ref.name),
                                 subject=str(ref), body={"data": {"ca.key": None}},
                                 content_type="application/merge-patch+json",
                                 accept=METADATA_ONLY)
    except ClusterError as err:
        message = scrub(err.detail, secret_values(plan.body) + secret_values(live))
        return (Change(ref=ref, action=Action.FAILED,
                       message=f"the CA key was copied to Secret {ca_secret_name(ref.name)}, "
                               f"but not removed from this one: {message}"), after)
    after = {k: v for k, v in (after or {}).items() if k != "ca.key"}
    if change.action is Action.UNCHANGED:
        return Change(ref=ref, action=Action.CONFIGURED, message=plan.reason), after
    return change, after


def _write_ca(kube: Kube, res: Resource, body: Mapping[str, Any], *, field_manager: str,
              dry_run: bool) -> str | None:
    """Write a CA Secret; the failure's message, or None."""
    meta = body["metadata"]
    subject = f"Secret/{meta['namespace']}/{meta['name']}"
    query: dict[str, Any] = {"fieldManager": field_manager}
    if dry_run:
        query["dryRun"] = "All"
    try:
        if "resourceVersion" not in meta:
            kube.request_with_status("POST", res.path(str(meta["namespace"])), body=body,
                                     subject=subject, query=query, accept=METADATA_ONLY)
        else:
            kube.apply(res, body, field_manager=field_manager, force=True, subject=subject,
                       dry_run=dry_run, metadata_only=True)
    except ClusterError as err:
        if err.status == 409 and "resourceVersion" not in meta:
            raise _AlreadyExists(ca=True) from None
        if err.status == 409:
            return f"its CA Secret {meta['name']}: {CONFLICT_MESSAGE}"
        return f"its CA Secret {meta['name']}: " + scrub(err.detail, secret_values(body))
    return None


Written = tuple[Change, "Mapping[str, str] | None"]  # the change, the data afterwards


def _execute(kube: Kube, res: Resource, ref: ObjRef, plan: SecretPlan,
             live: Mapping[str, Any] | None, *, field_manager: str,
             dry_run: bool) -> Written:
    """Send the plan's one request (if any) and describe what happened, with the data the
    Secret holds afterwards (for the rollout hash: computed, not read back, see
    `data_after_write`; the live data when nothing was written; None when absent)."""
    suffix = " (dry run)" if dry_run else ""
    kept = _data_or_none(live)
    if plan.failed:
        return (Change(ref=ref, action=Action.FAILED,
                       message=plan.reason.removeprefix("error: ")), kept)
    if plan.write == "skip" or plan.body is None:
        action = Action.SKIPPED if plan.reason == UNMANAGED else Action.UNCHANGED
        return Change(ref=ref, action=action, message=plan.reason), kept
    body = plan.body
    after = data_after_write(body, live if plan.write != "create" else None, field_manager)
    try:
        if plan.write == "create":
            if dry_run:
                kube.request("POST", res.path(ref.namespace), body=body, subject=str(ref),
                             query={"fieldManager": field_manager, "dryRun": "All"})
            else:
                kube.create(res, body, field_manager=field_manager, subject=str(ref),
                            metadata_only=True)
            log.debug("%s: %s", ref, plan.reason)
            return Change(ref=ref, action=Action.CREATED, message=plan.reason + suffix), after
        if plan.write == "apply" and live is not None and is_subset(body, live):
            return Change(ref=ref, action=Action.UNCHANGED), kept
        before = ((live or {}).get("metadata") or {}).get("resourceVersion")
        created, result = kube.apply(res, body, field_manager=field_manager, force=True,
                                     subject=str(ref), dry_run=dry_run,
                                     metadata_only=not dry_run)
    except ClusterError as err:
        if plan.write == "create" and err.status == 409:
            raise _AlreadyExists from None
        if err.status == 409:
            return Change(ref=ref, action=Action.FAILED, message=CONFLICT_MESSAGE), kept
        message = scrub(err.detail, secret_values(body) + secret_values(live))
        return Change(ref=ref, action=Action.FAILED, message=message), kept
    done = ((result or {}).get("metadata") or {}).get("resourceVersion")
    log.debug("%s: %s", ref, plan.reason)
    if created:
        return Change(ref=ref, action=Action.CREATED, message=plan.reason + suffix), after
    if plan.write == "apply" and (
            dry_run_unchanged(result, live, lambda: kube.get_or_none(
                res, ref.namespace, ref.name)) if dry_run
            else before is not None and before == done):
        return Change(ref=ref, action=Action.UNCHANGED), after
    return Change(ref=ref, action=Action.CONFIGURED, message=plan.reason + suffix), after


def _data_or_none(live: Mapping[str, Any] | None) -> dict[str, str] | None:
    if live is None:
        return None
    return {str(k): str(v) for k, v in (live.get("data") or {}).items()}


def _hash_of(live: Mapping[str, Any] | None) -> str | None:
    if live is None:
        return None
    return data_hash({str(k): str(v) for k, v in (live.get("data") or {}).items()})
