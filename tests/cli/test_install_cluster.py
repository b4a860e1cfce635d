"""`orksync install` (orksync.cli.install): deploy/ is its one source of truth.

* `orksync install --export` equals what `kubectl kustomize` gives for deploy/ (the
  impersonation overlay by default, the base with `--rbac direct`), with the install's
  substitutions written as a kustomization of their own (namespace, images, an env patch);
* every CRD deploy/'s kustomization lists is installed, first after the Namespace (the
  Sync CRD, or any other added later, needs no edit here);
* the export passes `kubectl apply --server-side --dry-run=server` on the real control plane;
* `orksync install` applied for real on an empty control plane, and the agent's
  ServiceAccount can do what it needs (`kubectl auth can-i`, then `orksync sync` of the
  example as that ServiceAccount, the children written as the tenants'), and nothing more.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from orksync.cli.install import DEPLOY
from testbed.controlplane import ControlPlane, kubeconfig_document, write_kubeconfig
from tests.cli.test_deploy import _env_without_kubeconfig, dump, kubectl, load_text
from tests.helpers import REPO_EXAMPLE, ROOT

pytestmark = pytest.mark.cluster

DEPLOYED_IMAGE = "registry.example.com/orksync"


def orksync(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orksync", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False,
                          env=_env_without_kubeconfig())


def key(doc: dict[str, Any]) -> tuple[str, str, str]:
    meta = doc["metadata"]
    return doc["kind"], meta.get("namespace", ""), meta["name"]


def by_key(docs: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    out = {key(d): d for d in docs}
    assert len(out) == len(docs), "two objects of the same kind, namespace and name"
    return out


def kustomized(cp: ControlPlane, tmp: Path, *, overlay: str, namespace: str = "",
               image: tuple[str, str, str] | None = None,
               env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """`kubectl kustomize` of a kustomization that takes deploy/ (copied) as its resource
    and makes the install's substitutions the kustomize way."""
    shutil.copytree(DEPLOY, tmp / "deploy")
    spec: dict[str, Any] = {"apiVersion": "kustomize.config.k8s.io/v1beta1",
                            "kind": "Kustomization", "resources": [f"deploy/{overlay}"]}
    if namespace:
        spec["namespace"] = namespace
    if image:
        name, tag, digest = image
        entry = {"name": DEPLOYED_IMAGE, "newName": name}
        entry.update({"digest": digest} if digest else {"newTag": tag})
        spec["images"] = [entry]
    if env:
        ops = [{"op": "add", "path": "/spec/template/spec/containers/0/env/-",
                "value": {"name": k, "value": v}} for k, v in env.items()]
        spec["patches"] = [{"target": {"kind": "Deployment", "name": "orksync"},
                            "patch": yaml.safe_dump(ops)}]
    (tmp / "kustomization.yaml").write_text(yaml.safe_dump(spec))
    return load_text(kubectl(cp, "kustomize", str(tmp)).stdout)


