"""`--dry-run` against the real control plane: a dry run reports, object by object, what
the real run then does, and writes nothing."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from orksync.cluster.kube import Kube
from testbed.controlplane import ControlPlane
from tests.helpers import CRD, write_repo

pytestmark = pytest.mark.cluster

# Every write policy: onReconcile (server-side apply), onCreate (create-if-absent), a
# Job (create-only), a `once` Secret (the Secret runner) and the Deployment reading it
# (the rollout hash); the CRD and a plain manifest beside them.
KATALOG = """
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
            - name: "{{ .metadata.name }}-settings"
              data: {color: "{{ .spec.color }}"}
          configMaps:
            - name: "{{ .metadata.name }}-cfg"
              data: {color: "{{ .spec.color }}"}
            - name: "{{ .metadata.name }}-remote"
              namespace: "{{ .spec.remote }}"
              data: {color: "{{ .spec.color }}"}
          deployments:
            - name: "{{ .metadata.name }}"
              image: "{{ .spec.image }}"
              env:
                - name: PASSWORD
                  valueFrom:
                    secretKeyRef: {name: "{{ .metadata.name }}-credentials", key: password}
        onCreate:
          configMaps:
            - name: "{{ .metadata.name }}-seed"
              data: {color: "{{ .spec.color }}"}
          jobs:
            - name: "{{ .metadata.name }}-init"
              image: busybox
"""


def widget(name: str, ns: str, image: str, color: str) -> str:
    """A Widget; its `-remote` ConfigMap in the namespace `<ns>-remote` (no owner reference
    reaches it: the teardown deletes it)."""
    return (f"apiVersion: test.orksync.io/v1\nkind: Widget\nmetadata:\n  name: {name}\n"
            f"  namespace: {ns}\nspec:\n  image: {image}\n  color: {color}\n"
            f"  remote: {ns}-remote\n")


def plain(ns: str, level: str) -> str:
    return (f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n"
            f"  namespace: {ns}\ndata:\n  level: {level}\n")


# `1000m` is stored as `1`: the live object never holds the value as written, so every
# sync sends its apply, which the API server turns into a no-op (the real run says
# unchanged; so must the dry run, which compares the answer with the live object)
QUOTA = """
apiVersion: v1
kind: ResourceQuota
metadata: {{name: quota, namespace: {ns}}}
spec:
  hard: {{limits.cpu: 1000m}}
"""


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orksync", *args, "--log-format", "json",
                           "--log-level", "debug"], capture_output=True, text=True,
                          timeout=180)


def outcomes(proc: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """The run's per-object lines: object -> action (each object once)."""
    found: dict[str, str] = {}
    for line in proc.stderr.splitlines():
        if not line.startswith("{"):
            continue
        record = json.loads(line)
        if "action" in record and "object" in record:
            assert record["object"] not in found, f"{record['object']} reported twice"
            found[record["object"]] = record["action"]
    return found


def versions(kube: Kube, ns: str) -> dict[str, str]:
    """The resourceVersion of every object of the test's kinds in `ns`."""
    found = {}
    for api_version, kind in (("v1", "ConfigMap"), ("v1", "Secret"), ("apps/v1", "Deployment"),
                              ("batch/v1", "Job"), ("test.orksync.io/v1", "Widget")):
        for item in kube.list(kube.resource(api_version, kind), namespace=ns):
            meta = item["metadata"]
            found[f"{kind}/{meta['name']}"] = meta["resourceVersion"]
    return found


