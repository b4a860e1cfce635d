"""The rendered directory: one object per file under stable names, plus `index.yaml`.

The directory is the reviewable contract between `orksync render` and `orksync apply`:
`index.yaml` lists every object in apply order with its write policy, stage, owner, origin
and the sha256 of its file. Writing goes to a temporary sibling directory that is renamed
into place, so a reader never sees half a render. Same RenderedSet, same bytes.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orksync.errors import InputError, LoadError
from orksync.model import ObjRef, Origin, RenderedObject, RenderedSet, WritePolicy
from orksync.yamlio import dump_yaml, load_documents

INDEX = "index.yaml"
INDEX_KIND = "RenderedIndex"
INDEX_API = "orksync.io/v1"


def object_path(obj: RenderedObject) -> str:
    """The file of one object, relative to the output directory.

    Every piece of the path comes from the object's identity, which the loader and the
    renderer validate; this is the last line of defence: a piece that could leave its
    directory (`..`, `/`, NUL, a leading dot) is refused, never written."""
    ref = obj.ref
    kind = _segment(f"{ref.kind}.{ref.group}" if ref.group else ref.kind, ref)
    name = _segment(ref.name, ref)
    leaf = f"{kind}.{_segment(ref.namespace, ref)}.{name}.yaml" if ref.namespace else \
        f"{kind}.{name}.yaml"
    if obj.owner is None:
        if ref.kind == "CustomResourceDefinition":
            return f"crds/{name}.yaml"
        return f"resources/{leaf}"
    owner = obj.owner
    okind = _segment(f"{owner.kind}.{owner.group}" if owner.group else owner.kind, owner)
    scope = _segment(owner.namespace, owner) if owner.namespace else "_cluster"
    return f"children/{okind}/{scope}/{_segment(owner.name, owner)}/{leaf}"


_SAFE_SEGMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _segment(text: str, ref: ObjRef) -> str:
    if len(text) > 255 or not _SAFE_SEGMENT.fullmatch(text) or ".." in text:
        raise InputError(f"cannot be written to the rendered directory: {text[:80]!r} is not "
                         "a safe file name (letters, digits, '.', '_', '-')",
                         obj=str(ref))
    return text


def _ref_dict(ref: ObjRef) -> dict[str, str]:
    out = {"apiVersion": ref.api_version, "kind": ref.kind}
    if ref.namespace:
        out["namespace"] = ref.namespace
    out["name"] = ref.name
    return out


def _ref_from(raw: dict[str, Any]) -> ObjRef:
    return ObjRef(api_version=str(raw["apiVersion"]), kind=str(raw["kind"]),
                  namespace=str(raw.get("namespace", "")), name=str(raw["name"]))


def write_rendered(rendered: RenderedSet, out_dir: Path, *, revision: str = "") -> Path:
    """Write every object and the index; replace `out_dir` atomically."""
    out_dir = out_dir.resolve()
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))
    try:
        entries = []
        for obj in rendered.objects:
            rel = object_path(obj)
            data = dump_yaml(obj.body).encode("utf-8")
            target = tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            entry: dict[str, Any] = {"file": rel, "object": _ref_dict(obj.ref),
                                     "policy": obj.policy.value, "stage": obj.stage}
            if obj.owner is not None:
                entry["owner"] = _ref_dict(obj.owner)
            if obj.directives:
                entry["directives"] = dict(obj.directives)
            entry["origin"] = {k: v for k, v in (
                ("file", obj.origin.file), ("katalog", obj.origin.katalog),
                ("crd", obj.origin.crd), ("entry", obj.origin.entry)) if v}
            entry["sha256"] = hashlib.sha256(data).hexdigest()
            entries.append(entry)
        index: dict[str, Any] = {"apiVersion": INDEX_API, "kind": INDEX_KIND}
        if revision:
            index["revision"] = revision
        index["objects"] = entries
        (tmp / INDEX).write_bytes(dump_yaml(index).encode("utf-8"))
        _swap_into_place(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir


def _index_errors(read: Callable[[Path], RenderedSet]) -> Callable[[Path], RenderedSet]:
    """A malformed index.yaml entry (a key missing, a value of the wrong type) is a
    LoadError naming the index, never a KeyError or TypeError from deep inside."""
    @functools.wraps(read)
    def checked(out_dir: Path) -> RenderedSet:
        try:
            return read(out_dir)
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise LoadError("an entry of objects is not valid (a field is missing or of the "
                            "wrong type); render again", file=str(out_dir / INDEX)) from err
    return checked


def _swap_into_place(tmp: Path, out_dir: Path) -> None:
    if out_dir.exists() and not (out_dir / INDEX).exists() and any(out_dir.iterdir()):
        raise LoadError("exists and is not an orksync output directory (no index.yaml); "
                        "refusing to replace it", file=str(out_dir))
    old = None
    if out_dir.exists():
        old = out_dir.with_name(f".{out_dir.name}.old-{os.getpid()}")
        out_dir.rename(old)
    tmp.rename(out_dir)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


@_index_errors
def read_rendered(out_dir: Path) -> RenderedSet:
    """Read a rendered directory back, verifying every file against the index."""
    index_path = out_dir / INDEX
    docs = load_documents(index_path, display=str(index_path))
    if not docs or not isinstance(docs[0].content, dict) or \
            docs[0].content.get("kind") != INDEX_KIND:
        raise LoadError(f"not an orksync {INDEX_KIND}", file=str(index_path))
    objects = []
    for i, entry in enumerate(docs[0].content.get("objects") or []):
        rel = str(entry.get("file", ""))
        path = (out_dir / rel).resolve()
        if not rel or not path.is_relative_to(out_dir.resolve()):
            raise LoadError(f"objects[{i}].file {rel!r} is outside the directory",
                            file=str(index_path))
        try:
            data = path.read_bytes()
        except OSError as err:
            raise LoadError(f"cannot read ({err.strerror})", file=str(path)) from err
        if hashlib.sha256(data).hexdigest() != entry.get("sha256"):
            raise LoadError("changed since it was rendered (sha256 differs from index.yaml); "
                            "render again", file=str(path))
        body = load_documents(path, display=str(path))[0].content
        origin = entry.get("origin") or {}
        objects.append(RenderedObject(
            ref=_ref_from(entry["object"]), body=body, policy=WritePolicy(entry["policy"]),
            origin=Origin(file=origin.get("file", ""), katalog=origin.get("katalog", ""),
                          crd=origin.get("crd", ""), entry=origin.get("entry", ""),
                          cr=str(_ref_from(entry["owner"])) if entry.get("owner") else ""),
            stage=int(entry["stage"]),
            owner=_ref_from(entry["owner"]) if entry.get("owner") else None,
            directives=dict(entry.get("directives") or {})))
    return RenderedSet(objects=tuple(objects))
