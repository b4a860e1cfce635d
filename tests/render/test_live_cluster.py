"""A sync renders against the live cluster (orksync.sync.render_live): `.children`,
the custom resource's own `.status` and `.cross.<as>.status` in templates, conditions and
status fields; workload `autoscale:` (orksync.lifecycle.autoscale). Real control plane
(kube-apiserver + etcd + kube-controller-manager); no kubelet runs, so Job results are
written through `/status` by the test, as a job controller would."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from orksync.apply.run import ApplyOptions
from orksync.cluster import view as view_module
from orksync.cluster.kube import Kube
from orksync.cluster.view import WatchedView
from orksync.cluster.watch import Informers
from orksync.durations import rfc3339
from orksync.errors import ClusterError
from orksync.katalog.loader import load_repository
from orksync.lifecycle.autoscale import FIELD_MANAGER as AUTOSCALER
from orksync.lifecycle.autoscale import LAST_SCALE_ANNOTATION
from orksync.lifecycle.events import report_sync
from orksync.lifecycle.teardown import remove_finalizer
from orksync.model import Action, Change, ObjRef
from orksync.sync import (
    SyncOptions,
    SyncRequest,
    SyncResult,
    hook_renderers,
    render_live,
    sync_once,
)
from testbed.controlplane import ControlPlane
from tests.helpers import CRD, finished_job_status, widget, write_repo

pytestmark = pytest.mark.cluster

WIDGET_API = "test.orksync.io/v1"
MERGE = "application/merge-patch+json"
T0 = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


def katalog(box: str) -> str:
    """A Widget Katalog whose operatorBox is `box` (YAML indented by 8 spaces)."""
    return ("apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\nmetadata: {name: widgets}\n"
            "spec:\n  crds:\n    widget:\n      crdFile: ./crd.yaml\n      operatorBox:\n"
            + box)


# --- fixtures and helpers ----------------------------------------------------------------------


@pytest.fixture
def kube(control_plane: ControlPlane) -> Iterator[Kube]:
    k = Kube.from_kubeconfig(control_plane.kubeconfig)
    yield k
    k.close()


@pytest.fixture
def ns(kube: Kube) -> Iterator[str]:
    """A namespace the sync creates; our finalizer is stripped afterwards so it can go."""
    name = f"l-{uuid.uuid4().hex[:8]}"
    yield name
    try:
        res = kube.resource(WIDGET_API, "Widget")
        for item in kube.list(res, namespace=name):
            remove_finalizer(kube, res, item)
        kube.delete(kube.resource("v1", "Namespace"), "", name)
    except ClusterError:
        pass


class Repo:
    """A repository synced the way `orksync sync` does: a live render, the sync, then
    status and Events; the clock is the test's."""

    def __init__(self, kube: Kube, root: Path, ns: str) -> None:
        self.kube, self.root, self.ns = kube, root, ns
        self.name = f"live-{uuid.uuid4().hex[:8]}"
        self.now = T0

    def clock(self) -> datetime:
        return self.now

    def write(self, files: dict[str, str]) -> Repo:
        write_repo(self.root, files)
        return self

    def sync(self, at: datetime | None = None) -> SyncResult:
        self.now = at or self.now
        catalog = load_repository(self.root)
        rendered = render_live(self.kube, catalog, clock=self.clock)
        assert rendered.ok, rendered.errors
        result = sync_once(self.kube, SyncRequest(rendered, inventory_name=self.name,
                                                  hooks=hook_renderers(catalog),
                                                  options=SyncOptions(apply=ApplyOptions(clock=self.clock))))
        report_sync(self.kube, catalog, rendered, result.changes, revision="r",
                    now=self.now, clock=self.clock)
        return result


@pytest.fixture
def repo(kube: Kube, tmp_path: Path, ns: str) -> Repo:
    return Repo(kube, tmp_path / "repo", ns)


def ref(kind: str, name: str, ns: str) -> ObjRef:
    api = {"Deployment": "apps/v1", "StatefulSet": "apps/v1", "Widget": WIDGET_API,
           "Job": "batch/v1"}.get(kind, "v1")
    return ObjRef(api_version=api, kind=kind, namespace=ns, name=name)


