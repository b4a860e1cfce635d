"""`orksync install`: the manifests of deploy/ (the kustomize base and its impersonation
overlay), built here without kustomize and with the install's substitutions (namespace,
image, the agent's settings), printed or applied server-side.

deploy/ is the one source of truth: it ships inside the package (`orksync/deploy` is a
link to it in a checkout, package data in a wheel), and this module reads its
kustomization files. It understands the part of kustomize those files use —
`resources` (files and directories), `namespace`, `labels` without selectors, `images`,
and `patches` (a strategic-merge patch file, or an inline JSON patch with a target) —
and refuses any other field, naming the file, so a kustomization that grows a feature
fails here instead of installing something else than `kubectl apply -k deploy/`.
tests/cli/test_install_cluster.py proves the output equals `kubectl kustomize`'s.
"""

from __future__ import annotations

import argparse
import copy
import logging
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from orksync.cli.flags import add_cluster_flags
from orksync.errors import OrksyncError, UsageError

if TYPE_CHECKING:
    from orksync.cluster.kube import Kube

__all__ = ["DEPLOY", "InstallOptions", "add_install_parser", "build", "cmd_install", "kustomize",
           "split_image"]

log = logging.getLogger("orksync")

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
FIELD_MANAGER = "orksync-install"
DEFAULT_NAMESPACE = "orksync-system"
AGENT_IMAGE_NAME = "orksync"  # the image name in deploy/'s manifests, before `images:`

# Kinds that live outside namespaces, among those deploy/ holds (the namespace transformer
# leaves them alone).
CLUSTER_SCOPED = frozenset({"Namespace", "ClusterRole", "ClusterRoleBinding",
                            "CustomResourceDefinition", "ValidatingWebhookConfiguration",
                            "MutatingWebhookConfiguration", "PriorityClass", "StorageClass",
                            "IngressClass", "APIService"})
# The order objects are applied and printed in: what others need first.
ORDER = ("Namespace", "CustomResourceDefinition", "ServiceAccount", "ClusterRole",
         "ClusterRoleBinding", "Role", "RoleBinding", "Secret", "ConfigMap", "Service",
         "NetworkPolicy", "Deployment", "CronJob", "Ingress")
KNOWN_FIELDS = frozenset({"apiVersion", "kind", "namespace", "labels", "resources", "images",
                          "patches"})


class InstallError(UsageError):
    """deploy/ holds something this builder does not understand."""


@dataclass(frozen=True, slots=True, kw_only=True)
class InstallOptions:
    namespace: str = DEFAULT_NAMESPACE
    image: str = ""  # REPOSITORY[:TAG][@sha256:DIGEST]; "": deploy/'s
    watch_namespace: str = ""  # the agent's ORKSYNC_WATCH_NAMESPACE (its Sync objects')
    impersonation: bool = True  # deploy/overlays/impersonation, else deploy/ (the base)
    repo_url: str = ""  # the agent's ORKSYNC_REPO_URL, ORKSYNC_REF, ORKSYNC_PATH
    ref: str = ""
    path: str = ""


def build(options: InstallOptions, deploy: Path = DEPLOY) -> list[dict[str, Any]]:
    """The objects `orksync install` applies, in the order it applies them."""
    root = deploy / "overlays" / "impersonation" if options.impersonation else deploy
    docs = kustomize(root)
    if options.namespace != DEFAULT_NAMESPACE:
        _set_namespace(docs, options.namespace)
    if options.image:
        name, tag, digest = split_image(options.image)
        for container in _containers(docs):
            if _image_name(container["image"]) == _deployed_image(deploy):
                container["image"] = f"{name}@{digest}" if digest else f"{name}:{tag}" \
                    if tag else name
    env = {"ORKSYNC_WATCH_NAMESPACE": options.watch_namespace,
           "ORKSYNC_REPO_URL": options.repo_url, "ORKSYNC_REF": options.ref,
           "ORKSYNC_PATH": options.path}
    for doc in docs:
        if doc["kind"] == "Deployment":
            for container in doc["spec"]["template"]["spec"]["containers"]:
                for key, value in env.items():
                    if value:
                        _set_env(container, key, value)
    return sorted(docs, key=_apply_order)


