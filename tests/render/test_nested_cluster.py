"""A custom resource a `custom:` block creates, rendered through its own Katalog entry,
against the real control plane (issue 33): the created custom resource's own children
exist, owned by it; a second sync changes nothing; the `custom:` block leaving the Katalog
prunes the created custom resource and its children; removing the top custom resource from
Git tears the chain down (its teardown, then the garbage collector: the created custom
resource, then its children). orksync.render.engine.render_nested,
orksync.apply.write (owner uids of nested custom resources)."""

from __future__ import annotations

import signal
import subprocess
import urllib.request
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from orksync.apply.inventory import DEFAULT_NAMESPACE
from orksync.cluster.kube import Kube
from orksync.errors import ClusterError
from orksync.katalog.loader import load_repository
from orksync.lifecycle.overview import find_tree, read_rows, tree_table
from orksync.lifecycle.teardown import DeletionOptions, remove_finalizer
from orksync.model import Action, ObjRef
from orksync.render.engine import render_catalog
from orksync.sync import (
    SyncOptions,
    SyncRequest,
    SyncResult,
    hook_renderers,
    sync_once,
    sync_rendered,
)
from testbed.controlplane import ControlPlane
from testbed.gitdaemon import GitDaemon
from tests.agent.test_agent_cluster import AgentProcess, commit, http_get
from tests.agent.test_webui_cluster import _service_account
from tests.helpers import wait_for, write_repo
from tests.render import nested_cases as nc
from tests.workload_status import rolled_out, write_status

pytestmark = pytest.mark.cluster


@pytest.fixture
def kube(control_plane: ControlPlane) -> Iterator[Kube]:
    k = Kube.from_kubeconfig(control_plane.kubeconfig)
    yield k
    k.close()


@pytest.fixture
def ns(kube: Kube) -> Iterator[str]:
    name = f"nest-{uuid.uuid4().hex[:8]}"
    yield name
    try:
        for kind in ("AppEnvironment", "CacheCluster"):
            res = kube.resource("nest.orksync.io/v1", kind)
            for item in kube.list(res, namespace=name):
                remove_finalizer(kube, res, item)
        kube.delete(kube.resource("v1", "Namespace"), "", name)
    except ClusterError:
        pass


def ref(kind: str, name: str, ns: str) -> ObjRef:
    api = "apps/v1" if kind == "Deployment" else "nest.orksync.io/v1"
    return ObjRef(api_version=api, kind=kind, namespace=ns, name=name)


def get(kube: Kube, r: ObjRef) -> dict[str, Any] | None:
    return kube.get_or_none(kube.resource(r.api_version, r.kind), r.namespace, r.name)


def sync(kube: Kube, root: Path, name: str) -> SyncResult:
    catalog = load_repository(root)
    rendered = render_catalog(catalog)
    assert not rendered.errors, rendered.errors
    return sync_once(kube, SyncRequest(rendered, inventory_name=name, hooks=hook_renderers(catalog),
                                       options=SyncOptions(deletion=DeletionOptions(poll=0.1))))


