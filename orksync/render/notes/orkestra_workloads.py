"""Orkestra's notes that inspect child objects, ported from its pkg/note with their Go
signatures: pods, jobs, events, PVCs, ingresses, HPAs, nodes, ReplicaSets, StatefulSets
(with Orkestra's enriched keys `_pods`, `_warnings`, `_pv`, `_owner`, `_replicaSets`,
`_pvcs`), the serve annotations and the Prometheus notes. Pure; a value that is not the
object a note expects answers "", 0 or false, as Orkestra's do."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from orksync.render.gotemplate.gotypes import GoInt
from orksync.render.notes.gocore import int64_of, parse_float, sprint_v, to_int64
from orksync.render.notes.gosig import GoNote, registrar
from orksync.render.notes.orkestra_kube import (
    get,
    list_of,
    map_of,
    spec,
    status,
    status_int,
    text_of,
)

NOTES: list[GoNote] = []
note = registrar(NOTES)


# ── pods (Orkestra's enriched `_pods`) ──────────────────────────────────────────────
def _enriched(obj: Any, key: str) -> list[Any]:
    m = map_of(obj)
    return (list_of(m.get(key)) or []) if m is not None else []


def _pods(obj: Any) -> list[Any]:
    return _enriched(obj, "_pods")


def _join_pod_field(obj: Any, field: str) -> str:
    return ", ".join(text_of(p.get(field)) for p in _pods(obj)
                     if map_of(p) is not None and text_of(p.get(field)) != "")


for _name, _field in (("podNames", "name"), ("podIPs", "ip"), ("podPhases", "phase"),
                      ("podNodes", "node")):
    note(_name, "a->s")(lambda o, f=_field: _join_pod_field(o, f))
note("podCount", "a->i")(lambda o: len(_pods(o)))
note("readyPodCount", "a->i")(
    lambda o: sum(1 for p in _pods(o) if map_of(p) is not None and p.get("ready") is True))


def _restart_value(value: Any) -> int | float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return value
    return None


@note("podMaxRestarts", "a->I")
def pod_max_restarts(obj: Any) -> int:
    """The largest restartCount of the pods."""
    best = 0
    for p in _pods(obj):
        pm = map_of(p)
        if pm is None:
            continue
        r = _restart_value(pm.get("restartCount"))
        v = 0 if r is None else (int64_of(r) if isinstance(r, float) else int(r))
        best = max(best, v)
    return best


def _has_reason(pods: list[Any], reason: str) -> bool:
    for p in pods:
        pm = map_of(p)
        if pm is None:
            continue
        for c in list_of(pm.get("containers")) or []:
            cm = map_of(c)
            if cm is not None and text_of(cm.get("reason")) == reason and \
                    isinstance(cm.get("reason"), str):
                return True
    return False


_CRASH_REASONS = ("CrashLoopBackOff", "OOMKilled", "Error", "ImagePullBackOff", "ErrImagePull",
                  "InvalidImageName", "RunContainerError", "CreateContainerError",
                  "PreStartHookError", "PostStartHookError")


@note("hasCrashingPod", "a->b")
def has_crashing_pod(obj: Any) -> bool:
    """A container in a crash reason, or a pod restarted more than twice."""
    pods = _pods(obj)
    if any(_has_reason(pods, r) for r in _CRASH_REASONS):
        return True
    for p in pods:
        pm = map_of(p)
        if pm is None:
            continue
        r = _restart_value(pm.get("restartCount"))
        if r is not None and r > 2:
            return True
    return False


def _ordinal(value: Any) -> int:
    r = _restart_value(value)
    if r is None:
        return 0
    return int64_of(r) if isinstance(r, float) else int(r)


def pod_by_ordinal(obj: Any, ordinal: int) -> Any:
    for p in _pods(obj):
        pm = map_of(p)
        if pm is not None and _ordinal(pm.get("ordinal")) == ordinal:
            return pm
    return None


note("podByOrdinal", "a,I->a")(pod_by_ordinal)


@note("podContainerReasons", "a->s")
def pod_container_reasons(obj: Any) -> str:
    """The distinct container reasons of the pods, in order."""
    seen: list[str] = []
    for p in _pods(obj):
        pm = map_of(p)
        if pm is None:
            continue
        for c in list_of(pm.get("containers")) or []:
            cm = map_of(c)
            r = text_of(cm.get("reason")) if cm is not None else ""
            if r and r not in seen:
                seen.append(r)
    return ", ".join(seen)


@note("podContainerState", "a,I,s->s")
def pod_container_state(obj: Any, ordinal: int, name: str) -> str:
    """The state of the named container of the pod with that ordinal."""
    pod = pod_by_ordinal(obj, ordinal)
    if pod is None:
        return ""
    for c in list_of(pod.get("containers")) or []:
        cm = map_of(c)
        if cm is not None and text_of(cm.get("name")) == name:
            return text_of(cm.get("state"))
    return ""


for _name, _reason in (("podCrashLoopDetected", "CrashLoopBackOff"),
                       ("podImagePullBackOffDetected", "ImagePullBackOff"),
                       ("podErrImagePullDetected", "ErrImagePull"),
                       ("podErrorDetected", "Error"),
                       ("podOOMKilledDetected", "OOMKilled"),
                       ("podRunContainerErrorDetected", "RunContainerError"),
                       ("podCreateContainerErrorDetected", "CreateContainerError"),
                       ("podInvalidImageNameDetected", "InvalidImageName"),
                       ("podPreStartHookErrorDetected", "PreStartHookError"),
                       ("podPostStartHookErrorDetected", "PostStartHookError")):
    note(_name, "a->b")(lambda o, r=_reason: _has_reason(_pods(o), r))


# ── jobs ────────────────────────────────────────────────────────────────────────────
note("jobSucceeded", "a->b")(lambda o: status_int(o, "succeeded") > 0)
note("jobFailed", "a->b")(lambda o: status_int(o, "failed") > 0)
note("jobActive", "a->b")(lambda o: status_int(o, "active") > 0)


@note("jobFirstExitCode", "a->I")
def job_first_exit_code(obj: Any) -> int:
    """The first pod's exitCode that is not negative; -1 when none."""
    for p in _pods(obj):
        pm = map_of(p)
        if pm is None:
            continue
        code = to_int64(pm.get("exitCode"))
        if code >= 0:
            return code
    return -1


