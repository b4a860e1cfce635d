"""The command line against the real control plane: secrets end to end, rotate, no leaks."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from orksync.cluster.kube import Kube
from orksync.lifecycle.teardown import remove_finalizer
from testbed.controlplane import ControlPlane
from tests.helpers import CRD, KATALOG, widget, write_repo

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
    kc, name = str(control_plane.kubeconfig), f"stable-{uuid.uuid4().hex[:8]}"
    out = tmp_path / "out"
    first = run("sync", str(repo), "--once", "--kubeconfig", kc, "-o", str(out),
                "--log-level", "debug", "--name", name)
    assert first.returncode == 0, first.stderr
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    data = secret_data(kube, ns, "w-credentials")
    assert data["username"] == "admin" and len(data["password"]) == 24
    second = run("sync", str(repo), "--once", "--kubeconfig", kc, "--log-level", "debug",
                 "--name", name)
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
    kc, name = str(control_plane.kubeconfig), f"rotate-{uuid.uuid4().hex[:8]}"
    assert run("sync", str(repo), "--once", "--kubeconfig", kc, "--name", name).returncode == 0
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

    again = run("sync", str(repo), "--once", "--kubeconfig", kc, "--name", name)
    assert again.returncode == 0, again.stderr
    assert secret_data(kube, ns, "w-credentials") == after  # the sync keeps rotated values
    hash_after = kube.get(deploy_res, ns, "w")["spec"]["template"]["metadata"][
        "annotations"]["orksync.io/secrets-hash"]
    assert hash_after != hash_before  # the Deployment rolls
    kube.close()


PRUNE_KATALOG = """
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: apps}
spec:
  crds:
    widget:
      crdFile: ./crd.yaml
      operatorBox:
        onReconcile:
          configMaps:
            - name: "{{ .metadata.name }}-cfg"
              data: {first: "{{ index .spec.items 0 }}"}
        onCreate:
          jobs:
            - name: "{{ .metadata.name }}-job"
              image: busybox
              when: [{field: spec.runJob, equals: "yes"}]
