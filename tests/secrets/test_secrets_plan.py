"""Pure tests of the Secret planner: injected clock, deterministic randomness, certificates
checked with `cryptography` here in the test."""

from __future__ import annotations

import base64
import ipaddress
import itertools
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID

from orksync.model import WritePolicy
from orksync.render.builders import BuildContext
from orksync.render.builders.secret import build_secret
from orksync.secrets.mask import mask_secret, scrub, secret_values
from orksync.secrets.plan import (
    GENERATED_AT,
    GENERATORS,
    ROTATE_AFTER,
    TLS_ANNOTATION,
    TLS_CHECKED,
    SecretPlan,
    data_hash,
    directives_from_annotations,
    owned_desired,
    plan_secret,
)
from tests.secrets.keycheck import digest, tampered_rsa_key, validated_loads

T0 = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
TOKEN = "<generate:randomAlphanumeric:32>"
LABELS = {"app.kubernetes.io/managed-by": "orksync", "orkestra-owner": "shop"}
CTX = BuildContext(cr_name="shop", cr_namespace="ns", owner_key="shop", name="db",
                   namespace="ns", labels=LABELS)


_SERIAL = itertools.count(1)


class FakeRandom:
    """Deterministic: values `V0001`, `V0002`, ... from one counter shared by every
    instance (padded to the asked length for randomAlphanumeric), recorded in `values`."""

    def __init__(self) -> None:
        self.values: list[str] = []

    def token(self, func: str, n: int | None) -> str:
        base = f"V{next(_SERIAL):04d}"
        value = base.ljust(n or 8, "z") if func == "randomAlphanumeric" else base
        self.values.append(value)
        return value


