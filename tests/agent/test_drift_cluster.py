"""Drift repair by the agent (orksync.agent.drift) on the real control plane, with an
interval of an hour (no poll could repair anything): a hand edit and a hand delete are
repaired, the agent's own writes trigger nothing more (its writes counted in the audit
log), a watch cut by the fault proxy resumes without missing the edit made while it was
cut, and a custom resource whose onDelete Job never finishes delays no other's repair."""

from __future__ import annotations

import signal
import uuid
from pathlib import Path
from typing import Any

import pytest

from orksync.cluster.kube import Kube
from testbed.controlplane import ControlPlane
from testbed.faultproxy import TcpFaultProxy
from testbed.gitdaemon import GitDaemon
from tests.agent.test_agent_cluster import AgentProcess, commit, http_get
from tests.helpers import (
    CRD,
    configmap_writes,
    finished_job_status,
    katalog,
    wait_for,
    widget,
    write_repo,
)

pytestmark = pytest.mark.cluster

KATALOG = katalog("""\
        onReconcile:
          configMaps:
            - name: "{{ .metadata.name }}-one"
              data: {colour: blue}
            - name: "{{ .metadata.name }}-two"
              data: {size: large}
        onDelete:
          timeout: 900s
          jobs:
            - name: "{{ .metadata.name }}-cleanup"
              image: busybox
""")


def agent_writes(audit_log: Path, identity: str, namespace: str) -> list[tuple[str, str]]:
    """(verb, name) of every ConfigMap write the agent made in the namespace."""
    return [(verb, name) for verb, name, _ in configmap_writes(audit_log, identity, namespace)]


def colour(kube: Kube, ns: str, name: str) -> Any:
    live = kube.get_or_none(kube.resource("v1", "ConfigMap"), ns, name)
    return None if live is None else (live.get("data") or {}).get("colour")


def edit(kube: Kube, ns: str, name: str) -> None:
    kube.request("PATCH", kube.resource("v1", "ConfigMap").path(ns, name),
                 body={"data": {"colour": "red"}}, content_type="application/merge-patch+json")


def ready(agent: AgentProcess) -> bool:
    """Synced once as the leader, and the watches listed (a replica that has not tried
    for the lease yet is a ready standby)."""
    return "sync rev=" in agent.text() and http_get(agent.port, "/readyz") == (200, "ok\n")


def metric(port: int, line: str) -> float:
    for text in http_get(port, "/metrics")[1].splitlines():
        if text.startswith(line + " "):
            return float(text.split()[-1])
    return 0.0


@pytest.fixture
def served(control_plane: ControlPlane,
           git_daemon: tuple[Path, str, GitDaemon]) -> Any:
    """Widgets a and b committed to a served repository: (kube, namespace, url, repo)."""
    repo, url, _ = git_daemon
    ns = f"d-{uuid.uuid4().hex[:8]}"
    write_repo(repo, {"katalog.yaml": KATALOG, "crd.yaml": CRD, "a.yaml": widget("a", ns),
                      "b.yaml": widget("b", ns)})
    commit(repo, "first")
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    yield kube, ns, url, repo
    kube.close()


@pytest.fixture
def setup(served: Any) -> Any:
    kube, ns, url, _ = served
    return kube, ns, url


def test_a_hand_edit_and_a_hand_delete_are_repaired_without_a_poll_nor_a_loop(
        control_plane: ControlPlane, setup: Any, tmp_path: Path) -> None:
    kube, ns, url = setup
    assert control_plane.audit_log is not None
    identity = f"drift-{uuid.uuid4().hex[:6]}"
    agent = AgentProcess(control_plane, url, tmp_path / "state", interval=3600,
                         name=identity, identity=identity)
    maps = kube.resource("v1", "ConfigMap")
    try:
        wait_for("readiness (synced, watches listed)", lambda: ready(agent))
        first = agent_writes(control_plane.audit_log, identity, ns)
        assert sorted(name for _, name in first) == ["a-one", "a-two", "b-one", "b-two"]

        edit(kube, ns, "a-one")
        kube.delete(maps, ns, "a-two")
        wait_for("the edit repaired", lambda: colour(kube, ns, "a-one") == "blue")
        wait_for("the delete repaired", lambda: kube.get_or_none(maps, ns, "a-two") is not None)
        # a later repair of another custom resource: by the time it is done, a loop of
        # re-applies set off by the first repair's own writes would have shown
        edit(kube, ns, "b-one")
        wait_for("the second edit repaired", lambda: colour(kube, ns, "b-one") == "blue")
        wait_for("the audit of the repairs", lambda: len(
            agent_writes(control_plane.audit_log, identity, ns)) >= len(first) + 3)
        repairs = agent_writes(control_plane.audit_log, identity, ns)[len(first):]
        assert sorted(name for _, name in repairs) == ["a-one", "a-two", "b-one"]
        assert agent.text().count("sync rev=") == 1  # the start's sync only: no poll
        assert metric(agent.port, 'orksync_reconcile_duration_seconds_count{trigger="drift"}') \
            >= 2
        assert metric(agent.port, "orksync_queue_depth") == 0
    finally:
        agent.stop(signal.SIGKILL)


