"""Workload `autoscale:` pure logic: the render (conditions evaluated into the directive,
`spec.replicas` left out), the builder's validation, the replica decision and the merge of
its changes into the apply's. The writes are tested in tests/render/test_live_cluster.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from orksync.katalog.loader import load_repository
from orksync.lifecycle.autoscale import FIELD_MANAGER, decide, merge_changes, owns_replicas
from orksync.model import Action, Change, ChangeSet, ObjRef
from orksync.render.builders import BuildError, Built
from orksync.render.builders.workloads import autoscale_directive
from orksync.render.engine import render_catalog
from tests.helpers import CRD, widget, write_repo

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
SPEC = {"replicas": 2, "min": 2, "max": 5, "cooldownSeconds": 60,
        "scaleUp": {"active": True, "increment": 2},
        "scaleDown": {"active": False, "decrement": 1}}


def spec(**changes: Any) -> dict[str, Any]:
    return {**SPEC, **changes}


# --- the decision ---------------------------------------------------------------------------


@pytest.mark.parametrize(("current", "expected", "scaled"), [
    (2, 4, True),  # +increment
    (4, 5, True),  # capped at max
    (5, 5, False),  # at max: nothing
])
def test_scale_up_adds_the_increment_within_max(current: int, expected: int,
                                                 scaled: bool) -> None:
    d = decide(SPEC, current, owned=True, last_scale=None, now=NOW)
    assert (d.replicas, d.scaled) == (expected, scaled)


def test_scale_down_removes_the_decrement_down_to_min() -> None:
    down = spec(scaleUp={"active": False, "increment": 1},
                scaleDown={"active": True, "decrement": 2})
    assert decide(down, 5, owned=True, last_scale=None, now=NOW).replicas == 3
    assert decide(down, 3, owned=True, last_scale=None, now=NOW).replicas == 2  # floor
    assert not decide(down, 2, owned=True, last_scale=None, now=NOW).scaled


def test_targets_jump_but_never_move_the_wrong_way() -> None:
    jump = spec(scaleUp={"active": True, "target": 4})
    assert decide(jump, 2, owned=True, last_scale=None, now=NOW).replicas == 4
    assert decide(spec(scaleUp={"active": True, "target": 9}), 2, owned=True,
                  last_scale=None, now=NOW).replicas == 5  # capped at max
    # a scale-up target below the count does not lower it (Orkestra would)
    lower = decide(spec(max=8, scaleUp={"active": True, "target": 4}), 5, owned=True,
                   last_scale=None, now=NOW)
    assert (lower.replicas, lower.scaled) == (5, False)
    down = spec(scaleUp={"active": False}, scaleDown={"active": True, "target": 3})
    assert decide(down, 5, owned=True, last_scale=None, now=NOW).replicas == 3


def test_scale_up_wins_when_both_directions_are_active() -> None:
    both = spec(scaleDown={"active": True, "decrement": 1})
    assert decide(both, 3, owned=True, last_scale=None, now=NOW).replicas == 5


def test_the_cooldown_holds_scale_events_but_not_the_bounds() -> None:
    recent = NOW - timedelta(seconds=30)
    held = decide(SPEC, 2, owned=True, last_scale=recent, now=NOW)
    assert (held.replicas, held.scaled, held.reason) == (2, False, "cooling down")
    later = decide(SPEC, 2, owned=True, last_scale=NOW - timedelta(seconds=61), now=NOW)
    assert (later.replicas, later.scaled) == (4, True)
    # bounds changed in Git: enforced at once, in cooldown or not, and not a scale event
    clamped = decide(spec(max=3), 5, owned=True, last_scale=recent, now=NOW)
    assert (clamped.replicas, clamped.scaled) == (3, False)


def test_taking_a_count_over_keeps_it_within_the_bounds_and_is_not_a_scale() -> None:
    took = decide(SPEC, 3, owned=False, last_scale=None, now=NOW)
    assert (took.replicas, took.scaled) == (3, False)  # not scaled up on the first sync
    assert decide(SPEC, 1, owned=False, last_scale=None, now=NOW).replicas == 2
    assert decide(SPEC, 9, owned=False, last_scale=None, now=NOW).replicas == 5


def test_owns_replicas_reads_the_autoscalers_managed_fields_entry() -> None:
    def live(manager: str, operation: str = "Apply") -> dict[str, Any]:
        return {"metadata": {"managedFields": [{
            "manager": manager, "operation": operation,
            "fieldsV1": {"f:spec": {"f:replicas": {}}}}]}}
    assert owns_replicas(live(FIELD_MANAGER))
    assert not owns_replicas(live("orksync"))
    assert not owns_replicas(live(FIELD_MANAGER, "Update"))
    assert not owns_replicas({"metadata": {}})


# --- the directive --------------------------------------------------------------------------


def test_the_directive_has_defaults_and_keeps_the_entrys_count() -> None:
    out = autoscale_directive({"max": "6", "scaleUp": {"active": True}}, 3)
    assert out == {"replicas": 3, "min": 3, "max": 6, "cooldownSeconds": 60,
                   "scaleUp": {"active": True, "increment": 1}}
    out = autoscale_directive({"max": 4, "min": "1", "cooldown": "1m30s",
                               "scaleDown": {"active": False, "target": "1"}}, 9)
    assert out is not None
    assert (out["min"], out["cooldownSeconds"], out["scaleDown"]) == \
        (1, 90, {"active": False, "target": 1})
    assert autoscale_directive({"max": 2}, 7)["min"] == 2  # type: ignore[index]
    assert autoscale_directive(None, 1) is None


@pytest.mark.parametrize(("raw", "field", "message"), [
    ({"min": 1}, "autoscale.max", "is required"),
    ({"max": "lots"}, "autoscale.max", "whole number"),
    ({"max": 0}, "autoscale.max", "at least 1"),
    ({"max": 3, "min": 3}, "autoscale.min", r"must be below max \(3\), got 3"),
    ({"max": 3, "cooldown": "soon"}, "autoscale.cooldown", "invalid duration"),
    ({"max": 3, "scaleUp": {"target": 2, "increment": 1}}, "autoscale.scaleUp",
     "cannot both be set"),
    ({"max": 3, "scaleDown": {"decrement": 0}}, "autoscale.scaleDown.decrement",
     "at least 1"),
    ("fast", "autoscale", "map"),
])
def test_a_bad_autoscale_names_its_field(raw: Any, field: str, message: str) -> None:
    with pytest.raises(BuildError, match=message) as err:
        autoscale_directive(raw, 1)
    assert err.value.field == field


AUTOSCALED = """
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: widgets}
spec:
  crds:
    widget:
      crdFile: ./crd.yaml
      operatorBox:
        onReconcile:
          deployments:
            - name: "{{ .metadata.name }}"
              image: nginx
              replicas: "{{ .spec.replicas }}"
              autoscale:
                max: "{{ .spec.max }}"
                scaleUp:
                  conditions:
                    when:
                      - field: spec.load
                        equals: high
                  increment: 2
                scaleDown:
                  conditions:
                    or:
                      - field: "{{ .spec.load }}"
                        equals: low
                      - field: children.deployment.status.readyReplicas
                        greaterThan: "100"
          statefulSets:
            - name: "{{ .metadata.name }}-db"
              image: postgres
              autoscale: {max: 3}