def entry_body(entry: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    built = build_secret(entry, CTX)
    return built.body, built.directives


def plan(entry: dict[str, Any], live: dict[str, Any] | None = None, *,
         policy: WritePolicy = WritePolicy.APPLY, now: datetime = T0,
         random: FakeRandom | None = None, **kw: Any) -> SecretPlan:
    body, directives = entry_body(entry)
    return plan_secret(body, directives, live, policy=policy, now=now,
                       random=random or FakeRandom(), **kw)


def as_live(p: SecretPlan, rv: str = "7") -> dict[str, Any]:
    """What the API server would hold after the plan's write."""
    assert p.body is not None
    live = json.loads(json.dumps(p.body))
    live["metadata"]["resourceVersion"] = rv
    return live


def decoded(body: dict[str, Any] | None) -> dict[str, str]:
    assert body is not None
    return {k: base64.b64decode(v).decode() for k, v in body["data"].items()}


DB: dict[str, Any] = {"data": {"user": "admin", "password": TOKEN}}


# --- ownership, creation -------------------------------------------------------------------

def test_a_live_secret_not_managed_by_orksync_is_never_modified() -> None:
    live: dict[str, Any] = {"metadata": {"name": "db", "namespace": "ns",
                                         "resourceVersion": "1"},
            "type": "Opaque", "data": {"user": "cm9vdA=="}}
    p = plan(DB, live)
    assert (p.write, p.body, p.reason) == ("skip", None, "exists and is not managed by orksync")
    assert p.data_hash == data_hash(live["data"])


def test_a_missing_secret_is_created_with_base64_data_generated_values_and_annotations() -> None:
    random = FakeRandom()
    p = plan({**DB, "rotateAfter": "90d"}, random=random)
    assert p.write == "create" and not p.rotated
    assert p.body is not None and "stringData" not in p.body
    assert decoded(p.body) == {"user": "admin", "password": random.values[0]}
    assert "resourceVersion" not in p.body["metadata"]
    annotations = p.body["metadata"]["annotations"]
    assert annotations[GENERATED_AT] == "2030-01-02T03:04:05Z"
    assert annotations[ROTATE_AFTER] == "90d"
    assert json.loads(annotations[GENERATORS]) == {"password": TOKEN}
    assert p.body["metadata"]["labels"] == LABELS
    assert random.values[0] not in p.reason and "password" in p.reason


def test_a_template_around_a_token_is_filled_in_place() -> None:
    random = FakeRandom()
    p = plan({"data": {"id": "prefix-<generate:randomHex:4>-suffix"}}, random=random)
    assert decoded(p.body)["id"] == f"prefix-{random.values[0]}-suffix"


# --- keeping and filling -------------------------------------------------------------------

def test_generated_values_are_kept_from_the_live_secret_and_the_body_is_deterministic() -> None:
    live = as_live(plan(DB))
    first = plan(DB, live, now=T0 + timedelta(days=3))
    second = plan(DB, live, now=T0 + timedelta(days=9))
    assert first.write == "apply" and first.body == second.body
    assert first.body is not None and first.body["data"] == live["data"]
    assert "resourceVersion" not in first.body["metadata"]
    assert first.data_hash == data_hash(live["data"]) and first.reason.endswith("kept")


def test_under_apply_static_keys_follow_the_declaration_and_generated_ones_stay() -> None:
    live = as_live(plan(DB))
    p = plan({"data": {"user": "root", "password": TOKEN}}, live)
    assert decoded(p.body) == {"user": "root", "password": decoded(live)["password"]}


def test_adding_a_generated_key_later_fills_only_that_key_under_a_precondition() -> None:
    live = as_live(plan(DB))
    random = FakeRandom()
    p = plan({"data": {**DB["data"], "api-key": "<generate:randomHex:16>"}}, live,
             random=random)
    values = decoded(p.body)
    assert values["password"] == decoded(live)["password"]
    assert values["api-key"] == random.values[0] and len(random.values) == 1
    assert p.body is not None and p.body["metadata"]["resourceVersion"] == "7"
    assert p.generated == ("api-key",)


@pytest.mark.parametrize("policy", [WritePolicy.APPLY, WritePolicy.CREATE])
def test_once_keeps_every_live_value_under_every_policy(policy: WritePolicy) -> None:
    live = as_live(plan(DB))
    p = plan({"data": {"user": "root", "password": TOKEN}, "once": True}, live, policy=policy)
    if policy is WritePolicy.APPLY:
        assert p.write == "apply" and p.body is not None and p.body["data"] == live["data"]
    else:
        assert p.write == "skip"


def test_create_if_absent_with_a_live_secret_skips_but_reports_the_live_hash() -> None:
    live = as_live(plan(DB))
    p = plan({"data": {"user": "root", "password": TOKEN}}, live, policy=WritePolicy.CREATE)
    assert (p.write, p.body) == ("skip", None)
    assert p.data_hash == data_hash(live["data"])


def test_a_live_secret_without_generated_at_gets_it_now_and_is_not_due() -> None:
    live = as_live(plan({**DB, "rotateAfter": "1h"}))
    del live["metadata"]["annotations"][GENERATED_AT]
    later = T0 + timedelta(days=400)
    for policy in (WritePolicy.APPLY, WritePolicy.CREATE):
        p = plan({**DB, "rotateAfter": "1h"}, live, policy=policy, now=later)
        assert p.write == "apply" and not p.rotated
        assert p.body is not None and p.body["data"] == live["data"]
        assert p.body["metadata"]["annotations"][GENERATED_AT] == "2031-02-06T03:04:05Z"
        assert p.work == (f"rotation clock to start: {GENERATED_AT} set now",)


# --- rotation ------------------------------------------------------------------------------

ROTATING = {**DB, "rotateAfter": "1h"}


@pytest.mark.parametrize("policy", [WritePolicy.APPLY, WritePolicy.CREATE])
def test_rotation_is_due_exactly_at_the_boundary_and_not_one_second_before(
        policy: WritePolicy) -> None:
    live = as_live(plan(ROTATING))
    before = plan(ROTATING, live, policy=policy, now=T0 + timedelta(hours=1, seconds=-1))
    assert not before.rotated and before.write in ("apply", "skip")
    if before.body is not None:
        assert before.body["data"] == live["data"]
    random = FakeRandom()
    at = plan(ROTATING, live, policy=policy, now=T0 + timedelta(hours=1), random=random)
    assert at.write == "rotate" and at.rotated
    values = decoded(at.body)
    assert values == {"user": "admin", "password": random.values[0]}
    assert values["password"] != decoded(live)["password"]
    assert at.body is not None and at.body["metadata"]["resourceVersion"] == "7"
    assert at.body["metadata"]["annotations"][GENERATED_AT] == "2030-01-02T04:04:05Z"
    assert "1h elapsed since 2030-01-02T03:04:05Z" in at.reason
    assert random.values[0] not in at.reason


def test_an_unparseable_generated_at_is_due() -> None:
    live = as_live(plan(ROTATING))
    live["metadata"]["annotations"][GENERATED_AT] = "yesterday"
    assert plan(ROTATING, live).write == "rotate"


def test_rotate_after_never_never_rotates() -> None:
    entry = {**DB, "rotateAfter": "never"}
    live = as_live(plan(entry))
    assert plan(entry, live, now=T0 + timedelta(days=3650)).write == "apply"


def test_a_forced_rotation_regenerates_every_generated_key_now() -> None:
    live = as_live(plan(DB))
    p = plan(DB, live, force_rotate=True)
    assert p.write == "rotate" and "rotation requested" in p.reason
    assert decoded(p.body)["password"] != decoded(live)["password"]


# --- fromSecret, types ----------------------------------------------------------------------

def test_from_secret_merges_declared_data_over_the_source() -> None:
    source = {"metadata": {"name": "root", "namespace": "ns"},
              "data": {"user": base64.b64encode(b"postgres").decode(),
                       "host": base64.b64encode(b"db").decode()}}
    p = plan({"fromSecret": "root", "data": {"user": "app"}}, source=source)
    assert p.write == "create"
    assert decoded(p.body) == {"user": "app", "host": "db"}


def test_a_missing_from_secret_source_is_an_error_without_a_write() -> None:
    p = plan({"fromSecret": "root"})
    assert p.write == "skip" and p.failed and p.body is None
    assert p.reason == "error: source Secret ns/root not found"


def test_a_changed_type_is_an_error_since_the_type_is_immutable() -> None:
    live = as_live(plan(DB))
    p = plan({"type": "kubernetes.io/basic-auth", "data": {"username": "u"}}, live)
    assert p.failed and "cannot change" in p.reason


def test_the_data_hash_ignores_key_order_and_follows_values() -> None:
    assert data_hash({"a": "MQ==", "b": "Mg=="}) == data_hash({"b": "Mg==", "a": "MQ=="})
    assert data_hash({"a": "MQ=="}) != data_hash({"a": "Mg=="})
    assert len(data_hash({})) == 16


# --- TLS ------------------------------------------------------------------------------------

def tls_entry(**spec: Any) -> dict[str, Any]:
    return {"tls": {"dnsNames": ["localhost"], "ipAddresses": ["127.0.0.1"], **spec}}


def ca_live_of(p: SecretPlan, rv: str = "3") -> dict[str, Any]:
    """What the API server would hold in the CA Secret after the plan's write."""
    assert p.ca_body is not None
    live = json.loads(json.dumps(p.ca_body))
    live["metadata"]["resourceVersion"] = rv
    return live


def certs(p: SecretPlan | dict[str, Any], ca: dict[str, Any] | None = None) -> dict[str, Any]:
    """The TLS Secret's certificates and keys, parsed as a client would, with the CA key
    from the CA Secret (the plan's, or `ca` as live)."""
    body = p.body if isinstance(p, SecretPlan) else p
    assert body is not None
    raw = {k: base64.b64decode(v) for k, v in body["data"].items()}
    ca_body = ca if ca is not None else p.ca_body if isinstance(p, SecretPlan) else None
    ca_raw = {k: base64.b64decode(v) for k, v in (ca_body or {}).get("data", {}).items()}
    return {"leaf": x509.load_pem_x509_certificate(raw["tls.crt"]),
            "key": serialization.load_pem_private_key(raw["tls.key"], password=None),
            "cas": x509.load_pem_x509_certificates(raw["ca.crt"]),
            "ca_key": serialization.load_pem_private_key(ca_raw["ca.key"], password=None)
            if "ca.key" in ca_raw else None,
            "raw": raw, "ca_raw": ca_raw}


def public_der(key: Any) -> bytes:
    return key.public_bytes(serialization.Encoding.DER,
                            serialization.PublicFormat.SubjectPublicKeyInfo)


def test_a_tls_secret_gets_a_ca_and_a_server_certificate_as_orkestra_describes() -> None:
    p = plan(tls_entry(validFor="30d"))
    assert p.write == "create" and p.body is not None
    assert p.body["type"] == "kubernetes.io/tls"
    c = certs(p)
    leaf, ca = c["leaf"], c["cas"][0]
    leaf.verify_directly_issued_by(ca)
    assert public_der(leaf.public_key()) == public_der(c["key"].public_key())
    assert public_der(ca.public_key()) == public_der(c["ca_key"].public_key())
    assert c["raw"]["tls.key"].startswith(b"-----BEGIN RSA PRIVATE KEY-----")
    assert leaf.public_key().key_size == 2048
    assert leaf.not_valid_before_utc == T0 - timedelta(minutes=5)
    assert leaf.not_valid_after_utc == T0 + timedelta(days=30)
    assert ca.not_valid_after_utc >= leaf.not_valid_after_utc
    cn = leaf.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)[0].value
    assert cn == "shop-orkestra-tls.ns.svc"
    sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["localhost", "shop-orkestra-tls.ns.svc"]
    assert sans.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    usage = leaf.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.digital_signature and usage.key_encipherment and not usage.key_cert_sign
    eku = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    annotations = p.body["metadata"]["annotations"]
    assert json.loads(annotations[TLS_ANNOTATION])["commonName"] == "shop-orkestra-tls.ns.svc"
    assert GENERATED_AT in annotations


