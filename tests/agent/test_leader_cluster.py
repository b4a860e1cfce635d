"""Leader election between real `orksync agent` processes with the default flags (interval
60 s, lease 15 s, renew deadline 10 s, retry period 2 s), judged by the API server's audit
log: each write names its replica in its User-Agent, so the log shows who wrote when. The
takeover's upper bound (lease duration + retry period after the last renewal) depends on
when threads get to run, so it is proven on a simulated clock (tests/agent/test_lease.py); here
the standby must take over at all, and never before it saw the Lease silent for the lease
duration."""

from __future__ import annotations

import json
import re
import signal
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from orksync.cluster.kube import Kube
from testbed.controlplane import ControlPlane
from testbed.faultproxy import TcpFaultProxy
from testbed.gitdaemon import GitDaemon
from tests.agent.test_agent_cluster import AgentProcess, commit
from tests.helpers import CRD, finished_job_status, katalog, wait_for, widget, write_repo

pytestmark = pytest.mark.cluster

LEASE_DURATION, RETRY_PERIOD = 15.0, 2.0  # the defaults
# an onDelete Job that nobody runs (no kubelet): the teardown waits for it until the test
# writes its status, so the leader's sync lasts as long as the test wants
LONG_ON_DELETE = katalog("""\
        onCreate:
          configMaps: [{name: "{{ .metadata.name }}-config", data: {a: "1"}}]
        onDelete:
          timeout: 10m
          jobs: [{name: "{{ .metadata.name }}-cleanup", image: busybox}]
""")


def writes_by(audit_log: Path, identity: str) -> list[dict[str, Any]]:
    """The audit events of every write (create, update, patch, delete) the agent with this
    identity sent, in the order the API server received them."""
    found = []
    for line in audit_log.read_text().splitlines():
        event = json.loads(line)
        if f"(agent {identity})" in event.get("userAgent", "") and \
                event.get("stage") == "ResponseComplete":
            found.append(event)
    return sorted(found, key=lambda e: e["requestReceivedTimestamp"])