"""


def test_apply_of_a_directory_rendered_with_errors_prunes_nothing_and_keeps_retained_objects(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    """`orksync apply DIR` prunes what `orksync sync` would: the index carries the render's
    errors (then nothing is pruned) and the retained objects (a Job whose condition
    turned false), so neither a broken custom resource nor a false condition deletes."""
    ns = f"t-{uuid.uuid4().hex[:8]}"
    kc, name = str(control_plane.kubeconfig), f"dir-{uuid.uuid4().hex[:8]}"

    def widget(wname: str, items: str, run_job: str) -> str:
        return (f"apiVersion: test.orksync.io/v1\nkind: Widget\nmetadata:\n  name: {wname}\n"
                f"  namespace: {ns}\nspec: {{items: {items}, runJob: '{run_job}'}}\n")

    def render_and_apply(step: str, a: str, b: str) -> subprocess.CompletedProcess[str]:
        repo = write_repo(tmp_path / "repo", {"katalog.yaml": PRUNE_KATALOG, "crd.yaml": CRD,
                                              "a.yaml": a, "b.yaml": b})
        run("render", str(repo), "-o", str(tmp_path / f"{step}-out"))
        return run("apply", str(tmp_path / f"{step}-out"), "--kubeconfig", kc, "--name", name)

    first = render_and_apply("one", widget("a", "[x]", "yes"), widget("b", "[y]", "yes"))
    assert first.returncode == 0, first.stderr
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    cm, job = kube.resource("v1", "ConfigMap"), kube.resource("batch/v1", "Job")
    widgets = kube.resource("test.orksync.io/v1", "Widget")
    before = {n: kube.get(cm, ns, n)["metadata"]["uid"] for n in ("a-cfg", "b-cfg")}
    job_uid = kube.get(job, ns, "a-job")["metadata"]["uid"]

    # b no longer renders (index of an empty list); a's Job condition turns false
    broken = render_and_apply("two", widget("a", "[x]", "no"), widget("b", "[]", "yes"))
    assert f"Widget.test.orksync.io/{ns}/b spec.crds.widget.operatorBox.onReconcile." \
           "configMaps[0].data.first: template error" in broken.stderr, broken.stderr
    assert "nothing is pruned" in broken.stderr, broken.stderr
    assert kube.get(widgets, ns, "b")["metadata"].get("deletionTimestamp") is None
    assert {n: kube.get(cm, ns, n)["metadata"]["uid"] for n in before} == before
    assert kube.get(job, ns, "a-job")["metadata"]["uid"] == job_uid

    # b fixed, a's condition still false: the render is clean and the Job is retained
    fixed = render_and_apply("three", widget("a", "[x]", "no"), widget("b", "[z]", "yes"))
    assert fixed.returncode == 0, fixed.stderr
    assert "deleted=0" in fixed.stderr.splitlines()[-1], fixed.stderr
    assert kube.get(job, ns, "a-job")["metadata"]["uid"] == job_uid
    assert kube.get(cm, ns, "b-cfg")["data"] == {"first": "z"}
    kube.close()


def test_apply_of_an_edited_directory_is_refused_and_writes_nothing(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    """The apply's LISTs go out as soon as index.yaml is read, before the files are
    verified: an edited file still stops the apply before any write, with the same error,
    and it is that error, not the cluster's, that a broken connection leaves to see."""
    ns = f"t-{uuid.uuid4().hex[:8]}"
    repo = write_repo(tmp_path / "repo", {"katalog.yaml": KATALOG, "crd.yaml": CRD,
                                          "w.yaml": widget("w", ns, image="nginx",
                                                           replicas=1, port=8080)})
    out = tmp_path / "out"
    assert run("render", str(repo), "-o", str(out)).returncode == 0
    victim = next(out.glob("children/*/*/w/Deployment*"))
    victim.write_text(victim.read_text().replace("replicas: 1", "replicas: 5"))
    name = f"edited-{uuid.uuid4().hex[:8]}"
    for kubeconfig_path in (str(control_plane.kubeconfig), str(tmp_path / "missing")):
        proc = run("apply", str(out), "--kubeconfig", kubeconfig_path, "--name", name)
        assert proc.returncode == 1, proc.stderr
        assert f"{victim}: changed since it was rendered" in proc.stderr, proc.stderr
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    assert kube.get_or_none(kube.resource("v1", "Namespace"), "", ns) is None
    inventories = kube.resource("v1", "ConfigMap")
    assert kube.get_or_none(inventories, "orksync-system", f"orksync-inventory-{name}") is None
    kube.close()


# What `orksync apply DIR` of a plain directory (no onDelete, no status fields, no
# autoscale, a kubeconfig orksync reads itself) must not pay for at start-up: the template
# and render engines, the safe YAML loader and the kubernetes client (with `requests`).
# urllib3 is imported: it is the HTTP client (orksync.cluster.transport).
HEAVY_MODULES = ("jinja2", "orksync.render.gotemplate", "orksync.render.jinja_dialect",
                 "orksync.render.engine", "ruamel.yaml", "orksync.yamls.parse", "kubernetes",
                 "requests")
APPLY_AND_LIST_MODULES = ("import json, sys\nfrom orksync.cli import main\n"
                          "rc = main(sys.argv[1:])\nprint(json.dumps(sorted(sys.modules)))\n"
                          "sys.exit(rc)\n")