def _job_pod_names(obj: Any, match: Callable[[str], bool]) -> str:
    names = []
    for p in _pods(obj):
        pm = map_of(p)
        if pm is None:
            continue
        if match(text_of(pm.get("phase"))):
            name = text_of(pm.get("name"))
            if name:
                names.append(name)
    return ", ".join(names)


note("jobActivePodNames", "a->s")(
    lambda o: _job_pod_names(o, lambda p: p not in ("Succeeded", "Failed")))
note("jobSucceededPodNames", "a->s")(lambda o: _job_pod_names(o, lambda p: p == "Succeeded"))
note("jobFailedPodNames", "a->s")(lambda o: _job_pod_names(o, lambda p: p == "Failed"))
note("cronJobActiveCount", "a->i")(lambda o: len(list_of(status(o).get("active")) or []))
note("cronJobLastScheduleTime", "a->s")(lambda o: text_of(status(o).get("lastScheduleTime")))
note("cronJobLastSuccessTime", "a->s")(lambda o: text_of(status(o).get("lastSuccessfulTime")))


# ── events (`_warnings`) ────────────────────────────────────────────────────────────
def _warnings(obj: Any) -> list[Any]:
    return _enriched(obj, "_warnings")


def _first_warning(obj: Any) -> str:
    ws = _warnings(obj)
    if not ws:
        return ""
    w = map_of(ws[0])
    return "" if w is None else text_of(w.get("message"))


def _join_warnings(obj: Any, field: str) -> str:
    return ", ".join(text_of(w.get(field)) for w in _warnings(obj)
                     if map_of(w) is not None and text_of(w.get(field)) != "")


note("hasWarnings", "a->b")(lambda o: len(_warnings(o)) > 0)
note("warningCount", "a->i")(lambda o: len(_warnings(o)))
note("firstWarning", "a->s")(_first_warning)
note("warningMessages", "a->s")(lambda o: _join_warnings(o, "message"))
note("warningReasons", "a->s")(lambda o: _join_warnings(o, "reason"))


