"""The bad-input corpus: the valid repository tests/corpus/good with one thing broken at a
time. Each case must give exactly one error (consequences, such as the custom resources of
a broken Katalog entry reported as not rendered, say "reported above") that names the
file, the object and the field; it must come back (a hang guard, not a speed bound: a
template's work is refused by the engine's step budget) within a memory bound; every
custom resource the breakage does not concern must still render with all its children;
and the rendered directory must be written, inside itself.

The table of cases is also the source of docs/reliability.md's bad-input table.
"""

from __future__ import annotations

import os
import shutil
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from orksync.errors import InputError, LoadError
from orksync.katalog.loader import load_repository
from orksync.model import ObjRef, Origin, RenderedObject, RenderedSet, WritePolicy
from orksync.render.engine import render_catalog
from orksync.rendered.directory import read_rendered, write_rendered
from tests.corpus import CORPUS, HANG, bounded, python_internals

GOOD = CORPUS / "good"
PEAK_BYTES = 96 * 1024 * 1024
CONSEQUENCE = "reported above"
WIDGET = "apiVersion: test.orksync.io/v1\nkind: Widget\n"
KATALOG = "katalogs/widgets.yaml"


def text(name: str) -> str:
    return (GOOD / name).read_text()


def edit(name: str, old: str, new: str) -> dict[str, str | bytes]:
    """The good file `name` with `old` replaced by `new` (which must occur)."""
    source = text(name)
    assert old in source, f"{old!r} not in {name}"
    return {name: source.replace(old, new, 1)}


def widget(name: str, spec: str = "image: nginx", namespace: str = "team-a") -> str:
    return f"{WIDGET}metadata:\n  name: {name}\n  namespace: {namespace}\nspec:\n  {spec}\n"


@dataclass(frozen=True)
class Case:
    """One bad input: the files written over the good repository, where the one error
    must point (file, object, field, a piece of the message) and the good custom resources
    it may take down with it (the CRs of a broken Katalog entry)."""

    id: str
    files: dict[str, str | bytes]
    file: str
    obj: str
    field: str
    message: str
    lost: frozenset[str] = field(default_factory=frozenset)


# a plain manifest (a comment first: the error's line is the field's, not the file's)
PLAIN = ("# settings\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n"
         "  namespace: team-a\ndata: {level: info}\n")
WIDGETS = frozenset({"Widget/shop", "Widget/blog"})
GADGETS = frozenset({"Gadget/tools"})
BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join(['*' + p] * 9)}]\n" for p, n in zip("abcdefg", "bcdefgh",
                                                                  strict=True))