def test_an_ecdsa_certificate_uses_p256_and_no_key_encipherment() -> None:
    c = certs(plan(tls_entry(algorithm="ecdsa")))
    assert c["leaf"].public_key().curve.name == "secp256r1"
    usage = c["leaf"].extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.digital_signature and not usage.key_encipherment


@pytest.mark.parametrize("policy", [WritePolicy.APPLY, WritePolicy.CREATE])
def test_a_valid_certificate_is_kept(policy: WritePolicy) -> None:
    entry = tls_entry(algorithm="ecdsa")
    first = plan(entry)
    live = as_live(first)
    p = plan(entry, live, policy=policy, now=T0 + timedelta(days=100),
             ca_live=ca_live_of(first))
    assert not p.rotated and p.ca_body is None
    if policy is WritePolicy.APPLY:
        assert p.write == "apply" and p.body is not None and p.body["data"] == live["data"]
    else:
        assert p.write == "skip"


def test_the_certificate_is_renewed_at_one_third_of_its_lifetime_left_with_the_ca_kept() -> None:
    entry = tls_entry(algorithm="ecdsa", validFor="30d")
    first = plan(entry)
    live, ca_live = as_live(first), ca_live_of(first)
    old = certs(live, ca_live)
    lifetime = old["leaf"].not_valid_after_utc - old["leaf"].not_valid_before_utc
    third_left = old["leaf"].not_valid_after_utc - lifetime / 3
    kept = plan(entry, live, now=third_left, ca_live=ca_live)
    assert kept.write == "apply" and kept.body is not None
    assert kept.body["data"] == live["data"]
    renewed = plan(entry, live, now=third_left + timedelta(seconds=1), ca_live=ca_live)
    assert renewed.write == "rotate" and renewed.rotated
    assert "less than a third" in renewed.reason
    assert renewed.ca_body is None  # the CA Secret already holds the CA it signs with
    new = certs(renewed, ca_live)
    assert new["raw"]["ca.crt"] == old["raw"]["ca.crt"]
    assert new["raw"]["tls.key"] != old["raw"]["tls.key"]
    new["leaf"].verify_directly_issued_by(old["cas"][0])
    assert public_der(new["leaf"].public_key()) == public_der(new["key"].public_key())
    assert new["leaf"].not_valid_after_utc == third_left + timedelta(seconds=1, days=30)