def kustomize(root: Path) -> list[dict[str, Any]]:
    """The objects of the kustomization in `root`, transformed as kustomize does for the
    fields this module knows (the module's docstring)."""
    file = root / "kustomization.yaml"
    spec = _load_one(file)
    unknown = set(spec) - KNOWN_FIELDS
    if unknown:
        raise InstallError(f"{file}: {', '.join(sorted(unknown))}: not understood by orksync "
                           f"install (it knows {', '.join(sorted(KNOWN_FIELDS))})")
    docs: list[dict[str, Any]] = []
    for entry in spec.get("resources") or []:
        path = Path(os.path.normpath(root / str(entry)))
        docs += kustomize(path) if path.is_dir() else _load_all(path)
    for number, patch in enumerate(spec.get("patches") or []):
        _patch(docs, patch, root, f"{file}: patches[{number}]")
    if spec.get("namespace"):
        _set_namespace(docs, str(spec["namespace"]))
    for number, entry in enumerate(spec.get("labels") or []):
        if entry.get("includeSelectors") or entry.get("includeTemplates"):
            raise InstallError(f"{file}: labels[{number}]: only includeSelectors: false and "
                               f"no includeTemplates are understood")
        for doc in docs:
            doc.setdefault("metadata", {}).setdefault("labels", {}).update(entry["pairs"])
    for entry in spec.get("images") or []:
        for container in _containers(docs):
            if _image_name(container["image"]) == entry["name"]:
                name = entry.get("newName", entry["name"])
                if entry.get("digest"):
                    container["image"] = f"{name}@{entry['digest']}"
                else:
                    tag = entry.get("newTag") or _image_tag(container["image"])
                    container["image"] = f"{name}:{tag}" if tag else name
    return docs


def split_image(image: str) -> tuple[str, str, str]:
    """(name, tag, digest) of REPOSITORY[:TAG][@sha256:DIGEST]."""
    name, _, digest = image.partition("@")
    if digest and not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
        raise UsageError(f"--image {image}: the digest is not sha256:<64 hex digits>")
    tag = ""
    if ":" in name.rsplit("/", 1)[-1]:
        name, tag = name.rsplit(":", 1)
    if not name or (not tag and not digest):
        raise UsageError(f"--image {image}: expected REPOSITORY:TAG or REPOSITORY@sha256:DIGEST "
                         f"(a moving tag such as latest is refused)")
    if tag == "latest":
        raise UsageError(f"--image {image}: `latest` moves; give a version tag or a digest")
    return name, tag, digest


# --- the transformers ----------------------------------------------------------------------


def _set_namespace(docs: list[dict[str, Any]], namespace: str) -> None:
    """kustomize's namespace transformer: namespaced objects, the Namespace object itself,
    and the ServiceAccount subjects of bindings that were in the old namespace."""
    old = {str(d["metadata"].get("namespace")) for d in docs
           if d["kind"] not in CLUSTER_SCOPED and d["metadata"].get("namespace")}
    old |= {str(d["metadata"]["name"]) for d in docs if d["kind"] == "Namespace"}
    for doc in docs:
        meta = doc["metadata"]
        if doc["kind"] == "Namespace":
            meta["name"] = namespace
        elif doc["kind"] not in CLUSTER_SCOPED:
            meta["namespace"] = namespace
        if doc["kind"] in ("RoleBinding", "ClusterRoleBinding"):
            for subject in doc.get("subjects") or []:
                if subject.get("kind") == "ServiceAccount" and \
                        subject.get("namespace") in old:
                    subject["namespace"] = namespace


def _patch(docs: list[dict[str, Any]], patch: Mapping[str, Any], root: Path, where: str
           ) -> None:
    if "path" in patch:
        body = _load_one(root / str(patch["path"]))
        target = {"kind": body.get("kind"), "name": (body.get("metadata") or {}).get("name")}
    elif "patch" in patch and "target" in patch:
        body = yaml.safe_load(str(patch["patch"]))
        target = dict(patch["target"])
    else:
        raise InstallError(f"{where}: expected `path`, or `patch` with `target`")
    if set(target) - {"kind", "name"}:
        raise InstallError(f"{where}: a target by kind and name only is understood")
    matched = [d for d in docs if d["kind"] == target.get("kind") and
               d["metadata"]["name"] == target.get("name")]
    if not matched:
        raise InstallError(f"{where}: no {target.get('kind')} {target.get('name')} to patch")
    for doc in matched:
        if isinstance(body, list):
            for number, op in enumerate(body):
                _json_patch(doc, op, f"{where}: op {number}")
        elif isinstance(body, dict):
            _merge(doc, body)
        else:
            raise InstallError(f"{where}: neither a JSON patch (a list) nor a merge patch")


