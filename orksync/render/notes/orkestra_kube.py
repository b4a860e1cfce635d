"""Orkestra's Kubernetes notes, ported from its pkg/note with their Go signatures:
object metadata and status (kubernetes.go), the notes that inspect child objects
(containers, services, replicas, pods, jobs, events, PVCs, ingresses, HPAs, nodes,
ReplicaSets, StatefulSets, with Orkestra's enriched keys `_pods`, `_warnings`, `_pv`,
`_owner`, `_replicaSets`, `_pvcs`), the serve annotations and the Prometheus notes.

Pure. No I/O. Every note takes any value and answers "", 0 or false for a value that
is not the object it expects, as Orkestra's do.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from orksync.render.gotemplate.gotypes import GoInt
from orksync.render.notes.gocore import int64_of, parse_float, sprint_v, to_int64
from orksync.render.notes.gosig import GoNote, registrar

NOTES: list[GoNote] = []
note = registrar(NOTES)


def _map(value: Any) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _list(value: Any) -> list[Any] | None:
    return value if type(value) is list else None


def meta(obj: Any) -> Mapping[str, Any]:
    m = _map(obj)
    inner = _map(m.get("metadata")) if m is not None else None
    return inner if inner is not None else {}


def _section(obj: Any, key: str) -> Mapping[str, Any]:
    m = _map(obj)
    inner = _map(m.get(key)) if m is not None else None
    return inner if inner is not None else {}


def spec(obj: Any) -> Mapping[str, Any]:
    return _section(obj, "spec")


def status(obj: Any) -> Mapping[str, Any]:
    return _section(obj, "status")


def labels(obj: Any) -> Mapping[str, Any]:
    return _map(meta(obj).get("labels")) or {}


def annotations_of(obj: Any) -> Mapping[str, Any]:
    return _map(meta(obj).get("annotations")) or {}


def get(obj: Any, *path: str) -> Any:
    current = obj
    for key in path:
        m = _map(current)
        if m is None:
            return None
        current = m.get(key)
        if current is None:
            return None
    return current


# ── kubernetes.go ───────────────────────────────────────────────────────────────────
note("meta", "a->m")(meta)
note("name", "a->s")(lambda o: _str(meta(o).get("name")))
note("namespace", "a->s")(lambda o: _str(meta(o).get("namespace")))
note("labels", "a->m")(labels)
note("annotations", "a->m")(annotations_of)
note("getLabel", "a,s->s")(lambda o, k: _str(labels(o).get(k)))
note("getLabelInt", "a,s->I")(lambda o, k: to_int64(labels(o).get(k)))
note("hasLabel", "a,s->b")(lambda o, k: _str(labels(o).get(k)) != "")
note("getAnnotation", "a,s->s")(lambda o, k: _str(annotations_of(o).get(k)))
note("getAnnotationInt", "a,s->I")(lambda o, k: to_int64(annotations_of(o).get(k)))
note("hasAnnotation", "a,s->b")(lambda o, k: _str(annotations_of(o).get(k)) != "")


@note("labelMatches", "a,s...->b")
def label_matches(obj: Any, *kvs: str) -> bool:
    """Whether every key/value pair given matches a label."""
    if len(kvs) % 2:
        return False
    found = labels(obj)
    return all(isinstance(found.get(kvs[i]), str) and found[kvs[i]] == kvs[i + 1]
               for i in range(0, len(kvs), 2))


note("spec", "a->m")(spec)
note("status", "a->m")(status)


@note("getStatus", "a,s->s")
def get_status(obj: Any, key: str) -> str:
    """status[key] printed; "" for nil, a map or a list."""
    value = status(obj).get(key)
    if value is None or isinstance(value, Mapping) or type(value) is list:
        return ""
    return value if isinstance(value, str) else sprint_v(value)


@note("hasStatus", "a,s->b")
def has_status(obj: Any, key: str) -> bool:
    """Whether status[key] is set and not empty."""
    st = status(obj)
    if key not in st or st[key] is None:
        return False
    value = st[key]
    if isinstance(value, str | Mapping) or type(value) is list:
        return len(value) > 0
    return True


note("phase", "a->s")(lambda o: _str(status(o).get("phase")))
note("get", "a,s...->a")(get)


def _first_owner(obj: Any) -> Mapping[str, Any] | None:
    owners = _list(meta(obj).get("ownerReferences"))
    if not owners:
        return None
    return _map(owners[0])


note("ownerKind", "a->s")(lambda o: _str((_first_owner(o) or {}).get("kind")))
note("ownerName", "a->s")(lambda o: _str((_first_owner(o) or {}).get("name")))


def _conditions(obj: Any) -> list[Any]:
    return _list(status(obj).get("conditions")) or []


@note("hasCondition", "a,s->b")
def has_condition(obj: Any, kind: str) -> bool:
    """Whether a condition of the type has status "True"."""
    for c in _conditions(obj):
        cm = _map(c)
        if cm is not None and cm.get("type") == kind and isinstance(cm.get("type"), str) \
                and cm.get("status") == "True" and isinstance(cm.get("status"), str):
            return True
    return False


def _condition_field(obj: Any, kind: str, field: str) -> str:
    for c in _conditions(obj):
        cm = _map(c)
        if cm is None:
            continue
        if _str(cm.get("type")) != kind:
            continue
        return _str(cm.get(field))
    return ""


note("conditionReason", "a,s->s")(lambda o, k: _condition_field(o, k, "reason"))
note("conditionMessage", "a,s->s")(lambda o, k: _condition_field(o, k, "message"))


@note("resourceExists", "a->b")
def resource_exists(obj: Any) -> bool:
    """Whether the value is an object that is not Orkestra's placeholder (`_placeholder`)
    nor a `cross` result that was not found (`found: "false"`, see differences.md)."""
    m = _map(obj)
    if m is None:
        return False
    if m.get("_placeholder") is True:
        return False
    return not (m.get("found") == "false" and "name" in m and "metadata" not in m)


@note("isTerminating", "a->b")
def is_terminating(obj: Any) -> bool:
    """Whether metadata.deletionTimestamp is set."""
    m = _map(obj)
    if m is None:
        return False
    md = _map(m.get("metadata"))
    if md is None:
        return False
    ts = md.get("deletionTimestamp")
    if ts is None:
        return False
    if isinstance(ts, str):
        return ts != "" and ts != "null"
    return True


def generation(obj: Any) -> int:
    m = _map(obj)
    md = _map(m.get("metadata")) if m is not None else None
    return to_int64(md.get("generation")) if md is not None else 0


def observed_generation(obj: Any) -> int:
    return to_int64(status(obj).get("observedGeneration"))


note("generation", "a->I")(generation)
note("observedGeneration", "a->I")(observed_generation)


@note("isSynced", "a->b")
def is_synced(obj: Any) -> bool:
    """Whether status.observedGeneration equals metadata.generation."""
    gen, obs = generation(obj), observed_generation(obj)
    return True if gen == 0 and obs == 0 else gen == obs


def _requests(obj: Any, key: str) -> str:
    m = _map(obj)
    if m is None:
        return ""
    return _str(get(m, "spec", "resources", "requests", key)
                if isinstance(get(m, "spec", "resources", "requests"), Mapping) else None)


note("resourceCPU", "a->s")(lambda o: _requests(o, "cpu"))
note("resourceMemory", "a->s")(lambda o: _requests(o, "memory"))


# ── containers ──────────────────────────────────────────────────────────────────────
def _containers(obj: Any) -> list[Any]:
    pod_spec = _map(get(obj, "spec", "template", "spec"))
    if pod_spec is None:
        return []
    return _list(pod_spec.get("containers")) or []


def _container(obj: Any, index: int) -> Mapping[str, Any] | None:
    containers = _containers(obj)
    if index < 0 or index >= len(containers):
        return None
    return _map(containers[index])


note("containerImage", "a,i->s")(lambda o, i: _str((_container(o, i) or {}).get("image")))


@note("containerEnv", "a,i,s->s")
def container_env(obj: Any, index: int, key: str) -> str:
    """The value of an env variable of the index-th container."""
    c = _container(obj, index)
    for e in (_list(c.get("env")) or []) if c is not None else []:
        em = _map(e)
        if em is not None and _str(em.get("name")) == key and isinstance(em.get("name"), str):
            value = em.get("value")
            if isinstance(value, str):
                return value
    return ""


def _ports(obj: Any, index: int) -> list[Any] | None:
    c = _container(obj, index)
    return None if c is None else _list(c.get("ports"))


@note("containerPort", "a,i,i->b")
def container_port(obj: Any, index: int, port: int) -> bool:
    """Whether the index-th container declares the port."""
    return any(_map(p) is not None and int64_of(float(to_int64(p.get("containerPort")))) == port
               for p in _ports(obj, index) or [])


@note("containerPortByName", "a,i,s->i")
def container_port_by_name(obj: Any, index: int, name: str) -> int:
    """The number of the index-th container's port of that name; 0 when none."""
    for p in _ports(obj, index) or []:
        pm = _map(p)
        if pm is not None and _str(pm.get("name")) == name:
            return to_int64(pm.get("containerPort"))
    return 0


