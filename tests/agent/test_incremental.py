"""Which custom resources a new revision changes (orksync.agent.incremental), on real
repositories loaded by the loader: two revisions written side by side."""

from __future__ import annotations

from pathlib import Path

from orksync.agent.incremental import changed_custom_resources
from orksync.katalog.loader import load_repository
from orksync.katalog.model import Catalog
from tests.helpers import CRD, KATALOG, katalog, widget, write_repo

CROSS_KATALOG = katalog("""\
        cross:
          - crd: widget
            as: peer
            selector: {name: a}
        onCreate:
          configMaps:
            - name: "{{ .metadata.name }}-peer"
              data: {image: "{{ .cross.peer.spec.image }}"}
""")


def repo(root: Path, *, widgets: dict[str, str] | None = None, katalog_text: str = KATALOG,
         extra: dict[str, str] | None = None) -> Catalog:
    files = {"crd.yaml": CRD, "katalog.yaml": katalog_text, **(extra or {})}
    for name, text in (widgets if widgets is not None else {
            n: widget(n, image="nginx:1", replicas=1, port=80) for n in "abc"}).items():
        files[f"crs/{name}.yaml"] = text
    catalog = load_repository(write_repo(root, files))
    assert not catalog.errors, catalog.errors
    return catalog


def names(refs: frozenset | None) -> set[str] | None:  # type: ignore[type-arg]
    return None if refs is None else {ref.name for ref in refs}


def test_an_unchanged_revision_changes_nothing(tmp_path: Path) -> None:
    assert names(changed_custom_resources(repo(tmp_path / "1"), repo(tmp_path / "2"))) == set()


def test_a_changed_spec_changes_that_custom_resource_only(tmp_path: Path) -> None:
    old = repo(tmp_path / "1")
    new = repo(tmp_path / "2", widgets={
        "a": widget("a", image="nginx:1", replicas=1, port=80),
        "b": widget("b", image="nginx:2", replicas=1, port=80),
        "c": widget("c", image="nginx:1", replicas=1, port=80)})
    assert names(changed_custom_resources(old, new)) == {"b"}


def test_a_changed_katalog_entry_changes_all_its_custom_resources(tmp_path: Path) -> None:
    old = repo(tmp_path / "1")
    new = repo(tmp_path / "2", katalog_text=KATALOG.replace('port: "80"', 'port: "81"'))
    assert names(changed_custom_resources(old, new)) == {"a", "b", "c"}


def test_a_cross_reader_renders_again_when_what_it_reads_changed(tmp_path: Path) -> None:
    def images(**image: str) -> dict[str, str]:
        return {n: widget(n, image=image.get(n, "nginx:1")) for n in "abc"}

    old = repo(tmp_path / "1", katalog_text=CROSS_KATALOG, widgets=images())
    new = repo(tmp_path / "2", katalog_text=CROSS_KATALOG, widgets=images(a="nginx:2"))
    # the entry's custom resources read the entry's (a, by its selector): all render
    # again, the selector being a template decided at render time
    assert names(changed_custom_resources(old, new)) == {"a", "b", "c"}
    # without the cross read, only a
    plain_old = repo(tmp_path / "3", widgets=images())
    plain_new = repo(tmp_path / "4", widgets=images(a="nginx:2"))
    assert names(changed_custom_resources(plain_old, plain_new)) == {"a"}


def test_what_reaches_beyond_custom_resources_needs_a_full_sync(tmp_path: Path) -> None:
    old = repo(tmp_path / "1")
    added = repo(tmp_path / "2", widgets={
        n: widget(n, image="nginx:1", replicas=1, port=80) for n in "abcd"})
    removed = repo(tmp_path / "3", widgets={
        n: widget(n, image="nginx:1", replicas=1, port=80) for n in "ab"})
    crd = repo(tmp_path / "4", extra={"crd.yaml": CRD.replace("singular: widget",
                                                               "singular: widget, "
                                                               "shortNames: [wd]")})
    plain = repo(tmp_path / "5", extra={"plain/cm.yaml": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: default}\n")})
    for new in (added, removed, crd, plain):
        assert changed_custom_resources(old, new) is None
    assert changed_custom_resources(plain, plain) == frozenset()
