"""Plain manifests (objects of the repository no Katalog handles) against the real control
plane: applied before the custom resources, recorded in the inventory, pruned when they
leave Git, never pruned after a broken input, never taking over a custom resource's
child; shown by `orksync status`. orksync.katalog.loader, orksync.apply.write,
orksync.apply.inventory, orksync.lifecycle.overview."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orksync.apply.inventory import INVENTORY_ANNOTATION
from orksync.cluster.kube import Kube
from orksync.errors import ClusterError
from orksync.katalog.loader import load_repository
from orksync.lifecycle.overview import read_rows
from orksync.lifecycle.teardown import FINALIZER, DeletionOptions, remove_finalizer
from orksync.model import MANAGED_BY_LABEL, Action, ObjRef
from orksync.render.engine import render_catalog
from orksync.sync import (
    SyncOptions,
    SyncRequest,
    SyncResult,
    hook_renderers,
    read_inventory,
    sync_once,
)
from testbed.controlplane import ControlPlane
from tests.helpers import CRD, KATALOG, widget, write_repo

pytestmark = pytest.mark.cluster


@pytest.fixture
def kube(control_plane: ControlPlane) -> Iterator[Kube]:
    k = Kube.from_kubeconfig(control_plane.kubeconfig)
    yield k
    k.close()


@pytest.fixture
def ns(kube: Kube) -> Iterator[str]:
    """The namespace a plain Namespace manifest declares; afterwards our finalizer is
    stripped from the custom resources left in it and it is deleted."""
    name = f"plain-{uuid.uuid4().hex[:8]}"
    yield name
    try:
        res = kube.resource("test.orksync.io/v1", "Widget")
        for item in kube.list(res, namespace=name):
            remove_finalizer(kube, res, item)
        kube.delete(kube.resource("v1", "Namespace"), "", name)
    except ClusterError:
        pass


def ref(kind: str, name: str, ns: str = "") -> ObjRef:
    api = {"Widget": "test.orksync.io/v1", "Deployment": "apps/v1",
           "ClusterRole": "rbac.authorization.k8s.io/v1"}.get(kind, "v1")
    return ObjRef(api_version=api, kind=kind, namespace=ns, name=name)


def get(kube: Kube, r: ObjRef) -> dict[str, Any] | None:
    return kube.get_or_none(kube.resource(r.api_version, r.kind), r.namespace, r.name)


def sync(kube: Kube, root: Path, name: str) -> SyncResult:
    catalog = load_repository(root)
    rendered = render_catalog(catalog)
    return sync_once(kube, SyncRequest(rendered, inventory_name=name, hooks=hook_renderers(catalog),
                                       options=SyncOptions(deletion=DeletionOptions(poll=0.1))))


def platform(ns: str, role: str) -> str:
    """A Namespace, a Secret and a ConfigMap in it, and a ClusterRole: what a platform
    team keeps next to its Katalogs."""
    return f"""\
apiVersion: v1
kind: Namespace
metadata:
  name: {ns}
---
apiVersion: v1
kind: Secret
metadata:
  name: registry-credentials
  namespace: {ns}
stringData:
  user: robot
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: {ns}
  labels: {{team: platform}}
data:
  level: info
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {role}
rules:
  - {{apiGroups: [""], resources: [pods], verbs: [get]}}