CASES = [
    # -- YAML ------------------------------------------------------------------------
    Case("malformed-yaml", {"apps/bad.yaml": WIDGET + "metadata: {name: [unclosed\n"},
         "apps/bad.yaml:4", "", "", "invalid YAML"),
    Case("duplicate-key", {"apps/bad.yaml": widget("bad", "image: a\n  image: b")},
         "apps/bad.yaml:8", "Widget/team-a/bad", "spec.image", 'duplicate key "image"'),
    Case("alias-bomb", {"apps/bad.yaml": BOMB}, "apps/bad.yaml", "", "",
         "once its aliases are expanded"),
    Case("alias-cycle", {"apps/bad.yaml": widget("bad", "list: &l [*l]")}, "apps/bad.yaml",
         "", "", "(a cycle)"),
    Case("deep-flow-nesting", {"apps/bad.yaml": "a: " + "[" * 100_000}, "apps/bad.yaml:1",
         "", "", "nested deeper than 64 levels"),
    Case("deep-block-nesting", {"apps/bad.yaml": "".join(f"{'  ' * i}k{i}:\n"
                                                         for i in range(100)) + "  " * 100 + "v\n"},
         "apps/bad.yaml", "", "", "nested deeper than 64 levels"),
    Case("huge-file", {"apps/bad.yaml": "a: " + "x" * (5 * 1024 * 1024) + "\n"},
         "apps/bad.yaml", "", "", "above the 4194304 limit"),
    Case("too-many-nodes", {"apps/bad.yaml": "a: [" + "1," * 300_000 + "]\n"},
         "apps/bad.yaml:1", "", "", "more than 250,000 YAML nodes"),
    Case("binary-file", {"apps/bad.yaml": b"\x7fELF\x02\x01\x01\x00" + bytes(range(256))},
         "apps/bad.yaml", "", "", "binary file"),
    Case("file-name-not-utf8", {os.fsdecode(b"apps/bad\xff.yaml"): widget("bad")},
         "apps/bad\\udcff.yaml", "", "", "file name is not printable UTF-8 text"),
    Case("not-utf8", {"apps/bad.yaml": widget("bad").encode() + b"# caf\xe9\n"},
         "apps/bad.yaml", "", "", "not UTF-8 text"),
    Case("python-tag", {"apps/bad.yaml": "a: !!python/object/apply:os.system [id]\n"},
         "apps/bad.yaml:1", "", "", "could not determine a constructor"),
    Case("binary-tag", {"apps/bad.yaml": widget("bad", "blob: !!binary aGVsbG8=")},
         "apps/bad.yaml:7", "", "", "tag:yaml.org,2002:binary is not supported"),
    Case("complex-key", {"apps/bad.yaml": widget("bad", "? [a, b]\n  : c")},
         "apps/bad.yaml:7", "", "", "a map key must be a scalar"),
    Case("huge-integer", {"apps/bad.yaml": widget("bad", "replicas: " + "9" * 5000)},
         "apps/bad.yaml:7", "", "", "integer longer than 100 characters"),
    Case("not-a-map", {"apps/bad.yaml": "- just\n- a list\n"}, "apps/bad.yaml:1", "", "",
         "document is not a mapping"),
    # -- wrong types -------------------------------------------------------------------
    Case("kind-not-text", {"apps/bad.yaml": "apiVersion: test.orksync.io/v1\nkind: [Widget]\n"},
         "apps/bad.yaml:2", "", "kind", "kind must be a string, not a list"),
    Case("cr-spec-list", {"apps/bad.yaml": widget("bad").replace("spec:\n  image: nginx",
                                                                  "spec: [1, 2]")},
         "apps/bad.yaml:6", "Widget/team-a/bad", "spec", "spec must be a map, not a list"),
    Case("cr-metadata-text", {"apps/bad.yaml": WIDGET + "metadata: bad\n"},
         "apps/bad.yaml:3", "Widget/?", "metadata", "metadata must be a map, not a string"),
    Case("cr-name-number", {"apps/bad.yaml": widget("42")}, "apps/bad.yaml:4", "Widget/team-a/?",
         "metadata.name", "must be a string, not an integer"),
    Case("cr-labels-list", {"apps/bad.yaml": widget("bad").replace(
        "  namespace: team-a\n", "  namespace: team-a\n  labels: [a]\n")},
         "apps/bad.yaml:6", "Widget/team-a/bad", "metadata.labels", "must be a map, not a list"),
    Case("guard-as-text", edit(KATALOG, 'allowedNamespaces: ["team-*", default]',
                               'allowedNamespaces: "team-*"'),
         KATALOG, "Katalog/widgets", "spec.crds.widget.allowedNamespaces",
         "must be a list of strings, not a string", WIDGETS),
    Case("namespaced-as-text", edit(KATALOG, "      crdFile:", "      namespaced: 'no'\n"
                                    "      crdFile:"),
         KATALOG, "Katalog/widgets", "spec.crds.widget.namespaced",
         "must be true or false, not a string", WIDGETS),
    Case("note-not-text", edit(KATALOG, "    expression: '{{ eq .spec.tier \"prod\" }}'",
                               "    expression: [1]"),
         KATALOG, "Katalog/widgets", "notes.functions[1].expression",
         "must be a template expression", WIDGETS),
    Case("entry-field-wrong-type", edit(KATALOG, 'replicas: "{{ .spec.replicas | default 1 }}"',
                                        "replicas: {many: true}"),
         KATALOG, "Widget.test.orksync.io/team-a/shop",
         "spec.crds.widget.operatorBox.onReconcile.deployments[0].replicas", "", WIDGETS),
    Case("block-not-a-map", edit(KATALOG, "        onReconcile:\n", "        onReconcile: []\n"
                                 "        onDelete:\n"),
         KATALOG, "Katalog/widgets", "spec.crds.widget.operatorBox.onReconcile",
         "must be a map of resource lists", WIDGETS),
    # -- unknown kinds and functions, template errors -----------------------------------
    Case("unknown-kind-in-known-group", {"apps/bad.yaml": widget("bad").replace(
        "kind: Widget", "kind: Widgett")},
         "apps/bad.yaml:2", "Widgett/team-a/bad", "kind", "no Katalog entry handles Widgett"),
    Case("unknown-version", {"apps/bad.yaml": widget("bad").replace("/v1", "/v2")},
         "apps/bad.yaml:2", "Widget/team-a/bad", "kind", "no Katalog entry handles Widget "
         "(test.orksync.io/v2)"),
    Case("unknown-orkestra-kind", {"katalogs/bad.yaml": "apiVersion: orkestra.orkspace.io/v1\n"
                                   "kind: Katalogue\nmetadata: {name: bad}\n"},
         "katalogs/bad.yaml:2", "Katalogue/bad", "kind", "unknown Orkestra kind"),
    Case("unknown-resource-key", edit(KATALOG, "          deployments:\n",
                                      "          deploymentz: []\n          deployments:\n"),
         KATALOG, "Katalog/widgets", "operatorBox.onReconcile.deploymentz",
         "unknown resource key (did you mean 'deployments'?)", WIDGETS),
    Case("unknown-katalog-key", edit(KATALOG, "      operatorBox:\n",
                                     "      operatorBox:\n        onCreat: {}\n"),
         KATALOG, "Katalog/widgets", "spec.crds.widget.operatorBox.onCreat",
         "unknown field 'onCreat' (did you mean 'onCreate'?)", WIDGETS),
    Case("setting-in-both-layouts", edit(KATALOG, "      operatorBox:\n",
                                         "      operatorBox:\n        runtime:\n"
                                         "          allowedNamespaces: [team-a]\n"),
         KATALOG, "Katalog/widgets", "spec.crds.widget.operatorBox.runtime.allowedNamespaces",
         "set twice: here and at allowedNamespaces", WIDGETS),
    Case("include-outside-the-repository", edit(KATALOG, "      operatorBox:\n",
                                                "      admission:\n        validation:\n"
                                                "          include: ../../../rules.yaml\n"
                                                "      operatorBox:\n"),
         KATALOG, "Katalog/widgets", "spec.crds.widget.admission.validation.include",
         "points outside the repository", WIDGETS),
    Case("unknown-entry-field", edit(KATALOG, '              image: "{{ .spec.image }}"\n',
                                     '              image: "{{ .spec.image }}"\n'
                                     '              replicass: 2\n'),
         KATALOG, "Katalog/widgets", "operatorBox.onReconcile.deployments[0].replicass",
         "unknown field 'replicass' of a deployments entry (did you mean 'replicas'?)",
         WIDGETS),
    Case("unknown-function", edit(KATALOG, "{{ .spec.image }}", "{{ nosuch .spec.image }}"),
         KATALOG, "Katalog/widgets", "operatorBox.onReconcile.deployments[0].image",
         'function "nosuch" not defined', WIDGETS),
    Case("template-syntax", edit(KATALOG, "{{ .spec.image }}", "{{ .spec.image }"),
         KATALOG, "Katalog/widgets", "operatorBox.onReconcile.deployments[0].image",
         "unexpected", WIDGETS),
    Case("jinja-template-syntax", edit("katalogs/gadgets.yaml", "{{ toUpper(metadata.name) }}",
                                       "{{ toUpper(metadata.name }}"),
         "katalogs/gadgets.yaml", "Katalog/gadgets", "operatorBox.onReconcile.configMaps[0]"
         ".data.upper", "template", GADGETS),
    Case("huge-template", edit(KATALOG, 'tier: "{{ .spec.tier }}"',
                               'tier: "' + "{{ .spec.tier }}" * 6000 + '"'),
         KATALOG, "Katalog/widgets", "onReconcile.configMaps[0].data.tier",
         "template has more than 5000 actions", WIDGETS),
    Case("too-many-template-actions", edit(KATALOG, "  functions:\n", "  functions:\n" + "".join(
        f"    - {{name: big{i}, expression: '{{{{ .metadata.name }}}}"
        f"{'{{ .metadata.name }}' * 4500}'}}\n" for i in range(5))),
         KATALOG, "Katalog/widgets", "spec.crds.widget", "more than 20000", WIDGETS),
    # Orkestra's len gives 0 for a number; slicing one fails (for every list it does not)
    Case("template-fails-for-one-cr",
         {**edit(KATALOG, 'size: "{{ len .spec.regions }}"',
                 'size: "{{ len (slice .spec.regions 0) }}"'),
          "apps/bad.yaml": widget("bad", "regions: 7")},
         KATALOG, "Widget.test.orksync.io/team-a/bad",
         "operatorBox.onReconcile.custom[0].spec.size", "can't slice item of type int64"),
    Case("template-too-expensive-for-one-cr",
         {**edit(KATALOG, 'size: "{{ len .spec.regions }}"', 'size: "{{ len .spec.regions }}"\n'
                 '                spin: "{{ range .spec.spin }}{{ range $.spec.spin }}{{ end }}'
                 '{{ end }}"'),
          "apps/bad.yaml": widget("bad", "image: x\n  regions: []\n  spin: 100000000")},
         KATALOG, "Widget.test.orksync.io/team-a/bad", "onReconcile.custom[0].spec.spin",
         "template too expensive"),
    Case("cr-of-a-group-without-katalog", {"apps/bad.yaml": widget("bad").replace(
        "test.orksync.io/v1\nkind: Widget", "test.orksync.io/v1\nkind: Sprocket")},
         "apps/bad.yaml:2", "Sprocket/team-a/bad", "kind", "no Katalog entry handles Sprocket"),
    Case("crd-missing", edit(KATALOG, "crdFile: ../crds/widgets.yaml",
                             "crdFile: ../crds/missing.yaml"),
         KATALOG, "Katalog/widgets", "spec.crds.widget.crdFile",
         "file '../crds/missing.yaml' does not exist", WIDGETS),
    Case("crd-without-storage-version", edit("crds/gadgets.yaml", "storage: true",
                                             "storage: false"),
         "crds/gadgets.yaml:5", "CustomResourceDefinition/gadgets.test.orksync.io", "spec",
         "missing exactly one spec.versions[] entry with storage: true", GADGETS),
    # -- plain manifests without a usable apiVersion or kind (skipped, the object they
    # applied before would leave the render and be pruned) ------------------------------
    Case("plain-api-version-missing", {"platform/bad.yaml": PLAIN.replace("apiVersion: v1\n",
                                                                          "")},
         "platform/bad.yaml:2", "ConfigMap/team-a/settings", "apiVersion", "missing"),
    Case("plain-api-version-misspelled", {"platform/bad.yaml": PLAIN.replace(
        "apiVersion:", "apiversion:")}, "platform/bad.yaml:2", "ConfigMap/team-a/settings",
         "apiVersion", "the document has 'apiversion' (did you mean apiVersion?)"),
    Case("plain-api-version-empty", {"platform/bad.yaml": PLAIN.replace("apiVersion: v1",
                                                                        "apiVersion:")},
         "platform/bad.yaml:2", "ConfigMap/team-a/settings", "apiVersion", "empty"),
    Case("plain-api-version-malformed", {"platform/bad.yaml": PLAIN.replace("v1", "v1/")},
         "platform/bad.yaml:2", "ConfigMap/team-a/settings", "apiVersion",
         "not a Kubernetes apiVersion"),
    Case("plain-api-version-not-text", {"platform/bad.yaml": PLAIN.replace("v1", "[v1]")},
         "platform/bad.yaml:2", "ConfigMap/team-a/settings", "apiVersion",
         "must be a string, not a list"),
    Case("plain-kind-misspelled", {"platform/bad.yaml": PLAIN.replace("kind:", "Kind:")},
         "platform/bad.yaml:3", "?/team-a/settings", "kind",
         "the document has 'Kind' (did you mean kind?)"),
    # -- names -------------------------------------------------------------------------
    Case("invalid-name", {"apps/bad.yaml": widget("Bad_Name")}, "apps/bad.yaml:4",
         "Widget/team-a/Bad_Name", "metadata.name", "is not a valid Kubernetes name"),
    Case("rendered-name-invalid", edit(KATALOG, 'name: "{{ .metadata.name }}-settings"',
                                       'name: "{{ .spec.image }}"'),
         KATALOG, "Widget.test.orksync.io/team-a/shop",
         "operatorBox.onReconcile.configMaps[0].name", "is not a valid Kubernetes name",
         frozenset({"Widget/shop"})),
    Case("random-value-outside-a-secret", edit(KATALOG, 'tier: "{{ .spec.tier }}"',
                                               'tier: "{{ randomHex 8 }}"'),
         KATALOG, "Widget.test.orksync.io/team-a/shop",
         "operatorBox.onReconcile.configMaps[0]",
         "data.tier: a random value is made only in a Secret's data or stringData",
         frozenset({"Widget/shop"})),
    Case("namespace-escapes", {"apps/bad.yaml": widget("bad", namespace="../../etc")},
         "apps/bad.yaml:5", "Widget/../../etc/bad", "metadata.namespace",
         "is not a valid DNS-1123 label"),
    Case("absolute-name", {"apps/bad.yaml": widget("/etc/passwd")}, "apps/bad.yaml:4",
         "Widget/team-a//etc/passwd", "metadata.name", "is not a valid Kubernetes name"),
    Case("nul-in-name", {"apps/bad.yaml": widget('"a\\0b"')}, "apps/bad.yaml:4",
         "Widget/team-a/a\\x00b", "metadata.name", "is not a valid Kubernetes name"),
    Case("newline-in-name", {"apps/bad.yaml": widget('"a\\nERROR forged"')}, "apps/bad.yaml:4",
         "Widget/team-a/a\\nERROR forged", "metadata.name", "is not a valid Kubernetes name"),
    Case("custom-kind-escapes", edit(KATALOG, "kind: Gadget", 'kind: "../../../escaped"'),
         KATALOG, "Katalog/widgets", "onReconcile.custom[0].kind", "is not valid", WIDGETS),
    Case("custom-kind-from-cr-escapes",
         {**edit(KATALOG, "kind: Gadget", 'kind: \'{{ or .spec.gadgetKind "Gadget" }}\''),
          "apps/bad.yaml": widget("bad", "image: x\n  regions: []\n  gadgetKind: ../../escaped")},
         KATALOG, "Widget.test.orksync.io/team-a/bad", "onReconcile.custom[0].kind",
         "kind '../../escaped' is not valid"),
    Case("custom-api-version-escapes", edit(KATALOG, "- apiVersion: test.orksync.io/v1",
                                            '- apiVersion: "x/../../../v1"'),
         KATALOG, "Katalog/widgets", "custom[0].apiVersion", "is not valid", WIDGETS),
    Case("crd-kind-escapes", edit("crds/gadgets.yaml", "kind: Gadget,", "kind: ../x,"),
         "crds/gadgets.yaml:8", "CustomResourceDefinition/gadgets.test.orksync.io",
         "spec.names.kind", "kind '../x' is not valid", GADGETS),
    Case("crd-name-escapes", edit("crds/gadgets.yaml", "name: gadgets.test.orksync.io",
                                  "name: ../../gadgets"),
         "crds/gadgets.yaml:4", "CustomResourceDefinition/../../gadgets", "metadata.name",
         "is not a valid Kubernetes name", GADGETS),
    Case("api-types-kind-escapes", edit("katalogs/gadgets.yaml", "      crdFile:",
                                        "      apiTypes: {kind: ../Gadget}\n      crdFile:"),
         "katalogs/gadgets.yaml", "Katalog/gadgets", "spec.crds.gadget.apiTypes.kind",
         "is not valid", GADGETS),
]


