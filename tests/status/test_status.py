"""desired_status and sync_event, pure: conditions, status fields, scrubbing."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from orksync.errors import RenderError
from orksync.katalog.loader import load_repository
from orksync.lifecycle.events import sync_event
from orksync.model import Action, Change, ObjRef
from orksync.render.engine import templates_for
from orksync.status.desired import (
    MAX_CONDITION_MESSAGE,
    bounded,
    desired_status,
    render_error_text,
    status_equal,
)
from tests.helpers import CRD, widget, write_repo

NOW = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
LATER = datetime(2025, 1, 3, 0, 0, 0, tzinfo=UTC)

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
        status:
          fields:
            - path: phase
              value: Pending
            - path: phase
              value: Running
              when: [{field: spec.go, equals: "yes"}]
            - path: phase
              value: Either
              or: [{field: spec.tier, equals: gold}, {field: spec.tier, equals: silver}]
            - path: info.replicas
              value: "{{ .spec.replicas }}"
              type: int
            - path: info.ready
              value: "{{ .children.deployment.status.readyReplicas }}"
              type: int
            - path: flagged
              value: "yes"
              when: [{field: spec.flag, equals: "on"}]
              clearOnFalse: true
"""


def setup(tmp_path: Path, **spec: object) -> tuple[Any, Any, dict[str, Any]]:
    repo = write_repo(tmp_path, {"katalog.yaml": KATALOG, "crd.yaml": CRD,
                                 "w.yaml": widget("w", "ns1", image="nginx", **spec)})
    catalog = load_repository(repo)
    (cr,) = catalog.crs
    templates = templates_for(catalog.katalogs[0], lambda: NOW)
    live = {**cr.body, "metadata": {**cr.body["metadata"], "generation": 3, "uid": "u1"}}
    return cr, templates, live


def ok_changes(cr_ref: ObjRef) -> list[Change]:
    dep = ObjRef(api_version="apps/v1", kind="Deployment", namespace="ns1", name="w")
    return [Change(ref=cr_ref, action=Action.UNCHANGED),
            Change(ref=dep, action=Action.CREATED)]


def conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}


def test_success_sets_ready_and_the_fields_in_declaration_order(tmp_path: Path) -> None:
    cr, templates, live = setup(tmp_path, replicas=3, go="yes", tier="silver", flag="on")
    children = {"deployment": {"status": {"readyReplicas": 2}}, "deployments": {}}
    status = desired_status(live, cr.entry, templates, ok_changes(cr.ref), revision="abc",
                            render_error=None, now=NOW, children=children)
    cond = conditions(status)
    assert cond["Ready"]["status"] == "True" and cond["Ready"]["reason"] == "ReconcileSucceeded"
    assert cond["Reconciling"]["status"] == "False"
    assert cond["Stalled"]["status"] == "False"
    assert all(c["observedGeneration"] == 3 for c in cond.values())
    assert cond["Ready"]["lastTransitionTime"] == "2025-01-02T03:04:05Z"
    assert status["observedGeneration"] == 3
    # last writer wins; `or` is honoured (Orkestra ignores it: §7.2 #1)
    assert status["phase"] == "Either"
    assert status["info"] == {"replicas": 3, "ready": 2}
    assert status["flagged"] == "yes"
    assert status["orksync"] == {"lastAppliedRevision": "abc", "lastAttemptedRevision": "abc",
                                 "inventory": ["Deployment/ns1/w"], "counts": {"created": 1}}


def test_transition_time_is_kept_while_the_condition_does_not_change(tmp_path: Path) -> None:
    cr, templates, live = setup(tmp_path, replicas=1, flag="on")
    first = desired_status(live, cr.entry, templates, ok_changes(cr.ref), revision="abc",
                           render_error=None, now=NOW)
    live2 = {**live, "status": first}
    second = desired_status(live2, cr.entry, templates, ok_changes(cr.ref), revision="abc",
                            render_error=None, now=LATER)
    assert second == first and status_equal(first, second)
    failed = desired_status(live2, cr.entry, templates, [], revision="def",
                            render_error="boom", now=LATER)
    cond = conditions(failed)
    assert cond["Ready"]["lastTransitionTime"] == "2025-01-03T00:00:00Z"
    assert cond["Reconciling"]["lastTransitionTime"] == "2025-01-02T03:04:05Z"
    assert not status_equal(first, failed)


def test_an_error_sets_ready_false_scrubbed_and_cut(tmp_path: Path) -> None:
    cr, templates, live = setup(tmp_path, replicas=1, flag="off")
    live["status"] = {"flagged": "yes", "phase": "Old", "orksync": {"lastAppliedRevision": "r0"}}
    secret = "s3cr3t-value"
    dep = ObjRef(api_version="apps/v1", kind="Deployment", namespace="ns1", name="w")
    changes = [Change(ref=dep, action=Action.FAILED, message=f"denied {secret} " + "x" * 2000)]
    status = desired_status(live, cr.entry, templates, changes, revision="r1",
                            render_error=None, now=NOW, secrets=[secret])
    ready = conditions(status)["Ready"]
    assert ready["status"] == "False" and ready["reason"] == "ReconcileError"
    assert secret not in ready["message"] and "***" in ready["message"]
    assert len(ready["message"]) == 1024 and ready["message"].startswith("Deployment/ns1/w: ")
    assert ready["message"].endswith("x…")
    assert status["orksync"]["lastAppliedRevision"] == "r0"
    assert status["orksync"]["lastAttemptedRevision"] == "r1"
    # only conditional entries run after an error: phase keeps its live value,
    # flagged (when false + clearOnFalse) is removed
    assert status["phase"] == "Old"
    assert "flagged" not in status


