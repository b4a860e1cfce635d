"""Rendering with the live cluster's state: `.children`, the custom resource's own
`.status` and `.cross.<as>.status` (orksync.render.children, resource, cross), through a
LiveView. Pure logic: the view is a dict here; tests/render/test_live_cluster.py does the same
against the real control plane."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orksync.errors import ClusterError, RenderError
from orksync.katalog.loader import load_repository
from orksync.model import MANAGED_SELECTOR, ObjRef, Origin, RenderedSet
from orksync.render.children import PLACEHOLDER, children_map
from orksync.render.engine import render_catalog
from orksync.render.resource import CrRenderer
from orksync.render.templates import templates_for, utc_now
from tests.helpers import CRD, widget, write_repo

WIDGET = "test.orksync.io/v1"

KATALOG = """
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: widgets}
spec:
  crds:
    widget:
      crdFile: ./crd.yaml
      operatorBox:
        cross:
          - crd: widget
            as: db
            selector: {name: "{{ .spec.database }}"}
        onCreate:
          jobs:
            - name: "{{ .metadata.name }}-build"
              image: busybox
            - name: "{{ .metadata.name }}-test"
              image: busybox
              when:
                - field: children.job.status.succeeded
                  greaterThan: "0"
        onReconcile:
          configMaps:
            - name: "{{ .metadata.name }}-report"
              data:
                build: "{{ .children.job.status.succeeded }}"
                jobs: "{{ len .children.jobs }}"
                deployed: "{{ resourceExists .children.deployment }}"
                phase: "{{ .status.phase }}"
                dbPhase: "{{ .cross.db.status.phase }}"
                dbEngine: "{{ .cross.db.spec.engine }}"
          deployments:
            - name: "{{ .metadata.name }}-web"
              image: nginx
              when:
                - field: status.phase
                  equals: Ready
