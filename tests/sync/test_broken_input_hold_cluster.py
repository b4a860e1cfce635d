"""A broken input deletes nothing, through the command line against the real control plane:
a plain manifest whose apiVersion is misspelled and a file that is not YAML are errors
naming file:line, and the prune of what was last applied from them is held (and said so)
while the rest syncs; a Katalog whose crdFile is missing never turns its custom resources
into plain manifests: they keep their finalizer and their children, and one deleted
meanwhile waits for its onDelete until the Katalog loads. A file deleted from Git is still
pruned. orksync.katalog.loader, orksync.apply.inventory (plan_prune), orksync.sync
(hold_reclassified, finish_terminating)."""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orksync.cluster.kube import Kube
from orksync.errors import ClusterError
from orksync.lifecycle.teardown import FINALIZER, remove_finalizer
from orksync.model import ObjRef
from orksync.sync import read_inventory
from testbed.controlplane import ControlPlane
from testbed.gitdaemon import GitDaemon
from tests.agent.test_agent_cluster import AgentProcess, commit
from tests.helpers import CRD, KATALOG, katalog, wait_for, widget, write_repo

pytestmark = pytest.mark.cluster


@pytest.fixture
def kube(control_plane: ControlPlane) -> Iterator[Kube]:
    k = Kube.from_kubeconfig(control_plane.kubeconfig)
    yield k
    k.close()


@pytest.fixture
def ns(kube: Kube) -> Iterator[str]:
    """The namespace the repository's Namespace manifest declares; afterwards our
    finalizer is taken off the Widgets left in it, and it is deleted."""
    name = f"held-{uuid.uuid4().hex[:8]}"
    yield name
    with contextlib.suppress(ClusterError):
        res = kube.resource("test.orksync.io/v1", "Widget")
        for item in kube.list(res, namespace=name):
            remove_finalizer(kube, res, item)
        kube.delete(kube.resource("v1", "Namespace"), "", name)


def orksync(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orksync", *args], capture_output=True,
                          text=True, timeout=180)


def sync(control_plane: ControlPlane, repo: Path, name: str) -> subprocess.CompletedProcess[str]:
    return orksync("sync", str(repo), "--once", "--kubeconfig", str(control_plane.kubeconfig),
                   "--name", name)


def ref(kind: str, name: str, ns: str = "") -> ObjRef:
    api = {"Widget": "test.orksync.io/v1", "Deployment": "apps/v1", "Job": "batch/v1"}
    return ObjRef(api_version=api.get(kind, "v1"), kind=kind, namespace=ns, name=name)


def get(kube: Kube, r: ObjRef) -> dict[str, Any] | None:
    return kube.get_or_none(kube.resource(r.api_version, r.kind), r.namespace, r.name)


def uid(kube: Kube, r: ObjRef) -> str:
    live = get(kube, r)
    assert live is not None, f"{r} is gone"
    return str(live["metadata"]["uid"])


def platform(ns: str) -> str:
    return (f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n---\n"
            f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n"
            f"  namespace: {ns}\ndata:\n  level: info\n")


def other(ns: str, level: str = "info") -> str:
    return (f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\n  namespace: {ns}\n"
            f"data:\n  level: {level}\n")


def test_a_misspelled_api_version_is_an_error_and_holds_the_prune_of_its_file(
        control_plane: ControlPlane, kube: Kube, tmp_path: Path, ns: str) -> None:
    repo = write_repo(tmp_path / "repo", {
        "crd.yaml": CRD, "katalog.yaml": KATALOG, "platform/base.yaml": platform(ns),
        "platform/other.yaml": other(ns),
        "apps/shop.yaml": widget("shop", ns, image="nginx", replicas=1, port=80)})
    name = f"held-{uuid.uuid4().hex[:8]}"
    first = sync(control_plane, repo, name)
    assert first.returncode == 0, first.stderr
    settings = ref("ConfigMap", "settings", ns)
    before = uid(kube, settings)
    assert read_inventory(kube, name).by_ref()[settings].file == "platform/base.yaml"

    # the ConfigMap's apiVersion misspelled, while another ConfigMap and the Widget change
    write_repo(repo, {
        "platform/base.yaml": platform(ns).replace("apiVersion: v1\nkind: ConfigMap",
                                                   "apiversion: v1\nkind: ConfigMap"),
        "platform/other.yaml": other(ns, "debug"),
        "apps/shop.yaml": widget("shop", ns, image="nginx:2", replicas=1, port=80)})
    error = (f"platform/base.yaml:6 ConfigMap/{ns}/settings apiVersion: missing; the "
             "document has 'apiversion' (did you mean apiVersion?)")
    validate = orksync("validate", str(repo))
    assert validate.returncode == 1 and error in validate.stderr, validate.stderr
    render = orksync("render", str(repo), "-o", str(tmp_path / "out"))
    assert render.returncode == 1 and error in render.stderr, render.stderr
    broken = sync(control_plane, repo, name)
    assert broken.returncode == 1, broken.stderr
    assert error in broken.stderr, broken.stderr
    assert ("platform/base.yaml has errors in this sync: the prune of the 1 object(s) last "
            f"applied from it is held: {settings}") in broken.stderr, broken.stderr
    assert uid(kube, settings) == before  # not deleted (nor recreated)
    live_other = get(kube, ref("ConfigMap", "other", ns))
    assert live_other is not None and live_other["data"] == {"level": "debug"}  # synced
    deployment = get(kube, ref("Deployment", "shop", ns))
    assert deployment is not None
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:2"
    assert settings in read_inventory(kube, name)  # not forgotten

    # repaired: the same ConfigMap; then its file deleted from Git: pruned as before
    write_repo(repo, {"platform/base.yaml": platform(ns)})
    repaired = sync(control_plane, repo, name)
    assert repaired.returncode == 0, repaired.stderr
    assert uid(kube, settings) == before
    (repo / "platform/other.yaml").unlink()
    pruned = sync(control_plane, repo, name)
    assert pruned.returncode == 0, pruned.stderr
    assert f"deleted ConfigMap/{ns}/other" in pruned.stderr, pruned.stderr
    assert get(kube, ref("ConfigMap", "other", ns)) is None
    assert uid(kube, settings) == before


