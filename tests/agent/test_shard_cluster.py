"""Sharded agents on the real control plane (in-process `Agent`s, drift repair on, no
leader election): each shard watches only what it wrote (`orksync.io/shard: I-of-N`), reads
another shard's custom resources for `.cross` from the API server, repairs its own objects,
and labels at its first full sync what it owns but wrote before the label existed."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orksync.agent.config import AgentConfig
from orksync.agent.runner import Agent
from orksync.agent.shard import shard_of
from orksync.cluster.kube import Kube
from orksync.model import SHARD_LABEL, ObjRef
from testbed.controlplane import ControlPlane
from testbed.gitdaemon import GitDaemon
from tests.agent.test_agent_cluster import commit
from tests.apply.test_impersonation_cluster import (
    CONFIGMAPS_ONLY,
    TENANT,
    allow,
    as_whom,
    audit_events,
    user,
)
from tests.helpers import (
    CRD,
    configmap_writes,
    finished_job_status,
    katalog,
    wait_for,
    widget,
    write_repo,
)
from tests.kind_cases import katalog as entry_katalog

pytestmark = pytest.mark.cluster

WIDGETS = "test.orksync.io/v1"


def shard_katalog(target: str) -> str:
    """Every Widget reads `target`'s status (`.cross.peer`) into its `-live` ConfigMap
    (server-side applied), has a `-once` ConfigMap (create-if-absent), a generated Secret
    `-db`, a TLS Secret `-tls` (with its CA Secret `-tls-ca`) and an onDelete Job."""
    return katalog(f"""\
        cross:
          - crd: widget
            as: peer
            selector: {{name: {target}}}
        onCreate:
          configMaps:
            - name: "{{{{ .metadata.name }}}}-once"
              data: {{made: once}}
          secrets:
            - name: "{{{{ .metadata.name }}}}-db"
              once: true
              data:
                password: "{{{{ randomAlphanumeric 32 }}}}"
            - name: "{{{{ .metadata.name }}}}-tls"
              once: true
              tls:
                dnsNames: ["{{{{ .metadata.name }}}}.{{{{ .metadata.namespace }}}}.svc"]
        onReconcile:
          configMaps:
            - name: "{{{{ .metadata.name }}}}-live"
              data: {{colour: blue, phase: "{{{{ .cross.peer.status.phase }}}}"}}
        onDelete:
          timeout: 900s
          jobs:
            - name: "{{{{ .metadata.name }}}}-cleanup"
              image: busybox
""")


def names_by_shard(ns: str) -> tuple[list[str], list[str]]:
    """Two Widget names of shard 0 and two of shard 1 (of 2), in this namespace."""
    found: tuple[list[str], list[str]] = ([], [])
    for i in range(100):
        name = f"w{i}"
        part = found[shard_of(ObjRef(api_version=WIDGETS, kind="Widget", namespace=ns,
                                     name=name), 2)]
        if len(part) < 2:
            part.append(name)
    assert all(len(p) == 2 for p in found)
    return found


def owned(ns: str, names: list[str], *, secrets: bool = True) -> set[ObjRef]:
    """The Widgets and their ConfigMaps and Secrets (`shard_katalog`)."""
    out = set()
    for name in names:
        out.add(ObjRef(api_version=WIDGETS, kind="Widget", namespace=ns, name=name))
        for suffix in ("-once", "-live"):
            out.add(ObjRef(api_version="v1", kind="ConfigMap", namespace=ns,
                           name=name + suffix))
        for suffix in ("-db", "-tls", "-tls-ca") if secrets else ():
            out.add(ObjRef(api_version="v1", kind="Secret", namespace=ns, name=name + suffix))
    return out


CRD_REF = ObjRef(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition",
                 name="widgets.test.orksync.io")


def view(agent: Agent, ns: str) -> set[ObjRef]:
    """What the agent's informers hold of this namespace, and the Widget CRD."""
    assert agent.reconciler.drift is not None
    informers = agent.reconciler.drift.informers
    return {ref for kind in informers.kinds() for obj in informers.items(kind) or []
            if (ref := ObjRef.of(obj)).namespace == ns or ref == CRD_REF}


