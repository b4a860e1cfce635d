"""The `status` orksync owns on a custom resource, computed from the live custom resource,
its entry, this sync's changes and its children's health: conditions, `status.orksync`,
Orkestra's `status.fields[]`. Pure: lifecycle/status.py reads and writes it
(docs/operations.md#custom-resource-status)."""

from __future__ import annotations

import copy
import logging
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from orksync.durations import rfc3339
from orksync.katalog.model import CrdEntry
from orksync.model import Action, Change, ObjRef, RenderedObject
from orksync.render.cleanup import MET_AT, cleanup_block, conditions_met
from orksync.render.coercion import coerce_status
from orksync.render.conditions import evaluate_conditions
from orksync.render.gotemplate import GoTemplateError
from orksync.secrets.mask import scrub, secret_values
from orksync.status.health import HealthReport

__all__ = ["MAX_CONDITION_MESSAGE", "bounded", "child_secret_values", "conditions_enabled",
           "desired_status", "first_error", "health_conditions", "render_error_text",
           "status_data", "status_equal"]

log = logging.getLogger(__name__)

MAX_REFUSED = 20  # reasons kept in status.orksync.refused, each cut to 512 characters
MAX_REFUSED_MESSAGE = 512
MAX_CONDITION_MESSAGE = 1024
ELLIPSIS = "…"
OWN_CONDITIONS = ("Ready", "Reconciling", "Stalled")
_LIVE_ACTIONS = (Action.CREATED, Action.CONFIGURED, Action.UNCHANGED)


def first_error(changes: Sequence[Change], render_error: str | None) -> str | None:
    """The error text of a sync of one custom resource: the render error, else the first
    failed change (`<ref>: <message>`); None when everything succeeded."""
    if render_error:
        return render_error
    for change in changes:
        if change.action is Action.FAILED:
            return f"{change.ref}: {change.message}" if change.message else str(change.ref)
    return None


def bounded(text: str, limit: int = MAX_CONDITION_MESSAGE, suffix: str = "") -> str:
    """`text` + `suffix` in at most `limit` characters: `text` cut, ending in `…`, when
    they do not fit (the suffix is kept whole)."""
    room = limit - len(suffix)
    if len(text) > room:
        text = text[:max(room - len(ELLIPSIS), 0)] + ELLIPSIS
    return text + suffix


def render_error_text(errors: Sequence[Exception], secrets: Iterable[str] = ()) -> str:
    """The render failure of one custom resource as its status says it: the first real
    error (for an error that only stands for others, such as the custom resource's broken
    Katalog entry, its first cause), whole: `file:line object field: message`, scrubbed of
    `secrets`, cut to fit, then `(and N more)` when there are more."""
    real = [cause for err in errors
            for cause in (getattr(err, "causes", ()) or (err,))]
    suffix = f" (and {len(real) - 1} more)" if len(real) > 1 else ""
    return bounded(scrub(str(real[0]), secrets), suffix=suffix)


def child_secret_values(children: Iterable[RenderedObject]) -> list[str]:
    """Every secret value of the rendered Secrets, for scrubbing messages."""
    out: list[str] = []
    for obj in children:
        if obj.ref.kind == "Secret" and obj.ref.api_version == "v1":
            out.extend(secret_values(obj.body))
    return out


