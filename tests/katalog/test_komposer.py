"""A Komposer (orksync.katalog.komposer): the Katalog files it imports are loaded through
it, once, with its spec.crds overrides merged as Orkestra's merger merges them (both
Katalog layouts); imports that need the network or the environment are refused, and a
broken Komposer loads nothing it imports. One small repository per case, loaded,
rendered and (once) validated by the command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from orksync.katalog.loader import load_repository
from orksync.render.engine import render_catalog
from tests.helpers import CRD, widget, write_repo

KATALOG_FLAT = """
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: widgets}
spec:
  crds:
    widget:
      crdFile: ../crd.yaml
      allowedNamespaces: [default]
      operatorBox:
        onCreate:
          configMaps:
            - name: "{{ .metadata.name }}-cm"
              data: {from: katalog}
"""
KATALOG_GROUPED = KATALOG_FLAT.replace(
    "      allowedNamespaces: [default]\n      operatorBox:\n",
    "      operatorBox:\n        runtime: {allowedNamespaces: [default]}\n")

KOMPOSER = """
apiVersion: orkestra.orkspace.io/v1
kind: Komposer
metadata: {name: platform}
imports:
  files:
    - ./katalogs/widgets.yaml
spec:
  crds:
    widget:
"""
OVERRIDE_FLAT = """
      allowedNamespaces: [team-b]
      operatorBox:
        onCreate:
          configMaps:
            - name: "{{ .metadata.name }}-cm"
              data: {from: komposer}
"""
OVERRIDE_GROUPED = OVERRIDE_FLAT.replace(
    "      allowedNamespaces: [team-b]\n      operatorBox:\n",
    "      operatorBox:\n        runtime: {allowedNamespaces: [team-b]}\n")


def load(tmp_path: Path, komposer: str, katalog: str = KATALOG_FLAT,
         extra: dict[str, str] | None = None):
    write_repo(tmp_path, {"op/komposer.yaml": komposer, "op/katalogs/widgets.yaml": katalog,
                          "op/crd.yaml": CRD, "apps/a.yaml": widget("a"),
                          "apps/b.yaml": widget("b", "team-b"), **(extra or {})})
    return load_repository(tmp_path)


def messages(errors: tuple[Exception, ...]) -> list[str]:
    return [str(e) for e in errors]


def config_maps(rendered: object) -> dict[str, object]:
    return {o.ref.name: o.body.get("data")  # type: ignore[attr-defined]
            for o in rendered.objects if o.ref.kind == "ConfigMap"}  # type: ignore[attr-defined]


@pytest.mark.parametrize("katalog", [KATALOG_FLAT, KATALOG_GROUPED], ids=["flat", "grouped"])
@pytest.mark.parametrize("override", [OVERRIDE_FLAT, OVERRIDE_GROUPED],
                         ids=["override-flat", "override-grouped"])
def test_a_komposer_merges_its_overrides_into_the_katalog_it_imports(
        tmp_path: Path, katalog: str, override: str) -> None:
    catalog = load(tmp_path, KOMPOSER + override.lstrip("\n"), katalog)
    assert not catalog.errors, messages(catalog.errors)
    assert not catalog.warnings, catalog.warnings
    # loaded once, through the Komposer: the walk found the Katalog file too
    entries = [(k.name, e.key) for k in catalog.katalogs for e in k.crds]
    assert entries == [("widgets", "widget")]
    rendered = render_catalog(catalog)
    assert not rendered.errors, messages(rendered.errors)
    # onCreate is replaced whole; the namespace guard is added to (team-b joins default)
    assert config_maps(rendered) == {"a-cm": {"from": "komposer"},
                                     "b-cm": {"from": "komposer"}}


def test_without_the_komposer_the_imported_katalog_loads_on_its_own(tmp_path: Path) -> None:
    write_repo(tmp_path, {"op/katalogs/widgets.yaml": KATALOG_FLAT, "op/crd.yaml": CRD,
                          "apps/a.yaml": widget("a")})
    rendered = render_catalog(load_repository(tmp_path))
    assert config_maps(rendered) == {"a-cm": {"from": "katalog"}}


def test_an_override_with_enabled_false_leaves_the_custom_resources_out(
        tmp_path: Path) -> None:
    catalog = load(tmp_path, KOMPOSER + "      enabled: false\n")
    assert not catalog.errors, messages(catalog.errors)
    rendered = render_catalog(catalog)
    assert config_maps(rendered) == {}
    assert [why for _, why in rendered.skipped] == [
        "left out: Katalog widgets entry widget has enabled: false "
        "(op/katalogs/widgets.yaml)"] * 2


def test_an_override_key_orkestra_does_not_merge_warns_and_the_imported_value_stays(
        tmp_path: Path) -> None:
    catalog = load(tmp_path, KOMPOSER + "      labelSelector: {tier: gold}\n")
    assert not catalog.errors, messages(catalog.errors)
    assert len(catalog.warnings) == 1, catalog.warnings
    assert catalog.warnings[0].startswith(
        "op/komposer.yaml:10: Komposer/platform: spec.crds.widget.labelSelector: not "
        "merged: Orkestra's Komposer merge does not take this key from an override (it "
        "takes apiTypes"), catalog.warnings
    assert catalog.warnings[0].endswith("the value of op/katalogs/widgets.yaml stays")
    rendered = render_catalog(catalog)
    assert config_maps(rendered) == {"a-cm": {"from": "katalog"}}  # no selector: a is in
    assert [why for _, why in rendered.skipped] == [
        "namespace team-b is not in the Katalog's allowedNamespaces (default)"]


def test_a_komposer_entry_naming_no_imported_one_is_a_new_entry(tmp_path: Path) -> None:
    gadget_crd = CRD.replace("widget", "gadget").replace("Widget", "Gadget")
    komposer = KOMPOSER.replace("    widget:\n", """    gadget:
      crdFile: ./gadget-crd.yaml
      operatorBox:
        onCreate:
          configMaps:
            - name: "{{ .metadata.name }}-gadget"
              data: {from: komposer}