def test_a_created_custom_resource_gets_its_own_children_and_goes_with_its_parent(
        kube: Kube, tmp_path: Path, ns: str) -> None:
    root = write_repo(tmp_path / "repo", nc.files(ns))
    inventory = f"nest-{uuid.uuid4().hex[:8]}"
    first = sync(kube, root, inventory)
    assert not first.changes.failed, first.changes.failed
    env = get(kube, ref("AppEnvironment", "dev", ns))
    cache = get(kube, ref("CacheCluster", "dev-cache", ns))
    redis = get(kube, ref("Deployment", "dev-cache-redis", ns))
    assert env is not None and cache is not None and redis is not None
    assert [o["uid"] for o in cache["metadata"]["ownerReferences"]] == \
        [env["metadata"]["uid"]]
    assert [o["uid"] for o in redis["metadata"]["ownerReferences"]] == \
        [cache["metadata"]["uid"]]
    assert redis["spec"]["replicas"] == 2
    assert cache["metadata"]["annotations"]["orksync.io/owner"] == \
        str(ref("AppEnvironment", "dev", ns))
    assert redis["metadata"]["annotations"]["orksync.io/owner"] == \
        str(ref("CacheCluster", "dev-cache", ns))

    again = sync(kube, root, inventory)  # the created CacheCluster's uid is found again
    assert not again.changes.failed, again.changes.failed
    assert not [c for c in again.changes.changes
                if c.action in (Action.CREATED, Action.CONFIGURED)], again.changes.changes

    # the custom: block leaves the Katalog: the created custom resource and its children
    # are pruned, the top custom resource stays
    without = nc.katalog().replace(nc.katalog().split("        onCreate:\n")[1].split(
        "    cachecluster:")[0], "          configMaps: [{name: \"{{ .metadata.name }}-cm\"}]\n")
    write_repo(root, {"katalog.yaml": without})
    pruned = sync(kube, root, inventory)
    assert not pruned.changes.failed, pruned.changes.failed
    deleted = [c.ref for c in pruned.changes.changes if c.action is Action.DELETED]
    assert set(deleted) == {ref("CacheCluster", "dev-cache", ns),
                            ref("Deployment", "dev-cache-redis", ns)}, deleted
    for kind, name in (("CacheCluster", "dev-cache"), ("Deployment", "dev-cache-redis")):
        wait_for(f"{kind}/{name} deleted", lambda k=kind, n=name: get(
            kube, ref(k, n, ns)) is None)
    assert get(kube, ref("AppEnvironment", "dev", ns)) is not None
    write_repo(root, {"katalog.yaml": nc.katalog()})
    back = sync(kube, root, inventory)
    assert not back.changes.failed, back.changes.failed
    assert get(kube, ref("Deployment", "dev-cache-redis", ns)) is not None

    (root / "apps" / "dev.yaml").unlink()
    gone = sync(kube, root, inventory)
    assert not gone.changes.failed, gone.changes.failed
    for kind, name in (("AppEnvironment", "dev"), ("CacheCluster", "dev-cache"),
                       ("Deployment", "dev-cache-redis")):
        wait_for(f"{kind}/{name} deleted", lambda k=kind, n=name: get(
            kube, ref(k, n, ns)) is None)


def synced(kube: Kube, root: Path, name: str, revision: str) -> SyncResult:
    """A sync as `orksync sync` makes it: apply, prune, then every custom resource's status
    and Events (orksync.lifecycle.events.report_sync)."""
    catalog = load_repository(root)
    rendered = render_catalog(catalog)
    assert not rendered.errors, rendered.errors
    result = sync_rendered(kube, SyncRequest(rendered, inventory_name=name, options=SyncOptions(
        deletion=DeletionOptions(poll=0.1))), catalog, revision=revision)
    assert not result.changes.failed, result.changes.failed
    return result


def conditions(obj: dict[str, Any] | None) -> dict[str, str]:
    assert obj is not None
    return {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []}


CACHE_WITH_STATUS = nc.CACHE_ENTRY + """\
        status:
          fields:
            - path: redis
              value: "{{ .children.deployment.metadata.name }}"
"""


def chain(root: Path, ns: str) -> tuple[ObjRef, ObjRef, ObjRef]:
    """An AppEnvironment creating a CacheCluster whose entry has a status field; the refs
    of the AppEnvironment, the CacheCluster and its redis Deployment."""
    write_repo(root, {**nc.files(ns), "katalog.yaml": nc.katalog(CACHE_WITH_STATUS)})
    return (ref("AppEnvironment", "dev", ns), ref("CacheCluster", "dev-cache", ns),
            ref("Deployment", "dev-cache-redis", ns))


