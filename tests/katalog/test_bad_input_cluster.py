"""Bad input against the real control plane, through the command line: a good repository
(tests/corpus/good: a once-Secret and a Job per Widget, a Jinja2 Katalog for Gadgets) is
synced; then it is broken in several ways at once (one custom resource, one template, one
malformed file) while a good custom resource changes; then it is made unreadable as a
whole. The broken syncs exit 1 naming each error; the change of the good custom resource
lands; nothing is deleted; the once-Secrets keep their values and resourceVersions; no Job
is created twice; a repaired repository converges again.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orksync.cluster.kube import Kube
from orksync.errors import ClusterError
from orksync.lifecycle.teardown import remove_finalizer
from testbed.controlplane import ControlPlane
from tests.corpus import CORPUS

pytestmark = pytest.mark.cluster

KINDS = [("v1", "Secret"), ("v1", "ConfigMap"), ("v1", "Service"), ("apps/v1", "Deployment"),
         ("batch/v1", "Job"), ("test.orksync.io/v1", "Widget"), ("test.orksync.io/v1", "Gadget")]
CUSTOM = KINDS[-2:]


def orksync(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orksync", *args], capture_output=True,
                          text=True, timeout=180)


@pytest.fixture
def kube(control_plane: ControlPlane) -> Iterator[Kube]:
    k = Kube.from_kubeconfig(control_plane.kubeconfig)
    yield k
    k.close()


@pytest.fixture
def namespaces(kube: Kube) -> Iterator[tuple[str, str]]:
    """Two fresh namespaces matching the Katalog's guard (`team-*`), emptied afterwards
    (our finalizer taken off the custom resources so that they can go)."""
    suffix = uuid.uuid4().hex[:6]
    names = (f"team-a-{suffix}", f"team-b-{suffix}")
    yield names
    for ns in names:
        with contextlib.suppress(ClusterError):
            for api, kind in CUSTOM:
                res = kube.resource(api, kind)
                for item in kube.list(res, namespace=ns):
                    remove_finalizer(kube, res, item)
            kube.delete(kube.resource("v1", "Namespace"), "", ns)


def snapshot(kube: Kube, namespaces: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """Every object of the kinds orksync writes here: `Kind/ns/name` → uid,
    resourceVersion and data."""
    out = {}
    for api, kind in KINDS:
        res = kube.resource(api, kind)
        for ns in namespaces:
            for item in kube.list(res, namespace=ns):
                meta = item["metadata"]
                if kind == "Secret" and not meta["name"].endswith("-credentials"):
                    continue
                out[f"{kind}/{ns}/{meta['name']}"] = {
                    "uid": meta["uid"], "resourceVersion": meta["resourceVersion"],
                    "data": item.get("data"), "spec": item.get("spec")}
    return out


def write(repo: Path, name: str, text: str) -> None:
    (repo / name).write_text(text)


def replace(repo: Path, name: str, old: str, new: str) -> None:
    text = (repo / name).read_text()
    assert old in text, (name, old)
    write(repo, name, text.replace(old, new))


def test_a_broken_repository_syncs_what_is_good_and_loses_nothing(
        control_plane: ControlPlane, kube: Kube, namespaces: tuple[str, str],
        tmp_path: Path) -> None:
    ns_a, ns_b = namespaces
    repo = tmp_path / "repo"
    shutil.copytree(CORPUS / "good", repo)
    for name in ("apps/shop.yaml", "apps/tools.yaml"):
        replace(repo, name, "namespace: team-a", f"namespace: {ns_a}")
    replace(repo, "apps/shop.yaml", "namespace: team-b", f"namespace: {ns_b}")
    sync = ["sync", str(repo), "--once", "--kubeconfig", str(control_plane.kubeconfig),
            "--name", f"bad-{ns_a}"]

    first = orksync(*sync)
    assert first.returncode == 0, first.stderr
    before = snapshot(kube, namespaces)
    secrets = {k: v for k, v in before.items() if k.startswith("Secret/")}
    jobs = {k: v for k, v in before.items() if k.startswith("Job/")}
    assert sorted(secrets) == [f"Secret/{ns_a}/shop-credentials",
                               f"Secret/{ns_b}/blog-credentials"]
    assert sorted(jobs) == [f"Job/{ns_a}/shop-init", f"Job/{ns_b}/blog-init"]
    assert before[f"ConfigMap/{ns_a}/tools-info"]["data"] == {"size": "3", "upper": "TOOLS"}

    # break one custom resource (blog), one template (the Gadget Katalog), one file; change
    # a good custom resource (shop: 3 replicas)
    replace(repo, "apps/shop.yaml", "  regions: []\n", "  regions: 7\n")
    replace(repo, "katalogs/gadgets.yaml", "{{ toUpper(metadata.name) }}",
            "{{ toUpper(metadata.name }}")
    write(repo, "apps/garbage.yaml", "apiVersion: test.orksync.io/v1\nkind: [Widget\n")
    replace(repo, "apps/shop.yaml", "replicas: 2", "replicas: 3")
    broken = orksync(*sync)
    assert broken.returncode == 1, broken.stderr
    assert re.search(rf"error: katalogs/widgets.yaml:\d+ Widget.test.orksync.io/{ns_b}/blog "
                     r"spec.crds.widget.operatorBox.onReconcile.\S+: ", broken.stderr)
    for where in ("error: katalogs/gadgets.yaml:17 Katalog/gadgets spec.crds.gadget.operatorBox"
                  ".onReconcile.configMaps[0].data.upper: template error",
                  "error: apps/garbage.yaml:3: invalid YAML", "prune refused"):
        assert where in broken.stderr, where
    after = snapshot(kube, namespaces)
    assert set(after) == set(before)  # nothing deleted, nothing new
    for key, obj in before.items():
        assert after[key]["uid"] == obj["uid"], key  # nothing deleted and recreated
    for key, secret in secrets.items():  # once-Secrets: same value, never written again
        assert after[key] == secret, key
    for key, job in jobs.items():
        assert after[key]["uid"] == job["uid"] and after[key]["spec"] == job["spec"], key
    assert after[f"Deployment/{ns_a}/shop"]["spec"]["replicas"] == 3  # the good change landed
    assert before[f"Deployment/{ns_a}/shop"]["spec"]["replicas"] == 2

    # the whole repository unreadable: every YAML file garbage
    for path in repo.rglob("*.yaml"):
        path.write_bytes(b"\x00\xff" + path.read_bytes())
    unreadable = orksync(*sync)
    assert unreadable.returncode == 1, unreadable.stderr
    assert "binary file" in unreadable.stderr and "prune refused" in unreadable.stderr
    final = snapshot(kube, namespaces)
    assert set(final) == set(before)
    for key, obj in after.items():
        assert final[key]["uid"] == obj["uid"], key
    for key, secret in secrets.items():
        assert final[key] == secret, key

    # repaired: converges, the Secrets and Jobs still the first ones
    shutil.rmtree(repo)
    shutil.copytree(CORPUS / "good", repo)
    for name in ("apps/shop.yaml", "apps/tools.yaml"):
        replace(repo, name, "namespace: team-a", f"namespace: {ns_a}")
    replace(repo, "apps/shop.yaml", "namespace: team-b", f"namespace: {ns_b}")
    repaired = orksync(*sync)
    assert repaired.returncode == 0, repaired.stderr
    healed = snapshot(kube, namespaces)
    assert set(healed) == set(before)
    for key in [*secrets, *jobs]:
        assert healed[key]["uid"] == before[key]["uid"], key
    for key, secret in secrets.items():
        assert healed[key]["data"] == secret["data"], key
    assert healed[f"Deployment/{ns_a}/shop"]["spec"]["replicas"] == 2
