"""Logging set-up: plain lines or JSON lines on stderr, and the one change formatter."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

from orksync.model import Action, Change, ChangeSet


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
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


def setup_logging(*, level: str = "info", fmt: str = "plain") -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("urllib3", "kubernetes", "apscheduler", "git"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def log_change(change: Change, logger: logging.Logger) -> None:
    """One INFO line per change; unchanged objects only at DEBUG."""
    level = logging.DEBUG if change.action is Action.UNCHANGED else \
        logging.ERROR if change.action is Action.FAILED else logging.INFO
    if not logger.isEnabledFor(level):  # a resync: a thousand unchanged, none logged
        return
    ref = str(change.ref)
    text = f"{change.action.value} {ref}"
    if change.message:
        text += f": {change.message}"
    logger.log(level, text, extra={"fields": {"action": change.action.value, "object": ref}})


def summary_line(verb: str, changes: ChangeSet, *, revision: str = "", seconds: float,
                 errors: int = 0) -> str:
    rev = f" rev={revision[:7]}" if revision else ""
    err = f" errors={errors}" if errors else ""
    return f"{verb}{rev} {changes.summary()}{err} in {seconds:.1f}s"