def run(files: dict[str, str | bytes], tmp: Path) -> tuple[RenderedSet, int]:
    repo = tmp / "repo"
    shutil.copytree(GOOD, repo)
    for name, content in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    tracemalloc.start()
    try:
        with bounded(HANG):
            rendered = render_catalog(load_repository(repo))
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    write_rendered(rendered, tmp / "out" / "rendered")
    assert {p.parent for p in tmp.iterdir()} == {tmp}
    assert sorted(p.name for p in tmp.iterdir()) == ["out", "repo"]
    assert [p.name for p in (tmp / "out").iterdir()] == ["rendered"]
    return rendered, peak


def roots(rendered: RenderedSet) -> dict[str, set[str]]:
    """Every rendered custom resource (`Kind/name`) with the objects it owns."""
    out: dict[str, set[str]] = {}
    for obj in rendered.objects:
        if obj.owner is None and obj.ref.kind != "CustomResourceDefinition":
            out.setdefault(f"{obj.ref.kind}/{obj.ref.name}", set())
    for obj in rendered.objects:
        if obj.owner is not None:
            out.setdefault(f"{obj.owner.kind}/{obj.owner.name}", set()).add(str(obj.ref))
    return out


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    rendered, _ = run({}, tmp_path_factory.mktemp("good"))
    assert not rendered.errors and not rendered.warnings
    return roots(rendered)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_bad_input_gives_one_clear_error_and_the_rest_renders(
        case: Case, baseline: dict[str, set[str]], tmp_path: Path) -> None:
    rendered, peak = run(case.files, tmp_path)
    causes = [e for e in rendered.errors if CONSEQUENCE not in str(e)]
    assert len(causes) == 1, [str(e) for e in rendered.errors]
    (err,) = causes
    message = str(err)
    assert isinstance(err, InputError), message
    assert message.startswith(case.file), message
    assert case.obj in message and case.field in message and case.message in message, message
    assert not python_internals(message), message
    for other in rendered.errors:  # consequences name the custom resources left out
        assert other is err or str(other).startswith(("apps/", "katalogs/")), str(other)
    assert peak < PEAK_BYTES, peak
    got = roots(rendered)
    for cr, children in baseline.items():
        if cr not in case.lost:
            assert cr in got and children <= got[cr], cr


