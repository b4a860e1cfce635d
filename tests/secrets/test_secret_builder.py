"""Pure tests of the Secret builder: rendered entry in, body + directives out."""

from __future__ import annotations

from typing import Any

import pytest

from orksync.render.builders import BuildContext, BuildError, Built
from orksync.render.builders.secret import build_secret

CTX = BuildContext(cr_name="shop", cr_namespace="team-a", owner_key="shop", name="shop-secret",
                   namespace="team-a",
                   labels={"app.kubernetes.io/managed-by": "orksync", "orkestra-owner": "shop"})
TOKEN = "<generate:randomAlphanumeric:32>"


def build(entry: dict[str, Any], ctx: BuildContext = CTX) -> Built:
    built = build_secret(entry, ctx)
    assert isinstance(built, Built)
    return built


def error_field(entry: dict[str, Any]) -> str:
    with pytest.raises(BuildError) as info:
        build_secret(entry, CTX)
    return info.value.field


def test_a_plain_secret_is_opaque_with_its_values_in_string_data_and_no_directives() -> None:
    built = build({"data": {"user": "admin", "port": 5432}})
    assert built.body == {
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "shop-secret", "namespace": "team-a", "labels": dict(CTX.labels)},
        "type": "Opaque", "stringData": {"port": "5432", "user": "admin"}}
    assert built.directives == {}


def test_user_annotations_are_honoured() -> None:
    built = build({"data": {"a": "b"}, "annotations": {"team": "payments"}})
    assert built.body["metadata"]["annotations"] == {"team": "payments"}


@pytest.mark.parametrize("key", ["orksync.io/generators", "orkestra.orkspace.io/generated-at"])
def test_annotations_orksync_writes_itself_are_reserved(key: str) -> None:
    assert error_field({"data": {"a": "b"}, "annotations": {key: "x"}}) == f"annotations.{key}"


@pytest.mark.parametrize(("declared", "expected", "data"), [
    (None, "Opaque", {"a": "b"}),
    ("kubernetes.io/basic-auth", "kubernetes.io/basic-auth", {"username": "u"}),
    ("Kubernetes.io/SSH-Auth", "kubernetes.io/ssh-auth", {"ssh-privatekey": "k"}),
    ("kubernetes.io/DockerConfigJson", "kubernetes.io/dockerconfigjson",
     {".dockerconfigjson": "{}"}),
    ("example.com/custom", "example.com/custom", {"a": "b"}),
])
def test_every_secret_type_is_honoured(declared: str | None, expected: str,
                                       data: dict[str, str]) -> None:
    entry: dict[str, Any] = {"data": data}
    if declared:
        entry["type"] = declared
    assert build(entry).body["type"] == expected


def test_a_type_missing_its_required_key_is_refused_naming_data() -> None:
    assert error_field({"type": "kubernetes.io/basic-auth", "data": {"x": "y"}}) == "data"


def test_an_entry_without_data_from_secret_or_tls_is_refused() -> None:
    with pytest.raises(BuildError, match="one of fromSecret, data or tls") as info:
        build_secret({"data": {}}, CTX)
    assert info.value.field == "data"


def test_random_values_stay_placeholder_tokens_and_only_their_keys_become_generators() -> None:
    built = build({"data": {"user": "admin", "password": TOKEN,
                            "dsn": "pg://admin:<generate:randomHex:8>@db"}})
    assert built.body["stringData"]["password"] == TOKEN
    assert built.directives == {"generated": {
        "password": TOKEN, "dsn": "pg://admin:<generate:randomHex:8>@db"}}


def test_a_random_value_changed_by_another_function_is_refused() -> None:
    assert error_field({"data": {"p": "<GENERATE:RANDOMHEX:8>"}}) == "data.p"


def test_random_functions_in_annotations_are_refused() -> None:
    assert error_field({"data": {"a": "b"}, "annotations": {"x": TOKEN}}) == "annotations.x"


