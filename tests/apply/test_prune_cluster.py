"""Prune, teardown and inventory against the real control plane (kube-apiserver + etcd +
the garbage collector): orksync.sync, .prune, .deletion and .inventory."""

from __future__ import annotations

import logging
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from orksync.apply.delete import DeletionOptions
from orksync.apply.inventory import DEFAULT_NAMESPACE, Inventory, InventoryEntry, InventoryError
from orksync.apply.run import ApplyOptions
from orksync.cluster.kube import Kube
from orksync.errors import ClusterError
from orksync.katalog.loader import load_repository
from orksync.lifecycle.teardown import FINALIZER, remove_finalizer
from orksync.model import Action, Change, ObjRef, Source
from orksync.render.engine import render_catalog
from orksync.sync import (
    SyncOptions,
    SyncRequest,
    SyncResult,
    ensure_namespace,
    hook_renderers,
    read_inventory,
    sync_once,
    write_inventory,
)
from testbed.controlplane import ControlPlane
from tests.helpers import (
    CRD,
    KATALOG,
    finished_job_status,
    katalog,
    record_requests,
    wait_for,
    widget,
    write_repo,
)

pytestmark = pytest.mark.cluster

WIDGET_API = "test.orksync.io/v1"
MERGE = "application/merge-patch+json"
WITHOUT_SERVICES = KATALOG.split("          services:")[0]


ON_DELETE_JOB = katalog("""\
        onCreate:
          configMaps: [{name: "{{ .metadata.name }}-config", data: {a: "1"}}]
        onDelete:
          timeout: 1s
          jobs:
            - name: "{{ .metadata.name }}-cleanup"
              image: busybox
              command: ["sh", "-c", "echo cleanup {{ .status.phase }}"]
""")

ORDERED = katalog("""\
        onCreate:
          configMaps:
            - {name: "{{ .metadata.name }}-a"}
            - {name: "{{ .metadata.name }}-b"}
        onDelete:
          ordered: true
          timeout: 3s
          groups:
            - name: first
              jobs: [{name: "{{ .metadata.name }}-backup", image: busybox}]
              configMaps: [{name: "{{ .metadata.name }}-a"}]
            - name: second
              configMaps: [{name: "{{ .metadata.name }}-b"}, {name: "{{ .metadata.name }}-foreign"}]
""")

CLUSTER_ROLE = katalog("""\
        onCreate:
          configMaps: [{name: "{{ .metadata.name }}-config"}]
          clusterRoles:
            - name: "{{ .metadata.namespace }}-{{ .metadata.name }}-reader"
              rules: [{apiGroups: [""], resources: [pods], verbs: [get]}]
""")

CONDITIONAL = katalog("""\
        onReconcile:
          configMaps:
            - {name: "{{ .metadata.name }}-always"}
            - name: "{{ .metadata.name }}-flagged"
              when: [{field: spec.flag, equals: "on"}]
""")


# --- fixtures and helpers ----------------------------------------------------------------------


@pytest.fixture
def kube(control_plane: ControlPlane) -> Iterator[Kube]:
    k = Kube.from_kubeconfig(control_plane.kubeconfig)
    yield k
    k.close()


@pytest.fixture
def ns(kube: Kube) -> Iterator[str]:
    """A namespace name the sync creates; afterwards our finalizer is stripped from what is
    left (so the namespace can go) and the namespace deleted."""
    name = f"p-{uuid.uuid4().hex[:8]}"
    yield name
    try:
        res = kube.resource(WIDGET_API, "Widget")
        for item in kube.list(res, namespace=name):
            remove_finalizer(kube, res, item)
        kube.delete(kube.resource("v1", "Namespace"), "", name)
    except ClusterError:
        pass


class Repo:
    """A test repository and its sync root (one inventory per test)."""

    def __init__(self, kube: Kube, root: Path, ns: str) -> None:
        self.kube, self.root, self.ns = kube, root, ns
        self.name = f"test-{uuid.uuid4().hex[:8]}"

    def write(self, files: dict[str, str]) -> Repo:
        write_repo(self.root, files)
        return self

    def remove(self, rel: str) -> None:
        (self.root / rel).unlink()

    def sync(self, source: Source | None = None, **options: Any) -> SyncResult:
        catalog = load_repository(self.root)
        rendered = render_catalog(catalog)
        opts = SyncOptions(deletion=DeletionOptions(poll=0.1), **options)
        return sync_once(self.kube, SyncRequest(rendered, inventory_name=self.name,
                                                hooks=hook_renderers(catalog), options=opts,
                                                source=source))

    def stored(self) -> Inventory:
        return read_inventory(self.kube, self.name)


