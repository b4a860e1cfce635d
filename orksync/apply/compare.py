"""Deciding, without a request, whether a live object already matches what we would apply.

Pure. An object is unchanged when the fingerprint we stamped on our last apply equals the
fingerprint of the desired body (nothing changed in Git) and every field we set is still
there with the value we set (nobody edited it since): the desired body is a subset of the
live one. When in doubt the answer is "changed", which costs one server-side apply that the
API server turns into a no-op.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

HASH_ANNOTATION = "orksync.io/hash"


# what json.dumps(body, sort_keys=True, separators=(",", ":"), default=str) builds on every
# call, built once (an encoder keeps no state between calls)
_canonical = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str).encode


def fingerprint(body: Mapping[str, Any]) -> str:
    """A stable digest of a desired body (key order does not matter)."""
    return hashlib.sha256(_canonical(body).encode("utf-8")).hexdigest()[:32]


def is_subset(desired: Any, live: Any) -> bool:
    """True when every field of `desired` is present in `live` with an equal value.
    Lists must have the same length; their elements are compared pairwise.

    A mapping's fields in a loop rather than `all()` over a generator, and its string
    leaves (most of a manifest) decided in place: a resync compares every field of every
    object."""
    kind = type(desired)
    if kind is str:  # the common leaf: `==` decides (a str never equals a bool)
        return bool(desired == live)
    if kind is dict or isinstance(desired, Mapping):
        if type(live) is not dict and not isinstance(live, Mapping):
            return False
        for key, value in desired.items():
            if key not in live:
                return False
            if type(value) is str:
                if value != live[key]:
                    return False
            elif not is_subset(value, live[key]):
                return False
        return True
    if isinstance(desired, list):
        if not isinstance(live, list) or len(desired) != len(live):
            return False
        return all(is_subset(d, v) for d, v in zip(desired, live, strict=True))
    if isinstance(desired, bool) or isinstance(live, bool):
        return desired is live
    return bool(desired == live)


def unchanged(desired: Mapping[str, Any], live: Mapping[str, Any] | None) -> bool:
    if live is None:
        return False
    stamped = ((live.get("metadata") or {}).get("annotations") or {}).get(HASH_ANNOTATION)
    want = ((desired.get("metadata") or {}).get("annotations") or {}).get(HASH_ANNOTATION)
    return stamped is not None and stamped == want and is_subset(desired, live)
