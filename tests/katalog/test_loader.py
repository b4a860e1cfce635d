"""Loading repositories: Katalogs of both eras, CRDs, custom resources, and bad input."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from orksync.errors import InputError
from orksync.katalog.loader import load_repository
from tests.helpers import CRD, KATALOG, REPO_EXAMPLE, widget, write_repo


def test_custom_resources_are_found_anywhere_by_api_version_and_kind(tmp_path: Path) -> None:
    write_repo(tmp_path, {"op/katalog.yaml": KATALOG, "op/crd.yaml": CRD,
                          "deep/down/a.yaml": widget("a", image="nginx"),
                          "b.yml": widget("b", "other", image="nginx")})
    catalog = load_repository(tmp_path)
    assert not catalog.errors
    assert [str(cr.ref) for cr in catalog.crs] == [
        "Widget.test.orksync.io/default/a", "Widget.test.orksync.io/other/b"]
    assert catalog.crs[0].source.file == "deep/down/a.yaml"


def test_the_bundled_example_repository_loads_without_errors() -> None:
    catalog = load_repository(REPO_EXAMPLE)
    assert not catalog.errors and not catalog.warnings
    assert {cr.ref.name for cr in catalog.crs} == {"shop", "blog"}
    assert [m.name for m in catalog.crds] == ["webapps.platform.example.com"]


@pytest.mark.parametrize("example", ["hello-website", "once-secret", "when-conditions",
                                     "secret-copy"])
def test_every_orkestra_example_loads(example: str, orkestra_examples: Path) -> None:
    catalog = load_repository(orkestra_examples / example)
    assert not catalog.errors
    assert len(catalog.katalogs) == 1 and len(catalog.crs) == 1


def test_an_old_era_katalog_takes_its_types_from_api_types(orkestra_examples: Path) -> None:
    catalog = load_repository(orkestra_examples / "when-conditions")
    entry = catalog.katalogs[0].crds[0]
    assert (entry.api_version, entry.kind, entry.plural) == (
        "demo.orkestra.io/v1alpha1", "Platform", "platforms")


def test_a_cluster_scoped_custom_resource_loses_its_namespace(orkestra_examples: Path) -> None:
    catalog = load_repository(orkestra_examples / "secret-copy")
    assert catalog.crs[0].ref.namespace == ""
    assert "namespace" not in catalog.crs[0].body["metadata"]


def test_the_list_form_of_spec_crds_is_accepted(tmp_path: Path) -> None:
    write_repo(tmp_path, {"k.yaml": """
        apiVersion: orkestra.konductor.io/v1Alpha
        kind: Katalog
        metadata: {name: old}
        spec:
          crds:
            - name: widget
              apiTypes: {group: test.orksync.io, version: v1, kind: Widget, plural: widgets}
        """, "w.yaml": widget("w")})
    catalog = load_repository(tmp_path)
    assert not catalog.errors
    assert catalog.katalogs[0].crds[0].key == "widget" and len(catalog.crs) == 1


def test_invalid_yaml_names_the_file_and_line_and_the_rest_still_loads(tmp_path: Path) -> None:
    write_repo(tmp_path, {"katalog.yaml": KATALOG, "crd.yaml": CRD,
                          "good.yaml": widget("good"),
                          "bad.yaml": "apiVersion: v1\nkind: [unclosed\nmetadata: {}\n"})
    catalog = load_repository(tmp_path)
    assert [cr.ref.name for cr in catalog.crs] == ["good"]
    (err,) = catalog.errors
    assert str(err).startswith("bad.yaml:3") and "invalid YAML" in str(err)


def test_a_duplicate_key_is_an_error(tmp_path: Path) -> None:
    write_repo(tmp_path, {"katalog.yaml": KATALOG, "crd.yaml": CRD,
                          "w.yaml": widget("w") + "spec: {}\n"})
    (err,) = load_repository(tmp_path).errors
    assert "w.yaml" in str(err) and "duplicate key" in str(err)


def test_a_custom_resource_with_an_invalid_name_names_the_field(tmp_path: Path) -> None:
    write_repo(tmp_path, {"katalog.yaml": KATALOG, "crd.yaml": CRD,
                          "w.yaml": widget("Bad_Name")})
    (err,) = load_repository(tmp_path).errors
    assert isinstance(err, InputError)
    assert err.file == "w.yaml" and err.line == 4 and err.path == "metadata.name"
    assert "Widget/default/Bad_Name" in str(err)


def test_a_crd_file_outside_the_repository_is_refused(tmp_path: Path) -> None:
    (tmp_path / "outside.yaml").write_text(CRD)
    repo = write_repo(tmp_path / "repo", {"k.yaml": KATALOG.replace("./crd.yaml",
                                                                     "../outside.yaml")})
    (err,) = load_repository(repo).errors
    assert "points outside the repository" in str(err)
    assert "spec.crds.widget.crdFile" in str(err)


def test_the_same_custom_resource_twice_keeps_the_first_and_reports_the_second(
        tmp_path: Path) -> None:
    write_repo(tmp_path, {"katalog.yaml": KATALOG, "crd.yaml": CRD,
                          "a.yaml": widget("w", image="one"), "b.yaml": widget("w")})
    catalog = load_repository(tmp_path)
    assert catalog.crs[0].body["spec"] == {"image": "one"}
    (err,) = catalog.errors
    assert "b.yaml" in str(err) and "duplicate of a.yaml" in str(err)


def test_a_file_linked_into_the_repository_is_loaded_once_as_itself(tmp_path: Path) -> None:
    """A symbolic link to a file is read through (the walk's listing says it is a link:
    the loader resolves it, and a file seen twice, as itself and through a link, is one
    file, never two copies of its custom resources)."""
    write_repo(tmp_path, {"op/katalog.yaml": KATALOG, "op/crd.yaml": CRD,
                          "crs/a.yaml": widget("a", image="nginx")})
    (tmp_path / "crs" / "z-alias.yaml").symlink_to(tmp_path / "crs" / "a.yaml")
    outside = tmp_path.parent / f"{tmp_path.name}-outside.yaml"
    outside.write_text(widget("b", image="nginx"))
    (tmp_path / "crs" / "b.yaml").symlink_to(outside)
    catalog = load_repository(tmp_path)
    assert not catalog.errors and not catalog.warnings
    assert [(cr.ref.name, cr.source.file) for cr in catalog.crs] == [
        ("a", "crs/a.yaml"), ("b", str(outside.resolve()))]


def test_binary_and_oversized_files_are_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "blob.yaml").write_bytes(b"\x00\x01\x02")
    (tmp_path / "huge.yaml").write_text("a: " + "x" * (5 * 1024 * 1024))
    errors = sorted(str(e) for e in load_repository(tmp_path).errors)
    assert errors[0].startswith("blob.yaml") and "binary" in errors[0]
    assert errors[1].startswith("huge.yaml") and "limit" in errors[1]


# --- plain manifests -------------------------------------------------------------------------

PLAIN = """\
apiVersion: v1
kind: Namespace
metadata:
  name: platform
  uid: 0b5a  # copied from a live object: dropped