# ── PVCs ────────────────────────────────────────────────────────────────────────────
def _pvc_phase(obj: Any) -> str:
    return text_of(status(obj).get("phase"))


def _pvc_capacity(obj: Any) -> str:
    resources = map_of(spec(obj).get("resources"))
    if not resources:
        return ""
    requests = map_of(resources.get("requests"))
    if not requests:
        return ""
    return text_of(requests.get("storage"))


def _bound_pv(obj: Any) -> Mapping[str, Any] | None:
    m = map_of(obj)
    return map_of(m.get("_pv")) if m is not None else None


def _pvc_provisioner(obj: Any) -> str:
    pv = _bound_pv(obj)
    if pv is None:
        return "Unbound"
    md = map_of(pv.get("metadata"))
    if not md:
        return ""
    ann = map_of(md.get("annotations"))
    if not ann:
        return ""
    return text_of(ann.get("pv.kubernetes.io/provisioned-by"))


def _pvc_volume_mode(obj: Any) -> str:
    pv = _bound_pv(obj)
    if pv is None:
        return "Unbound"
    sp = map_of(pv.get("spec"))
    return "" if not sp else text_of(sp.get("volumeMode"))


note("pvcBound", "a->b")(lambda o: _pvc_phase(o) == "Bound")
note("pvcPhase", "a->s")(_pvc_phase)
note("pvcCapacity", "a->s")(_pvc_capacity)
note("pvcStorageClass", "a->s")(lambda o: text_of(spec(o).get("storageClassName")))
note("pvcAccessModes", "a->s")(lambda o: ", ".join(
    m for m in (list_of(spec(o).get("accessModes")) or []) if isinstance(m, str) and m))
note("pvcProvisioner", "a->s")(_pvc_provisioner)
note("pvcVolumeMode", "a->s")(_pvc_volume_mode)


# ── ingresses ───────────────────────────────────────────────────────────────────────
def _ingress_ready(obj: Any) -> bool:
    e = _lb_ingress_nilable(obj)
    if e is None:
        return False
    return text_of(e.get("ip")) != "" or text_of(e.get("hostname")) != ""


def _lb_ingress_nilable(obj: Any) -> Mapping[str, Any] | None:
    lb = map_of(status(obj).get("loadBalancer"))
    if not lb:
        return None
    ingress = list_of(lb.get("ingress"))
    if not ingress:
        return None
    return map_of(ingress[0])


def _ingress_tls_hosts(obj: Any) -> str:
    hosts: list[str] = []
    for t in list_of(spec(obj).get("tls")) or []:
        tm = map_of(t)
        if not tm:
            continue
        for h in list_of(tm.get("hosts")) or []:
            if isinstance(h, str) and h and h not in hosts:
                hosts.append(h)
    return ", ".join(hosts)


note("ingressReady", "a->b")(_ingress_ready)
note("ingressHost", "a->s")(lambda o: text_of((_lb_ingress_nilable(o) or {}).get("hostname")))
note("ingressIP", "a->s")(lambda o: text_of((_lb_ingress_nilable(o) or {}).get("ip")))
note("ingressClassName", "a->s")(lambda o: text_of(spec(o).get("ingressClassName")))
note("ingressRules", "a->s")(lambda o: ", ".join(
    text_of(r.get("host")) for r in (list_of(spec(o).get("rules")) or [])
    if map_of(r) and text_of(r.get("host")) != ""))
note("ingressTLSHosts", "a->s")(_ingress_tls_hosts)


# ── HPAs ────────────────────────────────────────────────────────────────────────────
def _hpa_spec(obj: Any) -> Mapping[str, Any] | None:
    m = map_of(obj)
    if m is None:
        return None
    sp = map_of(m.get("spec"))
    return sp if sp else None


def _hpa_min(obj: Any) -> int:
    m = map_of(obj)
    if m is None:
        return 1
    sp = map_of(m.get("spec"))
    if not sp:
        return 1
    v = to_int64(sp.get("minReplicas"))
    return 1 if v == 0 else v