def test_an_invalid_data_key_is_refused() -> None:
    assert error_field({"data": {"bad key": "v"}}) == "data.bad key"


def test_once_and_rotate_after_become_directives() -> None:
    built = build({"data": {"p": TOKEN}, "once": "true", "rotateAfter": "90d"})
    assert built.directives["once"] is True
    assert built.directives["rotateAfter"] == "90d"


def test_a_bad_rotate_after_is_refused_naming_the_field() -> None:
    assert error_field({"data": {"p": TOKEN}, "rotateAfter": "soon"}) == "rotateAfter"


def test_a_bad_once_is_refused() -> None:
    assert error_field({"data": {"p": TOKEN}, "once": "maybe"}) == "once"


def test_tls_defaults_follow_orkestra_name_common_name_validity_and_rsa() -> None:
    built = build({"tls": {}})
    assert built.body["metadata"]["name"] == "shop-orkestra-tls"
    assert built.body["type"] == "kubernetes.io/tls"
    assert "stringData" not in built.body
    assert built.directives["tls"] == {
        "commonName": "shop-orkestra-tls.team-a.svc", "dnsNames": [], "ipAddresses": [],
        "validFor": "1y", "algorithm": "rsa"}


def test_a_named_tls_secret_keeps_its_name_and_its_common_name_follows() -> None:
    built = build({"name": "web-tls", "tls": {}}, BuildContext(**{
        **{f: getattr(CTX, f) for f in ("cr_name", "cr_namespace", "owner_key", "labels")},
        "name": "web-tls", "namespace": "team-a"}))
    assert built.body["metadata"]["name"] == "web-tls"
    assert built.directives["tls"]["commonName"] == "web-tls.team-a.svc"


def test_tls_fields_drop_empty_dns_names_normalise_ips_and_default_valid_for_to_rotation(
        ) -> None:
    built = build({"rotateAfter": "30d", "tls": {
        "commonName": "api.example.com", "dnsNames": ["api.example.com", "", "localhost"],
        "ipAddresses": ["127.0.0.1", "::0001"], "algorithm": "ECDSA", "organization": "Acme"}})
    assert built.directives["tls"] == {
        "commonName": "api.example.com", "dnsNames": ["api.example.com", "localhost"],
        "ipAddresses": ["127.0.0.1", "::1"], "validFor": "30d", "algorithm": "ecdsa",
        "organization": "Acme"}


@pytest.mark.parametrize(("tls", "field"), [
    ({"validFor": "forever"}, "tls.validFor"),
    ({"validFor": "never"}, "tls.validFor"),
    ({"algorithm": "dsa"}, "tls.algorithm"),
    ({"ipAddresses": ["localhost"]}, "tls.ipAddresses[0]"),
    ({"commonName": "x" * 65}, "tls.commonName"),
    ({"colour": "blue"}, "tls.colour"),
])
def test_invalid_tls_fields_are_refused_naming_the_field(tls: dict[str, Any],
                                                          field: str) -> None:
    assert error_field({"tls": tls}) == field


def test_tls_with_another_type_is_refused() -> None:
    assert error_field({"tls": {}, "type": "kubernetes.io/basic-auth"}) == "type"


def test_data_next_to_tls_may_not_use_the_certificate_keys() -> None:
    assert error_field({"tls": {}, "data": {"tls.key": "x"}}) == "data.tls.key"


def test_from_secret_declares_the_source_and_keeps_declared_data_to_merge_over_it() -> None:
    built = build({"fromSecret": "db-root", "data": {"extra": "1"}})
    assert built.directives == {"fromSecret": {"name": "db-root", "namespace": "team-a"}}
    assert built.body["stringData"] == {"extra": "1"}
    other = build({"fromSecret": "db-root", "fromNamespace": "vault"})
    assert other.directives["fromSecret"] == {"name": "db-root", "namespace": "vault"}
