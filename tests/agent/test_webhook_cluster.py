"""`POST /hooks/git` on real agent processes polling once an hour: a valid hook makes the
leader fetch and sync at once, also when it reaches a standby or comes during a sync; a
hook that does not prove the secret is refused and nothing is fetched."""

from __future__ import annotations

import hashlib
import hmac
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from orksync.cluster.kube import Kube
from testbed.controlplane import ControlPlane
from testbed.gitdaemon import GitDaemon
from tests.agent.test_agent_cluster import AgentProcess, commit, http_get
from tests.agent.test_leader_cluster import LONG_ON_DELETE
from tests.helpers import CRD, finished_job_status, wait_for, widget, write_repo

pytestmark = pytest.mark.cluster

SECRET = b"a webhook secret for the test"
BODY = b'{"ref": "refs/heads/main"}'


def post_hook(port: int, *, signature: str) -> tuple[int, str]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/hooks/git", data=BODY, method="POST",
        headers={"X-Hub-Signature-256": signature, "X-GitHub-Event": "push",
                 "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def signed(body: bytes = BODY, secret: bytes = SECRET) -> str:
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def head(repo: Path) -> str:
    return subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], cwd=repo, check=True,
                          capture_output=True, text=True).stdout.strip()


def fetches(agent: AgentProcess) -> int:
    found = re.search(r"^orksync_git_fetch_duration_seconds_count ([0-9.e+]+)$",
                      http_get(agent.port, "/metrics")[1], re.M)
    return int(float(found.group(1))) if found else 0


def test_a_valid_webhook_syncs_at_once_through_leader_or_standby_and_a_forged_one_is_refused(
        control_plane: ControlPlane, git_daemon: tuple[Path, str, GitDaemon],
        tmp_path: Path) -> None:
    repo, url, _ = git_daemon
    ns, name = f"t-{uuid.uuid4().hex[:8]}", f"hook-{uuid.uuid4().hex[:6]}"
    secret_file = tmp_path / "webhook-secret"
    secret_file.write_bytes(SECRET + b"\n")
    flags = ["--webhook-secret-file", str(secret_file)]
    write_repo(repo, {"katalog.yaml": LONG_ON_DELETE, "crd.yaml": CRD,
                      "a.yaml": widget("a", ns)})
    commit(repo, "a")
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    maps, jobs = kube.resource("v1", "ConfigMap"), kube.resource("batch/v1", "Job")

    def config(widget_name: str) -> bool:
        return kube.get_or_none(maps, ns, f"{widget_name}-config") is not None
    agents: list[AgentProcess] = []
    try:
        leader = AgentProcess(control_plane, url, tmp_path / "one", interval=3600, name=name,
                              flags=flags)
        agents.append(leader)
        wait_for("the first sync", lambda: "sync rev=" in leader.text(), 120)
        write_repo(repo, {"b.yaml": widget("b", ns)})
        commit(repo, "b")
        before = fetches(leader)
        assert before == 1
        for forged in (signed(secret=b"another secret"), signed(body=b"{}"), "sha256=00"):
            assert post_hook(leader.port, signature=forged)[0] == 401
        time.sleep(3)  # what a forged hook would have set off has had time to start
        assert fetches(leader) == before
        assert not config("b")
        assert "refused: signature does not match" in leader.text()

        assert post_hook(leader.port, signature=signed()) == (202, "fetch requested\n")
        wait_for("b, applied by the hook's sync", lambda: config("b"), 60)

        standby = AgentProcess(control_plane, url, tmp_path / "two", interval=3600,
                               name=name, flags=flags)
        agents.append(standby)
        wait_for("the standby", lambda: "a standby" in standby.text(), 60)
        write_repo(repo, {"c.yaml": widget("c", ns)})
        commit(repo, "c")
        status, text = post_hook(standby.port, signature=signed())
        assert (status, text) == (202, "fetch requested from the leader\n")
        wait_for("c, applied by the leader", lambda: config("c"), 60)
        # c's objects exist before its sync logs its summary: counted once it has
        wait_for("c's sync summary", lambda: f"sync rev={head(repo)}" in leader.text(), 60)
        assert "sync rev=" not in standby.text()

        # a hook during a sync: the sync that tears a down waits for its onDelete Job
        syncs = leader.text().count("sync rev=")
        (repo / "a.yaml").unlink()
        commit(repo, "remove a")
        assert post_hook(leader.port, signature=signed())[0] == 202
        wait_for("a's onDelete Job", lambda: kube.get_or_none(jobs, ns, "a-cleanup")
                 is not None, 60)
        write_repo(repo, {"d.yaml": widget("d", ns)})
        commit(repo, "d")
        assert post_hook(leader.port, signature=signed())[0] == 202
        kube.request("PATCH", jobs.path(ns, "a-cleanup", "status"),
                     body={"status": finished_job_status(ok=True)},
                     content_type="application/merge-patch+json")
        wait_for("d, applied by the sync right after", lambda: config("d"), 60)
        wait_for("d's sync summary", lambda: f"sync rev={head(repo)}" in leader.text(), 60)
        assert leader.text().count("sync rev=") == syncs + 2
        assert 'orksync_webhooks_total{result="refused"} 3.0' in http_get(
            leader.port, "/metrics")[1]
    finally:
        for agent in agents:
            agent.stop(signal.SIGKILL)
        kube.close()
