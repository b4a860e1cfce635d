"""Katalog settings whose effect is on the cluster, in both layouts, against the real
control plane: ignoreStatusPatch (flat) and runtime.ignoreStatusPatch (grouped) write no
status; status.conditions: false (flat operatorBox.status, grouped emit.status) writes no
conditions and no observedGeneration, and takes back those written before."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from orksync.apply.engine import Applier
from orksync.cluster.kube import Kube
from orksync.katalog.loader import load_repository
from orksync.lifecycle.events import report_sync
from orksync.render.engine import render_catalog
from testbed.controlplane import ControlPlane
from tests.helpers import CRD, KATALOG, widget, write_repo

pytestmark = pytest.mark.cluster


@pytest.mark.parametrize(("layout", "setting"), [
    ("flat", ("      crdFile:", "      ignoreStatusPatch: true\n      crdFile:")),
    ("grouped", ("      operatorBox:\n",
                 "      operatorBox:\n        runtime: {ignoreStatusPatch: true}\n")),
    ("none", ("", "")),
])
def test_ignore_status_patch_writes_no_status_in_either_layout(
        control_plane: ControlPlane, tmp_path: Path, layout: str,
        setting: tuple[str, str]) -> None:
    ns = f"s-{uuid.uuid4().hex[:8]}"
    katalog = KATALOG.replace(*setting) if setting[0] else KATALOG
    write_repo(tmp_path, {"katalog.yaml": katalog, "crd.yaml": CRD,
                          "w.yaml": widget("w", ns, image="nginx", port=8080)})
    catalog = load_repository(tmp_path)
    assert not catalog.errors
    rendered = render_catalog(catalog)
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    try:
        changes = Applier(kube).apply(rendered)
        assert not changes.failed
        written = report_sync(kube, catalog, rendered, changes, revision="r")
        live = kube.get(kube.resource("test.orksync.io/v1", "Widget"), ns, "w")
        if layout == "none":
            assert written and live["status"]["orksync"]["lastAppliedRevision"] == "r"
        else:
            assert written == [] and "status" not in live, live.get("status")
    finally:
        kube.close()


@pytest.mark.parametrize(("layout", "block"), [
    ("flat", "        status:\n          conditions: false\n"
             "          fields: [{path: phase, value: Ready}]\n"),
    ("grouped", "        emit:\n          status:\n            conditions: false\n"
                "            fields: [{path: phase, value: Ready}]\n"),
])
def test_status_conditions_false_writes_no_conditions_in_either_layout(
        control_plane: ControlPlane, tmp_path: Path, layout: str, block: str) -> None:
    ns = f"c-{uuid.uuid4().hex[:8]}"
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    try:
        # first with orksync's conditions, then with them turned off
        for katalog in (KATALOG, KATALOG.replace("      operatorBox:\n",
                                                 "      operatorBox:\n" + block)):
            write_repo(tmp_path, {"katalog.yaml": katalog, "crd.yaml": CRD,
                                  "w.yaml": widget("w", ns, image="nginx", port=8080)})
            catalog = load_repository(tmp_path)
            assert not catalog.errors, catalog.errors
            rendered = render_catalog(catalog)
            changes = Applier(kube).apply(rendered)
            assert not changes.failed
            report_sync(kube, catalog, rendered, changes, revision="r")
            status = kube.get(kube.resource("test.orksync.io/v1", "Widget"), ns, "w")["status"]
            if katalog is KATALOG:
                assert {c["type"] for c in status["conditions"]} >= {"Ready", "Stalled"}
                assert "observedGeneration" in status
        assert "conditions" not in status and "observedGeneration" not in status, status
        assert status["phase"] == "Ready"
        assert status["orksync"]["lastAppliedRevision"] == "r"
    finally:
        kube.close()
