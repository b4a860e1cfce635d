"""Orkestra's Kubernetes notes, ported from its pkg/note with their Go signatures:
object metadata and status (kubernetes.go), containers, services, replicas and metadata
fields; the notes over pods, jobs, events and the other children are in
orkestra_workloads.

Pure. No I/O. Every note takes any value and answers "", 0 or false for a value that
is not the object it expects, as Orkestra's do.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from orksync.render.notes.gocore import int64_of, sprint_v, to_int64
from orksync.render.notes.gosig import GoNote, registrar

NOTES: list[GoNote] = []
note = registrar(NOTES)


def map_of(value: Any) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


def text_of(value: Any) -> str:
    return value if isinstance(value, str) else ""


def list_of(value: Any) -> list[Any] | None:
    return value if type(value) is list else None


def meta(obj: Any) -> Mapping[str, Any]:
    m = map_of(obj)
    inner = map_of(m.get("metadata")) if m is not None else None
    return inner if inner is not None else {}


def _section(obj: Any, key: str) -> Mapping[str, Any]:
    m = map_of(obj)
    inner = map_of(m.get(key)) if m is not None else None
    return inner if inner is not None else {}


def spec(obj: Any) -> Mapping[str, Any]:
    return _section(obj, "spec")


def status(obj: Any) -> Mapping[str, Any]:
    return _section(obj, "status")


def labels(obj: Any) -> Mapping[str, Any]:
    return map_of(meta(obj).get("labels")) or {}


def annotations_of(obj: Any) -> Mapping[str, Any]:
    return map_of(meta(obj).get("annotations")) or {}


def get(obj: Any, *path: str) -> Any:
    current = obj
    for key in path:
        m = map_of(current)
        if m is None:
            return None
        current = m.get(key)
        if current is None:
            return None
    return current


# ── kubernetes.go ───────────────────────────────────────────────────────────────────
note("meta", "a->m")(meta)
note("name", "a->s")(lambda o: text_of(meta(o).get("name")))
note("namespace", "a->s")(lambda o: text_of(meta(o).get("namespace")))
note("labels", "a->m")(labels)
note("annotations", "a->m")(annotations_of)
note("getLabel", "a,s->s")(lambda o, k: text_of(labels(o).get(k)))
note("getLabelInt", "a,s->I")(lambda o, k: to_int64(labels(o).get(k)))
note("hasLabel", "a,s->b")(lambda o, k: text_of(labels(o).get(k)) != "")
note("getAnnotation", "a,s->s")(lambda o, k: text_of(annotations_of(o).get(k)))
note("getAnnotationInt", "a,s->I")(lambda o, k: to_int64(annotations_of(o).get(k)))
note("hasAnnotation", "a,s->b")(lambda o, k: text_of(annotations_of(o).get(k)) != "")


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


note("phase", "a->s")(lambda o: text_of(status(o).get("phase")))
note("get", "a,s...->a")(get)


def _first_owner(obj: Any) -> Mapping[str, Any] | None:
    owners = list_of(meta(obj).get("ownerReferences"))
    if not owners:
        return None
    return map_of(owners[0])


note("ownerKind", "a->s")(lambda o: text_of((_first_owner(o) or {}).get("kind")))
note("ownerName", "a->s")(lambda o: text_of((_first_owner(o) or {}).get("name")))


def _conditions(obj: Any) -> list[Any]:
    return list_of(status(obj).get("conditions")) or []


@note("hasCondition", "a,s->b")
def has_condition(obj: Any, kind: str) -> bool:
    """Whether a condition of the type has status "True"."""
    for c in _conditions(obj):
        cm = map_of(c)
        if cm is not None and cm.get("type") == kind and isinstance(cm.get("type"), str) \
                and cm.get("status") == "True" and isinstance(cm.get("status"), str):
            return True
    return False


def _condition_field(obj: Any, kind: str, field: str) -> str:
    for c in _conditions(obj):
        cm = map_of(c)
        if cm is None:
            continue
        if text_of(cm.get("type")) != kind:
            continue
        return text_of(cm.get(field))
    return ""


note("conditionReason", "a,s->s")(lambda o, k: _condition_field(o, k, "reason"))
note("conditionMessage", "a,s->s")(lambda o, k: _condition_field(o, k, "message"))


@note("resourceExists", "a->b")
def resource_exists(obj: Any) -> bool:
    """Whether the value is an object that is not Orkestra's placeholder (`_placeholder`)
    nor a `cross` result that was not found (`found: "false"`, see differences.md)."""
    m = map_of(obj)
    if m is None:
        return False
    if m.get("_placeholder") is True:
        return False
    return not (m.get("found") == "false" and "name" in m and "metadata" not in m)


@note("isTerminating", "a->b")
def is_terminating(obj: Any) -> bool:
    """Whether metadata.deletionTimestamp is set."""
    m = map_of(obj)
    if m is None:
        return False
    md = map_of(m.get("metadata"))
    if md is None:
        return False
    ts = md.get("deletionTimestamp")
    if ts is None:
        return False
    if isinstance(ts, str):
        return ts != "" and ts != "null"
    return True


def generation(obj: Any) -> int:
    m = map_of(obj)
    md = map_of(m.get("metadata")) if m is not None else None
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
    m = map_of(obj)
    if m is None:
        return ""
    return text_of(get(m, "spec", "resources", "requests", key)
                   if isinstance(get(m, "spec", "resources", "requests"), Mapping) else None)


note("resourceCPU", "a->s")(lambda o: _requests(o, "cpu"))
note("resourceMemory", "a->s")(lambda o: _requests(o, "memory"))


# ── containers ──────────────────────────────────────────────────────────────────────
def _containers(obj: Any) -> list[Any]:
    pod_spec = map_of(get(obj, "spec", "template", "spec"))
    if pod_spec is None:
        return []
    return list_of(pod_spec.get("containers")) or []


def _container(obj: Any, index: int) -> Mapping[str, Any] | None:
    containers = _containers(obj)
    if index < 0 or index >= len(containers):
        return None
    return map_of(containers[index])


note("containerImage", "a,i->s")(lambda o, i: text_of((_container(o, i) or {}).get("image")))


@note("containerEnv", "a,i,s->s")
def container_env(obj: Any, index: int, key: str) -> str:
    """The value of an env variable of the index-th container."""
    c = _container(obj, index)
    for e in (list_of(c.get("env")) or []) if c is not None else []:
        em = map_of(e)
        if em is not None and text_of(em.get("name")) == key and isinstance(em.get("name"), str):
            value = em.get("value")
            if isinstance(value, str):
                return value
    return ""


def _ports(obj: Any, index: int) -> list[Any] | None:
    c = _container(obj, index)
    return None if c is None else list_of(c.get("ports"))


@note("containerPort", "a,i,i->b")
def container_port(obj: Any, index: int, port: int) -> bool:
    """Whether the index-th container declares the port."""
    return any(map_of(p) is not None and int64_of(float(to_int64(p.get("containerPort")))) == port
               for p in _ports(obj, index) or [])


@note("containerPortByName", "a,i,s->i")
def container_port_by_name(obj: Any, index: int, name: str) -> int:
    """The number of the index-th container's port of that name; 0 when none."""
    for p in _ports(obj, index) or []:
        pm = map_of(p)
        if pm is not None and text_of(pm.get("name")) == name:
            return to_int64(pm.get("containerPort"))
    return 0