def get(kube: Kube, r: ObjRef) -> dict[str, Any] | None:
    return kube.get_or_none(kube.resource(r.api_version, r.kind), r.namespace, r.name)


def must(kube: Kube, r: ObjRef) -> dict[str, Any]:
    live = get(kube, r)
    assert live is not None, f"{r} is missing"
    return live


def patch(kube: Kube, r: ObjRef, body: Any, *, subresource: str = "",
          manager: str = "orksync-tests") -> None:
    res = kube.resource(r.api_version, r.kind)
    kube.request("PATCH", res.path(r.namespace, r.name, subresource), body=body,
                 content_type=MERGE, query={"fieldManager": manager})


def finish_job(kube: Kube, r: ObjRef) -> None:
    patch(kube, r, {"status": finished_job_status(ok=True)}, subresource="status")


def data(kube: Kube, r: ObjRef) -> dict[str, str]:
    return dict(must(kube, r).get("data") or {})


def changes_of(result: SyncResult, r: ObjRef) -> list[Change]:
    return [c for c in result.changes.changes if c.ref == r]


def replicas(kube: Kube, r: ObjRef) -> int:
    return int(must(kube, r)["spec"]["replicas"])


def replica_owners(live: dict[str, Any]) -> set[str]:
    return {m["manager"] for m in live["metadata"].get("managedFields") or []
            if "f:replicas" in ((m.get("fieldsV1") or {}).get("f:spec") or {})}


# --- .children ---------------------------------------------------------------------------------


CHILD_GATED = katalog("""\
        onCreate:
          jobs:
            - name: "{{ .metadata.name }}-build"
              image: busybox
        onReconcile:
          configMaps:
            - name: "{{ .metadata.name }}-report"
              data:
                succeeded: "{{ .children.job.status.succeeded }}"
                jobs: "{{ len .children.jobs }}"
            - name: "{{ .metadata.name }}-done"
              when:
                - field: children.job.status.succeeded
                  greaterThan: "0"
""")


def test_a_template_and_a_condition_on_a_childs_status_follow_the_live_child(
        kube: Kube, repo: Repo, ns: str) -> None:
    repo.write({"katalog.yaml": CHILD_GATED, "crd.yaml": CRD, "w.yaml": widget("w", ns)})
    build, report, done = (ref("Job", "w-build", ns), ref("ConfigMap", "w-report", ns),
                           ref("ConfigMap", "w-done", ns))
    first = repo.sync()
    assert not first.changes.failed, first.changes.failed
    must(kube, build)
    assert data(kube, report) == {"succeeded": "", "jobs": "0"}  # rendered before the Job
    assert get(kube, done) is None

    repo.sync()  # the Job exists now, not finished
    assert data(kube, report) == {"succeeded": "", "jobs": "1"}
    assert get(kube, done) is None

    finish_job(kube, build)
    third = repo.sync()
    assert data(kube, report) == {"succeeded": "1", "jobs": "1"}
    assert get(kube, done) is not None
    assert [c.action for c in changes_of(third, done)] == [Action.CREATED]

    fourth = repo.sync()  # the same cluster state renders the same objects: no change
    assert {c.action for c in fourth.changes.changes} == {Action.UNCHANGED}


STATE_MACHINE = katalog("""\
        onReconcile:
          configMaps:
            - name: "{{ .metadata.name }}-pipeline"
              data: {phase: "{{ .status.phase }}"}
          jobs:
            - name: build
              image: busybox
              when: [{field: status.phase, operator: notExists}]
            - name: test
              image: busybox
              when:
                - field: status.phase
                  equals: Running/build
                - field: '{{ get .children.jobs "build" "status" "succeeded" }}'
                  greaterThan: "0"
        status:
          fields:
            - path: phase
              value: Running/build
              when: [{field: status.phase, operator: notExists}]
            - path: phase
              value: Running/test
              when:
                - field: status.phase
                  equals: Running/build
                - field: '{{ get .children.jobs "build" "status" "succeeded" }}'
                  greaterThan: "0"
            - path: phase
              value: Succeeded
              when:
                - field: status.phase
                  equals: Running/test
                - field: '{{ get .children.jobs "test" "status" "succeeded" }}'
                  greaterThan: "0"
""")


