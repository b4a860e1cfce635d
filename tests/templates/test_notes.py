"""The note library: every built-in function, random sources, user notes, the catalog."""

from __future__ import annotations

import base64
import re
import string
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orksync.render.notes import builtin_functions, catalog, user_notes
from orksync.render.notes._common import NoteError, go_json
from orksync.render.notes.quantity import format_quantity, parse_quantity
from orksync.secrets.random import (
    GENERATE_TOKEN_RE,
    CryptoRandom,
    PlaceholderRandom,
    RandomSource,
    fill_generated,
)

NOW = datetime(2026, 4, 6, 8, 0, 0, tzinfo=UTC)  # a Monday


def functions(now: datetime = NOW, random: RandomSource | None = None) -> dict[str, Any]:
    return builtin_functions(clock=lambda: now, random=random or PlaceholderRandom())


F = functions()


def call(name: str, *args: Any) -> Any:
    return F[name](*args)


# ── catalog ──────────────────────────────────────────────────────────────────────

def test_the_docstring_tables_list_exactly_the_built_in_functions() -> None:
    names = [row[1] for row in catalog()]
    assert len(names) == len(set(names))
    assert set(names) == set(F)


def test_every_function_named_in_the_semantics_section_4_2_exists() -> None:
    section = re.findall(r"\w+", """
    randomAlphanumeric randomHex randomBase64 uuidv4 toLower toUpper trimSpace trim
    trimPrefix trimSuffix hasPrefix hasSuffix contains replace split join repeat camelToKebab
    truncate add sub mul div mod min max clamp abs ternary boolTernary boolDefault eqTernary
    coalesce empty notEmpty default typeOf typeMap typeList typeString typeNumber typeBool
    toInt toFloat toBool toString listHas listGet listLen mapGet mapKeys mapValues asList
    asMap asString getOr getOrDefault getString getInt getBool getList getMap meta labels
    annotations get phase hasCondition resourceExists readyReplicas allReplicasReady
    availableReplicas conditionStatus now timeAgo timeSince timeUntil isExpired timeFormat
    toBase64 fromBase64 toJSON fromJSON sha256sum truncateName slugify cronExpr cronValid
    cronNormalize cronDescribe cronMinute cronHour cronFromMap cronFromAny quantityToBytes
    quantityToMillis quantityAdd quantityCompare semverCompare semverMajor semverMinor
    semverPatch""")
    assert [name for name in section if name not in F] == []


def test_catalog_rows_carry_topic_signature_and_meaning() -> None:
    rows = {row[1]: row for row in catalog()}
    assert rows["replace"][:3] == ("orkestra", "replace",
                                   "replace (string, string, string) string")
    assert rows["default"][2] == "default (interface {}, interface {}) interface {}"
    assert rows["concat"][:2] == ("extensions", "concat")
    assert all(row[3] for row in rows.values())


# ── random ───────────────────────────────────────────────────────────────────────

@pytest.mark.parametrize(("name", "args", "token"), [
    ("randomAlphanumeric", (32,), "<generate:randomAlphanumeric:32>"),
    ("randomHex", (16,), "<generate:randomHex:16>"),
    ("randomBase64", (32,), "<generate:randomBase64:32>"),
    ("uuidv4", (), "<generate:uuidv4>"),
])
def test_placeholder_random_renders_tokens_not_values(name: str, args: tuple[Any, ...],
                                                      token: str) -> None:
    assert call(name, *args).token() == token
    assert GENERATE_TOKEN_RE.fullmatch(token)


def test_placeholder_tokens_are_the_same_on_every_render() -> None:
    assert {call("randomHex", 16).token() for _ in range(20)} == {"<generate:randomHex:16>"}


@pytest.mark.parametrize("n", [4097, 10**6])
@pytest.mark.parametrize("name", ["randomAlphanumeric", "randomHex", "randomBase64"])
def test_random_lengths_above_4096_are_value_errors(name: str, n: int) -> None:
    for source in (PlaceholderRandom(), CryptoRandom()):
        with pytest.raises(ValueError, match="at most 4096"):
            functions(random=source)[name](n)


@pytest.mark.parametrize("n", [0, -1])
@pytest.mark.parametrize("name", ["randomAlphanumeric", "randomHex", "randomBase64"])
def test_random_lengths_of_zero_or_less_are_empty_as_in_orkestra(name: str, n: int) -> None:
    assert functions(random=PlaceholderRandom())[name](n) == ""


def test_random_functions_reject_non_numeric_lengths() -> None:
    with pytest.raises(ValueError):
        call("randomHex", "lots")


def test_crypto_alphanumeric_has_the_right_length_and_alphabet() -> None:
    fns = functions(random=CryptoRandom())
    values = [fns["randomAlphanumeric"](32) for _ in range(50)]
    alphabet = set(string.ascii_letters + string.digits)
    assert all(len(v) == 32 and set(v) <= alphabet for v in values)
    assert len(set(values)) == 50
    seen = set("".join(values))
    assert len(seen) > 50  # 1600 draws from 62 symbols cover nearly all of them


def test_crypto_hex_has_two_characters_per_byte() -> None:
    fns = functions(random=CryptoRandom())
    for n in (1, 16, 33):
        value = fns["randomHex"](n)
        assert re.fullmatch(rf"[0-9a-f]{{{2 * n}}}", value)
    assert len({fns["randomHex"](16) for _ in range(20)}) == 20


def test_crypto_base64_is_url_safe_and_padded_like_go() -> None:
    fns = functions(random=CryptoRandom())
    # lengths verified with Go's base64.URLEncoding: 1→4 (==), 2→4 (=), 3→4, 16→24, 32→44
    for n, length in ((1, 4), (2, 4), (3, 4), (16, 24), (32, 44)):
        value = fns["randomBase64"](n)
        assert len(value) == length
        assert re.fullmatch(r"[A-Za-z0-9_-]*=*", value)
        assert len(base64.urlsafe_b64decode(value)) == n


def test_crypto_uuid_is_version_4() -> None:
    value = functions(random=CryptoRandom())["uuidv4"]()
    parsed = uuid.UUID(value)
    assert parsed.version == 4 and str(parsed) == value


