"""The YAML emitter: deterministic, and read back to the same value; the exact reader of
the emitter's output agrees with the safe loader or steps aside."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from orksync.errors import LoadError
from orksync.yamls.io import (
    NotEmitted,
    dump_yaml,
    iter_yaml_files,
    load_document,
    load_documents,
    load_emitted,
)

# strings that sit on the emitter's quoting and structure boundaries
TRICKY = ["a: b", "- x", "-", ":", "x:", "yes", "1e3", "0x1", "1_0", "\u2028", "\x85", "a b",
          " a", "a ", "\t", "#x", "{}", "[]", '"q"', ".nan", "null", "~", "'", "é", "😀",
          "nginx:1.25", "a:b", "a:", "a:b c", "a :b", "a:#", "http://x:80/y", "a:b: c", "a::b",
          "a:-", "1:20", "a:b:"]
scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12),
                    st.floats(allow_nan=False, allow_infinity=True), st.text(max_size=20),
                    st.sampled_from(TRICKY))
values: st.SearchStrategy[Any] = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(min_size=1, max_size=8), inner, max_size=4),
    max_leaves=20)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=8), values, min_size=1, max_size=5))
def test_dumped_yaml_reads_back_to_the_same_value(value: dict[str, Any]) -> None:
    assert YAML(typ="safe").load(dump_yaml(value)) == value


def test_strings_that_look_like_other_types_are_quoted() -> None:
    text = dump_yaml({"a": "true", "b": "1", "c": "null", "d": "yes", "e": "1e3", "f": "x: y"})
    assert text == ('a: "true"\nb: "1"\nc: "null"\nd: "yes"\ne: "1e3"\nf: "x: y"\n')


def test_a_colon_inside_a_word_stays_plain_except_in_keys() -> None:
    value = {"image": "nginx:1.25", "url": "http://x:80/y", "a:b": "c: d", "l": ["x:y", "z:"]}
    text = dump_yaml(value)
    assert text == ('image: nginx:1.25\nurl: http://x:80/y\n"a:b": "c: d"\nl:\n- x:y\n'
                    '- "z:"\n')
    assert load_emitted(text) == value == YAML(typ="safe").load(text)


def test_dumping_is_byte_for_byte_stable() -> None:
    value = {"metadata": {"name": "x", "labels": {"b": "2", "a": "1"}}, "spec": {"l": [1, {}]}}
    assert dump_yaml(value) == dump_yaml(value)
    assert dump_yaml(value).index("    b:") < dump_yaml(value).index("    a:")  # as inserted


documents = st.one_of(
    st.dictionaries(st.one_of(st.text(min_size=1, max_size=8), st.sampled_from(TRICKY)),
                    values, min_size=1, max_size=5),
    st.lists(values, min_size=1, max_size=4))


def same(a: Any, b: Any) -> bool:
    """Equal, with types, key order and NaN compared too."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


@settings(max_examples=400, deadline=None)
@given(documents)
def test_the_exact_reader_reads_the_emitters_output_as_the_safe_loader_does(value: Any) -> None:
    text = dump_yaml(value)
    assert same(load_emitted(text), value)
    assert same(load_emitted(text), YAML(typ="safe").load(text))


@settings(max_examples=400, deadline=None)
@given(documents, st.randoms(use_true_random=False))
def test_an_edited_text_is_refused_by_the_exact_reader_or_read_as_the_safe_loader_does(
        value: Any, rnd: random.Random) -> None:
    text = dump_yaml(value)
    i = rnd.randrange(len(text))
    edited = text[:i] + rnd.choice([" ", "-", ":", '"', "\n", "x", "1", "", "  ", "#"]) + \
        text[i + 1:]
    try:
        fast = load_emitted(edited)
    except NotEmitted:
        return
    assert dump_yaml(fast) == edited  # only the emitter's own form is taken
    assert same(fast, YAML(typ="safe").load(edited))


@pytest.mark.parametrize("text", [
    "a: 1  # a comment\n",  # comments
    "a: {b: 1}\n",  # flow style
    "a:\n    b: 1\n",  # another indentation
    "a: 'single'\n",  # another quoting
    "a: 1\n\nb: 2\n",  # a blank line
    "a: 007\n",  # a number in another spelling
    "a: 1\na: 2\n",  # a duplicate key
    "a: 1",  # no final line break
])
def test_text_from_anywhere_else_is_not_taken_by_the_exact_reader(text: str) -> None:
    with pytest.raises(NotEmitted):
        load_emitted(text)


