"""Suite-wide secret leak scan: every generated value the whole test run wrote into the
cluster is looked for in everything else the run produced.

Where the values come from: the session's kube-apiserver writes an audit log
(`ControlPlane(audit_log=...)`, policy `AUDIT_POLICY`): Secret writes with their responses,
every other write with its request body. A generated value is a key of an orksync-managed
Secret that its `orksync.io/generators` annotation names, or a TLS private key.

Where they must not be (the haystack):

* every other write the API server received: objects of every kind, status subresources
  (custom resource status) and Events;
* every file under the session's pytest base temp directory: rendered directories, agent
  state, repositories, anything a test wrote;
* the output every test phase left to pytest's capture (stdout, stderr, log records);
* stdout and stderr of every `subprocess.run` the suite made (orksync CLI runs, many at
  debug level, `orksync diff`, `orksync rotate`, git, kubectl).

The scan itself is `tests/test_zz_leak_scan.py`, moved to the end of the run.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

GENERATORS = "orksync.io/generators"
TLS_ANNOTATION = "orksync.io/tls"
CA_OF_ANNOTATION = "orksync.io/ca-of"  # the CA Secret of a tls: Secret (its ca.key)
PRIVATE_TLS_KEYS = ("tls.key", "ca.key")
MIN_LENGTH = 12  # shorter values could match random text by chance; they are counted, not scanned
MAX_FILE = 64 << 20


@dataclass
class Collected:
    """What the run produced outside the cluster, gathered as it happens."""

    outputs: list[str] = field(default_factory=list)
    subprocess_runs: int = 0
    summary: str = ""  # the scan's result line, printed at the end of the run (conftest)


COLLECTED = Collected()
_original_run = subprocess.run


def _recording_run(*args: Any, **kwargs: Any) -> Any:
    result = _original_run(*args, **kwargs)
    COLLECTED.subprocess_runs += 1
    for stream in (getattr(result, "stdout", None), getattr(result, "stderr", None)):
        if isinstance(stream, bytes):
            COLLECTED.outputs.append(stream.decode("utf-8", "replace"))
        elif isinstance(stream, str):
            COLLECTED.outputs.append(stream)
    return result


def install() -> None:
    """Record the output of every `subprocess.run` from now on."""
    subprocess.run = _recording_run  # type: ignore[assignment]


def record_sections(sections: list[tuple[str, str]]) -> None:
    COLLECTED.outputs.extend(text for _, text in sections if text)


@dataclass(frozen=True)
class Secret:
    where: str  # namespace/name, for the report: never the value
    key: str
    value: str


def generated_values(audit_log: Path) -> tuple[list[Secret], int]:
    """Every generated value written to the cluster (long enough to scan), and how many
    shorter ones were skipped."""
    found: dict[tuple[str, str, str], Secret] = {}
    short = 0
    for event in _audit_events(audit_log):
        if (event.get("objectRef") or {}).get("resource") != "secrets":
            continue
        for body in (event.get("responseObject"), event.get("requestObject")):
            for secret in _generated(body):
                if len(secret.value) < MIN_LENGTH:
                    short += 1
                else:
                    found[(secret.where, secret.key, secret.value)] = secret
    return list(found.values()), short


def _generated(body: Any) -> Iterator[Secret]:
    if not isinstance(body, dict) or body.get("kind") != "Secret":
        return
    meta = body.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    keys: set[str] = set()
    with contextlib.suppress(ValueError):
        keys.update(json.loads(annotations.get(GENERATORS) or "{}"))
    if annotations.get(TLS_ANNOTATION) or annotations.get(CA_OF_ANNOTATION):
        keys.update(PRIVATE_TLS_KEYS)  # a TLS Secret, or the CA Secret beside it
    data = body.get("data") or {}
    where = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    for key in sorted(keys & set(data)):
        try:
            value = base64.b64decode(data[key], validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError, TypeError):
            continue
        if value.startswith("<generate:") and value.endswith(">"):
            continue  # a placeholder (`orksync diff` dry-runs the rendered Secret): no value
        yield Secret(where, key, value)


def other_writes(audit_log: Path) -> Iterator[str]:
    """The request body of every write that is not a Secret write, as text."""
    for event in _audit_events(audit_log):
        if (event.get("objectRef") or {}).get("resource") == "secrets":
            continue
        body = event.get("requestObject")
        if body is not None:
            ref = event.get("objectRef") or {}
            yield f"{event.get('verb')} {ref.get('resource')}/{ref.get('subresource', '')} " \
                  f"{ref.get('namespace', '')}/{ref.get('name', '')}\n{json.dumps(body)}"


def _audit_events(audit_log: Path) -> Iterator[dict[str, Any]]:
    with audit_log.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:
                continue  # a line cut by a kill of kube-apiserver
            if isinstance(event, dict):
                yield event


def files(root: Path, skip: Path) -> Iterator[tuple[str, str]]:
    """(path, text) of every regular file under root except `skip`, binary-safe."""
    for path in sorted(root.rglob("*")):
        try:
            if path == skip or not path.is_file() or path.is_symlink() \
                    or path.stat().st_size > MAX_FILE:
                continue
            yield str(path), path.read_bytes().decode("utf-8", "replace")
        except OSError:
            continue


def needles(secret: Secret) -> list[str]:
    """The forms a leaked value would take: itself, base64 of it and, for PEM keys, a
    distinctive line from the middle (a partial leak)."""
    forms = [secret.value, base64.b64encode(secret.value.encode()).decode()]
    lines = [line for line in secret.value.splitlines() if len(line) >= 40]
    if len(lines) > 2:
        forms.append(lines[len(lines) // 2])
    return forms
