"""Replicas of `orksync agent` (no --repo-url) sharing the Sync objects, as real processes on
the real control plane, fed by a git daemon, judged by the API server's audit log: each
write names its replica in its User-Agent (`(agent <identity>)`), so the log shows which
replica wrote for which Sync, and when.

Short leases (6 s, renew deadline 4 s, retry period 1 s) keep the tests short. The bound
of a takeover depends on when threads get to run, so these tests wait for it generously
and decide on order (from the audit log), never on how long it took."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import pytest

from orksync.agent.roots import sync_label_of
from orksync.cluster.kube import Kube
from testbed.controlplane import ControlPlane
from testbed.gitdaemon import GitDaemon, free_port
from tests.agent.test_syncs_cluster import commit, remove_syncs
from tests.helpers import CRD, crd, katalog, wait_for, widget, write_repo

pytestmark = pytest.mark.cluster

LEASE = ["--lease-duration", "6", "--renew-deadline", "4", "--retry-period", "1"]
BOX = katalog("""\
        onCreate:
          configMaps: [{name: "{{ .metadata.name }}-config", data: {a: "{{ .spec.a }}"}}]
""")
SYNCS = [f"s{i}" for i in range(6)]
MANAGER = "orksync-test"
K = TypeVar("K")


def rendezvous(key: str, members: list[str]) -> str:
    """The replica that should serve the Sync `key` (namespace/name): the highest weight
    sha256(key NUL identity), as docs/operations.md says."""
    return max(members, key=lambda m: hashlib.sha256(f"{key}\0{m}".encode()).digest())


class Replica:
    def __init__(self, fleet: Fleet, identity: str, *flags: str) -> None:
        self.identity = identity
        self.log = fleet.tmp / f"{identity}.log"
        self.port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "orksync", "agent", "--watch-namespace", fleet.ns,
             "--state-dir", str(fleet.tmp / identity), "--listen", f"127.0.0.1:{self.port}",
             "--kubeconfig", str(fleet.control_plane.kubeconfig), "--name", fleet.group,
             "--log-level", "debug", "--identity", identity, *LEASE, *flags],
            stdout=subprocess.DEVNULL, stderr=self.log.open("w"), start_new_session=True)

    def readyz(self) -> str:
        """/readyz's answer ("" while it cannot be had)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz",
                                        timeout=5) as answer:
                return answer.read().decode()
        except OSError:
            return ""

    def sees(self, count: int) -> bool:
        """Whether /readyz counts `count` live replicas (itself included)."""
        return f", {count} replica(s) live" in self.readyz()

    def hook(self, namespace: str, sync: str, token: str) -> tuple[int, str]:
        """POST a GitLab-style push hook for the Sync to this replica: (status, body)."""
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/hooks/git/{namespace}/{sync}", data=b"{}",
            method="POST", headers={"X-Gitlab-Token": token})
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                return int(answer.status), answer.read().decode()
        except urllib.error.HTTPError as err:
            return int(err.code), err.read().decode()

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
        self.proc.wait(60)

    def text(self) -> str:
        return self.log.read_text()


