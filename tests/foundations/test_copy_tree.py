"""`orksync.model.copy_tree`, the render's replacement for `copy.deepcopy` of loaded data:
the same result as deepcopy on the values YAML and JSON give, and on anything else."""

from __future__ import annotations

import copy
from collections import OrderedDict
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from orksync.model import copy_tree

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner,
                                                                max_size=4),
    max_leaves=30)


def _no_sharing(original: Any, copied: Any) -> None:
    if isinstance(original, dict | list):
        assert copied is not original
        items = zip(original.values(), copied.values(), strict=True) if \
            isinstance(original, dict) else zip(original, copied, strict=True)
        for a, b in items:
            _no_sharing(a, b)


@given(JSON)
def test_equals_deepcopy_and_shares_nothing_with_the_original(value: Any) -> None:
    copied = copy_tree(value)
    assert copied == copy.deepcopy(value)
    if isinstance(value, dict):
        assert list(copied) == list(value)  # insertion order kept
    _no_sharing(value, copied)


def test_a_node_that_appears_twice_is_shared_once_in_the_copy_as_deepcopy_does() -> None:
    alias = {"a": [1, 2]}  # what a YAML alias gives: one object at two places
    copied = copy_tree({"x": alias, "y": [alias, alias["a"]]})
    assert copied["x"] is copied["y"][0] and copied["x"]["a"] is copied["y"][1]
    assert copied["x"] is not alias


def test_other_types_are_copied_by_deepcopy() -> None:
    inner = [1]
    value = {"t": (inner, "s"), "o": OrderedDict(k=inner)}
    copied = copy_tree(value)
    assert copied == value and type(copied["o"]) is OrderedDict
    assert copied["t"][0] is not inner and copied["t"][0] is copied["o"]["k"]
