"""The root of one Sync under the controller (orksync.agent.controller): what the
controller knows of it (`Root`), its agent built from the Sync's spec (credentials, the
ServiceAccount it writes as, an adopted inventory), and its status written back to the
Sync (docs/operations.md, "Sync objects")."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orksync.agent import syncs
from orksync.agent.config import AgentConfig
from orksync.agent.metrics import Metrics
from orksync.agent.runner import Agent
from orksync.agent.ui.data import RootStatus
from orksync.agent.ui.journal import Journal
from orksync.apply.impersonation import service_account_user
from orksync.apply.inventory import configmap_name
from orksync.cluster.kube import Kube
from orksync.cluster.retry import RetryPolicy
from orksync.cluster.shared_watch import SharedInformers
from orksync.errors import ClusterError, InputError
from orksync.model import Source
from orksync.source.git import GitAuth, GitVerify, VerifyMode
from orksync.sync import read_inventory, write_inventory

log = logging.getLogger("orksync.agent.controller")


@dataclass(slots=True)
class Root:
    """What the controller knows of one Sync, or of one shard of a Sync of several
    (`shards` > 1: `key` is `namespace/name#shard`, its claim's)."""

    key: str
    obj: dict[str, Any]
    shard: int = 0
    shards: int = 1
    spec: syncs.SyncSpec | None = None
    error: InputError | None = None  # why the spec cannot be used
    agent: Agent | None = None
    fingerprint: tuple[Any, ...] = ()
    busy: bool = False
    wanted: bool = True  # run at the next look (new, a webhook, a reconcile, a resume)
    next_run: float = 0.0
    next_rotate: float = 0.0
    deadline: float | None = None  # the running job's end (its `timeout`)
    duplicate_of: str = ""
    leaving: bool = False  # handed over: no new run; released once the running one ends
    written: dict[str, Any] = field(default_factory=dict)  # the status last written
    # the Ready condition's status and message before a run set it Unknown: a run that
    # ends as the one before it is no news (no Event)
    settled: tuple[str, str] | None = None
    # shard 0 of several: its last outcome, and whether the other shards' entries
    # changed since the Ready it wrote (written again, without a run)
    outcome: syncs.Outcome | None = None
    regroup: bool = False

    @property
    def sync_key(self) -> str:
        return syncs.sync_key_of(self.key)

    @property
    def inventory(self) -> str:
        """The sync root's name of this Sync or shard (its inventory)."""
        if self.spec is not None:
            return self.spec.unit_inventory(self.shard)
        meta = self.obj.get("metadata") or {}
        return f"{meta.get('namespace')}.{meta.get('name')}"


def sync_label(spec: syncs.SyncSpec, shard: int = 0) -> str:
    """The `orksync.io/shard` value on what a Sync (or one of its shards) writes: `sync-`
    and a digest of its namespace and name (a label value holds 63 characters, a Sync's
    key more), and `-I-of-N` for shard I of N."""
    label = sync_label_of(spec.key)
    return label if spec.shards <= 1 else f"{label}-{shard}-of-{spec.shards}"


def sync_label_of(key: str) -> str:
    """`sync_label` of the Sync whose key is `namespace/name`."""
    import hashlib

    return "sync-" + hashlib.sha256(key.encode()).hexdigest()[:16]


class RootBuilder:
    """Builds and stops the Syncs' agents. `gate(root)`: the gate of a root's requests;
    `wake(root)`: its agent wants a run now; `inventories()`: the inventory names of
    every Sync (none is adopted by another)."""

    def __init__(self, kube: Kube, base: AgentConfig, journal: Journal, *,
                 gate: Callable[[Root], float | None], wake: Callable[[Root], None],
                 inventories: Callable[[], set[str]],
                 shared: SharedInformers | None = None) -> None:
        self.kube = kube
        self.shared = shared
        self.base = base
        self.journal = journal
        self.gate = gate
        self.wake = wake
        self.inventories = inventories

    def state_dir(self, spec: syncs.SyncSpec, shard: int = 0) -> Path:
        name = spec.name if spec.shards <= 1 else f"{spec.name}.shard-{shard}"
        return self.base.state_dir / "syncs" / spec.namespace / name

    def agent(self, root: Root, spec: syncs.SyncSpec) -> Agent:
        """The Sync's root, made again when what it is built from changed; its credentials
        read from the Sync's namespace into files of its state directory."""
        fingerprint = spec.source_fingerprint()
        if root.agent is not None and root.fingerprint == fingerprint:
            if root.agent.state.source_error:  # the credentials may have been rotated
                self.credentials(spec, root.shard)
            root.agent.config = dataclasses.replace(
                root.agent.config, interval=spec.interval)
            return root.agent
        self._stop_agent(root)
        account = self.account(spec)
        auth, verify = self.credentials(spec, root.shard)
        base = self.base
        if base.adopt_inventory and spec.shards == 1:
            self.adopt(root, spec)
        config = dataclasses.replace(
            base, repo_url=spec.url, ref=spec.ref, semver=spec.semver, path=spec.path,
            interval=spec.interval, resync_interval=spec.resync_interval,
            state_dir=self.state_dir(spec, root.shard), leader_elect=False,
            name=spec.unit_inventory(root.shard), auth=auth, verify=verify,
            webhook_secret_file=None, shards=spec.shards, shard=root.shard,
            prune=spec.prune, default_service_account=account)
        # every Sync's requests share the controller's pool: idle connections are kept
        # once for the agent, not for each of its Syncs (the watches' streams each have
        # their own connection anyway)
        own = self.kube.sibling(timeout=self.kube.timeout, retry=self.kube.retry,
                                share_pool=True)
        own.user_agent = self.kube.user_agent
        own.gate = lambda: self.gate(root)
        # the journal is keyed by root: one for the web view of every Sync
        agent = Agent(config, self.writer(own, account), Metrics(), journal=self.journal)
        config.state_dir.mkdir(parents=True, exist_ok=True)
        agent.on_wake = lambda job: self.wake(root)
        # its objects carry a label of their own (the shard label of a one-shard root),
        # so that its watches hold its objects only, not those of every Sync (or shard)
        agent.reconciler.shard_label = agent.jobs.rotate_shard = sync_label(spec, root.shard)
        if config.repair_workers > 0:
            agent.reconciler.drift_repair(self.kube.sibling(
                timeout=30.0, retry=RetryPolicy(), share_pool=True), shared=self.shared)
        root.agent, root.fingerprint = agent, fingerprint
        log.info("Sync %s: serving %s@%s path %s as inventory %s", root.key, spec.url,
                 spec.wanted, spec.path or ".", configmap_name(root.inventory))
        return agent

    def account(self, spec: syncs.SyncSpec) -> str:
        """`namespace/name` of the ServiceAccount the Sync writes as: its
        serviceAccountName, else --default-service-account, in the Sync's namespace; ""
        (neither given) for the agent's own identity. InputError when it does not exist:
        the Sync is Stalled rather than written as a user nobody granted anything."""
        name = spec.service_account or self.base.default_service_account
        if not name:
            return ""
        field = "spec.serviceAccountName" if spec.service_account else \
            "--default-service-account"
        try:
            found = self.kube.get_or_none(self.kube.resource("v1", "ServiceAccount"),
                                          spec.namespace, name)
        except ClusterError as err:
            raise InputError(f"ServiceAccount {spec.namespace}/{name} cannot be read: "
                             f"{err.detail}", path=field) from None
        if found is None:
            raise InputError(f"ServiceAccount {spec.namespace}/{name} not found: nothing "
                             "is written until it exists (a Sync writes as a ServiceAccount "
                             "of its own namespace)", path=field)
        return f"{spec.namespace}/{name}"

    @staticmethod
    def writer(kube: Kube, account: str) -> Kube:
        """The connection of a Sync's root: every write (its CRDs, custom resources, plain
        manifests, children, Secrets, prune and onDelete) sent as `account`, so that the
        cluster's RBAC decides what the Sync's repository may do; reads, and the
        bookkeeping written through `Kube.own` (the inventory, the sync result, the
        custom resources' status), as the agent. InputError when the kubeconfig
        impersonates already."""
        if not account:
            return kube
        try:
            return kube.impersonating(service_account_user(account), writes_only=True)
        except ClusterError as err:  # the kubeconfig impersonates already (`as:`)
            raise InputError(err.detail, path="spec.serviceAccountName") from None

    def adopt(self, root: Root, spec: syncs.SyncSpec) -> None:
        """The inventory the Sync's annotation `orksync.io/adopt-inventory` names, moved to
        the Sync's own (its source now the Sync's), when the Sync has none yet: what
        `orksync sync --name N` or a `--repo-url` agent recorded is then the Sync's to
        prune. An inventory of another Sync is never taken."""
        name = str(((root.obj.get("metadata") or {}).get("annotations") or {}).get(
            syncs.ADOPT_ANNOTATION) or "")
        namespace = self.base.inventory_namespace
        if not name or name == spec.inventory_name:
            return
        if name in self.inventories():
            raise InputError(f"{name!r} is the inventory of another Sync: not adopted",
                             path=f"metadata.annotations[{syncs.ADOPT_ANNOTATION}]")
        res = self.kube.resource("v1", "ConfigMap")
        if self.kube.get_or_none(res, namespace, configmap_name(spec.inventory_name)):
            return  # adopted before, or synced already
        if self.kube.get_or_none(res, namespace, configmap_name(name)) is None:
            return
        adopted = read_inventory(self.kube, name, namespace)
        write_inventory(self.kube, adopted.with_source(Source.of(spec.url, spec.path)),
                        spec.inventory_name, namespace)
        self.kube.delete(res, namespace, configmap_name(name))
        log.info("Sync %s: took over the inventory %s (%d object(s), from %s)", root.key,
                 configmap_name(name), len(adopted), adopted.source)


    def credentials(self, spec: syncs.SyncSpec, shard: int = 0
                    ) -> tuple[GitAuth, GitVerify | None]:
        """The Secrets the Sync names, read in its own namespace, as files only the agent
        reads; their values reach no message."""
        directory = self.state_dir(spec, shard) / "credentials"
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)

        def put(name: str, value: bytes | None) -> Path | None:
            path = directory / name
            if value is None:
                path.unlink(missing_ok=True)
                return None
            tmp = path.with_suffix(".tmp")
            tmp.touch(mode=0o600)
            tmp.write_bytes(value)
            tmp.replace(path)
            return path

        data: dict[str, bytes] = {}
        if spec.secret:
            data = syncs.read_secret(self.kube, spec.namespace, spec.secret, "spec.secretRef")
        auth = GitAuth(username_file=put("username", data.get("username")),
                       password_file=put("password", data.get("password")),
                       ssh_key_file=put("identity", data.get("identity")),
                       known_hosts_file=put("known_hosts", data.get("known_hosts")))
        verify = None
        if spec.verify_provider:
            signers = syncs.read_secret(self.kube, spec.namespace, spec.verify_secret,
                                        "spec.verify.secretRef")
            if spec.verify_provider == "ssh":
                verify = GitVerify(mode=VerifyMode.SSH, allowed_signers_file=put(
                    "allowed_signers", signers.get("allowed_signers", b"")))
            else:
                verify = GitVerify(mode=VerifyMode.GPG,
                                   keyring=put("keyring", signers.get("keyring", b"")))
        return auth, verify

    def expect(self, roots: Iterable[Root]) -> None:
        """The roots about to run here for the first time (a start, a hand-over): their
        views listed together, not one LIST per Sync and kind as each first sync begins
        (orksync.cluster.shared_watch)."""
        if self.shared is not None:
            self.shared.expect(sync_label(r.spec, r.shard) for r in roots if r.agent is None
                               and r.spec is not None and not r.spec.suspend)

    def forget(self, root: Root) -> None:
        """No view of the root's label expected any more (its early parts dropped)."""
        if root.spec is not None and self.shared is not None:
            self.shared.forget(sync_label(root.spec, root.shard))

    def stop(self, root: Root) -> None:
        """The root's agent stopped, and no view of it expected."""
        self._stop_agent(root)
        self.forget(root)

    def _stop_agent(self, root: Root) -> None:
        agent, root.agent, root.fingerprint = root.agent, None, ()
        if agent is not None:
            self.drop(root, agent)

    @staticmethod
    def drop(root: Root, agent: Agent) -> None:
        """Stop a root's drift repair and close its connections."""
        if root.agent is agent:
            root.agent, root.fingerprint = None, ()
        agent.stop_event.set()
        agent.jobs.copied()
        agent.reconciler.stop_drift()
        agent.kube.close()