class Fleet:
    """A namespace of six Syncs, each of a repository of its own with one Widget, and the
    replicas of one agent (`--name group`) serving them."""

    def __init__(self, control_plane: ControlPlane, tmp: Path, daemon: GitDaemon,
                 base: Path) -> None:
        self.control_plane = control_plane
        self.tmp = tmp
        self.daemon = daemon
        self.base = base
        self.kube = Kube.from_kubeconfig(control_plane.kubeconfig)
        self.ns = f"so-{uuid.uuid4().hex[:8]}"
        self.group = f"so-{uuid.uuid4().hex[:6]}"
        self.replicas: dict[str, Replica] = {}
        self.kube.create(self.kube.resource("v1", "Namespace"),
                         {"apiVersion": "v1", "kind": "Namespace",
                          "metadata": {"name": self.ns}}, field_manager=MANAGER)
        self.maps = self.kube.resource("v1", "ConfigMap")

    @property
    def syncs(self) -> Any:
        return self.kube.resource("orksync.io/v1alpha1", "Sync")

    def key(self, sync: str) -> str:
        return f"{self.ns}/{sync}"

    def identities(self, *prefixes: str, wins: int = 1) -> list[str]:
        """An identity per prefix, each (with a random tail) the rendezvous winner of at
        least `wins` of the six Syncs among them all, and also between the first two:
        the assignment is the agent's, the names only make sure every replica has work."""
        while True:
            names = [f"{p}-{uuid.uuid4().hex[:6]}" for p in prefixes]
            for size in range(2, len(names) + 1):
                owners = [rendezvous(self.key(s), names[:size]) for s in SYNCS]
                if any(owners.count(n) < wins for n in names[:size]):
                    break
            else:
                return names

    def start(self, *identities: str, flags: tuple[str, ...] = ()) -> None:
        """Start replicas; return once each counts every running replica live."""
        for identity in identities:
            self.replicas[identity] = Replica(self, identity, *flags)
        running = [r for r in self.replicas.values() if r.proc.poll() is None]
        wait_for("every replica to see the others", lambda: all(
            r.sees(len(running)) for r in running), 60)

    def create(self, files: Callable[[str], dict[str, str]] | None = None, **spec: Any
               ) -> dict[str, str]:
        """The six Syncs, each its own repository (`files(sync)`, default a Widget):
        name -> the sha committed."""
        shas = {}
        for sync in SYNCS:
            repo = self.base / sync
            repo.mkdir(parents=True)
            subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
            write_repo(repo, files(sync) if files is not None else {
                "katalog.yaml": BOX, "crd.yaml": CRD,
                "w.yaml": widget(f"{sync}-w", self.ns, a=1)})
            shas[sync] = commit(repo, "first")
            self.kube.create(self.syncs, {
                "apiVersion": "orksync.io/v1alpha1", "kind": "Sync",
                "metadata": {"name": sync, "namespace": self.ns},
                "spec": {"url": self.daemon.url(sync), "interval": "1s", **spec}},
                field_manager=MANAGER)
        return shas

    def change(self, sync: str, a: int) -> str:
        repo = self.base / sync
        write_repo(repo, {"w.yaml": widget(f"{sync}-w", self.ns, a=a)})
        return commit(repo, f"a={a}")

    def status(self, sync: str) -> dict[str, Any]:
        return dict(self.kube.get(self.syncs, self.ns, sync).get("status") or {})

    def served(self, sync: str, sha: str, by: str) -> bool:
        status = self.status(sync)
        ready = next((c for c in status.get("conditions") or [] if c["type"] == "Ready"), {})
        return status.get("lastAppliedRevision") == sha and ready.get("status") == "True" \
            and status.get("servedBy") == by

    def all_served(self, shas: dict[str, str], members: list[str]) -> bool:
        return all(self.served(s, shas[s], rendezvous(self.key(s), members)) for s in SYNCS)

    def claim_holder(self, sync: str) -> str:
        """The holder of the Sync's claim Lease (labelled with the agent's name, annotated
        with the Sync)."""
        leases = self.kube.list(self.kube.resource("coordination.k8s.io/v1", "Lease"),
                                namespace="orksync-system",
                                label_selector=f"orksync.io/scale-out=orksync-syncs-"
                                               f"{self.group},orksync.io/role=claim")
        for lease in leases:
            if lease["metadata"]["annotations"].get("orksync.io/sync") == self.key(sync):
                return str(lease["spec"].get("holderIdentity") or "")
        return ""

    def uids(self) -> dict[str, str]:
        """The UIDs of what the Syncs wrote (their ConfigMaps and inventories)."""
        found = {}
        for sync in SYNCS:
            for ns, name in ((self.ns, f"{sync}-w-config"),
                             ("orksync-system", f"orksync-inventory-{self.ns}.{sync}")):
                found[f"{ns}/{name}"] = self.kube.get(self.maps, ns, name)["metadata"]["uid"]
        return found

    def writes(self) -> dict[str, list[dict[str, Any]]]:
        """Per Sync, the audit events of every write a replica of this fleet sent for it
        (its Sync object, its Widget and ConfigMap, its inventory), in the order the API
        server received them."""
        names = {}
        for sync in SYNCS:
            names[("syncs", self.ns, sync)] = sync
            names[("widgets", self.ns, f"{sync}-w")] = sync
            names[("configmaps", self.ns, f"{sync}-w-config")] = sync
            names[("configmaps", "orksync-system", f"orksync-inventory-{self.ns}.{sync}")] = sync
        return self.writes_to(names, SYNCS)

    def writes_to(self, names: Mapping[tuple[str, str, str], K], keys: Iterable[K]
                  ) -> dict[K, list[dict[str, Any]]]:
        """Per key, the audit events of the writes a replica of this fleet sent to the
        objects `names` maps to it ((resource, namespace, name) -> key), in the order the
        API server received them."""
        assert self.control_plane.audit_log is not None
        found: dict[K, list[dict[str, Any]]] = {k: [] for k in keys}
        for line in self.control_plane.audit_log.read_text().splitlines():
            event = json.loads(line)
            ref = event.get("objectRef") or {}
            if event.get("stage") != "ResponseComplete" or event.get("verb") not in (
                    "create", "update", "patch", "delete"):
                continue
            key = names.get((ref.get("resource"), ref.get("namespace"), ref.get("name")))
            if key is not None and writer(event) in self.replicas:
                found[key].append(event)
        for events in found.values():
            events.sort(key=lambda e: e["requestReceivedTimestamp"])
        return found

    def close(self) -> None:
        for replica in self.replicas.values():
            replica.stop(signal.SIGKILL)
        remove_syncs(self.kube, self.ns)
        self.kube.close()


