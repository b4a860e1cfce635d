"""The walking skeleton against the real control plane: render, apply, apply again."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from orksync.apply.engine import Applier
from orksync.cluster.kube import Kube
from orksync.katalog.loader import load_repository
from orksync.model import Action, ChangeSet, ObjRef
from orksync.render.engine import render_catalog
from testbed.controlplane import ControlPlane
from tests.helpers import (
    CRD,
    KATALOG,
    REPO_EXAMPLE,
    crd,
    katalog,
    record_requests,
    widget,
    write_repo,
)

pytestmark = pytest.mark.cluster


def sync(kube: Kube, repo: Path) -> ChangeSet:
    rendered = render_catalog(load_repository(repo))
    assert rendered.ok, rendered.errors
    return Applier(kube).apply(rendered)


def live(kube: Kube, ref: ObjRef) -> dict[str, Any]:
    res = kube.resource(ref.api_version, ref.kind)
    return kube.get(res, ref.namespace, ref.name)


def test_syncing_the_example_twice_creates_everything_then_changes_nothing(
        control_plane: ControlPlane) -> None:
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    first = sync(kube, REPO_EXAMPLE)
    assert not first.failed, first.failed
    created = {str(c.ref) for c in first.changes if c.action is Action.CREATED}
    assert created == {
        "CustomResourceDefinition/webapps.platform.example.com",
        "Namespace/team-a", "Namespace/team-b",  # plain manifests, as the two below
        "ClusterRole/webapp-viewer", "RoleBinding/team-a/webapp-viewers",
        "WebApp.platform.example.com/team-a/shop", "WebApp.platform.example.com/team-b/blog",
        "Secret/team-a/shop-db", "Secret/team-a/shop-tls",
        "Secret/team-b/blog-db", "Secret/team-b/blog-tls",
        "Deployment/team-a/shop", "Deployment/team-b/blog",
        "Service/team-a/shop", "Service/team-a/shop-public", "Service/team-b/blog",
    }
    for change in first.changes:
        if change.ref.kind in ("Deployment", "Service"):
            owner_ref = ObjRef(api_version="platform.example.com/v1", kind="WebApp",
                               namespace=change.ref.namespace,
                               name=change.ref.name.removesuffix("-public"))
            owner = live(kube, owner_ref)
            (ref,) = live(kube, change.ref)["metadata"]["ownerReferences"]
            assert ref["uid"] == owner["metadata"]["uid"] and ref["controller"] is True

    shop = live(kube, ObjRef(api_version="apps/v1", kind="Deployment", namespace="team-a",
                             name="shop"))
    assert shop["spec"]["replicas"] == 2
    assert shop["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] == 8080
    blog = live(kube, ObjRef(api_version="apps/v1", kind="Deployment", namespace="team-b",
                             name="blog"))
    assert blog["spec"]["replicas"] == 1
    assert "ports" not in blog["spec"]["template"]["spec"]["containers"][0]
    blog_svc = live(kube, ObjRef(api_version="v1", kind="Service", namespace="team-b",
                                 name="blog"))
    assert blog_svc["spec"]["ports"][0]["targetPort"] == 80

    versions = {c.ref: live(kube, c.ref)["metadata"]["resourceVersion"] for c in first.changes}
    kube.requests = 0
    second = sync(kube, REPO_EXAMPLE)
    assert {c.action for c in second.changes} == {Action.UNCHANGED}
    assert {c.ref for c in second.changes} == set(versions)
    after = {ref: live(kube, ref)["metadata"]["resourceVersion"] for ref in versions}
    assert after == versions
    kube.close()


def test_a_changed_custom_resource_configures_its_children(control_plane: ControlPlane,
                                                           tmp_path: Path) -> None:
    ns = f"t-{uuid.uuid4().hex[:8]}"
    files = {"katalog.yaml": KATALOG, "crd.yaml": CRD,
             "w.yaml": widget("w", ns, image="nginx:1", replicas=1, port=8080)}
    repo = write_repo(tmp_path, files)
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    assert not sync(kube, repo).failed
    write_repo(tmp_path, {"w.yaml": widget("w", ns, image="nginx:2", replicas=3, port=8080)})
    changes = sync(kube, repo).by_ref()
    deploy = ObjRef(api_version="apps/v1", kind="Deployment", namespace=ns, name="w")
    service = ObjRef(api_version="v1", kind="Service", namespace=ns, name="w-svc")
    assert changes[deploy].action is Action.CONFIGURED
    assert changes[service].action is Action.UNCHANGED
    spec = live(kube, deploy)["spec"]
    assert spec["replicas"] == 3
    assert spec["template"]["spec"]["containers"][0]["image"] == "nginx:2"
    kube.close()


def test_on_create_without_reconcile_leaves_a_drifted_object_alone(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    ns = f"t-{uuid.uuid4().hex[:8]}"
    repo = write_repo(tmp_path, {"katalog.yaml": KATALOG, "crd.yaml": CRD,
                                 "w.yaml": widget("w", ns, image="nginx", port=8080)})
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    assert not sync(kube, repo).failed
    service = ObjRef(api_version="v1", kind="Service", namespace=ns, name="w-svc")
    res = kube.resource("v1", "Service")
    kube.request("PATCH", res.path(ns, "w-svc"), body={"metadata": {"labels": {"x": "y"}},
                 "spec": {"ports": [{"port": 80, "targetPort": 9999}]}},
                 content_type="application/merge-patch+json")
    changes = sync(kube, repo).by_ref()
    assert changes[service].action is Action.UNCHANGED
    assert live(kube, service)["spec"]["ports"][0]["targetPort"] == 9999
    kube.close()


def test_the_command_line_syncs_once_and_reports_a_summary(control_plane: ControlPlane,
                                                           tmp_path: Path) -> None:
    ns = f"t-{uuid.uuid4().hex[:8]}"
    repo = write_repo(tmp_path / "repo", {"katalog.yaml": KATALOG, "crd.yaml": CRD,
                                          "w.yaml": widget("w", ns, image="nginx")})
    cmd = [sys.executable, "-m", "orksync", "sync", str(repo), "--once",
           "--kubeconfig", str(control_plane.kubeconfig), "--name", f"cli-{ns}"]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    assert f"created Deployment/{ns}/w" in first.stderr
    for line in (f"created Namespace/{ns}", f"created Widget.test.orksync.io/{ns}/w",
                 f"created Service/{ns}/w-svc"):
        assert line in first.stderr
    assert first.stderr.splitlines()[-1].startswith("sync ")
    second = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    summary = second.stderr.splitlines()[-1]
    assert "created=0 configured=0 unchanged=4 skipped=0 deleted=0 failed=0" in summary


def test_a_broken_custom_resource_is_not_applied_and_the_others_are(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    ns = f"t-{uuid.uuid4().hex[:8]}"
    repo = write_repo(tmp_path, {"katalog.yaml": KATALOG, "crd.yaml": CRD,
                                 "good.yaml": widget("good", ns, image="nginx"),
                                 "bad.yaml": widget("bad", ns)})  # no image: required
    rendered = render_catalog(load_repository(repo))
    (err,) = rendered.errors
    assert "bad" in str(err) and "image" in str(err) and "katalog.yaml" in str(err)
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    changes = Applier(kube).apply(rendered).by_ref()
    assert changes[ObjRef(api_version="apps/v1", kind="Deployment", namespace=ns,
                          name="good")].action is Action.CREATED
    assert not any(ref.name.startswith("bad") for ref in changes)
    res = kube.resource("test.orksync.io/v1", "Widget")
    assert kube.get_or_none(res, ns, "bad") is None
    kube.close()


def test_the_orkestra_once_secret_example_keeps_its_secret_across_syncs(
        control_plane: ControlPlane, orkestra_examples: Path) -> None:
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    first = sync(kube, orkestra_examples / "once-secret")
    assert not first.failed, first.failed
    secret = ObjRef(api_version="v1", kind="Secret", namespace="default",
                    name="my-secure-app-credentials")
    before = live(kube, secret)
    assert set(before["data"]) == {"password", "apiKey", "jwtSecret"}
    for _ in range(3):
        again = sync(kube, orkestra_examples / "once-secret")
        assert again.by_ref()[secret].action is Action.UNCHANGED
    after = live(kube, secret)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert after["data"] == before["data"]
    kube.close()


def test_a_role_binding_whose_role_ref_changes_is_recreated(control_plane: ControlPlane,
                                                            tmp_path: Path) -> None:
    ns = f"t-{uuid.uuid4().hex[:8]}"
    katalog = """
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: widgets}
spec:
  crds:
    widget:
      crdFile: ./crd.yaml
      operatorBox:
        onReconcile:
          roleBindings:
            - name: "{{ .metadata.name }}-rb"
              roleRef: {name: "{{ .spec.role }}"}
              subjects: [{name: default}]