@pytest.fixture
def repo(kube: Kube, tmp_path: Path, ns: str) -> Repo:
    return Repo(kube, tmp_path / "repo", ns)


def ref(kind: str, name: str, ns: str = "") -> ObjRef:
    api = {"Deployment": "apps/v1", "Widget": WIDGET_API, "Job": "batch/v1",
           "ClusterRole": "rbac.authorization.k8s.io/v1"}.get(kind, "v1")
    return ObjRef(api_version=api, kind=kind, namespace=ns, name=name)


def get(kube: Kube, r: ObjRef) -> dict[str, Any] | None:
    return kube.get_or_none(kube.resource(r.api_version, r.kind), r.namespace, r.name)


def must(kube: Kube, r: ObjRef) -> dict[str, Any]:
    live = get(kube, r)
    assert live is not None, f"{r} is missing"
    return live


def patch(kube: Kube, r: ObjRef, body: Any, *, subresource: str = "") -> None:
    res = kube.resource(r.api_version, r.kind)
    kube.request("PATCH", res.path(r.namespace, r.name, subresource), body=body,
                 content_type=MERGE)


def eventually(check: Callable[[], bool], what: str, timeout: float = 120.0) -> None:
    """Poll until check() holds. Generous: after a CRD is created the garbage collector
    learns its kind only at its next discovery resync (every 30s)."""
    wait_for(what, check, timeout)


def changes_of(result: SyncResult, r: ObjRef) -> list[Change]:
    return [c for c in result.changes.changes if c.ref == r]


def action(result: SyncResult, r: ObjRef) -> Action:
    return changes_of(result, r)[-1].action


def finish_job(kube: Kube, r: ObjRef, *, ok: bool) -> None:
    """No kubelet runs here: write the status a job controller would."""
    patch(kube, r, {"status": finished_job_status(ok=ok)}, subresource="status")


def gone(kube: Kube, *refs: ObjRef) -> Callable[[], bool]:
    return lambda: all(get(kube, r) is None for r in refs)


# --- prune ---------------------------------------------------------------------------------------


def test_a_custom_resource_removed_from_the_repository_is_deleted_with_its_children(
        kube: Kube, repo: Repo, ns: str) -> None:
    repo.write({"katalog.yaml": KATALOG, "crd.yaml": CRD,
                "w.yaml": widget("w", ns, image="nginx", port=8080)})
    first = repo.sync()
    assert not first.changes.failed, first.changes.failed
    w, deploy, svc = ref("Widget", "w", ns), ref("Deployment", "w", ns), ref("Service", "w-svc", ns)
    assert FINALIZER in must(kube, w)["metadata"]["finalizers"]
    assert {w, deploy, svc} <= repo.stored().refs()

    repo.remove("w.yaml")
    second = repo.sync()
    assert action(second, w) is Action.DELETED and second.pruned == 1
    assert not second.changes.failed and second.refused == []
    eventually(gone(kube, w, deploy, svc), "the custom resource and its children are gone")
    stored = repo.stored()
    assert not stored.refs() & {w, deploy, svc} and stored == second.inventory


def test_a_child_removed_from_the_katalog_is_pruned(kube: Kube, repo: Repo, ns: str) -> None:
    repo.write({"katalog.yaml": KATALOG, "crd.yaml": CRD,
                "w.yaml": widget("w", ns, image="nginx", port=8080)}).sync()
    repo.write({"katalog.yaml": WITHOUT_SERVICES})
    result = repo.sync()
    svc, deploy = ref("Service", "w-svc", ns), ref("Deployment", "w", ns)
    assert action(result, svc) is Action.DELETED and result.pruned == 1
    assert action(result, deploy) is Action.UNCHANGED
    assert get(kube, svc) is None and get(kube, deploy) is not None
    assert svc not in repo.stored() and deploy in repo.stored()


@pytest.mark.parametrize(("edit", "reason"), [
    ({"metadata": {"labels": {"app.kubernetes.io/managed-by": None}}},
     "not deleted: label app.kubernetes.io/managed-by is not orksync any more"),
    ({"metadata": {"annotations": {"orksync.io/prune": "disabled"}}},
     "not deleted: annotated orksync.io/prune: disabled"),
    ({"metadata": {"annotations": {"orksync.io/inventory": "orksync-system/other"}}},
     "not deleted: annotation orksync.io/inventory names the inventory orksync-system/other, "
     "not orksync-system/{name} (another sync root wrote it last)"),
], ids=["ownership-label-removed-by-hand", "prune-disabled-annotation",
        "written-last-by-another-sync-root"])
