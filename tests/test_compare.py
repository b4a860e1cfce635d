"""Deciding "unchanged" without a request."""

from __future__ import annotations

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