@note("containerPorts", "a,i->s")
def container_ports(obj: Any, index: int) -> str:
    """The index-th container's port numbers, comma-separated."""
    return ",".join(str(to_int64(p.get("containerPort")))
                    for p in _ports(obj, index) or [] if _map(p) is not None)


note("containerCount", "a->i")(lambda o: len(_containers(o)) if _map(get(
    o, "spec", "template", "spec")) is not None else 0)


# ── services ────────────────────────────────────────────────────────────────────────
note("serviceClusterIP", "a->s")(
    lambda o: _str((_map(get(o, "spec")) or {}).get("clusterIP")))


@note("serviceNodePort", "a->i")
def service_node_port(obj: Any) -> int:
    """The first port's nodePort."""
    sp = _map(get(obj, "spec"))
    ports = _list(sp.get("ports")) if sp is not None else None
    if not ports:
        return 0
    first = _map(ports[0])
    return 0 if first is None else to_int64(first.get("nodePort"))


def _lb_ingress(obj: Any) -> Mapping[str, Any] | None:
    lb = _map(status(obj).get("loadBalancer"))
    if lb is None:
        return None
    ingress = _list(lb.get("ingress"))
    if not ingress:
        return None
    return _map(ingress[0])


note("serviceLoadBalancerIP", "a->s")(lambda o: _str((_lb_ingress(o) or {}).get("ip")))
note("serviceLoadBalancerHost", "a->s")(
    lambda o: _str((_lb_ingress(o) or {}).get("hostname")))


