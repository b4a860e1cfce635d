"""The in-memory preparation of a custom resource before its children render:
normalize.spec, mutation rules (including the fix of Orkestra bug #15), validation rules
(deny / warn, Orkestra's validation semantics) and their load-time checks."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from orksync.katalog.motifs import MOTIF_KEY
from orksync.render.gotemplate import GoTemplateEngine
from orksync.render.notes import builtin_functions
from orksync.render.prepare import (
    PrepareError,
    mutate,
    normalize,
    prepare,
    validate,
)
from orksync.render.validate import rule_problems
from orksync.secrets.random import PlaceholderRandom

NOW = datetime(2026, 4, 6, 8, 0, tzinfo=UTC)
ENGINE = GoTemplateEngine(builtin_functions(clock=lambda: NOW, random=PlaceholderRandom()))
RENDER = ENGINE.render


def clock() -> datetime:
    return NOW


def cr(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "demo.io/v1", "kind": "App",
            "metadata": {"name": "shop", "namespace": "team"}, "spec": spec, "status": {},
            "inputs": {}}


# ── normalize ────────────────────────────────────────────────────────────────────

def test_normalize_renders_each_path_under_spec_and_decodes_the_result_as_yaml() -> None:
    data = cr(replicas="3", tier="Gold", db={"size": 1})
    out = normalize(data, {"replicas": "{{ .spec.replicas }}", "debug": "true",
                           "tier": "{{ toLower .spec.tier }}", "db.size": "{{ 2 }}",
                           "answer": "yes"}, RENDER)
    assert out["spec"] == {"replicas": 3, "tier": "gold", "db": {"size": 2}, "debug": True,
                           "answer": "yes"}
    assert data["spec"]["replicas"] == "3"  # the input is not modified


def test_normalize_keeps_empty_and_undecodable_results_as_text() -> None:
    out = normalize(cr(), {"a": "{{ .spec.missing }}", "b": "x: [", "c": "&a b"}, RENDER)
    assert out["spec"] == {"a": "", "b": "x: [", "c": "&a b"}


def test_a_normalize_template_error_names_the_path() -> None:
    with pytest.raises(PrepareError, match=r"normalize\.spec\.x: template error"):
        normalize(cr(), {"x": "{{ nosuch }}"}, RENDER)


# ── mutation ─────────────────────────────────────────────────────────────────────

def test_a_default_sets_an_absent_or_empty_field_only() -> None:
    rules = [{"field": "spec.replicas", "default": 2},
             {"field": "spec.image", "default": "nginx"},
             {"field": "spec.tier", "default": "basic"}]
    out = mutate(cr(image="", tier="gold"), rules, RENDER, clock)
    assert out["spec"] == {"replicas": 2, "image": "nginx", "tier": "gold"}


def test_a_default_without_value_type_keeps_its_yaml_type_fixing_orkestra_bug_15() -> None:
    rules = [{"field": "spec.replicas", "default": 1},
             {"field": "spec.enabled", "default": True},
             {"field": "spec.port", "default": "8080"}]
    out = mutate(cr(), rules, RENDER, clock)
    assert out["spec"] == {"replicas": 1, "enabled": True, "port": "8080"}
    assert type(out["spec"]["replicas"]) is int


def test_value_type_converts_with_go_rules() -> None:
    rules = [{"field": "spec.replicas", "default": "3", "valueType": "int"},
             {"field": "spec.ratio", "default": "0.5", "valueType": "number"},
             {"field": "spec.debug", "default": "T", "valueType": "boolean"},
             {"field": "spec.version", "default": 2.0, "valueType": "string"}]
    out = mutate(cr(), rules, RENDER, clock)
    assert out["spec"] == {"replicas": 3, "ratio": 0.5, "debug": True, "version": "2"}


def test_an_override_always_sets_and_templates_are_rendered() -> None:
    rules = [{"field": "spec.image", "override": "registry.io/{{ .metadata.name }}:1"},
             {"field": "metadata.labels.team", "override": "{{ .metadata.namespace }}"}]
    out = mutate(cr(image="mine"), rules, RENDER, clock)
    assert out["spec"]["image"] == "registry.io/shop:1"
    assert out["metadata"]["labels"] == {"team": "team"}


def test_rules_apply_in_order_and_see_earlier_mutations() -> None:
    rules = [{"field": "spec.tier", "default": "gold"},
             {"field": "spec.replicas", "default": "5", "valueType": "int",
              "when": [{"field": "spec.tier", "equals": "gold"}]},
             {"field": "spec.zone", "default": "x", "when": [{"field": "spec.tier",
                                                              "equals": "silver"}]}]
    out = mutate(cr(), rules, RENDER, clock)
    assert out["spec"] == {"tier": "gold", "replicas": 5}


def test_a_rule_that_cannot_apply_is_skipped_with_a_warning() -> None:
    warnings: list[str] = []
    rules = [{"field": "spec.replicas", "default": "many", "valueType": "int"},
             {"field": "spec.image.tag", "default": "1"},
             {"field": "metadata.name", "override": "other"},
             {"field": "spec.ok", "default": "{{ nosuch }}"},
             {"field": "spec.fine", "default": "yes"}]
    out = mutate(cr(image="nginx"), rules, RENDER, clock, warnings=warnings)
    assert out["spec"] == {"image": "nginx", "fine": "yes"}
    assert out["metadata"]["name"] == "shop"
    assert [w.split(":")[0] for w in warnings] == [
        "mutation rule 0 (spec.replicas)", "mutation rule 1 (spec.image.tag)",
        "mutation rule 2 (metadata.name)", "mutation rule 3 (spec.ok)"]
    assert "cannot convert 'many' to int" in warnings[0]


# ── validation ───────────────────────────────────────────────────────────────────

ONCE_SECRET_RULE = {"field": "spec.image", "operator": "exists", "action": "deny"}


def test_the_once_secret_rule_denies_a_custom_resource_without_an_image() -> None:
    result = validate(cr(), [ONCE_SECRET_RULE], RENDER, clock)
    assert result.denied == ["validation rule 0 (spec.image): spec.image is required"]
    assert not result.ok


def test_the_once_secret_rule_passes_a_custom_resource_with_an_image() -> None:
    result = validate(cr(image="nginx:1.27"), [ONCE_SECRET_RULE], RENDER, clock)
    assert result.ok and result.denied == [] and result.warned == []


def test_warn_rules_warn_and_messages_are_used_and_rendered() -> None:
    rules = [{"field": "metadata.labels.team", "operator": "exists", "action": "warn",
              "message": "{{ .metadata.name }} should declare a team"},
             {"field": "spec.image", "prefix": "myorg/", "message": "use myorg images"}]
    result = validate(cr(image="docker.io/x"), rules, RENDER, clock)
    assert result.warned == ["validation rule 0 (metadata.labels.team): "
                             "shop should declare a team"]
    assert result.denied == ["validation rule 1 (spec.image): use myorg images"]


def test_every_violation_is_reported() -> None:
    rules = [{"field": "spec.replicas", "max": "10"}, {"field": "spec.tier", "in": "a,b"}]
    result = validate(cr(replicas=11, tier="c"), rules, RENDER, clock)
    assert len(result.denied) == 2


def test_numeric_rules_need_a_number_as_orkestra_validation_does() -> None:
    rules = [{"field": "spec.replicas", "max": "10"}]
    assert validate(cr(replicas=3), rules, RENDER, clock).ok
    assert not validate(cr(), rules, RENDER, clock).ok  # absent is not 0
    assert not validate(cr(replicas="3x"), rules, RENDER, clock).ok
    assert not validate(cr(replicas=3), [{"field": "spec.replicas", "greaterThan": "3"}],
                        RENDER, clock).ok  # gt is strict


def test_negative_comparisons_on_an_absent_field_follow_orkestra() -> None:
    assert validate(cr(), [{"field": "spec.tag", "notEquals": "latest"}], RENDER, clock).ok
    assert not validate(cr(), [{"field": "spec.tag", "notSuffix": "latest"}],
                        RENDER, clock).ok


def test_rules_apply_only_when_their_conditions_pass_and_fire_at_reconcile() -> None:
    rules = [{"field": "spec.image", "operator": "exists",
              "when": [{"field": "spec.tier", "equals": "prod"}]},
             {"field": "spec.image", "operator": "exists", "fires": {"reconcile": False}}]
    assert validate(cr(tier="dev"), rules, RENDER, clock).ok
    assert not validate(cr(tier="prod"), rules, RENDER, clock).ok


def test_a_templated_field_is_rendered() -> None:
    rules = [{"field": "{{ len .spec.regions }}", "min": "2",
              "message": "at least two regions"}]
    assert validate(cr(regions=["eu", "us"]), rules, RENDER, clock).ok
    assert validate(cr(regions=["eu"]), rules, RENDER, clock).denied == [
        "validation rule 0 ({{ len .spec.regions }}): at least two regions"]


def test_a_motif_rule_sees_its_inputs() -> None:
    rule = {"field": "spec.image", "prefix": "{{ .inputs.registry }}/",
            MOTIF_KEY: {"file": "motifs/db.yaml", "inputs": {"registry": "{{ .spec.reg }}"}}}
    assert validate(cr(image="corp/db", reg="corp"), [rule], RENDER, clock).ok
    denied = validate(cr(image="other/db", reg="corp"), [rule], RENDER, clock).denied
    assert denied == ["validation rule 0 (spec.image) (from motif motifs/db.yaml): "
                      "spec.image must start with 'corp/'"]


# ── prepare ──────────────────────────────────────────────────────────────────────

def test_prepare_normalizes_then_mutates_then_validates() -> None:
    raw = {"normalize": {"spec": {"replicas": "{{ .spec.replicas }}"}},
           "mutation": {"rules": [{"field": "spec.image", "default": "nginx"}]},
           "validation": {"rules": [ONCE_SECRET_RULE,
                                    {"field": "spec.replicas", "max": "5"}]}}
    data, verdict, warnings = prepare(cr(replicas="3"), raw, RENDER, clock)
    assert data["spec"] == {"replicas": 3, "image": "nginx"}
    assert verdict.ok and warnings == []


def test_mutate_first_false_validates_before_mutating() -> None:
    raw = {"mutation": {"mutateFirst": False,
                        "rules": [{"field": "spec.image", "default": "nginx"}]},
           "validation": {"rules": [ONCE_SECRET_RULE]}}
    data, verdict, _ = prepare(cr(), raw, RENDER, clock)
    assert data["spec"]["image"] == "nginx" and not verdict.ok


# ── load-time checks ─────────────────────────────────────────────────────────────

def test_rule_problems_accepts_well_formed_blocks() -> None:
    raw = {"normalize": {"spec": {"replicas": "{{ .spec.replicas }}"}},
           "mutation": {"rules": [{"field": "spec.replicas", "default": "2",
                                   "valueType": "int"}]},
           "validation": {"rules": [ONCE_SECRET_RULE]}}
    assert rule_problems(raw, check=ENGINE.check) == []


def test_rule_problems_refuses_include_and_external_as_not_supported() -> None:
    raw = {"validation": {"include": "rules.yaml", "external": [{"url": "http://opa"}]},
           "mutation": {"include": "m.yaml"}}
    problems = rule_problems(raw)
    assert [(p, "not supported" in m) for p, m in problems] == [
        (["mutation", "include"], True), (["validation", "include"], True),
        (["validation", "external"], True)]


def test_rule_problems_names_bad_rules_by_path() -> None:
    raw = {"normalize": {"spec": {"spec.replicas": "1", ".x": "2"}},
           "operatorBox": {"mutation": {"rules": [
               {"field": "spec.a", "default": "x", "valueType": "integer"},
               {"field": "spec.b", "default": 1, "override": 2, "valueType": "decimal"},
               {"field": "metadata.name", "override": "x"}]}},
           "validation": {"rules": [
               {"field": "spec.a", "operator": "bigger", "value": "1"},
               {"field": "spec.a", "exists": True, "action": "block"},
               {"field": "spec.b", "equals": "{{ nosuch }}",
                "when": [{"field": "spec.c", "greaterThan": "lots"}]}]}}
    found = {tuple(path): message for path, message in rule_problems(raw, check=ENGINE.check)}
    assert "write 'replicas'" in found[("normalize", "spec", "spec.replicas")]
    assert "not a dot path" in found[("normalize", "spec", ".x")]
    assert "cannot convert 'x' to int" in found[("operatorBox", "mutation", "rules", 0,
                                                  "default")]
    assert "unknown valueType 'decimal'" in found[("operatorBox", "mutation", "rules", 1,
                                                   "valueType")]
    assert "only override" in found[("operatorBox", "mutation", "rules", 1)]
    assert "identifies the custom resource" in found[("operatorBox", "mutation", "rules", 2,
                                                      "field")]
    assert "unknown operator 'bigger'" in found[("validation", "rules", 0)]
    assert "unknown action 'block'" in found[("validation", "rules", 1, "action")]
    assert "not a number" in found[("validation", "rules", 2, "when", 0)]
    assert "template error" in found[("validation", "rules", 2, "equals")]