def desired_status(cr_live: Mapping[str, Any], entry: CrdEntry, templates: Any,
                   changes_for_cr: Sequence[Change], *, revision: str,
                   render_error: str | None, now: datetime,
                   children: Mapping[str, Any] | None = None,
                   cross: Mapping[str, Any] | None = None,
                   secrets: Iterable[str] = (),
                   refused: Sequence[str] = (),
                   health: HealthReport | None = None) -> dict[str, Any]:
    """The `status` orksync writes for one custom resource (see the module doc).

    `templates` is the Katalog's `Templates` (its `render` and `clock` are used);
    `children` is `read_children`'s map; `cross` the `.cross` map (`status_cross`);
    `secrets` are values to scrub from messages; `refused`: what the guard or the
    cluster-scope policy refused for this custom resource (`status.orksync.refused`);
    `health`: its children's health (orksync.status.health.evaluate), which decides the
    conditions of a sync without errors and is recorded in `status.orksync.health`."""
    meta = cr_live.get("metadata") or {}
    generation = meta.get("generation")
    raw_status = cr_live.get("status")
    live_status: Mapping[str, Any] = raw_status if isinstance(raw_status, Mapping) else {}
    cr_ref = ObjRef.of(cr_live)
    error = first_error(changes_for_cr, render_error)
    status: dict[str, Any] = {}

    # Orkestra's status.fields, on top of the live values of the declared paths.
    fields = ((entry.operator_box.get("status") or {}).get("fields")) or []
    data = status_data(cr_live, entry, children, cross)
    for spec in fields:
        if not isinstance(spec, Mapping):
            continue
        path = str(spec.get("path") or "").strip().lstrip(".")
        if not path:
            continue
        parts = path.split(".")
        if parts[0] in ("conditions", "observedGeneration", "orksync"):
            log.warning("%s: status field %s is reserved for orksync; ignored", cr_ref, path)
            continue
        current = _get(live_status, parts)
        if current is not _MISSING and _get(status, parts) is _MISSING:
            _set(status, parts, copy.deepcopy(current))
        when = spec.get("when")
        or_ = spec.get("or") if spec.get("or") is not None else spec.get("anyOf")
        if error and when is None and or_ is None:
            continue  # after an error only the conditional entries run (Orkestra)
        try:
            passed = evaluate_conditions(data, when, or_, templates.render,
                                         clock=templates.clock)
        except (GoTemplateError, ValueError, TypeError) as err:
            log.warning("%s: status field %s: condition error: %s", cr_ref, path, err)
            continue
        if not passed:
            if spec.get("clearOnFalse"):
                _delete(status, parts)
            continue
        raw = spec.get("value", "")
        try:
            text = templates.render(raw, data) if isinstance(raw, str) and "{{" in raw else raw
            value = coerce_status(text, str(spec.get("type") or "string"))
        except (GoTemplateError, ValueError, TypeError) as err:
            log.warning("%s: status field %s: %s", cr_ref, path, scrub(str(err), secrets))
            continue
        _set(status, parts, value)

    if conditions_enabled(entry):
        status.update(_conditions(live_status, generation, error, render_error, revision,
                                  now, secrets, health))

    raw_previous = live_status.get("orksync")
    previous: Mapping[str, Any] = raw_previous if isinstance(raw_previous, Mapping) else {}
    counts = Counter(c.action.value for c in changes_for_cr if c.ref != cr_ref)
    status["orksync"] = {
        "lastAppliedRevision": revision if not error else
        str(previous.get("lastAppliedRevision") or ""),
        "lastAttemptedRevision": revision,
        "inventory": sorted({str(c.ref) for c in changes_for_cr
                             if c.ref != cr_ref and c.action in _LIVE_ACTIONS}),
        "counts": dict(sorted(counts.items())),
    }
    if health is not None and not render_error:
        status["orksync"]["health"] = health.to_status(rfc3339)
    elif isinstance(previous.get("health"), Mapping):  # nothing rendered: nothing assessed
        status["orksync"]["health"] = copy.deepcopy(previous["health"])
    if refused:
        status["orksync"]["refused"] = [scrub(r, secrets)[:MAX_REFUSED_MESSAGE]
                                        for r in refused[:MAX_REFUSED]]
    block = cleanup_block(entry)
    if block is not None:  # runtime.cleanup's deleteAfter counts from the first time
        try:
            met = conditions_met(block, data, templates)
        except (GoTemplateError, ValueError, TypeError) as err:
            log.warning("%s: runtime.cleanup: condition error: %s", cr_ref, err)
            met = False
        if met:
            status["orksync"][MET_AT] = str(previous.get(MET_AT) or rfc3339(now))
    return status


def conditions_enabled(entry: CrdEntry) -> bool:
    """False when the entry's `status.conditions` is false: orksync then writes neither its
    conditions nor `status.observedGeneration` (Orkestra's StatusConfig.Conditions)."""
    block = entry.operator_box.get("status")
    return not (isinstance(block, Mapping) and block.get("conditions") is False)


