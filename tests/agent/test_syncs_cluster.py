"""Sync objects served by `orksync agent` without --repo-url, as a real process on the real
control plane, fed by a git daemon: several Syncs side by side each with its own
inventory, status, history and Events; a broken Sync beside a healthy one; suspend,
resume and `orksync reconcile --wait`; deletion with and without prune; tenancy (Secrets
of the Sync's namespace only, its ServiceAccount as the writer); per-Sync webhooks."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import signal
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from orksync.cluster.kube import Kube
from orksync.errors import ClusterError
from testbed.controlplane import ControlPlane
from testbed.gitdaemon import GitDaemon, free_port
from tests.helpers import CRD, KATALOG, ROOT, katalog, wait_for, widget, write_repo

pytestmark = pytest.mark.cluster

SYNC_CRD = ROOT / "deploy" / "base" / "sync.crd.yaml"
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
MANAGER = "orksync-test"


def commit(repo: Path, message: str) -> str:
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run([*GIT, "commit", "-qm", message], cwd=repo, check=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, check=True,
                          capture_output=True, text=True).stdout.strip()


def install_sync_crd(kube: Kube) -> None:
    from ruamel.yaml import YAML

    crd = YAML(typ="safe").load(SYNC_CRD.read_text())
    kube.apply(kube.resource("apiextensions.k8s.io/v1", "CustomResourceDefinition"), crd,
               field_manager=MANAGER, force=True)

    def served() -> bool:
        try:
            kube.resource("orksync.io/v1alpha1", "Sync", refresh=True)
        except ClusterError:
            return False
        return True

    wait_for("the Sync CRD to be served", served)


def remove_syncs(kube: Kube, namespace: str) -> None:
    """The Syncs of a namespace deleted, their finalizers released without an agent: later
    tests' `orksync status` lists the Syncs of the cluster first."""
    res = kube.resource("orksync.io/v1alpha1", "Sync")
    for obj in kube.list(res, namespace=namespace):
        kube.request("PATCH", res.path(namespace, obj["metadata"]["name"]),
                     body={"metadata": {"finalizers": None}},
                     content_type="application/merge-patch+json")
        kube.delete(res, namespace, obj["metadata"]["name"])


class Env:
    """A namespace of Syncs, a git daemon serving repositories under `base`, and an agent
    serving that namespace's Syncs."""

    def __init__(self, control_plane: ControlPlane, tmp_path: Path, daemon: GitDaemon,
                 base: Path) -> None:
        self.control_plane = control_plane
        self.kube = Kube.from_kubeconfig(control_plane.kubeconfig)
        self.daemon = daemon
        self.base = base
        self.tmp = tmp_path
        self.ns = f"s-{uuid.uuid4().hex[:8]}"
        self.kube.create(self.kube.resource("v1", "Namespace"),
                         {"apiVersion": "v1", "kind": "Namespace",
                          "metadata": {"name": self.ns}}, field_manager=MANAGER)
        self.port = free_port()
        self.log = tmp_path / "agent.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.name = f"syncs-{uuid.uuid4().hex[:6]}"

    def start(self, *flags: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "orksync", "agent", "--watch-namespace", self.ns,
             "--state-dir", str(self.tmp / "state"), "--listen", f"127.0.0.1:{self.port}",
             "--kubeconfig", str(self.control_plane.kubeconfig), "--name", self.name,
             "--log-level", "debug", "--identity", self.name, *flags],
            stdout=subprocess.DEVNULL, stderr=self.log.open("w"), start_new_session=True)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)

    def repo(self, name: str, files: dict[str, str]) -> tuple[Path, str]:
        repo = self.base / name
        repo.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
        write_repo(repo, files)
        return repo, commit(repo, "first")

    def sync(self, name: str, repo: str, **spec: Any) -> None:
        body = {"apiVersion": "orksync.io/v1alpha1", "kind": "Sync",
                "metadata": {"name": name, "namespace": self.ns},
                "spec": {"url": self.daemon.url(repo), "interval": "1s", **spec}}
        self.kube.create(self.kube.resource("orksync.io/v1alpha1", "Sync"), body,
                         field_manager=MANAGER)

    def get(self, name: str) -> dict[str, Any] | None:
        found = self.kube.get_or_none(self.kube.resource("orksync.io/v1alpha1", "Sync"),
                                      self.ns, name)
        return dict(found) if found is not None else None

    def status(self, name: str) -> dict[str, Any]:
        return dict((self.get(name) or {}).get("status") or {})

    def ready(self, name: str) -> dict[str, Any]:
        return next((c for c in self.status(name).get("conditions") or []
                     if c.get("type") == "Ready"), {})

    def applied(self, name: str, sha: str) -> bool:
        return self.status(name).get("lastAppliedRevision") == sha and \
            self.ready(name).get("status") == "True"

    def patch(self, name: str, body: dict[str, Any]) -> None:
        res = self.kube.resource("orksync.io/v1alpha1", "Sync")
        self.kube.request("PATCH", res.path(self.ns, name), body=body,
                          content_type="application/merge-patch+json")

    def cli(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "orksync", *argv, "--kubeconfig",
                               str(self.control_plane.kubeconfig)],
                              capture_output=True, text=True, timeout=120, check=False)

    def events(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.kube.list(self.kube.resource("v1", "Event"), namespace=self.ns)
                if (e.get("involvedObject") or {}).get("kind") == "Sync" and
                e["involvedObject"].get("name") == name]

    def inventory(self, name: str) -> dict[str, Any] | None:
        found = self.kube.get_or_none(self.kube.resource("v1", "ConfigMap"), "orksync-system",
                                      f"orksync-inventory-{self.ns}.{name}")
        return dict(found) if found is not None else None

    def text(self) -> str:
        return self.log.read_text()