@note("endpointsReady", "a->b")
def endpoints_ready(obj: Any) -> bool:
    """Whether a subset (under status or at the top) has an address."""
    subsets = _list(status(obj).get("subsets"))
    if subsets is None:
        m = _map(obj)
        if m is not None:
            subsets = _list(m.get("subsets"))
            if subsets is None:
                return False
    for s in subsets or []:
        sm = _map(s)
        if sm is None:
            continue
        addresses = _list(sm.get("addresses"))
        if addresses:
            return True
    return False


# ── replicas ────────────────────────────────────────────────────────────────────────
def desired_replicas(obj: Any) -> int:
    sp = _map(get(obj, "spec"))
    if sp is None:
        return 1
    if "replicas" not in sp or sp["replicas"] is None:
        return 1
    return to_int64(sp["replicas"])


def _status_int(obj: Any, key: str) -> int:
    return to_int64(status(obj).get(key))


note("desiredReplicas", "a->i")(desired_replicas)
note("readyReplicas", "a->i")(lambda o: _status_int(o, "readyReplicas"))
note("availableReplicas", "a->i")(lambda o: _status_int(o, "availableReplicas"))
note("updatedReplicas", "a->i")(lambda o: _status_int(o, "updatedReplicas"))
note("allReplicasReady", "a->b")(
    lambda o: _status_int(o, "readyReplicas") == desired_replicas(o))
note("rolloutComplete", "a->b")(
    lambda o: _status_int(o, "updatedReplicas") == desired_replicas(o))


