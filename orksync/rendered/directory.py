"""The rendered directory: one object per file under stable names, plus `index.yaml`.

The directory is the reviewable contract between `orksync render` and `orksync apply`:
`index.yaml` lists every object in apply order with its write policy, stage, owner, origin
and the sha256 of its file, and what the prune needs besides: the render's errors (an
apply of a render that had errors prunes nothing), the objects the guard refused
(`skipped`), and those whose condition is false (`absent`: cleaned up; `retained`: kept).
Writing goes to a temporary sibling directory that is renamed into place, so a reader never
sees half a render. Same RenderedSet, same bytes.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Concatenate, ParamSpec

from orksync.errors import InputError, LoadError, RenderError, UsageError
from orksync.model import (
    ObjRef,
    Origin,
    RenderedObject,
    RenderedSet,
    Source,
    WritePolicy,
    is_plain,
)
from orksync.runtime.gcpause import gc_paused
from orksync.yamls.io import dump_scalar, dump_yaml, load_document, read_file

INDEX = "index.yaml"
# about 500 bytes per object: 4 MiB (the bound for other YAML files) is 9,000 objects
INDEX_MAX_BYTES = 1024 * 1024 * 1024
INDEX_KIND = "RenderedIndex"
INDEX_API = "orksync.io/v1"


def object_path(obj: RenderedObject) -> str:
    """The file of one object, relative to the output directory.

    Every piece of the path comes from the object's identity, which the loader and the
    renderer validate; this is the last line of defence: a piece that could leave its
    directory (`..`, `/`, NUL, a leading dot) is refused, never written."""
    if is_plain(obj):
        return f"manifests/{_leaf(obj.ref)}"
    if obj.owner is None:
        return _own_path(obj.ref)
    return f"{_owner_dir(obj.owner)}/{_leaf(obj.ref)}"


def _own_path(ref: ObjRef) -> str:
    """The file of an object that has no owner (a CRD, a custom resource)."""
    if ref.kind == "CustomResourceDefinition":
        return f"crds/{_segment(ref.name, ref)}.yaml"
    return f"resources/{_leaf(ref)}"


def _kind_part(ref: ObjRef) -> str:
    """The kind of a file or directory name: `Deployment`, `Website.demo.io`."""
    return _segment(f"{ref.kind}.{ref.group}" if ref.group else ref.kind, ref)


def _leaf(ref: ObjRef) -> str:
    kind = _kind_part(ref)
    name = _segment(ref.name, ref)
    return f"{kind}.{_segment(ref.namespace, ref)}.{name}.yaml" if ref.namespace else \
        f"{kind}.{name}.yaml"


def owned_files(cr: ObjRef) -> tuple[str, str]:
    """A custom resource's own file and the directory of its children's files."""
    return _own_path(cr), _owner_dir(cr)


def _owner_dir(owner: ObjRef) -> str:
    """The directory of an owner's children."""
    okind = _kind_part(owner)
    scope = _segment(owner.namespace, owner) if owner.namespace else "_cluster"
    return f"children/{okind}/{scope}/{_segment(owner.name, owner)}"


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


@gc_paused
def write_rendered(rendered: RenderedSet, out_dir: Path, *, revision: str = "",
                   source: Source | None = None) -> Path:
    """Write every object and the index (`source`: what was rendered, recorded for the
    inventory of `orksync apply`); replace `out_dir` atomically."""
    out_dir, tmp = start_rendered(out_dir)
    try:
        entries = ObjectWriter(tmp).write(rendered.objects)
        finish_rendered(tmp, out_dir, rendered, entries, revision, source)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir


def check_output(out_dir: Path) -> None:
    """Raise UsageError when `out_dir` cannot be an output directory: it, or a path above
    it, is something other than a directory (a file). Checked before the render, so a
    wrong `-o` costs no render; the write checks again."""
    for path in (out_dir, *out_dir.parents):
        if path.exists() and not path.is_dir():
            what = "it is" if path == out_dir else f"{path} is"
            raise UsageError(f"-o {out_dir}: {what} a file, not a directory: name a "
                             "directory (it is created when missing, and replaced only "
                             "when it holds an earlier render)")
        if path.is_dir():
            return


def start_rendered(out_dir: Path) -> tuple[Path, Path]:
    """(the resolved `out_dir`, a new temporary sibling to write into)."""
    check_output(out_dir)
    out_dir = out_dir.resolve()
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    return out_dir, Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))