def _hpa_max(obj: Any) -> int:
    sp = _hpa_spec(obj)
    return 0 if sp is None else to_int64(sp.get("maxReplicas"))


note("hpaCurrentReplicas", "a->I")(lambda o: status_int(o, "currentReplicas"))
note("hpaDesiredReplicas", "a->I")(lambda o: status_int(o, "desiredReplicas"))
note("hpaMinReplicas", "a->I")(_hpa_min)
note("hpaMaxReplicas", "a->I")(_hpa_max)
note("hpaScaling", "a->b")(
    lambda o: status_int(o, "currentReplicas") != status_int(o, "desiredReplicas"))
note("hpaAtMax", "a->b")(
    lambda o: _hpa_max(o) != 0 and status_int(o, "currentReplicas") >= _hpa_max(o))


# ── nodes ───────────────────────────────────────────────────────────────────────────
def _node_condition(obj: Any, kind: str) -> str:
    for c in list_of(status(obj).get("conditions")) or []:
        cm = map_of(c)
        if not cm:
            continue
        if text_of(cm.get("type")) == kind and isinstance(cm.get("type"), str):
            return text_of(cm.get("status"))
    return ""


def _allocatable(obj: Any, key: str) -> str:
    alloc = map_of(status(obj).get("allocatable"))
    return "" if not alloc else text_of(alloc.get(key))


def _node_taints(obj: Any) -> str:
    sp = _hpa_spec(obj)
    if sp is None:
        return ""
    return ", ".join(text_of(t.get("key")) for t in (list_of(sp.get("taints")) or [])
                     if map_of(t) and text_of(t.get("key")) != "")


note("nodeReady", "a->b")(lambda o: _node_condition(o, "Ready") == "True")
note("nodeAllocatableCPU", "a->s")(lambda o: _allocatable(o, "cpu"))
note("nodeAllocatableMemory", "a->s")(lambda o: _allocatable(o, "memory"))
note("nodeCondition", "a,s->s")(_node_condition)
note("nodeTaints", "a->s")(_node_taints)


# ── ReplicaSets and StatefulSets ────────────────────────────────────────────────────
def _owner(obj: Any) -> Mapping[str, Any] | None:
    m = map_of(obj)
    return map_of(m.get("_owner")) if m is not None else None


def _rs_names(items: list[Any]) -> str:
    names = []
    for raw in items:
        name = text_of(get(raw, "metadata", "name")) if map_of(raw) is not None else ""
        if name:
            names.append(name)
    return ", ".join(names)


def _old_replica_sets(obj: Any) -> list[Any]:
    m = map_of(obj)
    if m is None:
        return []
    current = text_of((map_of(m.get("status")) or {}).get("currentReplicaSet"))
    if current == "":
        return []
    return [rs for rs in (list_of(m.get("_replicaSets")) or [])
            if text_of(get(rs, "metadata", "name")) not in ("", current)]


note("replicaSetOwnerName", "a->s")(lambda o: text_of((_owner(o) or {}).get("name")))
note("replicaSetOwnerKind", "a->s")(lambda o: text_of((_owner(o) or {}).get("kind")))
note("deploymentReplicaSetCount", "a->i")(lambda o: len(_enriched(o, "_replicaSets")))
note("deploymentReplicaSets", "a->s")(lambda o: _rs_names(_enriched(o, "_replicaSets")))
note("oldDeploymentReplicaSets", "a->s")(lambda o: _rs_names(_old_replica_sets(o)))
note("statefulSetCurrentRevision", "a->s")(lambda o: text_of(status(o).get("currentRevision")))
note("statefulSetUpdateRevision", "a->s")(lambda o: text_of(status(o).get("updateRevision")))
note("statefulSetPVCCount", "a->i")(lambda o: len(_enriched(o, "_pvcs")))


# ── serve annotations ───────────────────────────────────────────────────────────────
_SERVE = {"Target": "orkestra.orkspace.io/serve-target",
          "Alias": "orkestra.orkspace.io/serve-alias",
          "Source": "orkestra.orkspace.io/serve-source"}