status: {phase: Active}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: reader}
rules: []
"""


def test_documents_no_katalog_handles_are_plain_manifests_checked_by_file_line_and_field(
        tmp_path: Path) -> None:
    write_repo(tmp_path, {"op/katalog.yaml": KATALOG, "op/crd.yaml": CRD,
                          "platform/base.yaml": PLAIN,
                          "values.yaml": "replicas: 3\nimage: nginx\n",  # not a manifest
                          "bad/no-ns.yaml": "apiVersion: v1\nkind: ConfigMap\n"
                                            "metadata: {name: x}\n",
                          "bad/ns-on-cluster.yaml": "apiVersion: v1\nkind: Namespace\n"
                                                    "metadata: {name: y, namespace: z}\n",
                          "bad/kind.yaml": "apiVersion: v1\nkind: config-map\n"
                                           "metadata: {name: x, namespace: a}\n",
                          "bad/twice.yaml": "apiVersion: v1\nkind: Namespace\n"
                                            "metadata: {name: platform}\n"})
    catalog = load_repository(tmp_path)
    assert [str(m.ref) for m in catalog.plain] == ["ClusterRole/reader", "Namespace/platform"]
    assert catalog.plain[1].body == {"apiVersion": "v1", "kind": "Namespace",
                                     "metadata": {"name": "platform"}}
    assert catalog.plain[1].source.file == "bad/twice.yaml"  # the walk's first
    assert sorted(str(e) for e in catalog.errors) == [
        "bad/kind.yaml:2 config-map/a/x kind: not a Kubernetes kind: kind 'config-map' is "
        "not valid (a letter, then at most 62 letters and digits)",
        "bad/no-ns.yaml:3 ConfigMap/x metadata: namespace is not set and a ConfigMap is "
        "namespaced: write its namespace (orksync applies a manifest as it is and does not "
        "guess one)",
        "bad/ns-on-cluster.yaml:3 Namespace/z/y metadata.namespace: a Namespace is "
        "cluster-scoped: it has no namespace",
        "platform/base.yaml:1 Namespace/platform: duplicate of bad/twice.yaml (the first "
        "one is used)"]


def test_setup_apply_files_are_plain_manifests_even_when_ignored(tmp_path: Path) -> None:
    with_setup = KATALOG.replace("      crdFile: ./crd.yaml\n",
                                 "      crdFile: ./crd.yaml\n"
                                 "      setup:\n        apply: [../setup/base.yaml]\n"
                                 "        wait: [{kind: Namespace, name: platform}]\n")
    write_repo(tmp_path, {"op/katalog.yaml": with_setup, "op/crd.yaml": CRD,
                          "setup/base.yaml": PLAIN, ".orksyncignore": "setup/\n"})
    catalog = load_repository(tmp_path)
    assert not catalog.errors
    assert [str(m.ref) for m in catalog.plain] == ["ClusterRole/reader", "Namespace/platform"]
    assert [w for w in catalog.warnings if "setup.wait" in w]
    missing = with_setup.replace("../setup/base.yaml", "../setup/gone.yaml")
    write_repo(tmp_path, {"op/katalog.yaml": missing})
    assert [str(e) for e in load_repository(tmp_path).errors] == [
        "op/katalog.yaml:9 Katalog/widgets spec.crds.widget.setup.apply[0]: file "
        "'../setup/gone.yaml' does not exist"]
    write_repo(tmp_path, {"op/katalog.yaml": with_setup.replace(
        "apply: [../setup/base.yaml]", "apply: ../setup/base.yaml")})
    assert [str(e) for e in load_repository(tmp_path).errors] == [
        "op/katalog.yaml:9 Katalog/widgets spec.crds.widget.setup.apply: must be a list of "
        "file paths, not a string"]


# --- dependsOn -------------------------------------------------------------------------------

GADGET_CRD = CRD.replace("widgets", "gadgets").replace("Widget", "Gadget").replace(
    "widget", "gadget")


def two_entries(depends_on: str, more: str = "") -> str:
    """A Katalog of a `widget` and a `gadget` entry, the gadget's dependsOn as given."""
    return KATALOG + f"""\
    gadget:
      crdFile: ./gadget-crd.yaml
      dependsOn: {depends_on}
      operatorBox:
        onCreate:
          configMaps: [{{name: "{{{{ .metadata.name }}}}-g"}}]
{more}"""