def at(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def lease_writes(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if (e.get("objectRef") or {}).get("resource") == "leases"]


def test_two_agents_never_write_at_once_and_the_standby_takes_over_after_a_full_lease(
        control_plane: ControlPlane, git_daemon: tuple[Path, str, GitDaemon],
        tmp_path: Path) -> None:
    """The leader's sync runs far longer than the lease (a teardown waiting 70 s for its
    onDelete Job) while a standby runs beside it; then the leader is killed."""
    assert control_plane.audit_log is not None
    repo, url, _ = git_daemon
    ns, name, tag = f"t-{uuid.uuid4().hex[:8]}", f"le-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex[:6]
    one, two = f"one-{tag}", f"two-{tag}"
    write_repo(repo, {"katalog.yaml": LONG_ON_DELETE, "crd.yaml": CRD,
                      "a.yaml": widget("a", ns), "b.yaml": widget("b", ns)})
    commit(repo, "a and b")
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    maps, jobs = kube.resource("v1", "ConfigMap"), kube.resource("batch/v1", "Job")
    agents: list[AgentProcess] = []
    try:
        # the first process syncs a and b, then stops (releasing the lease)
        agents.append(AgentProcess(control_plane, url, tmp_path / "first", interval=None,
                                   name=name, identity=one))
        wait_for("a's and b's ConfigMaps", lambda: all(
            kube.get_or_none(maps, ns, f"{w}-config") is not None for w in "ab"), 120)
        wait_for("the first sync's summary", lambda: "sync rev=" in agents[0].text(), 60)
        assert agents[0].stop() == 0
        (repo / "a.yaml").unlink()
        commit(repo, "remove a")
        # the leader's first sync tears a down and waits for its onDelete Job
        leader = AgentProcess(control_plane, url, tmp_path / "one", interval=None,
                              name=name, identity=one)
        agents.append(leader)
        wait_for("the onDelete Job", lambda: kube.get_or_none(jobs, ns, "a-cleanup")
                 is not None, 60)
        standby = AgentProcess(control_plane, url, tmp_path / "two", interval=None,
                               name=name, identity=two)
        agents.append(standby)
        wait_for("the standby to start", lambda: "a standby" in standby.text(), 60)
        # longer than the interval plus the lease: the old agent's standby took over here
        time.sleep(75)
        assert "now the leader" not in standby.text()
        assert writes_by(control_plane.audit_log, two) == []
        kube.request("PATCH", jobs.path(ns, "a-cleanup", "status"),
                     body={"status": finished_job_status(ok=True)},
                     content_type="application/merge-patch+json")
        wait_for("the leader's long sync to end", lambda: "sync rev=" in leader.text(), 60)
        leader.stop(signal.SIGKILL)
        wait_for("the standby's first write", lambda: writes_by(
            control_plane.audit_log, two) != [], LEASE_DURATION + RETRY_PERIOD + 60)
        wait_for("the new leader's sync", lambda: "sync rev=" in standby.text(), 60)
    finally:
        for agent in agents:
            agent.stop(signal.SIGKILL)
        kube.close()

    mine, theirs = writes_by(control_plane.audit_log, one), writes_by(control_plane.audit_log,
                                                                        two)
    assert lease_writes(mine) and lease_writes(theirs)
    assert any((e.get("objectRef") or {}).get("resource") == "jobs" for e in mine)
    last_of_one = max(at(e["stageTimestamp"]) for e in mine)
    first_of_two = min(at(e["requestReceivedTimestamp"]) for e in theirs)
    # no moment at which both wrote: every write of the killed leader ended before the
    # standby's first one arrived
    assert last_of_one < first_of_two
    # and the standby's first write is its takeover of the Lease, after a full lease of
    # silence by its own clock (a busy machine can only make that longer)
    assert lease_writes(theirs)[0] is theirs[0]
    silence = re.search(r"takes over the lease \S+ from \S+ \(unchanged for ([0-9.]+)s\)",
                        standby.text())
    assert silence is not None and float(silence.group(1)) >= LEASE_DURATION, standby.text()


def test_a_leader_cut_off_from_the_api_server_abandons_its_work_and_never_writes_again(
        control_plane: ControlPlane, git_daemon: tuple[Path, str, GitDaemon],
        tmp_path: Path) -> None:
    """The leader reaches the API server through a relay that then holds every connection
    without relaying a byte: its renewals time out, its gate closes at the renew deadline,
    the teardown waiting for its Job is abandoned at its next request, and once the relay
    passes traffic again it stays a standby of the new leader."""
    assert control_plane.audit_log is not None
    repo, url, _ = git_daemon
    ns, name, tag = f"t-{uuid.uuid4().hex[:8]}", f"cut-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex[:6]
    one, two = f"one-{tag}", f"two-{tag}"
    write_repo(repo, {"katalog.yaml": LONG_ON_DELETE, "crd.yaml": CRD,
                      "a.yaml": widget("a", ns)})
    commit(repo, "a")
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    maps, jobs = kube.resource("v1", "ConfigMap"), kube.resource("batch/v1", "Job")
    agents: list[AgentProcess] = []
    with TcpFaultProxy.for_control_plane(control_plane) as relay:
        relayed = relay.kubeconfig(tmp_path / "relayed.kubeconfig")
        try:
            agents.append(AgentProcess(control_plane, url, tmp_path / "first", interval=None,
                                       name=name, identity=one, kubeconfig=relayed))
            wait_for("a's ConfigMap", lambda: kube.get_or_none(maps, ns, "a-config")
                     is not None, 120)
            wait_for("the first sync's summary", lambda: "sync rev=" in agents[0].text(), 60)
            assert agents[0].stop() == 0
            (repo / "a.yaml").unlink()
            commit(repo, "remove a")
            leader = AgentProcess(control_plane, url, tmp_path / "one", interval=None,
                                  name=name, identity=one, kubeconfig=relayed)
            agents.append(leader)
            wait_for("the onDelete Job", lambda: kube.get_or_none(jobs, ns, "a-cleanup")
                     is not None, 60)
            standby = AgentProcess(control_plane, url, tmp_path / "two", interval=None,
                                   name=name, identity=two)
            agents.append(standby)
            wait_for("the standby to start", lambda: "a standby" in standby.text(), 60)
            relay.stall(connections=10_000)
            relay.cut_all()
            # the teardown waiting for its Job (in the work queue since the full sync
            # started it) stops at its next request
            wait_for("the teardown to be abandoned", lambda: "abandoned" in leader.text(), 60)
            wait_for("the standby to take over", lambda: "now the leader" in standby.text(),
                     60)
            relay.clear()
            kube.request("PATCH", jobs.path(ns, "a-cleanup", "status"),
                         body={"status": finished_job_status(ok=True)},
                         content_type="application/merge-patch+json")
            wait_for("the new leader's sync", lambda: "sync rev=" in standby.text(), 120)
            wait_for("the old leader to see the new one", lambda: leader.text().count(
                "a standby") >= 1, 30)
            time.sleep(2 * RETRY_PERIOD)  # a few of its tries, back in touch
        finally:
            for agent in agents:
                agent.stop(signal.SIGKILL)
            kube.close()
    mine, theirs = writes_by(control_plane.audit_log, one), writes_by(control_plane.audit_log,
                                                                        two)
    assert mine and theirs
    assert max(at(e["stageTimestamp"]) for e in mine) < \
        min(at(e["requestReceivedTimestamp"]) for e in theirs)