def _merge(doc: dict[str, Any], patch: Mapping[str, Any]) -> None:
    """A strategic merge of maps; a list is replaced whole (as kustomize does for lists
    without a merge key, such as a ClusterRole's rules)."""
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(doc.get(key), dict):
            _merge(doc[key], value)
        elif isinstance(value, list) and isinstance(doc.get(key), list) and \
                any(isinstance(v, dict) and "name" in v for v in doc[key]):
            raise InstallError(f"a merge patch of the list {key!r}, whose items have a merge "
                               f"key: use a JSON patch")
        else:
            doc[key] = copy.deepcopy(value)


def _json_patch(doc: dict[str, Any], op: Mapping[str, Any], where: str) -> None:
    """RFC 6902 add, replace and remove."""
    kind = op.get("op")
    parts = [p.replace("~1", "/").replace("~0", "~") for p in str(op["path"]).split("/")[1:]]
    parent: Any = doc
    for part in parts[:-1]:
        parent = parent[int(part)] if isinstance(parent, list) else parent[part]
    last = parts[-1]
    if kind == "add":
        if isinstance(parent, list):
            parent.insert(len(parent) if last == "-" else int(last), copy.deepcopy(op["value"]))
        else:
            parent[last] = copy.deepcopy(op["value"])
    elif kind == "replace":
        parent[int(last) if isinstance(parent, list) else last] = copy.deepcopy(op["value"])
    elif kind == "remove":
        del parent[int(last) if isinstance(parent, list) else last]
    else:
        raise InstallError(f"{where}: op {kind!r} is not understood (add, replace, remove)")


# --- helpers -------------------------------------------------------------------------------


def _load_one(path: Path) -> dict[str, Any]:
    docs = _load_all(path)
    if len(docs) != 1:
        raise InstallError(f"{path}: expected one YAML document, found {len(docs)}")
    return docs[0]


