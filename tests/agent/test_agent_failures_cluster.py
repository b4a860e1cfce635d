"""How the agent fails (issue 30, items 7, 8 and 9), in process, on the real control
plane and a real `git daemon`: a failed sync reaches the root's and the custom resources'
status, the metrics and /readyz; a refused sync is a failed one; a new revision ends a
backoff; a refusal that cannot succeed says Stalled and is logged once; what does not fit
its CRD's schema is never sent; an outage is logged when it begins and when it ends."""

# ruff: noqa: F811  (the fixtures of tests.sync.test_faults_cluster, imported by name)
from __future__ import annotations

import logging
import uuid
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from orksync.agent.config import AgentConfig
from orksync.agent.failure import MESSAGE_ANNOTATION, RESULT_ANNOTATION, REVISION_ANNOTATION
from orksync.agent.lease import LeaderElector
from orksync.agent.runner import Agent
from orksync.apply.inventory import configmap_name
from orksync.cluster.kube import Kube, RetryPolicy
from orksync.lifecycle.overview import read_rows
from orksync.model import Source
from orksync.sync import SyncOptions, SyncRequest, read_inventory, sync_once
from testbed.faultproxy import TcpFaultProxy
from tests.helpers import crd
from tests.source.test_git_source import GitDaemon, Upstream
from tests.sync.test_faults_cluster import (  # noqa: F401 (fixtures)
    KATALOG,
    World,
    kube,
    ns,
    publish,
    relay,
    relayed,
    served,
)

pytestmark = pytest.mark.cluster

Served = tuple[Upstream, GitDaemon]


def agent_for(kube: Kube, daemon: GitDaemon, name: str, state: Path) -> Agent:
    """An agent whose backoff after a failure is two hours (interval 3600 s x 2): only a
    new revision (or a webhook) can explain a sync that follows a failure soon."""
    config = AgentConfig(repo_url=daemon.url(), state_dir=state, leader_elect=False,
                         name=name, interval=3600)
    return Agent(config, kube)


def metric(agent: Agent, line: str) -> bool:
    return line in generate_latest(agent.metrics.registry).decode()


def root_annotations(kube: Kube, name: str) -> dict[str, str]:
    cm = kube.get(kube.resource("v1", "ConfigMap"), "orksync-system", configmap_name(name))
    return dict(cm["metadata"].get("annotations") or {})


def ready_condition(kube: Kube, ns: str, name: str) -> dict[str, str]:
    live = kube.get(kube.resource("test.orksync.io/v1", "Widget"), ns, name)
    return next(c for c in live["status"]["conditions"] if c["type"] == "Ready")


BROKEN = {  # what a commit breaks, and the file its errors name
    "malformed YAML": ({"broken.yaml": "apiVersion: v1\nkind: [\n"}, "broken.yaml:"),
    "an unknown Katalog key": ({"katalog.yaml": KATALOG.replace(
        "      operatorBox:\n", "      operatorBox:\n        bogusKey: 1\n", 1)},
        "katalog.yaml:"),
}


@pytest.mark.parametrize("what", list(BROKEN))
def test_a_commit_that_does_not_load_is_reported_everywhere_and_its_fix_ends_the_backoff(
        kube: Kube, tmp_path: Path, ns: str, served: Served, what: str) -> None:
    breaking, named = BROKEN[what]
    upstream, daemon = served
    w = World(tmp_path / "mirror", ns).put("a").put("b")
    publish(upstream, w, "two widgets")
    agent = agent_for(kube, daemon, w.name, tmp_path / "state")
    agent.sync_job()
    assert agent.state.failures == 0 and agent.ready() == (True, "ok")
    assert root_annotations(kube, w.name)[RESULT_ANNOTATION] == "Succeeded"

    before = {name: (upstream.work / name).read_text() if (upstream.work / name).exists()
              else None for name in breaking}
    broken = upstream.commit(dict(breaking), "broken")
    agent.sync_job()
    assert agent.state.failures == 1
    ok, why = agent.ready()
    assert ok and why.startswith("failing: ") and named in why, why
    assert metric(agent, 'orksync_syncs_total{result="failure"} 1.0')
    assert metric(agent, "orksync_sync_failing 1.0")
    root = root_annotations(kube, w.name)
    assert root[RESULT_ANNOTATION] == "Failed" and root[REVISION_ANNOTATION] == broken
    assert named in root[MESSAGE_ANNOTATION]
    for name in ("a", "b"):  # each custom resource of the root
        cond = ready_condition(kube, ns, name)
        assert cond["status"] == "False" and cond["reason"] == "SyncFailed"
        assert broken[:12] in cond["message"] and named in cond["message"], cond
    rows = {row.ref.name: row for row in read_rows(kube, "orksync-system", [w.name])
            if row.ref.kind == "Widget"}  # what `orksync status` shows
    assert sorted(rows) == ["a", "b"]
    for row in rows.values():
        assert row.ready == "False" and named in row.message, row

    agent.sync_job()  # the same revision, in its backoff: no attempt
    assert agent.state.failures == 1

    fixed = upstream.commit(before, "fixed")
    agent.sync_job()  # a new revision ends the two-hour backoff at once
    assert agent.state.failures == 0 and agent.state.revision is not None
    assert agent.state.revision.sha == fixed
    assert agent.ready() == (True, "ok") and metric(agent, "orksync_sync_failing 0.0")
    assert root_annotations(kube, w.name)[RESULT_ANNOTATION] == "Succeeded"
    assert ready_condition(kube, ns, "a")["reason"] != "SyncFailed"  # written again