def test_depends_on_names_entries_of_the_katalog_with_a_supported_state(
        tmp_path: Path) -> None:
    write_repo(tmp_path, {"crd.yaml": CRD, "gadget-crd.yaml": GADGET_CRD,
                          "katalog.yaml": two_entries("{widget: healthy}")})
    catalog = load_repository(tmp_path)
    assert not catalog.errors
    gadget = next(e for e in catalog.entries() if e.key == "gadget")
    assert gadget.depends_on == (("widget", "healthy"),)
    cases = {
        "[widgte]": "katalog.yaml:22 Katalog/widgets spec.crds.gadget.dependsOn[0]: names "
                    "'widgte', which is not a CRD entry of this Katalog that loaded (did you "
                    "mean 'widget'?)",
        "{widget: degraded}": "katalog.yaml:22 Katalog/widgets spec.crds.gadget.dependsOn"
                              ".widget: state 'degraded' is not supported: a sync waits for "
                              "a dependency's custom resources to be healthy (healthy, "
                              "ready) or for nothing (started); it has no controller whose "
                              "life cycle could be pending, degraded or deleted",
        "{widget: soon}": "katalog.yaml:22 Katalog/widgets spec.crds.gadget.dependsOn.widget: "
                          "must be one of started, healthy, ready (or Orkestra's pending, "
                          "degraded, deleted), not 'soon'",
        "[gadget]": "katalog.yaml:22 Katalog/widgets spec.crds.gadget.dependsOn: dependsOn "
                    "makes a cycle: gadget -> gadget",
    }
    for depends_on, error in cases.items():
        write_repo(tmp_path, {"katalog.yaml": two_entries(depends_on)})
        catalog = load_repository(tmp_path)
        assert [str(e) for e in catalog.errors] == [error], depends_on
        assert [e.key for e in catalog.entries()] == ["widget"]  # the gadget is not loaded


