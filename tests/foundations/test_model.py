"""orksync.model: the change set's summary and counts."""

from __future__ import annotations

from orksync.model import Action, ChangeSet, ObjRef


def test_the_summary_counts_every_action_and_waiting_only_when_an_object_waits() -> None:
    ref = ObjRef(api_version="v1", kind="ConfigMap", namespace="ns", name="c")
    changes = ChangeSet()
    changes.add(ref, Action.CREATED)
    assert changes.summary() == \
        "created=1 configured=0 unchanged=0 skipped=0 deleted=0 failed=0"
    changes.add(ref, Action.WAITING, "being deleted (finalizers: x)")
    assert changes.summary() == \
        "created=1 configured=0 unchanged=0 skipped=0 waiting=1 deleted=0 failed=0"
