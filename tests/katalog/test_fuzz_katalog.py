"""Fuzzing the Katalog loader and the render behind it: a valid repository
(tests/corpus/good) with documents mutated at random (values replaced by other types,
keys dropped or added, strings turned into template soup), YAML text mutated byte by byte,
and documents generated from strategies. Loading, rendering and writing the rendered
directory must never raise; every problem must be an orksync InputError that names a
file of the repository and shows no Python internals; the rendered directory stays
inside itself; a custom resource in a document nobody touched still renders.

`ORKSYNC_FUZZ_EXAMPLES=N` runs N examples per test (tests/corpus).
"""

from __future__ import annotations

import copy
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from orksync.errors import InputError
from orksync.katalog.loader import load_repository
from orksync.model import RenderedSet
from orksync.render.engine import render_catalog
from orksync.rendered.directory import write_rendered
from orksync.yamls.io import dump_all, iter_yaml_files, load_documents
from tests.corpus import CORPUS, HANG, bounded, fuzz_settings, python_internals

GOOD = CORPUS / "good"
FILES = {str(p.relative_to(GOOD)): [d.content for d in load_documents(p)]
         for p in iter_yaml_files(GOOD)}
CR_FILES = ("apps/shop.yaml", "apps/tools.yaml")

scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=30),
                    st.sampled_from(["", "default", "true", "Widget", "test.orksync.io/v1",
                                     "../x", "/etc/passwd", "a/b", "{{ .spec.image }}",
                                     "{{ .nope.x }}", "{{ nosuch }}", "{{ if }}", "*",
                                     "{{ range 1000000000 }}x{{ end }}", "team-*"]))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=12), inner, max_size=4), max_leaves=12)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*prefix, i))


@st.composite
def mutation(draw: st.DrawFn, files: tuple[str, ...] = tuple(FILES)) -> dict[str, str]:
    """{file: new text} for one file of the good repository with 1-4 edits."""
    name = draw(st.sampled_from(sorted(files)))
    docs = copy.deepcopy(FILES[name])
    for _ in range(draw(st.integers(1, 4))):
        d = draw(st.integers(0, len(docs) - 1))
        path = draw(st.sampled_from(list(_paths(docs[d]))))
        op = draw(st.sampled_from(["replace", "drop", "add"]))
        if not path:
            docs[d] = draw(values) if op == "replace" else docs[d]
            continue
        parent: Any = docs[d]
        for key in path[:-1]:
            parent = parent[key]
        if op == "replace":
            parent[path[-1]] = draw(values)
        elif op == "drop":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.text(max_size=12))] = draw(values)
        else:
            parent.insert(int(path[-1]), draw(values))
    return {name: dump_all(docs)}


YAML_BITS = [":", "-", " ", "\n", "  ", "[", "]", "{", "}", "&a", "*a", "!!str", "!!binary",
             "? ", "|", ">", "#", "'", '"', "---\n", "...\n", "\t", "%YAML 1.1\n", "<<: *a",
             "\x00", "\ufeff", "\udcff", "é", "{{", "}}"]


@st.composite
def text_mutation(draw: st.DrawFn) -> dict[str, str]:
    """{file: text} for one file of the good repository with characters inserted, cut or
    repeated."""
    name = draw(st.sampled_from(sorted(FILES)))
    text = (GOOD / name).read_text()
    for _ in range(draw(st.integers(1, 6))):
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, min(len(text), i + 40)))
        op = draw(st.sampled_from(["insert", "cut", "repeat"]))
        if op == "insert":
            text = text[:i] + draw(st.sampled_from(YAML_BITS)) + text[i:]
        elif op == "cut":
            text = text[:i] + text[j:]
        else:
            text = text[:j] + text[i:j] * draw(st.integers(2, 50)) + text[j:]
    return {name: text}


documents = st.fixed_dictionaries(
    {"apiVersion": st.one_of(st.sampled_from(["test.orksync.io/v1", "test.orksync.io/v2",
                                              "orkestra.orkspace.io/v1", "v1",
                                              "apiextensions.k8s.io/v1"]), values),
     "kind": st.one_of(st.sampled_from(["Widget", "Gadget", "Katalog", "Motif",
                                        "CustomResourceDefinition", "Nope"]), values),
     "metadata": st.one_of(st.fixed_dictionaries({"name": values, "namespace": values}),
                           values)},
    optional={"spec": values, "status": values, "notes": values})


def check(edits: dict[str, str]) -> RenderedSet:
    """Load, render and write the good repository with `edits` applied: nothing raises,
    every error is an InputError naming a file of the repository, and every custom
    resource of a file not edited still renders."""
    with tempfile.TemporaryDirectory() as tmp:
        repo, out = Path(tmp) / "repo", Path(tmp) / "deep" / "out"
        shutil.copytree(GOOD, repo)
        for name, text in edits.items():
            (repo / name).write_bytes(text.encode("utf-8", "surrogateescape"))
        with bounded(HANG):  # a hang guard per example, not a speed bound
            catalog = load_repository(repo)
            rendered = render_catalog(catalog)
            write_rendered(rendered, out)
        written = {p for p in Path(tmp).rglob("*") if p.is_file()}
        assert all(p.is_relative_to(repo) or p.is_relative_to(out) for p in written)
        for err in rendered.errors:
            assert isinstance(err, InputError), repr(err)
            assert err.file and (repo / err.file).is_file(), str(err)
            assert not python_internals(str(err)), str(err)
        return rendered


def _untouched_crs(edits: dict[str, str]) -> set[str]:
    names = set()
    for file in CR_FILES:
        if file not in edits:
            names |= {f"{d['kind']}/{d['metadata']['name']}" for d in FILES[file]}
    return names


@fuzz_settings(60)
@given(mutation(files=CR_FILES))
def test_broken_custom_resources_leave_the_others_rendering(edits: dict[str, str]) -> None:
    rendered = check(edits)
    roots = {f"{o.ref.kind}/{o.ref.name}" for o in rendered.objects if o.owner is None}
    assert _untouched_crs(edits) <= roots


@fuzz_settings(80)
@given(mutation())
def test_mutated_katalogs_crds_and_resources_load_or_fail_cleanly(
        edits: dict[str, str]) -> None:
    check(edits)


@fuzz_settings(60)
@given(text_mutation())
def test_mutated_yaml_text_loads_or_fails_cleanly(edits: dict[str, str]) -> None:
    check(edits)


@fuzz_settings(50)
@given(st.lists(documents, min_size=1, max_size=4))
def test_generated_documents_load_or_fail_cleanly(docs: list[dict[str, Any]]) -> None:
    check({"apps/generated.yaml": dump_all(docs)})


def test_the_seed_repository_renders_without_errors() -> None:
    rendered = check({})
    assert not rendered.errors and not rendered.warnings
    assert _untouched_crs({}) == {"Widget/shop", "Widget/blog", "Gadget/tools"}
