"""Motif imports: loading, input binding, merging into a CRD entry's blocks and rules,
Katalog-level notes, and rendering of the `with:` inputs."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from orksync.katalog.motifs import (
    MOTIF_KEY,
    expand_entry,
    expand_imports,
    katalog_notes,
    load_motif,
    motif_inputs,
)
from orksync.render.gotemplate import GoTemplateEngine, GoTemplateError
from orksync.render.notes import builtin_functions
from orksync.secrets.random import PlaceholderRandom

DB_MOTIF = """\
apiVersion: orkestra.orkspace.io/v1
kind: Motif
metadata:
  name: database
inputs:
  - name: image
    required: true
  - name: size
    default: 1Gi
  - name: team
resources:
  statefulSets:
    - name: "{{ .metadata.name }}-db"
      image: "{{ .inputs.image }}"
  onCreate:
    secrets:
      - name: "{{ .metadata.name }}-db-password"
        once: true
        data:
          password: "{{ randomAlphanumeric 16 }}"
admission:
  validation:
    rules:
      - field: spec.dbVersion
        operator: exists
        message: "a database needs spec.dbVersion"
  mutation:
    rules:
      - field: spec.storage
        default: "{{ .inputs.size }}"
status:
  fields:
    - path: database
      value: "{{ .inputs.image }}"
