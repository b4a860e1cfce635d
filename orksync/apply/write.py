"""One rendered object written: the body sent (owner reference, fingerprint, rollout
annotation), the decision of its write (unchanged without a request, create-if-absent,
server-side apply, a recreate, the Secret runner, a rollout alone) and its Change."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from typing import Any

from orksync.apply.compare import (
    HASH_ANNOTATION,
    dry_run_unchanged,
    fingerprint,
    unchanged,
)
from orksync.apply.kinds import policy
from orksync.apply.rollout import (
    ROLLOUT_FIELD_MANAGER,
    add_rollout_annotation,
    is_rolled,
    live_digest,
    pod_template,
    read_secrets,
    referenced_secrets,
    rollout_body,
)
from orksync.apply.run import ApplyOptions, Run
from orksync.cluster.kube import Kube, Resource
from orksync.errors import ClusterError
from orksync.model import (
    OWNER_ANNOTATION,
    PLAIN_STAGES,
    SCOPE_DIRECTIVE,
    Action,
    Change,
    ObjRef,
    RenderedObject,
    WritePolicy,
    copy_tree,
)
from orksync.secrets.ca import ca_secret_ref, has_ca_secret

RECREATE_KINDS = frozenset({("v1", "Pod"),
                            ("rbac.authorization.k8s.io/v1", "RoleBinding"),
                            ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding")})
RECREATE_ANNOTATION = "orksync.io/recreate-on-invalid"


class ObjectWriter:
    """Writes the objects of an apply through `kube` (or their owner's identity), by
    `options`; `versions`: the resourceVersion each server-side apply left (its answer's)."""

    def __init__(self, kube: Kube, options: ApplyOptions) -> None:
        self.kube = kube
        self.options = options
        self.versions: dict[ObjRef, str] = {}

    def write(self, obj: RenderedObject, live: Mapping[ObjRef, dict[str, Any]],
              run: Run, *, local: bool = False) -> Change | None:
        """Write one object. `local`: return None instead of sending the first request
        (and for the cases that may send one on the way: copies, Secrets, cluster-scoped
        children, whose tenancy check may read). Before that point only discovery (cached
        since the stage's prefetch) may send one, and its error is the object's failure
        either way."""
        if obj.owner is not None and obj.owner in run.failed:
            return Change(ref=obj.ref, action=Action.FAILED,
                          message=f"not applied: its owner {obj.owner} failed")
        unsent = self._unsent(obj, live, run)
        if unsent is not None:
            return unsent
        res = self.kube.resource(obj.ref.api_version, obj.ref.kind)
        kube = run.kube_for(obj, self.kube)
        current = live.get(obj.ref)
        plain = obj.owner is None and obj.stage in PLAIN_STAGES
        if plain:
            problem = plain_problem(obj.ref, res.namespaced, current)
            if problem:
                return Change(ref=obj.ref, action=Action.FAILED, message=problem)
        if current is not None and (obj.owner is not None or plain):
            waiting = being_deleted(current)
            if waiting:
                return Change(ref=obj.ref, action=Action.WAITING, message=waiting)
        kind = policy(obj.ref)
        if local and (obj.directives.get("copyFrom") or current is None or kind.secret or
                      (obj.owner is not None and not res.namespaced)):
            return None
        refused = self._tenancy_refusal(obj, res, live)
        if refused:
            return Change(ref=obj.ref, action=Action.SKIPPED, message=refused)
        body = self.desired(obj, res, run)
        if current is not None and obj.owner is not None and is_rolled(obj.ref) and \
                live_digest(body) is not None and (live_digest(body) != live_digest(current)
                                                   or not unchanged(body, current)):
            if local:  # the Secrets are read again first (`_restamped`)
                return None
            body = self._restamped(kube, obj, body, run)
        if obj.directives.get("copyFrom"):
            body = self._copy_from(kube, obj, res, body)
        if kind.secret:
            ca_live = live.get(ca_secret_ref(obj.ref)) if has_ca_secret(obj) else None
            return self._write_secret(kube, obj, body, current, run, ca_live)
        if obj.policy in (WritePolicy.CREATE, WritePolicy.CREATE_ONLY):
            if current is not None and self._needs_rollout(obj, body, current, run):
                if local:
                    return None
                return self._roll(kube, obj, res, body)
            return self._create_if_absent(kube, obj, res, body, current, run)
        if current is not None and not obj.directives.get("forceConflict", True) and \
                self._needs_rollout(obj, body, current, run):
            # the rollout manager may own the annotation (a rotation wrote it): moved by
            # that manager first, the unforced apply then sends the value it holds
            if local:
                return None
            self._roll(kube, obj, res, body)
        if unchanged(body, current):
            self._remember(obj, current, run)
            return Change(ref=obj.ref, action=Action.UNCHANGED)
        if local:
            return None
        return self._server_side_apply(kube, obj, res, body, current, run)

    def _server_side_apply(self, kube: Kube, obj: RenderedObject, res: Resource,
                           body: dict[str, Any], current: dict[str, Any] | None,
                           run: Run) -> Change:
        """Apply `body`, its outcome told by the answer: the resourceVersion it leaves (a
        dry run's content, `dry_run_unchanged`). A change the API server refuses as
        invalid recreates the object where that is allowed (`recreate_allowed`)."""
        before = (current or {}).get("metadata", {}).get("resourceVersion")
        dry_run = self.options.dry_run
        # a CRD's generation before the write, read when the view lacks it (a CRD another
        # sync root wrote last): a write that leaves it leaves what the CRD serves
        generation = None
        if policy(obj.ref).crd and not dry_run:
            seen = current if current is not None else \
                kube.get_or_none(res, "", obj.ref.name)
            generation = (seen or {}).get("metadata", {}).get("generation")
        try:
            # a dry run's answer is read whole: its content decides (`dry_run_unchanged`)
            created, result = kube.apply(res, body,
                                         field_manager=self.options.field_manager,
                                         force=obj.directives.get("forceConflict", True),
                                         subject=str(obj.ref), dry_run=dry_run,
                                         metadata_only=not dry_run)
        except ClusterError as err:
            if err.status != 422 or current is None:
                raise
            if not recreate_allowed(obj):
                raise ClusterError(f"{err.detail} (if a field that cannot change was changed, "
                                   f"the annotation {RECREATE_ANNOTATION}: \"true\" lets "
                                   "orksync delete and recreate the object)",
                                   subject=err.subject, status=err.status,
                                   reason=err.reason) from err
            self._recreate(kube, res, obj, body, current)
            return Change(ref=obj.ref, action=Action.CONFIGURED,
                          message="recreated: the change touches an immutable field")
        self._remember(obj, result, run)
        if generation is not None and \
                (result or {}).get("metadata", {}).get("generation") == generation:
            run.crd_same_spec.add(obj.ref)  # its metadata only: what it serves is the same
        after = (result or {}).get("metadata", {}).get("resourceVersion")
        if after and not self.options.dry_run:
            self.versions[obj.ref] = str(after)
        if created:
            action = Action.CREATED
        elif dry_run:
            action = Action.UNCHANGED if dry_run_unchanged(
                result, current, lambda: kube.get_or_none(
                    res, obj.ref.namespace, obj.ref.name)) else Action.CONFIGURED
        elif before is not None and before == after:
            action = Action.UNCHANGED
        else:
            action = Action.CONFIGURED
        return Change(ref=obj.ref, action=action)

    def _unsent(self, obj: RenderedObject, live: Mapping[ObjRef, dict[str, Any]],
                run: Run) -> Change | None:
        """A dry run's outcome for an object the API server cannot dry-run because it
        depends on a write the dry run did not make: its namespace or its kind's CRD,
        which the real run creates first. Such an object does not exist yet: created. A
        child of a custom resource reported so is sent as a dry run without owner
        reference when it does not exist (the server still checks it); an existing one
        gets the new owner's reference (configured), or is left alone by a create policy.
        None: send the dry run."""
        if not self.options.dry_run:
            return None
        ref = obj.ref
        if ref.namespace in run.unsent_namespaces:
            why = f"its namespace {ref.namespace} is created by this sync"
        elif (ref.api_version, ref.kind) in run.coming_kinds and \
                not self._served(ref.api_version, ref.kind):
            why = "its CRD is created by this sync"
        elif obj.owner is not None and obj.owner in run.unsent and live.get(ref) is not None:
            if obj.policy is not WritePolicy.APPLY:
                return Change(ref=ref, action=Action.UNCHANGED)
            return Change(ref=ref, action=Action.CONFIGURED, message="dry run, not sent: "
                          f"its owner {obj.owner} is created by this sync")
        else:
            return None
        run.unsent.add(ref)
        if obj.owner is None:
            run.uids[ref] = ""  # its children are dry-run without owner reference
        return Change(ref=ref, action=Action.CREATED, message=f"dry run, not sent: {why}")

    def _served(self, api_version: str, kind: str) -> bool:
        """Whether discovery serves the kind (a failed discovery is raised: the object's
        failure, as it is without a dry run)."""
        try:
            self.kube.resource(api_version, kind)
        except ClusterError as err:
            if err.status == 404:
                return False
            raise
        return True

    def _tenancy_refusal(self, obj: RenderedObject, res: Resource,
                         live: Mapping[ObjRef, dict[str, Any]]) -> str | None:
        """The tenancy rules only the cluster can decide (docs/multi-tenancy.md), for a
        child that discovery says is cluster-scoped: the render's refusal for a kind whose
        scope it did not know, and an existing object owned by something else (server-side
        apply would take it over, and the next prune would then delete it)."""
        if obj.owner is None or res.namespaced:
            return None
        if obj.directives.get(SCOPE_DIRECTIVE):
            return str(obj.directives[SCOPE_DIRECTIVE])
        if obj.policy is not WritePolicy.APPLY:
            return None  # written only when missing
        ref = dataclasses.replace(obj.ref, namespace="")
        # read as the agent, like the stage's LISTs: this is orksync's own check (the first
        # wall), made before the write goes out as the child's identity (the second)
        current = live.get(ref) or self.kube.get_or_none(res, "", ref.name)
        annotations = ((current or {}).get("metadata") or {}).get("annotations") or {}
        owner = annotations.get(OWNER_ANNOTATION)
        if current is None or owner == str(obj.owner):
            return None
        return (f"{ref} exists and belongs to {owner or 'no custom resource'}, not "
                f"{obj.owner}: a custom resource does not take over a cluster-scoped object")

    def _recreate(self, kube: Kube, res: Resource, obj: RenderedObject, body: dict[str, Any],
                  current: Mapping[str, Any]) -> None:
        """Delete (UID precondition: only the object we read) and create again."""
        if self.options.dry_run:
            return
        uid = (current.get("metadata") or {}).get("uid")
        try:
            kube.delete(res, obj.ref.namespace, obj.ref.name, propagation="Foreground",
                        subject=str(obj.ref), precondition_uid=uid)
        except ClusterError as err:
            if err.status != 404:
                raise
        deadline = time.monotonic() + self.options.crd_timeout
        delay = 0.05
        while kube.get_or_none(res, obj.ref.namespace, obj.ref.name) is not None:
            if time.monotonic() > deadline:
                raise ClusterError("deleted for a recreate but still present after "
                                   f"{self.options.crd_timeout:.0f}s", subject=str(obj.ref))
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
        kube.create(res, body, field_manager=self.options.field_manager,
                    subject=str(obj.ref), metadata_only=True)

    def _copy_from(self, kube: Kube, obj: RenderedObject, res: Resource,
                   body: dict[str, Any]) -> dict[str, Any]:
        """`fromConfigMap` & co.: merge the live source into the body (semantics §2.4):
        ConfigMap data under the declared keys; NetworkPolicy spec, ResourceQuota hard and
        LimitRange limits replaced by the source's."""
        spec = obj.directives["copyFrom"]
        source = kube.get_or_none(res, spec["namespace"], spec["name"])
        if source is None:
            raise ClusterError(f"source {spec['kind']}/{spec['namespace']}/{spec['name']} "
                               "not found", subject=str(obj.ref))
        merge = policy(obj.ref).copy_source
        if merge is not None:
            merge(body, source)
        annotations = body["metadata"]["annotations"]
        annotations.pop(HASH_ANNOTATION, None)
        annotations[HASH_ANNOTATION] = fingerprint(body)
        return body

    def _write_secret(self, kube: Kube, obj: RenderedObject, body: dict[str, Any],
                      current: dict[str, Any] | None, run: Run,
                      ca_live: dict[str, Any] | None) -> Change:
        # imported here: the secrets stack (and cryptography) is a noticeable part of the
        # start-up of an `orksync apply` that has no Secret to write
        from orksync.apply.secrets import write_secret
        from orksync.secrets.random import CryptoRandom

        change, digest = write_secret(kube, obj, body, current,
                                      field_manager=self.options.field_manager,
                                      now=self.options.clock(), random=CryptoRandom(),
                                      dry_run=self.options.dry_run, ca_live=ca_live)
        if digest and obj.owner is not None:
            run.secret_hashes[(obj.owner, obj.ref.namespace, obj.ref.name)] = digest
        if obj.owner is not None and change.action in (Action.CREATED, Action.CONFIGURED):
            run.secrets_written.add((obj.owner, obj.ref.namespace, obj.ref.name))
        return change

    @staticmethod
    def _needs_rollout(obj: RenderedObject, body: Mapping[str, Any],
                       current: Mapping[str, Any], run: Run) -> bool:
        """An existing workload whose Secrets changed since its pod template was stamped
        (rotation, re-issue, added keys): rolled whatever its write policy. One never
        stamped (made by Orkestra, or by hand) is rolled only when this apply changed a
        Secret it reads: adopting it restarts nothing."""
        if obj.owner is None or not is_rolled(obj.ref):
            return False
        want, have = live_digest(body), live_digest(current)
        if want is None or want == have:
            return False
        if have is not None:
            return True
        template = pod_template(dict(body)) or {}
        return any((obj.owner, obj.ref.namespace, name) in run.secrets_written
                   for name in referenced_secrets(template.get("spec") or {}))

    @staticmethod
    def _restamped(kube: Kube, obj: RenderedObject, body: dict[str, Any],
                   run: Run) -> dict[str, Any]:
        """The workload's secrets-hash from its Secrets as they are now, where this apply
        read them (orksync.apply.rollout.read_secrets), for a workload this apply is about
        to write or roll: a rotation that ran meanwhile wrote them and rolled the
        workload, which must not be rolled back. One GET per such Secret, only for a
        workload written or rolled."""
        from orksync.secrets.plan import data_hash  # the secrets stack: see _write_secret

        assert obj.owner is not None
        res = kube.resource("v1", "Secret")
        for name in read_secrets(body, obj.owner, obj.ref.namespace, run.secret_hashes,
                                 run.secrets_written):
            live = kube.get_or_none(res, obj.ref.namespace, name)
            if live is not None:
                run.secret_hashes[(obj.owner, obj.ref.namespace, name)] = data_hash(
                    {str(k): str(v) for k, v in (live.get("data") or {}).items()})
        add_rollout_annotation(body, obj.owner, obj.ref.namespace, run.secret_hashes)
        return body

    def _roll(self, kube: Kube, obj: RenderedObject, res: Resource,
              body: Mapping[str, Any]) -> Change:
        """Write the pod template's secrets-hash annotation alone, under orksync's rollout
        field manager (orksync.apply.rollout): the rest of an existing create-if-absent
        workload stays as it is."""
        digest = live_digest(body)
        assert digest is not None
        kube.apply(res, rollout_body(obj.ref, digest), field_manager=ROLLOUT_FIELD_MANAGER,
                   force=True, subject=str(obj.ref), dry_run=self.options.dry_run,
                   metadata_only=True)
        suffix = " (dry run)" if self.options.dry_run else ""
        return Change(ref=obj.ref, action=Action.CONFIGURED,
                      message="rolled: a Secret it reads changed" + suffix)

    def _create_if_absent(self, kube: Kube, obj: RenderedObject, res: Resource,
                          body: dict[str, Any], current: dict[str, Any] | None,
                          run: Run) -> Change:
        if current is not None:
            self._remember(obj, current, run)
            return Change(ref=obj.ref, action=Action.UNCHANGED)
        if self.options.dry_run:
            return Change(ref=obj.ref, action=Action.CREATED, message="dry run")
        try:
            created = kube.create(res, body, field_manager=self.options.field_manager,
                                  subject=str(obj.ref), metadata_only=True)
        except ClusterError as err:
            if err.status == 409 and err.reason == "AlreadyExists":
                return Change(ref=obj.ref, action=Action.UNCHANGED,
                              message="exists already (made outside orksync, or by an "
                                      "earlier attempt whose answer was lost)")
            raise
        self._remember(obj, created if isinstance(created, Mapping) else None, run)
        return Change(ref=obj.ref, action=Action.CREATED)

    def _remember(self, obj: RenderedObject, result: Mapping[str, Any] | None,
                  run: Run) -> None:
        """The uid of an object written or found: the owner reference of its children
        (a custom resource's, and a nested custom resource's, one that a `custom:` block
        created and that is rendered through its own entry)."""
        if result:
            uid = (result.get("metadata") or {}).get("uid")
            if uid:
                run.uids[obj.ref] = uid

    def desired(self, obj: RenderedObject, res: Resource, run: Run) -> dict[str, Any]:
        """The body we send: the rendered one plus owner reference and fingerprint."""
        body: dict[str, Any] = copy_tree(dict(obj.body))
        meta = body.setdefault("metadata", {})
        if not res.namespaced:
            meta.pop("namespace", None)
        if obj.owner is not None:
            uid = run.uids.get(obj.owner)
            if uid is None:
                raise ClusterError("its owner was not applied in this run",
                                   subject=str(obj.ref))
            if uid and owner_reference_allowed(obj.owner, obj.ref, res.namespaced):
                meta["ownerReferences"] = [{
                    "apiVersion": obj.owner.api_version, "kind": obj.owner.kind,
                    "name": obj.owner.name, "uid": uid, "controller": True,
                    "blockOwnerDeletion": True}]
        annotations = meta.setdefault("annotations", {})
        annotations.pop(HASH_ANNOTATION, None)
        annotations[HASH_ANNOTATION] = fingerprint(body)
        if obj.owner is not None:
            # after the fingerprint: the annotation is orksync's own field, not the
            # user's spec (orksync.apply.rollout); `unchanged` still compares it
            add_rollout_annotation(body, obj.owner, obj.ref.namespace, run.secret_hashes)
        return body


def being_deleted(live: Mapping[str, Any]) -> str:
    """Why a live child cannot be written now: it has a deletionTimestamp (an apply
    would change an object on its way out, and a create-if-absent would count it as
    present); "" otherwise. A custom resource that is being deleted is not asked: its
    teardown (orksync.sync.finish_terminating) handles it."""
    meta = live.get("metadata") or {}
    if not meta.get("deletionTimestamp"):
        return ""
    finalizers = [str(f) for f in meta.get("finalizers") or []]
    held = f" (finalizers: {', '.join(finalizers)})" if finalizers else ""
    return f"being deleted{held}; created again by the first sync after it is gone"


def plain_problem(ref: ObjRef, namespaced: bool, live: Mapping[str, Any] | None) -> str:
    """Why a plain manifest is not written ("" when it may be): a namespace its kind
    cannot have, or none where it needs one (the loader checks the kinds whose scope it
    knows; discovery tells the others); a live object that is a custom resource's child
    (a manifest that took it over would be pruned with it, or prune it)."""
    if namespaced and not ref.namespace:
        return (f"metadata.namespace is not set and a {ref.kind} is namespaced: write its "
                "namespace (orksync applies a manifest as it is and does not guess one)")
    if not namespaced and ref.namespace:
        return f"a {ref.kind} is cluster-scoped: metadata.namespace must not be set"
    owner = (((live or {}).get("metadata") or {}).get("annotations") or {}).get(
        OWNER_ANNOTATION)
    if owner:
        return (f"exists as a child of {owner} (annotation {OWNER_ANNOTATION}): a "
                "manifest does not take over an object a custom resource renders")
    return ""


def recreate_allowed(obj: RenderedObject) -> bool:
    """Kinds whose immutable fields Orkestra changes by delete + create (Pod, RoleBinding,
    ClusterRoleBinding); any other kind only with the per-object opt-in annotation
    (recreating a StatefulSet, say, can lose data)."""
    if (obj.ref.api_version, obj.ref.kind) in RECREATE_KINDS:
        return True
    annotations = (obj.body.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(RECREATE_ANNOTATION, "")).lower() == "true"


def owner_reference_allowed(owner: ObjRef, child: ObjRef, child_namespaced: bool) -> bool:
    """Kubernetes honours an owner reference from a namespaced owner only inside its own
    namespace; a cluster-scoped owner may own anything. (Orkestra sets cross-namespace
    references, which the garbage collector treats as invalid: semantics §7.2 #12.)"""
    if not owner.namespace:
        return True
    return child_namespaced and child.namespace == owner.namespace
