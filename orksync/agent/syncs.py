"""The `Sync` custom resource (group orksync.io, deploy/base/sync.crd.yaml): its spec read
and checked, its status written in kstatus conventions, the Events about it.

A Sync's spec is read strictly: every value that cannot be used (a duration that does not
parse, two refs, a semver range, a file:// URL the agent does not allow) is an error naming
the Sync and the field, and the Sync is then Stalled, never synced with a guess. The
Secrets it names are names only: they are read in the Sync's own namespace, so a Sync
cannot reach another namespace's credentials.

Status: `Ready`, `Reconciling` and `Stalled` conditions (kstatus), `observedGeneration`,
`lastAppliedRevision`, `lastAttemptedRevision`, `lastHandledReconcileAt`, the inventory's
object count and `history`, the last HISTORY syncs of a new revision, newest first. Written
as a merge patch of the status subresource, and only when it changed: an idle Sync costs
no request.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from orksync.cluster.kube import Kube, Resource
from orksync.cluster.live import rfc3339
from orksync.errors import ClusterError, InputError
from orksync.model import ObjRef

log = logging.getLogger("orksync.agent.syncs")

GROUP = "orksync.io"
API_VERSION = "orksync.io/v1alpha1"
KIND = "Sync"
FINALIZER = "orksync.io/sync-cleanup"
RECONCILE_ANNOTATION = "reconcile.orksync.io/requestedAt"
# the inventory (its --name) a Sync takes over on its first sync, honoured only by an
# agent run with --adopt-inventory: the move from `orksync sync` or a --repo-url agent
ADOPT_ANNOTATION = "orksync.io/adopt-inventory"
REVISION_ANNOTATION = "orksync.io/revision"  # on the Events about a Sync
HISTORY = 10
MAX_SHARDS = 64
# set on the Sync by the replica a webhook of a Sync of several shards reached: every
# replica serving one of its shards fetches at once
HOOK_ANNOTATION = "orksync.io/webhook-received-at"
UNIT_SEPARATOR = "#"  # namespace/name#shard: a shard of a Sync of several shards
FIELD_MANAGER = "orksync"

# reasons of the Ready condition
SUCCEEDED = "ReconciliationSucceeded"
FAILED = "ReconciliationFailed"
PROGRESSING = "Progressing"
INVALID = "InvalidSpec"
SECRET = "SecretNotFound"
SERVICE_ACCOUNT = "ServiceAccountNotFound"
DUPLICATE = "DuplicateSource"
SUSPENDED = "Suspended"
TIMEOUT = "TimedOut"
STALLED_REASONS = frozenset({INVALID, SECRET, SERVICE_ACCOUNT, DUPLICATE})


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncSpec:
    """A Sync's spec, checked. `ref` in the git source's terms (a branch, `refs/tags/T`
    or a full commit sha)."""

    namespace: str
    name: str
    url: str
    ref: str = "main"
    semver: str = ""  # a range: the highest tag satisfying it, in place of `ref`
    path: str = ""
    interval: float = 60.0
    resync_interval: float = 600.0
    timeout: float = 300.0
    prune: bool = True
    suspend: bool = False
    service_account: str = ""
    secret: str = ""
    verify_provider: str = ""
    verify_secret: str = ""
    webhook_secret: str = ""
    shards: int = 1  # units of its custom resources, each served on its own (agent.shard)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def wanted(self) -> str:
        """The ref as the status names it: the branch, tag or sha, or `semver <range>`."""
        return f"semver {self.semver}" if self.semver else self.ref

    @property
    def inventory_name(self) -> str:
        """The sync root's name: its inventory `orksync-inventory-<namespace>.<name>` (a
        namespace holds no dot, so two Syncs never share one)."""
        return f"{self.namespace}.{self.name}"

    def unit_key(self, shard: int) -> str:
        """The key of one shard of the Sync, as its claim and root know it: the Sync's
        own key for a Sync of one shard."""
        return self.key if self.shards <= 1 else f"{self.key}{UNIT_SEPARATOR}{shard}"

    def unit_inventory(self, shard: int) -> str:
        """The sync root's name of one shard: its own inventory."""
        return self.inventory_name if self.shards <= 1 else \
            f"{self.inventory_name}.{shard}-of-{self.shards}"

    def source_fingerprint(self) -> tuple[Any, ...]:
        """What the sync root is built from: a change of any of these makes a new one."""
        return (self.url, self.ref, self.semver, self.path, self.service_account, self.secret,
                self.verify_provider, self.verify_secret, self.resync_interval, self.prune,
                self.shards)