def deployment(kube: Kube, ns: str, name: str) -> dict[str, Any] | None:
    found = kube.get_or_none(kube.resource("apps/v1", "Deployment"), ns, name)
    return dict(found) if found is not None else None


def widgets_repo(ns: str, *names: str) -> dict[str, str]:
    return {"katalog.yaml": KATALOG, "crd.yaml": CRD,
            **{f"{n}.yaml": widget(n, ns, image="nginx", replicas=1, port=80) for n in names}}


def test_two_syncs_side_by_side_each_with_its_own_inventory_status_history_and_events(
        env: Env) -> None:
    repo_a, sha_a = env.repo("a", widgets_repo(env.ns, "a1"))
    _, sha_b = env.repo("b", widgets_repo(env.ns, "b1"))
    env.start()
    env.sync("a", "a")
    env.sync("b", "b")
    wait_for("both Syncs applied", lambda: env.applied("a", sha_a) and env.applied("b", sha_b))
    assert deployment(env.kube, env.ns, "a1") is not None
    assert deployment(env.kube, env.ns, "b1") is not None
    for name, sha in (("a", sha_a), ("b", sha_b)):
        status = env.status(name)
        assert status["observedGeneration"] == env.get(name)["metadata"]["generation"]
        assert status["lastAttemptedRevision"] == sha
        types = {c["type"]: c["status"] for c in status["conditions"]}
        assert types == {"Ready": "True", "Reconciling": "False", "Stalled": "False"}
        assert sha in env.ready(name)["message"]
        # its own inventory: a Widget, its Deployment and Service (the CRD too)
        assert status["inventory"]["name"] == f"orksync-inventory-{env.ns}.{name}"
        assert status["inventory"]["objects"] >= 3
        assert env.inventory(name) is not None
        [entry] = status["history"]
        assert entry["revision"] == sha and entry["result"] == "succeeded"
        assert entry["counts"].get("created", 0) >= 3
        assert any(e["metadata"].get("annotations", {}).get("orksync.io/revision") == sha
                   and sha[:12] in e["message"] for e in env.events(name))
        assert env.get(name)["metadata"]["finalizers"] == ["orksync.io/sync-cleanup"]
    widget_a1 = env.kube.get(env.kube.resource("test.orksync.io/v1", "Widget"), env.ns, "a1")
    assert widget_a1["metadata"]["annotations"]["orksync.io/inventory"] == \
        f"orksync-system/{env.ns}.a"
    # each Sync's objects carry a label of their own: its watches select them alone
    labels = {name: deployment(env.kube, env.ns, f"{name}1")["metadata"]["labels"]
              ["orksync.io/shard"] for name in ("a", "b")}
    assert labels == {name: "sync-" + hashlib.sha256(f"{env.ns}/{name}".encode())
                      .hexdigest()[:16] for name in ("a", "b")}

    write_repo(repo_a, {"a2.yaml": widget("a2", env.ns, image="nginx", replicas=1, port=80)})
    sha_a2 = commit(repo_a, "a2")
    wait_for("a's new revision", lambda: env.applied("a", sha_a2))
    assert deployment(env.kube, env.ns, "a2") is not None
    assert [h["revision"] for h in env.status("a")["history"]] == [sha_a2, sha_a]
    assert [h["revision"] for h in env.status("b")["history"]] == [sha_b]

    history = env.cli("history", f"{env.ns}/a", "-o", "json")
    assert history.returncode == 0, history.stderr
    assert [h["revision"] for h in json.loads(history.stdout)["history"]] == [sha_a2, sha_a]
    table = env.cli("history", f"{env.ns}/a")
    assert sha_a2[:12] in table.stdout and "succeeded" in table.stdout
    status = env.cli("status")
    assert status.returncode == 0, status.stderr
    assert f"{env.ns}/a " in status.stdout and env.daemon.url("a") in status.stdout

    # a second Sync of the same url and path is refused; the first keeps it
    env.sync("a-again", "a")
    wait_for("the duplicate refused", lambda: env.ready("a-again").get("reason") ==
             "DuplicateSource")
    assert f"{env.ns}/a" in env.ready("a-again")["message"]
    assert env.inventory("a-again") is None
    assert env.applied("a", sha_a2)


