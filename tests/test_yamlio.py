"""The YAML emitter: deterministic, and read back to the same value."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from orksync.yamlio import dump_yaml

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12),
                    st.floats(allow_nan=False, allow_infinity=True), st.text(max_size=20))
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


def test_dumping_is_byte_for_byte_stable() -> None:
    value = {"metadata": {"name": "x", "labels": {"b": "2", "a": "1"}}, "spec": {"l": [1, {}]}}
    assert dump_yaml(value) == dump_yaml(value)
    assert dump_yaml(value).index("    b:") < dump_yaml(value).index("    a:")  # as inserted