"""


class FakeLive:
    """A LiveView over a dict of objects; `failing` kinds raise like a refused LIST."""

    def __init__(self, objects: list[dict[str, Any]], failing: tuple[str, ...] = ()) -> None:
        self.objects = {ObjRef.of(o): o for o in objects}
        self.failing = failing
        self.lookups: list[tuple[ObjRef, str]] = []

    def get(self, ref: ObjRef, selector: str = "") -> dict[str, Any] | None:
        self.lookups.append((ref, selector))
        if ref.kind in self.failing:
            raise ClusterError("GET failed: 403 Forbidden", subject=ref.kind, status=403)
        return self.objects.get(ref)


def job(name: str, succeeded: int | None = None, ns: str = "default") -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": "batch/v1", "kind": "Job",
                           "metadata": {"name": name, "namespace": ns}}
    if succeeded is not None:
        obj["status"] = {"succeeded": succeeded}
    return obj


def live_widget(name: str, **status: Any) -> dict[str, Any]:
    return {"apiVersion": WIDGET, "kind": "Widget",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"image": "from-the-cluster"}, "status": status}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return write_repo(tmp_path, {"katalog.yaml": KATALOG, "crd.yaml": CRD,
                                 "app.yaml": widget("app", database="db", image="a"),
                                 "db.yaml": widget("db", engine="postgres")})


def render(root: Path, live: FakeLive | None) -> RenderedSet:
    return render_catalog(load_repository(root), live=live)


def data_of(rendered: RenderedSet, name: str) -> dict[str, str]:
    ref = ObjRef(api_version="v1", kind="ConfigMap", namespace="default", name=name)
    (obj,) = [o for o in rendered.objects if o.ref == ref]
    return dict(obj.body["data"])


def names(rendered: RenderedSet) -> set[str]:
    return {str(o.ref) for o in rendered.objects}


def test_an_offline_render_sees_no_children_but_templates_on_them_still_render(
        repo: Path) -> None:
    rendered = render(repo, None)
    assert rendered.ok, rendered.errors
    assert data_of(rendered, "app-report") == {
        "build": "", "jobs": "0", "deployed": "false", "phase": "", "dbPhase": "",
        "dbEngine": "postgres"}
    assert "Job/default/app-test" not in names(rendered)  # gated on a child's status
    assert "Deployment/default/app-web" not in names(rendered)  # gated on own status


def test_a_live_render_sees_the_declared_children_found_live(repo: Path) -> None:
    live = FakeLive([job("app-build", succeeded=1), job("app-test")])
    rendered = render(repo, live)
    assert rendered.ok, rendered.errors
    assert data_of(rendered, "app-report")["build"] == "1"  # the first declared Job
    assert data_of(rendered, "app-report")["jobs"] == "2"
    assert "Job/default/app-test" in names(rendered)  # its condition now holds
    # children are looked up among orksync's objects, one list per kind (the view's job)
    job_lookups = {(r.name, s) for r, s in live.lookups if r.kind == "Job"}
    assert ("app-build", MANAGED_SELECTOR) in job_lookups
    # what .children covered, in declaration order, whatever the conditions (for status)
    assert [(key, child.name) for child, owner, key in rendered.declared
            if owner.name == "app"] == [("jobs", "app-build"), ("jobs", "app-test"),
                                        ("configMaps", "app-report"),
                                        ("deployments", "app-web")]


def test_the_singular_child_is_the_first_declared_one_that_exists(repo: Path) -> None:
    rendered = render(repo, FakeLive([job("app-test", succeeded=7)]))
    # app-build (declared first) does not exist: the singular is app-test
    assert data_of(rendered, "app-report")["build"] == "7"
    assert data_of(rendered, "app-report")["jobs"] == "1"


def test_a_live_render_sees_its_own_status_and_the_cross_status(repo: Path) -> None:
    live = FakeLive([live_widget("app", phase="Ready"), live_widget("db", phase="Available")])
    rendered = render(repo, live)
    data = data_of(rendered, "app-report")
    assert data["phase"] == "Ready" and data["dbPhase"] == "Available"
    assert data["dbEngine"] == "postgres"  # spec from the repository, not the cluster
    assert "Deployment/default/app-web" in names(rendered)  # gated on status.phase


def test_the_same_cluster_state_renders_the_same_objects(repo: Path) -> None:
    objects = [job("app-test", succeeded=1), job("app-build", succeeded=2),
               live_widget("db", phase="x")]
    first = render(repo, FakeLive(objects))
    second = render(repo, FakeLive(list(reversed(objects))))
    assert [(o.ref, o.body) for o in first.objects] == [(o.ref, o.body) for o in second.objects]


def test_a_failed_read_of_the_cluster_fails_only_the_custom_resources_that_needed_it(
        tmp_path: Path) -> None:
    write_repo(tmp_path, {"katalog.yaml": KATALOG, "crd.yaml": CRD,
                          "app.yaml": widget("app", database="db"),
                          "db.yaml": widget("db", engine="postgres")})
    rendered = render(tmp_path, FakeLive([], failing=("Job",)))
    assert len(rendered.errors) == 2  # both custom resources declare Jobs
    assert all(isinstance(e, RenderError) for e in rendered.errors)
    assert "cannot read its children from the cluster" in str(rendered.errors[0])
    assert "403 Forbidden" in str(rendered.errors[0])
    # nothing of them rendered, so nothing is applied, and nothing is marked absent
    assert not [o for o in rendered.objects if o.owner is not None]
    assert not rendered.absent


def test_children_map_gives_plural_maps_singulars_and_placeholders() -> None:
    a = ObjRef(api_version="v1", kind="PersistentVolumeClaim", namespace="n", name="a")
    b = ObjRef(api_version="v1", kind="PersistentVolumeClaim", namespace="n", name="b")
    thing = ObjRef(api_version="x.io/v1", kind="Thing", namespace="n", name="t")
    live_b = {"metadata": {"name": "b"}}
    out = children_map([("persistentVolumeClaims", a), ("persistentVolumeClaims", b),
                        ("custom", thing), ("hpa", ObjRef(api_version="autoscaling/v2",
                                                          kind="HorizontalPodAutoscaler",
                                                          name="h"))], {b: live_b})
    assert out["persistentvolumeclaims"] == {"b": {"metadata": {"name": "b"}, "status": {}}}
    assert out["pvc"] is out["persistentvolumeclaims"]["b"]
    assert out["customs"] == {} and out["custom"] == PLACEHOLDER
    assert out["hpas"] == {} and out["hpa"] == PLACEHOLDER
    assert "status" not in live_b  # the live object itself is not modified


def test_an_offline_render_gives_each_custom_resource_placeholder_maps_of_its_own(
        repo: Path) -> None:
    """Offline, `.children` is what children_map gives with nothing found, in the same
    order, made from a shape kept per operatorBox: every custom resource gets new maps."""
    catalog = load_repository(repo)
    templates = templates_for(catalog.katalogs[0], utc_now)
    first, second = (CrRenderer(cr, templates, Origin(file=cr.source.file))
                     for cr in catalog.crs)
    nothing = ObjRef(api_version="", kind="", name="")
    expected = children_map([(key, nothing) for key in first.declared_keys()], {})
    for renderer in (first, second):
        assert list(renderer.data["children"].items()) == list(expected.items())
    assert set(expected) == {"jobs", "job", "configmaps", "configmap", "deployments",
                             "deployment"}
    for key in expected:
        assert first.data["children"][key] is not second.data["children"][key]
    assert first.data["children"]["job"]["status"] is not \
        second.data["children"]["job"]["status"]


def test_an_offline_render_makes_no_external_call_says_so_and_each_reads_as_not_called(
        tmp_path: Path) -> None:
    """The calls are made by a live render (tests/render/test_external_cluster.py); offline each
    one's result is that of a call not made (Orkestra's shape of a skipped call)."""
    katalog = """
        apiVersion: orkestra.orkspace.io/v1
        kind: Katalog
        metadata: {name: widgets}
        spec:
          crds:
            widget:
              crdFile: ./crd.yaml
              operatorBox:
                onCreate:
                  external:
                    - name: health
                      url: "http://127.0.0.1:9/health"
                  configMaps:
                    - name: "{{ .metadata.name }}-ext"
                      data:
                        keys: "{{ len .external }}"
                  services:
                    - name: "{{ .metadata.name }}-gated"
                      port: "80"
                      when:
                        - field: external.health.status
                          equals: "200"
                    - name: "{{ .metadata.name }}-fallback"
                      port: "80"
                      when:
                        - field: external.health.called
                          equals: "false"
        """
    write_repo(tmp_path, {"katalog.yaml": katalog, "crd.yaml": CRD,
                          "app.yaml": widget("app")})
    rendered = render(tmp_path, None)
    assert rendered.ok, rendered.errors
    (warning,) = [w for w in rendered.warnings if "external" in w]
    assert "HTTP calls are made in a live render only" in warning and "Widget" in warning
    assert data_of(rendered, "app-ext") == {"keys": "1"}
    # conditions on it see a call not made
    assert "Service/default/app-gated" not in names(rendered)
    assert "Service/default/app-fallback" in names(rendered)