def test_a_live_object_that_is_no_longer_ours_or_opted_out_is_skipped_not_pruned(
        kube: Kube, repo: Repo, ns: str, edit: dict[str, Any], reason: str) -> None:
    repo.write({"katalog.yaml": KATALOG, "crd.yaml": CRD,
                "w.yaml": widget("w", ns, image="nginx", port=8080)}).sync()
    svc = ref("Service", "w-svc", ns)
    patch(kube, svc, edit)
    repo.write({"katalog.yaml": WITHOUT_SERVICES})
    result = repo.sync()
    (change,) = changes_of(result, svc)
    assert (change.action, change.message) == (Action.SKIPPED, reason.format(name=repo.name))
    assert result.pruned == 0 and get(kube, svc) is not None
    assert svc not in repo.stored()  # no longer ours: forgotten, never deleted


def test_a_render_error_prunes_nothing(kube: Kube, repo: Repo, ns: str) -> None:
    repo.write({"katalog.yaml": KATALOG, "crd.yaml": CRD,
                "w.yaml": widget("w", ns, image="nginx", port=8080)}).sync()
    before = repo.stored()
    repo.write({"w.yaml": widget("w", ns, port=8080)})  # image is required: render error
    result = repo.sync()
    assert result.refused == ["the render had 1 error(s): nothing is pruned"]
    assert result.pruned == 0 and not any(c.action is Action.DELETED
                                          for c in result.changes.changes)
    for r in (ref("Widget", "w", ns), ref("Deployment", "w", ns), ref("Service", "w-svc", ns)):
        assert get(kube, r) is not None
    assert repo.stored() == before


def test_an_empty_render_refuses_to_prune_everything(kube: Kube, repo: Repo, ns: str) -> None:
    repo.write({"katalog.yaml": KATALOG, "crd.yaml": CRD,
                "w.yaml": widget("w", ns, image="nginx", port=8080)}).sync()
    before = repo.stored()
    for rel in ("katalog.yaml", "crd.yaml", "w.yaml"):
        repo.remove(rel)
    result = repo.sync()
    assert len(result.refused) == 1
    assert result.refused[0].startswith(f"the render is empty and the inventory holds "
                                        f"{len(before)} object(s)")
    assert result.pruned == 0 and result.changes.changes == []
    assert get(kube, ref("Widget", "w", ns)) is not None and repo.stored() == before


def test_a_custom_resource_that_renders_no_children_while_it_had_some_refuses(
        kube: Kube, repo: Repo, ns: str) -> None:
    repo.write({"katalog.yaml": KATALOG, "crd.yaml": CRD,
                "w.yaml": widget("w", ns, image="nginx", port=8080)}).sync()
    repo.write({"katalog.yaml": katalog("        onCreate: {}\n")})
    result = repo.sync()
    w = ref("Widget", "w", ns)
    assert result.refused == [f"{w} renders no children where it had 2: refusing to prune "
                              "them (allow orphaning children to confirm)"]
    assert result.pruned == 0
    kept = {ref("Deployment", "w", ns), ref("Service", "w-svc", ns)}
    assert all(get(kube, r) is not None for r in kept) and kept <= repo.stored().refs()
    allowed = repo.sync(allow_orphaning_children=True)
    assert allowed.pruned == 2 and all(get(kube, r) is None for r in kept)


