"""Self-signed TLS for one Secret: keep, renew or issue a CA and a server certificate, the
CA kept across renewals and its key in the CA Secret. Pure: the clock passed in, keys
through orksync.secrets.pki (docs/differences.md#the-tls-entry)."""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from orksync.durations import parse_duration
from orksync.secrets import pki

__all__ = ["CA_KEYS", "LEGACY_CA_KEY", "TLS_KEYS", "TlsOutcome", "TlsSpec", "ca_validity",
           "keys_fingerprint", "plan_tls"]

TLS_KEYS = ("tls.crt", "tls.key", "ca.crt")  # the TLS Secret's keys
CA_KEYS = ("ca.crt", "ca.key")  # the CA Secret's keys
LEGACY_CA_KEY = "ca.key"  # the CA key in the TLS Secret, as earlier versions wrote it
_VALIDITY_TOLERANCE = timedelta(seconds=2)
_ALGORITHMS: dict[str, pki.KeyAlgorithm] = {"rsa": "rsa", "ecdsa": "ecdsa-p256"}


@dataclass(frozen=True, slots=True, kw_only=True)
class TlsSpec:
    """The `tls` directive with defaults applied (see the Secret builder)."""

    common_name: str
    dns_names: tuple[str, ...] = ()
    ip_addresses: tuple[str, ...] = ()
    valid_for: timedelta = timedelta(days=365)
    algorithm: str = "rsa"  # rsa | ecdsa
    organization: str = ""

    @classmethod
    def from_directive(cls, raw: Mapping[str, Any]) -> TlsSpec:
        """Raises ValueError (no secret in the message) for a malformed directive."""
        if not isinstance(raw, Mapping) or not raw.get("commonName"):
            raise ValueError("tls directive needs commonName")
        algorithm = str(raw.get("algorithm") or "rsa")
        if algorithm not in _ALGORITHMS:
            raise ValueError(f"tls algorithm must be rsa or ecdsa, not {algorithm!r}")
        valid_for = parse_duration(str(raw.get("validFor") or "1y"))
        if valid_for <= timedelta(0):
            raise ValueError("tls validFor must be positive")
        ips = tuple(str(ipaddress.ip_address(str(ip))) for ip in raw.get("ipAddresses") or ())
        return cls(common_name=str(raw["commonName"]),
                   dns_names=tuple(str(d) for d in raw.get("dnsNames") or () if d),
                   ip_addresses=ips, valid_for=valid_for, algorithm=algorithm,
                   organization=str(raw.get("organization") or ""))

    @property
    def san_dns_names(self) -> tuple[str, ...]:
        """The DNS SANs to issue: dnsNames, then the common name when it is a DNS name."""
        names = list(self.dns_names)
        if self.common_name not in names and _is_dns_name(self.common_name):
            names.append(self.common_name)
        return tuple(names)


@dataclass(frozen=True, slots=True, kw_only=True)
class TlsOutcome:
    """`values` is None when the live certificate is kept; otherwise the TLS Secret's
    three PEM values. `ca_values`: the CA Secret's values (`ca.crt`, `ca.key`) when it
    does not hold them yet (a new CA, or a CA key still in the TLS Secret), else None."""

    values: dict[str, bytes] | None
    reason: str
    new_ca: bool = False
    ca_values: dict[str, bytes] | None = None
    why: str = ""  # why a certificate is issued (`dnsNames changed`, `rotation due`, ...)
    checked: str = ""  # keys_fingerprint of the server key and CA key known valid after it


def ca_validity(spec: TlsSpec) -> timedelta:
    return max(3 * spec.valid_for, spec.valid_for + timedelta(hours=24))


def keys_fingerprint(server_key: bytes | None, ca_key: bytes | None) -> str:
    """A sha256 of the PEM bytes of a server key and its CA's key (either may be absent):
    what identifies keys already validated. Reveals nothing of them."""
    digest = hashlib.sha256()
    for pem in (server_key or b"", ca_key or b""):
        digest.update(len(pem).to_bytes(8, "big"))
        digest.update(pem)
    return digest.hexdigest()


def plan_tls(spec: TlsSpec, live: Mapping[str, bytes], *, now: datetime,
             renew: bool = False, ca_store: Mapping[str, bytes] | None = None,
             checked: str = "") -> TlsOutcome:
    """Keep the live certificate when it is valid for `spec`, else issue a new one
    (reusing the CA when it can). `renew` forces a new server certificate (rotation).
    `live`: the TLS Secret's values (a legacy `ca.key` included); `ca_store`: the CA
    Secret's; `checked`: the fingerprint the TLS Secret recorded (`TlsOutcome.checked` of
    the plan that wrote it), "" when none."""
    store = ca_store or {}
    ca_candidate = store.get("ca.key") or live.get(LEGACY_CA_KEY)
    trusted: frozenset[bytes] = frozenset()
    if checked and checked == keys_fingerprint(live.get("tls.key"), ca_candidate):
        trusted = frozenset(pem for pem in (live.get("tls.key"), ca_candidate) if pem)
    ca, bundle, ca_key = _load_ca(live, store, trusted)
    problem = _leaf_problem(spec, live, ca, bundle, now, trusted)
    if problem is None and not renew:
        kept = None
        if ca is not None and ca_key is not None:
            kept = _to_store(ca.certificate.pem, ca_key, store)
        return TlsOutcome(values=None, reason="certificate valid", ca_values=kept,
                          checked=keys_fingerprint(live.get("tls.key"), ca_key))
    reason = problem or "rotation due"
    new_ca = ca is None or not _ca_usable(ca, spec, now)
    if new_ca:
        fresh = pki.create_ca(common_name=f"orksync-ca-{now:%Y%m%d%H%M%S}", now=now,
                              validity=ca_validity(spec), organizations=("orksync",),
                              key=pki.generate_private_key(_ALGORITHMS[spec.algorithm]))
        bundle = [fresh.certificate] + [c for c in bundle[:1] if c.not_after > now]
        ca = fresh
    assert ca is not None
    key = pki.generate_private_key(_ALGORITHMS[spec.algorithm])
    cert = pki.issue_certificate(
        ca, key, common_name=spec.common_name, now=now, validity=spec.valid_for,
        dns_names=spec.san_dns_names, ip_addresses=spec.ip_addresses,
        organizations=(spec.organization,) if spec.organization else (),
        extended_usages=("server_auth",))
    values = {
        "tls.crt": cert.pem,
        "tls.key": key.pem("traditional"),
        "ca.crt": b"".join(c.pem for c in bundle),
    }
    if new_ca or ca_key is None:
        ca_key = ca.key.pem("traditional")
    what = "issued a new CA and certificate" if new_ca else "renewed the certificate"
    return TlsOutcome(values=values, reason=f"{what} ({reason})", new_ca=new_ca,
                      ca_values=_to_store(ca.certificate.pem, ca_key, store), why=reason,
                      checked=keys_fingerprint(values["tls.key"], ca_key))


