"""Notifications from a real agent process syncing into the real control plane: a fake
GitHub on 127.0.0.1 (tests/agent/test_notify.py's) receives the commit status of each revision
(pending, then success; pending, then failure naming the file for a broken commit), while
the webhook alert's endpoint hangs the whole time: the agent's syncs go on regardless
(counted in requests seen, not in time)."""

from __future__ import annotations

import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from orksync.cluster.kube import Kube
from testbed.controlplane import ControlPlane
from testbed.gitdaemon import GitDaemon
from tests.agent.test_agent_cluster import AgentProcess, commit, http_get
from tests.agent.test_notify import TOKEN, Fake, serve_fake
from tests.helpers import CRD, KATALOG, wait_for, widget, write_repo

pytestmark = pytest.mark.cluster


@pytest.fixture
def fake() -> Iterator[Fake]:
    with serve_fake() as state:
        yield state


@pytest.fixture
def hanging() -> Iterator[Fake]:
    """A fake that takes each request and answers none until the test lets it go."""
    with serve_fake() as state:
        state.hold.clear()
        yield state


def head(repo: Path) -> str:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, check=True,
                          capture_output=True, text=True).stdout.strip()


def test_the_agent_posts_each_revisions_status_and_a_hanging_alert_holds_no_sync(
        control_plane: ControlPlane, fake: Fake, hanging: Fake, tmp_path: Path) -> None:
    base = tmp_path / "served"
    repo = base / "platform"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    ns = f"t-{uuid.uuid4().hex[:8]}"
    write_repo(repo, {"katalog.yaml": KATALOG, "crd.yaml": CRD,
                      "a.yaml": widget("a", ns, image="nginx")})
    commit(repo, "first")
    first = head(repo)
    token = tmp_path / "token"
    token.write_text(TOKEN)
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    deploys = kube.resource("apps/v1", "Deployment")
    with GitDaemon(base) as daemon:
        agent = AgentProcess(control_plane, daemon.url("platform"), tmp_path / "state",
                             name=f"notify-{uuid.uuid4().hex[:6]}", flags=[
                                 "--notify-commit-status", "github",
                                 "--notify-api-url", fake.url, "--notify-repo", "acme/platform",
                                 "--notify-token-file", str(token),
                                 "--notify-webhook-url", hanging.url + "/alert",
                                 # the held request stays held until the test lets it go
                                 "--notify-timeout", "600"])
        try:
            pending, success = fake.wait_requests(2)
            assert kube.get_or_none(deploys, ns, "a") is not None
            for request, state in ((pending, "pending"), (success, "success")):
                assert request["path"] == f"/repos/acme/platform/statuses/{first}"
                assert request["headers"]["Authorization"] == f"Bearer {TOKEN}"
                assert request["body"]["state"] == state, request["body"]
                assert request["body"]["context"].startswith("orksync/notify-")

            write_repo(repo, {"broken.yaml": "apiVersion: v1\nkind: [\n"})
            commit(repo, "broken")
            broken = head(repo)
            pending, failure = fake.wait_requests(2)[2:]
            assert pending["path"] == failure["path"] == \
                f"/repos/acme/platform/statuses/{broken}"
            assert (pending["body"]["state"], failure["body"]["state"]) == ("pending",
                                                                            "failure")
            assert "broken.yaml" in failure["body"]["description"], failure["body"]
            assert kube.get_or_none(deploys, ns, "a") is not None  # nothing pruned

            # the alert's endpoint took the first alert and never answered: the agent
            # synced a second revision meanwhile, and holds the rest in its queue
            assert len(hanging.requests) == 1
            assert hanging.requests[0]["body"]["state"] == "success"
            wait_for("the four statuses counted", lambda: 'orksync_notifications_total{'
                     'result="sent",sink="commit-status"} 4.0' in http_get(agent.port,
                                                                           "/metrics")[1])
            assert TOKEN not in agent.text()
            hanging.hold.set()
            wait_for("the held alert and the failure's to go out",
                     lambda: len(hanging.requests) == 2)
            assert hanging.requests[1]["body"]["state"] == "failure"
        finally:
            agent.stop(signal.SIGKILL)
            kube.close()
