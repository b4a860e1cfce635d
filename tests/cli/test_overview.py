"""The pure parts of `orksync status` / `orksync tree` (orksync.lifecycle.overview)."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime

import pytest

from orksync.errors import UsageError
from orksync.lifecycle.overview import (
    ChildRow,
    ResourceRow,
    Tree,
    age,
    parse_target,
    status_table,
    tree_table,
)
from orksync.model import ObjRef

NOW = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.mark.parametrize(("created", "expected"), [
    ("2025-01-02T03:04:00Z", "5s"), ("2025-01-02T03:02:05Z", "2m"),
    ("2025-01-02T02:04:05Z", "1h"), ("2025-01-01T03:04:05Z", "1d"),
    ("2024-12-01T03:04:05Z", "32d"), ("2023-01-01T00:00:00Z", "2y"), ("", "-"),
])
def test_age_is_kubectls_short_form(created: str, expected: str) -> None:
    assert age(created, NOW) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("Widget/ns/w", ("Widget", "ns", "w")), ("Widget.example.io/w", ("Widget.example.io", "", "w")),
])
def test_parse_target(text: str, expected: tuple[str, str, str]) -> None:
    assert parse_target(text) == expected


@pytest.mark.parametrize("text", ["Widget", "Widget//w", "a/b/c/d", "/ns/w"])
def test_a_malformed_target_is_a_usage_error(text: str) -> None:
    with pytest.raises(UsageError, match="expected KIND/NAMESPACE/NAME"):
        parse_target(text)


CR = ObjRef(api_version="example.io/v1", kind="App", namespace="team-a", name="shop")
ROW = ResourceRow(ref=CR, root="default", ready="False", health="InProgress",
                  revision="0123456789abcdef", created="2025-01-02T03:00:05Z",
                  message="Deployment/team-a/shop: InProgress: ready: 0/2",
                  children=(ChildRow(ObjRef(api_version="apps/v1", kind="Deployment",
                                            namespace="team-a", name="shop"),
                                     "InProgress", "ready: 0/2"),
                            ChildRow(ObjRef(api_version="v1", kind="Service",
                                            namespace="team-a", name="shop"), "Current", "")))


def test_the_status_table_is_aligned_without_trailing_blanks() -> None:
    assert status_table([ROW], NOW) == (
        "KIND             NAMESPACE   NAME   SYNC ROOT   READY   HEALTH       REVISION       "
        "AGE   MESSAGE\n"
        "App.example.io   team-a      shop   default     False   InProgress   0123456789ab   "
        "4m    Deployment/team-a/shop: InProgress: ready: 0/2\n")


def test_the_tree_draws_the_children_under_their_custom_resource() -> None:
    lines = tree_table(Tree(ROW), NOW).splitlines()
    assert lines[1].startswith("App.example.io/team-a/shop")
    assert lines[2].startswith("├── Deployment/team-a/shop")
    assert lines[3].startswith("└── Service/team-a/shop")
    assert lines[1].split()[:2] == ["App.example.io/team-a/shop", "default"]
    assert lines[3].split() == ["└──", "Service/team-a/shop", "Current"]


def test_a_created_custom_resource_is_drawn_with_its_children_indented_beneath_it() -> None:
    ns = "team-a"
    redis = ChildRow(ObjRef(api_version="apps/v1", kind="Deployment", namespace=ns,
                            name="dev-cache-redis"), "InProgress", "ready: 0/2")
    cache = ChildRow(ObjRef(api_version="nest.io/v1", kind="CacheCluster", namespace=ns,
                            name="dev-cache"), "InProgress", "Deployment: ready: 0/2",
                     children=(redis,), ready="False")
    config = ChildRow(ObjRef(api_version="v1", kind="ConfigMap", namespace=ns, name="dev"),
                      "Current", "")
    row = ResourceRow(ref=ObjRef(api_version="nest.io/v1", kind="AppEnvironment",
                                 namespace=ns, name="dev"), root="apps", ready="False",
                      health="InProgress", revision="", created="", message="m",
                      children=(cache, config))
    lines = tree_table(Tree(row), NOW).splitlines()
    assert len(lines) == 5
    assert lines[2].startswith("├── CacheCluster") and lines[4].startswith("└── ConfigMap")
    assert lines[3].startswith("│   └── Deployment/team-a/dev-cache-redis")
    assert lines[2].split()[2:4] == ["False", "InProgress"]
    doc = Tree(row).to_dict(NOW)
    assert doc["children"][0]["ready"] == "False"
    assert doc["children"][0]["children"][0]["object"] == str(redis.ref)
    assert "children" not in doc["children"][1]  # a plain child: as before


def test_the_help_explains_revision_health_and_sync_root() -> None:
    for command in ("status", "tree"):
        done = subprocess.run([sys.executable, "-m", "orksync", command, "--help"],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0
        text = " ".join(done.stdout.split())
        assert "REVISION is the revision at which the custom resource was last applied, " \
            "i.e. its last change" in text
        assert "Missing" in text and "SYNC ROOT" in text