def _to_store(ca_crt: bytes, ca_key: bytes, store: Mapping[str, bytes]
              ) -> dict[str, bytes] | None:
    """The CA Secret's values, or None when it holds them already."""
    if store.get("ca.crt") == ca_crt and store.get("ca.key") == ca_key:
        return None
    return {"ca.crt": ca_crt, "ca.key": ca_key}


def _load_ca(live: Mapping[str, bytes], store: Mapping[str, bytes],
             trusted: frozenset[bytes] = frozenset()
             ) -> tuple[pki.CertificateAuthority | None, list[pki.Certificate], bytes | None]:
    """The live CA (first certificate of the TLS Secret's ca.crt with its key: from the CA
    Secret, else the legacy `ca.key` of the TLS Secret), the whole bundle, and the key's
    PEM bytes as stored (so a moved key keeps its bytes). A key whose bytes are in
    `trusted` was validated before and is read without the check."""
    try:
        bundle = pki.load_certificates(live["ca.crt"]) if live.get("ca.crt") else []
    except ValueError:
        return None, [], None
    if not bundle or not bundle[0].is_ca:
        return None, bundle, None
    for pem in (store.get("ca.key"), live.get(LEGACY_CA_KEY)):
        if not pem:
            continue
        try:
            key = pki.load_private_key(pem, validated=pem in trusted)
        except (ValueError, TypeError):
            continue
        if pki.certificate_matches_key(bundle[0], key):
            return pki.CertificateAuthority(certificate=bundle[0], key=key), bundle, pem
    return None, bundle, None


def _ca_usable(ca: pki.CertificateAuthority, spec: TlsSpec, now: datetime) -> bool:
    cert = ca.certificate
    left = cert.not_after - now
    lifetime = cert.not_after - cert.not_before
    return cert.not_before <= now and left >= lifetime / 3 and left >= spec.valid_for


def _leaf_problem(spec: TlsSpec, live: Mapping[str, bytes],
                  ca: pki.CertificateAuthority | None, bundle: list[pki.Certificate],
                  now: datetime, trusted: frozenset[bytes] = frozenset()) -> str | None:
    """Why the live server certificate cannot be kept, or None."""
    if not live.get("tls.crt") or not live.get("tls.key"):
        return "no certificate yet"
    try:
        cert = pki.load_certificate(live["tls.crt"])
        key = pki.load_private_key(live["tls.key"], validated=live["tls.key"] in trusted)
    except (ValueError, TypeError):
        return "the certificate or key cannot be read"
    if not pki.certificate_matches_key(cert, key):
        return "the key does not match the certificate"
    if not bundle or not pki.issued_by(cert, bundle[0]):
        return "the certificate was not issued by ca.crt"
    if ca is not None and not _ca_usable(ca, spec, now):
        return "the CA is near the end of its lifetime"
    changed = _changed(spec, cert)
    if changed:
        return f"{changed} changed"
    lifetime = cert.not_after - cert.not_before
    if cert.not_after - now < lifetime / 3:
        return "less than a third of its lifetime is left"
    return None


def _changed(spec: TlsSpec, cert: pki.Certificate) -> str | None:
    """The first `tls:` field the live certificate does not match, or None."""
    if cert.common_name != spec.common_name:
        return "commonName"
    live_dns = set(cert.dns_names)
    if not set(spec.dns_names) <= live_dns <= set(spec.san_dns_names):
        return "dnsNames"
    if {ipaddress.ip_address(i) for i in cert.ip_addresses} != \
            {ipaddress.ip_address(i) for i in spec.ip_addresses}:
        return "ipAddresses"
    if cert.organizations != ((spec.organization,) if spec.organization else ()):
        return "organization"
    if cert.key_algorithm != _ALGORITHMS[spec.algorithm]:
        return "algorithm"
    validity = cert.not_after - cert.not_before - pki.BACKDATE
    if abs(validity - spec.valid_for) > _VALIDITY_TOLERANCE:
        return "validFor"
    return None


def _is_dns_name(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
        return False
    except ValueError:
        pass
    labels = name.rstrip(".").split(".")
    return all(0 < len(lab) <= 63 and all(c.isalnum() or c in "-*" for c in lab)
               for lab in labels) and len(name) <= 253