def test_fill_generated_replaces_each_token_with_a_fresh_value() -> None:
    text = ("password: <generate:randomAlphanumeric:12>\nkey: <generate:randomHex:4>\n"
            "again: <generate:randomAlphanumeric:12>\nid: <generate:uuidv4>\n"
            "jwt: <generate:randomBase64:3>")
    filled = fill_generated(text, CryptoRandom())
    assert "<generate:" not in filled
    lines = dict(line.split(": ") for line in filled.splitlines())
    assert re.fullmatch(r"[A-Za-z0-9]{12}", lines["password"])
    assert re.fullmatch(r"[0-9a-f]{8}", lines["key"])
    assert lines["password"] != lines["again"]
    assert uuid.UUID(lines["id"]).version == 4
    assert len(lines["jwt"]) == 4


def test_fill_generated_leaves_other_text_and_unknown_tokens_alone() -> None:
    text = "<generate:randomFoo:3> <generate:randomHex:0> <generate:uuidv4:3> plain"
    assert fill_generated(text, CryptoRandom()) == text


def test_fill_generated_rejects_too_long_tokens() -> None:
    with pytest.raises(ValueError, match="4096"):
        fill_generated("<generate:randomHex:5000>", CryptoRandom())


def test_placeholder_fill_is_idempotent() -> None:
    text = "a <generate:randomHex:16> b"
    assert fill_generated(text, PlaceholderRandom()) == text


def test_both_sources_satisfy_the_protocol() -> None:
    assert isinstance(CryptoRandom(), RandomSource)
    assert isinstance(PlaceholderRandom(), RandomSource)


def test_an_unknown_random_function_is_rejected_by_the_sources() -> None:
    with pytest.raises(ValueError, match="unknown random function"):
        CryptoRandom().token("randomFoo", 3)
    with pytest.raises(ValueError, match="no argument"):
        PlaceholderRandom().token("uuidv4", 3)


# ── strings ──────────────────────────────────────────────────────────────────────

@pytest.mark.parametrize(("name", "args", "expected"), [
    ("toLower", ("PROD",), "prod"),
    ("toLower", (None,), ""),
    ("toUpper", ("premium",), "PREMIUM"),
    ("toUpper", (True,), "TRUE"),
    ("trimSpace", ("  example.com \n",), "example.com"),
    ("trim", ("/images/nginx/", "/"), "images/nginx"),
    ("trim", ("xxhixy", "xy"), "hi"),
    ("trimPrefix", ("app-frontend", "app-"), "frontend"),
    ("trimPrefix", ("frontend", "app-"), "frontend"),
    ("trimSuffix", ("nginx:latest", ":latest"), "nginx"),
    ("hasPrefix", ("gcr.io/p/app:v1", "gcr.io/"), True),
    ("hasPrefix", ("docker.io/app", "gcr.io/"), False),
    ("hasSuffix", ("gcr.io/p/app:v1", "v1"), True),
    ("contains", ("production", "prod"), True),
    ("contains", ("staging", "prod"), False),
    ("contains", (12345, 234), True),
    ("replace", ("my.app.example.com", ".", "-"), "my-app-example-com"),
    ("split", ("latest,stable,v2", ","), ["latest", "stable", "v2"]),
    ("split", ("abc", ""), ["a", "b", "c"]),
    ("join", (["api.example.com", "admin.example.com"], ", "),
     "api.example.com, admin.example.com"),
    ("join", (None, ","), ""),
    ("concat", ("*.", "api.example.com"), "*.api.example.com"),
    ("concat", ("webapp", "-", 3), "webapp-3"),
    ("repeat", ("ha", 3), "hahaha"),
    ("repeat", ("ha", 0), ""),
    ("camelToKebab", ("WebsiteOperator",), "website-operator"),
    ("camelToKebab", ("myAppName",), "my-app-name"),
    ("camelToKebab", ("HTTPServer",), "http-server"),
    ("camelToKebab", ("already-kebab",), "already-kebab"),
    ("truncate", ("abc", 3), "abc"),
    ("truncate", ("abc", 10), "abc"),
])
def test_string_notes(name: str, args: tuple[Any, ...], expected: Any) -> None:
    assert call(name, *args) == expected


@pytest.mark.parametrize(("name", "args"), [
    ("repeat", ("x", 2_000_000)),
])
def test_string_notes_reject_unusable_arguments(name: str, args: tuple[Any, ...]) -> None:
    with pytest.raises(NoteError, match=name):
        call(name, *args)


# ── math ─────────────────────────────────────────────────────────────────────────

@pytest.mark.parametrize(("name", "args", "expected"), [
    ("add", (8080, 1000), 9080),
    ("add", (1.5, 1), 2.5),
    ("add", (1.5, 1.5), 3),
    ("add", (999999.5, 0.5), 1000000),
    ("add", ("2", "3"), 5),
    ("add", (True, 1), 2),
    ("sub", (3, 1), 2),
    ("sub", (1, 3), -2),
    ("sub", (2.5, 1), 1.5),
    ("mul", (3, 2), 6),
    ("mul", (1073741824, 0.5), 536870912),
    ("mul", (0.1, 3), 0.30000000000000004),
    ("div", (8, 4), 2),
    ("div", (7, 2), 3.5),
    ("div", (1, 4.0), 0.25),
    ("div", (-9, 3), -3),
    ("mod", (8080, 100), 80),
    ("mod", (-7, 3), -1),
    ("mod", (7, -3), 1),
    ("mod", (7.9, 3), 1),
    ("min", (15, 10), 10),
    ("min", (3, 10), 3),
    ("min", (3, 1.5), 1.5),
    ("max", (1, 2), 2),
    ("max", (5, 2), 5),
    ("clamp", (0, 1, 20), 1),
    ("clamp", (5, 1, 20), 5),
    ("clamp", (25, 1, 20), 20),
    ("clamp", (2.5, 1, 20), 2.5),
    ("abs", (-300,), 300),
    ("abs", (300,), 300),
    ("abs", (-1.5,), 1.5),
])
def test_math_notes(name: str, args: tuple[Any, ...], expected: Any) -> None:
    result = call(name, *args)
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(("name", "args", "message"), [
    ("div", (1, 0), "division by zero"),
    ("div", (1, "0"), "division by zero"),
    ("mod", (1, 0), "division by zero"),
])
def test_math_errors_name_the_note(name: str, args: tuple[Any, ...], message: str) -> None:
    with pytest.raises(NoteError, match=message):
        call(name, *args)


@given(st.integers(-10**12, 10**12), st.integers(-10**12, 10**12).filter(bool))
def test_mod_keeps_the_sign_of_the_dividend_like_go(a: int, b: int) -> None:
    result = call("mod", a, b)
    assert abs(result) < abs(b)
    assert result == 0 or (result > 0) == (a > 0)
    assert (a - result) % b == 0