def test_a_created_custom_resource_gets_its_status_from_its_own_entry_and_children(
        kube: Kube, tmp_path: Path, ns: str) -> None:
    """The created CacheCluster's status is written from its own entry (its `status`
    fields, Ready/Reconciling/Stalled from its redis Deployment's health), and its health
    rolls up into the AppEnvironment's."""
    env_ref, cache_ref, redis_ref = chain(tmp_path / "repo", ns)
    inventory = f"nest-{uuid.uuid4().hex[:8]}"

    # applied, not rolled out: in progress
    synced(kube, tmp_path / "repo", inventory, "a" * 40)
    cache = get(kube, cache_ref)
    assert conditions(cache) == {"Ready": "False", "Reconciling": "True", "Stalled": "False"}
    assert cache is not None and cache["status"]["redis"] == "dev-cache-redis"
    assert cache["status"]["orksync"]["lastAppliedRevision"] == "a" * 40
    assert [c["object"] for c in cache["status"]["orksync"]["health"]["children"]] == \
        [str(redis_ref)]
    env = get(kube, env_ref)
    assert conditions(env)["Ready"] == "False"
    assert env is not None and env["status"]["orksync"]["health"]["message"].startswith(
        f"{cache_ref}: InProgress: {redis_ref}: InProgress")

    # rolled out (as its controller would write it): a sync makes the chain Ready
    write_status(kube, redis_ref, rolled_out(2))
    synced(kube, tmp_path / "repo", inventory, "a" * 40)
    assert conditions(get(kube, cache_ref)) == \
        {"Ready": "True", "Reconciling": "False", "Stalled": "False"}
    assert conditions(get(kube, env_ref))["Ready"] == "True"