"""


def test_plain_manifests_are_applied_first_recorded_pruned_and_shown(
        kube: Kube, tmp_path: Path, ns: str) -> None:
    role = f"{ns}-reader"
    root = write_repo(tmp_path / "repo", {
        "crd.yaml": CRD, "katalog.yaml": KATALOG,
        "platform/base.yaml": platform(ns, role),
        "apps/shop.yaml": widget("shop", ns, image="nginx", replicas=1, port=80)})
    name = f"plain-{uuid.uuid4().hex[:8]}"
    try:
        first = sync(kube, root, name)
        assert not first.changes.failed, first.changes.failed
        order = [c.ref for c in first.changes.changes if c.action is Action.CREATED]
        # the Namespace before what lives in it, every manifest before the custom resource
        assert order.index(ref("Namespace", ns)) < order.index(
            ref("Secret", "registry-credentials", ns))
        assert max(order.index(ref(k, n, s)) for k, n, s in (
            ("Secret", "registry-credentials", ns), ("ConfigMap", "settings", ns),
            ("ClusterRole", role, ""))) < order.index(ref("Widget", "shop", ns))
        settings = get(kube, ref("ConfigMap", "settings", ns))
        assert settings is not None and settings["data"] == {"level": "info"}
        meta = settings["metadata"]
        assert meta["labels"] == {"team": "platform", MANAGED_BY_LABEL: "orksync"}
        assert meta["annotations"][INVENTORY_ANNOTATION] == f"orksync-system/{name}"
        assert FINALIZER not in (meta.get("finalizers") or [])  # not a custom resource
        secret = get(kube, ref("Secret", "registry-credentials", ns))
        assert secret is not None and secret["data"] == {"user": "cm9ib3Q="}
        stored = read_inventory(kube, name).by_ref()
        assert stored[ref("ConfigMap", "settings", ns)].plain
        assert stored[ref("Namespace", ns)].plain
        assert not stored[ref("Widget", "shop", ns)].plain
        assert stored[ref("Widget", "shop", ns)].is_custom_resource

        again = sync(kube, root, name)
        assert {c.action for c in again.changes.changes} == {Action.UNCHANGED}

        rows = {str(r.ref): r for r in read_rows(kube, "orksync-system", [name])}
        assert rows[f"ConfigMap/{ns}/settings"].plain
        assert rows[f"ConfigMap/{ns}/settings"].health == "Current"
        assert rows[f"ClusterRole/{role}"].ready == "True"
        assert not rows[f"Widget.test.orksync.io/{ns}/shop"].plain

        # the ConfigMap and the ClusterRole leave Git: deleted, the rest stays
        (root / "platform/base.yaml").write_text(platform(ns, role).split("---\napiVersion: v1\n"
                                                                           "kind: ConfigMap")[0])
        pruned = sync(kube, root, name)
        assert not pruned.changes.failed, pruned.changes.failed
        deleted = {c.ref for c in pruned.changes.changes if c.action is Action.DELETED}
        assert deleted == {ref("ConfigMap", "settings", ns), ref("ClusterRole", role)}
        assert get(kube, ref("ConfigMap", "settings", ns)) is None
        assert get(kube, ref("ClusterRole", role)) is None
        assert get(kube, ref("Secret", "registry-credentials", ns)) is not None
        assert get(kube, ref("Widget", "shop", ns)) is not None
        assert ref("ConfigMap", "settings", ns) not in read_inventory(kube, name)
    finally:
        with contextlib.suppress(ClusterError):
            kube.delete(kube.resource("rbac.authorization.k8s.io/v1", "ClusterRole"), "", role)


def test_a_broken_manifest_is_an_error_naming_it_and_nothing_is_pruned(
        kube: Kube, tmp_path: Path, ns: str) -> None:
    good = (f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n---\n"
            f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: {ns}\n---\n"
            f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n  namespace: {ns}\n")
    root = write_repo(tmp_path / "repo", {
        "crd.yaml": CRD, "katalog.yaml": KATALOG, "platform/base.yaml": good,
        "apps/shop.yaml": widget("shop", ns, image="nginx", replicas=1, port=80)})
    name = f"plain-{uuid.uuid4().hex[:8]}"
    first = sync(kube, root, name)
    assert not first.changes.failed, first.changes.failed
    # ConfigMap a leaves Git while ConfigMap b breaks (a name that is a list), and the
    # Widget changes: the Widget still syncs, nothing is pruned
    broken = good.split("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a")[0] + \
        f"---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [b]\n  namespace: {ns}\n"
    write_repo(root, {"platform/base.yaml": broken,
                      "apps/shop.yaml": widget("shop", ns, image="nginx:2", replicas=1,
                                               port=80)})
    catalog = load_repository(root)
    assert [str(e) for e in catalog.errors] == [
        f"platform/base.yaml:9 ConfigMap/{ns}/? metadata.name: must be a string, not a list"]
    second = sync(kube, root, name)
    assert second.pruned == 0 and any("nothing is pruned" in r for r in second.refused)
    assert get(kube, ref("ConfigMap", "a", ns)) is not None
    assert get(kube, ref("ConfigMap", "b", ns)) is not None
    deployment = get(kube, ref("Deployment", "shop", ns))
    assert deployment is not None
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:2"
    assert ref("ConfigMap", "a", ns) in read_inventory(kube, name)  # not forgotten


def test_a_manifest_does_not_take_over_a_custom_resources_child(
        kube: Kube, tmp_path: Path, ns: str) -> None:
    """In one repository the render refuses it; across two sync roots the applier does."""
    files = {"crd.yaml": CRD, "katalog.yaml": KATALOG,
             "ns.yaml": f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n",
             "apps/shop.yaml": widget("shop", ns, image="nginx", replicas=1, port=80)}
    taken = (f"apiVersion: v1\nkind: Service\nmetadata:\n  name: shop-svc\n  namespace: {ns}\n"
             "spec:\n  ports: [{port: 81}]\n")
    same = write_repo(tmp_path / "same", {**files, "svc.yaml": taken})
    rendered = render_catalog(load_repository(same))
    assert [str(e) for e in rendered.errors] == [
        f"apps/shop.yaml Widget.test.orksync.io/{ns}/shop: renders Service/{ns}/shop-svc, "
        "which the manifest svc.yaml declares; an object has one owner"]

    apps = write_repo(tmp_path / "apps", files)
    assert not sync(kube, apps, f"apps-{uuid.uuid4().hex[:8]}").changes.failed
    other = write_repo(tmp_path / "other", {"svc.yaml": taken})
    result = sync(kube, other, f"other-{uuid.uuid4().hex[:8]}")
    failed = {str(c.ref): c.message for c in result.changes.failed}
    assert failed == {f"Service/{ns}/shop-svc": (
        f"exists as a child of Widget.test.orksync.io/{ns}/shop (annotation "
        "orksync.io/owner): a manifest does not take over an object a custom resource "
        "renders")}
    live = get(kube, ref("Service", "shop-svc", ns))
    assert live is not None and live["spec"]["ports"][0]["port"] == 80
    assert ref("Service", "shop-svc", ns) not in result.inventory  # not recorded as its own


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orksync", *args], capture_output=True,
                          text=True, timeout=120)


def test_render_apply_diff_status_and_tree_show_plain_manifests(
        control_plane: ControlPlane, tmp_path: Path, ns: str) -> None:
    """The command line: `render` writes manifests/, `apply DIR` applies them, `diff
    REPO` shows a changed manifest and the deletion of one that left Git, `status` and
    `tree` list them."""
    base = (f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n---\n"
            f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: {ns}\n"
            "data: {level: info}\n")
    root = write_repo(tmp_path / "repo", {
        "base.yaml": base,
        "b.yaml": f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n  namespace: {ns}\n"})
    kc, out = str(control_plane.kubeconfig), tmp_path / "out"
    name = f"cli-{uuid.uuid4().hex[:8]}"
    rendered = run("render", str(root), "-o", str(out))
    assert rendered.returncode == 0, rendered.stderr
    assert sorted(p.name for p in (out / "manifests").iterdir()) == [
        f"ConfigMap.{ns}.a.yaml", f"ConfigMap.{ns}.b.yaml", f"Namespace.{ns}.yaml"]
    applied = run("apply", str(out), "--kubeconfig", kc, "--name", name)
    assert applied.returncode == 0, applied.stderr
    assert f"created ConfigMap/{ns}/a" in applied.stderr

    (root / "b.yaml").unlink()
    (root / "base.yaml").write_text(base.replace("level: info", "level: debug"))
    diff = run("diff", str(root), "--kubeconfig", kc, "--name", name)
    assert diff.returncode == 1, diff.stderr
    assert "-  level: info\n+  level: debug" in diff.stdout
    assert f"ConfigMap/{ns}/b" in diff.stdout
    assert "deleted: the manifest left the repository (pruned)" in diff.stdout

    status = run("status", "--kubeconfig", kc, "--name", name, "-o", "json")
    assert status.returncode == 0, status.stderr
    rows = {f"{r['kind']}/{r['namespace']}/{r['name']}": r
            for r in json.loads(status.stdout)["items"]}
    assert rows[f"ConfigMap/{ns}/a"]["plain"] and rows[f"ConfigMap/{ns}/a"]["ready"] == "True"
    assert rows[f"Namespace//{ns}"]["health"] == "Current"
    tree = run("tree", f"ConfigMap/{ns}/a", "--kubeconfig", kc)
    assert tree.returncode == 0, tree.stderr
    assert f"ConfigMap/{ns}/a" in tree.stdout and "Current" in tree.stdout


def test_setup_apply_gives_a_copy_its_source_in_the_first_sync(
        kube: Kube, tmp_path: Path, ns: str) -> None:
    """The namespace-provisioner case: the Secret a Katalog copies lives in a setup.apply
    file; one sync from Git alone applies it before the custom resource's copy reads it.
    The file is in `.orksyncignore` (kept out of the walk, as a development-only file
    would be): named by setup.apply, it is applied all the same."""
    source_ns = f"{ns}-platform"
    katalog = KATALOG.replace(
        "      crdFile: ./crd.yaml\n",
        "      crdFile: ./crd.yaml\n      setup:\n        apply: [./setup.yaml]\n").replace(
        "        onCreate:\n",
        "        onCreate:\n          secrets:\n"
        "            - name: \"{{ .metadata.name }}-registry\"\n"
        "              fromSecret: registry-credentials\n"
        f"              fromNamespace: {source_ns}\n")
    root = write_repo(tmp_path / "repo", {
        "crd.yaml": CRD, "katalog.yaml": katalog,
        "setup.yaml": platform(source_ns, f"{ns}-reader").split("---\napiVersion: v1\n"
                                                                 "kind: ConfigMap")[0],
        "ns.yaml": f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n",
        ".orksyncignore": "setup.yaml\n",
        "apps/shop.yaml": widget("shop", ns, image="nginx", replicas=1, port=80)})
    try:
        result = sync(kube, root, f"setup-{uuid.uuid4().hex[:8]}")
        assert not result.changes.failed, result.changes.failed
        copy = get(kube, ref("Secret", "shop-registry", ns))
        assert copy is not None and copy["data"] == {"user": "cm9ib3Q="}
    finally:
        with contextlib.suppress(ClusterError):
            kube.delete(kube.resource("v1", "Namespace"), "", source_ns)


def test_depends_on_healthy_holds_the_dependent_until_its_dependency_is_ready(
        control_plane: ControlPlane, kube: Kube, tmp_path: Path, ns: str) -> None:
    """A gadget whose entry says dependsOn {widget: healthy} is neither applied nor pruned
    while the widget is not Ready (the first sync applies the widget, whose status says
    Ready only afterwards); the next sync applies it."""
    katalog = KATALOG.split("        onCreate:")[0] + """\
        onCreate:
          configMaps: [{name: "{{ .metadata.name }}-w"}]
    gadget:
      crdFile: ./gadget-crd.yaml
      dependsOn: {widget: healthy}
      operatorBox:
        onCreate:
          configMaps: [{name: "{{ .metadata.name }}-g"}]
