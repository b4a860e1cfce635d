"""Templates checked against the CRD (orksync.render.fieldcheck): every `.spec...` and
`.status...` path a Katalog reads that the CRD's schema does not have is a warning naming
file:line, the path and the nearest field; `--strict-fields` makes it an error. The
repository's example and the reference Katalogs give no false warning."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from orksync.cli import main
from orksync.katalog.loader import load_repository
from orksync.render.engine import render_catalog
from orksync.render.fieldcheck import template_misses
from orksync.render.gotemplate import GoTemplateEngine
from orksync.render.notes import builtin_functions
from orksync.render.templates import utc_now
from orksync.secrets.random import PlaceholderRandom
from tests.helpers import REPO_EXAMPLE, crd, write_repo

ENGINE = GoTemplateEngine(builtin_functions(clock=utc_now, random=PlaceholderRandom()))

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {"type": "object", "properties": {
            "tier": {"type": "string"},
            "image": {"type": "string"},
            "port": {"x-kubernetes-int-or-string": True},
            "db": {"type": "object", "properties": {"host": {"type": "string"},
                                                    "size": {"type": "integer"}}},
            "backends": {"type": "array", "items": {
                "type": "object", "properties": {"name": {"type": "string"},
                                                 "port": {"type": "integer"}}}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "zones": {"type": "object", "additionalProperties": {
                "type": "object", "properties": {"replicas": {"type": "integer"}}}},
            "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                      "properties": {"known": {"type": "object", "properties": {
                          "a": {"type": "string"}}}}},
            "free": {"type": "object", "additionalProperties": True},
            "anything": {},
            "template": {"type": "object", "x-kubernetes-embedded-resource": True,
                         "properties": {"spec": {"type": "object", "properties": {
                             "x": {"type": "string"}}}}},
        }},
    },
}


def misses(source: str, schema: dict[str, Any] | None = None) -> list[tuple[str, str]]:
    return [(m.read, m.hint) for m in template_misses(ENGINE, source, schema or SCHEMA)]


def reads(source: str) -> list[str]:
    return [read for read, _ in misses(source)]


def test_a_typo_of_a_spec_field_is_found_with_the_nearest_field() -> None:
    assert misses("{{ .spec.teir }}") == [(".spec.teir", "nearest field: .spec.tier")]
    assert misses("{{ .spec.db.hots }}") == [(".spec.db.hots", "nearest field: .spec.db.host")]


def test_a_path_with_no_near_field_lists_what_exists() -> None:
    assert misses("{{ .spec.db.zzzzzz }}") == [(".spec.db.zzzzzz", ".spec.db has: host, size")]


def test_declared_fields_and_unchecked_roots_give_nothing() -> None:
    assert reads("{{ .spec.tier }}-{{ .spec.db.host }} {{ .spec }} {{ . }} {{ $ }}") == []
    # metadata is the API server's, the rest is data orksync or Orkestra adds
    assert reads("{{ .metadata.nmae }} {{ .children.deployment.status.x }} {{ .item.y }} "
                 "{{ .cross.db.spec.z }} {{ .inputs.q }} {{ .index }}") == []


def test_status_is_checked_unless_the_schema_keeps_unknown_fields() -> None:
    assert reads("{{ .status.phase }}") == [".status"]
    kept = {**SCHEMA, "properties": {**SCHEMA["properties"], "status": {
        "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}
    assert misses("{{ .status.phase }} {{ .status.a.b.c }}", kept) == []


def test_preserve_unknown_fields_additional_properties_and_untyped_schemas() -> None:
    assert reads("{{ .spec.labels.anything }} {{ .spec.free.x.y }} {{ .spec.anything.x }} "
                 "{{ .spec.extra.whatever.deep }} {{ .spec.port }}") == []
    # under x-kubernetes-preserve-unknown-fields the declared fields are still checked
    assert reads("{{ .spec.extra.known.b }}") == [".spec.extra.known.b"]
    # a map's values have the additionalProperties schema
    assert reads("{{ .spec.zones.eu.replicas }} {{ .spec.zones.eu.replicsa }}") == [
        ".spec.zones.eu.replicsa"]
    # an embedded resource's own apiVersion, kind and metadata are not the CRD's
    assert reads("{{ .spec.template.metadata.name }} {{ .spec.template.spec.y }}") == [
        ".spec.template.spec.y"]


def test_a_field_of_a_scalar_is_found() -> None:
    assert misses("{{ .spec.tier.name }} {{ .spec.labels.a.b }}") == [
        (".spec.tier.name", ".spec.tier is a string"),
        (".spec.labels.a.b", ".spec.labels.a is a string")]


def test_arrays_through_index_and_range() -> None:
    assert reads("{{ index .spec.backends 0 }} {{ (index .spec.backends 0).name }}") == []
    assert reads("{{ (index .spec.backends 1).nmae }}") == [".spec.backends[].nmae"]
    assert reads('{{ index .spec "teir" }} {{ index .spec.zones "eu" "replicas" }}') == [
        ".spec.teir"]
    assert reads("{{ range .spec.backends }}{{ .name }}:{{ .port }}{{ end }}") == []
    assert misses("{{ range .spec.backends }}{{ .prot }}{{ end }}") == [
        (".spec.backends[].prot", "nearest field: .spec.backends[].port")]
    # inside range dot is the element: `.spec` there is a field of the element
    assert reads("{{ range .spec.backends }}{{ .spec.tier }}{{ end }}") == [
        ".spec.backends[].spec"]
    # `$` stays the custom resource; the else branch runs with the outer dot
    assert reads("{{ range .spec.backends }}{{ $.spec.teir }}{{ else }}{{ .spec.imgae }}"
                 "{{ end }}") == [".spec.teir", ".spec.imgae"]
    # a map ranges over its values
    assert reads("{{ range .spec.zones }}{{ .replicas }}{{ .replica }}{{ end }}") == [
        ".spec.zones.*.replica"]


def test_with_and_variables_rebind_what_is_known() -> None:
    assert reads("{{ with .spec.db }}{{ .host }}{{ .hots }}{{ else }}{{ .spec.tier }}"
                 "{{ end }}") == [".spec.db.hots"]
    assert reads("{{ $db := .spec.db }}{{ $db.size }}{{ $db.sise }}") == [".spec.db.sise"]
    assert reads("{{ range $i, $b := .spec.backends }}{{ $i }}{{ $b.nme }}{{ end }}") == [
        ".spec.backends[].nme"]
    assert reads("{{ range $b := .spec.backends }}{{ $b.nme }}{{ end }}") == [
        ".spec.backends[].nme"]
    assert reads("{{ if $d := .spec.db }}{{ $d.hots }}{{ end }}") == [".spec.db.hots"]
    assert reads("{{ with .spec.tier }}{{ else with .spec.db }}{{ .hots }}{{ end }}") == [
        ".spec.db.hots"]


def test_pipelines_and_function_arguments_are_read() -> None:
    assert reads('{{ .spec.teir | default "free" }}') == [".spec.teir"]
    assert reads('{{ printf "%s-%s" .spec.tier .spec.imgae | upper }}') == [".spec.imgae"]
    assert reads("{{ if eq .spec.teir \"pro\" }}x{{ end }}") == [".spec.teir"]


def test_unsure_means_no_warning() -> None:
    # a function's result, a variable assigned again, a range over the unknown
    assert reads("{{ with fromJson .spec.tier }}{{ .anything }}{{ end }}") == []
    assert reads("{{ range split .spec.tier \",\" }}{{ .x }}{{ end }}") == []
    assert reads("{{ $x := .spec.db }}{{ if true }}{{ $x = .spec.backends }}{{ end }}"
                 "{{ $x.host }}{{ $x.anything }}") == []
    assert reads("{{ range .spec.labels }}{{ .x }}{{ end }}") == [".spec.labels.*.x"]
    # a template that does not parse is reported elsewhere, as an error
    assert reads("{{ .spec.teir ") == []


def test_a_foreach_element_is_checked_against_the_items_of_its_field() -> None:
    def each(source: str, field: str, alias: str = "item") -> list[str]:
        return [m.read for m in template_misses(ENGINE, source, SCHEMA, each=(field, alias))]

    assert each("{{ .item.name }} {{ .b.port }} {{ .index }} {{ .item.nmae }} {{ .b.prot }}",
                "spec.backends", "b") == [".spec.backends[].nmae", ".spec.backends[].prot"]
    # a map's element is also .value; the key is not checked
    assert each("{{ .key }} {{ .value.replicas }} {{ .z.replica }}", "spec.zones", "z") == [
        ".spec.zones.*.replica"]
    # `.value` is not the element of a list; an element of unknown schema is not checked
    assert each("{{ .value.nmae }}", "spec.backends") == []
    assert each("{{ .item.x }}", "spec.free") == []
    assert each("{{ .item.x }}", "spec.nothere") == []


def test_defined_templates_are_checked_with_the_value_passed() -> None:
    assert reads('{{ define "db" }}{{ .host }}{{ .hots }}{{ $.size }}{{ end }}'
                 '{{ template "db" .spec.db }}') == [".spec.db.hots"]
    # never called: dot unknown, nothing to say; a recursive one ends
    assert reads('{{ define "x" }}{{ .hots }}{{ end }}{{ .spec.tier }}') == []
    assert reads('{{ define "r" }}{{ .teir }}{{ template "r" . }}{{ end }}'
                 '{{ template "r" .spec }}') == [".spec.teir"]
    assert reads('{{ block "b" .spec }}{{ .imgae }}{{ end }}') == [".spec.imgae"]


def test_a_template_the_render_refuses_for_its_size_is_not_walked() -> None:
    # more actions than a render compiles (MAX_ACTIONS): refused there, not parsed here
    assert reads("{{ .spec.teir }}" * 5_001) == []
    assert len(reads("{{ .spec.teir }}" * 3)) == 3  # one per place


# --- through the load and the render ---------------------------------------------------

CRD = crd("Shop", properties="""
    spec:
      type: object
      properties:
        tier: {type: string}
        image: {type: string}
        backends:
          type: array
          items:
            type: object
            properties:
              name: {type: string}
    status:
      type: object
      properties:
        phase: {type: string}