class Agents:
    """In-process agents on one repository, each with its own connection and drift
    repair; stopped after the test."""

    def __init__(self, control_plane: ControlPlane, url: str, state: Path) -> None:
        self.control_plane, self.url, self.state = control_plane, url, state
        self.started: list[Agent] = []

    def start(self, name: str, *, shard: int = 0, shards: int = 1,
              repair: bool = True) -> Agent:
        identity = f"{name}-{shard}-of-{shards}"
        suffix = f"-shard-{shard}-of-{shards}" if shards > 1 else ""
        kube = Kube.from_kubeconfig(self.control_plane.kubeconfig)
        agent = Agent(AgentConfig(repo_url=self.url, state_dir=self.state / identity,
                                  leader_elect=False, name=name + suffix, identity=identity,
                                  shard=shard, shards=shards, resync_interval=3600),
                      kube)
        if repair:
            agent.reconciler.drift_repair()
        self.started.append(agent)
        return agent

    def stop(self) -> None:
        for agent in self.started:
            agent.reconciler.stop_drift()
            agent.kube.close()


def full_sync(agent: Agent) -> None:
    """One full sync, beside no drift-repair job of the agent."""
    with agent.reconciler.lock:
        agent.state.full_wanted = True
        assert agent.sync()


@pytest.fixture
def agents(control_plane: ControlPlane, git_daemon: tuple[Path, str, GitDaemon],
           tmp_path: Path) -> Iterator[tuple[Agents, Path]]:
    repo, url, _ = git_daemon
    started = Agents(control_plane, url, tmp_path / "state")
    yield started, repo
    started.stop()


def live_map(kube: Kube, ns: str, name: str) -> dict[str, Any]:
    return dict(kube.get_or_none(kube.resource("v1", "ConfigMap"), ns, name) or {})


def test_two_shards_each_watch_repair_and_cross_read_only_as_theirs(
        control_plane: ControlPlane, agents: tuple[Agents, Path]) -> None:
    started, repo = agents
    ns = f"s-{uuid.uuid4().hex[:8]}"
    zero, one = names_by_shard(ns)
    target = zero[0]  # every Widget, shard 1's too, reads a Widget of shard 0
    write_repo(repo, {"katalog.yaml": shard_katalog(target), "crd.yaml": CRD,
                      **{f"{n}.yaml": widget(n, ns) for n in zero + one}})
    commit(repo, "two shards")
    name = f"two-{uuid.uuid4().hex[:6]}"
    first, second = started.start(name, shard=0, shards=2), started.start(name, shard=1,
                                                                          shards=2)
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    try:
        full_sync(first)
        full_sync(second)
        for names, label in ((zero, "0-of-2"), (one, "1-of-2")):
            for ref in owned(ns, names):
                live = kube.get(kube.resource(ref.api_version, ref.kind), ref.namespace,
                                ref.name)
                assert live["metadata"]["labels"][SHARD_LABEL] == label, ref
        # each view holds exactly its own custom resources and their children, and
        # shard 0's the CRD
        wait_for("shard 0's view", lambda: view(first, ns) == owned(ns, zero) | {CRD_REF})
        wait_for("shard 1's view", lambda: view(second, ns) == owned(ns, one))

        # a .cross read of another shard's custom resource, through a view without it,
        # renders what an unsharded render does: its status
        widgets = kube.resource(WIDGETS, "Widget")
        kube.request("PATCH", widgets.path(ns, target, "status"),
                     body={"status": {"phase": "Ready"}},
                     content_type="application/merge-patch+json")
        wait_for("shard 1's watches listed", lambda: not second.reconciler.drift.unsynced())  # type: ignore[union-attr]
        full_sync(second)
        for n in one:
            assert live_map(kube, ns, f"{n}-live")["data"] == {"colour": "blue",
                                                               "phase": "Ready"}

        # a hand edit of a shard-1 child is repaired by shard 1
        audit = control_plane.audit_log
        assert audit is not None
        before = len(configmap_writes(audit, second.config.identity, ns))
        edited = f"{one[0]}-live"
        kube.request("PATCH", kube.resource("v1", "ConfigMap").path(ns, edited),
                     body={"data": {"colour": "red"}},
                     content_type="application/merge-patch+json")
        wait_for("the edit repaired",
                 lambda: live_map(kube, ns, edited)["data"].get("colour") == "blue")
        assert [w[:2] for w in configmap_writes(audit, second.config.identity, ns)[before:]] == \
            [("patch", edited)]
        assert not [w for w in configmap_writes(audit, first.config.identity, ns) if w[1] == edited]

        # a shard-1 Widget deleted by hand: its onDelete Job carries the shard's label
        jobs = kube.resource("batch/v1", "Job")
        uid = kube.get(widgets, ns, one[1])["metadata"]["uid"]
        kube.delete(widgets, ns, one[1])
        wait_for("the onDelete Job",
                 lambda: kube.get_or_none(jobs, ns, f"{one[1]}-cleanup") is not None)
        job = kube.get(jobs, ns, f"{one[1]}-cleanup")
        assert job["metadata"]["labels"][SHARD_LABEL] == "1-of-2"
        kube.request("PATCH", jobs.path(ns, f"{one[1]}-cleanup", "status"),
                     body={"status": finished_job_status(ok=True)},
                     content_type="application/merge-patch+json")
        # the teardown done, the Widget (still in Git) is created again
        wait_for("the teardown finished", lambda: ((kube.get_or_none(widgets, ns, one[1]) or {})
                                                   .get("metadata") or {}).get("uid") != uid)
    finally:
        kube.close()