def is_new(root: Root, sha: str, result: str) -> bool:
    """Whether a run of `sha` is a history entry: a revision not the newest one there,
    or the newest with another result."""
    history = (root.obj.get("status") or {}).get("history") or []
    return not history or history[0].get("revision") != sha or \
        history[0].get("result") != result

def failure_message(agent: Agent) -> str:
    """The run's errors: the render's (each naming its file and line) and the failed
    objects', the first few of each."""
    state = agent.state
    lines: list[str] = []
    if state.rendered is not None:
        lines += [str(e) for e in state.rendered.errors[:3]]
        more = len(state.rendered.errors) - 3
        if more > 0:
            lines.append(f"and {more} more render error(s)")
    if state.changes is not None:
        failed = state.changes.failed
        lines += [f"{c.ref}: {c.message}" for c in failed[:3]]
        if len(failed) > 3:
            lines.append(f"and {len(failed) - 3} more failed object(s)")
    if not lines or state.source_error:
        lines.insert(0, state.last_error or "sync failed")
    return "; ".join(dict.fromkeys(lines))


def run_outcome(root: Root, agent: Agent, spec: syncs.SyncSpec, *, ran: bool,
                requested: str) -> syncs.Outcome | None:
    """What a run of the Sync's agent came to (`ran`: it synced, not only fetched), for
    its status; None when it has not synced yet."""
    state = agent.state
    sha = state.revision.sha if state.revision is not None else ""
    objects = len(state.inventory.value) if state.inventory is not None else None
    counts: dict[str, int] | None = None
    if state.changes is not None:
        counts = {}
        for change in state.changes.changes:
            counts[change.action.value] = counts.get(change.action.value, 0) + 1
    if state.failures:
        message = failure_message(agent)
        reason = syncs.TIMEOUT if "passed its timeout" in message else syncs.FAILED
        return syncs.Outcome(ready="False", reason=reason, message=message, attempted=sha,
                             counts=counts, objects=objects,
                             new_revision=ran and is_new(root, sha, "failed"),
                             handled=requested or None)
    if state.synced_once:
        return syncs.Outcome(
            ready="True", reason=syncs.SUCCEEDED,
            message=f"applied revision {spec.wanted}@sha1:{sha}", attempted=sha,
            applied=sha, counts=counts, objects=objects,
            new_revision=ran and is_new(root, sha, "succeeded"), handled=requested or None)
    return None