@note("containerPorts", "a,i->s")
def container_ports(obj: Any, index: int) -> str:
    """The index-th container's port numbers, comma-separated."""
    return ",".join(str(to_int64(p.get("containerPort")))
                    for p in _ports(obj, index) or [] if map_of(p) is not None)


note("containerCount", "a->i")(lambda o: len(_containers(o)) if map_of(get(
    o, "spec", "template", "spec")) is not None else 0)


# ── services ────────────────────────────────────────────────────────────────────────
note("serviceClusterIP", "a->s")(
    lambda o: text_of((map_of(get(o, "spec")) or {}).get("clusterIP")))


@note("serviceNodePort", "a->i")
def service_node_port(obj: Any) -> int:
    """The first port's nodePort."""
    sp = map_of(get(obj, "spec"))
    ports = list_of(sp.get("ports")) if sp is not None else None
    if not ports:
        return 0
    first = map_of(ports[0])
    return 0 if first is None else to_int64(first.get("nodePort"))


def _lb_ingress(obj: Any) -> Mapping[str, Any] | None:
    lb = map_of(status(obj).get("loadBalancer"))
    if lb is None:
        return None
    ingress = list_of(lb.get("ingress"))
    if not ingress:
        return None
    return map_of(ingress[0])


note("serviceLoadBalancerIP", "a->s")(lambda o: text_of((_lb_ingress(o) or {}).get("ip")))
note("serviceLoadBalancerHost", "a->s")(
    lambda o: text_of((_lb_ingress(o) or {}).get("hostname")))


@note("endpointsReady", "a->b")
def endpoints_ready(obj: Any) -> bool:
    """Whether a subset (under status or at the top) has an address."""
    subsets = list_of(status(obj).get("subsets"))
    if subsets is None:
        m = map_of(obj)
        if m is not None:
            subsets = list_of(m.get("subsets"))
            if subsets is None:
                return False
    for s in subsets or []:
        sm = map_of(s)
        if sm is None:
            continue
        addresses = list_of(sm.get("addresses"))
        if addresses:
            return True
    return False


# ── replicas ────────────────────────────────────────────────────────────────────────
def desired_replicas(obj: Any) -> int:
    sp = map_of(get(obj, "spec"))
    if sp is None:
        return 1
    if "replicas" not in sp or sp["replicas"] is None:
        return 1
    return to_int64(sp["replicas"])


def status_int(obj: Any, key: str) -> int:
    return to_int64(status(obj).get(key))


note("desiredReplicas", "a->i")(desired_replicas)
note("readyReplicas", "a->i")(lambda o: status_int(o, "readyReplicas"))
note("availableReplicas", "a->i")(lambda o: status_int(o, "availableReplicas"))
note("updatedReplicas", "a->i")(lambda o: status_int(o, "updatedReplicas"))
note("allReplicasReady", "a->b")(
    lambda o: status_int(o, "readyReplicas") == desired_replicas(o))
note("rolloutComplete", "a->b")(
    lambda o: status_int(o, "updatedReplicas") == desired_replicas(o))


# ── metadata fields ─────────────────────────────────────────────────────────────────
def _meta_field(field: str) -> Callable[[Any], str]:
    def read(obj: Any) -> str:
        m = map_of(obj)
        md = map_of(m.get("metadata")) if m is not None else None
        return text_of(md.get(field)) if md is not None else ""

    return read


note("resourceName", "a->s")(_meta_field("name"))
note("resourceNamespace", "a->s")(_meta_field("namespace"))
note("resourceUID", "a->s")(_meta_field("uid"))
note("resourceVersion", "a->s")(_meta_field("resourceVersion"))
note("creationTimestamp", "a->s")(_meta_field("creationTimestamp"))
