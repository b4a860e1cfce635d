"""The cyclic collector is paused around load, render, write and the read of a rendered
directory (orksync.runtime.gcpause): the pause itself, and the condition that makes it safe, that
these stages leave no cyclic garbage growing with the repository."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from orksync.katalog.loader import load_repository
from orksync.render.engine import render_catalog
from orksync.rendered.directory import read_rendered, write_rendered
from orksync.runtime.gcpause import gc_paused, paused_gc
from tests.helpers import CRD, KATALOG, widget, write_repo


@pytest.fixture
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_the_collector_is_off_inside_and_back_on_after(collector_on: None) -> None:
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():  # nested: the inner end does not switch it on
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_an_error_inside_still_switches_it_back_on(collector_on: None) -> None:
    with pytest.raises(RuntimeError), paused_gc():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    was = gc.isenabled()
    gc.disable()
    try:
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        if was:
            gc.enable()


def test_overlapping_pauses_in_threads_end_with_the_last(collector_on: None) -> None:
    inside, release = threading.Event(), threading.Event()

    @gc_paused
    def hold() -> None:
        inside.set()
        release.wait(10)

    worker = threading.Thread(target=hold)
    worker.start()
    assert inside.wait(10)
    with paused_gc():
        pass
    assert not gc.isenabled()  # the thread's pause is still active
    release.set()
    worker.join(10)
    assert gc.isenabled()


def _cyclic_garbage_of_each_stage(root: Path, crs: int) -> dict[str, int]:
    """Objects the cyclic collector finds after load, render, write and read back of `crs`
    widgets, with the collector off throughout (as during the pause)."""
    files = {"crd.yaml": CRD, "katalog.yaml": KATALOG}
    files.update({f"crs/w{i}.yaml": widget(f"w{i}", image="nginx", replicas=i % 3,
                                            port=8080) for i in range(crs)})
    repo = write_repo(root / "repo", files)
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        catalog = load_repository(repo)
        found = {"load": gc.collect()}
        rendered = render_catalog(catalog)
        found["render"] = gc.collect()
        write_rendered(rendered, root / "out")
        found["write"] = gc.collect()
        read_rendered(root / "out")
        found["read"] = gc.collect()
    finally:
        if was:
            gc.enable()
    assert rendered.ok and len(rendered.objects) == 1 + 3 * crs
    return found


def test_no_stage_leaves_cyclic_garbage_that_grows_with_the_repository(tmp_path: Path) -> None:
    """What makes the pause safe: a stage that left a reference cycle per file or per
    custom resource (as the loader did with a new parser class per file) would pile up
    garbage while the collector is off."""
    small = _cyclic_garbage_of_each_stage(tmp_path / "small", 5)
    large = _cyclic_garbage_of_each_stage(tmp_path / "large", 60)
    for stage in small:
        assert large[stage] - small[stage] < 50, (stage, small, large)
