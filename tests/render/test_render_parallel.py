"""The offline render in several processes (orksync.render.parallel, orksync.runtime.forked): the
same rendered directory, byte for byte and directory for directory, as the serial render,
with its errors and warnings in the same order. Forking is forced on small repositories
by lowering the per-job minimums."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest

from orksync.katalog import loader
from orksync.katalog.loader import load_repository
from orksync.model import RenderedSet
from orksync.render import parallel as directory
from orksync.render.engine import render_catalog
from orksync.render.parallel import render_to_directory
from orksync.rendered.directory import read_rendered, write_rendered
from orksync.runtime import forked
from tests.corpus import CORPUS
from tests.helpers import CRD, ROOT, write_repo
from tests.katalog.test_bad_input import CASES, Case


def fork_even_with_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fork although this process has other threads. A test run that has started the
    control plane keeps a thread for it (testbed.controlplane's spawner), idle in
    a queue, holding no lock the forked code takes; without this, every test after the
    first cluster test would run the parts one after another, proving nothing."""
    monkeypatch.setattr(forked, "can_fork", lambda: hasattr(os, "fork"))


@pytest.fixture
def forced(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Fork for any number of files and custom resources."""
    fork_even_with_threads(monkeypatch)
    monkeypatch.setattr(directory, "MIN_PER_JOB", 1)
    monkeypatch.setattr(directory, "CHUNK", 1)
    monkeypatch.setattr(loader, "MIN_FILES_PER_JOB", 1)
    monkeypatch.setattr(loader, "FILES_CHUNK", 1)
    forks: list[int] = []
    start = forked._start

    def counted(fn: object, part: object) -> tuple[int, int]:
        forks.append(1)
        return start(fn, part)  # type: ignore[arg-type]

    monkeypatch.setattr(forked, "_start", counted)
    return forks


def tree(root: Path) -> dict[str, bytes | None]:
    """Every file (its bytes) and directory (None) under root."""
    out: dict[str, bytes | None] = {}
    for top, dirs, files in os.walk(root):
        for d in dirs:
            out[os.path.relpath(os.path.join(top, d), root)] = None
        for f in files:
            out[os.path.relpath(os.path.join(top, f), root)] = Path(top, f).read_bytes()
    return out


def problems(rendered: RenderedSet) -> tuple[list[str], list[str]]:
    return [str(e) for e in rendered.errors], list(rendered.warnings)


def assert_same_render(repo: Path, tmp: Path, jobs: int, forks: list[int]) -> RenderedSet:
    """The parallel render of `repo` writes what the serial one writes; its facts."""
    expected = render_catalog(load_repository(repo))
    write_rendered(expected, tmp / "serial")
    assert not forks
    got = render_to_directory(load_repository(repo, jobs=jobs), tmp / "parallel", jobs=jobs)
    assert forks  # the parts did run in other processes
    assert tree(tmp / "parallel") == tree(tmp / "serial")
    assert problems(got.facts) == problems(expected)
    assert got.count == len(expected.objects)
    assert [p.name for p in tmp.iterdir() if p.name.startswith(".")] == []  # no temporaries
    return got.facts


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_every_bad_input_renders_the_same_in_three_processes(case: Case, tmp_path: Path,
                                                              forced: list[int]) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(CORPUS / "good", repo)
    for name, content in case.files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    facts = assert_same_render(repo, tmp_path, 3, forced)
    assert facts.errors  # the case's error came back from whichever process met it


KATALOG_SHARING = """
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: widgets}
spec:
  crds:
    widget:
      crdFile: ./crd.yaml
      allowedNamespaces: [team-*]
      operatorBox:
        onCreate:
          configMaps:
            - name: "{{ .spec.config }}"
              namespace: team-a
              data: {owner: "{{ .metadata.name }}"}
          secrets:
            - name: "{{ .metadata.name }}-creds"
              once: true
              data: {password: "{{ randomAlphanumeric 24 }}"}
          deployments:
            - name: "{{ .metadata.name }}"
              image: "{{ .spec.image }}"