def test_a_broken_sync_beside_a_healthy_one_is_ready_false_with_file_line_and_keeps_objects(
        env: Env) -> None:
    repo_a, sha_a = env.repo("a", widgets_repo(env.ns, "a1"))
    repo_b, sha_b = env.repo("b", widgets_repo(env.ns, "b1"))
    env.start()
    env.sync("a", "a")
    env.sync("b", "b")
    wait_for("both applied", lambda: env.applied("a", sha_a) and env.applied("b", sha_b))

    write_repo(repo_b, {"broken.yaml": "apiVersion: v1\nkind: [\n"})
    (repo_b / "b1.yaml").unlink()  # it would be pruned, were the render not broken
    broken = commit(repo_b, "broken")
    wait_for("b failed", lambda: env.ready("b").get("status") == "False" and
             env.status("b").get("lastAttemptedRevision") == broken)
    ready = env.ready("b")
    assert ready["reason"] == "ReconciliationFailed"
    assert "broken.yaml:" in ready["message"]  # file:line
    assert env.status("b")["lastAppliedRevision"] == sha_b
    assert env.status("b")["history"][0]["result"] == "failed"
    assert deployment(env.kube, env.ns, "b1") is not None  # nothing pruned
    assert any(e["type"] == "Warning" and "broken.yaml" in e["message"]
               for e in env.events("b"))

    write_repo(repo_a, {"a2.yaml": widget("a2", env.ns, image="nginx", replicas=1, port=80)})
    sha_a2 = commit(repo_a, "a2")
    wait_for("a still follows its commits", lambda: env.applied("a", sha_a2))
    failed = env.cli("reconcile", f"{env.ns}/b", "--wait", "--timeout", "60")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "Ready=False" in failed.stdout and "broken.yaml" in failed.stdout


