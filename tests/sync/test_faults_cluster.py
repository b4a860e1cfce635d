"""Faults injected into real parts, and what orksync keeps through them.

Against the real control plane (etcd + kube-apiserver + kube-controller-manager) and real
git: kube-apiserver and etcd killed in the middle of a sync; connections cut, reset,
stalled and refused by a TCP relay on 127.0.0.1 (testbed.faultproxy); 429 and 5xx
answers and lost answers from a TLS-terminating HTTP proxy; conflicts with another field
manager; the git remote down, a corrupted clone, a force-push, through the agent.

After each fault the next sync converges and nothing is lost (`World.assert_converged`):
no once-Secret regenerated (same UID, same data), no Job duplicated or recreated (one
per name, same UID), nothing pruned by mistake, the inventory exactly the rendered set,
every object as rendered.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from orksync.agent.config import AgentConfig
from orksync.agent.runner import Agent
from orksync.apply.delete import DeletionOptions
from orksync.cluster.kube import Kube, RetryPolicy, Unreachable
from orksync.errors import ClusterError
from orksync.katalog.loader import load_repository
from orksync.katalog.model import Catalog
from orksync.lifecycle.events import report_sync
from orksync.lifecycle.teardown import remove_finalizer
from orksync.model import MANAGED_SELECTOR, OWNER_LABEL, Action, Change, ObjRef, RenderedSet
from orksync.render.engine import render_catalog
from orksync.rendered.directory import read_rendered
from orksync.sync import (
    SyncOptions,
    SyncRequest,
    SyncResult,
    hook_renderers,
    read_inventory,
    sync_once,
)
from testbed.controlplane import ControlPlane
from testbed.faultproxy import Direction, HttpFaultProxy, TcpFaultProxy
from tests.helpers import CRD, widget, write_repo
from tests.source.test_git_source import GitDaemon, Upstream

pytestmark = pytest.mark.cluster

WIDGET_API = "test.orksync.io/v1"
# Every write policy: a once-Secret with a generated value and a Job (create once, never
# again), a conditional ConfigMap (deleted when its condition turns false), a ConfigMap
# and a Deployment applied every sync.
KATALOG = """\
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: widgets}
spec:
  crds:
    widget:
      crdFile: ./crd.yaml
      operatorBox:
        onCreate:
          secrets:
            - name: "{{ .metadata.name }}-creds"
              once: true
              data:
                password: "{{ randomAlphanumeric 24 }}"
          jobs:
            - name: "{{ .metadata.name }}-init"
              image: busybox
              command: ["sh", "-c", "true"]
        onReconcile:
          configMaps:
            - name: "{{ .metadata.name }}-config"
              data: {image: "{{ .spec.image }}"}
            - name: "{{ .metadata.name }}-flagged"
              when: [{field: spec.flag, equals: "on"}]
          deployments:
            - name: "{{ .metadata.name }}"
              image: "{{ .spec.image }}"