def test_a_shard_labels_what_it_wrote_before_the_label_and_nothing_else(
        control_plane: ControlPlane, agents: tuple[Agents, Path]) -> None:
    started, repo = agents
    ns = f"m-{uuid.uuid4().hex[:8]}"
    zero, one = names_by_shard(ns)
    write_repo(repo, {"katalog.yaml": shard_katalog(zero[0]), "crd.yaml": CRD,
                      **{f"{n}.yaml": widget(n, ns) for n in zero + one}})
    commit(repo, "before sharding")
    name = f"mig-{uuid.uuid4().hex[:6]}"
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    maps = kube.resource("v1", "ConfigMap")
    try:
        full_sync(started.start(name, repair=False))  # unsharded: no shard label
        # labelled by a shard of another N: one of shard 1 (of 2), one of shard 0
        for cm, label in ((f"{one[0]}-once", "1-of-3"), (f"{zero[1]}-once", "1-of-3")):
            kube.request("PATCH", maps.path(ns, cm),
                         body={"metadata": {"labels": {SHARD_LABEL: label}}},
                         content_type="application/merge-patch+json")

        def snapshot() -> dict[ObjRef, dict[str, Any]]:
            out = {}
            for ref in owned(ns, zero + one):
                live = kube.get(kube.resource(ref.api_version, ref.kind), ns, ref.name)
                meta = live["metadata"]
                out[ref] = {"resourceVersion": meta["resourceVersion"],
                            "labels": meta.get("labels") or {},
                            "annotations": meta.get("annotations") or {},
                            "data": live.get("data"), "spec": live.get("spec")}
            return out

        before = snapshot()
        shard = started.start(name, shard=1, shards=2)
        # its watches running already, as a standby's that became the leader: they do not
        # see what it wrote before the label, so its first sync must not read them
        assert shard.reconciler.drift is not None
        shard.reconciler.drift.watch({("v1", "ConfigMap"), (WIDGETS, "Widget")})
        wait_for("the standby's watches listed", lambda: not shard.reconciler.drift.unsynced())  # type: ignore[union-attr]
        full_sync(shard)
        after = snapshot()
        mine, theirs = owned(ns, one), owned(ns, zero)
        for ref in mine:
            assert after[ref]["labels"].get(SHARD_LABEL) == "1-of-2", ref
        for ref in theirs:  # the other shard's objects: not written at all
            assert after[ref] == before[ref], ref
        # the objects written once: the label, nothing else; no Secret generated again
        once = {ref for ref in mine if ref.name.endswith("-once")}
        for ref in once:
            assert after[ref]["labels"] == {**before[ref]["labels"], SHARD_LABEL: "1-of-2"}
            for field in ("annotations", "data"):
                assert after[ref][field] == before[ref][field], (ref, field)
        for ref in mine:
            if ref.kind == "Secret":
                assert after[ref]["data"] == before[ref]["data"], ref
        audit = control_plane.audit_log
        assert audit is not None
        identity = shard.config.identity
        labelled = sorted(w[1] for w in configmap_writes(audit, identity, ns)
                          if "fieldManager=orksync-shard" in w[2])
        assert labelled == sorted(r.name for r in once)

        # then the view holds them, exactly this shard's objects
        wait_for("the shard's view", lambda: view(shard, ns) == mine)
        # bounded: a second full sync, and a repair after it, write none of them again,
        # and nothing labels or creates anything any more
        full_sync(shard)
        count = len(configmap_writes(audit, identity, ns))
        edited = f"{one[1]}-live"
        kube.request("PATCH", maps.path(ns, edited), body={"data": {"colour": "red"}},
                     content_type="application/merge-patch+json")
        wait_for("the edit repaired",
                 lambda: live_map(kube, ns, edited)["data"].get("colour") == "blue")
        later = configmap_writes(audit, identity, ns)
        assert [w[:2] for w in later[count:]] == [("patch", edited)]
        # (the view would have had the apply create them again: refused, 409)
        assert not [w for w in later if w[0] == "create"]
        assert len([w for w in later if "fieldManager=orksync-shard" in w[2]]) == len(once)
    finally:
        kube.close()