def test_suspend_holds_every_write_resume_syncs_at_once_and_reconcile_waits_for_the_answer(
        env: Env) -> None:
    repo_a, sha_a = env.repo("a", widgets_repo(env.ns, "a1"))
    repo_b, sha_b = env.repo("b", widgets_repo(env.ns, "b1"))
    env.start()
    env.sync("a", "a")
    env.sync("b", "b")
    wait_for("both applied", lambda: env.applied("a", sha_a) and env.applied("b", sha_b))

    done = env.cli("reconcile", f"{env.ns}/a", "--wait", "--timeout", "60")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Ready=True" in done.stdout and sha_a[:12] in done.stdout
    assert env.status("a")["lastHandledReconcileAt"] == \
        env.get("a")["metadata"]["annotations"]["reconcile.orksync.io/requestedAt"]

    suspended = env.cli("suspend", f"{env.ns}/a")
    assert suspended.returncode == 0, suspended.stderr
    wait_for("the status to say suspended", lambda: env.ready("a").get("reason") ==
             "Suspended")
    assert "suspended" in env.ready("a")["message"]
    # a commit to each: the active one applies its own, the suspended one nothing
    write_repo(repo_a, {"a2.yaml": widget("a2", env.ns, image="nginx", replicas=1, port=80)})
    sha_a2 = commit(repo_a, "a2")
    write_repo(repo_b, {"b2.yaml": widget("b2", env.ns, image="nginx", replicas=1, port=80)})
    sha_b2 = commit(repo_b, "b2")
    env.kube.delete(env.kube.resource("apps/v1", "Deployment"), env.ns, "a1")  # no repair
    wait_for("b's commit", lambda: env.applied("b", sha_b2))
    refused = env.cli("reconcile", f"{env.ns}/a", "--wait")
    assert refused.returncode == 1 and "suspended" in refused.stderr
    # b has synced twice more (two polls after its commit) while a was suspended
    for _ in range(2):
        done = env.cli("reconcile", f"{env.ns}/b", "--wait", "--timeout", "60")
        assert done.returncode == 0, done.stdout + done.stderr
    assert deployment(env.kube, env.ns, "a2") is None
    assert deployment(env.kube, env.ns, "a1") is None
    assert env.status("a")["lastAppliedRevision"] == sha_a

    resumed = env.cli("resume", f"{env.ns}/a")
    assert resumed.returncode == 0, resumed.stderr
    wait_for("a's commit after resume", lambda: env.applied("a", sha_a2))
    assert deployment(env.kube, env.ns, "a2") is not None
    wait_for("a1 repaired", lambda: deployment(env.kube, env.ns, "a1") is not None)


def test_deleting_a_sync_with_prune_deletes_its_objects_and_without_prune_leaves_them(
        env: Env) -> None:
    _, sha_a = env.repo("a", widgets_repo(env.ns, "a1"))
    repo_b, _ = env.repo("b", widgets_repo(env.ns, "b1", "b2"))
    env.start()
    env.sync("a", "a")
    env.sync("b", "b", prune=False)
    # the Widget CRD comes with the first sync (a test run alone has not served it yet)
    wait_for("a applied", lambda: env.applied("a", sha_a))
    widgets = env.kube.resource("test.orksync.io/v1", "Widget")
    res = env.kube.resource("orksync.io/v1alpha1", "Sync")
    wait_for("b2 applied", lambda: env.kube.get_or_none(widgets, env.ns, "b2") is not None)
    # prune: false: what leaves Git is left in place, and forgotten
    (repo_b / "b2.yaml").unlink()
    sha_b = commit(repo_b, "b2 leaves")
    wait_for("both applied", lambda: env.applied("a", sha_a) and env.applied("b", sha_b))
    assert env.kube.get_or_none(widgets, env.ns, "b2") is not None
    assert deployment(env.kube, env.ns, "b2") is not None
    # decoded: the ConfigMap holds base64(zlib(JSON)), where "b2" may occur by chance
    from orksync.apply.inventory import Inventory

    names = {e.ref.name for e in Inventory.from_configmap(env.inventory("b"))}
    assert "b1" in names and "b2" not in names

    env.kube.delete(res, env.ns, "a")
    wait_for("Sync a gone", lambda: env.get("a") is None)
    assert env.kube.get_or_none(widgets, env.ns, "a1") is None
    assert env.inventory("a") is None
    # its children go with it (their owner references: the garbage collector)
    wait_for("a1's Deployment collected", lambda: deployment(env.kube, env.ns, "a1") is None)

    env.kube.delete(res, env.ns, "b")
    wait_for("Sync b gone", lambda: env.get("b") is None)
    assert env.kube.get_or_none(widgets, env.ns, "b1") is not None
    assert deployment(env.kube, env.ns, "b1") is not None
    assert env.inventory("b") is None


