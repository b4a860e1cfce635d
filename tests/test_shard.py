"""Sharding a render across replicas."""

from __future__ import annotations

from orksync.agent.shard import shard_filter
from orksync.katalog.loader import load_repository
from orksync.model import is_plain
from orksync.render.engine import render_catalog
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
