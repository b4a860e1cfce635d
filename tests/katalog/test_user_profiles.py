"""A Katalog's own `profiles:` (orksync.katalog.profiles, orksync.render.user_profiles):
usable by name like a built-in profile in every class orksync renders, replacing a
built-in one of the same name (with Orkestra's warning), and refused with file, line and
field when broken."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orksync.katalog.loader import load_repository
from orksync.render.engine import render_catalog
from tests.helpers import CRD, widget, write_repo

PROFILES = """
profiles:
  resources:
    - name: org-small
      description: the team's default
      requests: {cpu: 50m, memory: "{{ .spec.mem }}"}
      limits: {cpu: 200m, memory: 256Mi}
    - name: small                      # shadows the built-in `small`
      requests: {cpu: 1m, memory: 1Mi}
      limits: {cpu: 2m, memory: 2Mi}
  probes:
    - {name: org-slow, initialDelaySeconds: 60, failureThreshold: 9}
  containerSecurity:
    - {name: org-locked, runAsNonRoot: true, readOnlyRootFilesystem: true}
  podSecurity:
    - {name: org-pod, runAsUser: 4242, fsGroup: 4242}
  rollingUpdate:
    - {name: org-roll, maxSurge: "2", maxUnavailable: "0"}
  networkPolicies:
    - name: org-monitoring
      ingress: [{from: [{namespaceSelector: {team: platform}}]}]
      policyTypes: [Ingress]
  resourceQuotas:
    - {name: org-medium, hard: {pods: "25", cpu: "4"}}
  limitRanges:
    - name: org-defaults
      limits: [{type: Container, default: {cpu: 500m}, defaultRequest: {cpu: 100m}}]
  hpa:
    - name: org-conservative
      targetCPUUtilizationPercentage: "65"
      maxReplicas: "7"
      behavior: {scaleDown: {stabilizationWindowSeconds: 300}}
  pdb:
    - {name: org-one, minAvailable: "1"}
"""

ENTRY = """
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: widgets}
spec:
  crds:
    widget:
      crdFile: ./crd.yaml
      operatorBox:
        onCreate:
          deployments:
            - name: "{{ .metadata.name }}"
              image: nginx
              port: "8080"
              resources: {profile: org-small}
              probes: {liveness: {type: http, path: /, profile: org-slow}}
              securityContext: {profile: "{{ .spec.security }}"}
              podSecurity: {profile: org-pod}
              rollingUpdate: {profile: org-roll}
            - name: "{{ .metadata.name }}-builtin"
              image: nginx
              resources: {profile: SMALL}
              securityContext: {profile: restricted}
          networkPolicies:
            - {name: "{{ .metadata.name }}-np", podSelector: {app: web}, profile: org-monitoring}
          resourceQuotas:
            - {name: "{{ .metadata.name }}-quota", profile: org-medium}
          limitRanges:
            - {name: "{{ .metadata.name }}-limits", profile: org-defaults}
          hpa:
            - name: "{{ .metadata.name }}-hpa"
              scaleTargetRef: {apiVersion: apps/v1, kind: Deployment}
              minReplicas: "2"
              behavior: {profile: org-conservative}
          pdb:
            - {name: "{{ .metadata.name }}-pdb", selector: {app: web},
               behavior: {profile: org-one}}
