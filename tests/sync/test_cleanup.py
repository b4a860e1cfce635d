"""Orkestra's runtime.cleanup, pure parts (orksync.render.cleanup): the live render's
verdict, deleteAfter counted from status.orksync.cleanupConditionsMetAt, the status note,
the load-time checks and the inventory's memory of what it deleted. The sync against a
real control plane is tests/sync/test_cleanup_cluster.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from orksync.apply.inventory import Inventory, InventoryEntry
from orksync.katalog.loader import load_repository
from orksync.model import ObjRef
from orksync.render.cleanup import MET_AT, fingerprint
from orksync.render.engine import render_catalog, templates_for
from orksync.status.desired import desired_status
from tests.helpers import CRD, katalog, widget, write_repo
from tests.render.test_live_render import FakeLive

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

CLEANUP = katalog("""\
        onCreate:
          configMaps: [{name: "{{ .metadata.name }}-config", data: {a: "1"}}]
        runtime:
          cleanup:
            or: [{field: status.phase, equals: Done}, {field: status.phase, equals: Failed}]
""")


def load(tmp_path: Path, text: str = CLEANUP) -> Any:
    write_repo(tmp_path, {"katalog.yaml": text, "crd.yaml": CRD,
                          "w.yaml": widget("w", "ns1", size=1)})
    return load_repository(tmp_path)


def live_cr(catalog: Any, status: dict[str, Any]) -> FakeLive:
    (cr,) = catalog.crs
    return FakeLive([{**cr.body, "status": status}])


def refs(rendered: Any) -> set[str]:
    return {str(o.ref) for o in rendered.objects}


def test_a_live_custom_resource_whose_cleanup_conditions_pass_is_left_to_the_prune(
        tmp_path: Path) -> None:
    catalog = load(tmp_path)
    assert not catalog.errors, catalog.errors
    (cr,) = catalog.crs
    running = render_catalog(catalog, live=live_cr(catalog, {"phase": "Running"}))
    assert {"Widget.test.orksync.io/ns1/w", "ConfigMap/ns1/w-config"} <= refs(running)
    assert running.cleaned == ()
    done = render_catalog(catalog, live=live_cr(catalog, {"phase": "Done"}))
    assert not done.errors, done.errors
    # neither the custom resource nor its children: the prune deletes them
    assert not {"Widget.test.orksync.io/ns1/w", "ConfigMap/ns1/w-config"} & refs(done)
    assert done.cleaned == ((cr.ref, fingerprint(cr.body)),)
    assert [w for w in done.warnings if "runtime.cleanup" in w] == [
        "w.yaml: Widget.test.orksync.io/ns1/w: runtime.cleanup: its conditions pass: deleted "
        "(its onDelete runs), and not applied again while Git holds it unchanged"]
    # an offline render never saw the cluster: it decides nothing
    assert render_catalog(catalog).cleaned == ()


def test_delete_after_counts_from_when_the_conditions_first_passed(tmp_path: Path) -> None:
    catalog = load(tmp_path, CLEANUP.replace(
        "            or: [", "            deleteAfter: 10m\n            or: ["))
    assert not catalog.errors, catalog.errors

    def cleaned(status: dict[str, Any]) -> bool:
        rendered = render_catalog(catalog, live=live_cr(catalog, status), clock=lambda: NOW)
        assert not rendered.errors, rendered.errors
        return bool(rendered.cleaned)

    assert not cleaned({"phase": "Done"})  # not noted yet: the wait starts now
    noted = {"phase": "Done", "orksync": {MET_AT: "2026-01-02T03:00:00Z"}}
    assert not cleaned(noted)  # 4 minutes ago
    assert cleaned({**noted, "orksync": {MET_AT: "2026-01-02T02:50:00Z"}})  # 14 minutes
    assert not cleaned({**noted, "phase": "Running"})


def test_the_status_notes_when_the_cleanup_conditions_first_passed(tmp_path: Path) -> None:
    catalog = load(tmp_path)
    (cr,) = catalog.crs
    templates = templates_for(catalog.katalogs[0], lambda: NOW)

    def status(live_status: dict[str, Any], now: datetime) -> dict[str, Any]:
        live = {**cr.body, "status": live_status}
        return desired_status(live, cr.entry, templates, [], revision="r",
                              render_error=None, now=now)["orksync"]

    assert MET_AT not in status({"phase": "Running"}, NOW)
    first = status({"phase": "Done"}, NOW)
    assert first[MET_AT] == "2026-01-02T03:04:05Z"
    later = status({"phase": "Done", "orksync": first}, NOW + timedelta(hours=1))
    assert later[MET_AT] == "2026-01-02T03:04:05Z"


@pytest.mark.parametrize(("cleanup", "field", "message"), [
    ("{deleteAfter: soon, or: [{field: status.phase, equals: Done}]}",
     "runtime.cleanup.deleteAfter", "not a duration"),
    ("{when: {field: status.phase}}", "runtime.cleanup.when", "must be a list of conditions"),
    ("[a]", "runtime.cleanup", "must be a map"),
    ("{orr: []}", "runtime.cleanup.orr", "did you mean 'or'?"),
    ("{deleteAfter: 1m, or: [{field: status.phase, equals: Done}]}\n"
     "          ignoreStatusPatch: true", "runtime.cleanup.deleteAfter",
     "which ignoreStatusPatch keeps orksync from writing"),
])
def test_a_bad_cleanup_block_is_an_error_naming_file_line_and_field(
        tmp_path: Path, cleanup: str, field: str, message: str) -> None:
    catalog = load(tmp_path, katalog(f"        runtime:\n          cleanup: {cleanup}\n"))
    found = [str(e) for e in catalog.errors if f"operatorBox.{field}" in str(e)]
    assert len(found) == 1 and message in found[0], [str(e) for e in catalog.errors]
    assert found[0].startswith("katalog.yaml:10 "), found[0]
    assert not catalog.crs


def test_the_inventory_remembers_what_cleanup_deleted() -> None:
    w = ObjRef(api_version="test.orksync.io/v1", kind="Widget", namespace="ns1", name="w")
    inventory = Inventory.of([InventoryEntry(ref=w)]).with_cleaned([(w, "abc")])
    back = Inventory.from_configmap(json.loads(json.dumps(inventory.to_configmap("x"))))
    assert back == inventory and back.cleaned == ((w, "abc"),)
    plain = Inventory.of([InventoryEntry(ref=w)])
    assert Inventory.decode(plain.encode()).cleaned == ()
    assert b"cleaned" not in __import__("zlib").decompress(plain.encode())


def test_a_sync_holds_back_what_cleanup_deleted_while_git_holds_it_unchanged(
        tmp_path: Path) -> None:
    import dataclasses

    from orksync.errors import RenderError
    from orksync.sync import hold_cleaned

    catalog = load(tmp_path)
    (cr,) = catalog.crs
    rendered = render_catalog(catalog)
    note = (cr.ref, fingerprint(cr.body))
    old = Inventory().with_cleaned([note])
    held_back, held, kept = hold_cleaned(rendered, old)
    assert held == [note] and kept == []
    assert {str(o.ref) for o in held_back.objects} == {
        "CustomResourceDefinition/widgets.test.orksync.io"}  # no Widget, no ConfigMap
    # changed in Git: a new run, the note is forgotten
    changed = Inventory().with_cleaned([(cr.ref, "another digest")])
    assert hold_cleaned(rendered, changed) == (rendered, [], [])
    # not rendered: gone from Git (forgotten), unless the render failed or left it out
    crds_only = dataclasses.replace(rendered, objects=held_back.objects)
    assert hold_cleaned(crds_only, old) == (crds_only, [], [])
    failed = dataclasses.replace(crds_only, errors=(RenderError("boom"),))
    assert hold_cleaned(failed, old) == (failed, [], [note])
    left_out = dataclasses.replace(crds_only, skipped=((cr.ref, "left out: gate"),))
    assert hold_cleaned(left_out, old) == (left_out, [], [note])