def report(kube: Kube, root: Root, outcome: syncs.Outcome, *, identity: str,
           warn: bool = False) -> None:
    """The Sync's status when it changed, and an Event for a new revision or a new
    failure. Shard I > 0 of a Sync of several writes its own entry of `status.shards`
    only; shard 0 writes the rest, its Ready that of every shard (`syncs.aggregate`)."""
    old = root.obj.get("status") or {}
    generation = int((root.obj.get("metadata") or {}).get("generation") or 0)
    if root.shards > 1:
        entry = syncs.shard_entry(outcome, served_by=identity, generation=generation)
        entries = old.get("shards") or {}
        if root.shard > 0:
            if entries.get(str(root.shard)) != entry:
                _write(kube, root, {"shards": {str(root.shard): entry}})
            return
        root.outcome = outcome
        own, outcome = outcome, syncs.aggregate(outcome, entries, root.shards)
        inventory = f"{configmap_name(root.inventory)} and {root.shards - 1} more"
        status = syncs.status_of(root.obj, own, inventory=inventory)
        status["conditions"] = syncs.status_of(root.obj, outcome,
                                               inventory=inventory)["conditions"]
        if outcome.objects is not None:
            status["inventory"] = {"name": inventory, "objects": outcome.objects}
        status["servedBy"] = identity
        # the other shards' entries are theirs: only this shard's entry is written, and
        # those of shards the Sync no longer has are removed
        status["shards"] = {"0": entry, **{k: None for k in entries
                                           if not k.isdigit() or int(k) >= root.shards}}
        if syncs.same_status({**old, "shards": {}}, {**status, "shards": {}}) and \
                entries.get("0") == entry and len(status["shards"]) == 1:
            return
    else:
        inventory = configmap_name(root.inventory) if root.spec else ""
        status = {**syncs.status_of(root.obj, outcome, inventory=inventory),
                  "servedBy": identity}
        if syncs.same_status(old, status):
            return
    if not _write(kube, root, status):
        return
    root.written = status
    old_ready: Mapping[str, Any] = next(
        (c for c in old.get("conditions") or [] if c.get("type") == "Ready"), {})
    before = (str(old_ready.get("status")), str(old_ready.get("message")))
    if before[0] == "Unknown" and root.settled is not None:
        before = root.settled  # what it said before this run began
    if outcome.ready != "Unknown":
        root.settled = (outcome.ready, outcome.message)
    elif before[0] != "Unknown":
        root.settled = before
    changed = before != (outcome.ready, outcome.message)
    if outcome.new_revision or (changed and outcome.ready != "Unknown"):
        _log_outcome(root, outcome)
        syncs.event(kube, root.obj, reason=outcome.reason, message=outcome.message,
                    revision=outcome.attempted, warning=warn)