"""


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    (tmp_path / "motifs").mkdir()
    (tmp_path / "motifs" / "db.yaml").write_text(DB_MOTIF)
    (tmp_path / "katalog.yaml").write_text("kind: Katalog\n")
    return tmp_path


def entry(**extra: Any) -> dict[str, Any]:
    return {"apiTypes": {"kind": "App"},
            "operatorBox": {"onReconcile": {"statefulSets": [{"name": "own"}]}}, **extra}


def render() -> GoTemplateEngine:
    functions = builtin_functions(clock=lambda: datetime(2026, 1, 1, tzinfo=UTC),
                                  random=PlaceholderRandom())
    return GoTemplateEngine(functions)


def test_flat_motif_resources_are_appended_to_on_reconcile_after_the_crds_own(
        repo: Path) -> None:
    imports = [{"motif": "./motifs/db.yaml", "with": {"image": "postgres:16"}}]
    out = expand_entry(entry(imports=imports), repo / "katalog.yaml", repo)
    assert out.problems == []
    sets = out.raw["operatorBox"]["onReconcile"]["statefulSets"]
    assert [s["name"] for s in sets] == ["own", "{{ .metadata.name }}-db"]
    assert MOTIF_KEY not in sets[0]
    assert sets[1][MOTIF_KEY] == {"file": "motifs/db.yaml", "motif": "database",
                                  "import": "imports[0]",
                                  "inputs": {"image": "postgres:16", "size": "1Gi",
                                             "team": ""}}
    assert "imports" not in out.raw


def test_resources_on_create_go_to_the_on_create_block(repo: Path) -> None:
    imports = [{"motif": "./motifs/db.yaml", "with": {"image": "pg"}}]
    out = expand_entry(entry(imports=imports), repo / "katalog.yaml", repo)
    (secret,) = out.raw["operatorBox"]["onCreate"]["secrets"]
    assert secret["once"] is True and secret[MOTIF_KEY]["file"] == "motifs/db.yaml"


def test_admission_rules_and_status_fields_are_merged_with_the_marker(repo: Path) -> None:
    raw = entry(imports=[{"motif": "./motifs/db.yaml", "with": {"image": "pg"}}],
                validation={"rules": [{"field": "spec.image", "operator": "exists"}]})
    out = expand_entry(raw, repo / "katalog.yaml", repo)
    rules = out.raw["validation"]["rules"]
    assert [r["field"] for r in rules] == ["spec.image", "spec.dbVersion"]
    assert rules[1][MOTIF_KEY]["motif"] == "database"
    assert out.raw["mutation"]["rules"][0]["default"] == "{{ .inputs.size }}"
    assert out.raw["operatorBox"]["status"]["fields"][0][MOTIF_KEY]["inputs"]["image"] == "pg"


def test_the_entry_given_is_not_modified(repo: Path) -> None:
    raw = entry(imports=[{"motif": "./motifs/db.yaml", "with": {"image": "pg"}}])
    expand_entry(raw, repo / "katalog.yaml", repo)
    assert raw["operatorBox"]["onReconcile"]["statefulSets"] == [{"name": "own"}]
    assert "imports" in raw


def test_imports_under_operator_box_are_accepted_too(repo: Path) -> None:
    raw = entry()
    raw["operatorBox"]["imports"] = [{"motif": "motifs/db.yaml", "with": {"image": "pg"}}]
    out = expand_entry(raw, repo / "katalog.yaml", repo)
    assert out.problems == []
    assert len(out.raw["operatorBox"]["onReconcile"]["statefulSets"]) == 2
    assert "imports" not in out.raw["operatorBox"]


def test_a_missing_motif_file_is_a_problem_naming_the_import_and_the_file(
        repo: Path) -> None:
    out = expand_entry(entry(imports=[{"motif": "./motifs/nope.yaml"}]),
                       repo / "katalog.yaml", repo)
    assert out.problems == ["imports[0].motif: file motifs/nope.yaml does not exist"]


def test_a_motif_outside_the_repository_is_refused(repo: Path) -> None:
    out = expand_entry(entry(imports=[{"motif": "../elsewhere/db.yaml"}]),
                       repo / "katalog.yaml", repo)
    assert "points outside the repository" in out.problems[0]


def test_oci_and_git_references_are_refused_clearly(repo: Path) -> None:
    for ref in ("postgres", "ghcr.io/orkspace/motifs/postgres@v1",
                "https://github.com/x/y@main"):
        _, problems = load_motif(ref, repo / "katalog.yaml", repo)
        assert "not a file path" in problems[0] and "vendor the motif" in problems[0]


def test_a_file_that_is_not_a_motif_is_a_problem_naming_it(repo: Path) -> None:
    (repo / "motifs" / "bad.yaml").write_text("apiVersion: v1\nkind: ConfigMap\n"
                                              "metadata: {name: x}\n")
    out = expand_entry(entry(imports=[{"motif": "./motifs/bad.yaml"}]),
                       repo / "katalog.yaml", repo)
    assert out.problems[0].startswith("imports[0]: motifs/bad.yaml: not a Motif")


def test_a_motif_cannot_import_motifs(repo: Path) -> None:
    (repo / "motifs" / "loop.yaml").write_text(
        "apiVersion: orkestra.orkspace.io/v1\nkind: Motif\nmetadata: {name: loop}\n"
        "imports: [{motif: ./loop.yaml}]\n")
    _, problems = load_motif("./motifs/loop.yaml", repo / "katalog.yaml", repo)
    assert problems == ["motifs/loop.yaml: imports: a motif cannot import other motifs"]


def test_an_unknown_with_input_is_a_problem_listing_the_declared_ones(repo: Path) -> None:
    imports = [{"motif": "./motifs/db.yaml", "with": {"image": "pg", "colour": "red"}}]
    out = expand_entry(entry(imports=imports), repo / "katalog.yaml", repo)
    assert out.problems == ["imports[0].with.colour: motif motifs/db.yaml declares no "
                            "input 'colour' (declared: image, size, team)"]


def test_a_missing_required_input_without_default_is_a_problem(repo: Path) -> None:
    out = expand_entry(entry(imports=[{"motif": "./motifs/db.yaml"}]),
                       repo / "katalog.yaml", repo)
    assert out.problems == ["imports[0].with.image: required input of motif "
                            "motifs/db.yaml is not given and has no default"]


def test_a_motif_block_when_is_anded_into_each_of_its_entries(repo: Path) -> None:
    (repo / "motifs" / "cond.yaml").write_text("""\
