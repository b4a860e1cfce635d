"""`diff_objects` against the real control plane: server-side dry run vs live."""

from __future__ import annotations

import base64
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from orksync.apply.diff import diff_objects
from orksync.apply.engine import Applier
from orksync.cluster.kube import Kube
from orksync.katalog.loader import load_repository
from orksync.model import RenderedSet
from orksync.render.engine import render_catalog
from testbed.controlplane import ControlPlane
from tests.helpers import CRD, widget, write_repo

pytestmark = pytest.mark.cluster

MERGE = "application/merge-patch+json"

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
          secrets:
            - name: "{{ .metadata.name }}-creds"
              reconcile: true
              data:
                password: "{{ .spec.password }}"
          deployments:
            - name: "{{ .metadata.name }}"
              image: "{{ .spec.image }}"
              replicas: "{{ .spec.replicas }}"
              reconcile: true
"""


def render(repo: Path) -> RenderedSet:
    rendered = render_catalog(load_repository(repo))
    assert rendered.ok, rendered.errors
    return rendered


def test_diff_before_and_after_a_sync(control_plane: ControlPlane, tmp_path: Path) -> None:
    ns = f"t-{uuid.uuid4().hex[:8]}"
    secret = "Hunter2-" + uuid.uuid4().hex[:8]
    repo = write_repo(tmp_path, {"katalog.yaml": KATALOG, "crd.yaml": CRD, "w.yaml": widget(
        "w", ns, image="nginx:1", replicas=1, password=secret)})
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)

    # before the first sync: everything is new (the owner does not exist yet)
    before = diff_objects(kube, render(repo))
    assert before.exit_code == 1 and not before.errors
    text = before.text()
    assert f"+++ b/Deployment/{ns}/w" in text and "# new object" in text
    assert secret not in text

    assert not Applier(kube).apply(render(repo)).failed
    after = diff_objects(kube, render(repo))
    assert after.errors == [] and after.diffs == [] and after.exit_code == 0

    # a changed repository: a unified diff of the Deployment, the Secret value masked
    new_secret = "Tr0ub4dor-" + uuid.uuid4().hex[:8]
    write_repo(tmp_path, {"w.yaml": widget("w", ns, image="nginx:2", replicas=3,
                                           password=new_secret)})
    changed = diff_objects(kube, render(repo))
    assert changed.exit_code == 1
    diffs = dict((str(ref), d) for ref, d in changed.diffs)
    assert set(diffs) == {f"Deployment/{ns}/w", f"Secret/{ns}/w-creds",
                          f"Widget.test.orksync.io/{ns}/w"}
    deploy = diffs[f"Deployment/{ns}/w"]
    assert deploy.startswith(f"--- a/Deployment/{ns}/w\n+++ b/Deployment/{ns}/w\n")
    assert "-  replicas: 1\n" in deploy and "+  replicas: 3\n" in deploy
    assert "nginx:2" in deploy
    assert "managedFields" not in deploy and "resourceVersion" not in deploy
    assert "orksync.io/hash" not in deploy
    creds = diffs[f"Secret/{ns}/w-creds"]
    assert "# data.password changed" in creds
    out = changed.text()
    for value in (secret, new_secret):
        assert value not in out
        assert base64.b64encode(value.encode()).decode() not in out
    kube.close()


def test_errors_classify_as_exit_code_2(control_plane: ControlPlane, tmp_path: Path) -> None:
    ns = f"t-{uuid.uuid4().hex[:8]}"
    repo = write_repo(tmp_path, {"katalog.yaml": KATALOG, "crd.yaml": CRD,
                                 "w.yaml": widget("w", ns, image="nginx", replicas=1,
                                                  password="x"),
                                 "bad.yaml": widget("bad", ns, replicas=1)})
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    result = diff_objects(kube, render_catalog(load_repository(repo)))
    assert result.errors and "bad" in result.errors[0]
    assert result.exit_code == 2
    kube.close()


SECRET_WORK_KATALOG = """
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: widgets}
spec:
  crds:
    widget:
      crdFile: ./crd.yaml
      operatorBox:
        onCreate:
          secrets:
            - name: "{{ .metadata.name }}-creds"
              once: true
              data:
                user: admin
                password: "{{ randomAlphanumeric 32 }}"
EXTRA
            - name: "{{ .metadata.name }}-tls"
              tls:
                dnsNames: ["{{ .spec.host }}"]
                algorithm: ecdsa
            - name: "{{ .metadata.name }}-token"
              rotateAfter: 1h
              data:
                token: "{{ randomHex 16 }}"
