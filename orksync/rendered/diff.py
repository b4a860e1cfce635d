"""The rendered change between two renders, per object: `orksync render REPO
--diff-against REV`, the review of a pull request's effect on the manifests. Pure.

Objects are matched by identity (`ObjRef`): one only the new render holds is `created`,
one only the old render holds `deleted`, one whose text differs `changed`. The text of an
object is its YAML body followed by what the rendered directory records beside it
(`index.yaml`): its write policy and its directives, as `# orksync ...` lines, so a change
of `onCreate` to `onReconcile` or of a certificate's `dnsNames` is a difference too.

Secrets (orksync.secrets.mask): `data` and `stringData` values are masked as `***` on
both sides, the directives' generator placeholders too; a changed value is one line
`# data.<key> changed`, never the value nor a hash of it. Every value of every Secret of
either render (plain, base64, decoded, placeholders) is then scrubbed from all text,
errors included: the same value often sits in a custom resource's spec.

A render with errors would prune nothing, so a comparison against one shows no deletion:
objects only the old render holds are counted as `withheld` and named in one line, never
as `deleted` (a custom resource that fails to render is not a custom resource that left).

`ObjectDiff` is also the unit of `orksync diff -o json` (orksync.apply.diff):
`json_document` and `markdown` format either.
"""

from __future__ import annotations

import copy
import difflib
import html
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from orksync.model import ObjRef, RenderedObject, RenderedSet
from orksync.secrets.mask import MASK, mask_secret, scrub, secret_values
from orksync.yamls.io import dump_yaml

__all__ = ["CHANGE_ACTIONS", "ObjectDiff", "RenderedDiff", "compare_rendered",
           "json_document", "markdown", "unified_diff"]

CREATED, CHANGED, DELETED = "created", "changed", "deleted"
CHANGE_ACTIONS = (CREATED, CHANGED, DELETED)
PLACEHOLDER = "<generate:"  # orksync.secrets.random's placeholder of a generated value


@dataclass(frozen=True, slots=True)
class ObjectDiff:
    """One object's change: `action` is created, changed or deleted; `text` a unified
    diff with Secret values masked."""

    ref: ObjRef
    action: str
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"object": str(self.ref), "apiVersion": self.ref.api_version,
                "kind": self.ref.kind, "namespace": self.ref.namespace,
                "name": self.ref.name, "action": self.action, "diff": self.text}


@dataclass(slots=True)
class RenderedDiff:
    changes: list[ObjectDiff] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    withheld: list[ObjRef] = field(default_factory=list)  # deletions not shown: errors

    @property
    def exit_code(self) -> int:
        """0 no difference, 1 differences, 2 errors (in either render)."""
        if self.errors:
            return 2
        return 1 if self.changes else 0

    def text(self) -> str:
        return "".join(c.text for c in self.changes) + "".join(
            f"# {note}\n" for note in self.notes())

    def notes(self) -> list[str]:
        """What the diffs do not show: the objects not compared."""
        if not self.withheld:
            return []
        return [f"not compared (a render had errors, so nothing counts as deleted): "
                f"{', '.join(str(r) for r in self.withheld)}"]

    def counts(self) -> dict[str, int]:
        return {a: sum(1 for c in self.changes if c.action == a) for a in CHANGE_ACTIONS}


def unified_diff(ref: ObjRef, before: str, after: str, notes: Iterable[str] = (), *,
                 old: str = "a", new: str = "b") -> str:
    """The unified diff of two texts of `ref`, its `notes` as `# ` lines after the header;
    "" when neither the texts differ nor a note says something changed."""
    notes = list(notes)
    lines = list(difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True),
        fromfile=f"{old}/{ref}" if before else "/dev/null",
        tofile=f"{new}/{ref}" if after else "/dev/null"))
    if not lines:
        if not notes:
            return ""
        lines = [f"--- {old}/{ref}\n", f"+++ {new}/{ref}\n"]
    text = "".join(lines[:2]) + "".join(f"# {n}\n" for n in notes) + "".join(lines[2:])
    return text if text.endswith("\n") else text + "\n"


def _is_secret(ref: ObjRef) -> bool:
    return ref.kind == "Secret" and ref.api_version == "v1"


def _secret_text_values(body: Mapping[str, Any]) -> dict[str, str]:
    """A Secret's values by key, `data` decoded, `stringData` over it (as the API server
    merges them). Compared only, never printed."""
    out: dict[str, str] = {}
    data = body.get("data")
    if isinstance(data, Mapping):
        import base64

        for key, value in data.items():
            try:
                out[str(key)] = base64.b64decode(str(value)).decode("utf-8", "replace")
            except ValueError:
                out[str(key)] = str(value)
    string_data = body.get("stringData")
    if isinstance(string_data, Mapping):
        out.update({str(k): str(v) for k, v in string_data.items()})
    return out