def test_a_sync_reads_secrets_of_its_own_namespace_only_and_writes_as_its_service_account(
        env: Env) -> None:
    other = f"o-{uuid.uuid4().hex[:8]}"
    kube = env.kube
    kube.create(kube.resource("v1", "Namespace"), {"apiVersion": "v1", "kind": "Namespace",
                                                   "metadata": {"name": other}},
                field_manager=MANAGER)
    password = f"pw-{uuid.uuid4().hex}"
    kube.create(kube.resource("v1", "Secret"), {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds", "namespace": other},
        "stringData": {"username": "u", "password": password}}, field_manager=MANAGER)
    _, sha = env.repo("a", widgets_repo(env.ns, "a1"))
    env.repo("b", widgets_repo(env.ns, "b1"))
    # may write Widgets and Deployments in its namespace, not Services; the Widget CRD is
    # the platform's (the ServiceAccount may apply it unchanged, by name)
    from ruamel.yaml import YAML

    kube.apply(kube.resource("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
               YAML(typ="safe").load(CRD), field_manager=MANAGER, force=True)
    for kind, body in (("ClusterRole", {"rules": [{
            "apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"],
            "resourceNames": ["widgets.test.orksync.io"], "verbs": ["get", "patch"]}]}),
            ("ClusterRoleBinding", {"roleRef": {
                "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                "name": f"crd-{env.ns}"}, "subjects": [{
                    "kind": "ServiceAccount", "name": "deployer", "namespace": env.ns}]})):
        kube.create(kube.resource("rbac.authorization.k8s.io/v1", kind), {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind,
            "metadata": {"name": f"crd-{env.ns}"}, **body}, field_manager=MANAGER)
    kube.create(kube.resource("v1", "ServiceAccount"), {
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "deployer", "namespace": env.ns}}, field_manager=MANAGER)
    kube.create(kube.resource("rbac.authorization.k8s.io/v1", "Role"), {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "deployer", "namespace": env.ns},
        "rules": [{"apiGroups": ["apps", "test.orksync.io"],
                   "resources": ["deployments", "widgets"],
                   "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}]},
        field_manager=MANAGER)
    kube.create(kube.resource("rbac.authorization.k8s.io/v1", "RoleBinding"), {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "deployer", "namespace": env.ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": "deployer"},
        "subjects": [{"kind": "ServiceAccount", "name": "deployer", "namespace": env.ns}]},
        field_manager=MANAGER)
    env.start()
    env.sync("cross", "a", secretRef={"name": "creds", "namespace": other})
    env.sync("absent", "b", secretRef={"name": "creds"})
    env.sync("tenant", "a", serviceAccountName="deployer")

    wait_for("the cross-namespace reference refused",
             lambda: env.ready("cross").get("reason") == "InvalidSpec")
    assert "spec.secretRef.namespace" in env.ready("cross")["message"]
    assert any(c["type"] == "Stalled" and c["status"] == "True"
               for c in env.status("cross")["conditions"])
    wait_for("the absent Secret reported", lambda: env.ready("absent").get("reason") ==
             "SecretNotFound")
    assert f"Secret {env.ns}/creds not found" in env.ready("absent")["message"]
    assert deployment(env.kube, env.ns, "b1") is None
    wait_for("the tenant's sync", lambda: env.status("tenant").get("lastAttemptedRevision")
             == sha)
    wait_for("the tenant's Service refused", lambda: env.ready("tenant").get("status") ==
             "False")
    message = env.ready("tenant")["message"]
    assert "system:serviceaccount:" + env.ns + ":deployer" in message
    assert deployment(env.kube, env.ns, "a1") is not None  # what it may write, it wrote
    assert kube.get_or_none(kube.resource("v1", "Service"), env.ns, "a1-svc") is None
    # the password is in no log line, status, Event or agent file
    env.stop()
    assert password not in env.text()
    for name in ("cross", "absent", "tenant"):
        assert password not in json.dumps(env.get(name))
        assert password not in json.dumps(env.events(name))


def test_a_sync_s_webhook_is_verified_with_its_own_secret_and_syncs_it_now(
        env: Env) -> None:
    repo, sha = env.repo("a", widgets_repo(env.ns, "a1"))
    token = f"tok-{uuid.uuid4().hex}"
    env.kube.create(env.kube.resource("v1", "Secret"), {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hook", "namespace": env.ns},
        "stringData": {"token": token}}, field_manager=MANAGER)
    env.start()
    env.sync("a", "a", interval="1h", webhook={"secretRef": {"name": "hook"}})
    wait_for("the first sync", lambda: env.applied("a", sha))
    write_repo(repo, {"a2.yaml": widget("a2", env.ns, image="nginx", replicas=1, port=80)})
    sha2 = commit(repo, "a2")

    def post(path: str, secret: str) -> int:
        body = b'{"ref": "refs/heads/main"}'
        signature = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        request = urllib.request.Request(
            f"http://127.0.0.1:{env.port}{path}", data=body, method="POST",
            headers={"X-Hub-Signature-256": signature, "X-GitHub-Event": "push",
                     "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=10) as resp:
                return int(resp.status)
        except urllib.error.HTTPError as err:
            return int(err.code)

    assert post(f"/hooks/git/{env.ns}/a", "wrong") == 401
    assert post(f"/hooks/git/{env.ns}/nothing", token) == 404
    assert post("/hooks/git", token) == 404  # the single-root agent's, not served here
    assert env.status("a")["lastAppliedRevision"] == sha
    assert post(f"/hooks/git/{env.ns}/a", token) == 202
    wait_for("the hook's sync", lambda: env.applied("a", sha2))
    assert token not in env.text()


def test_the_move_from_a_laptop_sync_to_the_agent_to_a_sync_object_keeps_every_object(
        env: Env) -> None:
    """`orksync sync` on a laptop, then a `--repo-url` agent of the same --name (refused
    until --adopt-inventory), then a Sync naming that inventory in
    `orksync.io/adopt-inventory` (honoured by an agent run with --adopt-inventory): each
    takes the inventory over, nothing is created again."""
    repo, sha = env.repo("a", widgets_repo(env.ns, "a1"))
    name = f"laptop-{uuid.uuid4().hex[:6]}"
    laptop = env.cli("sync", str(repo), "--once", "--name", name)
    assert laptop.returncode == 0, laptop.stderr
    uid = deployment(env.kube, env.ns, "a1")["metadata"]["uid"]
    inventories = env.kube.resource("v1", "ConfigMap")

    def single_root(*flags: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "orksync", "agent", "--repo-url", env.daemon.url("a"),
             "--name", name, "--no-leader-elect", "--interval", "1",
             "--state-dir", str(env.tmp / "single"), "--listen", f"127.0.0.1:{free_port()}",
             "--kubeconfig", str(env.control_plane.kubeconfig), *flags],
            stdout=subprocess.DEVNULL, stderr=(env.tmp / "single.log").open("w"),
            start_new_session=True)

    def stop(proc: subprocess.Popen[bytes]) -> None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)

    refused = single_root()
    try:
        wait_for("the refusal", lambda: "--adopt-inventory (orksync sync, apply, diff and "
                 "agent)" in (env.tmp / "single.log").read_text())
    finally:
        stop(refused)
    adopting = single_root("--adopt-inventory")
    try:
        wait_for("the agent's takeover", lambda: (env.kube.get(
            inventories, "orksync-system", f"orksync-inventory-{name}")["metadata"]
            .get("annotations") or {}).get("orksync.io/source") == env.daemon.url("a"))
    finally:
        stop(adopting)

    env.start("--adopt-inventory")
    res = env.kube.resource("orksync.io/v1alpha1", "Sync")
    env.kube.create(res, {"apiVersion": "orksync.io/v1alpha1", "kind": "Sync",
                          "metadata": {"name": "a", "namespace": env.ns,
                                       "annotations": {"orksync.io/adopt-inventory": name}},
                          "spec": {"url": env.daemon.url("a"), "interval": "1s"}},
                    field_manager=MANAGER)
    wait_for("the Sync's first sync", lambda: env.applied("a", sha))
    assert env.kube.get_or_none(inventories, "orksync-system",
                                f"orksync-inventory-{name}") is None
    assert env.inventory("a") is not None
    assert deployment(env.kube, env.ns, "a1")["metadata"]["uid"] == uid
    assert env.status("a")["history"][0]["counts"].get("created", 0) == 0
    widget_a1 = env.kube.get(env.kube.resource("test.orksync.io/v1", "Widget"), env.ns, "a1")
    assert widget_a1["metadata"]["annotations"]["orksync.io/inventory"] == \
        f"orksync-system/{env.ns}.a"


def test_the_example_sync_syncs_the_example_repository(env: Env) -> None:
    """examples/sync.yaml, its url pointed at a git daemon serving examples/repo at the
    example's path, in the test's namespace."""
    import shutil

    from ruamel.yaml import YAML

    from tests.helpers import REPO_EXAMPLE

    example = YAML(typ="safe").load((ROOT / "examples" / "sync.yaml").read_text())
    repo = env.base / "platform"
    shutil.copytree(REPO_EXAMPLE, repo / example["spec"]["path"])
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    sha = commit(repo, "the example")
    example["metadata"]["namespace"] = env.ns
    example["spec"]["url"] = env.daemon.url("platform")
    env.start()
    env.kube.create(env.kube.resource("orksync.io/v1alpha1", "Sync"), example,
                    field_manager=MANAGER)
    wait_for("the example applied", lambda: env.applied("example", sha), timeout=120)
    assert env.status("example")["inventory"]["objects"] > 10
    # what it made is deleted with it: later tests of the session create the example anew
    env.kube.delete(env.kube.resource("orksync.io/v1alpha1", "Sync"), env.ns, "example")
    wait_for("the example pruned", lambda: env.get("example") is None, timeout=120)
    # a CRD is never pruned (--prune-crds is off): removed here, and the example's
    # Namespaces waited for, so that a later test creates all of it again
    crds = env.kube.resource("apiextensions.k8s.io/v1", "CustomResourceDefinition")
    env.kube.delete(crds, "", "webapps.platform.example.com")
    namespaces = env.kube.resource("v1", "Namespace")
    wait_for("the example's CRD and Namespaces gone", lambda: all(
        env.kube.get_or_none(res, "", name) is None for res, name in (
            (crds, "webapps.platform.example.com"), (namespaces, "team-a"),
            (namespaces, "team-b"))), timeout=180)


def test_a_slow_render_holds_no_other_sync_and_is_abandoned_past_its_timeout(
        env: Env) -> None:
    """A Sync whose render waits on an `external:` call (held by the test) does not delay
    another Sync's webhook commit; once the call returns, past its `timeout`, its run is
    ended at its next request (`TimedOut`) and retried, and the retry succeeds."""
    import http.server
    import threading
    import time

    release = threading.Event()
    calls: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            calls.append(self.path)
            release.wait(60)
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    slow_katalog = katalog(f"""\
        onReconcile:
          external:
            - name: slow
              url: "http://127.0.0.1:{server.server_address[1]}/slow"
              timeout: 30s
          configMaps:
            - name: "{{{{ .metadata.name }}}}-done"
              data: {{status: "{{{{ .external.slow.status }}}}"}}
""")
    try:
        _, slow_sha = env.repo("slow", {"katalog.yaml": slow_katalog, "crd.yaml": CRD,
                                        "s1.yaml": widget("s1", env.ns)})
        fast, fast_sha = env.repo("fast", widgets_repo(env.ns, "f1"))
        token = f"tok-{uuid.uuid4().hex}"
        env.kube.create(env.kube.resource("v1", "Secret"), {
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "hook", "namespace": env.ns},
            "stringData": {"token": token}}, field_manager=MANAGER)
        env.start("--concurrent-syncs", "2")
        env.sync("fast", "fast", interval="1h", webhook={"secretRef": {"name": "hook"}})
        wait_for("the fast Sync's first sync", lambda: env.applied("fast", fast_sha))
        env.sync("slow", "slow", timeout="1s")
        wait_for("the slow render to wait on its call", lambda: bool(calls))

        write_repo(fast, {"f2.yaml": widget("f2", env.ns, image="nginx", replicas=1,
                                            port=80)})
        fast_sha2 = commit(fast, "f2")
        request = urllib.request.Request(
            f"http://127.0.0.1:{env.port}/hooks/git/{env.ns}/fast", data=b"{}",
            method="POST", headers={"X-Gitlab-Token": token})
        with urllib.request.urlopen(request, timeout=10) as resp:
            assert resp.status == 202
        wait_for("the fast commit while the slow render waits",
                 lambda: env.applied("fast", fast_sha2))
        assert not release.is_set() and len(calls) == 1  # still inside that one render

        time.sleep(1.5)  # the slow run is past its timeout of 1s when its call returns
        release.set()
        wait_for("the slow run abandoned", lambda: env.ready("slow").get("reason") ==
                 "TimedOut")
        assert "timeout of 1s" in env.ready("slow")["message"]
        assert env.kube.get_or_none(env.kube.resource("v1", "ConfigMap"), env.ns,
                                    "s1-done") is None
        env.patch("slow", {"spec": {"timeout": "5m"}})  # room for the retry's whole sync
        wait_for("the retry, after its backoff", lambda: env.applied("slow", slow_sha))
        assert len(calls) >= 2
    finally:
        release.set()
        server.shutdown()
        server.server_close()


def test_a_crd_two_syncs_ship_is_not_taken_back_and_forth_by_their_repairs(
        env: Env) -> None:
    """Eight repositories ship the Widget CRD: each Sync's full sync writes it (its label
    and inventory annotation), and the other's drift repair, seeing it leave its view,
    leaves it to its last writer instead of taking it back, without end."""
    heads = {name: env.repo(name, widgets_repo(env.ns, f"{name}1"))[1]
             for name in "abcdefgh"}
    env.start()
    for name in heads:
        env.sync(name, name)
    wait_for("all applied", lambda: all(env.applied(n, sha) for n, sha in heads.items()))
    audit = env.control_plane.audit_log
    assert audit is not None
    mark = audit.stat().st_size
    for _ in range(2):  # each answered by a run of that Sync: the repairs had their turns
        for name in heads:
            done = env.cli("reconcile", f"{env.ns}/{name}", "--wait", "--timeout", "60")
            assert done.returncode == 0, done.stdout + done.stderr
    writes = []
    with audit.open("rb") as fh:
        fh.seek(mark)
        for line in fh.read().decode().splitlines():
            event = json.loads(line)
            if f"(agent {env.name})" in event.get("userAgent", "") and \
                    event.get("stage") == "ResponseComplete" and \
                    event.get("verb") in ("create", "update", "patch") and \
                    (event.get("objectRef") or {}).get("resource") == \
                    "customresourcedefinitions":
                writes.append(event["verb"])
    assert len(writes) <= 2, writes


def test_an_agent_serving_syncs_says_so_when_the_sync_crd_is_missing(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    """On a control plane without the Sync CRD: an error naming the CRD and how to install
    it, and /readyz not ready; nothing else fails."""
    with ControlPlane(bin_dir=control_plane.bin_dir) as bare:
        log = tmp_path / "agent.log"
        port = free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "orksync", "agent", "--state-dir", str(tmp_path / "s"),
             "--listen", f"127.0.0.1:{port}", "--kubeconfig", str(bare.kubeconfig)],
            stdout=subprocess.DEVNULL, stderr=log.open("w"), start_new_session=True)
        try:
            wait_for("the error", lambda: "deploy/base/sync.crd.yaml" in log.read_text())
            assert "the Sync CRD (syncs.orksync.io) is not served" in log.read_text()

            def readyz() -> tuple[int, str]:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz",
                                                timeout=5) as resp:
                        return int(resp.status), resp.read().decode()
                except urllib.error.HTTPError as err:
                    return int(err.code), err.read().decode()
                except OSError:
                    return 0, ""

            # (200 "standby" until it holds the Lease)
            wait_for("readyz not ready", lambda: readyz() ==
                     (503, "the Syncs have not been listed yet\n"))
            assert proc.poll() is None
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)