# ── metadata fields ─────────────────────────────────────────────────────────────────
def _meta_field(field: str) -> Callable[[Any], str]:
    def read(obj: Any) -> str:
        m = _map(obj)
        md = _map(m.get("metadata")) if m is not None else None
        return _str(md.get(field)) if md is not None else ""

    return read


note("resourceName", "a->s")(_meta_field("name"))
note("resourceNamespace", "a->s")(_meta_field("namespace"))
note("resourceUID", "a->s")(_meta_field("uid"))
note("resourceVersion", "a->s")(_meta_field("resourceVersion"))
note("creationTimestamp", "a->s")(_meta_field("creationTimestamp"))


# ── pods (Orkestra's enriched `_pods`) ──────────────────────────────────────────────
def _enriched(obj: Any, key: str) -> list[Any]:
    m = _map(obj)
    return (_list(m.get(key)) or []) if m is not None else []


def _pods(obj: Any) -> list[Any]:
    return _enriched(obj, "_pods")


def _join_pod_field(obj: Any, field: str) -> str:
    return ", ".join(_str(p.get(field)) for p in _pods(obj)
                     if _map(p) is not None and _str(p.get(field)) != "")


for _name, _field in (("podNames", "name"), ("podIPs", "ip"), ("podPhases", "phase"),
                      ("podNodes", "node")):
    note(_name, "a->s")(lambda o, f=_field: _join_pod_field(o, f))
note("podCount", "a->i")(lambda o: len(_pods(o)))
note("readyPodCount", "a->i")(
    lambda o: sum(1 for p in _pods(o) if _map(p) is not None and p.get("ready") is True))


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
        pm = _map(p)
        if pm is None:
            continue
        r = _restart_value(pm.get("restartCount"))
        v = 0 if r is None else (int64_of(r) if isinstance(r, float) else int(r))
        best = max(best, v)
    return best


def _has_reason(pods: list[Any], reason: str) -> bool:
    for p in pods:
        pm = _map(p)
        if pm is None:
            continue
        for c in _list(pm.get("containers")) or []:
            cm = _map(c)
            if cm is not None and _str(cm.get("reason")) == reason and \
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
        pm = _map(p)
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
        pm = _map(p)
        if pm is not None and _ordinal(pm.get("ordinal")) == ordinal:
            return pm
    return None


note("podByOrdinal", "a,I->a")(pod_by_ordinal)


@note("podContainerReasons", "a->s")
def pod_container_reasons(obj: Any) -> str:
    """The distinct container reasons of the pods, in order."""
    seen: list[str] = []
    for p in _pods(obj):
        pm = _map(p)
        if pm is None:
            continue
        for c in _list(pm.get("containers")) or []:
            cm = _map(c)
            r = _str(cm.get("reason")) if cm is not None else ""
            if r and r not in seen:
                seen.append(r)
    return ", ".join(seen)


@note("podContainerState", "a,I,s->s")
def pod_container_state(obj: Any, ordinal: int, name: str) -> str:
    """The state of the named container of the pod with that ordinal."""
    pod = pod_by_ordinal(obj, ordinal)
    if pod is None:
        return ""
    for c in _list(pod.get("containers")) or []:
        cm = _map(c)
        if cm is not None and _str(cm.get("name")) == name:
            return _str(cm.get("state"))
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
note("jobSucceeded", "a->b")(lambda o: _status_int(o, "succeeded") > 0)
note("jobFailed", "a->b")(lambda o: _status_int(o, "failed") > 0)
note("jobActive", "a->b")(lambda o: _status_int(o, "active") > 0)


@note("jobFirstExitCode", "a->I")
def job_first_exit_code(obj: Any) -> int:
    """The first pod's exitCode that is not negative; -1 when none."""
    for p in _pods(obj):
        pm = _map(p)
        if pm is None:
            continue
        code = to_int64(pm.get("exitCode"))
        if code >= 0:
            return code
    return -1


def _job_pod_names(obj: Any, match: Callable[[str], bool]) -> str:
    names = []
    for p in _pods(obj):
        pm = _map(p)
        if pm is None:
            continue
        if match(_str(pm.get("phase"))):
            name = _str(pm.get("name"))
            if name:
                names.append(name)
    return ", ".join(names)


