"""Pure tests of orksync.secrets.pki: no cluster, no network beyond one loopback TLS handshake."""

from __future__ import annotations

import ipaddress
import socket
import ssl
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from orksync.secrets import pki

NOW = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
HANDSHAKE_TIMEOUT = 10.0


def _x509(cert: pki.Certificate) -> x509.Certificate:
    return x509.load_pem_x509_certificate(cert.pem)


def _server_leaf(
    ca: pki.CertificateAuthority, key: pki.PrivateKey, now: datetime = NOW
) -> pki.Certificate:
    return pki.issue_certificate(
        ca,
        key,
        common_name="localhost",
        now=now,
        dns_names=("localhost", "kubernetes.default.svc"),
        ip_addresses=("127.0.0.1", "::1"),
        extended_usages=("server_auth",),
    )


@pytest.fixture(scope="module")
def ca() -> pki.CertificateAuthority:
    return pki.create_ca(common_name="test-ca", now=NOW)


def test_a_leaf_certificate_verifies_against_its_ca(ca: pki.CertificateAuthority) -> None:
    leaf = _server_leaf(ca, pki.generate_private_key())

    _x509(leaf).verify_directly_issued_by(_x509(ca.certificate))


def test_a_leaf_from_another_ca_does_not_verify(ca: pki.CertificateAuthority) -> None:
    other = pki.create_ca(common_name="test-ca", now=NOW)
    leaf = _server_leaf(other, pki.generate_private_key())

    with pytest.raises(InvalidSignature):
        _x509(leaf).verify_directly_issued_by(_x509(ca.certificate))


def test_the_ca_is_self_signed_and_marked_as_a_ca(ca: pki.CertificateAuthority) -> None:
    cert = _x509(ca.certificate)

    cert.verify_directly_issued_by(cert)
    constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints)
    assert constraints.critical and constraints.value.ca
    usage = cert.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.key_cert_sign and usage.crl_sign
    assert ca.certificate.is_ca


def test_the_leaf_has_the_requested_cn_sans_and_usages(ca: pki.CertificateAuthority) -> None:
    leaf = _server_leaf(ca, pki.generate_private_key())
    cert = _x509(leaf)

    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "localhost"
    assert leaf.common_name == "localhost"
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["localhost", "kubernetes.default.svc"]
    assert sans.get_values_for_type(x509.IPAddress) == [
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("::1"),
    ]
    assert list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [
        ExtendedKeyUsageOID.SERVER_AUTH
    ]
    usage = cert.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.digital_signature and not usage.key_cert_sign
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert not leaf.is_ca


def test_a_client_certificate_carries_its_organizations(ca: pki.CertificateAuthority) -> None:
    leaf = pki.issue_certificate(
        ca,
        pki.generate_private_key(),
        common_name="orksync-admin",
        organizations=("system:masters", "team-a"),
        now=NOW,
        extended_usages=("client_auth",),
    )
    cert = _x509(leaf)

    orgs = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    assert orgs == ["system:masters", "team-a"]
    assert list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [
        ExtendedKeyUsageOID.CLIENT_AUTH
    ]
    with pytest.raises(x509.ExtensionNotFound):
        cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)


def test_validity_starts_five_minutes_before_now_and_lasts_as_requested(
    ca: pki.CertificateAuthority,
) -> None:
    leaf = pki.issue_certificate(
        ca, pki.generate_private_key(), common_name="x", now=NOW, validity=timedelta(hours=2)
    )
    cert = _x509(leaf)

    assert cert.not_valid_before_utc == NOW - timedelta(minutes=5) == leaf.not_before
    assert cert.not_valid_after_utc == NOW + timedelta(hours=2) == leaf.not_after


def test_serial_numbers_are_random_and_positive(ca: pki.CertificateAuthority) -> None:
    key = pki.generate_private_key()
    serials = {
        pki.issue_certificate(ca, key, common_name="x", now=NOW).serial_number for _ in range(5)
    }

    assert len(serials) == 5
    assert all(0 < s < 2**159 for s in serials)


@pytest.mark.parametrize("algorithm", ["ecdsa-p256", "rsa"])
def test_the_private_key_matches_the_certificate(
    ca: pki.CertificateAuthority, algorithm: pki.KeyAlgorithm
) -> None:
    key = pki.generate_private_key(algorithm)
    leaf = _server_leaf(ca, key)

    loaded = serialization.load_pem_private_key(key.pem(), password=None)
    assert loaded.public_key().public_numbers() == _x509(leaf).public_key().public_numbers()  # type: ignore[union-attr]
    assert serialization.load_pem_public_key(key.public_pem()).public_numbers() == (  # type: ignore[union-attr]
        loaded.public_key().public_numbers()  # type: ignore[union-attr]
    )


def test_rsa_keys_get_key_encipherment_and_the_requested_size(ca: pki.CertificateAuthority) -> None:
    key = pki.generate_private_key("rsa", rsa_key_size=3072)
    cert = _x509(_server_leaf(ca, key))

    assert key.size == 3072 == cert.public_key().key_size  # type: ignore[union-attr]
    assert cert.extensions.get_extension_for_class(x509.KeyUsage).value.key_encipherment


@pytest.mark.parametrize(
    ("algorithm", "key_format", "header"),
    [
        ("rsa", "pkcs8", b"-----BEGIN PRIVATE KEY-----"),
        ("rsa", "traditional", b"-----BEGIN RSA PRIVATE KEY-----"),
        ("ecdsa-p256", "pkcs8", b"-----BEGIN PRIVATE KEY-----"),
        ("ecdsa-p256", "traditional", b"-----BEGIN EC PRIVATE KEY-----"),
    ],
)
def test_private_key_pem_headers_follow_the_format(
    algorithm: pki.KeyAlgorithm, key_format: pki.KeyFormat, header: bytes
) -> None:
    key = pki.generate_private_key(algorithm)

    pem = key.pem(key_format)

    assert pem.startswith(header + b"\n")
    assert pki.load_private_key(pem).public_pem() == key.public_pem()


