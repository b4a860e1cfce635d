"""Kubernetes Events on custom resources (prior art 13, 15): one Event per sync of a custom
resource when something changed or failed, never for an unchanged sync.

* `sync_event` (pure) decides: None for an unchanged sync, else (type, reason, message):
  `Normal <Kind>Reconciled` "created 2, configured 1: Deployment/ns/x, Service/ns/y" or
  `Warning <Kind>ReconcileError` with the first error (Orkestra's reasons, §5.1 step 15).
* `emit` (I/O) creates the core/v1 Event in the custom resource's namespace ("default"
  for a cluster-scoped one). The message is scrubbed of the given secret values, cut to
  1024 characters and ends with the revision synced (`(revision ab12cd3)`, also whole in
  the annotation `orksync.io/revision`). Best effort: a refused Event is logged, never
  raised.
* `report_sync` (I/O) is the one call a sync makes after applying: for every custom
  resource that exists, read its children, write its status, emit its Event. What the
  guard or the cluster-scope policy refused for a custom resource is listed in its
  `status.orksync.refused`, and a `Warning <Kind>Refused` Event is emitted when that list
  changes (not at every sync while it stays the same), so a tenant sees why an object of
  theirs was not written. A `Warning <Kind>HealthCheckFailed` (or `<Kind>HealthTimeout`)
  Event is emitted when the children's health turns the custom resource Stalled.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from orksync.apply.impersonation import Identities, Impersonation
from orksync.cluster.kube import Kube
from orksync.cluster.live import LiveIndex, LiveReader
from orksync.durations import rfc3339
from orksync.errors import ClusterError
from orksync.katalog.model import Catalog, CustomResource
from orksync.lifecycle.status import (
    created_custom_resources,
    read_children,
    status_cross,
    write_status,
)
from orksync.model import (
    MANAGED_SELECTOR,
    Action,
    Change,
    ChangeSet,
    ObjRef,
    RenderedObject,
    RenderedSet,
    short_revision,
)
from orksync.secrets.mask import scrub, secret_values
from orksync.status.desired import (
    child_secret_values,
    desired_status,
    first_error,
    render_error_text,
)
from orksync.status.health import (
    ChildHealth,
    Health,
    HealthReport,
    HealthStatus,
    assess,
    evaluate,
    health_timeout,
)

__all__ = ["MAX_EVENT_MESSAGE", "emit", "report_sync", "sync_event"]

log = logging.getLogger(__name__)

MAX_EVENT_MESSAGE = 1024
REVISION_ANNOTATION = "orksync.io/revision"
_REPORTED = (Action.CREATED, Action.CONFIGURED, Action.DELETED)


def sync_event(cr_ref: ObjRef, changes_for_cr: Sequence[Change],
               render_error: str | None = None) -> tuple[str, str, str] | None:
    """(type, reason, message) of the Event summarising one sync of one custom resource,
    or None when nothing changed and nothing failed."""
    error = first_error(changes_for_cr, render_error)
    if error:
        failed = sum(1 for c in changes_for_cr if c.action is Action.FAILED)
        prefix = f"failed {failed}: " if failed else "render failed: "
        return "Warning", f"{cr_ref.kind}ReconcileError", prefix + error
    changed = [c for c in changes_for_cr if c.action in _REPORTED]
    if not changed:
        return None
    counts = ", ".join(f"{a.value} {n}" for a in _REPORTED
                       if (n := sum(1 for c in changed if c.action is a)))
    refs = ", ".join(str(c.ref) for c in changed)
    return "Normal", f"{cr_ref.kind}Reconciled", f"{counts}: {refs}"


def emit(kube: Kube, cr_ref: ObjRef, cr_uid: str, *, reason: str, message: str,
         type: str = "Normal", component: str = "orksync",
         secrets: Iterable[str] = (), now: datetime | None = None,
         revision: str = "") -> dict[str, Any] | None:
    """Create one Event about the custom resource; the created Event, or None when the
    API server refused it. `revision`: the revision synced, ending the message (`kubectl
    describe` shows it) and in the annotation `orksync.io/revision` whole."""
    if type not in ("Normal", "Warning"):
        raise ValueError(f"event type must be Normal or Warning, not {type!r}")
    namespace = cr_ref.namespace or "default"
    stamp = rfc3339(now or datetime.now(UTC))
    suffix = f" (revision {short_revision(revision)})" if revision else ""
    metadata: dict[str, Any] = {"name": f"{cr_ref.name}.{uuid.uuid4().hex[:16]}",
                                "namespace": namespace}
    if revision:
        metadata["annotations"] = {REVISION_ANNOTATION: revision}
    body = {
        "apiVersion": "v1", "kind": "Event",
        "metadata": metadata,
        "involvedObject": {"apiVersion": cr_ref.api_version, "kind": cr_ref.kind,
                           "name": cr_ref.name, "namespace": cr_ref.namespace,
                           "uid": cr_uid},
        "reason": reason,
        "message": scrub(message, secrets)[:MAX_EVENT_MESSAGE - len(suffix)] + suffix,
        "type": type,
        "count": 1,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "source": {"component": component},
        "reportingComponent": component,
    }
    if not cr_ref.namespace:
        del body["involvedObject"]["namespace"]  # type: ignore[attr-defined]
    try:
        return kube.create(kube.resource("v1", "Event"), body, field_manager=component,
                           subject=f"Event for {cr_ref}")
    except ClusterError as err:
        log.warning("%s: event %s not recorded: %s", cr_ref, reason, err)
        return None


def report_sync(kube: Kube, catalog: Catalog, rendered: RenderedSet, changes: ChangeSet, *,
                revision: str, now: datetime | None = None,
                clock: Callable[[], datetime] | None = None,
                impersonation: Impersonation | None = None,
                live: LiveReader | None = None) -> list[ObjRef]:
    """After a sync: for every custom resource of the catalog that exists in the cluster,
    read its children back, write its status (orksync.lifecycle.status) and emit one Event
    when something changed or failed. Returns the custom resources whose status was
    written. Best effort: a failure is logged and the next custom resource is handled.
    Each custom resource's children are read as the ServiceAccount they are written as
    (`impersonation` and the rendered directives; orksync.apply.impersonation), so its
    status reports what that identity sees; the custom resource, its status and Events are
    the agent's. `live`: where the custom resources and their children are read (the
    agent's informers); None: one LIST per kind."""
    from orksync.render.engine import templates_for
    from orksync.render.templates import utc_now

    now = now or datetime.now(UTC)
    templates = {k.name: templates_for(k, clock or utc_now) for k in catalog.katalogs}
    render_errors: dict[str, list[Exception]] = {}
    for err in rendered.errors:
        obj = getattr(err, "obj", "")
        if obj:
            render_errors.setdefault(obj, []).append(err)
    by_owner: dict[ObjRef, list[RenderedObject]] = {}
    for o in rendered.objects:
        if o.owner is not None:
            by_owner.setdefault(o.owner, []).append(o)
    declared: dict[ObjRef, list[tuple[str, ObjRef]]] = {}
    for child, owner, key in rendered.declared:
        declared.setdefault(owner, []).append((key, child))
    by_ref: dict[ObjRef, list[Change]] = {}
    for c in changes.changes:
        by_ref.setdefault(c.ref, []).append(c)
    # the custom resources `custom:` blocks created, rendered through their own entries:
    # their status too, deepest first, each one's health rolled up into its parent's
    crs = [*created_custom_resources(catalog, catalog.crs, rendered.objects), *catalog.crs]
    refused = _refused_by_owner(crs, rendered)
    rolled_up: dict[ObjRef, Health] = {}
    written: list[ObjRef] = []
    # one LIST per kind for all custom resources and children, or the agent's view
    index = live if live is not None else LiveIndex(kube)
    identities = Identities(kube, impersonation, rendered.objects)
    for cr in crs:
        try:
            try:
                children = identities.index_for(cr.ref) or index
            except ClusterError as err:  # no identity: its children were not written
                log.debug("%s: children read as the agent: %s", cr.ref, err)
                children = index
            if _report_one(kube, index, cr, templates[cr.entry.katalog],
                           by_owner.get(cr.ref, []), by_ref, render_errors.get(str(cr.ref)),
                           revision, now, catalog.crs, declared.get(cr.ref, []),
                           refused.get(cr.ref, []), children_index=children,
                           rolled_up=rolled_up):
                written.append(cr.ref)
        except ClusterError as err:
            log.warning("%s: status not written: %s", cr.ref, err)
    return written


