"""A Katalog's own profiles (orksync.katalog.profiles) put in place of the `profile:` that
names them, before the builder sees the entry. Pure.

Orkestra looks a profile name up in the Katalog's registry first (exact name), then among
its built-in profiles (any case); so here a `profile:` naming one of the Katalog's
profiles of the class used at that place is replaced by the profile's fields, rendered
as templates against the custom resource (Orkestra resolves them at reconcile time), and
any other name is left to the builder's built-in tables (orksync.render.builders.profiles).
The name is the rendered one, so `profile: "{{ .spec.size }}"` may name either.

`PLACES` says where each class is used. A profile and the explicit fields it expands to
are mutually exclusive, as for a built-in profile, with these exceptions taken from
Orkestra's types: a NetworkPolicy's own `podSelector` wins over the profile's; an HPA
profile's minReplicas, maxReplicas and targetCPUUtilizationPercentage apply only where
the entry sets none (its `behavior` is the profile's); a PDB profile sets the entry's
minAvailable and maxUnavailable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from orksync.katalog.layout import get_in
from orksync.katalog.model import Katalog
from orksync.render.builders import profiles as builtin

__all__ = ["PLACES", "ProfileError", "expand_profiles", "shadow_warnings"]

_POD = ((("resources",), "resources"), (("probes", "startup"), "probes"),
        (("probes", "liveness"), "probes"), (("probes", "readiness"), "probes"),
        (("securityContext",), "containerSecurity"), (("podSecurity",), "podSecurity"))
_ROLLING = ((("rollingUpdate",), "rollingUpdate"),)

# kind key -> (path of the map holding `profile:` inside the entry, profile class)
PLACES: dict[str, tuple[tuple[tuple[str, ...], str], ...]] = {
    "deployments": _POD + _ROLLING, "statefulSets": _POD + _ROLLING,
    "replicaSets": _POD, "jobs": _POD, "cronJobs": _POD, "pods": _POD,
    "networkPolicies": (((), "networkPolicies"),),
    "resourceQuotas": (((), "resourceQuotas"),),
    "limitRanges": (((), "limitRanges"),),
    "hpa": ((("behavior",), "hpa"),),
    "pdb": ((("behavior",), "pdb"),),
}

# the built-in profiles of each class (names matched in any case)
BUILTIN: dict[str, Mapping[str, Any]] = {
    "resources": builtin.RESOURCES, "probes": builtin.PROBES,
    "containerSecurity": builtin.CONTAINER_SECURITY, "podSecurity": builtin.POD_SECURITY,
    "rollingUpdate": builtin.ROLLING_UPDATE, "networkPolicies": builtin.NETWORK_POLICIES,
    "resourceQuotas": builtin.RESOURCE_QUOTAS, "limitRanges": builtin.LIMIT_RANGES,
    "hpa": builtin.HPA_BEHAVIORS, "pdb": builtin.PDB_BEHAVIORS,
}

# the fields a profile of the class may not be combined with (None: every other key of
# the map holding `profile:`, as the builders rule for the security contexts)
_EXCLUSIVE: dict[str, tuple[str, ...] | None] = {
    "resources": ("requests", "limits"),
    "probes": ("initialDelaySeconds", "periodSeconds", "failureThreshold",
               "successThreshold", "timeoutSeconds"),
    "containerSecurity": None, "podSecurity": None,
    "rollingUpdate": ("maxSurge", "maxUnavailable"),
    "networkPolicies": ("ingress", "egress", "policyTypes"),
    "resourceQuotas": ("hard",), "limitRanges": ("limits",),
    "hpa": ("scaleUp", "scaleDown"),
}

# (a profile's fields, the entry's `profile:` field naming it) -> the fields rendered
Render = Callable[[Any, str], Any]


class ProfileError(Exception):
    """A profile that cannot be put in place; `field` is relative to the entry."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(message)


def shadow_warnings(katalog: Katalog) -> list[str]:
    """One warning per profile of the Katalog named like a built-in one of its class
    (Orkestra warns the same way): the Katalog's is used."""
    return [f"{katalog.source.file}: Katalog/{katalog.name}: profiles.{cls} {name!r} "
            "shadows a built-in profile: the Katalog's is used"
            for cls, named in katalog.profiles.items() for name in named
            if name.lower() in BUILTIN.get(cls, {})]


def expand_profiles(kind_key: str, entry: dict[str, Any],
                    profiles: Mapping[str, Mapping[str, Mapping[str, Any]]],
                    render: Render) -> dict[str, Any]:
    """`entry` (rendered) with every `profile:` that names one of `profiles` replaced by
    that profile's fields (`render`ed); `entry` itself when none does."""
    if not profiles:
        return entry
    for place, cls in PLACES.get(kind_key, ()):
        block = get_in(entry, place)
        if not isinstance(block, Mapping):
            continue
        name = block.get("profile")
        definition = profiles.get(cls, {}).get(name.strip()) \
            if isinstance(name, str) else None
        if definition is None:
            continue  # a built-in profile (or an unknown one): the builder's
        field = ".".join((*place, "profile"))
        fields = render(dict(definition), field)
        if not isinstance(fields, Mapping):
            raise ProfileError(field, f"profile {name!r} (profiles.{cls}) must be a map")
        entry = _with_profile(entry, place, block, cls, fields, field)
    return entry


def _with_profile(entry: dict[str, Any], place: tuple[str, ...], block: Mapping[str, Any],
                  cls: str, fields: Mapping[str, Any], field: str) -> dict[str, Any]:
    exclusive = _EXCLUSIVE.get(cls, ())
    keys = [k for k in block if k != "profile"] if exclusive is None else list(exclusive)
    owner: Mapping[str, Any] = block
    if cls == "pdb":  # its fields are the entry's own
        keys, owner = ["minAvailable", "maxUnavailable"], entry
    given = [k for k in keys if _set(owner.get(k))]
    if given:
        raise ProfileError(field, f"cannot be combined with {', '.join(given)}: use either "
                           "the profile or explicit values")
    out = dict(entry)
    new_block = {k: v for k, v in block.items() if k != "profile"}
    if cls == "hpa":
        behavior = fields.get("behavior")
        if isinstance(behavior, Mapping):
            new_block.update({k: v for k, v in behavior.items() if k != "profile"})
        for key in ("minReplicas", "maxReplicas", "targetCPUUtilizationPercentage"):
            if _set(fields.get(key)) and not _set(entry.get(key)):
                out[key] = fields[key]
    elif cls == "pdb":
        out.update({k: v for k, v in fields.items() if _set(v)})
    else:
        for key, value in fields.items():
            if key == "podSelector" and _set(block.get("podSelector")):
                continue  # the entry's own selector wins
            new_block[key] = value
    if not place:
        out.update(new_block)
        out.pop("profile", None)
        return out
    return _put(out, place, new_block)


def _set(value: Any) -> bool:
    return value not in (None, "", [], {})


def _put(entry: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """`entry` with `value` at `path`, the maps on the way copied (the rendered entry's
    maps may be shared with other entries)."""
    node = entry
    for step in path[:-1]:
        nxt = dict(node.get(step) or {})
        node[step] = nxt
        node = nxt
    node[path[-1]] = value
    return entry
