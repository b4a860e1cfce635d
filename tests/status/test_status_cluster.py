"""Status conditions, status fields and Events written on a real custom resource after a
sync (orksync.lifecycle.status, orksync.lifecycle.events)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from orksync.apply.engine import Applier
from orksync.cluster.kube import Kube
from orksync.cluster.live import LiveIndex
from orksync.katalog.loader import load_repository
from orksync.lifecycle.events import health_report, report_sync
from orksync.lifecycle.status import read_children, write_status
from orksync.model import Action, Change, ChangeSet, ObjRef
from orksync.render.engine import render_catalog, templates_for
from orksync.status.desired import desired_status
from testbed.controlplane import ControlPlane
from tests.helpers import CRD, record_requests, widget, write_repo
from tests.workload_status import rolled_out
from tests.workload_status import write_status as write_deployment_status

pytestmark = pytest.mark.cluster

NOW = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)

KATALOG = """
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: widgets}
spec:
  crds:
    widget:
      crdFile: ./crd.yaml
      operatorBox:
        onCreate:
          deployments:
            - name: "{{ .metadata.name }}"
              image: "{{ .spec.image }}"
              replicas: "{{ .spec.replicas }}"
              reconcile: true
          services:
            - name: "{{ .metadata.name }}-svc"
              port: "80"
              targetPort: "8080"
        status:
          fields:
            - path: phase
              value: Pending
            - path: phase
              value: Deployed
              or: [{field: children.deployment.metadata.name, exists: true}]
            - path: desiredReplicas
              value: "{{ .children.deployment.spec.replicas }}"
              type: int
            - path: serviceCount
              value: "{{ len .children.services }}"
              type: int