def _live_secret_values(index: LiveReader, cr_live: dict[str, Any]) -> list[str]:
    """The values of the live Secrets a custom resource wrote (its last status's
    inventory): what a render error of it must not quote (a template may read them
    through `.children`)."""
    inventory = ((cr_live.get("status") or {}).get("orksync") or {}).get("inventory") or []
    out: list[str] = []
    for text in inventory:
        kind, _, rest = str(text).partition("/")
        namespace, _, name = rest.partition("/")
        if kind != "Secret" or not name:
            continue
        try:
            secret = index.get(ObjRef(api_version="v1", kind="Secret", namespace=namespace,
                                      name=name), MANAGED_SELECTOR)
        except ClusterError as err:
            log.debug("cannot read %s/%s to scrub a message: %s", namespace, name, err)
            continue
        out.extend(secret_values(secret))
    return out


def _refused_by_owner(custom_resources: Sequence[CustomResource], rendered: RenderedSet
                      ) -> dict[ObjRef, list[str]]:
    """What the render refused, by custom resource: a refused custom resource itself, and
    each child whose reason starts with its custom resource (`<cr> <entry>: <rule>`)."""
    crs = {str(cr.ref): cr.ref for cr in custom_resources}
    out: dict[ObjRef, list[str]] = {}
    for ref, reason in rendered.skipped:
        owner = ref if str(ref) in crs else crs.get(reason.split(" ", 1)[0])
        if owner is not None:
            out.setdefault(owner, []).append(f"{ref}: {reason}")
    return out