# ── conditional ──────────────────────────────────────────────────────────────────

@pytest.mark.parametrize(("name", "args", "expected"), [
    ("ternary", (True, "debug", "info"), "debug"),
    ("ternary", (False, "debug", "info"), "info"),
    ("ternary", ("image", "custom", "default"), "custom"),
    ("ternary", ("", "custom", "default"), "default"),
    ("ternary", ("false", "a", "b"), "a"),
    ("boolTernary", (True, "Suspended", "Active"), "Suspended"),
    ("boolTernary", (False, "Suspended", "Active"), "Active"),
    ("boolDefault", (None, False), False),
    ("boolDefault", (True, False), True),
    ("boolDefault", ("true", False), False),
    ("eqTernary", ("true", "true", "ready", "waiting"), "ready"),
    ("eqTernary", ("false", "true", "ready", "waiting"), "waiting"),
    ("eqTernary", (True, "true", "ready", "waiting"), "ready"),
    ("eqTernary", (3, "3", "y", "n"), "y"),
    ("coalesce", (None, "", "nginx:latest"), "nginx:latest"),
    ("coalesce", ("a", "b"), "a"),
    ("coalesce", (None, 0, []), None),
    ("empty", (None,), True),
    ("empty", ("",), True),
    ("empty", ("<no value>",), True),
    ("empty", (0,), True),
    ("empty", (0.0,), True),
    ("empty", (False,), True),
    ("empty", ([],), True),
    ("empty", ({},), True),
    ("empty", ("x",), False),
    ("empty", ([0],), False),
    ("notEmpty", ("x",), True),
    ("notEmpty", (None,), False),
    ("default", (None, 2), 2),
    ("default", (0, 2), 2),
    ("default", ("", "info"), "info"),
])
def test_conditional_notes(name: str, args: tuple[Any, ...], expected: Any) -> None:
    assert call(name, *args) == expected


def test_default_takes_fallback_then_value_like_sprig_and_orkestra() -> None:
    assert call("default", "fallback", "given") == "given"  # `"given" | default "fallback"`
    assert call("default", "fallback", "") == "fallback"  # what `"" | default "fallback"` does


def test_bool_ternary_rejects_a_non_bool_condition() -> None:
    with pytest.raises(NoteError, match="expected bool"):
        call("boolTernary", "yes", "a", "b")


# ── types ────────────────────────────────────────────────────────────────────────

@pytest.mark.parametrize(("value", "name"), [
    ("x", "string"), (3, "number"), (3.5, "number"), (True, "bool"), ({}, "map"),
    ([], "slice"), (None, "null"), (object(), "unknown"),
])
def test_type_of_uses_orkestras_names(value: Any, name: str) -> None:
    assert call("typeOf", value) == name
    predicates = {"string": "typeString", "number": "typeNumber", "bool": "typeBool",
                  "map": "typeMap", "slice": "typeList", "null": "typeNull"}
    for type_name, predicate in predicates.items():
        assert call(predicate, value) is (type_name == name)


@pytest.mark.parametrize(("name", "value", "expected"), [
    ("toInt", "3", 3), ("toInt", 3.7, 3), ("toInt", True, 1), ("toInt", False, 0),
    ("toInt", "3.7", 3),   ("toInt", -2.9, -2),
    ("toFloat", "0.75", 0.75), ("toFloat", 3, 3.0),
    ("toBool", "yes", True), ("toBool", "no", False), ("toBool", "true", True),
    ("toBool", "ON", True), ("toBool", "off", False), ("toBool", "", False),
    ("toBool", 1, True), ("toBool", 0.0, False),
    ("toString", 3, "3"), ("toString", True, "true"), ("toString", 3.14, "3.14"),
    ("toString", 1e6, "1e+06"), ("toString", None, ""), ("toString", ["a", "b"], "[a b]"),
    ("toString", {"k": "v"}, "map[k:v]"),
])
def test_type_conversions(name: str, value: Any, expected: Any) -> None:
    result = call(name, value)
    assert result == expected
    assert type(result) is type(expected)


def test_to_bool_rejects_unknown_words() -> None:
    with pytest.raises(NoteError, match="toBool"):
        call("toBool", "maybe")


# ── collections and safe access ──────────────────────────────────────────────────

OBJ = {"spec": {"replicas": 3, "image": "nginx", "enabled": True, "flag": "false",
                "zero": 0, "empty": "", "none": None, "items": [{"name": "a"}],
                "labels": {"app": "web"}, "ratio": "2.5", "count": "7"}}


@pytest.mark.parametrize(("name", "args", "expected"), [
    ("listHas", (["us-east-1", "eu-west-1"], "us-east-1"), True),
    ("listHas", (["eu-west-1"], "us-east-1"), False),
    ("listHas", (["1"], 1), False),
    ("listHas", ([True], 1), False),
    ("listHas", (None, "x"), False),
    ("listGet", (["a", "b"], 0), "a"),
    ("listGet", ([], 0), None),
    ("listGet", (["a"], -1), None),
    ("listGet", ("nope", 0), None),
    ("listLen", (["a", "b"],), 2),
    ("listLen", ("ab",), 0),
    ("mapGet", ({"app": "frontend"}, "app"), "frontend"),
    ("mapGet", ({"app": "frontend"}, "tier"), None),
    ("mapGet", (None, "app"), None),
    ("mapKeys", ({"tier": 1, "app": 2},), ["app", "tier"]),
    ("mapKeys", ([1],), []),
    ("mapValues", ({"b": 1, "a": 2},), [2, 1]),
    ("mapValues", (None,), []),
    ("asList", (["x"],), ["x"]),
    ("asList", ('["us-east-1"]',), ["us-east-1"]),
    ("asList", ("neither",), []),
    ("asList", ('{"a": 1}',), []),
    ("asMap", ({"a": 1},), {"a": 1}),
    ("asMap", ('{"a": 1}',), {"a": 1}),
    ("asMap", ("[1]",), {}),
    ("asString", (3,), "3"),
    ("asString", (True,), "true"),
    ("asString", ({"key": "val"},), '{"key":"val"}'),
    ("asString", ([1, "a"],), '[1,"a"]'),
])
def test_collection_notes(name: str, args: tuple[Any, ...], expected: Any) -> None:
    assert call(name, *args) == expected


