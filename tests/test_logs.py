"""orksync.logs.log_change: the one line per change, in plain text and as JSON fields."""

from __future__ import annotations

import io
import json
import logging

from orksync.logs import JsonFormatter, log_change
from orksync.model import Action, Change, ObjRef


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
