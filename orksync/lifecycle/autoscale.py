"""Workload `autoscale:`: sets `spec.replicas` of a Deployment, StatefulSet or ReplicaSet
under its own field manager, so the workload's apply never resets it. I/O around the pure
`decide` (docs/operations.md#workload-autoscale)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from orksync.apply.impersonation import Identities
from orksync.cluster.kube import Kube
from orksync.cluster.live import LiveIndex, rfc3339
from orksync.errors import ClusterError
from orksync.model import MANAGED_SELECTOR, Action, Change, ChangeSet, RenderedObject

__all__ = ["FIELD_MANAGER", "LAST_SCALE_ANNOTATION", "Autoscaler", "Decision", "decide",
           "merge_changes", "owns_replicas"]

log = logging.getLogger(__name__)

FIELD_MANAGER = "orksync-autoscale"
LAST_SCALE_ANNOTATION = "orkestra.orkspace.io/last-scale-event"


@dataclass(frozen=True, slots=True)
class Decision:
    replicas: int
    scaled: bool  # a scale event: stamp the annotation, start the cooldown
    reason: str


def decide(spec: Mapping[str, Any], current: int, *, owned: bool,
           last_scale: datetime | None, now: datetime) -> Decision:
    """The replica count for one workload (see the module doc)."""
    low, high = int(spec["min"]), int(spec["max"])
    if not owned:
        start = min(max(current, low), high)
        return Decision(start, False, "taken over by the autoscaler")
    if current < low or current > high:
        bound = low if current < low else high
        return Decision(bound, False, f"outside [{low}, {high}]")
    cooldown = timedelta(seconds=float(spec.get("cooldownSeconds", 60)))
    if last_scale is not None and now - last_scale < cooldown:
        return Decision(current, False, "cooling down")
    up = spec.get("scaleUp") or {}
    if up.get("active") and current < high:
        wanted = min(int(up["target"]) if "target" in up else
                     current + int(up.get("increment", 1)), high)
        if wanted > current:
            return Decision(wanted, True, "scale up")
    down = spec.get("scaleDown") or {}
    if down.get("active") and current > low:
        wanted = max(int(down["target"]) if "target" in down else
                     current - int(down.get("decrement", 1)), low)
        if wanted < current:
            return Decision(wanted, True, "scale down")
    return Decision(current, False, "steady")


def owns_replicas(live: Mapping[str, Any]) -> bool:
    """Whether `orksync-autoscale` holds `spec.replicas` (its managedFields entry)."""
    for entry in (live.get("metadata") or {}).get("managedFields") or []:
        if entry.get("manager") == FIELD_MANAGER and entry.get("operation") == "Apply":
            spec = (entry.get("fieldsV1") or {}).get("f:spec") or {}
            if "f:replicas" in spec:
                return True
    return False


def _last_scale(live: Mapping[str, Any]) -> datetime | None:
    text = ((live.get("metadata") or {}).get("annotations") or {}).get(LAST_SCALE_ANNOTATION)
    if not text:
        return None
    try:
        when = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


class Autoscaler:
    """The autoscaled workloads of one sync and their replica writes."""

    def __init__(self, kube: Kube, objects: Iterable[RenderedObject], *,
                 now: Callable[[], datetime], dry_run: bool = False,
                 on_change: Callable[[Change], None] | None = None,
                 identities: Identities | None = None) -> None:
        """`identities`: as whom each workload is scaled (its owner's ServiceAccount;
        orksync.apply.impersonation); None: as `kube`."""
        self.kube = kube
        self.identities = identities
        self.objects = [o for o in objects if isinstance(o.directives.get("autoscale"),
                                                         Mapping)]
        self.now = now
        self.dry_run = dry_run
        self.on_change = on_change or (lambda change: None)
        self.pending: list[RenderedObject] = []

    def before_apply(self) -> list[Change]:
        """Decide for the workloads that exist; remember the others for after_apply."""
        if not self.objects:
            return []
        index = LiveIndex(self.kube)
        changes: list[Change] = []
        for obj in self.objects:
            live = index.get(obj.ref, MANAGED_SELECTOR)
            if live is None:
                self.pending.append(obj)
                continue
            changes.extend(self._scale(obj, live))
        return changes

    def after_apply(self, applied: ChangeSet) -> list[Change]:
        """Decide for the workloads created by this sync's apply."""
        ok = {c.ref for c in applied.changes if c.action in (Action.CREATED, Action.CONFIGURED,
                                                               Action.UNCHANGED)}
        todo = [o for o in self.pending if o.ref in ok]
        if not todo or self.dry_run:
            return []
        index = LiveIndex(self.kube)
        changes: list[Change] = []
        for obj in todo:
            live = index.get(obj.ref, MANAGED_SELECTOR)
            if live is not None:
                changes.extend(self._scale(obj, live, created=True))
        return changes

    def _scale(self, obj: RenderedObject, live: Mapping[str, Any], *,
               created: bool = False) -> list[Change]:
        spec = obj.directives["autoscale"]
        raw = (live.get("spec") or {}).get("replicas")
        count = raw if isinstance(raw, int) else 1
        owned = owns_replicas(live)
        # a workload this sync created runs the API server's default until taken over
        start = int(spec.get("replicas", count)) if created and not owned else count
        now = self.now()
        decision = decide(spec, start, owned=owned, last_scale=_last_scale(live), now=now)
        if owned and decision.replicas == count and not decision.scaled:
            return []
        annotations = (live.get("metadata") or {}).get("annotations") or {}
        stamp = rfc3339(now) if decision.scaled else annotations.get(LAST_SCALE_ANNOTATION)
        message = f"autoscale: replicas {count} -> {decision.replicas} ({decision.reason})"
        if self.dry_run:
            message += " (dry run)"
        else:
            try:
                self._write(obj, decision.replicas, stamp)
            except ClusterError as err:
                change = Change(ref=obj.ref, action=Action.FAILED,
                                message=f"autoscale: {err.detail}")
                self.on_change(change)
                return [change]
        if decision.replicas == count and not decision.scaled:
            log.debug("%s: %s", obj.ref, message)
            return []  # the count was taken over as it is: nothing changed
        change = Change(ref=obj.ref, action=Action.CONFIGURED, message=message)
        self.on_change(change)
        return [change]

    def _write(self, obj: RenderedObject, replicas: int, stamp: str | None) -> None:
        ref = obj.ref
        kube = self.identities.kube_for(obj.owner) if self.identities is not None else \
            self.kube
        meta: dict[str, Any] = {"name": ref.name, "namespace": ref.namespace}
        if stamp:
            meta["annotations"] = {LAST_SCALE_ANNOTATION: stamp}
        body = {"apiVersion": ref.api_version, "kind": ref.kind, "metadata": meta,
                "spec": {"replicas": replicas}}
        kube.apply(self.kube.resource(ref.api_version, ref.kind), body,
                   field_manager=FIELD_MANAGER, force=True, subject=str(ref),
                   metadata_only=True)


def merge_changes(applied: ChangeSet, scaled: Sequence[Change]) -> ChangeSet:
    """The apply's changes with the autoscaler's folded in: one change per object (an
    unchanged workload that was scaled is `configured`, with the scale as its message; a
    failed scale is a failure)."""
    by_ref = {c.ref: c for c in scaled}
    out = ChangeSet()
    for change in applied.changes:
        extra = by_ref.pop(change.ref, None)
        if extra is None or change.action is Action.FAILED:
            out.changes.append(change)
            continue
        action = extra.action if extra.action is Action.FAILED or \
            change.action is Action.UNCHANGED else change.action
        message = "; ".join(m for m in (change.message, extra.message) if m)
        out.changes.append(Change(ref=change.ref, action=action, message=message))
    out.changes.extend(by_ref.values())
    return out
