"""Service, Ingress and NetworkPolicy: Orkestra's builders (semantics §2.4). Pure.

Service: `port` required (> 0), `targetPort` defaults to `port` (a name is kept as a named
port), `type` ClusterIP/NodePort/LoadBalancer, `protocol` TCP default, `selector` = user
selector plus the forced `orkestra-owner`. Fix of bug #9 (§7.2): `headless: true` gives
`clusterIP: None` (ClusterIP services only). `nodePort` is set when given (NodePort or
LoadBalancer services only).

Ingress: one rule (`host`, one path → `serviceName`:`servicePort`, both required), `path`
default `/`, `pathType` default Prefix, `className` → ingressClassName, `annotations`.
`tls: {create: true}` → `tls: [{hosts (default [host]), secretName (default <cr>-tls)}]`;
the certificate Secret itself is made elsewhere (the engine/secrets layer, from
tls.secretName/hosts/validFor). orksync also writes the tls block when `tls.secretName` is
given without `create` (an existing secret); Orkestra ignores tls then.

NetworkPolicy: `podSelector` (flat labels; empty = every pod), `ingress[] {from[], ports[]}`,
`egress[] {to[], ports[]}`; a peer is `{podSelector, namespaceSelector, ipBlock {cidr,
except}}` and an empty peer means "pods of this namespace" (Orkestra). A port is `{protocol
(default TCP), port (a number → int, else a named port), endPort}`. `policyTypes` default:
Ingress when `ingress` is present, Egress when `egress` is present. `profile`
(profiles.NETWORK_POLICIES) cannot be combined with ingress/egress/policyTypes. Deliberate
difference: `namespaceSelector: {}` selects every namespace (Kubernetes' meaning);
Orkestra drops an empty namespaceSelector, which turns the peer into "this namespace".
`fromNetworkPolicy`/`fromNamespace`/`toNamespaces` are the engine's (copies).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from orksync.render.builders import BuildContext, BuildError, metadata
from orksync.render.builders.common import (
    OWNER_LABEL,
    as_bool,
    as_port,
    as_text,
    choice,
    exclusive,
    node,
    nodes,
    profile,
    protocol,
    required,
    selector,
    string_list,
    string_map,
    sub,
)
from orksync.render.builders.profiles import NETWORK_POLICIES
from orksync.render.coercion import go_atoi, parse_port

SERVICE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer")
PATH_TYPES = ("Prefix", "Exact", "ImplementationSpecific")
POLICY_TYPES = ("Ingress", "Egress")


def build_service(entry: Mapping[str, Any], ctx: BuildContext) -> dict[str, Any]:
    port = parse_port(as_text(entry.get("port"), "port"))
    if port <= 0:
        raise BuildError("port", "must be a port number above 0, got "
                         f"{as_text(entry.get('port'), 'port')!r}")
    target_text = as_text(entry.get("targetPort"), "targetPort")
    target: int | str = parse_port(target_text) or port  # Orkestra: invalid/0 → port
    if target_text and go_atoi(target_text) is None:  # a name: the pod's named port
        target = as_port(target_text, "targetPort", named=True) or port
    svc_type = as_text(entry.get("type"), "type") or "ClusterIP"
    if svc_type not in SERVICE_TYPES:
        raise BuildError("type", f"must be one of {', '.join(SERVICE_TYPES)}, got {svc_type!r}")
    selector_labels = string_map(entry.get("selector"), "selector")
    selector_labels[OWNER_LABEL] = ctx.owner_key
    spec: dict[str, Any] = {"type": svc_type, "selector": selector_labels}
    if as_bool(entry.get("headless"), "headless"):  # bug #9: clusterIP None, not type None
        if svc_type != "ClusterIP":
            raise BuildError("headless", f"applies to ClusterIP services only, not {svc_type}")
        spec["clusterIP"] = "None"
    svc_port: dict[str, Any] = {"port": port, "targetPort": target,
                                "protocol": protocol(entry.get("protocol"), "protocol")}
    node_port = as_port(entry.get("nodePort"), "nodePort")
    if node_port:
        if svc_type == "ClusterIP":
            raise BuildError("nodePort", "applies to NodePort and LoadBalancer services only")
        svc_port["nodePort"] = node_port
    spec["ports"] = [svc_port]
    return {"apiVersion": "v1", "kind": "Service", "metadata": metadata(ctx), "spec": spec}


def build_ingress(entry: Mapping[str, Any], ctx: BuildContext) -> dict[str, Any]:
    host = as_text(entry.get("host"), "host")
    service_port = as_port(entry.get("servicePort"), "servicePort")
    if service_port is None:
        raise BuildError("servicePort", "is required (the backend Service's port number)")
    path = {"path": as_text(entry.get("path"), "path") or "/",
            "pathType": choice(entry.get("pathType"), "pathType", PATH_TYPES, "Prefix"),
            "backend": {"service": {"name": required(entry.get("serviceName"), "serviceName"),
                                    "port": {"number": service_port}}}}
    rule: dict[str, Any] = {"host": host} if host else {}
    rule["http"] = {"paths": [path]}
    spec: dict[str, Any] = {}
    class_name = as_text(entry.get("className"), "className")
    if class_name:
        spec["ingressClassName"] = class_name
    spec["rules"] = [rule]
    tls = node(entry.get("tls"), "tls")
    secret_name = as_text(tls.get("secretName"), "tls.secretName")
    if as_bool(tls.get("create"), "tls.create") or secret_name:
        block: dict[str, Any] = {}
        hosts = string_list(tls.get("hosts"), "tls.hosts") or ([host] if host else [])
        if hosts:
            block["hosts"] = hosts
        block["secretName"] = secret_name or f"{ctx.cr_name}-tls"
        spec["tls"] = [block]
    annotations = string_map(entry.get("annotations"), "annotations")
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": metadata(ctx, annotations), "spec": spec}


def build_network_policy(entry: Mapping[str, Any], ctx: BuildContext) -> dict[str, Any]:
    spec: dict[str, Any] = {"podSelector": _label_selector(entry.get("podSelector"),
                                                            "podSelector")}
    name = as_text(entry.get("profile"), "profile")
    if name:
        exclusive(entry, "", ("ingress", "egress", "policyTypes"))
        spec.update(copy.deepcopy(profile(name, NETWORK_POLICIES, "profile")))
    else:
        for key, peers in (("ingress", "from"), ("egress", "to")):
            rules = [_rule(r, sub(key, i), peers) for i, r in enumerate(nodes(entry.get(key),
                                                                             key))]
            if rules:
                spec[key] = rules
        types = [choice(t, sub("policyTypes", i), POLICY_TYPES)
                 for i, t in enumerate(string_list(entry.get("policyTypes"), "policyTypes"))]
        if not types:
            types = [t for t, key in (("Ingress", "ingress"), ("Egress", "egress"))
                     if entry.get(key) is not None]
        if types:
            spec["policyTypes"] = types
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": metadata(ctx), "spec": spec}


def _label_selector(value: Any, field: str) -> dict[str, Any]:
    labels = selector(value, field)
    return {"matchLabels": labels} if labels else {}


def _rule(rule: Mapping[str, Any], field: str, peers_key: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    peers = [_peer(p, sub(sub(field, peers_key), i))
             for i, p in enumerate(nodes(rule.get(peers_key), sub(field, peers_key)))]
    if peers:
        out[peers_key] = peers
    ports = [_port(p, sub(sub(field, "ports"), i))
             for i, p in enumerate(nodes(rule.get("ports"), sub(field, "ports")))]
    if ports:
        out["ports"] = ports
    return out


def _peer(peer: Mapping[str, Any], field: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if peer.get("podSelector") is not None:
        out["podSelector"] = _label_selector(peer["podSelector"], sub(field, "podSelector"))
    if peer.get("namespaceSelector") is not None:
        out["namespaceSelector"] = _label_selector(peer["namespaceSelector"],
                                                   sub(field, "namespaceSelector"))
    if peer.get("ipBlock") is not None:
        if out:
            raise BuildError(sub(field, "ipBlock"), "cannot be combined with podSelector or "
                             "namespaceSelector in one peer: use a separate peer")
        block = node(peer["ipBlock"], sub(field, "ipBlock"))
        ip: dict[str, Any] = {"cidr": required(block.get("cidr"), sub(field, "ipBlock.cidr"),
                                               " (such as 10.0.0.0/8)")}
        excepted = string_list(block.get("except"), sub(field, "ipBlock.except"))
        if excepted:
            ip["except"] = excepted
        out["ipBlock"] = ip
    return out or {"podSelector": {}}


def _port(port: Mapping[str, Any], field: str) -> dict[str, Any]:
    out: dict[str, Any] = {"protocol": protocol(port.get("protocol"), sub(field, "protocol"))}
    number = as_port(port.get("port"), sub(field, "port"), named=True)
    if number is not None:
        out["port"] = number
    end = as_port(port.get("endPort"), sub(field, "endPort"))
    if end is not None:
        if not isinstance(number, int) or not isinstance(end, int) or end < number:
            raise BuildError(sub(field, "endPort"), "needs a numeric port not above it, got "
                             f"port {number!r} and endPort {end}")
        out["endPort"] = end
    return out