def test_a_failed_delete_stays_in_the_inventory_and_the_next_sync_deletes_it(
        kube: Kube, repo: Repo, ns: str) -> None:
    repo.write({"katalog.yaml": KATALOG, "crd.yaml": CRD,
                "w.yaml": widget("w", ns, image="nginx", port=8080)}).sync()
    svc = ref("Service", "w-svc", ns)
    policy = f"deny-delete-{ns}"
    vap = kube.resource("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy")
    binding = kube.resource("admissionregistration.k8s.io/v1",
                            "ValidatingAdmissionPolicyBinding")
    kube.create(vap, {"apiVersion": vap.api_version, "kind": vap.kind,
                      "metadata": {"name": policy},
                      "spec": {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": [
                          {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["DELETE"],
                           "resources": ["services"]}]},
                          "validations": [{"expression": "request.operation != 'DELETE'",
                                           "message": "deletes are denied by the test"}]}},
                field_manager="orksync-tests")
    kube.create(binding, {"apiVersion": binding.api_version, "kind": binding.kind,
                          "metadata": {"name": policy},
                          "spec": {"policyName": policy, "validationActions": ["Deny"],
                                   "matchResources": {"namespaceSelector": {"matchLabels": {
                                       "kubernetes.io/metadata.name": ns}}}}},
                field_manager="orksync-tests")
    svc_path = kube.resource("v1", "Service").path(ns, "w-svc")

    def delete_denied() -> bool:
        try:
            kube.request("DELETE", svc_path, query={"dryRun": "All"})
        except ClusterError as err:
            return err.status in (403, 422)
        return False

    try:
        eventually(delete_denied, "the admission policy denies deletes")
        repo.write({"katalog.yaml": WITHOUT_SERVICES})
        denied = repo.sync()
        (change,) = changes_of(denied, svc)
        assert change.action is Action.FAILED and "deletes are denied by the test" in \
            change.message
        assert svc in denied.inventory and svc in repo.stored()
        assert get(kube, svc) is not None
    finally:
        kube.delete(binding, "", policy)
        kube.delete(vap, "", policy)
    eventually(lambda: not delete_denied(), "the admission policy is gone")
    retried = repo.sync()
    assert action(retried, svc) is Action.DELETED and retried.pruned == 1
    assert get(kube, svc) is None and svc not in repo.stored()


def test_a_cluster_scoped_child_of_a_namespaced_custom_resource_is_deleted_with_it(
        kube: Kube, repo: Repo, ns: str) -> None:
    repo.write({"katalog.yaml": CLUSTER_ROLE, "crd.yaml": CRD, "w.yaml": widget("w", ns)})
    assert not repo.sync().changes.failed
    role = ref("ClusterRole", f"{ns}-w-reader")
    live = get(kube, role)
    assert live is not None and "ownerReferences" not in live["metadata"]
    repo.remove("w.yaml")
    result = repo.sync()
    assert action(result, role) is Action.DELETED
    assert action(result, ref("Widget", "w", ns)) is Action.DELETED
    assert get(kube, role) is None
    eventually(gone(kube, ref("Widget", "w", ns), ref("ConfigMap", "w-config", ns)),
               "the custom resource and its namespaced child are gone")


def test_an_object_whose_condition_turned_false_is_deleted_only_when_owned(
        kube: Kube, repo: Repo, ns: str) -> None:
    repo.write({"katalog.yaml": CONDITIONAL, "crd.yaml": CRD,
                "w.yaml": widget("w", ns, flag="off")}).sync()
    w, mine = ref("Widget", "w", ns), ref("ConfigMap", "w-flagged", ns)
    cm = kube.resource("v1", "ConfigMap")
    # left by an earlier agent (not in this inventory) with w's markers
    kube.create(cm, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "w-flagged", "namespace": ns,
        "labels": {"app.kubernetes.io/managed-by": "orksync", "orkestra-owner": "w"},
        "annotations": {"orksync.io/owner": str(w)}}}, field_manager="orksync-tests")
    result = repo.sync()
    assert changes_of(result, mine) == [Change(ref=mine, action=Action.DELETED,
                                               message="condition false")]
    assert get(kube, mine) is None and result.pruned == 1
    assert get(kube, ref("ConfigMap", "w-always", ns)) is not None


# --- teardown of custom resources (onDelete) ------------------------------------------------------