note("jobActivePodNames", "a->s")(
    lambda o: _job_pod_names(o, lambda p: p not in ("Succeeded", "Failed")))
note("jobSucceededPodNames", "a->s")(lambda o: _job_pod_names(o, lambda p: p == "Succeeded"))
note("jobFailedPodNames", "a->s")(lambda o: _job_pod_names(o, lambda p: p == "Failed"))
note("cronJobActiveCount", "a->i")(lambda o: len(_list(status(o).get("active")) or []))
note("cronJobLastScheduleTime", "a->s")(lambda o: _str(status(o).get("lastScheduleTime")))
note("cronJobLastSuccessTime", "a->s")(lambda o: _str(status(o).get("lastSuccessfulTime")))


# ── events (`_warnings`) ────────────────────────────────────────────────────────────
def _warnings(obj: Any) -> list[Any]:
    return _enriched(obj, "_warnings")


def _first_warning(obj: Any) -> str:
    ws = _warnings(obj)
    if not ws:
        return ""
    w = _map(ws[0])
    return "" if w is None else _str(w.get("message"))


def _join_warnings(obj: Any, field: str) -> str:
    return ", ".join(_str(w.get(field)) for w in _warnings(obj)
                     if _map(w) is not None and _str(w.get(field)) != "")


note("hasWarnings", "a->b")(lambda o: len(_warnings(o)) > 0)
note("warningCount", "a->i")(lambda o: len(_warnings(o)))
note("firstWarning", "a->s")(_first_warning)
note("warningMessages", "a->s")(lambda o: _join_warnings(o, "message"))
note("warningReasons", "a->s")(lambda o: _join_warnings(o, "reason"))


# ── PVCs ────────────────────────────────────────────────────────────────────────────
def _pvc_phase(obj: Any) -> str:
    return _str(status(obj).get("phase"))


def _pvc_capacity(obj: Any) -> str:
    resources = _map(spec(obj).get("resources"))
    if not resources:
        return ""
    requests = _map(resources.get("requests"))
    if not requests:
        return ""
    return _str(requests.get("storage"))


def _bound_pv(obj: Any) -> Mapping[str, Any] | None:
    m = _map(obj)
    return _map(m.get("_pv")) if m is not None else None


def _pvc_provisioner(obj: Any) -> str:
    pv = _bound_pv(obj)
    if pv is None:
        return "Unbound"
    md = _map(pv.get("metadata"))
    if not md:
        return ""
    ann = _map(md.get("annotations"))
    if not ann:
        return ""
    return _str(ann.get("pv.kubernetes.io/provisioned-by"))


def _pvc_volume_mode(obj: Any) -> str:
    pv = _bound_pv(obj)
    if pv is None:
        return "Unbound"
    sp = _map(pv.get("spec"))
    return "" if not sp else _str(sp.get("volumeMode"))


note("pvcBound", "a->b")(lambda o: _pvc_phase(o) == "Bound")
note("pvcPhase", "a->s")(_pvc_phase)
note("pvcCapacity", "a->s")(_pvc_capacity)
note("pvcStorageClass", "a->s")(lambda o: _str(spec(o).get("storageClassName")))
note("pvcAccessModes", "a->s")(lambda o: ", ".join(
    m for m in (_list(spec(o).get("accessModes")) or []) if isinstance(m, str) and m))
note("pvcProvisioner", "a->s")(_pvc_provisioner)
note("pvcVolumeMode", "a->s")(_pvc_volume_mode)


# ── ingresses ───────────────────────────────────────────────────────────────────────
def _ingress_ready(obj: Any) -> bool:
    e = _lb_ingress_nilable(obj)
    if e is None:
        return False
    return _str(e.get("ip")) != "" or _str(e.get("hostname")) != ""


def _lb_ingress_nilable(obj: Any) -> Mapping[str, Any] | None:
    lb = _map(status(obj).get("loadBalancer"))
    if not lb:
        return None
    ingress = _list(lb.get("ingress"))
    if not ingress:
        return None
    return _map(ingress[0])