def test_the_public_key_pem_is_subject_public_key_info() -> None:
    assert pki.generate_private_key("rsa").public_pem().startswith(b"-----BEGIN PUBLIC KEY-----\n")


def test_bad_arguments_are_rejected_with_clear_errors(ca: pki.CertificateAuthority) -> None:
    key = pki.generate_private_key()
    with pytest.raises(ValueError, match="timezone-aware"):
        pki.create_ca(common_name="ca", now=datetime(2030, 1, 1))
    with pytest.raises(ValueError, match="too small"):
        pki.generate_private_key("rsa", rsa_key_size=1024)
    with pytest.raises(ValueError, match="extended usage"):
        pki.issue_certificate(ca, key, common_name="x", now=NOW, extended_usages=())
    with pytest.raises(ValueError, match="validity"):
        pki.issue_certificate(ca, key, common_name="x", now=NOW, validity=timedelta(0))
    with pytest.raises(TypeError, match="sequence"):
        pki.issue_certificate(ca, key, common_name="x", now=NOW, dns_names="localhost")


def test_load_certificate_round_trips(ca: pki.CertificateAuthority) -> None:
    leaf = _server_leaf(ca, pki.generate_private_key())

    assert pki.load_certificate(leaf.pem) == leaf


# --- a real TLS handshake on loopback -------------------------------------------------------


def _write(path: Path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


def _serve_once(
    server_ctx: ssl.SSLContext, listener: socket.socket, errors: list[BaseException]
) -> None:
    try:
        conn, _ = listener.accept()
        conn.settimeout(HANDSHAKE_TIMEOUT)
        with server_ctx.wrap_socket(conn, server_side=True) as tls:
            tls.sendall(tls.recv(16).upper())
    except BaseException as exc:  # reported to the test thread
        errors.append(exc)


@pytest.fixture(scope="module")
def live_ca() -> pki.CertificateAuthority:
    """A CA valid now (the module's ``ca`` lives in 2030), for real handshakes."""
    return pki.create_ca(common_name="live-test-ca", now=datetime.now(UTC))


@pytest.fixture
def tls_listener() -> Iterator[socket.socket]:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(HANDSHAKE_TIMEOUT)
    with listener:
        yield listener


def _handshake(
    server_ctx: ssl.SSLContext,
    client_ctx: ssl.SSLContext,
    listener: socket.socket,
    server_hostname: str,
) -> tuple[bytes, list[BaseException]]:
    errors: list[BaseException] = []
    thread = threading.Thread(target=_serve_once, args=(server_ctx, listener, errors), daemon=True)
    thread.start()
    try:
        address = listener.getsockname()
        with (
            socket.create_connection(address, timeout=HANDSHAKE_TIMEOUT) as raw,
            client_ctx.wrap_socket(raw, server_hostname=server_hostname) as tls,
        ):
            tls.sendall(b"ping")
            return tls.recv(16), errors
    finally:
        thread.join(HANDSHAKE_TIMEOUT)
        assert not thread.is_alive(), "TLS server thread did not finish"


@pytest.mark.parametrize("algorithm", ["ecdsa-p256", "rsa"])
def test_a_tls_handshake_succeeds_with_the_leaf_and_mutual_client_auth(
    live_ca: pki.CertificateAuthority,
    algorithm: pki.KeyAlgorithm,
    tmp_path: Path,
    tls_listener: socket.socket,
) -> None:
    server_key = pki.generate_private_key(algorithm)
    server_cert = _server_leaf(live_ca, server_key, now=datetime.now(UTC))
    client_key = pki.generate_private_key()
    client_cert = pki.issue_certificate(
        live_ca,
        client_key,
        common_name="client",
        now=datetime.now(UTC),
        extended_usages=("client_auth",),
    )
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(
        _write(tmp_path / "server.crt", server_cert.pem),
        _write(tmp_path / "server.key", server_key.pem("traditional")),
    )
    server_ctx.verify_mode = ssl.CERT_REQUIRED
    server_ctx.load_verify_locations(cadata=live_ca.certificate.pem.decode())
    client_ctx = ssl.create_default_context(cadata=live_ca.certificate.pem.decode())
    client_ctx.load_cert_chain(
        _write(tmp_path / "client.crt", client_cert.pem),
        _write(tmp_path / "client.key", client_key.pem()),
    )

    reply, errors = _handshake(server_ctx, client_ctx, tls_listener, server_hostname="localhost")

    assert reply == b"PING"
    assert errors == []


def test_a_tls_client_rejects_the_leaf_for_a_name_it_was_not_issued_for(
    live_ca: pki.CertificateAuthority, tmp_path: Path, tls_listener: socket.socket
) -> None:
    key = pki.generate_private_key()
    cert = _server_leaf(live_ca, key, now=datetime.now(UTC))
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(
        _write(tmp_path / "s.crt", cert.pem), _write(tmp_path / "s.key", key.pem())
    )
    client_ctx = ssl.create_default_context(cadata=live_ca.certificate.pem.decode())

    with pytest.raises(ssl.SSLCertVerificationError, match=r"Hostname mismatch|doesn't match"):
        _handshake(server_ctx, client_ctx, tls_listener, server_hostname="example.com")