"""


def sharing_repo(root: Path) -> Path:
    """Twelve widgets over three processes: some render a ConfigMap an earlier one owns
    (in another process), one renders an invalid name, one is in a namespace the guard
    refuses, one is defined twice."""
    files = {"katalog.yaml": KATALOG_SHARING, "crd.yaml": CRD}
    for i in range(12):
        config = "shared" if i in (1, 6, 11) else "Not_A_Name" if i == 8 else \
            f"w{i:02d}-config"
        namespace = "other" if i == 3 else "team-a"
        files[f"apps/w{i:02d}.yaml"] = (
            f"apiVersion: test.orksync.io/v1\nkind: Widget\nmetadata:\n  name: w{i:02d}\n"
            f"  namespace: {namespace}\nspec:\n  config: {config}\n  image: nginx\n")
    files["apps/zz-again.yaml"] = files["apps/w05.yaml"]
    # alone in its namespace, and in conflict: its namespace's directory goes too
    files["apps/zz-solo.yaml"] = (
        "apiVersion: test.orksync.io/v1\nkind: Widget\nmetadata:\n  name: solo\n"
        "  namespace: team-b\nspec:\n  config: shared\n  image: nginx\n")
    return write_repo(root, files)


def test_a_conflict_across_processes_is_decided_in_order_and_leaves_no_file(
        tmp_path: Path, forced: list[int]) -> None:
    repo = sharing_repo(tmp_path / "repo")
    facts = assert_same_render(repo, tmp_path, 3, forced)
    errors = [str(e) for e in facts.errors]
    assert sum("which Widget.test.orksync.io/team-a/w01 renders too" in e
               for e in errors) == 3, errors
    assert any("w08" in e and "configMaps[0].name" in e for e in errors), errors
    assert any("duplicate" in e for e in errors), errors
    assert [str(ref) for ref, _ in facts.skipped] == ["Widget.test.orksync.io/other/w03"]
    children = tmp_path / "parallel" / "children" / "Widget.test.orksync.io" / "team-a"
    assert sorted(p.name for p in children.iterdir()) == \
        [f"w{i:02d}" for i in range(12) if i not in (3, 6, 8, 11)]
    assert sorted(p.name for p in children.parent.iterdir()) == ["team-a"]
    assert not list((tmp_path / "parallel" / "resources").glob("*solo*"))
    # the directory reads back whole; the Secrets carry the placeholder, not a value
    rendered = read_rendered(tmp_path / "parallel")
    assert len(rendered.objects) == 1 + 8 + 8 * 3
    secrets = [o for o in rendered.objects if o.ref.kind == "Secret"]
    assert len(secrets) == 8
    assert {o.body["stringData"]["password"] for o in secrets} == \
        {"<generate:randomAlphanumeric:24>"}


def test_the_render_command_writes_the_same_with_one_job_and_with_two(tmp_path: Path) -> None:
    """Above the per-job minimums, with the real thresholds, through the command line."""
    files = {"katalog.yaml": KATALOG_SHARING, "crd.yaml": CRD}
    count = 2 * max(directory.MIN_PER_JOB, loader.MIN_FILES_PER_JOB) + 3
    for i in range(count):
        files[f"apps/w{i:03d}.yaml"] = (
            f"apiVersion: test.orksync.io/v1\nkind: Widget\nmetadata:\n  name: w{i:03d}\n"
            f"  namespace: team-a\nspec:\n  config: c{i:03d}\n  image: nginx\n")
    repo = write_repo(tmp_path / "repo", files)
    for jobs in (1, 2):
        subprocess.run([sys.executable, "-m", "orksync", "render", str(repo), "-o",
                        str(tmp_path / f"out{jobs}"), "--jobs", str(jobs)],
                       check=True, cwd=ROOT, capture_output=True)
    assert tree(tmp_path / "out1") == tree(tmp_path / "out2")
    assert len(read_rendered(tmp_path / "out2").objects) == 1 + count * 4


# -- fork_map -------------------------------------------------------------------------------


def test_fork_map_runs_the_parts_after_the_first_in_children_in_order(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fork_even_with_threads(monkeypatch)
    parts = [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]
    results = forked.fork_map(lambda part: (os.getpid(), sum(part)), parts)
    assert [total for _, total in results] == [6, 15, 24]
    pids = [pid for pid, _ in results]
    assert pids[0] == os.getpid() and len(set(pids)) == 3


def test_fork_chunks_shares_the_chunks_out_and_keeps_the_order(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fork_even_with_threads(monkeypatch)
    parent = os.getpid()
    parent_took_one = tmp_path / "parent-took-one"

    def fn(chunk: Sequence[int]) -> list[tuple[int, int]]:
        if os.getpid() == parent:
            parent_took_one.touch()
            time.sleep(0.01)  # this process is slow: the child takes more chunks
        else:
            # The child starts first and, unchecked, could take every chunk before this
            # process reaches its first (seen in CI): it waits until this process has one.
            deadline = time.monotonic() + 30
            while not parent_took_one.exists() and time.monotonic() < deadline:
                time.sleep(0.001)
        return [(x * x, os.getpid()) for x in chunk]

    results = forked.fork_chunks(fn, range(100), 2, chunk=5)
    assert [square for square, _ in results] == [x * x for x in range(100)]
    by_process = Counter(pid for _, pid in results)
    assert len(by_process) == 2 and by_process[parent] < 50, by_process


def test_fork_chunks_into_takes_results_in_order_while_the_children_still_work(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The main process hands results to `take` between its own chunks, in the items'
    order, the children's included (read from their spools as they are written): so what
    `take` does (the render's merge) runs while the children render."""
    fork_even_with_threads(monkeypatch)
    parent = os.getpid()
    parent_took_one = tmp_path / "parent-took-one"
    events: list[tuple[str, int]] = []  # this process's only

    def fn(chunk: Sequence[int]) -> list[int]:
        if os.getpid() == parent:
            events.append(("own", chunk[0]))
            parent_took_one.touch()
            time.sleep(0.02)
        else:  # as in the test above: not every chunk before this process has one
            deadline = time.monotonic() + 30
            while not parent_took_one.exists() and time.monotonic() < deadline:
                time.sleep(0.001)
            time.sleep(0.005)
        return [x * 2 for x in chunk]

    taken: list[int] = []

    def take(results: list[int]) -> None:
        events.append(("take", results[0] // 2))
        taken.extend(results)

    forked.fork_chunks_into(fn, range(200), 2, chunk=5, take=take)
    assert taken == [x * 2 for x in range(200)]
    firsts = [first for what, first in events if what == "take"]
    assert firsts == list(range(0, 200, 5))  # every chunk once, in order
    last_own = max(i for i, (what, _) in enumerate(events) if what == "own")
    # chunks were taken before this process's last chunk, not all at the end
    assert sum(1 for what, _ in events[:last_own] if what == "take") > 0, events


def test_chunks_a_dead_child_had_taken_are_done_here(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    fork_even_with_threads(monkeypatch)
    parent = os.getpid()

    def fn(chunk: Sequence[int]) -> list[int]:
        if os.getpid() != parent:
            (tmp_path / str(os.getpid())).touch()
            os._exit(3)  # a child dies with the first chunk it takes
        # This process waits until both children have taken theirs (on a loaded machine it
        # could otherwise do every chunk before a child ran), then works through the rest.
        deadline = time.monotonic() + 30
        while len(list(tmp_path.iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.001)
        return [x + 1 for x in chunk]

    assert forked.fork_chunks(fn, range(100), 3, chunk=4) == [x + 1 for x in range(100)]
    assert "2 chunk(s) taken by a forked worker" in caplog.text


def test_a_spool_is_read_while_it_is_written_and_up_to_a_record_cut_short() -> None:
    """A child appends each chunk's results to its spool as it goes, and this process reads
    them between its own chunks: a record not yet whole is read once it is; one cut short
    (the child killed while writing it) never is, nor is one that does not unpickle, and
    their chunks are redone."""
    import pickle
    import tempfile

    with tempfile.TemporaryFile() as file:
        child, reader = forked._Spool(file), forked._Spool(file)
        assert reader.read() == {}
        child.write(3, [3] * 1000)
        assert reader.read() == {3: [3] * 1000}
        data = pickle.dumps((7, [7] * 1000))
        record = forked._LENGTH.pack(len(data)) + data
        os.pwrite(child.fd, record[:5], child.end)  # the length not yet whole
        assert reader.read() == {}
        os.pwrite(child.fd, record[:len(record) // 2], child.end)  # half the record
        assert reader.read() == {}
        os.pwrite(child.fd, record, child.end)
        child.end += len(record)
        assert reader.read() == {7: [7] * 1000}
        garbage = b"not a pickle"
        os.pwrite(child.fd, forked._LENGTH.pack(len(garbage)) + garbage, child.end)
        child.end += forked._LENGTH.size + len(garbage)
        child.write(8, [8])
        child.write(9, [9] * 1000)
        os.truncate(child.fd, child.end - 100)  # the last record cut short
        assert reader.read() == {8: [8]}
        assert reader.read() == {}
        assert file.tell() == 0  # the offset the processes share was never moved


def test_chunks_come_back_through_the_pipe_where_no_spool_can_be_made(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fork_even_with_threads(monkeypatch)
    monkeypatch.setattr(forked, "_spools", lambda count: [])
    results = forked.fork_chunks(lambda chunk: [(x, os.getpid()) for x in chunk], range(64),
                                 2, chunk=4)
    assert [x for x, _ in results] == list(range(64))


def test_an_exception_in_a_child_is_raised_here(monkeypatch: pytest.MonkeyPatch) -> None:
    fork_even_with_threads(monkeypatch)
    def fn(part: list[int]) -> int:
        if part[0] == 5:
            raise ValueError(f"bad part in {os.getpid()}")
        return part[0]

    with pytest.raises(ValueError, match="bad part in") as raised:
        forked.fork_map(fn, [[1], [5]])
    assert str(raised.value) != f"bad part in {os.getpid()}"  # raised in the child


def test_a_child_that_dies_without_answering_has_its_part_redone_here(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    fork_even_with_threads(monkeypatch)
    parent = os.getpid()

    def fn(part: list[int]) -> int:
        if os.getpid() != parent:
            os._exit(3)
        return sum(part)

    assert forked.fork_map(fn, [[1, 2], [3], [4, 5]]) == [3, 3, 9]
    assert "2 of 2 forked workers ended without a result" in caplog.text


def test_no_fork_in_a_process_with_other_threads() -> None:
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert not forked.can_fork()
        pids = forked.fork_map(lambda part: os.getpid(), [[1], [2], [3]])
    finally:
        stop.set()
        thread.join()
    assert pids == [os.getpid()] * 3


def test_the_loaded_catalog_is_the_same_whatever_the_jobs(tmp_path: Path,
                                                          forced: list[int]) -> None:
    repo = sharing_repo(tmp_path / "repo")
    (repo / "apps" / "broken.yaml").write_text("a: [unclosed\n")
    one, three = load_repository(repo), load_repository(repo, jobs=3)
    assert len(forced) == 2
    assert (one.katalogs, one.crds, one.crs, one.warnings) == \
        (three.katalogs, three.crds, three.crs, three.warnings)
    assert [str(e) for e in one.errors] == [str(e) for e in three.errors]
    assert any(str(e).startswith("apps/broken.yaml:2: invalid YAML") for e in three.errors)


def test_an_exception_here_stops_and_reaps_the_children(monkeypatch: pytest.MonkeyPatch) -> None:
    fork_even_with_threads(monkeypatch)
    parent = os.getpid()
    started: list[int] = []
    start = forked._start

    def recorded(fn: object, part: object) -> tuple[int, int]:
        pid, fd = start(fn, part)  # type: ignore[arg-type]
        started.append(pid)
        return pid, fd

    monkeypatch.setattr(forked, "_start", recorded)

    def fn(part: int) -> int:
        if os.getpid() == parent:
            raise RuntimeError("here")
        time.sleep(60)  # a child still at work
        return part

    with pytest.raises(RuntimeError, match="here"):
        forked.fork_map(fn, [1, 2, 3])
    assert len(started) == 2
    for pid in started:  # reaped: no such child any more
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


@pytest.mark.parametrize(("cpu_max", "limit"), [
    ("150000 100000\n", 2), ("50000 100000\n", 1), ("max 100000\n", None), (None, None),
    ("garbage\n", None)])
def test_the_default_jobs_follow_the_cpus_and_the_cgroup_quota(
        tmp_path: Path, cpu_max: str | None, limit: int | None) -> None:
    path = tmp_path / "cpu.max"
    if cpu_max is not None:
        path.write_text(cpu_max)
    cpus = min(len(os.sched_getaffinity(0)), forked.MAX_JOBS)
    assert forked.default_jobs(str(path)) == (min(cpus, limit) if limit else cpus)