def _write(kube: Kube, root: Root, status: Mapping[str, Any]) -> bool:
    """A merge patch of the Sync's status; whether it was written."""
    try:
        live = syncs.write_status(kube, root.obj, status)
    except ClusterError as err:
        if err.status != 404:
            log.error("Sync %s: status not written: %s", root.key, err)
        return False
    if isinstance(live, dict):
        root.obj = live
    return True


def _log_outcome(root: Root, outcome: syncs.Outcome) -> None:
    if outcome.ready == "False":
        log.error("Sync %s: %s: %s", root.key, outcome.reason, outcome.message)
    else:
        log.info("Sync %s: %s: %s", root.key, outcome.reason, outcome.message)


def find_duplicates(roots: Iterable[Root]) -> None:
    """A second Sync of the same url and path is refused (each of its shards); the oldest
    keeps it."""
    owners: dict[tuple[str, str], str] = {}
    order = sorted(roots, key=lambda r: (
        str((r.obj.get("metadata") or {}).get("creationTimestamp") or ""), r.key))
    for root in order:
        root.duplicate_of = ""
        if root.spec is None or (root.obj.get("metadata") or {}).get("deletionTimestamp"):
            continue
        source = (root.spec.url.rstrip("/").removesuffix(".git"), root.spec.path)
        owner = owners.setdefault(source, root.sync_key)
        if owner != root.sync_key:
            root.duplicate_of = owner


