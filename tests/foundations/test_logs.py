"""orksync.runtime.logs: the one line per change, in plain text and as JSON fields; the timestamps;
the scheduler's chatter kept out of the default output."""

from __future__ import annotations

import io
import json
import logging
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from apscheduler.events import EVENT_JOB_MAX_INSTANCES
from apscheduler.schedulers.background import BackgroundScheduler

from orksync.model import Action, Change, ObjRef, WritePolicy
from orksync.render.builders import BuildContext
from orksync.render.builders.secret import build_secret
from orksync.runtime.logs import JsonFormatter, PlainFormatter, log_change, setup_logging, timestamp
from orksync.secrets.plan import plan_secret
from orksync.secrets.random import CryptoRandom


def _logged(change: Change, level: int = logging.INFO) -> list[str]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("orksync.test-logs")
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(level)
    log_change(change, logger)
    return stream.getvalue().splitlines()


def test_a_change_is_one_line_naming_action_and_object() -> None:
    ref = ObjRef(api_version="demo.io/v1", kind="Site", namespace="ns", name="a")
    [line] = _logged(Change(ref=ref, action=Action.FAILED, message="no: why"))
    doc = json.loads(line)
    assert (doc["level"], doc["msg"]) == ("error", "failed Site.demo.io/ns/a: no: why")
    assert (doc["action"], doc["object"]) == ("failed", "Site.demo.io/ns/a")
    [line] = _logged(Change(ref=ObjRef(api_version="v1", kind="Namespace", name="n"),
                            action=Action.CREATED))
    assert json.loads(line)["msg"] == "created Namespace/n"


def test_unchanged_objects_are_logged_only_at_debug() -> None:
    change = Change(ref=ObjRef(api_version="v1", kind="ConfigMap", namespace="d", name="c"),
                    action=Action.UNCHANGED)
    assert _logged(change) == []
    [line] = _logged(change, logging.DEBUG)
    assert json.loads(line)["object"] == "ConfigMap/d/c"


def _planned_reason(entry: dict[str, Any], live: dict[str, Any] | None = None) -> str:
    """The reason the real Secret planner gives for writing ENTRY (a Katalog secret entry)."""
    ctx = BuildContext(cr_name="shop", cr_namespace="default", owner_key="shop",
                       name="shop-static", namespace="default",
                       labels={"app.kubernetes.io/managed-by": "orksync"})
    built = build_secret(entry, ctx)
    plan = plan_secret(built.body, built.directives, live, policy=WritePolicy.APPLY,
                       now=datetime(2030, 1, 2, tzinfo=UTC), random=CryptoRandom())
    return plan.reason


def _plain(change: Change) -> str:
    stream = io.StringIO()
    logger = logging.getLogger("orksync.test-logs-plain")
    handler = logging.StreamHandler(stream)
    handler.setFormatter(PlainFormatter(timestamps=False))
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(logging.INFO)
    log_change(change, logger)
    [line] = stream.getvalue().splitlines()
    return line


def test_a_change_line_does_not_repeat_its_action() -> None:
    """`created Secret/default/shop-static: created` said the action twice; the detail is
    printed only when it adds something, whatever the planner's reason opens with."""
    ref = ObjRef(api_version="v1", kind="Secret", namespace="default", name="shop-static")
    static = _planned_reason({"data": {"user": "root"}})
    assert _plain(Change(ref=ref, action=Action.CREATED, message=static)) == \
        "created Secret/default/shop-static"
    assert _plain(Change(ref=ref, action=Action.CREATED, message=static + " (dry run)")) == \
        "created Secret/default/shop-static: dry run"
    generated = _planned_reason({"data": {"password": "<generate:randomAlphanumeric:8>"}})
    assert _plain(Change(ref=ref, action=Action.CREATED, message=generated)) == \
        "created Secret/default/shop-static: generated password"
    assert _plain(Change(ref=ref, action=Action.CONFIGURED,
                         message="applied; generated values kept")) == \
        "configured Secret/default/shop-static: generated values kept"
    assert _plain(Change(ref=ref, action=Action.CONFIGURED, message="applied")) == \
        "configured Secret/default/shop-static"
    # a detail that is more than the action's word is kept whole
    assert _plain(Change(ref=ref, action=Action.CONFIGURED,
                         message="rotated in place (age 91d >= 90d)")) == \
        "configured Secret/default/shop-static: rotated in place (age 91d >= 90d)"
    assert _plain(Change(ref=ref, action=Action.FAILED, message="created by someone else")) == \
        "failed Secret/default/shop-static: created by someone else"