def test_a_ca_near_the_end_of_its_life_is_replaced_and_the_old_one_stays_trusted() -> None:
    entry = tls_entry(algorithm="ecdsa", validFor="30d")
    first = plan(entry)
    live, ca_live = as_live(first), ca_live_of(first)
    old = certs(live, ca_live)
    p = plan(entry, live, now=T0 + timedelta(days=61), ca_live=ca_live)
    assert p.write == "rotate" and "new CA" in p.reason
    new = certs(p)
    assert len(new["cas"]) == 2 and new["cas"][1] == old["cas"][0]
    new["leaf"].verify_directly_issued_by(new["cas"][0])
    assert new["ca_raw"]["ca.key"] != old["ca_raw"]["ca.key"]
    assert public_der(new["cas"][0].public_key()) == public_der(new["ca_key"].public_key())
    assert p.ca_body is not None and p.ca_body["metadata"]["resourceVersion"] == "3"


def test_a_changed_spec_renews_the_certificate_with_the_same_ca() -> None:
    first = plan(tls_entry(algorithm="ecdsa"))
    live = as_live(first)
    p = plan(tls_entry(algorithm="ecdsa", dnsNames=["localhost", "api.local"]), live,
             ca_live=ca_live_of(first))
    assert p.write == "rotate" and "(dnsNames changed)" in p.reason
    assert p.work == ("certificate would be re-issued: dnsNames changed",)
    new = certs(p)
    sans = new["leaf"].extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "api.local" in sans.get_values_for_type(x509.DNSName)
    assert new["raw"]["ca.crt"] == certs(live)["raw"]["ca.crt"]