def test_load_document_falls_back_to_the_safe_loader_and_its_errors(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    assert load_document(b"a: {b: [1, 2]}  # hand written\n", path=path, display="x.yaml") == \
        {"a": {"b": [1, 2]}}
    with pytest.raises(LoadError, match=r"x.yaml.*duplicate key"):
        load_document(b"a: 1\na: 2\n", path=path, display="x.yaml")
    with pytest.raises(LoadError, match="no YAML document"):
        load_document(b"", path=path, display="x.yaml")


def test_the_yaml_files_of_a_tree_sorted_without_hidden_ones_or_linked_directories(
        tmp_path: Path) -> None:
    for rel in ("7.yaml", "a/1.yaml", "a/.h.yaml", "a/.hid/2.yaml", ".git/x/3.yaml",
                "b/c/4.yml", "b/5.YAML", "b/6.yaml.bak", "d/8.yaml", "x.yaml/10.yaml",
                "\u00e9 dir/9.yaml"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("a: 1\n")
    (tmp_path / "a" / "linked").symlink_to(tmp_path / "b")  # a directory: not entered
    (tmp_path / "a" / "dir.yaml").symlink_to(tmp_path / "b")
    (tmp_path / "a" / "file.yaml").symlink_to(tmp_path / "7.yaml")  # a file: read
    (tmp_path / "a" / "broken.yaml").symlink_to(tmp_path / "nowhere")
    found = [str(p.relative_to(tmp_path)) for p in iter_yaml_files(tmp_path)]
    assert found == ["7.yaml", "a/1.yaml", "a/file.yaml", "b/c/4.yml", "d/8.yaml",
                     "x.yaml/10.yaml", "\u00e9 dir/9.yaml"]
    # the loader's walk: the same files in the same order, a link resolved (the listing
    # says which entries are links), the others as found
    resolved = [str(p.relative_to(tmp_path)) for p in
                iter_yaml_files(tmp_path, resolve_links=True)]
    assert resolved == [*found[:2], "7.yaml", *found[3:]]


@settings(max_examples=300, deadline=None)
@given(documents, st.randoms(use_true_random=False))
def test_a_repository_file_reads_as_the_safe_loader_reads_it(
        tmp_path_factory: pytest.TempPathFactory, value: Any, rnd: random.Random) -> None:
    """`load_documents` takes small files in the emitter's form with the exact reader:
    the same documents as the safe loader gives, or the same error, edited or not."""
    from orksync.yamls.parse import parse_documents

    text = dump_yaml(value)
    if rnd.random() < 0.5:
        i = rnd.randrange(len(text))
        text = text[:i] + rnd.choice([" ", "-", ":", '"', "\n", "x", "1", "", "#"]) + \
            text[i + 1:]
    path = tmp_path_factory.mktemp("doc") / "x.yaml"
    path.write_text(text, encoding="utf-8")
    try:
        expected = [(d.index, d.content) for d in parse_documents(text, path=path,
                                                                  display="x.yaml")]
    except LoadError as err:
        with pytest.raises(LoadError) as got:
            load_documents(path, display="x.yaml")
        assert str(got.value) == str(err)
        return
    got_docs = [(d.index, d.content) for d in load_documents(path, display="x.yaml")]
    assert len(got_docs) == len(expected)
    assert all(i == j and same(a, b) for (i, a), (j, b) in zip(got_docs, expected, strict=True))


@pytest.mark.parametrize(("text", "message"), [
    ("a:\n" + "".join(f"{'  ' * i}k{i}:\n" for i in range(1, 70)) + "  " * 70 + "v: 1\n",
     "nested deeper than 64 levels"),
    ("replicas: " + "9" * 101 + "\n", "integer longer than 100 characters"),
    ("replicas: " + "9" * 5000 + "\n", "integer longer than 100 characters"),
    ("a: 1\na: 2\n", "duplicate key"),
])
def test_a_file_in_the_emitters_form_still_meets_the_safe_loaders_bounds(
        tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "x.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(LoadError, match=message):
        load_documents(path, display="x.yaml")


def test_a_file_in_the_emitters_form_is_not_parsed_by_the_safe_loader(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from orksync.yamls import parse as yamlparse

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the safe loader was used")

    path = tmp_path / "x.yaml"
    path.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: \"1\"\n")
    monkeypatch.setattr(yamlparse, "parse_documents", refuse)
    (doc,) = load_documents(path)
    assert doc.content == {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"},
                           "data": {"a": "1"}}
    path.write_text("null\n")
    assert load_documents(path) == []


def _yaml_printable(c: str) -> bool:
    """YAML 1.2's printable set less the YAML 1.1 line breaks NEL, LS and PS."""
    n = ord(c)
    return (n in (0x09, 0x0A, 0x0D) or 0x20 <= n <= 0x7E or 0xA0 <= n <= 0xD7FF
            or 0xE000 <= n <= 0xFFFD or 0x10000 <= n <= 0x10FFFF) and \
        n not in (0x85, 0x2028, 0x2029)


def test_exactly_the_characters_outside_yamls_printable_set_are_escaped() -> None:
    """Every BMP code point and the astral boundaries: each non-printable one is written
    as a \\u or \\U escape, every printable one as itself (inside JSON string syntax)."""
    text = "".join(map(chr, range(0x10000))) + "\U00010000\U0001F600\U0010FFFF"
    dumped = dump_yaml({"k": text})
    quoted = json.dumps(text, ensure_ascii=False)
    expected = "".join(c if _yaml_printable(c) else
                       f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}"
                       for c in quoted)
    assert dumped == f"k: {expected}\n"