def test_a_commit_that_deletes_every_file_is_a_stalled_failed_sync(
        kube: Kube, tmp_path: Path, ns: str, served: Served) -> None:
    upstream, daemon = served
    w = World(tmp_path / "mirror", ns).put("a")
    publish(upstream, w, "one widget")
    agent = agent_for(kube, daemon, w.name, tmp_path / "state")
    agent.sync_job()
    stored = read_inventory(kube, w.name)
    upstream.commit({p.name: None for p in upstream.work.glob("*.yaml")}, "everything gone")
    agent.sync_job()
    assert agent.state.failures == 1  # counted a failure: it backs off
    assert metric(agent, 'orksync_syncs_total{result="failure"} 1.0')
    assert metric(agent, "orksync_sync_stalled 1.0")
    ok, why = agent.ready()
    assert ok and why.startswith("stalled: ") and "--allow-empty" in why, why
    assert root_annotations(kube, w.name)[RESULT_ANNOTATION] == "Stalled"
    assert read_inventory(kube, w.name) == stored  # nothing pruned


def test_an_inventory_of_another_source_stalls_is_logged_once_and_left_unmarked(
        kube: Kube, tmp_path: Path, ns: str, served: Served,
        caplog: pytest.LogCaptureFixture) -> None:
    upstream, daemon = served
    w = World(tmp_path / "mirror", ns).put("a")
    _, rendered = w.render()
    sync_once(kube, SyncRequest(rendered, inventory_name=w.name, options=SyncOptions(),
                                source=Source.of("/elsewhere")))  # another source's inventory
    publish(upstream, w, "one widget")
    agent = agent_for(kube, daemon, w.name, tmp_path / "state")
    with caplog.at_level(logging.INFO, logger="orksync"):
        agent.sync_job()
        agent._sync_now()  # a webhook: at once, without waiting for the backoff
        agent.sync_job()
    assert agent.state.failures == 2
    why = agent.ready()[1]
    assert "stalled" in why and "/elsewhere" in why, why
    assert metric(agent, "orksync_sync_stalled 1.0")
    said = [r for r in caplog.records if r.getMessage().startswith("sync failed: ")]
    assert len(said) == 1, [r.getMessage() for r in said]  # once for the revision
    assert RESULT_ANNOTATION not in root_annotations(kube, w.name)  # not ours to mark


SCHEMA_CRD = crd("Gadget", "schema.orksync.io", properties="""
    spec:
      type: object
      properties:
        replicas: {type: integer}
    status: {type: object, x-kubernetes-preserve-unknown-fields: true}
""")
SCHEMA_KATALOG = """
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: gadgets}
spec:
  crds:
    gadget:
      crdFile: ./crd.yaml
      operatorBox:
        onReconcile:
          configMaps:
            - name: "{{ .metadata.name }}-config"
              data: {replicas: "{{ .spec.replicas }}"}
"""


def gadget(name: str, ns: str, replicas: str) -> str:
    return (f"apiVersion: schema.orksync.io/v1\nkind: Gadget\nmetadata:\n  name: {name}\n"
            f"  namespace: {ns}\nspec:\n  replicas: {replicas}\n")