def test_a_render_error_stalls(tmp_path: Path) -> None:
    cr, templates, live = setup(tmp_path)
    status = desired_status(live, cr.entry, templates, [], revision="r1",
                            render_error="template error", now=NOW)
    cond = conditions(status)
    assert cond["Stalled"]["status"] == "True" and cond["Stalled"]["reason"] == "RenderFailed"
    assert cond["Ready"]["message"] == "template error"


def test_a_render_failure_is_told_by_its_first_real_error_scrubbed_cut_and_counted() -> None:
    cause = RenderError("unknown field 'replicass' (did you mean 'replicas'?)",
                        file="katalog.yaml", line=13, obj="Katalog/widgets",
                        path="spec.crds.widget.operatorBox.onCreate.deployments[0].replicass")
    other = RenderError("unknown resource key", file="katalog.yaml", line=20,
                        obj="Katalog/widgets", path="spec.crds.widget.operatorBox.onCreate.x")
    left_out = RenderError("not rendered: Katalog widgets entry widget has 2 error(s), "
                           "reported above", file="w.yaml", obj="Widget.test.orksync.io/ns/w",
                           causes=(cause, other))
    assert render_error_text([left_out]) == (
        "katalog.yaml:13 Katalog/widgets spec.crds.widget.operatorBox.onCreate.deployments[0]"
        ".replicass: unknown field 'replicass' (did you mean 'replicas'?) (and 1 more)")
    own = RenderError("template error: hunter2-value is not a list", file="katalog.yaml",
                      line=12, obj="Widget.test.orksync.io/ns/w", path="spec.x")
    assert render_error_text([own], ["hunter2-value"]) == \
        "katalog.yaml:12 Widget.test.orksync.io/ns/w spec.x: template error: *** is not a list"
    long = RenderError("y" * 3000, file="katalog.yaml", line=1)
    text = render_error_text([long, own])
    assert len(text) == MAX_CONDITION_MESSAGE and text.endswith("y… (and 1 more)")
    assert bounded("abc", 10) == "abc" and bounded("abcdefghijk", 10) == "abcdefghi…"


def test_sync_event_only_for_changes_and_errors() -> None:
    cr = ObjRef(api_version="test.orksync.io/v1", kind="Widget", namespace="n", name="w")
    a = ObjRef(api_version="apps/v1", kind="Deployment", namespace="n", name="a")
    b = ObjRef(api_version="v1", kind="Service", namespace="n", name="b")
    assert sync_event(cr, [Change(ref=a, action=Action.UNCHANGED)]) is None
    assert sync_event(cr, [Change(ref=a, action=Action.CREATED),
                           Change(ref=b, action=Action.CONFIGURED)]) == (
        "Normal", "WidgetReconciled", "created 1, configured 1: Deployment/n/a, Service/n/b")
    kind, reason, message = sync_event(cr, [Change(ref=a, action=Action.FAILED,
                                                   message="nope")])  # type: ignore[misc]
    assert (kind, reason) == ("Warning", "WidgetReconcileError")
    assert message == "failed 1: Deployment/n/a: nope"


def test_status_conditions_false_writes_neither_conditions_nor_observed_generation(
        tmp_path: Path) -> None:
    """Orkestra's `status.conditions: false`: no automatic conditions and no
    observedGeneration; the declared fields and orksync's own record are still written."""
    repo = write_repo(tmp_path, {
        "katalog.yaml": KATALOG.replace("        status:\n",
                                        "        status:\n          conditions: false\n"),
        "crd.yaml": CRD, "w.yaml": widget("w", "ns1", image="nginx", replicas=2)})
    catalog = load_repository(repo)
    assert not catalog.errors, catalog.errors
    (cr,) = catalog.crs
    templates = templates_for(catalog.katalogs[0], lambda: NOW)
    live = {**cr.body, "metadata": {**cr.body["metadata"], "generation": 3, "uid": "u1"},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    for error in (None, "boom"):
        status = desired_status(live, cr.entry, templates, ok_changes(cr.ref),
                                revision="abc", render_error=error, now=NOW)
        assert "conditions" not in status and "observedGeneration" not in status, status
        assert status["orksync"]["lastAttemptedRevision"] == "abc"
    ok = desired_status(live, cr.entry, templates, ok_changes(cr.ref), revision="abc",
                        render_error=None, now=NOW)
    assert ok["phase"] == "Pending" and ok["info"]["replicas"] == 2