""")

# line numbers matter: the test names them
KATALOG = """\
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: shops}
spec:
  crds:
    shop:
      crdFile: ./crd.yaml
      normalize:
        spec:
          flavour: "{{ .spec.tier }}"
      mutation:
        rules:
          - field: spec.size
            default: "1"
      operatorBox:
        status:
          fields:
            - path: phase
              value: "{{ .status.phase }}{{ .status.phsae }}"
        onCreate:
          configMaps:
            - name: "{{ .metadata.name }}"
              data:
                tier: "{{ .spec.teir }}-{{ .spec.teir }}"
                extra: "{{ .spec.flavour }}{{ .spec.size }}"
                script: |
                  first line {{ .spec.image }}
                  {{ range .spec.backends }}{{ .nmae }}{{ end }}
              when:
                - field: spec.imgae
                  operator: exists
            - name: "{{ .metadata.name }}-{{ .item.name }}{{ .item.nmae }}"
              forEach: {field: spec.backends}
"""

CR = """
apiVersion: test.orksync.io/v1
kind: Shop
metadata: {name: a, namespace: default}
spec: {tier: pro, image: nginx, backends: [{name: b1}]}
"""


def shop_repo(root: Path) -> Path:
    return write_repo(root, {"crd.yaml": CRD, "katalog.yaml": KATALOG, "shop.yaml": CR})


def test_seeded_typos_warn_with_file_line_path_and_nearest_field(tmp_path: Path) -> None:
    rendered = render_catalog(load_repository(shop_repo(tmp_path)))
    assert not rendered.errors
    # once per path and line (`tier` reads .spec.teir twice)
    schema = "the schema of Shop test.orksync.io/v1 (crd.yaml) does not have"
    box = "Katalog/shops spec.crds.shop.operatorBox"
    assert [w for w in rendered.warnings if schema in w] == [
        f"katalog.yaml:19 {box}.status.fields[0].value: reads .status.phsae, which {schema} "
        "(nearest field: .status.phase)",
        f"katalog.yaml:24 {box}.onCreate.configMaps[0].data.tier: reads .spec.teir, which "
        f"{schema} (nearest field: .spec.tier)",
        f"katalog.yaml:28 {box}.onCreate.configMaps[0].data.script: reads "
        f".spec.backends[].nmae, which {schema} (nearest field: .spec.backends[].name)",
        f"katalog.yaml:30 {box}.onCreate.configMaps[0].when[0].field: reads .spec.imgae, "
        f"which {schema} (nearest field: .spec.image)",
        f"katalog.yaml:32 {box}.onCreate.configMaps[1].name: reads .spec.backends[].nmae, "
        f"which {schema} (nearest field: .spec.backends[].name)",
    ]
    # warnings: the custom resource still renders; the ConfigMap whose condition reads the
    # typo is left out, as it always would be (the condition never holds)
    assert {o.ref.name for o in rendered.objects if o.ref.kind == "ConfigMap"} == {"a-b1"}


def test_strict_fields_makes_them_errors_of_the_entry_only(tmp_path: Path) -> None:
    shop_repo(tmp_path)
    write_repo(tmp_path, {
        "other/crd.yaml": CRD.replace("shops", "stores").replace("Shop", "Store")
                             .replace("shop", "store"),
        "other/katalog.yaml": """
            apiVersion: orkestra.orkspace.io/v1
            kind: Katalog
            metadata: {name: stores}
            spec:
              crds:
                store:
                  crdFile: ./crd.yaml
                  operatorBox:
                    onCreate:
                      configMaps:
                        - name: "{{ .metadata.name }}"
                          data: {tier: "{{ .spec.tier }}"}
            """,
        "other/store.yaml": CR.replace("Shop", "Store"),
    })
    rendered = render_catalog(load_repository(tmp_path), strict_fields=True)
    field_errors = [e for e in rendered.errors if "does not have" in str(e)]
    assert len(field_errors) == 5
    assert all(e.file == "katalog.yaml" and e.line for e in field_errors)
    assert not any("does not have" in w for w in rendered.warnings)
    # the broken entry's custom resource is not rendered; the other Katalog's is
    names = {(o.ref.kind, o.ref.name) for o in rendered.objects}
    assert ("Store", "a") in names and ("ConfigMap", "a") in names
    assert ("Shop", "a") not in names and ("ConfigMap", "a-b1") not in names
    assert [e.detail for e in rendered.errors if e.file == "shop.yaml"] == [
        "not rendered: Katalog shops entry shop has 5 error(s), reported above"]


def test_validate_and_render_warn_and_strict_fields_fails_them(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    repo = shop_repo(tmp_path / "repo")
    assert main(["validate", str(repo)]) == 0
    assert "warning: katalog.yaml:24 Katalog/shops spec.crds.shop.operatorBox.onCreate." \
        "configMaps[0].data.tier: reads .spec.teir" in capfd.readouterr().err
    assert main(["validate", str(repo), "--strict-fields"]) == 1
    assert "error: katalog.yaml:24 Katalog/shops" in capfd.readouterr().err
    assert main(["render", str(repo), "-o", str(tmp_path / "out")]) == 0
    assert "warning: katalog.yaml:24 Katalog/shops" in capfd.readouterr().err
    assert main(["render", str(repo), "-o", str(tmp_path / "out2"), "--strict-fields"]) == 1
    assert "error: katalog.yaml:24 Katalog/shops" in capfd.readouterr().err


def test_a_katalog_full_of_typos_lists_a_hundred_and_counts_the_rest(tmp_path: Path) -> None:
    data = "".join(f"\n                k{i}: \"{{{{ .spec.f{i} }}}}\"" for i in range(150))
    write_repo(tmp_path, {"crd.yaml": CRD, "shop.yaml": CR, "katalog.yaml": KATALOG.replace(
        "              data:\n", "              data:" + data + "\n", 1)})
    warnings = [w for w in render_catalog(load_repository(tmp_path)).warnings
                if "schema of Shop" in w]
    assert len(warnings) == 101
    assert warnings[-1] == ("katalog.yaml Katalog/shops spec.crds.shop: 55 more paths read "
                            "that the schema of Shop test.orksync.io/v1 (crd.yaml) does not "
                            "have, not listed")


def test_a_template_imported_from_a_motif_names_the_motif_file(tmp_path: Path) -> None:
    write_repo(tmp_path, {"crd.yaml": CRD, "shop.yaml": CR, "motifs/cache.yaml": """
        apiVersion: orkestra.orkspace.io/v1
        kind: Motif
        metadata: {name: cache}
        inputs:
          - {name: image, default: redis}
        resources:
          configMaps:
            - name: "{{ .metadata.name }}-cache"
              data: {tier: "{{ .spec.teir }}", image: "{{ .inputs.image }}"}
              when:
                - {field: spec.tire, operator: exists}
        """, "katalog.yaml": """
        apiVersion: orkestra.orkspace.io/v1
        kind: Katalog
        metadata: {name: shops}
        spec:
          crds:
            shop:
              crdFile: ./crd.yaml
              imports: [{motif: ./motifs/cache.yaml}]
              operatorBox: {onCreate: {configMaps: [{name: own, data: {a: "{{ .spec.tier }}"}}]}}
        """})
    warnings = [w for w in render_catalog(load_repository(tmp_path)).warnings
                if "schema of Shop" in w]
    assert [w.split(": reads ")[0] for w in warnings] == [
        "motifs/cache.yaml Katalog/shops spec.crds.shop.operatorBox.onReconcile.configMaps[0]"
        ".data.tier",
        "motifs/cache.yaml Katalog/shops spec.crds.shop.operatorBox.onReconcile.configMaps[0]"
        ".when[0].field"]
    assert [w.split(": reads ")[1].split(",")[0] for w in warnings] == [".spec.teir",
                                                                       ".spec.tire"]


def test_no_warning_on_the_repository_example() -> None:
    rendered = render_catalog(load_repository(REPO_EXAMPLE))
    assert not [w for w in rendered.warnings if "does not have" in w]


def test_no_false_warning_on_the_reference_katalogs(orkestra_examples: Path) -> None:
    found: dict[str, list[str]] = {}
    for folder in sorted(p for p in orkestra_examples.iterdir() if p.is_dir()):
        catalog = load_repository(folder)
        assert catalog.katalogs and catalog.crds, folder.name
        rendered = render_catalog(catalog)
        found[folder.name] = [w for w in rendered.warnings if "does not have" in w]
    # hello-website's CRD declares only spec.image: its replicas and port always render
    # empty (the examples' README says so): true findings, the only ones
    schema = "which the schema of Website demo.orkestra.io/v1alpha1 (crd.yaml) does not have"
    box = "Katalog/hello-website spec.crds.website.operatorBox.onCreate"
    assert found == {
        "hello-website": [
            f"katalog.yaml:36 {box}.deployments[0].replicas: reads .spec.replicas, {schema} "
            "(.spec has: image)",
            f"katalog.yaml:37 {box}.deployments[0].port: reads .spec.port, {schema} "
            "(.spec has: image)",
            f"katalog.yaml:43 {box}.services[0].targetPort: reads .spec.port, {schema} "
            "(.spec has: image)"],
        "once-secret": [], "secret-copy": [], "when-conditions": []}


def test_a_typo_seeded_into_each_reference_katalog_is_found(orkestra_examples: Path,
                                                           tmp_path: Path) -> None:
    for folder in sorted(p for p in orkestra_examples.iterdir() if p.is_dir()):
        copy = tmp_path / folder.name
        shutil.copytree(folder, copy)
        text = (copy / "katalog.yaml").read_text()
        match = re.search(r"\{\{ \.spec\.(\w+) \}\}", text)
        assert match, folder.name
        line = text.count("\n", 0, match.start()) + 1
        (copy / "katalog.yaml").write_text(
            text[:match.start()] + f"{{{{ .spec.{match[1]}x }}}}" + text[match.end():])
        warnings = [w for w in render_catalog(load_repository(copy)).warnings
                    if f".spec.{match[1]}x," in w]
        assert len(warnings) == 1, folder.name
        assert warnings[0].startswith(f"katalog.yaml:{line} ")
        assert warnings[0].endswith(f"(nearest field: .spec.{match[1]})")