def test_on_delete_jobs_run_without_owner_references_and_hold_the_finalizer_until_complete(
        kube: Kube, repo: Repo, ns: str) -> None:
    repo.write({"katalog.yaml": ON_DELETE_JOB, "crd.yaml": CRD, "w.yaml": widget("w", ns)})
    assert not repo.sync().changes.failed
    w, job, cm = ref("Widget", "w", ns), ref("Job", "w-cleanup", ns), \
        ref("ConfigMap", "w-config", ns)
    patch(kube, w, {"status": {"phase": "Running"}}, subresource="status")
    repo.remove("w.yaml")
    waiting = repo.sync()
    assert action(waiting, job) is Action.FAILED
    assert changes_of(waiting, job)[-1].message == "onDelete job not finished in time"
    assert action(waiting, w) is Action.FAILED
    live_job = get(kube, job)
    assert live_job is not None and "ownerReferences" not in live_job["metadata"]
    command = live_job["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command == ["sh", "-c", "echo cleanup Running"]  # rendered from the live status
    live_cr = must(kube, w)
    assert live_cr["metadata"]["deletionTimestamp"] and \
        FINALIZER in live_cr["metadata"]["finalizers"]
    assert get(kube, cm) is not None  # children stay while onDelete runs
    assert {w, cm} <= repo.stored().refs()

    finish_job(kube, job, ok=True)
    done = repo.sync()
    assert changes_of(done, job)[-1] == Change(ref=job, action=Action.UNCHANGED,
                                               message="onDelete job complete")
    assert action(done, w) is Action.DELETED and not done.changes.failed
    eventually(gone(kube, w, cm), "the custom resource and its child are gone")
    assert get(kube, job) is not None  # no owner reference: it outlives the custom resource
    assert not repo.stored().refs() & {w, cm}


def test_a_failed_on_delete_job_keeps_the_finalizer(kube: Kube, repo: Repo, ns: str) -> None:
    repo.write({"katalog.yaml": ON_DELETE_JOB, "crd.yaml": CRD, "w.yaml": widget("w", ns)})
    repo.sync()
    w, job = ref("Widget", "w", ns), ref("Job", "w-cleanup", ns)
    repo.remove("w.yaml")
    repo.sync()
    finish_job(kube, job, ok=False)
    result = repo.sync()
    assert changes_of(result, job)[-1] == Change(ref=job, action=Action.FAILED,
                                                 message="onDelete job failed: Test")
    assert action(result, w) is Action.FAILED
    assert "finalizer kept" in changes_of(result, w)[-1].message
    time.sleep(1)
    live = get(kube, w)
    assert live is not None and FINALIZER in live["metadata"]["finalizers"]
    assert w in repo.stored()


def test_ordered_groups_run_jobs_and_delete_stage_by_stage_only_what_is_owned(
        kube: Kube, repo: Repo, ns: str) -> None:
    repo.write({"katalog.yaml": ORDERED, "crd.yaml": CRD, "w.yaml": widget("w", ns)})
    assert not repo.sync().changes.failed
    w, job = ref("Widget", "w", ns), ref("Job", "w-backup", ns)
    a, b, foreign = (ref("ConfigMap", n, ns) for n in ("w-a", "w-b", "w-foreign"))
    kube.create(kube.resource("v1", "ConfigMap"), {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "w-foreign", "namespace": ns}},
                field_manager="orksync-tests")
    repo.remove("w.yaml")

    # stage 1 runs its Job first (run, not deleted); nothing is deleted until it completes
    first = repo.sync()
    assert action(first, job) is Action.FAILED and action(first, w) is Action.FAILED
    assert get(kube, job) is not None
    assert not must(kube, a)["metadata"].get("deletionTimestamp")

    # a foreign finalizer blocks stage 1: stage 2 must not start
    finish_job(kube, job, ok=True)
    patch(kube, a, {"metadata": {"finalizers": ["test.orksync.io/hold"]}})
    blocked = repo.sync()
    assert [c.action for c in changes_of(blocked, a)] == [Action.DELETED, Action.FAILED]
    assert changes_of(blocked, a)[-1].message == "onDelete first: still present after 3s"
    assert must(kube, a)["metadata"].get("deletionTimestamp")
    assert not must(kube, b)["metadata"].get("deletionTimestamp")
    assert changes_of(blocked, b) == [] and get(kube, w) is not None

    patch(kube, a, {"metadata": {"finalizers": None}})
    done = repo.sync()
    assert action(done, b) is Action.DELETED and action(done, w) is Action.DELETED
    assert changes_of(done, foreign)[-1].action is Action.SKIPPED  # same name, not ours
    assert get(kube, a) is None and get(kube, b) is None and get(kube, foreign) is not None
    eventually(gone(kube, w), "the custom resource is gone")


def test_a_custom_resource_deleted_by_hand_runs_its_teardown_and_git_brings_it_back(
        kube: Kube, repo: Repo, ns: str) -> None:
    repo.write({"katalog.yaml": ON_DELETE_JOB, "crd.yaml": CRD, "w.yaml": widget("w", ns)})
    repo.sync()
    w, job = ref("Widget", "w", ns), ref("Job", "w-cleanup", ns)
    old_uid = must(kube, w)["metadata"]["uid"]
    kube.delete(kube.resource(WIDGET_API, "Widget"), ns, "w")
    held = repo.sync()
    assert action(held, job) is Action.FAILED and action(held, w) is Action.FAILED
    finish_job(kube, job, ok=True)
    released = repo.sync()
    assert action(released, w) is Action.DELETED
    eventually(gone(kube, w), "the custom resource is gone")
    back = repo.sync()
    assert action(back, w) is Action.CREATED
    assert must(kube, w)["metadata"]["uid"] != old_uid


