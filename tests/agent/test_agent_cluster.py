"""The agent as a real process: a git daemon on 127.0.0.1 feeds it, it syncs into the real
control plane, serves /readyz and /metrics, and hands over the lease when killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

import pytest

from orksync.apply.inventory import Inventory
from orksync.cluster.kube import Kube
from testbed.controlplane import ControlPlane
from testbed.gitdaemon import GitDaemon, free_port
from tests.helpers import (
    CRD,
    KATALOG,
    finished_job_status,
    katalog,
    wait_for,
    widget,
    write_repo,
)

pytestmark = pytest.mark.cluster

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]


def commit(repo: Path, message: str) -> None:
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run([*GIT, "commit", "-qm", message], cwd=repo, check=True)



def http_get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
    except OSError:
        return 0, ""


class AgentProcess:
    """`orksync agent` as a process; `interval=None` keeps the default interval, and
    `kubeconfig` replaces the control plane's (a fault proxy's)."""

    def __init__(self, control_plane: ControlPlane, url: str, state: Path, *,
                 interval: float | None = 1, name: str = "default",
                 identity: str | None = None, kubeconfig: Path | None = None,
                 flags: Sequence[str] = ()) -> None:
        self.port = free_port()
        self.log = state / "agent.log"
        state.mkdir(parents=True, exist_ok=True)
        extra = ["--interval", str(interval)] if interval is not None else []
        extra += flags
        if identity:
            extra += ["--identity", identity]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "orksync", "agent", "--repo-url", url, *extra,
             "--state-dir", str(state), "--listen", f"127.0.0.1:{self.port}",
             "--kubeconfig", str(kubeconfig or control_plane.kubeconfig), "--name", name],
            stdout=subprocess.DEVNULL, stderr=self.log.open("w"), start_new_session=True)

    def text(self) -> str:
        return self.log.read_text()

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
        return self.proc.wait(30)


class Hourly(NamedTuple):
    kube: Kube
    ns: str
    agent: AgentProcess
    repo: Path
    name: str  # the agent's --name


@pytest.fixture
def hourly(control_plane: ControlPlane, git_daemon: tuple[Path, str, GitDaemon],
           tmp_path: Path) -> Iterator[Callable[[str, dict[str, dict[str, object]], str],
                                                Hourly]]:
    """Starts an agent whose full syncs are an hour apart (`--resync-interval 3600`: only
    the trigger under test can explain what it does), named `<prefix>-<random>`, on a
    repository of a Katalog, its CRD and Widgets in a fresh namespace (`widgets`: name ->
    spec); stops it after the test."""
    repo, url, _ = git_daemon
    started: list[Hourly] = []

    def start(katalog_text: str, widgets: dict[str, dict[str, object]],
              prefix: str) -> Hourly:
        ns = f"t-{uuid.uuid4().hex[:8]}"
        write_repo(repo, {"katalog.yaml": katalog_text, "crd.yaml": CRD, **{
            f"{name}.yaml": widget(name, ns, **spec) for name, spec in widgets.items()}})
        commit(repo, "first")
        kube = Kube.from_kubeconfig(control_plane.kubeconfig)
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        agent = AgentProcess(control_plane, url, tmp_path / "state", name=name,
                             flags=["--resync-interval", "3600"])
        started.append(Hourly(kube, ns, agent, repo, name))
        return started[-1]

    yield start
    for run in started:
        run.agent.stop(signal.SIGKILL)
        run.kube.close()


def test_the_agent_follows_commits_and_survives_a_broken_commit_and_a_dead_remote(
        control_plane: ControlPlane, git_daemon: tuple[Path, str, GitDaemon],
        tmp_path: Path) -> None:
    repo, url, daemon = git_daemon
    ns = f"t-{uuid.uuid4().hex[:8]}"
    write_repo(repo, {"katalog.yaml": KATALOG, "crd.yaml": CRD,
                      "a.yaml": widget("a", ns, image="nginx")})
    commit(repo, "first")
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    deploys = kube.resource("apps/v1", "Deployment")
    name = f"agent-{uuid.uuid4().hex[:6]}"
    agent = AgentProcess(control_plane, url, tmp_path / "state", name=name)
    try:
        wait_for("the first sync", lambda: kube.get_or_none(deploys, ns, "a") is not None)
        wait_for("readiness", lambda: http_get(agent.port, "/readyz")[0] == 200)

        write_repo(repo, {"b.yaml": widget("b", ns, image="nginx")})
        commit(repo, "add b")
        wait_for("the commit to be applied", lambda: kube.get_or_none(deploys, ns, "b")
                 is not None)

        (repo / "b.yaml").unlink()
        commit(repo, "remove b")
        wait_for("b to be deleted", lambda: kube.get_or_none(
            kube.resource("test.orksync.io/v1", "Widget"), ns, "b") is None)

        write_repo(repo, {"broken.yaml": "apiVersion: v1\nkind: [\n"})
        commit(repo, "broken")
        wait_for("the broken commit to count as a failed sync", lambda: 'orksync_syncs_total'
                 '{result="failure"}' in http_get(agent.port, "/metrics")[1])
        assert "broken.yaml" in agent.text()  # the error names the file
        assert kube.get_or_none(deploys, ns, "a") is not None  # nothing pruned
        status, metrics = http_get(agent.port, "/metrics")
        assert status == 200
        assert 'orksync_syncs_total{result="success"}' in metrics

        (repo / "broken.yaml").unlink()
        commit(repo, "fixed")
        daemon.stop()
        wait_for("the dead remote to be reported",
                 lambda: "last good revision" in http_get(agent.port, "/readyz")[1])
        assert "orksync_source_up 0.0" in http_get(agent.port, "/metrics")[1]
        assert kube.get_or_none(deploys, ns, "a") is not None
        assert agent.stop() == 0
        assert "agent: stopped" in agent.text()
    finally:
        agent.stop(signal.SIGKILL)
        kube.close()


CHILD_GATED = """
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: widgets}
spec:
  crds:
    widget:
      crdFile: ./crd.yaml
      operatorBox:
        onCreate:
          jobs:
            - {name: "{{ .metadata.name }}-build", image: busybox}
        onReconcile:
          configMaps:
            - name: "{{ .metadata.name }}-done"
              when:
                - field: children.job.status.succeeded
                  greaterThan: "0"
