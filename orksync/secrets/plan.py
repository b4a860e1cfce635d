"""Decide what to write for one Secret from its rendered body, its directives and the live
object: keep generated values, fill missing ones, rotate when due, keep or renew TLS.
Pure: clock and randomness passed in (docs/operations.md#how-a-secret-write-is-planned)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from orksync.durations import parse_duration
from orksync.model import MANAGED_BY_LABEL, OWNER_ANNOTATION, WritePolicy, is_managed
from orksync.secrets.ca import CA_OF_ANNOTATION, MAX_NAME, ca_secret_name
from orksync.secrets.random import RandomSource, fill_generated
from orksync.secrets.tls import CA_KEYS, LEGACY_CA_KEY, TLS_KEYS, TlsSpec, plan_tls

__all__ = ["GENERATED_AT", "GENERATORS", "MANAGED_BY_LABEL", "ROTATE_AFTER", "TLS_ANNOTATION",
           "TLS_CHECKED", "UNMANAGED", "SecretPlan", "data_after_write", "data_hash",
           "directives_from_annotations",
           "format_time", "is_managed", "owned_desired", "plan_secret", "rotation_due"]

GENERATED_AT = "orkestra.orkspace.io/generated-at"
ROTATE_AFTER = "orkestra.orkspace.io/rotate-after"
GENERATORS = "orksync.io/generators"
TLS_ANNOTATION = "orksync.io/tls"
TLS_CHECKED = "orksync.io/tls-keys-validated"
OWN_ANNOTATIONS = (GENERATED_AT, ROTATE_AFTER, GENERATORS, TLS_ANNOTATION, TLS_CHECKED)
UNMANAGED = "exists and is not managed by orksync"

WriteKind = Literal["skip", "create", "apply", "rotate"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SecretPlan:
    """What to do with one Secret. `reason` starting with `error:` means the write failed
    before any request (the caller reports a failed change)."""

    write: WriteKind
    body: dict[str, Any] | None
    reason: str
    rotated: bool = False
    data_hash: str | None = None
    generated: tuple[str, ...] = field(default=())  # keys given new values by this plan
    ca_body: dict[str, Any] | None = None  # the CA Secret to write first (tls only)
    drop_legacy_ca_key: bool = False  # remove `ca.key` from the TLS Secret after the write
    # what the plan does to an existing Secret beyond a plain apply, one line each, no
    # value (`orksync diff`): rotation due, certificate re-issued, keys to add, CA moves
    work: tuple[str, ...] = field(default=())

    @property
    def failed(self) -> bool:
        return self.reason.startswith("error:")


@dataclass(frozen=True, slots=True, kw_only=True)
class _Directives:
    generated: dict[str, str]
    once: bool
    rotate_after: str
    tls: TlsSpec | None
    tls_raw: dict[str, Any] | None
    from_secret: tuple[str, str] | None

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> _Directives:
        generated = raw.get("generated") or {}
        if not isinstance(generated, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in generated.items()):
            raise ValueError("generated must map keys to templates")
        rotate_after = str(raw.get("rotateAfter") or "")
        if rotate_after:
            parse_duration(rotate_after)
        tls_raw = raw.get("tls")
        tls = TlsSpec.from_directive(tls_raw) if tls_raw else None
        source = raw.get("fromSecret")
        from_secret = None
        if source:
            if not isinstance(source, Mapping) or not source.get("name"):
                raise ValueError("fromSecret needs a name")
            from_secret = (str(source.get("namespace") or ""), str(source["name"]))
        return cls(generated=dict(generated), once=bool(raw.get("once")),
                   rotate_after=rotate_after, tls=tls,
                   tls_raw=dict(tls_raw) if tls_raw else None, from_secret=from_secret)


def plan_secret(desired: Mapping[str, Any], directives: Mapping[str, Any],
                live: Mapping[str, Any] | None, *, policy: WritePolicy, now: datetime,
                random: RandomSource, source: Mapping[str, Any] | None = None,
                force_rotate: bool = False,
                ca_live: Mapping[str, Any] | None = None) -> SecretPlan:
    """Plan the write of one Secret (see the module docstring for the rules). `ca_live`:
    the live CA Secret of a `tls:` Secret (orksync.secrets.ca), None when absent."""
    live_data = _data_of(live)
    live_hash = data_hash(live_data) if live is not None else None
    if live is not None and not is_managed(live):
        return SecretPlan(write="skip", body=None, reason=UNMANAGED, data_hash=live_hash)
    ca_of = _annotations_of(live).get(CA_OF_ANNOTATION)
    if ca_of and not directives.get("caOf"):
        return _error(f"the name is taken by the CA Secret of Secret {ca_of} "
                      f"({CA_OF_ANNOTATION}); rename one of them", live_hash)
    try:
        d = _Directives.parse(directives)
    except (ValueError, TypeError) as err:
        return _error(f"invalid secret directives: {err}", live_hash)
    if d.from_secret is not None and source is None:
        ns, name = d.from_secret
        return _error(f"source Secret {ns}/{name} not found", live_hash)
    want_type = str(desired.get("type") or "Opaque")
    live_type = str((live or {}).get("type") or "Opaque")
    if live is not None and live_type != want_type:
        return _error(f"the type of a Secret cannot change (live {live_type}, declared "
                      f"{want_type}); delete the Secret to recreate it", live_hash)

    live_ann = _annotations_of(live)
    due, why = False, ""
    if live is not None:
        due, why = rotation_due(d.rotate_after, live_ann.get(GENERATED_AT), now)
        if force_rotate and not due:
            due, why = True, "rotation requested"
    rotate = due

    generated_or_tls = set(d.generated) | ({*TLS_KEYS, LEGACY_CA_KEY} if d.tls else set())
    declared = _declared(desired, source if d.from_secret else None, d.generated)
    keep_static = live is not None and (d.once or policy is not WritePolicy.APPLY)
    data: dict[str, str] = {}
    for key, value in declared.items():
        if key in generated_or_tls:
            continue
        data[key] = live_data[key] if keep_static and key in live_data else value
    filled: list[str] = []
    for key, template in sorted(d.generated.items()):
        if key in live_data and not rotate:
            data[key] = live_data[key]
            continue
        try:
            data[key] = _b64(fill_generated(template, random))
        except ValueError as err:
            return _error(f"cannot generate key {key}: {err}", live_hash)
        filled.append(key)

    tls_renewed, tls_reason, tls_checked = False, "", ""
    ca_values: dict[str, bytes] | None = None
    legacy = d.tls is not None and LEGACY_CA_KEY in live_data
    work: list[str] = []
    if rotate:
        work.append(f"rotation due: {why}")
    missing = [k for k in filled if k not in TLS_KEYS]
    if live is not None and missing and not rotate:
        work.append(f"generated keys to add: {', '.join(missing)}")
    if live is not None and d.rotate_after and GENERATED_AT not in live_ann:
        work.append(f"rotation clock to start: {GENERATED_AT} set now")
    if d.tls is not None:
        name = str((desired.get("metadata") or {}).get("name") or "")
        problem = _ca_secret_problem(name, ca_live)
        if problem:
            return _error(problem, live_hash)
        outcome = plan_tls(d.tls, _decoded(live_data, (*TLS_KEYS, LEGACY_CA_KEY)), now=now,
                           renew=rotate, ca_store=_decoded(_data_of(ca_live), CA_KEYS),
                           checked=live_ann.get(TLS_CHECKED, ""))
        tls_reason = outcome.reason
        tls_checked = outcome.checked
        ca_values = outcome.ca_values
        if live is not None and outcome.values is not None and not rotate:
            work.append(f"certificate would be re-issued: {outcome.why}")
        if live is not None and legacy:
            work.append(f"CA key would move out of this Secret to Secret "
                        f"{ca_secret_name(name)}")
        elif live is not None and ca_values is not None:
            work.append(f"CA Secret {ca_secret_name(name)} would be written")
        if live is not None and outcome.values is None \
                and live_ann.get(TLS_CHECKED) != tls_checked:
            work.append(f"validated keys to record: {TLS_CHECKED} set")
        if outcome.values is None:
            data.update({k: live_data[k] for k in TLS_KEYS if k in live_data})
        else:
            data.update({k: base64.b64encode(v).decode("ascii")
                         for k, v in outcome.values.items()})
            tls_renewed = live is not None
            filled.extend(TLS_KEYS)
        if legacy:
            tls_reason += f"; CA key moved to Secret {ca_secret_name(name)}"

    generator = bool(d.generated or d.tls or d.rotate_after)
    write: WriteKind
    if live is None:
        write = "create"
    elif rotate or tls_renewed:
        write = "rotate"
    elif policy is not WritePolicy.APPLY:
        if not (d.rotate_after and GENERATED_AT not in live_ann) and not filled \
                and not legacy and ca_values is None \
                and live_ann.get(TLS_CHECKED, "") == tls_checked:
            return SecretPlan(write="skip", body=None, data_hash=live_hash,
                              reason="exists (create-if-absent); values kept")
        write = "apply"
    else:
        write = "apply"

    stamp = format_time(now)
    if write == "create" or rotate or (tls_renewed and not d.generated):
        generated_at = stamp
    else:
        generated_at = live_ann.get(GENERATED_AT) or stamp
    annotations = {k: str(v) for k, v in _annotations_of(desired).items()
                   if k not in OWN_ANNOTATIONS}
    if generator:
        annotations[GENERATED_AT] = generated_at
    if d.rotate_after:
        annotations[ROTATE_AFTER] = d.rotate_after
    if d.generated:
        annotations[GENERATORS] = _json(d.generated)
    if d.tls_raw:
        annotations[TLS_ANNOTATION] = _json(d.tls_raw)
    if tls_checked:
        annotations[TLS_CHECKED] = tls_checked

    body = _body(desired, annotations, want_type, data)
    record = d.tls is not None and live_ann.get(TLS_CHECKED, "") != tls_checked
    if live is not None and (write == "rotate" or filled or legacy or record):
        body["metadata"]["resourceVersion"] = str(live["metadata"]["resourceVersion"])
    ca_body = _ca_body(body, ca_values, ca_live) if ca_values is not None else None
    reason = _reason(write, why, filled, d, tls_reason)
    return SecretPlan(write=write, body=body, reason=reason, rotated=write == "rotate",
                      data_hash=data_hash(data), generated=tuple(filled), ca_body=ca_body,
                      drop_legacy_ca_key=legacy, work=tuple(work))


def _ca_secret_problem(name: str, ca_live: Mapping[str, Any] | None) -> str | None:
    """Why the CA Secret of the `tls:` Secret `name` cannot be written, or None."""
    ca_name = ca_secret_name(name)
    if len(ca_name) > MAX_NAME:
        return (f"the name of its CA Secret {ca_name!r} would be longer than {MAX_NAME} "
                "characters; shorten the Secret's name")
    if ca_live is None:
        return None
    if not is_managed(ca_live) or _annotations_of(ca_live).get(CA_OF_ANNOTATION) != name:
        return (f"Secret {ca_name}, where its CA key is kept, exists and is not this "
                f"Secret's CA Secret (no {CA_OF_ANNOTATION}: {name}); nothing was written: "
                "rename one of them")
    return None


def _ca_body(tls_body: Mapping[str, Any], values: Mapping[str, bytes],
             ca_live: Mapping[str, Any] | None) -> dict[str, Any]:
    """The CA Secret beside a TLS Secret: same namespace, labels, owner annotation and
    owner references; resourceVersion of the live one as a precondition."""
    tmeta = tls_body.get("metadata") or {}
    annotations = {CA_OF_ANNOTATION: str(tmeta.get("name"))}
    owner = (tmeta.get("annotations") or {}).get(OWNER_ANNOTATION)
    if owner:
        annotations[OWNER_ANNOTATION] = str(owner)
    meta: dict[str, Any] = {"name": ca_secret_name(str(tmeta.get("name"))),
                            "namespace": tmeta.get("namespace"),
                            "annotations": dict(sorted(annotations.items()))}
    if tmeta.get("labels"):
        meta["labels"] = dict(tmeta["labels"])
    if tmeta.get("ownerReferences"):
        meta["ownerReferences"] = [dict(r) for r in tmeta["ownerReferences"]]
    if ca_live is not None:
        meta["resourceVersion"] = str((ca_live.get("metadata") or {}).get("resourceVersion"))
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "Opaque",
            "data": {k: base64.b64encode(v).decode("ascii") for k, v in sorted(values.items())}}


def rotation_due(rotate_after: str, generated_at: str | None,
                 now: datetime) -> tuple[bool, str]:
    """(due, why). No `rotateAfter`, `never`, or no `generated-at` yet: not due."""
    if not rotate_after:
        return False, ""
    period = parse_duration(rotate_after)
    if period <= timedelta(0) or generated_at is None:
        return False, ""
    stamp = _parse_time(generated_at)
    if stamp is None:
        return True, f"{GENERATED_AT} is not a valid time"
    if now - stamp >= period:
        return True, f"rotateAfter {rotate_after} elapsed since {format_time(stamp)}"
    return False, ""


def directives_from_annotations(annotations: Mapping[str, str]) -> dict[str, Any]:
    """The directives of a live generator Secret, rebuilt from orksync's annotations (for
    `orksync rotate`, which runs without the repository). Raises ValueError."""
    out: dict[str, Any] = {"once": True}
    try:
        if annotations.get(GENERATORS):
            out["generated"] = json.loads(annotations[GENERATORS])
        if annotations.get(TLS_ANNOTATION):
            out["tls"] = json.loads(annotations[TLS_ANNOTATION])
    except json.JSONDecodeError as err:
        raise ValueError(f"an orksync annotation is not valid JSON: {err.msg}") from None
    if annotations.get(ROTATE_AFTER):
        out["rotateAfter"] = annotations[ROTATE_AFTER]
    _Directives.parse(out)
    return out


def owned_desired(live: Mapping[str, Any], field_manager: str) -> dict[str, Any]:
    """The part of a live Secret that `field_manager` last server-side applied, with live
    values: what a rotation must send again so that the apply removes nothing. (An apply by
    the same manager drops every field it owned and no longer sends.)"""
    meta = live.get("metadata") or {}
    fields = _applied_fields(live, field_manager)
    owned_meta = fields.get("f:metadata") or {}

    def pick(values: Mapping[str, Any] | None, owned: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in (values or {}).items() if f"f:{k}" in owned}

    out_meta: dict[str, Any] = {"name": meta.get("name"), "namespace": meta.get("namespace")}
    labels = pick(meta.get("labels"), owned_meta.get("f:labels") or {})
    annotations = pick(meta.get("annotations"), owned_meta.get("f:annotations") or {})
    if labels:
        out_meta["labels"] = labels
    if annotations:
        out_meta["annotations"] = annotations
    uids = set()
    for key in owned_meta.get("f:ownerReferences") or {}:
        if key.startswith("k:"):
            try:
                uids.add(json.loads(key[2:]).get("uid"))
            except (json.JSONDecodeError, AttributeError):
                continue
    refs = [r for r in meta.get("ownerReferences") or [] if r.get("uid") in uids]
    if refs:
        out_meta["ownerReferences"] = refs
    return {"apiVersion": "v1", "kind": "Secret", "metadata": out_meta,
            "type": live.get("type") or "Opaque",
            "data": pick(live.get("data"), fields.get("f:data") or {})}


def data_after_write(body: Mapping[str, Any], live: Mapping[str, Any] | None,
                     field_manager: str) -> dict[str, str]:
    """The (base64) data a Secret holds after `field_manager` created or server-side
    applied `body` onto `live`: the keys it sent, and the live keys it did not own (an
    apply drops those it owned and no longer sends). Known without reading the answer,
    so a write asks for metadata only and no value comes back."""
    sent = _data_of(body)
    if live is None:
        return sent
    owned = _applied_fields(live, field_manager).get("f:data") or {}
    out = {k: v for k, v in _data_of(live).items() if f"f:{k}" not in owned}
    out.update(sent)
    return out


def _applied_fields(live: Mapping[str, Any], field_manager: str) -> dict[str, Any]:
    """The fieldsV1 tree of what `field_manager` last server-side applied to `live`."""
    fields: dict[str, Any] = {}
    for entry in (live.get("metadata") or {}).get("managedFields") or []:
        if entry.get("manager") == field_manager and entry.get("operation") == "Apply" \
                and not entry.get("subresource"):
            _merge(fields, entry.get("fieldsV1") or {})
    return fields


def data_hash(data: Mapping[str, str]) -> str:
    """A short sha256 of a Secret's (base64) data, stable across key order."""
    canon = json.dumps(dict(data), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()[:16]


def format_time(moment: datetime) -> str:
    """RFC 3339 UTC to the second, as Orkestra writes it: `2026-04-06T08:00:00Z`."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(text: str) -> datetime | None:
    try:
        moment = datetime.fromisoformat(text.strip())
    except (ValueError, AttributeError):
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def _declared(desired: Mapping[str, Any], source: Mapping[str, Any] | None,
              generated: Mapping[str, str]) -> dict[str, str]:
    """The base64 values of every declared static key (source data first)."""
    out: dict[str, str] = dict(_data_of(source)) if source is not None else {}
    out.update({str(k): str(v) for k, v in (desired.get("data") or {}).items()})
    for key, value in (desired.get("stringData") or {}).items():
        if key not in generated:
            out[str(key)] = _b64("" if value is None else str(value))
    return out


def _body(desired: Mapping[str, Any], annotations: Mapping[str, str], secret_type: str,
          data: Mapping[str, str]) -> dict[str, Any]:
    dmeta = desired.get("metadata") or {}
    meta: dict[str, Any] = {"name": dmeta.get("name"), "namespace": dmeta.get("namespace")}
    if dmeta.get("labels"):
        meta["labels"] = dict(sorted((str(k), str(v)) for k, v in dmeta["labels"].items()))
    if annotations:
        meta["annotations"] = dict(sorted(annotations.items()))
    if dmeta.get("ownerReferences"):
        meta["ownerReferences"] = [dict(r) for r in dmeta["ownerReferences"]]
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": secret_type,
            "data": dict(sorted(data.items()))}


def _reason(write: WriteKind, why: str, filled: list[str], d: _Directives,
            tls_reason: str) -> str:
    keys = [k for k in filled if k not in TLS_KEYS]
    parts: list[str]
    if write == "create":
        parts = ["created"]
        if keys:
            parts.append(f"generated {', '.join(keys)}")
    elif write == "rotate":
        parts = [f"rotated in place ({why})" if why else "rotated in place"]
        if keys:
            parts.append(f"new values for {', '.join(keys)}")
    else:
        parts = ["applied"]
        if keys:
            parts.append(f"generated missing {', '.join(keys)}")
        elif d.generated:
            parts.append("generated values kept")
    if d.tls is not None:
        parts.append(tls_reason)
    return "; ".join(parts)


def _error(message: str, live_hash: str | None) -> SecretPlan:
    return SecretPlan(write="skip", body=None, reason=f"error: {message}", data_hash=live_hash)


def _data_of(obj: Mapping[str, Any] | None) -> dict[str, str]:
    return {str(k): str(v) for k, v in ((obj or {}).get("data") or {}).items()}


def _annotations_of(obj: Mapping[str, Any] | None) -> dict[str, str]:
    return dict(((obj or {}).get("metadata") or {}).get("annotations") or {})


def _decoded(data: Mapping[str, str], keys: tuple[str, ...]) -> dict[str, bytes]:
    out = {}
    for key in keys:
        if key in data:
            try:
                out[key] = base64.b64decode(data[key], validate=True)
            except (binascii.Error, ValueError):
                continue  # unreadable: treated as missing, so it is issued again
    return out


def _b64(text: str) -> str:
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def _json(value: Mapping[str, Any]) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _merge(into: dict[str, Any], fields: Mapping[str, Any]) -> None:
    for key, value in fields.items():
        if isinstance(value, Mapping):
            _merge(into.setdefault(key, {}), value)
        else:
            into.setdefault(key, value)
