"""One Sync split over the agent's replicas (`spec.shards`), as real processes on the real
control plane with the API server's audit log (the harness of test_scaleout_cluster): each
shard is handed out as a Sync is, so its custom resources are written by the replica
serving their shard only, and move as a Sync does when that replica dies."""

from __future__ import annotations

import hashlib
import signal
import subprocess
import uuid
from typing import Any

import pytest

from tests.agent.test_scaleout_cluster import (
    BOX,
    MANAGER,
    Fleet,
    rendezvous,
    writers_in_turn,
)
from tests.agent.test_syncs_cluster import commit
from tests.helpers import CRD, wait_for, widget, write_repo

pytestmark = pytest.mark.cluster

SHARDS = 4
WIDGETS = [f"w{i}" for i in range(8)]


def shard_of(namespace: str, name: str) -> int:
    """A Widget's shard, as docs/operations.md gives it: sha256 of
    apiVersion/kind/namespace/name, its first 8 bytes big-endian, modulo the shards."""
    text = f"test.orksync.io/v1/Widget/{namespace}/{name}"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") % SHARDS


class Big:
    """A Sync `big` of four shards over one repository of eight Widgets."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self.repo = fleet.base / "big"
        self.key = fleet.key("big")
        self.token = f"tok-{uuid.uuid4().hex}"
        self.a = 1  # the Widgets' spec.a at the last commit

    def units(self) -> list[str]:
        return [f"{self.key}#{i}" for i in range(SHARDS)]

    def identities(self) -> tuple[str, str]:
        """Two identities, each the rendezvous winner of at least one shard."""
        while True:
            names = [f"{p}-{uuid.uuid4().hex[:6]}" for p in ("one", "two")]
            owners = [rendezvous(u, names) for u in self.units()]
            if all(n in owners for n in names) and any(
                    owners[shard_of(self.fleet.ns, w)] == names[0] for w in WIDGETS) and any(
                    owners[shard_of(self.fleet.ns, w)] == names[1] for w in WIDGETS):
                return names[0], names[1]

    def create(self) -> str:
        fleet = self.fleet
        fleet.kube.create(fleet.kube.resource("v1", "Secret"), {
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "hook", "namespace": fleet.ns},
            "stringData": {"token": self.token}}, field_manager=MANAGER)
        self.repo.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", "-b", "main"], cwd=self.repo, check=True)
        write_repo(self.repo, {"katalog.yaml": BOX, "crd.yaml": CRD, **{
            f"{w}.yaml": widget(w, fleet.ns, a=1) for w in WIDGETS}})
        sha = commit(self.repo, "first")
        fleet.kube.create(fleet.syncs, {
            "apiVersion": "orksync.io/v1alpha1", "kind": "Sync",
            "metadata": {"name": "big", "namespace": fleet.ns},
            "spec": {"url": fleet.daemon.url("big"), "interval": "1h", "shards": SHARDS,
                     "webhook": {"secretRef": {"name": "hook"}}}}, field_manager=MANAGER)
        return sha

    def change(self, a: int) -> str:
        write_repo(self.repo, {f"{w}.yaml": widget(w, self.fleet.ns, a=a) for w in WIDGETS})
        return commit(self.repo, f"a={a}")

    def applied(self, sha: str, servers: dict[int, str]) -> bool:
        """Ready at `sha`, each shard's entry naming its server and the revision."""
        status = self.fleet.status("big")
        ready = next((c for c in status.get("conditions") or [] if c["type"] == "Ready"), {})
        entries = status.get("shards") or {}
        return ready.get("status") == "True" and status.get("lastAppliedRevision") == sha \
            and all((entries.get(str(i)) or {}).get("servedBy") == servers[i] and
                    entries[str(i)].get("lastAppliedRevision") == sha
                    for i in range(SHARDS)) and all(
            self.fleet.kube.get(self.fleet.kube.resource("test.orksync.io/v1", "Widget"),
                                self.fleet.ns, w)["spec"]["a"] == self.a for w in WIDGETS)

    def uids(self) -> dict[str, str]:
        return {w: self.fleet.kube.get(self.fleet.maps, self.fleet.ns, f"{w}-config")[
            "metadata"]["uid"] for w in WIDGETS}

    def writes(self) -> dict[int, list[dict[str, Any]]]:
        """Per shard, the audit events of the writes of the fleet's replicas for its
        Widgets, their ConfigMaps and its inventory, in the order received."""
        fleet = self.fleet
        names: dict[tuple[str, str, str], int] = {}
        for w in WIDGETS:
            names[("widgets", fleet.ns, w)] = shard_of(fleet.ns, w)
            names[("configmaps", fleet.ns, f"{w}-config")] = shard_of(fleet.ns, w)
        for i in range(SHARDS):
            names[("configmaps", "orksync-system",
                   f"orksync-inventory-{fleet.ns}.big.{i}-of-{SHARDS}")] = i
        return fleet.writes_to(names, range(SHARDS))


