"""The Katalog schema as one declarative table: every key Orkestra knows, at every level,
and what orksync does with it. Pure data plus the walk that checks a document against it.

Each key is a `Key`:

* `acts`: orksync does what Orkestra does with it (its `what` says what);
* `info`: descriptive only (a description, a version, an author); neither Orkestra's
  runtime nor orksync acts on it; accepted silently;
* `warns`: Orkestra acts on it at run time and orksync deliberately does not (worker and
  queue tuning, watches, gateway, ...); accepted with one warning naming `what` is not
  done and why;
* `refused`: needs what a render from Git cannot have (Go code, the network); an error
  that says so, never half-rendered;
* `orksync`: orksync's own key, or one orksync accepts and Orkestra refuses: acted on,
  with a warning that the Katalog is not portable when `portable` is False.

`children` is the nested schema of a map with known keys; `each` the schema of every
value of a map of user-chosen names (`spec.crds.<name>`); `moves_to` (grouped layout of
v0.7.18 only) the key's place in the flat layout, relative to the CRD entry, used by
orksync.katalog.layout. `check` walks a document: a key the table does not know is an
error with the nearest known key; `docs_table` renders the table for
docs/katalog-schema.md (a test checks the two agree).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["KATALOG", "KOMPOSER", "Finding", "Key", "check", "docs_markdown", "docs_table"]


@dataclass(frozen=True, slots=True)
class Key:
    does: str  # acts | info | warns | refused | orksync
    what: str  # what orksync does (acts, orksync), or why not (warns, refused)
    children: Mapping[str, Key] | None = None
    each: Key | None = None
    moves_to: tuple[str, ...] = ()
    portable: bool = True  # False: Orkestra refuses it (an `orksync` key)


def acts(what: str, children: Mapping[str, Key] | None = None, *, each: Key | None = None,
         moves_to: tuple[str, ...] = ()) -> Key:
    return Key("acts", what, children, each, moves_to)


def info(what: str = "descriptive only") -> Key:
    return Key("info", what)


def warns(why: str, *, moves_to: tuple[str, ...] = ()) -> Key:
    return Key("warns", why, moves_to=moves_to)


def refused(why: str, *, moves_to: tuple[str, ...] = ()) -> Key:
    return Key("refused", why, moves_to=moves_to)


def own(what: str, *, portable: bool = True, children: Mapping[str, Key] | None = None) -> Key:
    return Key("orksync", what, children, portable=portable)


_RUNTIME_ONLY = "a setting of Orkestra's controller process, not read by orksync: the agent " \
    "(`orksync agent`) runs one set of informers, one work queue and its workers for all " \
    "Katalogs, tuned by its own flags (`--interval`, `--resync-interval`, " \
    "`--repair-workers`), not per Katalog"
_GO = "needs Go code compiled into an Orkestra operator; orksync renders templates only"
_NETWORK = "needs an HTTP call while reconciling; a render is offline and repeatable"
_WEBHOOK = "an admission webhook served by Orkestra; orksync serves none (orksync applies " \
    "what the render checked)"
_INCLUDE = "the named file (relative to the file holding the include, inside the " \
    "repository) merged with this block as Orkestra merges it (docs/katalog-schema.md)"

_VALIDATION = acts("rules checked on each custom resource before it renders; deny stops "
                   "it, warn warns (orksync.render.prepare)",
                   {"rules": acts("the rules"), "include": acts(_INCLUDE),
                    "external": refused(_NETWORK)})
_MUTATION = acts("rules that set defaults and overrides in the custom resource's data "
                 "before it renders (orksync.render.prepare)",
                 {"rules": acts("the rules"), "include": acts(_INCLUDE),
                  "mutateFirst": acts("false: validation runs before mutation"),
                  "external": refused(_NETWORK)})
_NORMALIZE = acts("spec values normalised before rendering (orksync.render.prepare)",
                  {"spec": acts("the normalised fields")})
_CONVERSION = warns("conversion between CRD versions is served by Orkestra's conversion "
                    "webhook; orksync renders the stored version only")
_WEBHOOKS = warns(_WEBHOOK)

_GATE = acts("the custom resource is rendered only when the gate passes (evaluated on the "
             "custom resource, as at its first reconcile)", {
                 "when": acts("AND conditions"), "or": acts("OR conditions"),
                 "anyOf": own("OR conditions (Orkestra before v0.7.16)", portable=False),
                 "sentinels": warns("sentinels are event-time values (what changed between "
                                    "two versions of the object); a render sees one version"),
                 "eventAware": warns(_RUNTIME_ONLY),
                 "external": refused(_NETWORK),
                 "failPolicy": warns("only matters when an external call fails; orksync "
                                     "makes none")})
_PRE_RECONCILE = acts("gates: a custom resource whose gate does not pass is left out", {
    "sentinels": warns("sentinels are event-time values; a render sees one version"),
    "external": refused(_NETWORK),
    "enqueueGate": _GATE, "reconcileGate": _GATE})

_RECONCILER: dict[str, Key] = {
    "default": acts("true (or absent): the templates are rendered; false: refused (a custom "
                    "reconciler is Go code)"),
    "hooks": refused(_GO),
    "constructor": refused(_GO),
    "profile": warns(_RUNTIME_ONLY),
    "workers": warns(_RUNTIME_ONLY),
    "resync": warns(_RUNTIME_ONLY),
    "queue": warns(_RUNTIME_ONLY),
    "requeue": warns("per-object requeue timing; orksync re-renders every custom resource "
                     "at every sync"),
    "include": acts(_INCLUDE),
}
_STATUS = acts("status fields written to the custom resource's /status "
               "(orksync.status.desired)", {
                   "fields": acts("the status fields"), "include": acts(_INCLUDE),
                   "conditions": acts("false: orksync writes neither its conditions "
                                      "(Ready, Reconciling, Stalled) nor "
                                      "status.observedGeneration to the custom resources; "
                                      "the status fields and status.orksync still are "
                                      "(orksync.status.desired)"),
               })
_OBSERVE_WATCH = warns("watches only trigger reconciles; orksync renders every custom "
                       "resource at every sync")
_OBSERVE_EVENTS = warns("Kubernetes Events as reconcile triggers; orksync renders every "
                        "custom resource at every sync")
_CROSS = acts("other custom resources read as .cross.<as> (orksync.render.cross); an "
              "item's `source` (another Orkestra instance read over HTTP) is refused")
_BLOCK = acts("the resources rendered (checked by the render's field tables, "
              "orksync.render.builders.fields)")
_FINALIZERS = warns("orksync holds every custom resource with its own finalizer "
                    "(orksync.io/cleanup) until onDelete ran")
_AUTOSCALE_RUNTIME = warns("scales Orkestra's workers; workload autoscale: is a resource "
                           "field and is acted on")
_ROLLBACK = warns("marked in development in Orkestra; orksync applies what Git holds")
_DELETION_PROTECTION = acts(
    "the entry's override of the Katalog's deletion protection", {
        "protectCRD": acts("false: the entry's CRD is not protected"),
        "protectCRs": warns("orksync never deletes a custom resource labelled "
                            "orkestra.io/deletion-protection=true, whatever this says"),
    })
_KATALOG_DELETION_PROTECTION = acts(
    "the Katalog's CRDs are labelled orkestra.io/deletion-protection=true when applied, "
    "and orksync's prune and teardown never delete an object (CRD or custom resource) "
    "that carries the label; the refusal is reported. Orkestra's webhook, which refuses "
    "deletes by anyone, is not served", {
        "enabled": acts("false: no protection (the label is removed at the next sync)"),
        "serviceName": warns(_WEBHOOK), "failurePolicy": warns(_WEBHOOK),
        "cleanupOnShutdown": warns(_WEBHOOK)})
_NS = acts("the namespace guard (orksync.katalog.tenancy, orksync.render.guard)")
_IMPORTS = acts("motif imports merged into the entry (orksync.katalog.motifs)")
_IGNORE_STATUS = acts("true: no status is written to the custom resources (neither "
                      "orksync's conditions nor the declared fields); Events still are")
_IGNORE_GENERATION = warns(_RUNTIME_ONLY)
_SERVICE_ACCOUNT = own("the ServiceAccount (`name` in each custom resource's namespace, or "
                       "`namespace/name`) the custom resources' children are written as: "
                       "every write, delete and read of them impersonates it "
                       "(docs/multi-tenancy.md)", portable=False)

# Orkestra's flat OperatorBoxConfig declares when/or, and none of its reconcile paths
# (GenericReconciler: reconcileCore, reconcileImpl, runTemplateReconcile) reads them: a
# custom resource is gated by preReconcile only.
_BOX_CONDITIONS = ("accepted and ignored, as Orkestra ignores it: its types declare "
                   "operatorBox-level when/or but no reconcile reads them (a custom resource "
                   "is gated by preReconcile's reconcileGate / enqueueGate); the grouped "
                   "layout of v0.7.18 has no such key")

# The grouped layout of v0.7.18: each key names its place in the flat layout.
_GROUPS: dict[str, Key] = {
    "observe": acts("group (v0.7.18): cross, watch, events", {
        "cross": acts(_CROSS.what, moves_to=("operatorBox", "cross")),
        "watch": _OBSERVE_WATCH, "events": _OBSERVE_EVENTS,  # the same place when flat
        "include": acts(_INCLUDE),
    }),
    "runtime": acts("group (v0.7.18): the operator box as a long-lived entity", {
        "allowedNamespaces": acts(_NS.what, moves_to=("allowedNamespaces",)),
        "restrictedNamespaces": acts(_NS.what, moves_to=("restrictedNamespaces",)),
        "finalizers": warns(_FINALIZERS.what, moves_to=("operatorBox", "finalizers")),
        "removeFinalizers": warns(_RUNTIME_ONLY, moves_to=("removeFinalizers",)),
        "deletionProtection": acts(_DELETION_PROTECTION.what, _DELETION_PROTECTION.children,
                                   moves_to=("deletionProtection",)),
        "ignoreStatusPatch": acts(_IGNORE_STATUS.what, moves_to=("ignoreStatusPatch",)),
        "ignoreObservedGeneration": warns(_RUNTIME_ONLY,
                                          moves_to=("ignoreObservedGeneration",)),
        "serviceAccountName": Key("orksync", _SERVICE_ACCOUNT.what,
                                  moves_to=("serviceAccountName",), portable=False),
        "autoscale": warns(_AUTOSCALE_RUNTIME.what, moves_to=("operatorBox", "autoscale")),
        "rollback": warns(_ROLLBACK.what, moves_to=("operatorBox", "rollback")),
        "cleanup": acts("a live custom resource whose conditions pass is deleted (its "
                        "onDelete runs), at once or deleteAfter after they first passed; "
                        "the inventory remembers it, and it is not applied again while Git "
                        "holds it unchanged (orksync.render.cleanup)", {
                            "when": acts("AND conditions"), "or": acts("OR conditions"),
                            "deleteAfter": acts("the wait after the conditions first pass "
                                                "(status.orksync.cleanupConditionsMetAt)"),
                        }),
    }),
    "reconcile": acts("group (v0.7.18): which reconciler runs and its tuning", {
        **{k: Key(v.does, v.what, v.children, v.each, ("operatorBox", "reconciler", k))
           for k, v in _RECONCILER.items()},
        "remote": refused(_NETWORK),
        "imports": acts(_IMPORTS.what, moves_to=("imports",)),
        "normalize": acts(_NORMALIZE.what, moves_to=("normalize",)),
    }),
    "emit": acts("group (v0.7.18): what a reconcile writes besides resources", {
        "status": acts(_STATUS.what, _STATUS.children, moves_to=("operatorBox", "status")),
        "events": warns("declarative Kubernetes Events after each reconcile; orksync "
                        "records its own Events (orksync.lifecycle.events)"),
    }),
}
# preReconcile has the same place in both layouts.

OPERATOR_BOX = acts("what the custom resources render and how", {
    "onCreate": _BLOCK, "onReconcile": _BLOCK, "onDelete": _BLOCK,
    "reconciler": acts("which reconciler runs", _RECONCILER),
    "default": info("the legacy (v0.7.6 and before) switch for declarative templates; "
                    "ignored by Orkestra now, and by orksync"),
    "preReconcile": _PRE_RECONCILE,
    "status": _STATUS,
    "cross": _CROSS,
    "observe": acts("secondary objects observed", {
        "watch": _OBSERVE_WATCH, "events": _OBSERVE_EVENTS, "include": acts(_INCLUDE)}),
    "finalizers": _FINALIZERS,
    "providers": refused("provider libraries are Go code run by Orkestra"),
    "autoscale": _AUTOSCALE_RUNTIME,
    "rollback": _ROLLBACK,
    "rollBackOnError": _ROLLBACK,
    "when": info(_BOX_CONDITIONS),
    "or": info(_BOX_CONDITIONS),
    "imports": own(_IMPORTS.what + "; Orkestra reads imports on the CRD entry only",
                   portable=False),
    "validation": own("orksync also reads validation here; Orkestra only on the CRD "
                      "entry", portable=False),
    "mutation": own("orksync also reads mutation here; Orkestra only on the CRD entry",
                    portable=False),
    "normalize": own("orksync also reads normalize here; Orkestra only on the CRD entry",
                     portable=False),
    **_GROUPS,
})

ADMISSION = acts("group (v0.7.18): admission settings of the CRD entry", {
    "validation": acts(_VALIDATION.what, _VALIDATION.children, moves_to=("validation",)),
    "mutation": acts(_MUTATION.what, _MUTATION.children, moves_to=("mutation",)),
    "conversion": warns(_CONVERSION.what, moves_to=("conversion",)),
    "webhooks": warns(_WEBHOOKS.what, moves_to=("webhooks",)),
})

_ENRICH = ("Orkestra reads more live objects into each child's template data, under keys "
           "such as _pods, _replicaSets, _warnings, _endpoints, _backingPods, _node, _pv, "
           "_pvc, _pvcs, _storageClass, _activeJobs, _lastJob, _lastSuccessfulJob, "
           "_loadBalancerIPs, _tlsSecrets, _currentMetrics, _scaleTarget (per enrich "
           "target, some behind conditions); orksync's .children holds each declared child "
           "as read, so a template reading one of those keys finds nothing there")
_SELECTOR = "custom resources that do not match are left out, as Orkestra does not " \
    "reconcile them (`orksync validate` names each)"

CRD_ENTRY = acts("one custom resource kind and what its instances render", {
    "name": info("the entry's name in the early list form of spec.crds"),
    "katalogName": info(), "katalogNamespace": info(), "katalogDescription": info(),
    "katalogVersion": info(), "description": info(),
    "enabled": acts("false: the entry is skipped and its custom resources are left out"),
    "mode": warns("orksync reads every custom resource as plain YAML (Orkestra's dynamic "
                  "mode); typed mode needs Go types"),
    "apiTypes": acts("the custom resources' API type; for a built-in kind (`kind: "
                     "Namespace`) group, version and plural come from Orkestra's table of "
                     "built-in kinds (orksync.katalog.builtin_kinds) and the repository's "
                     "objects of that kind are the entry's resources", {
        "group": acts("API group"), "version": acts("API version"), "kind": acts("kind"),
        "plural": acts("plural (the resource name)"),
        "apiPath": info("/apis or /api; orksync finds the path by discovery"),
        "location": warns("typed mode (compiled Go types); orksync reads custom resources "
                          "as plain YAML"),
        "object": warns("typed mode (compiled Go types)"),
        "objectList": warns("typed mode (compiled Go types)"),
        "alias": warns("typed mode (compiled Go types)"),
    }),
    "crdFile": acts("the CustomResourceDefinition loaded from this file"),
    "crFiles": acts("custom resources loaded from these files"),
    "setup": acts("prerequisites of the entry's custom resources", {
        "apply": acts("these files (relative to the Katalog, inside the repository) are "
                      "applied as plain manifests, before the custom resources, even when "
                      "`.orksyncignore` lists them"),
        "wait": warns("objects `ork run` waits for in development; a sync applies every "
                      "stage in order and the health of the custom resources tells the "
                      "rest"),
    }),
    "namespaced": acts("whether the custom resources are namespaced"),
    "namespace": acts("only custom resources of this namespace are rendered; "
                      + _SELECTOR),
    "workersActive": warns(_RUNTIME_ONLY),
    "workers": warns(_RUNTIME_ONLY + " (CRD-level spelling of early Orkestra)"),
    "resync": warns(_RUNTIME_ONLY + " (CRD-level spelling of early Orkestra)"),
    "queue": warns(_RUNTIME_ONLY + " (CRD-level spelling of early Orkestra)"),
    "dependsOn": acts("the entry's custom resources wait (neither applied nor pruned) "
                      "until every custom resource of each entry it names with `healthy` "
                      "or `ready` (also as `{condition: healthy}`) is Ready, in a live "
                      "sync; `started` (and the list form) waits for nothing; `pending`, "
                      "`degraded` and `deleted` are refused"),
    "enrichAll": warns(_ENRICH),
    "enrich": warns(_ENRICH),
    "crossAccess": acts("false: a cross read of this entry's custom resources finds "
                        "nothing (found: \"false\", orksync.render.cross)"),
    "operatorBox": OPERATOR_BOX,
    "reconciler": own("the operatorBox under its name of orksync.konductor.io/v1Alpha; "
                      "a `constructor` or `hooks` in it (a custom reconciler's Go code) is "
                      "refused"),
    "labels": acts("labels added to each custom resource as it is applied (Orkestra "
                   "patches them onto it): static label keys, values are templates "
                   "rendered against the custom resource and win over the same key "
                   "written in Git; a value that renders to no valid label value fails "
                   "that custom resource (orksync.render.engine)"),
    "labelSelector": acts(_SELECTOR),
    "fieldSelector": acts(_SELECTOR),
    "ignoreStatusPatch": _IGNORE_STATUS,
    "ignoreObservedGeneration": _IGNORE_GENERATION,
    "endpoints": warns("Orkestra's per-CRD HTTP endpoints (/health, /info); orksync serves "
                       "none"),
    "allowedNamespaces": _NS, "restrictedNamespaces": _NS,
    "allowedClusterScopedKinds": own("cluster-scoped kinds the custom resources may "
                                     "create (docs/multi-tenancy.md)", portable=False),
    "allowedExternalHosts": own("hosts an `external:` URL chosen by a template may call "
                                "(docs/multi-tenancy.md)", portable=False),
    "serviceAccountName": _SERVICE_ACCOUNT,
    "healthTimeout": own("how long the children may take to become Current before the custom "
                         "resource is Stalled (docs/operations.md#custom-resource-health)",
                         portable=False),
    "conversion": _CONVERSION, "validation": _VALIDATION, "mutation": _MUTATION,
    "webhooks": _WEBHOOKS, "normalize": _NORMALIZE,
    "admission": ADMISSION,
    "removeFinalizers": warns(_RUNTIME_ONLY),
    "deletionProtection": _DELETION_PROTECTION,
    "imports": _IMPORTS,
    "serve": warns("the gateway's delivery surface; orksync serves no API"),
    "forceConflict": acts("server-side apply with force (default true)"),
})

_GATEWAYISH = "an Orkestra component orksync does not run"
_PROFILE_CLASSES = {
    "resources": "for a workload's `resources.profile`: requests, limits",
    "probes": "for a workload's `probes.<kind>.profile`: the probe timings",
    "containerSecurity": "for a workload's `securityContext.profile`",
    "podSecurity": "for a workload's `podSecurity.profile`",
    "rollingUpdate": "for a Deployment's or StatefulSet's `rollingUpdate.profile`: "
                     "maxSurge, maxUnavailable",
    "networkPolicies": "for a NetworkPolicy's `profile`: podSelector (the entry's own wins), "
                       "ingress, egress, policyTypes",
    "resourceQuotas": "for a ResourceQuota's `profile`: hard",
    "limitRanges": "for a LimitRange's `profile`: limits",
    "hpa": "for an HPA's `behavior.profile`: behavior; minReplicas, maxReplicas and "
           "targetCPUUtilizationPercentage where the entry sets none",
    "pdb": "for a PDB's `behavior.profile`: minAvailable, maxUnavailable",
}

KATALOG = acts("a Katalog document", {
    "apiVersion": acts("orkestra.orkspace.io/v1 or orkestra.konductor.io/v1Alpha"),
    "kind": acts("Katalog"),
    "metadata": acts("the Katalog's identity", {
        "name": acts("the Katalog's name (messages, ownership)"),
        "namespace": info("the Control Center's grouping"),
        "clusterName": info("the Control Center's grouping"),
        "description": info(), "version": info(), "author": info(), "license": info(),
        "tags": info(), "createdBy": info(), "projects": info(),
        "labels": own("accepted, not read (Orkestra's metadata has no labels)"),
        "annotations": own("orksync.io/template-dialect selects the template dialect "
                           "(docs/differences.md); Orkestra's metadata has no annotations"),
    }),
    "spec": acts("the CRD entries", {
        "crds": acts("the CRD entries, by name", each=CRD_ENTRY),
        "imports": acts("motifs whose notes (and profiles) the Katalog uses"),
        "finalizers": _FINALIZERS,
    }),
    "security": acts("Katalog-wide security settings", {
        "namespaceProtection": acts("the Katalog-level namespace guard", {
            "allowedNamespaces": _NS, "restrictedNamespaces": _NS,
            "enabled": warns("turns Orkestra's namespace webhook on or off; orksync "
                             "enforces the guard when rendering regardless"),
            "serviceName": warns(_WEBHOOK), "failurePolicy": warns(_WEBHOOK),
        }),
        "deletionProtection": _KATALOG_DELETION_PROTECTION,
        "webhooks": warns(_WEBHOOK),
        "conversion": _CONVERSION,
        "rbac": warns("Orkestra's own RBAC at start-up; orksync's permissions are its "
                      "deployment's"),
    }),
    "notes": acts("the Katalog's own template functions, by name"),
    "profiles": acts("the Katalog's own profiles, by class: an entry's `profile:` naming "
                     "one gets its fields, as a built-in profile's (orksync.katalog.profiles, "
                     "orksync.render.user_profiles); one named like a built-in profile "
                     "replaces it, with a warning (Orkestra's rule)", {
                         "include": acts("a file holding `profiles:`, relative to the "
                                         "Katalog, inside the repository; its profiles come "
                                         "before the Katalog's own"),
                         **{cls: acts(what) for cls, what in _PROFILE_CLASSES.items()},
                         "reconciler": warns("reconciler profiles tune Orkestra's workers "
                                             "and queues; " + _RUNTIME_ONLY),
                     }),
    "gateway": warns(_GATEWAYISH + " (the gateway)"),
    "publish": warns("supply-chain policy for `ork push`; orksync renders from Git"),
    "notification": warns(_GATEWAYISH + " (alerting)"),
    "providers": refused("provider libraries are Go code run by Orkestra"),
    "lifecycle": info("maturity and deprecation, read by Orkestra's tooling only"),
    "policy": info("Komposer import policy, read by Orkestra's tooling only"),
    "imports": refused("Orkestra refuses imports in a kind: Katalog (a Komposer's "
                       "sources); write kind: Komposer to compose Katalogs"),
    "crossAccess": acts("the crossAccess of every entry that sets none"),
})

# A Komposer has a Katalog's keys; `imports` names the Katalogs it composes, and its
# `spec.crds` entries override theirs (orksync.katalog.komposer).
KOMPOSER_IMPORTS = acts("the Katalogs the Komposer composes (orksync.katalog.komposer)", {
    "files": acts("Katalog files of the repository (a path, or {url: <path>}), relative to "
                  "the Komposer's file; each is loaded through the Komposer only, with the "
                  "Komposer's spec.crds overrides merged into its entries as Orkestra "
                  "merges them; a remote URL or a $VARIABLE is refused (network, process "
                  "environment), and so is a Komposer"),
    "helm": refused("a Helm chart is fetched and rendered while loading (network, the helm "
                    "tool); vendor the rendered Katalog into the repository"),
    "registry": refused("an OCI registry is pulled while loading (network); vendor the "
                        "Katalog into the repository"),
})
KOMPOSER = acts("a Komposer document", {
    **(KATALOG.children or {}),
    "kind": acts("Komposer"),
    "imports": KOMPOSER_IMPORTS,
    "spec": acts("the Komposer's overrides and new entries", {
        "crds": acts("by name: an entry named like an imported one overrides it (the fields "
                     "Orkestra merges: orksync.katalog.komposer.MERGED_FIELDS; any other "
                     "warns that it is not merged); any other is a new entry",
                     each=CRD_ENTRY),
        "imports": refused("Orkestra refuses spec.imports in a Komposer: declare notes: "
                           "and profiles: in it instead"),
        "finalizers": _FINALIZERS,
    }),
})


@dataclass(frozen=True, slots=True)
class Finding:
    """One key of a document the table says something about."""

    path: tuple[str | int, ...]  # from the document root
    level: str  # error | warning
    message: str


def check(document: Mapping[str, Any], schema: Key = KATALOG) -> list[Finding]:
    """Every unknown, refused, warned and non-portable key of `document`, in document
    order."""
    return list(_walk(document, schema, ()))


def _walk(value: Any, key: Key, path: tuple[str | int, ...]) -> Iterator[Finding]:
    if key.does == "warns":
        yield Finding(path, "warning", f"accepted, not acted on: {key.what}")
        return
    if key.does == "refused":
        yield Finding(path, "error", f"not supported by orksync: {key.what}")
        return
    if key.does == "orksync" and not key.portable:
        yield Finding(path, "warning", f"not portable to Orkestra: {key.what}")
    if not isinstance(value, Mapping):
        return  # a wrong type is reported where the value is read
    if key.each is not None:
        for name, item in value.items():
            yield from _walk(item, key.each, (*path, str(name)))
        return
    if key.children is None:
        return
    for name, item in value.items():
        name = str(name)
        child = key.children.get(name)
        if child is None:
            nearest = difflib.get_close_matches(name, list(key.children), n=1)
            hint = f" (did you mean {nearest[0]!r}?)" if nearest else ""
            yield Finding((*path, name), "error",
                          f"unknown field {name!r}{hint}: Orkestra refuses it too")
            continue
        yield from _walk(item, child, (*path, name))


def docs_table(schema: Key = KATALOG, prefix: str = "") -> list[tuple[str, str, str]]:
    """(key path, what orksync does, detail) for every key of the table, depth first:
    the rows of docs/katalog-schema.md."""
    rows: list[tuple[str, str, str]] = []
    if schema.each is not None:
        rows.extend(docs_table(schema.each, prefix + ".<name>"))
    for name, key in (schema.children or {}).items():
        path = f"{prefix}.{name}" if prefix else name
        label = {"acts": "acts", "info": "accepted (descriptive)",
                 "warns": "warns: not done", "refused": "refused",
                 "orksync": "acts (orksync)" if key.portable else "acts, warns: not portable"
                 }[key.does]
        detail = key.what
        if key.moves_to:
            detail += f" (flat layout: `{'.'.join(key.moves_to)}`)"
        rows.append((path, label, detail))
        rows.extend(docs_table(key, path))
    return rows



def docs_markdown() -> str:
    """The table of docs/katalog-schema.md, between its generated-section markers."""
    lines = ["| key | orksync | what orksync does, or why not |", "|---|---|---|"]
    spec = (KOMPOSER.children or {})["spec"]
    komposer_only = Key("acts", "", {"imports": KOMPOSER_IMPORTS, "spec": Key(
        "acts", spec.what, {k: v for k, v in (spec.children or {}).items()
                            if k in ("crds", "imports")})})
    for path, label, detail in [*docs_table(),
                                *[(f"(Komposer) {p}", lb, d)
                                  for p, lb, d in docs_table(komposer_only)
                                  if not p.startswith("spec.crds.<name>")]]:
        lines.append(f"| `{path}` | {label} | {detail.replace('|', '/')} |")
    return "\n".join(lines) + "\n"
