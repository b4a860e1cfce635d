"""The pod shape shared by Deployment, ReplicaSet, StatefulSet, Job, CronJob and Pod:
Orkestra's single container plus the pod-level fields. Pure (docs/katalog-semantics.md#pods)."""

from __future__ import annotations

import copy
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from orksync.render.builders import BuildError
from orksync.render.builders.common import (
    as_bool,
    as_int,
    as_port,
    as_text,
    choice,
    exclusive,
    file_mode,
    node,
    nodes,
    profile,
    protocol,
    pull_secrets,
    quantity,
    required,
    resource_list,
    string_list,
    string_map,
    sub,
)
from orksync.render.builders.profiles import (
    CONTAINER_SECURITY,
    POD_SECURITY,
    PROBE_DEFAULT,
    PROBES,
    RESOURCES,
)
from orksync.render.coercion import parse_port

PROBE_KINDS = ("startup", "liveness", "readiness")
PROBE_TIMINGS = {"initialDelaySeconds": 0, "periodSeconds": 1, "failureThreshold": 1,
                 "successThreshold": 1, "timeoutSeconds": 1}  # field → minimum
VOLUME_SOURCES = ("configMap", "secret", "emptyDir", "persistentVolumeClaim", "hostPath")


def pod_spec(entry: Mapping[str, Any], name: str, *, restart_policy: str = "",
             claim_mounts: Sequence[Mapping[str, str]] = (),
             scanf_port: bool = False) -> dict[str, Any]:
    """The PodSpec: one container named `name`. `claim_mounts` are extra container mounts
    for volumes declared elsewhere (StatefulSet volumeClaimTemplates)."""
    vols = volumes(entry.get("volumes"))
    known = {v["name"] for v in vols} | {m["name"] for m in claim_mounts}
    spec: dict[str, Any] = {
        "containers": [container(entry, name, volume_names=known, claim_mounts=claim_mounts,
                                 scanf_port=scanf_port)]}
    account = as_text(entry.get("serviceAccountName"), "serviceAccountName")
    if account:
        spec["serviceAccountName"] = account
    secrets = pull_secrets(entry.get("imagePullSecrets"), "imagePullSecrets")
    if secrets:
        spec["imagePullSecrets"] = secrets
    node_selector = string_map(entry.get("nodeSelector"), "nodeSelector")
    if node_selector:
        spec["nodeSelector"] = node_selector
    security = security_context(entry.get("podSecurity"), "podSecurity", POD_SECURITY)
    if security:
        spec["securityContext"] = security
    if vols:
        spec["volumes"] = vols
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    return spec


def container(entry: Mapping[str, Any], name: str, *,
              volume_names: Collection[str] | None = None,
              claim_mounts: Sequence[Mapping[str, str]] = (),
              scanf_port: bool = False) -> dict[str, Any]:
    """The single container Orkestra builds: named after the object."""
    c: dict[str, Any] = {"name": name, "image": required(entry.get("image"), "image")}
    for key in ("command", "args"):
        values = string_list(entry.get(key), key, allow_empty_items=True)
        if values:
            c[key] = values
    workdir = as_text(entry.get("workingDirectory"), "workingDirectory")
    if workdir:
        c["workingDir"] = workdir
    proto = protocol(entry.get("protocol"), "protocol")
    port = parse_port(as_text(entry.get("port"), "port"), scanf=scanf_port)
    if port > 0:
        c["ports"] = [{"containerPort": port, "protocol": proto}]
    env = env_vars(entry)
    sources, expanded = env_from(entry.get("envFrom"))
    env.extend(expanded)
    if env:
        c["env"] = env
    if sources:
        c["envFrom"] = sources
    res = resources(entry.get("resources"))
    if res:
        c["resources"] = res
    c.update(probes(entry.get("probes"), port))
    security = security_context(entry.get("securityContext"), "securityContext",
                                CONTAINER_SECURITY)
    if security:
        c["securityContext"] = security
    if volume_names is None:
        volume_names = {v["name"] for v in volumes(entry.get("volumes"))}
    mounts = [dict(m) for m in claim_mounts] + volume_mounts(
        entry.get("volumeMounts"), set(volume_names) | {m["name"] for m in claim_mounts})
    if mounts:
        c["volumeMounts"] = mounts
    return c