def _masked_directives(directives: Mapping[str, Any]) -> dict[str, Any]:
    """The directives with every generated value's placeholder masked (the generator's
    spec is as secret as the value's shape: it is not shown)."""
    out = copy.deepcopy(dict(directives))
    generated = out.get("generated")
    if isinstance(generated, Mapping):
        out["generated"] = {k: MASK for k in generated}
    return out


def _object_text(obj: RenderedObject) -> str:
    body: Mapping[str, Any] = obj.body
    if _is_secret(obj.ref):
        body = mask_secret(body)
    text = dump_yaml(dict(body))
    extra = [f"policy: {obj.policy.value}"]
    if obj.directives:
        extra.extend(dump_yaml({"directives": _masked_directives(obj.directives)})
                     .splitlines())
    return text + "".join(f"# orksync {line}\n" for line in extra)


def _same(was: RenderedObject, now: RenderedObject) -> bool:
    """The same rendered object: body, write policy and directives equal."""
    return (was.policy == now.policy and was.body == now.body
            and was.directives == now.directives)


def compare_rendered(old: RenderedSet, new: RenderedSet, *, old_label: str = "a",
                     new_label: str = "b", old_name: str = "old render",
                     new_name: str = "new render") -> RenderedDiff:
    """The per-object change from `old` to `new` (see the module doc); `old_label` and
    `new_label` prefix the object in the diff headers (`a/Deployment/ns/web`), `old_name`
    and `new_name` each render's errors."""
    before = {o.ref: o for o in old.objects}
    after = {o.ref: o for o in new.objects}
    values = [v for rendered in (old, new) for o in rendered.objects if _is_secret(o.ref)
              for v in secret_values(o.body)]
    values.extend(str(v) for rendered in (old, new) for o in rendered.objects
                  for v in (o.directives.get("generated") or {}).values())
    result = RenderedDiff(errors=[f"{old_name}: {e}" for e in old.errors]
                          + [f"{new_name}: {e}" for e in new.errors])
    for ref in sorted(before.keys() | after.keys(), key=str):
        was, now = before.get(ref), after.get(ref)
        if now is None and result.errors:
            result.withheld.append(ref)
            continue
        if was is not None and now is not None and _same(was, now):
            continue  # most objects of a change: decided without formatting them
        notes: list[str] = []
        if was is not None and now is not None and _is_secret(ref):
            old_values, new_values = _secret_text_values(was.body), \
                _secret_text_values(now.body)
            notes = [f"data.{key} changed" + (
                        " (its generator)" if PLACEHOLDER in old_values[key] + new_values[key]
                        else "")
                     for key in sorted(old_values.keys() & new_values.keys())
                     if old_values[key] != new_values[key]]
        text = unified_diff(ref, _object_text(was) if was is not None else "",
                            _object_text(now) if now is not None else "", notes,
                            old=old_label, new=new_label)
        if text:
            action = CREATED if was is None else DELETED if now is None else CHANGED
            result.changes.append(ObjectDiff(ref, action, text))
    result.changes = [ObjectDiff(c.ref, c.action, scrub(c.text, values))
                      for c in result.changes]
    result.errors = [scrub(e, values) for e in result.errors]
    return result


def json_document(changes: Sequence[ObjectDiff], errors: Sequence[str] = (),
                  **extra: Any) -> dict[str, Any]:
    """`{"changes": [...], "summary": {created, changed, deleted}, "errors": [...]}` and
    `extra`, for `-o json` / `--format json`."""
    return {"changes": [c.to_dict() for c in changes],
            "summary": {a: sum(1 for c in changes if c.action == a) for a in CHANGE_ACTIONS},
            "errors": list(errors), **extra}


def _fence(text: str) -> str:
    """A code fence longer than any run of backticks in `text`, so the text cannot end it."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def markdown(changes: Sequence[ObjectDiff], errors: Sequence[str] = (), *, title: str,
             notes: Sequence[str] = ()) -> str:
    """A pull request comment: `title`, a summary table (created / changed / deleted),
    one collapsed `<details>` per object with its diff, then the errors."""
    counts = {a: sum(1 for c in changes if c.action == a) for a in CHANGE_ACTIONS}
    out = [f"### {title}", "",
           "| created | changed | deleted | errors |", "|---:|---:|---:|---:|",
           f"| {counts[CREATED]} | {counts[CHANGED]} | {counts[DELETED]} | {len(errors)} |",
           ""]
    if not changes and not errors:
        out += ["No rendered object changes.", ""]
    for change in changes:
        fence = _fence(change.text)
        out += ["<details>",
                f"<summary>{change.action} <code>{html.escape(str(change.ref))}</code>"
                "</summary>", "", f"{fence}diff", change.text.rstrip("\n"), fence, "",
                "</details>", ""]
    for note in notes:
        out += [html.escape(note), ""]
    if errors:
        text = "\n".join(errors)
        fence = _fence(text)
        out += ["**Errors**", "", fence, text, fence, ""]
    return "\n".join(out)
