"""When a failed API request is sent again, and after how long. Pure (the randomness of
the jitter is passed in); the loop that uses it is `Kube.request_with_status`.

A request is sent again only when that cannot do harm: the server refused it before doing
anything (429, a connection never established), or its outcome is unknown and sending it
twice has the effect of sending it once. Every other refusal is a decision, never sent
again. Delays grow exponentially with jitter, or follow a `Retry-After`; attempts and time
are both bounded, so that a sync during a long outage fails in about `deadline` seconds
instead of once per object. The rules in full: docs/reliability.md, "The retry policy".
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

APPLY_PATCH = "application/apply-patch+yaml"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"

BUSY = 429
UNKNOWN_OUTCOME = frozenset({500, 502, 503, 504})
_IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How often and how long a failed request is retried (see the module docstring)."""

    attempts: int = 6  # tries per request, the first included
    backoff: float = 0.25  # the first delay; doubled for every further retry
    max_delay: float = 4.0  # cap on one backoff delay
    max_retry_after: float = 30.0  # a longer Retry-After is cut to this
    deadline: float = 60.0  # bound on retrying one request, and on an outage

    def delay(self, retry: int, retry_after: float | None,
              rng: random.Random | None = None) -> float:
        """Seconds to wait before retry number `retry` (1 for the first retry)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_retry_after)
        base = min(self.backoff * 2 ** (retry - 1), self.max_delay)
        return float(base / 2 + (rng or random).uniform(0, base / 2))


NO_RETRY = RetryPolicy(attempts=1)


def replay_safe(method: str, content_type: str, body: Any) -> bool:
    """Whether sending this request twice has the effect of sending it once."""
    method = method.upper()
    if method in _IDEMPOTENT:
        return True
    if method == "PATCH":
        if content_type in (APPLY_PATCH, MERGE_PATCH):
            return True
        return content_type == JSON_PATCH and isinstance(body, list) and any(
            isinstance(op, Mapping) and op.get("op") == "test" for op in body)
    if method == "POST":
        meta = body.get("metadata") if isinstance(body, Mapping) else None
        return isinstance(meta, Mapping) and bool(meta.get("name"))
    return False


def retryable_status(status: int, *, replayable: bool, body: bytes = b"") -> bool:
    """An answer that may succeed when sent again (429 always, 5xx only when replayable
    and not the API server's unclassified refusal of the request: see `unclassified`).
    `body`: the answer's body."""
    if status == BUSY:
        return True
    return status in UNKNOWN_OUTCOME and replayable and not unclassified(status, body)


def unclassified(status: int, body: bytes) -> bool:
    """Whether an answer is a Kubernetes Status with code 500 and no reason: what the API
    server answers for an error of the request that is not a Status of its own (the same
    error at every repeat), unlike its `InternalError`s (storage, webhooks: transient)."""
    if status != 500 or not body.startswith(b"{"):
        return False
    try:
        doc = json.loads(body)
    except ValueError:
        return False
    return isinstance(doc, dict) and doc.get("kind") == "Status" and \
        doc.get("code") == 500 and not doc.get("reason")


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date); None if absent
    or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    from email.utils import parsedate_to_datetime  # rare: not worth its import at start-up

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - (now or datetime.now(UTC))).total_seconds(), 0.0)
