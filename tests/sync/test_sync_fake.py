"""The sync recipe (orksync.sync), prune (orksync.apply.prune) and the inventory
(orksync.apply.inventory) on the fake API server: what is recorded, what is deleted and
what is held, counted in requests. The real control plane proves the same features in
test_prune_cluster.py and test_sync_cluster.py."""

from __future__ import annotations

from typing import Any

import pytest

from orksync.apply.inventory import Inventory
from orksync.apply.run import ApplyOptions
from orksync.katalog.loader import load_repository
from orksync.lifecycle.teardown import FINALIZER
from orksync.model import Action
from orksync.render.engine import render_catalog
from orksync.sync import Scope, SharedInventory, SyncRequest, hook_renderers, sync_once
from tests.fakeapi import FakeApiServer
from tests.fakeapi_fixtures import *  # noqa: F403 - the fixtures kube, repo, server
from tests.fakeapi_fixtures import NS, Repo, actions, change, ref, writes
from tests.helpers import CRD, KATALOG, katalog, widget

WITHOUT_SERVICES = KATALOG.split("          services:")[0]
INVENTORY = "/api/v1/namespaces/orksync-system/configmaps/orksync-inventory-test"
W, DEPLOY, SVC = ref("Widget", "w"), ref("Deployment", "w"), ref("Service", "w-svc")


def first(repo: Repo, **files: str) -> Repo:
    repo.write({"katalog.yaml": KATALOG, "crd.yaml": CRD,
                "w.yaml": widget("w", NS, image="nginx", port=8080), **files})
    result = repo.sync()
    assert not result.changes.failed, result.changes.failed
    return repo


def test_the_inventory_records_every_object_applied(repo: Repo, server: FakeApiServer) -> None:
    first(repo)
    crd = ref("CustomResourceDefinition", "widgets.test.orksync.io")
    assert repo.stored().refs() == {crd, W, DEPLOY, SVC}
    owners = {e.ref: e.owner for e in repo.stored()}
    assert owners[DEPLOY] == owners[SVC] == W and owners[W] is None


def test_an_unchanged_sync_does_not_write_the_inventory_again(
        repo: Repo, server: FakeApiServer) -> None:
    first(repo)
    result = repo.sync()
    assert result.pruned == 0 and writes(server) == []
    assert [r.verb for r in server.requests(path_contains=INVENTORY)] == ["get"]


def test_a_custom_resource_removed_from_git_is_torn_down_and_its_children_go_with_it(
        repo: Repo, server: FakeApiServer) -> None:
    first(repo)
    assert FINALIZER in repo.live(W)["metadata"]["finalizers"]
    repo.remove("w.yaml")
    result = repo.sync()
    assert actions(result)[W] is Action.DELETED and result.pruned == 1
    assert repo.live(W) is repo.live(DEPLOY) is repo.live(SVC) is None
    assert not repo.stored().refs() & {W, DEPLOY, SVC}
    deletes = [p for v, p in writes(server) if v == "delete"]
    assert deletes == [f"/apis/test.orksync.io/v1/namespaces/{NS}/widgets/w"]


def test_a_child_removed_from_the_katalog_is_pruned_and_the_rest_left(
        repo: Repo, server: FakeApiServer) -> None:
    first(repo)
    repo.write({"katalog.yaml": WITHOUT_SERVICES})
    result = repo.sync()
    assert actions(result)[SVC] is Action.DELETED and result.pruned == 1
    assert actions(result)[DEPLOY] is Action.UNCHANGED
    assert repo.live(SVC) is None and repo.live(DEPLOY) is not None
    assert SVC not in repo.stored() and DEPLOY in repo.stored()


@pytest.mark.parametrize(("edit", "reason"), [
    ({"metadata": {"labels": {"app.kubernetes.io/managed-by": None}}},
     "not deleted: label app.kubernetes.io/managed-by is not orksync any more"),
    ({"metadata": {"annotations": {"orksync.io/prune": "disabled"}}},
     "not deleted: annotated orksync.io/prune: disabled"),
    ({"metadata": {"annotations": {"orksync.io/inventory": "orksync-system/other"}}},
     "not deleted: annotation orksync.io/inventory names the inventory orksync-system/other, "
     "not orksync-system/test (another sync root wrote it last)"),
    ({"metadata": {"labels": {"orkestra-owner": "someone-else"}}},
     "not deleted: label orkestra-owner does not name w"),
    ({"metadata": {"annotations": {"orksync.io/owner": "test.orksync.io/v1/Widget/x/y"}}},
     f"not deleted: annotation orksync.io/owner does not name {W}"),
], ids=["label-removed", "prune-disabled", "another-sync-root", "another-owner-label",
        "another-owner-annotation"])
def test_a_child_is_pruned_only_when_provably_ours(
        repo: Repo, server: FakeApiServer, edit: dict[str, Any], reason: str) -> None:
    first(repo)
    server.edit("v1", "Service", NS, "w-svc", edit)
    repo.write({"katalog.yaml": WITHOUT_SERVICES})
    result = repo.sync()
    assert (change(result, SVC).action, change(result, SVC).message) == (Action.SKIPPED, reason)
    assert result.pruned == 0 and repo.live(SVC) is not None
    assert not [w for w in writes(server) if w[0] == "delete"]
    assert SVC not in repo.stored()  # no longer ours: forgotten, never deleted