"""
    gadget_crd = CRD.replace("widgets", "gadgets").replace("Widget", "Gadget").replace(
        "widget", "gadget")
    root = write_repo(tmp_path / "repo", {
        "crd.yaml": CRD, "gadget-crd.yaml": gadget_crd, "katalog.yaml": katalog,
        "ns.yaml": f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n",
        "w.yaml": widget("w", ns),
        "g.yaml": widget("g", ns).replace("Widget", "Gadget")})
    kc, name = str(control_plane.kubeconfig), f"dep-{uuid.uuid4().hex[:8]}"
    gadget = ObjRef(api_version="test.orksync.io/v1", kind="Gadget", namespace=ns, name="g")
    try:
        first = run("sync", str(root), "--once", "--kubeconfig", kc, "--name", name)
        assert first.returncode == 0, first.stderr
        assert (f"skipped Gadget.test.orksync.io/{ns}/g: waiting: dependsOn widget: "
                f"Widget.test.orksync.io/{ns}/w is not healthy yet (not applied yet); "
                "rendered by a sync after it is") in first.stderr, first.stderr
        assert get(kube, gadget) is None and get(kube, ref("ConfigMap", "g-g", ns)) is None
        widget_live = get(kube, ref("Widget", "w", ns))
        assert widget_live is not None
        assert {c["type"]: c["status"] for c in widget_live["status"]["conditions"]}[
            "Ready"] == "True"
        second = run("sync", str(root), "--once", "--kubeconfig", kc, "--name", name)
        assert second.returncode == 0, second.stderr
        assert get(kube, gadget) is not None and get(kube, ref("ConfigMap", "g-g", ns))
    finally:
        try:
            res = kube.resource("test.orksync.io/v1", "Gadget")
            for item in kube.list(res, namespace=ns):
                remove_finalizer(kube, res, item)
        except ClusterError:
            pass