"""
PATIENT = RetryPolicy(attempts=60, max_delay=0.5, deadline=120.0)  # rides out a restart
HASTY = RetryPolicy(attempts=3, backoff=0.05, max_delay=0.2, deadline=1.0)
QUICK = RetryPolicy(attempts=4, backoff=0.05, max_delay=0.2)  # bounded tests, fast


# --- the world every fault is injected into --------------------------------------------------


def api_of(kind: str) -> str:
    return {"Deployment": "apps/v1", "Job": "batch/v1", "Widget": WIDGET_API}.get(kind, "v1")


def ref(kind: str, ns: str, name: str) -> ObjRef:
    return ObjRef(api_version=api_of(kind), kind=kind, namespace=ns, name=name)


def live(kube: Kube, r: ObjRef) -> dict[str, Any] | None:
    return kube.get_or_none(kube.resource(r.api_version, r.kind), r.namespace, r.name)


@dataclass(frozen=True)
class Keepsake:
    """What a once-Secret or a Job must keep through any fault."""

    uid: str
    data: dict[str, str]


class World:
    """A repository of Widgets in namespace `ns`, its sync root, and its keepsakes."""

    def __init__(self, root: Path, ns: str) -> None:
        self.root, self.ns = root, ns
        self.name = f"faults-{uuid.uuid4().hex[:8]}"
        self.widgets: dict[str, dict[str, str]] = {}
        write_repo(root, {"katalog.yaml": KATALOG, "crd.yaml": CRD})

    def put(self, name: str, *, image: str = "nginx:1", flag: str = "off") -> World:
        self.widgets[name] = {"image": image, "flag": flag}
        write_repo(self.root, {f"{name}.yaml": widget(name, self.ns, image=image, flag=flag)})
        return self

    def remove(self, name: str) -> None:
        del self.widgets[name]
        (self.root / f"{name}.yaml").unlink()

    def render(self) -> tuple[Catalog, RenderedSet]:
        catalog = load_repository(self.root)
        rendered = render_catalog(catalog)
        assert rendered.ok, rendered.errors
        return catalog, rendered

    def sync(self, kube: Kube, on_change: Callable[[Change], None] | None = None
             ) -> SyncResult:
        """What `orksync sync` does: apply, prune, store the inventory, then status and
        Events."""
        catalog, rendered = self.render()
        result = sync_once(kube, SyncRequest(rendered, inventory_name=self.name,
                                             hooks=hook_renderers(catalog),
                                             options=SyncOptions(deletion=DeletionOptions(poll=0.1)),
                                             on_change=on_change))
        report_sync(kube, catalog, rendered, result.changes, revision="test")
        return result

    def keepsakes(self, kube: Kube) -> dict[ObjRef, Keepsake]:
        out = {}
        for name in self.widgets:
            for r in (ref("Secret", self.ns, f"{name}-creds"), ref("Job", self.ns, f"{name}-init")):
                obj = live(kube, r)
                assert obj is not None, f"{r} is missing"
                out[r] = Keepsake(uid=obj["metadata"]["uid"], data=dict(obj.get("data") or {}))
        return out

    def assert_converged(self, kube: Kube, kept: dict[ObjRef, Keepsake]) -> SyncResult:
        """Sync once more: nothing to do, nothing lost, nothing extra, nothing half-written."""
        result = self.sync(kube)
        assert not result.changes.failed, result.changes.failed
        moved = [c for c in result.changes.changes if c.action is not Action.UNCHANGED]
        assert not moved, f"not converged: {moved}"
        _, rendered = self.render()
        wanted = {o.ref for o in rendered.objects}
        assert read_inventory(kube, self.name).refs() == wanted
        children = {o.ref for o in rendered.objects if o.owner is not None}
        assert self.live_children(kube) == children
        now = self.keepsakes(kube)
        for r, before in kept.items():
            if r.name.rsplit("-", 1)[0] in self.widgets:
                assert now[r] == before, f"{r} was regenerated or recreated"
        for name in self.widgets:
            secret = now[ref("Secret", self.ns, f"{name}-creds")]
            assert len(secret.data.get("password", "")) == 32, "a once-Secret lost its value"
        return result

    def live_children(self, kube: Kube) -> set[ObjRef]:
        """The managed children in the namespace, except those of custom resources that
        left Git: the garbage collector takes those (owner references), in its own time."""
        found = set()
        for kind in ("Secret", "ConfigMap", "Deployment", "Job"):
            res = kube.resource(api_of(kind), kind)
            for obj in kube.list(res, namespace=self.ns, label_selector=MANAGED_SELECTOR):
                owner = obj["metadata"]["labels"].get(OWNER_LABEL)
                if owner in self.widgets:
                    found.add(ObjRef.of(obj))
                else:
                    assert [o["kind"] for o in obj["metadata"]["ownerReferences"]] == \
                        ["Widget"], f"{ObjRef.of(obj)} is left to no garbage collection"
        return found

    def jobs(self, kube: Kube) -> list[str]:
        """The names of the Jobs of the widgets in Git: a duplicate would show up twice."""
        return sorted(r.name for r in self.live_children(kube) if r.kind == "Job")


@pytest.fixture
def kube(control_plane: ControlPlane) -> Iterator[Kube]:
    k = Kube.from_kubeconfig(control_plane.kubeconfig)
    yield k
    k.close()


@contextlib.contextmanager
def scratch_namespace(kube: Kube) -> Iterator[str]:
    """A namespace name the sync creates; afterwards our finalizer is stripped from the
    Widgets left in it and the namespace deleted."""
    name = f"f-{uuid.uuid4().hex[:8]}"
    yield name
    try:
        res = kube.resource(WIDGET_API, "Widget")
        for item in kube.list(res, namespace=name):
            remove_finalizer(kube, res, item)
        kube.delete(kube.resource("v1", "Namespace"), "", name)
    except ClusterError:
        pass


@pytest.fixture
def ns(kube: Kube) -> Iterator[str]:
    with scratch_namespace(kube) as name:
        yield name


@pytest.fixture
def world(kube: Kube, tmp_path: Path, ns: str) -> World:
    """Widgets a, b, c, synced once."""
    w = World(tmp_path / "repo", ns).put("a").put("b").put("c")
    first = w.sync(kube)
    assert not first.changes.failed, first.changes.failed
    return w


def change_repo(w: World) -> None:
    """The edit each fault interrupts: a configured, b's conditional ConfigMap created,
    c removed (its children pruned)."""
    w.put("a", image="nginx:2")
    w.put("b", flag="on")
    w.remove("c")


def assert_edit_applied(kube: Kube, w: World) -> None:
    deploy = live(kube, ref("Deployment", w.ns, "a"))
    assert deploy is not None
    assert deploy["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:2"
    assert live(kube, ref("ConfigMap", w.ns, "b-flagged")) is not None
    assert live(kube, ref("Widget", w.ns, "c")) is None
    assert w.jobs(kube) == ["a-init", "b-init"]


class MidSync:
    """A sync run in a thread and paused right after the first change reported for
    `kind` (the engine reports a stage when it is done: the next stage meets the fault).

    The fault itself is injected from the test's thread: the control plane's processes
    die with the thread that started them (PR_SET_PDEATHSIG), so kube-apiserver and etcd
    are killed and revived from the thread that started the session's control plane."""

    def __init__(self, w: World, kube: Kube, kind: str) -> None:
        self.kind = kind
        self.reached, self.go = threading.Event(), threading.Event()
        self.result: SyncResult | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(w, kube), daemon=True)
        self.thread.start()
        if not self.reached.wait(120):
            self.go.set()
            raise AssertionError(f"the sync never reached its {kind} stage")

    def _hook(self, change: Change) -> None:
        if change.ref.kind == self.kind and not self.reached.is_set():
            self.reached.set()
            self.go.wait(120)

    def _run(self, w: World, kube: Kube) -> None:
        try:
            self.result = w.sync(kube, on_change=self._hook)
        except BaseException as err:  # re-raised by finish()
            self.error = err

    def resume(self) -> None:
        self.go.set()

    def finish(self) -> SyncResult:
        self.go.set()
        self.thread.join(300)
        assert not self.thread.is_alive(), "the sync did not finish"
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