def _ingress_tls_hosts(obj: Any) -> str:
    hosts: list[str] = []
    for t in _list(spec(obj).get("tls")) or []:
        tm = _map(t)
        if not tm:
            continue
        for h in _list(tm.get("hosts")) or []:
            if isinstance(h, str) and h and h not in hosts:
                hosts.append(h)
    return ", ".join(hosts)


note("ingressReady", "a->b")(_ingress_ready)
note("ingressHost", "a->s")(lambda o: _str((_lb_ingress_nilable(o) or {}).get("hostname")))
note("ingressIP", "a->s")(lambda o: _str((_lb_ingress_nilable(o) or {}).get("ip")))
note("ingressClassName", "a->s")(lambda o: _str(spec(o).get("ingressClassName")))
note("ingressRules", "a->s")(lambda o: ", ".join(
    _str(r.get("host")) for r in (_list(spec(o).get("rules")) or [])
    if _map(r) and _str(r.get("host")) != ""))
note("ingressTLSHosts", "a->s")(_ingress_tls_hosts)


# ── HPAs ────────────────────────────────────────────────────────────────────────────
def _hpa_spec(obj: Any) -> Mapping[str, Any] | None:
    m = _map(obj)
    if m is None:
        return None
    sp = _map(m.get("spec"))
    return sp if sp else None


def _hpa_min(obj: Any) -> int:
    m = _map(obj)
    if m is None:
        return 1
    sp = _map(m.get("spec"))
    if not sp:
        return 1
    v = to_int64(sp.get("minReplicas"))
    return 1 if v == 0 else v


def _hpa_max(obj: Any) -> int:
    sp = _hpa_spec(obj)
    return 0 if sp is None else to_int64(sp.get("maxReplicas"))


note("hpaCurrentReplicas", "a->I")(lambda o: _status_int(o, "currentReplicas"))
note("hpaDesiredReplicas", "a->I")(lambda o: _status_int(o, "desiredReplicas"))
note("hpaMinReplicas", "a->I")(_hpa_min)
note("hpaMaxReplicas", "a->I")(_hpa_max)
note("hpaScaling", "a->b")(
    lambda o: _status_int(o, "currentReplicas") != _status_int(o, "desiredReplicas"))
note("hpaAtMax", "a->b")(
    lambda o: _hpa_max(o) != 0 and _status_int(o, "currentReplicas") >= _hpa_max(o))


# ── nodes ───────────────────────────────────────────────────────────────────────────
def _node_condition(obj: Any, kind: str) -> str:
    for c in _list(status(obj).get("conditions")) or []:
        cm = _map(c)
        if not cm:
            continue
        if _str(cm.get("type")) == kind and isinstance(cm.get("type"), str):
            return _str(cm.get("status"))
    return ""


def _allocatable(obj: Any, key: str) -> str:
    alloc = _map(status(obj).get("allocatable"))
    return "" if not alloc else _str(alloc.get(key))


def _node_taints(obj: Any) -> str:
    sp = _hpa_spec(obj)
    if sp is None:
        return ""
    return ", ".join(_str(t.get("key")) for t in (_list(sp.get("taints")) or [])
                     if _map(t) and _str(t.get("key")) != "")


note("nodeReady", "a->b")(lambda o: _node_condition(o, "Ready") == "True")
note("nodeAllocatableCPU", "a->s")(lambda o: _allocatable(o, "cpu"))
note("nodeAllocatableMemory", "a->s")(lambda o: _allocatable(o, "memory"))
note("nodeCondition", "a,s->s")(_node_condition)
note("nodeTaints", "a->s")(_node_taints)


# ── ReplicaSets and StatefulSets ────────────────────────────────────────────────────
def _owner(obj: Any) -> Mapping[str, Any] | None:
    m = _map(obj)
    return _map(m.get("_owner")) if m is not None else None


def _rs_names(items: list[Any]) -> str:
    names = []
    for raw in items:
        name = _str(get(raw, "metadata", "name")) if _map(raw) is not None else ""
        if name:
            names.append(name)
    return ", ".join(names)


