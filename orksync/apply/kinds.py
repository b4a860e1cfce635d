"""What the apply engine does differently per kind, in one table. Pure.

Everything else about an object's write comes from its write policy and directives (the
render's decisions); a kind is named here only when the API server or a runner needs
something no directive says:

* `Secret`: written by the Secret runner (orksync.apply.secrets: `once:`, `rotateAfter:`,
  `tls:`), never by a plain apply, and always decided with a request (its live value is
  compared there, not in this process's fingerprint);
* `CustomResourceDefinition`: waited on until Established and served, and it holds back
  the custom resources of its group;
* the kinds `fromConfigMap`, `fromNetworkPolicy`, `fromResourceQuota` and
  `fromLimitRange` copy from (semantics §2.4): how the live source goes into the body.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from orksync.model import ObjRef

CRD_API = "apiextensions.k8s.io/v1"

CopySource = Callable[[dict[str, Any], Mapping[str, Any]], None]


@dataclass(frozen=True, slots=True)
class KindPolicy:
    secret: bool = False  # written by the Secret runner
    crd: bool = False  # waited on until Established; holds back its group's teardown
    copy_source: CopySource | None = None  # how a `from<Kind>` source merges into the body


def _copy_data(body: dict[str, Any], source: Mapping[str, Any]) -> None:
    body["data"] = {**(source.get("data") or {}), **(body.get("data") or {})}


def _copy_spec(body: dict[str, Any], source: Mapping[str, Any]) -> None:
    body["spec"] = copy.deepcopy(source.get("spec") or {})


def _copy_hard(body: dict[str, Any], source: Mapping[str, Any]) -> None:
    body["spec"] = {"hard": dict((source.get("spec") or {}).get("hard") or {})}


def _copy_limits(body: dict[str, Any], source: Mapping[str, Any]) -> None:
    body["spec"] = {"limits": copy.deepcopy((source.get("spec") or {}).get("limits") or [])}


PLAIN = KindPolicy()
POLICIES: dict[tuple[str, str], KindPolicy] = {  # (apiVersion, kind)
    ("v1", "Secret"): KindPolicy(secret=True),
    (CRD_API, "CustomResourceDefinition"): KindPolicy(crd=True),
    ("v1", "ConfigMap"): KindPolicy(copy_source=_copy_data),
    ("networking.k8s.io/v1", "NetworkPolicy"): KindPolicy(copy_source=_copy_spec),
    ("v1", "ResourceQuota"): KindPolicy(copy_source=_copy_hard),
    ("v1", "LimitRange"): KindPolicy(copy_source=_copy_limits),
}


def policy(ref: ObjRef) -> KindPolicy:
    return POLICIES.get((ref.api_version, ref.kind), PLAIN)