# --- 1. kube-apiserver and etcd killed mid-sync ---------------------------------------------


def test_an_apiserver_killed_mid_sync_is_ridden_out_by_retries(
        control_plane: ControlPlane, kube: Kube, world: World) -> None:
    kept = world.keepsakes(kube)
    change_repo(world)
    patient = Kube.from_kubeconfig(control_plane.kubeconfig)
    patient.retry = PATIENT
    run = MidSync(world, patient, "Secret")
    try:
        control_plane.kill("kube-apiserver")  # SIGKILL: the next stage meets a dead port
        run.resume()
        control_plane.revive("kube-apiserver")
        result = run.finish()
    finally:
        run.resume()
        patient.close()
    assert patient.retries > 0
    assert not result.changes.failed, result.changes.failed
    assert_edit_applied(kube, world)
    world.assert_converged(kube, kept)


def test_an_apiserver_down_past_the_retry_deadline_fails_the_sync_and_prunes_nothing(
        control_plane: ControlPlane, kube: Kube, world: World) -> None:
    kept = world.keepsakes(kube)
    stored = read_inventory(kube, world.name)
    change_repo(world)
    hasty = Kube.from_kubeconfig(control_plane.kubeconfig)
    hasty.retry = HASTY
    run = MidSync(world, hasty, "Secret")
    control_plane.kill("kube-apiserver")
    try:
        result = run.finish()
    finally:
        hasty.close()
        control_plane.revive("kube-apiserver")
    # every write after the pause failed (bounded retries), so the prune halted and the
    # inventory, unchanged by a sync that applied nothing new, was not written at all
    assert result.changes.failed
    # each failure says it was retried, or that it was not because the outage had already
    # lasted past the deadline (a later discovery or write fails at once)
    told = ("attempts)", "not retried: every request has failed for")
    assert all(any(t in c.message for t in told) for c in result.changes.failed), \
        [c.message for c in result.changes.failed]
    assert any("nothing is pruned" in reason for reason in result.refused), result.refused
    assert read_inventory(kube, world.name) == stored, "the inventory was not half-written"
    assert live(kube, ref("Widget", world.ns, "c")) is not None, "nothing pruned in the fault"
    assert live(kube, ref("Job", world.ns, "c-init")) is not None
    world.sync(kube)  # the next sync does what the failed one could not
    assert_edit_applied(kube, world)
    world.assert_converged(kube, kept)


def test_etcd_killed_and_restarted_mid_sync_loses_nothing(
        control_plane: ControlPlane, kube: Kube, world: World) -> None:
    kept = world.keepsakes(kube)
    change_repo(world)
    before = {p.component: p.pid for p in control_plane.processes()}
    patient = Kube.from_kubeconfig(control_plane.kubeconfig)
    patient.retry = PATIENT
    run = MidSync(world, patient, "Secret")
    try:
        control_plane.kill("etcd")
        run.resume()
        control_plane.revive("etcd")
        result = run.finish()
    finally:
        run.resume()
        patient.close()
    after = {p.component: p.pid for p in control_plane.processes()}
    assert after["etcd"] != before["etcd"], "etcd was restarted"
    assert not result.changes.failed, result.changes.failed
    assert_edit_applied(kube, world)
    world.assert_converged(kube, kept)