@pytest.mark.parametrize(("name", "args", "expected"), [
    ("getOr", (3, 1), 3),
    ("getOr", (None, 1), 1),
    ("getOr", ("", "x"), "x"),
    ("getOrDefault", (OBJ, "spec.image", "busybox"), "nginx"),
    ("getOrDefault", (None, "spec.image", "busybox"), "busybox"),
    ("getStringOr", ("busybox:1.35", "nginx"), "busybox:1.35"),
    ("getStringOr", (3, "nginx"), "nginx"),
    ("getStringOr", ("", "nginx"), "nginx"),
    ("getBoolOr", (True, False), True),
    ("getBoolOr", ("true", False), False),
    ("getString", (OBJ, "spec.image"), "nginx"),
    ("getString", (OBJ, "spec.replicas"), "3"),
    ("getString", (OBJ, "spec.enabled"), "true"),
    ("getString", (OBJ, "spec.labels"), ""),
    ("getString", (OBJ, "spec.missing", "dflt"), "dflt"),
    ("getInt", (OBJ, "spec.replicas"), 3),
    ("getInt", (OBJ, "spec.count"), 7),
    ("getInt", (OBJ, "spec.ratio"), 2),
    ("getInt", (OBJ, "spec.image", -1), -1),
    ("getInt", (OBJ, "spec.enabled", -1), -1),
    ("getInt", (OBJ, "spec.missing"), 0),
    ("getBool", (OBJ, "spec.enabled"), True),
    ("getBool", (OBJ, "spec.flag"), False),
    ("getBool", (OBJ, "spec.image", True), True),
    ("getBool", (OBJ, "spec.missing"), False),
    ("getList", (OBJ, "spec.items"), [{"name": "a"}]),
    ("getList", (OBJ, "spec.image"), []),
    ("getList", (OBJ, "spec.missing", ["x"]), ["x"]),
    ("getMap", (OBJ, "spec.labels"), {"app": "web"}),
    ("getMap", (OBJ, "spec.items"), {}),
])
def test_safe_access_notes(name: str, args: tuple[Any, ...], expected: Any) -> None:
    result = call(name, *args)
    assert result == expected
    assert type(result) is type(expected)


def test_get_or_with_a_wrong_number_of_arguments_is_an_error() -> None:
    with pytest.raises(NoteError, match="getOr"):
        call("getOr", 1)


def test_get_list_default_is_a_fresh_list_each_time() -> None:
    first = call("getList", OBJ, "spec.missing")
    first.append(1)
    assert call("getList", OBJ, "spec.missing") == []


# ── Kubernetes helpers ───────────────────────────────────────────────────────────

DEPLOY = {
    "metadata": {"name": "web", "namespace": "prod", "labels": {"app": "web", "empty": ""},
                 "annotations": {"note": "x"}, "creationTimestamp": "2026-04-01T08:00:00Z"},
    "spec": {"replicas": 3},
    "status": {"readyReplicas": 2, "availableReplicas": 1, "updatedReplicas": 3,
               "phase": "Running", "endpoint": "10.0.0.1",
               "conditions": [
                   {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                    "message": "ok"},
                   {"type": "Progressing", "status": "False"}]},
}


@pytest.mark.parametrize(("name", "args", "expected"), [
    ("meta", (DEPLOY,), DEPLOY["metadata"]),
    ("meta", (None,), {}),
    ("labels", (DEPLOY,), {"app": "web", "empty": ""}),
    ("labels", ({},), {}),
    ("annotations", (DEPLOY,), {"note": "x"}),
    ("spec", (DEPLOY,), {"replicas": 3}),
    ("status", (None,), {}),
    ("get", (DEPLOY, "status", "endpoint"), "10.0.0.1"),
    ("get", (DEPLOY, "spec"), {"replicas": 3}),
    ("getLabel", (DEPLOY, "app"), "web"),
    ("getLabel", (DEPLOY, "nope"), ""),
    ("getAnnotation", (DEPLOY, "note"), "x"),
    ("hasLabel", (DEPLOY, "app"), True),
    ("hasLabel", (DEPLOY, "empty"), False),
    ("hasAnnotation", (DEPLOY, "note"), True),
    ("resourceName", (DEPLOY,), "web"),
    ("resourceNamespace", (DEPLOY,), "prod"),
    ("resourceNamespace", (None,), ""),
    ("creationTimestamp", (DEPLOY,), "2026-04-01T08:00:00Z"),
    ("phase", (DEPLOY,), "Running"),
    ("phase", (None,), ""),
    ("phase", ({"status": {}},), ""),
    ("hasCondition", (DEPLOY, "Available"), True),
    ("hasCondition", (DEPLOY, "Progressing"), False),
    ("hasCondition", (DEPLOY, "Degraded"), False),
    ("hasCondition", (None, "Available"), False),
    ("conditionStatus", (DEPLOY, "Progressing"), "False"),
    ("conditionStatus", (DEPLOY, "Missing"), ""),
    ("conditionReason", (DEPLOY, "Available"), "MinimumReplicasAvailable"),
    ("conditionMessage", (DEPLOY, "Available"), "ok"),
    ("conditionMessage", (DEPLOY, "Progressing"), ""),
    ("allReplicasReady", (DEPLOY,), False),
    ("allReplicasReady", ({"spec": {"replicas": 2}, "status": {"readyReplicas": 2}},), True),
    ("allReplicasReady", ({"spec": {"replicas": 0}, "status": {}},), True),
    ("allReplicasReady", ({"metadata": {"name": "x"}},), False),
    ("allReplicasReady", (None,), False),
])
def test_kubernetes_helpers(name: str, args: tuple[Any, ...], expected: Any) -> None:
    result = call(name, *args)
    assert result == expected
    assert type(result) is type(expected)


# ── time ─────────────────────────────────────────────────────────────────────────