def _load_all(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise InstallError(f"{path}: cannot read: {err.strerror or err}") from None
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise InstallError(f"{path}{line}: not YAML: {getattr(err, 'problem', err)}") from None
    for doc in docs:
        if not isinstance(doc, dict):
            raise InstallError(f"{path}: a document is not a mapping")
    return docs


def _containers(docs: Iterable[dict[str, Any]]) -> Iterable[dict[str, Any]]:
    for doc in docs:
        spec = doc.get("spec") or {}
        if doc["kind"] == "CronJob":
            spec = spec["jobTemplate"]["spec"]
        pod = (spec.get("template") or {}).get("spec") or {}
        yield from pod.get("initContainers") or []
        yield from pod.get("containers") or []


def _image_name(image: str) -> str:
    name = image.partition("@")[0]
    if ":" in name.rsplit("/", 1)[-1]:
        name = name.rsplit(":", 1)[0]
    return name


def _image_tag(image: str) -> str:
    name = image.partition("@")[0]
    last = name.rsplit("/", 1)[-1]
    return last.rsplit(":", 1)[1] if ":" in last else ""


def _deployed_image(deploy: Path) -> str:
    """The name deploy/'s `images:` gives the agent's image."""
    for entry in _load_one(deploy / "base" / "kustomization.yaml").get("images") or []:
        if entry.get("name") == AGENT_IMAGE_NAME:
            return str(entry.get("newName", AGENT_IMAGE_NAME))
    return AGENT_IMAGE_NAME


def _set_env(container: dict[str, Any], name: str, value: str) -> None:
    env = container.setdefault("env", [])
    for item in env:
        if item.get("name") == name:
            item.pop("valueFrom", None)
            item["value"] = value
            return
    env.append({"name": name, "value": value})


def _apply_order(doc: Mapping[str, Any]) -> tuple[int, str, str]:
    kind = str(doc["kind"])
    rank = ORDER.index(kind) if kind in ORDER else len(ORDER)
    meta = doc["metadata"]
    return rank, str(meta.get("namespace") or ""), str(meta["name"])


# --- the command ---------------------------------------------------------------------------


def add_install_parser(sub: Any) -> None:
    p = sub.add_parser(
        "install", help="install orksync in a cluster (or print its manifests: --export)",
        description="The CRDs, ServiceAccount, RBAC, agent Deployment, Service, NetworkPolicy "
        "and rotate CronJob of deploy/ (by default with the impersonation RBAC: the agent "
        "writes each custom resource's children as a ServiceAccount of its namespace), "
        "applied server-side (field manager orksync-install) or printed as YAML.")
    p.add_argument("--export", action="store_true",
                   help="print the manifests instead of applying them")
    p.add_argument("--namespace", default=DEFAULT_NAMESPACE,
                   help=f"the agent's namespace (default {DEFAULT_NAMESPACE})")
    p.add_argument("--image", default="",
                   help="the agent's image, REPOSITORY:TAG or REPOSITORY@sha256:DIGEST "
                        "(default: deploy/'s, tagged with this version)")
    p.add_argument("--watch-namespace", default="",
                   help="the agent serves the Sync objects of this namespace only "
                        "(ORKSYNC_WATCH_NAMESPACE; default every namespace)")
    p.add_argument("--rbac", choices=("impersonation", "direct"), default="impersonation",
                   help="impersonation (default): the agent writes the children as each "
                        "namespace's ServiceAccount orksync-tenant (deploy/overlays/"
                        "impersonation); direct: the agent writes them itself (deploy/)")
    p.add_argument("--repo-url", default="", help="the one repository the agent syncs "
                   "(ORKSYNC_REPO_URL); default: none, the agent serves the Sync objects")
    p.add_argument("--ref", default="", help="its branch, tag or commit (ORKSYNC_REF)")
    p.add_argument("--path", default="", help="the directory in it (ORKSYNC_PATH)")
    add_cluster_flags(p)


def install_options(args: argparse.Namespace) -> InstallOptions:
    from orksync.names import label_problem

    for flag, value in (("--namespace", args.namespace),
                        ("--watch-namespace", args.watch_namespace)):
        problem = label_problem(value) if value else None
        if problem:
            raise UsageError(f"{flag} {value}: {problem}")
    if args.image:
        split_image(args.image)
    return InstallOptions(namespace=args.namespace, image=args.image,
                          watch_namespace=args.watch_namespace,
                          impersonation=args.rbac == "impersonation", repo_url=args.repo_url,
                          ref=args.ref, path=args.path)


def export(docs: list[dict[str, Any]]) -> str:
    from orksync import __version__

    head = f"# orksync install --export (orksync {__version__}): deploy/, substituted\n"
    return head + "".join("---\n" + yaml.safe_dump(doc, sort_keys=False) for doc in docs)


def cmd_install(args: argparse.Namespace, kube_of: Callable[[argparse.Namespace], Kube]
                ) -> int:
    docs = build(install_options(args))
    if args.export:
        sys.stdout.write(export(docs))
        return 0
    kube = kube_of(args)
    failed = 0
    try:
        for doc in docs:
            meta = doc["metadata"]
            ref = f"{doc['kind']}/{meta.get('namespace') + '/' if meta.get('namespace') else ''}" \
                  f"{meta['name']}"
            try:
                resource = kube.resource(doc["apiVersion"], doc["kind"])
                created, _ = kube.apply(resource, doc, field_manager=FIELD_MANAGER, force=True,
                                        dry_run=args.dry_run)
            except OrksyncError as err:
                failed += 1
                log.error("failed %s: %s", ref, err)
                continue
            dry = " (dry run)" if args.dry_run else ""
            log.info("%s %s%s", "created" if created else "configured", ref, dry)
    finally:
        kube.close()
    log.info("install: %d objects applied, %d failed", len(docs) - failed, failed)
    return 1 if failed else 0
