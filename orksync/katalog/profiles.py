"""A Katalog's own profiles (Orkestra's `profiles:` block, its ProfileRegistry): named
presets a workload or policy entry names with `profile:` as it names a built-in one.
Pure over the file system: reads the file `profiles.include` names, under the repository
root.

    profiles:
      include: ./more-profiles.yaml      # a file holding `profiles:`; its lists come first
      resources:
        - name: org-small
          requests: {cpu: 50m, memory: 64Mi}
          limits: {cpu: 200m, memory: 256Mi}

`CLASSES` maps each class to the fields a definition may hold besides `name` and
`description` (Orkestra's *ProfileDef types). Orkestra's rules, kept here: every
definition has a name; a name appears once in its class; a field a class does not know is
an error (Orkestra's strict parse), with the nearest field suggested. A definition named
like a built-in profile shadows it: the Katalog's is used, with a warning
(orksync.render.user_profiles, which knows the built-in names). The `reconciler` class
tunes Orkestra's workers and queues; it is accepted and warned about like the
reconciler's own `profile:` (orksync.katalog.keys).

Where each class is used, and how a definition replaces `profile:`, is the render's
(orksync.render.user_profiles).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from orksync.katalog.layout import read_include

__all__ = ["CLASSES", "Profiles", "parse_profiles"]

CLASSES: dict[str, tuple[str, ...]] = {
    "resources": ("requests", "limits"),
    "probes": ("initialDelaySeconds", "periodSeconds", "failureThreshold",
               "successThreshold", "timeoutSeconds"),
    "containerSecurity": ("allowPrivilegeEscalation", "readOnlyRootFilesystem",
                          "runAsNonRoot", "runAsUser", "runAsGroup", "capabilities"),
    "podSecurity": ("runAsNonRoot", "runAsUser", "runAsGroup", "fsGroup"),
    "rollingUpdate": ("maxSurge", "maxUnavailable"),
    "networkPolicies": ("podSelector", "ingress", "egress", "policyTypes"),
    "resourceQuotas": ("hard",),
    "limitRanges": ("limits",),
    "hpa": ("minReplicas", "maxReplicas", "targetCPUUtilizationPercentage", "behavior"),
    "pdb": ("minAvailable", "maxUnavailable"),
    "reconciler": ("workers", "resync", "queue"),
}
_KEYS = ("include", *CLASSES)

# class -> profile name -> the definition's fields (without name and description)
Profiles = dict[str, dict[str, dict[str, Any]]]
Problem = tuple[list[str | int], str]  # (field path from the document root, message)


def parse_profiles(raw: Any, file: Path, root: Path) -> tuple[Profiles, list[Problem]]:
    """The Katalog's `profiles:` block (`raw`, from `file`) as class → name → fields, and
    its problems (a Katalog with any is refused, as Orkestra refuses it)."""
    if raw is None:
        return {}, []
    if not isinstance(raw, Mapping):
        return {}, [(["profiles"], "must be a map of profile classes (resources, probes, "
                     "...) to lists of profiles")]
    problems: list[Problem] = []
    for key in raw:
        if key not in _KEYS:
            near = difflib.get_close_matches(str(key), _KEYS, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            problems.append((["profiles", str(key)], f"unknown profile class {key!r}{hint}: "
                             f"one of {', '.join(_KEYS)}"))
    if problems:
        return {}, problems
    # (where it was written, the definition), included ones first (Orkestra prepends them)
    lists: dict[str, list[tuple[list[str | int], Any]]] = {c: [] for c in CLASSES}
    if raw.get("include") is not None:
        included, problem = read_include(raw["include"], file, root, "profiles")
        if problem:
            return {}, [(["profiles", "include"], problem)]
        for key, value in (included or {}).items():
            if key not in CLASSES:
                return {}, [(["profiles", "include"], f"{raw['include']!r}: unknown profile "
                             f"class {key!r}: one of {', '.join(CLASSES)}")]
            if not isinstance(value, list):
                return {}, [(["profiles", "include"], f"{raw['include']!r}: profiles.{key} "
                             "must be a list")]
            lists[key].extend((["profiles", "include"], d) for d in value)
    for cls in CLASSES:
        own = raw.get(cls)
        if own is None:
            continue
        if not isinstance(own, list):
            problems.append((["profiles", cls], "must be a list of profiles, each with a "
                             "name"))
            continue
        lists[cls].extend((["profiles", cls, i], d) for i, d in enumerate(own))
    out: Profiles = {}
    for cls, defs in lists.items():
        allowed = ("name", "description", *CLASSES[cls])
        for where, definition in defs:
            if not isinstance(definition, Mapping):
                problems.append((where, "must be a map with a name"))
                continue
            name = definition.get("name")
            if not isinstance(name, str) or not name:
                problems.append(([*where, "name"] if where[-1] != "include" else where,
                                 f"profiles.{cls}: a profile is missing its name"))
                continue
            unknown = [k for k in definition if k not in allowed]
            if unknown:
                near = difflib.get_close_matches(str(unknown[0]), allowed, n=1)
                hint = f" (did you mean {near[0]!r}?)" if near else ""
                problems.append(([*where, str(unknown[0])] if where[-1] != "include"
                                 else where, f"profiles.{cls} {name!r}: unknown field "
                                 f"{unknown[0]!r}{hint}: one of {', '.join(allowed)}"))
                continue
            if name in out.get(cls, {}):
                problems.append((where, f"profiles.{cls}: duplicate profile name {name!r}: "
                                 "names must be unique within a class"))
                continue
            out.setdefault(cls, {})[name] = {k: v for k, v in definition.items()
                                             if k not in ("name", "description")}
    return out, problems
