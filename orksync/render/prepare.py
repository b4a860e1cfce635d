"""What happens to a custom resource's template data before its children render:
`normalize.spec`, `mutation.rules`, `validation.rules`. Pure: templates through the
injected `render`, the clock as `clock`
(docs/katalog-semantics.md#normalize-mutation-validation)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from orksync.katalog.motifs import MOTIF_KEY, motif_inputs
from orksync.katalog.validate import IDENTITY_FIELDS, NOT_IN_RULES
from orksync.model import copy_tree
from orksync.render.coercion import go_atoi, go_parse_float
from orksync.render.conditions import (
    CONDITION_KEYS,
    NUMERIC,
    evaluate_condition,
    evaluate_conditions,
    resolve_operator,
)
from orksync.render.gotemplate import GoTemplateError
from orksync.render.govalues import format_value

__all__ = ["PrepareError", "ValidationResult", "convert", "mutate", "normalize", "prepare",
           "validate", "yaml_decode"]

Render = Callable[[str, Mapping[str, Any]], str]
Clock = Callable[[], datetime]
UniqueChecker = Callable[[str, Any], bool]

RULE_CONDITION_KEYS = CONDITION_KEYS - NOT_IN_RULES
_NEEDS_FIELD = frozenset({"equals", "contains", "notContains", "prefix", "notPrefix",
                          "suffix", "notSuffix", "in", "notIn", "regex", "gt", "lt", "gte",
                          "lte", "between", "notBetween", "unique"})
_NEEDS_NUMBER = NUMERIC | {"between", "notBetween"}
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
_MAX_DECODE = 65536
_PHRASES = {
    "exists": "is required", "notExists": "must not be set", "equals": "must equal {}",
    "notEquals": "must not equal {}", "contains": "must contain {}",
    "notContains": "must not contain {}", "prefix": "must start with {}",
    "notPrefix": "must not start with {}", "suffix": "must end with {}",
    "notSuffix": "must not end with {}", "regex": "must match {}",
    "gt": "must be greater than {}", "lt": "must be less than {}",
    "gte": "must be at least {}", "lte": "must be at most {}",
    "between": "must be between {}", "notBetween": "must not be between {}",
    "in": "must be one of {}", "notIn": "must not be one of {}", "unique": "must be unique",
}
_yaml = YAML(typ="safe", pure=True)


@dataclass(frozen=True, slots=True)
class ValidationResult:
    """Messages of the violated rules, by action."""

    denied: list[str] = field(default_factory=list)
    warned: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.denied


class PrepareError(ValueError):
    """A normalize template that cannot be rendered or written."""


# ── helpers ──────────────────────────────────────────────────────────────────────

def _text(value: Any) -> str:
    return "" if value is None else value if isinstance(value, str) else format_value(value)


def _find(data: Any, parts: Sequence[str]) -> tuple[bool, Any]:
    node = data
    for part in parts:
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node


def _set(data: dict[str, Any], parts: Sequence[str], value: Any) -> None:
    node = data
    for i, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif not isinstance(child, dict):
            raise ValueError(f"{'.'.join(parts[:i + 1])} is a {type(child).__name__}, "
                             "not a map")
        node = child
    node[parts[-1]] = value


def _scope(rule: Mapping[str, Any], data: Mapping[str, Any], render: Render) -> Mapping[str, Any]:
    marker = rule.get(MOTIF_KEY)
    if not isinstance(marker, Mapping):
        return data
    return {**data, "inputs": motif_inputs(marker, data, render)}


def _applies(rule: Mapping[str, Any], data: Mapping[str, Any], render: Render,
             clock: Clock, unique_checker: UniqueChecker | None = None) -> bool:
    fires = rule.get("fires")
    if isinstance(fires, Mapping) and fires.get("reconcile") is False:
        return False
    or_ = rule.get("or") if rule.get("or") is not None else rule.get("anyOf")
    return evaluate_conditions(data, rule.get("when"), or_, render, clock=clock,
                               unique_checker=unique_checker)


def _go_string(value: Any) -> str:
    """Orkestra's ScalarToString: integral floats print without a fraction."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return str(int(value))
    return _text(value)


