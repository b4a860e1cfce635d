"""The command line against the real control plane: secrets end to end, rotate, no leaks."""

from __future__ import annotations

import base64
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from orksync.apply.kube import Kube
from orksync.testing.controlplane import ControlPlane
from tests.helpers import CRD, write_repo

pytestmark = pytest.mark.cluster

SECRET_KATALOG = """
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: apps}
spec:
  crds:
    widget:
      crdFile: ./crd.yaml
      operatorBox:
        onReconcile:
          secrets:
            - name: "{{ .metadata.name }}-credentials"
              once: true
              data:
                username: admin
                password: "{{ randomAlphanumeric 24 }}"
          deployments:
            - name: "{{ .metadata.name }}"
              image: nginx
              env:
                - name: PASSWORD
                  valueFrom:
                    secretKeyRef: {name: "{{ .metadata.name }}-credentials", key: password}
"""


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orksync", *args], capture_output=True,
                          text=True, timeout=120)


def secret_data(kube: Kube, ns: str, name: str) -> dict[str, str]:
    live = kube.get(kube.resource("v1", "Secret"), ns, name)
    return {k: base64.b64decode(v).decode() for k, v in live["data"].items()}


def test_a_generated_secret_is_stable_across_syncs_and_never_printed_or_rendered(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    ns = f"t-{uuid.uuid4().hex[:8]}"
    repo = write_repo(tmp_path / "repo", {
        "katalog.yaml": SECRET_KATALOG, "crd.yaml": CRD,
        "w.yaml": f"apiVersion: test.orksync.io/v1\nkind: Widget\nmetadata:\n  name: w\n"
                  f"  namespace: {ns}\nspec: {{}}\n"})
    kc = str(control_plane.kubeconfig)
    out = tmp_path / "out"
    first = run("sync", str(repo), "--once", "--kubeconfig", kc, "-o", str(out),
                "--log-level", "debug")
    assert first.returncode == 0, first.stderr
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    data = secret_data(kube, ns, "w-credentials")
    assert data["username"] == "admin" and len(data["password"]) == 24
    second = run("sync", str(repo), "--once", "--kubeconfig", kc, "--log-level", "debug")
    assert second.returncode == 0, second.stderr
    assert secret_data(kube, ns, "w-credentials") == data
    assert "configured=0" in second.stderr.splitlines()[-1]
    rendered = "".join(p.read_text() for p in out.rglob("*.yaml"))
    assert "<generate:randomAlphanumeric:24>" in rendered
    for text in (first.stdout, first.stderr, second.stdout, second.stderr, rendered):
        assert data["password"] not in text
    kube.close()


def test_rotate_force_writes_new_values_in_place_and_rolls_the_workload(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    ns = f"t-{uuid.uuid4().hex[:8]}"
    repo = write_repo(tmp_path / "repo", {
        "katalog.yaml": SECRET_KATALOG, "crd.yaml": CRD,
        "w.yaml": f"apiVersion: test.orksync.io/v1\nkind: Widget\nmetadata:\n  name: w\n"
                  f"  namespace: {ns}\nspec: {{}}\n"})
    kc = str(control_plane.kubeconfig)
    assert run("sync", str(repo), "--once", "--kubeconfig", kc).returncode == 0
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    before = secret_data(kube, ns, "w-credentials")
    deploy_res = kube.resource("apps/v1", "Deployment")
    hash_before = kube.get(deploy_res, ns, "w")["spec"]["template"]["metadata"][
        "annotations"]["orksync.io/secrets-hash"]

    rotated = run("rotate", "--force", f"{ns}/w-credentials", "--kubeconfig", kc)
    assert rotated.returncode == 0, rotated.stderr
    after = secret_data(kube, ns, "w-credentials")
    assert after["password"] != before["password"] and after["username"] == "admin"
    assert before["password"] not in rotated.stderr and after["password"] not in rotated.stderr

    again = run("sync", str(repo), "--once", "--kubeconfig", kc)
    assert again.returncode == 0, again.stderr
    assert secret_data(kube, ns, "w-credentials") == after  # the sync keeps rotated values
    hash_after = kube.get(deploy_res, ns, "w")["spec"]["template"]["metadata"][
        "annotations"]["orksync.io/secrets-hash"]
    assert hash_after != hash_before  # the Deployment rolls
    kube.close()