@pytest.mark.parametrize(("name", "args", "expected"), [
    ("now", (), "2026-04-06T08:00:00Z"),
    ("timeAgo", ("2026-04-06T07:59:55Z",), "5s ago"),
    ("timeAgo", ("2026-04-06T07:48:00Z",), "12m ago"),
    ("timeAgo", ("2026-04-06T05:00:00Z",), "3h ago"),
    ("timeAgo", ("2026-04-04T08:00:00Z",), "2d ago"),
    ("timeAgo", ("yesterday",), ""),
    ("timeSince", ("2026-04-06T07:00:00Z",), 3600),
    ("timeSince", ("2026-04-06T09:00:00+02:00",), 3600),
    ("timeSince", ("",), 0),
    ("timeUntil", ("2026-05-06T08:00:00Z",), "720h0m0s"),
    ("timeUntil", ("2026-04-06T08:01:30.7Z",), "1m30s"),
    ("timeUntil", ("2026-04-06T07:00:00Z",), "0s"),
    ("timeUntil", ("garbage",), "0s"),
    ("isExpired", ("2026-03-01T08:00:00Z", "30d"), True),
    ("isExpired", ("2026-03-07T08:00:01Z", "30d"), False),
    ("isExpired", ("2026-04-06T07:00:00Z", "1h30m"), False),
    ("isExpired", ("", "30d"), False),
    ("timeFormat", ("2026-04-13T08:05:09.12345Z", "Jan 2, 2006"), "Apr 13, 2026"),
    ("timeFormat", ("2026-04-13T08:05:09.12345Z", "2006-01-02"), "2026-04-13"),
    ("timeFormat", ("bad", "2006"), ""),
    ("durationSeconds", ("5m",), 300),
    ("durationSeconds", ("1h30m",), 5400),
    ("durationSeconds", ("7d",), 604800),
    ("durationSeconds", ("x",), 0),
    ("durationValid", ("30d",), True),
    ("durationValid", ("30x",), False),
    ("durationAdd", ("5m", "30s"), "5m30s"),
    ("durationAdd", ("1d", "1h"), "25h0m0s"),
    ("durationAdd", ("5m", "x"), "0s"),
    ("timeInWindow", ("07:00", "09:00"), True),
    ("timeInWindow", ("08:00", "09:00"), True),
    ("timeInWindow", ("06:00", "08:00"), False),
    ("timeInWindow", ("9am", "10:00"), False),
    ("timeNotInWindow", ("09:00", "18:00"), True),
    ("timeNotInWindow", ("07:00", "09:00"), False),
    ("weekday", (), True),
    ("weekend", (), False),
])
def test_time_notes_use_the_injected_clock(name: str, args: tuple[Any, ...],
                                           expected: Any) -> None:
    assert call(name, *args) == expected


def test_is_expired_of_an_invalid_duration_is_false_as_in_orkestra() -> None:
    assert call("isExpired", "2026-03-01T08:00:00Z", "30x") is False


def test_a_naive_clock_is_taken_as_utc_and_weekends_are_detected() -> None:
    saturday = functions(datetime(2026, 4, 11, 12, 0))
    assert saturday["now"]() == "2026-04-11T12:00:00Z"
    assert saturday["weekend"]() is True and saturday["weekday"]() is False


@pytest.mark.parametrize(("layout", "expected"), [
    # verified with Go 1.26 time.Format on 2026-04-13T08:05:09.12345Z
    ("Jan 2, 2006", "Apr 13, 2026"),
    ("2006-01-02T15:04:05Z07:00", "2026-04-13T08:05:09Z"),
    ("Monday 3:04PM", "Monday 8:05AM"),
    ("02/01/06 15:04:05.000", "13/04/26 08:05:09.123"),
    ("15:04:05.999999999 -0700 MST", "08:05:09.12345 +0000 UTC"),
    ("_2 __2 002", "13 103 103"),
])
def test_time_format_follows_go_layouts(layout: str, expected: str) -> None:
    assert call("timeFormat", "2026-04-13T08:05:09.12345Z", layout) == expected


def test_time_format_keeps_offsets_like_go() -> None:
    # Orkestra formats t.UTC(): the offset is applied, the zone is Z
    assert call("timeFormat", "2026-04-03T18:05:09+05:30",
                "2006-01-02T15:04:05Z07:00 .999 .000") == "2026-04-03T12:35:09Z  .000"


# ── data ─────────────────────────────────────────────────────────────────────────

@pytest.mark.parametrize(("name", "args", "expected"), [
    ("toBase64", ("hello",), "aGVsbG8="),
    ("toBase64", ("",), ""),
    ("toBase64", ("é",), "w6k="),
    ("fromBase64", ("aGVsbG8=",), "hello"),
    ("fromBase64", ("w6k=",), "é"),
    ("toJSON", ({"replicas": 3, "enabled": True},), '{"enabled":true,"replicas":3}'),
    ("toJSON", ({"b": 1.0, "a": [1e21, 1.5e-7, None, "<x>&"]},),
     '{"a":[1e+21,1.5e-7,null,"\\u003cx\\u003e\\u0026"],"b":1}'),
    ("toJson", ("x",), '"x"'),
    ("fromJSON", ('{"a": [1, 2]}',), {"a": [1, 2]}),
    ("fromJSON", ("3",), 3),
    ("sha256sum", ("hello",), "2cf24dba"),
    ("sha256sum", ("",), "e3b0c442"),
    ("truncateName", ("a-very-long-project-name", 6), "a-very"),
    ("truncateName", ("short", 50), "short"),
    ("slugify", ("My Team / Platform",), "my-team-platform"),
    ("slugify", ("--Hello__World!!",), "hello-world"),
    ("slugify", ("Ünïcode 42",), "n-code-42"),
])
def test_data_notes(name: str, args: tuple[Any, ...], expected: Any) -> None:
    assert call(name, *args) == expected


@pytest.mark.parametrize(("value", "expected"), [
    # verified with Go 1.26 encoding/json
    (1.0, "1"), (1.5, "1.5"), (1e21, "1e+21"), (1.5e-7, "1.5e-7"), (123456789.0, "123456789"),
    (0.000001, "0.000001"), (1e-7, "1e-7"), (1e100, "1e+100"), (3.14, "3.14"),
    (12345678901234567890.0, "12345678901234567000"),
])
def test_json_numbers_are_written_like_go(value: float, expected: str) -> None:
    assert go_json(value) == expected


@pytest.mark.parametrize(("name", "arg"), [("fromJSON", "{bad"), ("toJson", float("nan"))])
def test_data_notes_reject_invalid_input(name: str, arg: Any) -> None:
    with pytest.raises(NoteError):
        call(name, arg)


# ── cron ─────────────────────────────────────────────────────────────────────────

SCHEDULE = {"minute": "*/5", "hour": "0", "dayOfMonth": "*", "month": "*", "dayOfWeek": "1"}