def test_jobs_gated_on_the_phase_and_on_earlier_jobs_converge_like_a_state_machine(
        kube: Kube, repo: Repo, ns: str) -> None:
    repo.write({"katalog.yaml": STATE_MACHINE, "crd.yaml": CRD, "p.yaml": widget("p", ns)})
    pipeline, build, test = (ref("Widget", "p", ns), ref("Job", "build", ns),
                             ref("Job", "test", ns))

    def phase() -> str:
        return str((must(kube, pipeline).get("status") or {}).get("phase", ""))

    repo.sync()
    assert must(kube, build) and get(kube, test) is None
    assert phase() == "Running/build"
    repo.sync()  # build not finished: nothing moves (the build Job is kept, not re-created)
    assert phase() == "Running/build" and get(kube, test) is None
    assert data(kube, ref("ConfigMap", "p-pipeline", ns)) == {"phase": "Running/build"}

    finish_job(kube, build)
    repo.sync()  # the render sees the build's success (a child whose entry is now false)
    assert get(kube, test) is not None
    assert phase() == "Running/test"  # and so do the status fields
    repo.sync()
    assert phase() == "Running/test"

    finish_job(kube, test)
    repo.sync()
    assert phase() == "Succeeded"
    assert get(kube, build) is not None  # Jobs whose condition turned false stay


# --- .cross --------------------------------------------------------------------------------------


CROSS = katalog("""\
        cross:
          - crd: widget
            as: db
            selector: {name: "{{ .spec.database }}"}
        onReconcile:
          configMaps:
            - name: "{{ .metadata.name }}-link"
              data:
                dbPhase: "{{ .cross.db.status.phase }}"
                dbEngine: "{{ .cross.db.spec.engine }}"
        status:
          fields:
            - path: dbPhase
              value: "{{ .cross.db.status.phase }}"
""")


def test_cross_sees_the_other_custom_resources_live_status_with_the_repositorys_spec(
        kube: Kube, repo: Repo, ns: str) -> None:
    repo.write({"katalog.yaml": CROSS, "crd.yaml": CRD,
                "db.yaml": widget("db", ns, engine="postgres"),
                "app.yaml": widget("app", ns, database="db")})
    link, app, db = (ref("ConfigMap", "app-link", ns), ref("Widget", "app", ns),
                     ref("Widget", "db", ns))
    first = repo.sync()
    assert not first.changes.failed, first.changes.failed
    assert data(kube, link) == {"dbPhase": "", "dbEngine": "postgres"}

    patch(kube, db, {"status": {"phase": "Available"}}, subresource="status")
    repo.sync()
    assert data(kube, link) == {"dbPhase": "Available", "dbEngine": "postgres"}
    assert must(kube, app)["status"]["dbPhase"] == "Available"  # status fields see it too