def writer(event: dict[str, Any]) -> str:
    agent = str(event.get("userAgent") or "")
    return agent.rpartition("(agent ")[2].rstrip(")") if "(agent " in agent else ""


def at(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def writers_in_turn(events: list[dict[str, Any]]) -> list[str]:
    """The replicas that wrote for one Sync, one entry per turn; a turn begins only after
    the previous writer's last write was answered (no moment with two writers)."""
    turns: list[str] = []
    for before, after in itertools.pairwise(events):
        if writer(before) != writer(after):
            assert at(before["stageTimestamp"]) <= at(after["requestReceivedTimestamp"]), \
                (writer(before), before["requestURI"], writer(after), after["requestURI"])
    for event in events:
        if not turns or turns[-1] != writer(event):
            turns.append(writer(event))
    return turns


def test_two_replicas_split_six_syncs_each_served_by_one(fleet: Fleet) -> None:
    one, two = fleet.identities("one", "two")
    fleet.start(one, two)
    shas = fleet.create()
    wait_for("every Sync applied by its replica", lambda: fleet.all_served(shas, [one, two]),
             180)
    owners = {s: rendezvous(fleet.key(s), [one, two]) for s in SYNCS}
    assert set(owners.values()) == {one, two}  # both serve some
    assert all(fleet.claim_holder(s) == owners[s] for s in SYNCS)
    writes = fleet.writes()
    for sync in SYNCS:
        assert writes[sync], sync
        assert writers_in_turn(writes[sync]) == [owners[sync]], sync


def test_a_killed_replica_s_syncs_are_served_by_the_other_nothing_created_again(
        fleet: Fleet) -> None:
    one, two = fleet.identities("one", "two")
    fleet.start(one, two)
    shas = fleet.create()
    wait_for("every Sync applied by its replica", lambda: fleet.all_served(shas, [one, two]),
             180)
    moved = [s for s in SYNCS if rendezvous(fleet.key(s), [one, two]) == one]
    before = fleet.uids()
    fleet.replicas[one].stop(signal.SIGKILL)
    for sync in moved:  # a new revision of each, applied by the survivor
        shas[sync] = fleet.change(sync, 2)
    wait_for("the killed replica's Syncs served by the other",
             lambda: fleet.all_served(shas, [two]), 120)
    assert fleet.uids() == before  # nothing deleted or created again
    assert all(fleet.claim_holder(s) == two for s in SYNCS)
    writes = fleet.writes()
    for sync in SYNCS:
        assert writers_in_turn(writes[sync]) == ([one, two] if sync in moved else [two])
        if sync in moved:  # what the killed replica made, the survivor only updates
            assert not [e for e in writes[sync] if e["verb"] in ("create", "delete") and
                        writer(e) == two], sync
    assert "claim expired from " + one in fleet.replicas[two].text()


def test_a_third_replica_takes_its_share_and_only_that(fleet: Fleet) -> None:
    one, two, three = fleet.identities("one", "two", "three")
    fleet.start(one, two)
    shas = fleet.create()
    wait_for("every Sync applied by its replica", lambda: fleet.all_served(shas, [one, two]),
             180)
    before = {s: rendezvous(fleet.key(s), [one, two]) for s in SYNCS}
    after = {s: rendezvous(fleet.key(s), [one, two, three]) for s in SYNCS}
    uids = fleet.uids()
    fleet.start(three)
    for sync in SYNCS:
        shas[sync] = fleet.change(sync, 3)
    wait_for("the third replica's share served by it",
             lambda: fleet.all_served(shas, [one, two, three]), 120)
    assert three in after.values()
    assert fleet.uids() == uids
    writes = fleet.writes()
    for sync in SYNCS:
        expected = [before[sync]] if after[sync] == before[sync] else [before[sync], three]
        assert writers_in_turn(writes[sync]) == expected, sync


def test_a_rolling_update_moves_each_sync_once_to_the_replica_taking_an_old_one_s_place(
        fleet: Fleet) -> None:
    """As a Deployment's rolling update (maxSurge 1, maxUnavailable 0) does, each replica
    told its generation: a new replica starts and waits, ready, while the old generation
    runs; an old one stops (SIGTERM: it releases its claims and its slot) and the new one
    serves exactly its Syncs. Each Sync has two writers in all, one after the other."""
    old_one, old_two, new_one, new_two = fleet.identities("old1", "old2", "new1", "new2")
    fleet.start(old_one, old_two, flags=("--generation", "1"))
    shas = fleet.create()
    owner = {s: rendezvous(fleet.key(s), [old_one, old_two]) for s in SYNCS}
    first = dict(owner)
    wait_for("every Sync applied", lambda: all(
        fleet.served(s, shas[s], owner[s]) for s in SYNCS), 180)
    uids = fleet.uids()
    for new, old in ((new_one, old_one), (new_two, old_two)):
        replica = fleet.replicas[new] = Replica(fleet, new, "--generation", "2")
        wait_for(f"{new} waiting, ready", lambda r=replica: "standby: waiting for a "
                 "replica of generation 1 to leave" in r.readyz(), 60)
        fleet.replicas[old].stop()
        owner = {s: new if o == old else o for s, o in owner.items()}
        wait_for(f"{old}'s Syncs served by {new}", lambda now=owner: all(
            fleet.served(s, shas[s], now[s]) for s in SYNCS), 120)
    for sync in SYNCS:
        shas[sync] = fleet.change(sync, 4)
    wait_for("a new revision of each applied", lambda: all(
        fleet.served(s, shas[s], owner[s]) for s in SYNCS), 120)
    assert fleet.uids() == uids
    writes = fleet.writes()
    replaced = {old_one: new_one, old_two: new_two}
    for sync in SYNCS:
        assert writers_in_turn(writes[sync]) == [first[sync], replaced[first[sync]]], \
            (sync, [(writer(e), e["verb"], e["requestURI"]) for e in writes[sync]])


def test_a_webhook_at_the_wrong_replica_names_the_right_one_and_follows_a_hand_over(
        fleet: Fleet) -> None:
    one, two = fleet.identities("one", "two")
    token = f"tok-{uuid.uuid4().hex}"
    fleet.kube.create(fleet.kube.resource("v1", "Secret"), {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hook", "namespace": fleet.ns},
        "stringData": {"token": token}}, field_manager=MANAGER)
    fleet.start(one, two)
    shas = fleet.create(interval="1h", webhook={"secretRef": {"name": "hook"}})
    wait_for("every Sync applied by its replica", lambda: fleet.all_served(shas, [one, two]),
             180)
    sync = next(s for s in SYNCS if rendezvous(fleet.key(s), [one, two]) == one)
    shas[sync] = fleet.change(sync, 5)
    status, body = fleet.replicas[two].hook(fleet.ns, sync, token)
    assert status == 421 and f"served by the replica {one}" in body, body
    assert fleet.replicas[one].hook(fleet.ns, sync, token)[0] == 202
    wait_for("the hook's commit", lambda: fleet.served(sync, shas[sync], one), 60)
    fleet.replicas[one].stop(signal.SIGKILL)
    wait_for("the Sync served by the survivor", lambda: fleet.status(sync).get(
        "servedBy") == two, 120)
    shas[sync] = fleet.change(sync, 6)
    assert fleet.replicas[two].hook(fleet.ns, sync, token)[0] == 202  # interval 1h: the hook
    wait_for("the hook's commit at the survivor", lambda: fleet.served(sync, shas[sync], two),
             60)


def test_static_shards_split_the_syncs_by_a_stable_hash(fleet: Fleet) -> None:
    """--shards N --shard I stays as an override: each shard serves the Syncs of its hash,
    whatever else runs."""
    def shard(key: str) -> int:
        return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % 2

    names = [f"shard{i}-{uuid.uuid4().hex[:6]}" for i in range(2)]
    for i, name in enumerate(names):
        fleet.replicas[name] = Replica(fleet, name, "--shards", "2", "--shard", str(i))
    shas = fleet.create()
    wait_for("every Sync applied by its shard", lambda: all(
        fleet.served(s, shas[s], names[shard(fleet.key(s))]) for s in SYNCS), 180)
    writes = fleet.writes()
    for sync in SYNCS:
        assert writers_in_turn(writes[sync]) == [names[shard(fleet.key(sync))]], sync


GADGET_CRD = crd("Gadget", group="reads.orksync.io")
GADGETS = BOX.replace("widget:", "gadget:")


def gadget(name: str, namespace: str, a: int) -> str:
    return (f"apiVersion: reads.orksync.io/v1\nkind: Gadget\nmetadata:\n  name: {name}\n"
            f"  namespace: {namespace}\nspec:\n  a: {a}\n")


def test_a_taken_sync_s_first_sync_lists_its_own_objects_not_every_sync_s(
        fleet: Fleet) -> None:
    """The replica taking a Sync reads what it wrote from watches by the Sync's label: no
    LIST of the Syncs' custom resources without a shard label in its selector, which
    would return every Sync's objects (the cost of a hand-over growing with the cluster).
    The Syncs are of Gadgets, a kind whose reads the test control plane's audit log
    records. And a replica watches each kind once for all the Syncs it serves (one watch,
    not one per Sync, routed by label: orksync.cluster.shared_watch)."""
    one, two = fleet.identities("one", "two")
    fleet.start(one)
    shas = fleet.create(lambda sync: {"katalog.yaml": GADGETS, "crd.yaml": GADGET_CRD,
                                      "g.yaml": gadget(f"{sync}-g", fleet.ns, 1)})
    wait_for("every Sync applied by one", lambda: fleet.all_served(shas, [one]), 180)
    fleet.start(two)
    moved = [s for s in SYNCS if rendezvous(fleet.key(s), [one, two]) == two]
    for sync in SYNCS:
        write_repo(fleet.base / sync, {"g.yaml": gadget(f"{sync}-g", fleet.ns, 7)})
        shas[sync] = commit(fleet.base / sync, "a=7")
    wait_for("the moved Syncs served by two", lambda: fleet.all_served(shas, [one, two]), 120)
    assert moved
    assert fleet.control_plane.audit_log is not None
    lists = []
    watches: dict[str, set[str]] = {one: set(), two: set()}  # audit IDs of watch requests
    unlabelled: dict[str, int] = {one: 0, two: 0}  # the relabel pass's LISTs
    for line in fleet.control_plane.audit_log.read_text().splitlines():
        event = json.loads(line)
        if (event.get("objectRef") or {}).get("resource") != "gadgets":
            continue
        if writer(event) in watches and event.get("verb") == "watch":
            watches[writer(event)].add(event["auditID"])
        if writer(event) in unlabelled and event.get("verb") == "list" and \
                event.get("stage") == "ResponseComplete" and \
                "!orksync.io/shard" in urllib.parse.unquote(event["requestURI"]):
            unlabelled[writer(event)] += 1
        if writer(event) == two and event.get("verb") in ("list", "watch") and \
                event.get("stage") == "ResponseComplete":
            lists.append(urllib.parse.unquote(event["requestURI"]))
    # one served the six Syncs at once, two those it took: a watch each (a reconnect at
    # most), not one per Sync
    assert 1 <= len(watches[one]) <= 2 and 1 <= len(watches[two]) <= 2, watches
    assert lists  # its watches
    unselected = [uri for uri in lists if "orksync.io/shard" not in uri]
    assert not unselected, unselected
    # one's first term of each Sync looked for Gadgets without a shard label and, finding
    # none, marked the inventory: two's term after the hand-over does not look again
    # (each such LIST reads every orksync Gadget of the cluster)
    assert unlabelled[one] >= len(SYNCS) and unlabelled[two] == 0, unlabelled
    for sync in SYNCS:
        inventory = fleet.kube.get(fleet.maps, "orksync-system",
                                   f"orksync-inventory-{fleet.ns}.{sync}")
        assert inventory["metadata"]["annotations"]["orksync.io/labelled"] == \
            sync_label_of(fleet.key(sync))