"""


def sync(kube: Kube, repo: Path, revision: str) -> tuple[ChangeSet, list[ObjRef]]:
    catalog = load_repository(repo)
    rendered = render_catalog(catalog)
    changes = Applier(kube).apply(rendered)
    written = report_sync(kube, catalog, rendered, changes, revision=revision, now=NOW)
    return changes, written


def live_cr(kube: Kube, ns: str) -> dict[str, Any]:
    res = kube.resource("test.orksync.io/v1", "Widget")
    return kube.get(res, ns, "w")


def events(kube: Kube, ns: str, uid: str) -> list[dict[str, Any]]:
    res = kube.resource("v1", "Event")
    return [e for e in kube.list(res, namespace=ns)
            if e.get("involvedObject", {}).get("uid") == uid]


def conditions(cr: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in cr["status"]["conditions"]}


def test_status_and_events_after_syncs(control_plane: ControlPlane, tmp_path: Path) -> None:
    ns = f"t-{uuid.uuid4().hex[:8]}"
    repo = write_repo(tmp_path, {"katalog.yaml": KATALOG, "crd.yaml": CRD,
                                 "w.yaml": widget("w", ns, image="nginx", replicas=2)})
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    ref = ObjRef(api_version="test.orksync.io/v1", kind="Widget", namespace=ns, name="w")

    changes, written = sync(kube, repo, "rev1")
    assert not changes.failed and written == [ref]
    cr = live_cr(kube, ns)
    cond = conditions(cr)
    # applied, not rolled out: Ready only once the Deployment is (orksync.status.health)
    assert cond["Ready"]["status"] == "False" and cond["Ready"]["reason"] == "Progressing"
    assert cond["Reconciling"]["message"] == f"Deployment/{ns}/w: InProgress: replicas: 0/2"
    write_deployment_status(kube, ObjRef(api_version="apps/v1", kind="Deployment",
                                         namespace=ns, name="w"), rolled_out(2))
    changes, written = sync(kube, repo, "rev1")
    cr = live_cr(kube, ns)
    status = cr["status"]
    cond = conditions(cr)
    assert cond["Ready"]["status"] == "True" and cond["Ready"]["reason"] == "ReconcileSucceeded"
    assert cond["Reconciling"]["status"] == "False" and cond["Stalled"]["status"] == "False"
    assert cond["Ready"]["observedGeneration"] == cr["metadata"]["generation"]
    assert status["observedGeneration"] == cr["metadata"]["generation"]
    assert status["phase"] == "Deployed"  # `or:` honoured, children read back
    assert status["desiredReplicas"] == 2 and status["serviceCount"] == 1
    assert status["orksync"]["lastAppliedRevision"] == "rev1"
    assert status["orksync"]["inventory"] == [f"Deployment/{ns}/w", f"Service/{ns}/w-svc"]
    assert status["orksync"]["counts"] == {"unchanged": 2}
    managers = {m["manager"] for m in cr["metadata"]["managedFields"]
                if m.get("subresource") == "status"}
    assert managers == {"orksync-status"}
    uid = cr["metadata"]["uid"]
    (event,) = events(kube, ns, uid)
    assert event["type"] == "Normal" and event["reason"] == "WidgetReconciled"
    assert event["message"].startswith(f"created 3: Widget.test.orksync.io/{ns}/w, ")
    assert event["source"]["component"] == "orksync" and event["count"] == 1

    # an unchanged sync (the counts changed with the health, above): no Event, no write
    changes, written = sync(kube, repo, "rev1")
    assert {c.action for c in changes.changes} == {Action.UNCHANGED}
    assert written == []
    assert len(events(kube, ns, uid)) == 1

    # the same desired status again sends no request at all
    cr = live_cr(kube, ns)
    catalog = load_repository(repo)
    rendered = render_catalog(catalog)
    children = [o for o in rendered.objects if o.owner == ref]
    entry = catalog.crs[0].entry
    unchanged = [Change(ref=o.ref, action=Action.UNCHANGED) for o in children]
    desired = desired_status(cr, entry, templates_for(catalog.katalogs[0], lambda: NOW),
                             unchanged, revision="rev1", render_error=None,
                             now=datetime.now(UTC),
                             children=read_children(kube, ref, children),
                             health=health_report(catalog.crs[0], cr, children, unchanged,
                                                  LiveIndex(kube), now=NOW))
    kube.requests = 0
    assert write_status(kube, ref, desired, live=cr) is False
    assert kube.requests == 0

    # an error: Ready=False with the message, a Warning Event, last applied revision kept
    write_repo(tmp_path, {"w.yaml": widget("w", ns, replicas=2)})  # image is required
    changes, written = sync(kube, repo, "rev2")
    assert written == [ref]
    cr = live_cr(kube, ns)
    cond = conditions(cr)
    assert cond["Ready"]["status"] == "False" and cond["Ready"]["reason"] == "ReconcileError"
    assert "image" in cond["Ready"]["message"] and len(cond["Ready"]["message"]) <= 1024
    assert cond["Stalled"]["status"] == "True"
    assert cr["status"]["orksync"]["lastAppliedRevision"] == "rev1"
    assert cr["status"]["orksync"]["lastAttemptedRevision"] == "rev2"
    warnings = [e for e in events(kube, ns, uid) if e["type"] == "Warning"]
    assert [e["reason"] for e in warnings] == ["WidgetReconcileError"]
    kube.close()


def test_no_status_subresource_writes_nothing(control_plane: ControlPlane, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    ns = f"t-{uuid.uuid4().hex[:8]}"
    crd = CRD.replace("widgets", "gadgets").replace("Widget", "Gadget") \
        .replace("widget", "gadget").replace("      subresources: {status: {}}\n", "")
    katalog = KATALOG.replace("widget:", "gadget:").replace("{name: widgets}",
                                                            "{name: gadgets}")
    body = widget("w", ns, image="nginx", replicas=1).replace("Widget", "Gadget")
    repo = write_repo(tmp_path, {"katalog.yaml": katalog, "crd.yaml": crd, "w.yaml": body})
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    sent = record_requests(kube, monkeypatch)
    changes, written = sync(kube, repo, "rev1")
    assert not changes.failed
    assert written == []
    res = kube.resource("test.orksync.io/v1", "Gadget")
    assert "status" not in kube.get(res, ns, "w")
    assert not [path for _, path in sent if path.endswith("/status")]  # not even one request
    kube.close()


def test_reporting_on_many_custom_resources_costs_one_list_per_kind_once_settled(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    from orksync.katalog.loader import load_repository
    from orksync.lifecycle.events import report_sync
    from orksync.render.engine import render_catalog
    from orksync.sync import SyncRequest, sync_once
    from tests.helpers import CRD as WIDGET_CRD
    from tests.helpers import KATALOG as WIDGET_KATALOG
    from tests.helpers import widget, write_repo

    ns = f"t-{uuid.uuid4().hex[:8]}"
    files = {"katalog.yaml": WIDGET_KATALOG, "crd.yaml": WIDGET_CRD}
    files.update({f"w{i}.yaml": widget(f"w{i}", ns, image="nginx") for i in range(30)})
    repo = write_repo(tmp_path, files)
    catalog = load_repository(repo)
    rendered = render_catalog(catalog)
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    inventory = f"report-{uuid.uuid4().hex[:6]}"
    for _ in range(3):  # the status settles after the second sync
        result = sync_once(kube, SyncRequest(rendered, inventory_name=inventory))
        report_sync(kube, catalog, rendered, result.changes, revision="r1")
    kube.requests = 0
    written = report_sync(kube, catalog, rendered, result.changes, revision="r1")
    assert written == []  # nothing changed: no status write
    assert kube.requests <= 3  # one LIST each for Widget, Deployment and Service
    kube.close()


def test_a_custom_resource_of_a_broken_katalog_entry_shows_the_first_error_in_its_status(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    ns = f"t-{uuid.uuid4().hex[:8]}"
    repo = write_repo(tmp_path, {"katalog.yaml": KATALOG, "crd.yaml": CRD,
                                 "w.yaml": widget("w", ns, image="nginx", replicas=2)})
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    changes, _ = sync(kube, repo, "rev1")
    assert not changes.failed
    broken = KATALOG.replace('              replicas: "{{ .spec.replicas }}"\n',
                             '              replicass: "{{ .spec.replicas }}"\n'
                             '              imagePullPolicyy: Always\n')
    write_repo(tmp_path, {"katalog.yaml": broken})
    changes, written = sync(kube, repo, "rev2")
    assert written
    cond = conditions(live_cr(kube, ns))
    stalled = cond["Stalled"]
    assert stalled["status"] == "True" and stalled["reason"] == "RenderFailed"
    assert stalled["message"] == (
        "katalog.yaml:13 Katalog/widgets spec.crds.widget.operatorBox.onCreate.deployments[0]"
        ".replicass: unknown field 'replicass' of a deployments entry (did you mean "
        "'replicas'?) (and 1 more)"), stalled["message"]
    assert cond["Ready"]["message"] == stalled["message"]
    kube.close()