def test_a_no_change_sync_lists_each_custom_resource_kind_once(
        kube: Kube, repo: Repo, ns: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The teardown check (custom resources deleted out of band) reads the Applier's LIST
    of the kind instead of listing it again; the test above shows it still finds them."""
    repo.write({"katalog.yaml": ON_DELETE_JOB, "crd.yaml": CRD, "w.yaml": widget("w", ns)})
    repo.sync()
    sent = record_requests(kube, monkeypatch)
    again = repo.sync()
    assert {c.action for c in again.changes.changes} == {Action.UNCHANGED}
    widgets = ("GET", kube.resource(WIDGET_API, "Widget").path())
    assert sent.count(widgets) == 1, sent


def test_a_custom_resource_deleted_after_the_apply_listed_it_is_torn_down_when_its_crd_changed(
        kube: Kube, repo: Repo, ns: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The apply lists every kind when it starts, before the CRD stage writes. A stage of a
    kind whose CRD this apply wrote lists again, and the teardown check reads that LIST:
    a custom resource deleted by hand after the CRD was written (after the first LIST)
    still has its teardown started by this sync."""
    repo.write({"katalog.yaml": ON_DELETE_JOB, "crd.yaml": CRD, "w.yaml": widget("w", ns)})
    repo.sync()
    w, job = ref("Widget", "w", ns), ref("Job", "w-cleanup", ns)
    repo.write({"crd.yaml": CRD.replace("singular: widget}", "singular: widget, "
                                        "shortNames: [wdgt]}")})
    res = kube.resource(WIDGET_API, "Widget")
    send = kube.request_with_status
    sent: list[tuple[str, str]] = []
    listed = threading.Event()

    def delete_after_the_crd_write(method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
        sent.append((method, path))
        answer = send(method, path, **kwargs)
        if (method, path) == ("GET", res.path()):
            listed.set()
        if method == "PATCH" and path.endswith("/customresourcedefinitions/widgets."
                                               "test.orksync.io"):
            assert listed.wait(30), "the first LIST of the kind is answered"
            send("DELETE", res.path(ns, "w"))
        return answer

    monkeypatch.setattr(kube, "request_with_status", delete_after_the_crd_write)
    try:
        held = repo.sync()
    finally:
        monkeypatch.undo()
        repo.write({"crd.yaml": CRD}).sync()  # the CRD as the other tests have it
    crd_write = sent.index(("PATCH", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                                     "widgets.test.orksync.io"))
    assert ("GET", res.path()) in sent[:crd_write], "the kind was listed before the CRD write"
    assert changes_of(held, job), "the teardown of w started in this sync"
    assert action(held, job) is Action.FAILED and action(held, w) is Action.FAILED
    assert must(kube, w)["metadata"].get("deletionTimestamp")
    assert get(kube, job) is not None, "its onDelete Job runs: the teardown started"


# --- the inventory ConfigMap ---------------------------------------------------------------------


def test_the_inventory_namespace_is_created_when_the_inventory_is_first_written(
        kube: Kube, repo: Repo, ns: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sync reads the inventory without checking its namespace; the namespace is made
    when missing just before the inventory is written, so a no-change sync, which writes
    none, sends one GET for the inventory and nothing else for it."""
    inventory_ns = f"inv-{uuid.uuid4().hex[:8]}"
    repo.write({"katalog.yaml": KATALOG, "crd.yaml": CRD, "w.yaml": widget("w", ns)})
    rendered = render_catalog(load_repository(repo.root))

    def sync() -> SyncResult:
        return sync_once(kube, SyncRequest(rendered, inventory_name=repo.name,
                                           inventory_namespace=inventory_ns))

    namespaces = kube.resource("v1", "Namespace")
    try:
        first = sync()
        assert not first.changes.failed, first.changes.failed
        created = kube.get(namespaces, "", inventory_ns)
        assert created["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "orksync"
        assert read_inventory(kube, repo.name, inventory_ns) == first.inventory
        sent = record_requests(kube, monkeypatch)
        again = sync()
        monkeypatch.undo()
        assert {c.action for c in again.changes.changes} == {Action.UNCHANGED}
        assert [s for s in sent if inventory_ns in s[1]] == [
            ("GET", f"/api/v1/namespaces/{inventory_ns}/configmaps/"
                    f"orksync-inventory-{repo.name}")], sent
    finally:
        kube.delete(namespaces, "", inventory_ns)


def test_every_object_names_its_inventory_and_another_source_is_refused_before_any_write(
        kube: Kube, repo: Repo, ns: str, tmp_path: Path) -> None:
    """The inventory records its source; a sync of another source with the same name is
    refused before it writes (nothing deleted, nothing created), and the flag that takes
    the inventory over for a moved repository does prune what the new source lacks."""
    a, b = Source.of(str(tmp_path / "a")), Source.of(str(tmp_path / "b"))
    repo.write({"katalog.yaml": KATALOG, "crd.yaml": CRD,
                "w.yaml": widget("w", ns, image="nginx", port=8080)})
    first = repo.sync(source=a)
    assert not first.changes.failed and repo.stored().source == a
    w, deploy, svc = ref("Widget", "w", ns), ref("Deployment", "w", ns), ref("Service", "w-svc", ns)
    for r in (w, deploy, svc):
        assert must(kube, r)["metadata"]["annotations"]["orksync.io/inventory"] == \
            f"orksync-system/{repo.name}"
    before = {r: must(kube, r)["metadata"]["uid"] for r in (w, deploy, svc)}

    repo.remove("w.yaml")
    repo.write({"v.yaml": widget("v", ns, image="nginx", port=8080)})
    with pytest.raises(InventoryError) as refused:
        repo.sync(source=b)
    assert str(refused.value) == (
        f"ConfigMap/orksync-system/orksync-inventory-{repo.name}: this inventory holds "
        f"{len(first.inventory)} object(s) synced from {a}, not from {b}: refusing to sync "
        "(its prune would delete them). "
        "Give each source its own inventory with --name (the sync root's name, default: "
        "default), or, when the same repository moved, take the inventory over with "
        "--adopt-inventory (orksync sync, apply, diff and agent)")
    assert {r: must(kube, r)["metadata"]["uid"] for r in before} == before
    assert get(kube, ref("Widget", "v", ns)) is None and repo.stored() == first.inventory

    moved = repo.sync(source=b, adopt_inventory=True)
    assert action(moved, w) is Action.DELETED and repo.stored().source == b
    assert get(kube, ref("Widget", "v", ns)) is not None


def test_an_inventory_and_objects_of_an_earlier_orksync_are_adopted_and_still_pruned(
        kube: Kube, repo: Repo, ns: str, tmp_path: Path) -> None:
    """An inventory without a source and objects without `orksync.io/inventory` (what an
    earlier orksync wrote): the first sync records its source, and an object without the
    annotation is still pruned under the other ownership markers."""
    repo.write({"katalog.yaml": KATALOG, "crd.yaml": CRD,
                "w.yaml": widget("w", ns, image="nginx", port=8080)}).sync()
    svc = ref("Service", "w-svc", ns)
    write_inventory(kube, repo.stored().with_source(None), repo.name)  # as written before
    patch(kube, svc, {"metadata": {"annotations": {"orksync.io/inventory": None}}})
    assert repo.stored().source is None
    repo.write({"katalog.yaml": WITHOUT_SERVICES})
    source = Source.of(str(tmp_path / "repo"))
    result = repo.sync(source=source)
    assert action(result, svc) is Action.DELETED and get(kube, svc) is None
    assert repo.stored().source == source


def test_a_ten_thousand_entry_inventory_round_trips_through_a_configmap(kube: Kube) -> None:
    owners = [ref("Widget", f"w{i}", f"team-{i % 40}") for i in range(1000)]
    entries = [InventoryEntry(ref=o, uid=str(uuid.uuid4())) for o in owners]
    entries += [InventoryEntry(ref=ref(("Deployment", "Service", "ConfigMap")[i % 3],
                                       f"{owners[i % 1000].name}-c{i}",
                                       owners[i % 1000].namespace), owner=owners[i % 1000])
                for i in range(9000)]
    inventory = Inventory.of(entries)
    name = f"big-{uuid.uuid4().hex[:6]}"
    ensure_namespace(kube, DEFAULT_NAMESPACE)
    write_inventory(kube, inventory, name)
    assert read_inventory(kube, name) == inventory and len(inventory) == 10_000


def test_a_dry_run_deletes_nothing_and_stores_no_inventory(kube: Kube, repo: Repo,
                                                          ns: str) -> None:
    repo.write({"katalog.yaml": KATALOG, "crd.yaml": CRD,
                "w.yaml": widget("w", ns, image="nginx", port=8080)}).sync()
    before = repo.stored()
    repo.write({"katalog.yaml": WITHOUT_SERVICES})
    result = repo.sync(apply=ApplyOptions(dry_run=True))
    svc = ref("Service", "w-svc", ns)
    assert changes_of(result, svc) == [Change(ref=svc, action=Action.DELETED,
                                              message="dry run")]
    assert get(kube, svc) is not None and repo.stored() == before


def test_a_crd_is_pruned_only_when_enabled_and_after_its_custom_resources(
        kube: Kube, repo: Repo, ns: str) -> None:
    suffix = uuid.uuid4().hex[:6]
    gadget_crd = (CRD.replace("widgets.", f"gadgets{suffix}.")
                  .replace("kind: Widget, plural: widgets, singular: widget",
                           f"kind: Gadget{suffix}, plural: gadgets{suffix}, "
                           f"singular: gadget{suffix}"))
    gadget_katalog = (katalog("        onCreate:\n          configMaps: [{name: "
                              "\"{{ .metadata.name }}-config\"}]\n")
                      .replace("name: widgets}", "name: gadgets}")
                      .replace("    widget:", "    gadget:")
                      .replace("./crd.yaml", "./gadget-crd.yaml"))
    repo.write({"katalog.yaml": KATALOG, "crd.yaml": CRD, "gadgets.yaml": gadget_katalog,
                "gadget-crd.yaml": gadget_crd,
                "g.yaml": f"apiVersion: {WIDGET_API}\nkind: Gadget{suffix}\n"
                          f"metadata: {{name: g, namespace: {ns}}}\nspec: {{}}\n"})
    assert not repo.sync().changes.failed
    crd = ObjRef(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition",
                 name=f"gadgets{suffix}.test.orksync.io")
    g = ObjRef(api_version=WIDGET_API, kind=f"Gadget{suffix}", namespace=ns, name="g")
    for rel in ("gadgets.yaml", "gadget-crd.yaml", "g.yaml"):
        repo.remove(rel)
    kept = repo.sync()
    assert action(kept, g) is Action.DELETED
    assert kept.refused == [f"{crd} left the repository but CRDs are not pruned (deleting "
                            "one deletes every custom resource of its kind)"]
    assert get(kube, crd) is not None and crd in repo.stored()
    pruned = repo.sync(prune_crds=True)
    assert action(pruned, crd) is Action.DELETED and crd not in repo.stored()
    eventually(gone(kube, crd), "the CRD is gone")


def test_on_delete_jobs_do_not_hold_a_namespace_that_is_being_deleted(
        kube: Kube, repo: Repo, ns: str) -> None:
    repo.write({"katalog.yaml": ON_DELETE_JOB, "crd.yaml": CRD, "w.yaml": widget("w", ns)})
    assert not repo.sync().changes.failed
    kube.delete(kube.resource("v1", "Namespace"), "", ns)
    w, job = ref("Widget", "w", ns), ref("Job", "w-cleanup", ns)
    eventually(lambda: bool(must(kube, w)["metadata"].get("deletionTimestamp")),
               "the namespace controller deleted the custom resource")
    result = repo.sync()
    assert changes_of(result, job)[-1] == Change(
        ref=job, action=Action.SKIPPED, message=f"not run: namespace {ns} is being deleted")
    assert [c.action for c in changes_of(result, w)][-1] is Action.DELETED
    eventually(gone(kube, ref("Namespace", ns)), "the namespace is gone")


def test_the_agent_records_its_repository_and_path_and_says_each_prune_refusal_once(
        kube: Kube, ns: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The agent's inventory records --repo-url and --path; a prune refusal is one log
    line (the sync logs it; the agent does not repeat it)."""
    from orksync.agent.config import AgentConfig
    from orksync.agent.runner import Agent

    served = tmp_path / "served"
    write_repo(served / "deploy", {"katalog.yaml": KATALOG, "crd.yaml": CRD,
                                   "w.yaml": widget("w", ns, image="nginx", port=8080)})
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=served, check=True)

    def commit(message: str) -> None:
        subprocess.run(["git", "add", "-A"], cwd=served, check=True)
        subprocess.run([*git, "commit", "-qm", message], cwd=served, check=True)

    commit("first")
    name, url = f"agent-{uuid.uuid4().hex[:8]}", f"file://{served}"
    agent = Agent(AgentConfig(repo_url=url, path="deploy", state_dir=tmp_path / "state",
                              leader_elect=False, name=name), kube)
    assert agent.sync()
    assert read_inventory(kube, name).source == Source(location=url, path="deploy")

    write_repo(served / "deploy", {"w.yaml": widget("w", ns, port=8080)})  # no image: error
    commit("broken")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="orksync"):
        assert not agent.sync()
    said = [r.getMessage() for r in caplog.records if "nothing is pruned" in r.getMessage()]
    assert said == ["prune refused: the render had 1 error(s): nothing is pruned"], said