def test_a_render_error_holds_the_prune_and_the_inventory(
        repo: Repo, server: FakeApiServer) -> None:
    first(repo)
    before = repo.stored()
    repo.write({"katalog.yaml": WITHOUT_SERVICES,
                "w.yaml": widget("w", NS, port=8080)})  # image is required: render error
    result = repo.sync()
    assert result.refused == ["the render had 1 error(s): nothing is pruned"]
    assert result.pruned == 0 and not [w for w in writes(server) if w[0] == "delete"]
    assert all(repo.live(r) is not None for r in (W, DEPLOY, SVC))
    assert repo.stored() == before


def test_a_broken_custom_resource_does_not_stop_the_others(
        repo: Repo, server: FakeApiServer) -> None:
    first(repo)
    repo.write({"v.yaml": widget("v", NS, port=8080)})  # no image: v does not render
    repo.write({"u.yaml": widget("u", NS, image="nginx", port=1)})
    result = repo.sync()
    assert actions(result)[ref("Widget", "u")] is Action.CREATED
    assert actions(result)[ref("Deployment", "u")] is Action.CREATED
    assert ref("Widget", "v") not in actions(result) and result.pruned == 0


def test_an_empty_render_refuses_to_prune_everything(repo: Repo, server: FakeApiServer) -> None:
    first(repo)
    before = repo.stored()
    for rel in ("katalog.yaml", "crd.yaml", "w.yaml"):
        repo.remove(rel)
    result = repo.sync()
    assert len(result.refused) == 1 and result.refused[0].startswith(
        f"the render is empty and the inventory holds {len(before)} object(s)")
    assert result.pruned == 0 and writes(server) == [] and repo.stored() == before


def test_a_custom_resource_rendering_no_children_where_it_had_some_refuses_to_orphan(
        repo: Repo, server: FakeApiServer) -> None:
    first(repo)
    repo.write({"katalog.yaml": katalog("        onCreate: {}\n")})
    result = repo.sync()
    assert result.refused == [f"{W} renders no children where it had 2: refusing to prune "
                              "them (allow orphaning children to confirm)"]
    assert result.pruned == 0 and repo.live(SVC) is not None
    allowed = repo.sync(allow_orphaning_children=True)
    assert allowed.pruned == 2 and repo.live(SVC) is repo.live(DEPLOY) is None


def test_a_dry_run_deletes_nothing_and_stores_no_inventory(
        repo: Repo, server: FakeApiServer) -> None:
    first(repo)
    before = repo.stored()
    repo.remove("w.yaml")
    result = repo.sync(apply=ApplyOptions(dry_run=True))
    assert actions(result)[W] is Action.DELETED
    assert repo.live(W) is not None and repo.stored() == before
    assert all(r.query.get("dryRun") == "All" for r in server.requests(writes=True))


def test_the_crd_is_kept_unless_crd_pruning_is_enabled(
        repo: Repo, server: FakeApiServer) -> None:
    first(repo)
    for rel in ("katalog.yaml", "w.yaml", "crd.yaml"):
        repo.remove(rel)
    repo.write({"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: keep, "
                           f"namespace: {NS}}}\n"})
    crd = ref("CustomResourceDefinition", "widgets.test.orksync.io")
    kept = repo.sync()
    assert repo.live(crd) is not None and repo.live(W) is None
    assert any(crd.name in reason for reason in kept.refused), kept.refused
    pruned = repo.sync(prune_crds=True)
    assert actions(pruned)[crd] is Action.DELETED and repo.live(crd) is None


def test_a_scoped_sync_writes_only_its_custom_resources_and_keeps_the_rest_recorded(
        repo: Repo, server: FakeApiServer) -> None:
    first(repo, **{"v.yaml": widget("v", NS, image="nginx", port=9090)})
    repo.write({"w.yaml": widget("w", NS, image="httpd", port=8080),
                "v.yaml": widget("v", NS, image="httpd", port=9090)})
    catalog = load_repository(repo.root)
    rendered = render_catalog(catalog)
    v = ref("Widget", "v")
    scoped = type(rendered)(objects=tuple(o for o in rendered.objects
                                          if v in (o.ref, o.owner)))
    shared = SharedInventory(repo.stored())
    server.clear_log()
    result = sync_once(repo.kube, SyncRequest(scoped, inventory_name=repo.name,
                                              hooks=hook_renderers(catalog),
                                              scope=Scope(frozenset({v}), shared)))
    assert actions(result)[ref("Deployment", "v")] is Action.CONFIGURED
    assert result.pruned == 0 and W in shared.value and DEPLOY in shared.value
    images = {name: repo.live(ref("Deployment", name))["spec"]["template"]["spec"]
              ["containers"][0]["image"] for name in ("v", "w")}
    assert images == {"v": "httpd", "w": "nginx"}
    assert not [p for _, p in writes(server) if "/deployments/w" in p or "/widgets/w" in p]


def test_a_stored_inventory_is_read_once_and_written_once_per_changing_sync(
        repo: Repo, server: FakeApiServer) -> None:
    first(repo)
    repo.write({"katalog.yaml": WITHOUT_SERVICES})
    repo.sync()
    verbs = [r.verb for r in server.requests(path_contains=INVENTORY)]
    assert verbs == ["get", "apply"]
    stored = Inventory.from_configmap(server.object(
        "v1", "ConfigMap", "orksync-system", "orksync-inventory-test"))
    assert stored.refs() == repo.stored().refs() and SVC not in stored


def test_objects_are_stamped_with_the_inventory_they_belong_to(repo: Repo) -> None:
    first(repo)
    for r in (W, DEPLOY, SVC):
        meta = repo.live(r)["metadata"]
        assert meta["annotations"]["orksync.io/inventory"] == "orksync-system/test"
        assert meta["labels"]["app.kubernetes.io/managed-by"] == "orksync"