def _serve(obj: Any, key: str) -> str:
    m = map_of(obj)
    md = map_of(m.get("metadata")) if m is not None else None
    ann = map_of(md.get("annotations")) if md is not None else None
    return "" if ann is None else text_of(ann.get(_SERVE[key]))


for _key in _SERVE:
    note(f"getServe{_key}", "a->s")(lambda o, k=_key: _serve(o, k))
    note(f"hasServe{_key}", "a->b")(lambda o, k=_key: _serve(o, k) != "")
note("isDirectApply", "a->b")(lambda o: all(_serve(o, k) == "" for k in _SERVE))


# ── Prometheus ──────────────────────────────────────────────────────────────────────
def _prom_values(data: Any) -> list[str]:
    m = map_of(data)
    if m is None:
        return []
    raw = map_of(m.get("raw"))
    if raw is None:
        result = m.get("result")
        return [result] if isinstance(result, str) and result != "" else []
    d = map_of(raw.get("data"))
    if d is None:
        return []
    kind = d.get("resultType")
    if kind == "scalar" and isinstance(kind, str):
        result = list_of(d.get("result"))
        if result is None or len(result) < 2 or not isinstance(result[1], str):
            return []
        return [result[1]]
    if kind == "vector" and isinstance(kind, str):
        result = list_of(d.get("result"))
        values = []
        for r in result or []:
            series = map_of(r)
            if series is None:
                continue
            value = list_of(series.get("value"))
            if value is None or len(value) < 2:
                continue
            if isinstance(value[1], str):
                values.append(value[1])
        return values
    return []


def _format_float(f: float) -> str:
    if float(int64_of(f)) == f:
        return str(int64_of(f))
    return _format_f(f)


def _format_f(f: float) -> str:
    """strconv.FormatFloat(f, 'f', -1, 64)."""
    if f != f:
        return "NaN"
    if f in (float("inf"), float("-inf")):
        return "+Inf" if f > 0 else "-Inf"
    from decimal import Decimal
    text = format(Decimal(repr(f)), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def _prom_fold(data: Any, pick_max: bool) -> str:
    values = _prom_values(data)
    if not values:
        return ""
    total = 0.0
    best: float | None = None
    for v in values:
        f = parse_float(v)
        if f is None:
            return ""
        total += f
        if best is None or f > best:
            best = f
    assert best is not None
    return _format_float(best if pick_max else total)


def _prom_threshold(threshold: Any) -> float | None:
    if isinstance(threshold, bool):
        return parse_float(sprint_v(threshold))
    if isinstance(threshold, int | float):
        return float(threshold)
    if isinstance(threshold, str):
        return parse_float(threshold)
    return parse_float(sprint_v(threshold))


def _prom_compare(data: Any, threshold: Any, above: bool) -> str:
    value = text_of((map_of(data) or {}).get("result"))
    f = parse_float(value)
    if f is None:
        return "false"
    t = _prom_threshold(threshold)
    if t is None:
        return "false"
    return "true" if (f > t if above else f < t) else "false"


def _prom_label_values(data: Any, label: str) -> str:
    m = map_of(data)
    raw = map_of(m.get("raw")) if m is not None else None
    d = map_of(raw.get("data")) if raw is not None else None
    result = list_of(d.get("result")) if d is not None else None
    if result is None:
        return ""
    values = []
    for r in result:
        series = map_of(r)
        metric = map_of(series.get("metric")) if series is not None else None
        if metric is not None and isinstance(metric.get(label), str):
            values.append(metric[label])
    return ",".join(values)


note("promValue", "a->s")(lambda d: text_of((map_of(d) or {}).get("result")))
note("promSum", "a->s")(lambda d: _prom_fold(d, False))
note("promMax", "a->s")(lambda d: _prom_fold(d, True))
note("promAboveThreshold", "a,a->s")(lambda d, t: _prom_compare(d, t, True))
note("promBelowThreshold", "a,a->s")(lambda d, t: _prom_compare(d, t, False))
note("promSeriesCount", "a->s")(lambda d: str(len(_prom_values(d))))
note("promLabelValues", "a,s->s")(_prom_label_values)

_ = GoInt
