"""The Katalog schema (orksync.katalog.keys): strict at every level, one warning per key
Orkestra knows and orksync does not act on, refusals that say why; the grouped layout of
v0.7.18 (orksync.katalog.layout); `include:`; selection (enabled, namespace, selectors,
preReconcile gates)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orksync.katalog.loader import load_repository
from orksync.render.engine import render_catalog
from tests.helpers import CRD, ROOT, widget, write_repo

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
        " accepted, not acted on: a setting of Orkestra's controller process, not read by "
        "orksync: the agent (`orksync agent`) runs one set of informers, one work queue and "
        "its workers for all Katalogs, tuned by its own flags (`--interval`, "
        "`--resync-interval`, `--repair-workers`), not per Katalog"], catalog.warnings
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


# --- step 2: the grouped layout of v0.7.18 loads like the flat one ---------------------

def entry_with(entry_level: str = "", box_level: str = "") -> str:
    """The Katalog with YAML lines added to the CRD entry and to its operatorBox (each
    given at their own indentation: 6 and 8 spaces)."""
    text = HEAD + ENTRY
    if box_level:
        text = text.replace("      operatorBox:\n", "      operatorBox:\n" + box_level)
    if entry_level:
        text = text.replace("      operatorBox:\n", entry_level + "      operatorBox:\n")
    return text


MOTIF = """
apiVersion: orkestra.orkspace.io/v1
kind: Motif
metadata: {name: extra}
resources:
  configMaps:
    - name: "{{ .metadata.name }}-motif"
      data: {from: motif}