# -- the rendered directory: the last line of defence -------------------------------------


def _rendered(kind: str, name: str = "x", namespace: str = "default") -> RenderedSet:
    body = {"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": namespace}}
    obj = RenderedObject(ref=ObjRef.of(body), body=body, policy=WritePolicy.APPLY,
                         origin=Origin(file="x.yaml"), stage=0)
    return RenderedSet(objects=(obj,))


@pytest.mark.parametrize(("kind", "name", "namespace"), [
    ("../../../escaped", "x", "default"), ("ConfigMap", "../../x", "default"),
    ("ConfigMap", "x", "/etc"), ("ConfigMap", "a\x00b", "default"), ("ConfigMap", ".x", "a"),
    ("Config/Map", "x", "default"), ("ConfigMap", "x" * 300, "default"),
])
def test_the_rendered_directory_refuses_a_path_that_could_leave_it(
        kind: str, name: str, namespace: str, tmp_path: Path) -> None:
    out = tmp_path / "a" / "out"
    with pytest.raises(InputError, match="is not a safe file name"):
        write_rendered(_rendered(kind, name, namespace), out)
    assert [p.name for p in tmp_path.rglob("*")] == ["a"]  # nothing written, no temp left


@pytest.mark.parametrize(("kind", "name", "namespace"), [
    ("ConfigMap", "../x", "default"), ("ConfigMap", "x", "../up"), ("Config/Map", "x", "default"),
    ("ConfigMap", "a\x00b", "default"),
])
def test_a_child_is_refused_a_path_that_could_leave_it_after_a_safe_one(
        kind: str, name: str, namespace: str, tmp_path: Path) -> None:
    """The writer checks a child's kind and namespace once each (ObjectWriter.leaf): what
    it has seen safe for one object must not let an unsafe part of the next one through."""
    owner = ObjRef(api_version="x.io/v1", kind="App", namespace="default", name="a")

    def child(kind: str, name: str, namespace: str) -> RenderedObject:
        body = {"apiVersion": "v1", "kind": kind,
                "metadata": {"name": name, "namespace": namespace}}
        return RenderedObject(ref=ObjRef.of(body), body=body, policy=WritePolicy.APPLY,
                              origin=Origin(file="x.yaml"), stage=0, owner=owner)

    safe = child("ConfigMap", "x", "default")
    assert write_rendered(RenderedSet(objects=(safe,)), tmp_path / "ok").is_dir()
    out = tmp_path / "a" / "out"
    with pytest.raises(InputError, match="is not a safe file name"):
        write_rendered(RenderedSet(objects=(safe, child(kind, name, namespace))), out)
    assert [p.name for p in (tmp_path / "a").rglob("*")] == []  # nothing left behind


