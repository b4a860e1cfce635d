"""Data notes: encodings, JSON, hashing and Kubernetes-safe names.

Pure. No I/O, clock and randomness injected.

`sha256sum` returns the FIRST 8 hex characters of the digest, as Orkestra's note does
(a short fingerprint for content-addressed names); sprig's returns all 64. `toJSON`
writes JSON exactly like Go's json.Marshal (compact, sorted keys, `<>&` escaped).
`slugify` keeps ASCII letters and digits only.

| Function | Signature | Meaning |
|---|---|---|
| `toBase64` | `toBase64 s` | standard base64 of the UTF-8 bytes of s |
| `fromBase64` | `fromBase64 s` | the text encoded by standard base64 s (error when invalid) |
| `toJSON` | `toJSON v` | v as compact JSON (Go json.Marshal) |
| `toJson` | `toJson v` | same as toJSON |
| `fromJSON` | `fromJSON s` | the value encoded by JSON text s (error when invalid) |
| `sha256sum` | `sha256sum s` | first 8 hex characters of SHA-256(s) |
| `truncateName` | `truncateName s n` | the first n characters of s, no suffix |
| `slugify` | `slugify s` | lower case, runs of non-alphanumerics → `-`, no leading/trailing `-` |
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from typing import Any

from orksync.render.notes._common import Note, NoteError, go_json, to_int, to_str

_NOT_ALNUM = re.compile(r"[^a-z0-9]+")


def _from_base64(value: Any) -> str:
    text = to_str(value).strip()
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as err:
        raise NoteError(f"fromBase64: invalid base64 {text[:40]!r}") from err
    return raw.decode("utf-8", errors="replace")


def _from_json(value: Any) -> Any:
    try:
        return json.loads(to_str(value))
    except ValueError as err:
        raise NoteError(f"fromJSON: invalid JSON ({err})") from None


def _truncate_name(value: Any, n: Any) -> str:
    limit = to_int(n, "truncateName")
    if limit < 0:
        raise NoteError(f"truncateName: negative length {limit}")
    return to_str(value)[:limit]


def _slugify(value: Any) -> str:
    return _NOT_ALNUM.sub("-", to_str(value).lower()).strip("-")


def notes() -> dict[str, Note]:
    return {
        "toBase64": lambda s: base64.b64encode(to_str(s).encode("utf-8")).decode("ascii"),
        "fromBase64": _from_base64,
        "toJSON": go_json,
        "toJson": go_json,
        "fromJSON": _from_json,
        "sha256sum": lambda s: hashlib.sha256(to_str(s).encode("utf-8")).hexdigest()[:8],
        "truncateName": _truncate_name,
        "slugify": _slugify,
    }
