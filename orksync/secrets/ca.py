"""The CA Secret of a `tls:` Secret: its name, its marker, and its place in the inventory.
Pure, and light (no `cryptography`): `orksync apply` imports it at start-up.

A `tls:` Secret `NAME` (type kubernetes.io/tls, the one workloads mount) holds the server
certificate, its key and the CA bundle. The CA's private key lives in the Opaque Secret
`NAME-ca` of the same namespace (keys `ca.crt`, `ca.key`), written by orksync together
with the TLS Secret, with the same labels, owner annotation and owner reference, and the
annotation `orksync.io/ca-of: NAME`. No workload reads it, so it never rolls one.

A Secret of that name that orksync did not write as this Secret's CA Secret (no
`orksync.io/ca-of: NAME`) is never taken over: the TLS Secret's write fails naming it;
and a rendered Secret whose live object is a CA Secret fails the same way.

The CA Secret is not rendered: `with_ca_secrets` adds it to the set the prune plan reads,
so it is recorded in the inventory with its owner, pruned when its TLS Secret leaves
Git, and kept while its TLS Secret is kept.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from orksync.model import ObjRef, RenderedObject, RenderedSet

CA_SUFFIX = "-ca"
CA_OF_ANNOTATION = "orksync.io/ca-of"
MAX_NAME = 253


def ca_secret_name(name: str) -> str:
    return name + CA_SUFFIX


def ca_secret_ref(ref: ObjRef) -> ObjRef:
    return dataclasses.replace(ref, name=ca_secret_name(ref.name))


def has_ca_secret(obj: RenderedObject) -> bool:
    return obj.ref.kind == "Secret" and obj.ref.api_version == "v1" \
        and bool(obj.directives.get("tls"))


def with_ca_secrets(rendered: RenderedSet, recorded: Iterable[tuple[ObjRef, ObjRef | None]]
                    ) -> RenderedSet:
    """`rendered` with the CA Secret of every `tls:` Secret beside it (for the prune
    plan: the inventory records it), and, for every retained Secret (kept, not written)
    whose CA Secret the inventory holds (`recorded`: its (object, owner) pairs), that CA
    Secret retained too."""
    extra = [dataclasses.replace(o, ref=ca_secret_ref(o.ref), body={}, directives={})
             for o in rendered.objects if has_ca_secret(o)]
    secrets = [(ca_secret_ref(ref), owner) for ref, owner in rendered.retained
               if ref.kind == "Secret" and ref.api_version == "v1"]
    known = set(recorded) if secrets else set()
    retained = [pair for pair in secrets if pair in known]
    if not extra and not retained:
        return rendered
    return dataclasses.replace(rendered, objects=(*rendered.objects, *extra),
                               retained=(*rendered.retained, *retained))