"""


def render(tmp_path: Path, katalog: str, extra: dict[str, str] | None = None
           ) -> tuple[Any, Any]:
    write_repo(tmp_path, {"op/katalog.yaml": katalog, "op/crd.yaml": CRD,
                          "apps/a.yaml": widget("a", mem="96Mi", security="org-locked"),
                          **(extra or {})})
    catalog = load_repository(tmp_path)
    return catalog, render_catalog(catalog) if not catalog.errors else None


def bodies(rendered: Any) -> dict[str, dict[str, Any]]:
    return {str(o.ref): o.body for o in rendered.objects}


def test_a_katalog_profile_is_usable_by_name_in_every_class(tmp_path: Path) -> None:
    catalog, rendered = render(tmp_path, ENTRY + PROFILES)
    assert not catalog.errors, [str(e) for e in catalog.errors]
    assert not rendered.errors, [str(e) for e in rendered.errors]
    got = bodies(rendered)
    pod = got["Deployment/default/a"]["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    # templates in a profile are rendered against the custom resource
    assert c["resources"] == {"requests": {"cpu": "50m", "memory": "96Mi"},
                              "limits": {"cpu": "200m", "memory": "256Mi"}}
    probe = c["livenessProbe"]
    assert (probe["initialDelaySeconds"], probe["failureThreshold"]) == (60, 9)
    assert probe["httpGet"]["port"] == 8080
    # a templated profile name may name a Katalog profile
    assert c["securityContext"] == {"runAsNonRoot": True, "readOnlyRootFilesystem": True}
    assert pod["securityContext"] == {"runAsUser": 4242, "fsGroup": 4242}
    strategy = got["Deployment/default/a"]["spec"]["strategy"]
    assert strategy["rollingUpdate"] == {"maxSurge": 2, "maxUnavailable": 0}
    np = got["NetworkPolicy/default/a-np"]["spec"]
    assert np["podSelector"] == {"matchLabels": {"app": "web"}}  # the entry's own wins
    assert np["policyTypes"] == ["Ingress"]
    assert np["ingress"][0]["from"][0]["namespaceSelector"] == \
        {"matchLabels": {"team": "platform"}}
    assert got["ResourceQuota/default/a-quota"]["spec"]["hard"] == {"pods": "25", "cpu": "4"}
    assert got["LimitRange/default/a-limits"]["spec"]["limits"] == [
        {"type": "Container", "default": {"cpu": "500m"}, "defaultRequest": {"cpu": "100m"}}]
    hpa = got["HorizontalPodAutoscaler/default/a-hpa"]["spec"]
    # the entry's minReplicas stands; the profile gives what the entry does not set
    assert (hpa["minReplicas"], hpa["maxReplicas"]) == (2, 7)
    assert hpa["metrics"][0]["resource"]["target"]["averageUtilization"] == 65
    assert hpa["behavior"] == {"scaleDown": {"stabilizationWindowSeconds": 300}}
    assert got["PodDisruptionBudget/default/a-pdb"]["spec"]["minAvailable"] == 1


def test_a_katalog_profile_named_like_a_built_in_one_replaces_it_with_a_warning(
        tmp_path: Path) -> None:
    _, rendered = render(tmp_path, ENTRY + PROFILES)
    assert not rendered.errors, [str(e) for e in rendered.errors]
    (c,) = bodies(rendered)["Deployment/default/a-builtin"]["spec"]["template"]["spec"][
        "containers"]
    # `SMALL` matches the built-in `small` in any case, and the Katalog's `small` exactly:
    # Orkestra matches user names exactly, so the built-in one is used here...
    assert c["resources"]["requests"] == {"cpu": "100m", "memory": "128Mi"}
    # ...and built-in profiles of classes the Katalog also defines still work
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    shadow = [w for w in rendered.warnings if "shadows a built-in profile" in w]
    assert shadow == ["op/katalog.yaml: Katalog/widgets: profiles.resources 'small' shadows "
                      "a built-in profile: the Katalog's is used"]
    exact = ENTRY.replace("resources: {profile: SMALL}", "resources: {profile: small}")
    _, rendered = render(tmp_path / "exact", exact + PROFILES)
    (c,) = bodies(rendered)["Deployment/default/a-builtin"]["spec"]["template"]["spec"][
        "containers"]
    assert c["resources"] == {"requests": {"cpu": "1m", "memory": "1Mi"},
                              "limits": {"cpu": "2m", "memory": "2Mi"}}


def test_profiles_from_an_include_come_first_and_are_usable(tmp_path: Path) -> None:
    katalog = ENTRY + "profiles:\n  include: ./more.yaml\n  pdb:\n    - {name: org-two, " \
        "minAvailable: '2'}\n"
    more = PROFILES.replace("  pdb:\n    - {name: org-one, minAvailable: \"1\"}\n", "")
    catalog, rendered = render(tmp_path, katalog, {"op/more.yaml": more})
    assert not catalog.errors, [str(e) for e in catalog.errors]
    # org-one is defined nowhere now: the builder says it is unknown
    assert any("unknown profile 'org-one'" in str(e) for e in rendered.errors)
    katalog = katalog.replace("org-two", "org-one")
    catalog, rendered = render(tmp_path / "b", katalog, {"op/more.yaml": more})
    assert not rendered.errors, [str(e) for e in rendered.errors]
    got = bodies(rendered)
    assert got["PodDisruptionBudget/default/a-pdb"]["spec"]["minAvailable"] == 2
    assert got["ResourceQuota/default/a-quota"]["spec"]["hard"] == {"pods": "25", "cpu": "4"}


@pytest.mark.parametrize(("profiles", "field", "message"), [
    ("profiles:\n  resource: []\n", "profiles.resource",
     "unknown field 'resource' (did you mean 'resources'?)"),
    ("profiles:\n  resources:\n    - {requests: {cpu: 1m}}\n", "profiles.resources[0].name",
     "a profile is missing its name"),
    ("profiles:\n  resources:\n    - {name: a}\n    - {name: a}\n", "profiles.resources[1]",
     "duplicate profile name 'a'"),
    ("profiles:\n  pdb:\n    - {name: a, minAvailble: '1'}\n", "profiles.pdb[0].minAvailble",
     "unknown field 'minAvailble' (did you mean 'minAvailable'?)"),
    ("profiles:\n  include: ../../outside.yaml\n", "profiles.include",
     "points outside the repository"),
    ("profiles: [a]\n", "profiles", "must be a map"),
])
def test_a_broken_profiles_block_refuses_the_katalog_naming_file_line_and_field(
        tmp_path: Path, profiles: str, field: str, message: str) -> None:
    catalog, _ = render(tmp_path, ENTRY + profiles)
    found = [str(e) for e in catalog.errors if f" {field}" in str(e)]
    assert len(found) == 1 and message in found[0], [str(e) for e in catalog.errors]
    assert found[0].startswith("op/katalog.yaml:"), found[0]
    assert found[0].split()[0].split(":")[1].isdigit(), found[0]  # a line
    assert not catalog.crs


def test_a_katalog_profile_and_the_fields_it_sets_cannot_be_combined(tmp_path: Path) -> None:
    katalog = ENTRY.replace("resources: {profile: org-small}",
                            "resources: {profile: org-small, limits: {cpu: 1}}") + PROFILES
    _, rendered = render(tmp_path, katalog)
    found = [str(e) for e in rendered.errors if "deployments[0].resources.profile" in str(e)]
    assert len(found) == 1 and "cannot be combined with limits" in found[0], \
        [str(e) for e in rendered.errors]


def test_reconciler_profiles_are_accepted_with_a_warning(tmp_path: Path) -> None:
    katalog = ENTRY.split("          networkPolicies:")[0].replace("org-", "") + \
        "profiles:\n  reconciler:\n    - {name: fast, workers: 8}\n"
    catalog, rendered = render(tmp_path, katalog.replace('"{{ .spec.security }}"', "baseline")
                               .replace("{type: http, path: /, profile: slow}", "{type: http}")
                               .replace("profile: pod}", "profile: baseline}")
                               .replace("profile: roll}", "profile: safe}"))
    assert not catalog.errors and not rendered.errors, rendered.errors
    assert [w for w in catalog.warnings if "profiles.reconciler" in w] == [
        "op/katalog.yaml:24: Katalog/widgets: profiles.reconciler: accepted, not acted on: "
        "reconciler profiles tune Orkestra's workers and queues; a setting of Orkestra's "
        "controller process, not read by orksync: the agent (`orksync agent`) runs one set "
        "of informers, one work queue and its workers for all Katalogs, tuned by its own "
        "flags (`--interval`, `--resync-interval`, `--repair-workers`), not per Katalog"]