def test_a_due_rotation_renews_the_certificate_and_keeps_the_ca() -> None:
    entry = {**tls_entry(algorithm="ecdsa", validFor="30d"), "rotateAfter": "7d"}
    first = plan(entry)
    live, ca_live = as_live(first), ca_live_of(first)
    assert plan(entry, live, now=T0 + timedelta(days=7, seconds=-1),
                ca_live=ca_live).write == "apply"
    p = plan(entry, live, now=T0 + timedelta(days=7), ca_live=ca_live)
    assert p.write == "rotate"
    assert certs(p)["raw"]["ca.crt"] == certs(live)["raw"]["ca.crt"]
    assert certs(p)["raw"]["tls.crt"] != certs(live)["raw"]["tls.crt"]


def test_the_ca_key_is_never_in_the_tls_secret_but_in_its_own_ca_secret() -> None:
    p = plan({**tls_entry(algorithm="ecdsa"), "annotations": {"team": "web"}})
    assert p.body is not None and set(p.body["data"]) == {"tls.crt", "tls.key", "ca.crt"}
    assert p.ca_body is not None and set(p.ca_body["data"]) == {"ca.crt", "ca.key"}
    c = certs(p)
    assert public_der(c["cas"][0].public_key()) == public_der(c["ca_key"].public_key())
    assert c["ca_raw"]["ca.crt"] == c["raw"]["ca.crt"]
    meta = p.ca_body["metadata"]
    assert meta["name"] == "shop-orkestra-tls-ca" and meta["namespace"] == "ns"
    assert p.ca_body["type"] == "Opaque"
    assert meta["labels"] == p.body["metadata"]["labels"]
    assert meta["annotations"] == {"orksync.io/ca-of": "shop-orkestra-tls"}
    assert "resourceVersion" not in meta


@pytest.mark.parametrize("policy", [WritePolicy.APPLY, WritePolicy.CREATE])
def test_a_tls_secret_with_the_ca_key_inside_is_migrated_with_its_certificate_unchanged(
        policy: WritePolicy) -> None:
    first = plan(tls_entry(algorithm="ecdsa"))
    assert first.ca_body is not None
    legacy = as_live(first)
    legacy["data"]["ca.key"] = first.ca_body["data"]["ca.key"]  # as earlier versions wrote it
    p = plan(tls_entry(algorithm="ecdsa"), legacy, policy=policy,
             now=T0 + timedelta(days=1))
    assert p.write == "apply" and p.drop_legacy_ca_key and not p.rotated
    assert p.body is not None and "ca.key" not in p.body["data"]
    for key in ("tls.crt", "tls.key", "ca.crt"):
        assert p.body["data"][key] == legacy["data"][key]
    assert p.body["metadata"]["resourceVersion"] == "7"
    assert p.ca_body is not None
    assert p.ca_body["data"]["ca.key"] == legacy["data"]["ca.key"]  # the same bytes
    assert "CA key moved to Secret shop-orkestra-tls-ca" in p.reason
    assert not any(v in p.reason for v in secret_values(legacy))
    # with the CA Secret in place, nothing more to do
    done = as_live(p)
    again = plan(tls_entry(algorithm="ecdsa"), done, policy=policy,
                 now=T0 + timedelta(days=2), ca_live=ca_live_of(p))
    assert again.ca_body is None and not again.drop_legacy_ca_key
    assert again.write == ("apply" if policy is WritePolicy.APPLY else "skip")