def convert(value: Any, value_type: str) -> Any:
    """`valueType` conversion (strconv rules); ValueError when impossible."""
    if value_type in ("", None):
        return value
    if isinstance(value, Mapping | list):
        raise ValueError(f"cannot convert a {type(value).__name__} to {value_type}")
    if value_type == "string":
        return _go_string(value)
    text = _go_string(value)
    if value_type in ("int", "integer"):
        number = go_atoi(text)
        if number is None:
            raise ValueError(f"cannot convert {text!r} to int")
        return number
    if value_type in ("float", "number"):
        real = go_parse_float(text)
        if real is None or real != real or real in (float("inf"), float("-inf")):
            raise ValueError(f"cannot convert {text!r} to float")
        return real
    if value_type in ("bool", "boolean"):
        if text in _TRUE or text in _FALSE:
            return text in _TRUE
        raise ValueError(f"cannot convert {text!r} to bool")
    raise ValueError(f"unknown valueType {value_type!r}")


def yaml_decode(text: str) -> Any:
    """A rendered normalize result as YAML; text that is not YAML (or is empty, or holds
    anchors/aliases, or is very long) stays text."""
    if not text.strip() or len(text) > _MAX_DECODE or "&" in text or "*" in text:
        return text
    try:
        value = _yaml.load(text)
    except (YAMLError, ValueError):
        return text
    return text if value is None else value


# ── normalize / mutate / validate ────────────────────────────────────────────────

def normalize(data: Mapping[str, Any], spec_map: Mapping[str, Any],
              render: Render) -> dict[str, Any]:
    """A copy of `data` with each `normalize.spec` path (under spec) rewritten."""
    out = copy_tree(dict(data))
    if not isinstance(out.get("spec"), dict):
        out["spec"] = {}
    for path, template in (spec_map or {}).items():
        value = template
        if isinstance(template, str) and "{{" in template:
            try:
                value = render(template, data)
            except GoTemplateError as err:
                raise PrepareError(f"normalize.spec.{path}: template error: {err}") from err
        if isinstance(value, str):
            value = yaml_decode(value)
        try:
            _set(out["spec"], str(path).split("."), value)
        except ValueError as err:
            raise PrepareError(f"normalize.spec.{path}: spec.{err}") from err
    return out


def mutate(data: Mapping[str, Any], rules: Sequence[Any] | None, render: Render,
           clock: Clock, *, warnings: list[str] | None = None,
           in_place: bool = False) -> dict[str, Any]:
    """A copy of `data` with the mutation rules applied in order (see module docstring);
    `in_place`: `data` itself (a dict its caller owns). Rules that cannot apply are
    skipped; their reasons are appended to `warnings`."""
    out = data if in_place and type(data) is dict else copy_tree(dict(data))
    notes = warnings if warnings is not None else []
    for i, rule in enumerate(rules or ()):
        if not isinstance(rule, Mapping):
            notes.append(f"mutation rule {i}: not a map; skipped")
            continue
        label = f"mutation rule {i} ({_text(rule.get('field'))})"
        try:
            scope = _scope(rule, out, render)
            if not _applies(rule, scope, render, clock):
                continue
            target = _text(rule.get("field")).strip()
            if "{{" in target:
                target = render(target, scope).strip()
            if rule.get("override") is not None:
                value = rule["override"]
            elif rule.get("default") is not None:
                found, current = _find(out, target.split("."))
                if found and current not in (None, ""):
                    continue
                value = rule["default"]
            else:
                continue
            if isinstance(value, str) and "{{" in value:
                value = render(value, scope)
            if not target or target in IDENTITY_FIELDS or "" in target.split("."):
                raise ValueError(f"cannot mutate field {target!r}")
            _set(out, target.split("."), convert(value, _text(rule.get("valueType"))))
        except (GoTemplateError, ValueError) as err:
            notes.append(f"{label}: {err}; skipped")
    return out