def test_applying_a_rendered_directory_imports_neither_template_engines_nor_kubernetes(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    ns = f"t-{uuid.uuid4().hex[:8]}"
    repo = write_repo(tmp_path / "repo", {
        "katalog.yaml": KATALOG, "crd.yaml": CRD,
        "w.yaml": widget("w", ns, image="nginx", replicas=1, port=8080)})
    out = tmp_path / "out"
    assert run("render", str(repo), "-o", str(out)).returncode == 0
    argv = ["apply", str(out), "--kubeconfig", str(control_plane.kubeconfig),
            "--name", f"imports-{ns}"]
    for expected in ("failed=0", "created=0 configured=0"):  # a fresh apply, a resync
        proc = subprocess.run([sys.executable, "-c", APPLY_AND_LIST_MODULES, *argv],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert expected in proc.stderr.splitlines()[-1], proc.stderr
        modules = set(json.loads(proc.stdout.splitlines()[-1]))
        assert "orksync.sync" in modules
        assert [m for m in HEAVY_MODULES if m in modules] == []  # a package: with any module
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    assert kube.get(kube.resource("apps/v1", "Deployment"), ns, "w")["spec"]["replicas"] == 1
    kube.close()


def test_apply_reads_the_inventory_with_its_lists_prunes_from_it_and_stops_on_a_corrupt_one(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    """`orksync apply` sends the inventory's GET with the apply's LISTs, before the files
    are read: what left the directory is still pruned from it, and an inventory that
    cannot be decoded still stops the apply before any write, naming the ConfigMap."""
    from orksync.model import ObjRef, Origin, RenderedObject, RenderedSet, WritePolicy
    from orksync.rendered.directory import write_rendered

    ns = f"t-{uuid.uuid4().hex[:8]}"
    kc, name = str(control_plane.kubeconfig), f"inv-{uuid.uuid4().hex[:8]}"
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    namespaces, cm = kube.resource("v1", "Namespace"), kube.resource("v1", "ConfigMap")
    kube.create(namespaces, {"apiVersion": "v1", "kind": "Namespace",
                             "metadata": {"name": ns}}, field_manager="test")

    def apply(step: str, *names: str) -> subprocess.CompletedProcess[str]:
        bodies = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": n, "namespace": ns, "labels": {"app.kubernetes.io/managed-by": "orksync"}},
            "data": {"k": n}} for n in names]
        objects = tuple(RenderedObject(ref=ObjRef.of(b), body=b, policy=WritePolicy.APPLY,
                                       origin=Origin(file="test"), stage=10) for b in bodies)
        out = write_rendered(RenderedSet(objects=objects), tmp_path / step)
        return run("apply", str(out), "--kubeconfig", kc, "--name", name)

    first = apply("one", "a", "b")
    assert first.returncode == 0, first.stderr
    second = apply("two", "a")
    assert second.returncode == 0, second.stderr
    assert f"deleted ConfigMap/{ns}/b" in second.stderr, second.stderr
    assert kube.get_or_none(cm, ns, "b") is None and kube.get_or_none(cm, ns, "a")

    inventory = f"orksync-inventory-{name}"
    kube.request("PATCH", cm.path("orksync-system", inventory),
                 body={"binaryData": {"entries": base64.b64encode(b"not zlib").decode()}},
                 content_type="application/merge-patch+json")
    third = apply("three", "a", "c")
    assert third.returncode != 0, third.stderr
    assert f"ConfigMap/orksync-system/{inventory}: unreadable inventory" in third.stderr, \
        third.stderr
    assert kube.get_or_none(cm, ns, "c") is None
    kube.close()


def test_a_second_repository_with_the_default_name_is_refused_and_deletes_nothing(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    """`orksync sync repoA --once`, then `orksync sync repoB --once`, both with the default
    --name: the second is refused before it writes, naming both sources and --name; with
    its own --name both coexist, and a resync of repoA prunes nothing of repoB. (An
    inventory namespace of its own keeps the default name from meeting other tests.)"""
    ns_a, ns_b = f"t-{uuid.uuid4().hex[:8]}", f"t-{uuid.uuid4().hex[:8]}"
    repo_a = write_repo(tmp_path / "repoA", {"katalog.yaml": KATALOG, "crd.yaml": CRD,
                                             "a.yaml": widget("a", ns_a, image="nginx")})
    repo_b = write_repo(tmp_path / "repoB", {"katalog.yaml": KATALOG, "crd.yaml": CRD,
                                             "b.yaml": widget("b", ns_b, image="nginx")})
    inventory_ns = f"inv-{uuid.uuid4().hex[:8]}"
    common = ("--once", "--kubeconfig", str(control_plane.kubeconfig),
              "--inventory-namespace", inventory_ns)
    first = run("sync", str(repo_a), *common)
    assert first.returncode == 0, first.stderr
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)  # discovery after the CRD exists
    widgets = kube.resource("test.orksync.io/v1", "Widget")
    namespaces = kube.resource("v1", "Namespace")

    def uids(ns: str) -> dict[str, str]:
        found = {f"Namespace/{ns}": kube.get(namespaces, "", ns)["metadata"]["uid"]}
        for api, kind in (("test.orksync.io/v1", "Widget"), ("apps/v1", "Deployment"),
                          ("v1", "Service")):
            for item in kube.list(kube.resource(api, kind), namespace=ns):
                found[f"{kind}/{ns}/{item['metadata']['name']}"] = item["metadata"]["uid"]
        return found

    try:
        before = uids(ns_a)
        assert len(before) == 4, before

        second = run("sync", str(repo_b), *common)
        assert second.returncode == 1, second.stderr
        assert f"synced from {repo_a.resolve()}, not from {repo_b.resolve()}: refusing to " \
               "sync" in second.stderr, second.stderr
        assert "--name" in second.stderr and "deleted " not in second.stderr
        assert uids(ns_a) == before
        assert kube.get_or_none(widgets, ns_b, "b") is None  # refused before any write

        separate = run("sync", str(repo_b), *common, "--name", "b")
        assert separate.returncode == 0, separate.stderr
        assert "deleted=0" in separate.stderr.splitlines()[-1], separate.stderr
        assert uids(ns_a) == before and kube.get_or_none(widgets, ns_b, "b") is not None
        again = run("sync", str(repo_a), *common)
        assert again.returncode == 0, again.stderr
        assert "deleted=0" in again.stderr.splitlines()[-1], again.stderr
        assert uids(ns_a) == before and kube.get_or_none(widgets, ns_b, "b") is not None
    finally:
        for ns in (ns_a, ns_b):
            for item in kube.list(widgets, namespace=ns):
                remove_finalizer(kube, widgets, item)
        for ns in (ns_a, ns_b, inventory_ns):
            if kube.get_or_none(namespaces, "", ns) is not None:
                kube.delete(namespaces, "", ns)
        kube.close()


def test_an_empty_repository_is_refused_with_exit_1_naming_the_override_and_said_once(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    """An empty render against a non-empty inventory: nothing is deleted, the exit code is
    1, the refusal names --allow-empty and is printed once; with it, the sync deletes."""
    ns = f"t-{uuid.uuid4().hex[:8]}"
    repo = write_repo(tmp_path / "repo", {"katalog.yaml": KATALOG, "crd.yaml": CRD,
                                          "w.yaml": widget("w", ns, image="nginx")})
    common = ("--once", "--kubeconfig", str(control_plane.kubeconfig),
              "--name", f"empty-{uuid.uuid4().hex[:8]}")
    assert run("sync", str(repo), *common).returncode == 0
    for path in repo.iterdir():
        path.unlink()
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    widgets = kube.resource("test.orksync.io/v1", "Widget")

    refused = run("sync", str(repo), *common)
    assert refused.returncode == 1, refused.stderr
    assert refused.stderr.count("the render is empty") == 1, refused.stderr
    assert "prune refused: the render is empty and the inventory holds" in refused.stderr
    assert "run again with --allow-empty" in refused.stderr
    assert kube.get_or_none(widgets, ns, "w") is not None

    allowed = run("sync", str(repo), *common, "--allow-empty")
    assert allowed.returncode == 0, allowed.stderr
    assert f"deleted Widget.test.orksync.io/{ns}/w" in allowed.stderr, allowed.stderr
    kube.close()