def test_render_live_reads_the_cluster_only_when_asked(
        control_plane: ControlPlane, kube: Kube, repo: Repo, ns: str, tmp_path: Path) -> None:
    repo.write({"katalog.yaml": CHILD_GATED, "crd.yaml": CRD, "w.yaml": widget("w", ns)})
    repo.sync()
    finish_job(kube, ref("Job", "w-build", ns))

    def rendered(*flags: str) -> dict[str, str]:
        out = tmp_path / f"out{len(flags)}"
        proc = subprocess.run([sys.executable, "-m", "orksync", "render", str(repo.root),
                               "-o", str(out), *flags], capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stderr
        path = out / f"children/Widget.test.orksync.io/{ns}/w/ConfigMap.{ns}.w-report.yaml"
        return dict(yaml.safe_load(path.read_text())["data"])

    assert rendered() == {"succeeded": "", "jobs": "0"}  # offline: no children
    assert rendered("--live", "--kubeconfig", str(control_plane.kubeconfig)) == \
        {"succeeded": "1", "jobs": "1"}


# --- autoscale -----------------------------------------------------------------------------------


AUTOSCALED = katalog("""\
        onReconcile:
          deployments:
            - name: "{{ .metadata.name }}"
              image: nginx
              replicas: "2"
              autoscale:
                min: 1
                max: 4
                cooldown: 1h
                scaleUp:
                  conditions:
                    when: [{field: spec.load, equals: high}]
                  increment: 2
                scaleDown:
                  conditions:
                    when: [{field: spec.load, equals: low}]
                  decrement: 1
          statefulSets:
            - name: "{{ .metadata.name }}-db"
              image: postgres
              autoscale:
                max: 3
                scaleUp:
                  conditions:
                    when: [{field: spec.load, equals: high}]
                  target: 3
""")


def test_autoscale_scales_within_its_bounds_honours_the_cooldown_and_survives_syncs(
        kube: Kube, repo: Repo, ns: str) -> None:
    repo.write({"katalog.yaml": AUTOSCALED, "crd.yaml": CRD,
                "w.yaml": widget("w", ns, load="high")})
    deploy, sts = ref("Deployment", "w", ns), ref("StatefulSet", "w-db", ns)

    first = repo.sync(T0)
    assert not first.changes.failed, first.changes.failed
    assert replicas(kube, deploy) == 2 and replicas(kube, sts) == 1  # the entry's count
    live = must(kube, deploy)
    assert replica_owners(live) == {AUTOSCALER}  # never the workload's own manager
    assert LAST_SCALE_ANNOTATION not in live["metadata"].get("annotations", {})

    up = repo.sync(T0 + timedelta(minutes=1))
    assert replicas(kube, deploy) == 4 and replicas(kube, sts) == 3
    (change,) = changes_of(up, deploy)
    assert change.action is Action.CONFIGURED
    assert change.message == "autoscale: replicas 2 -> 4 (scale up)"
    stamp = must(kube, deploy)["metadata"]["annotations"][LAST_SCALE_ANNOTATION]
    assert stamp == rfc3339(T0 + timedelta(minutes=1))

    steady = repo.sync(T0 + timedelta(minutes=2))  # at max; the apply does not reset it
    assert replicas(kube, deploy) == 4 and replicas(kube, sts) == 3
    assert [c.action for c in changes_of(steady, deploy)] == [Action.UNCHANGED]

    repo.write({"w.yaml": widget("w", ns, load="low")})
    repo.sync(T0 + timedelta(minutes=30))
    assert replicas(kube, deploy) == 4  # in cooldown (1h since the last scale)
    repo.sync(T0 + timedelta(hours=2))
    assert replicas(kube, deploy) == 3  # -1
    repo.sync(T0 + timedelta(hours=2, minutes=1))
    assert replicas(kube, deploy) == 3  # cooldown again
    repo.sync(T0 + timedelta(hours=4))
    repo.sync(T0 + timedelta(hours=6))
    assert replicas(kube, deploy) == 1
    floor = repo.sync(T0 + timedelta(hours=8))
    assert replicas(kube, deploy) == 1  # min
    assert [c.action for c in changes_of(floor, deploy)] == [Action.UNCHANGED]
    assert must(kube, deploy)["metadata"]["annotations"][LAST_SCALE_ANNOTATION] == \
        rfc3339(T0 + timedelta(hours=6))
    assert replicas(kube, sts) == 3  # its scale-up condition is false now, no scale-down


def test_a_workload_that_gains_autoscale_keeps_its_count_through_the_switch(
        kube: Kube, repo: Repo, ns: str) -> None:
    plain = katalog("""\
        onReconcile:
          deployments:
            - name: "{{ .metadata.name }}"
              image: nginx
              replicas: "3"
""")
    repo.write({"katalog.yaml": plain, "crd.yaml": CRD, "w.yaml": widget("w", ns)})
    deploy = ref("Deployment", "w", ns)
    repo.sync()
    before = must(kube, deploy)
    assert before["spec"]["replicas"] == 3 and replica_owners(before) == {"orksync"}

    repo.write({"katalog.yaml": plain + "              autoscale: {max: 5}\n"})
    switched = repo.sync()
    assert not switched.changes.failed, switched.changes.failed
    after = must(kube, deploy)
    assert after["spec"]["replicas"] == 3
    # one write of the Deployment: orksync's apply (its hash annotation changed, and a
    # Deployment's generation follows its annotations); a drop to the default of 1 there
    # and a write of 3 after it would be one more
    assert after["metadata"]["generation"] == before["metadata"]["generation"] + 1
    assert replica_owners(after) == {AUTOSCALER}
    repo.sync()
    assert replicas(kube, deploy) == 3


def test_a_hand_scaled_workload_is_taken_over_at_its_new_count(
        kube: Kube, repo: Repo, ns: str) -> None:
    repo.write({"katalog.yaml": AUTOSCALED, "crd.yaml": CRD,
                "w.yaml": widget("w", ns, load="steady")})
    deploy = ref("Deployment", "w", ns)
    repo.sync(T0)
    patch(kube, deploy, {"spec": {"replicas": 3}}, manager="kubectl")
    repo.sync(T0 + timedelta(minutes=1))
    live = must(kube, deploy)
    assert live["spec"]["replicas"] == 3 and AUTOSCALER in replica_owners(live)
    patch(kube, deploy, {"spec": {"replicas": 9}}, manager="kubectl")
    repo.sync(T0 + timedelta(minutes=2))
    assert replicas(kube, deploy) == 4  # clamped to max


def cross_widgets(repo: Repo, ns: str, apps: range) -> None:
    """Widget `db` and the apps reading its status (`.cross`), each with a Job, synced."""
    repo.write({"katalog.yaml": CROSS.replace("        onReconcile:\n", """\
        onCreate:
          jobs: [{name: "{{ .metadata.name }}-build", image: busybox}]
        onReconcile:
"""), "crd.yaml": CRD, "db.yaml": widget("db", ns, engine="postgres"),
                **{f"app{i}.yaml": widget(f"app{i}", ns, database="db") for i in apps}})
    repo.sync()


def requests_of_a_render(kube: Kube, repo: Repo, *, view: bool = False) -> int:
    """The requests of a live render of the repository (through the agent's view, none of
    whose kinds is watched, with `view`)."""
    catalog = load_repository(repo.root)
    kube.requests = 0  # discovery is cached by the syncs before
    rendered = render_live(kube, catalog,
                           live=WatchedView(Informers(kube), kube) if view else None)
    assert rendered.ok, rendered.errors
    return kube.requests


def test_the_agent_s_view_reads_few_custom_resources_by_name_and_many_by_one_list(
        kube: Kube, repo: Repo, ns: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the agent's view (orksync.cluster.view), lookups its informers cannot answer
    go to its fallback, which GETs the custom resources' own status up to FALLBACK_GETS
    lookups of their kind (a Sync of a few does not read the thousands other Syncs hold),
    then LISTs the kind, so the requests stop growing with their number."""
    monkeypatch.setattr(view_module, "FALLBACK_GETS", 3)
    cross_widgets(repo, ns, range(1))
    # a GET per Widget (its own status, and the cross's), a LIST each of Jobs and
    # ConfigMaps (children, by orksync's label)
    assert requests_of_a_render(kube, repo, view=True) == 2 + 2
    cross_widgets(repo, ns, range(8))
    # 9 Widgets: 3 GETs, then the LIST that answers the other 6
    assert requests_of_a_render(kube, repo, view=True) == 3 + 1 + 2
    cross_widgets(repo, ns, range(20))
    assert requests_of_a_render(kube, repo, view=True) == 3 + 1 + 2  # and for 21


def test_a_live_render_costs_the_same_requests_for_many_custom_resources_as_for_one(
        kube: Kube, repo: Repo, ns: str) -> None:
    cross_widgets(repo, ns, range(1))
    # one LIST each: Widgets (own status and cross), Jobs and ConfigMaps (children)
    assert requests_of_a_render(kube, repo) == 3
    cross_widgets(repo, ns, range(8))
    assert requests_of_a_render(kube, repo) == 3  # the same for 9 custom resources as for 2
