"""The Sync object's spec checks and status (orksync.agent.syncs), without a cluster."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from orksync.agent import syncs
from orksync.errors import InputError


def sync(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": syncs.API_VERSION, "kind": "Sync",
            "metadata": {"name": "a", "namespace": "team", "generation": 3},
            "spec": {"url": "https://git.example.com/a.git", **spec}}


def test_a_full_spec_is_read() -> None:
    spec = syncs.parse_spec(sync(ref={"tag": "v1.2.0"}, path="clusters/prod/",
                                 interval="30s", resyncInterval="5m", timeout="2m",
                                 prune=False, suspend=True, serviceAccountName="deployer",
                                 secretRef={"name": "git"},
                                 verify={"provider": "ssh", "secretRef": {"name": "signers"}},
                                 webhook={"secretRef": {"name": "hook"}}))
    assert (spec.ref, spec.path, spec.interval, spec.resync_interval, spec.timeout) == \
        ("refs/tags/v1.2.0", "clusters/prod", 30.0, 300.0, 120.0)
    assert (spec.prune, spec.suspend, spec.service_account, spec.secret) == \
        (False, True, "deployer", "git")
    assert (spec.verify_provider, spec.verify_secret, spec.webhook_secret) == \
        ("ssh", "signers", "hook")
    assert spec.inventory_name == "team.a"
    defaults = syncs.parse_spec(sync())
    assert (defaults.ref, defaults.interval, defaults.prune, defaults.suspend) == \
        ("main", 60.0, True, False)


@pytest.mark.parametrize(("spec", "field"), [
    ({"secretRef": {"name": "git", "namespace": "other"}}, "spec.secretRef.namespace"),
    ({"secretRef": {"name": "other/git"}}, "spec.secretRef.name"),
    ({"webhook": {"secretRef": {"name": "h", "namespace": "x"}}},
     "spec.webhook.secretRef.namespace"),
    ({"serviceAccountName": "other/sa"}, "spec.serviceAccountName"),
    ({"interval": "soon"}, "spec.interval"),
    ({"timeout": "0s"}, "spec.timeout"),
    ({"ref": {"branch": "main", "tag": "v1"}}, "spec.ref"),
    ({"ref": {"commit": "abc123"}}, "spec.ref.commit"),
    ({"ref": {"semver": ">=1.0.0 <<2"}}, "spec.ref.semver"),
    ({"url": "file:///etc"}, "spec.url"),
    ({"path": "../x"}, "spec.path"),
    ({"prune": "yes"}, "spec.prune"),
    ({"shards": 0}, "spec.shards"),
    ({"shards": 65}, "spec.shards"),
    ({"shards": True}, "spec.shards"),
])
def test_an_unusable_spec_is_an_error_naming_the_sync_and_the_field(
        spec: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as caught:
        syncs.parse_spec(sync(**spec))
    assert caught.value.path == field
    assert "Sync/team/a" in str(caught.value)


def test_file_urls_only_when_allowed() -> None:
    assert syncs.parse_spec(sync(url="file:///srv/repo"), allow_file_urls=True).url == \
        "file:///srv/repo"


def outcome(sha: str, ok: bool = True, **kw: Any) -> syncs.Outcome:
    return syncs.Outcome(ready="True" if ok else "False",
                         reason=syncs.SUCCEEDED if ok else syncs.FAILED,
                         message="applied" if ok else "a.yaml:3: bad", attempted=sha,
                         applied=sha if ok else "", new_revision=True,
                         counts={"created": 1}, objects=4, **kw)


def test_the_status_keeps_the_last_ten_new_revisions_newest_first() -> None:
    obj = sync()
    now = datetime(2026, 1, 1, tzinfo=UTC)
    for i in range(12):
        obj["status"] = syncs.status_of(obj, outcome(f"{i:040x}"), inventory="inv",
                                        now=now + timedelta(minutes=i))
    history = obj["status"]["history"]
    assert [h["revision"] for h in history] == [f"{i:040x}" for i in range(11, 1, -1)]
    assert history[0]["counts"] == {"created": 1} and history[0]["result"] == "succeeded"
    assert obj["status"]["inventory"] == {"name": "inv", "objects": 4}
    assert obj["status"]["observedGeneration"] == 3


def test_a_failure_keeps_the_applied_revision_and_a_retry_of_it_replaces_its_entry() -> None:
    obj = sync()
    obj["status"] = syncs.status_of(obj, outcome("a" * 40), inventory="i")
    obj["status"] = syncs.status_of(obj, outcome("b" * 40, ok=False), inventory="i")
    status = obj["status"]
    assert status["lastAppliedRevision"] == "a" * 40
    assert status["lastAttemptedRevision"] == "b" * 40
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Ready"]["status"] == "False"
    assert conditions["Ready"]["message"] == "a.yaml:3: bad"
    assert conditions["Stalled"]["status"] == "False"  # retried: not stalled
    obj["status"] = syncs.status_of(obj, outcome("b" * 40), inventory="i")
    assert [(h["revision"], h["result"]) for h in obj["status"]["history"]] == \
        [("b" * 40, "succeeded"), ("a" * 40, "succeeded")]


def test_an_invalid_spec_is_stalled_and_an_unchanged_status_is_not_written_again() -> None:
    obj = sync()
    stalled = syncs.Outcome(ready="False", reason=syncs.INVALID, message="spec.url: bad")
    obj["status"] = syncs.status_of(obj, stalled, inventory="i",
                                    now=datetime(2026, 1, 1, tzinfo=UTC))
    conditions = {c["type"]: c["status"] for c in obj["status"]["conditions"]}
    assert conditions == {"Ready": "False", "Reconciling": "False", "Stalled": "True"}
    again = syncs.status_of(obj, stalled, inventory="i", now=datetime(2026, 1, 2, tzinfo=UTC))
    assert syncs.same_status(obj["status"], again)
    assert again["conditions"][0]["lastTransitionTime"] == "2026-01-01T00:00:00Z"


def test_the_status_rows_of_the_syncs() -> None:
    obj = sync()
    obj["status"] = syncs.status_of(obj, outcome("c" * 40), inventory="i",
                                    now=datetime(2026, 1, 1, tzinfo=UTC))
    [row] = syncs.sync_rows([obj])
    assert row == {"sync": "team/a", "url": "https://git.example.com/a.git",
                   "revision": "c" * 12, "ready": "True",
                   "lastSync": "2026-01-01T00:00:00Z", "message": "applied"}


@pytest.mark.parametrize("text", ["a", "/a", "a/", "a/b/c"])
def test_a_sync_is_named_namespace_slash_name(text: str) -> None:
    from orksync.agent.verbs import _target
    from orksync.errors import UsageError

    with pytest.raises(UsageError):
        _target(text)


def test_a_semver_range_is_read_and_replaces_the_ref() -> None:
    spec = syncs.parse_spec(sync(ref={"semver": ">=1.0.0, <2.0.0"}))
    assert spec.semver == ">=1.0.0, <2.0.0" and spec.wanted == "semver >=1.0.0, <2.0.0"


def test_a_sync_of_several_shards_has_a_key_and_an_inventory_per_shard() -> None:
    one, four = syncs.parse_spec(sync()), syncs.parse_spec(sync(shards=4))
    assert (one.unit_key(0), one.unit_inventory(0)) == ("team/a", "team.a")
    assert [four.unit_key(i) for i in range(4)] == [f"team/a#{i}" for i in range(4)]
    assert four.unit_inventory(3) == "team.a.3-of-4"
    assert syncs.sync_key_of("team/a#3") == syncs.sync_key_of("team/a") == "team/a"
    assert one.source_fingerprint() != four.source_fingerprint()


def entry(ready: str, revision: str = "abc", message: str = "m", objects: int = 2
          ) -> dict[str, Any]:
    return {"ready": ready, "reason": syncs.FAILED if ready == "False" else syncs.SUCCEEDED,
            "message": message, "servedBy": "r2", "lastAppliedRevision": revision,
            "objects": objects}


def test_a_sync_of_several_shards_is_ready_when_every_shard_applied_shard_0_s_revision(
        ) -> None:
    own = syncs.Outcome(ready="True", reason=syncs.SUCCEEDED, message="applied abc",
                        attempted="abc", applied="abc", objects=3)
    ready = syncs.aggregate(own, {"1": entry("True"), "2": entry("True")}, 3)
    assert (ready.ready, ready.objects, ready.message) == ("True", 7, "applied abc (3 shards)")
    behind = syncs.aggregate(own, {"1": entry("True", revision="old")}, 3)
    assert behind.ready == "Unknown" and "shard(s) 1, 2 of 3 not there yet" in behind.message
    failed = syncs.aggregate(own, {"1": entry("True"), "2": entry("False", message="boom")}, 3)
    assert (failed.ready, failed.reason) == ("False", syncs.FAILED)
    assert failed.message == "shard 2 (served by r2): boom"
    own_failed = dataclasses.replace(own, ready="False", reason=syncs.FAILED, message="mine")
    assert syncs.aggregate(own_failed, {"1": entry("True"), "2": entry("True")}, 3
                           ).message == "mine"
    # shards beyond the count (a stale entry) are not read
    assert syncs.aggregate(own, {"1": entry("True"), "5": entry("False")}, 2).ready == "True"


def test_the_status_overview_maps_every_shard_s_inventory_to_its_sync() -> None:
    from orksync.agent.verbs import sync_overview

    class Kube:
        def resource(self, *_: Any) -> str:
            return "syncs"

        def list(self, _: Any) -> list[dict[str, Any]]:
            return [sync(shards=2), {**sync(), "metadata": {"name": "b", "namespace": "team"}}]

    _, labels, _ = sync_overview(Kube())  # type: ignore[arg-type]
    assert labels == {"team.a.0-of-2": "team/a", "team.a.1-of-2": "team/a",
                      "team.b": "team/b"}


def test_the_web_view_shows_each_shard_of_a_sync_with_its_own_state() -> None:
    from orksync.agent.roots import ui_status

    obj = sync(shards=2)
    obj["status"] = {"lastAppliedRevision": "abc", "conditions": [
        {"type": "Ready", "status": "False", "message": "shard 1 (served by r2): boom"}],
        "shards": {"0": entry("True", revision="abc"), "1": entry("False", message="boom")}}
    spec = syncs.parse_spec(obj)
    zero, one = ui_status(spec, obj, 0), ui_status(spec, obj, 1)
    assert (zero.name, zero.ready, zero.revision) == ("team.a.0-of-2", True, "abc")
    assert (one.name, one.ready, one.message) == ("team.a.1-of-2", False, "boom")
    assert one.source.endswith("(shard 1 of 2)") and one.object_name == "a"