BREAKABLE = katalog("""\
        onCreate:
          configMaps:
            - name: "{{ .metadata.name }}-once"
              data: {made: once}
        onReconcile:
          configMaps:
            - name: "{{ .metadata.name }}-live"
              data: {check: "{{ if .spec.broken }}{{ index .spec.broken 9 }}{{ end }}"}
""")


def test_a_shard_labels_the_objects_of_its_custom_resource_that_fails_to_render(
        control_plane: ControlPlane, agents: tuple[Agents, Path]) -> None:
    """A custom resource of the shard that does not render at its first sync is neither
    applied nor in its inventory: what it wrote before is labelled by its owner."""
    started, repo = agents
    ns = f"b-{uuid.uuid4().hex[:8]}"
    zero, one = names_by_shard(ns)
    write_repo(repo, {"katalog.yaml": BREAKABLE, "crd.yaml": CRD,
                      f"{zero[0]}.yaml": widget(zero[0], ns),
                      f"{one[0]}.yaml": widget(one[0], ns)})
    commit(repo, "before sharding")
    name = f"brk-{uuid.uuid4().hex[:6]}"
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    try:
        full_sync(started.start(name, repair=False))
        write_repo(repo, {f"{one[0]}.yaml": widget(one[0], ns, broken="x")})
        commit(repo, "broken")
        shard = started.start(name, shard=1, shards=2, repair=False)
        with shard.reconciler.lock:
            assert shard.sync() is False  # the render error
        assert shard.state.rendered is not None and shard.state.rendered.errors
        for ref in owned(ns, [one[0]], secrets=False):
            live = kube.get(kube.resource(ref.api_version, ref.kind), ns, ref.name)
            assert live["metadata"]["labels"].get(SHARD_LABEL) == "1-of-2", ref
        assert live_map(kube, ns, f"{one[0]}-live")["data"] == {"check": ""}  # not applied
        for ref in owned(ns, [zero[0]], secrets=False):
            live = kube.get(kube.resource(ref.api_version, ref.kind), ns, ref.name)
            assert SHARD_LABEL not in live["metadata"]["labels"], ref
    finally:
        kube.close()


