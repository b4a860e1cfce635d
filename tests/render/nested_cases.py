"""A Katalog whose `AppEnvironment` entry creates a `CacheCluster` with a `custom:` block,
and whose `CacheCluster` entry renders a Deployment: the nested custom resource of
issue 33 (Orkestra's own examples), for the render and the cluster tests."""

from __future__ import annotations

from tests import helpers


def crd(kind: str, plural: str) -> str:
    return helpers.crd(kind, "nest.orksync.io", plural=plural).lstrip("\n")


CACHE_ENTRY = """\
    cachecluster:
      crdFile: ./cacheclusters.yaml
      operatorBox:
        onCreate:
          deployments:
            - name: "{{ .metadata.name }}-redis"
              image: redis:7
              replicas: "{{ .spec.size }}"
              reconcile: true
"""


def katalog(cache_box: str = CACHE_ENTRY) -> str:
    return """\
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: envs}
spec:
  crds:
    appenvironment:
      crdFile: ./appenvironments.yaml
      operatorBox:
        onCreate:
          custom:
            - apiVersion: nest.orksync.io/v1
              kind: CacheCluster
              metadata:
                name: "{{ .metadata.name }}-cache"
              spec:
                size: "{{ .spec.cacheSize }}"
""" + cache_box


def env(name: str, namespace: str, size: int = 2) -> str:
    return (f"apiVersion: nest.orksync.io/v1\nkind: AppEnvironment\nmetadata:\n"
            f"  name: {name}\n  namespace: {namespace}\nspec:\n  cacheSize: {size}\n")


def files(namespace: str, *, with_env: bool = True) -> dict[str, str]:
    out = {"appenvironments.yaml": crd("AppEnvironment", "appenvironments"),
           "cacheclusters.yaml": crd("CacheCluster", "cacheclusters"),
           "katalog.yaml": katalog()}
    if with_env:
        out["apps/dev.yaml"] = env("dev", namespace)
    return out