apiVersion: orkestra.orkspace.io/v1
kind: Motif
metadata: {name: cond}
resources:
  when: [{field: spec.monitoring, equals: "true"}]
  services:
    - name: metrics
      when: [{field: spec.tier, equals: prod}]
""")
    out = expand_entry(entry(imports=[{"motif": "./motifs/cond.yaml"}]),
                       repo / "katalog.yaml", repo)
    (svc,) = out.raw["operatorBox"]["onReconcile"]["services"]
    assert [c["field"] for c in svc["when"]] == ["spec.monitoring", "spec.tier"]
    assert "when" not in out.raw["operatorBox"]["onReconcile"]


def test_expand_imports_returns_the_merged_operator_box_and_ignores_katalog_imports(
        repo: Path) -> None:
    box, problems = expand_imports(
        entry(imports=[{"motif": "./motifs/db.yaml", "with": {"image": "pg"}}]),
        repo / "katalog.yaml", repo,
        katalog_imports=[{"motif": "./motifs/db.yaml", "with": {"image": "x"}}])
    assert problems == []
    assert len(box["onReconcile"]["statefulSets"]) == 2


def test_motif_inputs_render_templates_against_the_custom_resource() -> None:
    marker = {"inputs": {"team": "{{ .spec.team }}-ops", "size": "1Gi", "replicas": 3,
                         "tags": ["a"]}}
    data = {"spec": {"team": "blue"}}
    assert motif_inputs(marker, data, render().render) == {
        "team": "blue-ops", "size": "1Gi", "replicas": 3, "tags": ["a"]}


def test_motif_inputs_propagate_template_errors() -> None:
    with pytest.raises(GoTemplateError):
        motif_inputs({"inputs": {"x": "{{ nosuch }}"}}, {}, render().render)


def test_a_motif_entry_renders_with_its_inputs(repo: Path) -> None:
    imports = [{"motif": "./motifs/db.yaml", "with": {"image": "{{ .spec.pg }}"}}]
    out = expand_entry(entry(imports=imports), repo / "katalog.yaml", repo)
    sts = out.raw["operatorBox"]["onReconcile"]["statefulSets"][1]
    data = {"metadata": {"name": "shop"}, "spec": {"pg": "postgres:16"}}
    engine = render()
    scope = {**data, "inputs": motif_inputs(sts[MOTIF_KEY], data, engine.render)}
    assert engine.render(sts["image"], scope) == "postgres:16"
    assert engine.render(sts["name"], scope) == "shop-db"


NOTES_MOTIF = """\
apiVersion: orkestra.orkspace.io/v1
kind: Motif
metadata: {{name: {name}}}
notes:
  functions:
    - name: shout
      expression: "{{{{ toUpper .arg0 }}}}"
{extra}"""


def test_katalog_level_imports_contribute_notes_only_with_a_warning(repo: Path) -> None:
    (repo / "motifs" / "n.yaml").write_text(
        NOTES_MOTIF.format(name="n", extra="resources: {services: [{name: x}]}\n"))
    out = katalog_notes([{"motif": "./motifs/n.yaml"}], repo / "katalog.yaml", repo)
    assert out.notes == {"shout": "{{ toUpper .arg0 }}"}
    assert out.problems == []
    assert "resources ignored" in out.warnings[0]


def test_a_note_declared_by_two_motifs_is_a_problem_and_a_local_note_wins(
        repo: Path) -> None:
    for name in ("a", "b"):
        (repo / "motifs" / f"{name}.yaml").write_text(NOTES_MOTIF.format(name=name, extra=""))
    imports = [{"motif": "./motifs/a.yaml"}, {"motif": "./motifs/b.yaml"}]
    out = katalog_notes(imports, repo / "katalog.yaml", repo)
    assert "also declared by motif motifs/a.yaml" in out.problems[0]
    local = katalog_notes(imports, repo / "katalog.yaml", repo, local_notes={"shout": "x"})
    assert local.problems == [] and local.notes == {}
