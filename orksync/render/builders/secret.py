"""Secret: Orkestra's `secrets[]` entry into a Secret body (placeholders, never values) plus
the directives the apply resolves (orksync.secrets.plan). Pure
(docs/katalog-semantics.md#secret-entries)."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from typing import Any

from orksync.durations import parse_duration
from orksync.render.builders import BuildContext, BuildError, Built, metadata
from orksync.render.builders.common import as_text, items, node
from orksync.secrets.random import GENERATE_TOKEN_RE

__all__ = ["KNOWN_TYPES", "RESERVED_ANNOTATIONS", "TLS_DATA_KEYS", "TLS_TYPE", "build_secret"]

TLS_TYPE = "kubernetes.io/tls"
KNOWN_TYPES = ("Opaque", TLS_TYPE, "kubernetes.io/dockerconfigjson", "kubernetes.io/dockercfg",
               "kubernetes.io/basic-auth", "kubernetes.io/ssh-auth",
               "kubernetes.io/service-account-token", "bootstrap.kubernetes.io/token")
_CANONICAL = {t.lower(): t for t in KNOWN_TYPES}
# Keys a type requires (API server validation), checked here for a clearer error.
_REQUIRED_KEYS: dict[str, tuple[tuple[str, ...], ...]] = {
    "kubernetes.io/basic-auth": (("username", "password"),),  # at least one of
    "kubernetes.io/ssh-auth": (("ssh-privatekey",),),
    "kubernetes.io/dockerconfigjson": ((".dockerconfigjson",),),
    "kubernetes.io/dockercfg": ((".dockercfg",),),
    TLS_TYPE: (("tls.crt",), ("tls.key",)),
}
TLS_DATA_KEYS = ("tls.crt", "tls.key", "ca.crt", "ca.key")
RESERVED_ANNOTATIONS = ("orkestra.orkspace.io/generated-at", "orkestra.orkspace.io/rotate-after")
RESERVED_PREFIX = "orksync.io/"
TLS_NAME_SUFFIX = "-orkestra-tls"
DEFAULT_VALID_FOR = "1y"
ALGORITHMS = ("rsa", "ecdsa")
_MAX_CN = 64  # X.509 upper bound for a common name
_KEY_RE = re.compile(r"^[-._a-zA-Z0-9]{1,253}$")
_ANY_TOKEN_RE = re.compile(r"<generate:", re.IGNORECASE)


def build_secret(entry: Mapping[str, Any], ctx: BuildContext) -> Built:
    tls_raw = entry.get("tls")
    has_tls = tls_raw is not None and tls_raw is not False
    from_secret = as_text(entry.get("fromSecret"), "fromSecret")
    data = _data(entry)
    if not data and not from_secret and not has_tls:
        raise BuildError("data", "one of fromSecret, data or tls must be declared")

    once = _flag(entry, "once")
    rotate_after = as_text(entry.get("rotateAfter"), "rotateAfter")
    if rotate_after:
        try:
            parse_duration(rotate_after)
        except ValueError as err:
            raise BuildError("rotateAfter", str(err)) from None

    secret_type = _type(entry, has_tls)
    name = ctx.name
    if has_tls and not as_text(entry.get("name"), "name"):
        name = ctx.cr_name + TLS_NAME_SUFFIX
    meta = metadata(ctx, _annotations(entry))
    meta["name"] = name

    directives: dict[str, Any] = {}
    generated = {k: v for k, v in data.items() if GENERATE_TOKEN_RE.search(v)}
    if generated:
        directives["generated"] = generated
    if once:
        directives["once"] = True
    if rotate_after:
        directives["rotateAfter"] = rotate_after
    if has_tls:
        for key in TLS_DATA_KEYS:
            if key in data:
                raise BuildError(f"data.{key}", "is written by the tls generator; remove it")
        directives["tls"] = _tls(tls_raw, name, ctx.namespace, rotate_after)
    if from_secret:
        directives["fromSecret"] = {
            "name": from_secret,
            "namespace": as_text(entry.get("fromNamespace"), "fromNamespace")
            or ctx.cr_namespace or "default"}
    if not from_secret and not has_tls:
        _check_required_keys(secret_type, data)

    body: dict[str, Any] = {"apiVersion": "v1", "kind": "Secret", "metadata": meta,
                            "type": secret_type}
    if data:
        body["stringData"] = dict(sorted(data.items()))
    return Built(body, directives)


def _data(entry: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in node(entry.get("data"), "data").items():
        key = str(key)
        if not _KEY_RE.match(key):
            raise BuildError(f"data.{key}", "a Secret key may contain only letters, digits, "
                             "'-', '_' and '.' (at most 253 characters)")
        if isinstance(value, Mapping | list):
            raise BuildError(f"data.{key}", f"must be a string, not a {type(value).__name__}")
        rendered = as_text(value, key) if value is not None else ""
        if len(_ANY_TOKEN_RE.findall(rendered)) != len(GENERATE_TOKEN_RE.findall(rendered)):
            raise BuildError(f"data.{key}", "holds a `<generate:` placeholder that is not one "
                             "a random note rendered (text changed after the render, or "
                             "written by hand); call the random note in the template: what "
                             "the template computes from it is computed when the Secret is "
                             "written")
        out[key] = rendered
    return out


def _flag(entry: Mapping[str, Any], key: str) -> bool:
    value = entry.get(key)
    if value is None or isinstance(value, bool):
        return bool(value)
    word = str(value).strip().lower()
    if word in ("true", "false", ""):
        return word == "true"
    raise BuildError(key, f"must be true or false, got {value!r}")


def _type(entry: Mapping[str, Any], has_tls: bool) -> str:
    declared = as_text(entry.get("type"), "type")
    secret_type = _CANONICAL.get(declared.lower(), declared) if declared else ""
    if has_tls:
        if secret_type not in ("", "Opaque", TLS_TYPE):
            raise BuildError("type", f"a secret with tls is of type {TLS_TYPE}, not "
                             f"{secret_type!r}")
        return TLS_TYPE
    if secret_type and len(secret_type) > 253:
        raise BuildError("type", "is longer than 253 characters")
    return secret_type or "Opaque"


def _annotations(entry: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in node(entry.get("annotations"), "annotations").items():
        key = str(key)
        if key in RESERVED_ANNOTATIONS or key.startswith(RESERVED_PREFIX):
            raise BuildError(f"annotations.{key}", "is reserved for orksync")
        rendered = as_text(value, key)
        if _ANY_TOKEN_RE.search(rendered):
            raise BuildError(f"annotations.{key}", "random functions are resolved only in "
                             "data values")
        out[key] = rendered
    return out


def _check_required_keys(secret_type: str, data: Mapping[str, str]) -> None:
    for alternatives in _REQUIRED_KEYS.get(secret_type, ()):
        if not any(k in data for k in alternatives):
            wanted = " or ".join(alternatives)
            raise BuildError("data", f"a secret of type {secret_type} needs the key {wanted}")


def _tls(raw: Any, name: str, namespace: str, rotate_after: str) -> dict[str, Any]:
    spec = node(raw, "tls") if raw is not True else {}
    for key in spec:
        if key not in ("commonName", "dnsNames", "ipAddresses", "validFor", "algorithm",
                       "organization"):
            raise BuildError(f"tls.{key}", "unknown field (commonName, dnsNames, ipAddresses, "
                             "validFor, algorithm, organization)")
    common_name = _tls_text(spec, "commonName") or f"{name}.{namespace}.svc"
    if len(common_name) > _MAX_CN:
        raise BuildError("tls.commonName", f"{common_name!r} is longer than {_MAX_CN} "
                         "characters (the X.509 limit); set a shorter tls.commonName")
    dns_names = []
    for i, value in enumerate(items(spec.get("dnsNames"), "dnsNames")):
        dns = _tls_text({"v": value}, "v", f"dnsNames[{i}]")
        if dns and dns not in dns_names:
            dns_names.append(dns)
    ips = []
    for i, value in enumerate(items(spec.get("ipAddresses"), "ipAddresses")):
        raw_ip = _tls_text({"v": value}, "v", f"ipAddresses[{i}]")
        if not raw_ip:
            continue
        try:
            ip = str(ipaddress.ip_address(raw_ip))
        except ValueError:
            raise BuildError(f"tls.ipAddresses[{i}]", f"{raw_ip!r} is not an IP address") \
                from None
        if ip not in ips:
            ips.append(ip)
    valid_for = _tls_text(spec, "validFor")
    if valid_for:
        try:
            ok = parse_duration(valid_for).total_seconds() > 0
        except ValueError as err:
            raise BuildError("tls.validFor", str(err)) from None
        if not ok:
            raise BuildError("tls.validFor", f"{valid_for!r}: a certificate needs a positive "
                             "validity")
    elif rotate_after and parse_duration(rotate_after).total_seconds() > 0:
        valid_for = rotate_after
    else:
        valid_for = DEFAULT_VALID_FOR
    algorithm = (_tls_text(spec, "algorithm") or "rsa").lower()
    if algorithm == "ecdsa-p256":
        algorithm = "ecdsa"
    if algorithm not in ALGORITHMS:
        raise BuildError("tls.algorithm", f"must be rsa or ecdsa, got {algorithm!r}")
    out: dict[str, Any] = {"commonName": common_name, "dnsNames": dns_names,
                           "ipAddresses": ips, "validFor": valid_for, "algorithm": algorithm}
    organization = _tls_text(spec, "organization")
    if organization:
        out["organization"] = organization
    return out


def _tls_text(spec: Mapping[str, Any], key: str, label: str | None = None) -> str:
    try:
        value = as_text(spec.get(key), key)
    except BuildError as err:
        raise BuildError(f"tls.{label or key}", str(err)) from None
    if _ANY_TOKEN_RE.search(value):
        raise BuildError(f"tls.{label or key}", "random functions are resolved only in data "
                         "values")
    return value