def test_one_sync_s_shards_are_split_over_the_replicas_and_move_when_one_dies(
        fleet: Fleet) -> None:
    big = Big(fleet)
    one, two = big.identities()
    fleet.start(one, two)
    sha = big.create()
    servers = {i: rendezvous(u, [one, two]) for i, u in enumerate(big.units())}
    wait_for("every shard applied by its replica", lambda: big.applied(sha, servers), 180)
    uids = big.uids()
    # the Widgets' kind was not served before shard 0's first sync: no shard waited for a
    # view of it
    assert not [r for r in fleet.replicas.values() if "is not listed yet" in r.text()]

    # a webhook: answered by shard 0's server only, and every shard fetches
    big.a = 2
    sha = big.change(2)
    other = two if servers[0] == one else one
    status, body = fleet.replicas[other].hook(fleet.ns, "big", big.token)
    assert status == 421 and f"served by the replica {servers[0]}" in body, body
    assert fleet.replicas[servers[0]].hook(fleet.ns, "big", big.token)[0] == 202
    wait_for("the hook's commit applied by every shard", lambda: big.applied(sha, servers), 60)

    # a replica killed: its shards move to the survivor, nothing is created again
    fleet.replicas[one].stop(signal.SIGKILL)
    wait_for("every shard served by the survivor", lambda: all(
        (entry or {}).get("servedBy") == two
        for entry in (fleet.status("big").get("shards") or {}).values()), 120)
    big.a = 3
    sha = big.change(3)
    assert fleet.replicas[two].hook(fleet.ns, "big", big.token)[0] == 202
    wait_for("the next commit applied by the survivor",
             lambda: big.applied(sha, dict.fromkeys(range(SHARDS), two)), 120)
    assert big.uids() == uids
    writes = big.writes()
    for shard in range(SHARDS):
        expected = [one, two] if servers[shard] == one else [two]
        assert writers_in_turn(writes[shard]) == expected, shard
        assert not [e for e in writes[shard] if e["verb"] == "delete"], shard

    # deleted with prune: every shard's objects and inventory go, then the Sync
    fleet.kube.delete(fleet.syncs, fleet.ns, "big")
    wait_for("the Sync gone", lambda: fleet.kube.get_or_none(fleet.syncs, fleet.ns, "big")
             is None, 120)
    widgets = fleet.kube.resource("test.orksync.io/v1", "Widget")
    for w in WIDGETS:  # (their ConfigMaps follow by ownerReference, in a cluster with a GC)
        assert fleet.kube.get_or_none(widgets, fleet.ns, w) is None, w
    for i in range(SHARDS):
        assert fleet.kube.get_or_none(
            fleet.maps, "orksync-system", f"orksync-inventory-{fleet.ns}.big.{i}-of-4") is None


def test_the_number_of_shards_is_fixed_at_creation(fleet: Fleet) -> None:
    fleet.kube.create(fleet.syncs, {
        "apiVersion": "orksync.io/v1alpha1", "kind": "Sync",
        "metadata": {"name": "fixed", "namespace": fleet.ns},
        "spec": {"url": "https://example.com/r.git", "shards": 2}}, field_manager=MANAGER)
    from orksync.errors import ClusterError

    with pytest.raises(ClusterError, match="shards is fixed at creation"):
        fleet.kube.request("PATCH", fleet.syncs.path(fleet.ns, "fixed"),
                           body={"spec": {"shards": 3}},
                           content_type="application/merge-patch+json")