def test_depends_on_takes_orkestras_map_form_with_a_condition(tmp_path: Path) -> None:
    write_repo(tmp_path, {"crd.yaml": CRD, "gadget-crd.yaml": GADGET_CRD,
                          "katalog.yaml": two_entries("{widget: {condition: healthy}}")})
    catalog = load_repository(tmp_path)
    assert not catalog.errors and not catalog.warnings, (catalog.errors, catalog.warnings)
    gadget = next(e for e in catalog.entries() if e.key == "gadget")
    assert gadget.depends_on == (("widget", "healthy"),)
    write_repo(tmp_path, {"katalog.yaml": two_entries("{widget: {condition: ready, "
                                                      "after: 5m}}")})
    assert [str(e) for e in load_repository(tmp_path).errors] == [
        "katalog.yaml:22 Katalog/widgets spec.crds.gadget.dependsOn.widget.after: unknown "
        "key: a dependency is {condition: <state>} (or the state alone)"]


def test_api_types_of_a_built_in_kind_are_filled_from_orkestras_table(tmp_path: Path) -> None:
    write_repo(tmp_path, {
        "katalog.yaml": "apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\n"
                        "metadata: {name: nsk}\nspec:\n  crds:\n    namespace:\n"
                        "      apiTypes: {kind: Namespace}\n      operatorBox:\n"
                        "        onCreate:\n          configMaps:\n"
                        "            - {name: settings, namespace: \"{{ .metadata.name }}\"}\n"
                        "    deploy:\n      apiTypes: {kind: Deployment}\n",
        "ns.yaml": "apiVersion: v1\nkind: Namespace\nmetadata: {name: team-x}\n"})
    catalog = load_repository(tmp_path)
    assert not catalog.errors, catalog.errors
    by_key = {e.key: e for e in catalog.entries()}
    namespace, deploy = by_key["namespace"], by_key["deploy"]
    assert (namespace.group, namespace.version, namespace.plural, namespace.namespaced) == \
        ("", "v1", "namespaces", False)
    assert (deploy.api_version, deploy.plural, deploy.namespaced) == \
        ("apps/v1", "deployments", True)
    assert [str(cr.ref) for cr in catalog.crs] == ["Namespace/team-x"]  # its resources
    assert not catalog.plain