def test_a_custom_resource_its_crd_schema_refuses_is_not_sent_and_named_by_file_and_line(
        kube: Kube, tmp_path: Path, ns: str, served: Served,
        caplog: pytest.LogCaptureFixture) -> None:
    upstream, daemon = served
    name = f"schema-{uuid.uuid4().hex[:8]}"
    upstream.commit({"katalog.yaml": SCHEMA_KATALOG, "crd.yaml": SCHEMA_CRD,
                     "a.yaml": gadget("a", ns, "2"), "b.yaml": gadget("b", ns, "2")}, "two")
    agent = agent_for(kube, daemon, name, tmp_path / "state")
    agent.sync_job()
    assert agent.state.failures == 0, agent.state.last_error
    configmaps = kube.resource("v1", "ConfigMap")
    sent = kube.requests
    upstream.commit({"a.yaml": gadget("a", ns, "two"), "b.yaml": gadget("b", ns, "3")},
                    "a broken, b changed")
    with caplog.at_level(logging.INFO, logger="orksync"):
        agent.sync_job()
    assert agent.state.failures == 1
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("a.yaml:7" in e and "spec.replicas" in e for e in errors), errors
    assert not any(" 422 " in e or " 500 " in e for e in errors), errors  # never sent
    assert "a.yaml:7" in agent.ready()[1]
    gadgets = kube.resource("schema.orksync.io/v1", "Gadget")
    assert kube.get(gadgets, ns, "a")["spec"]["replicas"] == 2  # held as it was
    assert kube.get(configmaps, ns, "a-config")["data"] == {"replicas": "2"}
    assert kube.get(gadgets, ns, "b")["spec"]["replicas"] == 3  # the others synced
    assert kube.get(configmaps, ns, "b-config")["data"] == {"replicas": "3"}
    assert kube.requests > sent


def test_an_outage_is_logged_once_when_it_begins_and_once_when_it_ends_and_readyz_says_why(
        kube: Kube, tmp_path: Path, ns: str, served: Served, relay: TcpFaultProxy,
        caplog: pytest.LogCaptureFixture) -> None:
    upstream, daemon = served
    w = World(tmp_path / "mirror", ns).put("a")
    publish(upstream, w, "one widget")
    through = relayed(relay, tmp_path)
    through.retry = RetryPolicy(attempts=3, backoff=0.05, max_delay=0.1, deadline=1.0)
    agent = agent_for(through, daemon, w.name, tmp_path / "state")
    agent.sync_job()
    assert agent.state.failures == 0
    lease_kube = through.sibling(timeout=2.0, retry=RetryPolicy(attempts=1))
    elector = LeaderElector(lease_kube, name=f"lease-{w.name}", namespace="orksync-system",
                            identity="me", lease_duration=15, renew_deadline=10,
                            retry_period=2)
    elector.outages = agent.outages
    assert elector.try_acquire_or_renew()

    relay.refuse()
    relay.cut_all()
    with caplog.at_level(logging.DEBUG, logger="orksync"):
        for _ in range(5):  # each a webhook's sync, at once
            agent._sync_now()
            agent.sync_job()
        for _ in range(5):
            elector.try_acquire_or_renew()
        elector._renewed_at = None  # as once the renew deadline passed: not leading
        agent.elector = elector
        ok, why = agent.ready()
        agent.elector = None
        assert not ok and why.startswith("not leading: the lease ") and "could not be" \
            in why, why  # the real reason, not "another replica holds the lease"
        relay.resume()
        assert elector.try_acquire_or_renew()
        agent._sync_now()
        agent.sync_job()
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    for component in ("sync", "lease"):
        began = [m for m in lines if m.startswith(f"{component}: outage began")]
        ended = [m for m in lines if m.startswith(f"{component}: outage over after")]
        assert len(began) == 1 and len(ended) == 1, lines
    assert not [m for m in lines if "; retry " in m]  # retries at DEBUG only
    assert agent.state.failures == 0
    # info and above: the outage's lines and one "next attempt" per failed sync, no more
    assert len(lines) <= 4 + 5 + 6, lines
    lease_kube.close()
    through.close()


def test_an_object_the_api_server_refuses_is_logged_once_per_revision_not_per_attempt(
        kube: Kube, tmp_path: Path, ns: str, served: Served,
        caplog: pytest.LogCaptureFixture) -> None:
    upstream, daemon = served
    w = World(tmp_path / "mirror", ns).put("a")
    publish(upstream, w, "one widget")
    agent = agent_for(kube, daemon, w.name, tmp_path / "state")
    agent.sync_job()
    assert agent.state.failures == 0
    bad = (f"apiVersion: v1\nkind: Service\nmetadata: {{name: bad, namespace: {ns}}}\n"
           "spec:\n  ports: [{port: 70000}]\n")  # 422: the port is out of range
    upstream.commit({"bad.yaml": bad}, "a Service the API server refuses")
    with caplog.at_level(logging.INFO, logger="orksync"):
        for _ in range(3):  # webhooks: at once, each an attempt at the same revision
            agent._sync_now()
            agent.sync_job()
    assert agent.state.failures == 3
    said = [r.getMessage() for r in caplog.records
            if r.getMessage().startswith(f"failed Service/{ns}/bad")]
    assert len(said) == 1 and "70000" in said[0], said
