"""Small defects of the command line, against the real control plane: `orksync diff` on a
kind nobody serves, the revision of a dirty working tree, the revision in a custom
resource's Events."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import git
import pytest

from orksync.cluster.kube import Kube
from testbed.controlplane import ControlPlane
from tests.helpers import CRD, KATALOG, widget, write_repo

pytestmark = pytest.mark.cluster


def orksync(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orksync", *args], capture_output=True,
                          text=True, timeout=180)


def test_diff_of_a_kind_the_cluster_does_not_serve_and_no_crd_defines_is_an_error(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    """Exit 2 and an error naming the object, the kind and the file, not a "not served
    yet" note and exit 1; a kind a CRD of the same repository serves is still a note."""
    ns = f"t-{uuid.uuid4().hex[:8]}"
    kc, name = str(control_plane.kubeconfig), f"diff-{uuid.uuid4().hex[:8]}"
    gadget = (f"apiVersion: gadgets.example.io/v1\nkind: Gadget\nmetadata:\n  name: g\n"
              f"  namespace: {ns}\nspec: {{}}\n")
    # a CRD group of its own, never applied in this session
    crd = CRD.replace("widgets.test.orksync.io", "gizmos.dryrun.orksync.io").replace(
        "test.orksync.io", "dryrun.orksync.io").replace("Widget", "Gizmo").replace(
        "widget", "gizmo")
    katalog = KATALOG.replace("widget:", "gizmo:").replace("{name: widgets}", "{name: gizmos}")
    gizmo = widget("z", ns, image="nginx", replicas=1, port=80).replace(
        "test.orksync.io", "dryrun.orksync.io").replace("Widget", "Gizmo")
    repo = write_repo(tmp_path / "repo", {
        "katalog.yaml": katalog, "crd.yaml": crd, "apps/z.yaml": gizmo,
        "platform/gadget.yaml": gadget})
    diff = orksync("diff", str(repo), "--kubeconfig", kc, "--name", name)
    assert diff.returncode == 2, diff.stdout + diff.stderr
    assert (f"error: Gadget.gadgets.example.io/{ns}/g: kind Gadget in gadgets.example.io/v1 "
            "is not served by the cluster and no CRD of the repository defines it (from "
            "platform/gadget.yaml)" in diff.stderr), diff.stderr
    assert "its CRD comes with this sync" not in diff.stdout.split(
        f"Gizmo.dryrun.orksync.io/{ns}/z")[0]
    # the Gizmo, whose CRD comes with the sync, is shown as rendered with the note
    assert f"+++ b/Gizmo.dryrun.orksync.io/{ns}/z\n# new object\n# kind not served yet " \
        "(its CRD comes with this sync): not dry-run\n" in diff.stdout, diff.stdout

    (repo / "platform/gadget.yaml").unlink()
    clean = orksync("diff", str(repo), "--kubeconfig", kc, "--name", name)
    assert clean.returncode == 1, clean.stdout + clean.stderr  # differences, no error


def events_of(kube: Kube, ns: str, name: str) -> list[dict[str, Any]]:
    return [e for e in kube.list(kube.resource("v1", "Event"), namespace=ns)
            if e["involvedObject"].get("name") == name
            and e["involvedObject"].get("kind") == "Widget"]


def committed_repo(tmp_path: Path, ns: str) -> tuple[Path, git.Repo, str]:
    repo = write_repo(tmp_path / "repo", {
        "katalog.yaml": KATALOG, "crd.yaml": CRD,
        "w.yaml": widget("w", ns, image="nginx:1.27", replicas=1, port=80)})
    git_repo = git.Repo.init(repo)
    git_repo.index.add(["katalog.yaml", "crd.yaml", "w.yaml"])
    actor = git.Actor("t", "t@example.com")
    sha = git_repo.index.commit("first", author=actor, committer=actor).hexsha
    return repo, git_repo, sha


def test_a_custom_resources_events_carry_the_revision(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    ns = f"t-{uuid.uuid4().hex[:8]}"
    kc, name = str(control_plane.kubeconfig), f"rev-{uuid.uuid4().hex[:8]}"
    repo, _, sha = committed_repo(tmp_path, ns)
    clean = orksync("sync", str(repo), "--once", "--kubeconfig", kc, "--name", name)
    assert clean.returncode == 0, clean.stderr
    assert f"sync rev={sha[:7]} created=" in clean.stderr, clean.stderr
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    (event,) = events_of(kube, ns, "w")
    assert event["message"].startswith(f"created 3: Widget.test.orksync.io/{ns}/w, ")
    assert event["message"].endswith(f" (revision {sha[:7]})"), event["message"]
    assert event["metadata"]["annotations"]["orksync.io/revision"] == sha
    kube.close()


def test_a_dirty_working_tree_syncs_as_head_dirty(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    """A working tree whose loaded files differ from its commit is not that commit: the
    summary line and the custom resources' status say `<sha>-dirty`."""
    ns = f"t-{uuid.uuid4().hex[:8]}"
    kc, name = str(control_plane.kubeconfig), f"rev-{uuid.uuid4().hex[:8]}"
    repo, _, sha = committed_repo(tmp_path, ns)
    write_repo(repo, {"w.yaml": widget("w", ns, image="nginx:1.29", replicas=1, port=80)})
    dirty = orksync("sync", str(repo), "--once", "--kubeconfig", kc, "--name", name)
    assert dirty.returncode == 0, dirty.stderr
    assert f"sync rev={sha[:7]}-dirty created=" in dirty.stderr, dirty.stderr
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    cr = kube.get(kube.resource("test.orksync.io/v1", "Widget"), ns, "w")
    assert cr["status"]["orksync"]["lastAppliedRevision"] == f"{sha}-dirty"
    kube.close()
