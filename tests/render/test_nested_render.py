"""A custom resource that a `custom:` block creates, of a kind an entry of the same
Katalog reconciles, is rendered through that entry in the same render (issue 33):
orksync.render.engine.render_nested."""

from __future__ import annotations

from pathlib import Path

from orksync.katalog.loader import load_repository
from orksync.model import ObjRef
from orksync.render.engine import MAX_NESTED_DEPTH, render_catalog
from tests.helpers import write_repo
from tests.render import nested_cases as nc

DEV = ObjRef(api_version="nest.orksync.io/v1", kind="AppEnvironment", namespace="team",
             name="dev")
CACHE = ObjRef(api_version="nest.orksync.io/v1", kind="CacheCluster", namespace="team",
               name="dev-cache")
REDIS = ObjRef(api_version="apps/v1", kind="Deployment", namespace="team",
               name="dev-cache-redis")


def test_a_created_custom_resource_is_rendered_through_its_own_entry(tmp_path: Path) -> None:
    rendered = render_catalog(load_repository(write_repo(tmp_path, nc.files("team"))))
    assert not rendered.errors, rendered.errors
    by_ref = {o.ref: o for o in rendered.objects}
    cache, redis = by_ref[CACHE], by_ref[REDIS]
    assert cache.owner == DEV and redis.owner == CACHE
    assert redis.body["spec"]["replicas"] == 2  # the CacheCluster's spec, as rendered
    assert redis.origin.crd == "cachecluster" and redis.origin.file == "apps/dev.yaml"
    assert redis.stage > cache.stage  # applied after the custom resource that owns it


def test_custom_resources_that_create_each_other_are_refused_naming_the_chain(
        tmp_path: Path) -> None:
    loop = nc.CACHE_ENTRY + """\
        onReconcile:
          custom:
            - apiVersion: nest.orksync.io/v1
              kind: AppEnvironment
              metadata: {name: "{{ .metadata.name }}-again"}
"""
    files = {**nc.files("team"), "katalog.yaml": nc.katalog(loop)}
    rendered = render_catalog(load_repository(write_repo(tmp_path, files)))
    assert len(rendered.errors) == 1
    message = str(rendered.errors[0])
    assert "AppEnvironment/dev -> CacheCluster/dev-cache -> AppEnvironment/dev-cache-again" \
        in message and "comes back to kind AppEnvironment" in message
    assert "apps/dev.yaml" in message
    assert not [o for o in rendered.objects if o.owner is not None]  # nothing of it


def test_a_chain_deeper_than_the_limit_is_refused(tmp_path: Path) -> None:
    kinds = [f"Level{i}" for i in range(MAX_NESTED_DEPTH + 2)]
    entries = []
    files: dict[str, str] = {}
    for i, kind in enumerate(kinds):
        plural = kind.lower() + "s"
        files[f"{plural}.yaml"] = nc.crd(kind, plural)
        box = "          configMaps:\n            - name: \"{{ .metadata.name }}-cm\"\n"
        if i + 1 < len(kinds):
            box = ("          custom:\n            - apiVersion: nest.orksync.io/v1\n"
                   f"              kind: {kinds[i + 1]}\n"
                   "              metadata: {name: \"{{ .metadata.name }}-x\"}\n")
        entries.append(f"    {kind.lower()}:\n      crdFile: ./{plural}.yaml\n"
                       f"      operatorBox:\n        onCreate:\n{box}")
    files["katalog.yaml"] = ("apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\n"
                             "metadata: {name: deep}\nspec:\n  crds:\n" + "".join(entries))
    files["apps/top.yaml"] = ("apiVersion: nest.orksync.io/v1\nkind: Level0\nmetadata:\n"
                              "  name: top\n  namespace: team\n")
    rendered = render_catalog(load_repository(write_repo(tmp_path, files)))
    assert len(rendered.errors) == 1
    assert f"nest more than {MAX_NESTED_DEPTH} deep" in str(rendered.errors[0])