# --- env -----------------------------------------------------------------------------


def env_vars(entry: Mapping[str, Any]) -> list[dict[str, Any]]:
    raw = entry.get("env")
    if isinstance(raw, Mapping):
        raise BuildError("env", "must be a list, the form Orkestra reads since v0.7.13 "
                         "(which removed this map form): env: [{name: KEY, value: \"...\"}] "
                         "or [{name: KEY, valueFrom: {secretKeyRef: {name, key}}}]")
    out: list[dict[str, Any]] = []
    for i, item in enumerate(nodes(raw, "env")):
        field = sub("env", i)
        var: dict[str, Any] = {"name": required(item.get("name"), sub(field, "name"))}
        if item.get("valueFrom") is not None:
            if item.get("value") not in (None, ""):
                raise BuildError(field, "has both value and valueFrom: use one")
            var["valueFrom"] = value_from(item["valueFrom"], sub(field, "valueFrom"))
        else:
            var["value"] = as_text(item.get("value"), sub(field, "value"))
        out.append(var)
    return out


def value_from(raw: Any, field: str) -> dict[str, Any]:
    spec = node(raw, field)
    given = [k for k in ("secretKeyRef", "configMapKeyRef", "fieldRef", "resourceFieldRef")
             if spec.get(k) is not None]
    if len(given) != 1:
        raise BuildError(field, "needs exactly one of secretKeyRef, configMapKeyRef, fieldRef, "
                         f"resourceFieldRef, got {', '.join(given) or 'none'}")
    key = given[0]
    ref, f = node(spec[key], sub(field, key)), sub(field, key)
    if key in ("secretKeyRef", "configMapKeyRef"):
        out: dict[str, Any] = {"name": required(ref.get("name"), sub(f, "name")),
                               "key": required(ref.get("key"), sub(f, "key"))}
        _optional(out, ref, f)
    elif key == "fieldRef":
        out = {"fieldPath": required(ref.get("fieldPath"), sub(f, "fieldPath"))}
        api = as_text(ref.get("apiVersion"), sub(f, "apiVersion"))
        if api:
            out["apiVersion"] = api
    else:
        out = {"resource": required(ref.get("resource"), sub(f, "resource"))}
        container_name = as_text(ref.get("containerName"), sub(f, "containerName"))
        if container_name:
            out["containerName"] = container_name
        if as_text(ref.get("divisor"), sub(f, "divisor")):
            out["divisor"] = quantity(ref["divisor"], sub(f, "divisor"))
    return {key: out}


def _optional(out: dict[str, Any], ref: Mapping[str, Any], field: str) -> None:
    if as_text(ref.get("optional"), sub(field, "optional")):
        out["optional"] = as_bool(ref["optional"], sub(field, "optional"))