def _violated(rule: Mapping[str, Any], data: Mapping[str, Any], render: Render, clock: Clock,
              unique_checker: UniqueChecker | None) -> bool:
    op, _ = resolve_operator(rule)
    if op == "unique" and unique_checker is None:
        return False
    field_text = _text(rule.get("field"))
    if "{{" in field_text:
        try:
            value = render(field_text, data)
        except GoTemplateError:
            value = ""
        found = value != ""
    else:
        found, raw = _find(data, field_text.strip().split("."))
        value = _text(raw)
    if op in _NEEDS_FIELD and not found:
        return True
    if op in _NEEDS_NUMBER and go_parse_float(value) is None:
        return True
    condition = {k: v for k, v in rule.items() if k in RULE_CONDITION_KEYS}
    return not evaluate_condition(condition, data, render, clock=clock,
                                  unique_checker=unique_checker)


def _message(i: int, rule: Mapping[str, Any], data: Mapping[str, Any], render: Render) -> str:
    field_text = _text(rule.get("link") or rule.get("field"))
    message = _text(rule.get("message"))
    if "{{" in message:
        with contextlib.suppress(GoTemplateError):  # else the literal text, as Orkestra
            message = render(message, data)
    if not message:
        op, expected = resolve_operator(rule)
        if "{{" in expected:
            with contextlib.suppress(GoTemplateError):
                expected = render(expected, data)
        message = f"{field_text} " + _PHRASES.get(op, f"fails {op} {{}}").format(
            repr(expected)).rstrip()
    origin = rule.get(MOTIF_KEY)
    suffix = f" (from motif {origin.get('file')})" if isinstance(origin, Mapping) else ""
    return f"validation rule {i} ({field_text}){suffix}: {message}"


def validate(data: Mapping[str, Any], rules: Sequence[Any] | None, render: Render,
             clock: Clock, *, unique_checker: UniqueChecker | None = None
             ) -> ValidationResult:
    """Evaluate the validation rules; every violation is reported (not just the first)."""
    result = ValidationResult()
    for i, rule in enumerate(rules or ()):
        if not isinstance(rule, Mapping):
            result.denied.append(f"validation rule {i}: not a map")
            continue
        scope = _scope(rule, data, render)
        if not _applies(rule, scope, render, clock, unique_checker):
            continue
        if _violated(rule, scope, render, clock, unique_checker):
            target = result.warned if rule.get("action") == "warn" else result.denied
            target.append(_message(i, rule, scope, render))
    return result


def _block(raw: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    box = raw.get("operatorBox")
    value = raw.get(key)
    if value is None and isinstance(box, Mapping):
        value = box.get(key)
    return value if isinstance(value, Mapping) else {}


def prepare(data: Mapping[str, Any], entry_raw: Mapping[str, Any], render: Render,
            clock: Clock, *, unique_checker: UniqueChecker | None = None
            ) -> tuple[dict[str, Any], ValidationResult, list[str]]:
    """normalize → mutation ⇄ validation for one custom resource: (the data children
    render with, the validation verdict, mutation warnings)."""
    warnings: list[str] = []
    spec_map = _block(entry_raw, "normalize").get("spec") or {}
    out = normalize(data, spec_map, render) if spec_map else copy_tree(dict(data))
    mutation, validation = _block(entry_raw, "mutation"), _block(entry_raw, "validation")
    if mutation.get("mutateFirst") is False:
        verdict = validate(out, validation.get("rules"), render, clock,
                           unique_checker=unique_checker)
        out = mutate(out, mutation.get("rules"), render, clock, warnings=warnings,
                     in_place=True)
    else:
        out = mutate(out, mutation.get("rules"), render, clock, warnings=warnings,
                     in_place=True)
        verdict = validate(out, validation.get("rules"), render, clock,
                           unique_checker=unique_checker)
    return out, verdict, warnings