def ref_of(obj: Mapping[str, Any]) -> ObjRef:
    meta = obj.get("metadata") or {}
    return ObjRef(api_version=API_VERSION, kind=KIND, namespace=str(meta.get("namespace") or ""),
                  name=str(meta.get("name")))


def sync_key_of(unit_key: str) -> str:
    """The key of the Sync a shard's key (`SyncSpec.unit_key`) belongs to."""
    return unit_key.split(UNIT_SEPARATOR, 1)[0]


def key_of(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


def parse_spec(obj: Mapping[str, Any], *, allow_file_urls: bool = False) -> SyncSpec:
    """The spec of a Sync object; InputError naming the Sync and the field otherwise."""
    from orksync.durations import parse_duration

    meta = obj.get("metadata") or {}
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    subject = f"Sync/{namespace}/{name}"
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        raise InputError("missing", obj=subject, path="spec")

    def bad(field: str, why: str) -> InputError:
        return InputError(why, obj=subject, path=f"spec.{field}")

    url = spec.get("url")
    if not isinstance(url, str) or not url:
        raise bad("url", "missing")
    scheme = url.split("://", 1)[0].lower() if "://" in url else "ssh"  # scp-like: ssh
    if scheme == "file" and not allow_file_urls:
        raise bad("url", "file:// URLs are refused (they read the agent's own disk); "
                  "the agent's --allow-file-urls admits them")
    if scheme not in ("https", "http", "ssh", "git", "file"):
        raise bad("url", f"scheme {scheme!r} is not one of https, ssh, git")
    ref_spec = spec.get("ref") or {}
    if not isinstance(ref_spec, Mapping):
        raise bad("ref", "must be a mapping: {branch: B}, {tag: T}, {semver: R} or {commit: SHA}")
    given = {k: v for k, v in ref_spec.items() if v not in (None, "")}
    if len(given) > 1:
        raise bad("ref", f"names {' and '.join(sorted(given))}: give exactly one")
    ref = "main"
    semver = ""
    for field_name, value in given.items():
        if not isinstance(value, str):
            raise bad(f"ref.{field_name}", f"{value!r} is not a string")
        if field_name == "branch":
            ref = value
        elif field_name == "tag":
            ref = f"refs/tags/{value}"
        elif field_name == "commit":
            if len(value) != 40 or any(c not in "0123456789abcdef" for c in value):
                raise bad("ref.commit", f"{value!r} is not a full 40-hex commit sha")
            ref = value
        elif field_name == "semver":
            from orksync.errors import SourceError
            from orksync.source.semver import check_range

            try:
                check_range(value)
            except SourceError as err:
                raise bad("ref.semver", err.detail) from None
            semver = value.strip()
        else:
            raise bad(f"ref.{field_name}", "unknown; one of branch, tag, semver, commit")

    def duration(field_name: str, default: float) -> float:
        value = spec.get(field_name)
        if value in (None, ""):
            return default
        try:
            seconds = parse_duration(str(value)).total_seconds()
        except ValueError as err:
            raise bad(field_name, str(err)) from None
        if seconds <= 0:
            raise bad(field_name, f"{value!r} is not a positive duration")
        return seconds

    def flag(field_name: str, default: bool) -> bool:
        value = spec.get(field_name, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise bad(field_name, f"{value!r} is not true or false")
        return value

    def secret_name(field_name: str, holder: Any) -> str:
        if holder in (None, {}):
            return ""
        if not isinstance(holder, Mapping) or not isinstance(holder.get("name"), str) or \
                not holder["name"]:
            raise bad(field_name, "must be {name: NAME}")
        extra = set(holder) - {"name"}
        if extra:  # a namespace above all: a Sync reads Secrets of its own namespace only
            raise bad(f"{field_name}.{sorted(extra)[0]}",
                      "a Sync names Secrets of its own namespace only, by name")
        value = str(holder["name"])
        if "/" in value:
            raise bad(f"{field_name}.name",
                      f"{value!r}: a Sync names Secrets of its own namespace only, by name")
        return value

    verify = spec.get("verify") or {}
    provider = ""
    verify_secret = ""
    if verify:
        if not isinstance(verify, Mapping) or verify.get("provider") not in ("ssh", "gpg"):
            raise bad("verify.provider", "must be ssh or gpg")
        provider = str(verify["provider"])
        verify_secret = secret_name("verify.secretRef", verify.get("secretRef"))
        if not verify_secret:
            raise bad("verify.secretRef", "missing")
    webhook = spec.get("webhook") or {}
    webhook_secret = secret_name("webhook.secretRef", webhook.get("secretRef")
                                 if isinstance(webhook, Mapping) else webhook)
    account = spec.get("serviceAccountName") or ""
    if not isinstance(account, str) or "/" in account:
        raise bad("serviceAccountName",
                  f"{account!r}: a ServiceAccount of the Sync's namespace, by name")
    shards = spec.get("shards", 1)
    if shards is None:
        shards = 1
    if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= MAX_SHARDS:
        raise bad("shards", f"{shards!r} is not a whole number from 1 to {MAX_SHARDS}")
    path = spec.get("path") or ""
    if not isinstance(path, str) or path.startswith("/") or ".." in path.split("/"):
        raise bad("path", f"{path!r} is not a relative path inside the repository")
    return SyncSpec(namespace=namespace, name=name, url=url, ref=ref, semver=semver,
                    path=path.strip("/"),
                    interval=duration("interval", 60.0),
                    resync_interval=duration("resyncInterval", 600.0),
                    timeout=duration("timeout", 300.0),
                    prune=flag("prune", True), suspend=flag("suspend", False),
                    service_account=account, secret=secret_name("secretRef",
                                                                 spec.get("secretRef")),
                    verify_provider=provider, verify_secret=verify_secret,
                    webhook_secret=webhook_secret, shards=shards)


def read_secret(kube: Kube, namespace: str, name: str, field: str) -> dict[str, bytes]:
    """The data of the Secret `name` in the Sync's namespace; InputError naming the field
    that names it when it is missing (its values never reach a message)."""
    import base64

    res = kube.resource("v1", "Secret")
    try:
        found = kube.get_or_none(res, namespace, name)
    except ClusterError as err:
        raise InputError(f"Secret {namespace}/{name} cannot be read: {err.detail}",
                         path=field) from None
    if found is None:
        raise InputError(f"Secret {namespace}/{name} not found (a Sync reads Secrets of "
                         "its own namespace)", path=field)
    return {key: base64.b64decode(value) for key, value in (found.get("data") or {}).items()}


# --- status --------------------------------------------------------------------------------


def condition(type_: str, status: str, reason: str, message: str, generation: int,
              old: Sequence[Mapping[str, Any]], now: datetime) -> dict[str, Any]:
    """One condition; its lastTransitionTime kept while its status does not change."""
    before = next((c for c in old if c.get("type") == type_), None)
    since = before.get("lastTransitionTime") if before is not None and \
        before.get("status") == status else None
    return {"type": type_, "status": status, "reason": reason, "message": message[:1024],
            "observedGeneration": generation, "lastTransitionTime": since or rfc3339(now)}


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """What one run of a Sync came to, for its status."""

    ready: str  # "True", "False", "Unknown"
    reason: str
    message: str
    attempted: str = ""  # the revision fetched ("" when none)
    applied: str = ""  # the revision applied in full ("" when none)
    new_revision: bool = False  # a sync of a revision not synced before ran
    counts: Mapping[str, int] | None = None
    objects: int | None = None  # the inventory's object count after the run
    handled: str | None = None  # the reconcile request this run answered


def status_of(obj: Mapping[str, Any], outcome: Outcome, *, inventory: str,
              now: datetime | None = None) -> dict[str, Any]:
    """The Sync's new status after `outcome` (the old one's fields kept where the run says
    nothing new)."""
    now = now or datetime.now(UTC)
    old = copy.deepcopy(obj.get("status") or {})
    generation = int((obj.get("metadata") or {}).get("generation") or 0)
    conditions = old.get("conditions") or []
    stalled = outcome.reason in STALLED_REASONS
    reconciling = outcome.ready == "Unknown"
    new = {
        **old,
        "observedGeneration": generation,
        "conditions": [
            condition("Ready", outcome.ready, outcome.reason, outcome.message, generation,
                      conditions, now),
            condition("Reconciling", "True" if reconciling else "False",
                      PROGRESSING if reconciling else outcome.reason,
                      outcome.message if reconciling else "", generation, conditions, now),
            condition("Stalled", "True" if stalled else "False", outcome.reason,
                      outcome.message if stalled else "", generation, conditions, now),
        ],
    }
    new.update(_revisions(outcome))
    if outcome.handled is not None:
        new["lastHandledReconcileAt"] = outcome.handled
    if outcome.objects is not None:
        new["inventory"] = {"name": inventory, "objects": outcome.objects}
    if outcome.new_revision and outcome.attempted:
        entry = {"revision": outcome.attempted, "time": rfc3339(now),
                 "result": "succeeded" if outcome.ready == "True" else "failed",
                 "message": outcome.message[:512],
                 "counts": dict(outcome.counts or {})}
        history = [h for h in old.get("history") or [] if h.get("revision") !=
                   outcome.attempted]
        new["history"] = [entry, *history][:HISTORY]
    return new


def shard_entry(outcome: Outcome, *, served_by: str, generation: int) -> dict[str, Any]:
    """One shard's state in `status.shards` of a Sync of several shards."""
    entry: dict[str, Any] = {"servedBy": served_by, "ready": outcome.ready,
                             "reason": outcome.reason, "message": outcome.message[:512],
                             "observedGeneration": generation, **_revisions(outcome)}
    if outcome.objects is not None:
        entry["objects"] = outcome.objects
    return entry


def _revisions(outcome: Outcome) -> dict[str, str]:
    """The revisions a run attempted and applied, where it names them."""
    named = {"lastAttemptedRevision": outcome.attempted, "lastAppliedRevision": outcome.applied}
    return {k: v for k, v in named.items() if v}


def aggregate(own: Outcome, entries: Mapping[str, Any], shards: int) -> Outcome:
    """The Sync's Ready from shard 0's outcome `own` and the other shards' entries
    (`status.shards`): False when any shard failed, True when every shard applied the
    revision shard 0 applied, else Unknown (a shard has not got there yet)."""
    failed: list[str] = []
    reasons: list[str] = []
    behind: list[str] = []
    objects = own.objects
    for shard in range(1, shards):
        entry = entries.get(str(shard))
        if not isinstance(entry, Mapping):
            behind.append(str(shard))
            continue
        if entry.get("ready") == "False":
            failed.append(f"shard {shard} (served by {entry.get('servedBy') or 'none'}): "
                          f"{entry.get('message') or entry.get('reason')}")
            reasons.append(str(entry.get("reason") or FAILED))
        elif entry.get("ready") != "True" or (
                own.applied and entry.get("lastAppliedRevision") != own.applied):
            behind.append(str(shard))
        if objects is not None and isinstance(entry.get("objects"), int):
            objects += int(entry["objects"])
    if own.ready == "False" or (own.ready == "Unknown" and not failed):
        return dataclasses.replace(own, objects=objects)
    if failed:
        more = f"; and {len(failed) - 3} more shard(s)" if len(failed) > 3 else ""
        return dataclasses.replace(own, ready="False", reason=reasons[0],
                                   message="; ".join(failed[:3]) + more, objects=objects)
    if behind:
        return dataclasses.replace(
            own, ready="Unknown", reason=PROGRESSING, objects=objects,
            message=f"{own.message}; shard(s) {', '.join(behind)} of {shards} not there yet")
    return dataclasses.replace(own, message=f"{own.message} ({shards} shards)",
                               objects=objects)


def same_status(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two statuses say the same (transition times aside)."""
    def strip(status: Mapping[str, Any]) -> Any:
        out = dict(status)
        out["conditions"] = [{k: v for k, v in c.items() if k != "lastTransitionTime"}
                             for c in status.get("conditions") or []]
        return out
    return bool(strip(a) == strip(b))


def write_status(kube: Kube, obj: Mapping[str, Any], status: Mapping[str, Any]) -> Any:
    """The status subresource, replaced by a merge patch (history and conditions are
    lists: replaced whole, as computed)."""
    meta = obj.get("metadata") or {}
    res = sync_resource(kube)
    return kube.request("PATCH", res.path(str(meta.get("namespace")), str(meta.get("name")),
                                          "status"),
                        body={"status": dict(status)},
                        content_type="application/merge-patch+json",
                        subject=f"Sync/{meta.get('namespace')}/{meta.get('name')}")


def annotate(kube: Kube, obj: Mapping[str, Any], name: str, value: str) -> Any:
    """One annotation set on the Sync (a merge patch of its metadata)."""
    meta = obj.get("metadata") or {}
    res = sync_resource(kube)
    return kube.request("PATCH", res.path(str(meta.get("namespace")), str(meta.get("name"))),
                        body={"metadata": {"annotations": {name: value}}},
                        content_type="application/merge-patch+json",
                        subject=f"Sync/{meta.get('namespace')}/{meta.get('name')}")


def sync_resource(kube: Kube) -> Resource:
    return kube.resource(API_VERSION, KIND)


def event(kube: Kube, obj: Mapping[str, Any], *, reason: str, message: str,
          revision: str = "", warning: bool = False) -> None:
    """An Event on the Sync, its revision in the message and in the annotation
    `orksync.io/revision`. A refused Event is logged, never raised."""
    import uuid

    meta = obj.get("metadata") or {}
    namespace, name = str(meta.get("namespace")), str(meta.get("name"))
    stamp = rfc3339(datetime.now(UTC))
    text = f"{message} (revision {revision[:12]})" if revision else message
    body = {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{name}.{uuid.uuid4().hex[:16]}", "namespace": namespace,
                     "annotations": {REVISION_ANNOTATION: revision} if revision else {}},
        "involvedObject": {"apiVersion": API_VERSION, "kind": KIND, "name": name,
                           "namespace": namespace, "uid": meta.get("uid", "")},
        "reason": reason, "message": text[:1024], "type": "Warning" if warning else "Normal",
        "count": 1, "firstTimestamp": stamp, "lastTimestamp": stamp,
        "source": {"component": "orksync"}, "reportingComponent": "orksync",
    }
    try:
        kube.create(kube.resource("v1", "Event"), body, field_manager=FIELD_MANAGER,
                    subject=f"Event for Sync/{namespace}/{name}")
    except ClusterError as err:
        log.warning("Sync/%s/%s: event %s not recorded: %s", namespace, name, reason, err)


def ready_condition(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions") or []
                 if c.get("type") == "Ready"), {})


def sync_rows(syncs: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """One row per Sync for `orksync status`: its URL, revision, Ready, last sync,
    message."""
    rows = []
    for obj in sorted(syncs, key=key_of):
        status = obj.get("status") or {}
        ready = ready_condition(obj)
        history = status.get("history") or []
        rows.append({"sync": key_of(obj), "url": str((obj.get("spec") or {}).get("url", "")),
                     "revision": str(status.get("lastAppliedRevision") or "")[:12],
                     "ready": str(ready.get("status") or "Unknown"),
                     "lastSync": str(history[0].get("time") if history else ""),
                     "message": str(ready.get("message") or "")})
    return rows