def test_a_dry_run_reports_object_by_object_what_the_real_run_then_does(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    ns = f"t-{uuid.uuid4().hex[:8]}"
    kc, name = str(control_plane.kubeconfig), f"dry-{uuid.uuid4().hex[:8]}"
    repo = write_repo(tmp_path / "repo", {
        "katalog.yaml": KATALOG, "crd.yaml": CRD,
        "platform/ns.yaml": f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n",
        "platform/remote.yaml": f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "
                                f"{ns}-remote\n",
        "platform/settings.yaml": plain(ns, "low"),
        "platform/quota.yaml": QUOTA.format(ns=ns),
        "apps/a.yaml": widget("a", ns, "nginx:1.27", "blue"),
        "apps/b.yaml": widget("b", ns, "nginx:1.27", "blue"),
        "apps/kept.yaml": widget("kept", ns, "nginx:1.27", "blue")})
    first = run("sync", str(repo), "--once", "--kubeconfig", kc, "--name", name)
    assert first.returncode == 0, first.stderr

    # an image tag, a ConfigMap value (rendered and plain), a create-if-absent object whose
    # rendered content changes (never updated), a new custom resource, a removed one; the
    # Secrets' once-values untouched
    write_repo(repo, {"apps/a.yaml": widget("a", ns, "nginx:1.29", "green"),
                      "apps/c.yaml": widget("c", ns, "nginx:1.27", "blue"),
                      "platform/settings.yaml": plain(ns, "high")})
    (repo / "apps/b.yaml").unlink()
    rendered = tmp_path / "rendered"
    assert run("render", str(repo), "-o", str(rendered)).returncode == 0

    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    before = versions(kube, ns)
    dry_sync = run("sync", str(repo), "--once", "--dry-run", "--kubeconfig", kc,
                   "--name", name)
    dry_apply = run("apply", str(rendered), "--dry-run", "--kubeconfig", kc, "--name", name)
    assert dry_sync.returncode == 0, dry_sync.stderr
    assert dry_apply.returncode == 0, dry_apply.stderr
    assert versions(kube, ns) == before  # the dry runs wrote nothing

    real = run("sync", str(repo), "--once", "--kubeconfig", kc, "--name", name)
    assert real.returncode == 0, real.stderr
    done = outcomes(real)
    assert done == outcomes(dry_sync)
    assert done == outcomes(dry_apply)
    # the real run did what the scenario says, so that the equality above means something
    expected = {
        f"Deployment/{ns}/a": "configured", f"ConfigMap/{ns}/a-cfg": "configured",
        f"ConfigMap/{ns}/settings": "configured", f"ConfigMap/{ns}/a-seed": "unchanged",
        f"Secret/{ns}/a-credentials": "unchanged", f"Secret/{ns}/a-settings": "configured",
        f"Secret/{ns}/kept-settings": "unchanged", f"Deployment/{ns}/kept": "unchanged",
        f"Widget.test.orksync.io/{ns}/kept": "unchanged", f"ConfigMap/{ns}/kept-cfg": "unchanged",
        f"Job/{ns}/kept-init": "unchanged",
        f"Widget.test.orksync.io/{ns}/c": "created", f"Deployment/{ns}/c": "created",
        f"Secret/{ns}/c-credentials": "created", f"Job/{ns}/c-init": "created",
        f"Widget.test.orksync.io/{ns}/b": "deleted", f"ConfigMap/{ns}-remote/b-remote": "deleted",
        f"ConfigMap/{ns}-remote/a-remote": "configured", f"ResourceQuota/{ns}/quota": "unchanged"}
    assert {k: done.get(k) for k in expected} == expected, done
    kube.close()



def test_a_dry_run_of_a_new_crd_and_new_namespaces_reports_what_the_real_run_creates(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    """What the API server cannot dry-run because the dry run made nothing: custom
    resources of a CRD the same sync creates, their children, and the objects of a
    namespace it creates (from a manifest, or because a custom resource is in it) are
    reported created, as the real run then creates them."""
    ns, other = f"t-{uuid.uuid4().hex[:8]}", f"t-{uuid.uuid4().hex[:8]}"
    kc, name = str(control_plane.kubeconfig), f"dry-{uuid.uuid4().hex[:8]}"
    group = f"g{uuid.uuid4().hex[:8]}.orksync.io"  # a CRD new to the cluster
    crd = CRD.replace("widgets.test.orksync.io", f"widgets.{group}").replace(
        "test.orksync.io", group)
    repo = write_repo(tmp_path / "repo", {
        "katalog.yaml": KATALOG, "crd.yaml": crd,
        "platform/ns.yaml": f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {other}\n",
        "platform/remote.yaml": f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "
                                f"{ns}-remote\n",
        "platform/settings.yaml": plain(other, "low"),
        "apps/a.yaml": widget("a", ns, "nginx:1.27", "blue").replace("test.orksync.io",
                                                                     group)})
    dry = run("sync", str(repo), "--once", "--dry-run", "--kubeconfig", kc, "--name", name)
    assert dry.returncode == 0, dry.stderr
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    namespaces = kube.resource("v1", "Namespace")
    assert kube.get_or_none(namespaces, "", ns) is None  # the dry run wrote nothing
    assert kube.get_or_none(namespaces, "", other) is None
    assert kube.get_or_none(kube.resource("apiextensions.k8s.io/v1",
                                          "CustomResourceDefinition"),
                            "", f"widgets.{group}") is None
    real = run("sync", str(repo), "--once", "--kubeconfig", kc, "--name", name)
    assert real.returncode == 0, real.stderr
    done = outcomes(real)
    assert done == outcomes(dry)
    assert set(done.values()) == {"created"}, done
    assert {f"Namespace/{ns}", f"Namespace/{other}", f"ConfigMap/{other}/settings",
            f"Widget.{group}/{ns}/a", f"Deployment/{ns}/a", f"Job/{ns}/a-init",
            f"Secret/{ns}/a-credentials", f"ConfigMap/{ns}-remote/a-remote"} <= set(done), done
    kube.close()
