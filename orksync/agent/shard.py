"""Sharding one sync root across agent replicas: each shard owns the custom resources whose
stable hash falls in it (with their children); shard 0 also owns the CRDs and the plain
manifests (a Namespace or Secret a custom resource of any shard may need). Every object a
shard writes carries `orksync.io/shard: I-of-N` (`shard_label`), which its watches select
(`shard_selector`); one shard (N = 1) writes no such label. Pure."""

from __future__ import annotations

import dataclasses
import hashlib

from orksync.model import MANAGED_SELECTOR, SHARD_LABEL, ObjRef, RenderedSet, is_plain


def shard_of(ref: ObjRef, shards: int) -> int:
    """A stable shard number for a custom resource (same on every replica and run)."""
    digest = hashlib.sha256(f"{ref.api_version}/{ref.kind}/{ref.namespace}/{ref.name}"
                            .encode()).digest()
    return int.from_bytes(digest[:8], "big") % shards


def shard_label(shard: int, shards: int) -> str:
    """The value of `orksync.io/shard` on what shard `shard` of `shards` writes; "" for
    one shard (no label at all)."""
    return f"{shard}-of-{shards}" if shards > 1 else ""


def shard_selector(label: str) -> str:
    """The label selector of the watches of the shard whose `shard_label` is `label`:
    orksync's objects, and with N > 1 only those this shard wrote."""
    return f"{MANAGED_SELECTOR},{SHARD_LABEL}={label}" if label else MANAGED_SELECTOR


def shard_filter(rendered: RenderedSet, shard: int, shards: int) -> RenderedSet:
    """The part of a render that shard `shard` of `shards` applies."""
    if shards <= 1:
        return rendered

    def mine(ref: ObjRef, owner: ObjRef | None, plain: bool = False) -> bool:
        if owner is not None:
            return shard_of(owner, shards) == shard
        if ref.kind == "CustomResourceDefinition" or plain:
            return shard == 0
        return shard_of(ref, shards) == shard

    return dataclasses.replace(
        rendered,
        objects=tuple(o for o in rendered.objects if mine(o.ref, o.owner, is_plain(o))),
        skipped=tuple(s for s in rendered.skipped if mine(s[0], None)),
        absent=tuple(a for a in rendered.absent if mine(a[0], a[1])),
        retained=tuple(r for r in rendered.retained if mine(r[0], r[1])))