"""
    repo = write_repo(tmp_path, {"katalog.yaml": katalog, "crd.yaml": CRD,
                                 "w.yaml": widget("w", ns, role="reader")})
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    assert not sync(kube, repo).failed
    rb = ObjRef(api_version="rbac.authorization.k8s.io/v1", kind="RoleBinding", namespace=ns,
                name="w-rb")
    uid = live(kube, rb)["metadata"]["uid"]
    write_repo(tmp_path, {"w.yaml": widget("w", ns, role="writer")})
    change = sync(kube, repo).by_ref()[rb]
    assert change.action is Action.CONFIGURED and "recreated" in change.message
    now = live(kube, rb)
    assert now["roleRef"]["name"] == "writer" and now["metadata"]["uid"] != uid
    kube.close()


def test_force_conflict_false_reports_a_conflict_instead_of_taking_fields_over(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    ns = f"t-{uuid.uuid4().hex[:8]}"
    katalog = KATALOG.replace("              reconcile: true\n          services",
                              "              reconcile: true\n              forceConflict: false\n"
                              "          services")
    repo = write_repo(tmp_path, {"katalog.yaml": katalog, "crd.yaml": CRD,
                                 "w.yaml": widget("w", ns, image="nginx:1")})
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    assert not sync(kube, repo).failed
    deploy = ObjRef(api_version="apps/v1", kind="Deployment", namespace=ns, name="w")
    res = kube.resource("apps/v1", "Deployment")
    body = {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "w", "namespace": ns},
            "spec": {"template": {"spec": {"containers": [{"name": "w", "image": "other"}]}}}}
    kube.apply(res, body, field_manager="someone-else", force=True)
    write_repo(tmp_path, {"w.yaml": widget("w", ns, image="nginx:2")})
    change = sync(kube, repo).by_ref()[deploy]
    assert change.action is Action.FAILED and "409" in change.message
    assert live(kube, deploy)["spec"]["template"]["spec"]["containers"][0]["image"] == "other"
    kube.close()


def test_an_unchanged_sync_does_not_write_the_inventory_again(
        control_plane: ControlPlane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from orksync.sync import SyncRequest, sync_once

    ns = f"t-{uuid.uuid4().hex[:8]}"
    repo = write_repo(tmp_path, {"katalog.yaml": KATALOG, "crd.yaml": CRD,
                                 "w.yaml": widget("w", ns, image="nginx", replicas=1, port=80)})
    inventory = f"unchanged-{uuid.uuid4().hex[:8]}"
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    applied: list[str] = []
    real_apply = kube.apply

    def recording_apply(res: Any, body: Any, **kwargs: Any) -> Any:
        applied.append(kwargs.get("subject", ""))
        return real_apply(res, body, **kwargs)

    monkeypatch.setattr(kube, "apply", recording_apply)
    rendered = render_catalog(load_repository(repo))
    first = sync_once(kube, SyncRequest(rendered, inventory_name=inventory))
    stored = f"ConfigMap/orksync-system/orksync-inventory-{inventory}"
    assert stored in applied and len(first.inventory) > 0
    applied.clear()
    second = sync_once(kube, SyncRequest(rendered, inventory_name=inventory))
    assert second.inventory == first.inventory
    assert stored not in applied, applied
    kube.close()


def test_writes_that_read_only_metadata_get_only_metadata_back(control_plane: ControlPlane,
                                                                namespace: str) -> None:
    """kube-apiserver answers a write asked for METADATA_ONLY with a PartialObjectMetadata:
    the uid and resourceVersion the applier reads, without the object (docs/performance.md);
    a plain write still gets the whole object."""
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    res = kube.resource("v1", "ConfigMap")

    def body(name: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": namespace}, "data": {"k": "v"}}

    created = kube.create(res, body("made"), field_manager="test", metadata_only=True)
    _, applied = kube.apply(res, body("applied"), field_manager="test", force=True,
                            metadata_only=True)
    _, whole = kube.apply(res, body("whole"), field_manager="test", force=True)
    for answer, name in ((created, "made"), (applied, "applied")):
        assert answer["kind"] == "PartialObjectMetadata" and "data" not in answer
        live = kube.get(res, namespace, name)
        assert answer["metadata"]["uid"] == live["metadata"]["uid"]
        assert answer["metadata"]["resourceVersion"] == live["metadata"]["resourceVersion"]
    assert whole["kind"] == "ConfigMap" and whole["data"] == {"k": "v"}
    kube.close()


def test_a_no_change_apply_hands_nothing_to_the_worker_threads(
        control_plane: ControlPlane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Objects settled without a request are decided in the stage's own thread: a no-change
    resync starts no worker pool (its threads cost more than the decisions)."""
    ns = f"t-{uuid.uuid4().hex[:8]}"
    files = {"katalog.yaml": KATALOG, "crd.yaml": CRD}
    files.update({f"w{i}.yaml": widget(f"w{i}", ns, image="nginx", replicas=1, port=80)
                  for i in range(3)})
    repo = write_repo(tmp_path / "repo", files)
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    assert not sync(kube, repo).failed

    def no_pool(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a worker pool was started")

    monkeypatch.setattr("orksync.apply.engine._in_threads", no_pool)
    again = sync(kube, repo)
    assert {c.action for c in again.changes} == {Action.UNCHANGED}, again.changes
    assert len(again.changes) == 1 + 3 * 3  # the CRD, and per Widget: it, a Deployment, a Service
    kube.close()


HELD_KATALOG = """
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: widgets}
spec:
  crds:
    widget:
      crdFile: ./crd.yaml
      operatorBox:
        onReconcile:
          configMaps:
            - name: "{{ .metadata.name }}-config"
              data: {colour: blue}
"""


def test_a_child_being_deleted_is_reported_waiting_then_created_again_once_gone(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    ns = f"t-{uuid.uuid4().hex[:8]}"
    repo = write_repo(tmp_path / "repo", {"katalog.yaml": HELD_KATALOG, "crd.yaml": CRD,
                                          "w.yaml": widget("w", ns)})
    cmd = [sys.executable, "-m", "orksync", "sync", str(repo), "--once",
           "--kubeconfig", str(control_plane.kubeconfig), "--name", f"held-{ns}"]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    assert f"created ConfigMap/{ns}/w-config" in first.stderr
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    res = kube.resource("v1", "ConfigMap")
    path = res.path(ns, "w-config")
    hold = "test.orksync.io/hold"
    kube.request("PATCH", path, body={"metadata": {"finalizers": [hold]}},
                 content_type="application/merge-patch+json")
    kube.delete(res, ns, "w-config")
    assert live(kube, ObjRef(api_version="v1", kind="ConfigMap", namespace=ns,
                             name="w-config"))["metadata"]["deletionTimestamp"]

    held = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert held.returncode == 0, held.stderr
    assert f"waiting ConfigMap/{ns}/w-config: being deleted (finalizers: {hold})" \
        in held.stderr, held.stderr
    summary = held.stderr.splitlines()[-1]
    assert "unchanged=2 skipped=0 waiting=1 deleted=0 failed=0" in summary, summary

    kube.request("PATCH", path, body={"metadata": {"finalizers": None}},
                 content_type="application/merge-patch+json")
    assert kube.get_or_none(res, ns, "w-config") is None
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert f"created ConfigMap/{ns}/w-config" in again.stderr, again.stderr
    assert kube.get(res, ns, "w-config")["data"] == {"colour": "blue"}
    kube.close()


STRICT_CRD = crd("Gizmo", "strict.orksync.io", status=False, properties="""
    spec:
      type: object
      properties:
        image: {type: string}
""")


def test_a_custom_resource_outside_its_crds_schema_is_refused_once_not_retried(
        control_plane: ControlPlane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ns = f"t-{uuid.uuid4().hex[:8]}"
    katalog = KATALOG.replace("{name: widgets}", "{name: gizmos}").replace("widget:", "gizmo:")
    gizmo = widget("g", ns, image="nginx").replace("test.orksync.io/v1\nkind: Widget",
                                                   "strict.orksync.io/v1\nkind: Gizmo")
    repo = write_repo(tmp_path, {"katalog.yaml": katalog, "crd.yaml": STRICT_CRD,
                                 "g.yaml": gizmo})
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    assert not sync(kube, repo).failed
    write_repo(repo, {"g.yaml": gizmo.replace("  image: nginx\n",
                                              "  image: nginx\n  colour: red\n")})
    rendered = render_catalog(load_repository(repo))
    sent = record_requests(kube, monkeypatch)
    kube.requests = 0
    changes = Applier(kube).apply(rendered)
    path = kube.resource("strict.orksync.io/v1", "Gizmo").path(ns, "g")
    assert [method for method, p in sent if p == path] == ["PATCH"]
    assert kube.requests == len(sent) and kube.retries == 0, "nothing was sent again"
    failed = {str(c.ref): c.message for c in changes.failed}
    assert ".spec.colour: field not declared in schema" in failed[f"Gizmo.strict.orksync.io/{ns}/g"]
    kube.close()


def test_text_outside_the_basic_multilingual_plane_is_applied_as_written(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    """A server-side apply body is read as YAML, which refuses the JSON escape of a
    surrogate pair (`\\ud83d\\ude80`): the body is sent as UTF-8."""
    ns = f"t-{uuid.uuid4().hex[:8]}"
    box = ("        onReconcile:\n          configMaps:\n"
           "            - name: \"{{ .metadata.name }}-greeting\"\n"
           "              data: {greeting: \"{{ .spec.image }}\"}\n")
    repo = write_repo(tmp_path, {"katalog.yaml": katalog(box), "crd.yaml": CRD,
                                 "w.yaml": widget("w", ns, image='"héllo 🚀"')})
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    changes = sync(kube, repo)
    assert not changes.failed, changes.failed
    cm = live(kube, ObjRef(api_version="v1", kind="ConfigMap", namespace=ns, name="w-greeting"))
    assert cm["data"]["greeting"] == "héllo 🚀"
    widget_body = live(kube, ObjRef(api_version="test.orksync.io/v1", kind="Widget",
                                    namespace=ns, name="w"))
    assert widget_body["spec"]["image"] == "héllo 🚀"
    assert all(c.action is Action.UNCHANGED for c in sync(kube, repo).changes)
    kube.close()
