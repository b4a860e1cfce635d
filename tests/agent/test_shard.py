"""Sharding a render across replicas."""

from __future__ import annotations

from orksync.agent.shard import shard_filter, shard_label, shard_selector
from orksync.katalog.loader import load_repository
from orksync.model import MANAGED_SELECTOR, SHARD_LABEL, is_plain
from orksync.render.engine import render_catalog
from orksync.sync import mark_for_cleanup
from tests.helpers import REPO_EXAMPLE


def test_every_object_lands_in_exactly_one_shard_with_its_owner() -> None:
    rendered = render_catalog(load_repository(REPO_EXAMPLE))
    parts = [shard_filter(rendered, i, 3) for i in range(3)]
    refs = [o.ref for p in parts for o in p.objects]
    assert sorted(refs) == sorted(o.ref for o in rendered.objects)  # a partition
    for part in parts:
        crs = {o.ref for o in part.objects if o.owner is None}
        assert all(o.owner in crs for o in part.objects if o.owner is not None)
    crd_shards = [i for i, p in enumerate(parts)
                  if any(o.ref.kind == "CustomResourceDefinition" for o in p.objects)]
    assert crd_shards == [0]
    plain = [(i, str(o.ref)) for i, p in enumerate(parts) for o in p.objects if is_plain(o)]
    assert plain == [(0, "Namespace/team-a"), (0, "Namespace/team-b"),
                     (0, "ClusterRole/webapp-viewer"), (0, "RoleBinding/team-a/webapp-viewers")]


def test_one_shard_is_the_whole_render() -> None:
    rendered = render_catalog(load_repository(REPO_EXAMPLE))
    assert shard_filter(rendered, 0, 1) is rendered


def test_a_shard_stamps_its_label_on_every_object_and_one_shard_on_none() -> None:
    rendered = shard_filter(render_catalog(load_repository(REPO_EXAMPLE)), 1, 2)
    assert rendered.objects and any(o.owner is not None for o in rendered.objects)
    stamped = mark_for_cleanup(rendered, "orksync-system/x", shard_label(1, 2))
    assert all(o.body["metadata"]["labels"][SHARD_LABEL] == "1-of-2" for o in stamped.objects)
    assert shard_selector(shard_label(1, 2)) == f"{MANAGED_SELECTOR},{SHARD_LABEL}=1-of-2"
    # one shard: no label, the same bodies and selector as without sharding
    assert shard_label(0, 1) == ""
    assert shard_selector(shard_label(0, 1)) == MANAGED_SELECTOR
    unsharded = render_catalog(load_repository(REPO_EXAMPLE))
    assert mark_for_cleanup(unsharded, "orksync-system/x", shard_label(0, 1)) == \
        mark_for_cleanup(unsharded, "orksync-system/x")
    assert not any(SHARD_LABEL in (o.body["metadata"].get("labels") or {})
                   for o in mark_for_cleanup(unsharded, "orksync-system/x").objects)
