"""Motif imports: reusable bundles of resources, status fields and admission rules a
Katalog imports with `imports: [{motif: <file>, with: {...}}]`, bound to their inputs
when rendering. Pure over the file system (docs/katalog-semantics.md#motifs)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orksync.errors import LoadError
from orksync.katalog.model import KATALOG_API_VERSIONS
from orksync.yamls.io import load_documents

__all__ = ["MOTIF_KEY", "Expansion", "Motif", "expand_entry", "expand_imports",
           "katalog_notes", "load_motif", "motif_inputs"]

MOTIF_KEY = "__motif__"
MOTIF_KEYS = frozenset({"apiVersion", "kind", "metadata", "inputs", "profiles", "notes",
                        "resources", "status", "admission"})
INPUT_KEYS = frozenset({"name", "description", "required", "default", "type"})
IMPORT_KEYS = frozenset({"motif", "with", "version", "oci", "auth"})
CONDITION_BLOCK_KEYS = ("when", "or", "anyOf")
OTHER_BLOCK_KEYS = frozenset({"ordered", "name", "groups", "timeout"})

Render = Callable[[str, Mapping[str, Any]], str]


@dataclass(frozen=True, slots=True)
class Motif:
    """A loaded Motif file: `file` is repository-relative; `inputs` keeps the declaration
    order: name → {"required": bool, "default": value} ("default" only when declared)."""

    file: str
    name: str
    inputs: dict[str, dict[str, Any]]
    body: dict[str, Any]


@dataclass(slots=True)
class Expansion:
    """A CRD entry with its imports merged (`raw`), or Katalog-level notes (`notes`)."""

    raw: dict[str, Any] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def motif_inputs(marker: Mapping[str, Any], data: Mapping[str, Any],
                 render: Render) -> dict[str, Any]:
    """The `.inputs` map of a motif entry: each `with:` value rendered against the custom
    resource's data when it is a template (a text holding `{{`); other values as they are.
    Template errors propagate (the caller reports them against the entry)."""
    out: dict[str, Any] = {}
    for name, value in (marker.get("inputs") or {}).items():
        out[str(name)] = render(value, data) if isinstance(value, str) and "{{" in value \
            else value
    return out


def _is_file_ref(ref: str) -> bool:
    return ref.startswith(("./", "../", "/")) or ref.endswith((".yaml", ".yml"))


def load_motif(ref: Any, katalog_path: Path, root: Path) -> tuple[Motif | None, list[str]]:
    """Load and check one Motif file named relative to the Katalog file."""
    if not isinstance(ref, str) or not ref.strip():
        return None, ["motif: needs a file path"]
    ref = ref.strip()
    if not _is_file_ref(ref):
        return None, [f"motif: {ref!r} is not a file path; OCI, Git and registry motif "
                      "references are not supported (vendor the motif into the repository "
                      "and import it as ./path/motif.yaml)"]
    root = root.resolve()
    target = (katalog_path.parent / ref).resolve()
    if not target.is_relative_to(root):
        return None, [f"motif: {ref!r} points outside the repository"]
    rel = str(target.relative_to(root))
    if not target.is_file():
        return None, [f"motif: file {rel} does not exist"]
    try:
        docs = load_documents(target, display=rel)
    except LoadError as err:
        return None, [f"motif: {err}"]
    if len(docs) != 1 or not isinstance(docs[0].content, dict):
        return None, [f"motif: {rel} must hold exactly one YAML map (the Motif)"]
    body = docs[0].content
    problems = []
    if body.get("apiVersion") not in KATALOG_API_VERSIONS or body.get("kind") != "Motif":
        problems.append(f"{rel}: not a Motif (apiVersion {body.get('apiVersion')!r}, kind "
                        f"{body.get('kind')!r}; expected kind Motif, apiVersion one of "
                        f"{', '.join(KATALOG_API_VERSIONS)})")
    meta = body.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if not isinstance(name, str) or not name:
        problems.append(f"{rel}: metadata.name is required")
    for key in body:
        if key == "imports":
            problems.append(f"{rel}: imports: a motif cannot import other motifs")
        elif key not in MOTIF_KEYS:
            problems.append(f"{rel}: unknown Motif key {key!r}")
    inputs: dict[str, dict[str, Any]] = {}
    raw_inputs = body.get("inputs") or []
    if not isinstance(raw_inputs, list):
        problems.append(f"{rel}: inputs must be a list of {{name, required, default}}")
        raw_inputs = []
    for i, item in enumerate(raw_inputs):
        where = f"{rel}: inputs[{i}]"
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str) \
                or not item["name"]:
            problems.append(f"{where}: needs a name")
            continue
        problems += [f"{where}: unknown input key {k!r}" for k in item if k not in INPUT_KEYS]
        if item["name"] in inputs:
            problems.append(f"{where}: input {item['name']!r} is declared twice")
        spec: dict[str, Any] = {"required": item.get("required") is True}
        if item.get("default") is not None:
            spec["default"] = item["default"]
        inputs[item["name"]] = spec
    if problems:
        return None, problems
    return Motif(file=rel, name=str(name), inputs=inputs, body=body), []


def _bind(motif: Motif, with_: Any, where: str) -> tuple[dict[str, Any], list[str]]:
    if with_ is None:
        with_ = {}
    if not isinstance(with_, Mapping):
        return {}, [f"{where}.with: must be a map of input name to value ({motif.file})"]
    declared = ", ".join(motif.inputs) or "none"
    problems = [f"{where}.with.{k}: motif {motif.file} declares no input {k!r} "
                f"(declared: {declared})" for k in with_ if k not in motif.inputs]
    bound: dict[str, Any] = {}
    for name, spec in motif.inputs.items():
        if name in with_:
            bound[name] = with_[name]
        elif "default" in spec:
            bound[name] = spec["default"]
        elif spec["required"]:
            problems.append(f"{where}.with.{name}: required input of motif {motif.file} "
                            "is not given and has no default")
        else:
            bound[name] = ""
    return bound, problems


def _imports(node: Mapping[str, Any], where: str) -> tuple[list[tuple[str, Any]], list[str]]:
    raw = node.get("imports")
    if raw is None:
        return [], []
    if not isinstance(raw, list):
        return [], [f"{where}: must be a list of {{motif, with}}"]
    out, problems = [], []
    for i, item in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(item, Mapping):
            problems.append(f"{at}: must be a map {{motif, with}}")
            continue
        problems += [f"{at}.{k}: unknown import key" for k in item if k not in IMPORT_KEYS]
        out.append((at, item))
    return out, problems


def _marked(entries: list[Any], marker: dict[str, Any], block: Mapping[str, Any],
            where: str, problems: list[str]) -> list[Any]:
    out = []
    when = block.get("when") or []
    or_ = block.get("or") if block.get("or") is not None else block.get("anyOf")
    for i, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            problems.append(f"{where}[{i}]: must be a map")
            continue
        item = copy.deepcopy(dict(entry))
        if when:
            item["when"] = [*copy.deepcopy(when), *(item.get("when") or [])]
        if or_:
            if item.get("or") or item.get("anyOf"):
                problems.append(f"{where}[{i}]: has its own or: and the motif block has "
                                "one too; orksync cannot combine them")
            else:
                item["or"] = copy.deepcopy(or_)
        item[MOTIF_KEY] = copy.deepcopy(marker)
        out.append(item)
    return out


def _merge_block(box: dict[str, Any], block_name: str, block: Any, marker: dict[str, Any],
                 where: str, problems: list[str]) -> None:
    if not isinstance(block, Mapping):
        problems.append(f"{where}: must be a map of resource lists")
        return
    target = box.setdefault(block_name, {})
    if not isinstance(target, dict):
        problems.append(f"operatorBox.{block_name}: must be a map to receive motif resources")
        return
    for key, entries in block.items():
        if key in CONDITION_BLOCK_KEYS:
            continue
        if key in OTHER_BLOCK_KEYS:
            problems.append(f"{where}.{key}: block controls are not supported in a motif")
            continue
        if not isinstance(entries, list):
            problems.append(f"{where}.{key}: must be a list of entries")
            continue
        merged = target.setdefault(key, [])
        if not isinstance(merged, list):
            problems.append(f"operatorBox.{block_name}.{key}: must be a list")
            continue
        merged.extend(_marked(entries, marker, block, f"{where}.{key}", problems))


def _merge_rules(raw: dict[str, Any], box: dict[str, Any], key: str, config: Any,
                 marker: dict[str, Any], where: str, problems: list[str]) -> None:
    if config is None:
        return
    if not isinstance(config, Mapping):
        problems.append(f"{where}: must be a map")
        return
    for k in config:
        if k in ("include", "external"):
            problems.append(f"{where}.{k}: not supported by orksync")
        elif k != "rules":
            problems.append(f"{where}.{k}: unknown key")
    rules = config.get("rules") or []
    if not isinstance(rules, list):
        problems.append(f"{where}.rules: must be a list")
        return
    holder = raw if key in raw or key not in box else box
    target = holder.setdefault(key, {})
    if not isinstance(target, dict) or not isinstance(target.setdefault("rules", []), list):
        problems.append(f"{key}.rules: must be a list to receive motif rules")
        return
    target["rules"].extend(_marked(rules, marker, {}, f"{where}.rules", problems))


def _merge_motif(raw: dict[str, Any], box: dict[str, Any], motif: Motif,
                 marker: dict[str, Any], at: str, out: Expansion) -> None:
    body, label = motif.body, f"{at}: motif {motif.file}"
    resources = body.get("resources")
    if resources is not None and not isinstance(resources, Mapping):
        out.problems.append(f"{label}: resources must be a map")
    elif resources:
        flat = {k: v for k, v in resources.items() if k not in ("onCreate", "onReconcile")}
        for block_name, block in (("onCreate", resources.get("onCreate")),
                                  ("onReconcile", resources.get("onReconcile")),
                                  ("onReconcile", flat)):
            if block:
                _merge_block(box, block_name, block, marker, f"{label}: resources",
                             out.problems)
    status = body.get("status")
    if isinstance(status, Mapping) and status:
        target = box.setdefault("status", {})
        fields = status.get("fields") or []
        if not isinstance(target, dict) or not isinstance(fields, list):
            out.problems.append(f"{label}: status.fields cannot be merged (not lists)")
        else:
            target.setdefault("fields", []).extend(
                _marked(fields, marker, {}, f"{label}: status.fields", out.problems))
            if target.get("conditions") is None and status.get("conditions") is not None:
                target["conditions"] = copy.deepcopy(status["conditions"])
    elif status is not None and not isinstance(status, Mapping):
        out.problems.append(f"{label}: status must be a map")
    admission = body.get("admission") or {}
    if not isinstance(admission, Mapping):
        out.problems.append(f"{label}: admission must be a map")
        admission = {}
    for key in admission:
        if key not in ("validation", "mutation"):
            out.problems.append(f"{label}: admission.{key}: unknown key")
    for key in ("validation", "mutation"):
        _merge_rules(raw, box, key, admission.get(key), marker,
                     f"{label}: admission.{key}", out.problems)
    for key in ("notes", "profiles"):
        if body.get(key):
            out.warnings.append(f"{label}: {key} are ignored in CRD-level imports, as in "
                                "Orkestra (import the motif under spec.imports)")


def expand_entry(entry_raw: Mapping[str, Any], katalog_path: Path, root: Path) -> Expansion:
    """A copy of a CRD entry (`spec.crds.<k>`) with its `imports` merged in: motif
    resources appended to operatorBox.onCreate/onReconcile, status fields to
    operatorBox.status.fields, admission rules to validation/mutation.rules — each marked
    with `__motif__`. The imports themselves are removed. Problems leave the rest merged."""
    raw = copy.deepcopy(dict(entry_raw))
    box_key = "operatorBox" if "operatorBox" in raw or "reconciler" not in raw else "reconciler"
    box = raw.get(box_key)
    if box is None:
        box = raw[box_key] = {}
    out = Expansion(raw=raw)
    if not isinstance(box, dict):
        out.problems.append(f"{box_key}: must be a map")
        return out
    found, problems = _imports(raw, "imports")
    more, more_problems = _imports(box, f"{box_key}.imports")
    out.problems += problems + more_problems
    raw.pop("imports", None)
    box.pop("imports", None)
    for at, item in [*found, *more]:
        motif, problems = load_motif(item.get("motif"), katalog_path, root)
        if motif is None:
            out.problems += [f"{at}.{p}" if p.startswith("motif:") else f"{at}: {p}"
                             for p in problems]
            continue
        inputs, problems = _bind(motif, item.get("with"), at)
        out.problems += problems
        marker = {"file": motif.file, "motif": motif.name, "import": at, "inputs": inputs}
        _merge_motif(raw, box, motif, marker, at, out)
    return out


def expand_imports(entry_raw: Mapping[str, Any], katalog_path: Path, root: Path,
                   katalog_imports: list[Any] | None = None
                   ) -> tuple[dict[str, Any], list[str]]:
    """The CRD entry's operatorBox with its motif imports merged, and the problems.

    `katalog_imports` (spec.imports) is accepted for symmetry but adds no resources: in
    Orkestra Katalog-level imports contribute notes and profiles only (`katalog_notes`).
    Use `expand_entry` to also get the merged validation/mutation rules."""
    del katalog_imports
    out = expand_entry(entry_raw, katalog_path, root)
    box = out.raw.get("operatorBox", out.raw.get("reconciler"))
    return (box if isinstance(box, dict) else {}), out.problems


def _motif_notes(motif: Motif, label: str, problems: list[str]) -> dict[str, str]:
    notes = motif.body.get("notes")
    if not notes:
        return {}
    if not isinstance(notes, Mapping):
        problems.append(f"{label}: notes must be Orkestra's map notes: {{functions: [{{name, "
                        "expression}]}, not a list or a text")
        return {}
    if "functions" in notes or "include" in notes:
        if notes.get("include"):
            problems.append(f"{label}: notes.include is not supported by orksync")
        out: dict[str, str] = {}
        for i, item in enumerate(notes.get("functions") or []):
            if not isinstance(item, Mapping) or not isinstance(item.get("name"), str) \
                    or not isinstance(item.get("expression"), str):
                problems.append(f"{label}: notes.functions[{i}] needs name and expression")
                continue
            out[item["name"]] = item["expression"]
        return out
    bad = [k for k, v in notes.items() if not isinstance(v, str)]
    problems += [f"{label}: notes.{k}: the expression must be a string" for k in bad]
    return {str(k): v for k, v in notes.items() if isinstance(v, str)}


def katalog_notes(katalog_imports: Any, katalog_path: Path, root: Path,
                  local_notes: Mapping[str, Any] | None = None) -> Expansion:
    """Notes contributed by Katalog-level `spec.imports` (in `.notes`). A note named by
    two motifs is a problem; a note the Katalog declares itself wins over imported ones.
    Resources, status and admission of such motifs are ignored with a warning."""
    out = Expansion()
    found, out.problems = _imports({"imports": katalog_imports}, "spec.imports")
    seen: dict[str, str] = {}
    for at, item in found:
        motif, problems = load_motif(item.get("motif"), katalog_path, root)
        if motif is None:
            out.problems += [f"{at}.{p}" if p.startswith("motif:") else f"{at}: {p}"
                             for p in problems]
            continue
        out.problems += _bind(motif, item.get("with"), at)[1]
        label = f"{at}: motif {motif.file}"
        for name, expression in _motif_notes(motif, label, out.problems).items():
            if local_notes and name in local_notes:
                continue
            if name in seen:
                out.problems.append(f"{label}: note {name!r} is also declared by motif "
                                    f"{seen[name]} (rename one, or declare it in the "
                                    "Katalog's own notes)")
                continue
            seen[name] = motif.file
            out.notes[name] = expression
        ignored = [k for k in ("resources", "status", "admission") if motif.body.get(k)]
        if ignored:
            out.warnings.append(f"{label}: {', '.join(ignored)} ignored: Katalog-level "
                                "imports contribute notes only, as in Orkestra (import it "
                                "under spec.crds.<name>.imports)")
        if motif.body.get("profiles"):
            out.warnings.append(f"{label}: profiles ignored (user-defined profiles are not "
                                "supported by orksync)")
    return out