def test_a_tampered_index_is_a_load_error_naming_the_entry(tmp_path: Path) -> None:
    out = write_rendered(_rendered("ConfigMap"), tmp_path / "out")
    index = out / "index.yaml"
    good = index.read_text()
    for broken in (good.replace("  policy: apply\n", ""), good.replace("stage: 0", "stage: x"),
                   good.replace("objects:\n", "objects: 5\nx:\n")):
        index.write_text(broken)
        with pytest.raises(LoadError, match=r"index.yaml: an entry of objects is not valid"):
            read_rendered(out)


def table() -> str:
    """The corpus as a Markdown table (input, the error seen, peak traced memory, seconds):
    `PYTHONPATH=. python -m tests.katalog.test_bad_input`."""
    import tempfile
    import time

    rows = ["| input | error seen (consequences left out) | peak MiB | s |", "|---|---|---|---|"]
    for case in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            start = time.monotonic()
            rendered, peak = run(case.files, Path(tmp))
            seconds = time.monotonic() - start
        causes = [str(e) for e in rendered.errors if CONSEQUENCE not in str(e)]
        message = causes[0] if len(causes) == 1 else f"{len(causes)} errors: {causes}"
        message = (message if len(message) <= 200 else message[:197] + "...").replace("|", "\\|")
        rows.append(f"| `{case.id}` | `{message}` | {peak / 2**20:.1f} | {seconds:.2f} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(table())