def test_a_shard_labels_a_child_as_the_service_account_that_writes_it(
        control_plane: ControlPlane, agents: tuple[Agents, Path]) -> None:
    """The label patch of a child goes out as its custom resource's ServiceAccount
    (serviceAccountName), as every other write of it does: the agent's own ClusterRole
    may allow it only reads (deploy/overlays/impersonation)."""
    started, repo = agents
    ns = f"i-{uuid.uuid4().hex[:8]}"
    _, one = names_by_shard(ns)
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    try:
        kube.apply(kube.resource("v1", "Namespace"),
                   {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                   field_manager="orksync-tests", force=True)
        allow(kube, ns, CONFIGMAPS_ONLY)
        write_repo(repo, {"katalog.yaml": entry_katalog(
            {"onCreate": {"configMaps": [{"name": "{{ .metadata.name }}-once",
                                          "data": {"made": "once"}}]}},
            serviceAccountName=TENANT),
            "crd.yaml": CRD, f"{one[0]}.yaml": widget(one[0], ns)})
        commit(repo, "a tenant's")
        name = f"sa-{uuid.uuid4().hex[:6]}"
        full_sync(started.start(name, repair=False))
        shard = started.start(name, shard=1, shards=2, repair=False)
        full_sync(shard)
        child = live_map(kube, ns, f"{one[0]}-once")
        assert child["metadata"]["labels"][SHARD_LABEL] == "1-of-2"
        audit = control_plane.audit_log
        (patched,) = [e for e in audit_events(audit, resource="configmaps",
                                              name=f"{one[0]}-once", namespace=ns)
                      if "fieldManager=orksync-shard" in e["requestURI"]]
        assert as_whom(patched) == user(ns) and patched["responseStatus"]["code"] == 200
    finally:
        kube.close()


SHARED = katalog("""\
        onReconcile:
          configMaps:
            - name: shared
              data: {writer: "{{ .metadata.name }}"}
""")


def test_an_object_two_shards_render_is_not_taken_back_and_forth(
        control_plane: ControlPlane, agents: tuple[Agents, Path],
        caplog: pytest.LogCaptureFixture) -> None:
    """A ConfigMap rendered by a custom resource of each shard (a conflict no render sees:
    each shard renders only its own) is written by each full sync, and the drift repair of
    the shard that lost it leaves it, with a warning naming the other writer, instead of
    taking it back (each taking would move it out of the other's view, whose repair would
    take it again, without end)."""
    started, repo = agents
    ns = f"c-{uuid.uuid4().hex[:8]}"
    zero, one = names_by_shard(ns)
    write_repo(repo, {"katalog.yaml": SHARED, "crd.yaml": CRD,
                      **{f"{n}.yaml": widget(n, ns) for n in (zero[0], one[0])}})
    commit(repo, "one object, two shards")
    name = f"both-{uuid.uuid4().hex[:6]}"
    first, second = started.start(name, shard=0, shards=2), started.start(name, shard=1,
                                                                          shards=2)
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    audit = control_plane.audit_log
    assert audit is not None
    assert first.reconciler.drift is not None and second.reconciler.drift is not None

    def shared_writes() -> int:
        return sum(1 for identity in (first.config.identity, second.config.identity)
                   for w in configmap_writes(audit, identity, ns) if w[1] == "shared")

    try:
        with caplog.at_level(logging.WARNING, logger="orksync"):
            full_sync(first)
            wait_for("shard 0's view", lambda: any(
                r.name == "shared" for r in view(first, ns)))
            full_sync(second)  # takes it: shard 0's view loses it
            assert live_map(kube, ns, "shared")["data"] == {"writer": one[0]}
            wait_for("shard 0's repair declined", lambda: any(
                "ConfigMap" in r.getMessage() and "not repaired" in r.getMessage() and
                f"/{ns}/{one[0]}," in r.getMessage() for r in caplog.records))
        wait_for("both queues empty", lambda: not len(first.reconciler.drift.queue) and  # type: ignore[union-attr]
                 not len(second.reconciler.drift.queue))  # type: ignore[union-attr]
        settled = shared_writes()
        # a while later nothing wrote the ConfigMap again: no repair of either shard took
        # it back (without the check, each repair's write queues the other's)
        time.sleep(3)
        assert shared_writes() == settled
        assert live_map(kube, ns, "shared")["data"] == {"writer": one[0]}
    finally:
        kube.close()


def test_the_relabel_pass_never_lists_nor_labels_an_inventory(
        control_plane: ControlPlane) -> None:
    """Inventories carry orksync's label but never a shard label: a Sync's first pass
    (unlabelled only) would otherwise read every root's inventory, and label them when
    its `mine` took one for its own."""
    from orksync.agent.relabel import label_shard
    from orksync.apply.inventory import Inventory

    ns = f"inv-{uuid.uuid4().hex[:8]}"
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    maps = kube.resource("v1", "ConfigMap")
    try:
        kube.create(kube.resource("v1", "Namespace"),
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                    field_manager="orksync-tests")
        kube.apply(maps, Inventory().to_configmap(f"root-{ns}", ns), field_manager="orksync",
                   force=True)
        kube.create(maps, {"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "written-before", "namespace": ns,
                                        "labels": {"app.kubernetes.io/managed-by": "orksync"}}},
                    field_manager="orksync")
        seen: list[ObjRef] = []

        def mine(ref: ObjRef, meta: Any) -> bool:
            if ref.namespace == ns:
                seen.append(ref)
            return ref.namespace == ns

        labelled, failures = label_shard(kube, [("v1", "ConfigMap")], mine, "sync-x",
                                         unlabelled_only=True)
        assert not failures
        assert [r.name for r in seen] == ["written-before"]
        assert [r.name for r in labelled] == ["written-before"]
    finally:
        kube.delete(kube.resource("v1", "Namespace"), "", ns)
        kube.close()