def reconcile_requested(obj: Mapping[str, Any]) -> str:
    """The Sync's reconcile request (`reconcile.orksync.io/requestedAt`), "" for none."""
    return str(((obj.get("metadata") or {}).get("annotations") or {}).get(
        syncs.RECONCILE_ANNOTATION) or "")


def ui_status(spec: syncs.SyncSpec, obj: Mapping[str, Any], shard: int = 0) -> RootStatus:
    """A Sync, or one shard of a Sync of several, as the web view shows it, from its
    status."""
    status = obj.get("status") or {}
    ready: dict[str, Any] = next((c for c in status.get("conditions") or []
                                  if c.get("type") == "Ready"), {})
    revision = str(status.get("lastAppliedRevision") or "")
    ready_status, message = ready.get("status"), ready.get("message")
    where = ""
    if spec.shards > 1:
        entry = (status.get("shards") or {}).get(str(shard)) or {}
        revision = str(entry.get("lastAppliedRevision") or "")
        ready_status, message = entry.get("ready"), entry.get("message")
        where = f", shard {shard} of {spec.shards}"
    return RootStatus(
        name=spec.unit_inventory(shard),
        source=f"{spec.url}@{spec.ref}" + (f" ({spec.path}{where})" if spec.path else
                                           f" ({where[2:]})" if where else ""),
        revision=revision,
        ready=ready_status == "True", message=str(message or ""),
        group=syncs.GROUP, resource="syncs", namespace=spec.namespace,
        object_name=spec.name)


def told(root: Root, obj: dict[str, Any], spec: syncs.SyncSpec | None,
         error: InputError | None) -> None:
    """A root (a Sync's, or one shard's) told of its Sync as it is now: a run wanted when
    the spec, the deletion or a reconcile request changed; all of its shards fetch at once
    when a webhook reached the Sync (`syncs.HOOK_ANNOTATION`); a shard I > 0 runs when
    shard 0 tried a revision; shard 0 writes Ready again when another shard's entry
    changed."""
    before, root.obj = root.obj, obj
    if before is obj or changed(obj, before, "generation") or \
            changed(obj, before, "deletionTimestamp") or \
            reconcile_requested(obj) != reconcile_requested(before) or root.spec is None:
        root.spec, root.error = spec, error
        root.wanted = True
    hook = _annotation(obj, syncs.HOOK_ANNOTATION) != _annotation(before, syncs.HOOK_ANNOTATION)
    if hook or (root.shard > 0 and attempted(obj) != attempted(before)):
        root.wanted = True
        if root.agent is not None:
            root.agent.state.next_attempt = 0.0
    if root.shards > 1 and root.shard == 0 and root.outcome is not None and \
            _others(obj) != _others(before):
        root.regroup = True


def changed(obj: Mapping[str, Any], before: Mapping[str, Any], field: str) -> bool:
    return bool((obj.get("metadata") or {}).get(field) !=
                (before.get("metadata") or {}).get(field))


def attempted(obj: Mapping[str, Any]) -> str:
    """The revision a Sync's status says it attempted last (shard 0's, for several)."""
    return str((obj.get("status") or {}).get("lastAttemptedRevision") or "")


def _annotation(obj: Mapping[str, Any], name: str) -> str:
    return str(((obj.get("metadata") or {}).get("annotations") or {}).get(name) or "")


def _others(obj: Mapping[str, Any]) -> Any:
    """The entries of shards 1.. in a Sync's status."""
    entries = (obj.get("status") or {}).get("shards") or {}
    return {k: v for k, v in entries.items() if k != "0"}