""")
    gadget = widget("g").replace("Widget", "Gadget")
    catalog = load(tmp_path, komposer, extra={"op/gadget-crd.yaml": gadget_crd,
                                              "apps/g.yaml": gadget})
    assert not catalog.errors, messages(catalog.errors)
    assert sorted((k.name, e.key) for k in catalog.katalogs for e in k.crds) == [
        ("platform", "gadget"), ("widgets", "widget")]
    rendered = render_catalog(catalog)
    assert config_maps(rendered) == {"a-cm": {"from": "katalog"}, "g-gadget": {
        "from": "komposer"}}


def test_an_override_with_a_misspelt_entry_name_is_an_error_with_the_nearest(
        tmp_path: Path) -> None:
    catalog = load(tmp_path, KOMPOSER.replace("    widget:\n", "    widgte:\n")
                   + "      enabled: false\n")
    assert messages(catalog.errors) == [
        "op/komposer.yaml:9 Komposer/platform spec.crds.widgte: names no entry of the "
        "imported Katalogs (did you mean 'widget'?); as a new entry it needs apiTypes (with "
        "a kind) or crdFile"]


def test_a_broken_override_fails_the_entry_it_overrides_only(tmp_path: Path) -> None:
    katalog = KATALOG_FLAT + """
    other:
      apiTypes: {group: test.orksync.io, version: v1, kind: Other, plural: others}
      operatorBox:
        onCreate:
          configMaps:
            - name: "{{ .metadata.name }}-other"