def test_a_file_that_is_not_yaml_holds_the_prune_of_everything_applied_from_it(
        control_plane: ControlPlane, kube: Kube, tmp_path: Path, ns: str) -> None:
    repo = write_repo(tmp_path / "repo", {
        "crd.yaml": CRD, "katalog.yaml": KATALOG, "platform/base.yaml": platform(ns),
        "platform/other.yaml": other(ns),
        "apps/shop.yaml": widget("shop", ns, image="nginx", replicas=1, port=80)})
    name = f"held-{uuid.uuid4().hex[:8]}"
    first = sync(control_plane, repo, name)
    assert first.returncode == 0, first.stderr
    settings, namespace = ref("ConfigMap", "settings", ns), ref("Namespace", ns)
    before = {r: uid(kube, r) for r in (settings, namespace)}

    write_repo(repo, {"platform/other.yaml": "apiVersion: v1\nkind: ConfigMap\n"
                                             "metadata: {name: [unclosed\n"})
    write_repo(repo, {"platform/base.yaml": other(ns).replace("name: other", "name: x")
                      + "---\n" + platform(ns) + "  broken: [\n"})
    broken = sync(control_plane, repo, name)
    assert broken.returncode == 1, broken.stderr
    assert re.search(r"error: platform/base.yaml:\d+: invalid YAML", broken.stderr), \
        broken.stderr
    # the whole file: both objects last applied from it are held, and named
    assert ("platform/base.yaml has errors in this sync: the prune of the 2 object(s) last "
            f"applied from it is held: {settings}, {namespace}") in broken.stderr, broken.stderr
    assert ("platform/other.yaml has errors in this sync: the prune of the 1 object(s) last "
            f"applied from it is held: ConfigMap/{ns}/other") in broken.stderr, broken.stderr
    assert {r: uid(kube, r) for r in before} == before
    assert get(kube, ref("ConfigMap", "other", ns)) is not None
    assert get(kube, ref("ConfigMap", "x", ns)) is None  # nothing of a broken file applied


ON_DELETE = katalog("""\
        onCreate:
          configMaps: [{name: "{{ .metadata.name }}-config", data: {a: "1"}}]
        onDelete:
          timeout: 1s
          jobs:
            - name: "{{ .metadata.name }}-cleanup"
              image: busybox
""")


# the entry's key names its kind (the loader holds its custom resources), or nothing of
# the repository does (the sync holds them: its inventory knows them)
HELD_BY_LOADER = ("skipped {r}: held: Katalog widgets entry widget did not load "
                  "(katalog.yaml:7 Katalog/widgets spec.crds.widget.crdFile: file './crd.yaml' "
                  "does not exist)")
HELD_BY_SYNC = ("failed {r}: held, not applied as a plain manifest ({file}): the inventory "
                "records Widget (test.orksync.io) as a custom resource kind, and no Katalog "
                "entry of this sync handles it; the render has errors: katalog.yaml:7 "
                "Katalog/widgets spec.crds.things.crdFile: file './crd.yaml' does not exist.")


@pytest.mark.parametrize(("entry", "held"), [("widget", HELD_BY_LOADER),
                                             ("things", HELD_BY_SYNC)])