def test_a_setup_file_in_the_walk_is_read_once_and_outside_it_holds_plain_manifests_only(
        tmp_path: Path) -> None:
    with_setup = KATALOG.replace("      crdFile: ./crd.yaml\n",
                                 "      crdFile: ./crd.yaml\n"
                                 "      setup:\n        apply: [../setup/base.yaml]\n")
    crd_and_namespace = CRD.replace("widgets", "gadgets").replace("Widget", "Gadget").replace(
        "widget", "gadget") + "---\n" + PLAIN.split("---\n")[0]
    write_repo(tmp_path, {"op/katalog.yaml": with_setup, "op/crd.yaml": CRD,
                          "setup/base.yaml": crd_and_namespace})
    catalog = load_repository(tmp_path)
    assert not catalog.errors
    assert sorted(m.name for m in catalog.crds) == ["gadgets.test.orksync.io",
                                                    "widgets.test.orksync.io"]
    assert [str(m.ref) for m in catalog.plain] == ["Namespace/platform"]
    write_repo(tmp_path, {".orksyncignore": "setup/\n"})
    catalog = load_repository(tmp_path)
    assert [str(e) for e in catalog.errors] == [
        "setup/base.yaml:2 CustomResourceDefinition/gadgets.test.orksync.io kind: a "
        "CustomResourceDefinition in a setup.apply file outside the repository's walk "
        "(.orksyncignore lists it) is not read: setup.apply loads plain manifests only"]
    assert [str(m.ref) for m in catalog.plain] == ["Namespace/platform"]


API_TYPES = "      apiTypes: {group: test.orksync.io, version: v1, kind: Widget, plural: widgets}\n"


@pytest.mark.parametrize("broken", [
    # the entry fails: its crdFile is missing, its apiTypes tell the kind
    KATALOG.replace("      crdFile: ./crd.yaml\n",
                    "      crdFile: ./missing.yaml\n" + API_TYPES),
    # the whole Katalog fails (an unknown key outside spec.crds), its crdFile tells the kind
    KATALOG.replace("metadata: {name: widgets}", "metadata: {name: widgets}\nspek: {}"),
    # the entry fails on a dependsOn cycle
    KATALOG.replace("      crdFile: ./crd.yaml\n",
                    "      crdFile: ./crd.yaml\n      dependsOn: [widget]\n"),
])
def test_custom_resources_of_a_katalog_entry_that_did_not_load_are_held_not_plain(
        tmp_path: Path, broken: str) -> None:
    write_repo(tmp_path, {"katalog.yaml": broken, "crd.yaml": CRD,
                          "apps/a.yaml": widget("a", "team-a", image="nginx")})
    catalog = load_repository(tmp_path)
    assert len(catalog.errors) == 1 and str(catalog.errors[0]).startswith("katalog.yaml:")
    assert not catalog.crs and not catalog.plain
    (ref, reason), = catalog.left_out  # neither rendered nor pruned, nor its children
    assert str(ref) == "Widget.test.orksync.io/team-a/a"
    assert reason == f"held: Katalog widgets entry widget did not load ({catalog.errors[0]})"
    assert [w for w in catalog.warnings if w.startswith("apps/a.yaml:1: Widget/team-a/a: not "
                                                        "loaded: Katalog widgets entry widget "
                                                        "did not load (katalog.yaml:")]