def _report_one(kube: Kube, index: LiveReader, cr: CustomResource, templates: Any,
                children: list[RenderedObject], by_ref: dict[ObjRef, list[Change]],
                render_errors: Sequence[Exception] | None, revision: str, now: datetime,
                others: Sequence[CustomResource] = (),
                declared: Sequence[tuple[str, ObjRef]] = (),
                refused_at_render: Sequence[str] = (), *,
                children_index: LiveReader | None = None,
                rolled_up: dict[ObjRef, Health] | None = None) -> bool:
    """`index`: the agent's view (the custom resource, `cross`); `children_index`: its
    children as their ServiceAccount sees them (default: `index`); `rolled_up`: the
    health of the created custom resources whose status was computed before (a child of
    one of them takes that health, not its live conditions, which `index` may have read
    before they were written); this custom resource's is added."""
    live = index.get(cr.ref)
    mine_index = children_index or index
    if live is None:
        return False
    mine = [c for ref in (cr.ref, *(o.ref for o in children)) for c in by_ref.get(ref, [])]
    refused = sorted({*refused_at_render,
                      *(f"{c.ref}: {c.message}" for c in mine if c.action is Action.SKIPPED)})
    secrets = child_secret_values(children)
    render_error = None
    if render_errors:
        secrets += _live_secret_values(mine_index, live)
        render_error = render_error_text(render_errors, secrets)
    report = health_report(cr, live, children, mine, mine_index, now=now, refused=refused,
                           secrets=secrets, rolled_up=rolled_up)
    if rolled_up is not None:
        rolled_up[cr.ref] = report.health
    status = desired_status(live, cr.entry, templates, mine, revision=revision,
                            render_error=render_error, now=now,
                            children=read_children(kube, cr.ref, children, mine_index,
                                                   declared=declared),
                            cross=status_cross(cr, live, templates, others, index),
                            secrets=secrets, refused=refused, health=report)
    # ignoreStatusPatch (flat, or runtime.ignoreStatusPatch): Orkestra writes no status
    written = False if cr.entry.raw.get("ignoreStatusPatch") is True else \
        write_status(kube, cr.ref, status, live=live)
    before = ((live.get("status") or {}).get("orksync") or {}).get("refused") or []
    reported = status["orksync"].get("refused") or []
    if reported and reported != before:
        emit(kube, cr.ref, str(live["metadata"].get("uid") or ""),
             reason=f"{cr.ref.kind}Refused", type="Warning", secrets=secrets, now=now,
             message=f"refused {len(reported)}: " + "; ".join(reported), revision=revision)
    event = sync_event(cr.ref, mine, render_error)
    if event is not None:
        kind, reason, message = event
        emit(kube, cr.ref, str(live["metadata"].get("uid") or ""), reason=reason,
             message=message, type=kind, secrets=secrets, now=now, revision=revision)
    health_event = stalled_event(cr.ref, live, status)
    if health_event is not None:
        reason, message = health_event
        emit(kube, cr.ref, str(live["metadata"].get("uid") or ""), reason=reason,
             message=message, type="Warning", secrets=secrets, now=now, revision=revision)
    return written


