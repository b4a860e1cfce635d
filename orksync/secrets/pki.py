"""Certificate and key building. Pure: clock passed in, no I/O.

This is the only module of orksync that imports ``cryptography``. Everything it hands out
(:class:`PrivateKey`, :class:`Certificate`, :class:`CertificateAuthority`) carries PEM bytes
and plain Python values, so callers never need ``cryptography`` themselves.

Typical use::

    now = datetime.now(timezone.utc)
    ca = create_ca(common_name="orksync-ca", now=now)
    key = generate_private_key()
    cert = issue_certificate(
        ca, key, common_name="localhost", now=now,
        dns_names=("localhost",), ip_addresses=("127.0.0.1",),
        extended_usages=("server_auth",),
    )
    cert.pem, key.pem(), ca.certificate.pem

Validity always starts five minutes before ``now`` (tolerates small clock skew between
machines) and ends at ``now + validity``. Serial numbers are random (RFC 5280: positive,
at most 20 octets).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal, TypeAlias

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = [
    "BACKDATE",
    "Certificate",
    "CertificateAuthority",
    "ExtendedUsage",
    "KeyAlgorithm",
    "KeyFormat",
    "PrivateKey",
    "certificate_matches_key",
    "create_ca",
    "generate_private_key",
    "issue_certificate",
    "issued_by",
    "load_certificate",
    "load_certificates",
    "load_private_key",
]

KeyAlgorithm: TypeAlias = Literal["ecdsa-p256", "rsa"]
"""``ecdsa-p256`` (small and fast, the default) or ``rsa`` (size given separately)."""

KeyFormat: TypeAlias = Literal["pkcs8", "traditional"]
"""``pkcs8``: ``PRIVATE KEY``; ``traditional``: ``RSA PRIVATE KEY`` / ``EC PRIVATE KEY``."""

ExtendedUsage: TypeAlias = Literal["server_auth", "client_auth"]
"""Extended key usages a leaf certificate can be issued for."""

IPAddressLike: TypeAlias = "str | ipaddress.IPv4Address | ipaddress.IPv6Address"

BACKDATE = timedelta(minutes=5)
"""How far before ``now`` every certificate's validity starts."""

_RSA_MIN_BITS = 2048
_EXTENDED_USAGE_OIDS: dict[str, x509.ObjectIdentifier] = {
    "server_auth": ExtendedKeyUsageOID.SERVER_AUTH,
    "client_auth": ExtendedKeyUsageOID.CLIENT_AUTH,
}
_PRIVATE_FORMATS: dict[str, serialization.PrivateFormat] = {
    "pkcs8": serialization.PrivateFormat.PKCS8,
    "traditional": serialization.PrivateFormat.TraditionalOpenSSL,
}
_SupportedKey: TypeAlias = "ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey"


@dataclass(frozen=True)
class PrivateKey:
    """A private key. Export it with :meth:`pem`; its public half with :meth:`public_pem`."""

    algorithm: KeyAlgorithm
    size: int
    """Bits: the RSA modulus size, or 256 for ECDSA P-256."""
    _key: _SupportedKey = field(repr=False, compare=False)

    def pem(self, key_format: KeyFormat = "pkcs8") -> bytes:
        """The unencrypted private key as PEM (PKCS#8 ``PRIVATE KEY`` by default)."""
        if key_format not in _PRIVATE_FORMATS:
            raise ValueError(
                f"unknown private key format {key_format!r}; use 'pkcs8' or 'traditional'"
            )
        return self._key.private_bytes(
            encoding=serialization.Encoding.PEM,
            format=_PRIVATE_FORMATS[key_format],
            encryption_algorithm=serialization.NoEncryption(),
        )

    def public_pem(self) -> bytes:
        """The public key as PEM ``PUBLIC KEY`` (SubjectPublicKeyInfo), e.g. for
        kube-apiserver's ``--service-account-key-file``."""
        return self._key.public_key().public_bytes(
            encoding=serialization.Encoding.PEM,
            format=serialization.PublicFormat.SubjectPublicKeyInfo,
        )