"""


def test_diff_shows_the_secret_work_a_sync_would_do_and_the_sync_does_it(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    ns = f"t-{uuid.uuid4().hex[:8]}"
    katalog = SECRET_WORK_KATALOG.replace("EXTRA\n", "")
    repo = write_repo(tmp_path, {"katalog.yaml": katalog, "crd.yaml": CRD,
                                 "w.yaml": widget("w", ns, host="a.example")})
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    assert not Applier(kube).apply(render(repo)).failed
    assert diff_objects(kube, render(repo)).exit_code == 0
    res = kube.resource("v1", "Secret")
    creds_before = kube.get(res, ns, "w-creds")["data"]
    tls_before = kube.get(res, ns, "w-tls")["data"]

    # a changed dnsNames, a generated key added to the once Secret, a rotation that is due
    write_repo(tmp_path, {
        "katalog.yaml": SECRET_WORK_KATALOG.replace(
            "EXTRA\n", '                apiKey: "{{ randomHex 16 }}"\n'),
        "w.yaml": widget("w", ns, host="b.example")})
    kube.request("PATCH", res.path(ns, "w-token"), content_type="application/merge-patch+json",
                 body={"metadata": {"annotations": {
                     "orkestra.orkspace.io/generated-at": "2020-01-01T00:00:00Z"}}})
    result = diff_objects(kube, render(repo))
    assert result.exit_code == 1 and not result.errors, result.errors
    lines = result.text().splitlines()
    assert f"Secret/{ns}/w-tls: certificate would be re-issued: dnsNames changed" in lines
    assert f"Secret/{ns}/w-creds: generated keys to add: apiKey" in lines
    assert any(line.startswith(f"Secret/{ns}/w-token: rotation due: rotateAfter 1h elapsed")
               for line in lines), lines
    differ = {str(ref) for ref, _ in result.diffs}
    assert {f"Secret/{ns}/w-tls", f"Secret/{ns}/w-creds", f"Secret/{ns}/w-token"} <= differ
    token_before = kube.get(res, ns, "w-token")["data"]
    for value in (*creds_before.values(), *tls_before.values(), *token_before.values()):
        assert value not in result.text()
        assert base64.b64decode(value).decode() not in result.text()

    # the sync does exactly that: the missing key generated, every existing value kept
    changes = Applier(kube).apply(render(repo))
    assert not changes.failed, changes.failed
    creds_after = kube.get(res, ns, "w-creds")["data"]
    assert {k: creds_after[k] for k in creds_before} == creds_before
    assert len(base64.b64decode(creds_after["apiKey"])) == 32
    assert kube.get(res, ns, "w-tls")["data"]["tls.crt"] != tls_before["tls.crt"]
    assert kube.get(res, ns, "w-token")["data"]["token"] != token_before["token"]
    settled = diff_objects(kube, render(repo))
    assert settled.exit_code == 0, settled.text()


def orksync(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orksync", *args], capture_output=True,
                          text=True, timeout=300)


def test_diff_shows_the_prune_and_teardown_of_a_sync_as_deletions(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    """`orksync diff --name` plans the sync's prune from the same inventory with the same
    rules: a custom resource removed from Git and its children, a child removed from the
    Katalog, each a diff against /dev/null (Secrets masked); what the sync would refuse
    to delete is a `# prune refused:` line; another source's inventory is an error."""
    ns = f"t-{uuid.uuid4().hex[:8]}"
    kc, name = str(control_plane.kubeconfig), f"diff-{uuid.uuid4().hex[:8]}"
    secret = "Hunter2-" + uuid.uuid4().hex[:8]
    repo = write_repo(tmp_path / "repo", {
        "katalog.yaml": KATALOG, "crd.yaml": CRD,
        "w.yaml": widget("w", ns, image="nginx:1", replicas=1, password="w-" + secret),
        "v.yaml": widget("v", ns, image="nginx:1", replicas=1, password=secret)})
    common = ("--kubeconfig", kc, "--name", name)
    synced = orksync("sync", str(repo), "--once", *common)
    assert synced.returncode == 0, synced.stderr
    clean = orksync("diff", str(repo), *common)
    assert clean.returncode == 0 and clean.stdout == "", clean.stdout + clean.stderr

    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    deployments = kube.resource("apps/v1", "Deployment")
    kube.request("PATCH", deployments.path(ns, "w"), content_type=MERGE,
                 body={"metadata": {"annotations": {"orksync.io/prune": "disabled"}}})
    (repo / "v.yaml").unlink()
    write_repo(repo, {"katalog.yaml": KATALOG.split("          deployments:")[0]})
    diff = orksync("diff", str(repo), *common)
    assert diff.returncode == 1, diff.stdout + diff.stderr
    out = diff.stdout
    for ref, why in ((f"Widget.test.orksync.io/{ns}/v",
                      "deleted: the custom resource left the repository"),
                     (f"Deployment/{ns}/v",
                      f"deleted: the garbage collector deletes it with "
                      f"Widget.test.orksync.io/{ns}/v"),
                     (f"Secret/{ns}/v-creds",
                      f"deleted: the garbage collector deletes it with "
                      f"Widget.test.orksync.io/{ns}/v")):
        assert f"--- a/{ref}\n+++ /dev/null\n# {why}\n" in out, out
    assert '-  password: "***"\n' in out, out
    assert f"# prune refused: Deployment/{ns}/w: not deleted: annotated orksync.io/prune: " \
           "disabled\n" in out, out
    assert f"a/Deployment/{ns}/w" not in out
    for value in (secret, "w-" + secret):
        assert value not in out + diff.stderr
        assert base64.b64encode(value.encode()).decode() not in out + diff.stderr

    # the sync does what the diff showed
    after = orksync("sync", str(repo), "--once", *common)
    assert after.returncode == 0, after.stderr
    widgets = kube.resource("test.orksync.io/v1", "Widget")
    assert kube.get_or_none(widgets, ns, "v") is None
    assert kube.get_or_none(deployments, ns, "w") is not None
    assert f"skipped Deployment/{ns}/w: not deleted: annotated orksync.io/prune: disabled" \
        in after.stderr, after.stderr

    other = write_repo(tmp_path / "other", {"katalog.yaml": KATALOG, "crd.yaml": CRD})
    conflict = orksync("diff", str(other), *common)
    assert conflict.returncode == 2, conflict.stdout + conflict.stderr
    assert f"synced from {repo.resolve()}, not from {other.resolve()}" in conflict.stderr
    kube.close()