def test_a_watch_cut_by_the_proxy_resumes_and_repairs_the_edit_made_while_it_was_cut(
        control_plane: ControlPlane, setup: Any, tmp_path: Path) -> None:
    kube, ns, url = setup
    with TcpFaultProxy.for_control_plane(control_plane) as relay:
        # no lease: a leader whose renewals fail would resync everything on its return,
        # which would repair the edit without the watch
        agent = AgentProcess(control_plane, url, tmp_path / "state", interval=3600,
                             name=f"cut-{uuid.uuid4().hex[:6]}",
                             kubeconfig=relay.kubeconfig(tmp_path / "kubeconfig"),
                             flags=["--no-leader-elect"])
        try:
            wait_for("readiness", lambda: ready(agent))
            relay.refuse()
            relay.cut_all()  # every watch is cut, and cannot connect again
            wait_for("the watches to notice", lambda: metric(
                agent.port, 'orksync_watch_restarts_total{reason="error"}') >= 1)
            edit(kube, ns, "a-one")
            assert colour(kube, ns, "a-one") == "red"
            relay.resume()
            wait_for("the edit repaired", lambda: colour(kube, ns, "a-one") == "blue")
            assert agent.text().count("sync rev=") == 1
        finally:
            agent.stop(signal.SIGKILL)


def test_a_stuck_on_delete_job_delays_no_other_custom_resources_repair(
        control_plane: ControlPlane, setup: Any, tmp_path: Path) -> None:
    kube, ns, url = setup
    agent = AgentProcess(control_plane, url, tmp_path / "state", interval=3600,
                         name=f"stuck-{uuid.uuid4().hex[:6]}")
    widgets, jobs = kube.resource("test.orksync.io/v1", "Widget"), kube.resource(
        "batch/v1", "Job")
    try:
        wait_for("readiness", lambda: ready(agent))
        kube.delete(widgets, ns, "a")  # its onDelete Job never finishes (no kubelet here)
        wait_for("a's onDelete Job", lambda: kube.get_or_none(jobs, ns, "a-cleanup")
                 is not None)
        edit(kube, ns, "b-one")
        wait_for("b's edit repaired", lambda: colour(kube, ns, "b-one") == "blue")
        live = kube.get_or_none(widgets, ns, "a")
        assert live is not None and live["metadata"].get("deletionTimestamp")  # still waiting
    finally:
        agent.stop(signal.SIGKILL)


def test_a_standby_keeps_its_view_warm_writes_nothing_and_repairs_once_it_leads(
        control_plane: ControlPlane, setup: Any, tmp_path: Path) -> None:
    kube, ns, url = setup
    assert control_plane.audit_log is not None
    name, tag = f"sb-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex[:6]
    one, two = f"one-{tag}", f"two-{tag}"
    leader = AgentProcess(control_plane, url, tmp_path / "one", interval=3600, name=name,
                          identity=one)
    standby: AgentProcess | None = None
    try:
        wait_for("the leader's sync", lambda: ready(leader))
        standby = AgentProcess(control_plane, url, tmp_path / "two", interval=3600, name=name,
                               identity=two)
        wait_for("the standby's view", lambda: "a standby" in standby.text() and metric(
            standby.port, "orksync_view_objects") >= 7)  # CRD, 2 Widgets, 4 ConfigMaps
        edit(kube, ns, "a-one")
        wait_for("the leader's repair", lambda: colour(kube, ns, "a-one") == "blue")
        assert agent_writes(control_plane.audit_log, two, ns) == []  # a standby only watches
        leader.stop(signal.SIGKILL)
        wait_for("the takeover's sync", lambda: "sync rev=" in standby.text(), 120)
        edit(kube, ns, "b-one")
        wait_for("the new leader's repair", lambda: colour(kube, ns, "b-one") == "blue")
        assert ("patch", "b-one") in agent_writes(control_plane.audit_log, two, ns)
        # the view it kept: no watch had to list again or reconnect
        assert metric(standby.port, 'orksync_watch_restarts_total{reason="gone"}') == 0
        assert metric(standby.port, 'orksync_watch_restarts_total{reason="error"}') == 0
    finally:
        leader.stop(signal.SIGKILL)
        if standby is not None:
            standby.stop(signal.SIGKILL)


def test_a_custom_resource_leaving_git_with_a_stuck_on_delete_job_delays_no_other(
        control_plane: ControlPlane, served: Any, tmp_path: Path) -> None:
    """The full sync that removes a from Git starts its teardown and ends without waiting
    for its onDelete Job (a success, not a failure); a commit changing b is synced
    meanwhile; the work queue finishes a's teardown once the Job completes."""
    kube, ns, url, repo = served
    jobs = kube.resource("batch/v1", "Job")
    agent = AgentProcess(control_plane, url, tmp_path / "state", interval=1,
                         name=f"leave-{uuid.uuid4().hex[:6]}",
                         flags=["--resync-interval", "3600"])
    try:
        wait_for("readiness", lambda: ready(agent))
        widgets = kube.resource("test.orksync.io/v1", "Widget")
        (repo / "a.yaml").unlink()
        commit(repo, "remove a")
        wait_for("a's onDelete Job", lambda: kube.get_or_none(jobs, ns, "a-cleanup")
                 is not None)
        write_repo(repo, {"b.yaml": widget("b", ns, tier="gold")})
        commit(repo, "b: gold")
        wait_for("b's change", lambda: ((kube.get_or_none(widgets, ns, "b") or {}).get(
            "spec") or {}).get("tier") == "gold")
        live = kube.get_or_none(widgets, ns, "a")
        assert live is not None and live["metadata"].get("deletionTimestamp")  # still waiting
        assert 'orksync_syncs_total{result="failure"}' not in http_get(agent.port,
                                                                        "/metrics")[1]
        kube.request("PATCH", jobs.path(ns, "a-cleanup", "status"),
                     body={"status": finished_job_status(ok=True)},
                     content_type="application/merge-patch+json")
        wait_for("a's teardown finished", lambda: kube.get_or_none(widgets, ns, "a") is None)
    finally:
        agent.stop(signal.SIGKILL)
