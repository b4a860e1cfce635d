"""`orksync status` and `orksync tree` as a user runs them (`python -m orksync`), against
the real control plane: they read the inventories, the custom resources and the live
objects they list (no repository)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from orksync.cluster.kube import Kube
from orksync.model import ObjRef
from orksync.yamls.io import load_emitted
from testbed.controlplane import ControlPlane
from tests.helpers import CRD, KATALOG, katalog, widget, write_repo
from tests.workload_status import deadline_exceeded, rolled_out, write_status

pytestmark = pytest.mark.cluster


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orksync", *args], capture_output=True,
                          text=True, timeout=120)


def git_commit(repo: Path) -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], check=True,
                              capture_output=True, text=True).stdout.strip()
    git("init", "-q")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "repo")
    return git("rev-parse", "HEAD")


TLS_KATALOG = katalog("""\
        onCreate:
          deployments:
            - name: "{{ .metadata.name }}"
              image: "{{ .spec.image }}"
              replicas: "{{ .spec.replicas }}"
              port: "{{ .spec.port }}"
              reconcile: true
          secrets:
            - name: "{{ .metadata.name }}-tls"
              tls:
                dnsNames: [web.example]
                algorithm: ecdsa
""")


class Setup:
    def __init__(self, control_plane: ControlPlane, tmp_path: Path,
                 katalog_text: str = KATALOG) -> None:
        self.ns = f"t-{uuid.uuid4().hex[:8]}"
        self.inventory_ns = f"inv-{uuid.uuid4().hex[:8]}"
        self.repo = write_repo(tmp_path / "repo", {
            "katalog.yaml": katalog_text, "crd.yaml": CRD,
            "w.yaml": widget("web", self.ns, image="nginx", replicas=2, port=8080),
            "v.yaml": widget("api", self.ns, image="nginx", replicas=1, port=8080)})
        self.revision = git_commit(self.repo)
        self.kc = str(control_plane.kubeconfig)
        self.kube = Kube.from_kubeconfig(control_plane.kubeconfig)

    def flags(self) -> list[str]:
        return ["--kubeconfig", self.kc, "--inventory-namespace", self.inventory_ns]

    def sync(self, root: str = "apps") -> None:
        done = run("sync", str(self.repo), "--once", "--name", root, *self.flags())
        assert done.returncode == 0, done.stderr

    def deployment(self, name: str) -> ObjRef:
        return ObjRef(api_version="apps/v1", kind="Deployment", namespace=self.ns, name=name)

    def cli(self, *args: str) -> str:
        done = run(*args, *self.flags())
        assert done.returncode == 0, done.stderr
        return done.stdout


def rows(text: str) -> list[list[str]]:
    """A table's lines split on its column gaps (three spaces or more)."""
    import re
    return [re.split(r"\s{3,}", line.strip()) for line in text.splitlines() if line.strip()]