# --- 2. connections cut, reset, stalled, refused (TCP relay, TLS passes through) -------------


@pytest.fixture
def relay(control_plane: ControlPlane) -> Iterator[TcpFaultProxy]:
    with TcpFaultProxy.for_control_plane(control_plane) as proxy:
        yield proxy


def relayed(proxy: TcpFaultProxy | HttpFaultProxy, tmp_path: Path) -> Kube:
    kubeconfig = proxy.kubeconfig(tmp_path / f"kubeconfig-{uuid.uuid4().hex[:6]}")
    return Kube.from_kubeconfig(kubeconfig)


def test_connections_cut_and_reset_mid_sync_are_retried_and_nothing_is_lost(
        kube: Kube, world: World, relay: TcpFaultProxy, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    """Transport faults from the middle of a sync on. Which requests meet a broken
    connection depends on when the pool opens one (mostly the first request after the
    pause: a LIST); the HTTP proxy tests below lose the answers of chosen writes."""
    kept = world.keepsakes(kube)
    change_repo(world)
    through = relayed(relay, tmp_path)
    with caplog.at_level(logging.INFO, logger="orksync.cluster.kube"):
        run = MidSync(world, through, "Secret")
        try:
            relay.cut_all()  # the pooled connections: the rest of the sync opens new ones
            # A TLS handshake here is about 1.6 kB up and 2.0 kB down (measured through
            # the relay). Every other new connection is broken: answers cut 3 kB after the
            # handshake (the request was carried out), the first request cut before it is
            # complete, or reset at once.
            for _ in range(2):
                relay.cut_after(5300, direction=Direction.DOWN, skip=1)
                relay.cut_after(1700, direction=Direction.UP, skip=1)
                relay.reset(skip=1)
            run.resume()
            result = run.finish()
            assert not result.changes.failed, result.changes.failed
            syncs = 1
            while relay.pending():  # the faults not met yet: more syncs, new connections
                relay.cut_all()
                assert not world.sync(through).changes.failed
                syncs += 1
                assert syncs <= 12
        finally:
            run.resume()
            through.close()
    # a reset and an UP cut each break the first request of their connection: 4 resends
    assert relay.stats.reset == 2 and relay.stats.cut >= 2
    resent = [r.getMessage() for r in caplog.records if "; retry " in r.getMessage()]
    assert len(resent) >= 4, resent
    assert_edit_applied(kube, world)
    world.assert_converged(kube, kept)


def test_a_stalled_connection_times_out_and_the_request_is_retried(
        kube: Kube, world: World, relay: TcpFaultProxy, tmp_path: Path) -> None:
    kept = world.keepsakes(kube)
    through = relayed(relay, tmp_path)
    through.timeout = 1.0
    relay.stall(connections=2)  # the first two connections of the sync hang
    try:
        result = world.sync(through)
    finally:
        relay.release()
        through.close()
    assert relay.stats.stalled == 2
    assert through.retries >= 2
    assert not result.changes.failed, result.changes.failed
    world.assert_converged(kube, kept)


def test_refused_connections_fail_fast_after_the_deadline_and_write_nothing(
        kube: Kube, world: World, relay: TcpFaultProxy, tmp_path: Path) -> None:
    kept = world.keepsakes(kube)
    stored = read_inventory(kube, world.name)
    through = relayed(relay, tmp_path)
    through.retry = HASTY
    res = through.resource("v1", "ConfigMap")  # discovery while the relay still accepts
    relay.refuse()
    sent = through.requests
    relay.cut_all()  # the pooled connection too
    with pytest.raises(ClusterError, match=f"after {HASTY.attempts} attempts"):
        through.get(res, world.ns, "a-config")
    first = through.requests - sent
    assert first == HASTY.attempts
    # the server has failed for longer than the deadline: no more retries, one attempt each
    time.sleep(HASTY.deadline)
    sent = through.requests
    for _ in range(10):
        with pytest.raises(ClusterError, match="not retried: every request has failed for"):
            through.get(res, world.ns, "a-config")
    assert through.requests - sent == 10
    with pytest.raises(ClusterError):
        world.sync(through)  # the inventory cannot be read: the sync stops before writing
    relay.resume()
    assert through.get(res, world.ns, "a-config")["data"] == {"image": "nginx:1"}
    relay.refuse()  # an answer ended the outage: retries are back
    relay.cut_all()
    sent = through.requests
    with pytest.raises(ClusterError):
        through.get(res, world.ns, "a-config")
    assert through.requests - sent > 1
    relay.resume()
    through.close()
    assert read_inventory(kube, world.name) == stored
    world.assert_converged(kube, kept)


def test_an_api_server_never_reached_fails_the_cli_at_once_in_one_line_naming_it(
        world: World, relay: TcpFaultProxy, tmp_path: Path) -> None:
    """A refused first connection is not retried: `orksync sync` ends with one line naming
    the server and the kubeconfig context, after one connection attempt (the relay
    refuses at the port: nothing reaches the server); a server that answered once and
    then refuses is retried (the test above)."""
    kubeconfig = relay.kubeconfig(tmp_path / "kubeconfig")
    relay.refuse()
    done = subprocess.run([sys.executable, "-m", "orksync", "sync", str(world.root), "--once",
                           "--kubeconfig", str(kubeconfig), "--name", world.name],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert relay.url in lines[0] and "kubeconfig context" in lines[0], lines[0]
    assert "cannot be reached" in lines[0], lines[0]
    through = relayed(relay, tmp_path)
    with pytest.raises(Unreachable, match="cannot be reached"):
        through.resource("v1", "ConfigMap")
    assert through.requests == 1  # one attempt, no retry
    relay.resume()
    assert through.resource("v1", "ConfigMap").plural == "configmaps"
    through.close()


# --- 3. 429 and 5xx answers, lost answers (TLS-terminating HTTP proxy) -----------------------


@pytest.fixture
def http_proxy(control_plane: ControlPlane) -> Iterator[HttpFaultProxy]:
    with HttpFaultProxy.for_control_plane(control_plane) as proxy:
        yield proxy


def test_429_answers_are_retried_after_the_retry_after_they_carry(
        kube: Kube, world: World, http_proxy: HttpFaultProxy, tmp_path: Path) -> None:
    kept = world.keepsakes(kube)
    change_repo(world)
    apply_a = rf"/namespaces/{world.ns}/deployments/a$"
    http_proxy.inject(429, method="PATCH", path=apply_a, retry_after="1")
    http_proxy.inject(429, method="GET", path=r"^/api/v1/configmaps$", retry_after="1")
    through = relayed(http_proxy, tmp_path)
    try:
        result = world.sync(through)
    finally:
        through.close()
    assert not result.changes.failed, result.changes.failed
    for method, path, wait in (("PATCH", apply_a, 1.0), ("GET", r"^/api/v1/configmaps$", 1.0)):
        busy, again, *_ = http_proxy.seen(method=method, path=path)
        assert busy.status == 429 and busy.injected and not busy.forwarded
        assert again.status == 200
        assert again.at - busy.at >= wait, "Retry-After was not honoured"
    assert_edit_applied(kube, world)
    world.assert_converged(kube, kept)


def test_5xx_and_lost_answers_on_every_write_leave_one_job_and_the_same_secret(
        kube: Kube, tmp_path: Path, http_proxy: HttpFaultProxy, ns: str) -> None:
    """On the first sync, every kind of write meets a 5xx or loses its answer, some after
    the apiserver carried them out."""
    w = World(tmp_path / "repo", ns).put("a").put("b", flag="on")
    at = rf"/namespaces/{ns}"
    rules = [  # not forwarded: never carried out; forwarded: carried out, answer lost
        http_proxy.inject(500, method="POST", path=rf"{at}/secrets$", body='"a-creds"'),
        http_proxy.drop(method="POST", path=rf"{at}/secrets$", body='"b-creds"'),
        http_proxy.inject(504, method="POST", path=rf"{at}/jobs$", body='"a-init"',
                          forward=True),
        http_proxy.drop(method="POST", path=rf"{at}/jobs$", body='"b-init"'),
        http_proxy.inject(503, method="PATCH", path=rf"{at}/configmaps/", times=2),
        http_proxy.inject(502, method="PATCH", path=rf"{at}/deployments/", forward=True),
        http_proxy.drop(method="PATCH", path=r"/widgets/a$"),
        http_proxy.inject(503, method="GET", path=r"^/apis/apps/v1/deployments$"),
        http_proxy.drop(method="PATCH", path=r"/configmaps/orksync-inventory-"),
    ]
    through = relayed(http_proxy, tmp_path)
    try:
        result = w.sync(through)
    finally:
        through.close()
    assert [r.applied for r in rules] == [1, 1, 1, 1, 2, 1, 1, 1, 1], "every fault was hit"
    assert not result.changes.failed, result.changes.failed
    assert through.retries == 10
    creates = {name: [s.status for s in http_proxy.seen(method="POST", path=rf"{at}/{kind}$")
                      if name in s.body]
               for kind, name in (("secrets", "a-creds"), ("secrets", "b-creds"),
                                  ("jobs", "a-init"), ("jobs", "b-init"))}
    # a create whose answer was lost is sent again and meets 409 AlreadyExists: one Job,
    # and the Secret's value is the one the apiserver stored (read back, not generated anew)
    assert creates == {"a-creds": [500, 201], "b-creds": [0, 409],
                       "a-init": [504, 409], "b-init": [0, 409]}
    assert w.jobs(kube) == ["a-init", "b-init"]
    kept = w.keepsakes(kube)
    w.assert_converged(kube, kept)  # the Deployment's rollout hash matches the kept Secret


def test_retries_are_bounded_and_a_failing_object_fails_alone_without_a_prune(
        kube: Kube, world: World, http_proxy: HttpFaultProxy, tmp_path: Path) -> None:
    kept = world.keepsakes(kube)
    stored = read_inventory(kube, world.name)
    change_repo(world)
    apply_a = rf"/namespaces/{world.ns}/deployments/a$"
    http_proxy.inject(503, method="PATCH", path=apply_a, times=None)
    through = relayed(http_proxy, tmp_path)
    through.retry = QUICK
    try:
        result = world.sync(through)
    finally:
        through.close()
    (failed,) = result.changes.failed
    assert failed.ref == ref("Deployment", world.ns, "a")
    assert "503" in failed.message and f"after {through.retry.attempts} attempts" \
        in failed.message
    assert len(http_proxy.seen(method="PATCH", path=apply_a)) == through.retry.attempts
    assert result.pruned == 0 and live(kube, ref("Job", world.ns, "c-init")) is not None
    assert read_inventory(kube, world.name).refs() >= stored.refs(), "nothing forgotten"
    assert live(kube, ref("ConfigMap", world.ns, "b-flagged")) is not None, "others synced"
    events = kube.list(kube.resource("v1", "Event"), namespace=world.ns)
    warnings = [e["message"] for e in events if e.get("reason") == "WidgetReconcileError"]
    assert any(f"Deployment/{world.ns}/a" in m and "503" in m for m in warnings), warnings
    world.sync(kube)
    assert_edit_applied(kube, world)
    world.assert_converged(kube, kept)


def test_a_failed_prefetch_regenerates_no_secret_and_creates_no_second_job(
        kube: Kube, world: World, http_proxy: HttpFaultProxy, tmp_path: Path) -> None:
    """The LIST that tells the engine what exists fails: the Secrets and Jobs look absent,
    the creates meet 409 AlreadyExists and the live ones are kept."""
    kept = world.keepsakes(kube)
    versions = {r: live(kube, r)["metadata"]["resourceVersion"]  # type: ignore[index]
                for r in kept}
    through = relayed(http_proxy, tmp_path)
    through.retry = QUICK
    for kind in ("secrets", "jobs"):
        http_proxy.inject(503, method="GET", path=rf"/v1/{kind}$", times=through.retry.attempts)
    try:
        result = world.sync(through)
    finally:
        through.close()
    assert not result.changes.failed, result.changes.failed
    creates = http_proxy.seen(method="POST")
    assert {s.status for s in creates} == {409} and len(creates) == 6
    assert {r: live(kube, r)["metadata"]["resourceVersion"]  # type: ignore[index]
            for r in kept} == versions, "nothing was written"
    world.assert_converged(kube, kept)


def test_only_replayable_requests_are_sent_again_after_an_unknown_outcome(
        kube: Kube, world: World, http_proxy: HttpFaultProxy, tmp_path: Path) -> None:
    """Each PATCH below is carried out by the apiserver, then answered 500."""
    through = relayed(http_proxy, tmp_path)
    res = through.resource("v1", "ConfigMap")
    path = res.path(world.ns, "a-config")
    version = through.get(res, world.ns, "a-config")["metadata"]["resourceVersion"]
    patches: list[tuple[str, Any]] = [
        # an append is not idempotent: sent once
        ("application/json-patch+json",
         [{"op": "add", "path": "/metadata/finalizers", "value": ["x.io/y"]}]),
        # guarded by a test on the version it changes: the repeat fails its test
        ("application/json-patch+json",
         [{"op": "test", "path": "/metadata/resourceVersion", "value": "@"},
          {"op": "add", "path": "/metadata/labels/guarded", "value": "yes"}]),
        # a merge patch sets values: the repeat changes nothing
        ("application/merge-patch+json", {"metadata": {"labels": {"merged": "yes"}}}),
    ]
    statuses = []
    try:
        for content_type, body in patches:
            if isinstance(body, list) and body[0]["op"] == "test":
                version = through.get(res, world.ns, "a-config")["metadata"]["resourceVersion"]
                body[0]["value"] = version
            http_proxy.inject(500, method="PATCH", path=rf"{path}$", forward=True)
            try:
                through.request("PATCH", path, body=body, content_type=content_type)
                statuses.append(200)
            except ClusterError as err:
                statuses.append(err.status)
        http_proxy.inject(500, method="POST", path=rf"/namespaces/{world.ns}/configmaps$",
                          forward=True)
        generated = {"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"generateName": "g-", "namespace": world.ns}}
        with pytest.raises(ClusterError):
            through.create(res, generated, field_manager="t")
    finally:
        through.close()
    assert statuses == [500, 422, 200]
    sent = [s.status for s in http_proxy.seen(method="PATCH", path=rf"{path}$")]
    assert sent == [500, 500, 422, 500, 200]
    assert len(http_proxy.seen(method="POST")) == 1, "a generateName create is sent once"
    cm = live(kube, ref("ConfigMap", world.ns, "a-config"))
    assert cm is not None and cm["metadata"]["finalizers"] == ["x.io/y"]
    assert cm["metadata"]["labels"]["guarded"] == "yes"
    assert cm["metadata"]["labels"]["merged"] == "yes"
    kube.request("PATCH", path, content_type="application/merge-patch+json",
                 body={"metadata": {"finalizers": None}})


# --- 4. conflicts with another field manager ------------------------------------------------


def someone_sets_the_image(kube: Kube, ns: str, image: str) -> None:
    body = {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "a", "namespace": ns},
            "spec": {"template": {"spec": {"containers": [{"name": "a", "image": image}]}}}}
    kube.apply(kube.resource("apps/v1", "Deployment"), body, field_manager="someone-else",
               force=True)


def image_owners(deploy: dict[str, Any]) -> set[str]:
    return {m["manager"] for m in deploy["metadata"]["managedFields"]
            if '"f:image"' in str(m.get("fieldsV1", "")).replace("'", '"')}


def test_a_field_taken_by_another_manager_is_taken_back_when_forced(
        kube: Kube, world: World) -> None:
    someone_sets_the_image(kube, world.ns, "other:1")
    result = world.sync(kube)
    deploy_ref = ref("Deployment", world.ns, "a")
    assert result.changes.by_ref()[deploy_ref].action is Action.CONFIGURED
    deploy = live(kube, deploy_ref)
    assert deploy is not None
    assert deploy["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1"
    assert image_owners(deploy) == {"orksync"}, "the conflict was forced: orksync owns it"


def test_a_conflict_is_reported_naming_object_field_and_manager_when_not_forced(
        kube: Kube, world: World) -> None:
    line = '              image: "{{ .spec.image }}"\n'
    assert KATALOG.count(line) == 1  # the Deployment's
    (world.root / "katalog.yaml").write_text(
        KATALOG.replace(line, line + "              forceConflict: false\n"))
    kept = world.keepsakes(kube)
    world.put("a", image="nginx:2")
    someone_sets_the_image(kube, world.ns, "other:1")
    result = world.sync(kube)
    deploy_ref = ref("Deployment", world.ns, "a")
    (failed,) = result.changes.failed
    assert failed.ref == deploy_ref
    for part in ("409", "someone-else", ".spec.template.spec.containers[name=\"a\"].image"):
        assert part in failed.message, failed.message
    deploy = live(kube, deploy_ref)
    assert deploy is not None
    assert deploy["spec"]["template"]["spec"]["containers"][0]["image"] == "other:1"
    events = kube.list(kube.resource("v1", "Event"), namespace=world.ns)
    warning = [e["message"] for e in events if e.get("reason") == "WidgetReconcileError"]
    assert any(str(deploy_ref) in m and "someone-else" in m and ".image" in m
               for m in warning), warning
    assert result.pruned == 0
    assert world.sync(kube).changes.failed, "reported again, never silently resolved"
    world.put("a", image="other:1")  # the repository agrees with the other manager
    assert not world.sync(kube).changes.failed
    world.assert_converged(kube, kept)


# --- 5. git faults through the agent -------------------------------------------------------


@contextlib.contextmanager
def git_served(root: Path) -> Iterator[tuple[Upstream, GitDaemon]]:
    """A repository served by `git daemon` on 127.0.0.1, and its working clone."""
    srv = root / "srv"
    srv.mkdir()
    upstream = Upstream(srv)
    daemon = GitDaemon(srv)
    daemon.start()
    try:
        yield upstream, daemon
    finally:
        daemon.stop()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Upstream, GitDaemon]]:
    with git_served(tmp_path) as pair:
        yield pair


def publish(upstream: Upstream, w: World, message: str) -> str:
    """Commit and push the world's repository as it is now (removed files removed)."""
    files: dict[str, str | None] = {p.name: None for p in upstream.work.glob("*.yaml")}
    files.update({p.name: p.read_text() for p in w.root.glob("*.yaml")})
    return upstream.commit(files, message)


def agent_for(kube: Kube, daemon: GitDaemon, w: World, state: Path) -> Agent:
    config = AgentConfig(repo_url=daemon.url(), state_dir=state, leader_elect=False,
                         name=w.name, interval=1)
    return Agent(config, kube)


def test_git_remote_down_corrupted_clone_and_force_push_through_the_agent(
        kube: Kube, tmp_path: Path, ns: str, served: tuple[Upstream, GitDaemon]) -> None:
    upstream, daemon = served
    w = World(tmp_path / "mirror", ns).put("a").put("b").put("c")
    publish(upstream, w, "three widgets")
    agent = agent_for(kube, daemon, w, tmp_path / "state")
    assert agent.sync()
    kept = w.keepsakes(kube)
    stored = read_inventory(kube, w.name)

    # the remote goes down with a commit the agent never sees: the last good revision
    # keeps being synced, nothing is pruned, readiness says why
    daemon.stop()
    assert agent.sync()
    assert "serving the last good revision" in agent.ready()[1]
    assert read_inventory(kube, w.name) == stored

    # the clone is corrupted while the remote is still down: still the last good revision
    shutil.rmtree(tmp_path / "state" / "checkout" / ".git" / "objects")
    assert agent.sync()
    assert w.live_children(kube) == {o.ref for o in w.render()[1].objects if o.owner}

    # a new agent process with the corrupted clone and no remote has no revision: it syncs
    # nothing and prunes nothing
    restarted = agent_for(kube, daemon, w, tmp_path / "state")
    assert not restarted.sync()
    assert read_inventory(kube, w.name) == stored

    # the remote is back with rewritten history (an orphan branch force-pushed to main)
    daemon.start()
    upstream.switch("rewritten", orphan=True)
    w.put("a", image="nginx:2")
    w.remove("c")
    sha = publish(upstream, w, "rewritten history")
    assert restarted.sync()
    assert restarted.state.revision is not None and restarted.state.revision.sha == sha
    assert live(kube, ref("Widget", ns, "c")) is None, "c left Git and was pruned"
    restarted.jobs.copied()
    rendered_dir = tmp_path / "state" / "rendered" / sha
    assert {o.ref for o in read_rendered(rendered_dir).objects} == \
        {o.ref for o in w.render()[1].objects}, "the rendered index matches the revision"
    w.assert_converged(kube, kept)


def test_a_revision_copy_that_cannot_be_written_fails_no_sync_and_is_written_later(
        kube: Kube, tmp_path: Path, ns: str, served: tuple[Upstream, GitDaemon],
        caplog: pytest.LogCaptureFixture) -> None:
    """The agent's copy of a revision's render (`<state dir>/rendered/<sha>/`) is for people
    to read: a disk that refuses it stops no apply, and the next full sync writes it (and
    removes what a killed writer left half-written)."""
    upstream, daemon = served
    w = World(tmp_path / "mirror", ns).put("a").put("b")
    sha = publish(upstream, w, "two widgets")
    state = tmp_path / "state"
    state.mkdir()
    (state / "rendered").write_text("a file where the copies' directory goes\n")
    agent = agent_for(kube, daemon, w, state)
    with caplog.at_level(logging.ERROR, logger="orksync"):
        assert agent.sync()
        agent.jobs.copied()
    assert w.live_children(kube) == {o.ref for o in w.render()[1].objects if o.owner}
    assert agent.metrics.registry.get_sample_value(
        "orksync_errors_total", {"reason": "revision_copy"}) == 1
    assert any(f"the rendered copy of {sha} was not written" in r.getMessage()
               for r in caplog.records), caplog.text

    # and what a process killed while writing a copy left is removed with the next copy
    (state / "rendered").unlink()
    stale = [state / "rendered" / f".{sha}.tmp-killed", state / "rendered" / f".{sha}.old-1"]
    for path in stale:
        path.mkdir(parents=True)
        (path / "index.yaml").write_text("half written\n")
    assert agent.sync()
    agent.jobs.copied()
    assert {o.ref for o in read_rendered(state / "rendered" / sha).objects} == \
        {o.ref for o in w.render()[1].objects}
    assert sorted(p.name for p in (state / "rendered").iterdir()) == [sha]