def _ui(env: Env, token: str) -> str:
    request = urllib.request.Request(f"http://127.0.0.1:{env.port}/ui/",
                                     headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return str(answer.read().decode())


def test_the_web_view_shows_each_sync_to_whoever_may_get_it(env: Env) -> None:
    """The web view of an agent serving Syncs: its roots are the Syncs, each shown to a
    token allowed to `get` that Sync (a SubjectAccessReview), with the custom resources of
    its inventory."""
    from tests.agent.test_webui_cluster import _service_account

    _, sha_a = env.repo("a", widgets_repo(env.ns, "a1"))
    _, sha_b = env.repo("b", widgets_repo(env.ns, "b1"))
    env.start()
    env.sync("a", "a")
    env.sync("b", "b")
    wait_for("both Syncs applied", lambda: env.applied("a", sha_a) and env.applied("b", sha_b))
    operator = _service_account(env.kube, env.ns, "operator", cluster_role="cluster-admin")
    only_a = _service_account(env.kube, env.ns, "only-a", rules=[
        {"apiGroups": ["orksync.io"], "resources": ["syncs"], "verbs": ["get"],
         "resourceNames": ["a"]},
        {"apiGroups": ["test.orksync.io"], "resources": ["widgets"], "verbs": ["list"]}])

    def shows(token: str, name: str) -> bool:
        return f"{env.ns}.{name}" in _ui(env, token)

    wait_for("the operator sees both Syncs", lambda: shows(operator, "a") and
             shows(operator, "b"))
    page = _ui(env, operator)
    assert env.daemon.url("a") in page and sha_a[:12] in page
    assert f"{env.ns}/a1" in page and f"{env.ns}/b1" in page  # the custom resources
    page = _ui(env, only_a)
    assert f"{env.ns}.a" in page and f"{env.ns}.b" not in page