def test_status_lists_every_managed_custom_resource_with_its_health(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    s = Setup(control_plane, tmp_path)
    empty = s.cli("status")
    assert empty.startswith("No custom resources managed by orksync")
    s.sync()
    table = rows(s.cli("status"))
    assert table[0] == ["KIND", "NAMESPACE", "NAME", "SYNC ROOT", "READY", "HEALTH",
                        "REVISION", "AGE", "MESSAGE"]
    by_name = {r[2]: r for r in table[1:]}
    assert sorted(by_name) == ["api", "web"]
    web = by_name["web"]
    assert web[:7] == ["Widget.test.orksync.io", s.ns, "web", "apps", "False", "InProgress",
                       s.revision[:12]]
    assert web[8] == f"Deployment/{s.ns}/web: InProgress: replicas: 0/2"

    write_status(s.kube, s.deployment("web"), rolled_out(2))
    write_status(s.kube, s.deployment("api"), deadline_exceeded(1, "api"))
    s.sync()
    items = {i["name"]: i for i in json.loads(s.cli("status", "-o", "json"))["items"]}
    assert items["web"]["ready"] == "True" and items["web"]["health"] == "Current"
    assert items["web"]["lastAppliedRevision"] == s.revision
    assert items["web"]["syncRoot"] == "apps"
    assert items["api"]["ready"] == "False" and items["api"]["health"] == "Failed"
    assert items["api"]["message"].startswith(
        f"Deployment/{s.ns}/api: Failed: progress deadline exceeded")
    as_yaml = load_emitted(s.cli("status", "-o", "yaml"))
    assert [i["name"] for i in as_yaml["items"]] == ["api", "web"]
    assert as_yaml["items"][1]["health"] == "Current"
    s.kube.close()


def test_tree_shows_a_custom_resource_and_its_children_with_their_health(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    s = Setup(control_plane, tmp_path)
    s.sync()
    write_status(s.kube, s.deployment("web"), deadline_exceeded(2, "web"))
    s.sync()
    table = rows(s.cli("tree", f"Widget/{s.ns}/web"))
    assert table[0] == ["OBJECT", "SYNC ROOT", "READY", "HEALTH", "AGE", "MESSAGE"]
    assert table[1][:4] == [f"Widget.test.orksync.io/{s.ns}/web", "apps", "False", "Failed"]
    assert table[2][:2] == [f"├── Deployment/{s.ns}/web", "Failed"]
    assert table[2][2].startswith("progress deadline exceeded (ProgressDeadlineExceeded")
    assert table[3] == [f"└── Service/{s.ns}/web-svc", "Current"]
    tree: dict[str, Any] = json.loads(s.cli("tree", f"widget.test.orksync.io/{s.ns}/web",
                                            "-o", "json"))
    assert tree["health"] == "Failed"
    assert [(c["object"], c["health"]) for c in tree["children"]] == [
        (f"Deployment/{s.ns}/web", "Failed"), (f"Service/{s.ns}/web-svc", "Current")]
    missing = run("tree", f"Widget/{s.ns}/nope", *s.flags())
    assert missing.returncode == 1
    assert f"Widget/{s.ns}/nope: no custom resource or manifest of that kind" in missing.stderr
    s.kube.close()


def test_status_watch_prints_again_when_the_health_changes(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    s = Setup(control_plane, tmp_path)
    s.sync()
    watch = subprocess.Popen([sys.executable, "-m", "orksync", "status", "--watch",
                              "--interval", "0.2", "--timeout", "120", "-o", "json",
                              *s.flags()], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        assert watch.stdout is not None
        first = json.loads(watch.stdout.readline())
        assert {i["name"]: i["health"] for i in first["items"]} == {
            "api": "InProgress", "web": "InProgress"}
        write_status(s.kube, s.deployment("web"), rolled_out(2))
        s.sync()
        second = json.loads(watch.stdout.readline())
        assert {i["name"]: i["health"] for i in second["items"]} == {
            "api": "InProgress", "web": "Current"}
    finally:
        watch.terminate()
        watch.wait(timeout=30)
        s.kube.close()


def test_health_is_read_from_the_live_objects_a_deleted_child_is_missing(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    """Issue 30 item 6: the tree showed the last sync's record: a deleted Deployment stayed
    InProgress and the CA Secret was always Unknown."""
    s = Setup(control_plane, tmp_path, TLS_KATALOG)
    s.sync()
    target = f"Widget/{s.ns}/web"

    def tree() -> dict[str, str]:
        doc = json.loads(s.cli("tree", target, "-o", "json"))
        return {"cr": doc["health"], **{c["object"]: c["health"] for c in doc["children"]}}

    deployment, tls = f"Deployment/{s.ns}/web", f"Secret/{s.ns}/web-tls"
    ca = f"Secret/{s.ns}/web-tls-ca"
    assert tree() == {"cr": "InProgress", deployment: "InProgress", tls: "Current",
                      ca: "Current"}
    write_status(s.kube, s.deployment("web"), rolled_out(2))  # no sync in between
    assert tree() == {"cr": "Current", deployment: "Current", tls: "Current", ca: "Current"}

    s.kube.delete(s.kube.resource("apps/v1", "Deployment"), s.ns, "web")
    assert tree() == {"cr": "Missing", deployment: "Missing", tls: "Current", ca: "Current"}
    table = rows(s.cli("tree", target))
    assert table[1][3] == "Missing" and \
        table[1][5] == f"Deployment/{s.ns}/web: Missing: not in the cluster"
    assert [f"├── {deployment}", "Missing", "not in the cluster"] in table
    items = {i["name"]: i for i in json.loads(s.cli("status", "-o", "json"))["items"]}
    assert items["web"]["health"] == "Missing"
    assert items["web"]["message"] == f"Deployment/{s.ns}/web: Missing: not in the cluster"
    s.sync()  # the next sync creates it again
    assert tree()[deployment] == "InProgress"
    s.kube.close()


def test_one_row_per_object_with_its_sync_root_and_a_filter_by_root(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    """Issue 30 item 6: with two sync roots every row was printed twice, without a root."""
    s = Setup(control_plane, tmp_path)
    s.sync("apps")
    s.sync("copy")  # a second root over the same source: it wrote every object last
    other = write_repo(tmp_path / "other", {
        "katalog.yaml": KATALOG, "crd.yaml": CRD,
        "o.yaml": widget("solo", s.ns, image="nginx", replicas=1, port=8080)})
    done = run("sync", str(other), "--once", "--name", "other", *s.flags())
    assert done.returncode == 0, done.stderr

    table = rows(s.cli("status"))
    crs = [(r[2], r[3]) for r in table[1:] if r[0] == "Widget.test.orksync.io"]
    assert crs == [("api", "copy,apps"), ("solo", "other"), ("web", "copy,apps")]
    items = json.loads(s.cli("status", "-o", "json"))["items"]
    web = [i for i in items if i["name"] == "web"]
    assert len(web) == 1 and web[0]["syncRoot"] == "copy"
    assert web[0]["syncRoots"] == ["copy", "apps"]
    for flag in ("--name", "--sync-root"):
        only = rows(s.cli("status", flag, "other"))
        assert [(r[2], r[3]) for r in only[1:]] == [("solo", "other")]
    apps = rows(s.cli("status", "--sync-root", "apps"))
    assert sorted(r[2] for r in apps[1:]) == ["api", "web"]
    tree = rows(s.cli("tree", f"Widget/{s.ns}/web"))
    assert tree[1][:2] == [f"Widget.test.orksync.io/{s.ns}/web", "copy,apps"]
    assert len(tree) == 4  # header, the custom resource, its Deployment and Service
    s.kube.close()

