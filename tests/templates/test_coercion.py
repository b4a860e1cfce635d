"""Coercion of rendered strings; Go parsing primitives checked against real Go output."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orksync.render.coercion import (
    coerce_status,
    go_atoi,
    go_parse_float,
    parse_bool,
    parse_int,
    parse_port,
    parse_replicas,
    scan_float,
    scan_int,
    to_namespaces,
    try_coerce,
)


# Expectations below were produced by small Go 1.26 programs (fmt.Sscanf, strconv).
@pytest.mark.parametrize(("text", "expected"), [
    ("3", 3), ("3abc", 3), ("", None), ("abc", None), ("-2", -2), ("0", 0), (" 5", 5),
    ("5 ", 5), ("+7", 7), ("3.9", 3), ("0x10", 0), ("010", 10), ("1_000", 1),
    ("99999999999999999999", None), ("\t4", 4), ("\n4", None), ("-0", 0), ("1e3", 1),
    ("12 34", 12),
])
def test_scan_int_matches_go_sscanf_percent_d(text: str, expected: int | None) -> None:
    assert scan_int(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("3", 3.0), ("3.5", 3.5), ("1e3", 1000.0), ("3abc", 3.0), ("abc", None), (" 2", 2.0),
    ("+1.5", 1.5), ("-0.5", -0.5), (".5", 0.5), ("5.", 5.0), ("0x10", None),
    ("inf", math.inf), ("Inf", math.inf), ("1_000", 1000.0), ("1,5", 1.0), ("1e", None),
    ("0x1p4", 16.0), ("infinity", math.inf), ("2.5x", 2.5), ("", None),
])
def test_scan_float_matches_go_sscanf_percent_f(text: str, expected: float | None) -> None:
    assert scan_float(text) == expected


def test_scan_float_reads_nan_like_go() -> None:
    value = scan_float("NaN")
    assert value is not None and math.isnan(value)


@pytest.mark.parametrize(("text", "expected"), [
    ("3", 3), ("-3", -3), ("3.0", None), ("1e3", None), ("0x10", None), ("010", 10),
    ("+3", 3), ("1_000", None), (" 3", None), ("9223372036854775808", None),
    ("9223372036854775807", 2**63 - 1), ("", None),
])
def test_go_atoi_matches_strconv_atoi(text: str, expected: int | None) -> None:
    assert go_atoi(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("3", 3.0), ("3.0", 3.0), ("1e3", 1000.0), ("0x10", None), ("1_000", 1000.0),
    (" 3", None), ("9223372036854775808", 9.223372036854776e18), ("", None), ("1e", None),
])
def test_go_parse_float_matches_strconv_parse_float(text: str, expected: float | None) -> None:
    assert go_parse_float(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("3", 3), ("3abc", 3), ("", 1), ("abc", 1), ("-2", 1), ("0", 0), (" 5", 5), ("3.9", 3),
    (None, 1), (4, 4), ("99999999999999999999", 1),
])
def test_replicas_follow_sscanf_with_fallback_one(text: Any, expected: int) -> None:
    assert parse_replicas(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("8080", 8080), ("", 0), ("http", 0), ("80abc", 0), ("-1", 0), ("70000", 0),
    ("0", 0), (443, 443), (" 80", 0),
])
def test_ports_use_atoi_and_zero_means_no_port(text: Any, expected: int) -> None:
    assert parse_port(text) == expected


def test_pod_ports_can_use_sscanf_like_orkestras_pod_builder() -> None:
    assert parse_port("80abc", scanf=True) == 80
    assert parse_port(" 80", scanf=True) == 80
    assert parse_port("abc", scanf=True) == 0


def test_parse_int_falls_back_to_the_default() -> None:
    assert parse_int("12", 3) == 12
    assert parse_int("", 3) == 3
    assert parse_int("1.5", 3) == 3
    assert parse_int(None, 7) == 7


@pytest.mark.parametrize("text", ["true", "True", "TRUE", "1", "yes", "YES", True])
def test_field_booleans_accept_only_orkestras_true_words(text: Any) -> None:
    assert parse_bool(text) is True


@pytest.mark.parametrize("text", ["false", "t", "Yes", "on", "y", "", "2", None, False, "tRUE"])
def test_every_other_field_boolean_text_is_false(text: Any) -> None:
    assert parse_bool(text) is False


@pytest.mark.parametrize(("text", "expected"), [
    ("1", 1), ("0", 0), ("-3", -3), ("3.0", 3), ("2.5", 2.5), ("1e3", 1000),
    ("12345678901234567890", 12345678901234567000),  # Go: float64, JSON 12345678901234567000
    ("t", True), ("T", True), ("TRUE", True), ("true", True), ("True", True),
    ("f", False), ("F", False), ("FALSE", False), ("false", False), ("False", False),
    ("yes", "yes"), ("tRUE", "tRUE"), ("", ""), (" 3", " 3"), ("0x10", "0x10"),
    ('{"a": 1}', {"a": 1}), ("[1, 2]", [1, 2]), ("{not json", "{not json"),
    ("[NaN]", "[NaN]"), ("NaN", "NaN"), ("Inf", "Inf"), ("hello", "hello"),
    (" [1]", [1]), ("1_000", 1000),
])
def test_try_coerce_follows_orkestras_order(text: str, expected: Any) -> None:
    result = try_coerce(text)
    assert result == expected
    assert type(result) is type(expected)


def test_try_coerce_leaves_non_strings_alone() -> None:
    assert try_coerce(5) == 5
    assert try_coerce(None) is None
    assert try_coerce({"a": "1"}) == {"a": "1"}


@given(st.integers(min_value=-(2**53), max_value=2**53))
def test_integer_text_coerces_to_that_integer(n: int) -> None:
    assert try_coerce(str(n)) == n


@pytest.mark.parametrize(("value", "kind", "expected"), [
    ("3", "int", 3), ("3.7", "int", 3), ("", "int", 0), ("abc", "int", "abc"),
    ("2.5", "float", 2.5), ("3", "float", 3.0), ("", "float", 0.0), ("x", "float", "x"),
    ("true", "bool", True), ("f", "bool", False), ("", "bool", False), ("yes", "bool", "yes"),
    ("3", "string", "3"), ("3", "", "3"), ("3", "auto", 3), ("true", "auto", True),
    ("Ready", "auto", "Ready"), (3, "string", "3"), (None, "string", ""),
])
def test_status_values_are_coerced_per_declared_type(value: Any, kind: str,
                                                     expected: Any) -> None:
    result = coerce_status(value, kind)
    assert result == expected
    assert type(result) is type(expected)


def test_an_unknown_status_type_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown status field type 'integer'"):
        coerce_status("3", "integer")


def _render(template: str, data: Mapping[str, Any]) -> str:
    mapping = {"{{ .spec.one }}": str(data["spec"].get("one", "")),
               "{{ .metadata.namespace }}-copy": "team-a-copy",
               "{{ .spec.targetNamespaces }}": "[a b]",
               "{{ .spec.list | join }}": "x"}
    return mapping[template]


DATA = {"spec": {"targetNamespaces": ["a", "b", "", 3, "a"], "one": "c", "str": "d"},
        "metadata": {"namespace": "team-a"}}


def test_to_namespaces_expands_a_plain_path_to_a_list() -> None:
    assert to_namespaces(["{{ .spec.targetNamespaces }}"], DATA, _render) == ["a", "b"]


def test_to_namespaces_mixes_literals_and_templates_and_deduplicates() -> None:
    entries = ["prod", "{{ .spec.one }}", "{{ .metadata.namespace }}-copy", "prod", " ",
               "{{ .spec.targetNamespaces }}", "c"]
    assert to_namespaces(entries, DATA, _render) == ["prod", "c", "team-a-copy", "a", "b"]


def test_to_namespaces_renders_a_path_that_is_not_a_list() -> None:
    data = {"spec": {"one": "solo"}}
    assert to_namespaces(["{{.spec.one}}", "{{ .spec.one }}"], data,
                         lambda t, d: "solo") == ["solo"]


def test_to_namespaces_drops_empty_renders() -> None:
    assert to_namespaces(["{{ .spec.one }}"], {"spec": {}}, _render) == []


def test_to_namespaces_propagates_render_errors() -> None:
    def broken(template: str, data: Mapping[str, Any]) -> str:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        to_namespaces(["{{ nope }}"], {}, broken)