def stalled_event(cr_ref: ObjRef, live: Mapping[str, Any], status: Mapping[str, Any]
                  ) -> tuple[str, str] | None:
    """(reason, message) of the Warning Event for a custom resource whose health just
    turned it Stalled (`<Kind>HealthCheckFailed`, `<Kind>HealthTimeout`): once, when the
    condition turns True or its reason changes, not at every sync while it stays."""
    def stalled(conditions: Any) -> Mapping[str, Any] | None:
        return next((c for c in conditions or [] if isinstance(c, Mapping)
                     and c.get("type") == "Stalled" and c.get("status") == "True"), None)
    now = stalled(status.get("conditions"))
    if now is None or now.get("reason") not in ("HealthCheckFailed", "HealthTimeout"):
        return None
    before = stalled((live.get("status") or {}).get("conditions"))
    if before is not None and before.get("reason") == now.get("reason"):
        return None
    return f"{cr_ref.kind}{now['reason']}", str(now.get("message") or "")


_CHANGED = (Action.CREATED, Action.CONFIGURED, Action.DELETED)


def health_report(cr: CustomResource, live: dict[str, Any], children: Sequence[RenderedObject],
                  mine: Sequence[Change], index: LiveReader, *, now: datetime,
                  refused: Sequence[str] = (), secrets: Iterable[str] = (),
                  rolled_up: Mapping[ObjRef, Health] | None = None) -> HealthReport:
    """The custom resource's health (orksync.status.health) from its rendered children as
    `index` lists them (no request of its own: the status reads the same LISTs). What the
    guard or the cluster-scope policy refused is a failed child: it was not applied. A
    child in `rolled_up` (a custom resource a `custom:` block created, its health just
    computed from its own children) takes that health."""
    secrets = list(secrets)
    timeout, problem = health_timeout(cr.entry.raw)
    if problem:
        log.warning("%s %s.%s", cr.entry.source, cr.entry.path, problem)
    actions = {c.ref: c.action for c in mine}
    assessed: list[ChildHealth] = []
    for obj in children:
        if actions.get(obj.ref) is Action.SKIPPED:
            continue
        known = (rolled_up or {}).get(obj.ref)
        if known is not None:
            assessed.append(ChildHealth(str(obj.ref), Health(known.status,
                                                             scrub(known.message, secrets))))
            continue
        try:
            found = index.get(obj.ref, MANAGED_SELECTOR)
        except ClusterError as err:
            health = Health(HealthStatus.IN_PROGRESS, f"cannot be read: {err}")
        else:
            if found is None and actions.get(obj.ref) is Action.UNCHANGED:
                # left as it was and not among orksync's objects: one that existed before
                # (create-if-absent): present, but its state is not read (no GET per object)
                health = Health(HealthStatus.CURRENT, "exists, not labelled as orksync's: "
                                "its health is not read")
            else:
                health = assess(found, now)
        assessed.append(ChildHealth(str(obj.ref), Health(health.status,
                                                         scrub(health.message, secrets))))
    for text in refused:
        ref, _, reason = text.partition(": ")
        assessed.append(ChildHealth(ref, Health(HealthStatus.FAILED,
                                                scrub(f"refused: {reason}", secrets))))
    previous = ((live.get("status") or {}).get("orksync") or {}).get("health")
    return evaluate(assessed, now=now, previous=previous if isinstance(previous, dict) else None,
                    changed=any(c.action in _CHANGED for c in mine), timeout=timeout)
