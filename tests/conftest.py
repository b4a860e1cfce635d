"""Shared test set-up.

Cluster tests (marker `cluster`) run against the real local control plane started once per
session (tests/cluster_fixtures.py). With CI=true a missing control plane fails the run,
and a run in which no cluster test passed fails too, so a green CI always means the
cluster tests executed.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed.gitdaemon import GitDaemon
from tests import leakscan
from tests.cluster_fixtures import *  # noqa: F403
from tests.kind_cases import cluster, kube  # noqa: F401  (Widget Katalog cluster tests)

_cluster_passed = 0
LEAK_SCAN = "test_zz_leak_scan.py"


def pytest_configure(config: pytest.Config) -> None:
    leakscan.install()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The suite-wide leak scan runs after every other test."""
    items.sort(key=lambda item: item.path.name == LEAK_SCAN)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    global _cluster_passed
    leakscan.record_sections(report.sections)
    if report.when == "call" and report.passed and "cluster" in report.keywords:
        _cluster_passed += 1


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if leakscan.COLLECTED.summary:
        terminalreporter.write_line(leakscan.COLLECTED.summary)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if os.environ.get("CI") != "true" or exitstatus != 0:
        return
    selected = [i for i in session.items if i.get_closest_marker("cluster")]
    if selected and _cluster_passed == 0:
        session.exitstatus = 1
        print("\nCI: no cluster test passed; the control plane tests must run in CI")


@pytest.fixture
def orkestra_examples() -> Path:
    """../shared/examples/orkestra: skipped locally when absent, a failure in CI."""
    from tests.helpers import ORKESTRA_EXAMPLES, need_orkestra_examples

    need_orkestra_examples()
    return ORKESTRA_EXAMPLES


@pytest.fixture
def git_daemon(tmp_path: Path) -> Iterator[tuple[Path, str, GitDaemon]]:
    """`git daemon` on 127.0.0.1 serving one empty repository, `platform` (branch main), for
    the agent processes of tests/agent and tests/sync: (its working tree, its URL, the
    daemon)."""
    base = tmp_path / "served"
    repo = base / "platform"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    with GitDaemon(base) as daemon:
        yield repo, daemon.url("platform"), daemon
