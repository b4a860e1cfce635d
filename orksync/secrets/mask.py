"""Keep secret values out of diffs, logs, Events and error messages. Pure.

* `mask_secret(obj)`: a copy of an object with every `data` / `stringData` value replaced
  by `***` (as Flux does), for diffs and logs. Keys stay visible: they are not secret.
* `scrub(text, values)`: `text` with every occurrence of any of `values` replaced by `***`,
  for messages that might echo a value back (an API server error, an exception).
  Values shorter than `min_length` (default 4) are not scrubbed: replacing every `a` or
  `1` would destroy the message and such a value is no secret anyway.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["MASK", "mask_secret", "scrub", "secret_values"]

MASK = "***"


def mask_secret(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of `obj` with the values of `data` and `stringData` masked."""
    out = copy.deepcopy(dict(obj))
    for key in ("data", "stringData"):
        values = out.get(key)
        if isinstance(values, Mapping):
            out[key] = {k: MASK for k in values}
    return out


def scrub(text: str, values: Iterable[str], *, min_length: int = 4) -> str:
    """Replace every occurrence of each value (longest first) with `***`."""
    for value in sorted({v for v in values if v and len(v) >= min_length}, key=len,
                        reverse=True):
        text = text.replace(value, MASK)
    return text


def secret_values(obj: Mapping[str, Any] | None) -> list[str]:
    """Every value of a Secret body in the forms it can appear in text: the base64 of
    `data`, its decoded text, and the plain `stringData`."""
    out: list[str] = []
    if not obj:
        return out
    for value in (obj.get("data") or {}).values():
        out.append(str(value))
        try:
            out.append(base64.b64decode(str(value)).decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            continue
    out.extend(str(v) for v in (obj.get("stringData") or {}).values())
    return out