def test_a_secret_in_the_ca_secret_s_place_is_never_taken_over() -> None:
    first = plan(tls_entry(algorithm="ecdsa"))
    foreign = {"metadata": {"name": "shop-orkestra-tls-ca", "namespace": "ns",
                            "resourceVersion": "1"}, "data": {"x": "eA=="}}
    labelled = json.loads(json.dumps(foreign))
    labelled["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "orksync"}
    for other in (foreign, labelled):
        p = plan(tls_entry(algorithm="ecdsa"), as_live(first), ca_live=other)
        assert p.failed and "Secret shop-orkestra-tls-ca" in p.reason and p.body is None
    # and a rendered Secret whose name is taken by a CA Secret is refused
    ca_live = ca_live_of(first)
    taken = plan({"name": "shop-orkestra-tls-ca", "data": {"a": "b"}}, ca_live)
    assert taken.failed and "CA Secret of Secret shop-orkestra-tls" in taken.reason


def test_a_generated_key_added_to_an_existing_once_secret_is_written_under_create_if_absent(
        ) -> None:
    entry = {**DB, "once": True}
    live = as_live(plan(entry))
    random = FakeRandom()
    p = plan({**entry, "data": {**DB["data"], "api-key": "<generate:randomHex:16>"}}, live,
             policy=WritePolicy.CREATE, random=random)
    assert p.write == "apply" and p.generated == ("api-key",)
    values = decoded(p.body)
    assert values["password"] == decoded(live)["password"] and values["user"] == "admin"
    assert values["api-key"] == random.values[0] and len(random.values) == 1
    assert p.body is not None and p.body["metadata"]["resourceVersion"] == "7"
    assert "generated missing api-key" in p.reason


def test_a_key_that_does_not_match_its_certificate_is_replaced_together_with_it() -> None:
    entry = tls_entry(algorithm="ecdsa")
    live = as_live(plan(entry))
    live["data"]["tls.key"] = as_live(plan(entry))["data"]["tls.key"]
    p = plan(entry, live)
    assert p.write == "rotate"
    c = certs(p)
    assert public_der(c["leaf"].public_key()) == public_der(c["key"].public_key())


@pytest.mark.parametrize("policy", [WritePolicy.CREATE, WritePolicy.APPLY])
def test_tls_keys_are_validated_when_they_change_not_at_every_plan(
        policy: WritePolicy) -> None:
    entry = tls_entry()  # RSA: the key whose validation is costly
    with validated_loads() as loads:
        first = plan(entry, policy=policy)
    assert len(loads) == 0  # keys made here need no validation
    live, ca_live = as_live(first), ca_live_of(first)
    assert live["metadata"]["annotations"][TLS_CHECKED]
    for day in range(3):
        with validated_loads() as loads:
            again = plan(entry, live, policy=policy, now=T0 + timedelta(days=day),
                         ca_live=ca_live)
        assert len(loads) == 0 and again.work == ()
        assert again.write == "skip" or again.body == first.body

    # a Secret written before the fingerprint existed: both keys validated once, recorded
    del live["metadata"]["annotations"][TLS_CHECKED]
    with validated_loads() as loads:
        upgrade = plan(entry, live, policy=policy, ca_live=ca_live)
    assert len(loads) == 2 and upgrade.write == "apply"
    assert upgrade.work == (f"validated keys to record: {TLS_CHECKED} set",)
    assert upgrade.body is not None and upgrade.body["metadata"]["resourceVersion"] == "7"
    assert decoded(upgrade.body) == decoded(first.body)  # the certificate is kept
    with validated_loads() as loads:
        settled = plan(entry, as_live(upgrade), policy=policy, ca_live=ca_live)
    assert len(loads) == 0 and settled.work == ()


def test_a_tampered_tls_key_is_validated_and_replaced_despite_the_fingerprint() -> None:
    entry = tls_entry()
    first = plan(entry)
    live, ca_live = as_live(first), ca_live_of(first)
    good = base64.b64decode(live["data"]["tls.key"])
    bad = tampered_rsa_key(good)
    live["data"]["tls.key"] = base64.b64encode(bad).decode()
    with validated_loads() as loads:
        p = plan(entry, live, ca_live=ca_live)
    assert digest(bad) in loads
    assert p.write == "rotate" and "the certificate or key cannot be read" in p.reason
    replaced = certs(p)["raw"]["tls.key"] not in (good, bad)
    assert replaced
    assert p.body is not None
    assert p.body["metadata"]["annotations"][TLS_CHECKED] != \
        first.body["metadata"]["annotations"][TLS_CHECKED]  # type: ignore[index]

    # the CA key likewise: the inconsistent key never signs, a new CA does
    live = as_live(first)
    ca_bad = ca_live_of(first)
    ca_key = base64.b64decode(ca_bad["data"]["ca.key"])
    ca_bad["data"]["ca.key"] = base64.b64encode(tampered_rsa_key(ca_key)).decode()
    with validated_loads() as loads:
        rotated = plan(entry, live, ca_live=ca_bad, force_rotate=True)
    assert len(loads) == 2  # the fingerprint no longer matches: both keys validated
    assert rotated.write == "rotate" and "issued a new CA" in rotated.reason
    c = certs(rotated)
    new_key = c["ca_raw"]["ca.key"] != ca_key
    assert c["ca_key"] is not None and new_key


def test_generated_and_tls_values_never_appear_in_reasons() -> None:
    random = FakeRandom()
    entry = {**tls_entry(algorithm="ecdsa"), "data": {"token": TOKEN}, "rotateAfter": "1h"}
    first = plan(entry, random=random)
    second = plan(entry, as_live(first), now=T0 + timedelta(hours=2), random=random)
    for p in (first, second):
        assert not any(v in p.reason for v in secret_values(p.body))
        assert not any(v in p.reason for v in random.values)


# --- rotation from annotations, masking -----------------------------------------------------

def test_directives_are_rebuilt_from_the_annotations_of_a_live_secret() -> None:
    entry = {**tls_entry(algorithm="ecdsa"), "data": {"token": TOKEN}, "rotateAfter": "1h"}
    _, directives = entry_body(entry)
    live = as_live(plan(entry))
    rebuilt = directives_from_annotations(live["metadata"]["annotations"])
    assert rebuilt == {"once": True, "generated": directives["generated"],
                       "tls": directives["tls"], "rotateAfter": "1h"}
    with pytest.raises(ValueError, match="not valid JSON"):
        directives_from_annotations({GENERATORS: "{"})


def test_owned_desired_keeps_exactly_the_fields_the_field_manager_applied() -> None:
    live = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": {
        "name": "db", "namespace": "ns", "labels": {"mine": "1", "theirs": "2"},
        "annotations": {"a": "x", "b": "y"},
        "ownerReferences": [{"uid": "u1", "name": "shop"}, {"uid": "u2", "name": "other"}],
        "managedFields": [
            {"manager": "orksync", "operation": "Apply", "fieldsV1": {
                "f:data": {"f:k1": {}}, "f:metadata": {
                    "f:labels": {"f:mine": {}}, "f:annotations": {"f:a": {}},
                    "f:ownerReferences": {'k:{"uid":"u1"}': {}}}}},
            {"manager": "kubectl", "operation": "Update", "fieldsV1": {
                "f:data": {"f:k2": {}}}}]},
        "data": {"k1": "MQ==", "k2": "Mg=="}}
    assert owned_desired(live, "orksync") == {
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": "db", "namespace": "ns", "labels": {"mine": "1"},
                     "annotations": {"a": "x"},
                     "ownerReferences": [{"uid": "u1", "name": "shop"}]},
        "data": {"k1": "MQ=="}}


