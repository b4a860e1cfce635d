"""One CRD entry of a Katalog, checked and brought to a `CrdEntry`: the grouped layout
flattened and its includes resolved, field types, what orksync cannot run (custom
reconcilers, remote cross reads), its kind from apiTypes / crdFile / the repository's
CRDs, tenancy, runtime.cleanup, healthTimeout, dependsOn, the custom-resource selection."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from orksync.durations import parse_duration
from orksync.katalog.builtin_kinds import BUILTIN_KINDS, CLUSTER_SCOPED
from orksync.katalog.layout import flatten, get_in, resolve_includes
from orksync.katalog.loader.crds import crd_file
from orksync.katalog.loader.files import linked_file
from orksync.katalog.loader.state import LoadState, text_problem, type_name
from orksync.katalog.model import (
    CrdEntry,
    CrdManifest,
    Selection,
)
from orksync.katalog.motifs import expand_entry
from orksync.katalog.profiles import Profiles
from orksync.katalog.tenancy import ALLOWED_HOSTS_FIELD, allowed_hosts_problem, tenancy_of
from orksync.names import (
    kind_problem,
    label_key_problem,
    label_problem,
    subdomain_problem,
)
from orksync.yamls.doc import Document

# Entry fields that must be lists of namespace patterns: a lone string would be read
# character by character, and a `*` among them would open the guard to every namespace.
NAMESPACE_LISTS = ("allowedNamespaces", "restrictedNamespaces")


def crd_entry(st: LoadState, doc: Document, katalog: str, key: str, raw: Any,
              fpath: list[str | int], crds: dict[str, CrdManifest],
              profiles: Profiles | None = None) -> CrdEntry:
    obj = f"Katalog/{katalog}"
    if not isinstance(raw, dict):
        raise st.error(doc, "CRD entry must be a map", fpath, obj)
    flat = flatten(raw)
    if not flat.problems:
        resolve_includes(flat, doc.file, st.root)
    if flat.problems:
        *rest, last = [st.error(doc, message, [*fpath, *path], obj)
                       for path, message in flat.problems]
        st.errors.extend(rest)
        raise last
    raw = flat.raw
    wrong = _entry_type_problem(raw)
    if wrong:
        raise st.error(doc, wrong[1], [*fpath, *flat.written_at(wrong[0])], obj)
    if get_in(raw, ("operatorBox", "reconciler", "default")) is False:
        raise st.error(doc, "default: false runs a custom reconciler (Go code "
                       "compiled into an Orkestra operator); orksync renders the "
                       "declarative templates only: not supported",
                       [*fpath, *flat.written_at(["operatorBox", "reconciler",
                                                  "default"])], obj)
    go_code = _crd_level_go_code(raw)
    if go_code:
        raise st.error(doc, "needs Go code compiled into an Orkestra operator (a "
                       "constructor or hooks of a custom reconciler); orksync renders "
                       "the declarative templates only: not supported",
                       [*fpath, *go_code], obj)
    remote = _remote_cross(raw)
    if remote:
        raise st.error(doc, "reads another Orkestra instance over HTTP while "
                       "reconciling; a render is offline and repeatable and reads "
                       "the custom resources of its repository (and the live status "
                       "of its cluster) only: not supported",
                       [*fpath, *flat.written_at(remote)], obj)
    for path in _any_of(raw, []):
        st.warn(doc, obj, [*fpath, *flat.written_at(path)], "not portable to Orkestra: "
                "anyOf was renamed or in v0.7.16, and Orkestra refuses the old name")
    selection = _selection(raw)
    if isinstance(selection, tuple):
        raise st.error(doc, selection[1], [*fpath, *selection[0]], obj)
    manifest = None
    if raw.get("crdFile"):
        manifest = crd_file(st, doc, raw["crdFile"], [*fpath, "crdFile"], obj)
        crds.setdefault(manifest.name, manifest)
    for i, cr_file in enumerate(raw.get("crFiles") or []):
        linked_file(st, doc, cr_file, [*fpath, "crFiles", i], obj, required=False)
    setup = raw.get("setup")
    for i, setup_file in enumerate(setup.get("apply") or []
                                   if isinstance(setup, dict) else []):
        where = [*fpath, *flat.written_at(["setup", "apply", i])]
        if not isinstance(setup_file, str) or not setup_file:
            raise st.error(doc, f"must be a file path (a string), not "
                           f"{type_name(setup_file)}", where, obj)
        target = linked_file(st, doc, setup_file, where, obj, required=True)
        st.setup_files.add(target)  # loaded even when the walk left it out
    api = raw.get("apiTypes") or {}
    if manifest is None:
        manifest = next((m for m in crds.values() if m.group == api.get("group")
                         and m.kind == api.get("kind")), None)
    builtin = BUILTIN_KINDS.get(str(api.get("kind"))) if manifest is None else None
    if builtin is not None:  # Orkestra fills a built-in kind's from its table
        group_, version_, plural_ = builtin
        api = {"group": group_, "version": version_, "plural": plural_, **api}
    group = str(api.get("group") or (manifest.group if manifest else ""))
    kind = str(api.get("kind") or (manifest.kind if manifest else ""))
    version = str(api.get("version") or (manifest.storage_version if manifest else ""))
    plural = str(api.get("plural") or (manifest.plural if manifest else ""))
    missing = [n for n, v in (("group", group), ("version", version), ("kind", kind),
                              ("plural", plural))
               if not v and not (n == "group" and builtin is not None)]
    if missing:
        raise st.error(doc, f"apiTypes.{', apiTypes.'.join(missing)} not set and no "
                       "crdFile (or CustomResourceDefinition in the repository) gives "
                       "them", [*fpath, "apiTypes"], obj)
    for field, problem in (("group", subdomain_problem(group)
                             if group or builtin is None else None),
                           ("version", label_problem(version)),
                           ("kind", kind_problem(kind)), ("plural", label_problem(plural))):
        if problem:
            where = ["apiTypes", field] if api.get(field) else ["crdFile"]
            raise st.error(doc, problem, [*fpath, *where], obj)
    namespaced = raw.get("namespaced", True) is not False
    if manifest is not None and not manifest.namespaced:
        namespaced = False
    if builtin is not None and kind in CLUSTER_SCOPED:
        namespaced = False
    box = raw.get("operatorBox") or raw.get("reconciler") or {}
    if raw.get("imports") or (isinstance(box, dict) and box.get("imports")):
        expansion = expand_entry(raw, doc.file, st.root)
        st.warnings.extend(f"{st.rel(doc.file)}: {obj}: {w}" for w in expansion.warnings)
        if expansion.problems:
            *rest, last = [st.error(doc, p, [*fpath, "imports"], obj)
                           for p in expansion.problems]
            st.errors.extend(rest)
            raise last
        raw = expansion.raw
        box = raw.get("operatorBox") or raw.get("reconciler") or {}
    if not isinstance(box, dict):
        raise st.error(doc, "operatorBox must be a map", [*fpath, "operatorBox"], obj)
    tenancy, problems = tenancy_of(doc.content, raw, fpath, namespaced=namespaced)
    if problems:  # a guard that does not read as written must not render anything
        *rest, last = [st.error(doc, message, _written(path, fpath, flat.written_at),
                                obj) for path, message in problems]
        st.errors.extend(rest)
        raise last
    wrong_cleanup = _cleanup_problem(box, raw.get("ignoreStatusPatch") is True)
    if wrong_cleanup:
        raise st.error(doc, wrong_cleanup[1], [*fpath, "operatorBox", "runtime",
                                               "cleanup", *wrong_cleanup[0]], obj)
    timeout = raw.get("healthTimeout")  # orksync.status.health; docs/operations.md
    if timeout is not None:
        try:
            parse_duration(str(timeout))
        except ValueError as err:
            raise st.error(doc, f"not a duration: {err}", [*fpath, "healthTimeout"],
                           obj) from err
    hosts = raw.get(ALLOWED_HOSTS_FIELD)
    problem = allowed_hosts_problem(hosts)
    if problem:
        raise st.error(doc, problem, [*fpath, *flat.written_at([ALLOWED_HOSTS_FIELD])],
                       obj)
    depends_on, refusal = _depends_on(raw.get("dependsOn"))
    if refusal is not None:
        raise st.error(doc, refusal[1],
                       [*fpath, *flat.written_at(["dependsOn", *refusal[0]])], obj)
    return CrdEntry(key=key, katalog=katalog, source=st.source(doc), group=group,
                    version=version, kind=kind, plural=plural, namespaced=namespaced,
                    operator_box=box, raw=raw,
                    crd_name=manifest.name if manifest else f"{plural}.{group}",
                    tenancy=tenancy, selection=selection,
                    protect_crd=_protects_crd(doc.content, raw),
                    depends_on=depends_on, external_hosts=tuple(hosts or ()),
                    moved=tuple(flat.moved.items()), profiles=profiles or {},
                    cross_access=_cross_access(doc.content, raw))


def _entry_type_problem(raw: dict[str, Any]) -> tuple[list[str | int], str] | None:
    """The first field of a CRD entry whose type is wrong: (field path, message)."""
    for key in ("crdFile",):
        if raw.get(key) is not None and not isinstance(raw[key], str):
            return [key], f"must be a file path (a string), not {type_name(raw[key])}"
    for key in ("namespaced", "enabled", "crossAccess"):
        if raw.get(key) is not None and not isinstance(raw[key], bool):
            return [key], f"must be true or false, not {type_name(raw[key])}"
    for key in ("crFiles", *NAMESPACE_LISTS):
        value = raw.get(key)
        if value is None:
            continue
        if not isinstance(value, list):
            return [key], f"must be a list of strings, not {type_name(value)}"
        for i, item in enumerate(value):
            if not isinstance(item, str):
                return [key, i], f"must be text, not {type_name(item)}"
    setup = raw.get("setup")
    if setup is not None and not isinstance(setup, dict):
        return ["setup"], f"must be a map (apply, wait), not {type_name(setup)}"
    files = (setup or {}).get("apply")
    if files is not None and not isinstance(files, list):
        return ["setup", "apply"], f"must be a list of file paths, not {type_name(files)}"
    box_key = "operatorBox" if "operatorBox" in raw else "reconciler"
    conditions = get_in(raw, (box_key, "status", "conditions"))
    if conditions is not None and not isinstance(conditions, bool):
        return [box_key, "status", "conditions"], \
            f"must be true or false, not {type_name(conditions)}"
    api = raw.get("apiTypes")
    if api is not None and not isinstance(api, dict):
        return ["apiTypes"], f"must be a map, not {type_name(api)}"
    for key, value in (api or {}).items():
        if value is not None and not isinstance(value, str):
            return ["apiTypes", str(key)], f"must be a string, not {type_name(value)}"
    return _labels_problem(raw.get("labels"))


def _labels_problem(labels: Any) -> tuple[list[str | int], str] | None:
    """Orkestra's check of an entry's `labels` (labels added to each custom resource):
    static, valid label keys; values are templates (text), rendered per custom
    resource."""
    if labels is None:
        return None
    if not isinstance(labels, dict):
        return ["labels"], f"must be a map of label key to value, not {type_name(labels)}"
    for key, value in labels.items():
        if not isinstance(key, str) or "{{" in key:
            return ["labels", str(key)], (f"key {key!r} must be a static label key, not a "
                                          "template")
        problem = label_key_problem(key)
        if problem:
            return ["labels", key], problem
        if not isinstance(value, str):
            return ["labels", key], (f"must be a label value or a template (a string), not "
                                     f"{type_name(value)}")
    return None


def _cross_access(katalog: dict[str, Any], entry: dict[str, Any]) -> bool:
    """Orkestra's crossAccess of an entry: its own, else the Katalog's (the default of
    every entry that sets none), else true."""
    own = entry.get("crossAccess")
    if isinstance(own, bool):
        return own
    return katalog.get("crossAccess") is not False


def _cleanup_problem(box: dict[str, Any], no_status: bool
                     ) -> tuple[list[str | int], str] | None:
    """The first wrong field of runtime.cleanup (orksync.render.cleanup): (path below it,
    message). `no_status`: the entry has ignoreStatusPatch, so deleteAfter could never
    count (its start is noted in the status)."""
    runtime = box.get("runtime")
    block = runtime.get("cleanup") if isinstance(runtime, dict) else None
    if block is None:
        return None
    if not isinstance(block, dict):
        return [], f"must be a map (when, or, deleteAfter), not {type_name(block)}"
    for key in ("when", "or"):
        value = block.get(key)
        if value is not None and (not isinstance(value, list)
                                  or not all(isinstance(c, dict) for c in value)):
            return [key], "must be a list of conditions"
    wait = block.get("deleteAfter")
    if wait is not None:
        try:
            parse_duration(str(wait))
        except ValueError as err:
            return ["deleteAfter"], f"not a duration: {err}"
        if no_status:
            return ["deleteAfter"], ("counts from status.orksync.cleanupConditionsMetAt, "
                                     "which ignoreStatusPatch keeps orksync from writing: "
                                     "remove one of the two")
    return None


# dependsOn states: what orksync waits for (Orkestra's `ready` is read as `healthy`); the
# others gate on a controller's life cycle, which a sync does not have
DEPENDS_ON_STATES = {"started": "started", "healthy": "healthy", "ready": "healthy"}


DEPENDS_ON_REFUSED = ("pending", "degraded", "deleted")


def _depends_on(value: Any) -> tuple[tuple[tuple[str, str], ...],
                                     tuple[list[str | int], str] | None]:
    """An entry's dependsOn as (entry key, state) pairs: a list of names (each
    `started`) or a map of name to state (`db: healthy`, or Orkestra's
    `db: {condition: healthy}`); or the problem (path under dependsOn, message)."""
    if value is None:
        return (), None
    if isinstance(value, list):
        for i, item in enumerate(value):
            if not isinstance(item, str) or not item:
                return (), ([i], f"must be a CRD entry name, not {type_name(item)}")
        return tuple((item, "started") for item in value), None
    if not isinstance(value, dict):
        return (), ([], f"must be a list of CRD entry names or a map of name to state, "
                        f"not {type_name(value)}")
    pairs = []
    for name, state in value.items():
        if isinstance(state, dict):  # Orkestra's map form: {db: {condition: healthy}}
            extra = sorted(str(k) for k in state if k != "condition")
            if extra:
                return (), ([str(name), extra[0]], "unknown key: a dependency is "
                            "{condition: <state>} (or the state alone)")
            state = state.get("condition")
        if state in DEPENDS_ON_REFUSED:
            return (), ([str(name)], f"state {state!r} is not supported: a sync waits for "
                        "a dependency's custom resources to be healthy (healthy, ready) "
                        "or for nothing (started); it has no controller whose life cycle "
                        "could be pending, degraded or deleted")
        if not isinstance(state, str) or state not in DEPENDS_ON_STATES:
            return (), ([str(name)], f"must be one of started, healthy, ready (or "
                        f"Orkestra's {', '.join(DEPENDS_ON_REFUSED)}), not {state!r}")
        pairs.append((str(name), DEPENDS_ON_STATES[state]))
    return tuple(pairs), None


def _crd_level_go_code(raw: Mapping[str, Any]) -> list[str | int]:
    """The path of a CRD-level `reconciler: {constructor: ...}` or `{hooks: ...}` (a
    custom reconciler's Go code), [] when there is none. Read whether `reconciler` is the
    entry's reconciler settings (beside an operatorBox) or the v1Alpha name of the box."""
    reconciler = raw.get("reconciler")
    if not isinstance(reconciler, Mapping):
        return []
    return next((["reconciler", key] for key in ("constructor", "hooks")
                 if reconciler.get(key) not in (None, "", {}, [])), [])


def _remote_cross(raw: Mapping[str, Any]) -> list[str | int]:
    """The path of a `cross[].source` (a cross read from another Orkestra instance over
    HTTP), [] when there is none."""
    box = raw.get("operatorBox") or raw.get("reconciler")
    cross = box.get("cross") if isinstance(box, Mapping) else None
    for i, item in enumerate(cross if isinstance(cross, list) else []):
        if isinstance(item, Mapping) and item.get("source") not in (None, "", {}):
            return ["operatorBox", "cross", i, "source"]
    return []


def _protects_crd(katalog: dict[str, Any], entry: dict[str, Any]) -> bool:
    """Orkestra's deletion protection of the entry's CRD: the Katalog's
    security.deletionProtection is declared and not `enabled: false`, and the entry's
    deletionProtection (flat, or runtime.deletionProtection) does not say protectCRD:
    false."""
    block = get_in(katalog, ("security", "deletionProtection"))
    if not isinstance(block, dict) or block.get("enabled") is False:
        return False
    override = entry.get("deletionProtection")
    return not (isinstance(override, dict) and override.get("protectCRD") is False)


def _any_of(node: Any, path: list[str | int]) -> Iterator[list[str | int]]:
    """The paths of the `anyOf` condition lists of an entry (the preReconcile gates'
    are the schema table's)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "anyOf" and isinstance(value, list):
                yield [*path, key]
            elif path != ["operatorBox"] or key != "preReconcile":
                yield from _any_of(value, [*path, str(key)])
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _any_of(value, [*path, i])


def _written(path: list[str | int], fpath: list[str | int],
             written_at: Callable[[list[str | int]], list[str | int]]) -> list[str | int]:
    """A problem's document path as written: its grouped spelling when the setting was
    moved from the grouped layout."""
    if path[:len(fpath)] == fpath:
        return [*fpath, *written_at(path[len(fpath):])]
    return path


def _selection(raw: dict[str, Any]) -> Selection | tuple[list[str | int], str]:
    """The entry's Selection, or (field path, problem)."""
    namespace = raw.get("namespace")
    if namespace is not None:
        problem = text_problem(namespace, label_problem)
        if problem:
            return ["namespace"], problem
    pairs: dict[str, tuple[tuple[str, str], ...]] = {}
    for key in ("labelSelector", "fieldSelector"):
        value = raw.get(key)
        if value is None:
            pairs[key] = ()
            continue
        if not isinstance(value, dict):
            return [key], f"must be a map of key to value, not {type_name(value)}"
        for k, v in value.items():
            if not isinstance(v, (str, int, float, bool)):
                return [key, str(k)], f"must be a value (text), not {type_name(v)}"
        pairs[key] = tuple((str(k), selector_value(v)) for k, v in value.items())
    return Selection(namespace=str(namespace or ""), labels=pairs["labelSelector"],
                     fields=pairs["fieldSelector"])


def selector_value(value: Any) -> str:
    """A selector value as the API server compares it (YAML true is "true")."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)
