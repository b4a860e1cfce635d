"""A custom resource's conditions follow its children's health (orksync.status.health) on
the real control plane; the Deployment's status is written by the test, as the deployment
controller would (none runs here)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from orksync.apply.engine import Applier
from orksync.cluster.kube import Kube
from orksync.katalog.loader import load_repository
from orksync.lifecycle.events import report_sync
from orksync.model import ObjRef
from orksync.render.engine import render_catalog
from testbed.controlplane import ControlPlane
from tests.helpers import CRD, KATALOG, widget, write_repo
from tests.workload_status import deadline_exceeded, rolled_out, write_status

pytestmark = pytest.mark.cluster

T0 = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


def sync(kube: Kube, repo: Path, now: datetime) -> None:
    catalog = load_repository(repo)
    rendered = render_catalog(catalog)
    changes = Applier(kube).apply(rendered)
    assert not changes.failed
    report_sync(kube, catalog, rendered, changes, revision="rev1", now=now)


def conditions(kube: Kube, ref: ObjRef) -> dict[str, tuple[str, str, str]]:
    cr = kube.get(kube.resource(ref.api_version, ref.kind), ref.namespace, ref.name)
    return {c["type"]: (c["status"], c["reason"], c["message"])
            for c in cr["status"]["conditions"]}


def health(kube: Kube, ref: ObjRef) -> dict[str, Any]:
    cr = kube.get(kube.resource(ref.api_version, ref.kind), ref.namespace, ref.name)
    return dict(cr["status"]["orksync"]["health"])


def health_events(kube: Kube, ref: ObjRef) -> list[dict[str, Any]]:
    return [e for e in kube.list(kube.resource("v1", "Event"), namespace=ref.namespace)
            if e.get("involvedObject", {}).get("name") == ref.name
            and str(e.get("reason", "")).startswith(f"{ref.kind}Health")]


def setup(control_plane: ControlPlane, tmp_path: Path, katalog: str = KATALOG
          ) -> tuple[Kube, Path, ObjRef, ObjRef]:
    ns = f"t-{uuid.uuid4().hex[:8]}"
    repo = write_repo(tmp_path, {"katalog.yaml": katalog, "crd.yaml": CRD,
                                 "w.yaml": widget("w", ns, image="nginx", replicas=2,
                                                  port=8080)})
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    cr = ObjRef(api_version="test.orksync.io/v1", kind="Widget", namespace=ns, name="w")
    deploy = ObjRef(api_version="apps/v1", kind="Deployment", namespace=ns, name="w")
    return kube, repo, cr, deploy


def test_a_deployment_past_its_progress_deadline_stalls_its_custom_resource(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    kube, repo, cr, deploy = setup(control_plane, tmp_path)

    # applied, not rolled out yet: Reconciling, not Ready, naming the Deployment
    sync(kube, repo, T0)
    cond = conditions(kube, cr)
    assert cond["Ready"] == ("False", "Progressing",
                             f"Deployment/{cr.namespace}/w: InProgress: replicas: 0/2")
    assert cond["Reconciling"][:2] == ("True", "Progressing")
    assert cond["Stalled"][0] == "False"

    # the controller gives up: Stalled, naming the Deployment and the reason
    write_status(kube, deploy, deadline_exceeded(2, "w"))
    sync(kube, repo, T0 + timedelta(minutes=1))
    cond = conditions(kube, cr)
    assert cond["Stalled"][:2] == ("True", "HealthCheckFailed")
    assert cond["Stalled"][2].startswith(
        f"Deployment/{cr.namespace}/w: Failed: progress deadline exceeded "
        '(ProgressDeadlineExceeded: ReplicaSet "w-5d9c7b" has timed out progressing.)')
    assert cond["Ready"][:2] == ("False", "HealthCheckFailed")
    assert cond["Reconciling"][0] == "False"
    children = {c["object"]: c["status"] for c in health(kube, cr)["children"]}
    assert children == {f"Deployment/{cr.namespace}/w": "Failed",
                        f"Service/{cr.namespace}/w-svc": "Current"}
    # one Warning Event when it turns Stalled, not one per sync while it stays so
    sync(kube, repo, T0 + timedelta(minutes=1, seconds=30))
    (event,) = health_events(kube, cr)
    assert event["type"] == "Warning" and event["reason"] == "WidgetHealthCheckFailed"
    assert event["message"] == f"{cond['Stalled'][2]} (revision rev1)"  # Events name the revision

    # rolled out: Ready
    write_status(kube, deploy, rolled_out(2))
    sync(kube, repo, T0 + timedelta(minutes=2))
    cond = conditions(kube, cr)
    assert cond["Ready"] == ("True", "ReconcileSucceeded", "applied revision rev1")
    assert cond["Reconciling"][0] == "False" and cond["Stalled"][0] == "False"
    assert health(kube, cr)["status"] == "Current" and "since" not in health(kube, cr)
    kube.close()


def test_a_rollout_past_the_entry_health_timeout_stalls_its_custom_resource(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    katalog = KATALOG.replace("      operatorBox:\n",
                              "      healthTimeout: 2m\n      operatorBox:\n", 1)
    kube, repo, cr, deploy = setup(control_plane, tmp_path, katalog)
    sync(kube, repo, T0)
    assert conditions(kube, cr)["Reconciling"][0] == "True"
    assert health(kube, cr)["since"] == "2025-01-02T03:04:05Z"
    sync(kube, repo, T0 + timedelta(minutes=1))  # nothing changed: the clock runs on
    assert conditions(kube, cr)["Reconciling"][0] == "True"
    sync(kube, repo, T0 + timedelta(minutes=2))
    cond = conditions(kube, cr)
    assert cond["Stalled"] == ("True", "HealthTimeout",
                               f"not healthy after 2m: Deployment/{cr.namespace}/w: "
                               "InProgress: replicas: 0/2")
    assert cond["Ready"][:2] == ("False", "HealthTimeout")
    assert [e["reason"] for e in health_events(kube, cr)] == ["WidgetHealthTimeout"]
    write_status(kube, deploy, rolled_out(2))
    sync(kube, repo, T0 + timedelta(minutes=3))
    assert conditions(kube, cr)["Ready"][0] == "True"
    kube.close()


def test_a_child_that_existed_before_orksync_does_not_hold_its_custom_resource_back(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    kube, repo, cr, deploy = setup(control_plane, tmp_path)
    # the Service an onCreate entry (create-if-absent) names exists already, unlabelled
    kube.create(kube.resource("v1", "Namespace"), {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": cr.namespace}},
        field_manager="test")
    kube.create(kube.resource("v1", "Service"), {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "w-svc", "namespace": cr.namespace},
        "spec": {"ports": [{"port": 80}]}}, field_manager="test")
    sync(kube, repo, T0)
    write_status(kube, deploy, rolled_out(2))
    sync(kube, repo, T0 + timedelta(minutes=1))
    cond = conditions(kube, cr)
    assert cond["Ready"] == ("True", "ReconcileSucceeded", "applied revision rev1"), cond
    children = {c["object"]: (c["status"], c["message"]) for c in health(kube, cr)["children"]}
    assert children[f"Service/{cr.namespace}/w-svc"] == (
        "Current", "exists, not labelled as orksync's: its health is not read")
    kube.close()