"""
    other = widget("o").replace("Widget", "Other")
    catalog = load(tmp_path, KOMPOSER + "      operatorBox: {onCreat: {}}\n", katalog,
                   {"apps/o.yaml": other})
    assert messages(catalog.errors) == [
        "op/komposer.yaml:10 Komposer/platform spec.crds.widget.operatorBox.onCreat: "
        "unknown field 'onCreat' (did you mean 'onCreate'?): Orkestra refuses it too"]
    assert [(k.name, e.key) for k in catalog.katalogs for e in k.crds] == [
        ("widgets", "other")]
    rendered = render_catalog(catalog)
    assert set(config_maps(rendered)) == {"o-other"}  # the widgets are not rendered


@pytest.mark.parametrize(("imports", "field", "message"), [
    ("    - https://example.invalid/katalog.yaml\n", "imports.files[1]",
     "not supported by orksync: a remote Katalog needs a download"),
    ("    - url: $WIDGETS_KATALOG\n", "imports.files[1]",
     "not supported by orksync: a $VARIABLE reference reads the environment"),
    ("    - ./komposer.yaml\n", "imports.files[1]",
     "a Komposer cannot import another Komposer (only Katalog files are valid imports): "
     "it imports itself"),
    ("    - ../../outside.yaml\n", "imports.files[1]",
     "'../../outside.yaml' points outside the repository"),
    ("    - ./katalogs/nosuch.yaml\n", "imports.files[1]",
     "file './katalogs/nosuch.yaml' does not exist"),
    ("    - ./crd.yaml\n", "imports.files[1]",
     "'./crd.yaml' holds no Katalog: a Komposer imports files of one Katalog each"),
    ("    - ./katalogs/copy.yaml\n", "imports.files[1]",
     "duplicate CRD 'widget': defined in op/katalogs/widgets.yaml and op/katalogs/copy.yaml: "
     "names must be unique across all imports"),
    ("  helm:\n    - {repo: 'https://charts.example.invalid', chart: widgets}\n",
     "imports.helm", "not supported by orksync: a Helm chart is fetched and rendered"),
    ("  registry:\n    - {url: 'oci://registry.example.invalid/widgets'}\n",
     "imports.registry", "not supported by orksync: an OCI registry is pulled"),
])
def test_an_import_orksync_cannot_read_fails_the_komposer_and_loads_nothing_it_imports(
        tmp_path: Path, imports: str, field: str, message: str) -> None:
    komposer = KOMPOSER.replace("    - ./katalogs/widgets.yaml\n",
                                "    - ./katalogs/widgets.yaml\n" + imports)
    catalog = load(tmp_path, komposer + "      enabled: false\n",
                   extra={"op/katalogs/copy.yaml": KATALOG_FLAT} if "copy" in imports else {})
    found = messages(catalog.errors)
    assert len(found) == 1, found
    assert found[0].startswith("op/komposer.yaml:"), found
    assert f"Komposer/platform {field}: {message}" in found[0], found
    # the imported Katalog is not loaded on its own either (its override would be lost)
    assert not [e for k in catalog.katalogs for e in k.crds if k.name == "widgets"]
    assert not config_maps(render_catalog(catalog))


def test_a_katalog_imported_by_two_komposers_is_an_error_at_the_second(
        tmp_path: Path) -> None:
    second = KOMPOSER.replace("name: platform", "name: second") + "      enabled: false\n"
    catalog = load(tmp_path, KOMPOSER + OVERRIDE_FLAT.lstrip("\n"),
                   extra={"op/z-komposer.yaml": second})
    assert messages(catalog.errors) == [
        "op/z-komposer.yaml:6 Komposer/second imports.files[0]: './katalogs/widgets.yaml' "
        "is composed by Komposer/platform (op/komposer.yaml) already: a Katalog is composed "
        "by one Komposer (its entries would be loaded twice)"]
    assert config_maps(render_catalog(catalog)) == {"a-cm": {"from": "komposer"},
                                                    "b-cm": {"from": "komposer"}}


def test_a_katalog_kind_with_imports_is_refused_as_orkestra_refuses_it(tmp_path: Path) -> None:
    katalog = KATALOG_FLAT.replace("spec:\n", "imports: {files: [./x.yaml]}\nspec:\n")
    write_repo(tmp_path, {"op/katalog.yaml": katalog, "op/crd.yaml": CRD,
                          "apps/a.yaml": widget("a")})
    catalog = load_repository(tmp_path)
    assert [m for m in messages(catalog.errors) if "imports" in m] == [
        "op/katalog.yaml:4 Katalog/widgets imports: not supported by orksync: Orkestra "
        "refuses imports in a kind: Katalog (a Komposer's sources); write kind: Komposer "
        "to compose Katalogs"]


def test_validate_reads_a_komposer(tmp_path: Path) -> None:
    write_repo(tmp_path, {"op/komposer.yaml": KOMPOSER + OVERRIDE_FLAT.lstrip("\n")
                          + "      labelSelector: {tier: gold}\n",
                          "op/katalogs/widgets.yaml": KATALOG_FLAT, "op/crd.yaml": CRD,
                          "apps/a.yaml": widget("a"), "apps/b.yaml": widget("b", "team-b")})
    done = subprocess.run([sys.executable, "-m", "orksync", "validate", str(tmp_path)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "spec.crds.widget.labelSelector: not merged" in done.stderr, done.stderr
    assert "errors=0" in done.stderr + done.stdout, done.stderr


def test_a_problem_of_a_value_an_override_gave_names_the_komposer(tmp_path: Path) -> None:
    catalog = load(tmp_path, KOMPOSER + "      dependsOn: [nosuch]\n")
    assert messages(catalog.errors) == [
        "op/komposer.yaml:10 Komposer/platform spec.crds.widget.dependsOn[0]: names "
        "'nosuch', which is not a CRD entry of this Katalog that loaded"]


def test_the_komposer_security_applies_to_the_entries_it_composes(tmp_path: Path) -> None:
    komposer = KOMPOSER.replace("imports:\n", """security:
  namespaceProtection: {allowedNamespaces: [team-b]}
  deletionProtection: {enabled: true}
