"""The Katalog schema (orksync.katalog.keys): strict at every level, one warning per key
Orkestra knows and orksync does not act on, refusals that say why; the grouped layout of
v0.7.18 (orksync.katalog.layout); `include:`; selection (enabled, namespace, selectors,
preReconcile gates)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orksync.katalog.loader import load_repository
from orksync.render.engine import render_catalog
from tests.helpers import CRD, widget, write_repo

HEAD = """
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: widgets}
"""

ENTRY = """
spec:
  crds:
    widget:
      crdFile: ./crd.yaml
      operatorBox:
        onCreate:
          configMaps:
            - name: "{{ .metadata.name }}-cm"
              data: {a: b}
"""


def load(tmp_path: Path, katalog: str, extra: dict[str, str] | None = None):
    write_repo(tmp_path, {"op/katalog.yaml": katalog, "op/crd.yaml": CRD,
                          "apps/a.yaml": widget("a"), **(extra or {})})
    return load_repository(tmp_path)


def messages(errors: tuple[Exception, ...]) -> list[str]:
    return [str(e) for e in errors]


# --- step 1: strict at every level -----------------------------------------------------

@pytest.mark.parametrize(("where", "text", "field", "nearest"), [
    ("top", HEAD + "secuirty: {}\n" + ENTRY, "secuirty", "security"),
    ("spec", HEAD + ENTRY + "  finalizer: [x]\n", "spec.finalizer", "finalizers"),
    ("entry", HEAD + ENTRY.replace("crdFile:", "crdFlie: ./crd.yaml\n      crdFile:"),
     "spec.crds.widget.crdFlie", "crdFile"),
    ("operatorBox", HEAD + ENTRY.replace("onCreate:", "onCreat:"),
     "spec.crds.widget.operatorBox.onCreat", "onCreate"),
    ("reconciler", HEAD + ENTRY.replace("      operatorBox:\n",
                                        "      operatorBox:\n        reconciler: {workrs: 2}\n"),
     "spec.crds.widget.operatorBox.reconciler.workrs", "workers"),
    ("security", HEAD + "security:\n  namespaceProtection: {allowedNamespace: [a]}\n" + ENTRY,
     "security.namespaceProtection.allowedNamespace", "allowedNamespaces"),
    ("preReconcile", HEAD + ENTRY.replace(
        "      operatorBox:\n",
        "      operatorBox:\n        preReconcile: {reconcileGat: {when: []}}\n"),
     "spec.crds.widget.operatorBox.preReconcile.reconcileGat", "reconcileGate"),
    ("runtime", HEAD + ENTRY.replace(
        "      operatorBox:\n",
        "      operatorBox:\n        runtime: {allowedNamespace: [a]}\n"),
     "spec.crds.widget.operatorBox.runtime.allowedNamespace", "allowedNamespaces"),
    ("admission", HEAD + ENTRY.replace(
        "      operatorBox:\n", "      admission: {validaton: {rules: []}}\n      operatorBox:\n"),
     "spec.crds.widget.admission.validaton", "validation"),
])
def test_an_unknown_key_at_any_level_is_an_error_with_file_line_field_and_nearest_key(
        tmp_path: Path, where: str, text: str, field: str, nearest: str) -> None:
    catalog = load(tmp_path, text)
    found = [m for m in messages(catalog.errors) if field in m]
    assert len(found) == 1, messages(catalog.errors)
    assert found[0].startswith("op/katalog.yaml:"), found[0]
    assert found[0].split()[0].split(":")[1].isdigit(), found[0]  # a line
    assert f"did you mean {nearest!r}" in found[0], found[0]
    assert not catalog.crs  # the entry (or the Katalog) did not load


def test_a_deliberately_unimplemented_key_is_one_warning_naming_file_line_and_why(
        tmp_path: Path) -> None:
    text = HEAD + ENTRY.replace("      operatorBox:\n", "      operatorBox:\n"
                                "        reconciler: {workers: 4, resync: 10s}\n")
    catalog = load(tmp_path, text)
    assert not catalog.errors
    workers = [w for w in catalog.warnings if ".reconciler.workers" in w]
    assert workers == [
        "op/katalog.yaml:10: Katalog/widgets: spec.crds.widget.operatorBox.reconciler.workers:"
        " accepted, not acted on: a setting of Orkestra's controller process; orksync renders"
        " and applies, it runs no informers, queues or workers"], catalog.warnings
    assert len([w for w in catalog.warnings if ".reconciler.resync" in w]) == 1
    rendered = render_catalog(catalog)
    assert "ConfigMap/default/a-cm" in {str(o.ref) for o in rendered.objects}
    # rendering warns no second time
    assert len([w for w in rendered.warnings if ".reconciler.workers" in w]) == 1


@pytest.mark.parametrize(("snippet", "field", "why"), [
    ("reconciler: {hooks: {location: x, function: Y}}", "operatorBox.reconciler.hooks",
     "Go code"),
    ("reconciler: {constructor: {location: x, function: Y}}",
     "operatorBox.reconciler.constructor", "Go code"),
    ("reconcile: {remote: {endpoint: 'http://x'}}", "operatorBox.reconcile.remote",
     "HTTP call"),
    ("reconciler: {default: false}", "operatorBox.reconciler.default", "custom reconciler"),
    ("default: false", "operatorBox.default", "custom reconciler"),
    ("reconcile: {default: false}", "operatorBox.reconcile.default", "custom reconciler"),
])
def test_what_needs_go_code_or_the_network_is_refused_saying_so(
        tmp_path: Path, snippet: str, field: str, why: str) -> None:
    text = HEAD + ENTRY.replace("      operatorBox:\n",
                                f"      operatorBox:\n        {snippet}\n")
    catalog = load(tmp_path, text)
    found = [m for m in messages(catalog.errors) if f"spec.crds.widget.{field}" in m]
    assert len(found) == 1 and why in found[0], messages(catalog.errors)
    assert found[0].startswith("op/katalog.yaml:10 "), found[0]
    assert not catalog.crs


def test_a_non_portable_key_orksync_accepts_warns(tmp_path: Path) -> None:
    text = HEAD + ENTRY.replace("      operatorBox:\n", "      operatorBox:\n"
                                "        validation: {rules: []}\n")
    catalog = load(tmp_path, text)
    assert not catalog.errors
    assert [w for w in catalog.warnings if "not portable" in w] == [
        "op/katalog.yaml:10: Katalog/widgets: spec.crds.widget.operatorBox.validation: not "
        "portable to Orkestra: orksync also reads validation here; Orkestra only on the "
        "CRD entry"]
