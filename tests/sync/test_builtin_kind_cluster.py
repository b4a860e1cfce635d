"""A Katalog entry for a built-in kind (`apiTypes: {kind: Namespace}`, group, version and
plural from Orkestra's table) against the real control plane: the Namespace of the
repository is synced as that entry's resource and its children are written into it;
removing it from Git deletes it. orksync.katalog.builtin_kinds, orksync.katalog.loader."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from orksync.cluster.kube import Kube
from orksync.errors import ClusterError
from orksync.katalog.loader import load_repository
from orksync.lifecycle.teardown import DeletionOptions, remove_finalizer
from orksync.model import Action
from orksync.render.engine import render_catalog
from orksync.sync import SyncOptions, SyncRequest, SyncResult, hook_renderers, sync_once
from testbed.controlplane import ControlPlane
from tests.helpers import wait_for, write_repo

pytestmark = pytest.mark.cluster

KATALOG = """\
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: namespaces}
spec:
  crds:
    namespace:
      apiTypes: {kind: Namespace}
      operatorBox:
        onCreate:
          configMaps:
            - name: team-settings
              namespace: "{{ .metadata.name }}"
              data: {team: "{{ .metadata.name }}"}
"""


@pytest.fixture
def kube(control_plane: ControlPlane) -> Iterator[Kube]:
    k = Kube.from_kubeconfig(control_plane.kubeconfig)
    yield k
    k.close()


@pytest.fixture
def ns(kube: Kube) -> Iterator[str]:
    name = f"builtin-{uuid.uuid4().hex[:8]}"
    yield name
    with contextlib.suppress(ClusterError):
        kube.delete(kube.resource("v1", "ConfigMap"), "default", f"{name}-keep")
    res = kube.resource("v1", "Namespace")
    try:
        live = kube.get_or_none(res, "", name)
        if live is not None:
            remove_finalizer(kube, res, live)
            kube.delete(res, "", name)
    except ClusterError:
        pass


def sync(kube: Kube, root: Path, name: str) -> SyncResult:
    catalog = load_repository(root)
    rendered = render_catalog(catalog)
    assert not rendered.errors, rendered.errors
    return sync_once(kube, SyncRequest(rendered, inventory_name=name, hooks=hook_renderers(catalog),
                                       options=SyncOptions(deletion=DeletionOptions(poll=0.1))))


def test_an_entry_for_the_namespace_kind_renders_into_each_namespace(
        kube: Kube, tmp_path: Path, ns: str) -> None:
    root = write_repo(tmp_path / "repo", {
        "katalog.yaml": KATALOG,
        "namespaces/team.yaml": f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n",
        # stays, so that the last sync is not an empty render (which prunes nothing)
        "platform/settings.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n"
                                  f"  name: {ns}-keep\n  namespace: default\n"})
    inventory = f"builtin-{uuid.uuid4().hex[:8]}"
    first = sync(kube, root, inventory)
    assert not first.changes.failed, first.changes.failed
    settings = kube.get_or_none(kube.resource("v1", "ConfigMap"), ns, "team-settings")
    assert settings is not None and settings["data"] == {"team": ns}
    again = sync(kube, root, inventory)
    assert not again.changes.failed, again.changes.failed
    (root / "namespaces" / "team.yaml").unlink()
    gone = sync(kube, root, inventory)
    assert not gone.changes.failed, gone.changes.failed
    assert [str(c.ref) for c in gone.changes.changes if c.action is Action.DELETED] == [
        f"Namespace/{ns}"]
    wait_for(f"Namespace/{ns} deleted", lambda: (kube.get_or_none(
        kube.resource("v1", "Namespace"), "", ns) or {}).get("status", {}).get(
        "phase") in (None, "Terminating"))