@dataclass(frozen=True)
class Certificate:
    """An X.509 certificate: its PEM and the facts callers usually need."""

    pem: bytes
    common_name: str
    serial_number: int
    not_before: datetime
    not_after: datetime
    is_ca: bool
    _cert: x509.Certificate = field(repr=False, compare=False)

    @property
    def dns_names(self) -> tuple[str, ...]:
        """The DNS names of the subject alternative name extension, in order."""
        return tuple(str(n) for n in self._sans().get_values_for_type(x509.DNSName))

    @property
    def ip_addresses(self) -> tuple[str, ...]:
        """The IP addresses of the subject alternative name extension, as text."""
        return tuple(str(ip) for ip in self._sans().get_values_for_type(x509.IPAddress))

    @property
    def organizations(self) -> tuple[str, ...]:
        """The subject's ``O=`` entries."""
        attrs = self._cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
        return tuple(str(a.value) for a in attrs)

    @property
    def key_algorithm(self) -> str:
        """``rsa``, ``ecdsa-p256`` or the public key's class name for anything else."""
        public = self._cert.public_key()
        if isinstance(public, rsa.RSAPublicKey):
            return "rsa"
        if isinstance(public, ec.EllipticCurvePublicKey) and isinstance(public.curve, ec.SECP256R1):
            return "ecdsa-p256"
        return type(public).__name__

    def _sans(self) -> x509.SubjectAlternativeName:
        try:
            return self._cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        except x509.ExtensionNotFound:
            return x509.SubjectAlternativeName([])


@dataclass(frozen=True)
class CertificateAuthority:
    """A CA certificate with the key that signs the certificates it issues."""

    certificate: Certificate
    key: PrivateKey


def generate_private_key(
    algorithm: KeyAlgorithm = "ecdsa-p256", *, rsa_key_size: int = 2048
) -> PrivateKey:
    """Make a new private key: ECDSA on P-256, or RSA of ``rsa_key_size`` bits (>= 2048)."""
    if algorithm == "ecdsa-p256":
        return PrivateKey(
            algorithm="ecdsa-p256", size=256, _key=ec.generate_private_key(ec.SECP256R1())
        )
    if algorithm == "rsa":
        if rsa_key_size < _RSA_MIN_BITS:
            raise ValueError(
                f"RSA key size {rsa_key_size} is too small; use at least {_RSA_MIN_BITS}"
            )
        key = rsa.generate_private_key(public_exponent=65537, key_size=rsa_key_size)
        return PrivateKey(algorithm="rsa", size=rsa_key_size, _key=key)
    raise ValueError(f"unknown key algorithm {algorithm!r}; use 'ecdsa-p256' or 'rsa'")


def load_private_key(pem: bytes, *, validated: bool = False) -> PrivateKey:
    """Read an unencrypted PEM private key (PKCS#8 or traditional), RSA or ECDSA P-256.

    An RSA key is checked for consistency (its primes and exponents agree with its
    modulus), which is the expensive part of the load. ``validated=True`` skips that check:
    only for these exact bytes having passed it before (the caller recognises them by a
    fingerprint it recorded then), never for bytes of unknown origin.
    """
    key = serialization.load_pem_private_key(pem, password=None,
                                             unsafe_skip_rsa_key_validation=validated)
    if isinstance(key, rsa.RSAPrivateKey):
        return PrivateKey(algorithm="rsa", size=key.key_size, _key=key)
    if isinstance(key, ec.EllipticCurvePrivateKey) and isinstance(key.curve, ec.SECP256R1):
        return PrivateKey(algorithm="ecdsa-p256", size=256, _key=key)
    raise ValueError(
        f"unsupported private key type {type(key).__name__}; expected RSA or ECDSA P-256"
    )


def load_certificate(pem: bytes) -> Certificate:
    """Read one PEM certificate (the first one if ``pem`` holds a chain)."""
    return _wrap_certificate(x509.load_pem_x509_certificate(pem))


def load_certificates(pem: bytes) -> list[Certificate]:
    """Read every certificate of a PEM bundle, in order (ValueError when there is none)."""
    return [_wrap_certificate(c) for c in x509.load_pem_x509_certificates(pem)]


def certificate_matches_key(certificate: Certificate, key: PrivateKey) -> bool:
    """True when ``key`` is the private half of the certificate's public key."""
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    der = serialization.Encoding.DER
    return bool(
        certificate._cert.public_key().public_bytes(der, spki)
        == key._key.public_key().public_bytes(der, spki)
    )


def issued_by(certificate: Certificate, issuer: Certificate) -> bool:
    """True when ``issuer`` directly signed ``certificate`` (names and signature checked;
    validity periods are not)."""
    try:
        certificate._cert.verify_directly_issued_by(issuer._cert)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def create_ca(
    *,
    common_name: str,
    now: datetime,
    validity: timedelta = timedelta(days=3650),
    key: PrivateKey | None = None,
    organizations: Sequence[str] = (),
) -> CertificateAuthority:
    """Make a self-signed CA (path length 0: it signs leaves only).

    A new ECDSA P-256 key is generated unless ``key`` is given.
    """
    ca_key = key if key is not None else generate_private_key()
    name = _name(common_name, organizations)
    ski = x509.SubjectKeyIdentifier.from_public_key(ca_key._key.public_key())
    builder = (
        _base_builder(subject=name, issuer=name, public_key_of=ca_key, now=now, validity=validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            _key_usage(digital_signature=True, key_cert_sign=True, crl_sign=True), critical=True
        )
        .add_extension(ski, critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False
        )
    )
    cert = builder.sign(ca_key._key, hashes.SHA256())
    return CertificateAuthority(certificate=_wrap_certificate(cert), key=ca_key)