def env_from(raw: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(envFrom sources, extra env entries expanded from refs that list `keys`)."""
    if raw is None:  # not set, as most entries have it: nothing to read
        return [], []
    spec = node(raw, "envFrom")
    sources: list[dict[str, Any]] = []
    expanded: list[dict[str, Any]] = []
    for ref_key, selector in (("secretRef", "secretKeyRef"), ("configMapRef", "configMapKeyRef")):
        for i, ref in enumerate(nodes(spec.get(ref_key), sub("envFrom", ref_key))):
            f = sub(sub("envFrom", ref_key), i)
            name = required(ref.get("name"), sub(f, "name"))
            prefix = as_text(ref.get("prefix"), sub(f, "prefix"))
            suffix = as_text(ref.get("suffix"), sub(f, "suffix"))
            keys = string_list(ref.get("keys"), sub(f, "keys"))
            target: dict[str, Any] = {"name": name}
            _optional(target, ref, f)
            if keys:
                for key in keys:
                    expanded.append({"name": prefix + key + suffix,
                                     "valueFrom": {selector: {**target, "key": key}}})
                continue
            if suffix:
                raise BuildError(sub(f, "suffix"), "needs keys: Kubernetes imports every key "
                                 "of envFrom as is, so a suffix applies only to listed keys")
            source: dict[str, Any] = {ref_key: target}
            if prefix:
                source["prefix"] = prefix
            sources.append(source)
    return sources, expanded


# --- resources, probes, security -----------------------------------------------------------


def resources(raw: Any, field: str = "resources") -> dict[str, Any]:
    if raw is None:
        return {}
    spec = node(raw, field)
    name = as_text(spec.get("profile"), sub(field, "profile"))
    if name:
        exclusive(spec, field, ("requests", "limits"))
        return copy.deepcopy(profile(name, RESOURCES, sub(field, "profile")))
    out = {}
    for key in ("requests", "limits"):
        values = resource_list(spec.get(key), sub(field, key))
        if values:
            out[key] = values
    return out


def probes(raw: Any, container_port: int) -> dict[str, Any]:
    if raw is None:
        return {}
    spec = node(raw, "probes")
    return {f"{kind}Probe": probe(node(spec[kind], sub("probes", kind)),
                                  sub("probes", kind), kind, container_port)
            for kind in PROBE_KINDS if spec.get(kind) is not None}


def probe(cfg: Mapping[str, Any], field: str, kind: str, container_port: int) -> dict[str, Any]:
    path = as_text(cfg.get("path"), sub(field, "path"))
    handler = choice(cfg.get("type") or ("http" if path else ""), sub(field, "type"),
                     ("http", "tcp", "exec", "grpc"))
    name = as_text(cfg.get("profile"), sub(field, "profile"))
    if name:
        exclusive(cfg, field, tuple(PROBE_TIMINGS))
        out: dict[str, Any] = dict(profile(name, PROBES, sub(field, "profile")))
    else:
        out = dict(PROBES[PROBE_DEFAULT])
        for key, minimum in PROBE_TIMINGS.items():
            value = as_int(cfg.get(key), sub(field, key), minimum=minimum)
            if value is not None:
                out[key] = value
    if kind != "readiness" and out["successThreshold"] != 1:
        raise BuildError(sub(field, "successThreshold"),
                         f"must be 1 for a {kind} probe, got {out['successThreshold']}")
    if handler == "exec":
        out["exec"] = {"command": string_list(cfg.get("command"), sub(field, "command"))}
        if not out["exec"]["command"]:
            raise BuildError(sub(field, "command"), "is required for an exec probe")
        return out
    port = as_port(cfg.get("port"), sub(field, "port"), named=handler != "grpc") \
        or container_port
    if not port:
        raise BuildError(sub(field, "port"), f"is required: the {handler} probe needs a port "
                         "and the container declares none")
    if handler == "http":
        out["httpGet"] = {"path": path or "/", "port": port, "scheme": "HTTP"}
    elif handler == "tcp":
        out["tcpSocket"] = {"port": port}
    else:
        out["grpc"] = {"port": port}
        service = as_text(cfg.get("service"), sub(field, "service"))
        if service:
            out["grpc"]["service"] = service
    return out


_SECURITY_BOOLS = frozenset({"allowPrivilegeEscalation", "readOnlyRootFilesystem",
                             "runAsNonRoot", "privileged"})
_SECURITY_INTS = frozenset({"runAsUser", "runAsGroup", "fsGroup"})


def security_context(raw: Any, field: str,
                     table: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """{profile} expands to the profile; explicit fields pass through, with the boolean
    and numeric ones typed (a template renders text) and capabilities as lists."""
    if raw is None:
        return {}
    spec = node(raw, field)
    name = as_text(spec.get("profile"), sub(field, "profile"))
    if name:
        exclusive(spec, field, tuple(k for k in spec if k != "profile"))
        return copy.deepcopy(profile(name, table, sub(field, "profile")))
    out: dict[str, Any] = {}
    for key, value in spec.items():
        f = sub(field, key)
        if key == "profile" or value is None or value == "":
            continue
        if key in _SECURITY_BOOLS:
            out[key] = as_bool(value, f)
        elif key in _SECURITY_INTS:
            out[key] = as_int(value, f, minimum=0)
        elif key == "capabilities":
            caps = node(value, f)
            out[key] = {k: string_list(caps[k], sub(f, k)) for k in ("add", "drop")
                        if caps.get(k) is not None}
        else:
            out[key] = value  # passed through; the API server validates it
    return out


# --- volumes -------------------------------------------------------------------------


def volumes(raw: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, vol in enumerate(nodes(raw, "volumes")):
        field = sub("volumes", i)
        name = required(vol.get("name"), sub(field, "name"))
        if any(v["name"] == name for v in out):
            raise BuildError(sub(field, "name"), f"volume {name!r} is declared twice")
        given = [k for k in VOLUME_SOURCES if k in vol]
        if len(given) != 1:
            raise BuildError(field, f"needs exactly one of {', '.join(VOLUME_SOURCES)}, got "
                             f"{', '.join(given) or 'none'}")
        kind = given[0]
        out.append({"name": name, kind: _volume_source(kind, node(vol[kind], sub(field, kind)),
                                                        sub(field, kind))})
    return out


def _volume_source(kind: str, src: Mapping[str, Any], f: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if kind == "configMap":
        out["name"] = required(src.get("name"), sub(f, "name"))
    elif kind == "secret":
        out["secretName"] = required(src.get("secretName") or src.get("name"),
                                     sub(f, "name"))
    elif kind == "persistentVolumeClaim":
        out["claimName"] = required(src.get("claimName"), sub(f, "claimName"))
        if as_text(src.get("readOnly"), sub(f, "readOnly")):
            out["readOnly"] = as_bool(src["readOnly"], sub(f, "readOnly"))
    elif kind == "hostPath":
        out["path"] = required(src.get("path"), sub(f, "path"))
        host_type = as_text(src.get("type"), sub(f, "type"))
        if host_type:
            out["type"] = host_type
    else:  # emptyDir
        medium = as_text(src.get("medium"), sub(f, "medium"))
        if medium:
            out["medium"] = choice(medium, sub(f, "medium"), ("Memory",))
        if as_text(src.get("sizeLimit"), sub(f, "sizeLimit")):
            out["sizeLimit"] = quantity(src["sizeLimit"], sub(f, "sizeLimit"))
    if kind in ("configMap", "secret"):
        _optional(out, src, f)
        mode = file_mode(src.get("defaultMode"), sub(f, "defaultMode"))
        if mode is not None:
            out["defaultMode"] = mode
        if src.get("items") is not None:
            out["items"] = [dict(i) for i in nodes(src["items"], sub(f, "items"))]
    return out


def volume_mounts(raw: Any, known: Collection[str]) -> list[dict[str, Any]]:
    out = []
    for i, mount in enumerate(nodes(raw, "volumeMounts")):
        field = sub("volumeMounts", i)
        name = required(mount.get("name"), sub(field, "name"))
        if name not in known:
            raise BuildError(sub(field, "name"), f"mounts volume {name!r}, which is not declared "
                             f"under volumes (declared: {', '.join(sorted(known)) or 'none'})")
        m: dict[str, Any] = {"name": name,
                             "mountPath": required(mount.get("mountPath"),
                                                   sub(field, "mountPath"))}
        sub_path = as_text(mount.get("subPath"), sub(field, "subPath"))
        if sub_path:
            m["subPath"] = sub_path
        if as_text(mount.get("readOnly"), sub(field, "readOnly")):
            m["readOnly"] = as_bool(mount["readOnly"], sub(field, "readOnly"))
        out.append(m)
    return out


__all__ = ["container", "env_from", "env_vars", "pod_spec", "probes", "resources",
           "security_context", "volume_mounts", "volumes"]