def finish_rendered(tmp: Path, out_dir: Path, rendered: RenderedSet, entries: list[bytes],
                    revision: str, source: Source | None = None) -> None:
    """Write the index (`entries` in the order of the objects, `rendered`'s prune facts)
    and rename `tmp` into place."""
    _write_file(f"{tmp}/{INDEX}", b"".join(_index(rendered, entries, revision, source)))
    _swap_into_place(tmp, out_dir)


class ObjectWriter:
    """Writes objects' files under a directory and makes their index entries. What is the
    same for many objects (an owner's directory and index lines, the policy and stage
    lines) is made once per writer."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.made: set[str] = set()
        self.owners: dict[ObjRef, tuple[str, str]] = {}  # owner -> (directory, index lines)
        self.lines: dict[tuple[str, str, object], str] = {}
        self.origins: dict[tuple[str, str, str, bool], str] = {}
        # (apiVersion, kind, namespace, policy, stage) -> the lines of an index entry
        # before and after its object's name
        self.heads: dict[tuple[str, str, str, WritePolicy, int], tuple[str, str]] = {}
        self.kinds: dict[tuple[str, str], str] = {}  # (apiVersion, kind) -> file name part
        self.spaces: set[str] = set()  # namespaces found safe as a file name part

    def write(self, objects: Iterable[RenderedObject]) -> list[bytes]:
        """The index entries of `objects`, in their order."""
        return [self.write_one(obj) for obj in objects]

    def write_one(self, obj: RenderedObject) -> bytes:
        """Write its file; its index entry in UTF-8."""
        owner = None
        if obj.owner is None:
            rel = object_path(obj)
        else:
            owner = self.owners.get(obj.owner)
            if owner is None:
                owner = self.owners[obj.owner] = (_owner_dir(obj.owner),
                                                  "  owner:\n" + _ref_lines(obj.owner))
            rel = f"{owner[0]}/{self.leaf(obj.ref)}"
        data = dump_yaml(obj.body).encode("utf-8")
        parent = rel.rpartition("/")[0]
        if parent not in self.made:
            self.mkdirs(parent)
        _write_file(f"{self.root}/{rel}", data)
        return self.entry(obj, rel, hashlib.sha256(data).hexdigest(), owner[1] if owner else "")

    def mkdirs(self, rel: str) -> None:
        """`rel` and its parents under the root, one system call per directory not made
        yet (by this writer: another process may have made it)."""
        head = rel.rpartition("/")[0]
        if head and head not in self.made:
            self.mkdirs(head)
        with contextlib.suppress(FileExistsError):
            os.mkdir(f"{self.root}/{rel}")
        self.made.add(rel)

    def leaf(self, ref: ObjRef) -> str:
        """`_leaf(ref)`: the kind's and the namespace's parts checked once per writer, the
        name's every time."""
        kind = self.kinds.get((ref.api_version, ref.kind))
        if kind is None:
            kind = _kind_part(ref)
            self.kinds[(ref.api_version, ref.kind)] = kind
        name = _segment(ref.name, ref)
        namespace = ref.namespace
        if not namespace:
            return f"{kind}.{name}.yaml"
        if namespace not in self.spaces:
            self.spaces.add(_segment(namespace, ref))
        return f"{kind}.{namespace}.{name}.yaml"

    def entry(self, obj: RenderedObject, rel: str, sha256: str, owner: str) -> bytes:
        """One item of index.yaml's `objects`, as `dump_yaml` writes it there: file,
        object, policy, stage, owner, directives, origin, sha256. Written directly rather
        than built as a mapping and emitted (the index has an entry per object), and
        encoded here: the index is written from its entries' bytes joined, and
        in the parallel render (orksync.render.parallel) each process encodes its own."""
        ref = obj.ref
        key = (ref.api_version, ref.kind, ref.namespace, obj.policy, obj.stage)
        head = self.heads.get(key)
        if head is None:
            namespace = f"    namespace: {dump_scalar(ref.namespace)}\n" if ref.namespace else ""
            head = self.heads[key] = (
                f"    apiVersion: {dump_scalar(ref.api_version)}\n    kind: "
                f"{dump_scalar(ref.kind)}\n{namespace}",
                _field_line("  ", "policy", obj.policy.value) +
                _field_line("  ", "stage", obj.stage))
        directives = dump_yaml({"directives": dict(obj.directives)}, indent="  ") \
            if obj.directives else ""
        origin = obj.origin
        entry = origin.entry
        # a hex digest is written plain when it starts with a letter, quoted when with a
        # digit (dump_scalar's rule for such text), without a trip through its cache
        digest = sha256 if sha256[0] > "9" else f'"{sha256}"'
        return (f"- file: {dump_scalar(rel)}\n  object:\n{head[0]}    name: "
                f"{dump_scalar(ref.name)}\n{head[1]}{owner}{directives}"
                f"{self.origin_head(origin.file, origin.katalog, origin.crd, bool(entry))}"
                f"{self.line('entry', entry, '    ') if entry else ''}  sha256: {digest}\n"
                ).encode()

    def origin_head(self, file: str, katalog: str, crd: str, entry: bool) -> str:
        """An entry's `origin:` up to its own `entry` line (the same for every child of a
        custom resource)."""
        key = (file, katalog, crd, entry)
        out = self.origins.get(key)
        if out is None:
            out = "".join(["  origin:\n" if file or katalog or crd or entry else
                           "  origin: {}\n",
                           *(_field_line("    ", k, v) for k, v in
                             (("file", file), ("katalog", katalog), ("crd", crd)) if v)])
            self.origins[key] = out
        return out

    def line(self, key: str, value: object, pad: str) -> str:
        """`{pad}{key}: {value}` as `dump_yaml` writes it (the same few values repeat)."""
        out = self.lines.get((pad, key, value))
        if out is None:
            out = self.lines[(pad, key, value)] = _field_line(pad, key, value)
        return out