def test_mask_secret_hides_every_value_and_scrub_removes_values_from_text() -> None:
    obj: dict[str, Any] = {"kind": "Secret", "data": {"a": "c2VjcmV0"},
                           "stringData": {"b": "hunter22"}}
    masked = mask_secret(obj)
    assert masked == {"kind": "Secret", "data": {"a": "***"}, "stringData": {"b": "***"}}
    assert obj["data"]["a"] == "c2VjcmV0"
    text = "invalid value 'secret' (c2VjcmV0) and hunter22"
    assert scrub(text, secret_values(obj)) == "invalid value '***' (***) and ***"
    assert scrub("a 1 b", ["1"]) == "a 1 b"


def test_the_data_after_a_write_keeps_what_the_manager_did_not_own_and_drops_what_it_did(
        ) -> None:
    from orksync.secrets.plan import data_after_write

    live = {"metadata": {"name": "db", "managedFields": [
        {"manager": "orksync", "operation": "Apply",
         "fieldsV1": {"f:data": {"f:a": {}, "f:b": {}}}},
        {"manager": "orksync", "operation": "Update",  # the create: not the apply's
         "fieldsV1": {"f:data": {"f:c": {}}}}]},
        "data": {"a": "QQ==", "b": "Qg==", "c": "Qw=="}}
    body = {"data": {"a": "YQ==", "d": "ZA=="}}
    assert data_after_write(body, live, "orksync") == {"a": "YQ==", "c": "Qw==", "d": "ZA=="}
    assert data_after_write(body, None, "orksync") == {"a": "YQ==", "d": "ZA=="}
    assert data_after_write(body, live, "someone") == {"a": "YQ==", "b": "Qg==", "c": "Qw==",
                                                       "d": "ZA=="}
