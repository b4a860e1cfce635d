"""Deciding, without a request, whether a live object already matches what we would apply.

Pure. An object is unchanged when the fingerprint we stamped on our last apply equals the
fingerprint of the desired body (nothing changed in Git) and every field we set is still
there with the value we set (nobody edited it since): the desired body is a subset of the
live one. When in doubt the answer is "changed", which costs one server-side apply that the
API server turns into a no-op.

A dry run's outcome is decided here too (`dry_run_unchanged`): from its answer, which
carries no new resourceVersion to go by.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
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


def dry_run_unchanged(answer: Mapping[str, Any] | None, live: Mapping[str, Any] | None,
                      reread: Callable[[], Mapping[str, Any] | None]) -> bool:
    """Whether the write a server-side dry run answered with `answer` would leave the
    object as it is, so that the real write is a no-op (`unchanged`).

    A dry run answers with the object as the write would leave it, under the live
    object's resourceVersion whether or not anything changed: comparing resourceVersions
    (what a real write's answer is judged by) says "unchanged" for every dry run. The
    API server writes nothing when a write changes no byte of the object (server-side
    apply keeps a manager's managedFields timestamp when its fields did not change), so
    the real write is a no-op exactly when the dry run's answer equals the live object it
    was applied to, managedFields included. `live` is the object as the apply listed it;
    when its resourceVersion is not the answer's (changed since), `reread()` gives it as
    it is now, and one that moved again is taken as changed. `answer` must be the whole
    object (not a metadata-only answer): a ConfigMap's data has no generation."""
    if answer is None or live is None:
        return False
    version = _version(answer)
    if _version(live) != version:
        live = reread()
        if live is None or _version(live) != version:
            return False
    return _content(answer) == _content(live)


def _version(obj: Mapping[str, Any]) -> Any:
    return (obj.get("metadata") or {}).get("resourceVersion")


def _content(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The object less apiVersion and kind (a LIST's items of built-in kinds carry
    neither; the API server's answer both)."""
    return {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
