"""Health of live objects by kstatus rules (`assess`), and of a custom resource from its
children (`summarize`, `evaluate`): the rules kstatus (sigs.k8s.io/cli-utils/pkg/kstatus)
applies per kind, so a custom resource turns Ready when its rollout finished. Pure; the
rules per kind are tabled in docs/operations.md#custom-resource-health."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

__all__ = ["DEFAULT_HEALTH_TIMEOUT", "HEALTH_TIMEOUT_FIELD", "ChildHealth", "Health",
           "HealthReport", "HealthStatus", "assess", "children_health", "evaluate",
           "health_timeout", "summarize"]

HEALTH_TIMEOUT_FIELD = "healthTimeout"  # spec.crds.<key>.healthTimeout
DEFAULT_HEALTH_TIMEOUT = timedelta(minutes=5)
SCHEDULE_WINDOW = timedelta(seconds=15)  # a Pod unschedulable this long: Failed
PROGRESS_DEADLINE_UNSET = 2**31 - 1  # the Deployment controller's "no deadline"


class HealthStatus(StrEnum):
    CURRENT = "Current"
    IN_PROGRESS = "InProgress"
    FAILED = "Failed"
    TERMINATING = "Terminating"
    NOT_FOUND = "NotFound"


@dataclass(frozen=True, slots=True)
class Health:
    status: HealthStatus
    message: str = ""

    @property
    def current(self) -> bool:
        return self.status is HealthStatus.CURRENT


@dataclass(frozen=True, slots=True)
class ChildHealth:
    """One child (`str(ObjRef)`) and its health."""

    ref: str
    health: Health


def _int(obj: Mapping[str, Any], path: str, default: int) -> int:
    node: Any = obj
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return default
        node = node[part]
    if isinstance(node, bool):
        return default
    if isinstance(node, int):
        return node
    try:
        return int(str(node))
    except ValueError:
        return default


def _str(obj: Mapping[str, Any], path: str, default: str = "") -> str:
    node: Any = obj
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return default
        node = node[part]
    return default if node is None else str(node)


def _conditions(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    status = obj.get("status")
    raw = status.get("conditions") if isinstance(status, Mapping) else None
    return [c for c in raw or [] if isinstance(c, Mapping)]


def _condition(obj: Mapping[str, Any], ctype: str) -> Mapping[str, Any] | None:
    return next((c for c in _conditions(obj) if c.get("type") == ctype), None)


def _progress(message: str) -> Health:
    return Health(HealthStatus.IN_PROGRESS, message)


def _failed(message: str) -> Health:
    return Health(HealthStatus.FAILED, message)


def _current(message: str = "") -> Health:
    return Health(HealthStatus.CURRENT, message)


def _with_message(prefix: str, cond: Mapping[str, Any]) -> str:
    reason = str(cond.get("reason") or "")
    message = str(cond.get("message") or "")
    detail = ": ".join(p for p in (reason, message) if p)
    return f"{prefix} ({detail})" if detail else prefix


# --- generic rules ----------------------------------------------------------------------

def _generic(obj: Mapping[str, Any]) -> Health | None:
    meta = obj.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return Health(HealthStatus.TERMINATING, "being deleted")
    generation = meta.get("generation")
    status = obj.get("status")
    observed = status.get("observedGeneration") if isinstance(status, Mapping) else None
    if generation is not None and observed is not None and observed != generation:
        return _progress(f"generation {generation} not observed yet (observed {observed})")
    for cond in _conditions(obj):
        if cond.get("type") == "Reconciling" and cond.get("status") == "True":
            return _progress(str(cond.get("message") or cond.get("reason") or "reconciling"))
        if cond.get("type") == "Stalled" and cond.get("status") == "True":
            return _failed(str(cond.get("message") or cond.get("reason") or "stalled"))
    return None


def _ready_condition(obj: Mapping[str, Any]) -> Health | None:
    cond = _condition(obj, "Ready")
    if cond is None:
        return None
    value = cond.get("status")
    if value == "True":
        return _current(str(cond.get("message") or "Ready"))
    if value == "False":
        generation = (obj.get("metadata") or {}).get("generation")
        status = obj.get("status") or {}
        observed = cond.get("observedGeneration", status.get("observedGeneration"))
        if generation is not None and observed == generation:
            return _failed(_with_message("not Ready", cond))
    return _progress(_with_message("not Ready yet", cond))


# --- per kind ---------------------------------------------------------------------------

def _deployment(obj: Mapping[str, Any]) -> Health:
    rolled_out = _int(obj, "spec.progressDeadlineSeconds",
                      PROGRESS_DEADLINE_UNSET) == PROGRESS_DEADLINE_UNSET
    available = False
    for cond in _conditions(obj):
        if cond.get("type") == "Progressing":
            if cond.get("reason") == "ProgressDeadlineExceeded":
                return _failed(_with_message("progress deadline exceeded", cond))
            if cond.get("status") == "True" and cond.get("reason") == "NewReplicaSetAvailable":
                rolled_out = True
        elif cond.get("type") == "Available" and cond.get("status") == "True":
            available = True
    spec = _int(obj, "spec.replicas", 1)
    replicas = _int(obj, "status.replicas", 0)
    updated = _int(obj, "status.updatedReplicas", 0)
    ready = _int(obj, "status.readyReplicas", 0)
    avail = _int(obj, "status.availableReplicas", 0)
    if spec > replicas:
        return _progress(f"replicas: {replicas}/{spec}")
    if spec > updated:
        return _progress(f"updated: {updated}/{spec}")
    if replicas > spec:
        return _progress(f"pending termination: {replicas - spec}")
    if updated > avail:
        return _progress(f"available: {avail}/{updated}")
    if spec > ready:
        return _progress(f"ready: {ready}/{spec}")
    if not rolled_out:
        return _progress("new ReplicaSet not available yet")
    if not available:
        return _progress("Deployment not Available")
    return _current(f"rolled out, {replicas} replicas available")


def _statefulset(obj: Mapping[str, Any]) -> Health:
    if _str(obj, "spec.updateStrategy.type") == "OnDelete":
        return _current("OnDelete update strategy")
    spec = _int(obj, "spec.replicas", 1)
    replicas = _int(obj, "status.replicas", 0)
    ready = _int(obj, "status.readyReplicas", 0)
    current = _int(obj, "status.currentReplicas", 0)
    updated = _int(obj, "status.updatedReplicas", 0)
    partition = _int(obj, "spec.updateStrategy.rollingUpdate.partition", -1)
    if spec > replicas:
        return _progress(f"replicas: {replicas}/{spec}")
    if spec > ready:
        return _progress(f"ready: {ready}/{spec}")
    if replicas > spec:
        return _progress(f"pending termination: {replicas - spec}")
    if partition != -1:
        if updated < spec - partition:
            return _progress(f"updated: {updated}/{spec - partition} (partition {partition})")
        return _current(f"partition rolled out, {updated} updated")
    if spec > current:
        return _progress(f"current: {current}/{spec}")
    if _str(obj, "status.currentRevision") != _str(obj, "status.updateRevision"):
        return _progress("current revision differs from the update revision")
    return _current(f"rolled out, {replicas} replicas ready")


def _daemonset(obj: Mapping[str, Any]) -> Health:
    if (obj.get("metadata") or {}).get("generation") is None or \
            _int(obj, "status.observedGeneration", -1) == -1:
        return _progress("not observed by its controller yet")
    desired = _int(obj, "status.desiredNumberScheduled", -1)
    if desired == -1:
        return _progress("no desiredNumberScheduled yet")
    for field, label in (("currentNumberScheduled", "scheduled"),
                         ("updatedNumberScheduled", "updated"),
                         ("numberAvailable", "available"), ("numberReady", "ready")):
        have = _int(obj, f"status.{field}", 0)
        if desired > have:
            return _progress(f"{label}: {have}/{desired}")
    return _current(f"rolled out on {desired} nodes")


def _replicaset(obj: Mapping[str, Any]) -> Health:
    failure = _condition(obj, "ReplicaFailure")
    if failure is not None and failure.get("status") == "True":
        return _progress(_with_message("replica failure", failure))
    spec = _int(obj, "spec.replicas", 1)
    for field, label in (("fullyLabeledReplicas", "labelled"),
                         ("availableReplicas", "available"), ("readyReplicas", "ready")):
        have = _int(obj, f"status.{field}", 0)
        if spec > have:
            return _progress(f"{label}: {have}/{spec}")
    replicas = _int(obj, "status.replicas", 0)
    if replicas > spec:
        return _progress(f"pending termination: {replicas - spec}")
    return _current(f"{replicas} replicas available")


def _job(obj: Mapping[str, Any]) -> Health:
    parallelism = _int(obj, "spec.parallelism", 1)
    completions = _int(obj, "spec.completions", parallelism)
    succeeded = _int(obj, "status.succeeded", 0)
    failed = _int(obj, "status.failed", 0)
    for cond in _conditions(obj):
        if cond.get("status") != "True":
            continue
        if cond.get("type") == "Complete":
            return _current(f"complete: {succeeded}/{completions} succeeded")
        if cond.get("type") == "Failed":
            return _failed(_with_message(f"failed: {failed} pods failed", cond))
        if cond.get("type") == "Suspended":
            return _current("suspended")
    if not _str(obj, "status.startTime"):
        return _progress("not started")
    return _current(f"running: {succeeded}/{completions} succeeded, "
                    f"{_int(obj, 'status.active', 0)} active, {failed} failed")


def _pvc(obj: Mapping[str, Any]) -> Health:
    phase = _str(obj, "status.phase", "unknown")
    if phase != "Bound":
        return _progress(f"not Bound (phase {phase})")
    return _current("Bound")


def _pod(obj: Mapping[str, Any], now: datetime | None) -> Health:
    phase = _str(obj, "status.phase")
    if phase in ("Succeeded", "Failed"):
        return _current(f"finished ({phase})")
    if phase == "Running":
        ready = _condition(obj, "Ready")
        if ready is not None and ready.get("status") == "True":
            return _current("Ready")
        statuses = (obj.get("status") or {}).get("containerStatuses") or []
        looping = [str(s.get("name")) for s in statuses if isinstance(s, Mapping) and
                   ((s.get("state") or {}).get("waiting") or {}).get("reason")
                   == "CrashLoopBackOff"]
        if looping:
            return _failed(f"containers in CrashLoopBackOff: {', '.join(looping)}")
        return _progress("running, not Ready")
    if phase == "Pending":
        scheduled = _condition(obj, "PodScheduled")
        if scheduled is not None and scheduled.get("status") == "False" and \
                scheduled.get("reason") == "Unschedulable":
            created = _time(_str(obj, "metadata.creationTimestamp"))
            if now is not None and created is not None and now - created > SCHEDULE_WINDOW:
                return _failed(_with_message("unschedulable", scheduled))
            return _progress("not scheduled yet")
        return _progress("Pending")
    return _progress(f"phase {phase}" if phase else "no phase yet")


def _crd(obj: Mapping[str, Any]) -> Health:
    for cond in _conditions(obj):
        if cond.get("type") == "NamesAccepted" and cond.get("status") == "False":
            return _failed(_with_message("names not accepted", cond))
        if cond.get("type") == "Established":
            if cond.get("status") == "True":
                return _current("Established")
            if cond.get("status") == "False" and cond.get("reason") != "Installing":
                return _failed(_with_message("not Established", cond))
    return _progress("not Established yet")


def _service(obj: Mapping[str, Any]) -> Health:
    if _str(obj, "spec.type", "ClusterIP") == "LoadBalancer" and not _str(obj, "spec.clusterIP"):
        return _progress("no cluster IP yet")
    return _current()


def _time(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


_KINDS = {
    ("apps", "Deployment"): _deployment,
    ("apps", "StatefulSet"): _statefulset,
    ("apps", "DaemonSet"): _daemonset,
    ("apps", "ReplicaSet"): _replicaset,
    ("batch", "Job"): _job,
    ("", "PersistentVolumeClaim"): _pvc,
    ("apiextensions.k8s.io", "CustomResourceDefinition"): _crd,
    ("", "Service"): _service,
}


def assess(live: Mapping[str, Any] | None, now: datetime | None = None) -> Health:
    """One live object's health (see the module doc); None (not found): NotFound.
    `now` decides only whether a Pending Pod has been unschedulable for too long."""
    if live is None:
        return Health(HealthStatus.NOT_FOUND, "not found")
    generic = _generic(live)
    if generic is not None:
        return generic
    group = str(live.get("apiVersion") or "").rpartition("/")[0]
    kind = str(live.get("kind") or "")
    if (group, kind) == ("", "Pod"):
        return _pod(live, now)
    rule = _KINDS.get((group, kind))
    if rule is not None:
        return rule(live)
    return _ready_condition(live) or _current()


# --- a custom resource from its children ---------------------------------------------------

def health_timeout(entry_raw: Mapping[str, Any]) -> tuple[timedelta, str]:
    """The health timeout of a CRD entry (`spec.crds.<key>.healthTimeout`, a duration;
    `0` or `never`: none) and a problem text ("" when fine; the default is used then)."""
    from orksync.durations import parse_duration

    raw = entry_raw.get(HEALTH_TIMEOUT_FIELD)
    if raw is None:
        return DEFAULT_HEALTH_TIMEOUT, ""
    try:
        return parse_duration(str(raw)), ""
    except ValueError as err:
        return DEFAULT_HEALTH_TIMEOUT, (f"{HEALTH_TIMEOUT_FIELD}: {err}; the default "
                                        f"{_minutes(DEFAULT_HEALTH_TIMEOUT)} is used")


def _minutes(span: timedelta) -> str:
    seconds = int(span.total_seconds())
    if seconds % 60 == 0:
        return f"{seconds // 60}m"
    return f"{seconds}s"


_ORDER = {HealthStatus.FAILED: 0, HealthStatus.IN_PROGRESS: 1, HealthStatus.TERMINATING: 1,
          HealthStatus.NOT_FOUND: 1, HealthStatus.CURRENT: 2}


def summarize(children: Sequence[ChildHealth], *, now: datetime, since: datetime | None,
              timeout: timedelta) -> tuple[Health, str]:
    """The health of a custom resource from its children's, and the reason for its
    conditions: `Failed` (a child failed), `HealthTimeout` (a child still not Current
    `timeout` after `since`; a zero timeout never passes), `Progressing`, or `Current`.
    The message names the first child in that state and its reason, then `(and N more)`."""
    worst = sorted(children, key=lambda c: (_ORDER[c.health.status], c.ref))
    if not worst or worst[0].health.current:
        return _current(f"{len(children)} objects current"), "Current"
    first = worst[0]
    same = [c for c in worst if _ORDER[c.health.status] == _ORDER[first.health.status]]
    more = f" (and {len(same) - 1} more)" if len(same) > 1 else ""
    text = f"{first.ref}: {first.health.status.value}"
    if first.health.message:
        text += f": {first.health.message}"
    if first.health.status is HealthStatus.FAILED:
        return _failed(text + more), "Failed"
    if timeout > timedelta(0) and since is not None and now - since >= timeout:
        return _failed(f"not healthy after {_minutes(timeout)}: {text}{more}"), "HealthTimeout"
    return _progress(text + more), "Progressing"


def children_health(live_children: Iterable[tuple[str, Mapping[str, Any] | None]],
                    now: datetime | None = None) -> list[ChildHealth]:
    """(`str(ref)`, live object or None) pairs assessed, in the given order."""
    return [ChildHealth(ref, assess(live, now)) for ref, live in live_children]


MAX_REPORTED_CHILDREN = 100  # children listed in status.orksync.health, worst first
MAX_CHILD_MESSAGE = 256


@dataclass(frozen=True, slots=True)
class HealthReport:
    """A custom resource's health as its status records it (`status.orksync.health`)."""

    health: Health
    reason: str  # Current, Progressing, Failed, HealthTimeout
    since: datetime | None  # when it stopped being Current (the timeout counts from it)
    children: tuple[ChildHealth, ...]

    def to_status(self, stamp: Any) -> dict[str, Any]:
        """The `status.orksync.health` map; `stamp` formats a time (rfc3339)."""
        worst = sorted(self.children, key=lambda c: (_ORDER[c.health.status], c.ref))
        out: dict[str, Any] = {"status": self.health.status.value, "reason": self.reason,
                               "message": self.health.message}
        if self.since is not None:
            out["since"] = stamp(self.since)
        out["children"] = [{"object": c.ref, "status": c.health.status.value,
                            "message": c.health.message[:MAX_CHILD_MESSAGE]}
                           for c in worst[:MAX_REPORTED_CHILDREN]]
        if len(worst) > MAX_REPORTED_CHILDREN:
            out["childrenOmitted"] = len(worst) - MAX_REPORTED_CHILDREN
        return out


def evaluate(children: Sequence[ChildHealth], *, now: datetime,
             previous: Mapping[str, Any] | None, changed: bool,
             timeout: timedelta) -> HealthReport:
    """The custom resource's health report. The timeout counts from `since`: kept from
    the `previous` report (its `status.orksync.health`) while the custom resource stays
    not Current and this sync changed none of its objects; `now` when it stops being
    Current or a change was just applied (a new rollout starts)."""
    not_current = any(not c.health.current for c in children)
    since: datetime | None = None
    if not_current:
        prior = previous or {}
        kept = _time(str(prior.get("since") or "")) \
            if prior.get("status") not in (None, HealthStatus.CURRENT.value) else None
        since = now if changed or kept is None else kept
    health, reason = summarize(children, now=now, since=since, timeout=timeout)
    return HealthReport(health=health, reason=reason, since=since, children=tuple(children))