def issue_certificate(
    ca: CertificateAuthority,
    key: PrivateKey,
    *,
    common_name: str,
    now: datetime,
    validity: timedelta = timedelta(days=365),
    dns_names: Sequence[str] = (),
    ip_addresses: Sequence[IPAddressLike] = (),
    organizations: Sequence[str] = (),
    extended_usages: Sequence[ExtendedUsage] = ("server_auth",),
) -> Certificate:
    """Issue a leaf certificate for ``key``'s public half, signed by ``ca``.

    ``organizations`` become ``O=`` entries of the subject (Kubernetes reads them as groups,
    e.g. ``system:masters``). Key usage is digital signature, plus key encipherment for RSA
    keys. ``extended_usages`` picks server auth and/or client auth. The validity is not
    clipped to the CA's: issue from a CA that outlives the leaf.
    """
    if not extended_usages:
        raise ValueError(
            "a leaf certificate needs at least one extended usage: 'server_auth' or 'client_auth'"
        )
    unknown = set(extended_usages) - _EXTENDED_USAGE_OIDS.keys()
    if unknown:
        raise ValueError(
            f"unknown extended usages {sorted(unknown)}; use 'server_auth' and/or 'client_auth'"
        )
    ca_cert = ca.certificate._cert
    builder = (
        _base_builder(
            subject=_name(common_name, organizations),
            issuer=ca_cert.subject,
            public_key_of=key,
            now=now,
            validity=validity,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            _key_usage(digital_signature=True, key_encipherment=key.algorithm == "rsa"),
            critical=True,
        )
        .add_extension(
            x509.ExtendedKeyUsage([_EXTENDED_USAGE_OIDS[u] for u in sorted(set(extended_usages))]),
            critical=False,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(key._key.public_key()), critical=False
        )
        .add_extension(_authority_key_identifier(ca_cert), critical=False)
    )
    sans = _subject_alternative_names(dns_names, ip_addresses)
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return _wrap_certificate(builder.sign(ca.key._key, hashes.SHA256()))


def _base_builder(
    *,
    subject: x509.Name,
    issuer: x509.Name,
    public_key_of: PrivateKey,
    now: datetime,
    validity: timedelta,
) -> x509.CertificateBuilder:
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("now must be timezone-aware (e.g. datetime.now(timezone.utc))")
    if validity <= timedelta(0):
        raise ValueError(f"validity must be positive, got {validity}")
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key_of._key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + validity)
    )


def _name(common_name: str, organizations: Sequence[str]) -> x509.Name:
    if not common_name:
        raise ValueError("common_name must not be empty")
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attributes)


def _key_usage(
    *,
    digital_signature: bool = False,
    key_encipherment: bool = False,
    key_cert_sign: bool = False,
    crl_sign: bool = False,
) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=digital_signature,
        content_commitment=False,
        key_encipherment=key_encipherment,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=key_cert_sign,
        crl_sign=crl_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _authority_key_identifier(ca_cert: x509.Certificate) -> x509.AuthorityKeyIdentifier:
    try:
        ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    except x509.ExtensionNotFound:
        return x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key())  # type: ignore[arg-type]
    return x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski)


def _subject_alternative_names(
    dns_names: Sequence[str], ip_addresses: Sequence[IPAddressLike]
) -> list[x509.GeneralName]:
    if isinstance(dns_names, str) or isinstance(ip_addresses, str):
        raise TypeError("dns_names and ip_addresses take a sequence of values, not a single string")
    names: list[x509.GeneralName] = [x509.DNSName(name) for name in dns_names]
    names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
    return names


def _wrap_certificate(cert: x509.Certificate) -> Certificate:
    common_names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    try:
        is_ca = cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        is_ca = False
    return Certificate(
        pem=cert.public_bytes(serialization.Encoding.PEM),
        common_name=str(common_names[0].value) if common_names else "",
        serial_number=cert.serial_number,
        not_before=cert.not_valid_before_utc,
        not_after=cert.not_valid_after_utc,
        is_ca=is_ca,
        _cert=cert,
    )