@pytest.mark.parametrize(("name", "args", "expected"), [
    ("cronExpr", ("*/1", "*", "*", "*", "*"), "*/1 * * * *"),
    ("cronExpr", ("0", "", None, "*", "1"), "0 * * * 1"),
    ("cronFromMap", (SCHEDULE,), "*/5 0 * * 1"),
    ("cronFromMap", ({"minute": "30"},), "30 * * * *"),
    ("cronFromAny", (SCHEDULE,), "*/5 0 * * 1"),
    ("cronFromAny", ("  */5   0 * * 1 ",), "*/5 0 * * 1"),
    ("cronFromAny", (None,), "* * * * *"),
    ("cronNormalize", ("@daily",), "0 0 * * *"),
    ("cronNormalize", ("@hourly",), "0 * * * *"),
    ("cronNormalize", ("*/5 * * * *",), "*/5 * * * *"),
    ("cronNormalize", ("",), "* * * * *"),
    ("cronNormalize", ("1 2 3",), "* * * * *"),
    ("cronMinute", ("*/5 2 * * 1",), "*/5"),
    ("cronHour", ("*/5 2 * * 1",), "2"),
    ("cronDom", ("0 0 15 * *",), "15"),
    ("cronMonth", ("0 0 1 6 *",), "6"),
    ("cronDow", ("0 0 * * 1",), "1"),
    ("cronMinute", ("",), "*"),
    ("cronField", ("0 0 1 6 *", 3), "6"),
    ("nextCron", ("0 2 * * 0",), "2026-04-12T02:00:00Z"),
    ("nextCron", ("bad",), ""),
])
def test_cron_notes(name: str, args: tuple[Any, ...], expected: Any) -> None:
    assert call(name, *args) == expected


@pytest.mark.parametrize("expr", [
    "* * * * *", "*/5 * * * *", "0 0 1 1 *", "1,2,3 * * * *", "0-30/10 8-18 * * MON-FRI",
    "0 0 * JAN-MAR *", "5/15 * * * *", "0 0 ? * *", "? * * * *", "@hourly", "@daily",
    "@weekly", "@monthly", "@yearly", "@annually", "@midnight",  "0 0 1 * mon",
])
def test_valid_cron_expressions(expr: str) -> None:
    assert call("cronValid", expr) is True


@pytest.mark.parametrize("expr", [
    # each rejected by robfig/cron's standard parser (verified) or malformed
    "* * * *", "@bogus",  "",  "* * * * * *",
])
def test_invalid_cron_expressions(expr: str) -> None:
    assert call("cronValid", expr) is False


@pytest.mark.parametrize(("expr", "first", "second"), [
    # verified with robfig/cron v3 ParseStandard(...).Next from 2026-07-15T12:00:00Z
    ("0 2 * * 0", "2026-07-19T02:00:00Z", "2026-07-26T02:00:00Z"),
    ("0 0 29 2 *", "2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"),
    ("*/7 * * * *", "2026-07-15T12:07:00Z", "2026-07-15T12:14:00Z"),
    ("0 0 1 * MON", "2026-07-20T00:00:00Z", "2026-07-27T00:00:00Z"),
    ("30 9 * * 1-5", "2026-07-16T09:30:00Z", "2026-07-17T09:30:00Z"),
    ("5/15 * * * *", "2026-07-15T12:05:00Z", "2026-07-15T12:20:00Z"),
    ("0 0 * JAN-MAR *", "2027-01-01T00:00:00Z", "2027-01-02T00:00:00Z"),
])
def test_next_cron_fire_times_match_robfig_cron(expr: str, first: str, second: str) -> None:
    start = datetime(2026, 7, 15, 12, 0, tzinfo=UTC)
    assert functions(start)["nextCron"](expr) == first
    after = datetime.fromisoformat(first.replace("Z", "+00:00"))
    assert functions(after)["nextCron"](expr) == second


def test_cron_field_errors_for_texts_without_five_fields() -> None:
    with pytest.raises(NoteError):
        call("cronHour", "1 2 3")
    with pytest.raises(NoteError):
        call("cronFromMap", "0 * * * *")
    with pytest.raises(NoteError):
        call("cronExpr", "0", "1")


# ── quantity ─────────────────────────────────────────────────────────────────────

@pytest.mark.parametrize(("text", "value"), [
    # values verified with k8s.io/apimachinery resource.ParseQuantity (v0.37.2)
    ("1Ki", 1024), ("1Mi", 1048576), ("1.5Gi", 1610612736), ("1Ti", 1099511627776),
    ("1Pi", 1125899906842624), ("1Ei", 1152921504606846976), ("1k", 1000), ("1M", 10**6),
    ("1G", 10**9), ("1T", 10**12), ("1P", 10**15), ("1E", 10**18), ("100m", Decimal("0.1")),
    ("0.1", Decimal("0.1")), ("1e3", 1000), ("1E3", 1000), ("1.5e-3", Decimal("0.0015")),
    ("12e6", 12 * 10**6), ("-1Gi", -1073741824), ("+2", 2), (".5", Decimal("0.5")),
    ("5.", 5), ("0", 0), ("1n", Decimal("1e-9")), ("1u", Decimal("1e-6")),
    ("0.5m", Decimal("0.0005")), ("1.5Ki", 1536), ("100Mi", 104857600), ("1e+3", 1000),
    ("2000000000000000000000", 2 * 10**21),
])
def test_quantities_parse_exactly(text: str, value: Any) -> None:
    assert parse_quantity(text) == Decimal(value)


@pytest.mark.parametrize("text", [
    # rejected by apimachinery (verified), plus `Gi` which Go reads as 0 (orksync rejects)
    "1K", "1kb", "1 Gi", " 1Gi", "", "1e", "1.2.3", "1e-3m", "0x10", "1mi", "Gi", ".", "-",
])
def test_invalid_quantities_raise_value_error(text: str) -> None:
    with pytest.raises(ValueError, match="invalid quantity"):
        parse_quantity(text)