def test_the_tree_shows_a_created_custom_resource_with_its_children_beneath_it(
        kube: Kube, tmp_path: Path, ns: str) -> None:
    """`orksync tree` of the top custom resource (table and -o json|yaml) has the
    CacheCluster with its Deployment indented beneath it, health rolled up; `orksync
    status` lists the CacheCluster as its own row naming its owner; `orksync tree` of the
    CacheCluster works too."""
    env_ref, cache_ref, redis_ref = chain(tmp_path / "repo", ns)
    inventory = f"nest-{uuid.uuid4().hex[:8]}"
    synced(kube, tmp_path / "repo", inventory, "a" * 40)

    tree = find_tree(kube, DEFAULT_NAMESPACE, f"AppEnvironment/{ns}/dev")
    [cache_row] = tree.resource.children
    assert (cache_row.ref, cache_row.health) == (cache_ref, "InProgress")
    assert [(c.ref, c.health) for c in cache_row.children] == [(redis_ref, "InProgress")]
    assert tree.resource.health == "InProgress"
    assert tree.resource.message.startswith(f"{cache_ref}: InProgress: {redis_ref}")

    write_status(kube, redis_ref, rolled_out(2))
    synced(kube, tmp_path / "repo", inventory, "b" * 40)
    tree = find_tree(kube, DEFAULT_NAMESPACE, f"AppEnvironment/{ns}/dev")
    [cache_row] = tree.resource.children
    assert (cache_row.ref, cache_row.ready, cache_row.health) == (cache_ref, "True", "Current")
    assert [(c.ref, c.health) for c in cache_row.children] == [(redis_ref, "Current")]
    assert tree.resource.health == "Current"
    now = datetime.now(UTC)
    lines = tree_table(tree, now).splitlines()
    assert lines[2].split()[:4] == ["└──", str(cache_ref), "True", "Current"]
    assert lines[3].startswith(f"    └── {redis_ref}")
    doc = tree.to_dict(now)
    assert doc["children"][0]["ready"] == "True"
    assert [c["object"] for c in doc["children"][0]["children"]] == [str(redis_ref)]

    rows = {r.ref: r for r in read_rows(kube, DEFAULT_NAMESPACE, [inventory])}
    assert set(rows) == {env_ref, cache_ref}
    assert rows[cache_ref].owner == env_ref and rows[env_ref].owner is None
    assert (rows[cache_ref].ready, rows[cache_ref].health) == ("True", "Current")
    assert rows[cache_ref].to_dict(now)["owner"] == str(env_ref)
    assert [c.ref for c in rows[cache_ref].children] == [redis_ref]
    own = find_tree(kube, DEFAULT_NAMESPACE, f"CacheCluster/{ns}/dev-cache")
    assert own.resource.ref == cache_ref
    assert [c.ref for c in own.resource.children] == [redis_ref]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A git repository served by a git daemon: (its working tree, its URL)."""
    repo = tmp_path / "served" / "platform"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    with GitDaemon(repo.parent) as daemon:
        yield repo, daemon.url("platform")


def conditions_of(kube: Kube, r: ObjRef) -> dict[str, str]:
    """The conditions of `r`, {} while it (or its kind) does not exist yet."""
    try:
        live = get(kube, r)
    except ClusterError:
        return {}
    return conditions(live) if live is not None else {}


def test_the_agent_makes_the_chain_ready_when_the_created_ones_child_rolls_out(
        control_plane: ControlPlane, served: tuple[Path, str], kube: Kube,
        tmp_path: Path, ns: str) -> None:
    """In the agent, the redis Deployment's status (watched) renders the custom resource
    at the top of its chain again (orksync.agent.drift.Plan: a created custom resource's
    children are under the top one's key): the CacheCluster, then the AppEnvironment turn
    Ready without a full sync. The web view's tree has the Deployment beneath the
    CacheCluster."""
    repo, url = served
    env_ref, cache_ref, redis_ref = chain(repo, ns)
    commit(repo, "first")
    agent = AgentProcess(control_plane, url, tmp_path / "state",
                         name=f"nest-{uuid.uuid4().hex[:6]}",
                         flags=["--resync-interval", "3600"])
    try:
        wait_for("the CacheCluster's status", lambda: conditions_of(
            kube, cache_ref).get("Reconciling") == "True")
        wait_for("readiness", lambda: http_get(agent.port, "/readyz")[0] == 200)
        write_status(kube, redis_ref, rolled_out(2))
        wait_for("the CacheCluster Ready", lambda: conditions_of(
            kube, cache_ref).get("Ready") == "True")
        wait_for("the AppEnvironment Ready", lambda: conditions_of(
            kube, env_ref).get("Ready") == "True")
        assert agent.text().count("sync rev=") == 1  # the first sync only

        # the web view's tree: the CacheCluster's Deployment in a list beneath it
        token = _service_account(kube, ns, "operator", cluster_role="cluster-admin")
        page = ""

        def tree_page() -> bool:
            nonlocal page
            request = urllib.request.Request(
                f"http://127.0.0.1:{agent.port}/ui/tree?kind=AppEnvironment&namespace={ns}"
                "&name=dev", headers={"Authorization": f"Bearer {token}"})
            with urllib.request.urlopen(request, timeout=30) as answer:
                page = answer.read().decode()
            return f"<code>{redis_ref}</code>" in page

        wait_for("the tree page with the Deployment", tree_page)
        beneath = page.split(f"<code>{cache_ref}</code>", 1)[1]
        assert f"<code>{redis_ref}</code>" in beneath.split("<ul>", 1)[1].split("</ul>")[0]
    finally:
        agent.stop(signal.SIGKILL)


def test_the_agents_scoped_sync_prunes_what_a_created_custom_resource_no_longer_renders(
        control_plane: ControlPlane, served: tuple[Path, str], kube: Kube,
        tmp_path: Path, ns: str) -> None:
    """A commit that changes only the AppEnvironment is a scoped sync of it; its render
    holds the whole chain, so its part of the inventory holds the CacheCluster's children
    too (orksync.sync.SharedInventory.part): the redis Deployment the CacheCluster no
    longer renders is pruned by that scoped sync, not left to the next full sync."""
    gated = nc.CACHE_ENTRY.replace('''              reconcile: true
''', '''              reconcile: true
              when:
                - field: spec.size
                  greaterThan: "0"
''')
    repo, url = served
    write_repo(repo, {**nc.files(ns), "katalog.yaml": nc.katalog(gated)})
    commit(repo, "first")
    redis_ref = ref("Deployment", "dev-cache-redis", ns)
    agent = AgentProcess(control_plane, url, tmp_path / "state",
                         name=f"nest-{uuid.uuid4().hex[:6]}",
                         flags=["--resync-interval", "3600"])
    try:
        wait_for("the redis Deployment", lambda: get(kube, redis_ref) is not None)
        wait_for("readiness", lambda: http_get(agent.port, "/readyz")[0] == 200)
        write_repo(repo, {"apps/dev.yaml": nc.env("dev", ns, size=0)})
        commit(repo, "no cache replicas")
        wait_for("the scoped sync", lambda: "scoped sync of 1 custom resource(s)"
                 in agent.text())
        wait_for("the redis Deployment pruned", lambda: get(kube, redis_ref) is None)
        assert agent.text().count("sync rev=") == 1  # the first sync only
    finally:
        agent.stop(signal.SIGKILL)