"""

# (group, flat spelling, grouped spelling): each pair must load the same entry
LAYOUTS = [
    ("admission.validation",
     ("      validation: {rules: [{field: metadata.name, operator: exists, action: deny}]}\n",
      ""),
     ("      admission:\n        validation: {rules: [{field: metadata.name, operator: exists,"
      " action: deny}]}\n", "")),
    ("admission.mutation",
     ("      mutation: {rules: [{field: spec.tier, default: gold}]}\n", ""),
     ("      admission: {mutation: {rules: [{field: spec.tier, default: gold}]}}\n", "")),
    ("reconcile.imports",
     ("      imports: [{motif: ./motif.yaml}]\n", ""),
     ("", "        reconcile: {imports: [{motif: ./motif.yaml}]}\n")),
    ("reconcile.normalize",
     ("      normalize: {spec: {tier: {default: silver}}}\n", ""),
     ("", "        reconcile: {normalize: {spec: {tier: {default: silver}}}}\n")),
    ("emit.status",
     ("", "        status: {fields: [{path: phase, value: Ready}]}\n"),
     ("", "        emit: {status: {fields: [{path: phase, value: Ready}]}}\n")),
    ("observe.cross",
     ("", "        cross: [{crd: widget, as: peer}]\n"),
     ("", "        observe: {cross: [{crd: widget, as: peer}]}\n")),
    ("runtime.restrictedNamespaces",
     ("      restrictedNamespaces: [kube-system]\n", ""),
     ("", "        runtime: {restrictedNamespaces: [kube-system]}\n")),
    ("runtime.allowedNamespaces",
     ("      allowedNamespaces: [default]\n", ""),
     ("", "        runtime: {allowedNamespaces: [default]}\n")),
    ("runtime.finalizers (warned)",
     ("", "        finalizers: [x.io/f]\n"),
     ("", "        runtime: {finalizers: [x.io/f]}\n")),
    ("reconcile.workers (warned)",
     ("", "        reconciler: {workers: 2}\n"),
     ("", "        reconcile: {workers: 2}\n")),
    ("admission.conversion (warned)",
     ("      conversion: {paths: []}\n", ""),
     ("      admission: {conversion: {paths: []}}\n", "")),
    ("admission.webhooks (warned)",
     ("      webhooks: {validation: false}\n", ""),
     ("      admission: {webhooks: {validation: false}}\n", "")),
    ("observe.watch (warned)",
     ("", "        observe: {watch: [{kind: ConfigMap}]}\n"),
     ("", "        observe: {watch: [{kind: ConfigMap}]}\n")),
    ("runtime.deletionProtection",
     ("      deletionProtection: {protectCRD: false}\n", ""),
     ("", "        runtime: {deletionProtection: {protectCRD: false}}\n")),
    ("runtime.serviceAccountName",
     ("      serviceAccountName: tenant\n", ""),
     ("", "        runtime: {serviceAccountName: tenant}\n")),
    ("emit.status.conditions",
     ("", "        status: {conditions: false, fields: [{path: phase, value: Ready}]}\n"),
     ("", "        emit: {status: {conditions: false, fields: [{path: phase, value: Ready}]}}"
          "\n")),
    ("runtime.ignoreStatusPatch",
     ("      ignoreStatusPatch: true\n", ""),
     ("", "        runtime: {ignoreStatusPatch: true}\n")),
    ("runtime.removeFinalizers (warned)",
     ("      removeFinalizers: true\n", ""),
     ("", "        runtime: {removeFinalizers: true}\n")),
    ("runtime.autoscale (warned)",
     ("", "        autoscale: {min: 1}\n"),
     ("", "        runtime: {autoscale: {min: 1}}\n")),
    ("runtime.rollback (warned)",
     ("", "        rollback: {trigger: {}}\n"),
     ("", "        runtime: {rollback: {trigger: {}}}\n")),
    ("reconcile.resync, queue, requeue, profile (warned)",
     ("", "        reconciler: {resync: 1m, queue: {maxDepth: 5}, requeue: {after: 1m},"
          " profile: conservative}\n"),
     ("", "        reconcile: {resync: 1m, queue: {maxDepth: 5}, requeue: {after: 1m},"
          " profile: conservative}\n")),
    ("reconcile.include",
     ("", "        reconciler: {include: ./reconciler.yaml}\n"),
     ("", "        reconcile: {include: ./reconciler.yaml}\n")),
    ("preReconcile (same place)",
     ("", "        preReconcile: {reconcileGate: {when: [{field: spec.tier, operator: "
          "notExists}]}}\n"),
     ("", "        preReconcile: {reconcileGate: {when: [{field: spec.tier, operator: "
          "notExists}]}}\n")),
]


def _strip_lines(warnings: tuple[str, ...]) -> list[str]:
    """Warnings without their file:line and the layout's path words (the two layouts put
    a setting on different lines and paths; the message must be the same)."""
    out = []
    for w in warnings:
        rest = w.split(": ", 1)[1]
        for word in ("operatorBox.runtime.", "operatorBox.reconcile.", "operatorBox.",
                     "reconciler.", "admission."):
            rest = rest.replace(word, "")
        out.append(rest)
    return sorted(out)


@pytest.mark.parametrize(("group", "flat", "grouped"), LAYOUTS, ids=[g[0] for g in LAYOUTS])
def test_the_grouped_layout_loads_and_renders_like_the_flat_one(
        tmp_path: Path, group: str, flat: tuple[str, str], grouped: tuple[str, str]) -> None:
    results = []
    for name, (entry_level, box_level) in (("flat", flat), ("grouped", grouped)):
        root = tmp_path / name
        catalog = load(root, entry_with(entry_level, box_level), {
            "op/motif.yaml": MOTIF, "op/reconciler.yaml": "reconciler: {workers: 3}\n"})
        assert not catalog.errors, messages(catalog.errors)
        (entry,) = catalog.entries()
        rendered = render_catalog(catalog)
        assert not rendered.errors, messages(rendered.errors)
        results.append((entry.raw, entry.operator_box, entry.tenancy, entry.selection,
                        sorted(str(o.ref) for o in rendered.objects),
                        sorted(map(str, rendered.skipped)), _strip_lines(catalog.warnings)))
    assert results[0] == results[1]


def test_the_same_setting_written_in_both_layouts_is_an_error(tmp_path: Path) -> None:
    catalog = load(tmp_path, entry_with(
        "      restrictedNamespaces: [kube-system]\n",
        "        runtime: {restrictedNamespaces: [kube-public]}\n"))
    assert messages(catalog.errors) == [
        "op/katalog.yaml:11 Katalog/widgets spec.crds.widget.operatorBox.runtime."
        "restrictedNamespaces: set twice: here and at restrictedNamespaces (the flat "
        "layout); write it once"]
    assert not catalog.crs


@pytest.mark.parametrize("layout", ["flat", "grouped"])
def test_the_namespace_guard_refuses_the_same_way_in_both_layouts(
        tmp_path: Path, layout: str) -> None:
    guard = ("      restrictedNamespaces: [team-x]\n", "") if layout == "flat" else \
        ("", "        runtime:\n          restrictedNamespaces: [team-x]\n")
    write_repo(tmp_path, {"apps/x.yaml": widget("x", "team-x")})
    catalog = load(tmp_path, entry_with(*guard))
    assert not catalog.errors, messages(catalog.errors)
    rendered = render_catalog(catalog)
    assert [(str(ref), why) for ref, why in rendered.skipped] == [
        ("Widget.test.orksync.io/team-x/x",
         "namespace team-x is restricted by the Katalog (team-x)")]
    assert "ConfigMap/team-x/x-cm" not in {str(o.ref) for o in rendered.objects}
    assert "ConfigMap/default/a-cm" in {str(o.ref) for o in rendered.objects}


def test_a_bad_guard_in_the_grouped_layout_is_named_where_it_is_written(
        tmp_path: Path) -> None:
    catalog = load(tmp_path, entry_with(
        "", "        runtime:\n          allowedNamespaces: kube-system\n"))
    assert messages(catalog.errors) == [
        "op/katalog.yaml:11 Katalog/widgets spec.crds.widget.operatorBox.runtime."
        "allowedNamespaces: must be a list of strings, not a string"]


# Orkestra's examples/intermediate/08-state-machine/include-katalog.yaml, in its shape:
# reconcile.imports of a motif of Jobs, emit.status.include, admission.validation.include
PIPELINE_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: pipelines.demo.orkestra.io}
spec:
  group: demo.orkestra.io
  scope: Namespaced
  names: {kind: Pipeline, plural: pipelines}
  versions:
    - name: v1alpha1
      served: true
      storage: true
      subresources: {status: {}}
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
"""
PIPELINE = {
    "include-katalog.yaml": """
        apiVersion: orkestra.orkspace.io/v1
        kind: Katalog
        metadata:
          name: pipeline-operator
          author: orkspace
          version: 0.1.0
          description: state machine from include fragments
        spec:
          crds:
            pipeline:
              crdFile: ./crd.yaml
              admission:
                validation:
                  include: ./include/admission.yaml
              operatorBox:
                reconcile:
                  workers: 4
                  resync: 10s
                  queue:
                    maxDepth: 1000
                  imports:
                    - motif: ./motif/resources.yaml
                emit:
                  status:
                    include: ./include/status.yaml
        """,
    "crd.yaml": PIPELINE_CRD,
    "include/admission.yaml": """
        rules:
          - field: spec.image
            operator: exists
            message: "spec.image is required"
            action: deny
        """,
    "include/status.yaml": """
        fields:
          - path: phase
            value: "Pending"
            when:
              - field: status.phase
                operator: notExists
          - path: image
            value: "{{ .spec.image }}"
        """,
    "motif/resources.yaml": """
        apiVersion: orkestra.orkspace.io/v1
        kind: Motif
        metadata: {name: pipeline-resources}
        inputs: []
        resources:
          jobs:
            - name: "{{ .metadata.name }}-build"
              image: "{{ .spec.image }}"
              command: ["sh", "-c", "echo build"]
              when:
                - field: status.phase
                  operator: notExists
              reconcile: false
        """,
    "cr.yaml": """
        apiVersion: demo.orkestra.io/v1alpha1
        kind: Pipeline
        metadata: {name: build-and-test, namespace: default}
        spec:
          image: alpine:3.19
        """,
}