def _conditions(live_status: Mapping[str, Any], generation: Any, error: str | None,
                render_error: str | None, revision: str, now: datetime,
                secrets: Iterable[str], health: HealthReport | None) -> dict[str, Any]:
    """The kstatus conditions (and `observedGeneration`) of `desired_status`."""
    status: dict[str, Any] = {}
    existing = {c.get("type"): c for c in live_status.get("conditions") or []
                if isinstance(c, Mapping)}
    if error:
        message = bounded(scrub(error, secrets))
        ready = ("False", "ReconcileError", message)
    else:
        ready = ("True", "ReconcileSucceeded",
                 f"applied revision {revision}" if revision else "applied")
    stalled = ("True", "RenderFailed", bounded(scrub(render_error, secrets))) \
        if render_error else ("False", "NotStalled", "")
    wanted = {"Ready": ready, "Reconciling": ("False", "ReconcileComplete", ""),
              "Stalled": stalled}
    if health is not None and not error:
        wanted.update(health_conditions(health, secrets))
    conditions = [c for t, c in existing.items() if t not in OWN_CONDITIONS]
    for ctype in OWN_CONDITIONS:
        value, reason, message = wanted[ctype]
        cond: dict[str, Any] = {"type": ctype, "status": value, "reason": reason,
                                "message": message}
        if generation is not None:
            cond["observedGeneration"] = generation
        prior = existing.get(ctype)
        cond["lastTransitionTime"] = prior["lastTransitionTime"] if (
            prior and prior.get("status") == value and prior.get("lastTransitionTime")) \
            else rfc3339(now)
        conditions.append(cond)
    status["conditions"] = conditions
    if generation is not None:
        status["observedGeneration"] = generation
    return status


def health_conditions(report: HealthReport, secrets: Iterable[str] = ()
                      ) -> dict[str, tuple[str, str, str]]:
    """The Ready, Reconciling and Stalled conditions (status, reason, message) of a sync
    without errors, from the custom resource's health: Ready only when every child is
    Current; Reconciling while one is in progress; Stalled when one failed or the health
    timeout passed. Empty when everything is Current (the sync's own conditions stand)."""
    message = bounded(scrub(report.health.message, secrets))
    if report.reason == "Current":
        return {}
    if report.reason == "Progressing":
        return {"Ready": ("False", "Progressing", message),
                "Reconciling": ("True", "Progressing", message),
                "Stalled": ("False", "NotStalled", "")}
    reason = "HealthTimeout" if report.reason == "HealthTimeout" else "HealthCheckFailed"
    return {"Ready": ("False", reason, message),
            "Reconciling": ("False", "ReconcileComplete", ""),
            "Stalled": ("True", reason, message)}


def status_data(cr_live: Mapping[str, Any], entry: CrdEntry,
                children: Mapping[str, Any] | None,
                cross: Mapping[str, Any] | None = None) -> dict[str, Any]:
    data = copy.deepcopy(dict(cr_live))
    data.setdefault("spec", {})
    data.setdefault("status", {})
    data.update({"inputs": {}, "cross": dict(cross or {}), "external": {},
                 "children": dict(children or {}),
                 "ork": {"katalog": entry.katalog, "crd": entry.key}})
    return data


_MISSING = object()


def _get(root: Mapping[str, Any], parts: list[str]) -> Any:
    node: Any = root
    for part in parts:
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _set(root: dict[str, Any], parts: list[str], value: Any) -> None:
    node = root
    for part in parts[:-1]:
        nxt = node.get(part)
        if not isinstance(nxt, dict):
            nxt = node[part] = {}
        node = nxt
    node[parts[-1]] = value


def _delete(root: dict[str, Any], parts: list[str]) -> None:
    """Remove a path and the maps it leaves empty."""
    trail: list[dict[str, Any]] = [root]
    node: Any = root
    for part in parts[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            return
        trail.append(node)
    node.pop(parts[-1], None)
    for depth in range(len(parts) - 2, -1, -1):
        if not trail[depth + 1]:
            trail[depth].pop(parts[depth], None)


def _without_transition_times(status: Any) -> Any:
    if not isinstance(status, Mapping):
        return status
    out = dict(status)
    if isinstance(out.get("conditions"), list):
        out["conditions"] = [{k: v for k, v in c.items() if k != "lastTransitionTime"}
                             if isinstance(c, Mapping) else c for c in out["conditions"]]
    return out


def status_equal(live: Any, desired: Any) -> bool:
    """Equal, ignoring the conditions' `lastTransitionTime`."""
    return bool(_without_transition_times(live or {}) == _without_transition_times(desired))


# --- I/O -------------------------------------------------------------------------------
