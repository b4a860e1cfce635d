"""orksync.model's quick_init: the same dataclass, built faster."""

from __future__ import annotations

import dataclasses
import inspect
import pickle

import pytest

from orksync.model import (
    Action,
    Change,
    ChangeSet,
    ObjRef,
    Origin,
    RenderedObject,
    WritePolicy,
    quick_init,
)
from orksync.render.builders import BuildContext

QUICK = (ObjRef, Origin, RenderedObject, Change, BuildContext)


@pytest.mark.parametrize("cls", QUICK, ids=lambda c: c.__name__)
def test_the_quick_init_takes_what_the_dataclass_declares(cls: type) -> None:
    fields = dataclasses.fields(cls)
    params = list(inspect.signature(cls).parameters.values())
    assert [p.name for p in params] == [f.name for f in fields]
    assert {p.kind for p in params} == {inspect.Parameter.KEYWORD_ONLY}
    for p, f in zip(params, fields, strict=True):
        if f.default is not dataclasses.MISSING:
            assert p.default == f.default
        elif f.default_factory is dataclasses.MISSING:
            assert p.default is inspect.Parameter.empty, f.name  # required stays required
    required = [f.name for f in fields if f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING]
    with pytest.raises(TypeError, match=required[-1]):
        cls()


def test_quick_init_sets_every_field_and_defaults_as_the_dataclass_does() -> None:
    ref = ObjRef(api_version="v1", kind="ConfigMap", namespace="ns", name="a")
    assert (ref.api_version, ref.kind, ref.namespace, ref.name) == ("v1", "ConfigMap", "ns", "a")
    assert ObjRef(api_version="v1", kind="Namespace", name="ns").namespace == ""
    origin = Origin(file="crs/a.yaml", entry="onCreate.configMaps[0]")
    assert (origin.katalog, origin.crd, origin.cr) == ("", "", "")
    one, two = (RenderedObject(ref=ref, body={}, policy=WritePolicy.APPLY, origin=origin,
                               stage=3) for _ in range(2))
    assert one.owner is None and one.directives == {}
    assert one.directives is not two.directives  # a fresh default per object
    given = {"forceConflict": False}
    assert RenderedObject(ref=ref, body={}, policy=WritePolicy.APPLY, origin=origin,
                          stage=3, directives=given).directives is given
    # the dataclass's own behaviour around it is unchanged
    with pytest.raises(dataclasses.FrozenInstanceError):
        ref.name = "b"  # type: ignore[misc]
    assert dataclasses.replace(ref, name="b") == ObjRef(api_version="v1", kind="ConfigMap",
                                                         namespace="ns", name="b")
    assert pickle.loads(pickle.dumps(one)) == one
    assert sorted([dataclasses.replace(ref, name="b"), ref]) == \
        [ref, dataclasses.replace(ref, name="b")]
    assert hash(ref) == hash(ObjRef(api_version="v1", kind="ConfigMap", namespace="ns", name="a"))


@pytest.mark.parametrize("options", [{"slots": True, "kw_only": True},
                                     {"frozen": True, "kw_only": True},
                                     {"frozen": True, "slots": True}])
def test_quick_init_refuses_a_class_it_would_build_wrong(options: dict[str, bool]) -> None:
    @dataclasses.dataclass(**options)
    class Loose:
        a: str

    with pytest.raises(TypeError, match="quick_init: Loose"):
        quick_init(Loose)


def test_the_summary_counts_every_action_and_waiting_only_when_an_object_waits() -> None:
    ref = ObjRef(api_version="v1", kind="ConfigMap", namespace="ns", name="c")
    changes = ChangeSet()
    changes.add(ref, Action.CREATED)
    assert changes.summary() == \
        "created=1 configured=0 unchanged=0 skipped=0 deleted=0 failed=0"
    changes.add(ref, Action.WAITING, "being deleted (finalizers: x)")
    assert changes.summary() == \
        "created=1 configured=0 unchanged=0 skipped=0 waiting=1 deleted=0 failed=0"