ISO_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


@pytest.fixture
def root_logging() -> Iterator[io.StringIO]:
    """A stream for setup_logging, and the root and library loggers as they were after."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level,
             {n: logging.getLogger(n).level for n in ("apscheduler", "urllib3", "kubernetes",
                                                      "git")})
    yield io.StringIO()
    root.handlers[:], root.level = saved[0], saved[1]
    for name, level in saved[2].items():
        logging.getLogger(name).setLevel(level)


def test_both_log_formats_carry_an_iso_utc_millisecond_timestamp(
        root_logging: io.StringIO) -> None:
    log = logging.getLogger("orksync.test-logs-stamp")
    setup_logging(fmt="plain", timestamps=True, stream=root_logging)
    log.info("created Namespace/n")
    setup_logging(fmt="json", stream=root_logging)
    log.info("created Namespace/m")
    plain, as_json = root_logging.getvalue().splitlines()
    stamp, _, message = plain.partition(" ")
    assert ISO_MS.match(stamp), plain
    assert message == "created Namespace/n"
    doc = json.loads(as_json)
    assert ISO_MS.match(doc["time"]) and doc["msg"] == "created Namespace/m"
    # the stamp is the record's own time, in UTC
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "m", None, None)
    record.created, record.msecs = 0.5, 500.0
    assert timestamp(record) == "1970-01-01T00:00:00.500Z"


def test_one_shot_commands_log_plain_lines_without_timestamps(
        root_logging: io.StringIO) -> None:
    setup_logging(fmt="plain", stream=root_logging)
    logging.getLogger("orksync.test-logs-stamp").info("sync created=1")
    assert root_logging.getvalue() == "sync created=1\n"


def test_the_agent_stamps_its_plain_lines_and_a_one_shot_command_does_not(
        tmp_path: Path) -> None:
    """Both processes stop at the same error (no kubeconfig) and log it once: the agent's
    line opens with its timestamp, the sync's is the bare message."""
    missing = str(tmp_path / "no-kubeconfig")
    lines = {}
    for command in (["agent", "--repo-url", "file:///nowhere", "--listen", "127.0.0.1:0",
                     "--state-dir", str(tmp_path / "state")],
                    ["sync", str(tmp_path), "--once"]):
        proc = subprocess.run([sys.executable, "-m", "orksync", *command,
                               "--kubeconfig", missing], capture_output=True, text=True,
                              timeout=120, check=False)
        assert proc.returncode == 1, proc.stderr
        [lines[command[0]]] = proc.stderr.splitlines()
    error = f"error: {missing}: the kubeconfig file does not exist"
    assert lines["sync"] == error
    stamp, _, rest = lines["agent"].partition(" ")
    assert ISO_MS.match(stamp) and rest == error, lines["agent"]


def _log_of_a_skipped_run(level: str) -> list[dict[str, Any]]:
    """The JSON lines logged at LEVEL while a real BackgroundScheduler, one instance at a
    time as the agent runs its jobs, skips a run because the first one still blocks."""
    stream = io.StringIO()
    setup_logging(level=level, fmt="json", stream=stream)
    release, started, skipped = threading.Event(), threading.Event(), threading.Event()

    def job() -> None:
        started.set()
        release.wait(60)

    scheduler = BackgroundScheduler(timezone="UTC")
    scheduler.add_listener(lambda event: skipped.set(), EVENT_JOB_MAX_INSTANCES)
    scheduler.add_job(job, "interval", seconds=0.05, max_instances=1, coalesce=True,
                      next_run_time=datetime.now(UTC))
    scheduler.start()
    try:
        assert started.wait(60), "the job never ran"
        assert skipped.wait(60), "the scheduler never skipped a run"
    finally:
        release.set()
        scheduler.shutdown(wait=True)
    return [json.loads(line) for line in stream.getvalue().splitlines()]


@pytest.mark.parametrize("level", ["info", "debug"])
def test_a_skipped_scheduler_run_is_not_in_the_default_log(
        root_logging: io.StringIO, level: str) -> None:
    """APScheduler logs the skipped run at WARNING on `apscheduler.scheduler`. At the
    default level neither it nor any other scheduler line reaches the output; at debug it
    is shown, as debug."""
    lines = _log_of_a_skipped_run(level)
    chatter = [doc for doc in lines if "maximum number of running instances" in doc["msg"]]
    if level == "info":
        assert not [doc for doc in lines if doc["logger"].startswith("apscheduler")], lines
    else:
        assert chatter, lines
        assert {doc["level"] for doc in chatter} == {"debug"}, chatter