def test_orkestras_include_katalog_example_renders_its_job_and_status(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from orksync.render.engine import templates_for
    from orksync.status.desired import desired_status

    write_repo(tmp_path, PIPELINE)
    catalog = load_repository(tmp_path)
    assert not catalog.errors, messages(catalog.errors)
    assert sorted(w.split(": ", 2)[2].split(":")[0] for w in catalog.warnings) == [
        "spec.crds.pipeline.operatorBox.reconcile.queue",
        "spec.crds.pipeline.operatorBox.reconcile.resync",
        "spec.crds.pipeline.operatorBox.reconcile.workers"]
    rendered = render_catalog(catalog)
    assert not rendered.errors, messages(rendered.errors)
    assert "Job/default/build-and-test-build" in {str(o.ref) for o in rendered.objects}
    (cr,) = catalog.crs
    (katalog,) = catalog.katalogs
    status = desired_status(cr.body, cr.entry, templates_for(katalog, lambda: datetime.now(UTC)),
                            [], revision="abc", render_error=None, now=datetime.now(UTC))
    assert status["phase"] == "Pending" and status["image"] == "alpine:3.19", status
    # the included admission rule is enforced
    write_repo(tmp_path, {"cr.yaml": PIPELINE["cr.yaml"].replace(
        "image: alpine:3.19", "other: x")})
    denied = render_catalog(load_repository(tmp_path))
    assert [e for e in messages(denied.errors) if "spec.image is required" in e], \
        messages(denied.errors)


# --- step 3: include ------------------------------------------------------------------

STATUS_INCLUDE = entry_with("", "        emit:\n          status: {include: ./parts/status.yaml}\n")


def test_an_include_is_resolved_relative_to_the_file_that_holds_it(tmp_path: Path) -> None:
    catalog = load(tmp_path, STATUS_INCLUDE, {
        "op/parts/status.yaml": "include: ./more/base.yaml\nfields: [{path: b, value: '2'}]\n",
        "op/parts/more/base.yaml": "fields: [{path: a, value: '1'}]\n"})
    assert not catalog.errors, messages(catalog.errors)
    (entry,) = catalog.entries()
    assert entry.operator_box["status"] == {"fields": [{"path": "a", "value": "1"},
                                                       {"path": "b", "value": "2"}]}


@pytest.mark.parametrize(("files", "message"), [
    ({"op/parts/status.yaml": "include: ../../../outside.yaml\nfields: []\n"},
     "in op/parts/status.yaml: include '../../../outside.yaml' points outside the repository"),
    ({"op/parts/status.yaml": "include: ./loop.yaml\nfields: []\n",
      "op/parts/loop.yaml": "include: ./status.yaml\nfields: []\n"},
     "in op/parts/status.yaml: in op/parts/loop.yaml: include cycle: op/katalog.yaml -> "
     "op/parts/status.yaml -> op/parts/loop.yaml -> op/parts/status.yaml"),
    ({"op/parts/status.yaml": "feilds: []\n"},
     "include './parts/status.yaml': unknown field 'feilds' (did you mean 'fields'?)"),
    ({}, "include './parts/status.yaml': file does not exist"),
])
def test_a_bad_include_is_an_error_naming_it(tmp_path: Path, files: dict[str, str],
                                            message: str) -> None:
    (tmp_path / "repo").mkdir()
    (tmp_path / "outside.yaml").write_text("fields: []\n")
    catalog = load(tmp_path / "repo", STATUS_INCLUDE, files)
    (err,) = messages(catalog.errors)
    assert err.startswith("op/katalog.yaml:11 Katalog/widgets spec.crds.widget.operatorBox."
                          "emit.status.include: "), err
    assert message in err, err
    assert not catalog.crs


def test_notes_in_orkestras_shape_with_include_are_the_katalogs_functions(
        tmp_path: Path) -> None:
    text = (HEAD + "notes:\n  include: ./notes.yaml\n  functions:\n"
            "    - {name: greet, expression: 'hi {{ .metadata.name }}', description: d}\n"
            + ENTRY.replace("data: {a: b}", "data: {a: '{{ greet }}', b: '{{ shout }}'}"))
    catalog = load(tmp_path, text, {
        "op/notes.yaml": "functions:\n  - {name: shout, expression: 'HEY'}\n"
                         "  - {name: greet, expression: 'replaced'}\n"})
    assert not catalog.errors, messages(catalog.errors)
    assert not [w for w in catalog.warnings if "notes" in w], catalog.warnings
    rendered = render_catalog(catalog)
    (cm,) = [o for o in rendered.objects if str(o.ref) == "ConfigMap/default/a-cm"]
    assert cm.body["data"] == {"a": "hi a", "b": "HEY"}


def test_notes_as_a_plain_map_still_work_and_warn_that_they_are_not_portable(
        tmp_path: Path) -> None:
    text = HEAD + "notes: {greet: 'hi'}\n" + ENTRY
    catalog = load(tmp_path, text)
    assert not catalog.errors
    assert [w for w in catalog.warnings if "notes" in w] == [
        "op/katalog.yaml:4: Katalog/widgets: notes: not portable to Orkestra: notes as a map "
        "of name to expression; Orkestra reads notes: {functions: [{name, expression}]}"]


# --- step 4: selection ----------------------------------------------------------------

def left_out(rendered: object) -> list[tuple[str, str]]:
    return [(str(ref), why) for ref, why in rendered.skipped]  # type: ignore[attr-defined]


SELECTED = {"apps/b.yaml": widget("b", "team-b").replace(
    "metadata:\n", "metadata:\n  labels: {tier: gold}\n")}


@pytest.mark.parametrize(("entry_level", "box_level", "kept", "reason"), [
    ("      enabled: false\n", "", [],
     "left out: Katalog widgets entry widget has enabled: false (op/katalog.yaml)"),
    ("      namespace: team-b\n", "", ["b"],
     "left out: Katalog widgets entry widget: namespace: team-b (the entry watches that "
     "namespace only; this one is in default)"),
    ("      labelSelector: {tier: gold}\n", "", ["b"],
     "left out: Katalog widgets entry widget: labelSelector tier=gold does not match (the "
     "custom resource has no tier)"),
    ("      fieldSelector: {metadata.namespace: team-b}\n", "", ["b"],
     "left out: Katalog widgets entry widget: fieldSelector metadata.namespace=team-b does "
     "not match (the custom resource has metadata.namespace=default)"),
    ("", "        preReconcile:\n          reconcileGate:\n            when:\n"
         "              - {field: metadata.labels.tier, equals: gold}\n", ["b"],
     "left out: preReconcile.reconcileGate does not pass (Orkestra does not reconcile it)"),
    ("", "        preReconcile:\n          enqueueGate:\n            or:\n"
         "              - {field: '{{ .metadata.namespace }}', equals: team-b}\n", ["b"],
     "left out: preReconcile.enqueueGate does not pass (Orkestra does not reconcile it)"),
])
def test_custom_resources_orkestra_would_not_reconcile_are_left_out_and_named(
        tmp_path: Path, entry_level: str, box_level: str, kept: list[str],
        reason: str) -> None:
    catalog = load(tmp_path, entry_with(entry_level, box_level), SELECTED)
    assert not catalog.errors, messages(catalog.errors)
    rendered = render_catalog(catalog)
    assert not rendered.errors, messages(rendered.errors)
    names = {o.ref.name for o in rendered.objects if o.ref.kind == "ConfigMap"}
    assert names == {f"{n}-cm" for n in kept}
    gone = sorted({"a", "b"} - set(kept))
    assert left_out(rendered) == [
        (f"Widget.test.orksync.io/{'default' if n == 'a' else 'team-b'}/{n}", reason)
        for n in gone]
    # a line per custom resource left out, naming its file and line (orksync validate)
    if "preReconcile" not in reason:
        lines = [w for w in rendered.warnings if "left out" in w]
        assert len(lines) == len(gone), rendered.warnings
        assert lines[0].startswith("apps/a.yaml:1: Widget.test.orksync.io/default/a: left "
                                   "out (not rendered, not pruned): "), lines


def test_operator_box_when_and_or_are_ignored_as_orkestra_ignores_them(
        tmp_path: Path) -> None:
    # a condition that no custom resource meets: Orkestra reconciles them all the same
    catalog = load(tmp_path, entry_with("", (
        "        when:\n          - {field: metadata.labels.tier, equals: gold}\n"
        "        or:\n          - {field: metadata.name, equals: nobody}\n")), SELECTED)
    assert not catalog.errors, messages(catalog.errors)
    assert not catalog.warnings, catalog.warnings
    rendered = render_catalog(catalog)
    assert not rendered.errors, messages(rendered.errors)
    assert not rendered.skipped
    assert {o.ref.name for o in rendered.objects if o.ref.kind == "ConfigMap"} == {
        "a-cm", "b-cm"}


def test_entry_labels_are_added_to_each_custom_resource_as_orkestra_adds_them(
        tmp_path: Path) -> None:
    labels = "      labels: {team: '{{ .spec.team }}', tier: gold}\n"
    extra = {"apps/a.yaml": widget("a", team="blue").replace(
                 "metadata:\n", "metadata:\n  labels: {tier: bronze, app: a}\n"),
             "apps/b.yaml": widget("b", team="'not a label value'")}
    catalog = load(tmp_path, entry_with(labels), extra)
    assert not catalog.errors, messages(catalog.errors)
    assert not catalog.warnings, catalog.warnings
    rendered = render_catalog(catalog)
    crs = {o.ref.name: o.body for o in rendered.objects if o.ref.kind == "Widget"}
    # the entry's value wins over the one written in Git, as Orkestra's patch does
    assert crs["a"]["metadata"]["labels"] == {"tier": "gold", "app": "a", "team": "blue"}
    assert "b" not in crs  # its label value is not one: that custom resource fails
    assert messages(rendered.errors) == [
        "op/katalog.yaml:9 Widget.test.orksync.io/default/b spec.crds.widget.labels.team: "
        "label value 'not a label value' is not valid (at most 63 characters of "
        "[A-Za-z0-9-_.])"]


@pytest.mark.parametrize(("labels", "field", "message"), [
    ("{'{{ .spec.k }}': x}", "labels.{{ .spec.k }}",
     "key '{{ .spec.k }}' must be a static label key, not a template"),
    ("{'bad key!': x}", "labels.bad key!", "label key 'bad key!' is not valid"),
    ("{team: [a]}", "labels.team", "must be a label value or a template (a string), not "
     "a list"),
    ("[team]", "labels", "must be a map of label key to value, not a list"),
])
def test_entry_labels_orkestra_refuses_are_an_error_naming_the_field(
        tmp_path: Path, labels: str, field: str, message: str) -> None:
    catalog = load(tmp_path, entry_with(f"      labels: {labels}\n"))
    assert [m for m in messages(catalog.errors) if "labels" in m] == [
        f"op/katalog.yaml:9 Katalog/widgets spec.crds.widget.{field}: {message}"]
    assert not [o for o in render_catalog(catalog).objects if o.ref.kind == "Widget"]


def test_validate_names_each_custom_resource_left_out(tmp_path: Path) -> None:
    import subprocess
    import sys

    write_repo(tmp_path, {"op/katalog.yaml": entry_with("      labelSelector: {tier: gold}\n"),
                          "op/crd.yaml": CRD, "apps/a.yaml": widget("a"), **SELECTED})
    done = subprocess.run([sys.executable, "-m", "orksync", "validate", str(tmp_path)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert ("apps/a.yaml:1: Widget.test.orksync.io/default/a: left out (not rendered, not "
            "pruned): Katalog widgets entry widget: labelSelector tier=gold does not match "
            "(the custom resource has no tier)") in done.stderr, done.stderr


def test_a_left_out_custom_resource_and_its_children_are_not_pruned(tmp_path: Path) -> None:
    from orksync.apply.inventory import Inventory, InventoryEntry, plan_prune
    from orksync.model import ChangeSet

    # rendered (and recorded) while the entry reconciled it; then a selector leaves it out
    before = render_catalog(load(tmp_path, entry_with()))
    old = Inventory.of([InventoryEntry(ref=o.ref, owner=o.owner) for o in before.objects])
    assert "ConfigMap/default/a-cm" in {str(e.ref) for e in old.entries}
    after = render_catalog(load(tmp_path, entry_with("      labelSelector: {tier: gold}\n")))
    assert not after.errors
    plan = plan_prune(old, after, ChangeSet())
    assert not [str(e.ref) for e in plan.delete if "/a" in str(e.ref)], plan.delete
    assert [r for r in plan.refused if r.startswith("ConfigMap/default/a-cm: not pruned: "
                                                    "left out: ")], plan.refused


# --- step 5: the doc is the table ------------------------------------------------------

def test_the_schema_doc_is_the_table() -> None:
    from orksync.katalog.keys import docs_markdown

    doc = (ROOT / "docs" / "katalog-schema.md").read_text()
    start = "<!-- generated from orksync.katalog.keys: do not edit by hand -->\n"
    generated = doc[doc.index(start) + len(start):doc.index("<!-- end of generated table")]
    assert generated == docs_markdown()
    readme = (ROOT / "README.md").read_text()
    assert "(docs/katalog-schema.md)" in readme


def test_any_of_warns_that_the_katalog_is_not_portable_and_still_works(tmp_path: Path) -> None:
    text = entry_with("", "").replace(
        "data: {a: b}", "data: {a: b}\n              anyOf: [{field: metadata.name, "
        "equals: a}]")
    catalog = load(tmp_path, text)
    assert not catalog.errors, messages(catalog.errors)
    assert [w for w in catalog.warnings if "anyOf" in w] == [
        "op/katalog.yaml:14: Katalog/widgets: spec.crds.widget.operatorBox.onCreate."
        "configMaps[0].anyOf: not portable to Orkestra: anyOf was renamed or in v0.7.16, "
        "and Orkestra refuses the old name"]
    assert "ConfigMap/default/a-cm" in {str(o.ref) for o in render_catalog(catalog).objects}


def test_a_problem_of_a_grouped_setting_is_named_where_it_is_written(tmp_path: Path) -> None:
    catalog = load(tmp_path, entry_with(
        "      admission:\n        validation:\n          rules:\n"
        "            - {field: spec.x, operator: sameAs, action: deny}\n"))
    assert not catalog.errors
    rendered = render_catalog(catalog)
    first = messages(rendered.errors)[0]
    assert first.startswith("op/katalog.yaml:12 Katalog/widgets spec.crds.widget.admission."
                            "validation.rules[0]"), first


@pytest.mark.parametrize("box_level", [
    "        status: {conditions: 'no'}\n",
    "        emit: {status: {conditions: 'no'}}\n",
], ids=["flat", "grouped"])
def test_status_conditions_that_is_not_a_boolean_is_an_error_where_it_is_written(
        tmp_path: Path, box_level: str) -> None:
    catalog = load(tmp_path, entry_with("", box_level))
    written = "emit.status" if "emit" in box_level else "status"
    found = [m for m in messages(catalog.errors)
             if f"spec.crds.widget.operatorBox.{written}.conditions" in m]
    assert len(found) == 1 and "must be true or false, not" in found[0], \
        messages(catalog.errors)
    assert found[0].startswith("op/katalog.yaml:10 "), found[0]
    assert not catalog.crs


# --- crossAccess -----------------------------------------------------------------------

CROSS = HEAD + """
spec:
  crds:
    widget:
      crdFile: ./crd.yaml
      operatorBox:
        cross:
          - {crd: widget, as: byName, selector: {name: b}}
          - {crd: widget, as: byLabel, labelSelector: {tier: gold}}
        onCreate:
          configMaps:
            - name: "{{ .metadata.name }}-cm"
              data: {byName: "{{ .cross.byName.found }}", byLabel: "{{ .cross.byLabel.found }}"}
"""


@pytest.mark.parametrize(("katalog_level", "entry_level", "found"), [
    ("", "", "true"),
    ("", "      crossAccess: false\n", "false"),
    ("crossAccess: false\n", "", "false"),
    ("crossAccess: false\n", "      crossAccess: true\n", "true"),
])
def test_cross_access_false_opts_an_entry_out_of_cross_reads(
        tmp_path: Path, katalog_level: str, entry_level: str, found: str) -> None:
    text = katalog_level + CROSS.replace("      crdFile:", entry_level + "      crdFile:")
    b = widget("b").replace("  name: b\n", "  name: b\n  labels: {tier: gold}\n")
    catalog = load(tmp_path, text, {"apps/b.yaml": b})
    assert not catalog.errors, messages(catalog.errors)
    assert not [w for w in catalog.warnings if "crossAccess" in w]
    rendered = render_catalog(catalog)
    assert not rendered.errors, messages(rendered.errors)
    (cm,) = [o.body for o in rendered.objects if str(o.ref) == "ConfigMap/default/a-cm"]
    assert cm["data"] == {"byName": found, "byLabel": found}


@pytest.mark.parametrize(("katalog_level", "entry_level", "field"), [
    ("crossAccess: 'no'\n", "", "crossAccess"),
    ("", "      crossAccess: 'no'\n", "spec.crds.widget.crossAccess"),
])
def test_a_cross_access_that_is_not_a_boolean_is_an_error(
        tmp_path: Path, katalog_level: str, entry_level: str, field: str) -> None:
    text = katalog_level + CROSS.replace("      crdFile:", entry_level + "      crdFile:")
    catalog = load(tmp_path, text)
    found = [m for m in messages(catalog.errors) if f" {field}:" in m]
    assert len(found) == 1 and "must be true or false" in found[0], messages(catalog.errors)
    assert found[0].startswith("op/katalog.yaml:"), found[0]
    assert not catalog.crs