"""


def test_a_commit_that_changes_one_custom_resource_syncs_only_it(
        hourly: Callable[[str, dict[str, dict[str, object]], str], Hourly]) -> None:
    """A revision that changes one custom resource's spec renders and applies only that
    custom resource (a scoped sync: the other's objects are not written); one that
    removes a custom resource is a full sync, which prunes it."""
    spec: dict[str, object] = {"image": "nginx:1", "replicas": 1, "port": 80}
    kube, ns, agent, repo, _ = hourly(KATALOG, {"a": spec, "b": spec}, "scoped")
    deploys = kube.resource("apps/v1", "Deployment")

    def image(name: str) -> str:
        live = kube.get_or_none(deploys, ns, name) or {}
        containers = (((live.get("spec") or {}).get("template") or {}).get("spec") or {}
                      ).get("containers") or [{}]
        return str(containers[0].get("image"))

    def version(name: str) -> str:
        return str((kube.get_or_none(deploys, ns, name) or {})["metadata"]["resourceVersion"])

    wait_for("the first sync", lambda: image("b") == "nginx:1")
    wait_for("readiness", lambda: http_get(agent.port, "/readyz")[0] == 200)
    untouched = version("b")
    write_repo(repo, {"a.yaml": widget("a", ns, image="nginx:2", replicas=1, port=80)})
    commit(repo, "a: nginx:2")
    wait_for("a's new image", lambda: image("a") == "nginx:2")
    # its summary is logged once its status is written too, after the apply
    wait_for("the scoped sync's summary", lambda: "scoped sync of 1 custom resource(s)"
             in agent.text())
    assert agent.text().count("sync rev=") == 1  # no full sync after the first
    assert version("b") == untouched

    # a revision that changes no custom resource: nothing to sync, the revision served
    write_repo(repo, {"README.md": "the platform\n"})
    commit(repo, "readme")
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, check=True,
                         capture_output=True, text=True).stdout.strip()
    served = f'orksync_last_applied_revision_info{{revision="{sha}"}} 1.0'
    wait_for("the new revision served",
             lambda: served in http_get(agent.port, "/metrics")[1])
    assert version("b") == untouched and agent.text().count("sync rev=") == 1

    widgets = kube.resource("test.orksync.io/v1", "Widget")
    (repo / "b.yaml").unlink()
    commit(repo, "remove b")
    wait_for("b to be pruned", lambda: kube.get_or_none(widgets, ns, "b") is None)
    # the full sync's summary comes after its prune (inventory and status first)
    wait_for("the full sync's summary", lambda: agent.text().count("sync rev=") >= 2)
    assert agent.text().count("sync rev=") == 2


def test_a_childs_status_change_renders_its_custom_resource_again_without_a_commit(
        hourly: Callable[[str, dict[str, dict[str, object]], str], Hourly]) -> None:
    """The Job's status, watched, renders its custom resource again at once (a scoped
    sync): no full sync runs (an hour's resync interval), and the ConfigMap the condition
    now lets through is created and recorded in the inventory."""
    kube, ns, agent, _, name = hourly(CHILD_GATED, {"a": {}}, "live")
    jobs, maps = kube.resource("batch/v1", "Job"), kube.resource("v1", "ConfigMap")
    wait_for("the Job", lambda: kube.get_or_none(jobs, ns, "a-build") is not None)
    wait_for("readiness", lambda: http_get(agent.port, "/readyz")[0] == 200)
    assert kube.get_or_none(maps, ns, "a-done") is None
    kube.request("PATCH", jobs.path(ns, "a-build", "status"),
                 body={"status": finished_job_status(ok=True)},
                 content_type="application/merge-patch+json")
    wait_for("the gated ConfigMap", lambda: kube.get_or_none(maps, ns, "a-done")
             is not None)
    # the inventory is written after the apply
    wait_for("a-done in the inventory", lambda: "a-done" in {
        ref.name for ref in Inventory.from_configmap(kube.get_or_none(
            maps, "orksync-system", f"orksync-inventory-{name}")).refs()})
    assert agent.text().count("sync rev=") == 1  # the first sync only


CROSS_READER = katalog("""\
        cross:
          - crd: widget
            as: peer
            selector: {name: a}
        onReconcile:
          configMaps:
            - name: "{{ .metadata.name }}-peer"
              data: {phase: "{{ .cross.peer.status.phase }}"}
""")


def test_a_custom_resources_status_change_renders_those_that_cross_read_it_again(
        hourly: Callable[[str, dict[str, dict[str, object]], str], Hourly]) -> None:
    """b cross-reads a's status: a status written on a by someone else (its controller)
    renders b again at once, with no full sync (an hour's resync interval)."""
    kube, ns, agent, _, _ = hourly(CROSS_READER, {"a": {}, "b": {}}, "cross")
    maps = kube.resource("v1", "ConfigMap")

    def phase() -> object:
        return ((kube.get_or_none(maps, ns, "b-peer") or {}).get("data") or {}).get("phase")

    wait_for("b's ConfigMap", lambda: kube.get_or_none(maps, ns, "b-peer") is not None)
    wait_for("readiness", lambda: http_get(agent.port, "/readyz")[0] == 200)
    assert phase() in (None, "")
    widgets = kube.resource("test.orksync.io/v1", "Widget")
    kube.request("PATCH", widgets.path(ns, "a", "status"),
                 body={"status": {"phase": "Ready"}},
                 content_type="application/merge-patch+json")
    wait_for("b rendered with a's status", lambda: phase() == "Ready")
    assert agent.text().count("sync rev=") == 1


CRON_GATED = katalog("""\
        onReconcile:
          configMaps:
            - name: "{{ .metadata.name }}-base"
            - name: "{{ .metadata.name }}-window"
              when:
                - cron: "* * * * *"
                  duration: 30s
""")


def test_a_cron_window_is_acted_on_at_its_edges_without_a_full_sync(
        hourly: Callable[[str, dict[str, dict[str, object]], str], Hourly]) -> None:
    """A ConfigMap open for the first 30 s of every minute: created when its window
    opens and deleted when it closes, each at the edge (a time trigger), with no full sync
    (an hour's resync interval)."""
    kube, ns, agent, _, _ = hourly(CRON_GATED, {"a": {}}, "cron")
    maps = kube.resource("v1", "ConfigMap")

    def present() -> bool:
        return kube.get_or_none(maps, ns, "a-window") is not None

    wait_for("the first sync", lambda: "sync rev=" in agent.text())
    wait_for("readiness", lambda: http_get(agent.port, "/readyz")[0] == 200)
    first = present()
    wait_for("the window's next edge", lambda: present() != first, 45)
    wait_for("the edge after it", lambda: present() == first, 45)
    assert agent.text().count("sync rev=") == 1