DIGEST = "sha256:" + "ab" * 32
CASES = {
    "defaults": ([], {"overlay": "overlays/impersonation"}),
    "substituted": (["--namespace", "flux-like", "--image", "ghcr.io/acme/orksync:1.2.3",
                     "--watch-namespace", "team-a"],
                    {"overlay": "overlays/impersonation", "namespace": "flux-like",
                     "image": ("ghcr.io/acme/orksync", "1.2.3", ""),
                     "env": {"ORKSYNC_WATCH_NAMESPACE": "team-a"}}),
    "direct-by-digest": (["--rbac", "direct", "--image", f"ghcr.io/acme/orksync@{DIGEST}",
                          "--repo-url", "https://git.example.com/acme/platform.git"],
                         {"overlay": ".", "image": ("ghcr.io/acme/orksync", "", DIGEST)}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_export_equals_kustomize_with_the_substitutions(
        control_plane: ControlPlane, tmp_path: Path, case: str) -> None:
    flags, kustomization = CASES[case]
    proc = orksync("install", "--export", *flags)
    assert proc.returncode == 0, proc.stderr
    exported = load_text(proc.stdout)
    expected = kustomized(control_plane, tmp_path, **kustomization)  # type: ignore[arg-type]
    if "--repo-url" in flags:  # the variable added: the agent syncs that one repository
        (deployment,) = (d for d in expected if d["kind"] == "Deployment")
        deployment["spec"]["template"]["spec"]["containers"][0]["env"].append(
            {"name": "ORKSYNC_REPO_URL", "value": "https://git.example.com/acme/platform.git"})
    assert by_key(exported) == by_key(expected)
    kinds = [d["kind"] for d in exported]
    assert kinds[0] == "Namespace"
    assert {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
            "RoleBinding", "Deployment", "Service", "NetworkPolicy", "CronJob"} <= set(kinds)


@pytest.mark.parametrize("image", ["ghcr.io/acme/orksync", "ghcr.io/acme/orksync:latest",
                                   "ghcr.io/acme/orksync@sha256:abc"])
def test_a_moving_or_malformed_image_is_refused(image: str) -> None:
    proc = orksync("install", "--export", "--image", image)
    assert proc.returncode == 2, proc.stderr
    assert f"--image {image}" in proc.stderr


def test_the_export_passes_a_server_side_dry_run(control_plane: ControlPlane) -> None:
    namespace = "orksync-install-dry"
    docs = load_text(orksync("install", "--export", "--namespace", namespace).stdout)
    (ns,) = (d for d in docs if d["kind"] == "Namespace")
    kubectl(control_plane, "apply", "--server-side", "--field-manager=orksync-tests", "-f",
            "-", stdin=dump([ns]))  # a dry-run Namespace holds no dry-run object
    proc = kubectl(control_plane, "apply", "--server-side", "--dry-run=server",
                   "--field-manager=orksync-install", "-f", "-", stdin=dump(docs))
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert len(lines) == len(docs), proc.stdout
    assert all("(server dry run)" in line for line in lines), proc.stdout
    assert kubectl(control_plane, "-n", namespace, "get", "deployment", "orksync",
                   check=False).returncode != 0


@pytest.fixture(scope="module")
def empty_plane(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """A control plane of its own: the install writes the cluster-wide ClusterRole and
    binding `orksync`, and the example's objects, which other tests expect absent."""
    with ControlPlane(bin_dir=control_plane.bin_dir) as cp:
        yield cp


def test_install_applies_and_the_agent_can_do_what_it_needs(empty_plane: ControlPlane,
                                                            tmp_path: Path) -> None:
    cp = empty_plane
    ns = "orksync-installed"
    first = orksync("install", "--namespace", ns, "--kubeconfig", str(cp.kubeconfig))
    assert first.returncode == 0, first.stderr
    assert f"created Deployment/{ns}/orksync" in first.stderr, first.stderr
    again = orksync("install", "--namespace", ns, "--kubeconfig", str(cp.kubeconfig))
    assert again.returncode == 0, again.stderr
    assert "created" not in again.stderr and "failed" not in again.stderr.replace(
        "0 failed", ""), again.stderr
    managers = kubectl(cp, "-n", ns, "get", "deployment", "orksync", "--show-managed-fields",
                       "-o", "jsonpath={.metadata.managedFields[*].manager}").stdout.split()
    assert "orksync-install" in managers
    kubectl(cp, "-n", ns, "get", "serviceaccount/orksync", "service/orksync-metrics",
            "networkpolicy/orksync", "role/orksync", "rolebinding/orksync",
            "cronjob/orksync-rotate")

    token = kubectl(cp, "-n", ns, "create", "token", "orksync", "--duration=1h").stdout.strip()
    document = kubeconfig_document(cp.server, cp.ca_pem, b"", b"")
    (user,) = document["users"]  # type: ignore[misc]
    user["user"] = {"token": token}
    config = tmp_path / "orksync.kubeconfig"
    write_kubeconfig(config, document)

    def can(*args: str) -> bool:
        return kubectl(cp, "auth", "can-i", *args, kubeconfig=config,
                       check=False).stdout.strip() == "yes"

    # what the agent needs: its Lease and inventories beside it, the CRDs, reading the
    # children, impersonating the tenants' ServiceAccount, events, the web view's reviews
    assert can("update", "leases.coordination.k8s.io", "-n", ns)
    assert can("create", "configmaps", "-n", ns)
    assert can("create", "customresourcedefinitions.apiextensions.k8s.io")
    assert can("list", "deployments.apps", "-n", "team-a")
    assert can("impersonate", "serviceaccounts/orksync-tenant", "-n", "team-a")
    assert can("create", "events", "-n", "team-a")
    assert can("create", "tokenreviews.authentication.k8s.io")
    # and nothing more: no writes of children, no other identity, no webhooks
    assert not can("update", "leases.coordination.k8s.io", "-n", "default")
    assert not can("create", "deployments.apps", "-n", "team-a")
    assert not can("impersonate", "serviceaccounts/other", "-n", "team-a")
    assert not can("create", "validatingwebhookconfigurations.admissionregistration.k8s.io")
    assert not can("*", "*")

    # the proof: the example synced as that ServiceAccount, each child as its tenant:
    # refused as the tenant before the tenants' RBAC exists, written after
    def sync() -> subprocess.CompletedProcess[str]:
        return orksync("sync", str(REPO_EXAMPLE), "--once", "--kubeconfig", str(config),
                       "--inventory-namespace", ns,
                       "--default-service-account", "orksync-tenant")

    refused = sync()
    assert refused.returncode == 1, refused.stderr
    assert "system:serviceaccount:team-a:orksync-tenant" in refused.stderr, refused.stderr
    template = (DEPLOY / "overlays" / "impersonation" / "tenant-example.yaml").read_text()
    for tenant in ("team-a", "team-b"):
        kubectl(cp, "apply", "--server-side", "--field-manager=orksync-tests", "-f", "-",
                stdin=template.replace("namespace: team-a", f"namespace: {tenant}"))
    synced = sync()
    assert synced.returncode == 0, synced.stderr
    assert "failed=0" in synced.stderr, synced.stderr
    kubectl(cp, "-n", "team-a", "get", "webapp/shop", "deployment/shop", "service/shop-public")
    kubectl(cp, "-n", ns, "get", "configmap", "orksync-inventory-default")


def test_the_webhook_overlay_passes_a_server_side_dry_run(control_plane: ControlPlane) -> None:
    overlay = DEPLOY / "overlays" / "webhook"
    docs = load_text(kubectl(control_plane, "kustomize", str(overlay)).stdout)
    (ingress,) = (d for d in docs if d["kind"] == "Ingress")
    (path,) = ingress["spec"]["rules"][0]["http"]["paths"]
    assert (path["path"], path["backend"]["service"]["name"]) == ("/hooks/git",
                                                                   "orksync-metrics")
    (deployment,) = (d for d in docs if d["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["ORKSYNC_WEBHOOK_SECRET_FILE"] == "/etc/orksync/webhook/secret"
    (mount,) = (m for m in container["volumeMounts"] if m["name"] == "webhook")
    assert env["ORKSYNC_WEBHOOK_SECRET_FILE"].startswith(mount["mountPath"] + "/")
    namespace = "orksync-webhook-dry"
    template = load_text((overlay / "webhook.secret.yaml").read_text())
    everything = [{**d, "metadata": {**d["metadata"], "namespace": namespace}}
                  for d in docs + template if d["kind"] != "Namespace" and
                  d["kind"] not in ("ClusterRole", "ClusterRoleBinding")]
    kubectl(control_plane, "create", "namespace", namespace)
    proc = kubectl(control_plane, "apply", "--server-side", "--dry-run=server",
                   "--field-manager=orksync-tests", "-f", "-", stdin=dump(everything))
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert len(lines) == len(everything) and all("(server dry run)" in line
                                                 for line in lines), proc.stdout
