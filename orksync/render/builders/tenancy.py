"""Namespace, ResourceQuota and LimitRange: Orkestra's builders (semantics §2.4). Pure.

* Namespace (cluster-scoped): labels; `finalizers` go to metadata.finalizers. Orkestra's
  schema calls them "additional finalizers beyond the standard `kubernetes` one" (which
  lives in spec.finalizers), but spec.finalizers cannot be changed by an update and is
  reserved for namespace-lifecycle controllers, while metadata.finalizers is where a
  controller's cleanup finalizer belongs; the studied Orkestra builder drops them.
* ResourceQuota: `hard` {resource: quantity} or `profile` (profiles.RESOURCE_QUOTAS), not
  both. An invalid quantity is an error naming the key (Orkestra skips it silently, so a
  template over a missing field made the limit vanish).
* LimitRange: `limits[] {type (Container, Pod or PersistentVolumeClaim; required), max,
  min, default, defaultRequest, maxLimitRequestRatio}` with validated quantities, or
  `profile` (profiles.LIMIT_RANGES, orksync's); not both (Orkestra uses the profile only
  when `limits` is empty).
* `fromResourceQuota`/`fromLimitRange`/`fromNamespace`/`toNamespaces` are the engine's.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from orksync.render.builders import BuildContext, metadata
from orksync.render.builders.common import (
    as_text,
    choice,
    exclusive,
    nodes,
    profile,
    resource_list,
    string_list,
    sub,
)
from orksync.render.builders.profiles import LIMIT_RANGES, RESOURCE_QUOTAS

LIMIT_TYPES = ("Container", "Pod", "PersistentVolumeClaim")
LIMIT_FIELDS = ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio")


def build_namespace(entry: Mapping[str, Any], ctx: BuildContext) -> dict[str, Any]:
    meta = metadata(ctx)
    finalizers = string_list(entry.get("finalizers"), "finalizers")
    if finalizers:
        meta["finalizers"] = list(dict.fromkeys(finalizers))
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def build_resource_quota(entry: Mapping[str, Any], ctx: BuildContext) -> dict[str, Any]:
    name = as_text(entry.get("profile"), "profile")
    if name:
        exclusive(entry, "", ("hard",))
        hard = dict(profile(name, RESOURCE_QUOTAS, "profile"))
    else:
        hard = resource_list(entry.get("hard"), "hard")
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": metadata(ctx),
            "spec": {"hard": hard} if hard else {}}


def build_limit_range(entry: Mapping[str, Any], ctx: BuildContext) -> dict[str, Any]:
    name = as_text(entry.get("profile"), "profile")
    if name:
        exclusive(entry, "", ("limits",))
        limits = copy.deepcopy(profile(name, LIMIT_RANGES, "profile"))
    else:
        limits = []
        for i, item in enumerate(nodes(entry.get("limits"), "limits")):
            field = sub("limits", i)
            limit: dict[str, Any] = {"type": choice(item.get("type"), sub(field, "type"),
                                                    LIMIT_TYPES)}
            for key in LIMIT_FIELDS:
                values = resource_list(item.get(key), sub(field, key))
                if values:
                    limit[key] = values
            limits.append(limit)
    return {"apiVersion": "v1", "kind": "LimitRange", "metadata": metadata(ctx),
            "spec": {"limits": limits}}
