"""Deciding "unchanged" without a request."""

from __future__ import annotations

import datetime

from orksync.apply.compare import HASH_ANNOTATION, fingerprint, is_subset, unchanged


def test_server_defaults_do_not_count_as_changes() -> None:
    desired = {"spec": {"ports": [{"port": 80}]}}
    live = {"spec": {"ports": [{"port": 80, "protocol": "TCP"}], "clusterIP": "10.0.0.3"}}
    assert is_subset(desired, live)


def test_a_changed_value_or_list_length_is_a_change() -> None:
    assert not is_subset({"a": [1, 2]}, {"a": [1]})
    assert not is_subset({"a": {"b": 1}}, {"a": {"b": 2}})
    assert not is_subset({"a": True}, {"a": 1})


def test_unchanged_needs_the_same_fingerprint_and_no_drift() -> None:
    body = {"metadata": {"name": "x", "annotations": {HASH_ANNOTATION: "h1"}}, "spec": {"a": 1}}
    assert unchanged(body, {**body, "status": {}})
    assert not unchanged(body, None)
    drifted = {"metadata": body["metadata"], "spec": {"a": 2}}
    assert not unchanged(body, drifted)
    other = {"metadata": {"name": "x", "annotations": {HASH_ANNOTATION: "h2"}}, "spec": {"a": 1}}
    assert not unchanged(body, other)


def test_the_fingerprint_ignores_key_order() -> None:
    assert fingerprint({"a": 1, "b": [1, {"c": 2, "d": 3}]}) == \
        fingerprint({"b": [1, {"d": 3, "c": 2}], "a": 1})


def test_the_fingerprint_of_a_body_does_not_change_between_versions() -> None:
    """The digest stamped on live objects by an earlier orksync must still match, or an
    upgrade re-applies every object (pinned: the value main 5373a25 computed; canonical
    JSON with sorted keys, non-ASCII escaped, other types through str())."""
    body = {"kind": "ConfigMap", "metadata": {"name": "é", "labels": {"b": "1", "a": "2"}},
            "data": {"t": datetime.date(2026, 11, 30), "n": 1.5, "z": None, "l": [True, "x"]}}
    assert fingerprint(body) == "1da7a93a0a1ea446ff51e99b93966dd9"