@pytest.mark.parametrize(("name", "args", "expected"), [
    # Value()/MilliValue() round up, as apimachinery (verified: 100m → 1, 1.5e-3 → 2 milli)
    ("quantityToBytes", ("1Gi",), 1073741824),
    ("quantityToBytes", ("100m",), 1),
    ("quantityToBytes", ("0.5",), 1),
    ("quantityToBytes", ("-1Gi",), -1073741824),
    ("quantityToMillis", ("250m",), 250),
    ("quantityToMillis", ("1.5e-3",), 2),
    ("quantityToMillis", ("0.5m",), 1),
    ("quantityToMillis", ("2",), 2000),
    ("quantityAdd", ("1Gi", "512Mi"), "1536Mi"),
    ("quantityAdd", ("500m", "500m"), "1"),
    ("quantityAdd", ("100m", "200m"), "300m"),
    ("quantityAdd", ("1", "1k"), "1001"),
    ("quantityAdd", ("1k", "1k"), "2k"),
    ("quantityAdd", ("1e3", "1e3"), "2e3"),
    ("quantityAdd", ("0", "1Gi"), "1Gi"),
    ("sumQuantity", ("1Gi", "1Gi"), "2Gi"),
    ("subtractQuantity", ("1Gi", "512Mi"), "512Mi"),
    ("subtractQuantity", ("500m", "500m"), "0"),
    ("subtractQuantity", ("100m", "200m"), "-100m"),
    ("quantityCompare", ("1Gi", "1000Mi"), 1),
    ("quantityCompare", ("1G", "1Gi"), -1),
    ("quantityCompare", ("1000m", "1"), 0),
    ("parseQuantity", ("100m",), 0.1),
    ("parseQuantity", ("1Gi",), 1073741824.0),
])
def test_quantity_notes(name: str, args: tuple[Any, ...], expected: Any) -> None:
    result = call(name, *args)
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(("text", "canonical"), [
    # canonical strings verified with apimachinery Quantity.String()
    ("1.5Gi", "1536Mi"), ("1.5Ki", "1536"), ("0.1", "100m"), (".5", "500m"),
    ("1.5e-3", "1500e-6"), ("12e6", "12e6"), ("0.5m", "500u"), ("100Mi", "100Mi"),
    ("-1Gi", "-1Gi"), ("1n", "1n"),
])
def test_canonical_quantity_text_matches_apimachinery(text: str, canonical: str) -> None:
    from orksync.render.notes.quantity import parse_quantity_format

    value, fmt = parse_quantity_format(text)
    assert format_quantity(value, fmt) == canonical


def test_quantity_notes_name_themselves_on_bad_input() -> None:
    with pytest.raises(NoteError, match="quantityAdd"):
        call("quantityAdd", "1Gi", "lots")


@given(st.integers(min_value=0, max_value=2**40),
       st.sampled_from([("Ki", 2**10), ("Mi", 2**20), ("Gi", 2**30), ("k", 10**3),
                        ("M", 10**6), ("", 1), ("m", Decimal("0.001"))]))
def test_integer_quantities_scale_by_their_suffix(n: int, unit: tuple[str, Any]) -> None:
    suffix, factor = unit
    assert parse_quantity(f"{n}{suffix}") == n * Decimal(factor)


@given(st.integers(min_value=-(2**50), max_value=2**50),
       st.sampled_from(["BinarySI", "DecimalSI", "DecimalExponent"]))
def test_canonical_text_parses_back_to_the_same_value(n: int, fmt: Any) -> None:
    value = Decimal(n) / 1000
    assert parse_quantity(format_quantity(value, fmt)) == value


# ── semver ───────────────────────────────────────────────────────────────────────

@pytest.mark.parametrize(("name", "args", "expected"), [
    ("semverConstraint", ("1.5.0", "^1.0"), True),
    ("semverConstraint", ("2.0.0", ">=1.2.0,<2.0.0"), False),
    ("semverConstraint", ("bad", ">=1"), False),
    ("semverValid", ("v1.2.3",), True),
    ("semverValid", ("1.2.3-rc.1+build.5",), True),
    ("semverValid", ("1.2.3.4",), False),
    ("semverMajor", ("nope",), ""),
    ("semverBump", ("1.2.3", "patch"), "1.2.4"),
    ("semverBump", ("2.1.0-rc1", "patch"), "2.1.1"),
    ("semverBump", ("1.2.3", "minor"), "1.3.0"),
    ("semverBump", ("1.2.3", "major"), "2.0.0"),
    ("semverBump", ("bad", "major"), "bad"),
])
def test_semver_helpers(name: str, args: tuple[Any, ...], expected: Any) -> None:
    assert call(name, *args) == expected


@given(st.tuples(st.integers(0, 50), st.integers(0, 50), st.integers(0, 50)),
       st.tuples(st.integers(0, 50), st.integers(0, 50), st.integers(0, 50)))
def test_semver_compare_agrees_with_tuple_order(a: tuple[int, ...], b: tuple[int, ...]) -> None:
    expected = (a > b) - (a < b)
    assert call("semverCompare", ".".join(map(str, a)), ".".join(map(str, b))) == expected
    assert call("semverCompare", ">=" + ".".join(map(str, a)), ".".join(map(str, b))) == 0


# ── user notes ───────────────────────────────────────────────────────────────────

def _engine(functions: Mapping[str, Callable[..., Any]]) -> Callable[[str, Mapping], str]:
    """A tiny stand-in for the Go-template engine: `{{ name .argN... }}` or `{{ .argN }}`."""

    def render(template: str, data: Mapping[str, Any]) -> str:
        body = template.strip().removeprefix("{{").removesuffix("}}").split()
        if body[0].startswith("."):
            return str(data.get(body[0][1:], ""))
        args = [data.get(a[1:]) if a.startswith(".") else a.strip('"') for a in body[1:]]
        result = functions[body[0]](*args)
        return {True: "true", False: "false"}.get(result, str(result)) \
            if isinstance(result, bool) else str(result)

    return render


def test_user_notes_see_their_arguments_and_return_bools_for_true_false() -> None:
    table: dict[str, Callable[..., Any]] = dict(F)
    seen: list[Mapping[str, Any]] = []

    def render(template: str, data: Mapping[str, Any]) -> str:
        seen.append(data)
        return _engine(table)(template, data)

    notes = user_notes({"isProd": '{{ eq .arg0 "production" }}', "echo": "{{ .arg1 }}",
                        "upper": {"expression": "{{ toUpper .arg0 }}"}}, render)
    table["eq"] = lambda a, b: a == b
    table.update(notes)
    assert notes["isProd"]("production") is True
    assert notes["isProd"]("staging") is False
    assert notes["echo"]("a", "b") == "b"
    assert notes["upper"]("x") == "X"
    assert seen[0] == {"args": ["production"], "arg0": "production"}
    assert seen[2] == {"args": ["a", "b"], "arg0": "a", "arg1": "b"}


def test_user_notes_without_arguments_get_an_empty_args_list() -> None:
    notes = user_notes({"answer": "{{ fortyTwo }}"}, lambda t, d: f" 42 {d['args']}")
    assert notes["answer"]() == "42 []"