def _field_line(pad: str, key: str, value: object) -> str:
    """`{pad}{key}: {value}` as `dump_yaml` writes it (keys here are plain words)."""
    return f"{pad}{key}: {dump_scalar(value)}\n"


def _index(rendered: RenderedSet, entries: list[bytes], revision: str,
           source: Source | None = None) -> list[bytes]:
    """index.yaml, in parts: what `dump_yaml` writes for {apiVersion, kind, revision,
    source, objects, and the prune facts}, with the entries of `objects` already written by
    `ObjectWriter.entry` (a top-level mapping is written key after key, so the pieces
    join into the same text)."""
    head: dict[str, Any] = {"apiVersion": INDEX_API, "kind": INDEX_KIND}
    if revision:
        head["revision"] = revision
    if source is not None:
        head["source"] = {"location": source.location, **(
            {"path": source.path} if source.path else {})}
    facts = _prune_facts(rendered)
    tail = dump_yaml(facts).encode("utf-8") if facts else b""
    if not entries:
        return [f"{dump_yaml(head)}objects: []\n".encode(), tail]
    return [f"{dump_yaml(head)}objects:\n".encode(), *entries, tail]


def _ref_lines(ref: ObjRef) -> str:
    """`_ref_dict(ref)` as `dump_yaml` writes it as the value of an entry's key."""
    namespace = f"    namespace: {dump_scalar(ref.namespace)}\n" if ref.namespace else ""
    return (f"    apiVersion: {dump_scalar(ref.api_version)}\n    kind: "
            f"{dump_scalar(ref.kind)}\n{namespace}    name: {dump_scalar(ref.name)}\n")


def _prune_facts(rendered: RenderedSet) -> dict[str, Any]:
    """The parts of a RenderedSet besides its objects that decide what may be pruned."""
    facts: dict[str, Any] = {}
    if rendered.errors:
        facts["errors"] = [_error_dict(err) for err in rendered.errors]
    if rendered.skipped:
        facts["skipped"] = [{"object": _ref_dict(ref), "reason": reason}
                            for ref, reason in rendered.skipped]
    for key in ("absent", "retained"):
        pairs = getattr(rendered, key)
        if pairs:
            facts[key] = [{"object": _ref_dict(ref), "owner": _ref_dict(owner)}
                          for ref, owner in pairs]
    return facts


def _error_dict(err: Exception) -> dict[str, Any]:
    if isinstance(err, InputError):
        out: dict[str, Any] = {k: v for k, v in (("file", err.file), ("object", err.obj),
                                                 ("path", err.path)) if v}
        if err.line:
            out["line"] = err.line
        out["message"] = err.detail
        return out
    return {"message": str(err)}


def _error_from(raw: dict[str, Any]) -> RenderError:
    line = raw.get("line")
    return RenderError(str(raw.get("message", "")), file=str(raw.get("file", "")),
                       line=line if isinstance(line, int) else None,
                       path=str(raw.get("path", "")), obj=str(raw.get("object", "")))


_CREATE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC


def _write_file(path: str, data: bytes) -> None:
    """Three system calls (Python's `open` adds an fstat, an ioctl and an lseek to each of
    the thousands of files; bench/results/ab.jsonl, plain-file-write)."""
    fd = os.open(path, _CREATE, 0o666)
    try:
        _write_all(fd, data)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """What index.yaml says of one object before its file is read: enough to plan the
    apply's LISTs (orksync.apply.engine.Applier.prefetch) while the files are read."""

    ref: ObjRef
    stage: int
    owner: ObjRef | None


OnIndex = Callable[[Sequence[IndexEntry]], None]
P = ParamSpec("P")


def _index_errors(read: Callable[Concatenate[Path, P], RenderedSet]
                  ) -> Callable[Concatenate[Path, P], RenderedSet]:
    """A malformed index.yaml entry (a key missing, a value of the wrong type) is a
    LoadError naming the index, never a KeyError or TypeError from deep inside."""
    @functools.wraps(read)
    def checked(out_dir: Path, /, *args: P.args, **kwargs: P.kwargs) -> RenderedSet:
        try:
            return read(out_dir, *args, **kwargs)
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
@gc_paused
def read_rendered(out_dir: Path, on_index: OnIndex | None = None, *,
                  head: dict[str, Any] | None = None) -> RenderedSet:
    """Read a rendered directory back, verifying every file against the index. `head`,
    when given, receives the index's `revision` and `source` (a Source) where it
    records them.

    Files are read with `load_document`, whose exact reader takes the files as orksync
    wrote them; a file whose sha256 differs from the index is refused before parsing.
    `on_index` is called with what the index says of the objects, before their files
    are read (`orksync apply` sends the apply's LISTs then)."""
    index_path = out_dir / INDEX
    index = load_document(_read(index_path), path=index_path, display=str(index_path),
                          max_bytes=INDEX_MAX_BYTES)
    if not isinstance(index, dict) or index.get("kind") != INDEX_KIND:
        raise LoadError(f"not an orksync {INDEX_KIND}", file=str(index_path))
    if head is not None:
        head.update(_index_head(index, index_path))
    root = out_dir.resolve()
    entries = index.get("objects") or []
    planned = [IndexEntry(ref=_ref_from(entry["object"]), stage=int(entry["stage"]),
                          owner=_ref_from(entry["owner"]) if entry.get("owner") else None)
               for entry in entries]
    if on_index is not None:
        on_index(planned)
    objects = []
    for i, (entry, plan) in enumerate(zip(entries, planned, strict=True)):
        rel = str(entry.get("file", ""))
        # checked on the text, not by resolving every file (a few system calls each); the
        # bytes are checked against the index below whatever the path leads to
        if not rel or rel.startswith("/") or ".." in rel.split("/"):
            raise LoadError(f"objects[{i}].file {rel!r} is outside the directory",
                            file=str(index_path))
        path = f"{root}/{rel}"
        data = _read(path)
        if hashlib.sha256(data).hexdigest() != entry.get("sha256"):
            raise LoadError("changed since it was rendered (sha256 differs from index.yaml); "
                            "render again", file=path)
        body = load_document(data, path=path, display=path)
        origin = entry.get("origin") or {}
        owner = plan.owner
        objects.append(RenderedObject(
            ref=plan.ref, body=body, policy=WritePolicy(entry["policy"]),
            origin=Origin(file=origin.get("file", ""), katalog=origin.get("katalog", ""),
                          crd=origin.get("crd", ""), entry=origin.get("entry", ""),
                          cr=str(owner) if owner else ""),
            stage=plan.stage, owner=owner,
            directives=dict(entry.get("directives") or {})))
    return RenderedSet(
        objects=tuple(objects),
        errors=tuple(_error_from(e) for e in index.get("errors") or []),
        skipped=tuple((_ref_from(e["object"]), str(e["reason"]))
                      for e in index.get("skipped") or []),
        absent=tuple((_ref_from(e["object"]), _ref_from(e["owner"]))
                     for e in index.get("absent") or []),
        retained=tuple((_ref_from(e["object"]), _ref_from(e["owner"]))
                       for e in index.get("retained") or []))


def _index_head(index: dict[str, Any], index_path: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if index.get("revision"):
        out["revision"] = str(index["revision"])
    raw = index.get("source")
    if raw is not None:
        if not isinstance(raw, dict) or not raw.get("location"):
            raise LoadError("source: expected a mapping with a location", file=str(index_path))
        out["source"] = Source.of(str(raw["location"]), str(raw.get("path") or ""))
    return out


def _read(path: Path | str) -> bytes:
    try:
        return read_file(path)
    except OSError as err:
        raise LoadError(f"cannot read ({err.strerror})", file=str(path)) from err
