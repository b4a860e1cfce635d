"""orksync.cluster.retry, the pure part of the retry path: which requests may be sent again,
how long to wait, how Retry-After is read. The loop itself is tested against the real
control plane through fault proxies (tests/sync/test_faults_cluster.py)."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from orksync.cluster.retry import (
    APPLY_PATCH,
    JSON_PATCH,
    MERGE_PATCH,
    RetryPolicy,
    parse_retry_after,
    replay_safe,
    retryable_status,
    unclassified,
)


@pytest.mark.parametrize(("method", "content_type", "body", "safe"), [
    ("GET", "application/json", None, True),
    ("DELETE", "application/json", {"kind": "DeleteOptions"}, True),
    ("PUT", "application/json", {"metadata": {"resourceVersion": "7"}}, True),
    ("PATCH", APPLY_PATCH, {"metadata": {"name": "x"}}, True),
    ("PATCH", MERGE_PATCH, {"metadata": {"labels": {"a": "b"}}}, True),
    ("PATCH", JSON_PATCH, [{"op": "add", "path": "/metadata/finalizers/-", "value": "f"}],
     False),
    ("PATCH", JSON_PATCH, [{"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
                           {"op": "add", "path": "/metadata/finalizers", "value": ["f"]}],
     True),
    ("PATCH", "application/strategic-merge-patch+json", {}, False),
    ("POST", "application/json", {"metadata": {"name": "job-1"}}, True),
    ("POST", "application/json", {"metadata": {"generateName": "job-"}}, False),
    ("POST", "application/json", None, False),
])
def test_only_requests_whose_repeat_does_no_harm_are_replayable(
        method: str, content_type: str, body: object, safe: bool) -> None:
    assert replay_safe(method, content_type, body) is safe


def test_429_is_always_retryable_and_5xx_only_when_replayable() -> None:
    assert retryable_status(429, replayable=False)
    assert all(retryable_status(s, replayable=True) for s in (500, 502, 503, 504))
    assert not any(retryable_status(s, replayable=False) for s in (500, 502, 503, 504))
    assert not any(retryable_status(s, replayable=True) for s in (400, 404, 409, 422, 501))


def test_the_api_servers_unclassified_500_is_a_refusal_not_an_unknown_outcome() -> None:
    typed = (b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
             b'"message":"failed to create typed patch object (x): .spec.colour: field not '
             b'declared in schema","code":500}')
    internal = (b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
                b'"message":"etcdserver: request timed out","reason":"InternalError",'
                b'"code":500}')
    assert unclassified(500, typed)
    assert not retryable_status(500, replayable=True, body=typed)
    for status, body in ((500, internal), (500, b""), (500, b"<html>bad gateway</html>"),
                         (500, b"{not json"), (503, typed.replace(b"500", b"503"))):
        assert not unclassified(status, body)
        assert retryable_status(status, replayable=True, body=body)


def test_backoff_doubles_with_jitter_up_to_the_cap_and_retry_after_wins() -> None:
    policy = RetryPolicy(backoff=0.25, max_delay=4.0, max_retry_after=30.0)
    rng = random.Random(1)
    for retry, base in ((1, 0.25), (2, 0.5), (3, 1.0), (4, 2.0), (5, 4.0), (9, 4.0)):
        delays = [policy.delay(retry, None, rng) for _ in range(50)]
        assert all(base / 2 <= d <= base for d in delays), (retry, delays)
        assert len(set(delays)) > 1, "jittered"
    assert policy.delay(1, 7.0, rng) == 7.0
    assert policy.delay(1, 120.0, rng) == 30.0
    assert policy.delay(1, -3.0, rng) == 0.0


def test_retry_after_is_read_as_seconds_or_an_http_date() -> None:
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after("3", now) == 3.0
    assert parse_retry_after(" 10 ", now) == 10.0
    assert parse_retry_after("Wed, 01 Jan 2025 12:00:05 GMT", now) == 5.0
    assert parse_retry_after("Wed, 01 Jan 2025 11:00:00 GMT", now) == 0.0
    assert parse_retry_after("soon", now) is None
    assert parse_retry_after("", now) is None
    assert parse_retry_after(None, now) is None