def test_a_katalog_whose_crd_file_is_missing_holds_the_kind_its_text_names(
        tmp_path: Path) -> None:
    """The bundled example without its CRD file: neither apiTypes nor a CRD tell the kind,
    the entry's key does (`webapp`: WebApp); a kind of a Kubernetes API group is never
    taken for it."""
    shutil.copytree(REPO_EXAMPLE, tmp_path / "repo")
    (tmp_path / "repo/crds/webapps.yaml").unlink()
    write_repo(tmp_path / "repo", {"platform/more.yaml": (
        "apiVersion: other.example.com/v1\nkind: Gadget\nmetadata: {name: g}\n---\n"
        "apiVersion: networking.k8s.io/v1\nkind: WebApp\nmetadata: {name: w, namespace: a}\n")})
    catalog = load_repository(tmp_path / "repo")
    assert [str(e) for e in catalog.errors] == [
        "katalogs/webapp.yaml:14 Katalog/webapp spec.crds.webapp.crdFile: file "
        "'../crds/webapps.yaml' does not exist"]
    assert sorted(str(ref) for ref, _ in catalog.left_out) == [
        "WebApp.platform.example.com/team-a/shop", "WebApp.platform.example.com/team-b/blog"]
    assert {m.ref.kind for m in catalog.plain} == {
        "Namespace", "ClusterRole", "RoleBinding", "Gadget", "WebApp"}
    assert {m.ref.api_version for m in catalog.plain if m.ref.kind == "WebApp"} == {
        "networking.k8s.io/v1"}


def test_yaml_that_is_no_manifest_is_still_ignored(tmp_path: Path) -> None:
    """A document needs `metadata` and apiVersion or kind (or the same name spelt
    otherwise) to be taken for a manifest missing the other: values files and includes
    stay out of it."""
    write_repo(tmp_path, {"values.yaml": "metadata: {team: a}\nkinds: [web, db]\n",
                          "include.yaml": "functions:\n  - {name: f, expression: x}\n",
                          "half.yaml": "Kind: ConfigMap\nmetadata: {name: a, namespace: b}\n"})
    catalog = load_repository(tmp_path)
    assert [str(e) for e in catalog.errors] == [
        "half.yaml:2 ?/b/a apiVersion: missing: a manifest needs apiVersion and kind, this "
        "one is not applied"]
    assert not catalog.plain


@pytest.mark.parametrize(("insert", "line", "path", "says"), [
    ("      reconciler:\n        constructor: NewWidgetReconciler\n", 9,
     "spec.crds.widget.reconciler.constructor", "needs Go code compiled into an Orkestra"),
    ("      reconciler: {hooks: {preCreate: Check}}\n", 8,
     "spec.crds.widget.reconciler.hooks", "needs Go code compiled into an Orkestra"),
    ("      operatorBox:\n        cross:\n          - as: db\n            crd: widget\n"
     "            source: {url: \"http://other:8080\"}\n", 12,
     "spec.crds.widget.operatorBox.cross[0].source", "reads another Orkestra instance"),
])
def test_go_code_at_the_crd_level_and_a_remote_cross_source_are_refused(
        tmp_path: Path, insert: str, line: int, path: str, says: str) -> None:
    katalog = KATALOG.replace("      crdFile: ./crd.yaml\n", "      crdFile: ./crd.yaml\n"
                              + insert, 1)
    if "operatorBox:\n        cross" in insert:
        katalog = katalog.replace("      operatorBox:\n        onCreate:", "        onCreate:")
    write_repo(tmp_path, {"crd.yaml": CRD, "katalog.yaml": katalog})
    errors = [str(e) for e in load_repository(tmp_path).errors]
    assert len(errors) == 1, errors
    assert errors[0].startswith(f"katalog.yaml:{line} Katalog/widgets {path}: {says}")
    assert errors[0].endswith("not supported")


def test_notes_as_a_list_name_the_form_orkestra_reads(tmp_path: Path) -> None:
    katalog = KATALOG.replace("spec:\n", "notes: [greet]\nspec:\n", 1)
    write_repo(tmp_path, {"crd.yaml": CRD, "katalog.yaml": katalog})
    assert [str(e) for e in load_repository(tmp_path).errors] == [
        "katalog.yaml:4 Katalog/widgets notes: notes must be Orkestra's map notes: "
        "{functions: [{name, expression}]} (orksync also reads a map of name to "
        "expression), not a list (an early form Orkestra no longer reads)"]