def test_a_user_note_calling_itself_fails_cleanly() -> None:
    table: dict[str, Callable[..., Any]] = {}
    table.update(user_notes({"loop": "{{ loop }}"}, _engine(table)))
    with pytest.raises(NoteError, match="nested deeper"):
        table["loop"]()


def test_a_user_note_needs_a_text_expression() -> None:
    with pytest.raises(NoteError, match="expression"):
        user_notes({"bad": {"expression": 3}}, lambda t, d: "")


def test_time_notes_do_not_read_the_wall_clock() -> None:
    past = functions(NOW - timedelta(days=3650))
    assert past["now"]() == "2016-04-08T08:00:00Z"


# ── Orkestra's semantics through the Go dialect (expected values: orkoracle) ─────

ORK_DATA = {"spec": {"name": "web", "zero": 0, "count": 5, "three": 3, "nums": [1, 2, 3],
                     "list": ["a", "b"], "mil": 1000000.0,
                     "huge": 123456789012345678901234567890, "half": 2.5}}


@pytest.mark.parametrize(("template", "expected"), [
    # default takes (fallback, value), so a piped value is kept
    ('{{ .spec.name | default "x" }}', "web"), ('{{ .spec.missing | default "x" }}', "x"),
    ('{{ default "x" .spec.name }}', "web"), ("{{ .spec.zero | default 7 }}", "7"),
    # len: 0 for anything but a string, a generic list or a map (a []string included)
    ("{{ len .spec.count }}", "0"), ('{{ len (split "a,b" ",") }}', "0"),
    ('{{ len "日本" }}', "6"), ("{{ len .spec.nums }}", "3"), ("{{ len nil }}", "0"),
    # ternary: an int64 from the custom resource is truthy even when 0
    ('{{ ternary .spec.zero "yes" "no" }}', "yes"), ('{{ ternary 0 "yes" "no" }}', "no"),
    # listHas compares Go types: the literal 3 (int) is not the int64 3
    ("{{ listHas .spec.nums 3 }}", "false"), ("{{ listHas .spec.nums .spec.three }}", "true"),
    # truncate cuts bytes
    ('{{ truncate "héllo wörld" 5 }}', "h\ufffd..."), ('{{ truncate "abcdef" 3 }}', "abc"),
    # toList drops empty items and gives a []string
    ('{{ toList "a, ,b,," }}', "[a b]"), ('{{ len (toList "a,b") }}', "0"),
    # cronDescribe's wording
    ('{{ cronDescribe "*/5 * * * *" }}', "Every 5 minutes"),
    ('{{ cronDescribe "30 2 * * *" }}', "At 2:30 every day"),
    ('{{ cronDescribe "0 9 * * 1-5" }}', "At 9:0 on day-of-week 1-5"),
    ('{{ cronDescribe "bad" }}', "Cron: * * * * *"),
    # fromBase64 of invalid input is empty
    ('{{ fromBase64 "!!!" }}', ""), ('{{ fromBase64 "aGVsbG8=" }}', "hello"),
    # numbers as the API server delivers them
    ("{{ .spec.mil }}", "1000000"), ("{{ .spec.huge }}", "1.2345678901234568e+29"),
    ("{{ .spec.half }}", "2.5"),
    # a text without {{ is verbatim; a template's output is trimmed
    ("  plain text  ", "  plain text  "), ("  {{ .spec.name }}  ", "web"),
    # typed notes: a []string is one, a list of the custom resource is not
    ('{{ join (split "a-b" "-") "+" }}', "a+b"),
    # define / template / block
    ('{{ define "x" }}<{{ .name }}>{{ end }}{{ template "x" .spec }}', "<web>"),
    ('{{ block "b" .spec.list }}{{ range . }}{{ . }}{{ end }}{{ end }}', "ab"),
    # notes that were missing
    ("{{ isEmpty .spec.zero }}", "false"), ('{{ mapPick .spec "name" "count" }}',
                                            "map[count:5 name:web]"),
    ('{{ cidrContains "10.0.0.0/8" "10.1.2.3" }}', "true"),
    ('{{ isValidEmail "a@b.io" }}', "true"), ("{{ formatQuantity 1.5 }}", "1500m"),
    ('{{ minusQuantity "1Gi" "512Mi" }}', "512Mi"), ('{{ getLabelInt . "x" }}', "0"),
])
def test_orkestra_semantics_in_the_go_dialect(template: str, expected: str) -> None:
    from orksync.render.gotemplate import GoTemplateEngine
    from orksync.render.notes.gocore import api_server_numbers

    engine = GoTemplateEngine(functions())
    assert engine.render(template, api_server_numbers(ORK_DATA)) == expected


@pytest.mark.parametrize(("template", "message"), [
    # where Orkestra fails, orksync fails, naming the note and the argument
    ("{{ .spec.missing | toUpper }}", "toUpper: argument 1 is missing"),
    ("{{ toUpper .spec.count }}", "expected string; got int64"),
    ('{{ join .spec.list "," }}', "expected \\[\\]string; got \\[\\]interface"),
    ("{{ truncate .spec.name .spec.three }}", "expected int; got int64"),
    ("{{ .spec.missing.deeper }}", "nil pointer evaluating"),
])
def test_where_orkestra_fails_orksync_fails_with_a_clear_error(template: str,
                                                                message: str) -> None:
    from orksync.render.gotemplate import GoTemplateEngine, GoTemplateError
    from orksync.render.notes.gocore import api_server_numbers

    engine = GoTemplateEngine(functions())
    with pytest.raises(GoTemplateError, match=message):
        engine.render(template, api_server_numbers(ORK_DATA))


def test_the_oracle_comparison_takes_seconds_counted_a_moment_apart_for_numbers() -> None:
    """A clock note's count of seconds, read by the oracle and by orksync a second apart,
    agrees (it is no date, although ISO's basic format would read it as one); instants or
    counts further apart than the tolerance do not."""
    from tests.templates import orkoracle_cases as oc

    def out(text: str) -> dict[str, object]:
        return {"ok": True, "out": text}

    template = '{{ timeSince "2024-01-31" }}'
    assert oc.compare("timeSince", template, out("90020826"), out("90020825")) is None
    assert oc.compare("timeSince", template, out("90020826"), out("90020816")) is not None
    assert oc.compare("timeAgo", template, out("2024-01-31T00:00:00Z"),
                      out("2024-01-31T00:00:02Z")) is None
    assert oc.compare("timeAgo", template, out("2024-01-31T00:00:00Z"),
                      out("2024-02-01T00:00:00Z")) is not None