def _old_replica_sets(obj: Any) -> list[Any]:
    m = _map(obj)
    if m is None:
        return []
    current = _str((_map(m.get("status")) or {}).get("currentReplicaSet"))
    if current == "":
        return []
    return [rs for rs in (_list(m.get("_replicaSets")) or [])
            if _str(get(rs, "metadata", "name")) not in ("", current)]


note("replicaSetOwnerName", "a->s")(lambda o: _str((_owner(o) or {}).get("name")))
note("replicaSetOwnerKind", "a->s")(lambda o: _str((_owner(o) or {}).get("kind")))
note("deploymentReplicaSetCount", "a->i")(lambda o: len(_enriched(o, "_replicaSets")))
note("deploymentReplicaSets", "a->s")(lambda o: _rs_names(_enriched(o, "_replicaSets")))
note("oldDeploymentReplicaSets", "a->s")(lambda o: _rs_names(_old_replica_sets(o)))
note("statefulSetCurrentRevision", "a->s")(lambda o: _str(status(o).get("currentRevision")))
note("statefulSetUpdateRevision", "a->s")(lambda o: _str(status(o).get("updateRevision")))
note("statefulSetPVCCount", "a->i")(lambda o: len(_enriched(o, "_pvcs")))


# ── serve annotations ───────────────────────────────────────────────────────────────
_SERVE = {"Target": "orkestra.orkspace.io/serve-target",
          "Alias": "orkestra.orkspace.io/serve-alias",
          "Source": "orkestra.orkspace.io/serve-source"}


def _serve(obj: Any, key: str) -> str:
    m = _map(obj)
    md = _map(m.get("metadata")) if m is not None else None
    ann = _map(md.get("annotations")) if md is not None else None
    return "" if ann is None else _str(ann.get(_SERVE[key]))


for _key in _SERVE:
    note(f"getServe{_key}", "a->s")(lambda o, k=_key: _serve(o, k))
    note(f"hasServe{_key}", "a->b")(lambda o, k=_key: _serve(o, k) != "")
note("isDirectApply", "a->b")(lambda o: all(_serve(o, k) == "" for k in _SERVE))


# ── Prometheus ──────────────────────────────────────────────────────────────────────
def _prom_values(data: Any) -> list[str]:
    m = _map(data)
    if m is None:
        return []
    raw = _map(m.get("raw"))
    if raw is None:
        result = m.get("result")
        return [result] if isinstance(result, str) and result != "" else []
    d = _map(raw.get("data"))
    if d is None:
        return []
    kind = d.get("resultType")
    if kind == "scalar" and isinstance(kind, str):
        result = _list(d.get("result"))
        if result is None or len(result) < 2 or not isinstance(result[1], str):
            return []
        return [result[1]]
    if kind == "vector" and isinstance(kind, str):
        result = _list(d.get("result"))
        values = []
        for r in result or []:
            series = _map(r)
            if series is None:
                continue
            value = _list(series.get("value"))
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
    value = _str((_map(data) or {}).get("result"))
    f = parse_float(value)
    if f is None:
        return "false"
    t = _prom_threshold(threshold)
    if t is None:
        return "false"
    return "true" if (f > t if above else f < t) else "false"


def _prom_label_values(data: Any, label: str) -> str:
    m = _map(data)
    raw = _map(m.get("raw")) if m is not None else None
    d = _map(raw.get("data")) if raw is not None else None
    result = _list(d.get("result")) if d is not None else None
    if result is None:
        return ""
    values = []
    for r in result:
        series = _map(r)
        metric = _map(series.get("metric")) if series is not None else None
        if metric is not None and isinstance(metric.get(label), str):
            values.append(metric[label])
    return ",".join(values)


note("promValue", "a->s")(lambda d: _str((_map(d) or {}).get("result")))
note("promSum", "a->s")(lambda d: _prom_fold(d, False))
note("promMax", "a->s")(lambda d: _prom_fold(d, True))
note("promAboveThreshold", "a,a->s")(lambda d, t: _prom_compare(d, t, True))
note("promBelowThreshold", "a,a->s")(lambda d, t: _prom_compare(d, t, False))
note("promSeriesCount", "a->s")(lambda d: str(len(_prom_values(d))))
note("promLabelValues", "a,s->s")(_prom_label_values)

_ = GoInt