imports:
""").replace("    - ./katalogs/widgets.yaml\n",
             "    - url: ./katalogs/widgets.yaml\n    - ./katalogs/../katalogs/widgets.yaml\n")
    catalog = load(tmp_path, komposer)
    assert not catalog.errors, messages(catalog.errors)
    assert not catalog.warnings, catalog.warnings
    assert [(k.name, e.key) for k in catalog.katalogs for e in k.crds] == [
        ("widgets", "widget")]  # the file named twice is read once
    rendered = render_catalog(catalog)
    assert not rendered.errors, messages(rendered.errors)
    # the Komposer's guard is added to the Katalog's own (default), as Orkestra adds it
    assert config_maps(rendered) == {"a-cm": {"from": "katalog"},
                                     "b-cm": {"from": "katalog"}}
    # and its deletion protection replaces the Katalog's (none): the CRD is protected
    crd = [o for o in rendered.objects if o.ref.kind == "CustomResourceDefinition"]
    assert crd[0].body["metadata"]["labels"] == {"orkestra.io/deletion-protection": "true"}


def test_a_warning_about_the_imported_katalog_names_it_even_where_an_override_replaced(
        tmp_path: Path) -> None:
    # both set the reconciler's workers (warned: orksync runs no workers); the override
    # replaces the Katalog's value, and each warning names where it is written
    katalog = KATALOG_FLAT.replace("      operatorBox:\n",
                                   "      operatorBox:\n        reconciler: {workers: 2}\n")
    catalog = load(tmp_path, KOMPOSER + "      operatorBox: {reconciler: {workers: 3}}\n",
                   katalog)
    assert not catalog.errors, messages(catalog.errors)
    assert sorted(w.split(": ")[0] for w in catalog.warnings) == [
        "op/katalogs/widgets.yaml:10", "op/komposer.yaml:10"], catalog.warnings


def test_an_override_crd_file_is_read_from_the_komposer_directory(tmp_path: Path) -> None:
    # ./crd.yaml beside the Komposer (op/), not beside the imported Katalog (op/katalogs/)
    catalog = load(tmp_path, KOMPOSER + "      crdFile: ./crd.yaml\n")
    assert not catalog.errors, messages(catalog.errors)
    assert config_maps(render_catalog(catalog)) == {"a-cm": {"from": "katalog"}}


def test_an_override_crd_file_wins_over_the_imported_entrys_api_types(tmp_path: Path) -> None:
    # the imported entry names Widget by apiTypes; the override's CRD file names Gadget
    by_api_types = KATALOG_FLAT.replace(
        "      crdFile: ../crd.yaml\n",
        "      apiTypes: {group: test.orksync.io, version: v1, kind: Widget, "
        "plural: widgets}\n")
    gadget_crd = CRD.replace("widgets", "gadgets").replace("Widget", "Gadget").replace(
        "widget", "gadget")
    catalog = load(tmp_path, KOMPOSER + "      crdFile: ./gadget-crd.yaml\n", by_api_types,
                   {"op/gadget-crd.yaml": gadget_crd,
                    "apps/a.yaml": widget("a").replace("Widget", "Gadget"),
                    "apps/b.yaml": widget("b", "team-b").replace("Widget", "Gadget")})
    assert not catalog.errors, messages(catalog.errors)
    entry = next(e for e in catalog.entries() if e.key == "widget")
    assert (entry.kind, entry.plural) == ("Gadget", "gadgets")
    assert config_maps(render_catalog(catalog)) == {"a-cm": {"from": "katalog"}}
