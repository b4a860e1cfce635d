"""Logging set-up: plain lines or JSON lines on stderr, and the one change formatter."""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Iterable
from typing import IO, Any

from orksync.model import Action, Change, ChangeSet, short_revision

# Library loggers kept to warnings and errors: their debug output is request-level noise
# (and the Kubernetes client's would carry response bodies, Secrets among them).
_QUIET = ("urllib3", "kubernetes", "git")
# The scheduler's warnings that are routine for the agent: a sync that outlasts the
# interval makes the next run be skipped (one instance at a time, by design), and a run
# that starts late on a busy machine is reported as missed. Matched on the message
# template (`record.msg`), which APScheduler 3 logs on `apscheduler.scheduler` and
# `apscheduler.executors.<alias>`.
_SCHEDULER_ROUTINE = ("maximum number of running instances", "was missed by")


def timestamp(record: logging.LogRecord) -> str:
    """The record's time, ISO 8601 in UTC with milliseconds: 2026-12-01T21:40:03.123Z."""
    return (time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "time": timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        extra = getattr(record, "fields", None)
        if isinstance(extra, dict):
            doc.update(extra)
        if record.exc_info:
            doc["error"] = self.formatException(record.exc_info)
        return json.dumps(doc, separators=(",", ":"))


class PlainFormatter(logging.Formatter):
    """The message, after the record's timestamp when `timestamps` is set."""

    def __init__(self, *, timestamps: bool) -> None:
        super().__init__("%(message)s")
        self.timestamps = timestamps

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        return f"{timestamp(record)} {text}" if self.timestamps else text


class SchedulerChatter(logging.Filter):
    """Demotes APScheduler's routine records to DEBUG and lets them through only when the
    configured level shows DEBUG: its INFO lines (job added, running, executed) and the
    routine warnings of `_SCHEDULER_ROUTINE`. Its other warnings and errors pass as they
    are. A handler filter, because a filter on a logger does not see its children's
    records."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        if not (record.name == "apscheduler" or record.name.startswith("apscheduler.")):
            return True
        routine = record.levelno < logging.WARNING or (
            record.levelno == logging.WARNING and isinstance(record.msg, str)
            and any(text in record.msg for text in _SCHEDULER_ROUTINE))
        if routine:
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return record.levelno >= self.level


def setup_logging(*, level: str = "info", fmt: str = "plain", timestamps: bool = False,
                  stream: IO[str] | None = None) -> None:
    """One handler on the root logger, writing to `stream` (stderr). JSON lines always
    carry a timestamp; plain lines only with `timestamps` (the agent's)."""
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(PlainFormatter(timestamps=timestamps))
    numeric = logging.getLevelName(level.upper())
    handler.addFilter(SchedulerChatter(numeric))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric)
    for noisy in _QUIET:
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # APScheduler's own records below WARNING are never shown unless DEBUG is asked for;
    # SchedulerChatter then shows them, demoted, with its routine warnings.
    logging.getLogger("apscheduler").setLevel(
        logging.DEBUG if numeric <= logging.DEBUG else logging.WARNING)


def log_change(change: Change, logger: logging.Logger) -> None:
    """One INFO line per change; unchanged objects only at DEBUG. The line is the action,
    the object and, when it says more than the action, the change's detail."""
    level = logging.DEBUG if change.action is Action.UNCHANGED else \
        logging.ERROR if change.action is Action.FAILED else logging.INFO
    if not logger.isEnabledFor(level):  # a resync: a thousand unchanged, none logged
        return
    ref = str(change.ref)
    text = f"{change.action.value} {ref}"
    detail = change.detail
    if detail:
        text += f": {detail}"
    logger.log(level, text, extra={"fields": {"action": change.action.value, "object": ref}})


def log_problems(warnings: Iterable[str], errors: Iterable[object],
                 logger: logging.Logger) -> None:
    """A load's or render's problems: the errors first, then the warnings, some of which
    are their consequences and say so ("reported above")."""
    for err in errors:
        logger.error("error: %s", err)
    for warning in warnings:
        logger.warning("warning: %s", warning)


def summary_line(verb: str, changes: ChangeSet, *, revision: str = "", seconds: float,
                 errors: int = 0) -> str:
    rev = f" rev={short_revision(revision)}" if revision else ""
    err = f" errors={errors}" if errors else ""
    return f"{verb}{rev} {changes.summary()}{err} in {seconds:.1f}s"
