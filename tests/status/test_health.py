"""Health by kstatus rules (orksync.status.health) and the conditions it decides
(orksync.status.desired.health_conditions)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from orksync.katalog.loader import load_repository
from orksync.render.engine import templates_for
from orksync.status.desired import desired_status, health_conditions
from orksync.status.health import (
    DEFAULT_HEALTH_TIMEOUT,
    ChildHealth,
    Health,
    HealthStatus,
    assess,
    evaluate,
    health_timeout,
)
from tests.helpers import CRD, KATALOG, write_repo

NOW = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
CURRENT, PROGRESS, FAILED = HealthStatus.CURRENT, HealthStatus.IN_PROGRESS, HealthStatus.FAILED


def obj(api_version: str, kind: str, spec: dict[str, Any] | None = None,
        status: dict[str, Any] | None = None, generation: int | None = 1,
        **meta: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"apiVersion": api_version, "kind": kind,
                            "metadata": {"name": "x", "namespace": "ns", **meta}}
    if generation is not None:
        body["metadata"]["generation"] = generation
    if spec is not None:
        body["spec"] = spec
    if status is not None:
        body["status"] = status
    return body


def cond(ctype: str, status: str, reason: str = "", message: str = "",
         **extra: Any) -> dict[str, Any]:
    return {"type": ctype, "status": status, "reason": reason, "message": message, **extra}


ROLLED_OUT = {"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2,
              "readyReplicas": 2, "availableReplicas": 2,
              "conditions": [cond("Available", "True", "MinimumReplicasAvailable"),
                             cond("Progressing", "True", "NewReplicaSetAvailable")]}
DEPLOY_SPEC = {"replicas": 2, "progressDeadlineSeconds": 600}


def deployment(status: dict[str, Any] | None, **kw: Any) -> dict[str, Any]:
    return obj("apps/v1", "Deployment", DEPLOY_SPEC, status, **kw)


CASES: list[tuple[str, dict[str, Any] | None, HealthStatus, str]] = [
    # Deployment
    ("deployment without status", deployment(None), PROGRESS, "replicas: 0/2"),
    ("deployment rolled out", deployment(ROLLED_OUT), CURRENT, "rolled out"),
    ("deployment generation not observed", deployment({**ROLLED_OUT, "observedGeneration": 1},
                                                      generation=2),
     PROGRESS, "generation 2 not observed"),
    ("deployment deadline exceeded", deployment({
        "observedGeneration": 1, "replicas": 2, "updatedReplicas": 2,
        "conditions": [cond("Progressing", "False", "ProgressDeadlineExceeded",
                            'ReplicaSet "x-1" has timed out progressing.')]}),
     FAILED, "progress deadline exceeded (ProgressDeadlineExceeded: ReplicaSet"),
    ("deployment not all updated", deployment({**ROLLED_OUT, "updatedReplicas": 1}),
     PROGRESS, "updated: 1/2"),
    ("deployment old replicas left", deployment({**ROLLED_OUT, "replicas": 3}),
     PROGRESS, "pending termination: 1"),
    ("deployment not ready", deployment({**ROLLED_OUT, "readyReplicas": 1}),
     PROGRESS, "ready: 1/2"),
    ("deployment updated not available", deployment({**ROLLED_OUT, "availableReplicas": 1}),
     PROGRESS, "available: 1/2"),
    ("deployment new replicaset not available", deployment({
        **ROLLED_OUT, "conditions": [cond("Available", "True"),
                                     cond("Progressing", "True", "ReplicaSetUpdated")]}),
     PROGRESS, "new ReplicaSet not available"),
    ("deployment not available", deployment({
        **ROLLED_OUT, "conditions": [cond("Progressing", "True", "NewReplicaSetAvailable")]}),
     PROGRESS, "Deployment not Available"),
    ("deployment being deleted", deployment(ROLLED_OUT, deletionTimestamp="2025-01-01T00:00:00Z"),
     HealthStatus.TERMINATING, "being deleted"),
    # StatefulSet
    ("statefulset rolled out", obj("apps/v1", "StatefulSet", {"replicas": 2}, {
        "observedGeneration": 1, "replicas": 2, "readyReplicas": 2, "currentReplicas": 2,
        "updatedReplicas": 2, "currentRevision": "r1", "updateRevision": "r1"}),
     CURRENT, "rolled out"),
    ("statefulset not ready", obj("apps/v1", "StatefulSet", {"replicas": 2}, {
        "observedGeneration": 1, "replicas": 2, "readyReplicas": 1}), PROGRESS, "ready: 1/2"),
    ("statefulset revision rolling", obj("apps/v1", "StatefulSet", {"replicas": 1}, {
        "observedGeneration": 1, "replicas": 1, "readyReplicas": 1, "currentReplicas": 1,
        "updatedReplicas": 1, "currentRevision": "r1", "updateRevision": "r2"}),
     PROGRESS, "revision"),
    ("statefulset partition", obj("apps/v1", "StatefulSet", {
        "replicas": 3, "updateStrategy": {"rollingUpdate": {"partition": 1}}}, {
        "replicas": 3, "readyReplicas": 3, "updatedReplicas": 1}), PROGRESS, "updated: 1/2"),
    ("statefulset on delete", obj("apps/v1", "StatefulSet", {
        "updateStrategy": {"type": "OnDelete"}}, {}), CURRENT, "OnDelete"),
    # DaemonSet
    ("daemonset not observed", obj("apps/v1", "DaemonSet", {}, {}), PROGRESS, "not observed"),
    ("daemonset rolling", obj("apps/v1", "DaemonSet", {}, {
        "observedGeneration": 1, "desiredNumberScheduled": 3, "currentNumberScheduled": 3,
        "updatedNumberScheduled": 2}), PROGRESS, "updated: 2/3"),
    ("daemonset rolled out", obj("apps/v1", "DaemonSet", {}, {
        "observedGeneration": 1, "desiredNumberScheduled": 2, "currentNumberScheduled": 2,
        "updatedNumberScheduled": 2, "numberAvailable": 2, "numberReady": 2}),
     CURRENT, "2 nodes"),
    # ReplicaSet
    ("replicaset available", obj("apps/v1", "ReplicaSet", {"replicas": 1}, {
        "replicas": 1, "fullyLabeledReplicas": 1, "availableReplicas": 1,
        "readyReplicas": 1}), CURRENT, "1 replicas"),
    ("replicaset failure", obj("apps/v1", "ReplicaSet", {"replicas": 1}, {
        "conditions": [cond("ReplicaFailure", "True", "FailedCreate", "quota")]}),
     PROGRESS, "replica failure (FailedCreate: quota)"),
    # Job
    ("job complete", obj("batch/v1", "Job", {"completions": 1}, {
        "succeeded": 1, "conditions": [cond("Complete", "True")]}), CURRENT, "complete: 1/1"),
    ("job failed", obj("batch/v1", "Job", {}, {
        "failed": 6, "conditions": [cond("Failed", "True", "BackoffLimitExceeded")]}),
     FAILED, "failed: 6 pods failed (BackoffLimitExceeded)"),
    ("job not started", obj("batch/v1", "Job", {}, {}), PROGRESS, "not started"),
    ("job running", obj("batch/v1", "Job", {}, {"startTime": "2025-01-01T00:00:00Z",
                                                "active": 1}), CURRENT, "running"),
    # PVC
    ("pvc pending", obj("v1", "PersistentVolumeClaim", {}, {"phase": "Pending"}),
     PROGRESS, "not Bound (phase Pending)"),
    ("pvc bound", obj("v1", "PersistentVolumeClaim", {}, {"phase": "Bound"}), CURRENT, "Bound"),
    # Pod
    ("pod ready", obj("v1", "Pod", {}, {"phase": "Running",
                                        "conditions": [cond("Ready", "True")]}),
     CURRENT, "Ready"),
    ("pod crash loop", obj("v1", "Pod", {}, {
        "phase": "Running", "containerStatuses": [
            {"name": "app", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}),
     FAILED, "CrashLoopBackOff: app"),
    ("pod unschedulable", obj("v1", "Pod", {}, {
        "phase": "Pending", "conditions": [cond("PodScheduled", "False", "Unschedulable")]},
        creationTimestamp="2025-01-02T03:00:00Z"), FAILED, "unschedulable"),
    ("pod just unschedulable", obj("v1", "Pod", {}, {
        "phase": "Pending", "conditions": [cond("PodScheduled", "False", "Unschedulable")]},
        creationTimestamp="2025-01-02T03:04:00Z"), PROGRESS, "not scheduled yet"),
    ("pod without phase", obj("v1", "Pod", {}, {}), PROGRESS, "no phase"),
    ("pod succeeded", obj("v1", "Pod", {}, {"phase": "Succeeded"}), CURRENT, "finished"),
    # CRD
    ("crd established", obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", {}, {
        "conditions": [cond("NamesAccepted", "True"), cond("Established", "True")]}),
     CURRENT, "Established"),
    ("crd names refused", obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", {}, {
        "conditions": [cond("NamesAccepted", "False", "MultipleNamesNotAllowed", "taken")]}),
     FAILED, "names not accepted (MultipleNamesNotAllowed: taken)"),
    ("crd installing", obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", {}, {
        "conditions": [cond("Established", "False", "Installing")]}),
     PROGRESS, "not Established yet"),
    # a kind with a Ready condition and observedGeneration
    ("ready true", obj("example.io/v1", "Thing", {}, {
        "observedGeneration": 1, "conditions": [cond("Ready", "True", "Done", "all good")]}),
     CURRENT, "all good"),
    ("ready false, observed", obj("example.io/v1", "Thing", {}, {
        "observedGeneration": 1, "conditions": [cond("Ready", "False", "Broken", "bad key")]}),
     FAILED, "not Ready (Broken: bad key)"),
    ("ready false, condition observed", obj("example.io/v1", "Thing", {}, {
        "conditions": [cond("Ready", "False", "Broken", observedGeneration=1)]}),
     FAILED, "not Ready (Broken)"),
    ("ready false, not observed", obj("example.io/v1", "Thing", {}, {
        "conditions": [cond("Ready", "False", "Waiting")]}), PROGRESS, "not Ready yet"),
    ("ready unknown", obj("example.io/v1", "Thing", {}, {
        "observedGeneration": 1, "conditions": [cond("Ready", "Unknown")]}),
     PROGRESS, "not Ready yet"),
    ("reconciling", obj("example.io/v1", "Thing", {}, {
        "conditions": [cond("Ready", "False"), cond("Reconciling", "True", "Progressing",
                                                     "Deployment/ns/a: ready: 0/1")]}),
     PROGRESS, "Deployment/ns/a: ready: 0/1"),
    ("stalled", obj("example.io/v1", "Thing", {}, {
        "conditions": [cond("Stalled", "True", "HealthCheckFailed", "it broke")]}),
     FAILED, "it broke"),
    # generic
    ("configmap", obj("v1", "ConfigMap", None, None, generation=None), CURRENT, ""),
    ("service", obj("v1", "Service", {"type": "ClusterIP"}, {}), CURRENT, ""),
    ("load balancer without ip", obj("v1", "Service", {"type": "LoadBalancer"}, {}),
     PROGRESS, "no cluster IP"),
    ("not found", None, HealthStatus.NOT_FOUND, "not found"),
]


@pytest.mark.parametrize(("live", "status", "message"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_assess(live: dict[str, Any] | None, status: HealthStatus, message: str) -> None:
    health = assess(live, NOW)
    assert health.status is status, health
    assert message in health.message, health


def child(ref: str, status: HealthStatus, message: str = "") -> ChildHealth:
    return ChildHealth(ref, Health(status, message))


def test_evaluate_names_the_failed_child_first() -> None:
    report = evaluate([child("Service/ns/a", CURRENT),
                       child("Deployment/ns/b", PROGRESS, "ready: 0/1"),
                       child("Deployment/ns/c", FAILED, "progress deadline exceeded")],
                      now=NOW, previous=None, changed=False, timeout=DEFAULT_HEALTH_TIMEOUT)
    assert report.reason == "Failed" and report.health.status is FAILED
    assert report.health.message == "Deployment/ns/c: Failed: progress deadline exceeded"
    assert report.since == NOW


def test_evaluate_counts_the_timeout_from_the_first_sync_not_current() -> None:
    children = [child("Deployment/ns/b", PROGRESS, "ready: 0/1"),
                child("Deployment/ns/d", PROGRESS, "ready: 0/2")]
    first = evaluate(children, now=NOW, previous=None, changed=True, timeout=timedelta(minutes=5))
    assert first.reason == "Progressing" and first.since == NOW
    assert first.health.message == "Deployment/ns/b: InProgress: ready: 0/1 (and 1 more)"
    previous = first.to_status(lambda t: t.isoformat())
    later = evaluate(children, now=NOW + timedelta(minutes=4), previous=previous,
                     changed=False, timeout=timedelta(minutes=5))
    assert later.reason == "Progressing" and later.since == NOW
    timed_out = evaluate(children, now=NOW + timedelta(minutes=5), previous=previous,
                         changed=False, timeout=timedelta(minutes=5))
    assert timed_out.reason == "HealthTimeout" and timed_out.health.status is FAILED
    assert timed_out.health.message.startswith("not healthy after 5m: Deployment/ns/b")
    # a new change starts a new rollout: the clock starts again
    changed = evaluate(children, now=NOW + timedelta(minutes=6), previous=previous,
                       changed=True, timeout=timedelta(minutes=5))
    assert changed.reason == "Progressing" and changed.since == NOW + timedelta(minutes=6)
    # no timeout at all
    never = evaluate(children, now=NOW + timedelta(days=3), previous=previous, changed=False,
                     timeout=timedelta(0))
    assert never.reason == "Progressing"


def test_evaluate_current() -> None:
    report = evaluate([child("Service/ns/a", CURRENT)], now=NOW,
                      previous={"status": "InProgress", "since": "2025-01-01T00:00:00+00:00"},
                      changed=False, timeout=DEFAULT_HEALTH_TIMEOUT)
    assert report.reason == "Current" and report.since is None
    assert "since" not in report.to_status(str)
    assert health_conditions(report) == {}


@pytest.mark.parametrize(("raw", "expected", "problem"), [
    ({}, DEFAULT_HEALTH_TIMEOUT, ""),
    ({"healthTimeout": "10m"}, timedelta(minutes=10), ""),
    ({"healthTimeout": "0"}, timedelta(0), ""),
    ({"healthTimeout": "soon"}, DEFAULT_HEALTH_TIMEOUT, "healthTimeout: "),
])
def test_health_timeout(raw: dict[str, Any], expected: timedelta, problem: str) -> None:
    timeout, text = health_timeout(raw)
    assert timeout == expected
    assert text.startswith(problem) and bool(text) == bool(problem)


def test_conditions_follow_the_health(tmp_path: Any) -> None:
    catalog = load_repository(write_repo(tmp_path, {"katalog.yaml": KATALOG, "crd.yaml": CRD}))
    entry = catalog.katalogs[0].crds[0]
    templates = templates_for(catalog.katalogs[0], lambda: NOW)
    cr = {"apiVersion": "test.orksync.io/v1", "kind": "Widget",
          "metadata": {"name": "w", "namespace": "ns", "generation": 3}}

    def conditions(children: list[ChildHealth]) -> dict[str, tuple[str, str, str]]:
        report = evaluate(children, now=NOW, previous=None, changed=False,
                          timeout=DEFAULT_HEALTH_TIMEOUT)
        status = desired_status(cr, entry, templates, [], revision="r1", render_error=None,
                                now=NOW, health=report)
        assert status["orksync"]["health"]["status"] == report.health.status.value
        return {c["type"]: (c["status"], c["reason"], c["message"])
                for c in status["conditions"]}

    progressing = conditions([child("Deployment/ns/w", PROGRESS, "ready: 0/2")])
    assert progressing["Ready"] == ("False", "Progressing",
                                    "Deployment/ns/w: InProgress: ready: 0/2")
    assert progressing["Reconciling"][:2] == ("True", "Progressing")
    assert progressing["Stalled"][0] == "False"
    failed = conditions([child("Deployment/ns/w", FAILED, "progress deadline exceeded")])
    assert failed["Ready"][:2] == ("False", "HealthCheckFailed")
    assert failed["Stalled"] == ("True", "HealthCheckFailed",
                                 "Deployment/ns/w: Failed: progress deadline exceeded")
    assert failed["Reconciling"][0] == "False"
    current = conditions([child("Deployment/ns/w", CURRENT)])
    assert current["Ready"] == ("True", "ReconcileSucceeded", "applied revision r1")
    assert current["Reconciling"][0] == "False" and current["Stalled"][0] == "False"


def test_a_health_timeout_that_is_not_a_duration_is_refused_with_file_line_and_field(
        tmp_path: Any) -> None:
    katalog = KATALOG.replace("      operatorBox:\n", "      healthTimeout: soon\n"
                              "      operatorBox:\n", 1)
    catalog = load_repository(write_repo(tmp_path, {"katalog.yaml": katalog, "crd.yaml": CRD}))
    (error,) = catalog.errors
    assert str(error).startswith("katalog.yaml:8 Katalog/widgets spec.crds.widget.healthTimeout: "
                                 "not a duration: "), str(error)


def test_a_render_failure_keeps_the_last_recorded_health(tmp_path: Any) -> None:
    catalog = load_repository(write_repo(tmp_path, {"katalog.yaml": KATALOG, "crd.yaml": CRD}))
    entry = catalog.katalogs[0].crds[0]
    templates = templates_for(catalog.katalogs[0], lambda: NOW)
    before = {"status": "InProgress", "reason": "Progressing", "since": "2025-01-01T00:00:00Z",
              "message": "Deployment/ns/w: InProgress: ready: 0/2",
              "children": [{"object": "Deployment/ns/w", "status": "InProgress",
                            "message": "ready: 0/2"}]}
    cr = {"apiVersion": "test.orksync.io/v1", "kind": "Widget",
          "metadata": {"name": "w", "namespace": "ns", "generation": 3},
          "status": {"orksync": {"health": before}}}
    nothing = evaluate([], now=NOW, previous=before, changed=False,
                       timeout=DEFAULT_HEALTH_TIMEOUT)
    status = desired_status(cr, entry, templates, [], revision="r2",
                            render_error="w.yaml:3 Widget/ns/w spec.image: required", now=NOW,
                            health=nothing)
    assert status["orksync"]["health"] == before
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["reason"] == "ReconcileError"