"""


def test_the_render_evaluates_the_conditions_and_leaves_replicas_to_the_autoscaler(
        tmp_path: Path) -> None:
    write_repo(tmp_path, {"katalog.yaml": AUTOSCALED, "crd.yaml": CRD,
                          "a.yaml": widget("a", replicas=2, max=6, load="high"),
                          "b.yaml": widget("b", replicas=2, max=6, load="low")})
    rendered = render_catalog(load_repository(tmp_path))
    assert rendered.ok, rendered.errors
    assert not [w for w in rendered.warnings if "autoscale" in w]  # a known field now
    objs = {o.ref.name: o for o in rendered.objects}
    a, b = objs["a"], objs["b"]
    assert "replicas" not in a.body["spec"] and "replicas" not in objs["a-db"].body["spec"]
    assert a.directives["autoscale"] == {
        "replicas": 2, "min": 2, "max": 6, "cooldownSeconds": 60,
        "scaleUp": {"active": True, "increment": 2},
        "scaleDown": {"active": False, "decrement": 1}}
    assert b.directives["autoscale"]["scaleUp"]["active"] is False
    assert b.directives["autoscale"]["scaleDown"]["active"] is True  # `or:`, templated field
    assert objs["a-db"].directives["autoscale"]["min"] == 1


def test_a_bad_autoscale_is_a_render_error_naming_the_field(tmp_path: Path) -> None:
    write_repo(tmp_path, {"katalog.yaml": AUTOSCALED, "crd.yaml": CRD,
                          "a.yaml": widget("a", replicas=2, max="many", load="high")})
    rendered = render_catalog(load_repository(tmp_path))
    (error,) = rendered.errors
    assert "onReconcile.deployments[0].autoscale.max" in str(error)
    assert "must be a whole number, got 'many'" in str(error)


def test_a_workload_without_autoscale_keeps_its_replicas_and_no_directive() -> None:
    from orksync.render.builders import BuildContext
    from orksync.render.builders.workloads import build_deployment

    ctx = BuildContext(cr_name="a", cr_namespace="n", owner_key="a", name="a", namespace="n",
                       labels={})
    body = build_deployment({"image": "x", "replicas": "3"}, ctx)
    assert isinstance(body, dict) and body["spec"]["replicas"] == 3
    scaled = build_deployment({"image": "x", "replicas": "3", "autoscale": {"max": 4}}, ctx)
    assert isinstance(scaled, Built) and "replicas" not in scaled.body["spec"]


# --- changes --------------------------------------------------------------------------------


def test_a_scale_folds_into_the_apply_change_of_the_same_object() -> None:
    def ref(name: str) -> ObjRef:
        return ObjRef(api_version="apps/v1", kind="Deployment", namespace="n", name=name)
    applied = ChangeSet(changes=[Change(ref=ref("a"), action=Action.UNCHANGED),
                                 Change(ref=ref("b"), action=Action.CREATED),
                                 Change(ref=ref("c"), action=Action.UNCHANGED)])
    merged = merge_changes(applied, [
        Change(ref=ref("a"), action=Action.CONFIGURED, message="autoscale: replicas 2 -> 4"),
        Change(ref=ref("b"), action=Action.CONFIGURED, message="autoscale: replicas 1 -> 3"),
        Change(ref=ref("c"), action=Action.FAILED, message="autoscale: 409 Conflict")])
    assert [(c.ref.name, c.action, c.message) for c in merged.changes] == [
        ("a", Action.CONFIGURED, "autoscale: replicas 2 -> 4"),
        ("b", Action.CREATED, "autoscale: replicas 1 -> 3"),
        ("c", Action.FAILED, "autoscale: 409 Conflict")]