def test_a_missing_crd_file_holds_its_custom_resources_as_they_are(
        control_plane: ControlPlane, kube: Kube, tmp_path: Path, ns: str, entry: str,
        held: str) -> None:
    repo = write_repo(tmp_path / "repo", {
        "crd.yaml": CRD, "katalog.yaml": ON_DELETE.replace("    widget:", f"    {entry}:"),
        "platform/base.yaml": platform(ns),
        "apps/shop.yaml": widget("shop", ns), "apps/blog.yaml": widget("blog", ns)})
    name = f"held-{uuid.uuid4().hex[:8]}"
    first = sync(control_plane, repo, name)
    assert first.returncode == 0, first.stderr
    shop, blog = ref("Widget", "shop", ns), ref("Widget", "blog", ns)
    children = [ref("ConfigMap", "shop-config", ns), ref("ConfigMap", "blog-config", ns)]
    before = {r: uid(kube, r) for r in (shop, blog, *children)}
    version = get(kube, shop)["metadata"]["resourceVersion"]  # type: ignore[index]

    # the CRD file leaves Git (the CRD stays in the cluster: CRDs are not pruned), and
    # blog is deleted by hand meanwhile: its finalizer holds it
    (repo / "crd.yaml").unlink()
    kube.delete(kube.resource(shop.api_version, shop.kind), ns, "blog")
    broken = sync(control_plane, repo, name)
    assert broken.returncode == 1, broken.stderr
    assert (f"katalog.yaml:7 Katalog/widgets spec.crds.{entry}.crdFile: file './crd.yaml' "
            "does not exist") in broken.stderr, broken.stderr
    for r in (shop, blog):  # never applied as a plain manifest: held, saying why
        assert held.format(r=r, file=f"apps/{r.name}.yaml") in broken.stderr, broken.stderr
    live_shop = get(kube, shop)
    assert live_shop is not None and live_shop["metadata"]["resourceVersion"] == version
    assert FINALIZER in live_shop["metadata"]["finalizers"]
    live_blog = get(kube, blog)  # not finalized without its onDelete
    assert live_blog is not None and live_blog["metadata"].get("deletionTimestamp")
    assert FINALIZER in live_blog["metadata"]["finalizers"]
    assert re.search(rf"skipped {re.escape(str(blog))}: being deleted: its teardown waits",
                     broken.stderr), broken.stderr
    assert get(kube, ref("Job", "blog-cleanup", ns)) is None
    assert {r: uid(kube, r) for r in before} == before  # children kept, nothing recreated
    stored = read_inventory(kube, name).by_ref()
    assert stored[shop].is_custom_resource and stored[blog].is_custom_resource

    # the CRD file back: blog's teardown runs its onDelete (a Job that never finishes
    # here: no kubelet), shop is a custom resource as before
    write_repo(repo, {"crd.yaml": CRD})
    repaired = sync(control_plane, repo, name)
    assert get(kube, ref("Job", "blog-cleanup", ns)) is not None, repaired.stderr
    live_shop = get(kube, shop)
    assert live_shop is not None and FINALIZER in live_shop["metadata"]["finalizers"]
    assert uid(kube, shop) == before[shop]


def test_the_agent_holds_the_custom_resources_of_a_katalog_whose_crd_file_is_missing(
        control_plane: ControlPlane, kube: Kube, ns: str,
        git_daemon: tuple[Path, str, GitDaemon], tmp_path: Path) -> None:
    """The same through `orksync agent` (only the inventory knows the kind): its sync
    holds the custom resources, and a hand delete meanwhile reaches its drift repair,
    whose teardown waits for the Katalog."""
    repo, url, _ = git_daemon
    write_repo(repo, {"crd.yaml": CRD, "katalog.yaml": ON_DELETE.replace("    widget:",
                                                                        "    things:"),
                      "platform/base.yaml": platform(ns),
                      "apps/shop.yaml": widget("shop", ns), "apps/blog.yaml": widget("blog", ns)})
    commit(repo, "first")
    agent = AgentProcess(control_plane, url, tmp_path / "state", interval=1,
                         name=f"held-{uuid.uuid4().hex[:6]}",
                         flags=["--resync-interval", "3600"])
    shop, blog = ref("Widget", "shop", ns), ref("Widget", "blog", ns)
    try:
        wait_for("the first sync", lambda: "sync rev=" in agent.text()
                 and get(kube, ref("ConfigMap", "blog-config", ns)) is not None)
        before = {r: uid(kube, r) for r in (shop, blog)}
        (repo / "crd.yaml").unlink()
        commit(repo, "the CRD file leaves")
        wait_for("the held custom resources", lambda: f"failed {shop}: held, not applied as "
                 "a plain manifest" in agent.text())
        kube.delete(kube.resource(blog.api_version, blog.kind), ns, "blog")
        wait_for("blog's teardown to wait", lambda: re.search(
            rf"skipped {re.escape(str(blog))}: being deleted: its teardown waits",
            agent.text()) is not None)
        live = get(kube, blog)
        assert live is not None and FINALIZER in live["metadata"]["finalizers"], agent.text()
        live = get(kube, shop)
        assert live is not None and FINALIZER in live["metadata"]["finalizers"], agent.text()
        assert get(kube, ref("Job", "blog-cleanup", ns)) is None
        assert {r: uid(kube, r) for r in before} == before

        write_repo(repo, {"crd.yaml": CRD})
        commit(repo, "the CRD file is back")
        wait_for("blog's onDelete", lambda: get(kube, ref("Job", "blog-cleanup", ns))
                 is not None)
    finally:
        agent.stop(signal.SIGKILL)
